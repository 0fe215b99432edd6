/* SPDX-License-Identifier: MIT */
/*
 * sluice/leaky.h - leaky bucket, as a meter (police) or as a shaper (pace).
 *
 * A bucket drains at a constant rate r (one request every T = period/r);
 * each request pours n into it.
 *
 *   SLUICE_LEAKY_METER  (nginx limit_req with burst=D nodelay): a request is
 *     admitted at once when the bucket has room, else refused.  The bucket
 *     holds D requests above the one being served: from empty, D + 1 pass
 *     at one instant, then one per T.  Nothing is ever delayed.
 *   SLUICE_LEAKY_SHAPER (nginx limit_req with burst, without nodelay, but
 *     with the queue given as a time): every admitted request gets the
 *     delay after which it may proceed; proceeding times are T apart, in
 *     booking order (FIFO); a request whose delay would exceed max_delay_ns
 *     is refused and books nothing.  Output is paced: never two requests
 *     closer than T (n requests take n*T).
 *
 * MAPPING onto GCRA (sluice/gcra.h; this module only calls it):
 *   meter  = GCRA with burst b = D + 1, acquire.  nginx keeps
 *            excess = max(excess - elapsed/T + 1, 0) and refuses when
 *            excess > D; with lag = TAT - t this is lag = (excess + 1) * T
 *            and TAT - t <= (D + 1) * T, the same decision step by step.
 *   shaper = GCRA with b = 1, reserve with max_delay = max_delay_ns.  With
 *            b = 1 the slot booked is max(TAT, t), so the delay is
 *            max(TAT - t, 0) and slots are T apart in CAS order.
 *
 * GUARANTEE (any number of threads, any timing), from GCRA's: for every
 * interval [x, x + t] of the limiter's timeline,
 *   meter:  requests admitted at a time inside it  <= D + 1 + t / T;
 *   shaper: requests whose slot (now_ns + delay_ns) is inside it
 *           <= 1 + t / T, so released traffic never exceeds the rate.
 * One CAS per decision: exact under concurrency.  Arithmetic is in ns, so
 * it stays exact above 1,000 requests per second, where implementations
 * counting in ms (nginx's own) round the drain per millisecond: at
 * 50,000/s, T = 20,000 ns and 50 requests drain every ms, at 1,000,000/s
 * T = 1,000 ns.  Non-whole T (period/rate) rounds up, as GCRA documents
 * (the rate is lowered by at most 0.1%, else init refuses).
 *
 * WORST CASE: the meter lets D + 1 through at one instant by design; the
 * shaper never does (its bursts are queued, each released T after the
 * previous).  A shaper's caller must actually wait: a caller that ignores
 * delay_ns proceeds early, and the limiter cannot know.  No priority:
 * the queue is FIFO by booking.
 *
 * CLOCK JUMPS: as GCRA: the bucket's level is stored as an absolute time,
 * so a reading older than the ones acted on finds the bucket fuller (refused
 * more, never admitted more) and is used as it is; d->now_ns is the reading,
 * and a shaper's delay is measured from it.
 *
 * READINGS ACROSS A CHANGE: GCRA's rule (gcra.h): a set_rate/set_burst is
 * stamped with its reading (never before the previous change's), and a
 * request whose reading r is older than the stamp s is judged at s, its
 * waits measured from r: the meter refuses it (retry_after_ns >= s - r;
 * a lease spend aside, as GCRA's),
 * the shaper books it a slot at or after s (delay_ns >= s - r; the shaper
 * did so before, as its slots follow the TAT, which a change never moves
 * back).  A setter whose reading lags requests already decided credits
 * nothing.  So across any changes and readings the GUARANTEE holds with
 * the largest D + 1 and the smallest T in force over the interval: meter
 * max(D + 1) + t / min(T) (+ V / min(T) with leases), shaper 1 + t / min(T).
 *
 * DECISION: allowed; limit = D + 1 (meter) or 1 (shaper); remaining = how
 * many more single requests would pass at once right now (meter: room left
 * in the bucket; shaper: 1 when the queue is empty, else 0); retry_after_ns:
 * 0 when admitted, else the exact wait (meter) or how much later the same
 * request would fit the queue (shaper); delay_ns: a shaper's booking, the
 * delay before it may proceed, else 0;
 * reset_ns = ns until the bucket is empty (the shaper's queue drained).
 *
 * LIMITS: rate >= 1, period_ns >= rate (T >= 1 ns) (SLUICE_ERATE); meter:
 * (D + 1) * T <= SLUICE_GCRA_SPAN_MAX (SLUICE_EBURST), (D + 1) * T >= the
 * clock's resolution (SLUICE_ERESOLUTION: a smaller bucket would pass at
 * most D + 1 per clock step, below the rate; gcra.h) and max_delay_ns = 0
 * (SLUICE_EDELAY: a meter does not queue); shaper: T >= the clock's
 * resolution (SLUICE_ERESOLUTION: its acquire passes only with the queue
 * empty, so at most one request per clock reading, and its delays are
 * measured from a reading up to one step old, so a caller that sleeps out
 * each delay before booking the next slot lands up to a step late every
 * time; with T below the step both fall short of the rate, silently),
 * max_delay_ns <= SLUICE_GCRA_SPAN_MAX (SLUICE_EDELAY) and depth = 0
 * (SLUICE_EBURST: the queue is given as a time).  n in 1..D+1 (meter),
 * n = 1 (shaper: a request of n would be n slots; pace n requests one by
 * one).
 * LEASES (meter only; config.lease = B > 0, off by default): the meter is
 * GCRA's acquire, so it gets GCRA's per-CPU leases for a hot key (gcra.h,
 * LEASES): a decision spends permits its CPU booked in one CAS earlier, for
 * at most V = config.lease_ns after that CAS, and the meter's GUARANTEE
 * becomes, exactly, requests admitted in [x, x + t] <= D + 1 + (t + V) / T.
 * Leases shrink to the single CAS near the limit; what a lease holds when
 * it ends is lost (under-admission, at most B per take, as GCRA states);
 * refunds as GCRA's with leases.  The shaper has none: its decisions book
 * future slots one by one (b = 1, so a lease would never hold anything),
 * and SLUICE_ELEASE refuses one.  Limits as GCRA's leases: B up to
 * SLUICE_GCRA_LEASE_MAX, V up to SLUICE_GCRA_LEASE_NS_MAX (SLUICE_ELEASE),
 * (D + 1) * T <= SLUICE_GCRA_LEASE_SPAN_MAX (SLUICE_EBURST).
 *
 * MEMORY: 384 bytes (a GCRA and the mode), caller-allocated; no allocation
 * without leases, and with leases GCRA's cells (64 bytes per possible CPU),
 * allocated by init and freed by sluice_leaky_destroy().
 */
