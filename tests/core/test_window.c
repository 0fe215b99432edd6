/* SPDX-License-Identifier: MIT */
/*
 * test_window.c - sliding window ring, single thread, manual clock.
 *
 * The strongest check here is a reference model: a plain array of per-epoch
 * counts with the documented rules (time never runs back; admit when the
 * last N buckets plus n fit in L).  Every decision the ring makes, with and
 * without leases, over long pseudo-random schedules with clock jumps, must equal the
 * model's, and so must retry_after_ns.  Then the guarantee itself is checked
 * directly: no run of N consecutive epochs holds more than L.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sluice/sluice.h"

#include "test_rng.h"
#include "test_stall.h"

#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(window, .timeout = 60);

static sluice_clock_t mclock;

static void make_leased(sluice_window_t *w, uint64_t limit, uint64_t window_ns,
                        uint32_t buckets, uint32_t lease)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_window_config_t cfg = { .limit = limit, .window_ns = window_ns, .buckets = buckets,
		                       .clock = &mclock, .lease = lease };
	int rc = sluice_window_init(w, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
}

static void make(sluice_window_t *w, uint64_t limit, uint64_t window_ns, uint32_t buckets)
{
	make_leased(w, limit, window_ns, buckets, 0);
}

/* Stay on one CPU, so every decision uses the same lease cell. */
static void pin_to_this_cpu(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(sched_getcpu(), &set);
	cr_assert_eq(sched_setaffinity(0, sizeof(set), &set), 0);
}

/* ---- reference model ---------------------------------------------------- */

struct model {
	uint64_t limit, width, head, buckets;
	uint64_t base_epoch; /* counts[i] is epoch base_epoch + i */
	uint32_t *counts;    /* what the bucket counts (with leases: taken) */
	uint32_t *admitted;  /* what was admitted (differs with leases) */
	uint64_t *lims;      /* the largest limit an admission there was judged against */
	size_t ncounts;
	/* leases, one CPU: B, log2(cells), and the one cell in use */
	uint64_t lease, cells_log2, cell_epoch, cell_count;
};

static void model_init(struct model *m, uint64_t limit, uint64_t window_ns, uint32_t buckets,
                       uint64_t base_epoch, size_t span)
{
	m->limit = limit;
	m->width = window_ns / buckets;
	m->buckets = buckets;
	m->head = 0;
	m->base_epoch = base_epoch;
	m->ncounts = span;
	m->counts = calloc(span, sizeof(uint32_t));
	m->admitted = calloc(span, sizeof(uint32_t));
	m->lims = calloc(span, sizeof(uint64_t));
	cr_assert(m->counts && m->admitted && m->lims);
	m->lease = 0;
	m->cell_epoch = UINT64_MAX;
	m->cell_count = 0;
}

static uint64_t model_count(const struct model *m, uint64_t e)
{
	if (e < m->base_epoch || e - m->base_epoch >= m->ncounts)
		return 0;
	return m->counts[e - m->base_epoch];
}

static uint64_t model_window(const struct model *m, uint64_t e)
{
	uint64_t sum = 0;
	for (uint64_t k = 0; k < m->buckets && k <= e; k++)
		sum += model_count(m, e - k);
	return sum;
}

/* What sluice_window_available_at should say at the model's head: the
 * room under the limit, or this CPU's lease of the head epoch if more. */
static uint64_t model_available(const struct model *m)
{
	uint64_t counted = model_window(m, m->head);
	uint64_t room = counted >= m->limit ? 0 : m->limit - counted;
	if (m->lease && m->cell_epoch == m->head && m->cell_count > room)
		room = m->cell_count;
	return room;
}

/* Permits the ring counts in the window of @t, read through the one public
 * query (exact where no lease holds more than the room: the tests below). */
static uint64_t counted_at(sluice_window_t *w, uint64_t t)
{
	return atomic_load_explicit(&w->limit, memory_order_relaxed) -
	       sluice_window_available_at(w, t);
}

/* Returns 1/0 like the ring and the retry_after it should report. */
static int model_acquire(struct model *m, uint64_t n, uint64_t now, uint64_t *retry)
{
	if (n > m->limit) {
		*retry = SLUICE_NEVER; /* above the (possibly lowered) limit */
		return SLUICE_ETOOBIG;
	}
	uint64_t e = now / m->width;
	if (e < m->head) {
		e = m->head;
		now = e * m->width;
	}
	m->head = e;
	cr_assert(e >= m->base_epoch && e - m->base_epoch < m->ncounts, "model span too small");
	if (m->lease && m->cell_epoch == e && m->cell_count >= n) {
		/* spent from this CPU's lease */
		m->cell_count -= n;
		m->admitted[e - m->base_epoch] += (uint32_t)n;
		/* a spend checks no limit: its taker's counted (same epoch) */
		*retry = 0;
		return 1;
	}
	uint64_t counted = model_window(m, e);
	if (counted + n <= m->limit) {
		uint64_t extra = 0;
		if (m->lease) {
			/* the header's rule: min(B, room / (2 * cells)) */
			extra = (m->limit - counted - n) >> (m->cells_log2 + 1);
			extra = extra < m->lease ? extra : m->lease;
			m->cell_count = (m->cell_epoch == e ? m->cell_count : 0) + extra;
			m->cell_epoch = e;
		}
		m->counts[e - m->base_epoch] += (uint32_t)(n + extra);
		m->admitted[e - m->base_epoch] += (uint32_t)n;
		if (m->limit > m->lims[e - m->base_epoch])
			m->lims[e - m->base_epoch] = m->limit;
		*retry = 0;
		return 1;
	}
	/* earliest time when enough old buckets have left the window */
	uint64_t excess = counted + n - m->limit, freed = 0;
	for (uint64_t k = m->buckets - 1; k >= 1; k--) {
		if (k > e)
			continue;
		freed += model_count(m, e - k);
		if (freed >= excess) {
			*retry = (e - k + m->buckets) * m->width - now;
			return 0;
		}
	}
	*retry = (e + m->buckets) * m->width - now;
	return 0;
}


