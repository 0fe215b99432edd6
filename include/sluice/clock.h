/*
 * sluice/clock.h - nanosecond time sources for limiters.
 *
 * Four sources, all on the CLOCK_MONOTONIC time base (ns since boot), so a
 * limiter may be switched between them and NTP steps of the wall clock never
 * reach a limiter:
 *
 *   SLUICE_CLOCK_MONOTONIC  clock_gettime(CLOCK_MONOTONIC): 1 ns resolution,
 *                           28 ns a read here (vDSO, kvm-clock).
 *   SLUICE_CLOCK_COARSE     clock_gettime(CLOCK_MONOTONIC_COARSE): the
 *                           kernel's last tick (4 ms on a HZ=250 kernel),
 *                           about 6 ns a read.
 *   SLUICE_CLOCK_CACHED     one relaxed load of a word that a background
 *                           ticker thread refreshes from CLOCK_MONOTONIC
 *                           every period (default SLUICE_CACHED_PERIOD_NS).
 *                           About 0.5 ns a read.  A reading lags real time by
 *                           up to one period (plus scheduling delay).  While
 *                           the ticker is not running a read falls back to
 *                           CLOCK_MONOTONIC, so a forgotten start costs
 *                           speed, never correctness (a frozen clock would
 *                           stop every window).  Across a start, a reader
 *                           may see a fallback reading and then a slightly
 *                           older cached one: limiters hold time at their
 *                           newest bucket, so this cannot reopen anything.
 *   SLUICE_CLOCK_MANUAL     a value the caller sets and advances: tests and
 *                           simulation.  It may be set backwards on purpose.
 *
 * Limiters never let time run backwards: each limiter remembers the newest
 * bucket (epoch) it has opened, and a reading that falls before it is
 * treated as a reading inside that newest bucket.  So a manual clock set back
 * by seconds, or two threads whose readings interleave out of order, can
 * neither reopen an old window nor mint permits.
 *
 * Every decision function has an _at(now_ns) variant that takes the time
 * from the caller (who may already hold a reading); the plain variant reads
 * the limiter's configured clock with sluice_clock_now().
 */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "common.h"

/*
 * Default ticker period: 1 ms.  Measured on a 2-core KVM guest (EPYC) with
 * bench/bench_clock (`meson test -C build --benchmark clock`): the ticker
 * thread costs about 1.3% of one core at 1 ms, 3% at 500 us, 11% at 200 us
 * and 16% at 100 us (each wake-up costs 10-20 us of CPU in a VM), while at
 * 1 ms the reading lags CLOCK_MONOTONIC by 0.48 ms in the median and about
 * 1.2 ms at worst on a quiet machine.  That is 100x finer than the 100 ms
 * buckets we expect (windows of 1 s and up in 10-100 buckets) and 4x finer
 * than the coarse clock.  On a loaded machine the worst lag can reach tens
 * of ms whatever the period (the ticker is not scheduled), which only makes
 * a decision use a slightly older time: never an extra admission.
 * Callers with narrower buckets start the ticker with a shorter period.
 */
#define SLUICE_CACHED_PERIOD_NS 1000000ULL
#define SLUICE_CACHED_PERIOD_MIN_NS 1000ULL       /* 1 us */
#define SLUICE_CACHED_PERIOD_MAX_NS 1000000000ULL /* 1 s */

typedef enum sluice_clock_kind {
	SLUICE_CLOCK_MONOTONIC = 0,
	SLUICE_CLOCK_COARSE = 1,
	SLUICE_CLOCK_CACHED = 2,
	SLUICE_CLOCK_MANUAL = 3,
} sluice_clock_kind_t;

typedef struct sluice_clock {
	/* read-only after init */
	sluice_clock_kind_t kind;
	/* private: the manual clock's reading */
	_Atomic uint64_t manual_ns;
} sluice_clock_t;

/* The three shared system clocks.  Pass their address in a limiter's
 * configuration; never write to them. */
SLUICE_API extern sluice_clock_t sluice_clock_monotonic;
SLUICE_API extern sluice_clock_t sluice_clock_coarse;
SLUICE_API extern sluice_clock_t sluice_clock_cached;

/* private: the ticker's last reading, 0 while the ticker is stopped. */
SLUICE_API extern _Atomic uint64_t sluice__cached_now;

static inline uint64_t sluice__timespec_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ULL + (uint64_t)ts->tv_nsec;
}

/* private: the same reads, out of line, for callers whose <time.h> hides
 * the POSIX clocks (strict -std=c11 without feature macros). */
