#!/usr/bin/env bash
# Builds the Worker into build/ (index.js + index_bg.wasm) with worker-build.
#
# worker-build normally downloads wasm-bindgen, wasm-opt and esbuild from the
# internet. We point it at local copies instead (it reads *_BIN env vars, not
# PATH): wasm-bindgen from `cargo install` (its version must equal the
# wasm-bindgen in Cargo.lock), wasm-opt and esbuild from node_modules.
#
# Idempotent: installs only what is missing. Skips the build when build/ is
# newer than every input, unless --force is given.
set -euo pipefail
cd "$(dirname "$0")/.."

WORKER_BUILD_VERSION=0.8.7
force=0
[[ "${1:-}" == "--force" ]] && force=1

bash scripts/install-tools.sh

if [[ $force == 0 && -f build/index.js && -f build/index_bg.wasm ]]; then
  newest_input=$(find src Cargo.toml Cargo.lock -newer build/index_bg.wasm -print -quit)
  if [[ -z "$newest_input" ]]; then
    echo "build-worker: build/ is up to date"
    exit 0
  fi
fi

export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$HOME/.cargo/bin/wasm-bindgen}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$PWD/node_modules/.bin/wasm-opt}"
export ESBUILD_BIN="${ESBUILD_BIN:-$PWD/node_modules/.bin/esbuild}"

start=$(date +%s)
worker-build --release
# worker-build keeps the wasm "name" section (function and data names: ~300 KB,
# ~80 KB gzipped, a tenth of the Worker) for readable stack traces. Panics
# still log their message and source location without it; the size budget
# (1 MiB gzipped, issue 14) wins. Same feature flags as worker-build's pass,
# so nothing is re-encoded with newer binaryen features.
"$WASM_OPT_BIN" build/index_bg.wasm -o build/index_bg.wasm --strip-debug --strip-producers \
  --enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int \
  --enable-bulk-memory --enable-multivalue --enable-reference-types --enable-exception-handling
end=$(date +%s)

raw=$(stat -c %s build/index_bg.wasm)
gz=$(gzip -9 -c build/index_bg.wasm | wc -c)
echo "build-worker: built in $((end - start)) s; index_bg.wasm ${raw} bytes, ${gz} bytes gzipped"
