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

/*
 * What a validator does with a clock's step: an init records it (the
 * PERIOD FLOOR of clock.h: a later ticker start cannot coarsen the clock
 * below it), a config check only asks (it leaves nothing behind).  Each
 * algorithm has one validator, called by its init with SLUICE__RECORD and
 * by its sluice_<algo>_config_check() with SLUICE__ASK, so the two answer
 * the same for the same config (issue 28 item 2).
 */
typedef enum sluice__step_use { SLUICE__ASK = 0, SLUICE__RECORD = 1 } sluice__step_use_t;

/* sluice__step - @c must step at least as finely as @step_ns: 0 or
 * SLUICE_ERESOLUTION (SLUICE_ECLOCK for an unknown kind), recorded or not
 * as @use says. */
static inline int sluice__step(const sluice_clock_t *c, uint64_t step_ns, sluice__step_use_t use)
{
	return use == SLUICE__RECORD ? sluice__clock_require_step(c, step_ns)
	                             : sluice__clock_check_step(c, step_ns);
}

/* sluice__init_clock - a validator's clock: sluice__config_clock(@c), which
 * must step at least as finely as @step_ns, the narrowest interval the
 * limiter tells apart (0: it reads no time to decide, any clock does).
 * Return 0 with *@out set, SLUICE_ECLOCK for a kind sluice does not know,
 * or SLUICE_ERESOLUTION; the step is recorded or not as @use says. */
static inline int sluice__init_clock(const sluice_clock_t *c, uint64_t step_ns,
                                     sluice__step_use_t use, const sluice_clock_t **out)
{
	const sluice_clock_t *clock = sluice__config_clock(c);
	if (!clock)
		return SLUICE_ECLOCK;
	int rc = step_ns ? sluice__step(clock, step_ns, use) : 0;
	if (rc == 0)
		*out = clock;
	return rc;
}

#endif /* SLUICE_CLOCK_INTERNAL_H */
