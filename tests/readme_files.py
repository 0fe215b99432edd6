#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check that every README block fenced as ```LANG PATH (e.g. ```c
examples/redis_limit.c) is exactly the file PATH of the tree, so an example
the README prints is the one the build compiles and a test runs.  The
blocks fenced ```c alone are compiled by tests/install_test.sh instead.
Usage: readme_files.py SOURCE_ROOT FILE.md...: at least one such block in
all of them."""
import os
import sys

root, readmes = sys.argv[1], sys.argv[2:]
min_blocks = 1
found, bad, inside, path, lines = 0, 0, False, None, []
for readme, no, line in ((r, no, line) for r in readmes
                         for no, line in enumerate(open(r, encoding="utf-8"), 1)):
    s = line.strip()
    if not inside and s.startswith("```") and len(s.split()) == 2:
        inside, path, lines, start = True, s.split()[1], [], no
        continue
    if inside and s == "```":
        inside = False
        found += 1
        full = os.path.join(root, path)
        try:
            want = open(full, encoding="utf-8").read()
        except OSError as e:
            print("%s:%d: block names %s: %s" % (readme, start, path, e.strerror))
            bad += 1
            continue
        if "".join(lines) != want:
            print("%s:%d: block differs from %s (copy the file into the README)" % (readme, start, path))
            bad += 1
        continue
    if inside:
        lines.append(line)
if found < min_blocks:
    print("%s: %d blocks fenced with a file name, want at least %d" % (readme, found, min_blocks))
    bad += 1
print("%d README blocks checked against their files, %d differ" % (found, bad))
sys.exit(1 if bad else 0)
