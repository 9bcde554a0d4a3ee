// Push on change (docs/PROTOCOL.md §13) in workerd: the WebSocket
// watch held by the agent's Durable Object (hibernation API) and the
// long-poll of head.json. Sockets are opened through Miniflare's
// dispatchFetch (a real upgrade into the runtime), so each watcher can come
// from its own client address.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, BASE } from "./harness.mjs";
import { openSocket } from "./socket-helpers.mjs";
import { newAgent, exampleCapsule, publish, headPath, signedReadHeaders } from "./helpers.mjs";

let w;
before(async () => {
  w = await startWorker({ vars: { FREE_WRITES_PER_24H: "100", FREE_NEW_AGENTS_PER_IP_24H: "1000" } });
});
after(async () => {
  await w?.close();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const watchPath = (id) => `/self/${id}/watch`;

/** Opens a watch of `agentId` (see `openSocket`). */
const watch = (agentId, opts) => openSocket(w, watchPath(agentId), opts);

const publishAt = (agent, seq, motto) => publish(w, agent, seq, exampleCapsule(agent.agentId, { self_motto: motto }));

test("a watcher gets the current head at once, then every commit's head in order", async () => {
  const a = newAgent();
  assert.equal((await publishAt(a, 1, "First.")).status, 200);
  const watcher = await watch(a.agentId);
  const first = await watcher.next();
  const head = (await w.fetch(headPath(a.agentId))).json;
  // The same JSON as head.json (generated_at is the time of each answer).
  delete first.generated_at;
  delete head.generated_at;
  assert.deepEqual(first, head);

  const accepted = [];
  for (let seq = 2; seq <= 4; seq++) {
    const r = await publishAt(a, seq, `Version ${seq}.`);
    assert.equal(r.status, 200, r.text);
    accepted.push(r.json);
  }
  for (const want of accepted) {
    const got = await watcher.next();
    assert.ok(got, `no frame for seq ${want.seq}`);
    assert.equal(got.seq, want.seq);
    assert.equal(got.cursor, want.cursor);
    assert.equal(got.prev_cursor, want.prev_cursor);
    // Sent once KV has the record: capsule.json already serves this cursor.
  }
  const capsule = await w.fetch(`/self/${a.agentId}/capsule.json`);
  assert.equal(capsule.headers.get("etag"), `"${accepted.at(-1).cursor.slice(7)}"`);
  // Rejected writes send nothing.
  assert.equal((await publishAt(a, 4, "Replay.")).status, 409);
  assert.equal(await watcher.nextText(500), null);
  watcher.ws.close(1000, "done");
  assert.equal((await watcher.closed).code, 1000);
});

test("an agent with no capsule yet: nothing until the first commit, which arrives as the first head", async () => {
  const a = newAgent();
  const watcher = await watch(a.agentId);
  assert.equal(await watcher.nextText(500), null);
  const r = await publishAt(a, 1, "Born.");
  assert.equal(r.status, 200);
  const first = await watcher.next();
  assert.equal(first.seq, 1);
  assert.equal(first.cursor, r.json.cursor);
  assert.equal(first.prev_cursor, null);
  watcher.ws.close();
});

test("many watchers from many addresses all get each head; past the per-address cap a watcher is closed with 4429", async () => {
  const a = newAgent();
  assert.equal((await publishAt(a, 1, "Crowd.")).status, 200);
  const watchers = [];
  for (let i = 0; i < 60; i++) watchers.push(await watch(a.agentId, { ip: `198.51.100.${10 + (i % 3)}` }));
  for (const x of watchers) assert.equal((await x.next()).seq, 1);
  const r = await publishAt(a, 2, "Crowd grows.");
  for (const x of watchers) {
    const got = await x.next();
    assert.equal(got.cursor, r.json.cursor);
  }
  // 20 per address per agent: the three addresses above hold 20 each.
  const over = await watch(a.agentId, { ip: "198.51.100.10" });
  const { code, reason } = await over.closed;
  assert.equal(code, 4429);
  assert.match(reason, /from this address/);
  assert.equal(over.frames.length, 0);
  // Another address is still welcome, and a closed watcher frees its place.
  const other = await watch(a.agentId, { ip: "198.51.100.99" });
  assert.equal((await other.next()).seq, 2);
  watchers[0].ws.close(1000);
  await watchers[0].closed;
  await sleep(100);
  const again = await watch(a.agentId, { ip: "198.51.100.10" });
  assert.equal((await again.next()).seq, 2);
  for (const x of [...watchers.slice(1), other, again]) x.ws.close();
});

test("watchers may only ping: anything else closes the socket with a clear code", async () => {
  const a = newAgent();
  assert.equal((await publishAt(a, 1, "Quiet.")).status, 200);
  const pinger = await watch(a.agentId);
  await pinger.next();
  pinger.ws.send("ping");
  assert.equal(await pinger.nextText(), "pong");
  pinger.ws.close();

  const cases = [
    ["hello", 1008],
    ["x".repeat(200), 1009],
    [new Uint8Array([1, 2, 3]), 1003],
  ];
  for (const [message, want] of cases) {
    const x = await watch(a.agentId);
    await x.next();
    x.ws.send(message);
    const { code, reason } = await x.closed;
    assert.equal(code, want, `${typeof message === "string" ? message.slice(0, 10) : "binary"}`);
    assert.match(reason, /ping/);
  }
  // The agent's object is unharmed: writes and watches go on.
  const after = await watch(a.agentId);
  assert.equal((await after.next()).seq, 1);
  assert.equal((await publishAt(a, 2, "Still here.")).status, 200);
  assert.equal((await after.next()).seq, 2);
  after.ws.close();
});

test("a watch must be a WebSocket GET of a valid agent id", async () => {
  const a = newAgent();
  const plain = await w.fetch(watchPath(a.agentId));
  assert.equal(plain.status, 426);
  assert.equal(plain.json.error, "websocket_required");
  for (const method of ["HEAD", "PUT", "POST", "DELETE"]) {
    const r = await w.fetch(watchPath(a.agentId), { method });
    assert.equal(r.status, 405, method);
    assert.equal(r.headers.get("allow"), "GET, OPTIONS");
  }
  const bad = await w.fetch("/self/not-an-agent/watch", { headers: { Upgrade: "websocket" } });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error, "bad_agent_id");
  const pre = await w.fetch(watchPath(a.agentId), { method: "OPTIONS" });
  assert.equal(pre.status, 204);
});

test("a private capsule's watch follows head.json: unsigned watchers see nothing; one that saw it go private is closed 4404", async () => {
  const owner = newAgent();
  assert.equal((await publishAt(owner, 1, "Open for now.")).status, 200);
  const early = await watch(owner.agentId);
  assert.equal((await early.next()).seq, 1);
  const privateCapsule = exampleCapsule(owner.agentId, {
    self_motto: "Closed.",
    access_control: { public: false, authorized_readers: [] },
  });
  assert.equal((await publish(w, owner, 2, privateCapsule)).status, 200);
  const { code, reason } = await early.closed;
  assert.equal(code, 4404);
  assert.equal(reason, "capsule_not_found");

  // A new unsigned watcher is treated exactly like one of an agent with no
  // capsule: accepted, told nothing, even across commits.
  const late = await watch(owner.agentId);
  assert.equal(await late.nextText(400), null);
  assert.equal((await publish(w, owner, 3, { ...privateCapsule, self_motto: "Still closed." })).status, 200);
  assert.equal(await late.nextText(400), null);
  late.ws.close();

  // The owner, signing the upgrade like any read, is sent its head.
  const url = BASE + watchPath(owner.agentId);
  const mine = await watch(owner.agentId, { headers: signedReadHeaders(owner, "GET", url) });
  assert.equal((await mine.next()).seq, 3);
  mine.ws.close();
});

test("hibernation: the object is evicted and woken with its watcher still attached", { timeout: 60_000 }, async () => {
  const a = newAgent();
  assert.equal((await publishAt(a, 1, "Before the nap.")).status, 200);
  const watcher = await watch(a.agentId);
  assert.equal((await watcher.next()).seq, 1);
  // Pings are answered by the runtime without waking (or keeping awake) the
  // object; workerd evicts an object 10 s after its last request.
  const started = () => w.logs.filter(({ message }) => message.includes('"event":"agent_object_started"')).length;
  const before = started();
  for (let i = 0; i < 4; i++) {
    await sleep(3000);
    watcher.ws.send("ping");
    assert.equal(await watcher.nextText(), "pong");
  }
  await sleep(1000);
  const r = await publishAt(a, 2, "After the nap.");
  assert.equal(r.status, 200);
  const got = await watcher.next();
  assert.equal(got.cursor, r.json.cursor);
  // The write woke a fresh instance of the object, which found the watcher.
  const deadline = Date.now() + 2000;
  while (started() === before && Date.now() < deadline) await sleep(20);
  const woke = w.logs
    .slice()
    .reverse()
    .map(({ message }) => message)
    .find((m) => m.includes('"event":"agent_object_started"'));
  assert.ok(started() > before, "the object was constructed again");
  assert.match(woke, /"watchers":"1"/);
  watcher.ws.close();
});

test("long-poll: head.json?wait=N answers 304 after N seconds, 200 at once on a commit, 404 while there is no capsule", async () => {
  const a = newAgent();
  const first = await publishAt(a, 1, "Poll me.");
  const etag = `"${first.json.cursor.slice(7)}"`;

  // Nothing new: held for the whole wait, then 304.
  let t = Date.now();
  const idle = await w.fetch(`${headPath(a.agentId)}?wait=2`, { headers: { "if-none-match": etag } });
  const idleMs = Date.now() - t;
  assert.equal(idle.status, 304);
  assert.equal(idle.headers.get("etag"), etag);
  assert.ok(idleMs >= 1900 && idleMs < 6000, `held ${idleMs} ms`);

  // A commit during the wait: answered with the new head right then.
  t = Date.now();
  const held = w.fetch(`${headPath(a.agentId)}?wait=20`, { headers: { "if-none-match": etag } });
  await sleep(500);
  const second = await publishAt(a, 2, "Changed.");
  const woke = await held;
  const wokeMs = Date.now() - t;
  assert.equal(woke.status, 200, woke.text);
  assert.equal(woke.json.cursor, second.json.cursor);
  assert.equal(woke.headers.get("etag"), `"${second.json.cursor.slice(7)}"`);
  assert.match(woke.headers.get("cache-control"), /no-store/);
  assert.ok(wokeMs < 5000, `answered after ${wokeMs} ms`);

  // A commit that leaves the cursor where the client holds it (the same
  // capsule republished) does not end the wait.
  const secondEtag = `"${second.json.cursor.slice(7)}"`;
  t = Date.now();
  const same = w.fetch(`${headPath(a.agentId)}?wait=2`, { headers: { "if-none-match": secondEtag } });
  await sleep(300);
  const republished = await publishAt(a, 3, "Changed.");
  assert.equal(republished.status, 200);
  assert.equal(republished.json.changed, false);
  const sameAnswer = await same;
  assert.equal(sameAnswer.status, 304);
  assert.ok(Date.now() - t >= 1900, `ended after ${Date.now() - t} ms`);

  // Already behind: answered at once, from KV, like a plain read.
  t = Date.now();
  const behind = await w.fetch(`${headPath(a.agentId)}?wait=20`, { headers: { "if-none-match": etag } });
  assert.equal(behind.status, 200);
  assert.equal(behind.json.cursor, second.json.cursor);
  assert.ok(Date.now() - t < 2000);

  // No capsule yet: 404 after the wait, or the first head when it comes.
  const b = newAgent();
  t = Date.now();
  const none = await w.fetch(`${headPath(b.agentId)}?wait=1`);
  assert.equal(none.status, 404);
  assert.equal(none.json.error, "capsule_not_found");
  assert.ok(Date.now() - t >= 900);
  const born = w.fetch(`${headPath(b.agentId)}?wait=20`);
  await sleep(300);
  const firstOfB = await publishAt(b, 1, "Hello.");
  const got = await born;
  assert.equal(got.status, 200);
  assert.equal(got.json.cursor, firstOfB.json.cursor);
});

test("long-poll: a bad wait is a 400 bad_query; wait=0 or absent is a plain read", async () => {
  const a = newAgent();
  const first = await publishAt(a, 1, "Plain.");
  const etag = `"${first.json.cursor.slice(7)}"`;
  for (const bad of ["31", "-1", "1.5", "x", ""]) {
    const r = await w.fetch(`${headPath(a.agentId)}?wait=${bad}`);
    assert.equal(r.status, 400, bad);
    assert.equal(r.json.error, "bad_query");
  }
  const twice = await w.fetch(`${headPath(a.agentId)}?wait=1&wait=2`);
  assert.equal(twice.status, 400);
  const t = Date.now();
  const zero = await w.fetch(`${headPath(a.agentId)}?wait=0`, { headers: { "if-none-match": etag } });
  assert.equal(zero.status, 304);
  assert.ok(Date.now() - t < 1500);
  // capsule.json has no long-poll: the parameter is ignored there.
  const c = await w.fetch(`/self/${a.agentId}/capsule.json?wait=5`, { headers: { "if-none-match": etag } });
  assert.equal(c.status, 304);
});

/**
 * One raw HTTP/1.1 exchange with the Worker's socket (Node's fetch refuses
 * an Upgrade header): the status line, headers and body of the answer.
 */
async function rawExchange(method, path, extraHeaders = {}, body = null) {
  const url = await w.mf.ready;
  const { connect } = await import("node:net");
  return new Promise((resolve, reject) => {
    const lines = [`${method} ${path} HTTP/1.1`, `Host: ${url.host}`, "Connection: close"];
    for (const [k, v] of Object.entries(extraHeaders)) lines.push(`${k}: ${v}`);
    if (body !== null) lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
    const s = connect(Number(url.port), url.hostname, () => s.write(lines.join("\r\n") + "\r\n\r\n" + (body ?? "")));
    let data = "";
    s.on("data", (d) => (data += d.toString("latin1")));
    s.on("error", reject);
    const done = () => {
      const [head, ...rest] = data.split("\r\n\r\n");
      const [statusLine, ...hs] = head.split("\r\n");
      const headers = Object.fromEntries(hs.map((h) => [h.slice(0, h.indexOf(":")).toLowerCase(), h.slice(h.indexOf(":") + 1).trim()]));
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body: rest.join("\r\n\r\n") });
    };
    s.on("end", done);
    setTimeout(() => (s.destroy(), done()), 3000);
  });
}

