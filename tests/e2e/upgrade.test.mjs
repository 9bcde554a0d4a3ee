// The USDC upgrade end to end (docs/PROTOCOL.md §10): the built Worker in
// workerd, a real local EVM chain (anvil, chain id 8453) with a test USDC at
// Base's canonical USDC address, and claims signed here from the wire
// contract. Quote, pay, claim; every refusal the contract names; theft and
// replay; expiry; lying and absent providers. On every failure nothing is
// credited: head.json stays free and a re-claim fails the same way.
//
// Needs the anvil binary (npm @foundry-rs/anvil-linux-amd64, see scripts/chain.mjs): without it
// this file fails (never skips).
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./harness.mjs";
import { stats, statsUntil } from "./admin-helpers.mjs";
import {
  newAgent,
  exampleCapsule,
  envelope,
  publish,
  put,
  jcs,
  capsulePath,
  HOUR,
} from "./helpers.mjs";
import {
  anvilBinary,
  deployToken,
  mint,
  sendEth,
  BASE_USDC,
} from "../../scripts/chain.mjs";
import {
  CLAIM_PATH,
  DAY,
  MIN_CONFIRMATIONS,
  PRO_PRICE,
  PLUS_PRICE,
  iso,
  nextIp,
  claimBody,
  quote,
  quoteOk,
  claim,
  assertRefused,
  head,
  assertFree,
  publishFirst,
  bigCapsule,
  sizeOf,
  startChain,
  startUpgradeWorker,
  pay,
  confirm,
  receipt,
  closedPort,
  lyingProxy,
  eip55,
  history,
  randomTxHash,
} from "./upgrade-helpers.mjs";

const QUOTE_KEYS = [
  "agent_id", "amount", "amount_atomic", "asset", "chain", "chain_id", "claim_url", "days",
  "expires_at", "invoice_id", "memo", "min_confirmations", "plan", "to_address", "token_contract",
].sort();
const CLAIMED_KEYS = [
  "accepted", "agent_id", "block_number", "credited_at", "days", "invoice_id", "log_index",
  "paid_until", "plan", "tx_hash",
].sort();
/** The 422 codes a payment for another invoice may get (§10: amounts differ, or it predates the invoice). */
const NOT_THIS_INVOICE = ["payment_underpaid", "payment_overpaid", "payment_before_invoice"];

/** "5.004217" from 5004217n: atomic units with 6 decimals, written independently. */
const decimal6 = (atomic) => `${atomic / 1_000_000n}.${(atomic % 1_000_000n).toString().padStart(6, "0")}`;

test("the anvil binary is installed (this file never skips)", () => {
  assert.ok(anvilBinary());
});

// ---------------------------------------------------------------------------
// 1. Not configured.

describe("without the UPGRADE vars", () => {
  let w0;
  let wBad;
  before(async () => {
    w0 = await startWorker();
    // A treasury with a broken EIP-55 checksum is a malformed money setting: off too.
    wBad = await startWorker({
      vars: {
        UPGRADE_TREASURY: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293Bc",
        UPGRADE_RPC_URL: "http://127.0.0.1:9",
      },
    });
  });
  after(async () => {
    await w0?.close();
    await wBad?.close();
  });

  test("both endpoints answer 503 upgrades_not_configured; bootstrap, PUT and reads still work", async () => {
    const a = newAgent();
    for (const w of [w0, wBad]) {
      const q = await quote(w, { agent_id: a.agentId, plan: "pro" });
      assertRefused(q, 503, "upgrades_not_configured");
      const garbage = await quote(w, "{nope");
      assertRefused(garbage, 503, "upgrades_not_configured");
      const inv = "inv_" + a.agentId.slice(0, 16) + "0".repeat(16);
      const c = await claim(w, claimBody(a, inv, randomTxHash()));
      assertRefused(c, 503, "upgrades_not_configured");
    }

    const boot = await w0.fetch("/api/v1/self/bootstrap", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ public_key: a.publicHex }),
    });
    assert.equal(boot.status, 200, boot.text);
    assert.equal(boot.json.agent_id, a.agentId);
    const w1 = await publish(w0, a, 1, undefined, { ip: nextIp() });
    assert.equal(w1.status, 200, w1.text);
    const h = await assertFree(w0, a.agentId);
    assert.equal(h.seq, 1);
    const cap = await w0.fetch(capsulePath(a.agentId));
    assert.equal(cap.status, 200);
    assert.equal(cap.text, jcs(exampleCapsule(a.agentId)));
    const hist = await history(w0, a.agentId);
    assert.equal(hist.versions.length, 1);
  });
});

// ---------------------------------------------------------------------------
// 2–10 on one chain and one Worker.

