// Private capsules and signed reads (docs/PROTOCOL.md §12) in workerd: a
// capsule with access_control.public = false is unreadable without an RFC
// 9421 signature, with a bare X-Self-Agent-Id header, with a signature by a
// non-reader, with an expired grant, with a replayed or stale signature or
// one made for another path; readable by the owner and by a granted reader
// with the right scope. Signatures are made with npm `http-message-sig`
// (Cloudflare's RFC 9421 implementation) and Node's Ed25519, independently of
// the service's Rust verifier.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { startWorker, BASE } from "./harness.mjs";
import { newAgent, exampleCapsule, publish, capsulePath, headPath, cursorOf, sha256hex, signedReadHeaders } from "./helpers.mjs";

let w;
after(async () => {
  await w?.close();
});

const docs = (id) => ({
  head: headPath(id),
  capsule: capsulePath(id),
  history: `/self/${id}/history.json`,
  verify: `/self/${id}/verify.json`,
  export: `/self/${id}/export.json`,
  v1capsule: `/api/v1/self/${id}/capsule.json`,
});

/** Signed-read headers for `agent` reading `path` of the Worker. */
const signedHeaders = (agent, method, path, opts) => signedReadHeaders(agent, method, BASE + path, opts);

const get = (path, headers = {}, method = "GET") => w.fetch(path, { method, headers });
const signedGet = (agent, path, opts) => get(path, signedHeaders(agent, "GET", path, opts));

const owner = newAgent();
const all = newAgent(); // bare agent id: every scope
const headOnly = newAgent(); // READ_HEAD only
const expired = newAgent(); // READ_CAPSULE, expired
const stranger = newAgent();
let privateCapsule;
let nobody; // an agent that never published

function capsuleWith(access, motto = "Kept to ourselves.") {
  return exampleCapsule(owner.agentId, { self_motto: motto, access_control: access });
}
const privateAccess = () => ({
  public: false,
  authorized_readers: [
    all.agentId,
    { agent_id: headOnly.agentId, scopes: ["READ_HEAD"], granted_at: "2026-01-01T00:00:00Z" },
    { agent_id: expired.agentId, scopes: ["READ_CAPSULE"], expires_at: "2026-01-02T00:00:00Z" },
  ],
});

before(async () => {
  w = await startWorker({ vars: { FREE_HISTORY_RETAINED: "5", FREE_WRITES_PER_24H: "30" } });
  privateCapsule = capsuleWith(privateAccess());
  const r = await publish(w, owner, 1, privateCapsule);
  assert.equal(r.status, 200, r.text);
  nobody = newAgent();
});

test("unsigned, or with only X-Self-Agent-Id, a private capsule reads exactly like one never published", async () => {
  for (const [name, path] of Object.entries(docs(owner.agentId))) {
    const missingPath = path.replace(owner.agentId, nobody.agentId);
    const missing = await get(missingPath);
    assert.equal(missing.status, 404, name);
    for (const headers of [{}, { "x-self-agent-id": owner.agentId }, { "x-self-agent-id": all.agentId }]) {
      const r = await get(path, headers);
      assert.equal(r.status, 404, `${name} ${JSON.stringify(headers)}`);
      assert.equal(r.text, missing.text, name);
      assert.deepEqual(
        [r.headers.get("content-type"), r.headers.get("cache-control")],
        [missing.headers.get("content-type"), missing.headers.get("cache-control")],
        name,
      );
      assert.ok(!r.text.includes(cursorOf(privateCapsule).slice(7)), "no cursor leaks");
    }
  }
  // HEAD and a conditional GET with the right ETag learn nothing either.
  const etag = `"${cursorOf(privateCapsule).slice(7)}"`;
  assert.equal((await get(capsulePath(owner.agentId), { "if-none-match": etag })).status, 404);
  assert.equal((await get(headPath(owner.agentId), {}, "HEAD")).status, 404);
});

