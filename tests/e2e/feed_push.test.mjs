// Push of projected watch feeds (docs/PROTOCOL.md §15) in workerd: the
// WebSocket `GET /api/v1/watch/socket?agent_id=` and the long-poll
// `head?wait=N`, held by the feed objects, sent a head only when that
// agent's own projection moves (a world refresh that moves one of its
// sources, or its own commit), against the ddv1 fixture feed on loopback and
// Pro agents credited through the real upgrade path on a local chain. Also
// the location's copy of the projected head: "no KV read" is shown by
// breaking KV behind the Worker's back (a record or pointer that no longer
// parses makes any KV read fail), so a 200 can only come from the copy.
// Expected cursors are computed here from the fixture files and the spec's
// formula, independently of the Rust core.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, BASE } from "./harness.mjs";
import { openSocket } from "./socket-helpers.mjs";
import { exampleCapsule, newAgent, publish } from "./helpers.mjs";
import { nextIp, startChain, upgradeVars } from "./upgrade-helpers.mjs";
import { startFixture } from "../../scripts/ddv1-fixture-server.mjs";
import { CRON, agentWith, expectedCursor } from "./feed-helpers.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let chain;
let fixture;
let w;

const headPath = (id) => `/api/v1/watch/head?agent_id=${id}`;
const socketPath = (id) => `/api/v1/watch/socket?agent_id=${id}`;
const recordKey = (id) => `self:capsule:${id}`;
const scheduled = async () => (await w.mf.getWorker()).scheduled({ cron: CRON });
async function toState(state) {
  await fixture.setState(state);
  await scheduled();
}

/** A new Pro agent whose capsule has `watch` (and `extra`). */
const proAgent = (watch, extra = {}) => agentWith(w, chain, watch, { extra });

/** Opens a feed socket of `agentId` (see `openSocket`). */
const socket = (agentId, { ip = "198.51.100.9", headers = {} } = {}) =>
  openSocket(w, socketPath(agentId), { ip, headers, waitMs: 5000 });

const withoutTime = (head) => {
  const { generated_at, ...rest } = head;
  return rest;
};

before(async () => {
  chain = await startChain();
  fixture = await startFixture({ port: 0, state: "v1" });
  w = await startWorker({ vars: upgradeVars(chain, { SELFCAP_WATCH_UPSTREAM: fixture.url }) });
  await scheduled();
});
after(async () => {
  await w?.close();
  await fixture?.close();
  await chain?.stop();
});

const CLOUD = ["aws_status", "gcp_status"];
let cloud; // Pro, watching the tag cloud-status
let node; // Pro, watching nodejs_releases (v1 -> v2 moves only it)

test("a feed watcher gets its projected head at once, then a frame only when its own projection moves", async () => {
  cloud = await proAgent({ tags: ["cloud-status"] });
  node = await proAgent({ sources: ["nodejs_releases"] });
  const wc = await socket(cloud.agentId);
  const wn = await socket(node.agentId);
  const c0 = await wc.next();
  const n0 = await wn.next();
  assert.deepEqual(withoutTime(c0), withoutTime((await w.fetch(headPath(cloud.agentId))).json), "a frame is the head");
  assert.equal(c0.cursor, expectedCursor("v1", CLOUD));
  assert.equal(n0.cursor, expectedCursor("v1", ["nodejs_releases"]));

  await toState("v2"); // moves nodejs_releases only
  const n1 = await wn.next();
  assert.equal(n1.cursor, expectedCursor("v2", ["nodejs_releases"]));
  assert.equal(n1.changed, true);
  assert.equal(n1.prev_cursor, n0.cursor);
  assert.equal(await wc.next(1500), null, "cloud's sources did not move: no frame");

  await toState("v3"); // moves gcp_status only
  const c1 = await wc.next();
  assert.equal(c1.cursor, expectedCursor("v3", CLOUD));
  assert.equal(c1.prev_cursor, c0.cursor);
  assert.equal(await wn.next(1500), null, "nodejs_releases did not move: no frame");

  // A refresh that moves nothing (the upstream answers 304) sends nothing.
  await scheduled();
  assert.equal(await wc.next(1000), null);
  wc.ws.close(1000);
  wn.ws.close(1000);
});

test("head?wait=N is held until the projection moves, and answers 304 when only unwatched sources moved", async () => {
  const h = await w.fetch(headPath(cloud.agentId));
  const etag = h.headers.get("etag");
  const started = Date.now();
  const held = w.fetch(`${headPath(cloud.agentId)}&wait=20`, { headers: { "if-none-match": etag } });
  await sleep(500);
  await toState("v2"); // v3 -> v2 moves gcp_status back
  const moved = await held;
  assert.equal(moved.status, 200, moved.text);
  assert.equal(moved.json.cursor, expectedCursor("v2", CLOUD));
  assert.ok(Date.now() - started < 15_000, "answered by the change, not the deadline");
  assert.match(moved.headers.get("cache-control"), /private/, "a held answer is one client's");

  const now = moved.headers.get("etag");
  const idle = w.fetch(`${headPath(cloud.agentId)}&wait=3`, { headers: { "if-none-match": now } });
  await sleep(300);
  await toState("v1"); // v2 -> v1 moves nodejs_releases only
  const r = await idle;
  assert.equal(r.status, 304, "an unwatched change does not answer the poll");
  assert.equal(r.headers.get("etag"), now);

  // A held client that is already behind is answered at once.
  const behind = await w.fetch(`${headPath(cloud.agentId)}&wait=20`, { headers: { "if-none-match": etag } });
  assert.equal(behind.status, 200);
  // wait is checked like head.json's.
  const bad = await w.fetch(`${headPath(cloud.agentId)}&wait=31`);
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error, "bad_query");
});