describe("on a local Base chain", () => {
  let chain;
  let w;
  before(async () => {
    chain = await startChain();
    w = await startUpgradeWorker(chain);
  });
  after(async () => {
    await w?.close();
    await chain?.stop();
  });

  // -------------------------------------------------------------------------
  // 2. Quote validation and shape.

  test("quote: refusals by code, the 4096-byte cap, 3 open invoices per agent", async () => {
    const a = newAgent();
    const id = a.agentId;
    const cases = [
      [{ agent_id: id, plan: "free" }, 400, "unsupported_plan"],
      [{ agent_id: id, plan: "gold" }, 400, "unsupported_plan"],
      [{ agent_id: id, plan: "PRO!" }, 400, "unsupported_plan"],
      [{ agent_id: id, plan: "pro", chain: "solana" }, 400, "unsupported_chain"],
      [{ agent_id: id, plan: "pro", chain: 1 }, 400, "unsupported_chain"],
      [{ agent_id: id, plan: "pro", chain: "base-sepolia" }, 400, "unsupported_chain"],
      [{ agent_id: id, plan: "pro", chain: 84532 }, 400, "unsupported_chain"],
      [{ agent_id: id, plan: "pro", asset: "DAI" }, 400, "unsupported_asset"],
      [{ agent_id: id, plan: "pro", asset: "ETH" }, 400, "unsupported_asset"],
      ["{", 400, "bad_upgrade_request"],
      ["", 400, "bad_upgrade_request"],
      ["[]", 400, "bad_upgrade_request"],
      ['"pro"', 400, "bad_upgrade_request"],
      [`{"agent_id":"${id}","plan":"pro","plan":"plus"}`, 400, "bad_upgrade_request"],
      [{ agent_id: "nope", plan: "pro" }, 400, "bad_upgrade_request"],
      [{ agent_id: id.toUpperCase(), plan: "pro" }, 400, "bad_upgrade_request"],
      [{ agent_id: "sha256:" + id, plan: "pro" }, 400, "bad_upgrade_request"],
      [{ plan: "pro" }, 400, "bad_upgrade_request"],
      [{ agent_id: id, plan: "pro", memo: "hello" }, 400, "bad_upgrade_request"],
    ];
    for (const [body, status, code] of cases) {
      const r = await quote(w, body);
      assertRefused(r, status, code, { retry: false });
    }
    // A missing plan is refused (either code names it).
    const noPlan = await quote(w, { agent_id: id });
    assert.equal(noPlan.status, 400, noPlan.text);
    assert.ok(["unsupported_plan", "bad_upgrade_request"].includes(noPlan.json.error), noPlan.text);

    // 4096 bytes is the cap: one byte over is 413, exactly 4096 is fine.
    const json = JSON.stringify({ agent_id: id, plan: "pro" });
    const over = await quote(w, json + " ".repeat(4097 - json.length));
    assertRefused(over, 413, "payload_too_large");
    const big = json + " ".repeat(64 * 1024);
    assertRefused(await quote(w, big), 413, "payload_too_large");
    const exact = json + " ".repeat(4096 - json.length);
    assert.equal(Buffer.byteLength(exact), 4096);
    const q1 = await quote(w, exact);
    assert.equal(q1.status, 200, q1.text);

    // Accepted spellings of the one chain and asset; then the agent holds 3 open invoices.
    const q2 = await quote(w, { agent_id: id, plan: "pro", chain: "base", asset: "USDC" });
    assert.equal(q2.status, 200, q2.text);
    const q3 = await quote(w, { agent_id: id, plan: "plus", chain: 8453, asset: "usdc" });
    assert.equal(q3.status, 200, q3.text);
    assert.equal(q3.json.plan, "plus");
    const t = Date.now();
    const fourth = await quote(w, { agent_id: id, plan: "pro" });
    const body = assertRefused(fourth, 429, "too_many_open_invoices", { retry: true });
    // The oldest open invoice expires in (just under) an hour.
    const waitMs = Date.parse(q1.json.expires_at) - t;
    assert.ok(Math.abs(body.retry_after_sec * 1000 - waitMs) <= 2000, `${body.retry_after_sec} vs ${waitMs} ms`);
    assertRefused(await quote(w, { agent_id: id, plan: "plus" }), 429, "too_many_open_invoices", { retry: true });

    // Another agent is not affected; a quote creates no capsule.
    await quoteOk(w, newAgent(), "pro");
    const h = await w.fetch(`/self/${id}/head.json`);
    assert.equal(h.status, 404, h.text);
  });

  test("quote: the body's shape (amount = price + tag, canonical USDC, EIP-55 treasury, 1 h, absolute claim_url)", async () => {
    const a = newAgent();
    for (const plan of ["pro", "plus"]) {
      const t1 = Date.now();
      const q = await quoteOk(w, a, plan);
      const t2 = Date.now();
      assert.deepEqual(Object.keys(q).sort(), QUOTE_KEYS);
      assert.match(q.invoice_id, /^inv_[0-9a-f]{32}$/);
      assert.ok(q.invoice_id.startsWith("inv_" + a.agentId.slice(0, 16)), q.invoice_id);
      assert.equal(q.agent_id, a.agentId);
      assert.equal(q.plan, plan);
      assert.equal(q.days, 30);
      assert.equal(q.asset, "USDC");
      assert.equal(q.chain, "base");
      assert.equal(q.chain_id, 8453);
      assert.equal(q.min_confirmations, MIN_CONFIRMATIONS);
      assert.match(q.amount_atomic, /^[1-9][0-9]*$/);
      const atomic = BigInt(q.amount_atomic);
      const tag = atomic - (plan === "pro" ? PRO_PRICE : PLUS_PRICE);
      assert.ok(tag >= 1n && tag <= 9999n, `tag ${tag}`);
      assert.equal(q.amount, decimal6(atomic));
      assert.match(q.amount, /^\d+\.\d{6}$/);
      assert.equal(q.token_contract, BASE_USDC);
      assert.equal(q.token_contract, await eip55(chain.rpcUrl, BASE_USDC));
      assert.equal(q.to_address, await eip55(chain.rpcUrl, chain.treasury));
      assert.notEqual(q.to_address, chain.treasury, "checksummed, not lower case");
      const exp = Date.parse(q.expires_at);
      assert.equal(q.expires_at, iso(exp));
      assert.ok(exp >= Math.floor(t1 / 1000) * 1000 + HOUR && exp <= t2 + HOUR, q.expires_at);
      const url = new URL(q.claim_url);
      assert.ok(/^https?:$/.test(url.protocol), q.claim_url);
      assert.ok(q.claim_url.endsWith(CLAIM_PATH), q.claim_url);
      assert.equal(typeof q.memo, "string");
      assert.ok(q.memo.includes(q.amount), q.memo);
    }
    // On the test clock, expires_at is exactly the quote time + 1 h.
    const T = Date.UTC(2026, 10, 1, 12, 0, 0);
    const q = await quoteOk(w, a, "pro", { now: T });
    assert.equal(q.expires_at, iso(T + HOUR));
  });

  test("quote: 30 concurrent quotes at one price never share an amount; the 31st from that address is quote_rate_exceeded", async () => {
    const ip = nextIp();
    const agents = Array.from({ length: 10 }, () => newAgent());
    const asks = agents.flatMap((a) => [0, 1, 2].map(() => quote(w, { agent_id: a.agentId, plan: "pro" }, { ip })));
    const answers = await Promise.all(asks);
    for (const r of answers) assert.equal(r.status, 200, r.text);
    const amounts = answers.map((r) => r.json.amount_atomic);
    assert.equal(new Set(amounts).size, amounts.length, `shared amounts: ${amounts}`);
    assert.equal(new Set(answers.map((r) => r.json.invoice_id)).size, answers.length);
    for (const r of answers) {
      const tag = BigInt(r.json.amount_atomic) - PRO_PRICE;
      assert.ok(tag >= 1n && tag <= 9999n);
    }
    const late = await quote(w, { agent_id: newAgent().agentId, plan: "pro" }, { ip });
    const body = assertRefused(late, 429, "quote_rate_exceeded", { retry: true });
    // The first of the 30 leaves the rolling 24 h window in (just under) a day.
    assert.ok(body.retry_after_sec <= 86400 && body.retry_after_sec >= 86400 - 120, late.text);
    // Another address is not limited.
    await quoteOk(w, newAgent(), "pro", { ip: nextIp() });
  });

  // -------------------------------------------------------------------------
  // 3, 4, 10. One agent: free -> pro, replay, renewal, expiry back to free.

  const P = newAgent();
  let firstClaim; // {body, text, res}
  let firstQuote;
  let firstTx;
  let lastBig;
  let paidUntil; // after the renewal
  let renewal; // the renewal's quote

  test("happy path: quote pro, pay, payment_pending until confirmed, credited; pro limits apply at once", async () => {
    await publishFirst(w, P);
    await assertFree(w, P.agentId);
    // Free refuses a big capsule before the upgrade.
    const bigBefore = bigCapsule(P.agentId, 20_000, 1);
    const refused = await publish(w, P, 2, bigBefore);
    assert.equal(refused.status, 413, refused.text);
    assert.deepEqual(refused.json.reason_codes, ["capsule_too_large"]);
    assert.equal(refused.json.max_bytes, 4096);

    firstQuote = await quoteOk(w, P, "pro");
    firstTx = await pay(chain, firstQuote);
    const rcpt = await receipt(chain, firstTx);
    assert.equal(rcpt.status, "0x1");
    const body = claimBody(P, firstQuote.invoice_id, firstTx, 1);

    // Mined in the head block: 1 of 3 confirmations.
    const early = await claim(w, body);
    assertRefused(early, 409, "payment_pending", { retry: true });
    await assertFree(w, P.agentId);
    await confirm(chain, 1); // 2 of 3
    const stillEarly = await claim(w, body);
    assertRefused(stillEarly, 409, "payment_pending", { retry: true });
    await assertFree(w, P.agentId);
    await confirm(chain, 1); // 3 of 3

    const t1 = Date.now();
    const ok = await claim(w, body);
    const t2 = Date.now();
    assert.equal(ok.status, 200, ok.text);
    const c = ok.json;
    assert.deepEqual(Object.keys(c).sort(), CLAIMED_KEYS);
    assert.equal(c.accepted, true);
    assert.equal(c.invoice_id, firstQuote.invoice_id);
    assert.equal(c.agent_id, P.agentId);
    assert.equal(c.plan, "pro");
    assert.equal(c.days, 30);
    assert.equal(c.tx_hash, firstTx);
    assert.equal(c.log_index, Number(rcpt.logs[0].logIndex));
    assert.equal(c.block_number, Number(rcpt.blockNumber));
    const credited = Date.parse(c.credited_at);
    assert.ok(credited >= Math.floor(t1 / 1000) * 1000 && credited <= t2, c.credited_at);
    const until = Date.parse(c.paid_until);
    assert.equal(c.paid_until, iso(until));
    assert.ok(until >= Math.floor(t1 / 1000) * 1000 + 30 * DAY && until <= t2 + 30 * DAY, c.paid_until);
    firstClaim = { body, text: ok.text, json: c };

    const h = await head(w, P.agentId);
    assert.equal(h.tier, "pro");
    assert.equal(h.paid_until, c.paid_until);
    assert.equal(h.writes.limit_24h, 50);

    // Pro's capsule cap: ~20 KB is accepted now.
    const big = bigCapsule(P.agentId, 20_000, 2);
    assert.ok(sizeOf(big) > 16_000 && sizeOf(big) < 24_576, String(sizeOf(big)));
    const wBig = await publish(w, P, 2, big);
    assert.equal(wBig.status, 200, wBig.text);
    assert.equal((await w.fetch(capsulePath(P.agentId))).text, jcs(big));
    // Pro's write quota: 7 writes within 24 h (free allows 5).
    let last;
    for (let seq = 3; seq <= 6; seq++) {
      last = await publish(w, P, seq, exampleCapsule(P.agentId, { self_motto: `Plain state ${seq}.` }));
      assert.equal(last.status, 200, last.text);
    }
    lastBig = bigCapsule(P.agentId, 20_000, 7);
    last = await publish(w, P, 7, lastBig);
    assert.equal(last.status, 200, last.text);
    assert.equal(last.json.writes.used_24h, 7);
    assert.equal(last.json.writes.limit_24h, 50);
    const h2 = await head(w, P.agentId);
    assert.equal(h2.seq, 7);
    assert.equal(h2.tier, "pro");
  });

  test("claim replay answers the same body and credits nothing; a second payment of a paid invoice is invoice_already_paid; renewal stacks", async () => {
    assert.ok(firstClaim, "needs the happy path");
    const again = await claim(w, firstClaim.body);
    assert.equal(again.status, 200, again.text);
    assert.equal(again.text, firstClaim.text);
    const againOtherIp = await claim(w, firstClaim.body, { ip: nextIp() });
    assert.equal(againOtherIp.text, firstClaim.text);
    let h = await head(w, P.agentId);
    assert.equal(h.paid_until, firstClaim.json.paid_until);

    // The same invoice paid twice: the second payment cannot credit.
    const twice = await pay(chain, firstQuote);
    await confirm(chain);
    const dup = await claim(w, claimBody(P, firstQuote.invoice_id, twice, 2));
    assertRefused(dup, 409, "invoice_already_paid");
    assertRefused(await claim(w, claimBody(P, firstQuote.invoice_id, twice, 2)), 409, "invoice_already_paid");
    h = await head(w, P.agentId);
    assert.equal(h.paid_until, firstClaim.json.paid_until);

    // Renewal: 30 more days after the current paid_until.
    const q2 = await quoteOk(w, P, "pro");
    renewal = q2;
    assert.notEqual(q2.amount_atomic, firstQuote.amount_atomic);
    const tx2 = await pay(chain, q2);
    await confirm(chain);
    const r2 = await claim(w, claimBody(P, q2.invoice_id, tx2, 3));
    assert.equal(r2.status, 200, r2.text);
    assert.equal(r2.json.plan, "pro");
    assert.equal(r2.json.paid_until, iso(Date.parse(firstClaim.json.paid_until) + 30 * DAY));
    paidUntil = Date.parse(r2.json.paid_until);
    h = await head(w, P.agentId);
    assert.equal(h.tier, "pro");
    assert.equal(h.paid_until, r2.json.paid_until);
    // The first claim still answers its own (historical) body.
    assert.equal((await claim(w, firstClaim.body)).text, firstClaim.text);
  });

  test("the operator's totals: both credits counted once (transfer, pro, the two amounts), the replays and the refused payment not at all; the agent on pro", async () => {
    assert.ok(renewal, "needs the renewal");
    const amount = BigInt(firstQuote.amount_atomic) + BigInt(renewal.amount_atomic);
    const s = await statsUntil(w, (t) => t.credits.ever.transfer.plans.pro >= 2);
    assert.equal(s.shards.answered, 16);
    assert.deepEqual(s.credits.ever.transfer.plans, { pro: 2, plus: 0 });
    assert.equal(s.credits.ever.transfer.usdc_atomic, String(amount));
    assert.deepEqual(s.credits.ever.x402.plans, { pro: 0, plus: 0 });
    assert.equal(s.credits.ever.x402.usdc_atomic, "0");
    assert.equal(s.credits.last_24h.transfer.usdc_atomic, String(amount));
    assert.equal(s.agents.by_tier.pro, 1);
    // A replay answers 200 again and counts nothing, once the alarms had
    // time to send.
    const again = await claim(w, firstClaim.body);
    assert.equal(again.status, 200, again.text);
    await new Promise((r) => setTimeout(r, 2_500));
    const later = await stats(w);
    assert.deepEqual(later.credits.ever.transfer.plans, { pro: 2, plus: 0 });
    assert.equal(later.credits.ever.transfer.usdc_atomic, String(amount));
  });

  // -------------------------------------------------------------------------
  // 5. Plus keeps history.

  test("plus: every write is retained in history.json (free keeps only the latest)", async () => {
    const L = newAgent();
    const F = newAgent();
    await publishFirst(w, L);
    await publishFirst(w, F);
    const q = await quoteOk(w, L, "plus");
    const tag = BigInt(q.amount_atomic) - PLUS_PRICE;
    assert.ok(tag >= 1n && tag <= 9999n);
    const tx = await pay(chain, q);
    await confirm(chain);
    const r = await claim(w, claimBody(L, q.invoice_id, tx, 1));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.plan, "plus");
    const h = await head(w, L.agentId);
    assert.equal(h.tier, "plus");
    assert.equal(h.paid_until, r.json.paid_until);
    assert.equal(h.writes.limit_24h, 50);

    for (let seq = 2; seq <= 4; seq++) {
      for (const a of [L, F]) {
        const wr = await publish(w, a, seq, exampleCapsule(a.agentId, { self_motto: `Plain state ${seq}.` }));
        assert.equal(wr.status, 200, wr.text);
      }
    }
    const hl = await history(w, L.agentId);
    assert.deepEqual(hl.versions.map((v) => v.seq), [4, 3, 2, 1]);
    assert.equal(hl.retained, 4);
    assert.equal(hl.pruned, 0);
    assert.equal(hl.total_writes, 4);
    const hf = await history(w, F.agentId);
    assert.deepEqual(hf.versions.map((v) => v.seq), [4]);
    assert.equal(hf.pruned, 3);
  });

  // -------------------------------------------------------------------------
  // 6. Payments that do not pay the invoice.

  /** A fresh published free agent with one pro quote. */
  async function quotedAgent() {
    const a = newAgent();
    await publishFirst(w, a);
    return { a, q: await quoteOk(w, a, "pro") };
  }

  /** Claims, expects the refusal, re-claims (same), and checks nothing was credited. */
  async function refusedTwice(a, q, tx, status, code, opts = {}) {
    const body = claimBody(a, q.invoice_id, tx, 1);
    const r = await claim(w, body);
    assertRefused(r, status, code, opts);
    const again = await claim(w, body);
    assertRefused(again, status, code, opts);
    await assertFree(w, a.agentId);
    return r;
  }

  test("refusals: underpaid, overpaid, wrong token, wrong recipient, reverted, no transfer, unknown hash", async () => {
    // amount_atomic - 1 and + 1.
    {
      const { a, q } = await quotedAgent();
      const tx = await pay(chain, q, { amount: BigInt(q.amount_atomic) - 1n });
      await confirm(chain);
      await refusedTwice(a, q, tx, 422, "payment_underpaid", { retry: false });
    }
    {
      const { a, q } = await quotedAgent();
      const tx = await pay(chain, q, { amount: BigInt(q.amount_atomic) + 1n });
      await confirm(chain);
      await refusedTwice(a, q, tx, 422, "payment_overpaid", { retry: false });
    }
    // Another token with the same code, the exact amount, to the treasury.
    {
      const { a, q } = await quotedAgent();
      const other = await deployToken(chain.rpcUrl, chain.deployer);
      await mint(chain.rpcUrl, other, chain.deployer, chain.payer, 100_000_000n);
      const tx = await pay(chain, q, { token: other });
      await confirm(chain);
      await refusedTwice(a, q, tx, 422, "payment_wrong_token", { retry: false });
    }
    // The exact USDC amount to someone else.
    {
      const { a, q } = await quotedAgent();
      const tx = await pay(chain, q, { to: chain.stranger });
      await confirm(chain);
      await refusedTwice(a, q, tx, 422, "payment_wrong_recipient", { retry: false });
    }
    // A transfer from an account without USDC, mined with a manual gas limit: it reverts.
    {
      const { a, q } = await quotedAgent();
      const tx = await pay(chain, q, { from: chain.empty, gas: 100_000 });
      assert.equal((await receipt(chain, tx)).status, "0x0");
      await confirm(chain);
      await refusedTwice(a, q, tx, 422, "payment_reverted", { retry: false });
    }
    // Plain ETH to the treasury.
    {
      const { a, q } = await quotedAgent();
      const value = BigInt(q.amount_atomic);
      const tx = (await sendEth(chain.rpcUrl, chain.payer, chain.treasury, value, { wait: true })).toLowerCase();
      await confirm(chain);
      await refusedTwice(a, q, tx, 422, "payment_no_transfer", { retry: false });
    }
    // A hash the chain does not know: 404 with a wait; the invoice is still payable.
    {
      const { a, q } = await quotedAgent();
      await refusedTwice(a, q, randomTxHash(), 404, "payment_not_found", { retry: true });
      const tx = await pay(chain, q);
      await confirm(chain);
      const ok = await claim(w, claimBody(a, q.invoice_id, tx, 2));
      assert.equal(ok.status, 200, ok.text);
      assert.equal((await head(w, a.agentId)).tier, "pro");
    }
  });

  // -------------------------------------------------------------------------
  // 7. Theft and replay.

  const A = newAgent();
  let aCredit;

  test("theft and replay: another agent, another invoice, forged and misdirected signatures never credit", async () => {
    const B = newAgent();
    await publishFirst(w, A);
    await publishFirst(w, B);
    const qa = await quoteOk(w, A, "pro");
    const txA = await pay(chain, qa);
    await confirm(chain);
    const qa2 = await quoteOk(w, A, "pro");
    const qb = await quoteOk(w, B, "pro");

    // B claims A's invoice as itself.
    assertRefused(await claim(w, claimBody(B, qa.invoice_id, txA, 1)), 403, "invoice_agent_mismatch", { retry: false });
    // B claims as A with B's key.
    assertRefused(await claim(w, claimBody(A, qa.invoice_id, txA, 1, { signer: B })), 401, "bad_signature");
    // ... or with A's public key but B's signature.
    assertRefused(
      await claim(w, claimBody(A, qa.invoice_id, txA, 1, { signer: B, overrides: { public_key: A.publicHex } })),
      401,
      "bad_signature",
    );
    // B's own invoice, A's payment: the amounts differ.
    for (let i = 0; i < 2; i++) {
      const r = await claim(w, claimBody(B, qb.invoice_id, txA, 1));
      assert.equal(r.status, 422, r.text);
      assert.ok(NOT_THIS_INVOICE.includes(r.json.error), r.text);
    }
    // A's second invoice, the payment for the first.
    for (let i = 0; i < 2; i++) {
      const r = await claim(w, claimBody(A, qa2.invoice_id, txA, 1));
      assert.equal(r.status, 422, r.text);
      assert.ok(NOT_THIS_INVOICE.includes(r.json.error), r.text);
    }
    // Signatures over something else than the body says.
    const sigCases = [
      claimBody(A, qa.invoice_id, txA, 2, { sign: { seq: 1 } }),
      claimBody(A, qa.invoice_id, txA, 1, { sign: { txHash: randomTxHash() } }),
      claimBody(A, qa.invoice_id, txA, 1, { sign: { invoiceId: qa2.invoice_id } }),
      claimBody(A, qa.invoice_id, txA, 1, { sign: { agentId: B.agentId } }),
      // A capsule write's signature pasted into a claim.
      claimBody(A, qa.invoice_id, txA, 1, {
        overrides: { signature: envelope(A, 1, exampleCapsule(A.agentId)).signature },
      }),
      // The right signature with one bit flipped.
      (() => {
        const b = claimBody(A, qa.invoice_id, txA, 1);
        const s = Buffer.from(b.signature, "hex");
        s[5] ^= 1;
        return { ...b, signature: s.toString("hex") };
      })(),
    ];
    for (const body of sigCases) {
      assertRefused(await claim(w, body), 401, "bad_signature", { retry: false });
    }
    // ... and a claim's signature pasted into a capsule write.
    const claimSig = claimBody(A, qa.invoice_id, txA, 2).signature;
    const forged = { ...envelope(A, 2, exampleCapsule(A.agentId)), signature: claimSig };
    const pw = await w.fetch(capsulePath(A.agentId), put(forged));
    assert.equal(pw.status, 401, pw.text);
    assert.deepEqual(pw.json.reason_codes, ["bad_signature"]);

    // Malformed claims are 400 bad_upgrade_request; an unknown invoice of this agent is 404.
    const good = claimBody(A, qa.invoice_id, txA, 1);
    const { seq: _seq, ...noSeq } = good;
    const malformed = [
      "{",
      "[]",
      noSeq,
      { ...good, extra: 1 },
      { ...good, seq: -1 },
      { ...good, seq: 2 ** 53 },
      { ...good, seq: "1" },
      { ...good, seq: 1.5 },
      { ...good, signature: good.signature.toUpperCase() },
      { ...good, signature: good.signature.slice(2) },
      { ...good, tx_hash: txA.slice(0, 40) },
      { ...good, invoice_id: "inv_xyz" },
      { ...good, agent_id: A.agentId.toUpperCase() },
    ];
    for (const body of malformed) {
      assertRefused(await claim(w, body), 400, "bad_upgrade_request", { retry: false });
    }
    assertRefused(await claim(w, JSON.stringify(good) + " ".repeat(4097)), 413, "payload_too_large");
    const unknownInv = "inv_" + A.agentId.slice(0, 16) + "ab".repeat(8);
    assertRefused(await claim(w, claimBody(A, unknownInv, txA, 1)), 404, "invoice_not_found", { retry: false });

    await assertFree(w, A.agentId);
    await assertFree(w, B.agentId);

    // None of that burned the payment: A claims it.
    const ok = await claim(w, claimBody(A, qa.invoice_id, txA, 7));
    assert.equal(ok.status, 200, ok.text);
    aCredit = ok.json;
    assert.equal((await head(w, A.agentId)).paid_until, ok.json.paid_until);
    // After the credit: still no credit for B or for A's second invoice.
    const rb = await claim(w, claimBody(B, qb.invoice_id, txA, 2));
    assert.equal(rb.status, 422, rb.text);
    assert.ok(NOT_THIS_INVOICE.includes(rb.json.error), rb.text);
    assertRefused(await claim(w, claimBody(B, qa.invoice_id, txA, 2)), 403, "invoice_agent_mismatch");
    const ra = await claim(w, claimBody(A, qa2.invoice_id, txA, 2));
    assert.equal(ra.status, 422, ra.text);
    assert.ok(NOT_THIS_INVOICE.includes(ra.json.error), ra.text);
    await assertFree(w, B.agentId);
    assert.equal((await head(w, A.agentId)).paid_until, ok.json.paid_until);
  });

  // -------------------------------------------------------------------------
  // 8. The quote window.

  test("a payment credits once, globally: an invoice forced onto the same amount (test hook) is payment_already_claimed", async () => {
    const A = newAgent();
    const B = newAgent();
    const qa = await quoteOk(w, A, "pro");
    const tx = await pay(chain, qa);
    await confirm(chain);
    const ok = await claim(w, claimBody(A, qa.invoice_id, tx, 1));
    assert.equal(ok.status, 200, ok.text);
    // B's invoice gets A's amount and A's quote time: only the test hook
    // (SELFCAP_TEST_CLOCK=1) can make two invoices share an amount.
    const tag = BigInt(qa.amount_atomic) - PRO_PRICE;
    const quotedAt = Date.parse(qa.expires_at) - 3600 * 1000;
    const qb = await quoteOk(w, B, "pro", { now: quotedAt, headers: { "x-selfcap-test-tag": String(tag) } });
    assert.equal(qb.amount_atomic, qa.amount_atomic);
    assert.notEqual(qb.invoice_id, qa.invoice_id);
    for (let i = 0; i < 2; i++) {
      const r = await claim(w, claimBody(B, qb.invoice_id, tx, 1 + i));
      assertRefused(r, 409, "payment_already_claimed");
    }
    // A's credit is untouched and still answers the same.
    const again = await claim(w, claimBody(A, qa.invoice_id, tx, 1));
    assert.equal(again.text, ok.text);
  });

  test("the tag hook is inert without SELFCAP_TEST_CLOCK=1", async () => {
    const prod = await startUpgradeWorker(chain, { SELFCAP_TEST_CLOCK: "0" });
    try {
      const x = await quoteOk(prod, newAgent(), "pro");
      const held = BigInt(x.amount_atomic) - PRO_PRICE;
      const y = await quoteOk(prod, newAgent(), "pro", { headers: { "x-selfcap-test-tag": String(held) } });
      assert.notEqual(y.amount_atomic, x.amount_atomic, "a held tag was handed out again");
    } finally {
      await prod.close();
    }
  });

  test("a payment mined after expires_at is invoice_expired; one mined before the quote is payment_before_invoice", async () => {
    const now = Date.now();
    {
      const a = newAgent();
      await publishFirst(w, a);
      const q = await quoteOk(w, a, "pro", { now: now - 2 * HOUR });
      assert.equal(q.expires_at, iso(now - HOUR));
      const tx = await pay(chain, q);
      await confirm(chain);
      await refusedTwice(a, q, tx, 410, "invoice_expired", { retry: false });
    }
    {
      const a = newAgent();
      await publishFirst(w, a);
      const q = await quoteOk(w, a, "pro", { now: now + 10 * 60 * 1000 });
      const tx = await pay(chain, q);
      await confirm(chain);
      await refusedTwice(a, q, tx, 422, "payment_before_invoice", { retry: false });
    }
  });

  // -------------------------------------------------------------------------
  // 9. Lying and absent providers.

  test("provider: a closed RPC port is 503 payment_provider_unavailable with a wait; nothing credited", async () => {
    const port = await closedPort();
    const wx = await startWorker({
      vars: {
        UPGRADE_TREASURY: chain.treasury,
        UPGRADE_RPC_URL: `http://127.0.0.1:${port}`,
        UPGRADE_MIN_CONFIRMATIONS: String(MIN_CONFIRMATIONS),
      },
    });
    try {
      const a = newAgent();
      await publishFirst(wx, a);
      const q = await quoteOk(wx, a, "pro");
      const tx = await pay(chain, q); // a real payment, on a chain this Worker cannot reach
      await confirm(chain);
      for (const hash of [tx, randomTxHash()]) {
        const body = claimBody(a, q.invoice_id, hash, 1);
        assertRefused(await claim(wx, body), 503, "payment_provider_unavailable", { retry: true });
        assertRefused(await claim(wx, body), 503, "payment_provider_unavailable", { retry: true });
      }
      await assertFree(wx, a.agentId);
    } finally {
      await wx.close();
    }
  });

  test("provider: a lying RPC (HTTP 500, garbage, error object, block/receipt mismatch) is 503; the honest answer then credits", async () => {
    const proxy = await lyingProxy(chain.rpcUrl);
    const wl = await startWorker({
      vars: {
        UPGRADE_TREASURY: chain.treasury,
        UPGRADE_RPC_URL: proxy.url,
        UPGRADE_MIN_CONFIRMATIONS: String(MIN_CONFIRMATIONS),
      },
    });
    try {
      const a = newAgent();
      await publishFirst(wl, a);
      const q = await quoteOk(wl, a, "pro");
      const tx = await pay(chain, q);
      await confirm(chain);
      const body = claimBody(a, q.invoice_id, tx, 1);
      for (const mode of ["http500", "garbage", "rpc_error", "block_mismatch", "other_receipt"]) {
        proxy.setMode(mode);
        const r = await claim(wl, body);
        assertRefused(r, 503, "payment_provider_unavailable", { retry: true });
        await assertFree(wl, a.agentId);
      }
      assert.ok(proxy.calls.includes("eth_chainId"), "the Worker asked the provider");
      proxy.setMode("honest");
      const ok = await claim(wl, body);
      assert.equal(ok.status, 200, ok.text);
      assert.equal((await head(wl, a.agentId)).tier, "pro");
    } finally {
      await wl.close();
      await proxy.close();
    }
  });

  test("provider: an RPC on another chain (84532) for a Worker taking 8453 is 503; nothing credited", async () => {
    const other = await startChain({ chainId: 84532 });
    const w2 = await startUpgradeWorker(other);
    try {
      const a = newAgent();
      await publishFirst(w2, a);
      const q = await quoteOk(w2, a, "pro");
      assert.equal(q.chain_id, 8453);
      const tx = await pay(other, q);
      await confirm(other);
      const body = claimBody(a, q.invoice_id, tx, 1);
      assertRefused(await claim(w2, body), 503, "payment_provider_unavailable", { retry: true });
      assertRefused(await claim(w2, body), 503, "payment_provider_unavailable", { retry: true });
      await assertFree(w2, a.agentId);
    } finally {
      await w2.close();
      await other.stop();
    }
  });

  // -------------------------------------------------------------------------
  // 10. Paid time runs out.

  test("expiry: after paid_until the agent is free again; the big capsule is still served, a new big write is refused", async () => {
    assert.ok(paidUntil && lastBig, "needs the happy path and the renewal");
    const hBefore = await head(w, P.agentId, paidUntil - 1000);
    assert.equal(hBefore.tier, "pro");
    assert.equal(hBefore.paid_until, iso(paidUntil));

    const later = paidUntil + DAY;
    const h = await assertFree(w, P.agentId, later);
    assert.equal(h.seq, 7);
    const cap = await w.fetch(capsulePath(P.agentId), { headers: { "x-selfcap-test-now": String(later) } });
    assert.equal(cap.status, 200);
    assert.equal(cap.text, jcs(lastBig));
    // History is not pruned at expiry, only as new entries arrive.
    assert.equal((await history(w, P.agentId, later)).versions.length, 7);

    const tooBig = await publish(w, P, 8, bigCapsule(P.agentId, 20_000, 8), { now: later });
    assert.equal(tooBig.status, 413, tooBig.text);
    assert.deepEqual(tooBig.json.reason_codes, ["capsule_too_large"]);
    assert.equal(tooBig.json.max_bytes, 4096);
    assert.equal(tooBig.json.observed_bytes, sizeOf(bigCapsule(P.agentId, 20_000, 8)));
    assert.equal((await w.fetch(capsulePath(P.agentId))).text, jcs(lastBig), "a reject changes nothing");

    const small = exampleCapsule(P.agentId, { self_motto: "Back to basics." });
    const ok = await publish(w, P, 8, small, { now: later });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.writes.limit_24h, 5);
    assert.equal((await w.fetch(capsulePath(P.agentId))).text, jcs(small));
    const after = await assertFree(w, P.agentId, later);
    assert.equal(after.seq, 8);
    // The new entry arrives under free's retention: the older ones are pruned now.
    let hist;
    for (let i = 0; i < 50; i++) {
      hist = await history(w, P.agentId, later);
      if (hist.versions.length === 1) break;
      await new Promise((r) => setTimeout(r, 40));
    }
    assert.deepEqual(hist.versions.map((v) => v.seq), [8]);
    assert.equal(hist.pruned, 7);
  });

  // -------------------------------------------------------------------------
  // §10 "Credit and expiry": Plus bought during Pro runs first, the Pro time
  // left applies after it.

  test("plus bought during pro runs first; the pro time left applies after it", async () => {
    assert.ok(aCredit, "needs the theft test's credited agent");
    const proUntil = Date.parse(aCredit.paid_until);
    const q = await quoteOk(w, A, "plus");
    const tx = await pay(chain, q);
    await confirm(chain);
    const r = await claim(w, claimBody(A, q.invoice_id, tx, 9));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.plan, "plus");
    const credited = Date.parse(r.json.credited_at);
    const plusUntil = Date.parse(r.json.paid_until);
    assert.equal(plusUntil, credited + 30 * DAY);
    const h = await head(w, A.agentId);
    assert.equal(h.tier, "plus");
    assert.equal(h.paid_until, r.json.paid_until);
    // The pro time left when plus was bought, applied after plus.
    const proLeft = proUntil - credited;
    assert.ok(proLeft > 29 * DAY, String(proLeft));
    const afterPlus = await head(w, A.agentId, plusUntil + 1000);
    assert.equal(afterPlus.tier, "pro", `pro time left (${proLeft} ms) was lost: ${JSON.stringify(afterPlus)}`);
    assert.equal(afterPlus.paid_until, iso(plusUntil + proLeft));
  });
});
