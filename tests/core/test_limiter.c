/* SPDX-License-Identifier: MIT */
/*
 * test_limiter.c - the generic handle: every kind behind one API, and
 * sluice_limiter_wait's promise: take within the timeout, or take nothing.
 */
#include <criterion/criterion.h>

#include "sluice/sluice.h"

#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(limiter, .timeout = 30);

Test(limiter, kinds_behave_like_their_algorithm)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 0);
	sluice_limiter_config_t cf = { .algo = SLUICE_ALGO_FIXED,
		                       .fixed = { .limit = 3, .window_ns = SEC, .clock = &m } };
	sluice_limiter_config_t cw = { .algo = SLUICE_ALGO_WINDOW,
		                       .window = { .limit = 3, .window_ns = SEC, .buckets = 10,
		                                   .clock = &m } };
	sluice_limiter_t *f, *w;
	cr_assert_eq(sluice_limiter_new(&cf, &f), 0);
	cr_assert_eq(sluice_limiter_new(&cw, &w), 0);
	cr_assert_eq(sluice_limiter_algo(f), SLUICE_ALGO_FIXED);
	cr_assert_eq(sluice_limiter_algo(w), SLUICE_ALGO_WINDOW);
	cr_assert_eq(sluice_limiter_clock(w), &m);
	sluice_decision_t d;
	sluice_clock_manual_set(&m, 100 * MS);
	cr_assert_eq(sluice_limiter_acquire(f, 3, &d), 1);
	cr_assert_eq(sluice_limiter_acquire(w, 3, &d), 1);
	cr_assert_eq(sluice_limiter_acquire(f, 1, &d), 0);
	cr_assert_eq(d.retry_after_ns, 900 * MS);
	cr_assert_eq(sluice_limiter_acquire_at(w, 1, 150 * MS, &d), 0);
	cr_assert_eq(d.retry_after_ns, 950 * MS, "bucket 1 leaves at 1.1 s");
	cr_assert_eq(sluice_limiter_acquire(f, 4, &d), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_limiter_release(f, 1), 0, "no in-flight work to end");
	sluice_limiter_free(f);
	sluice_limiter_free(w);
	sluice_limiter_free(NULL);
}

Test(limiter, bad_config)
{
	sluice_limiter_config_t c = { .algo = (sluice_algo_t)999 };
	sluice_limiter_t *l = NULL;
	cr_assert_eq(sluice_limiter_new(&c, &l), SLUICE_EALGO);
	cr_assert_null(l);
	c.algo = SLUICE_ALGO_WINDOW; /* limit 0 */
	cr_assert_eq(sluice_limiter_new(&c, &l), SLUICE_ELIMIT, "the algorithm's own error");
	cr_assert_null(l);
	cr_assert_eq(sluice_limiter_new(NULL, &l), SLUICE_EINVAL);
	cr_assert_eq(sluice_limiter_new(&c, NULL), SLUICE_EINVAL);
}

/* sluice_limiter_wait on a polled algorithm, real monotonic clock.  No timing is
 * asserted: only what was taken. */
Test(limiter, wait_takes_within_timeout_or_nothing)
{
	sluice_limiter_config_t cw = { .algo = SLUICE_ALGO_WINDOW,
		                       .window = { .limit = 2, .window_ns = 40 * MS, .buckets = 4,
		                                   .clock = &sluice_clock_monotonic } };
	sluice_limiter_t *w;
	cr_assert_eq(sluice_limiter_new(&cw, &w), 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_limiter_wait(w, 2, 0, &d), 1, "free permits: no wait");
	/* the next permit is >= 30 ms away: a 1 ms budget must fail at once,
	 * taking nothing */
	cr_assert_eq(sluice_limiter_wait(w, 1, 1 * MS, &d), SLUICE_ETIMEDOUT);
	cr_assert_not(d.allowed);
	/* a generous budget waits for it */
	cr_assert_eq(sluice_limiter_wait(w, 1, 10 * SEC, &d), 1);
	cr_assert(d.allowed);
	cr_assert_eq(sluice_limiter_wait(w, 3, 10 * SEC, &d), SLUICE_ETOOBIG, "can never pass: no wait");
	sluice_limiter_free(w);
}

