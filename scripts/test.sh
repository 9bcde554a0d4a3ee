#!/usr/bin/env bash
# The whole test suite, as CI runs it: native Rust tests, formatting and wasm
# lint, the wasm build, then the end-to-end tests in workerd (Miniflare).
set -euo pipefail
cd "$(dirname "$0")/.."
export WRANGLER_SEND_METRICS=false
export PATH="$HOME/.cargo/bin:$PATH"

step() { printf '\n==> %s\n' "$*"; }

step "install missing tools"
bash scripts/install-tools.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo test (native)"
cargo test --locked

step "cargo clippy (wasm32, -D warnings)"
cargo clippy --locked --target wasm32-unknown-unknown --lib -- -D warnings

step "build the Worker (wasm)"
bash scripts/build-worker.sh

step "end-to-end tests (workerd via Miniflare)"
node --test --test-concurrency=1 tests/e2e/
