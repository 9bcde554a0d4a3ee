// Buying Pro/Plus with x402 end to end: the built Worker in
// workerd, anvil as Base (chain 8453) with an EIP-3009 test USDC at Base's
// USDC address, a local facilitator from the official @x402/evm with fault
// modes, and the three official payers (npm @x402/fetch v2, legacy npm
// x402-fetch v1, PyPI x402 v2), all from tests/e2e/x402-helpers.mjs.
//
//   node --test --test-concurrency=1 tests/e2e/x402.test.mjs
//
// Expected values come from outside the Worker: the 402 it offered (the
// invoice), the chain (Transfer and AuthorizationUsed logs,
// authorizationState), the facilitator's own call log, what the payers sent
// and got, and head.json. Every test has its own agent (with a published
// capsule, so head.json shows its tier), its own client address and its own
// freshly generated payer key: "nothing moved" / "exactly one transfer" is
// every Transfer log sent by that payer, which no other test can touch.
//
// hang_after_broadcast runs with anvil's automine off while the Worker waits
// (the facilitator's tx is broadcast but not mined, as on Base between
// blocks), so at the Worker's settle deadline the outcome is really unknown;
// the test then mines it and watches head.json.
//
// Authorizations the official payers never produce (amount ± 1, windows in
// the past or future, two for one invoice) are signed here with viem's
// EIP-712 signTypedData over the token domain the 402 names
// (x402-helpers.mjs signPayment, byte-identical to @x402/fetch's and
// x402-fetch's output for the same fields); headers a payer signed but never
// sent are captured with the official @x402/fetch against a capture-only
// stand-in serving the Worker's own 402 (capturePayment).
//
// Needs anvil (npm @foundry-rs/anvil-linux-amd64) and Python 3 with venv for
// the PyPI payer (its venv is cached in node_modules/.cache): without them
// this file fails, it never skips.
import assert from "node:assert/strict";
import { after, afterEach, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ADMIN_SECRETS, stats, statsSettled, statsUntil } from "./admin-helpers.mjs";
import { BASE, startWorker } from "./harness.mjs";
import { exampleCapsule, headPath, newAgent, publish, signedReadHeaders } from "./helpers.mjs";
import {
  DAY,
  PLUS_PRICE,
  PRO_PRICE,
  assertFree,
  head,
  nextIp,
  publishFirst,
  quoteOk,
  upgradeVars,
} from "./upgrade-helpers.mjs";
import { BASE_USDC, mine, rpc } from "../../scripts/chain.mjs";
import {
  authorizationState,
  authorizationUsedLogs,
  submitTransferWithAuthorization,
} from "../../scripts/x402-chain.mjs";
import {
  TREASURY,
  capturePayment,
  decodeHeader,
  encodeHeader,
  facilitatorCallsFor,
  fundedPayer,
  payWithLegacyX402Fetch,
  payWithPython,
  payWithX402Fetch,
  replayPayment,
  signPayment,
  startX402Stack,
  transfersFrom,
} from "./x402-helpers.mjs";

const X402_PATH = "/api/v1/self/upgrade/x402";
/** The test Worker's X402_SETTLE_TIMEOUT_MS: how long it waits for /settle. */
const SETTLE_TIMEOUT_MS = 3000;
/** How long the agent's object may take to finish a settlement on its own. */
const BACKGROUND_CREDIT_MS = 20_000;
const PRICE = { pro: PRO_PRICE, plus: PLUS_PRICE };
/** The classic claim's 200 body (docs/PROTOCOL.md §10; upgrade.test.mjs). */
const CLAIMED_KEYS = [
  "accepted", "agent_id", "block_number", "credited_at", "days", "invoice_id", "log_index",
  "paid_until", "plan", "tx_hash",
].sort();
/** What every answer must let a browser client read. */
const EXPOSED = ["payment-required", "payment-response", "x-payment-response"];

let stack;
let f; // the facilitator
let w; // the Worker with x402 on

/** The Worker's vars: the classic upgrade config pointed at the x402 stack's chain, token and treasury. */
function workerVars(extra = {}) {
  return upgradeVars(
    { treasury: TREASURY, rpcUrl: stack.rpcUrl },
    { UPGRADE_CHAIN_ID: "8453", UPGRADE_USDC_CONTRACT: stack.usdc, ...extra },
  );
}

before(async () => {
  stack = await startX402Stack();
  f = stack.facilitator;
  w = await startWorker({
    vars: workerVars({
      X402_FACILITATOR_URL: f.url,
      X402_SETTLE_TIMEOUT_MS: String(SETTLE_TIMEOUT_MS),
      X402_MIN_CONFIRMATIONS: "1",
    }),
    // The operator API on: the totals a purchase makes are checked.
    secrets: ADMIN_SECRETS,
  });
});
after(async () => {
  await w?.close();
  await stack?.stop();
});
afterEach(async () => {
  await f.setMode("normal");
});

// ---------------------------------------------------------------------------
// Requests and answers.

const pathFor = (agentId, plan = "pro", more = "") => `${X402_PATH}?plan=${plan}&agent_id=${agentId}${more}`;
/** The absolute URL on the Worker's real socket (what the payers are given). */
const urlFor = (worker, agentId, plan = "pro", more = "") => new URL(pathFor(agentId, plan, more), worker.origin).href;

/** `r` with its body parsed (r.json; undefined if not JSON). */
function withJson(r) {
  let json;
  try {
    json = JSON.parse(r.body);
  } catch {
    json = undefined;
  }
  return { ...r, json };
}

/**
 * One request to the Worker over its socket, like the payers' (so the
 * invoice's resource URL is the same for both); answers like a payer:
 * {status, headers (lower-case names), body, json}.
 */
async function send(worker, pathOrUrl, { method = "POST", headers = {}, ip } = {}) {
  const h = { ...headers };
  if (ip) h["cf-connecting-ip"] = ip;
  const res = await fetch(new URL(pathOrUrl, worker.origin), { method, headers: h });
  return withJson({ status: res.status, headers: Object.fromEntries(res.headers), body: await res.text() });
}

/** A payer or a replay of a header, from the agent's address; answer with json. */
const ipHeaders = (agent) => ({ "cf-connecting-ip": agent.ip });
const pay = async (payer, url, agent, opts = {}) =>
  withJson(await payer(url, { headers: ipHeaders(agent), ...opts }));
const resend = async (url, payment, agent) => withJson(await replayPayment(url, payment, { headers: ipHeaders(agent) }));

/** Every answer: Cache-Control no-store, and the x402 headers exposed to browsers. */
function assertCommonHeaders(r) {
  const cc = r.headers["cache-control"] ?? "";
  assert.ok(/(^|[\s,])no-store([\s,]|$)/i.test(cc), `Cache-Control "${cc}" on ${r.status} ${r.body}`);
  const exposed = (r.headers["access-control-expose-headers"] ?? "").split(",").map((s) => s.trim().toLowerCase());
  for (const h of EXPOSED) {
    assert.ok(exposed.includes(h), `Access-Control-Expose-Headers "${exposed}" lacks ${h} on ${r.status} ${r.body}`);
  }
}

/** A refusal: status, `{"error": one of codes, "detail": string}`, the common headers. */
function assertRefusal(r, status, codes) {
  const list = [].concat(codes);
  assert.equal(r.status, status, `expected ${status} ${list.join("|")}, got ${r.status} ${r.body}`);
  assert.ok(list.includes(r.json?.error), `expected ${list.join("|")}, got ${r.status} ${r.body}`);
  assert.equal(typeof r.json.detail, "string", r.body);
  assertCommonHeaders(r);
  return r.json;
}