test("the owner reads every document with a signature; answers are private, no-store", async () => {
  for (const [name, path] of Object.entries(docs(owner.agentId))) {
    const r = await signedGet(owner, path);
    assert.equal(r.status, 200, `${name}: ${r.text}`);
    assert.equal(r.headers.get("cache-control"), "private, no-store", name);
  }
  const c = await signedGet(owner, capsulePath(owner.agentId));
  assert.equal(`sha256:${sha256hex(Buffer.from(c.text))}`, cursorOf(privateCapsule));
  assert.deepEqual(c.json.access_control, privateAccess());
  // A signed conditional read still gets its 304, also private.
  const etag = c.headers.get("etag");
  const nm = await get(capsulePath(owner.agentId), { ...signedHeaders(owner, "GET", capsulePath(owner.agentId)), "if-none-match": etag });
  assert.equal(nm.status, 304);
  assert.equal(nm.headers.get("cache-control"), "private, no-store");
});

test("granted readers read what their scope covers, until their grant expires; strangers get the 404", async () => {
  const d = docs(owner.agentId);
  for (const path of Object.values(d)) {
    assert.equal((await signedGet(all, path)).status, 200, `bare id: ${path}`);
  }
  assert.equal((await signedGet(headOnly, d.head)).status, 200);
  for (const path of [d.capsule, d.history, d.verify, d.export]) {
    const r = await signedGet(headOnly, path);
    assert.equal(r.status, 404, `head-only: ${path}`);
    assert.equal(r.json.error, "capsule_not_found");
  }
  assert.equal((await signedGet(expired, d.capsule)).status, 404, "expired grant");
  const s = await signedGet(stranger, d.capsule);
  assert.equal(s.status, 404);
  assert.equal(s.text, (await signedGet(stranger, capsulePath(nobody.agentId))).text, "same as never published");
});

test("replayed, stale, future, re-targeted and forged signatures are refused with 401 whatever they read", async () => {
  const path = capsulePath(owner.agentId);
  const h = signedHeaders(owner, "GET", path);
  assert.equal((await get(path, h)).status, 200);
  const replay = await get(path, h);
  assert.equal(replay.status, 401);
  assert.deepEqual(replay.json.reason_codes ?? [replay.json.error], ["read_signature_replayed"]);
  const now = Math.floor(Date.now() / 1000);
  for (const [created, code] of [[now - 301, "read_signature_expired"], [now + 60, "read_signature_expired"]]) {
    const r = await signedGet(owner, path, { created });
    assert.equal(r.status, 401, String(created));
    assert.equal(r.json.error, code);
  }
  // Made for head.json, sent to capsule.json.
  const other = await get(path, signedHeaders(owner, "GET", headPath(owner.agentId)));
  assert.equal(other.status, 401);
  assert.equal(other.json.error, "read_signature_invalid");
  // A stranger's signature claiming the owner's keyid (with the owner's public key).
  const forged = signedHeaders(stranger, "GET", path, { keyid: owner.agentId });
  forged["self-public-key"] = owner.publicHex;
  assert.equal((await get(path, forged)).json.error, "read_signature_invalid");
  // Missing Self-Public-Key.
  const noKey = signedHeaders(owner, "GET", path);
  delete noKey["self-public-key"];
  assert.equal((await get(path, noKey)).json.error, "read_signature_invalid");
  // The answer to a bad signature does not depend on what it reads.
  const bad = await get(capsulePath(nobody.agentId), signedHeaders(owner, "GET", headPath(owner.agentId)));
  assert.equal(bad.status, 401);
  assert.equal(bad.json.error, "read_signature_invalid");
});

