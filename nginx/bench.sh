#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# nginx/bench.sh [MODULE.so] - sluice_limit beside nginx's limit_req, in one
# nginx, in the same run.
#
# One private nginx (NGINX_WORKERS workers, default 2; reuseport, loopback,
# a static file) with locations that differ only in the limiter:
#   /none    no limit (the baseline)
#   /sluice  sluice_zone algorithm=gcra rate=R burst=B, key $http_x_key
#   /rules   sluice_rules: one rule, prefix /rules/, the same GCRA per
#            header:X-Key (built with the rules engine only)
#   /lreq    limit_req_zone rate=R, limit_req burst=B nodelay, key $http_x_key
# With sluice_rules loaded, every request of the http block asks the
# engine, so /none, /sluice and /lreq pay its no-match lookup too
# (nginx/callgrind.sh counts it apart).
# wrk (WRK_THREADS threads, default 1; WRK_CONNECTIONS connections, default
# 32) drives each with one key and with 10,000 keys (a Lua script picks the
# key per request), BENCH_RUNS runs (default 3) of BENCH_SECONDS each
# (default 4), interleaved (none, sluice, lreq, none, ...), so a noisy
# neighbour hits all three alike.  Reported: requests/s (wrk) and CPU per
# request: the workers' utime + stime (/proc/PID/stat) over the run divided
# by the requests served, in us.  Medians of the runs.  The rate is high
# enough that every request is admitted: this measures the cost of
# deciding, not of refusing.
#
# Then exactness: R = 2000r/s with no burst, one key, wrk for 3 s per
# limiter: admissions per second measured from the access log's $msec of
# the first and last admission.  limit_req counts in whole milliseconds
# (excess = excess - rate * ms / 1000 + 1000, ms an integer): requests of
# one millisecond see ms = 0, so it admits at most one per ms.
# BENCH_EXACT=0 skips this part (bench/scaling.sh, which runs the
# throughput part at 1, 2, 4, ... workers, does).
#
# The machine is shared (other engineers build and test on its 2 cores):
# figures are medians and comparable within one run only.
# One line per configuration (key=value), then a table.
set -euo pipefail
here=$(dirname "$(realpath "$0")")
module=$(realpath "${1:-$here/../build/nginx/ngx_http_sluice_module.so}")
nginx_bin=${NGINX_BIN:-/usr/sbin/nginx}
dur=${BENCH_SECONDS:-4}
runs=${BENCH_RUNS:-3}
nworkers=${NGINX_WORKERS:-2}
wrk_t=${WRK_THREADS:-1}
wrk_c=${WRK_CONNECTIONS:-32}
exact_part=${BENCH_EXACT:-1}
for v in "$nworkers" "$wrk_t" "$wrk_c"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] ||
    { echo "nginx/bench.sh: NGINX_WORKERS, WRK_THREADS and WRK_CONNECTIONS are counts" >&2; exit 2; }
done
prefix=$(mktemp -d /tmp/sluice-ngx-bench.XXXXXX)
locs="none sluice lreq"
rules_conf=
if grep -q sluice_rules_module "$module"; then
  locs="none sluice rules lreq"
  rules_conf="sluice_rules $prefix/rules.yaml;"
fi
mkdir -p "$prefix/logs" "$prefix/tmp"
for d in $locs; do mkdir -p "$prefix/html/$d"; echo "hello" >"$prefix/html/$d/index.html"; done
chmod -R 755 "$prefix"
# The starter and stopper (by the pid file's pid), the tests' own.
. "$here/../tests/support/nginx_server.sh"
port=$(ngx_free_port)
base="http://127.0.0.1:$port"

stop_nginx() { ngx_stop; }
trap 'stop_nginx; rm -rf "$prefix"' EXIT

start_nginx() { # start_nginx RATE BURST-SLUICE BURST-LREQ ACCESS-LOG
  cat >"$prefix/rules.yaml" <<EOF
rules:
  - id: rules
    match: { prefix: /rules/ }
    dimensions: ["header:X-Key"]
    limit: { algorithm: gcra, rate: ${1%r/s}/s, burst: $2 }
    keys: { capacity: 16384 }
EOF
  cat >"$prefix/nginx.conf" <<EOF
load_module $module;
worker_processes $nworkers;
pid nginx.pid;
error_log logs/error.log warn;
events { worker_connections 1024; }
http {
  log_format t '\$msec \$status \$uri';
  access_log $4;
  client_body_temp_path tmp; proxy_temp_path tmp; fastcgi_temp_path tmp;
  uwsgi_temp_path tmp; scgi_temp_path tmp;
  sluice_zone sl size=10m algorithm=gcra rate=$1 burst=$2;
  $rules_conf
  limit_req_zone \$http_x_key zone=lr:10m rate=$1;
  limit_req_log_level info;
  server {
    listen 127.0.0.1:$port reuseport;
    root html;
    location /none/ { }
    location /sluice/ { sluice_limit zone=sl key=\$http_x_key; }
    location /lreq/ { limit_req zone=lr $3; }
  }
}
EOF
  ngx_start "$base/none/" || exit 1
}

workers() { ps -o pid= --ppid "$(cat "$prefix/nginx.pid")" | tr -d ' '; }
cpu_ticks() { # utime + stime of the workers, in clock ticks
  local t=0
  for p in $(workers); do
    t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
  done
  echo "$t"
}

