#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/rules/explain_cli.sh SLUICE TESTDATA - run `sluice explain` as a user
# would: the rules a request matches, their keys and decisions, exactly as
# printed; an invalid file (exit 1); bad arguments (usage, exit 2).
# $sluice, fail, $out and the working directory TESTDATA (cli_test.sh)
. "$(dirname "${BASH_SOURCE[0]}")/cli_test.sh"

# three rules on one request: per IP and per user, a global one, a shadow
# one whose keys come from the query string and a header
"$sluice" explain explain.yaml \
  'POST /api/order/create?tenant=acme ip=203.0.113.7 user=42 header:x-api-key=K1' \
  >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 0 ] || { cat "$out/stderr"; fail "explain: exit $rc, expected 0"; }
[ -s "$out/stderr" ] && fail "explain wrote to stderr: $(cat "$out/stderr")"
cat >"$out/expected" <<'OUT'
explain.yaml: 4 rules; 3 match POST /api/order/create
rule order-create (explain.yaml:4): token_bucket, 50/s, burst 20
  key ip = 203.0.113.7
  key user = 42
  decides: passed, 19 left
rule api-total (explain.yaml:9): fixed_window, 1000 per 1m
  key global
  decides: passed, 999 left
rule tenants (explain.yaml:12): sliding_window, 100 per 10s, shadow
  key query:tenant = acme
  key header:X-Api-Key = K1
  decides: passed, 99 left
action: pass
OUT
diff -u "$out/expected" "$out/stdout" || fail "explain: output differs"

# methods are matched: GET is not order-create's; an IPv6 address; the
# keys a request does not have
"$sluice" explain explain.yaml 'GET /api/order/create ip=2001:db8::1' >"$out/stdout" 2>&1 ||
  fail "explain GET: exit $?"
grep -qx 'explain.yaml: 4 rules; 2 match GET /api/order/create' "$out/stdout" ||
  fail "GET: $(head -1 "$out/stdout")"
grep -qx '  key query:tenant: none in the request (the one shared key of requests without it)' \
  "$out/stdout" || fail "absent key: $(cat "$out/stdout")"
"$sluice" explain explain.yaml 'GET /elsewhere' >"$out/stdout" 2>&1 || fail "no match: exit $?"
[ "$(cat "$out/stdout")" = "$(printf 'explain.yaml: 4 rules; 0 match GET /elsewhere\naction: pass')" ] ||
  fail "no match: $(cat "$out/stdout")"

# a sequence: decided in order on one engine, so the second request on
# a limit of 1 per hour is refused where a first one passes
"$sluice" explain explain.yaml 'GET /api/slow' 'GET /api/slow' 'GET /elsewhere' >"$out/stdout" 2>&1 ||
  fail "explain a sequence: exit $?"
[ "$(grep '^action: ' "$out/stdout" | tr '\n' ' ')" = "action: pass action: reject 503 action: pass " ] ||
  fail "sequence: $(cat "$out/stdout")"
[ "$(grep -c '^explain.yaml: 4 rules; ' "$out/stdout")" -eq 3 ] || fail "sequence: not one block per request"

# an invalid file: its errors as check prints them, exit 1
"$sluice" explain errors.yaml 'GET /' >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 1 ] || fail "explain errors.yaml: exit $rc, expected 1"
diff -u errors.expected "$out/stderr" || fail "explain errors.yaml: stderr differs"

# bad arguments and requests: a reason, the usage, exit 2
for req in "" "GET" "api/x" "GET api/x" "GET /x ip=300.1.1.1" "GET /x colour=red" \
           "GET /x user" "GET /x?tenant"; do
  "$sluice" explain explain.yaml "$req" >"$out/stdout" 2>"$out/stderr"
  rc=$?
  [ $rc -eq 2 ] || fail "explain '$req': exit $rc, expected 2"
  grep -q '^usage: sluice check \[--memory-budget=SIZE\] RULES.yaml$' "$out/stderr" || fail "explain '$req': no usage"
  [ -s "$out/stdout" ] && fail "explain '$req' wrote to stdout"
done
# each error names what it refuses
while IFS='|' read -r req word; do
  "$sluice" explain explain.yaml "$req" >"$out/stdout" 2>"$out/stderr"
  grep -qF "$word" "$out/stderr" || fail "explain '$req': the error does not name $word: $(head -1 "$out/stderr")"
done <<'EOF'
GET /x colour=red|unknown word 'colour'
GET /x ipp=1|unknown word 'ipp'
GET /x ip=300.1.1.1|ip=300.1.1.1
GET /x user|'user'
GET /x?tenant|'tenant'
api/x|'api/x'
EOF
"$sluice" explain explain.yaml >"$out/stdout" 2>"$out/stderr"
[ $? -eq 2 ] || fail "explain without a request: not exit 2"
# a bad request among good ones: none is decided
"$sluice" explain explain.yaml 'GET /' extra >"$out/stdout" 2>"$out/stderr"
[ $? -eq 2 ] && [ ! -s "$out/stdout" ] || fail "explain with a bad second request: not exit 2, or it decided"
echo "ok"
