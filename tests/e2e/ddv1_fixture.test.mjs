// The ddv1 world-feed fixture (tests/fixtures/ddv1/) and its server
// (scripts/ddv1-fixture-server.mjs), checked against what
// docs/design/watch-feeds.md ("ddv1 as served", "The fixture") says the
// upstream serves and what the fixture must hold. Independent of the
// Worker: plain files and a loopback server, no Miniflare.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { connect } from "node:net";
import { networkInterfaces } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { startFixture, etagOf, MALFORMED_BODY } from "../../scripts/ddv1-fixture-server.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const FIX = path.join(ROOT, "tests", "fixtures", "ddv1");
const STATES = ["v1", "v2", "v3"];
const ZERO = `sha256:${"0".repeat(64)}`;
const CURSOR = /^sha256:[0-9a-f]{64}$/;
const ZONELESS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$/;
const ZONED = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;
const SOURCES = ["aws_status", "cisa_kev", "gcp_status", "github_changelog", "hn_front_page", "nist_nvd", "nodejs_releases"];

const bytes = (state, rel) => readFileSync(path.join(FIX, state, rel));
const json = (state, rel) => JSON.parse(bytes(state, rel).toString("utf8"));
const catalog = (state) => json(state, "diff/sources.json");
const entry = (state, id) => catalog(state).sources.find((s) => s.source_id === id);
const batch = (state, id) => json(state, `diff/source/${id}/latest.json`);
/** Items of a batch in every bucket (spec and schema names). */
const allItems = (b) => Object.values(b.buckets ?? {}).flat();

function tree(state, rel = "") {
  const dir = path.join(FIX, state, rel);
  return readdirSync(dir).flatMap((n) => {
    const r = rel ? `${rel}/${n}` : n;
    return statSync(path.join(dir, n)).isDirectory() ? tree(state, r) : [r];
  });
}

/** Relative paths whose bytes differ between two states (or exist in one only). */
function changedFiles(a, b) {
  const all = new Set([...tree(a), ...tree(b)]);
  return [...all]
    .filter((r) => {
      try {
        return !bytes(a, r).equals(bytes(b, r));
      } catch {
        return true;
      }
    })
    .sort();
}

// ------------------------------------------------------------------ files

test("the generator reproduces the committed fixture byte for byte", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [path.join(FIX, "gen.mjs"), "--check"], { cwd: ROOT });
  assert.match(stdout, /current/);
});

test("each state is a served ddv1 tree: head, catalog, one batch per source, global batch", () => {
  for (const state of STATES) {
    const head = json(state, "diff/head.json");
    for (const k of ["cursor", "prev_cursor", "changed", "generated_at", "ttl_sec", "latest_url", "digest_url", "counts",
      "sources_checked", "sources_ok", "all_clear", "freshness", "_protocol"]) {
      assert.ok(k in head, `${state} head.json has ${k}`);
    }
    assert.match(head.cursor, CURSOR);
    assert.match(head.prev_cursor, CURSOR);
    assert.equal(head._protocol.standard, "ddv1");
    assert.equal(head.latest_url, "/diff/latest.json");
    assert.equal(head.all_clear, head.counts.items === 0 && head.sources_ok > 0);

    const cat = catalog(state);
    for (const k of ["schema_version", "generated_at", "total", "enabled_count", "tags_available", "sources"]) {
      assert.ok(k in cat, `${state} sources.json has ${k}`);
    }
    assert.deepEqual(cat.sources.map((s) => s.source_id), SOURCES);
    assert.equal(cat.total, SOURCES.length);
    assert.equal(cat.enabled_count, cat.sources.filter((s) => s.enabled).length);
    for (const s of cat.sources) {
      for (const k of ["source_id", "name", "tags", "description", "homepage", "upstream_url", "enabled", "status",
        "cursor", "ttl_sec", "head_url", "latest_url"]) {
        assert.ok(k in s, `${state} ${s.source_id} has ${k}`);
      }
      for (const t of s.tags) assert.ok(cat.tags_available.includes(t), `${t} is in tags_available`);
    }

    for (const id of SOURCES) {
      const b = batch(state, id);
      assert.equal(b.source_id, id);
      assert.deepEqual(b.sources_included, [id]);
      assert.match(b.cursor, CURSOR);
      assert.match(b.prev_cursor, CURSOR);
      assert.match(b.hash, CURSOR);
      for (const [name, n] of Object.entries(b.counts ?? {})) assert.equal(b.buckets[name].length, n, `${id} counts.${name}`);
      const seen = new Set();
      for (const it of allItems(b)) {
        assert.equal(it.source, id);
        for (const k of ["id", "url", "published_at", "updated_at", "headline", "content", "provenance"]) {
          assert.ok(k in it, `${id} item has ${k}`);
        }
        assert.equal(typeof it.content.lang, "string");
        assert.match(it.provenance.content_hash, CURSOR);
        assert.ok(Array.isArray(it.provenance.evidence_urls));
        assert.ok(!("tags" in it), "items carry no tags");
        assert.ok(!seen.has(it.id), `${id} ids are unique within the source`);
        seen.add(it.id);
      }
      const h = json(state, `diff/source/${id}/head.json`);
      assert.equal(h.cursor, b.cursor, `${state} ${id} head.json cursor == latest.json cursor`);
    }

    const latest = json(state, "diff/latest.json");
    assert.equal(latest.cursor, head.cursor, "global latest.json and head.json share the cursor");
    assert.equal(latest.prev_cursor, head.prev_cursor);
    assert.deepEqual(latest.counts, head.counts);
    assert.equal(latest.buckets.items.length, head.counts.items);
    assert.deepEqual(latest.sources_included, [...latest.sources_included].sort());
  }
});