/** A wait to retry after: Retry-After whole seconds > 0 (and the body's retry_after_sec, if any, the same). */
function assertRetryAfter(r) {
  const ra = r.headers["retry-after"];
  assert.match(ra ?? "", /^[1-9][0-9]*$/, `Retry-After "${ra}" on ${r.status} ${r.body}`);
  if (r.json?.retry_after_sec !== undefined) assert.equal(String(r.json.retry_after_sec), ra, r.body);
}

/**
 * The invoice a 402 offers, checked against the contract: the v2
 * PAYMENT-REQUIRED header (and, with `v1Body`, the v1 JSON body, which must
 * agree with it). Returns {v2, v1Body, accept (the v2 exact accept), amount
 * (bigint), invoiceId}.
 */
function offered(r, { agentId, plan }, { v1Body = true } = {}) {
  const raw = r.headers["payment-required"];
  assert.ok(raw, `no PAYMENT-REQUIRED on ${r.status} ${r.body}`);
  const v2 = decodeHeader(raw);
  assert.equal(v2.x402Version, 2, raw);
  assert.equal(typeof v2.error, "string");
  const url = new URL(v2.resource.url);
  assert.equal(url.pathname, X402_PATH, v2.resource.url);
  assert.equal(url.searchParams.get("plan"), plan, v2.resource.url);
  assert.equal(url.searchParams.get("agent_id"), agentId, v2.resource.url);
  assert.ok(Array.isArray(v2.accepts) && v2.accepts.length >= 1, raw);
  const accept = v2.accepts.find((a) => a.scheme === "exact" && a.network === "eip155:8453");
  assert.ok(accept, `no exact accept on eip155:8453: ${JSON.stringify(v2.accepts)}`);
  assert.match(accept.amount, /^[1-9][0-9]*$/);
  const amount = BigInt(accept.amount);
  const tag = amount - PRICE[plan];
  assert.ok(tag >= 1n && tag <= 9999n, `${plan} amount ${amount}: tag ${tag} not in 1..9999`);
  assert.equal(accept.asset.toLowerCase(), BASE_USDC.toLowerCase());
  assert.equal(accept.payTo.toLowerCase(), TREASURY.toLowerCase());
  assert.ok(Number.isInteger(accept.maxTimeoutSeconds) && accept.maxTimeoutSeconds > 0, JSON.stringify(accept));
  assert.equal(accept.extra?.name, "USD Coin");
  assert.equal(accept.extra?.version, "2");
  assert.equal(typeof accept.extra.invoice_id, "string");
  assert.ok(accept.extra.invoice_id.length > 0);

  let body = null;
  if (v1Body) {
    body = r.json;
    assert.equal(body?.x402Version, 1, r.body);
    assert.ok(Array.isArray(body.accepts), r.body);
    const v1 = body.accepts.find((a) => a.scheme === "exact" && a.network === "base");
    assert.ok(v1, `no exact accept on base in the v1 body: ${r.body}`);
    assert.equal(v1.maxAmountRequired, accept.amount);
    assert.equal(v1.payTo.toLowerCase(), TREASURY.toLowerCase());
    assert.equal(v1.asset.toLowerCase(), BASE_USDC.toLowerCase());
    assert.equal(v1.resource, v2.resource.url);
    assert.equal(v1.maxTimeoutSeconds, accept.maxTimeoutSeconds);
    assert.equal(v1.extra?.name, "USD Coin");
    assert.equal(v1.extra?.version, "2");
  }
  return { v2, v1Body: body, accept, amount, invoiceId: accept.extra.invoice_id };
}

/** An unpaid request: 402 x402_payment_required with the agent's invoice for `plan`. */
async function openInvoice(agent, plan = "pro", more = "") {
  const r = await send(w, pathFor(agent.agentId, plan, more), { ip: agent.ip });
  assertRefusal(r, 402, "x402_payment_required");
  return { r, ...offered(r, { agentId: agent.agentId, plan }) };
}

/** A fresh agent with its first capsule published (so head.json exists) and its own client address. */
async function freshAgent() {
  const agent = newAgent();
  await publishFirst(w, agent);
  return { ...agent, ip: nextIp() };
}

const authOf = (payment) => payment.payload.payload.authorization;
const nonceUsed = (payment) => authorizationState(stack.rpcUrl, stack.usdc, authOf(payment).from, authOf(payment).nonce);
const settlesFor = (payment) => facilitatorCallsFor(f, authOf(payment).nonce, "/settle");

/** Nothing left `payer`'s account, and none of `payments`' nonces was used. */
async function assertNothingMoved(payer, ...payments) {
  assert.deepEqual(await transfersFrom(stack.rpcUrl, stack.usdc, payer.address), [], "a transfer left the payer");
  for (const p of payments) assert.equal(await nonceUsed(p), false, `nonce ${authOf(p).nonce} was used`);
}

/** Polls `cond` (sync or async) until true; fails with `what` after `timeoutMs`. */
async function waitFor(cond, what, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** head.json until the agent shows `tier` (polls; fails after `timeoutMs`). */
async function waitForTier(agentId, tier, timeoutMs = BACKGROUND_CREDIT_MS) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const h = await head(w, agentId);
    if (h.tier === tier) return h;
    if (Date.now() > deadline) assert.fail(`head.json still ${JSON.stringify(h)} after ${timeoutMs} ms`);
    await sleep(250);
  }
}

/**
 * `r` is the credit of `inv` (plan `plan`, agent `agent`) paid by `payer`
 * with `payment`: 200; the settlement header of the payment's version
 * ({success, transaction, network, payer}); on chain exactly one transfer
 * from the payer, to the treasury, of the invoice amount, in that
 * transaction, which is where the authorization's nonce was used; the body
 * is the classic claim's 200 body for that transfer; head.json shows the
 * tier until paid_until. `t1`/`t2` bound the credit time when given.
 * Returns {claim, settled, transfer}.
 */
