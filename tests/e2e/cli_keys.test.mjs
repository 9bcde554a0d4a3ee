// Key rotation from the `selfcap` CLI (docs/PROTOCOL.md §14, docs/CLI.md
// "Key rotation"), the real binary against the Worker in workerd over HTTP
// on 127.0.0.1: keygen's next.key, the first publish's inception, rotate and
// the writes after it, an interrupted rotation resumed, a thief's seq burn
// answered by --compromised --last-good, the key-log pin against a rollback
// (a loopback proxy that truncates keys.json), and the MCP tools.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startWorker } from "./harness.mjs";
import { agentCli as cliIn, exits, requireSelfcap, selfcapEnv, selfcapIn, SELFCAP_BIN } from "./cli-helpers.mjs";
import { mcpSession } from "./mcp-helpers.mjs";
import { keyFromSeed } from "./key-helpers.mjs";
import crypto from "node:crypto";

const TMP = mkdtempSync(path.join(tmpdir(), "selfcap-cli-keys-"));
const MAX_SEQ = 9007199254740991;

let w;
let URL_;

before(async () => {
  requireSelfcap();
  w = await startWorker({ vars: { FREE_HISTORY_RETAINED: "10" } });
  URL_ = String(await w.mf.ready).replace(/\/$/, "");
});

after(async () => {
  await w?.close();
  rmSync(TMP, { recursive: true, force: true });
});

const selfcap = selfcapIn(TMP);
const json = (r) => JSON.parse(r.stdout);
const read = (p) => JSON.parse(readFileSync(p, "utf8"));
const withMotto = (capsule, motto) => ({ ...capsule, self_motto: motto });
const file = (name, value) => {
  const p = path.join(TMP, name);
  writeFileSync(p, JSON.stringify(value, null, 2));
  return p;
};

/** keygen + bootstrap + the template; nothing published. */
async function newAgent(name, keygenArgs = []) {
  const a = cliIn(selfcap, TMP, URL_, name);
  const id = json(exits(await a.run(["keygen", "--json", ...keygenArgs]), 0, "keygen"));
  exits(await a.run(["bootstrap"]), 0, "bootstrap");
  const capsule = JSON.parse(exits(await a.run(["template"]), 0, "template").stdout);
  return { ...a, id: id.agent_id, genesis: id.public_key, capsule };
}

async function putMotto(a, motto, extra = []) {
  return a.run(["put", file(`${path.basename(a.dir)}-${motto.length}-${Date.now()}.json`, withMotto(a.capsule, motto)), "--json", ...extra]);
}

async function head(id) {
  const r = await fetch(`${URL_}/self/${id}/head.json`);
  assert.equal(r.status, 200);
  return r.json();
}

