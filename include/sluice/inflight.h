/* SPDX-License-Identifier: MIT */
/*
 * sluice/inflight.h - concurrency limiter: at most K requests in flight.
 *
 * A counting semaphore that never blocks: acquire takes n slots all or
 * nothing, release gives them back.  It limits how many requests (or bytes,
 * or any unit) are being served at once, not how many arrive per second;
 * combine it with a rate limiter (composite) for both.
 *
 * GUARANTEE (any number of threads, any timing): let held be the sum of n
 * over successful acquires minus the sum of n over successful releases.
 * held never exceeds K and never goes below 0 (it never wraps); while
 * set_limit changes K, no acquire takes held above a K in force while it
 * decided (READINGS ACROSS A CHANGE).  Every
 * successful acquire and release is one CAS on one 64-bit word that checks
 * the bound against the value it replaces, so the operations are
 * linearizable: two threads can never both take the last slot.  When every release matches an earlier
 * acquire of the same n (the caller's contract), the requests in flight are
 * therefore at most K at every instant.
 *
 * WORST CASE (what it does not prevent):
 *   - Mismatched releases are detected only when they would take held below
 *     0.  A release of slots that another thread holds (a double release, or
 *     a release without acquire while others are in flight) cannot be told
 *     apart from a legitimate one: it silently lowers held, and up to that
 *     many extra requests are admitted until the real holders release
 *     (they then may find held too low and their own release is the one
 *     reported).  Catching every mismatch needs per-acquire tokens; this
 *     limiter keeps one word.
 *   - A leaked acquire (a handler that never releases, e.g. a crashed
 *     worker) loses its slots for good: there is no lease or timeout.
 *   - No fairness: a request for n slots waits for n to be free at the
 *     instant it asks; a steady stream of small requests can starve a big
 *     one.  Refusals never queue.
 *   - One word is written by every acquire and release on every CPU, so its
 *     cache line moves between cores on each operation; throughput is that
 *     of a contended atomic, not of a per-CPU counter.  Lock-free, not
 *     wait-free: a thread's CAS can fail as long as others keep succeeding.
 *
 * SET_LIMIT (sluice_inflight_set_limit(), safe while acquires and releases
 * run): a change keeps held.  Nothing held is forgotten and nothing is
 * minted: lowering K below held refuses every acquire until releases bring
 * held to K - n or less; raising it lets exactly the difference in.  held
 * may stay above a lowered K, never because of an acquire that read it.
 * The limit is the only setter (no rate, no burst: the generic handle
 * answers SLUICE_ENOTSUP for those).
 *
 * READINGS ACROSS A CHANGE: time plays no part here (the reading is only
 * copied to d->now_ns), so a reading older than a change changes nothing;
 * what matters is the order of the change and the acquire's CAS.  An
 * acquire reads K after held, on every attempt (a lost CAS reads held and
 * then K again), and its CAS succeeds only on held unchanged; the change,
 * the loads of K and the CAS lie in one total order (lib/inflight.c).  So
 * every successful acquire leaves held at most a K in force at a point
 * between its last read of held and its CAS, with held unchanged in
 * between (its decision.limit): held after an acquire never exceeds the
 * largest limit in force while held had the value the CAS replaced.  An
 * acquire that read the old K and then lost its CAS, to any acquire or
 * release, decides again against the K in force then, however long it
 * stalled.
 *
 * BAD RELEASES: a release of more than is held returns SLUICE_ERELEASE,
 * changes nothing and increments the limiter's counter
 * (sluice_inflight_bad_releases()), in every build.  The library prints
 * nothing and never aborts: the return code and the counter are the only
 * report, so monitor the counter (an accounting bug in the caller changes
 * nothing in the limiter by itself, and a library must not write to its
 * host's stderr).
 *
 * CLOCK JUMPS: time plays no part in a decision.  acquire_at() accepts a
 * time only for API uniformity with the other limiters: it is copied to
 * d->now_ns and used for nothing else.  So a clock set back (or forward)
 * changes no admission.  Unlike the windowed limiters this module does not
 * clamp the reading to the newest time seen (that would cost a shared write
 * per decision for a value no decision reads): d->now_ns is the reading as
 * given, and may run backwards when the caller's clock does.
 *
 * DECISION: allowed; limit = the K the acquire read; remaining = K - held
 * after the decision (refused: K - held as seen when refusing, 0 when held
 * is at or above a lowered K); retry_after_ns = 0 in both
 * cases: a slot frees only when some holder releases, which may happen the
 * next instant, so 0 is the exact earliest time the request could pass (a
 * lower bound, not a promise; a refusal with allowed = false and
 * retry_after_ns = 0 means "unknown, possibly now").  reset_ns = SLUICE_NEVER:
 * no time bounds how long the slots counted now stay held.  A request that
 * can never pass (n > K) gets sluice__decision_never().
 *
 * LIMITS: K in 1..SLUICE_INFLIGHT_LIMIT_MAX (2^62); n in 1..K.  K may count
 * bytes (a budget of request bodies in flight), not only requests, hence the
 * wide range.  The acquire checks held + n <= K: held is at most the
 * largest K ever set and n at most K, so the sum is at most 2^63 and never
 * wraps, even when set_limit lowered K below held; the cap also leaves
 * callers room to add counts and limits (K + n, sums over several
 * limiters) without wrapping.
 *
 * MEMORY: 128 bytes, caller-allocated (two cache lines: read-only and
 * rarely written fields, then the hot count alone).  No allocation, ever.
 */
