/* SPDX-License-Identifier: MIT */
/*
 * test_keyed_change.c - keyed tables across live changes whose reading is
 * older than readings already decided (issue 22, finding 2): the plain
 * setters read the clock on entry and publish microseconds later while
 * deciders go on, so a change's stamp can lag the key's newest reading.
 * Every test is deterministic (explicit _at readings, one thread) and
 * checks keyed.h's LIVE PARAMETERS statement exactly:
 *   GCRA, LEAKY: admissions at (effective) times in any [a, c] total at
 *     most b(a) + the time of each parameter set in [a, c] over its T, the
 *     change taking effect for a key at the newest reading that key had
 *     decided before it (never earlier), a decision with an older reading
 *     counting as at that reading; hence also max(b) + (c - a)/min(T);
 *   FIXED, WINDOW: every window holds at most the larger of what was
 *     admitted in it before the change was published and the limit the
 *     change gives it;
 * and the FIXED refund of a decision whose window is over
 * (SLUICE_EEXPIRED).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"
#include "test_keyed_common.h"

TestSuite(keyed_change, .timeout = 60);

#define US 1000ULL

/* ---- an exact verifier over recorded admissions ----------------------------- */

struct ev {
	uint64_t t; /* effective time: the reading, or the change's for an older one */
	uint64_t n;
};
struct rec {
	struct ev e[4096];
	size_t m;
};

static void rec_add(struct rec *r, uint64_t t, uint64_t n)
{
	cr_assert_lt(r->m, sizeof(r->e) / sizeof(r->e[0]));
	r->e[r->m++] = (struct ev){ t, n };
}

static int ev_cmp(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;
	return x->t < y->t ? -1 : x->t > y->t;
}

/* The parameters before (b0, T0) and after (b1, T1) one change that takes
 * effect at S. */
struct sets {
	double b0, T0, b1, T1;
	uint64_t S;
};

/* keyed.h's bound for [a, c]: b(a) (the larger at S) + time / T per set. */
static double tight(const struct sets *p, uint64_t a, uint64_t c)
{
	double ba = a < p->S ? p->b0 : a > p->S ? p->b1 : (p->b0 > p->b1 ? p->b0 : p->b1);
	uint64_t a0 = a < p->S ? a : p->S, c0 = c < p->S ? c : p->S;
	uint64_t a1 = a > p->S ? a : p->S, c1 = c > p->S ? c : p->S;
	return ba + (double)(c0 - a0) / p->T0 + (double)(c1 - a1) / p->T1;
}

static double loose(const struct sets *p, uint64_t a, uint64_t c)
{
	double b = p->b0 > p->b1 ? p->b0 : p->b1, T = p->T0 < p->T1 ? p->T0 : p->T1;
	return b + (double)(c - a) / T;
}

/* Every interval between two recorded times: the admissions in it against
 * both bounds.  Returns the largest excess over the tight bound (<= 0:
 * held) and fails on the first excess over either. */
static double verify(struct rec *r, const struct sets *p, const char *what)
{
	qsort(r->e, r->m, sizeof(r->e[0]), ev_cmp);
	double worst = -1e300;
	for (size_t i = 0; i < r->m; i++) {
		if (i > 0 && r->e[i - 1].t == r->e[i].t)
			continue; /* intervals start at the first event of a time */
		uint64_t sum = 0;
		for (size_t j = i; j < r->m; j++) {
			sum += r->e[j].n;
			if (j + 1 < r->m && r->e[j + 1].t == r->e[j].t)
				continue; /* close at the last event of a time */
			double tb = tight(p, r->e[i].t, r->e[j].t);
			double lb = loose(p, r->e[i].t, r->e[j].t);
			if ((double)sum - tb > worst)
				worst = (double)sum - tb;
			cr_assert_leq((double)sum, lb + 1e-6,
			              "%s: %llu admitted in [%llu, %llu] ns, loose bound %.3f", what,
			              (unsigned long long)sum, (unsigned long long)r->e[i].t,
			              (unsigned long long)r->e[j].t, lb);
			cr_assert_leq((double)sum, tb + 1e-6,
			              "%s: %llu admitted in [%llu, %llu] ns, keyed.h's bound %.3f "
			              "(over by %.3f)",
			              what, (unsigned long long)sum, (unsigned long long)r->e[i].t,
			              (unsigned long long)r->e[j].t, tb, (double)sum - tb);
		}
	}
	return worst;
}

