/* SPDX-License-Identifier: MIT */
/*
 * test_fixed.c - fixed window: exact per window, the boundary burst it
 * cannot prevent, all-or-nothing n, clock jumps, invalid configuration.
 * Deterministic: every test drives a manual clock.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sluice/sluice.h"
#include "set_limit_load.h"
#include "test_pace.h"
#include "test_stall.h"

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
	/* next window: the old permits count no more; refunding them says so (EEXPIRED) */
	cr_assert_eq(sluice_fixed_acquire_at(&f, 10, 6 * SEC, &d), 1);
	cr_assert_eq(sluice_fixed_refund(&f, 6, &a), SLUICE_EEXPIRED);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 6 * SEC + 1, &d), 0, "the new window is untouched");
}

/* ---- available and set_limit ---------------------------------------- */

/* The reference model: the newest window opened, its count, the limit. */
struct model {
	uint64_t head, count, limit, window_ns;
};

static uint64_t model_epoch(const struct model *m, uint64_t t)
{
	uint64_t e = t / m->window_ns;
	return e > m->head ? e : m->head; /* time never runs back */
}

static int model_acquire(struct model *m, uint64_t n, uint64_t t)
{
	if (n > m->limit)
		return SLUICE_ETOOBIG;
	uint64_t e = model_epoch(m, t);
	if (e > m->head) {
		m->head = e;
		m->count = 0;
	}
	if (m->count + n > m->limit)
		return 0;
	m->count += n;
	return 1;
}

static uint64_t model_available(const struct model *m, uint64_t t)
{
	if (model_epoch(m, t) > m->head)
		return m->limit;
	return m->count >= m->limit ? 0 : m->limit - m->count;
}

/* Random acquires, readings that jump back and forward, and limit changes,
 * from a base near 0 and from one near 2^64: available_at equals the model
 * at the next time, the time now and an older one, and is the largest n
 * that then passes. */
struct avail_case {
	uint64_t base;
};

ParameterizedTestParameters(fixed, available_matches_model)
{
	static struct avail_case c[] = { { 0 }, { UINT64_MAX - 4000 * 100 * MS } };
	return cr_make_param_array(struct avail_case, c, sizeof(c) / sizeof(c[0]));
}

ParameterizedTest(struct avail_case *p, fixed, available_matches_model)
{
	const uint64_t W = 100 * MS;
	sluice_fixed_t f = make(20, W, p->base);
	/* a fresh limiter's head is window 0: the model starts there too */
	struct model m = { 0, 0, 20, W };
	uint64_t t = p->base, x = 0x2545F4914F6CDD1DULL;
	for (int i = 0; i < 20000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (x % 97 == 0) {
			uint64_t L = 1 + (x >> 8) % 40;
			cr_assert_eq(sluice_fixed_set_limit(&f, L), 0);
			m.limit = L;
		} else if (x % 13 == 0 && t - p->base > 3 * W) {
			t -= (x >> 12) % (3 * W); /* back, by up to 3 windows */
		} else if (x % 11 == 0) {
			t += (x >> 12) % (5 * W); /* forward, by up to 5 windows */
		} else {
			t += (x >> 12) % (W / 10);
		}
		if (t > UINT64_MAX - 5 * W)
			t -= 3 * W; /* stay near the end of the timeline, never wrap */
		uint64_t older = t - (t - p->base) / 2;
		cr_assert_eq(sluice_fixed_available_at(&f, t), model_available(&m, t), "step %d", i);
		cr_assert_eq(sluice_fixed_available_at(&f, older), model_available(&m, older),
		             "step %d: an older reading", i);
		if (x % 5 == 0) {
			/* the largest n passes, one more would not */
			uint64_t a = model_available(&m, t);
			if (a && a < m.limit) {
				sluice_fixed_t copy = f; /* no decision running */
				cr_assert_eq(sluice_fixed_acquire_at(&copy, a + 1, t, NULL), 0);
			}
		}
		uint64_t n = 1 + (x >> 20) % 6;
		sluice_decision_t d;
		int rc = sluice_fixed_acquire_at(&f, n, t, &d);
		cr_assert_eq(rc, model_acquire(&m, n, t), "step %d: n=%llu", i, (unsigned long long)n);
		if (rc >= 0)
			cr_assert_eq(d.limit, m.limit, "the decision names the limit it used");
	}
}

