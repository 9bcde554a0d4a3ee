// The npm package's costs, measured (benches/README.md says how to run it):
//
// - sizes: the packed tarball, core_bg.wasm raw and gzipped (`gzip -9`);
// - cold import: a fresh `node` importing "selfcap" minus one importing
//   nothing, median of RUNS;
// - `check()` of a capsule of close to 4096 canonical bytes (the free tier's
//   worst case), per call, as a ratio to the floor of the benchmarks (SHA-256
//   of the same canonical bytes, in the same process: node:crypto);
// - the same check through the Rust CLI (`selfcap set FILE`: a process, the
//   local check, the file saved), per invocation, and its ratio to `check()`.
//
// Usage: node benches/npm_check.mjs PROJECT [SELFCAP_BINARY]
// PROJECT is a directory with the packed package installed
// (`npm install build/npm/selfcap-<version>.tgz`); the binary defaults to
// target/release/selfcap. Prints one JSON object. Nothing here decides
// anything: it only times calls.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const [project, binary = path.join(ROOT, "target", "release", "selfcap")] = process.argv.slice(2);
if (!project) throw new Error("usage: node benches/npm_check.mjs PROJECT [SELFCAP_BINARY]");
const RUNS = Number(process.env.RUNS ?? 15);
const pkgDir = path.join(project, "node_modules", "selfcap");
const sc = await import(pathToFileURL(path.join(pkgDir, "dist", "index.js")).href);

const WORDS = ("keep the release notes current and ship the package once the tests pass on every platform " +
  "review each change with care then record what was learned for the next session of work").split(" ");

function prose(n, seed) {
  const words = [...WORDS.slice(seed % WORDS.length), ...WORDS.slice(0, seed % WORDS.length)];
  let out = "";
  for (let i = 0; out.length < n; i++) out += words[i % words.length] + " ";
  return out.slice(0, n).trim().padEnd(n, "x");
}

/** The spec's example with 8 long objectives and a motto filling it to <= 4096 bytes (as python_check.py). */
function maximalCapsule(agentId) {
  const base = JSON.parse(readFileSync(path.join(ROOT, "tests", "vectors", "spec_example_capsule.json"), "utf8"));
  base.agent_id = agentId;
  const size = (c) => Buffer.byteLength(sc.canonicalize(c));
  let c;
  for (let checkpoint = 200; checkpoint > 0; checkpoint--) {
    c = structuredClone(base);
    c.objectives = Array.from({ length: 8 }, (_, i) => ({
      id: `objective-${i}`,
      status: "in_progress",
      priority: "high",
      title: prose(120, i),
      checkpoint: prose(checkpoint, i + 3),
    }));
    c.self_motto = "";
    if (size(c) <= 4096) break;
  }
  for (let motto = 160; motto >= 0; motto--) {
    c.self_motto = prose(motto, 1);
    if (size(c) <= 4096) return c;
  }
  throw new Error("no capsule fits");
}

/** Median seconds per call over batches filling about `seconds`. */
function perCall(fn, seconds = 2) {
  fn();
  let n = 1;
  for (;;) {
    const t = performance.now();
    for (let i = 0; i < n; i++) fn();
    if (performance.now() - t > 50) break;
    n *= 2;
  }
  const batches = [];
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end || batches.length < 5) {
    const t = performance.now();
    for (let i = 0; i < n; i++) fn();
    batches.push((performance.now() - t) / 1000 / n);
  }
  return median(batches);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function wall(cmd, args, opts = {}) {
  const times = [];
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    execFileSync(cmd, args, { stdio: "pipe", ...opts });
    times.push((performance.now() - t) / 1000);
  }
  return median(times);
}

const tmp = mkdtempSync(path.join(tmpdir(), "selfcap-bench-"));
try {
  const env = { ...process.env, SELFCAP_HOME: tmp };
  execFileSync(binary, ["keygen"], { env, stdio: "pipe" });
  const id = JSON.parse(execFileSync(binary, ["id", "--json"], { env, encoding: "utf8" })).agent_id;
  const capsule = maximalCapsule(id);
  const canonical = Buffer.from(sc.canonicalize(capsule));
  const verdict = sc.check(capsule, { tier: "free" });
  if (!verdict.ok) throw new Error(`the capsule is refused: ${JSON.stringify(verdict)}`);
  const floor = perCall(() => createHash("sha256").update(canonical).digest());
  const check = perCall(() => sc.check(capsule, { tier: "free" }));
  const file = path.join(tmp, "capsule.json");
  writeFileSync(file, JSON.stringify(capsule));
  const cliSet = wall(binary, ["set", file], { env });
  const cliVersion = wall(binary, ["--version"], { env });
  const nodeBare = wall(process.execPath, ["--input-type=module", "-e", ""], { cwd: project });
  const nodeImport = wall(process.execPath, ["--input-type=module", "-e", 'await import("selfcap")'], { cwd: project });
  const wasm = readFileSync(path.join(pkgDir, "dist", "wasm", "core_bg.wasm"));
  const version = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8")).version;
  const tarball = path.join(ROOT, "build", "npm", `selfcap-${version}.tgz`);
  const installed = readdirSync(pkgDir, { recursive: true })
    .map((f) => statSync(path.join(pkgDir, f)))
    .filter((s) => s.isFile())
    .reduce((a, s) => a + s.size, 0);
  console.log(JSON.stringify({
    node: process.version,
    capsule_bytes: canonical.length,
    tarball_bytes: statSync(tarball).size,
    installed_bytes: installed,
    wasm_bytes: wasm.length,
    wasm_gzip_bytes: gzipSync(wasm, { level: 9 }).length,
    import_ms: +((nodeImport - nodeBare) * 1000).toFixed(1),
    node_startup_ms: +(nodeBare * 1000).toFixed(1),
    floor_sha256_us: +(floor * 1e6).toFixed(1),
    check_us: +(check * 1e6).toFixed(1),
    check_x_floor: +(check / floor).toFixed(1),
    cli_set_ms: +(cliSet * 1000).toFixed(1),
    cli_version_ms: +(cliVersion * 1000).toFixed(1),
    cli_set_over_check: +(cliSet / check).toFixed(1),
  }, null, 2));
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
