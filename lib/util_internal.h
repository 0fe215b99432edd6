/* SPDX-License-Identifier: MIT */
/*
 * util_internal.h - the small arithmetic every module needs, once (never
 * installed): powers of two, bit widths, ceilings, saturating products.
 * Each is exact over the whole stated range; callers state why their
 * arguments are in it.
 */
#ifndef SLUICE_UTIL_INTERNAL_H
#define SLUICE_UTIL_INTERNAL_H

#include <stdint.h>

#include "sluice/common.h"

/* sluice__bit_width - bits needed to write @v: 0 for 0, 64 for 2^63 and up. */
static inline unsigned sluice__bit_width(uint64_t v)
{
	return v ? 64u - (unsigned)__builtin_clzll(v) : 0u;
}

/* sluice__pow2_at_least - the least power of two >= @v, for @v <= 2^63
 * (1 for 0). */
static inline uint64_t sluice__pow2_at_least(uint64_t v)
{
	return v <= 1 ? 1 : 1ULL << sluice__bit_width(v - 1);
}

/* sluice__ceil_u64 - ceil(@v) for 0 <= @v < 2^63, without libm. */
static inline uint64_t sluice__ceil_u64(double v)
{
	uint64_t i = (uint64_t)v;
	return (double)i < v ? i + 1 : i;
}

/* sluice__sat_mul - @a * @b, or UINT64_MAX when the product does not fit. */
static inline uint64_t sluice__sat_mul(uint64_t a, uint64_t b)
{
	sluice__u128 p = (sluice__u128)a * b;
	return p > UINT64_MAX ? UINT64_MAX : (uint64_t)p;
}

/* sluice__round_up - the least multiple of @m >= @v (@m > 0, no overflow:
 * @v <= UINT64_MAX - @m + 1). */
static inline uint64_t sluice__round_up(uint64_t v, uint64_t m)
{
	return (v + m - 1) / m * m;
}

#endif /* SLUICE_UTIL_INTERNAL_H */
