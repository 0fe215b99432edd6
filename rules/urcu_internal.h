/* SPDX-License-Identifier: MIT */
/*
 * rules/urcu_internal.h - how the engine's two halves (engine.c, the read
 * side; reload.c, the loader) include liburcu-bp, and the ThreadSanitizer
 * annotations on the grace period.  Include it first, before any system
 * header: _LGPL_SOURCE must be defined before urcu-bp.h is first seen.
 * Never installed.
 */
#ifndef SLUICE_RULES_URCU_INTERNAL_H
#define SLUICE_RULES_URCU_INTERNAL_H

/* The read side inlined (liburcu's _LGPL_SOURCE), except under UBSan:
 * liburcu-bp 0.13 places each reader at offset 32 of a registry chunk
 * (after the chunk's header) while its type says 128-byte alignment, so
 * every inlined read lock is a misaligned member access to UBSan.  The
 * out-of-line calls do the same thing in the (uninstrumented) library. */
#ifndef SLUICE_URCU_OUT_OF_LINE
#define _LGPL_SOURCE
#endif

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <urcu-bp.h>
#pragma GCC diagnostic pop

/* TSan does not see urcu-bp's grace period (its reader registry is in the
 * uninstrumented library), so every read section ends with a release on
 * sluice__engine_gp (engine.c read_end) and every grace period the loader
 * waits for is followed by an acquire on it (reload.c): together they tell
 * TSan what synchronize_rcu guarantees. */
#ifdef __SANITIZE_THREAD__
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define TSAN_ACQUIRE(p) __tsan_acquire(p)
#define TSAN_RELEASE(p) __tsan_release(p)
#else
#define TSAN_ACQUIRE(p) ((void)0)
#define TSAN_RELEASE(p) ((void)0)
#endif

/* The one address every read section releases and every grace period
 * acquires (engine.c DESIGN). */
extern int sluice__engine_gp;

#endif
