// The selfcap package's API. Every protocol rule (RFC 8785, the write
// check, the agent id, the write envelope's signature, RFC 9421 signed
// reads, offline verification, the recovery prompt, key events, the key
// log's verification and its pin) is the Rust core's,
// compiled to wasm (clients/ts/wasm/); this file only moves values in and
// out of it and talks HTTP with the platform's `fetch`. No Node-only API:
// the same code runs in Node >= 20, Deno, browsers and Cloudflare Workers.
import * as core from "./wasm/core.js";

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A capsule (`self_capsule_v0`; schemas/capsule.schema.json). */
export type Capsule = { [key: string]: Json };
/** The service's tiers; each has its own capsule size cap. */
export type Tier = "free" | "pro" | "plus";

/** A finding behind a refusal: a schema problem or a safety rule (never the offending text). */
export type Finding =
  | { code: string; path: string; message: string }
  | { class: "secret" | "injection" | "url"; rule: string; path: string };

/** The body of a refused write (docs/PROTOCOL.md "Rejected"), or of any other non-2xx answer. */
export interface RejectionBody {
  accepted?: false;
  reason_codes?: string[];
  error?: string;
  detail?: string;
  findings?: Finding[];
  retry_after_sec?: number;
  next_write_at?: string;
  max_bytes?: number;
  observed_bytes?: number;
  [key: string]: unknown;
}

/**
 * A refusal: a write the service (or the local pre-check, `local: true`)
 * refused, or a read it answered with an error. `reasonCodes` are the wire
 * codes (docs/PROTOCOL.md), `status` the HTTP status, `whatToDo` what a
 * well-behaved bot does about them (the core's table). After a key
 * rotation, a write or signed read by a rotated-out key is refused with
 * `key_rotated` (403); a key event the service refuses carries its code
 * (`rotation_not_committed`, `key_event_stale`, `recommit_pending`, …), and
 * one refused here before anything was sent has `local: true`.
 */
export class Rejected extends Error {
  override readonly name = "Rejected";
  readonly status: number;
  readonly reasonCodes: string[];
  readonly whatToDo: string[];
  readonly detail: string;
  readonly findings: Finding[];
  /** Seconds until a write may succeed (every 429). */
  readonly retryAfterSec: number | undefined;
  /** Whether this client refused it before sending anything. */
  readonly local: boolean;
  /** The answer's JSON body as received (or as the local check built it). */
  readonly body: RejectionBody;
  /** Whether the key that signed was rotated out of the agent's key log (`key_rotated`): load the current key. */
  get keyRotated(): boolean {
    return this.reasonCodes.includes("key_rotated");
  }

  constructor(status: number, body: RejectionBody, local = false) {
    const codes = body.reason_codes ?? (typeof body.error === "string" ? [body.error] : []);
    const detail = typeof body.detail === "string" ? body.detail : "";
    super(`${local ? "refused locally" : `HTTP ${status}`}: ${codes.join(", ") || "no reason code"}${detail ? ` (${detail})` : ""}`);
    this.status = status;
    this.reasonCodes = codes;
    this.whatToDo = JSON.parse(core.what_to_do(JSON.stringify(codes))) as string[];
    this.detail = detail;
    this.findings = body.findings ?? [];
    this.retryAfterSec = body.retry_after_sec;
    this.local = local;
    this.body = body;
  }
}

function jsonText(value: unknown, what: string): string {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError(`${what} is not a JSON value`);
  return text;
}

/** RFC 8785 canonical JSON text of `value`. */
export function canonicalize(value: unknown): string {
  return core.canonicalize(jsonText(value, "the value"));
}

/** A capsule's cursor: `sha256:` + hex SHA-256 of its RFC 8785 bytes (head.json's `cursor`). */
export function cursor(capsule: unknown): string {
  return core.cursor(jsonText(capsule, "the capsule"));
}

/** What `check` found: nothing (`ok`), or the refusal the service would answer. */
export type CheckResult = { ok: true } | { ok: false; error: Rejected };

/**
 * The service's checks on a capsule itself, in its order and with its
 * codes: the `self_capsule_v0` schema, the safety scan, then the size cap of
 * `tier` (default `free`; the default caps). Offline.
 */
export function check(capsule: unknown, { tier = "free" }: { tier?: Tier } = {}): CheckResult {
  const out = JSON.parse(core.check(jsonText(capsule, "the capsule"), tier)) as null | {
    status: number;
    body: RejectionBody;
  };
  return out === null ? { ok: true } : { ok: false, error: new Rejected(out.status, out.body, true) };
}

/** The verify report (verify.json's shape; docs/PROTOCOL.md §9). */
export interface VerifyReport {
  agent_id: string;
  valid: boolean;
  level: "none" | "structure" | "integrity" | "auth";
  cursor: string | null;
  seq: number | null;
  /** Each check: whether it passed, how many entries it examined, what it found. */
  checks: Record<"schema" | "safety" | "chain" | "signature" | "seal", { ok: boolean; checked: number; failures: unknown[] }>;
  warnings: string[];
  verified_at?: string;
  window: Record<string, unknown>;
  withheld?: number[];
}

/**
 * Verifies an export bundle (export.json) offline with the core's verifier:
 * chain, signatures, seals. `keyring`: the service's keyring
 * (`GET /api/v1/self/keys`, pinned or fetched separately) to check seals
 * against instead of the keys the bundle carries. `agentId`: the agent it
 * must be about.
 */
