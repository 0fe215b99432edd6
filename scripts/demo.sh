#!/usr/bin/env bash
# The main job: install what is missing, build, run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
exec ./build/tools/sluice-demo "$@"
