#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Decisions per second against threads, one hot key, allow regime: sluice
# (ring EXACT with and without leases, GCRA, fixed window) beside the mutex
# and spinlock baselines of the same algorithm, drawn with gnuplot.
#
#   perf/plot.sh [BUILD_DIR] [OUT.svg|OUT.png] [THREADS]   (THREADS: 1,2,4)
#
# Runs bench_algos (about a minute), keeps its `bench ...` lines in
# OUT.txt beside the plot, and writes a data file per series.  With more
# threads than CPUs the last points show oversubscription.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-perf/scaling.svg}
threads=${3:-1,2,4}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" bench/bench_algos >/dev/null
"$build/bench/bench_algos" --threads="$threads" --regimes=allow --repeats=3 --seconds=0.3 \
  --algos=fixed,ring-exact,ring-exact-lease,gcra >"${out%.*}.txt"
command -v gnuplot >/dev/null ||
  { echo "perf/plot.sh: gnuplot is not installed (apt-get install gnuplot-nox);" \
         "the figures are in ${out%.*}.txt" >&2; exit 0; }
dat=$(mktemp -d)
trap 'rm -rf "$dat"' EXIT
# one file per series: threads decisions_per_sec
awk -v dir="$dat" '/^bench / {
  for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
  name = f["algo"] (f["mode"] == "-" ? "" : "-" f["mode"]) "." f["impl"]
  print f["threads"], f["decisions_per_sec"] / 1e6 >> (dir "/" name)
}' "${out%.*}.txt"
plots=""
for f in "$dat"/*; do
  label=$(basename "$f")
  plots+="${plots:+, }'$f' using 1:2 with linespoints title '${label//_/\\_}'"
done
case "$out" in
  *.png) term="pngcairo size 1000,650" ;;
  *) term="svg size 1000,650 dynamic" ;;
esac
gnuplot <<GP
set terminal $term
set output '$out'
set title 'one hot key, allow regime: million decisions/s (all threads) vs threads'
set xlabel 'threads'
set ylabel 'million decisions / s'
set key outside right
set logscale y
set grid
set xtics 1
plot $plots
GP
echo "perf/plot.sh: wrote $out (figures: ${out%.*}.txt)"
