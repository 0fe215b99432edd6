/* SPDX-License-Identifier: MIT */
/*
 * sluice/composite.h - all-or-nothing across 2..8 limiters.
 *
 * "1000 per second, and also at most 200 in any 100 ms": a composite asks
 * each of its limiters in order; if one refuses, the permits already taken
 * from the ones before it are given back (each limiter's refund), and
 * nothing is taken from the ones after it.
 *
 * GUARANTEE: an admission by the composite is an admission by every part,
 * so each part's own guarantee holds for the composite's traffic, whatever
 * else shares the parts.  A refusal takes nothing, except where a part
 * cannot give permits back exactly (its refund says SLUICE_ECANCEL, e.g.
 * a ring bucket sealed in between): then those permits stay counted in that
 * part, which can only refuse more later, never admit more; the composite
 * counts such events (sluice_composite_unreturned()).
 *
 * WORST CASE: while a refused request's permits are being given back, a
 * concurrent decision on a shared part can see them as taken and refuse:
 * a transient under-admission, never an over-admission.  retry_after_ns of
 * a refusal is the refusing part's: a later part, not asked, may refuse
 * again at that time (it is a lower bound, not a promise).
 *
 * DECISION: allowed: remaining = the smallest remaining of the parts,
 * reset_ns = the largest that is not SLUICE_NEVER (a concurrency limiter
 * has no reset time; it must not hide the others').  Refused: the refusing part's decision, with
 * limit = the smallest limit of the parts asked.  now_ns = the latest time
 * any part used.
 *
 * Implemented in lib/limiter.c with the handle (its parts are handles and
 * a handle can hold it: one module, no link cycle).
 * Parts are generic handles (sluice/limiter.h), borrowed: the composite
 * never frees them, and they must outlive it.  A part may be a keyed table
 * (SLUICE_ALGO_KEYED): its key is given per decision
 * (sluice_composite_acquire_key_at).  A part may not itself be a
 * composite (SLUICE_EALGO), nor be listed twice, nor two keyed handles
 * over one table (SLUICE_EDUPLICATE).
 * Memory: 80 bytes; no allocation per decision.
 */
#ifndef SLUICE_COMPOSITE_H
#define SLUICE_COMPOSITE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "decision.h"

#define SLUICE_COMPOSITE_MAX 8

struct sluice_limiter;

typedef struct sluice_composite_config {
	struct sluice_limiter *parts[SLUICE_COMPOSITE_MAX]; /* borrowed */
	unsigned count;                                      /* 2..8     */
} sluice_composite_config_t;

typedef struct sluice_composite {
	/* read-only after init */
	struct sluice_limiter *parts[SLUICE_COMPOSITE_MAX];
	unsigned count;
	/* private */
	_Atomic uint64_t unreturned; /* refunds a part could not make exactly */
} sluice_composite_t;

/*
 * sluice_composite_init - check @cfg and set up @c.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ECOUNT (count not 2..8, or a NULL
 * part), SLUICE_EALGO (a part is a composite), SLUICE_EDUPLICATE (the
 * same limiter listed twice: it would be charged n per listing).  @c is
 * untouched on error.
 */
SLUICE_NODISCARD SLUICE_API int sluice_composite_init(sluice_composite_t *c, const sluice_composite_config_t *cfg);
/* sluice_composite_config_check - what sluice_composite_init() returns for
 * @cfg (it reads the parts' handles, which must exist), writing nothing
 * (common.h, CONFIG CHECKS). */
SLUICE_NODISCARD SLUICE_API int sluice_composite_config_check(const sluice_composite_config_t *cfg);

/*
 * sluice_composite_acquire_at - take @n from every part at @now, or nothing.
 * Lock-free if every part is; no allocation.  Thread-safe.
 * Return: 1 admitted, 0 refused (the first refusal stops),
 * SLUICE_EINVAL (n = 0: no part is asked and @d is left as it was, as
 * every limiter leaves it for n = 0), or the first part's negative error
 * (permits taken before it are given back; @d is that part's decision,
 * e.g. retry_after_ns = SLUICE_NEVER for SLUICE_ETOOBIG).
 */
SLUICE_NODISCARD SLUICE_API int sluice_composite_acquire_at(sluice_composite_t *c, uint64_t n, uint64_t now,
                                           sluice_decision_t *d);

/*
 * sluice_composite_release - end @n in-flight requests in every part that
 * counts work in progress (sluice_limiter_release on each; a no-op on the others).
 * Return: 0, or the first part's error (the others are still released).
 */
SLUICE_API int sluice_composite_release(sluice_composite_t *c, uint64_t n);

/*
 * sluice_composite_acquire_each_at - as acquire_at, and also fill @each
 * with every part's own decision (each[i] for part i; parts after a
 * refusal are not asked and their entries are left as they were; with
 * n = 0 no part is asked and @each is left as it was).  For a
 * RateLimit field per policy, or to see which part refused.
 */
SLUICE_NODISCARD SLUICE_API int sluice_composite_acquire_each_at(sluice_composite_t *c, uint64_t n, uint64_t now,
                                                sluice_decision_t *d,
                                                sluice_decision_t each[SLUICE_COMPOSITE_MAX]);

/*
 * sluice_composite_acquire_key_at - acquire_each_at for @key: each keyed
 * part (a SLUICE_ALGO_KEYED handle) decides for @key, the other parts
 * ignore it, and when a later part refuses, a keyed part gives back what it
 * took for @key (sluice_keyed_refund).  @each: NULL, or every part's own
 * decision as in acquire_each_at.
 * Return: as acquire_at.
 */
SLUICE_NODISCARD SLUICE_API int sluice_composite_acquire_key_at(sluice_composite_t *c, const void *key,
                                               size_t keylen, uint64_t n, uint64_t now,
                                               sluice_decision_t *d,
                                               sluice_decision_t each[SLUICE_COMPOSITE_MAX]);
/* sluice_composite_release_key - release for @key in every part. */
SLUICE_API int sluice_composite_release_key(sluice_composite_t *c, const void *key, size_t keylen,
                                            uint64_t n);

/*
 * sluice_composite_available_at - *@out = the largest n an acquire at @now
 * would admit: the smallest of the parts' sluice_limiter_available_at()
 * (each part a snapshot, read one after the other).  Read-only.
 * Return: 0, SLUICE_EINVAL (NULL), or the first part's error.
 */
SLUICE_API int sluice_composite_available_at(sluice_composite_t *c, uint64_t now, uint64_t *out);

/* sluice_composite_unreturned - how many refunds a part could not make
 * exactly (their permits stayed counted).  Relaxed read of a counter. */
SLUICE_API uint64_t sluice_composite_unreturned(const sluice_composite_t *c);

#endif /* SLUICE_COMPOSITE_H */
