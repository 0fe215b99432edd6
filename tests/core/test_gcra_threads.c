/* SPDX-License-Identifier: MIT */
/*
 * test_gcra_threads.c - many threads on one GCRA, the clock moved by another
 * thread: every interval of the recorded admissions must respect the
 * header's bound, admitted <= b + t/T.
 *
 * Each decider acquires (and now and then reserves a slot, and cancels a
 * booking it just made) and records (time, n) of every admission in its own
 * buffer: the time is the decision's now_ns (a reservation's: now_ns +
 * delay_ns, when its slot comes); a booking cancelled exactly is
 * removed from the record, one that could not be cancelled stays.  The
 * clock thread steps the manual clock forward, now and then jumps it ahead
 * (a full bucket: the race for the last permits) or back by up to two
 * tolerances, so deciders work with stale and out-of-order readings.  In the
 * "reconf" runs the clock thread also switches the rate and the burst back
 * and forth while the deciders run: the bound checked is then
 * max(b) + t / min(T), the header's bound across changes.  In the "stall"
 * runs a thread plays a reconfiguration preempted between its seal and its
 * unseal (white box, see stall_main()), so the deciders must finish it.
 *
 * The verifier is exact: with the admissions sorted by time and S the
 * prefix sums, interval [t_i, t_j] holds S_j - S_(i-1) permits and the bound
 * is (S_j T - t_j) - (S_(i-1) T - t_i) <= b T, so one pass with a running
 * minimum checks every interval.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "sluice/error.h"
#include "sluice/gcra.h"
#include "test_gcra_forge.h"
#include "test_pace.h"

#define T1 1000ULL  /* ns per permit */
#define B1 64u      /* burst: big, so full buckets are drained by racing admissions */
#define T2 2500ULL  /* the other configuration of the "reconf" runs */
#define B2 40u
#define N_MAX 3u
#define CLOCK_STEPS 20000
#define RECORD_CAP (1u << 17)

TestSuite(gcra_threads, .timeout = 240);

__extension__ typedef __int128 s128;

struct record {
	uint64_t t;
	uint64_t n; /* 0: cancelled exactly */
};

struct decider {
	pthread_t tid;
	sluice_gcra_t *g;
	struct record *rec;
	size_t nrec;
	uint64_t refused, cancelled, kept, seed;
	_Atomic uint64_t decisions; /* read by the clock thread for pacing */
	int failed;                 /* an unexpected return code */
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
		int rc;
		uint64_t slot;
		if ((x >> 20) % 4 == 0) {
			/* reserve a slot at most 2 permits away */
			rc = sluice_gcra_reserve(me->g, n, 2 * T1, &d);
			slot = d.now_ns + d.delay_ns;
		} else {
			rc = sluice_gcra_acquire(me->g, n, &d);
			slot = d.now_ns;
		}
		if (rc == 1) {
			if (me->nrec < RECORD_CAP)
				me->rec[me->nrec++] = (struct record){ slot, n };
			if ((x >> 30) % 8 == 0) {
				/* give it back at once: exact only if nobody booked
				 * in between (then it never happened) */
				int c = sluice_gcra_cancel(me->g, n, &d);
				if (c == 0) {
					me->rec[me->nrec - 1].n = 0;
					me->cancelled++;
				} else if (c == SLUICE_ECANCEL) {
					me->kept++;
				} else {
					me->failed = c;
				}
			}
		} else if (rc == 0) {
			me->refused++;
		} else {
			me->failed = rc;
		}
		uint64_t k = atomic_load_explicit(&me->decisions, memory_order_relaxed) + 1;
		atomic_store_explicit(&me->decisions, k, memory_order_relaxed);
		if (k % 8 == 0)
			sched_yield(); /* more threads than cores: let the clock move */
	}
	return NULL;
}

struct clock_args {
	sluice_gcra_t *g;
	int reconf;
	uint64_t seed;
	int failed;
	uint64_t changes;
};

/*
 * "reconf" runs: the clock thread switches rate or burst between the two
 * configurations at every other step, while the deciders run.  Not faster:
 * a change can only lose permits (the TAT never moves back), so changes
 * back and forth faster than the bucket refills would starve it (gcra.h).
 *
 * "stall" runs (white box): another thread plays a reconfiguration that is
 * preempted right after sealing the TAT.  It does what the library's writer
 * does, through the private fields, for a change to the same parameters
 * (start = the sealed TAT + 1 ns: a valid, conservative state), then yields
 * before its own unseal, so the deciders meet the seal and must finish the
 * change themselves.  It counts the unseals they did.
 */
