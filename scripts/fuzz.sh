#!/usr/bin/env bash
# fuzz: run every Go fuzz target of every workspace module for FUZZTIME
# each (default 30s; CI runs them for a few seconds). A target is found by
# `go test -list '^Fuzz'` in every package with a `func Fuzz` in its tests,
# so a new one needs no change here. Failing
# inputs are written under the package's testdata/fuzz/ by the go command:
# commit them, they become regression seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
n=0
for m in $(go list -m -f '{{.Dir}}'); do
  # Only packages whose tests define a fuzz function: listing compiles a
  # test binary, which for every package would take minutes.
  dirs=$(cd "$m" && grep -rlE --include='*_test.go' '^func Fuzz[A-Z0-9_]' . | xargs -r -n1 dirname | sort -u || true)
  for d in $dirs; do
    p=$(cd "$m" && go list "$d")
    targets=$(cd "$m" && go test -list '^Fuzz' "$p" 2>/dev/null | grep '^Fuzz' || true)
    for t in $targets; do
      echo "fuzz: $p $t ($FUZZTIME)"
      (cd "$m" && go test -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" "$p")
      n=$((n + 1))
    done
  done
done
echo "fuzz: $n targets passed"
