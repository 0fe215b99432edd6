#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs/figures.md: every benchmark figure the docs quote, from one run.

  bench/figures.py write RUN_DIR [FIGURES.md] [README.md]
      read the raw outputs bench/readme_figures.sh left in RUN_DIR (env.txt,
      bench_algos.txt, bench_window.txt, bench_clock.txt, bench_keyed.txt,
      instructions.txt), write FIGURES.md (default docs/figures.md): the
      machine, the commit, the command, the tables, and the raw lines they
      are read from; and the README's table between its markers
      <!-- figures: readme --> and <!-- /figures --> (default README.md).
  bench/figures.py check [FIGURES.md] [README.md]
      the test: render the tables again from FIGURES.md's own raw lines and
      fail on any difference from what the file and the README's region
      show (a figure edited by hand, or a table no longer the run's).

One implementation of each table, used by both: a figure is never typed.
"""
import os
import re
import sys

RAW_BEGIN = "<!-- raw: the run's lines, which every table above is read from -->"
README_BEGIN = "<!-- figures: readme (bench/figures.py writes this table; edit there) -->"
README_END = "<!-- /figures -->"
SOURCES = ["env.txt", "bench_algos.txt", "bench_window.txt", "bench_clock.txt",
           "bench_keyed.txt", "instructions.txt"]


def parse(lines):
    """Every `bench ...` / `instr ...` / `bench_env ...` line as (kind, dict)."""
    out = []
    for line in lines:
        m = re.match(r"^(bench_env|bench|instr) (.*)$", line)
        if not m:
            continue
        d = {}
        for k, v in re.findall(r'(\w+)=("[^"]*"|\S+)', m.group(2)):
            d[k] = v.strip('"')
        out.append((m.group(1), d))
    return out


def find(recs, kind="bench", **want):
    for k, d in recs:
        if k == kind and all(d.get(a) == str(b) for a, b in want.items()):
            return d
    return None


def ns(d):
    return "%.1f ns" % float(d["ns_per_decision"]) if d else ""


def mps(d):
    if not d:
        return ""
    v = float(d["decisions_per_sec"]) / 1e6
    return ("%.0f M/s" if v >= 10 else "%.1f M/s") % v


def ratio(d, key):
    return "%.2fx" % float(d[key]) if d and key in d else ""


def label(d):
    names = {"rmw": "probe", "fixed": "fixed window", "ring": "ring", "gcra": "GCRA",
             "leaky": "leaky", "log": "sliding log", "warmup": "warm-up", "decay": "decay",
             "inflight": "in-flight", "composite": "composite"}
    a, m, i = d["algo"], d.get("mode", "-"), d["impl"]
    s = names.get(a, a)
    if a == "rmw":
        return {"fetch_add": "fetch_add (the floor)", "fetch_add+fill": "fetch_add + the stores",
                "cas": "load + CAS", "cas+fill": "load + CAS + the stores"}.get(m, "rmw " + m)
    if i != "sluice":
        return "%s, %s (baseline)" % (s, i)
    return s if m in ("-", "exact") else "%s %s" % (s, m)


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def hot_key_rows(recs, regime):
    seen, rows = set(), []
    for k, d in recs:
        if k != "bench" or d.get("regime") != regime or d.get("threads") != "1" or \
                "impl" not in d:
            continue
        key = (d["algo"], d.get("mode"), d["impl"])
        if key in seen:
            continue
        seen.add(key)
        at = lambda t: find(recs, algo=key[0], mode=key[1], impl=key[2], regime=regime, threads=t)
        rows.append((key, d, at("2"), at("4")))
    return rows


def render(recs, env, cmd):
    cpu = find(recs, "bench_env") or {}
    lines = ["# Figures", "",
             "Every benchmark figure the docs quote, written by `bench/figures.py` from",
             "one run of `%s`; do not edit by hand (the test" % cmd,
             "`docs_figures` renders the tables again from the raw lines at the end and",
             "fails on any difference). Other machines give other absolute figures;",
             "the ratios within one run are what travel.", ""]
    lines += ["**The run**:", ""]
    lines += ["    " + e for e in env]
    lines += ["", "CPU as the benchmarks name it: `%s`, %s online CPUs. ns per decision is"
              % (cpu.get("cpu", "?"), cpu.get("online_cpus", "?")),
              "what one caller pays (threads x wall / decisions), M/s the aggregate; medians",
              "of the repeats; every thread pinned round robin to the CPUs.", ""]

    lines += ["## One hot key, allow regime", "",
              "`bench_algos`, every decision admits, n = 1, the decision filled, sluice on",
              "the cached clock, the baselines as each names its clock:", ""]
    rows = []
    for key, one, two, four in hot_key_rows(recs, "allow"):
        rows.append([label(one), ns(one), ratio(one, "vs_rmw"), mps(two), ratio(two, "scaling"),
                     ratio(two, "vs_mutex"), mps(four)])
    lines += table(["", "1 thread", "x rmw", "2 threads", "vs its 1 thread",
                    "vs mutex, 2 threads", "4 threads"], rows)
    for regime, what in (("deny", "every decision refused, the limit spent"),
                         ("near", "the budget always nearly spent")):
        lines += ["", "## One hot key, %s regime" % regime, "", "`bench_algos`, %s:" % what, ""]
        rows = [[label(one), ns(one), mps(two), ratio(two, "vs_mutex"), mps(four)]
                for key, one, two, four in hot_key_rows(recs, regime)]
        lines += table(["", "1 thread", "2 threads", "vs mutex, 2 threads", "4 threads"], rows)

    lines += ["", "## Clock reads", "", "`bench_clock`, one thread:", ""]
    rows = [[d["clock"], "%s ns" % d["ns_per_read"]] for k, d in recs
            if k == "bench" and "ns_per_read" in d]
    lines += table(["clock", "per read"], rows)
    lines += ["", "The cached clock's ticker, by period: its CPU and how far a reading lags",
              "`CLOCK_MONOTONIC`:", ""]
    rows = [["%s us" % d["period_us"], "%s %%" % d["cpu_pct"], "%s us" % d["lag_median_us"],
             "%s us" % d["lag_max_us"]] for k, d in recs if k == "bench" and "period_us" in d]
    lines += table(["period", "CPU", "lag, median", "lag, max"], rows)

    lines += ["", "## A decision by clock source", "",
              "`bench_window`, one thread, allow regime, ns per decision:", ""]
    rows = [["%s %s" % (d["algo"], d["mode"]), d["clock"], d.get("decision", ""), ns(d),
             ratio(d, "vs_mutex")] for k, d in recs
            if k == "bench" and "decision" in d and "impl" not in d]
    lines += table(["", "clock", "decision", "per decision", "vs mutex"], rows)

    lines += ["", "## Keyed tables", "",
              "`bench_keyed`: GCRA per key; random10k is 10,000 random 16-byte keys, zipf1m",
              "a Zipf-distributed million; `array-gcra` is a plain array of sluice GCRA",
              "limiters indexed by key (the lower bound), `mutex-array` per-key mutexes:", ""]
    rows = [[d["algo"], d["mode"], d["threads"], d["regime"], ns(d), ratio(d, "vs_array"),
             ratio(d, "vs_mutex")] for k, d in recs
            if k == "bench" and d.get("algo", "").split("-")[0] in ("keyed", "array", "mutex")
            and "regime" in d and d.get("regime", "").startswith(("random", "zipf"))]
    lines += table(["", "clock", "threads", "keys", "per decision", "vs array", "vs mutex"], rows)
    rows = [[d["hash"], "%s ns" % d["cpu_ns_per_hash"]] for k, d in recs
            if k == "bench" and "hash" in d]
    lines += ["", "The hashes alone, a 16-byte key:", ""] + table(["hash", "per hash"], rows)

    lines += ["", "## Instructions per decision", "",
              "`perf/instructions.sh`, callgrind, one thread, time from the caller, the",
              "decision filled; `null` is the loop alone (subtract it):", ""]
    rows = [[d["algo"], d["instructions_per_decision"]] for k, d in recs if k == "instr"]
    lines += table(["", "instructions"], rows) if rows else ["(valgrind was not installed)"]
    return lines


def readme_table(recs):
    want = [("rmw", "cas", "probe"), ("fixed", "lease", "sluice"), ("ring", "exact-lease", "sluice"),
            ("gcra", "lease", "sluice"), ("log", "-", "sluice"), ("fixed", "-", "mutex")]
    rows = []
    for a, m, i in want:
        one = find(recs, algo=a, mode=m, impl=i, regime="allow", threads=1)
        two = find(recs, algo=a, mode=m, impl=i, regime="allow", threads=2)
        if one:
            rows.append([label(one), ns(one), mps(two), ratio(two, "vs_mutex")])
    return table(["", "1 thread", "2 threads", "vs a mutex, 2 threads"], rows)


def raw_of(text):
    i = text.index(RAW_BEGIN)
    body = text[i:].split("```")[1]
    return body.strip("\n").split("\n")


def env_of(raw):
    return [l[len("env "):] for l in raw if l.startswith("env ")]


def cmd_of(raw):
    for l in raw:
        if l.startswith("command "):
            return l[len("command "):]
    return "bench/readme_figures.sh"


def document(raw):
    recs = parse(raw)
    lines = render(recs, env_of(raw), cmd_of(raw))
    lines += ["", RAW_BEGIN, "", "```"] + raw + ["```", ""]
    return "\n".join(lines)


def readme_region(readme_text, recs):
    i, j = readme_text.find(README_BEGIN), readme_text.find(README_END)
    if i < 0 or j < i:
        sys.exit("bench/figures.py: the README has no %s ... %s region" % (README_BEGIN, README_END))
    return readme_text[:i + len(README_BEGIN)] + "\n" + "\n".join(readme_table(recs)) + "\n" + \
        readme_text[j:]


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if len(sys.argv) < 2 or sys.argv[1] not in ("write", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "write":
        run = sys.argv[2]
        figs = sys.argv[3] if len(sys.argv) > 3 else os.path.join(root, "docs", "figures.md")
        readme = sys.argv[4] if len(sys.argv) > 4 else os.path.join(root, "README.md")
        raw = ["command bench/readme_figures.sh"]
        raw += ["env " + l for l in open(os.path.join(run, "env.txt")).read().split("\n") if l]
        for src in SOURCES[1:]:
            p = os.path.join(run, src)
            if os.path.exists(p):
                raw += [l for l in open(p).read().split("\n")
                        if re.match(r"^(bench_env|bench|instr) ", l)]
        doc = document(raw)
        region = readme_region(open(readme).read(), parse(raw))  # before either is written
        open(figs, "w").write(doc)
        open(readme, "w").write(region)
        print("wrote %s and the table of %s" % (figs, readme))
        return 0
    figs = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "docs", "figures.md")
    readme = sys.argv[3] if len(sys.argv) > 3 else os.path.join(root, "README.md")
    text = open(figs).read()
    raw = raw_of(text)
    bad = 0
    want = document(raw)
    if text != want:
        a, b = text.split("\n"), want.split("\n")
        for n, (x, y) in enumerate(zip(a, b), 1):
            if x != y:
                print("%s:%d: '%s', but the run's lines give '%s'" % (figs, n, x, y))
                break
        else:
            print("%s: %d lines, the run's lines give %d" % (figs, len(a), len(b)))
        bad += 1
    rtext = open(readme).read()
    if readme_region(rtext, parse(raw)) != rtext:
        print("%s: the table between its figures markers is not the one %s's lines give "
              "(bench/figures.py write rewrites it)" % (readme, figs))
        bad += 1
    print("docs_figures: %s and %s %s" % (figs, readme, "differ" if bad else "agree with the run"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
