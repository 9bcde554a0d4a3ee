// Projected watch feeds (docs/PROTOCOL.md §15) in workerd, against the ddv1
// fixture feed served on loopback (tests/fixtures/ddv1/, three states) and
// Pro agents credited through the real upgrade path on a local chain. The
// expected cursors are computed here from the fixture's own files and the
// spec's formula, independently of the Rust core.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { startWorker, BASE } from "./harness.mjs";
import { exampleCapsule, jcs, publish, signedReadHeaders } from "./helpers.mjs";
import { startChain, upgradeVars, DAY } from "./upgrade-helpers.mjs";
import { startFixture } from "../../scripts/ddv1-fixture-server.mjs";
import { CRON, cursorsOf, expectedCursor, fixtureFile, agentWith as sharedAgentWith } from "./feed-helpers.mjs";
import { exits, requireSelfcap, selfcapIn, SELFCAP_BIN } from "./cli-helpers.mjs";
import { mcpSession } from "./mcp-helpers.mjs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";


let chain;
let fixture;
let w;

const file = fixtureFile;

/** The batch a state serves for a source: the live path, or the older one when the live body is not the catalog's. */
function servedBatch(state, id) {
  const want = cursorsOf(state)[id];
  for (const rel of [`diff/source/${id}/latest.json`, `diff/${id}/latest.json`]) {
    let b;
    try {
      b = file(state, rel);
    } catch {
      continue;
    }
    if (b.cursor === want) return b;
  }
  throw new Error(`${state}: no batch of ${id} at the catalog's cursor`);
}
/**
 * Items per signals.severity.level and per signals.suggested_action (string values only, verbatim) over every
 * spec and schema bucket of the sources' batches, counted here from the fixture's files.
 */
function signalCounts(state, ids) {
  const by_severity = {};
  const by_suggested_action = {};
  const bump = (m, k) => {
    if (typeof k === "string") m[k] = (m[k] ?? 0) + 1;
  };
  for (const id of ids) {
    const { buckets } = servedBatch(state, id);
    for (const name of ["items", "new", "updated", "removed", "flagged"]) {
      for (const item of buckets[name] ?? []) {
        bump(by_severity, item.signals?.severity?.level);
        bump(by_suggested_action, item.signals?.suggested_action);
      }
    }
  }
  return { by_severity, by_suggested_action };
}
/** A body without its generated_at (the one member that differs between two reads of the same projection). */
const timeless = ({ generated_at, ...rest }) => rest;

const feedPath = (doc, agentId) => `/api/v1/watch/${doc}?agent_id=${agentId}`;
const get = (doc, agentId, headers = {}) => w.fetch(feedPath(doc, agentId), { headers });
const scheduled = async () => (await w.mf.getWorker()).scheduled({ cron: CRON });

/** A new agent, published with `watch` (and `extra` capsule members), credited Pro when `pro`. */
const agentWith = (watch, { pro = true, extra = {}, on } = {}) => sharedAgentWith(on ?? w, chain, watch, { pro, extra });

before(async () => {
  chain = await startChain();
  fixture = await startFixture({ port: 0, state: "v1" });
  w = await startWorker({ vars: upgradeVars(chain, { SELFCAP_WATCH_UPSTREAM: fixture.url }) });
});
after(async () => {
  await w?.close();
  await fixture?.close();
  await chain?.stop();
});

let cloud; // Pro, watching the tag cloud-status (aws_status, gcp_status)
let byId; // Pro, the same two sources by id, in another order
let security; // Pro, watching the security sources (cisa_kev: flagged only; nist_nvd: `new`, zone-less times)

test("a free agent is told to upgrade or filter locally, with no upstream request", async () => {
  const free = await agentWith({ tags: ["cloud-status"] }, { pro: false });
  await fixture.resetRequests();
  const r = await get("head", free.agentId);
  assert.equal(r.status, 402, r.text);
  assert.equal(r.json.error, "watch_requires_pro");
  assert.equal(r.json.upgrade_url, "/api/v1/self/upgrade/quote");
  assert.equal(r.json.upstream_head_url, `${fixture.url}/diff/head.json`);
  assert.equal(r.json.upstream_sources_url, `${fixture.url}/diff/sources.json`);
  assert.deepEqual(await fixture.requests(), [], "no upstream request for a free agent");
  // No watch at all: 404 watch_not_set, whatever the tier.
  const none = await agentWith(undefined, { pro: false });
  const n = await get("head", none.agentId);
  assert.equal(n.status, 404);
  assert.equal(n.json.error, "watch_not_set");
});

