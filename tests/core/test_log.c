/* SPDX-License-Identifier: MIT */
/*
 * test_log.c - exact sliding log, single thread, manual clock.
 *
 * The strongest check is a reference model: a plain array holding the time
 * of every permit ever admitted, with the documented rules (the log's time
 * is max(reading, newest admission time), starting at 1; a request of n
 * passes when the n-th oldest of the last L permits is W or more old) and
 * linear scans instead of the ring's binary searches.  Refunds of earlier
 * admissions are exact (0) exactly when the model says the permits have
 * left the window: every later decision must still agree, field by field,
 * over long pseudo-random schedules with clock jumps, n > 1, n > L and
 * times near 2^64.  Then the guarantee itself is checked on what the log
 * admitted: every interval of length W starting at an admission holds at
 * most L.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/error.h"
#include "sluice/log.h"

#include "test_rng.h"

#define US 1000ULL
#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(log, .timeout = 120);

static sluice_clock_t mclock;

/* Permits the log counts in the window of @t, read through the one public
 * query (exact while they are at most the limit and no thread runs). */
static uint64_t counted_at(sluice_log_t *lg, uint64_t t)
{
	return atomic_load_explicit(&lg->limit, memory_order_relaxed) -
	       sluice_log_available_at(lg, t);
}

static void make(sluice_log_t *lg, uint64_t limit, uint64_t window_ns)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_log_config_t cfg = { .limit = limit, .window_ns = window_ns, .clock = &mclock };
	int rc = sluice_log_init(lg, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
}

/* ---- reference model ---------------------------------------------------- */

struct model {
	uint64_t L, W, last, last_n; /* last_n: the newest admission's permits */
	uint64_t *t; /* t[i]: time of the i-th permit still counted */
	size_t n, cap;
};

static void model_init(struct model *m, uint64_t L, uint64_t W, size_t cap)
{
	m->L = L;
	m->W = W;
	m->last = 1;
	m->last_n = 0;
	m->n = 0;
	m->cap = cap;
	m->t = malloc(sizeof(uint64_t) * cap);
	cr_assert_not_null(m->t);
}

/* set_limit to @L (log.h, READINGS ACROSS A CHANGE): a change moves the
 * log's time on by 1 ns, and the newest admission's permits with it. */
static void model_set_limit(struct model *m, uint64_t L)
{
	if (L != m->L && m->last != UINT64_MAX) {
		for (uint64_t i = 0; i < m->last_n; i++)
			m->t[m->n - 1 - i]++;
		m->last++;
	}
	m->L = L;
}

/* Of the last L entries (missing ones, before the first permit, count as
 * gone), how many are W or more older than T. */
static uint64_t model_left(const struct model *m, uint64_t T)
{
	uint64_t left = 0;
	for (uint64_t k = 1; k <= m->L; k++) {
		if (k > m->n || T - m->t[m->n - k] >= m->W)
			left++;
	}
	return left;
}

static int model_acquire(struct model *m, uint64_t n, uint64_t now, sluice_decision_t *w)
{
	uint64_t T = now > m->last ? now : m->last;
	memset(w, 0, sizeof(*w));
	w->limit = m->L;
	w->now_ns = T;
	if (n > m->L) {
		w->retry_after_ns = SLUICE_NEVER;
		return SLUICE_ETOOBIG;
	}
	uint64_t left = model_left(m, T);
	/* the n-th oldest of the last L: index n_total - (L - n + 1) */
	int fits = m->n + n <= m->L || T - m->t[m->n + n - 1 - m->L] >= m->W;
	if (fits) {
		cr_assert(m->n + n <= m->cap, "model capacity");
		for (uint64_t i = 0; i < n; i++)
			m->t[m->n++] = T;
		m->last = T;
		m->last_n = n;
		w->allowed = 1;
		w->remaining = left - n;
		w->reset_ns = m->W;
		return 1;
	}
	w->remaining = left;
	w->retry_after_ns = m->t[m->n + n - 1 - m->L] + m->W - T;
	w->reset_ns = m->t[m->n - 1] + m->W - T;
	return 0;
}

/* The documented refund rule (log.h): expired (SLUICE_EEXPIRED) once the
 * log's time is W or more past the admission's, and then nothing is counted
 * any more (the model keeps the permits: they decide nothing). */
static int model_refund_exact(const struct model *m, uint64_t ta)
{
	return m->last - ta >= m->W;
}


static void assert_same(int step, int got, int want, const sluice_decision_t *g,
                        const sluice_decision_t *w)
{
	cr_assert_eq(got, want, "step %d: log %d, model %d", step, got, want);
	cr_assert_eq(g->allowed, w->allowed, "step %d: allowed", step);
	cr_assert_eq(g->limit, w->limit, "step %d: limit", step);
	cr_assert_eq(g->now_ns, w->now_ns, "step %d: now_ns %llu, model %llu", step,
	             (unsigned long long)g->now_ns, (unsigned long long)w->now_ns);
	cr_assert_eq(g->retry_after_ns, w->retry_after_ns, "step %d: retry_after %llu, model %llu",
	             step, (unsigned long long)g->retry_after_ns,
	             (unsigned long long)w->retry_after_ns);
	cr_assert_eq(g->remaining, w->remaining, "step %d: remaining %llu, model %llu", step,
	             (unsigned long long)g->remaining, (unsigned long long)w->remaining);
	if (got >= 0)
		cr_assert_eq(g->reset_ns, w->reset_ns, "step %d: reset %llu, model %llu", step,
		             (unsigned long long)g->reset_ns, (unsigned long long)w->reset_ns);
}

