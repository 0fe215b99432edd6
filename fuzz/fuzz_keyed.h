/* SPDX-License-Identifier: MIT */
/*
 * fuzz_keyed.h - a keyed table's configuration from fuzz input, for
 * fuzz_keyed_attach.c and fuzz_keyed_acquire.c.
 *
 * The input picks the algorithm, the policy, the capacity (8, 16 or 32
 * slots, so probe groups fill and the full-group paths run), the key length,
 * the seed (always SLUICE_KEYED_SEEDED: a run must be a function of its
 * input, getrandom() would make a crash unreproducible) and the parameters,
 * often hostile ones.  When sluice_keyed_format() refuses them (validation is
 * part of what is fuzzed), the same algorithm's valid defaults are used, so
 * every input still reaches a table.
 */
#ifndef SLUICE_FUZZ_KEYED_H
#define SLUICE_FUZZ_KEYED_H

#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "sluice/sluice.h"

typedef struct fuzz_table {
	sluice_keyed_config_t cfg;
	void *mem;
	size_t size;
	int fuzzed; /* 1: the fuzzed parameters passed init; 0: the defaults */
} fuzz_table_t;

static inline void fuzz_keyed_defaults(sluice_keyed_config_t *c)
{
	c->rate = 10;
	c->period_ns = 1000000000ULL;
	c->burst = 5;
	c->depth = 4;
	c->limit = c->algo == SLUICE_ALGO_INFLIGHT ? 3 : 10;
	c->window_ns = 1000000ULL;
	c->buckets = 4;
	c->flags = SLUICE_KEYED_SEEDED;
	c->key_max = 0;
	if (c->algo == SLUICE_ALGO_INFLIGHT)
		c->policy = SLUICE_KEYED_REJECT;
}

/* posix_memalign, not aligned_alloc: exactly @size bytes, so ASan sees a
 * read one past the region */
static inline void *fuzz_region(size_t size)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, size ? size : 1) != 0)
		abort();
	return p;
}

/* Read a configuration and make its table.  Return: 0, or -1 when even
 * the defaults fail (which is a bug in itself: the caller aborts). */
static inline int fuzz_keyed_table(fuzz_in_t *in, fuzz_table_t *t)
{
	memset(t, 0, sizeof(*t));
	sluice_keyed_config_t *c = &t->cfg;
	uint8_t a = fuzz_u8(in), b = fuzz_u8(in);
	static const sluice_algo_t keyed_algos[5] = { SLUICE_ALGO_GCRA, SLUICE_ALGO_LEAKY,
		                                      SLUICE_ALGO_FIXED, SLUICE_ALGO_WINDOW,
		                                      SLUICE_ALGO_INFLIGHT };
	c->algo = keyed_algos[a % 5];
	c->policy = (sluice_keyed_policy_t)(a / 5 % 3);
	c->capacity = 8ULL << (b % 3);
	c->flags = SLUICE_KEYED_SEEDED | (b & 8 ? SLUICE_KEYED_HASH_LONG_KEYS : 0);
	c->key_max = b & 16 ? 1 + fuzz_u8(in) % 40 : 0;
	c->seed[0] = fuzz_bytes(in, 8);
	c->seed[1] = fuzz_bytes(in, 8);
	uint8_t small = fuzz_u8(in);
	c->rate = b & 32 ? fuzz_hostile(in) : 1 + small;
	c->period_ns = b & 64 ? fuzz_hostile(in) : 1000000ULL * (1 + small);
	c->burst = b & 128 ? fuzz_hostile(in) : small % 16;
	c->depth = small % 8;
	c->limit = a & 128 ? fuzz_hostile(in) : 1 + small % 16;
	c->window_ns = a & 64 ? fuzz_hostile(in) : 1000ULL * (1 + small);
	c->buckets = fuzz_u8(in) % 20;
	size_t size = sluice_keyed_region_bytes(c);
	t->fuzzed = 1;
	if (size == 0) {
		t->fuzzed = 0;
		fuzz_keyed_defaults(c);
		size = sluice_keyed_region_bytes(c);
		if (size == 0)
			return -1;
	}
	t->mem = fuzz_region(size);
	t->size = size;
	int rc = sluice_keyed_format(t->mem, size, c);
	FUZZ_CHECK(rc == 0, "init after a size of %zu: %s", size, sluice_err_name(rc));
	return 0;
}

static inline void fuzz_table_free(fuzz_table_t *t)
{
	free(t->mem);
	t->mem = NULL;
}

/* a return code the library documents: 1, 0 or a code in its table */
static inline int fuzz_known_rc(int rc)
{
	return rc == 0 || rc == 1 || (rc < 0 && strcmp(sluice_err_name(rc), "SLUICE_UNKNOWN") != 0);
}

#endif /* SLUICE_FUZZ_KEYED_H */