test("a Pro agent's head: the spec's cursor, ETag = cursor, 304 on If-None-Match", async () => {
  cloud = await agentWith({ tags: ["cloud-status"] });
  byId = await agentWith({ sources: ["gcp_status", "aws_status"] });
  security = await agentWith({ tags: ["security"] });
  const h = await get("head", cloud.agentId);
  assert.equal(h.status, 200, h.text);
  assert.deepEqual(h.json.sources_included, ["aws_status", "gcp_status"]);
  assert.equal(h.json.cursor, expectedCursor("v1", ["aws_status", "gcp_status"]));
  assert.equal(h.headers.get("etag"), `"${h.json.cursor.slice(7)}"`);
  assert.equal(h.json.world.cursor, file("v1", "diff/head.json").cursor);
  assert.equal(h.json.world.stale, false);
  assert.equal(h.json.latest_url, `/api/v1/watch/latest?agent_id=${cloud.agentId}`);
  const again = await get("head", cloud.agentId, { "if-none-match": h.headers.get("etag") });
  assert.equal(again.status, 304);
  // Determinism: the same sources by id, listed in another order.
  assert.equal((await get("head", byId.agentId)).json.cursor, h.json.cursor);
});

test("an unchanged upstream costs one request per refresh", async () => {
  await fixture.resetRequests();
  await scheduled();
  const reqs = await fixture.requests();
  assert.deepEqual(reqs.map((r) => [r.path, r.status]), [["/diff/head.json", 304]]);
});

test("v1 -> v2 moves only an unwatched source: the global cursor moves, the projection does not", async () => {
  const before = await get("head", cloud.agentId);
  await fixture.setState("v2");
  await fixture.resetRequests();
  await scheduled();
  const paths = (await fixture.requests()).map((r) => r.path);
  assert.deepEqual(paths.slice(0, 2), ["/diff/head.json", "/diff/sources.json"]);
  assert.deepEqual(paths.slice(2), ["/diff/source/nodejs_releases/latest.json"], "only the source that moved");
  const after = await get("head", cloud.agentId, { "if-none-match": before.headers.get("etag") });
  assert.equal(after.status, 304, "the projection did not move");
  const full = await get("head", cloud.agentId);
  assert.notEqual(full.json.world.cursor, before.json.world.cursor);
  assert.equal(full.json.cursor, expectedCursor("v2", ["aws_status", "gcp_status"]));
});

