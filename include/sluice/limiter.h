/* SPDX-License-Identifier: MIT */
/*
 * sluice/limiter.h - one handle for every algorithm.
 *
 * sluice_limiter_new(&config) builds any limiter sluice offers behind an
 * opaque handle; sluice_limiter_acquire / _acquire_at / _release / _refund /
 * _available / _wait / _wait_until then work on all of them alike, and
 * _reserve / _cancel / _set_rate / _set_burst / _set_limit on every
 * algorithm that has the verb (SLUICE_ENOTSUP on the others, changing
 * nothing).  The handle costs one indirect
 * switch per decision over the algorithm's own inline fast path; callers
 * who want the last nanoseconds use the algorithm's type directly
 * (sluice/fixed.h, sluice/window.h, ...), which stays public.
 *
 * Thread-safety: new/free are not decision paths (they allocate and free);
 * no decision may run on a limiter being freed.  Every other function is
 * safe from any number of threads, lock-free, and allocates nothing; the
 * guarantees are those of the algorithm's header.
 */
#ifndef SLUICE_LIMITER_H
#define SLUICE_LIMITER_H

#include <stdint.h>

#include "common.h"
#include "composite.h"
#include "decay.h"
#include "decision.h"
#include "fixed.h"
#include "gcra.h"
#include "inflight.h"
#include "keyed.h"
#include "leaky.h"
#include "log.h"
#include "warmup.h"
#include "window.h"

typedef struct sluice_limiter_config {
	sluice_algo_t algo;
	union {
		sluice_composite_config_t composite;
		/* SLUICE_ALGO_KEYED: the table (sluice_keyed_attach/_new),
		 * borrowed; it must outlive the handle.  Its decisions take
		 * the key per call: the _key functions below. */
		struct sluice_keyed *keyed;
#define SLUICE__ALGO_CONFIG(K, name) sluice_##name##_config_t name;
		SLUICE_ALGOS(SLUICE__ALGO_CONFIG)
#undef SLUICE__ALGO_CONFIG
	};
} sluice_limiter_config_t;

typedef struct sluice_limiter sluice_limiter_t;

/*
 * sluice_limiter_config_check - what sluice_limiter_new() returns for @cfg
 * but SLUICE_ENOMEM: the algorithm's own sluice_<algo>_config_check()
 * (common.h, CONFIG CHECKS), SLUICE_EALGO for an algorithm new() does not
 * make, SLUICE_EINVAL for a keyed config without its table.  No memory.
 */
SLUICE_NODISCARD SLUICE_API int sluice_limiter_config_check(const sluice_limiter_config_t *cfg);

/*
 * sluice_limiter_new - validate @cfg (sluice_limiter_config_check(), before
 * anything is allocated) and allocate a limiter of its algorithm.
 * Return: 0 and *@out, the config check's error, or SLUICE_ENOMEM; *@out
 * is untouched on error.
 */
SLUICE_NODISCARD SLUICE_API int sluice_limiter_new(const sluice_limiter_config_t *cfg, sluice_limiter_t **out);
/* sluice_limiter_free - free a limiter (NULL is fine). */
SLUICE_API void sluice_limiter_free(sluice_limiter_t *l);
SLUICE_API sluice_algo_t sluice_limiter_algo(const sluice_limiter_t *l);
SLUICE_API const sluice_clock_t *sluice_limiter_clock(const sluice_limiter_t *l);

/* sluice_limiter_acquire_at - the algorithm's acquire_at: 1, 0 or a negative error. */
SLUICE_NODISCARD SLUICE_API int sluice_limiter_acquire_at(sluice_limiter_t *l, uint64_t n, uint64_t now,
                                         sluice_decision_t *d);
/* sluice_limiter_acquire - the same, reading the limiter's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_limiter_acquire(sluice_limiter_t *l, uint64_t n, sluice_decision_t *d);

/*
 * sluice_limiter_acquire_key_at - as acquire_at, for @key (@keylen bytes):
 * a keyed handle (SLUICE_ALGO_KEYED) decides against that key's state
 * (sluice_keyed_acquire_at); a composite passes the key to each of its
 * parts; every other algorithm ignores it.  This is how "100/s per IP and
 * 10,000/s in total, all or nothing" is one call: a composite of a keyed
 * part and a global part.  The plain acquire/_at on a keyed handle has no
 * key: SLUICE_EKEYLEN.
 * Return: as acquire_at, or the keyed table's errors (keyed.h).
 */
SLUICE_NODISCARD SLUICE_API int sluice_limiter_acquire_key_at(sluice_limiter_t *l, const void *key, size_t keylen,
                                             uint64_t n, uint64_t now, sluice_decision_t *d);
