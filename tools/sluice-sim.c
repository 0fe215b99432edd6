/* SPDX-License-Identifier: MIT */
/*
 * sluice-sim - offer simulated traffic to the real sluice limiters in
 * virtual time and compare what they admit.
 *
 *   sluice-sim [run] [OPTIONS]   one profile, several algorithms, a table
 *   sluice-sim demo [OPTIONS]    the boundary burst against the family
 *   sluice-sim advise ...        buckets for a tolerance, and alternatives
 *   sluice-sim fleet ...         N instances of libsluice-redis on one Redis
 *                                (sim/fleet_cli.c: its own options)
 *
 * This file is the command line only: reading options, filling in the
 * defaults that depend on the policy (L per W), and calling the pieces in
 * tools/sim/ (see sim.h).  Exit status: 0 done, 1 the run failed (a bad
 * trace line, a file that cannot be written), 2 a usage error.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "sluice/version.h"

#define MAX_ALGOS 16
#define ERRLEN 512

enum { EXIT_RUN = 1, EXIT_USAGE = 2 };

static const char *const demo_algos[] = {
	"fixed", "ring:buckets=10", "ring:buckets=100", "gcra", "gcra:burst=1",
	"leaky:mode=shaper", "decay", "log",
};

static void usage(FILE *f)
{
	fprintf(f,
	"usage: sluice-sim [run] [OPTIONS]      simulate, print a table per algorithm\n"
	"       sluice-sim demo [OPTIONS]       the boundary burst against the family\n"
	"       sluice-sim advise --limit L --window W --tolerance T\n"
	"       sluice-sim fleet [OPTIONS]      N instances on one Redis (fleet --help)\n"
	"       sluice-sim -h | --help | --version\n"
	"\n"
	"Offers simulated traffic to the real sluice limiters, driven by a manual clock\n"
	"in virtual time (no sleeping: minutes of traffic take milliseconds), and\n"
	"compares what each admitted against one policy: L permits per window W.\n"
	"\n"
	"Policy and algorithms\n"
	"  --limit L            permits per window (default 100)\n"
	"  --window W           window (default 1s)\n"
	"  --algo SPEC          an algorithm to compare; repeat for several (up to %d).\n"
	"                       SPEC is NAME[:KEY=VALUE,...]; every default comes from\n"
	"                       the policy.  Default: fixed, ring, gcra, log.\n",
	MAX_ALGOS);
	sim_algo_help(f);
	fprintf(f,
	"                       e.g. --algo fixed --algo ring:buckets=10 --algo gcra:burst=5\n"
	"\n"
	"Traffic (virtual time starts at 0; a trace keeps its own times)\n"
	"  --profile NAME       uniform   one request every 1/rate (default rate 2x)\n"
	"                       poisson   exponential gaps, mean 1/rate (default 2x)\n"
	"                       boundary  the attacker: --burst requests just before the\n"
	"                                 window edge and --burst just after it, --gap\n"
	"                                 apart, then knocking at the rate (default 40x;\n"
	"                                 0 for none)\n"
	"                       onoff     the rate (default 4x) for --on, silent for --off\n"
	"                       retry     a client retry storm: poisson (default 1.2x),\n"
	"                                 refused requests retried with backoff\n"
	"                       trace     the requests of --trace FILE\n"
	"  --rate R             requests per second: 200, 200/s, 5/ms, or 2x (times L/W)\n"
	"  --duration D         virtual time to simulate (default 10 W; boundary 3 W)\n"
	"  --seed S             seeds every random draw (default 1): same seed, same run\n"
	"  --permits N          permits per synthetic request (default 1)\n"
	"  --burst B            boundary: requests per burst (default L)\n"
	"  --edge T             boundary: the window edge attacked (default W)\n"
	"  --gap G              boundary: time between the two bursts (default 2ms)\n"
	"  --on D, --off D      onoff: phase lengths (default W/4 on, 3W/4 off)\n"
	"  --retries K          retry a refused request up to K times (any profile;\n"
	"                       retry: default 4, others 0)\n"
	"  --backoff D          retry k waits D x 2^(k-1) (default W/10)\n"
	"  --jitter             ... times a uniform draw in (0, 1] (full jitter)\n"
	"  --honor-retry-after  ... or the decision's retry_after_ns when longer\n"
	"  --trace FILE         one request per line: TIME [KEY [PERMITS]], fields\n"
	"                       separated by blanks, or by commas (CSV).  TIME: a number\n"
	"                       and a unit (ns, us, ms, s, min, h), bare: seconds\n"
	"                       (1700000000.25 or 250ms).  KEY: any token, - for none.\n"
	"                       PERMITS: 1.. (default 1).  # starts a comment.  A bad\n"
	"                       line stops the run with FILE:LINE:COL: and exit 1.\n"
	"                       Lines out of time order are sorted (and counted).\n"
	"  --per-key            trace: one limiter per key (default: one for all)\n"
	"  --max-events N       refuse runs of more requests (default 10000000)\n");
	fprintf(f,
	"\n"
	"Output\n"
	"  A table with one row per algorithm:\n"
	"    offered, admitted, rejected  requests (retries included)\n"
	"    worst W       most permits admitted in any interval of length W, over\n"
	"                  every start (sorted admissions, two pointers), not only\n"
	"                  the aligned windows an algorithm counts\n"
	"    worst short   the same for --short, and x share: that over the limit's\n"
	"                  share of the short interval, L x short / W\n"
	"    over-limit    worst W / L: 1.00 holds the policy, 2.00 lets 2L through\n"
	"  --short D            the short interval (default 50ms)\n"
	"  --csv FILE           per-interval permits offered and admitted, per algorithm\n"
	"  --bin D              the CSV's interval (default: --short)\n"
	"  --plot FILE          FILE.svg or FILE.png: cumulative admitted permits per\n"
	"                       algorithm against L per any W and the worst W, drawn\n"
	"                       by gnuplot when it is installed (else said on stderr;\n"
	"                       exit 0).  Also writes the CSV (FILE.csv\n"
	"                       unless --csv) and the gnuplot script FILE.gp.\n"
	"                       $SLUICE_SIM_GNUPLOT names the gnuplot to run (empty: none).\n");
	fprintf(f,
	"\n"
	"demo\n"
	"  The boundary burst (L = 100 per 1 s, 100 requests at 0.999 s and 100 at\n"
	"  1.001 s, then 4000/s until 3 s) against fixed, ring (N = 10, 100), GCRA\n"
	"  (b = L, b = 1), the leaky shaper, the decayed count and the sliding log.\n"
	"  Writes sluice-sim-demo.svg unless --plot says otherwise.  Takes every\n"
	"  run option; --algo replaces the family.\n"
	"\n"
	"advise --limit L --window W --tolerance T   (T: 2%%, 0.5%%, 0.02)\n"
	"  The ring bounds every N consecutive buckets to L; an interval of W that is\n"
	"  not aligned overlaps one more bucket, so traffic spread evenly sees about\n"
	"  L/N over L (window.h: L (1 + 1/N)).  L/N <= T x L gives\n"
	"      N = ceil(1 / T), raised to the first count <= 4096 dividing W (in ns).\n"
	"  Memory: sluice_window_size() + 8 x (N rounded up to a power of two) bytes.\n"
	"  Adversarial worst case, any N: 2L within W - W/N (window.h).\n"
	"  The exact sliding log (8 (L + 1) bytes + sluice_log_size()) is picked when\n"
	"  L + 1 <= the ring's slots (exact for no more memory) or when no ring fits;\n"
	"  GCRA with burst b = max(1, floor(T x L)) holds L + b in any W, adversarial\n"
	"  included, in one word, for clients that never send more than b at once.\n"
	"  Then it measures the advised ring on Poisson traffic at 1.5x, 3x and 10x\n"
	"  the rate (60 W, seed 1): random overload can pass L/N (docs/sim.md).\n"
	"\n"
	"Exit status: 0 done (also when gnuplot is missing), 1 the run failed (a bad\n"
	"trace line, an unwritable file), 2 a usage error.  See docs/sim.md.\n");
}

struct opts {
	int cmd; /* 0 run, 1 demo, 2 advise */
	uint64_t limit, window;
	int profile_set;
	sim_profile_t profile;
	const char *rate, *duration, *burst, *edge, *gap, *on, *off, *retries, *backoff;
	const char *permits, *shortlen, *bin, *tolerance;
	uint64_t seed;
	int jitter, honor, per_key;
	uint64_t max_events;
	const char *csv, *plot, *trace;
	const char *algos[MAX_ALGOS];
	size_t nalgos;
};

