/* SPDX-License-Identifier: MIT */
/*
 * test_leaky.c - leaky bucket meter and shaper, single thread, manual clock.
 *
 * Meter: a reference model of nginx's limit_req (burst=D nodelay), written
 * the way nginx computes it (excess = max(excess - elapsed/T + 1, 0), refuse
 * when excess > D, nothing changes on a refusal) but in exact ns, must make
 * the same decision as the meter at every step of long random schedules,
 * from 10 to 1,000,000 requests per second; and the excess the meter
 * implies (reset_ns - T) must equal nginx's.  A second model computes like
 * nginx really does, in whole milliseconds: it shows what breaks above
 * 1,000/s, where the meter must not.
 * Shaper: every admitted request's delay must equal the model's
 * (slot = max(previous slot + T, t)), slots FIFO and T apart, and a request
 * whose delay would pass max_delay_ns refused without booking.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/error.h"
#include "sluice/leaky.h"

#include "test_pace.h"
#include "recorder.h"
#include "test_rng.h"

#define US 1000ULL
#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(leaky, .timeout = 60);

static sluice_clock_t mclock;

static void make(sluice_leaky_t *l, uint64_t rate, sluice_leaky_mode_t mode, uint64_t depth,
                 uint64_t max_delay)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_leaky_config_t cfg = { .rate = rate, .period_ns = SEC, .mode = mode, .depth = depth,
		                      .max_delay_ns = max_delay, .clock = &mclock };
	int rc = sluice_leaky_init(l, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
}


/* ---- nginx limit_req, nodelay, in exact ns ------------------------------ */

struct nginx {
	int fresh;       /* no node yet for this key */
	uint64_t excess; /* ns: excess requests * T */
	uint64_t last;
	uint64_t T, depth;
};

/* ngx_http_limit_req_lookup(), with excess kept in ns instead of 1/1000
 * requests and the elapsed time in ns instead of ms. */
static int nginx_request(struct nginx *m, uint64_t now)
{
	if (m->fresh) {
		m->fresh = 0;
		m->excess = 0;
		m->last = now;
		return 1;
	}
	uint64_t elapsed = now - m->last; /* schedules here never go back */
	/* excess = lr->excess - rate * elapsed + 1 request; clamp at 0 */
	uint64_t excess = m->excess + m->T > elapsed ? m->excess + m->T - elapsed : 0;
	if (excess > m->depth * m->T)
		return 0; /* NGX_BUSY: nothing updated */
	m->excess = excess;
	m->last = now;
	return 1;
}

struct meter_case {
	uint64_t rate, depth, seed;
};

