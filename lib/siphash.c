/* SPDX-License-Identifier: MIT */
/*
 * siphash.c - SipHash-c-d, written from the paper ("SipHash: a fast
 * short-input PRF", Aumasson and Bernstein, 2012, section 2).
 *
 * DESIGN: state v0..v3 initialised from the key and the constants
 * "somepseudorandomlygeneratedbytes"; each 8-byte little-endian block m is
 * absorbed as v3 ^= m, c SipRounds, v0 ^= m; the last block holds the
 * 0..7 remaining bytes and, in its top byte, len mod 256; then v2 ^= 0xff
 * and d SipRounds; the output is v0 ^ v1 ^ v2 ^ v3.  Bytes are read as
 * little-endian words through memcpy (no type-punned or aligned loads, so
 * the result does not depend on the host's byte order or alignment rules);
 * the tail without reading past the data.  The body is in
 * siphash_internal.h, inline, so the keyed decision path needs no call.
 */
#include "siphash_internal.h"

uint64_t sluice__siphash(unsigned c, unsigned d, uint64_t k0, uint64_t k1, const void *data,
                         size_t len)
{
	return sluice__siphash_body(c, d, k0, k1, data, len);
}

uint64_t sluice__siphash13(uint64_t k0, uint64_t k1, const void *data, size_t len)
{
	return sluice__siphash_body(1, 3, k0, k1, data, len);
}
