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
  // Codes the core decides but no route answers yet (core::reason::NOT_SERVED_YET).
  const wire = Object.fromEntries([...reason.matchAll(/^\s*([A-Z][A-Za-z]*) => "([a-z0-9_.]+)", \d{3},/gm)].map((m) => [m[1], m[2]]));
  const block = reason.match(/pub const NOT_SERVED_YET: &\[ReasonCode\] = &\[([^\]]*)\];/);
  assert.ok(block, "NOT_SERVED_YET in src/core/reason.rs");
  const notServed = [...block[1].matchAll(/ReasonCode::([A-Za-z]+)/g)].map((m) => wire[m[1]]);
  assert.ok(notServed.every(Boolean), "every NOT_SERVED_YET entry names a code");
  const missing = codes.filter((c) => !vectorCodes.has(c) && !sources.includes(`"${c}"`) && !notServed.includes(c));
  assert.deepEqual(missing, [], "reason codes without an e2e test");
});