Test(fixed, available_after_clock_jumps)
{
	sluice_fixed_t f = make(10, SEC, 0);
	cr_assert_eq(sluice_fixed_available_at(&f, 0), 10);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 7, 50 * SEC + 1, NULL), 1);
	cr_assert_eq(sluice_fixed_available_at(&f, 50 * SEC + 2), 3);
	cr_assert_eq(sluice_fixed_available_at(&f, 3 * SEC), 3, "a step back reads the newest window");
	cr_assert_eq(sluice_fixed_available_at(&f, 51 * SEC), 10, "the next window is empty");
	cr_assert_eq(sluice_fixed_available_at(&f, 50 * SEC + 3), 3, "reading took nothing, moved nothing");
	sluice_clock_manual_set(&mclock, 9000 * SEC);
	cr_assert_eq(sluice_fixed_available(&f), 10, "a jump forward: a new window");
	/* at the very end of the timeline */
	const uint64_t W = SEC;
	uint64_t last = UINT64_MAX / W * W; /* start of the last window */
	cr_assert_eq(sluice_fixed_acquire_at(&f, 4, UINT64_MAX, NULL), 1);
	cr_assert_eq(sluice_fixed_available_at(&f, UINT64_MAX), 6);
	cr_assert_eq(sluice_fixed_available_at(&f, last), 6);
	cr_assert_eq(sluice_fixed_available_at(&f, 0), 6);
}

Test(fixed, set_limit_keeps_the_count)
{
	sluice_fixed_t f = make(10, SEC, 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 8, 5 * SEC, NULL), 1);
	/* lower below what is counted: nothing forgotten, refusals until the
	 * window ends */
	cr_assert_eq(sluice_fixed_set_limit(&f, 5), 0);
	cr_assert_eq(sluice_fixed_available_at(&f, 5 * SEC + 1), 0);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 5 * SEC + 1, &d), 0);
	cr_assert_eq(d.limit, 5);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(d.retry_after_ns, SEC - 1);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 6, 5 * SEC + 1, &d), SLUICE_ETOOBIG,
	             "above the new limit: can never pass");
	/* raise: exactly the difference gets in, nothing minted */
	cr_assert_eq(sluice_fixed_set_limit(&f, 12), 0);
	cr_assert_eq(sluice_fixed_available_at(&f, 5 * SEC + 2), 4);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 4, 5 * SEC + 2, &d), 1);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 5 * SEC + 3, NULL), 0);
	/* the next window counts against the new limit from zero */
	cr_assert_eq(sluice_fixed_available_at(&f, 6 * SEC), 12);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 12, 6 * SEC, NULL), 1);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 6 * SEC, NULL), 0);
	/* a refund after a change gives back what was taken, no more */
	cr_assert_eq(sluice_fixed_acquire_at(&f, 3, 7 * SEC, &d), 1);
	cr_assert_eq(sluice_fixed_set_limit(&f, 3), 0);
	cr_assert_eq(sluice_fixed_refund(&f, 3, &d), 0);
	cr_assert_eq(sluice_fixed_available_at(&f, 7 * SEC), 3);
}

Test(fixed, set_limit_rejects_what_init_rejects)
{
	sluice_fixed_t f = make(10, SEC, 0);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 4, 1, NULL), 1);
	cr_assert_eq(sluice_fixed_set_limit(&f, 0), SLUICE_ELIMIT);
	cr_assert_eq(sluice_fixed_set_limit(&f, SLUICE_FIXED_LIMIT_MAX + 1), SLUICE_ELIMIT);
	cr_assert_eq(sluice_fixed_set_limit(NULL, 5), SLUICE_EINVAL);
	cr_assert_eq(sluice_fixed_available_at(&f, 2), 6, "nothing changed");
	cr_assert_eq(sluice_fixed_set_limit(&f, SLUICE_FIXED_LIMIT_MAX), 0, "the largest init takes");
	cr_assert_eq(sluice_fixed_available_at(&f, 2), SLUICE_FIXED_LIMIT_MAX - 4);
}

