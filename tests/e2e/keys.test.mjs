// Key rotation and recovery (docs/PROTOCOL.md §14) through HTTP, in workerd:
// every key-log vector replayed against the Worker (same service key, same
// clock, so the sealed log it serves must equal the vector's byte for byte),
// then what only the Worker can show: writes after a rotation, a thief's
// seq burn and the owner's dispute, racing rotations, head.json's summary
// and entity tag, a held long-poll woken by a key event, verify and export,
// and the cap. Events are built by tests/e2e/key-helpers.mjs, written from
// the spec text alone.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { exits, requireSelfcap, selfcapIn } from "./cli-helpers.mjs";
import { assertRefused, claim, claimBody, confirm, nextIp, pay, quoteOk, startChain, upgradeVars } from "./upgrade-helpers.mjs";
import { startWorker, BASE } from "./harness.mjs";
import {
  agentFromSeed,
  capsulePath,
  cursorOf,
  envelope,
  exampleCapsule,
  headPath,
  jcs,
  put,
  sha256hex,
  signedReadHeaders,
  vectors,
  T0,
  HOUR,
} from "./helpers.mjs";
import {
  freshKey,
  inception,
  keyFromSeed,
  keysPath,
  keysSubmission,
  recordHash,
  rotation,
} from "./key-helpers.mjs";

/** RFC 8032 §7.1 TEST 2's secret key: the vectors' service key. */
const VECTOR_SERVICE_SEED = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb";
const MAX_SEQ = 9007199254740991;

const workers = [];
after(async () => {
  for (const w of workers) await w.close();
});
async function worker(opts) {
  const w = await startWorker(opts);
  workers.push(w);
  return w;
}

/** An envelope signer for `agentId` holding `key` (the agent's current key). */
const as = (key, agentId) => ({ privateKey: key.privateKey, publicHex: key.publicHex, agentId });
const at = (ms) => ({ "x-selfcap-test-now": String(ms) });

