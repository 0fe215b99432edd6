/* SPDX-License-Identifier: MIT */
/*
 * test_change_gcra.c - readings across a live change (issue 22): GCRA, the
 * leaky meter and shaper, warm-up.  Manual clock and explicit readings
 * first, then the stall hooks (tests/support/test_stall.h) to hold a decision, or
 * a setter, between its clock reading and its CAS while the other side
 * moves on.
 *
 * What is checked is gcra.h's READINGS ACROSS A CHANGE: a decision whose
 * reading r is older than the stamp s of the change it sees is judged at s
 * (an acquire is refused, retry_after_ns = s - r + the wait at s; a
 * booking's delay reaches past s), a setter whose reading lags decisions
 * already made credits nothing, and over every closed interval of
 * admission times the permits total at most max(b) + t / min(T) over the
 * sets in force: stress_worst_conform() (tests/support/verify.c, the
 * stress verifiers' exact closed-interval form) over every admission.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>

#include "sluice/error.h"
#include "sluice/gcra.h"
#include "sluice/leaky.h"
#include "sluice/warmup.h"

#include "verify.h"
#include "test_stall.h"

#define US 1000ULL
#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(change_gcra, .timeout = 60);

static sluice_clock_t mclock;

/* ---- the record of every admission and the exact verifier ------------- */

#define RECS 8192
static struct stress_rec recs[RECS];
static size_t nrecs;

static void record(uint64_t t, uint64_t n)
{
	cr_assert_lt(nrecs, RECS, "record buffer full");
	recs[nrecs++] = (struct stress_rec){ t, (uint32_t)n, 0 };
}

/* Every closed interval [x, x + t] of admission times holds at most
 * bmax + t / tmin permits: max (permits - floor(t / tmin)) <= bmax. */
static void check_bound(uint64_t bmax, uint64_t tmin, const char *what)
{
	qsort(recs, nrecs, sizeof(recs[0]), stress_rec_cmp);
	uint64_t worst = stress_worst_conform(recs, nrecs, tmin, 1);
	cr_assert_leq(worst, bmax,
	              "%s: an interval holds %llu permits over its floor(t / %llu ns), bound %llu",
	              what, (unsigned long long)worst, (unsigned long long)tmin,
	              (unsigned long long)bmax);
}

/* ---- GCRA --------------------------------------------------------------- */

static void make(sluice_gcra_t *g, uint64_t T, uint64_t burst)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_gcra_config_t cfg = { .rate = SEC / T, .period_ns = SEC, .burst = burst,
		                     .clock = &mclock };
	int rc = sluice_gcra_init(g, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
	nrecs = 0;
}

/* Take everything that passes at reading @r, n = 1 at a time (at most
 * @most); record each admission at its now_ns.  Return how many passed. */
static uint64_t greedy(sluice_gcra_t *g, uint64_t r, uint64_t most)
{
	uint64_t k = 0;
	sluice_decision_t d;
	while (k < most && sluice_gcra_acquire_at(g, 1, r, &d) == 1) {
		cr_assert_eq(d.now_ns, r);
		record(d.now_ns, 1);
		k++;
	}
	return k;
}

/* One change at reading @tc of kind @kind between (T0, b0) and (T1, b1). */
enum kind { RATE_LOWER, RATE_RAISE, BURST_RAISE, BURST_LOWER };

/* A case: the change, and the ns its reading is ahead of an older decision
 * (older_reading) or behind decisions already made (lagging_setter). */
struct change_case {
	enum kind kind;
	uint64_t ns;
};

static void change_at(sluice_gcra_t *g, enum kind kind, uint64_t tc)
{
	int rc = 0;
	switch (kind) {
	case RATE_LOWER: rc = sluice_gcra_set_rate_at(g, SEC / (10 * US), SEC, tc); break;
	case RATE_RAISE: rc = sluice_gcra_set_rate_at(g, SEC / (5 * US), SEC, tc); break;
	case BURST_RAISE: rc = sluice_gcra_set_burst_at(g, 150, tc); break;
	case BURST_LOWER: rc = sluice_gcra_set_burst_at(g, 50, tc); break;
	}
	cr_assert_eq(rc, 0, "change: %s", sluice_strerror(rc));
}

static void params_of(enum kind kind, uint64_t *T0, uint64_t *bmax, uint64_t *tmin)
{
	*T0 = kind == RATE_RAISE ? 10 * US : 5 * US;
	*tmin = 5 * US;
	*bmax = kind == BURST_RAISE ? 150 : 100;
}

