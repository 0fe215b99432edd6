/* SPDX-License-Identifier: MIT */
/*
 * bench_window.c - ns per decision, one thread, allow-mostly regime, for the
 * fixed window and the sliding window ring on every clock source, against
 * lock-based fixed-window baselines and the striped read-check-add
 * baseline (striped_baseline.h: the library's former SLUICE_STRIPED mode,
 * kept here for comparison) run in the same process and the same run.
 *
 * Regime: W = 1 s, N = 10 buckets (100 ms, above the coarse clock's 4 ms),
 * limits as high as the limiters take (SLUICE_WINDOW_LIMIT_MAX, ~1.07e9 per
 * second; SLUICE_FIXED_LIMIT_MAX for the fixed window), and a fresh limiter
 * for every timed run, so no run comes near its limit: every decision takes
 * the admission path.  The table shows the admitted fraction to prove it.
 *
 * Clocks: monotonic, coarse and cached are the limiter's configured clock
 * (the plain acquire reads it per decision; the cached ticker runs for the
 * whole program at its default period).  `caller` uses the _at variant with
 * a time the caller already holds: the CLOCK_MONOTONIC reading taken at the
 * end of the previous batch for timing, so the clock costs nothing per
 * decision yet time still moves and buckets still roll over.
 *
 * Baselines (fixed window, the shape most published limiters have):
 *   mutex         pthread mutex; lock, clock_gettime(MONOTONIC), check,
 *                 update, unlock.  vs_mutex is relative to this one.
 *   mutex_cached  the same, reading sluice_clock_cached_ns().
 *   spin          ck_spinlock_fas instead of the mutex, CLOCK_MONOTONIC.
 * They fill the same sluice_decision_t as the sluice variants do, so every
 * case does the same bookkeeping; one extra case passes NULL (the ring,
 * cached clock) to show what the bookkeeping costs.
 *
 * Method: batches of BATCH decisions timed with CLOCK_MONOTONIC around the
 * batch; one run is ~--seconds; --repeats runs per case, interleaved across
 * cases (so a slow phase of the VM hits every case alike); median reported.
 * The decision results are accumulated into a volatile sink.
 *
 * Output: one `bench ...` key=value line per case, then a human table.
 * Options: --quick (3 repeats of 0.1 s), --repeats=N, --seconds=S.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ck_spinlock.h>

#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/fixed.h"
#include "sluice/window.h"

#include "bench_common.h"
#include "striped_baseline.h"

#define BATCH 2048
#define WINDOW_NS 1000000000ULL
#define BUCKETS 10u

static volatile uint64_t sink;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- baselines ---------------------------------------------------------- */

struct mutex_fixed {
	pthread_mutex_t lock;
	uint64_t limit, window_ns;
	uint64_t window_start, count; /* under lock */
};

struct spin_fixed {
	ck_spinlock_fas_t lock;
	uint64_t limit, window_ns;
	uint64_t window_start, count; /* under lock */
};

/* The body every lock-based baseline shares: caller holds the lock. */
static inline int locked_fixed_decide(uint64_t *window_start, uint64_t *count, uint64_t limit,
                                      uint64_t window_ns, uint64_t n, uint64_t now,
                                      sluice_decision_t *d)
{
	if (now - *window_start >= window_ns) {
		*window_start = now - now % window_ns;
		*count = 0;
	}
	int ok = *count + n <= limit;
	if (ok)
		*count += n;
	if (d) {
		uint64_t end = *window_start + window_ns;
		d->allowed = ok;
		d->limit = limit;
		d->remaining = limit - *count;
		d->reset_ns = end - now;
		d->retry_after_ns = ok ? 0 : end - now;
		d->delay_ns = 0;
		d->now_ns = now;
	}
	return ok;
}

static inline int mutex_fixed_acquire(struct mutex_fixed *m, uint64_t n, sluice_decision_t *d)
{
	pthread_mutex_lock(&m->lock);
	int ok = locked_fixed_decide(&m->window_start, &m->count, m->limit, m->window_ns, n,
	                             mono_ns(), d);
	pthread_mutex_unlock(&m->lock);
	return ok;
}

