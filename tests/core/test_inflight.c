/* SPDX-License-Identifier: MIT */
/*
 * test_inflight.c - concurrency limiter: acquire/release sequences, n > 1
 * all or nothing, n > K, bad releases refused and counted (never printed), the
 * decision fields, clock jumps (time plays no part), limits near 2^62,
 * invalid configuration.  Deterministic: one thread, manual clock.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <string.h>

#include "sluice/sluice.h"
#include "sluice/inflight.h"
#include "test_stall.h"

#define SEC 1000000000ULL

TestSuite(inflight, .timeout = 30);

static sluice_clock_t mclock;

/* Slots held, read through the one public query: K - available, exact
 * while held <= K and no other thread runs. */
static uint64_t held_of(const sluice_inflight_t *f)
{
	uint64_t K = atomic_load_explicit(&((sluice_inflight_t *)f)->limit, memory_order_relaxed);
	return K - sluice_inflight_available(f);
}

static sluice_inflight_t make(uint64_t limit)
{
	sluice_inflight_t f;
	sluice_clock_manual_init(&mclock, 10 * SEC);
	sluice_inflight_config_t cfg = { .limit = limit, .clock = &mclock };
	int rc = sluice_inflight_init(&f, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
	return f;
}

Test(inflight, acquire_release_sequence)
{
	sluice_inflight_t f = make(5);
	sluice_decision_t d;
	for (uint64_t i = 1; i <= 5; i++) {
		cr_assert_eq(sluice_inflight_acquire(&f, 1, &d), 1, "slot %llu",
		             (unsigned long long)i);
		cr_assert(d.allowed);
		cr_assert_eq(d.limit, 5);
		cr_assert_eq(d.remaining, 5 - i);
		cr_assert_eq(d.retry_after_ns, 0);
		cr_assert_eq(d.reset_ns, SLUICE_NEVER, "no time bounds a hold");
		cr_assert_eq(held_of(&f), i);
	}
	/* full: refused, and a refusal takes nothing */
	cr_assert_eq(sluice_inflight_acquire(&f, 1, &d), 0);
	cr_assert_not(d.allowed);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(d.retry_after_ns, 0, "a slot may free at any instant: 0 is the lower bound");
	cr_assert_eq(d.reset_ns, SLUICE_NEVER);
	cr_assert_eq(held_of(&f), 5);
	/* one back, one in */
	cr_assert_eq(sluice_inflight_release(&f, 1), 0);
	cr_assert_eq(held_of(&f), 4);
	cr_assert_eq(sluice_inflight_acquire(&f, 1, NULL), 1);
	cr_assert_eq(sluice_inflight_acquire(&f, 1, NULL), 0);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(sluice_inflight_release(&f, 1), 0);
	cr_assert_eq(held_of(&f), 0);
	cr_assert_eq(sluice_inflight_bad_releases(&f), 0);
	/* the same limiter serves again after emptying */
	cr_assert_eq(sluice_inflight_acquire(&f, 5, &d), 1);
	cr_assert_eq(d.remaining, 0);
}

Test(inflight, n_all_or_nothing)
{
	sluice_inflight_t f = make(10);
	sluice_decision_t d;
	cr_assert_eq(sluice_inflight_acquire_at(&f, 7, 1, &d), 1);
	cr_assert_eq(d.remaining, 3);
	cr_assert_eq(sluice_inflight_acquire_at(&f, 4, 2, &d), 0, "4 > 3 free: nothing taken");
	cr_assert_eq(d.remaining, 3);
	cr_assert_eq(held_of(&f), 7);
	cr_assert_eq(sluice_inflight_acquire_at(&f, 3, 3, &d), 1, "the 3 free are still there");
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(sluice_inflight_release(&f, 7), 0, "n > 1 comes back at once");
	cr_assert_eq(held_of(&f), 3);
	cr_assert_eq(sluice_inflight_acquire_at(&f, 8, 4, &d), 0);
	cr_assert_eq(sluice_inflight_acquire_at(&f, 7, 5, &d), 1);
	cr_assert_eq(sluice_inflight_release(&f, 3), 0);
	cr_assert_eq(sluice_inflight_release(&f, 7), 0);
	cr_assert_eq(sluice_inflight_acquire_at(&f, 10, 6, &d), 1, "n == K passes when empty");
}

Test(inflight, n_zero_and_above_limit)
{
	sluice_inflight_t f = make(10);
	sluice_decision_t d;
	cr_assert_eq(sluice_inflight_acquire_at(&f, 0, 1, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_inflight_acquire_at(&f, 11, 7, &d), SLUICE_ETOOBIG);
	cr_assert_not(d.allowed);
	cr_assert_eq(d.limit, 10);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	cr_assert_eq(d.now_ns, 7);
	cr_assert_eq(sluice_inflight_acquire_at(&f, UINT64_MAX, 1, NULL), SLUICE_ETOOBIG);
	cr_assert_eq(held_of(&f), 0, "an impossible request takes nothing");
	cr_assert_eq(sluice_inflight_release(&f, 0), SLUICE_EINVAL);
	cr_assert_eq(sluice_inflight_bad_releases(&f), 0, "n = 0 is invalid, not a bad release");
	cr_assert_eq(sluice_inflight_acquire_at(&f, 10, 2, &d), 1);
}

/* A release of more than is held: refused, nothing changes, counted. */
Test(inflight, bad_release_counted_never_negative)
{
	sluice_inflight_t f = make(5);
	cr_assert_eq(sluice_inflight_release(&f, 1), SLUICE_ERELEASE, "release without acquire");
	cr_assert_eq(held_of(&f), 0, "never below 0");
	cr_assert_eq(sluice_inflight_bad_releases(&f), 1);

	cr_assert_eq(sluice_inflight_acquire(&f, 2, NULL), 1);
	cr_assert_eq(sluice_inflight_release(&f, 3), SLUICE_ERELEASE, "3 > 2 held");
	cr_assert_eq(held_of(&f), 2, "a bad release changes nothing");
	cr_assert_eq(sluice_inflight_bad_releases(&f), 2);
	cr_assert_eq(sluice_inflight_release(&f, UINT64_MAX), SLUICE_ERELEASE);
	cr_assert_eq(sluice_inflight_release(&f, 6), SLUICE_ERELEASE, "above K");
	cr_assert_eq(held_of(&f), 2);
	cr_assert_eq(sluice_inflight_bad_releases(&f), 4);

	/* the legitimate holder still gets its slots back, exactly */
	cr_assert_eq(sluice_inflight_release(&f, 2), 0);
	cr_assert_eq(held_of(&f), 0);
	cr_assert_eq(sluice_inflight_release(&f, 1), SLUICE_ERELEASE, "double release");
	cr_assert_eq(held_of(&f), 0);
	cr_assert_eq(sluice_inflight_bad_releases(&f), 5);
	/* and the limit is intact: exactly K pass */
	cr_assert_eq(sluice_inflight_acquire(&f, 5, NULL), 1);
	cr_assert_eq(sluice_inflight_acquire(&f, 1, NULL), 0);
}

/* A bad release is reported through the counter and the return code only:
 * the library writes nothing to stderr, in any build (the old code printed
 * one line per limiter in builds without NDEBUG). */
Test(inflight, bad_release_counted_and_never_printed, .init = cr_redirect_stderr)
{
	sluice_inflight_t a = make(4), b = make(4);
	cr_assert_eq(sluice_inflight_acquire(&a, 1, NULL), 1);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(sluice_inflight_release(&a, 2), SLUICE_ERELEASE);
	cr_assert_eq(sluice_inflight_release(&b, 7), SLUICE_ERELEASE);
	cr_assert_eq(sluice_inflight_refund(&b, 1, NULL), SLUICE_ERELEASE);
	cr_assert_eq(sluice_inflight_bad_releases(&a), 3);
	cr_assert_eq(sluice_inflight_bad_releases(&b), 2);
	fflush(stderr);
	cr_assert_stderr_eq_str("", "the library wrote to stderr");
}

Test(inflight, refund_is_release)
{
	sluice_inflight_t f = make(4);
	sluice_decision_t d;
	cr_assert_eq(sluice_inflight_acquire(&f, 3, &d), 1);
	cr_assert_eq(sluice_inflight_refund(&f, 3, &d), 0, "exact refund");
	cr_assert_eq(held_of(&f), 0);
	cr_assert_eq(sluice_inflight_acquire(&f, 2, &d), 1);
	cr_assert_eq(sluice_inflight_refund(&f, 2, NULL), 0, "the admission's time is unused");
	cr_assert_eq(sluice_inflight_refund(&f, 0, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_inflight_refund(&f, 1, &d), SLUICE_ERELEASE,
	             "refund of more than held: nothing changes");
	cr_assert_eq(held_of(&f), 0);
	cr_assert_eq(sluice_inflight_bad_releases(&f), 1);
}

/* Time plays no part: a clock set back by seconds (or forward by hours)
 * changes no admission; d->now_ns is the reading as given. */
Test(inflight, clock_jumps_change_nothing)
{
	sluice_inflight_t f = make(3);
	sluice_decision_t d;
	sluice_clock_manual_set(&mclock, 100 * SEC);
	cr_assert_eq(sluice_inflight_acquire(&f, 2, &d), 1);
	cr_assert_eq(d.now_ns, 100 * SEC, "acquire() reads the limiter's clock");
	sluice_clock_manual_set(&mclock, 93 * SEC); /* NTP-style step back */
	cr_assert_eq(sluice_inflight_acquire(&f, 2, &d), 0, "stepping back frees nothing");
	cr_assert_eq(d.now_ns, 93 * SEC, "the reading as given: time is not clamped here");
	cr_assert_eq(d.remaining, 1);
	sluice_clock_manual_set(&mclock, 3600 * SEC); /* an hour later */
	cr_assert_eq(sluice_inflight_acquire(&f, 2, &d), 0, "nor does waiting: only release does");
	cr_assert_eq(sluice_inflight_acquire(&f, 1, &d), 1);
	sluice_clock_manual_set(&mclock, 0);
	cr_assert_eq(sluice_inflight_release(&f, 3), 0);
	cr_assert_eq(sluice_inflight_acquire(&f, 3, &d), 1);
	cr_assert_eq(d.now_ns, 0);
}

Test(inflight, time_base_near_2_64)
{
	sluice_inflight_t f = make(2);
	sluice_decision_t d;
	cr_assert_eq(sluice_inflight_acquire_at(&f, 2, UINT64_MAX, &d), 1);
	cr_assert_eq(d.now_ns, UINT64_MAX);
	cr_assert_eq(sluice_inflight_acquire_at(&f, 1, UINT64_MAX - 1, &d), 0);
	cr_assert_eq(d.now_ns, UINT64_MAX - 1);
	cr_assert_eq(sluice_inflight_acquire_at(&f, 3, UINT64_MAX, &d), SLUICE_ETOOBIG);
	cr_assert_eq(d.now_ns, UINT64_MAX);
}

/* K at its maximum: held + n <= 2K must not wrap, remaining stays exact. */
Test(inflight, limit_max_no_overflow)
{
	const uint64_t K = SLUICE_INFLIGHT_LIMIT_MAX;
	sluice_inflight_t f = make(K);
	sluice_decision_t d;
	cr_assert_eq(sluice_inflight_acquire_at(&f, K - 1, 1, &d), 1);
	cr_assert_eq(d.remaining, 1);
	cr_assert_eq(sluice_inflight_acquire_at(&f, K, 1, &d), 0, "K more would make 2K - 1");
	cr_assert_eq(d.remaining, 1);
	cr_assert_eq(sluice_inflight_acquire_at(&f, 2, 1, &d), 0);
	cr_assert_eq(sluice_inflight_acquire_at(&f, 1, 1, &d), 1);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(held_of(&f), K);
	cr_assert_eq(sluice_inflight_acquire_at(&f, K + 1, 1, &d), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_inflight_release(&f, K), 0);
	cr_assert_eq(held_of(&f), 0);
	cr_assert_eq(sluice_inflight_acquire_at(&f, K, 1, &d), 1);
}

Test(inflight, decision_may_be_null_and_default_clock)
{
	sluice_inflight_t f;
	sluice_inflight_config_t cfg = { .limit = 1 }; /* NULL clock: the cached clock */
	cr_assert_eq(sluice_inflight_init(&f, &cfg), 0);
	cr_assert_eq(f.clock, &sluice_clock_cached);
	cr_assert_eq(sluice_inflight_acquire(&f, 1, NULL), 1);
	sluice_decision_t d;
	cr_assert_eq(sluice_inflight_acquire(&f, 1, &d), 0);
	cr_assert_gt(d.now_ns, 0, "a real reading of the cached clock");
	cr_assert_eq(sluice_inflight_release(&f, 1), 0);
	sluice_inflight_destroy(&f);
	sluice_inflight_destroy(NULL);
}

struct bad_cfg {
	uint64_t limit;
	int clock; /* 0 manual, 1 an unknown kind */
	int want;
};

ParameterizedTestParameters(inflight, invalid_config)
{
	static struct bad_cfg params[] = {
		{ 0, 0, SLUICE_ELIMIT },
		{ SLUICE_INFLIGHT_LIMIT_MAX + 1, 0, SLUICE_ELIMIT },
		{ UINT64_MAX, 0, SLUICE_ELIMIT },
		{ 10, 1, SLUICE_ECLOCK },
		{ 0, 1, SLUICE_ELIMIT },                /* the limit is checked before the clock */
		{ 1, 0, 0 },                             /* smallest valid */
		{ SLUICE_INFLIGHT_LIMIT_MAX, 0, 0 },     /* largest valid */
	};
	return cr_make_param_array(struct bad_cfg, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct bad_cfg *p, inflight, invalid_config)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 0);
	if (p->clock)
		m.kind = (sluice_clock_kind_t)7;
	sluice_inflight_config_t cfg = { .limit = p->limit, .clock = &m };
	sluice_inflight_t f, before;
	memset(&f, 0xab, sizeof(f));
	memcpy(&before, &f, sizeof(f));
	int rc = sluice_inflight_init(&f, &cfg);
	cr_assert_eq(rc, p->want, "limit=%llu: got %s, want %s", (unsigned long long)p->limit,
	             sluice_err_name(rc), sluice_err_name(p->want));
	if (rc != 0) {
		cr_assert_eq(memcmp(&f, &before, sizeof(f)), 0, "a failed init must not touch the limiter");
	} else {
		cr_assert_eq(held_of(&f), 0);
		cr_assert_eq(sluice_inflight_bad_releases(&f), 0);
		cr_assert_eq(sluice_inflight_acquire_at(&f, p->limit, 0, NULL), 1);
	}
}

Test(inflight, null_arguments_and_size)
{
	sluice_inflight_t f;
	sluice_inflight_config_t cfg = { .limit = 1 };
	cr_assert_eq(sluice_inflight_init(NULL, &cfg), SLUICE_EINVAL);
	cr_assert_eq(sluice_inflight_init(&f, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_inflight_size(), sizeof(sluice_inflight_t));
	cr_assert_eq(sizeof(sluice_inflight_t), 2 * SLUICE_CACHELINE, "as MEMORY says");
	cr_assert_eq(offsetof(sluice_inflight_t, held) % SLUICE_CACHELINE, 0,
	             "the hot count is alone on its line");
}

/* ---- available and set_limit ---------------------------------------- */

Test(inflight, available_is_the_largest_n_that_passes)
{
	sluice_inflight_t f = make(7);
	cr_assert_eq(sluice_inflight_available(&f), 7);
	cr_assert_eq(sluice_inflight_acquire(&f, 3, NULL), 1);
	cr_assert_eq(sluice_inflight_available(&f), 4);
	cr_assert_eq(sluice_inflight_acquire(&f, 5, NULL), 0, "one more than available");
	cr_assert_eq(sluice_inflight_available(&f), 4, "a refusal took nothing");
	cr_assert_eq(sluice_inflight_acquire(&f, 4, NULL), 1, "exactly available");
	cr_assert_eq(sluice_inflight_available(&f), 0);
	/* time plays no part: clock jumps change nothing */
	sluice_clock_manual_set(&mclock, UINT64_MAX);
	cr_assert_eq(sluice_inflight_available(&f), 0);
	cr_assert_eq(sluice_inflight_release(&f, 7), 0);
	sluice_clock_manual_set(&mclock, 1);
	cr_assert_eq(sluice_inflight_available(&f), 7);
	/* near the top of the range */
	sluice_inflight_t g = make(SLUICE_INFLIGHT_LIMIT_MAX);
	cr_assert_eq(sluice_inflight_acquire(&g, SLUICE_INFLIGHT_LIMIT_MAX - 1, NULL), 1);
	cr_assert_eq(sluice_inflight_available(&g), 1);
}

Test(inflight, set_limit_keeps_what_is_held)
{
	sluice_inflight_t f = make(10);
	sluice_decision_t d;
	cr_assert_eq(sluice_inflight_acquire(&f, 8, NULL), 1);
	/* lower below held: nothing forgotten, refusals until releases */
	cr_assert_eq(sluice_inflight_set_limit(&f, 5), 0);
	cr_assert_eq(sluice_inflight_available(&f), 0);
	cr_assert_eq(sluice_inflight_acquire(&f, 1, &d), 0);
	cr_assert_eq(d.limit, 5);
	cr_assert_eq(d.remaining, 0, "held above K: nothing remains, no wrap");
	cr_assert_eq(sluice_inflight_acquire(&f, 6, &d), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_inflight_release(&f, 3), 0); /* held 5 = K */
	cr_assert_eq(sluice_inflight_acquire(&f, 1, NULL), 0);
	cr_assert_eq(sluice_inflight_release(&f, 1), 0); /* held 4 */
	cr_assert_eq(sluice_inflight_available(&f), 1);
	cr_assert_eq(sluice_inflight_acquire(&f, 1, &d), 1);
	cr_assert_eq(d.remaining, 0);
	/* raise: exactly the difference */
	cr_assert_eq(sluice_inflight_set_limit(&f, 9), 0);
	cr_assert_eq(sluice_inflight_available(&f), 4);
	cr_assert_eq(sluice_inflight_acquire(&f, 5, NULL), 0);
	cr_assert_eq(sluice_inflight_acquire(&f, 4, NULL), 1);
	cr_assert_eq(sluice_inflight_release(&f, 9), 0, "every slot held comes back");
	cr_assert_eq(sluice_inflight_release(&f, 1), SLUICE_ERELEASE, "and no more");
	cr_assert_eq(sluice_inflight_available(&f), 9);
	/* invalid: the init's code, nothing changes */
	cr_assert_eq(sluice_inflight_set_limit(&f, 0), SLUICE_ELIMIT);
	cr_assert_eq(sluice_inflight_set_limit(&f, SLUICE_INFLIGHT_LIMIT_MAX + 1), SLUICE_ELIMIT);
	cr_assert_eq(sluice_inflight_set_limit(NULL, 3), SLUICE_EINVAL);
	cr_assert_eq(sluice_inflight_available(&f), 9);
	cr_assert_eq(sluice_inflight_set_limit(&f, SLUICE_INFLIGHT_LIMIT_MAX), 0);
	cr_assert_eq(sluice_inflight_available(&f), SLUICE_INFLIGHT_LIMIT_MAX);
}

/* ---- a change while an acquire is under way ------------------------------ */

/*
 * An acquire that loses its CAS across a change decides again against the
 * limit in force (inflight.h, READINGS ACROSS A CHANGE).  The victim reads
 * K = 100; just before its CAS the attack lowers K to 10 and takes all 10.
 * The victim's CAS fails; against 10 it is refused.  Judged against the
 * 100 it read, held would reach 11 while the only limit in force is 10.
 */
static int change_rc;

static void attack_lower_then_fill(void *arg)
{
	cr_assert_eq(sluice_inflight_set_limit(arg, 10), 0);
	change_rc = sluice_inflight_acquire_at(arg, 10, 0, NULL);
}

Test(inflight, an_acquire_across_a_change_is_judged_by_the_new_limit)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
	sluice_inflight_t *f = stall_page();
	cr_assert_not_null(f);
	sluice_inflight_config_t cfg = { .limit = 100, .clock = &mclock };
	sluice_clock_manual_init(&mclock, 0);
	cr_assert_eq(sluice_inflight_init(f, &cfg), 0);
	stall_arm(&f->held, sizeof(f->held), attack_lower_then_fill, f);
	sluice_decision_t d;
	int rc = sluice_inflight_acquire_at(f, 1, 0, &d);
	cr_assert(stall_fired(), "the victim never wrote held");
	cr_assert_eq(change_rc, 1);
	cr_assert_eq(rc, 0, "held 10 against K = 10: admitted against d.limit %llu",
	             (unsigned long long)d.limit);
	cr_assert_eq(d.limit, 10);
	cr_assert_eq(held_of(f), 10);
	stall_page_free(f);
}
