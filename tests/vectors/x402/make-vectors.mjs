// Payment headers and 402 challenges as the official x402 client libraries
// produce them, for the Rust decoder's tests (src/core/upgrade/x402/).
//
// Run from the repository root (the packages are its devDependencies):
//   node tests/vectors/x402/make-vectors.mjs [--check]
// which writes client-payloads.json beside this file (or compares, with
// --check; `npm run regen` runs both ways). The packages resolve from the
// working directory's package.json, hence the createRequire below.
//
// Deterministic: the clock is fixed at NOW and the "random" EIP-3009 nonce
// comes from a counter, so the same versions always print the same file.
// The payer is anvil's account 1 (0x7099…79C8; the brief's key had a typo, dc9c for dc9e); the treasury anvil's account 2 (the
// treasury of the Rust tests' config).
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(join(process.cwd(), "package.json"));
const { x402Client, x402HTTPClient } = require("@x402/core/client");
const {
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader,
  decodePaymentSignatureHeader,
} = require("@x402/core/http");
const { registerExactEvmScheme } = require("@x402/evm/exact/client");
const { privateKeyToAccount } = require("viem/accounts");

const NOW = 1_770_681_600; // 2026-02-10T00:00:00Z
Date.now = () => NOW * 1000;
let counter = 0;
globalThis.crypto.getRandomValues = (a) => {
  counter += 1;
  for (let i = 0; i < a.length; i++) a[i] = (counter * 31 + i * 7) & 0xff;
  return a;
};

const PAYER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const TREASURY = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const RESOURCE = "https://selfcap.example/api/v1/self/upgrade/x402?plan=pro&agent_id=" + "0f".repeat(32);
const INVOICE = "inv_0f0f0f0f0f0f0f0f0102030405060708";

const chains = [
  { id: 8453, v1: "base", asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", name: "USD Coin" },
  { id: 84532, v1: "base-sepolia", asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e", name: "USDC" },
  { id: 31337, v1: null, asset: "0x5FbDB2315678afecb367f032d93F642f64180aa3", name: "USD Coin" },
];

const account = privateKeyToAccount(PAYER_KEY);
const client = new x402Client();
registerExactEvmScheme(client, { signer: account });
// 2.27's default cap is $1 a payment (Pro costs 5): a real payer must raise
// it too; chain 31337's token is no default asset.
client.setSpendControls({ maxAmountPerPayment: "$20", allowedAssets: true });
const http = new x402HTTPClient(client);

const out = {
  generator: "@x402/core@2.27.0 @x402/evm@2.27.0 (tests/vectors/x402/make-vectors.mjs)",
  now: NOW,
  payer: account.address,
  treasury: TREASURY,
  invoice_id: INVOICE,
  cases: [],
};

for (const c of chains) {
  const extra = { name: c.name, version: "2", invoice_id: INVOICE };
  const v2Required = {
    x402Version: 2,
    error: "x402_payment_required",
    resource: { url: RESOURCE, description: "Self Capsule Pro, 30 days", mimeType: "application/json" },
    accepts: [{
      scheme: "exact", network: `eip155:${c.id}`, amount: "5004217", asset: c.asset,
      payTo: TREASURY, maxTimeoutSeconds: 300, extra,
    }],
  };
  const v2Header = encodePaymentRequiredHeader(v2Required);
  // What a client reads back from our 402 is what it signs over.
  const required = http.getPaymentRequiredResponse((h) => (h === "PAYMENT-REQUIRED" ? v2Header : null));
  const v2Payload = await http.createPaymentPayload(required);
  const v2Headers = http.encodePaymentSignatureHeader(v2Payload);
  const settled = {
    success: true,
    transaction: "0x" + "ab".repeat(32),
    network: `eip155:${c.id}`,
    payer: account.address,
  };
  const entry = {
    chain_id: c.id,
    v2: {
      payment_required: v2Required,
      payment_required_header: v2Header,
      payment_signature_header: v2Headers["PAYMENT-SIGNATURE"],
      payment_payload: decodePaymentSignatureHeader(v2Headers["PAYMENT-SIGNATURE"]),
      payment_response: settled,
      payment_response_header: encodePaymentResponseHeader(settled),
    },
  };
  if (c.v1) {
    const v1Required = {
      x402Version: 1,
      error: "x402_payment_required",
      accepts: [{
        scheme: "exact", network: c.v1, maxAmountRequired: "5004217", resource: RESOURCE,
        description: "Self Capsule Pro, 30 days", mimeType: "application/json", payTo: TREASURY,
        maxTimeoutSeconds: 300, asset: c.asset, extra,
      }],
    };
    // A v1 402 has no header: the client reads the body.
    const fromBody = http.getPaymentRequiredResponse(() => null, v1Required);
    const v1Payload = await http.createPaymentPayload(fromBody);
    const v1Headers = http.encodePaymentSignatureHeader(v1Payload);
    entry.v1 = {
      payment_required_body: v1Required,
      x_payment_header: v1Headers["X-PAYMENT"],
      payment_payload: decodePaymentSignatureHeader(v1Headers["X-PAYMENT"]),
    };
  }
  out.cases.push(entry);
}

// Writes tests/vectors/x402/client-payloads.json; with --check, compares instead (npm run regen:check).
const target = new URL("./client-payloads.json", import.meta.url);
const text = JSON.stringify(out, null, 2) + "\n";
if (process.argv.includes("--check")) {
  if (readFileSync(target, "utf8") !== text) {
    console.error(`${target.pathname} is stale: run node tests/vectors/x402/make-vectors.mjs`);
    process.exit(1);
  }
} else {
  writeFileSync(target, text);
}
