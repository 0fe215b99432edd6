#!/usr/bin/env bash
# rules/check_cli.sh SLUICE TESTDATA - run `sluice check` as a user would
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
"$sluice" check ../../examples/rules.yaml >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 0 ] || { cat "$out/stderr"; fail "check examples/rules.yaml: exit $rc, expected 0"; }
[ -s "$out/stderr" ] && fail "check examples/rules.yaml wrote to stderr"
grep -qx '../../examples/rules.yaml: 9 rules, valid' "$out/stdout" || fail "valid: $(cat "$out/stdout")"

# a file that cannot be opened: exit 1, the file named
"$sluice" check no-such-file.yaml 2>"$out/stderr"
rc=$?
[ $rc -eq 1 ] || fail "missing file: exit $rc, expected 1"
grep -qx 'no-such-file.yaml: cannot open: No such file or directory' "$out/stderr" ||
  fail "missing file: $(cat "$out/stderr")"

# bad arguments: the usage line on stderr, exit 2
usage="usage: sluice check RULES.yaml
       sluice explain RULES.yaml 'METHOD PATH [ip=ADDR] [user=ID] [host=HOST] [header:NAME=VALUE] [query:NAME=VALUE]...'"
for args in "" "check" "check a b" "explain errors.yaml" "chek errors.yaml" "--check"; do
  # shellcheck disable=SC2086
  "$sluice" $args >"$out/stdout" 2>"$out/stderr"
  rc=$?
  [ $rc -eq 2 ] || fail "'sluice $args': exit $rc, expected 2"
  [ "$(cat "$out/stderr")" = "$usage" ] || fail "'sluice $args': stderr '$(cat "$out/stderr")'"
  [ -s "$out/stdout" ] && fail "'sluice $args' wrote to stdout"
done
"$sluice" -h >"$out/stdout" 2>&1
[ $? -eq 0 ] && [ "$(cat "$out/stdout")" = "$usage" ] || fail "sluice -h"
echo "ok"
