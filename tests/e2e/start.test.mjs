// `npm start` (the README's command to run the service locally: wrangler dev,
// real workerd, local KV and Durable Objects) serves the API and the
// Explorer, and keeps serving /explorer while the build runs again beside it
// (`npm run build`, or wrangler's own [build] hook): the assets directory it
// serves is updated in place, never removed and re-created under it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const STATE = mkdtempSync(path.join(tmpdir(), "selfcap-start-"));
let server;
let base;
let fixture; // the loopback ddv1 feed npm start serves beside the Worker
let output = "";

/** A free loopback port. */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

before(async () => {
  const port = await freePort();
  const fixturePort = await freePort();
  base = `http://127.0.0.1:${port}`;
  fixture = `http://127.0.0.1:${fixturePort}`;
  server = spawn("npm", ["start", "--", "--persist-to", STATE], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), WATCH_FIXTURE_PORT: String(fixturePort), WRANGLER_SEND_METRICS: "false" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  server.stdout.on("data", (d) => (output += d));
  server.stderr.on("data", (d) => (output += d));
  const deadline = Date.now() + 120_000;
  for (;;) {
    const r = await fetch(`${base}/explorer`).catch(() => null);
    if (r?.status === 200) break;
    if (Date.now() > deadline || server.exitCode !== null) {
      throw new Error(`npm start did not serve /explorer:\n${output.slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
});

after(() => {
  // The whole process group: npm, wrangler and workerd.
  try {
    process.kill(-server.pid, "SIGTERM");
  } catch {}
  rmSync(STATE, { recursive: true, force: true });
});

test("npm start serves the API and the Explorer on loopback", async () => {
  const unknown = await fetch(`${base}/self/${"0".repeat(64)}/head.json`);
  assert.equal(unknown.status, 404);
  assert.equal((await unknown.json()).error, "capsule_not_found");
  const page = await fetch(`${base}/explorer`);
  assert.equal(page.status, 200);
  assert.match(await page.text(), /<html/i);
});

test("npm start reads the fixture world feed offline: the cron trigger refreshes from it, and a free agent is pointed at it", async () => {
  await fetch(`${fixture}/_fixture/requests/reset`, { method: "POST" });
  const run = await fetch(`${base}/__scheduled?cron=${encodeURIComponent("*/5 * * * *")}`);
  assert.equal(run.status, 200, await run.text());
  const paths = (await (await fetch(`${fixture}/_fixture/requests`)).json()).map((r) => r.path);
  assert.equal(paths[0], "/diff/head.json");
  assert.ok(paths.includes("/diff/sources.json"), paths.join(" "));
  assert.ok(paths.some((p) => p.startsWith("/diff/source/")), "the batches were read");
  // A free agent with a watch: told to upgrade, or to filter the loopback feed itself.
  const crypto = await import("node:crypto");
  const { publicKey, privateKey } = crypto.generateKeyPairSync("ed25519");
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x, "base64url");
  const id = crypto.createHash("sha256").update(raw).digest("hex");
  const { exampleCapsule, envelope } = await import("./helpers.mjs");
  const agent = { privateKey, publicKeyRaw: raw, publicHex: raw.toString("hex"), agentId: id };
  const capsule = exampleCapsule(id, { watch: { tags: ["cloud-status"] } });
  const put = await fetch(`${base}/self/${id}/capsule.json`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(envelope(agent, 1, capsule)),
  });
  assert.equal(put.status, 200, await put.text());
  const head = await fetch(`${base}/api/v1/watch/head?agent_id=${id}`);
  assert.equal(head.status, 402);
  const body = await head.json();
  assert.equal(body.error, "watch_requires_pro");
  assert.equal(body.upstream_head_url, `${fixture}/diff/head.json`);
});

test("a build while npm start serves never breaks /explorer", { timeout: 300_000 }, async () => {
  const seen = [];
  let building = true;
  const poll = (async () => {
    while (building) {
      for (const p of ["/explorer", "/explorer/app.js", "/explorer/core_bg.wasm"]) {
        const r = await fetch(base + p).catch((e) => ({ status: `error ${e.message}` }));
        seen.push(`${p} ${r.status}`);
        await r.arrayBuffer?.();
      }
    }
  })();
  try {
    await promisify(execFile)("bash", ["scripts/build-worker.sh"], { cwd: ROOT, maxBuffer: 1 << 26 });
  } finally {
    building = false;
    await poll;
  }
  // The server keeps the directory it was given: still served, afterwards too.
  await new Promise((r) => setTimeout(r, 1000));
  for (const p of ["/explorer", "/explorer/app.js", "/explorer/core_bg.wasm"]) {
    const r = await fetch(base + p);
    seen.push(`${p} ${r.status} (after)`);
  }
  const bad = seen.filter((s) => !/ 200( \(after\))?$/.test(s));
  assert.deepEqual(bad, [], `answers during and after the build:\n${seen.slice(-20).join("\n")}`);
  assert.ok(seen.length >= 6);
});
