#!/usr/bin/env bash
# make bench-compare OLD=<git ref>: make bench of the build at OLD (A) and
# of this tree (B), run in turn A B A B … (ROUNDS pairs, default 2) so both
# meet the same machine, then gatehouse-bench-compare's table of each
# scenario's ratio to its floor, B over A, and each build's own spread
# (bench/results/compare.txt). BENCH_FLAGS reach every make bench run.
set -euo pipefail
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
old="${OLD:?set OLD to the git ref of the build to compare with}"
rounds="${ROUNDS:-2}"
tmp="$(mktemp -d)"
worktree="$tmp/old"
git worktree add --detach "$worktree" "$old" >/dev/null
cleanup() { git worktree remove --force "$worktree" || true; rm -rf "$tmp"; }
trap cleanup EXIT
(cd "$worktree" && make build)
make build
a=() b=()
for i in $(seq "$rounds"); do
	# shellcheck disable=SC2086 # BENCH_FLAGS is a list of flags
	go run ./bench/cmd/gatehouse-bench -bin "$worktree/bin" -json "$tmp/a$i.json" ${BENCH_FLAGS:-}
	a+=("$tmp/a$i.json")
	# shellcheck disable=SC2086
	go run ./bench/cmd/gatehouse-bench -bin bin -json "$tmp/b$i.json" ${BENCH_FLAGS:-}
	b+=("$tmp/b$i.json")
done
mkdir -p bench/results
dirty=""
git diff --quiet HEAD -- . || dirty="+dirty"
go run ./bench/cmd/gatehouse-bench-compare -label-a "$old ($(git rev-parse --short "$old"))" -label-b "this tree ($(git rev-parse --short HEAD)$dirty)" -a "$(IFS=,; echo "${a[*]}")" -b "$(IFS=,; echo "${b[*]}")" | tee bench/results/compare.txt