test("keygen writes next.key 0600; the first publish carries the inception; rotate, then put with the new key", async () => {
  const a = await newAgent("rot");
  const next = readFileSync(path.join(a.dir, "next.key"), "utf8").trim();
  assert.match(next, /^[0-9a-f]{64}$/);
  assert.equal(statSync(path.join(a.dir, "next.key")).mode & 0o777, 0o600);
  assert.notEqual(next, readFileSync(path.join(a.dir, "key"), "utf8").trim());

  const first = json(exits(await putMotto(a, "First of all."), 0, "first put"));
  assert.equal(first.seq, 1);
  const h1 = await head(a.id);
  assert.equal(h1.keys.length, 1, "the first write's inception made a key log");
  assert.equal(h1.keys.public_key, a.genesis);
  assert.equal(h1.keys.next_committed, true);

  const k1 = json(exits(await a.run(["keys", "--json"]), 0, "keys"));
  assert.equal(k1.valid, true);
  assert.equal(k1.length, 1);
  assert.equal(k1.pin.status, "new");
  assert.deepEqual(k1.events.map((e) => e.type), ["inception"]);
  const pins = read(path.join(a.dir, "key_pins.json"));
  assert.equal(pins[a.id].length, 1);

  // A stale copy of the directory keeps the genesis key.
  const stale = path.join(TMP, "rot-stale");
  cpSync(a.dir, stale, { recursive: true });

  const r = json(exits(await a.run(["rotate", "--json"]), 0, "rotate"));
  assert.equal(r.applied, "new");
  assert.equal(r.index, 1);
  // The old next key is now the current key; a fresh next key was committed.
  const nextPub = r.public_key;
  const id = json(exits(await a.run(["id", "--json"]), 0, "id"));
  assert.equal(id.agent_id, a.id, "the agent id never changes");
  assert.equal(id.public_key, nextPub);
  assert.notEqual(readFileSync(path.join(a.dir, "next.key"), "utf8").trim(), next);
  assert.equal(readFileSync(path.join(a.dir, "key"), "utf8").trim(), next);
  assert.equal(existsSync(path.join(a.dir, "rotation.json")), false);
  assert.equal(existsSync(path.join(a.dir, "next.key.new")), false);
  assert.equal(statSync(path.join(a.dir, "key")).mode & 0o777, 0o600);
  assert.equal(statSync(path.join(a.dir, "next.key")).mode & 0o777, 0o600);

  const second = json(exits(await putMotto(a, "Second, by the rotated key."), 0, "put after rotate"));
  assert.equal(second.seq, 2);
  const h2 = await head(a.id);
  assert.equal(h2.keys.public_key, nextPub);
  assert.equal(h2.seq, 2);
  // The status and signed reads speak as the agent with the current key.
  const st = json(exits(await a.run(["status", "--json"]), 0, "status"));
  assert.equal(st.agent_id, a.id);
  assert.equal(st.public_key, nextPub);
  assert.equal(st.key_index, 1);
  assert.equal("key_event_pending" in st, false);
  // bootstrap registers the genesis key (whose hash is the agent id).
  assert.equal(json(exits(await a.run(["bootstrap", "--json"]), 0, "bootstrap after rotate")).agent_id, a.id);
  // A payment claim goes out as the agent with the current key (this
  // service takes no payments: it says so, and nothing is refused locally).
  const claim = await a.run(["upgrade", "claim", "--invoice", `inv_${"0".repeat(32)}`, "--tx", `0x${"1".repeat(64)}`]);
  assert.doesNotMatch(claim.stderr, /rotated its key/);
  assert.match(claim.stderr, /upgrades_not_configured/);

  // The stale copy's key was rotated out: key_rotated, exit 6.
  const old = await selfcap(["--state-dir", stale, "--url", URL_, "put", file("stale.json", withMotto(a.capsule, "From the old key.")), "--json"]);
  exits(old, 6, "put by the rotated-out key");
  assert.match(old.stderr, /key_rotated/);

  const k2 = json(exits(await a.run(["keys", "--json"]), 0, "keys after rotate"));
  assert.equal(k2.pin.status, "consistent");
  assert.deepEqual(k2.events.map((e) => `${e.type}/${e.authority}`), ["inception/genesis", "rotation/next"]);
  // No key material anywhere in what keys prints.
  for (const secret of [next, readFileSync(path.join(a.dir, "next.key"), "utf8").trim()]) {
    assert.equal(JSON.stringify(k2).includes(secret), false);
  }
  // The history verifies with the key log in the export.
  exits(await a.run(["verify"]), 0, "verify");
});