struct admission {
	uint64_t t, n, lim; /* lim: d.limit, the limit it was judged against */
};

/* Every interval [a.t, a.t + W) of the recorded admissions holds at most
 * the largest d.limit among its admissions (L when no set_limit ran: the
 * GUARANTEE; SET_LIMIT otherwise).  Intervals that start elsewhere hold no
 * more than one that starts at the first admission inside them, so these
 * are all the intervals there are.  *@tight counts those at their bound. */
static uint64_t check_every_interval(const struct admission *a, size_t na, uint64_t W,
                                     uint64_t *tight)
{
	uint64_t worst = 0, sum = 0;
	size_t j = 0;
	*tight = 0;
	for (size_t i = 0; i < na; i++) {
		if (i > 0)
			cr_assert_geq(a[i].t, a[i - 1].t, "now_ns went backwards at %zu", i);
		if (j < i)
			j = i, sum = 0;
		while (j < na && a[j].t - a[i].t < W)
			sum += a[j++].n;
		uint64_t bound = 0;
		for (size_t k = i; k < j; k++)
			bound = a[k].n && a[k].lim > bound ? a[k].lim : bound;
		worst = sum > worst ? sum : worst;
		*tight += sum == bound && sum;
		cr_assert_leq(sum, bound, "%llu admitted in [%llu, +W), largest d.limit %llu",
		              (unsigned long long)sum, (unsigned long long)a[i].t,
		              (unsigned long long)bound);
		sum -= a[i].n;
	}
	return worst;
}

struct schedule {
	uint64_t limit, window_ns, start_ns, n_max, seed;
};

