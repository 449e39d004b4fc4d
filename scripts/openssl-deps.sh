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

"$(dirname "$0")/apt-install.sh" openssl-deps libssl3