ParameterizedTestParameters(leaky, meter_matches_nginx)
{
	static struct meter_case params[] = {
		{ 10, 5, 1 },        { 1000, 0, 2 },       { 1000, 20, 3 },
		{ 50000, 10, 4 },    { 1000000, 100, 5 },  { 1000000, 0, 6 },
		{ 3, 2, 7 },         /* T not whole: 333,333,334 ns */
		{ 7000000, 3, 8 },   /* T = 143 ns (142.857..) */
	};
	return cr_make_param_array(struct meter_case, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct meter_case *p, leaky, meter_matches_nginx)
{
	sluice_leaky_t l;
	make(&l, p->rate, SLUICE_LEAKY_METER, p->depth, 0);
	uint64_t T = sluice_leaky_interval_ns(&l);
	struct nginx m = { .fresh = 1, .T = T, .depth = p->depth };
	rng_state = p->seed * 0x9E3779B97F4A7C15ULL + 1;
	uint64_t t = 5 * SEC, admitted = 0, refused = 0;
	for (int i = 0; i < 100000; i++) {
		uint64_t r = rnd();
		/* mostly faster than the drain, sometimes a pause */
		t += r % 64 == 0 ? (r >> 8) % (4 * (p->depth + 1) * T) : (r >> 8) % (T / 2 + 1);
		int want = nginx_request(&m, t);
		sluice_decision_t d;
		int got = sluice_leaky_acquire_at(&l, 1, t, &d);
		cr_assert_eq(got, want, "step %d t=%llu: meter %d, nginx %d", i,
		             (unsigned long long)t, got, want);
		cr_assert_eq(d.limit, p->depth + 1);
		cr_assert_eq(d.now_ns, t);
		if (got) {
			cr_assert_eq(d.reset_ns - T, m.excess, "step %d: excess %llu, nginx %llu", i,
			             (unsigned long long)(d.reset_ns - T),
			             (unsigned long long)m.excess);
			cr_assert_eq(d.retry_after_ns, 0);
			cr_assert_eq(d.remaining, (p->depth * T - m.excess) / T);
			admitted++;
		} else {
			/* the exact wait: admitted then, not 1 ns before */
			sluice_leaky_t probe = l; /* single thread: a snapshot */
			cr_assert_eq(sluice_leaky_acquire_at(&probe, 1, t + d.retry_after_ns - 1, NULL), 0);
			cr_assert_eq(sluice_leaky_acquire_at(&probe, 1, t + d.retry_after_ns, NULL), 1);
			refused++;
		}
	}
	cr_assert_gt(admitted, 1000);
	cr_assert_gt(refused, 1000);
}

/* ---- what millisecond arithmetic does above 1,000/s --------------------- */

/* nginx as written: time in ms, excess in 1/1000 request, rate in 1/1000
 * request per second; burst D nodelay. */
struct nginx_ms {
	int fresh;
	int64_t excess;
	uint64_t last_ms;
	uint64_t rate, burst;
};

static int nginx_ms_request(struct nginx_ms *m, uint64_t now_ns)
{
	uint64_t now = now_ns / MS;
	if (m->fresh) {
		m->fresh = 0;
		m->excess = 0;
		m->last_ms = now;
		return 1;
	}
	int64_t ms = (int64_t)(now - m->last_ms);
	int64_t excess = m->excess - (int64_t)(m->rate * (uint64_t)ms / 1000) + 1000;
	if (excess < 0)
		excess = 0;
	if ((uint64_t)excess > m->burst)
		return 0;
	m->excess = excess;
	m->last_ms = now;
	return 1;
}

Test(leaky, nanoseconds_stay_exact_above_1000_per_second)
{
	/* one request every microsecond for 10 ms, no burst allowance */
	struct {
		uint64_t rate, want_ns, want_ms;
	} c[] = {
		{ 1000, 10, 10 },          /* both fine at 1,000/s */
		{ 50000, 500, 10 },        /* ms arithmetic: 1 per ms, not 50 */
		{ 1000000, 10000, 10 },    /* 1 us apart: every request */
	};
	for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		sluice_leaky_t l;
		make(&l, c[k].rate, SLUICE_LEAKY_METER, 0, 0);
		struct nginx_ms m = { .fresh = 1, .rate = c[k].rate * 1000, .burst = 0 };
		uint64_t ns = 0, ms = 0;
		for (uint64_t t = SEC; t < SEC + 10 * MS; t += US) {
			ns += (uint64_t)sluice_leaky_acquire_at(&l, 1, t, NULL);
			ms += (uint64_t)nginx_ms_request(&m, t);
		}
		cr_assert_eq(ns, c[k].want_ns, "%llu/s: meter admitted %llu in 10 ms",
		             (unsigned long long)c[k].rate, (unsigned long long)ns);
		cr_assert_eq(ms, c[k].want_ms, "%llu/s: the ms model admitted %llu",
		             (unsigned long long)c[k].rate, (unsigned long long)ms);
	}
	/* and the spacing is exact: at 1,000,000/s, 999 ns apart is refused */
	sluice_leaky_t l;
	make(&l, 1000000, SLUICE_LEAKY_METER, 0, 0);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, SEC, NULL), 1);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, SEC + 999, NULL), 0);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, SEC + 1000, NULL), 1);
	/* 50,000/s: 20,000 ns */
	make(&l, 50000, SLUICE_LEAKY_METER, 0, 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, SEC, NULL), 1);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, SEC + 5 * US, &d), 0);
	cr_assert_eq(d.retry_after_ns, 15 * US);
}

Test(leaky, meter_burst_then_drain)
{
	sluice_leaky_t l;
	make(&l, 1000000, SLUICE_LEAKY_METER, 9, 0); /* D = 9: 10 at once */
	sluice_decision_t d;
	for (int i = 0; i < 10; i++) {
		cr_assert_eq(sluice_leaky_acquire_at(&l, 1, SEC, &d), 1, "request %d", i);
		cr_assert_eq(d.remaining, (uint64_t)(9 - i));
	}
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, SEC, &d), 0, "the 11th: bucket full");
	cr_assert_eq(d.retry_after_ns, US);
	cr_assert_eq(d.reset_ns, 10 * US, "empty again in 10 us");
	/* then one per microsecond */
	for (uint64_t k = 1; k <= 100; k++) {
		cr_assert_eq(sluice_leaky_acquire_at(&l, 1, SEC + k * US, NULL), 1);
		cr_assert_eq(sluice_leaky_acquire_at(&l, 1, SEC + k * US, NULL), 0);
	}
	/* n > 1 pours n */
	make(&l, 1000, SLUICE_LEAKY_METER, 4, 0);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 3, SEC, NULL), 1);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 3, SEC, &d), 0);
	cr_assert_eq(d.retry_after_ns, MS);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 6, SEC, &d), SLUICE_ETOOBIG);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 0, SEC, &d), SLUICE_EINVAL);
	/* a meter's reserve is acquire: delay 0 or refused */
	cr_assert_eq(sluice_leaky_reserve_at(&l, 2, SEC, UINT64_MAX, &d), 1);
	cr_assert_eq(d.delay_ns, 0);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, SEC, UINT64_MAX, &d), 0);
	/* the plain variants read the clock */
	sluice_clock_manual_set(&mclock, 2 * SEC);
	cr_assert_eq(sluice_leaky_acquire(&l, 5, &d), 1);
	cr_assert_eq(d.now_ns, 2 * SEC);
	cr_assert_eq(sluice_leaky_reserve(&l, 1, UINT64_MAX, &d), 0);
}

/* ---- shaper --------------------------------------------------------------- */

struct shaper_case {
	uint64_t rate, max_delay, seed;
	int backwards; /* readings may go back */
};