export function verifyExport(
  exportJson: unknown,
  { keyring, agentId }: { keyring?: unknown; agentId?: string } = {},
): VerifyReport {
  const text = (v: unknown, what: string) => (typeof v === "string" ? v : jsonText(v, what));
  return JSON.parse(
    core.verify_export(
      text(exportJson, "the export"),
      keyring === undefined ? undefined : text(keyring, "the keyring"),
      agentId,
      Date.now(),
    ),
  ) as VerifyReport;
}

/** The deterministic recovery prompt of a capsule (what `selfcap rehydrate` prints). */
export function recoveryPrompt(capsule: unknown): string {
  return core.recovery_prompt(jsonText(capsule, "the capsule"));
}

/** A signed write: the body of `PUT /self/{agent_id}/capsule.json`. */
export interface Envelope {
  agent_id: string;
  public_key: string;
  seq: number;
  signature_alg: "ed25519";
  signature: string;
  capsule: Capsule;
}

/** An identity's secret parts, as `Identity.export()` writes them (keep it secret). */
export interface IdentityExport {
  /** The agent id (SHA-256 of its genesis key; unchanged by rotations). */
  agent_id: string;
  /** The current key's seed (hex). */
  seed: string;
  /** The committed next key's seed (hex), if this identity holds one. */
  next_seed?: string;
  /** The current key's index in the agent's key log (0: the genesis key). */
  key_index?: number;
}

const SEED = /^[0-9a-fA-F]{64}$/;
const seedOf = (hex: unknown, what: string): string => {
  if (typeof hex !== "string" || !SEED.test(hex)) throw new TypeError(`${what}: a seed is 64 hexadecimal characters (32 bytes)`);
  return hex.toLowerCase();
};

/**
 * An agent's Ed25519 key, and optionally its committed next key (key
 * rotation, docs/PROTOCOL.md §14). `agentId` is the hex SHA-256 of the
 * agent's genesis key: the current key's own for a new identity, unchanged
 * when a rotation makes another key current (that key then signs writes and
 * reads as the agent). Keep `seedHex()`, `nextSeedHex()` and `export()`
 * secret: they are the keys.
 */
export class Identity {
  readonly #seed: string;
  readonly #next: string | undefined;
  readonly agentId: string;
  /** The current key (hex). */
  readonly publicKey: string;
  /** The SHA-256 (hex) a key event commits for the current key (e.g. an operator's recovery key's, for `incept()`). */
  readonly keyDigest: string;
  /**
   * The current key's index in the agent's key log (0: the genesis key).
   * Informational: only whether it is 0 (a genesis key, which may incept) matters here.
   */
  readonly keyIndex: number;
  /** The committed next key (hex), when this identity holds one. */
  readonly nextPublicKey: string | undefined;
  /** The SHA-256 (hex) an event commits for the next key. */
  readonly nextKeyDigest: string | undefined;

  private constructor(seed: string, next?: string, agentId?: string, keyIndex = 0) {
    const own = JSON.parse(core.identity(seed)) as { agent_id: string; public_key: string };
    if (agentId !== undefined && !/^[0-9a-f]{64}$/.test(agentId)) {
      throw new TypeError("agentId: 64 lowercase hexadecimal characters");
    }
    if (!Number.isSafeInteger(keyIndex) || keyIndex < 0) throw new TypeError("keyIndex: an integer from 0");
    if (agentId !== undefined && agentId !== own.agent_id && keyIndex === 0) {
      throw new TypeError("a key other than the agent's genesis key has a keyIndex above 0");
    }
    this.#seed = seed;
    this.#next = next;
    this.agentId = agentId ?? own.agent_id;
    this.publicKey = own.public_key;
    this.keyDigest = (JSON.parse(core.key_digest(seed)) as { digest: string }).digest;
    this.keyIndex = keyIndex;
    if (next !== undefined) {
      const d = JSON.parse(core.key_digest(next)) as { public_key: string; digest: string };
      if (d.public_key === own.public_key) throw new TypeError("the next key is the current key");
      this.nextPublicKey = d.public_key;
      this.nextKeyDigest = d.digest;
    }
  }

  /** A new random key (Web Crypto); with `next: true`, a next key too, so the first publish starts a key log. */
  static create({ next = false }: { next?: boolean } = {}): Identity {
    return new Identity(core.generate_seed(), next ? core.generate_seed() : undefined);
  }

  /**
   * The key of a stored 32-byte RFC 8032 seed (64 hex characters); `next`:
   * the committed next key's seed; `agentId` and `keyIndex`: a rotated
   * agent's id and its current key's index (default: this key's own id, 0).
   */
  static fromSeed(hex: string, { next, agentId, keyIndex }: { next?: string; agentId?: string; keyIndex?: number } = {}): Identity {
    return new Identity(seedOf(hex, "seed"), next === undefined ? undefined : seedOf(next, "next"), agentId, keyIndex);
  }

  /** An identity from `export()` (the object or its JSON text). */
  static import(exported: IdentityExport | string): Identity {
    const e = (typeof exported === "string" ? JSON.parse(exported) : exported) as IdentityExport;
    if (typeof e !== "object" || e === null) throw new TypeError("an identity export is an object");
    return Identity.fromSeed(e.seed, { next: e.next_seed, agentId: e.agent_id, keyIndex: e.key_index ?? 0 });
  }