test("v2 -> v3 moves a watched source: a new cursor, changed, and the new item verbatim in latest", async () => {
  const before = await get("head", cloud.agentId);
  await fixture.setState("v3");
  await scheduled();
  const h = await get("head", cloud.agentId, { "if-none-match": before.headers.get("etag") });
  assert.equal(h.status, 200, h.text);
  assert.equal(h.json.cursor, expectedCursor("v3", ["aws_status", "gcp_status"]));
  assert.equal(h.json.changed, true);
  assert.equal(h.json.prev_cursor, before.json.cursor);
  const latest = await get("latest", cloud.agentId);
  assert.equal(latest.status, 200, latest.text);
  assert.equal(latest.json.cursor, h.json.cursor);
  assert.equal(latest.headers.get("etag"), h.headers.get("etag"));
  const gcp = file("v3", "diff/source/gcp_status/latest.json");
  const upstreamItems = [...(gcp.buckets.items ?? []), ...(gcp.buckets.new ?? [])];
  for (const item of upstreamItems) {
    const served = latest.json.buckets.items.find((i) => i.source === "gcp_status" && i.id === item.id);
    assert.ok(served, `item ${item.id} is served`);
    assert.equal(jcs(served), jcs(item), "verbatim, provenance and all");
  }
  // latest?since=: from the cursor before this change, only what is new
  // (the gcp batch's items the v2 batch did not hold); from the current one,
  // nothing; from anything older, 410.
  const v2gcp = file("v2", "diff/source/gcp_status/latest.json");
  const keyOf = (i) => `${i.id} ${i.provenance?.content_hash}`;
  const held = new Set(Object.values(v2gcp.buckets).flat().map(keyOf));
  const fresh = upstreamItems.filter((i) => !held.has(keyOf(i)));
  assert.ok(fresh.length > 0, "v3 brings something new for gcp_status");
  const delta = await w.fetch(`${feedPath("latest", cloud.agentId)}&since=${before.json.cursor}`);
  assert.equal(delta.status, 200, delta.text);
  assert.equal(delta.json.since, before.json.cursor);
  assert.deepEqual(
    delta.json.buckets.items.map((i) => `${i.source} ${i.id}`).sort(),
    fresh.map((i) => `gcp_status ${i.id}`).sort(),
    "only the new items, and nothing from aws_status (it did not move)",
  );
  const none = await w.fetch(`${feedPath("latest", cloud.agentId)}&since=${h.json.cursor.slice(7)}`);
  assert.equal(none.status, 200, none.text);
  assert.equal(none.json.counts.items + none.json.counts.updated + none.json.counts.removed + none.json.counts.flagged, 0);
  const gone = await w.fetch(`${feedPath("latest", cloud.agentId)}&since=sha256:${"7".repeat(64)}`);
  assert.equal(gone.status, 410, gone.text);
  assert.equal(gone.json.error, "cursor_not_found");
  const bad = await w.fetch(`${feedPath("latest", cloud.agentId)}&since=yesterday`);
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error, "bad_query");
  const digest = await get("digest", cloud.agentId);
  assert.equal(digest.status, 200, digest.text);
  const g = digest.json.sources.find((s) => s.source_id === "gcp_status");
  assert.equal(g.cursor, cursorsOf("v3").gcp_status);
  assert.deepEqual(g.via, ["tag:cloud-status"]);
});

test("schema drift projects as the spec's buckets: flagged kept, `new` read as items", async () => {
  const latest = await get("latest", security.agentId);
  assert.equal(latest.status, 200, latest.text);
  assert.deepEqual(latest.json.sources_included, ["cisa_kev", "nist_nvd"]);
  const cisa = file("v3", "diff/source/cisa_kev/latest.json");
  assert.equal(latest.json.buckets.flagged.filter((i) => i.source === "cisa_kev").length, Math.min(50, cisa.buckets.flagged.length));
  const nvd = file("v3", "diff/source/nist_nvd/latest.json");
  assert.equal(latest.json.buckets.items.filter((i) => i.source === "nist_nvd").length, Math.min(50, nvd.buckets.new.length));
  assert.equal(latest.json.counts.flagged, latest.json.buckets.flagged.length);
});

test("the digest counts the selected items by upstream severity and suggested action, verbatim", async () => {
  const mixed = await agentWith({ tags: ["security"], sources: ["nodejs_releases"] });
  const ids = ["cisa_kev", "nist_nvd", "nodejs_releases"];
  const d = await get("digest", mixed.agentId);
  assert.equal(d.status, 200, d.text);
  assert.deepEqual(d.json.sources.map((s) => s.source_id), ids);
  const want = signalCounts("v3", ids);
  assert.ok(Object.keys(want.by_severity).length > 1, "the fixture's NVD items carry severity levels");
  assert.ok(Object.keys(want.by_suggested_action).length > 0, "the fixture's release items carry a suggested action");
  assert.deepEqual(d.json.by_severity, want.by_severity);
  assert.deepEqual(d.json.by_suggested_action, want.by_suggested_action);
  // Over whole batches: cisa_kev's 60 flagged items count in `counts` though latest serves 50.
  const cisa = d.json.sources.find((s) => s.source_id === "cisa_kev");
  assert.equal(cisa.counts.flagged, servedBatch("v3", "cisa_kev").buckets.flagged.length);
  // Incident signals are neither: the cloud-status watch has empty maps.
  const c = await get("digest", cloud.agentId);
  assert.deepEqual(signalCounts("v3", ["aws_status", "gcp_status"]), { by_severity: {}, by_suggested_action: {} });
  assert.deepEqual([c.json.by_severity, c.json.by_suggested_action], [{}, {}]);
});