function post(w, agentId, body, { now, ip = "203.0.113.9" } = {}) {
  const headers = { "content-type": "application/json", "cf-connecting-ip": ip };
  if (now !== undefined) headers["x-selfcap-test-now"] = String(now);
  return w.fetch(keysPath(agentId), { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
}

async function keyLog(w, agentId, now) {
  const r = await w.fetch(keysPath(agentId), { headers: now === undefined ? {} : at(now) });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

function write(w, key, agentId, seq, capsule, now) {
  const c = capsule ?? withMotto(agentId, `Version ${seq % 1000}: rehydrate from primitives.`);
  return w.fetch(capsulePath(agentId), put(envelope(as(key, agentId), seq, c), { now }));
}

/** The example capsule with its own motto (a distinct cursor). */
const withMotto = (agentId, motto) => exampleCapsule(agentId, { self_motto: motto });

/** The seed [n; 32] whose key is `hex` (the vectors' keys), n in 1..=255. */
function seedOf(hex) {
  for (let n = 1; n < 256; n++) {
    const k = keyFromSeed(Buffer.alloc(32, n));
    if (k.publicHex === hex || k.digest === hex) return k;
  }
  throw new Error(`no seed [n;32] gives ${hex}`);
}

const scenarios = readdirSync(new URL("../vectors/keys/", import.meta.url))
  .filter((f) => f.endsWith(".json") && f !== "verifier.json")
  .map((f) => f.replace(/\.json$/, ""));

test("the key-log vectors are all here", () => {
  assert.ok(scenarios.length >= 10, scenarios.join(", "));
});

for (const name of scenarios) {
  const v = vectors(`keys/${name}`);
  if (v.writes.length > 0) continue; // needs real writes: see the seq-burn test below
  test(`vector ${name}: every step's status and code, then the sealed log byte for byte`, async () => {
    const w = await worker({ serviceKey: VECTOR_SERVICE_SEED });
    const servicePub = agentFromSeed(VECTOR_SERVICE_SEED).publicHex;
    assert.ok(Object.values(v.service_keyring.keys).includes(servicePub), "the vectors' service key");
    const genesis = seedOf(v.agent_id);
    // The vectors' agent holds `history_length` versions before its first
    // event; other agents named exist.
    const before = Date.parse(v.steps[0].now) - HOUR;
    for (let seq = 1; seq <= v.history_length; seq++) {
      const r = await write(w, genesis, v.agent_id, seq, undefined, before);
      assert.equal(r.status, 200, r.text);
    }
    for (const other of v.other_agents) {
      const k = seedOf(other);
      assert.equal((await write(w, k, other, 1, undefined, before)).status, 200);
    }
    for (const [i, step] of v.steps.entries()) {
      const r = await post(w, v.agent_id, keysSubmission(step.event), { now: Date.parse(step.now) });
      const want = step.expect;
      assert.equal(r.status, want.status, `step ${i}: ${r.text}`);
      if (want.reason_code) {
        assert.equal(r.json.accepted, false);
        assert.equal(r.json.reason_codes[0], want.reason_code, `step ${i}: ${r.text}`);
        assert.equal(typeof r.json.detail, "string");
      } else {
        assert.equal(r.json.applied, want.applied, `step ${i}`);
        assert.equal(r.json.index, step.event.index);
      }
    }
    const served = await keyLog(w, v.agent_id, Date.parse(v.keys_at));
    assert.deepEqual(served.records, v.log, "the sealed log, seals and all");
    assert.deepEqual(served.keys, v.keys, "keys.json's summary");
    if (v.log.length > 0) {
      const head = await w.fetch(headPath(v.agent_id), { headers: at(Date.parse(v.keys_at)) });
      assert.deepEqual(head.json.keys, v.keys, "head.json's summary at the same time");
    } else {
      const head = await w.fetch(headPath(v.agent_id));
      assert.equal("keys" in head.json, false, "no log, no keys member");
    }
  });
}

test("routine rotation: the new key writes, the old one gets key_rotated and never a cooldown; head, verify and export follow", async () => {
  const w = await worker({ vars: { FREE_HISTORY_RETAINED: "10" } });
  const g = freshKey();
  const n1 = freshKey();
  const n2 = freshKey();
  const id = g.digest;
  assert.equal((await write(w, g, id, 1, undefined, T0)).status, 200);
  const plain = await w.fetch(headPath(id), { headers: at(T0) });
  assert.equal("keys" in plain.json, false, "an agent without a log keeps today's head.json");
  const plainTag = plain.headers.get("etag");
  assert.equal(plainTag, `"${plain.json.cursor.slice(7)}"`);
  assert.deepEqual(await keyLog(w, id), { agent_id: id, v: "selfcap-keys/1", keys: null, records: [] });

  const inc = inception({ genesis: g, next: n1 });
  const r0 = await post(w, id, keysSubmission(inc), { now: T0 + HOUR });
  assert.equal(r0.status, 200, r0.text);
  assert.equal(r0.json.applied, "new");
  assert.equal(r0.json.keys.index, 0);
  const head0 = await w.fetch(headPath(id), { headers: { ...at(T0 + HOUR), "if-none-match": plainTag } });
  assert.equal(head0.status, 200, "a key event is a new head.json entity");
  assert.equal(head0.json.cursor, plain.json.cursor, "the capsule did not change");
  assert.equal(head0.json.keys.public_key, g.publicHex);
  assert.notEqual(head0.headers.get("etag"), plainTag);

  const log0 = await keyLog(w, id);
  assert.equal(log0.records.length, 1);
  assert.equal(recordHash(log0.records[0]), log0.records[0].hash);
  const rot = rotation({ agentId: id, index: 1, previousHash: log0.records[0].hash, authority: "next", revealed: n1, current: n1, next: n2 });
  const r1 = await post(w, id, keysSubmission(rot), { now: T0 + 2 * HOUR });
  assert.equal(r1.status, 200, r1.text);
  assert.equal(r1.json.keys.index, 1);
  assert.equal(r1.json.keys.public_key, n1.publicHex);
  const again = await post(w, id, keysSubmission(rot), { now: T0 + 3 * HOUR });
  assert.equal(again.status, 200);
  assert.equal(again.json.applied, "already_applied");
  assert.equal((await keyLog(w, id)).records.length, 2, "applied once");

  // The genesis key is rotated out: refused, repeatedly, with no cooldown.
  for (let i = 0; i < 6; i++) {
    const old = await write(w, g, id, 2 + i, undefined, T0 + 3 * HOUR);
    assert.equal(old.status, 403, old.text);
    assert.deepEqual(old.json.reason_codes, ["key_rotated"]);
  }
  // The same through the remote MCP door's self_submit (one JSON-RPC
  // message per POST): the same write path, the same refusal.
  const mcp = await w.fetch("/mcp", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...at(T0 + 3 * HOUR) },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "self_submit", arguments: { envelope: envelope(as(g, id), 9, exampleCapsule(id)) } },
    }),
  });
  assert.equal(mcp.status, 200, mcp.text);
  const result = mcp.json.result;
  assert.equal(result.isError, true, mcp.text);
  assert.match(result.content[0].text, /key_rotated/);
  // A key that was never this agent's is not a rotated one.
  const stranger = await write(w, freshKey(), id, 2, undefined, T0 + 3 * HOUR);
  assert.equal(stranger.status, 401);
  assert.deepEqual(stranger.json.reason_codes, ["bad_signature"]);
  const ok = await write(w, n1, id, 2, undefined, T0 + 3 * HOUR);
  assert.equal(ok.status, 200, ok.text);
  const capsule = await w.fetch(capsulePath(id));
  assert.equal(cursorOf(JSON.parse(capsule.text)), ok.json.cursor);

  const verify = await w.fetch(`/self/${id}/verify.json`);
  assert.equal(verify.json.valid, true, verify.text);
  assert.equal(verify.json.level, "auth");
  const exported = await w.fetch(`/self/${id}/export.json`);
  assert.equal(exported.json.key_log.length, 2, "the export carries the whole key log");
  const entries = exported.json.entries.map((e) => JSON.parse(e.canonical));
  assert.deepEqual(entries.map((e) => e.public_key), [g.publicHex, n1.publicHex], "each entry names the key that signed it");
  // The entity tag moves with the key log: a client holding the export
  // from before the rotation gets the new one.
  assert.match(verify.headers.get("etag"), /-k2"$/);
});

