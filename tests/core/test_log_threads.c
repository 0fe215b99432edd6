/* SPDX-License-Identifier: MIT */
/*
 * test_log_threads.c - many threads on one sliding log, the clock moved by
 * another thread: every interval of length W of the admissions' timeline
 * must hold at most L permits (the header's GUARANTEE, any alignment).
 *
 * Each decider records (now_ns, n) of every admission in its own buffer:
 * now_ns is the log's own timeline (a reading older than the log's newest
 * time counts at that time).  Now and then it gives an admission straight
 * back, as a composite does when another limiter refuses: SLUICE_ECANCEL
 * (still in the window, kept) or SLUICE_EEXPIRED (already out of it at the
 * log's time), the record kept either way (the log counted it).  The clock thread steps
 * the manual clock forward by up to W/8, now and then back by up to 2 W and
 * now and then forward past W (idle gaps, where refunds can be exact), so
 * deciders race across thousands of windows with stale and out-of-order
 * readings.  Afterwards, the verifier checks every interval that starts at
 * a recorded time: any other interval holds no more than the one starting
 * at its first admission.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "sluice/error.h"
#include "sluice/log.h"
#include "test_pace.h"

#define WINDOW 4000ULL /* ns */
#define LIMIT 16u
#define N_MAX 3u
#define CLOCK_STEPS 6000
#define RECORD_CAP (1u << 20)

TestSuite(log_threads, .timeout = 240);

struct record {
	uint64_t t;
	uint64_t n;
	uint64_t limit; /* d.limit: the limit the decision was judged against */
};

/* set_limit under load: when set, the clock thread changes the limit of
 * this log every few steps, through LIMITS (capacity CAPACITY). */
static sluice_log_t *change_lg;
static const uint64_t LIMITS[] = { 16, 4, 28, 9, 2, 22 };
#define NLIMITS (sizeof(LIMITS) / sizeof(LIMITS[0]))
#define CAPACITY 28u

struct decider {
	pthread_t tid;
	sluice_log_t *lg;
	struct record *rec;
	size_t nrec;
	uint64_t refused, refunds_exact, refunds_kept;
	uint64_t seed;
	_Atomic uint64_t decisions; /* read by the clock thread for pacing */
};

static struct decider *deciders;
static int ndeciders;

static sluice_clock_t mclock;
static _Atomic int running;

static void *decider_main(void *arg)
{
	struct decider *me = arg;
	uint64_t x = me->seed;
	while (atomic_load_explicit(&running, memory_order_relaxed)) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t n = 1 + x % N_MAX;
		sluice_decision_t d;
		int rc = sluice_log_acquire(me->lg, n, &d);
		if (rc == 1) {
			cr_assert(d.allowed);
			if (me->nrec < RECORD_CAP)
				me->rec[me->nrec++] = (struct record){ d.now_ns, n, d.limit };
			if ((x >> 32) % 4 == 0) {
				int r = sluice_log_refund(me->lg, n, &d);
				if (r == SLUICE_EEXPIRED) {
					me->refunds_exact++; /* out of the window already */
				} else {
					cr_assert_eq(r, SLUICE_ECANCEL, "refund: %s", sluice_err_name(r));
					me->refunds_kept++;
				}
			}
		} else if (rc == SLUICE_ETOOBIG && change_lg) {
			me->refused++; /* n above a lowered limit */
		} else {
			cr_assert_eq(rc, 0, "acquire failed: %s", sluice_strerror(rc));
			me->refused++;
		}
		uint64_t k = atomic_load_explicit(&me->decisions, memory_order_relaxed) + 1;
		atomic_store_explicit(&me->decisions, k, memory_order_relaxed);
		if (k % 8 == 0)
			sched_yield(); /* more threads than cores: let the clock move */
	}
	return NULL;
}

static void *clock_main(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg | 1;
	for (int i = 0; i < CLOCK_STEPS; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (change_lg && i % 7 == 3)
			cr_assert_eq(sluice_log_set_limit(change_lg, LIMITS[(x >> 9) % NLIMITS]), 0);
		uint64_t now = sluice_clock_now(&mclock);
		if (x % 50 == 0)
			sluice_clock_manual_set(&mclock, now - x % (2 * WINDOW));
		else if (x % 50 == 1)
			sluice_clock_manual_advance(&mclock, WINDOW + 1 + x % WINDOW);
		else
			sluice_clock_manual_advance(&mclock, x % (WINDOW / 8));
		/* pace: wait until the deciders made a few decisions at this
		 * time, so the run is bounded whatever the scheduler does */
		PACE_WAIT(deciders, ndeciders);
	}
	atomic_store_explicit(&running, 0, memory_order_relaxed);
	return NULL;
}

static int by_time(const void *a, const void *b)
{
	const struct record *x = a, *y = b;
	return x->t < y->t ? -1 : x->t > y->t;
}

ParameterizedTestParameters(log_threads, every_interval_holds_at_most_L)
{
	/* threads; 100 + threads: with set_limit under load (SET_LIMIT) */
	static int threads[] = { 2, 4, 8, 102, 104 };
	return cr_make_param_array(int, threads, sizeof(threads) / sizeof(threads[0]));
}

