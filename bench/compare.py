#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""compare.py - one benchmark, two builds, the same run.

    bench/compare.py [--runs=N] [--save=DIR] BEFORE_BINARY AFTER_BINARY [-- ARGS...]

Runs BEFORE and AFTER alternately, N times each (default 3), with the same
ARGS, so a slow phase of the machine hits both alike.  Reads every
`bench key=value ...` line they print (bench_algos, bench_keyed: see
docs/performance.md), groups the lines by their identifying fields (every
field that is not a measurement) and prints, per series, the median of
ns_per_decision (or cpu_ns_per_hash, or bench_rules's ns_per_op) over the runs of each binary, the
difference after - before in ns and the ratio after / before, as a
Markdown table.  A series only one binary prints is listed with "-".
--save=DIR keeps every run's full output as DIR/before-R.txt and
DIR/after-R.txt (their tables and bench_env lines included).

Why a script: the issues ask for "before and after, in the same run"; the
absolute ns of this VM move by 10-70 % between runs, so only alternating
runs of the two binaries on one machine compare them.
"""
import os
import shlex
import statistics
import subprocess
import sys

# Fields that are measurements (or derived from them), never identity.
MEASURES = {
    "ns_per_decision", "decisions_per_sec", "admitted", "scaling",
    "cpu_ns_per_decision", "cpu_ns_per_hash", "instructions",
    "min", "max", "ms",  # bench_rules: the spread of its repeats, a load's time
}
VALUE_FIELDS = ("ns_per_decision", "cpu_ns_per_hash", "ns_per_op")


def parse(line):
    """The key=value fields of one `bench ` line, in order."""
    fields = []
    for tok in shlex.split(line[len("bench "):]):
        if "=" in tok:
            k, v = tok.split("=", 1)
            fields.append((k, v))
    return fields


def series_of(output):
    """{identity: value} for each bench line that has a value."""
    out = {}
    for line in output.splitlines():
        if not line.startswith("bench "):
            continue
        fields = parse(line)
        value = None
        ident = []
        for k, v in fields:
            if k in VALUE_FIELDS:
                value = float(v)
            elif k in MEASURES or k.startswith("vs_") or k.startswith("cpu_vs_"):
                continue
            elif k == "cpu":
                continue  # the machine, the same for both
            else:
                ident.append(f"{k}={v}")
        if value is not None:
            out[" ".join(ident)] = value
    return out


def main(argv):
    runs = 3
    save = None
    args = []
    if "--" in argv:
        i = argv.index("--")
        argv, args = argv[:i], argv[i + 1:]
    pos = []
    for a in argv:
        if a.startswith("--runs="):
            runs = int(a.split("=", 1)[1])
            if runs < 1:
                sys.exit("compare.py: --runs must be at least 1")
        elif a.startswith("--save="):
            save = a.split("=", 1)[1]
            os.makedirs(save, exist_ok=True)
        else:
            pos.append(a)
    if len(pos) != 2:
        sys.exit(__doc__.strip().splitlines()[2])
    before, after = pos
    values = ({}, {})  # before's, after's (the two may be one binary)
    order = []
    for r in range(runs):
        for side, binary in enumerate((before, after)):
            p = subprocess.run([binary] + args, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"compare.py: {binary} exited {p.returncode}:\n{p.stderr}")
            if save:
                name = ("before", "after")[side]
                with open(os.path.join(save, f"{name}-{r + 1}.txt"), "w") as f:
                    f.write(p.stdout)
            for ident, v in series_of(p.stdout).items():
                if ident not in order:
                    order.append(ident)
                values[side].setdefault(ident, []).append(v)
        print(f"run {r + 1}/{runs} done", file=sys.stderr)

    print(f"before: `{before}`, after: `{after}`, {runs} alternating runs each, "
          f"args: `{' '.join(args)}`; medians of ns per decision")
    print()
    print("| series | before | after | after - before | after / before |")
    print("|---|---:|---:|---:|---:|")
    for ident in order:
        b = values[0].get(ident)
        a = values[1].get(ident)
        mb = statistics.median(b) if b else None
        ma = statistics.median(a) if a else None
        cell = lambda m: f"{m:.1f}" if m is not None else "-"
        diff = f"{ma - mb:+.1f}" if mb is not None and ma is not None else "-"
        ratio = f"{ma / mb:.2f}" if mb and ma is not None else "-"
        print(f"| {ident} | {cell(mb)} | {cell(ma)} | {diff} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
