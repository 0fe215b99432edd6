/* SPDX-License-Identifier: MIT */
/*
 * test_decay.c - decayed-rate counter: manual clock, deterministic; then a
 * small multi-thread check.
 *
 * The reference is the definition itself, in long double: the exactly
 * decayed sum of every permit sluice admitted, S(t) = sum n_i 2^-(t-t_i)/h.
 * Over long pseudo-random schedules (clock jumps back and forth, idles long
 * enough to forget and to move the anchor, bursts) every decision is checked
 * against it: an admission must fit (S + n <= L, up to the forgotten
 * residue 2^-F), and a refusal the model would not make must lie within the
 * documented rounding of the edge: sluice may only be the one refusing.
 * retry_after_ns is checked against the exact decay time, and the header's
 * burst and long-run bounds are checked directly.
 *
 * No libm: the tests link without it, so the model's 2^-x and log2 are
 * long double series written here (independently of lib/decay.c).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/clock.h"
#include "sluice/decay.h"
#include "sluice/error.h"
#include "../../lib/decay_internal.h" /* sluice__decay_count_at: the kept count */

#include "test_pace.h"
#include "recorder.h"
#include "test_rng.h"
#include "test_stall.h"

#define US 1000ULL
#define MS 1000000ULL
#define SEC 1000000000ULL
#define LN2L 0.693147180559945309417232121458176568L

TestSuite(decay, .timeout = 120);

static sluice_clock_t mclock;

static void make(sluice_decay_t *x, uint64_t limit, uint64_t half_life, uint64_t start)
{
	sluice_clock_manual_init(&mclock, start);
	sluice_decay_config_t cfg = { .limit = limit, .half_life_ns = half_life, .clock = &mclock };
	int rc = sluice_decay_init(x, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
}

/* ---- long double reference arithmetic ------------------------------------- */

/* 2^-x for x >= 0: 2^-k by repeated halving, e^(-f ln2) by Taylor. */
static long double ref_exp2_neg(long double x)
{
	if (x > 16000)
		return 0;
	unsigned long k = (unsigned long)x;
	long double y = (x - (long double)k) * LN2L, term = 1, sum = 1;
	for (int i = 1; i < 30; i++) {
		term *= -y / i;
		sum += term;
	}
	while (k >= 32) {
		sum /= 4294967296.0L;
		k -= 32;
	}
	return sum / (long double)(1ULL << k);
}

/* log2(v) for v > 0: bisection on ref_exp2_neg (slow, exact enough). */
static long double ref_log2(long double v)
{
	/* find x with 2^x = v: 2^-x = 1/v */
	long double lo = -200, hi = 200, target = 1 / v;
	for (int i = 0; i < 120; i++) {
		long double mid = (lo + hi) / 2;
		long double val = mid >= 0 ? ref_exp2_neg(mid) : 1 / ref_exp2_neg(-mid);
		if (val > target)
			lo = mid;
		else
			hi = mid;
	}
	return (lo + hi) / 2;
}

/* The exact decayed sum of admitted permits, kept at time t. */
struct model {
	long double sum;
	uint64_t t, h;
};

static long double model_at(const struct model *m, uint64_t t)
{
	if (t <= m->t)
		return m->sum;
	return m->sum * ref_exp2_neg((long double)(t - m->t) / (long double)m->h);
}

static void model_add(struct model *m, uint64_t t, uint64_t n)
{
	if (t > m->t) {
		m->sum = model_at(m, t);
		m->t = t;
	}
	m->sum += (long double)n;
}


/* ---- the guarantee, directly ----------------------------------------------- */

Test(decay, burst_of_exactly_l_after_idle)
{
	sluice_decay_t x;
	make(&x, 100, SEC, 0);
	sluice_decision_t d;
	int passed = 0;
	for (int i = 0; i < 150; i++)
		passed += sluice_decay_acquire_at(&x, 1, 5 * SEC, &d);
	cr_assert_eq(passed, 100, "fresh: exactly L at one instant");
	cr_assert_eq(d.remaining, 0);
	/* 10 half-lives: 100 / 1024 left, so 99 more fit */
	passed = 0;
	for (int i = 0; i < 150; i++)
		passed += sluice_decay_acquire_at(&x, 1, 15 * SEC, &d);
	cr_assert_eq(passed, 99);
	/* after the count is forgotten (32+ half-lives): L again, and n = L */
	cr_assert_eq(sluice_decay_acquire_at(&x, 100, 15 * SEC + 40 * SEC, &d), 1);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, 15 * SEC + 40 * SEC, &d), 0);
}

/*
 * Saturated n = 1 for 200 half-lives: in every interval of length D the
 * admissions are at most L (1 + D ln2 / h) (+ the 2^-F residue), and the
 * long-run rate reaches (L - 1/2) ln 2 / h, so the bound is the real one.
 */
Test(decay, long_run_rate_bound_is_tight)
{
	const uint64_t L = 50, h = 100 * MS, step = 100 * US;
	sluice_decay_t x;
	make(&x, L, h, 0);
	size_t cap = 20000, k = 0;
	uint64_t *at = malloc(sizeof(uint64_t) * cap);
	cr_assert_not_null(at);
	for (uint64_t t = 0; t < 200 * h; t += step) {
		while (sluice_decay_acquire_at(&x, 1, t, NULL) == 1) {
			cr_assert_lt(k, cap);
			at[k++] = t;
		}
	}
	/* windows of several lengths, every start */
	static const uint64_t lens[] = { 0, 10 * MS, 100 * MS, SEC, 10 * SEC };
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		long double bound = (long double)L * (1 + (long double)lens[li] * LN2L / (long double)h);
		size_t hi = 0;
		for (size_t lo = 0; lo < k; lo++) {
			while (hi < k && at[hi] - at[lo] <= lens[li])
				hi++;
			cr_assert_leq((long double)(hi - lo), bound + 0.01L, "D=%llu: %zu admitted",
			              (unsigned long long)lens[li], hi - lo);
		}
	}
	/* the steady state: 100 half-lives after warm-up */
	size_t lo = 0;
	while (at[lo] < 100 * h)
		lo++;
	long double rate = (long double)(k - lo) / (long double)(200 * h - at[lo]);
	long double want = (L - 0.5L) * LN2L / (long double)h;
	cr_assert(rate > want * 0.99L && rate < want * 1.01L, "rate %.6Le, want %.6Le", rate, want);
	free(at);
}

Test(decay, retry_after_is_exact_and_never_early)
{
	sluice_decay_t x;
	make(&x, 10, SEC, 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_decay_acquire_at(&x, 10, 0, &d), 1);
	cr_assert_eq(d.remaining, 0);
	for (uint64_t n = 1; n <= 10; n++) {
		cr_assert_eq(sluice_decay_acquire_at(&x, n, 0, &d), 0);
		uint64_t y = d.retry_after_ns;
		/* exact: h log2(10 / (10 - n)); for n = L, until forgotten */
		long double want = n < 10 ? (long double)SEC * ref_log2(10.0L / (10 - n)) : 0;
		if (n < 10) {
			cr_assert_geq((long double)y, want - 1, "n=%llu: %llu before the exact %.1Lf",
			              (unsigned long long)n, (unsigned long long)y, want);
			cr_assert_leq((long double)y, want * (1 + 1e-9L) + 2 + x.unit_ns,
			              "n=%llu: %llu vs %.1Lf",
			              (unsigned long long)n, (unsigned long long)y, want);
		} else {
			cr_assert_gt(y, 30 * SEC, "n = L: until the count is forgotten");
			cr_assert_leq(y, d.reset_ns, "reset_ns bounds it");
		}
		sluice_decay_t probe;
		memcpy(&probe, &x, sizeof(x));
		cr_assert_eq(sluice_decay_acquire_at(&probe, n, y - 1, NULL), 0, "n=%llu 1 ns early",
		             (unsigned long long)n);
		cr_assert_eq(sluice_decay_acquire_at(&probe, n, y, NULL), 1, "n=%llu at retry",
		             (unsigned long long)n);
	}
}

