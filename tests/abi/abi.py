#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The `abi` test: every shared library this build installs exports exactly
the symbols its committed list names (tests/abi/<library>.symbols), each
under the version node the list gives.

usage: abi.py BUILD-DIR LIST-DIR VERSION [--drop NAME]

The installed libraries come from `meson introspect --installed`, so a new
library without a list fails too.  nm -D --defined-only gives NAME@@NODE;
the node SLUICE_INLINE_<VERSION> is written SLUICE_INLINE_@VERSION@ in the
lists (lib/sluice.map.in: it is named after each release).  --drop NAME
removes NAME from the expected lists before comparing: the suite's own
proof that a difference fails the test (tests/abi/meson.build, 'abi-fails').
"""
import json
import os
import subprocess
import sys


def exported(path, version):
    out = subprocess.run(['nm', '-D', '--defined-only', path], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[1] == 'A':  # 'A': the version nodes themselves
            continue
        names.add(parts[2].replace('SLUICE_INLINE_' + version, 'SLUICE_INLINE_@VERSION@'))
    return names


def main():
    build, lists, version = sys.argv[1:4]
    drop = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == '--drop' else None
    installed = json.loads(subprocess.run(['meson', 'introspect', '--installed', build],
                                          check=True, capture_output=True, text=True).stdout)
    libs = sorted(src for src, dst in installed.items()
                  if os.path.isabs(src) and '.so.' in os.path.basename(dst))
    if not libs:
        print('no shared library is installed by', build)
        return 1
    bad = 0
    for lib in libs:
        base = os.path.basename(lib).split('.so')[0]
        want_path = os.path.join(lists, base + '.symbols')
        got = exported(lib, version)
        if not os.path.exists(want_path):
            print('%s: no list %s; it exports:' % (base, want_path))
            print('\n'.join(sorted(got)))
            bad += 1
            continue
        with open(want_path) as f:
            want = {l.strip() for l in f if l.strip() and not l.startswith('#')}
        want = {w for w in want if w.split('@')[0] != drop}
        extra, missing = sorted(got - want), sorted(want - got)
        for s in extra:
            print('%s: exports %s, which %s does not list' % (base, s, want_path))
        for s in missing:
            print('%s: does not export %s, which %s lists' % (base, s, want_path))
        if extra or missing:
            bad += 1
            print('%s: a change to the ABI: update %s (and NEWS.md) if it is meant' %
                  (base, want_path))
        private = sorted(s for s in got if s.startswith('sluice__'))
        for s in private:
            print('%s: exports the private name %s' % (base, s))
        bad += bool(private)
        print('%s: %d symbols checked' % (base, len(got)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
