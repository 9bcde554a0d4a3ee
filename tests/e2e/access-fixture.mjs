// A local stand-in for a Cloudflare Access team: it publishes RSA keys the
// way a team domain does (`GET /cdn-cgi/access/certs`: `{keys: [JWK…],
// public_cert, public_certs}`) and signs RS256 tokens shaped as the
// `Cf-Access-Jwt-Assertion` header Access adds (`aud` an array of
// application tags, `iss` the team domain, `email`, `sub`, `iat`, `nbf`,
// `exp`, `type: "app"`). Written from Cloudflare's documentation of those
// tokens, with Node's crypto; loopback only.
import crypto from "node:crypto";
import http from "node:http";

const b64url = (buf) => Buffer.from(buf).toString("base64url");

/** An RSA key as a team publishes it, with a key id. */
function rsaKey(kid) {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = publicKey.export({ format: "jwk" });
  return { kid, privateKey, jwk: { kid, kty: "RSA", alg: "RS256", use: "sig", n: jwk.n, e: jwk.e } };
}

/**
 * Starts the team on 127.0.0.1 with two published keys. `token()` signs a
 * token with one of them (or with `key`, e.g. an unpublished one), `claims`
 * overriding the defaults.
 */
export async function startAccessTeam({ aud = "selfcap-admin-aud" } = {}) {
  const published = [rsaKey("k-2026-1"), rsaKey("k-2026-2")];
  const rogue = rsaKey("k-2026-1"); // same kid, not the team's key
  let certsServed = 0;
  const server = http.createServer((req, res) => {
    if (req.url === "/cdn-cgi/access/certs") {
      certsServed++;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ keys: published.map((k) => k.jwk), public_cert: {}, public_certs: [] }));
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const domain = `http://127.0.0.1:${server.address().port}`;
  const now = () => Math.floor(Date.now() / 1000);
  return {
    domain,
    aud,
    rogue,
    certsServed: () => certsServed,
    token({ claims = {}, key = published[0], header = {} } = {}) {
      const h = { alg: "RS256", kid: key.kid, typ: "JWT", ...header };
      const c = {
        aud: [aud],
        email: "operator@example.com",
        sub: "7335d417-61da-459d-899c-0a01c76a2f94",
        iss: domain,
        type: "app",
        iat: now() - 5,
        nbf: now() - 5,
        exp: now() + 600,
        ...claims,
      };
      const input = `${b64url(JSON.stringify(h))}.${b64url(JSON.stringify(c))}`;
      const sig = crypto.sign("RSA-SHA256", Buffer.from(input), key.privateKey);
      return `${input}.${b64url(sig)}`;
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