static struct change_case change_cases[] = {
	{ RATE_LOWER, 2 * US },   { RATE_LOWER, 26 * US },  { RATE_LOWER, 200 * US },
	{ RATE_LOWER, 500 * US }, { RATE_RAISE, 26 * US },  { RATE_RAISE, 200 * US },
	{ BURST_RAISE, 26 * US }, { BURST_RAISE, 200 * US }, { BURST_LOWER, 26 * US },
	{ BURST_LOWER, 200 * US },
};

ParameterizedTestParameters(change_gcra, older_reading)
{
	return cr_make_param_array(struct change_case, change_cases,
	                           sizeof(change_cases) / sizeof(change_cases[0]));
}

/*
 * The explicit form: b = 100, the bucket drained at 0 and then
 * taken at the rate (every T0) up to r; a change at tc = r + gap; then a
 * decision at r, which arrives after the change.  Old code: a rate
 * lowering credits it gap * (1/T0 - 1/T1) permits (gap / 10 with 5 -> 10
 * us), beyond the bound over [0, r].  The rule: it is judged at tc, an
 * acquire at r < tc cannot pass, and retry_after_ns reaches tc.
 */
ParameterizedTest(struct change_case *c, change_gcra, older_reading)
{
	uint64_t T0, bmax, tmin;
	params_of(c->kind, &T0, &bmax, &tmin);
	sluice_gcra_t g;
	make(&g, T0, 100);
	uint64_t r = 1000 * US, tc = r + c->ns;
	cr_assert_eq(greedy(&g, 0, 1000), 100);
	for (uint64_t t = T0; t <= r; t += T0)
		greedy(&g, t, 1000);
	change_at(&g, c->kind, tc);
	sluice_decision_t d;
	int rc = sluice_gcra_acquire_at(&g, 1, r, &d);
	if (rc == 1)
		record(d.now_ns, 1);
	greedy(&g, r, 1000); /* whatever else the old reading can get */
	check_bound(bmax, tmin, "up to the old reading");
	cr_assert_eq(rc, 0, "a reading %llu ns older than the change passed",
	             (unsigned long long)c->ns);
	cr_assert_geq(d.retry_after_ns, tc - r, "retry_after %llu does not reach the change",
	              (unsigned long long)d.retry_after_ns);
	cr_assert_eq(d.now_ns, r);
	/* Sleeping retry_after_ns from its own reading lands where it passes. */
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, r + d.retry_after_ns - 1, NULL), 0);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, r + d.retry_after_ns, &d), 1);
	record(d.now_ns, 1);
	/* and the rest of the run at the new rate */
	for (uint64_t t = r + d.retry_after_ns; t <= tc + 3 * MS; t += 1 * US)
		greedy(&g, t, 1000);
	check_bound(bmax, tmin, "older reading");
}

/* The same with the old decision as a reservation: its slot is not
 * before the change, and delay_ns is measured from its own reading. */
Test(change_gcra, older_reading_reserve)
{
	sluice_gcra_t g;
	make(&g, 5 * US, 100);
	uint64_t r = 1000 * US, tc = r + 200 * US;
	greedy(&g, 0, 1000);
	for (uint64_t t = 5 * US; t <= r; t += 5 * US)
		greedy(&g, t, 1000);
	change_at(&g, RATE_LOWER, tc);
	sluice_decision_t d;
	int rc = sluice_gcra_reserve_at(&g, 1, r, 10 * MS, &d);
	cr_assert_eq(rc, 1);
	cr_assert_eq(d.now_ns, r);
	cr_assert_geq(r + d.delay_ns, tc, "booked at %llu, before the change at %llu",
	              (unsigned long long)(r + d.delay_ns), (unsigned long long)tc);
	record(d.now_ns + d.delay_ns, 1);
	/* the booking is exact: it can be given back */
	cr_assert_eq(sluice_gcra_cancel(&g, 1, &d), 0);
	nrecs--;
	for (uint64_t t = tc; t <= tc + 2 * MS; t += 1 * US)
		greedy(&g, t, 1000);
	check_bound(100, 5 * US, "older reservation");
}

static struct change_case lag_cases[] = {
	{ RATE_LOWER, 2 * US },   { RATE_LOWER, 30 * US },  { RATE_LOWER, 1 * MS },
	{ RATE_RAISE, 2 * US },   { RATE_RAISE, 1 * MS },   { BURST_RAISE, 2 * US },
	{ BURST_RAISE, 30 * US }, { BURST_RAISE, 1 * MS },  { BURST_LOWER, 30 * US },
	{ BURST_LOWER, 1 * MS },
};

ParameterizedTestParameters(change_gcra, lagging_setter)
{
	return cr_make_param_array(struct change_case, lag_cases,
	                           sizeof(lag_cases) / sizeof(lag_cases[0]));
}

