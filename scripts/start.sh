#!/usr/bin/env bash
# Runs the service locally on http://127.0.0.1:8787 (PORT=… for another) with
# wrangler dev: its three Workers (the entry, which gets every request, and
# the write and extras Workers behind its service bindings) in one real
# workerd, local KV and
# Durable Objects persisted under .wrangler/state (so capsules survive
# restarts; `npm start -- --persist-to DIR` for another directory). No
# Cloudflare account is needed. Any other arguments go to `wrangler dev`;
# each `--var NAME:VALUE` reaches every Worker.
set -euo pipefail
cd "$(dirname "$0")/.."
export WRANGLER_SEND_METRICS=false
# The service seals history entries with SERVICE_SIGNING_KEY (a Worker
# secret in production). Locally, wrangler dev reads it from .dev.vars
# (gitignored): generate a random one on first start, never commit it.
if ! grep -qs '^SERVICE_SIGNING_KEY=' .dev.vars; then
  # (keep an existing last line intact if it has no trailing newline)
  if [[ -s .dev.vars && -n "$(tail -c1 .dev.vars)" ]]; then echo >> .dev.vars; fi
  key=$(node -e 'process.stdout.write(require("node:crypto").randomBytes(32).toString("hex"))')
  printf 'SERVICE_SIGNING_KEY=%s\n' "$key" >> .dev.vars
  chmod 600 .dev.vars
  echo "start: generated a local SERVICE_SIGNING_KEY in .dev.vars"
fi
# Defaults the caller can override: a --persist-to of their own (another
# state directory) replaces ours, wrangler refuses the flag twice; a
# SELFCAP_PUBLIC_ORIGIN var of their own likewise.
port="${PORT:-8787}"
persist=(--persist-to .wrangler/state)
origin=(--var "SELFCAP_PUBLIC_ORIGIN:http://127.0.0.1:$port")
# Projected watch feeds read a ddv1 world feed: by default the fixture feed
# (tests/fixtures/ddv1/), served on loopback beside the Worker, so the
# feature works offline; a SELFCAP_WATCH_UPSTREAM var of the caller's own
# (a real ddv1 upstream) replaces it, and no fixture is started.
fixture_port="${WATCH_FIXTURE_PORT:-8788}"
upstream=(--var "SELFCAP_WATCH_UPSTREAM:http://127.0.0.1:$fixture_port")
for arg in "$@"; do
  case "$arg" in
    --persist-to|--persist-to=*) persist=() ;;
    *SELFCAP_PUBLIC_ORIGIN*) origin=() ;;
    *SELFCAP_WATCH_UPSTREAM*) upstream=() ;;
  esac
done
# wrangler dev gives its flags to the first config (the entry) only: the
# write and extras Workers get every var in configs of their own
# (scripts/dev-config.mjs), made for this run and removed with it.
vars=()
collecting=0
for arg in "${origin[@]}" "${upstream[@]}" "$@"; do
  case "$arg" in
    --var) collecting=1 ;;
    --var=*) vars+=("${arg#--var=}"); collecting=0 ;;
    -*) collecting=0 ;;
    *) [[ $collecting == 1 ]] && vars+=("$arg") ;;
  esac
done
# Build once up front (wrangler's [build] hook then finds build/ up to date).
bash scripts/build-worker.sh
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/selfcap-start.XXXXXX")
fixture_pid=
cleanup() {
  if [[ -n $fixture_pid ]]; then kill "$fixture_pid" 2>/dev/null || true; fi
  rm -rf "$run_dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
node scripts/dev-config.mjs "$run_dir" "${vars[@]}"
if [[ ${#upstream[@]} -gt 0 ]]; then
  node scripts/ddv1-fixture-server.mjs --port "$fixture_port" --state v1 &
  fixture_pid=$!
fi
# --test-scheduled: GET /__scheduled runs the cron trigger (the world
# refresh) on demand, as wrangler dev does not run cron triggers itself. It
# reaches the entry, which hands it to the extras Worker's handler.
npx --no-install wrangler dev \
  -c wrangler.toml -c "$run_dir/write.json" -c "$run_dir/extras.json" \
  --ip 127.0.0.1 --port "$port" \
  --show-interactive-dev-session=false \
  --test-scheduled \
  "${persist[@]}" "${origin[@]}" "${upstream[@]}" \
  "$@"
