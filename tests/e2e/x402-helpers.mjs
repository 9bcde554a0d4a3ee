// x402 payments for the e2e tests, all offline: a local chain (anvil as Base,
// chain 8453) with the EIP-3009 test USDC at Base's USDC address, a local
// facilitator built from the official @x402 packages (scripts/x402-facilitator.mjs),
// and the three OFFICIAL payers, each wrapped to pay one URL and report what
// it sent and got:
//   payWithX402Fetch       npm @x402/fetch 2.27 (x402 v2: PAYMENT-SIGNATURE)
//   payWithLegacyX402Fetch npm x402-fetch 1.2.0 (legacy v1: X-PAYMENT)
//   payWithPython          PyPI x402[evm,httpx] 2.25 (v2), in a cached venv
// plus replayPayment (send a captured header again: theft/replay tests) and
// startResourceServer, a stand-in x402 resource server (not the Worker) that
// proves the fixture and lets the recorder capture real headers.
// For the Worker's tests (x402.test.mjs) also: fundedPayer (a fresh payer
// key with test USDC), signPayment (an authorization signed here with viem's
// EIP-712 signer, any field changed: under/over-payment, windows), capturePayment
// (an official payer's header for a 402, captured unsent), and chain/facilitator
// read-backs: transfersFrom, facilitatorCallsFor.
//
// Nothing here skips: a payer that cannot be installed or run throws.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { x402Client, wrapFetchWithPayment } from "@x402/fetch";
import { registerExactEvmScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPayment as wrapFetchWithPaymentV1 } from "x402-fetch";
import { createWalletClient, decodeEventLog, encodeEventTopics, http as viemHttp, parseAbi } from "viem";
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount } from "viem/accounts";
import { base } from "viem/chains";
import { startAnvil, rpc, BASE_USDC } from "../../scripts/chain.mjs";
import { placeToken3009At, mint } from "../../scripts/x402-chain.mjs";
import { startFacilitator, v1NetworkName } from "../../scripts/x402-facilitator.mjs";

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** anvil's dev accounts come from this public mnemonic; index i = anvil account i. */
export const ANVIL_MNEMONIC = "test test test test test test test test test test test junk";
/** anvil dev account i's private key (0x hex), derived rather than copied (a typo would silently make a stranger). */
export const anvilKey = (i) =>
  `0x${Buffer.from(mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: i }).getHdKey().privateKey).toString("hex")}`;
/** The payer of the fixture: anvil account 1. */
export const PAYER_KEY = anvilKey(1);
/** The treasury (payTo): anvil account 2. */
export const TREASURY = privateKeyToAccount(anvilKey(2)).address;
/** The facilitator settles from anvil account 5: its own nonces, apart from the deployer's. */
export const FACILITATOR_KEY = anvilKey(5);
/** Versions of the official payers (pinned in package.json; PyPI's here). */
export const PYTHON_X402_VERSION = "2.25.0";

export const addressOf = (key) => privateKeyToAccount(key).address;

/**
 * anvil (default chain 8453) + TestUSDC3009 at BASE_USDC + the facilitator.
 * `fund` = [{address, amount}] mints test USDC to payers (bigint, atomic units).
 * `requireCdpJwt` = {keyId, publicKey}: the facilitator wants CDP's Bearer JWT
 * (scripts/x402-facilitator.mjs).
 * Returns {chain, rpcUrl, usdc, facilitator, fund(address, amount), stop}.
 */
