/* SPDX-License-Identifier: MIT */
/*
 * sluice/gcra.h - GCRA token bucket: rate + burst in one 64-bit word.
 *
 * The Generic Cell Rate Algorithm (ITU-T I.371, the "virtual scheduling"
 * form).  T is the emission interval (ns per permit), b the burst and
 * tau = b * T the tolerance.  The whole state is one word, the theoretical
 * arrival time TAT: the time at which the bucket is full again (the
 * parameters sit beside it, changed only by set_rate/set_burst).  A request
 * for n permits at time t books n slots after max(TAT, t):
 *
 *     TAT' = max(TAT, t) + n*T,   admitted iff TAT' - t <= tau.
 *
 * Equivalently: the bucket holds (tau - (TAT - t)) / T permits at time t,
 * refills one permit every T, and holds at most b.
 *
 * GUARANTEE (any number of threads, any timing).  Let T and b be in force
 * (no set_rate/set_burst in between).  For every interval [x, x + t] of the
 * limiter's timeline, the permits admitted at a time inside it total at most
 *
 *     b + t / T            (T = the interval in force, sluice_gcra_interval_ns())
 *
 * A decision's time is its reading (d->now_ns, see CLOCK JUMPS).  The bound
 * holds whatever the order of the readings: it follows from the TAT only
 * growing by n*T per admission and every admission leaving TAT' <= t + tau.
 * Across set_rate/set_burst: READINGS ACROSS A CHANGE.
 * A booking given back exactly (cancel) counts as never made; one that
 * could not be given back counts.
 * Check-and-book is one CAS on the TAT, so the admissions are linearizable
 * and two threads can never both take the last permit: the bound is exact
 * under concurrency, not approximate.  Bookings made with reserve count at
 * the time their delay ends (now_ns + delay_ns); the bound holds for
 * those times too.
 *
 * LEASES (config.lease = B > 0; off by default, which keeps the exact
 * bound above and today's single-CAS path for everyone who does not ask).
 * For one key hit by many CPUs: a decision first spends from its CPU's
 * lease, a cache line of its own holding permits that were already booked
 * in the TAT; when the lease is short or expired it makes GCRA's one CAS
 * for n plus extra = min(B, room / (2 * cells)) more (room: the permits
 * the bucket holds after this request), and deposits the extra in its
 * cell.  A lease may be spent only at readings s with t0 <= s <= t0 + V,
 * t0 the reading of the take that booked it and V = config.lease_ns
 * (default SLUICE_GCRA_LEASE_NS_DEFAULT, 100 us).  So every permit
 * admitted at s was booked at a time in [s - V, s], and the GUARANTEE
 * becomes, exactly, for every interval [x, x + t] (one parameter set):
 *
 *     b + (t + V) / T          (with leases)
 *
 * at any number of threads and any timing: a spend is one single-width
 * CAS of the lease's count on this CPU's line, checked against the take's
 * reading t0 before and after (a cell's t0 never decreases), so even a
 * spender stalled for any time, whose CAS lands on a later lease with the
 * same word (ABA), admits only from a lease whose window holds its reading.
 * Near the limit leases shrink: with r permits of room each take leases at
 * most r / 2C (C cells), so when r < 2C every take books exactly n: the
 * same CAS, the same decision as without leases.  A refusal by the limit
 * reads the TAT and this CPU's cell and writes nothing.  UNDER-ADMISSION:
 * what a lease still holds when it ends is lost (booked, never admitted).
 * A lease ends when it expires (V after its take) or when its cell is
 * taken again (a decision on that CPU found it short of its n, or its
 * reading past the lease's window; a reading before its take spends none
 * of it and leases nothing: it books exactly n), and a take whose deposit
 * loses a race to another thread on the same cell gives its extra back to
 * the TAT while nothing was booked after it, else loses it.  So each take
 * loses at most the extra it leased: at most B, and at most room / 2C; a
 * take that leased nothing (the last 2C permits of the bucket) loses
 * nothing.  One more loss, only with two threads on one CPU's cell
 * (preemption, migration): a spend whose CAS is followed, before it
 * checks, by a deposit stamped after its reading cannot prove which lease
 * it spent, and refuses (retry_after_ns = 0, reset_ns = 0) with its n
 * lost; that n came out of some take's extra, so the permits lost over any
 * run are still at most B times the takes that leased, and at any time the
 * live leases hold at most C * B.  One thread on one CPU asking n = 1
 * until the bucket is empty, within V, loses nothing: it spends each lease
 * before taking the next.
 * Leases change only acquire: reserve (and the leaky shaper) books with
 * the single CAS as before.  Leased decisions fill d as a snapshot from
 * this CPU's line: remaining and reset_ns are as the lease's take left
 * the TAT (stale by what other CPUs booked since), remaining counts
 * leased, unspent permits as taken.  Across set_rate/set_burst a lease
 * taken before the change may be spent for V after it: over an interval
 * across changes, at most max(b) + (t + V) / min(T).
 * Refunds with leases: a take's refund, and a spend's while nothing was
 * booked after its lease's take (its permits were part of that booking:
 * d->now_ns + d->reset_ns names it), give back exactly, moving the TAT
 * back as without leases.  A spend made after its take's TAT had passed,
 * or one whose CAS landed on a later lease of its cell than the one it
 * read (the same word again, stamped at or before its reading: a valid
 * spend whose take is not known), reports reset_ns = 0 (no booking is
 * named; every other admission has reset_ns >= 1), and its refund is
 * SLUICE_ECANCEL: kept, fewer future admissions, never more.  Limits with leases: B in 1..SLUICE_GCRA_LEASE_MAX,
 * V in 0..SLUICE_GCRA_LEASE_NS_MAX (1 s; 0: the default) (SLUICE_ELEASE),
 * b * T <= SLUICE_GCRA_LEASE_SPAN_MAX (2^47 - 1 ns, 39 h: a cell keeps its
 * take's TAT as 47 bits; SLUICE_EBURST at init and set_burst, SLUICE_ERATE
 * at set_rate).
 *
 * NON-WHOLE INTERVALS.  T is period_ns / rate rounded UP to whole ns, e.g.
 * 3 per second runs with T = 333,333,334 ns.  Rounding up can only lower
 * the rate (the bound above then holds with the exact period/rate too), by
 * less than 1 ns per permit; init rejects (SLUICE_ERATE) a configuration
 * whose rounding would lower the rate by more than 1/SLUICE_GCRA_ROUNDING
 * (0.1%), so the configured rate is never silently changed by more than
 * that (3 per second: by 2e-9; 1,500,000 per second: T = 667, 0.05%;
 * 3,000,000 per second would be 0.2%: rejected, configure 333 or 334 ns).
 * Exact sub-ns arithmetic was rejected: a fraction of a ns per permit needs
 * more than 64 bits once times may reach 2^64, and the state is one word.
 *
 * WORST CASE (what it does not prevent):
 *   - A full bucket lets b permits through at one instant, then one per T:
 *     b + t/T is reached, by design.  Lower b for smoother traffic (b = 1
 *     spaces every permit T apart).
 *   - No fairness among threads: a big n can be starved by a stream of
 *     small ones (the bucket never holds n long enough).  reserve() books
 *     in CAS order instead (FIFO).
 *   - One word is written by every admission on every CPU: throughput is
 *     that of a contended CAS.  Lock-free, not wait-free.
 *
 * CLOCK JUMPS.  The TAT is an absolute time that decisions only move
 * forward (a cancel moves it back only by what it gives back), so, within
 * one parameter set, a reading older than the times the limiter has acted
 * on simply finds the bucket less refilled (or empty): it can be refused
 * more, never admitted more; no permit can be minted by a clock set back
 * (older than a change: READINGS ACROSS A CHANGE).  Unlike the windowed
 * limiters, the reading is therefore used as it is and d->now_ns is the
 * reading: retry_after_ns and a reservation's delay_ns are measured from the
 * caller's own reading, so a caller that sleeps delay_ns from its own
 * clock lands exactly on the slot.  (Raising an old reading to a newer time
 * would make such a caller proceed early.)  A clock that jumps forward
 * finds the bucket full (at most b), as the time says.
 *
 * READINGS ACROSS A CHANGE.  Each change is stamped with a reading s: the
 * setter's (the @now of set_*_at; the clock on entry for the plain ones),
 * or the previous change's stamp when that is newer; the conversion below
 * is made at s.  A decision whose reading r is older than the stamp of the
 * parameters it decides with is judged as if at s, its waits measured from
 * r: an acquire cannot pass (refused, retry_after_ns = s - r + the wait at
 * s, so sleeping it from r lands where it passes; with leases a spend
 * from a lease taken at or before r still passes: it was booked then), a
 * reservation's slot is at or after s (delay_ns >= s - r).  d->now_ns
 * stays r (the fields are measured from it: reset_ns names the TAT for
 * cancel, remaining is what the bucket holds at r, no more than at s);
 * available_at(r) counts only this CPU's lease.
 * A setter's reading may lag decisions already made (the plain setters
 * read the clock, then publish): at no reading from s to the old TAT
 * (every admission so far was at a reading below it) does the change
 * leave more than the old state held, so a lag credits nothing (it only
 * loses, after a rate lowering, up to lag * (1/T0 - 1/T1) permits).
 * Hence across ANY sequence of changes and ANY readings, the permits
 * admitted at times in [x, x + t] total at most
 *
 *     max(b) + t / min(T)      (with leases: max(b) + (t + V) / min(T))
 *
 * over the parameter sets in force from the first of those admissions to
 * the last (one set: the GUARANTEE), with nothing credited for time the
 * limiter already counted.  Proof: lib/gcra.c, "Readings across a change".
 * Cost: one more load from the parameter line and one compare.
 *
 * SET_RATE / SET_BURST (live, from any thread, while decisions run).  The
 * state is kept and the TAT never moves back: just after a change the
 * bucket holds the FEWER of (a) the permits it held just before, capped at
 * the new burst, and (b) what the new parameters give for the unchanged TAT.
 * So a change never hands out permits: no fresh burst.  Lowering the rate or
 * raising the burst keeps (a): the permits held stay, and the bucket then
 * refills at the new rate towards the new burst (when bookings reach past
 * the tolerance, the time the last booked slot comes is kept instead).
 * Raising the rate or lowering the burst keeps the TAT (b): the time until
 * the bucket is full is unchanged, so the permits used recently count
 * against the new parameters, and an emptied bucket gets the faster rate
 * only once its old TAT passes (e.g. 1/s, b = 10, emptied, raised to
 * 100/s: the first permit comes about 9.9 s later).  The TAT also moves
 * 1 ns (more right after a cancel: it never returns to a value it had
 * before the change).  Since a change can
 * only lose permits, changes back and forth faster than the bucket refills
 * (within tau of each other) accumulate: the bucket can stay empty until
 * they stop.  Each decision uses one consistent (T, b): a change seals the
 * TAT, swaps the parameters and unseals it with the converted TAT; a
 * decision that meets the seal finishes the change itself (helping), so
 * decisions stay lock-free and none ever combines old parameters with a
 * converted TAT or the reverse.  Within one parameter set the bound above is
 * exact; across changes, READINGS ACROSS A CHANGE states it.  set_rate and
 * set_burst calls are serialised
 * among themselves by a flag (a preempted one delays only the next one;
 * decisions never touch the flag); a call that waited
 * SLUICE_GCRA_WRITER_WAIT_NS (1 s) for it, because the holder was stopped
 * mid-change, returns SLUICE_ETIMEDOUT and changes nothing.
 *
 * CANCEL / REFUND.  A booking (reserve, or an admission) is given back
 * exactly while nothing was booked after it: the CAS finds the TAT it left
 * and moves it back by n*T.  Otherwise SLUICE_ECANCEL and nothing is given
 * back: later bookings were decided (and may have been promised slots)
 * against the permits it took, so they stay taken; the bucket refills at
 * its rate as usual: fewer future admissions, never more.  A booking made
 * before a set_rate/set_burst can no longer be given back (SLUICE_ECANCEL).
 * The caller's contract: give back each admission (or booking) at most
 * once, with at most the n it took.  The limiter detects what it can: a
 * second cancel of one booking finds the TAT moved back by the first and
 * returns SLUICE_ECANCEL, changing nothing.  It cannot tell it from a
 * first cancel when a booking made since the first one ended at exactly the
 * same ns (the same n, decided before the bucket refilled past that point):
 * the second cancel then gives back that booking's permits, and up to n
 * more than the bound pass.  Nor can it see the n a booking took: a cancel
 * of more than that (up to b) moves the TAT back by the larger n*T.
 *
 * LIMITS: rate >= 1 and period_ns >= rate (T >= 1 ns) and rounding at most
 * 0.1% (SLUICE_ERATE); b >= 1 and b * T <= SLUICE_GCRA_SPAN_MAX (2^62 - 1
 * ns, 146 years) (SLUICE_EBURST; set_rate says SLUICE_ERATE when the new T
 * makes the current b too long).  n in 1..b.  Times: any 64-bit reading; the
 * TAT lives below SLUICE_GCRA_TIME_MAX (2^64 - 2^32 - 1: the top 2^32 values
 * mark a reconfiguration in progress), so in the last tau before that time
 * the bucket holds only what fits before it and after it nothing passes
 * (fewer, never more; 2^64 ns is 584 years of CLOCK_MONOTONIC, the top 2^32
 * ns its last 4.3 s).  A seal names its change by the low 32 bits of a
 * counter in the TAT, and by its full 64-bit era in the word beside it:
 * a decision that read a change to finish it, then stalled for any number
 * of further changes, fails its unseal (a double-width CAS of both) and
 * decides again.  With a coarse clock,
 * permits arrive in steps of the clock's resolution (up to b at a step),
 * never more than the bound.  So the bucket must hold at least one clock
 * step: b * T >= the clock's resolution, or at most b would pass per step
 * and the configured rate could never be reached (a silent cap): init,
 * set_rate and set_burst say SLUICE_ERESOLUTION instead (raise b, or use a
 * finer clock).  reserve books slots T apart whatever the clock, but it
 * measures each delay from the caller's reading, which a coarse clock makes
 * up to one step old, so a caller that sleeps out one delay before booking
 * the next lands up to a step late each time; the leaky shaper (b = 1) is
 * therefore held to the same rule (leaky.h).
 *
 * COST with leases: a spend is one single-width CAS on this CPU's own
 * line and three loads of it, plus the era and b (read-mostly; three more
 * parameter loads when it fills d); one in about B decisions (fewer near
 * the limit) also makes the TAT's CAS and a deposit (a double-width CAS
 * on this CPU's line).  Without leases the option costs nothing: the
 * compare of n against b that the admission makes anyway fails for a
 * leased limiter (its `gate` is 0).
 *
 * COST: acquire is one load of the TAT, one of the era and four of the
 * parameters (six when it fills a decision; read-mostly lines that only a
 * reconfiguration writes; acquire loads are plain loads on x86), a
 * multiply and one CAS; no division (remaining uses a precomputed
 * reciprocal), no fence, no lock, no allocation.
 *
 * MEMORY: 320 bytes, caller-allocated: the era and the parameters (two
 * slots, swapped by a reconfiguration) on read-mostly lines; the cancels'
 * `high` and the reconfiguration flag on a line of their own (a cancel's
 * write must not invalidate what every decision reads); the TAT on a line
 * of its own.  No allocation without leases.  With leases, init allocates
 * 64 bytes per possible CPU (cells a power of two; stripe.h's allocation)
 * and sluice_gcra_destroy() frees them: the only allocation, at init.
 */