test("a source past the byte cap is listed as truncated, the same way twice", async () => {
  const big = await agentWith({ sources: ["hn_front_page", "aws_status"] });
  const a = await get("latest", big.agentId);
  assert.equal(a.status, 200, a.text);
  assert.deepEqual(a.json.truncated, [{ source_id: "hn_front_page", full_url: "/diff/source/hn_front_page/latest.json" }]);
  const b = await get("latest", big.agentId);
  assert.deepEqual(b.json.truncated, a.json.truncated);
  assert.deepEqual(b.json.buckets, a.json.buckets);
});

test("upstream down: the last snapshot is served, marked stale; malformed keeps it too", async () => {
  const before = await get("head", cloud.agentId);
  await fixture.down();
  await scheduled();
  const stale = await get("head", cloud.agentId);
  assert.equal(stale.status, 200, stale.text);
  assert.equal(stale.json.world.stale, true);
  assert.equal(stale.json.cursor, before.json.cursor, "an outage is not a change");
  assert.equal(stale.json.all_clear, false);
  await fixture.up();
  await fixture.malformed();
  await scheduled();
  const kept = await get("head", cloud.agentId);
  assert.equal(kept.json.cursor, before.json.cursor);
  assert.equal(kept.json.world.stale, true);
  await fixture.up();
  await scheduled();
  assert.equal((await get("head", cloud.agentId)).json.world.stale, false);
});

test("selfcap feed reads the head, latest (and since) and digest; a free agent's refusal is said with its code", async () => {
  requireSelfcap();
  const selfcap = selfcapIn(mkdtempSync(path.join(tmpdir(), "selfcap-feed-")));
  const url = new URL(w.origin).origin;
  const run = (args) => selfcap(["--url", url, "feed", ...args]);
  const served = (await get("head", cloud.agentId)).json;
  const head = JSON.parse(exits(await run([cloud.agentId]), 0, "feed").stdout);
  assert.equal(head.cursor, served.cursor);
  assert.deepEqual(head.sources_included, served.sources_included);
  const latest = JSON.parse(exits(await run([cloud.agentId, "--latest"]), 0, "feed --latest").stdout);
  assert.equal(latest.cursor, served.cursor);
  const none = JSON.parse(exits(await run([cloud.agentId, "--latest", "--since", served.cursor]), 0, "since").stdout);
  assert.equal(none.since, served.cursor);
  assert.equal(none.buckets.items.length, 0);
  const digest = JSON.parse(exits(await run([cloud.agentId, "--digest"]), 0, "feed --digest").stdout);
  assert.deepEqual(digest.sources.map((s) => s.source_id), served.sources_included);
  const free = await agentWith({ tags: ["cloud-status"] }, { pro: false });
  const r = await run([free.agentId]);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /watch_requires_pro/);
  assert.doesNotMatch(r.stderr, /panicked/);
});

test("MCP self_feed through a real MCP client: head, latest since, digest; a free agent's refusal is a tool error", async () => {
  requireSelfcap();
  const home = mkdtempSync(path.join(tmpdir(), "selfcap-feed-mcp-"));
  const s = await mcpSession(SELFCAP_BIN, { SELFCAP_HOME: home, SELFCAP_URL: new URL(w.origin).origin });
  try {
    const names = (await s.client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("self_feed"));
    const served = (await get("head", cloud.agentId)).json;
    const head = await s.call("self_feed", { agent_id: cloud.agentId });
    assert.equal(head.isError, false, JSON.stringify(head.body));
    assert.equal(head.body.cursor, served.cursor);
    const fresh = await s.call("self_feed", { agent_id: cloud.agentId, doc: "latest", since: served.cursor });
    assert.equal(fresh.isError, false, JSON.stringify(fresh.body));
    assert.equal(fresh.body.since, served.cursor);
    const digest = await s.call("self_feed", { agent_id: cloud.agentId, doc: "digest" });
    assert.deepEqual(digest.body.sources.map((x) => x.source_id), served.sources_included);
    const bad = await s.call("self_feed", { agent_id: cloud.agentId, doc: "head", since: served.cursor });
    assert.equal(bad.isError, true, "since only with latest");
    const free = await agentWith({ tags: ["cloud-status"] }, { pro: false });
    const refused = await s.call("self_feed", { agent_id: free.agentId });
    assert.equal(refused.isError, true);
    assert.match(JSON.stringify(refused.body), /watch_requires_pro/);
  } finally {
    await s.close();
  }
});

