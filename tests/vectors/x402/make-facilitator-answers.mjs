// What a facilitator built on the official library answers to /verify and
// /settle, for the Rust classifier's tests (src/core/upgrade/x402/facilitator.rs).
//
// Run from the repository root, after make-vectors.mjs (same packages):
//   node tests/vectors/x402/make-facilitator-answers.mjs [--check]
// which writes facilitator-answers.json beside this file (or compares).
//
// The facilitator is @x402/core 2.27.0's x402Facilitator with @x402/evm
// 2.27.0's ExactEvmScheme, served as examples/typescript/facilitator/basic
// serves it (a result is HTTP 200 with the result as JSON; a throw is 500
// {"error"}). Its signer is a stand-in for the chain: signatures are checked
// for real (viem's verifyTypedData over client-payloads.json's payments),
// and each case scripts what the chain does with the transaction.
import { createRequire } from "node:module";
import { join } from "node:path";
import { readFileSync, writeFileSync } from "node:fs";

const require = createRequire(join(process.cwd(), "package.json"));
const { x402Facilitator } = require("@x402/core/facilitator");
const { ExactEvmScheme } = require("@x402/evm/exact/facilitator");
const { verifyTypedData } = require("viem");

const here = new URL(".", import.meta.url).pathname;
const vectors = JSON.parse(readFileSync(join(here, "client-payloads.json"), "utf8"));
const base = vectors.cases.find((c) => c.chain_id === 8453).v2;
const payment = base.payment_payload;
const requirements = base.payment_required.accepts[0];
const TX = "0x" + "cd".repeat(32);

function facilitator(chain) {
  const signer = {
    getAddresses: () => ["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"],
    // The token has code, the payer (an EOA) none.
    getCode: async ({ address }) =>
      address.toLowerCase() === requirements.asset.toLowerCase() ? "0x6080" : undefined,
    verifyTypedData: async (args) => verifyTypedData(args),
    readContract: async () => 10n ** 12n,
    writeContract: async () => chain.write(),
    sendTransaction: async () => TX,
    waitForTransactionReceipt: async () => chain.receipt(),
  };
  return new x402Facilitator().register("eip155:8453", new ExactEvmScheme(signer));
}

async function serve(run) {
  try {
    return { status: 200, body: await run() };
  } catch (error) {
    return { status: 500, body: { error: error instanceof Error ? error.message : "Unknown error" } };
  }
}

const mined = { write: async () => TX, receipt: async () => ({ status: "success" }) };
const tampered = { ...payment, payload: { ...payment.payload, authorization: { ...payment.payload.authorization, value: "5004218" } } };
const tamperedReq = { ...requirements, amount: "5004218" };
const cases = [
  ["verify_valid", "verify", mined, payment, requirements, vectors.now + 10],
  ["verify_bad_signature", "verify", mined, tampered, tamperedReq, vectors.now + 10],
  ["settle_success", "settle", mined, payment, requirements, vectors.now + 10],
  ["settle_pending", "settle", { write: async () => TX, receipt: async () => { throw new Error("timed out waiting for receipt"); } }, payment, requirements, vectors.now + 10],
  ["settle_reverted", "settle", { write: async () => TX, receipt: async () => ({ status: "reverted" }) }, payment, requirements, vectors.now + 10],
  ["settle_bad_signature", "settle", mined, tampered, tamperedReq, vectors.now + 10],
  ["settle_expired", "settle", mined, payment, requirements, vectors.now + 300],
  ["settle_write_failed", "settle", { write: async () => { throw new Error("nonce too low"); }, receipt: mined.receipt }, payment, requirements, vectors.now + 10],
];

const out = { generator: "@x402/core@2.27.0 @x402/evm@2.27.0 (tests/vectors/x402/make-facilitator-answers.mjs)", transaction: TX, answers: {} };
for (const [name, op, chain, p, r, now] of cases) {
  Date.now = () => now * 1000;
  const f = facilitator(chain);
  out.answers[name] = await serve(() => (op === "verify" ? f.verify(p, r) : f.settle(p, r)));
}
// Writes tests/vectors/x402/facilitator-answers.json; with --check, compares instead (npm run regen:check).
const target = new URL("./facilitator-answers.json", import.meta.url);
const text = JSON.stringify(out, null, 2) + "\n";
if (process.argv.includes("--check")) {
  if (readFileSync(target, "utf8") !== text) {
    console.error(`${target.pathname} is stale: run node tests/vectors/x402/make-facilitator-answers.mjs`);
    process.exit(1);
  }
} else {
  writeFileSync(target, text);
}