#ifndef SLUICE_GCRA_H
#define SLUICE_GCRA_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "common.h"
#include "decision.h"
#include "stripe.h"

/* Longest tolerance b * T, ns. */
#define SLUICE_GCRA_SPAN_MAX ((1ULL << 62) - 1)
/* set_rate/set_burst give up (SLUICE_ETIMEDOUT) after waiting this long
 * for a concurrent one: 1 s. */
#define SLUICE_GCRA_WRITER_WAIT_NS 1000000000ULL
/* Rounding T up may lower the rate by at most 1/SLUICE_GCRA_ROUNDING. */
#define SLUICE_GCRA_ROUNDING 1000u
/* private: TAT values above this are seals (a reconfiguration under way). */
#define SLUICE__GCRA_SEAL_MASK 0xffffffffULL
#define SLUICE__GCRA_SEAL_MIN (UINT64_MAX - SLUICE__GCRA_SEAL_MASK)
/* The latest TAT: admissions never book past it. */
#define SLUICE_GCRA_TIME_MAX (SLUICE__GCRA_SEAL_MIN - 1)

/* Most permits one lease takes (B); a cell's count fits 17 bits. */
#define SLUICE_GCRA_LEASE_MAX 65536u
/* V when a lease is asked for with lease_ns = 0: 100 us. */
#define SLUICE_GCRA_LEASE_NS_DEFAULT 100000ULL
/* Longest V: 1 s. */
#define SLUICE_GCRA_LEASE_NS_MAX 1000000000ULL
/* Longest tolerance b * T with leases: 2^47 - 1 ns (39 hours); a cell
 * keeps its take's TAT as 47 bits beside its 17-bit count. */
