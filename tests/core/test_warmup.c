/* SPDX-License-Identifier: MIT */
/*
 * test_warmup.c - smooth warm-up limiter (Guava SmoothWarmingUp semantics):
 * manual clock, deterministic; then a small multi-thread check.
 *
 * The anchor of the tests is Guava's own RateLimiterTest.testWarmUp
 * (create(2.0, 4000 ms, cold factor 3)): driving reserve_at with a manual
 * clock and sleeping by the returned delays must reproduce its event strings
 * to 2 decimals, including the cool-down after idling and the "didn't get
 * cold" case.  Then an exact long double model of the same semantics checks
 * a long pseudo-random schedule (sluice may only be slower, within the
 * documented precision), the header's guarantees are checked directly, and
 * threads hammer one limiter while another thread moves the clock.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/clock.h"
#include "sluice/error.h"
#include "sluice/warmup.h"

#include "test_pace.h"
#include "recorder.h"
#include "test_rng.h"
#include "test_stall.h"

#define US 1000ULL
#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(warmup, .timeout = 120);

static sluice_clock_t mclock;

static void make(sluice_warmup_t *w, uint64_t rate, uint64_t period, uint64_t warmup,
                 uint64_t start)
{
	sluice_clock_manual_init(&mclock, start);
	sluice_warmup_config_t cfg = { .rate = rate, .period_ns = period, .warmup_ns = warmup,
		                       .clock = &mclock };
	int rc = sluice_warmup_init(w, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
}

/* ---- Guava's event strings ------------------------------------------------ */

/* Guava's FakeStopwatch prints micros / 1e6 with "%3.2f" (Java: half up);
 * every value here is a whole number of ns, so round half up in integers. */
struct events {
	uint64_t now;
	char buf[512];
	size_t len;
};

static void ev_add(struct events *e, char kind, uint64_t ns)
{
	uint64_t hundredths = (ns + 5 * MS) / (10 * MS);
	int k = snprintf(e->buf + e->len, sizeof(e->buf) - e->len, "%s%c%llu.%02llu",
	                 e->len ? ", " : "", kind, (unsigned long long)(hundredths / 100),
	                 (unsigned long long)(hundredths % 100));
	cr_assert(k > 0 && (size_t)k < sizeof(e->buf) - e->len);
	e->len += (size_t)k;
}

static void ev_check(struct events *e, const char *want)
{
	cr_assert_str_eq(e->buf, want);
	e->len = 0;
	e->buf[0] = 0;
}

/* Guava's stopwatch.sleepMillis(): the user sleeps. */
static void sleep_ms(struct events *e, uint64_t ms)
{
	e->now += ms * MS;
	ev_add(e, 'U', ms * MS);
}

/* Guava's limiter.acquire(n): reserve, then sleep the returned delay. */
static uint64_t acquire_guava(sluice_warmup_t *w, struct events *e, uint64_t n)
{
	sluice_decision_t d;
	int rc = sluice_warmup_reserve_at(w, n, e->now, UINT64_MAX, &d);
	cr_assert_eq(rc, 1, "reserve at %llu: %d", (unsigned long long)e->now, rc);
	cr_assert(d.allowed);
	cr_assert_eq(d.now_ns, e->now);
	e->now += d.delay_ns;
	ev_add(e, 'R', d.delay_ns);
	return d.delay_ns;
}

ParameterizedTestParameters(warmup, guava_test_warm_up)
{
	/* where the limiter's timeline starts: 0, an odd offset, and 70 s
	 * below the top of the 64-bit time base (the test spans 30 s) */
	static uint64_t starts[] = { 0, 5 * SEC + 7, UINT64_MAX - 70 * SEC };
	return cr_make_param_array(uint64_t, starts, sizeof(starts) / sizeof(starts[0]));
}

/* RateLimiterTest.testWarmUp, event for event. */
ParameterizedTest(uint64_t *start, warmup, guava_test_warm_up)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4000 * MS, *start);
	struct events e = { .now = *start };
	for (int i = 0; i < 8; i++)
		acquire_guava(&w, &e, 1); /* #1 */
	ev_check(&e, "R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50");
	sleep_ms(&e, 500);  /* #2: to repay for the last acquire */
	sleep_ms(&e, 4000); /* #3: becomes cold again */
	ev_check(&e, "U0.50, U4.00");
	for (int i = 0; i < 8; i++)
		acquire_guava(&w, &e, 1); /* #4 */
	ev_check(&e, "R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50");
	sleep_ms(&e, 500);  /* #5: to repay for the last acquire */
	sleep_ms(&e, 2000); /* #6: didn't get cold! */
	ev_check(&e, "U0.50, U2.00");
	for (int i = 0; i < 8; i++)
		acquire_guava(&w, &e, 1); /* #7 */
	ev_check(&e, "R0.00, R0.50, R0.50, R0.50, R0.50, R0.50, R0.50, R0.50");
}

/* The same timings, to the microsecond, and only ever late (rounding up). */
Test(warmup, guava_timings_to_the_microsecond)
{
	static const uint64_t want_us[] = { 0,      1375000, 1125000, 875000,
		                            625000, 500000,  500000,  500000 };
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	struct events e = { 0 };
	for (int i = 0; i < 8; i++) {
		uint64_t got = acquire_guava(&w, &e, 1);
		cr_assert_geq(got, want_us[i] * US, "#%d: %llu ns is early", i,
		              (unsigned long long)got);
		cr_assert_lt(got, want_us[i] * US + US, "#%d: %llu ns", i, (unsigned long long)got);
	}
}

/* Guava's tryAcquire(0) mapping: the same starts, found by polling. */
Test(warmup, acquire_is_try_acquire_zero)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	static const uint64_t gaps_ms[] = { 1375, 1125, 875, 625, 500, 500, 500 };
	uint64_t t = 0;
	sluice_decision_t d;
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, t, &d), 1);
	cr_assert_eq(d.retry_after_ns, 0);
	for (int i = 0; i < 7; i++) {
		/* refused until the booked ticket, with an exact retry_after */
		cr_assert_eq(sluice_warmup_acquire_at(&w, 1, t + 1, &d), 0);
		cr_assert_eq(d.now_ns, t + 1);
		uint64_t ticket = t + 1 + d.retry_after_ns;
		cr_assert_eq(ticket, d.now_ns + d.reset_ns, "refusal: reset is the ticket");
		cr_assert_geq(ticket, t + gaps_ms[i] * MS);
		cr_assert_lt(ticket, t + gaps_ms[i] * MS + US);
		cr_assert_eq(sluice_warmup_acquire_at(&w, 1, ticket - 1, &d), 0, "1 ns early");
		cr_assert_eq(d.retry_after_ns, 1);
		cr_assert_eq(sluice_warmup_acquire_at(&w, 1, ticket, &d), 1, "#%d at its ticket", i);
		cr_assert_eq(d.retry_after_ns, 0);
		cr_assert_eq(d.remaining, 0);
		t = ticket;
	}
}

/* Guava's integral property: acquire(3) costs what 3 x acquire(1) cost. */
Test(warmup, n_above_one_pays_the_integral)
{
	sluice_warmup_t a, b;
	sluice_decision_t d;
	make(&a, 2, SEC, 4 * SEC, 0);
	make(&b, 2, SEC, 4 * SEC, 0);
	cr_assert_eq(sluice_warmup_acquire_at(&a, 3, 0, &d), 1);
	uint64_t ticket3 = d.reset_ns;
	uint64_t t = 0;
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(sluice_warmup_reserve_at(&b, 1, t, UINT64_MAX, &d), 1);
		t += d.delay_ns;
		if (i == 2)
			t += d.reset_ns - d.delay_ns; /* the third one's ticket */
	}
	/* 1.375 + 1.125 + 0.875 = 3.375 s either way (rounding: < 1 us) */
	cr_assert_geq(ticket3, 3375 * MS);
	cr_assert_lt(ticket3, 3375 * MS + US);
	cr_assert_geq(t, 3375 * MS);
	cr_assert_lt(t, 3375 * MS + US);
	/* the largest request, L = M = 8 from cold: P (down to T) + P/2 */
	sluice_warmup_t c;
	make(&c, 2, SEC, 4 * SEC, 0);
	cr_assert_eq(sluice_warmup_limit(&c), 8);
	cr_assert_eq(sluice_warmup_acquire_at(&c, 8, 0, &d), 1);
	cr_assert_geq(d.reset_ns, 6 * SEC);
	cr_assert_lt(d.reset_ns, 6 * SEC + US);
	cr_assert_eq(sluice_warmup_acquire_at(&c, 1, 6 * SEC + US, &d), 1);
	cr_assert_geq(d.reset_ns, 500 * MS, "warm now: stable interval");
	cr_assert_lt(d.reset_ns, 500 * MS + US);
}

