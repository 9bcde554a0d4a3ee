// `selfcap upgrade` (target/debug/selfcap, built by scripts/test.sh) against
// the Worker in workerd and a real local chain: anvil (scripts/chain.mjs) on
// chain 8453 with the test USDC at Base's canonical address, mining a block
// a second. The CLI quotes, signs and sends a real EIP-1559 transfer, waits
// for 2 confirmations and claims; the Worker checks the payment over
// JSON-RPC against the same anvil. Also: a re-run pays nothing, a crash
// after signing or after broadcasting never pays twice, `upgrade claim` for
// a payment made elsewhere, and an RPC on another chain is refused before
// anything is paid. Anvil is required: without it this file fails.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startWorker } from "./harness.mjs";
import { SELFCAP_BIN as BIN, requireSelfcap, selfcapIn } from "./cli-helpers.mjs";
import { mcpSession } from "./mcp-helpers.mjs";
import {
  startAnvil,
  placeTokenAt,
  mint,
  transfer,
  rpc,
  waitForReceipt,
  balanceOf,
  BASE_USDC,
  TRANSFER_TOPIC,
} from "../../scripts/chain.mjs";

const TMP = mkdtempSync(path.join(tmpdir(), "selfcap-upgrade-"));

// anvil's dev accounts 1 and 3 (the well-known mnemonic's keys): 1 pays
// through the CLI, 3 pays by hand for `upgrade claim`.
const PAYER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const PAYER = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

let chain;
let other;
let w;
let URL_;
let treasury;
let handPayer;
let keyFile;

before(async () => {
  requireSelfcap();
  chain = await startAnvil({ blockTime: 1 });
  const [deployer, payer, tr, hand] = chain.accounts;
  assert.equal(payer, PAYER);
  treasury = tr;
  handPayer = hand;
  await placeTokenAt(chain.rpcUrl, BASE_USDC);
  await mint(chain.rpcUrl, BASE_USDC, deployer, payer, 100_000_000n);
  await mint(chain.rpcUrl, BASE_USDC, deployer, hand, 100_000_000n);
  w = await startWorker({
    vars: {
      UPGRADE_TREASURY: treasury,
      UPGRADE_RPC_URL: chain.rpcUrl,
      UPGRADE_MIN_CONFIRMATIONS: "2",
    },
  });
  URL_ = String(await w.mf.ready).replace(/\/$/, "");
  keyFile = path.join(TMP, "payer.key");
  writeFileSync(keyFile, `${PAYER_KEY}\n`, { mode: 0o600 });
});

after(async () => {
  await w?.close();
  await chain?.stop();
  await other?.stop();
  rmSync(TMP, { recursive: true, force: true });
});

const selfcap = selfcapIn(TMP);

/** A published agent with its own state directory. */
async function newAgent(name) {
  const dir = path.join(TMP, name);
  const run = (args, opts) => selfcap(["--state-dir", dir, "--url", URL_, ...args], opts);
  const k = await run(["keygen", "--json"]);
  assert.equal(k.code, 0, k.stderr);
  const b = await run(["bootstrap"]);
  assert.equal(b.code, 0, b.stderr);
  const t = await run(["template"]);
  assert.equal(t.code, 0, t.stderr);
  const capsuleFile = path.join(TMP, `${name}.capsule.json`);
  writeFileSync(capsuleFile, t.stdout);
  const p = await run(["put", capsuleFile]);
  assert.equal(p.code, 0, p.stderr);
  const upgrade = (extra = [], opts) =>
    run(["upgrade", "--plan", "pro", "--evm-key", keyFile, "--rpc", chain.rpcUrl, ...extra], opts);
  const record = () => JSON.parse(readFileSync(path.join(dir, "upgrade.json"), "utf8"));
  return { dir, run, upgrade, record, id: JSON.parse(k.stdout).agent_id };
}

const treasuryBalance = () => balanceOf(chain.rpcUrl, BASE_USDC, treasury);

async function head(agentId) {
  const r = await w.fetch(`/self/${agentId}/head.json`);
  assert.equal(r.status, 200, r.text);
  return r.json;
}

/** No panic, and the payer's key never reaches the output. */
function assertClean(r) {
  assert.doesNotMatch(r.stderr, /panicked|RUST_BACKTRACE|stack backtrace/);
  for (const out of [r.stdout, r.stderr]) assert.ok(!out.toLowerCase().includes(PAYER_KEY.slice(2)), "key printed");
}