struct stall_args {
	sluice_gcra_t *g;
	uint64_t changes, helped;
};

static void *stall_main(void *arg)
{
	struct stall_args *a = arg;
	sluice_gcra_t *g = a->g;
	while (atomic_load_explicit(&running, memory_order_relaxed)) {
		uint64_t e = atomic_load(&g->era);
		struct sluice__gcra_params *cur = &g->params[e & 1], *next = &g->params[(e + 1) & 1];
		gcra_forge_params(next, cur);
		uint64_t seal = SLUICE__GCRA_SEAL_MIN + ((e + 1) & SLUICE__GCRA_SEAL_MASK), a0, a1;
		/* the seal's full era, beside the TAT (helpers check it) */
		atomic_store(&g->seal_era, e + 1);
		do {
			a0 = atomic_load(&g->tat);
			a1 = a0 + 1;
			atomic_store(&g->start[(e + 1) & 1], a1);
			atomic_store(&next->era, e + 1);
		} while (!atomic_compare_exchange_strong(&g->tat, &a0, seal));
		/* "preempted": sealed until a decision helps, or 200 us (a few
		 * yields alone left no decision the chance to meet the seal on
		 * a loaded machine: "no decision met a seal", once, at load 2) */
		uint64_t until = sluice_clock_monotonic_ns() + 200000;
		while (atomic_load(&g->tat) == seal && sluice_clock_monotonic_ns() < until)
			sched_yield();
		uint64_t prev = e;
		atomic_compare_exchange_strong(&g->era, &prev, e + 1);
		if (!atomic_compare_exchange_strong(&g->tat, &seal, a1))
			a->helped++; /* a decision unsealed it first */
		a->changes++;
		for (int k = 0; k < 16; k++)
			sched_yield(); /* let the bucket refill between changes */
	}
	return NULL;
}

static void *clock_main(void *arg)
{
	struct clock_args *a = arg;
	uint64_t x = a->seed | 1;
	int second = 0;
	for (int i = 0; i < CLOCK_STEPS; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t now = sluice_clock_now(&mclock);
		if (x % 50 == 0)
			sluice_clock_manual_set(&mclock, now - x % (2 * B1 * T1)); /* back */
		else if (x % 8 == 1)
			sluice_clock_manual_advance(&mclock, 2 * B1 * T2); /* full bucket */
		else
			sluice_clock_manual_advance(&mclock, x % T1);
		if (a->reconf && i % 2 == 0) {
			int rc = (x >> 8) & 1 ? sluice_gcra_set_rate(a->g, 1, second ? T1 : T2)
			                      : sluice_gcra_set_burst(a->g, second ? B1 : B2);
			if (rc != 0)
				a->failed = rc;
			second = !second;
			a->changes++;
		}
		/* pace: wait until the deciders made a few decisions at this
		 * time, so the run is bounded whatever the scheduler does */
		PACE_WAIT(deciders, ndeciders);
	}
	atomic_store_explicit(&running, 0, memory_order_relaxed);
	return NULL;
}

static int by_time(const void *a, const void *b)
{
	const struct record *x = a, *y = b;
	return x->t < y->t ? -1 : x->t > y->t;
}

struct params {
	int threads;
	int reconf; /* 0 none, 1 set_rate/set_burst, 2 stalled writer */
};

ParameterizedTestParameters(gcra_threads, every_interval_respects_bound)
{
	static struct params p[] = {
		{ 2, 0 }, { 4, 0 }, { 8, 0 }, { 2, 1 }, { 4, 1 }, { 8, 1 }, { 2, 2 }, { 4, 2 }, { 8, 2 },
	};
	return cr_make_param_array(struct params, p, sizeof(p) / sizeof(p[0]));
}

