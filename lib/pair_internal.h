/*
 * pair_internal.h - a double-width CAS on a 16-byte pair of 64-bit atomics
 * (never installed).
 *
 * Why: a 64-bit state word has room for only 32 bits of its epoch beside
 * its count, so a thread stalled across 2^32 epochs (a signal handler, a
 * SIGSTOPped process sharing the memory) could CAS a reused word that
 * looks exactly like the one it read.  Operations whose effect is liberal
 * (giving permits back, depositing a lease) must fail on a reused word, so
 * they CAS the word together with the full epoch beside it.  Decisions keep
 * a single-width CAS on the word alone and check the 64-bit head after it
 * (the cheaper check suffices there: an admission only counts, so one that
 * landed on a reused word is reported as a refusal; see window.h).
 *
 * The pair is written by this CAS and, for the word half alone, by
 * ordinary 64-bit atomics.  x86-64's LOCK CMPXCHG16B and arm64's CASP (or
 * LDXP/STXP) are single-copy atomic for the whole 16 bytes with respect to
 * 8-byte atomic accesses to either half; C11 has no 16-byte lock-free
 * atomic, so this is GCC's __sync builtin (inline CMPXCHG16B with -mcx16,
 * which lib/meson.build passes; under ThreadSanitizer, see below).  Full
 * barrier, as every __sync builtin: the pairing each caller relies on is
 * stated at the call.
 */
#ifndef SLUICE_PAIR_INTERNAL_H
#define SLUICE_PAIR_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#if !defined(__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16)
#error "sluice needs a 16-byte compare-and-swap (x86-64: build with -mcx16)"
#endif
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "sluice__pair_cas puts @lo in the low half: little-endian only"
#endif

#if defined(__SANITIZE_THREAD__)
#define SLUICE__PAIR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLUICE__PAIR_TSAN 1
#endif
#endif

#if defined(SLUICE__PAIR_TSAN)
/* ThreadSanitizer does not instrument a 16-byte CAS as one instruction: its
 * runtime emulates it by a plain 16-byte read and write under a spin lock
 * of its own (GCC 12's and LLVM 14's tsan_interface_atomic.cpp,
 * "mutex128").  That emulation is not atomic with respect to the 8-byte
 * atomics on either half, nor at all across processes, so under it a
 * keyed table shared by forked workers lost updates (stress_keyed
 * --mode=procs over-admitted in every TSan run and in no plain one).  So
 * under TSan the instruction itself runs, unseen by the tool, and the tool
 * is told its ordering: a full barrier, i.e. a release of both halves
 * before it and an acquire of both after it. */
#if !defined(__x86_64__)
#error "sluice under ThreadSanitizer: the 16-byte CAS is written for x86-64 only"
#endif
#include <sanitizer/tsan_interface.h>
#endif

#if defined(SLUICE__PAIR_TSAN)
/* Under ThreadSanitizer, both CASes below: the locked instruction, with a
 * release of both words before it and an acquire of both after it.  On
 * failure *@a and *@dx receive the pair found (RDX:RAX); on success they
 * keep the expected pair, which is then the old value. */
static inline _Bool sluice__pair_cas_tsan(_Atomic uint64_t *lo, uint64_t *a, uint64_t *dx,
                                          uint64_t new_lo, uint64_t new_hi)
{
	__extension__ typedef unsigned __int128 u128;
	_Bool stored;
	__tsan_release((void *)lo);
	__tsan_release((void *)(lo + 1));
	__asm__ __volatile__("lock cmpxchg16b %1"
	                     : "=@ccz"(stored), "+m"(*(volatile u128 *)(void *)lo), "+a"(*a),
	                       "+d"(*dx)
	                     : "b"(new_lo), "c"(new_hi)
	                     : "memory");
	__tsan_acquire((void *)lo);
	__tsan_acquire((void *)(lo + 1));
	return stored;
}
#endif

/* sluice__pair_cas - if *lo == old_lo and *hi == old_hi (one atomic
 * compare of both), store new_lo and new_hi.  @lo must be 16-byte aligned
 * with @hi the next 8 bytes.  Return: true when stored. */
static inline _Bool sluice__pair_cas(_Atomic uint64_t *lo, uint64_t old_lo, uint64_t old_hi,
                                     uint64_t new_lo, uint64_t new_hi)
{
#if defined(SLUICE__PAIR_TSAN)
	return sluice__pair_cas_tsan(lo, &old_lo, &old_hi, new_lo, new_hi);
#else
	__extension__ typedef unsigned __int128 u128;
	u128 expect = ((u128)old_hi << 64) | old_lo;
	u128 next = ((u128)new_hi << 64) | new_lo;
	return __sync_bool_compare_and_swap((u128 *)(void *)lo, expect, next);
#endif
}

/* sluice__pair_cas_observe - as sluice__pair_cas, and on failure the pair
 * found instead: *@old_lo and *@old_hi receive the 16 bytes the CAS
 * compared against, read in one atomic access (CMPXCHG16B hands them back
 * in RDX:RAX).  So a caller that lost a race gets a consistent snapshot of
 * the new pair without reading either half again.  Full barrier on both
 * outcomes (a locked instruction; under ThreadSanitizer the same release
 * and acquire annotations as above).  Return: true when stored (then
 * *@old_lo and *@old_hi are unchanged). */
static inline _Bool sluice__pair_cas_observe(_Atomic uint64_t *lo, uint64_t *old_lo,
                                             uint64_t *old_hi, uint64_t new_lo, uint64_t new_hi)
{
#if defined(SLUICE__PAIR_TSAN)
	return sluice__pair_cas_tsan(lo, old_lo, old_hi, new_lo, new_hi);
#else
	__extension__ typedef unsigned __int128 u128;
	u128 expect = ((u128)*old_hi << 64) | *old_lo;
	u128 next = ((u128)new_hi << 64) | new_lo;
	u128 seen = __sync_val_compare_and_swap((u128 *)(void *)lo, expect, next);
	*old_lo = (uint64_t)seen;
	*old_hi = (uint64_t)(seen >> 64);
	return seen == expect;
#endif
}

#endif /* SLUICE_PAIR_INTERNAL_H */
