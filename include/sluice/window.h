/* SPDX-License-Identifier: MIT */
/*
 * sluice/window.h - sliding window counter on a ring of epoch-tagged buckets.
 *
 * Limit L per window W, split into N buckets of width W/N.  Bucket k counts
 * the permits admitted with a clock reading in [k*W/N, (k+1)*W/N): k is the
 * bucket's epoch.  A decision in epoch h counts the buckets h-N+1 .. h.
 *
 * GUARANTEES (L the limit; while set_limit changes it, READINGS ACROSS A CHANGE)
 *
 *   Any number of threads, any timing:
 *     for every run of N consecutive epochs, the permits admitted total at
 *     most L.  Check-and-count is one CAS on the current bucket's word; the
 *     sum of the N-1 closed buckets is computed once per epoch (when the
 *     epoch opens) from buckets that are sealed before the ring advances, so
 *     no late writer can add to a count that a newer epoch already summed.
 *
 *   With leases (config.lease = B > 0), for hot keys:
 *     the same bound, at most L per N consecutive epochs, any timing.  A
 *     decision first spends from its CPU's lease: a cache line of its own
 *     holding (epoch tag, permits), decremented by CAS.  When the lease is
 *     short it takes n + extra permits from the bucket word in one CAS
 *     (all counted as admitted there) and deposits the extra in its cell;
 *     extra = min(B, room / (2 * cells)), where room is what the window
 *     has left after this request, so leases shrink as the budget does and
 *     near the limit every take is exactly n.  A lease is tagged with its
 *     epoch and is spent only by decisions in that epoch, so every permit
 *     admitted was counted in the bucket of the epoch it was admitted in.
 *     The price is UNDER-admission: permits leased and not spent when the
 *     epoch ends are lost.  Per epoch, at most
 *         cells * (B + n_max - 1) + T * B
 *     (a cell holds at most B + n_max - 1: a lease is deposited only into a
 *     cell holding fewer than the n its taker asked for; T counts threads
 *     caught between taking a lease and depositing it when the epoch
 *     ends).  A thread on one CPU that keeps asking for n = 1 until the
 *     window is full loses nothing: it spends each lease before taking the
 *     next, and the takes near the limit are exact.
 *     A refusal reads the bucket and the cell and writes nothing, so
 *     deny-mostly traffic leaves every shared line shared.  A cell keeps
 *     the full 64-bit epoch of its lease beside it, so an idle CPU's old
 *     lease, or one deposited by a taker that stalled for any time, is
 *     never spent in another epoch.
 *
 *   STALLS AND WRAP, with or without leases: the bounds above hold for threads stalled
 *   for any time at any instruction (preempted, in a signal handler, their
 *   process stopped) and for readings anywhere in 0..2^64-1.  Words that
 *   decisions CAS carry 32 bits of their epoch; head and the full epoch
 *   kept beside each bucket and lease carry all 64.  A decision whose CAS
 *   may have hit a word of an epoch 2^32 or more later than the one it
 *   read (the only way a 32-bit tag can match a reused word) is reported
 *   as a refusal with retry_after_ns = 0, what it took left counted
 *   there: under-admission of at most n (plus a lease of at most B) per
 *   such decision, never over-admission.  Refunds and lease deposits,
 *   which give permits out, compare and CAS full epochs and fail on a
 *   reused word however long they stalled.
 *
 *   NOT GUARANTEED, with or without leases (the worst case, not the friendly one):
 *   the ring bounds bucket-aligned windows only.  An arbitrary interval of
 *   length W can see up to 2L with adversarial timing: L admitted at the very
 *   end of bucket k, then L again at the start of bucket k+N, when bucket k
 *   has just left the window.  The two bursts are W - W/N + epsilon apart,
 *   so any interval of length W covering both sees 2L (N = 1 is the fixed
 *   window: 2L within epsilon).  Short of an attacker, an unaligned W sees
 *   L plus what its extra partial bucket holds: evenly spaced traffic
 *   about L, random overload up to the fullest bucket (sluice-sim, Poisson
 *   over 300 s: L = 100, N = 10 saw +14% at 3x the rate and +37% at 10x;
 *   L = 10000, N = 100 saw +0.96% at 10x).  For "never more than L in any
 *   W" use an exact sliding log.
 *
 * SET_LIMIT (sluice_window_set_limit(), safe while decisions run): a
 *   change keeps every bucket's count and every lease.  Nothing counted is
 *   forgotten and nothing is minted: the permits of the N buckets in the
 *   window stay counted against the new limit, so lowering L below what
 *   they hold refuses every request until enough buckets leave the window
 *   (retry_after_ns says when), and raising it admits just the
 *   difference.  A spend from a lease checks no limit: its permits were
 *   counted against its taker's, and it reports the current limit.  A
 *   request above the limit it reads is SLUICE_ETOOBIG.  The limit is the
 *   only setter: the ring has no rate or burst (the generic handle
 *   answers SLUICE_ENOTSUP for those).
 *
 * READINGS ACROSS A CHANGE: a change is stamped with the newest epoch
 *   whose bucket has been opened when it lands (one total order of the
 *   changes and the bucket openings, lib/window.c DESIGN); it is in force from that
 *   epoch until the epoch of the next change, both included.  Every
 *   admission (every lease take) is judged against a limit in force in its
 *   own epoch: it reads the limit after the bucket word and its CAS
 *   succeeds only on that word unchanged; a decision that lost its CAS
 *   reads it again; a reading older than the newest bucket is judged in the
 *   newest bucket (CLOCK JUMPS).  So, across any sequence of changes and
 *   any interleaving of readings (a decision stalled for any time between
 *   its clock read and its CAS included), the bounds above hold for every
 *   run of N epochs with L = the largest limit in force in the newest
 *   epoch of the run that counted anything (so at most the largest limit
 *   in force during the run): a run whose newest counting epoch is later
 *   than a change's stamp holds at most the new limit, whatever its older
 *   epochs counted.  decision.limit is the limit the decision was judged
 *   against (a spend: the current one).
 *
 * CLOCK JUMPS: the ring keeps the newest epoch it has opened (`head`, 64
 *   bits, only moved forward by CAS).  A reading before head's bucket is
 *   treated as a reading inside it: a clock set back cannot reopen old
 *   buckets or mint permits.  A forward jump opens a new epoch; buckets it
 *   skips count zero.
 *
 * COST: admission (no leases) is four loads (the limit twice: READINGS
 *   ACROSS A CHANGE) and one CAS, no division.
 *   With leases, an admission from the lease is one CAS on this CPU's own
 *   line (plus two shared reads when @d is filled); one in B touches the
 *   bucket word.
 *   Opening an epoch reads the N-1 previous bucket words (O(N), once per
 *   bucket width, by whichever thread gets there first; others may help).
 *   A refusal that fills a decision scans up to N buckets to compute
 *   retry_after_ns.
 *
 * LIMITS: L in 1..SLUICE_WINDOW_LIMIT_MAX (2^30 - 1); N in 1..4096; W a
 *   whole multiple of N ns; W/N >= the clock's resolution.
 *   Leases: B in 0..SLUICE_WINDOW_LEASE_MAX.
 *   Needs a 16-byte compare-and-swap (x86-64 CMPXCHG16B, arm64).
 * MEMORY: 16 bytes per bucket (rounded up to a power of two) plus 128 bytes;
 *   leases add 64 bytes per possible CPU (cells are a power of two).
 *   Allocated at init only.
 */
