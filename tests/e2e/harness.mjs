// End-to-end harness: runs the service as deployed, its three Workers in
// workerd through Miniflare, in-process, with in-memory KV and Durable Object
// storage: the entry Worker (build/index.js + index_bg.wasm, wrangler.toml),
// which every request reaches, and behind its service bindings the write
// Worker (build/write/, wrangler.write.toml), holding the Durable Objects, and
// the extras Worker (build/extras/, wrangler.extras.toml: MCP, payments,
// feeds, the cron), which binds them across (the entry binds NONCE_DO and AGENT_DO across
// too). One KV namespace for all. Each test file gets its own instance
// (fresh state).
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

/** A top-level string setting of a wrangler config (`name`, `main` …). */
function setting(config, key) {
  const toml = readFileSync(path.join(ROOT, config), "utf8");
  const m = toml.match(new RegExp(`^${key}\\s*=\\s*"([^"]+)"`, "m"));
  if (!m) throw new Error(`${config}: no ${key}`);
  return m[1];
}

/** The entry Worker's, the write Worker's and the extras Worker's configs. */
const ENTRY_CONFIG = "wrangler.toml";
const WRITE_CONFIG = "wrangler.write.toml";
const EXTRAS_CONFIG = "wrangler.extras.toml";
/** The write Worker's name (the entry's service binding and every cross-script object binding name it). */
export const WRITE_WORKER = setting(WRITE_CONFIG, "name");
/** The extras Worker's name (the entry's EXTRAS binding names it; it has the cron). */
export const EXTRAS_WORKER = setting(EXTRAS_CONFIG, "name");

function compatibilityDate() {
  const date = setting(ENTRY_CONFIG, "compatibility_date");
  for (const config of [WRITE_CONFIG, EXTRAS_CONFIG]) {
    if (setting(config, "compatibility_date") !== date) {
      throw new Error(`wrangler.toml and ${config} name different compatibility dates`);
    }
  }
  return date;
}

/** The static-assets directory wrangler serves (`[assets] directory`). */
function assetsDirectory() {
  const toml = readFileSync(path.join(ROOT, ENTRY_CONFIG), "utf8");
  const m = toml.match(/^\[assets\][^[]*?^directory\s*=\s*"([^"]+)"/ms);
  if (!m) throw new Error("wrangler.toml: no [assets] directory");
  const dir = path.resolve(ROOT, m[1]);
  if (!existsSync(path.join(dir, "explorer.html"))) {
    throw new Error(`${dir} has no explorer.html: run \`npm run build\` first`);
  }
  return dir;
}

/** A built Worker's module options, from its config's `main`. */
function modulesOf(config) {
  const script = path.join(ROOT, setting(config, "main"));
  if (!existsSync(script)) {
    throw new Error(`${script} missing: run \`npm run build\` first`);
  }
  return {
    modules: true,
    scriptPath: script,
    modulesRoot: path.dirname(script),
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
  };
}

/** The write Worker's Durable Object bindings (wrangler.write.toml). */
export const DURABLE_OBJECTS = {
  AGENT_DO: { className: "AgentDO", useSQLite: true },
  IP_QUOTA_DO: { className: "IpQuotaDO", useSQLite: true },
  TAGS_DO: { className: "TagsDO", useSQLite: true },
  PAYMENT_DO: { className: "PaymentDO", useSQLite: true },
  NONCE_DO: { className: "NonceDO", useSQLite: true },
  FEED_DO: { className: "FeedDO", useSQLite: true },
  STATS_DO: { className: "StatsDO", useSQLite: true },
};

/** The same objects bound across, from a Worker that does not define them. */
function across(objects) {
  return Object.fromEntries(
    Object.entries(objects).map(([binding, { className }]) => [binding, { className, scriptName: WRITE_WORKER }]),
  );
}

/**
 * Miniflare's options for the service: the entry Worker first (it gets
 * every request), the write and extras Workers behind it. `vars` reach every
 * Worker; `secrets` the write Worker only, `extrasSecrets` the extras Worker
 * only (the entry holds none).
 * `withoutDurableObjects`: no Durable Object bound in any.
 * `writeWorkerCache: false`: the Cache API of the Workers behind the entry
 * does nothing (as if Cloudflare gave a Worker called through a binding no
 * cache of its own).
 */
