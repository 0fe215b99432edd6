/* SPDX-License-Identifier: MIT */
/*
 * test_inflight_threads.c - many threads on one concurrency limiter: the
 * slots really held never exceed K, every slot comes back, bad releases are
 * all counted, and a success orders the holders' work (K = 1 is a mutex).
 *
 * Each thread keeps its own stack of holdings and, at random, takes n in
 * 1..3 more or gives its newest holding back, so threads hold several
 * acquisitions at once and release in an order unrelated to other threads'.
 * "Really held" is measured outside the limiter: an independent atomic
 * shadow counter is incremented after a successful acquire and decremented
 * before the matching release, so at every point of its history the shadow
 * counts a subset of what the limiter holds (a unit is released only after
 * leaving the shadow; the next acquirer's acquire synchronizes with that
 * release, so it enters the shadow after).  The shadow therefore never
 * exceeds K if the limiter is exact, whatever the interleaving; a limiter
 * that loses an update (a load-check-store instead of a CAS) lets the true
 * holdings, and with them the shadow, pass K.
 *
 * No clock thread: time plays no part in this limiter's decisions (see
 * CLOCK JUMPS in sluice/inflight.h).  Every thread does a fixed number of
 * operations, yielding now and then so that more threads than cores
 * interleave; the run is bounded whatever the scheduler does.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <criterion/redirect.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "sluice/sluice.h"
#include "sluice/inflight.h"
#include "test_pace.h"

#define K 8u
#define N_MAX 3u
#define HOLD_MAX 6 /* per thread: 6 holdings of up to 3 want more than K */
#define OPS 200000

TestSuite(inflight_threads, .timeout = 240);

struct worker {
	pthread_t tid;
	sluice_inflight_t *f;
	uint64_t seed;
	int bad_every;      /* 0: never; else try a release of K+1 every this many ops */
	uint64_t acquired;  /* slots taken   */
	uint64_t released;  /* slots given back */
	uint64_t admitted, refused, errors;
	uint64_t max_shadow;
	uint64_t bad_tried;
};

static _Atomic uint64_t shadow;

static void *worker_main(void *arg)
{
	struct worker *me = arg;
	uint64_t hold[HOLD_MAX];
	int nh = 0;
	uint64_t x = me->seed;
	for (int i = 0; i < OPS; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (nh == 0 || (nh < HOLD_MAX && (x & 1))) {
			uint64_t n = 1 + (x >> 8) % N_MAX;
			sluice_decision_t d;
			int rc = sluice_inflight_acquire_at(me->f, n, (uint64_t)i, (x & 2) ? &d : NULL);
			if (rc == 1) {
				/* Relaxed: the order that matters comes from the
				 * limiter (see the file comment); the shadow is a
				 * single RMW chain. */
				uint64_t s = atomic_fetch_add_explicit(&shadow, n, memory_order_relaxed) + n;
				if (s > me->max_shadow)
					me->max_shadow = s;
				hold[nh++] = n;
				me->acquired += n;
				me->admitted++;
			} else if (rc == 0) {
				me->refused++;
			} else {
				me->errors++;
			}
		} else {
			uint64_t n = hold[--nh];
			atomic_fetch_sub_explicit(&shadow, n, memory_order_relaxed);
			if (sluice_inflight_release(me->f, n) != 0)
				me->errors++;
			me->released += n;
		}
		if (me->bad_every && i % me->bad_every == 0) {
			/* K + 1 is more than can ever be held: always refused,
			 * whatever the others do, and it must change nothing. */
			if (sluice_inflight_release(me->f, K + 1) != SLUICE_ERELEASE)
				me->errors++;
			me->bad_tried++;
		}
		if (i % 64 == 0)
			sched_yield(); /* more threads than cores: interleave */
	}
	while (nh > 0) {
		uint64_t n = hold[--nh];
		atomic_fetch_sub_explicit(&shadow, n, memory_order_relaxed);
		if (sluice_inflight_release(me->f, n) != 0)
			me->errors++;
		me->released += n;
	}
	return NULL;
}

