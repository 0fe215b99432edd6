/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/log.h - the exact log's clock-reading acquire, as static
 * inline functions, for the library's own files and for a caller that
 * defines SLUICE_INLINE (common.h, INLINE).  lib/outline.c exports the calls
 * sluice/log.h declares from these bodies.  Not an interface: the names and
 * layouts here change in any release.
 */
#ifndef SLUICE_STATIC_LOG_H
#define SLUICE_STATIC_LOG_H

#include "../log.h"
#include "clock.h"
#include "common.h"
#include "decision.h"

SLUICE_NODISCARD static inline int sluice__log_acquire(sluice_log_t *lg, uint64_t n, sluice_decision_t *d)
{
	return sluice_log_acquire_at(lg, n, sluice__clock_now(lg->clock), d);
}

/* SLUICE_INLINE: the calls above, inline (common.h, INLINE). */
#ifdef SLUICE_INLINE
#define sluice_log_acquire(...) sluice__log_acquire(__VA_ARGS__)
#endif

#endif /* SLUICE_STATIC_LOG_H */
