/* SPDX-License-Identifier: MIT */
/*
 * test_rng.h - the xorshift64 generator the deterministic tests share: a
 * file seeds `rng_state` (never 0) and draws with rnd(), so a schedule is
 * reproducible from its seed.
 */
#ifndef SLUICE_TEST_RNG_H
#define SLUICE_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

#endif /* SLUICE_TEST_RNG_H */