struct schedule {
	uint64_t limit, window_ns, start_ns;
	uint32_t buckets;
	uint64_t seed;
	uint32_t lease; /* > 0: with leases, n = 1, one CPU (see below) */
};

ParameterizedTestParameters(window, matches_reference_model)
{
	static struct schedule params[] = {
		{ 10, SEC, 0, 10, 1, 0 },
		{ 100, 700 * MS, 5 * SEC, 7, 2, 0 }, /* N not a power of two */
		{ 1, 10 * MS, 0, 1, 3, 0 },          /* N = 1: a fixed window */
		{ 37, 4096 * 1000ULL, 123, 4096, 4, 0 }, /* N = max */
		{ 5, 3 * SEC, 0, 3, 5, 0 },
		/* near the top of the 64-bit time base */
		{ 20, SEC, (UINT64_MAX / SEC - 4000) * SEC, 8, 6, 0 },
		/* Leases, one thread on one CPU: the model tracks that CPU's
		 * cell (spend, take n + min(B, room / (2 cells)), deposit). */
		{ 100, 700 * MS, 5 * SEC, 7, 2, 16 },
		{ 1000, SEC, 0, 10, 7, 64 },
		{ 20, SEC, (UINT64_MAX / SEC - 4000) * SEC, 8, 6, 3 },
	};
	return cr_make_param_array(struct schedule, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct schedule *p, window, matches_reference_model)
{
	sluice_window_t w;
	make_leased(&w, p->limit, p->window_ns, p->buckets, p->lease);
	if (p->lease)
		pin_to_this_cpu();
	uint64_t width = p->window_ns / p->buckets;
	const int steps = 40000;
	uint64_t *times = malloc(sizeof(uint64_t) * steps), *ns = malloc(sizeof(uint64_t) * steps);
	cr_assert(times && ns);
	rng_state = p->seed * 0x9E3779B97F4A7C15ULL + 1 + p->lease;
	/* default step: up to half a bucket, or W/200 for many-bucket rings so
	 * the schedule crosses plenty of whole windows */
	uint64_t step_max = width / 2 > p->window_ns / 200 ? width / 2 : p->window_ns / 200;
	uint64_t t = p->start_ns, t_max = t;
	for (int i = 0; i < steps; i++) {
		uint64_t r = rnd();
		switch (r % 64) {
		case 0: { /* jump back up to 3 windows: must be held at the head */
			uint64_t span = 3 * p->window_ns < 64 * step_max ? 3 * p->window_ns : 64 * step_max;
			uint64_t back = (r >> 8) % span;
			t -= back < t - p->start_ns ? back : t - p->start_ns;
			break;
		}
		case 1: case 2: case 3: case 4:
			/* skip ahead up to 2 windows (64 buckets at most) */
			t += (r >> 8) % (p->buckets <= 32 ? 2 * p->window_ns : 64 * width);
			break;
		default:
			t += (r >> 8) % (step_max + 1);
		}
		times[i] = t;
		ns[i] = 1 + (r >> 40) % (p->limit < 4 ? p->limit : p->limit / 3);
		if (t > t_max)
			t_max = t;
	}
	struct model m;
	model_init(&m, p->limit, p->window_ns, p->buckets, p->start_ns / width,
	           (size_t)((t_max - p->start_ns) / width) + 2 * p->buckets + 2);
	m.lease = p->lease;
	m.cells_log2 = (uint64_t)__builtin_ctz(w.cell_mask + 1);

	/* set_limit keeping state, every 1500 steps: lower (so some n no
	 * longer fit at all and what is counted exceeds the limit), raise */
	const uint64_t hi = 2 * p->limit < SLUICE_WINDOW_LIMIT_MAX ? 2 * p->limit
	                                                           : SLUICE_WINDOW_LIMIT_MAX;
	const uint64_t lims[] = { p->limit, p->limit / 4 + 1, hi, p->limit / 2 + 1 };
	uint64_t admitted = 0, refused = 0;
	for (int i = 0; i < steps; i++) {
		uint64_t want_retry, n = ns[i];
		t = times[i];
		if (i % 1500 == 1499) {
			m.limit = lims[(uint64_t)i / 1500 % 4];
			cr_assert_eq(sluice_window_set_limit(&w, m.limit), 0);
		}
		int want = model_acquire(&m, n, t, &want_retry);
		sluice_decision_t d;
		int got = sluice_window_acquire_at(&w, n, t, &d);
		cr_assert_eq(got, want, "step %d t=%llu n=%llu: ring %d, model %d", i,
		             (unsigned long long)t, (unsigned long long)n, got, want);
		cr_assert_eq(d.retry_after_ns, want_retry, "step %d: retry_after %llu, model %llu", i,
		             (unsigned long long)d.retry_after_ns, (unsigned long long)want_retry);
		cr_assert_eq(d.limit, m.limit, "step %d: the decision names the limit it used", i);
		if (got < 0)
			continue; /* n above a lowered limit: nothing else to check */
		cr_assert_eq(d.now_ns / width, m.head, "step %d: decision epoch", i);
		/* remaining: what the window has not counted (leases count as
		 * taken; one CPU's lease snapshot is the count after its take) */
		uint64_t counted = model_window(&m, m.head);
		uint64_t room = counted >= m.limit ? 0 : m.limit - counted;
		cr_assert_eq(d.remaining, room, "step %d: remaining %llu, model %llu", i,
		             (unsigned long long)d.remaining, (unsigned long long)room);
		cr_assert_eq(sluice_window_available_at(&w, t), model_available(&m),
		             "step %d: available %llu, model %llu", i,
		             (unsigned long long)sluice_window_available_at(&w, t),
		             (unsigned long long)model_available(&m));
		admitted += (uint64_t)got;
		refused += (uint64_t)!got;
	}
	free(times);
	free(ns);
	cr_assert_gt(admitted, p->lease ? p->limit : 3 * p->limit, "L=%llu N=%u: the schedule must admit plenty (%llu)",
	             (unsigned long long)p->limit, p->buckets, (unsigned long long)admitted);
	cr_assert_gt(refused, 1000, "L=%llu N=%u: and refuse plenty (%llu), or it tests nothing",
	             (unsigned long long)p->limit, p->buckets, (unsigned long long)refused);
	/* the guarantee, directly: every run of N epochs admits <= L, L the
	 * largest limit an admission among them was judged against
	 * (SET_LIMIT); and leases waste at most B + n_max - 1 per epoch with
	 * one CPU */
	uint64_t wasted = 0;
	for (size_t i = 0; i < m.ncounts; i++) {
		uint64_t e = m.base_epoch + i, sum = 0, bound = 0;
		for (uint64_t k = 0; k < m.buckets && k <= i; k++) {
			sum += m.admitted[i - k];
			bound = m.lims[i - k] > bound ? m.lims[i - k] : bound;
		}
		cr_assert_leq(sum, bound, "epochs ending at %llu", (unsigned long long)e);
		cr_assert_leq(m.counts[i] - m.admitted[i], p->lease ? p->lease + p->limit / 3 - 1 : 0);
		wasted += m.counts[i] - m.admitted[i];
	}
	if (p->lease)
		cr_assert_gt(wasted, 0, "the schedule must end epochs with leases unspent");
	free(m.counts);
	free(m.admitted);
	free(m.lims);
	sluice_window_destroy(&w);
}

/* The documented worst case: bucket alignment lets 2L through an interval
 * of W - W/N + epsilon, but never more than L in N aligned buckets. */
Test(window, boundary_burst_bounded_per_aligned_window)
{
	const uint64_t L = 100, W = SEC;
	const uint32_t N = 10;
	sluice_window_t w;
	make(&w, L, W, N);
	uint64_t admitted = 0;
	/* L at the last ms of bucket 9, then hammer every ms until bucket 19 */
	for (uint64_t i = 0; i < L; i++)
		admitted += (uint64_t)sluice_window_acquire_at(&w, 1, W - MS, NULL);
	cr_assert_eq(admitted, L);
	uint64_t first_again = 0;
	for (uint64_t t = W - MS + 1; t < 2 * W; t += MS) {
		if (sluice_window_acquire_at(&w, 1, t, NULL) == 1) {
			first_again = t;
			break;
		}
	}
	cr_assert_eq(first_again / (W / N), 19, "nothing until bucket 9 leaves the window");
	/* a fixed window would have admitted L more 2 ms after its edge */
	cr_assert_eq(sluice_window_acquire_at(&w, L - 1, first_again, NULL), 1);
	uint64_t gap = first_again - (W - MS);
	cr_assert_lt(gap, W, "the adversarial 2L lands within one W (%llu ns): documented",
	             (unsigned long long)gap);
	cr_assert_geq(gap, W - W / N, "but no sooner than W - W/N");
	sluice_window_destroy(&w);
}

Test(window, rollover_through_every_slot)
{
	const uint32_t N = 7; /* 8 slots: epoch e uses slot e % 8, so 7-bucket
	                       * windows start in every slot in turn */
	sluice_window_t w;
	make(&w, 70, 70 * MS, N);
	uint64_t width = 10 * MS;
	/* 10 per bucket: any 7 buckets hold exactly L once the ring is full */
	for (uint64_t e = 0; e < 8 * 6; e++) {
		for (int i = 0; i < 10; i++)
			cr_assert_eq(sluice_window_acquire_at(&w, 1, e * width + (uint64_t)i, NULL), 1,
			             "epoch %llu request %d", (unsigned long long)e, i);
		cr_assert_eq(counted_at(&w, e * width + 50), 10 * (e < N ? e + 1 : N));
		if (e >= N - 1)
			cr_assert_eq(sluice_window_acquire_at(&w, 1, e * width + 100, NULL), 0,
			             "epoch %llu: the 11th must wait", (unsigned long long)e);
	}
	sluice_window_destroy(&w);
}

Test(window, long_idle_then_burst)
{
	sluice_window_t w;
	make(&w, 50, SEC, 10);
	cr_assert_eq(sluice_window_acquire_at(&w, 50, 1, NULL), 1);
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 2, NULL), 0);
	uint64_t later = 24 * 3600 * SEC + 3; /* a day idle: every slot stale */
	cr_assert_eq(counted_at(&w, later), 0);
	uint64_t admitted = 0;
	for (int i = 0; i < 80; i++)
		admitted += (uint64_t)sluice_window_acquire_at(&w, 1, later, NULL);
	cr_assert_eq(admitted, 50, "one full window, no more");
	sluice_window_destroy(&w);
}

