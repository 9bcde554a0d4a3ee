// Bearer JWTs for Coinbase CDP's REST API v2 (the hosted x402 facilitator,
// https://api.cdp.coinbase.com/platform/v2/x402) as the OFFICIAL library makes
// them: npm @coinbase/cdp-sdk's `generateJwt` (`@coinbase/cdp-sdk/auth`,
// _cjs/auth/utils/jwt.js), which npm @coinbase/x402's createAuthHeader calls
// with ("POST", "api.cdp.coinbase.com", "/platform/v2/x402/verify" | "/settle").
// The Rust signer (src/core/upgrade/x402/cdp.rs) must reproduce each token
// byte for byte (Ed25519 signatures are deterministic).
//
// Run from the repository root (the package is a devDependency):
//   node tests/vectors/x402/make-cdp-jwt.mjs [--check]
// which writes cdp-jwt.json beside this file (or compares, with --check;
// `npm run regen` runs both ways).
//
// Deterministic: the clock is fixed per case (Date.now) and the header's
// nonce (16 random bytes, hex) comes from the patched getRandomValues. The
// key is a TEST key made here from a fixed seed, never a real CDP secret.
import { createHash, createPrivateKey, createPublicKey, verify } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(join(process.cwd(), "package.json"));
const { generateJwt } = require("@coinbase/cdp-sdk/auth");
// Its package.json is not exported: read it from the install.
const { version } = JSON.parse(
  readFileSync(join(process.cwd(), "node_modules", "@coinbase", "cdp-sdk", "package.json"), "utf8"),
);

// The next nonce the library draws (its nonce() fills 16 bytes through
// uncrypto's getRandomValues, i.e. node:crypto's webcrypto).
let nextNonce = null;
globalThis.crypto.getRandomValues = (a) => {
  if (!nextNonce || nextNonce.length !== a.length) throw new Error(`unexpected getRandomValues(${a.length})`);
  a.set(nextNonce);
  nextNonce = null;
  return a;
};

// The test key: seed = sha256("self-capsule cdp test key"); a CDP Ed25519
// secret is base64(seed ‖ public key), 64 bytes.
const seed = createHash("sha256").update("self-capsule cdp test key").digest();
const pkcs8 = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]);
const privateKey = createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" });
const publicKey = Buffer.from(createPublicKey(privateKey).export({ format: "jwk" }).x, "base64url");
const secret = Buffer.concat([seed, publicKey]).toString("base64");

const HOST = "api.cdp.coinbase.com";
const ROUTE = "/platform/v2/x402";
const cases = [
  { key_id: "5f3c1a2b-8d4e-4f60-9a7b-0c1d2e3f4a5b", method: "POST", url: `https://${HOST}${ROUTE}/settle`, now: 1_770_681_600, nonce_seed: 1 },
  { key_id: "5f3c1a2b-8d4e-4f60-9a7b-0c1d2e3f4a5b", method: "POST", url: `https://${HOST}${ROUTE}/verify`, now: 1_770_681_601, nonce_seed: 2 },
  {
    key_id: "organizations/0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9/apiKeys/5f3c1a2b-8d4e-4f60-9a7b-0c1d2e3f4a5b",
    method: "GET", url: `https://${HOST}${ROUTE}/supported`, now: 1_800_000_000, nonce_seed: 3,
  },
  // A local facilitator (the e2e fixture): the host keeps its port.
  { key_id: "test-key", method: "POST", url: "http://127.0.0.1:4022/settle", now: 1_770_681_600, nonce_seed: 4 },
];

const out = {
  generator: `@coinbase/cdp-sdk@${version} generateJwt (tests/vectors/x402/make-cdp-jwt.mjs)`,
  key: {
    // A test key, made from a fixed seed here: not a Coinbase key.
    seed_hex: seed.toString("hex"),
    public_key_hex: publicKey.toString("hex"),
    secret,
  },
  cases: [],
};

for (const c of cases) {
  const u = new URL(c.url);
  const nonce = Buffer.from(Array.from({ length: 16 }, (_, i) => (c.nonce_seed * 37 + i * 11) & 0xff));
  nextNonce = nonce;
  Date.now = () => c.now * 1000;
  const jwt = await generateJwt({
    apiKeyId: c.key_id,
    apiKeySecret: secret,
    requestMethod: c.method,
    requestHost: u.host,
    requestPath: u.pathname,
  });
  // The library's output, checked here with node:crypto (not its jose):
  // EdDSA over "header.payload", the nonce we fed it.
  const [h, p, s] = jwt.split(".");
  const header = JSON.parse(Buffer.from(h, "base64url"));
  if (header.nonce !== nonce.toString("hex")) throw new Error(`nonce not ours: ${header.nonce}`);
  if (!verify(null, Buffer.from(`${h}.${p}`), createPublicKey(privateKey), Buffer.from(s, "base64url"))) {
    throw new Error("the library's signature does not verify");
  }
  out.cases.push({
    key_id: c.key_id,
    method: c.method,
    url: c.url,
    request_host: u.host,
    request_path: u.pathname,
    now: c.now,
    nonce: nonce.toString("hex"),
    header,
    payload: JSON.parse(Buffer.from(p, "base64url")),
    jwt,
  });
}

// Writes tests/vectors/x402/cdp-jwt.json; with --check, compares instead (npm run regen:check).
const target = new URL("./cdp-jwt.json", import.meta.url);
const text = JSON.stringify(out, null, 2) + "\n";
if (process.argv.includes("--check")) {
  if (readFileSync(target, "utf8") !== text) {
    console.error(`${target.pathname} is stale: run node tests/vectors/x402/make-cdp-jwt.mjs`);
    process.exit(1);
  }
} else {
  writeFileSync(target, text);
}