__attribute__((format(printf, 1, 2), noreturn)) static void die_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "sluice-sim: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(sluice-sim --help for the options)\n");
	exit(EXIT_USAGE);
}

static uint64_t need_duration(const char *opt, const char *v)
{
	uint64_t ns = 0;
	const char *e = sim_parse_duration(v, &ns);
	if (e)
		die_usage("%s: %s", opt, e);
	return ns;
}

static uint64_t need_positive_duration(const char *opt, const char *v)
{
	uint64_t ns = need_duration(opt, v);
	if (ns == 0)
		die_usage("%s: must be above 0", opt);
	return ns;
}

static uint64_t need_count(const char *opt, const char *v)
{
	uint64_t n = 0;
	const char *e = sim_parse_count(v, &n);
	if (e)
		die_usage("%s: %s", opt, e);
	return n;
}

enum {
	O_LIMIT = 256, O_WINDOW, O_ALGO, O_PROFILE, O_RATE, O_DURATION, O_SEED, O_PERMITS,
	O_BURST, O_EDGE, O_GAP, O_ON, O_OFF, O_RETRIES, O_BACKOFF, O_JITTER, O_HONOR, O_TRACE,
	O_PERKEY, O_MAXEV, O_SHORT, O_CSV, O_BIN, O_PLOT, O_TOL, O_HELP, O_VERSION,
};

