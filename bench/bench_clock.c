/* SPDX-License-Identifier: MIT */
/*
 * bench_clock.c - what a clock read costs, and what the cached clock's
 * ticker costs in CPU and in staleness.
 *
 * Part 1, cost per read: for each source, batches of BATCH reads are timed
 * with CLOCK_MONOTONIC around the batch (never around one read) for about
 * --seconds; the median over --repeats runs is reported.  Repeats are
 * interleaved across sources so a slow phase of the VM hits all of them.
 * The figure includes the loop and the accumulation that keeps the reads
 * alive (well under 1 ns on current x86).
 *
 *   monotonic        sluice_clock_monotonic_ns()       (vDSO CLOCK_MONOTONIC)
 *   coarse           sluice_clock_coarse_ns()          (vDSO ..._COARSE)
 *   cached           sluice_clock_cached_ns(), ticker running
 *   cached_fallback  sluice_clock_now(&sluice_clock_cached), ticker stopped
 *   manual           sluice_clock_now(&a manual clock)
 *
 * Part 2, the ticker: for each period the ticker is started, and while the
 * main thread sleeps for TICKER_SLEEP_NS the process CPU time is measured
 * (CLOCK_PROCESS_CPUTIME_ID, the scheduler's exact runtime, minus the main
 * thread's own CLOCK_THREAD_CPUTIME_ID): that is the ticker's CPU, reported
 * in percent of one core.  Then the main thread samples (monotonic - cached)
 * at pseudo-random instants for LAG_SAMPLE_NS and reports the median and
 * maximum lag, and how many distinct cached values it saw per second (the
 * effective tick rate: timer slack and VM timer latency stretch short
 * periods).  A sample is bracketed by two monotonic reads and dropped when
 * they are far apart: then the sampler was preempted mid-sample and the lag
 * it saw would be its own stall, not the ticker's.  The sampler spins (as a
 * busy server thread would), so on a 2-core machine the ticker competes for
 * the other core with everything else running.
 *
 * Output: one `bench ...` key=value line per case, then human tables.
 * Options: --quick (3 repeats of 0.1 s), --repeats=N, --seconds=S.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/clock.h"

#include "test_mono.h"
#include "bench_common.h"

#define BATCH 1024
#define TICKER_SETTLE_NS 50000000ULL /* let a fresh ticker reach steady state */
#define TICKER_SLEEP_NS 1000000000ULL
#define LAG_SAMPLE_NS 300000000ULL
#define LAG_GAP_MAX_NS 2000ULL /* spin 0..2 us between lag samples */
#define LAG_SAMPLES_MAX (1u << 20)
#define LAG_SAMPLE_MAX_SPAN_NS 5000ULL /* longer: the sampler was preempted */

static volatile uint64_t sink; /* keeps every read alive */

static sluice_clock_t manual_clock;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* ---- part 1: cost per read ------------------------------------------- */

/* One timed run: batches of BATCH reads of READ until target_ns elapsed.
 * Returns ns per read. */
#define TIMED_READS(READ)                                                   \
	do {                                                                \
		uint64_t acc = 0, reads = 0, t0 = mono_ns(), t;              \
		do {                                                        \
			for (unsigned i = 0; i < BATCH; i++)                \
				acc += (READ);                              \
			reads += BATCH;                                     \
			t = mono_ns();                                       \
		} while (t - t0 < target_ns);                               \
		sink += acc;                                                \
		return (double)(t - t0) / (double)reads;                    \
	} while (0)

static double run_monotonic(uint64_t target_ns) { TIMED_READS(sluice_clock_monotonic_ns()); }
static double run_coarse(uint64_t target_ns) { TIMED_READS(sluice_clock_coarse_ns()); }
static double run_cached(uint64_t target_ns) { TIMED_READS(sluice_clock_cached_ns()); }
static double run_fallback(uint64_t target_ns) { TIMED_READS(sluice_clock_now(&sluice_clock_cached)); }
static double run_manual(uint64_t target_ns) { TIMED_READS(sluice_clock_now(&manual_clock)); }

struct read_case {
	const char *name;
	const char *what;
	int ticker; /* 1: needs the ticker running, 0: stopped */
	double (*run)(uint64_t target_ns);
	double *samples;
	double med, min, max;
};

