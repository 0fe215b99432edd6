/* SPDX-License-Identifier: MIT */
/*
 * fixed_step.h - the fixed window's validation, once (never installed):
 * lib/fixed.c's init and the keyed tables (lib/keyed_table.c) call it.
 */
#ifndef SLUICE_FIXED_STEP_H
#define SLUICE_FIXED_STEP_H

#include <stdint.h>

#include "sluice/error.h"
#include "sluice/fixed.h"

/* sluice__fixed_limit_ok - L in 1..SLUICE_FIXED_LIMIT_MAX (SLUICE_ELIMIT): init's
 * check and set_limit's, once. */
static inline int sluice__fixed_limit_ok(uint64_t limit)
{
	return limit < 1 || limit > SLUICE_FIXED_LIMIT_MAX ? SLUICE_ELIMIT : 0;
}

/* sluice__fixed_validate - L in 1..SLUICE_FIXED_LIMIT_MAX (SLUICE_ELIMIT),
 * W > 0 (SLUICE_EWINDOW).  The clock's resolution is the caller's check. */
static inline int sluice__fixed_validate(uint64_t limit, uint64_t window_ns)
{
	if (sluice__fixed_limit_ok(limit) != 0)
		return SLUICE_ELIMIT;
	if (window_ns == 0)
		return SLUICE_EWINDOW;
	return 0;
}

#endif /* SLUICE_FIXED_STEP_H */
