/* SPDX-License-Identifier: MIT */
/*
 * keyhash_internal.h - the keyed tables' short-key hash on CPUs with AES
 * instructions, x86-64's AES-NI or ARMv8's Cryptographic Extension (never
 * installed): four AES rounds under secret round keys, in the shape of Go's
 * runtime aeshash and Rust's ahash.
 *
 * For a key of 1..16 bytes, as the two little-endian words w0, w1 that
 * sluice__siphash_words16() loads (zero-padded), and the table's 128-bit
 * seed expanded into six secret 128-bit keys S0, S1, R1..R4
 * (sluice__keyhash_expand(), SipHash-1-3 of fixed tags under the seed):
 *
 *   L = AESENC(S0 ^ (len in every 16-bit lane), S1)   per-length whitening
 *   x = (w1:w0) ^ L
 *   x = AESENC(AESENC(AESENC(AESENC(x, R1), R2), R3), R4)
 *   h = the low 64 bits of x
 *
 * AESENC is one full AES round (ShiftRows, SubBytes, MixColumns, then the
 * round key XORed in): the same function on every CPU that has it, which
 * tests/core/test_keyed.c checks against its own FIPS-197 round in plain C.  On
 * arm64 it is AESMC(AESE(x, 0)) ^ k (ARMv8's AESE XORs its key in first,
 * then ShiftRows and SubBytes; AESMC is MixColumns), so x86-64 and arm64
 * compute the same h for the same key and seed, bit for bit, and a table's
 * format does not depend on the architecture that formatted it (its words
 * are little-endian 64-bit on both).
 *
 * Why these steps (keyed.h, HASHING, states what they buy):
 *   - The length: zero padding makes "a" and "a\0" the same words, so the
 *     length must enter somewhere data cannot cancel it.  It selects the
 *     whitening key through one AES round of the secret S0 (Go does the
 *     same: the 16-bit length in every lane of the seed, scrambled by one
 *     AESENC), so two lengths whiten with keys whose difference is secret:
 *     a client cannot pick words whose difference cancels it.
 *   - Four rounds: two AES rounds make every output bit depend on every
 *     input bit (full diffusion), so fewer cannot be a hash of the whole
 *     key.  Four is the fewest for which the wide-trail bound (Daemen and
 *     Rijmen: any differential characteristic over four rounds has at
 *     least 25 active S-boxes, each at most 2^-6) bounds every
 *     characteristic by 2^-150, below the 2^-128 of a random 128-bit
 *     value: no key difference a client chooses is known to reach a chosen
 *     output difference (a collision is the zero difference) with better
 *     odds than chance.  Three rounds (Go's aeshash for keys up to 16
 *     bytes, which claims only flooding resistance for an unknown seed)
 *     have a 9-S-box bound, 2^-54, which leaves room.  Each round is one
 *     AESENC of the dependent chain, about 3-4 cycles on current cores.
 *   - Secret round keys (not the state itself as Go uses): every round
 *     adds key material the client does not know.
 * What this is not: a proven PRF (no reduced-round AES is).  The attacks
 * known on four-round AES (the square/integral attack) need chosen inputs
 * and the full 128-bit outputs; a client sees at most which of its keys
 * share a group (a few low bits of h) through refusals, evictions or
 * timing.  A client that has the seed can aim keys, as with SipHash.
 *
 * The AES path is compiled for the instructions by a target attribute, not
 * a global -maes or -march=...+crypto, so the library runs on every x86-64
 * and every ARMv8.0 CPU; sluice__keyhash_cpu_aes() asks this CPU (cpuid;
 * the kernel's HWCAP_AES on arm64, as the ARMv8 extension is optional:
 * Raspberry Pi 4's Cortex-A72 lacks it, servers have it).  Tables formatted
 * where the CPU lacks it use SipHash-1-3, and the table header records
 * which (sluice__keyed_have_aes() and init, keyed_table.c), so every
 * process that attaches hashes as the one that formatted it.
 */
#ifndef SLUICE_KEYHASH_INTERNAL_H
#define SLUICE_KEYHASH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "siphash_internal.h"

/* The secret round keys: S0, S1, R1..R4, each two 64-bit words (low, high). */
#define SLUICE__KEYHASH_WORDS 12

/* Expand the table's 128-bit seed (k0, k1) into the round keys: SipHash-1-3
 * (a PRF) of fixed tags under the seed, so they are as secret as the seed
 * and every process that attaches derives the same ones. */