/*
 * set_limit under load (set_limit_load.h): deciders on one fixed window
 * while the clock thread moves a manual clock, steps it back now and then,
 * and changes the limit every few steps, through FLIMITS.  The header's
 * SET_LIMIT bound, checked exactly: every window admits at most the
 * largest d.limit among its admissions (runs of one epoch).
 */
#define FW 1000ULL /* ns per window */
#define FSTEPS 3000
static const uint64_t FLIMITS[] = { 12, 3, 20, 6, 1, 15 };
#define NFLIMITS (sizeof(FLIMITS) / sizeof(FLIMITS[0]))

static struct sl_decider *fdeciders;
static int nfdeciders;

static int fixed_acquire_cb(void *f, uint64_t n, sluice_decision_t *d)
{
	return sluice_fixed_acquire(f, n, d);
}

static int fixed_set_cb(void *f, uint64_t limit)
{
	return sluice_fixed_set_limit(f, limit);
}

/* The newest window counted in: the count word's full epoch. */
static uint64_t fixed_stamp_cb(void *f, int after)
{
	(void)after;
	return atomic_load_explicit(&((sluice_fixed_t *)f)->epoch, memory_order_seq_cst);
}

static void *fclock_main(void *arg)
{
	sluice_fixed_t *f = arg;
	uint64_t x = 0x2545F4914F6CDD1DULL;
	for (int i = 0; i < FSTEPS; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (i % 5 == 2)
			sl_set(f, fixed_set_cb, fixed_stamp_cb, FLIMITS[(x >> 9) % NFLIMITS]);
		uint64_t now = sluice_clock_now(&mclock);
		if (x % 40 == 0 && now > 3 * FW)
			sluice_clock_manual_set(&mclock, now - x % (2 * FW)); /* a step back */
		else
			sluice_clock_manual_advance(&mclock, x % (FW / 3));
		PACE_WAIT(fdeciders, nfdeciders);
	}
	atomic_store_explicit(&sl_running, 0, memory_order_relaxed);
	return NULL;
}

ParameterizedTestParameters(fixed, set_limit_under_load)
{
	static int threads[] = { 2, 4 };
	return cr_make_param_array(int, threads, sizeof(threads) / sizeof(threads[0]));
}

ParameterizedTest(int *threads, fixed, set_limit_under_load)
{
	sluice_clock_manual_init(&mclock, 1000 * FW);
	sluice_fixed_t f;
	sluice_fixed_config_t cfg = { .limit = FLIMITS[0], .window_ns = FW, .clock = &mclock };
	cr_assert_eq(sluice_fixed_init(&f, &cfg), 0);
	nfdeciders = *threads;
	sl_changes_init(FLIMITS[0]);
	fdeciders = sl_start(*threads, &f, fixed_acquire_cb, FW, 3, 7);
	pthread_t clock_tid;
	cr_assert_eq(pthread_create(&clock_tid, NULL, fclock_main, &f), 0);
	sl_join(fdeciders, *threads, clock_tid);
	sl_check(fdeciders, *threads, FLIMITS, NFLIMITS, 1, 200);
	sl_free(fdeciders, *threads);
}

/* ---- leases: the ring's N = 1 case --------------------------------------- */

static void make_leased(sluice_fixed_t *f, uint64_t limit, uint64_t window_ns, uint32_t lease)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_fixed_config_t cfg = { .limit = limit, .window_ns = window_ns, .clock = &mclock,
		                      .lease = lease };
	int rc = sluice_fixed_init(f, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
}

static void pin_here(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(sched_getcpu(), &set);
	cr_assert_eq(sched_setaffinity(0, sizeof(set), &set), 0);
}

