#!/usr/bin/env bash
# staticcheck: honnef.co/go/tools' staticcheck (every default check, see
# staticcheck.conf) over every workspace module and deploy/check. The tool
# is installed once per version into bin/. Exit status 1 on any finding.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
STATICCHECK_VERSION="v0.8.2"

if [[ ! -x "$root/bin/staticcheck" ]] || ! "$root/bin/staticcheck" -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  (cd "$scratch" && GOWORK=off GOBIN="$root/bin" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION")
fi

failed=""
check() { # dir [env...]
  local dir="$1"; shift
  echo "== $dir"
  if ! (cd "$dir" && env "$@" "$root/bin/staticcheck" ./...); then
    failed="$failed $dir"
  fi
}
for m in $(go list -m -f '{{.Dir}}'); do
  check "$m"
done
check "$root/deploy/check" GOWORK=off

if [[ -n "$failed" ]]; then
  echo "staticcheck: findings in:$failed" >&2
  exit 1
fi
echo "staticcheck: no findings in any module"
