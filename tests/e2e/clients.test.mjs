// The README's TypeScript snippet (clients/ts) doing a real publish + poll
// against the Worker in workerd, over HTTP on 127.0.0.1: new key -> head 404
// -> PUT seq 1 -> head -> head 304. scripts/install-tools.sh installs its
// libraries; scripts/test.sh compiles it and runs its own vector tests first.
// (The Python package's tests against the Worker: python_package.test.mjs.)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { startWorker } from "./harness.mjs";

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const TS_EXAMPLE = path.join(ROOT, "clients", "ts", "dist", "example.js");

let w;
let base;

before(async () => {
  w = await startWorker();
  base = String(await w.mf.ready).replace(/\/$/, "");
});

after(async () => {
  await w?.close();
});

async function check(stdout) {
  const out = JSON.parse(stdout);
  assert.match(out.agent_id, /^[0-9a-f]{64}$/);
  assert.equal(out.seq, 1);
  assert.equal(out.poll, 304);
  // The service agrees with what the snippet computed.
  const head = await w.fetch(`/self/${out.agent_id}/head.json`);
  assert.equal(head.status, 200);
  assert.equal(head.json.cursor, out.cursor);
  assert.equal(head.json.seq, 1);
}

test("TypeScript snippet: publish and poll", async () => {
  assert.ok(existsSync(TS_EXAMPLE), `${TS_EXAMPLE} missing: run \`npm test --prefix clients/ts\``);
  const { stdout } = await run(process.execPath, [TS_EXAMPLE, base]);
  await check(stdout);
});

test("the README's signing code blocks are verbatim copies of the tested file", () => {
  const readme = readFileSync(path.join(ROOT, "clients", "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Use it from a bot"));
  const blocks = (lang) =>
    [...section.slice(0, section.indexOf("\n## ", 5)).matchAll(new RegExp("```" + lang + "\\n([\\s\\S]*?)```", "g"))].map(
      (m) => m[1].replace(/\n$/, ""),
    );
  const ts = readFileSync(path.join(ROOT, "clients", "ts", "selfcap.ts"), "utf8");
  const [tsSigning] = blocks("ts");
  assert.ok(tsSigning.includes("export function signEnvelope") && ts.includes(tsSigning), "TypeScript block drifted");
  // The signed reads of private capsules (docs/PROTOCOL.md §12).
  const tsSigned = blocks("ts").find((b) => b.includes("export function signedReadHeaders"));
  assert.ok(tsSigned && ts.includes(tsSigned), "TypeScript signed-read block drifted");
});