#ifndef SLUICE_INFLIGHT_H
#define SLUICE_INFLIGHT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "common.h"
#include "decision.h"
#include "error.h"

#define SLUICE_INFLIGHT_LIMIT_MAX (1ULL << 62)

typedef struct sluice_inflight_config {
	uint64_t limit;              /* K: slots, 1..SLUICE_INFLIGHT_LIMIT_MAX */
	const sluice_clock_t *clock; /* NULL: &sluice_clock_cached; read only
	                              * to fill d->now_ns                      */
} sluice_inflight_config_t;

typedef struct sluice_inflight {
	/* written only by sluice_inflight_set_limit(); an acquire is judged
	 * against the value it reads after held (READINGS ACROSS A CHANGE) */
	_Atomic uint64_t limit;
	/* read-only after init */
	const sluice_clock_t *clock;
	/* private, written only on a bad release (cold) */
	_Atomic uint64_t bad_releases; /* releases refused as more than held */
	/* private: written by every acquire and release, on a line of its own */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t held; /* slots in flight */
} sluice_inflight_t;

/*
 * sluice_inflight_init - validate @cfg and set up @f (caller-allocated).
 * @f: the limiter.  @cfg: limit K and clock (NULL clock: the cached clock).
 *
 * No allocation.  Not thread-safe for the same @f (no other call on @f may
 * run during init).
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ELIMIT (K = 0 or above
 * SLUICE_INFLIGHT_LIMIT_MAX), SLUICE_ECLOCK (unknown clock kind).
 * On error @f is untouched.
 */
SLUICE_NODISCARD SLUICE_API int sluice_inflight_init(sluice_inflight_t *f, const sluice_inflight_config_t *cfg);
/* sluice_inflight_config_check - what sluice_inflight_init() returns for @cfg,
 * from init's own validator, with no memory and no limiter (common.h,
 * CONFIG CHECKS): 0 or the same code, never SLUICE_ENOMEM. */
SLUICE_NODISCARD SLUICE_API int sluice_inflight_config_check(const sluice_inflight_config_t *cfg);

/* sluice_inflight_destroy - nothing to free; NULL-safe.  For symmetry with
 * the limiters that allocate.  No call on @f may be running.  Slots still
 * held are not reported. */
SLUICE_API void sluice_inflight_destroy(sluice_inflight_t *f);

/* sluice_inflight_size - for FFI callers.  Return: sizeof(sluice_inflight_t). */
SLUICE_API size_t sluice_inflight_size(void);

/*
 * sluice_inflight_bad_releases - how many releases (and refunds) were
 * refused because they asked for more than was held.  Thread-safe, lock-free,
 * any context.  Relaxed: a statistic that orders nothing; exact once the
 * threads that released have been joined.
 * Return: the count since init.
 */
SLUICE_API uint64_t sluice_inflight_bad_releases(const sluice_inflight_t *f);

