/*
 * sluice-demo - what sluice does, in a few seconds.
 *
 * 1. The boundary burst: an adversary sends L requests just before a window
 *    edge and L just after it.  A fixed window admits 2L within 2 ms; the
 *    sliding ring admits no more than L in any bucket-aligned window, and
 *    the demo prints the ring's documented worst case for arbitrary
 *    intervals too, measured, not quoted.
 * 2. Decisions per second, one thread, against a mutex-protected fixed
 *    window measured in the same run.
 * Deterministic part (1) uses a manual clock; part (2) the cached clock.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#define MS 1000000ULL
#define SEC 1000000000ULL

/* ---- 1. boundary burst --------------------------------------------------- */

enum { FIXED, RING, GCRA, LOG };

static int demo_take(int kind, void *lim, uint64_t t)
{
	switch (kind) {
	case FIXED:
		return sluice_fixed_acquire_at(lim, 1, t, NULL);
	case RING:
		return sluice_window_acquire_at(lim, 1, t, NULL);
	case GCRA:
		return sluice_gcra_acquire_at(lim, 1, t, NULL);
	default:
		return sluice_log_acquire_at(lim, 1, t, NULL);
	}
}

/* most admissions whose times fall in any interval [t, t + len) */
static uint64_t max_in_interval(const uint64_t *times, size_t n, uint64_t len)
{
	uint64_t best = 0;
	for (size_t i = 0, j = 0; i < n; i++) {
		while (times[i] - times[j] >= len)
			j++;
		if (i - j + 1 > best)
			best = i - j + 1;
	}
	return best;
}

static void burst(const char *name, int kind, void *lim, uint64_t L)
{
	/* L at 0.999 s, L at 1.001 s, then one request per ms up to 3 s:
	 * the attacker keeps knocking and takes whatever is let through. */
	size_t cap = 8 * L + 4000, n = 0;
	uint64_t *times = malloc(sizeof(uint64_t) * cap);
	if (!times)
		exit(1);
	for (uint64_t i = 0; i < L; i++)
		if (demo_take(kind, lim, SEC - MS) == 1)
			times[n++] = SEC - MS;
	for (uint64_t i = 0; i < L; i++)
		if (demo_take(kind, lim, SEC + MS) == 1)
			times[n++] = SEC + MS;
	for (uint64_t t = SEC + 2 * MS; t < 3 * SEC && n < cap; t += MS)
		for (int k = 0; k < 4; k++) /* 4 requests per ms */
			if (demo_take(kind, lim, t) == 1)
				times[n++] = t;
	printf("  %-26s %12llu %12llu %12llu\n", name,
	       (unsigned long long)max_in_interval(times, n, 2 * MS + 1),
	       (unsigned long long)max_in_interval(times, n, 100 * MS),
	       (unsigned long long)max_in_interval(times, n, SEC));
	free(times);
}

static void boundary_demo(void)
{
	const uint64_t L = 100;
	sluice_clock_t manual;
	sluice_clock_manual_init(&manual, 0);
	printf("1. Boundary burst: limit %llu per 1 s; the attacker sends %llu at 0.999 s,\n"
	       "   %llu at 1.001 s, then 4 requests every ms until 3 s.\n\n",
	       (unsigned long long)L, (unsigned long long)L, (unsigned long long)L);
	printf("  %-26s %12s %12s %12s\n", "most admitted in any:", "2 ms", "100 ms", "1 s");

	sluice_fixed_t f;
	sluice_fixed_config_t fc = { .limit = L, .window_ns = SEC, .clock = &manual };
	if (sluice_fixed_init(&f, &fc) != 0)
		exit(1);
	burst("fixed window", FIXED, &f, L);

	static const uint32_t buckets[] = { 10, 100 };
	for (size_t i = 0; i < sizeof(buckets) / sizeof(buckets[0]); i++) {
		sluice_window_t w;
		sluice_window_config_t wc = { .limit = L, .window_ns = SEC, .buckets = buckets[i],
			                      .mode = SLUICE_EXACT, .clock = &manual };
		int rc = sluice_window_init(&w, &wc);
		if (rc != 0) {
			fprintf(stderr, "window: %s\n", sluice_strerror(rc));
			exit(1);
		}
		char name[64];
		snprintf(name, sizeof(name), "sliding ring, N=%u", buckets[i]);
		burst(name, RING, &w, L);
		sluice_window_destroy(&w);
	}

	sluice_gcra_t g;
	sluice_gcra_config_t gc = { .rate = L, .period_ns = SEC, .burst = L, .clock = &manual };
	sluice_log_t lg;
	sluice_log_config_t lc = { .limit = L, .window_ns = SEC, .clock = &manual };
	if (sluice_gcra_init(&g, &gc) != 0 || sluice_log_init(&lg, &lc) != 0)
		exit(1);
	burst("token bucket (GCRA), b=L", GCRA, &g, L);
	burst("exact sliding log", LOG, &lg, L);
	sluice_log_destroy(&lg);

	printf("\n  The fixed window lets 2L through within 2 ms of its edge.  The ring holds\n"
	       "  every bucket-aligned window to L; an arbitrary 1 s interval can still see\n"
	       "  up to 2L, but only if the attacker waits W - W/N between bursts (see\n"
	       "  include/sluice/window.h).  The token bucket allows its burst and then\n"
	       "  the rate: burst + rate x t in any t.  Only the sliding log holds every\n"
	       "  interval of 1 s to L, at 8 bytes per permit of L.\n\n");
}