/*
 * retry_after_ns is the earliest time a retry passes, on the limiter's own
 * arithmetic: on a manual clock, from thousands of random states (limits
 * from 1 to 2^24 - 1, half-lives whose grid is 1 ns and coarser, idle gaps,
 * n up to L), a copy retried at now_ns + retry_after_ns passes and a copy
 * retried one grid unit earlier refuses.  The refusal path answers most
 * of these from a closed form without evaluating the decay (lib/decay.c,
 * retry_after()); this checks that answer, not only the search's.
 */
struct retry_case {
	uint64_t limit, half_life, seed;
};

ParameterizedTestParameters(decay, retry_after_is_the_first_grid_point_that_passes)
{
	static struct retry_case cases[] = {
		{ 1, 10 * MS, 1 },          { 10, SEC, 2 },          { 1000, 3 * MS, 3 },
		{ 65535, 250 * US, 4 },     { (1u << 24) - 1, 20 * SEC, 5 },
		{ 7, 86400 * SEC, 6 },      /* unit_ns 2^17: a coarse grid */
		{ 100, 1 * US, 7 },
	};
	return cr_make_param_array(struct retry_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct retry_case *p, decay, retry_after_is_the_first_grid_point_that_passes)
{
	sluice_decay_t x;
	make(&x, p->limit, p->half_life, 1000 * SEC);
	rng_state = 0x51CE0000ULL + p->seed;
	int refusals = 0;
	for (int i = 0; i < 3000; i++) {
		/* move on by up to two half-lives, now and then by a grid
		 * unit only, and fill up with random requests */
		uint64_t r = rnd();
		uint64_t step = r % 4 == 0 ? x.unit_ns : r % (2 * p->half_life);
		sluice_clock_manual_advance(&mclock, step);
		uint64_t n = 1 + rnd() % p->limit;
		if (rnd() % 3 == 0)
			n = 1 + rnd() % (p->limit < 4 ? p->limit : 4);
		sluice_decision_t d;
		int rc = sluice_decay_acquire(&x, n, &d);
		cr_assert(rc == 0 || rc == 1, "acquire: %s", sluice_err_name(rc));
		if (rc == 1)
			continue;
		refusals++;
		cr_assert_lt(d.retry_after_ns, SLUICE_NEVER);
		cr_assert_geq(d.retry_after_ns, x.unit_ns);
		cr_assert_eq(d.retry_after_ns % x.unit_ns, 0, "on the grid");
		sluice_decay_t at, before;
		memcpy(&at, &x, sizeof(x));
		memcpy(&before, &x, sizeof(x));
		uint64_t when = d.now_ns + d.retry_after_ns;
		cr_assert_eq(sluice_decay_acquire_at(&at, n, when, NULL), 1,
		             "step %d: n=%llu at now+retry (%llu) must pass", i, (unsigned long long)n,
		             (unsigned long long)d.retry_after_ns);
		cr_assert_eq(sluice_decay_acquire_at(&before, n, when - x.unit_ns, NULL), 0,
		             "step %d: n=%llu one grid unit before now+retry (%llu) must refuse", i,
		             (unsigned long long)n, (unsigned long long)d.retry_after_ns);
		/* reset_ns (computed from the stored count, lib/decay.c):
		 * forgotten by then, and not by much earlier than that: late
		 * by at most 2^-30 of h (log2 of a count below 2^32, + 1) plus
		 * 2 ns and the rounding to the grid */
		cr_assert_eq(sluice__decay_count_at(&x, d.now_ns + d.reset_ns), 0.0,
		             "step %d: a count left at now+reset (%llu)", i,
		             (unsigned long long)d.reset_ns);
		uint64_t slack = (p->half_life >> 30) * 33 + 33 + 3 + 2 * x.unit_ns;
		if (d.reset_ns > slack)
			cr_assert_gt(sluice__decay_count_at(&x, d.now_ns + d.reset_ns - slack), 0.0,
			             "step %d: reset_ns %llu later than the bound", i,
			             (unsigned long long)d.reset_ns);
	}
	cr_assert_gt(refusals, 300, "the schedule must refuse often (%d)", refusals);
}

/*
 * The crossing on whole half-lives: after one burst from empty the count is
 * exactly n 2^F, and a request whose room is a power-of-two fraction of it
 * passes exactly k half-lives later, where the decay has no margin (the
 * closed form handles it apart, lib/decay.c).  Grids of 1 ns (the crossing
 * on a grid point: it passes there) and coarser (the next grid point), and
 * n = L (the count must be forgotten: one unit left at the crossing still
 * refuses).
 */
struct exact_case {
	uint64_t limit, burst, n, half_life;
};

ParameterizedTestParameters(decay, retry_after_on_whole_half_lives)
{
	static struct exact_case cases[] = {
		{ 4, 4, 2, 1ULL << 20 },  /* room 2 of 4: one half-life, on the 1 ns grid */
		{ 4, 4, 3, 1ULL << 20 },  /* room 1 of 4: two half-lives */
		{ 4, 4, 2, SEC },          /* coarse grid: the crossing between points */
		{ 8, 8, 8, 1ULL << 20 },  /* n = L: until forgotten */
		{ 1, 1, 1, 10 * MS },      /* the deny benchmark's case */
		{ 1000, 500, 750, 3 * MS },
	};
	return cr_make_param_array(struct exact_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct exact_case *p, decay, retry_after_on_whole_half_lives)
{
	sluice_decay_t x;
	make(&x, p->limit, p->half_life, 7 * SEC);
	sluice_decision_t d;
	cr_assert_eq(sluice_decay_acquire(&x, p->burst, &d), 1);
	for (uint64_t gap = 0; gap < 3; gap++) {
		sluice_clock_manual_advance(&mclock, gap * x.unit_ns);
		cr_assert_eq(sluice_decay_acquire(&x, p->n, &d), 0);
		uint64_t when = d.now_ns + d.retry_after_ns;
		sluice_decay_t at, before;
		memcpy(&at, &x, sizeof(x));
		memcpy(&before, &x, sizeof(x));
		cr_assert_eq(sluice_decay_acquire_at(&at, p->n, when, NULL), 1,
		             "L=%llu n=%llu: must pass at now+retry (%llu)", (unsigned long long)p->limit,
		             (unsigned long long)p->n, (unsigned long long)d.retry_after_ns);
		cr_assert_eq(sluice_decay_acquire_at(&before, p->n, when - x.unit_ns, NULL), 0,
		             "L=%llu n=%llu: must refuse one grid unit earlier",
		             (unsigned long long)p->limit, (unsigned long long)p->n);
	}
}

Test(decay, n_above_limit_and_zero)
{
	sluice_decay_t x;
	make(&x, 10, SEC, 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_decay_acquire_at(&x, 11, 0, &d), SLUICE_ETOOBIG);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	cr_assert_not(d.allowed);
	cr_assert_eq(sluice_decay_acquire_at(&x, 0, 0, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_decay_acquire_at(NULL, 1, 0, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_decay_acquire_at(&x, 4, 0, &d), 1, "nothing was taken");
	cr_assert_eq(d.remaining, 6);
	cr_assert_eq(sluice_decay_acquire_at(&x, 6, 0, &d), 1);
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, 0, &d), 0);
	/* one half-life: 5 left, so 5 more fit, as one request */
	cr_assert_eq(sluice_decay_acquire_at(&x, 6, SEC, &d), 0);
	cr_assert_eq(sluice_decay_acquire_at(&x, 5, SEC, &d), 1);
	cr_assert_eq(d.remaining, 0);
}

/* ---- clock jumps, the top of the time base -------------------------------- */

Test(decay, clock_backwards_by_seconds_mints_nothing)
{
	sluice_decay_t x, twin;
	make(&x, 20, SEC, 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_decay_acquire_at(&x, 20, 30 * SEC, &d), 1);
	memcpy(&twin, &x, sizeof(x));
	uint64_t retry = 0;
	long double exact = (long double)SEC * ref_log2(20.0L / 19.0L);
	for (uint64_t back = 1; back <= 10; back++) {
		uint64_t r = 30 * SEC - back * SEC;
		cr_assert_eq(sluice_decay_acquire_at(&x, 1, r, &d), 0, "%llu s back",
		             (unsigned long long)back);
		cr_assert_eq(d.now_ns, 30 * SEC, "held at the count's time");
		if (back == 1)
			retry = d.retry_after_ns;
		cr_assert_eq(d.retry_after_ns, retry, "retry measured from the held time");
		cr_assert((long double)retry >= exact - 1 && (long double)retry < exact + 100,
		          "retry %llu vs exact %.1Lf", (unsigned long long)retry, exact);
		cr_assert(sluice__decay_count_at(&x, r) == 20.0, "no decay backwards, no minting");
	}
	/* the plain variant reads the manual clock the same way */
	sluice_clock_manual_set(&mclock, 2 * SEC);
	cr_assert_eq(sluice_decay_acquire(&x, 1, &d), 0);
	cr_assert_eq(atomic_load(&x.word), atomic_load(&twin.word), "refusals wrote nothing");
	sluice_clock_manual_set(&mclock, 31 * SEC);
	cr_assert_eq(sluice_decay_acquire(&x, 10, &d), 1, "one half-life later: 10 left");
	cr_assert_eq(sluice_decay_acquire(&x, 1, &d), 0);
}

Test(decay, idle_of_any_length_forgets)
{
	sluice_decay_t x;
	make(&x, 8, SEC, 0);
	/* the state's time field spans R = 2^29 unit_ns: idles of exact
	 * multiples of it, and of days and years, must all read as idle */
	uint64_t span = x.unit_ns << 29;
	uint64_t t = 0;
	uint64_t idles[] = { 40 * SEC, span, 4 * span, 4 * span + 1, span / 2, 3 * 86400 * SEC,
		             4000ULL * 86400 * SEC };
	for (size_t k = 0; k < sizeof(idles) / sizeof(idles[0]); k++) {
		cr_assert_eq(sluice_decay_acquire_at(&x, 8, t, NULL), 1, "idle #%zu", k);
		cr_assert_eq(sluice_decay_acquire_at(&x, 1, t, NULL), 0);
		t += idles[k];
	}
}

/* Busy across many re-anchorings (steps) and idle across others (jumps):
 * the count stays the exact one within the rounding. */
Test(decay, busy_across_anchor_moves)
{
	sluice_decay_t x;
	make(&x, 30, 2 * US, 0); /* unit 1 ns: the field spans 0.54 s */
	struct model m = { .h = 2 * US };
	uint64_t t = 0, steps = 0, jumps = 0, last = atomic_load(&x.anchor);
	rng_state = 7;
	for (int i = 0; i < 200000; i++) {
		uint64_t r = rnd();
		t += r % (20 * US); /* busy: 10 us a step, 0.5 s between idles */
		if (i % 50000 == 49999)
			t += (x.unit_ns << 30) + r % SEC; /* idle: a jump */
		sluice_decision_t d;
		uint64_t n = 1 + (r >> 32) % 4;
		int rc = sluice_decay_acquire_at(&x, n, t, &d);
		if (rc == 1)
			model_add(&m, d.now_ns, n);
		long double exact = model_at(&m, t), kept = sluice__decay_count_at(&x, t);
		cr_assert(kept + 1e-6L >= exact, "step %d: kept %.9Lf < exact %.9Lf", i, kept, exact);
		cr_assert(kept <= exact + 1e-3L, "step %d: kept %.9Lf, exact %.9Lf", i, kept, exact);
		uint64_t a = atomic_load(&x.anchor);
		if (a - last == x.unit_ns << 27)
			steps++;
		else if (a != last)
			jumps++;
		last = a;
	}
	cr_assert_geq(steps, 3, "busy: the anchor stepped %llu times", (unsigned long long)steps);
	cr_assert_geq(jumps, 3, "idle: the anchor jumped %llu times", (unsigned long long)jumps);
}

Test(decay, top_of_the_time_base)
{
	sluice_decay_t x;
	uint64_t top = UINT64_MAX - 10 * SEC;
	make(&x, 4, SEC, top);
	sluice_decision_t d;
	cr_assert_eq(sluice_decay_acquire_at(&x, 4, top, &d), 1);
	cr_assert_eq(sluice_decay_acquire_at(&x, 2, top + SEC, &d), 1, "one half-life");
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, top + SEC, &d), 0);
	cr_assert_leq(d.retry_after_ns, 10 * SEC);
	/* the last readings: treated as the last grid point, no wrap */
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, UINT64_MAX, &d), 1);
	cr_assert_eq(d.now_ns, UINT64_MAX & ~(x.unit_ns - 1));
	cr_assert_eq(sluice_decay_acquire_at(&x, 4, UINT64_MAX, &d), 0);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER, "time cannot pass the end");
	double c = sluice__decay_count_at(&x, UINT64_MAX);
	cr_assert(c > 1.0 && c < 1.1, "count %f", c);
}

