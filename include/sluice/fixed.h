/* SPDX-License-Identifier: MIT */
/*
 * sluice/fixed.h - fixed window counter: at most L permits per aligned window.
 *
 * GUARANTEE (any number of threads, any timing): for every aligned window
 * [k*W, (k+1)*W) of the limiter's timeline, the permits admitted at a time
 * inside it total at most L (while set_limit changes L: READINGS ACROSS A
 * CHANGE below).  A decision's time is its reading, or the start
 * of the newest window when the reading is older (decision.now_ns).  Check-and-count is one CAS on one 64-bit word
 * that packs the window's epoch tag (low 32 bits of k) with its count, so two
 * racing threads can never both take the last permit.
 *
 * WORST CASE (this is why it is the contrast case): windows are aligned, so
 * an adversary sends L just before a boundary and L just after it: 2L pass
 * within any interval longer than the gap between them, e.g. 2L in 2 ms with
 * a 1 s window.  Use the sliding window (sluice/window.h) when that matters.
 *
 * CLOCK JUMPS: the limiter keeps the newest epoch it has opened (a 64-bit
 * word, advanced by CAS and never moved back).  A reading before it is
 * treated as a reading in that newest window: a clock set back cannot reopen
 * an old window.  A clock that jumps forward opens a new window, as the time
 * says (CLOCK_MONOTONIC, the default base, does not jump).
 *
 * STALLS AND WRAP: the guarantee holds for a thread stalled for any time
 * at any instruction (preempted, in a signal handler, its process stopped)
 * and for readings anywhere in 0..2^64-1.  The count word carries only 32
 * bits of its window's epoch; head and the word's full epoch beside it
 * carry all 64.  A decision whose CAS may have hit the word of a window
 * 2^32 or more later than the one it read (the only way a 32-bit tag can
 * match a reused word) is reported as a refusal, its n left counted there
 * (under-admission of at most n per such decision, never over).  A refund
 * compares full epochs and CASes the word with its full epoch, so a refund
 * of any age, or one stalled for any time, gives back only to the window
 * it was taken from, and only while that window is current.
 *
 * SET_LIMIT (sluice_fixed_set_limit(), safe while decisions run): a
 * change keeps the count.  Nothing counted is forgotten and nothing is
 * minted: permits already admitted in the current window stay counted
 * against the new limit, so lowering L below the count refuses every
 * request until the window ends, and raising it admits just the
 * difference in that window.  A request above the limit it reads is
 * SLUICE_ETOOBIG.  The limit is the only setter: a fixed window has no
 * rate or burst (the generic handle answers SLUICE_ENOTSUP for those).
 *
 * READINGS ACROSS A CHANGE: a change is stamped with the newest window
 * the limiter has counted in when it lands (one total order of the
 * changes and the window openings, lib/fixed.c DESIGN); it is in force
 * from that window until the window of the next change, both included.
 * Every admission is judged against a limit in force in its own window:
 * it reads the limit after the count word and its CAS succeeds only on
 * that word unchanged, a decision that lost its CAS or opened the window
 * reads it again, and a reading older than the newest window is judged
 * in the newest window (CLOCK JUMPS), never in the older window it names.
 * So, across any sequence of changes and any interleaving of readings
 * (a decision stalled for any time between its clock read and its CAS
 * included), the GUARANTEE holds per window with L = the largest limit in
 * force in that window: max(old, new) in the window a change lands in,
 * the new limit alone in every later one.  decision.limit is the limit
 * the decision was judged against.
 *
 * LEASES (config.lease = B > 0, off by default), for a hot key: the
 * fixed window is then the sliding ring's N = 1 case (window.h, EXACT
 * with leases), one implementation: init allocates a ring of one bucket
 * of width W with per-CPU leases of up to B and every call goes to it.
 * Its N = 1 bound is this header's GUARANTEE, unchanged: at most L per
 * aligned window, any timing; a decision spends from its CPU's lease (one
 * CAS on its own line) and one in about B takes from the shared word,
 * leases shrinking to exact takes near the limit.  The price is the
 * ring's: permits leased and unspent when the window ends are lost
 * (under-admission, at most cells * (B + n_max - 1) + threads * B per
 * window, window.h), and refunds, available and set_limit are the ring's
 * (window.h: a refund is exact while the window is open).  Limits with
 * leases: B in 1..SLUICE_WINDOW_LEASE_MAX (SLUICE_ELEASE), L up to
 * SLUICE_WINDOW_LIMIT_MAX (SLUICE_ELIMIT).  Memory: the ring, 64 bytes per
 * possible CPU plus its bucket, allocated by init, freed by destroy.
 *
 * LIMITS: L in 1..SLUICE_FIXED_LIMIT_MAX; W >= the clock's resolution.
 * Memory: 64 bytes (one cache line) of hot state.
 */
