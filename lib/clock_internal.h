/*
 * clock_internal.h - the clock a limiter's config names (never installed):
 * one place decides the default clock and which kinds an init accepts.
 */
#ifndef SLUICE_CLOCK_INTERNAL_H
#define SLUICE_CLOCK_INTERNAL_H

#include "sluice/clock.h"

/* sluice__config_clock - @c, or the cached clock (the default, clock.h
 * says why) when NULL; NULL for a kind sluice does not know, which every
 * init answers with SLUICE_ECLOCK. */
static inline const sluice_clock_t *sluice__config_clock(const sluice_clock_t *c)
{
	if (!c)
		return &sluice_clock_cached;
	return c->kind > SLUICE_CLOCK_MANUAL ? NULL : c;
}

#endif /* SLUICE_CLOCK_INTERNAL_H */