ParameterizedTestParameters(log, matches_reference_model)
{
	static struct schedule params[] = {
		{ 10, SEC, 0, 4, 1 },
		{ 1, 10 * MS, 5 * SEC, 1, 2 },          /* L = 1: one slot plus the spare */
		{ 2, 10 * MS, 5 * SEC, 2, 3 },          /* n = L: the deciding slot is the newest */
		{ 100, 700 * MS, 123, 40, 4 },
		{ 37, 1000, 77, 37, 5 },                /* W = 1 us, n up to L */
		{ 1000, SEC, SEC, 300, 6 },
		/* near the top of the 64-bit time base: no wrap anywhere */
		{ 7, 3 * SEC, UINT64_MAX - 4000 * SEC, 3, 7 },
		{ 16, SEC, UINT64_MAX - 9000 * SEC, 16, 8 },
		/* seed >= 100: set_limit every 1000 steps, capacity 2L */
		{ 10, SEC, 0, 4, 101 },
		{ 100, 700 * MS, 123, 40, 104 },
		{ 1, 10 * MS, 5 * SEC, 1, 102 },
		{ 16, SEC, UINT64_MAX - 9000 * SEC, 16, 108 },
	};
	return cr_make_param_array(struct schedule, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct schedule *p, log, matches_reference_model)
{
	const int steps = 30000;
	const uint64_t L = p->limit, W = p->window_ns;
	const int changing = p->seed >= 100;
	sluice_log_t lg;
	sluice_clock_manual_init(&mclock, 0);
	sluice_log_config_t cfg = { .limit = L, .window_ns = W, .clock = &mclock,
		                    .capacity = changing ? 2 * L : 0 };
	cr_assert_eq(sluice_log_init(&lg, &cfg), 0);
	/* lower (below what is counted, and below some n), raise to 2L */
	const uint64_t lims[] = { L, L / 4 + 1, 2 * L, L / 2 + 1 };
	rng_state = p->seed * 0x9E3779B97F4A7C15ULL + 1;
	struct model m;
	model_init(&m, L, W, (size_t)steps * (2 * L + 4));
	struct admission *adm = malloc(sizeof(*adm) * (size_t)steps);
	cr_assert_not_null(adm);
	size_t nadm = 0;

	/* Steps of up to W/(2L) on average, so the limit bites; jumps back
	 * by up to 3 W (held at the log's time), skips forward by up to 2 W
	 * (idle gaps: where exact refunds are possible). */
	uint64_t step_max = W / L + 1;
	uint64_t t = p->start_ns, top = UINT64_MAX - 2 * W;
	uint64_t admitted = 0, refused = 0, toobig = 0, refunds_exact = 0, refunds_kept = 0;
	sluice_decision_t prev[8];
	uint64_t prev_n[8] = { 0 };
	size_t prev_i[8] = { 0 };
	for (int i = 0; i < steps; i++) {
		uint64_t r = rnd();
		switch (r % 64) {
		case 0: { /* back by up to 3 W */
			uint64_t back = (r >> 8) % (3 * W);
			t = back < t ? t - back : 0;
			break;
		}
		case 1: case 2: /* forward by up to 2 W */
			t += (r >> 8) % (2 * W);
			break;
		default:
			t += (r >> 8) % step_max;
		}
		if (t > top)
			t = top - (r >> 8) % W; /* stay clear of the edge, but near it */
		uint64_t n = 1 + (r >> 40) % p->n_max;
		if ((r >> 20) % 97 == 0)
			n = (changing ? 2 * L : L) + 1 + (r >> 30) % 3; /* can never pass */
		if (changing && i % 1000 == 999) {
			uint64_t L2 = lims[(uint64_t)i / 1000 % 4];
			model_set_limit(&m, L2);
			cr_assert_eq(sluice_log_set_limit(&lg, L2), 0);
		}

		sluice_decision_t got, want;
		memset(&got, 0x5a, sizeof(got));
		int w = model_acquire(&m, n, t, &want);
		int g = sluice_log_acquire_at(&lg, n, t, &got);
		assert_same(i, g, w, &got, &want);
		if (g == 1) {
			admitted += n;
			adm[nadm++] = (struct admission){ got.now_ns, n, got.limit };
		} else if (g == 0) {
			refused++;
		} else {
			toobig++;
		}
		if (i % 16 == 0)
			cr_assert_eq(sluice_log_available_at(&lg, t), model_left(&m, m.last > t ? m.last : t),
			             "step %d: available", i);

		/* Now and then give back one of the last 8 admissions, as a
		 * composite would (this one, or an older one), each at most
		 * once: recent ones are kept, older ones may have left. */
		if (g == 1) {
			size_t k = (r >> 53) % 8;
			if (prev_n[k] && (r >> 50) % 3 == 0) {
				int exact = model_refund_exact(&m, prev[k].now_ns);
				int rc = sluice_log_refund(&lg, prev_n[k], &prev[k]);
				cr_assert(rc == SLUICE_EEXPIRED || rc == SLUICE_ECANCEL,
				          "step %d: refund %s", i, sluice_err_name(rc));
				cr_assert_eq(rc == SLUICE_EEXPIRED, exact, "step %d: refund %s, the model says %s", i,
				             sluice_err_name(rc), exact ? "exact" : "kept");
				prev_n[k] = 0; /* at most once */
				if (rc == SLUICE_EEXPIRED) {
					adm[prev_i[k]].n = 0; /* remove it from the ledger */
					refunds_exact++;
				} else {
					refunds_kept++;
				}
			}
			if (prev_n[k] == 0 || (r >> 56) % 2 == 0) {
				prev[k] = got;
				prev_n[k] = n;
				prev_i[k] = nadm - 1;
			}
		}
	}
	cr_assert_gt(admitted, 5 * L, "L=%llu: the schedule must admit plenty (%llu)",
	             (unsigned long long)L, (unsigned long long)admitted);
	cr_assert_gt(refused, 500, "and refuse plenty (%llu), or it tests nothing",
	             (unsigned long long)refused);
	cr_assert_gt(toobig, 50);
	cr_assert_gt(refunds_exact, 10, "exact refunds (%llu) must happen",
	             (unsigned long long)refunds_exact);
	/* with L = 1 every admission needs its predecessor gone, so every
	 * refund of an earlier one is exact */
	cr_assert_geq(refunds_kept, L > 1 ? 10 : 0, "and refused ones (%llu)",
	             (unsigned long long)refunds_kept);

	uint64_t tight;
	uint64_t worst = check_every_interval(adm, nadm, W, &tight);
	if (!changing)
		cr_assert_eq(worst, L, "the schedule should fill some window exactly");
	cr_assert_gt(tight, 0, "some window must be filled to its bound");
	cr_log_info("L=%llu W=%llu admitted=%llu refused=%llu refunds exact=%llu kept=%llu",
	            (unsigned long long)L, (unsigned long long)W, (unsigned long long)admitted,
	            (unsigned long long)refused, (unsigned long long)refunds_exact,
	            (unsigned long long)refunds_kept);
	free(adm);
	free(m.t);
	sluice_log_destroy(&lg);
}

/* The sliding window's documented worst case (2L across a bucket edge)
 * cannot happen here: L at the very end of a "window", then a request every
 * microsecond: nothing passes until exactly W after the burst. */
Test(log, boundary_burst_is_not_possible)
{
	const uint64_t L = 100, W = SEC;
	sluice_log_t lg;
	make(&lg, L, W);
	cr_assert_eq(sluice_log_acquire_at(&lg, L, W - 1, NULL), 1);
	uint64_t first_again = 0;
	for (uint64_t t = W - 1; t < 3 * W; t += US) {
		if (sluice_log_acquire_at(&lg, 1, t, NULL) == 1) {
			first_again = t;
			break;
		}
	}
	cr_assert_eq(first_again, 2 * W - 1, "at %llu", (unsigned long long)first_again);
	cr_assert_eq(sluice_log_acquire_at(&lg, L - 1, 2 * W - 1, NULL), 1, "the rest too");
	sluice_log_destroy(&lg);
}

/* Any alignment: permits spread over the window leave one by one, each
 * exactly W after it came; n > 1 is decided by its n-th oldest entry. */
Test(log, nth_oldest_decides_all_or_nothing)
{
	sluice_log_t lg;
	make(&lg, 10, 1000);
	sluice_decision_t d;
	cr_assert_eq(sluice_log_acquire_at(&lg, 3, 100, &d), 1);
	cr_assert_eq(d.remaining, 7);
	cr_assert_eq(sluice_log_acquire_at(&lg, 3, 400, &d), 1);
	cr_assert_eq(sluice_log_acquire_at(&lg, 4, 700, &d), 1);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(d.reset_ns, 1000);
	/* at 1100 the three from 100 have left: 3 pass, 4 do not */
	cr_assert_eq(sluice_log_acquire_at(&lg, 4, 1100, &d), 0);
	cr_assert_eq(d.remaining, 3);
	cr_assert_eq(d.retry_after_ns, 300, "the 4th oldest (at 400) leaves at 1400");
	cr_assert_eq(d.reset_ns, 600, "the newest (at 700) leaves at 1700");
	cr_assert_eq(d.now_ns, 1100);
	cr_assert_eq(counted_at(&lg, 1100), 7, "a refusal takes nothing");
	cr_assert_eq(sluice_log_acquire_at(&lg, 3, 1100, &d), 1);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 1399, NULL), 0);
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 1400, NULL), 1);
	sluice_log_destroy(&lg);
}

