/* SPDX-License-Identifier: MIT */
/*
 * sluice/warmup.h - smooth warm-up limiter: Guava's SmoothWarmingUp.
 *
 * A stable rate of one permit per interval I (rate permits per period_ns),
 * reached only after a warm-up period P of saturated use; a limiter left
 * idle cools down and warms up again.  The model is Guava's, cold factor 3:
 *
 *   - state: the next free ticket `next` (a time) and the stored permits s,
 *     0 <= s <= M, M = P / I.  A new limiter is cold: s = M.
 *   - idle time cools it: while next lies in the past, s grows by one per I
 *     elapsed since next (Guava's cool-down interval P / M, which is I for
 *     cold factor 3), up to M.  So an idle of P since next makes it fully
 *     cold, whatever it was.
 *   - a request of n spends min(n, s) stored permits and pays for them the
 *     area under the throttling curve f: f = I for s <= T = M/2, rising
 *     linearly from I at T to 3I (the cold interval) at M.  Its other permits
 *     are fresh, at I each.  cost(n) >= n * I always; draining M down to T
 *     costs exactly P, and T down to 0 costs P/2 (Guava's construction).
 *   - the cost is paid by the NEXT request, as in Guava: an admission at t
 *     moves next to max(next, t) + cost.
 *
 * Two ways to ask, mapping Guava's two calls onto sluice's shape:
 *   sluice_warmup_acquire_at(n) = tryAcquire(n, 0): admitted when next <= now.
 *   sluice_warmup_reserve_at(n, max_delay) = acquire(n): books the request
 *     and returns in d->delay_ns how long to sleep before using it
 *     (next - now, or 0), unless that exceeds max_delay_ns: then it books
 *     nothing and refuses.
 *
 * GUARANTEE (any number of threads, any timing, on the limiter's timeline).
 *   An admission's START is its d->now_ns + d->delay_ns (decision.h; an
 *   acquire_at has delay_ns = 0: it starts at now_ns).  Admissions are totally ordered by the
 *   CAS that booked them, and each one starts at or after the ticket the
 *   previous one booked: start(k+1) >= start(k) + cost(k) >= start(k) +
 *   n(k) * I, where d->now_ns + d->reset_ns of admission k is exactly that
 *   ticket.  Hence:
 *     (a) rate: the starts inside any interval of length D total at most
 *         D / I + L permits (L = the largest n, sluice_warmup_limit());
 *     (b) cold start: after init, or once next lies P or more in the past
 *         (an idle limiter), the starts within D <= P of the first one total
 *         at most X(D) + L permits, X(D) = M * (3 - sqrt(9 - 8 D / P)) / 4:
 *         X(P) = M / 2, half what the stable rate passes in P.
 *   Refunded admissions (sluice_warmup_refund() returned 0) do not count.
 *   Across set_rate changes the chain still holds, each cost paid at the
 *   rate in force when it was booked, so (a) holds with I the smallest
 *   interval and L the largest limit in force during the interval.
 *
 * WORST CASE.  Warm-up is a ramp, not a burst allowance: the limiter never
 *   passes more than one request at an instant and never faster than the
 *   stable rate (a).  What it does not prevent: (1) Guava's "pay later"
 *   rule lets ONE request of up to L permits through at once, whatever L is,
 *   with the next request waiting for it; (2) the ramp restarts only after
 *   an idle of up to P; traffic at just under the stable rate keeps it warm
 *   indefinitely, however bursty that traffic is within the rate bound; (3)
 *   reservations are booked ahead: up to horizon_ns of permits may be
 *   promised to sleepers at once (their starts still obey (a)).
 *
 * CLOCK JUMPS.  Time never runs backwards for this limiter: the state
 *   packs times relative to an anchor (a 64-bit time, only moved forward),
 *   and a reading older than the anchor is treated as the anchor.  The
 *   timeline starts at 0, not at the clock's reading at init: a new limiter
 *   is cold as of time 0, the same state at every time, so its first
 *   reading, from any time base (a manual clock starting at 0,
 *   CLOCK_MONOTONIC, readings near 2^64), is used as it is and anchors it.
 *   Any sequence of readings works without wrapping: forward, back, jumps
 *   of any size, up to 2^64 - 1 (see LIMITS for the top).  A reading
 *   between the anchor and the next free ticket is simply early: refused (or
 *   booked with a longer delay), with retry_after_ns and delay_ns measured
 *   from it.  The
 *   next free ticket is never earlier than any admission's start, and
 *   stored permits accrue only over time past that ticket, so a clock set
 *   back, or readings out of order, can neither mint stored permits nor cool
 *   the limiter.  d->now_ns is the reading, raised to the anchor when older.
 *   A clock that jumps forward makes the limiter see idle time: it cools
 *   down, which slows it (cold permits cost more).
 *
 * READINGS ACROSS A CHANGE.  set_rate takes no reading: its stamp is the
 *   next free ticket, which it keeps (one unit later) and which lies after
 *   every admission's start, and the temperature it converts is the
 *   ticket's, which idle time changes by the same fraction per ns at any
 *   rate.  So a reading older than a change (or than its setter's clock)
 *   is judged as any reading is: before the ticket an acquire is refused
 *   and a reservation is booked at or after it (delay_ns measured from the
 *   reading); at or after it the temperature is the one the old rate gave,
 *   on either side of the change.  No timing of a setter, lagging or not,
 *   credits anything, and (a) of GUARANTEE holds across any changes and
 *   readings, with I the smallest interval and L the largest limit in
 *   force over the interval.
 *
 * PRECISION.  Every step rounds toward the slower result:
 *   - costs are ceil(n * I) ns plus the curve part rounded up with a margin
 *     (at most a few ns over the exact value: the curve uses doubles, with a
 *     relative error bound of 2^-40 added);
 *   - the next free ticket lives on a grid of unit_ns (a power of two, 1 ns
 *     unless the configuration needs a longer time span; unit_ns / I <=
 *     2^-9 whatever the configuration) and is rounded up to it, the stored
 *     permits gaining the rounded-off time (which keeps it exact for every
 *     later reading);
 *   - stored permits are fixed point with frac_bits (5..25) fraction bits,
 *     rounded up (colder).
 *   So (a) holds exactly (every cost >= n I), and so does (b) under
 *   saturated use.  Against an exact model of the same requests, a ticket
 *   is later by these roundings (a few ns per booking, plus 2 I per excess
 *   stored permit); Guava's rule is not monotone in the ticket alone (a
 *   later ticket accrues less cooling after an idle gap), so after a gap a
 *   cost can come out that much CHEAPER than the exact one: the deviation
 *   is bounded by the rounding since the previous gap, either way, and does
 *   not accumulate.  The Guava test's timings come out exact to the
 *   microsecond (and only late).
 *
 * LIMITS: rate >= 1, period_ns in 1..2^46 with I = period_ns / rate >= 1 ns
 *   (SLUICE_ERATE); warmup_ns in SLUICE_WARMUP_MIN_NS (1 us) ..
 *   SLUICE_WARMUP_MAX_NS (2^46 ns, 19.5 h), and M = P / I <= 2^20
 *   (SLUICE_EWARMUP: a zero or sub-microsecond warm-up is rejected, never
 *   "no limiting").  I >= the clock's resolution (SLUICE_ERESOLUTION: an
 *   acquire passes only when the next free ticket is <= now, so at most
 *   one request passes per clock reading; a finer rate on a coarser clock
 *   would be capped silently at one per step).  The cold factor is fixed at 3.  A request takes n in
 *   1..L, L = max(1, floor(M)), the permits one warm-up period produces at
 *   the stable rate (SLUICE_ETOOBIG above: Guava accepts any n; sluice
 *   bounds it so a booking fits its time field).  A reservation never waits
 *   longer than horizon_ns (>= P + L * I, chosen at init); a larger
 *   max_delay_ns acts as horizon_ns.  Near the top of the 64-bit time base,
 *   readings in the last unit_ns before 2^64 count as the last grid point,
 *   and a request whose ticket would pass 2^64 is refused for ever
 *   (retry_after_ns = SLUICE_NEVER).  Stalls: a thread stalled inside one
 *   decision for any time, while the anchor moves on and the state word
 *   comes back bit for bit (the same ticket modulo 2^35 unit_ns, the same
 *   stored permits), fails its write: every write from a snapshot is one
 *   double-width CAS of (anchor, word), as in decay (tests/core/test_wrap.c
 *   stalls a warm-up booking the same way).  Nothing a stalled writer
 *   leaves can make a call spin: such a state is read toward fewer
 *   admissions (a later ticket, fully cold).
 *
 * SET_RATE (sluice_warmup_set_rate(), live, from any thread, while
 *   decisions run).  Guava's setRate rule: the limiter keeps its place on
 *   the warm-up ramp.  The next free ticket is kept, and the stored permits
 *   keep their fraction of M: s' = s * M' / M (M' = P / I'), rounded up
 *   (colder).  So a change hands out nothing, as gcra.h's SET_RATE: no
 *   request can start before the ticket booked before the change (no fresh
 *   burst), the pending cost stays paid at the old rate, and the requests
 *   after it pay the new curve from the same temperature: a warm limiter
 *   raised from 1/s to 10/s passes its next request at the 1/s ticket and
 *   the ones after 100 ms apart; a fully cold one stays fully cold and
 *   warms up over P at the new rate.  Idle time cools the limiter by the
 *   same fraction per ns at any rate (M per P), so a change needs no time
 *   (no _at variant): converting before or after an idle gap is the same.
 *   The ticket also moves one unit_ns later per change (the stored permits
 *   gaining that unit's cooling, so every reading at or after the new
 *   ticket sees the state it would have seen; readings before it are
 *   refused): every state after a change then differs from every state
 *   before it, which is how decisions tell them apart, and a booking made
 *   before a change can no longer be given back (SLUICE_ECANCEL: its cost
 *   was the old rate's).  L follows the rate (max(1, floor(M'))); a request
 *   above the new L is SLUICE_ETOOBIG.  Each booking uses one consistent
 *   pair (parameter set, state): the anchor's bit 0 names the set the word
 *   is written under, flipped by the same double-width CAS that converts
 *   the word, so a decision that read the old set when the change lands
 *   fails its CAS and decides again (a refusal, which writes nothing, by
 *   a decision overlapping two changes may report the later set's L);
 *   a stalled set_rate never blocks a
 *   decision (the decisions read the set in force, which no call
 *   rewrites).  The time grid (unit_ns, horizon_ns) stays the one init
 *   chose: it was sized for any L I up to max(P, L I at init), and
 *   set_rate refuses a rate whose L I exceeds that (SLUICE_ERATE; only
 *   possible with I > P).
 *
 * MEMORY: one cache line of hot state (the anchor and the state word), two
 *   parameter sets read by decisions and written only by set_rate, in a
 *   caller-allocated struct; nothing is allocated.
 */
