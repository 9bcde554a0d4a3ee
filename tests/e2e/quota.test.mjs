// Quotas and the retry-storm cooldown, driven by the injectable clock:
// rolling 24-hour per-agent window, per-IP new-agent window (v4 and v6 /64),
// cooldown start, doubling, cap and reset, and that nobody else can trigger it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./harness.mjs";
import {
  newAgent,
  exampleCapsule,
  envelope,
  publish,
  put,
  observe,
  capsulePath,
  headPath,
  T0,
  HOUR,
} from "./helpers.mjs";

const SEC = 1000;
const iso = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
let w;
before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.close();
});

test("per-agent quota: 5 per rolling 24 h, crossing the window with the clock", async () => {
  const a = newAgent();
  const cap = (n) => exampleCapsule(a.agentId, { self_motto: `State number ${n}.` });
  for (let i = 0; i < 5; i++) {
    const r = await publish(w, a, i + 1, cap(i + 1), { now: T0 + i * HOUR });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.writes.used_24h, i + 1);
    assert.equal(r.json.writes.remaining_24h, 4 - i);
    assert.equal(r.json.writes.reset_at, iso(T0 + 24 * HOUR));
  }
  const before = await observe(w, a.agentId, T0 + 5 * HOUR);

  const over = await publish(w, a, 6, cap(6), { now: T0 + 5 * HOUR });
  assert.equal(over.status, 429);
  assert.deepEqual(over.json.reason_codes, ["write_quota_exceeded"]);
  assert.equal(over.json.next_write_at, iso(T0 + 24 * HOUR));
  assert.equal(over.json.retry_after_sec, 19 * 3600);
  assert.equal(over.headers.get("retry-after"), String(19 * 3600));
  assert.deepEqual(await observe(w, a.agentId, T0 + 5 * HOUR), before, "quota reject changed state");

  const almost = await publish(w, a, 6, cap(6), { now: T0 + 24 * HOUR - 1 });
  assert.equal(almost.status, 429);
  assert.equal(almost.json.retry_after_sec, 1);

  // At T0 + 24 h the first write leaves the window.
  const ok = await publish(w, a, 6, cap(6), { now: T0 + 24 * HOUR });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.writes.used_24h, 5);
  assert.equal(ok.json.writes.reset_at, iso(T0 + 25 * HOUR));

  const again = await publish(w, a, 7, cap(7), { now: T0 + 24 * HOUR + SEC });
  assert.equal(again.status, 429);
  assert.equal(again.json.next_write_at, iso(T0 + 25 * HOUR));

  // Reads re-evaluate the window: a day later everything has decayed.
  const head = await w.fetch(headPath(a.agentId), {
    headers: { "x-selfcap-test-now": String(T0 + 48 * HOUR) },
  });
  assert.deepEqual(head.json.writes, { limit_24h: 5, used_24h: 0, remaining_24h: 5, reset_at: null });
  assert.equal(head.json.seq, 6);
});

test("tier numbers come from [vars]: FREE_WRITES_PER_24H and FREE_MAX_CAPSULE_BYTES", async () => {
  const v = await startWorker({ vars: { FREE_WRITES_PER_24H: "2", FREE_MAX_CAPSULE_BYTES: "1350" } });
  try {
    const a = newAgent();
    assert.equal((await publish(v, a, 1, undefined, { now: T0 })).status, 200);
    const r2 = await publish(v, a, 2, undefined, { now: T0 + 1 });
    assert.equal(r2.json.writes.limit_24h, 2);
    assert.equal(r2.json.writes.remaining_24h, 0);
    assert.equal((await publish(v, a, 3, undefined, { now: T0 + 2 })).status, 429);

    const b = newAgent();
    const big = exampleCapsule(b.agentId, { self_motto: "x".repeat(150) });
    const r = await publish(v, b, 1, big, { now: T0 });
    assert.equal(r.status, 413, r.text);
    assert.deepEqual(r.json.reason_codes, ["capsule_too_large"]);
    assert.equal(r.json.max_bytes, 1350);
    assert.ok(r.json.observed_bytes > 1350);
  } finally {
    await v.close();
  }
});