export async function startX402Stack({ chainId = 8453, fund = [], requireCdpJwt = null } = {}) {
  const chain = await startAnvil({ chainId });
  const stops = [() => chain.stop()];
  const stop = async () => {
    for (const s of stops.reverse()) await s();
  };
  try {
    const deployer = chain.accounts[0];
    const usdc = await placeToken3009At(chain.rpcUrl, deployer, BASE_USDC);
    const facilitator = await startFacilitator({
      rpcUrl: chain.rpcUrl,
      chainId,
      privateKey: FACILITATOR_KEY,
      requireCdpJwt,
    });
    stops.push(() => facilitator.stop());
    if (!chain.accounts.includes(facilitator.address.toLowerCase())) {
      throw new Error(`FACILITATOR_KEY is not one of anvil's funded dev accounts (${facilitator.address})`);
    }
    const fundOne = (address, amount) => mint(chain.rpcUrl, usdc, deployer, address, amount);
    for (const f of fund) await fundOne(f.address, f.amount);
    return { chain, rpcUrl: chain.rpcUrl, usdc, facilitator, fund: fundOne, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

// ---------------------------------------------------------------------------
// Payment requirements (what a 402 carries) and the header encodings.

/**
 * The 402 of one invoice, in both forms: `v2` is the PaymentRequired object
 * (base64 JSON in the PAYMENT-REQUIRED header), `v1` the legacy JSON body
 * `{x402Version:1, error, accepts}` (null when the chain has no v1 name).
 */
export function invoice({
  chainId = 8453,
  amount,
  payTo = TREASURY,
  asset = BASE_USDC,
  resourceUrl,
  description = "x402 fixture invoice",
  maxTimeoutSeconds = 300,
  extra = {},
}) {
  const tokenExtra = { name: "USD Coin", version: "2", ...extra };
  const accept = {
    scheme: "exact",
    network: `eip155:${chainId}`,
    amount: String(amount),
    asset,
    payTo,
    maxTimeoutSeconds,
    extra: tokenExtra,
  };
  const v2 = {
    x402Version: 2,
    error: "x402_payment_required",
    resource: { url: resourceUrl, description, mimeType: "application/json" },
    accepts: [accept],
  };
  const v1Name = v1NetworkName(chainId);
  const v1 = v1Name && {
    x402Version: 1,
    error: "x402_payment_required",
    accepts: [
      {
        scheme: "exact",
        network: v1Name,
        maxAmountRequired: String(amount),
        resource: resourceUrl,
        description,
        mimeType: "application/json",
        payTo,
        maxTimeoutSeconds,
        asset,
        extra: tokenExtra,
      },
    ],
  };
  return { v2, v1 };
}

/** base64(UTF-8 JSON): the encoding of every x402 header (v1 and v2). */
export const encodeHeader = (obj) => Buffer.from(JSON.stringify(obj), "utf8").toString("base64");
/** The JSON inside an x402 header. */
export const decodeHeader = (value) => JSON.parse(Buffer.from(value, "base64").toString("utf8"));

/** The payment header a client sent: {name, value, payload}; throws if it sent none. */
export function paymentHeaderOf(sent) {
  for (const req of [...sent].reverse()) {
    for (const [name, value] of Object.entries(req.headers)) {
      if (/^(payment-signature|x-payment)$/i.test(name)) return { name, value, payload: decodeHeader(value) };
    }
  }
  throw new Error(`the client sent no payment header (requests: ${JSON.stringify(sent)})`);
}

// ---------------------------------------------------------------------------
// The payers. Each returns {status, headers (lower-case names), body (text),
// sent: [{method, url, headers}], payment: paymentHeaderOf(sent) or null}.

/**
 * A fetch that records every request it sends (the payers get it as their
 * transport). `headers` are added to every request that lacks them (e.g. a
 * client address, `cf-connecting-ip`, so the Worker's per-address limits
 * see one address per test).
 */
function recordingFetch(sent, headers = {}) {
  return async (input, init) => {
    const req = new Request(input, init);
    for (const [name, value] of Object.entries(headers)) {
      if (!req.headers.has(name)) req.headers.set(name, value);
    }
    sent.push({ method: req.method, url: req.url, headers: Object.fromEntries(req.headers) });
    return fetch(req);
  };
}

async function report(res, sent) {
  const body = await res.text();
  let payment = null;
  try { payment = paymentHeaderOf(sent); } catch { /* unpaid: no 402 came */ }
  return { status: res.status, headers: Object.fromEntries(res.headers), body, sent, payment };
}

/**
 * Pays `url` with npm @x402/fetch (v2): x402Client + registerExactEvmScheme +
 * privateKeyToAccount. 2.27's client refuses more than $1 per payment by
 * default (spendControls): `maxAmountPerPayment` raises it (Pro is ~$5).
 * `headers` go on every request it sends (unpaid and paid).
 */
export async function payWithX402Fetch(
  url,
  { privateKey = PAYER_KEY, method = "POST", maxAmountPerPayment = "$16", headers = {} } = {},
) {
  const client = new x402Client().setSpendControls({ maxAmountPerPayment });
  registerExactEvmScheme(client, { signer: privateKeyToAccount(privateKey) });
  const sent = [];
  const res = await wrapFetchWithPayment(recordingFetch(sent, headers), client)(url, { method });
  return report(res, sent);
}

/**
 * Pays `url` with the legacy npm x402-fetch 1.2.0 (v1). It picks the accept
 * whose network is the wallet's chain, so the wallet is on viem's `base`
 * (8453). Signing is local and needs no RPC: `rpcUrl` only keeps viem off
 * its public default (the default here is a closed loopback port).
 * The library's default cap is 0.10 USDC: `maxValue` raises it.
 * `headers` go on every request it sends (unpaid and paid).
 */
export async function payWithLegacyX402Fetch(
  url,
  { privateKey = PAYER_KEY, method = "POST", rpcUrl = "http://127.0.0.1:9", maxValue = 16_000_000n, headers = {} } = {},
) {
  const wallet = createWalletClient({ account: privateKeyToAccount(privateKey), chain: base, transport: viemHttp(rpcUrl) });
  const sent = [];
  const res = await wrapFetchWithPaymentV1(recordingFetch(sent, headers), wallet, maxValue)(url, { method });
  return report(res, sent);
}

/** Where the Python payer's venv lives (keyed by version; reused across runs). */
export const PYTHON_VENV = path.join(ROOT, "node_modules", ".cache", `x402-python-${PYTHON_X402_VERSION}`);

let pythonReady;
/** Creates (once) the venv with PyPI x402[evm,httpx]; returns its python. Throws if it can't. */
export function ensurePythonX402() {
  pythonReady ??= (async () => {
    const python = path.join(PYTHON_VENV, "bin", "python");
    const stamp = path.join(PYTHON_VENV, ".installed");
    if (existsSync(stamp)) return python;
    rmSync(PYTHON_VENV, { recursive: true, force: true });
    mkdirSync(path.dirname(PYTHON_VENV), { recursive: true });
    await run("python3", ["-m", "venv", PYTHON_VENV], "python3 -m venv (Python >= 3.10 with venv is needed)");
    await run(
      python,
      ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", `x402[evm,httpx]==${PYTHON_X402_VERSION}`],
      `pip install x402[evm,httpx]==${PYTHON_X402_VERSION}`,
      300_000,
    );
    writeFileSync(stamp, `${PYTHON_X402_VERSION}\n`);
    return python;
  })();
  pythonReady.catch(() => { pythonReady = undefined; }); // a failed install is retried by the next caller
  return pythonReady;
}

/** Pays `url` with PyPI x402 2.25 (tests/e2e/x402_pay.py in the cached venv); spend cap raised as for @x402/fetch. */
export async function payWithPython(url, { privateKey = PAYER_KEY, method = "POST", maxAmountPerPayment = "$16" } = {}) {
  const python = await ensurePythonX402();
  const script = path.join(ROOT, "tests", "e2e", "x402_pay.py");
  const out = await run(python, [script, url, privateKey, method, maxAmountPerPayment], "the Python x402 payer", 120_000);
  let r;
  try {
    r = JSON.parse(out.trim().split("\n").pop());
  } catch {
    throw new Error(`the Python x402 payer printed no JSON:\n${out}`);
  }
  let payment = null;
  try { payment = paymentHeaderOf(r.sent); } catch { /* unpaid */ }
  return { ...r, payment };
}

/** Runs a command; resolves its stdout, throws with its output on failure or timeout. */
function run(cmd, args, what, timeoutMs = 120_000) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => { out += d; });
    child.stderr.on("data", (d) => { err += d; });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", (e) => { clearTimeout(timer); reject(new Error(`${what}: ${e.message}`)); });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${what} failed (exit ${code}, signal ${signal}):\n${err}\n${out}`));
    });
  });
}