test("the catalog's cursor is each source's latest.json cursor (disabled: null vs the zero cursor)", () => {
  for (const state of STATES) {
    for (const id of SOURCES) {
      const e = entry(state, id);
      const b = batch(state, id);
      if (id === "github_changelog") {
        assert.equal(e.cursor, null);
        assert.equal(b.cursor, ZERO);
      } else {
        assert.equal(e.cursor, b.cursor, `${state} ${id}`);
        assert.notEqual(b.cursor, ZERO);
      }
    }
  }
});

/** The catalog with each source's cursor (and the catalog's generated_at) removed. */
const catalogShape = (state) => {
  const c = catalog(state);
  return { ...c, generated_at: null, sources: c.sources.map((s) => ({ ...s, cursor: null })) };
};

function assertOnlyChanged(from, to, id) {
  const moved = SOURCES.filter((s) => entry(from, s).cursor !== entry(to, s).cursor);
  assert.deepEqual(moved, [id], `${from}→${to}: catalog cursors that moved`);
  const rewritten = SOURCES.filter((s) => !bytes(from, `diff/source/${s}/latest.json`).equals(bytes(to, `diff/source/${s}/latest.json`)));
  assert.deepEqual(rewritten, [id], `${from}→${to}: latest.json files that changed`);
  assert.deepEqual(
    changedFiles(from, to),
    ["diff/head.json", "diff/latest.json", `diff/source/${id}/head.json`, `diff/source/${id}/latest.json`, "diff/sources.json"].sort(),
  );
  assert.deepEqual(catalogShape(from), catalogShape(to), "the catalog is otherwise the same");

  const h1 = json(from, "diff/head.json");
  const h2 = json(to, "diff/head.json");
  assert.notEqual(h2.cursor, h1.cursor, "the global cursor moves");
  assert.equal(h2.prev_cursor, h1.cursor);
  assert.equal(h2.changed, true);

  const b1 = batch(from, id);
  const b2 = batch(to, id);
  assert.notEqual(b2.cursor, b1.cursor);
  assert.equal(b2.prev_cursor, b1.cursor, `${id} prev_cursor is its ${from} cursor`);
  assert.equal(b2.prev_hash, b1.hash);
  assert.equal(b2.changed, true);
  assert.equal(allItems(b2).length, 1, `${id} has one new item`);
  const oldIds = new Set(allItems(b1).map((i) => i.id));
  assert.ok(!oldIds.has(allItems(b2)[0].id), "the new item is new");

  // The global batch is only that run's changed items, verbatim.
  const g = json(to, "diff/latest.json");
  assert.deepEqual(g.buckets.items, allItems(b2));
  assert.equal(g.counts.items, 1);
}

test("v1 → v2: only nodejs_releases changes (and the global cursor)", () => {
  assertOnlyChanged("v1", "v2", "nodejs_releases");
});

test("v2 → v3: only gcp_status changes (and the global cursor)", () => {
  assertOnlyChanged("v2", "v3", "gcp_status");
});

test("v1's global batch is aws_status's last batch", () => {
  const g = json("v1", "diff/latest.json");
  assert.deepEqual(g.buckets.items, batch("v1", "aws_status").buckets.items);
  assert.ok(g.buckets.items.length > 0);
});

