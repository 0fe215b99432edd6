#!/usr/bin/env python3
"""Write the first ```c block of README.md to a file, so the build compiles
and the test suite runs the README's example exactly as printed."""
import sys

src, dst = sys.argv[1], sys.argv[2]
lines, inside, found = [], False, False
for line in open(src, encoding="utf-8"):
    if not inside and line.strip() == "```c" and not found:
        inside = True
        continue
    if inside and line.strip() == "```":
        inside, found = False, True
        continue
    if inside:
        lines.append(line)
if not found:
    sys.exit("README.md has no ```c block")
with open(dst, "w", encoding="utf-8") as f:
    f.write("/* generated from README.md by examples/extract_readme_c.py */\n")
    f.writelines(lines)
