/* SPDX-License-Identifier: MIT */
/*
 * stress_harness.c - options, clocks, worker threads, merging and the result
 * line for the stress programs (the interface is in stress_common.h).
 *
 * DESIGN: the workers share nothing but the limiter and a deadline written
 * before they start (pthread_create orders it).  Each owns its counters and
 * record buffers; the main thread reads them only after pthread_join, which
 * orders every write a worker made before it.  Workers stop themselves at
 * the deadline instead of waiting for a flag from a sleeping main thread:
 * with more threads than cores the main thread may be scheduled late, and
 * a run must not overstay its --seconds.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stress_common.h"

/* The most records one stream of one worker may hold: 2^26 x 16 bytes
 * (1 GiB, allocated lazily by the kernel as it is written). */
#define STRESS_CAP_MAX (1u << 26)

static uint64_t deadline_ns;
static uint64_t pause_us, pause_every; /* copied from the options before start */

_Noreturn void stress_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("stress: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(STRESS_EXIT_USAGE);
}

void stress_check_init(const char *what, int rc)
{
	if (rc < 0)
		stress_die("%s: %s (%s)", what, sluice_strerror(rc), sluice_err_name(rc));
}

int stress_u64_opts(const struct stress_u64_opt *table, const char *key, const char *v)
{
	for (; table->key; table++)
		if (strcmp(table->key, key) == 0)
			return stress_u64(v, table->val);
	return -1;
}

int stress_u64(const char *v, uint64_t *out)
{
	char *end;
	if (*v < '0' || *v > '9')
		return -1; /* strtoull would take "-1" as 2^64 - 1 */
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno || *end)
		return -1;
	*out = x;
	return 0;
}

int stress_f64(const char *v, double *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || *end || end == v || !(x == x))
		return -1;
	*out = x;
	return 0;
}

static const char common_usage[] =
	"every program also takes [--pause-us=G] [--pause-every=K]: sleep 0..2G us after\n"
	"one decision in K (default 8) to spread the load (default: saturate)\n";

void stress_parse(int argc, char **argv, struct stress_opts *o, const char *usage,
                  int (*opt)(const char *key, const char *val))
{
	o->clock_name = "cached";
	o->threads = 2;
	o->seconds = 1.0;
	o->self_test = 0;
	o->pause_us = 0;
	o->pause_every = 8;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--self-test") == 0) {
			o->self_test = 1;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(usage, stdout);
			fputs(common_usage, stdout);
			exit(STRESS_EXIT_OK);
		}
		const char *eq = strchr(a, '=');
		if (strncmp(a, "--", 2) != 0 || !eq || eq[1] == '\0')
			goto bad;
		char key[64];
		size_t k = (size_t)(eq - a - 2);
		if (k == 0 || k >= sizeof(key))
			goto bad;
		memcpy(key, a + 2, k);
		key[k] = '\0';
		const char *v = eq + 1;
		uint64_t u;
		if (strcmp(key, "threads") == 0) {
			if (stress_u64(v, &u) || u < 1 || u > 256)
				goto bad;
			o->threads = (int)u;
		} else if (strcmp(key, "seconds") == 0) {
			if (stress_f64(v, &o->seconds) || !(o->seconds > 0) || o->seconds > 86400)
				goto bad;
		} else if (strcmp(key, "clock") == 0) {
			o->clock_name = v;
		} else if (strcmp(key, "pause-us") == 0) {
			if (stress_u64(v, &o->pause_us) || o->pause_us > 1000000)
				goto bad;
		} else if (strcmp(key, "pause-every") == 0) {
			if (stress_u64(v, &o->pause_every) || o->pause_every == 0)
				goto bad;
		} else if (!opt || opt(key, v) != 0) {
			goto bad;
		}
		continue;
	bad:
		fprintf(stderr, "stress: bad argument '%s'\n%s%s", a, usage, common_usage);
		exit(STRESS_EXIT_USAGE);
	}
	if (strcmp(o->clock_name, "monotonic") == 0)
		o->clock = &sluice_clock_monotonic;
	else if (strcmp(o->clock_name, "coarse") == 0)
		o->clock = &sluice_clock_coarse;
	else if (strcmp(o->clock_name, "cached") == 0)
		o->clock = &sluice_clock_cached;
	else
		stress_die("--clock=%s: want monotonic, coarse or cached", o->clock_name);
}

void stress_clock_start(const struct stress_opts *o)
{
	if (o->clock == &sluice_clock_cached)
		stress_check_init("cached clock", sluice_clock_cached_start(0));
}

void stress_clock_stop(const struct stress_opts *o)
{
	if (o->clock == &sluice_clock_cached)
		sluice_clock_cached_stop();
}

size_t stress_cap(double permits_bound)
{
	double c = ceil(permits_bound * 1.1) + 4096;
	if (!(c <= STRESS_CAP_MAX))
		stress_die("the parameters allow %.0f admissions in this run: more than %u "
		           "records a thread can hold (lower the rate or --seconds)",
		           permits_bound, STRESS_CAP_MAX);
	return (size_t)c;
}

struct worker_arg {
	struct stress_worker *w;
	stress_step_fn step;
};

/* Sleep 0..2 pause_us (see stress_parse); 1 when past the deadline. */
static int pause_now(struct stress_worker *w)
{
	uint64_t ns = stress_rand(w) % (2 * pause_us * 1000 + 1);
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };
	nanosleep(&ts, NULL);
	return sluice_clock_monotonic_ns() >= deadline_ns;
}

