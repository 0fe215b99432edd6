#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# grammar_cli.sh SLUICE SIM MODULE NGINX - one table of spellings through the
# three front ends (issue 28): `sluice check` / `sluice explain` on a rules
# file, `nginx -t` with the module, and sluice-sim.  Each row is a rate, a
# duration or an algorithm name, good or bad; every front end must accept
# the same good ones and refuse the same bad ones with the same message
# (sluice/parse.h's, behind each front end's own context).  A good value's
# meaning is checked where a front end prints it: `sluice explain` shows
# the limit with the library's formatter, which must give the row's
# canonical text (nginx and sluice-sim take the same bytes into the same
# call; they print no parsed value).
set -uo pipefail
sluice=${1:?usage: grammar_cli.sh SLUICE SIM MODULE NGINX}
sim=${2:?}
module=$(realpath "${3:?}")
nginx_bin=${4:?}
dir=$(mktemp -d /tmp/sluice-grammar.XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/logs"
failed=0 rows=0
fail() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }

# The parameters each algorithm needs, per front end, around the name.
rules_limit() { # CANONICAL NAME
  case $1 in
  gcra | leaky) echo "{ algorithm: $2, rate: 10/s, $([ "$1" = gcra ] && echo burst || echo depth): 5 }" ;;
  fixed | window | log) echo "{ algorithm: $2, window: 1s, max_requests: 10$([ "$1" = window ] && echo ', buckets: 10') }" ;;
  inflight) echo "{ algorithm: $2, max_inflight: 4 }" ;;
  esac
}
ngx_zone() { # CANONICAL NAME
  case $1 in
  gcra | leaky) echo "algorithm=$2 rate=10r/s burst=5" ;;
  fixed | window) echo "algorithm=$2 limit=10 window=1s" ;;
  inflight) echo "algorithm=$2 limit=4" ;;
  esac
}

rules_file() { # LIMIT
  printf 'rules:\n  - id: r\n    limit: %s\n' "$1" >"$dir/r.yaml"
}
ngx_t() { # ZONE-PARAMS: nginx -t's output
  cat >"$dir/nginx.conf" <<EOF
load_module $module;
pid nginx.pid;
error_log logs/error.log;
events {}
http {
  sluice_zone z size=1m $1;
  server { listen 127.0.0.1:1; location / { sluice_limit zone=z key=\$binary_remote_addr; } }
}
EOF
  "$nginx_bin" -t -q -p "$dir/" -c nginx.conf -e logs/error.log 2>&1
}

# check_row KIND VALUE EXPECT: EXPECT is =CANONICAL (accepted, meaning
# CANONICAL) or !MESSAGE (refused with MESSAGE).
check_row() {
  local kind=$1 v=$2 want=$3 out rc canon=
  rows=$((rows + 1))
  local rules_what sim_args ngx_params rules_seen
  case $kind in
  rate)
    rules_file "{ algorithm: token_bucket, rate: \"$v\", burst: 10000 }"
    rules_what="limit.rate: '$v': "
    ngx_params="algorithm=gcra rate=$v burst=10000"
    sim_args=(--duration 1s --algo "gcra:rate=$v,burst=10000")
    sim_what="rate=$v: "
    ngx_what="invalid rate \"rate=$v\": "
    ;;
  duration)
    rules_file "{ algorithm: fixed_window, window: \"$v\", max_requests: 10 }"
    rules_what="limit.window: '$v': "
    ngx_params="algorithm=fixed limit=10 window=$v"
    sim_args=(--duration 1s --window "$v" --algo fixed)
    sim_what="--window: "
    ngx_what="invalid window \"window=$v\": "
    ;;
  algo)
    canon=${want#=}
    [ "${want:0:1}" = "=" ] || canon=gcra
    rules_file "$(rules_limit "$canon" "$v")"
    rules_what="limit.algorithm: '$v': "
    ngx_params=$(ngx_zone "$canon" "$v")
    sim_args=(--duration 1s --algo "$v")
    sim_what="name '$v': "
    ngx_what="invalid algorithm \"algorithm=$v\": "
    ;;
  esac

  # sluice check / explain
  out=$("$sluice" check "$dir/r.yaml" 2>&1); rc=$?
  if [ "${want:0:1}" = "!" ]; then
    [ $rc -ne 0 ] && grep -qF -- "$rules_what${want#!}" <<<"$out" ||
      fail "sluice check, $kind '$v': want '$rules_what${want#!}', got: $out"
  else
    [ $rc -eq 0 ] || fail "sluice check refused $kind '$v': $out"
    out=$("$sluice" explain "$dir/r.yaml" 'GET /' 2>&1)
    case $kind in
    rate) rules_seen="token_bucket, ${want#=}, burst" ;;
    duration) rules_seen="fixed_window, 10 per ${want#=}" ;;
    algo) rules_seen="r.yaml:2): $(sed -n "s/^$canon //p" <<<"$names")," ;;
    esac
    grep -qF -- "$rules_seen" <<<"$out" || fail "sluice explain, $kind '$v': want '$rules_seen' in: $out"
  fi

  # nginx -t (the module's zones are keyed tables: the five keyed algorithms)
  if [ "$kind" != algo ] || [ -n "$ngx_params" ]; then
    out=$(ngx_t "$ngx_params"); rc=$?
    if [ "${want:0:1}" = "!" ]; then
      [ $rc -ne 0 ] && grep -qF -- "$ngx_what${want#!}" <<<"$out" ||
        fail "nginx -t, $kind '$v': want '$ngx_what${want#!}', got: $out"
    else
      [ $rc -eq 0 ] || fail "nginx -t refused $kind '$v': $out"
    fi
  fi

  # sluice-sim
  out=$("$sim" "${sim_args[@]}" 2>&1 >/dev/null); rc=$?
  if [ "${want:0:1}" = "!" ]; then
    [ $rc -eq 2 ] && grep -qF -- "$sim_what${want#!}" <<<"$out" ||
      fail "sluice-sim, $kind '$v': want '$sim_what${want#!}', got (exit $rc): $out"
  else
    [ $rc -eq 0 ] || fail "sluice-sim refused $kind '$v' (exit $rc): $out"
  fi
}