/* ---- 2. decisions per second --------------------------------------------- */

struct mutex_fixed {
	pthread_mutex_t lock;
	uint64_t limit, window_ns, epoch, count;
};

static int mutex_fixed_acquire(struct mutex_fixed *m, uint64_t n)
{
	pthread_mutex_lock(&m->lock);
	uint64_t e = sluice_clock_monotonic_ns() / m->window_ns;
	if (e != m->epoch) {
		m->epoch = e;
		m->count = 0;
	}
	int ok = m->count + n <= m->limit;
	if (ok)
		m->count += n;
	pthread_mutex_unlock(&m->lock);
	return ok;
}

#define BATCH 100000

static double ns_per(int which, void *lim, double seconds)
{
	sluice_decision_t d;
	uint64_t sink = 0, done = 0;
	uint64_t t0 = sluice_clock_monotonic_ns(), t1;
	do {
		for (int i = 0; i < BATCH; i++) {
			switch (which) {
			case 0: sink += (uint64_t)mutex_fixed_acquire(lim, 1); break;
			case 1: sink += (uint64_t)sluice_fixed_acquire(lim, 1, &d); break;
			case 2:
			case 3: sink += (uint64_t)sluice_window_acquire(lim, 1, &d); break;
			case 4: sink += (uint64_t)sluice_gcra_acquire(lim, 1, &d); break;
			default: sink += (uint64_t)sluice_log_acquire(lim, 1, &d); break;
			}
		}
		done += BATCH;
		t1 = sluice_clock_monotonic_ns();
	} while ((double)(t1 - t0) < seconds * 1e9);
	if (sink == 0)
		fprintf(stderr, "nothing admitted?\n");
	return (double)(t1 - t0) / (double)done;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median_ns(int which, void *lim)
{
	double r[5];
	for (int i = 0; i < 5; i++)
		r[i] = ns_per(which, lim, 0.1);
	qsort(r, 5, sizeof(r[0]), cmp_double);
	return r[2];
}

static void speed_demo(void)
{
	int rc = sluice_clock_cached_start(0);
	if (rc != 0) {
		fprintf(stderr, "cached clock: %s\n", sluice_strerror(rc));
		exit(1);
	}
	/* a limit that is never reached: the allow-mostly regime */
	const uint64_t L = SLUICE_WINDOW_LIMIT_MAX;
	struct mutex_fixed m = { .limit = L, .window_ns = SEC };
	pthread_mutex_init(&m.lock, NULL);
	sluice_fixed_t f;
	sluice_fixed_config_t fc = { .limit = L, .window_ns = SEC };
	sluice_window_t ex, st;
	sluice_window_config_t ec = { .limit = L, .window_ns = SEC, .buckets = 10,
		                      .mode = SLUICE_EXACT };
	sluice_window_config_t sc = ec;
	sc.mode = SLUICE_STRIPED;
	/* GCRA at a rate it never reaches; the log with a window so short
	 * that its L entries are always old enough (it still writes one
	 * timestamp per admission, which is its real cost) */
	sluice_gcra_t g;
	sluice_gcra_config_t gc = { .rate = 1000000000, .period_ns = SEC, .burst = 1000000 };
	sluice_log_t lg;
	sluice_log_config_t lc = { .limit = 1024, .window_ns = 1000 };
	lc.clock = &sluice_clock_monotonic; /* a 1 us window needs a 1 ns clock */
	if (sluice_fixed_init(&f, &fc) || sluice_window_init(&ex, &ec) ||
	    sluice_window_init(&st, &sc) || sluice_gcra_init(&g, &gc) || sluice_log_init(&lg, &lc))
		exit(1);

	printf("2. Decisions per second, 1 thread, allow-mostly, median of 5 x 0.1 s.\n"
	       "   sluice reads the cached clock (ticker every %llu us); the mutex\n"
	       "   baseline locks, reads CLOCK_MONOTONIC, checks, counts, unlocks.\n\n",
	       (unsigned long long)(SLUICE_CACHED_PERIOD_NS / 1000));
	printf("  %-34s %10s %14s %10s\n", "limiter", "ns/dec", "decisions/s", "vs mutex");
	double base = median_ns(0, &m);
	struct {
		const char *name;
		int which;
		void *lim;
	} rows[] = {
		{ "mutex fixed window (baseline)", 0, &m },
		{ "sluice fixed window", 1, &f },
		{ "sluice sliding ring, EXACT", 2, &ex },
		{ "sluice sliding ring, STRIPED", 3, &st },
		{ "sluice token bucket (GCRA)", 4, &g },
		{ "sluice sliding log (monotonic clock)", 5, &lg },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		double ns = i == 0 ? base : median_ns(rows[i].which, rows[i].lim);
		printf("  %-34s %10.1f %14.0f %9.1fx\n", rows[i].name, ns, 1e9 / ns, base / ns);
	}
	printf("\n  Full benchmarks: meson test -C build --benchmark (see README).\n");
	sluice_window_destroy(&ex);
	sluice_window_destroy(&st);
	sluice_log_destroy(&lg);
	sluice_clock_cached_stop();
}

int main(int argc, char **argv)
{
	int quick = argc > 1 && strcmp(argv[1], "--no-speed") == 0;
	printf("sluice %s demo\n\n", "0.1.0");
	boundary_demo();
	if (!quick)
		speed_demo();
	return 0;
}
