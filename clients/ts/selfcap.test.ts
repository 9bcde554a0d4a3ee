// The TypeScript snippet reproduces tests/vectors/signing.json byte for byte.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { agentId, cursor, jcs, keyFromSeed, publicKeyHex, signEnvelope, writeDigest } from "./selfcap.js";

const v = JSON.parse(readFileSync(new URL("../../../tests/vectors/signing.json", import.meta.url), "utf8"));
const key = keyFromSeed(v.seed_hex);

test("identity", () => {
  assert.equal(publicKeyHex(key), v.public_key);
  assert.equal(agentId(key), v.agent_id);
});

test("canonical bytes and cursor", () => {
  assert.equal(jcs(v.capsule), v.capsule_jcs);
  assert.equal(Buffer.byteLength(jcs(v.capsule)), v.capsule_bytes);
  assert.equal(cursor(v.capsule), v.cursor);
});

test("message, digest, signature, envelope", () => {
  assert.equal(jcs({ agent_id: v.agent_id, seq: v.seq, capsule: v.capsule }), v.message_jcs);
  assert.equal(writeDigest(v.agent_id, v.seq, v.capsule).toString("hex"), v.digest_hex);
  const envelope = signEnvelope(key, v.seq, v.capsule);
  assert.equal(envelope.signature, v.signature);
  assert.deepEqual(envelope, v.envelope);
  assert.equal(jcs(envelope as any), jcs(v.envelope));
});
