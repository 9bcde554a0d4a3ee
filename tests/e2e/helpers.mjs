// Client-side helpers for the e2e tests: Ed25519 keys (Node's built-in
// crypto), agent ids, an RFC 8785 (JCS) canonicaliser, envelope signing, and
// the spec's example capsule. Written independently of the Rust core, so the
// tests check the Worker against the wire contract, not against itself.
import crypto from "node:crypto";
import { readFileSync } from "node:fs";
import { createSignatureSync } from "http-message-sig";

/** A fresh Ed25519 identity: { privateKey, publicKeyRaw (Buffer), publicHex, agentId }. */
export function newAgent() {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("ed25519");
  const publicKeyRaw = Buffer.from(publicKey.export({ format: "jwk" }).x, "base64url");
  return {
    privateKey,
    publicKeyRaw,
    publicHex: publicKeyRaw.toString("hex"),
    agentId: sha256hex(publicKeyRaw),
  };
}

export function sha256hex(bytes) {
  return crypto.createHash("sha256").update(bytes).digest("hex");
}

/**
 * RFC 8785: object keys sorted by UTF-16 code units (JS's default string
 * sort), ES6 number serialisation and JSON.stringify string escaping (both
 * are what RFC 8785 specifies), no whitespace.
 */
export function jcs(v) {
  if (v === null || typeof v !== "object") {
    if (typeof v === "number" && !Number.isFinite(v)) throw new Error("non-finite number");
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return "[" + v.map(jcs).join(",") + "]";
  return (
    "{" +
    Object.keys(v)
      .sort()
      .map((k) => JSON.stringify(k) + ":" + jcs(v[k]))
      .join(",") +
    "}"
  );
}

/** "sha256:<hex>" of the canonical capsule: the cursor the service must report. */
export function cursorOf(capsule) {
  return "sha256:" + sha256hex(Buffer.from(jcs(capsule), "utf8"));
}

/** The signed PUT envelope. `overrides` replace envelope fields after signing. */
export function envelope(agent, seq, capsule, overrides = {}) {
  const digest = crypto
    .createHash("sha256")
    .update(Buffer.from(jcs({ agent_id: agent.agentId, seq, capsule }), "utf8"))
    .digest();
  const signature = crypto.sign(null, digest, agent.privateKey).toString("hex");
  return {
    agent_id: agent.agentId,
    public_key: agent.publicHex,
    seq,
    signature_alg: "ed25519",
    signature,
    capsule,
    ...overrides,
  };
}

/** The spec's example capsule, re-addressed to `agentId`. */
export function exampleCapsule(agentId, patch = {}) {
  return {
    schema_version: "self_capsule_v0",
    agent_id: agentId,
    policy: {
      policy_version: "v0",
      rehydrate_mode: "strict",
      deny_external_instructions: true,
      deny_tool_instructions_in_text: true,
      memory_budget: { max_rehydrate_tokens: 900, max_objectives: 8 },
    },
    constraints: [
      { id: "no-shell", type: "no_shell", value: true },
      { id: "no-secrets-export", type: "no_secrets_export", value: true },
      {
        id: "allowed-tools",
        type: "allowed_tools",
        value: ["diffdelta.self.head", "diffdelta.self.get", "web.read"],
      },
      { id: "allowed-domains", type: "allowed_domains", value: ["diffdelta.io", "github.com"] },
    ],
    objectives: [
      {
        id: "rehydrate-v0",
        status: "in_progress",
        priority: "high",
        title: "Maintain a compact self capsule for restart-safe continuity",
        checkpoint: "Update only on objective state transitions; poll head every 10 minutes.",
      },
    ],
    capabilities: {
      tool_allowlist: ["diffdelta.self.head", "diffdelta.self.get", "web.read"],
      feature_flags: ["rehydrate_on_start", "poll_head_10m"],
    },
    pointers: {
      receipts: [
        {
          name: "capsule-spec",
          content_hash: "sha256:" + "a".repeat(64),
          evidence_url: "https://diffdelta.io/docs/spec/self-capsule-v0",
        },
      ],
    },
    self_motto: "Rehydrate from primitives. No transcripts. Safety before speed.",
    ...patch,
  };
}

/** Paths for an agent. */
export const headPath = (id) => `/self/${id}/head.json`;
export const capsulePath = (id) => `/self/${id}/capsule.json`;

/** Request init for a PUT of a JS value (or raw string/bytes). */
export function put(body, { now, ip = "203.0.113.7", headers = {} } = {}) {
  const h = { "content-type": "application/json", "cf-connecting-ip": ip, ...headers };
  if (now !== undefined) h["x-selfcap-test-now"] = String(now);
  return {
    method: "PUT",
    headers: h,
    body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body),
  };
}