#ifndef SLUICE_WARMUP_H
#define SLUICE_WARMUP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "common.h"
#include "decision.h"

#define SLUICE_WARMUP_MIN_NS 1000ULL          /* 1 us */
#define SLUICE_WARMUP_MAX_NS (1ULL << 46)     /* about 19.5 h */
#define SLUICE_WARMUP_PERIOD_MAX_NS (1ULL << 46)
#define SLUICE_WARMUP_STORED_MAX (1ULL << 20) /* M = P / I at most this */
#define SLUICE_WARMUP_COLD_FACTOR 3
#define SLUICE_WARMUP_WRITER_WAIT_NS 1000000000ULL /* set_rate's wait, 1 s */

typedef struct sluice_warmup_config {
	uint64_t rate;               /* stable rate: `rate` permits ...          */
	uint64_t period_ns;          /* ... per period_ns (2, 1e9: 2 per second) */
	uint64_t warmup_ns;          /* P: cold to stable under saturated use    */
	const sluice_clock_t *clock; /* NULL: &sluice_clock_cached               */
} sluice_warmup_config_t;

/*
 * private: one parameter set (the rate's: everything that depends on I).
 * Two of them; bit 0 of the anchor says which one the state is written
 * under (lib/warmup.c, SET_RATE).  @seq is even while the set is stable
 * and odd while set_rate rewrites it (a seqlock, for the spare set only).
 */
