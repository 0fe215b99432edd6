#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sim_cli.sh - smoke test of the sluice-sim command line: good runs, bad
# arguments (a clear message and a non-zero exit), trace errors naming the
# line, the same seed giving the same output, and the plot with gnuplot
# missing, faked, failing and (when installed) real.
# Usage: sim_cli.sh PATH-TO-sluice-sim   (meson passes the built binary)
set -u
SIM=$1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
fails=0
fail() {
	printf 'FAIL: %s\n' "$*"
	fails=$((fails + 1))
}

# expect STATUS TEXT ARGS...: sluice-sim ARGS exits STATUS and prints TEXT
# (stdout or stderr; empty TEXT: anything)
expect() {
	local want=$1 pat=$2 out got
	shift 2
	out=$("$SIM" "$@" 2>&1)
	got=$?
	[ "$got" -eq "$want" ] || fail "sluice-sim $*: exit $got, want $want"$'\n'"$out"
	[ -z "$pat" ] || grep -qF -- "$pat" <<<"$out" ||
		fail "sluice-sim $*: no \"$pat\" in:"$'\n'"$out"
}

# ---- good runs
expect 0 "N = ceil(1 / T)" --help
expect 0 "N = ceil(1 / T)" -h
expect 0 "N = ceil(1 / T)" demo -h
# --version: the library's version and the headers', both the project's
version=$(sed -n "s/^  version: '\\(.*\\)',\$/\\1/p" "$(dirname "$0")/../../meson.build")
[ -n "$version" ] || fail "no version: in meson.build's project()"
expect 0 "sluice-sim $version (built with $version)" --version
expect 0 "over-limit" --duration 2s
expect 0 "retries: offered = clients + retries" --profile retry --duration 5s
expect 0 "Pick: the sliding ring (--algo ring:buckets=50)" \
	advise --limit 100 --window 1s --tolerance 2%
expect 0 "Pick: the exact sliding log (--algo log)" advise --limit 10 --window 1s --tolerance 2%
worst=$("$SIM" --profile boundary --rate 0 --algo fixed --algo log | awk '$1 == "fixed" { print $5 }')
[ "$worst" = 200 ] || fail "fixed window, boundary burst: worst in W is '$worst', want 2L = 200"
worst=$("$SIM" --profile boundary --algo log | awk '$1 == "log" { print $5 }')
[ "$worst" = 100 ] || fail "sliding log, boundary burst: worst in W is '$worst', want L = 100"

# ---- bad arguments: exit 2 and say what is wrong
expect 2 "name 'bogus': unknown algorithm (one of: fixed window gcra" --algo bogus
expect 2 "window is zero or not a whole number of ns per bucket" --algo ring:buckets=7
expect 2 "--rate: not a number" --rate abc
expect 2 "--rate: not a rate (200, 200/s, 5/ms, 10r/s, 2x)" --rate 3q
expect 2 "--limit: must be above 0" --limit 0
expect 2 "--window: unknown unit" --window 3parsecs
expect 2 "advise: --tolerance is required" advise --limit 100
expect 2 "--tolerance: must be above 0" advise --tolerance 0%
expect 2 "unknown option '--frobnicate'" --frobnicate
expect 2 "unknown command 'frob'" frob
expect 2 "--burst: only for --profile boundary" --burst 5
expect 2 "the file must end in .svg or .png" --plot "$dir/x.pdf"
expect 2 "--per-key: only for a trace" --per-key
expect 2 "needs a value" --limit

# ---- fleet: good runs, bad arguments, its CSV
expect 0 "| 4 | 16 |" fleet --instances 4 --lease-max 16 --duration 3s
expect 0 "| 10 | 1 |" fleet --instances 1,10 --lease-max 1,16 --duration 2s
expect 2 "--instances: 1 to 1000" fleet --instances 1001
expect 2 "--lease-max: 1 to 65536" fleet --lease-max 0
expect 2 "--rtt: expected A:B" fleet --rtt 1ms
expect 2 "--fault: pause:AT:FOR or restart:AT" fleet --fault stop:1s
expect 2 "--csv and --plot take one row" fleet --instances 1,2 --csv "$dir/f.csv"
expect 0 "" fleet --instances 4 --duration 3s --fault restart:1.5s --csv "$dir/f.csv"
[ "$(wc -l <"$dir/f.csv")" -eq 4 ] || fail "fleet --csv: $(wc -l <"$dir/f.csv") lines, want a header and 3 windows"
a=$("$SIM" fleet --instances 10 --duration 2s --seed 7)
b=$("$SIM" fleet --instances 10 --duration 2s --seed 7)
[ "$a" = "$b" ] || fail "fleet: the same seed gave two runs"

# ---- traces
printf '# t key permits\n0.1 alice\n0.2 bob 2\n\n0.3,alice,1\n' >"$dir/good.txt"
expect 0 "trace $dir/good.txt: 3 requests, 2 keys" --trace "$dir/good.txt" --per-key
printf '0.1 a\n\n0.2x a\n' >"$dir/bad.txt"
expect 1 "$dir/bad.txt:3:1: bad time '0.2x'" --trace "$dir/bad.txt"
printf '0.1 a 1 extra\n' >"$dir/bad2.txt"
expect 1 "$dir/bad2.txt:1:9: too many fields" --trace "$dir/bad2.txt"
expect 1 "No such file" --trace "$dir/none.txt"