/* Permits of 1 taken for @key at @now before the first refusal. */
static int take_n(sluice_keyed_t *k, const char *key, uint64_t now)
{
	int got = 0;
	while (got < 100000 && acq(k, key, 1, now, NULL) == 1)
		got++;
	return got;
}

/* A GCRA table at 1/us with burst @b, and its key "k" emptied at @at. */
static void emptied(sluice_keyed_t *k, uint64_t b, uint64_t at)
{
	make(k, gcra_cfg(64, 1000000, SEC, b, SLUICE_KEYED_REJECT));
	cr_assert_eq(take_n(k, "k", at), (int)b);
}

/* @key's next permit comes exactly at @t: refused at t - 1, given at t. */
static void next_permit_at(sluice_keyed_t *k, const char *key, uint64_t t)
{
	cr_assert_eq(acq(k, key, 1, t - 1, NULL), 0, "a permit before %llu", (unsigned long long)t);
	cr_assert_eq(acq(k, key, 1, t, NULL), 1, "no permit at %llu", (unsigned long long)t);
}

/* Take permits of 1 at @now until the first refusal, recording each at
 * @eff. */
static void take_rec(sluice_keyed_t *k, const char *key, uint64_t now, uint64_t eff,
                     struct rec *r)
{
	for (int i = 0; i < 10000; i++) {
		int rc = acq(k, key, 1, now, NULL);
		cr_assert(rc == 0 || rc == 1, "acquire: %s", sluice_err_name(rc));
		if (rc == 0)
			return;
		rec_add(r, eff, 1);
	}
	cr_assert_fail("no refusal in 10000 takes");
}

/* ---- GCRA, LEAKY: a change stamped behind readings already decided -------- */

enum change { RATE_DOWN, RATE_UP, BURST_UP, BURST_DOWN };
static const char *change_name[] = { "rate lowered", "rate raised", "burst raised",
	                             "burst lowered" };

/*
 * A key kept at its limit (greedy takes every 7 us from 1 ms to X = 2 ms,
 * b = 100 at 1/us: it owes about tau at X), then the change, stamped
 * X - @lag, then takes at readings behind X (between the stamp and X, and
 * before the stamp), then every 7 us to X + 500 us.  The change takes
 * effect for the key at X, its newest reading; the verifier checks every
 * interval.
 */
static double run_lag(sluice_algo_t algo, enum change what, uint64_t lag)
{
	sluice_keyed_t k;
	make(&k, bucket_cfg(algo, 64, 1000000, SEC, 100, SLUICE_KEYED_REJECT));
	static struct rec r;
	r.m = 0;
	const uint64_t X = 2 * MS;
	struct sets p = { 100, 1000, 100, 1000, X };
	for (uint64_t t = 1 * MS; t <= X; t += 7 * US)
		take_rec(&k, "k", t, t, &r);
	int rc;
	uint64_t tc = X - lag;
	switch (what) {
	case RATE_DOWN:
		rc = sluice_keyed_set_rate_at(&k, 500000, SEC, tc);
		p.T1 = 2000;
		break;
	case RATE_UP:
		rc = sluice_keyed_set_rate_at(&k, 2000000, SEC, tc);
		p.T1 = 500;
		break;
	case BURST_UP:
		rc = sluice_keyed_set_burst_at(&k, algo == SLUICE_ALGO_LEAKY ? 199 : 200, tc);
		p.b1 = 200;
		break;
	default:
		rc = sluice_keyed_set_burst_at(&k, algo == SLUICE_ALGO_LEAKY ? 49 : 50, tc);
		p.b1 = 50;
		break;
	}
	cr_assert_eq(rc, 0, "set: %s", sluice_err_name(rc));
	/* readings older than the key's newest: between the stamp and X,
	 * then before the stamp; they count as at X */
	take_rec(&k, "k", X - lag / 2, X, &r);
	take_rec(&k, "k", tc > 1000 ? tc - 1000 : 0, X, &r);
	for (uint64_t t = X; t <= X + 500 * US; t += 7 * US)
		take_rec(&k, "k", t, t, &r);
	char what_s[96];
	snprintf(what_s, sizeof(what_s), "%s, %s, lag %llu ns",
	         algo == SLUICE_ALGO_LEAKY ? "LEAKY" : "GCRA", change_name[what],
	         (unsigned long long)lag);
	double worst = verify(&r, &p, what_s);
	sluice_keyed_destroy(&k);
	return worst;
}

