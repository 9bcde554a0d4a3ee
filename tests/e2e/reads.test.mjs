// Read path: head.json and capsule.json from KV, ETag/304, HEAD, caching
// headers, the /api/v1 alias, and the 503 safety net.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./harness.mjs";
import {
  newAgent,
  exampleCapsule,
  publish,
  jcs,
  cursorOf,
  sha256hex,
  headPath,
  capsulePath,
  T0,
  HOUR,
} from "./helpers.mjs";

const JSON_CT = "application/json; charset=utf-8";
const CACHE = "public, max-age=60, must-revalidate";
let w, agent, capsule, cursor, hex;

before(async () => {
  w = await startWorker();
  agent = newAgent();
  capsule = exampleCapsule(agent.agentId);
  cursor = cursorOf(capsule);
  hex = cursor.slice("sha256:".length);
  const r = await publish(w, agent, 1, capsule, { now: T0 });
  assert.equal(r.status, 200, r.text);
});
after(async () => {
  await w?.close();
});

test("capsule.json serves the canonical capsule with ETag and cache headers", async () => {
  for (const p of [capsulePath(agent.agentId), `/api/v1${capsulePath(agent.agentId)}`]) {
    const r = await w.fetch(p);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("content-type"), JSON_CT);
    assert.equal(r.headers.get("cache-control"), CACHE);
    assert.equal(r.headers.get("etag"), `"${hex}"`);
    assert.equal(r.text, jcs(capsule), "body is the RFC 8785 form");
    assert.equal("sha256:" + sha256hex(Buffer.from(r.text)), cursor, "sha256(body) == cursor");
    assert.deepEqual(r.json, capsule);
  }
});

test("head.json has every field and the same ETag", async () => {
  const now = T0 + 2 * HOUR;
  const r = await w.fetch(headPath(agent.agentId), { headers: { "x-selfcap-test-now": String(now) } });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get("content-type"), JSON_CT);
  assert.equal(r.headers.get("cache-control"), CACHE);
  assert.equal(r.headers.get("etag"), `"${hex}"`);
  assert.deepEqual(r.json, {
    agent_id: agent.agentId,
    cursor,
    prev_cursor: null,
    changed: true,
    seq: 1,
    generated_at: new Date(now).toISOString().replace(/\.\d{3}Z$/, "Z"),
    ttl_sec: 600,
    capsule_url: `/self/${agent.agentId}/capsule.json`,
    history_url: `/self/${agent.agentId}/history.json`,
    verify_url: `/self/${agent.agentId}/verify.json`,
    writes: {
      limit_24h: 5,
      used_24h: 1,
      remaining_24h: 4,
      reset_at: new Date(T0 + 24 * HOUR).toISOString().replace(/\.\d{3}Z$/, "Z"),
    },
    tier: "free",
    paid_until: null,
  });
});

test("If-None-Match: 304 for every spelling of the current tag", async () => {
  const matching = [
    `"${hex}"`,
    `W/"${hex}"`,
    `"sha256:${hex}"`,
    `W/"sha256:${hex}"`,
    `${hex}`,
    `"${hex.toUpperCase()}"`,
    `"0000", "${hex}"`,
    `"0000",W/"${hex}" , "1111"`,
    `*`,
  ];
  for (const doc of [headPath, capsulePath]) {
    for (const inm of matching) {
      const r = await w.fetch(doc(agent.agentId), { headers: { "if-none-match": inm } });
      assert.equal(r.status, 304, `${inm}`);
      assert.equal(r.text, "");
      assert.equal(r.headers.get("etag"), `"${hex}"`);
      assert.equal(r.headers.get("cache-control"), CACHE);
      assert.equal(r.headers.get("access-control-allow-origin"), "*");
    }
  }
});

test("If-None-Match: 200 when no tag matches", async () => {
  for (const inm of [`"${"0".repeat(64)}"`, `W/"abc"`, `""`, `"sha256:"`, `,`, `W/`, hex.slice(1)]) {
    const r = await w.fetch(capsulePath(agent.agentId), { headers: { "if-none-match": inm } });
    assert.equal(r.status, 200, inm);
    assert.equal(r.text, jcs(capsule));
  }
});

test("If-None-Match: * does not turn a missing capsule into 304", async () => {
  const r = await w.fetch(headPath(newAgent().agentId), { headers: { "if-none-match": "*" } });
  assert.equal(r.status, 404);
});

test("HEAD answers like GET without a body", async () => {
  for (const doc of [headPath, capsulePath]) {
    const r = await w.fetch(doc(agent.agentId), { method: "HEAD" });
    assert.equal(r.status, 200);
    assert.equal(r.text, "");
    assert.equal(r.headers.get("etag"), `"${hex}"`);
    assert.equal(r.headers.get("content-type"), JSON_CT);
    const r2 = await w.fetch(doc(agent.agentId), { method: "HEAD", headers: { "if-none-match": `"${hex}"` } });
    assert.equal(r2.status, 304);
  }
});

test("used_24h decays at read time without any write", async () => {
  const r = await w.fetch(headPath(agent.agentId), {
    headers: { "x-selfcap-test-now": String(T0 + 24 * HOUR) },
  });
  assert.equal(r.json.writes.used_24h, 0);
  assert.equal(r.json.writes.remaining_24h, 5);
  assert.equal(r.json.writes.reset_at, null);
});

test("an unreadable KV record is a 503 with retry_after_sec, never a 500", async () => {
  const victim = newAgent();
  await w.kv.put(`self:capsule:${victim.agentId}`, "{not json");
  for (const doc of [headPath, capsulePath]) {
    const r = await w.fetch(doc(victim.agentId));
    assert.equal(r.status, 503);
    assert.equal(r.headers.get("content-type"), JSON_CT);
    assert.equal(r.json.error, "service_unavailable");
    assert.ok(Number.isInteger(r.json.retry_after_sec) && r.json.retry_after_sec > 0);
    assert.equal(r.headers.get("retry-after"), String(r.json.retry_after_sec));
    assert.doesNotMatch(r.text, /at |\.rs|panicked|stack/i);
  }
});

test("reads never touch a Durable Object: served with no DO bindings at all", async () => {
  const record = await w.kv.get(`self:capsule:${agent.agentId}`);
  const bare = await startWorker({ withoutDurableObjects: true });
  try {
    await bare.kv.put(`self:capsule:${agent.agentId}`, record);
    const head = await bare.fetch(headPath(agent.agentId));
    assert.equal(head.status, 200, head.text);
    assert.equal(head.json.cursor, cursor);
    const cached = await bare.fetch(headPath(agent.agentId), { headers: { "if-none-match": `"${hex}"` } });
    assert.equal(cached.status, 304);
    assert.equal((await bare.fetch(capsulePath(agent.agentId))).text, jcs(capsule));
    // A write, which does need the DO, fails cleanly: 503, not 500.
    const r = await publish(bare, agent, 2, capsule);
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json.error, "service_unavailable");
    assert.equal(r.json.accepted, false);
  } finally {
    await bare.close();
  }
});
