/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - what every sluice benchmark shares: the command line
 * (--quick, --repeats=N, --seconds=S) and the median of repeated runs.
 */
#ifndef SLUICE_BENCH_COMMON_H
#define SLUICE_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bench_opts {
	unsigned repeats; /* timed runs per case; the median is reported */
	double seconds;   /* length of one timed run */
};

/* Parse the shared options; returns 0, or 2 (exit code) after printing usage. */
static inline int bench_parse_args(int argc, char **argv, const char *name,
                                   struct bench_opts *o)
{
	o->repeats = 7;
	o->seconds = 0.3;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			o->repeats = 3;
			o->seconds = 0.1;
		} else if (strncmp(argv[i], "--repeats=", 10) == 0) {
			o->repeats = (unsigned)strtoul(argv[i] + 10, NULL, 10);
		} else if (strncmp(argv[i], "--seconds=", 10) == 0) {
			o->seconds = strtod(argv[i] + 10, NULL);
		} else {
			fprintf(stderr, "usage: %s [--quick] [--repeats=N] [--seconds=S]\n", argv[0]);
			return 2;
		}
	}
	if (o->repeats < 1 || !(o->seconds > 0)) {
		fprintf(stderr, "%s: need --repeats >= 1 and --seconds > 0\n", name);
		return 2;
	}
	return 0;
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