#ifndef SLUICE_LEAKY_H
#define SLUICE_LEAKY_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "decision.h"
#include "gcra.h"

typedef enum sluice_leaky_mode {
	SLUICE_LEAKY_METER = 0,
	SLUICE_LEAKY_SHAPER = 1,
} sluice_leaky_mode_t;

typedef struct sluice_leaky_config {
	uint64_t rate;               /* drain: requests per period, >= 1     */
	uint64_t period_ns;          /* >= rate                              */
	sluice_leaky_mode_t mode;
	uint64_t depth;              /* METER: D, requests held above the one
	                              * served (nginx burst); SHAPER: 0      */
	uint64_t max_delay_ns;       /* SHAPER: longest queueing delay;
	                              * METER: 0                             */
	const sluice_clock_t *clock; /* NULL: &sluice_clock_cached           */
	uint32_t lease;              /* METER: GCRA's per-CPU leases of up to
	                              * this many (gcra.h, LEASES); 0 = none;
	                              * SHAPER: 0                            */
	uint64_t lease_ns;           /* METER with leases: V (0: default)    */
} sluice_leaky_config_t;

typedef struct sluice_leaky {
	/* read-only after init */
	sluice_leaky_mode_t mode;
	uint64_t max_delay_ns; /* 0 for a meter */
	/* private */
	sluice_gcra_t gcra;
} sluice_leaky_t;

