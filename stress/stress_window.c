/*
 * stress_window - many threads, real clocks, one limiter; verify the
 * header's guarantee over every admission recorded.
 *
 *   stress_window [--algo=fixed|window] [--mode=exact|striped]
 *                 [--clock=monotonic|coarse|cached] [--threads=T]
 *                 [--seconds=S] [--limit=L] [--window-ms=W] [--buckets=N]
 *
 * Each thread decides in a loop (n = 1..3) and records every admission
 * (the decision's now_ns, n) in its own pre-allocated buffer; after the run
 * the verifier sums admissions per epoch of the limiter's timeline and
 * checks every run of N consecutive epochs (fixed: N = 1) against the bound
 * the header states: L for EXACT and the fixed window, L + (T-1)*n_max for
 * STRIPED.  Prints one parseable line and exits 1 on a violation:
 *   stress algo=... mode=... clock=... threads=... decisions=... admitted=...
 *          worst=... bound=... verdict=ok|VIOLATION
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/sluice.h"

#define N_MAX 3u
#define RECORD_CAP (1u << 22)

struct record {
	uint64_t epoch;
	uint32_t n;
};

struct worker {
	pthread_t tid;
	struct record *rec;
	size_t nrec;
	uint64_t decisions;
	int overflow;
};

static struct {
	const char *algo, *mode, *clock;
	int threads;
	double seconds;
	uint64_t limit, window_ms;
	uint32_t buckets;
} opt = { "window", "exact", "cached", 4, 1.0, 50, 100, 10 };

static sluice_fixed_t fixed;
static sluice_window_t window;
static int is_fixed;
static uint64_t width_ns;
static _Atomic int running = 1;
static uint64_t deadline_ns; /* workers stop themselves: with more threads
                              * than cores the sleeping main thread may be
                              * rescheduled late */

static void *worker_main(void *arg)
{
	struct worker *me = arg;
	uint64_t x = (uint64_t)(uintptr_t)me * 0x9E3779B97F4A7C15ULL | 1;
	while (atomic_load_explicit(&running, memory_order_relaxed)) {
		if ((me->decisions & 1023) == 0 && sluice_clock_monotonic_ns() >= deadline_ns)
			break;
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t n = 1 + x % N_MAX;
		sluice_decision_t d;
		int rc = is_fixed ? sluice_fixed_acquire(&fixed, n, &d)
		                  : sluice_window_acquire(&window, n, &d);
		me->decisions++;
		if (rc < 0) {
			fprintf(stderr, "stress: acquire: %s\n", sluice_strerror(rc));
			exit(2);
		}
		if (rc == 1) {
			if (me->nrec == RECORD_CAP) {
				me->overflow = 1;
				break;
			}
			me->rec[me->nrec++] = (struct record){ d.now_ns / width_ns, (uint32_t)n };
		}
	}
	return NULL;
}

static int cmp_record(const void *a, const void *b)
{
	const struct record *x = a, *y = b;
	return (x->epoch > y->epoch) - (x->epoch < y->epoch);
}