static const struct option longopts[] = {
	{ "limit", required_argument, NULL, O_LIMIT },
	{ "window", required_argument, NULL, O_WINDOW },
	{ "algo", required_argument, NULL, O_ALGO },
	{ "profile", required_argument, NULL, O_PROFILE },
	{ "rate", required_argument, NULL, O_RATE },
	{ "duration", required_argument, NULL, O_DURATION },
	{ "seed", required_argument, NULL, O_SEED },
	{ "permits", required_argument, NULL, O_PERMITS },
	{ "burst", required_argument, NULL, O_BURST },
	{ "edge", required_argument, NULL, O_EDGE },
	{ "gap", required_argument, NULL, O_GAP },
	{ "on", required_argument, NULL, O_ON },
	{ "off", required_argument, NULL, O_OFF },
	{ "retries", required_argument, NULL, O_RETRIES },
	{ "backoff", required_argument, NULL, O_BACKOFF },
	{ "jitter", no_argument, NULL, O_JITTER },
	{ "honor-retry-after", no_argument, NULL, O_HONOR },
	{ "trace", required_argument, NULL, O_TRACE },
	{ "per-key", no_argument, NULL, O_PERKEY },
	{ "max-events", required_argument, NULL, O_MAXEV },
	{ "short", required_argument, NULL, O_SHORT },
	{ "csv", required_argument, NULL, O_CSV },
	{ "bin", required_argument, NULL, O_BIN },
	{ "plot", required_argument, NULL, O_PLOT },
	{ "tolerance", required_argument, NULL, O_TOL },
	{ "help", no_argument, NULL, O_HELP },
	{ "version", no_argument, NULL, O_VERSION },
	{ NULL, 0, NULL, 0 },
};