export function serviceOptions({
  vars = {},
  secrets = {},
  extrasSecrets = {},
  withoutDurableObjects = false,
  assets = true,
  writeWorkerCache = true,
} = {}) {
  const date = compatibilityDate();
  return [
    {
      name: setting(ENTRY_CONFIG, "name"),
      ...modulesOf(ENTRY_CONFIG),
      compatibilityDate: date,
      // As deployed: the asset server answers GET/HEAD of the Explorer's files
      // before the Worker, which gets every other request. (wrangler sets
      // has_user_worker itself; Miniflare used directly must be told.)
      ...(assets ? { assets: { directory: assetsDirectory(), routerConfig: { has_user_worker: true } } } : {}),
      kvNamespaces: ["SELF"],
      serviceBindings: { WRITER: WRITE_WORKER, EXTRAS: EXTRAS_WORKER },
      durableObjects: withoutDurableObjects
        ? {}
        : {
            NONCE_DO: { className: "NonceDO", scriptName: WRITE_WORKER },
            AGENT_DO: { className: "AgentDO", scriptName: WRITE_WORKER },
          },
      bindings: { ...vars },
    },
    {
      name: WRITE_WORKER,
      ...modulesOf(WRITE_CONFIG),
      compatibilityDate: date,
      kvNamespaces: ["SELF"],
      durableObjects: withoutDurableObjects ? {} : DURABLE_OBJECTS,
      ...(writeWorkerCache ? {} : { cache: false }),
      bindings: { ...vars, ...secrets },
    },
    {
      name: EXTRAS_WORKER,
      ...modulesOf(EXTRAS_CONFIG),
      compatibilityDate: date,
      kvNamespaces: ["SELF"],
      durableObjects: withoutDurableObjects ? {} : across(DURABLE_OBJECTS),
      ...(writeWorkerCache ? {} : { cache: false }),
      bindings: { ...vars, ...extrasSecrets },
    },
  ];
}

/**
 * Starts the service. `vars` are extra [vars] (tier overrides), given to
 * both Workers; the test clock is always enabled here (and only here).
 * `withoutDurableObjects` starts it with no Durable Object bindings (reads
 * must work without one).
 * `serviceKey`: the SERVICE_SIGNING_KEY secret (32-byte seed, hex) of the
 * write Worker; a fresh random one per instance by default, `null` for none.
 * `writeWorkerCache`: see `serviceOptions`.
 * `secrets`: more secrets, of the write and extras Workers (e.g.
 * SELFCAP_ADMIN_TOKEN, which the extras Worker's operator API reads); the
 * service signing key is the write Worker's alone.
 *
 * `mf.getWorker()` without a name is the extras Worker: the one with the
 * cron trigger, whose `scheduled()` the tests call.
 */
export async function startWorker({ vars = {}, secrets = {}, withoutDurableObjects = false, serviceKey, writeWorkerCache = true } = {}) {
  const key = serviceKey === undefined ? crypto.randomBytes(32).toString("hex") : serviceKey;
  // Worker console output is captured (tests assert on the structured log
  // lines) and echoed only with SELFCAP_E2E_VERBOSE=1.
  const logs = [];
  const verbose = process.env.SELFCAP_E2E_VERBOSE === "1";
  const service = new Miniflare({
    host: "127.0.0.1",
    telemetry: { enabled: false },
    structuredWorkerdLogs: true,
    handleStructuredLogs: ({ level, message }) => {
      logs.push({ level, message });
      if (verbose) console.error(`[workerd ${level}] ${message}`);
    },
    // No fetch of Cloudflare's cf.json at start (loopback only).
    cf: false,
    kvPersist: false,
    durableObjectsPersist: false,
    workers: serviceOptions({
      vars: { SELFCAP_TEST_CLOCK: "1", ...vars },
      secrets: { ...(key === null ? {} : { SERVICE_SIGNING_KEY: key }), ...secrets },
      extrasSecrets: secrets,
      withoutDurableObjects,
      writeWorkerCache,
    }),
  });
  const mf = new Proxy(service, {
    get(target, prop) {
      if (prop === "getWorker") return (name = EXTRAS_WORKER) => target.getWorker(name);
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
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
