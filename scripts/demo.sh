#!/usr/bin/env bash
# The main job: install what is missing, build, run the demo:
#   1. sluice-sim replays a boundary-burst attack against every algorithm in
#      virtual time (deterministic) and draws offered vs admitted traffic;
#   2. a short benchmark: one hot key, 1 and 2 threads, sluice beside the
#      mutex and spinlock baselines (the full one: meson test --benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
./build/tools/sluice-sim demo --plot build/sluice-sim-demo.svg
echo
echo "Short benchmark (1 run of 0.1 s per case; the full one: meson test -C build --benchmark)"
exec ./build/bench/bench_algos --quick --table --threads=1,2 --regimes=allow,deny \
  --algos=fixed,ring-exact,ring-exact-lease,gcra,log "$@"
