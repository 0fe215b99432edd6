/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/decision.h - the decision fills the algorithms share, as
 * static inline functions, for the library's own files and for a caller
 * that defines SLUICE_INLINE (common.h, INLINE).  Not an interface: the
 * names and layouts here change in any release.
 */
#ifndef SLUICE_STATIC_DECISION_H
#define SLUICE_STATIC_DECISION_H

#include "../decision.h"
#include "common.h"

/* private: fill @d for a request that can never pass (n > limit). */
static inline void sluice__decision_never(sluice_decision_t *d, uint64_t limit, uint64_t now)
{
	if (!d)
		return;
	d->allowed = 0;
	d->limit = limit;
	d->remaining = 0;
	d->retry_after_ns = SLUICE_NEVER;
	d->delay_ns = 0;
	d->reset_ns = 0;
	d->now_ns = now;
}

/*
 * private: the windowed decisions' fill, the one copy (fixed.h, window.h
 * and the keyed tables' FIXED and WINDOW decisions call it).  @counted of
 * @limit are counted (after an admission, or as a refusal found them) in
 * the window, or newest bucket, that starts at @start; every permit
 * counted now has left @window_ns after @start.  A reading before @start
 * is read as @start (time never runs backwards).  Callers keep
 * @now < @start + @window_ns (their reading's bucket is @start's or
 * older), so reset_ns is exact and never wraps.  A refusal's
 * retry_after_ns is reset_ns (a fixed window's end); the sliding window,
 * whose oldest buckets can leave sooner, writes its own after the call.
 */
static inline void sluice__decision_window(sluice_decision_t *d, int allowed, uint64_t limit,
                                           uint64_t counted, uint64_t start, uint64_t window_ns,
                                           uint64_t now)
{
	if (now < start)
		now = start;
	uint64_t left = window_ns - (now - start); /* no overflow near 2^64 */
	d->allowed = allowed;
	d->limit = limit;
	d->remaining = counted >= limit ? 0 : limit - counted;
	d->retry_after_ns = allowed ? 0 : left;
	d->delay_ns = 0;
	d->reset_ns = left;
	d->now_ns = now;
}

/*
 * private: the windowed fast paths' fill of an admission (fixed.h,
 * window.h), where the caller has already computed @remaining and @reset
 * from values its checks proved in range (the reading inside its window or
 * bucket, the count after the admission at most the limit), so the
 * general fill's clamps (sluice__decision_window) would be dead work on
 * the hottest path.
 */
static inline void sluice__decision_admitted(sluice_decision_t *d, uint64_t limit,
                                             uint64_t remaining, uint64_t reset, uint64_t now)
{
	d->allowed = 1;
	d->limit = limit;
	d->remaining = remaining;
	d->retry_after_ns = 0;
	d->delay_ns = 0;
	d->reset_ns = reset;
	d->now_ns = now;
}

#endif /* SLUICE_STATIC_DECISION_H */
