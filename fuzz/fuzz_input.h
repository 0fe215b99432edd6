/* SPDX-License-Identifier: MIT */
/*
 * fuzz_input.h - reading a libFuzzer input as a stream of values, for the
 * targets in fuzz/ (fuzz_<target>.c, STYLE.md "Fuzzing").
 *
 * Every read takes bytes from the front and never fails: past the end it
 * reads zeros, so every input, however short, is a complete program for the
 * target, and a mutation that cuts an input short still means something.
 * fuzz_hostile() spends a selector byte and two bytes of "small" (and
 * then 0, 1, 3 or 8 more) to pick the kind of number the library's
 * arithmetic must survive: raw 64 bits, small, just below 2^64,
 * just below or above a power of two (2^62 is the keyed table's time
 * limit, 2^32 and 2^31 the width of tags and epochs), or SLUICE_NEVER.
 */
#ifndef SLUICE_FUZZ_INPUT_H
#define SLUICE_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct fuzz_in {
	const uint8_t *p;
	size_t n;
} fuzz_in_t;

static inline uint64_t fuzz_bytes(fuzz_in_t *in, unsigned k)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < k; i++) {
		uint64_t b = 0;
		if (in->n) {
			b = *in->p++;
			in->n--;
		}
		v |= b << (8 * i); /* little-endian */
	}
	return v;
}

static inline uint8_t fuzz_u8(fuzz_in_t *in)
{
	return (uint8_t)fuzz_bytes(in, 1);
}

static inline uint64_t fuzz_hostile(fuzz_in_t *in)
{
	uint8_t sel = fuzz_u8(in);
	uint64_t small = fuzz_bytes(in, 2);
	switch (sel % 8) {
	case 0:
		return fuzz_bytes(in, 8);
	case 1:
		return small;
	case 2:
		return UINT64_MAX - small;
	case 3: /* 2^k - small, k from the next byte */
		return (1ULL << (fuzz_u8(in) % 64)) - small;
	case 4: /* 2^k + small */
		return (1ULL << (fuzz_u8(in) % 64)) + small;
	case 5:
		return UINT64_MAX; /* SLUICE_NEVER */
	case 6:
		return small * 1000000000ULL; /* whole seconds */
	default:
		return small * 1000000ULL + fuzz_bytes(in, 3); /* ms and ns */
	}
}

/* The target's own oracle failed: abort, which libFuzzer reports as a
 * crash with this input (and the message before it). */
#define FUZZ_CHECK(cond, ...)                                                    \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__,   \
			        __LINE__, #cond);                                \
			fprintf(stderr, __VA_ARGS__);                            \
			fputc('\n', stderr);                                     \
			abort();                                                 \
		}                                                                \
	} while (0)

#endif /* SLUICE_FUZZ_INPUT_H */