/* sluice_limiter_acquire_key - the same, reading the limiter's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_limiter_acquire_key(sluice_limiter_t *l, const void *key, size_t keylen,
                                          uint64_t n, sluice_decision_t *d);
/* sluice_limiter_release_key - release for @key (a keyed INFLIGHT table's
 * key; ignored elsewhere). */
SLUICE_API int sluice_limiter_release_key(sluice_limiter_t *l, const void *key, size_t keylen,
                                          uint64_t n);
/* sluice_limiter_refund_key - refund for @key (sluice_keyed_refund on a
 * keyed handle; ignored elsewhere). */
SLUICE_API int sluice_limiter_refund_key(sluice_limiter_t *l, const void *key, size_t keylen,
                                         uint64_t n, const sluice_decision_t *admitted);

/*
 * sluice_limiter_release - end @n in-flight requests (concurrency limiters); a
 * no-op returning 0 for every algorithm that counts arrivals, not work in
 * progress.  A composite passes it to each of its parts.
 */
SLUICE_API int sluice_limiter_release(sluice_limiter_t *l, uint64_t n);

/* sluice_limiter_refund - the algorithm's refund (see its header). */
SLUICE_API int sluice_limiter_refund(sluice_limiter_t *l, uint64_t n,
                                     const sluice_decision_t *admitted);

/*
 * sluice_limiter_reserve_at - book @n permits at @now for a caller who will
 * wait at most @max_delay_ns: the algorithm's reserve_at (GCRA, warm-up,
 * leaky shaper).  This is the non-blocking "book, then tell me when" for
 * event loops: on 1 the permits are booked and d->delay_ns says when to
 * proceed (d->now_ns + d->delay_ns; arm a timer, do not sleep); on 0
 * nothing is booked and d->retry_after_ns says how much later the same
 * call would succeed.  Algorithms that cannot book (fixed, window, log,
 * decay, in-flight, a leaky meter, a composite: see lib/limiter.c for why
 * the composite cannot) return SLUICE_ENOTSUP, taking nothing: the event
 * loop then polls sluice_limiter_acquire_at() and re-arms its timer at
 * retry_after_ns of each refusal.  A booking not used is given back with
 * sluice_limiter_cancel().  Lock-free, no allocation, thread-safe.
 * Return: 1 booked, 0 not booked, SLUICE_ENOTSUP, SLUICE_EINVAL (NULL
 * handle, n = 0), or the algorithm's error (SLUICE_ETOOBIG).
 */
SLUICE_NODISCARD SLUICE_API int sluice_limiter_reserve_at(sluice_limiter_t *l, uint64_t n, uint64_t now,
                                         uint64_t max_delay_ns, sluice_decision_t *d);
/* sluice_limiter_reserve - the same, reading the limiter's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_limiter_reserve(sluice_limiter_t *l, uint64_t n, uint64_t max_delay_ns,
                                      sluice_decision_t *d);

/*
 * sluice_limiter_cancel - give back @n permits of the booking (or
 * admission) @booked describes: the algorithm's cancel on GCRA, warm-up
 * and the leaky bucket (exact while nothing was booked after it, else
 * SLUICE_ECANCEL, kept; see their headers).  SLUICE_ENOTSUP elsewhere,
 * nothing changed: nothing there is booked (use sluice_limiter_refund()).
 * Return: 0, SLUICE_ECANCEL, SLUICE_ENOTSUP, SLUICE_EINVAL, SLUICE_EALGO.
 */
SLUICE_API int sluice_limiter_cancel(sluice_limiter_t *l, uint64_t n,
                                     const sluice_decision_t *booked);

/*
 * sluice_limiter_available_at - *@out = the largest n that
 * sluice_limiter_acquire_at() at @now would admit, taking nothing: the
 * algorithm's available (the same meaning in every module); a composite's
 * is the smallest of its parts' (all or nothing).  Lock-free, read-only;
 * a snapshot that concurrent decisions may change at once.  Returns an
 * int with *@out beside it, unlike the modules' own (which return the
 * count), because the handle has errors to report.
 * Return: 0; SLUICE_EINVAL (NULL); SLUICE_EALGO; SLUICE_ENOTSUP (only
 * where the algorithm's module does not have it in this build: see the
 * MERGE BLOCK in lib/limiter.c); *@out is untouched on error.
 */
SLUICE_API int sluice_limiter_available_at(sluice_limiter_t *l, uint64_t now, uint64_t *out);
/* sluice_limiter_available - the same, reading the limiter's clock. */
SLUICE_API int sluice_limiter_available(sluice_limiter_t *l, uint64_t *out);