test("the agent's own commit moves its watchers at once: a new watch is a new frame, going private closes unsigned ones (4404)", async () => {
  const a = await proAgent({ tags: ["cloud-status"] });
  const s = await socket(a.agentId);
  const first = await s.next();
  assert.equal(first.cursor, expectedCursor("v1", CLOUD));
  const held = w.fetch(`${headPath(a.agentId)}&wait=20`, {
    headers: { "if-none-match": `"${first.cursor.slice(7)}"` },
  });
  await sleep(300);
  const r = await publish(w, a, 2, exampleCapsule(a.agentId, { watch: { sources: ["nodejs_releases"] } }), { ip: a.ip });
  assert.equal(r.status, 200, r.text);
  const frame = await s.next();
  assert.deepEqual(frame.sources_included, ["nodejs_releases"]);
  assert.equal(frame.cursor, expectedCursor("v1", ["nodejs_releases"]));
  const polled = await held;
  assert.equal(polled.status, 200, "the held poll is answered by the commit too");
  assert.equal(polled.json.cursor, frame.cursor);

  const hidden = exampleCapsule(a.agentId, {
    watch: { sources: ["nodejs_releases"] },
    access_control: { public: false, authorized_readers: [] },
  });
  assert.equal((await publish(w, a, 3, hidden, { ip: a.ip })).status, 200);
  const closed = await s.closed;
  assert.equal(closed.code, 4404);
  assert.equal(closed.reason, "capsule_not_found");
});

test("the socket's refusals are the head's, in JSON before any upgrade", async () => {
  const plain = await w.fetch(socketPath(cloud.agentId));
  assert.equal(plain.status, 426, plain.text);
  assert.equal(plain.json.error, "websocket_required");
  const upgrade = (p) => w.mf.dispatchFetch(BASE + p, { headers: { Upgrade: "websocket" } });
  const free = newAgent();
  assert.equal((await publish(w, free, 1, exampleCapsule(free.agentId, { watch: { tags: ["security"] } }), { ip: nextIp() })).status, 200);
  const f = await upgrade(socketPath(free.agentId));
  assert.equal(f.status, 402);
  assert.equal((await f.json()).error, "watch_requires_pro");
  const q = await upgrade(`${socketPath(cloud.agentId)}&since=x`);
  assert.equal(q.status, 400);
  assert.equal((await q.json()).error, "bad_query");
  const post = await w.fetch(socketPath(cloud.agentId), { method: "POST" });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get("allow"), "GET, OPTIONS");
});

test("an unsigned head poll is answered from the location's copy while the snapshot and the agent stand still", async () => {
  const a = await proAgent({ sources: ["aws_status"] });
  const first = await w.fetch(headPath(a.agentId));
  assert.equal(first.status, 200, first.text);
  const record = await w.kv.get(recordKey(a.agentId));
  const pointer = await w.kv.get("world:head");
  // Neither the record nor the pointer can be read from KV now.
  await w.kv.put(recordKey(a.agentId), "{not a record");
  await w.kv.put("world:head", "{not a pointer");
  const kept = await w.fetch(headPath(a.agentId));
  assert.equal(kept.status, 200, "no KV read: the location's copy");
  assert.equal(kept.text, first.text);
  const cond = await w.fetch(headPath(a.agentId), { headers: { "if-none-match": first.headers.get("etag") } });
  assert.equal(cond.status, 304);
  // A signed or long-polled read never comes from the copy: with the
  // record broken, an unsigned one that must read KV fails.
  const latest = await w.fetch(`/api/v1/watch/latest?agent_id=${a.agentId}`);
  assert.equal(latest.status, 503, "latest reads the record");
  await w.kv.put(recordKey(a.agentId), record);
  await w.kv.put("world:head", pointer);

  // A refresh here replaces the pointer this location holds: the copy made
  // of the old snapshot is not served again.
  await toState("v2");
  const refreshed = await w.fetch(headPath(a.agentId));
  assert.equal(refreshed.status, 200);
  assert.notEqual(refreshed.json.world.cursor, first.json.world.cursor);
  // A write this location takes drops the copy at once.
  const r = await publish(w, a, 2, exampleCapsule(a.agentId, { watch: { sources: ["gcp_status"] } }), { ip: a.ip });
  assert.equal(r.status, 200, r.text);
  const after = await w.fetch(headPath(a.agentId));
  assert.deepEqual(after.json.sources_included, ["gcp_status"]);
});

test("a write that removes the watch drops the location's projected copy at once, and keeps none of the old record", async () => {
  // The location that takes a write replaces its projected copy only while
  // one can exist: the capsule has a watch, or had one shortly before.
  const a = await proAgent({ sources: ["aws_status"] });
  const first = await w.fetch(headPath(a.agentId));
  assert.equal(first.status, 200, first.text);
  const watched = await w.kv.get(recordKey(a.agentId));
  const r = await publish(w, a, 2, exampleCapsule(a.agentId), { ip: a.ip });
  assert.equal(r.status, 200, r.text);
  const gone = await w.fetch(headPath(a.agentId));
  assert.equal(gone.status, 404, gone.text);
  assert.equal(gone.json.error, "watch_not_set");
  // KV lagging behind the write at this location (the watched record back):
  // it is read as it is, but the location keeps no copy of it.
  const current = await w.kv.get(recordKey(a.agentId));
  await w.kv.put(recordKey(a.agentId), watched);
  const lagging = await w.fetch(headPath(a.agentId));
  assert.equal(lagging.status, 200, lagging.text);
  await w.kv.put(recordKey(a.agentId), current);
  const after = await w.fetch(headPath(a.agentId));
  assert.equal(after.status, 404, "the lagging answer was not kept");
  assert.equal(after.json.error, "watch_not_set");
});
