/*
 * test_fixed.c - fixed window: exact per window, the boundary burst it
 * cannot prevent, all-or-nothing n, clock jumps, invalid configuration.
 * Deterministic: every test drives a manual clock.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "sluice/sluice.h"

#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(fixed, .timeout = 30);

static sluice_clock_t mclock;

static sluice_fixed_t make(uint64_t limit, uint64_t window_ns, uint64_t start_ns)
{
	sluice_fixed_t f;
	sluice_clock_manual_init(&mclock, start_ns);
	sluice_fixed_config_t cfg = { .limit = limit, .window_ns = window_ns, .clock = &mclock };
	int rc = sluice_fixed_init(&f, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
	return f;
}

static int take_at(sluice_fixed_t *f, uint64_t n, uint64_t t)
{
	sluice_clock_manual_set(&mclock, t);
	return sluice_fixed_acquire(f, n, NULL);
}

Test(fixed, exact_per_window)
{
	sluice_fixed_t f = make(100, SEC, 10 * SEC);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(take_at(&f, 1, 10 * SEC + (uint64_t)i * MS), 1, "request %d", i);
	sluice_decision_t d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 10 * SEC + 500 * MS, &d), 0);
	cr_assert_not(d.allowed);
	cr_assert_eq(d.limit, 100);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(d.retry_after_ns, 500 * MS, "retry until the window ends");
	cr_assert_eq(d.reset_ns, 500 * MS);
	/* the next window starts fresh */
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 11 * SEC, &d), 1);
	cr_assert(d.allowed);
	cr_assert_eq(d.remaining, 99);
	cr_assert_eq(d.retry_after_ns, 0);
	cr_assert_eq(d.reset_ns, SEC);
}

/* The fixed window's known weakness, kept as a test so the contrast with
 * the ring stays honest: L just before the edge and L just after it. */
Test(fixed, boundary_burst_admits_2L_in_2ms)
{
	const uint64_t L = 100;
	sluice_fixed_t f = make(L, SEC, 0);
	uint64_t admitted = 0;
	for (uint64_t i = 0; i < L; i++)
		admitted += (uint64_t)take_at(&f, 1, 5 * SEC - MS);
	for (uint64_t i = 0; i < L; i++)
		admitted += (uint64_t)take_at(&f, 1, 5 * SEC + MS);
	cr_assert_eq(admitted, 2 * L, "fixed window admits 2L within 2 ms across its edge");
}

Test(fixed, n_all_or_nothing)
{
	sluice_fixed_t f = make(10, SEC, 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 7, 1, &d), 1);
	cr_assert_eq(d.remaining, 3);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 4, 2, &d), 0, "4 > 3 left: nothing taken");
	cr_assert_eq(d.remaining, 3);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 3, 3, &d), 1, "the 3 left are still there");
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 10, SEC, &d), 1, "n == L passes in a fresh window");
}

Test(fixed, n_zero_and_above_limit)
{
	sluice_fixed_t f = make(10, SEC, 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 0, 1, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 11, 1, &d), SLUICE_ETOOBIG);
	cr_assert_not(d.allowed);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	/* an impossible request takes nothing */
	cr_assert_eq(sluice_fixed_acquire_at(&f, 10, 2, &d), 1);
}

Test(fixed, clock_backwards_cannot_reopen_a_window)
{
	sluice_fixed_t f = make(5, SEC, 0);
	cr_assert_eq(take_at(&f, 5, 20 * SEC + 100 * MS), 1);
	/* NTP-style step back by 7 s: treated as the newest window's start */
	sluice_decision_t d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 13 * SEC, &d), 0);
	cr_assert_eq(d.now_ns, 20 * SEC, "time is held at the newest window");
	cr_assert_eq(d.retry_after_ns, SEC);
	for (uint64_t t = 0; t < 20 * SEC; t += 250 * MS)
		cr_assert_eq(take_at(&f, 1, t), 0, "backwards reading %llu must not pass",
		             (unsigned long long)t);
	/* forward again: the next window opens normally */
	cr_assert_eq(take_at(&f, 5, 21 * SEC), 1);
	cr_assert_eq(take_at(&f, 1, 21 * SEC + 1), 0);
}