Test(window, clock_backwards_by_seconds)
{
	sluice_window_t w;
	make(&w, 20, SEC, 10);
	cr_assert_eq(sluice_window_acquire_at(&w, 20, 30 * SEC + 50 * MS, NULL), 1);
	sluice_decision_t d;
	for (uint64_t back = 1; back <= 10; back++) {
		uint64_t t = 30 * SEC - back * SEC;
		cr_assert_eq(sluice_window_acquire_at(&w, 1, t, &d), 0, "%llu s back",
		             (unsigned long long)back);
		cr_assert_eq(d.now_ns, 30 * SEC, "held at the newest bucket's start");
		cr_assert_eq(d.retry_after_ns, SEC, "bucket 300 leaves at 31 s");
	}
	cr_assert_eq(counted_at(&w, 5 * SEC), 20, "nothing was forgotten");
	/* the plain variant reads the manual clock the same way */
	sluice_clock_manual_set(&mclock, 2 * SEC);
	cr_assert_eq(sluice_window_acquire(&w, 1, NULL), 0);
	sluice_clock_manual_set(&mclock, 31 * SEC);
	cr_assert_eq(sluice_window_acquire(&w, 20, NULL), 1);
	sluice_window_destroy(&w);
}

Test(window, n_above_limit_and_zero)
{
	sluice_window_t w;
	make(&w, 10, SEC, 10);
	sluice_decision_t d;
	cr_assert_eq(sluice_window_acquire_at(&w, 11, 1, &d), SLUICE_ETOOBIG);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	cr_assert_not(d.allowed);
	cr_assert_eq(sluice_window_acquire_at(&w, 0, 1, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_window_acquire_at(&w, 10, 1, &d), 1, "nothing was taken");
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(d.reset_ns, SEC - 1);
	sluice_window_destroy(&w);
}

Test(window, retry_after_is_exact)
{
	sluice_window_t w;
	make(&w, 10, SEC, 10);
	cr_assert_eq(sluice_window_acquire_at(&w, 4, 150 * MS, NULL), 1); /* bucket 1 */
	cr_assert_eq(sluice_window_acquire_at(&w, 6, 420 * MS, NULL), 1); /* bucket 4 */
	sluice_decision_t d;
	cr_assert_eq(sluice_window_acquire_at(&w, 3, 500 * MS, &d), 0);
	cr_assert_eq(d.remaining, 0);
	/* 3 needs bucket 1 (4 permits) gone: at 1.1 s */
	cr_assert_eq(d.retry_after_ns, 600 * MS);
	cr_assert_eq(sluice_window_acquire_at(&w, 3, 500 * MS + d.retry_after_ns - 1, NULL), 0);
	cr_assert_eq(sluice_window_acquire_at(&w, 3, 500 * MS + d.retry_after_ns, NULL), 1);
	/* now 6 + 3 counted: 2 needs bucket 4 gone at 1.4 s */
	cr_assert_eq(sluice_window_acquire_at(&w, 2, 1200 * MS, &d), 0);
	cr_assert_eq(d.retry_after_ns, 200 * MS);
	sluice_window_destroy(&w);
}

struct bad_cfg {
	uint64_t limit, window_ns;
	uint32_t buckets;
	int clock; /* 0 manual, 1 coarse */
	int want;
	uint32_t lease;
};

ParameterizedTestParameters(window, invalid_config)
{
	static struct bad_cfg params[] = {
		{ 0, SEC, 10, 0, SLUICE_ELIMIT, 0 },
		{ SLUICE_WINDOW_LIMIT_MAX + 1, SEC, 10, 0, SLUICE_ELIMIT, 0 },
		{ 10, SEC, 0, 0, SLUICE_EBUCKETS, 0 },
		{ 10, SEC * 4097, 4097, 0, SLUICE_EBUCKETS, 0 },
		{ 10, 0, 10, 0, SLUICE_EWINDOW, 0 },
		{ 10, SEC + 1, 10, 0, SLUICE_EWINDOW, 0 },  /* not whole ns per bucket */
		{ 10, 10 * MS, 10, 1, SLUICE_ERESOLUTION, 0 }, /* 1 ms < coarse tick */
		{ 1, 1, 1, 0, 0, 0 },                      /* smallest valid */
		{ SLUICE_WINDOW_LIMIT_MAX, 4096, 4096, 0, 0, SLUICE_WINDOW_LEASE_MAX }, /* largest */
		{ 10, SEC, 10, 0, SLUICE_ELEASE, SLUICE_WINDOW_LEASE_MAX + 1 },
		{ 10, SEC, 10, 0, 0, SLUICE_WINDOW_LEASE_MAX },
	};
	return cr_make_param_array(struct bad_cfg, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct bad_cfg *p, window, invalid_config)
{
	if (p->clock && sluice_clock_resolution_ns(&sluice_clock_coarse) <= 1 * MS)
		cr_skip_test("coarse clock is fine-grained here");
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 0);
	sluice_window_config_t cfg = { .limit = p->limit, .window_ns = p->window_ns,
		                       .buckets = p->buckets,
		                       .clock = p->clock ? &sluice_clock_coarse : &m,
		                       .lease = p->lease };
	sluice_window_t w, before;
	memset(&w, 0xab, sizeof(w));
	memcpy(&before, &w, sizeof(w));
	int rc = sluice_window_init(&w, &cfg);
	cr_assert_eq(rc, p->want, "limit=%llu W=%llu N=%u: got %s (%s), want %s",
	             (unsigned long long)p->limit, (unsigned long long)p->window_ns, p->buckets,
	             sluice_err_name(rc), sluice_strerror(rc), sluice_err_name(p->want));
	if (rc == 0)
		sluice_window_destroy(&w);
	else
		cr_assert_eq(memcmp(&w, &before, sizeof(w)), 0, "a failed init must not touch it");
}

Test(window, null_arguments)
{
	sluice_window_t w;
	sluice_window_config_t cfg = { .limit = 1, .window_ns = SEC, .buckets = 1 };
	cr_assert_eq(sluice_window_init(NULL, &cfg), SLUICE_EINVAL);
	cr_assert_eq(sluice_window_init(&w, NULL), SLUICE_EINVAL);
	sluice_window_destroy(NULL);
	cr_assert_eq(sluice_window_size(), sizeof(sluice_window_t));
}

Test(window, refund)
{
	sluice_window_t w;
	make(&w, 10, SEC, 10);
	sluice_decision_t a, b, d;
	cr_assert_eq(sluice_window_acquire_at(&w, 6, 150 * MS, &a), 1); /* bucket 1 */
	cr_assert_eq(sluice_window_acquire_at(&w, 4, 160 * MS, &b), 1);
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 170 * MS, &d), 0);
	cr_assert_eq(sluice_window_refund(&w, 4, &b), 0, "open bucket: given back");
	cr_assert_eq(counted_at(&w, 180 * MS), 6);
	cr_assert_eq(sluice_window_refund(&w, 0, &b), SLUICE_EINVAL);
	cr_assert_eq(sluice_window_refund(&w, 7, &a), SLUICE_EINVAL, "more than counted");
	/* bucket 1 sealed when bucket 2 opens: its count is final */
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 250 * MS, &d), 1);
	cr_assert_eq(sluice_window_refund(&w, 6, &a), SLUICE_ECANCEL);
	cr_assert_eq(counted_at(&w, 260 * MS), 7, "kept: fewer admissions, not more");
	/* once bucket 1 has left the window there is nothing to give back */
	cr_assert_eq(counted_at(&w, 1150 * MS), 1);
	cr_assert_eq(sluice_window_refund(&w, 6, &a), SLUICE_EEXPIRED);
	cr_assert_eq(counted_at(&w, 1160 * MS), 1);
	sluice_window_destroy(&w);
}

