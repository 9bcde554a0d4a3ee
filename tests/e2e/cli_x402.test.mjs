// `selfcap upgrade --x402` and `self_upgrade` `method: "x402"` end to
// end: the real binary (target/debug/selfcap) against the built
// Worker in workerd with x402 on, anvil as Base (chain 8453) with the
// EIP-3009 test USDC at Base's USDC address, and the local facilitator from
// the official @x402/evm with its fault modes (tests/e2e/x402-helpers.mjs).
//
//   node --test --test-concurrency=1 tests/e2e/cli_x402.test.mjs
//
// Expected values come from outside the CLI: the chain (every Transfer log
// the test's own fresh payer sent), the facilitator's call log (which
// authorizations, by EIP-3009 nonce, reached /settle), head.json, and the
// 402 the Worker offers. Every test has its own agent (own state directory)
// and its own payer key, so "exactly one transfer" and "no second
// authorization" are about that test alone.
//
// Needs anvil (npm @foundry-rs/anvil-linux-amd64): without it this file
// fails, it never skips.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { startWorker } from "./harness.mjs";
import { SELFCAP_BIN as BIN, exits, requireSelfcap, selfcapIn } from "./cli-helpers.mjs";
import { mcpSession } from "./mcp-helpers.mjs";
import { PRO_PRICE, upgradeVars } from "./upgrade-helpers.mjs";
import { mine, rpc } from "../../scripts/chain.mjs";
import { authorizationState } from "../../scripts/x402-chain.mjs";
import { TREASURY, decodeHeader, fundedPayer, startX402Stack, transfersFrom } from "./x402-helpers.mjs";

/** The test Worker's X402_SETTLE_TIMEOUT_MS: how long it waits for /settle. */
const SETTLE_TIMEOUT_MS = 3000;

const TMP = mkdtempSync(path.join(tmpdir(), "selfcap-x402-"));
const selfcap = selfcapIn(TMP);

let stack;
let f; // the facilitator
let w; // the Worker with x402 on
let URL_;

before(async () => {
  requireSelfcap();
  stack = await startX402Stack();
  f = stack.facilitator;
  w = await startWorker({
    vars: upgradeVars(
      { treasury: TREASURY, rpcUrl: stack.rpcUrl },
      {
        UPGRADE_CHAIN_ID: "8453",
        UPGRADE_USDC_CONTRACT: stack.usdc,
        X402_FACILITATOR_URL: f.url,
        X402_SETTLE_TIMEOUT_MS: String(SETTLE_TIMEOUT_MS),
        X402_MIN_CONFIRMATIONS: "1",
      },
    ),
  });
  URL_ = String(w.origin).replace(/\/$/, "");
});
after(async () => {
  await w?.close();
  await stack?.stop();
  rmSync(TMP, { recursive: true, force: true });
});
afterEach(async () => {
  await f.setMode("normal");
  await rpc(stack.rpcUrl, "evm_setAutomine", [true]);
});

/** A published agent with its own state directory and its own funded payer key file. */
async function newAgent(name) {
  const dir = path.join(TMP, name);
  const run = (args, opts) => selfcap(["--state-dir", dir, "--url", URL_, ...args], opts);
  const k = exits(await run(["keygen", "--json"]), 0, "keygen");
  exits(await run(["bootstrap"]), 0, "bootstrap");
  const t = exits(await run(["template"]), 0, "template");
  const capsuleFile = path.join(TMP, `${name}.capsule.json`);
  writeFileSync(capsuleFile, t.stdout);
  exits(await run(["put", capsuleFile]), 0, "put");
  const payer = await fundedPayer(stack);
  const keyFile = path.join(TMP, `${name}.payer.key`);
  writeFileSync(keyFile, `${payer.key}\n`, { mode: 0o600 });
  const upgrade = (extra = [], opts) =>
    run(["upgrade", "--x402", "--plan", "pro", "--evm-key", keyFile, "--chain-id", "8453", ...extra], opts);
  const record = () => JSON.parse(readFileSync(path.join(dir, "upgrade.json"), "utf8"));
  const archived = () =>
    existsSync(path.join(dir, "upgrades"))
      ? readdirSync(path.join(dir, "upgrades")).map((n) => JSON.parse(readFileSync(path.join(dir, "upgrades", n), "utf8")))
      : [];
  return { dir, run, upgrade, record, archived, payer, keyFile, id: JSON.parse(k.stdout).agent_id };
}

