#!/usr/bin/env bash
# apt-install: install Debian packages with apt-get, as root or through sudo.
# Used by browser-deps.sh and openssl-deps.sh once they know something is
# missing.
#
#   scripts/apt-install.sh <caller> <package>...
set -euo pipefail

caller=$1
shift
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "$caller: installing $* needs root (or sudo)" >&2
    exit 1
  fi
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
echo "$caller: installing Debian's $*"
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "$@"
