/* SPDX-License-Identifier: MIT */
/*
 * race_harness.h - what the "racing for the last permit" tests share: a
 * spinning two-party barrier, so both racers leave it within a few cache
 * misses, a jitter that shifts them against each other, and the round loop
 * that counts rounds with two winners or none (race_run).
 */
#ifndef SLUICE_TEST_RACE_HARNESS_H
#define SLUICE_TEST_RACE_HARNESS_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

/* A two-party barrier that spins (yielding now and then, for loaded
 * machines), so both parties leave it within a few cache misses. */
static _Atomic unsigned bar_count, bar_gen;

static inline void barrier2(void)
{
	unsigned g = atomic_load_explicit(&bar_gen, memory_order_acquire);
	/* acq_rel: the last arriver sees the other's writes before it. */
	if (atomic_fetch_add_explicit(&bar_count, 1, memory_order_acq_rel) == 1) {
		atomic_store_explicit(&bar_count, 0, memory_order_relaxed);
		/* Release: pairs with the waiter's acquire below. */
		atomic_store_explicit(&bar_gen, g + 1, memory_order_release);
		return;
	}
	for (unsigned spins = 1; atomic_load_explicit(&bar_gen, memory_order_acquire) == g; spins++)
		if (spins % 1024 == 0)
			sched_yield();
}

/* A few ns to a few hundred: shifts the racers against each other. */
static inline void jitter(uint64_t *v)
{
	*v ^= *v << 13, *v ^= *v >> 7, *v ^= *v << 17;
	for (volatile unsigned i = (unsigned)(*v % 512); i > 0; i--)
		;
}

#ifndef RACE_ROUNDS
#define RACE_ROUNDS 20000
#endif

/* One racer: the limiter, how to ask it for one permit at time t (1 =
 * admitted), and its jitter state. */
struct race_ctx {
	void *lim;
	int (*take)(void *lim, uint64_t t);
	uint64_t seed;
};

static uint64_t race_time; /* set by the main thread between rounds */
static int race_won[2];

/* Meet the other racer, ask at race_time, meet again (so race_won is read
 * only after both have asked). */
static inline void race_once(struct race_ctx *c, int who)
{
	barrier2();
	jitter(&c->seed);
	race_won[who] = c->take(c->lim, race_time) == 1;
	barrier2();
}

/* The second racer's thread: RACE_ROUNDS rounds as racer 1. */
static inline void *racer_main(void *arg)
{
	struct race_ctx c = *(struct race_ctx *)arg;
	for (int r = 0; r < RACE_ROUNDS; r++)
		race_once(&c, 1);
	return NULL;
}

/*
 * The whole race: a second thread races as racer 1 (@theirs) while this one
 * runs RACE_ROUNDS rounds as racer 0 (@mine); each round moves race_time by
 * @step, runs @before(@mine->lim) when given (say, a lone admission that
 * leaves exactly one permit), then races once.  *@both: rounds with two
 * winners, *@none: rounds with none; a correct limiter leaves both 0.
 * Return: 0, or pthread_create's error (then nothing ran).
 */
static inline int race_run(struct race_ctx *mine, struct race_ctx *theirs, uint64_t step,
                           void (*before)(void *lim), int *both, int *none)
{
	pthread_t tid;
	race_time = 0;
	*both = *none = 0;
	int rc = pthread_create(&tid, NULL, racer_main, theirs);
	if (rc != 0)
		return rc;
	for (int r = 0; r < RACE_ROUNDS; r++) {
		race_time += step;
		if (before)
			before(mine->lim);
		race_once(mine, 0);
		*both += race_won[0] && race_won[1];
		*none += !race_won[0] && !race_won[1];
	}
	pthread_join(tid, NULL);
	return 0;
}

#endif /* SLUICE_TEST_RACE_HARNESS_H */