async function assertCredited(r, { agent, plan, payer, inv, payment = r.payment, t1, t2 }) {
  assert.equal(r.status, 200, r.body);
  assertCommonHeaders(r);
  const version = payment.payload.x402Version;
  const headerName = version === 2 ? "payment-response" : "x-payment-response";
  assert.ok(r.headers[headerName], `no ${headerName} on the 200 (headers ${JSON.stringify(r.headers)})`);
  const settled = decodeHeader(r.headers[headerName]);
  assert.equal(settled.success, true, JSON.stringify(settled));
  assert.match(settled.transaction, /^0x[0-9a-fA-F]{64}$/);
  assert.equal(settled.network, version === 2 ? "eip155:8453" : "base");
  assert.equal(settled.payer.toLowerCase(), payer.address.toLowerCase());

  // The chain: one transfer, the invoice amount, to the treasury, in that tx, using that nonce.
  const moved = await transfersFrom(stack.rpcUrl, stack.usdc, payer.address);
  assert.equal(moved.length, 1, `transfers from the payer: ${JSON.stringify(moved, (k, v) => (typeof v === "bigint" ? String(v) : v))}`);
  const [transfer] = moved;
  assert.equal(transfer.to.toLowerCase(), TREASURY.toLowerCase());
  assert.equal(transfer.value, inv.amount);
  assert.equal(transfer.txHash.toLowerCase(), settled.transaction.toLowerCase());
  assert.equal(await nonceUsed(payment), true);
  const used = await authorizationUsedLogs(stack.rpcUrl, stack.usdc, authOf(payment).from, authOf(payment).nonce);
  assert.deepEqual(used.map((u) => u.txHash.toLowerCase()), [transfer.txHash.toLowerCase()]);

  // The body: the classic claim's, for this invoice and this transfer.
  const c = JSON.parse(r.body);
  for (const k of CLAIMED_KEYS) assert.ok(k in c, `claim body lacks ${k}: ${r.body}`);
  for (const k of Object.keys(c)) assert.ok(CLAIMED_KEYS.includes(k) || k === "repeat", `claim body has ${k}: ${r.body}`);
  assert.notEqual(c.repeat, true, "a paid request is not a repeat");
  assert.equal(c.accepted, true);
  assert.equal(c.agent_id, agent.agentId);
  assert.equal(c.plan, plan);
  assert.equal(c.invoice_id, inv.invoiceId);
  assert.equal(c.tx_hash.toLowerCase(), transfer.txHash.toLowerCase());
  assert.equal(c.block_number, transfer.blockNumber);
  assert.equal(c.log_index, transfer.logIndex);
  assert.equal(c.days, 30);
  const credited = Date.parse(c.credited_at);
  if (t1 !== undefined) {
    assert.ok(credited >= Math.floor(t1 / 1000) * 1000 && credited <= t2, `credited_at ${c.credited_at}`);
  }
  assert.equal(Date.parse(c.paid_until), credited + c.days * DAY, r.body);

  const h = await head(w, agent.agentId);
  assert.equal(h.tier, plan, JSON.stringify(h));
  assert.equal(h.paid_until, c.paid_until);
  return { claim: c, settled, transfer };
}

// ---------------------------------------------------------------------------
// Configuration and the request's shape.

test("without X402_FACILITATOR_URL the endpoint is 503 x402_not_configured; the classic quote still answers 200", async () => {
  const w0 = await startWorker({ vars: workerVars() });
  try {
    const a = newAgent();
    const ip = nextIp();
    const r = await send(w0, pathFor(a.agentId, "pro"), { ip });
    assertRefusal(r, 503, "x402_not_configured");
    const plus = await send(w0, pathFor(a.agentId, "plus"), { ip });
    assertRefusal(plus, 503, "x402_not_configured");
    const q = await quoteOk(w0, a, "pro");
    assert.equal(q.chain_id, 8453);
    assert.equal(q.token_contract.toLowerCase(), BASE_USDC.toLowerCase());
    assert.equal(q.to_address.toLowerCase(), TREASURY.toLowerCase());
  } finally {
    await w0.close();
  }
});

test("POST only (GET: 405, Allow: POST, OPTIONS); the CORS preflight allows the payment headers; bad queries are 400", async () => {
  const a = newAgent();
  const ip = nextIp();
  const path = pathFor(a.agentId, "pro");

  const get = await send(w, path, { method: "GET", ip });
  assert.equal(get.status, 405, get.body);
  const allow = (get.headers.allow ?? "").split(",").map((s) => s.trim().toUpperCase()).sort();
  assert.deepEqual(allow, ["OPTIONS", "POST"], `Allow: ${get.headers.allow}`);
  assertCommonHeaders(get);

  // A browser's preflight for what x402 clients send (they also send Access-Control-Expose-Headers).
  const pre = await send(w, path, {
    method: "OPTIONS",
    ip,
    headers: {
      origin: "https://agent.example",
      "access-control-request-method": "POST",
      "access-control-request-headers": "payment-signature,x-payment,access-control-expose-headers",
    },
  });
  assert.ok(pre.status === 200 || pre.status === 204, `preflight ${pre.status} ${pre.body}`);
  const allowed = (pre.headers["access-control-allow-headers"] ?? "").split(",").map((s) => s.trim().toLowerCase());
  for (const h of ["payment-signature", "x-payment", "access-control-expose-headers"]) {
    assert.ok(allowed.includes(h) || allowed.includes("*"), `Access-Control-Allow-Headers "${allowed}" lacks ${h}`);
  }
  const methods = (pre.headers["access-control-allow-methods"] ?? "").split(",").map((s) => s.trim().toUpperCase());
  assert.ok(methods.includes("POST") || methods.includes("*"), `Access-Control-Allow-Methods "${methods}"`);
  assertCommonHeaders(pre);

  const id = a.agentId;
  const bad = [
    ["no query", `${X402_PATH}`],
    ["no agent_id", `${X402_PATH}?plan=pro`],
    ["no plan", `${X402_PATH}?agent_id=${id}`],
    ["plan=gold", `${X402_PATH}?plan=gold&agent_id=${id}`],
    ["plan=free", `${X402_PATH}?plan=free&agent_id=${id}`],
    ["plan=PRO", `${X402_PATH}?plan=PRO&agent_id=${id}`],
    ["empty plan", `${X402_PATH}?plan=&agent_id=${id}`],
    ["plan twice", `${X402_PATH}?plan=pro&plan=plus&agent_id=${id}`],
    ["an unknown param", `${X402_PATH}?plan=pro&agent_id=${id}&foo=1`],
    ["a classic quote field", `${X402_PATH}?plan=pro&agent_id=${id}&chain=base`],
  ];
  for (const [what, p] of bad) {
    const r = await send(w, p, { ip });
    assert.equal(r.status, 400, `${what}: ${r.status} ${r.body}`);
    assertRefusal(r, 400, "bad_upgrade_request");
  }
  // A malformed agent id: either code names it.
  for (const badId of ["nope", id.toUpperCase(), id.slice(1), `${id}0`, `sha256:${id}`]) {
    const r = await send(w, `${X402_PATH}?plan=pro&agent_id=${encodeURIComponent(badId)}`, { ip });
    assert.equal(r.status, 400, `agent_id=${badId}: ${r.status} ${r.body}`);
    assertRefusal(r, 400, ["bad_upgrade_request", "bad_agent_id"]);
  }
});

test("unpaid: 402 with the v1 body and the v2 PAYMENT-REQUIRED; the same invoice again for the same agent and plan; amounts differ per agent", async () => {
  const a = await freshAgent();
  const b = await freshAgent();
  const first = await openInvoice(a, "pro");
  assert.equal(first.v2.error, "x402_payment_required");
  assert.equal(first.v1Body.error, "x402_payment_required");
  assert.equal(typeof first.v1Body.detail, "string");

  const again = await openInvoice(a, "pro");
  assert.equal(again.invoiceId, first.invoiceId);
  assert.equal(again.amount, first.amount);

  const other = await openInvoice(b, "pro");
  assert.notEqual(other.invoiceId, first.invoiceId);
  assert.notEqual(other.amount, first.amount, "two agents' open invoices share an amount");

  const plus = await openInvoice(a, "plus"); // the tag is checked against Plus's price
  assert.notEqual(plus.invoiceId, first.invoiceId);

  await assertFree(w, a.agentId);
  await assertFree(w, b.agentId);
});

// ---------------------------------------------------------------------------
// The official payers.

test("@x402/fetch (v2) buys Pro: PAYMENT-RESPONSE, the claim body, head.json pro, one transfer of the invoice amount, one /settle", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const t1 = Date.now();
  const r = await pay(payWithX402Fetch, urlFor(w, a.agentId, "pro"), a, { privateKey: payer.key });
  const t2 = Date.now();
  assert.equal(r.sent.length, 2, "one unpaid request, one paid");
  assert.equal(r.payment.name.toLowerCase(), "payment-signature");
  assert.equal(r.payment.payload.accepted.extra.invoice_id, inv.invoiceId, "the payer was offered the open invoice");
  assert.equal(authOf(r.payment).value, String(inv.amount));
  await assertCredited(r, { agent: a, plan: "pro", payer, inv, t1, t2 });
  assert.equal(settlesFor(r.payment).length, 1);
});