static const uint64_t lags[] = { 2 * US, 30 * US, 500 * US, 1 * MS };

/* Every lag of lags[] for one algorithm and change. */
static void run_lags(sluice_algo_t algo, enum change what)
{
	for (size_t i = 0; i < sizeof(lags) / sizeof(lags[0]); i++)
		run_lag(algo, what, lags[i]);
}

Test(keyed_change, gcra_rate_lowering_behind_decided_readings_keeps_the_debt)
{
	run_lags(SLUICE_ALGO_GCRA, RATE_DOWN);
}

Test(keyed_change, gcra_rate_raise_behind_decided_readings_keeps_the_debt)
{
	run_lags(SLUICE_ALGO_GCRA, RATE_UP);
}

Test(keyed_change, gcra_burst_raise_behind_decided_readings_mints_nothing)
{
	run_lags(SLUICE_ALGO_GCRA, BURST_UP);
}

Test(keyed_change, gcra_burst_lowering_behind_decided_readings_keeps_the_debt)
{
	run_lags(SLUICE_ALGO_GCRA, BURST_DOWN);
}

Test(keyed_change, leaky_changes_behind_decided_readings_keep_the_debt)
{
	for (int w = RATE_DOWN; w <= BURST_DOWN; w++)
		run_lags(SLUICE_ALGO_LEAKY, (enum change)w);
}

/* The debt in numbers: a key emptied at X (owes tau = 100 us) and a rate
 * lowering to 1/2us stamped 30 us behind X.  At X it holds nothing; the
 * debt past the stamp's horizon (30 us of old permits) is owed in new
 * units (60 us), so its next permit comes when the bucket's new tau has
 * room for it: at X + 2 us after it holds 0 at X, not the 15 permits the
 * clamped conversion handed out. */
Test(keyed_change, gcra_debt_past_the_stamps_horizon_is_kept_in_new_units)
{
	sluice_keyed_t k;
	const uint64_t X = 2 * MS;
	emptied(&k, 100, X);
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 500000, SEC, X - 30 * US), 0);
	sluice_decision_t d;
	cr_assert_eq(acq(&k, "k", 1, X, &d), 0, "the debt of the key was forgotten");
	/* old: 100 permits owed at X at 1/us; new: the same 100 permits,
	 * refilled at 1/2us: the first at X + 2 us */
	next_permit_at(&k, "k", X + 2 * US);
	sluice_keyed_destroy(&k);
}

/* A burst raise on a key that holds debt, stamped behind its newest
 * reading: at that reading the key holds what it held before (nothing),
 * and the raise gives room only as the new rate refills it. */
Test(keyed_change, gcra_burst_raise_on_a_key_in_debt_credits_nothing_at_once)
{
	sluice_keyed_t k;
	const uint64_t X = 2 * MS;
	emptied(&k, 50, X);
	cr_assert_eq(sluice_keyed_set_burst_at(&k, 100, X - 60 * US), 0);
	int got = take_n(&k, "k", X);
	cr_assert_eq(got, 0, "a burst raise minted %d permits", got);
	got = take_n(&k, "k", X + 30 * US);
	cr_assert_eq(got, 30, "30 us at 1/us refill 30, got %d", got);
	sluice_keyed_destroy(&k);
}

/* A change at tc, then a decision at r < tc: judged as at tc (the key
 * cannot be refilled by going back in time, nor credited at the new rate
 * for time before the change). */
Test(keyed_change, a_decision_older_than_the_change_counts_at_the_change)
{
	sluice_keyed_t k;
	const uint64_t tc = 2 * MS;
	emptied(&k, 100, tc - 50 * US);
	/* at tc the key holds 50; lowering the rate keeps those 50 */
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 500000, SEC, tc), 0);
	int got = take_n(&k, "k", tc - 40 * US);
	cr_assert_eq(got, 50, "at tc - 40 us, judged at tc: 50, got %d", got);
	sluice_decision_t d;
	cr_assert_eq(acq(&k, "k", 1, tc - 40 * US, &d), 0);
	cr_assert_eq(d.now_ns, tc);
	next_permit_at(&k, "k", tc + 2 * US);
	sluice_keyed_destroy(&k);
}