/* A lease is spent only in its own epoch; near the limit takes shrink to n,
 * so one thread on one CPU still gets exactly L per window. */
Test(window, lease_shrinks_to_exact_near_limit)
{
	sluice_window_t w;
	make_leased(&w, 1000, SEC, 10, 64);
	pin_to_this_cpu();
	uint64_t admitted = 0;
	for (int i = 0; i < 1100; i++)
		admitted += (uint64_t)sluice_window_acquire_at(&w, 1, 50 * MS, NULL);
	cr_assert_eq(admitted, 1000, "one CPU, n = 1: exactly L (got %llu)",
	             (unsigned long long)admitted);
	cr_assert_eq(counted_at(&w, 50 * MS), 1000, "no lease left over");
	/* A new epoch: the old lease (none left) cannot be spent there, and the
	 * window is still full until bucket 0 leaves. */
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 150 * MS, NULL), 0);
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 1050 * MS, NULL), 1);
	sluice_window_destroy(&w);
}

/* A lease from epoch h is dead in h+1: the permits stay counted in h's
 * bucket (under-admission), and never admit in another epoch. */
Test(window, lease_dies_with_its_epoch)
{
	sluice_window_t w;
	make_leased(&w, 1000, SEC, 10, 64);
	pin_to_this_cpu();
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 10 * MS, NULL), 1);
	uint64_t taken = counted_at(&w, 10 * MS);
	cr_assert_gt(taken, 1, "the first take must lease some extra (%llu)",
	             (unsigned long long)taken);
	cr_assert_leq(taken, 1 + 64);
	/* next bucket: the cell's lease is tagged with epoch 0 */
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 110 * MS, NULL), 1);
	cr_assert_gt(counted_at(&w, 110 * MS), taken, "epoch 1 took from its own bucket");
	sluice_window_destroy(&w);
}

