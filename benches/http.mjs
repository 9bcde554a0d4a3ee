// `npm run bench`: the built service (its two Workers: the entry, which
// answers reads, and the write Worker behind its service binding) next to
// floor Workers (benches/floors/),
// each in its own workerd (Miniflare) on 127.0.0.1, in the same process and
// the same run, under the same load from autocannon. What is reported is
// ours / floor, so figures from different machines compare:
//
//   head.json 200, head.json 304, capsule.json 200 against the read floor (one
//   KV get, a JSON answer); accepted PUTs (16 connections, one agent each)
//   against the write floor (a JS Durable Object: one storage put, one KV put)
//   and against the same-I/O floor (our storage, KV and cache operations and
//   nothing else, so ours / it is the cost of our own code); and the
//   required-I/O floor (only the I/O the service's durability and read-after-write rules impose on
//   any implementation) against the write floor, which bounds that target;
//   the first answer of a fresh isolate against a trivial Worker's and the
//   read floor's (the same first KV get), and the whole start (a new runtime
//   to its first answer) of each, the entry Worker alone as a location loads
//   it for a read; the first write of a fresh isolate
//   against warm writes of the same instance, next to the same-I/O floor's
//   own first and warm writes (what the runtime alone adds to a first write).
//
// Env: BENCH_SECONDS (per read scenario, default 5), BENCH_CONNECTIONS
// (default 16), BENCH_WRITES (accepted PUTs per side, default 640),
// BENCH_ROUNDS (fresh-isolate rounds, default 5), BENCH_READ_ROUNDS and
// BENCH_WRITE_ROUNDS (the read and flat-out write runs come in rounds, every
// side in turn, defaults 3 and 4: the machine is shared and its load
// changes), BENCH_OLD (a directory
// holding an earlier build of the service as one Worker, index.js and
// index_bg.wasm: its reads, writes and starts are measured beside ours in
// the same run).
import autocannon from "autocannon";
import { Miniflare } from "miniflare";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { randomBytes } from "node:crypto";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { newAgent, envelope, exampleCapsule, cursorOf } from "../tests/e2e/helpers.mjs";
import { serviceOptions, DURABLE_OBJECTS } from "../tests/e2e/harness.mjs";
import { listenerPid, treeCpuMs } from "./cpu.mjs";
import { workerSize, overBudget, WORKER_BUDGET } from "../scripts/worker-size.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BUILD = path.join(ROOT, "build");
const FLOORS = path.join(ROOT, "benches", "floors");
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const WRITES = Number(process.env.BENCH_WRITES ?? 640);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const OLD = process.env.BENCH_OLD ? path.resolve(process.env.BENCH_OLD) : null;
// Rounds of the read and write runs: each round runs every side in turn.
const READ_ROUNDS = Number(process.env.BENCH_READ_ROUNDS ?? 3);
const WRITE_ROUNDS = Number(process.env.BENCH_WRITE_ROUNDS ?? 4);

const compatibilityDate = readFileSync(path.join(ROOT, "wrangler.toml"), "utf8").match(
  /^compatibility_date\s*=\s*"([^"]+)"/m,
)[1];

/** The runtime's options, for every instance. */
const shared = {
  host: "127.0.0.1",
  port: 0,
  telemetry: { enabled: false },
  kvPersist: false,
  durableObjectsPersist: false,
  cachePersist: false,
  structuredWorkerdLogs: true,
  handleStructuredLogs: () => {},
};
const common = { ...shared, modules: true, compatibilityDate, kvNamespaces: ["SELF"] };

/** Quotas out of the way, so every benchmark PUT is a real accept. */
const BENCH_VARS = { FREE_WRITES_PER_24H: "1000000000", FREE_NEW_AGENTS_PER_IP_24H: "1000000000" };

/** Self Capsule as built and deployed: both Workers, as the e2e harness runs them. */
function ours() {
  return new Miniflare({
    ...shared,
    workers: serviceOptions({
      vars: BENCH_VARS,
      secrets: { SERVICE_SIGNING_KEY: randomBytes(32).toString("hex") },
      assets: false,
    }),
  });
}

/**
 * The entry Worker alone, as a location loads it to answer a read: no
 * Durable Object and no write Worker bound (a read needs neither), so the
 * runtime starts nothing else.
 */
function entryAlone(vars = {}) {
  const [entry] = serviceOptions({ vars: { ...BENCH_VARS, ...vars }, assets: false, withoutDurableObjects: true });
  return new Miniflare({ ...shared, workers: [{ ...entry, serviceBindings: {} }] });
}

