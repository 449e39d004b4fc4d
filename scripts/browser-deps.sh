#!/usr/bin/env bash
# browser-deps: install the browser the browser tests drive (e2e/browser):
# Debian's chromium package at /usr/bin/chromium. Playwright's own browser
# download does not work on the project's machines, so playwright-core (from
# package.json) launches this system Chromium instead.
#
# Does nothing when /usr/bin/chromium is already there. Needs root (or sudo)
# and apt; run by .ci/run before `make test`.
set -euo pipefail

if [[ -x /usr/bin/chromium ]]; then
  echo "browser-deps: $(/usr/bin/chromium --version 2>/dev/null || echo chromium) is installed"
  exit 0
fi

"$(dirname "$0")/apt-install.sh" browser-deps chromium
/usr/bin/chromium --version