test("a thief burns seq to 2^53-1 and the quota with the leaked current key; the owner's disputing rotation restores the identity", async () => {
  // Six writes a day: the owner's four and the thief's two use them all,
  // and the owner's rotation must land anyway.
  const w = await worker({ vars: { FREE_HISTORY_RETAINED: "20", FREE_WRITES_PER_24H: "6" } });
  const g = freshKey();
  const n1 = freshKey();
  const n2 = freshKey();
  const id = g.digest;
  const cursors = [];
  for (let seq = 1; seq <= 4; seq++) {
    const r = await write(w, g, id, seq, undefined, T0 + seq);
    assert.equal(r.status, 200);
    cursors[seq] = r.json.cursor;
  }
  assert.equal((await post(w, id, keysSubmission(inception({ genesis: g, next: n1 })), { now: T0 + HOUR })).status, 200);
  // The genesis key leaks: the thief writes, then bricks the seq.
  const thief = withMotto(id, "A different motto, written by someone else.");
  assert.equal((await write(w, g, id, 5, thief, T0 + 2 * HOUR)).status, 200);
  assert.equal((await write(w, g, id, MAX_SEQ, thief, T0 + 2 * HOUR)).status, 200);
  const bricked = await write(w, g, id, MAX_SEQ, thief, T0 + 2 * HOUR);
  assert.equal(bricked.status, 409);
  assert.match(bricked.json.detail, /disputes_after/, "the detail says how the owner gets out");
  assert.deepEqual((await w.fetch(headPath(id), { headers: at(T0 + 2 * HOUR) })).json.writes.remaining_24h, 0);

  const prev = (await keyLog(w, id)).records[0].hash;
  const owner = withMotto(id, "The owner is back: rehydrate from primitives.");
  const disputing = (seq, cursor) =>
    rotation({ agentId: id, index: 1, previousHash: prev, authority: "next", revealed: n1, current: n1, next: n2, disputesAfter: { seq, cursor } });
  const ev = disputing(4, cursors[4]);
  const now = T0 + 3 * HOUR;
  // Without the owner's capsule, with a seq not above the last good one,
  // or naming a write the old key never made: refused, nothing changes.
  let r = await post(w, id, keysSubmission(ev), { now });
  assert.equal(r.status, 422, r.text);
  assert.deepEqual(r.json.reason_codes, ["bad_key_event"]);
  r = await post(w, id, keysSubmission(ev, envelope(as(n1, id), 4, owner)), { now });
  assert.equal(r.status, 409, r.text);
  assert.deepEqual(r.json.reason_codes, ["replay_seq"]);
  r = await post(w, id, keysSubmission(disputing(4, cursors[3]), envelope(as(n1, id), 5, owner)), { now });
  assert.equal(r.status, 422, r.text);
  // An envelope signed by the old key does not ride on the new key's event.
  r = await post(w, id, keysSubmission(ev, envelope(as(g, id), 5, owner)), { now });
  assert.equal(r.status, 403, r.text);
  assert.deepEqual(r.json.reason_codes, ["key_rotated"]);
  assert.equal((await keyLog(w, id)).records.length, 1, "nothing changed");

  r = await post(w, id, keysSubmission(ev, envelope(as(n1, id), 5, owner)), { now });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.write.seq, 5);
  assert.equal(r.json.keys.disputed, 1);
  const capsule = await w.fetch(capsulePath(id));
  assert.equal(capsule.text, jcs(owner), "capsule.json serves the owner's capsule");
  const head = await w.fetch(headPath(id));
  assert.equal(head.json.seq, 5, "the owner's seq continues from the last good write");
  const verify = await w.fetch(`/self/${id}/verify.json`);
  assert.equal(verify.json.valid, true, verify.text);
  assert.deepEqual(verify.json.disputed, [4, 5], "the thief's versions (sequences 4 and 5) stay, disputed");
  // The thief is out; the owner writes on.
  assert.deepEqual((await write(w, g, id, MAX_SEQ, thief, now)).json.reason_codes, ["key_rotated"]);
  // The rotation's write counted toward the quota like any write; a day on,
  // the owner writes on with the next seq.
  assert.equal((await write(w, n1, id, 6, undefined, now + 25 * HOUR)).status, 200);
  const exported = await w.fetch(`/self/${id}/export.json`);
  assert.equal(exported.status, 200);
  assert.equal(exported.json.key_log.length, 2);

  // Offline, with the real CLI: the export verifies against the published
  // keyring and names the disputed versions; a truncated, dropped or edited
  // key log does not verify.
  requireSelfcap();
  const home = mkdtempSync(path.join(tmpdir(), "selfcap-keys-"));
  const selfcap = selfcapIn(home);
  const file = (name, value) => {
    const p = path.join(home, name);
    writeFileSync(p, typeof value === "string" ? value : JSON.stringify(value));
    return p;
  };
  const keyring = file("keyring.json", (await w.fetch("/api/v1/self/keys")).text);
  const offline = async (name, bundle) => {
    const r = exits(await selfcap(["verify", "--export", file(name, bundle), "--keys", keyring, "--json"]), bundle === exported.text ? 0 : 8, name);
    return JSON.parse(r.stdout);
  };
  const whole = await offline("whole.json", exported.text);
  assert.equal(whole.valid, true);
  assert.deepEqual(whole.disputed, [4, 5], "the thief's versions, found offline");
  const truncated = { ...exported.json, key_log: exported.json.key_log.slice(0, 1) };
  const cut = await offline("truncated.json", truncated);
  assert.equal(cut.valid, false);
  assert.ok(cut.checks.signature.failures.some((f) => /key log names/.test(f.detail)), JSON.stringify(cut.checks.signature));
  const { key_log: _dropped, ...withoutLog } = exported.json;
  assert.equal((await offline("dropped.json", withoutLog)).valid, false);
  const edited = structuredClone(exported.json);
  edited.key_log[1].accepted_at = edited.key_log[1].accepted_at.replace(/T\d\d/, "T23");
  const forged = await offline("edited.json", edited);
  assert.equal(forged.valid, false);
  assert.equal(forged.checks.seal.ok, false, JSON.stringify(forged.checks.seal));
});

