// Running the `selfcap` CLI (target/debug/selfcap, built by scripts/test.sh)
// from the end-to-end tests: a private HOME, no SELFCAP_* from the caller,
// loopback only.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
export const SELFCAP_BIN = process.env.SELFCAP_BIN ?? path.join(ROOT, "target", "debug", "selfcap");
const LOOPBACK = { NO_PROXY: "127.0.0.1,localhost", no_proxy: "127.0.0.1,localhost" };

/** Throws (the test fails, never skips) when the CLI is not built. */
export function requireSelfcap() {
  if (!existsSync(SELFCAP_BIN)) throw new Error(`${SELFCAP_BIN} missing: run \`cargo build --bin selfcap\` first`);
}

/** The environment of a selfcap run: never the caller's SELFCAP_*, `home` as HOME, loopback only. */
export function selfcapEnv(home, extra = {}) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SELFCAP_")));
  return { ...clean, HOME: home, ...LOOPBACK, ...extra };
}

/** A runner with `home` as HOME: (args, {stdin, env}) -> {code, stdout, stderr}. */
export function selfcapIn(home) {
  return (args, { stdin, env = {} } = {}) =>
    new Promise((resolve, reject) => {
      const child = spawn(SELFCAP_BIN, args, {
        env: selfcapEnv(home, env),
        stdio: [stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code, stdout, stderr }));
      if (stdin !== undefined) {
        child.stdin.on("error", () => {}); // it may exit before reading
        child.stdin.end(stdin);
      }
    });
}

/** One identity's CLI: `run(args)` with its --state-dir and the service URL. */
export function agentCli(selfcap, home, url, name) {
  const dir = path.join(home, name);
  return { dir, run: (args, opts) => selfcap(["--state-dir", dir, "--url", url, ...args], opts) };
}

/** Exit `code`, and never a panic. */
export function exits(r, code, what) {
  assert.doesNotMatch(r.stderr, /panicked|RUST_BACKTRACE|stack backtrace/);
  assert.equal(r.code, code, `${what}: exit ${r.code}\n${r.stdout}${r.stderr}`);
  return r;
}