/**
 * Sends a captured payment header again, as-is, to `url` (any URL: replay on
 * the same resource, or theft onto another agent's). `payment` is
 * {name, value} as returned in a payer's `payment`; `headers` are sent
 * too. Returns like a payer.
 */
export async function replayPayment(url, payment, { method = "POST", headers = {} } = {}) {
  const sent = [];
  const res = await recordingFetch(sent, headers)(url, { method, headers: { [payment.name]: payment.value } });
  return report(res, sent);
}

// ---------------------------------------------------------------------------
// A stand-in x402 resource server (not the Worker): 402 with the invoice,
// then verify + settle through the facilitator. Only to prove the fixture
// and to record real client headers; the Worker's own logic is tested elsewhere.

/**
 * Serves every path on 127.0.0.1: without a payment header, 402 with
 * PAYMENT-REQUIRED (base64 of `inv.v2`) and the v1 body `inv.v1` (or `{}`).
 * With PAYMENT-SIGNATURE (v2) or X-PAYMENT (v1): if `facilitatorUrl` is set,
 * POST /verify then /settle there; success → 200 + PAYMENT-RESPONSE /
 * X-PAYMENT-RESPONSE; invalid or failed → 402; settlement_pending, a
 * facilitator error or no answer within settleTimeoutMs → 503 (never a 402
 * once money may have moved). Without `facilitatorUrl` every payment gets
 * 200 unsettled (capture only). `payments` logs each: {version, header,
 * payload, status, verify, settle, error}.
 */
