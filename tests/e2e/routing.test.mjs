// Routing, method handling, CORS and error bodies (no stored state needed).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { startWorker, WRITE_WORKER } from "./harness.mjs";
import { newAgent, publish } from "./helpers.mjs";

const ID = "0123456789abcdef".repeat(4);
const JSON_CT = "application/json; charset=utf-8";
let w;
before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.close();
});

function assertJsonError(r, status, code) {
  assert.equal(r.status, status, r.text);
  assert.equal(r.headers.get("content-type"), JSON_CT);
  assert.equal(r.json?.error, code, r.text);
  assert.equal(r.headers.get("access-control-allow-origin"), "*");
}

test("unknown paths are 404 not_found, in JSON", async () => {
  for (const p of [
    "/",
    "/self",
    "/self/",
    `/self/${ID}`,
    `/self/${ID}/`,
    `/self/${ID}/other.json`,
    `/self/${ID}/head.json/`,
    `/self/${ID}/head`,
    `/self//head.json`,
    `/self/bootstrap`,
    `/api/v1/self/`,
    `/api/v1/self/bootstrap/`,
    `/api/v2/self/${ID}/head.json`,
    `/favicon.ico`,
  ]) {
    const r = await w.fetch(p);
    assertJsonError(r, 404, "not_found");
    assert.equal(r.headers.get("cache-control"), "no-store", p);
  }
});

test("unknown agent: 404 capsule_not_found on both documents and both prefixes", async () => {
  for (const prefix of ["", "/api/v1"]) {
    for (const doc of ["head.json", "capsule.json"]) {
      const r = await w.fetch(`${prefix}/self/${ID}/${doc}`);
      assertJsonError(r, 404, "capsule_not_found");
      assert.deepEqual(r.json, { error: "capsule_not_found" });
    }
  }
  const head = await w.fetch(`/self/${ID}/head.json`, { method: "HEAD" });
  assert.equal(head.status, 404);
});

test("bad agent id in the path: 400 bad_agent_id", async () => {
  const bad = [
    ID.toUpperCase(),
    ID.slice(1),
    ID + "0",
    "sha256:" + ID,
    "g".repeat(64),
    "%30" + ID.slice(1),
    "x",
  ];
  for (const id of bad) {
    for (const doc of ["head.json", "capsule.json"]) {
      const r = await w.fetch(`/self/${id}/${doc}`);
      assertJsonError(r, 400, "bad_agent_id");
    }
    // PUT clients always get accepted/reason_codes on a non-2xx.
    const r = await w.fetch(`/api/v1/self/${id}/capsule.json`, { method: "PUT", body: "{}" });
    assertJsonError(r, 400, "bad_agent_id");
    assert.equal(r.json.accepted, false);
    assert.deepEqual(r.json.reason_codes, ["bad_agent_id"]);
  }
});

test("wrong method: 405 with Allow", async () => {
  const cases = [
    ["POST", `/self/${ID}/head.json`, "GET, HEAD, OPTIONS"],
    ["PUT", `/self/${ID}/head.json`, "GET, HEAD, OPTIONS"],
    ["DELETE", `/self/${ID}/capsule.json`, "GET, HEAD, PUT, OPTIONS"],
    ["POST", `/api/v1/self/${ID}/capsule.json`, "GET, HEAD, PUT, OPTIONS"],
    ["PATCH", `/self/${ID}/capsule.json`, "GET, HEAD, PUT, OPTIONS"],
    ["GET", `/api/v1/self/bootstrap`, "POST, OPTIONS"],
    ["PUT", `/api/v1/self/bootstrap`, "POST, OPTIONS"],
  ];
  for (const [method, p, allow] of cases) {
    const r = await w.fetch(p, { method, body: method === "GET" ? undefined : "{}" });
    assertJsonError(r, 405, "method_not_allowed");
    assert.equal(r.headers.get("allow"), allow, `${method} ${p}`);
  }
});

test("methods the runtime has no name for (WebDAV) are 405 on every document, never the document", async () => {
  const docs = [
    [`/self/${ID}/head.json`, "GET, HEAD, OPTIONS"],
    [`/self/${ID}/capsule.json`, "GET, HEAD, PUT, OPTIONS"],
    [`/api/v1/self/${ID}/history.json`, "GET, HEAD, OPTIONS"],
    [`/self/${ID}/verify.json`, "GET, HEAD, OPTIONS"],
    [`/api/v1/self/keys`, "GET, HEAD, OPTIONS"],
    [`/api/v1/self/bootstrap`, "POST, OPTIONS"],
  ];
  for (const method of ["PROPFIND", "MKCOL", "LOCK", "COPY", "PURGE"]) {
    for (const [p, allow] of docs) {
      const r = await w.fetch(p, { method });
      assertJsonError(r, 405, "method_not_allowed");
      assert.equal(r.headers.get("allow"), allow, `${method} ${p}`);
    }
  }
});