test("remote MCP self_feed (POST /mcp) through the SDK client: the route's bodies, its refusals as tool errors, signed for a private capsule", async () => {
  const origin = new URL(w.origin).origin;
  const client = new Client({ name: "selfcap-e2e", version: "0.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", origin)));
  const call = async (args) => {
    const r = await client.callTool({ name: "self_feed", arguments: args });
    assert.equal(r.content.length, 1, JSON.stringify(r));
    return { body: JSON.parse(r.content[0].text), isError: r.isError === true };
  };
  try {
    const tool = (await client.listTools()).tools.find((t) => t.name === "self_feed");
    assert.ok(tool, "the remote door lists self_feed");
    assert.deepEqual(Object.keys(tool.inputSchema.properties).sort(), ["agent_id", "doc", "since"]);
    assert.deepEqual(tool.inputSchema.required, ["agent_id"]);
    assert.equal(tool.annotations.readOnlyHint, true);

    // Each document is what the route serves (only generated_at differs between two reads).
    const served = await get("head", cloud.agentId);
    const head = await call({ agent_id: cloud.agentId });
    assert.equal(head.isError, false, JSON.stringify(head.body));
    assert.deepEqual(timeless(head.body), timeless(served.json));
    assert.equal(head.body.changed, true, "v3 moved a watched source");
    const latest = await call({ agent_id: cloud.agentId, doc: "latest" });
    assert.equal(latest.isError, false, JSON.stringify(latest.body));
    assert.deepEqual(timeless(latest.body), timeless((await get("latest", cloud.agentId)).json));
    const since = served.json.prev_cursor;
    const delta = await call({ agent_id: cloud.agentId, doc: "latest", since });
    assert.equal(delta.isError, false, JSON.stringify(delta.body));
    assert.equal(delta.body.since, since);
    assert.deepEqual(timeless(delta.body), timeless((await w.fetch(`${feedPath("latest", cloud.agentId)}&since=${since}`)).json));
    assert.ok(delta.body.buckets.items.length > 0 && delta.body.buckets.items.every((i) => i.source === "gcp_status"));
    const digest = await call({ agent_id: security.agentId, doc: "digest" });
    assert.equal(digest.isError, false, JSON.stringify(digest.body));
    assert.deepEqual(timeless(digest.body), timeless((await get("digest", security.agentId)).json));
    assert.deepEqual(digest.body.by_severity, signalCounts("v3", ["cisa_kev", "nist_nvd"]).by_severity);

    // Refusals: the route's reason code and links, as tool errors.
    const free = await agentWith({ tags: ["cloud-status"] }, { pro: false });
    const route402 = await get("head", free.agentId);
    assert.equal(route402.status, 402);
    const refused = await call({ agent_id: free.agentId, doc: "digest" });
    assert.equal(refused.isError, true);
    assert.equal(refused.body.error, "watch_requires_pro");
    for (const link of ["upgrade_url", "upstream_head_url", "upstream_sources_url"]) {
      assert.equal(refused.body[link], route402.json[link], link);
    }
    assert.ok(refused.body.hint.length > 0);
    const unwatched = await agentWith(undefined, { pro: false });
    assert.equal((await call({ agent_id: unwatched.agentId })).body.error, "watch_not_set");
    const gone = await call({ agent_id: cloud.agentId, doc: "latest", since: `sha256:${"7".repeat(64)}` });
    assert.deepEqual([gone.isError, gone.body.error], [true, "cursor_not_found"]);
    const nobody = await call({ agent_id: "ab".repeat(32) });
    assert.deepEqual([nobody.isError, nobody.body.error], [true, "capsule_not_found"]);
    const bad = await call({ agent_id: cloud.agentId, doc: "head", since: served.json.cursor });
    assert.deepEqual([bad.isError, bad.body.error, bad.body.field], [true, "invalid_arguments", "since"]);
  } finally {
    await client.close();
  }

  // A private capsule's watch is read as the capsule is (§12): an unsigned POST gets the route's 404, one
  // signed by the owner gets the feed (raw JSON-RPC: each signed read carries its own nonce).
  const secret = await agentWith({ tags: ["cloud-status"] }, { extra: { access_control: { public: false } } });
  const raw = (headers = {}) =>
    w.fetch("/mcp", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "self_feed", arguments: { agent_id: secret.agentId } } }),
    });
  const anon = await raw();
  assert.equal(anon.status, 200);
  assert.equal(anon.json.result.isError, true);
  assert.equal(JSON.parse(anon.json.result.content[0].text).error, "capsule_not_found");
  const mine = await raw(signedReadHeaders(secret, "POST", BASE + "/mcp"));
  assert.equal(mine.json.result.isError, false, mine.text);
  const body = JSON.parse(mine.json.result.content[0].text);
  assert.equal(body.agent_id, secret.agentId);
  assert.equal(body.cursor, expectedCursor("v3", ["aws_status", "gcp_status"]));
});