struct sluice__warmup_params {
	_Atomic uint64_t seq;
	_Atomic uint64_t rate, period_ns;
	_Atomic uint64_t limit;     /* L: the largest n one request may take */
	_Atomic uint64_t frac_bits; /* F: stored permits in units of 2^-F    */
	_Atomic uint64_t max_q;     /* M in units of 2^-F, rounded up        */
	_Atomic double interval;    /* I in ns                               */
	_Atomic double thresh;      /* T = M / 2, permits                    */
	_Atomic double curve_k;     /* 2 I / M: area above I is
	                             * k((b-T)^2 - (a-T)^2)                  */
};

typedef struct sluice_warmup {
	/* read-only after init (the rate's parameters: params below, and
	 * sluice_warmup_limit(), sluice_warmup_rate()) */
	uint64_t warmup_ns;
	uint64_t horizon_ns; /* the longest delay a reservation can book       */
	uint64_t unit_ns;    /* grid of the next free ticket (power of two)    */
	const sluice_clock_t *clock;
	/* private, read-only after init */
	uint32_t unit_shift; /* log2(unit_ns)                                  */
	uint64_t fresh_max;  /* bound on L I for every rate set_rate accepts:
	                      * max(P, L I at init), ns; it sized the grid      */
	uint64_t cost_max;   /* bound on any one cost, ns                      */
	uint64_t end_ns;     /* the last ticket the grid can hold              */
	uint64_t half_range_ns; /* R/2: a decision this far past the anchor
	                         * moves it first (lib/warmup.c)              */
	/* private: read by every decision, written by set_rate */
	struct sluice__warmup_params params[2];
	_Atomic uint32_t writer; /* set_rate calls serialise on it             */
	/* private: written by decisions, on a line of their own */
	/* anchor and word are one 16-byte pair, CASed together (lib/warmup.c) */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t anchor; /* time base, only grows;
	                                                     * bit 0: the era */
	_Atomic uint64_t word; /* packed state, see lib/warmup.c                  */
} sluice_warmup_t;

