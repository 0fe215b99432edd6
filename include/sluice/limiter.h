/*
 * sluice/limiter.h - one handle for every algorithm.
 *
 * sluice_limiter_new(&config) builds any limiter sluice offers behind an
 * opaque handle; sluice_acquire / sluice_acquire_at / sluice_release /
 * sluice_refund_at / sluice_wait then work on all of them alike.  The handle
 * costs one indirect switch per decision over the algorithm's own inline
 * fast path; callers who want the last nanoseconds use the algorithm's type
 * directly (sluice/fixed.h, sluice/window.h, ...), which stays public.
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

/*
 * Every kind but the composite, as X(KIND, name): the kind's config is
 * `sluice_<name>_config_t`, its functions `sluice_<name>_init`, ...
 * (docs/conventions.md).  One table, so adding an algorithm is one line.
 */
#define SLUICE_LIMITER_KINDS(X) \
	X(FIXED, fixed)         \
	X(WINDOW, window)       \
	X(GCRA, gcra)           \
	X(LEAKY, leaky)         \
	X(LOG, log)             \
	X(WARMUP, warmup)       \
	X(DECAY, decay)         \
	X(INFLIGHT, inflight)

typedef enum sluice_kind {
	SLUICE_KIND_COMPOSITE = 1,
#define SLUICE__KIND_ENUM(K, name) SLUICE_KIND_##K,
	SLUICE_LIMITER_KINDS(SLUICE__KIND_ENUM)
#undef SLUICE__KIND_ENUM
} sluice_kind_t;

typedef struct sluice_limiter_config {
	sluice_kind_t kind;
	union {
		sluice_composite_config_t composite;
#define SLUICE__KIND_CONFIG(K, name) sluice_##name##_config_t name;
		SLUICE_LIMITER_KINDS(SLUICE__KIND_CONFIG)
#undef SLUICE__KIND_CONFIG
	};
} sluice_limiter_config_t;

typedef struct sluice_limiter sluice_limiter_t;

/*
 * sluice_limiter_new - validate @cfg and allocate a limiter of its kind.
 * Return: 0 and *@out, or the algorithm's init error (-SLUICE_EKIND for an
 * unknown kind, -SLUICE_ENOMEM); *@out is untouched on error.
 */
SLUICE_API int sluice_limiter_new(const sluice_limiter_config_t *cfg, sluice_limiter_t **out);
/* sluice_limiter_free - free a limiter (NULL is fine). */
SLUICE_API void sluice_limiter_free(sluice_limiter_t *l);
SLUICE_API sluice_kind_t sluice_limiter_kind(const sluice_limiter_t *l);
SLUICE_API const sluice_clock_t *sluice_limiter_clock(const sluice_limiter_t *l);

/* sluice_acquire_at - the algorithm's acquire_at: 1, 0 or a negative error. */
SLUICE_API int sluice_acquire_at(sluice_limiter_t *l, uint64_t n, uint64_t now,
                                 sluice_decision_t *d);
/* sluice_acquire - the same, reading the limiter's clock. */
SLUICE_API int sluice_acquire(sluice_limiter_t *l, uint64_t n, sluice_decision_t *d);

/*
 * sluice_release - end @n in-flight requests (concurrency limiters); a
 * no-op returning 0 for every algorithm that counts arrivals, not work in
 * progress.  A composite passes it to each of its parts.
 */
SLUICE_API int sluice_release(sluice_limiter_t *l, uint64_t n);

/* sluice_refund_at - the algorithm's refund_at (see its header). */
SLUICE_API int sluice_refund_at(sluice_limiter_t *l, uint64_t n,
                                const sluice_decision_t *admitted);

/*
 * sluice_wait - block until @n permits are taken, or fail at once.
 * @timeout_ns: the longest the caller will wait.
 * @d: NULL, or the final decision.
 *
 * Algorithms that can book a slot (GCRA, leaky shaper, warm-up) book it
 * and sleep until it comes, or, when the slot is further away than
 * @timeout_ns, book nothing and return -SLUICE_ETIMEDOUT at once.  The
 * others are polled: sleep for the decision's retry_after_ns and try again;
 * when retry_after_ns says the wait would pass @timeout_ns (or there is no
 * time at which a permit is sure to come), return -SLUICE_ETIMEDOUT without
 * having taken anything.  Sleeps on CLOCK_MONOTONIC.  Blocks: not for an
 * event loop thread.
 * Return: 1 (taken), -SLUICE_ETIMEDOUT, or the algorithm's error.
 */
SLUICE_API int sluice_wait(sluice_limiter_t *l, uint64_t n, uint64_t timeout_ns,
                           sluice_decision_t *d);

#endif /* SLUICE_LIMITER_H */
