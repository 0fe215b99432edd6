#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Hot-key, keyed, rules-engine and nginx scaling in one command: the set of
# benchmarks at 1, 2, 4, ... threads (nginx: workers) up to the machine's
# CPUs, nproc itself always included, and one Markdown table of the medians.
#
#   bench/scaling.sh [--quick] [--build=DIR] OUT.md
#   bench/scaling.sh --counts            (print the thread counts and exit)
#
# Runs, at every count N of the list (each program takes the whole list,
# nginx/bench.sh one N per run):
#   bench_algos --threads=LIST --regimes=allow   one hot key: fixed window,
#        ring EXACT with and without leases (1024, 64), GCRA with and without
#        leases (gcra-lease64 too, where bench_algos has that series), GCRA
#        under one mutex, and the per-thread fetch_add probe;
#   bench_keyed --threads=LIST    GCRA per key, 10,000 random keys and Zipf
#        over 1M, beside a plain array, per-key mutexes and one mutex;
#   bench_rules --threads=LIST    the engine's decide and its bare keyed pair;
#   nginx/bench.sh with NGINX_WORKERS=N, wrk with ceil(N/2) threads of 32
#        connections each on the same machine, throughput part only
#        (BENCH_EXACT=0); skipped, and said, without the module or wrk.
# The table goes to stdout and OUT.md (bench/figures.py scaling renders it);
# the raw outputs stay in OUT.raw/.  DIR (default build-rel) is set up as a
# release build with the benchmarks and the nginx module if it is not one
# yet.  Time: about 1 minute with --quick on a 2-CPU machine (1-3 runs of
# 0.1-0.2 s per case, nginx 1 run of 1 s: a smoke run, not figures), about
# 5 minutes without it; each count more (a machine of 4x the CPUs has 2
# more) adds about 20 s with --quick, 1.5 minutes without.
# docs/performance.md ("Beyond 2 cores") says what each row should do on a
# larger machine, and why.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 build=build-rel out=
usage() { echo "usage: bench/scaling.sh [--quick] [--build=DIR] OUT.md | --counts" >&2; exit 2; }

counts() { # 1, 2, 4, ... below the online CPUs, then the CPUs (at most 256)
  local n c=1 list=
  n=$(nproc)
  [ "$n" -le 256 ] || n=256
  while [ "$c" -lt "$n" ]; do list+="$c,"; c=$((c * 2)); done
  echo "$list$n"
}

for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    --build=*) build=${a#--build=} ;;
    --counts) counts; exit 0 ;;
    -*) usage ;;
    *) [ -z "$out" ] || usage; out=$a ;;
  esac
done
[ -n "$out" ] || usage
list=$(counts)
raw=${out%.md}.raw
mkdir -p "$raw"
rm -f "$raw"/scaling_env.txt "$raw"/bench_{algos,keyed,rules}.txt "$raw"/nginx_w*.txt

[ -f "$build/build.ninja" ] ||
  meson setup "$build" --buildtype=release -Dbenchmarks=enabled -Dnginx=auto \
    -Dexamples=disabled -Dtools=disabled >/dev/null
ninja -C "$build" >/dev/null

if [ "$quick" = 1 ]; then
  lib=(--quick) nginx_env=(BENCH_SECONDS=1 BENCH_RUNS=1)
  runs="a smoke run: 1-3 runs of 0.1-0.2 s per case, nginx 1 run of 1 s"
else
  lib=(--repeats=3 --seconds=0.3) nginx_env=(BENCH_SECONDS=3 BENCH_RUNS=3)
  runs="3 runs of 0.3 s per case, nginx 3 runs of 3 s"
fi
echo "scaling mode=$([ "$quick" = 1 ] && echo quick || echo full) counts=$list" \
  "online_cpus=$(nproc) runs=\"$runs\" load=\"$(cut -d' ' -f1-3 /proc/loadavg)\"" \
  >"$raw/scaling_env.txt"
say() { echo "bench/scaling.sh: $*" >&2; }

say "bench_algos at $list"
"$build/bench/bench_algos" --threads="$list" --regimes=allow "${lib[@]}" \
  --algos=fixed-exact,ring-exact,ring-exact-lease,ring-exact-lease64,gcra--,gcra-lease,gcra-lease64 \
  >"$raw/bench_algos.txt"
say "bench_keyed at $list"
"$build/bench/bench_keyed" --threads="$list" "${lib[@]}" >"$raw/bench_keyed.txt"
if [ -x "$build/bench/bench_rules" ]; then
  say "bench_rules at $list"
  "$build/bench/bench_rules" --threads="$list" "${lib[@]}" >"$raw/bench_rules.txt"
else
  say "$build/bench/bench_rules not built (no rules engine): skipped"
fi
module=$build/nginx/ngx_http_sluice_module.so
if [ -f "$module" ] && command -v wrk >/dev/null; then
  for n in ${list//,/ }; do
    say "nginx/bench.sh with NGINX_WORKERS=$n"
    env "${nginx_env[@]}" BENCH_EXACT=0 NGINX_WORKERS="$n" WRK_THREADS=$(((n + 1) / 2)) \
      WRK_CONNECTIONS=$((32 * ((n + 1) / 2))) nginx/bench.sh "$module" >"$raw/nginx_w$n.txt"
  done
else
  say "no $module or no wrk: nginx skipped"
fi
python3 bench/figures.py scaling "$raw" | tee "$out"
say "table in $out, raw outputs in $raw/"
