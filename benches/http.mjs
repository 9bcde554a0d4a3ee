// `npm run bench`: throughput and latency of the local Worker (the built
// wasm in workerd via Miniflare, listening on 127.0.0.1 only), plus the
// gzipped Worker size. Scenarios: head.json 200, head.json 304 (If-None-Match),
// capsule.json 200, and accepted PUTs (signed, distinct agents in parallel).
//
// Env: BENCH_SECONDS (per read scenario, default 5), BENCH_CONCURRENCY
// (default 16), BENCH_WRITES (accepted PUTs, default 400).
import { Miniflare } from "miniflare";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { newAgent, envelope, exampleCapsule, cursorOf } from "../tests/e2e/helpers.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BUILD = path.join(ROOT, "build");
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const WRITES = Number(process.env.BENCH_WRITES ?? 400);

const compatibilityDate = readFileSync(path.join(ROOT, "wrangler.toml"), "utf8").match(
  /^compatibility_date\s*=\s*"([^"]+)"/m,
)[1];

const mf = new Miniflare({
  host: "127.0.0.1",
  port: 0,
  telemetry: { enabled: false },
  modules: true,
  scriptPath: path.join(BUILD, "index.js"),
  modulesRoot: BUILD,
  modulesRules: [
    { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
    { type: "CompiledWasm", include: ["**/*.wasm"] },
  ],
  compatibilityDate,
  kvNamespaces: ["SELF"],
  kvPersist: false,
  durableObjects: {
    AGENT_DO: { className: "AgentDO", useSQLite: true },
    IP_QUOTA_DO: { className: "IpQuotaDO", useSQLite: true },
  },
  durableObjectsPersist: false,
  // Quotas out of the way so every benchmark PUT is a real accept; a fresh
  // service key per run (writes fail closed without one).
  bindings: {
    FREE_WRITES_PER_24H: "1000000000",
    FREE_NEW_AGENTS_PER_IP_24H: "1000000000",
    SERVICE_SIGNING_KEY: randomBytes(32).toString("hex"),
  },
  structuredWorkerdLogs: true,
  handleStructuredLogs: () => {},
});
const origin = (await mf.ready).origin;
if (!/^http:\/\/(127\.0\.0\.1|\[::1\]|localhost)(:\d+)?$/.test(origin)) {
  throw new Error(`refusing to benchmark non-loopback ${origin}`);
}

function stats(latencies, elapsedMs, errors) {
  const s = [...latencies].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? NaN;
  return {
    requests: s.length,
    errors,
    rps: Math.round((s.length / elapsedMs) * 1000),
    p50_ms: +q(0.5).toFixed(2),
    p99_ms: +q(0.99).toFixed(2),
  };
}

/** Runs `once()` from `CONCURRENCY` loops for `SECONDS`. */
async function timed(name, once, expectStatus) {
  // Warm-up.
  for (let i = 0; i < 50; i++) await once();
  const latencies = [];
  let errors = 0;
  const start = performance.now();
  const end = start + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        const r = await once();
        latencies.push(performance.now() - t);
        if (r.status !== expectStatus) errors++;
      }
    }),
  );
  return { name, ...stats(latencies, performance.now() - start, errors) };
}

const get = (p, headers = {}) =>
  fetch(origin + p, { headers }).then(async (r) => {
    await r.arrayBuffer();
    return r;
  });

// One published agent for the read scenarios.
const reader = newAgent();
const readerCapsule = exampleCapsule(reader.agentId);
const first = await fetch(`${origin}/self/${reader.agentId}/capsule.json`, {
  method: "PUT",
  headers: { "content-type": "application/json", "cf-connecting-ip": "127.0.0.1" },
  body: JSON.stringify(envelope(reader, 1, readerCapsule)),
});
if (first.status !== 200) throw new Error(`setup PUT failed: ${first.status} ${await first.text()}`);
const etag = `"${cursorOf(readerCapsule).slice(7)}"`;
const head = `/self/${reader.agentId}/head.json`;
const capsule = `/self/${reader.agentId}/capsule.json`;

// Warm up every read path first, so the wasm engine's tier-up (baseline
// compiler -> optimizing compiler) is not billed to whichever scenario runs first.
for (let i = 0; i < 300; i++) {
  await get(head);
  await get(head, { "if-none-match": etag });
  await get(capsule);
}

const results = [];
results.push(await timed("GET head.json (200)", () => get(head), 200));
results.push(await timed("GET head.json (304, If-None-Match)", () => get(head, { "if-none-match": etag }), 304));
results.push(await timed("GET capsule.json (200)", () => get(capsule), 200));

// Accepted PUTs: CONCURRENCY agents, each writing strictly increasing seqs
// one at a time (writes of one agent are serialised by its Durable Object).
{
  const agents = Array.from({ length: CONCURRENCY }, () => newAgent());
  const perAgent = Math.ceil(WRITES / CONCURRENCY);
  // Sign everything up front so only the service is timed.
  const bodies = agents.map((a) =>
    Array.from({ length: perAgent }, (_, i) =>
      JSON.stringify(envelope(a, i + 1, exampleCapsule(a.agentId, { self_motto: `Benchmark state ${i + 1}.` }))),
    ),
  );
  const latencies = [];
  let errors = 0;
  const start = performance.now();
  await Promise.all(
    agents.map(async (a, k) => {
      for (const body of bodies[k]) {
        const t = performance.now();
        const r = await fetch(`${origin}/self/${a.agentId}/capsule.json`, {
          method: "PUT",
          headers: { "content-type": "application/json", "cf-connecting-ip": "127.0.0.1" },
          body,
        });
        await r.arrayBuffer();
        latencies.push(performance.now() - t);
        if (r.status !== 200) errors++;
      }
    }),
  );
  results.push({ name: "PUT capsule.json (accepted)", ...stats(latencies, performance.now() - start, errors) });
}

await mf.dispose();

const wasm = readFileSync(path.join(BUILD, "index_bg.wasm"));
const js = readFileSync(path.join(BUILD, "index.js"));
const size = {
  wasm_bytes: wasm.length,
  wasm_gzip_bytes: gzipSync(wasm, { level: 9 }).length,
  js_bytes: js.length,
  js_gzip_bytes: gzipSync(js, { level: 9 }).length,
};

console.log(`\nSelf Capsule local benchmark (${origin}, concurrency ${CONCURRENCY}, node ${process.version})\n`);
console.log("| scenario | requests | req/s | p50 ms | p99 ms | errors |");
console.log("|---|---:|---:|---:|---:|---:|");
for (const r of results) {
  console.log(`| ${r.name} | ${r.requests} | ${r.rps} | ${r.p50_ms} | ${r.p99_ms} | ${r.errors} |`);
}
console.log(
  `\nWorker size: index_bg.wasm ${size.wasm_bytes} B (${(size.wasm_gzip_bytes / 1024).toFixed(0)} KiB gzipped), ` +
    `index.js ${size.js_bytes} B (${(size.js_gzip_bytes / 1024).toFixed(1)} KiB gzipped)`,
);
mkdirSync(path.join(ROOT, ".bench"), { recursive: true });
writeFileSync(
  path.join(ROOT, ".bench", "results.json"),
  JSON.stringify({ when: new Date().toISOString(), concurrency: CONCURRENCY, results, size }, null, 2),
);
const failed = results.some((r) => r.errors > 0);
process.exitCode = failed ? 1 : 0;
