/* SPDX-License-Identifier: MIT */
/*
 * sluice/clock.h - nanosecond time sources for limiters.
 *
 * Four sources, all on the CLOCK_MONOTONIC time base (ns since boot), so a
 * limiter may be switched between them and NTP steps of the wall clock never
 * reach a limiter:
 *
 *   SLUICE_CLOCK_MONOTONIC  clock_gettime(CLOCK_MONOTONIC): 1 ns resolution,
 *                           a vDSO call.
 *   SLUICE_CLOCK_COARSE     clock_gettime(CLOCK_MONOTONIC_COARSE): the
 *                           kernel's last tick (4 ms on a HZ=250 kernel),
 *                           a cheaper vDSO call.
 *   SLUICE_CLOCK_CACHED     one relaxed load of a word that a background
 *                           ticker thread refreshes from CLOCK_MONOTONIC
 *                           every period (default SLUICE_CACHED_PERIOD_NS).
 *                           One load a read.  While no ticker runs in
 *                           this process (never started, stopped, or this
 *                           is the child of a fork) a read is one
 *                           CLOCK_MONOTONIC read instead, so a forgotten
 *                           start costs speed, never correctness (a frozen
 *                           clock would stop every window).
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
 *
 * GUARANTEE (any number of threads, any process model)
 *   sluice_clock_now() is lock-free and allocation-free on every clock, and
 *   wait-free: no loop and no lock; a load, a clock_gettime, or (cached
 *   clock, no ticker) both.  A reading of the monotonic, coarse or cached
 *   clock is a CLOCK_MONOTONIC value taken at or before the read: never 0,
 *   never ahead of CLOCK_MONOTONIC.
 *   Each limiter's header states its bound over the readings it decides on;
 *   that bound holds whatever the readings are (late, frozen, jumping,
 *   backwards: see each header's CLOCK JUMPS).
 *
 * WORST CASE (what the cached clock does under adversarial timing)
 *   Lag.  A reading lags real time by D: up to one period while the ticker
 *   is scheduled on time, and by as long as the ticker thread goes without
 *   running otherwise.  D has no upper bound: the ticker is an ordinary
 *   thread, and a loaded machine, a debugger or a stopped VM can keep it off
 *   a CPU for any time, during which every cached reading is frozen.  A
 *   limiter then sees time stand still: no bucket opens and no permit
 *   refills, so by its own accounting it admits no more than at the frozen
 *   instant.  Over real time (CLOCK_MONOTONIC at each decision) a lag of at
 *   most D widens the limiter's interval by D: admissions whose real times
 *   fall within t ns satisfy the limiter's bound for an interval of t + D
 *   ns.  (The same holds for every clock with D = the time between a
 *   reading and the decision that uses it, e.g. a thread preempted there;
 *   the coarse clock adds up to one kernel tick.)
 *   SIGSTOP.  The ticker stops with the process.  After SIGCONT, readers
 *   that run before the ticker use the reading from before the stop, so D
 *   includes the whole stop; the ticker's next tick is one period after it
 *   runs again (it never catches up with a burst of ticks).
 *   Across start().  A reader that loaded 0 just before start() published
 *   its first reading falls back to CLOCK_MONOTONIC and may get a later
 *   time than the next cached reading: the clock may step back by at most D
 *   across a start.  Limiters hold time at their newest epoch, so this
 *   cannot reopen anything.  Across stop() and fork() it only steps forward
 *   (the fallback reads the current time).
 *   fork().  The parent's ticker waits for the duration of the fork() call
 *   (its lock is held by the fork handler), which adds to its D.  The
 *   child's cached clock is CLOCK_MONOTONIC, exact (see FORK).
 *   Blocking.  start() and stop() take a mutex; stop() waits for the ticker
 *   thread to exit, and start() and limiter inits that validate against the
 *   cached clock wait for a concurrent stop() or fork(): each wait is
 *   bounded by one wake-up of the ticker (it exits at once on a stop and
 *   never waits for the mutex) or by the fork() call.  They are
 *   cancellation-safe (cancellation is disabled while the mutex is held)
 *   and not async-signal-safe: a signal handler that calls them, or that
 *   calls fork() while it interrupted one of them (or a limiter's init),
 *   deadlocks, as glibc's own malloc fork handlers do (use _Fork() in a
 *   handler).  The ticker thread runs with every signal blocked, so no
 *   signal handler ever runs on it.
 *
 * CLOCK JUMPS: CLOCK_MONOTONIC does not jump: clock_settime, settimeofday
 *   and NTP steps do not move it (adjtime and NTP only slew its rate, NTP's
 *   frequency correction by at most 500 ppm), and it never runs backwards.  It does not count time the machine spends
 *   suspended: after a resume it continues from where it stopped, so a
 *   limiter sees the suspension as time that never passed (no refill for
 *   it: fewer admissions, never more).  The coarse and cached clocks are the
 *   same time base (the cached clock's only backward step is the one across
 *   start() above).  The manual clock reads exactly what its caller last set,
 *   backwards included; what a limiter does then is in its CLOCK JUMPS.
 *
 * FORK: handled by pthread_atfork handlers registered when the library is
 *   loaded.  In the child of a fork():
 *   - no ticker runs: sluice_clock_cached_running() is 0 and every cached
 *     read is a CLOCK_MONOTONIC read (1 ns steps, a vDSO call instead of a
 *     load), in every child, whatever the parent's ticker was doing at
 *     the instant of the fork (started, stopping, changing period);
 *   - the ticker's locks and state are reset: start() and stop() in the
 *     child work as in a process that never started the ticker, and never
 *     block on anything inherited;
 *   - the configured period (sluice_clock_resolution_ns() of the cached
 *     clock) and the period floor (PERIOD FLOOR) are inherited, because the
 *     child's limiters are the parent's and were validated against them;
 *   - the parent is unchanged: its ticker runs on.
 *   The child does not restart a ticker by itself: the child of a
 *   multi-threaded process may call only async-signal-safe functions until
 *   it execs (POSIX) and pthread_create is not one, a fork+exec would pay
 *   for a thread exec kills at once, and the fallback is exact, only slower.
 *   Pre-fork servers (nginx, HAProxy, Apache prefork: configure in a master,
 *   then fork workers): each worker's cached clock is NOT coarse-cached
 *   after the fork; it reads CLOCK_MONOTONIC per call, exactly, until the
 *   worker itself calls sluice_clock_cached_start() (nginx: the module's
 *   init_process hook; Apache: child_init), which starts a ticker thread of
 *   that worker's own.  Pass sluice_clock_resolution_ns(&sluice_clock_cached)
 *   to get the master's period back: start(0) means the default period and
 *   is refused if the master's limiters were validated against a finer one.
 *   The master's ticker, if it started one, serves the master only.
 *   (sluice's own nginx module, nginx/, starts no ticker: its workers
 *   decide on sluice_clock_monotonic, whose 1 ns steps keep sub-ms rates
 *   exact; docs/nginx.md says why.)
 *   Processes sharing a keyed table each read their own clock; all read
 *   the one CLOCK_MONOTONIC time base.
 *
 * PERIOD FLOOR: every limiter that validates a time step against the cached
 *   clock (fixed, window and keyed widths, GCRA's tau, the log's window,
 *   warm-up's interval; see each header's LIMITS) records it, and
 *   sluice_clock_cached_start() refuses (SLUICE_ERESOLUTION, ticker
 *   unchanged) a period above the finest step recorded: raising the period
 *   under a limiter would cap its rate silently (a ring of L = 10 per
 *   100 ms in 1 ms buckets, validated on the 1 ms ticker, admitted 20 in
 *   2 s after start(1 s) was accepted, instead of 200).  The record is
 *   process-wide (there is one ticker per process), is inherited by fork
 *   children, and never loosens, not even when the limiter is destroyed:
 *   limiters are caller-allocated and attached from shared memory, and a
 *   destroy is optional or absent for several of them, so a floor that
 *   relaxed on destroy could relax under a live limiter.  A process that
 *   wants a coarser ticker later validates its limiters against that period
 *   from the start (start the ticker with it before creating them).
 */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "common.h"