Test(warmup, n_above_limit_and_zero)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_warmup_acquire_at(&w, 9, 0, &d), SLUICE_ETOOBIG);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	cr_assert_not(d.allowed);
	cr_assert_eq(d.limit, 8);
	cr_assert_eq(sluice_warmup_reserve_at(&w, UINT64_MAX, 0, UINT64_MAX, &d), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_warmup_acquire_at(&w, 0, 0, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_warmup_acquire_at(NULL, 1, 0, &d), SLUICE_EINVAL);
	/* nothing was taken: the first request still finds it cold */
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, 0, &d), 1);
	cr_assert_geq(d.reset_ns, 1375 * MS);
	cr_assert_lt(d.reset_ns, 1375 * MS + US);
	/* a limiter with M < 1 still takes single permits */
	sluice_warmup_t s;
	make(&s, 1, SEC, 100 * MS, 0);
	cr_assert_eq(sluice_warmup_limit(&s), 1);
	cr_assert_eq(sluice_warmup_acquire_at(&s, 2, 0, &d), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_warmup_acquire_at(&s, 1, 0, &d), 1);
}

/* Partial cooling: idle time refills stored permits at one per I. */
Test(warmup, cools_down_at_one_permit_per_interval)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	struct events e = { 0 };
	for (int i = 0; i < 9; i++)
		acquire_guava(&w, &e, 1); /* warm: the ninth paid the eighth */
	e.len = 0;
	sleep_ms(&e, 500);  /* repay the ninth: stored 0 */
	sleep_ms(&e, 3000); /* 6 stored: 2 above the threshold */
	for (int i = 0; i < 5; i++)
		acquire_guava(&w, &e, 1);
	ev_check(&e, "U0.50, U3.00, R0.00, R0.88, R0.63, R0.50, R0.50");
	/* the limiter reads the same through the plain variants */
	sluice_clock_manual_set(&mclock, e.now + 40 * SEC); /* cold again */
	sluice_decision_t d;
	cr_assert_eq(sluice_warmup_reserve(&w, 1, UINT64_MAX, &d), 1);
	cr_assert_eq(d.delay_ns, 0);
	cr_assert_eq(sluice_warmup_acquire(&w, 1, &d), 0);
	cr_assert_geq(d.retry_after_ns, 1375 * MS);
	cr_assert_lt(d.retry_after_ns, 1375 * MS + US);
}

/* ---- the guarantee, directly ---------------------------------------------- */

/*
 * Saturated polling from cold, 4 minutes of limiter time (the anchor moves
 * by steps while busy): every admission starts at or after the previous
 * one's ticket and that ticket is >= start + n I; the first P passes at most
 * X(P) + L = M/2 + L, then the stable rate holds within one request.
 */
Test(warmup, guarantee_spacing_cold_start_and_rate)
{
	const uint64_t I = 250 * MS, P = 2 * SEC; /* 4 per second, M = 8 */
	sluice_warmup_t w;
	make(&w, 4, SEC, P, 0);
	uint64_t prev_ticket = 0, admitted = 0, in_first_p = 0, anchor0 = atomic_load(&w.anchor);
	uint64_t first = UINT64_MAX, last_window_start = 0, in_window = 0;
	uint64_t x = 12345;
	for (uint64_t t = 0; t < 240 * SEC; t += MS) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t n = 1 + x % 3;
		sluice_decision_t d;
		int rc = sluice_warmup_acquire_at(&w, n, t, &d);
		cr_assert_geq(rc, 0);
		if (rc == 0) {
			cr_assert_gt(d.retry_after_ns, 0);
			cr_assert_eq(t + d.retry_after_ns, prev_ticket, "refused until the ticket");
			continue;
		}
		cr_assert_geq(t, prev_ticket, "started before the previous ticket");
		cr_assert_geq(d.reset_ns * 1, n * I, "ticket closer than n I");
		prev_ticket = t + d.reset_ns;
		admitted += n;
		if (first == UINT64_MAX)
			first = t;
		if (t < first + P)
			in_first_p += n;
		if (t >= 120 * SEC) { /* warm: count 10 s windows */
			if (t >= last_window_start + 10 * SEC) {
				if (last_window_start)
					cr_assert_leq(in_window, 10 * SEC / I + 3, "10 s window");
				last_window_start = t;
				in_window = 0;
			}
			in_window += n;
		}
	}
	cr_assert_leq(in_first_p, 8 / 2 + 3, "cold start: %llu in the first P",
	              (unsigned long long)in_first_p);
	cr_assert_geq(in_first_p, 8 / 2 - 1, "but the ramp does pass permits");
	cr_assert_geq(admitted, 240 * SEC / I - 24, "stable rate reached: %llu",
	              (unsigned long long)admitted);
	cr_assert_leq(admitted, 240 * SEC / I + 3);
	cr_assert_gt(atomic_load(&w.anchor), anchor0, "the anchor stepped while busy");
}

/* The cold-start curve: X(D) = M (3 - sqrt(9 - 8 D/P)) / 4 (+ L). */
Test(warmup, cold_start_follows_the_curve)
{
	/* 1000 per second, P = 1 s: M = 1000, T = 500 */
	sluice_warmup_t w;
	make(&w, 1000, SEC, SEC, 0);
	uint64_t t = 0, passed = 0;
	sluice_decision_t d;
	/* X(D) at D = P/8, P/4, P/2, P: solve 3x - 2x^2/M = D/I */
	static const struct { uint64_t d_ms; double x; } marks[] = {
		{ 125, 42.89 }, { 250, 88.56 }, { 500, 190.98 }, { 1000, 500.0 },
	};
	size_t k = 0;
	while (k < 4) {
		int rc = sluice_warmup_acquire_at(&w, 1, t, &d);
		if (rc == 1) {
			passed++;
			t += d.reset_ns; /* next at its ticket: saturated */
		} else {
			t += d.retry_after_ns;
		}
		while (k < 4 && t >= marks[k].d_ms * MS) {
			cr_assert_leq((double)passed, marks[k].x + 1.0, "D = %llu ms: %llu passed",
			              (unsigned long long)marks[k].d_ms, (unsigned long long)passed);
			cr_assert_geq((double)passed, marks[k].x - 1.0);
			k++;
		}
	}
}

/* ---- clock jumps, the top of the time base -------------------------------- */

Test(warmup, clock_backwards_by_seconds_mints_nothing)
{
	sluice_warmup_t w, twin;
	make(&w, 2, SEC, 4 * SEC, 0);
	sluice_decision_t d, dt;
	/* warm both up at 30 s .. 37 s */
	uint64_t t = 30 * SEC;
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(sluice_warmup_reserve_at(&w, 1, t, UINT64_MAX, &d), 1);
		t += d.delay_ns;
	}
	uint64_t ticket = d.now_ns + d.reset_ns;
	memcpy(&twin, &w, sizeof(w));
	/* readings seconds back: refused, nothing minted, retry from them */
	for (uint64_t back = 1; back <= 10; back++) {
		uint64_t r = t - back * SEC;
		cr_assert_eq(sluice_warmup_acquire_at(&w, 1, r, &d), 0, "%llu s back",
		             (unsigned long long)back);
		cr_assert_eq(d.now_ns, r);
		cr_assert_eq(d.retry_after_ns, ticket - r);
		/* a reservation from the past books at the same ticket */
		cr_assert_eq(sluice_warmup_reserve_at(&w, 1, r, 1, &d), 0);
	}
	/* before the anchor: a fresh one first used at 100 s (which anchors
	 * it there), then asked at 20 s: held at the anchor, refused */
	sluice_warmup_t late;
	make(&late, 2, SEC, 4 * SEC, 0);
	cr_assert_eq(sluice_warmup_acquire_at(&late, 1, 100 * SEC, &d), 1);
	uint64_t anchor = atomic_load(&late.anchor);
	cr_assert(anchor > 20 * SEC && anchor <= 100 * SEC, "anchored by its first reading");
	cr_assert_eq(sluice_warmup_acquire_at(&late, 1, 20 * SEC, &d), 0);
	cr_assert_eq(d.now_ns, anchor, "held at the anchor");
	/* and the twin that never saw the past agrees from here on */
	for (int i = 0; i < 6; i++) {
		int a = sluice_warmup_reserve_at(&w, 1, t, UINT64_MAX, &d);
		int b = sluice_warmup_reserve_at(&twin, 1, t, UINT64_MAX, &dt);
		cr_assert_eq(a, 1);
		cr_assert_eq(b, 1);
		cr_assert_eq(d.retry_after_ns, dt.retry_after_ns);
		cr_assert_eq(d.reset_ns, dt.reset_ns);
		t += d.retry_after_ns;
	}
	cr_assert_eq(atomic_load(&w.word), atomic_load(&twin.word));
}

Test(warmup, long_idle_far_ahead_is_cold_again)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	struct events e = { 0 };
	for (int i = 0; i < 8; i++)
		acquire_guava(&w, &e, 1);
	/* days, then an exact multiple of the state's time span, then years:
	 * each must be seen as idle (cold), never aliased to "recent" */
	uint64_t span = w.unit_ns << 35;
	uint64_t idles[] = { 3 * 86400 * SEC, 8 * span, 8 * span + 5 * SEC, 2 * span - 3 * SEC,
		             4000ULL * 86400 * SEC };
	for (size_t k = 0; k < sizeof(idles) / sizeof(idles[0]); k++) {
		e.len = 0;
		e.now += idles[k];
		for (int i = 0; i < 8; i++)
			acquire_guava(&w, &e, 1);
		ev_check(&e, "R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50");
	}
}

