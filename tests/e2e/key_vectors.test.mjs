// The key-log vectors (tests/vectors/keys/*.json, §14) checked with the
// independent JS client in key-helpers.mjs: event signatures, the sealed
// records' hashes and chain, and byte-for-byte reproduction of accepted events.
// No Worker needed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import crypto from "node:crypto";
import { jcs } from "./helpers.mjs";
import {
  eventDigest,
  freshKey,
  inception,
  keyFromSeed,
  keysSubmission,
  publicKeyFromHex,
  recommit,
  recordHash,
  rotation,
  signEvent,
  verifyEventSignatures,
} from "./key-helpers.mjs";

const dir = new URL("../vectors/keys/", import.meta.url);
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".json") && f !== "verifier.json")
  .sort();
const load = (f) => JSON.parse(readFileSync(new URL(f, dir), "utf8"));

// The generator's agent keys come from seeds [n; 32]; index them by public key and by digest.
// routine_rotation.json needs n in 1..=40; other scenarios' thief and recovery keys go higher.
function seededKeys(max) {
  const seeded = Array.from({ length: max }, (_, i) => ({ n: i + 1, key: keyFromSeed(Buffer.alloc(32, i + 1)) }));
  return {
    max,
    byPublic: new Map(seeded.map((s) => [s.key.publicHex, s])),
    byDigest: new Map(seeded.map((s) => [s.key.digest, s])),
  };
}
const upTo40 = seededKeys(40);
const upTo255 = seededKeys(255);

const accepted = (step) => step.expect.status === 200 && step.expect.applied === "new";

test("there are key vectors", () => {
  assert.ok(files.length >= 10, files.join(","));
  assert.ok(files.includes("routine_rotation.json"));
});

for (const file of files) {
  const v = load(file);

  test(`${file}: event signatures hold exactly where the vector says they do`, () => {
    assert.ok(v.steps.length > 0);
    for (const [i, step] of v.steps.entries()) {
      const e = step.event;
      assert.equal(eventDigest(e).length, 32);
      const sigs = verifyEventSignatures(e);
      const fine = sigs.public && sigs.revealed !== false;
      const badSignature = step.expect.reason_code === "bad_signature";
      assert.equal(fine, !badSignature, `step ${i} (${e.type}/${e.authority}, expect ${JSON.stringify(step.expect)}): ${JSON.stringify(sigs)}`);
      // `revealed` is present exactly when revealed_key differs from public_key.
      const needsRevealed = e.revealed_key !== undefined && e.revealed_key !== e.public_key;
      if (!badSignature) assert.equal("revealed" in e.signatures, needsRevealed, `step ${i}`);
    }
  });

  test(`${file}: sealed records hash over their own bytes and chain`, () => {
    let previous = null;
    for (const [i, record] of v.log.entries()) {
      assert.equal(recordHash(record), record.hash, `record ${i}`);
      // Sealed as §9 seals entries: Ed25519 by the service key over the ASCII hash hex.
      const serviceKey = v.service_keyring.keys[record.signed_by];
      assert.ok(serviceKey && serviceKey.startsWith(record.signed_by), `record ${i} signed_by`);
      assert.ok(
        crypto.verify(null, Buffer.from(record.hash, "ascii"), publicKeyFromHex(serviceKey), Buffer.from(record.service_signature, "hex")),
        `record ${i} service_signature`,
      );
      assert.equal(record.event.index, i, `record ${i} index`);
      assert.equal(record.event.previous_hash, previous, `record ${i} previous_hash`);
      // Every record holds an event some step submitted and got accepted, bytes unchanged.
      assert.ok(
        v.steps.some((s) => accepted(s) && jcs(s.event) === jcs(record.event)),
        `record ${i}: its event is an accepted step's`,
      );
      previous = record.hash;
    }
    assert.equal(v.log.length, v.steps.filter(accepted).length);
    if (v.log.length) assert.equal(v.keys.head_hash, previous);
  });
}

// Rebuilds an accepted event with the builders, from the seeded keys it names.
function rebuild(e, { max, byPublic, byDigest }) {
  const key = (map, hex, what) => {
    const s = map.get(hex);
    assert.ok(s, `${what} ${hex} is not from a seed [n;32], n in 1..=${max}`);
    return s.key;
  };
  const next = key(byDigest, e.next_key_digest, "next_key_digest");
  const recovery = e.recovery_key_digest === null ? null : key(byDigest, e.recovery_key_digest, "recovery_key_digest");
  const current = key(byPublic, e.public_key, "public_key");
  const common = { agentId: e.agent_id, next, recovery };
  switch (e.type) {
    case "inception":
      return inception({ ...common, genesis: current, windowSec: e.recovery_window_sec });
    case "rotation":
      return rotation({
        ...common,
        index: e.index,
        previousHash: e.previous_hash,
        authority: e.authority,
        revealed: key(byPublic, e.revealed_key, "revealed_key"),
        current,
        supersedes: e.supersedes,
        disputesAfter: e.disputes_after,
      });
    case "recommit":
      return recommit({ ...common, index: e.index, previousHash: e.previous_hash, current });
    default:
      throw new Error(`unknown type ${e.type}`);
  }
}

