/* SPDX-License-Identifier: MIT */
/*
 * test_composite.c - all-or-nothing across limiters, deterministic.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "sluice/sluice.h"

#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(composite, .timeout = 30);

static sluice_clock_t mclock;

static sluice_limiter_t *fixed(uint64_t limit, uint64_t window_ns)
{
	sluice_limiter_config_t cfg = { .algo = SLUICE_ALGO_FIXED,
		                        .fixed = { .limit = limit, .window_ns = window_ns,
		                                   .clock = &mclock } };
	sluice_limiter_t *l = NULL;
	int rc = sluice_limiter_new(&cfg, &l);
	cr_assert_eq(rc, 0, "new: %s", sluice_err_name(rc));
	return l;
}

static sluice_limiter_t *ring(uint64_t limit, uint64_t window_ns, uint32_t buckets)
{
	sluice_limiter_config_t cfg = { .algo = SLUICE_ALGO_WINDOW,
		                        .window = { .limit = limit, .window_ns = window_ns,
		                                    .buckets = buckets,
		                                    .clock = &mclock } };
	sluice_limiter_t *l = NULL;
	int rc = sluice_limiter_new(&cfg, &l);
	cr_assert_eq(rc, 0, "new: %s", sluice_err_name(rc));
	return l;
}

static sluice_limiter_t *composite(sluice_limiter_t **parts, unsigned count)
{
	sluice_limiter_config_t cfg = { .algo = SLUICE_ALGO_COMPOSITE };
	cfg.composite.count = count;
	for (unsigned i = 0; i < count; i++)
		cfg.composite.parts[i] = parts[i];
	sluice_limiter_t *l = NULL;
	int rc = sluice_limiter_new(&cfg, &l);
	cr_assert_eq(rc, 0, "composite: %s", sluice_strerror(rc));
	return l;
}

/* "1000 per second, and also at most 200 in any 100 ms", scaled down */
Test(composite, both_limits_hold)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_limiter_t *parts[2] = { ring(10, SEC, 10), ring(4, 100 * MS, 10) };
	sluice_limiter_t *c = composite(parts, 2);
	uint64_t admitted = 0;
	for (uint64_t t = 0; t < SEC; t += 5 * MS)
		admitted += (uint64_t)sluice_limiter_acquire_at(c, 1, t, NULL);
	cr_assert_eq(admitted, 10, "the per-second limit binds over 1 s");
	/* within the first 100 ms of the next second only 4 may pass */
	admitted = 0;
	for (uint64_t t = 2 * SEC; t < 2 * SEC + 100 * MS; t += MS)
		admitted += (uint64_t)sluice_limiter_acquire_at(c, 1, t, NULL);
	cr_assert_eq(admitted, 4, "the 100 ms limit binds inside it");
	sluice_limiter_free(c);
	sluice_limiter_free(parts[0]);
	sluice_limiter_free(parts[1]);
}

Test(composite, a_refusal_gives_back_what_was_taken)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_limiter_t *parts[3] = { fixed(100, SEC), ring(100, SEC, 10), fixed(5, SEC) };
	sluice_limiter_t *c = composite(parts, 3);
	sluice_decision_t d;
	cr_assert_eq(sluice_limiter_acquire_at(c, 4, 10, &d), 1);
	cr_assert_eq(d.remaining, 1, "the tightest part's remaining");
	cr_assert_eq(d.limit, 5);
	cr_assert_eq(sluice_limiter_acquire_at(c, 3, 20, &d), 0, "the third part refuses 3");
	cr_assert_not(d.allowed);
	cr_assert_eq(d.limit, 5);
	cr_assert_eq(d.retry_after_ns, SEC - 20);
	/* the first two parts got their 3 back: 96 left in each */
	cr_assert_eq(sluice_limiter_acquire_at(parts[0], 96, 30, NULL), 1);
	cr_assert_eq(sluice_limiter_acquire_at(parts[0], 1, 31, NULL), 0);
	cr_assert_eq(sluice_limiter_acquire_at(parts[1], 96, 32, NULL), 1);
	cr_assert_eq(sluice_limiter_acquire_at(parts[1], 1, 33, NULL), 0);
	sluice_limiter_free(c);
	for (int i = 0; i < 3; i++)
		sluice_limiter_free(parts[i]);
}