Test(warmup, end_of_the_time_base)
{
	sluice_warmup_t w;
	uint64_t top = UINT64_MAX - 3 * SEC;
	make(&w, 2, SEC, 4 * SEC, top);
	sluice_decision_t d;
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, top, &d), 1); /* ticket top + 1.375 s */
	uint64_t t = top + d.reset_ns;
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, t, &d), 1); /* ticket + 1.125 s: ok */
	t += d.reset_ns;
	/* 0.875 s more would pass 2^64: refused for ever, not wrapped */
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, t, &d), 0);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, UINT64_MAX, &d), 0);
	cr_assert_eq(d.now_ns, UINT64_MAX & ~(w.unit_ns - 1), "the last grid point");
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, UINT64_MAX - 1, UINT64_MAX, &d), 0);
}

/* ---- reservations and refunds --------------------------------------------- */

Test(warmup, reserve_books_only_within_max_delay)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, 0, &d), 1); /* ticket 1.375 s */
	uint64_t ticket = d.reset_ns;
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, 0, SEC, &d), 0, "1.375 s > 1 s");
	cr_assert_eq(d.retry_after_ns, ticket - SEC, "passes once the wait is 1 s");
	cr_assert_eq(d.reset_ns, ticket);
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, ticket - SEC - 1, SEC, &d), 0);
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, ticket - SEC, SEC, &d), 1);
	cr_assert_eq(d.delay_ns, SEC, "sleep until the old ticket");
	/* nothing was booked by the refusals: the second booking starts at
	 * the first ticket and costs 1.125 s */
	cr_assert_geq(d.now_ns + d.reset_ns, ticket + 1125 * MS);
	cr_assert_lt(d.now_ns + d.reset_ns, ticket + 1125 * MS + US);
	/* the horizon: keep booking at time 0 until it refuses */
	int booked = 0;
	while (sluice_warmup_reserve_at(&w, 1, 0, UINT64_MAX, &d) == 1)
		booked++;
	cr_assert_gt(d.retry_after_ns, 0);
	cr_assert_gt(d.reset_ns, w.horizon_ns, "refused only past the horizon");
	cr_assert_geq(w.horizon_ns, w.warmup_ns + sluice_warmup_limit(&w) * 500 * MS);
	cr_assert_gt(booked, 10);
}

Test(warmup, refund_latest_booking_exactly)
{
	sluice_warmup_t w, before;
	make(&w, 2, SEC, 4 * SEC, 0);
	sluice_decision_t d, d2, d3;
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, 0, &d), 1);
	memcpy(&before, &w, sizeof(w));
	cr_assert_eq(sluice_warmup_acquire_at(&w, 2, d.reset_ns + 7, &d2), 1);
	cr_assert_eq(sluice_warmup_refund(&w, 2, &d2), 0);
	/* the limiter decides as if d2 never happened */
	cr_assert_eq(sluice_warmup_acquire_at(&w, 2, d.reset_ns + 7, &d3), 1);
	cr_assert_geq(d3.reset_ns, d2.reset_ns, "never warmer than before");
	cr_assert_lt(d3.reset_ns, d2.reset_ns + US);
	cr_assert_eq(sluice_warmup_refund(&w, 2, &d3), 0);
	/* twice is not exact any more: the ticket moved back already */
	cr_assert_eq(sluice_warmup_refund(&w, 2, &d3), SLUICE_ECANCEL);
	/* a booking with later bookings chained on it is kept */
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, d.reset_ns + 7, &d2), 1);
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, d.reset_ns + 8, UINT64_MAX, &d3), 1);
	uint64_t word = atomic_load(&w.word);
	cr_assert_eq(sluice_warmup_refund(&w, 1, &d2), SLUICE_ECANCEL);
	cr_assert_eq(atomic_load(&w.word), word, "ECANCEL changes nothing");
	/* the latest one is a reservation with a delay: back to its start */
	cr_assert_eq(sluice_warmup_refund(&w, 1, &d3), 0);
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, d3.now_ns + d3.delay_ns - 1, &d), 0);
	cr_assert_eq(d.retry_after_ns, 1);
	/* bad arguments */
	sluice_decision_t no = d2;
	no.allowed = 0;
	cr_assert_eq(sluice_warmup_refund(&w, 1, &no), SLUICE_EINVAL);
	cr_assert_eq(sluice_warmup_refund(&w, 0, &d2), SLUICE_EINVAL);
	cr_assert_eq(sluice_warmup_refund(&w, 9, &d2), SLUICE_EINVAL);
	cr_assert_eq(sluice_warmup_refund(NULL, 1, &d2), SLUICE_EINVAL);
	cr_assert_eq(sluice_warmup_refund(&w, 1, NULL), SLUICE_EINVAL);
	(void)before;
}

/* The refund contract (warmup.h): a second refund of one booking is
 * refused, unless a booking made since ends at exactly the same ticket; then
 * that one goes back (the hole the caller's "at most once" closes).  Warm,
 * with I a whole number of ns, costs are n I exactly, so the same request
 * again from the refunded state books the same ticket. */
Test(warmup, second_refund_is_refused_unless_a_later_booking_ends_there)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	sluice_decision_t d, d3, d4;
	uint64_t t = 0;
	for (int i = 0; i < 20; i++) { /* saturated: warm */
		cr_assert_eq(sluice_warmup_reserve_at(&w, 1, t, UINT64_MAX, &d), 1);
		t += d.delay_ns;
	}
	t = d.now_ns + d.reset_ns; /* the next free ticket */
	cr_assert_eq(sluice_warmup_acquire_at(&w, 2, t, &d3), 1);
	cr_assert_eq(d3.reset_ns, SEC, "warm: 2 I exactly");
	cr_assert_eq(sluice_warmup_refund(&w, 2, &d3), 0);
	uint64_t word = atomic_load(&w.word);
	cr_assert_eq(sluice_warmup_refund(&w, 2, &d3), SLUICE_ECANCEL, "twice: refused");
	cr_assert_eq(atomic_load(&w.word), word, "and nothing changed");
	cr_assert_eq(sluice_warmup_acquire_at(&w, 2, t, &d4), 1);
	cr_assert_eq(d4.now_ns + d4.reset_ns, d3.now_ns + d3.reset_ns, "the same ticket");
	cr_assert_eq(sluice_warmup_refund(&w, 2, &d3), 0, "the hole: d4 given back");
	cr_assert_eq(sluice_warmup_refund(&w, 2, &d4), SLUICE_ECANCEL, "d4 is gone already");
}

/* A refund never leaves the limiter warmer than before the booking. */
Test(warmup, refund_errs_colder)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	sluice_decision_t d, d2;
	/* warm it: stored 0 after the ninth booking */
	uint64_t t = 0;
	for (int i = 0; i < 9; i++) {
		cr_assert_eq(sluice_warmup_reserve_at(&w, 1, t, UINT64_MAX, &d), 1);
		t += d.delay_ns;
	}
	t = d.now_ns + d.reset_ns;
	/* n = 3 with 0 stored: all fresh; refund adds 3 stored permits */
	cr_assert_eq(sluice_warmup_acquire_at(&w, 3, t, &d2), 1);
	cr_assert_eq(sluice_warmup_refund(&w, 3, &d2), 0);
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, t, &d), 1);
	cr_assert_geq(d.reset_ns, 500 * MS, "never cheaper than a warm permit");
}

/* ---- configuration --------------------------------------------------------- */

struct bad_cfg {
	uint64_t rate, period, warmup;
	int clock_kind; /* -1: a manual clock; else forced kind */
	int want;
};

