#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: install what is missing, build, run the demo:
#   1. the product: a fleet of two nginx instances (2 workers each) with
#      sluice's module, loading one rules file with sluice_rules: a
#      per-client rule each instance keeps, a fleet-wide rule counted on a
#      redis-server the demo starts; traffic on both, the file edited and
#      one instance reloaded under load, Redis killed and restarted.  Where
#      nginx, the module or redis-server is missing, it says what it skips;
#   2. sluice-sim replays a boundary-burst attack against every algorithm in
#      virtual time (deterministic) and draws offered vs admitted traffic;
#   3. a short benchmark: one hot key, 1 and 2 threads, sluice beside the
#      mutex and spinlock baselines (the full one: meson test --benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
# A package that could not be installed stops the demo with a message
# (issue 26: not a "command not found" later); packages already missing
# on purpose, nginx say, are not that: install-deps.sh installs them.
scripts/install-deps.sh || { echo "demo: stopping: the packages the demo needs could not be installed (install-deps.sh said which, and where its log is)" >&2; exit 1; }
# -Dnginx=auto: the module where nginx-dev is installed (it is off by default)
[ -f build/build.ninja ] || meson setup build -Dnginx=auto >/dev/null
ninja -C build >/dev/null

# ---- part 1: the product --------------------------------------------------
# Two nginx instances (a fleet of two, 2 workers each), each with its own
# prefix and port, load one rules file with sluice_rules: a per-client rule
# that each instance keeps for itself, and a fleet-wide rule counted on a
# redis-server the demo starts.  Every server is stopped by its own pid,
# in the EXIT trap too, however the demo ends.  Every number printed is
# counted in this run: admissions from each instance's access log, Redis's
# count with redis-cli.
demo_dir= nginx_pids=() redis_pid= load_pids=()
stop_pid() { # stop_pid PID SIGNAL: that process only; KILL after 5 s
  kill -"$2" "$1" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
}
fleet_cleanup() {
  local p
  for p in "${load_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${nginx_pids[@]}"; do stop_pid "$p" QUIT; done
  [ -n "$redis_pid" ] && stop_pid "$redis_pid" TERM
  [ -n "$demo_dir" ] && rm -rf "$demo_dir"
  return 0
}
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_redis() { # on $rport, its own --dir; waits for PING (5 s)
  redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$demo_dir/redis" >>"$demo_dir/redis/log" 2>&1 &
  redis_pid=$!
  disown "$redis_pid" # stopped by stop_pid, which waits for it; no job notice
  for _ in $(seq 100); do
    redis-cli -h 127.0.0.1 -p "$rport" ping 2>/dev/null | grep -q PONG && return 0
    sleep 0.05
  done
  echo "demo: redis-server did not answer on 127.0.0.1:$rport" >&2
  return 1
}
redis_count() { # the fleet-wide rule's count in Redis (granted: admitted and leased)
  local k
  k=$(redis-cli -h 127.0.0.1 -p "$rport" --scan --pattern 'sluice:{fleet-wide/*' 2>/dev/null | head -1 || true)
  [ -n "$k" ] && redis-cli -h 127.0.0.1 -p "$rport" hget "$k" c 2>/dev/null || echo 0
}

# ngx I ARGS...: nginx on instance I's prefix (A or B)
ngx() { local i=$1; shift; /usr/sbin/nginx -p "$demo_dir/$i/" -c nginx.conf -e logs/error.log "$@"; }
workers_of() { ps -o pid= --ppid "$1" | tr -d ' ' | sort | tr '\n' ' '; }
admitted() { # admitted I: 200s on /api/ in instance I's access log so far
  awk '$1 == 200 && $2 ~ "^/api/"' "$demo_dir/$1/logs/access.log" | wc -l
}
offered() { awk '$2 ~ "^/api/"' "$demo_dir/$1/logs/access.log" | wc -l; }
others() { # answers on /api/ neither 200 nor 429 (errors) in instance I's log
  awk '$2 ~ "^/api/" && $1 != 200 && $1 != 429' "$demo_dir/$1/logs/access.log" | wc -l
}

