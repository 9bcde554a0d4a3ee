#!/usr/bin/env bash
# A real browser for the Capsule Explorer's end-to-end tests
# (tests/e2e/explorer.test.mjs): Debian's `chromium` package, driven by
# playwright-core from npm (whose own browser download is not used). Only the
# test command installs it; `npm start` and deployment never need it.
#
# SELFCAP_CHROMIUM=/path/to/chromium uses another build instead. Without a
# browser the tests fail, they never skip, so this exits non-zero when it
# cannot install one.
set -euo pipefail

if [[ -n "${SELFCAP_CHROMIUM:-}" ]]; then
  [[ -x "$SELFCAP_CHROMIUM" ]] || { echo "install-browser: SELFCAP_CHROMIUM=$SELFCAP_CHROMIUM is not executable" >&2; exit 1; }
  exit 0
fi
[[ -x /usr/bin/chromium ]] && exit 0

if [[ $(id -u) == 0 ]]; then
  as_root=()
elif sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "install-browser: /usr/bin/chromium is missing and this user cannot install it:" >&2
  echo "  run 'apt-get install -y chromium' as root, or set SELFCAP_CHROMIUM" >&2
  exit 1
fi
echo "install-browser: installing Debian's chromium (about 35 s)"
"${as_root[@]}" apt-get update -qq
# (With its recommended packages: the fonts the screenshots are drawn with.)
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null
/usr/bin/chromium --version
