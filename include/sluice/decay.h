/* SPDX-License-Identifier: MIT */
/*
 * sluice/decay.h - decayed-rate counter: admitted permits fade out
 * exponentially instead of dropping out of a window all at once.
 *
 * Definition.  The count c decays continuously with half-life h:
 *     c(t') = c(t) * 2^(-(t' - t) / h).
 * A request of n is admitted at time t when c(t) + n <= L; then c += n.
 * Equivalently, c(t) is the sum over every admitted (and not refunded)
 * request i of n_i * 2^(-(t - t_i) / h), t_i its decision time (now_ns).
 *
 * GUARANTEE (any number of threads, any timing, on the limiter's timeline):
 *   at every admission, the exactly decayed sum of all admitted permits,
 *   this one included, is at most L (+ 2^(1-F), see PRECISION; F >= 8), L
 *   the limit the admission was checked against (d->limit: the one in force,
 *   see sluice_decay_set_limit()).  The
 *   check-and-add is one CAS on one word, so racing threads cannot both
 *   take the last of the headroom.  Consequences:
 *   (a) burst: at most L permits at any one instant; after a long idle
 *       (at most 32 half-lives, when the count is forgotten) exactly L pass
 *       at once.
 *   (b) long run: c rises only by admissions and falls at rate c ln2 / h,
 *       never above L, so the permits admitted in ANY interval of length D
 *       number at most L (1 + D ln2 / h) (+ 2^(1-F) (1 + D ln2 / h)): a burst
 *       of L, then the mean rate L / tau with tau = h / ln 2 the mean life
 *       of a permit (e.g. L = 100, h = 1 s: 100 at once, then at most 69.3
 *       per second; 169 in any 1 s).  Saturated traffic of n = 1 reaches
 *       (L - 1/2) ln2 / h: the bound is tight.
 *
 * WORST CASE.  (a) and (b) are the whole story: there are no windows to
 *   align with, so no boundary doubling, but (b) is a rate bound with a
 *   burst of L on top, not "L per h": an interval of one half-life sees up
 *   to 1.69 L.  A request of n = L needs the count to be forgotten
 *   entirely (about 32 half-lives of silence); large n wait long after
 *   any traffic (retry_after_ns says how long).
 *
 * CLOCK JUMPS.  The state's time t (in the packed word) is the newest time
 *   an admission was decided at; a reading older than t, or than the anchor
 *   the word's times are kept against (a 64-bit time, only moved forward),
 *   is treated as t: the count is neither decayed nor "un-decayed", so a
 *   clock set back by seconds mints nothing.  d->now_ns is the time used
 *   (the reading rounded down to unit_ns, or t).
 *   A forward jump decays the count, as the time says.
 *   The timeline starts at 0, not at the clock's reading at init: a new
 *   limiter is empty as of time 0, which is the same state at every time,
 *   so its first reading, from any time base (a manual clock starting at 0,
 *   CLOCK_MONOTONIC, readings near 2^64), is used as it is.  Any sequence
 *   of readings works without wrapping: forward, back (held at t), jumps of
 *   any size, up to 2^64 - 1.
 *
 * PRECISION (every rounding errs toward fewer admissions):
 *   - the count is fixed point in units of 2^-F, F = 32 - bitlen(limit_max)
 *     (31 at 1, 8 at the largest L), rounded up after every operation: the
 *     kept count is never below the exact decayed sum, except that counts
 *     below one unit are dropped (they would otherwise never reach 0, and
 *     n = L could never pass again); drops are at least F half-lives
 *     apart, so what was dropped adds up to less than 2^(1-F) at any time;
 *   - 2^-x is evaluated in doubles with a 2^-43 relative margin added;
 *   - decisions use the reading rounded DOWN to a grid of unit_ns (a power
 *     of two, 1 ns for h up to about 4 ms, at most h * 2^-20 beyond), so
 *     the count is never taken as more decayed than at the reading itself;
 *     d->now_ns is that grid point, and retry_after_ns is rounded up to
 *     the grid (a reading at now_ns + retry_after_ns passes);
 *   - so a refusal where exact arithmetic would admit needs c(t) + n within
 *     a few units of L (the kept count exceeds the exact one by at most one
 *     unit per write, each fading with the count).
 *   retry_after_ns on refusal: the time until the kept count has decayed to
 *   L - n: the same request passes at now_ns + retry_after_ns (if nothing
 *   else happens) and not 1 ns earlier; never earlier than the exact time.
 *   reset_ns: an upper bound on the time until the count is forgotten
 *   (reaches 0), late by at most 2^-30 h (log2 c + 1) + 2 ns (c the count
 *   as last written, in units of 2^-F, below 2^32) before its rounding up
 *   to the grid.
 *   A refusal computes retry_after_ns and reset_ns in closed form, with
 *   no division and no evaluation of the decay, except when the crossing
 *   lies within about 4e-13 h of a grid point (then a bounded search).
 *   remaining: floor(L - c), c the kept count after the decision.
 *
 * LIMITS: L in 1..SLUICE_DECAY_LIMIT_MAX (2^24 - 1), and limit_max (0: L)
 *   in L..SLUICE_DECAY_LIMIT_MAX, the largest L set_limit may set later,
 *   which chooses F = 32 - bitlen(limit_max) (SLUICE_ELIMIT); h in
 *   SLUICE_DECAY_HALFLIFE_MIN_NS (1 us) .. SLUICE_DECAY_HALFLIFE_MAX_NS
 *   (2^50 ns, 13 days) (SLUICE_EHALFLIFE); h at least the clock's
 *   resolution (SLUICE_ERESOLUTION: readings come in clock steps, and a
 *   count fades by 2^(-step/h) between two of them, so a shorter half-life
 *   would pass about L per step, far below the mean rate L ln2 / h; at
 *   h = one step, steady traffic still gets (1 - 2^-1) / ln2 = 72% of the
 *   mean rate, and closer to all of it as h grows past the step); n in 1..L
 *   (SLUICE_ETOOBIG above).  Readings in the last unit_ns before 2^64
 *   count as the last grid point.  Stalls: a thread stalled inside one
 *   decision for any time, while the anchor moves on and the state word
 *   comes back bit for bit (the same count, the same time modulo 2^29
 *   unit_ns), fails its write: every write from a snapshot is one
 *   double-width CAS of (anchor, word), so it never counts, forgets or
 *   gives back against the wrong anchor (tests/core/test_wrap.c stalls one).
 *   Nothing a stalled writer leaves can make a call spin: such a state is
 *   read toward fewer admissions.
 * NO BOOKING: decay has no reserve or cancel.  A booking holds a slot at
 *   a later time, and the decayed count has no slots: it is one sum that
 *   fades, and n booked for t + d would have to be added now, either at
 *   weight n (faded by t + d: fewer counted than used, so more admitted
 *   than the GUARANTEE allows) or at the weight that is n at t + d (more
 *   than n counted until then: refusals for permits nobody used).
 *   Callers that must
 *   wait poll on retry_after_ns (sluice_limiter_wait_until() does);
 *   sluice_limiter_reserve() says SLUICE_ENOTSUP.
 * MEMORY: one cache line of hot state (anchor and packed word) in a
 *   caller-allocated struct; nothing is allocated.
 */