/** The test clock's request header: a read that sends it bypasses the read cache. */
const TEST_NOW = { "x-selfcap-test-now": String(Date.now()) };

/** The earlier build in BENCH_OLD: the service as one Worker. */
function old() {
  return new Miniflare({
    ...common,
    scriptPath: path.join(OLD, "index.js"),
    modulesRoot: OLD,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    durableObjects: DURABLE_OBJECTS,
    bindings: { ...BENCH_VARS, SERVICE_SIGNING_KEY: randomBytes(32).toString("hex") },
  });
}

function floor(file, extra = {}) {
  return new Miniflare({ ...common, scriptPath: path.join(FLOORS, file), modulesRoot: FLOORS, ...extra });
}

const writeFloor = () =>
  floor("write.mjs", { durableObjects: { FLOOR_AGENT: { className: "FloorAgent", useSQLite: true } } });
const sameIoFloor = () =>
  floor("write_same_io.mjs", { durableObjects: { SAME_IO_AGENT: { className: "SameIoAgent", useSQLite: true } } });
const requiredIoFloor = () =>
  floor("write_required.mjs", { durableObjects: { REQUIRED_AGENT: { className: "RequiredAgent", useSQLite: true } } });

async function originOf(mf) {
  const origin = (await mf.ready).origin;
  if (!/^http:\/\/(127\.0\.0\.1|\[::1\]|localhost)(:\d+)?$/.test(origin)) {
    throw new Error(`refusing to benchmark non-loopback ${origin}`);
  }
  return origin;
}

