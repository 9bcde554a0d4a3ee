// End-to-end harness: runs the built Worker (build/index.js + index_bg.wasm)
// in workerd through Miniflare, in-process, with in-memory KV and Durable
// Object storage. Each test file gets its own instance (fresh state).
//
// Only loopback addresses are ever contacted.
import { Miniflare } from "miniflare";
import crypto from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
export const BUILD_DIR = path.join(ROOT, "build");
export const BASE = "http://127.0.0.1";

function compatibilityDate() {
  const toml = readFileSync(path.join(ROOT, "wrangler.toml"), "utf8");
  const m = toml.match(/^compatibility_date\s*=\s*"([^"]+)"/m);
  if (!m) throw new Error("wrangler.toml: no compatibility_date");
  return m[1];
}

/**
 * Starts a Worker instance. `vars` are extra [vars] (tier overrides);
 * the test clock is always enabled here (and only here).
 * `withoutDurableObjects` starts it with no Durable Object bindings.
 * `serviceKey`: the SERVICE_SIGNING_KEY secret (32-byte seed, hex); a fresh
 * random one per instance by default, `null` for none.
 */
/** The static-assets directory wrangler serves (`[assets] directory`). */
function assetsDirectory() {
  const toml = readFileSync(path.join(ROOT, "wrangler.toml"), "utf8");
  const m = toml.match(/^\[assets\][^[]*?^directory\s*=\s*"([^"]+)"/ms);
  if (!m) throw new Error("wrangler.toml: no [assets] directory");
  const dir = path.resolve(ROOT, m[1]);
  if (!existsSync(path.join(dir, "explorer.html"))) {
    throw new Error(`${dir} has no explorer.html: run \`npm run build\` first`);
  }
  return dir;
}

export async function startWorker({ vars = {}, withoutDurableObjects = false, serviceKey } = {}) {
  const key = serviceKey === undefined ? crypto.randomBytes(32).toString("hex") : serviceKey;
  const script = path.join(BUILD_DIR, "index.js");
  if (!existsSync(script)) {
    throw new Error(`${script} missing: run \`npm run build\` first`);
  }
  // Worker console output is captured (tests assert on the structured log
  // lines) and echoed only with SELFCAP_E2E_VERBOSE=1.
  const logs = [];
  const verbose = process.env.SELFCAP_E2E_VERBOSE === "1";
  const mf = new Miniflare({
    host: "127.0.0.1",
    telemetry: { enabled: false },
    structuredWorkerdLogs: true,
    handleStructuredLogs: ({ level, message }) => {
      logs.push({ level, message });
      if (verbose) console.error(`[workerd ${level}] ${message}`);
    },
    modules: true,
    scriptPath: script,
    modulesRoot: BUILD_DIR,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: compatibilityDate(),
    // As deployed: the asset server answers GET/HEAD of the Explorer's files
    // before the Worker, which gets every other request. (wrangler sets
    // has_user_worker itself; Miniflare used directly must be told.)
    assets: {
      directory: assetsDirectory(),
      routerConfig: { has_user_worker: true },
    },
    // No fetch of Cloudflare's cf.json at start (loopback only).
    cf: false,
    kvNamespaces: ["SELF"],
    kvPersist: false,
    // `withoutDurableObjects`: no DO bindings at all, to prove reads never
    // touch one.
    durableObjects: withoutDurableObjects
      ? {}
      : {
          AGENT_DO: { className: "AgentDO", useSQLite: true },
          IP_QUOTA_DO: { className: "IpQuotaDO", useSQLite: true },
          TAGS_DO: { className: "TagsDO", useSQLite: true },
          PAYMENT_DO: { className: "PaymentDO", useSQLite: true },
          NONCE_DO: { className: "NonceDO", useSQLite: true },
          FEED_DO: { className: "FeedDO", useSQLite: true },
        },
    durableObjectsPersist: false,
    bindings: {
      SELFCAP_TEST_CLOCK: "1",
      ...(key === null ? {} : { SERVICE_SIGNING_KEY: key }),
      ...vars,
    },
  });
  const origin = await mf.ready;
  const kv = await mf.getKVNamespace("SELF");
  return {
    mf,
    kv,
    /** The instance's loopback URL (for real sockets: WebSockets, the CLI). */
    origin,
    /** The service signing key's seed (hex), or null. */
    serviceKey: key,
    /** Every console line the Worker and its Durable Objects wrote. */
    logs,
    /** The structured JSON log lines with event "write" (one per decision). */
    writeLogs() {
      return logs
        .map(({ message }) => {
          try {
            return JSON.parse(message);
          } catch {
            return null;
          }
        })
        .filter((l) => l && l.event === "write");
    },
    /**
     * The write-decision lines after the first `from`, once there are at
     * least `count` of them (logs arrive asynchronously over workerd's stdout).
     */
    async writeLogsAfter(from, count, timeoutMs = 2000) {
      const end = Date.now() + timeoutMs;
      let got = this.writeLogs().slice(from);
      while (got.length < count && Date.now() < end) {
        await new Promise((r) => setTimeout(r, 20));
        got = this.writeLogs().slice(from);
      }
      return got;
    },
    /** fetch against the Worker; `path` is relative to the origin. */
    async fetch(p, init = {}) {
      const res = await mf.dispatchFetch(BASE + p, init);
      const text = await res.text();
      let json;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      return { status: res.status, headers: res.headers, text, json };
    },
    async close() {
      await mf.dispose();
    },
  };
}
