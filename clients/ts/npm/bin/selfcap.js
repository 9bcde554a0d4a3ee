#!/usr/bin/env node
// `npx selfcap …`: runs the native selfcap CLI from the optional dependency
// built for this platform (@selfcap/cli-<platform>-<arch>), the way esbuild
// and biome ship binaries. Arguments, standard streams and the exit code
// pass through unchanged (so `npx -y selfcap mcp` is the stdio MCP server).
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";

const PACKAGES = {
  "linux-x64": "@selfcap/cli-linux-x64",
  "linux-arm64": "@selfcap/cli-linux-arm64",
  "darwin-x64": "@selfcap/cli-darwin-x64",
  "darwin-arm64": "@selfcap/cli-darwin-arm64",
  "win32-x64": "@selfcap/cli-win32-x64",
};
const FROM_SOURCE = "or build it from source: cargo build --release --bin selfcap (docs/CLI.md)";

function fail(message) {
  process.stderr.write(`selfcap: ${message}\n`);
  process.exit(1);
}

function binary() {
  if (process.env.SELFCAP_BINARY) return process.env.SELFCAP_BINARY;
  const platform = `${process.platform}-${process.arch}`;
  const pkg = PACKAGES[platform];
  if (pkg === undefined) {
    fail(
      `no prebuilt binary for ${platform} (there are: ${Object.keys(PACKAGES).join(", ")}); ` +
        `set SELFCAP_BINARY to a selfcap binary, ${FROM_SOURCE}`,
    );
  }
  const exe = process.platform === "win32" ? "selfcap.exe" : "selfcap";
  try {
    return createRequire(import.meta.url).resolve(`${pkg}/bin/${exe}`);
  } catch {
    fail(
      `the binary for ${platform} comes in the optional dependency ${pkg}, which is not installed ` +
        `(installed with --omit=optional or --no-optional?); install it with \`npm install ${pkg}\`, ` +
        `set SELFCAP_BINARY to a selfcap binary, ${FROM_SOURCE}`,
    );
  }
}

const run = spawnSync(binary(), process.argv.slice(2), { stdio: "inherit" });
if (run.error) fail(`cannot run the binary: ${run.error.message}`);
if (run.signal) process.kill(process.pid, run.signal);
process.exit(run.status ?? 1);
