// Client side of the key log (docs/PROTOCOL.md §14), written from the spec
// text alone with Node's built-in crypto, so tests check the service and the
// Rust core (src/core/key_log/) against the wire contract, not against itself.
import crypto from "node:crypto";
import { jcs, sha256hex } from "./helpers.mjs";

export const KEYS_V = "selfcap-keys/1";
/** 72 h: the clients' default recovery window (§14, inception). */
export const DEFAULT_WINDOW_SEC = 259200;

// PKCS#8 / SPKI prefixes wrapping a raw 32-byte Ed25519 seed / public key, so
// Node can load them without a JWK round trip.
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/**
 * A key from a 32-byte Ed25519 seed (Buffer/Uint8Array, or 64 hex chars).
 * `digest` is what events commit: lowercase hex SHA-256 of the 32 raw
 * public-key bytes (for a genesis key it is also the agent id, §1).
 */
export function keyFromSeed(seed) {
  const seedBytes = typeof seed === "string" ? Buffer.from(seed, "hex") : Buffer.from(seed);
  if (seedBytes.length !== 32) throw new Error("an Ed25519 seed is 32 bytes");
  const privateKey = crypto.createPrivateKey({
    key: Buffer.concat([PKCS8_PREFIX, seedBytes]),
    format: "der",
    type: "pkcs8",
  });
  const publicKeyRaw = Buffer.from(crypto.createPublicKey(privateKey).export({ format: "jwk" }).x, "base64url");
  return { privateKey, publicKeyRaw, publicHex: publicKeyRaw.toString("hex"), digest: sha256hex(publicKeyRaw) };
}

/** A random key (fresh seed). */
export function freshKey() {
  return keyFromSeed(crypto.randomBytes(32));
}

/** A Node public KeyObject from 64 hex chars of raw Ed25519 public key. */
export function publicKeyFromHex(hex) {
  return crypto.createPublicKey({ key: Buffer.concat([SPKI_PREFIX, Buffer.from(hex, "hex")]), format: "der", type: "spki" });
}

/** The 32 raw bytes every signature is over: SHA-256(JCS(event without "signatures")), as writes sign (§2). */
export function eventDigest(event) {
  const { signatures, ...unsigned } = event;
  return crypto.createHash("sha256").update(Buffer.from(jcs(unsigned), "utf8")).digest();
}

/**
 * Adds `signatures`: `public` by the event's public_key (proof of possession),
 * and `revealed` by revealed_key exactly when it differs from public_key (a
 * rotation to the committed key itself needs only one).
 */
export function signEvent(unsignedEvent, currentKey, revealedKey) {
  const { signatures: _drop, ...event } = unsignedEvent;
  if (currentKey.publicHex !== event.public_key) throw new Error("currentKey is not the event's public_key");
  const digest = eventDigest(event);
  const signatures = { public: crypto.sign(null, digest, currentKey.privateKey).toString("hex") };
  if (event.revealed_key !== undefined && event.revealed_key !== event.public_key) {
    if (!revealedKey || revealedKey.publicHex !== event.revealed_key) throw new Error("revealedKey is not the event's revealed_key");
    signatures.revealed = crypto.sign(null, digest, revealedKey.privateKey).toString("hex");
  }
  return { ...event, signatures };
}

/**
 * Checks an event's signatures against the keys it names: `{public, revealed}`
 * booleans, `revealed` null when none is required (revealed_key absent or equal
 * to public_key). Node's verify, not a strict verifier: enough for well-formed keys.
 */
export function verifyEventSignatures(event) {
  const digest = eventDigest(event);
  const check = (keyHex, sigHex) => {
    if (typeof keyHex !== "string" || typeof sigHex !== "string") return false;
    try {
      return crypto.verify(null, digest, publicKeyFromHex(keyHex), Buffer.from(sigHex, "hex"));
    } catch {
      return false;
    }
  };
  const sigs = event.signatures ?? {};
  const needsRevealed = event.revealed_key !== undefined && event.revealed_key !== event.public_key;
  return {
    public: check(event.public_key, sigs.public),
    // A `revealed` signature where none is due is a shape error, not a good signature.
    revealed: needsRevealed ? check(event.revealed_key, sigs.revealed) : sigs.revealed === undefined ? null : false,
  };
}

// Members every event type carries (§14 table header), `signatures` added by signEvent.
function common({ type, agentId, index, previousHash, authority, current, next, recovery }) {
  return {
    v: KEYS_V,
    type,
    agent_id: agentId,
    index,
    previous_hash: previousHash,
    authority,
    public_key: current.publicHex,
    next_key_digest: next.digest,
    recovery_key_digest: recovery ? recovery.digest : null,
  };
}

/** Index 0, signed by the genesis key; the agent id defaults to the genesis key's digest. */
export function inception({ agentId, genesis, next, recovery = null, windowSec = DEFAULT_WINDOW_SEC }) {
  const event = {
    ...common({ type: "inception", agentId: agentId ?? genesis.digest, index: 0, previousHash: null, authority: "genesis", current: genesis, next, recovery }),
    recovery_window_sec: windowSec,
  };
  return signEvent(event, genesis);
}

/**
 * Reveals the committed `next` (or `recovery`) key and makes `current` the
 * agent's key; `revealed` may be `current` itself. `supersedes` is
 * `{index, hash}` (recovery only), `disputesAfter` is `{seq, cursor}`.
 */
export function rotation({ agentId, index, previousHash, authority, revealed, current, next, recovery = null, supersedes = null, disputesAfter = null }) {
  const event = {
    ...common({ type: "rotation", agentId, index, previousHash, authority, current, next, recovery }),
    revealed_key: revealed.publicHex,
    supersedes,
    disputes_after: disputesAfter,
  };
  return signEvent(event, current, revealed);
}

/** Replaces the commitments, signed by the current key; it matures after the window. */
export function recommit({ agentId, index, previousHash, current, next, recovery = null }) {
  return signEvent(common({ type: "recommit", agentId, index, previousHash, authority: "current", current, next, recovery }), current);
}

/**
 * A served record's sealed hash: lowercase hex SHA3-256 over JCS of the record
 * without its seal (`hash`, `service_signature`, `signed_by`), as §9 seals
 * history entries. The next event's previous_hash.
 */
export function recordHash(record) {
  const { hash, service_signature, signed_by, ...sealed } = record;
  return crypto.createHash("sha3-256").update(Buffer.from(jcs(sealed), "utf8")).digest("hex");
}

/** The POST /self/{agent_id}/keys.json body; the envelope (a PUT body signed by the new key) is optional. */
export function keysSubmission(event, envelope) {
  return envelope === undefined ? { event } : { event, envelope };
}

export const keysPath = (id) => `/self/${id}/keys.json`;