#define SLUICE_GCRA_LEASE_SPAN_MAX ((1ULL << 47) - 1)
/* private: a cell's `held` word: (TAT the take left - take time) << 17 | count */
#define SLUICE__GCRA_HELD_BITS 17
#define SLUICE__GCRA_HELD_COUNT ((1ULL << SLUICE__GCRA_HELD_BITS) - 1)

typedef struct sluice_gcra_config {
	uint64_t rate;               /* permits per period, >= 1                 */
	uint64_t period_ns;          /* >= rate: T = period_ns / rate >= 1 ns    */
	uint64_t burst;              /* b >= 1: the most that pass at once, full */
	const sluice_clock_t *clock; /* NULL: &sluice_clock_cached               */
	uint32_t lease;              /* B: per-CPU leases of up to B permits;
	                              * 0 (the default) = no leases, exact b + t/T */
	uint64_t lease_ns;           /* V: a lease is spent only within V of its
	                              * take; 0 = SLUICE_GCRA_LEASE_NS_DEFAULT  */
} sluice_gcra_config_t;

/*
 * A per-CPU lease cell: picked (sluice__stripe_pick) and allocated
 * (sluice__stripe_alloc) as stripe.h's cells are, one line per CPU, but not
 * a line of counters: @stamp and @held are one 16-byte pair that a deposit
 * writes whole (a double-width CAS), while a spend CASes @held alone and
 * reads @stamp before and after: a cell's stamps never decrease, so that
 * proves the lease it spent was taken within V before its reading
 * (lib/gcra.c, "Leases").
 */
