/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - what every sluice benchmark shares: the command line
 * (--quick, --repeats=N, --seconds=S and, where a program runs threads,
 * --threads=1,2,4), the median of repeated runs and the CPU model.
 */
#ifndef SLUICE_BENCH_COMMON_H
#define SLUICE_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_MAX_THREADS 256 /* threads per run */
#define BENCH_MAX_COUNTS 16   /* thread counts per --threads list */

struct bench_opts {
	unsigned repeats; /* timed runs per case; the median is reported */
	double seconds;   /* length of one timed run */
	int nthreads;     /* entries of threads[]: 0 until --threads= or a default */
	int threads[BENCH_MAX_COUNTS]; /* thread counts, in the order given */
};

/*
 * bench_parse_threads - a --threads list ("1,2,4,8": up to BENCH_MAX_COUNTS
 * counts, each 1..BENCH_MAX_THREADS) into @o.
 * Return: 0, or -1 (o->nthreads -1) for an empty list, a count out of range,
 * anything but counts and commas, or more than BENCH_MAX_COUNTS counts.
 */
static inline int bench_parse_threads(const char *list, struct bench_opts *o)
{
	int n = 0;
	for (const char *p = list;;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p || v < 1 || v > BENCH_MAX_THREADS || n == BENCH_MAX_COUNTS ||
		    (*end && *end != ','))
			return o->nthreads = -1;
		o->threads[n++] = (int)v;
		if (!*end)
			break;
		p = end + 1; /* past the comma: a count must follow */
	}
	o->nthreads = n;
	return 0;
}

/*
 * bench_parse_opt - one argument, if it is a shared option: --quick (runs
 * of @quick_repeats x @quick_seconds: each program's own short demo),
 * --repeats=N, --seconds=S and, where @threads is set, --threads=LIST.
 * Return: 1 taken, 0 not a shared option, -1 a malformed --threads list.
 */
static inline int bench_parse_opt(const char *arg, struct bench_opts *o, unsigned quick_repeats,
                                  double quick_seconds, int threads)
{
	if (strcmp(arg, "--quick") == 0) {
		o->repeats = quick_repeats;
		o->seconds = quick_seconds;
	} else if (strncmp(arg, "--repeats=", 10) == 0) {
		o->repeats = (unsigned)strtoul(arg + 10, NULL, 10);
	} else if (strncmp(arg, "--seconds=", 10) == 0) {
		o->seconds = strtod(arg + 10, NULL);
	} else if (threads && strncmp(arg, "--threads=", 10) == 0) {
		return bench_parse_threads(arg + 10, o) ? -1 : 1;
	} else {
		return 0;
	}
	return 1;
}

/*
 * bench_threads_finish - after the options: with no --threads, 1 and 2,
 * and @ncpu too (at most BENCH_MAX_THREADS) when @with_ncpu and it is
 * above 2; then the check every program makes (scaling is relative to the
 * first count, so it is 1).
 * Return: 0, or 2 (exit code) after saying why.
 */
static inline int bench_threads_finish(struct bench_opts *o, const char *name, int with_ncpu,
                                       int ncpu)
{
	if (o->nthreads == 0) {
		o->threads[o->nthreads++] = 1;
		o->threads[o->nthreads++] = 2;
		if (with_ncpu && ncpu > 2)
			o->threads[o->nthreads++] = ncpu < BENCH_MAX_THREADS ? ncpu : BENCH_MAX_THREADS;
	}
	if (o->threads[0] != 1) {
		fprintf(stderr, "%s: the thread list must start with 1 (scaling is relative to it)\n",
		        name);
		return 2;
	}
	return 0;
}

/* The largest count of the list (what a program allocates for). */
static inline int bench_threads_max(const struct bench_opts *o)
{
	int m = 1;
	for (int i = 0; i < o->nthreads; i++)
		m = o->threads[i] > m ? o->threads[i] : m;
	return m;
}

/* The list as the bench_env line prints it ("1,2,4"). */
static inline void bench_print_threads(const struct bench_opts *o)
{
	for (int i = 0; i < o->nthreads; i++)
		printf("%s%d", i ? "," : "", o->threads[i]);
}

/* The whole command line: the shared options only, --threads where @threads. */
static inline int bench_parse_args_with(int argc, char **argv, const char *name,
                                        struct bench_opts *o, int threads)
{
	o->repeats = 7;
	o->seconds = 0.3;
	o->nthreads = 0;
	for (int i = 1; i < argc; i++) {
		if (bench_parse_opt(argv[i], o, 3, 0.1, threads) != 1) {
			fprintf(stderr, "usage: %s [--quick] [--repeats=N] [--seconds=S]%s\n", argv[0],
			        threads ? " [--threads=1,2,4]" : "");
			return 2;
		}
	}
	if (o->repeats < 1 || !(o->seconds > 0)) {
		fprintf(stderr, "%s: need --repeats >= 1 and --seconds > 0\n", name);
		return 2;
	}
	return threads ? bench_threads_finish(o, name, 0, 0) : 0;
}

/* Parse the shared options (7 runs of 0.3 s; --quick: 3 of 0.1 s); returns
 * 0, or 2 (exit code) after printing usage. */
static inline int bench_parse_args(int argc, char **argv, const char *name,
                                   struct bench_opts *o)
{
	return bench_parse_args_with(argc, argv, name, o, 0);
}

/* The same with --threads=LIST too (default 1,2). */
static inline int bench_parse_args_threads(int argc, char **argv, const char *name,
                                           struct bench_opts *o)
{
	return bench_parse_args_with(argc, argv, name, o, 1);
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median of v[0..n); sorts v, so v[0] and v[n-1] are then min and max. */
static inline double bench_median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * bench_cpu_model - the first "model name" of /proc/cpuinfo into @out
 * ("unknown" where there is none), with double quotes turned to single
 * ones so that it fits a key="value" field.  Every benchmark prints it, so
 * a pasted figure names its machine.
 */
static inline void bench_cpu_model(char *out, size_t len)
{
	snprintf(out, len, "unknown");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "model name", 10) != 0)
			continue;
		char *v = strchr(line, ':');
		if (!v)
			break;
		v++;
		while (*v == ' ' || *v == '\t')
			v++;
		v[strcspn(v, "\n")] = 0;
		for (char *c = v; *c; c++)
			if (*c == '"')
				*c = '\'';
		snprintf(out, len, "%s", v);
		break;
	}
	fclose(f);
}

#endif /* SLUICE_BENCH_COMMON_H */
