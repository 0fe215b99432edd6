/* SPDX-License-Identifier: MIT */
/*
 * test_window_threads.c - many threads on one ring, the clock moved by
 * another thread: the per-epoch ledger of admissions must respect the
 * header's bound in every run of N consecutive epochs.
 *
 * Each decider records (epoch, n) of every admission in its own buffer; the
 * epoch is taken from the decision's now_ns, the limiter's own timeline
 * (a reading older than the newest bucket counts in the newest bucket).
 * The clock thread steps the manual clock forward by up to half a bucket,
 * and now and then back by up to two buckets, so deciders race across
 * thousands of bucket rollovers with stale and out-of-order readings.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "sluice/sluice.h"
#include "set_limit_load.h"
#include "test_pace.h"

#define WIDTH 1000ULL /* ns per bucket */
#define BUCKETS 8u
#define LIMIT 24u
#define N_MAX 3u
#define CLOCK_STEPS 6000
#define RECORD_CAP (1u << 20)

TestSuite(window_threads, .timeout = 120);

struct record {
	uint64_t epoch;
	uint32_t n;
};

struct decider {
	pthread_t tid;
	sluice_window_t *w;
	struct record *rec;
	size_t nrec;
	uint64_t refused;
	uint64_t seed;
	_Atomic uint64_t decisions; /* read by the clock thread for pacing */
};

static struct decider *deciders;
static int ndeciders;

static sluice_clock_t mclock;
static _Atomic int running;

static void *decider_main(void *arg)
{
	struct decider *me = arg;
	uint64_t x = me->seed;
	while (atomic_load_explicit(&running, memory_order_relaxed)) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t n = 1 + x % N_MAX;
		sluice_decision_t d;
		int rc = sluice_window_acquire(me->w, n, &d);
		if (rc == 1) {
			if (me->nrec < RECORD_CAP)
				me->rec[me->nrec++] = (struct record){ d.now_ns / WIDTH, (uint32_t)n };
		} else {
			cr_assert_eq(rc, 0, "acquire failed: %s", sluice_strerror(rc));
			me->refused++;
		}
		uint64_t k = atomic_load_explicit(&me->decisions, memory_order_relaxed) + 1;
		atomic_store_explicit(&me->decisions, k, memory_order_relaxed);
		if (k % 8 == 0)
			sched_yield(); /* more threads than cores: let the clock move */
	}
	return NULL;
}

static void *clock_main(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg | 1;
	for (int i = 0; i < CLOCK_STEPS; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t now = sluice_clock_now(&mclock);
		if (x % 50 == 0 && now > 2 * WIDTH)
			sluice_clock_manual_set(&mclock, now - x % (2 * WIDTH));
		else
			sluice_clock_manual_advance(&mclock, x % (WIDTH / 2));
		/* pace: wait until the deciders made a few decisions at this
		 * time, so the run is bounded whatever the scheduler does */
		PACE_WAIT(deciders, ndeciders);
	}
	atomic_store_explicit(&running, 0, memory_order_relaxed);
	return NULL;
}

struct params {
	int threads;
	uint32_t lease; /* per-CPU leases of up to this many; 0 = none */
};

ParameterizedTestParameters(window_threads, ledger_respects_bound)
{
	static struct params p[] = {
		{ 2, 0 }, { 4, 0 }, { 8, 0 }, { 2, 4 }, { 8, 4 }, { 4, 64 },
	};
	return cr_make_param_array(struct params, p, sizeof(p) / sizeof(p[0]));
}