static inline int mutex_cached_fixed_acquire(struct mutex_fixed *m, uint64_t n,
                                             sluice_decision_t *d)
{
	pthread_mutex_lock(&m->lock);
	int ok = locked_fixed_decide(&m->window_start, &m->count, m->limit, m->window_ns, n,
	                             sluice_clock_cached_ns(), d);
	pthread_mutex_unlock(&m->lock);
	return ok;
}

static inline int spin_fixed_acquire(struct spin_fixed *s, uint64_t n, sluice_decision_t *d)
{
	ck_spinlock_fas_lock(&s->lock);
	int ok = locked_fixed_decide(&s->window_start, &s->count, s->limit, s->window_ns, n,
	                             mono_ns(), d);
	ck_spinlock_fas_unlock(&s->lock);
	return ok;
}

/* ---- the limiters under test (fresh for every timed run) ------------------ */

static sluice_fixed_t g_fixed;
static sluice_window_t g_window;
static struct mutex_fixed g_mutex;
static struct spin_fixed g_spin;

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_window: %s failed: %d\n", what, rc);
	exit(1);
}

static void setup_fixed(const sluice_clock_t *clock)
{
	sluice_fixed_config_t cfg = {
		.limit = SLUICE_FIXED_LIMIT_MAX, .window_ns = WINDOW_NS, .clock = clock
	};
	int rc = sluice_fixed_init(&g_fixed, &cfg);
	if (rc != 0)
		die("sluice_fixed_init", rc);
}

static void setup_window(const sluice_clock_t *clock)
{
	sluice_window_config_t cfg = { .limit = SLUICE_WINDOW_LIMIT_MAX,
		                       .window_ns = WINDOW_NS,
		                       .buckets = BUCKETS,
		                       .clock = clock };
	int rc = sluice_window_init(&g_window, &cfg);
	if (rc != 0)
		die("sluice_window_init", rc);
}

static void setup_fixed_mono(void) { setup_fixed(&sluice_clock_monotonic); }
static void setup_fixed_coarse(void) { setup_fixed(&sluice_clock_coarse); }
static void setup_fixed_cached(void) { setup_fixed(&sluice_clock_cached); }
static void setup_exact_mono(void) { setup_window(&sluice_clock_monotonic); }
static void setup_exact_coarse(void) { setup_window(&sluice_clock_coarse); }
static void setup_exact_cached(void) { setup_window(&sluice_clock_cached); }
static void teardown_window(void) { sluice_window_destroy(&g_window); }

/* The striped read-check-add baseline (striped_baseline.h), same regime. */
static struct striped_base g_sbase;
static const sluice_clock_t *g_sbase_clock;
static void setup_sbase(const sluice_clock_t *clock)
{
	int rc = striped_base_init(&g_sbase, SLUICE_WINDOW_LIMIT_MAX, WINDOW_NS, BUCKETS);
	if (rc != 0)
		die("striped_base_init", rc);
	g_sbase_clock = clock;
}
static void setup_sbase_cached(void) { setup_sbase(&sluice_clock_cached); }
static void setup_sbase_mono(void) { setup_sbase(&sluice_clock_monotonic); }
static void teardown_sbase(void) { striped_base_destroy(&g_sbase); }

static void setup_mutex(void)
{
	pthread_mutex_init(&g_mutex.lock, NULL);
	g_mutex.limit = SLUICE_FIXED_LIMIT_MAX;
	g_mutex.window_ns = WINDOW_NS;
	g_mutex.window_start = 0;
	g_mutex.count = 0;
}
static void teardown_mutex(void) { pthread_mutex_destroy(&g_mutex.lock); }

static void setup_spin(void)
{
	ck_spinlock_fas_init(&g_spin.lock);
	g_spin.limit = SLUICE_FIXED_LIMIT_MAX;
	g_spin.window_ns = WINDOW_NS;
	g_spin.window_start = 0;
	g_spin.count = 0;
}

/* ---- timed loops ----------------------------------------------------------- */

struct run_result {
	uint64_t ns, decisions, admitted;
};

/*
 * One timed run of DECIDE (an expression returning 1/0/-err; it may use
 * `now`, the reading taken at the end of the previous batch, and `d`).
 * USE folds a result of the decision into the sink, as a caller would read
 * it.  The inner loop is the whole case, inlined: no call through a pointer
 * per decision.
 */