Test(fixed, lease_config)
{
	sluice_fixed_t f;
	memset(&f, 0x5a, sizeof(f));
	sluice_fixed_config_t cfg = { .limit = 100, .window_ns = 1000000, .clock = &mclock,
		                      .lease = SLUICE_WINDOW_LEASE_MAX + 1 };
	sluice_clock_manual_init(&mclock, 0);
	cr_assert_eq(sluice_fixed_init(&f, &cfg), SLUICE_ELEASE);
	cfg.lease = 8;
	cfg.limit = SLUICE_WINDOW_LIMIT_MAX + 1;
	cr_assert_eq(sluice_fixed_init(&f, &cfg), SLUICE_ELIMIT, "the ring's limit range");
	unsigned char *p = (unsigned char *)&f;
	for (size_t i = 0; i < sizeof(f); i++)
		cr_assert_eq(p[i], 0x5a, "a failed init wrote byte %zu", i);
	cfg.limit = 100;
	cr_assert_eq(sluice_fixed_init(&f, &cfg), 0);
	cr_assert_not_null(f.ring);
	/* the inline path hands every decision to the ring, bad n too */
	sluice_decision_t d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 0, 5, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 101, 5, &d), SLUICE_ETOOBIG);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 100, 5, &d), 1);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(sluice_fixed_set_limit(&f, SLUICE_WINDOW_LIMIT_MAX + 1), SLUICE_ELIMIT);
	sluice_fixed_destroy(&f);
	cr_assert_null(f.ring);
	sluice_fixed_destroy(NULL);
}

/* One CPU asking n = 1 fills each window exactly (the ring's leases lose
 * nothing then), a decision spends from the lease (the shared bucket
 * counts more than was admitted after the first take), and every window
 * holds at most L. */
Test(fixed, lease_fills_each_window_exactly_on_one_cpu)
{
	pin_here();
	const uint64_t L = 1000, W = 1000000;
	sluice_fixed_t f;
	make_leased(&f, L, W, 16);
	sluice_decision_t d;
	for (uint64_t k = 3; k < 6; k++) {
		uint64_t admitted = 0;
		while (sluice_fixed_acquire_at(&f, 1, k * W + 7, &d) == 1) {
			admitted++;
			cr_assert_eq(d.limit, L);
			if (admitted == 1) {
				uint64_t own = atomic_load(&f.ring->slots[k & f.ring->mask].word) &
				               SLUICE__SLOT_OWN;
				cr_assert_gt(own, 1, "the first decision took a lease");
			}
		}
		cr_assert_eq(admitted, L, "window %llu", (unsigned long long)k);
		cr_assert_eq(d.retry_after_ns, W - 7, "refused until the next window");
		cr_assert_eq(sluice_fixed_available_at(&f, k * W + 8), 0);
	}
	/* a clock set back reads as the newest window: nothing minted */
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 2 * W, NULL), 0);
	sluice_fixed_destroy(&f);
}

/* A refund while the window is open gives the permit back (the ring's). */
Test(fixed, lease_refund)
{
	pin_here();
	sluice_fixed_t f;
	make_leased(&f, 3, 1000000, 16);
	sluice_decision_t d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 10, &d), 1);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 2, 10, NULL), 1);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 10, NULL), 0);
	cr_assert_eq(sluice_fixed_refund(&f, 1, &d), 0);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 10, NULL), 1);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 10, NULL), 0);
	sluice_fixed_destroy(&f);
}

/* Every aligned window holds at most L, over a schedule that moves the
 * thread between CPUs (several leases live at once) and the clock back. */
Test(fixed, lease_bound_per_window_across_cpus)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	const uint64_t L = 50, W = 10000;
	sluice_fixed_t f;
	make_leased(&f, L, W, 8);
	uint64_t x = 88172645463325252ULL, now = W, count[64] = { 0 }, base = 1;
	for (int i = 0; i < 40000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (ncpu >= 2 && x % 16 == 0) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET((int)((x >> 8) % (uint64_t)(ncpu < 4 ? ncpu : 4)), &set);
			sched_setaffinity(0, sizeof(set), &set);
		}
		if (x % 100 < 30)
			now += (x >> 16) % 40;
		else if (x % 100 < 32)
			now -= (x >> 16) % 300;
		uint64_t n = 1 + ((x >> 24) % 8 == 0);
		sluice_decision_t d;
		if (sluice_fixed_acquire_at(&f, n, now, &d) == 1) {
			uint64_t e = d.now_ns / W - base;
			cr_assert_lt(e, 64);
			count[e] += n;
			cr_assert_leq(count[e], L, "window %llu above L", (unsigned long long)e);
		}
		if (now / W - base >= 63)
			break;
	}
	uint64_t full = 0;
	for (int e = 0; e < 64; e++)
		full += count[e] >= L - 8;
	cr_assert_gt(full, 10, "too few windows came near L to test anything");
	sluice_fixed_destroy(&f);
}

