// The KV mirror: a failed put after commit is retried by the agent DO's alarm
// until KV holds the committed record; reads never wait on the DO. Also: the
// test-only headers do nothing unless SELFCAP_TEST_CLOCK is "1".
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./harness.mjs";
import { newAgent, exampleCapsule, publish, headPath, T0 } from "./helpers.mjs";

const FAIL = { "x-selfcap-test-fail-mirror": "1" };
let w;
before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.close();
});

async function until(fn, ms = 10_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("timed out");
}

test("a failed KV mirror is repaired by the alarm", async () => {
  const a = newAgent();
  const r = await publish(w, a, 1, undefined, { headers: FAIL });
  assert.equal(r.status, 200, r.text);
  // Committed in the DO, not yet in KV: readers still see "not found"...
  assert.equal((await w.fetch(headPath(a.agentId))).status, 404);
  // ...until the alarm (armed before the first attempt) mirrors it.
  const head = await until(async () => {
    const h = await w.fetch(headPath(a.agentId));
    return h.status === 200 && h;
  });
  assert.equal(head.json.seq, 1);

  // A second write whose mirror fails: readers keep the last mirrored record,
  // then converge on the new one.
  const c2 = exampleCapsule(a.agentId, { self_motto: "Second." });
  const r2 = await publish(w, a, 2, c2, { headers: FAIL });
  assert.equal(r2.status, 200, r2.text);
  assert.equal((await w.fetch(headPath(a.agentId))).json.seq, 1);
  await until(async () => (await w.fetch(headPath(a.agentId))).json.seq === 2);
  const kv = JSON.parse(await w.kv.get(`self:capsule:${a.agentId}`));
  assert.equal(kv.seq, 2);
  assert.equal(kv.cursor, r2.json.cursor);
});

test("test hooks are inert without SELFCAP_TEST_CLOCK=1", async () => {
  const v = await startWorker({ vars: { SELFCAP_TEST_CLOCK: "0" } });
  try {
    const a = newAgent();
    const before = Date.now();
    const r = await publish(v, a, 1, undefined, { now: T0, headers: FAIL });
    assert.equal(r.status, 200, r.text);
    // The mirror was not failed on purpose: readable at once.
    const head = await v.fetch(headPath(a.agentId), { headers: { "x-selfcap-test-now": String(T0) } });
    assert.equal(head.status, 200);
    // And the clock header was ignored.
    const generated = Date.parse(head.json.generated_at);
    assert.ok(generated >= before - 2000 && generated <= Date.now() + 1000, head.json.generated_at);
    assert.notEqual(head.json.generated_at, "2026-02-10T00:00:00Z");
  } finally {
    await v.close();
  }
});