Test(log, retry_after_is_exact)
{
	sluice_log_t lg;
	make(&lg, 5, 10 * MS);
	for (uint64_t i = 0; i < 5; i++)
		cr_assert_eq(sluice_log_acquire_at(&lg, 1, 1 * MS + i * MS, NULL), 1);
	sluice_decision_t d;
	for (uint64_t n = 1; n <= 5; n++) {
		uint64_t at = 5 * MS + 321;
		cr_assert_eq(sluice_log_acquire_at(&lg, n, at, &d), 0);
		/* the n-th oldest came at n ms and leaves at n ms + 10 ms */
		cr_assert_eq(d.retry_after_ns, n * MS + 10 * MS - at, "n=%llu", (unsigned long long)n);
		cr_assert_eq(sluice_log_acquire_at(&lg, n, at + d.retry_after_ns - 1, NULL), 0);
	}
	cr_assert_eq(sluice_log_acquire_at(&lg, 2, 12 * MS, &d), 1, "exactly when 2 left");
	sluice_log_destroy(&lg);
}

Test(log, clock_backwards_by_seconds)
{
	sluice_log_t lg;
	make(&lg, 20, SEC);
	sluice_decision_t d;
	cr_assert_eq(sluice_log_acquire_at(&lg, 20, 30 * SEC + 50 * MS, &d), 1);
	for (uint64_t back = 1; back <= 10; back++) {
		cr_assert_eq(sluice_log_acquire_at(&lg, 1, 30 * SEC - back * SEC, &d), 0);
		cr_assert_eq(d.now_ns, 30 * SEC + 50 * MS, "held at the newest admission's time");
		cr_assert_eq(d.retry_after_ns, SEC);
	}
	cr_assert_eq(counted_at(&lg, 5 * SEC), 20, "nothing was forgotten");
	/* the plain variant reads the manual clock the same way */
	sluice_clock_manual_set(&mclock, 2 * SEC);
	cr_assert_eq(sluice_log_acquire(&lg, 1, &d), 0);
	cr_assert_eq(d.now_ns, 30 * SEC + 50 * MS);
	sluice_clock_manual_set(&mclock, 31 * SEC + 50 * MS);
	cr_assert_eq(sluice_log_acquire(&lg, 20, &d), 1);
	cr_assert_eq(d.now_ns, 31 * SEC + 50 * MS);
	sluice_log_destroy(&lg);
}

Test(log, time_starts_at_one_ns)
{
	sluice_log_t lg;
	make(&lg, 2, 10);
	sluice_decision_t d;
	cr_assert_eq(sluice_log_acquire_at(&lg, 2, 0, &d), 1);
	cr_assert_eq(d.now_ns, 1, "a reading of 0 is used as 1");
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 10, &d), 0);
	cr_assert_eq(d.retry_after_ns, 1);
	cr_assert_eq(sluice_log_acquire_at(&lg, 2, 11, &d), 1);
	sluice_log_destroy(&lg);
}

