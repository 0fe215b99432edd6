/* SPDX-License-Identifier: MIT */
/*
 * inflight_step.h - the in-flight limit's validation, once (never
 * installed): lib/inflight.c's init and the keyed tables call it.
 */
#ifndef SLUICE_INFLIGHT_STEP_H
#define SLUICE_INFLIGHT_STEP_H

#include <stdint.h>

#include "sluice/error.h"
#include "sluice/inflight.h"

/* sluice__inflight_limit_ok - L in 1..SLUICE_INFLIGHT_LIMIT_MAX (SLUICE_ELIMIT): init's
 * check and set_limit's, once. */
static inline int sluice__inflight_limit_ok(uint64_t limit)
{
	return limit < 1 || limit > SLUICE_INFLIGHT_LIMIT_MAX ? SLUICE_ELIMIT : 0;
}

/* sluice__inflight_validate - K in 1..SLUICE_INFLIGHT_LIMIT_MAX
 * (SLUICE_ELIMIT). */
static inline int sluice__inflight_validate(uint64_t limit)
{
	return sluice__inflight_limit_ok(limit);
}

#endif /* SLUICE_INFLIGHT_STEP_H */