test("the operator's totals: an x402 purchase counted once (x402, pro, the invoice amount), its replay not at all", async () => {
  const before = await statsSettled(w);
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  const r = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
  assert.equal(r.status, 200, r.body);
  const x = (t) => t.credits.ever.x402;
  const after = await statsUntil(w, (t) => x(t).plans.pro > x(before).plans.pro);
  assert.equal(x(after).plans.pro, x(before).plans.pro + 1);
  assert.equal(x(after).plans.plus, x(before).plans.plus);
  assert.equal(BigInt(x(after).usdc_atomic) - BigInt(x(before).usdc_atomic), BigInt(inv.amount));
  assert.deepEqual(after.credits.ever.transfer, before.credits.ever.transfer, "no transfer claim was made");
  assert.equal(after.agents.by_tier.pro, before.agents.by_tier.pro + 1);
  assert.equal(after.shards.answered, 16);
  // The same header again: the stored answer, nothing counted.
  const again = await resend(url, r.payment, a);
  assert.equal(again.status, 200, again.body);
  await new Promise((res) => setTimeout(res, 2_500));
  const later = await stats(w);
  assert.deepEqual(x(later), x(after));
});

test("x402-fetch 1.2.0 (legacy v1) buys Plus: X-PAYMENT, X-PAYMENT-RESPONSE on base, head.json plus, one transfer; its replay credits nothing more", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "plus");
  const url = urlFor(w, a.agentId, "plus");
  const t1 = Date.now();
  const r = await pay(payWithLegacyX402Fetch, url, a, { privateKey: payer.key, rpcUrl: stack.rpcUrl });
  const t2 = Date.now();
  assert.equal(r.payment.name.toLowerCase(), "x-payment");
  assert.equal(r.payment.payload.x402Version, 1);
  assert.equal(r.payment.payload.network, "base");
  assert.equal(authOf(r.payment).value, String(inv.amount));
  const { claim } = await assertCredited(r, { agent: a, plan: "plus", payer, inv, t1, t2 });

  const again = await resend(url, r.payment, a);
  assert.equal(again.status, 200, again.body);
  assert.deepEqual(again.json, claim);
  assert.equal(settlesFor(r.payment).length, 1);
  assert.equal((await transfersFrom(stack.rpcUrl, stack.usdc, payer.address)).length, 1);
});

test("PyPI x402 2.25 (v2) buys Pro: PAYMENT-RESPONSE, head.json pro, one transfer, one /settle", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const t1 = Date.now();
  const r = withJson(await payWithPython(urlFor(w, a.agentId, "pro"), { privateKey: payer.key }));
  const t2 = Date.now();
  assert.equal(r.payment.name.toLowerCase(), "payment-signature");
  assert.equal(r.payment.payload.accepted.extra.invoice_id, inv.invoiceId);
  await assertCredited(r, { agent: a, plan: "pro", payer, inv, t1, t2 });
  assert.equal(settlesFor(r.payment).length, 1);
});

// ---------------------------------------------------------------------------
// Replay, theft, wrong authorizations, races.

test("replay: the same PAYMENT-SIGNATURE again answers 200 with the same body; one transfer; /settle stays at one", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  const r = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
  const { claim, settled } = await assertCredited(r, { agent: a, plan: "pro", payer, inv });
  for (let i = 0; i < 2; i++) {
    const again = await resend(url, r.payment, a);
    assert.equal(again.status, 200, again.body);
    assertCommonHeaders(again);
    assert.deepEqual(again.json, claim);
    const s = decodeHeader(again.headers["payment-response"]);
    assert.equal(s.success, true);
    assert.equal(s.transaction.toLowerCase(), settled.transaction.toLowerCase());
  }
  assert.equal(settlesFor(r.payment).length, 1);
  assert.equal((await transfersFrom(stack.rpcUrl, stack.usdc, payer.address)).length, 1);
  assert.equal((await head(w, a.agentId)).paid_until, claim.paid_until);
});

test("theft: agent A's settled header on agent B's URL is 402 x402_invoice_mismatch with B's invoice; no /settle; B stays free", async () => {
  const A = await freshAgent();
  const B = await freshAgent();
  const payer = await fundedPayer(stack);
  const invA = await openInvoice(A, "pro");
  await openInvoice(B, "pro"); // B has its own open invoice
  const r = await pay(payWithX402Fetch, urlFor(w, A.agentId, "pro"), A, { privateKey: payer.key });
  const { claim } = await assertCredited(r, { agent: A, plan: "pro", payer, inv: invA });

  for (let i = 0; i < 2; i++) {
    const stolen = await resend(urlFor(w, B.agentId, "pro"), r.payment, B);
    assertRefusal(stolen, 402, "x402_invoice_mismatch");
    const fresh = offered(stolen, { agentId: B.agentId, plan: "pro" }, { v1Body: false });
    assert.notEqual(fresh.amount, invA.amount);
  }
  assert.equal(settlesFor(r.payment).length, 1, "the stolen header reached /settle");
  assert.equal((await transfersFrom(stack.rpcUrl, stack.usdc, payer.address)).length, 1);
  await assertFree(w, B.agentId);
  assert.equal((await head(w, A.agentId)).paid_until, claim.paid_until);
});

test("theft: a header signed for agent C's invoice but not yet sent, on agent B's URL, is x402_invoice_mismatch and not burned; C then pays with it", async () => {
  const B = await freshAgent();
  const C = await freshAgent();
  const payer = await fundedPayer(stack);
  await openInvoice(B, "pro");
  const invC = await openInvoice(C, "pro");
  const captured = await capturePayment(invC.v2, invC.v1Body, { privateKey: payer.key });
  assert.equal(captured.payload.accepted.extra.invoice_id, invC.invoiceId);

  const stolen = await resend(urlFor(w, B.agentId, "pro"), captured, B);
  assertRefusal(stolen, 402, "x402_invoice_mismatch");
  offered(stolen, { agentId: B.agentId, plan: "pro" }, { v1Body: false });
  assert.equal(settlesFor(captured).length, 0, "the stolen header reached /settle");
  await assertNothingMoved(payer, captured);
  await assertFree(w, B.agentId);
  await assertFree(w, C.agentId);

  const ok = await resend(urlFor(w, C.agentId, "pro"), captured, C);
  await assertCredited(ok, { agent: C, plan: "pro", payer, inv: invC, payment: captured });
  await assertFree(w, B.agentId);
});