/*
 * sluice_leaky_init - validate @cfg and set up @l (caller-allocated), empty.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_EMODE, SLUICE_ECLOCK,
 * SLUICE_ERATE, SLUICE_EBURST, SLUICE_EDELAY, SLUICE_ERESOLUTION (meter:
 * (D + 1) * T below the clock's resolution; shaper: T below it) (see
 * LIMITS), SLUICE_ELEASE (a lease for the shaper, or out of range),
 * SLUICE_ENOMEM (lease cells).
 * On error @l is untouched and nothing is allocated.  Allocates only with
 * leases; not thread-safe for the same @l.
 */
SLUICE_NODISCARD SLUICE_API int sluice_leaky_init(sluice_leaky_t *l, const sluice_leaky_config_t *cfg);
/* sluice_leaky_config_check - what sluice_leaky_init() returns for @cfg,
 * from init's own validator, with no memory and no limiter (common.h,
 * CONFIG CHECKS): 0 or the same code, never SLUICE_ENOMEM. */
SLUICE_NODISCARD SLUICE_API int sluice_leaky_config_check(const sluice_leaky_config_t *cfg);
/* sluice_leaky_destroy - free the lease cells, if any (NULL is fine). */
SLUICE_API void sluice_leaky_destroy(sluice_leaky_t *l);
/* sluice_leaky_size - sizeof(sluice_leaky_t), for FFI callers. */
SLUICE_API size_t sluice_leaky_size(void);

/*
 * sluice_leaky_acquire_at - admit @n requests at @now now, or refuse.
 * Meter: the police decision.  Shaper: admits only when the request could
 * go at once (its queue is empty), so it never jumps the queue; use
 * sluice_leaky_reserve_at() to queue.  Lock-free (one CAS), no allocation,
 * thread-safe.
 * Return: 1 admitted, 0 refused (nothing taken), SLUICE_EINVAL (n = 0),
 * SLUICE_ETOOBIG (n above limit; retry_after_ns = SLUICE_NEVER).
 */
SLUICE_NODISCARD SLUICE_API int sluice_leaky_acquire_at(sluice_leaky_t *l, uint64_t n, uint64_t now,
                                          sluice_decision_t *d);

/* sluice_leaky_acquire - as _at, reading the limiter's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_leaky_acquire(sluice_leaky_t *l, uint64_t n, sluice_decision_t *d);

/*
 * sluice_leaky_reserve_at - queue @n requests at @now (shaper), for a caller
 * who will wait at most @max_delay_ns (UINT64_MAX: as long as configured).
 * Admitted: d->delay_ns is the delay after which the request may proceed
 * (0: now), slots FIFO in booking order, T apart.  Refused when the delay
 * would exceed the smaller of @max_delay_ns and the configured
 * max_delay_ns, so a tighter caller never books a slot it will not use,
 * and no caller queues longer than configured: nothing is booked, and
 * d->retry_after_ns says how much later the request would fit.  A meter
 * answers as acquire (delay always 0).  An admitted request that will not
 * proceed can be given back with sluice_leaky_cancel() (exact while
 * nothing queued after it).  Lock-free (one CAS), no allocation,
 * thread-safe.
 * Return: 1 admitted (with its delay), 0 refused, SLUICE_EINVAL,
 * SLUICE_ETOOBIG.
 */
SLUICE_NODISCARD SLUICE_API int sluice_leaky_reserve_at(sluice_leaky_t *l, uint64_t n, uint64_t now,
                                          uint64_t max_delay_ns, sluice_decision_t *d);

/* sluice_leaky_reserve - as _at, reading the limiter's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_leaky_reserve(sluice_leaky_t *l, uint64_t n, uint64_t max_delay_ns,
                                       sluice_decision_t *d);

/*
 * sluice_leaky_refund - give back @n requests of the admission (or
 * queued slot) @admitted describes: exact while nothing was admitted or
 * queued after it, else SLUICE_ECANCEL and they stay counted (they drain
 * at the rate: fewer future admissions, never more).  See
 * sluice_gcra_cancel().  The caller's contract: each admission at most
 * once, with at most the n it took; a second refund is refused
 * (SLUICE_ECANCEL) unless a request admitted since ended at exactly the
 * same ns, whose slot it then gives back (gcra.h, CANCEL / REFUND).
 * Lock-free, no allocation.
 * Return: 0, SLUICE_ECANCEL, SLUICE_EINVAL.
 */