test("a WebSocket upgrade by another method is a JSON 405 (or 426 without a handshake), and a preflight with it a 204, not the runtime's 500", async () => {
  const a = newAgent();
  const upgrade = { Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13" };
  // Node's http client (and most others) frame a POST/PUT/PATCH body with Content-Length or chunked.
  for (const method of ["POST", "PUT", "PATCH"]) {
    for (const [framing, body, extra] of [["content-length", "{}", {}], ["chunked", null, { "Transfer-Encoding": "chunked" }]]) {
      const r = await rawExchange(method, watchPath(a.agentId), { ...upgrade, ...extra }, framing === "chunked" ? "0\r\n\r\n" : body);
      assert.equal(r.status, 405, `${method} (${framing}): ${r.status} ${r.body}`);
      assert.equal(JSON.parse(r.body).error, "method_not_allowed");
      assert.equal(r.headers["allow"], "GET, OPTIONS");
      assert.equal(r.headers["access-control-allow-origin"], "*");
    }
  }
  const pre = await rawExchange("OPTIONS", watchPath(a.agentId), { ...upgrade, Origin: "https://app.example", "Access-Control-Request-Method": "GET" });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers["access-control-allow-methods"], "GET, OPTIONS");
  // An upgrade without a complete opening handshake (no Sec-WebSocket-Key /
  // Version), by any method: the service's JSON 426, not the runtime's plain 400 or 500.
  for (const method of ["GET", "DELETE", "HEAD", "PUT"]) {
    const r = await rawExchange(method, watchPath(a.agentId), { Upgrade: "websocket", Connection: "Upgrade" });
    assert.ok([426, 405].includes(r.status), `${method}: ${r.status} ${r.body}`);
    assert.match(r.headers["content-type"], /^application\/json/, method);
    assert.equal(r.headers["access-control-allow-origin"], "*", method);
    if (method !== "HEAD") assert.ok(["websocket_required", "method_not_allowed"].includes(JSON.parse(r.body).error), method);
  }
  // The real handshake is still a 101.
  const ok = await rawExchange("GET", watchPath(a.agentId), upgrade);
  assert.equal(ok.status, 101);
});