ParameterizedTestParameters(leaky, shaper_delays_match_model)
{
	static struct shaper_case params[] = {
		{ 10, 2 * SEC, 1, 0 },
		{ 50000, 200 * US, 2, 0 },      /* 10 queued at most */
		{ 1000000, 50 * US, 3, 0 },     /* 50 queued at most */
		{ 1000000, 0, 4, 0 },           /* no queue: go now or refuse */
		{ 50000, 1 * MS, 5, 1 },
		{ 3, 5 * SEC, 6, 1 },
	};
	return cr_make_param_array(struct shaper_case, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct shaper_case *p, leaky, shaper_delays_match_model)
{
	sluice_leaky_t l;
	make(&l, p->rate, SLUICE_LEAKY_SHAPER, 0, p->max_delay);
	uint64_t T = sluice_leaky_interval_ns(&l);
	rng_state = p->seed * 0x9E3779B97F4A7C15ULL + 7;
	const int steps = 100000;
	uint64_t *slots = malloc(sizeof(uint64_t) * steps);
	cr_assert_not_null(slots);
	size_t nslots = 0;
	uint64_t next = 0; /* the model: the earliest free slot */
	uint64_t t = 10 * SEC, admitted = 0, refused = 0, delayed = 0;
	for (int i = 0; i < steps; i++) {
		uint64_t r = rnd();
		if (p->backwards && r % 128 == 0)
			t -= (r >> 8) % (20 * T + p->max_delay); /* back, by up to 20 slots + the queue */
		else
			t += r % 32 == 0 ? (r >> 8) % (8 * T + p->max_delay) : (r >> 8) % (T + 1);
		uint64_t slot = next > t ? next : t;
		int want = slot - t <= p->max_delay;
		sluice_decision_t d;
		int got = sluice_leaky_reserve_at(&l, 1, t, UINT64_MAX, &d);
		cr_assert_eq(got, want, "step %d t=%llu: shaper %d, model %d", i,
		             (unsigned long long)t, got, want);
		cr_assert_eq(d.limit, 1);
		if (got) {
			cr_assert_eq(d.delay_ns, slot - t, "step %d: delay %llu, model %llu", i,
			             (unsigned long long)d.delay_ns,
			             (unsigned long long)(slot - t));
			cr_assert(d.allowed);
			next = slot + T;
			slots[nslots++] = slot;
			admitted++;
			delayed += slot > t;
		} else {
			cr_assert_eq(d.retry_after_ns, slot - t - p->max_delay,
			             "step %d: how much later it would fit", i);
			refused++;
		}
		cr_assert_eq(d.reset_ns, next > t ? next - t : 0, "step %d: queue drains", i);
	}
	/* FIFO, T apart: slots in booking order are strictly increasing by T */
	for (size_t k = 1; k < nslots; k++)
		cr_assert_geq(slots[k], slots[k - 1] + T, "slot %zu", k);
	cr_log_info("rate=%llu max_delay=%llu: admitted %llu refused %llu delayed %llu",
	            (unsigned long long)p->rate, (unsigned long long)p->max_delay,
	            (unsigned long long)admitted, (unsigned long long)refused,
	            (unsigned long long)delayed);
	cr_assert_gt(admitted, 1000);
	cr_assert_gt(refused, 1000);
	if (p->max_delay >= T)
		cr_assert_gt(delayed, 1000, "the queue must be used");
	free(slots);
}

Test(leaky, shaper_fifo_and_max_queue)
{
	sluice_leaky_t l;
	make(&l, 1000000, SLUICE_LEAKY_SHAPER, 0, 5 * US); /* 1 us apart, 5 us queue */
	sluice_decision_t d;
	for (uint64_t k = 0; k <= 5; k++) {
		cr_assert_eq(sluice_leaky_reserve_at(&l, 1, SEC, UINT64_MAX, &d), 1, "request %llu",
		             (unsigned long long)k);
		cr_assert_eq(d.delay_ns, k * US, "FIFO, 1 us apart");
		cr_assert_eq(d.remaining, 0, "nothing more goes at once");
	}
	/* the 7th would wait 6 us: refused, nothing booked */
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, SEC, UINT64_MAX, &d), 0);
	cr_assert_not(d.allowed);
	cr_assert_eq(d.retry_after_ns, US, "fits the queue 1 us later");
	cr_assert_eq(d.reset_ns, 6 * US);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, SEC + US, UINT64_MAX, &d), 1);
	cr_assert_eq(d.delay_ns, 5 * US);
	/* acquire on a shaper: only when nothing is queued (never jumps it) */
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, SEC + 6 * US, &d), 0);
	cr_assert_eq(d.retry_after_ns, US);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, SEC + 7 * US, &d), 1);
	cr_assert_eq(d.retry_after_ns, 0);
	/* an idle shaper lets one go at once, and holds 1 */
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, 2 * SEC, UINT64_MAX, &d), 1);
	cr_assert_eq(d.delay_ns, 0);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 2, 2 * SEC, UINT64_MAX, &d), SLUICE_ETOOBIG, "one per slot");
	/* a queued request that will not go is given back while last */
	sluice_decision_t a, b;
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, 3 * SEC, UINT64_MAX, &a), 1);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, 3 * SEC, UINT64_MAX, &a), 1);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, 3 * SEC, UINT64_MAX, &b), 1);
	cr_assert_eq(b.delay_ns, 2 * US);
	cr_assert_eq(sluice_leaky_refund(&l, 1, &a), SLUICE_ECANCEL, "b queued after it");
	cr_assert_eq(sluice_leaky_refund(&l, 1, &b), 0);
	cr_assert_eq(sluice_leaky_refund(&l, 1, &a), 0, "now it is the last");
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, 3 * SEC, UINT64_MAX, &d), 1);
	cr_assert_eq(d.delay_ns, US, "its slot is free again");
	/* a caller that waits at most 1.5 us: the 3rd slot (2 us) is refused
	 * and not booked; no caller queues past the configured 5 us */
	make(&l, 1000000, SLUICE_LEAKY_SHAPER, 0, 5 * US);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, SEC, 1500, &d), 1);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, SEC, 1500, &d), 1);
	cr_assert_eq(d.delay_ns, US);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, SEC, 1500, &d), 0);
	cr_assert_eq(d.retry_after_ns, 500, "2 us - 1.5 us");
	for (int k = 0; k < 4; k++)
		cr_assert_eq(sluice_leaky_reserve_at(&l, 1, SEC, UINT64_MAX, &d), 1);
	cr_assert_eq(d.delay_ns, 5 * US);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, SEC, UINT64_MAX, &d), 0, "queue is 5 us");
	cr_assert_eq(d.retry_after_ns, US);
	/* on a meter it is acquire */
	make(&l, 1000000, SLUICE_LEAKY_METER, 1, 0);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 2, SEC, SEC, &d), 1);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, SEC, SEC, &d), 0);
	cr_assert_eq(d.retry_after_ns, US);
	cr_assert_eq(sluice_leaky_refund(NULL, 1, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_leaky_refund(&l, 0, &d), SLUICE_EINVAL);
}

