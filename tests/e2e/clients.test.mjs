// The independent TypeScript implementation of the wire (tests/interop/ts,
// written from docs/PROTOCOL.md with Node's crypto, canonicalize and
// http-message-sig, not with our core) doing a real publish + poll against the
// Worker in workerd, over HTTP on 127.0.0.1: new key -> head 404 -> PUT seq 1
// -> head -> head 304. scripts/install-tools.sh installs its libraries;
// scripts/test.sh compiles it and runs its own vector tests first. (The npm
// package, which wraps our core: npm_package.test.mjs.)
// (The Python package's tests against the Worker: python_package.test.mjs.)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { startWorker } from "./harness.mjs";

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const TS_EXAMPLE = path.join(ROOT, "tests", "interop", "ts", "dist", "example.js");

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
  // The service agrees with what the independent implementation computed.
  const head = await w.fetch(`/self/${out.agent_id}/head.json`);
  assert.equal(head.status, 200);
  assert.equal(head.json.cursor, out.cursor);
  assert.equal(head.json.seq, 1);
}

test("independent TypeScript implementation: publish and poll", async () => {
  assert.ok(existsSync(TS_EXAMPLE), `${TS_EXAMPLE} missing: run \`npm test --prefix tests/interop/ts\``);
  const { stdout } = await run(process.execPath, [TS_EXAMPLE, base]);
  await check(stdout);
});
