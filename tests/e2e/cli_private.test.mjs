// Private capsules end to end (docs/PROTOCOL.md §12): the `selfcap` CLI
// (target/debug/selfcap) and the independent TypeScript implementation (tests/interop/ts)
// against the Worker in workerd, over real HTTP on 127.0.0.1. The owner makes
// its capsule private with `selfcap visibility private`; anonymous reads then
// get 404 while its own reads (signed) go on working, on this machine and on
// a fresh one that only has the key; a second identity reads only what
// `selfcap grant` lets it, until `selfcap revoke`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { startWorker } from "./harness.mjs";
import { agentCli as cliIn, exits, requireSelfcap, selfcapIn } from "./cli-helpers.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const TMP = mkdtempSync(path.join(tmpdir(), "selfcap-private-"));
const TS_EXAMPLE = path.join(ROOT, "tests", "interop", "ts", "dist", "example.js");
const LOOPBACK = { NO_PROXY: "127.0.0.1,localhost", no_proxy: "127.0.0.1,localhost" };

let w;
let URL_;

before(async () => {
  requireSelfcap();
  w = await startWorker({
    vars: { FREE_HISTORY_RETAINED: "20", FREE_WRITES_PER_24H: "50", FREE_NEW_AGENTS_PER_IP_24H: "100" },
  });
  URL_ = String(await w.mf.ready).replace(/\/$/, "");
});

after(async () => {
  await w?.close();
  rmSync(TMP, { recursive: true, force: true });
});

const selfcap = selfcapIn(TMP);

function agentCli(name) {
  return cliIn(selfcap, TMP, URL_, name);
}

const json = (r) => JSON.parse(r.stdout);

/** keygen, bootstrap, and a first public capsule (seq 1). */
async function publishedAgent(name) {
  const a = agentCli(name);
  const id = json(exits(await a.run(["keygen", "--json"]), 0, "keygen"));
  exits(await a.run(["bootstrap"]), 0, "bootstrap");
  const capsule = { ...JSON.parse((await a.run(["template"])).stdout), self_motto: `I am ${name}.` };
  const p = path.join(TMP, `${name}.json`);
  writeFileSync(p, JSON.stringify(capsule));
  exits(await a.run(["put", p]), 0, "put");
  return { ...a, id: id.agent_id };
}

const seqOf = async (a) => json(exits(await a.run(["status", "--json"]), 0, "status")).published_seq;

/** An anonymous read, as any browser or cache would make it. */
const anonymous = (id, doc) => w.fetch(`/self/${id}/${doc}`);

let owner;
let reader;

test("grant, revoke and visibility are documented", async () => {
  const top = await selfcap(["--help"]);
  for (const cmd of ["grant", "revoke", "visibility"]) {
    assert.match(top.stdout, new RegExp(`\\n  ${cmd} `), cmd);
    const h = exits(await selfcap([cmd, "--help"]), 0, `${cmd} --help`);
    assert.match(h.stdout, /Usage: selfcap/);
  }
  const g = await selfcap(["grant", "--help"]);
  for (const flag of ["--scope", "--expires", "--private", "--json"]) assert.match(g.stdout, new RegExp(flag));
});

test("visibility private: anonymous reads get 404, the owner's own reads are signed and work", async () => {
  owner = await publishedAgent("owner");
  reader = await publishedAgent("reader");
  assert.equal((await anonymous(owner.id, "capsule.json")).status, 200, "public to start with");

  const v = exits(await owner.run(["visibility", "private", "--json"]), 0, "visibility private");
  assert.equal(json(v).seq, 2);
  assert.match(v.stderr, /visibility private/);
  const stored = JSON.parse(readFileSync(path.join(owner.dir, "capsule.json"), "utf8"));
  assert.deepEqual(stored.access_control, { public: false });
  // Publishing again has nothing to send.
  assert.match(exits(await owner.run(["visibility", "private"]), 0, "again").stdout, /^clean: nothing to publish/);

  // Anonymous: byte for byte what an agent that never published gets.
  const never = await anonymous("f".repeat(64), "capsule.json");
  for (const doc of ["capsule.json", "head.json", "history.json", "export.json", "verify.json"]) {
    const r = await anonymous(owner.id, doc);
    assert.equal(r.status, 404, doc);
    assert.equal(r.text, never.text, doc);
  }

  // The owner: every read signed, every read works.
  const got = exits(await owner.run(["get"]), 0, "get");
  assert.deepEqual(JSON.parse(got.stdout).access_control, { public: false });
  assert.match(exits(await owner.run(["head", "--json"]), 0, "head").stdout, /"seq": 2|"status": "unchanged"/);
  const hist = json(exits(await owner.run(["history", "--json"]), 0, "history"));
  assert.deepEqual(hist.versions.map((x) => x.seq), [2, 1]);
  exits(await owner.run(["export"]), 0, "export");
  assert.match(exits(await owner.run(["verify"]), 0, "verify").stdout, /^valid: /);
  exits(await owner.run(["rehydrate"]), 0, "rehydrate");

  // A fresh machine with only the key: the local state does not know the
  // capsule is private; the 404 is asked again, signed.
  const m2 = agentCli("owner-machine-2");
  mkdirSync(m2.dir, { mode: 0o700 });
  writeFileSync(path.join(m2.dir, "key"), readFileSync(path.join(owner.dir, "key")), { mode: 0o600 });
  const r2 = exits(await m2.run(["rehydrate", "--json"]), 0, "rehydrate on a fresh machine");
  assert.match(r2.stderr, /rehydrated seq 2 .* from the service/);
  assert.equal(JSON.parse(r2.stdout).access_control.public, false);
  assert.equal(await seqOf(m2), 2);
});

