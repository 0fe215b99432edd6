#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# clean_machine.sh - the plain build and install on a machine that has only
# a C compiler, libc, pthreads and the build tools: no Criterion, no
# Concurrency Kit, no liburcu, libyaml or hiredis.
#
#   scripts/clean_machine.sh [ROOT]      (as root; ROOT default /var/tmp/sluice-clean-root)
#
# The machine is a Debian bookworm chroot made by debootstrap (minbase plus
# gcc, libc6-dev, meson, ninja-build, pkg-config), kept in ROOT for later
# runs.  Into it goes `git archive HEAD` (the committed tree only), then
# `meson setup build && ninja -C build` with every option at its default,
# then tests/install_test.sh: `meson install --destdir`, every installed
# header closed under #include, sluice.pc naming only sluice, pthreads and
# libm, and every ```c block of README.md compiled, linked (shared and
# static) and run against the install with pkg-config.
# Exit 0: it all worked; 1: something failed (the log says what); 77: the
# chroot could not be made here (not root, no debootstrap or no mirror).
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-/var/tmp/sluice-clean-root}
packages=gcc,libc6-dev,meson,ninja-build,pkg-config

[ "$(id -u)" = 0 ] || { echo "clean_machine: needs root (chroot)"; exit 77; }
if [ ! -x "$root/usr/bin/meson" ]; then
	command -v debootstrap >/dev/null ||
		{ echo "clean_machine: no debootstrap (scripts/install-deps.sh installs it)"; exit 77; }
	rm -rf "$root"
	debootstrap --variant=minbase --include=$packages bookworm "$root" \
		http://deb.debian.org/debian >"$root.log" 2>&1 ||
		{ echo "clean_machine: debootstrap failed (see $root.log)"; rm -rf "$root"; exit 77; }
fi
# What the chroot has is what this check claims: none of the optional libraries.
for lib in criterion ck urcu yaml hiredis; do
	if chroot "$root" sh -c "ls /usr/include | grep -qi '^$lib'"; then
		echo "clean_machine: FAIL: the chroot has $lib headers; it is not a clean machine"
		exit 1
	fi
done
rm -rf "$root/src"
mkdir -p "$root/src"
git archive HEAD | tar -x -C "$root/src"
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true' EXIT
chroot "$root" /bin/bash -euo pipefail -c '
	cd /src
	meson setup build >setup.log 2>&1 || { cat setup.log; exit 1; }
	ninja -C build >ninja.log 2>&1 || { tail -30 ninja.log; exit 1; }
	libdir=$(meson introspect build --buildoptions |
		python3 -c "import json,sys; print(next(o[\"value\"] for o in json.load(sys.stdin) if o[\"name\"] == \"libdir\"))")
	CC=cc bash tests/install_test.sh build /src /usr/local "$libdir" include
'
echo "clean_machine: ok: plain build and install with only libc and pthreads"
