/* SPDX-License-Identifier: MIT */
/*
 * sluice/decision.h - the one decision shape every algorithm fills.
 *
 * Every acquire function returns 1 (allowed), 0 (refused) or a negative
 * error, and, when given a non-NULL decision pointer, fills it.  Passing NULL
 * skips the bookkeeping for callers that only want the yes/no.
 */
#ifndef SLUICE_DECISION_H
#define SLUICE_DECISION_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"

/* "Never": retry_after_ns of a request that can never pass (n > limit). */
#define SLUICE_NEVER UINT64_MAX

typedef struct sluice_decision {
	bool allowed;            /* the n permits were taken                  */
	uint64_t limit;          /* the configured limit (permits per window) */
	uint64_t remaining;      /* permits left after this decision          */
	uint64_t retry_after_ns; /* refused: ns from now until the same request
	                          * could first pass, or SLUICE_NEVER.
	                          * Admitted: always 0.                     */
	uint64_t reset_ns;       /* ns from now until every permit counted now
	                          * has left the window (an upper bound)      */
	uint64_t now_ns;         /* the limiter time the decision was taken at.
	                          * Windowed limiters: the reading, or their
	                          * newest bucket/time when the reading was
	                          * older (time never runs backwards).  GCRA,
	                          * leaky and the concurrency limiter: the
	                          * reading as given (an old one only finds
	                          * less room; one older than a live change
	                          * is judged at the change: gcra.h, READINGS
	                          * ACROSS A CHANGE).  Warm-up: the reading,
	                          * raised to its anchor when older.
	                          * Guarantees are stated on this timeline;
	                          * the relative fields are measured from it. */
	uint64_t delay_ns;       /* admitted by a booking (reserve): ns from
	                          * now until the booked slot may be used
	                          * (0: at once).  Otherwise always 0.  An
	                          * admission's start, the time guarantees
	                          * count it at, is now_ns + delay_ns (an
	                          * acquire: now_ns).                        */
} sluice_decision_t;

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

#endif /* SLUICE_DECISION_H */
