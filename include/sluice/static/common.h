/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/common.h - what every static/ header shares: the release
 * pin and the epoch-lap test.  The static/ headers hold the bodies of the
 * decision paths as static inline functions, for the library itself and for
 * a caller that defines SLUICE_INLINE (common.h, INLINE).  Not an
 * interface: the names and layouts here change in any release.
 */
#ifndef SLUICE_STATIC_COMMON_H
#define SLUICE_STATIC_COMMON_H

#include "../common.h"

/*
 * The release pin.  libsluice.so exports sluice_inline_release, and every
 * function a static/ body calls, under the version node
 * SLUICE_INLINE_<release> only (lib/sluice.map.in), so a program compiled
 * with SLUICE_INLINE against one release refuses to start against another
 * ("version `SLUICE_INLINE_1.0.0' not found") instead of running with
 * layouts it was not compiled for.  Every file of such a program refers to
 * the pin, whether or not its bodies call out.  The library's own files
 * (SLUICE_BUILDING) need no pin: they are the release.
 */
#ifndef SLUICE_BUILDING
SLUICE_API extern const int sluice_inline_release;
__attribute__((used)) static const int *const sluice__inline_pin = &sluice_inline_release;
#endif

/*
 * private: after a CAS on a word tagged with the low 32 bits of epoch h,
 * given a 64-bit head loaded after it: did the CAS hit epoch h's word?  A
 * word of epoch h + k * 2^32 (k >= 1) exists only once head got there, so a
 * head fewer than 2^32 epochs past h proves it (window.h, fixed.h).
 */
static inline int sluice__same_lap(uint64_t head_after, uint64_t h)
{
	return head_after - h < (1ULL << 32);
}

#endif /* SLUICE_STATIC_COMMON_H */
