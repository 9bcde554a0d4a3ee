// The scaling model of docs/SCALING.md: what N agents cost per month on
// Cloudflare's Workers Paid plan, polling head.json every POLL_SEC and
// writing WRITES_PER_DAY times a day, from per-request operation counts and
// Cloudflare's published prices. `node scripts/scaling.mjs` prints the
// tables the document carries; change an input here, re-run, paste.
//
// Operation counts are read off the code (src/worker/objects/agent/writes.rs commit,
// src/core/mirror.rs, src/worker/handlers/reads.rs); CPU times are the
// wasm figures of `scripts/wasm-bench.sh` (benches/runs/; method: benches/README.md).

const INPUTS = {
  poll_sec: 60,
  writes_per_day: 5,
  days_per_month: 30,
  // Share of polls the location's copy answers (Cache API, custom domain).
  // Polling every 60 s against a 60 s max-age finds the copy just expired:
  // ~0 for one poller per agent; it grows with faster polls or more readers.
  cache_hit_rate: 0,
  per_poll: { worker_requests: 1, worker_cpu_ms: 0.3, kv_reads: 1 },
  per_write: {
    worker_requests: 1,
    // Worker: envelope, Ed25519 verify (precheck) ~0.4 ms; the Durable
    // Object's check + seal is billed as its duration, not as CPU.
    worker_cpu_ms: 0.5,
    // The write; then, within a minute, the object's alarm and its call to
    // the agent's stats shard (the operator's totals).
    do_requests: 3,
    // Wall time the object is active per write (check, seal, storage
    // commit, two KV round trips), 128 MB billed.
    do_active_sec: 0.025,
    do_gb: 0.128,
    // commit_atomic: state, mirror, history index, entry (4) + the pruned
    // entry (free tier keeps 1) (1) + the mirror cleared or kept (1); the
    // stats batch: the state when it is cut and when it is acknowledged
    // (2), the shard's totals and the agent's last batch number (2).
    do_rows_written: 10,
    // One multi-key get: state, history index, pending mirror.
    do_rows_read: 3,
    // Mirror: entry, history index, record, meta record (meta.json and the
    // operator's list); the previous write's pruned entry deleted alongside
    // the entry put.
    kv_writes: 4,
    kv_deletes: 1,
  },
  // Per free-tier agent at rest: record (4 KB capsule + head fields), index,
  // one retained entry; the object holds the same.
  stored_gb_per_agent: { kv: 12e-6, do: 12e-6 },
  // Cloudflare, Workers Paid, as published (developers.cloudflare.com
  // pricing pages for Workers, KV and Durable Objects, 2025).
  prices: {
    base_usd: 5,
    worker_requests: { included: 10e6, usd_per_million: 0.3 },
    worker_cpu_ms: { included: 30e6, usd_per_million: 0.02 },
    kv_reads: { included: 10e6, usd_per_million: 0.5 },
    kv_writes: { included: 1e6, usd_per_million: 5 },
    kv_deletes: { included: 1e6, usd_per_million: 5 },
    kv_storage_gb: { included: 1, usd_per_unit: 0.5 },
    do_requests: { included: 1e6, usd_per_million: 0.15 },
    do_gb_sec: { included: 400e3, usd_per_million: 12.5 },
    do_rows_read: { included: 25e9, usd_per_million: 0.001 },
    do_rows_written: { included: 50e6, usd_per_million: 1 },
    do_storage_gb: { included: 5, usd_per_unit: 0.2 },
  },
  agents: [1e3, 1e5, 1e7],
};

function month(n, i = INPUTS) {
  const polls = (n * 86400 * i.days_per_month) / i.poll_sec;
  const writes = n * i.writes_per_day * i.days_per_month;
  const w = i.per_write;
  const p = i.per_poll;
  return {
    worker_requests: polls * p.worker_requests + writes * w.worker_requests,
    worker_cpu_ms: polls * p.worker_cpu_ms + writes * w.worker_cpu_ms,
    kv_reads: polls * p.kv_reads * (1 - i.cache_hit_rate),
    kv_writes: writes * w.kv_writes,
    kv_deletes: writes * w.kv_deletes,
    kv_storage_gb: n * i.stored_gb_per_agent.kv,
    do_requests: writes * w.do_requests,
    do_gb_sec: writes * w.do_active_sec * w.do_gb,
    do_rows_read: writes * w.do_rows_read,
    do_rows_written: writes * w.do_rows_written,
    do_storage_gb: n * i.stored_gb_per_agent.do,
  };
}

function cost(usage, prices = INPUTS.prices) {
  const lines = {};
  for (const [k, v] of Object.entries(usage)) {
    const price = prices[k];
    const over = Math.max(0, v - price.included);
    lines[k] = price.usd_per_million !== undefined ? (over / 1e6) * price.usd_per_million : over * price.usd_per_unit;
  }
  return { lines, total: prices.base_usd + Object.values(lines).reduce((a, b) => a + b, 0) };
}

const fmt = (x) =>
  x >= 1e9 ? `${(x / 1e9).toFixed(1)} B` : x >= 1e6 ? `${(x / 1e6).toFixed(1)} M` : x >= 1e3 ? `${(x / 1e3).toFixed(1)} k` : x.toFixed(x < 10 ? 2 : 0);
const usd = (x) => `$${x < 100 ? x.toFixed(2) : Math.round(x).toLocaleString("en-US")}`;

const rows = INPUTS.agents.map((n) => ({ n, usage: month(n), ...cost(month(n)) }));
const head = `| per month | ${rows.map((r) => `${fmt(r.n)} agents`).join(" | ")} |`;
console.log(head);
console.log(`|---|${rows.map(() => "---:").join("|")}|`);
for (const k of Object.keys(rows[0].usage)) {
  console.log(`| ${k.replaceAll("_", " ")} | ${rows.map((r) => `${fmt(r.usage[k])} (${usd(r.lines[k])})`).join(" | ")} |`);
}
console.log(`| **total** (incl. $${INPUTS.prices.base_usd} base) | ${rows.map((r) => `**${usd(r.total)}**`).join(" | ")} |`);
const biggest = rows.map((r) => Object.entries(r.lines).sort((a, b) => b[1] - a[1])[0][0].replaceAll("_", " "));
console.log(`| largest line | ${biggest.join(" | ")} |`);

// What the same fleet would cost if half its polls were answered by the
// location's copy (faster polling, or several readers per agent).
const half = INPUTS.agents.map((n) => cost(month(n, { ...INPUTS, cache_hit_rate: 0.5 })).total);
console.log(`\nWith half the polls answered by the location's copy: ${half.map(usd).join(", ")}.`);
// Free plan ceilings (per day: 100k Worker requests, 100k KV reads, 1k KV writes).
const perAgentDay = { requests: 86400 / INPUTS.poll_sec + INPUTS.writes_per_day, kv_writes: INPUTS.writes_per_day * (INPUTS.per_write.kv_writes + INPUTS.per_write.kv_deletes) };
console.log(
  `Free plan ceiling: ${Math.floor(100e3 / perAgentDay.requests)} agents by Worker requests and KV reads, ` +
    `${Math.floor(1e3 / perAgentDay.kv_writes)} by KV writes and deletes.`,
);