test("under- and over-payment, expired and not-yet-valid authorizations: 402 x402_invoice_mismatch, no /settle, nothing moved; the invoice stays payable", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  assert.ok(inv.accept.maxTimeoutSeconds > 90, `maxTimeoutSeconds ${inv.accept.maxTimeoutSeconds}`);
  const url = urlFor(w, a.agentId, "pro");
  const now = Math.floor(Date.now() / 1000);
  const withAmount = (amount) => ({ ...inv.accept, amount: String(amount) });
  const sign = (opts) => signPayment({ privateKey: payer.key, paymentRequired: inv.v2, ...opts });
  const cases = [
    ["amount - 1 (v2)", await sign({ accept: withAmount(inv.amount - 1n) })],
    ["amount + 1 (v2)", await sign({ accept: withAmount(inv.amount + 1n) })],
    // Legacy v1 facilitators accept value >= maxAmountRequired: the Worker must not.
    ["amount + 1 (v1)", await sign({ accept: withAmount(inv.amount + 1n), version: 1 })],
    ["amount - 1 (v1)", await sign({ accept: withAmount(inv.amount - 1n), version: 1 })],
    ["expired (validBefore in the past)", await sign({ authorization: { validAfter: now - 600, validBefore: now - 30 } })],
    ["not yet valid (validAfter in the future)", await sign({ authorization: { validAfter: now + 60 } })],
  ];
  for (const [what, payment] of cases) {
    const r = await resend(url, payment, a);
    assert.equal(r.status, 402, `${what}: ${r.status} ${r.body}`);
    assertRefusal(r, 402, "x402_invoice_mismatch");
    offered(r, { agentId: a.agentId, plan: "pro" }, { v1Body: false });
    assert.equal(settlesFor(payment).length, 0, `${what} reached /settle`);
  }
  await assertNothingMoved(payer, ...cases.map(([, p]) => p));
  await assertFree(w, a.agentId);

  // The control: signed the same way for the invoice's own terms, it pays.
  const good = await sign({});
  const ok = await resend(url, good, a);
  await assertCredited(ok, { agent: a, plan: "pro", payer, inv, payment: good });
});

test("two authorizations for one invoice sent at the same moment: exactly one 200 and one 409; exactly one transfer", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  const p1 = await signPayment({ privateKey: payer.key, paymentRequired: inv.v2 });
  const p2 = await signPayment({ privateKey: payer.key, paymentRequired: inv.v2 });
  assert.notEqual(authOf(p1).nonce, authOf(p2).nonce);
  const answers = await Promise.all([resend(url, p1, a), resend(url, p2, a)]);
  const pairs = [[answers[0], p1], [answers[1], p2]];
  const won = pairs.filter(([r]) => r.status === 200);
  assert.equal(won.length, 1, `statuses ${answers.map((r) => `${r.status} ${r.body}`).join(" / ")}`);
  const [[lost, lostPayment]] = pairs.filter(([r]) => r.status !== 200);
  assertRefusal(lost, 409, ["x402_settlement_in_progress", "invoice_already_paid"]);
  await assertCredited(won[0][0], { agent: a, plan: "pro", payer, inv, payment: won[0][1] });
  assert.equal(await nonceUsed(lostPayment), false, "the losing authorization was executed too");
});

test("a second authorization sent while the first is being settled: 409, never settled; exactly one transfer", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  const p1 = await signPayment({ privateKey: payer.key, paymentRequired: inv.v2 });
  const p2 = await signPayment({ privateKey: payer.key, paymentRequired: inv.v2 });
  // The facilitator settles for real but answers late, well within the Worker's settle timeout.
  await f.setMode("hang_after_broadcast", { delayMs: 1500 });
  const first = resend(url, p1, a);
  await waitFor(() => settlesFor(p1).length === 1, "the first authorization reached /settle");
  const second = await resend(url, p2, a);
  const r1 = await first;
  assertRefusal(second, 409, ["x402_settlement_in_progress", "invoice_already_paid"]);
  await assertCredited(r1, { agent: a, plan: "pro", payer, inv, payment: p1 });
  assert.equal(settlesFor(p2).length, 0, "a second authorization for a settling invoice reached /settle");
  assert.equal(await nonceUsed(p2), false);
});

// ---------------------------------------------------------------------------
// The facilitator misbehaves; the chain decides.

test("hang_after_broadcast: 503 x402_settlement_pending with Retry-After; a 2nd authorization meanwhile is 409 x402_settlement_in_progress; once mined the agent's object credits it alone; the same header then answers 200; one transfer", async () => {
  const settling = (t) => t.settlements.pending;
  const p0 = settling(await statsSettled(w));
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  const other = await signPayment({ privateKey: payer.key, paymentRequired: inv.v2 });
  await f.setMode("hang_after_broadcast");
  // The facilitator's transaction is broadcast but not mined while the Worker
  // waits (as on Base between blocks): at its settle deadline the outcome is
  // truly unknown, whatever it reads from the chain.
  await rpc(stack.rpcUrl, "evm_setAutomine", [false]);
  let r;
  let took;
  try {
    const started = Date.now();
    r = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
    took = Date.now() - started;
    const pending = await rpc(stack.rpcUrl, "txpool_status", []);
    assert.equal(Number(pending.pending), 1, `the facilitator's transaction is not waiting: ${JSON.stringify(pending)}`);
    assert.equal(await nonceUsed(r.payment), false);
    // Meanwhile the agent signs a fresh authorization for the same invoice (x402-foundation/x402#3208):
    // never settled while the first is unresolved.
    const second = await resend(url, other, a);
    assertRefusal(second, 409, "x402_settlement_in_progress");
    assert.equal(settlesFor(other).length, 0, "a second authorization for a settling invoice reached /settle");
  } finally {
    await rpc(stack.rpcUrl, "evm_setAutomine", [true]);
  }
  assertRefusal(r, 503, "x402_settlement_pending");
  assertRetryAfter(r);
  assert.ok(took < SETTLE_TIMEOUT_MS + 10_000, `the Worker waited ${took} ms for a hanging facilitator`);
  // The operator sees it in flight, and how old it is.
  const inFlight = await statsUntil(w, (t) => settling(t) > p0);
  assert.equal(settling(inFlight), p0 + 1);
  assert.ok(inFlight.settlements.oldest_age_sec >= 0 && inFlight.settlements.oldest_started_at, JSON.stringify(inFlight.settlements));
  await mine(stack.rpcUrl, 1);
  assert.equal(await nonceUsed(r.payment), true, "mined: the money left");
  const calls = settlesFor(r.payment);
  assert.ok(calls.length >= 1);
  assert.equal(calls[0].status, null, "the facilitator never answered");

  // No further request to the endpoint: head.json only.
  await waitForTier(a.agentId, "pro");
  const again = await resend(url, r.payment, a);
  await assertCredited(again, { agent: a, plan: "pro", payer, inv, payment: r.payment });
  assertRefusal(await resend(url, other, a), 409, "invoice_already_paid");
  assert.equal(await nonceUsed(other), false);
  // Credited: no longer in flight.
  assert.equal(settling(await statsUntil(w, (t) => settling(t) === p0)), p0);
});

test("fail_before_broadcast (the library's failure answer, nothing sent): 402 x402_settlement_failed offering a new invoice; nothing moved; free", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  await f.setMode("fail_before_broadcast");
  const r = await pay(payWithX402Fetch, urlFor(w, a.agentId, "pro"), a, { privateKey: payer.key });
  assertRefusal(r, 402, "x402_settlement_failed");
  const fresh = offered(r, { agentId: a.agentId, plan: "pro" }, { v1Body: false });
  assert.notEqual(fresh.invoiceId, inv.invoiceId, "the failed invoice was offered again");
  assert.notEqual(fresh.amount, inv.amount, "the new invoice has the failed one's amount");
  const calls = settlesFor(r.payment);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].response?.success, false, "the facilitator answered a failure");
  await assertNothingMoved(payer, r.payment);
  await assertFree(w, a.agentId);
});

test("error_500 (/settle crashes, nothing sent): 503 x402_settlement_pending, never 402; nothing moved; the same header later settles once", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  await f.setMode("error_500");
  const r = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
  assertRefusal(r, 503, "x402_settlement_pending");
  assertRetryAfter(r);
  assert.equal(settlesFor(r.payment)[0]?.status, 500);
  await assertNothingMoved(payer, r.payment);
  await assertFree(w, a.agentId);

  await f.setMode("normal");
  const again = await resend(url, r.payment, a);
  await assertCredited(again, { agent: a, plan: "pro", payer, inv, payment: r.payment });
});