test("routine_rotation.json: the builders reproduce every accepted event byte for byte", (t) => {
  const v = load("routine_rotation.json");
  const steps = v.steps.filter(accepted);
  assert.equal(steps.length, 3);
  const seeds = new Set();
  for (const { event } of steps) {
    for (const hex of [event.public_key, event.revealed_key].filter(Boolean)) seeds.add(upTo40.byPublic.get(hex)?.n);
    seeds.add(upTo40.byDigest.get(event.next_key_digest)?.n);
    assert.equal(jcs(rebuild(event, upTo40)), jcs(event), `${event.type} at index ${event.index}`);
  }
  t.diagnostic(`seeds used: ${[...seeds].sort((a, b) => a - b).join(", ")}`);
  // The genesis key is the agent's id.
  assert.equal(upTo40.byPublic.get(steps[0].event.public_key).key.digest, v.agent_id);
});

test("every scenario: the builders reproduce every submitted event, accepted or not, byte for byte", () => {
  for (const file of files) {
    for (const [i, { event }] of load(file).steps.entries()) {
      assert.equal(jcs(rebuild(event, upTo255)), jcs(event), `${file} step ${i}`);
    }
  }
});

test("a tampered event or a signature by the wrong key does not verify", () => {
  const { event } = load("routine_rotation.json").steps[2]; // has both signatures
  assert.deepEqual(verifyEventSignatures(event), { public: true, revealed: true });
  // Any member changed under the signatures breaks both.
  assert.deepEqual(verifyEventSignatures({ ...event, index: 3 }), { public: false, revealed: false });
  // Swapped signatures: each is by the other key.
  const swapped = { ...event, signatures: { public: event.signatures.revealed, revealed: event.signatures.public } };
  assert.deepEqual(verifyEventSignatures(swapped), { public: false, revealed: false });
  // A missing `revealed` where revealed_key differs from public_key.
  assert.equal(verifyEventSignatures({ ...event, signatures: { public: event.signatures.public } }).revealed, false);
  // A flipped bit in S.
  const sig = Buffer.from(event.signatures.public, "hex");
  sig[40] ^= 1;
  assert.equal(verifyEventSignatures({ ...event, signatures: { ...event.signatures, public: sig.toString("hex") } }).public, false);
});

test("builders with fresh keys: shapes per type and signatures that verify", () => {
  const [genesis, k1, k2, k3, rec] = [freshKey(), freshKey(), freshKey(), freshKey(), freshKey()];
  const base = ["v", "type", "agent_id", "index", "previous_hash", "authority", "public_key", "next_key_digest", "recovery_key_digest", "signatures"];
  const members = (e) => Object.keys(e).sort();

  const e0 = inception({ genesis, next: k1, recovery: rec });
  assert.deepEqual(members(e0), [...base, "recovery_window_sec"].sort());
  assert.equal(e0.agent_id, genesis.digest);
  assert.equal(e0.recovery_window_sec, 259200);
  assert.equal(e0.recovery_key_digest, rec.digest);
  assert.deepEqual(verifyEventSignatures(e0), { public: true, revealed: null });

  const h0 = "ab".repeat(32);
  // Rotating to the committed key itself: one signature.
  const e1 = rotation({ agentId: genesis.digest, index: 1, previousHash: h0, authority: "next", revealed: k1, current: k1, next: k2 });
  assert.deepEqual(members(e1), [...base, "revealed_key", "supersedes", "disputes_after"].sort());
  assert.deepEqual(Object.keys(e1.signatures), ["public"]);
  assert.equal(e1.recovery_key_digest, null);
  assert.equal(e1.supersedes, null);
  assert.equal(e1.disputes_after, null);
  assert.deepEqual(verifyEventSignatures(e1), { public: true, revealed: null });

  // Revealing the committed key and making a fresh one current: two signatures.
  const e2 = rotation({ agentId: genesis.digest, index: 2, previousHash: h0, authority: "recovery", revealed: rec, current: k3, next: k2, supersedes: { index: 1, hash: h0 }, disputesAfter: { seq: 4, cursor: "sha256:" + "cd".repeat(32) } });
  assert.deepEqual(Object.keys(e2.signatures).sort(), ["public", "revealed"]);
  assert.deepEqual(verifyEventSignatures(e2), { public: true, revealed: true });

  const e3 = recommit({ agentId: genesis.digest, index: 3, previousHash: h0, current: k3, next: k1 });
  assert.deepEqual(members(e3), base.slice().sort());
  assert.equal(e3.authority, "current");
  assert.deepEqual(verifyEventSignatures(e3), { public: true, revealed: null });

  assert.deepEqual(keysSubmission(e3), { event: e3 });
  assert.deepEqual(Object.keys(keysSubmission(e3, { seq: 5 })), ["event", "envelope"]);
  // Signing is deterministic (Ed25519) and ignores stale signatures on the input.
  assert.deepEqual(signEvent(e1, k1), e1);
});