struct bad_cfg {
	uint64_t rate, period;
	int mode;
	uint64_t depth, max_delay;
	int clock; /* 0 manual, 1 bogus kind */
	int want;
};

ParameterizedTestParameters(leaky, invalid_config)
{
	static struct bad_cfg params[] = {
		{ 0, SEC, SLUICE_LEAKY_METER, 0, 0, 0, SLUICE_ERATE },
		{ 10, 9, SLUICE_LEAKY_METER, 0, 0, 0, SLUICE_ERATE },
		{ 3000000, SEC, SLUICE_LEAKY_SHAPER, 0, MS, 0, SLUICE_ERATE }, /* rounding 0.2% */
		{ 10, SEC, 7, 0, 0, 0, SLUICE_EMODE },
		{ 10, SEC, SLUICE_LEAKY_METER, 0, MS, 0, SLUICE_EDELAY },    /* a meter never queues */
		{ 10, SEC, SLUICE_LEAKY_SHAPER, 3, MS, 0, SLUICE_EBURST },   /* queue is a time */
		{ 10, SEC, SLUICE_LEAKY_SHAPER, 0, SLUICE_GCRA_SPAN_MAX + 1, 0, SLUICE_EDELAY },
		{ 10, SEC, SLUICE_LEAKY_METER, UINT64_MAX, 0, 0, SLUICE_EBURST }, /* D + 1 wraps */
		{ 1, SEC, SLUICE_LEAKY_METER, SLUICE_GCRA_SPAN_MAX / SEC, 0, 0, SLUICE_EBURST },
		{ 10, SEC, SLUICE_LEAKY_METER, 0, 0, 1, SLUICE_ECLOCK },
		{ 10, SEC, SLUICE_LEAKY_SHAPER, 0, 0, 1, SLUICE_ECLOCK },
		{ 1, 1, SLUICE_LEAKY_METER, 0, 0, 0, 0 },                     /* smallest */
		{ 1, SEC, SLUICE_LEAKY_METER, SLUICE_GCRA_SPAN_MAX / SEC - 1, 0, 0, 0 },
		{ 1, 1, SLUICE_LEAKY_SHAPER, 0, SLUICE_GCRA_SPAN_MAX, 0, 0 }, /* longest queue */
		{ 1000000, SEC, SLUICE_LEAKY_SHAPER, 0, 0, 0, 0 },            /* no queue */
	};
	return cr_make_param_array(struct bad_cfg, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct bad_cfg *p, leaky, invalid_config)
{
	sluice_clock_t m, bogus;
	sluice_clock_manual_init(&m, 0);
	memset(&bogus, 0, sizeof(bogus));
	bogus.kind = (sluice_clock_kind_t)7;
	sluice_leaky_config_t cfg = { .rate = p->rate, .period_ns = p->period,
		                      .mode = (sluice_leaky_mode_t)p->mode, .depth = p->depth,
		                      .max_delay_ns = p->max_delay,
		                      .clock = p->clock ? &bogus : &m };
	sluice_leaky_t l, before;
	memset(&l, 0xab, sizeof(l));
	memcpy(&before, &l, sizeof(l));
	int rc = sluice_leaky_init(&l, &cfg);
	cr_assert_eq(rc, p->want, "got %s (%s), want %s", sluice_err_name(rc), sluice_strerror(rc),
	             sluice_err_name(p->want));
	if (rc == 0) {
		cr_assert_eq(l.mode, (sluice_leaky_mode_t)p->mode);
		cr_assert_eq(sluice_leaky_acquire_at(&l, 1, 0, NULL), 1);
		sluice_leaky_destroy(&l);
	} else {
		cr_assert_eq(memcmp(&l, &before, sizeof(l)), 0, "a failed init must not touch it");
	}
}

Test(leaky, null_arguments_and_size)
{
	sluice_leaky_t l;
	sluice_leaky_config_t cfg = { .rate = 1, .period_ns = SEC };
	cr_assert_eq(sluice_leaky_init(NULL, &cfg), SLUICE_EINVAL);
	cr_assert_eq(sluice_leaky_init(&l, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_leaky_init(&l, &cfg), 0);
	cr_assert_eq(l.gcra.clock, &sluice_clock_cached);
	sluice_leaky_destroy(NULL);
	sluice_leaky_destroy(&l);
	cr_assert_eq(sluice_leaky_size(), sizeof(sluice_leaky_t));
	cr_assert_eq(sizeof(sluice_leaky_t), 384, "as leaky.h's MEMORY says");
}

/* The meter admits now, so it must hold one clock step (gcra.h).  So must
 * the shaper's interval: on a coarser clock its acquire passes at most one
 * request per reading, and its pace delays come from readings up to a step
 * old.  The old code exempted the shaper and delivered a quarter of 1000/s
 * on the 4 ms coarse clock with no error; both clocks, both modes, each
 * side of the step. */
Test(leaky, meter_and_shaper_below_clock_resolution)
{
	const sluice_clock_t *clocks[] = { &sluice_clock_cached, &sluice_clock_coarse };
	for (size_t i = 0; i < 2; i++) {
		uint64_t r = sluice_clock_resolution_ns(clocks[i]);
		if (r < 1000)
			cr_skip_test("clock %zu's step is only %llu ns", i, (unsigned long long)r);
		sluice_leaky_t l, before;
		memset(&l, 0x6b, sizeof(l));
		memcpy(&before, &l, sizeof(l));
		sluice_leaky_config_t m = { .rate = 1, .period_ns = r / 4,
			                    .mode = SLUICE_LEAKY_METER, .depth = 2,
			                    .clock = clocks[i] };
		cr_assert_eq(sluice_leaky_init(&l, &m), SLUICE_ERESOLUTION);
		cr_assert_eq(memcmp(&l, &before, sizeof(l)), 0, "a failed init touched it");
		m.depth = 3;
		cr_assert_eq(sluice_leaky_init(&l, &m), 0);
		sluice_leaky_config_t s = { .rate = 1, .period_ns = r - 1,
			                    .mode = SLUICE_LEAKY_SHAPER, .max_delay_ns = r,
			                    .clock = clocks[i] };
		memcpy(&l, &before, sizeof(l));
		cr_assert_eq(sluice_leaky_init(&l, &s), SLUICE_ERESOLUTION, "clock %zu", i);
		cr_assert_eq(memcmp(&l, &before, sizeof(l)), 0, "a failed init touched it");
		s.rate = 1000;
		s.period_ns = 1000 * r / 4; /* T = a quarter step */
		cr_assert_eq(sluice_leaky_init(&l, &s), SLUICE_ERESOLUTION, "clock %zu", i);
		s.rate = 1;
		s.period_ns = r; /* T = one step */
		cr_assert_eq(sluice_leaky_init(&l, &s), 0, "clock %zu", i);
	}
}

/* Why a shaper's acquire needs T >= the step: with readings 4 ms apart and
 * T = 1 ms its queue is empty at most once per reading, so it admits one
 * request per reading, a quarter of its rate (manual clock, stepped). */
Test(leaky, shaper_acquire_passes_one_per_reading)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 0);
	sluice_leaky_config_t s = { .rate = 1000, .period_ns = SEC, .mode = SLUICE_LEAKY_SHAPER,
		                    .max_delay_ns = SEC, .clock = &m };
	sluice_leaky_t l;
	cr_assert_eq(sluice_leaky_init(&l, &s), 0);
	uint64_t got = 0;
	for (uint64_t t = 0; t < SEC; t += 4 * MS)
		while (sluice_leaky_acquire_at(&l, 1, t, NULL) == 1)
			got++;
	cr_assert_eq(got, 250, "one per 4 ms reading");
}