struct sluice_gcra_cell {
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t stamp; /* the take's reading t0 */
	_Atomic uint64_t held; /* (left - t0) << 17 | permits left in the lease */
	char pad[SLUICE_CACHELINE - 2 * sizeof(uint64_t)];
};

/* private: one parameter set.  Two slots; the era's parity picks one.
 * Eight words, 64 bytes: the slot index is a shift.  The TAT the era
 * opens with, which only helpers read, is beside `high` (start[]). */
struct sluice__gcra_params {
	_Atomic uint64_t era;      /* the era described; 0 while written   */
	_Atomic uint64_t interval; /* T, ns: ceil(period / rate)           */
	_Atomic uint64_t tau;      /* b * T                                */
	_Atomic uint64_t burst;    /* b                                    */
	_Atomic uint64_t gate;     /* b without leases, 0 with: the inline
	                            * admission's one compare for n and
	                            * leases                               */
	_Atomic uint64_t recip;    /* ceil(2^(62 + shift) / T)             */
	_Atomic uint64_t shift;    /* ceil(log2 T)                         */
	_Atomic uint64_t stamp;    /* the change's reading: older readings
	                            * are judged at it (READINGS ACROSS A
	                            * CHANGE); 0 for init's set            */
};

typedef struct sluice_gcra {
	/* read-only after init */
	const sluice_clock_t *clock;
	uint32_t booking;         /* made for bookings (pacing), so tau below
	                           * the clock's resolution is fine         */
	uint32_t lease;           /* B; 0: no leases (cells is NULL)        */
	uint32_t cell_mask;       /* leases: cells - 1 (a power of two)     */
	uint32_t cell_shift;      /* leases: log2(cells) + 1                */
	uint64_t lease_ns;        /* leases: V                              */
	struct sluice_gcra_cell *cells; /* leases: one per possible CPU     */
	/* private: read by every decision, written only by reconfigurations */
	_Atomic uint64_t era;     /* current era; params[era & 1] in force */
	struct sluice__gcra_params params[2];
	/* private: written by cancels and reconfigurations, never read by a
	 * decision: off the line above, so a cancel (which writes `high`) does
	 * not invalidate the line every decision reads */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t high; /* highest TAT a cancel
	                                                    * moved back from */
	_Atomic uint32_t writer;  /* set_rate/set_burst serialisation flag */
	_Atomic uint64_t start[2]; /* the TAT the era of params[i] opens with
	                            * (helpers read it; lib/gcra.c)        */
	/* private: the state, on a line of its own.  tat and seal_era are one
	 * 16-byte pair: a seal and its unseal CAS both, so an unseal by a
	 * helper stalled across 2^32 reconfigurations fails (lib/gcra.c). */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t tat;
	_Atomic uint64_t seal_era; /* the full era of the newest seal, 0: none */
} sluice_gcra_t;