static void parse_args(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->limit = 100;
	o->window = SIM_SEC;
	o->seed = 1;
	o->max_events = 10000000;
	int first = 1;
	if (argc > 1 && argv[1][0] != '-') {
		if (strcmp(argv[1], "run") == 0)
			o->cmd = 0;
		else if (strcmp(argv[1], "demo") == 0)
			o->cmd = 1;
		else if (strcmp(argv[1], "advise") == 0)
			o->cmd = 2;
		else
			die_usage("unknown command '%s' (run, demo, advise, fleet)", argv[1]);
		first = 2;
	}
	optind = first;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case O_LIMIT:
			o->limit = need_count("--limit", optarg);
			if (o->limit == 0)
				die_usage("--limit: must be above 0");
			break;
		case O_WINDOW: o->window = need_positive_duration("--window", optarg); break;
		case O_ALGO:
			if (o->nalgos == MAX_ALGOS)
				die_usage("--algo: at most %d algorithms", MAX_ALGOS);
			o->algos[o->nalgos++] = optarg;
			break;
		case O_PROFILE:
			if (sim_profile_parse(optarg, &o->profile) != 0)
				die_usage("--profile: unknown profile '%s' (uniform, poisson, boundary, "
				          "onoff, retry, trace)",
				          optarg);
			o->profile_set = 1;
			break;
		case O_RATE: o->rate = optarg; break;
		case O_DURATION: o->duration = optarg; break;
		case O_SEED: o->seed = need_count("--seed", optarg); break;
		case O_PERMITS: o->permits = optarg; break;
		case O_BURST: o->burst = optarg; break;
		case O_EDGE: o->edge = optarg; break;
		case O_GAP: o->gap = optarg; break;
		case O_ON: o->on = optarg; break;
		case O_OFF: o->off = optarg; break;
		case O_RETRIES: o->retries = optarg; break;
		case O_BACKOFF: o->backoff = optarg; break;
		case O_JITTER: o->jitter = 1; break;
		case O_HONOR: o->honor = 1; break;
		case O_TRACE: o->trace = optarg; break;
		case O_PERKEY: o->per_key = 1; break;
		case O_MAXEV:
			o->max_events = need_count("--max-events", optarg);
			if (o->max_events == 0)
				die_usage("--max-events: must be above 0");
			break;
		case O_SHORT: o->shortlen = optarg; break;
		case O_CSV: o->csv = optarg; break;
		case O_BIN: o->bin = optarg; break;
		case O_PLOT: o->plot = optarg; break;
		case O_TOL: o->tolerance = optarg; break;
		case 'h':
		case O_HELP:
			usage(stdout);
			exit(0);
		case O_VERSION:
			/* the library it runs with, and the headers it was built with */
			printf("sluice-sim %s (built with %s)\n", sluice_version_string(),
			       SLUICE_VERSION_STRING);
			exit(0);
		case ':':
			die_usage("%s: needs a value", argv[optind - 1]);
			break;
		default:
			die_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
}

/* An option given for a profile it does not apply to is an error, never
 * silently ignored. */
static void only_for(const char *opt, const char *val, int applies, const char *which)
{
	if (val && !applies)
		die_usage("%s: only for %s", opt, which);
}

static int advise_main(const struct opts *o)
{
	if (!o->tolerance)
		die_usage("advise: --tolerance is required (e.g. 2%%)");
	if (o->nalgos || o->rate || o->duration || o->trace || o->csv || o->plot || o->profile_set)
		die_usage("advise takes --limit, --window and --tolerance only");
	uint64_t num, den;
	const char *e = sim_parse_ratio(o->tolerance, &num, &den);
	if (e)
		die_usage("--tolerance: %s", e);
	sim_advice_t a;
	char err[ERRLEN];
	if (sim_advise(o->limit, o->window, num, den, &a, err, sizeof(err)) != 0) {
		fprintf(stderr, "sluice-sim: %s\n", err);
		return EXIT_USAGE;
	}
	sim_advice_print(stdout, &a, 1);
	return 0;
}