/* ---- refunds ---------------------------------------------------------------- */

Test(decay, refund_subtracts_the_decayed_permits)
{
	sluice_decay_t x;
	make(&x, 10, SEC, 0);
	sluice_decision_t a, b, d;
	cr_assert_eq(sluice_decay_acquire_at(&x, 6, 0, &a), 1);
	cr_assert_eq(sluice_decay_acquire_at(&x, 2, SEC, &b), 1); /* 3 + 2 = 5 */
	cr_assert_eq(sluice_decay_refund(&x, 6, &a), 0);    /* 5 - 3 = 2 */
	double c = sluice__decay_count_at(&x, SEC);
	cr_assert(c >= 2.0 && c < 2.0 + 1e-6, "count %f", c);
	cr_assert_eq(sluice_decay_acquire_at(&x, 8, SEC, &d), 1);
	cr_assert_eq(sluice_decay_refund(&x, 8, &d), 0);
	cr_assert_eq(sluice_decay_refund(&x, 2, &b), 0);
	c = sluice__decay_count_at(&x, SEC);
	cr_assert(c >= 0.0 && c < 1e-6, "count %f", c);
	/* a second refund is accepted while the count holds what it takes
	 * (decay.h: the caller's contract; the limiter cannot tell it from
	 * another admission's refund) */
	sluice_decision_t e;
	cr_assert_eq(sluice_decay_acquire_at(&x, 2, SEC, &e), 1);
	cr_assert_eq(sluice_decay_acquire_at(&x, 2, SEC, &d), 1);
	cr_assert_eq(sluice_decay_refund(&x, 2, &e), 0);
	cr_assert_eq(sluice_decay_refund(&x, 2, &e), 0, "twice: d's permits freed");
	c = sluice__decay_count_at(&x, SEC);
	cr_assert(c >= 0.0 && c < 1e-6, "count %f", c);
	/* a second refund of the same admission cannot go below 0: kept */
	uint64_t w = atomic_load(&x.word);
	cr_assert_eq(sluice_decay_refund(&x, 2, &b), SLUICE_ECANCEL);
	cr_assert_eq(atomic_load(&x.word), w);
	/* a decision from the future is not ours */
	d.now_ns = 100 * SEC;
	cr_assert_eq(sluice_decay_refund(&x, 1, &d), SLUICE_ECANCEL);
	/* once forgotten there is nothing to give back: done */
	cr_assert_eq(sluice_decay_acquire_at(&x, 5, 2 * SEC, &d), 1);
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, 2 * SEC + (x.unit_ns << 30), NULL), 1);
	cr_assert_eq(sluice_decay_refund(&x, 5, &d), 0);
	/* bad arguments */
	d.allowed = 0;
	cr_assert_eq(sluice_decay_refund(&x, 1, &d), SLUICE_EINVAL);
	d.allowed = 1;
	cr_assert_eq(sluice_decay_refund(&x, 0, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_decay_refund(&x, 11, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_decay_refund(NULL, 1, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_decay_refund(&x, 1, NULL), SLUICE_EINVAL);
}

/* ---- configuration ---------------------------------------------------------- */

struct bad_cfg {
	uint64_t limit, half_life;
	int clock_kind; /* -1: manual */
	int want;
};

ParameterizedTestParameters(decay, invalid_config)
{
	static struct bad_cfg params[] = {
		{ 0, SEC, -1, SLUICE_ELIMIT },
		{ SLUICE_DECAY_LIMIT_MAX + 1, SEC, -1, SLUICE_ELIMIT },
		{ 10, 0, -1, SLUICE_EHALFLIFE },
		{ 10, 999, -1, SLUICE_EHALFLIFE },
		{ 10, SLUICE_DECAY_HALFLIFE_MAX_NS + 1, -1, SLUICE_EHALFLIFE },
		{ 10, SEC, 9, SLUICE_ECLOCK },
		{ 1, SLUICE_DECAY_HALFLIFE_MIN_NS, -1, 0 },                     /* smallest */
		{ SLUICE_DECAY_LIMIT_MAX, SLUICE_DECAY_HALFLIFE_MAX_NS, -1, 0 }, /* largest */
	};
	return cr_make_param_array(struct bad_cfg, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct bad_cfg *p, decay, invalid_config)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 0);
	if (p->clock_kind >= 0)
		m.kind = (sluice_clock_kind_t)p->clock_kind;
	sluice_decay_config_t cfg = { .limit = p->limit, .half_life_ns = p->half_life, .clock = &m };
	sluice_decay_t x, before;
	memset(&x, 0xab, sizeof(x));
	memcpy(&before, &x, sizeof(x));
	int rc = sluice_decay_init(&x, &cfg);
	cr_assert_eq(rc, p->want, "L=%llu h=%llu: got %s, want %s", (unsigned long long)p->limit,
	             (unsigned long long)p->half_life, sluice_err_name(rc), sluice_err_name(p->want));
	if (rc != 0) {
		cr_assert_eq(memcmp(&x, &before, sizeof(x)), 0, "a failed init must not touch it");
		return;
	}
	/* the extremes work, and the grid is as documented */
	sluice_decision_t d;
	cr_assert_eq(sluice_decay_acquire_at(&x, x.limit, 5, &d), 1);
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, 5, &d), 0);
	cr_assert_lt(d.retry_after_ns, SLUICE_NEVER);
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, 5 + d.retry_after_ns, &d), 1);
	uint64_t ulim = p->half_life >> 20;
	cr_assert_leq(x.unit_ns, ulim > 1 ? ulim : 1, "unit %llu", (unsigned long long)x.unit_ns);
	cr_assert_geq(x.frac_bits, 8);
	sluice_decay_destroy(&x);
}