/* ---- available, cancel, set_rate / set_burst ------------------------------ */

/*
 * available_at against nginx's model: the largest k such that k requests at
 * `now` would all pass limit_req (the first leaves excess_1 =
 * max(excess + T - elapsed, 0), each further one adds T, each must stay at
 * or below D T).  Checked at every step of a random schedule, and then
 * proven largest on the meter itself: k + 1 at once is refused, k admitted.
 */
static uint64_t nginx_room(const struct nginx *m, uint64_t now)
{
	if (m->fresh)
		return m->depth + 1;
	uint64_t elapsed = now - m->last;
	uint64_t e1 = m->excess + m->T > elapsed ? m->excess + m->T - elapsed : 0;
	if (e1 > m->depth * m->T)
		return 0;
	return (m->depth * m->T - e1) / m->T + 1;
}

Test(leaky, meter_available_matches_nginx)
{
	uint64_t rates[] = { 10, 1000, 50000 };
	for (unsigned r = 0; r < 3; r++) {
		sluice_leaky_t l;
		make(&l, rates[r], SLUICE_LEAKY_METER, 5, 0);
		struct nginx m = { .fresh = 1, .T = SEC / rates[r], .depth = 5 };
		uint64_t now = 0;
		rng_state = 42 + r;
		for (int i = 0; i < 20000; i++) {
			now += rnd() % (3 * m.T);
			uint64_t k = nginx_room(&m, now);
			cr_assert_eq(sluice_leaky_available_at(&l, now), k, "rate %llu step %d",
			             (unsigned long long)rates[r], i);
			if (i % 7 == 0 && k > 0) {
				sluice_decision_t d;
				cr_assert_eq(sluice_leaky_acquire_at(&l, k + 1, now, &d), k + 1 > 6 ? SLUICE_ETOOBIG : 0);
				cr_assert_eq(sluice_leaky_acquire_at(&l, k, now, &d), 1);
				for (uint64_t j = 0; j < k; j++)
					cr_assert(nginx_request(&m, now));
				cr_assert_eq(sluice_leaky_available_at(&l, now), 0);
			} else {
				int want = nginx_request(&m, now);
				cr_assert_eq(sluice_leaky_acquire_at(&l, 1, now, NULL), want);
			}
		}
	}
}