test("a second identity reads only what it is granted, until revoked", async () => {
  const denied = exits(await reader.run(["get", owner.id]), 7, "get before any grant");
  assert.match(denied.stderr, /private/);
  exits(await reader.run(["head", owner.id]), 7, "head before any grant");

  // READ_CAPSULE only.
  const g = exits(await owner.run(["grant", reader.id, "--scope", "capsule", "--json"]), 0, "grant capsule");
  assert.equal(json(g).seq, 3);
  assert.match(g.stderr, new RegExp(`granted ${reader.id} READ_CAPSULE`));
  const readers = JSON.parse(readFileSync(path.join(owner.dir, "capsule.json"), "utf8")).access_control.authorized_readers;
  assert.equal(readers.length, 1);
  assert.equal(readers[0].agent_id, reader.id);
  assert.deepEqual(readers[0].scopes, ["READ_CAPSULE"]);
  assert.match(readers[0].granted_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  const got = exits(await reader.run(["get", owner.id]), 0, "get with READ_CAPSULE");
  assert.equal(JSON.parse(got.stdout).self_motto, "I am owner.");
  exits(await reader.run(["head", owner.id]), 7, "head without READ_HEAD");
  exits(await reader.run(["history", owner.id]), 7, "history without READ_HISTORY");

  // Granting again replaces the grant: READ_HEAD only.
  exits(await owner.run(["grant", reader.id, "--scope", "head"]), 0, "grant head");
  exits(await reader.run(["get", owner.id]), 7, "get with READ_HEAD only");
  const h = json(exits(await reader.run(["head", owner.id, "--json"]), 0, "head with READ_HEAD"));
  assert.equal(h.head.seq, 4);

  // Every scope, no expiry: the bare id; history and verify work too.
  exits(await owner.run(["grant", reader.id]), 0, "grant all");
  const all = JSON.parse(readFileSync(path.join(owner.dir, "capsule.json"), "utf8")).access_control.authorized_readers;
  assert.deepEqual(all, [reader.id]);
  exits(await reader.run(["get", owner.id]), 0, "get with every scope");
  exits(await reader.run(["history", owner.id]), 0, "history with every scope");
  assert.match(exits(await reader.run(["verify", owner.id]), 0, "verify").stdout, /^valid: /);

  // Revoked: 404 again. Revoking someone not listed writes nothing.
  const r = exits(await owner.run(["revoke", reader.id]), 0, "revoke");
  assert.match(r.stderr, /revoked/);
  exits(await reader.run(["get", owner.id]), 7, "get after revoke");
  exits(await reader.run(["head", owner.id]), 7, "head after revoke");
  const seq = await seqOf(owner);
  const noop = exits(await owner.run(["revoke", reader.id]), 0, "revoke again");
  assert.match(noop.stdout, /not a reader/);
  assert.equal(await seqOf(owner), seq, "nothing written");
});

test("expiring grants: a past expiry is refused locally, a future one works", async () => {
  const seq = await seqOf(owner);
  const past = exits(await owner.run(["grant", reader.id, "--expires", "2001-01-01T00:00:00Z"]), 1, "past expiry");
  assert.match(past.stderr, /not in the future/);
  const bad = exits(await owner.run(["grant", reader.id, "--expires", "next week"]), 1, "not a time");
  assert.match(bad.stderr, /RFC 3339/);
  exits(await owner.run(["grant", reader.id, "--scope", "everything"]), 1, "unknown scope");
  exits(await owner.run(["grant", owner.id]), 1, "granting oneself");
  assert.equal(await seqOf(owner), seq, "nothing written");
  assert.equal(json(await owner.run(["status", "--json"])).dirty, false, "capsule.json untouched");

  const soon = new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, "+00:00");
  exits(await owner.run(["grant", reader.id, "--scope", "capsule", "--expires", soon]), 0, "future expiry");
  const [grant] = JSON.parse(readFileSync(path.join(owner.dir, "capsule.json"), "utf8")).access_control.authorized_readers;
  assert.equal(grant.expires_at, soon.replace("+00:00", "Z"));
  exits(await reader.run(["get", owner.id]), 0, "get before expiry");
});

test("visibility public: anyone reads again, and the grant list stays", async () => {
  exits(await owner.run(["visibility", "public"]), 0, "visibility public");
  const r = await anonymous(owner.id, "capsule.json");
  assert.equal(r.status, 200);
  assert.equal(r.json.access_control.public, true);
  assert.equal(r.json.access_control.authorized_readers[0].agent_id, reader.id);
  // --private on a grant makes it private again in the same write.
  const seq = await seqOf(owner);
  exits(await owner.run(["grant", reader.id, "--private"]), 0, "grant --private");
  assert.equal(await seqOf(owner), seq + 1);
  assert.equal((await anonymous(owner.id, "capsule.json")).status, 404);
  exits(await reader.run(["get", owner.id]), 0, "granted reader");
});

const run = promisify(execFile);

function checkSnippet(stdout) {
  const out = JSON.parse(stdout);
  assert.match(out.agent_id, /^[0-9a-f]{64}$/);
  assert.deepEqual(
    { anonymous: out.anonymous, owner: out.owner, reader: out.reader, reader_head: out.reader_head },
    { anonymous: 404, owner: 200, reader: 200, reader_head: 404 },
  );
  return out;
}

test("independent TypeScript implementation: a signed read of a private capsule", async () => {
  assert.ok(existsSync(TS_EXAMPLE), `${TS_EXAMPLE} missing: run \`npm test --prefix tests/interop/ts\``);
  const { stdout } = await run(process.execPath, [TS_EXAMPLE, URL_, "private"]);
  const out = checkSnippet(stdout);
  assert.equal((await anonymous(out.agent_id, "capsule.json")).status, 404);
});