# load SECONDS: traffic on both instances at once (wrk, else a curl loop),
# no X-Client header; wrk's reports in $demo_dir/wrk.A and wrk.B
load_start() {
  local i
  load_pids=()
  for i in A B; do
    if command -v wrk >/dev/null; then
      wrk -t 1 -c 8 -d "$1s" "${base[$i]}/api/x" >"$demo_dir/wrk.$i" 2>&1 &
    else
      ( end=$((SECONDS + $1)); urls=()
        for _ in $(seq 50); do urls+=(-o /dev/null "${base[$i]}/api/x"); done
        while [ $SECONDS -lt "$end" ]; do curl -s "${urls[@]}" || true; done ) &
    fi
    load_pids+=($!)
  done
}
load_wait() { local p; for p in "${load_pids[@]}"; do wait "$p" || true; done; load_pids=(); }

fleet() {
  local module=build/nginx/ngx_http_sluice_module.so
  if [ ! -x /usr/sbin/nginx ] || [ ! -f "$module" ]; then
    echo "== 1. The product: skipped (nginx or nginx-dev is not installed here, so the"
    echo "   module was not built): no fleet, no reload, no Redis fault; on to the simulator."
    echo
    return 0
  fi
  if ! grep -qa 'sluice_rules_stale' "$module"; then
    echo "== 1. The product: skipped (this build's nginx module has no sluice_rules: the"
    echo "   rules engine needs libyaml-dev and liburcu-dev); on to the simulator."
    echo
    return 0
  fi
  demo_dir=$(mktemp -d /tmp/sluice-demo.XXXXXX)
  trap fleet_cleanup EXIT
  trap 'exit 130' INT TERM HUP # a signal ends the demo through the EXIT trap
  mkdir -p "$demo_dir/html/api" "$demo_dir/redis" "$demo_dir/A/logs" "$demo_dir/B/logs" "$demo_dir/tmp"
  chmod 755 "$demo_dir" "$demo_dir/html" "$demo_dir/html/api" "$demo_dir/tmp"
  echo "the backend's answer" >"$demo_dir/html/api/x"
  local with_redis=1 why=
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
    { with_redis=0; why="redis-server is not installed"; }
  rport=$(free_port)
  L=3000 L2=500000
  rules_file() { # rules_file FLEET-LIMIT
    {
      [ $with_redis -eq 1 ] && cat <<YAML
backends:
  fleet: { type: redis, address: 127.0.0.1:$rport, lease_ttl: 50ms, budget: 2ms,
           lease_max: 8, fallback: local, expected_instances: 4 }
YAML
      cat <<YAML
rules:
  - id: per-client
    match: { prefix: /api/ }
    dimensions: ["header:X-Client"]
    empty_key: pass
    limit: { algorithm: token_bucket, rate: 1/m, burst: 3 }
    keys: { capacity: 1024 }
YAML
      [ $with_redis -eq 1 ] && cat <<YAML
  - id: fleet-wide
    match: { prefix: /api/ }
    backend: fleet
    limit: { algorithm: fixed_window, window: 1h, max_requests: $1 }
YAML
      true
    } >"$demo_dir/rules.yaml"
  }
  rules_file $L
  if [ $with_redis -eq 1 ] && ! build/rules/sluice check "$demo_dir/rules.yaml" >"$demo_dir/check.txt" 2>&1; then
    with_redis=0
    why="this build has no libsluice-redis ($(tail -1 "$demo_dir/check.txt" | sed 's/^[^ ]* //'))"
    rules_file $L
  fi
  declare -gA base port
  local i
  for i in A B; do
    port[$i]=$(free_port)
    base[$i]="http://127.0.0.1:${port[$i]}"
    cat >"$demo_dir/$i/nginx.conf" <<CONF
load_module $(realpath "$module");
worker_processes 2;
pid nginx.pid;
error_log logs/error.log warn;
events { worker_connections 1024; }
http {
  log_format demo '\$status \$uri';
  access_log logs/access.log demo;
  client_body_temp_path $demo_dir/tmp; proxy_temp_path $demo_dir/tmp;
  fastcgi_temp_path $demo_dir/tmp; uwsgi_temp_path $demo_dir/tmp; scgi_temp_path $demo_dir/tmp;
  sluice_rules $demo_dir/rules.yaml;
  server {
    listen 127.0.0.1:${port[$i]} reuseport;
    root $demo_dir/html;
    location / { add_header X-Sluice-Status \$sluice_status always; }
    location /metrics { sluice_metrics; access_log off; }
  }
}
CONF
  done
  [ $with_redis -eq 1 ] && { start_redis || return 1; }
  for i in A B; do
    ngx $i || { echo "demo: nginx $i did not start: $(tail -3 "$demo_dir/$i/logs/error.log")" >&2; return 1; }
    for _ in $(seq 100); do [ -s "$demo_dir/$i/nginx.pid" ] && break; sleep 0.05; done
    nginx_pids+=("$(cat "$demo_dir/$i/nginx.pid")")
    for _ in $(seq 100); do curl -s -o /dev/null "${base[$i]}/metrics" && break; sleep 0.05; done
  done
  # each worker connects to Redis at its start: wait (5 s at most) until
  # the 4 have, so the first requests are Redis's and not the fallback's
  local conns=0
  if [ $with_redis -eq 1 ]; then
    for _ in $(seq 100); do
      conns=$(redis-cli -h 127.0.0.1 -p "$rport" client list 2>/dev/null | grep -c 'cmd=' || true)
      [ "$conns" -ge 4 ] && break
      sleep 0.05
    done
  fi
  local t0=$SECONDS hour0 tool=wrk
  command -v wrk >/dev/null || tool="a curl loop"
  hour0=$(date -u +%H)

  echo "== 1. The product: a fleet of two nginx $(/usr/sbin/nginx -v 2>&1 | sed 's|.*/||') (2 workers each) loading one rules file"
  echo "   A on ${base[A]}, B on ${base[B]}"
  echo "   rule per-client: 3 requests per X-Client header, then 1 per minute; each instance keeps its own"
  if [ $with_redis -eq 1 ]; then
    echo "   rule fleet-wide: $L requests per hour for the whole fleet, counted on redis-server"
    echo "   $(redis-server --version | awk '{print $3}' | sed 's/v=//') at 127.0.0.1:$rport (leases of up to 8; fallback local: 1/4 of it per worker)"
    echo "   $conns connections to Redis open before the first request (each worker has its own backend)"
  else
    echo "   rule fleet-wide: skipped, $why: no global limit, no Redis kill or restart"
  fi
  echo
  local codes= a0 b0 a1 b1
  for _ in 1 2 3 4 5; do codes="$codes $(curl -s -o /dev/null -w '%{http_code}' -H 'X-Client: alice' "${base[A]}/api/x")"; done
  echo "alice sends 5 to A:$codes  (her 3, then the per-client rule refuses)"
  echo "alice sends 1 to B: $(curl -s -o /dev/null -w '%{http_code}' -H 'X-Client: alice' "${base[B]}/api/x")  (B counts her on its own)"

  if [ $with_redis -eq 1 ]; then
    load_start 2; load_wait
    a0=$(admitted A) b0=$(admitted B)
    c0=$(redis_count)
    echo "$tool on A and B for 2 s: A admitted $a0, B $b0: $((a0 + b0)) of the fleet-wide $L ($(($(offered A) + $(offered B))) offered; Redis counted $c0)"
    [ $((a0 + b0)) -gt "$c0" ] && echo "  (at least $((a0 + b0 - c0)) of them decided by the fallback, before a worker's backend had connected)"
  fi

  # the rules file edited, ONE instance reloaded while traffic flows
  local old new
  [ $with_redis -eq 1 ] && rules_file $L2 || echo "# edited" >>"$demo_dir/rules.yaml"
  old=$(workers_of "${nginx_pids[0]}")
  load_start 3
  sleep 0.5
  ngx A -s reload
  for _ in $(seq 100); do
    new=$(workers_of "${nginx_pids[0]}")
    local stale=0 p
    for p in $old; do [[ " $new " == *" $p "* ]] && stale=1; done
    [ $stale -eq 0 ] && [ "$(wc -w <<<"$new")" -eq 2 ] && break
    sleep 0.1
  done
  load_wait
  if [ $with_redis -eq 1 ]; then
    a1=$(admitted A) b1=$(admitted B)
    echo "fleet-wide $L -> $L2 in the file, nginx -s reload of A only, under $tool on both for 3 s:"
    echo "  A admitted $((a1 - a0)) more, B $((b1 - b0)) (its file still says $L): the fleet at $((a1 + b1)) of $L2;"
    local c1 note=
    c1=$(redis_count)
    [ $((a1 + b1)) -gt "$c1" ] && note=" (at least $((a1 + b1 - c1)) admitted by the fallback while A's new workers connected)"
    echo "  Redis counted $c0 -> $c1: the count was kept, not reset$note"
  else
    echo "rules file edited, nginx -s reload of A only, under traffic on both for 3 s (workers $old-> $new)"
  fi
  echo "alice sends 1 to A after the reload: $(curl -s -o /dev/null -w '%{http_code}' -H 'X-Client: alice' "${base[A]}/api/x")  (her per-client state kept)"

  if [ $with_redis -eq 1 ]; then
    load_start 2
    sleep 0.5
    local killed=$redis_pid ak bk a2 b2 slow=
    stop_pid "$redis_pid" KILL
    redis_pid=
    ak=$(admitted A) bk=$(admitted B)
    load_wait
    a2=$(admitted A) b2=$(admitted B)
    command -v wrk >/dev/null &&
      slow="; slowest answer: A $(awk '$1 == "Latency" { print $4 }' "$demo_dir/wrk.A"), B $(awk '$1 == "Latency" { print $4 }' "$demo_dir/wrk.B")"
    echo "redis-server killed (SIGKILL to pid $killed) 0.5 s into 2 s of $tool on both (A admitted $((ak - a1)) before):"
    echo "  $(($(others A) + $(others B))) errors$slow; after the kill the fallback (local) decided:"
    echo "  A admitted $((a2 - ak)) (its share: 2 workers x $((L2 / 4))), B $((b2 - bk)) (its $L already counted: refused)"
    start_redis || return 1
    sleep 0.3 # the breaker (breaker_open 200 ms) half-opens, the backends reconnect
    load_start 2; load_wait
    local a3 b3
    a3=$(admitted A) b3=$(admitted B)
    echo "redis-server restarted on 127.0.0.1:$rport (empty: no persistence), $tool for 2 s:"
    local c3 note=
    c3=$(redis_count)
    # Redis's count is what it granted (leases included): what was
    # admitted above it was the fallback's, before the backends reconnected
    [ $((a3 - a2 + b3 - b2)) -gt "$c3" ] && note=" (at least $((a3 - a2 + b3 - b2 - c3)) were the fallback's, before the reconnect)"
    if [ "$c3" -gt 0 ]; then
      echo "  A admitted $((a3 - a2)), B $((b3 - b2)); Redis counted $c3$note: the fleet decides on Redis again"
    else
      echo "  A admitted $((a3 - a2)), B $((b3 - b2)); Redis counted 0: no request reached it (a full window is refused from each backend's cache until it ends)"
    fi
  fi
  # the rules' counters are in A's shared zone (both workers count into
  # them); the backend's are the answering worker's
  local m
  m=$(curl -s "${base[A]}/metrics" |
    grep -E '^sluice_(rule_(passed|refused|fallback_passed|fallback_refused)_total|backend_(round_trips|lease_admits|fallbacks)_total|backend_breaker_state|rules_version)' |
    grep -v ' 0$' || true)
  if [ -n "$m" ]; then
    echo "A's metrics (GET /metrics; per rule: both workers' sum, from the zone; per backend: the answering worker's):"
    sed 's/^/  /' <<<"$m"
  else
    echo "A's metrics (GET /metrics): no rule or backend line above 0"
  fi
  [ "$(date -u +%H)" = "$hour0" ] ||
    echo "(an hour began during this part: the fleet-wide window restarted, so the totals span two windows)"
  echo "(part 1 took $((SECONDS - t0)) s)"
  echo
  fleet_cleanup
  nginx_pids=() redis_pid= demo_dir=
  trap - EXIT INT TERM HUP
}
fleet

echo "== 2. The simulator: a boundary-burst attack against every algorithm"
./build/tools/sluice-sim demo --plot build/sluice-sim-demo.svg
echo
echo "== 3. Short benchmark (1 run of 0.1 s per case; the full one: meson test -C build --benchmark)"
./build/bench/bench_algos --quick --table --threads=1,2 --regimes=allow,deny \
  --algos=fixed,ring-exact,ring-exact-lease,gcra,log "$@"