test("new agents per IP: rolling 24 h, per address (v4) and per /64 (v6), idempotent", async () => {
  const v = await startWorker({ vars: { FREE_NEW_AGENTS_PER_IP_24H: "3" } });
  try {
    const ipA = "203.0.113.10";
    const agents = [newAgent(), newAgent(), newAgent()];
    for (const a of agents) {
      assert.equal((await publish(v, a, 1, undefined, { now: T0, ip: ipA })).status, 200);
    }
    const fourth = newAgent();
    const r = await publish(v, fourth, 1, undefined, { now: T0 + HOUR, ip: ipA });
    assert.equal(r.status, 429, r.text);
    assert.deepEqual(r.json.reason_codes, ["new_agent_ip_quota_exceeded"]);
    assert.equal(r.json.next_write_at, iso(T0 + 24 * HOUR));
    assert.equal(r.json.retry_after_sec, 23 * 3600);
    assert.equal((await v.fetch(headPath(fourth.agentId))).status, 404, "nothing published");

    // Existing agents keep writing from the same address.
    assert.equal((await publish(v, agents[0], 2, undefined, { now: T0 + HOUR, ip: ipA })).status, 200);
    // Another address has its own allowance; v4-mapped v6 is the same v4 address.
    assert.equal((await publish(v, fourth, 1, undefined, { now: T0 + HOUR, ip: "::ffff:203.0.113.10" })).status, 429);
    assert.equal((await publish(v, fourth, 1, undefined, { now: T0 + HOUR, ip: "203.0.113.11" })).status, 200);

    // IPv6: one /64 is one bucket.
    for (let i = 1; i <= 3; i++) {
      const r6 = await publish(v, newAgent(), 1, undefined, { now: T0, ip: `2001:db8:1:2::${i}` });
      assert.equal(r6.status, 200, r6.text);
    }
    const same64 = await publish(v, newAgent(), 1, undefined, { now: T0, ip: "2001:db8:1:2:ffff:ffff:ffff:ffff" });
    assert.equal(same64.status, 429);
    const other64 = await publish(v, newAgent(), 1, undefined, { now: T0, ip: "2001:db8:1:3::1" });
    assert.equal(other64.status, 200);

    // A day later the address may create agents again.
    const later = newAgent();
    assert.equal((await publish(v, later, 1, undefined, { now: T0 + 24 * HOUR, ip: ipA })).status, 200);
  } finally {
    await v.close();
  }
});

test("cooldown: 5 signed rejects in a row -> 429 cooldown_active, 10 s doubling to 1 h, reset by an accept", async () => {
  const a = newAgent();
  const good = exampleCapsule(a.agentId);
  let t = T0 + 100 * HOUR;
  assert.equal((await publish(w, a, 1, good, { now: t })).status, 200);
  const bad = (seq) => ({ ...good, objectives: [{ id: "x", status: `nope-${seq}`, title: "t" }] });

  for (let seq = 2; seq <= 6; seq++) {
    const r = await publish(w, a, seq, bad(seq), { now: (t += SEC) });
    assert.equal(r.status, 422, r.text);
    assert.deepEqual(r.json.reason_codes, ["objective_status"]);
  }
  // The fifth reject started a 10 s cooldown; 1 s has passed.
  let r = await publish(w, a, 7, good, { now: (t += SEC) });
  assert.equal(r.status, 429, r.text);
  assert.deepEqual(r.json.reason_codes, ["cooldown_active"]);
  assert.equal(r.json.retry_after_sec, 9);
  assert.equal(r.headers.get("retry-after"), "9");
  // That attempt was itself a signed reject: the cooldown doubled to 20 s.
  r = await publish(w, a, 8, good, { now: t + 19 * SEC });
  assert.equal(r.status, 429);
  assert.equal(r.json.retry_after_sec, 1);
  // Keep hammering: 10, 20, 40, ... capped at 3600 s.
  let last;
  for (let seq = 100; seq < 120; seq++) {
    last = await publish(w, a, seq, good, { now: t + 20 * SEC });
    assert.equal(last.status, 429);
    assert.ok(last.json.retry_after_sec <= 3600);
  }
  assert.equal(last.json.retry_after_sec, 3600);
  t = t + 20 * SEC + 3600 * SEC;
  r = await publish(w, a, 200, good, { now: t });
  assert.equal(r.status, 200, r.text);
  // Reset: the next signed reject is reported as itself, not as cooldown.
  r = await publish(w, a, 201, bad(201), { now: t + SEC });
  assert.equal(r.status, 422);
});