static const char *arg_value(const char *arg, const char *key)
{
	size_t k = strlen(key);
	return strncmp(arg, key, k) == 0 && arg[k] == '=' ? arg + k + 1 : NULL;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *v;
		if ((v = arg_value(argv[i], "--algo")))
			opt.algo = v;
		else if ((v = arg_value(argv[i], "--mode")))
			opt.mode = v;
		else if ((v = arg_value(argv[i], "--clock")))
			opt.clock = v;
		else if ((v = arg_value(argv[i], "--threads")))
			opt.threads = atoi(v);
		else if ((v = arg_value(argv[i], "--seconds")))
			opt.seconds = atof(v);
		else if ((v = arg_value(argv[i], "--limit")))
			opt.limit = strtoull(v, NULL, 10);
		else if ((v = arg_value(argv[i], "--window-ms")))
			opt.window_ms = strtoull(v, NULL, 10);
		else if ((v = arg_value(argv[i], "--buckets")))
			opt.buckets = (uint32_t)strtoul(v, NULL, 10);
		else {
			fprintf(stderr, "usage: see the comment at the top of stress_window.c\n");
			return 2;
		}
	}
	if (opt.threads < 1 || opt.threads > 256 || !(opt.seconds > 0)) {
		fprintf(stderr, "stress: need 1..256 threads and seconds > 0\n");
		return 2;
	}
	const sluice_clock_t *clock = strcmp(opt.clock, "monotonic") == 0 ? &sluice_clock_monotonic
	                              : strcmp(opt.clock, "coarse") == 0  ? &sluice_clock_coarse
	                                                                   : &sluice_clock_cached;
	if (clock == &sluice_clock_cached && sluice_clock_cached_start(0) != 0)
		return 2;
	is_fixed = strcmp(opt.algo, "fixed") == 0;
	int striped = strcmp(opt.mode, "striped") == 0;
	uint64_t window_ns = opt.window_ms * 1000000ULL;
	int rc;
	if (is_fixed) {
		sluice_fixed_config_t c = { .limit = opt.limit, .window_ns = window_ns, .clock = clock };
		rc = sluice_fixed_init(&fixed, &c);
		width_ns = window_ns;
		opt.buckets = 1;
		opt.mode = "exact";
	} else {
		sluice_window_config_t c = { .limit = opt.limit, .window_ns = window_ns,
			                     .buckets = opt.buckets,
			                     .mode = striped ? SLUICE_STRIPED : SLUICE_EXACT,
			                     .clock = clock };
		rc = sluice_window_init(&window, &c);
		width_ns = window_ns / opt.buckets;
	}
	if (rc != 0) {
		fprintf(stderr, "stress: init: %s (%s)\n", sluice_strerror(rc), sluice_err_name(rc));
		return 2;
	}

	struct worker *w = calloc((size_t)opt.threads, sizeof(*w));
	if (!w)
		return 2;
	deadline_ns = sluice_clock_monotonic_ns() + (uint64_t)(opt.seconds * 1e9);
	for (int i = 0; i < opt.threads; i++) {
		w[i].rec = malloc(sizeof(struct record) * RECORD_CAP);
		if (!w[i].rec || pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0)
			return 2;
	}
	usleep((useconds_t)(opt.seconds * 1e6));
	atomic_store_explicit(&running, 0, memory_order_relaxed);
	size_t total = 0;
	uint64_t decisions = 0;
	for (int i = 0; i < opt.threads; i++) {
		pthread_join(w[i].tid, NULL);
		total += w[i].nrec;
		decisions += w[i].decisions;
		if (w[i].overflow)
			fprintf(stderr, "stress: thread %d filled its record buffer early\n", i);
	}
	if (clock == &sluice_clock_cached)
		sluice_clock_cached_stop();

	/* per-epoch totals, then every run of N consecutive epochs */
	struct record *all = malloc(sizeof(struct record) * (total ? total : 1));
	if (!all)
		return 2;
	size_t k = 0;
	for (int i = 0; i < opt.threads; i++)
		for (size_t j = 0; j < w[i].nrec; j++)
			all[k++] = w[i].rec[j];
	qsort(all, total, sizeof(*all), cmp_record);
	uint64_t bound = opt.limit + (striped && !is_fixed ? (uint64_t)(opt.threads - 1) * N_MAX : 0);
	uint64_t worst = 0, admitted = 0, epochs = 0;
	/* sliding sum over epochs: [lo, hi] indexes records of epochs in the run */
	uint64_t sum = 0;
	size_t lo = 0;
	for (size_t hi = 0; hi < total; hi++) {
		sum += all[hi].n;
		admitted += all[hi].n;
		if (hi == 0 || all[hi].epoch != all[hi - 1].epoch)
			epochs++;
		while (all[hi].epoch - all[lo].epoch >= opt.buckets)
			sum -= all[lo++].n;
		if (sum > worst)
			worst = sum;
	}
	int ok = worst <= bound;
	printf("stress algo=%s mode=%s clock=%s threads=%d decisions=%llu admitted=%llu "
	       "epochs=%llu worst=%llu bound=%llu verdict=%s\n",
	       opt.algo, opt.mode, opt.clock, opt.threads, (unsigned long long)decisions,
	       (unsigned long long)admitted, (unsigned long long)epochs,
	       (unsigned long long)worst, (unsigned long long)bound, ok ? "ok" : "VIOLATION");
	for (int i = 0; i < opt.threads; i++)
		free(w[i].rec);
	free(w);
	free(all);
	if (!is_fixed)
		sluice_window_destroy(&window);
	return ok ? 0 : 1;
}