test("cisa_kev: every item in the flagged bucket, more than 50 of them", () => {
  for (const state of STATES) {
    const b = batch(state, "cisa_kev");
    assert.ok(b.buckets.flagged.length > 50);
    for (const [name, items] of Object.entries(b.buckets)) {
      if (name !== "flagged") assert.deepEqual(items, [], `bucket ${name} is empty`);
    }
    assert.ok(!("items" in b.buckets), "no spec-named items bucket");
    assert.equal(b.counts.flagged, b.buckets.flagged.length);
    assert.deepEqual(entry(state, "cisa_kev").tags, ["security"]);
  }
});

test("nist_nvd: the schema's `new` bucket, times without a zone", () => {
  for (const state of STATES) {
    const b = batch(state, "nist_nvd");
    assert.ok(!("items" in b.buckets));
    assert.ok(b.buckets.new.length > 0);
    assert.deepEqual(allItems(b), b.buckets.new);
    for (const it of b.buckets.new) {
      assert.match(it.published_at, ZONELESS);
      assert.match(it.updated_at, ZONELESS);
      assert.equal(typeof it.signals.severity.level, "string");
    }
    assert.equal(b.buckets.new[0].published_at, "2025-12-11T01:11:00");
  }
});

test("both timestamp styles are present; zoned ones end in Z", () => {
  const times = SOURCES.flatMap((id) => allItems(batch("v3", id)).map((i) => i.published_at));
  assert.ok(times.some((t) => ZONELESS.test(t)));
  assert.ok(times.some((t) => ZONED.test(t)));
  assert.ok(times.every((t) => ZONELESS.test(t) || ZONED.test(t)));
});

test("hn_front_page: its items exceed 512 KiB, in 50 items or fewer", () => {
  for (const state of STATES) {
    const items = allItems(batch(state, "hn_front_page"));
    assert.ok(items.length <= 50, "under the per-source item cap, so only the byte cap applies");
    const size = items.reduce((n, i) => n + Buffer.byteLength(JSON.stringify(i)) + 1, 0);
    assert.ok(size > 512 * 1024, `items are ${size} bytes`);
    assert.ok(items.every((i) => ZONED.test(i.published_at)));
    const order = items.map((i) => i.published_at);
    const asc = [...order].sort();
    assert.notDeepEqual(order, asc, "not ascending");
    assert.notDeepEqual(order, [...asc].reverse(), "not descending");
  }
});

test("github_changelog: disabled in the catalog (cursor null), zero cursor and an error in its batch", () => {
  for (const state of STATES) {
    const e = entry(state, "github_changelog");
    assert.equal(e.enabled, false);
    assert.equal(e.status, "disabled");
    assert.equal(e.cursor, null);
    assert.equal(e.stale, true);
    const b = batch(state, "github_changelog");
    assert.equal(b.cursor, ZERO);
    assert.equal(b.prev_cursor, ZERO);
    assert.equal(b.changed, false);
    assert.equal(b.status, "error");
    assert.equal(b.error, "HTTP 404");
    assert.equal(allItems(b).length, 0);
  }
});

test("aws_status: the catalog names the stale /diff/{id}/ path; the live batch is under /diff/source/{id}/", () => {
  for (const state of STATES) {
    const e = entry(state, "aws_status");
    assert.equal(e.latest_url, "/diff/aws_status/latest.json");
    assert.equal(e.head_url, "/diff/aws_status/head.json");
    const stale = json(state, "diff/aws_status/latest.json");
    assert.notEqual(stale.cursor, e.cursor, "the old path holds an older batch");
    assert.equal(batch(state, "aws_status").prev_cursor, stale.cursor);
    assert.equal(batch(state, "aws_status").cursor, e.cursor, "the live path matches the catalog");
    for (const s of catalog(state).sources.filter((s) => s.source_id !== "aws_status")) {
      assert.equal(s.latest_url, `/diff/source/${s.source_id}/latest.json`);
    }
  }
});

test("unknown members the upstream may add are present", () => {
  const known = ["source_id", "name", "tags", "description", "homepage", "upstream_url", "enabled", "status", "cursor",
    "ttl_sec", "head_url", "latest_url", "stale", "last_ok_at"];
  const e = entry("v1", "aws_status");
  assert.ok(Object.keys(e).some((k) => !known.includes(k)), "a catalog entry has an unknown member");
  const b = batch("v1", "aws_status");
  assert.ok("coverage" in b, "a batch has an unknown top-level member");
  assert.ok(Array.isArray(b.buckets.retracted), "a batch has an unknown bucket");
  assert.ok(b.buckets.items.some((i) => "x_region" in i), "an item has an unknown member");
});

