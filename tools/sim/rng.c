/* SPDX-License-Identifier: MIT */
/*
 * rng.c - the simulator's own pseudo-random numbers, so that --seed makes a
 * run repeat exactly on any libc (rand() differs between them and shares
 * hidden state).
 *
 * DESIGN: xoshiro256** (Blackman and Vigna, public domain reference code),
 * its 256-bit state filled by splitmix64 from the 64-bit seed, as its
 * authors recommend: any seed, 0 included, gives a good state.  Every
 * stream the simulator needs (arrivals, retry jitter) seeds its own
 * generator from the one seed, so one algorithm's retries cannot change
 * the arrivals another algorithm sees.
 */
#include <math.h>

#include "sim.h"

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void sim_rng_seed(sim_rng_t *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t sim_rng_next(sim_rng_t *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double sim_rng_unit(sim_rng_t *r)
{
	return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t sim_rng_below(sim_rng_t *r, uint64_t n)
{
	/* Lemire's multiply-and-reject: unbiased, one division at most. */
	__extension__ typedef unsigned __int128 u128;
	u128 m = (u128)sim_rng_next(r) * n;
	uint64_t lo = (uint64_t)m;
	if (lo < n) {
		uint64_t floor = -n % n;
		while (lo < floor) {
			m = (u128)sim_rng_next(r) * n;
			lo = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

uint64_t sim_rng_exp_ns(sim_rng_t *r, double mean_ns)
{
	/* 1 - u is in (0, 1]: log never sees 0. */
	double x = round(-mean_ns * log(1.0 - sim_rng_unit(r)));
	/* a gap of 2^64 ns or more ends every run: say so rather than cut
	 * it to something a run near 2^64 could reach */
	if (x >= 0x1.0p64)
		return UINT64_MAX;
	return (uint64_t)x;
}
