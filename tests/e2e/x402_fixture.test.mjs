// Proves the x402 test fixture itself (not the Worker): the EIP-3009 test
// USDC at Base's address on anvil as chain 8453, the local facilitator built
// from the official @x402 packages with its fault modes, and the three
// official payers, against a stand-in resource server (x402-helpers.mjs).
//
//   node --test --test-concurrency=1 tests/e2e/x402_fixture.test.mjs
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { decodeEventLog, parseAbi } from "viem";
import { rpc } from "../../scripts/chain.mjs";
import {
  authorizationState,
  authorizationUsedLogs,
  balanceOf,
  eip712Domain,
  submitTransferWithAuthorization,
} from "../../scripts/x402-chain.mjs";
import {
  PAYER_KEY,
  TREASURY,
  addressOf,
  anvilKey,
  decodeHeader,
  invoice,
  payWithLegacyX402Fetch,
  payWithPython,
  payWithX402Fetch,
  replayPayment,
  startResourceServer,
  startX402Stack,
} from "./x402-helpers.mjs";

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const PAYER = addressOf(PAYER_KEY);
const THIEF = addressOf(anvilKey(3));
const EVENTS = parseAbi([
  "event Transfer(address indexed from, address indexed to, uint256 value)",
  "event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)",
]);

let stack;
before(async () => {
  stack = await startX402Stack({ fund: [{ address: PAYER, amount: 1_000_000_000n }] });
});
after(async () => {
  await stack?.stop();
});

// Every case gets its own invoice amount: a payment matches one invoice only.
let nextAmount = 5_004_217n;
/** A fresh invoice and a resource server for it, settling through the facilitator. */
async function shop(t, { settleTimeoutMs } = {}) {
  const amount = nextAmount++;
  const inv = invoice({ amount, resourceUrl: `https://selfcapsule.example/api/v1/self/upgrade/x402?plan=pro&n=${amount}` });
  const server = await startResourceServer({ inv, facilitatorUrl: stack.facilitator.url, settleTimeoutMs });
  t.after(async () => {
    await server.stop();
    await stack.facilitator.setMode("normal");
  });
  return { amount, inv, server, url: `${server.url}/api/v1/self/upgrade/x402?plan=pro` };
}

const balances = async () => ({
  payer: await balanceOf(stack.rpcUrl, stack.usdc, PAYER),
  treasury: await balanceOf(stack.rpcUrl, stack.usdc, TREASURY),
});
const nonceUsed = (payment) =>
  authorizationState(stack.rpcUrl, stack.usdc, payment.payload.payload.authorization.from, payment.payload.payload.authorization.nonce);

/** The token's Transfer and AuthorizationUsed logs in a tx's receipt. */
async function tokenEvents(txHash) {
  const receipt = await rpc(stack.rpcUrl, "eth_getTransactionReceipt", [txHash]);
  assert.ok(receipt, `no receipt for ${txHash}`);
  assert.equal(receipt.status, "0x1");
  return receipt.logs
    .filter((l) => l.address.toLowerCase() === stack.usdc.toLowerCase())
    .map((l) => decodeEventLog({ abi: EVENTS, data: l.data, topics: l.topics }));
}

/** Exactly one transfer of `amount` payer → treasury happened since `before`, in `txHash`, using `payment`'s nonce. */
async function assertPaidOnce({ before, amount, txHash, payment }) {
  const now = await balances();
  assert.equal(now.treasury - before.treasury, amount);
  assert.equal(before.payer - now.payer, amount);
  assert.equal(await nonceUsed(payment), true);
  const events = await tokenEvents(txHash);
  assert.deepEqual(
    events.map((e) => e.eventName),
    ["AuthorizationUsed", "Transfer"],
  );
  assert.equal(events[0].args.nonce, payment.payload.payload.authorization.nonce);
  assert.equal(events[1].args.from, PAYER);
  assert.equal(events[1].args.to, TREASURY);
  assert.equal(events[1].args.value, amount);
}

