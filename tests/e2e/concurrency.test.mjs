// Concurrent writes: the per-agent Durable Object serialises them, so no two
// can pass the seq check, the capsule never rolls back, and quota is exact.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./harness.mjs";
import {
  newAgent,
  exampleCapsule,
  envelope,
  put,
  cursorOf,
  jcs,
  capsulePath,
  headPath,
  T0,
} from "./helpers.mjs";

let w;
before(async () => {
  w = await startWorker({ vars: { FREE_NEW_AGENTS_PER_IP_24H: "5" } });
});
after(async () => {
  await w?.close();
});

function shuffle(xs) {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

async function race(agent, seqs, now, ip) {
  const capsuleFor = (seq) => exampleCapsule(agent.agentId, { self_motto: `Concurrent state ${seq}.` });
  const results = await Promise.all(
    seqs.map((seq) =>
      w
        .fetch(capsulePath(agent.agentId), put(envelope(agent, seq, capsuleFor(seq)), { now, ip }))
        .then((r) => ({ seq, ...r })),
    ),
  );
  return { results, capsuleFor };
}

/** Accepted writes in commit order (used_24h is the commit's index in the window). */
function acceptedInCommitOrder(results) {
  return results
    .filter((r) => r.status === 200)
    .sort((x, y) => x.json.writes.used_24h - y.json.writes.used_24h);
}

test("20 PUTs with distinct seqs at once (quota 5): serial outcome, exact quota, no rollback", async () => {
  const a = newAgent();
  const seqs = shuffle(Array.from({ length: 20 }, (_, i) => i + 1));
  const { results, capsuleFor } = await race(a, seqs, T0, "192.0.2.1");
  const accepted = acceptedInCommitOrder(results);
  assert.ok(accepted.length >= 1 && accepted.length <= 5, `accepted ${accepted.length}`);
  // Commit indices are exactly 1..n: no write was counted twice or lost.
  assert.deepEqual(accepted.map((r) => r.json.writes.used_24h), accepted.map((_, i) => i + 1));
  // Each accepted seq is greater than the one committed before it.
  for (let i = 1; i < accepted.length; i++) {
    assert.ok(accepted[i].seq > accepted[i - 1].seq, "seq went backwards");
    assert.equal(accepted[i].json.prev_cursor, accepted[i - 1].json.cursor);
  }
  const rejected = results.filter((r) => r.status !== 200);
  for (const r of rejected) {
    assert.ok(
      ["replay_seq", "write_quota_exceeded", "cooldown_active"].includes(r.json.reason_codes[0]),
      r.text,
    );
  }
  if (rejected.some((r) => r.json.reason_codes[0] === "write_quota_exceeded")) {
    assert.equal(accepted.length, 5, "quota refused while slots were left");
  }
  const last = accepted.at(-1);
  const head = await w.fetch(headPath(a.agentId), { headers: { "x-selfcap-test-now": String(T0) } });
  assert.equal(head.json.seq, last.seq, "final seq is the last (highest) accepted");
  assert.equal(head.json.seq, Math.max(...accepted.map((r) => r.seq)));
  assert.equal(head.json.writes.used_24h, accepted.length);
  assert.equal(head.json.cursor, cursorOf(capsuleFor(last.seq)));
  assert.equal((await w.fetch(capsulePath(a.agentId))).text, jcs(capsuleFor(last.seq)));
});

test("20 PUTs at once with quota to spare: the highest seq always wins", async () => {
  const v = await startWorker({ vars: { FREE_WRITES_PER_24H: "50" } });
  try {
    const a = newAgent();
    const seqs = shuffle(Array.from({ length: 20 }, (_, i) => i + 1));
    const capsuleFor = (seq) => exampleCapsule(a.agentId, { self_motto: `Concurrent state ${seq}.` });
    const results = await Promise.all(
      seqs.map((seq) =>
        v.fetch(capsulePath(a.agentId), put(envelope(a, seq, capsuleFor(seq)), { now: T0 })).then((r) => ({ seq, ...r })),
      ),
    );
    const accepted = acceptedInCommitOrder(results);
    assert.ok(accepted.some((r) => r.seq === 20), "seq 20 must be accepted");
    for (let i = 1; i < accepted.length; i++) assert.ok(accepted[i].seq > accepted[i - 1].seq);
    for (const r of results.filter((r) => r.status !== 200)) {
      assert.equal(r.status, 409, r.text);
    }
    const head = await v.fetch(headPath(a.agentId), { headers: { "x-selfcap-test-now": String(T0) } });
    assert.equal(head.json.seq, 20);
    assert.equal(head.json.writes.used_24h, accepted.length);
    assert.equal((await v.fetch(capsulePath(a.agentId))).text, jcs(capsuleFor(20)));
  } finally {
    await v.close();
  }
});

test("20 PUTs with the same seq at once: exactly one wins", async () => {
  const a = newAgent();
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      w.fetch(
        capsulePath(a.agentId),
        put(envelope(a, 1, exampleCapsule(a.agentId, { self_motto: `Variant ${i}.` })), { now: T0, ip: "192.0.2.2" }),
      ),
    ),
  );
  assert.equal(results.filter((r) => r.status === 200).length, 1);
  assert.equal(results.filter((r) => r.status === 409).length, 19);
});

test("20 new agents from one IP at once (limit 5): exactly 5 created", async () => {
  const agents = Array.from({ length: 20 }, () => newAgent());
  const results = await Promise.all(
    agents.map((a) =>
      w.fetch(capsulePath(a.agentId), put(envelope(a, 1, exampleCapsule(a.agentId)), { now: T0, ip: "192.0.2.99" })),
    ),
  );
  assert.equal(results.filter((r) => r.status === 200).length, 5);
  const refused = results.filter((r) => r.status !== 200);
  assert.equal(refused.length, 15);
  for (const r of refused) assert.deepEqual(r.json.reason_codes, ["new_agent_ip_quota_exceeded"]);
  const published = await Promise.all(agents.map((a) => w.fetch(headPath(a.agentId))));
  assert.equal(published.filter((r) => r.status === 200).length, 5);
});
