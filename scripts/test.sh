#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build and run every test in three configurations: plain, AddressSanitizer +
# UndefinedBehaviorSanitizer, ThreadSanitizer; then the fuzz targets in a
# fourth (clang, ASan + UBSan, libFuzzer).  Warnings are errors.  The last
# line is "N passed, N failed", counted from meson's test logs.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || { echo "0 passed, 1 failed"; exit 1; }

# The sanitizers' options (ASAN_OPTIONS, UBSAN_OPTIONS, TSAN_OPTIONS) come
# from the test setups 'asan' and 'tsan' in meson.build, so `meson test
# --setup=...` by hand runs exactly what this script runs.

passed=0
failed=0
rm -f build-test-*.failures

# run_config NAME TEST-SETUP MESON-SETUP-ARGS...  (TEST-SETUP '' for none)
run_config() {
  # meson names the log after the setup: testlog-asan.json for --setup=asan.
  local name=$1 dir=build-test-$1 setup=() log=testlog.json
  [ -n "$2" ] && setup=(--setup="$2") && log=testlog-$2.json
  shift 2
  echo "== $name"
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --werror -Dbenchmarks=disabled "$@" >"$dir.setup.log" 2>&1 ||
      { cat "$dir.setup.log"; failed=$((failed + 1)); return; }
  fi
  if ! ninja -C "$dir" >"$dir.ninja.log" 2>&1; then
    cat "$dir.ninja.log"
    failed=$((failed + 1))
    return
  fi
  rm -f "$dir/meson-logs/$log"
  meson test -C "$dir" "${setup[@]}" --print-errorlogs --num-processes 2 | grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Timeout):'
  local counts
  counts=$(python3 scripts/testlog_counts.py "$dir/meson-logs/$log" "$dir.failures")
  passed=$((passed + ${counts% *}))
  failed=$((failed + ${counts#* }))
}

# The plain build is the one that also builds and tests the nginx module
# (off by default: meson_options.txt; it cannot load into a sanitizer build).
run_config plain '' -Dnginx=enabled
run_config asan asan -Db_sanitize=address,undefined -Db_lundef=false -Dc_args=-fno-sanitize-recover=all
run_config tsan tsan -Db_sanitize=thread -Db_lundef=false
# The libFuzzer targets (fuzz/, clang only): each is a meson test of the
# suite 'fuzz' that fuzzes for 5 s from the tree's corpus, every reproducer
# in it included (fuzz/meson.build; scripts/fuzz.sh runs them longer).
CC=clang run_config fuzz asan -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
  -Dc_args=-fno-sanitize-recover=all -Dtests=disabled

# arm64: the cross build (cross/aarch64-linux-gnu.ini) and its plain unit
# suite under qemu-user, counted as its own build; scripts/test-arm64.sh
# says what it does not run under emulation, and why.
echo "== arm64"
scripts/test-arm64.sh build-test-arm64
read -r a64_ok a64_bad <build-test-arm64.counts || { a64_ok=0; a64_bad=1; }
passed=$((passed + a64_ok))
failed=$((failed + a64_bad))

# The plain build and install on a machine with only a compiler, libc and
# pthreads: a debootstrap chroot, made once and kept (scripts/clean_machine.sh
# says what it checks; it builds the committed tree, git archive HEAD).
# Exit 77 is "cannot make such a machine here" (not root, no mirror): said,
# and counted neither way.
echo "== clean machine"
scripts/clean_machine.sh >clean-machine.log 2>&1
case $? in
0) passed=$((passed + 1)); tail -1 clean-machine.log ;;
77) echo "skipped: $(tail -1 clean-machine.log)" ;;
*) failed=$((failed + 1)); cat clean-machine.log ;;
esac

# Every failure again, last: the tail of a CI log is what is kept of it.
for f in build-test-*.failures; do
  [ -s "$f" ] && { echo "== failures in ${f%.failures}"; cat "$f"; }
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