ParameterizedTestParameters(warmup, invalid_config)
{
	static struct bad_cfg params[] = {
		{ 0, SEC, SEC, -1, SLUICE_ERATE },                       /* rate 0 */
		{ 2, 0, SEC, -1, SLUICE_ERATE },                         /* period 0 */
		{ 1001, 1000, SEC, -1, SLUICE_ERATE },                   /* I < 1 ns */
		{ 1, (1ULL << 46) + 1, SEC, -1, SLUICE_ERATE },          /* period too long */
		{ 2, SEC, 0, -1, SLUICE_EWARMUP },                       /* no warm-up */
		{ 2, SEC, 999, -1, SLUICE_EWARMUP },                     /* sub-microsecond */
		{ 2, SEC, SLUICE_WARMUP_MAX_NS + 1, -1, SLUICE_EWARMUP },
		{ 1000, SEC, 1049 * SEC, -1, SLUICE_EWARMUP },           /* M > 2^20 */
		{ 2, SEC, SEC, 9, SLUICE_ECLOCK },                       /* unknown clock */
		{ 1000, 1000, 1000, -1, 0 },                              /* smallest: I = 1 ns, 1 us */
		{ 1, 1ULL << 46, SLUICE_WARMUP_MAX_NS, -1, 0 },           /* longest */
		{ 1000, SEC, 1048 * SEC, -1, 0 },                         /* M just under 2^20 */
	};
	return cr_make_param_array(struct bad_cfg, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct bad_cfg *p, warmup, invalid_config)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 0);
	if (p->clock_kind >= 0)
		m.kind = (sluice_clock_kind_t)p->clock_kind;
	sluice_warmup_config_t cfg = { .rate = p->rate, .period_ns = p->period,
		                       .warmup_ns = p->warmup, .clock = &m };
	sluice_warmup_t w, before;
	memset(&w, 0xab, sizeof(w));
	memcpy(&before, &w, sizeof(w));
	int rc = sluice_warmup_init(&w, &cfg);
	cr_assert_eq(rc, p->want, "rate=%llu period=%llu warmup=%llu: got %s, want %s",
	             (unsigned long long)p->rate, (unsigned long long)p->period,
	             (unsigned long long)p->warmup, sluice_err_name(rc), sluice_err_name(p->want));
	if (rc != 0) {
		cr_assert_eq(memcmp(&w, &before, sizeof(w)), 0, "a failed init must not touch it");
		return;
	}
	/* valid extremes work: a few decisions, and the documented bounds */
	sluice_decision_t d;
	cr_assert_eq(sluice_warmup_acquire_at(&w, sluice_warmup_limit(&w), 5, &d), 1);
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, 5 + d.reset_ns, &d), 1);
	double interval = (double)p->period / (double)p->rate;
	cr_assert_leq((double)w.unit_ns, interval / 512.0 + 1.0, "unit %llu ns, I %.1f",
	              (unsigned long long)w.unit_ns, interval);
	cr_assert_geq((double)w.horizon_ns, (double)w.warmup_ns + (double)sluice_warmup_limit(&w) * interval);
	sluice_warmup_destroy(&w);
}