/* Deny-mostly traffic: a refusal reads and never writes a shared word. */
Test(window, lease_refusal_writes_nothing)
{
	sluice_window_t w;
	make_leased(&w, 100, SEC, 10, 8);
	pin_to_this_cpu();
	while (sluice_window_acquire_at(&w, 1, 20 * MS, NULL) == 1)
		;
	uint64_t head = atomic_load(&w.head), cur = atomic_load(&w.cur);
	uint64_t slot = atomic_load(&w.slots[0].word);
	uint64_t cells[SLUICE_WINDOW_BUCKETS_MAX];
	for (uint32_t i = 0; i <= w.cell_mask && i < SLUICE_WINDOW_BUCKETS_MAX; i++)
		cells[i] = atomic_load(&w.cells[i].word);
	sluice_decision_t d;
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(sluice_window_acquire_at(&w, 1 + (uint64_t)i % 3, 30 * MS, &d), 0);
	cr_assert_eq(d.retry_after_ns, SEC - 30 * MS, "bucket 0 leaving frees the window");
	cr_assert_eq(atomic_load(&w.head), head);
	cr_assert_eq(atomic_load(&w.cur), cur);
	cr_assert_eq(atomic_load(&w.slots[0].word), slot, "the bucket word was written by a refusal");
	for (uint32_t i = 0; i <= w.cell_mask && i < SLUICE_WINDOW_BUCKETS_MAX; i++)
		cr_assert_eq(atomic_load(&w.cells[i].word), cells[i], "cell %u written", i);
	sluice_window_destroy(&w);
}