static inline void sluice__keyhash_expand(uint64_t k0, uint64_t k1,
                                          uint64_t ak[SLUICE__KEYHASH_WORDS])
{
	for (unsigned i = 0; i < SLUICE__KEYHASH_WORDS; i++) {
		unsigned char tag[8] = { 'a', 'e', 's', 'k', 'e', 'y', (unsigned char)i, 0 };
		ak[i] = sluice__siphash13(k0, k1, tag, sizeof(tag));
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
#define SLUICE__KEYHASH_AES 1
#include <immintrin.h>

/* sluice__keyhash_cpu_aes - can this CPU run sluice__keyhash_aes16()?
 * cpuid, through GCC's __builtin_cpu_supports (it initialises its own CPU
 * model table first). */
static inline int sluice__keyhash_cpu_aes(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("aes") ? 1 : 0;
}

/*
 * sluice__keyhash_aes16 - the hash above of a key of @len (1..16) bytes
 * given as its words @w0, @w1.  Out of line: a function compiled for AES-NI
 * cannot be inlined into one that is not (GCC refuses, rightly: the caller
 * may run where AES-NI is absent), so the decision path calls it only after
 * the table's hash said AES, which attach allowed only on a CPU that has it.
 */
__attribute__((target("aes,sse2"), noinline, unused)) static uint64_t
sluice__keyhash_aes16(const uint64_t ak[SLUICE__KEYHASH_WORDS], uint64_t w0, uint64_t w1,
                      size_t len)
{
	const __m128i *rk = (const __m128i *)(const void *)ak;
	__m128i l = _mm_xor_si128(_mm_loadu_si128(&rk[0]), _mm_set1_epi16((short)len));
	l = _mm_aesenc_si128(l, _mm_loadu_si128(&rk[1]));
	__m128i x = _mm_xor_si128(_mm_set_epi64x((long long)w1, (long long)w0), l);
	x = _mm_aesenc_si128(x, _mm_loadu_si128(&rk[2]));
	x = _mm_aesenc_si128(x, _mm_loadu_si128(&rk[3]));
	x = _mm_aesenc_si128(x, _mm_loadu_si128(&rk[4]));
	x = _mm_aesenc_si128(x, _mm_loadu_si128(&rk[5]));
	return (uint64_t)_mm_cvtsi128_si64(x);
}

#elif defined(__aarch64__) && defined(__GNUC__) &&                                        \
        (!defined(__clang__) || defined(__ARM_FEATURE_AES) || defined(__ARM_FEATURE_CRYPTO))
/* (clang 14's arm_neon.h declares the AES intrinsics only when the whole
 * file targets them; built so, or with GCC, the path below is compiled for
 * them by its attribute; otherwise tables are SipHash.) */
#define SLUICE__KEYHASH_AES 1
#include <arm_neon.h>
#include <sys/auxv.h>

/* sluice__keyhash_cpu_aes - can this CPU run sluice__keyhash_aes16()?  The
 * kernel's word for it (the instructions are optional in ARMv8). */
static inline int sluice__keyhash_cpu_aes(void)
{
	return (getauxval(AT_HWCAP) & HWCAP_AES) ? 1 : 0;
}

/*
 * sluice__keyhash_aes16 - as the x86-64 one above, with AESE/AESMC, out of
 * line for the same reason.  Each AESENC(x, k) = AESMC(AESE(x, 0)) ^ k; the
 * XOR of one round's key is folded into the next AESE (which XORs its key
 * in first), the usual arm64 form, so the chain is AESE, AESMC five times
 * and one EOR:
 *   L ^ S1 = AESMC(AESE(S0 ^ len, 0))
 *   x      = AESMC(AESE(w ^ (L ^ S1), S1))        AESENC(w ^ L, R1) ^ R1
 *   x      = AESMC(AESE(x, Ri))  for i = 1, 2, 3  AESENC(.., Ri+1) ^ Ri+1
 *   x      = x ^ R4
 * Memory order of the words: lane i of vld1q_u64(ak) is ak[i], as
 * _mm_loadu_si128 loads them, and the key's words are (w0, w1) low first.
 */
__attribute__((target("+crypto"), noinline, unused)) static uint64_t
sluice__keyhash_aes16(const uint64_t ak[SLUICE__KEYHASH_WORDS], uint64_t w0, uint64_t w1,
                      size_t len)
{
	const uint8x16_t zero = vdupq_n_u8(0);
	uint8x16_t rk[6];
	for (int i = 0; i < 6; i++)
		rk[i] = vreinterpretq_u8_u64(vld1q_u64(&ak[2 * i]));
	uint8x16_t l = veorq_u8(rk[0], vreinterpretq_u8_u16(vdupq_n_u16((uint16_t)len)));
	l = vaesmcq_u8(vaeseq_u8(l, zero));
	uint8x16_t x = veorq_u8(vreinterpretq_u8_u64(vcombine_u64(vcreate_u64(w0), vcreate_u64(w1))),
	                        l);
	x = vaesmcq_u8(vaeseq_u8(x, rk[1]));
	x = vaesmcq_u8(vaeseq_u8(x, rk[2]));
	x = vaesmcq_u8(vaeseq_u8(x, rk[3]));
	x = vaesmcq_u8(vaeseq_u8(x, rk[4]));
	x = veorq_u8(x, rk[5]);
	return vgetq_lane_u64(vreinterpretq_u64_u8(x), 0);
}
#endif

#endif /* SLUICE_KEYHASH_INTERNAL_H */