/** Nothing moved since `before` and the payment's nonce is still unused. */
async function assertNothingMoved(before, payment) {
  assert.deepEqual(await balances(), before);
  assert.equal(await nonceUsed(payment), false);
}

test("the token at Base's USDC address signs under Base USDC's EIP-712 domain", async () => {
  assert.deepEqual(await eip712Domain(stack.rpcUrl, stack.usdc), {
    name: "USD Coin",
    version: "2",
    chainId: 8453,
    verifyingContract: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
  });
});

test("the committed token artifact and payment vectors are current (their generators' --check)", async () => {
  for (const script of ["tests/fixtures/x402/build-token.mjs", "tests/fixtures/x402/record-payments.mjs"]) {
    const r = spawnSync(process.execPath, [path.join(ROOT, script), "--check"], { cwd: ROOT, encoding: "utf8" });
    assert.equal(r.status, 0, `${script} --check:\n${r.stdout}${r.stderr}`);
  }
});

test("GET /supported lists exact on eip155:8453 (v2) and base (v1)", async () => {
  const res = await fetch(`${stack.facilitator.url}/supported`);
  assert.equal(res.status, 200);
  const supported = await res.json();
  assert.deepEqual(supported.kinds, [
    { x402Version: 2, scheme: "exact", network: "eip155:8453" },
    { x402Version: 1, scheme: "exact", network: "base" },
  ]);
  assert.deepEqual(supported.signers["eip155:*"], [stack.facilitator.address]);
});

test("@x402/fetch (v2) pays once: PAYMENT-SIGNATURE, PAYMENT-RESPONSE, one transfer; a replay moves nothing", async (t) => {
  const { amount, inv, server, url } = await shop(t);
  const before = await balances();
  const settles = stack.facilitator.settleCount();
  const r = await payWithX402Fetch(url);
  assert.equal(r.status, 200, r.body);
  assert.equal(r.payment.name.toLowerCase(), "payment-signature");
  assert.equal(r.payment.payload.x402Version, 2);
  assert.deepEqual(r.payment.payload.accepted, inv.v2.accepts[0]);
  assert.deepEqual(r.payment.payload.resource, inv.v2.resource);
  assert.equal(r.payment.payload.payload.authorization.value, String(amount));
  const settled = decodeHeader(r.headers["payment-response"]);
  assert.deepEqual(Object.keys(settled).sort(), ["network", "payer", "success", "transaction"]);
  assert.equal(settled.success, true);
  assert.equal(settled.network, "eip155:8453");
  assert.equal(settled.payer, PAYER);
  assert.equal(stack.facilitator.settleCount(), settles + 1);
  await assertPaidOnce({ before, amount, txHash: settled.transaction, payment: r.payment });

  const again = await replayPayment(url, r.payment);
  assert.equal(again.status, 402);
  assert.equal(server.payments.at(-1).verify.isValid, false);
  assert.equal(stack.facilitator.settleCount(), settles + 1, "a used authorization is refused at /verify");
  assert.equal((await balances()).treasury - before.treasury, amount);
});

test("x402-fetch 1.2.0 (legacy v1) pays once: X-PAYMENT, X-PAYMENT-RESPONSE, one transfer", async (t) => {
  const { amount, url } = await shop(t);
  const before = await balances();
  const settles = stack.facilitator.settleCount();
  const r = await payWithLegacyX402Fetch(url, { rpcUrl: stack.rpcUrl });
  assert.equal(r.status, 200, r.body);
  assert.equal(r.payment.name.toLowerCase(), "x-payment");
  assert.deepEqual(Object.keys(r.payment.payload).sort(), ["network", "payload", "scheme", "x402Version"]);
  assert.equal(r.payment.payload.x402Version, 1);
  assert.equal(r.payment.payload.network, "base");
  const settled = decodeHeader(r.headers["x-payment-response"]);
  assert.equal(settled.success, true);
  assert.equal(settled.network, "base");
  assert.equal(stack.facilitator.settleCount(), settles + 1);
  await assertPaidOnce({ before, amount, txHash: settled.transaction, payment: r.payment });
});