test("a watcher whose access a write takes away is sent its 4404 close frame with that write", async () => {
  const owner = newAgent();
  assert.equal((await publishAt(owner, 1, "Open.")).status, 200);
  const url = await w.mf.ready;
  const { connect } = await import("node:net");
  const s = connect(Number(url.port), url.hostname, () =>
    s.write(`GET ${watchPath(owner.agentId)} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`),
  );
  let buf = Buffer.alloc(0);
  let closeAt = null;
  let closeCode = null;
  s.on("data", (d) => {
    buf = Buffer.concat([buf, d]);
    const i = buf.indexOf(Buffer.from([0x88]));
    if (closeAt === null && i >= 0 && buf.length >= i + 4) {
      closeAt = Date.now();
      closeCode = buf.readUInt16BE(i + 2);
    }
  });
  while (!buf.includes("agent_id")) await sleep(10);
  const written = Date.now();
  const r = await publish(w, owner, 2, exampleCapsule(owner.agentId, { self_motto: "Closed.", access_control: { public: false } }));
  assert.equal(r.status, 200);
  const deadline = Date.now() + 2000;
  while (closeAt === null && Date.now() < deadline) await sleep(10);
  s.destroy();
  assert.equal(closeCode, 4404, "the close frame arrived with the commit");
  assert.ok(closeAt - written < 2000, `close frame ${closeAt - written} ms after the write`);
});