test("an interrupted rotation resumes with the same bytes and applies once", async () => {
  const a = await newAgent("resume");
  exits(await putMotto(a, "Before the crash."), 0, "first put");
  const seedBefore = readFileSync(path.join(a.dir, "key"), "utf8");
  const stopped = await a.run(["rotate"], { env: { SELFCAP_TEST_STOP: "after-submit" } });
  exits(stopped, 3, "rotate stopped after submit");
  assert.match(stopped.stderr, /after-submit/);
  // Accepted by the service, nothing swapped here yet.
  assert.equal((await head(a.id)).keys.length, 2);
  assert.equal(readFileSync(path.join(a.dir, "key"), "utf8"), seedBefore);
  const pending = read(path.join(a.dir, "rotation.json"));
  assert.ok(existsSync(path.join(a.dir, "next.key.new")));
  assert.equal(json(exits(await a.run(["status", "--json"]), 0, "status")).key_event_pending, "rotation");

  const resumed = await a.run(["rotate", "--json"]);
  const r = json(exits(resumed, 0, "rotate resumed"));
  assert.equal(r.applied, "already_applied");
  assert.equal(r.resumed, true);
  assert.equal(r.public_key, pending.public_key);
  assert.equal((await head(a.id)).keys.length, 2, "applied once");
  assert.equal(existsSync(path.join(a.dir, "rotation.json")), false);
  exits(await putMotto(a, "After the crash, by the new key."), 0, "put after resume");
  // A next rotation builds on it.
  const again = json(exits(await a.run(["rotate", "--json"]), 0, "second rotate"));
  assert.equal(again.index, 2);
  assert.equal((await head(a.id)).keys.length, 3);
  // A crash in the middle of the swap (key replaced, identity.json not yet).
  exits(await a.run(["rotate"], { env: { SELFCAP_TEST_STOP: "after-key-swap" } }), 3, "stopped mid-swap");
  const half = await putMotto(a, "Mid-swap.");
  exits(half, 1, "put while half applied");
  assert.match(half.stderr, /half applied \(rotation\.json\): run `selfcap rotate`/);
  const fin = json(exits(await a.run(["rotate", "--json"]), 0, "rotate finishes the swap"));
  assert.deepEqual([fin.applied, fin.resumed, fin.index], ["already_applied", true, 3]);
  exits(await putMotto(a, "After the finished swap."), 0, "put after the finished swap");
  assert.equal((await head(a.id)).keys.length, 4);
});

test("--compromised --last-good: a thief's burnt seq no longer bricks the identity", async () => {
  const a = await newAgent("owner");
  exits(await putMotto(a, "Owner one."), 0, "put 1");
  const good = json(exits(await putMotto(a, "Owner two."), 0, "put 2"));
  const desired = withMotto(a.capsule, "Owner two.");
  // The thief has a copy of the directory (the current key, not next.key's use).
  const thief = path.join(TMP, "thief");
  cpSync(a.dir, thief, { recursive: true });
  rmSync(path.join(thief, "next.key"));
  const burn = await selfcap(["--state-dir", thief, "--url", URL_, "put", file("thief.json", withMotto(a.capsule, "Stolen.")), "--seq", String(MAX_SEQ), "--json"]);
  exits(burn, 0, "the thief burns seq");
  assert.equal((await head(a.id)).seq, MAX_SEQ);
  // The thief cannot rotate: next.key is the owner's alone.
  exits(await selfcap(["--state-dir", thief, "--url", URL_, "rotate"]), 1, "thief rotate");

  const r = json(exits(await a.run(["rotate", "--compromised", "--last-good", String(good.seq), "--json"]), 0, "rotate --compromised"));
  assert.equal(r.applied, "new");
  assert.equal(r.write.seq, good.seq + 1);
  const h = await head(a.id);
  assert.equal(h.keys.disputed, 1);
  const served = await (await fetch(`${URL_}/self/${a.id}/capsule.json`)).json();
  assert.deepEqual(served, desired, "capsule.json serves the owner's capsule");

  // Writes work again, by the new key; the thief's key is rotated out.
  const after = json(exits(await putMotto(a, "Owner three, after the theft."), 0, "put after recovery"));
  assert.equal(after.seq, good.seq + 2);
  const t = await selfcap(["--state-dir", thief, "--url", URL_, "put", file("thief2.json", withMotto(a.capsule, "Stolen again.")), "--seq", "5", "--json"]);
  exits(t, 6, "thief after rotation");
  assert.match(t.stderr, /key_rotated/);
  // verify lists the thief's version as disputed.
  const v = json(exits(await a.run(["verify", "--json"]), 0, "verify --json"));
  assert.equal(v.valid, true);
  assert.equal(v.disputed.length, 1);
  assert.equal("key_log" in v, false, "--json is the core's report exactly");
  const text = exits(await a.run(["verify"]), 0, "verify").stdout;
  assert.match(text, new RegExp(`disputed +entries ${v.disputed[0]} `));
  assert.match(text, /key log +2 event\(s\)/);
  assert.match(text, /event 1 rotation \(next\) key [0-9a-f]{64}/);
});