test("a thief's rejected writes start a cooldown; the owner's rotation lands through it", async () => {
  const w = await worker();
  const g = freshKey();
  const n1 = freshKey();
  const id = g.digest;
  assert.equal((await write(w, g, id, 1, undefined, T0)).status, 200);
  assert.equal((await post(w, id, keysSubmission(inception({ genesis: g, next: n1 })), { now: T0 })).status, 200);
  const bad = exampleCapsule(id, { surprise: true });
  for (let seq = 2; seq <= 6; seq++) {
    assert.equal((await write(w, g, id, seq, bad, T0 + seq)).status, 422);
  }
  const cooling = await write(w, g, id, 7, undefined, T0 + 10);
  assert.equal(cooling.status, 429);
  assert.deepEqual(cooling.json.reason_codes, ["cooldown_active"]);
  const prev = (await keyLog(w, id)).records[0].hash;
  const ev = rotation({ agentId: id, index: 1, previousHash: prev, authority: "next", revealed: n1, current: n1, next: freshKey() });
  const r = await post(w, id, keysSubmission(ev, envelope(as(n1, id), 8, withMotto(id, "Owner again."))), { now: T0 + 11 });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.write.seq, 8);
});

test("two rotations racing on one previous_hash: one lands, the other is stale", async () => {
  const w = await worker();
  const g = freshKey();
  const n1 = freshKey();
  const id = g.digest;
  assert.equal((await write(w, g, id, 1)).status, 200);
  assert.equal((await post(w, id, keysSubmission(inception({ genesis: g, next: n1 })))).status, 200);
  const prev = (await keyLog(w, id)).records[0].hash;
  const a = rotation({ agentId: id, index: 1, previousHash: prev, authority: "next", revealed: n1, current: n1, next: freshKey() });
  const b = rotation({ agentId: id, index: 1, previousHash: prev, authority: "next", revealed: n1, current: freshKey(), next: freshKey() });
  const [ra, rb] = await Promise.all([post(w, id, keysSubmission(a)), post(w, id, keysSubmission(b))]);
  const statuses = [ra.status, rb.status].sort();
  assert.deepEqual(statuses, [200, 409], `${ra.text} ${rb.text}`);
  const loser = ra.status === 409 ? ra : rb;
  assert.deepEqual(loser.json.reason_codes, ["key_event_stale"]);
  assert.equal((await keyLog(w, id)).records.length, 2);
});