/* Refunds work on the bucket word, leases or not. */
Test(window, lease_refund)
{
	sluice_window_t w;
	make_leased(&w, 10, SEC, 10, 4);
	pin_to_this_cpu();
	sluice_decision_t a, d;
	cr_assert_eq(sluice_window_acquire_at(&w, 5, 150 * MS, &a), 1);
	cr_assert_eq(sluice_window_refund(&w, 5, &a), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(sluice_window_acquire_at(&w, 1, 160 * MS, &d), 1, "permit %d", i);
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 170 * MS, &d), 0);
	sluice_window_destroy(&w);
}

/* A CPU that stops deciding keeps its lease; 2^32 epochs later the 32-bit
 * tag matches again.  The cell's full epoch tells them apart, so the window
 * still admits at most L. */
Test(window, idle_lease_cannot_pass_for_a_wrapped_epoch)
{
	sluice_window_t w;
	make_leased(&w, 100, 1000, 1, 64);
	pin_to_this_cpu();
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 1000, NULL), 1); /* epoch 1 */
	uint64_t wrapped = (1ULL << 32) + 1;                          /* same tag */
	(void)sluice_window_available_at(&w, (1ULL << 32) * 1000);        /* head moves */
	uint64_t admitted = 0;
	for (int i = 0; i < 1000; i++)
		admitted += (uint64_t)sluice_window_acquire_at(&w, 1, wrapped * 1000, NULL);
	cr_assert_leq(admitted, 100, "epoch 2^32 + 1 admitted %llu with L = 100",
	              (unsigned long long)admitted);
	cr_assert_eq(admitted, 100, "and every permit of it (got %llu)",
	             (unsigned long long)admitted);
	sluice_window_destroy(&w);
}

/* ---- set_limit -------------------------------------------------------- */

Test(window, set_limit_keeps_every_bucket)
{
	sluice_window_t w;
	make(&w, 10, SEC, 10);
	sluice_decision_t d;
	/* 4 in bucket 1, 6 in bucket 5 */
	cr_assert_eq(sluice_window_acquire_at(&w, 4, 100 * MS, NULL), 1);
	cr_assert_eq(sluice_window_acquire_at(&w, 6, 500 * MS, NULL), 1);
	cr_assert_eq(sluice_window_available_at(&w, 500 * MS), 0);
	/* lower below what the window counts: refusals until enough leaves */
	cr_assert_eq(sluice_window_set_limit(&w, 5), 0);
	cr_assert_eq(sluice_window_available_at(&w, 600 * MS), 0);
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 600 * MS, &d), 0);
	cr_assert_eq(d.limit, 5);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(d.retry_after_ns, 900 * MS, "bucket 5 (6 permits) must leave, at 1.5 s");
	cr_assert_eq(sluice_window_acquire_at(&w, 6, 600 * MS, &d), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_window_available_at(&w, 1100 * MS), 0, "bucket 1 left: 6 still > 5");
	cr_assert_eq(sluice_window_available_at(&w, 1500 * MS), 5, "both left: the new limit");
	cr_assert_eq(sluice_window_acquire_at(&w, 5, 1500 * MS, NULL), 1);
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 1500 * MS, NULL), 0);
	/* raise: exactly the difference */
	cr_assert_eq(sluice_window_set_limit(&w, 8), 0);
	cr_assert_eq(sluice_window_available_at(&w, 1600 * MS), 3);
	cr_assert_eq(sluice_window_acquire_at(&w, 4, 1600 * MS, NULL), 0);
	cr_assert_eq(sluice_window_acquire_at(&w, 3, 1600 * MS, &d), 1);
	cr_assert_eq(d.limit, 8);
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 1600 * MS, NULL), 0, "nothing minted");
	/* invalid: the init's code, nothing changes */
	cr_assert_eq(sluice_window_set_limit(&w, 0), SLUICE_ELIMIT);
	cr_assert_eq(sluice_window_set_limit(&w, SLUICE_WINDOW_LIMIT_MAX + 1), SLUICE_ELIMIT);
	cr_assert_eq(sluice_window_set_limit(NULL, 3), SLUICE_EINVAL);
	cr_assert_eq(sluice_window_available_at(&w, 2500 * MS), 8 - 3, "bucket 15 left, 16 stays");
	sluice_window_destroy(&w);
}