Test(leaky, shaper_available_is_an_empty_queue)
{
	sluice_leaky_t l;
	make(&l, 10, SLUICE_LEAKY_SHAPER, 0, SEC);
	cr_assert_eq(sluice_leaky_available_at(&l, 0), 1);
	sluice_decision_t d;
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, 0, UINT64_MAX, &d), 1);
	cr_assert_eq(sluice_leaky_available_at(&l, 0), 0);
	cr_assert_eq(sluice_leaky_available_at(&l, 100 * MS - 1), 0);
	cr_assert_eq(sluice_leaky_available_at(&l, 100 * MS), 1);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, 100 * MS - 1, NULL), 0);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, 100 * MS, NULL), 1);
}

Test(leaky, cancel_gives_back_the_latest_slot_only)
{
	sluice_leaky_t l;
	make(&l, 10, SLUICE_LEAKY_SHAPER, 0, SEC);
	sluice_decision_t a, b, c;
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, 0, UINT64_MAX, &a), 1);
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, 0, UINT64_MAX, &b), 1);
	cr_assert_eq(b.delay_ns, 100 * MS);
	cr_assert_eq(sluice_leaky_cancel(&l, 1, &a), SLUICE_ECANCEL); /* b queued after it */
	cr_assert_eq(sluice_leaky_cancel(&l, 1, &b), 0);
	cr_assert_eq(sluice_leaky_cancel(&l, 1, &b), SLUICE_ECANCEL); /* already given back */
	/* b's slot is free again: the next booking gets exactly it */
	cr_assert_eq(sluice_leaky_reserve_at(&l, 1, 0, UINT64_MAX, &c), 1);
	cr_assert_eq(c.delay_ns, 100 * MS);
	cr_assert_eq(sluice_leaky_cancel(NULL, 1, &c), SLUICE_EINVAL);
	cr_assert_eq(sluice_leaky_cancel(&l, 0, &c), SLUICE_EINVAL);
}

Test(leaky, set_rate_keeps_the_level)
{
	/* Meter, D = 4, 10/s: emptied at t = 0 (5 taken), the bucket is
	 * empty until 500 ms.  Raised to 100/s at t = 0: nothing minted, the
	 * level (TAT) is kept, so the room comes back only as the old level
	 * drains: 0 now, all of D + 1 at 500 ms (+ the 1 ns a change moves
	 * the TAT when it keeps it). */
	sluice_leaky_t l;
	make(&l, 10, SLUICE_LEAKY_METER, 4, 0);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 5, 0, NULL), 1);
	cr_assert_eq(sluice_leaky_set_rate_at(&l, 100, SEC, 0), 0);
	cr_assert_eq(sluice_leaky_interval_ns(&l), 10 * MS);
	cr_assert_eq(sluice_leaky_available_at(&l, 0), 0);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, 0, NULL), 0);
	cr_assert_eq(sluice_leaky_available_at(&l, 500 * MS + 1), 5);
	/* Lowered to 1/s: the 5 of room held stay, then 1 per second. */
	cr_assert_eq(sluice_leaky_set_rate_at(&l, 1, SEC, SEC), 0);
	cr_assert_eq(sluice_leaky_available_at(&l, SEC), 5);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 5, SEC, NULL), 1);
	cr_assert_eq(sluice_leaky_available_at(&l, 2 * SEC - 1), 0);
	cr_assert_eq(sluice_leaky_available_at(&l, 2 * SEC), 1);
	cr_assert_eq(sluice_leaky_set_rate(&l, 0, SEC), SLUICE_ERATE);
	cr_assert_eq(sluice_leaky_set_rate(NULL, 1, SEC), SLUICE_EINVAL);
}