SLUICE_API int sluice_leaky_refund(sluice_leaky_t *l, uint64_t n,
                                   const sluice_decision_t *admitted);

/* sluice_leaky_interval_ns - T, ns between two drained requests. */
SLUICE_API uint64_t sluice_leaky_interval_ns(const sluice_leaky_t *l);

/*
 * sluice_leaky_available_at - the largest n that sluice_leaky_acquire_at()
 * at @now would admit, taking nothing: meter, the room left in the bucket
 * (0..D + 1); shaper, 1 when its queue is empty at @now, else 0.  Lock-free,
 * read-only (it may help finish a set_rate/set_burst); a snapshot that
 * concurrent decisions may change at once.  GCRA's available (gcra.h).
 */
SLUICE_API uint64_t sluice_leaky_available_at(sluice_leaky_t *l, uint64_t now);
/* sluice_leaky_available - as _at, reading the limiter's clock. */
SLUICE_API uint64_t sluice_leaky_available(sluice_leaky_t *l);

/*
 * sluice_leaky_cancel - give back @n requests of the admission or queued
 * slot @booked describes (the decision acquire or reserve filled): exact
 * while nothing was admitted or queued after it, else SLUICE_ECANCEL and
 * they stay counted.  The booking verb; sluice_leaky_refund() is the same
 * call under the conventions' name.  GCRA's cancel (gcra.h, CANCEL /
 * REFUND), with its caller's contract.  Lock-free, no allocation.
 * Return: 0, SLUICE_ECANCEL, SLUICE_EINVAL.
 */
SLUICE_API int sluice_leaky_cancel(sluice_leaky_t *l, uint64_t n, const sluice_decision_t *booked);

/*
 * sluice_leaky_set_rate_at - drain at @rate per @period_ns from now on.
 * sluice_leaky_set_burst_at - hold @depth
 * (D, the config's field) requests above the one served (meter only).
 * @now: the change's reading (the plain variants read the clock; see
 * READINGS ACROSS A CHANGE).
 *
 * What is already counted: the bucket's level is kept (GCRA's SET_RATE /
 * SET_BURST rule, gcra.h): just after the change the bucket holds the FEWER
 * of the requests it had room for just before (capped at the new D + 1)
 * and what the new parameters give for the unchanged level; nothing
 * queued is forgotten, no room is minted, and a shaper's queued slots keep
 * their times (a slower drain spaces only the slots booked after the
 * change further apart; a faster one cannot pull booked slots earlier).  A
 * booking made before the change can no longer be cancelled
 * (SLUICE_ECANCEL).  Safe while decisions run on any number of threads
 * (they stay lock-free and each uses one parameter set); changes serialise
 * among themselves with a bounded wait (SLUICE_ETIMEDOUT after
 * SLUICE_GCRA_WRITER_WAIT_NS).  Control path, no allocation.
 * Return: 0; SLUICE_EINVAL (NULL); set_rate: SLUICE_ERATE (as init, and
 * when the new T makes (D + 1) * T too long); set_burst: SLUICE_ENOTSUP on a shaper (its queue is a time,
 * max_delay_ns, not a depth), SLUICE_EBURST as init (depth = UINT64_MAX,
 * (D + 1) * T too long); both: SLUICE_ERESOLUTION as init,
 * SLUICE_ETIMEDOUT.  Nothing changes on error.
 */
SLUICE_API int sluice_leaky_set_rate_at(sluice_leaky_t *l, uint64_t rate, uint64_t period_ns,
                                        uint64_t now);
SLUICE_API int sluice_leaky_set_rate(sluice_leaky_t *l, uint64_t rate, uint64_t period_ns);
SLUICE_API int sluice_leaky_set_burst_at(sluice_leaky_t *l, uint64_t depth, uint64_t now);
SLUICE_API int sluice_leaky_set_burst(sluice_leaky_t *l, uint64_t depth);

#ifdef SLUICE_INLINE
#include "static/leaky.h"
#endif

#endif /* SLUICE_LEAKY_H */