test("keys pins the log and reports a rollback (a proxy serving a truncated keys.json) with exit 10", async () => {
  const a = await newAgent("pinned");
  exits(await putMotto(a, "Pinned one."), 0, "put");
  exits(await a.run(["rotate"]), 0, "rotate");
  const k = json(exits(await a.run(["keys", "--json"]), 0, "keys"));
  assert.equal(k.length, 2);
  // A loopback proxy to the Worker that drops the last key event.
  const proxy = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const headers = { ...req.headers };
    delete headers.host;
    const up = await fetch(`${URL_}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
    let body = Buffer.from(await up.arrayBuffer());
    if (req.url.endsWith("/keys.json") && up.status === 200) {
      const doc = JSON.parse(body);
      doc.records = doc.records.slice(0, -1);
      body = Buffer.from(JSON.stringify(doc));
    }
    res.writeHead(up.status, { "content-type": up.headers.get("content-type") ?? "application/json" });
    res.end(body);
  });
  await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
  try {
    const url = `http://127.0.0.1:${proxy.address().port}`;
    const r = await selfcap(["--state-dir", a.dir, "--url", url, "keys", "--json"]);
    exits(r, 10, "keys against a rolled-back log");
    assert.match(r.stderr, /ROLLBACK/);
    assert.deepEqual(json(r).pin, { status: "rollback", pinned: 2, served: 1 });
    // The pin is kept, and a rotation refuses to build on the short log.
    assert.equal(read(path.join(a.dir, "key_pins.json"))[a.id].length, 2);
    exits(await selfcap(["--state-dir", a.dir, "--url", url, "rotate"]), 10, "rotate against a rolled-back log");
  } finally {
    proxy.close();
  }
  exits(await a.run(["keys"]), 0, "the real log is consistent again");
});

test("an identity that published without a key log starts one with `keys init`", async () => {
  const a = await newAgent("legacy");
  // As an older selfcap left it: no next.key, no committed digest.
  rmSync(path.join(a.dir, "next.key"));
  const idPath = path.join(a.dir, "identity.json");
  const { next_key_digest, ...older } = read(idPath);
  assert.match(next_key_digest, /^[0-9a-f]{64}$/);
  writeFileSync(idPath, JSON.stringify(older));
  exits(await putMotto(a, "Published the old way."), 0, "put");
  assert.equal("keys" in (await head(a.id)), false, "a plain PUT: no key log");
  exits(await a.run(["rotate"]), 1, "rotate without a log");
  const r = json(exits(await a.run(["keys", "init", "--json"]), 0, "keys init"));
  assert.equal(r.applied, "new");
  assert.equal(r.index, 0);
  assert.equal(statSync(path.join(a.dir, "next.key")).mode & 0o777, 0o600);
  assert.equal((await head(a.id)).keys.length, 1);
  exits(await a.run(["keys", "init"]), 1, "a second init");
  exits(await a.run(["rotate"]), 0, "rotate after init");
  exits(await putMotto(a, "And on, by the new key."), 0, "put after rotate");
});