cat >"$prefix/keys.lua" <<'EOF'
-- 10,000 keys, one picked at random per request.
math.randomseed(os.time())
request = function()
  return wrk.format(nil, nil, { ["X-Key"] = "client" .. math.random(10000) })
end
EOF

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
tck=$(getconf CLK_TCK)

# ---- throughput and CPU per request ------------------------------------
# burst = 10^6 at 10^7/s: tau = 0.1 s, so a worker preempted between its
# clock reading and its CAS (common on a loaded 2-core machine) still finds
# room; every request is admitted in both limiters.
start_nginx 10000000r/s 1000000 "burst=1000000 nodelay" off
declare -A rps cpu
for keys in 1 10000; do
  for run in $(seq "$runs"); do
    for loc in $locs; do
      if [ "$keys" = 1 ]; then args=(-H 'X-Key: one'); else args=(-s "$prefix/keys.lua"); fi
      c0=$(cpu_ticks)
      out=$(wrk -t "$wrk_t" -c "$wrk_c" -d "${dur}s" "${args[@]}" "$base/$loc/")
      c1=$(cpu_ticks)
      req=$(awk '/requests in/ { print $1 }' <<<"$out")
      non2xx=$(awk '/Non-2xx/ { print $NF }' <<<"$out")
      r=$(awk '/Requests\/sec/ { print $2 }' <<<"$out")
      u=$(awk -v c=$((c1 - c0)) -v n="$req" -v t="$tck" 'BEGIN { printf "%.2f", c / t * 1e6 / n }')
      echo "bench=nginx limiter=$loc keys=$keys run=$run requests=$req non2xx=${non2xx:-0} rps=$r cpu_us_per_req=$u"
      rps[$loc,$keys]+="$r "
      cpu[$loc,$keys]+="$u "
    done
  done
done
stop_nginx

# ---- exactness: 2000r/s, no burst, one key, over all workers -------------
declare -A exact
if [ "$exact_part" != 0 ]; then
  start_nginx 2000r/s 1 "" "logs/access.log t"
  for loc in $(tr ' ' '\n' <<<"$locs" | grep -v none); do
    : >"$prefix/logs/access.log"
    sleep 0.3
    offered=$(wrk -t 2 -c 16 -d 3s -H 'X-Key: one' "$base/$loc/" | awk '/Requests\/sec/ { print $2 }')
    sleep 0.3
    exact[$loc]=$(awk -v u="/$loc/index.html" '$2 == 200 && $3 == u { n++; if (!f) f = $1; l = $1 }
      END { printf "%d %.0f", n, (n - 1) / (l - f) }' "$prefix/logs/access.log")
    echo "bench=nginx-exact limiter=$loc rate=2000r/s burst=0 admitted=${exact[$loc]% *} admitted_per_s=${exact[$loc]#* } offered_per_s=$offered"
    exact[$loc]="${exact[$loc]} $offered"
  done
fi

# the medians, one line each (bench/figures.py reads these), then the table
declare -A med_rps med_cpu
for keys in 1 10000; do
  for loc in $locs; do
    med_rps[$loc,$keys]=$(tr ' ' '\n' <<<"${rps[$loc,$keys]}" | grep . | median)
    med_cpu[$loc,$keys]=$(tr ' ' '\n' <<<"${cpu[$loc,$keys]}" | grep . | median)
    echo "bench=nginx-median limiter=$loc keys=$keys runs=$runs seconds=$dur" \
      "rps=${med_rps[$loc,$keys]} cpu_us_per_req=${med_cpu[$loc,$keys]}"
  done
done
echo
echo "$("$nginx_bin" -v 2>&1 | sed 's|.*/||'), $nworkers workers, wrk -t$wrk_t -c$wrk_c -d${dur}s on loopback; medians of $runs runs"
printf '| %-12s | %-5s | %-12s | %-18s |\n' limiter keys requests/s "worker CPU/request"
printf '|%s|%s|%s|%s|\n' -------------- ------- -------------- --------------------
for keys in 1 10000; do
  for loc in $locs; do
    name=$loc; [ "$loc" = lreq ] && name=limit_req; [ "$loc" = none ] && name="no limit"
    [ "$loc" = rules ] && name=sluice_rules; [ "$loc" = sluice ] && name=sluice_limit
    printf '| %-12s | %-5s | %-12s | %-18s |\n' "$name" "$keys" "${med_rps[$loc,$keys]}" \
      "${med_cpu[$loc,$keys]} us"
  done
done
[ "$exact_part" != 0 ] || exit 0
echo
echo "Exactness at rate=2000r/s, no burst, one key, $nworkers workers, wrk -t2 -c16 -d3s:"
read -r _ s_rate s_off <<<"${exact[sluice]}"
read -r _ l_rate l_off <<<"${exact[lreq]}"
echo "  sluice_limit (gcra burst=1): $s_rate admitted/s of $s_off offered/s"
if [ -n "${exact[rules]:-}" ]; then
  read -r _ r_rate r_off <<<"${exact[rules]}"
  echo "  sluice_rules (gcra burst=1): $r_rate admitted/s of $r_off offered/s"
fi
echo "  limit_req (no burst):        $l_rate admitted/s of $l_off offered/s"