SLUICE_API uint64_t sluice__monotonic_ns(void);
SLUICE_API uint64_t sluice__coarse_ns(void);

/* sluice_clock_monotonic_ns - CLOCK_MONOTONIC in ns.  Thread-safe. */
static inline uint64_t sluice_clock_monotonic_ns(void)
{
#ifdef CLOCK_MONOTONIC
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return sluice__timespec_ns(&ts);
#else
	return sluice__monotonic_ns();
#endif
}

/* sluice_clock_coarse_ns - CLOCK_MONOTONIC_COARSE in ns.  Thread-safe. */
static inline uint64_t sluice_clock_coarse_ns(void)
{
#ifdef CLOCK_MONOTONIC_COARSE
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return sluice__timespec_ns(&ts);
#else
	return sluice__coarse_ns();
#endif
}

static inline uint64_t sluice_clock_cached_ns(void)
{
	/* Relaxed: the word is a self-contained reading; nothing else is
	 * published with it. */
	uint64_t v = atomic_load_explicit(&sluice__cached_now, memory_order_relaxed);
	if (SLUICE_UNLIKELY(v == 0))
		v = sluice_clock_monotonic_ns();
	return v;
}

/*
 * sluice_clock_now - read a clock.
 * @c: any clock.  Thread-safe, lock-free, no allocation.
 * Return: ns on the CLOCK_MONOTONIC time base (manual: the set value).
 */
static inline uint64_t sluice_clock_now(const sluice_clock_t *c)
{
	switch (c->kind) {
	case SLUICE_CLOCK_CACHED:
		return sluice_clock_cached_ns();
	case SLUICE_CLOCK_COARSE:
		return sluice_clock_coarse_ns();
	case SLUICE_CLOCK_MANUAL:
		return atomic_load_explicit(&((sluice_clock_t *)c)->manual_ns,
		                            memory_order_relaxed);
	case SLUICE_CLOCK_MONOTONIC:
	default:
		return sluice_clock_monotonic_ns();
	}
}

/*
 * sluice_clock_resolution_ns - the finest step the clock can show.
 * Monotonic: clock_getres (1 ns); coarse: clock_getres (the kernel tick);
 * cached: the ticker's configured period, also while it is stopped (limiters
 * validate against the clock they will have once it runs); manual: 1 ns.
 * Limiters refuse buckets narrower than this (-SLUICE_ERESOLUTION).
 */
SLUICE_API uint64_t sluice_clock_resolution_ns(const sluice_clock_t *c);

/*
 * sluice_clock_cached_start - start (or re-period) the cached-clock ticker.
 * @period_ns: 0 for SLUICE_CACHED_PERIOD_NS, else 1 us .. 1 s.
 *
 * Safe to call twice and from several threads: a second call while the
 * ticker runs only changes its period, which takes effect at once.  Not for
 * a decision path (it takes a mutex and may create a thread).
 * Return: 0, -SLUICE_EPERIOD, -SLUICE_ETHREAD (nothing changed on error).
 */
SLUICE_API int sluice_clock_cached_start(uint64_t period_ns);

/*
 * sluice_clock_cached_stop - stop the ticker and join its thread (at once,
 * not after the current period).
 * Safe to call twice, or without a start.  Afterwards cached reads fall back
 * to CLOCK_MONOTONIC.  Not for a decision path.
 */
SLUICE_API void sluice_clock_cached_stop(void);

/* sluice_clock_cached_running - 1 while the ticker runs, else 0. */
SLUICE_API int sluice_clock_cached_running(void);

/*
 * sluice_clock_manual_init - make @c a manual clock reading @start_ns.
 * sluice_clock_manual_set - set the reading (backwards is allowed: that is
 *                           what clock-jump tests are for).
 * sluice_clock_manual_advance - add @delta_ns.
 * All three are atomic (relaxed): safe while other threads read the clock.
 */
SLUICE_API void sluice_clock_manual_init(sluice_clock_t *c, uint64_t start_ns);

static inline void sluice_clock_manual_set(sluice_clock_t *c, uint64_t ns)
{
	atomic_store_explicit(&c->manual_ns, ns, memory_order_relaxed);
}

static inline void sluice_clock_manual_advance(sluice_clock_t *c, uint64_t delta_ns)
{
	atomic_fetch_add_explicit(&c->manual_ns, delta_ns, memory_order_relaxed);
}

#endif /* SLUICE_CLOCK_H */