test("long-poll: a poll held by a reader whose access a write takes away ends with that write, as head.json answers it", async () => {
  const owner = newAgent();
  const reader = newAgent();
  const grant = (readers) => exampleCapsule(owner.agentId, { access_control: { public: false, authorized_readers: readers } });
  assert.equal((await publishAt(owner, 1, "Open.")).status, 200);
  // An anonymous poll held on a public head; the capsule goes private.
  const etag = (await w.fetch(headPath(owner.agentId))).headers.get("etag");
  const started = Date.now();
  const held = w.fetch(`${headPath(owner.agentId)}?wait=20`, { headers: { "if-none-match": etag } });
  await sleep(300);
  assert.equal((await publish(w, owner, 2, grant([reader.agentId]))).status, 200);
  const ended = await held;
  assert.equal(ended.status, 404, "not a 304 with the old ETag");
  assert.equal(ended.json.error, "capsule_not_found");
  assert.ok(Date.now() - started < 5000, `ended ${Date.now() - started} ms after the poll began`);
  // A granted reader's signed poll, ended by the write that revokes its grant.
  const url = BASE + `${headPath(owner.agentId)}?wait=20`;
  const mine = await w.fetch(headPath(owner.agentId), { headers: signedReadHeaders(reader, "GET", BASE + headPath(owner.agentId)) });
  assert.equal(mine.status, 200);
  const t1 = Date.now();
  const signedHeld = w.fetch(`${headPath(owner.agentId)}?wait=20`, {
    headers: { ...signedReadHeaders(reader, "GET", url), "if-none-match": mine.headers.get("etag") },
  });
  await sleep(300);
  assert.equal((await publish(w, owner, 3, grant([]))).status, 200);
  const revoked = await signedHeld;
  assert.equal(revoked.status, 404);
  assert.equal(revoked.json.error, "capsule_not_found");
  assert.ok(Date.now() - t1 < 5000);
});
