#!/usr/bin/env bash
# vulncheck: govulncheck over every module of the workspace (and deploy/check)
# against an offline vulnerability database. The public database host is not
# reachable here, but the Go module proxy serves golang.org/x/vulndb, whose
# OSV files indexdb turns into the database govulncheck reads (file://).
# The database is built once per vulndb version under bin/vulndb/.
# Exit status 1 when any module calls a known vulnerable function.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
VULNDB_VERSION="v0.0.0-20261105234957-e22db6528018"
GOVULNCHECK_VERSION="v1.9.0"

db="$root/bin/vulndb/$VULNDB_VERSION"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

if [[ ! -d "$db/index" ]]; then
  echo "vulncheck: building the vulnerability database from golang.org/x/vulndb@$VULNDB_VERSION"
  osv="$(cd "$scratch" && GOWORK=off go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  if [[ -z "$osv" || ! -d "$osv/data/osv" ]]; then
    echo "vulncheck: golang.org/x/vulndb@$VULNDB_VERSION could not be downloaded" >&2
    exit 2
  fi
  rm -rf "$db.part"
  mkdir -p "$(dirname "$db")"
  (cd "$scratch" && GOWORK=off go run "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" -vulns "$osv/data/osv" -out "$db.part")
  mv "$db.part" "$db"
fi

if [[ ! -x "$root/bin/govulncheck" ]] || ! "$root/bin/govulncheck" -version 2>/dev/null | grep -q "$GOVULNCHECK_VERSION"; then
  (cd "$scratch" && GOWORK=off GOBIN="$root/bin" go install "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION")
fi

echo "vulncheck: $(go version)"
failed=""
check() { # dir [env...]
  local dir="$1"; shift
  echo "== $dir"
  if ! (cd "$dir" && env "$@" "$root/bin/govulncheck" -db "file://$db" ./...); then
    failed="$failed $dir"
  fi
}
for m in $(go list -m -f '{{.Dir}}'); do
  check "$m"
done
check "$root/deploy/check" GOWORK=off

if [[ -n "$failed" ]]; then
  echo "vulncheck: vulnerabilities found in:$failed" >&2
  exit 1
fi
echo "vulncheck: no vulnerabilities in any module"