/*
 * sluice_warmup_init - validate @cfg and set up @w (caller-allocated), cold.
 * The clock is not read: the limiter's time comes from the readings its
 * decisions are given (CLOCK JUMPS).
 *
 * No allocation.  Not thread-safe for the same @w; publish @w to other
 * threads afterwards (e.g. by pthread_create or a release store).
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ECLOCK, SLUICE_ERATE,
 * SLUICE_EWARMUP, SLUICE_ERESOLUTION (I below the clock's resolution).
 * On error @w is untouched.
 */
SLUICE_NODISCARD SLUICE_API int sluice_warmup_init(sluice_warmup_t *w, const sluice_warmup_config_t *cfg);
/* sluice_warmup_config_check - what sluice_warmup_init() returns for @cfg,
 * from init's own validator, with no memory and no limiter (common.h,
 * CONFIG CHECKS): 0 or the same code, never SLUICE_ENOMEM. */
SLUICE_NODISCARD SLUICE_API int sluice_warmup_config_check(const sluice_warmup_config_t *cfg);

/* sluice_warmup_destroy - nothing to free; NULL-safe.  No decision may run. */
SLUICE_API void sluice_warmup_destroy(sluice_warmup_t *w);

/* sluice_warmup_size - sizeof(sluice_warmup_t), for FFI callers. */
SLUICE_API size_t sluice_warmup_size(void);