test("PyPI x402 2.25 (v2) pays once", async (t) => {
  const { amount, inv, url } = await shop(t);
  const before = await balances();
  const settles = stack.facilitator.settleCount();
  const r = await payWithPython(url);
  assert.equal(r.status, 200, r.body);
  assert.equal(r.payment.name.toLowerCase(), "payment-signature");
  assert.deepEqual(r.payment.payload.accepted, inv.v2.accepts[0]);
  const settled = decodeHeader(r.headers["payment-response"]);
  assert.equal(settled.success, true);
  assert.equal(stack.facilitator.settleCount(), settles + 1);
  await assertPaidOnce({ before, amount, txHash: settled.transaction, payment: r.payment });
});

test("hang_after_broadcast: the transfer is on chain while /settle never answers", async (t) => {
  const { amount, url } = await shop(t, { settleTimeoutMs: 1500 });
  await stack.facilitator.setMode("hang_after_broadcast");
  const before = await balances();
  const r = await payWithX402Fetch(url);
  assert.equal(r.status, 503, r.body);
  const call = stack.facilitator.calls.findLast((c) => c.path === "/settle");
  assert.equal(call.mode, "hang_after_broadcast");
  assert.equal(call.status, null, "never answered");
  const [used] = await authorizationUsedLogs(stack.rpcUrl, stack.usdc, PAYER, r.payment.payload.payload.authorization.nonce);
  await assertPaidOnce({ before, amount, txHash: used.txHash, payment: r.payment });
});

test("hang_after_broadcast with delayMs: the real answer comes late", async (t) => {
  const { amount, url } = await shop(t, { settleTimeoutMs: 5000 });
  await stack.facilitator.setMode("hang_after_broadcast", { delayMs: 300 });
  const before = await balances();
  const started = Date.now();
  const r = await payWithX402Fetch(url);
  assert.equal(r.status, 200, r.body);
  assert.ok(Date.now() - started >= 300);
  await assertPaidOnce({ before, amount, txHash: decodeHeader(r.headers["payment-response"]).transaction, payment: r.payment });
});

test("fail_before_broadcast: /settle answers the library's failure (no transaction) and nothing moves", async (t) => {
  const { url } = await shop(t);
  await stack.facilitator.setMode("fail_before_broadcast");
  const before = await balances();
  const r = await payWithX402Fetch(url);
  assert.equal(r.status, 402, r.body);
  const settled = stack.facilitator.calls.findLast((c) => c.path === "/settle");
  assert.equal(settled.status, 200);
  assert.equal(settled.response.success, false);
  assert.equal(settled.response.transaction, "");
  await assertNothingMoved(before, r.payment);
});

test("error_500: /settle answers 500 and nothing moves", async (t) => {
  const { url } = await shop(t);
  await stack.facilitator.setMode("error_500");
  const before = await balances();
  const r = await payWithX402Fetch(url);
  assert.equal(r.status, 503, r.body);
  assert.equal(stack.facilitator.calls.findLast((c) => c.path === "/settle").status, 500);
  await assertNothingMoved(before, r.payment);
});

test("fake_success: /settle claims success with a made-up hash and nothing moves", async (t) => {
  const { url } = await shop(t);
  await stack.facilitator.setMode("fake_success");
  const before = await balances();
  const r = await payWithX402Fetch(url);
  assert.equal(r.status, 200, r.body);
  const settled = decodeHeader(r.headers["payment-response"]);
  assert.equal(settled.success, true);
  assert.match(settled.transaction, /^0x[0-9a-f]{64}$/);
  assert.equal(await rpc(stack.rpcUrl, "eth_getTransactionReceipt", [settled.transaction]), null);
  await assertNothingMoved(before, r.payment);
});

