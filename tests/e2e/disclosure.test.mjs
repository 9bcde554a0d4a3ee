// What a stranger learns at the doors that refuse before they authenticate
// (docs/PROTOCOL.md §12: the service does not say whether a private capsule
// exists; §14: keys.json is readable only by whoever may read head.json).
// Each forged request, signed by a stranger's own keys, is sent to four
// agents: one whose capsule is private with a key log, one private without
// a log, one that never published, and (where the answer may differ) one
// public with a key log. The three that must look alike are compared byte
// for byte (status, body with the agent id replaced, content type, cache
// control, the names of the headers). The built Worker in workerd.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { startWorker } from "./harness.mjs";
import { capsulePath, envelope, exampleCapsule, headPath, newAgent, put, T0, HOUR } from "./helpers.mjs";
import { freshKey, inception, keysPath, keysSubmission, recommit, rotation } from "./key-helpers.mjs";
import { CLAIM_PATH, claimBody } from "./upgrade-helpers.mjs";

let w;
after(async () => {
  await w?.close();
});

const at = (ms) => ({ "x-selfcap-test-now": String(ms) });
const NOW = T0 + 3 * HOUR;
/** An envelope signer for `agentId` holding `key`. */
const as = (key, agentId) => ({ privateKey: key.privateKey, publicHex: key.publicHex, agentId });

function postKeys(agentId, body, now = NOW) {
  return w.fetch(keysPath(agentId), {
    method: "POST",
    headers: { "content-type": "application/json", "cf-connecting-ip": "198.51.100.40", ...at(now) },
    body: JSON.stringify(body),
  });
}

