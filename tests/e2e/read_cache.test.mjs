// The location's copy of public reads (Workers Cache API in workerd): polls
// within max-age are answered without reading KV; the location that takes a
// write sees the new cursor at once, also when the write Worker behind the
// entry has no cache of its own; signed reads never come from the copy;
// export.json's 304 needs no Durable Object.
//
// "Without reading KV" is proved by changing KV behind the Worker's back: a
// record that no longer parses makes any KV read a 503, so a 200 with the
// old body can only have come from the cache.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, BASE } from "./harness.mjs";
import {
  newAgent,
  exampleCapsule,
  publish,
  envelope,
  jcs,
  cursorOf,
  headPath,
  capsulePath,
  signedReadHeaders,
} from "./helpers.mjs";

const CACHE = "public, max-age=60, must-revalidate";
const CACHE_ADDS = ["age", "cf-cache-status", "date"];
const headerList = (h) => [...h].filter(([name]) => !CACHE_ADDS.includes(name));
const recordKey = (id) => `self:capsule:${id}`;
let w;

before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.close();
});

/** A published agent whose head.json and capsule.json this location has read once. */
async function polledAgent() {
  const agent = newAgent();
  const capsule = exampleCapsule(agent.agentId);
  const r = await publish(w, agent, 1, capsule);
  assert.equal(r.status, 200, r.text);
  const head = await w.fetch(headPath(agent.agentId));
  assert.equal(head.status, 200, head.text);
  const body = await w.fetch(capsulePath(agent.agentId));
  assert.equal(body.status, 200, body.text);
  return { agent, capsule, head, body };
}

test("polls within max-age are answered from the location's copy, not from KV", async () => {
  const { agent, capsule, head, body } = await polledAgent();
  const hex = cursorOf(capsule).slice("sha256:".length);
  await w.kv.put(recordKey(agent.agentId), "{not a record");
  // Sanity: a read that does go to KV now fails (the signed read below).
  for (let i = 0; i < 5; i++) {
    const again = await w.fetch(headPath(agent.agentId));
    assert.equal(again.status, 200, again.text);
    assert.equal(again.text, head.text, "the same head.json, byte for byte");
    assert.equal(again.headers.get("etag"), `"${hex}"`);
    assert.equal(again.headers.get("cache-control"), CACHE);
    assert.equal(again.headers.get("content-type"), "application/json; charset=utf-8");
    // The kept answer goes out as it was first sent, every header the same,
    // plus what any answer from a Cloudflare cache carries: how long it has
    // been kept (so a client's own max-age counts from the first answer,
    // never beyond it) and that it was a hit.
    assert.deepEqual(headerList(again.headers), headerList(head.headers));
    assert.ok(Number(again.headers.get("age")) <= 60, again.headers.get("age"));
    assert.equal(again.headers.get("cf-cache-status"), "HIT");
  }
  const capsuleAgain = await w.fetch(capsulePath(agent.agentId));
  assert.equal(capsuleAgain.status, 200);
  assert.equal(capsuleAgain.text, body.text);
  assert.equal(capsuleAgain.text, jcs(capsule));
  // Conditional and HEAD answers come from the copy too, unchanged.
  const notModified = await w.fetch(headPath(agent.agentId), { headers: { "if-none-match": `"${hex}"` } });
  assert.equal(notModified.status, 304);
  assert.equal(notModified.text, "");
  assert.equal(notModified.headers.get("etag"), `"${hex}"`);
  assert.equal(notModified.headers.get("cache-control"), CACHE);
  const headOnly = await w.fetch(capsulePath(agent.agentId), { method: "HEAD" });
  assert.equal(headOnly.status, 200);
  assert.equal(headOnly.text, "");
  assert.equal(headOnly.headers.get("etag"), `"${hex}"`);
  const stale = await w.fetch(headPath(agent.agentId), { headers: { "if-none-match": '"0000"' } });
  assert.equal(stale.status, 200);
  assert.equal(stale.text, head.text);
});

test("conditional polls make the copy too: a poller that only ever sends If-None-Match is answered from it", async () => {
  // What an agent does after its first boot: it knows its cursor (from its
  // own write) and only ever asks whether it moved. The location has no copy
  // yet (or it expired): the first conditional poll reads KV, answers 304,
  // and keeps the full answer, so the following polls read no KV at all.
  const agent = newAgent();
  const capsule = exampleCapsule(agent.agentId);
  assert.equal((await publish(w, agent, 1, capsule)).status, 200);
  const hex = cursorOf(capsule).slice("sha256:".length);
  const conditional = { headers: { "if-none-match": `"${hex}"` } };
  for (const path of [headPath(agent.agentId), capsulePath(agent.agentId)]) {
    const first = await w.fetch(path, conditional);
    assert.equal(first.status, 304, first.text);
  }
  await w.kv.put(recordKey(agent.agentId), "{not a record");
  for (const path of [headPath(agent.agentId), capsulePath(agent.agentId)]) {
    const again = await w.fetch(path, conditional);
    assert.equal(again.status, 304, `${path}: ${again.status} ${again.text}`);
    assert.equal(again.headers.get("etag"), `"${hex}"`);
    // The kept answer is the whole document, not just its tag.
    const full = await w.fetch(path);
    assert.equal(full.status, 200, full.text);
    assert.equal(full.headers.get("etag"), `"${hex}"`);
  }
  assert.equal((await w.fetch(capsulePath(agent.agentId))).text, jcs(capsule));
});

