/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/decay.h - decay's clock-reading acquire, as static inline
 * functions, for the library's own files and for a caller that defines
 * SLUICE_INLINE (common.h, INLINE).  lib/outline.c exports the calls
 * sluice/decay.h declares from these bodies.  Not an interface: the names
 * and layouts here change in any release.
 */
#ifndef SLUICE_STATIC_DECAY_H
#define SLUICE_STATIC_DECAY_H

#include "../decay.h"
#include "clock.h"
#include "common.h"
#include "decision.h"

SLUICE_NODISCARD static inline int sluice__decay_acquire(sluice_decay_t *x, uint64_t n, sluice_decision_t *d)
{
	return sluice_decay_acquire_at(x, n, sluice__clock_now(x->clock), d);
}

/* SLUICE_INLINE: the calls above, inline (common.h, INLINE). */
#ifdef SLUICE_INLINE
#define sluice_decay_acquire(...) sluice__decay_acquire(__VA_ARGS__)
#endif

#endif /* SLUICE_STATIC_DECAY_H */
