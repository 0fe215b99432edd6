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
#include <stdatomic.h>

#include "sluice/sluice.h"

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
		int rc = sluice_acquire(me->target, n, NULL);
		cr_assert_geq(rc, 0, "acquire: %s", sluice_strerror(rc));
		if (rc == 1)
			me->admitted_permits += n;
		else
			me->refused++;
		/* and sometimes give a whole admission back, as a caller
		 * whose request failed downstream would */
		if (rc == 1 && x % 7 == 0 && sluice_limiter_kind(me->target) != SLUICE_KIND_COMPOSITE) {
			sluice_decision_t d = { .allowed = 1, .now_ns = sluice_clock_now(&mclock) };
			cr_assert_eq(sluice_refund_at(me->target, n, &d), 0);
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
	sluice_limiter_config_t ca = { .kind = SLUICE_KIND_WINDOW,
		                       .window = { .limit = LA, .window_ns = 10 * HOUR, .buckets = 10,
		                                   .mode = SLUICE_EXACT, .clock = &mclock } };
	sluice_limiter_config_t cb = { .kind = SLUICE_KIND_FIXED,
		                       .fixed = { .limit = LB, .window_ns = 10 * HOUR, .clock = &mclock } };
	sluice_limiter_t *a, *b, *c;
	cr_assert_eq(sluice_limiter_new(&ca, &a), 0);
	cr_assert_eq(sluice_limiter_new(&cb, &b), 0);
	sluice_limiter_config_t cc = { .kind = SLUICE_KIND_COMPOSITE };
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
	uint64_t count_a = sluice_acquire_at(a, LA, now, &da) == 1 ? 0 : LA - da.remaining;
	uint64_t count_b = sluice_acquire_at(b, LB, now, &db) == 1 ? 0 : LB - db.remaining;
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