test("upgrade --plan pro: quote, pay once, confirm, claim; status shows pro; a re-run pays nothing", async () => {
  const a = await newAgent("pro");
  const before = await treasuryBalance();
  const r = await a.upgrade();
  assertClean(r);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /selfcap: quoted invoice inv_[0-9a-f]{32}: 5\.00\d{4} USDC \(pro, 30 days\)/);
  assert.match(r.stderr, /selfcap: signed transaction 0x[0-9a-f]{64} from 0x70997970C51812dc3A010C7d01b50e0d17dc79C8 \(nonce \d+, EIP-1559/);
  assert.match(r.stderr, /selfcap: sent transaction 0x[0-9a-f]{64}/);
  assert.match(r.stderr, /selfcap: confirmations 2\/2/);
  assert.match(r.stdout, /^credited: pro until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(invoice inv_/);

  const rec = a.record();
  const inv = rec.invoice;
  assert.equal(inv.agent_id, a.id);
  assert.equal(inv.min_confirmations, 2);
  assert.equal(rec.claimed.invoice_id, inv.invoice_id);
  assert.equal(rec.claimed.tx_hash, rec.payment.tx_hash);
  assert.equal(rec.payment.from, PAYER);
  // Exactly the invoice's amount reached the treasury, once.
  assert.equal((await treasuryBalance()) - before, BigInt(inv.amount_atomic));
  // A real type-2 transfer of the canonical USDC to the treasury.
  const tx = await rpc(chain.rpcUrl, "eth_getTransactionByHash", [rec.payment.tx_hash]);
  assert.equal(tx.type, "0x2");
  assert.equal(tx.to.toLowerCase(), BASE_USDC.toLowerCase());
  const receipt = await rpc(chain.rpcUrl, "eth_getTransactionReceipt", [rec.payment.tx_hash]);
  assert.equal(receipt.status, "0x1");
  const log = receipt.logs.find((l) => l.topics[0] === TRANSFER_TOPIC);
  assert.equal(BigInt(log.data), BigInt(inv.amount_atomic));

  // The service's head.json and the CLI's status agree.
  const h = await head(a.id);
  assert.equal(h.tier, "pro");
  assert.equal(h.paid_until, rec.claimed.paid_until);
  const s = await a.run(["status"]);
  assert.equal(s.code, 0, s.stderr);
  assert.match(s.stdout, new RegExp(`tier +pro \\(paid until ${rec.claimed.paid_until};`));
  const sj = JSON.parse((await a.run(["status", "--json"])).stdout);
  assert.equal(sj.tier, "pro");
  assert.equal(sj.paid_until, rec.claimed.paid_until);

  // Again: the stored answer, nothing paid, nothing quoted.
  const again = await a.upgrade(["--json"]);
  assertClean(again);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stderr, /credited on an earlier run; nothing to pay/);
  assert.doesNotMatch(again.stderr, /quoted|signed|sent/);
  assert.deepEqual(JSON.parse(again.stdout), rec.claimed);
  assert.equal((await treasuryBalance()) - before, BigInt(inv.amount_atomic));
});

test("a crash right after broadcasting: the re-run claims the same transaction, paying nothing more", async () => {
  const a = await newAgent("crash-broadcast");
  const before = await treasuryBalance();
  const r = await a.upgrade([], { env: { SELFCAP_TEST_STOP_AFTER: "broadcast" } });
  assertClean(r);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /stopped after broadcasting/);
  const rec = a.record();
  assert.equal(rec.claimed, undefined);
  const hash = rec.payment.tx_hash;
  // The invoice is not credited yet.
  assert.equal((await head(a.id)).tier, "free");

  const again = await a.upgrade();
  assertClean(again);
  assert.equal(again.code, 0, again.stderr);
  assert.doesNotMatch(again.stderr, /quoted|signed/);
  const done = a.record();
  assert.equal(done.invoice.invoice_id, rec.invoice.invoice_id);
  assert.equal(done.payment.tx_hash, hash);
  assert.equal(done.claimed.tx_hash, hash);
  assert.equal((await treasuryBalance()) - before, BigInt(rec.invoice.amount_atomic));
  assert.equal((await head(a.id)).tier, "pro");
});

