#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs/figures.md: every benchmark figure the docs quote, from one run.

  bench/figures.py write RUN_DIR [FIGURES.md] [ROOT]
      read the raw outputs bench/readme_figures.sh left in RUN_DIR (env.txt
      and one file per benchmark, SOURCES below), write FIGURES.md (default
      docs/figures.md): the machine, the commit, the command, the tables,
      and the raw lines they are read from; and every generated region of
      ROOT/README.md and ROOT/docs/*.md (default: this tree), the lines
      between <!-- figures: NAME ... --> and <!-- /figures -->, NAME one of
      REGIONS below.
  bench/figures.py check [FIGURES.md] [ROOT]
      the test: render the tables again from FIGURES.md's own raw lines and
      fail on any difference from what the file and each region show (a
      figure edited by hand, or a table no longer the run's), and on a
      region whose NAME is unknown.
  bench/figures.py scaling RUN_DIR
      the table bench/scaling.sh prints: each figure at every thread (or
      worker) count of the run it left in RUN_DIR (scaling_env.txt,
      bench_algos.txt, bench_keyed.txt, bench_rules.txt, nginx_wN.txt).

One implementation of each table, used by all: a figure is never typed.
"""
import os
import re
import sys

RAW_BEGIN = "<!-- raw: the run's lines, which every table above is read from -->"
REGION_BEGIN = re.compile(r"^<!-- figures: ([\w-]+) \(bench/figures.py writes this table; "
                          r"edit there\) -->$", re.M)
REGION_END = "<!-- /figures -->"
SOURCES = ["env.txt", "bench_algos.txt", "bench_window.txt", "bench_clock.txt",
           "bench_keyed.txt", "instructions.txt", "bench_rules.txt", "bench_redis.txt",
           "nginx_bench.txt", "nginx_callgrind.txt", "keyed_flood.txt"]
RAW_LINE = re.compile(r"^(bench_env|bench|instr) |^bench=nginx|^stress algo=keyed-gcra mode=flood ")


def parse(lines):
    """Every `bench ...` / `instr ...` / `bench_env ...` line as (kind, dict);
    nginx's scripts' `bench=nginx-KIND k=v ...` lines as (nginx-KIND, dict)."""
    out = []
    for line in lines:
        m = re.match(r"^(bench_env|bench|instr|stress|scaling) (.*)$", line) or \
            re.match(r"^bench=(nginx\S*) (.*)$", line)
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
    lines += ["", "`stress_keyed --mode=flood --threads=2 --policy=P`: 10,000,000 distinct",
              "keys (each sending once) through a table of capacity 100,000, while one key",
              "limited to 10/s with bursts of 10 tries far past its rate:", ""]
    lines += keyed_flood_table(recs)

    lines += ["", "## Instructions per decision", "",
              "`perf/instructions.sh`, callgrind, one thread, time from the caller, the",
              "decision filled; `null` is the loop alone (subtract it):", ""]
    rows = [[d["algo"], d["instructions_per_decision"]] for k, d in recs
            if k == "instr" and not d["algo"].startswith("rules:")]
    lines += table(["", "instructions"], rows) if rows else ["(valgrind was not installed)"]

    lines += ["", "## The rules engine", "",
              "`bench_rules`: 20 rules x 2 dimensions (ip, user), 10,000 keys at random",
              "over 40 tables of 32,768 slots; `decide` is `sluice_engine_decide` (the",
              "match, two keyed decisions, the metrics, the verdict), `keyed` the same two",
              "keyed decisions made directly, `read` a urcu-bp read section alone,",
              "`empty-decide` an engine with no rule set; ns per request (at 2 threads,",
              "wall ns over both threads' requests), medians:", ""]
    lines += rules_table(recs)
    lines += ["", "Loading 1,000 rules (2,000 tables of 64 slots) into a new engine, and",
              "loading the same file again (every state kept, one grace period):", ""]
    lines += rules_load_table(recs)
    lines += ["", "Instructions per request (`perf/instructions.sh` with `rules:CASE`,",
              "callgrind):", ""]
    lines += rules_instr_table(recs)

    lines += ["", "## Redis", "",
              "`bench_redis`: libsluice-redis against one EVALSHA per decision on a private",
              "redis-server on 127.0.0.1, the limit never reached (both admit everything);",
              "hot is one limit, keys 10,000 keys of one keyed limit picked at random",
              "(keys-Nt: N deciding threads; evalsha-pipe64 a plain hiredis client",
              "pipelining 64 EVALSHA per round trip), paused the hot limit while the",
              "server is held by `CLIENT PAUSE`; medians:", ""]
    lines += redis_table(recs)

    lines += ["", "## nginx", "",
              "`nginx/bench.sh` (requests/s by wrk and the workers' CPU per request,",
              "medians of its interleaved runs) and `nginx/callgrind.sh` (instructions",
              "per request added by the limiter, one nginx process under callgrind):",
              "one keyed GCRA per `X-Key`, the rate so high that every request is",
              "admitted; limit_req with the same rate and burst, `nodelay`:", ""]
    lines += nginx_table(recs)
    lines += ["", "Exactness at 2000r/s with no burst, one key, 2 workers (admissions per",
              "second from the access log's first and last admission):", ""]
    lines += nginx_exact_table(recs)
    return lines


NGINX_NAMES = {"none": "none", "sluice": "sluice_limit", "rules": "sluice_rules",
               "lreq": "limit_req", "no-match": "a request no rule matches"}


def thousands(v):
    return "{:,}".format(int(round(float(v))))


def rules_table(recs):
    rows = []
    for name in ("decide", "keyed", "read", "empty-decide"):
        one = find(recs, name=name, threads=1)
        two = find(recs, name=name, threads=2)
        if one:
            rows.append([name, "%s ns" % one["ns_per_op"],
                         "%s ns" % two["ns_per_op"] if two else ""])
    return table(["", "1 thread", "2 threads"], rows) if rows else ["(no rules engine)"]


def rules_load_table(recs):
    rows = [[d["name"], "%s ms" % d["ms"]] for k, d in recs
            if k == "bench" and d.get("name") in ("load", "reload")]
    return table(["1,000 rules", "time"], rows) if rows else ["(no rules engine)"]


def rules_instr_table(recs):
    rows = [[d["algo"][len("rules:"):], thousands(d["instructions_per_decision"])]
            for k, d in recs if k == "instr" and d["algo"].startswith("rules:")]
    return table(["", "instructions"], rows) if rows else ["(valgrind was not installed)"]


def redis_table(recs):
    rows = [[d["case"], d["impl"], thousands(d["decisions_per_s"]), thousands(d["p50_ns"]),
             thousands(d["p99_ns"]), d["round_trips_per_decision"],
             d.get("fallbacks_per_decision", "not counted")] for k, d in recs
            if k == "bench" and "round_trips_per_decision" in d]
    return table(["case", "impl", "decisions/s", "p50 ns", "p99 ns", "round trips per decision",
                  "fallbacks per decision"], rows) if rows else ["(no Redis benchmark: hiredis or redis-server missing)"]


def nginx_table(recs):
    rows = []
    for keys in ("1", "10000"):
        for loc in ("none", "sluice", "rules", "lreq"):
            m = find(recs, "nginx-median", limiter=loc, keys=keys)
            if not m:
                continue
            i = find(recs, "nginx-instr", limiter=loc, keys=keys)
            rows.append([NGINX_NAMES[loc], thousands(keys), thousands(m["rps"]),
                         "%s us" % m["cpu_us_per_req"],
                         thousands(i["instructions_per_request"]) if i else
                         ("(baseline)" if loc == "none" else "")])
        i = find(recs, "nginx-instr", limiter="no-match", keys=keys)
        if i:
            rows.append([NGINX_NAMES["no-match"], thousands(keys), "", "",
                         thousands(i["instructions_per_request"])])
    return table(["limiter", "keys", "requests/s", "worker CPU per request",
                  "instructions per request added"], rows) if rows else ["(no nginx benchmark)"]


def nginx_exact_table(recs):
    rows = [[NGINX_NAMES[d["limiter"]], thousands(d["offered_per_s"]),
             thousands(d["admitted_per_s"])] for k, d in recs if k == "nginx-exact"]
    return table(["limiter", "offered/s", "admitted/s"], rows) if rows else ["(no nginx benchmark)"]


def keyed_flood_table(recs):
    rows = [[d["policy"], d["seconds"], thousands(d["reclaims"]), thousands(d["evictions"]),
             "%s / %s" % (thousands(d["rejections"]), thousands(d["untracked"])),
             "%s in %s s" % (d["admitted"], d["seconds"]), "%s (bound %s)" % (d["worst"], d["bound"]),
             "%s / %s kB" % (thousands(d["rss_before_kb"]), thousands(d["rss_after_kb"])),
             d["verdict"]] for k, d in recs if k == "stress" and d.get("mode") == "flood"]
    return table(["policy", "seconds", "reclaims", "evictions", "rejected / untracked",
                  "abuser admitted", "worst burst", "VmRSS before / after", "verdict"], rows) \
        if rows else ["(no flood run)"]


def keyed_table(recs):
    """The keyed tables' rows for docs/keyed.md: 1 and 2 threads, cached clock."""
    rows = []
    for regime in ("random10k", "zipf1m"):
        for algo in ("keyed-gcra", "keyed-gcra-sip", "array-gcra", "mutex-array", "mutex-hash"):
            for t in ("1", "2"):
                # the chained hash table reads CLOCK_MONOTONIC, as such tables do
                clock = "monotonic" if algo == "mutex-hash" else "cached"
                d = find(recs, algo=algo, mode=clock, threads=t, regime=regime)
                if d:
                    rows.append([regime, algo, clock, t, ns(d), ratio(d, "vs_array"),
                                 ratio(d, "vs_hash")])
    return table(["keys", "", "clock", "threads", "per decision", "vs array", "vs mutex-hash"],
                 rows) \
        if rows else \
        ["(no keyed benchmark)"]


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


SCALING_HOT = {("rmw", "fetch_add", "probe"): "fetch_add, a line per thread (the ceiling)",
               ("fixed", "exact", "sluice"): "fixed window",
               ("ring", "exact", "sluice"): "ring EXACT",
               ("ring", "exact-lease", "sluice"): "ring EXACT, leases of 1024",
               ("ring", "exact-lease64", "sluice"): "ring EXACT, leases of 64",
               ("gcra", "-", "sluice"): "GCRA",
               ("gcra", "lease", "sluice"): "GCRA, leases of 1024",
               ("gcra", "lease64", "sluice"): "GCRA, leases of 64",
               ("gcra", "-", "mutex_cached"): "GCRA under one mutex (cached clock)"}


def scaling_table(run):
    """bench/scaling.sh's table from the outputs it left in RUN."""
    if not os.path.isfile(os.path.join(run, "scaling_env.txt")):
        sys.exit("bench/figures.py scaling: %s has no scaling_env.txt (bench/scaling.sh "
                 "writes it)" % run)

    def recs_of(name):
        path = os.path.join(run, name)
        return parse(open(path).read().split("\n")) if os.path.exists(path) else []
    env = find(recs_of("scaling_env.txt"), "scaling") or {}
    counts = env.get("counts", "1").split(",")
    algos, keyed, rules = recs_of("bench_algos.txt"), recs_of("bench_keyed.txt"), \
        recs_of("bench_rules.txt")
    cpu = find(algos, "bench_env") or find(keyed, "bench_env") or {}
    rows = []

    def row(what, unit, at, fmt="%.1f"):
        v = [at(t) for t in counts]
        if all(x is None for x in v):
            return
        cells = [fmt % x if x is not None else "" for x in v]
        last = ["%.2fx" % (v[-1] / v[0]) if v[0] and v[-1] is not None else ""]
        rows.append([what, unit] + cells + (last if len(v) > 1 else []))

    def val(d, key, f=lambda x: x):
        return f(float(d[key])) if d and key in d else None

    # one hot key: SCALING_HOT's rows in its order (the probe, sluice's series, GCRA
    # under one mutex), then any other sluice series the run has
    found = {}
    for k, d in algos:
        key = (d.get("algo"), d.get("mode"), d.get("impl"))
        if k == "bench" and d.get("regime") == "allow" and (key in SCALING_HOT or
                                                           key[2] == "sluice"):
            found.setdefault(key, d)
    for key in [k for k in SCALING_HOT if k in found] + \
            [k for k in found if k not in SCALING_HOT]:
        row("hot key: " + SCALING_HOT.get(key, label(found[key])), "M decisions/s",
            lambda t, a=key: val(find(algos, algo=a[0], mode=a[1], impl=a[2], regime="allow",
                                      threads=t), "decisions_per_sec", lambda x: x / 1e6))
    for regime, what in (("random10k", "10,000 random keys"), ("zipf1m", "Zipf over 1M keys")):
        for algo in ("keyed-gcra", "array-gcra", "mutex-array", "mutex-hash"):
            clock = "monotonic" if algo == "mutex-hash" else "cached"
            row("keyed, %s: %s" % (what, algo), "M decisions/s",
                lambda t, a=algo, c=clock, r=regime: val(
                    find(keyed, algo=a, mode=c, threads=t, regime=r), "decisions_per_sec",
                    lambda x: x / 1e6))
    for name, what in (("decide", "sluice_engine_decide, 20 rules x 2 dims"),
                       ("keyed", "the same 2 keyed decisions")):
        row("rules: " + what, "M requests/s",
            lambda t, n=name: val(find(rules, name=n, threads=t), "ns_per_op", lambda x: 1e3 / x))
    nginx = {t: recs_of("nginx_w%s.txt" % t) for t in counts}
    for metric, unit, key, f, fmt in (("", "k requests/s", "rps", lambda x: x / 1e3, "%.1f"),
                                      (" CPU", "us/request", "cpu_us_per_req", lambda x: x,
                                       "%.2f")):
        for keys in ("1", "10000"):
            for loc in ("none", "sluice", "rules", "lreq"):
                row("nginx%s, %s key%s: %s" % (metric, thousands(keys), "" if keys == "1" else "s",
                                              NGINX_NAMES[loc]), unit,
                    lambda t, l=loc, k=keys, m=key, g=f: val(
                        find(nginx[t], "nginx-median", limiter=l, keys=k), m, g), fmt)
    n = counts[-1]
    lines = ["`bench/scaling.sh%s` on %s, %s online CPUs (%s)."
             % (" --quick" if env.get("mode") == "quick" else "", cpu.get("cpu", "?"),
                env.get("online_cpus", "?"), env.get("runs", "?")),
             "Columns: threads (nginx: workers); every figure is the aggregate of all of",
             "them, the median of the runs; the last column is the figure at %s over the"
             % n, "one at 1.", ""]
    return lines + table(["figure", "unit"] + counts + (["%s vs 1" % n] if len(counts) > 1 else []),
                         rows)


REGIONS = {"readme": readme_table, "nginx": nginx_table, "nginx-exact": nginx_exact_table,
           "redis": redis_table, "rules": rules_table, "rules-load": rules_load_table,
           "rules-instr": rules_instr_table, "keyed": keyed_table, "keyed-flood": keyed_flood_table}


def regions(text, recs, where):
    """TEXT with every generated region rendered again from RECS."""
    out, pos = [], 0
    for m in REGION_BEGIN.finditer(text):
        name = m.group(1)
        if name not in REGIONS:
            sys.exit("%s: unknown figures region '%s' (known: %s)" %
                     (where, name, ", ".join(sorted(REGIONS))))
        j = text.find(REGION_END, m.end())
        if j < 0:
            sys.exit("%s: figures region '%s' has no %s" % (where, name, REGION_END))
        out += [text[pos:m.end()], "\n", "\n".join(REGIONS[name](recs)), "\n"]
        pos = j
    return "".join(out) + text[pos:]


def pages(root, figs):
    docs = os.path.join(root, "docs")
    names = [os.path.join(root, "README.md")]
    names += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return [n for n in names if os.path.abspath(n) != os.path.abspath(figs)]


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if len(sys.argv) < 2 or sys.argv[1] not in ("write", "check", "scaling") or \
            (sys.argv[1] == "scaling" and len(sys.argv) != 3):
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "scaling":
        print("\n".join(scaling_table(sys.argv[2])))
        return 0
    rest = sys.argv[3:] if sys.argv[1] == "write" else sys.argv[2:]
    figs = rest[0] if rest else os.path.join(root, "docs", "figures.md")
    top = rest[1] if len(rest) > 1 else root
    if sys.argv[1] == "write":
        run = sys.argv[2]
        raw = ["command bench/readme_figures.sh"]
        raw += ["env " + l for l in open(os.path.join(run, "env.txt")).read().split("\n") if l]
        for src in SOURCES[1:]:
            p = os.path.join(run, src)
            if os.path.exists(p):
                raw += [l for l in open(p).read().split("\n") if RAW_LINE.match(l)]
        doc, recs = document(raw), parse(raw)
        new = {n: regions(open(n).read(), recs, n) for n in pages(top, figs)}  # before any write
        open(figs, "w").write(doc)
        with_regions = [n for n, text in new.items() if REGION_BEGIN.search(text)]
        for n in with_regions:
            open(n, "w").write(new[n])
        print("wrote %s and the generated regions of %s" %
              (figs, ", ".join(os.path.relpath(n, top) for n in sorted(with_regions))))
        return 0
    return check(figs, top)


def check(figs, top):
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
    recs, seen = parse(raw), 0
    for n in pages(top, figs):
        ptext = open(n).read()
        seen += len(REGION_BEGIN.findall(ptext))
        if regions(ptext, recs, n) != ptext:
            print("%s: a table between figures markers is not the one %s's lines give "
                  "(bench/figures.py write rewrites it)" % (n, figs))
            bad += 1
    print("docs_figures: %s and %d generated regions %s" %
          (figs, seen, "differ" if bad else "agree with the run"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
