// Client side of the USDC upgrade (docs/PROTOCOL.md §10) for the e2e tests:
// quote and claim requests, the signed claim (written here from the wire
// contract, independently of the Rust core), a local chain with the test
// USDC at Base's canonical address, payments, and "nothing was credited".
import assert from "node:assert/strict";
import crypto from "node:crypto";
import http from "node:http";
import net from "node:net";
import { ADMIN_SECRETS } from "./admin-helpers.mjs";
import { startWorker } from "./harness.mjs";
import { jcs, exampleCapsule, headPath, publish } from "./helpers.mjs";
import {
  startAnvil,
  placeTokenAt,
  mint,
  transfer,
  mine,
  rpc,
  BASE_USDC,
} from "../../scripts/chain.mjs";

export const QUOTE_PATH = "/api/v1/self/upgrade/quote";
export const CLAIM_PATH = "/api/v1/self/upgrade/claim";
export const CLAIM_DOMAIN = "self_capsule_upgrade_claim_v1";
export const DAY = 24 * 3600 * 1000;
export const MIN_CONFIRMATIONS = 3;
/** Pro and Plus default prices, atomic units (6 decimals). */
export const PRO_PRICE = 5_000_000n;
export const PLUS_PRICE = 15_000_000n;

/** RFC 3339, whole seconds, UTC (the service's form). */
export const iso = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

// ---------------------------------------------------------------------------
// Client addresses: the service allows 30 quotes and 20 new free agents per
// address per 24 h, so every scenario takes its own addresses.

let ipCounter = 0;
/** A fresh documentation-range IPv4 address (TEST-NET-2/3). */
export function nextIp() {
  ipCounter += 1;
  const net3 = ipCounter < 250 ? "198.51.100" : "203.0.113";
  return `${net3}.${(ipCounter % 250) + 1}`;
}

// ---------------------------------------------------------------------------
// The claim signature.

/** SHA-256(JCS({domain, agent_id, invoice_id, tx_hash, seq})): the 32 signed bytes. */
export function claimDigest({ agentId, invoiceId, txHash, seq }) {
  const message = {
    domain: CLAIM_DOMAIN,
    agent_id: agentId,
    invoice_id: invoiceId,
    tx_hash: txHash.toLowerCase(),
    seq,
  };
  return crypto.createHash("sha256").update(Buffer.from(jcs(message), "utf8")).digest();
}

/**
 * A signed claim body. `signer` signs (default `agent`); `sign` overrides
 * what is signed (e.g. another seq); `overrides` replace body members after
 * signing.
 */
export function claimBody(agent, invoiceId, txHash, seq = 1, { signer, sign = {}, overrides = {} } = {}) {
  const who = signer ?? agent;
  const digest = claimDigest({ agentId: agent.agentId, invoiceId, txHash, seq, ...sign });
  const signature = crypto.sign(null, digest, who.privateKey).toString("hex");
  return {
    invoice_id: invoiceId,
    agent_id: agent.agentId,
    public_key: who.publicHex,
    tx_hash: txHash.toLowerCase(),
    seq,
    signature,
    ...overrides,
  };
}

// ---------------------------------------------------------------------------
// Requests.

function post(body, { ip, now, headers = {} } = {}) {
  const h = { "content-type": "application/json", "cf-connecting-ip": ip ?? nextIp(), ...headers };
  if (now !== undefined) h["x-selfcap-test-now"] = String(now);
  return {
    method: "POST",
    headers: h,
    body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body),
  };
}

/** POST …/upgrade/quote with a JS value (or raw text). */
export function quote(w, body, opts = {}) {
  return w.fetch(QUOTE_PATH, post(body, opts));
}

/** Quotes `plan` for `agent`; asserts 200 and returns the quote body. */
export async function quoteOk(w, agent, plan = "pro", opts = {}) {
  const r = await quote(w, { agent_id: agent.agentId, plan }, opts);
  assert.equal(r.status, 200, `quote ${plan}: ${r.text}`);
  return r.json;
}

/** POST …/upgrade/claim with a JS value (or raw text). */
export function claim(w, body, opts = {}) {
  return w.fetch(CLAIM_PATH, post(body, opts));
}

/**
 * Asserts an upgrade refusal: status, `{"error": code, "detail"}` and, when
 * `retry` is true, a positive whole `retry_after_sec` mirrored in
 * `Retry-After` (when false, neither is present).
 */