test("switching public and private is an ordinary write and takes effect for reads at once; MCP reads follow the same rules", async () => {
  const r = await publish(w, owner, 2, capsuleWith({ public: true }, "Open now."));
  assert.equal(r.status, 200, r.text);
  const open = await get(capsulePath(owner.agentId));
  assert.equal(open.status, 200);
  assert.equal(open.json.self_motto, "Open now.");
  assert.equal(open.headers.get("cache-control"), "public, max-age=60, must-revalidate");
  const back = await publish(w, owner, 3, capsuleWith(privateAccess(), "Closed again."));
  assert.equal(back.status, 200, back.text);
  assert.equal((await get(capsulePath(owner.agentId))).status, 404);
  assert.equal((await get(`/self/${owner.agentId}/history.json`)).status, 404, "older public versions hide too");

  // The remote MCP door: unsigned → the same not-found tool error; signed by the owner → the capsule.
  const call = (headers = {}) =>
    w.fetch("/mcp", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "self_read", arguments: { agent_id: owner.agentId } } }),
    });
  const anon = await call();
  assert.equal(anon.status, 200);
  assert.equal(anon.json.result.isError, true);
  assert.equal(JSON.parse(anon.json.result.content[0].text).error, "capsule_not_found");
  const mine = await call(signedHeaders(owner, "POST", "/mcp"));
  assert.equal(mine.json.result.isError, false, mine.text);
  assert.equal(JSON.parse(mine.json.result.content[0].text).capsule.self_motto, "Closed again.");
  const stale = await call(signedHeaders(owner, "POST", "/mcp", { created: Math.floor(Date.now() / 1000) - 400 }));
  assert.equal(stale.status, 200, "a tool error, not an HTTP 401 (which MCP clients read as 'log in')");
  assert.equal(JSON.parse(stale.json.result.content[0].text).error, "read_signature_expired");
});

/** A forged signed read by a weak key `pk` (32 bytes): R = the identity point, S = 0. */
function weakKeyHeaders(pk, path, nonce) {
  const keyid = sha256hex(pk);
  const created = Math.floor(Date.now() / 1000);
  const forged = Buffer.alloc(64);
  forged[0] = 1;
  return {
    keyid,
    headers: {
      "signature-input": `sig1=("@method" "@target-uri");created=${created};keyid="${keyid}";nonce="${nonce}";alg="ed25519"`,
      signature: `sig1=:${forged.toString("base64")}:`,
      "self-public-key": pk.toString("hex"),
    },
  };
}

test("weak and non-canonically encoded reader keys never pass a signed read, even when the capsule lists them", async () => {
  const identity = Buffer.alloc(32);
  identity[0] = 1;
  const yPlusP = Buffer.alloc(32, 0xff);
  yPlusP[0] = 0xee;
  yPlusP[31] = 0x7f;
  const signedZero = Buffer.from(identity);
  signedZero[31] = 0x80;
  const order2 = Buffer.alloc(32, 0xff);
  order2[0] = 0xec;
  order2[31] = 0x7f;
  const weak = { identity, "identity as y = 1 + p": yPlusP, "identity with the sign bit": signedZero, "order 2": order2 };
  const lister = newAgent();
  const capsule = exampleCapsule(lister.agentId, {
    access_control: { public: false, authorized_readers: Object.values(weak).map((pk) => sha256hex(pk)) },
  });
  assert.equal((await publish(w, lister, 1, capsule)).status, 200);
  const path = capsulePath(lister.agentId);
  for (const [name, pk] of Object.entries(weak)) {
    // The order-2 forgery verifies under a loose check for about half of all nonces: try several.
    for (let i = 0; i < 12; i++) {
      const { headers } = weakKeyHeaders(pk, path, `weak-${i}-${crypto.randomBytes(6).toString("hex")}`);
      const r = await get(path, headers);
      assert.equal(r.status, 401, `${name} #${i}: ${r.status} ${r.text}`);
      assert.equal(r.json.error, "read_signature_invalid", name);
      assert.ok(!r.text.includes("self_capsule_v0"), "no capsule bytes");
    }
  }
  // The remote MCP door checks the same key the same way.
  const { headers } = weakKeyHeaders(identity, "/mcp", `weak-mcp-${crypto.randomBytes(6).toString("hex")}`);
  const mcp = await w.fetch("/mcp", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "self_read", arguments: { agent_id: lister.agentId } } }),
  });
  assert.equal(JSON.parse(mcp.json.result.content[0].text).error, "read_signature_invalid");
});