async function keyLog(agent) {
  const r = await w.fetch(keysPath(agent.id), { headers: at(NOW) });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

const privateAccess = { public: false, authorized_readers: [] };

/**
 * An agent whose genesis key and next keys the test holds, published with
 * `access` (undefined: public) and, with `log`, a key log of two events
 * (its inception, then a rotation to its committed next key).
 */
async function agentWith({ access, log }) {
  const genesis = freshKey();
  const id = genesis.digest;
  const n1 = freshKey();
  const n2 = freshKey();
  const capsule = exampleCapsule(id, access ? { access_control: access } : {});
  const env = envelope(as(genesis, id), 1, capsule);
  if (!log) {
    const r = await w.fetch(capsulePath(id), put(env, { now: T0 }));
    assert.equal(r.status, 200, r.text);
    return { id, genesis, current: genesis, events: [] };
  }
  const inc = inception({ genesis, next: n1 });
  const r0 = await postKeys(id, keysSubmission(inc, env), T0);
  assert.equal(r0.status, 200, r0.text);
  const rot = rotation({ agentId: id, index: 1, previousHash: r0.json.record.hash, authority: "next", revealed: n1, current: n1, next: n2 });
  const r1 = await postKeys(id, keysSubmission(rot), T0 + HOUR);
  assert.equal(r1.status, 200, r1.text);
  return { id, genesis, current: n1, events: [inc, rot], records: [r0.json.record, r1.json.record] };
}

let privLog; // private, with a key log of two events
let privPlain; // private, no key log
let pubLog; // public, with a key log of two events
let never; // never published
const stranger = { key: freshKey(), key2: freshKey(), key3: freshKey() };

before(async () => {
  w = await startWorker({
    vars: {
      // The claim door refuses a bad signer before any invoice or chain
      // read: an RPC nobody answers is enough.
      UPGRADE_TREASURY: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
      UPGRADE_RPC_URL: "http://127.0.0.1:9",
    },
  });
  privLog = await agentWith({ access: privateAccess, log: true });
  privPlain = await agentWith({ access: privateAccess, log: false });
  pubLog = await agentWith({ access: undefined, log: true });
  const g = freshKey();
  never = { id: g.digest, genesis: g };
  // The private ones really are private: head.json is the never-published miss.
  for (const a of [privLog, privPlain]) {
    const r = await w.fetch(headPath(a.id), { headers: at(NOW) });
    assert.equal(r.status, 404);
  }
});

/** The answer with the target's agent id replaced by a placeholder. */
function seen(r, agentId) {
  const text = r.text.replaceAll(agentId, "<agent>");
  return {
    status: r.status,
    body: text,
    contentType: r.headers.get("content-type"),
    cacheControl: r.headers.get("cache-control"),
    headerNames: [...r.headers.keys()].filter((k) => k !== "date").sort(),
  };
}

/**
 * Sends the request `make(agent)` builds to the two private agents and the
 * one that never published, asserts the three answers are alike, and
 * returns the never-published one's.
 */
async function alike(what, make) {
  const answers = [];
  for (const a of [never, privPlain, privLog]) {
    answers.push(seen(await make(a), a.id));
  }
  assert.deepEqual(answers[1], answers[0], `${what}: a private capsule without a key log answers as one never published`);
  assert.deepEqual(answers[2], answers[0], `${what}: a private capsule with a key log answers as one never published`);
  for (const a of answers) {
    assert.ok(!/event\(s\)|previous_hash "|index \d+ with|key index/.test(a.body), `${what}: no log state in ${a.body}`);
  }
  return answers[0];
}

const randomHash = () => crypto.randomBytes(32).toString("hex");

test("key events signed by a stranger's keys: the same answer for a private agent, with or without a key log, as for one never published", async () => {
  const forged = {
    // A made-up rotation at the next place, signed by the stranger's keys.
    "rotation at index 2": (a) =>
      rotation({ agentId: a.id, index: 2, previousHash: randomHash(), authority: "next", revealed: stranger.key, current: stranger.key2, next: stranger.key3 }),
    "rotation at index 1": (a) =>
      rotation({ agentId: a.id, index: 1, previousHash: randomHash(), authority: "next", revealed: stranger.key, current: stranger.key2, next: stranger.key3 }),
    "recovery rotation": (a) =>
      rotation({ agentId: a.id, index: 5, previousHash: randomHash(), authority: "recovery", revealed: stranger.key, current: stranger.key, next: stranger.key3 }),
    recommit: (a) => recommit({ agentId: a.id, index: 2, previousHash: randomHash(), current: stranger.key, next: stranger.key3 }),
  };
  for (const [what, make] of Object.entries(forged)) {
    const r = await alike(what, (a) => postKeys(a.id, keysSubmission(make(a))));
    assert.equal(r.status, 403, `${what}: ${r.body}`);
    assert.deepEqual(JSON.parse(r.body).reason_codes, ["rotation_not_committed"], what);
    // A public agent's log is readable by anyone, but the answer is the same.
    const p = seen(await postKeys(pubLog.id, keysSubmission(make(pubLog))), pubLog.id);
    assert.deepEqual(p, r, `${what}: a public agent answers the same`);
  }
  // With an envelope signed by the stranger too.
  const withEnvelope = await alike("rotation with an envelope", (a) =>
    postKeys(
      a.id,
      keysSubmission(
        rotation({ agentId: a.id, index: 2, previousHash: randomHash(), authority: "next", revealed: stranger.key, current: stranger.key2, next: stranger.key3 }),
        envelope(as(stranger.key2, a.id), 99, exampleCapsule(a.id)),
      ),
    ),
  );
  assert.equal(withEnvelope.status, 403);
  // Nothing changed: the private log still has its two events.
  const log = await w.fetch(keysPath(privLog.id), { headers: at(NOW) });
  assert.equal(log.status, 404, "keys.json of a private capsule is the never-published miss");
});

test("the agent's own keys are told an event is stale, and nothing of the log (keys.json says that)", async () => {
  // A stale rotation by the agent's current key: refused as stale.
  const n = freshKey();
  const stale = rotation({ agentId: privLog.id, index: 1, previousHash: privLog.records[0].hash, authority: "next", revealed: privLog.current, current: privLog.current, next: n });
  const r = await postKeys(privLog.id, keysSubmission(stale));
  assert.equal(r.status, 409, r.text);
  assert.deepEqual(r.json.reason_codes, ["key_event_stale"]);
  assert.ok(!r.text.includes(privLog.records[1].hash) && !/event\(s\)/.test(r.text), r.text);
});

test("the exact bytes of an accepted event again: applied once, and the answer describes that event, not the log since", async () => {
  const r = await postKeys(privLog.id, keysSubmission(privLog.events[0]));
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.applied, "already_applied");
  assert.equal(r.json.index, 0);
  assert.equal(r.json.keys.length, 1, "the summary as of event 0, not the log's two events");
  assert.equal(r.json.keys.head_hash, privLog.records[0].hash);
  assert.equal(r.json.keys.public_key, privLog.genesis.publicHex);
});

test("a PUT signed by a stranger's key: the same answer for a private agent with a key log as for one never published", async () => {
  const forged = {
    "a valid signature by the stranger": (a) => envelope(as(stranger.key, a.id), 7, exampleCapsule(a.id)),
    "a signature that does not verify": (a) => ({ ...envelope(as(stranger.key, a.id), 7, exampleCapsule(a.id)), signature: "ab".repeat(64) }),
    "no signature": (a) => {
      const { signature, ...rest } = envelope(as(stranger.key, a.id), 7, exampleCapsule(a.id));
      return rest;
    },
    "a replayed seq": (a) => envelope(as(stranger.key, a.id), 1, exampleCapsule(a.id)),
  };
  for (const [what, make] of Object.entries(forged)) {
    const r = await alike(`PUT: ${what}`, (a) => w.fetch(capsulePath(a.id), put(make(a), { now: NOW })));
    assert.equal(r.status, 401, `${what}: ${r.body}`);
    assert.deepEqual(JSON.parse(r.body).reason_codes, ["bad_signature"], what);
  }
  // The same through the remote MCP door's self_submit.
  for (const [what, make] of Object.entries(forged)) {
    const r = await alike(`self_submit: ${what}`, (a) =>
      w.fetch("/mcp", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...at(NOW) },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "self_submit", arguments: { envelope: make(a) } } }),
      }),
    );
    assert.equal(r.status, 200, r.body);
    const result = JSON.parse(r.body).result;
    assert.equal(result.isError, true, r.body);
    assert.match(result.content[0].text, /bad_signature/);
  }
  // The rotated-out genesis key is the agent's own: it is told so.
  const old = await w.fetch(capsulePath(privLog.id), put(envelope(as(privLog.genesis, privLog.id), 9, exampleCapsule(privLog.id)), { now: NOW }));
  assert.equal(old.status, 403, old.text);
  assert.deepEqual(old.json.reason_codes, ["key_rotated"]);
  assert.ok(!/index \d/.test(old.json.detail), `no key count in ${old.json.detail}`);
});

test("an upgrade claim signed by a stranger's key: the same answer for a private agent with a key log as for one never published", async () => {
  const tx = "0x" + randomHash();
  const r = await alike("claim", (a) =>
    w.fetch(CLAIM_PATH, {
      method: "POST",
      headers: { "content-type": "application/json", "cf-connecting-ip": "198.51.100.41", ...at(NOW) },
      body: JSON.stringify(claimBody({ agentId: a.id }, "inv_" + a.id.slice(0, 16) + "0".repeat(16), tx, 1, { signer: { privateKey: stranger.key.privateKey, publicHex: stranger.key.publicHex } })),
    }),
  );
  assert.equal(r.status, 401, r.body);
  assert.equal(JSON.parse(r.body).error, "bad_signature");
});
