# SPDX-License-Identifier: MIT
# rules/cli_test.sh - sourced (not run) by check_cli.sh and explain_cli.sh:
# the set-up both share.  The caller's arguments are SLUICE TESTDATA: it
# leaves $sluice (the program, absolute), the working directory TESTDATA,
# fail MESSAGE (print FAIL: and exit 1) and $out, a scratch directory
# removed on exit.
set -u
sluice=$(realpath "$1")
cd "$2" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
