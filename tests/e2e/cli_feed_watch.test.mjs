// `selfcap feed --watch` (target/debug/selfcap) against the Worker in
// workerd over real HTTP and WebSocket on 127.0.0.1, with the ddv1 fixture
// feed on loopback (tests/fixtures/ddv1/, three states) and Pro agents
// credited through the real upgrade path on a local chain (docs/PROTOCOL.md
// §15, "Push"): the current projected head at once, then one line each time
// a refresh moves a source the watch selects and none for one that moves
// only others, over the WebSocket (GET /api/v1/watch/socket) and over
// long-poll (head?wait=N, forced with the hidden `--transport`); `--exec`
// once per head; the refusals (watch_requires_pro, watch_not_set) end it
// with the exit code `selfcap feed` has for them; a private capsule's feed
// is read signed after one plain read says so; a watcher the capsule is
// made private to is closed (4404) and exits 7. Expected cursors are
// computed here from the fixture files and the spec's formula.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startWorker } from "./harness.mjs";
import { agentFromSeed, exampleCapsule, publish } from "./helpers.mjs";
import { startChain, upgradeVars } from "./upgrade-helpers.mjs";
import { startFixture } from "../../scripts/ddv1-fixture-server.mjs";
import { CRON, expectedCursor, agentWith as sharedAgentWith } from "./feed-helpers.mjs";
import { SELFCAP_BIN as BIN, exits, requireSelfcap, selfcapEnv, selfcapIn } from "./cli-helpers.mjs";

const TMP = mkdtempSync(path.join(tmpdir(), "selfcap-feed-watch-"));
/** How long a line (or an exit) may take to show up. */
const WITHIN_MS = 15_000;
/** How long to wait for a line that must not come. */
const QUIET_MS = 2_000;
const CLOUD = ["aws_status", "gcp_status"];
const NODE = ["nodejs_releases"];

let chain;
let fixture;
let w;
let URL_;
/** Every watcher started, so none outlives the file. */
const watchers = new Set();

const headPath = (id) => `/api/v1/watch/head?agent_id=${id}`;
const scheduled = async () => (await w.mf.getWorker()).scheduled({ cron: CRON });
async function toState(state) {
  await fixture.setState(state);
  await scheduled();
}

const agentWith = (watch, opts) => sharedAgentWith(w, chain, watch, opts);

before(async () => {
  requireSelfcap();
  chain = await startChain();
  fixture = await startFixture({ port: 0, state: "v1" });
  w = await startWorker({ vars: upgradeVars(chain, { SELFCAP_WATCH_UPSTREAM: fixture.url }) });
  URL_ = new URL(w.origin).origin;
  await scheduled();
});
after(async () => {
  for (const c of watchers) c.kill("SIGKILL");
  await w?.close();
  await fixture?.close();
  await chain?.stop();
  rmSync(TMP, { recursive: true, force: true });
});

const selfcap = selfcapIn(TMP);
/** `selfcap feed ARGS` once, anonymous. */
const feedOnce = (args) => selfcap(["--state-dir", path.join(TMP, "anonymous-once"), "--url", URL_, "feed", ...args]);

/**
 * Starts `selfcap feed --watch ARGS` (anonymous: an empty state directory,
 * unless `dir` is an identity's) and follows its output.
 */
function startFeedWatch(args, { dir = path.join(TMP, `anonymous-${watchers.size}`) } = {}) {
  const child = spawn(BIN, ["--state-dir", dir, "--url", URL_, "feed", "--watch", ...args], {
    env: selfcapEnv(TMP),
    stdio: ["ignore", "pipe", "pipe"],
  });
  watchers.add(child);
  let stdout = "";
  let stderr = "";
  let exitCode;
  let wake = () => {};
  child.stdout.on("data", (d) => ((stdout += d), wake()));
  child.stderr.on("data", (d) => ((stderr += d), wake()));
  const exited = new Promise((resolve) =>
    child.on("close", (code) => {
      exitCode = code;
      watchers.delete(child);
      wake();
      resolve(code);
    }),
  );
  const lines = () => stdout.split("\n").filter(Boolean);
  /** Resolves once `ready()`; rejects after `ms`, or at an exit that did not make it so. */
  async function until(ready, what, ms = WITHIN_MS) {
    const end = Date.now() + ms;
    while (!ready()) {
      if (exitCode !== undefined || Date.now() >= end) {
        throw new Error(`feed --watch ${args.join(" ")}: no ${what} within ${ms} ms (exit ${exitCode})\nstdout:\n${stdout}\nstderr:\n${stderr}`);
      }
      await new Promise((r) => {
        const t = setTimeout(r, Math.min(250, Math.max(1, end - Date.now())));
        wake = () => (clearTimeout(t), r());
      });
    }
  }
  return {
    heads: () => lines().map((l) => JSON.parse(l)),
    lines,
    stderr: () => stderr,
    lineCount: (n) => until(() => lines().length >= n, `line ${n}`),
    says: (re) => until(() => re.test(stderr), `stderr matching ${re}`),
    exit: (ms) => until(() => exitCode !== undefined, "exit", ms).then(() => exitCode),
    async stop() {
      if (exitCode === undefined) child.kill("SIGTERM");
      return exited;
    },
  };
}

