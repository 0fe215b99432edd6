#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# nginx/callgrind.sh [MODULE.so] - instructions per request of sluice_limit
# and of limit_req, counted by callgrind in one nginx process.
#
# nginx runs under valgrind --tool=callgrind with master_process off (one
# process that serves everything, so callgrind sees every instruction of
# the request path), with the limiters of nginx/bench.sh.  A Python client
# sends N requests on one keep-alive connection, with 1 key or cycling over
# 10,000 keys (X-Key), then nginx is stopped and callgrind's total Ir read.
# Every run starts and stops the same nginx and sends every request to the
# same location, /t/, whose one line is what the run measures:
#   none            nothing (the baseline)
#   sluice          sluice_limit zone=sl key=$http_x_key (RateLimit headers
#                   off, the default: limit_req sends none)
#   sluice+headers  the same with sluice_headers on (their own cost)
#   lreq            limit_req zone=lr burst=1000000 nodelay
# One location for all: the location's name and its place in the
# location tree cost instructions of their own (a longer name parses and
# compares longer), which would otherwise be charged to the limiter.
# So (Ir(run) - Ir(none)) / N is what the limiter adds to a request:
# a count of instructions, not a time, so the shared machine's load does
# not move it (Debian's nginx binary is stripped, so its limit_req_handler
# cannot be named to callgrind; the difference of totals needs no symbols).
# With the rules engine built in, "rules" runs with `sluice_rules` (one
# rule, prefix /t/, the same GCRA per header:X-Key) and /t/ empty, and
# "none+rules" with the same file but its prefix one no request has (what
# the engine's lookup costs a request no rule matches).
set -euo pipefail
here=$(dirname "$(realpath "$0")")
module=$(realpath "${1:-$here/../build/nginx/ngx_http_sluice_module.so}")
nginx_bin=${NGINX_BIN:-/usr/sbin/nginx}
n=${CALLGRIND_REQUESTS:-20000}
prefix=$(mktemp -d /tmp/sluice-ngx-cg.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
locs="none sluice sluice+headers lreq"
grep -q sluice_rules_module "$module" && locs="none sluice sluice+headers rules none+rules lreq"
mkdir -p "$prefix/logs" "$prefix/tmp"
mkdir -p "$prefix/html/t"; echo "hello" >"$prefix/html/t/index.html"
chmod -R 755 "$prefix"
for p in t nomatch; do # the rule on /t/, or on a prefix no request has
  cat >"$prefix/rules-$p.yaml" <<EOF
rules:
  - id: rules
    match: { prefix: /$p/ }
    dimensions: ["header:X-Key"]
    limit: { algorithm: gcra, rate: 10000000/s, burst: 1000000 }
    keys: { capacity: 16384 }
EOF
done

run() { # run LIMITER KEYS [REQUESTS]: prints total Ir
  local port rules_conf= t=
  case "$1" in
    sluice) t='sluice_limit zone=sl key=$http_x_key;' ;;
    sluice+headers) t='sluice_limit zone=sl key=$http_x_key; sluice_headers on;' ;;
    lreq) t='limit_req zone=lr burst=1000000 nodelay;' ;;
    rules) rules_conf="sluice_rules $prefix/rules-t.yaml;" ;;
    none+rules) rules_conf="sluice_rules $prefix/rules-nomatch.yaml;" ;;
  esac
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat >"$prefix/nginx.conf" <<EOF
load_module $module;
master_process off;
daemon off;
pid nginx.pid;
error_log logs/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  keepalive_requests 1000000; # one connection for the whole run
  client_body_temp_path tmp; proxy_temp_path tmp; fastcgi_temp_path tmp;
  uwsgi_temp_path tmp; scgi_temp_path tmp;
  sluice_zone sl size=10m algorithm=gcra rate=10000000r/s burst=1000000;
  $rules_conf
  limit_req_zone \$http_x_key zone=lr:10m rate=10000000r/s;
  server {
    listen 127.0.0.1:$port;
    root html;
    location /ping/ { }
    location /t/ { $t }
  }
}
EOF
  rm -f "$prefix"/callgrind.out
  valgrind --tool=callgrind --callgrind-out-file="$prefix/callgrind.out" \
    "$nginx_bin" -p "$prefix/" -c nginx.conf -e logs/error.log 2>"$prefix/vg.log" &
  local vg=$!
  python3 - "$port" "$2" "${3:-$n}" <<'PY'