/*
 * sluice_gcra_init - validate @cfg and set up @g (caller-allocated), full.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ECLOCK, SLUICE_ERATE (rate 0,
 * T under 1 ns, or rounding T to whole ns would lower the rate by more than
 * 0.1%), SLUICE_EBURST (b = 0, or b * T above SLUICE_GCRA_SPAN_MAX),
 * SLUICE_ERESOLUTION (b * T below the clock's resolution, see LIMITS),
 * SLUICE_ELEASE (lease above SLUICE_GCRA_LEASE_MAX or lease_ns above
 * SLUICE_GCRA_LEASE_NS_MAX), SLUICE_EBURST also for b * T above
 * SLUICE_GCRA_LEASE_SPAN_MAX with leases, SLUICE_ENOMEM/SLUICE_ECELLS (the
 * lease cells).  On error @g is untouched and nothing is allocated.
 * Allocates only with leases (LEASES); not thread-safe for the same @g.
 */
SLUICE_NODISCARD SLUICE_API int sluice_gcra_init(sluice_gcra_t *g, const sluice_gcra_config_t *cfg);
/* sluice_gcra_config_check - what sluice_gcra_init() returns for @cfg,
 * from init's own validator, with no memory and no limiter (common.h,
 * CONFIG CHECKS): 0 or the same code, never SLUICE_ENOMEM. */