/* Every kind through the generic handle: new, acquire to refusal, refund,
 * free.  The algorithms' own tests check their guarantees; this checks the
 * dispatch reaches the right one with the right config. */
Test(limiter, every_kind_dispatches)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, SEC);
	sluice_limiter_config_t cfgs[] = {
		{ .algo = SLUICE_ALGO_FIXED, .fixed = { .limit = 3, .window_ns = SEC, .clock = &m } },
		{ .algo = SLUICE_ALGO_WINDOW,
		  .window = { .limit = 3, .window_ns = SEC, .buckets = 10, .clock = &m } },
		{ .algo = SLUICE_ALGO_GCRA,
		  .gcra = { .rate = 1, .period_ns = SEC, .burst = 3, .clock = &m } },
		{ .algo = SLUICE_ALGO_LEAKY,
		  .leaky = { .rate = 1, .period_ns = SEC, .mode = SLUICE_LEAKY_METER, .depth = 2,
		             .clock = &m } },
		{ .algo = SLUICE_ALGO_LOG, .log = { .limit = 3, .window_ns = SEC, .clock = &m } },
		{ .algo = SLUICE_ALGO_DECAY, .decay = { .limit = 3, .half_life_ns = SEC, .clock = &m } },
		{ .algo = SLUICE_ALGO_INFLIGHT, .inflight = { .limit = 3, .clock = &m } },
	};
	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		sluice_limiter_t *l = NULL;
		int rc = sluice_limiter_new(&cfgs[i], &l);
		cr_assert_eq(rc, 0, "algo %d: %s", (int)cfgs[i].algo, sluice_err_name(rc));
		cr_assert_eq(sluice_limiter_algo(l), cfgs[i].algo);
		sluice_decision_t d;
		for (int k = 0; k < 3; k++)
			cr_assert_eq(sluice_limiter_acquire(l, 1, &d), 1, "algo %d, permit %d", (int)cfgs[i].algo, k);
		cr_assert_eq(sluice_limiter_acquire(l, 1, &d), 0, "algo %d: the 4th must be refused",
		             (int)cfgs[i].algo);
		cr_assert_eq(d.limit, 3, "algo %d", (int)cfgs[i].algo);
		cr_assert_eq(sluice_limiter_acquire(l, 4, &d), SLUICE_ETOOBIG, "algo %d", (int)cfgs[i].algo);
		sluice_limiter_free(l);
	}
}