test("CORS preflight on every route", async () => {
  const cases = [
    [`/self/${ID}/head.json`, "GET", "GET, HEAD, OPTIONS"],
    [`/self/${ID}/capsule.json`, "PUT", "GET, HEAD, PUT, OPTIONS"],
    [`/api/v1/self/${ID}/capsule.json`, "GET", "GET, HEAD, PUT, OPTIONS"],
    [`/api/v1/self/bootstrap`, "POST", "POST, OPTIONS"],
  ];
  for (const [p, method, allow] of cases) {
    const r = await w.fetch(p, {
      method: "OPTIONS",
      headers: {
        origin: "https://example.test",
        "access-control-request-method": method,
        "access-control-request-headers": "content-type, if-none-match",
      },
    });
    assert.equal(r.status, 204, p);
    assert.equal(r.text, "");
    assert.equal(r.headers.get("access-control-allow-origin"), "*");
    assert.equal(r.headers.get("access-control-allow-methods"), allow);
    assert.match(r.headers.get("access-control-allow-headers"), /Content-Type/i);
    assert.match(r.headers.get("access-control-allow-headers"), /If-None-Match/i);
    // The public deployment's browser clients send it; allowed, and ignored.
    assert.match(r.headers.get("access-control-allow-headers"), /X-Self-Agent-Id/i);
    // A browser can send a signed read (§12).
    for (const h of ["Signature", "Signature-Input", "Self-Public-Key"]) {
      assert.ok(r.headers.get("access-control-allow-headers").split(/,\s*/).includes(h), h);
    }
    assert.equal(r.headers.get("access-control-max-age"), "86400");
  }
});

test("every response exposes ETag to browsers", async () => {
  const r = await w.fetch(`/self/${ID}/head.json`, { headers: { origin: "https://example.test" } });
  assert.match(r.headers.get("access-control-expose-headers"), /\bETag\b/);
});

test("bodies answered without being read leave the kept-alive connection usable", async () => {
  // Over one real keep-alive connection: a PUT refused as too large (413,
  // declared length), then requests refused before their body is looked at
  // (404 unknown path, 405 wrong method). Each must get its own answer: a
  // body left unread on the connection used to reset the next request.
  const { hostname, port } = new URL(w.origin);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const send = (method, path, body) =>
    new Promise((resolve, reject) => {
      const req = http.request({ agent, host: hostname, port, method, path, headers: { "content-type": "application/json" } }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  const big = "{" + " ".repeat(70 * 1024) + "}";
  const got = [];
  for (let i = 0; i < 10; i++) {
    got.push(await send("PUT", `/self/${ID}/capsule.json`, big));
    got.push(await send("POST", "/no/such/path", big));
    got.push(await send("POST", `/self/${ID}/head.json`, big));
  }
  agent.destroy();
  assert.deepEqual(got, Array.from({ length: 10 }, () => [413, 404, 405]).flat());
});

test("the write Worker reached directly answers the write path's reads, not the entry's documents nor the extras' routes", async () => {
  const agent = newAgent();
  const put = await publish(w, agent, 1);
  assert.equal(put.status, 200, put.text);
  const writer = await w.mf.getWorker(WRITE_WORKER);
  const direct = async (p, init) => {
    const r = await writer.fetch(`http://127.0.0.1${p}`, init);
    const text = await r.text();
    return { status: r.status, json: text ? JSON.parse(text) : null };
  };
  // Through the entry, every one of them is answered.
  const id = agent.agentId;
  const entryOnly = [`/self/${id}/history.json`, `/self/${id}/verify.json`, `/self/${id}/keys.json`, `/self/${id}/meta.json`];
  for (const p of entryOnly) assert.equal((await w.fetch(p)).status, 200, p);
  const head = await w.fetch(`/self/${id}/head.json`);
  const snapshot = `/self/${id}/snapshot/${head.json.cursor}.json`;
  assert.equal((await w.fetch(snapshot)).status, 200);
  // Directly, the entry's documents and the extras' routes are unknown routes.
  for (const p of [...entryOnly, snapshot, "/api/v1/admin/stats"]) {
    const r = await direct(p);
    assert.equal(r.status, 404, p);
    assert.deepEqual(r.json, { error: "not_found" }, p);
  }
  const mcp = await direct("/mcp", { method: "POST", body: "{}" });
  assert.equal(mcp.status, 404);
  // What the entry forwards to it, it answers: export.json, the capsule, head.json.
  const exported = await direct(`/self/${id}/export.json`);
  assert.equal(exported.status, 200);
  assert.equal(exported.json.agent_id, id);
  assert.equal((await direct(`/self/${id}/capsule.json`)).status, 200);
  assert.equal((await direct(`/self/${id}/head.json`)).json.cursor, head.json.cursor);
});
