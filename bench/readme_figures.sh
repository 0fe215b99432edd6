#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every figure of the README's Benchmarks section, from one command:
#
#   bench/readme_figures.sh [BUILD_DIR] [OUT_DIR]
#
# BUILD_DIR (default build-rel) is set up as a release build if it is not
# one yet.  The raw outputs go to OUT_DIR (default bench-figures/), one file
# per program, each starting with the bench_env / cpu line that names the
# machine; bench/figures.py then writes docs/figures.md and the README's
# table from them.  Takes about 12 minutes
# on a 2-core guest; run it on a quiet machine (the load average is
# recorded in OUT_DIR/env.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-rel}
out=${2:-bench-figures}
[ -f "$build/build.ninja" ] ||
  meson setup "$build" --buildtype=release -Dtests=disabled -Dexamples=disabled \
    -Dtools=disabled >/dev/null
ninja -C "$build" bench/bench_algos bench/bench_window bench/bench_keyed bench/bench_clock \
  perf/decide_n >/dev/null
mkdir -p "$out"
{
  date -u
  uptime
  grep -m1 "model name" /proc/cpuinfo
  echo "online cpus: $(getconf _NPROCESSORS_ONLN)"
  git log -1 --format='commit %H' 2>/dev/null || true
} >"$out/env.txt"
"$build/bench/bench_algos" --threads=1,2,4 --regimes=allow,deny,near --repeats=3 \
  --seconds=0.2 >"$out/bench_algos.txt"
"$build/bench/bench_window" --repeats=7 >"$out/bench_window.txt"
"$build/bench/bench_clock" >"$out/bench_clock.txt"
"$build/bench/bench_keyed" --repeats=5 --seconds=0.3 >"$out/bench_keyed.txt"
if command -v valgrind >/dev/null; then
  perf/instructions.sh "$build" >"$out/instructions.txt"
else
  echo "valgrind not installed: no instruction counts" >"$out/instructions.txt"
fi
uptime >>"$out/env.txt"
echo "bench/readme_figures.sh: figures in $out/"
# docs/figures.md and the README's table, from these outputs (bench/figures.py)
python3 bench/figures.py write "$out"
