// `selfcap watch` (target/debug/selfcap) against the Worker in workerd, over
// real HTTP and WebSocket on 127.0.0.1: each new head as one JSON line, in
// order, over the WebSocket (GET /self/{id}/watch) and over long-poll
// (head.json?wait=N with If-None-Match), forced with the hidden
// `--transport`; `--exec` once per head; an agent with no capsule yet; and
// private capsules (docs/PROTOCOL.md §13: a watcher that may not read one is
// told nothing, as for an agent with no capsule; the owner and a granted
// reader watch with signed requests; a watcher that may no longer read is
// closed with 4404, and `selfcap watch` exits 7). Writes go straight to the Worker (helpers.mjs) or
// through the CLI; each write waits for its line, so no two heads can be
// coalesced (a watch may report only the latest of changes that come
// faster than a poll round).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startWorker } from "./harness.mjs";
import { SELFCAP_BIN as BIN, agentCli as cliIn, exits, requireSelfcap, selfcapEnv, selfcapIn } from "./cli-helpers.mjs";
import { cursorOf, exampleCapsule, headPath, newAgent, publish } from "./helpers.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const TMP = mkdtempSync(path.join(tmpdir(), "selfcap-watch-"));
/** How long a line (or an exit) may take to show up. */
const WITHIN_MS = 15_000;

let w;
let URL_;
/** Every watcher started, so none outlives the file. */
const watchers = new Set();

before(async () => {
  requireSelfcap();
  w = await startWorker({
    vars: { FREE_WRITES_PER_24H: "50", FREE_NEW_AGENTS_PER_IP_24H: "100" },
  });
  URL_ = String(await w.mf.ready).replace(/\/$/, "");
});

after(async () => {
  for (const c of watchers) c.kill("SIGKILL");
  await w?.close();
  rmSync(TMP, { recursive: true, force: true });
});

const env = () => selfcapEnv(TMP);
const selfcap = selfcapIn(TMP);

/**
 * Starts `selfcap watch ARGS` (anonymous: an empty state directory, unless
 * `dir` is an identity's) and follows its output.
 */
function startWatch(args, { dir = path.join(TMP, `anonymous-${watchers.size}`), home } = {}) {
  // `dir: null`: no --state-dir at all, the identities' home (HOME) decides.
  const where = dir === null ? [] : ["--state-dir", dir];
  const child = spawn(BIN, [...where, "--url", URL_, "watch", ...args], {
    env: home === undefined ? env() : selfcapEnv(home),
    stdio: ["ignore", "pipe", "pipe"],
  });
  watchers.add(child);
  let stdout = "";
  let stderr = "";
  const waiting = new Set();
  const recheck = () => {
    for (const wt of waiting) if (wt.ready()) wt.done();
  };
  child.stdout.on("data", (d) => {
    stdout += d;
    recheck();
  });
  child.stderr.on("data", (d) => {
    stderr += d;
    recheck();
  });
  let exitCode;
  const exited = new Promise((resolve) =>
    child.on("close", (code) => {
      exitCode = code;
      watchers.delete(child);
      recheck();
      resolve(code);
    }),
  );
  const lines = () => stdout.split("\n").filter(Boolean);
  const until = (ready, what, ms = WITHIN_MS) =>
    new Promise((resolve, reject) => {
      const fail = () => new Error(`watch ${args.join(" ")}: no ${what} within ${ms} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`);
      if (ready()) return resolve();
      if (exitCode !== undefined) return reject(fail());
      const wt = {
        ready: () => ready() || exitCode !== undefined,
        done: () => {
          clearTimeout(timer);
          waiting.delete(wt);
          ready() ? resolve() : reject(fail());
        },
      };
      const timer = setTimeout(() => {
        waiting.delete(wt);
        reject(fail());
      }, ms);
      waiting.add(wt);
    });
  return {
    /** The heads printed so far, parsed. */
    heads: () => lines().map((l) => JSON.parse(l)),
    lines,
    stderr: () => stderr,
    /** Resolves once at least `n` lines were printed. */
    lineCount: (n) => until(() => lines().length >= n, `line ${n}`),
    /** Resolves once stderr matches `re`. */
    says: (re) => until(() => re.test(stderr), `stderr matching ${re}`),
    /** Resolves to the exit code. */
    exit: (ms) => until(() => exitCode !== undefined, "exit", ms).then(() => exitCode),
    /** Still running. */
    running: () => exitCode === undefined,
    /** SIGTERM; resolves to the exit code (null: killed by the signal). */
    async stop() {
      child.kill("SIGTERM");
      return exited;
    },
  };
}