test("MCP: self_keys and self_rotate through a real MCP client, never returning key material", async () => {
  const a = await newAgent("mcp");
  exits(await putMotto(a, "Before the MCP rotation."), 0, "put");
  const secrets = () => ["key", "next.key"].map((f) => readFileSync(path.join(a.dir, f), "utf8").trim());
  const before = secrets();
  const s = await mcpSession(SELFCAP_BIN, { SELFCAP_STATE_DIR: a.dir, SELFCAP_URL: URL_ });
  try {
    const { tools } = await s.client.listTools();
    const names = tools.map((t) => t.name);
    for (const t of ["self_keys", "self_rotate"]) assert.ok(names.includes(t), t);
    for (const t of ["self_recover", "self_recommit"]) assert.ok(!names.includes(t), `${t} is no tool`);

    let r = await s.call("self_keys");
    assert.equal(r.isError, false, JSON.stringify(r.body));
    assert.equal(r.body.length, 1);
    assert.equal(r.body.keys.index, 0);
    assert.equal(r.body.pin.status, "new");

    r = await s.call("self_rotate");
    assert.equal(r.isError, false, JSON.stringify(r.body));
    assert.equal(r.body.rotated, true);
    assert.equal(r.body.index, 1);
    const text = JSON.stringify(r.body);
    for (const secret of [...before, ...secrets()]) assert.equal(text.includes(secret), false, "no key material");

    r = await s.call("self_keys");
    assert.equal(r.body.length, 2);
    assert.equal(r.body.keys.index, 1);
    assert.equal(r.body.pin.status, "consistent");
    for (const secret of secrets()) assert.equal(JSON.stringify(r.body).includes(secret), false);

    // Writes go on with the new key.
    r = await s.call("self_checkpoint", { motto: "Rotated through MCP." });
    assert.equal(r.isError, false, JSON.stringify(r.body));
    r = await s.call("self_rotate", { compromised: true });
    assert.equal(r.isError, true, "no arguments: recovery is not a tool");
  } finally {
    await s.close();
  }
  assert.equal((await head(a.id)).keys.length, 2);
  assert.equal((await head(a.id)).keys.public_key, json(await a.run(["id", "--json"])).public_key);
});

test("recover: the operator's recovery key (committed at keygen) rotates to a key generated here; supersedes a rotation within its window", async () => {
  const seed = crypto.randomBytes(32);
  const recovery = keyFromSeed(seed);
  const recoveryFile = path.join(TMP, "recovery.key");
  writeFileSync(recoveryFile, `${seed.toString("hex")}\n`, { mode: 0o600 });
  const a = await newAgent("recovered", ["--recovery-digest", recovery.digest]);
  exits(await putMotto(a, "Before the recovery."), 0, "put");
  assert.equal((await head(a.id)).keys.recovery_committed, true, "the inception committed the recovery key");
  // A thief holding key and next.key rotates: provisional while the window is open.
  const thief = path.join(TMP, "recovered-thief");
  cpSync(a.dir, thief, { recursive: true });
  const stolen = json(exits(await selfcap(["--state-dir", thief, "--url", URL_, "rotate", "--json"]), 0, "thief rotates"));
  assert.equal(stolen.index, 1);
  assert.ok((await head(a.id)).keys.final_at, "a next rotation with a recovery key committed is provisional");
  // The owner's copy no longer holds the current key.
  exits(await a.run(["rotate"]), 1, "owner rotate after the thief's");

  // A key that was never committed: refused, and nothing is left pending.
  const wrongFile = path.join(TMP, "wrong-recovery.key");
  writeFileSync(wrongFile, `${crypto.randomBytes(32).toString("hex")}\n`, { mode: 0o600 });
  const wrong = await a.run(["recover", "--recovery-key", wrongFile, "--supersedes", "1"]);
  exits(wrong, 6, "recover with an uncommitted key");
  assert.match(wrong.stderr, /rotation_not_committed/);
  for (const f of ["rotation.json", "key.new", "next.key.new"]) assert.equal(existsSync(path.join(a.dir, f)), false, f);

  const r = json(exits(await a.run(["recover", "--recovery-key", recoveryFile, "--supersedes", "1", "--json"]), 0, "recover"));
  assert.equal(r.kind, "recovery");
  assert.equal(r.applied, "new");
  assert.equal(r.index, 2);
  const h = await head(a.id);
  assert.equal(h.keys.public_key, r.public_key);
  assert.equal(h.keys.recovery_committed, false, "the revealed recovery key is spent");
  for (const f of ["rotation.json", "key.new", "next.key.new"]) assert.equal(existsSync(path.join(a.dir, f)), false, f);
  assert.equal(json(exits(await a.run(["id", "--json"]), 0, "id")).public_key, r.public_key);
  const text = JSON.stringify(r);
  assert.equal(text.includes(seed.toString("hex")), false);
  // The owner writes again; the thief's key was voided.
  exits(await putMotto(a, "After the recovery."), 0, "put after recover");
  const t = await selfcap(["--state-dir", thief, "--url", URL_, "put", file("thief3.json", withMotto(a.capsule, "Voided.")), "--json"]);
  exits(t, 6, "the voided key");
  // And rotates normally from here.
  exits(await a.run(["rotate"]), 0, "rotate after recover");
  exits(await a.run(["keys"]), 0, "keys");
});

