# SPDX-License-Identifier: MIT
# tests/support/nginx_server.sh - sourced (not run): start and stop a
# private nginx, for the nginx tests (tests/nginx/run.sh) and the module's
# benchmark (nginx/bench.sh).  The caller sets $nginx_bin (the binary) and
# $prefix (the nginx prefix: its nginx.conf, and the nginx.pid and logs/ it
# writes).  Processes are stopped by the pid nginx wrote, never by name;
# every wait is a bounded loop.

# ngx_free_port: a free TCP port of 127.0.0.1 (the kernel's choice).
ngx_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ngx_start URL: start nginx on $prefix/nginx.conf, then wait for its pid
# file (5 s) and until URL answers (5 s).  Return 1, with the reason on
# stderr, when it does not start or answer.
ngx_start() {
  "$nginx_bin" -p "$prefix/" -c nginx.conf -e logs/error.log || { echo "nginx did not start" >&2; return 1; }
  for _ in $(seq 100); do
    [ -s "$prefix/nginx.pid" ] && break
    sleep 0.05
  done
  [ -s "$prefix/nginx.pid" ] || { echo "nginx wrote no pid file" >&2; return 1; }
  for _ in $(seq 100); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.05
  done
  echo "nginx does not answer on $1" >&2
  return 1
}

# ngx_stop [PID]: stop the nginx whose pid its pid file names (else PID),
# and no other process: QUIT (graceful), then KILL of that pid after 5 s.
ngx_stop() {
  local pid=
  [ -s "$prefix/nginx.pid" ] && pid=$(cat "$prefix/nginx.pid")
  [ -z "$pid" ] && pid=${1:-}
  [ -z "$pid" ] && return 0
  kill -QUIT "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}
