// x402 through a facilitator that wants Coinbase CDP's authentication
// (X402_FACILITATOR_AUTH=cdp): the built Worker in workerd, anvil
// as Base (8453) with the EIP-3009 test USDC, and the local facilitator of
// scripts/x402-facilitator.mjs with `requireCdpJwt`, which answers 401 to
// /verify and /settle unless they carry `Authorization: Bearer <jwt>` made
// with the CDP API key as npm @coinbase/cdp-sdk's generateJwt makes it
// (EdDSA, kid, sub, iss "cdp", `uris` naming that request, nbf/exp, a fresh
// nonce). The first test holds the fixture's check to the official library's
// own tokens; the others pay with the official @x402/fetch.
//
//   node --test --test-concurrency=1 tests/e2e/x402_cdp.test.mjs
//
// The CDP key is a fresh Ed25519 test key per run (never a real secret); the
// Worker gets it as the secrets CDP_API_KEY_ID / CDP_API_KEY_SECRET (string
// bindings, as `wrangler secret put` makes them). Needs anvil (npm
// @foundry-rs/anvil-linux-amd64): without it this file fails, it never skips.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { createRequire } from "node:module";
import { after, before, test } from "node:test";
import { startWorker } from "./harness.mjs";
import { newAgent } from "./helpers.mjs";
import { PRO_PRICE, assertFree, head, nextIp, publishFirst, upgradeVars } from "./upgrade-helpers.mjs";
import { authorizationState } from "../../scripts/x402-chain.mjs";
import {
  TREASURY,
  decodeHeader,
  facilitatorCallsFor,
  fundedPayer,
  payWithX402Fetch,
  startX402Stack,
  transfersFrom,
} from "./x402-helpers.mjs";

const require = createRequire(import.meta.url);
const { generateJwt } = require("@coinbase/cdp-sdk/auth");

const X402_PATH = "/api/v1/self/upgrade/x402";
const KEY_ID = "5f3c1a2b-8d4e-4f60-9a7b-0c1d2e3f4a5b";

/** A fresh Ed25519 key as CDP hands one out: secret = base64(seed ‖ public key). */
function cdpTestKey() {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const seed = Buffer.from(privateKey.export({ format: "jwk" }).d, "base64url");
  const pub = Buffer.from(publicKey.export({ format: "jwk" }).x, "base64url");
  return { secret: Buffer.concat([seed, pub]).toString("base64"), publicKeyHex: pub.toString("hex") };
}

const key = cdpTestKey();
const otherKey = cdpTestKey();

let stack;
let f; // the facilitator (CDP-authenticated)
let w; // the Worker with the right key

function workerVars(extra = {}) {
  return upgradeVars(
    { treasury: TREASURY, rpcUrl: stack.rpcUrl },
    {
      UPGRADE_CHAIN_ID: "8453",
      UPGRADE_USDC_CONTRACT: stack.usdc,
      X402_FACILITATOR_URL: f.url,
      X402_SETTLE_TIMEOUT_MS: "3000",
      X402_MIN_CONFIRMATIONS: "1",
      X402_FACILITATOR_AUTH: "cdp",
      ...extra,
    },
  );
}

before(async () => {
  stack = await startX402Stack({ requireCdpJwt: { keyId: KEY_ID, publicKey: key.publicKeyHex } });
  f = stack.facilitator;
  w = await startWorker({ vars: workerVars({ CDP_API_KEY_ID: KEY_ID, CDP_API_KEY_SECRET: key.secret }) });
});
after(async () => {
  await w?.close();
  await stack?.stop();
});

const pathFor = (agentId) => `${X402_PATH}?plan=pro&agent_id=${agentId}`;

async function send(worker, agent) {
  const res = await fetch(new URL(pathFor(agent.agentId), worker.origin), {
    method: "POST",
    headers: { "cf-connecting-ip": agent.ip },
  });
  const body = await res.text();
  let json;
  try { json = JSON.parse(body); } catch { json = undefined; }
  return { status: res.status, headers: Object.fromEntries(res.headers), body, json };
}

