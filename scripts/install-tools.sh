#!/usr/bin/env bash
# Installs the build and test toolchain if (and only if) something is missing:
# the wasm32 Rust target, worker-build and wasm-bindgen-cli (versions pinned to
# match Cargo.lock), the npm dev dependencies (wrangler, miniflare, wasm-opt
# from binaryen, esbuild), the libraries of the independent TypeScript implementation
# (tests/interop/ts: canonicalize, http-message-sig, typescript from npm), the Python
# package's tools (maturin, and the wheels of its tests'
# pytest and MCP SDK, into clients/python/.tools), and the public safety corpus
# generator's PyPI packages (into tests/corpus/public/gen/.deps, for npm run
# regen and regen:check).
set -euo pipefail
cd "$(dirname "$0")/.."

WORKER_BUILD_VERSION=0.8.7
# Must equal the wasm-bindgen version in Cargo.lock, or the generated JS glue
# will not match the compiled wasm.
WASM_BINDGEN_VERSION=$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/"/, "", $3); print $3; exit}' Cargo.lock)
WASM_BINDGEN_VERSION=${WASM_BINDGEN_VERSION:-0.2.130}

export PATH="$HOME/.cargo/bin:$PATH"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi

if [[ "$(worker-build --version 2>/dev/null || true)" != *"$WORKER_BUILD_VERSION"* ]]; then
  cargo install worker-build --version "$WORKER_BUILD_VERSION"
fi

if [[ "$(wasm-bindgen --version 2>/dev/null || true)" != *"$WASM_BINDGEN_VERSION"* ]]; then
  # No --locked: the crate's own lockfile pins deps that no longer build on
  # current Rust.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi

# npm ci only when node_modules is missing or older than the lockfile.
if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund
fi

# The Python package (clients/python/pyproject.toml): maturin in a venv of its
# own, and its tests' libraries (pytest, the MCP SDK) as downloaded wheels, which
# the test installs with the built wheel into a fresh venv, offline (and pytest's
# for Python 3.9, the oldest the package supports, in wheels-py39). Redone
# only when a requirements file changes.
PKG_TOOLS=clients/python/.tools
if [[ ! -f "$PKG_TOOLS/.installed" || clients/python/requirements-tools.txt -nt "$PKG_TOOLS/.installed" \
      || clients/python/tests/requirements.txt -nt "$PKG_TOOLS/.installed" \
      || clients/python/tests/requirements-py39.txt -nt "$PKG_TOOLS/.installed" ]]; then
  rm -rf "$PKG_TOOLS"
  python3 -m venv "$PKG_TOOLS/venv"
  PIP_ROOT_USER_ACTION=ignore "$PKG_TOOLS/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r clients/python/requirements-tools.txt
  PIP_ROOT_USER_ACTION=ignore "$PKG_TOOLS/venv/bin/python" -m pip download --quiet --disable-pip-version-check \
    --dest "$PKG_TOOLS/wheels" -r clients/python/tests/requirements.txt
  # The same suite on the oldest supported Python (tests/e2e/python_package.test.mjs).
  PIP_ROOT_USER_ACTION=ignore "$PKG_TOOLS/venv/bin/python" -m pip download --quiet --disable-pip-version-check \
    --python-version 3.9 --only-binary=:all: --dest "$PKG_TOOLS/wheels-py39" -r clients/python/tests/requirements-py39.txt
  touch "$PKG_TOOLS/.installed"
fi

# The public corpus generator (tests/corpus/public/gen/build.py), the same way.
CORPUS_DEPS=tests/corpus/public/gen/.deps
if [[ ! -f "$CORPUS_DEPS/.installed" || tests/corpus/public/gen/requirements.txt -nt "$CORPUS_DEPS/.installed" ]]; then
  rm -rf "$CORPUS_DEPS"
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
    --target "$CORPUS_DEPS" -r tests/corpus/public/gen/requirements.txt
  touch "$CORPUS_DEPS/.installed"
fi

# The independent TypeScript implementation (tests/interop/ts): its own package
# (canonicalize, http-message-sig, typescript, @types/node).
if [[ ! -d tests/interop/ts/node_modules || tests/interop/ts/package-lock.json -nt tests/interop/ts/node_modules/.package-lock.json ]]; then
  npm ci --prefix tests/interop/ts --no-audit --no-fund
fi
