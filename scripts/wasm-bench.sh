#!/usr/bin/env bash
# Times the core's write-check path compiled to WebAssembly, inside V8 (Node's
# WASI), next to the same program natively. Usage: scripts/wasm-bench.sh [ITERS]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
iters="${1:-300}"
rustup target list --installed | grep -qx wasm32-wasip1 || rustup target add wasm32-wasip1
cargo build -q --release --example wasm_bench --target wasm32-wasip1
cargo build -q --release --example wasm_bench
target_dir="${CARGO_TARGET_DIR:-target}"
wasm="$target_dir/wasm32-wasip1/release/examples/wasm_bench.wasm"
echo "# native ($(uname -m))"
"$target_dir/release/examples/wasm_bench" "$iters"
echo "# wasm32-wasip1 in Node $(node --version) (V8), $(stat -c %s "$wasm") bytes"
node --no-warnings -e '
  const { WASI } = require("node:wasi");
  const fs = require("node:fs");
  const wasi = new WASI({ version: "preview1", args: ["wasm_bench", process.argv[2]] });
  const mod = new WebAssembly.Module(fs.readFileSync(process.argv[1]));
  wasi.start(new WebAssembly.Instance(mod, wasi.getImportObject()));
' "$wasm" "$iters"
