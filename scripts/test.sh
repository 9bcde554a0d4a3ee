#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, generated files against
# their sources, native Rust tests, the independent TypeScript implementation's vector tests,
# lint (native and wasm), the wasm builds (the three Workers), the CLI build, the npm packages
# (packed into build/npm/), then the end-to-end tests in workerd (Miniflare),
# which also drive the selfcap CLI, the independent TypeScript implementation, the npm package
# (installed from its tarball) and the Python package (built into a wheel and
# installed into a fresh venv by tests/e2e/python_package.test.mjs) against
# the Worker.
set -euo pipefail
cd "$(dirname "$0")/.."
export WRANGLER_SEND_METRICS=false
export PATH="$HOME/.cargo/bin:$PATH"

step() { printf '\n==> %s\n' "$*"; }

step "install missing tools"
bash scripts/install-tools.sh
bash scripts/install-browser.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "generated files match their sources (docs/GENERATED.md; npm run regen rewrites them)"
npm run regen:check --silent

step "cargo test (native: the core, Worker-free parts, CLI, and the Explorer's wasm API)"
cargo test --locked --workspace

step "the independent TypeScript implementation (tests/interop/ts) against the signing vectors"
npm test --prefix tests/interop/ts --silent

step "cargo clippy (native, all targets, -D warnings)"
cargo clippy --locked --workspace --all-targets -- -D warnings

step "cargo clippy (wasm32: each Worker on its own, the Explorer's core and the npm package's core without them; -D warnings)"
# One package per run: a run over several would compile the library once
# with several Workers' features, which is none of them.
cargo clippy --locked --target wasm32-unknown-unknown -p self-capsule-entry -- -D warnings
cargo clippy --locked --target wasm32-unknown-unknown -p self-capsule-write -- -D warnings
cargo clippy --locked --target wasm32-unknown-unknown -p self-capsule-extras -- -D warnings
cargo clippy --locked --target wasm32-unknown-unknown -p self-capsule-explorer -- -D warnings
cargo clippy --locked --target wasm32-unknown-unknown -p self-capsule-js -- -D warnings

step "build the three Workers (wasm) and the Explorer's assets"
bash scripts/build-worker.sh

step "build the selfcap CLI (native) for the end-to-end tests"
cargo build --locked --bin selfcap

step "pack the npm packages into build/npm/ (selfcap, and @selfcap/cli-linux-x64 with the debug CLI)"
bash scripts/package-npm.sh --cli-binary "${CARGO_TARGET_DIR:-target}/debug/selfcap"

step "end-to-end tests (workerd via Miniflare; the Explorer in Chromium)"
node --test --test-concurrency=1 tests/e2e/