/* sluice_limiter_wait on a booking algorithm: books and sleeps, or books nothing. */
Test(limiter, wait_books_or_times_out)
{
	sluice_limiter_config_t cg = { .algo = SLUICE_ALGO_GCRA,
		                       .gcra = { .rate = 1, .period_ns = 20 * MS, .burst = 1,
		                                 .clock = &sluice_clock_monotonic } };
	sluice_limiter_t *g;
	cr_assert_eq(sluice_limiter_new(&cg, &g), 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_limiter_wait(g, 1, 0, &d), 1, "a full bucket: no wait");
	cr_assert_eq(sluice_limiter_wait(g, 1, 1 * MS, &d), SLUICE_ETIMEDOUT, "the slot is ~20 ms away");
	/* nothing was booked by the timed-out call: the next slot is still
	 * one interval after the first permit, not two */
	cr_assert_eq(sluice_limiter_wait(g, 1, 10 * SEC, &d), 1);
	cr_assert_leq(d.delay_ns, 20 * MS, "booked one interval out, not two");
	sluice_limiter_free(g);

	sluice_limiter_config_t cs = { .algo = SLUICE_ALGO_LEAKY,
		                       .leaky = { .rate = 1, .period_ns = 5 * MS,
		                                  .mode = SLUICE_LEAKY_SHAPER,
		                                  .max_delay_ns = 100 * MS,
		                                  .clock = &sluice_clock_monotonic } };
	sluice_limiter_t *s;
	cr_assert_eq(sluice_limiter_new(&cs, &s), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(sluice_limiter_wait(s, 1, SEC, &d), 1, "paced request %d", i);
	sluice_limiter_free(s);
}

/* Warm-up through the handle: Guava's order (the first request passes at
 * once and the next one pays for it), and a booking wait. */
Test(limiter, warmup_dispatches)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, SEC);
	sluice_limiter_config_t c = { .algo = SLUICE_ALGO_WARMUP,
		                      .warmup = { .rate = 2, .period_ns = SEC, .warmup_ns = 4 * SEC,
		                                  .clock = &m } };
	sluice_limiter_t *l;
	cr_assert_eq(sluice_limiter_new(&c, &l), 0);
	sluice_decision_t d;
	cr_assert_eq(sluice_limiter_acquire(l, 1, &d), 1, "the first request passes at once");
	cr_assert_eq(sluice_limiter_acquire(l, 1, &d), 0, "the next pays: cold, so 1.38 s later");
	cr_assert_eq((d.retry_after_ns + 5 * MS) / (10 * MS), 138, "Guava's R1.38 (got %llu ns)",
	             (unsigned long long)d.retry_after_ns);
	sluice_limiter_free(l);
}

/* ---- the 1.0 verbs, for every algorithm ------------------------------------ */

enum { K_FIXED, K_WINDOW, K_GCRA, K_METER, K_SHAPER, K_LOG, K_WARMUP, K_DECAY, K_INFLIGHT,
       K_COMPOSITE, K_COUNT };
static const char *const k_name[K_COUNT] = { "fixed", "window", "gcra", "meter", "shaper", "log",
	                                     "warmup", "decay", "inflight", "composite" };

struct kit {
	sluice_clock_t m;
	sluice_limiter_t *l[K_COUNT];
	sluice_limiter_t *part[2]; /* the composite's: a decay and a GCRA */
};

static void kit_make(struct kit *k)
{
	sluice_clock_manual_init(&k->m, SEC);
	sluice_limiter_config_t c[K_COUNT] = {
		[K_FIXED] = { .algo = SLUICE_ALGO_FIXED,
		              .fixed = { .limit = 3, .window_ns = SEC, .clock = &k->m } },
		[K_WINDOW] = { .algo = SLUICE_ALGO_WINDOW,
		               .window = { .limit = 3, .window_ns = SEC, .buckets = 10, .clock = &k->m } },
		[K_GCRA] = { .algo = SLUICE_ALGO_GCRA,
		             .gcra = { .rate = 1, .period_ns = SEC, .burst = 3, .clock = &k->m } },
		[K_METER] = { .algo = SLUICE_ALGO_LEAKY,
		              .leaky = { .rate = 1, .period_ns = SEC, .mode = SLUICE_LEAKY_METER,
		                         .depth = 2, .clock = &k->m } },
		[K_SHAPER] = { .algo = SLUICE_ALGO_LEAKY,
		               .leaky = { .rate = 10, .period_ns = SEC, .mode = SLUICE_LEAKY_SHAPER,
		                          .max_delay_ns = SEC, .clock = &k->m } },
		[K_LOG] = { .algo = SLUICE_ALGO_LOG, .log = { .limit = 3, .window_ns = SEC, .capacity = 8, .clock = &k->m } },
		[K_WARMUP] = { .algo = SLUICE_ALGO_WARMUP,
		               .warmup = { .rate = 2, .period_ns = SEC, .warmup_ns = 4 * SEC,
		                           .clock = &k->m } },
		[K_DECAY] = { .algo = SLUICE_ALGO_DECAY,
		              .decay = { .limit = 3, .limit_max = 8, .half_life_ns = SEC,
		                         .clock = &k->m } },
		[K_INFLIGHT] = { .algo = SLUICE_ALGO_INFLIGHT, .inflight = { .limit = 3, .clock = &k->m } },
	};
	for (int i = 0; i < K_COMPOSITE; i++)
		cr_assert_eq(sluice_limiter_new(&c[i], &k->l[i]), 0, "%s", k_name[i]);
	/* the composite's parts: decay (L = 5) and GCRA (b = 4), whose
	 * available is in this branch (the windows' comes with the merge) */
	sluice_limiter_config_t pw = c[K_DECAY], pg = c[K_GCRA];
	pw.decay.limit = 5;
	pw.decay.limit_max = 5;
	pg.gcra.burst = 4;
	cr_assert_eq(sluice_limiter_new(&pw, &k->part[0]), 0);
	cr_assert_eq(sluice_limiter_new(&pg, &k->part[1]), 0);
	sluice_limiter_config_t cc = { .algo = SLUICE_ALGO_COMPOSITE,
		                       .composite = { .parts = { k->part[0], k->part[1] }, .count = 2 } };
	cr_assert_eq(sluice_limiter_new(&cc, &k->l[K_COMPOSITE]), 0);
}

