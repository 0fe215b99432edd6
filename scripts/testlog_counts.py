#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""testlog_counts.py TESTLOG.json [FAILURES] - "PASSED FAILED" from a meson test log.

OK and EXPECTEDFAIL pass, SKIP counts neither way, anything else fails; a
missing log is one failure (the run did not happen).  scripts/test.sh's
final line adds these up, for every build (run_config and the arm64 stage).

With FAILURES, each failed test's name, result and the last lines of its
output are written there, so that the end of a CI log (often all that is
kept of it) says which test failed and how.
"""
import json
import sys

TAIL = 40
ok = bad = 0
report = []
try:
    for line in open(sys.argv[1]):
        t = json.loads(line)
        r = t.get("result")
        if r in ("OK", "EXPECTEDFAIL", "SKIP"):
            ok += r != "SKIP"
            continue
        bad += 1
        out = ((t.get("stdout") or "") + (t.get("stderr") or "")).splitlines()
        report.append("--- FAILED %s: %s (exit %s, %.1f s)\n%s\n" % (
            t.get("name"), r, t.get("returncode"), t.get("duration") or 0,
            "\n".join(out[-TAIL:])))
except OSError:
    bad += 1
    report.append("--- FAILED: no test log %s (the run did not happen)\n" % sys.argv[1])
if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as f:
        f.write("".join(report))
print(ok, bad)
