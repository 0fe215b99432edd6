#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/arm64-sysroot.sh DIR - the arm64 libraries the cross build's tests
# and rules/ link (Criterion, libyaml, liburcu, and what they load, libc
# included), unpacked into DIR from Debian's arm64 packages, and DIR/sysroot.ini,
# a meson machine file to give after cross/aarch64-linux-gnu.ini:
#
#   scripts/arm64-sysroot.sh build-arm64.sysroot
#   meson setup build-arm64 --cross-file cross/aarch64-linux-gnu.ini \
#     --cross-file build-arm64.sysroot/sysroot.ini
#
# Why a sysroot and not multiarch (dpkg --add-architecture arm64 and
# libcriterion-dev:arm64): Criterion needs libnanomsg5, which Debian does not
# mark Multi-Arch: same, so its arm64 package cannot be installed beside the
# x86-64 one the plain build's tests use.  So the packages are fetched with
# apt-get under a private apt state (/var/cache/sluice-arm64: the arm64 lists
# and the .debs, kept between runs) and unpacked with dpkg-deb, and the
# system's packages and architectures are left as they were.
#
# criterion.pc is rewritten without its Requires.private (boxfort, libgit2,
# nanomsg, ...): the tests link libcriterion.so dynamically and need only its
# -L and -l; the linker finds what it loads through -rpath-link, qemu through
# -L DIR.  cross/qemu_exec_shim.c, built here, lets Criterion's children
# start under qemu.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
out=$(realpath -m "$1")
cd "$(dirname "$0")/.."
cache=${SLUICE_ARM64_CACHE:-/var/cache/sluice-arm64}

# What the arm64 build links beyond libc, and everything they load.
wanted=(libcriterion-dev libyaml-dev liburcu-dev)
runtime=(libcriterion3 libyaml-0-2 liburcu8)

apt=(-o APT::Architecture=arm64 -o APT::Architectures=arm64
     -o Dir::State::Lists="$cache/lists" -o Dir::State::status="$cache/status"
     -o Dir::Cache="$cache/cache")
mkdir -p "$cache/lists/partial" "$cache/cache/archives/partial" "$cache/debs"
touch "$cache/status"
if [ ! -f "$out/sysroot.ini" ]; then
  [ -n "$(ls "$cache/lists" | grep -v partial)" ] || apt-get "${apt[@]}" update -qq
  # The runtime closure: the libraries (lib*, zlib1g) the three load,
  # without the -dev packages Criterion's -dev pulls for static links.
  pkgs=$( (printf '%s\n' "${wanted[@]}"
           apt-cache "${apt[@]}" depends --recurse --no-recommends --no-suggests \
             --no-conflicts --no-breaks --no-replaces --no-enhances "${runtime[@]}" |
             grep -E '^(lib|zlib)') | sort -u)
  # apt-get download writes into the current directory, as _apt when it can.
  (cd "$cache/debs" && apt-get "${apt[@]}" download $pkgs >/dev/null 2>&1) ||
    (cd "$cache/debs" && apt-get "${apt[@]}" update -qq && apt-get "${apt[@]}" download $pkgs)
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp"
  for p in $pkgs; do
    deb=$(ls "$cache/debs/${p}_"*_arm64.deb | tail -1)
    dpkg-deb -x "$deb" "$out.tmp"
  done
  lib=$out/usr/lib/aarch64-linux-gnu
  qemu=$(command -v qemu-aarch64)
  # Criterion's children re-execute the test under qemu (see the file).
  aarch64-linux-gnu-gcc -O2 -Wall -Wextra -Werror -shared -fPIC \
    -o "$out.tmp/qemu-exec-shim.so" cross/qemu_exec_shim.c -ldl
  sed -i -e '/^Requires.private:/d' -e '/^Libs.private:/d' \
    "$out.tmp/usr/lib/aarch64-linux-gnu/pkgconfig/criterion.pc"
  cat >"$out.tmp/sysroot.ini" <<INI
# Written by scripts/arm64-sysroot.sh: the arm64 libraries unpacked here.
[properties]
sys_root = '$out'
pkg_config_libdir = ['$lib/pkgconfig']

[built-in options]
# System headers, as on the host: GCC ignores a -I (pkg-config's) of a
# directory also given by -isystem, so warnings in Criterion's macros are
# not the tests' warnings here either.
c_args = ['-isystem', '$out/usr/include']
c_link_args = ['-Wl,-rpath-link,$lib', '-Wl,-rpath-link,$out/lib/aarch64-linux-gnu']

[binaries]
exe_wrapper = ['env', 'SLUICE_TEST_EMULATOR=qemu-user', 'QEMU_LD_PREFIX=$out', 'SLUICE_QEMU=$qemu',
               'SLUICE_QEMU_SHIM=$out/qemu-exec-shim.so',
               '$qemu', '-E', 'LD_PRELOAD=$out/qemu-exec-shim.so']
INI
  rm -rf "$out"
  mv "$out.tmp" "$out"
fi
