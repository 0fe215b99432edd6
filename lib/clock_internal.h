/* SPDX-License-Identifier: MIT */
/*
 * clock_internal.h - the clock a limiter's config names (never installed):
 * one place decides the default clock and which kinds an init accepts.
 */
#ifndef SLUICE_CLOCK_INTERNAL_H
#define SLUICE_CLOCK_INTERNAL_H

#include "sluice/clock.h"
#include "sluice/error.h"

/* sluice__config_clock - @c, or the cached clock (the default, clock.h
 * says why) when NULL; NULL for a kind sluice does not know, which every
 * init answers with SLUICE_ECLOCK. */
static inline const sluice_clock_t *sluice__config_clock(const sluice_clock_t *c)
{
	if (!c)
		return &sluice_clock_cached;
	return c->kind > SLUICE_CLOCK_MANUAL ? NULL : c;
}

/* sluice__init_clock - an init's clock: sluice__config_clock(@c), which
 * must step at least as finely as @step_ns, the narrowest interval the
 * limiter tells apart (0: it reads no time to decide, any clock does).
 * Return 0 with *@out set, SLUICE_ECLOCK for a kind sluice does not know,
 * or SLUICE_ERESOLUTION; sluice__clock_require_step() records the step, so
 * a later ticker start cannot coarsen the clock below it. */
static inline int sluice__init_clock(const sluice_clock_t *c, uint64_t step_ns,
                                     const sluice_clock_t **out)
{
	const sluice_clock_t *clock = sluice__config_clock(c);
	if (!clock)
		return SLUICE_ECLOCK;
	int rc = step_ns ? sluice__clock_require_step(clock, step_ns) : 0;
	if (rc == 0)
		*out = clock;
	return rc;
}

#endif /* SLUICE_CLOCK_INTERNAL_H */