test("fake_success (a made-up tx hash, nothing sent): 503 x402_settlement_pending, never 200; nothing moved; head.json stays free", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  await f.setMode("fake_success");
  const r = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
  assertRefusal(r, 503, "x402_settlement_pending");
  assertRetryAfter(r);
  assert.equal(r.headers["payment-response"], undefined, "a settlement header for a payment that never happened");
  const calls = settlesFor(r.payment);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].response.success, true, "the facilitator did claim success");
  await assertNothingMoved(payer, r.payment);
  await assertFree(w, a.agentId);

  const again = await resend(url, r.payment, a);
  assertRefusal(again, 503, "x402_settlement_pending");
  await assertNothingMoved(payer, r.payment);
  await assertFree(w, a.agentId);
});

test("settlement_pending (broadcast, the library's own pending answer): 503 x402_settlement_pending or 200, then credited once", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  await f.setMode("settlement_pending");
  const r = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
  const [call] = settlesFor(r.payment);
  assert.equal(call?.response?.errorReason, "settlement_pending", "the facilitator answered settlement_pending");
  let final = r;
  if (r.status !== 200) {
    assertRefusal(r, 503, "x402_settlement_pending");
    assertRetryAfter(r);
    await waitForTier(a.agentId, "pro");
    final = await resend(url, r.payment, a);
  }
  const { transfer } = await assertCredited(final, { agent: a, plan: "pro", payer, inv, payment: r.payment });
  assert.equal(transfer.txHash.toLowerCase(), call.response.transaction.toLowerCase(), "the broadcast tx is the credited one");
});

test("down (503 everywhere): 503 x402_facilitator_unavailable, nothing moved, no credit; once normal the same payer pays", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  await f.setMode("down");
  const r = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
  assertRefusal(r, 503, "x402_facilitator_unavailable");
  await assertNothingMoved(payer, r.payment);
  await assertFree(w, a.agentId);

  await f.setMode("normal");
  const ok = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
  assert.equal(ok.payment.payload.accepted.extra.invoice_id, inv.invoiceId);
  await assertCredited(ok, { agent: a, plan: "pro", payer, inv });
  assert.equal(await nonceUsed(r.payment), false, "the authorization sent while down was executed too");
});

test("front-run: a third party submits the authorization on chain first; the header then answers 200, credited from that transfer; one transfer", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const captured = await capturePayment(inv.v2, inv.v1Body, { privateKey: payer.key });
  const { authorization, signature } = captured.payload.payload;
  const thief = stack.chain.accounts[3];
  const receipt = await submitTransferWithAuthorization(stack.rpcUrl, stack.usdc, thief, authorization, signature);
  assert.equal(receipt.status, "0x1");
  assert.equal(receipt.from, thief);

  const r = await resend(urlFor(w, a.agentId, "pro"), captured, a);
  const { transfer } = await assertCredited(r, { agent: a, plan: "pro", payer, inv, payment: captured });
  assert.equal(transfer.txHash.toLowerCase(), receipt.transactionHash.toLowerCase());
});

// ---------------------------------------------------------------------------
// The payer's side.

test("a payer without enough USDC: 402 x402_payment_invalid; no /settle; nothing moved; free", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack, 1_000_000n); // 1 USDC, Pro costs 5 and a tag
  await openInvoice(a, "pro");
  const r = await pay(payWithX402Fetch, urlFor(w, a.agentId, "pro"), a, { privateKey: payer.key });
  assertRefusal(r, 402, "x402_payment_invalid");
  assert.equal(settlesFor(r.payment).length, 0, "an unpayable authorization reached /settle");
  await assertNothingMoved(payer, r.payment);
  await assertFree(w, a.agentId);
});

test("an unpaid retry after a credit answers 200 with that credit and repeat: true; with renew=1 (or another plan) a new 402", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  const r = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
  const { claim } = await assertCredited(r, { agent: a, plan: "pro", payer, inv });

  const repeat = await send(w, pathFor(a.agentId, "pro"), { ip: a.ip });
  assert.equal(repeat.status, 200, repeat.body);
  assertCommonHeaders(repeat);
  assert.equal(repeat.json.repeat, true, repeat.body);
  for (const k of CLAIMED_KEYS) assert.deepEqual(repeat.json[k], claim[k], `${k}: ${repeat.body}`);

  const renew = await openInvoice(a, "pro", "&renew=1");
  assert.notEqual(renew.invoiceId, claim.invoice_id, "renew=1 offered the paid invoice");
  const plus = await openInvoice(a, "plus");
  assert.notEqual(plus.invoiceId, claim.invoice_id);

  assert.equal(settlesFor(r.payment).length, 1);
  assert.equal((await transfersFrom(stack.rpcUrl, stack.usdc, payer.address)).length, 1);
  const h = await head(w, a.agentId);
  assert.equal(h.tier, "pro");
  assert.equal(h.paid_until, claim.paid_until);
});

test("a malformed payment header (not base64, not JSON, wrong scheme, wrong network; v1 and v2) is 400 bad_x402_payment; no /settle", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  const good = await signPayment({ privateKey: payer.key, paymentRequired: inv.v2 });
  const goodV1 = await signPayment({ privateKey: payer.key, paymentRequired: inv.v2, version: 1 });
  const b64 = (s) => Buffer.from(s, "utf8").toString("base64");
  const cases = [
    ["PAYMENT-SIGNATURE", "%%% not base64 %%%"],
    ["X-PAYMENT", "%%% not base64 %%%"],
    ["PAYMENT-SIGNATURE", b64("not json")],
    ["X-PAYMENT", b64("{\"x402Version\":1,")],
    ["PAYMENT-SIGNATURE", encodeHeader({ ...good.payload, accepted: { ...good.payload.accepted, scheme: "upto" } })],
    ["PAYMENT-SIGNATURE", encodeHeader({ ...good.payload, accepted: { ...good.payload.accepted, network: "eip155:1" } })],
    ["PAYMENT-SIGNATURE", encodeHeader({ ...good.payload, accepted: { ...good.payload.accepted, network: "eip155:84532" } })],
    ["X-PAYMENT", encodeHeader({ ...goodV1.payload, scheme: "upto" })],
    ["X-PAYMENT", encodeHeader({ ...goodV1.payload, network: "base-sepolia" })],
    ["X-PAYMENT", encodeHeader({ ...goodV1.payload, network: "ethereum" })],
  ];
  const settlesBefore = f.settleCount();
  for (const [name, value] of cases) {
    const r = await send(w, url, { ip: a.ip, headers: { [name]: value } });
    assert.equal(r.status, 400, `${name}: ${value.slice(0, 60)}…: ${r.status} ${r.body}`);
    assertRefusal(r, 400, "bad_x402_payment");
  }
  assert.equal(f.settleCount(), settlesBefore, "a malformed header reached /settle");
  await assertNothingMoved(payer, good, goodV1);
  await assertFree(w, a.agentId);

  // The control: the unmodified header pays.
  const ok = await resend(url, good, a);
  await assertCredited(ok, { agent: a, plan: "pro", payer, inv, payment: good });
});

// ---------------------------------------------------------------------------
// Which payment is answered from the store: only the identical authorization
// (its six signed fields and its signature; the envelope around it does not
// matter) of the same plan. Anything else is verified and refused on its own.

