// The selfcap package's API. Every protocol rule (RFC 8785, the write
// check, the agent id, the write envelope's signature, RFC 9421 signed
// reads, offline verification, the recovery prompt) is the Rust core's,
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
 * well-behaved bot does about them (the core's table).
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

/**
 * An agent's Ed25519 key. `agentId` is the hex SHA-256 of the raw public
 * key. Keep `seedHex()` secret: it is the key.
 */
export class Identity {
  readonly #seed: string;
  readonly agentId: string;
  readonly publicKey: string;

  private constructor(seed: string) {
    const { agent_id, public_key } = JSON.parse(core.identity(seed)) as { agent_id: string; public_key: string };
    this.#seed = seed;
    this.agentId = agent_id;
    this.publicKey = public_key;
  }

  /** A new random key (Web Crypto). */
  static create(): Identity {
    return new Identity(core.generate_seed());
  }

  /** The key of a stored 32-byte RFC 8032 seed (64 hex characters). */
  static fromSeed(hex: string): Identity {
    if (typeof hex !== "string" || !/^[0-9a-fA-F]{64}$/.test(hex)) {
      throw new TypeError("a seed is 64 hexadecimal characters (32 bytes)");
    }
    return new Identity(hex.toLowerCase());
  }

  /** The secret seed, hex. */
  seedHex(): string {
    return this.#seed;
  }

  /** The PUT body for `capsule` at `seq`: Ed25519 over SHA-256(JCS({agent_id, seq, capsule})). */
  signEnvelope(seq: number, capsule: unknown): Envelope {
    return JSON.parse(core.sign_envelope(this.#seed, seq, jsonText(capsule, "the capsule"))) as Envelope;
  }

  /**
   * The headers of a signed read (RFC 9421, docs/PROTOCOL.md §12) of `url`
   * exactly as it will be sent: `self-public-key`, `signature-input`,
   * `signature`. Each carries a fresh nonce, accepted once: sign every request anew.
   */
  signRead(method: string, url: string): Record<string, string> {
    return JSON.parse(core.sign_read(this.#seed, method, url)) as Record<string, string>;
  }

  /** Never prints the seed. */
  toJSON(): { agentId: string; publicKey: string } {
    return { agentId: this.agentId, publicKey: this.publicKey };
  }
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
  readonly identity: Identity | undefined;
  readonly #fetch: typeof fetch;
  /** The highest seq this client signed (a write must use a greater one). */
  #lastSeq = 0;
  /** Whether our last published capsule is private. */
  #ownPrivate = false;

  constructor({ url, identity, fetch: f }: ClientOptions) {
    if (typeof url !== "string" || !/^https?:\/\//.test(url)) {
      throw new TypeError("url: the service's base URL, http:// or https://");
    }
    this.url = url.replace(/\/+$/, "");
    this.identity = identity;
    this.#fetch = f ?? globalThis.fetch.bind(globalThis);
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
   * Throws `Rejected` when the service refuses it.
   */
  async publish(capsule: Capsule, { seq }: { seq?: number } = {}): Promise<Published> {
    const me = this.#needIdentity();
    let tier: Tier = "free";
    let floor = this.#lastSeq;
    const head = await this.#read(me.agentId, "head.json");
    if (head.status === 200) {
      const h = JSON.parse(head.text) as Head;
      tier = h.tier;
      floor = Math.max(floor, h.seq);
    } else if (head.status !== 404) {
      ok(head);
    }
    const next = seq ?? floor + 1;
    const local = check(capsule, { tier });
    if (!local.ok) throw local.error;
    const envelope = me.signEnvelope(next, capsule);
    this.#lastSeq = Math.max(this.#lastSeq, next);
    const a = await this.#send("PUT", `${this.url}/self/${me.agentId}/capsule.json`, {
      headers: { "content-type": "application/json" },
      body: JSON.stringify(envelope),
    });
    const body = ok(a) as Published;
    this.#ownPrivate = isPrivate(capsule);
    return body;
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
