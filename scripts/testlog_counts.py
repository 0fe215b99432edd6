#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""testlog_counts.py TESTLOG.json - "PASSED FAILED" from a meson test log.

OK and EXPECTEDFAIL pass, SKIP counts neither way, anything else fails; a
missing log is one failure (the run did not happen).  scripts/test.sh's
final line adds these up, for every build (run_config and the arm64 stage).
"""
import json
import sys

ok = bad = 0
try:
    for line in open(sys.argv[1]):
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL", "SKIP"):
            ok += r != "SKIP"
        else:
            bad += 1
except OSError:
    bad += 1
print(ok, bad)
