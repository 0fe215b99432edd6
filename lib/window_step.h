/*
 * window_step.h - the sliding window's validation, once (never installed):
 * lib/window.c's init and the keyed tables (lib/keyed_table.c) call it.
 */
#ifndef SLUICE_WINDOW_STEP_H
#define SLUICE_WINDOW_STEP_H

#include <stdint.h>

#include "sluice/error.h"
#include "sluice/window.h"

/* sluice__window_validate - L in 1..SLUICE_WINDOW_LIMIT_MAX (SLUICE_ELIMIT),
 * N in 1..SLUICE_WINDOW_BUCKETS_MAX (SLUICE_EBUCKETS), W > 0 and a multiple
 * of N (SLUICE_EWINDOW).  Mode, lease and the clock's resolution are the
 * caller's checks. */
static inline int sluice__window_validate(uint64_t limit, uint64_t buckets, uint64_t window_ns)
{
	if (limit < 1 || limit > SLUICE_WINDOW_LIMIT_MAX)
		return SLUICE_ELIMIT;
	if (buckets < 1 || buckets > SLUICE_WINDOW_BUCKETS_MAX)
		return SLUICE_EBUCKETS;
	if (window_ns == 0 || window_ns % buckets != 0)
		return SLUICE_EWINDOW;
	return 0;
}

#endif /* SLUICE_WINDOW_STEP_H */