/*
 * sluice_limiter_set_rate - @rate per @period_ns: GCRA, leaky (its drain),
 *   warm-up (its stable rate; warmup.h SET_RATE).
 * sluice_limiter_set_burst - @burst: GCRA's b; the leaky meter's depth D
 *   (the value its config names, so the meter holds D + 1 at once).
 * sluice_limiter_set_limit - @limit: fixed, window, log, in-flight, decay.
 * Each is the algorithm's own setter, at the limiter's clock's reading,
 * with its rule for what is already counted (nothing forgotten, nothing
 * minted: see the algorithm's header), for decisions whose reading is
 * older than the change (gcra.h, leaky.h, warmup.h: READINGS ACROSS A
 * CHANGE) and its concurrency (safe while
 * decisions run).  SLUICE_ENOTSUP, changing nothing, where the algorithm
 * has no such parameter, and on a composite (change the part's own handle:
 * the composite holds them, borrowed).
 * Return: 0, SLUICE_ENOTSUP, SLUICE_EINVAL (NULL), SLUICE_EALGO, or the
 * algorithm's error.
 */
SLUICE_API int sluice_limiter_set_rate(sluice_limiter_t *l, uint64_t rate, uint64_t period_ns);
SLUICE_API int sluice_limiter_set_burst(sluice_limiter_t *l, uint64_t burst);
SLUICE_API int sluice_limiter_set_limit(sluice_limiter_t *l, uint64_t limit);

/*
 * sluice_limiter_wait_until - block until @n permits are taken, or fail at
 * once.  @deadline_ns: the latest time, on the limiter's clock, at which the
 * permits may be used.  @d: NULL, or the final decision.
 *
 * Algorithms that can book a slot (GCRA, leaky shaper, warm-up) book it
 * and sleep until it comes, or, when the slot is later than
 * @deadline_ns, book nothing and return SLUICE_ETIMEDOUT at once.  The
 * others are polled: sleep for the decision's retry_after_ns and try again;
 * when retry_after_ns says the permits would come after @deadline_ns (or
 * there is no time at which a permit is sure to come), return
 * SLUICE_ETIMEDOUT without having taken anything.  A deadline already
 * passed still tries once, without sleeping.  Sleeps on CLOCK_MONOTONIC,
 * and never longer in total than the deadline was ahead at the call, so a
 * clock that stands still (a manual clock nobody advances) ends the wait
 * too.  Blocks: not for an event loop thread (use
 * sluice_limiter_reserve_at()).
 * Return: 1 (taken), SLUICE_ETIMEDOUT, or the algorithm's error.
 */
SLUICE_API int sluice_limiter_wait_until(sluice_limiter_t *l, uint64_t n, uint64_t deadline_ns,
                                         sluice_decision_t *d);

/*
 * sluice_limiter_wait - sluice_limiter_wait_until() with the deadline
 * @timeout_ns after the limiter's clock's reading now (saturating at the
 * end of the time base).
 */
SLUICE_API int sluice_limiter_wait(sluice_limiter_t *l, uint64_t n, uint64_t timeout_ns,
                                   sluice_decision_t *d);

/*
 * External limiters: a limiter kind whose state lives outside libsluice
 * (sluice/redis.h's sluice_redis_limiter_new() builds one), driven through
 * the same handle, so sluice_limiter_acquire() and a composite can use it.
 *
 * @acquire_at: required; the handle's acquire/_at/_key call it (the key is
 *   not passed), with the handle's clock's reading for the plain calls.
 * @refund, @available_at: NULL means SLUICE_ENOTSUP from the handle.
 * @free: NULL, or called by sluice_limiter_free() with @ctx.
 * Reserve, cancel and the setters return SLUICE_ENOTSUP; release is a
 * no-op returning 0.  The ops' own header states the guarantees, the
 * thread-safety and what the ops may block on.
 */
typedef struct sluice_limiter_ops {
	int (*acquire_at)(void *ctx, uint64_t n, uint64_t now, sluice_decision_t *d);
	int (*refund)(void *ctx, uint64_t n, const sluice_decision_t *admitted);
	int (*available_at)(void *ctx, uint64_t now, uint64_t *out);
	void (*free)(void *ctx);
} sluice_limiter_ops_t;

/*
 * sluice_limiter_new_external - a handle (SLUICE_ALGO_EXTERNAL) over @ops
 * and @ctx, both borrowed until sluice_limiter_free().  @clock: the handle's
 * clock (NULL: &sluice_clock_monotonic).
 * Return: 0 and *@out; SLUICE_EINVAL (NULL ops, acquire_at or out),
 * SLUICE_ENOMEM; *@out untouched on error.
 */
SLUICE_NODISCARD SLUICE_API int sluice_limiter_new_external(const sluice_limiter_ops_t *ops, void *ctx,
                                           const sluice_clock_t *clock, sluice_limiter_t **out);

#endif /* SLUICE_LIMITER_H */
