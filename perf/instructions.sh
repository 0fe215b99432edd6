#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Instructions per decision, counted by valgrind's callgrind: the figure to
# track over time, because unlike ns it does not move with a noisy machine.
#
#   perf/instructions.sh [BUILD_DIR] [ALGO...]
#
# For each algorithm, runs perf/decide_n under callgrind with COUNT and with
# 2 x COUNT decisions; (Ir(2 COUNT) - Ir(COUNT)) / COUNT cancels start-up and
# setup, leaving the decision path: one thread, allow regime, n = 1, the
# decision filled, time from the caller (no clock read; see decide_n.c).
# `null` is the loop alone (time, sums, the admitted count): subtract it.
# Under valgrind the kernel's rseq area is not registered, so sluice_cpu()
# falls back to sched_getcpu(): ring-lease counts that fallback, which a
# native run does not pay.
# Prints one line per algorithm:
#   instr algo=... instructions_per_decision=... admitted=... (admitted: decide_n only)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
algos=("$@")
[ ${#algos[@]} -gt 0 ] || algos=(null fixed ring-exact ring-lease gcra leaky log warmup
                                  decay inflight composite keyed-gcra keyed-fixed keyed-window
                                  keyed-inflight mutex-fixed)
command -v valgrind >/dev/null ||
  { echo "perf/instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
targets=(perf/decide_n)
[[ " ${algos[*]}" == *" rules:"* ]] && targets+=(bench/bench_rules)
ninja -C "$build" "${targets[@]}" >/dev/null
count=100000
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Ir of one run: callgrind's "summary:" line of its output file.  An ALGO
# named rules:CASE is bench_rules --instr=CASE:COUNT (CASE decide, keyed or
# empty-decide: a request through the engine, the same keyed decisions
# made directly, an engine with no rule set), one request per "decision".
ir() {
  local cmd=("$build/perf/decide_n" "$1" "$2")
  [[ "$1" == rules:* ]] && cmd=("$build/bench/bench_rules" "--instr=${1#rules:}:$2")
  valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "${cmd[@]}" \
    >"$tmp/stdout" 2>"$tmp/stderr" || { cat "$tmp/stderr" >&2; exit 1; }
  awk '/^summary:/ { print $2 }' "$tmp/out"
}

for a in "${algos[@]}"; do
  one=$(ir "$a" $count)
  admitted=$(sed -n 's/.*admitted=\([0-9]*\).*/\1/p' "$tmp/stdout")
  two=$(ir "$a" $((2 * count)))
  admitted2=$(sed -n 's/.*admitted=\([0-9]*\).*/\1/p' "$tmp/stdout")
  awk -v a="$a" -v one="$one" -v two="$two" -v n=$count -v adm="$admitted2" -v dec=$((2 * count)) \
    'BEGIN { printf "instr algo=%s instructions_per_decision=%.1f", a, (two - one) / n
             if (adm != "") printf " admitted=%.4f", adm / dec
             printf "\n" }'
done