Test(composite, errors_take_nothing)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_limiter_t *parts[2] = { fixed(10, SEC), fixed(3, SEC) };
	sluice_limiter_t *c = composite(parts, 2);
	sluice_decision_t d;
	cr_assert_eq(sluice_limiter_acquire_at(c, 4, 1, &d), SLUICE_ETOOBIG, "4 can never pass the second");
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	cr_assert_eq(sluice_limiter_acquire_at(parts[0], 10, 2, NULL), 1, "the first part was given its 4 back");
	cr_assert_eq(sluice_limiter_acquire_at(c, 0, 3, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_limiter_refund(c, 1, &d), SLUICE_ENOTSUP);
	cr_assert_eq(sluice_limiter_release(c, 1), 0);
	sluice_limiter_free(c);
	sluice_limiter_free(parts[0]);
	sluice_limiter_free(parts[1]);
}

Test(composite, invalid_config)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_limiter_t *a = fixed(1, SEC), *b = fixed(1, SEC);
	sluice_limiter_config_t cfg = { .algo = SLUICE_ALGO_COMPOSITE };
	sluice_limiter_t *out = (sluice_limiter_t *)&cfg; /* must stay untouched */
	cfg.composite.parts[0] = a;
	cfg.composite.count = 1;
	cr_assert_eq(sluice_limiter_new(&cfg, &out), SLUICE_ECOUNT);
	cfg.composite.count = 9;
	cr_assert_eq(sluice_limiter_new(&cfg, &out), SLUICE_ECOUNT);
	cfg.composite.count = 2; /* parts[1] is NULL */
	cr_assert_eq(sluice_limiter_new(&cfg, &out), SLUICE_ECOUNT);
	cfg.composite.parts[1] = b;
	sluice_limiter_t *c = NULL;
	cr_assert_eq(sluice_limiter_new(&cfg, &c), 0);
	cfg.composite.parts[1] = c; /* nesting */
	cr_assert_eq(sluice_limiter_new(&cfg, &out), SLUICE_EALGO);
	cr_assert_eq(out, (sluice_limiter_t *)&cfg, "a failed new leaves *out alone");
	sluice_composite_t raw;
	cr_assert_eq(sluice_composite_init(&raw, NULL), SLUICE_EINVAL);
	sluice_limiter_free(c);
	sluice_limiter_free(a);
	sluice_limiter_free(b);
}

/* n = 0 is refused before any part is asked, and the caller's decisions
 * are left exactly as they were.  The old code let the first part refuse
 * without filling its entry and then copied that entry to @d: here the
 * entry is the caller's own each[0] (poisoned 0x55), so the copy shows as
 * 0x55 bytes in a @d poisoned 0xAA. */
Test(composite, zero_permits_leave_the_decisions_alone)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_limiter_t *parts[2] = { fixed(10, SEC), ring(10, SEC, 10) };
	sluice_limiter_t *c = composite(parts, 2);
	sluice_composite_t raw;
	sluice_composite_config_t cc = { .parts = { parts[0], parts[1] }, .count = 2 };
	cr_assert_eq(sluice_composite_init(&raw, &cc), 0);
	sluice_decision_t d, each[SLUICE_COMPOSITE_MAX], want_d, want_each[SLUICE_COMPOSITE_MAX];
	memset(&d, 0xAA, sizeof(d));
	memset(each, 0x55, sizeof(each));
	memcpy(&want_d, &d, sizeof(d));
	memcpy(want_each, each, sizeof(each));
	cr_assert_eq(sluice_composite_acquire_each_at(&raw, 0, 5, &d, each), SLUICE_EINVAL);
	cr_assert(memcmp(&d, &want_d, sizeof(d)) == 0, "n = 0 wrote the caller's decision");
	cr_assert(memcmp(each, want_each, sizeof(each)) == 0, "n = 0 wrote a part's entry");
	cr_assert_eq(sluice_composite_acquire_at(&raw, 0, 5, &d), SLUICE_EINVAL);
	cr_assert(memcmp(&d, &want_d, sizeof(d)) == 0, "n = 0 wrote the caller's decision");
	cr_assert_eq(sluice_limiter_acquire_at(c, 0, 5, &d), SLUICE_EINVAL);
	cr_assert(memcmp(&d, &want_d, sizeof(d)) == 0, "n = 0 wrote the caller's decision");
	/* nothing was taken from either part */
	cr_assert_eq(sluice_limiter_acquire_at(c, 10, 6, NULL), 1, "all 10 still free in both parts");
	sluice_limiter_free(c);
	sluice_limiter_free(parts[0]);
	sluice_limiter_free(parts[1]);
}