test("the first publish carries the inception; a key event alone never creates an agent", async () => {
  const w = await worker();
  const g = freshKey();
  const id = g.digest;
  const inc = inception({ genesis: g, next: freshKey() });
  const alone = await post(w, id, keysSubmission(inc));
  assert.equal(alone.status, 422);
  assert.deepEqual(alone.json.reason_codes, ["bad_key_event"]);
  assert.equal((await w.fetch(headPath(id))).status, 404);
  assert.equal((await w.fetch(keysPath(id))).status, 404, "no agent, no key log");
  const r = await post(w, id, keysSubmission(inc, envelope(as(g, id), 1, exampleCapsule(id))));
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.write.seq, 1);
  const head = await w.fetch(headPath(id));
  assert.equal(head.json.seq, 1);
  assert.equal(head.json.keys.length, 1);
});

test("a held head.json long-poll is answered by a key event", async () => {
  const w = await worker();
  const g = freshKey();
  const id = g.digest;
  assert.equal((await write(w, g, id, 1)).status, 200);
  const first = await w.fetch(headPath(id));
  const tag = first.headers.get("etag");
  const held = w.fetch(`${headPath(id)}?wait=20`, { headers: { "if-none-match": tag } });
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await post(w, id, keysSubmission(inception({ genesis: g, next: freshKey() })))).status, 200);
  const woke = await held;
  assert.equal(woke.status, 200, woke.text);
  assert.equal(woke.json.keys.length, 1);
  assert.notEqual(woke.headers.get("etag"), tag);
});

