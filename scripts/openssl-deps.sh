#!/usr/bin/env bash
# openssl-deps: make sure OpenSSL 3's libcrypto.so.3 (Debian's libssl3) is
# installed. The tokens service loads it at run time to sign (see
# GATEHOUSE_SIGNING_LIBRARY), and its tests require it under CI=true.
#
# Does nothing when the library is already there. Needs root (or sudo) and
# apt otherwise; run by .ci/run before `make test`.
set -euo pipefail

if /sbin/ldconfig -p 2>/dev/null | grep -q 'libcrypto\.so\.3 '; then
  echo "openssl-deps: libcrypto.so.3 is installed"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "openssl-deps: installing libssl3 needs root (or sudo)" >&2
    exit 1
  fi
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
echo "openssl-deps: installing Debian's libssl3"
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends libssl3
