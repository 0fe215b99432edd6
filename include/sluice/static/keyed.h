/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/keyed.h - the keyed table's clock-reading acquire, as
 * static inline functions, for the library's own files and for a caller
 * that defines SLUICE_INLINE (common.h, INLINE).  lib/outline.c exports the
 * calls sluice/keyed.h declares from these bodies.  Not an interface: the
 * names and layouts here change in any release.
 */
#ifndef SLUICE_STATIC_KEYED_H
#define SLUICE_STATIC_KEYED_H

#include "../keyed.h"
#include "clock.h"
#include "common.h"
#include "decision.h"
#include "stripe.h"

SLUICE_NODISCARD static inline int sluice__keyed_acquire(sluice_keyed_t *k, const void *key, size_t keylen,
                                       uint64_t n, sluice_decision_t *d)
{
	return sluice_keyed_acquire_at(k, key, keylen, n, sluice__clock_now(k->clock), d);
}

/* SLUICE_INLINE: the calls above, inline (common.h, INLINE). */
#ifdef SLUICE_INLINE
#define sluice_keyed_acquire(...) sluice__keyed_acquire(__VA_ARGS__)
#endif

#endif /* SLUICE_STATIC_KEYED_H */
