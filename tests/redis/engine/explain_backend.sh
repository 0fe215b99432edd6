#!/bin/bash
# SPDX-License-Identifier: MIT
# `sluice explain` names the backend of each decision (rules.h BACKENDS):
# "backend fleet (redis ADDRESS, fallback local): ..." for a rule on it,
# "backend local" for one per instance.  No server listens on the port
# (one the kernel gave and took back), so the rule on Redis is decided by
# its fallback, and says so.
set -eu
sluice=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$dir/r.yaml" <<YAML
backends:
  fleet: { type: redis, address: 127.0.0.1:$port, budget: 1ms, fallback: local, expected_instances: 4 }
rules:
  - id: global
    match: { prefix: /api/ }
    backend: fleet
    limit: { algorithm: fixed_window, window: 1s, max_requests: 100 }
  - id: mine
    limit: { algorithm: token_bucket, rate: 10/s, burst: 5 }
YAML
"$sluice" check "$dir/r.yaml"
out=$("$sluice" explain "$dir/r.yaml" 'GET /api/x ip=10.0.0.1')
echo "$out"
fail=0
grep -qx "  backend fleet (redis 127.0.0.1:$port, fallback local): by its fallback (Redis did not answer within the budget, or the breaker is open)" <<<"$out" || { echo "FAIL: no backend line for rule global"; fail=1; }
grep -qx "  backend local" <<<"$out" || { echo "FAIL: no 'backend local' for rule mine"; fail=1; }
# the local share: 100 / 4 = 25, one taken
grep -qx "  decides: passed, 24 left" <<<"$out" || { echo "FAIL: not the local share's count"; fail=1; }
# check refuses a bad backend at file:line:col, exit 1
printf 'backends:\n  fleet: { type: redis, address: here:1 }\nrules: []\n' >"$dir/bad.yaml"
set +e
err=$("$sluice" check "$dir/bad.yaml" 2>&1); rc=$?
set -e
[ "$rc" = 1 ] || { echo "FAIL: check exit $rc"; fail=1; }
grep -q "^$dir/bad.yaml:2:34: backends.fleet.address: 'here:1' is not HOST:PORT" <<<"$err" || { echo "FAIL: $err"; fail=1; }
exit $fail