test("a crash after signing, before broadcasting: the re-run sends the recorded bytes, once", async () => {
  const a = await newAgent("crash-sign");
  const before = await treasuryBalance();
  const r = await a.upgrade([], { env: { SELFCAP_TEST_STOP_AFTER: "sign" } });
  assertClean(r);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /stopped after signing/);
  const rec = a.record();
  assert.match(rec.payment.raw_tx, /^0x02[0-9a-f]+$/);
  // Never sent: the chain does not know it, nothing moved.
  assert.equal(await rpc(chain.rpcUrl, "eth_getTransactionByHash", [rec.payment.tx_hash]), null);
  assert.equal(await treasuryBalance(), before);

  const again = await a.upgrade();
  assertClean(again);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stderr, /sent the recorded transaction 0x[0-9a-f]{64} \(the chain did not know it\)/);
  assert.doesNotMatch(again.stderr, /quoted|signed/);
  const done = a.record();
  assert.equal(done.payment.tx_hash, rec.payment.tx_hash);
  assert.equal(done.claimed.tx_hash, rec.payment.tx_hash);
  const tx = await rpc(chain.rpcUrl, "eth_getTransactionByHash", [rec.payment.tx_hash]);
  assert.ok(tx, "the recorded transaction is on chain");
  assert.equal((await treasuryBalance()) - before, BigInt(rec.invoice.amount_atomic));
});

test("upgrade claim --invoice --tx: a payment made elsewhere, waited for while pending", async () => {
  const a = await newAgent("by-hand");
  const q = await w.fetch("/api/v1/self/upgrade/quote", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ agent_id: a.id, plan: "plus" }),
  });
  assert.equal(q.status, 200, q.text);
  const inv = q.json;
  const before = await treasuryBalance();
  const hash = await transfer(chain.rpcUrl, BASE_USDC, handPayer, treasury, BigInt(inv.amount_atomic));
  await waitForReceipt(chain.rpcUrl, hash);
  // Mined, 1 of 2 confirmations: the claim waits on payment_pending.
  const r = await a.run(["upgrade", "claim", "--invoice", inv.invoice_id, "--tx", hash, "--json"]);
  assertClean(r);
  assert.equal(r.code, 0, r.stderr);
  const claimed = JSON.parse(r.stdout);
  assert.equal(claimed.accepted, true);
  assert.equal(claimed.invoice_id, inv.invoice_id);
  assert.equal(claimed.tx_hash, hash.toLowerCase());
  assert.equal(claimed.plan, "plus");
  assert.equal((await treasuryBalance()) - before, BigInt(inv.amount_atomic));
  assert.equal((await head(a.id)).tier, "plus");
  const s = JSON.parse((await a.run(["status", "--json"])).stdout);
  assert.equal(s.tier, "plus");
  // Claiming the same payment again answers the same body; a bad hash is local.
  const same = await a.run(["upgrade", "claim", "--invoice", inv.invoice_id, "--tx", hash, "--json"]);
  assert.equal(same.code, 0, same.stderr);
  assert.deepEqual(JSON.parse(same.stdout), claimed);
  const bad = await a.run(["upgrade", "claim", "--invoice", inv.invoice_id, "--tx", "0x12"]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /not a transaction hash/);
  // An invoice of another agent: refused by the service (class request, exit 7).
  const b = await newAgent("thief");
  const stolen = await b.run(["upgrade", "claim", "--invoice", inv.invoice_id, "--tx", hash]);
  assertClean(stolen);
  assert.equal(stolen.code, 7, stolen.stderr);
  assert.match(stolen.stderr, /invoice_agent_mismatch/);
});

test("a payment-provider outage: the claim gives up after --provider-timeout with exit 9, the payment safe and the claim command", { timeout: 120_000 }, async () => {
  // A second service whose RPC endpoint is down (a closed loopback port):
  // every claim is answered payment_provider_unavailable.
  const { createServer } = await import("node:net");
  const dead = await new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(`http://127.0.0.1:${port}`));
    });
  });
  const down = await startWorker({
    vars: { UPGRADE_TREASURY: treasury, UPGRADE_RPC_URL: dead, UPGRADE_MIN_CONFIRMATIONS: "2" },
  });
  try {
    const url = String(await down.mf.ready).replace(/\/$/, "");
    const dir = path.join(TMP, "outage");
    const run = (args) => selfcap(["--state-dir", dir, "--url", url, ...args]);
    const k = await run(["keygen", "--json"]);
    assert.equal(k.code, 0, k.stderr);
    const id = JSON.parse(k.stdout).agent_id;
    assert.equal((await run(["bootstrap"])).code, 0);
    const t = await run(["template"]);
    const capsuleFile = path.join(TMP, "outage.capsule.json");
    writeFileSync(capsuleFile, t.stdout);
    assert.equal((await run(["put", capsuleFile])).code, 0);
    const q = await down.fetch("/api/v1/self/upgrade/quote", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ agent_id: id, plan: "pro" }),
    });
    assert.equal(q.status, 200, q.text);
    const hash = await transfer(chain.rpcUrl, BASE_USDC, handPayer, treasury, BigInt(q.json.amount_atomic));
    await waitForReceipt(chain.rpcUrl, hash);
    const started = Date.now();
    const r = await run(["upgrade", "claim", "--invoice", q.json.invoice_id, "--tx", hash, "--provider-timeout", "3"]);
    const took = Date.now() - started;
    assertClean(r);
    assert.equal(r.code, 9, r.stderr);
    assert.ok(took < 30_000, `gave up after ${took} ms`);
    assert.match(r.stderr, /payment_provider_unavailable/);
    assert.match(r.stderr, /nothing was credited and the payment is safe/);
    assert.ok(
      r.stderr.includes(`selfcap upgrade claim --invoice ${q.json.invoice_id} --tx ${hash.toLowerCase()}`),
      r.stderr,
    );
    // Nothing was credited.
    const h = await down.fetch(`/self/${id}/head.json`);
    assert.equal(h.json.tier, "free");
    // The default and the flag are documented.
    const help = await selfcap(["upgrade", "claim", "--help"]);
    assert.match(help.stdout, /--provider-timeout <SECS>[\s\S]*\[default: 60\]/);
  } finally {
    await down.close();
  }
});

