/* SPDX-License-Identifier: MIT */
/*
 * siphash_internal.h - SipHash (Aumasson and Bernstein, 2012), a keyed
 * hash the keyed tables use against hash flooding: for every key of a table
 * formatted without AES-NI or with SLUICE_KEYED_SIPHASH, for keys longer
 * than 16 bytes in every table, for the digests of long keys and the header
 * checksum (keyhash_internal.h is the other one).  Never installed.
 *
 * sluice__siphash(c, d, k0, k1, data, len) is SipHash-c-d with the 128-bit
 * key (k0, k1) read as two little-endian words, over @len bytes of @data,
 * as in the reference implementation (the same output for the same bytes on
 * every platform).  The keyed tables use SipHash-1-3 (the rounds Rust's and
 * Python's hash tables use: a PRF for short inputs whose key an attacker
 * does not know is all flooding resistance needs); SipHash-2-4 is checked
 * against the reference vectors in tests/core/test_keyed.c, which exercises the
 * same code with other round counts.
 *
 * The body is here, static inline, so that a keyed decision (hash, lookup,
 * decision: one translation unit, lib/keyed_decide.c) inlines SipHash-1-3
 * with its rounds unrolled and makes no call for it: at 16-byte keys the
 * call and the generic tail loop were a fifth of the hash's cost
 * (docs/performance.md, "Keyed lookups").  sluice__siphash13_short() is
 * that inline copy; sluice__siphash13() the same function out of line.
 */
#ifndef SLUICE_SIPHASH_INTERNAL_H
#define SLUICE_SIPHASH_INTERNAL_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sluice/common.h"

uint64_t sluice__siphash(unsigned c, unsigned d, uint64_t k0, uint64_t k1,
                         const void *data, size_t len);

/* SipHash-1-3: the tables' hash (the same function, rounds unrolled). */
uint64_t sluice__siphash13(uint64_t k0, uint64_t k1, const void *data, size_t len);

#define SLUICE__ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SLUICE__SIPROUND                                          \
	do {                                                      \
		v0 += v1;                                         \
		v1 = SLUICE__ROTL(v1, 13);                        \
		v1 ^= v0;                                         \
		v0 = SLUICE__ROTL(v0, 32);                        \
		v2 += v3;                                         \
		v3 = SLUICE__ROTL(v3, 16);                        \
		v3 ^= v2;                                         \
		v0 += v3;                                         \
		v3 = SLUICE__ROTL(v3, 21);                        \
		v3 ^= v0;                                         \
		v2 += v1;                                         \
		v1 = SLUICE__ROTL(v1, 17);                        \
		v1 ^= v2;                                         \
		v2 = SLUICE__ROTL(v2, 32);                        \
	} while (0)

