// The size of a built Worker, measured one way everywhere: the build's budget
// (scripts/build-worker.sh) and the benchmark's report (benches/http.mjs)
// both call this.
//
// Gzipped as wrangler measures an upload ("Total Upload: … / gzip: …"): Node's
// zlib at its default level over the Worker's modules, here its JS glue
// (index.js) and its wasm (index_bg.wasm). Wrangler bundles the glue once more
// before it uploads, which added 3.7 KB gzipped to the write Worker's figure
// (wrangler 4.86, `deploy --dry-run`): the check keeps BUNDLE_ALLOWANCE free
// for that, so what wrangler reports stays under the budget.
//
// CLI: node scripts/worker-size.mjs DIR NAME: prints the sizes and exits 1
// when the Worker is over its budget.
import { readFileSync } from "node:fs";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { fileURLToPath } from "node:url";

/** The budget of every Worker of the service: 1 MiB gzipped. */
export const WORKER_BUDGET = 1024 * 1024;
/** What wrangler's own bundling of the glue may add (see above). */
export const BUNDLE_ALLOWANCE = 8 * 1024;

/** Bytes of the Worker built into `dir`: its wasm raw and gzipped, and the Worker (glue and wasm) gzipped. */
export function workerSize(dir) {
  const wasm = readFileSync(path.join(dir, "index_bg.wasm"));
  const glue = readFileSync(path.join(dir, "index.js"));
  return {
    wasm_bytes: wasm.length,
    wasm_gzip_bytes: gzipSync(wasm).length,
    worker_gzip_bytes: gzipSync(Buffer.concat([glue, wasm])).length,
  };
}

/** Whether a Worker of these sizes is over the budget. */
export const overBudget = (size) => size.worker_gzip_bytes + BUNDLE_ALLOWANCE > WORKER_BUDGET;

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [dir, name] = process.argv.slice(2);
  const s = workerSize(dir);
  const room = WORKER_BUDGET - BUNDLE_ALLOWANCE - s.worker_gzip_bytes;
  console.log(
    `worker-size: ${name} Worker: ${path.join(dir, "index_bg.wasm")} ${s.wasm_bytes} bytes, ` +
      `${s.wasm_gzip_bytes} gzipped; with its JS ${s.worker_gzip_bytes} gzipped, ${room} under its budget`,
  );
  if (overBudget(s)) {
    console.error(
      `worker-size: the ${name} Worker is over its budget (${WORKER_BUDGET} bytes gzipped, ${BUNDLE_ALLOWANCE} of them kept for wrangler's bundling)`,
    );
    process.exit(1);
  }
}
