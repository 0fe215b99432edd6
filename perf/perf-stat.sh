#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cycles, instructions and cache misses per decision from `perf stat`,
# where the machine exposes hardware counters (many VMs do not: then perf
# says "<not supported>" and this script says so, and prints the software
# counters it did get).
#
#   perf/perf-stat.sh [BUILD_DIR] [ALGO...]      (ALGO as for perf/decide_n)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
algos=("$@")
[ ${#algos[@]} -gt 0 ] || algos=(fixed ring-exact ring-lease gcra mutex-fixed)
command -v perf >/dev/null || { echo "perf/perf-stat.sh: needs perf (linux-perf)" >&2; exit 2; }
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" perf/decide_n >/dev/null
count=50000000
for a in "${algos[@]}"; do
  out=$(perf stat -x, -e task-clock,cycles,instructions,cache-misses,L1-dcache-load-misses \
          "$build/perf/decide_n" "$a" $count 2>&1 >/dev/null) || true
  echo "$out" | awk -F, -v a="$a" -v n=$count '
    $3 ~ /task-clock|cycles|instructions|misses/ {
      if ($1 ~ /not supported|not counted/) { printf "perf algo=%s %s=unsupported\n", a, $3; next }
      v = $3 == "task-clock" ? $1 * 1e6 / n : $1 / n
      printf "perf algo=%s %s_per_decision=%.3f\n", a, ($3 == "task-clock" ? "ns" : $3), v
    }'
done