Test(window, available_near_2_64_and_after_jumps)
{
	sluice_window_t w;
	const uint64_t W = SEC;
	make(&w, 10, W, 10);
	uint64_t t = (UINT64_MAX / (W / 10) - 1) * (W / 10); /* the last bucket but one */
	cr_assert_eq(sluice_window_available_at(&w, t), 10);
	cr_assert_eq(sluice_window_acquire_at(&w, 7, t, NULL), 1);
	cr_assert_eq(sluice_window_available_at(&w, t + 1), 3);
	cr_assert_eq(sluice_window_available_at(&w, 5 * SEC), 3, "a step back reads the newest bucket");
	cr_assert_eq(sluice_window_acquire_at(&w, 2, UINT64_MAX, NULL), 1);
	cr_assert_eq(sluice_window_available_at(&w, UINT64_MAX), 1);
	cr_assert_eq(sluice_window_available_at(&w, 0), 1);
	sluice_window_destroy(&w);
}

/*
 * The inline path's one test for "open" (window.h: (c - tag | s - tag) >>
 * 30) must send a sealed bucket to the slow path.  The state that needs
 * it: an advancer (a decision at H + 1) has sealed H's bucket and not yet
 * moved head on, and a decision at H comes in.  It must not count into
 * the sealed bucket (whose count is final: the next epoch's base sums it
 * and an admission after that is one the window never sees); it helps
 * move head to H + 1 and is decided there (time never runs back).  The
 * stall puts the second decision exactly there: just before the
 * advancer's head CAS, after its seal (test_stall.h).  A filter that let
 * SEALED through (say >> 32) admits it at H, into the sealed bucket.
 */
#define SEAL_H 5ULL
static sluice_decision_t sealed_d;
static int sealed_rc;

static void attack_in_the_sealed_bucket(void *arg)
{
	sluice_window_t *w = arg;
	sealed_rc = sluice_window_acquire_at(w, 1, SEAL_H, &sealed_d);
}

Test(window, sealed_bucket_takes_nothing_from_the_inline_path)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
	sluice_window_t *w = stall_page(); /* the stall protects that page */
	cr_assert_not_null(w);
	sluice_clock_manual_init(&mclock, 0);
	/* L = 2 over N = 2 buckets of 1 ns: reading == epoch */
	sluice_window_config_t cfg = { .limit = 2, .window_ns = 2, .buckets = 2, .clock = &mclock };
	cr_assert_eq(sluice_window_init(w, &cfg), 0);
	cr_assert_eq(sluice_window_acquire_at(w, 1, SEAL_H, NULL), 1);
	stall_arm(&w->head, sizeof(w->head), attack_in_the_sealed_bucket, w);
	sluice_decision_t d;
	int rc = sluice_window_acquire_at(w, 1, SEAL_H + 1, &d);
	cr_assert(stall_fired(), "the advancer never wrote head");
	cr_assert_eq(sealed_rc, 1, "base 1 + 1 <= 2 at H + 1");
	cr_assert_eq(sealed_d.now_ns, SEAL_H + 1,
	             "decided at %llu: counted into H's sealed bucket",
	             (unsigned long long)sealed_d.now_ns);
	uint64_t s = atomic_load(&w->slots[SEAL_H & w->mask].word);
	cr_assert(s & SLUICE__SLOT_SEALED);
	cr_assert_eq(s & SLUICE__SLOT_OWN, 1, "H's count changed after its seal");
	/* the advancer, decided after: base 1 + own 1 + 1 > 2 */
	cr_assert_eq(rc, 0);
	cr_assert_eq(sluice_window_available_at(w, SEAL_H + 1), 0);
	sluice_window_destroy(w);
	stall_page_free(w);
}

/* ---- readings across a change, and refunds too old to give back --------- */

/*
 * A change, then a decision whose reading is older than the newest bucket:
 * it is judged in that bucket (CLOCK JUMPS), against the new limit, over
 * the N buckets ending there (window.h, READINGS ACROSS A CHANGE).
 */
