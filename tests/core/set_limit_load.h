/* SPDX-License-Identifier: MIT */
/*
 * set_limit_load.h - set_limit under load, for the windowed limiters' tests
 * (test_fixed.c: the fixed window; test_window_threads.c: the ring).
 *
 * Deciders take 1..n_max permits from one limiter while the test's clock
 * thread moves a manual clock (paced on their progress, test_pace.h) and
 * changes the limit every few steps.  Every admission records its epoch
 * (d.now_ns / width), its n and the limit it was judged against (d.limit).
 * sl_check() then checks the header's SET_LIMIT bound exactly: in every run
 * of @runs consecutive epochs (1 for the fixed window, N for a ring of N
 * buckets) the permits admitted total at most the largest d.limit among
 * that run's admissions.  Every d.limit must be one that was set, several
 * must be seen, the limit must refuse some and some runs must reach their
 * bound, or the check tested nothing.  It checks the tighter READINGS
 * ACROSS A CHANGE bound too (below).
 */
#ifndef SLUICE_SET_LIMIT_LOAD_H
#define SLUICE_SET_LIMIT_LOAD_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "sluice/sluice.h"

#define SL_RECORD_CAP (1u << 18)

struct sl_record {
	uint64_t epoch;
	uint32_t n, limit;
};

struct sl_decider {
	pthread_t tid;
	void *limiter;
	int (*acquire)(void *limiter, uint64_t n, sluice_decision_t *d);
	uint64_t width, n_max, seed;
	struct sl_record *rec;
	size_t nrec;
	uint64_t refused;
	int err;
	_Atomic uint64_t decisions; /* PACE_WAIT's counter */
};

/* Cleared by the clock thread when its steps are done. */
static _Atomic int sl_running;

static void *sl_decider_main(void *arg)
{
	struct sl_decider *me = arg;
	uint64_t x = me->seed;
	while (atomic_load_explicit(&sl_running, memory_order_relaxed)) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t n = 1 + x % me->n_max;
		sluice_decision_t d;
		int rc = me->acquire(me->limiter, n, &d);
		if (rc == 1 && me->nrec < SL_RECORD_CAP)
			me->rec[me->nrec++] = (struct sl_record){ d.now_ns / me->width, (uint32_t)n,
				                                  (uint32_t)d.limit };
		else if (rc == 0)
			me->refused++;
		else if (rc != SLUICE_ETOOBIG && !me->err)
			me->err = rc; /* ETOOBIG: n above a lowered limit */
		uint64_t k = atomic_load_explicit(&me->decisions, memory_order_relaxed) + 1;
		atomic_store_explicit(&me->decisions, k, memory_order_relaxed);
		if (k % 8 == 0)
			sched_yield();
	}
	return NULL;
}

/* @threads deciders on @limiter, started (seeds from @salt); free with sl_free(). */
static struct sl_decider *sl_start(int threads, void *limiter,
                                   int (*acquire)(void *, uint64_t, sluice_decision_t *),
                                   uint64_t width, uint64_t n_max, uint64_t salt)
{
	struct sl_decider *d = calloc((size_t)threads, sizeof(*d));
	cr_assert_not_null(d);
	atomic_store(&sl_running, 1);
	for (int i = 0; i < threads; i++) {
		d[i].limiter = limiter;
		d[i].acquire = acquire;
		d[i].width = width;
		d[i].n_max = n_max;
		d[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + salt);
		d[i].rec = malloc(sizeof(struct sl_record) * SL_RECORD_CAP);
		cr_assert_not_null(d[i].rec);
		cr_assert_eq(pthread_create(&d[i].tid, NULL, sl_decider_main, &d[i]), 0);
	}
	return d;
}