#ifndef SLUICE_DECAY_H
#define SLUICE_DECAY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "common.h"
#include "decision.h"

#define SLUICE_DECAY_LIMIT_MAX ((1ULL << 24) - 1)
#define SLUICE_DECAY_HALFLIFE_MIN_NS 1000ULL       /* 1 us */
#define SLUICE_DECAY_HALFLIFE_MAX_NS (1ULL << 50)  /* about 13 days */
/* set_limit gives up (SLUICE_ETIMEDOUT) after waiting this long for a
 * concurrent one: 1 s. */
#define SLUICE_DECAY_WRITER_WAIT_NS 1000000000ULL

typedef struct sluice_decay_config {
	uint64_t limit;              /* L: admit while c + n <= L, >= 1      */
	uint64_t limit_max;          /* the largest L set_limit may set later
	                              * (0: L itself); sets the fixed point */
	uint64_t half_life_ns;       /* h: the count halves every h          */
	const sluice_clock_t *clock; /* NULL: &sluice_clock_cached           */
} sluice_decay_config_t;

typedef struct sluice_decay {
	/* read-only after init, except limit (sluice_decay_set_limit) */
	_Atomic uint64_t limit;      /* L in force: read it with sluice_decay_limit() */
	uint64_t limit_max;          /* the largest L set_limit accepts        */
	uint64_t half_life_ns;
	uint64_t unit_ns;            /* grid of the count's time (power of two) */
	const sluice_clock_t *clock;
	/* private, read-only after init */
	uint8_t unit_shift;          /* log2(unit_ns)                           */
	uint8_t frac_bits;           /* F: the count is in units of 2^-F        */
	_Atomic uint32_t writer;     /* set_limit serialisation flag            */
	uint64_t flush_ns;           /* 34 h: any count is forgotten by then    */
	double inv_half_life;        /* 1 / h, rounded: decisions multiply      */
	/* private: written by decisions, on a line of their own */
	/* anchor and word are one 16-byte pair, CASed together (lib/decay.c) */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t anchor; /* time base, only grows */
	_Atomic uint64_t word; /* packed state, see lib/decay.c                */
} sluice_decay_t;