Test(log, times_at_the_top_of_the_time_base)
{
	const uint64_t W = 1000;
	sluice_log_t lg;
	make(&lg, 3, W);
	sluice_decision_t d;
	uint64_t t0 = UINT64_MAX - 2 * W;
	cr_assert_eq(sluice_log_acquire_at(&lg, 3, t0, &d), 1);
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, t0 + W - 1, &d), 0);
	cr_assert_eq(d.retry_after_ns, 1);
	cr_assert_eq(sluice_log_acquire_at(&lg, 3, t0 + W, &d), 1);
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, UINT64_MAX - 1, &d), 0);
	cr_assert_eq(d.retry_after_ns, 1);
	cr_assert_eq(sluice_log_acquire_at(&lg, 3, UINT64_MAX, &d), 1);
	cr_assert_eq(d.now_ns, UINT64_MAX);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(d.reset_ns, W);
	/* the clock cannot go further; a reading from the past is held */
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 5, &d), 0);
	cr_assert_eq(d.now_ns, UINT64_MAX);
	cr_assert_eq(d.retry_after_ns, W);
	cr_assert_eq(counted_at(&lg, 0), 3);
	sluice_log_destroy(&lg);
}

Test(log, n_zero_and_above_limit)
{
	sluice_log_t lg;
	make(&lg, 10, SEC);
	sluice_decision_t d;
	cr_assert_eq(sluice_log_acquire_at(&lg, 0, 5, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_log_acquire_at(&lg, 11, 5, &d), SLUICE_ETOOBIG);
	cr_assert_not(d.allowed);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	cr_assert_eq(d.limit, 10);
	cr_assert_eq(d.now_ns, 5);
	cr_assert_eq(sluice_log_acquire_at(&lg, UINT64_MAX, 5, NULL), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_log_acquire_at(&lg, 10, 5, &d), 1, "nothing was taken");
	cr_assert_eq(d.remaining, 0);
	sluice_log_destroy(&lg);
}

/* ---- refunds ------------------------------------------------------------ */

/* A refund finds the decision expired once its permits have left the
 * window at the log's time, and before that keeps them counted (log.h): even after an idle
 * log, where the permits are the only ones in the window. */
Test(log, refund_expires_once_out_of_the_window)
{
	sluice_log_t lg;
	make(&lg, 4, 1000);
	sluice_decision_t a, b;
	cr_assert_eq(sluice_log_acquire_at(&lg, 3, 100, &a), 1);
	/* idle for more than W, then 4 more: the 3 from 100 have left */
	cr_assert_eq(sluice_log_acquire_at(&lg, 4, 1200, &b), 1);
	cr_assert_eq(sluice_log_refund(&lg, 3, &a), SLUICE_EEXPIRED, "left at 1100: nothing counted");
	cr_assert_eq(sluice_log_refund(&lg, 4, &b), SLUICE_ECANCEL, "still in the window");
	cr_assert_eq(counted_at(&lg, 1200), 4, "kept: fewer admissions, never more");
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 2199, NULL), 0);
	/* a reading past now_ns + W does not do: the log's time must be */
	cr_assert_eq(sluice_log_refund(&lg, 4, &b), SLUICE_ECANCEL, "the log's time is 1200");
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 2200, NULL), 1);
	cr_assert_eq(sluice_log_refund(&lg, 4, &b), SLUICE_EEXPIRED,
	             "the log's time is 2200 = 1200 + W: the first it no longer counts");
	cr_assert_eq(counted_at(&lg, 2200), 1);
	sluice_log_destroy(&lg);
}

Test(log, refund_under_load_keeps_the_permits)
{
	sluice_log_t lg;
	make(&lg, 4, 1000);
	sluice_decision_t a, b;
	cr_assert_eq(sluice_log_acquire_at(&lg, 2, 100, &a), 1);
	cr_assert_eq(sluice_log_acquire_at(&lg, 2, 600, &b), 1);
	/* the permits at 100 are still in the window at 600: removing the
	 * two from 600 would change what later decisions look at */
	cr_assert_eq(sluice_log_refund(&lg, 2, &b), SLUICE_ECANCEL);
	cr_assert_eq(counted_at(&lg, 600), 4, "kept: fewer admissions, never more");
	cr_assert_eq(sluice_log_refund(&lg, 1, &a), SLUICE_ECANCEL,
	             "first permits, but the log's time (100) is within W of 0");
	/* once they left the window there is nothing left to give back */
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 1700, NULL), 1);
	cr_assert_eq(sluice_log_refund(&lg, 2, &b), SLUICE_EEXPIRED);
	/* 2^32 windows later: expired too (the log compares full times) */
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 600 + (1ULL << 32) * 1000, NULL), 1);
	cr_assert_eq(sluice_log_refund(&lg, 2, &b), SLUICE_EEXPIRED);
	sluice_log_destroy(&lg);
}

