#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/test-arm64.sh [DIR] - scripts/test.sh's arm64 stage: the cross
# build for aarch64-linux-gnu (cross/aarch64-linux-gnu.ini: the core library,
# rules/ and tools/ and the unit tests, warnings as errors) and the plain
# unit suite run under qemu-user.  Writes "PASSED FAILED" to DIR.counts for test.sh's final line
# (a stage that stops early counts one failure).  DIR is build-test-arm64
# unless given.
#
# Not run under emulation, each printed with its reason:
#   - the suites stress and install: stress/ is heavy and timing-bound,
#     and under qemu every instruction costs 5-20x; the x86-64 builds run
#     them all (tests/core/pair_insn.sh checks the arm64 libsluice.so);
#   - redis/ (-Dredis=disabled): it needs hiredis for arm64 and a Redis
#     server, and its code is the same C as the x86-64 build tests;
#   - SKIP_TESTS below: shell scripts that run an arm64 program themselves,
#     which the kernel cannot without a binfmt_misc entry for qemu;
#   - single tests that skip themselves under SLUICE_TEST_EMULATOR (the
#     exe_wrapper sets it), whose reason Criterion prints: listed at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-test-arm64}
echo "0 1" >"$dir.counts"

declare -A SKIP_TESTS=(
  [sim_cli]="a bash script runs the arm64 sluice-sim itself (Exec format error without binfmt_misc)"
  [rules_check_cli]="a bash script runs the arm64 sluice itself (Exec format error without binfmt_misc)"
  [rules_explain_cli]="a bash script runs the arm64 sluice itself (Exec format error without binfmt_misc)"
  [docs_runnable]="the docs' shell blocks run the arm64 sluice and sluice-sim themselves (Exec format error without binfmt_misc)"
  [docs_sim]="a python script runs the arm64 sluice-sim itself (Exec format error without binfmt_misc)"
)

if ! scripts/arm64-sysroot.sh "$dir.sysroot" >"$dir.sysroot.log" 2>&1; then
  cat "$dir.sysroot.log"
  exit 1
fi
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" --werror -Dbenchmarks=disabled -Dredis=disabled -Dexamples=disabled \
    -Dtests=enabled -Dtools=enabled \
    --cross-file cross/aarch64-linux-gnu.ini --cross-file "$dir.sysroot/sysroot.ini" \
    >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; exit 1; }
else
  # an existing build dir: regenerate first, so the test and target list
  # read below is the tree's, not that of its last configuration
  ninja -C "$dir" build.ninja >"$dir.regen.log" 2>&1 || { cat "$dir.regen.log"; exit 1; }
fi
# Only what the suite 'unit' runs (its programs, and through them the
# libraries, rules/' sluice and tools/' sluice-sim): not stress/, which
# this stage does not run.
targets=$(meson introspect "$dir" --tests --targets | python3 -c '
import json, os, sys
d = json.load(sys.stdin)
files = {t["id"]: t["filename"] for t in d["targets"]}
want = {os.path.relpath(f, sys.argv[1]) for t in d["tests"]
        if any(s.split(":")[-1] == "unit" for s in t["suite"])
        for dep in t["depends"] for f in files.get(dep, [])}
print(" ".join(sorted(want)))' "$(realpath "$dir")")
if [ -z "$targets" ] || ! ninja -C "$dir" $targets >"$dir.ninja.log" 2>&1; then
  cat "$dir.ninja.log"
  exit 1
fi

echo "not run under qemu: the suites stress and install, and redis/ (see $0)"
run=()
while read -r t; do
  if [ -n "${SKIP_TESTS[$t]:-}" ]; then
    echo "skipped: $t: ${SKIP_TESTS[$t]}"
  else
    run+=("$t")
  fi
done < <(meson test -C "$dir" --list --suite unit 2>/dev/null | sed -n 's|^[^ ]*:unit / ||p')

rm -f "$dir/meson-logs/testlog.json"
# Verbosity 1: Criterion names each test it skips, with the reason, in the log.
CRITERION_VERBOSITY_LEVEL=1 meson test -C "$dir" --suite unit --no-rebuild --print-errorlogs --num-processes 2 "${run[@]}" |
  grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Timeout):'
# Criterion's own skips (tests that cannot hold under qemu-user), with its reason.
grep -hE '^\[SKIP\]' "$dir/meson-logs/testlog.txt" | grep -v ': Test is disabled$' |
  sed 's/^\[SKIP\] /skipped: /' | sort -u
python3 scripts/testlog_counts.py "$dir/meson-logs/testlog.json" "$dir.failures" >"$dir.counts"
