// The README's Python and TypeScript snippets (clients/python, clients/ts)
// doing a real publish + poll against the Worker in workerd, over HTTP on
// 127.0.0.1: new key -> head 404 -> PUT seq 1 -> head -> head 304.
// scripts/install-tools.sh installs their libraries; scripts/test.sh compiles
// the TypeScript and runs both snippets' own vector tests first.
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
const PY_DIR = path.join(ROOT, "clients", "python");
const PY_DEPS = path.join(PY_DIR, ".deps");
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

test("Python snippet: publish and poll", async () => {
  assert.ok(existsSync(PY_DEPS), `${PY_DEPS} missing: run scripts/install-tools.sh`);
  const { stdout } = await run("python3", [path.join(PY_DIR, "example.py"), base], {
    env: { ...process.env, PYTHONPATH: PY_DEPS, NO_PROXY: "127.0.0.1,localhost", no_proxy: "127.0.0.1,localhost" },
  });
  await check(stdout);
});

test("TypeScript snippet: publish and poll", async () => {
  assert.ok(existsSync(TS_EXAMPLE), `${TS_EXAMPLE} missing: run \`npm test --prefix clients/ts\``);
  const { stdout } = await run(process.execPath, [TS_EXAMPLE, base]);
  await check(stdout);
});

test("the README's signing code blocks are verbatim copies of the tested files", () => {
  const readme = readFileSync(path.join(ROOT, "clients", "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Use it from a bot"));
  const blocks = (lang) =>
    [...section.slice(0, section.indexOf("\n## ", 5)).matchAll(new RegExp("```" + lang + "\\n([\\s\\S]*?)```", "g"))].map(
      (m) => m[1].replace(/\n$/, ""),
    );
  const py = readFileSync(path.join(PY_DIR, "selfcap_client.py"), "utf8");
  const ts = readFileSync(path.join(ROOT, "clients", "ts", "selfcap.ts"), "utf8");
  const [pySigning] = blocks("python");
  const [tsSigning] = blocks("ts");
  assert.ok(pySigning.includes("def sign_envelope") && py.includes(pySigning), "Python block drifted");
  assert.ok(tsSigning.includes("export function signEnvelope") && ts.includes(tsSigning), "TypeScript block drifted");
  // The signed reads of private capsules (docs/PROTOCOL.md §12).
  const pySigned = blocks("python").find((b) => b.includes("def signed_read_headers"));
  const tsSigned = blocks("ts").find((b) => b.includes("export function signedReadHeaders"));
  assert.ok(pySigned && py.includes(pySigned), "Python signed-read block drifted");
  assert.ok(tsSigned && ts.includes(tsSigned), "TypeScript signed-read block drifted");
});
