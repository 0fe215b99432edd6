/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/leaky.h - the leaky shaper's decisions, as static inline
 * functions, for the library's own files and for a caller that defines
 * SLUICE_INLINE (common.h, INLINE).  lib/outline.c exports the calls
 * sluice/leaky.h declares from these bodies.  Not an interface: the names
 * and layouts here change in any release.
 */
#ifndef SLUICE_STATIC_LEAKY_H
#define SLUICE_STATIC_LEAKY_H

#include "../leaky.h"
#include "common.h"
#include "decision.h"
#include "gcra.h"

SLUICE_NODISCARD static inline int sluice__leaky_acquire_at(sluice_leaky_t *l, uint64_t n, uint64_t now,
                                          sluice_decision_t *d)
{
	return sluice__gcra_acquire_at(&l->gcra, n, now, d);
}

SLUICE_NODISCARD static inline int sluice__leaky_acquire(sluice_leaky_t *l, uint64_t n, sluice_decision_t *d)
{
	return sluice__gcra_acquire(&l->gcra, n, d);
}

SLUICE_NODISCARD static inline int sluice__leaky_reserve_at(sluice_leaky_t *l, uint64_t n, uint64_t now,
                                          uint64_t max_delay_ns, sluice_decision_t *d)
{
	uint64_t limit = max_delay_ns < l->max_delay_ns ? max_delay_ns : l->max_delay_ns;
	return sluice__gcra_reserve_at(&l->gcra, n, now, limit, d);
}

SLUICE_NODISCARD static inline int sluice__leaky_reserve(sluice_leaky_t *l, uint64_t n, uint64_t max_delay_ns,
                                       sluice_decision_t *d)
{
	return sluice__leaky_reserve_at(l, n, sluice__clock_now(l->gcra.clock), max_delay_ns, d);
}

static inline uint64_t sluice__leaky_interval_ns(const sluice_leaky_t *l)
{
	return sluice__gcra_interval_ns(&l->gcra);
}

/* SLUICE_INLINE: the calls above, inline (common.h, INLINE). */
#ifdef SLUICE_INLINE
#define sluice_leaky_acquire_at(...) sluice__leaky_acquire_at(__VA_ARGS__)
#define sluice_leaky_acquire(...) sluice__leaky_acquire(__VA_ARGS__)
#define sluice_leaky_reserve_at(...) sluice__leaky_reserve_at(__VA_ARGS__)
#define sluice_leaky_reserve(...) sluice__leaky_reserve(__VA_ARGS__)
#define sluice_leaky_interval_ns(...) sluice__leaky_interval_ns(__VA_ARGS__)
#endif

#endif /* SLUICE_STATIC_LEAKY_H */