/*
 * Default ticker period: 1 ms.  Why (the measurements are in
 * docs/performance.md, "Clocks", with the command): each wake-up costs
 * CPU, so the ticker's share of a core grows steeply below 1 ms, while at
 * 1 ms the reading lags CLOCK_MONOTONIC by about half a period in the
 * median on a quiet machine.  That is 100x finer than the 100 ms buckets
 * we expect (windows of 1 s and up in 10-100 buckets) and 4x finer than the
 * coarse clock.  On a loaded machine the worst lag can reach tens
 * of ms whatever the period (the ticker is not scheduled): WORST CASE says
 * what a lag does to a limiter.  Callers with narrower buckets start the
 * ticker with a shorter period, before creating those limiters.
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

/* sluice_clock_monotonic_ns - CLOCK_MONOTONIC in ns.  Thread-safe. */
SLUICE_API uint64_t sluice_clock_monotonic_ns(void);

/* sluice_clock_coarse_ns - CLOCK_MONOTONIC_COARSE in ns.  Thread-safe. */
SLUICE_API uint64_t sluice_clock_coarse_ns(void);

SLUICE_API uint64_t sluice_clock_cached_ns(void);

/*
 * sluice_clock_now - read a clock.
 * @c: any clock.  Thread-safe, lock-free, no allocation.
 * Return: ns on the CLOCK_MONOTONIC time base (manual: the set value).
 */
SLUICE_API uint64_t sluice_clock_now(const sluice_clock_t *c);