test("only synthetic fixture hosts appear in item URLs", () => {
  for (const id of SOURCES) {
    for (const it of allItems(batch("v3", id))) assert.match(new URL(it.url).hostname, /\.fixture\.example$/);
  }
});

// ------------------------------------------------------------------ server

let fx;
before(async () => {
  fx = await startFixture({ port: 0, state: "v1" });
});
after(async () => {
  await fx?.close();
});

const post = (p) => fetch(fx.url + p, { method: "POST" });

test("server: files as served, with a strong ETag and cache-control", async () => {
  fx.setState("v1");
  for (const rel of ["diff/head.json", "diff/sources.json", "diff/latest.json", "diff/source/hn_front_page/latest.json"]) {
    const r = await fetch(`${fx.url}/${rel}`);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("content-type"), "application/json");
    assert.equal(r.headers.get("cache-control"), "max-age=300, must-revalidate");
    const body = Buffer.from(await r.arrayBuffer());
    assert.ok(body.equals(bytes("v1", rel)), `${rel} bytes as committed`);
    const tag = `"${createHash("sha256").update(body).digest("hex")}"`;
    assert.equal(r.headers.get("etag"), tag);
    assert.equal(etagOf(body), tag);
  }
});

test("server: If-None-Match → 304 (strong, weak, list, *); another tag → 200", async () => {
  fx.setState("v1");
  const first = await fetch(`${fx.url}/diff/head.json`);
  const tag = first.headers.get("etag");
  await first.arrayBuffer();
  for (const inm of [tag, `W/${tag}`, `"other", ${tag}`, "*"]) {
    const r = await fetch(`${fx.url}/diff/head.json`, { headers: { "if-none-match": inm } });
    assert.equal(r.status, 304, inm);
    assert.equal(r.headers.get("etag"), tag);
    assert.equal((await r.arrayBuffer()).byteLength, 0);
  }
  const r = await fetch(`${fx.url}/diff/head.json`, { headers: { "if-none-match": '"nope"' } });
  assert.equal(r.status, 200);
  await r.arrayBuffer();
});

test("server: 404 JSON for anything else", async () => {
  for (const p of ["/", "/diff/digest.json", "/diff/gcp_status/latest.json", "/diff/source/nope/latest.json", "/../package.json"]) {
    const r = await fetch(fx.url + p);
    assert.equal(r.status, 404, p);
    assert.equal(r.headers.get("content-type"), "application/json");
    assert.equal((await r.json()).error, "not_found");
  }
});

test("server: switching state (HTTP and in-process)", async () => {
  for (const state of STATES) {
    const r = await post(`/_fixture/state/${state}`);
    assert.equal(r.status, 200);
    assert.equal((await r.json()).state, state);
    assert.equal((await (await fetch(`${fx.url}/diff/head.json`)).json()).cursor, json(state, "diff/head.json").cursor);
  }
  const bad = await post("/_fixture/state/v9");
  assert.equal(bad.status, 404);
  await bad.arrayBuffer();
  assert.equal(fx.state(), "v3");
  fx.setState("v2");
  assert.equal((await (await fetch(`${fx.url}/diff/sources.json`)).json()).generated_at, catalog("v2").generated_at);
  assert.throws(() => fx.setState("v4"));
  const get = await fetch(`${fx.url}/_fixture/state/v1`);
  assert.equal(get.status, 405, "control changes need POST");
  await get.arrayBuffer();
  fx.setState("v1");
});

test("server: down → 503 for every non-control request; up restores", async () => {
  fx.setState("v1");
  assert.equal((await post("/_fixture/down")).status, 200);
  for (const p of ["/diff/head.json", "/diff/sources.json", "/nope"]) {
    const r = await fetch(fx.url + p);
    assert.equal(r.status, 503, p);
    assert.ok(r.headers.get("retry-after"));
    await r.arrayBuffer();
  }
  const ctl = await fetch(`${fx.url}/_fixture/requests`);
  assert.equal(ctl.status, 200, "control endpoints still answer");
  await ctl.arrayBuffer();
  assert.equal((await post("/_fixture/up")).status, 200);
  const r = await fetch(`${fx.url}/diff/head.json`);
  assert.equal(r.status, 200);
  await r.arrayBuffer();
  fx.down();
  const down = await fetch(`${fx.url}/diff/head.json`);
  assert.equal(down.status, 503);
  await down.arrayBuffer();
  fx.up();
});

