/* SPDX-License-Identifier: MIT */
/*
 * stress_keyed_common.h - what the keyed stress programs (stress_keyed.c,
 * stress_keyed_stop.c) share: the admission record, the per-key GCRA
 * verifier over those records, and the workers' pseudo-random stream.
 */
#ifndef SLUICE_STRESS_KEYED_COMMON_H
#define SLUICE_STRESS_KEYED_COMMON_H

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_mono.h"

/* A forked worker waits for the parent's go, at most 30 s: a parent that
 * died before giving it must not leave a worker spinning for ever.
 * Acquire: pairs with the parent's release store of go. */
static inline void wait_for_go(_Atomic int *go)
{
	uint64_t until = mono_ns() + 30000000000ULL;
	while (!atomic_load_explicit(go, memory_order_acquire)) {
		if (mono_ns() > until)
			_exit(4);
		sched_yield();
	}
}

/* One admission: decision time, key index, permits.  16 bytes; workers of
 * stress_keyed_stop write these in a MAP_SHARED mapping. */
struct record {
	uint64_t t;
	uint32_t key; /* the program's key index (0: hot/abuser, or a hot key's number) */
	uint32_t n;
};

static inline uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static inline int cmp_record(const void *a, const void *b)
{
	const struct record *x = a, *y = b;
	if (x->key != y->key)
		return (x->key > y->key) - (x->key < y->key);
	return (x->t > y->t) - (x->t < y->t);
}

/* Largest burst used by any key: max over i <= j of the permits admitted
 * at times t_i..t_j minus (t_j - t_i) / T (T = @interval ns), in real
 * numbers.  The GCRA guarantee (admitted <= b + t/T) is exactly worst <= b.
 * O(n) per key: with S_k the permits of records 1..k, the excess over
 * [t_i, t_j] in ns is (S_j * T - t_j) - (S_{i-1} * T - t_i): a running
 * minimum of the second term.  Returns the excess in ns; sorts @r. */
__extension__ typedef __int128 s128;
static inline s128 worst_excess_ns(struct record *r, size_t n, uint64_t interval)
{
	qsort(r, n, sizeof(*r), cmp_record);
	s128 worst = 0;
	size_t lo = 0;
	while (lo < n) {
		size_t hi = lo;
		while (hi < n && r[hi].key == r[lo].key)
			hi++;
		s128 sum = 0, min_b = 0;
		for (size_t k = lo; k < hi; k++) {
			s128 b = sum * (s128)interval - (s128)r[k].t; /* S_{k-1} T - t_k */
			if (k == lo || b < min_b)
				min_b = b;
			sum += r[k].n;
			s128 a = sum * (s128)interval - (s128)r[k].t; /* S_k T - t_k */
			if (a - min_b > worst)
				worst = a - min_b;
		}
		lo = hi;
	}
	return worst;
}

#endif /* SLUICE_STRESS_KEYED_COMMON_H */
