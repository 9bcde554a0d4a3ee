#!/usr/bin/env bash
# Deploys the service to Cloudflare: both Workers, in the order they need
# (docs/DEPLOYING.md). First the write Worker (wrangler.write.toml): it
# defines the Durable Object classes and applies their migrations, which the
# entry's NONCE_DO binding names, and its name is what the entry's service
# binding calls. Then the entry Worker (wrangler.toml), which takes the
# routes and the Explorer's assets. If the first deploy fails, the second is
# not attempted: the running entry keeps calling the write Worker it had.
#
# Any arguments go to both `wrangler deploy` runs (e.g. `--env staging`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-worker.sh
echo "deploy: the write Worker (wrangler.write.toml)"
npx --no-install wrangler deploy -c wrangler.write.toml "$@"
echo "deploy: the entry Worker (wrangler.toml)"
npx --no-install wrangler deploy -c wrangler.toml "$@"
