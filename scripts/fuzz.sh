#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/fuzz.sh [SECONDS] - build the libFuzzer targets in fuzz/ with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer, and run each one for
# SECONDS (default 5, as CI does; by hand: scripts/fuzz.sh 600) on its
# corpus.  Exits non-zero when any target crashes, leaks, trips a sanitizer,
# fails one of its checks, or spends more than 5 s on one input (-timeout: a
# call that spins is a failure).
#
# The tree's corpus (fuzz/corpus/<target>/) is read, never written: new
# inputs go to build-fuzz/fuzz/corpus/<target>/ (libFuzzer writes to the
# first corpus directory only), reproducers to
# build-fuzz/fuzz/fuzz_<target>-crash-... (or -timeout-, -leak-).  Keep a
# reproducer by copying it to fuzz/corpus/<target>/crash-<what>; keep a new
# input that covers something new with `-merge=1` into the tree's corpus,
# by hand, and only small ones.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
case $secs in
'' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2 ;;
esac
dir=build-fuzz
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

if [ ! -f "$dir/build.ninja" ]; then
  CC=clang meson setup "$dir" --werror -Dfuzz=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dc_args=-fno-sanitize-recover=all -Dtests=disabled -Dbenchmarks=disabled ||
    exit 1
fi
ninja -C "$dir" || exit 1

failed=()
for src in fuzz/fuzz_*.c; do
  t=$(basename "$src" .c)
  t=${t#fuzz_}
  scratch=$dir/fuzz/corpus/$t
  mkdir -p "$scratch"
  echo "== fuzz_$t: ${secs} s"
  if ! "$dir/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=5 -print_final_stats=1 \
    -error_exitcode=1 -timeout_exitcode=1 \
    -artifact_prefix="$dir/fuzz/fuzz_$t-" "$scratch" "fuzz/corpus/$t" 2>"$dir/fuzz/fuzz_$t.log"; then
    grep -E 'ERROR|SUMMARY|check failed|runtime error|Test unit written' "$dir/fuzz/fuzz_$t.log"
    echo "fuzz_$t FAILED (log: $dir/fuzz/fuzz_$t.log)"
    failed+=("$t")
  else
    grep -E '^stat::number_of_executed_units|^Done' "$dir/fuzz/fuzz_$t.log"
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: all targets passed"
