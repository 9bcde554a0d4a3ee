#!/usr/bin/env node
// A DiffDelta ddv1 upstream on loopback, for tests and `npm start`: serves one
// state (v1, v2 or v3) of the committed fixture `tests/fixtures/ddv1/` as the
// static site does (`application/json`, `max-age=300, must-revalidate`),
// plus a strong ETag and `If-None-Match` → 304. No dependencies, no network
// beyond 127.0.0.1. See tests/fixtures/ddv1/README.md.
//
//   node scripts/ddv1-fixture-server.mjs [--port 8788] [--state v1]
//
// prints one JSON line once listening: {"ddv1_fixture": "http://127.0.0.1:PORT", "state": "v1"}
//
// Control endpoints (tests only; never logged in the request log):
//   POST /_fixture/state/{v1|v2|v3}   switch the served state
//   POST /_fixture/down               every other request answers 503
//   POST /_fixture/malformed          /diff/head.json answers invalid JSON
//   POST /_fixture/up                 undo down and malformed
//   GET  /_fixture/requests           [{method, path, status}] since the last reset
//   POST /_fixture/requests/reset     empty that list
//   GET  /_fixture/state              {state, down, malformed}
//
// As a module: `startFixture({port, state})` → {url, port, setState, state,
// down, up, malformed, requests, resetRequests, close}.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const FIXTURE_DIR = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  "..",
  "tests",
  "fixtures",
  "ddv1",
);
export const STATES = ["v1", "v2", "v3"];
export const HOST = "127.0.0.1";
export const DEFAULT_PORT = 8788;
export const CACHE_CONTROL = "max-age=300, must-revalidate";
/** What `/diff/head.json` answers while malformed (cut off mid-document). */
export const MALFORMED_BODY = '{"cursor": "sha256:7d03f283fb55a5297a03c06b2864084e76c1dcfa13';

/** sha256 hex of bytes, quoted: the strong ETag the server sends. */
export function etagOf(bytes) {
  return `"${createHash("sha256").update(bytes).digest("hex")}"`;
}

/** Every file of one state's tree: URL path → {body, etag}. */
function loadState(state) {
  const root = path.join(FIXTURE_DIR, state);
  const files = new Map();
  const walk = (rel) => {
    for (const name of readdirSync(path.join(root, rel))) {
      const r = `${rel}/${name}`;
      const full = path.join(root, r);
      if (statSync(full).isDirectory()) walk(r);
      else if (name.endsWith(".json")) {
        const body = readFileSync(full);
        files.set(r, { body, etag: etagOf(body) });
      }
    }
  };
  walk("");
  if (!files.has("/diff/head.json")) throw new Error(`${root}: no diff/head.json`);
  return files;
}

