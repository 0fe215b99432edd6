/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/warmup.h - warm-up's clock-reading decisions, as static
 * inline functions, for the library's own files and for a caller that
 * defines SLUICE_INLINE (common.h, INLINE).  lib/outline.c exports the calls
 * sluice/warmup.h declares from these bodies.  Not an interface: the names
 * and layouts here change in any release.
 */
#ifndef SLUICE_STATIC_WARMUP_H
#define SLUICE_STATIC_WARMUP_H

#include "../warmup.h"
#include "clock.h"
#include "common.h"
#include "decision.h"

SLUICE_NODISCARD static inline int sluice__warmup_acquire(sluice_warmup_t *w, uint64_t n, sluice_decision_t *d)
{
	return sluice_warmup_acquire_at(w, n, sluice__clock_now(w->clock), d);
}

SLUICE_NODISCARD static inline int sluice__warmup_reserve(sluice_warmup_t *w, uint64_t n, uint64_t max_delay_ns,
                                        sluice_decision_t *d)
{
	return sluice_warmup_reserve_at(w, n, sluice__clock_now(w->clock), max_delay_ns, d);
}

/* SLUICE_INLINE: the calls above, inline (common.h, INLINE). */
#ifdef SLUICE_INLINE
#define sluice_warmup_acquire(...) sluice__warmup_acquire(__VA_ARGS__)
#define sluice_warmup_reserve(...) sluice__warmup_reserve(__VA_ARGS__)
#endif

#endif /* SLUICE_STATIC_WARMUP_H */