/*
 * sluice_warmup_reserve_at - book @n permits at time @now, Guava's acquire(n).
 * @w: the limiter.  @n: 1..limit.  @now: ns on the limiter's clock base.
 * @max_delay_ns: the longest the caller will sleep (UINT64_MAX: any, up to
 * horizon_ns).  @d: NULL, or filled with the decision.
 *
 * Books the request when the next free ticket is at most @max_delay_ns
 * ahead; the caller must then sleep d->delay_ns (0 if the ticket has
 * passed) before using the permits, and the ticket moves on by their cost.
 * Otherwise books nothing and refuses; d->retry_after_ns is then the time
 * from d->now_ns until the same reservation would be booked.
 * d->limit: L of the parameter set the decision used.
 * d->reset_ns: time from now_ns to the next free ticket after the decision;
 * d->remaining: always 0 (one request at a time: after any decision the
 * next free ticket is ahead of now_ns).
 *
 * Lock-free (a failed CAS means another thread booked or moved the anchor),
 * no allocation, safe from any number of threads and from signal handlers
 * (no locks).  A booking is a release CAS on the state word; the decision
 * depends on nothing else, so it implies no ordering for other data.
 * Return: 1 booked, 0 refused, SLUICE_EINVAL (@w NULL or n = 0),
 * SLUICE_ETOOBIG (n > limit; @d says retry_after_ns = SLUICE_NEVER).
 */
SLUICE_NODISCARD SLUICE_API int sluice_warmup_reserve_at(sluice_warmup_t *w, uint64_t n, uint64_t now,
                                        uint64_t max_delay_ns, sluice_decision_t *d);

/*
 * sluice_warmup_acquire_at - take @n permits now or not at all: Guava's
 * tryAcquire(n, 0).  Admitted when the next free ticket is at or before
 * @now; the request's cost is then paid by the next one (the ticket moves to
 * now + cost).  Same contract as sluice_warmup_reserve_at() with
 * max_delay_ns = 0; on success retry_after_ns is 0.
 * Return: 1 admitted, 0 refused (retry_after_ns: exact time until the next
 * free ticket), SLUICE_EINVAL, SLUICE_ETOOBIG.
 */
SLUICE_NODISCARD SLUICE_API int sluice_warmup_acquire_at(sluice_warmup_t *w, uint64_t n, uint64_t now,
                                        sluice_decision_t *d);

/* sluice_warmup_acquire - as _at, reading the limiter's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_warmup_acquire(sluice_warmup_t *w, uint64_t n, sluice_decision_t *d);

/* sluice_warmup_reserve - as _at, reading the limiter's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_warmup_reserve(sluice_warmup_t *w, uint64_t n, uint64_t max_delay_ns,
                                        sluice_decision_t *d);

/*
 * sluice_warmup_refund - give back @n permits booked by @admitted (a
 * decision this limiter returned 1 for).
 *
 * The caller's contract: each admission at most once, with exactly the n it
 * took (this limiter gives back a whole booking: the ticket returns to its
 * start whatever @n is, so a smaller @n leaves the limiter warmer than
 * before the booking).  What is detected: a second refund finds the ticket
 * moved back by the first and returns SLUICE_ECANCEL, changing nothing,
 * unless a booking made since ended at exactly the same ticket: then it
 * takes that booking back, and one more request (of up to L permits) than
 * the bounds allow can start.
 *
 * Exact when that booking is still the latest: the next free ticket goes
 * back to the booking's start (rounded down to unit_ns, which is never
 * before the previous booking's ticket) and the stored permits gain @n
 * (capped at M), at least what the booking spent from them, so the limiter
 * is never warmer than before the booking.  Otherwise (a later
 * booking exists, the limiter went cold since, or the anchor moved past the
 * start) nothing changes: the permits stay spent, which errs toward fewer
 * admissions.  Lock-free; safe from any number of threads.
 * Return: 0 given back, SLUICE_ECANCEL kept, SLUICE_EINVAL (NULL, n = 0 or
 * above limit, or @admitted not an admission).
 */