async function payPro(worker, agent, payer) {
  const r = await payWithX402Fetch(new URL(pathFor(agent.agentId), worker.origin).href, {
    privateKey: payer.key,
    headers: { "cf-connecting-ip": agent.ip },
  });
  let json;
  try { json = JSON.parse(r.body); } catch { json = undefined; }
  return { ...r, json };
}

async function freshAgent(worker) {
  const agent = newAgent();
  await publishFirst(worker, agent);
  return { ...agent, ip: nextIp() };
}

const authOf = (payment) => payment.payload.payload.authorization;

/** No secret (nor a token) in anything the Worker logged. */
function assertNoSecretsLogged(worker) {
  for (const { message } of worker.logs) {
    for (const s of [key.secret, otherKey.secret, key.secret.slice(0, 24), otherKey.secret.slice(0, 24)]) {
      assert.ok(!message.includes(s), `a CDP secret in the log: ${message}`);
    }
    assert.ok(!/Bearer|eyJhbGciOi/.test(message), `a token in the log: ${message}`);
  }
}

/** The Worker's structured config_error lines. */
const configErrors = (worker) =>
  worker.logs
    .map(({ message }) => {
      try { return JSON.parse(message); } catch { return null; }
    })
    .filter((l) => l && l.event === "config_error");

test("the fixture takes @coinbase/cdp-sdk's own token for the request it names, and nothing else", async () => {
  const host = new URL(f.url).host;
  const jwtFor = (path, secret = key.secret, keyId = KEY_ID) =>
    generateJwt({ apiKeyId: keyId, apiKeySecret: secret, requestMethod: "POST", requestHost: host, requestPath: path });
  const post = async (path, token) => {
    const res = await fetch(f.url + path, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: "{}",
    });
    return { status: res.status, body: await res.text() };
  };
  // Past the door, the fixture finds no payment: 400.
  const good = await jwtFor("/verify");
  assert.equal((await post("/verify", good)).status, 400);
  assert.equal((await post("/settle", await jwtFor("/settle"))).status, 400);
  // Refused: the same token again, a token for the other path, another key, another key id, none.
  for (const [why, path, token] of [
    ["replayed", "/verify", good],
    ["another path", "/verify", await jwtFor("/settle")],
    ["another key", "/verify", await jwtFor("/verify", otherKey.secret)],
    ["another key id", "/verify", await jwtFor("/verify", key.secret, "someone-else")],
    ["no token", "/settle", null],
  ]) {
    const r = await post(path, token);
    assert.equal(r.status, 401, `${why}: ${r.status} ${r.body}`);
  }
});

test("with the CDP key: @x402/fetch buys Pro, every facilitator call authenticated; one transfer; head.json pro", async () => {
  const a = await freshAgent(w);
  const payer = await fundedPayer(stack);
  const offer = await send(w, a);
  assert.equal(offer.status, 402, offer.body);
  const accept = decodeHeader(offer.headers["payment-required"]).accepts[0];
  const r = await payPro(w, a, payer);
  assert.equal(r.status, 200, r.body);
  const settled = decodeHeader(r.headers["payment-response"]);
  assert.equal(settled.success, true, JSON.stringify(settled));

  const nonce = authOf(r.payment).nonce;
  const verifies = facilitatorCallsFor(f, nonce, "/verify");
  const settles = facilitatorCallsFor(f, nonce, "/settle");
  assert.equal(settles.length, 1);
  for (const c of [...verifies, ...settles]) {
    assert.equal(c.auth, "ok", `${c.path} refused: ${c.auth}`);
    assert.equal(c.status, 200);
  }

  const moved = await transfersFrom(stack.rpcUrl, stack.usdc, payer.address);
  assert.equal(moved.length, 1);
  assert.equal(moved[0].to.toLowerCase(), TREASURY.toLowerCase());
  assert.equal(moved[0].value, BigInt(accept.amount));
  assert.ok(moved[0].value > PRO_PRICE);
  assert.equal(moved[0].txHash.toLowerCase(), settled.transaction.toLowerCase());
  assert.equal(r.json.tx_hash.toLowerCase(), settled.transaction.toLowerCase());
  assert.equal((await head(w, a.agentId)).tier, "pro");
  assertNoSecretsLogged(w);
});

