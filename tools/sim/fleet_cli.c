/* SPDX-License-Identifier: MIT */
/*
 * fleet_cli.c - `sluice-sim fleet`: the command line of the fleet
 * simulation (fleet.h), a table row per (instances, lease_max) of the
 * lists given, and for a single row the per-window CSV and its gnuplot
 * script.  Exit status as sluice-sim's: 0, 1 the run failed, 2 usage.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "sim.h"

#define MAX_LIST 16

static void usage(FILE *f)
{
	fprintf(f,
	"usage: sluice-sim fleet [OPTIONS]\n"
	"\n"
	"N instances of libsluice-redis share one fixed window of L per W on one Redis;\n"
	"simulated in virtual time with the library's own lease policy (fleet.h).\n"
	"\n"
	"  --instances LIST   instances, a comma list (default 1,10,100,1000; each 1..1000)\n"
	"  --lease-max LIST   lease_max B, a comma list (default 16)\n"
	"  --limit L          permits per window, the whole fleet's (default 10000)\n"
	"  --window W         the window (default 1s)\n"
	"  --rate R           offered requests per second, the whole fleet's: 20000, 5/ms,\n"
	"                     or 1.5x (times L / W; the default)\n"
	"  --skew S           instance i offers a share ~ 1 / (i + 1)^S (default 0: equal)\n"
	"  --rtt P50:P99      the round trip's lognormal (default 250us:1ms)\n"
	"  --service D        Redis's time per call: its capacity is 1 / D (default 10us)\n"
	"  --budget D         a decision's wait for Redis, then LOCAL (default 1ms)\n"
	"  --duration D       virtual time (default 20 windows)\n"
	"  --seed S           every random draw (default 1)\n"
	"  --fault F          pause:AT:FOR (Redis serves nothing for FOR from AT) or\n"
	"                     restart:AT (Redis forgets every count at AT)\n"
	"  --csv FILE         one row: window,admitted,limit per window\n"
	"  --plot FILE        one row: a gnuplot script drawing the CSV (needs --csv)\n");
}

__attribute__((format(printf, 1, 2), noreturn)) static void die_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "sluice-sim fleet: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(sluice-sim fleet --help for the options)\n");
	exit(2);
}

static uint64_t duration(const char *opt, const char *v)
{
	uint64_t ns = 0;
	const char *e = sim_parse_duration(v, &ns);
	if (e)
		die_usage("%s: %s", opt, e);
	return ns;
}

static uint64_t count(const char *opt, const char *v)
{
	uint64_t n = 0;
	const char *e = sim_parse_count(v, &n);
	if (e)
		die_usage("%s: %s", opt, e);
	return n;
}

/* "1,10,100" into @out; the number of entries */
static size_t list(const char *opt, const char *v, uint64_t *out)
{
	char buf[256];
	if (strlen(v) >= sizeof(buf))
		die_usage("%s: too long", opt);
	strcpy(buf, v);
	size_t n = 0;
	for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (n == MAX_LIST)
			die_usage("%s: at most %d entries", opt, MAX_LIST);
		out[n++] = count(opt, p);
	}
	if (n == 0)
		die_usage("%s: an empty list", opt);
	return n;
}

static void split2(const char *opt, const char *v, uint64_t *a, uint64_t *b)
{
	const char *colon = strchr(v, ':');
	if (!colon)
		die_usage("%s: expected A:B, found '%s'", opt, v);
	char first[64];
	size_t n = (size_t)(colon - v);
	if (n >= sizeof(first))
		die_usage("%s: too long", opt);
	memcpy(first, v, n);
	first[n] = 0;
	*a = duration(opt, first);
	*b = duration(opt, colon + 1);
}

