#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/rules/check_cli.sh SLUICE TESTDATA [engine|no-engine] - run `sluice check` as a user would
# and check its exit codes and output (issue 12, "Done when": a file with
# ten different errors, each line named).  Exits 1 on the first mismatch.
# $sluice, fail, $out and the working directory TESTDATA (cli_test.sh)
. "$(dirname "${BASH_SOURCE[0]}")/cli_test.sh"

# every error of errors.yaml, each file:line:col: message, in file order
"$sluice" check errors.yaml >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 1 ] || fail "check errors.yaml: exit $rc, expected 1"
[ -s "$out/stdout" ] && fail "check errors.yaml wrote to stdout"
diff -u errors.expected "$out/stderr" || fail "check errors.yaml: stderr differs from errors.expected"
[ "$(wc -l <"$out/stderr")" -eq 11 ] || fail "expected 11 error lines"

# the complete example is valid
"$sluice" check ../../../examples/rules.yaml >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 0 ] || { cat "$out/stderr"; fail "check examples/rules.yaml: exit $rc, expected 0"; }
[ -s "$out/stderr" ] && fail "check examples/rules.yaml wrote to stderr"
# with the memory its tables, limiters and metrics need, and the budget
grep -Eqx '\.\./\.\./\.\./examples/rules\.yaml: 9 rules, valid; needs [0-9]+ bytes of memory \(budget 1073741824\)' "$out/stdout" ||
  fail "valid: $(cat "$out/stdout")"
# a budget of the caller's: the same file refused under 1 MiB
"$sluice" check --memory-budget=1MiB ../../../examples/rules.yaml >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 1 ] || fail "check --memory-budget=1MiB: exit $rc, expected 1"
grep -Eq 'over the memory budget of 1048576 bytes' "$out/stderr" || fail "1MiB: $(cat "$out/stderr")"

# a file that cannot be opened: exit 1, the file named
"$sluice" check no-such-file.yaml 2>"$out/stderr"
rc=$?
[ $rc -eq 1 ] || fail "missing file: exit $rc, expected 1"
grep -qx 'no-such-file.yaml: cannot open: No such file or directory' "$out/stderr" ||
  fail "missing file: $(cat "$out/stderr")"

# a FIFO with no writer: refused at once (the old code blocked in open())
mkfifo "$out/fifo" || fail "mkfifo"
timeout 20 "$sluice" check "$out/fifo" >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 1 ] || fail "check on a FIFO: exit $rc, expected 1 (124: it blocked)"
grep -qx "$out/fifo: cannot open: not a regular file" "$out/stderr" ||
  fail "FIFO: $(cat "$out/stderr")"
# nor a directory
"$sluice" check . 2>"$out/stderr"
[ $? -eq 1 ] && grep -qx ".: cannot open: not a regular file" "$out/stderr" ||
  fail "directory: $(cat "$out/stderr")"

# the memory a file needs: 400 per-key rules at the default capacity
# (about 3.3 GB of tables) are refused under the default budget, at the
# rule that crosses it; the old code called the file valid
{
  echo "rules:"
  for i in $(seq 0 399); do
    echo "  - id: r$i"
    echo "    match: { prefix: /p$i/ }"
    echo "    dimensions: [ip]"
    echo "    limit: { algorithm: fixed_window, window: 1h, max_requests: 10 }"
  done
} >"$out/big.yaml"
"$sluice" check "$out/big.yaml" >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 1 ] || fail "check big.yaml: exit $rc, expected 1"
grep -Eq "^$out/big.yaml:[0-9]+:5: rule 'r[0-9]+': the file needs [0-9]+ bytes of memory up to this rule, over the memory budget of 1073741824 bytes" "$out/stderr" ||
  fail "big.yaml: $(cat "$out/stderr")"
# explain refuses it the same way, before making an engine of it; a
# build without the engine says so, and offers no explain
"$sluice" explain "$out/big.yaml" 'GET /p1/' >"$out/stdout" 2>"$out/stderr"
rc=$?
if [ "$engine" = engine ]; then
  [ $rc -eq 1 ] && grep -q "over the memory budget of 1073741824 bytes" "$out/stderr" ||
    fail "explain big.yaml: exit $rc, $(cat "$out/stderr")"
else
  [ $rc -eq 2 ] && grep -qx "sluice explain: this sluice was built without the rules engine (meson setup -Dengine=enabled)" "$out/stderr" ||
    fail "explain without the engine: exit $rc, $(cat "$out/stderr")"
fi
# and passes it under a budget of 4g
"$sluice" check --memory-budget=4g "$out/big.yaml" >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 0 ] && grep -Eq "400 rules, valid; needs [0-9]+ bytes of memory \(budget 4294967296\)" "$out/stdout" ||
  fail "check --memory-budget=4g big.yaml: exit $rc, $(cat "$out/stdout" "$out/stderr")"
"$sluice" check --memory-budget=lots "$out/big.yaml" >"$out/stdout" 2>"$out/stderr"
[ $? -eq 2 ] && grep -q "^sluice: --memory-budget: 'lots': not a number" "$out/stderr" ||
  fail "--memory-budget=lots: $(cat "$out/stderr")"

# bad arguments: one line naming what is wrong, then the usage, on stderr, exit 2
usage="usage: sluice check [--memory-budget=SIZE] RULES.yaml
       sluice -h | --help | --version"
bad="=sluice: a command is needed (check, explain)
check=sluice check: takes one RULES.yaml, given 0 arguments
check a b=sluice check: takes one RULES.yaml, given 2 arguments
chek errors.yaml=sluice: unknown command 'chek' (check, explain, -h, --help, --version)
--check=sluice: unknown command '--check' (check, explain, -h, --help, --version)"
if [ "$engine" = engine ]; then
  usage="$usage
       sluice explain [--memory-budget=SIZE] RULES.yaml 'METHOD PATH [ip=ADDR] [user=ID] [host=HOST] [header:NAME=VALUE] [query:NAME=VALUE]...'..."
  bad="$bad
explain errors.yaml=sluice explain: takes RULES.yaml and at least one request, given 1 argument"
fi
while IFS='=' read -r args first; do
  # shellcheck disable=SC2086
  "$sluice" $args >"$out/stdout" 2>"$out/stderr"
  rc=$?
  [ $rc -eq 2 ] || fail "'sluice $args': exit $rc, expected 2"
  [ "$(cat "$out/stderr")" = "$first
$usage" ] || fail "'sluice $args': stderr '$(cat "$out/stderr")'"
  [ -s "$out/stdout" ] && fail "'sluice $args' wrote to stdout"
done <<<"$bad"
for h in -h --help; do
  "$sluice" $h >"$out/stdout" 2>&1
  [ $? -eq 0 ] && [ "$(cat "$out/stdout")" = "$usage" ] || fail "sluice $h"
done
# --version: the library's version, the one version.h was built with
"$sluice" --version >"$out/stdout" 2>&1 || fail "sluice --version: exit $?"
grep -qE '^sluice [0-9]+\.[0-9]+\.[0-9]+ \(built with [0-9]+\.[0-9]+\.[0-9]+\)$' "$out/stdout" ||
  fail "sluice --version: '$(cat "$out/stdout")'"
echo "ok"