/** Does an If-None-Match header match this ETag (weak comparison, RFC 9110 §13.1.2)? */
function noneMatch(header, etag) {
  if (!header) return false;
  const bare = (t) => t.trim().replace(/^W\//, "");
  return header.split(",").some((t) => t.trim() === "*" || bare(t) === etag);
}

function sendJson(res, status, value, extra = {}) {
  const body = Buffer.from(`${JSON.stringify(value)}\n`);
  res.writeHead(status, {
    "content-type": "application/json",
    "cache-control": "no-store",
    "content-length": body.length,
    ...extra,
  });
  res.end(body);
}

/**
 * Starts the fixture server on 127.0.0.1 (`port` 0: any free port).
 * @returns {Promise<{url: string, port: number, setState(s: string): void, state(): string,
 *   down(): void, up(): void, malformed(): void, requests(): {method: string, path: string, status: number}[],
 *   resetRequests(): void, close(): Promise<void>}>}
 */
export async function startFixture({ port = 0, state = "v1" } = {}) {
  if (!STATES.includes(state)) throw new Error(`unknown state ${state} (one of ${STATES.join(", ")})`);
  const trees = Object.fromEntries(STATES.map((s) => [s, loadState(s)]));
  let current = state;
  let isDown = false;
  let isMalformed = false;
  let log = [];

  const setState = (s) => {
    if (!STATES.includes(s)) throw new Error(`unknown state ${s}`);
    current = s;
  };

  function control(req, res, p) {
    const m = req.method;
    const allow = (method) => {
      if (m === method) return true;
      sendJson(res, 405, { error: "method_not_allowed", allow: method }, { allow: method });
      return false;
    };
    const status = () => ({ state: current, down: isDown, malformed: isMalformed });
    const st = /^\/_fixture\/state\/([^/]+)$/.exec(p);
    if (st) {
      if (!allow("POST")) return;
      if (!STATES.includes(st[1])) return sendJson(res, 404, { error: "unknown_state", states: STATES });
      current = st[1];
      return sendJson(res, 200, status());
    }
    switch (p) {
      case "/_fixture/state":
        if (allow("GET")) sendJson(res, 200, status());
        return;
      case "/_fixture/down":
        if (allow("POST")) {
          isDown = true;
          sendJson(res, 200, status());
        }
        return;
      case "/_fixture/up":
        if (allow("POST")) {
          isDown = false;
          isMalformed = false;
          sendJson(res, 200, status());
        }
        return;
      case "/_fixture/malformed":
        if (allow("POST")) {
          isMalformed = true;
          sendJson(res, 200, status());
        }
        return;
      case "/_fixture/requests":
        if (allow("GET")) sendJson(res, 200, log);
        return;
      case "/_fixture/requests/reset":
        if (allow("POST")) {
          log = [];
          sendJson(res, 200, { reset: true });
        }
        return;
      default:
        return sendJson(res, 404, { error: "not_found", path: p });
    }
  }

  function serve(req, res, p) {
    const done = (status) => log.push({ method: req.method, path: p, status });
    if (isDown) {
      done(503);
      return sendJson(res, 503, { error: "fixture_down" }, { "retry-after": "30" });
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      done(405);
      return sendJson(res, 405, { error: "method_not_allowed", allow: "GET, HEAD" }, { allow: "GET, HEAD" });
    }
    let file = trees[current].get(p);
    if (file && isMalformed && p === "/diff/head.json") {
      const body = Buffer.from(MALFORMED_BODY);
      file = { body, etag: etagOf(body) };
    }
    if (!file) {
      done(404);
      return sendJson(res, 404, { error: "not_found", path: p });
    }
    const headers = { etag: file.etag, "cache-control": CACHE_CONTROL };
    if (noneMatch(req.headers["if-none-match"], file.etag)) {
      done(304);
      res.writeHead(304, headers);
      return res.end();
    }
    done(200);
    res.writeHead(200, { ...headers, "content-type": "application/json", "content-length": file.body.length });
    res.end(req.method === "HEAD" ? undefined : file.body);
  }

  const server = createServer((req, res) => {
    let p;
    try {
      p = decodeURIComponent(new URL(req.url, "http://fixture").pathname);
    } catch {
      p = req.url;
    }
    if (p.startsWith("/_fixture/") || p === "/_fixture") return control(req, res, p);
    return serve(req, res, p);
  });
  server.keepAliveTimeout = 1000;
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, HOST, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const bound = server.address().port;
  return {
    url: `http://${HOST}:${bound}`,
    port: bound,
    server,
    setState,
    state: () => current,
    down: () => {
      isDown = true;
    },
    up: () => {
      isDown = false;
      isMalformed = false;
    },
    malformed: () => {
      isMalformed = true;
    },
    requests: () => log.map((r) => ({ ...r })),
    resetRequests: () => {
      log = [];
    },
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
      }),
  };
}

function parseArgs(argv) {
  const out = { port: DEFAULT_PORT, state: "v1" };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [k, inline] = a.includes("=") ? a.split(/=(.*)/s) : [a, undefined];
    const val = () => inline ?? argv[++i];
    if (k === "--port") out.port = Number(val());
    else if (k === "--state") out.state = val();
    else if (k === "--help" || k === "-h") out.help = true;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(out.port) || out.port < 0 || out.port > 65535) throw new Error("--port must be 0..65535");
  return out;
}

const isMain = process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href;
if (isMain) {
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`ddv1-fixture-server: ${e.message}`);
    process.exit(2);
  }
  if (args.help) {
    console.log("usage: node scripts/ddv1-fixture-server.mjs [--port 8788] [--state v1|v2|v3]");
    process.exit(0);
  }
  try {
    const fx = await startFixture(args);
    console.log(JSON.stringify({ ddv1_fixture: fx.url, state: fx.state() }));
    const stop = () => fx.close().then(() => process.exit(0));
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  } catch (e) {
    console.error(`ddv1-fixture-server: ${e.message}`);
    process.exit(1);
  }
}