async function head(agentId) {
  const r = await w.fetch(`/self/${agentId}/head.json`);
  assert.equal(r.status, 200, r.text);
  return r.json;
}

/** The payer's authorizations that reached /settle, by nonce (lowercase), in order. */
const settledNonces = (payer) =>
  f.calls
    .filter((c) => c.path === "/settle")
    .map((c) => c.body?.paymentPayload?.payload?.authorization)
    .filter((a) => a?.from?.toLowerCase() === payer.address.toLowerCase())
    .map((a) => a.nonce.toLowerCase());

/** The authorization inside a recorded header. */
const authOfHeader = (header) => decodeHeader(header).payload.authorization;

/** No panic, and the payer's key never reaches the output. */
function assertClean(r, a) {
  assert.doesNotMatch(r.stderr, /panicked|RUST_BACKTRACE|stack backtrace/);
  for (const out of [r.stdout, r.stderr]) assert.ok(!out.toLowerCase().includes(a.payer.key.slice(2).toLowerCase()), "key printed");
}

/** Polls `cond` until true; fails with `what` after `timeoutMs`. */
async function waitFor(cond, what, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** Exactly one transfer left the payer: the invoice's amount, to the treasury. */
async function assertPaidOnce(a, amount) {
  const t = await transfersFrom(stack.rpcUrl, stack.usdc, a.payer.address);
  assert.equal(t.length, 1, `transfers from the payer: ${JSON.stringify(t, (_, v) => (typeof v === "bigint" ? String(v) : v))}`);
  assert.equal(t[0].to.toLowerCase(), TREASURY.toLowerCase());
  assert.equal(t[0].value, BigInt(amount));
  return t[0];
}

test("upgrade --x402: 402 checked, one EIP-3009 authorization recorded then sent, credited; head.json shows pro; exactly one transfer; a re-run pays nothing", async () => {
  const a = await newAgent("happy");
  const r = await a.upgrade();
  assertClean(r, a);
  exits(r, 0, "upgrade --x402");
  assert.match(r.stderr, /selfcap: x402 invoice inv_[0-9a-f]{32}: 5\.00\d{4} USDC \(pro\) to 0x[0-9a-fA-F]{40} on eip155:8453/);
  assert.match(r.stderr, /selfcap: signed an EIP-3009 authorization from 0x[0-9a-fA-F]{40} \(nonce 0x[0-9a-f]{64}/);
  assert.match(r.stderr, /selfcap: credited: pro until .* settled in 0x[0-9a-f]{64}/);
  assert.match(r.stdout, /^credited: pro until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(invoice inv_/);

  const rec = a.record();
  assert.equal(rec.invoice.method, "x402");
  assert.equal(rec.invoice.agent_id, a.id);
  assert.equal(rec.claimed.invoice_id, rec.invoice.invoice_id);
  assert.equal(rec.claimed.plan, "pro");
  const tag = BigInt(rec.invoice.amount_atomic) - PRO_PRICE;
  assert.ok(tag >= 1n && tag <= 9999n, `amount ${rec.invoice.amount_atomic}`);
  // The recorded header is the official wire form, and it is what reached /settle.
  const doc = decodeHeader(rec.x402.header);
  assert.deepEqual(Object.keys(doc), ["x402Version", "payload", "resource", "accepted"]);
  assert.equal(doc.x402Version, 2);
  assert.equal(doc.accepted.extra.invoice_id, rec.invoice.invoice_id);
  const auth = doc.payload.authorization;
  assert.equal(auth.from.toLowerCase(), a.payer.address.toLowerCase());
  assert.equal(auth.to.toLowerCase(), TREASURY.toLowerCase());
  assert.equal(auth.value, rec.invoice.amount_atomic);
  assert.equal(auth.nonce, rec.x402.nonce);
  assert.deepEqual(settledNonces(a.payer), [auth.nonce.toLowerCase()]);
  assert.equal(await authorizationState(stack.rpcUrl, stack.usdc, auth.from, auth.nonce), true);
  const t = await assertPaidOnce(a, rec.invoice.amount_atomic);
  assert.equal(rec.claimed.tx_hash.toLowerCase(), t.txHash.toLowerCase());

  const h = await head(a.id);
  assert.equal(h.tier, "pro");
  const s = exits(await a.run(["status"]), 0, "status");
  assert.match(s.stdout, /tier +pro \(paid until /);

  // A re-run is a no-op with the stored result.
  const again = exits(await a.upgrade(["--json"]), 0, "re-run");
  assert.match(again.stderr, /credited on an earlier run; nothing to pay/);
  assert.equal(JSON.parse(again.stdout).invoice_id, rec.invoice.invoice_id);
  assert.deepEqual(settledNonces(a.payer), [auth.nonce.toLowerCase()]);
  await assertPaidOnce(a, rec.invoice.amount_atomic);
  // The classic path will not buy over it either without --new.
  const classic = await a.run(["upgrade", "--plan", "pro", "--evm-key", a.keyFile, "--rpc", stack.rpcUrl]);
  exits(classic, 0, "classic re-run");
  assert.match(classic.stderr, /credited on an earlier run/);
  await assertPaidOnce(a, rec.invoice.amount_atomic);
});

test("hang_after_broadcast: the run ends on 503 x402_settlement_pending with its header recorded; the re-run resends the SAME header and is credited once; no second authorization", async () => {
  const a = await newAgent("hang");
  await f.setMode("hang_after_broadcast");
  // The facilitator's transaction is broadcast but not mined while the
  // Worker waits: at its settle deadline the outcome is truly unknown.
  await rpc(stack.rpcUrl, "evm_setAutomine", [false]);
  let first;
  try {
    first = await a.upgrade(["--confirmations-timeout", "4"]);
  } finally {
    await rpc(stack.rpcUrl, "evm_setAutomine", [true]);
  }
  assertClean(first, a);
  exits(first, 5, "interrupted while the settlement is pending");
  assert.match(first.stderr, /x402_settlement_pending/);
  const rec1 = a.record();
  assert.ok(rec1.x402?.header, "the header is recorded");
  assert.equal(rec1.claimed, undefined);
  const nonce = rec1.x402.nonce.toLowerCase();
  assert.deepEqual([...new Set(settledNonces(a.payer))], [nonce]);

  // The money moves now (the facilitator's transaction is mined).
  await mine(stack.rpcUrl, 1);
  await f.setMode("normal");
  await waitFor(
    async () => authorizationState(stack.rpcUrl, stack.usdc, a.payer.address, nonce),
    "the facilitator's transaction mined",
  );

  const second = await a.upgrade();
  assertClean(second, a);
  exits(second, 0, "re-run");
  assert.match(second.stderr, new RegExp(`resending the x402 payment recorded by an earlier run for invoice ${rec1.invoice.invoice_id}`));
  assert.doesNotMatch(second.stderr, /signed an EIP-3009 authorization/);
  const rec2 = a.record();
  // Byte for byte the same header; credited.
  assert.equal(rec2.x402.header, rec1.x402.header);
  assert.equal(rec2.claimed.invoice_id, rec1.invoice.invoice_id);
  // Never a second authorization: every /settle of this payer carried the one nonce.
  assert.deepEqual([...new Set(settledNonces(a.payer))], [nonce]);
  assert.equal(authOfHeader(rec2.x402.header).nonce.toLowerCase(), nonce);
  const t = await assertPaidOnce(a, rec1.invoice.amount_atomic);
  assert.equal(rec2.claimed.tx_hash.toLowerCase(), t.txHash.toLowerCase());
  assert.equal((await head(a.id)).tier, "pro");
});

test("fail_before_broadcast: 402 x402_settlement_failed drops the authorization (exit 7, nothing moved); the next run signs ONE new authorization for the new invoice and pays once", async () => {
  const a = await newAgent("fail");
  await f.setMode("fail_before_broadcast");
  const first = await a.upgrade();
  assertClean(first, a);
  exits(first, 7, "settlement failed");
  assert.match(first.stderr, /x402_settlement_failed/);
  assert.match(first.stderr, /moved nothing: run the same command again to pay the new invoice/);
  const rec1 = a.record();
  assert.equal(rec1.x402, undefined, "the dropped header is not resent");
  assert.equal(rec1.x402_dropped.length, 1);
  assert.equal(rec1.x402_dropped[0].why, "x402_settlement_failed");
  const nonce1 = rec1.x402_dropped[0].nonce.toLowerCase();
  assert.deepEqual(settledNonces(a.payer), [nonce1]);
  assert.deepEqual(await transfersFrom(stack.rpcUrl, stack.usdc, a.payer.address), [], "nothing moved");
  assert.equal((await head(a.id)).tier ?? "free", "free");

  await f.setMode("normal");
  const second = await a.upgrade();
  assertClean(second, a);
  exits(second, 0, "the next run");
  assert.match(second.stderr, /signed an EIP-3009 authorization/);
  const rec2 = a.record();
  assert.notEqual(rec2.invoice.invoice_id, rec1.invoice.invoice_id, "a new invoice");
  const nonce2 = rec2.x402.nonce.toLowerCase();
  assert.notEqual(nonce2, nonce1);
  // One authorization per invoice: the dropped one once, the new one once.
  assert.deepEqual(settledNonces(a.payer), [nonce1, nonce2]);
  assert.equal(await authorizationState(stack.rpcUrl, stack.usdc, a.payer.address, nonce1), false);
  await assertPaidOnce(a, rec2.invoice.amount_atomic);
  assert.equal(rec2.claimed.invoice_id, rec2.invoice.invoice_id);
  assert.equal((await head(a.id)).tier, "pro");
  // The dropped purchase is archived with what happened to it.
  const old = a.archived().find((r) => r.invoice.invoice_id === rec1.invoice.invoice_id);
  assert.ok(old, "the dropped purchase is in upgrades/");
  assert.equal(old.x402_dropped[0].nonce.toLowerCase(), nonce1);
});

test("self_upgrade over MCP with method x402: pays once through a real MCP client; a second call pays nothing", async () => {
  const a = await newAgent("mcp");
  const env = {
    HOME: TMP,
    SELFCAP_STATE_DIR: a.dir,
    SELFCAP_URL: URL_,
    SELFCAP_EVM_KEY: a.keyFile,
    SELFCAP_RPC_URL: stack.rpcUrl,
  };
  const s = await mcpSession(BIN, env);
  try {
    const tools = await s.client.listTools();
    const up = tools.tools.find((t) => t.name === "self_upgrade");
    assert.deepEqual(up.inputSchema.properties.method.enum, ["transfer", "x402"]);
    let r = await s.call("self_upgrade", { action: "pay", plan: "pro", method: "x402" });
    assert.equal(r.isError, false, JSON.stringify(r.body));
    assert.deepEqual([r.body.credited, r.body.fresh, r.body.plan], [true, true, "pro"]);
    const rec = a.record();
    assert.equal(rec.invoice.method, "x402");
    assert.equal(r.body.invoice_id, rec.invoice.invoice_id);
    assert.deepEqual(settledNonces(a.payer), [rec.x402.nonce.toLowerCase()]);
    await assertPaidOnce(a, rec.invoice.amount_atomic);
    assert.equal((await head(a.id)).tier, "pro");
    r = await s.call("self_upgrade", { action: "pay", plan: "pro", method: "x402" });
    assert.deepEqual([r.isError, r.body.fresh], [false, false], "a second pay call pays nothing");
    r = await s.call("self_upgrade", { action: "pay", plan: "pro", method: "card" });
    assert.deepEqual([r.isError, r.body.field], [true, "method"]);
    await assertPaidOnce(a, rec.invoice.amount_atomic);
  } finally {
    await s.close();
  }
  assert.ok(!s.stderr().toLowerCase().includes(a.payer.key.slice(2).toLowerCase()), "key printed");
});