Test(log, refund_first_admission_and_bad_arguments)
{
	sluice_log_t lg;
	make(&lg, 4, 1000);
	sluice_decision_t a, r;
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 500, &a), 1);
	cr_assert_eq(sluice_log_refund(&lg, 1, &a), SLUICE_ECANCEL,
	             "the first admission, still in the window");
	cr_assert_eq(sluice_log_acquire_at(&lg, 2, 5000, &a), 1);
	cr_assert_eq(sluice_log_acquire_at(&lg, 5, 5000, &r), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_log_refund(&lg, 0, &a), SLUICE_EINVAL);
	cr_assert_eq(sluice_log_refund(&lg, 5, &a), SLUICE_EINVAL, "more than L");
	cr_assert_eq(sluice_log_refund(&lg, 1, &r), SLUICE_EINVAL, "not an admission");
	cr_assert_eq(sluice_log_refund(&lg, 1, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_log_refund(NULL, 1, &a), SLUICE_EINVAL);
	cr_assert_eq(sluice_log_refund(&lg, 2, &a), SLUICE_ECANCEL, "in the window");
	cr_assert_eq(counted_at(&lg, 5000), 2, "nothing given back");
	cr_assert_eq(sluice_log_acquire_at(&lg, 2, 5000, NULL), 1);
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 5000, NULL), 0);
	sluice_log_destroy(&lg);
}

/*
 * The newest admission's slots are written by the next admission (its
 * help), never by a refusal; until then its time is in the pair (head,
 * last).  White box: the slots, head and bstart after each step.
 */
Test(log, newest_batch_is_written_by_the_next_admission)
{
	sluice_log_t lg;
	make(&lg, 4, 1000);
	sluice_decision_t d;
	cr_assert_eq(sluice_log_acquire_at(&lg, 2, 100, &d), 1);
	cr_assert_eq(atomic_load(&lg.head), 2 * 2 + 1, "2 permits, a batch of n > 1");
	cr_assert_eq(atomic_load(&lg.bstart), 0);
	cr_assert_eq(atomic_load(&lg.last), 100);
	cr_assert_eq(atomic_load(&lg.times[0]), 0, "not written yet");
	cr_assert_eq(atomic_load(&lg.times[1]), 0);
	/* 2 more fit at 100; 3 do not: the deciding entry is permit 1, read
	 * from the pair */
	cr_assert_eq(sluice_log_acquire_at(&lg, 3, 100, &d), 0);
	cr_assert_eq(d.retry_after_ns, 1000, "permit 1 (at 100) leaves at 1100");
	cr_assert_eq(atomic_load(&lg.times[0]), 0, "a refusal writes nothing");
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 300, &d), 1);
	cr_assert_eq(atomic_load(&lg.times[0]), 100, "helped by the next admission");
	cr_assert_eq(atomic_load(&lg.times[1]), 100);
	cr_assert_eq(atomic_load(&lg.times[2]), 0, "its own left to the next one");
	cr_assert_eq(atomic_load(&lg.head), 3 * 2, "n = 1: no batch bit");
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 400, &d), 1);
	cr_assert_eq(atomic_load(&lg.times[2]), 300);
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 500, &d), 0, "4 in (-500, 500]");
	cr_assert_eq(d.retry_after_ns, 600, "permit 0 leaves at 1100");
	cr_assert_eq(d.reset_ns, 900, "permit 3 (at 400) leaves at 1400");
	/* the spare slot: permit 4 goes to slot 4, permit 5 to slot 0 */
	cr_assert_eq(sluice_log_acquire_at(&lg, 2, 1100, &d), 1);
	cr_assert_eq(atomic_load(&lg.times[3]), 400);
	cr_assert_eq(atomic_load(&lg.bstart), 4);
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 1300, &d), 1);
	cr_assert_eq(atomic_load(&lg.times[4]), 1100);
	cr_assert_eq(atomic_load(&lg.times[0]), 1100, "permit 5, slot 0 reused");
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 1399, &d), 0, "permits 3-6 in the window");
	cr_assert_eq(d.retry_after_ns, 1, "permit 3 leaves at 1400");
	sluice_log_destroy(&lg);
}

/* L = 1: the ring is one live slot and the spare. */
Test(log, limit_one)
{
	sluice_log_t lg;
	make(&lg, 1, 10);
	sluice_decision_t d;
	for (uint64_t t = 100; t < 200; t++) {
		int rc = sluice_log_acquire_at(&lg, 1, t, &d);
		cr_assert_eq(rc, (t - 100) % 10 == 0, "t=%llu", (unsigned long long)t);
		if (!rc)
			cr_assert_eq(d.retry_after_ns, 10 - (t - 100) % 10);
	}
	sluice_log_destroy(&lg);
}

/* ---- configuration ------------------------------------------------------ */

struct bad_cfg {
	uint64_t limit, window_ns;
	int clock; /* 0 manual, 1 coarse, 2 bogus kind */
	int want;
};

