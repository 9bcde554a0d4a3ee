// An independent implementation of the Self Capsule wire in TypeScript, written
// from docs/PROTOCOL.md with its own libraries, kept as a conformance check (the
// client to use is the npm package `selfcap`, clients/ts/npm). Ed25519 from Node's built-in
// crypto, RFC 8785 from the `canonicalize` package, RFC 9421 (signed reads of
// private capsules) from `http-message-sig`, fetch from Node >= 20.
// Signing is exactly docs/PROTOCOL.md §2 and §12; selfcap.test.ts checks it
// byte for byte against tests/vectors/signing.json, and signed reads against
// an RFC 9421 check of its own that tests/vectors/signed_reads.json validates.
import { createHash, createPrivateKey, createPublicKey, randomBytes, sign, type KeyObject } from "node:crypto";
import canonicalizeModule from "canonicalize";
import { createSignatureSync } from "http-message-sig";

// The package is CommonJS (`module.exports = fn`) while its typings declare an
// ES default export; under NodeNext the default import *is* the function.
const canonicalize = canonicalizeModule as unknown as (value: unknown) => string | undefined;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** RFC 8785 canonical text (throws on values JSON cannot carry). */
export function jcs(value: Json): string {
  const text = canonicalize(value);
  if (text === undefined) throw new Error("value cannot be canonicalised");
  return text;
}

const sha256 = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest();

/** An Ed25519 private key from its 32-byte RFC 8032 seed (hex). */
export function keyFromSeed(seedHex: string): KeyObject {
  const pkcs8Prefix = Buffer.from("302e020100300506032b657004220420", "hex");
  return createPrivateKey({
    key: Buffer.concat([pkcs8Prefix, Buffer.from(seedHex, "hex")]),
    format: "der",
    type: "pkcs8",
  });
}

/** The raw 32-byte public key, lowercase hex (the envelope's public_key). */
export function publicKeyHex(key: KeyObject): string {
  const jwk = createPublicKey(key).export({ format: "jwk" });
  return Buffer.from(jwk.x as string, "base64url").toString("hex");
}

/** agent_id = lowercase hex SHA-256 of the raw public key bytes. */
export function agentId(key: KeyObject): string {
  return createHash("sha256").update(Buffer.from(publicKeyHex(key), "hex")).digest("hex");
}

/** "sha256:" + hex SHA-256 of the capsule's RFC 8785 bytes. */
export function cursor(capsule: Json): string {
  return "sha256:" + sha256(jcs(capsule)).toString("hex");
}

/** The 32 bytes a write signs: SHA-256(JCS({agent_id, seq, capsule})). */
export function writeDigest(agent: string, seq: number, capsule: Json): Buffer {
  return sha256(jcs({ agent_id: agent, seq, capsule }));
}

export interface Envelope {
  agent_id: string;
  public_key: string;
  seq: number;
  signature_alg: "ed25519";
  signature: string;
  capsule: Json;
}

/** The PUT body: Ed25519 over the 32 raw digest bytes (not their hex). */
export function signEnvelope(key: KeyObject, seq: number, capsule: Json): Envelope {
  const agent = agentId(key);
  return {
    agent_id: agent,
    public_key: publicKeyHex(key),
    seq,
    signature_alg: "ed25519",
    signature: sign(null, writeDigest(agent, seq, capsule), key).toString("hex"),
    capsule,
  };
}

/** The headers that let this agent read a private capsule it may read (its own, or one
 * whose owner granted it): a fresh signature over the method and the full URL, exactly
 * as sent. Sign every request anew: each nonce is accepted once. */
export function signedReadHeaders(key: KeyObject, method: string, url: string): Record<string, string> {
  const { signature, signatureInput } = createSignatureSync(
    { kind: "request", method, targetUri: url, fields: [] },
    {
      label: "sig1",
      components: ["@method", "@target-uri"],
      parameters: {
        created: Math.floor(Date.now() / 1000),
        nonce: randomBytes(16).toString("base64url"),
        keyid: agentId(key), // the reader's agent id
        alg: "ed25519",
      },
      signer: { algorithm: "ed25519", sign: (data) => new Uint8Array(sign(null, data, key)) },
    },
  );
  return { "self-public-key": publicKeyHex(key), "signature-input": signatureInput, signature };
}

export interface Answer {
  status: number;
  body: any;
  etag: string | null;
}

/** head / get / put for one agent. head and get read another agent with `agent`, and
 * sign the read with `signed` (needed for a private capsule: unsigned, it answers 404
 * like a missing one). */
export class SelfCapsule {
  readonly agentId: string;
  constructor(
    readonly baseUrl: string,
    private readonly key: KeyObject,
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.agentId = agentId(key);
  }

  private async call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, signed = false): Promise<Answer> {
    const url = this.baseUrl + path;
    const res = await fetch(url, {
      method,
      headers: { "content-type": "application/json", ...headers, ...(signed ? signedReadHeaders(this.key, method, url) : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null, etag: res.headers.get("etag") };
  }

  /** GET head.json; pass the last ETag to get a bodiless 304 when nothing changed. */
  head(etag?: string, { agent = this.agentId, signed = false } = {}): Promise<Answer> {
    return this.call("GET", `/self/${agent}/head.json`, undefined, etag ? { "if-none-match": etag } : {}, signed);
  }

  get({ agent = this.agentId, signed = false } = {}): Promise<Answer> {
    return this.call("GET", `/self/${agent}/capsule.json`, undefined, {}, signed);
  }

  /** Sign and publish. On a rejection, body.reason_codes says why (never retry a 4xx
   * except 429, and that only after body.retry_after_sec). */
  put(capsule: Json, seq: number): Promise<Answer> {
    return this.call("PUT", `/self/${this.agentId}/capsule.json`, signEnvelope(this.key, seq, capsule));
  }
}