SLUICE_NODISCARD SLUICE_API int sluice_gcra_config_check(const sluice_gcra_config_t *cfg);
/* sluice_gcra_destroy - free the lease cells, if any (NULL is fine).  No
 * decision may be running. */
SLUICE_API void sluice_gcra_destroy(sluice_gcra_t *g);
/* sluice_gcra_size - sizeof(sluice_gcra_t), for FFI callers. */
SLUICE_API size_t sluice_gcra_size(void);

/* private slow paths */
#define SLUICE__GCRA_SLOW 2
/* private: tries at a cell's `held` before a spend gives way to a take:
 * each failure means another decision on this cell made progress. */
#define SLUICE__GCRA_SPEND_TRIES 4

/*
 * sluice_gcra_acquire_at - take @n permits at time @now, all or nothing.
 * @g: the limiter.  @n: 1..b.  @now: ns on the limiter's clock base.
 * @d: NULL, or filled: allowed; limit = b; remaining = permits that would
 * pass right after this decision at @now; retry_after_ns = 0 when allowed,
 * else the exact wait until the same request would pass (SLUICE_NEVER when
 * only the end of time stops it); reset_ns = ns until the bucket is full
 * (now_ns + reset_ns is the TAT this decision saw or left); now_ns = @now
 * (a reading older than the change in force: READINGS ACROSS A CHANGE).
 *
 * Lock-free: one CAS on success; a failed CAS means another booking
 * succeeded.  No allocation.  Safe from any number of threads and with a
 * concurrent set_rate/set_burst (the decision uses one parameter set).
 * remaining and retry_after_ns come from the same TAT the CAS checked.
 * Return: 1 admitted, 0 refused (nothing taken), SLUICE_EINVAL (n = 0),
 * SLUICE_ETOOBIG (n > b: can never pass; retry_after_ns = SLUICE_NEVER).
 */