test("bad submissions: JSON, shape, another agent's path, forged signatures, the cap on the log", async () => {
  const w = await worker();
  const g = freshKey();
  const id = g.digest;
  assert.equal((await write(w, g, id, 1)).status, 200);
  const inc = inception({ genesis: g, next: freshKey() });
  const cases = [
    ["{", 400, "invalid_json"],
    [JSON.stringify([]), 422, "bad_key_event"],
    [JSON.stringify({ event: inc, extra: 1 }), 422, "bad_key_event"],
    [JSON.stringify({ event: { ...inc, next_key_digest: freshKey().digest } }), 401, "bad_signature"],
    [JSON.stringify({ event: { ...inc, index: 1 } }), 422, "bad_key_event"],
    [JSON.stringify({ event: { ...inc, surprise: true } }), 422, "bad_key_event"],
    [JSON.stringify({ event: inc, envelope: "no" }), 422, "bad_key_event"],
  ];
  for (const [body, status, code] of cases) {
    const r = await post(w, id, body);
    assert.equal(r.status, status, `${body.slice(0, 60)}: ${r.text}`);
    assert.equal(r.json.reason_codes[0], code, body.slice(0, 60));
  }
  const other = freshKey();
  assert.equal((await write(w, other, other.digest, 1)).status, 200);
  const elsewhere = await post(w, other.digest, keysSubmission(inc));
  assert.equal(elsewhere.status, 422);
  assert.deepEqual(elsewhere.json.reason_codes, ["bad_key_event"]);
  // An inception by any key but the genesis key is refused before the
  // agent's object is woken (it logs every refusal it decides; none here).
  const before = w.logs.length;
  const impostor = freshKey();
  const foreign = await post(w, id, keysSubmission(inception({ agentId: id, genesis: impostor, next: freshKey() })));
  assert.equal(foreign.status, 422, foreign.text);
  assert.deepEqual(foreign.json.reason_codes, ["agent_id"]);
  assert.ok(!w.logs.slice(before).some((l) => l.message.includes("key_event_refused")), "the object was not asked");
  // (A well-formed event it must decide is logged there: the control. A
  // stranger's keys are none of the log's: the one answer that says
  // nothing of the agent, docs/PROTOCOL.md §14 step 3.)
  const stranger = freshKey();
  const stale = rotation({ agentId: id, index: 1, previousHash: "00".repeat(32), authority: "next", revealed: stranger, current: stranger, next: freshKey() });
  const staleAnswer = await post(w, id, keysSubmission(stale));
  assert.equal(staleAnswer.status, 403, staleAnswer.text);
  assert.deepEqual(staleAnswer.json.reason_codes, ["rotation_not_committed"]);
  assert.ok(w.logs.slice(before).some((l) => l.message.includes("key_event_refused")), "the object logs what it decides");
  const tooBig = await post(w, id, JSON.stringify({ event: inc, pad: "x".repeat(80 * 1024) }));
  assert.equal(tooBig.status, 413);
  assert.equal((await keyLog(w, id)).records.length, 0, "nothing refused was stored");
  // No cooldown from any of it: the owner's write goes through.
  assert.equal((await write(w, g, id, 2)).status, 200);

  // 256 events fill the log; the 257th is refused.
  let nextKey = freshKey();
  assert.equal((await post(w, id, keysSubmission(inception({ genesis: g, next: nextKey })))).status, 200);
  let prev = (await keyLog(w, id)).records[0].hash;
  for (let i = 1; i < 256; i++) {
    const following = freshKey();
    const ev = rotation({ agentId: id, index: i, previousHash: prev, authority: "next", revealed: nextKey, current: nextKey, next: following });
    const r = await post(w, id, keysSubmission(ev));
    assert.equal(r.status, 200, `event ${i}: ${r.text}`);
    prev = r.json.record.hash;
    nextKey = following;
  }
  const full = rotation({ agentId: id, index: 256, previousHash: prev, authority: "next", revealed: nextKey, current: nextKey, next: freshKey() });
  const r = await post(w, id, keysSubmission(full));
  assert.equal(r.status, 409, r.text);
  assert.deepEqual(r.json.reason_codes, ["key_log_full"]);
  const served = await keyLog(w, id);
  assert.equal(served.records.length, 256);
  assert.equal(served.keys.index, 255);
  assert.equal(sha256hex(Buffer.from(served.records[0].event.public_key, "hex")), id);
});

