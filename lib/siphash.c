/*
 * siphash.c - SipHash-c-d, written from the paper ("SipHash: a fast
 * short-input PRF", Aumasson and Bernstein, 2012, section 2).
 *
 * DESIGN: state v0..v3 initialised from the key and the constants
 * "somepseudorandomlygeneratedbytes"; each 8-byte little-endian block m is
 * absorbed as v3 ^= m, c SipRounds, v0 ^= m; the last block holds the
 * 0..7 remaining bytes and, in its top byte, len mod 256; then v2 ^= 0xff
 * and d SipRounds; the output is v0 ^ v1 ^ v2 ^ v3.  Bytes are read one by
 * one into words (no unaligned or type-punned loads, so the result does not
 * depend on the host's byte order or alignment rules).
 */
#include <endian.h>
#include <string.h>

#include "siphash_internal.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                  \
	do {                                                      \
		v0 += v1;                                         \
		v1 = ROTL(v1, 13);                                \
		v1 ^= v0;                                         \
		v0 = ROTL(v0, 32);                                \
		v2 += v3;                                         \
		v3 = ROTL(v3, 16);                                \
		v3 ^= v2;                                         \
		v0 += v3;                                         \
		v3 = ROTL(v3, 21);                                \
		v3 ^= v0;                                         \
		v2 += v1;                                         \
		v1 = ROTL(v1, 17);                                \
		v1 ^= v2;                                         \
		v2 = ROTL(v2, 32);                                \
	} while (0)

/* little-endian load of @n (0..7) bytes (the tail) */
static inline uint64_t load_tail(const unsigned char *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* little-endian load of 8 bytes, any alignment */
static inline uint64_t load8(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

/* The body, with the round counts as arguments: inlined into the two
 * entry points below, so SipHash-1-3 runs with its rounds unrolled. */
static inline __attribute__((always_inline)) uint64_t siphash(unsigned c, unsigned d, uint64_t k0,
                                                              uint64_t k1, const void *data,
                                                              size_t len)
{
	const unsigned char *p = data;
	uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
	uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
	uint64_t v3 = 0x7465646279746573ULL ^ k1;
	size_t whole = len - len % 8;

	for (size_t i = 0; i < whole; i += 8) {
		uint64_t m = load8(p + i);
		v3 ^= m;
		for (unsigned r = 0; r < c; r++)
			SIPROUND;
		v0 ^= m;
	}
	uint64_t b = ((uint64_t)len << 56) | load_tail(p + whole, len % 8);
	v3 ^= b;
	for (unsigned r = 0; r < c; r++)
		SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	for (unsigned r = 0; r < d; r++)
		SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t sluice__siphash(unsigned c, unsigned d, uint64_t k0, uint64_t k1, const void *data,
                         size_t len)
{
	return siphash(c, d, k0, k1, data, len);
}

uint64_t sluice__siphash13(uint64_t k0, uint64_t k1, const void *data, size_t len)
{
	return siphash(1, 3, k0, k1, data, len);
}