/*
 * sluice_clock_resolution_ns - the finest step the clock can show.
 * Monotonic: clock_getres (1 ns); coarse: clock_getres (the kernel tick);
 * cached: the ticker's configured period, also while it is stopped and in
 * the child of a fork (limiters validate against the clock they will have
 * once a ticker runs); manual: 1 ns.
 * Limiters refuse buckets narrower than this (SLUICE_ERESOLUTION).
 * Lock-free (one relaxed load, or clock_getres); callable from any thread.
 */
SLUICE_API uint64_t sluice_clock_resolution_ns(const sluice_clock_t *c);

#ifdef SLUICE_BUILDING
/*
 * sluice__clock_require_step - private to the library (declared only while
 * building it, and not exported): validate a limiter's time step against
 * @c, and keep @c at least that fine from then on (PERIOD FLOOR).
 * @c: the limiter's clock (kind already validated).
 * @step_ns: the narrowest step the limiter's exactness depends on (a bucket
 *           or window width, GCRA's tau, warm-up's interval).
 *
 * SLUICE_ERESOLUTION, recording nothing, when @step_ns is below
 * sluice_clock_resolution_ns(@c).  Otherwise, on the cached clock, lowers
 * the period floor to @step_ns if that is finer; on the other clocks (whose
 * steps nothing can change) it is the resolution check alone, lock-free.
 * On the cached clock the check and the record are one critical section
 * under the mutex start() holds, so no start() can fall between them: init
 * and reconfiguration paths only.  A limiter whose init fails after this
 * call has still recorded its step, which can only refuse a coarser ticker.
 * Declared here rather than in a lib/ header so that each limiter's check
 * stays the one line it was (every lib/ file already includes this header).
 * Return: 0, SLUICE_ERESOLUTION, SLUICE_ECLOCK (unknown kind).
 */
int sluice__clock_require_step(const sluice_clock_t *c, uint64_t step_ns);
/* sluice__clock_check_step - the same answer for @c and @step_ns at this
 * moment, recording nothing: what sluice_<algo>_config_check() asks, so a
 * check leaves no floor behind (a later start() can still coarsen the
 * clock for the limiters that do exist).  Lock as above. */
int sluice__clock_check_step(const sluice_clock_t *c, uint64_t step_ns);
#endif

/*
 * sluice_clock_cached_start - start (or re-period) this process's
 * cached-clock ticker.
 * @period_ns: 0 for SLUICE_CACHED_PERIOD_NS, else 1 us .. 1 s, and at most
 *             the period floor (the finest step a limiter was validated
 *             against on the cached clock, PERIOD FLOOR).
 *
 * Safe to call twice and from several threads: a second call while the
 * ticker runs only changes its period, which takes effect at once.  In the
 * child of a fork it starts a ticker of the child's own (FORK).  Before it
 * returns 0 the cached word holds a live reading.  The ticker thread runs
 * with every signal blocked.  Not for a decision path (it takes a mutex and
 * may create a thread); cancellation-safe; not async-signal-safe.
 * Return: 0; SLUICE_EPERIOD (outside 1 us .. 1 s); SLUICE_ERESOLUTION
 * (above the period floor); SLUICE_ETHREAD (the thread, or the fork
 * handlers it needs, could not be created).  Nothing changes on error: a
 * running ticker keeps its period.
 */
SLUICE_API int sluice_clock_cached_start(uint64_t period_ns);

/*
 * sluice_clock_cached_stop - stop the ticker and join its thread (at once,
 * not after the current period; WORST CASE bounds the wait).
 * Safe to call twice, without a start, and in the child of a fork (where
 * there is nothing to stop unless the child started its own).  Afterwards
 * cached reads fall back to CLOCK_MONOTONIC.  The period and the period
 * floor are kept.  Not for a decision path; cancellation-safe; not
 * async-signal-safe.
 */
SLUICE_API void sluice_clock_cached_stop(void);

/*
 * sluice_clock_cached_running - 1 while a ticker thread runs in this
 * process, else 0 (0 in the child of a fork until the child starts one).
 * Lock-free: one relaxed load, a snapshot that a concurrent start or stop
 * may change right after; callable from any thread.
 */
SLUICE_API int sluice_clock_cached_running(void);

/*
 * sluice_clock_manual_init - make @c a manual clock reading @start_ns.
 * sluice_clock_manual_set - set the reading (backwards is allowed: that is
 *                           what clock-jump tests are for).
 * sluice_clock_manual_advance - add @delta_ns.
 * All three are atomic (relaxed): safe while other threads read the clock.
 * A manual clock is plain memory: a fork child gets its own copy, unless it
 * lives in memory mapped MAP_SHARED, where every process sees one value.
 */
SLUICE_API void sluice_clock_manual_init(sluice_clock_t *c, uint64_t start_ns);

SLUICE_API void sluice_clock_manual_set(sluice_clock_t *c, uint64_t ns);

SLUICE_API void sluice_clock_manual_advance(sluice_clock_t *c, uint64_t delta_ns);

#ifdef SLUICE_INLINE
#include "static/clock.h"
#endif

#endif /* SLUICE_CLOCK_H */