export function assertRefused(r, status, code, { retry } = {}) {
  assert.equal(r.status, status, `expected ${status} ${code}, got ${r.status} ${r.text}`);
  assert.equal(r.json?.error, code, r.text);
  // §10's refusals carry a detail; the generic body-cap answer may not (§4).
  if (code !== "payload_too_large" || r.json.detail !== undefined) {
    assert.equal(typeof r.json.detail, "string", r.text);
  }
  if (retry === true) {
    assert.ok(Number.isInteger(r.json.retry_after_sec) && r.json.retry_after_sec > 0, r.text);
    assert.equal(r.headers.get("retry-after"), String(r.json.retry_after_sec));
  } else if (retry === false) {
    assert.equal(r.json.retry_after_sec, undefined, r.text);
    assert.equal(r.headers.get("retry-after"), null);
  }
  return r.json;
}

/** head.json as of `now` (real time when undefined). */
export async function head(w, agentId, now) {
  const headers = now === undefined ? {} : { "x-selfcap-test-now": String(now) };
  const r = await w.fetch(headPath(agentId), { headers });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

/** Asserts the agent is on free with no paid time (head.json). */
export async function assertFree(w, agentId, now) {
  const h = await head(w, agentId, now);
  assert.equal(h.tier, "free", JSON.stringify(h));
  assert.equal(h.paid_until, null, JSON.stringify(h));
  assert.equal(h.writes.limit_24h, 5, JSON.stringify(h));
  return h;
}

/** Publishes the example capsule (a fresh agent's first write) from a fresh address. */
export async function publishFirst(w, agent, seq = 1) {
  const r = await publish(w, agent, seq, undefined, { ip: nextIp() });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

// ---------------------------------------------------------------------------
// Capsules.

const WORDS = [
  "quiet", "garden", "notes", "tidy", "weekly", "planning", "river", "stone", "maple",
  "candle", "paper", "window", "harbor", "meadow", "pencil", "orchard", "lantern", "cotton",
  "valley", "bread", "autumn", "ribbon", "pebble", "cloud", "basket", "willow", "honey",
];

/** Bland plain words, `n` characters or fewer, deterministic in `k`. */
function phrase(k, max) {
  const out = [];
  let len = 0;
  for (let i = 0; ; i++) {
    const w = WORDS[(k * 7 + i * 5) % WORDS.length];
    if (len + w.length + (out.length ? 1 : 0) > max) break;
    out.push(w);
    len += w.length + (out.length > 1 ? 1 : 0);
  }
  return out.join(" ");
}

/**
 * A valid capsule of plain bland words whose canonical size is at most
 * `target` bytes (about 20 KB by default: over free's 4096, under pro's
 * 24 576): the example capsule, 8 long objectives, and up to 20 constraints.
 */
export function bigCapsule(agentId, target = 20_000, salt = 0) {
  const base = exampleCapsule(agentId, { self_motto: `Steady and plain, version ${salt}.` });
  const objectives = [];
  for (let i = 0; i < 8; i++) {
    objectives.push({
      id: `obj-${i}`,
      status: "open",
      priority: "low",
      title: phrase(i + salt, 110),
      checkpoint: phrase(i + 3 + salt, 190),
    });
  }
  let capsule = { ...base, objectives };
  for (let c = 0; capsule.constraints.length < 20; c++) {
    const value = [];
    for (let j = 0; j < 20; j++) value.push(phrase(c * 20 + j + salt, 46));
    const next = { ...capsule, constraints: [...capsule.constraints, { id: `plain-${c}`, type: "allowed_tools", value }] };
    if (sizeOf(next) > target) break;
    capsule = next;
  }
  return capsule;
}

/** Canonical size of a capsule, bytes. */
export const sizeOf = (capsule) => Buffer.byteLength(jcs(capsule), "utf8");

// ---------------------------------------------------------------------------
// The chain.

/**
 * An anvil (chain id `chainId`) with TestUSDC at Base's canonical USDC
 * address and `payerFunds` minted to the payer. Accounts: deployer [0],
 * payer [1], treasury [2], a stranger [3], an empty account [5].
 */
export async function startChain({ chainId = 8453, payerFunds = 1_000_000_000n } = {}) {
  const chain = await startAnvil({ chainId });
  try {
    const [deployer, payer, treasury, stranger, , empty] = chain.accounts;
    await placeTokenAt(chain.rpcUrl, BASE_USDC);
    await mint(chain.rpcUrl, BASE_USDC, deployer, payer, payerFunds);
    return { ...chain, deployer, payer, treasury, stranger, empty, usdc: BASE_USDC };
  } catch (e) {
    await chain.stop();
    throw e;
  }
}

/** The Worker vars that point the upgrade at `chain` (chain id and USDC left at their defaults). */
export function upgradeVars(chain, extra = {}) {
  return {
    UPGRADE_TREASURY: chain.treasury,
    UPGRADE_RPC_URL: chain.rpcUrl,
    UPGRADE_MIN_CONFIRMATIONS: String(MIN_CONFIRMATIONS),
    ...extra,
  };
}

/** A Worker configured for `chain`. */
export function startUpgradeWorker(chain, extra = {}) {
  // With the operator API on: the tests read the totals the credits make.
  return startWorker({ vars: upgradeVars(chain, extra), secrets: ADMIN_SECRETS });
}

/**
 * Pays `amount` (default: the quote's amount_atomic) of `token` (default the
 * chain's USDC) from `from` (default the payer) to `to` (default the
 * treasury). Returns the tx hash once it is mined (automine).
 */
export async function pay(chain, q, { amount, token, from, to, gas } = {}) {
  const value = amount ?? BigInt(q.amount_atomic);
  const hash = await transfer(chain.rpcUrl, token ?? chain.usdc, from ?? chain.payer, to ?? chain.treasury, value, {
    gas,
    wait: true,
  });
  return hash.toLowerCase();
}

/** Mines enough blocks that every mined tx has at least MIN_CONFIRMATIONS. */
export function confirm(chain, n = MIN_CONFIRMATIONS) {
  return mine(chain.rpcUrl, n);
}

/** The receipt of a mined tx. */
export function receipt(chain, hash) {
  return rpc(chain.rpcUrl, "eth_getTransactionReceipt", [hash]);
}

/** A loopback TCP port nobody listens on (bound, then closed). */
export async function closedPort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

/**
 * A JSON-RPC proxy on loopback in front of `upstream` that can lie:
 * `mode` = "honest" | "http500" | "rpc_error" | "block_mismatch" |
 * "other_receipt" | "garbage". Returns {url, setMode, calls, close}.
 */
export async function lyingProxy(upstream) {
  let mode = "honest";
  const calls = [];
  const srv = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const ask = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    calls.push(ask.method);
    const send = (status, text) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(text);
    };
    if (mode === "http500") return send(500, "{}");
    if (mode === "garbage") return send(200, "<html>not json</html>");
    if (mode === "rpc_error" && ask.method === "eth_getTransactionReceipt") {
      return send(200, JSON.stringify({ jsonrpc: "2.0", id: ask.id, error: { code: -32000, message: "boom" } }));
    }
    const up = await fetch(upstream, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(ask),
    });
    const answer = await up.json();
    if (mode === "block_mismatch" && ask.method === "eth_getBlockByNumber" && answer.result) {
      answer.result.hash = "0x" + "ee".repeat(32);
    }
    if (mode === "other_receipt" && ask.method === "eth_getTransactionReceipt" && answer.result) {
      answer.result.transactionHash = "0x" + "dd".repeat(32);
    }
    send(200, JSON.stringify(answer));
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    setMode(m) {
      mode = m;
    },
    calls,
    close: () =>
      new Promise((r) => {
        srv.closeAllConnections?.();
        srv.close(() => r());
      }),
  };
}

/**
 * EIP-55 checksum spelling of `address`, with keccak-256 from the chain
 * node (web3_sha3), so the check does not reuse the service's code.
 */
export async function eip55(rpcUrl, address) {
  const lower = address.toLowerCase().replace(/^0x/, "");
  const hash = (await rpc(rpcUrl, "web3_sha3", ["0x" + Buffer.from(lower, "ascii").toString("hex")])).slice(2);
  return "0x" + [...lower].map((c, i) => (parseInt(hash[i], 16) >= 8 ? c.toUpperCase() : c)).join("");
}

/** history.json (as of `now`), asserting 200. */
export async function history(w, agentId, now) {
  const headers = now === undefined ? {} : { "x-selfcap-test-now": String(now) };
  const r = await w.fetch(`/self/${agentId}/history.json?limit=100`, { headers });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

/** A random 0x + 64 hex that no chain knows. */
export const randomTxHash = () => "0x" + crypto.randomBytes(32).toString("hex");
