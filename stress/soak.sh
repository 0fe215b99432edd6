#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# soak.sh - run every stress program for a while and total the results.
#
#   stress/soak.sh [-C BUILDDIR] [SECONDS]
#
# Runs each configuration below for SECONDS (default 30) one after the other
# (each already uses every core), prints every program's result line, then
#   soak total runs=R seconds=S decisions=D admitted=A violations=V errors=E
# and exits 1 if any run reported a VIOLATION, 2 if any run failed otherwise
# (usage, setup, an incomplete record buffer), else 0.  BUILDDIR (default
# build) must hold a built tree (ninja -C BUILDDIR).  With 17 runs of 30 s
# the soak takes about 9 minutes and makes well over 10^8 decisions on 2
# cores.
set -uo pipefail
cd "$(dirname "$0")/.."

build=build
if [ "${1:-}" = "-C" ]; then
  build=$2
  shift 2
fi
secs=${1:-30}
bin=$build/stress
[ -x "$bin/stress_window" ] || { echo "soak: no stress programs in $bin (build first)" >&2; exit 2; }

# program and arguments, one run per line
runs=(
  "fixed --clock=cached --threads=8 --window-ms=20"
  "window --clock=monotonic --threads=8"
  "window --clock=monotonic --threads=2 --limit=2000 --pause-us=1000"
  "window --clock=cached --threads=8"
  "window --lease=4 --clock=cached --threads=8"
  "window --lease=16 --clock=monotonic --threads=8 --limit=2000 --pause-us=4000"
  "gcra --clock=coarse --threads=8 --burst=512"
  "gcra --clock=monotonic --threads=2"
  "leaky --mode=meter --clock=cached --threads=8 --depth=63"
  "leaky --mode=shaper --clock=monotonic --threads=8"
  "log --clock=monotonic --threads=8"
  "log --clock=cached --threads=2 --limit=200 --pause-us=500"
  "decay --clock=monotonic --threads=8"
  "warmup --clock=monotonic --threads=8"
  "inflight --clock=cached --threads=8"
  "composite --clock=monotonic --threads=8 --order=window,gcra"
  "composite --clock=cached --threads=2 --order=gcra,window"
)
total_runs=0 decisions=0 admitted=0 violations=0 errors=0
for r in "${runs[@]}"; do
  prog=${r%% *}
  args=${r#* }
  # shellcheck disable=SC2086 # word splitting of args is intended
  line=$("$bin/stress_$prog" $args --seconds="$secs")
  rc=$?
  total_runs=$((total_runs + 1))
  if [ -n "$line" ]; then
    echo "$line"
    d=$(sed -n 's/.* decisions=\([0-9]*\).*/\1/p' <<<"$line")
    a=$(sed -n 's/.* admitted=\([0-9]*\).*/\1/p' <<<"$line")
    decisions=$((decisions + ${d:-0}))
    admitted=$((admitted + ${a:-0}))
  fi
  if [ "$rc" -eq 1 ] || grep -q 'verdict=VIOLATION' <<<"$line"; then
    violations=$((violations + 1))
  elif [ "$rc" -ne 0 ]; then
    echo "soak: stress_$prog $args exited $rc" >&2
    errors=$((errors + 1))
  fi
done
echo "soak total runs=$total_runs seconds=$secs decisions=$decisions admitted=$admitted" \
     "violations=$violations errors=$errors"
[ "$violations" -eq 0 ] || exit 1
[ "$errors" -eq 0 ] || exit 2
exit 0
