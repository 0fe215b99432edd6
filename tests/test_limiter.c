/*
 * test_limiter.c - the generic handle: every kind behind one API, and
 * sluice_limiter_wait's promise: take within the timeout, or take nothing.
 */
#include <criterion/criterion.h>

#include "sluice/sluice.h"

#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(limiter, .timeout = 30);

Test(limiter, kinds_behave_like_their_algorithm)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 0);
	sluice_limiter_config_t cf = { .algo = SLUICE_ALGO_FIXED,
		                       .fixed = { .limit = 3, .window_ns = SEC, .clock = &m } };
	sluice_limiter_config_t cw = { .algo = SLUICE_ALGO_WINDOW,
		                       .window = { .limit = 3, .window_ns = SEC, .buckets = 10,
		                                   .clock = &m } };
	sluice_limiter_t *f, *w;
	cr_assert_eq(sluice_limiter_new(&cf, &f), 0);
	cr_assert_eq(sluice_limiter_new(&cw, &w), 0);
	cr_assert_eq(sluice_limiter_algo(f), SLUICE_ALGO_FIXED);
	cr_assert_eq(sluice_limiter_algo(w), SLUICE_ALGO_WINDOW);
	cr_assert_eq(sluice_limiter_clock(w), &m);
	sluice_decision_t d;
	sluice_clock_manual_set(&m, 100 * MS);
	cr_assert_eq(sluice_limiter_acquire(f, 3, &d), 1);
	cr_assert_eq(sluice_limiter_acquire(w, 3, &d), 1);
	cr_assert_eq(sluice_limiter_acquire(f, 1, &d), 0);
	cr_assert_eq(d.retry_after_ns, 900 * MS);
	cr_assert_eq(sluice_limiter_acquire_at(w, 1, 150 * MS, &d), 0);
	cr_assert_eq(d.retry_after_ns, 950 * MS, "bucket 1 leaves at 1.1 s");
	cr_assert_eq(sluice_limiter_acquire(f, 4, &d), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_limiter_release(f, 1), 0, "no in-flight work to end");
	sluice_limiter_free(f);
	sluice_limiter_free(w);
	sluice_limiter_free(NULL);
}

Test(limiter, bad_config)
{
	sluice_limiter_config_t c = { .algo = (sluice_algo_t)999 };
	sluice_limiter_t *l = NULL;
	cr_assert_eq(sluice_limiter_new(&c, &l), SLUICE_EALGO);
	cr_assert_null(l);
	c.algo = SLUICE_ALGO_WINDOW; /* limit 0 */
	cr_assert_eq(sluice_limiter_new(&c, &l), SLUICE_ELIMIT, "the algorithm's own error");
	cr_assert_null(l);
	cr_assert_eq(sluice_limiter_new(NULL, &l), SLUICE_EINVAL);
	cr_assert_eq(sluice_limiter_new(&c, NULL), SLUICE_EINVAL);
}

/* sluice_limiter_wait on a polled algorithm, real monotonic clock.  No timing is
 * asserted: only what was taken. */
Test(limiter, wait_takes_within_timeout_or_nothing)
{
	sluice_limiter_config_t cw = { .algo = SLUICE_ALGO_WINDOW,
		                       .window = { .limit = 2, .window_ns = 40 * MS, .buckets = 4,
		                                   .clock = &sluice_clock_monotonic } };
	sluice_limiter_t *w;
	cr_assert_eq(sluice_limiter_new(&cw, &w), 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_limiter_wait(w, 2, 0, &d), 1, "free permits: no wait");
	/* the next permit is >= 30 ms away: a 1 ms budget must fail at once,
	 * taking nothing */
	cr_assert_eq(sluice_limiter_wait(w, 1, 1 * MS, &d), SLUICE_ETIMEDOUT);
	cr_assert_not(d.allowed);
	/* a generous budget waits for it */
	cr_assert_eq(sluice_limiter_wait(w, 1, 10 * SEC, &d), 1);
	cr_assert(d.allowed);
	cr_assert_eq(sluice_limiter_wait(w, 3, 10 * SEC, &d), SLUICE_ETOOBIG, "can never pass: no wait");
	sluice_limiter_free(w);
}

/* Every kind through the generic handle: new, acquire to refusal, refund,
 * free.  The algorithms' own tests check their guarantees; this checks the
 * dispatch reaches the right one with the right config. */
