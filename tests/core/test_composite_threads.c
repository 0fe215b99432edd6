/* SPDX-License-Identifier: MIT */
/*
 * test_composite_threads.c - many threads on one composite, plus threads on
 * one of its parts directly: all-or-nothing must hold exactly.
 *
 * The parts' windows are far longer than the run, so every refund is exact
 * and the ledger is exact too: at the end each part must count precisely
 * the permits its callers were told they got (composite admissions, plus
 * the direct ones on the shared part), and never more than its limit.
 * A leak (a refusal that keeps permits) or a double count (a refund of
 * permits never taken) breaks the equality.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "sluice/sluice.h"
#include "test_pace.h"

#define HOUR (3600ULL * 1000000000ULL)
#define OPS 20000

TestSuite(composite_threads, .timeout = 120);

struct worker {
	pthread_t tid;
	sluice_limiter_t *target;
	uint64_t admitted_permits;
	uint64_t refused;
	uint64_t seed;
};

static sluice_clock_t mclock;

static void *worker_main(void *arg)
{
	struct worker *me = arg;
	uint64_t x = me->seed;
	for (int i = 0; i < OPS; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t n = 1 + x % 3;
		int rc = sluice_limiter_acquire(me->target, n, NULL);
		cr_assert_geq(rc, 0, "acquire: %s", sluice_strerror(rc));
		if (rc == 1)
			me->admitted_permits += n;
		else
			me->refused++;
		/* and sometimes give a whole admission back, as a caller
		 * whose request failed downstream would */
		if (rc == 1 && x % 7 == 0 && sluice_limiter_algo(me->target) != SLUICE_ALGO_COMPOSITE) {
			sluice_decision_t d = { .allowed = 1, .now_ns = sluice_clock_now(&mclock) };
			cr_assert_eq(sluice_limiter_refund(me->target, n, &d), 0);
			me->admitted_permits -= n;
		}
	}
	return NULL;
}

struct params {
	int composite_threads, direct_threads;
};

ParameterizedTestParameters(composite_threads, exact_ledger)
{
	static struct params p[] = { { 2, 0 }, { 2, 2 }, { 4, 2 }, { 6, 2 } };
	return cr_make_param_array(struct params, p, sizeof(p) / sizeof(p[0]));
}