test("signed reads after a rotation: the new key reads as the agent, the rotated one gets key_rotated, a stranger's key is refused", async () => {
  const w = await worker();
  const g = freshKey();
  const n1 = freshKey();
  const id = g.digest;
  const reader = freshKey();
  const rid = reader.digest;
  // A private capsule granted to the reader; the reader has its own agent.
  const secret = exampleCapsule(id, { access_control: { public: false, authorized_readers: [rid] } });
  assert.equal((await write(w, g, id, 1, secret)).status, 200);
  assert.equal((await write(w, reader, rid, 1)).status, 200);
  const url = capsulePath(id);
  const read = (key, keyid) =>
    w.fetch(url, { headers: signedReadHeaders(as(key, keyid), "GET", BASE + url, { keyid }) });
  assert.equal((await read(reader, rid)).status, 200, "granted, before any rotation");

  const n2 = freshKey();
  assert.equal((await post(w, rid, keysSubmission(inception({ genesis: reader, next: n1 })))).status, 200);
  const prev = (await keyLog(w, rid)).records[0].hash;
  const rot = rotation({ agentId: rid, index: 1, previousHash: prev, authority: "next", revealed: n1, current: n1, next: n2 });
  assert.equal((await post(w, rid, keysSubmission(rot))).status, 200);

  const byNew = await read(n1, rid);
  assert.equal(byNew.status, 200, byNew.text);
  assert.equal(byNew.text, jcs(secret));
  const byOld = await read(reader, rid);
  assert.equal(byOld.status, 403, byOld.text);
  assert.equal(byOld.json.error, "key_rotated");
  const byStranger = await read(freshKey(), rid);
  assert.equal(byStranger.status, 401, byStranger.text);
  assert.equal(byStranger.json.error, "read_signature_invalid");
  // Once more: n1 is rotated out too, which only the log itself can tell
  // from a stranger's key.
  const n3 = freshKey();
  const prev2 = (await keyLog(w, rid)).records[1].hash;
  const rot2 = rotation({ agentId: rid, index: 2, previousHash: prev2, authority: "next", revealed: n2, current: n2, next: n3 });
  assert.equal((await post(w, rid, keysSubmission(rot2))).status, 200);
  const byN1 = await read(n1, rid);
  assert.equal(byN1.status, 403, byN1.text);
  assert.equal(byN1.json.error, "key_rotated");
  assert.equal((await read(n2, rid)).status, 200);
  // The agent's own reads follow its own log too: its genesis key still
  // reads its private capsule, as it has no log.
  assert.equal((await read(g, id)).status, 200);
});

test("payment claims after a rotation: the current key credits, the rotated-out genesis key and a stranger are refused", async () => {
  const chain = await startChain();
  try {
    const w = await worker({ vars: upgradeVars(chain) });
    const g = freshKey();
    const n1 = freshKey();
    const id = g.digest;
    const ip = nextIp();
    assert.equal((await write(w, g, id, 1)).status, 200);
    assert.equal((await post(w, id, keysSubmission(inception({ genesis: g, next: n1 })))).status, 200);
    const prev = (await keyLog(w, id)).records[0].hash;
    const rot = rotation({ agentId: id, index: 1, previousHash: prev, authority: "next", revealed: n1, current: n1, next: freshKey() });
    assert.equal((await post(w, id, keysSubmission(rot))).status, 200);
    const agent = as(g, id);
    const q = await quoteOk(w, agent, "pro", { ip });
    const tx = await pay(chain, q);
    await confirm(chain);
    // The genesis key (a thief may hold it): rotated out.
    const byOld = await claim(w, claimBody(agent, q.invoice_id, tx, 1), { ip });
    assertRefused(byOld, 403, "key_rotated");
    // A key the log never named.
    const byStranger = await claim(w, claimBody(agent, q.invoice_id, tx, 1, { signer: as(freshKey(), id) }), { ip });
    assertRefused(byStranger, 401, "bad_signature");
    // The current key credits the payment, once.
    const ok = await claim(w, claimBody(agent, q.invoice_id, tx, 1, { signer: as(n1, id) }), { ip });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.agent_id, id);
    assert.equal((await w.fetch(headPath(id))).json.tier, "pro");
  } finally {
    await chain.stop();
  }
});