/*
 * A setter whose reading tc lags decisions already made, at readings up
 * to x = tc + lag (the plain setters read the clock on entry and publish
 * later).  Nothing may be credited: at every reading from tc on, the
 * bucket holds no more after the change than before it, except what a
 * raised burst lets it refill towards once the old bucket is full; and
 * the bound holds over the whole run, with decisions at readings between
 * tc and x after the change, and one older than tc (refused).
 */
ParameterizedTest(struct change_case *c, change_gcra, lagging_setter)
{
	uint64_t T0, bmax, tmin;
	params_of(c->kind, &T0, &bmax, &tmin);
	for (int fill = 0; fill < 3; fill++) {
		sluice_gcra_t g;
		make(&g, T0, 100);
		uint64_t x = 3 * MS, tc = x - c->ns;
		/* three loads before the change: drained at the rate, half
		 * used, a burst just taken */
		greedy(&g, 0, 1000);
		for (uint64_t t = T0; t < x; t += T0)
			greedy(&g, t, fill == 0 ? 1000 : fill == 1 ? (t / T0) % 2 : 0);
		greedy(&g, x, fill == 2 ? 40 : 1000);
		uint64_t before[64], top = 2 * MS;
		for (int i = 0; i < 64; i++)
			before[i] = sluice_gcra_available_at(&g, tc + (uint64_t)i * top / 63);
		change_at(&g, c->kind, tc);
		for (int i = 0; i < 64; i++) {
			uint64_t y = tc + (uint64_t)i * top / 63;
			uint64_t after = sluice_gcra_available_at(&g, y);
			if (c->kind == BURST_RAISE && before[i] == 100)
				continue; /* full before: it may refill to the new burst */
			cr_assert_leq(after, before[i],
			              "fill %d: %llu ns after the setter's reading the bucket holds "
			              "%llu, %llu before the change",
			              fill, (unsigned long long)(y - tc), (unsigned long long)after,
			              (unsigned long long)before[i]);
		}
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, tc - 1, NULL), 0);
		for (uint64_t t = tc; t <= x + 3 * MS; t += 1 * US)
			greedy(&g, t, 1000);
		check_bound(bmax, tmin, "lagging setter");
	}
}

/*
 * The stall hooks: an acquire at reading r, which the old state admits
 * (the bucket drained at the rate up to r - T: one permit at r), loads the
 * TAT and the parameters and is stopped at its CAS; meanwhile the clock
 * moves on by gap and a plain set_rate (5 -> 10 us) reads it and
 * publishes.  The acquire's CAS then fails and it decides again on the
 * new parameters, with its old reading: old code gave it 1 + gap / 10.
 */
struct stall_change {
	sluice_gcra_t *g;
	uint64_t gap;
	int kind;
};

static void publish_change(void *arg)
{
	struct stall_change *s = arg;
	sluice_clock_manual_advance(&mclock, s->gap);
	int rc = s->kind == RATE_LOWER ? sluice_gcra_set_rate(s->g, SEC / (10 * US), SEC)
	                               : sluice_gcra_set_burst(s->g, 150);
	cr_assert_eq(rc, 0);
}

Test(change_gcra, stalled_decision)
{
	if (!stall_supported())
		cr_skip_test("stall hooks: x86-64 Linux, not under TSan");
	static const uint64_t gaps[] = { 26 * US, 200 * US, 500 * US };
	for (size_t k = 0; k < sizeof(gaps) / sizeof(gaps[0]); k++) {
		sluice_gcra_t *g = stall_page();
		cr_assert_not_null(g);
		make(g, 5 * US, 100);
		greedy(g, 0, 1000);
		uint64_t r = 1000 * US;
		for (uint64_t t = 5 * US; t < r; t += 5 * US)
			greedy(g, t, 1000);
		sluice_clock_manual_set(&mclock, r);
		/* one reading, held at the CAS while the change publishes, then
		 * every permit that reading gets */
		struct stall_change s = { g, gaps[k], RATE_LOWER };
		stall_arm(&g->tat, sizeof(g->tat), publish_change, &s);
		sluice_decision_t d;
		int rc = sluice_gcra_acquire_at(g, 1, r, &d);
		cr_assert_eq(stall_fired(), 1, "the stall did not land on the CAS");
		uint64_t got = rc == 1;
		if (rc == 1)
			record(r, 1);
		got += greedy(g, r, 1000);
		cr_assert_eq(got, 0, "gap %llu us: %llu permits at a reading older than the change",
		             (unsigned long long)(gaps[k] / US), (unsigned long long)got);
		for (uint64_t t = r + gaps[k]; t <= r + gaps[k] + 2 * MS; t += 1 * US)
			greedy(g, t, 1000);
		check_bound(100, 5 * US, "stalled decision");
		stall_page_free(g);
	}
}