test("signed reads never come from the copy: they read KV", async () => {
  const { agent } = await polledAgent();
  await w.kv.put(recordKey(agent.agentId), "{not a record");
  const path = headPath(agent.agentId);
  const signed = await w.fetch(path, { headers: signedReadHeaders(agent, "GET", BASE + path) });
  assert.equal(signed.status, 503, signed.text);
  assert.equal(signed.json.error, "service_unavailable");
  // The unsigned poll is still the copy.
  assert.equal((await w.fetch(path)).status, 200);
});

test("the location that takes a write sees the new cursor at once", async () => {
  const { agent } = await polledAgent();
  const next = exampleCapsule(agent.agentId, { self_motto: "Second state, seen at once." });
  const r = await publish(w, agent, 2, next);
  assert.equal(r.status, 200, r.text);
  const head = await w.fetch(headPath(agent.agentId));
  assert.equal(head.status, 200);
  assert.equal(head.json.cursor, cursorOf(next));
  assert.equal(head.json.seq, 2);
  const body = await w.fetch(capsulePath(agent.agentId));
  assert.equal(body.text, jcs(next));
  // And the new answers are the copy from now on.
  await w.kv.put(recordKey(agent.agentId), "{not a record");
  assert.equal((await w.fetch(headPath(agent.agentId))).json.cursor, cursorOf(next));
});

test("the entry keeps the copies: the writing location sees the write even if the write Worker has no cache of its own", async () => {
  // Cloudflare may give a Worker called through a service binding another
  // cache than the entry's, or none: the entry marks its own copies, from
  // the agent's object's answer when it sent the write itself, and from
  // what the write Worker says a write changed when it forwarded it (a
  // streamed body).
  const split = await startWorker({ writeWorkerCache: false });
  try {
    const agent = newAgent();
    assert.equal((await publish(split, agent, 1, exampleCapsule(agent.agentId))).status, 200);
    assert.equal((await split.fetch(headPath(agent.agentId))).json.seq, 1);
    assert.equal((await split.fetch(capsulePath(agent.agentId))).status, 200);
    const next = exampleCapsule(agent.agentId, { self_motto: "Second state, seen here at once." });
    const r = await publish(split, agent, 2, next);
    assert.equal(r.status, 200, r.text);
    for (const name of r.headers.keys()) assert.doesNotMatch(name, /^x-selfcap-/, "the Workers' own headers stay between them");
    const head = await split.fetch(headPath(agent.agentId));
    assert.equal(head.json.cursor, cursorOf(next));
    assert.equal((await split.fetch(capsulePath(agent.agentId))).text, jcs(next));
    const third = exampleCapsule(agent.agentId, { self_motto: "Third state, streamed, seen here at once." });
    const bytes = new TextEncoder().encode(JSON.stringify(envelope(agent, 3, third)));
    const streamed = await split.fetch(capsulePath(agent.agentId), {
      method: "PUT",
      duplex: "half",
      headers: { "content-type": "application/json" },
      body: new ReadableStream({
        start(c) {
          c.enqueue(bytes);
          c.close();
        },
      }),
    });
    assert.equal(streamed.status, 200, streamed.text);
    for (const name of streamed.headers.keys()) assert.doesNotMatch(name, /^x-selfcap-/);
    assert.equal((await split.fetch(headPath(agent.agentId))).json.cursor, cursorOf(third));
    assert.equal((await split.fetch(capsulePath(agent.agentId))).text, jcs(third));
  } finally {
    await split.close();
  }
});

test("misses are never kept: an unknown agent is read from KV every time", async () => {
  const agent = newAgent();
  assert.equal((await w.fetch(headPath(agent.agentId))).status, 404);
  // The record appears in KV (as a mirror from another location would put it).
  const other = await polledAgent();
  const record = await w.kv.get(recordKey(other.agent.agentId));
  const moved = record.replaceAll(other.agent.agentId, agent.agentId);
  await w.kv.put(recordKey(agent.agentId), moved);
  const r = await w.fetch(headPath(agent.agentId));
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.agent_id, agent.agentId);
});

test("export.json answers its 304 (GET and HEAD) without a Durable Object", async () => {
  const { agent } = await polledAgent();
  const full = await w.fetch(`/self/${agent.agentId}/export.json`);
  assert.equal(full.status, 200, full.text);
  const etag = full.headers.get("etag");
  assert.match(etag, /^"[0-9a-f]{64}"$/);
  const bare = await startWorker({ withoutDurableObjects: true });
  try {
    for (const key of [recordKey(agent.agentId), `self:history:${agent.agentId}`]) {
      await bare.kv.put(key, await w.kv.get(key));
    }
    for (const method of ["GET", "HEAD"]) {
      const r = await bare.fetch(`/self/${agent.agentId}/export.json`, { method, headers: { "if-none-match": etag } });
      assert.equal(r.status, 304, `${method}: ${r.text}`);
      assert.equal(r.headers.get("etag"), etag);
    }
    // Without the tag the body needs the object: a clean 503, not a 500.
    const r = await bare.fetch(`/self/${agent.agentId}/export.json`);
    assert.equal(r.status, 503, r.text);
  } finally {
    await bare.close();
  }
});
