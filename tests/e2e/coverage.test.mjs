// Guard: every reason code the core defines is exercised by some e2e test
// (named in a test file, or expected by a conformance vector the e2e tests
// replay over HTTP). A code added to src/core/reason.rs without an HTTP test
// fails here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "..", "..");

test("every ReasonCode is exercised through HTTP", () => {
  const reason = readFileSync(path.join(ROOT, "src/core/reason.rs"), "utf8");
  const codes = [...reason.matchAll(/^\s*[A-Z][A-Za-z]* => "([a-z0-9_.]+)", \d{3},/gm)].map((m) => m[1]);
  assert.ok(codes.length > 40, `parsed ${codes.length} codes`);

  const sources = readdirSync(HERE)
    .filter((f) => f.endsWith(".test.mjs") && f !== "coverage.test.mjs")
    .map((f) => readFileSync(path.join(HERE, f), "utf8"))
    .join("\n");
  const vectorCodes = new Set();
  for (const name of ["capsules", "envelopes"]) {
    const { cases } = JSON.parse(readFileSync(path.join(ROOT, "tests/vectors", `${name}.json`), "utf8"));
    for (const c of cases) for (const code of c.reason_codes ?? []) vectorCodes.add(code);
  }
  // The key-log scenarios keys.test.mjs replays step by step.
  const keysDir = path.join(ROOT, "tests/vectors/keys");
  for (const f of readdirSync(keysDir).filter((f) => f.endsWith(".json") && f !== "verifier.json")) {
    const { steps } = JSON.parse(readFileSync(path.join(keysDir, f), "utf8"));
    for (const s of steps) if (s.expect.reason_code) vectorCodes.add(s.expect.reason_code);
  }
  const missing = codes.filter((c) => !vectorCodes.has(c) && !sources.includes(`"${c}"`));
  assert.deepEqual(missing, [], "reason codes without an e2e test");
});