/** No Rust panic or backtrace ever reaches the user. */
function assertClean(watcher) {
  assert.doesNotMatch(watcher.stderr(), /panicked|RUST_BACKTRACE|stack backtrace/);
}

/** A short pause, to let a stray duplicate line arrive if there is one. */
const settle = () => new Promise((r) => setTimeout(r, 500));

/** Publishes version `seq` of `agent`'s capsule straight to the Worker; its expected cursor. */
async function write(agent, seq) {
  const capsule = exampleCapsule(agent.agentId, { self_motto: `Version ${seq} of this capsule.` });
  const r = await publish(w, agent, seq, capsule);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.cursor, cursorOf(capsule));
  return r.json.cursor;
}

/** Checks that `line` is `agent`'s head.json body for `seq` and `cursor`. */
function assertHead(line, agent, seq, cursor) {
  assert.equal(line.agent_id, agent.agentId);
  assert.equal(line.seq, seq);
  assert.equal(line.cursor, cursor);
  assert.match(line.generated_at, /^\d{4}-\d\d-\d\dT/);
  for (const field of ["prev_cursor", "changed", "ttl_sec", "capsule_url", "writes", "tier"]) {
    assert.ok(field in line, `a head has ${field}: ${JSON.stringify(line)}`);
  }
}

test("watch is documented; its transport flag is hidden", async () => {
  const top = await selfcap(["--help"]);
  assert.equal(top.code, 0);
  assert.match(top.stdout, /\n {2}watch /);
  const h = await selfcap(["watch", "--help"]);
  assert.equal(h.code, 0);
  assert.match(h.stdout, /Usage: selfcap watch \[OPTIONS\] \[AGENT_ID\]/);
  assert.match(h.stdout, /--exec <CMD>/);
  assert.match(h.stdout, /long-poll/);
  assert.doesNotMatch(h.stdout, /--transport/);
  const bad = await selfcap(["watch", "f".repeat(64), "--transport", "smoke-signals"]);
  assert.equal(bad.code, 2);
  const notAnId = await selfcap(["--state-dir", path.join(TMP, "none"), "--url", URL_, "watch", "xyz"]);
  assert.equal(notAnId.code, 1);
  assert.match(notAnId.stderr, /not an agent id/);
});

for (const [transport, over] of [
  ["ws", /watching over WebSocket/],
  ["longpoll", /watching over long-poll/],
]) {
  test(`--transport ${transport}: the current head at once, then one line per write, in order`, async () => {
    const agent = newAgent();
    const cursors = [await write(agent, 1)];
    const watcher = startWatch([agent.agentId, "--transport", transport]);
    try {
      await watcher.lineCount(1);
      await watcher.says(over);
      for (const seq of [2, 3, 4]) {
        cursors.push(await write(agent, seq));
        await watcher.lineCount(seq);
      }
      await settle();
      const heads = watcher.heads();
      assert.equal(heads.length, 4, watcher.lines().join("\n"));
      heads.forEach((h, i) => assertHead(h, agent, i + 1, cursors[i]));
      // Compact JSON, one head per line, and the same document head.json serves.
      for (const line of watcher.lines()) assert.equal(line, JSON.stringify(JSON.parse(line)));
      const served = (await w.fetch(headPath(agent.agentId))).json;
      assert.equal(served.cursor, heads[3].cursor);
      assert.equal(served.seq, heads[3].seq);
    } finally {
      await watcher.stop();
    }
    assertClean(watcher);
  });
}