#ifndef SLUICE_WINDOW_H
#define SLUICE_WINDOW_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "common.h"
#include "decision.h"
#include "stripe.h"

#define SLUICE_WINDOW_LIMIT_MAX ((1ULL << 30) - 1)
#define SLUICE_WINDOW_BUCKETS_MAX 4096u
#define SLUICE_WINDOW_LEASE_MAX 65536u

typedef struct sluice_window_config {
	uint64_t limit;              /* L: permits per window, >= 1        */
	uint64_t window_ns;          /* W                                  */
	uint32_t buckets;            /* N: 1..4096; W % N == 0             */
	const sluice_clock_t *clock; /* NULL: &sluice_clock_cached         */
	uint32_t lease;              /* per-CPU lease of up to this many
	                              * permits; 0 = no leases             */
} sluice_window_config_t;

/*
 * A per-CPU cell: picked (sluice__stripe_pick) and allocated
 * (sluice__stripe_alloc) as stripe.h's cells are, one line per CPU, but not
 * a line of counters: @word and @epoch form one 16-byte pair, because a
 * lease is deposited by a double-width CAS that writes both (the full
 * 64-bit epoch beside the 32-bit tag) and must fail on a reused cell, and
 * spent by a single-width CAS on @word after checking @epoch (see
 * window.c, "Leases"); no counter is summed from them.
 */
