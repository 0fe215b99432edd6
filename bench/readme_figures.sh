#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every measured figure the docs quote (docs/figures.md), from one command:
#
#   bench/readme_figures.sh [BUILD_DIR] [OUT_DIR]
#
# BUILD_DIR (default build-rel) is set up as a release build if it is not
# one yet, with the tests' Redis fixture (bench_redis starts its own
# redis-server) and the nginx module.  The raw outputs go to OUT_DIR
# (default bench-figures/), one file per program, each starting with the
# bench_env / cpu line that names the machine; bench/figures.py then writes
# docs/figures.md and the generated regions of README.md and docs/*.md from
# them.  What each part needs is skipped, and said, when missing: valgrind
# (instruction counts), the rules engine, hiredis and redis-server
# (bench_redis), nginx and wrk (nginx/bench.sh, nginx/callgrind.sh).  Takes
# about 20 minutes on a 2-core guest; run it on a quiet machine (the load
# average before and after is recorded in OUT_DIR/env.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-rel}
out=${2:-bench-figures}
[ -f "$build/build.ninja" ] ||
  meson setup "$build" --buildtype=release -Dtests=enabled -Dnginx=auto -Dexamples=disabled \
    -Dtools=disabled >/dev/null
ninja -C "$build" >/dev/null
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
for policy in evict reject allow; do
  "$build/stress/stress_keyed" --mode=flood --threads=2 --policy=$policy
done >"$out/keyed_flood.txt"
have() { [ -x "$build/$1" ] || { echo "$build/$1 not built: skipped" >&2; return 1; }; }
rules=()
[ -x "$build/bench/bench_rules" ] && rules=(rules:decide rules:keyed rules:empty-decide)
if command -v valgrind >/dev/null; then
  perf/instructions.sh "$build" null fixed ring-exact ring-lease gcra leaky log warmup decay \
    inflight composite keyed-gcra keyed-fixed keyed-window keyed-inflight mutex-fixed \
    "${rules[@]}" >"$out/instructions.txt"
else
  echo "valgrind not installed: no instruction counts" | tee "$out/instructions.txt" >&2
fi
if have bench/bench_rules; then
  "$build/bench/bench_rules" --repeats=5 --seconds=0.3 >"$out/bench_rules.txt"
fi
if have bench/bench_redis; then
  "$build/bench/bench_redis" >"$out/bench_redis.txt"
fi
module=$build/nginx/ngx_http_sluice_module.so
if have nginx/ngx_http_sluice_module.so && command -v wrk >/dev/null; then
  nginx/bench.sh "$module" >"$out/nginx_bench.txt"
  if command -v valgrind >/dev/null; then nginx/callgrind.sh "$module" >"$out/nginx_callgrind.txt"; fi
fi
uptime >>"$out/env.txt"
echo "bench/readme_figures.sh: figures in $out/"
# docs/figures.md and the docs' generated regions, from these outputs (bench/figures.py)
python3 bench/figures.py write "$out"
