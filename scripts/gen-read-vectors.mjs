// Writes tests/vectors/signed_reads.json: signed reads (RFC 9421, Ed25519)
// made by an implementation independent of the service's (npm
// `http-message-sig`, Cloudflare's, with Node's own Ed25519), and what the
// service must answer to each. `tests/read_auth_vectors.rs` replays them
// through `core::read_auth`. Deterministic (fixed seeds, times and nonces;
// Ed25519 signatures are deterministic), so a re-run rewrites the same bytes.
//
//   node scripts/gen-read-vectors.mjs           # (re)write signed_reads.json
//   node scripts/gen-read-vectors.mjs --check   # exit 1 if it is stale
//
// `npm run regen` / `npm run regen:check` run it with the other generators
// (docs/GENERATED.md).
import crypto from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createSignatureSync } from "http-message-sig";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const NOW = 1_800_000_000;
const BASE = "https://self.example.com";

function keyFromSeed(seedHex) {
  const der = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), Buffer.from(seedHex, "hex")]);
  const privateKey = crypto.createPrivateKey({ key: der, format: "der", type: "pkcs8" });
  const publicHex = crypto.createPublicKey(privateKey).export({ type: "spki", format: "der" }).subarray(-32).toString("hex");
  const agentId = crypto.createHash("sha256").update(Buffer.from(publicHex, "hex")).digest("hex");
  return { privateKey, publicHex, agentId, seedHex };
}

// Seeds are arbitrary fixed bytes (SHA-256 of a label), so anyone can rebuild the keys.
const seed = (label) => crypto.createHash("sha256").update(label).digest("hex");
const owner = keyFromSeed(seed("self-capsule signed-read vectors: owner"));
const reader = keyFromSeed(seed("self-capsule signed-read vectors: reader"));
const other = keyFromSeed(seed("self-capsule signed-read vectors: other"));

function sign(key, { method = "GET", url, params, components = ["@method", "@target-uri"], keyid = key.agentId }) {
  const signer = { algorithm: "ed25519", sign: (data) => new Uint8Array(crypto.sign(null, Buffer.from(data), key.privateKey)) };
  const { signature, signatureInput } = createSignatureSync(
    { kind: "request", method, targetUri: url, fields: [] },
    { label: "sig1", components, parameters: { ...params, keyid }, signer },
  );
  return { "signature-input": signatureInput, signature };
}

const capsuleUrl = `${BASE}/self/${owner.agentId}/capsule.json`;
const historyUrl = `${BASE}/api/v1/self/${owner.agentId}/history.json?since=sha256%3A${"0".repeat(64)}&limit=5`;
const vectors = [];
function add(name, { key = reader, method = "GET", url = capsuleUrl, verifyUrl = url, verifyMethod = method, publicHex = key.publicHex, params, components, keyid, expect, now = NOW }) {
  const headers = sign(key, { method, url, params, components, keyid });
  vectors.push({
    name,
    now,
    method: verifyMethod,
    target_uri: verifyUrl,
    headers: { ...headers, "self-public-key": publicHex },
    expect,
    ...(expect === "ok" ? { reader: keyid ?? key.agentId, nonce: params.nonce, created: params.created } : {}),
  });
}
const p = (extra = {}) => ({ created: NOW - 5, nonce: "vector-nonce-0001", alg: "ed25519", ...extra });

add("a reader's signed GET of capsule.json", { params: p(), expect: "ok" });
add("the owner's signed HEAD of history.json with a query", { key: owner, method: "HEAD", url: historyUrl, params: p({ nonce: "vector-nonce-0002" }), expect: "ok" });
add("expires in the future and a tag are fine", { params: p({ nonce: "vector-nonce-0003", expires: NOW + 60, tag: "self-capsule" }), expect: "ok" });
add("created at the edge of the window (300 s old)", { params: p({ created: NOW - 300, nonce: "vector-nonce-0004" }), expect: "ok" });
add("a POST to the remote MCP door", { method: "POST", url: `${BASE}/mcp`, params: p({ nonce: "vector-nonce-0005" }), expect: "ok" });
add("the signature was made for another document", { params: p({ nonce: "vector-nonce-0006" }), verifyUrl: `${BASE}/self/${owner.agentId}/export.json`, expect: "read_signature_invalid" });
add("the signature was made for another method", { params: p({ nonce: "vector-nonce-0007" }), verifyMethod: "POST", expect: "read_signature_invalid" });
add("created is 301 s old", { params: p({ created: NOW - 301, nonce: "vector-nonce-0008" }), expect: "read_signature_expired" });
add("created is 31 s in the future", { params: p({ created: NOW + 31, nonce: "vector-nonce-0009" }), expect: "read_signature_expired" });
add("expires has passed", { params: p({ nonce: "vector-nonce-0010", expires: NOW - 1 }), expect: "read_signature_expired" });
add("no nonce", { params: { created: NOW - 5, alg: "ed25519" }, expect: "read_signature_invalid" });
add("no created", { params: { nonce: "vector-nonce-0011", alg: "ed25519" }, expect: "read_signature_invalid" });
add("keyid is not an agent id", { params: p({ nonce: "vector-nonce-0012" }), keyid: "test-key-ed25519", expect: "read_signature_invalid" });
add("Self-Public-Key is someone else's", { params: p({ nonce: "vector-nonce-0013" }), publicHex: other.publicHex, expect: "read_signature_invalid" });
add("signed by another key under the reader's keyid", { key: other, keyid: reader.agentId, publicHex: reader.publicHex, params: p({ nonce: "vector-nonce-0014" }), expect: "read_signature_invalid" });
add("only @method is covered", { params: p({ nonce: "vector-nonce-0015" }), components: ["@method"], expect: "read_signature_invalid" });

const doc = {
  description: "Signed reads (docs/PROTOCOL.md §12) made with npm http-message-sig and Node's Ed25519; expect is ok or the reason code. Keys: Ed25519 seeds below (SHA-256 of their labels).",
  generated_by: "scripts/gen-read-vectors.mjs",
  keys: Object.fromEntries(Object.entries({ owner, reader, other }).map(([k, v]) => [k, { seed: v.seedHex, public_key: v.publicHex, agent_id: v.agentId }])),
  vectors,
};
const OUT = "tests/vectors/signed_reads.json";
const text = JSON.stringify(doc, null, 2) + "\n";
let old = "";
try { old = readFileSync(path.join(ROOT, OUT), "utf8"); } catch { /* missing counts as stale */ }
if (process.argv.includes("--check")) {
  if (old !== text) {
    console.error(`${OUT} is stale: run npm run regen (or node scripts/gen-read-vectors.mjs)`);
    process.exit(1);
  }
  console.log(`${OUT} is up to date (${vectors.length} vectors)`);
} else if (old === text) {
  console.log(`${OUT} unchanged (${vectors.length} vectors)`);
} else {
  writeFileSync(path.join(ROOT, OUT), text); // only when changed: tests embed it
  console.log(`wrote ${vectors.length} vectors to ${OUT}`);
}