  /** Everything needed to load this identity again (secret: it holds the seeds). */
  export(): IdentityExport {
    const e: IdentityExport = { agent_id: this.agentId, seed: this.#seed };
    if (this.#next !== undefined) e.next_seed = this.#next;
    if (this.keyIndex > 0) e.key_index = this.keyIndex;
    return e;
  }

  /** The same identity with a freshly generated next key (to incept a key log for an identity that has none). */
  withNextKey(): Identity {
    return new Identity(this.#seed, core.generate_seed(), this.agentId, this.keyIndex);
  }

  /** The secret seed, hex. */
  seedHex(): string {
    return this.#seed;
  }

  /** The committed next key's secret seed, hex (`undefined`: none held). */
  nextSeedHex(): string | undefined {
    return this.#next;
  }

  /**
   * The PUT body for `capsule` at `seq`: Ed25519 over SHA-256(JCS({agent_id,
   * seq, capsule})) by the current key; `agent_id` is the agent's, `public_key` the current key.
   */
  signEnvelope(seq: number, capsule: unknown): Envelope {
    return JSON.parse(core.sign_envelope_as(this.#seed, this.agentId, seq, jsonText(capsule, "the capsule"))) as Envelope;
  }

  /**
   * The headers of a signed read (RFC 9421, docs/PROTOCOL.md §12) of `url`
   * exactly as it will be sent: `self-public-key` (the current key),
   * `signature-input` (`keyid` the agent id), `signature`. Each carries a
   * fresh nonce, accepted once: sign every request anew.
   */
  signRead(method: string, url: string): Record<string, string> {
    return JSON.parse(core.sign_read_as(this.#seed, this.agentId, method, url)) as Record<string, string>;
  }

  /** Never prints a seed. */
  toJSON(): { agentId: string; publicKey: string; keyIndex?: number; nextKeyDigest?: string } {
    const out: { agentId: string; publicKey: string; keyIndex?: number; nextKeyDigest?: string } = {
      agentId: this.agentId,
      publicKey: this.publicKey,
    };
    if (this.keyIndex > 0) out.keyIndex = this.keyIndex;
    if (this.nextKeyDigest !== undefined) out.nextKeyDigest = this.nextKeyDigest;
    return out;
  }
}

/** head.json's and keys.json's `keys`: the key log's summary (docs/PROTOCOL.md §14). */
export interface KeysSummary {
  /** The current key's index among the agent's keys. */
  index: number;
  /** The current key (hex). */
  public_key: string;
  /** Events in the log. */
  length: number;
  /** The last record's sealed hash. */
  head_hash: string;
  next_committed: boolean;
  recovery_committed: boolean;
  /** When a provisional next-key rotation becomes final (a recovery key is committed). */
  final_at: string | null;
  pending_recommit: null | { matures_at: string; recovery_committed: boolean };
  /** How many keys' writes are (partly) disputed. */
  disputed: number;
}

/** A key event as the agent signs it (`v` = `selfcap-keys/1`). */
export interface KeyEvent {
  v: "selfcap-keys/1";
  type: "inception" | "rotation" | "recommit";
  agent_id: string;
  index: number;
  previous_hash: string | null;
  authority: "genesis" | "next" | "recovery" | "current";
  public_key: string;
  next_key_digest: string;
  recovery_key_digest: string | null;
  revealed_key?: string;
  recovery_window_sec?: number;
  supersedes?: { index: number; hash: string } | null;
  disputes_after?: { seq: number; cursor: string } | null;
  signatures: { public: string; revealed?: string };
}

/** A sealed record of the key log, as keys.json serves it. */
export interface KeyRecord {
  event: KeyEvent;
  history_sequence: number;
  accepted_at: string;
  hash: string;
  service_signature: string;
  signed_by: string;
}

/** What a client remembers of the last key log it saw for an agent. */
export interface KeyPin {
  length: number;
  head_hash: string;
}

/** A served key log against the pin: `new` (no pin), `consistent` (the pinned log or one extending it), or the service's equivocation. */
export type PinStatus =
  | { status: "new" }
  | { status: "consistent" }
  | { status: "rollback"; pinned: number; served: number }
  | { status: "fork"; index: number; pinned: string; served: string };

/** One problem the core's verifier found in a key log. */
export interface KeyLogFailure {
  index: number | null;
  check: string;
  detail: string;
}

/** keys.json, verified here with the core's verifier against the service's keyring, and compared with the pin. */
export interface KeyLogView {
  agent_id: string;
  /** Every seal, hash, chain link and event rule checked out. */
  valid: boolean;
  /** Records served. */
  length: number;
  /** What the log folds to (null: no log, or one that does not verify). */
  keys: KeysSummary | null;
  failures: KeyLogFailure[];
  records: KeyRecord[];
  /** The next key the log commits now (a matured recommit's included). */
  next_key_digest: string | null;
  /** How the served log compared with the pin given (or the one this client kept). */
  pin: PinStatus;
  /** The pin to keep from now on: the served log's when it verified and is new or consistent, else the old one. */
  keep: KeyPin | null;
}

/** The 200 answer to `POST /self/{agent_id}/keys.json`. */
export interface KeysAnswer {
  accepted: true;
  applied: "new" | "already_applied";
  index: number;
  keys: KeysSummary | null;
  record?: KeyRecord;
  /** The write the envelope made, as a PUT would have answered. */
  write?: Published;
}

/** What `rotate()` and `recommit()` did. */
export interface Rotated extends KeysAnswer {
  /** The identity to use (and store) from now on. */
  identity: Identity;
}

/** head.json (docs/PROTOCOL.md), with the answer's ETag. */
export interface Head {
  agent_id: string;
  cursor: string;
  prev_cursor: string | null;
  changed: boolean;
  seq: number;
  generated_at: string;
  ttl_sec: number;
  capsule_url: string;
  history_url: string;
  verify_url: string;
  writes: { limit_24h: number; used_24h: number; remaining_24h: number; reset_at: string | null };
  tier: Tier;
  paid_until: string | null;
  /** The key log's summary (absent: the agent has no key log). */
  keys?: KeysSummary;
  /** The ETag to send back as `{ etag }` (a 304 then answers `null`). */
  etag: string | null;
}

/** The answer to an accepted write. */
export interface Published {
  accepted: true;
  agent_id: string;
  seq: number;
  cursor: string;
  prev_cursor: string | null;
  changed: boolean;
  writes: { limit_24h: number; used_24h: number; remaining_24h: number; reset_at: string | null };
  /** A write that carried the agent's inception (the first publish of an identity with a next key): the key event's answer. */
  key_event?: { applied: "new" | "already_applied"; index: number; keys: KeysSummary | null };
  [key: string]: unknown;
}

/** What `rehydrate()` found: the agent's current capsule and its recovery prompt. */
export interface Rehydrated {
  capsule: Capsule;
  cursor: string;
  seq: number;
  prompt: string;
}

export interface ClientOptions {
  /** The service's base URL, e.g. `https://self.example`. */
  url: string;
  /** The agent's key: needed to publish, and to read private capsules this agent may read. */
  identity?: Identity;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
}

type Answer = { status: number; headers: Headers; text: string; signed?: boolean };

const isPrivate = (capsule: unknown): boolean => {
  const ac = (capsule as { access_control?: { public?: unknown } } | null)?.access_control;
  return typeof ac === "object" && ac !== null && ac.public === false;
};

/**
 * A client of one Self Capsule service. Reads of an agent are unsigned
 * first (a public read stays anonymous and cacheable); an answer a signed
 * read may change (a `404 capsule_not_found`, which is also how a private
 * capsule looks, or a history with withheld versions) is asked once more,
 * signed, when the client has an identity. Our own reads are signed from
 * the start once we published a private capsule. The same policy as the
 * native `selfcap` client.
 */
export class Client {
  readonly url: string;
  #identity: Identity | undefined;
  readonly #fetch: typeof fetch;
  /** The last key log seen per agent (`keys()`). */
  readonly #pins = new Map<string, KeyPin>();
  /** Our last accepted write (what a disputing rotation re-publishes by default). */
  #lastWrite: { seq: number; capsule: Capsule } | undefined;
  /** The highest seq this client signed (a write must use a greater one). */
  #lastSeq = 0;
  /** Whether our last published capsule is private. */
  #ownPrivate = false;

  constructor({ url, identity, fetch: f }: ClientOptions) {
    if (typeof url !== "string" || !/^https?:\/\//.test(url)) {
      throw new TypeError("url: the service's base URL, http:// or https://");
    }
    this.url = url.replace(/\/+$/, "");
    this.#identity = identity;
    this.#fetch = f ?? globalThis.fetch.bind(globalThis);
  }

  /** The agent's key: the one given, or the one the last `rotate()` or `recommit()` made. */
  get identity(): Identity | undefined {
    return this.#identity;
  }

  #agent(agentId: string | undefined): string {
    const id = agentId ?? this.identity?.agentId;
    if (id === undefined) throw new TypeError("no agent id given and the client has no identity");
    return id;
  }

  #needIdentity(): Identity {
    if (this.identity === undefined) throw new TypeError("this needs a client with an identity");
    return this.identity;
  }

  async #send(
    method: string,
    url: string,
    init: { headers?: Record<string, string>; body?: string; signed?: boolean; signal?: AbortSignal } = {},
  ): Promise<Answer> {
    const headers: Record<string, string> = { ...init.headers };
    if (init.signed) Object.assign(headers, this.#needIdentity().signRead(method, url));
    const res = await this.#fetch(url, { method, headers, body: init.body, signal: init.signal });
    return { status: res.status, headers: res.headers, text: await res.text(), signed: init.signed === true };
  }

  /** A read of one of `agent`'s documents, signed when it needs to be. */
  async #read(agent: string, path: string, headers: Record<string, string> = {}, history = false): Promise<Answer> {
    const url = `${this.url}/self/${agent}/${path}`;
    const own = this.identity !== undefined && agent === this.identity.agentId;
    const first = own && this.#ownPrivate;
    const a = await this.#send("GET", url, { headers, signed: first });
    if (first || this.identity === undefined) return a;
    const notFound = a.status === 404 && errorOf(a) === "capsule_not_found";
    const withheld = history && a.status === 200 && a.text.includes('"withheld":true');
    if (!notFound && !withheld) return a;
    return this.#send("GET", url, { headers, signed: true });
  }

  /** head.json of `agentId` (default: ours); `null` when `etag` is still current (304). */
  async head(agentId?: string, { etag }: { etag?: string } = {}): Promise<Head | null> {
    const a = await this.#read(this.#agent(agentId), "head.json", etag ? { "if-none-match": etag } : {});
    if (a.status === 304) return null;
    return { ...(ok(a) as Omit<Head, "etag">), etag: a.headers.get("etag") };
  }

  /** The current capsule of `agentId` (default: ours). */
  async read(agentId?: string): Promise<Capsule> {
    return ok(await this.#read(this.#agent(agentId), "capsule.json")) as Capsule;
  }

  /** history.json of `agentId` (default: ours), newest first; `since`: only versions after that cursor. */
  async history(agentId?: string, { since }: { since?: string } = {}): Promise<Record<string, unknown>> {
    const q = since === undefined ? "" : `?since=${encodeURIComponent(since)}`;
    return ok(await this.#read(this.#agent(agentId), `history.json${q}`, {}, true)) as Record<string, unknown>;
  }

  /** The service's keyring (`GET /api/v1/self/keys`). */
  async keyring(): Promise<Record<string, unknown>> {
    return ok(await this.#send("GET", `${this.url}/api/v1/self/keys`)) as Record<string, unknown>;
  }

  /**
   * Downloads the agent's export.json and verifies it here, offline, with
   * the core's verifier, against the service's published keyring (not the
   * keys inside the bundle).
   */
  async verify(agentId?: string): Promise<VerifyReport> {
    const agent = this.#agent(agentId);
    const exported = ok(await this.#read(agent, "export.json", {}, true));
    return verifyExport(exported, { keyring: await this.keyring(), agentId: agent });
  }

  /**
   * Publishes `capsule`: checks it locally first (the service's own check;
   * a refusal throws `Rejected` with `local: true` and nothing is sent),
   * then signs it at a seq above both head.json's and any this client signed, and PUTs it.
   * When the identity holds a next key, is on its genesis key and head.json
   * shows no key log, the write carries the agent's inception instead
   * (`POST keys.json` with the envelope: one atomic step, docs/PROTOCOL.md §14).
   * Throws `Rejected` when the service refuses it.
   */
  async publish(capsule: Capsule, { seq }: { seq?: number } = {}): Promise<Published> {
    const me = this.#needIdentity();
    let tier: Tier = "free";
    let floor = this.#lastSeq;
    let hasLog = false;
    const head = await this.#read(me.agentId, "head.json");
    if (head.status === 200) {
      const h = JSON.parse(head.text) as Head;
      tier = h.tier;
      floor = Math.max(floor, h.seq);
      hasLog = h.keys !== undefined && h.keys !== null;
    } else if (head.status !== 404) {
      ok(head);
    }
    const next = seq ?? floor + 1;
    const local = check(capsule, { tier });
    if (!local.ok) throw local.error;
    const envelope = me.signEnvelope(next, capsule);
    this.#lastSeq = Math.max(this.#lastSeq, next);
    let body: Published;
    const nextSeed = me.nextSeedHex();
    if (nextSeed !== undefined && me.keyIndex === 0 && !hasLog) {
      const event = this.#built(core.inception_event(me.seedHex(), nextSeed, undefined, Date.now()));
      const answer = await this.#postKeys(me.agentId, event.event, envelope);
      const key_event = { applied: answer.applied, index: answer.index, keys: answer.keys };
      // An inception the log already held (a retry) takes no envelope: the write goes as a PUT.
      body = { ...(answer.write ?? (await this.#put(me.agentId, envelope))), key_event };
    } else {
      body = await this.#put(me.agentId, envelope);
    }
    this.#ownPrivate = isPrivate(capsule);
    this.#lastWrite = { seq: next, capsule };
    return body;
  }

  /** PUTs a signed envelope. */
  async #put(agent: string, envelope: Envelope): Promise<Published> {
    const a = await this.#send("PUT", `${this.url}/self/${agent}/capsule.json`, {
      headers: { "content-type": "application/json" },
      body: JSON.stringify(envelope),
    });
    return ok(a) as Published;
  }

  /** keys.json of `agent` (as text, signed when it needs to be) and the service's keyring (text). */
  async #keysDocs(agent: string): Promise<{ body: string; keyring: string }> {
    const a = await this.#read(agent, "keys.json");
    ok(a);
    return { body: a.text, keyring: JSON.stringify(await this.keyring()) };
  }

  /** The event a core builder returned, or its refusal (decided by the core, before anything is sent). */
  #built(out: string): { event: KeyEvent; key_index: number; public_key: string } {
    const r = JSON.parse(out) as
      | { event: KeyEvent; key_index: number; public_key: string }
      | { refused: { status: number; body: RejectionBody } };
    if ("refused" in r) throw new Rejected(r.refused.status, r.refused.body, true);
    return r;
  }

  /** `POST /self/{agent}/keys.json` with the event (and the envelope), in RFC 8785 form. */
  async #postKeys(agent: string, event: KeyEvent, envelope?: Envelope): Promise<KeysAnswer> {
    const body = core.key_post_body(JSON.stringify(event), envelope === undefined ? undefined : JSON.stringify(envelope));
    const a = await this.#send("POST", `${this.url}/self/${agent}/keys.json`, {
      headers: { "content-type": "application/json" },
      body,
    });
    return ok(a) as KeysAnswer;
  }

  /**
   * `agentId`'s key log (default: ours): keys.json, verified here with the
   * core's verifier against the service's keyring, and compared with `pin`
   * (default: the pin this client keeps for that agent, moved forward by
   * every `keys()` without a `pin`). A rollback (a shorter log than the
   * pin) or a fork (another record at the pinned place) shows in `pin`;
   * `keep` is the pin to keep from then on (the served log's only when it
   * verified and extends the pin): store it to carry it across processes.
   */
  async keys(agentId?: string, { pin }: { pin?: KeyPin } = {}): Promise<KeyLogView> {
    const agent = this.#agent(agentId);
    const { body, keyring } = await this.#keysDocs(agent);
    const given = pin ?? this.#pins.get(agent);
    const view = JSON.parse(
      core.key_log(body, keyring, agent, given === undefined ? undefined : JSON.stringify(given), Date.now()),
    ) as KeyLogView;
    if (pin === undefined && view.keep !== null) this.#pins.set(agent, view.keep);
    return view;
  }

  /**
   * Starts the key log of an identity that published without one: its
   * inception alone, committing the identity's next key (`identity.withNextKey()`
   * makes one; store that identity first). The agent must have published.
   */
  async incept({ recoveryKeyDigest, recoveryWindowSec }: { recoveryKeyDigest?: string; recoveryWindowSec?: number } = {}): Promise<KeysAnswer> {
    const me = this.#needIdentity();
    const next = me.nextSeedHex();
    if (next === undefined) throw new TypeError("the identity holds no next key: use identity.withNextKey() (and store it) first");
    if (me.keyIndex > 0) throw new TypeError("this identity already rotated: it has a key log");
    const opts: Record<string, unknown> = {};
    if (recoveryKeyDigest !== undefined) opts.recovery_key_digest = recoveryKeyDigest;
    if (recoveryWindowSec !== undefined) opts.recovery_window_sec = recoveryWindowSec;
    const event = this.#built(core.inception_event(me.seedHex(), next, JSON.stringify(opts), Date.now()));
    const answer = await this.#postKeys(me.agentId, event.event);
    await this.keys(me.agentId).catch(() => undefined);
    return answer;
  }

  /**
   * Rotates: the identity's committed next key becomes current and a fresh
   * next key is committed. The served log is verified (and checked against
   * the pin) and the event built and checked by the core before it is sent.
   * `compromised`: the current key was stolen; the outgoing key's writes
   * after `lastGood` (default: this client's last write) are disputed, and
   * `capsule` (default: that write's capsule) is re-published above it with
   * the rotation. `pin`: the last key log seen (default: the one this
   * client keeps); a log that rolled back or forked against it is refused.
   * `persist` is called with the new identity before anything
   * is sent: store it there (its next key exists nowhere else).
   * Resolves to the service's answer and the new identity, which this
   * client uses from then on. When the answer is lost (a network error),
   * the event may have applied: `keys()` says which key is current (the
   * persisted identity's, or still this one).
   */
  async rotate({
    compromised = false,
    lastGood,
    capsule,
    recoveryKeyDigest,
    pin: givenPin,
    persist,
  }: {
    compromised?: boolean;
    lastGood?: number;
    capsule?: Capsule;
    recoveryKeyDigest?: string | null;
    pin?: KeyPin;
    persist?: (identity: Identity) => void | Promise<void>;
  } = {}): Promise<Rotated> {
    const me = this.#needIdentity();
    const next = me.nextSeedHex();
    if (next === undefined) throw new TypeError("the identity holds no next key: nothing to rotate to (recommit() commits one)");
    const { body, keyring } = await this.#keysDocs(me.agentId);
    const newNext = core.generate_seed();
    const opts: Record<string, unknown> = { outgoing: me.publicKey };
    if (recoveryKeyDigest !== undefined) opts.recovery_key_digest = recoveryKeyDigest;
    let write: { seq: number; capsule: Capsule } | undefined;
    if (compromised || lastGood !== undefined) {
      const good = lastGood ?? this.#lastWrite?.seq;
      if (good === undefined) throw new TypeError("compromised: name the owner's last good write (lastGood: its seq)");
      const version = await this.#ownVersion(me.agentId, good);
      opts.disputes_after = { seq: good, cursor: version.cursor };
      const republish = capsule ?? (this.#lastWrite?.seq === good ? this.#lastWrite.capsule : version.capsule);
      const local = check(republish, { tier: (await this.head(me.agentId))?.tier ?? "free" });
      if (!local.ok) throw local.error;
      write = { seq: good + 1, capsule: republish };
    }
    const pin = givenPin ?? this.#pins.get(me.agentId);
    const built = this.#built(
      core.rotation_event(body, keyring, me.agentId, pin === undefined ? undefined : JSON.stringify(pin), next, newNext, JSON.stringify(opts), Date.now()),
    );
    const after = Identity.fromSeed(next, { next: newNext, agentId: me.agentId, keyIndex: built.key_index });
    await persist?.(after);
    const envelope = write === undefined ? undefined : after.signEnvelope(write.seq, write.capsule);
    const answer = await this.#postKeys(me.agentId, built.event, envelope);
    this.#identity = after;
    if (write !== undefined && answer.write !== undefined) {
      this.#lastSeq = write.seq;
      this.#lastWrite = write;
      this.#ownPrivate = isPrivate(write.capsule);
    }
    await this.keys(me.agentId).catch(() => undefined);
    return { ...answer, identity: after };
  }

  /**
   * Recommits: the current key replaces the log's commitments with a fresh
   * next key (for an owner who lost the next key). It matures after the
   * recovery window (`keys.pending_recommit.matures_at`) unless a rotation
   * lands first; only then does the new identity's next key rotate.
   * `pin` and `persist` as for `rotate()`.
   */
  async recommit({
    recoveryKeyDigest,
    pin: givenPin,
    persist,
  }: { recoveryKeyDigest?: string | null; pin?: KeyPin; persist?: (identity: Identity) => void | Promise<void> } = {}): Promise<Rotated> {
    const me = this.#needIdentity();
    const { body, keyring } = await this.#keysDocs(me.agentId);
    const newNext = core.generate_seed();
    const opts: Record<string, unknown> = {};
    if (recoveryKeyDigest !== undefined) opts.recovery_key_digest = recoveryKeyDigest;
    const pin = givenPin ?? this.#pins.get(me.agentId);
    const built = this.#built(
      core.recommit_event(body, keyring, me.agentId, pin === undefined ? undefined : JSON.stringify(pin), me.seedHex(), newNext, JSON.stringify(opts), Date.now()),
    );
    const after = Identity.fromSeed(me.seedHex(), { next: newNext, agentId: me.agentId, keyIndex: built.key_index });
    await persist?.(after);
    const answer = await this.#postKeys(me.agentId, built.event);
    this.#identity = after;
    await this.keys(me.agentId).catch(() => undefined);
    return { ...answer, identity: after };
  }

  /**
   * A recovery rotation: reveals the operator's recovery key (`recoverySeed`,
   * committed by digest in the log), which makes a freshly generated key
   * current and commits a fresh next key. `supersedes`: the index of a
   * next-key rotation to void (within the recovery window after it; every
   * key made current from it on is voided, and what they signed disputed).
   * `recoveryKeyDigest`: a new recovery key to commit (the revealed one is
   * spent; default none). Only the agent id of this client's identity is
   * used. `pin` and `persist` as for `rotate()`.
   */
  async recover({
    recoverySeed,
    supersedes,
    recoveryKeyDigest,
    pin: givenPin,
    persist,
  }: {
    recoverySeed: string;
    supersedes?: number;
    recoveryKeyDigest?: string | null;
    pin?: KeyPin;
    persist?: (identity: Identity) => void | Promise<void>;
  }): Promise<Rotated> {
    const me = this.#needIdentity();
    const recovery = seedOf(recoverySeed, "recoverySeed");
    const { body, keyring } = await this.#keysDocs(me.agentId);
    const current = core.generate_seed();
    const newNext = core.generate_seed();
    const opts: Record<string, unknown> = { authority: "recovery", current };
    if (supersedes !== undefined) opts.supersedes = supersedes;
    if (recoveryKeyDigest !== undefined) opts.recovery_key_digest = recoveryKeyDigest;
    const pin = givenPin ?? this.#pins.get(me.agentId);
    const built = this.#built(
      core.rotation_event(body, keyring, me.agentId, pin === undefined ? undefined : JSON.stringify(pin), recovery, newNext, JSON.stringify(opts), Date.now()),
    );
    await persist?.(Identity.fromSeed(current, { next: newNext, agentId: me.agentId, keyIndex: built.key_index }));
    const answer = await this.#postKeys(me.agentId, built.event);
    // A superseding recovery voids keys: the service's count is the one that holds.
    const after = Identity.fromSeed(current, { next: newNext, agentId: me.agentId, keyIndex: answer.keys?.index ?? built.key_index });
    this.#identity = after;
    await this.keys(me.agentId).catch(() => undefined);
    return { ...answer, identity: after };
  }

  /** Our retained version with `seq` (history.json, signed when it needs to be). */
  async #ownVersion(agent: string, seq: number): Promise<{ cursor: string; capsule: Capsule }> {
    const h = ok(await this.#read(agent, "history.json", {}, true)) as {
      versions: Array<{ seq?: number; cursor?: string; capsule?: Capsule }>;
    };
    const v = h.versions.find((x) => x.seq === seq);
    if (v?.cursor === undefined || v.capsule === undefined) {
      throw new TypeError(`no retained write at seq ${seq} in ${agent}'s history: lastGood names one of the owner's writes the service still holds`);
    }
    return { cursor: v.cursor, capsule: v.capsule };
  }