static void set_ticker(int on)
{
	if (on && !sluice_clock_cached_running()) {
		int rc = sluice_clock_cached_start(0);
		if (rc != 0) {
			fprintf(stderr, "bench_clock: sluice_clock_cached_start: %d\n", rc);
			exit(1);
		}
	} else if (!on) {
		sluice_clock_cached_stop();
	}
}

/* ---- part 2: the ticker -------------------------------------------------- */

struct ticker_case {
	uint64_t period_us;
	double cpu_pct;
	double lag_median_us, lag_max_us;
	double ticks_per_sec;
	unsigned samples, dropped;
};

static uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void measure_ticker(struct ticker_case *tc, uint64_t *lags)
{
	sluice_clock_cached_stop();
	int rc = sluice_clock_cached_start(tc->period_us * 1000ULL);
	if (rc != 0) {
		fprintf(stderr, "bench_clock: sluice_clock_cached_start(%llu us): %d\n",
		        (unsigned long long)tc->period_us, rc);
		exit(1);
	}
	sleep_ns(TICKER_SETTLE_NS);

	/* CPU: the main thread sleeps, so the process's CPU time is the
	 * ticker's; subtract the main thread's own (wake-up) time anyway. */
	uint64_t p0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID), m0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	uint64_t w0 = mono_ns();
	sleep_ns(TICKER_SLEEP_NS);
	uint64_t w1 = mono_ns();
	uint64_t p1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID), m1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	double ticker_cpu = (double)(p1 - p0) - (double)(m1 - m0);
	tc->cpu_pct = 100.0 * ticker_cpu / (double)(w1 - w0);

	/* Lag: read cached first, then monotonic, so lag >= 0.  Samples are
	 * separated by a random spin so they do not lock onto the ticker's
	 * phase; the spin also keeps this core busy (as a server's would be),
	 * leaving the other core to the ticker. */
	uint64_t seed = 0x9e3779b97f4a7c15ULL ^ tc->period_us;
	unsigned n = 0, dropped = 0;
	uint64_t changes = 0, prev = sluice_clock_cached_ns();
	uint64_t t0 = mono_ns(), t = t0;
	while (t - t0 < LAG_SAMPLE_NS && n < LAG_SAMPLES_MAX) {
		uint64_t before = sluice_clock_monotonic_ns();
		uint64_t c = sluice_clock_cached_ns();
		uint64_t m = sluice_clock_monotonic_ns();
		/* A sample whose own reads took long was interrupted (this
		 * thread was preempted): its lag would measure the sampler's
		 * stall, not the ticker's staleness.  Drop it, and count. */
		if (m - before > LAG_SAMPLE_MAX_SPAN_NS)
			dropped++;
		else
			lags[n++] = m > c ? m - c : 0;
		if (c != prev) {
			changes++;
			prev = c;
		}
		uint64_t until = m + xorshift64(&seed) % LAG_GAP_MAX_NS;
		do
			t = mono_ns();
		while (t < until);
	}
	sluice_clock_cached_stop();

	if (n == 0) { /* every sample interrupted: report nothing rather than junk */
		tc->lag_median_us = tc->lag_max_us = -1;
		tc->ticks_per_sec = 0;
		tc->samples = 0;
		tc->dropped = dropped;
		return;
	}
	qsort(lags, n, sizeof(*lags), cmp_u64);
	uint64_t med = n % 2 ? lags[n / 2] : (lags[n / 2 - 1] + lags[n / 2]) / 2;
	tc->lag_median_us = (double)med / 1000.0;
	tc->lag_max_us = (double)lags[n - 1] / 1000.0;
	tc->ticks_per_sec = (double)changes * 1e9 / (double)(t - t0);
	tc->samples = n;
	tc->dropped = dropped;
}