#ifndef SLUICE_FIXED_H
#define SLUICE_FIXED_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "common.h"
#include "decision.h"
#include "window.h"

#define SLUICE_FIXED_LIMIT_MAX 0xffffffffULL

typedef struct sluice_fixed_config {
	uint64_t limit;              /* L: permits per window, >= 1          */
	uint64_t window_ns;          /* W: window length in ns               */
	const sluice_clock_t *clock; /* NULL: &sluice_clock_cached           */
	uint32_t lease;              /* per-CPU leases of up to this many
	                              * permits (LEASES): the ring's N = 1;
	                              * 0 (the default) = none              */
} sluice_fixed_config_t;

typedef struct sluice_fixed {
	/* written only by sluice_fixed_set_limit(); a decision is judged
	 * against the value it reads after the count word (READINGS ACROSS
	 * A CHANGE) */
	_Atomic uint64_t limit;
	/* read-only after init */
	uint64_t window_ns;
	const sluice_clock_t *clock;
	sluice_window_t *ring;      /* leases: the ring (N = 1) deciding for
	                             * this window; NULL without leases   */
	/* private: written on decision paths, on a line of their own */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t head; /* newest epoch opened */
	/* One 16-byte pair: @word is what decisions read and CAS; @epoch,
	 * the full epoch the word is tagged with, is written with it by the
	 * double-width CAS that opens a window (fixed.c). */
	_Alignas(16) _Atomic uint64_t word; /* tag32 | count32 */
	_Atomic uint64_t epoch;
} sluice_fixed_t;

/*
 * sluice_fixed_init - validate @cfg and set up @f (caller-allocated).
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ELIMIT, SLUICE_EWINDOW (W = 0),
 * SLUICE_ERESOLUTION (W below the clock's resolution), SLUICE_ECLOCK.
 * With leases also SLUICE_ELEASE, SLUICE_ELIMIT (L above
 * SLUICE_WINDOW_LIMIT_MAX), SLUICE_ENOMEM.
 * On error @f is untouched and nothing is allocated.  Allocates only with
 * leases (the ring); not thread-safe for the same @f.
 */
SLUICE_NODISCARD SLUICE_API int sluice_fixed_init(sluice_fixed_t *f, const sluice_fixed_config_t *cfg);
/* sluice_fixed_config_check - what sluice_fixed_init() returns for @cfg,
 * from init's own validator, with no memory and no limiter (common.h,
 * CONFIG CHECKS): 0 or the same code, never SLUICE_ENOMEM. */
SLUICE_NODISCARD SLUICE_API int sluice_fixed_config_check(const sluice_fixed_config_t *cfg);
SLUICE_API size_t sluice_fixed_size(void);
/* sluice_fixed_destroy - free the ring of a leased window (without leases
 * a fixed window allocates nothing).  NULL is fine.  No decision may be
 * running. */
SLUICE_API void sluice_fixed_destroy(sluice_fixed_t *f);