struct sluice_window_cell {
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t word; /* tag32 | count32 */
	_Atomic uint64_t epoch; /* leases: the full epoch @word's lease is of */
	_Atomic uint64_t seen;  /* leases: tag32 | what the bucket counted
	                         * at this cell's last take (for d->remaining) */
	char pad[SLUICE_CACHELINE - 3 * sizeof(uint64_t)];
};

/*
 * A bucket.  @word is what decisions read and CAS; @epoch, the full 64-bit
 * epoch the word is tagged with, is written with it by the double-width CAS
 * that opens the bucket, so the slow paths whose effect gives permits back
 * (refunds, lease give-backs) can CAS both and fail on a reused bucket.
 */
struct sluice__window_slot {
	_Alignas(16) _Atomic uint64_t word; /* tag32 | SEALED | FOLDED | own30 */
	_Atomic uint64_t epoch;
};

typedef struct sluice_window {
	/* written only by sluice_window_set_limit(); a decision is judged
	 * against one of them read after the bucket word (READINGS ACROSS A
	 * CHANGE) */
	_Atomic uint64_t limit;
	_Atomic uint64_t fast_limit;       /* L without leases, else 0: one
	                                    * compare gates the inline path
	                                    * on n and leases              */
	/* read-only after init */
	uint64_t window_ns;
	uint64_t width_ns;                 /* W / N                        */
	uint32_t buckets;                  /* N                            */
	uint32_t mask;                     /* slots - 1 (slots = 2^k >= N) */
	uint32_t cell_mask;                /* leases: cells - 1            */
	uint32_t lease;                    /* B; 0 = no leases             */
	const sluice_clock_t *clock;
	struct sluice__window_slot *slots; /* one per bucket               */
	struct sluice_window_cell *cells;  /* leases; NULL without         */
	/* private: read by every decision, written once per epoch */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t head; /* newest epoch  */
	_Atomic uint64_t cur;              /* tag32(head) | base32: sum of the
	                                    * N-1 closed buckets before head */
} sluice_window_t;

/* Bucket word: tag32 | SEALED | FOLDED | own30. */
#define SLUICE__SLOT_SEALED (1ULL << 31)
#define SLUICE__SLOT_FOLDED (1ULL << 30)
#define SLUICE__SLOT_OWN ((1ULL << 30) - 1)
#define SLUICE__TAG(x) ((uint64_t)(x) & 0xffffffffu)
#define SLUICE__LO32(x) ((uint64_t)(x) & 0xffffffffu)

/*
 * sluice_window_init - validate @cfg and allocate the ring.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ELIMIT, SLUICE_EBUCKETS,
 * SLUICE_EWINDOW (W = 0 or W % N != 0), SLUICE_ERESOLUTION (W/N below the
 * clock's resolution), SLUICE_ELEASE (lease above SLUICE_WINDOW_LEASE_MAX),
 * SLUICE_ECLOCK, SLUICE_ENOMEM.
 * On error @w is left untouched and nothing is allocated.  Allocates the
 * ring (the only allocation a window ever makes); not thread-safe for the
 * same @w, and no decision may run on @w before it returns.
 */
SLUICE_NODISCARD SLUICE_API int sluice_window_init(sluice_window_t *w, const sluice_window_config_t *cfg);
/* sluice_window_config_check - what sluice_window_init() returns for @cfg,
 * from init's own validator, with no memory and no limiter (common.h,
 * CONFIG CHECKS): 0 or the same code, never SLUICE_ENOMEM. */
SLUICE_NODISCARD SLUICE_API int sluice_window_config_check(const sluice_window_config_t *cfg);
/* sluice_window_destroy - free the ring.  No decision may be running. */
SLUICE_API void sluice_window_destroy(sluice_window_t *w);
SLUICE_API size_t sluice_window_size(void);