test("settlement_pending: broadcast, then the library's own settlement_pending answer; a retry settles to the same tx", async (t) => {
  const { amount, inv, url } = await shop(t);
  await stack.facilitator.setMode("settlement_pending");
  const before = await balances();
  const settles = stack.facilitator.settleCount();
  const r = await payWithX402Fetch(url);
  assert.equal(r.status, 503, r.body);
  const call = stack.facilitator.calls.findLast((c) => c.path === "/settle");
  assert.equal(call.status, 200);
  assert.deepEqual(Object.keys(call.response).sort(), ["errorMessage", "errorReason", "network", "payer", "success", "transaction"]);
  assert.equal(call.response.success, false);
  assert.equal(call.response.errorReason, "settlement_pending");
  assert.equal(call.response.network, "eip155:8453");
  assert.equal(call.response.payer, PAYER);
  await assertPaidOnce({ before, amount, txHash: call.response.transaction, payment: r.payment });

  // The same payload again (a server's retry): the library remembers the broadcast hash.
  await stack.facilitator.setMode("normal");
  const retry = await fetch(`${stack.facilitator.url}/settle`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ x402Version: 2, paymentPayload: r.payment.payload, paymentRequirements: inv.v2.accepts[0] }),
  }).then((res) => res.json());
  assert.equal(retry.success, true);
  assert.equal(retry.transaction, call.response.transaction);
  assert.equal(stack.facilitator.settleCount(), settles + 2);
  assert.equal((await balances()).treasury - before.treasury, amount);
});

test("down: 503 on every route, or refused connections; the HTTP control API switches modes", async (t) => {
  const { url } = await shop(t);
  const f = stack.facilitator;
  const set = await fetch(`${f.url}/_fixture/mode`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ mode: "down" }),
  });
  assert.equal(set.status, 200);
  assert.equal(f.mode(), "down");
  assert.equal((await fetch(`${f.url}/supported`)).status, 503);
  const before = await balances();
  const r = await payWithX402Fetch(url);
  assert.equal(r.status, 503, r.body);
  await assertNothingMoved(before, r.payment);

  await f.setMode("down", { refuse: true });
  // A raw connect: fetch's pooled keep-alive sockets would fail differently.
  await assert.rejects(
    new Promise((resolve, reject) => net.connect(f.port, "127.0.0.1", resolve).on("error", reject)),
    { code: "ECONNREFUSED" },
  );
  await f.setMode("normal");
  assert.equal((await fetch(`${f.url}/supported`)).status, 200);
  const bad = await fetch(`${f.url}/_fixture/mode`, { method: "POST", body: JSON.stringify({ mode: "nope" }) });
  assert.equal(bad.status, 400);
});

test("front-run: a third party submits a captured authorization; AuthorizationUsed shows it and /settle then fails", async (t) => {
  // Capture a real header without settling it.
  const amount = nextAmount++;
  const inv = invoice({ amount, resourceUrl: "https://selfcapsule.example/api/v1/self/upgrade/x402?plan=pro" });
  const capture = await startResourceServer({ inv });
  t.after(() => capture.stop());
  const r = await payWithX402Fetch(`${capture.url}/pay`);
  assert.equal(r.status, 200);
  const before = await balances();
  const { authorization, signature } = r.payment.payload.payload;
  assert.equal(await nonceUsed(r.payment), false);

  const receipt = await submitTransferWithAuthorization(stack.rpcUrl, stack.usdc, THIEF, authorization, signature);
  assert.equal(receipt.from, THIEF.toLowerCase());
  const used = await authorizationUsedLogs(stack.rpcUrl, stack.usdc, PAYER, authorization.nonce);
  assert.deepEqual(used.map((u) => u.txHash), [receipt.transactionHash]);
  await assertPaidOnce({ before, amount, txHash: receipt.transactionHash, payment: r.payment });

  const settle = await fetch(`${stack.facilitator.url}/settle`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ x402Version: 2, paymentPayload: r.payment.payload, paymentRequirements: inv.v2.accepts[0] }),
  }).then((res) => res.json());
  assert.equal(settle.success, false);
  assert.equal((await balances()).treasury - before.treasury, amount, "no second transfer");
});
