#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian packages sluice needs, only those that are missing.
# Why each is here: see "Dependencies" in docs/build.md.
set -euo pipefail

packages=(
  gcc libc6-dev pkg-config   # the compiler, with the ASan/UBSan/TSan runtimes
  meson ninja-build          # the build
  libck-dev                  # Concurrency Kit: ck_spinlock baseline in bench/
  libcriterion-dev           # Criterion: unit tests
  libyaml-dev                # rules/: libsluice-rules and sluice check (the YAML parser)
  liburcu-dev                # rules/: the rule set published by RCU (urcu-bp), reload without blocking readers
  prometheus                 # rules/, nginx/: promtool checks the metrics text in the tests
  libhiredis-dev redis-server  # redis/: the Redis client, and a real server for its tests
  nginx nginx-dev            # nginx/: Debian's nginx and the headers its dynamic module builds against
  curl wrk                   # nginx/: test and benchmark clients
  gnuplot-nox                # the demo's and perf/'s plots (sluice-sim --plot)
  clang libclang-rt-14-dev   # fuzz/: libFuzzer and clang's sanitizer runtimes
                             # (the runtimes are only a Recommends of clang)
  debootstrap                # scripts/clean_machine.sh: a bookworm chroot with only a compiler, libc and pthreads
  crossbuild-essential-arm64 qemu-user  # scripts/test-arm64.sh: the arm64 cross compiler and libc, and
                             # the emulator its tests run under; the arm64 libraries the tests
                             # link are unpacked by scripts/arm64-sysroot.sh (why not multiarch: there)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

# Quiet and patient: apt's output goes to a log this names, and another
# apt or dpkg holding the lock (unattended-upgrades, a second shell) is
# waited for, up to SLUICE_DPKG_LOCK_TIMEOUT seconds (default 600), by
# apt's own DPkg::Lock::Timeout, rather than failing at once.
log=${SLUICE_DEPS_LOG:-${TMPDIR:-/tmp}/sluice-install-deps.log}
timeout=${SLUICE_DPKG_LOCK_TIMEOUT:-600}
echo "sluice: installing ${#missing[@]} missing packages: ${missing[*]} (apt's output: $log)" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
apt=($sudo apt-get -o "DPkg::Lock::Timeout=$timeout" -y --no-install-recommends)
: >"$log"
if ! "${apt[@]}" install "${missing[@]}" >>"$log" 2>&1; then
  echo "sluice: apt-get install failed; updating the package lists and trying again" >&2
  if ! { "${apt[@]}" update >>"$log" 2>&1 && "${apt[@]}" install "${missing[@]}" >>"$log" 2>&1; }; then
    echo "sluice: could not install: ${missing[*]}; the end of $log:" >&2
    tail -n 15 "$log" >&2
    exit 1
  fi
fi
echo "sluice: installed ${missing[*]}" >&2