/** `payment`'s authorization and signature in the other version's envelope (v2 → v1, v1 → v2 for `inv`). */
function reenveloped(payment, inv) {
  const { authorization, signature } = payment.payload.payload;
  if (payment.payload.x402Version === 2) {
    const payload = { x402Version: 1, scheme: "exact", network: "base", payload: { signature, authorization } };
    return { name: "X-PAYMENT", value: encodeHeader(payload), payload };
  }
  const payload = { x402Version: 2, payload: { authorization, signature }, resource: inv.v2.resource, accepted: inv.accept };
  return { name: "PAYMENT-SIGNATURE", value: encodeHeader(payload), payload };
}

/** `payment` with its signature replaced by 65 bytes that sign nothing. */
function forged(payment) {
  const payload = structuredClone(payment.payload);
  payload.payload.signature = `0x${"5a".repeat(64)}1b`;
  return { name: payment.name, value: encodeHeader(payload), payload };
}

test("the identical authorization again answers the same 200, in either envelope (v2 re-sent, v1, v2 with another resource and timeout); /settle stays at one", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  const r = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
  const { claim, settled } = await assertCredited(r, { agent: a, plan: "pro", payer, inv });

  const v1 = reenveloped(r.payment, inv);
  const v2 = structuredClone(r.payment.payload);
  v2.resource = { ...v2.resource, description: "another description" };
  v2.accepted = { ...v2.accepted, maxTimeoutSeconds: v2.accepted.maxTimeoutSeconds - 60 };
  const rewrapped = { name: "PAYMENT-SIGNATURE", value: encodeHeader(v2), payload: v2 };
  for (const [what, header, responseHeader] of [
    ["the v2 header again", r.payment, "payment-response"],
    ["the same authorization as v1", v1, "x-payment-response"],
    ["the same authorization in another v2 envelope", rewrapped, "payment-response"],
  ]) {
    const again = await resend(url, header, a);
    assert.equal(again.status, 200, `${what}: ${again.body}`);
    assert.deepEqual(again.json, claim, what);
    const s = decodeHeader(again.headers[responseHeader]);
    assert.equal(s.transaction.toLowerCase(), settled.transaction.toLowerCase(), what);
  }
  assert.equal(settlesFor(r.payment).length, 1);
  assert.equal((await transfersFrom(stack.rpcUrl, stack.usdc, payer.address)).length, 1);
});

/**
 * An agent credited with Pro by a fresh payer through @x402/fetch, with its
 * Plus invoice open: {a, payer, inv, r (the payment), claim, nonce, plus, url, plusUrl}.
 */
async function creditedWithPlusOpen() {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  const r = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
  const { claim } = await assertCredited(r, { agent: a, plan: "pro", payer, inv });
  const plus = await openInvoice(a, "plus");
  return { a, payer, inv, r, claim, nonce: authOf(r.payment).nonce, plus, url, plusUrl: urlFor(w, a.agentId, "plus") };
}

/** Each of `cases` ([what, url, payment]) is 409 payment_already_claimed, never settled; then head.json and the chain are as `c` left them. */
async function assertAllClaimed(c, cases) {
  for (const [what, url, payment] of cases) {
    const answer = await resend(url, payment, c.a);
    assert.notEqual(answer.status, 200, `${what}: answered ${answer.body}`);
    assertRefusal(answer, 409, "payment_already_claimed");
    assert.equal(answer.headers["payment-response"], undefined, what);
    assert.equal(answer.headers["x-payment-response"], undefined, what);
    assert.equal(settlesFor(payment).length, 1, `${what} reached /settle again`);
  }
  const h = await head(w, c.a.agentId);
  assert.equal(h.tier, "pro", JSON.stringify(h));
  assert.equal(h.paid_until, c.claim.paid_until);
  assert.equal((await transfersFrom(stack.rpcUrl, stack.usdc, c.payer.address)).length, 1);
  // Plus's invoice was never bound: still offered.
  assert.equal((await openInvoice(c.a, "plus")).invoiceId, c.plus.invoiceId);
}

test("the credited payer and nonce re-signed for Plus (its invoice's value, another value, v1): 409 payment_already_claimed, never the Pro credit; head.json unchanged, one transfer", async () => {
  const c = await creditedWithPlusOpen();
  const resigned = await signPayment({ privateKey: c.payer.key, paymentRequired: c.plus.v2, authorization: { nonce: c.nonce } });
  const offValue = await signPayment({
    privateKey: c.payer.key,
    paymentRequired: c.plus.v2,
    accept: { ...c.plus.accept, amount: String(c.plus.amount + 17n) },
    authorization: { nonce: c.nonce },
  });
  await assertAllClaimed(c, [
    ["re-signed for Plus's invoice", c.plusUrl, resigned],
    ["re-signed for Plus at a value of no invoice", c.plusUrl, offValue],
    ["re-signed for Plus, v1", c.plusUrl, reenveloped(resigned, c.plus)],
    ["the Pro authorization itself sent for Plus", c.plusUrl, c.r.payment],
  ]);
});

test("the credited payer and nonce with a signature that does not verify (for Plus, or Pro's own fields): 409 payment_already_claimed, never the Pro credit; head.json unchanged", async () => {
  const c = await creditedWithPlusOpen();
  const resigned = await signPayment({ privateKey: c.payer.key, paymentRequired: c.plus.v2, authorization: { nonce: c.nonce } });
  await assertAllClaimed(c, [
    ["re-signed for Plus, forged", c.plusUrl, forged(resigned)],
    ["Pro's authorization with a forged signature", c.url, forged(c.r.payment)],
    ["Pro's authorization with a forged signature, v1", c.url, reenveloped(forged(c.r.payment), c.inv)],
  ]);
});

test("a fresh nonce with a forged signature for an open invoice: 402 x402_payment_invalid; nothing bound, nothing moved", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  const bad = forged(await signPayment({ privateKey: payer.key, paymentRequired: inv.v2 }));
  const r = await resend(url, bad, a);
  assertRefusal(r, 402, "x402_payment_invalid");
  assert.equal(offered(r, { agentId: a.agentId, plan: "pro" }, { v1Body: false }).invoiceId, inv.invoiceId);
  assert.equal(settlesFor(bad).length, 0);
  await assertNothingMoved(payer, bad);
  await assertFree(w, a.agentId);
});

// ---------------------------------------------------------------------------
// A private capsule: the door tells a stranger nothing of the agent's
// payments (docs/PROTOCOL.md §10, §12).

/** The agent's next write makes its capsule private (no reader but the owner). */
async function makePrivate(agent, seq = 2) {
  const r = await publish(w, agent, seq, exampleCapsule(agent.agentId, { access_control: { public: false, authorized_readers: [] } }), { ip: nextIp() });
  assert.equal(r.status, 200, r.text);
  assert.equal((await w.fetch(headPath(agent.agentId))).status, 404, "the capsule is not private");
}