Test(decay, null_arguments_and_size)
{
	sluice_decay_t x;
	sluice_decay_config_t cfg = { .limit = 1, .half_life_ns = SEC };
	cr_assert_eq(sluice_decay_init(NULL, &cfg), SLUICE_EINVAL);
	cr_assert_eq(sluice_decay_init(&x, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_decay_init(&x, &cfg), 0, "NULL clock: the cached clock");
	cr_assert_eq(x.clock, &sluice_clock_cached);
	sluice_decay_destroy(NULL);
	cr_assert_eq(sluice_decay_size(), sizeof(sluice_decay_t));
}

/* ---- the reference model over long schedules ------------------------------ */

struct schedule {
	uint64_t limit, half_life, start, seed;
};

ParameterizedTestParameters(decay, matches_reference_model)
{
	static struct schedule params[] = {
		{ 10, SEC, 0, 1 },
		{ 100, 50 * MS, 12345, 2 },
		{ 1, 10 * US, 0, 3 },                         /* L = 1, F = 31 */
		{ 1000, 3 * SEC, 0, 4 },                      /* unit > 1 ns */
		{ SLUICE_DECAY_LIMIT_MAX, 1 * SEC, 0, 5 },    /* F = 8 */
		{ 37, 7 * MS, UINT64_MAX - 40000 * SEC, 6 }, /* near the top */
	};
	return cr_make_param_array(struct schedule, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct schedule *p, decay, matches_reference_model)
{
	sluice_decay_t x;
	make(&x, p->limit, p->half_life, p->start);
	struct model m = { .t = p->start, .h = p->half_life };
	long double L = (long double)p->limit, unit = 1.0L / (long double)(1ULL << x.frac_bits);
	/* how far the kept count may exceed the exact sum: about one unit per
	 * write, each fading with the count (grown here, decayed with it) */
	long double excess = 0;
	uint64_t excess_t = p->start;
	rng_state = p->seed * 0x9E3779B97F4A7C15ULL + 1;
	uint64_t t = p->start, h = p->half_life;
	int admitted = 0, refused = 0, differ = 0;
	for (int i = 0; i < 40000; i++) {
		uint64_t r = rnd();
		switch (r % 64) {
		case 0: /* back by up to 3 half-lives */
			t -= (r >> 8) % (3 * h) < t - p->start ? (r >> 8) % (3 * h) : t - p->start;
			break;
		case 1: /* idle: 10..50 half-lives (forgotten beyond ~32) */
			t += 10 * h + (r >> 8) % (40 * h);
			break;
		default: /* busy: up to a twentieth of a half-life */
			t += (r >> 8) % (h / 20 + 1);
		}
		uint64_t n = 1 + (r >> 40) % (p->limit < 4 ? p->limit : p->limit / 4 + 1);
		if (n > p->limit)
			n = p->limit;
		sluice_decision_t d;
		int rc = sluice_decay_acquire_at(&x, n, t, &d);
		cr_assert_geq(rc, 0);
		uint64_t now = d.now_ns;
		uint64_t tg = t & ~(x.unit_ns - 1); /* decisions use the grid point */
		cr_assert_eq(now, tg < m.t ? m.t : tg, "step %d: time ran backwards", i);
		long double exact = model_at(&m, now);
		if (now > excess_t) {
			excess *= ref_exp2_neg((long double)(now - excess_t) / (long double)h);
			excess_t = now;
		}
		long double tol = excess + 4 * unit + L * 1e-12L;
		if (rc == 1) {
			admitted++;
			/* the guarantee: the exact sum, this one included, <= L
			 * up to the forgotten residue (below 2 units) */
			cr_assert(exact + n <= L + 2 * unit + L * 1e-12L,
			          "step %d: admitted %llu with exact count %.9Lf of %.0Lf", i,
			          (unsigned long long)n, exact, L);
			model_add(&m, now, n);
			excess += 3 * unit + (exact + n) * 1e-12L;
		} else {
			refused++;
			if (exact + n <= L) {
				differ++; /* sluice refused, the model would admit */
				cr_assert(exact + n > L - tol,
				          "step %d: refused %llu at exact %.9Lf (tol %.3Le)",
				          i, (unsigned long long)n, exact, tol);
			}
			/* retry_after is never before the exact decay time */
			if (d.retry_after_ns != SLUICE_NEVER && exact + n > L && n < L) {
				long double after =
					exact * ref_exp2_neg((long double)d.retry_after_ns / h);
				cr_assert(after + n <= L + 1e-9L * L,
				          "step %d: retry %llu too early (%.9Lf)",
				          i, (unsigned long long)d.retry_after_ns, after);
			}
		}
		if (i % 16 == 0) {
			exact = model_at(&m, now);
			long double kept = sluice__decay_count_at(&x, now);
			cr_assert(kept + 2 * unit + L * 1e-12L >= exact, "step %d: kept %.9Lf < %.9Lf", i,
			          kept, exact);
			cr_assert(kept <= exact + tol, "step %d: kept %.9Lf > %.9Lf + %.3Le", i, kept,
			          exact, tol);
			/* available: never more than the exact model admits (up
			 * to the forgotten residue), at most the kept count's
			 * tolerance fewer, and the largest n acquire admits */
			uint64_t av = sluice_decay_available_at(&x, now);
			cr_assert((long double)av <= L - exact + 2 * unit + L * 1e-12L,
			          "step %d: available %llu, exact count %.9Lf", i,
			          (unsigned long long)av, exact);
			cr_assert((long double)av + 1 > L - exact - tol, "step %d: available %llu low", i,
			          (unsigned long long)av);
			if (av < p->limit)
				cr_assert_eq(sluice_decay_acquire_at(&x, av + 1, now, NULL), 0);
			if (av > 0 && i % 64 == 0) {
				cr_assert_eq(sluice_decay_acquire_at(&x, av, now, NULL), 1, "step %d", i);
				model_add(&m, now, av);
				excess += 3 * unit + (exact + av) * 1e-12L;
				cr_assert_eq(sluice_decay_available_at(&x, now), 0);
			}
		}
	}
	/* L = 1 admits only once the count is forgotten (after ~32 h idle) */
	cr_assert_gt(admitted, p->limit == 1 ? 200 : 2000, "admitted %d", admitted);
	cr_assert_gt(refused, 2000, "refused %d", refused);
	cr_log_info("L=%llu h=%llu: admitted %d refused %d, refused-where-exact-admits %d",
	            (unsigned long long)p->limit, (unsigned long long)p->half_life, admitted, refused,
	            differ);
}

/* ---- threads -------------------------------------------------------------- */

#define T_RECORDS (1u << 18)
#define T_CLOCK_STEPS 6000
#define T_L 24
#define T_H (20 * US)

struct trec {
	uint64_t t, n;
};

struct tdecider {
	pthread_t tid;
	sluice_decay_t *x;
	struct trec *rec;
	size_t nrec;
	uint64_t seed, refused;
	_Atomic uint64_t decisions;
};

static struct tdecider *tdeciders;
static int ntdeciders;
static _Atomic int trunning;
static uint64_t tsteps, tjumps;

static void *tdecider_main(void *arg)
{
	struct tdecider *me = arg;
	uint64_t v = me->seed;
	while (atomic_load_explicit(&trunning, memory_order_relaxed)) {
		v ^= v << 13, v ^= v >> 7, v ^= v << 17;
		uint64_t n = 1 + v % 3;
		sluice_decision_t d;
		int rc = sluice_decay_acquire(me->x, n, &d);
		if (rc == 1) {
			if (me->nrec < T_RECORDS)
				me->rec[me->nrec++] = (struct trec){ d.now_ns, n };
		} else {
			me->refused++;
		}
		uint64_t k = atomic_load_explicit(&me->decisions, memory_order_relaxed) + 1;
		atomic_store_explicit(&me->decisions, k, memory_order_relaxed);
		if (k % 8 == 0)
			sched_yield(); /* more threads than cores: let the clock move */
	}
	return NULL;
}

/* Steps of up to 1 us, back by up to 3 us now and then, and now and then
 * to just before the re-anchoring point (busy across it: anchor steps) or
 * past it (idle: the count is forgotten, anchor jumps). */
static void *tclock_main(void *arg)
{
	sluice_decay_t *x = arg;
	uint64_t v = 99, last = atomic_load(&x->anchor);
	tsteps = tjumps = 0;
	for (int i = 0; i < T_CLOCK_STEPS; i++) {
		uint64_t a = atomic_load(&x->anchor);
		if (a - last == x->unit_ns << 27)
			tsteps++;
		else if (a != last)
			tjumps++;
		last = a;
		v ^= v << 13, v ^= v >> 7, v ^= v << 17;
		uint64_t now = sluice_clock_now(&mclock);
		if (v % 500 == 0)
			sluice_clock_manual_set(&mclock, a + (x->unit_ns << 28) - 20 * US);
		else if (v % 500 == 250)
			sluice_clock_manual_set(&mclock, a + (x->unit_ns << 29) + v % US);
		else if (v % 50 == 0 && now > 10 * US)
			sluice_clock_manual_set(&mclock, now - v % (3 * US));
		else
			sluice_clock_manual_advance(&mclock, v % US);
		PACE_WAIT(tdeciders, ntdeciders);
	}
	atomic_store_explicit(&trunning, 0, memory_order_relaxed);
	return NULL;
}

static int by_time(const void *a, const void *b)
{
	const struct trec *p = a, *q = b;
	return p->t < q->t ? -1 : p->t > q->t;
}

ParameterizedTestParameters(decay, threads_respect_the_decayed_sum)
{
	static int threads[] = { 2, 4 };
	return cr_make_param_array(int, threads, 2);
}

/*
 * Admissions in time order (decision times never run backwards across the
 * CAS order): after all admissions at one time, the exactly decayed sum of
 * every admission so far is at most L (+ the 2^-F residue); and every window
 * of D holds at most L (1 + D ln2 / h).
 */
ParameterizedTest(int *nthreads, decay, threads_respect_the_decayed_sum)
{
	sluice_decay_t x;
	make(&x, T_L, T_H, 1000 * SEC);
	struct tdecider *d = calloc((size_t)*nthreads, sizeof(*d));
	cr_assert_not_null(d);
	tdeciders = d;
	ntdeciders = *nthreads;
	atomic_store(&trunning, 1);
	for (int i = 0; i < *nthreads; i++) {
		d[i].x = &x;
		d[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
		d[i].rec = malloc(sizeof(struct trec) * T_RECORDS);
		cr_assert_not_null(d[i].rec);
		cr_assert_eq(pthread_create(&d[i].tid, NULL, tdecider_main, &d[i]), 0);
	}
	pthread_t ct;
	cr_assert_eq(pthread_create(&ct, NULL, tclock_main, &x), 0);
	pthread_join(ct, NULL);
	for (int i = 0; i < *nthreads; i++)
		pthread_join(d[i].tid, NULL);

	size_t total;
	uint64_t refused;
	struct trec *all = REC_MERGE(d, *nthreads, T_RECORDS, by_time, &total, &refused);
	long double unit = 1.0L / (long double)(1ULL << x.frac_bits), worst = 0;
	struct model m = { .t = 0, .h = T_H };
	for (size_t i = 0; i < total; i++) {
		model_add(&m, all[i].t, all[i].n);
		if (i + 1 < total && all[i + 1].t == all[i].t)
			continue; /* check after the whole group at this time */
		worst = m.sum > worst ? m.sum : worst;
		cr_assert(m.sum <= T_L + 2 * unit + 1e-9L, "%d threads: decayed sum %.9Lf at %llu",
		          *nthreads, m.sum, (unsigned long long)all[i].t);
	}
	/* (b) over windows of one half-life: at most L (1 + ln 2) */
	size_t lo = 0;
	uint64_t sum = 0, wmax = 0;
	for (size_t i = 0; i < total; i++) {
		sum += all[i].n;
		while (all[i].t - all[lo].t > T_H)
			sum -= all[lo++].n;
		wmax = sum > wmax ? sum : wmax;
	}
	cr_assert_leq((long double)wmax, T_L * (1 + LN2L) + 0.01L, "window of h held %llu",
	              (unsigned long long)wmax);
	cr_assert_gt(total, 500, "admitted %zu", total);
	cr_assert_gt(refused, 500, "the limit must bite");
	cr_assert_gt(tsteps, 0, "anchor steps (busy) raced with admissions");
	cr_assert_gt(tjumps, 0, "anchor jumps (forgotten) raced with admissions");
	cr_log_info("threads=%d admitted=%zu refused=%llu max decayed sum=%.6Lf max per h=%llu "
	            "anchor steps=%llu jumps=%llu",
	            *nthreads, total, (unsigned long long)refused, worst, (unsigned long long)wmax,
	            (unsigned long long)tsteps, (unsigned long long)tjumps);
	for (int i = 0; i < *nthreads; i++)
		free(d[i].rec);
	free(d);
	free(all);
}

/* ---- set_limit under load --------------------------------------------------- */

/*
 * Deciders hammer one limiter while the clock thread moves the clock and,
 * every 40 steps, changes the limit to the next of a sequence of distinct
 * values (odd ones low, even ones high, so both lowering and raising race
 * with admissions).  Each admission records its time, n, the limit it was
 * checked against (d->limit) and how many changes had returned before it
 * started.  The verifier checks exactly set_limit's statement:
 *   - an admission that started after change g returned was checked
 *     against change g's limit or a later change's (the change takes
 *     effect for every decision by the time the call returns);
 *   - after all admissions at one time, the exactly decayed sum of every
 *     admission so far is at most the largest limit any of them was
 *     checked against (the last one in CAS order saw them all).
 */
#define S_CHANGES 140
#define S_LMAX 255
static uint64_t s_limits[S_CHANGES + 1];
static _Atomic uint64_t s_gen; /* changes returned */
static _Atomic int s_on;

struct srec {
	uint64_t t, n, lim, gen;
};

struct sdecider {
	pthread_t tid;
	sluice_decay_t *x;
	struct srec *rec;
	size_t nrec;
	uint64_t seed, refused;
	_Atomic uint64_t decisions;
};

static void *sdecider_main(void *arg)
{
	struct sdecider *me = arg;
	uint64_t v = me->seed;
	while (atomic_load_explicit(&s_on, memory_order_relaxed)) {
		v ^= v << 13, v ^= v >> 7, v ^= v << 17;
		uint64_t n = 1 + v % 3;
		/* Acquire: pairs with the clock thread's release after a
		 * set_limit returned: this decision starts after it. */
		uint64_t g = atomic_load_explicit(&s_gen, memory_order_acquire);
		sluice_decision_t d;
		int rc = sluice_decay_acquire(me->x, n, &d);
		if (rc == 1) {
			if (me->nrec < T_RECORDS)
				me->rec[me->nrec++] = (struct srec){ d.now_ns, n, d.limit, g };
		} else {
			me->refused++;
		}
		uint64_t k = atomic_load_explicit(&me->decisions, memory_order_relaxed) + 1;
		atomic_store_explicit(&me->decisions, k, memory_order_relaxed);
		if (k % 8 == 0)
			sched_yield();
	}
	return NULL;
}

static struct sdecider *sdeciders;
static int nsdeciders;

static void *sclock_main(void *arg)
{
	sluice_decay_t *x = arg;
	uint64_t v = 7;
	for (int i = 0; i < S_CHANGES * 40; i++) {
		v ^= v << 13, v ^= v >> 7, v ^= v << 17;
		if (i % 40 == 39) {
			uint64_t g = atomic_load_explicit(&s_gen, memory_order_relaxed) + 1;
			cr_assert_eq(sluice_decay_set_limit(x, s_limits[g]), 0);
			/* Release: a decider that reads g started after it. */
			atomic_store_explicit(&s_gen, g, memory_order_release);
		}
		if (v % 50 == 0)
			sluice_clock_manual_advance(&mclock, 30 * US); /* count fades */
		else
			sluice_clock_manual_advance(&mclock, v % US);
		PACE_WAIT(sdeciders, nsdeciders);
	}
	atomic_store_explicit(&s_on, 0, memory_order_relaxed);
	return NULL;
}

static int srec_by_time(const void *a, const void *b)
{
	const struct srec *p = a, *q = b;
	return p->t < q->t ? -1 : p->t > q->t;
}

Test(decay, set_limit_under_load_takes_effect_and_keeps_the_count)
{
	sluice_decay_t x;
	sluice_clock_manual_init(&mclock, 1000 * SEC);
	sluice_decay_config_t cfg = { .limit = 24, .limit_max = S_LMAX, .half_life_ns = T_H,
		                      .clock = &mclock };
	cr_assert_eq(sluice_decay_init(&x, &cfg), 0);
	s_limits[0] = 24;
	for (uint64_t j = 1; j <= S_CHANGES; j++) /* distinct: odd low, even high */
		s_limits[j] = j % 2 ? 4 + j : S_LMAX - j;
	atomic_store(&s_gen, 0);
	atomic_store(&s_on, 1);
	int nthreads = 3;
	struct sdecider *d = calloc((size_t)nthreads, sizeof(*d));
	cr_assert_not_null(d);
	sdeciders = d;
	nsdeciders = nthreads;
	for (int i = 0; i < nthreads; i++) {
		d[i].x = &x;
		d[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 3);
		d[i].rec = malloc(sizeof(struct srec) * T_RECORDS);
		cr_assert_not_null(d[i].rec);
		cr_assert_eq(pthread_create(&d[i].tid, NULL, sdecider_main, &d[i]), 0);
	}
	pthread_t ct;
	cr_assert_eq(pthread_create(&ct, NULL, sclock_main, &x), 0);
	pthread_join(ct, NULL);
	for (int i = 0; i < nthreads; i++)
		pthread_join(d[i].tid, NULL);
	cr_assert_eq(atomic_load(&s_gen), S_CHANGES);
	cr_assert_eq(sluice_decay_limit(&x), s_limits[S_CHANGES]);

	size_t total;
	uint64_t refused;
	struct srec *all = REC_MERGE(d, nthreads, T_RECORDS, NULL, &total, &refused);
	/* which change each limit value belongs to (they are distinct) */
	uint64_t late = 0;
	for (size_t i = 0; i < total; i++) {
		int j = -1;
		for (int c = 0; c <= S_CHANGES; c++)
			if (s_limits[c] == all[i].lim)
				j = c;
		cr_assert_geq(j, 0, "admission checked against %llu: never set",
		              (unsigned long long)all[i].lim);
		cr_assert_geq((uint64_t)j, all[i].gen,
		              "admission started after change %llu returned, checked against "
		              "change %d's limit", (unsigned long long)all[i].gen, j);
		late += (uint64_t)j > all[i].gen;
	}
	qsort(all, total, sizeof(*all), srec_by_time);
	long double unit = 1.0L / (long double)(1ULL << x.frac_bits);
	struct model m = { .t = 0, .h = T_H };
	uint64_t group_max = 0, lowered = 0;
	for (size_t i = 0; i < total; i++) {
		model_add(&m, all[i].t, all[i].n);
		group_max = all[i].lim > group_max ? all[i].lim : group_max;
		if (i + 1 < total && all[i + 1].t == all[i].t)
			continue; /* check after the whole group at this time */
		cr_assert(m.sum <= (long double)group_max + 2 * unit + 1e-9L,
		          "decayed sum %.9Lf at %llu over the limit %llu", m.sum,
		          (unsigned long long)all[i].t, (unsigned long long)group_max);
		lowered += group_max < 24 && m.sum > (long double)group_max - 3;
		group_max = 0;
	}
	cr_assert_gt(total, 500, "admitted %zu", total);
	cr_assert_gt(refused, 500, "the limit must bite");
	cr_assert_gt(lowered, 10, "low limits must be reached: %llu", (unsigned long long)lowered);
	cr_log_info("set_limit: admitted=%zu refused=%llu; checked against a later change than "
	            "had returned: %llu; near a low limit: %llu", total,
	            (unsigned long long)refused, (unsigned long long)late,
	            (unsigned long long)lowered);
	for (int i = 0; i < nthreads; i++)
		free(d[i].rec);
	free(d);
	free(all);
}

/* set_limit single-threaded: the count is kept (nothing forgotten, nothing
 * minted), the new limit bounds it, and bad values change nothing. */
Test(decay, set_limit_keeps_the_count)
{
	sluice_decay_t x;
	sluice_clock_manual_init(&mclock, 0);
	sluice_decay_config_t cfg = { .limit = 10, .limit_max = 100, .half_life_ns = SEC,
		                      .clock = &mclock };
	cr_assert_eq(sluice_decay_init(&x, &cfg), 0);
	cr_assert_eq(sluice_decay_acquire_at(&x, 10, SEC, NULL), 1);
	cr_assert_eq(sluice_decay_available_at(&x, SEC), 0);
	/* raised: the 10 counted stay counted; 40 more pass at once */
	cr_assert_eq(sluice_decay_set_limit(&x, 50), 0);
	cr_assert_eq(sluice_decay_limit(&x), 50);
	cr_assert_eq(sluice__decay_count_at(&x, SEC), 10.0, "nothing forgotten");
	cr_assert_eq(sluice_decay_available_at(&x, SEC), 40);
	sluice_decision_t d;
	cr_assert_eq(sluice_decay_acquire_at(&x, 41, SEC, &d), 0);
	cr_assert_eq(sluice_decay_acquire_at(&x, 40, SEC, &d), 1);
	cr_assert_eq(d.limit, 50);
	/* lowered under the count: refused until 50 decays to 4 (3.64 h) */
	cr_assert_eq(sluice_decay_set_limit(&x, 5), 0);
	cr_assert_eq(sluice__decay_count_at(&x, SEC), 50.0, "nothing minted");
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, 3 * SEC, &d), 0);
	cr_assert_eq(d.limit, 5);
	cr_assert_eq(sluice_decay_acquire_at(&x, 6, 3 * SEC, &d), SLUICE_ETOOBIG);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	/* log2(50/4) = 3.64 half-lives after 1 s: refused before, passes after */
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, SEC + 3600 * MS, NULL), 0);
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, SEC + 3700 * MS, NULL), 1);
	/* out of range: ELIMIT, nothing changed */
	cr_assert_eq(sluice_decay_set_limit(&x, 0), SLUICE_ELIMIT);
	cr_assert_eq(sluice_decay_set_limit(&x, 101), SLUICE_ELIMIT);
	cr_assert_eq(sluice_decay_limit(&x), 5);
	cr_assert_eq(sluice_decay_set_limit(NULL, 5), SLUICE_EINVAL);
	/* limit_max below the limit, or above the maximum */
	sluice_decay_t y;
	cfg.limit_max = 5;
	cr_assert_eq(sluice_decay_init(&y, &cfg), SLUICE_ELIMIT);
	cfg.limit_max = SLUICE_DECAY_LIMIT_MAX + 1;
	cr_assert_eq(sluice_decay_init(&y, &cfg), SLUICE_ELIMIT);
}