ParameterizedTestParameters(log, invalid_config)
{
	static struct bad_cfg params[] = {
		{ 0, SEC, 0, SLUICE_ELIMIT },
		{ SLUICE_LOG_LIMIT_MAX + 1, SEC, 0, SLUICE_EMEMORY },
		{ UINT64_MAX, SEC, 0, SLUICE_EMEMORY },
		{ 10, 0, 0, SLUICE_EWINDOW },
		{ 10, 1 * MS, 1, SLUICE_ERESOLUTION }, /* 1 ms < the coarse tick */
		{ 10, SEC, 2, SLUICE_ECLOCK },
		{ 1, 1, 0, 0 },                          /* smallest valid */
		{ 10, UINT64_MAX, 0, 0 },                /* any W */
		{ SLUICE_LOG_LIMIT_MAX, SEC, 0, 0 },     /* the cap itself: 128 MiB */
	};
	return cr_make_param_array(struct bad_cfg, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct bad_cfg *p, log, invalid_config)
{
	if (p->clock == 1 && sluice_clock_resolution_ns(&sluice_clock_coarse) <= 1 * MS)
		cr_skip_test("coarse clock is fine-grained here");
	sluice_clock_t m, bogus;
	sluice_clock_manual_init(&m, 0);
	sluice_clock_manual_init(&bogus, 0);
	bogus.kind = (sluice_clock_kind_t)7;
	sluice_log_config_t cfg = { .limit = p->limit, .window_ns = p->window_ns,
		                    .clock = p->clock == 0 ? &m :
		                             p->clock == 1 ? &sluice_clock_coarse : &bogus };
	sluice_log_t lg, before;
	memset(&lg, 0xab, sizeof(lg));
	memcpy(&before, &lg, sizeof(lg));
	int rc = sluice_log_init(&lg, &cfg);
	cr_assert_eq(rc, p->want, "L=%llu W=%llu: got %s (%s), want %s",
	             (unsigned long long)p->limit, (unsigned long long)p->window_ns,
	             sluice_err_name(rc), sluice_strerror(rc), sluice_err_name(p->want));
	if (rc == 0) {
		cr_assert_eq(lg.slots, p->limit + 1);
		cr_assert_eq(sluice_log_acquire_at(&lg, p->limit > 64 ? 1 : p->limit, 7, NULL), 1);
		sluice_log_destroy(&lg);
		cr_assert_null(lg.times);
	} else {
		/* untouched; and nothing allocated (the ASan build's leak
		 * check would report it) */
		cr_assert_eq(memcmp(&lg, &before, sizeof(lg)), 0, "a failed init must not touch it");
	}
}

Test(log, memory_cap_is_documented)
{
	cr_assert_eq(SLUICE_LOG_LIMIT_MAX, 1ULL << 24);
	/* the ring of the largest log: 8 * (L + 1) bytes, 128 MiB + 8 */
	cr_assert_eq((SLUICE_LOG_LIMIT_MAX + 1) * 8, 128ULL * 1024 * 1024 + 8);
	cr_assert_eq(SLUICE_EMEMORY, -15);
}

Test(log, null_arguments)
{
	sluice_log_t lg;
	sluice_log_config_t cfg = { .limit = 1, .window_ns = SEC };
	cr_assert_eq(sluice_log_init(NULL, &cfg), SLUICE_EINVAL);
	cr_assert_eq(sluice_log_init(&lg, NULL), SLUICE_EINVAL);
	sluice_log_destroy(NULL);
	cr_assert_eq(sluice_log_size(), sizeof(sluice_log_t));
	/* NULL clock: the cached clock (1 ms resolution at most) */
	cr_assert_eq(sluice_log_init(&lg, &cfg), 0);
	cr_assert_eq(lg.clock, &sluice_clock_cached);
	cr_assert_eq(sluice_log_acquire(&lg, 1, NULL), 1);
	sluice_log_destroy(&lg);
}

/* ---- set_limit -------------------------------------------------------- */

Test(log, set_limit_keeps_every_time)
{
	sluice_log_t lg;
	sluice_clock_manual_init(&mclock, 0);
	sluice_log_config_t cfg = { .limit = 10, .window_ns = 1000, .clock = &mclock,
		                    .capacity = 20 };
	cr_assert_eq(sluice_log_init(&lg, &cfg), 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_log_acquire_at(&lg, 4, 100, NULL), 1);
	cr_assert_eq(sluice_log_acquire_at(&lg, 6, 500, NULL), 1);
	/* lower below what the window counts: refusals until enough leaves.
	 * The change is stamped at the log's time + 1 ns (501): the newest
	 * admission's 6 permits move there with it (log.h, READINGS ACROSS
	 * A CHANGE) */
	cr_assert_eq(sluice_log_set_limit(&lg, 5), 0);
	cr_assert_eq(sluice_log_available_at(&lg, 600), 0);
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 400, &d), 0, "an older reading");
	cr_assert_eq(d.now_ns, 501, "judged at the change's stamp");
	cr_assert_eq(d.limit, 5);
	cr_assert_eq(d.retry_after_ns, 1000, "the 5th newest (t = 501) leaves at 1501");
	cr_assert_eq(sluice_log_acquire_at(&lg, 6, 600, NULL), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_log_available_at(&lg, 1100), 0, "the 4 at 100 left: 6 > 5 remain");
	cr_assert_eq(sluice_log_available_at(&lg, 1500), 0, "1 ns later than before the change");
	cr_assert_eq(sluice_log_available_at(&lg, 1501), 5);
	/* raise above the init limit, up to the capacity: the difference */
	cr_assert_eq(sluice_log_acquire_at(&lg, 5, 1501, NULL), 1);
	cr_assert_eq(sluice_log_set_limit(&lg, 20), 0); /* stamped 1502 */
	cr_assert_eq(sluice_log_available_at(&lg, 1600), 15);
	cr_assert_eq(sluice_log_acquire_at(&lg, 16, 1600, NULL), 0);
	cr_assert_eq(sluice_log_acquire_at(&lg, 15, 1600, &d), 1);
	cr_assert_eq(d.limit, 20);
	cr_assert_eq(sluice_log_acquire_at(&lg, 1, 1700, NULL), 0, "nothing minted");
	cr_assert_eq(sluice_log_available_at(&lg, 2501), 0, "the 5 moved to 1502 with the change");
	cr_assert_eq(sluice_log_available_at(&lg, 2502), 5, "the 5 at 1502 left");
	cr_assert_eq(sluice_log_available_at(&lg, 2600), 20);
	/* the same limit again changes nothing, not even the time */
	cr_assert_eq(sluice_log_set_limit(&lg, 20), 0);
	cr_assert_eq(sluice_log_available_at(&lg, 2600), 20);
	/* invalid: the init's code, nothing changes */
	cr_assert_eq(sluice_log_set_limit(&lg, 0), SLUICE_ELIMIT);
	cr_assert_eq(sluice_log_set_limit(&lg, 21), SLUICE_ELIMIT, "above the capacity");
	cr_assert_eq(sluice_log_set_limit(NULL, 3), SLUICE_EINVAL);
	cr_assert_eq(sluice_log_available_at(&lg, 2600), 20);
	sluice_log_destroy(&lg);
	/* capacity at init */
	sluice_log_config_t bad = { .limit = 10, .window_ns = 1000, .clock = &mclock,
		                    .capacity = 9 };
	cr_assert_eq(sluice_log_init(&lg, &bad), SLUICE_ELIMIT, "capacity below the limit");
	bad.capacity = SLUICE_LOG_LIMIT_MAX + 1;
	cr_assert_eq(sluice_log_init(&lg, &bad), SLUICE_EMEMORY);
	bad.capacity = 0; /* default: the limit */
	cr_assert_eq(sluice_log_init(&lg, &bad), 0);
	cr_assert_eq(sluice_log_set_limit(&lg, 11), SLUICE_ELIMIT);
	cr_assert_eq(sluice_log_set_limit(&lg, 3), 0);
	sluice_log_destroy(&lg);
}