/*
 * The inline path's one compare (fixed.h: w - tag above L - n) covers two
 * cases its rare branch must tell apart: a full window (refuse) and a word
 * still counting an older window while head already names the new one
 * (open it: the slow path).  The second exists only between an advancer's
 * head CAS and its opening of the word; the stall stops the advancer
 * exactly there (before its first write to the word, after head moved)
 * and a decision in the new window comes in.  It must be admitted: the new
 * window counts nothing.  A rare branch that refused whatever it found
 * would refuse it, reporting the old window's wrapped count.
 */
#define OPEN_H 5ULL
static sluice_decision_t opening_d;
static int opening_rc;

static void attack_in_the_unopened_window(void *arg)
{
	opening_rc = sluice_fixed_acquire_at(arg, 1, OPEN_H + 1, &opening_d);
}

Test(fixed, a_word_of_the_old_window_under_a_new_head_is_opened)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
	sluice_fixed_t *f = stall_page(); /* the stall protects that page */
	cr_assert_not_null(f);
	sluice_clock_manual_init(&mclock, 0);
	/* L = 2, W = 1 ns: reading == epoch */
	sluice_fixed_config_t cfg = { .limit = 2, .window_ns = 1, .clock = &mclock };
	cr_assert_eq(sluice_fixed_init(f, &cfg), 0);
	cr_assert_eq(sluice_fixed_acquire_at(f, 2, OPEN_H, NULL), 1, "window H full");
	stall_arm(&f->word, sizeof(f->word), attack_in_the_unopened_window, f);
	sluice_decision_t d;
	int rc = sluice_fixed_acquire_at(f, 1, OPEN_H + 1, &d);
	cr_assert(stall_fired(), "the advancer never wrote the word");
	cr_assert_eq(opening_rc, 1, "window H + 1 counts nothing: refused with remaining %llu",
	             (unsigned long long)opening_d.remaining);
	cr_assert_eq(opening_d.now_ns, OPEN_H + 1);
	cr_assert_eq(opening_d.remaining, 1);
	/* the advancer, decided after it in the same window: 1 + 1 <= 2 */
	cr_assert_eq(rc, 1);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(sluice_fixed_available_at(f, OPEN_H + 1), 0);
	stall_page_free(f);
}

/* ---- readings across a change, and refunds too old to give back --------- */

/*
 * A change, then a decision whose reading is older than every window the
 * limiter has counted in: it is judged in the newest window (CLOCK JUMPS),
 * the one the change took effect in, against the new limit (fixed.h,
 * READINGS ACROSS A CHANGE).  A lowering and a raise.
 */
Test(fixed, a_reading_older_than_a_change_is_judged_in_its_window)
{
	sluice_fixed_t f = make(10, SEC, 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 3, 5 * SEC + 500, NULL), 1);
	cr_assert_eq(sluice_fixed_set_limit(&f, 4), 0);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 2, 4 * SEC, &d), 0, "3 + 2 > 4 in window 5");
	cr_assert_eq(d.now_ns, 5 * SEC, "judged in the newest window");
	cr_assert_eq(d.limit, 4);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 5 * SEC + 1, &d), 1, "an older reading in it");
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(sluice_fixed_set_limit(&f, 7), 0);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 4, 1, &d), 0, "4 + 4 > 7");
	cr_assert_eq(sluice_fixed_acquire_at(&f, 3, 1, &d), 1, "the raise, in window 5 only");
	cr_assert_eq(d.now_ns, 5 * SEC);
	cr_assert_eq(sluice_fixed_available_at(&f, 5 * SEC + 2), 0);
}

/*
 * A decision stalled across a change must not be judged against the limit
 * it read before it.  The victim reads L = 100 and opens window A; just
 * before its write to the word the attack lowers L to 10, takes 1 in A
 * (the new limit's first admission: it is in force from A on), then fills
 * window B with 10.  The victim's opening CAS fails; its reading is older
 * than B, so it decides in B: against the limit in force there, 10, it is
 * refused.  Judged against the 100 it read, it would make B hold 11.
 */
#define STALE_W 1000ULL
#define STALE_A 7ULL
static int stale_rc[2];