/* little-endian load of 8 bytes, any alignment (memcpy: no type pun) */
static inline uint64_t sluice__siphash_load8(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

/*
 * Little-endian value of the @n (0..7) bytes at @p, reading none past them:
 * for 4..7 bytes two 4-byte loads that overlap (the overlap holds the same
 * bytes, so OR-ing them is exact); for 1..3 the first, middle and last
 * byte (which cover 1, 2 or 3 bytes).  No loop: the byte-by-byte loop it
 * replaces was a data-dependent branch per byte.
 */
static inline uint64_t sluice__siphash_tail(const unsigned char *p, size_t n)
{
	if (n >= 4) {
		uint32_t lo, hi;
		memcpy(&lo, p, 4);
		memcpy(&hi, p + n - 4, 4);
		return (uint64_t)le32toh(lo) | ((uint64_t)le32toh(hi) << (8 * (n - 4)));
	}
	if (n == 0)
		return 0;
	return (uint64_t)p[0] | ((uint64_t)p[n / 2] << (8 * (n / 2))) |
	       ((uint64_t)p[n - 1] << (8 * (n - 1)));
}

/* The body, with the round counts as arguments: inlined where it is used,
 * so SipHash-1-3 runs with its rounds unrolled. */
static inline __attribute__((always_inline)) uint64_t
sluice__siphash_body(unsigned c, unsigned d, uint64_t k0, uint64_t k1, const void *data,
                     size_t len)
{
	const unsigned char *p = data;
	uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
	uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
	uint64_t v3 = 0x7465646279746573ULL ^ k1;
	size_t whole = len - len % 8;

	for (size_t i = 0; i < whole; i += 8) {
		uint64_t m = sluice__siphash_load8(p + i);
		v3 ^= m;
#pragma GCC unroll 8
		for (unsigned r = 0; r < c; r++)
			SLUICE__SIPROUND;
		v0 ^= m;
	}
	uint64_t b = ((uint64_t)len << 56) | sluice__siphash_tail(p + whole, len % 8);
	v3 ^= b;
#pragma GCC unroll 8
	for (unsigned r = 0; r < c; r++)
		SLUICE__SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
#pragma GCC unroll 8
	for (unsigned r = 0; r < d; r++)
		SLUICE__SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* SipHash-1-3, inline: the keyed decision path's hash (any length; the
 * loop runs len / 8 times).  The body with c = 1, d = 3: the body's
 * `#pragma GCC unroll` writes the rounds out once the counts are constants
 * (GCC at -O2 otherwise kept the three-round finalisation as a loop:
 * callgrind, 7 instructions a decision). */
static inline __attribute__((always_inline)) uint64_t
sluice__siphash13_short(uint64_t k0, uint64_t k1, const void *data, size_t len)
{
	return sluice__siphash_body(1, 3, k0, k1, data, len);
}

/*
 * The words of a key of 1..16 bytes, as SipHash reads them: *@w0 the first
 * 8 bytes (fewer: zero-padded), *@w1 bytes 8..15 (zero-padded; 0 when
 * there are none), little-endian, reading no byte past @len.  Bytes 8..len
 * of a 9..16-byte key come from one 8-byte load that ends at the key's
 * last byte, shifted down past the bytes it shares with the first word
 * (one load and a shift instead of siphash_tail()'s two loads or three
 * byte loads and their branch).
 */
static inline void sluice__siphash_words16(const unsigned char *p, size_t len, uint64_t *w0,
                                           uint64_t *w1)
{
	if (len >= 8) {
		*w0 = sluice__siphash_load8(p);
		*w1 = len > 8 ? sluice__siphash_load8(p + len - 8) >> (8 * (16 - len)) : 0;
	} else {
		*w0 = sluice__siphash_tail(p, len);
		*w1 = 0;
	}
}

/*
 * SipHash-1-3 of a message of @len bytes, 1..16, given as its words (w0,
 * w1 as sluice__siphash_words16() returns them): the same value as
 * sluice__siphash13() of those bytes (tests/core/test_keyed.c checks every
 * length against the reference body).  For len <= 16 the message blocks
 * are w0 (when len >= 8), w1 (when len == 16) and the length block, whose
 * low bytes are the word after the whole ones (zero-padded, so 0 when
 * len is 8 or 16).  Straight-line rounds on words the caller already
 * holds: the keyed lookup loads a key's bytes once, for the hash and for
 * the key compare both (make_kid()), and its 16-byte keys skip the
 * generic body's loop and tail.
 */
static inline __attribute__((always_inline)) uint64_t
sluice__siphash13_words16(uint64_t k0, uint64_t k1, uint64_t w0, uint64_t w1, size_t len)
{
	uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
	uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
	uint64_t v3 = 0x7465646279746573ULL ^ k1;
	uint64_t last = w0;
	if (len >= 8) {
		v3 ^= w0;
		SLUICE__SIPROUND;
		v0 ^= w0;
		last = w1;
		if (len >= 16) {
			v3 ^= w1;
			SLUICE__SIPROUND;
			v0 ^= w1;
			last = 0;
		}
	}
	uint64_t b = ((uint64_t)len << 56) | last;
	v3 ^= b;
	SLUICE__SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SLUICE__SIPROUND;
	SLUICE__SIPROUND;
	SLUICE__SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

#endif /* SLUICE_SIPHASH_INTERNAL_H */