/* The thread body: decide until the deadline (checked every 1024
 * decisions: a clock read per decision would slow the cached-clock runs
 * several times over; and after every pause). */
static void *worker_loop(void *arg)
{
	struct worker_arg *a = arg;
	struct stress_worker *w = a->w;
	for (;;) {
		if ((w->decisions & 1023) == 0 && sluice_clock_monotonic_ns() >= deadline_ns)
			break;
		int stop = a->step(w);
		w->decisions++;
		if (stop)
			break;
		if (pause_us && stress_rand(w) % pause_every == 0 && pause_now(w))
			break;
	}
	return NULL;
}

struct stress_worker *stress_run(const struct stress_opts *o, stress_step_fn step,
                                 const size_t caps[STRESS_STREAMS])
{
	int t = o->threads;
	/* aligned: no worker shares a cache line with another */
	struct stress_worker *w = aligned_alloc(SLUICE_CACHELINE, (size_t)t * sizeof(*w));
	struct worker_arg *args = calloc((size_t)t, sizeof(*args));
	if (!w || !args)
		stress_die("out of memory");
	memset(w, 0, (size_t)t * sizeof(*w));
	for (int i = 0; i < t; i++) {
		w[i].id = i;
		w[i].rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1) | 1;
		for (int s = 0; s < STRESS_STREAMS; s++) {
			if (!caps[s])
				continue;
			w[i].buf[s].rec = malloc(caps[s] * sizeof(struct stress_rec));
			if (!w[i].buf[s].rec)
				stress_die("cannot allocate %zu records", caps[s]);
			w[i].buf[s].cap = caps[s];
		}
		args[i] = (struct worker_arg){ &w[i], step };
	}
	pause_us = o->pause_us;
	pause_every = o->pause_every;
	deadline_ns = sluice_clock_monotonic_ns() + (uint64_t)(o->seconds * 1e9);
	for (int i = 0; i < t; i++)
		if (pthread_create(&w[i].tid, NULL, worker_loop, &args[i]) != 0)
			stress_die("cannot start thread %d", i);
	for (int i = 0; i < t; i++)
		pthread_join(w[i].tid, NULL);
	free(args);
	return w;
}

void stress_free(struct stress_worker *w, int threads)
{
	for (int i = 0; i < threads; i++)
		for (int s = 0; s < STRESS_STREAMS; s++)
			free(w[i].buf[s].rec);
	free(w);
}

uint64_t stress_decisions(const struct stress_worker *w, int threads)
{
	uint64_t d = 0;
	for (int i = 0; i < threads; i++)
		d += w[i].decisions;
	return d;
}

struct stress_rec *stress_merge(const struct stress_opts *o, struct stress_worker *w, int s,
                                size_t *total, uint64_t *permits, int *incomplete)
{
	size_t k = 0;
	uint64_t p = 0;
	for (int i = 0; i < o->threads; i++) {
		if (w[i].err)
			stress_die("thread %d: acquire: %s (%s)", i, sluice_strerror(w[i].err),
			           sluice_err_name(w[i].err));
		if (w[i].full) {
			fprintf(stderr, "stress: thread %d filled a record buffer (%zu records) "
			        "and stopped early\n", i, w[i].buf[s].cap);
			*incomplete = 1;
		}
		k += w[i].buf[s].len;
	}
	struct stress_rec *all = malloc((k ? k : 1) * sizeof(*all));
	if (!all)
		stress_die("out of memory merging %zu records", k);
	k = 0;
	for (int i = 0; i < o->threads; i++)
		for (size_t j = 0; j < w[i].buf[s].len; j++) {
			all[k++] = w[i].buf[s].rec[j];
			p += w[i].buf[s].rec[j].n;
		}
	qsort(all, k, sizeof(*all), stress_rec_cmp);
	*total = k;
	*permits = p;
	return all;
}

int stress_report(const struct stress_opts *o, uint64_t decisions, uint64_t admitted,
                  const char *extra, const char *worst, const char *bound, int ok,
                  int incomplete)
{
	printf("stress algo=%s mode=%s clock=%s threads=%d decisions=%llu admitted=%llu%s "
	       "worst=%s bound=%s verdict=%s\n",
	       o->algo, o->mode, o->clock_name, o->threads, (unsigned long long)decisions,
	       (unsigned long long)admitted, extra, worst, bound, ok ? "ok" : "VIOLATION");
	fflush(stdout);
	if (!ok)
		return STRESS_EXIT_VIOLATION;
	if (incomplete) {
		fprintf(stderr, "stress: run incomplete (a buffer filled): nothing proved about "
		        "the admissions not recorded\n");
		return STRESS_EXIT_USAGE;
	}
	return STRESS_EXIT_OK;
}

void stress_expect(struct stress_selftest *st, const char *name, int want_ok, int got_ok,
                   const char *detail)
{
	int pass = !want_ok == !got_ok;
	st->cases++;
	st->failed += !pass;
	fprintf(stderr, "selftest %s %-40s expect=%-9s got=%-9s %s%s\n", st->algo, name,
	        want_ok ? "ok" : "VIOLATION", got_ok ? "ok" : "VIOLATION", detail,
	        pass ? "" : "  <-- WRONG");
}

int stress_self_report(const struct stress_selftest *st)
{
	printf("selftest algo=%s cases=%d failed=%d verdict=%s\n", st->algo, st->cases, st->failed,
	       st->failed ? "FAILED" : "ok");
	return st->failed ? STRESS_EXIT_VIOLATION : STRESS_EXIT_OK;
}