Test(warmup, null_arguments_and_size)
{
	sluice_warmup_t w;
	sluice_warmup_config_t cfg = { .rate = 1, .period_ns = SEC, .warmup_ns = SEC };
	cr_assert_eq(sluice_warmup_init(NULL, &cfg), SLUICE_EINVAL);
	cr_assert_eq(sluice_warmup_init(&w, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_warmup_init(&w, &cfg), 0, "NULL clock: the cached clock");
	cr_assert_eq(w.clock, &sluice_clock_cached);
	sluice_warmup_destroy(NULL);
	cr_assert_eq(sluice_warmup_size(), sizeof(sluice_warmup_t));
}

/* ---- an exact model over a long schedule ---------------------------------- */

/* Guava's semantics in long double: next free ticket, stored permits. */
struct model {
	long double next, s, I, M, T, P;
};

static long double model_cost(const struct model *m, long double n, long double *s_after)
{
	long double taken = n < m->s ? n : m->s, extra = 0;
	if (m->s > m->T && taken > 0) {
		long double b = m->s, a = m->s - taken;
		if (a < m->T)
			a = m->T;
		extra = 2 * m->I / m->M * (b - a) * (a + b - 2 * m->T);
	}
	*s_after = m->s - taken;
	return n * m->I + extra;
}


struct schedule {
	uint64_t rate, period, warmup, start, seed;
};

ParameterizedTestParameters(warmup, matches_exact_model)
{
	static struct schedule params[] = {
		{ 2, SEC, 4 * SEC, 0, 1 },                     /* Guava's */
		{ 1000, SEC, 2 * SEC, 77, 2 },                 /* M = 2000 */
		{ 3, SEC, 10 * SEC, 0, 3 },                    /* I not a whole ns */
		{ 1, 10 * US, 100 * US, 0, 4 },                /* fast, short warm-up */
		{ 7, SEC, 500 * MS, 0, 5 },                    /* M < 1 + ... */
		{ 50, SEC, 60 * SEC, UINT64_MAX - 50000 * SEC, 6 }, /* near the top */
	};
	return cr_make_param_array(struct schedule, params, sizeof(params) / sizeof(params[0]));
}

/*
 * The model follows sluice's decisions (it books what sluice booked, at the
 * same time), so the two cannot drift apart by taking different branches;
 * each decision is then checked against what the model says, within the
 * header's PRECISION bound (the rounding since the previous idle gap, and
 * twice the one before it, since a gap converts a late ticket into less
 * cooling):
 *   - a booking: the wait and the booked ticket match the model's;
 *   - a refusal: the model refuses too, or its wait is that close to the
 *     limit.
 * Without a gap (saturated use) sluice is never early: checked exactly.
 */
ParameterizedTest(struct schedule *p, warmup, matches_exact_model)
{
	sluice_warmup_t w;
	make(&w, p->rate, p->period, p->warmup, p->start);
	struct model m = { .next = 0, .I = (long double)p->period / p->rate,
		           .P = (long double)p->warmup };
	m.M = m.P / m.I;
	m.T = m.M / 2;
	m.s = m.M;
	/* the model's times are relative to the start (long double has 64
	 * mantissa bits: exact for these offsets) */
	rng_state = p->seed * 0x9E3779B97F4A7C15ULL + 1;
	uint64_t t = 0;
	/* Allowed lag: the ticket is rounded up by < unit + 3 ns a booking
	 * (reset when the limiter idles: both resync to the reading), and
	 * sluice's stored permits exceed the model's by < 2 units a booking
	 * (reset when the model's reach 0 or M: so do sluice's, within one
	 * unit), each excess permit costing at most 2 I more. */
	long double drift = 0, excess = 1, unit_q = 1.0L / (long double)(1ULL << atomic_load(&w.params[0].frac_bits));
	long double carried = 0; /* what the last gap may have converted */
	int gapped = 0;          /* a gap since the limiter was last cold */
	int booked = 0, refused = 0, differ = 0;
	long double max_early = 0, max_late = 0;
	for (int i = 0; i < 30000; i++) {
		uint64_t r = rnd();
		uint64_t span = (uint64_t)(m.I * 2);
		if (span == 0)
			span = 1;
		if (r % 97 == 0)
			t += p->warmup / 2 + r % (p->warmup + 1); /* idle: cool down */
		else if (r % 89 == 0 && t > 3 * span)
			t -= r % (3 * span);                     /* a reading from the past */
		else
			t += (r >> 8) % span;
		uint64_t n = 1 + (r >> 40) % (sluice_warmup_limit(&w) < 3 ? sluice_warmup_limit(&w) : 3);
		uint64_t kind = (r >> 20) % 4; /* wait for any, none, or 3 I */
		uint64_t maxd = kind == 0 ? UINT64_MAX : kind == 1 ? 0 : (uint64_t)(m.I * 3);
		sluice_decision_t d;
		uint64_t av = sluice_warmup_available_at(&w, p->start + t);
		int rc = sluice_warmup_reserve_at(&w, n, p->start + t, maxd, &d);
		cr_assert_geq(rc, 0);
		long double tt = (long double)(d.now_ns - p->start);
		long double mwait = m.next > tt ? m.next - tt : 0;
		long double lim = maxd == UINT64_MAX ? (long double)w.horizon_ns : (long double)maxd;
		long double tol = drift + 2 * m.I * excess * unit_q + 1000;
		long double early = gapped ? 3 * carried + 2 * m.I * excess * unit_q + 1000 : 1;
		/* available: all of L or nothing (pay later), as the model's
		 * ticket says within the PRECISION bound, and exactly what an
		 * acquire (max_delay 0) at the same reading decided */
		cr_assert(av == 0 || av == sluice_warmup_limit(&w), "step %d: available %llu", i,
		          (unsigned long long)av);
		if (mwait > tol)
			cr_assert_eq(av, 0, "step %d: model waits %.0Lf", i, mwait);
		if (m.next + early < tt)
			cr_assert_eq(av, sluice_warmup_limit(&w), "step %d: model's ticket passed", i);
		if (maxd == 0)
			cr_assert_eq(av > 0, rc == 1, "step %d: available %llu, acquire %d", i,
			             (unsigned long long)av, rc);
		if (rc == 1) {
			booked++;
			cr_assert_geq((long double)d.delay_ns + early, mwait,
			              "step %d: sluice early", i);
			cr_assert_leq((long double)d.delay_ns, mwait + tol,
			              "step %d: %llu vs %.0Lf (+%.0Lf)",
			              i, (unsigned long long)d.delay_ns, mwait, tol);
			/* the model books the same request at the same time */
			if (tt > m.next) {
				m.s += (tt - m.next) / m.I;
				if (m.s > m.M)
					m.s = m.M;
				m.next = tt;
				carried = drift > carried ? drift : carried;
				gapped = 1;
				drift = 0;
			}
			if (m.s >= m.M) {
				excess = 1;
				gapped = 0; /* both fully cold: identical again */
				carried = 0;
			}
			early = gapped ? 3 * carried + 2 * m.I * excess * unit_q + 1000 : 1;
			long double s_after;
			m.next += model_cost(&m, (long double)n, &s_after);
			m.s = s_after;
			if (m.s <= 0)
				excess = 1;
			excess += 2;
			drift += (long double)w.unit_ns + 3 + 2 * m.I * excess * unit_q;
			long double sl = (long double)(d.now_ns + d.reset_ns - p->start);
			cr_assert_geq(sl + early, m.next, "step %d: ticket early: sluice %.0Lf model %.0Lf",
			              i, sl, m.next);
			if (m.next - sl > max_early)
				max_early = m.next - sl;
			if (sl - m.next > max_late)
				max_late = sl - m.next;
			cr_assert_leq(sl, m.next + drift + 1000,
			              "step %d: ticket late: sluice %.0Lf model %.0Lf", i, sl, m.next);
		} else {
			refused++;
			if (mwait <= lim) {
				differ++;
				cr_assert_gt(mwait + tol, lim,
				             "step %d: refused, model books (wait %.0Lf <= %.0Lf)",
				             i, mwait, lim);
			}
		}
	}
	cr_assert_gt(booked, 3000, "booked %d", booked);
	cr_assert_gt(refused, 3000, "refused %d", refused);
	cr_assert_lt(differ, 100, "differed %d times", differ);
	cr_log_info("rate=%llu/%llu P=%llu: booked %d refused %d differ %d; tickets vs exact: "
	            "up to %.0Lf ns late, %.0Lf ns early", (unsigned long long)p->rate,
	            (unsigned long long)p->period, (unsigned long long)p->warmup, booked, refused,
	            differ, max_late, max_early);
}

/* ---- threads -------------------------------------------------------------- */

#define T_RECORDS (1u << 18)
#define T_CLOCK_STEPS 6000

struct trec {
	uint64_t start, ticket, n;
};

struct tdecider {
	pthread_t tid;
	sluice_warmup_t *w;
	struct trec *rec;
	size_t nrec;
	uint64_t seed, refused;
	_Atomic uint64_t decisions;
};

static struct tdecider *tdeciders;
static int ntdeciders;
static _Atomic int trunning;
static uint64_t tsteps, tjumps; /* anchor moves seen by the clock thread */
static int tset_rate;           /* the clock thread also changes the rate */
static uint64_t tchanges;       /* set_rate calls that returned 0         */
static int tset_err;            /* the first set_rate error, if any       */

static void *tdecider_main(void *arg)
{
	struct tdecider *me = arg;
	uint64_t x = me->seed;
	while (atomic_load_explicit(&trunning, memory_order_relaxed)) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t n = 1 + x % 3;
		sluice_decision_t d;
		int rc = (x >> 32) % 4 == 0 ? sluice_warmup_reserve(me->w, n, 3 * US, &d)
		                            : sluice_warmup_acquire(me->w, n, &d);
		if (rc == 1) {
			if (me->nrec < T_RECORDS)
				me->rec[me->nrec++] = (struct trec){ d.now_ns + d.delay_ns,
					                             d.now_ns + d.reset_ns, n };
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

/* Steps of up to I/2, now and then back by up to 3 I, now and then idle
 * past P (cold), and now and then to just before the re-anchoring point, so
 * that anchor steps and jumps race with bookings. */
static void *tclock_main(void *arg)
{
	sluice_warmup_t *w = arg;
	/* bit 0 is the parameter era (set_rate flips it): not a move */
	uint64_t x = 99, last = atomic_load(&w->anchor) & ~1ULL;
	tsteps = tjumps = tchanges = 0;
	tset_err = 0;
	for (int i = 0; i < T_CLOCK_STEPS; i++) {
		uint64_t a = atomic_load(&w->anchor) & ~1ULL;
		if (tset_rate && i % 64 == 63) {
			/* 2 per us and back (M = 16 and 8) while bookings race */
			int rc = sluice_warmup_set_rate(w, tchanges % 2 ? 1 : 2, US);
			if (rc == 0)
				tchanges++;
			else if (!tset_err)
				tset_err = rc;
		}
		if (a - last == w->unit_ns << 33)
			tsteps++;
		else if (a != last)
			tjumps++;
		last = a;
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t now = sluice_clock_now(&mclock);
		if (x % 500 == 0) /* just before re-anchoring: busy across it (step) */
			sluice_clock_manual_set(&mclock, atomic_load(&w->anchor) +
			                                     (w->unit_ns << 34) - 20 * US);
		else if (x % 500 == 250) /* idle past it: cold (jump) */
			sluice_clock_manual_set(&mclock, atomic_load(&w->anchor) +
			                                     (w->unit_ns << 35) + x % US);
		else if (x % 97 == 0)
			sluice_clock_manual_advance(&mclock, w->warmup_ns + x % US);
		else if (x % 50 == 0 && now > 10 * US)
			sluice_clock_manual_set(&mclock, now - x % (3 * US));
		else
			sluice_clock_manual_advance(&mclock, x % US);
		PACE_WAIT(tdeciders, ntdeciders);
	}
	atomic_store_explicit(&trunning, 0, memory_order_relaxed);
	return NULL;
}

static int by_start(const void *a, const void *b)
{
	const struct trec *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

struct tparams {
	int threads, set_rate;
};

ParameterizedTestParameters(warmup, threads_respect_the_ticket_chain)
{
	static struct tparams p[] = { { 2, 0 }, { 4, 0 }, { 2, 1 }, { 4, 1 } };
	return cr_make_param_array(struct tparams, p, sizeof(p) / sizeof(p[0]));
}

/*
 * Every admission starts at or after the ticket of the admission booked
 * just before it, and its own ticket is at least n I after its start: in
 * start order, start(k+1) >= ticket(k) >= start(k) + n(k) I.  From that the
 * rate bound (a) follows, and it is checked too over 10 I windows.
 * With set_rate racing (1 and 2 per us, in turn), the same with I the
 * smaller interval (SET_RATE: each cost is paid at its booking's rate, and
 * a change never moves the ticket back).
 */
ParameterizedTest(struct tparams *tp, warmup, threads_respect_the_ticket_chain)
{
	/* 1 permit per us, warm-up 8 us: M = 8 */
	const int *nthreads = &tp->threads;
	const uint64_t imin = tp->set_rate ? US / 2 : US;
	tset_rate = tp->set_rate;
	sluice_warmup_t w;
	make(&w, 1, US, 8 * US, 1000 * SEC);
	struct tdecider *d = calloc((size_t)*nthreads, sizeof(*d));
	cr_assert_not_null(d);
	tdeciders = d;
	ntdeciders = *nthreads;
	atomic_store(&trunning, 1);
	for (int i = 0; i < *nthreads; i++) {
		d[i].w = &w;
		d[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
		d[i].rec = malloc(sizeof(struct trec) * T_RECORDS);
		cr_assert_not_null(d[i].rec);
		cr_assert_eq(pthread_create(&d[i].tid, NULL, tdecider_main, &d[i]), 0);
	}
	pthread_t ct;
	uint64_t anchor0 = atomic_load(&w.anchor);
	cr_assert_eq(pthread_create(&ct, NULL, tclock_main, &w), 0);
	pthread_join(ct, NULL);
	for (int i = 0; i < *nthreads; i++)
		pthread_join(d[i].tid, NULL);

	size_t total;
	uint64_t refused;
	struct trec *all = REC_MERGE(d, *nthreads, T_RECORDS, by_start, &total, &refused);
	for (size_t i = 0; i < total; i++) {
		cr_assert_geq(all[i].ticket, all[i].start + all[i].n * imin, "ticket closer than n I");
		if (i > 0)
			cr_assert_geq(all[i].start, all[i - 1].ticket,
			              "start %llu before the previous ticket %llu",
			              (unsigned long long)all[i].start,
			              (unsigned long long)all[i - 1].ticket);
	}
	/* (a) over sliding windows of 10 I: at most 10 + L permits */
	size_t lo = 0;
	uint64_t sum = 0, worst = 0;
	for (size_t i = 0; i < total; i++) {
		sum += all[i].n;
		while (all[i].start - all[lo].start >= 10 * imin)
			sum -= all[lo++].n;
		worst = sum > worst ? sum : worst;
	}
	/* n_k I summed over all but the last start in the window is < 10 I */
	cr_assert_leq(worst, 9 + 3, "window of 10 I held %llu", (unsigned long long)worst);
	cr_assert_eq(tset_err, 0, "set_rate failed: %s", sluice_err_name(tset_err));
	if (tp->set_rate)
		cr_assert_gt(tchanges, 50, "rate changes raced with bookings");
	cr_assert_gt(total, 500, "admitted %zu", total);
	cr_assert_gt(refused, 500, "the limit must bite");
	cr_assert_gt(atomic_load(&w.anchor), anchor0, "the anchor moved under load");
	cr_assert_gt(tsteps, 0, "anchor steps (busy) raced with bookings");
	cr_assert_gt(tjumps, 0, "anchor jumps (cold) raced with bookings");
	cr_log_info("threads=%d set_rate=%d changes=%llu admitted=%zu refused=%llu worst10I=%llu anchor steps=%llu jumps=%llu",
	            *nthreads, tp->set_rate, (unsigned long long)tchanges, total, (unsigned long long)refused, (unsigned long long)worst,
	            (unsigned long long)tsteps, (unsigned long long)tjumps);
	for (int i = 0; i < *nthreads; i++)
		free(d[i].rec);
	free(d);
	free(all);
}

/* ---- racing for one ticket -------------------------------------------------- */

#include "race_harness.h"

static int race_take(void *lim, uint64_t t)
{
	return sluice_warmup_acquire_at(lim, 1, t, NULL);
}

/*
 * Two threads meet at a barrier and ask at the same reading, after the
 * ticket has passed: the first booking moves it ahead, so exactly one may
 * win, every round.  (A lost update, say a plain store for the CAS, lets
 * both win; this test catches it where the paced test above rarely can.)
 * Detection is probabilistic: the two threads must overlap in a window of
 * tens of ns; on 2 cores a broken CAS failed this test in 3 to 7 runs out of
 * 10 even under a load average of 10.  A correct limiter never fails it.
 */
Test(warmup, racing_threads_take_one_ticket)
{
	sluice_warmup_t w;
	make(&w, 1, US, 8 * US, 0);
	struct race_ctx mine = { &w, race_take, 1 }, theirs = { &w, race_take, 2 };
	int both, none;
	/* 100 us a round: past any ticket */
	cr_assert_eq(race_run(&mine, &theirs, 100 * US, NULL, &both, &none), 0);
	cr_assert_eq(both, 0, "%d rounds with two winners", both);
	cr_assert_eq(none, 0, "%d rounds with no winner", none);
}

/* One acquire passes per clock reading at most: an interval below the
 * clock's step would cap the rate silently, so init refuses it. */
Test(warmup, interval_below_clock_resolution)
{
	uint64_t r = sluice_clock_resolution_ns(&sluice_clock_cached);
	if (r < 1000)
		cr_skip_test("the cached clock's step is only %llu ns", (unsigned long long)r);
	sluice_warmup_t w;
	sluice_warmup_config_t c = { .rate = 2, .period_ns = r, .warmup_ns = 100 * r,
		                     .clock = &sluice_clock_cached };
	cr_assert_eq(sluice_warmup_init(&w, &c), SLUICE_ERESOLUTION);
	c.rate = 1;
	cr_assert_eq(sluice_warmup_init(&w, &c), 0);
}

/* ---- time bases and forged states (issue 10) ------------------------------ */

/* Acquires (tryAcquire) of 1 at readings t0, t0 + step, ... for @span. */
static uint64_t count_acquires(sluice_warmup_t *w, uint64_t t0, uint64_t span, uint64_t step)
{
	uint64_t got = 0;
	for (uint64_t t = 0; t < span; t += step)
		got += (uint64_t)(sluice_warmup_acquire_at(w, 1, t0 + t, NULL) == 1);
	return got;
}

/* The limiter's time comes from the readings it is given, not from its
 * clock at init: configured with CLOCK_MONOTONIC (or a manual clock near
 * 2^64) and fed `_at` readings from 0, it warms up and runs at its rate.
 * The old code anchored at the init-time reading and held every earlier
 * reading there: one admission, then the ticket never came.  2 per second,
 * P = 4 s: 20 s of readings every 10 ms pass 36 (the stable rate's 40
 * less the cold start), never more than 20 * 2 + L = 48. */
Test(warmup, time_base_is_the_readings_not_the_init_clock)
{
	sluice_warmup_config_t cfg = { .rate = 2, .period_ns = SEC, .warmup_ns = 4 * SEC,
		                       .clock = &sluice_clock_monotonic };
	sluice_warmup_t w;
	cr_assert_eq(sluice_warmup_init(&w, &cfg), 0);
	cr_assert_gt(sluice_clock_monotonic_ns(), 30 * SEC, "uptime above the readings used");
	uint64_t got = count_acquires(&w, 0, 20 * SEC, 10 * MS);
	cr_assert(got >= 30 && got <= 48, "from 0: %llu", (unsigned long long)got);

	sluice_clock_t far;
	sluice_clock_manual_init(&far, UINT64_MAX - 5);
	cfg.clock = &far;
	cr_assert_eq(sluice_warmup_init(&w, &cfg), 0);
	got = count_acquires(&w, 1, 20 * SEC, 10 * MS);
	cr_assert(got >= 30 && got <= 48, "from 1, clock near 2^64: %llu", (unsigned long long)got);

	/* and readings near the top of the time base, then back to 0 */
	cfg.clock = &sluice_clock_monotonic;
	cr_assert_eq(sluice_warmup_init(&w, &cfg), 0);
	uint64_t top = UINT64_MAX - 60 * SEC;
	got = count_acquires(&w, top, 20 * SEC, 10 * MS);
	cr_assert(got >= 30 && got <= 48, "near 2^64: %llu", (unsigned long long)got);
	sluice_decision_t d;
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, 0, &d), 0, "a jump back mints nothing");
	cr_assert_eq(d.now_ns, atomic_load(&w.anchor), "held at the anchor, not wrapped");
	cr_assert_geq(d.now_ns, top - 2 * w.unit_ns);
}

/*
 * States only a stalled writer can leave (its CAS succeeded after the word
 * came back bit for bit under a later anchor): a COLD word announcing an
 * anchor older than the current one, and a HOT word whose tag is two
 * quarters off.  The old snapshot looked again for ever on both, so every
 * call spun (the timeout catches it).  Forged here directly.
 */
Test(warmup, states_left_by_a_stalled_writer_never_spin, .timeout = 20)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	uint64_t t = 1000 * SEC;
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, t, NULL), 1); /* anchors near t */
	uint64_t a = atomic_load(&w.anchor);
	cr_assert_gt(a, SEC);
	sluice_decision_t d;

	/* COLD as of 1 s, long before the anchor: cold now (exact) */
	atomic_store(&w.word, (1ULL << 63) | (SEC >> 1));
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, t, &d), 1, "cold: the first one passes");
	cr_assert(d.reset_ns >= 1375 * MS && d.reset_ns < 1375 * MS + 100,
	          "at the cold price (Guava's R1.38, a few ns up): %llu",
	          (unsigned long long)d.reset_ns);

	/* HOT, ticket 5 s ahead, tag two quarters off: read against the
	 * current anchor and fully cold; the next booking re-tags it */
	uint32_t sh = 33 + w.unit_shift;
	uint64_t tag = (((a >> sh) & 3) + 2) & 3;
	uint64_t next = t + 5 * SEC;
	uint64_t field = ((next >> w.unit_shift) & ((1ULL << 35) - 1)) << 26;
	atomic_store(&w.word, (tag << 61) | field);
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, t, &d), 0, "the ticket is ahead");
	cr_assert_eq(d.retry_after_ns, 5 * SEC);
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, next, &d), 1, "passes when it says");
	cr_assert(d.reset_ns >= 1375 * MS && d.reset_ns < 1375 * MS + 100, "at the cold price");
	cr_assert_eq((atomic_load(&w.word) >> 61) & 3, (atomic_load(&w.anchor) >> sh) & 3,
	             "the booking re-tagged the word");
}