static void run(int threads, int bad_every)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 0);
	sluice_inflight_t f;
	sluice_inflight_config_t cfg = { .limit = K, .clock = &m };
	cr_assert_eq(sluice_inflight_init(&f, &cfg), 0);
	atomic_store(&shadow, 0);

	struct worker *w = calloc((size_t)threads, sizeof(*w));
	cr_assert_not_null(w);
	for (int i = 0; i < threads; i++) {
		w[i].f = &f;
		w[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
		w[i].bad_every = bad_every;
		cr_assert_eq(pthread_create(&w[i].tid, NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(w[i].tid, NULL);

	uint64_t acquired = 0, released = 0, admitted = 0, refused = 0, errors = 0;
	uint64_t max_shadow = 0, bad_tried = 0;
	for (int i = 0; i < threads; i++) {
		acquired += w[i].acquired;
		released += w[i].released;
		admitted += w[i].admitted;
		refused += w[i].refused;
		errors += w[i].errors;
		bad_tried += w[i].bad_tried;
		max_shadow = w[i].max_shadow > max_shadow ? w[i].max_shadow : max_shadow;
	}
	cr_log_info("threads=%d admitted=%llu refused=%llu max_in_flight=%llu K=%u bad=%llu",
	            threads, (unsigned long long)admitted, (unsigned long long)refused,
	            (unsigned long long)max_shadow, K, (unsigned long long)bad_tried);
	cr_assert_leq(max_shadow, K, "%d threads: %llu slots really held at once, K = %u",
	              threads, (unsigned long long)max_shadow, K);
	cr_assert_eq(errors, 0, "%llu acquire/release calls failed", (unsigned long long)errors);
	cr_assert_eq(acquired, released);
	cr_assert_eq(atomic_load(&shadow), 0);
	cr_assert_eq(sluice_inflight_available(&f), K, "every slot came back: %llu available",
	             (unsigned long long)sluice_inflight_available(&f));
	cr_assert_eq(sluice_inflight_bad_releases(&f), bad_tried, "every bad release counted");
	cr_assert_gt(refused, 0, "the limit must bite, or this tests nothing");
	cr_assert_gt(admitted, (uint64_t)threads * OPS / 8);
	/* quiescent and empty: exactly K pass again */
	cr_assert_eq(sluice_inflight_acquire_at(&f, K, 0, NULL), 1);
	cr_assert_eq(sluice_inflight_acquire_at(&f, 1, 0, NULL), 0);
	free(w);
}

ParameterizedTestParameters(inflight_threads, shadow_never_exceeds_k)
{
	static int threads[] = { 2, 4, 8 };
	return cr_make_param_array(int, threads, sizeof(threads) / sizeof(threads[0]));
}

ParameterizedTest(int *threads, inflight_threads, shadow_never_exceeds_k)
{
	run(*threads, 0);
}

/* The same hammering with releases of K + 1 mixed in by every thread: all
 * refused, all counted, none moves the count (the shadow check still holds). */
Test(inflight_threads, bad_releases_under_contention)
{
	run(4, 97);
}

/*
 * K = 1 makes the limiter a mutex.  Each thread increments a plain,
 * non-atomic counter while it holds the slot.  Mutual exclusion makes the
 * final count exact; the acquire/release orders make the increments
 * happen-before one another, which ThreadSanitizer checks (with relaxed
 * CASes it reports a data race on `plain` even where the count comes out
 * right).
 */
#define MUTEX_ROUNDS 20000

struct mutex_arg {
	sluice_inflight_t *f;
	uint64_t *plain;
	uint64_t spins;
	uint64_t errors;
};

static void *mutex_main(void *arg)
{
	struct mutex_arg *a = arg;
	for (int i = 0; i < MUTEX_ROUNDS; i++) {
		while (sluice_inflight_acquire_at(a->f, 1, 0, NULL) != 1) {
			a->spins++;
			sched_yield();
		}
		uint64_t v = *a->plain; /* read-modify-write in two steps on */
		*a->plain = v + 1;      /* purpose: a lost update shows       */
		if (sluice_inflight_release(a->f, 1) != 0)
			a->errors++;
		if (i % 16 == 0)
			sched_yield();
	}
	return NULL;
}

ParameterizedTestParameters(inflight_threads, k1_is_a_mutex)
{
	static int threads[] = { 2, 4, 8 };
	return cr_make_param_array(int, threads, sizeof(threads) / sizeof(threads[0]));
}

ParameterizedTest(int *threads, inflight_threads, k1_is_a_mutex)
{
	sluice_inflight_t f;
	sluice_inflight_config_t cfg = { .limit = 1, .clock = &sluice_clock_monotonic };
	cr_assert_eq(sluice_inflight_init(&f, &cfg), 0);
	uint64_t plain = 0;
	pthread_t tid[8];
	struct mutex_arg a[8];
	for (int i = 0; i < *threads; i++) {
		a[i] = (struct mutex_arg){ .f = &f, .plain = &plain };
		cr_assert_eq(pthread_create(&tid[i], NULL, mutex_main, &a[i]), 0);
	}
	uint64_t spins = 0, errors = 0;
	for (int i = 0; i < *threads; i++) {
		pthread_join(tid[i], NULL);
		spins += a[i].spins;
		errors += a[i].errors;
	}
	cr_log_info("threads=%d refusals=%llu", *threads, (unsigned long long)spins);
	cr_assert_eq(plain, (uint64_t)*threads * MUTEX_ROUNDS, "lost updates: %llu",
	             (unsigned long long)((uint64_t)*threads * MUTEX_ROUNDS - plain));
	cr_assert_eq(errors, 0, "%llu releases failed", (unsigned long long)errors);
	cr_assert_eq(sluice_inflight_available(&f), 1, "the slot came back");
	cr_assert_eq(sluice_inflight_bad_releases(&f), 0);
}

/*
 * set_limit under load.  A control thread changes K through KS while
 * deciders acquire and release; after each change it publishes the phase
 * (release) and waits for the deciders to make progress.  Every decision
 * that began after a change and saw no other change before it returned
 * must have been judged against that change's K (d.limit: SET_LIMIT, "the
 * change applies to every decision that happens after it"); slots really
 * held (a shadow count) never exceed the largest K set; every slot comes
 * back, and afterwards exactly the final K is available.
 */
static const uint64_t KS[] = { 8, 2, 6, 1, 5 };
#define NKS (sizeof(KS) / sizeof(KS[0]))
#define CHANGES 400

struct kdecider {
	pthread_t tid;
	sluice_inflight_t *f;
	_Atomic uint64_t *shadow;
	uint64_t seed, admitted, refused, wrong, max_level, errors;
	_Atomic uint64_t decisions;
};

static _Atomic uint64_t kphase;
static _Atomic int krunning;

static void *kdecider_main(void *arg)
{
	struct kdecider *me = arg;
	uint64_t x = me->seed;
	while (atomic_load_explicit(&krunning, memory_order_relaxed)) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t n = 1 + x % 3;
		/* Acquire: pairs with the control thread's release of the
		 * phase, which follows its set_limit. */
		uint64_t before = atomic_load_explicit(&kphase, memory_order_acquire);
		sluice_decision_t d;
		int rc = sluice_inflight_acquire_at(me->f, n, 0, &d);
		/* Acquire fence: pairs with the control thread's release fence
		 * before set_limit, so a decision that read a K stored after
		 * an odd phase also sees that phase here. */
		atomic_thread_fence(memory_order_acquire);
		uint64_t after = atomic_load_explicit(&kphase, memory_order_relaxed);
		if (rc == 1 || rc == 0) {
			/* even and unchanged: no set_limit ran during it */
			if (before % 2 == 0 && before == after && d.limit != KS[before / 2 % NKS])
				me->wrong++;
		} else if (rc != SLUICE_ETOOBIG) {
			me->errors++;
		}
		if (rc == 1) {
			me->admitted++;
			/* seq_cst, as the shadow count above: a test-only
			 * observer, ordered against nothing in the limiter */
			uint64_t level = atomic_fetch_add(me->shadow, n) + n;
			me->max_level = level > me->max_level ? level : me->max_level;
			for (volatile int s = 0; s < 32; s++)
				;
			atomic_fetch_sub(me->shadow, n);
			if (sluice_inflight_release(me->f, n) != 0)
				me->errors++;
		} else {
			me->refused++;
		}
		uint64_t k = atomic_load_explicit(&me->decisions, memory_order_relaxed) + 1;
		atomic_store_explicit(&me->decisions, k, memory_order_relaxed);
		if (k % 8 == 0)
			sched_yield();
	}
	return NULL;
}

ParameterizedTestParameters(inflight_threads, set_limit_under_load)
{
	static int threads[] = { 2, 4 };
	return cr_make_param_array(int, threads, sizeof(threads) / sizeof(threads[0]));
}

ParameterizedTest(int *threads, inflight_threads, set_limit_under_load)
{
	sluice_inflight_t f;
	sluice_inflight_config_t cfg = { .limit = KS[0], .clock = &sluice_clock_monotonic };
	cr_assert_eq(sluice_inflight_init(&f, &cfg), 0);
	_Atomic uint64_t kshadow = 0;
	struct kdecider *a = calloc((size_t)*threads, sizeof(*a));
	cr_assert_not_null(a);
	atomic_store(&kphase, 0);
	atomic_store(&krunning, 1);
	for (int i = 0; i < *threads; i++) {
		a[i].f = &f;
		a[i].shadow = &kshadow;
		a[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 5);
		cr_assert_eq(pthread_create(&a[i].tid, NULL, kdecider_main, &a[i]), 0);
	}
	for (uint64_t c = 1; c <= CHANGES; c++) {
		/* odd: a change is under way (release fence: see the decider) */
		atomic_store_explicit(&kphase, 2 * c - 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_release);
		cr_assert_eq(sluice_inflight_set_limit(&f, KS[c % NKS]), 0);
		/* Release: a decider that reads this phase sees the change. */
		atomic_store_explicit(&kphase, 2 * c, memory_order_release);
		PACE_WAIT(a, *threads);
	}
	atomic_store(&krunning, 0);
	uint64_t admitted = 0, refused = 0, wrong = 0, worst = 0, errors = 0;
	for (int i = 0; i < *threads; i++) {
		pthread_join(a[i].tid, NULL);
		admitted += a[i].admitted;
		refused += a[i].refused;
		wrong += a[i].wrong;
		errors += a[i].errors;
		worst = a[i].max_level > worst ? a[i].max_level : worst;
	}
	cr_log_info("set_limit threads=%d admitted=%llu refused=%llu worst=%llu", *threads,
	            (unsigned long long)admitted, (unsigned long long)refused,
	            (unsigned long long)worst);
	cr_assert_eq(errors, 0);
	cr_assert_eq(wrong, 0, "%llu decisions after a change were judged against another K",
	             (unsigned long long)wrong);
	cr_assert_leq(worst, KS[0], "%llu slots held at once, largest K %llu",
	              (unsigned long long)worst, (unsigned long long)KS[0]);
	cr_assert_gt(refused, 0, "the limit must bite");
	cr_assert_eq(sluice_inflight_available(&f), KS[CHANGES % NKS], "every slot came back");
	free(a);
}