SLUICE_NODISCARD SLUICE_API int
sluice_gcra_acquire_at(sluice_gcra_t *g, uint64_t n, uint64_t now, sluice_decision_t *d);

/* sluice_gcra_acquire - as _at, reading the limiter's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_gcra_acquire(sluice_gcra_t *g, uint64_t n, sluice_decision_t *d);

/*
 * sluice_gcra_reserve_at - book the earliest slot for @n permits at @now.
 * @max_delay_ns: the longest the caller will wait (0: only "go now";
 * UINT64_MAX: any delay).
 *
 * Books the slot (moves the TAT by n*T, FIFO in CAS order) when the wait
 * until it is at most @max_delay_ns; then d->delay_ns is that wait:
 * proceed at d->now_ns + d->delay_ns (0: now).  allowed is set: the
 * permits are taken, for that time.  A booking that is not used can be given
 * back with sluice_gcra_cancel().  When the wait would be longer nothing is
 * booked and d->retry_after_ns is how much later the same call would
 * succeed (the wait minus @max_delay_ns; SLUICE_NEVER past the end of time).
 * Lock-free, no allocation, thread-safe; one CAS.
 * Return: 1 booked, 0 not booked, SLUICE_EINVAL (n = 0),
 * SLUICE_ETOOBIG (n > b: can never be booked; retry_after_ns = SLUICE_NEVER).
 */
SLUICE_NODISCARD SLUICE_API int sluice_gcra_reserve_at(sluice_gcra_t *g, uint64_t n, uint64_t now,
                                         uint64_t max_delay_ns, sluice_decision_t *d);

/* sluice_gcra_reserve - as _at, reading the limiter's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_gcra_reserve(sluice_gcra_t *g, uint64_t n, uint64_t max_delay_ns,
                                      sluice_decision_t *d);

/*
 * sluice_gcra_cancel - give back @n permits of the booking @booked (the
 * decision reserve or acquire filled; its now_ns + reset_ns is the TAT the
 * booking left).
 *
 * Exact when nothing was booked after it (and no set_rate/set_burst ran
 * since): one CAS moves the TAT back by n*T, as if it had never been made.
 * Otherwise returns SLUICE_ECANCEL and gives nothing back: the bookings
 * after it were decided against these permits, so they stay taken and come
 * back only as the bucket refills (fewer future admissions, never more).
 * @n may be less than was booked (a partial give-back).  The caller's
 * contract: each admission at most once, with at most the n it took (see
 * CANCEL above for what is detected).  Lock-free, no allocation, safe from
 * any thread.  Success has release order (pairs with the acquire load of
 * the TAT by a reconfiguration, which must see the cancel's bookkeeping).
 * Return: 0, SLUICE_ECANCEL, SLUICE_EINVAL (NULL, n = 0, @booked not
 * allowed, or n more than the booking can have taken).
 */
