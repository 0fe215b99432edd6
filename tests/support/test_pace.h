/* SPDX-License-Identifier: MIT */
/*
 * test_pace.h - the pacing the threaded tests share: the thread that moves
 * the manual clock waits, after each step, until the deciders have made a
 * few decisions at that time, so every step is decided on by someone and a
 * run stays short and bounded on 2 cores and under ThreadSanitizer.
 */
#ifndef SLUICE_TEST_PACE_H
#define SLUICE_TEST_PACE_H

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Sum of @n decision counters, @stride bytes apart from @first. */
static inline uint64_t pace_sum(_Atomic uint64_t *first, size_t stride, int n)
{
	uint64_t sum = 0;
	for (int k = 0; k < n; k++)
		sum += atomic_load_explicit((_Atomic uint64_t *)((char *)first + (size_t)k * stride),
		                            memory_order_relaxed);
	return sum;
}

/* Yield until the @n deciders made 4 decisions each (in total) since the call. */
static inline void pace_wait(_Atomic uint64_t *first, size_t stride, int n)
{
	uint64_t before = pace_sum(first, stride, n);
	do
		sched_yield();
	while (pace_sum(first, stride, n) < before + 4 * (uint64_t)n);
}

/* PACE_WAIT(deciders, n): for an array of structs with a `decisions` counter. */
#define PACE_WAIT(arr, n) pace_wait(&(arr)[0].decisions, sizeof((arr)[0]), (n))

#endif /* SLUICE_TEST_PACE_H */