/** No Rust panic or backtrace ever reaches the user. */
function assertClean(watcher) {
  assert.doesNotMatch(watcher.stderr(), /panicked|RUST_BACKTRACE|stack backtrace/);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const withoutTime = ({ generated_at, ...rest }) => rest;

test("feed --watch is documented; --exec and --transport need --watch, which excludes --latest and --digest", async () => {
  const h = await selfcap(["feed", "--help"]);
  exits(h, 0, "feed --help");
  assert.match(h.stdout, /--watch/);
  assert.match(h.stdout, /--exec <CMD>/);
  assert.match(h.stdout, /\/api\/v1\/watch\/socket/);
  assert.match(h.stdout, /watch_requires_pro/);
  assert.doesNotMatch(h.stdout, /--transport/);
  const id = "f".repeat(64);
  for (const args of [["--exec", "cat"], ["--transport", "ws"], ["--watch", "--latest"], ["--watch", "--digest"]]) {
    assert.equal((await selfcap(["feed", id, ...args])).code, 2, args.join(" "));
  }
});

test("the current projected head at once, then a line only when a watched source moves: WebSocket, long-poll, --exec", async () => {
  const cloud = await agentWith({ tags: ["cloud-status"] });
  const node = await agentWith({ sources: NODE });
  const out = path.join(TMP, "exec-heads");
  const run = {
    cloudWs: startFeedWatch([cloud.agentId]),
    cloudLp: startFeedWatch([cloud.agentId, "--transport", "longpoll"]),
    cloudExec: startFeedWatch([cloud.agentId, "--exec", `cat >> '${out}'`]),
    nodeWs: startFeedWatch([node.agentId, "--transport", "ws"]),
    nodeLp: startFeedWatch([node.agentId, "--transport", "longpoll"]),
  };
  const cloudLines = [run.cloudWs, run.cloudLp];
  const nodeLines = [run.nodeWs, run.nodeLp];
  const execLines = () => (existsSync(out) ? readFileSync(out, "utf8").split("\n").filter(Boolean) : []);
  try {
    for (const x of [...cloudLines, ...nodeLines]) await x.lineCount(1);
    await run.cloudWs.says(/watching over WebSocket/);
    await run.nodeWs.says(/watching over WebSocket/);
    await run.cloudLp.says(/watching over long-poll/);
    await run.nodeLp.says(/watching over long-poll/);
    const served = (await w.fetch(headPath(cloud.agentId))).json;
    for (const x of cloudLines) {
      const [h] = x.heads();
      assert.equal(h.cursor, expectedCursor("v1", CLOUD));
      assert.deepEqual(withoutTime(h), withoutTime(served), "a line is the projected head");
      assert.equal(x.lines()[0], JSON.stringify(h), "compact JSON, one line");
    }
    for (const x of nodeLines) assert.equal(x.heads()[0].cursor, expectedCursor("v1", NODE));
    const end = Date.now() + WITHIN_MS;
    while (execLines().length < 1 && Date.now() < end) await sleep(100);
    assert.equal(run.cloudExec.lines().length, 0, "--exec prints nothing itself");

    await toState("v2"); // moves nodejs_releases only
    for (const x of nodeLines) {
      await x.lineCount(2);
      const [n0, n1] = x.heads();
      assert.equal(n1.cursor, expectedCursor("v2", NODE));
      assert.equal(n1.prev_cursor, n0.cursor);
      assert.equal(n1.changed, true);
    }
    await sleep(QUIET_MS);
    for (const x of cloudLines) assert.equal(x.lines().length, 1, `cloud's sources did not move:\n${x.lines().join("\n")}`);

    await toState("v3"); // moves gcp_status only
    for (const x of cloudLines) {
      await x.lineCount(2);
      const [c0, c1] = x.heads();
      assert.equal(c1.cursor, expectedCursor("v3", CLOUD));
      assert.equal(c1.prev_cursor, c0.cursor);
    }
    // A refresh that moves nothing (the upstream answers 304) prints nothing either.
    await scheduled();
    await sleep(QUIET_MS);
    for (const x of nodeLines) assert.equal(x.lines().length, 2, `nodejs_releases did not move:\n${x.lines().join("\n")}`);
    for (const x of cloudLines) assert.equal(x.lines().length, 2, x.lines().join("\n"));
    const execd = execLines().map((l) => JSON.parse(l).cursor);
    assert.deepEqual(execd, [expectedCursor("v1", CLOUD), expectedCursor("v3", CLOUD)], "CMD once per new head, the head on stdin");
  } finally {
    for (const x of Object.values(run)) await x.stop();
  }
  for (const x of Object.values(run)) assertClean(x);
});

test("a refused feed ends the watch with selfcap feed's exit code: watch_requires_pro (free), watch_not_set", async () => {
  const free = await agentWith({ tags: ["cloud-status"] }, { pro: false });
  const none = await agentWith(null, { pro: false });
  for (const [agent, code] of [
    [free, "watch_requires_pro"],
    [none, "watch_not_set"],
  ]) {
    const once = await feedOnce([agent.agentId]);
    assert.notEqual(once.code, 0, once.stderr);
    assert.match(once.stderr, new RegExp(code));
    for (const transport of [[], ["--transport", "ws"], ["--transport", "longpoll"]]) {
      const x = startFeedWatch([agent.agentId, ...transport]);
      assert.equal(await x.exit(), once.code, x.stderr());
      assert.match(x.stderr(), new RegExp(code));
      if (transport[1] !== "longpoll") {
        // Said by the upgrade's own JSON refusal, never by a detour through long-poll.
        assert.match(x.stderr(), /watch\/socket/);
        assert.doesNotMatch(x.stderr(), /long-poll/);
      }
      assert.equal(x.lines().length, 0);
      assertClean(x);
    }
  }
});

test("a private capsule's feed: its owner watches signed after one plain read; an anonymous watcher is refused, and closed (4404) when it goes private", async () => {
  // The owner: a CLI identity whose key also signs the writes here.
  const ownerDir = path.join(TMP, "owner");
  exits(await selfcap(["--state-dir", ownerDir, "keygen"]), 0, "keygen");
  const seed = readFileSync(path.join(ownerDir, "key"), "utf8").trim();
  const owner = await agentWith({ tags: ["cloud-status"] }, { agent: agentFromSeed(seed), extra: { access_control: { public: false } } });
  const own = startFeedWatch([], { dir: ownerDir });
  try {
    await own.lineCount(1);
    await own.says(/not readable anonymously \(404 capsule_not_found\); reading with this identity's signature/);
    const [h] = own.heads();
    assert.equal(h.agent_id, owner.agentId);
    assert.equal(h.cursor, expectedCursor("v3", CLOUD));
  } finally {
    await own.stop();
  }
  assertClean(own);
  const anonymous = startFeedWatch([owner.agentId]);
  assert.equal(await anonymous.exit(), 7, anonymous.stderr());
  assert.match(anonymous.stderr(), /capsule_not_found/);

  // Public, watched anonymously; a commit that makes it private closes the socket.
  const pub = await agentWith({ tags: ["cloud-status"] });
  const watcher = startFeedWatch([pub.agentId]);
  try {
    await watcher.lineCount(1);
    const capsule = exampleCapsule(pub.agentId, { watch: { tags: ["cloud-status"] }, access_control: { public: false } });
    const r = await publish(w, pub, 2, capsule, { ip: pub.ip });
    assert.equal(r.status, 200, r.text);
    assert.equal(await watcher.exit(), 7, watcher.stderr());
    assert.match(watcher.stderr(), /4404/);
    assert.equal(watcher.lines().length, 1);
  } finally {
    await watcher.stop();
  }
  assertClean(watcher);
});
