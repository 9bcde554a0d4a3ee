#!/usr/bin/env bash
# Deploys the service to Cloudflare: its three Workers, in the order they
# need (docs/DEPLOYING.md). First the write Worker (wrangler.write.toml): it
# defines the Durable Object classes and applies their migrations, which the
# other two bind across (script_name), and its name is what the entry's
# WRITER binding calls. Then the extras Worker (wrangler.extras.toml), which
# the entry's EXTRAS binding calls. Then the entry Worker (wrangler.toml),
# which takes the routes and the Explorer's assets. If a deploy fails, the
# ones after it are not attempted: the running entry keeps calling the
# Workers it had.
#
# Any arguments go to every `wrangler deploy` run (e.g. `--env staging`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-worker.sh
echo "deploy: the write Worker (wrangler.write.toml)"
npx --no-install wrangler deploy -c wrangler.write.toml "$@"
echo "deploy: the extras Worker (wrangler.extras.toml)"
npx --no-install wrangler deploy -c wrangler.extras.toml "$@"
echo "deploy: the entry Worker (wrangler.toml)"
npx --no-install wrangler deploy -c wrangler.toml "$@"