ParameterizedTest(int *threads, log_threads, every_interval_holds_at_most_L)
{
	const int nt = *threads % 100, changing = *threads > 100;
	sluice_clock_manual_init(&mclock, 1000 * WINDOW);
	sluice_log_t lg;
	sluice_log_config_t cfg = { .limit = LIMIT, .window_ns = WINDOW, .clock = &mclock,
		                    .capacity = changing ? CAPACITY : 0 };
	cr_assert_eq(sluice_log_init(&lg, &cfg), 0);
	change_lg = changing ? &lg : NULL;

	struct decider *d = calloc((size_t)nt, sizeof(*d));
	cr_assert_not_null(d);
	deciders = d;
	ndeciders = nt;
	atomic_store(&running, 1);
	for (int i = 0; i < nt; i++) {
		d[i].lg = &lg;
		d[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
		d[i].rec = malloc(sizeof(struct record) * RECORD_CAP);
		cr_assert_not_null(d[i].rec);
		cr_assert_eq(pthread_create(&d[i].tid, NULL, decider_main, &d[i]), 0);
	}
	pthread_t clock_tid;
	cr_assert_eq(pthread_create(&clock_tid, NULL, clock_main, (void *)(uintptr_t)nt), 0);
	pthread_join(clock_tid, NULL);
	for (int i = 0; i < nt; i++)
		pthread_join(d[i].tid, NULL);

	/* one ledger of every admission still counted, sorted by time */
	size_t total = 0;
	uint64_t refused = 0, exact = 0, kept = 0;
	for (int i = 0; i < nt; i++) {
		cr_assert_lt(d[i].nrec, RECORD_CAP, "record buffer overflowed");
		total += d[i].nrec;
		refused += d[i].refused;
		exact += d[i].refunds_exact;
		kept += d[i].refunds_kept;
	}
	struct record *all = malloc(sizeof(*all) * (total ? total : 1));
	cr_assert_not_null(all);
	size_t na = 0;
	uint64_t admitted = 0;
	for (int i = 0; i < nt; i++)
		for (size_t k = 0; k < d[i].nrec; k++)
			if (d[i].rec[k].n) {
				all[na++] = d[i].rec[k];
				admitted += d[i].rec[k].n;
			}
	qsort(all, na, sizeof(*all), by_time);
	cr_assert_gt(na, 0);
	uint64_t span = all[na - 1].t - all[0].t;
	cr_assert_gt(span / WINDOW, 200, "the run must cross many windows (%llu)",
	             (unsigned long long)(span / WINDOW));

	/* the guarantee: [all[i].t, all[i].t + W) holds <= L, for every i;
	 * with set_limit, L = the largest d.limit among the admissions in
	 * it (SET_LIMIT), and the run must have seen several limits */
	uint64_t worst = 0, sum = 0, tight = 0, seen = 0;
	size_t j = 0;
	for (size_t i = 0; i < na; i++) {
		if (j < i)
			j = i, sum = 0;
		while (j < na && all[j].t - all[i].t < WINDOW)
			sum += all[j++].n;
		uint64_t bound = LIMIT;
		if (changing) {
			bound = 0;
			for (size_t k = i; k < j; k++)
				bound = all[k].limit > bound ? all[k].limit : bound;
			for (size_t k = 0; k < NLIMITS; k++)
				seen |= (uint64_t)(all[i].limit == LIMITS[k]) << k;
		}
		worst = sum > worst ? sum : worst;
		tight += sum == bound;
		cr_assert_leq(sum, bound, "%d threads: %llu admitted in [%llu, +W), largest d.limit %llu",
		              nt, (unsigned long long)sum, (unsigned long long)all[i].t,
		              (unsigned long long)bound);
		sum -= all[i].n;
	}
	if (changing) {
		cr_assert_geq(__builtin_popcountll(seen), 4, "admissions judged against several limits");
		cr_assert_gt(tight, 0, "some intervals must reach their bound");
	}
	cr_assert_gt(refused, 0, "the limit must bite, or this tests nothing");
	cr_assert_gt(admitted, 50 * LIMIT);
	cr_assert_gt(kept, 0);

	/* quiescent: the log counts exactly the ledger's last window */
	uint64_t now = sluice_clock_now(&mclock);
	uint64_t last = atomic_load(&lg.last);
	uint64_t T = now > last ? now : last;
	uint64_t ledger = 0;
	for (size_t i = 0; i < na; i++)
		if (all[i].t <= T && T - all[i].t < WINDOW)
			ledger += all[i].n;
	uint64_t Lf = atomic_load_explicit(&lg.limit, memory_order_relaxed);
	cr_assert_eq(sluice_log_available_at(&lg, now), ledger >= Lf ? 0 : Lf - ledger,
	             "log available vs ledger");

	cr_log_info("threads=%d decisions=%llu admitted=%llu refused=%llu refunds exact=%llu "
	            "kept=%llu worst=%llu windows=%llu",
	            nt, (unsigned long long)(total + refused), (unsigned long long)admitted,
	            (unsigned long long)refused, (unsigned long long)exact,
	            (unsigned long long)kept, (unsigned long long)worst,
	            (unsigned long long)(span / WINDOW));
	for (int i = 0; i < nt; i++)
		free(d[i].rec);
	free(d);
	free(all);
	sluice_log_destroy(&lg);
}