static void attack_lower_then_fill_a_later_window(void *arg)
{
	sluice_fixed_t *f = arg;
	cr_assert_eq(sluice_fixed_set_limit(f, 10), 0);
	stale_rc[0] = sluice_fixed_acquire_at(f, 1, STALE_A * STALE_W, NULL);
	stale_rc[1] = sluice_fixed_acquire_at(f, 10, (STALE_A + 1) * STALE_W, NULL);
}

Test(fixed, a_decision_stalled_across_a_change_is_judged_by_the_new_limit)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
	sluice_fixed_t *f = stall_page();
	cr_assert_not_null(f);
	sluice_clock_manual_init(&mclock, 0);
	sluice_fixed_config_t cfg = { .limit = 100, .window_ns = STALE_W, .clock = &mclock };
	cr_assert_eq(sluice_fixed_init(f, &cfg), 0);
	cr_assert_eq(sluice_fixed_acquire_at(f, 1, 0, NULL), 1);
	stall_arm(&f->word, sizeof(f->word), attack_lower_then_fill_a_later_window, f);
	sluice_decision_t d;
	int rc = sluice_fixed_acquire_at(f, 1, STALE_A * STALE_W + 5, &d);
	cr_assert(stall_fired(), "the victim never wrote the word");
	cr_assert_eq(stale_rc[0], 1);
	cr_assert_eq(stale_rc[1], 1);
	cr_assert_eq(rc, 0, "window %llu holds 10, the limit in force there is 10: admitted "
	             "against d.limit %llu", (unsigned long long)(STALE_A + 1),
	             (unsigned long long)d.limit);
	cr_assert_eq(d.limit, 10);
	cr_assert_eq(sluice_fixed_available_at(f, (STALE_A + 1) * STALE_W), 0);
	stall_page_free(f);
}

/*
 * A refund gives back while the admission's window is current (the last
 * instant of it included); from the next window on its permits count no
 * more and the refund says so: SLUICE_EEXPIRED, not 0 (an exact give-back).
 * 2^32 windows later the count word carries the same 32-bit tag: the full
 * epoch still tells the two apart.
 */
Test(fixed, refund_of_a_window_that_is_over_is_expired)
{
	sluice_fixed_t f = make(10, SEC, 0);
	sluice_decision_t a, d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 5, 3 * SEC + 1, &a), 1);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 5, 4 * SEC - 1, &d), 1, "the window's last ns");
	cr_assert_eq(sluice_fixed_refund(&f, 2, &a), 0, "the last window it can give back");
	cr_assert_eq(sluice_fixed_available_at(&f, 4 * SEC - 1), 2);
	cr_assert_eq(sluice_fixed_available_at(&f, 4 * SEC), 10, "a later window, not opened");
	/* head moves on (a decision in window 4): window 3 is over */
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 4 * SEC, &d), 1);
	cr_assert_eq(sluice_fixed_refund(&f, 1, &a), SLUICE_EEXPIRED, "the first it cannot");
	cr_assert_eq(sluice_fixed_available_at(&f, 4 * SEC), 9, "nothing given to window 4");
	/* 2^32 windows after a: same tag, another epoch */
	uint64_t far = (3ULL + (1ULL << 32)) * SEC + 1;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 10, far, &d), 1);
	cr_assert_eq(sluice_fixed_refund(&f, 1, &a), SLUICE_EEXPIRED, "2^32 windows later");
	cr_assert_eq(sluice_fixed_available_at(&f, far), 0, "nothing given to the reused word");
	cr_assert_eq(sluice_fixed_refund(&f, 4, &d), 0, "the current window still gives back");
}

/* The same with leases: the ring's N = 1 answers (window.h). */
Test(fixed, lease_refund_of_a_window_that_is_over_is_expired)
{
	sluice_fixed_t f;
	make_leased(&f, 10, SEC, 4);
	sluice_decision_t a, d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 3, 2 * SEC, &a), 1);
	cr_assert_eq(sluice_fixed_refund(&f, 1, &a), 0);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 3 * SEC, &d), 1);
	cr_assert_eq(sluice_fixed_refund(&f, 1, &a), SLUICE_EEXPIRED);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, (2ULL + (1ULL << 32)) * SEC, &d), 1);
	cr_assert_eq(sluice_fixed_refund(&f, 1, &a), SLUICE_EEXPIRED);
	sluice_fixed_destroy(&f);
}