/*
 * sluice_fixed_acquire_at - take @n permits at time @now, all or nothing.
 * @f: the limiter.  @n: 1..limit.  @now: ns on the limiter's clock base.
 * @d: NULL, or filled with the decision.
 *
 * Lock-free (one CAS on success; a failed CAS means another thread made
 * progress), no allocation, safe from any number of threads.  Loads of
 * head and the CAS are acquires only so the check after the CAS is sound
 * (see the code); an admission publishes no other data.  A decision that
 * stalls for 2^32 windows or more between its reads and its CAS returns 0
 * (refused) with its n left counted: never an extra admission.
 * Return: 1 admitted, 0 refused, SLUICE_EINVAL (n = 0), SLUICE_ETOOBIG
 * (n above the limit this decision read: cannot pass unless set_limit
 * raises it; @d says retry_after_ns = SLUICE_NEVER).
 */
SLUICE_NODISCARD SLUICE_API int sluice_fixed_acquire_at(sluice_fixed_t *f, uint64_t n, uint64_t now,
                                          sluice_decision_t *d);

/*
 * sluice_fixed_refund - give back @n permits of the admission @admitted
 * describes (its decision, as filled by acquire).
 *
 * While that window is current, the count drops by n at once (one
 * double-width CAS of the count word and its full epoch, which fails on a
 * reused word however long this call stalled).  Once the window is over
 * its permits no longer count, so there is nothing left to give back.
 * Caller's contract: refund each admission at most once, and at most the
 * n it took.  The limiter keeps no record per admission, so it cannot tell
 * a second refund of one decision from a first refund of another; the
 * count never goes below zero, but a repeated refund frees permits that
 * other admissions took.  Lock-free, no allocation.
 * Return: 0 (given back: its window is current); SLUICE_EEXPIRED (its
 * window is over, a later one has opened: nothing to give back, nothing
 * changed; 2^32 windows later too); SLUICE_EINVAL (NULL, a refused
 * decision, n = 0, more than the window counts, or a decision from a
 * window this limiter never opened, e.g. later than its newest).  With
 * leases, the ring's answers (window.h).
 */
SLUICE_API int sluice_fixed_refund(sluice_fixed_t *f, uint64_t n,
                                   const sluice_decision_t *admitted);

/* sluice_fixed_acquire - as _at, reading the limiter's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_fixed_acquire(sluice_fixed_t *f, uint64_t n, sluice_decision_t *d);

/*
 * sluice_fixed_available_at - the largest n an acquire at @now would admit
 * right now (0 when none), taking nothing.
 * @f: the limiter.  @now: ns on the limiter's clock base; a reading older
 * than the newest window is read as that window (CLOCK JUMPS).
 *
 * The current limit minus what the window of @now counts (0 when the count
 * is at or above a lowered limit); a window later than any opened counts
 * nothing.  Lock-free, writes nothing, no allocation, any thread.  A
 * snapshot: concurrent decisions and set_limit may change it at once.
 * Return: 0..limit.
 */
SLUICE_API uint64_t sluice_fixed_available_at(sluice_fixed_t *f, uint64_t now);

/* sluice_fixed_available - as _at, reading the limiter's clock. */
SLUICE_API uint64_t sluice_fixed_available(sluice_fixed_t *f);

/*
 * sluice_fixed_set_limit - change L to @limit, keeping the count (see
 * SET_LIMIT above for what it means for permits already counted and for
 * decisions running meanwhile).
 * Safe while decisions run on any thread: one store, which the deciders
 * read without a lock; concurrent calls leave one of their values.  No
 * allocation.  Takes effect at once, in the newest window counted in (its
 * stamp: READINGS ACROSS A CHANGE), so there is no _at variant.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ELIMIT (outside
 * 1..SLUICE_FIXED_LIMIT_MAX, as init): then nothing changes.
 */
SLUICE_API int sluice_fixed_set_limit(sluice_fixed_t *f, uint64_t limit);

#ifdef SLUICE_INLINE
#include "static/fixed.h"
#endif

#endif /* SLUICE_FIXED_H */