Test(leaky, set_burst_is_the_meters_depth)
{
	sluice_leaky_t l;
	make(&l, 10, SLUICE_LEAKY_METER, 4, 0);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 2, 0, NULL), 1); /* 3 of room left */
	/* Deeper: the 3 held stay (no fresh room), the bucket then fills to
	 * D + 1 = 10 at the rate. */
	cr_assert_eq(sluice_leaky_set_burst_at(&l, 9, 0), 0);
	cr_assert_eq(sluice_leaky_available_at(&l, 0), 3);
	cr_assert_eq(sluice_leaky_available_at(&l, SEC), 10);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 10, SEC, NULL), 1);
	/* Shallower: at most the new D + 1. */
	cr_assert_eq(sluice_leaky_set_burst_at(&l, 1, 10 * SEC), 0);
	cr_assert_eq(sluice_leaky_available_at(&l, 11 * SEC), 2);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 3, 11 * SEC, NULL), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_leaky_set_burst(&l, UINT64_MAX), SLUICE_EBURST);
	sluice_leaky_t s;
	make(&s, 10, SLUICE_LEAKY_SHAPER, 0, SEC);
	cr_assert_eq(sluice_leaky_set_burst(&s, 3), SLUICE_ENOTSUP);
	cr_assert_eq(sluice_leaky_set_rate_at(&s, 20, SEC, 0), 0);
	cr_assert_eq(sluice_leaky_interval_ns(&s), 50 * MS);
}

/* ---- set_rate / set_burst under load -------------------------------------- */

/*
 * Three deciders hammer one meter while the clock thread moves the manual
 * clock (forward, and now and then back) and every 64 steps switches the
 * drain between T = 1000 and 2500 ns and the depth between 5 and 3.  The
 * header's bound across changes (GCRA's, leaky.h GUARANTEE): any interval
 * [x, x + t] holds at most max(D + 1) + t / min(T) admissions.  Checked
 * exactly over every interval of the sorted record: with S the prefix
 * sums, [t_i, t_j] holds S_j - S_(i-1), and the bound is
 * (S_j T - t_j) - (S_(i-1) T - t_i) <= b T: one pass with a running minimum.
 */
#define L_TA 1000ULL
#define L_TB 2500ULL
#define L_DA 5u
#define L_DB 3u
#define L_STEPS 12000
#define L_REC (1u << 17)

struct lrec {
	uint64_t t, n;
};

struct ldecider {
	pthread_t tid;
	sluice_leaky_t *l;
	struct lrec *rec;
	size_t nrec;
	uint64_t seed, refused;
	_Atomic uint64_t decisions;
};

static struct ldecider *ldeciders;
static int nldeciders;
static _Atomic int lrunning;
static uint64_t lchanges;

static void *ldecider_main(void *arg)
{
	struct ldecider *me = arg;
	uint64_t v = me->seed;
	while (atomic_load_explicit(&lrunning, memory_order_relaxed)) {
		v ^= v << 13, v ^= v >> 7, v ^= v << 17;
		uint64_t n = 1 + v % 2;
		sluice_decision_t d;
		int rc = sluice_leaky_acquire(me->l, n, &d);
		if (rc == 1 && me->nrec < L_REC)
			me->rec[me->nrec++] = (struct lrec){ d.now_ns, n };
		else if (rc != 1)
			me->refused++;
		uint64_t k = atomic_load_explicit(&me->decisions, memory_order_relaxed) + 1;
		atomic_store_explicit(&me->decisions, k, memory_order_relaxed);
		if (k % 8 == 0)
			sched_yield();
	}
	return NULL;
}

static void *lclock_main(void *arg)
{
	sluice_leaky_t *l = arg;
	uint64_t v = 5;
	lchanges = 0;
	for (int i = 0; i < L_STEPS; i++) {
		v ^= v << 13, v ^= v >> 7, v ^= v << 17;
		if (i % 64 == 63) {
			int second = (i / 64) % 2;
			int rc = (i / 128) % 2 ? sluice_leaky_set_rate(l, 1, second ? L_TB : L_TA)
			                       : sluice_leaky_set_burst(l, second ? L_DB : L_DA);
			cr_assert_eq(rc, 0, "change %d: %s", i, sluice_err_name(rc));
			lchanges++;
		}
		uint64_t now = sluice_clock_now(&mclock);
		if (v % 40 == 0 && now > 5000)
			sluice_clock_manual_set(&mclock, now - v % 5000); /* stale readings */
		else if (v % 97 == 0)
			sluice_clock_manual_advance(&mclock, 20000); /* a full bucket */
		else
			sluice_clock_manual_advance(&mclock, v % 700);
		PACE_WAIT(ldeciders, nldeciders);
	}
	atomic_store_explicit(&lrunning, 0, memory_order_relaxed);
	return NULL;
}

static int lrec_by_time(const void *a, const void *b)
{
	const struct lrec *p = a, *q = b;
	return p->t < q->t ? -1 : p->t > q->t;
}