/** One autocannon run; counts answers by status class. */
async function load(opts) {
  // sampleInt: autocannon ends a run of a fixed `amount` only at its next
  // sample tick, so with the default 1 s tick the duration (and req/s) of a
  // write run was quantised to whole seconds, ~10 % here.
  const r = await autocannon({ connections: CONNECTIONS, timeout: 60, sampleInt: 100, ...opts });
  return {
    // Over the run's own duration (autocannon's per-second average is
    // coarse for a fixed number of requests).
    rps: Math.round(r.requests.total / r.duration),
    seconds: r.duration,
    p50_ms: r.latency.p50,
    p99_ms: r.latency.p99,
    total: r.requests.total,
    by_status: { "2xx": r["2xx"], "3xx": r["3xx"], "4xx": r["4xx"], "5xx": r["5xx"] },
    errors: r.errors,
    timeouts: r.timeouts,
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * Several runs of one side as one: requests over their summed duration, the
 * median of their p50s and p99s, every answer and error counted. The rounds
 * alternate the sides, so a machine whose load changes meanwhile (it is
 * shared) weighs on each side alike.
 */
function merged(runs) {
  const sum = (f) => runs.reduce((a, r) => a + f(r), 0);
  const seconds = sum((r) => r.seconds);
  return {
    rps: Math.round(sum((r) => r.total) / seconds),
    seconds: +seconds.toFixed(2),
    p50_ms: median(runs.map((r) => r.p50_ms)),
    p99_ms: median(runs.map((r) => r.p99_ms)),
    total: sum((r) => r.total),
    by_status: Object.fromEntries(["2xx", "3xx", "4xx", "5xx"].map((c) => [c, sum((r) => r.by_status[c])])),
    errors: sum((r) => r.errors),
    timeouts: sum((r) => r.timeouts),
    round_rps: runs.map((r) => r.rps),
  };
}

async function timedFetch(url, init) {
  const t = performance.now();
  const r = await fetch(url, init);
  await r.arrayBuffer();
  return { ms: performance.now() - t, status: r.status };
}

const putInit = (body) => ({
  method: "PUT",
  headers: { "content-type": "application/json", "cf-connecting-ip": "127.0.0.1" },
  body,
});

/** Signed PUT bodies: `count` agents with `each` strictly increasing seqs. */
function signedWrites(count, each, label) {
  return Array.from({ length: count }, () => {
    const a = newAgent();
    const bodies = Array.from({ length: each }, (_, i) =>
      JSON.stringify(envelope(a, i + 1, exampleCapsule(a.agentId, { self_motto: `${label} state ${i + 1}.` }))),
    );
    return { id: a.agentId, bodies };
  });
}

/**
 * autocannon requests: each connection writes its own agent, seq 1, 2, …
 * (autocannon keeps a connection's `context` while it walks the list, and
 * each connection walks it from the start).
 */
function perConnectionWrites(agents) {
  let next = 0;
  const each = Math.min(...agents.map((a) => a.bodies.length));
  return Array.from({ length: each }, (_, k) => ({
    method: "PUT",
    setupRequest: (req, context) => {
      if (!context.agent) context.agent = agents[next++ % agents.length];
      return { ...req, path: `/self/${context.agent.id}/capsule.json`, body: context.agent.bodies[k] };
    },
  }));
}

const results = {
  reads: [],
  writes: null,
  writes_paced: null,
  writes_same_io: null,
  required_io: null,
  cold: null,
  fresh_write: null,
  push: null,
};

// ---- reads ---------------------------------------------------------------
// Ours (the entry Worker answers every one of these), the read floor and,
// with BENCH_OLD, the earlier one-Worker build, all reading the same record.
{
  const self = ours();
  const readFloor = floor("read.mjs");
  const before = OLD ? old() : null;
  const [oursOrigin, floorOrigin] = [await originOf(self), await originOf(readFloor)];
  const oldOrigin = before ? await originOf(before) : null;
  const agent = newAgent();
  const capsule = exampleCapsule(agent.agentId);
  const first = await fetch(`${oursOrigin}/self/${agent.agentId}/capsule.json`, putInit(JSON.stringify(envelope(agent, 1, capsule))));
  if (first.status !== 200) throw new Error(`setup PUT failed: ${first.status} ${await first.text()}`);
  const kvKey = `self:capsule:${agent.agentId}`;
  const record = await (await self.getKVNamespace("SELF")).get(kvKey);
  await (await readFloor.getKVNamespace("SELF")).put(kvKey, record);
  if (before) await (await before.getKVNamespace("SELF")).put(kvKey, record);
  const etag = `"${cursorOf(capsule).slice(7)}"`;
  const scenarios = [
    ["GET head.json (200)", `/self/${agent.agentId}/head.json`, {}],
    ["GET head.json (304, If-None-Match)", `/self/${agent.agentId}/head.json`, { "if-none-match": etag }],
    ["GET capsule.json (200)", `/self/${agent.agentId}/capsule.json`, {}],
  ];
  const origins = [oursOrigin, floorOrigin, ...(oldOrigin ? [oldOrigin] : [])];
  // Warm all (JIT tiers), then alternate ours / floor (/ old) per scenario.
  for (const [, p, headers] of scenarios) {
    for (const origin of origins) await load({ url: origin + p, headers, duration: 1 });
  }
  for (const [name, p, headers] of scenarios) {
    const runs = { o: [], f: [], b: [] };
    for (let round = 0; round < READ_ROUNDS; round++) {
      runs.o.push(await load({ url: oursOrigin + p, headers, duration: SECONDS }));
      runs.f.push(await load({ url: floorOrigin + p, headers, duration: SECONDS }));
      if (oldOrigin) runs.b.push(await load({ url: oldOrigin + p, headers, duration: SECONDS }));
    }
    const [o, f] = [merged(runs.o), merged(runs.f)];
    const b = oldOrigin ? merged(runs.b) : null;
    results.reads.push({
      name,
      ours: o,
      floor: f,
      ratio: +(o.rps / f.rps).toFixed(2),
      ...(b ? { old: b, old_ratio: +(b.rps / f.rps).toFixed(2), ours_over_old: +(o.rps / b.rps).toFixed(2) } : {}),
    });
  }
  await self.dispose();
  await readFloor.dispose();
  await before?.dispose();
}

// ---- accepted writes -----------------------------------------------------
{
  const self = ours();
  const wf = writeFloor();
  const sf = sameIoFloor();
  const rf = requiredIoFloor();
  const [oursOrigin, floorOrigin, sameOrigin, requiredOrigin] = [
    await originOf(self),
    await originOf(wf),
    await originOf(sf),
    await originOf(rf),
  ];
  // Steady state: the measured agents already exist (their first writes,
  // which also take a new-agent slot of the client's address, are the
  // warm-up), as for an agent that writes a few times a day for months. The
  // first write of a fresh isolate is measured on its own below.
  const WARM = 4;
  // The flat-out writes run in rounds, every side in turn. A connection of an
  // amount-limited run may send more than its share, and autocannon starts a
  // connection's list over when it reaches its end (a replayed seq, a 409):
  // each connection gets twice its share per round, and a round starts after
  // the last body the one before could have used (seqs may skip, never repeat).
  const perRound = Math.ceil(WRITES / WRITE_ROUNDS);
  const roundSpan = 2 * Math.ceil(perRound / CONNECTIONS) + 8;
  const each = WRITE_ROUNDS * roundSpan;
  const paced = 2 * Math.ceil(WRITES / 2 / CONNECTIONS) + 8;
  const mine = signedWrites(CONNECTIONS, WARM + each + paced, "Benchmark");
  const theirs = signedWrites(CONNECTIONS, WARM + each + paced, "Floor");
  const same = signedWrites(CONNECTIONS, WARM + each, "Same I/O");
  const required = signedWrites(CONNECTIONS, WARM + each, "Required I/O");
  const before = OLD ? old() : null;
  const oldOrigin = before ? await originOf(before) : null;
  const earlier = before ? signedWrites(CONNECTIONS, WARM + each, "Earlier") : null;
  const slice = (agents, from, to) => agents.map((a) => ({ id: a.id, bodies: a.bodies.slice(from, to) }));
  const puts = (agents) => ({
    headers: putInit("").headers,
    requests: perConnectionWrites(agents),
  });
  await load({ ...puts(slice(mine, 0, WARM)), url: oursOrigin, amount: CONNECTIONS * WARM });
  await load({ ...puts(slice(theirs, 0, WARM)), url: floorOrigin, amount: CONNECTIONS * WARM });
  await load({ ...puts(slice(same, 0, WARM)), url: sameOrigin, amount: CONNECTIONS * WARM });
  await load({ ...puts(slice(required, 0, WARM)), url: requiredOrigin, amount: CONNECTIONS * WARM });
  if (before) await load({ ...puts(slice(earlier, 0, WARM)), url: oldOrigin, amount: CONNECTIONS * WARM });
  const sides = [
    [mine, oursOrigin],
    [theirs, floorOrigin],
    [same, sameOrigin],
    [required, requiredOrigin],
    ...(before ? [[earlier, oldOrigin]] : []),
  ];
  // Each run also measures its server's CPU per accepted write (its workerd
  // process, Linux only): flat out, 16 loops keep a server busy, so on a
  // shared machine req/s is the CPU share it gets divided by this.
  const runs = sides.map(() => []);
  const cpuSpent = sides.map(() => ({ ms: 0, writes: 0, known: true }));
  for (let round = 0; round < WRITE_ROUNDS; round++) {
    const from = WARM + round * roundSpan;
    for (const [i, [agents, url]] of sides.entries()) {
      const pid = listenerPid(Number(new URL(url).port));
      const before = treeCpuMs(pid);
      const r = await load({ ...puts(slice(agents, from, from + roundSpan)), url, amount: perRound });
      const after = treeCpuMs(pid);
      if (before === undefined || after === undefined) cpuSpent[i].known = false;
      else {
        cpuSpent[i].ms += after - before;
        cpuSpent[i].writes += r.total;
      }
      runs[i].push(r);
    }
  }
  const [o, f, s, q, b] = runs.map((r, i) => ({
    ...merged(r),
    cpu_ms_per_write: cpuSpent[i].known && cpuSpent[i].writes ? +(cpuSpent[i].ms / cpuSpent[i].writes).toFixed(2) : null,
  }));
  // Latency where it means something: the flat-out runs above measure
  // queueing as much as service (16 closed-loop connections against a
  // saturated runtime), so both sides also run at the same fixed rate, half
  // of what ours sustained.
  const rate = Math.max(4, Math.round(o.rps / 2));
  const paceRun = (agents, url) =>
    load({ ...puts(slice(agents, WARM + each)), url, amount: Math.round(WRITES / 2), overallRate: rate });
  // (Paced, the sides run one after the other: at a fixed rate the load of
  // the machine weighs on latency, not on the rate.)
  const op = await paceRun(mine, oursOrigin);
  const fp = await paceRun(theirs, floorOrigin);
  results.writes = {
    name: "PUT capsule.json (accepted, signed, scanned, sealed into history)",
    ours: o,
    floor: f,
    ratio: +(o.rps / f.rps).toFixed(2),
    ours_p99_over_p50: +(o.p99_ms / o.p50_ms).toFixed(2),
    ...(b ? { old: b, old_ratio: +(b.rps / f.rps).toFixed(2), ours_over_old: +(o.rps / b.rps).toFixed(2) } : {}),
  };
  results.writes_paced = {
    name: `PUT at ${rate} req/s (half of ours flat out), both sides`,
    rate,
    ours: op,
    floor: fp,
    ours_p99_over_p50: +(op.p99_ms / op.p50_ms).toFixed(2),
    floor_p99_over_p50: +(fp.p99_ms / fp.p50_ms).toFixed(2),
  };
  results.writes_same_io = {
    name: "PUT, against the same-I/O floor (what our own code costs)",
    ours: o,
    floor: s,
    ratio: +(o.rps / s.rps).toFixed(2),
    floor_p99_over_p50: +(s.p99_ms / s.p50_ms).toFixed(2),
  };
  // What the service's own durability rules cost here, whoever implements them:
  // the required-I/O floor against the plain write floor, in the same run.
  results.required_io = {
    name: "required-I/O floor (state + entry put, record KV put, two Cache API markers), against the write floor",
    floor: q,
    write_floor: f,
    ratio: +(q.rps / f.rps).toFixed(2),
  };
  await self.dispose();
  await wf.dispose();
  await sf.dispose();
  await rf.dispose();
  await before?.dispose();
}

// ---- fresh isolates --------------------------------------------------------
// Each round starts every kind of Worker anew: the time from a new runtime
// to its first answer (the whole start), and that first answer alone, timed
// once the runtime is up. First answers are to head.json of an agent nobody
// published (one KV get, a miss), or to any path for the trivial Worker.
{
  const kinds = {
    // A Worker that answers at once.
    trivial: () => floor("trivial.mjs"),
    // The same first answer's I/O without our code: one KV get (a miss).
    read_floor: () => floor("read.mjs"),
    // The entry Worker as a location loads it for a read.
    entry: () => entryAlone(),
    // The same, its first read not looking in the location's cache (the
    // test clock's header, as the tests use it): what the Cache API's first
    // use costs (in Miniflare, an object of its own) is the difference.
    entry_without_cache: () => entryAlone({ SELFCAP_TEST_CLOCK: "1" }),
    // Both Workers in one runtime (as the harness and npm start run them).
    service: ours,
    ...(OLD ? { old } : {}),
  };
  const starts = Object.fromEntries(Object.keys(kinds).map((k) => [k, { whole: [], first: [] }]));
  const firstWrite = [];
  const warmWrite = [];
  const floorFirstWrite = [];
  const floorWarmWrite = [];
  // The first write, then the median of ten more (each a new agent, so a
  // new object each time) against `origin`.
  const firstAndWarm = async (origin, label) => {
    const writes = signedWrites(11, 1, label);
    const firstPut = await timedFetch(`${origin}/self/${writes[0].id}/capsule.json`, putInit(writes[0].bodies[0]));
    if (firstPut.status !== 200) throw new Error(`fresh PUT (${label}): ${firstPut.status}`);
    const warmMs = [];
    for (const w of writes.slice(1)) warmMs.push((await timedFetch(`${origin}/self/${w.id}/capsule.json`, putInit(w.bodies[0]))).ms);
    return [firstPut.ms, median(warmMs)];
  };
  /** A new runtime of `kind`: its whole start and first answer, and the runtime. */
  const start = async (kind) => {
    const t0 = performance.now();
    const mf = kinds[kind]();
    const origin = await originOf(mf);
    const headers = kind === "entry_without_cache" ? TEST_NOW : {};
    const first = await timedFetch(`${origin}/self/${newAgent().agentId}/head.json`, { headers });
    const whole = performance.now() - t0;
    if (first.status !== (kind === "trivial" ? 200 : 404)) throw new Error(`fresh ${kind}: ${first.status}`);
    starts[kind].whole.push(whole);
    starts[kind].first.push(first.ms);
    return { mf, origin };
  };
  for (let round = 0; round < ROUNDS; round++) {
    for (const kind of Object.keys(kinds)) {
      const { mf, origin } = await start(kind);
      if (kind === "service") {
        // The first write this isolate checks, then warm ones (fresh agents
        // each, so every one is a first write of its agent, like the first).
        const [f, w] = await firstAndWarm(origin, "Fresh");
        firstWrite.push(f);
        warmWrite.push(w);
      }
      await mf.dispose();
    }
    // The runtime's own first-write cost: the same storage, KV and cache
    // operations as one of our writes, in a fresh isolate, then warm.
    const sio = sameIoFloor();
    const [ff, fw] = await firstAndWarm(await originOf(sio), "Fresh floor");
    floorFirstWrite.push(ff);
    floorWarmWrite.push(fw);
    await sio.dispose();
  }
  const ms = (x) => +x.toFixed(1);
  const med = (kind, what) => median(starts[kind][what]);
  results.cold = {
    rounds: ROUNDS,
    ...Object.fromEntries(
      Object.keys(kinds).map((k) => [
        k,
        {
          first_answer_ms: ms(med(k, "first")),
          whole_start_ms: ms(med(k, "whole")),
          first_over_trivial_ms: ms(med(k, "first") - med("trivial", "first")),
          whole_over_trivial_ms: ms(med(k, "whole") - med("trivial", "whole")),
          first_over_read_floor_ms: ms(med(k, "first") - med("read_floor", "first")),
          whole_over_read_floor_ms: ms(med(k, "whole") - med("read_floor", "whole")),
        },
      ]),
    ),
  };
  results.fresh_write = {
    first_write_ms: ms(median(firstWrite)),
    warm_write_ms: ms(median(warmWrite)),
    difference_ms: ms(median(firstWrite) - median(warmWrite)),
    same_io_floor_first_write_ms: ms(median(floorFirstWrite)),
    same_io_floor_warm_write_ms: ms(median(floorWarmWrite)),
    same_io_floor_difference_ms: ms(median(floorFirstWrite) - median(floorWarmWrite)),
  };
}

// ---- push on change -------------------------------------------------------
// Time from sending an accepted PUT to a watcher (WebSocket) or a held
// long-poll receiving its head, over every (write, watcher) pair: 100
// watchers of one agent, and one watcher on each of 100 agents. The PUT's own
// round trip in the same run is the floor: the head is pushed before the PUT
// is answered, so push / PUT near 1 means watchers learn of a write as soon
// as its writer does. Sockets go through Miniflare's dispatchFetch (a real
// upgrade into the runtime) so each can come from its own client address
// (20 watchers per agent per address is the cap).
{
  const self = ours();
  await originOf(self);
  const WATCHERS = 100;
  const ROUNDS_ONE = 20;
  const ipOf = (i) => `198.51.100.${1 + Math.floor(i / 20)}`;
  const putAt = async (a, seq) => {
    const t = performance.now();
    const r = await self.dispatchFetch(`http://127.0.0.1/self/${a.agentId}/capsule.json`, putInit(JSON.stringify(envelope(a, seq, exampleCapsule(a.agentId, { self_motto: `Push ${seq}.` })))));
    const json = await r.json();
    if (r.status !== 200) throw new Error(`push bench PUT: ${r.status} ${JSON.stringify(json)}`);
    return { sent: t, answered: performance.now(), cursor: json.cursor };
  };
  /** A watcher that records when each cursor arrived. */
  const openWatcher = async (a, ip) => {
    const res = await self.dispatchFetch(`http://127.0.0.1/self/${a.agentId}/watch`, { headers: { Upgrade: "websocket", "cf-connecting-ip": ip } });
    if (res.status !== 101) throw new Error(`watch: ${res.status}`);
    const seen = new Map();
    res.webSocket.addEventListener("message", (e) => seen.set(JSON.parse(e.data).cursor, performance.now()));
    res.webSocket.accept();
    return { ws: res.webSocket, seen };
  };
  const untilSeen = async (watchers, cursor) => {
    const end = Date.now() + 10_000;
    while (watchers.some((w) => !w.seen.has(cursor)) && Date.now() < end) await new Promise((r) => setTimeout(r, 2));
    if (watchers.some((w) => !w.seen.has(cursor))) throw new Error("push bench: a watcher never got a head");
  };
  const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
  const summary = (lat, puts) => ({
    p50_ms: +pct(lat, 0.5).toFixed(1),
    p99_ms: +pct(lat, 0.99).toFixed(1),
    put_p50_ms: +pct(puts, 0.5).toFixed(1),
    p50_over_put: +(pct(lat, 0.5) / pct(puts, 0.5)).toFixed(2),
  });
  results.push = {};

  // WebSocket: 100 watchers of one agent.
  {
    const a = newAgent();
    await putAt(a, 1);
    const ws = [];
    for (let i = 0; i < WATCHERS; i++) ws.push(await openWatcher(a, ipOf(i)));
    const lat = [];
    const puts = [];
    for (let seq = 2; seq < 2 + ROUNDS_ONE; seq++) {
      const p = await putAt(a, seq);
      await untilSeen(ws, p.cursor);
      puts.push(p.answered - p.sent);
      for (const w of ws) lat.push(w.seen.get(p.cursor) - p.sent);
    }
    for (const w of ws) w.ws.close();
    results.push.ws_one_agent = summary(lat, puts);
  }
  // WebSocket: one watcher on each of 100 agents.
  {
    const agents = [];
    for (let i = 0; i < WATCHERS; i++) {
      const a = newAgent();
      await putAt(a, 1);
      agents.push({ a, w: await openWatcher(a, ipOf(i)) });
    }
    const lat = [];
    const puts = [];
    for (const { a, w } of agents) {
      const p = await putAt(a, 2);
      await untilSeen([w], p.cursor);
      puts.push(p.answered - p.sent);
      lat.push(w.seen.get(p.cursor) - p.sent);
      w.ws.close();
    }
    results.push.ws_many_agents = summary(lat, puts);
  }
  // Long-poll: held polls (If-None-Match of the current head, wait=30).
  const hold = (a, etag) => {
    const t = { done: null };
    t.promise = self
      .dispatchFetch(`http://127.0.0.1/self/${a.agentId}/head.json?wait=30`, { headers: { "if-none-match": etag } })
      .then(async (r) => {
        const body = await r.json();
        if (r.status !== 200) throw new Error(`long-poll: ${r.status}`);
        t.done = performance.now();
        t.cursor = body.cursor;
      });
    return t;
  };
  const etagOf = (cursor) => `"${cursor.slice(7)}"`;
  {
    const a = newAgent();
    let cursor = (await putAt(a, 1)).cursor;
    const lat = [];
    const puts = [];
    for (let seq = 2; seq < 2 + Math.ceil(ROUNDS_ONE / 2); seq++) {
      const polls = Array.from({ length: WATCHERS }, () => hold(a, etagOf(cursor)));
      await new Promise((r) => setTimeout(r, 300)); // all held
      const p = await putAt(a, seq);
      await Promise.all(polls.map((x) => x.promise));
      puts.push(p.answered - p.sent);
      for (const x of polls) lat.push(x.done - p.sent);
      cursor = p.cursor;
    }
    results.push.longpoll_one_agent = summary(lat, puts);
  }
  {
    const agents = [];
    for (let i = 0; i < WATCHERS; i++) {
      const a = newAgent();
      agents.push({ a, cursor: (await putAt(a, 1)).cursor });
    }
    const polls = agents.map(({ a, cursor }) => hold(a, etagOf(cursor)));
    await new Promise((r) => setTimeout(r, 500));
    const lat = [];
    const puts = [];
    for (let i = 0; i < agents.length; i++) {
      const p = await putAt(agents[i].a, 2);
      await polls[i].promise;
      puts.push(p.answered - p.sent);
      lat.push(polls[i].done - p.sent);
    }
    results.push.longpoll_many_agents = summary(lat, puts);
  }
  await self.dispose();
}

const size = {
  entry: workerSize(BUILD),
  write: workerSize(path.join(BUILD, "write")),
  extras: workerSize(path.join(BUILD, "extras")),
  ...(OLD ? { old: workerSize(OLD) } : {}),
};

const when = new Date().toISOString();
const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, ${os.platform()} ${os.release()}, node ${process.version}`;
const load1 = os.loadavg()[0].toFixed(1);
console.log(`\nSelf Capsule vs floor Workers, ${when}, ${machine}; ${CONNECTIONS} connections (autocannon); load average at the end ${load1}\n`);
console.log("| scenario | ours req/s | floor req/s | ours / floor | ours p50 / p99 ms | floor p50 / p99 ms |" + (OLD ? " old req/s | old / floor | ours / old |" : ""));
console.log("|---|---:|---:|---:|---:|---:|" + (OLD ? "---:|---:|---:|" : ""));
for (const r of [...results.reads, results.writes, results.writes_same_io]) {
  const before = r.old && r !== results.writes_same_io ? ` ${r.old.rps} | ${r.old_ratio} | **${r.ours_over_old}** |` : OLD ? " | | |" : "";
  console.log(
    `| ${r.name} | ${r.ours.rps} | ${r.floor.rps} | **${r.ratio}** | ${r.ours.p50_ms} / ${r.ours.p99_ms} | ${r.floor.p50_ms} / ${r.floor.p99_ms} |${before}`,
  );
}
const rq = results.required_io;
console.log(
  `\n${rq.name}: ${rq.floor.rps} vs ${rq.write_floor.rps} req/s = **${rq.ratio}** ` +
    `(p50 / p99 ${rq.floor.p50_ms} / ${rq.floor.p99_ms} ms): no write that leaves the read-after-write markers exceeds this here`,
);
const wp = results.writes_paced;
const cpu = (r) => r.cpu_ms_per_write ?? "–";
console.log(
  `Accepted writes (${CONNECTIONS} agents, flat out): server CPU per write, ` +
    `ours ${cpu(results.writes.ours)} ms, write floor ${cpu(results.writes.floor)} ms, ` +
    `same-I/O floor ${cpu(results.writes_same_io.floor)} ms, required-I/O floor ${cpu(rq.floor)} ms`,
);
console.log(
  `Accepted writes flat out: ours p99 / p50 = ${results.writes.ours_p99_over_p50}; ` +
    `same-I/O floor p99 / p50 = ${results.writes_same_io.floor_p99_over_p50}`,
);
console.log(
  `${wp.name}: ours p50 / p99 ${wp.ours.p50_ms} / ${wp.ours.p99_ms} ms (p99 / p50 = ${wp.ours_p99_over_p50}), ` +
    `floor ${wp.floor.p50_ms} / ${wp.floor.p99_ms} ms (p99 / p50 = ${wp.floor_p99_over_p50})`,
);
const c = results.cold;
console.log(`\nFresh runtimes (median of ${ROUNDS}): the first answer once loaded, the whole start (new runtime to first answer), and each over the trivial Worker's and the read floor's:`);
console.log("| Worker | first answer ms | whole start ms | first − trivial | whole − trivial | first − read floor | whole − read floor |");
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (const [kind, r] of Object.entries(c)) {
  if (kind === "rounds") continue;
  console.log(
    `| ${kind} | ${r.first_answer_ms} | ${r.whole_start_ms} | ${r.first_over_trivial_ms} | ${r.whole_over_trivial_ms} | ${r.first_over_read_floor_ms} | ${r.whole_over_read_floor_ms} |`,
  );
}
const fw = results.fresh_write;
console.log(
  `\nFresh isolate, first write ${fw.first_write_ms} ms vs warm ${fw.warm_write_ms} ms (difference ${fw.difference_ms} ms); ` +
    `same-I/O floor ${fw.same_io_floor_first_write_ms} vs ${fw.same_io_floor_warm_write_ms} ms ` +
    `(difference ${fw.same_io_floor_difference_ms} ms: the runtime's own first-write cost)`,
);
console.log("\nPush on change: PUT sent -> head received (p50 / p99 ms), and p50 over the PUT's own round trip:");
for (const [name, r] of Object.entries(results.push)) {
  console.log(`  ${name}: ${r.p50_ms} / ${r.p99_ms} ms; PUT p50 ${r.put_p50_ms} ms; push / PUT ${r.p50_over_put}`);
}
// The project's budget for every Worker, as the build holds it.
for (const [name, z] of Object.entries(size)) {
  const over = overBudget(z) ? ` (over the ${WORKER_BUDGET} B budget)` : "";
  console.log(
    `Worker size, ${name}: index_bg.wasm ${z.wasm_bytes} B, ${z.wasm_gzip_bytes} B gzipped; with its JS ${z.worker_gzip_bytes} B gzipped${over}`,
  );
}
mkdirSync(path.join(ROOT, ".bench"), { recursive: true });
writeFileSync(path.join(ROOT, ".bench", "results.json"), JSON.stringify({ when, machine, load_average: load1, connections: CONNECTIONS, ...results, size }, null, 2));

// Every request must have been answered as intended, or the ratios mean nothing.
const expected = [
  ...results.reads.map((r) => [r.name, r.ours, r.name.includes("304") ? "3xx" : "2xx"]),
  ...results.reads.map((r) => [`${r.name} (floor)`, r.floor, r.name.includes("304") ? "3xx" : "2xx"]),
  [results.writes.name, results.writes.ours, "2xx"],
  [`${results.writes.name} (floor)`, results.writes.floor, "2xx"],
  [`${results.writes.name} (same-I/O floor)`, results.writes_same_io.floor, "2xx"],
  [results.required_io.name, results.required_io.floor, "2xx"],
  [`${results.writes_paced.name}`, results.writes_paced.ours, "2xx"],
  [`${results.writes_paced.name} (floor)`, results.writes_paced.floor, "2xx"],
  ...results.reads.filter((r) => r.old).map((r) => [`${r.name} (old)`, r.old, r.name.includes("304") ? "3xx" : "2xx"]),
  ...(results.writes.old ? [[`${results.writes.name} (old)`, results.writes.old, "2xx"]] : []),
];
// A run limited by `amount` ends with up to one request per connection in
// flight, which autocannon may count as a socket error; no answer may be wrong.
const wrong = expected.filter(
  ([name, r, cls]) => r.errors > (name.startsWith("PUT") ? CONNECTIONS : 0) || r.timeouts > 0 || r.by_status[cls] !== r.total,
);
for (const [name, r] of wrong) {
  console.error(`unexpected answers in "${name}": ${JSON.stringify(r.by_status)} of ${r.total}, errors ${r.errors}, timeouts ${r.timeouts}`);
}
process.exitCode = wrong.length ? 1 : 0;