/*
 * sluice_inflight_acquire_at - take @n slots, all or nothing.
 * @f: the limiter.  @n: 1..K.  @now: copied to d->now_ns, otherwise unused.
 * @d: NULL, or filled with the decision (see DECISION above).
 *
 * Lock-free, no allocation, safe from any number of threads.  A successful
 * acquire is an acquire operation on the count: it synchronizes with every
 * release that came before it in the count's modification order, so what a
 * thread wrote before releasing slots is visible to a thread that takes slots
 * after it, as with sem_post()/sem_wait().  A refusal takes nothing and
 * implies no ordering.
 * Return: 1 admitted, 0 refused (fewer than @n free now), SLUICE_EINVAL
 * (n = 0), SLUICE_ETOOBIG (n above the K this acquire read: cannot pass
 * unless set_limit raises it; retry_after_ns is SLUICE_NEVER).
 */
SLUICE_NODISCARD SLUICE_API int sluice_inflight_acquire_at(sluice_inflight_t *f, uint64_t n, uint64_t now,
                                             sluice_decision_t *d);

/*
 * sluice_inflight_acquire - as _at; reads the limiter's clock only when @d
 * is non-NULL (the time is used for nothing but d->now_ns).
 */
SLUICE_NODISCARD SLUICE_API int sluice_inflight_acquire(sluice_inflight_t *f, uint64_t n, sluice_decision_t *d);

/*
 * sluice_inflight_release - give back @n slots taken by an earlier acquire.
 * @f: the limiter.  @n: the n of that acquire (1..K).
 *
 * The caller's contract: each admission at most once, with at most the n it
 * took (a double release is detected only when it asks for more than is
 * held: WORST CASE).
 *
 * Lock-free, no allocation, safe from any number of threads.  A successful
 * release is a release operation on the count: everything this thread wrote
 * before it is visible to any thread whose later acquire takes slots.
 * A release of more than is held changes nothing and is counted in
 * sluice_inflight_bad_releases() (see BAD RELEASES above).  Only the total is
 * checked: see WORST CASE for the mismatches that cannot be detected.
 * Return: 0 given back; SLUICE_EINVAL (n = 0); SLUICE_ERELEASE (n > held:
 * nothing changed).
 */
SLUICE_API int sluice_inflight_release(sluice_inflight_t *f, uint64_t n);

/*
 * sluice_inflight_refund - give back @n slots of the admission @admitted
 * describes (the composite's undo).  Exactly sluice_inflight_release(): the
 * admission's time plays no part, so @admitted may be NULL.  A refund is
 * always exact when it matches an admission.  The caller's contract: each
 * admission at most once (refund or release, not both), with at most the n
 * it took.  A second one is refused only when it asks for more than is
 * held; otherwise it frees slots that other holders took (WORST CASE).
 * Return: as sluice_inflight_release(): 0, SLUICE_EINVAL, or
 * SLUICE_ERELEASE when @n is more than is held (nothing changed, so the
 * error errs toward fewer future admissions, never more).
 */
SLUICE_API int sluice_inflight_refund(sluice_inflight_t *f, uint64_t n,
                                         const sluice_decision_t *admitted);

/*
 * sluice_inflight_available - the largest n an acquire would admit right
 * now (0 when none), taking nothing: K - held, or 0 when held is at or
 * above a lowered K.  Time plays no part, so there is no _at variant.
 * Thread-safe, lock-free, writes nothing, any context.  Relaxed reads that
 * order nothing: under concurrent traffic the value may be stale by the
 * time it is used (for monitoring, not for deciding).  Exact when no
 * acquire, release or set_limit runs.
 * Return: 0..K.
 */
SLUICE_API uint64_t sluice_inflight_available(const sluice_inflight_t *f);

/*
 * sluice_inflight_set_limit - change K to @limit, keeping held (see
 * SET_LIMIT above).  Safe while acquires and releases run on any thread:
 * one relaxed store that they read without a lock; concurrent calls leave
 * one of their values.  No allocation.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ELIMIT (0 or above
 * SLUICE_INFLIGHT_LIMIT_MAX, as init): then nothing changes.
 */
SLUICE_API int sluice_inflight_set_limit(sluice_inflight_t *f, uint64_t limit);

#ifdef SLUICE_INLINE
#include "static/inflight.h"
#endif

#endif /* SLUICE_INFLIGHT_H */