export async function startResourceServer({ inv, facilitatorUrl, settleTimeoutMs = 5000 }) {
  const payments = [];
  const server = http.createServer(async (req, res) => {
    const reply = (status, headers, body) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(body));
    };
    const v2Header = req.headers["payment-signature"];
    const v1Header = req.headers["x-payment"];
    if (!v2Header && !v1Header) {
      return reply(402, { "payment-required": encodeHeader(inv.v2) }, inv.v1 ?? {});
    }
    const version = v2Header ? 2 : 1;
    const entry = { version, header: v2Header ?? v1Header, payload: null, status: null };
    payments.push(entry);
    const answer = (status, headers, body) => {
      entry.status = status;
      reply(status, headers, body);
    };
    try {
      entry.payload = decodeHeader(entry.header);
    } catch {
      return answer(400, {}, { error: "bad_x402_payment" });
    }
    if (!facilitatorUrl) return answer(200, {}, { captured: true });

    const paymentRequirements = version === 2 ? inv.v2.accepts[0] : inv.v1.accepts[0];
    const request = { x402Version: version, paymentPayload: entry.payload, paymentRequirements };
    const responseHeader = version === 2 ? "payment-response" : "x-payment-response";
    try {
      entry.verify = await postJson(`${facilitatorUrl}/verify`, request, settleTimeoutMs);
      if (!entry.verify.isValid) {
        return answer(402, { "payment-required": encodeHeader(inv.v2) }, { error: entry.verify.invalidReason });
      }
      entry.settle = await postJson(`${facilitatorUrl}/settle`, request, settleTimeoutMs);
    } catch (e) {
      entry.error = e.message;
      return answer(503, {}, { error: "settlement_unknown", detail: e.message });
    }
    const s = entry.settle;
    if (s.success) return answer(200, { [responseHeader]: encodeHeader(s) }, { paid: true, transaction: s.transaction });
    if (s.errorReason === "settlement_pending") return answer(503, {}, { error: "settlement_pending", transaction: s.transaction });
    return answer(402, { "payment-required": encodeHeader(inv.v2) }, { error: s.errorReason });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    payments,
    stop: () => new Promise((r) => { server.close(() => r()); server.closeAllConnections(); }),
  };
}

/** POST JSON; the parsed JSON answer; throws on a non-2xx status, no answer in time, or no connection. */
async function postJson(url, body, timeoutMs) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status} ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

// ---------------------------------------------------------------------------
// For the Worker's tests: fresh payers, hand-signed authorizations, captured
// (unsent) headers, and what the chain and the facilitator saw.

/**
 * A fresh payer: a random private key (never an anvil account, so no other
 * test's late settlement can touch its balance) holding `amount` test USDC
 * (atomic units). Payers need no ETH: the facilitator pays the gas.
 * Returns {key, address}.
 */
export async function fundedPayer(stack, amount = 100_000_000n) {
  const key = generatePrivateKey();
  const { address } = privateKeyToAccount(key);
  if (amount > 0n) await stack.fund(address, amount);
  return { key, address };
}

/** EIP-3009's signed struct (the six fields a payer signs; x402 spec v2 §6.1). */
export const TRANSFER_WITH_AUTHORIZATION_TYPES = Object.freeze({
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
});

/**
 * A payment header signed here, for tests the official payers cannot produce
 * (they always sign the 402's amount, validAfter 0 or now-600 and validBefore
 * now+maxTimeoutSeconds): viem's EIP-712 signTypedData over the token domain
 * the 402 names (`extra.name`/`extra.version`, `chainId`, `asset`), in the
 * official clients' wire form.
 *
 * `paymentRequired` is the decoded v2 PAYMENT-REQUIRED object; `accept` the
 * requirements to pay (default its first accept; pass a modified copy, e.g.
 * another `amount`, to sign against it as a client would); `authorization`
 * overrides any of {from, to, value, validAfter, validBefore, nonce}
 * (numbers, bigints or decimal strings); by default value = accept.amount,
 * validAfter 0, validBefore now + maxTimeoutSeconds, a random nonce (as
 * @x402/fetch 2.27 signs). `version` 2 → PAYMENT-SIGNATURE
 * {x402Version:2, resource, accepted, payload}; 1 → X-PAYMENT
 * {x402Version:1, scheme:"exact", network:<v1 name>, payload}.
 * Returns {name, value, payload} like a payer's `payment`.
 */