Test(log, available_near_2_64_and_after_jumps)
{
	sluice_log_t lg;
	make(&lg, 5, 1000);
	uint64_t t = UINT64_MAX - 1500;
	cr_assert_eq(sluice_log_acquire_at(&lg, 3, t, NULL), 1);
	cr_assert_eq(sluice_log_available_at(&lg, t + 10), 2);
	cr_assert_eq(sluice_log_available_at(&lg, 7), 2, "a step back reads the newest time");
	cr_assert_eq(sluice_log_available_at(&lg, t + 1000), 5);
	cr_assert_eq(sluice_log_acquire_at(&lg, 5, UINT64_MAX, NULL), 1);
	cr_assert_eq(sluice_log_available_at(&lg, UINT64_MAX), 0);
	sluice_log_destroy(&lg);
}

/*
 * Memory rewritten from outside (a log shared with another process):
 * whatever head, last and bstart hold, every call returns without a
 * fault or a spin (log.h, FORK AND SHARED MEMORY); the answers may be
 * wrong.  ASan checks that every slot touched is in the ring.
 */
Test(log, rewritten_state_never_faults_or_spins)
{
	static const uint64_t heads[] = { 1, 3, UINT64_MAX, UINT64_MAX - 1, 1ULL << 63,
		                          (1ULL << 40) | 1 };
	static const uint64_t lasts[] = { 0, 1, UINT64_MAX };
	static const uint64_t bstarts[] = { 0, 5, UINT64_MAX };
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++)
		for (size_t j = 0; j < sizeof(lasts) / sizeof(lasts[0]); j++)
			for (size_t k = 0; k < sizeof(bstarts) / sizeof(bstarts[0]); k++) {
				sluice_log_t lg;
				make(&lg, 8, 1000);
				atomic_store(&lg.head, heads[i]);
				atomic_store(&lg.last, lasts[j]);
				atomic_store(&lg.bstart, bstarts[k]);
				sluice_decision_t d;
				for (uint64_t n = 1; n <= 8; n++) {
					int rc = sluice_log_acquire_at(&lg, n, 5000, &d);
					cr_assert(rc == 0 || rc == 1, "rc %d", rc);
					if (rc == 1)
						cr_assert(sluice_log_refund(&lg, n, &d) == 0 ||
						          sluice_log_refund(&lg, n, &d) == SLUICE_ECANCEL);
				}
				cr_assert_leq(sluice_log_available_at(&lg, 7000), 8);
				sluice_log_destroy(&lg);
			}
}