ParameterizedTest(struct params *p, composite_threads, exact_ledger)
{
	sluice_clock_manual_init(&mclock, 5 * HOUR);
	const uint64_t LA = 40000, LB = 25000;
	sluice_limiter_config_t ca = { .algo = SLUICE_ALGO_WINDOW,
		                       .window = { .limit = LA, .window_ns = 10 * HOUR, .buckets = 10,
		                                   .clock = &mclock } };
	sluice_limiter_config_t cb = { .algo = SLUICE_ALGO_FIXED,
		                       .fixed = { .limit = LB, .window_ns = 10 * HOUR, .clock = &mclock } };
	sluice_limiter_t *a, *b, *c;
	cr_assert_eq(sluice_limiter_new(&ca, &a), 0);
	cr_assert_eq(sluice_limiter_new(&cb, &b), 0);
	sluice_limiter_config_t cc = { .algo = SLUICE_ALGO_COMPOSITE };
	cc.composite.count = 2;
	cc.composite.parts[0] = a;
	cc.composite.parts[1] = b;
	cr_assert_eq(sluice_limiter_new(&cc, &c), 0);

	int nw = p->composite_threads + p->direct_threads;
	struct worker w[8] = { 0 };
	for (int i = 0; i < nw; i++) {
		w[i].target = i < p->composite_threads ? c : a; /* direct ones share part a */
		w[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
		cr_assert_eq(pthread_create(&w[i].tid, NULL, worker_main, &w[i]), 0);
	}
	uint64_t via_composite = 0, direct = 0, composite_refused = 0;
	for (int i = 0; i < nw; i++) {
		pthread_join(w[i].tid, NULL);
		if (i < p->composite_threads) {
			via_composite += w[i].admitted_permits;
			composite_refused += w[i].refused;
		} else {
			direct += w[i].admitted_permits;
		}
	}
	uint64_t now = sluice_clock_now(&mclock);
	sluice_decision_t da, db;
	/* probe each part's count: ask for its whole limit, which is refused
	 * (taking nothing) unless the count is 0 */
	uint64_t count_a = sluice_limiter_acquire_at(a, LA, now, &da) == 1 ? 0 : LA - da.remaining;
	uint64_t count_b = sluice_limiter_acquire_at(b, LB, now, &db) == 1 ? 0 : LB - db.remaining;
	cr_log_info("composite=%d direct=%d: via composite %llu, direct %llu; part a %llu, part b %llu",
	            p->composite_threads, p->direct_threads, (unsigned long long)via_composite,
	            (unsigned long long)direct, (unsigned long long)count_a,
	            (unsigned long long)count_b);
	cr_assert_eq(count_b, via_composite, "part b counts exactly the composite's admissions");
	cr_assert_eq(count_a, via_composite + direct, "part a: composite + direct, exactly");
	cr_assert_leq(count_a, LA);
	cr_assert_leq(count_b, LB);
	/* the composite threads ask for ~4x the smaller limit in total, so
	 * whatever the scheduling some of their requests must be refused */
	cr_assert_gt(composite_refused, 0, "the composite must have refused (and given back)");
	sluice_limiter_free(c);
	sluice_limiter_free(a);
	sluice_limiter_free(b);
}

/*
 * The clock moving: 2-8 threads on a composite of two rings while another
 * thread steps (and sometimes rewinds) the manual clock across hundreds of
 * buckets.  Each admission records every part's own decision time
 * (acquire_each_at), and each part's guarantee is checked over the
 * composite's admissions: <= L_p in every run of N_p consecutive buckets
 * of that part's timeline.  Refunds that a sealed bucket refused keep
 * permits counted in a part that the ledger does not show: that can only
 * lower what the ledger sees, so the check stays exact in one direction.
 */
#define W1 1000ULL /* ns per bucket, both parts */
#define CAP (1u << 18)

struct mover_rec {
	uint64_t ea, eb;
	uint32_t n;
};

struct mover {
	pthread_t tid;
	sluice_composite_t *c;
	struct mover_rec *rec;
	size_t nrec;
	uint64_t refused;
	_Atomic uint64_t decisions;
	uint64_t seed;
};

static struct mover *movers;
static int nmovers;
static _Atomic int moving;

static void *mover_main(void *arg)
{
	struct mover *me = arg;
	uint64_t x = me->seed;
	while (atomic_load_explicit(&moving, memory_order_relaxed)) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t n = 1 + x % 3;
		sluice_decision_t d, each[SLUICE_COMPOSITE_MAX];
		int rc = sluice_composite_acquire_each_at(me->c, n, sluice_clock_now(&mclock), &d, each);
		cr_assert_geq(rc, 0, "%s", sluice_strerror(rc));
		if (rc == 1 && me->nrec < CAP)
			me->rec[me->nrec++] = (struct mover_rec){ each[0].now_ns / W1,
				                                  each[1].now_ns / W1, (uint32_t)n };
		else if (rc == 0)
			me->refused++;
		uint64_t k = atomic_load_explicit(&me->decisions, memory_order_relaxed) + 1;
		atomic_store_explicit(&me->decisions, k, memory_order_relaxed);
		if (k % 8 == 0)
			sched_yield();
	}
	return NULL;
}

static void *clock_mover(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg | 1;
	for (int i = 0; i < 4000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t now = sluice_clock_now(&mclock);
		if (x % 50 == 0)
			sluice_clock_manual_set(&mclock, now - x % (2 * W1));
		else
			sluice_clock_manual_advance(&mclock, x % (W1 / 2));
		PACE_WAIT(movers, nmovers);
	}
	atomic_store_explicit(&moving, 0, memory_order_relaxed);
	return NULL;
}