test("grants with a numeric offset or any fraction grant until their instant", async () => {
  const o = newAgent();
  const py = newAgent(); // Python's isoformat(): microseconds and +00:00
  const west = newAgent(); // -07:00
  const india = newAgent(); // +05:30, nanoseconds
  const lapsed = newAgent(); // an offset spelling of a past instant
  const at = (ms, offsetMin, frac) => {
    const local = new Date(ms + offsetMin * 60_000).toISOString().slice(0, 19);
    const sign = offsetMin < 0 ? "-" : "+";
    const off = Math.abs(offsetMin);
    return `${local}${frac}${sign}${String(Math.floor(off / 60)).padStart(2, "0")}:${String(off % 60).padStart(2, "0")}`;
  };
  const soon = Date.now() + 3600_000;
  const grants = [
    { agent_id: py.agentId, scopes: ["READ_CAPSULE"], expires_at: at(soon, 0, ".185043") },
    { agent_id: west.agentId, scopes: ["READ_CAPSULE"], expires_at: at(soon, -420, "") },
    { agent_id: india.agentId, scopes: ["READ_CAPSULE"], expires_at: at(soon, 330, ".123456789") },
    { agent_id: lapsed.agentId, scopes: ["READ_CAPSULE"], expires_at: at(Date.now() - 60_000, 330, ".5") },
  ];
  const r = await publish(w, o, 1, exampleCapsule(o.agentId, { access_control: { public: false, authorized_readers: grants } }));
  assert.equal(r.status, 200, r.text);
  const path = capsulePath(o.agentId);
  for (const reader of [py, west, india]) {
    const g = await signedGet(reader, path);
    assert.equal(g.status, 200, `${g.status} ${g.text}`);
  }
  assert.equal((await signedGet(lapsed, path)).status, 404, "an expired grant in an offset spelling has expired");
});

