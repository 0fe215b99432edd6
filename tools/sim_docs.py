#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The sluice-sim tables the docs quote, from the command each names.

  tools/sim_docs.py check SLUICE-SIM ROOT   the test: every region of
      ROOT/docs/*.md between <!-- sluice-sim: ARGS --> and
      <!-- /sluice-sim --> is the output of `sluice-sim ARGS`, line for line
      (the simulation is deterministic: a seed, virtual time)
  tools/sim_docs.py write SLUICE-SIM ROOT   rewrite those regions

A figure in such a region is never typed: edit the command, then write.
"""
import os
import re
import shlex
import subprocess
import sys

REGION = re.compile(r"^<!-- sluice-sim: (.+?) -->\n(.*?)^<!-- /sluice-sim -->$", re.M | re.S)


def output(sim, args):
    r = subprocess.run([sim] + shlex.split(args), capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit("sluice-sim %s: exit %d\n%s" % (args, r.returncode, r.stderr))
    return r.stdout.rstrip("\n") + "\n"


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("check", "write"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, sim, root = sys.argv[1:]
    docs = os.path.join(root, "docs")
    bad = seen = 0
    for name in sorted(f for f in os.listdir(docs) if f.endswith(".md")):
        path = os.path.join(docs, name)
        text = open(path).read()

        def redo(m):
            return "<!-- sluice-sim: %s -->\n%s<!-- /sluice-sim -->" % (
                m.group(1), output(sim, m.group(1)))

        new = REGION.sub(redo, text)
        seen += len(REGION.findall(text))
        if new != text:
            if mode == "write":
                open(path, "w").write(new)
                print("wrote", path)
            else:
                print("%s: a sluice-sim region is not its command's output "
                      "(tools/sim_docs.py write rewrites it)" % path)
                bad += 1
    print("sim_docs: %d regions, %d differ" % (seen, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