# ---- near 2^64 (issue 10, item 10): no wrapped sums, no overflowed bins
printf '0\n18446744073.7\n' >"$dir/far.txt"
expect 0 "wrote $dir/far.csv" --trace "$dir/far.txt" --bin 1000000000s --csv "$dir/far.csv"
[ "$(wc -l <"$dir/far.csv")" -eq 20 ] || fail "far.csv: want 19 bins of 10^18 ns and a header"
for i in $(seq 20); do echo 1; done >"$dir/twenty.txt"
expect 2 "--bin: leaky:mode=shaper needs 20000001 intervals of 50 ns (the run and the shaper's delay" \
	--trace "$dir/twenty.txt" --bin 50ns --algo leaky:mode=shaper
printf '18446744073.709551615\n' >"$dir/end.txt"
offered=$("$SIM" --trace "$dir/end.txt" --algo fixed | awk '$1 == "fixed" { print $2 }')
[ "$offered" = 1 ] || fail "a request at 2^64 - 1 ns: offered '$offered', want 1"
printf '0\n18446744073.709551615\n' >"$dir/all.txt"
expect 1 "$dir/all.txt:1 and line 2: the trace spans every ns from 0 to 2^64 - 1" \
	--trace "$dir/all.txt"
expect 2 "--duration: the run ends before the second burst" \
	--profile boundary --edge 18446744073.709551615

# ---- the same seed, the same run
a=$("$SIM" --profile retry --jitter --seed 5 --duration 5s)
b=$("$SIM" --profile retry --jitter --seed 5 --duration 5s)
c=$("$SIM" --profile retry --jitter --seed 6 --duration 5s)
[ "$a" = "$b" ] || fail "seed 5 twice gave two outputs"
[ "$a" != "$c" ] || fail "seeds 5 and 6 gave the same output"

# ---- CSV
expect 0 "wrote $dir/u.csv" --duration 2s --csv "$dir/u.csv"
head -n 1 "$dir/u.csv" | grep -q '^t_s,bin_start_ns,"offered:fixed","admitted:fixed"' ||
	fail "u.csv header: $(head -n 1 "$dir/u.csv")"
[ "$(wc -l <"$dir/u.csv")" -eq 41 ] || fail "u.csv: want 40 bins of 50 ms and a header"

# ---- plots: gnuplot missing, faked, failing, real
out=$(SLUICE_SIM_GNUPLOT= "$SIM" demo --plot "$dir/d.svg" 2>&1) || fail "demo without gnuplot: exit $?"
grep -qF "gnuplot is not installed" <<<"$out" || fail "demo without gnuplot says nothing:"$'\n'"$out"
[ -s "$dir/d.csv" ] && [ -s "$dir/d.gp" ] || fail "demo without gnuplot: no CSV or script"
[ ! -e "$dir/d.svg" ] || fail "demo without gnuplot: an SVG appeared"

# the picture says what the table says: each panel's title carries the
# algorithm's worst W, and its cumulative line ends at what it admitted
table=$(SLUICE_SIM_GNUPLOT= "$SIM" demo --plot "$dir/d.svg" 2>/dev/null)
i=0
while read -r label offered admitted rejected worst rest; do
	grep -qF "set title '$label: worst 1 s $worst (" "$dir/d.gp" ||
		fail "plot: no panel '$label: worst 1 s $worst' in d.gp"
	last=$(awk -v b="\$adm$i" '$1 == b { on = 1; next } on && $1 == "EOD" { print v; exit }
	                             on { v = $2 }' "$dir/d.gp")
	[ "$last" = "$admitted" ] || fail "plot: $label's cumulative line ends at '$last', the table says $admitted"
	i=$((i + 1))
done < <(sed -n '/^  algorithm /,/^$/p' <<<"$table" | sed '1d;/^$/d')
[ "$i" -eq 8 ] || fail "plot: checked $i panels, the demo has 8"

cat >"$dir/fakegp" <<'FAKE'
#!/bin/sh
# a stand-in gnuplot: write the output the script names
out=$(sed -n "s/^set output '\(.*\)'$/\1/p" "$1")
[ -n "$out" ] || exit 4
echo '<svg>fake</svg>' >"$out"
FAKE
chmod +x "$dir/fakegp"
out=$(SLUICE_SIM_GNUPLOT="$dir/fakegp" "$SIM" demo --plot "$dir/e.svg" 2>&1) || fail "fake gnuplot: exit $?"
grep -qF "wrote $dir/e.svg" <<<"$out" || fail "fake gnuplot: no 'wrote':"$'\n'"$out"
grep -qF "fake" "$dir/e.svg" 2>/dev/null || fail "fake gnuplot did not run"

printf '#!/bin/sh\nexit 3\n' >"$dir/badgp"
chmod +x "$dir/badgp"
out=$(SLUICE_SIM_GNUPLOT="$dir/badgp" "$SIM" demo --plot "$dir/f.svg" 2>&1)
[ $? -eq 1 ] || fail "a failing gnuplot must fail the run"
grep -qF "failed on $dir/f.gp (exit status 3)" <<<"$out" || fail "failing gnuplot:"$'\n'"$out"

if command -v gnuplot >/dev/null 2>&1; then
	out=$(env -u SLUICE_SIM_GNUPLOT "$SIM" demo --plot "$dir/r.svg" 2>&1) || fail "real gnuplot: exit $?"
	grep -q "<svg" "$dir/r.svg" 2>/dev/null || fail "real gnuplot wrote no SVG:"$'\n'"$out"
else
	echo "sim_cli: gnuplot not installed; the real-plot check is skipped"
fi

if [ "$fails" -ne 0 ]; then
	echo "sim_cli: $fails failed"
	exit 1
fi
echo "sim_cli: all passed"
