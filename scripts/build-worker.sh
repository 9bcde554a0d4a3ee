#!/usr/bin/env bash
# Builds the service's three Workers with worker-build: the entry Worker
# (workers/entry/) into build/ (index.js + index_bg.wasm), the write Worker
# (workers/write/) beside it into build/write/ and the extras Worker
# (workers/extras/) into build/extras/; and the Capsule
# Explorer's static assets into build/assets/ (public/ as checked in, plus
# the core compiled for the browser: explorer/core.js + core_bg.wasm), which
# wrangler serves through [assets] in wrangler.toml.
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

# Whether $1 is missing or older than any of the remaining inputs.
stale() {
  local out=$1
  shift
  [[ $force == 1 || ! -f $out || -n "$(find "$@" -newer "$out" -print -quit)" ]]
}

export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$HOME/.cargo/bin/wasm-bindgen}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$PWD/node_modules/.bin/wasm-opt}"
export ESBUILD_BIN="${ESBUILD_BIN:-$PWD/node_modules/.bin/esbuild}"
# Same feature flags as worker-build's own wasm-opt pass, so nothing is
# re-encoded with newer binaryen features.
WASM_OPT_FEATURES=(--enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int
  --enable-bulk-memory --enable-multivalue --enable-reference-types)

# One Worker: the crate in $1 (under workers/) into the directory $2 (under
# build/), unless it is newer than every input.
build_worker() {
  local crate=$1 out=$2 name=$3
  if [[ -f $out/index.js ]] && ! stale "$out/index_bg.wasm" src "$crate" vendor Cargo.toml Cargo.lock; then
    echo "build-worker: the $name Worker in $out/ is up to date"
    return
  fi
  local start end
  start=$(date +%s)
  # The output directory is relative to the crate.
  worker-build --release --out-dir "$(realpath --relative-to="$crate" "$out")" "$crate"
  # worker-build keeps the wasm "name" section (function and data names: ~300 KB,
  # ~80 KB gzipped, a tenth of the Worker) for readable stack traces. Panics
  # still log their message and source location without it; the size budget
  # (1 MiB gzipped: a smaller module starts faster) wins.
  "$WASM_OPT_BIN" "$out/index_bg.wasm" -o "$out/index_bg.wasm" --strip-debug --strip-producers \
    "${WASM_OPT_FEATURES[@]}" --enable-exception-handling
  end=$(date +%s)
  echo "build-worker: $name Worker built in $((end - start)) s"
  # The project's budget for every Worker (a smaller module starts faster),
  # measured as wrangler measures an upload: a build over it fails here,
  # where it grew, rather than in a deploy.
  if ! node scripts/worker-size.mjs "$out" "$name"; then
    rm -f "$out/index_bg.wasm"
    exit 1
  fi
}

mkdir -p build/write build/extras
build_worker workers/entry build entry
build_worker workers/write build/write write
build_worker workers/extras build/extras extras

# The Explorer's wasm: the core without the Worker (explorer/, default
# features off), bound for the browser. Kept in build/explorer-core/ and
# copied into the assets below.
core_dir=build/explorer-core
if stale "$core_dir/core_bg.wasm" src/core src/lib.rs explorer Cargo.toml Cargo.lock; then
  start=$(date +%s)
  cargo build --release --target wasm32-unknown-unknown -p self-capsule-explorer
  wasm="${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/self_capsule_explorer.wasm"
  rm -rf "$core_dir.tmp"
  "$WASM_BINDGEN_BIN" --target web --no-typescript --out-dir "$core_dir.tmp" --out-name core "$wasm"
  "$WASM_OPT_BIN" "$core_dir.tmp/core_bg.wasm" -Os -o "$core_dir.tmp/core_bg.wasm" \
    --strip-debug --strip-producers "${WASM_OPT_FEATURES[@]}"
  rm -rf "$core_dir" && mv "$core_dir.tmp" "$core_dir"
  end=$(date +%s)
  raw=$(stat -c %s "$core_dir/core_bg.wasm")
  gz=$(gzip -9 -c "$core_dir/core_bg.wasm" | wc -c)
  echo "build-worker: Explorer core built in $((end - start)) s; core_bg.wasm ${raw} bytes, ${gz} bytes gzipped"
fi

# The static assets: what public/ holds now plus the Explorer's core,
# nothing else. A running `npm start` (wrangler dev) serves build/assets
# while this runs, and loses track of the directory if it is removed and
# created again (every /explorer answer a 500 until a restart). So the
# directory itself is never removed: the new set is staged beside it, then
# each changed file is moved into place (a rename: a reader sees the old
# file or the new one, never a missing or half-written one), files that are
# gone are deleted, and unchanged files are left alone.
assets=build/assets
stage=build/assets.stage
rm -rf "$stage"
cp -R public "$stage"
cp "$core_dir/core.js" "$core_dir/core_bg.wasm" "$stage/explorer/"
mkdir -p "$assets"
changed=0
while IFS= read -r -d '' f; do
  rel=${f#"$stage"/}
  if ! cmp -s "$f" "$assets/$rel"; then
    mkdir -p "$(dirname "$assets/$rel")"
    cp "$f" "$assets/$rel.new.$$"
    mv -f "$assets/$rel.new.$$" "$assets/$rel"
    changed=$((changed + 1))
  fi
done < <(find "$stage" -type f -print0)
while IFS= read -r -d '' f; do
  rel=${f#"$assets"/}
  if [[ ! -e "$stage/$rel" ]]; then
    rm -f "$f"
    changed=$((changed + 1))
  fi
done < <(find "$assets" -type f -print0)
find "$assets" -mindepth 1 -type d -empty -delete
rm -rf "$stage"
if [[ $changed -gt 0 ]]; then
  echo "build-worker: assets: $changed file(s) updated in place"
fi
