#!/usr/bin/env node
// Minimal signing helper for trying the service by hand (curl examples in
// README.md). Dependency-free: Node's built-in Ed25519 and a small RFC 8785
// canonicaliser. The `selfcap` CLI is the full client; this is for poking.
//
//   node scripts/sign-envelope.mjs keygen > /tmp/agent.key      # private seed (hex)
//   node scripts/sign-envelope.mjs id /tmp/agent.key            # agent_id + public key
//   node scripts/sign-envelope.mjs example /tmp/agent.key > /tmp/capsule.json
//   node scripts/sign-envelope.mjs sign /tmp/agent.key 1 /tmp/capsule.json > /tmp/envelope.json
import crypto from "node:crypto";
import { readFileSync } from "node:fs";

const PKCS8_ED25519_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

function jcs(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(jcs).join(",") + "]";
  return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + jcs(v[k])).join(",") + "}";
}

function load(keyFile) {
  const seed = Buffer.from(readFileSync(keyFile, "utf8").trim(), "hex");
  if (seed.length !== 32) throw new Error(`${keyFile}: expected 64 hex characters (a 32-byte seed)`);
  const privateKey = crypto.createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]),
    format: "der",
    type: "pkcs8",
  });
  const raw = Buffer.from(crypto.createPublicKey(privateKey).export({ format: "jwk" }).x, "base64url");
  return { privateKey, publicKey: raw.toString("hex"), agentId: crypto.createHash("sha256").update(raw).digest("hex") };
}

const [cmd, ...args] = process.argv.slice(2);
switch (cmd) {
  case "keygen":
    console.log(crypto.randomBytes(32).toString("hex"));
    break;
  case "id": {
    const k = load(args[0]);
    console.log(JSON.stringify({ agent_id: k.agentId, public_key: k.publicKey }, null, 2));
    break;
  }
  case "example": {
    const k = load(args[0]);
    const capsule = {
      schema_version: "self_capsule_v0",
      agent_id: k.agentId,
      policy: {
        policy_version: "v0",
        rehydrate_mode: "strict",
        deny_external_instructions: true,
        deny_tool_instructions_in_text: true,
        memory_budget: { max_rehydrate_tokens: 900, max_objectives: 8 },
      },
      objectives: [{ id: "try-self-capsule", status: "in_progress", priority: "med", title: "Publish a first capsule" }],
      self_motto: "Rehydrate from primitives.",
    };
    console.log(JSON.stringify(capsule, null, 2));
    break;
  }
  case "sign": {
    const [keyFile, seqText, capsuleFile] = args;
    const k = load(keyFile);
    const seq = Number(seqText);
    if (!Number.isSafeInteger(seq) || seq < 0) throw new Error("seq must be an integer >= 0");
    const capsule = JSON.parse(readFileSync(capsuleFile, "utf8"));
    const digest = crypto.createHash("sha256").update(jcs({ agent_id: k.agentId, seq, capsule })).digest();
    const signature = crypto.sign(null, digest, k.privateKey).toString("hex");
    console.log(
      JSON.stringify({ agent_id: k.agentId, public_key: k.publicKey, seq, signature_alg: "ed25519", signature, capsule }),
    );
    break;
  }
  default:
    console.error("usage: sign-envelope.mjs keygen | id KEY | example KEY | sign KEY SEQ CAPSULE.json");
    process.exit(2);
}