/*
 * sluice_window_refund - give back @n permits of the admission @admitted
 * describes (its decision, as filled by acquire).
 *
 * While the admission's bucket is still open, its count drops by n
 * at once (one double-width CAS of the bucket word with its full epoch:
 * it fails on a reused bucket, however long this call stalled).  Once the
 * bucket is sealed its count is final: the permits stay counted until the
 * bucket leaves the window (fewer future admissions, never more) and
 * SLUICE_ECANCEL says so.  Once the bucket has left the window there is
 * nothing left to give back.  The admission's epoch is compared in full,
 * so a decision of any age is judged right.  With leases the same holds:
 * an admission's permits, spent from a lease or not, were counted in its
 * bucket, and are given back there.
 * Caller's contract: refund each admission at most once, and at most the
 * n it took; the window keeps no record per admission, so it cannot tell
 * a repeated refund from another admission's (the count never goes below
 * zero, but a repeated refund frees permits others took).
 * Lock-free, no allocation.
 * Return: 0 (given back: its bucket is open); SLUICE_ECANCEL (sealed, still
 * in the window: kept); SLUICE_EEXPIRED (the bucket has left the window,
 * the N-th epoch after it or any later one, 2^32 epochs later too: nothing
 * to give back, nothing changed); SLUICE_EINVAL (NULL, a refused
 * decision, n = 0, more than the bucket counts, or a decision from an
 * epoch this window never opened, e.g. later than its newest).
 */
SLUICE_API int sluice_window_refund(sluice_window_t *w, uint64_t n,
                                    const sluice_decision_t *admitted);

/* private: spend n permits of epoch h from @cell's lease; 0 when it holds
 * fewer (or another epoch's). */

/*
 * sluice_window_acquire_at - take @n permits at time @now, all or nothing.
 * @w: the window.  @n: 1..limit.  @now: ns on the window's clock base.
 * @d: NULL, or filled with the decision.
 *
 * Lock-free: a thread that finds the epoch half-opened or half-sealed
 * finishes that step itself instead of waiting, so a stalled thread never
 * blocks the others.  No allocation.  Safe from any number of threads.
 * Without leases: one CAS on the bucket word; the admission depends only on that
 * word and on `cur`, whose base is a pure function of the epoch it tags.
 * Leases: relaxed CAS on this CPU's cell; every permit in a cell tagged
 * with epoch h was first counted in h's bucket by the CAS that leased it.
 * With leases, d->remaining counts leased, unspent permits as taken.
 * Return: 1 admitted, 0 refused, SLUICE_EINVAL (n = 0), SLUICE_ETOOBIG
 * (n above the limit this decision read: cannot pass unless set_limit
 * raises it; retry_after_ns = SLUICE_NEVER).
 */
SLUICE_NODISCARD SLUICE_API int sluice_window_acquire_at(sluice_window_t *w, uint64_t n, uint64_t now,
                                           sluice_decision_t *d);

/* sluice_window_acquire - as _at, reading the window's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_window_acquire(sluice_window_t *w, uint64_t n, sluice_decision_t *d);

/*
 * sluice_window_available_at - the largest n an acquire at @now would admit
 * right now (0 when none), taking nothing.
 * @w: the window.  @now: ns on the window's clock base; a reading older
 * than the newest bucket is read as that bucket (CLOCK JUMPS).
 *
 * The current limit minus what the N buckets up to now's bucket count (0
 * when they count a lowered limit or more).  With leases, leased and unspent permits count as taken, and
 * the calling CPU's own lease of that epoch counts as available when it
 * holds more (a decision on this CPU spends it first).  Exact when no
 * decision or set_limit runs on another thread; otherwise a snapshot.
 * Lock-free, no allocation, any thread.  It takes no permit, but it may
 * open the epoch of @now (the step any decision at @now takes first), so
 * later readings older than it are read as it.
 * Return: 0..limit.
 */
SLUICE_API uint64_t sluice_window_available_at(sluice_window_t *w, uint64_t now);

/* sluice_window_available - as _at, reading the window's clock. */
SLUICE_API uint64_t sluice_window_available(sluice_window_t *w);

/*
 * sluice_window_set_limit - change L to @limit, keeping every bucket's
 * count and every lease (see SET_LIMIT above for what it means for permits
 * already counted and for decisions running meanwhile).
 * Safe while decisions run on any number of threads: they read the limit
 * without a lock (relaxed); the call stores it (and, without leases, the
 * inline path's copy of it, made consistent with it when calls race).
 * No allocation.  It takes effect at once, in the newest open bucket (its
 * stamp: READINGS ACROSS A CHANGE), so there is no _at variant.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ELIMIT (outside
 * 1..SLUICE_WINDOW_LIMIT_MAX, as init): then nothing changes.
 */
SLUICE_API int sluice_window_set_limit(sluice_window_t *w, uint64_t limit);

#ifdef SLUICE_INLINE
#include "static/window.h"
#endif

#endif /* SLUICE_WINDOW_H */