#define TIMED_RUN(DECIDE, USE)                                                      \
	do {                                                                        \
		sluice_decision_t d;                                                \
		memset(&d, 0, sizeof(d));                                           \
		uint64_t acc = 0, admitted = 0, decisions = 0;                      \
		uint64_t t0 = mono_ns(), now = t0;                                  \
		do {                                                                \
			for (unsigned i = 0; i < BATCH; i++) {                      \
				int rc_ = (DECIDE);                                 \
				admitted += rc_ == 1;                               \
				acc += (USE);                                       \
			}                                                           \
			decisions += BATCH;                                         \
			now = mono_ns();                                            \
		} while (now - t0 < target_ns);                                     \
		(void)d;                                                            \
		sink += acc;                                                        \
		return (struct run_result){ now - t0, decisions, admitted };        \
	} while (0)

#define DEFINE_RUN(name, DECIDE, USE)                                               \
	static struct run_result name(uint64_t target_ns)                           \
	{                                                                           \
		TIMED_RUN(DECIDE, USE);                                             \
	}

DEFINE_RUN(run_fixed_clock, sluice_fixed_acquire(&g_fixed, 1, &d), d.remaining)
DEFINE_RUN(run_fixed_caller, sluice_fixed_acquire_at(&g_fixed, 1, now, &d), d.remaining)
DEFINE_RUN(run_window_clock, sluice_window_acquire(&g_window, 1, &d), d.remaining)
DEFINE_RUN(run_window_caller, sluice_window_acquire_at(&g_window, 1, now, &d), d.remaining)
DEFINE_RUN(run_window_clock_null, sluice_window_acquire(&g_window, 1, NULL), (uint64_t)rc_)
DEFINE_RUN(run_sbase_clock,
           striped_base_acquire_at(&g_sbase, 1, sluice_clock_now(g_sbase_clock), &d),
           d.remaining)
DEFINE_RUN(run_sbase_caller, striped_base_acquire_at(&g_sbase, 1, now, &d), d.remaining)
DEFINE_RUN(run_mutex, mutex_fixed_acquire(&g_mutex, 1, &d), d.remaining)
DEFINE_RUN(run_mutex_cached, mutex_cached_fixed_acquire(&g_mutex, 1, &d), d.remaining)
DEFINE_RUN(run_spin, spin_fixed_acquire(&g_spin, 1, &d), d.remaining)

/* ---- cases ------------------------------------------------------------------- */

struct bench_case {
	const char *algo, *mode, *clock, *decision;
	void (*setup)(void);
	struct run_result (*run)(uint64_t target_ns);
	void (*teardown)(void);
	/* results */
	double *samples;
	double med, min, max;
	uint64_t decisions, admitted;
};

#define CASE(a, m, c, dec, s, r, t) { a, m, c, dec, s, r, t, NULL, 0, 0, 0, 0, 0 }