static void kit_free(struct kit *k)
{
	for (int i = 0; i < K_COUNT; i++)
		sluice_limiter_free(k->l[i]);
	sluice_limiter_free(k->part[0]);
	sluice_limiter_free(k->part[1]);
}


/* available = the largest n acquire admits at that time: n + 1 is refused
 * (which takes nothing), n is admitted; a composite's is its least part's. */
Test(limiter, available_is_the_largest_admitted_n)
{
	struct kit k;
	kit_make(&k);
	uint64_t want0[K_COUNT] = { 3, 3, 3, 3, 1, 3, 8, 3, 3, 4 };
	for (int i = 0; i < K_COUNT; i++) {
		sluice_limiter_t *l = k.l[i];
		uint64_t t = SEC, checked = 0;
		for (int step = 0; step < 12; step++, t += 300 * MS) {
			uint64_t av = 777;
			int rc = sluice_limiter_available_at(l, t, &av);
			cr_assert_eq(rc, 0, "%s: %s", k_name[i], sluice_err_name(rc));
			if (step == 0)
				cr_assert_eq(av, want0[i], "%s: %llu when fresh", k_name[i],
				             (unsigned long long)av);
			sluice_decision_t d;
			rc = sluice_limiter_acquire_at(l, av + 1, t, &d);
			cr_assert(rc == 0 || rc == SLUICE_ETOOBIG, "%s step %d: %llu + 1 admitted",
			          k_name[i], step, (unsigned long long)av);
			/* take a part of it on odd steps, all of it on even ones */
			uint64_t take = step % 2 ? av / 2 : av;
			if (i == K_WARMUP && take)
				take = 1; /* pay later: L cold permits would cost 6 s */
			if (take > 0) {
				cr_assert_eq(sluice_limiter_acquire_at(l, take, t, &d), 1,
				             "%s step %d: %llu of %llu", k_name[i], step,
				             (unsigned long long)take, (unsigned long long)av);
				checked++;
			}
			if (i == K_INFLIGHT && step % 3 == 2)
				cr_assert_eq(sluice_limiter_release(l, 1), 0);
		}
		if (i != K_FIXED && i != K_WINDOW && i != K_LOG && i != K_INFLIGHT && i != K_COMPOSITE)
			cr_assert_gt(checked, 2, "%s", k_name[i]);
	}
	uint64_t v;
	cr_assert_eq(sluice_limiter_available_at(NULL, 0, &v), SLUICE_EINVAL);
	cr_assert_eq(sluice_limiter_available(k.l[K_GCRA], NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_limiter_available(k.l[K_GCRA], &v), 0);
	kit_free(&k);
}

/* The composite's available is its least part's, whichever part that is. */
Test(limiter, composite_available_is_the_least_part)
{
	struct kit k;
	kit_make(&k);
	sluice_limiter_t *c = k.l[K_COMPOSITE];
	uint64_t v = 0;
	cr_assert_eq(sluice_limiter_available_at(c, SEC, &v), 0);
	cr_assert_eq(v, 4, "GCRA b = 4 under decay's 5");
	/* drain the GCRA part alone: the composite follows it */
	cr_assert_eq(sluice_limiter_acquire_at(k.part[1], 3, SEC, NULL), 1);
	cr_assert_eq(sluice_limiter_available_at(c, SEC, &v), 0);
	cr_assert_eq(v, 1);
	/* 3 s later GCRA is full again (4); take 4 of decay's 5: now decay
	 * is the least part, with 1 */
	cr_assert_eq(sluice_limiter_available_at(c, 4 * SEC, &v), 0);
	cr_assert_eq(v, 4);
	cr_assert_eq(sluice_limiter_acquire_at(k.part[0], 4, 4 * SEC, NULL), 1);
	cr_assert_eq(sluice_limiter_available_at(c, 4 * SEC, &v), 0);
	cr_assert_eq(v, 1, "decay holds 4 of 5");
	cr_assert_eq(sluice_limiter_available_at(k.part[1], 4 * SEC, &v), 0);
	cr_assert_eq(v, 4, "while GCRA holds 4");
	kit_free(&k);
}

/* reserve books where the algorithm can (and cancel gives the booking back
 * exactly, once); everywhere else both say ENOTSUP and take nothing. */
Test(limiter, reserve_and_cancel_for_every_kind)
{
	struct kit k;
	kit_make(&k);
	for (int i = 0; i < K_COUNT; i++) {
		sluice_limiter_t *l = k.l[i];
		int books = i == K_GCRA || i == K_SHAPER || i == K_WARMUP;
		sluice_decision_t a, b;
		uint64_t before = 0, after = 0;
		int have = sluice_limiter_available_at(l, SEC, &before) == 0;
		uint64_t n0 = i == K_GCRA ? 3 : 1; /* GCRA: empty the bucket */
		int rc = sluice_limiter_reserve_at(l, n0, SEC, UINT64_MAX, &a);
		if (!books) {
			cr_assert_eq(rc, SLUICE_ENOTSUP, "%s", k_name[i]);
			if (have) {
				cr_assert_eq(sluice_limiter_available_at(l, SEC, &after), 0);
				cr_assert_eq(after, before, "%s: ENOTSUP took something", k_name[i]);
			}
			if (i == K_METER) { /* its admissions are GCRA bookings */
				cr_assert_eq(sluice_limiter_acquire_at(l, 1, SEC, &a), 1);
				cr_assert_eq(sluice_limiter_cancel(l, 1, &a), 0);
				cr_assert_eq(sluice_limiter_cancel(l, 1, &a), SLUICE_ECANCEL);
			} else {
				cr_assert_eq(sluice_limiter_acquire_at(l, 1, SEC, &a), 1, "%s", k_name[i]);
				cr_assert_eq(sluice_limiter_cancel(l, 1, &a), SLUICE_ENOTSUP, "%s",
				             k_name[i]);
			}
			continue;
		}
		cr_assert_eq(rc, 1, "%s", k_name[i]);
		/* a second booking queues behind the first: a delay, or for
		 * warm-up (pay later) the next request waits */
		rc = sluice_limiter_reserve_at(l, 1, SEC, UINT64_MAX, &b);
		cr_assert_eq(rc, 1, "%s", k_name[i]);
		cr_assert_gt(b.delay_ns, 0, "%s: the second booking waits", k_name[i]);
		cr_assert_eq(sluice_limiter_cancel(l, n0, &a), SLUICE_ECANCEL, "%s: booked after it",
		             k_name[i]);
		cr_assert_eq(sluice_limiter_cancel(l, 1, &b), 0, "%s", k_name[i]);
		cr_assert_eq(sluice_limiter_cancel(l, 1, &b), SLUICE_ECANCEL, "%s: twice", k_name[i]);
		/* b's slot is free again: booked again, it gets the same delay */
		sluice_decision_t c;
		cr_assert_eq(sluice_limiter_reserve_at(l, 1, SEC, UINT64_MAX, &c), 1);
		cr_assert_eq(c.delay_ns, b.delay_ns, "%s", k_name[i]);
		/* a tighter caller books nothing and is told how much later */
		sluice_decision_t r;
		cr_assert_eq(sluice_limiter_reserve_at(l, 1, SEC, c.delay_ns, &r), 0, "%s", k_name[i]);
		cr_assert_gt(r.retry_after_ns, 0);
		cr_assert_eq(r.delay_ns, 0);
		cr_assert_eq(sluice_limiter_reserve(l, 1, UINT64_MAX, &r), 1, "%s: the clock's", k_name[i]);
	}
	cr_assert_eq(sluice_limiter_reserve(NULL, 1, 0, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_limiter_cancel(NULL, 1, NULL), SLUICE_EINVAL);
	kit_free(&k);
}

/* The setters reach the algorithm's own (state kept, as its header says:
 * its own tests check that rule) or say ENOTSUP and change nothing. */
Test(limiter, setters_for_every_kind)
{
	struct kit k;
	kit_make(&k);
	/* what each kind supports: rate, burst, limit */
	static const int has[K_COUNT][3] = {
		[K_FIXED] = { 0, 0, 1 }, [K_WINDOW] = { 0, 0, 1 }, [K_GCRA] = { 1, 1, 0 },
		[K_METER] = { 1, 1, 0 }, [K_SHAPER] = { 1, 0, 0 }, [K_LOG] = { 0, 0, 1 },
		[K_WARMUP] = { 1, 0, 0 }, [K_DECAY] = { 0, 0, 1 }, [K_INFLIGHT] = { 0, 0, 1 },
		[K_COMPOSITE] = { 0, 0, 0 },
	};
	for (int i = 0; i < K_COUNT; i++) {
		sluice_limiter_t *l = k.l[i];
		uint64_t before = 0, after = 0;
		int have = sluice_limiter_available_at(l, SEC, &before) == 0;
		int rc[3] = { sluice_limiter_set_rate(l, 2, SEC), sluice_limiter_set_burst(l, 5),
			      sluice_limiter_set_limit(l, 5) };
		int any = 0;
		for (int v = 0; v < 3; v++) {
			if (!has[i][v]) {
				cr_assert_eq(rc[v], SLUICE_ENOTSUP, "%s verb %d: %s", k_name[i], v,
				             sluice_err_name(rc[v]));
			} else {
				cr_assert_eq(rc[v], 0, "%s verb %d: %s", k_name[i], v,
				             sluice_err_name(rc[v]));
				any = 1;
			}
		}
		if (have && !any) {
			cr_assert_eq(sluice_limiter_available_at(l, SEC, &after), 0);
			cr_assert_eq(after, before, "%s: ENOTSUP changed something", k_name[i]);
		}
		/* the new parameters are in force: the limit or burst 5 lets 5
		 * through, where 3 (or 1, the shaper) did before */
		if (any && i != K_SHAPER && i != K_WARMUP) {
			uint64_t t = 100 * SEC; /* long after: full again at the new rate */
			cr_assert_eq(sluice_limiter_acquire_at(l, i == K_METER ? 6 : 5, t, NULL), 1,
			             "%s", k_name[i]);
		}
	}
	/* bad values are the algorithm's errors, with nothing changed */
	cr_assert_eq(sluice_limiter_set_rate(k.l[K_GCRA], 0, SEC), SLUICE_ERATE);
	cr_assert_eq(sluice_limiter_set_burst(k.l[K_GCRA], 0), SLUICE_EBURST);
	cr_assert_eq(sluice_limiter_set_rate(NULL, 1, SEC), SLUICE_EINVAL);
	cr_assert_eq(sluice_limiter_set_burst(NULL, 1), SLUICE_EINVAL);
	cr_assert_eq(sluice_limiter_set_limit(NULL, 1), SLUICE_EINVAL);
	kit_free(&k);
}

/* wait_until: the deadline is on the limiter's clock.  A manual clock
 * makes the limiter's side exact; the sleeps are real but short. */
Test(limiter, wait_until_deadline_on_the_limiters_clock)
{
	struct kit k;
	kit_make(&k);
	sluice_decision_t d;
	/* booking: the shaper's second slot is 100 ms after the first */
	sluice_limiter_t *s = k.l[K_SHAPER];
	cr_assert_eq(sluice_limiter_wait_until(s, 1, SEC, &d), 1, "an empty queue: at once");
	cr_assert_eq(d.delay_ns, 0);
	cr_assert_eq(sluice_limiter_wait_until(s, 1, SEC + 100 * MS - 1, &d), SLUICE_ETIMEDOUT);
	cr_assert_eq(sluice_limiter_wait_until(s, 1, SEC + 100 * MS, &d), 1, "the deadline is the slot");
	cr_assert_eq(d.delay_ns, 100 * MS, "nothing booked by the refused wait");
	/* a deadline already passed tries once, without sleeping */
	cr_assert_eq(sluice_limiter_wait_until(k.l[K_GCRA], 3, 0, &d), 1);
	cr_assert_eq(sluice_limiter_wait_until(k.l[K_GCRA], 1, 0, &d), SLUICE_ETIMEDOUT);
	/* polled (decay, L = 3): emptied at 1 s, a permit back when the
	 * count has decayed to 2: log2(3/2) half-lives = 585 ms */
	sluice_limiter_t *x = k.l[K_DECAY];
	cr_assert_eq(sluice_limiter_acquire(x, 3, &d), 1);
	cr_assert_eq(sluice_limiter_wait_until(x, 1, SEC + 500 * MS, &d), SLUICE_ETIMEDOUT,
	             "retry_after says 585 ms: past the deadline");
	cr_assert_not(d.allowed);
	/* within the deadline, but the manual clock stands still: the wait
	 * ends once it has slept as long as the deadline was ahead (20 ms) */
	sluice_limiter_config_t cx = { .algo = SLUICE_ALGO_DECAY,
		                       .decay = { .limit = 3, .half_life_ns = 10 * MS, .clock = &k.m } };
	sluice_limiter_t *y;
	cr_assert_eq(sluice_limiter_new(&cx, &y), 0);
	cr_assert_eq(sluice_limiter_acquire(y, 3, &d), 1);
	/* (no time is asserted: that it returns at all is the point, and the
	 * suite's timeout catches a wait that polls for ever) */
	cr_assert_eq(sluice_limiter_wait_until(y, 1, SEC + 20 * MS, &d), SLUICE_ETIMEDOUT);
	cr_assert_not(d.allowed);
	/* with the clock moved on, the same wait takes at once */
	sluice_clock_manual_set(&k.m, SEC + 10 * MS);
	cr_assert_eq(sluice_limiter_wait_until(y, 1, SEC + 20 * MS, &d), 1);
	/* wait is wait_until(now + timeout) */
	cr_assert_eq(sluice_limiter_wait(k.l[K_SHAPER], 1, 0, &d), SLUICE_ETIMEDOUT, "queue busy");
	cr_assert_eq(sluice_limiter_wait_until(NULL, 1, 0, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_limiter_wait(NULL, 1, 0, &d), SLUICE_EINVAL);
	sluice_limiter_free(y);
	kit_free(&k);
}
