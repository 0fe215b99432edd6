/*
 * sluice/limiter.h - one handle for every algorithm.
 *
 * sluice_limiter_new(&config) builds any limiter sluice offers behind an
 * opaque handle; sluice_limiter_acquire / _acquire_at / _release / _refund /
 * _wait then work on all of them alike.  The handle costs one indirect
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
#include "leaky.h"
#include "log.h"
#include "warmup.h"
#include "window.h"

typedef struct sluice_limiter_config {
	sluice_algo_t algo;
	union {
		sluice_composite_config_t composite;
#define SLUICE__ALGO_CONFIG(K, name) sluice_##name##_config_t name;
		SLUICE_ALGOS(SLUICE__ALGO_CONFIG)
#undef SLUICE__ALGO_CONFIG
	};
} sluice_limiter_config_t;

typedef struct sluice_limiter sluice_limiter_t;

/*
 * sluice_limiter_new - validate @cfg and allocate a limiter of its algorithm.
 * Return: 0 and *@out, or the algorithm's init error (SLUICE_EALGO for an
 * unknown algorithm, SLUICE_ENOMEM); *@out is untouched on error.
 */
SLUICE_API int sluice_limiter_new(const sluice_limiter_config_t *cfg, sluice_limiter_t **out);
/* sluice_limiter_free - free a limiter (NULL is fine). */
SLUICE_API void sluice_limiter_free(sluice_limiter_t *l);
SLUICE_API sluice_algo_t sluice_limiter_algo(const sluice_limiter_t *l);
SLUICE_API const sluice_clock_t *sluice_limiter_clock(const sluice_limiter_t *l);

/* sluice_limiter_acquire_at - the algorithm's acquire_at: 1, 0 or a negative error. */
SLUICE_API int sluice_limiter_acquire_at(sluice_limiter_t *l, uint64_t n, uint64_t now,
                                         sluice_decision_t *d);
/* sluice_limiter_acquire - the same, reading the limiter's clock. */
SLUICE_API int sluice_limiter_acquire(sluice_limiter_t *l, uint64_t n, sluice_decision_t *d);

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
 * sluice_limiter_wait - block until @n permits are taken, or fail at once.
 * @timeout_ns: the longest the caller will wait.
 * @d: NULL, or the final decision.
 *
 * Algorithms that can book a slot (GCRA, leaky shaper, warm-up) book it
 * and sleep until it comes, or, when the slot is further away than
 * @timeout_ns, book nothing and return SLUICE_ETIMEDOUT at once.  The
 * others are polled: sleep for the decision's retry_after_ns and try again;
 * when retry_after_ns says the wait would pass @timeout_ns (or there is no
 * time at which a permit is sure to come), return SLUICE_ETIMEDOUT without
 * having taken anything.  Sleeps on CLOCK_MONOTONIC.  Blocks: not for an
 * event loop thread.
 * Return: 1 (taken), SLUICE_ETIMEDOUT, or the algorithm's error.
 */
SLUICE_API int sluice_limiter_wait(sluice_limiter_t *l, uint64_t n, uint64_t timeout_ns,
                                   sluice_decision_t *d);

#endif /* SLUICE_LIMITER_H */