static void rate_text(const sim_traffic_config_t *t, char *buf, size_t len)
{
	if (t->rate_den == 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.6g/s", (double)t->rate_num * 1e9 / (double)t->rate_den);
}

int sim_fleet_main(int argc, char **argv); /* sim/fleet_cli.c */

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "fleet") == 0)
		return sim_fleet_main(argc - 1, argv + 1);
	struct opts o;
	parse_args(argc, argv, &o);
	if (o.cmd == 2)
		return advise_main(&o);
	if (o.tolerance)
		die_usage("--tolerance belongs to advise");

	int family = 0; /* the demo's own table, which its closing text describes */
	if (o.cmd == 1) { /* demo: a preset the options may override */
		if (!o.profile_set && !o.trace) {
			o.profile = SIM_BOUNDARY;
			o.profile_set = 1;
		}
		if (!o.nalgos) {
			for (size_t i = 0; i < sizeof(demo_algos) / sizeof(demo_algos[0]); i++)
				o.algos[o.nalgos++] = demo_algos[i];
			family = o.profile == SIM_BOUNDARY;
		}
		if (!o.plot)
			o.plot = "sluice-sim-demo.svg";
	}
	if (o.trace && !o.profile_set) {
		o.profile = SIM_TRACE;
		o.profile_set = 1;
	}
	if (o.profile == SIM_TRACE && !o.trace)
		die_usage("--profile trace needs --trace FILE");
	if (o.trace && o.profile != SIM_TRACE)
		die_usage("--trace FILE and --profile %s: choose one", sim_profile_name(o.profile));
	sim_profile_t p = o.profile;
	only_for("--burst", o.burst, p == SIM_BOUNDARY, "--profile boundary");
	only_for("--edge", o.edge, p == SIM_BOUNDARY, "--profile boundary");
	only_for("--gap", o.gap, p == SIM_BOUNDARY, "--profile boundary");
	only_for("--on", o.on, p == SIM_ONOFF, "--profile onoff");
	only_for("--off", o.off, p == SIM_ONOFF, "--profile onoff");
	only_for("--rate", o.rate, p != SIM_TRACE, "synthetic profiles, not a trace");
	only_for("--duration", o.duration, p != SIM_TRACE,
	         "synthetic profiles (a trace lasts as long as it lasts)");
	only_for("--permits", o.permits, p != SIM_TRACE, "synthetic profiles (a trace says)");
	only_for("--per-key", o.per_key ? "" : NULL, p == SIM_TRACE,
	         "a trace (synthetic traffic has no keys)");
	if (!o.retries && (o.backoff || o.jitter || o.honor) && p != SIM_RETRY)
		die_usage("--backoff, --jitter and --honor-retry-after need --retries");

	char err[ERRLEN];
	const char *e;
	sim_run_config_t rc = { 0 };
	sim_traffic_config_t *tc = &rc.traffic;
	tc->profile = p;
	tc->seed = o.seed;
	tc->permits = 1;
	if (o.permits) {
		uint64_t n = need_count("--permits", o.permits);
		if (n == 0 || n > UINT32_MAX)
			die_usage("--permits: must be 1..4294967295");
		tc->permits = (uint32_t)n;
	}

	sim_algo_t algos[MAX_ALGOS];
	static const char *const default_algos[] = { "fixed", "ring", "gcra", "log" };
	if (!o.nalgos)
		for (size_t i = 0; i < 4; i++)
			o.algos[o.nalgos++] = default_algos[i];
	for (size_t i = 0; i < o.nalgos; i++) {
		if (sim_algo_parse(o.algos[i], o.limit, o.window, &algos[i], err, sizeof(err)) != 0)
			die_usage("--%s", err);
	}

	const char *rate = o.rate;
	if (!rate)
		rate = p == SIM_BOUNDARY ? "40x" : p == SIM_ONOFF ? "4x" : p == SIM_RETRY ? "1.2x" : "2x";
	if (p != SIM_TRACE) {
		e = sim_parse_rate(rate, o.limit, o.window, &tc->rate_num, &tc->rate_den);
		if (e)
			die_usage("--rate: %s", e);
		if (tc->rate_num == 0 && p != SIM_BOUNDARY)
			die_usage("--rate: must be above 0 (boundary alone takes 0: no knocking)");
		tc->duration_ns = o.duration ? need_positive_duration("--duration", o.duration)
		                             : (p == SIM_BOUNDARY ? 3 : 10) * o.window;
	}

	if (p == SIM_BOUNDARY) {
		tc->burst = o.burst ? need_count("--burst", o.burst) : o.limit;
		tc->edge_ns = o.edge ? need_duration("--edge", o.edge) : o.window;
		tc->gap_ns = o.gap ? need_duration("--gap", o.gap) : 2 * SIM_MS;
	}
	if (p == SIM_ONOFF) {
		tc->on_ns = o.on ? need_positive_duration("--on", o.on) : o.window / 4;
		tc->off_ns = o.off ? need_duration("--off", o.off) : o.window - o.window / 4;
		if (tc->on_ns == 0)
			die_usage("--on: the window is too short for the default (W/4 = 0)");
	}
	/* the synthetic profile's own consistency (the boundary's bursts
	 * inside the run, in 128 bits: an --edge near 2^64 must not wrap) */
	if (p != SIM_TRACE && sim_traffic_check(tc, err, sizeof(err)) != 0)
		die_usage("%s", err);
	rc.retries = p == SIM_RETRY ? 4 : 0;
	if (o.retries) {
		uint64_t k = need_count("--retries", o.retries);
		if (k > 64)
			die_usage("--retries: at most 64");
		rc.retries = (uint32_t)k;
	}
	rc.backoff_ns = o.backoff ? need_positive_duration("--backoff", o.backoff) : o.window / 10;
	if (rc.backoff_ns == 0)
		rc.backoff_ns = 1;
	rc.jitter = o.jitter;
	rc.honor_retry_after = o.honor;
	rc.per_key = o.per_key;
	rc.max_events = o.max_events;
	uint64_t short_ns = o.shortlen ? need_positive_duration("--short", o.shortlen) : 50 * SIM_MS;
	rc.bin_ns = o.bin ? need_positive_duration("--bin", o.bin) : short_ns;
	if (o.plot) {
		size_t n = strlen(o.plot);
		if (n < 5 || (strcmp(o.plot + n - 4, ".svg") != 0 && strcmp(o.plot + n - 4, ".png") != 0))
			die_usage("--plot %s: the file must end in .svg or .png", o.plot);
	}

	/* the last check needs the trace's span: nothing may exit after the
	 * load without freeing it */
	sim_trace_t trace = { 0 };
	char d0[32];
	if (p == SIM_TRACE) {
		if (sim_trace_load(o.trace, &trace, err, sizeof(err)) != 0) {
			fprintf(stderr, "sluice-sim: %s\n", err);
			return EXIT_RUN;
		}
		if (trace.unsorted)
			fprintf(stderr, "sluice-sim: %s: %zu lines went back in time; requests sorted by time\n",
			        o.trace, trace.unsorted);
		tc->trace = &trace;
		if (sim_trace_span(&trace, o.trace, &tc->start_ns, &tc->duration_ns, err,
		                   sizeof(err)) != 0) {
			fprintf(stderr, "sluice-sim: %s\n", err);
			sim_trace_free(&trace);
			return EXIT_RUN;
		}
	}
	rc.max_bins = SIM_MAX_BINS;
	for (size_t i = 0; i < o.nalgos; i++) {
		/* the same bound sim_run applies, checked for every algorithm
		 * before any runs: a usage error, not a run that fails halfway */
		uint64_t nb = sim_run_bins(&rc, &algos[i]);
		if (nb > rc.max_bins) {
			sim_trace_free(&trace);
			die_usage("--bin: %s needs %llu intervals of %s%s, more than 10^7; use a wider "
			          "--bin",
			          algos[i].label, (unsigned long long)nb,
			          sim_format_duration(rc.bin_ns, d0, sizeof(d0)),
			          sim_algo_late_ns(&algos[i]) ? " (the run and the shaper's delay after it)"
			                                      : "");
		}
	}

	/* the title line */
	char title[1024], r1[64], d1[32], d2[32], d3[32];
	rate_text(tc, r1, sizeof(r1));
	size_t off = 0;
	switch (p) {
	case SIM_UNIFORM:
		off = (size_t)snprintf(title, sizeof(title), "uniform, %s", r1);
		break;
	case SIM_POISSON:
	case SIM_RETRY:
		off = (size_t)snprintf(title, sizeof(title), "%s, mean %s",
		                       p == SIM_RETRY ? "retry storm: poisson" : "poisson", r1);
		break;
	case SIM_BOUNDARY:
		off = (size_t)snprintf(title, sizeof(title),
		                       "boundary burst: %llu at %s and %llu at %s, then %s",
		                       (unsigned long long)tc->burst,
		                       sim_format_duration(tc->edge_ns - tc->gap_ns / 2, d1, sizeof(d1)),
		                       (unsigned long long)tc->burst,
		                       sim_format_duration(tc->edge_ns - tc->gap_ns / 2 + tc->gap_ns, d2,
		                                           sizeof(d2)),
		                       tc->rate_num ? r1 : "nothing");
		break;
	case SIM_ONOFF:
		off = (size_t)snprintf(title, sizeof(title), "on/off: %s for %s, silent for %s", r1,
		                       sim_format_duration(tc->on_ns, d1, sizeof(d1)),
		                       sim_format_duration(tc->off_ns, d2, sizeof(d2)));
		break;
	case SIM_TRACE:
		off = (size_t)snprintf(title, sizeof(title), "trace %s: %zu requests, %zu keys", o.trace,
		                       trace.n, trace.nkeys - 1);
		break;
	}
	if (tc->permits > 1 && off < sizeof(title))
		off += (size_t)snprintf(title + off, sizeof(title) - off, ", %u permits each",
		                        tc->permits);
	if (rc.retries && off < sizeof(title))
		off += (size_t)snprintf(title + off, sizeof(title) - off,
		                        "; refused requests retried up to %u times, backoff %s doubling%s%s",
		                        rc.retries, sim_format_duration(rc.backoff_ns, d3, sizeof(d3)),
		                        rc.jitter ? ", full jitter" : "",
		                        rc.honor_retry_after ? ", honoring retry_after" : "");
	if (off < sizeof(title) && p == SIM_TRACE)
		snprintf(title + off, sizeof(title) - off, "; spans %s from %s%s",
		         sim_format_duration(tc->duration_ns - 1, d1, sizeof(d1)),
		         sim_format_duration(tc->start_ns, d2, sizeof(d2)),
		         rc.jitter ? (snprintf(d3, sizeof(d3), ", seed %llu", (unsigned long long)o.seed), d3)
		                   : "");
	else if (off < sizeof(title))
		snprintf(title + off, sizeof(title) - off, "; %s of virtual time, seed %llu",
		         sim_format_duration(tc->duration_ns, d1, sizeof(d1)),
		         (unsigned long long)o.seed);
	char full_title[1100];
	snprintf(full_title, sizeof(full_title), "sluice-sim: %s", title);

	/* run every algorithm on the same traffic */
	sim_result_t results[MAX_ALGOS];
	sim_worst_t worst_w[MAX_ALGOS], worst_s[MAX_ALGOS];
	int status = 0;
	size_t done = 0;
	for (; done < o.nalgos; done++) {
		if (sim_run(&rc, &algos[done], &results[done], err, sizeof(err)) != 0) {
			fprintf(stderr, "sluice-sim: %s: %s\n", algos[done].label, err);
			status = EXIT_RUN;
			break;
		}
		sim_result_t *r = &results[done];
		sim_sort_events(r->adm, r->nadm);
		worst_w[done] = sim_worst_in(r->adm, r->nadm, o.window);
		worst_s[done] = sim_worst_in(r->adm, r->nadm, short_ns);
	}
	if (status == 0) {
		sim_report_t rep = {
			.title = full_title, .limit = o.limit, .window_ns = o.window,
			.short_ns = short_ns, .bin_ns = rc.bin_ns, .start_ns = tc->start_ns,
			.duration_ns = tc->duration_ns,
			.nalgo = o.nalgos, .algos = algos, .results = results,
			.worst_w = worst_w, .worst_s = worst_s,
		};
		sim_print_table(stdout, &rep);
		if (family)
			printf("\n  The fixed window lets 2L through across its edge.  The ring holds every\n"
			       "  run of N buckets to L, yet an interval of W that is not aligned still\n"
			       "  sees 2L when the attacker comes back W - W/N later.  GCRA passes its\n"
			       "  burst b and then the rate (b + L in any W; b = 1 paces it); the shaper\n"
			       "  queues instead of refusing and releases one request every W/L.  The\n"
			       "  decayed count (h = W ln 2) allows L at once, then L per W.  Only the\n"
			       "  sliding log holds every interval of W to L.\n");
		char csvbuf[4096];
		const char *csv = o.csv;
		if (!csv && o.plot) {
			snprintf(csvbuf, sizeof(csvbuf), "%.*s.csv", (int)(strlen(o.plot) - 4), o.plot);
			csv = csvbuf;
		}
		if (csv || o.plot)
			printf("\n");
		fflush(stdout); /* the table before any message on stderr */
		if (csv) {
			if (sim_write_csv(csv, &rep, err, sizeof(err)) != 0) {
				fprintf(stderr, "sluice-sim: %s\n", err);
				status = EXIT_RUN;
			} else {
				printf("  wrote %s (permits offered and admitted per %s, per algorithm)\n",
				       csv, sim_format_duration(rc.bin_ns, d1, sizeof(d1)));
				fflush(stdout);
			}
		}
		if (o.plot && status == 0) {
			fflush(stdout);
			switch (sim_plot(csv, o.plot, &rep, err, sizeof(err))) {
			case SIM_PLOT_DONE:
				printf("  wrote %s (cumulative admitted against the limit, per algorithm, drawn by\n"
				       "  gnuplot; script %.*s.gp)\n",
				       o.plot, (int)(strlen(o.plot) - 4), o.plot);
				break;
			case SIM_PLOT_NO_GNUPLOT:
				fprintf(stderr,
				        "sluice-sim: gnuplot is not installed, so %s was NOT drawn; the data is\n"
				        "in %s and the script in %.*s.gp (install gnuplot-nox and run\n"
				        "`gnuplot %.*s.gp`, or rerun this command)\n",
				        o.plot, csv, (int)(strlen(o.plot) - 4), o.plot,
				        (int)(strlen(o.plot) - 4), o.plot);
				break;
			case SIM_PLOT_FAILED:
				fprintf(stderr, "sluice-sim: plot: %s\n", err);
				status = EXIT_RUN;
				break;
			}
		}
	}
	for (size_t i = 0; i < done; i++)
		sim_result_free(&results[i]);
	sim_trace_free(&trace);
	return status;
}