Test(window, a_reading_older_than_a_change_is_judged_in_its_bucket)
{
	sluice_window_t w;
	make(&w, 10, SEC, 10);
	sluice_decision_t d;
	cr_assert_eq(sluice_window_acquire_at(&w, 3, 150 * MS, NULL), 1); /* bucket 1 */
	cr_assert_eq(sluice_window_acquire_at(&w, 3, 550 * MS, NULL), 1); /* bucket 5 */
	cr_assert_eq(sluice_window_set_limit(&w, 7), 0);
	cr_assert_eq(sluice_window_acquire_at(&w, 2, 10 * MS, &d), 0, "6 + 2 > 7");
	cr_assert_eq(d.now_ns, 500 * MS, "judged in the newest bucket");
	cr_assert_eq(d.limit, 7);
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 10 * MS, &d), 1);
	cr_assert_eq(sluice_window_set_limit(&w, 9), 0);
	cr_assert_eq(sluice_window_acquire_at(&w, 3, 520 * MS, &d), 0, "7 + 3 > 9");
	cr_assert_eq(sluice_window_acquire_at(&w, 2, 520 * MS, &d), 1, "the raise, no more");
	cr_assert_eq(sluice_window_available_at(&w, 10 * MS), 0);
	sluice_window_destroy(&w);
}

/*
 * A decision stalled across a change must not be judged against the limit
 * it read before it (fixed window: test_fixed.c, the same attack).  The
 * victim reads L = 100 and starts opening epoch A; just before its write
 * to cur the attack lowers L to 10, takes 1 in A (the new limit's first
 * admission) and 10 in A + 2, whose window (N = 2) no longer holds A.
 * The victim's reading is older than A + 2, so it decides there: against
 * 10 it is refused; against the 100 it read the window would hold 11.
 */
#define STALE_WIDTH 1000ULL
#define STALE_A 7ULL
static int stale_rc[2];

static void attack_lower_then_fill_a_later_epoch(void *arg)
{
	sluice_window_t *w = arg;
	cr_assert_eq(sluice_window_set_limit(w, 10), 0);
	stale_rc[0] = sluice_window_acquire_at(w, 1, STALE_A * STALE_WIDTH, NULL);
	stale_rc[1] = sluice_window_acquire_at(w, 10, (STALE_A + 2) * STALE_WIDTH, NULL);
}

Test(window, a_decision_stalled_across_a_change_is_judged_by_the_new_limit)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
	sluice_window_t *w = stall_page();
	cr_assert_not_null(w);
	sluice_clock_manual_init(&mclock, 0);
	sluice_window_config_t cfg = { .limit = 100, .window_ns = 2 * STALE_WIDTH, .buckets = 2,
		                       .clock = &mclock };
	cr_assert_eq(sluice_window_init(w, &cfg), 0);
	cr_assert_eq(sluice_window_acquire_at(w, 1, 0, NULL), 1);
	stall_arm(&w->cur, sizeof(w->cur), attack_lower_then_fill_a_later_epoch, w);
	sluice_decision_t d;
	int rc = sluice_window_acquire_at(w, 1, STALE_A * STALE_WIDTH + 5, &d);
	cr_assert(stall_fired(), "the victim never wrote cur");
	cr_assert_eq(stale_rc[0], 1);
	cr_assert_eq(stale_rc[1], 1);
	cr_assert_eq(rc, 0, "epochs A + 1, A + 2 hold 10 against a limit of 10: admitted "
	             "against d.limit %llu", (unsigned long long)d.limit);
	cr_assert_eq(d.limit, 10);
	cr_assert_eq(sluice_window_available_at(w, (STALE_A + 2) * STALE_WIDTH), 0);
	sluice_window_destroy(w);
	stall_page_free(w);
}

/*
 * A refund gives back exactly while its bucket is open; while the sealed
 * bucket is in the window, SLUICE_ECANCEL (its count is final, still
 * counted); from the epoch that leaves it out of the window on, its permits
 * count no more: SLUICE_EEXPIRED, not 0.  2^32 epochs later the bucket word
 * has the same 32-bit tag: the full epoch tells them apart.
 */
Test(window, refund_of_a_bucket_out_of_the_window_is_expired)
{
	sluice_window_t w;
	make(&w, 10, SEC, 10); /* buckets of 100 ms */
	sluice_decision_t a, d;
	cr_assert_eq(sluice_window_acquire_at(&w, 5, 150 * MS, &a), 1); /* epoch 1 */
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 199 * MS, &d), 1, "the bucket's last ns");
	cr_assert_eq(sluice_window_refund(&w, 1, &a), 0, "open: the last epoch it gives back");
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 1099 * MS, &d), 1); /* epoch 10 */
	cr_assert_eq(sluice_window_refund(&w, 1, &a), SLUICE_ECANCEL, "the last epoch counting it");
	cr_assert_eq(counted_at(&w, 1099 * MS), 6, "kept");
	cr_assert_eq(sluice_window_acquire_at(&w, 1, 1100 * MS, &d), 1); /* epoch 11 */
	cr_assert_eq(sluice_window_refund(&w, 1, &a), SLUICE_EEXPIRED, "the first it cannot");
	cr_assert_eq(counted_at(&w, 1100 * MS), 2, "nothing given to the window");
	uint64_t far = (1ULL + (1ULL << 32)) * 100 * MS + 1;
	cr_assert_eq(sluice_window_acquire_at(&w, 10, far, &d), 1);
	cr_assert_eq(sluice_window_refund(&w, 1, &a), SLUICE_EEXPIRED, "2^32 epochs later");
	cr_assert_eq(counted_at(&w, far), 10, "nothing given to the reused bucket");
	cr_assert_eq(sluice_window_refund(&w, 3, &d), 0, "the open bucket still gives back");
	sluice_window_destroy(&w);
}