ParameterizedTest(struct params *p, window_threads, ledger_respects_bound)
{
	sluice_clock_manual_init(&mclock, 1000 * WIDTH);
	sluice_window_t w;
	sluice_window_config_t cfg = { .limit = LIMIT, .window_ns = WIDTH * BUCKETS,
		                       .buckets = BUCKETS, .clock = &mclock,
		                       .lease = p->lease };
	cr_assert_eq(sluice_window_init(&w, &cfg), 0);

	struct decider *d = calloc((size_t)p->threads, sizeof(*d));
	cr_assert_not_null(d);
	deciders = d;
	ndeciders = p->threads;
	atomic_store(&running, 1);
	for (int i = 0; i < p->threads; i++) {
		d[i].w = &w;
		d[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
		d[i].rec = malloc(sizeof(struct record) * RECORD_CAP);
		cr_assert_not_null(d[i].rec);
		cr_assert_eq(pthread_create(&d[i].tid, NULL, decider_main, &d[i]), 0);
	}
	pthread_t clock_tid;
	cr_assert_eq(pthread_create(&clock_tid, NULL, clock_main, (void *)(uintptr_t)p->threads), 0);
	pthread_join(clock_tid, NULL);
	for (int i = 0; i < p->threads; i++)
		pthread_join(d[i].tid, NULL);

	/* ledger: admitted permits per epoch */
	uint64_t lo = UINT64_MAX, hi = 0, refused = 0, decisions = 0;
	for (int i = 0; i < p->threads; i++) {
		cr_assert_lt(d[i].nrec, RECORD_CAP, "record buffer overflowed");
		for (size_t k = 0; k < d[i].nrec; k++) {
			lo = d[i].rec[k].epoch < lo ? d[i].rec[k].epoch : lo;
			hi = d[i].rec[k].epoch > hi ? d[i].rec[k].epoch : hi;
		}
		refused += d[i].refused;
		decisions += d[i].nrec + d[i].refused;
	}
	cr_assert_gt(hi - lo, 500, "the run must cross many bucket rollovers (%llu)",
	             (unsigned long long)(hi - lo));
	uint64_t span = hi - lo + 1;
	uint64_t *per = calloc(span, sizeof(uint64_t));
	cr_assert_not_null(per);
	for (int i = 0; i < p->threads; i++)
		for (size_t k = 0; k < d[i].nrec; k++)
			per[d[i].rec[k].epoch - lo] += d[i].rec[k].n;

	const uint64_t bound = LIMIT; /* the header's bound */
	uint64_t worst = 0, admitted = 0;
	for (uint64_t e = 0; e < span; e++) {
		admitted += per[e];
		uint64_t sum = 0;
		for (uint64_t k = 0; k < BUCKETS && k <= e; k++)
			sum += per[e - k];
		worst = sum > worst ? sum : worst;
		cr_assert_leq(sum, bound, "%d threads: %llu admitted in the %u epochs ending at %llu",
		              p->threads, (unsigned long long)sum, BUCKETS,
		              (unsigned long long)(e + lo));
	}
	cr_assert_gt(refused, 0, "the limit must bite, or this tests nothing");
	cr_assert_gt(admitted, 10 * LIMIT);

	/* quiescent: the ring's count equals the ledger of its last N epochs
	 * (with leases it may count leased, unspent permits: never fewer) */
	uint64_t now = sluice_clock_now(&mclock);
	/* available is the room under the limit, or the calling CPU's own
	 * lease when that is larger (a decision here spends it first), so it
	 * reads the count only with no lease live: the run is over, so retire
	 * every cell's lease (white-box; their permits stay counted in the
	 * buckets, which is what is checked) */
	if (p->lease)
		for (uint32_t c = 0; c <= w.cell_mask; c++)
			atomic_store(&w.cells[c].epoch, UINT64_MAX);
	uint64_t counted = LIMIT - sluice_window_available_at(&w, now); /* <= LIMIT */
	uint64_t head = now / WIDTH > hi ? now / WIDTH : hi;
	uint64_t ledger = 0;
	for (uint64_t k = 0; k < BUCKETS && k <= head - lo; k++)
		if (head - k <= hi)
			ledger += per[head - k - lo];
	if (!p->lease)
		cr_assert_eq(counted, ledger, "ring count %llu vs ledger %llu",
		             (unsigned long long)counted, (unsigned long long)ledger);
	else
		cr_assert_geq(counted, ledger, "ring count %llu vs ledger %llu",
		              (unsigned long long)counted, (unsigned long long)ledger);
	if (p->lease) {
		/* leased but never spent: the header's per-epoch bound,
		 * cells * (B + n_max - 1) + T * B, over the N epochs counted */
		uint64_t cells = (uint64_t)w.cell_mask + 1;
		uint64_t waste = BUCKETS * (cells * (p->lease + N_MAX - 1) +
		                            (uint64_t)p->threads * p->lease);
		cr_assert_leq(counted - ledger, waste, "leases lost %llu > bound %llu",
		              (unsigned long long)(counted - ledger), (unsigned long long)waste);
	}
	cr_log_info("threads=%d lease=%u decisions=%llu admitted=%llu worst=%llu bound=%llu epochs=%llu",
	            p->threads, p->lease,
	            (unsigned long long)decisions, (unsigned long long)admitted,
	            (unsigned long long)worst, (unsigned long long)bound, (unsigned long long)span);

	for (int i = 0; i < p->threads; i++)
		free(d[i].rec);
	free(d);
	free(per);
	sluice_window_destroy(&w);
}

/*
 * set_limit under load (set_limit_load.h).  The clock thread also changes
 * the limit every few steps, through LIMITS below (lowering under what is
 * counted and raising past it); the header's SET_LIMIT bound, checked
 * exactly: in every run of N consecutive epochs the permits admitted total
 * at most the largest d.limit among that run's admissions.
 */
static const uint64_t LIMITS[] = { 24, 6, 40, 12, 3, 30 };
#define NLIMITS (sizeof(LIMITS) / sizeof(LIMITS[0]))
#define LCLOCK_STEPS 4000

static struct sl_decider *ldeciders;
static int nldeciders;

static int window_acquire_cb(void *w, uint64_t n, sluice_decision_t *d)
{
	return sluice_window_acquire(w, n, d);
}

static int window_set_cb(void *w, uint64_t limit)
{
	return sluice_window_set_limit(w, limit);
}

/* The newest epoch counted in, bracketed by head: after, head (an epoch
 * not opened yet counts nothing); before, head - 1 (every older one is
 * sealed). */
static uint64_t window_stamp_cb(void *w, int after)
{
	uint64_t h = atomic_load_explicit(&((sluice_window_t *)w)->head, memory_order_seq_cst);
	return after || h == 0 ? h : h - 1;
}

static void *lclock_main(void *arg)
{
	sluice_window_t *w = arg;
	uint64_t x = 0x9E3779B97F4A7C15ULL;
	for (int i = 0; i < LCLOCK_STEPS; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (i % 7 == 3)
			sl_set(w, window_set_cb, window_stamp_cb, LIMITS[(x >> 9) % NLIMITS]);
		sluice_clock_manual_advance(&mclock, x % (WIDTH / 2));
		PACE_WAIT(ldeciders, nldeciders);
	}
	atomic_store_explicit(&sl_running, 0, memory_order_relaxed);
	return NULL;
}

ParameterizedTestParameters(window_threads, set_limit_bound)
{
	static struct params p[] = {
		{ 2, 0 }, { 4, 0 }, { 4, 4 },
	};
	return cr_make_param_array(struct params, p, sizeof(p) / sizeof(p[0]));
}

ParameterizedTest(struct params *p, window_threads, set_limit_bound)
{
	sluice_clock_manual_init(&mclock, 1000 * WIDTH);
	sluice_window_t w;
	sluice_window_config_t cfg = { .limit = LIMITS[0], .window_ns = WIDTH * BUCKETS,
		                       .buckets = BUCKETS, .clock = &mclock,
		                       .lease = p->lease };
	cr_assert_eq(sluice_window_init(&w, &cfg), 0);
	nldeciders = p->threads;
	sl_changes_init(LIMITS[0]);
	ldeciders = sl_start(p->threads, &w, window_acquire_cb, WIDTH, N_MAX, 3);
	pthread_t clock_tid;
	cr_assert_eq(pthread_create(&clock_tid, NULL, lclock_main, &w), 0);
	sl_join(ldeciders, p->threads, clock_tid);
	cr_log_info("set_limit lease=%u", p->lease);
	sl_check(ldeciders, p->threads, LIMITS, NLIMITS, BUCKETS, 500);
	sl_free(ldeciders, p->threads);
	sluice_window_destroy(&w);
}
