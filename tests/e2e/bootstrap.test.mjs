// POST /api/v1/self/bootstrap: stateless key -> identifiers.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { startWorker, BASE } from "./harness.mjs";
import { newAgent, sha256hex } from "./helpers.mjs";

const PATH = "/api/v1/self/bootstrap";
let w;
before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.close();
});

const post = (body) =>
  w.fetch(PATH, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

test("accepts hex, base64 and base64url keys and derives the same identity", async () => {
  const a = newAgent();
  const raw = a.publicKeyRaw;
  const encodings = [
    raw.toString("hex"),
    raw.toString("hex").toUpperCase(),
    raw.toString("base64"),
    raw.toString("base64").replace(/=+$/, ""),
    raw.toString("base64url"),
  ];
  for (const enc of encodings) {
    const r = await post({ public_key: enc });
    assert.equal(r.status, 200, `${enc}: ${r.text}`);
    assert.equal(r.headers.get("content-type"), "application/json; charset=utf-8");
    assert.equal(r.headers.get("cache-control"), "no-store");
    assert.equal(r.json.agent_id, sha256hex(raw));
    assert.equal(r.json.agent_id, a.agentId);
    assert.equal(r.json.public_key, a.publicHex);
    assert.equal(r.json.head_url, `${BASE}/self/${a.agentId}/head.json`);
    assert.equal(r.json.capsule_url, `${BASE}/self/${a.agentId}/capsule.json`);
    assert.equal(r.json.signing.signature_alg, "ed25519");
    assert.equal(r.json.signing.method, "PUT");
    assert.equal(r.json.signing.envelope.public_key, a.publicHex);
    assert.equal(r.json.limits.max_body_bytes, 65536);
  }
});

test("is stateless: nothing is created", async () => {
  const a = newAgent();
  assert.equal((await post({ public_key: a.publicHex })).status, 200);
  const head = await w.fetch(`/self/${a.agentId}/head.json`);
  assert.equal(head.status, 404);
  assert.deepEqual((await w.kv.list()).keys, []);
});

test("bad, weak and non-canonical keys: 400 bad_public_key", async () => {
  const identity = "01" + "00".repeat(31); // the neutral point: small order
  const smallOrder = "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"; // y = p - 1, order 2
  const nonCanonical = "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"; // y = p (= 0 mod p)
  const bad = [
    identity,
    smallOrder,
    nonCanonical,
    "00".repeat(31),
    "00".repeat(33),
    "zz".repeat(32),
    "",
    "not a key",
    Buffer.alloc(31).toString("base64"),
  ];
  for (const k of bad) {
    const r = await post({ public_key: k });
    assert.equal(r.status, 400, `${k}: ${r.text}`);
    assert.equal(r.json.error, "bad_public_key", k);
  }
  for (const body of [{}, { public_key: 7 }, { public_key: null }, { key: "x" }, [], 5, true]) {
    const r = await post(body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.json.error, "bad_public_key");
  }
});

test("malformed JSON: 400 invalid_json; oversized body: 413 payload_too_large", async () => {
  for (const body of ["", "{", "{\"public_key\": \"a\", \"public_key\": \"b\"}", "nul"]) {
    const r = await post(body);
    assert.equal(r.status, 400, body);
    assert.equal(r.json.error, "invalid_json", body);
  }
  const big = await post({ public_key: "a".repeat(10_000) });
  assert.equal(big.status, 413);
  assert.equal(big.json.error, "payload_too_large");
});

test("URLs are built on the configured public origin, never on the Host a client sent", async () => {
  const a = newAgent();
  const init = {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ public_key: a.publicHex }),
  };
  const configured = await startWorker({ vars: { SELFCAP_PUBLIC_ORIGIN: "https://Capsule.Example/" } });
  try {
    for (const host of ["http://evil.example", "http://127.0.0.1:9", BASE]) {
      const res = await configured.mf.dispatchFetch(`${host}${PATH}`, init);
      const body = await res.json();
      assert.equal(res.status, 200);
      assert.equal(body.head_url, `https://capsule.example/self/${a.agentId}/head.json`, host);
      assert.equal(body.capsule_url, `https://capsule.example/self/${a.agentId}/capsule.json`, host);
      assert.equal(body.signing.url, body.capsule_url);
    }
  } finally {
    await configured.close();
  }
  // A malformed origin (a path in it) is ignored loudly, not pasted into URLs.
  const bad = await startWorker({ vars: { SELFCAP_PUBLIC_ORIGIN: "https://capsule.example/api?x=1" } });
  try {
    const res = await bad.mf.dispatchFetch(`${BASE}${PATH}`, init);
    const body = await res.json();
    assert.equal(body.head_url, `${BASE}/self/${a.agentId}/head.json`);
    const deadline = Date.now() + 2000;
    const ignored = () =>
      bad.logs.some(({ message }) => message.includes("config_ignored") && message.includes("SELFCAP_PUBLIC_ORIGIN"));
    while (!ignored() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(ignored(), "a config_ignored line names SELFCAP_PUBLIC_ORIGIN");
  } finally {
    await bad.close();
  }
});

test("a body cut short is 400 invalid_json, not a failure of the service", async () => {
  // Raw HTTP/1.1 on a loopback socket: 15 bytes of a declared 100, then the
  // client stops sending (fetch would refuse to send this).
  const url = await w.mf.ready;
  const head =
    `POST ${PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Content-Length: 100\r\n\r\n`;
  const text = await new Promise((resolve, reject) => {
    let data = "";
    const s = net.connect(Number(url.port), url.hostname, () => {
      s.write(head + '{"public_key":"');
      s.end();
    });
    const done = () => {
      s.destroy();
      resolve(data);
    };
    s.on("data", (d) => (data += d));
    s.on("close", done);
    s.on("error", reject);
    setTimeout(done, 10_000);
  });
  assert.equal(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]), 400, text);
  const body = JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4));
  assert.equal(body.error, "invalid_json");
  assert.ok(!w.logs.some((l) => l.message.includes("internal_error")));
});