static void fault(const char *v, sim_fleet_config_t *c)
{
	if (strncmp(v, "pause:", 6) == 0) {
		c->fault = SIM_FLEET_PAUSE;
		split2("--fault pause", v + 6, &c->fault_at_ns, &c->fault_for_ns);
	} else if (strncmp(v, "restart:", 8) == 0) {
		c->fault = SIM_FLEET_RESTART;
		c->fault_at_ns = duration("--fault restart", v + 8);
	} else {
		die_usage("--fault: pause:AT:FOR or restart:AT, found '%s'", v);
	}
}

static const char *dur(uint64_t ns, char *b, size_t n)
{
	return sim_format_duration(ns, b, n);
}

int sim_fleet_main(int argc, char **argv);

int sim_fleet_main(int argc, char **argv)
{
	enum { O_INST = 256, O_B, O_LIMIT, O_WINDOW, O_RATE, O_SKEW, O_RTT, O_SERVICE, O_BUDGET,
	       O_DURATION, O_SEED, O_FAULT, O_CSV, O_PLOT, O_HELP };
	static const struct option opts[] = {
		{ "instances", required_argument, NULL, O_INST },
		{ "lease-max", required_argument, NULL, O_B },
		{ "limit", required_argument, NULL, O_LIMIT },
		{ "window", required_argument, NULL, O_WINDOW },
		{ "rate", required_argument, NULL, O_RATE },
		{ "skew", required_argument, NULL, O_SKEW },
		{ "rtt", required_argument, NULL, O_RTT },
		{ "service", required_argument, NULL, O_SERVICE },
		{ "budget", required_argument, NULL, O_BUDGET },
		{ "duration", required_argument, NULL, O_DURATION },
		{ "seed", required_argument, NULL, O_SEED },
		{ "fault", required_argument, NULL, O_FAULT },
		{ "csv", required_argument, NULL, O_CSV },
		{ "plot", required_argument, NULL, O_PLOT },
		{ "help", no_argument, NULL, O_HELP },
		{ 0, 0, 0, 0 },
	};
	uint64_t ns[MAX_LIST] = { 1, 10, 100, 1000 }, bs[MAX_LIST] = { 16 };
	size_t nn = 4, nb = 1;
	sim_fleet_config_t c = { .limit = 10000, .window_ns = SIM_SEC, .budget_ns = SIM_MS,
		                 .rtt_p50_ns = 250 * SIM_US, .rtt_p99_ns = SIM_MS,
		                 .service_ns = 10 * SIM_US, .seed = 1 };
	const char *rate = "1.5x", *csv = NULL, *plot = NULL, *dur_s = NULL;
	int ch;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case O_INST: nn = list("--instances", optarg, ns); break;
		case O_B: nb = list("--lease-max", optarg, bs); break;
		case O_LIMIT: c.limit = count("--limit", optarg); break;
		case O_WINDOW: c.window_ns = duration("--window", optarg); break;
		case O_RATE: rate = optarg; break;
		case O_SKEW: {
			char *end;
			c.skew = strtod(optarg, &end);
			if (end == optarg || *end)
				die_usage("--skew: not a number: '%s'", optarg);
			break;
		}
		case O_RTT: split2("--rtt", optarg, &c.rtt_p50_ns, &c.rtt_p99_ns); break;
		case O_SERVICE: c.service_ns = duration("--service", optarg); break;
		case O_BUDGET: c.budget_ns = duration("--budget", optarg); break;
		case O_DURATION: dur_s = optarg; break;
		case O_SEED: c.seed = count("--seed", optarg); break;
		case O_FAULT: fault(optarg, &c); break;
		case O_CSV: csv = optarg; break;
		case O_PLOT: plot = optarg; break;
		case 'h':
		case O_HELP: usage(stdout); return 0;
		default: die_usage("unknown option");
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (c.window_ns == 0)
		die_usage("--window: must be above 0");
	uint64_t num, den;
	const char *e = sim_parse_rate(rate, c.limit, c.window_ns, &num, &den);
	if (e)
		die_usage("--rate: %s", e);
	c.rate = (double)num * 1e9 / (double)den;
	c.duration_ns = dur_s ? duration("--duration", dur_s) : 20 * c.window_ns;
	if ((csv || plot) && nn * nb != 1)
		die_usage("--csv and --plot take one row: one --instances and one --lease-max");
	if (plot && !csv)
		die_usage("--plot draws the --csv file: give both");
	char b1[32], b2[32], b3[32];
	printf("fleet: L %llu per %s, offered %.0f/s, RTT p50 %s p99 %s, Redis %s per call, "
	       "budget %s, %s of virtual time, seed %llu\n\n",
	       (unsigned long long)c.limit, dur(c.window_ns, b1, sizeof(b1)), c.rate,
	       dur(c.rtt_p50_ns, b2, sizeof(b2)), dur(c.rtt_p99_ns, b3, sizeof(b3)),
	       dur(c.service_ns, (char[32]){ 0 }, 32), dur(c.budget_ns, (char[32]){ 0 }, 32),
	       dur(c.duration_ns, (char[32]){ 0 }, 32), (unsigned long long)c.seed);
	printf("| instances | lease_max | admitted per window | worst over | worst under | "
	       "N x B | round trips/s | per decision | p50 | p99 | worst instance p99 | "
	       "fallback admits |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	int bad = 0;
	for (size_t i = 0; i < nn; i++)
		for (size_t j = 0; j < nb; j++) {
			c.instances = ns[i] > SIM_FLEET_MAX ? 0 : (uint32_t)ns[i];
			c.lease_max = bs[j];
			char err[256];
			if (sim_fleet_check(&c, err, sizeof(err)) != 0)
				die_usage("%s", err);
			FILE *f = csv ? fopen(csv, "w") : NULL;
			if (csv && !f) {
				fprintf(stderr, "sluice-sim fleet: cannot write %s\n", csv);
				return 1;
			}
			if (f)
				fprintf(f, "window,admitted,limit\n");
			sim_fleet_result_t r;
			int rc = sim_fleet_run(&c, &r, f, err, sizeof(err));
			if (f && fclose(f) != 0)
				rc = -1;
			if (rc != 0) {
				fprintf(stderr, "sluice-sim fleet: %s\n", err);
				bad = 1;
				continue;
			}
			double secs = (double)c.duration_ns / 1e9;
			char p50[32], p99[32], wp[32];
			printf("| %u | %llu | %.0f | %llu | %llu | %llu | %.0f | %.4f | %s | %s | %s | "
			       "%llu |\n",
			       c.instances, (unsigned long long)c.lease_max, r.mean_admitted,
			       (unsigned long long)r.worst_over, (unsigned long long)r.worst_under,
			       (unsigned long long)(c.instances * c.lease_max),
			       (double)r.round_trips / secs,
			       r.decisions ? (double)r.round_trips / (double)r.decisions : 0.0,
			       dur(r.p50_ns, p50, sizeof(p50)), dur(r.p99_ns, p99, sizeof(p99)),
			       dur(r.worst_p99_ns, wp, sizeof(wp)),
			       (unsigned long long)r.fallback_admits);
		}
	if (plot && !bad) {
		FILE *p = fopen(plot, "w");
		if (!p) {
			fprintf(stderr, "sluice-sim fleet: cannot write %s\n", plot);
			return 1;
		}
		fprintf(p,
		        "# gnuplot %s: admitted per window against the limit\n"
		        "set datafile separator ','\nset key top left\n"
		        "set xlabel 'window'\nset ylabel 'permits admitted'\n"
		        "set terminal pngcairo size 900,500\nset output '%s.png'\n"
		        "plot '%s' every ::1 using 1:2 with steps title 'admitted (%u instances, B %llu)', "
		        "'' every ::1 using 1:3 with lines dashtype 2 title 'limit'\n",
		        plot, plot, csv, c.instances, (unsigned long long)c.lease_max);
		if (fclose(p) != 0)
			return 1;
	}
	return bad;
}