export async function signPayment({
  privateKey = PAYER_KEY,
  paymentRequired,
  accept = paymentRequired.accepts[0],
  authorization: overrides = {},
  version = 2,
  chainId = 8453,
}) {
  const account = privateKeyToAccount(privateKey);
  const now = Math.floor(Date.now() / 1000);
  const fields = {
    from: account.address,
    to: accept.payTo,
    value: accept.amount,
    validAfter: 0,
    validBefore: now + accept.maxTimeoutSeconds,
    nonce: `0x${randomBytes(32).toString("hex")}`,
    ...overrides,
  };
  const signature = await account.signTypedData({
    domain: { name: accept.extra.name, version: accept.extra.version, chainId, verifyingContract: accept.asset },
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: "TransferWithAuthorization",
    message: {
      from: fields.from,
      to: fields.to,
      value: BigInt(fields.value),
      validAfter: BigInt(fields.validAfter),
      validBefore: BigInt(fields.validBefore),
      nonce: fields.nonce,
    },
  });
  const authorization = {
    from: fields.from,
    to: fields.to,
    value: String(fields.value),
    validAfter: String(fields.validAfter),
    validBefore: String(fields.validBefore),
    nonce: fields.nonce,
  };
  // Key order as the official clients write it (@x402/fetch 2.27, x402-fetch 1.2.0): the same
  // JSON byte for byte as theirs for the same fields.
  const payload =
    version === 2
      ? { x402Version: 2, payload: { authorization, signature }, resource: paymentRequired.resource, accepted: accept }
      : { x402Version: 1, scheme: "exact", network: v1NetworkName(chainId), payload: { signature, authorization } };
  return { name: version === 2 ? "PAYMENT-SIGNATURE" : "X-PAYMENT", value: encodeHeader(payload), payload };
}

/**
 * The header an official payer signs for a 402, captured without sending it
 * anywhere that would settle it: the 402 (`paymentRequired` = decoded v2
 * PAYMENT-REQUIRED, `v1Body` = the v1 JSON body or null) is served again by a
 * capture-only stand-in server, the payer (`pay`, default payWithX402Fetch,
 * with `opts`) pays that, and its header is returned ({name, value, payload}).
 * The signed fields are the 402's; `resource`/`accepted` echo it unchanged.
 */
export async function capturePayment(paymentRequired, v1Body = null, { pay = payWithX402Fetch, ...opts } = {}) {
  const server = await startResourceServer({ inv: { v2: paymentRequired, v1: v1Body } });
  try {
    const r = await pay(`${server.url}/capture`, opts);
    if (r.status !== 200 || !r.payment) throw new Error(`capture failed: ${r.status} ${r.body}`);
    return r.payment;
  } finally {
    await server.stop();
  }
}

const TRANSFER_EVENT = parseAbi(["event Transfer(address indexed from, address indexed to, uint256 value)"]);

/**
 * Every Transfer log of `token` sent by `from`, oldest first:
 * [{txHash, blockNumber, logIndex, from, to, value (bigint)}].
 * With a fresh payer per test this is exactly what that test's payments moved.
 */
export async function transfersFrom(rpcUrl, token, from) {
  const topics = encodeEventTopics({ abi: TRANSFER_EVENT, eventName: "Transfer", args: { from } });
  const logs = await rpc(rpcUrl, "eth_getLogs", [{ address: token, fromBlock: "0x0", toBlock: "latest", topics }]);
  return logs.map((l) => {
    const { args } = decodeEventLog({ abi: TRANSFER_EVENT, data: l.data, topics: l.topics });
    return {
      txHash: l.transactionHash,
      blockNumber: Number(l.blockNumber),
      logIndex: Number(l.logIndex),
      from: args.from,
      to: args.to,
      value: args.value,
    };
  });
}

/**
 * The facilitator's logged requests to `path` ("/settle", "/verify") for one
 * authorization, by its EIP-3009 nonce (the payment's identity): the
 * facilitator's own call log, filtered.
 */
export function facilitatorCallsFor(facilitator, nonce, path = "/settle") {
  const want = nonce.toLowerCase();
  return facilitator.calls.filter(
    (c) => c.path === path && c.body?.paymentPayload?.payload?.authorization?.nonce?.toLowerCase() === want,
  );
}