/*
 * sluice_decay_init - validate @cfg and set up @x (caller-allocated) with a
 * zero count.  The clock is not read: the limiter's time comes from the
 * readings its decisions are given (CLOCK JUMPS).
 * No allocation.  Not thread-safe for the same @x.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ECLOCK, SLUICE_ELIMIT,
 * SLUICE_EHALFLIFE, SLUICE_ERESOLUTION (h below the clock's resolution).
 * On error @x is untouched.
 */
SLUICE_NODISCARD SLUICE_API int sluice_decay_init(sluice_decay_t *x, const sluice_decay_config_t *cfg);
/* sluice_decay_config_check - what sluice_decay_init() returns for @cfg,
 * from init's own validator, with no memory and no limiter (common.h,
 * CONFIG CHECKS): 0 or the same code, never SLUICE_ENOMEM. */
SLUICE_NODISCARD SLUICE_API int sluice_decay_config_check(const sluice_decay_config_t *cfg);

/* sluice_decay_destroy - nothing to free; NULL-safe.  No decision may run. */
SLUICE_API void sluice_decay_destroy(sluice_decay_t *x);

/* sluice_decay_size - sizeof(sluice_decay_t), for FFI callers. */
SLUICE_API size_t sluice_decay_size(void);

/*
 * sluice_decay_acquire_at - take @n permits at time @now, all or nothing.
 * @x: the limiter.  @n: 1..limit.  @now: ns on the limiter's clock base.
 * @d: NULL, or filled with the decision (see PRECISION for retry_after_ns,
 * reset_ns and remaining).
 *
 * Lock-free (one CAS on success; a failed CAS means another thread made
 * progress), no allocation, safe from any number of threads.  The admission
 * is a release CAS on the state word; it publishes no other data, so a
 * success implies no ordering for the caller's own memory.
 * Return: 1 admitted, 0 refused, SLUICE_EINVAL (@x NULL or n = 0),
 * SLUICE_ETOOBIG (n > limit; @d says retry_after_ns = SLUICE_NEVER).
 */
SLUICE_NODISCARD SLUICE_API int sluice_decay_acquire_at(sluice_decay_t *x, uint64_t n, uint64_t now,
                                       sluice_decision_t *d);

/* sluice_decay_acquire - as _at, reading the limiter's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_decay_acquire(sluice_decay_t *x, uint64_t n, sluice_decision_t *d);

/*
 * sluice_decay_available_at - the largest n that sluice_decay_acquire_at()
 * at @now would admit, taking nothing: floor(L - c), c the kept count at
 * the time that decision would use (the reading rounded down to unit_ns,
 * never before the count's time; see PRECISION), 0 when less than one permit
 * is free.  Lock-free, read-only (it may help finish an announced anchor
 * move); a snapshot that concurrent decisions may change at once.  The
 * count itself (a fraction) is not part of the API: what a caller can act
 * on is how many permits would pass.  Return: 0..L; 0 for a NULL @x.
 */
SLUICE_API uint64_t sluice_decay_available_at(sluice_decay_t *x, uint64_t now);
/* sluice_decay_available - as _at, reading the limiter's clock. */
SLUICE_API uint64_t sluice_decay_available(sluice_decay_t *x);