/* ---- readings across a change --------------------------------------------- */

/* L = 10 (up to 100), h = 1 s, full: 10 admitted at 5 s. */
static void make_full_at_5s(sluice_decay_t *x)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_decay_config_t cfg = { .limit = 10, .limit_max = 100, .half_life_ns = SEC,
		                      .clock = &mclock };
	cr_assert_eq(sluice_decay_init(x, &cfg), 0);
	cr_assert_eq(sluice_decay_acquire_at(x, 10, 5 * SEC, NULL), 1);
}

/*
 * A change is stamped one grid unit past the count's time; a decision
 * whose reading is older is judged at that stamp, against the new limit
 * (decay.h, READINGS ACROSS A CHANGE): a raise admits the difference at the
 * count the change kept, no more, and the decision reports the stamp.
 */
Test(decay, a_reading_older_than_a_change_is_judged_at_the_change)
{
	sluice_decay_t x;
	make_full_at_5s(&x);
	cr_assert_eq(sluice_decay_set_limit(&x, 30), 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_decay_acquire_at(&x, 21, 2 * SEC, &d), 0, "10 kept + 21 > 30");
	cr_assert_gt(d.now_ns, 5 * SEC, "judged at the change's stamp, not at 2 s");
	cr_assert_eq(d.limit, 30);
	cr_assert_eq(sluice_decay_acquire_at(&x, 20, 2 * SEC, &d), 1);
	cr_assert_gt(d.now_ns, 5 * SEC);
	cr_assert_eq(sluice_decay_set_limit(&x, 20), 0);
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, 3 * SEC, &d), 0, "30 kept > 20");
	cr_assert_eq(d.limit, 20);
}

