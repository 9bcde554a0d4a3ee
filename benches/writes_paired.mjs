// Accepted writes, paired, against implementations already serving on
// loopback: `node benches/writes_paired.mjs NAME=URL[=PID] [NAME=URL[=PID] …]`.
//
// The shape: 16 agents × 40 signed PUTs, 16 in parallel (one agent per
// loop, each PUT a real accept). Each round runs every target in turn, the
// order rotated from round to round so no target always runs first; each run
// uses fresh agents, whose first write (the new-agent write) is made before
// the clock starts. Printed per target and round: accepted/s, p50 and p99 of
// the accepted PUTs, the ratio to the last target named in the same round,
// and the server's CPU per accepted write (every process of the tree rooted
// at PID, or at the process listening on URL's port when PID is omitted;
// Linux only). On a machine shared with other work the CPU per write is the
// steadier figure: flat out, 16 loops keep the server busy, so accepted/s is
// the share of the CPU it gets divided by what one write costs.
//
// Every PUT names its agent's own client address (`CF-Connecting-IP`, from
// the benchmarking range 198.18.0.0/15), so per-address limits see one agent
// per address. Only loopback URLs are accepted.
//
// Env: ROUNDS (default 3), AGENTS (16), EACH (40). Results also go to
// .bench/writes_paired.json (gitignored).
import { writeFileSync, mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { newAgent, envelope, exampleCapsule } from "../tests/e2e/helpers.mjs";
import { listenerPid, treeCpuMs } from "./cpu.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const AGENTS = Number(process.env.AGENTS ?? 16);
const EACH = Number(process.env.EACH ?? 40);

const targets = process.argv.slice(2).map((arg) => {
  const [name, url, pid] = arg.split("=");
  if (!name || !/^http:\/\/(127\.0\.0\.1|\[::1\]|localhost):\d+$/.test(url ?? "")) {
    throw new Error(`expected NAME=http://127.0.0.1:PORT[=PID] (loopback only), got ${arg}`);
  }
  return { name, url, pid: pid ? Number(pid) : undefined, rounds: [] };
});
if (targets.length === 0) throw new Error("usage: node benches/writes_paired.mjs NAME=URL[=PID] …");

for (const t of targets) {
  try {
    t.root = t.pid ?? listenerPid(Number(new URL(t.url).port));
  } catch {
    t.root = undefined;
  }
}

// ---- the writes ------------------------------------------------------------
let addresses = 0;
const nextAddress = () => {
  const n = addresses++;
  return `198.${18 + ((n >> 16) & 1)}.${(n >> 8) & 255}.${n & 255}`;
};
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

async function put(t, agent, seq) {
  const capsule = exampleCapsule(agent.a.agentId, { self_motto: `Paired state ${seq}.` });
  const body = JSON.stringify(envelope(agent.a, seq, capsule));
  const start = performance.now();
  const r = await fetch(`${t.url}/self/${agent.a.agentId}/capsule.json`, {
    method: "PUT",
    headers: { "content-type": "application/json", "cf-connecting-ip": agent.ip },
    body,
  });
  const text = await r.text();
  return { ms: performance.now() - start, status: r.status, text };
}

async function run(t) {
  const agents = Array.from({ length: AGENTS }, () => ({ a: newAgent(), ip: nextAddress() }));
  await Promise.all(
    agents.map(async (agent) => {
      const r = await put(t, agent, 1);
      if (r.status !== 200) throw new Error(`${t.name}: first write ${r.status} ${r.text.slice(0, 200)}`);
    }),
  );
  const latencies = [];
  const wrong = [];
  const cpu0 = treeCpuMs(t.root);
  const start = performance.now();
  await Promise.all(
    agents.map(async (agent) => {
      for (let seq = 2; seq < 2 + EACH; seq++) {
        const r = await put(t, agent, seq);
        if (r.status === 200) latencies.push(r.ms);
        else wrong.push(`${r.status} ${r.text.slice(0, 120)}`);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const cpu1 = treeCpuMs(t.root);
  return {
    accepted_per_s: +(latencies.length / seconds).toFixed(1),
    p50_ms: Math.round(pct(latencies, 0.5)),
    p99_ms: Math.round(pct(latencies, 0.99)),
    cpu_ms_per_write: cpu0 === undefined ? null : +((cpu1 - cpu0) / Math.max(1, latencies.length)).toFixed(2),
    not_accepted: wrong.length,
    first_not_accepted: wrong[0],
    load_1m: +os.loadavg()[0].toFixed(2),
  };
}

// One untimed run each first (JIT tiers, storage files), then the rounds.
for (const t of targets) await run(t);
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < targets.length; i++) {
    const t = targets[(i + round) % targets.length];
    const r = await run(t);
    t.rounds.push(r);
    console.error(`round ${round + 1} ${t.name}: ${JSON.stringify(r)}`);
  }
}

const base = targets[targets.length - 1];
const when = new Date().toISOString();
const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, node ${process.version}`;
console.log(`\nAccepted writes, ${AGENTS} agents × ${EACH} PUTs, ${AGENTS} in parallel; ${when}, ${machine}\n`);
console.log(`| target | accepted/s | p50 ms | p99 ms | CPU ms / write | accepted/s ÷ ${base.name} |`);
console.log("|---|---:|---:|---:|---:|---:|");
for (const t of targets) {
  const col = (k) => t.rounds.map((r) => r[k] ?? "–").join(", ");
  const ratios = t.rounds.map((r, i) => (r.accepted_per_s / base.rounds[i].accepted_per_s).toFixed(2)).join(", ");
  console.log(`| ${t.name} | ${col("accepted_per_s")} | ${col("p50_ms")} | ${col("p99_ms")} | ${col("cpu_ms_per_write")} | ${ratios} |`);
}
console.log(`\nload average (1 min) during the rounds: ${targets.flatMap((t) => t.rounds.map((r) => r.load_1m)).join(", ")}`);
mkdirSync(path.join(ROOT, ".bench"), { recursive: true });
writeFileSync(
  path.join(ROOT, ".bench", "writes_paired.json"),
  JSON.stringify({ when, machine, agents: AGENTS, each: EACH, targets: targets.map(({ name, rounds }) => ({ name, rounds })) }, null, 2),
);
const failed = targets.filter((t) => t.rounds.some((r) => r.not_accepted > 0));
for (const t of failed) console.error(`${t.name}: not every PUT was accepted (${t.rounds.map((r) => r.first_not_accepted).filter(Boolean)[0]})`);
process.exitCode = failed.length ? 1 : 0;