  /**
   * Every new head of `agentId` (default: ours), as it is committed: the
   * current one first (when there is one), then one per change, each cursor
   * once. Over the WebSocket (`/self/{id}/watch`) where the runtime has one
   * and the capsule reads unsigned; otherwise (no WebSocket, a private
   * capsule read with our signature, a socket that fails) by long-poll
   * (`head.json?wait=`). Network failures are retried with backoff (1 s
   * doubling to 60 s); it ends when `signal` aborts or the loop breaks, and
   * throws `Rejected` (404) when the capsule stops being readable to us.
   */
  async *watch(agentId?: string, { signal, wait = 25 }: { signal?: AbortSignal; wait?: number } = {}): AsyncGenerator<Head, void, undefined> {
    const agent = this.#agent(agentId);
    let last: string | undefined;
    let etag: string | null = null;
    let delay = 0;
    const fresh = (h: Head): boolean => {
      if (h.cursor === last) return false;
      last = h.cursor;
      etag = h.etag ?? `"${h.cursor.slice("sha256:".length)}"`;
      return true;
    };
    const gone = () => new Rejected(404, { error: "capsule_not_found", detail: "the capsule is no longer readable by this client" });
    const first = await this.#read(agent, "head.json");
    let signed = first.signed === true;
    if (first.status === 200) {
      const h = { ...(JSON.parse(first.text) as Head), etag: first.headers.get("etag") };
      if (fresh(h)) yield h;
    } else if (first.status !== 404) {
      ok(first);
    }
    const WS = (globalThis as { WebSocket?: typeof WebSocket }).WebSocket;
    let socketFrom = 0; // when the WebSocket may be tried (again)
    while (!signal?.aborted) {
      if (WS !== undefined && !signed && Date.now() >= socketFrom) {
        const url = `${this.url.replace(/^http/, "ws")}/self/${agent}/watch`;
        const end = yield* socketHeads(WS, url, signal, fresh);
        if (signal?.aborted) return;
        if (end.code === 4404) {
          if (this.identity === undefined) throw gone();
          signed = true;
        } else if (!end.delivered) {
          socketFrom = Date.now() + 300_000; // long-poll for a while, then try again
        } else {
          delay = 0;
        }
        continue;
      }
      const started = Date.now();
      const q = `head.json?wait=${wait}`;
      let a: Answer;
      try {
        a = await this.#send("GET", `${this.url}/self/${agent}/${q}`, {
          headers: etag ? { "if-none-match": etag } : {},
          signed,
          signal,
        });
      } catch {
        if (signal?.aborted) return;
        delay = await backoff(delay, signal);
        continue;
      }
      if (a.status === 200) {
        delay = 0;
        const h = { ...(JSON.parse(a.text) as Head), etag: a.headers.get("etag") };
        if (fresh(h)) yield h;
      } else if (a.status === 304) {
        delay = 0;
      } else if (a.status === 404 && errorOf(a) === "capsule_not_found") {
        if (!signed && this.identity !== undefined) {
          signed = true;
        } else if (last !== undefined) {
          throw gone();
        } else if (Date.now() - started < 1000) {
          delay = await backoff(delay, signal); // not held: nothing to read yet, ask again later
        }
      } else if (a.status === 429 || a.status >= 500) {
        const after = Number(a.headers.get("retry-after") ?? 0) * 1000;
        delay = await backoff(Math.max(delay, after / 2), signal);
      } else {
        ok(a);
      }
    }
  }

  /**
   * After a restart: our current capsule from the service, with its
   * recovery prompt (the core's renderer); `null` when we never published.
   */
  async rehydrate(): Promise<Rehydrated | null> {
    const me = this.#needIdentity();
    const head = await this.#read(me.agentId, "head.json");
    if (head.status === 404) return null;
    const h = ok(head) as Head;
    const capsule = await this.read(me.agentId);
    this.#lastSeq = Math.max(this.#lastSeq, h.seq);
    this.#ownPrivate = isPrivate(capsule);
    this.#lastWrite = { seq: h.seq, capsule };
    return { capsule, cursor: cursor(capsule), seq: h.seq, prompt: recoveryPrompt(capsule) };
  }
}