/* available_at at the end of the time base: only the n whose ticket fits
 * (the largest, by the limiter's own refusals), and cancel is refund. */
Test(warmup, available_and_cancel)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0); /* Guava's: L = 8 */
	cr_assert_eq(sluice_warmup_limit(&w), 8);
	cr_assert_eq(sluice_warmup_available_at(&w, 0), 8);
	sluice_decision_t a;
	cr_assert_eq(sluice_warmup_acquire_at(&w, 1, 0, &a), 1);
	cr_assert_eq(sluice_warmup_available_at(&w, 0), 0);
	cr_assert_eq(sluice_warmup_available_at(&w, a.reset_ns - 1), 0);
	cr_assert_eq(sluice_warmup_available_at(&w, a.reset_ns), 8);
	cr_assert_eq(sluice_warmup_cancel(&w, 1, &a), 0);
	cr_assert_eq(sluice_warmup_available_at(&w, 0), 8);
	cr_assert_eq(sluice_warmup_cancel(&w, 1, &a), SLUICE_ECANCEL);
	cr_assert_eq(sluice_warmup_available_at(NULL, 0), 0);

	/* Near 2^64: a cold limiter's cost of n grows with n; available is
	 * the largest n acquire admits there. */
	int seen_partial = 0;
	for (uint64_t back = 1 * SEC; back < 40 * SEC; back += 250 * MS) {
		sluice_warmup_t z;
		make(&z, 2, SEC, 4 * SEC, 0);
		uint64_t t = UINT64_MAX - back;
		uint64_t av = sluice_warmup_available_at(&z, t);
		if (av < sluice_warmup_limit(&z))
			cr_assert_eq(sluice_warmup_acquire_at(&z, av + 1, t, NULL), 0, "back %llu",
			             (unsigned long long)back);
		if (av > 0 && av < sluice_warmup_limit(&z))
			seen_partial = 1;
		if (av > 0)
			cr_assert_eq(sluice_warmup_acquire_at(&z, av, t, NULL), 1, "back %llu",
			             (unsigned long long)back);
	}
	cr_assert(seen_partial, "no reading where only some n fit");
}