static struct bench_case cases[] = {
	/* baselines first: the reference for vs_mutex is cases[0] */
	CASE("fixed", "mutex", "monotonic", "out", setup_mutex, run_mutex, teardown_mutex),
	CASE("fixed", "mutex_cached", "cached", "out", setup_mutex, run_mutex_cached,
	     teardown_mutex),
	CASE("fixed", "spin", "monotonic", "out", setup_spin, run_spin, NULL),
	/* sluice fixed window (one CAS: exact per aligned window) */
	CASE("fixed", "exact", "monotonic", "out", setup_fixed_mono, run_fixed_clock, NULL),
	CASE("fixed", "exact", "coarse", "out", setup_fixed_coarse, run_fixed_clock, NULL),
	CASE("fixed", "exact", "cached", "out", setup_fixed_cached, run_fixed_clock, NULL),
	CASE("fixed", "exact", "caller", "out", setup_fixed_mono, run_fixed_caller, NULL),
	/* sliding window ring (one CAS on the bucket word) */
	CASE("window", "exact", "monotonic", "out", setup_exact_mono, run_window_clock,
	     teardown_window),
	CASE("window", "exact", "coarse", "out", setup_exact_coarse, run_window_clock,
	     teardown_window),
	CASE("window", "exact", "cached", "out", setup_exact_cached, run_window_clock,
	     teardown_window),
	CASE("window", "exact", "caller", "out", setup_exact_mono, run_window_caller,
	     teardown_window),
	CASE("window", "exact", "cached", "null", setup_exact_cached, run_window_clock_null,
	     teardown_window),
	/* the striped read-check-add baseline (striped_baseline.h) */
	CASE("window", "striped_base", "cached", "out", setup_sbase_cached, run_sbase_clock,
	     teardown_sbase),
	CASE("window", "striped_base", "caller", "out", setup_sbase_mono, run_sbase_caller,
	     teardown_sbase),
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static struct run_result run_case(struct bench_case *c, uint64_t target_ns)
{
	c->setup();
	struct run_result r = c->run(target_ns);
	if (c->teardown)
		c->teardown();
	return r;
}

int main(int argc, char **argv)
{
	struct bench_opts opts;
	int bad = bench_parse_args(argc, argv, "bench_window", &opts);
	if (bad)
		return bad;
	unsigned repeats = opts.repeats;
	double seconds = opts.seconds;
	uint64_t target_ns = (uint64_t)(seconds * 1e9);

	/* The cached clock runs for the whole program (default period), as a
	 * server would run it; the other cases do not read it. */
	int rc = sluice_clock_cached_start(0);
	if (rc != 0)
		die("sluice_clock_cached_start", rc);

	for (unsigned c = 0; c < NCASES; c++) {
		cases[c].samples = calloc(repeats, sizeof(double));
		if (!cases[c].samples)
			return 1;
		(void)run_case(&cases[c], target_ns / 5); /* warm-up, untimed */
	}
	for (unsigned r = 0; r < repeats; r++) {
		for (unsigned c = 0; c < NCASES; c++) {
			struct run_result res = run_case(&cases[c], target_ns);
			cases[c].samples[r] = (double)res.ns / (double)res.decisions;
			cases[c].decisions += res.decisions;
			cases[c].admitted += res.admitted;
		}
	}
	sluice_clock_cached_stop();

	for (unsigned c = 0; c < NCASES; c++) {
		struct bench_case *k = &cases[c];
		k->med = bench_median(k->samples, repeats); /* sorts samples */
		k->min = k->samples[0];
		k->max = k->samples[repeats - 1];
	}
	const double mutex_ns = cases[0].med;
	for (unsigned c = 0; c < NCASES; c++) {
		struct bench_case *k = &cases[c];
		printf("bench algo=%s mode=%s clock=%s decision=%s threads=1 regime=allow "
		       "ns_per_decision=%.2f decisions_per_sec=%.0f vs_mutex=%.2f\n",
		       k->algo, k->mode, k->clock, k->decision, k->med, 1e9 / k->med,
		       mutex_ns / k->med);
	}

	printf("\nns per decision, 1 thread, allow regime (W = 1 s, N = %u); median of %u runs "
	       "of %.2f s\n",
	       BUCKETS, repeats, seconds);
	printf("vs_mutex = mutex/monotonic ns / this ns (> 1: faster than the mutex)\n");
	printf("  %-6s %-12s %-9s %-4s %8s %8s %8s %9s %8s %9s\n", "algo", "mode", "clock", "d",
	       "ns/dec", "min", "max", "Mdec/s", "vs_mutex", "admitted");
	for (unsigned c = 0; c < NCASES; c++) {
		struct bench_case *k = &cases[c];
		double adm = 100.0 * (double)k->admitted / (double)k->decisions;
		printf("  %-6s %-12s %-9s %-4s %8.2f %8.2f %8.2f %9.1f %8.2f %8.3f%%\n", k->algo,
		       k->mode, k->clock, k->decision, k->med, k->min, k->max, 1e3 / k->med,
		       mutex_ns / k->med, adm);
		if (adm < 99.9)
			fprintf(stderr,
			        "bench_window: warning: %s/%s/%s admitted only %.3f%%: not "
			        "the allow regime\n",
			        k->algo, k->mode, k->clock, adm);
	}
	for (unsigned c = 0; c < NCASES; c++)
		free(cases[c].samples);
	return 0;
}