SLUICE_API int sluice_gcra_cancel(sluice_gcra_t *g, uint64_t n, const sluice_decision_t *booked);

/*
 * sluice_gcra_refund - the conventions' name for cancel: give back @n
 * permits of the admission @admitted describes (the composite uses it).
 * Same semantics and return values as sluice_gcra_cancel().
 */
SLUICE_API int sluice_gcra_refund(sluice_gcra_t *g, uint64_t n,
                                  const sluice_decision_t *admitted);

/*
 * sluice_gcra_available_at - how many permits (n = 1 each) would pass right
 * now, at @now, without taking any.  Lock-free, read-only (may help finish
 * a reconfiguration).  A snapshot: concurrent decisions may change it.
 */
SLUICE_API uint64_t sluice_gcra_available_at(sluice_gcra_t *g, uint64_t now);
SLUICE_API uint64_t sluice_gcra_available(sluice_gcra_t *g);

/*
 * sluice_gcra_set_rate_at - change the rate to @rate per @period_ns, live.
 * sluice_gcra_set_burst_at - change the burst to @burst, live.
 * @now: the change's reading (the plain variants read the clock); the
 * change is stamped with the later of @now and the previous change's stamp
 * (READINGS ACROSS A CHANGE).
 *
 * The state is converted as SET_RATE / SET_BURST above says (never more
 * permits than before, no fresh burst).  Safe while decisions run on any
 * number of threads: they stay lock-free (they help finish the change) and
 * each uses either the old or the new parameters with the matching state.
 * Calls serialise among themselves on a flag (waiting with sched_yield, at
 * most SLUICE_GCRA_WRITER_WAIT_NS): a control-path operation, not for
 * decision paths.  No allocation.
 * Return: 0; SLUICE_EINVAL (NULL); set_rate: SLUICE_ERATE as init, and
 * when the new T makes b * T exceed SLUICE_GCRA_SPAN_MAX; set_burst:
 * SLUICE_EBURST as init; both: SLUICE_ERESOLUTION when the new b * T is
 * below the clock's resolution (LIMITS), SLUICE_ETIMEDOUT when another
 * set_rate/set_burst held the flag for SLUICE_GCRA_WRITER_WAIT_NS (stopped
 * mid-change; its change completes when it resumes).  Nothing changes on
 * error.
 */
SLUICE_API int sluice_gcra_set_rate_at(sluice_gcra_t *g, uint64_t rate, uint64_t period_ns,
                                       uint64_t now);
SLUICE_API int sluice_gcra_set_rate(sluice_gcra_t *g, uint64_t rate, uint64_t period_ns);
SLUICE_API int sluice_gcra_set_burst_at(sluice_gcra_t *g, uint64_t burst, uint64_t now);
SLUICE_API int sluice_gcra_set_burst(sluice_gcra_t *g, uint64_t burst);

/* sluice_gcra_interval_ns - T in force (whole ns, period/rate rounded up).
 * sluice_gcra_burst - b in force.  Relaxed reads; a concurrent change may
 * make them stale at once. */
SLUICE_API uint64_t sluice_gcra_interval_ns(const sluice_gcra_t *g);

SLUICE_API uint64_t sluice_gcra_burst(const sluice_gcra_t *g);

#ifdef SLUICE_INLINE
#include "static/gcra.h"
#endif

#endif /* SLUICE_GCRA_H */