/*
 * A decision stalled between its reads and its CAS while a lowering
 * publishes: the change rewrites the state word, so the victim's CAS fails
 * and it decides again against the new limit.  (This held before issue 22
 * too; a set_limit that only stored the limit fails it.)
 */
static void attack_lower(void *arg)
{
	cr_assert_eq(sluice_decay_set_limit(arg, 10), 0);
}

Test(decay, a_decision_stalled_across_a_change_is_judged_by_the_new_limit)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
	cr_assert_leq(sizeof(sluice_decay_t), 4096);
	sluice_decay_t *x = stall_page();
	cr_assert_not_null(x);
	sluice_clock_manual_init(&mclock, 0);
	sluice_decay_config_t cfg = { .limit = 100, .half_life_ns = SEC, .clock = &mclock };
	cr_assert_eq(sluice_decay_init(x, &cfg), 0);
	cr_assert_eq(sluice_decay_acquire_at(x, 10, SEC, NULL), 1);
	stall_arm(&x->anchor, 16, attack_lower, x);
	sluice_decision_t d;
	int rc = sluice_decay_acquire_at(x, 1, SEC, &d);
	cr_assert(stall_fired(), "the victim never wrote the state");
	cr_assert_eq(rc, 0, "10 counted against L = 10: admitted against d.limit %llu",
	             (unsigned long long)d.limit);
	cr_assert_eq(d.limit, 10);
	stall_page_free(x);
}