Test(limiter, every_kind_dispatches)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, SEC);
	sluice_limiter_config_t cfgs[] = {
		{ .algo = SLUICE_ALGO_FIXED, .fixed = { .limit = 3, .window_ns = SEC, .clock = &m } },
		{ .algo = SLUICE_ALGO_WINDOW,
		  .window = { .limit = 3, .window_ns = SEC, .buckets = 10, .clock = &m } },
		{ .algo = SLUICE_ALGO_GCRA,
		  .gcra = { .rate = 1, .period_ns = SEC, .burst = 3, .clock = &m } },
		{ .algo = SLUICE_ALGO_LEAKY,
		  .leaky = { .rate = 1, .period_ns = SEC, .mode = SLUICE_LEAKY_METER, .depth = 2,
		             .clock = &m } },
		{ .algo = SLUICE_ALGO_LOG, .log = { .limit = 3, .window_ns = SEC, .clock = &m } },
		{ .algo = SLUICE_ALGO_DECAY, .decay = { .limit = 3, .half_life_ns = SEC, .clock = &m } },
		{ .algo = SLUICE_ALGO_INFLIGHT, .inflight = { .limit = 3, .clock = &m } },
	};
	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		sluice_limiter_t *l = NULL;
		int rc = sluice_limiter_new(&cfgs[i], &l);
		cr_assert_eq(rc, 0, "algo %d: %s", (int)cfgs[i].algo, sluice_err_name(rc));
		cr_assert_eq(sluice_limiter_algo(l), cfgs[i].algo);
		sluice_decision_t d;
		for (int k = 0; k < 3; k++)
			cr_assert_eq(sluice_limiter_acquire(l, 1, &d), 1, "algo %d, permit %d", (int)cfgs[i].algo, k);
		cr_assert_eq(sluice_limiter_acquire(l, 1, &d), 0, "algo %d: the 4th must be refused",
		             (int)cfgs[i].algo);
		cr_assert_eq(d.limit, 3, "algo %d", (int)cfgs[i].algo);
		cr_assert_eq(sluice_limiter_acquire(l, 4, &d), SLUICE_ETOOBIG, "algo %d", (int)cfgs[i].algo);
		sluice_limiter_free(l);
	}
}

/* sluice_limiter_wait on a booking algorithm: books and sleeps, or books nothing. */
Test(limiter, wait_books_or_times_out)
{
	sluice_limiter_config_t cg = { .algo = SLUICE_ALGO_GCRA,
		                       .gcra = { .rate = 1, .period_ns = 20 * MS, .burst = 1,
		                                 .clock = &sluice_clock_monotonic } };
	sluice_limiter_t *g;
	cr_assert_eq(sluice_limiter_new(&cg, &g), 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_limiter_wait(g, 1, 0, &d), 1, "a full bucket: no wait");
	cr_assert_eq(sluice_limiter_wait(g, 1, 1 * MS, &d), SLUICE_ETIMEDOUT, "the slot is ~20 ms away");
	/* nothing was booked by the timed-out call: the next slot is still
	 * one interval after the first permit, not two */
	cr_assert_eq(sluice_limiter_wait(g, 1, 10 * SEC, &d), 1);
	cr_assert_leq(d.retry_after_ns, 20 * MS, "booked one interval out, not two");
	sluice_limiter_free(g);

	sluice_limiter_config_t cs = { .algo = SLUICE_ALGO_LEAKY,
		                       .leaky = { .rate = 1, .period_ns = 5 * MS,
		                                  .mode = SLUICE_LEAKY_SHAPER,
		                                  .max_delay_ns = 100 * MS,
		                                  .clock = &sluice_clock_monotonic } };
	sluice_limiter_t *s;
	cr_assert_eq(sluice_limiter_new(&cs, &s), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(sluice_limiter_wait(s, 1, SEC, &d), 1, "paced request %d", i);
	sluice_limiter_free(s);
}

/* Warm-up through the handle: Guava's order (the first request passes at
 * once and the next one pays for it), and a booking wait. */
Test(limiter, warmup_dispatches)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, SEC);
	sluice_limiter_config_t c = { .algo = SLUICE_ALGO_WARMUP,
		                      .warmup = { .rate = 2, .period_ns = SEC, .warmup_ns = 4 * SEC,
		                                  .clock = &m } };
	sluice_limiter_t *l;
	cr_assert_eq(sluice_limiter_new(&c, &l), 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_limiter_acquire(l, 1, &d), 1, "the first request passes at once");
	cr_assert_eq(sluice_limiter_acquire(l, 1, &d), 0, "the next pays: cold, so 1.38 s later");
	cr_assert_eq((d.retry_after_ns + 5 * MS) / (10 * MS), 138, "Guava's R1.38 (got %llu ns)",
	             (unsigned long long)d.retry_after_ns);
	sluice_limiter_free(l);
}