test("a version written private stays private when the capsule goes public: withheld on every history path, for whoever it did not grant", async () => {
  const o = newAgent();
  const reader = newAgent(); // granted READ_HISTORY by version 1 only
  const mottos = ["First, private: for the reader.", "Second, private: nobody else.", "Third, public."];
  const caps = [
    exampleCapsule(o.agentId, { self_motto: mottos[0], access_control: { public: false, authorized_readers: [{ agent_id: reader.agentId, scopes: ["READ_HISTORY"] }] } }),
    exampleCapsule(o.agentId, { self_motto: mottos[1], access_control: { public: false } }),
    exampleCapsule(o.agentId, { self_motto: mottos[2] }),
  ];
  for (let i = 0; i < 3; i++) assert.equal((await publish(w, o, i + 1, caps[i])).status, 200);
  const id = o.agentId;
  const hist = `/self/${id}/history.json`;
  const leaks = (text) => [mottos[0], mottos[1], cursorOf(caps[0])].filter((x) => text.includes(x));

  // Unsigned, and under /api/v1 too: the public version whole, the private ones withheld.
  for (const path of [hist, `/api/v1/self/${id}/history.json`]) {
    const h = await get(path);
    assert.equal(h.status, 200, h.text);
    assert.deepEqual(leaks(h.text), [], path);
    assert.deepEqual(h.json.versions.map((v) => (v.withheld ? `withheld ${v.sequence}` : v.capsule.self_motto)), [
      mottos[2],
      "withheld 1",
      "withheld 0",
    ]);
    const w1 = h.json.versions[1];
    assert.deepEqual(Object.keys(w1).sort(), ["hash", "previous_hash", "sequence", "service_signature", "signed_by", "withheld"]);
    assert.equal(h.json.versions[0].previous_hash, w1.hash, "the chain links through the withheld version");
  }
  // The export withholds them too; snapshots of them are the never-published 404, conditional or not.
  const ex = await get(`/self/${id}/export.json`);
  assert.equal(ex.status, 200);
  assert.deepEqual(leaks(ex.text), []);
  assert.deepEqual(ex.json.entries.map((e) => Boolean(e.withheld)), [true, true, false]);
  const never = await get(`/self/${id}/snapshot/${"f".repeat(64)}.json`);
  for (const c of [caps[0], caps[1]]) {
    const hex = cursorOf(c).slice(7);
    for (const headers of [{}, { "if-none-match": `"${ex.json.entries[caps.indexOf(c)].hash}"` }]) {
      const s = await get(`/self/${id}/snapshot/${hex}.json`, headers);
      assert.equal(s.status, 404, JSON.stringify(headers));
      assert.equal(s.text, never.text);
    }
  }
  assert.equal((await get(`/self/${id}/snapshot/${cursorOf(caps[2]).slice(7)}.json`)).status, 200);
  // A cursor only a private version had: as unknown as one never published.
  assert.equal((await get(`${hist}?since=${cursorOf(caps[0])}`)).status, 410);
  // The MCP door withholds them the same way.
  const mcp = await w.fetch("/mcp", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "self_history", arguments: { agent_id: id } } }),
  });
  const tool = JSON.parse(mcp.json.result.content[0].text);
  assert.deepEqual(tool.versions, [tool.versions[0], { sequence: 1, withheld: true }, { sequence: 0, withheld: true }]);
  assert.deepEqual(leaks(mcp.text), []);

  // The reader its own grant named sees version 1, not version 2; the owner sees everything.
  const mine = await signedGet(reader, hist);
  assert.deepEqual(mine.json.versions.map((v) => (v.withheld ? "withheld" : v.capsule.self_motto)), [mottos[2], "withheld", mottos[0]]);
  assert.equal((await signedGet(reader, `/self/${id}/snapshot/${cursorOf(caps[0]).slice(7)}.json`)).status, 200);
  const owned = await signedGet(o, hist);
  assert.deepEqual(owned.json.versions.map((v) => v.capsule.self_motto), [mottos[2], mottos[1], mottos[0]]);
  const ownExport = await signedGet(o, `/self/${id}/export.json`);
  assert.ok(ownExport.json.entries.every((e) => e.canonical), "nothing withheld from the owner");

  // Offline, the CLI verifies the unsigned export: valid, the two reported withheld, not failed.
  const { mkdtempSync, writeFileSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const { execFile } = await import("node:child_process");
  const { SELFCAP_BIN, requireSelfcap } = await import("./cli-helpers.mjs");
  requireSelfcap();
  const dir = mkdtempSync(join(tmpdir(), "selfcap-withheld-"));
  try {
    const file = join(dir, "export.json");
    writeFileSync(file, ex.text);
    const keys = join(dir, "keys.json");
    writeFileSync(keys, (await get("/api/v1/self/keys")).text);
    const run = (args) =>
      new Promise((resolve) => execFile(SELFCAP_BIN, args, { env: { ...process.env, HOME: dir } }, (e, stdout, stderr) => resolve({ code: e ? e.code : 0, stdout, stderr })));
    const text = await run(["verify", "--export", file, "--keys", keys]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^valid: /);
    assert.match(text.stdout, /withheld\s+entries 0, 1/);
    const report = JSON.parse((await run(["verify", "--export", file, "--keys", keys, "--json"])).stdout);
    assert.equal(report.valid, true);
    assert.equal(report.level, "auth");
    assert.deepEqual(report.withheld, [0, 1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("verify.json and self_verify: a reader granted READ_VERIFY alone gets the report, which withholds the versions it may not see", async () => {
  const o = newAgent();
  const verifier = newAgent(); // READ_VERIFY only, by the current version
  const historian = newAgent(); // READ_HISTORY by version 0 only
  const mottos = ["Zero, private: for the historian.", "One, public.", "Two, private: verify only."];
  const caps = [
    exampleCapsule(o.agentId, { self_motto: mottos[0], access_control: { public: false, authorized_readers: [{ agent_id: historian.agentId, scopes: ["READ_HISTORY"] }] } }),
    exampleCapsule(o.agentId, { self_motto: mottos[1] }),
    exampleCapsule(o.agentId, {
      self_motto: mottos[2],
      access_control: { public: false, authorized_readers: [{ agent_id: verifier.agentId, scopes: ["READ_VERIFY"] }, historian.agentId] },
    }),
  ];
  for (let i = 0; i < 3; i++) assert.equal((await publish(w, o, i + 1, caps[i])).status, 200);
  const id = o.agentId;
  const verifyPath = `/self/${id}/verify.json`;
  const leaks = (text) => [mottos[0], mottos[2], cursorOf(caps[0])].filter((x) => text.includes(x));

  // The owner's report: nothing withheld.
  const own = await signedGet(o, verifyPath);
  assert.equal(own.status, 200, own.text);
  assert.equal(own.json.withheld, undefined);
  assert.equal(own.json.level, "auth");
  assert.equal(own.json.checks.schema.checked, 3);

  // The verifier: admitted by READ_VERIFY, under both prefixes, GET and HEAD,
  // and a signed conditional read gets its 304.
  for (const path of [verifyPath, `/api/v1/self/${id}/verify.json`]) {
    const r = await signedGet(verifier, path);
    assert.equal(r.status, 200, `${path}: ${r.text}`);
    assert.equal(r.headers.get("cache-control"), "private, no-store");
    assert.equal(r.json.valid, true);
    assert.equal(r.json.level, "auth");
    // Version 0 was written private for the historian only: withheld from
    // the verifier; version 1 (public) and version 2 (its grant) are not.
    assert.deepEqual(r.json.withheld, [0]);
    assert.equal(r.json.checks.schema.checked, 2);
    assert.equal(r.json.cursor, cursorOf(caps[2]), "the version its grant is for");
    assert.deepEqual(leaks(r.text.replace(cursorOf(caps[2]), "")), []);
    assert.ok(r.json.warnings.some((x) => /withheld from this reader/.test(x)));
    const head = await get(path, signedHeaders(verifier, "HEAD", path), "HEAD");
    assert.equal(head.status, 200);
    const nm = await get(path, { ...signedHeaders(verifier, "GET", path), "if-none-match": r.headers.get("etag") });
    assert.equal(nm.status, 304);
  }
  // READ_VERIFY opens the report, not the history.
  assert.equal((await signedGet(verifier, `/self/${id}/history.json`)).status, 404);
  // The historian (every scope now, READ_HISTORY on version 0) sees all three.
  const hist = await signedGet(historian, verifyPath);
  assert.equal(hist.status, 200, hist.text);
  assert.equal(hist.json.withheld, undefined);
  // Strangers and the unsigned get the never-published miss.
  const nobody = newAgent();
  const miss = await get(`/self/${nobody.agentId}/verify.json`);
  assert.equal((await get(verifyPath)).text, miss.text);
  assert.equal((await signedGet(stranger, verifyPath)).text, miss.text);

  // The MCP door's self_verify answers the same report to the same reader.
  const call = (headers) =>
    w.fetch("/mcp", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "self_verify", arguments: { agent_id: id } } }),
    });
  const mcp = await call(signedHeaders(verifier, "POST", "/mcp"));
  assert.equal(mcp.status, 200, mcp.text);
  assert.equal(mcp.json.result.isError, false, mcp.text);
  const tool = JSON.parse(mcp.json.result.content[0].text);
  assert.equal(tool.valid, true);
  assert.deepEqual(leaks(mcp.text.replaceAll(cursorOf(caps[2]), "")), []);
  const refused = await call({});
  assert.equal(refused.json.result.isError, true);
  assert.equal(JSON.parse(refused.json.result.content[0].text).error, "capsule_not_found");

  // Going public: the unsigned now get a report with the two private versions withheld.
  assert.equal((await publish(w, o, 4, exampleCapsule(o.agentId, { self_motto: "Three, public." }))).status, 200);
  const pub = await get(verifyPath);
  assert.equal(pub.status, 200, pub.text);
  assert.deepEqual(pub.json.withheld, [0, 2]);
  assert.equal(pub.json.valid, true);
  assert.deepEqual(leaks(pub.text), []);
});