/* A reading far ahead of the others (another timeline, a clock jump) is
 * not the table's time: it does not raise a change's stamp (other keys
 * would be judged at it, each bucket full at once), and it does not hold
 * the next change back until the clock reaches it. */
Test(keyed_change, a_forward_jump_moves_no_stamp_and_blocks_no_change)
{
	sluice_keyed_t k;
	make(&k, gcra_cfg(64, 1000, SEC, 10, SLUICE_KEYED_REJECT));
	const uint64_t X = 10 * SEC;
	cr_assert_eq(take_n(&k, "a", X), 10);
	cr_assert_eq(acq(&k, "jump", 1, X + 3600 * SEC, NULL), 1);
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 500, SEC, X), 0);
	cr_assert_eq(take_n(&k, "a", X), 0, "judged at the jumped reading");
	cr_assert_eq(take_n(&k, "a", X + 2 * MS - 1), 0);
	cr_assert_eq(take_n(&k, "a", X + 2 * MS), 1, "at 1/2ms from X");
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 1000, SEC, X + 3 * SEC), 0,
	             "the next change waits for the real readings only");
	sluice_keyed_destroy(&k);
}

/* ---- FIXED, WINDOW: a window that began between the stamp and the
 * publication ----------------------------------------------------------- */

static sluice_keyed_config_t win_cfg(sluice_algo_t algo, uint64_t limit)
{
	return (sluice_keyed_config_t){ .algo = algo, .policy = SLUICE_KEYED_REJECT,
		                        .capacity = 64, .limit = limit, .window_ns = MS,
		                        .buckets = algo == SLUICE_ALGO_WINDOW ? 4 : 0 };
}

/* L lowered 10 -> 4 stamped in window 0 while window 1 already holds 10:
 * window 1 keeps its 10 and takes nothing more (the larger of the 10 it
 * held at the publication and the new 4); window 2 has 4.  A raise 4 ->
 * 10 stamped in window 0 while window 1 holds 4: window 1 gets the new
 * 10, no more. */
static void run_win_lag(sluice_algo_t algo)
{
	sluice_keyed_t k;
	make(&k, win_cfg(algo, 16));
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 10, 0), 0);
	/* WINDOW: ranges of 4 buckets of 250 us; the key's admissions all
	 * at 4 ms, so every range is measured at its own time */
	uint64_t w1 = 4 * MS;
	cr_assert_eq(take_n(&k, "a", w1), 10);
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 4, w1 - MS), 0);
	cr_assert_eq(take_n(&k, "a", w1), 0, "window began before the publication");
	cr_assert_eq(take_n(&k, "a", w1 + MS / 2), 0);
	cr_assert_eq(take_n(&k, "a", w1 + 2 * MS), 4, "a later window: the new L");
	/* raise, lagging: a window with 4 gets up to 10 */
	cr_assert_eq(take_n(&k, "b", w1 + 4 * MS), 4);
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 10, w1 + 3 * MS), 0);
	cr_assert_eq(take_n(&k, "b", w1 + 4 * MS), 6);
	sluice_keyed_destroy(&k);
}

Test(keyed_change, fixed_window_begun_before_the_publication_holds_the_larger)
{
	run_win_lag(SLUICE_ALGO_FIXED);
}

Test(keyed_change, window_range_begun_before_the_publication_holds_the_larger)
{
	run_win_lag(SLUICE_ALGO_WINDOW);
}

/* ---- FIXED refunds: a decision whose window is over --------------------- */

Test(keyed_change, fixed_refund_of_an_expired_window_is_eexpired)
{
	sluice_keyed_t k;
	make(&k, win_cfg(SLUICE_ALGO_FIXED, 4));
	sluice_decision_t a, b, c;
	cr_assert_eq(acq(&k, "k", 1, MS - 1, &a), 1);
	cr_assert_eq(acq(&k, "k", 1, MS - 1, &b), 1);
	/* the same window: given back exactly */
	cr_assert_eq(sluice_keyed_refund(&k, "k", 1, 1, &b), 0);
	/* the key's window moves on at MS: the first decision's window is over */
	cr_assert_eq(acq(&k, "k", 1, MS, &c), 1);
	cr_assert_eq(sluice_keyed_refund(&k, "k", 1, 1, &a), SLUICE_EEXPIRED);
	cr_assert_eq(sluice_keyed_refund(&k, "k", 1, 1, &c), 0, "the newest window gives back");
	sluice_keyed_destroy(&k);
}