test("server: malformed → /diff/head.json is not JSON (other files are); up restores", async () => {
  fx.setState("v1");
  await post("/_fixture/malformed");
  const r = await fetch(`${fx.url}/diff/head.json`);
  assert.equal(r.status, 200);
  const text = await r.text();
  assert.equal(text, MALFORMED_BODY);
  assert.throws(() => JSON.parse(text));
  assert.equal(r.headers.get("etag"), etagOf(Buffer.from(text)));
  const cat = await fetch(`${fx.url}/diff/sources.json`);
  assert.equal((await cat.json()).total, SOURCES.length);
  await post("/_fixture/up");
  assert.equal((await (await fetch(`${fx.url}/diff/head.json`)).json()).cursor, json("v1", "diff/head.json").cursor);
  fx.malformed();
  await assert.rejects((await fetch(`${fx.url}/diff/head.json`)).json(), SyntaxError);
  fx.up();
});

test("server: the request log lists served requests since the last reset (control ones excluded)", async () => {
  fx.setState("v1");
  fx.up();
  assert.equal((await post("/_fixture/requests/reset")).status, 200);
  const h = await fetch(`${fx.url}/diff/head.json`);
  const tag = h.headers.get("etag");
  await h.arrayBuffer();
  await (await fetch(`${fx.url}/diff/head.json`, { headers: { "if-none-match": tag } })).arrayBuffer();
  await (await fetch(`${fx.url}/diff/source/gcp_status/latest.json?x=1`)).arrayBuffer();
  await (await fetch(`${fx.url}/nope`)).arrayBuffer();
  await post("/_fixture/down");
  await (await fetch(`${fx.url}/diff/sources.json`)).arrayBuffer();
  await post("/_fixture/up");
  await (await fetch(`${fx.url}/diff/head.json`, { method: "POST" })).arrayBuffer();
  const expected = [
    { method: "GET", path: "/diff/head.json", status: 200 },
    { method: "GET", path: "/diff/head.json", status: 304 },
    { method: "GET", path: "/diff/source/gcp_status/latest.json", status: 200 },
    { method: "GET", path: "/nope", status: 404 },
    { method: "GET", path: "/diff/sources.json", status: 503 },
    { method: "POST", path: "/diff/head.json", status: 405 },
  ];
  assert.deepEqual(await (await fetch(`${fx.url}/_fixture/requests`)).json(), expected);
  assert.deepEqual(fx.requests(), expected);
  fx.resetRequests();
  assert.deepEqual(fx.requests(), []);
  assert.deepEqual(await (await fetch(`${fx.url}/_fixture/requests`)).json(), []);
});

test("server: listens on loopback only", async () => {
  assert.equal(fx.server.address().address, "127.0.0.1");
  assert.match(fx.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const others = Object.values(networkInterfaces())
    .flat()
    .filter((a) => a && !a.internal && a.family === "IPv4")
    .map((a) => a.address);
  for (const host of others) {
    const err = await new Promise((resolve) => {
      const s = connect({ host, port: fx.port });
      s.once("connect", () => {
        s.destroy();
        resolve(null);
      });
      s.once("error", resolve);
      s.setTimeout(2000, () => {
        s.destroy();
        resolve(new Error("timeout"));
      });
    });
    assert.ok(err, `${host}:${fx.port} must not accept connections`);
  }
});

test("CLI: --port 0 --state v3 prints its URL as a JSON line and serves v3", async () => {
  const child = spawn(process.execPath, [path.join(ROOT, "scripts", "ddv1-fixture-server.mjs"), "--port", "0", "--state", "v3"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  try {
    let timer;
    const line = await new Promise((resolve, reject) => {
      let out = "";
      child.stdout.on("data", (d) => {
        out += d;
        const nl = out.indexOf("\n");
        if (nl >= 0) resolve(out.slice(0, nl));
      });
      child.once("exit", (code) => reject(new Error(`exited ${code}`)));
      timer = setTimeout(() => reject(new Error("no output")), 10000);
    }).finally(() => clearTimeout(timer));
    const info = JSON.parse(line);
    assert.equal(info.state, "v3");
    assert.match(info.ddv1_fixture, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(info.ddv1_fixture, "http://127.0.0.1:0");
    const head = await (await fetch(`${info.ddv1_fixture}/diff/head.json`)).json();
    assert.equal(head.cursor, json("v3", "diff/head.json").cursor);
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    }
  }
});

test("CLI: a bad state is refused", async () => {
  await assert.rejects(
    promisify(execFile)(process.execPath, [path.join(ROOT, "scripts", "ddv1-fixture-server.mjs"), "--port", "0", "--state", "v7"]),
    (e) => e.code === 1 && /unknown state/.test(e.stderr),
  );
});