Test(fixed, long_idle_then_burst)
{
	sluice_fixed_t f = make(50, 100 * MS, 0);
	cr_assert_eq(take_at(&f, 50, 1), 1);
	uint64_t later = 3600 * SEC + 7 * MS; /* an hour idle */
	uint64_t admitted = 0;
	for (int i = 0; i < 80; i++)
		admitted += (uint64_t)take_at(&f, 1, later);
	cr_assert_eq(admitted, 50, "one full window, no more, after idling");
}

Test(fixed, time_base_near_2_64)
{
	/* the _at variants take any caller time: arithmetic must not wrap */
	const uint64_t W = SEC;
	uint64_t t = (UINT64_MAX / W - 1) * W; /* start of the last whole window but one */
	sluice_fixed_t f = make(3, W, t);
	sluice_decision_t d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 3, t + 10, &d), 1);
	cr_assert_eq(d.reset_ns, W - 10);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, t + 20, &d), 0);
	cr_assert_eq(d.retry_after_ns, W - 20);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 3, t + W, &d), 1);
}

struct bad_cfg {
	uint64_t limit, window_ns;
	int clock; /* 0 manual, 1 coarse */
	int want;
};

ParameterizedTestParameters(fixed, invalid_config)
{
	static struct bad_cfg params[] = {
		{ 0, SEC, 0, SLUICE_ELIMIT },
		{ SLUICE_FIXED_LIMIT_MAX + 1, SEC, 0, SLUICE_ELIMIT },
		{ 10, 0, 0, SLUICE_EWINDOW },
		{ 10, 1 * MS, 1, SLUICE_ERESOLUTION }, /* coarse ticks are >= 1 ms */
		{ 1, 1, 0, 0 },                         /* smallest valid */
		{ SLUICE_FIXED_LIMIT_MAX, SEC, 0, 0 },  /* largest valid limit */
	};
	return cr_make_param_array(struct bad_cfg, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct bad_cfg *p, fixed, invalid_config)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 0);
	sluice_fixed_config_t cfg = { .limit = p->limit, .window_ns = p->window_ns,
		                      .clock = p->clock ? &sluice_clock_coarse : &m };
	if (p->clock && sluice_clock_resolution_ns(&sluice_clock_coarse) <= 1 * MS)
		cr_skip_test("coarse clock resolution is %llu ns here",
		             (unsigned long long)sluice_clock_resolution_ns(&sluice_clock_coarse));
	sluice_fixed_t f, before;
	memset(&f, 0xab, sizeof(f));
	memcpy(&before, &f, sizeof(f));
	int rc = sluice_fixed_init(&f, &cfg);
	cr_assert_eq(rc, p->want, "limit=%llu window=%llu: got %s, want %s",
	             (unsigned long long)p->limit, (unsigned long long)p->window_ns,
	             sluice_err_name(rc), sluice_err_name(p->want));
	if (rc != 0)
		cr_assert_eq(memcmp(&f, &before, sizeof(f)), 0, "a failed init must not touch the limiter");
}

Test(fixed, null_arguments)
{
	sluice_fixed_t f;
	sluice_fixed_config_t cfg = { .limit = 1, .window_ns = SEC };
	cr_assert_eq(sluice_fixed_init(NULL, &cfg), SLUICE_EINVAL);
	cr_assert_eq(sluice_fixed_init(&f, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_fixed_size(), sizeof(sluice_fixed_t));
}

Test(fixed, refund_gives_back_while_the_window_lasts)
{
	sluice_fixed_t f = make(10, SEC, 0);
	sluice_decision_t a, d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 10, 5 * SEC + 1, &a), 1);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 3, 5 * SEC + 2, &d), 0);
	cr_assert_eq(sluice_fixed_refund(&f, 4, &a), 0);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 4, 5 * SEC + 3, &d), 1, "the 4 came back");
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 5 * SEC + 4, &d), 0, "and no more");
	cr_assert_eq(sluice_fixed_refund(&f, 11, &a), SLUICE_EINVAL, "more than counted");
	cr_assert_eq(sluice_fixed_refund(&f, 0, &a), SLUICE_EINVAL);
	/* next window: the old permits count no more; refunding them is a no-op */
	cr_assert_eq(sluice_fixed_acquire_at(&f, 10, 6 * SEC, &d), 1);
	cr_assert_eq(sluice_fixed_refund(&f, 6, &a), 0);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 6 * SEC + 1, &d), 0, "the new window is untouched");
}
