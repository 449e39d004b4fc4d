#!/usr/bin/env bash
# make bench-ab: the interleaved A/B benchmarks of the hand-made pieces
# (bench/README, "Hand-made machinery"). Every BenchmarkAB* runs its
# ab=hand and ab=plain arms in turn, and -count repeats the pair, so both
# are measured in one sitting; benchstat then gives each arm's median, its
# spread (±, the 95% confidence interval) and the change from plain to hand
# with its p-value. A change counts when benchstat calls it significant
# (p < 0.05) and it is larger than the ± of both arms.
#
#   AB_COUNT      pairs per benchmark (default 8)
#   AB_BENCHTIME  -benchtime of each arm (default 1s)
#   AB_BENCH      regexp of the benchmarks to run (default ^BenchmarkAB)
set -euo pipefail
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
count="${AB_COUNT:-8}"
benchtime="${AB_BENCHTIME:-1s}"
pattern="${AB_BENCH:-^BenchmarkAB}"
raw="bench/results/ab-raw.txt"
out="bench/results/ab.txt"

: >"$raw"
{
	echo "# make bench-ab at $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo '+dirty') on $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# AB_COUNT=$count AB_BENCHTIME=$benchtime"
} >>"$raw"
# Only the packages that hold an A/B benchmark: building every test binary
# of the workspace would take longer than the runs.
for dir in $(grep -rl --include='*_test.go' '^func BenchmarkAB' pkg services cli 2>/dev/null | xargs -n1 dirname | sort -u); do
	mod="$dir"
	while [ ! -f "$mod/go.mod" ]; do mod="$(dirname "$mod")"; done
	echo "bench-ab: $dir" >&2
	(cd "$mod" && go test -run '^$' -bench "$pattern" -count "$count" -benchtime "$benchtime" "./${dir#"$mod"/}") |
		{ grep -E '^(Benchmark|goos|goarch|pkg|cpu)' || true; } >>"$raw"
done
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$raw"
(cd pkg && go tool benchstat -col '/ab@(plain hand)' -ignore goos,goarch "$root/$raw") >"$out"
cat "$out"
echo "bench-ab: $out (raw: $raw)" >&2