/* ---- set_rate ------------------------------------------------------------- */

/* The exact model, booking what sluice booked: resync, then pay. */
static void model_book(struct model *m, long double t, long double n)
{
	if (t > m->next) {
		m->s += (t - m->next) / m->I;
		if (m->s > m->M)
			m->s = m->M;
		m->next = t;
	}
	long double s_after;
	m->next += model_cost(m, n, &s_after);
	m->s = s_after;
}

/* Guava's setRate: the same ticket, the same fraction of M stored. */
static void model_set_rate(struct model *m, long double I)
{
	long double M = m->P / I;
	m->s = m->s * M / m->M;
	m->M = M;
	m->T = M / 2;
	m->I = I;
}

/* Book @n at @t on both; the waits must agree within @tol ns (sluice
 * never earlier).  Returns the time the caller may use the permits. */
static uint64_t book_both(sluice_warmup_t *w, struct model *m, uint64_t t, uint64_t n,
                          long double tol, const char *what)
{
	sluice_decision_t d;
	cr_assert_eq(sluice_warmup_reserve_at(w, n, t, UINT64_MAX, &d), 1, "%s", what);
	long double mwait = m->next > (long double)t ? m->next - (long double)t : 0;
	cr_assert_geq((long double)d.delay_ns + 1, mwait, "%s: sluice early: %llu vs %.0Lf", what,
	              (unsigned long long)d.delay_ns, mwait);
	cr_assert_leq((long double)d.delay_ns, mwait + tol, "%s: sluice late: %llu vs %.0Lf", what,
	              (unsigned long long)d.delay_ns, mwait);
	model_book(m, (long double)t, (long double)n);
	return t + d.delay_ns;
}

/*
 * SET_RATE's rule, against the exact model of Guava's setRate (the ticket
 * kept, stored permits scaled by M'/M): cold, part-warm and warm, raising
 * and lowering, then idling at the new rate.  A version that kept the
 * stored permits' count (not their fraction), or started a new limiter
 * (cold), or moved the ticket to the change's time, fails here by far more
 * than the tolerance (which is the roundings: a unit per change, ns per
 * booking).
 */
Test(warmup, set_rate_keeps_ticket_and_temperature)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	struct model m = { .next = 0, .I = (long double)SEC / 2, .P = 4.0L * SEC };
	m.M = m.P / m.I;
	m.T = m.M / 2;
	m.s = m.M;
	const long double tol = 20 * US;
	char what[64];
	/* cold, raised to 3/s: still fully cold, on the new curve */
	cr_assert_eq(sluice_warmup_set_rate(&w, 3, SEC), 0);
	model_set_rate(&m, (long double)SEC / 3);
	cr_assert_eq(sluice_warmup_limit(&w), 12);
	uint64_t t = 1 * SEC;
	for (int i = 0; i < 4; i++) {
		snprintf(what, sizeof(what), "cold, 3/s, #%d", i);
		t = book_both(&w, &m, t, 1, tol, what);
	}
	/* part-warm (stored permits between T and M), lowered to 1/s */
	cr_assert_gt(m.s, m.T, "the model must still be above the threshold");
	cr_assert_eq(sluice_warmup_set_rate(&w, 1, SEC), 0);
	model_set_rate(&m, (long double)SEC);
	for (int i = 0; i < 3; i++) {
		snprintf(what, sizeof(what), "part-warm, 1/s, #%d", i);
		t = book_both(&w, &m, t, 1, tol, what);
	}
	/* saturate until warm at 1/s, then raise to 10/s: the ticket booked
	 * at 1/s is kept (no earlier start) and the spacing is 10/s at once */
	for (int i = 0; i < 12; i++) {
		snprintf(what, sizeof(what), "warming, 1/s, #%d", i);
		t = book_both(&w, &m, t, 1, tol, what);
	}
	cr_assert_lt(m.s, 1e-9L, "the model must be warm");
	sluice_decision_t d;
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, t, UINT64_MAX, &d), 1);
	model_book(&m, (long double)t, 1);
	t += d.delay_ns;
	cr_assert_eq(sluice_warmup_set_rate(&w, 10, SEC), 0);
	model_set_rate(&m, (long double)SEC / 10);
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, t, 0, NULL), 0, "the 1/s ticket is kept");
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, t + SEC - 2 * w.unit_ns, 0, NULL), 0);
	t += SEC;
	for (int i = 0; i < 5; i++) {
		snprintf(what, sizeof(what), "warm, 10/s, #%d", i);
		uint64_t u = book_both(&w, &m, t, 1, tol, what);
		if (i > 0)
			cr_assert_leq(u - t, 100 * MS + tol, "warm stays warm: %llu ns",
			              (unsigned long long)(u - t));
		t = u;
	}
	/* idle 2 s: it cools at the new rate (half of P: 20 of M = 40) */
	t += 2 * SEC;
	for (int i = 0; i < 4; i++) {
		snprintf(what, sizeof(what), "cooled, 10/s, #%d", i);
		t = book_both(&w, &m, t, 2, tol, what);
	}
}

/* A change moves the ticket: a booking from before it can no longer be
 * given back (its cost was the old set's), one from after it can. */
Test(warmup, set_rate_refuses_refunds_from_before_it)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	sluice_decision_t a, b;
	cr_assert_eq(sluice_warmup_reserve_at(&w, 2, SEC, UINT64_MAX, &a), 1);
	cr_assert_eq(sluice_warmup_set_rate(&w, 4, SEC), 0);
	uint64_t anchor = atomic_load(&w.anchor), word = atomic_load(&w.word);
	cr_assert_eq(sluice_warmup_cancel(&w, 2, &a), SLUICE_ECANCEL);
	cr_assert_eq(atomic_load(&w.anchor), anchor, "ECANCEL changes nothing");
	cr_assert_eq(atomic_load(&w.word), word);
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, 2 * SEC, UINT64_MAX, &b), 1);
	cr_assert_eq(sluice_warmup_cancel(&w, 1, &b), 0, "booked after the change");
	/* back and forth: the era bit returns, the ticket does not */
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, 3 * SEC, UINT64_MAX, &b), 1);
	cr_assert_eq(sluice_warmup_set_rate(&w, 2, SEC), 0);
	cr_assert_eq(sluice_warmup_set_rate(&w, 4, SEC), 0);
	cr_assert_eq(atomic_load(&w.anchor) & 1, anchor & 1, "two flips");
	cr_assert_eq(sluice_warmup_cancel(&w, 1, &b), SLUICE_ECANCEL);
}

/* Bad parameters: init's codes, the grid's bound, and nothing changes. */
Test(warmup, set_rate_invalid)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, SEC, UINT64_MAX, NULL), 1);
	uint64_t anchor = atomic_load(&w.anchor), word = atomic_load(&w.word);
	cr_assert_eq(sluice_warmup_set_rate(NULL, 1, SEC), SLUICE_EINVAL);
	cr_assert_eq(sluice_warmup_set_rate(&w, 0, SEC), SLUICE_ERATE);
	cr_assert_eq(sluice_warmup_set_rate(&w, 2, 1), SLUICE_ERATE); /* I < 1 ns */
	cr_assert_eq(sluice_warmup_set_rate(&w, 1, SLUICE_WARMUP_PERIOD_MAX_NS + 1), SLUICE_ERATE);
	/* M = P / I = 4e6 > 2^20 */
	cr_assert_eq(sluice_warmup_set_rate(&w, 1000000, SEC), SLUICE_EWARMUP);
	/* I = 10 s > P: L I = 10 s > max(P, L I at init) = 4 s */
	cr_assert_eq(sluice_warmup_set_rate(&w, 1, 10 * SEC), SLUICE_ERATE);
	cr_assert_eq(atomic_load(&w.anchor), anchor, "nothing changed");
	cr_assert_eq(atomic_load(&w.word), word);
	uint64_t r, per;
	sluice_warmup_rate(&w, &r, &per);
	cr_assert(r == 2 && per == SEC);
	cr_assert_eq(sluice_warmup_limit(&w), 8);
	/* exactly P: L I = 4 s, accepted (M = 1) */
	cr_assert_eq(sluice_warmup_set_rate(&w, 1, 4 * SEC), 0);
	cr_assert_eq(sluice_warmup_limit(&w), 1);
	sluice_warmup_rate(&w, &r, &per);
	cr_assert(r == 1 && per == 4 * SEC);
	/* built with I > P (1 per 10 s, P = 1 ms): the grid (4 ns) is sized
	 * for L I = 10 s, and 512 units must fit in the new I */
	sluice_warmup_t g;
	make(&g, 1, 10 * SEC, 1 * MS, 0);
	cr_assert_eq(g.unit_ns, 4);
	cr_assert_eq(sluice_warmup_set_rate(&g, 1, 11 * SEC), SLUICE_ERATE, "L I > 10 s");
	cr_assert_eq(sluice_warmup_set_rate(&g, 1, 10 * SEC), 0);
	cr_assert_eq(sluice_warmup_set_rate(&g, 1, 2 * US), SLUICE_ERATE, "4 ns > 2 us / 512");
	cr_assert_eq(sluice_warmup_set_rate(&g, 1, 3 * US), 0, "4 ns <= 3 us / 512");
	cr_assert_eq(sluice_warmup_limit(&g), 333);
	/* a coarse clock refuses an interval below its step, as init */
	if (sluice_clock_resolution_ns(&sluice_clock_coarse) > 1 * MS) {
		sluice_warmup_t c;
		sluice_warmup_config_t cfg = { .rate = 10, .period_ns = SEC, .warmup_ns = 4 * SEC,
			                       .clock = &sluice_clock_coarse };
		cr_assert_eq(sluice_warmup_init(&c, &cfg), 0);
		cr_assert_eq(sluice_warmup_set_rate(&c, 10000, SEC), SLUICE_ERESOLUTION);
	}
}

