/* SPDX-License-Identifier: MIT */
/*
 * race_harness.h - what the "racing for the last permit" tests share: a
 * spinning two-party barrier, so both racers leave it within a few cache
 * misses, and a jitter that shifts them against each other.
 */
#ifndef SLUICE_TEST_RACE_HARNESS_H
#define SLUICE_TEST_RACE_HARNESS_H

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

#endif /* SLUICE_TEST_RACE_HARNESS_H */