test("with another key's secret: the facilitator refuses it (401), the Worker answers 503 x402_facilitator_unavailable; nothing moved, free", async () => {
  const wrong = await startWorker({ vars: workerVars({ CDP_API_KEY_ID: KEY_ID, CDP_API_KEY_SECRET: otherKey.secret }) });
  try {
    const a = await freshAgent(wrong);
    const payer = await fundedPayer(stack);
    const r = await payPro(wrong, a, payer);
    assert.equal(r.status, 503, r.body);
    assert.equal(r.json?.error, "x402_facilitator_unavailable", r.body);

    const nonce = authOf(r.payment).nonce;
    const verifies = facilitatorCallsFor(f, nonce, "/verify");
    assert.ok(verifies.length >= 1, "the Worker asked /verify");
    for (const c of verifies) {
      assert.equal(c.status, 401);
      assert.match(c.auth, /signature does not verify/);
    }
    assert.equal(facilitatorCallsFor(f, nonce, "/settle").length, 0, "no /settle");
    assert.deepEqual(await transfersFrom(stack.rpcUrl, stack.usdc, payer.address), []);
    assert.equal(await authorizationState(stack.rpcUrl, stack.usdc, payer.address, nonce), false);
    await assertFree(wrong, a.agentId);
    assertNoSecretsLogged(wrong);
  } finally {
    await wrong.close();
  }
});

test("a missing or malformed CDP secret: 503 x402_not_configured, logged by the secret's name, never its value; the facilitator is not asked", async () => {
  const pem = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIL4u1kZ0dGVzdCBvbmx5\n-----END EC PRIVATE KEY-----\n";
  for (const [what, secrets, named, says] of [
    ["no secret", { CDP_API_KEY_ID: KEY_ID }, "CDP_API_KEY_SECRET", "missing"],
    ["no key id", { CDP_API_KEY_SECRET: key.secret }, "CDP_API_KEY_ID", "missing"],
    ["an ES256 PEM key", { CDP_API_KEY_ID: KEY_ID, CDP_API_KEY_SECRET: pem }, "CDP_API_KEY_SECRET", "ES256 keys are not supported; create an Ed25519 CDP key"],
    ["a truncated secret", { CDP_API_KEY_ID: KEY_ID, CDP_API_KEY_SECRET: key.secret.slice(0, 40) }, "CDP_API_KEY_SECRET", "not 64 bytes"],
  ]) {
    const calls = f.calls.length;
    const w0 = await startWorker({ vars: workerVars(secrets) });
    try {
      const a = { ...newAgent(), ip: nextIp() };
      const r = await send(w0, a);
      assert.equal(r.status, 503, `${what}: ${r.body}`);
      assert.equal(r.json?.error, "x402_not_configured", `${what}: ${r.body}`);
      const errors = configErrors(w0).map((l) => JSON.stringify(l));
      assert.ok(
        errors.some((l) => l.includes(named) && l.includes(says)),
        `${what}: no config_error naming ${named} (${says}): ${errors.join("\n")}`,
      );
      for (const l of errors) assert.ok(!l.includes("MHcCAQEE") && !l.includes(key.secret.slice(0, 24)), l);
      assertNoSecretsLogged(w0);
      assert.equal(f.calls.length, calls, `${what}: the facilitator was asked`);
    } finally {
      await w0.close();
    }
  }
});