static void check_part(struct mover *m, int threads, int which, uint64_t limit, uint64_t buckets)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < threads; i++)
		for (size_t k = 0; k < m[i].nrec; k++) {
			uint64_t e = which ? m[i].rec[k].eb : m[i].rec[k].ea;
			lo = e < lo ? e : lo;
			hi = e > hi ? e : hi;
		}
	cr_assert_gt(hi - lo, 500, "the run must cross many buckets");
	uint64_t *per = calloc(hi - lo + 1, sizeof(uint64_t));
	cr_assert_not_null(per);
	for (int i = 0; i < threads; i++)
		for (size_t k = 0; k < m[i].nrec; k++)
			per[(which ? m[i].rec[k].eb : m[i].rec[k].ea) - lo] += m[i].rec[k].n;
	for (uint64_t e = 0; e <= hi - lo; e++) {
		uint64_t sum = 0;
		for (uint64_t k = 0; k < buckets && k <= e; k++)
			sum += per[e - k];
		cr_assert_leq(sum, limit, "part %d: %llu in the %llu buckets ending at %llu", which,
		              (unsigned long long)sum, (unsigned long long)buckets,
		              (unsigned long long)(e + lo));
	}
	free(per);
}

ParameterizedTestParameters(composite_threads, moving_clock_each_part_bound)
{
	static int p[] = { 2, 4, 8 };
	return cr_make_param_array(int, p, 3);
}

ParameterizedTest(int *threads, composite_threads, moving_clock_each_part_bound)
{
	sluice_clock_manual_init(&mclock, 1000 * W1);
	sluice_limiter_config_t ca = { .algo = SLUICE_ALGO_WINDOW,
		                       .window = { .limit = 24, .window_ns = 8 * W1, .buckets = 8,
		                                   .clock = &mclock } };
	sluice_limiter_config_t cb = { .algo = SLUICE_ALGO_WINDOW,
		                       .window = { .limit = 7, .window_ns = 2 * W1, .buckets = 2,
		                                   .clock = &mclock } };
	sluice_limiter_t *a, *b;
	cr_assert_eq(sluice_limiter_new(&ca, &a), 0);
	cr_assert_eq(sluice_limiter_new(&cb, &b), 0);
	sluice_composite_t c;
	sluice_composite_config_t cc = { .parts = { a, b }, .count = 2 };
	cr_assert_eq(sluice_composite_init(&c, &cc), 0);

	struct mover *m = calloc((size_t)*threads, sizeof(*m));
	cr_assert_not_null(m);
	movers = m;
	nmovers = *threads;
	atomic_store(&moving, 1);
	for (int i = 0; i < *threads; i++) {
		m[i].c = &c;
		m[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 3);
		m[i].rec = malloc(sizeof(struct mover_rec) * CAP);
		cr_assert_not_null(m[i].rec);
		cr_assert_eq(pthread_create(&m[i].tid, NULL, mover_main, &m[i]), 0);
	}
	pthread_t ct;
	cr_assert_eq(pthread_create(&ct, NULL, clock_mover, (void *)(uintptr_t)*threads), 0);
	pthread_join(ct, NULL);
	uint64_t refused = 0, admitted = 0;
	for (int i = 0; i < *threads; i++) {
		pthread_join(m[i].tid, NULL);
		cr_assert_lt(m[i].nrec, CAP, "record buffer overflowed");
		refused += m[i].refused;
		admitted += m[i].nrec;
	}
	cr_assert_gt(refused, 0, "the limits must bite");
	check_part(m, *threads, 0, 24, 8);
	check_part(m, *threads, 1, 7, 2);
	cr_log_info("threads=%d admissions=%llu refused=%llu unreturned=%llu", *threads,
	            (unsigned long long)admitted, (unsigned long long)refused,
	            (unsigned long long)sluice_composite_unreturned(&c));
	for (int i = 0; i < *threads; i++)
		free(m[i].rec);
	free(m);
	sluice_limiter_free(a);
	sluice_limiter_free(b);
}