Test(leaky, set_rate_and_depth_under_load_keep_the_bound)
{
	sluice_leaky_t l;
	sluice_clock_manual_init(&mclock, 1000000);
	sluice_leaky_config_t cfg = { .rate = 1, .period_ns = L_TA, .mode = SLUICE_LEAKY_METER,
		                      .depth = L_DA, .clock = &mclock };
	cr_assert_eq(sluice_leaky_init(&l, &cfg), 0);
	int nthreads = 3;
	struct ldecider *d = calloc((size_t)nthreads, sizeof(*d));
	cr_assert_not_null(d);
	ldeciders = d;
	nldeciders = nthreads;
	atomic_store(&lrunning, 1);
	for (int i = 0; i < nthreads; i++) {
		d[i].l = &l;
		d[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
		d[i].rec = malloc(sizeof(struct lrec) * L_REC);
		cr_assert_not_null(d[i].rec);
		cr_assert_eq(pthread_create(&d[i].tid, NULL, ldecider_main, &d[i]), 0);
	}
	pthread_t ct;
	cr_assert_eq(pthread_create(&ct, NULL, lclock_main, &l), 0);
	pthread_join(ct, NULL);
	for (int i = 0; i < nthreads; i++)
		pthread_join(d[i].tid, NULL);
	size_t total;
	uint64_t refused;
	struct lrec *all = REC_MERGE(d, nthreads, L_REC, lrec_by_time, &total, &refused);
	/* b = max(D + 1), T = min(T): the header's bound across changes */
	__extension__ typedef __int128 s128;
	const s128 T = L_TA, bT = (s128)(L_DA + 1) * L_TA;
	s128 S = 0, run_min = 0; /* min over i of S_(i-1) T - t_i */
	for (size_t j = 0; j < total; j++) {
		s128 before = S * T - (s128)all[j].t; /* i = j: S_(j-1) T - t_j */
		if (j == 0 || before < run_min)
			run_min = before;
		S += (s128)all[j].n;
		s128 here = S * T - (s128)all[j].t;
		cr_assert(here - run_min <= bT, "an interval ending at %llu holds %lld ns over b T",
		          (unsigned long long)all[j].t, (long long)(here - run_min - bT));
	}
	cr_assert_gt(total, 1000, "admitted %zu", total);
	cr_assert_gt(refused, 1000, "the bound must bite: %llu", (unsigned long long)refused);
	cr_assert_eq(lchanges, L_STEPS / 64);
	cr_log_info("leaky under set_rate/set_burst: admitted %zu, refused %llu, changes %llu",
	            total, (unsigned long long)refused, (unsigned long long)lchanges);
	for (int i = 0; i < nthreads; i++)
		free(d[i].rec);
	free(d);
	free(all);
}

/* ---- leases (meter only) ------------------------------------------------ */

static void make_leased(sluice_leaky_t *l, uint64_t rate, uint64_t depth, uint32_t lease,
                        uint64_t lease_ns)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_leaky_config_t cfg = { .rate = rate, .period_ns = SEC, .mode = SLUICE_LEAKY_METER,
		                      .depth = depth, .clock = &mclock, .lease = lease,
		                      .lease_ns = lease_ns };
	int rc = sluice_leaky_init(l, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
}

Test(leaky, lease_config)
{
	sluice_leaky_t l;
	sluice_leaky_config_t cfg = { .rate = 1000, .period_ns = SEC, .mode = SLUICE_LEAKY_SHAPER,
		                      .max_delay_ns = MS, .clock = &mclock, .lease = 8 };
	sluice_clock_manual_init(&mclock, 0);
	cr_assert_eq(sluice_leaky_init(&l, &cfg), SLUICE_ELEASE, "the shaper books: no lease");
	cfg.lease = 0;
	cfg.lease_ns = US;
	cr_assert_eq(sluice_leaky_init(&l, &cfg), SLUICE_ELEASE);
	cfg = (sluice_leaky_config_t){ .rate = 1000, .period_ns = SEC, .mode = SLUICE_LEAKY_METER,
		                       .depth = 9, .clock = &mclock,
		                       .lease = SLUICE_GCRA_LEASE_MAX + 1 };
	cr_assert_eq(sluice_leaky_init(&l, &cfg), SLUICE_ELEASE);
	cfg.lease = 8;
	cr_assert_eq(sluice_leaky_init(&l, &cfg), 0);
	cr_assert_not_null(l.gcra.cells, "the meter's GCRA has lease cells");
	sluice_leaky_destroy(&l);
}

/* The meter's leases are GCRA's: one CAS books a lease that this CPU then
 * spends without touching the bucket's word, within V only, and the
 * bound becomes D + 1 + (t + V)/T. */
Test(leaky, meter_spends_from_its_cpus_lease_within_v)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(sched_getcpu(), &set);
	cr_assert_eq(sched_setaffinity(0, sizeof(set), &set), 0);
	const uint64_t T = 1000, V = 20 * US, D = 999, t0 = 5 * SEC;
	sluice_leaky_t l;
	make_leased(&l, SEC / T, D, 16, V);
	cr_assert_eq(sluice_leaky_acquire_at(&l, 1, t0, NULL), 1);
	uint64_t tat = atomic_load(&l.gcra.tat);
	cr_assert_gt(tat, t0 + T, "the first decision took a lease");
	uint64_t leased = (tat - t0) / T - 1, admitted = 1;
	for (uint64_t i = 0; i < leased; i++)
		admitted += (uint64_t)sluice_leaky_acquire_at(&l, 1, t0 + V, NULL);
	cr_assert_eq(admitted, 1 + leased);
	cr_assert_eq(atomic_load(&l.gcra.tat), tat, "spent from the lease");
	/* Drain everything at t0 + V: at most D + 1 + V/T in [t0, t0 + V]. */
	while (sluice_leaky_acquire_at(&l, 1, t0 + V, NULL) == 1)
		admitted++;
	cr_assert_leq(admitted * T, (D + 1) * T + V, "above D + 1 + (t + V)/T");
	cr_assert_geq(admitted, D + 1 - 16, "lost more than one lease");
	sluice_leaky_destroy(&l);
}
