#!/usr/bin/env bash
# Runs the Worker locally on http://127.0.0.1:8787 with wrangler dev: real
# workerd, local KV and Durable Objects persisted under .wrangler/state (so
# capsules survive restarts). No Cloudflare account is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
export WRANGLER_SEND_METRICS=false
# Build once up front (wrangler's [build] hook then finds build/ up to date).
bash scripts/build-worker.sh
exec npx --no-install wrangler dev \
  --ip 127.0.0.1 --port "${PORT:-8787}" \
  --persist-to .wrangler/state \
  --show-interactive-dev-session=false \
  "$@"