test("cooldown: garbage, forgeries and replays by others never lock an agent out", async () => {
  const a = newAgent();
  const good = exampleCapsule(a.agentId);
  const t = T0 + 200 * HOUR;
  const first = envelope(a, 1, good);
  assert.equal((await w.fetch(capsulePath(a.agentId), put(first, { now: t }))).status, 200);
  const attacker = newAgent();
  for (let i = 0; i < 12; i++) {
    const forged = { ...envelope(attacker, 100 + i, good), agent_id: a.agentId };
    const tries = [
      put("{garbage", { now: t }),
      put({ seq: 100 + i, capsule: good }, { now: t }),
      put(forged, { now: t }),
      put({ ...first, public_key: attacker.publicHex }, { now: t }),
      put(first, { now: t }), // replay of a real, already accepted envelope
    ];
    for (const init of tries) {
      const r = await w.fetch(capsulePath(a.agentId), init);
      assert.ok([400, 401, 409, 422].includes(r.status), r.text);
    }
  }
  const r = await publish(w, a, 2, good, { now: t + SEC });
  assert.equal(r.status, 200, r.text);
});

test("cooldown: replays during an active cooldown get replay_seq and never extend it", async () => {
  const a = newAgent();
  const good = exampleCapsule(a.agentId);
  const t = T0 + 300 * HOUR;
  const accepted = [];
  for (let seq = 1; seq <= 3; seq++) {
    const env = envelope(a, seq, good);
    accepted.push(env);
    assert.equal((await w.fetch(capsulePath(a.agentId), put(env, { now: t }))).status, 200);
  }
  // The agent storms itself into a cooldown (five new broken writes).
  const bad = (seq) => ({ ...good, objectives: [{ id: "x", status: `nope-${seq}`, title: "t" }] });
  const rejected = [];
  for (let seq = 4; seq <= 8; seq++) {
    const env = envelope(a, seq, bad(seq));
    rejected.push(env);
    assert.equal((await w.fetch(capsulePath(a.agentId), put(env, { now: t + SEC }))).status, 422);
  }
  const probe = async () => (await publish(w, a, 50, good, { now: t + 2 * SEC })).json.retry_after_sec;
  // Anyone replaying the agent's envelopes: accepted ones are replay_seq, rejected ones
  // are answered cooldown_active, and neither moves the cooldown.
  for (let round = 0; round < 10; round++) {
    for (const env of accepted) {
      const r = await w.fetch(capsulePath(a.agentId), put(env, { now: t + 2 * SEC }));
      assert.equal(r.status, 409);
      assert.deepEqual(r.json.reason_codes, ["replay_seq"]);
    }
    for (const env of rejected) {
      const r = await w.fetch(capsulePath(a.agentId), put(env, { now: t + 2 * SEC }));
      assert.equal(r.status, 429);
    }
  }
  // The cooldown is exactly as the agent's own fifth reject (at t+1 s) left it: 10 s, so 9 s remain.
  assert.equal(await probe(), 9);
});