test("an RPC endpoint on another chain is refused before anything is paid", async () => {
  other = await startAnvil({ chainId: 31337 });
  const a = await newAgent("wrong-chain");
  const before = await treasuryBalance();
  const r = await a.run(["upgrade", "--plan", "pro", "--evm-key", keyFile, "--rpc", other.rpcUrl]);
  assertClean(r);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /the RPC endpoint is chain 31337, the invoice is payable on base \(chain 8453\); nothing was paid/);
  assert.equal(a.record().payment, undefined);
  assert.equal(await treasuryBalance(), before);
  // The right chain then pays the invoice already quoted (not a new one).
  const quoted = a.record().invoice.invoice_id;
  const ok = await a.upgrade();
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stderr, new RegExp(`paying the open invoice ${quoted} recorded earlier`));
  assert.equal(a.record().claimed.invoice_id, quoted);
  assert.equal((await treasuryBalance()) - before, BigInt(a.record().invoice.amount_atomic));
});

test("self_upgrade over MCP: status and quote anywhere; pay only with an EVM key, once", async () => {
  const a = await newAgent("mcp");
  const env = { HOME: TMP, SELFCAP_STATE_DIR: a.dir, SELFCAP_URL: URL_ };
  const before = await treasuryBalance();
  let s = await mcpSession(BIN, env);
  try {
    let r = await s.call("self_upgrade");
    assert.equal(r.isError, false, JSON.stringify(r.body));
    assert.deepEqual([r.body.tier, r.body.can_pay], ["free", false]);
    r = await s.call("self_upgrade", { action: "quote", plan: "pro" });
    assert.equal(r.isError, false, JSON.stringify(r.body));
    assert.match(r.body.invoice_id, /^inv_[0-9a-f]{32}$/);
    assert.equal(r.body.plan, "pro");
    assert.match(r.body.hint, /upgrade claim/);
    r = await s.call("self_upgrade", { action: "pay", plan: "pro" });
    assert.equal(r.isError, true);
    assert.equal(r.body.error, "no_evm_key");
    r = await s.call("self_upgrade", { action: "pay" });
    assert.deepEqual([r.isError, r.body.field], [true, "plan"]);
  } finally {
    await s.close();
  }
  assert.equal(await treasuryBalance(), before, "nothing paid without a key");

  s = await mcpSession(BIN, { ...env, SELFCAP_EVM_KEY: keyFile, SELFCAP_RPC_URL: chain.rpcUrl });
  try {
    let r = await s.call("self_upgrade", { action: "pay", plan: "pro" });
    assert.equal(r.isError, false, JSON.stringify(r.body));
    assert.deepEqual([r.body.credited, r.body.fresh, r.body.plan], [true, true, "pro"]);
    const paid = BigInt(a.record().invoice.amount_atomic);
    assert.equal((await treasuryBalance()) - before, paid, "paid exactly once");
    assert.equal((await head(a.id)).tier, "pro");
    r = await s.call("self_upgrade", { action: "pay", plan: "pro" });
    assert.deepEqual([r.isError, r.body.fresh], [false, false], "a second pay call pays nothing");
    r = await s.call("self_upgrade");
    assert.equal(r.body.tier, "pro");
    assert.match(r.body.paid_until, /^\d{4}-/);
  } finally {
    await s.close();
  }
  assert.equal((await treasuryBalance()) - before, BigInt(a.record().invoice.amount_atomic));
  assert.ok(!s.stderr().toLowerCase().includes(PAYER_KEY.slice(2)), "key printed");
});