/*
 * A plain setter stalled between its reading (on entry) and its seal CAS
 * while decisions at later readings take permits; then it publishes a
 * change stamped with its old reading.
 */
struct stall_decide {
	sluice_gcra_t *g;
	uint64_t lag;
};

static void decide_meanwhile(void *arg)
{
	struct stall_decide *s = arg;
	uint64_t r0 = sluice_clock_now(&mclock);
	for (uint64_t t = r0 + 1 * US; t <= r0 + s->lag; t += 1 * US)
		greedy(s->g, t, 1000);
	sluice_clock_manual_set(&mclock, r0 + s->lag);
}

Test(change_gcra, stalled_setter)
{
	if (!stall_supported())
		cr_skip_test("stall hooks: x86-64 Linux, not under TSan");
	static const uint64_t lags[] = { 2 * US, 30 * US, 500 * US, 1 * MS };
	for (int kind = 0; kind < 2; kind++) {
		for (size_t k = 0; k < sizeof(lags) / sizeof(lags[0]); k++) {
			sluice_gcra_t *g = stall_page();
			cr_assert_not_null(g);
			make(g, 5 * US, 100);
			greedy(g, 0, 1000);
			uint64_t r = 1000 * US;
			for (uint64_t t = 5 * US; t <= r; t += 5 * US)
				greedy(g, t, 1000);
			sluice_clock_manual_set(&mclock, r);
			struct stall_decide s = { g, lags[k] };
			stall_arm(&g->tat, sizeof(g->tat), decide_meanwhile, &s);
			int rc = kind == 0 ? sluice_gcra_set_rate(g, SEC / (10 * US), SEC)
			                   : sluice_gcra_set_burst(g, 150);
			cr_assert_eq(rc, 0);
			cr_assert_eq(stall_fired(), 1, "the stall did not land on the seal");
			/* decisions at every reading from the setter's on */
			for (uint64_t t = r; t <= r + lags[k] + 3 * MS; t += 1 * US)
				greedy(g, t, 1000);
			check_bound(kind ? 150 : 100, 5 * US, "stalled setter");
			stall_page_free(g);
		}
	}
}

/* ---- leaky -------------------------------------------------------------- */

static void make_leaky(sluice_leaky_t *l, sluice_leaky_mode_t mode, uint64_t T, uint64_t depth,
                       uint64_t max_delay)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_leaky_config_t cfg = { .rate = SEC / T, .period_ns = SEC, .mode = mode,
		                      .depth = depth, .max_delay_ns = max_delay, .clock = &mclock };
	int rc = sluice_leaky_init(l, &cfg);
	cr_assert_eq(rc, 0, "leaky init: %s", sluice_strerror(rc));
	nrecs = 0;
}

static uint64_t greedy_meter(sluice_leaky_t *l, uint64_t r)
{
	uint64_t k = 0;
	sluice_decision_t d;
	while (k < 1000 && sluice_leaky_acquire_at(l, 1, r, &d) == 1) {
		record(d.now_ns, 1);
		k++;
	}
	return k;
}

/* The meter is GCRA's acquire with b = D + 1: the same finding, the same
 * rule (leaky.h, READINGS ACROSS A CHANGE). */
Test(change_gcra, leaky_meter_older_reading)
{
	static const uint64_t gaps[] = { 26 * US, 200 * US, 500 * US };
	for (size_t k = 0; k < sizeof(gaps) / sizeof(gaps[0]); k++) {
		sluice_leaky_t l;
		make_leaky(&l, SLUICE_LEAKY_METER, 5 * US, 99, 0);
		uint64_t r = 1000 * US, tc = r + gaps[k];
		greedy_meter(&l, 0);
		for (uint64_t t = 5 * US; t <= r; t += 5 * US)
			greedy_meter(&l, t);
		cr_assert_eq(sluice_leaky_set_rate_at(&l, SEC / (10 * US), SEC, tc), 0);
		uint64_t got = greedy_meter(&l, r);
		cr_assert_eq(got, 0, "gap %llu us: %llu requests at a reading older than the change",
		             (unsigned long long)(gaps[k] / US), (unsigned long long)got);
		for (uint64_t t = tc; t <= tc + 2 * MS; t += 1 * US)
			greedy_meter(&l, t);
		check_bound(100, 5 * US, "meter");
		sluice_leaky_destroy(&l);
	}
}