ParameterizedTest(struct params *p, gcra_threads, every_interval_respects_bound)
{
	sluice_clock_manual_init(&mclock, 1000 * B1 * T2);
	sluice_gcra_t g;
	sluice_gcra_config_t cfg = { .rate = 1, .period_ns = T1, .burst = B1, .clock = &mclock };
	cr_assert_eq(sluice_gcra_init(&g, &cfg), 0);

	struct decider *d = calloc((size_t)p->threads, sizeof(*d));
	cr_assert_not_null(d);
	deciders = d;
	ndeciders = p->threads;
	atomic_store(&running, 1);
	for (int i = 0; i < p->threads; i++) {
		d[i].g = &g;
		d[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
		d[i].rec = malloc(sizeof(struct record) * RECORD_CAP);
		cr_assert_not_null(d[i].rec);
		cr_assert_eq(pthread_create(&d[i].tid, NULL, decider_main, &d[i]), 0);
	}
	struct stall_args sa = { .g = &g };
	pthread_t stall_tid;
	if (p->reconf == 2)
		cr_assert_eq(pthread_create(&stall_tid, NULL, stall_main, &sa), 0);
	struct clock_args ca = { .g = &g, .reconf = p->reconf == 1,
		                 .seed = (uint64_t)p->threads * 77 };
	pthread_t clock_tid;
	cr_assert_eq(pthread_create(&clock_tid, NULL, clock_main, &ca), 0);
	pthread_join(clock_tid, NULL);
	for (int i = 0; i < p->threads; i++)
		pthread_join(d[i].tid, NULL);
	if (p->reconf == 2) {
		pthread_join(stall_tid, NULL);
		cr_assert_gt(sa.helped, 0, "no decision met a seal in %llu stalled changes",
		             (unsigned long long)sa.changes);
	}
	cr_assert_eq(ca.failed, 0, "reconfiguration failed: %s", sluice_strerror(ca.failed));

	/* one ledger, sorted by time */
	size_t total = 0;
	uint64_t refused = 0, cancelled = 0, kept = 0;
	for (int i = 0; i < p->threads; i++) {
		cr_assert_eq(d[i].failed, 0, "thread %d: %s", i, sluice_strerror(d[i].failed));
		cr_assert_lt(d[i].nrec, RECORD_CAP, "record buffer overflowed");
		total += d[i].nrec;
		refused += d[i].refused;
		cancelled += d[i].cancelled;
		kept += d[i].kept;
	}
	struct record *all = malloc(sizeof(*all) * (total ? total : 1));
	cr_assert_not_null(all);
	size_t k = 0;
	for (int i = 0; i < p->threads; i++)
		for (size_t j = 0; j < d[i].nrec; j++)
			all[k++] = d[i].rec[j];
	qsort(all, total, sizeof(*all), by_time);

	/* b + t/T (reconf: max(b) + t/min(T)) over every interval */
	const uint64_t T = T1, b = B1; /* T1 < T2 and B1 > B2 */
	s128 S = 0, best_min = 0, worst = -(s128)b * T;
	uint64_t admitted = 0;
	int have = 0;
	for (size_t j = 0; j < total; j++) {
		if (all[j].n == 0)
			continue;
		s128 before = S * T - (s128)all[j].t;
		if (!have || before < best_min)
			best_min = before;
		have = 1;
		S += all[j].n;
		admitted += all[j].n;
		s128 v = (S * T - (s128)all[j].t) - best_min - (s128)b * T;
		if (v > worst)
			worst = v;
		cr_assert(v <= 0, "%d threads: %lld ns over b + t/T at t=%llu", p->threads, (long long)v,
		          (unsigned long long)all[j].t);
	}
	uint64_t span = total ? all[total - 1].t - all[0].t : 0;
	cr_assert_gt(span, 1000 * T, "the run must cover many intervals (%llu ns)",
	             (unsigned long long)span);
	cr_assert_gt(refused, 0, "the limit must bite, or this tests nothing");
	cr_assert_gt(admitted, 200 * b, "admitted %llu", (unsigned long long)admitted);
	cr_assert_gt(cancelled + kept, 0);
	if (p->reconf != 1)
		cr_assert_geq(worst, -(s128)T, "the racing threads must fill the bound (%lld)",
		              (long long)worst);
	cr_log_info("threads=%d reconf=%d changes=%llu helped=%llu admitted=%llu refused=%llu "
	            "cancelled=%llu kept=%llu worst=%lld span=%llu",
	            p->threads, p->reconf, (unsigned long long)(ca.changes + sa.changes),
	            (unsigned long long)sa.helped,
	            (unsigned long long)admitted, (unsigned long long)refused,
	            (unsigned long long)cancelled, (unsigned long long)kept, (long long)worst,
	            (unsigned long long)span);

	for (int i = 0; i < p->threads; i++)
		free(d[i].rec);
	free(d);
	free(all);
	sluice_gcra_destroy(&g);
}
