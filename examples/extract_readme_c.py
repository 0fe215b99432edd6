#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the Nth ```c block of a markdown file (README.md, docs/keyed.md;
default: the first) to a file, so the build compiles and the test suite runs
the examples exactly as printed.  Usage: extract_readme_c.py FILE.md OUT
[N [LANG]]; LANG (default c) picks the fence, e.g. yaml for the rule file
`sluice check` validates."""
import sys

src, dst = sys.argv[1], sys.argv[2]
want = int(sys.argv[3]) if len(sys.argv) > 3 else 1
lang = sys.argv[4] if len(sys.argv) > 4 else "c"
comment = "/* %s */\n" if lang == "c" else "# %s\n"
blocks, lines, inside = 0, [], False
for line in open(src, encoding="utf-8"):
    if not inside and line.strip() == "```" + lang:
        blocks += 1
        inside = True
        continue
    if inside and line.strip() == "```":
        inside = False
        if blocks == want:
            break
        continue
    if inside and blocks == want:
        lines.append(line)
if blocks < want or not lines:
    sys.exit("%s has no ```%s block number %d" % (src, lang, want))
with open(dst, "w", encoding="utf-8") as f:
    f.write(comment % ("generated from %s by examples/extract_readme_c.py" % src.split("/")[-1]))
    f.writelines(lines)