/*
 * A raise whose setter is preempted between its parts: no decision may see
 * the new limit before the change's stamp.  The setter (L 10 -> 30) is
 * stopped just before it rewrites the state word; meanwhile a decision at
 * an older reading asks for 5 on a count of 10.  Before the rewrite the
 * change has no stamp yet: the decision is judged against 10 at the
 * state's time and refused.  A setter that stored the raise first let it
 * through there, at 5 s, before the change (the old code: admitted
 * against d.limit 30 at 5 s).
 */
static sluice_decision_t raise_d;
static int raise_rc;

static void attack_decide_at_an_older_reading(void *arg)
{
	raise_rc = sluice_decay_acquire_at(arg, 5, 2 * SEC, &raise_d);
}

Test(decay, a_raise_preempted_before_its_rewrite_is_not_seen_early)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
	sluice_decay_t *x = stall_page();
	cr_assert_not_null(x);
	make_full_at_5s(x);
	stall_arm(&x->anchor, 16, attack_decide_at_an_older_reading, x);
	cr_assert_eq(sluice_decay_set_limit(x, 30), 0);
	cr_assert(stall_fired(), "the setter never rewrote the state");
	cr_assert_eq(raise_rc, 0, "admitted at %llu ns against d.limit %llu, before the change",
	             (unsigned long long)raise_d.now_ns, (unsigned long long)raise_d.limit);
	cr_assert_eq(raise_d.limit, 10);
	sluice_decision_t d;
	cr_assert_eq(sluice_decay_acquire_at(x, 20, 2 * SEC, &d), 1, "after it: the raise");
	cr_assert_gt(d.now_ns, 5 * SEC, "at the change's stamp");
	stall_page_free(x);
}

/* ---- racing for the last permit --------------------------------------------- */

#include "race_harness.h"

static int race_take(void *lim, uint64_t t)
{
	return sluice_decay_acquire_at(lim, 1, t, NULL);
}

/* Before each round: the main thread alone admits one permit 600 ns before
 * race_time (below). */
static void race_admit_one(void *lim)
{
	cr_assert_eq(sluice_decay_acquire_at(lim, 1, race_time - 600, NULL), 1);
}

/*
 * L = 2, h = 1 us.  Each round the main thread alone admits one permit 600
 * ns before the race (0.66 of it left then: one more fits, two do not);
 * then two threads meet at a barrier and ask at that instant: exactly one
 * may win.  (A lost update, say a plain store for the CAS, lets both win.)
 * Detection is probabilistic: the two threads must overlap in a window of
 * tens of ns; on 2 cores a broken CAS failed this test in 3 to 7 runs out of
 * 10 even under a load average of 10.  A correct limiter never fails it.
 */
Test(decay, racing_threads_take_the_last_permit)
{
	sluice_decay_t x;
	make(&x, 2, US, 0);
	struct race_ctx mine = { &x, race_take, 1 }, theirs = { &x, race_take, 2 };
	int both, none;
	/* 100 us a round: forgotten, count 0; then the lone admission */
	cr_assert_eq(race_run(&mine, &theirs, 100 * US, race_admit_one, &both, &none), 0);
	cr_assert_eq(both, 0, "%d rounds with two winners", both);
	cr_assert_eq(none, 0, "%d rounds with no winner", none);
}