test("every refusal: bad query, bad id, unknown agent, private capsule, lapsed plan, no upstream, none read yet", async () => {
  const code = async (p, status, error, headers) => {
    const r = await w.fetch(p, { headers });
    assert.equal(r.status, status, `${p}: ${r.text}`);
    assert.equal(r.json.error, error, p);
    return r;
  };
  await code("/api/v1/watch/head", 400, "bad_query");
  await code(`/api/v1/watch/head?agent_id=${cloud.agentId}&tags=x`, 400, "bad_query");
  await code("/api/v1/watch/head?agent_id=ABC", 400, "bad_agent_id");
  await code(`/api/v1/watch/head?agent_id=${"ab".repeat(32)}`, 404, "capsule_not_found");
  // A private capsule's watch is read as the capsule is (§12).
  const secret = await agentWith({ tags: ["cloud-status"] }, { extra: { access_control: { public: false } } });
  await code(feedPath("head", secret.agentId), 404, "capsule_not_found");
  const url = feedPath("head", secret.agentId);
  const signed = await w.fetch(url, { headers: signedReadHeaders(secret, "GET", BASE + url) });
  assert.equal(signed.status, 200, signed.text);
  // A lapsed plan counts at once (the test clock, 31 days on).
  await code(feedPath("head", cloud.agentId), 402, "watch_requires_pro", { "x-selfcap-test-now": String(Date.now() + 31 * DAY) });
  // No upstream configured; an upstream never read.
  const bare = await startWorker();
  try {
    const r = await bare.fetch(feedPath("head", cloud.agentId));
    assert.equal(r.status, 503);
    assert.equal(r.json.error, "watch_not_configured");
  } finally {
    await bare.close();
  }
  await fixture.down();
  const fresh = await startWorker({ vars: upgradeVars(chain, { SELFCAP_WATCH_UPSTREAM: fixture.url }) });
  try {
    // Pro here too: this instance's state is its own, so credit again.
    const a = await agentWith({ tags: ["cloud-status"] }, { on: fresh });
    const r = await fresh.fetch(feedPath("head", a.agentId));
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json.error, "upstream_unavailable");
    assert.ok(Number(r.headers.get("retry-after")) > 0);
    // The remote MCP door says the same as a tool error, with the wait.
    const mcp = await fresh.fetch("/mcp", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "self_feed", arguments: { agent_id: a.agentId, doc: "digest" } } }),
    });
    assert.equal(mcp.json.result.isError, true, mcp.text);
    const said = JSON.parse(mcp.json.result.content[0].text);
    assert.equal(said.error, "upstream_unavailable");
    assert.equal(said.retry_after_sec, r.json.retry_after_sec);
    assert.ok(said.retry_after_sec > 0);
  } finally {
    await fixture.up();
    await fresh.close();
  }
});