/*
 * sluice_decay_refund - give back @n permits admitted by @admitted (a
 * decision this limiter returned 1 for).
 *
 * The caller's contract: refund each admission at most once, with at most
 * the n it took.  The count is one sum with no record of who added what, so
 * the limiter cannot tell a second refund of one admission from the first
 * refund of another admitted at the same time: a second refund is accepted
 * whenever the count still holds what it subtracts, and then frees permits
 * that other admissions took (over-admission, up to n each time).
 *
 * The count is a sum, so a refund is exact whatever came after: it
 * subtracts n decayed from admitted->now_ns to the count's time, rounded
 * down (so the count never drops below what the other admissions left), or
 * nothing when the count has been forgotten since.  Lock-free.
 * Return: 0 given back; SLUICE_ECANCEL when the count is smaller than what
 * would be subtracted, or @admitted is newer than every admission here
 * (not this limiter's decision, or a refund already took it back down to
 * nothing): nothing changes, which errs toward fewer admissions;
 * SLUICE_EINVAL (NULL, n = 0 or above limit, @admitted not an admission).
 */
SLUICE_API int sluice_decay_refund(sluice_decay_t *x, uint64_t n,
                                   const sluice_decision_t *admitted);

/*
 * sluice_decay_set_limit - change L to @limit (1..limit_max), live.
 *
 * What is already counted: kept exactly.  The decayed count is neither
 * reset nor rescaled (nothing forgotten, nothing minted); from the change
 * on, decisions admit while c + n <= the new L.  Lowering L below the
 * count refuses until the count has decayed under it; raising it admits
 * the difference at once (the bound is on the count, not on a burst).  So
 * the GUARANTEE holds with L the limit in force at each admission: every
 * admission whose CAS comes after the change (the call's return, at the
 * latest) was checked against the new L; across changes an interval D sees
 * at most max(L) (1 + D ln2 / h) over the limits in force during it.  The
 * count's time moves on by one grid unit (unit_ns) with the count not
 * decayed over it, so the change never lowers the count (at the last grid
 * point before 2^64, the count rises by one unit of 2^-F instead).
 * The half-life has no setter: it fixes the grid and the anchor's range
 * (unit_ns is chosen from 34 h), which a live change would have to
 * re-encode in every word a stalled thread may still hold; build a new
 * limiter (sluice_limiter_set_rate says SLUICE_ENOTSUP).
 *
 * READINGS ACROSS A CHANGE: the change is stamped t_c = the count's time
 * plus one grid unit (newer than every time an admission was decided
 * at), by the state word's rewrite.  Every decision whose CAS comes after
 * it decides at a time >= t_c (a reading older than the count's time is
 * used as that time), so none is judged at a reading older than the
 * change; a lowering is stored before the rewrite and a raise after it,
 * so a decision whose CAS falls between the two is judged against the
 * lower of the two limits.  So no admission is judged against a limit
 * above the one in force at its time (the limit of the newest change
 * stamped at or before it), across any sequence of changes and any
 * interleaving of readings, a decision stalled for any time between its
 * clock read and its CAS included (it fails its CAS and decides again):
 * bound (b) holds for any interval with the largest limit in force in it.
 *
 * Safe while decisions run on any number of threads: they stay lock-free
 * (the change is one store and one double-width CAS on the state; a
 * decision it overtakes fails its CAS and decides again with the new L).
 * Calls serialise among themselves on a flag, waiting with sched_yield at
 * most SLUICE_DECAY_WRITER_WAIT_NS: a control-path call, not for decision
 * paths.  No allocation.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ELIMIT (0 or above limit_max),
 * SLUICE_ETIMEDOUT (another set_limit held the flag that long: stopped
 * mid-change).  Nothing changes on error.
 */
SLUICE_API int sluice_decay_set_limit(sluice_decay_t *x, uint64_t limit);

/* sluice_decay_limit - L in force.  Relaxed read: a concurrent
 * set_limit may make it stale at once. */
SLUICE_API uint64_t sluice_decay_limit(const sluice_decay_t *x);

#ifdef SLUICE_INLINE
#include "static/decay.h"
#endif

#endif /* SLUICE_DECAY_H */
