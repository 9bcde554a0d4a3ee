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
  base = `http://127.0.0.1:${port}`;
  server = spawn("npm", ["start", "--", "--persist-to", STATE], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), WRANGLER_SEND_METRICS: "false" },
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