/* ---- clock resolution, time bases, forged states (issue 10) --------------- */

/* A half-life below the clock's step: between two readings the count fades
 * by 2^(-step/h), nearly all of it, so about L pass per step instead of the
 * mean L ln2 / h.  Refused as the other limiters refuse a bucket below the
 * step (the old code accepted 1 us on the 4 ms coarse clock). */
Test(decay, half_life_below_the_clock_step_is_refused)
{
	const sluice_clock_t *clocks[] = { &sluice_clock_coarse, &sluice_clock_cached };
	for (size_t i = 0; i < 2; i++) {
		uint64_t step = sluice_clock_resolution_ns(clocks[i]);
		cr_assert_gt(step, SLUICE_DECAY_HALFLIFE_MIN_NS, "a clock coarser than 1 us");
		sluice_decay_config_t cfg = { .limit = 100, .clock = clocks[i] };
		uint64_t bad[] = { SLUICE_DECAY_HALFLIFE_MIN_NS, step / 2, step - 1 };
		for (size_t k = 0; k < 3; k++) {
			sluice_decay_t x, before;
			memset(&x, 0x3c, sizeof(x));
			memcpy(&before, &x, sizeof(x));
			cfg.half_life_ns = bad[k];
			int rc = sluice_decay_init(&x, &cfg);
			cr_assert_eq(rc, SLUICE_ERESOLUTION, "clock %zu, h = %llu: %s", i,
			             (unsigned long long)bad[k], sluice_err_name(rc));
			cr_assert_eq(memcmp(&x, &before, sizeof(x)), 0, "a failed init touched it");
		}
		sluice_decay_t x;
		cfg.half_life_ns = step;
		cr_assert_eq(sluice_decay_init(&x, &cfg), 0, "h = one step is fine");
	}
	/* the manual clock has 1 ns steps: the smallest half-life is fine */
	sluice_decay_t x;
	make(&x, 100, SLUICE_DECAY_HALFLIFE_MIN_NS, 0);
	/* h = one step (readings 1 ms apart, h = 1 ms): saturated traffic
	 * refills half of L per step, (1 - 2^-1) / ln2 = 72% of the mean rate,
	 * as decay.h's LIMITS says */
	make(&x, 1000, MS, 0);
	uint64_t late = 0;
	for (uint64_t i = 0; i < 60; i++)
		for (uint64_t k = 0; sluice_decay_acquire_at(&x, 1, i * MS, NULL) == 1; k++)
			if (i >= 40)
				late++;
	cr_assert(late >= 20 * 499 && late <= 20 * 501, "%llu in 20 steps",
	          (unsigned long long)late);
}

/* Admit L at @t0, then check the count fades from there: half of it back
 * one half-life later, all of it once forgotten. */
static void fades_from(sluice_decay_t *x, uint64_t t0, uint64_t h)
{
	sluice_decision_t d;
	cr_assert_eq(sluice_decay_acquire_at(x, 10, t0, &d), 1, "t0 = %llu", (unsigned long long)t0);
	cr_assert_eq(d.now_ns, t0 & ~(x->unit_ns - 1));
	cr_assert_eq(sluice_decay_acquire_at(x, 1, t0, &d), 0);
	cr_assert_eq(sluice_decay_acquire_at(x, 5, t0 + h, &d), 1, "one half-life later: 5 back");
	cr_assert_eq(sluice_decay_acquire_at(x, 1, t0 + h, &d), 0);
	cr_assert_eq(sluice_decay_acquire_at(x, 10, t0 + 40 * h, &d), 1, "forgotten: all 10");
}

/* The limiter's time comes from the readings it is given, not from its
 * clock at init: a limiter configured with CLOCK_MONOTONIC (or a manual
 * clock far ahead) fed `_at` readings from 0 decays normally.  The old code
 * anchored at the init-time reading and held every earlier reading there:
 * the count never faded and the second batch was refused for ever. */
Test(decay, time_base_is_the_readings_not_the_init_clock)
{
	uint64_t h = MS;
	sluice_decay_config_t cfg = { .limit = 10, .half_life_ns = h, .clock = &sluice_clock_monotonic };
	sluice_decay_t x;
	cr_assert_eq(sluice_decay_init(&x, &cfg), 0);
	cr_assert_gt(sluice_clock_monotonic_ns(), 1000 * h, "uptime above the readings used");
	fades_from(&x, 0, h);
	fades_from(&x, 1000 * h, h);

	sluice_clock_t far;
	sluice_clock_manual_init(&far, UINT64_MAX - 1000);
	cfg.clock = &far;
	cr_assert_eq(sluice_decay_init(&x, &cfg), 0);
	fades_from(&x, 1, h);

	/* readings near the top of the time base, then a jump back (held at
	 * the newest time: no wrap, no minting) */
	cfg.clock = &sluice_clock_monotonic;
	cr_assert_eq(sluice_decay_init(&x, &cfg), 0);
	uint64_t top = UINT64_MAX - 100 * h;
	fades_from(&x, top, h);
	sluice_decision_t d;
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, 0, &d), 0, "a jump back to 0 mints nothing");
	cr_assert_eq(d.now_ns, (top + 40 * h) & ~(x.unit_ns - 1), "held at the newest time");
	cr_assert_eq(sluice_decay_acquire_at(&x, 10, UINT64_MAX, &d), 1, "forgotten by the end");
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, UINT64_MAX, &d), 0);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER, "no time passes the end");
}

/*
 * States only a stalled writer can leave (a thread whose CAS succeeded after
 * the word came back bit for bit under a later anchor): an EMPTY word that
 * announces an anchor older than the current one, and a HOT word whose tag
 * is two quarters off.  The old snapshot looked again for ever on both, so
 * every call spun (the test's timeout catches it).  Forged here directly.
 */
Test(decay, states_left_by_a_stalled_writer_never_spin, .timeout = 20)
{
	sluice_decay_t x;
	make(&x, 10, MS, 0);
	uint64_t t = 1000 * SEC;
	cr_assert_eq(sluice_decay_acquire_at(&x, 3, t, NULL), 1); /* anchors near t */
	uint64_t a = atomic_load(&x.anchor);
	cr_assert_gt(a, SEC);
	sluice_decision_t d;

	/* EMPTY as of 1 s, long before the anchor: read as empty (exact) */
	atomic_store(&x.word, (1ULL << 63) | (SEC >> 1));
	cr_assert_eq(sluice_decay_acquire_at(&x, 10, t, &d), 1, "empty: all 10 pass");
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, t, &d), 0);
	cr_assert_eq(sluice__decay_count_at(&x, t), 10.0);

	/* HOT, full count, tag two quarters off: read as a count that is at
	 * least as young as its field allows (fewer admissions), re-tagged by
	 * the next write */
	uint32_t sh = 27 + x.unit_shift;
	uint64_t tag = (((a >> sh) & 3) + 2) & 3;
	uint64_t field = ((t >> x.unit_shift) & ((1ULL << 29) - 1)) << 32;
	uint64_t full = 10ULL << x.frac_bits;
	atomic_store(&x.word, (tag << 61) | field | full);
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, t, &d), 0, "a full count refuses");
	cr_assert_lt(d.retry_after_ns, SLUICE_NEVER);
	cr_assert(sluice__decay_count_at(&x, t) >= 10.0);
	uint64_t later = d.now_ns + d.retry_after_ns;
	cr_assert_eq(sluice_decay_acquire_at(&x, 1, later, &d), 1, "passes when it says");
	cr_assert_eq((atomic_load(&x.word) >> 61) & 3, (atomic_load(&x.anchor) >> sh) & 3,
	             "the write re-tagged the word");
	cr_assert_eq(sluice_decay_refund(&x, 1, &d), 0);
}