for (const transport of ["ws", "longpoll"]) {
  test(`--transport ${transport}: an identical capsule republished is not a new head`, async () => {
    const agent = newAgent();
    const capsule = exampleCapsule(agent.agentId, { self_motto: "Same capsule twice." });
    assert.equal((await publish(w, agent, 1, capsule)).status, 200);
    const watcher = startWatch([agent.agentId, "--transport", transport]);
    try {
      await watcher.lineCount(1);
      // seq 2, same cursor (changed: false): not printed, whether pushed or not.
      assert.equal((await publish(w, agent, 2, capsule)).status, 200);
      const cursor3 = await write(agent, 3);
      await watcher.lineCount(2);
      await settle();
      assert.deepEqual(watcher.heads().map((h) => [h.seq, h.cursor]), [
        [1, cursorOf(capsule)],
        [3, cursor3],
      ]);
    } finally {
      await watcher.stop();
    }
    assertClean(watcher);
  });
}

test("auto, no capsule yet, --exec: nothing until the first write, then CMD once per head", async () => {
  const agent = newAgent();
  const out = path.join(TMP, "exec-heads.jsonl");
  const watcher = startWatch([agent.agentId, "--exec", `cat >> '${out}'`]);
  const execLines = () => (existsSync(out) ? readFileSync(out, "utf8").split("\n").filter(Boolean) : []);
  try {
    // Connected (an agent with no capsule is upgraded and sent nothing).
    await watcher.says(/watching over WebSocket/);
    await settle();
    assert.equal(execLines().length, 0);
    const cursors = [];
    for (const seq of [1, 2, 3]) {
      cursors.push(await write(agent, seq));
      const end = Date.now() + WITHIN_MS;
      while (execLines().length < seq) {
        if (Date.now() > end) assert.fail(`no head ${seq} from --exec\n${watcher.stderr()}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    await settle();
    const heads = execLines().map((l) => JSON.parse(l));
    assert.equal(heads.length, 3);
    heads.forEach((h, i) => assertHead(h, agent, i + 1, cursors[i]));
    assert.equal(watcher.lines().length, 0, "--exec prints nothing itself");
  } finally {
    await watcher.stop();
  }
  assertClean(watcher);
});

test("--exec: a failing CMD is reported on stderr and the watch goes on", async () => {
  const agent = newAgent();
  await write(agent, 1);
  const watcher = startWatch([agent.agentId, "--exec", "exit 3"]);
  try {
    await watcher.says(/--exec: .*exit 3.*watching on/);
    await write(agent, 2);
    await watcher.says(/(--exec: [^\n]*\n[^]*){2}/);
  } finally {
    await watcher.stop();
  }
  assertClean(watcher);
});

// --- Private capsules: identities made with the CLI, as a user would. ---

function agentCli(name) {
  return cliIn(selfcap, TMP, URL_, name);
}

/** keygen, bootstrap, and a first public capsule (seq 1). */
async function cliAgent(name) {
  const a = agentCli(name);
  const id = JSON.parse(exits(await a.run(["keygen", "--json"]), 0, "keygen").stdout);
  exits(await a.run(["bootstrap"]), 0, "bootstrap");
  const template = JSON.parse((await a.run(["template"])).stdout);
  let version = 0;
  /** Publishes a new version of the capsule (keeping access_control); its seq. */
  const putVersion = async () => {
    version += 1;
    const current = existsSync(path.join(a.dir, "capsule.json"))
      ? JSON.parse(readFileSync(path.join(a.dir, "capsule.json"), "utf8"))
      : template;
    const p = path.join(TMP, `${name}-${version}.json`);
    writeFileSync(p, JSON.stringify({ ...current, self_motto: `I am ${name}, version ${version}.` }));
    return JSON.parse(exits(await a.run(["put", p, "--json"]), 0, "put").stdout).seq;
  };
  await putVersion();
  return { ...a, id: id.agent_id, putVersion };
}

let owner;
let reader;

test("a capsule going private closes an anonymous watcher with 4404: exit 7", async () => {
  owner = await cliAgent("owner");
  reader = await cliAgent("reader");
  const watcher = startWatch([owner.id]);
  try {
    await watcher.lineCount(1);
    exits(await owner.run(["visibility", "private"]), 0, "visibility private");
    assert.equal(await watcher.exit(), 7, watcher.stderr());
    assert.match(watcher.stderr(), /4404/);
    // Only the public head was ever printed.
    assert.deepEqual(watcher.heads().map((h) => h.seq), [1]);
  } finally {
    await watcher.stop();
  }
  assertClean(watcher);
});

for (const transport of ["ws", "longpoll"]) {
  test(`--transport ${transport}: an anonymous watcher of a private capsule is told nothing; the owner's watch is signed`, async () => {
    const anonymous = startWatch([owner.id, "--transport", transport]);
    // The owner knows its capsule is private: signed from the first request.
    const own = startWatch([owner.id, "--transport", transport], { dir: owner.dir });
    try {
      await own.lineCount(1);
      const seq = await owner.putVersion();
      await own.lineCount(2);
      assert.deepEqual(own.heads().map((h) => h.seq), [seq - 1, seq]);
      assert.doesNotMatch(own.stderr(), /signature/);
      await settle();
      // Exactly as for an agent with no capsule: connected, nothing printed, still waiting.
      assert.equal(anonymous.lines().length, 0, anonymous.lines().join("\n"));
      assert.ok(anonymous.running(), anonymous.stderr());
    } finally {
      await own.stop();
      await anonymous.stop();
    }
    assertClean(own);
    assertClean(anonymous);
  });
}

test("a granted reader watches signed (head.json tells it to sign); revoked, it is closed and exits 7", async () => {
  exits(await owner.run(["grant", reader.id, "--scope", "head"]), 0, "grant head");
  const watchers = {};
  try {
    for (const transport of ["ws", "longpoll"]) {
      watchers[transport] = startWatch([owner.id, "--transport", transport], { dir: reader.dir });
      await watchers[transport].lineCount(1);
      await watchers[transport].says(/not readable anonymously \(404 capsule_not_found\); reading with this identity's signature/);
    }
    const seq = await owner.putVersion();
    for (const watcher of Object.values(watchers)) {
      await watcher.lineCount(2);
      assert.deepEqual(watcher.heads().map((h) => h.seq), [seq - 1, seq]);
    }
    // Revoked: the WebSocket is closed with 4404 at once. The long-poll in
    // flight ends as a 304 after its wait (a commit this reader may not read
    // does not end it), and the next one as a 404 after its own: up to two
    // waits of 25 s.
    exits(await owner.run(["revoke", reader.id]), 0, "revoke");
    assert.equal(await watchers.ws.exit(), 7, watchers.ws.stderr());
    assert.match(watchers.ws.stderr(), /4404/);
    const lpWait = 2 * 25_000 + WITHIN_MS;
    assert.equal(await watchers.longpoll.exit(lpWait), 7, watchers.longpoll.stderr());
    assert.match(watchers.longpoll.stderr(), /404 capsule_not_found/);
    for (const watcher of Object.values(watchers)) {
      assert.equal(watcher.lines().length, 2, "nothing after the revocation");
      assertClean(watcher);
    }
  } finally {
    for (const watcher of Object.values(watchers)) await watcher.stop();
  }
});

test("watching or reading another agent's public capsule needs no identity, also with several and no --agent", async () => {
  const a = newAgent();
  const cursor = await write(a, 1);
  const empty = mkdtempSync(path.join(TMP, "no-identity-"));
  const several = mkdtempSync(path.join(TMP, "several-"));
  const inSeveral = selfcapIn(several);
  for (let i = 0; i < 2; i++) exits(await inSeveral(["keygen"]), 0, "keygen");
  for (const home of [empty, several]) {
    const watcher = startWatch([a.agentId], { dir: null, home });
    try {
      await watcher.lineCount(1);
      assertHead(watcher.heads()[0], a, 1, cursor);
    } finally {
      await watcher.stop();
    }
    assertClean(watcher);
    const run = selfcapIn(home);
    const head = await run(["--url", URL_, "head", a.agentId, "--json"]);
    exits(head, 0, "head");
    assert.equal(JSON.parse(head.stdout).head.cursor, cursor);
    const got = await run(["--url", URL_, "get", a.agentId]);
    exits(got, 0, "get");
    assert.equal(cursorOf(JSON.parse(got.stdout)), cursor);
    exits(await run(["--url", URL_, "history", a.agentId]), 0, "history");
  }
  // Without an AGENT_ID the identity is the target: still asked for.
  const own = await selfcapIn(empty)(["--url", URL_, "head"]);
  assert.notEqual(own.code, 0);
  assert.match(own.stderr, /no identity/);
});
