#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: install what is missing, build, run the demo:
#   1. the gateway: sluice's nginx module in front of a static backend, on
#      loopback; traffic from two clients, what passed, what was refused
#      (with the headers it got), and the Prometheus metrics.  Where nginx
#      or nginx-dev cannot be installed, this part says so and is skipped;
#   2. sluice-sim replays a boundary-burst attack against every algorithm in
#      virtual time (deterministic) and draws offered vs admitted traffic;
#   3. a short benchmark: one hot key, 1 and 2 threads, sluice beside the
#      mutex and spinlock baselines (the full one: meson test --benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
# A missing package must not stop the demo: without nginx the gateway part
# is skipped (and says so) and the rest runs as before.
scripts/install-deps.sh || echo "demo: some packages could not be installed; going on without them" >&2
# -Dnginx=auto: the module where nginx-dev is installed (it is off by default)
[ -f build/build.ninja ] || meson setup build -Dnginx=auto >/dev/null
ninja -C build >/dev/null

gateway() {
  local module=build/nginx/ngx_http_sluice_module.so
  if [ ! -x /usr/sbin/nginx ] || [ ! -f "$module" ]; then
    echo "== 1. The gateway: skipped (nginx or nginx-dev is not installed here, so the"
    echo "   module was not built); showing the simulator demo instead."
    echo
    return 0
  fi
  local prefix port base
  prefix=$(mktemp -d /tmp/sluice-demo.XXXXXX)
  mkdir -p "$prefix/html" "$prefix/logs" "$prefix/tmp"
  chmod 755 "$prefix" "$prefix/html"
  echo "the backend's answer" >"$prefix/html/index.html"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  base="http://127.0.0.1:$port"
  cat >"$prefix/nginx.conf" <<EOF
load_module $(realpath "$module");
worker_processes 2;
pid nginx.pid;
error_log logs/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path tmp; proxy_temp_path tmp; fastcgi_temp_path tmp;
  uwsgi_temp_path tmp; scgi_temp_path tmp;
  # Per client: 2 requests per second, bursts of 3.  In total: 100 per second.
  sluice_zone per_client size=1m algorithm=gcra rate=2r/s burst=3;
  sluice_zone total size=1m algorithm=window limit=100 window=1s buckets=10;
  server {
    listen 127.0.0.1:$port reuseport;
    root html;
    location / {
      sluice_limit zone=per_client key=\$http_x_client;
      sluice_limit zone=total key=all;
      sluice_headers on;
      add_header X-Sluice-Status \$sluice_status always;
    }
    location /metrics { sluice_metrics; }
  }
}
EOF
  # Stop this nginx, by its pid file's pid only, however the demo ends.
  trap '[ -s "'"$prefix"'/nginx.pid" ] && kill -QUIT "$(cat "'"$prefix"'/nginx.pid")" 2>/dev/null; rm -rf "'"$prefix"'"' EXIT
  /usr/sbin/nginx -p "$prefix/" -c nginx.conf -e logs/error.log
  for _ in $(seq 100); do curl -s -o /dev/null "$base/metrics" && break; sleep 0.05; done

  echo "== 1. The gateway: Debian's nginx $(/usr/sbin/nginx -v 2>&1 | sed 's|.*/||') with sluice's module, on $base"
  echo "   sluice_zone per_client algorithm=gcra rate=2r/s burst=3  (key: the X-Client header)"
  echo "   sluice_zone total algorithm=window limit=100 window=1s   (one key for everyone)"
  echo "   both apply to every request, all or nothing"
  echo
  echo "alice sends 5 requests in a row, then bob 1:"
  for who in alice alice alice alice alice bob; do
    local h st
    h=$(curl -s -D - -o /dev/null -H "X-Client: $who" "$base/" | tr -d '\r')
    st=$(head -1 <<<"$h" | cut -d' ' -f2-)
    printf '  %-5s -> %-22s %s\n' "$who" "$st" \
      "$(grep -iE '^(retry-after|ratelimit|x-sluice-status):' <<<"$h" | sed 's/^/  /' | tr '\n' ' ')"
  done
  echo
  echo "the metrics (GET /metrics, Prometheus text; counters shared by both workers):"
  curl -s "$base/metrics" | grep -E '^sluice_(requests_total|keys)' | grep -v ' 0$' | sed 's/^/  /'
  echo
  kill -QUIT "$(cat "$prefix/nginx.pid")"
  for _ in $(seq 50); do [ -e "$prefix/nginx.pid" ] || break; sleep 0.1; done
  trap - EXIT
  rm -rf "$prefix"
}
gateway

echo "== 2. The simulator: a boundary-burst attack against every algorithm"
./build/tools/sluice-sim demo --plot build/sluice-sim-demo.svg
echo
echo "== 3. Short benchmark (1 run of 0.1 s per case; the full one: meson test -C build --benchmark)"
./build/bench/bench_algos --quick --table --threads=1,2 --regimes=allow,deny \
  --algos=fixed,ring-exact,ring-exact-lease,gcra,log "$@"
