/* SPDX-License-Identifier: MIT */
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
 * ordinary 64-bit atomics.  C11 has no 16-byte lock-free atomic, and GCC's
 * __sync builtin on __int128 is not one either where it matters: on arm64
 * it is a call into libgcc (-moutline-atomics, GCC's default there), and
 * its inline LDXP/STXP form hands back on failure a pair that was never
 * read atomically (below).  So the instruction is written here, per
 * architecture, and each is single-copy atomic for the whole 16 bytes with
 * respect to 8-byte atomic accesses to either half:
 *   x86-64  LOCK CMPXCHG16B.
 *   arm64   LSE's CASPAL where the CPU has it (ARMv8.1-A and later:
 *           Graviton 2 on, Ampere, Apple), chosen at run time by the
 *           kernel's HWCAP_ATOMICS, or at build time when the compiler
 *           targets LSE (__ARM_FEATURE_ATOMICS); else an LDXP/STLXP loop
 *           (ARMv8.0).  Both are correct on every CPU that has them and
 *           may act on the same pair at once (a CASP write clears another
 *           CPU's exclusive monitor), so the choice is only speed.
 *
 * Ordering, the contract every caller states its pairing against:
 *   success  a full barrier: every access before it is ordered before
 *            every access after it, the CAS's own read and write included
 *            (x86: a locked instruction; CASPAL: acquire and release in one
 *            RMW, which the Arm model orders as a full barrier, the form
 *            Linux's fully ordered cmpxchg takes on LSE; LDXP/STLXP + DMB
 *            ISH, Linux's form on ARMv8.0).
 *   failure  no write of a new value, and the pair found is read in one
 *            single-copy atomic access with acquire: what
 *            sluice__pair_cas_observe() hands back is a consistent snapshot
 *            that orders the caller's later reads after it.  Nothing weaker
 *            than that is promised on failure (CASPAL fails as an acquire
 *            load); no caller needs more (each retries from what it found).
 * The LL/SC loop retries only when the STLXP fails, i.e. when another
 * agent wrote the line between the LDXP and it (or the core dropped the
 * monitor): that is the hardware's own retry, as CMPXCHG16B's bus lock is,
 * and every iteration that fails does so because some other write
 * succeeded, so the system as a whole progresses (lock-free).
 */
#ifndef SLUICE_PAIR_INTERNAL_H
#define SLUICE_PAIR_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "sluice/common.h"

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "sluice__pair_cas is written for x86-64 and arm64 only (lib/pair_internal.h)"
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
 * under TSan the instruction itself runs, unseen by the tool (it is inline
 * assembly on both architectures), and the tool is told its ordering: a
 * release of both halves before it and an acquire of both after it.  On
 * arm64 this compiles (GCC's -fsanitize=thread supports aarch64) but is not
 * run by CI: TSan does not start under qemu-user's address space. */
#include <sanitizer/tsan_interface.h>
#endif

#if defined(__aarch64__)
/* Does this CPU have LSE (CASP)?  Set once, before main, from
 * getauxval(AT_HWCAP) by lib/pair.c's constructor; read relaxed (it is
 * written before any thread can call in, and either value is correct:
 * 0 only picks the LL/SC loop). */
extern _Atomic unsigned char sluice__pair_lse;

/* The bodies of the assembly below, with the pair as the "Q" operand
 * (a base register, no offset, as both instructions require). */
#define SLUICE__PAIR_MEM(lo) (*(volatile sluice__u128 *)(void *)(lo))

/* CASPAL: compare the pair with (x0, x1), store (x2, x3) if equal; (x0, x1)
 * receive the pair found either way.  CASP takes even-odd register pairs,
 * hence the fixed registers.  The assembler is told of LSE for this one
 * instruction when the compiler does not target it. */
static inline _Bool sluice__pair_cas_casp(_Atomic uint64_t *lo, uint64_t *a, uint64_t *dx,
                                          uint64_t new_lo, uint64_t new_hi)
{
	register uint64_t x0 __asm__("x0") = *a;
	register uint64_t x1 __asm__("x1") = *dx;
	register uint64_t x2 __asm__("x2") = new_lo;
	register uint64_t x3 __asm__("x3") = new_hi;
	uint64_t want_lo = *a, want_hi = *dx;
	__asm__ __volatile__(
#if !defined(__ARM_FEATURE_ATOMICS)
	                     ".arch_extension lse\n\t"
#endif
	                     "caspal %0, %1, %2, %3, %4"
#if !defined(__ARM_FEATURE_ATOMICS)
	                     "\n\t.arch_extension nolse"
#endif
	                     : "+r"(x0), "+r"(x1)
	                     : "r"(x2), "r"(x3), "Q"(SLUICE__PAIR_MEM(lo))
	                     : "memory");
	*a = x0;
	*dx = x1;
	return x0 == want_lo && x1 == want_hi;
}

/* LDXP/STLXP + DMB ISH.  An LDXP of 16 bytes is single-copy atomic only
 * when the STXP paired with it succeeds (ARMv8.0; ARMv8.4's LSE2 makes
 * aligned LDP atomic, but the baseline has no such guarantee), so on a
 * mismatch the loop stores the pair it read back unchanged and retries
 * until that store succeeds: the pair handed back is then one the memory
 * held at one instant, as CASP's and CMPXCHG16B's.  (GCC's inline form
 * skips that store, and its failed read can be torn: a new low half with
 * an old high half.)  The store-back changes nothing a reader can see; it
 * is the write CMPXCHG16B also does on failure. */
static inline _Bool sluice__pair_cas_llsc(_Atomic uint64_t *lo, uint64_t *a, uint64_t *dx,
                                          uint64_t new_lo, uint64_t new_hi)
{
	uint64_t seen_lo, seen_hi, put_lo, put_hi;
	uint32_t busy;
	__asm__ __volatile__("1:	ldxp	%0, %1, %5\n\t"
	                     "cmp	%0, %6\n\t"
	                     "ccmp	%1, %7, #0, eq\n\t"
	                     "csel	%2, %8, %0, eq\n\t"
	                     "csel	%3, %9, %1, eq\n\t"
	                     "stlxp	%w4, %2, %3, %5\n\t"
	                     "cbnz	%w4, 1b\n\t"
	                     "dmb	ish"
	                     : "=&r"(seen_lo), "=&r"(seen_hi), "=&r"(put_lo), "=&r"(put_hi),
	                       "=&r"(busy), "+Q"(SLUICE__PAIR_MEM(lo))
	                     : "r"(*a), "r"(*dx), "r"(new_lo), "r"(new_hi)
	                     : "cc", "memory");
	_Bool stored = seen_lo == *a && seen_hi == *dx;
	*a = seen_lo;
	*dx = seen_hi;
	return stored;
}
#endif

/* sluice__pair_cas_insn - the instruction: if the pair at @lo is (*@a,
 * *@dx), store (@new_lo, @new_hi).  Either way *@a and *@dx receive the
 * pair found (on success, the expected pair).  The ordering above. */
static inline _Bool sluice__pair_cas_insn(_Atomic uint64_t *lo, uint64_t *a, uint64_t *dx,
                                          uint64_t new_lo, uint64_t new_hi)
{
#if defined(__x86_64__)
	_Bool stored;
	__asm__ __volatile__("lock cmpxchg16b %1"
	                     : "=@ccz"(stored), "+m"(*(volatile sluice__u128 *)(void *)lo),
	                       "+a"(*a), "+d"(*dx)
	                     : "b"(new_lo), "c"(new_hi)
	                     : "memory");
	return stored;
#elif defined(__ARM_FEATURE_ATOMICS)
	return sluice__pair_cas_casp(lo, a, dx, new_lo, new_hi);
#else
	if (atomic_load_explicit(&sluice__pair_lse, memory_order_relaxed))
		return sluice__pair_cas_casp(lo, a, dx, new_lo, new_hi);
	return sluice__pair_cas_llsc(lo, a, dx, new_lo, new_hi);
#endif
}

/* The instruction, and under ThreadSanitizer the release of both words
 * before it and the acquire of both after it that tell the tool its
 * ordering. */
static inline _Bool sluice__pair_cas_full(_Atomic uint64_t *lo, uint64_t *a, uint64_t *dx,
                                          uint64_t new_lo, uint64_t new_hi)
{
#if defined(SLUICE__PAIR_TSAN)
	__tsan_release((void *)lo);
	__tsan_release((void *)(lo + 1));
	_Bool stored = sluice__pair_cas_insn(lo, a, dx, new_lo, new_hi);
	__tsan_acquire((void *)lo);
	__tsan_acquire((void *)(lo + 1));
	return stored;
#else
	return sluice__pair_cas_insn(lo, a, dx, new_lo, new_hi);
#endif
}

/* sluice__pair_cas - if *lo == old_lo and *hi == old_hi (one atomic
 * compare of both), store new_lo and new_hi.  @lo must be 16-byte aligned
 * with @hi the next 8 bytes.  Return: true when stored. */
static inline _Bool sluice__pair_cas(_Atomic uint64_t *lo, uint64_t old_lo, uint64_t old_hi,
                                     uint64_t new_lo, uint64_t new_hi)
{
	return sluice__pair_cas_full(lo, &old_lo, &old_hi, new_lo, new_hi);
}

/* sluice__pair_cas_observe - as sluice__pair_cas, and on failure the pair
 * found instead: *@old_lo and *@old_hi receive the 16 bytes the CAS
 * compared against, read in one atomic access with acquire (the failure
 * contract above).  So a caller that lost a race gets a consistent
 * snapshot of the new pair without reading either half again.  Return:
 * true when stored (then *@old_lo and *@old_hi are unchanged). */
static inline _Bool sluice__pair_cas_observe(_Atomic uint64_t *lo, uint64_t *old_lo,
                                             uint64_t *old_hi, uint64_t new_lo, uint64_t new_hi)
{
	return sluice__pair_cas_full(lo, old_lo, old_hi, new_lo, new_hi);
}

#endif /* SLUICE_PAIR_INTERNAL_H */