/** A fixed epoch for tests that use the injectable clock. */
export const T0 = Date.UTC(2026, 1, 10, 0, 0, 0);
export const HOUR = 3600 * 1000;

/** An identity from a 32-byte Ed25519 seed (hex), e.g. the RFC 8032 test key. */
export function agentFromSeed(seedHex) {
  const der = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), Buffer.from(seedHex, "hex")]);
  const privateKey = crypto.createPrivateKey({ key: der, format: "der", type: "pkcs8" });
  const publicKeyRaw = Buffer.from(
    crypto.createPublicKey(privateKey).export({ format: "jwk" }).x,
    "base64url",
  );
  return {
    privateKey,
    publicKeyRaw,
    publicHex: publicKeyRaw.toString("hex"),
    agentId: sha256hex(publicKeyRaw),
  };
}

/** The core's conformance vectors (tests/vectors/<name>.json). */
export function vectors(name) {
  const url = new URL(`../vectors/${name}.json`, import.meta.url);
  return JSON.parse(readFileSync(url, "utf8"));
}

/** Signs and PUTs `capsule` (default: the example capsule) as `agent` with `seq`. */
export async function publish(w, agent, seq, capsule, opts = {}) {
  const c = capsule === undefined ? exampleCapsule(agent.agentId) : capsule;
  return w.fetch(capsulePath(agent.agentId), put(envelope(agent, seq, c), opts));
}

/**
 * Everything a reader can observe about an agent (for the hard-reject
 * invariants): capsule bytes, head fields except the generation time, and
 * the raw KV mirror.
 */
export async function observe(w, agentId, now) {
  const headers = now === undefined ? {} : { "x-selfcap-test-now": String(now) };
  const capsule = await w.fetch(capsulePath(agentId), { headers });
  const head = await w.fetch(headPath(agentId), { headers });
  const h = head.json ? { ...head.json } : head.json;
  if (h) delete h.generated_at;
  return {
    capsuleStatus: capsule.status,
    capsule: capsule.text,
    etag: capsule.headers.get("etag"),
    headStatus: head.status,
    head: h,
    kv: await w.kv.get(`self:capsule:${agentId}`),
  };
}

/**
 * HTTP status per reason code, restated from the spec's table so the tests
 * check the service against the spec rather than against its own table.
 */
export function expectedStatus(code) {
  const fixed = {
    payload_too_large: 413,
    invalid_json: 400,
    bad_seq: 400,
    bad_signature: 401,
    replay_seq: 409,
    capsule_too_large: 413,
    write_quota_exceeded: 429,
    new_agent_ip_quota_exceeded: 429,
    cooldown_active: 429,
  };
  return fixed[code] ?? 422;
}

/** Deep-replaces every string equal to `from` (and its upper-case form). */
export function readdress(value, from, to) {
  if (typeof value === "string") {
    if (value === from) return to;
    if (value === from.toUpperCase()) return to.toUpperCase();
    return value;
  }
  if (Array.isArray(value)) return value.map((v) => readdress(v, from, to));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, readdress(v, from, to)]));
  }
  return value;
}

/**
 * Headers of a signed read (docs/PROTOCOL.md §12) of `url` (absolute) by
 * `agent`: RFC 9421 via npm `http-message-sig` and Node's Ed25519.
 */
export function signedReadHeaders(agent, method, url, { created = Math.floor(Date.now() / 1000), nonce = crypto.randomBytes(16).toString("base64url"), keyid = agent.agentId } = {}) {
  const signer = { algorithm: "ed25519", sign: (d) => new Uint8Array(crypto.sign(null, Buffer.from(d), agent.privateKey)) };
  const { signature, signatureInput } = createSignatureSync(
    { kind: "request", method, targetUri: url, fields: [] },
    { label: "sig1", components: ["@method", "@target-uri"], parameters: { created, nonce, keyid, alg: "ed25519" }, signer },
  );
  return { "signature-input": signatureInput, signature, "self-public-key": agent.publicHex };
}
