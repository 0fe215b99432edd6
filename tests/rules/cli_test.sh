# SPDX-License-Identifier: MIT
# tests/rules/cli_test.sh - sourced (not run) by check_cli.sh and explain_cli.sh:
# the set-up both share.  The caller's arguments are SLUICE TESTDATA
# [engine|no-engine] (whether SLUICE was built with the rules engine,
# -Dengine; engine when not given): it leaves $sluice (the program,
# absolute), $engine, the working directory TESTDATA,
# fail MESSAGE (print FAIL: and exit 1) and $out, a scratch directory
# removed on exit.
set -u
sluice=$(realpath "$1")
engine=${3:-engine}
cd "$2" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