import http.client, sys, time
port, keys, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for _ in range(300):   # nginx under valgrind starts in a few seconds
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/ping/"); c.getresponse().read(); break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("nginx did not start under valgrind")
bad = 0
for i in range(n):
    c.request("GET", "/t/", headers={"X-Key": "client%d" % (i % keys)})
    r = c.getresponse(); r.read()
    bad += r.status != 200
if bad:
    sys.exit("%d requests were not admitted" % bad)
PY
  kill -QUIT "$vg" 2>/dev/null || { echo "nginx under valgrind died: $(tail -5 "$prefix/vg.log" "$prefix/logs/error.log")" >&2; exit 1; }
  wait "$vg" || true
  [ -n "${CALLGRIND_KEEP:-}" ] && cp "$prefix/callgrind.out" "$CALLGRIND_KEEP.$1.$2.${3:-$n}"
  awk '/^(summary|totals):/ { print $2; exit }' "$prefix/callgrind.out"
}

declare -A ir per
for keys in 1 10000; do
  for loc in $locs; do
    ir[$loc,$keys]=$(run "$loc" "$keys")
    echo "bench=nginx-callgrind limiter=$loc keys=$keys requests=$n total_Ir=${ir[$loc,$keys]}"
  done
  # the engine's cost for a request no rule matches, apart from its
  # start-up (the file's load, its tables' formatting): the slope of
  # none and none+rules between n and 2n requests
  if [[ " $locs " == *" none+rules "* ]]; then
    for loc in none none+rules; do
      ir[$loc,$keys,2n]=$(run "$loc" "$keys" $((2 * n)))
      echo "bench=nginx-callgrind limiter=$loc keys=$keys requests=$((2 * n)) total_Ir=${ir[$loc,$keys,2n]}"
    done
  fi
done
echo
# Instructions per request added by the limiter, one line each (limiter: the
# location; no-match: the engine's lookup of a request no rule matches).
for keys in 1 10000; do
  nomatch=0
  if [[ " $locs " == *" none+rules "* ]]; then
    nomatch=$(awk -v a1="${ir[none+rules,$keys]}" -v a2="${ir[none+rules,$keys,2n]}" \
      -v b1="${ir[none,$keys]}" -v b2="${ir[none,$keys,2n]}" -v n="$n" \
      'BEGIN { printf "%.0f", ((a2 - a1) - (b2 - b1)) / n }')
  fi
  for loc in $locs; do
    case "$loc" in
      none) continue ;;
      none+rules)
        echo "bench=nginx-instr limiter=no-match keys=$keys requests=$n instructions_per_request=$nomatch"
        continue ;;
    esac
    # sluice_rules: over the same nginx with the same file loaded and no
    # rule matching (the same start-up), plus that run's own per-request
    # lookup (no match): what the engine adds to a plain nginx's request
    base=${ir[none,$keys]} extra=0
    [ "$loc" = rules ] && base=${ir[none+rules,$keys]} extra=$nomatch
    per[$loc,$keys]=$(awk -v a="${ir[$loc,$keys]}" -v b="$base" -v n="$n" -v x="$extra" \
      'BEGIN { printf "%.0f", (a - b) / n + x }')
    echo "bench=nginx-instr limiter=$loc keys=$keys requests=$n instructions_per_request=${per[$loc,$keys]}"
  done
done
# The goals' ratios (issue 27): sluice_limit over limit_req, and
# sluice_rules over sluice_limit, with the same limits in the same run.
for keys in 1 10000; do
  awk -v s="${per[sluice,$keys]}" -v l="${per[lreq,$keys]}" -v k="$keys" \
    'BEGIN { printf "bench=nginx-ratio keys=%s sluice_over_lreq=%.2f\n", k, s / l }'
  if [ -n "${per[rules,$keys]:-}" ]; then
    awk -v r="${per[rules,$keys]}" -v s="${per[sluice,$keys]}" -v k="$keys" \
      'BEGIN { printf "bench=nginx-ratio keys=%s rules_over_sluice=%.2f\n", k, r / s }'
  fi
done