/* The same limiter listed twice would be charged 2n per admission (the old
 * code admitted 5 of 10 through [a, a]).  Init refuses it, wherever the
 * second listing is, and leaves the composite and *out alone. */
Test(composite, a_part_listed_twice_is_refused)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_limiter_t *a = fixed(10, SEC), *b = fixed(10, SEC), *e = ring(10, SEC, 10);
	sluice_limiter_config_t cfg = { .algo = SLUICE_ALGO_COMPOSITE };
	sluice_limiter_t *out = (sluice_limiter_t *)&cfg; /* must stay untouched */
	sluice_limiter_t *lists[][3] = { { a, a, NULL }, { a, b, a }, { a, b, b }, { e, a, e } };
	unsigned counts[] = { 2, 3, 3, 3 };
	for (unsigned t = 0; t < 4; t++) {
		cfg.composite.count = counts[t];
		for (unsigned i = 0; i < 3; i++)
			cfg.composite.parts[i] = lists[t][i];
		int rc = sluice_limiter_new(&cfg, &out);
		cr_assert_eq(rc, SLUICE_EDUPLICATE, "list %u: %s", t, sluice_err_name(rc));
		cr_assert_eq(out, (sluice_limiter_t *)&cfg, "a failed new leaves *out alone");
		sluice_composite_t raw;
		memset(&raw, 0x5a, sizeof(raw));
		sluice_composite_t copy = raw;
		cr_assert_eq(sluice_composite_init(&raw, &cfg.composite), SLUICE_EDUPLICATE);
		cr_assert(memcmp(&raw, &copy, sizeof(raw)) == 0, "a failed init leaves @c alone");
	}
	cr_assert_str_eq(sluice_err_name(SLUICE_EDUPLICATE), "SLUICE_EDUPLICATE");
	/* distinct parts are fine, and a holds its whole limit for them */
	cfg.composite.count = 3;
	cfg.composite.parts[0] = a;
	cfg.composite.parts[1] = b;
	cfg.composite.parts[2] = e;
	sluice_limiter_t *c = NULL;
	cr_assert_eq(sluice_limiter_new(&cfg, &c), 0);
	uint64_t admitted = 0;
	for (int i = 0; i < 20; i++)
		admitted += (uint64_t)sluice_limiter_acquire_at(c, 1, 1, NULL);
	cr_assert_eq(admitted, 10);
	sluice_limiter_free(c);
	sluice_limiter_free(a);
	sluice_limiter_free(b);
	sluice_limiter_free(e);
}

Test(composite, inflight_part_released_and_no_never_reset)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_limiter_config_t ci = { .algo = SLUICE_ALGO_INFLIGHT,
		                       .inflight = { .limit = 2, .clock = &mclock } };
	sluice_limiter_t *parts[2] = { fixed(100, SEC), NULL };
	cr_assert_eq(sluice_limiter_new(&ci, &parts[1]), 0);
	sluice_limiter_t *c = composite(parts, 2);
	sluice_decision_t d;
	cr_assert_eq(sluice_limiter_acquire_at(c, 2, 100, &d), 1);
	cr_assert_eq(d.reset_ns, SEC - 100, "the fixed window's reset, not SLUICE_NEVER");
	cr_assert_eq(sluice_limiter_acquire_at(c, 1, 200, &d), 0, "both in-flight slots are held");
	cr_assert_eq(sluice_limiter_release(c, 2), 0, "release reaches the concurrency part");
	cr_assert_eq(sluice_limiter_acquire_at(c, 1, 300, &d), 1);
	sluice_limiter_free(c);
	sluice_limiter_free(parts[0]);
	sluice_limiter_free(parts[1]);
}