/** head.json as the owner reads it (a signed read). */
async function ownHead(agent) {
  const url = BASE + headPath(agent.agentId);
  const r = await w.fetch(headPath(agent.agentId), { headers: signedReadHeaders(agent, "GET", url) });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

/** What a 402's shape is, without the invoice's own values: status, code, header names, body and PAYMENT-REQUIRED members. */
function shapeOf(r) {
  const names = Object.keys(r.headers).filter((n) => !["date", "content-length"].includes(n)).sort();
  const keys = (o) => Object.keys(o ?? {}).sort();
  const required = decodeHeader(r.headers["payment-required"]);
  return {
    status: r.status,
    error: r.json?.error,
    detail: r.json?.detail,
    names,
    body: keys(r.json),
    accepts: r.json?.accepts?.map(keys),
    required: keys(required),
    requiredError: required.error,
    requiredAccepts: required.accepts.map(keys),
  };
}

test("a private capsule: an unpaid request after a credit is the 402 offer a never-paid agent gets, not the receipt; the same payment header still answers its 200", async () => {
  const a = await freshAgent();
  const payer = await fundedPayer(stack);
  const inv = await openInvoice(a, "pro");
  const url = urlFor(w, a.agentId, "pro");
  const r = await pay(payWithX402Fetch, url, a, { privateKey: payer.key });
  const { claim } = await assertCredited(r, { agent: a, plan: "pro", payer, inv });
  await makePrivate(a);

  const never = { ...newAgent(), ip: nextIp() };
  await publish(w, never, 1, exampleCapsule(never.agentId, { access_control: { public: false, authorized_readers: [] } }), { ip: nextIp() });
  const unpaid = await send(w, pathFor(a.agentId, "pro"), { ip: a.ip });
  assertRefusal(unpaid, 402, "x402_payment_required");
  assert.equal(unpaid.json.repeat, undefined, unpaid.body);
  assert.ok(!unpaid.body.includes(claim.tx_hash) && !unpaid.body.includes(claim.invoice_id), unpaid.body);
  const fresh = offered(unpaid, { agentId: a.agentId, plan: "pro" });
  assert.notEqual(fresh.invoiceId, claim.invoice_id, "the paid invoice was offered");
  const stranger = await send(w, pathFor(never.agentId, "pro"), { ip: never.ip });
  assert.deepEqual(shapeOf(unpaid), shapeOf(stranger));

  const again = await resend(url, r.payment, a);
  assert.equal(again.status, 200, again.body);
  assert.deepEqual(again.json, claim);
  const h = await ownHead(a);
  assert.equal(h.tier, "pro");
  assert.equal(h.paid_until, claim.paid_until);
  assert.equal((await transfersFrom(stack.rpcUrl, stack.usdc, payer.address)).length, 1);
});

test("a private capsule: a payment of a paid invoice's amount is 402 x402_invoice_mismatch as for an amount of no invoice, forged or not; a public capsule keeps 409 invoice_already_paid", async () => {
  const a = await freshAgent();
  const b = await freshAgent();
  const payer = await fundedPayer(stack);
  const prober = await fundedPayer(stack);
  const invA = await openInvoice(a, "pro");
  const invB = await openInvoice(b, "pro");
  await assertCredited(await pay(payWithX402Fetch, urlFor(w, a.agentId, "pro"), a, { privateKey: payer.key }), { agent: a, plan: "pro", payer, inv: invA });
  await makePrivate(a);
  const url = urlFor(w, a.agentId, "pro");
  const next = await openInvoice(a, "pro", "&renew=1");
  const sign = (amount) =>
    signPayment({ privateKey: prober.key, paymentRequired: next.v2, accept: { ...next.accept, amount: String(amount) } });

  const probes = [
    ["the paid invoice's amount", await sign(invA.amount)],
    ["the paid invoice's amount, forged", forged(await sign(invA.amount))],
    ["an amount of no invoice", await sign(invA.amount + 4321n)],
    ["an amount of no invoice, forged", forged(await sign(invA.amount + 4321n))],
  ];
  const shapes = [];
  for (const [what, payment] of probes) {
    const r = await resend(url, payment, a);
    assertRefusal(r, 402, "x402_invoice_mismatch");
    assert.equal(offered(r, { agentId: a.agentId, plan: "pro" }, { v1Body: false }).invoiceId, next.invoiceId, what);
    shapes.push([what, shapeOf(r)]);
    assert.equal(settlesFor(payment).length, 0, what);
  }
  for (const [what, shape] of shapes) assert.deepEqual(shape, shapes[2][1], `${what} answered unlike an amount of no invoice`);
  await assertNothingMoved(prober, ...probes.map(([, p]) => p));

  // A public capsule keeps its 409.
  const payerB = await fundedPayer(stack);
  const rB = await pay(payWithX402Fetch, urlFor(w, b.agentId, "pro"), b, { privateKey: payerB.key });
  await assertCredited(rB, { agent: b, plan: "pro", payer: payerB, inv: invB });
  const nextB = await openInvoice(b, "pro", "&renew=1");
  const probeB = await signPayment({
    privateKey: prober.key,
    paymentRequired: nextB.v2,
    accept: { ...nextB.accept, amount: String(invB.amount) },
  });
  assertRefusal(await resend(urlFor(w, b.agentId, "pro"), probeB, b), 409, "invoice_already_paid");
  await assertNothingMoved(prober, probeB);
});

test("a private capsule: while a settlement is in flight an unpaid request is the 402 offer (public: 503 x402_settlement_pending) and another authorization of the settling amount is 402 x402_invoice_mismatch (public: 409 x402_settlement_in_progress)", async () => {
  const pub = await freshAgent();
  const priv = await freshAgent();
  await makePrivate(priv);
  const never = { ...newAgent(), ip: nextIp() };
  await publish(w, never, 1, exampleCapsule(never.agentId, { access_control: { public: false, authorized_readers: [] } }), { ip: nextIp() });
  const payer = await fundedPayer(stack);
  const prober = await fundedPayer(stack);
  const inv = { pub: await openInvoice(pub, "pro"), priv: await openInvoice(priv, "pro") };
  // The facilitator claims a transaction the chain never shows: the settlement stays in flight.
  await f.setMode("fake_success");
  const paid = {};
  for (const [k, agent] of [["pub", pub], ["priv", priv]]) {
    paid[k] = await pay(payWithX402Fetch, urlFor(w, agent.agentId, "pro"), agent, { privateKey: payer.key });
    assertRefusal(paid[k], 503, "x402_settlement_pending");
  }
  await f.setMode("normal");
  const second = (k) =>
    signPayment({ privateKey: prober.key, paymentRequired: inv[k].v2 });

  assertRefusal(await send(w, pathFor(pub.agentId, "pro"), { ip: pub.ip }), 503, "x402_settlement_pending");
  assertRefusal(await resend(urlFor(w, pub.agentId, "pro"), await second("pub"), pub), 409, "x402_settlement_in_progress");

  const unpaid = await send(w, pathFor(priv.agentId, "pro"), { ip: priv.ip });
  assertRefusal(unpaid, 402, "x402_payment_required");
  const fresh = offered(unpaid, { agentId: priv.agentId, plan: "pro" });
  assert.notEqual(fresh.invoiceId, inv.priv.invoiceId, "the settling invoice was offered");
  assert.deepEqual(shapeOf(unpaid), shapeOf(await send(w, pathFor(never.agentId, "pro"), { ip: never.ip })));
  const probe = await second("priv");
  const mismatch = await resend(urlFor(w, priv.agentId, "pro"), probe, priv);
  assertRefusal(mismatch, 402, "x402_invoice_mismatch");
  assert.equal(offered(mismatch, { agentId: priv.agentId, plan: "pro" }, { v1Body: false }).invoiceId, fresh.invoiceId);
  // The payer's own header is still answered from the store.
  assertRefusal(await resend(urlFor(w, priv.agentId, "pro"), paid.priv.payment, priv), 503, "x402_settlement_pending");
  await assertNothingMoved(prober, probe);
  await assertNothingMoved(payer, paid.pub.payment, paid.priv.payment);
});