/* Join the clock thread @clock_tid, then the deciders. */
static void sl_join(struct sl_decider *d, int threads, pthread_t clock_tid)
{
	pthread_join(clock_tid, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(d[i].tid, NULL);
}

/*
 * READINGS ACROSS A CHANGE (fixed.h, window.h), checked exactly by sl_check():
 * every run of @runs epochs holds at most the largest limit in force in its
 * newest epoch that counted anything.  The clock thread makes each change with
 * sl_set(), which brackets its stamp (the newest epoch counted in) with
 * the caller's readings before and after: change i is taken as in force
 * on [before_i, after_(i+1)], which contains its true span, so the check
 * is looser than the statement, never stricter.  sl_changes_init() first.
 */
struct sl_change {
	uint64_t limit, before, after;
};
#define SL_CHANGES_CAP 4096
static struct sl_change sl_changes[SL_CHANGES_CAP];
static size_t sl_nchanges;

static void sl_changes_init(uint64_t limit)
{
	sl_changes[0] = (struct sl_change){ limit, 0, 0 };
	sl_nchanges = 1;
}

/* One change: @set(@limiter, @limit) between two readings of @stamp (the
 * newest epoch counted in: before, then after). */
static void sl_set(void *limiter, int (*set)(void *, uint64_t), uint64_t (*stamp)(void *, int),
                   uint64_t limit)
{
	cr_assert_lt(sl_nchanges, SL_CHANGES_CAP);
	uint64_t before = stamp(limiter, 0);
	cr_assert_eq(set(limiter, limit), 0);
	sl_changes[sl_nchanges++] = (struct sl_change){ limit, before, stamp(limiter, 1) };
}

static uint64_t sl_in_force_max(uint64_t e)
{
	uint64_t m = 0;
	for (size_t i = 0; i < sl_nchanges; i++) {
		int from = sl_changes[i].before <= e;
		int until = i + 1 == sl_nchanges || sl_changes[i + 1].after >= e;
		if (from && until && sl_changes[i].limit > m)
			m = sl_changes[i].limit;
	}
	return m;
}

/*
 * The bound (above) over every run of @runs epochs; the run must span more
 * than @min_span epochs.  @limits: every limit the clock thread sets.
 */
static void sl_check(const struct sl_decider *d, int threads, const uint64_t *limits,
                     size_t nlimits, uint64_t runs, uint64_t min_span)
{
	uint64_t lo = UINT64_MAX, hi = 0, refused = 0, seen = 0;
	for (int i = 0; i < threads; i++) {
		cr_assert_eq(d[i].err, 0, "acquire failed: %s", sluice_strerror(d[i].err));
		cr_assert_lt(d[i].nrec, SL_RECORD_CAP, "record buffer overflowed");
		refused += d[i].refused;
		for (size_t k = 0; k < d[i].nrec; k++) {
			struct sl_record r = d[i].rec[k];
			lo = r.epoch < lo ? r.epoch : lo;
			hi = r.epoch > hi ? r.epoch : hi;
			int known = 0;
			for (size_t j = 0; j < nlimits; j++)
				if (r.limit == limits[j]) {
					known = 1;
					seen |= 1u << j;
				}
			cr_assert(known, "d.limit %u was never set", r.limit);
		}
	}
	cr_assert_gt(hi - lo, min_span, "the run must cross many epochs");
	cr_assert_geq(__builtin_popcountll(seen), 4, "admissions judged against several limits");
	uint64_t span = hi - lo + 1;
	uint64_t *per = calloc(span, sizeof(uint64_t)), *lim = calloc(span, sizeof(uint64_t));
	cr_assert(per && lim);
	for (int i = 0; i < threads; i++)
		for (size_t k = 0; k < d[i].nrec; k++) {
			struct sl_record r = d[i].rec[k];
			per[r.epoch - lo] += r.n;
			if (r.limit > lim[r.epoch - lo])
				lim[r.epoch - lo] = r.limit;
		}
	uint64_t admitted = 0, tight = 0, tight_in_force = 0;
	for (uint64_t e = 0; e < span; e++) {
		admitted += per[e];
		uint64_t sum = 0, bound = 0;
		for (uint64_t k = 0; k < runs && k <= e; k++) {
			sum += per[e - k];
			bound = lim[e - k] > bound ? lim[e - k] : bound;
		}
		tight += sum && sum == bound;
		cr_assert_leq(sum, bound,
		              "%d threads: %llu admitted in the %llu epochs ending at %llu, "
		              "largest d.limit among them %llu",
		              threads, (unsigned long long)sum, (unsigned long long)runs,
		              (unsigned long long)(e + lo), (unsigned long long)bound);
		/* READINGS ACROSS A CHANGE, at the run's newest counting epoch
		 * (a run ending in an empty epoch holds no more than that one) */
		uint64_t in_force = per[e] ? sl_in_force_max(e + lo) : UINT64_MAX;
		tight_in_force += sum == in_force;
		cr_assert_leq(sum, in_force,
		              "%d threads: %llu admitted in the %llu epochs ending at %llu, "
		              "largest limit in force there %llu",
		              threads, (unsigned long long)sum, (unsigned long long)runs,
		              (unsigned long long)(e + lo), (unsigned long long)in_force);
	}
	cr_assert_gt(sl_nchanges, 50, "the run must make many changes");
	cr_assert_gt(tight_in_force, 0, "some runs must reach the limit in force");
	cr_assert_gt(refused, 0, "the limit must bite");
	cr_assert_gt(tight, 0, "some runs must reach their bound, or it tests nothing");
	cr_log_info("set_limit threads=%d runs=%llu admitted=%llu refused=%llu tight=%llu "
	            "changes=%zu", threads, (unsigned long long)runs, (unsigned long long)admitted,
	            (unsigned long long)refused, (unsigned long long)tight, sl_nchanges - 1);
	free(per);
	free(lim);
}


static void sl_free(struct sl_decider *d, int threads)
{
	for (int i = 0; i < threads; i++)
		free(d[i].rec);
	free(d);
}

#endif /* SLUICE_SET_LIMIT_LOAD_H */