/* The ticket moves one unit per change: where that would leave the range
 * bookings keep (3 quarters past the anchor), the change is refused. */
Test(warmup, set_rate_ticket_range_is_bounded)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	uint64_t q = w.unit_ns << 33, a = atomic_load(&w.anchor);
	uint64_t next = a + 3 * q - w.unit_ns; /* the last ticket a change may leave */
	uint64_t field = ((next >> w.unit_shift) & ((1ULL << 35) - 1)) << 26;
	uint64_t tag = (a >> (33 + w.unit_shift)) & 3;
	atomic_store(&w.word, (tag << 61) | field); /* white-box: warm, ticket there */
	cr_assert_eq(sluice_warmup_set_rate(&w, 3, SEC), SLUICE_EBUSY);
	cr_assert_eq(atomic_load(&w.word), (tag << 61) | field, "nothing changed");
	cr_assert_eq(sluice_warmup_limit(&w), 8);
	next -= w.unit_ns;
	field = ((next >> w.unit_shift) & ((1ULL << 35) - 1)) << 26;
	atomic_store(&w.word, (tag << 61) | field);
	cr_assert_eq(sluice_warmup_set_rate(&w, 3, SEC), 0);
	cr_assert_eq(sluice_warmup_limit(&w), 12);
}

/*
 * A booking stalled between its snapshot (old parameter set) and its CAS
 * while set_rate runs: its CAS fails and it decides again under the new
 * set, exactly as a booking made after the change.  A set_rate that only
 * swapped the parameters (without the era bit and the converted word in
 * one pair CAS) lets it book with the old set: d.limit 8, the old cost.
 */
struct rate_attack {
	sluice_warmup_t *w;
};

static void attack_set_rate(void *arg)
{
	struct rate_attack *a = arg;
	cr_assert_eq(sluice_warmup_set_rate(a->w, 3, SEC), 0);
}

Test(warmup, set_rate_under_a_stalled_booking)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux (and no ThreadSanitizer)");
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	cr_assert_leq(sizeof(sluice_warmup_t), page);
	sluice_warmup_t *w = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	                          -1, 0);
	cr_assert_neq(w, MAP_FAILED);
	sluice_warmup_t twin;
	make(w, 2, SEC, 4 * SEC, 0);
	make(&twin, 2, SEC, 4 * SEC, 0);
	cr_assert_eq(sluice_warmup_reserve_at(w, 1, SEC, UINT64_MAX, NULL), 1);
	cr_assert_eq(sluice_warmup_reserve_at(&twin, 1, SEC, UINT64_MAX, NULL), 1);
	struct rate_attack a = { w };
	stall_arm(&w->anchor, 16, attack_set_rate, &a);
	sluice_decision_t d, e;
	int rc = sluice_warmup_reserve_at(w, 3, 2 * SEC, UINT64_MAX, &d);
	cr_assert(stall_fired(), "the booking never wrote the state");
	cr_assert_eq(rc, 1);
	cr_assert_eq(sluice_warmup_set_rate(&twin, 3, SEC), 0);
	cr_assert_eq(sluice_warmup_reserve_at(&twin, 3, 2 * SEC, UINT64_MAX, &e), 1);
	cr_assert_eq(d.limit, 12, "decided under the new set");
	cr_assert_eq(d.delay_ns, e.delay_ns);
	cr_assert_eq(d.reset_ns, e.reset_ns, "the new set's cost: %llu vs %llu",
	             (unsigned long long)d.reset_ns, (unsigned long long)e.reset_ns);
	cr_assert_eq(atomic_load(&w->word), atomic_load(&twin.word));
	munmap(w, page);
}

/* The era bit rides along every anchor move: a step (busy across the
 * re-anchoring point) and a jump (idle past it, cold) keep the new set. */
Test(warmup, set_rate_survives_anchor_moves)
{
	sluice_warmup_t w;
	make(&w, 2, SEC, 4 * SEC, 0);
	cr_assert_eq(sluice_warmup_set_rate(&w, 3, SEC), 0);
	sluice_decision_t d;
	uint64_t half = w.unit_ns << 34; /* R/2 */
	/* step: book just before R/2, then at it (the state is live) */
	uint64_t a0 = atomic_load(&w.anchor) & ~1ULL;
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, a0 + half - SEC, UINT64_MAX, &d), 1);
	cr_assert_eq(sluice_warmup_reserve_at(&w, 1, a0 + half, UINT64_MAX, &d), 1);
	uint64_t a1 = atomic_load(&w.anchor);
	cr_assert_eq(a1 & ~1ULL, a0 + (half >> 1), "stepped one quarter");
	cr_assert_eq(a1 & 1, 1, "era kept by the step");
	cr_assert_eq(d.limit, 12);
	/* jump: idle for far more than R (fully cold) */
	uint64_t t = (a1 & ~1ULL) + 4 * half + 12345;
	cr_assert_eq(sluice_warmup_reserve_at(&w, 2, t, UINT64_MAX, &d), 1);
	uint64_t a2 = atomic_load(&w.anchor);
	cr_assert_gt(a2 & ~1ULL, a1, "jumped");
	cr_assert_eq(a2 & 1, 1, "era kept by the jump");
	cr_assert_eq(d.limit, 12);
	cr_assert_eq(sluice_warmup_limit(&w), 12);
}

/*
 * n I, the cost's first term, is ceil(n period / rate): a product when
 * rate is 1, a 64-bit division while n period fits in 64 bits, a 128-bit
 * one beyond (lib/warmup.c, cost_of()).  The same I written two ways (64
 * ns as 1 per 64 ns, and as 2^40 per 2^46 ns; P = 2^26 ns, so M = L =
 * 2^20, the largest) must decide alike, with n period below and above 2^64
 * (n = 2^17: 2^63 ns for the second; 2^19 and 2^20: 2^65, 2^66), and with
 * an I that is not whole (3 per 64 ns: the rounding up).
 */
Test(warmup, cost_is_the_same_whichever_way_the_rate_is_written)
{
	const uint64_t P = 1ULL << 26, start = 5 * SEC;
	sluice_warmup_t a, b;
	make(&a, 1, 64, P, start);
	make(&b, 1ULL << 40, 1ULL << 46, P, start);
	uint64_t ns[] = { 1, 1ULL << 20, 3, 1ULL << 17, 1ULL << 19, 1, 1ULL << 20 };
	uint64_t t = start;
	for (unsigned i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		sluice_decision_t da, db;
		int ra = sluice_warmup_reserve_at(&a, ns[i], t, UINT64_MAX, &da);
		int rb = sluice_warmup_reserve_at(&b, ns[i], t, UINT64_MAX, &db);
		cr_assert_eq(ra, 1, "step %u: %s", i, sluice_err_name(ra));
		cr_assert_eq(rb, ra, "step %u", i);
		cr_assert_eq(db.delay_ns, da.delay_ns, "step %u: delay", i);
		cr_assert_eq(db.reset_ns, da.reset_ns, "step %u: the booked ticket", i);
		t += da.reset_ns / 2;
	}
	/* 3 per 64 ns: I = 21.33 ns, n I rounded up, never down.  Warm it
	 * up first (back-to-back bookings spend the stored permits), so a
	 * booking costs n I alone. */
	sluice_warmup_t c;
	make(&c, 3, 64, 1000, start);
	sluice_decision_t d;
	uint64_t t2 = start;
	for (int i = 0; i < 200; i++) {
		cr_assert_eq(sluice_warmup_reserve_at(&c, 1, t2, 0, &d), 1);
		t2 += d.reset_ns; /* at the ticket: no idle, nothing stored */
	}
	cr_assert_eq(d.reset_ns, 22, "warm: I = 21.33 ns, rounded up to 22");
	cr_assert_eq(sluice_warmup_reserve_at(&c, 3, t2, 0, &d), 1);
	cr_assert_eq(d.reset_ns, 64, "3 I = 64 ns exactly");
}
