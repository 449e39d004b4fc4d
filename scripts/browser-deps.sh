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

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "browser-deps: installing chromium needs root (or sudo)" >&2
    exit 1
  fi
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
echo "browser-deps: installing Debian's chromium"
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends chromium
/usr/bin/chromium --version
