/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/clock.h - the clock reads, as static inline functions, for
 * the library's own files and for a caller that defines SLUICE_INLINE
 * (common.h, INLINE).  lib/outline.c exports the calls sluice/clock.h
 * declares from these bodies.  Not an interface: the names and layouts here
 * change in any release.
 */
#ifndef SLUICE_STATIC_CLOCK_H
#define SLUICE_STATIC_CLOCK_H

#include "../clock.h"
#include "common.h"

/* private: the ticker's last reading; 0 while no ticker runs in this
 * process (stopped, never started, or the child of a fork). */
SLUICE_API extern _Atomic uint64_t sluice_inline_cached_now;

/* private: the same reads, out of line, for callers whose <time.h> hides
 * the POSIX clocks (strict -std=c11 without feature macros). */
SLUICE_API uint64_t sluice_inline_monotonic_ns(void);

SLUICE_API uint64_t sluice_inline_coarse_ns(void);

static inline uint64_t sluice__timespec_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ULL + (uint64_t)ts->tv_nsec;
}

static inline uint64_t sluice__clock_monotonic_ns(void)
{
#ifdef CLOCK_MONOTONIC
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return sluice__timespec_ns(&ts);
#else
	return sluice_inline_monotonic_ns();
#endif
}

static inline uint64_t sluice__clock_coarse_ns(void)
{
#ifdef CLOCK_MONOTONIC_COARSE
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return sluice__timespec_ns(&ts);
#else
	return sluice_inline_coarse_ns();
#endif
}

static inline uint64_t sluice__clock_cached_ns(void)
{
	/* Relaxed: the word is a self-contained reading; nothing else is
	 * published with it. */
	uint64_t v = atomic_load_explicit(&sluice_inline_cached_now, memory_order_relaxed);
	if (SLUICE_UNLIKELY(v == 0))
		v = sluice__clock_monotonic_ns();
	return v;
}

static inline uint64_t sluice__clock_now(const sluice_clock_t *c)
{
	switch (c->kind) {
	case SLUICE_CLOCK_CACHED:
		return sluice__clock_cached_ns();
	case SLUICE_CLOCK_COARSE:
		return sluice__clock_coarse_ns();
	case SLUICE_CLOCK_MANUAL:
		return atomic_load_explicit(&((sluice_clock_t *)c)->manual_ns,
		                            memory_order_relaxed);
	case SLUICE_CLOCK_MONOTONIC:
	default:
		return sluice__clock_monotonic_ns();
	}
}

static inline void sluice__clock_manual_set(sluice_clock_t *c, uint64_t ns)
{
	atomic_store_explicit(&c->manual_ns, ns, memory_order_relaxed);
}

static inline void sluice__clock_manual_advance(sluice_clock_t *c, uint64_t delta_ns)
{
	atomic_fetch_add_explicit(&c->manual_ns, delta_ns, memory_order_relaxed);
}

/* SLUICE_INLINE: the calls above, inline (common.h, INLINE). */
#ifdef SLUICE_INLINE
#define sluice_clock_monotonic_ns(...) sluice__clock_monotonic_ns(__VA_ARGS__)
#define sluice_clock_coarse_ns(...) sluice__clock_coarse_ns(__VA_ARGS__)
#define sluice_clock_cached_ns(...) sluice__clock_cached_ns(__VA_ARGS__)
#define sluice_clock_now(...) sluice__clock_now(__VA_ARGS__)
#define sluice_clock_manual_set(...) sluice__clock_manual_set(__VA_ARGS__)
#define sluice_clock_manual_advance(...) sluice__clock_manual_advance(__VA_ARGS__)
#endif

#endif /* SLUICE_STATIC_CLOCK_H */