/* The shaper books slots T apart from the TAT, which a change never moves
 * back: a reservation at a reading older than the change gets a slot at or
 * after it, and the slots keep 1 + t / min(T). */
Test(change_gcra, leaky_shaper_older_reading)
{
	sluice_leaky_t l;
	make_leaky(&l, SLUICE_LEAKY_SHAPER, 5 * US, 0, 1 * MS);
	sluice_decision_t d;
	uint64_t r = 1000 * US, tc = r + 200 * US;
	for (uint64_t t = 0; t <= r; t += 5 * US) {
		while (sluice_leaky_reserve_at(&l, 1, t, 0, &d) == 1)
			record(d.now_ns + d.delay_ns, 1);
	}
	cr_assert_eq(sluice_leaky_set_rate_at(&l, SEC / (10 * US), SEC, tc), 0);
	for (int i = 0; i < 50; i++) {
		cr_assert_eq(sluice_leaky_reserve_at(&l, 1, r, 1 * MS, &d), 1);
		cr_assert_geq(d.now_ns + d.delay_ns, tc);
		record(d.now_ns + d.delay_ns, 1);
	}
	check_bound(1, 5 * US, "shaper");
	sluice_leaky_destroy(&l);
}

/* ---- warm-up ------------------------------------------------------------- */

/*
 * Warm-up's set_rate has no reading: it keeps the next free ticket (one
 * unit later) and the temperature, which idle time changes at the same
 * fraction per ns at any rate.  Its stamp is the ticket: every admission
 * starts at or after the ticket the previous one booked, so a reading
 * older than the change (or than the setter's own clock) is refused until
 * the ticket, and nothing a setter's timing does can credit it.  Checked:
 * the stable-rate bound (a) of warmup.h over every interval of starts,
 * with the old readings and a ramp of changes, L the largest limit and I
 * the smallest interval in force.
 */
Test(change_gcra, warmup_older_reading)
{
	sluice_warmup_t w;
	sluice_clock_manual_init(&mclock, 0);
	sluice_warmup_config_t cfg = { .rate = SEC / (5 * US), .period_ns = SEC,
		                       .warmup_ns = 2 * MS, .clock = &mclock };
	cr_assert_eq(sluice_warmup_init(&w, &cfg), 0);
	nrecs = 0;
	sluice_decision_t d;
	uint64_t lmax = sluice_warmup_limit(&w), t = 0;
	for (int round = 0; round < 40; round++) {
		/* saturate for a while at every us */
		for (uint64_t end = t + 400 * US; t < end; t += 1 * US) {
			while (sluice_warmup_acquire_at(&w, 1, t, &d) == 1)
				record(d.now_ns, 1);
		}
		/* a change at t (5 <-> 10 us), then decisions at readings older
		 * than it, as the stalled deciders of the issue */
		uint64_t T1 = round % 2 ? 5 * US : 10 * US;
		cr_assert_eq(sluice_warmup_set_rate(&w, SEC / T1, SEC), 0);
		if (sluice_warmup_limit(&w) > lmax)
			lmax = sluice_warmup_limit(&w);
		for (uint64_t back = 13 * US; back <= 500 * US; back += 13 * US) {
			uint64_t r = t - back;
			int rc = sluice_warmup_acquire_at(&w, 1, r, &d);
			if (rc == 1)
				record(d.now_ns, 1);
			if (sluice_warmup_reserve_at(&w, 1, r, 20 * US, &d) == 1)
				record(d.now_ns + d.delay_ns, 1);
		}
	}
	check_bound(lmax, 5 * US, "warm-up");
}

/* An admission's start is d->now_ns + d->delay_ns (warmup.h, GUARANTEE;
 * decision.h: retry_after_ns is 0 on admission): a booking's refund names
 * the booking by it, and retry_after_ns of a booking is 0. */
Test(change_gcra, warmup_start_is_delay)
{
	sluice_warmup_t w;
	sluice_clock_manual_init(&mclock, 0);
	sluice_warmup_config_t cfg = { .rate = 1000, .period_ns = SEC, .warmup_ns = 10 * MS,
		                       .clock = &mclock };
	cr_assert_eq(sluice_warmup_init(&w, &cfg), 0);
	sluice_decision_t a, b;
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, 0, &a), 1);
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, 0, SEC, &b), 1);
	cr_assert_eq(b.retry_after_ns, 0);
	cr_assert_gt(b.delay_ns, 0);
	cr_assert_eq(b.now_ns + b.delay_ns, a.now_ns + a.reset_ns,
	             "the booking starts at the ticket the previous admission booked");
}
