/*
 * siphash_internal.h - SipHash (Aumasson and Bernstein, 2012), the keyed
 * hash the keyed tables use against hash flooding.  Never installed.
 *
 * sluice__siphash(c, d, k0, k1, data, len) is SipHash-c-d with the 128-bit
 * key (k0, k1) read as two little-endian words, over @len bytes of @data,
 * as in the reference implementation (the same output for the same bytes on
 * every platform).  The keyed tables use SipHash-1-3 (the rounds Rust's and
 * Python's hash tables use: a PRF for short inputs whose key an attacker
 * does not know is all flooding resistance needs); SipHash-2-4 is checked
 * against the reference vectors in tests/test_keyed.c, which exercises the
 * same code with other round counts.
 */
#ifndef SLUICE_SIPHASH_INTERNAL_H
#define SLUICE_SIPHASH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/common.h"

SLUICE_API uint64_t sluice__siphash(unsigned c, unsigned d, uint64_t k0, uint64_t k1,
                                    const void *data, size_t len);

/* SipHash-1-3: the tables' hash (the same function, rounds unrolled). */
SLUICE_API uint64_t sluice__siphash13(uint64_t k0, uint64_t k1, const void *data, size_t len);

#endif /* SLUICE_SIPHASH_INTERNAL_H */