SLUICE_API int sluice_warmup_refund(sluice_warmup_t *w, uint64_t n,
                                    const sluice_decision_t *admitted);

/*
 * sluice_warmup_cancel - give back the booking @booked describes (the
 * decision reserve or acquire filled): the booking verb;
 * sluice_warmup_refund() is the same call under the conventions' name, with
 * the same contract, what it detects and what it keeps.  Lock-free, no allocation.
 * Return: 0 given back, SLUICE_ECANCEL kept, SLUICE_EINVAL.
 */
SLUICE_API int sluice_warmup_cancel(sluice_warmup_t *w, uint64_t n,
                                    const sluice_decision_t *booked);

/*
 * sluice_warmup_available_at - the largest n that sluice_warmup_acquire_at()
 * at @now would admit, taking nothing: L (sluice_warmup_limit()) once the
 * next free ticket is at or before @now (Guava's pay-later rule: any n up
 * to L passes then, and the next request pays), 0 before it; near the end
 * of the time base (LIMITS), only the n whose ticket still fits.  Lock-free,
 * read-only (it may help finish an announced anchor move); a snapshot that
 * concurrent decisions may change at once.  Return: 0..L; 0 for NULL.
 */
SLUICE_API uint64_t sluice_warmup_available_at(sluice_warmup_t *w, uint64_t now);
/* sluice_warmup_available - as _at, reading the limiter's clock. */
SLUICE_API uint64_t sluice_warmup_available(sluice_warmup_t *w);

/*
 * sluice_warmup_set_rate - change the stable rate to @rate permits per
 * @period_ns, keeping the state (SET_RATE above says exactly how).
 * @w: the limiter.  @rate, @period_ns: as in the config.
 *
 * Safe while decisions run on any number of threads: they never wait for
 * it (a decision that read the old set when the change lands fails its
 * CAS and decides again, against the new one).  Calls serialise among
 * themselves on a flag, waiting with sched_yield for at most
 * SLUICE_WARMUP_WRITER_WAIT_NS: a control-path operation.  The change
 * itself is one double-width CAS of (anchor, word), retried only when a
 * decision wrote the state in between (lock-free).  No allocation.
 * Return: 0; SLUICE_EINVAL (NULL); what init returns for these parameters
 * with this limiter's warm-up period and clock (SLUICE_ERATE,
 * SLUICE_EWARMUP when M = P / I exceeds SLUICE_WARMUP_STORED_MAX,
 * SLUICE_ERESOLUTION); SLUICE_ERATE also when L I, the cost of the
 * largest request at the stable rate, exceeds max(P, L I at init), the
 * span the time grid was sized for, or when unit_ns > 1 and the new I is
 * below 512 unit_ns, the grid's precision bound (PRECISION); both are
 * possible only when I > P at init or after;
 * SLUICE_ETIMEDOUT when another set_rate held the flag that long (stopped
 * mid-change: its change completes when it resumes); SLUICE_EBUSY when
 * the ticket, moved one unit per change, would leave the range the state
 * word can hold (only after about 2^33 changes with no decision that
 * moves the anchor).  Nothing changes on error.
 */
SLUICE_API int sluice_warmup_set_rate(sluice_warmup_t *w, uint64_t rate, uint64_t period_ns);

/*
 * sluice_warmup_limit - L in force, the largest n one request may take.
 * sluice_warmup_rate - the stable rate in force (*@rate per *@period_ns).
 * Lock-free snapshots; a concurrent set_rate may make them stale at once.
 */
SLUICE_API uint64_t sluice_warmup_limit(sluice_warmup_t *w);
SLUICE_API void sluice_warmup_rate(sluice_warmup_t *w, uint64_t *rate, uint64_t *period_ns);

#ifdef SLUICE_INLINE
#include "static/warmup.h"
#endif

#endif /* SLUICE_WARMUP_H */
