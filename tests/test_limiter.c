/*
 * test_limiter.c - the generic handle: every kind behind one API, and
 * sluice_wait's promise: take within the timeout, or take nothing.
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
	sluice_limiter_config_t cf = { .kind = SLUICE_KIND_FIXED,
		                       .fixed = { .limit = 3, .window_ns = SEC, .clock = &m } };
	sluice_limiter_config_t cw = { .kind = SLUICE_KIND_WINDOW,
		                       .window = { .limit = 3, .window_ns = SEC, .buckets = 10,
		                                   .clock = &m } };
	sluice_limiter_t *f, *w;
	cr_assert_eq(sluice_limiter_new(&cf, &f), 0);
	cr_assert_eq(sluice_limiter_new(&cw, &w), 0);
	cr_assert_eq(sluice_limiter_kind(f), SLUICE_KIND_FIXED);
	cr_assert_eq(sluice_limiter_kind(w), SLUICE_KIND_WINDOW);
	cr_assert_eq(sluice_limiter_clock(w), &m);
	sluice_decision_t d;
	sluice_clock_manual_set(&m, 100 * MS);
	cr_assert_eq(sluice_acquire(f, 3, &d), 1);
	cr_assert_eq(sluice_acquire(w, 3, &d), 1);
	cr_assert_eq(sluice_acquire(f, 1, &d), 0);
	cr_assert_eq(d.retry_after_ns, 900 * MS);
	cr_assert_eq(sluice_acquire_at(w, 1, 150 * MS, &d), 0);
	cr_assert_eq(d.retry_after_ns, 950 * MS, "bucket 1 leaves at 1.1 s");
	cr_assert_eq(sluice_acquire(f, 4, &d), -SLUICE_ETOOBIG);
	cr_assert_eq(sluice_release(f, 1), 0, "no in-flight work to end");
	sluice_limiter_free(f);
	sluice_limiter_free(w);
	sluice_limiter_free(NULL);
}

Test(limiter, bad_config)
{
	sluice_limiter_config_t c = { .kind = (sluice_kind_t)999 };
	sluice_limiter_t *l = NULL;
	cr_assert_eq(sluice_limiter_new(&c, &l), -SLUICE_EKIND);
	cr_assert_null(l);
	c.kind = SLUICE_KIND_WINDOW; /* limit 0 */
	cr_assert_eq(sluice_limiter_new(&c, &l), -SLUICE_ELIMIT, "the algorithm's own error");
	cr_assert_null(l);
	cr_assert_eq(sluice_limiter_new(NULL, &l), -SLUICE_EINVAL);
	cr_assert_eq(sluice_limiter_new(&c, NULL), -SLUICE_EINVAL);
}

/* sluice_wait on a polled algorithm, real monotonic clock.  No timing is
 * asserted: only what was taken. */
Test(limiter, wait_takes_within_timeout_or_nothing)
{
	sluice_limiter_config_t cw = { .kind = SLUICE_KIND_WINDOW,
		                       .window = { .limit = 2, .window_ns = 40 * MS, .buckets = 4,
		                                   .clock = &sluice_clock_monotonic } };
	sluice_limiter_t *w;
	cr_assert_eq(sluice_limiter_new(&cw, &w), 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_wait(w, 2, 0, &d), 1, "free permits: no wait");
	/* the next permit is >= 30 ms away: a 1 ms budget must fail at once,
	 * taking nothing */
	cr_assert_eq(sluice_wait(w, 1, 1 * MS, &d), -SLUICE_ETIMEDOUT);
	cr_assert_not(d.allowed);
	/* a generous budget waits for it */
	cr_assert_eq(sluice_wait(w, 1, 10 * SEC, &d), 1);
	cr_assert(d.allowed);
	cr_assert_eq(sluice_wait(w, 3, 10 * SEC, &d), -SLUICE_ETOOBIG, "can never pass: no wait");
	sluice_limiter_free(w);
}