/** Sleeps `next` (1 s doubling to 60 s from `delay`), or until `signal` aborts; the new delay. */
async function backoff(delay: number, signal: AbortSignal | undefined): Promise<number> {
  const next = Math.min(Math.max(delay * 2, 1000), 60_000);
  await new Promise<void>((resolve) => {
    const t = setTimeout(done, next);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done);
  });
  return next;
}

/**
 * The heads one WebSocket watch delivers (each new cursor once, as `fresh`
 * says), until it closes: its close code and whether any frame came.
 */
async function* socketHeads(
  WS: typeof WebSocket,
  url: string,
  signal: AbortSignal | undefined,
  fresh: (h: Head) => boolean,
): AsyncGenerator<Head, { code: number; delivered: boolean }, undefined> {
  const queue: Array<{ head?: Head; code?: number }> = [];
  let wake: (() => void) | undefined;
  const push = (e: { head?: Head; code?: number }) => {
    queue.push(e);
    wake?.();
    wake = undefined;
  };
  let ws: WebSocket;
  try {
    ws = new WS(url);
  } catch {
    return { code: 1006, delivered: false };
  }
  let delivered = false;
  ws.addEventListener("message", (ev: MessageEvent) => {
    if (typeof ev.data !== "string") return;
    delivered = true;
    if (ev.data === "pong") return;
    try {
      push({ head: { ...(JSON.parse(ev.data) as Head), etag: null } });
    } catch {
      // not a head: ignored
    }
  });
  ws.addEventListener("close", (ev: CloseEvent) => push({ code: ev.code }));
  ws.addEventListener("error", () => push({ code: 1006 }));
  const abort = () => push({ code: 1000 });
  signal?.addEventListener("abort", abort);
  const ping = setInterval(() => {
    if (ws.readyState === 1) ws.send("ping");
  }, 30_000);
  try {
    for (;;) {
      while (queue.length === 0) await new Promise<void>((r) => (wake = r));
      const e = queue.shift()!;
      if (e.code !== undefined) return { code: e.code, delivered };
      if (fresh(e.head!)) {
        e.head!.etag = `"${e.head!.cursor.slice("sha256:".length)}"`;
        yield e.head!;
      }
    }
  } finally {
    clearInterval(ping);
    signal?.removeEventListener("abort", abort);
    if (ws.readyState <= 1) ws.close();
  }
}

function errorOf(a: Answer): string | undefined {
  try {
    return (JSON.parse(a.text) as { error?: string }).error;
  } catch {
    return undefined;
  }
}

/** The JSON body of a 200, or the refusal it is. */
function ok(a: Answer): unknown {
  let body: unknown;
  try {
    body = a.text === "" ? {} : JSON.parse(a.text);
  } catch {
    body = { error: "not_json", detail: a.text.slice(0, 200) };
  }
  if (a.status !== 200) throw new Rejected(a.status, body as RejectionBody);
  return body;
}