int main(int argc, char **argv)
{
	struct bench_opts opts;
	int bad = bench_parse_args(argc, argv, "bench_clock", &opts);
	if (bad)
		return bad;
	unsigned repeats = opts.repeats;
	double seconds = opts.seconds;
	uint64_t target_ns = (uint64_t)(seconds * 1e9);
	sluice_clock_manual_init(&manual_clock, 1);

	struct read_case rc[] = {
		{ "monotonic", "sluice_clock_monotonic_ns()", 0, run_monotonic, NULL, 0, 0, 0 },
		{ "coarse", "sluice_clock_coarse_ns()", 0, run_coarse, NULL, 0, 0, 0 },
		{ "cached", "sluice_clock_cached_ns(), ticker on", 1, run_cached, NULL, 0, 0, 0 },
		{ "cached_fallback", "sluice_clock_now(&cached), ticker off", 0, run_fallback,
		  NULL, 0, 0, 0 },
		{ "manual", "sluice_clock_now(&manual)", 0, run_manual, NULL, 0, 0, 0 },
	};
	const unsigned nrc = sizeof(rc) / sizeof(rc[0]);

	/* Warm-up: one short untimed pass over every source. */
	for (unsigned c = 0; c < nrc; c++) {
		set_ticker(rc[c].ticker);
		rc[c].samples = calloc(repeats, sizeof(double));
		if (!rc[c].samples)
			return 1;
		(void)rc[c].run(target_ns / 10);
	}
	for (unsigned r = 0; r < repeats; r++) {
		for (unsigned c = 0; c < nrc; c++) {
			set_ticker(rc[c].ticker);
			rc[c].samples[r] = rc[c].run(target_ns);
		}
	}
	sluice_clock_cached_stop();
	for (unsigned c = 0; c < nrc; c++) {
		rc[c].med = bench_median(rc[c].samples, repeats); /* sorts samples */
		rc[c].min = rc[c].samples[0];
		rc[c].max = rc[c].samples[repeats - 1];
		printf("bench clock=%s ns_per_read=%.2f\n", rc[c].name, rc[c].med);
	}
	fflush(stdout);

	struct ticker_case tc[] = {
		{ .period_us = 100 }, { .period_us = 200 }, { .period_us = 500 },
		{ .period_us = 1000 }, { .period_us = 4000 },
	};
	const unsigned ntc = sizeof(tc) / sizeof(tc[0]);
	uint64_t *lags = malloc(sizeof(*lags) * LAG_SAMPLES_MAX);
	if (!lags)
		return 1;
	for (unsigned i = 0; i < ntc; i++) {
		measure_ticker(&tc[i], lags);
		printf("bench ticker period_us=%llu cpu_pct=%.3f lag_median_us=%.1f "
		       "lag_max_us=%.1f\n",
		       (unsigned long long)tc[i].period_us, tc[i].cpu_pct, tc[i].lag_median_us,
		       tc[i].lag_max_us);
		fflush(stdout);
	}
	free(lags);

	printf("\nclock read cost: median of %u runs of %.2f s, batches of %d reads\n", repeats,
	       seconds, BATCH);
	printf("  %-16s %-38s %9s %9s %9s\n", "clock", "call", "ns/read", "min", "max");
	for (unsigned c = 0; c < nrc; c++)
		printf("  %-16s %-38s %9.2f %9.2f %9.2f\n", rc[c].name, rc[c].what, rc[c].med,
		       rc[c].min, rc[c].max);

	printf("\nticker: CPU over %.1f s of main-thread sleep; lag = monotonic - cached "
	       "over %.1f s of sampling\n",
	       (double)TICKER_SLEEP_NS / 1e9, (double)LAG_SAMPLE_NS / 1e9);
	printf("  %9s %9s %14s %11s %12s %9s %8s\n", "period_us", "cpu_%core",
	       "lag_median_us", "lag_max_us", "ticks/s seen", "samples", "dropped");
	for (unsigned i = 0; i < ntc; i++)
		printf("  %9llu %9.3f %14.1f %11.1f %12.0f %9u %8u\n",
		       (unsigned long long)tc[i].period_us, tc[i].cpu_pct, tc[i].lag_median_us,
		       tc[i].lag_max_us, tc[i].ticks_per_sec, tc[i].samples, tc[i].dropped);
	printf("  (dropped: samples whose own three reads spanned > %llu ns, i.e. the\n"
	       "   sampling thread itself was interrupted)\n",
	       (unsigned long long)LAG_SAMPLE_MAX_SPAN_NS);

	for (unsigned c = 0; c < nrc; c++)
		free(rc[c].samples);
	return 0;
}