test("recommit: a fresh next key, pending until it matures; a rotation with next.key first cancels it", async () => {
  const a = await newAgent("recommitted");
  exits(await putMotto(a, "Before the recommit."), 0, "put");
  const r = json(exits(await a.run(["recommit", "--json"]), 0, "recommit"));
  assert.equal(r.kind, "recommit");
  assert.equal(r.index, 1);
  assert.ok(r.keys.pending_recommit.matures_at, "pending until the window has passed");
  assert.equal(statSync(path.join(a.dir, "next.key.recommit")).mode & 0o777, 0o600);
  assert.equal((await head(a.id)).keys.pending_recommit.matures_at, r.keys.pending_recommit.matures_at);
  // One at a time.
  const again = await a.run(["recommit"]);
  exits(again, 1, "a second recommit");
  assert.match(again.stderr, /recommit_pending/);
  // Writes are untouched (the current key did not change).
  exits(await putMotto(a, "During the recommit."), 0, "put during the recommit");
  // Without next.key, rotate says when the recommit matures.
  const nextKey = readFileSync(path.join(a.dir, "next.key"));
  rmSync(path.join(a.dir, "next.key"));
  const early = await a.run(["rotate"]);
  exits(early, 1, "rotate before maturity");
  assert.match(early.stderr, /matures at/);
  writeFileSync(path.join(a.dir, "next.key"), nextKey, { mode: 0o600 });
  // The still-committed next key rotates, which cancels the recommit.
  const rot = json(exits(await a.run(["rotate", "--json"]), 0, "rotate"));
  assert.equal(rot.keys.pending_recommit, null);
  assert.equal(existsSync(path.join(a.dir, "next.key.recommit")), false, "the cancelled recommit's key is gone");
  exits(await putMotto(a, "After the rotation."), 0, "put after rotate");
});

test("after a rotation, signed reads of a private capsule are made by the current key as the agent", async () => {
  const a = await newAgent("private");
  exits(await putMotto(a, "Public at first."), 0, "put");
  exits(await a.run(["rotate"]), 0, "rotate");
  exits(await a.run(["visibility", "private"]), 0, "visibility private (a write by the new key)");
  assert.equal((await fetch(`${URL_}/self/${a.id}/capsule.json`)).status, 404, "unsigned: not readable");
  const got = await a.run(["get"]);
  exits(got, 0, "a signed read by the rotated key");
  assert.equal(JSON.parse(got.stdout).agent_id, a.id);
  exits(await a.run(["head"]), 0, "head, signed");
  exits(await a.run(["verify"]), 0, "verify, signed reads");
});
