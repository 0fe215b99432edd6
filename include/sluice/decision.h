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

#ifdef SLUICE_INLINE
#include "static/decision.h"
#endif

#endif /* SLUICE_DECISION_H */