# The rules file's display name of each algorithm (sluice explain's).
names='gcra token_bucket
leaky leaky_bucket
fixed fixed_window
window sliding_window
log sliding_log
inflight concurrency'

period='a rate needs a period: 10/s, 10r/s, 30r/m, 5/250ms'
unit='unknown unit (ns, us, ms, s, m, min, h, d)'
expo='exponent notation is not accepted: write the number out'
algos='unknown algorithm (one of: fixed window gcra leaky log warmup decay inflight; fixed_window sliding_window ring token_bucket leaky_bucket sliding_log concurrency)'
while IFS='|' read -r kind v want; do
  [ -z "$kind" ] || [ "${kind:0:1}" = "#" ] && continue
  want=${want//\$period/$period}
  want=${want//\$unit/$unit}
  want=${want//\$expo/$expo}
  want=${want//\$algos/$algos}
  check_row "$kind" "$v" "$want"
done <<'ROWS'
# rates: nginx's spelling, the rules file's, fractions, sub-ms periods
rate|10/s|=10/s
rate|10r/s|=10/s
rate|0.5r/s|=1/2s
rate|30r/m|=30/m
rate|30/min|=30/m
rate|1/h|=1/h
rate|3r/ms|=3/ms
rate|5/250ms|=5/250ms
rate|1.5/s|=3/2s
rate|2500.25r/s|=10001/4s
rate|100/10s|=100/10s
rate|10/5|=10/5s
# durations: units, decimals, a bare number of seconds
duration|250ms|=250ms
duration|1.5s|=1500ms
duration|1m|=1m
duration|1min|=1m
duration|2h|=2h
duration|60|=1m
duration|1.5|=1500ms
duration|0.25s|=250ms
duration|1d|=1d
duration|2500us|=2500us
# algorithm names and aliases
algo|gcra|=gcra
algo|token_bucket|=gcra
algo|leaky|=leaky
algo|leaky_bucket|=leaky
algo|fixed|=fixed
algo|fixed_window|=fixed
algo|window|=window
algo|sliding_window|=window
algo|ring|=window
algo|inflight|=inflight
algo|concurrency|=inflight
# bad ones
rate|10|!$period
rate|10r|!$period
rate|100rps|!$period
rate|0/s|!a rate must be positive
rate|10/x|!$unit
rate|50/sec|!$unit
rate|-1/s|!must not be negative
rate|+5/s|!takes no sign
rate|1e3/s|!$expo
rate|r/s|!not a number
rate|10/0.5ns|!not a whole number of ns
duration|1.5ns|!not a whole number of ns
duration|5sec|!$unit
duration|-1s|!must not be negative
duration|1e3ms|!$expo
duration|1.s|!a '.' needs digits after it
duration|18446744073709551616ns|!out of range (above 2^64 - 1 ns)
algo|rainbow|!$algos
algo|GCRA|!$algos
algo|token-bucket|!$algos
ROWS

echo "$rows spellings through sluice check, nginx -t and sluice-sim: $failed failed"
[ "$failed" -eq 0 ]
