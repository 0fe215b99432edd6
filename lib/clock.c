/* SPDX-License-Identifier: MIT */
/*
 * clock.c - the shared system clocks, the cached-clock ticker, its fork
 * handlers, and the floor that keeps the ticker as fine as its limiters.
 *
 * DESIGN
 *
 * The ticker is one process-wide thread that stores a fresh CLOCK_MONOTONIC
 * reading into sluice_inline_cached_now every period, sleeping on absolute
 * deadlines (a condition variable on CLOCK_MONOTONIC) so the period does not
 * drift and a stop or a new period wakes it at once.  Readers do one relaxed
 * load; the reading carries no other data, so no ordering is needed (on
 * arm64 as on x86-64: an aligned 8-byte load is single-copy atomic, and
 * per-location coherence keeps one thread's successive readings from going
 * back while the ticker runs; a reading is as old as a thread that stalled
 * after taking it could hold anyway).  The
 * ticker is the only writer while it runs; start() writes the first reading
 * before creating it, stop() writes 0 after joining it, and the fork child
 * handler writes 0 in the child.  0 sends readers to CLOCK_MONOTONIC.
 *
 * Locks.  ticker_mutex serialises start, stop, the period floor (below) and
 * the fork handlers; tick_lock guards what the ticker and its controller
 * share (tick_stop, tick_changed) and is the condition variable's mutex.
 * Order: ticker_mutex before tick_lock, everywhere.  No read touches either:
 * sluice_clock_now() is a relaxed load, sluice_clock_cached_running() and
 * sluice_clock_resolution_ns() are relaxed loads.  Every section that holds
 * a lock runs with cancellation disabled (pthread_join is a cancellation
 * point: a stop() cancelled inside it would otherwise leave ticker_mutex
 * locked for ever) and waits only for the ticker, which never waits for
 * ticker_mutex, so every hold is bounded by the ticker's next wake-up.
 *
 * fork().  A child has one thread: the caller of fork().  The ticker is not
 * there, but the parent's memory is: a running flag that says 1, a
 * pthread_t naming a thread the child does not have (joining it blocks for
 * ever), tick_lock held if the ticker held it at the instant of the fork
 * (the 1-in-3,000..20,000 deadlock), and a condition variable whose
 * internal state still counts the ticker as a waiter.  Handled as liburcu's
 * urcu_bp_before_fork/after_fork_* and jemalloc's prefork/postfork are:
 *   prepare (before fork, in the parent): take ticker_mutex, then tick_lock.
 *     No start/stop/require_step is half done, and the ticker is parked in
 *     its timed wait or waiting for tick_lock, holding nothing.
 *   parent (after fork): release both; nothing else changed.
 *   child: the ticker is gone, so the child falls back: sluice_inline_cached_now
 *     = 0 (reads are CLOCK_MONOTONIC, one clock_gettime each), running = 0,
 *     tick_stop and tick_changed cleared, a fresh condition variable over
 *     the inherited one (never pthread_cond_destroy: glibc's waits for the
 *     ticker, which will never leave), then both locks released (the
 *     child's thread is the one that took them).  The period (the clock's
 *     resolution) and the period floor are kept: the child's limiters are
 *     the parent's and were validated against them.
 * Why fall back instead of restarting the ticker in the child: the child of
 * a multi-threaded process may call only async-signal-safe functions until
 * it execs (POSIX), and pthread_create is not one; a fork followed by exec
 * (posix_spawn-like use, daemons' double fork) would pay a thread creation
 * per fork for a thread that exec kills at once; ThreadSanitizer kills a
 * child that creates a thread after a multi-threaded fork; and the fallback
 * is exact (1 ns steps are finer than any period, so every limiter
 * validated on the cached clock stays within its guarantee), only slower
 * per read.  A process that wants the cached clock back calls
 * sluice_clock_cached_start() itself, after the fork (clock.h, FORK).
 * The handlers are registered once, by a constructor at load time, so they
 * exist before the first fork whatever thread calls what; start() retries
 * the registration if it failed (ENOMEM) and refuses to start a ticker
 * without them.
 *
 * Period floor (issue 10, item 8).  A limiter validated against a 1 ms
 * period silently loses its rate if the period is raised to 1 s (every
 * reading then moves in 1 s steps).  sluice__clock_require_step() records,
 * under ticker_mutex, the finest step any limiter was validated against on
 * the cached clock (period_floor); start() refuses a period above it.  It
 * never loosens: limiters are caller-allocated and attached from shared
 * memory, destroy() is optional for several of them and absent for an
 * attach, so a floor that rose on destroy would rise under live limiters.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>

#include "sluice/clock.h"
#include "sluice/error.h"

sluice_clock_t sluice_clock_monotonic = { .kind = SLUICE_CLOCK_MONOTONIC };
sluice_clock_t sluice_clock_coarse = { .kind = SLUICE_CLOCK_COARSE };
sluice_clock_t sluice_clock_cached = { .kind = SLUICE_CLOCK_CACHED };

_Atomic uint64_t sluice_inline_cached_now;

/* start/stop/floor/fork serialisation: never touched by a read. */
static pthread_mutex_t ticker_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_t ticker_thread;       /* under ticker_mutex, while running */
static _Atomic int ticker_running;    /* written under ticker_mutex; read relaxed */
static bool handlers_ready;           /* under ticker_mutex: atfork registered, cond made */
static uint64_t period_floor = UINT64_MAX; /* under ticker_mutex: finest validated step */

/* The ticker sleeps on tick_cond so that stop() and a new period take
 * effect at once instead of after the current period (which may be 1 s). */
static pthread_mutex_t tick_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tick_cond; /* made by make_tick_cond(), under ticker_mutex */
static bool tick_stop;           /* under tick_lock */
static bool tick_changed;        /* under tick_lock: period changed */
static _Atomic uint64_t ticker_period = SLUICE_CACHED_PERIOD_NS;

static int make_tick_cond(void)
{
	pthread_condattr_t attr;
	if (pthread_condattr_init(&attr) != 0)
		return -1;
	/* Deadlines on our time base: a wall-clock step cannot stretch a wait. */
	int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(&tick_cond, &attr);
	pthread_condattr_destroy(&attr);
	return rc == 0 ? 0 : -1;
}

/* ---- fork handlers ------------------------------------------------------ */

static void before_fork(void)
{
	/* Same order as start/stop.  Cancellation cannot strike here: mutex
	 * lock is not a cancellation point. */
	pthread_mutex_lock(&ticker_mutex);
	pthread_mutex_lock(&tick_lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&tick_lock);
	pthread_mutex_unlock(&ticker_mutex);
}

static void after_fork_child(void)
{
	/* This thread holds both locks (before_fork) and is the only thread:
	 * everything below is private to it until the unlocks. */
	atomic_store_explicit(&ticker_running, 0, memory_order_relaxed);
	/* Relaxed: the reading is self-contained (see clock.h); 0 means
	 * "no ticker", and readers fall back to CLOCK_MONOTONIC. */
	atomic_store_explicit(&sluice_inline_cached_now, 0, memory_order_relaxed);
	tick_stop = false;
	tick_changed = false;
	/* The inherited condition variable may count the parent's ticker as
	 * a waiter; a signal or destroy could wait for it.  Make a new one in
	 * place.  Cannot fail on Linux (it holds no resources); if it did,
	 * handlers_ready goes false and the next start() makes it again, or
	 * fails with SLUICE_ETHREAD: nothing ever waits on a broken one. */
	if (handlers_ready && make_tick_cond() != 0)
		handlers_ready = false;
	pthread_mutex_unlock(&tick_lock);
	pthread_mutex_unlock(&ticker_mutex);
}

/* Under ticker_mutex: register the fork handlers and make the condition
 * variable, once.  0, or -1 when either failed (retried at the next call). */
static int ensure_handlers_locked(void)
{
	static bool atfork_registered;
	if (handlers_ready)
		return 0;
	if (!atfork_registered) {
		if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0)
			return -1;
		atfork_registered = true;
	}
	if (make_tick_cond() != 0)
		return -1;
	handlers_ready = true;
	return 0;
}

/*
 * At load time (before main for an executable, before dlopen returns for a
 * shared library), so the handlers exist before any fork, even one that
 * races with the first start().  glibc unregisters handlers registered from
 * a shared object when it is unloaded (__register_atfork with the DSO
 * handle), so a dlclose leaves no dangling handler.
 */
__attribute__((constructor)) static void clock_load(void)
{
	pthread_mutex_lock(&ticker_mutex);
	(void)ensure_handlers_locked(); /* a failure is retried by start() */
	pthread_mutex_unlock(&ticker_mutex);
}

/* Lock ticker_mutex with cancellation off; the old state goes to @old. */
static void lock_control(int *old)
{
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, old);
	pthread_mutex_lock(&ticker_mutex);
}

static void unlock_control(int old)
{
	pthread_mutex_unlock(&ticker_mutex);
	pthread_setcancelstate(old, NULL);
}

/* ---- the ticker ----------------------------------------------------------- */

static void publish_now(void)
{
	/* Relaxed: the reading is self-contained (see clock.h). */
	atomic_store_explicit(&sluice_inline_cached_now, sluice_clock_monotonic_ns(),
	                      memory_order_relaxed);
}

static void *ticker_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&tick_lock);
	uint64_t next = sluice_clock_monotonic_ns();
	while (!tick_stop) {
		publish_now();
		uint64_t period = atomic_load_explicit(&ticker_period, memory_order_relaxed);
		uint64_t now = sluice_clock_monotonic_ns();
		next += period;
		/* Fell behind (the VM was descheduled, the process stopped)?
		 * Do not catch up with a burst of ticks: restart from now. */
		if (next <= now)
			next = now + period;
		struct timespec deadline = { .tv_sec = (time_t)(next / 1000000000ULL),
			                     .tv_nsec = (long)(next % 1000000000ULL) };
		tick_changed = false;
		/* 0 is a wake-up (signal or spurious): look at the flags and
		 * wait again.  ETIMEDOUT is the tick.  Any other error (none is
		 * possible with a valid deadline) is treated as a tick too, so
		 * this loop can never spin on a failing wait. */
		while (!tick_stop && !tick_changed &&
		       pthread_cond_timedwait(&tick_cond, &tick_lock, &deadline) == 0)
			;
		if (tick_changed)
			next = sluice_clock_monotonic_ns(); /* new period from now */
	}
	pthread_mutex_unlock(&tick_lock);
	return NULL;
}

/* Under ticker_mutex, ticker stopped: create it with every signal blocked,
 * so no signal handler runs on it (a handler there would stall the clock
 * for as long as it runs, and applications expect process signals on their
 * own threads).  0 or -1. */
static int create_ticker_locked(void)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&ticker_thread, NULL, ticker_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc == 0 ? 0 : -1;
}

int sluice_clock_cached_start(uint64_t period_ns)
{
	if (period_ns == 0)
		period_ns = SLUICE_CACHED_PERIOD_NS;
	if (period_ns < SLUICE_CACHED_PERIOD_MIN_NS || period_ns > SLUICE_CACHED_PERIOD_MAX_NS)
		return SLUICE_EPERIOD;

	int rc = 0, cancel;
	lock_control(&cancel);
	if (period_ns > period_floor) {
		/* A limiter was validated against a finer step (item 8). */
		rc = SLUICE_ERESOLUTION;
	} else if (atomic_load_explicit(&ticker_running, memory_order_relaxed)) {
		pthread_mutex_lock(&tick_lock);
		atomic_store_explicit(&ticker_period, period_ns, memory_order_relaxed);
		tick_changed = true;
		pthread_cond_signal(&tick_cond);
		pthread_mutex_unlock(&tick_lock);
	} else if (ensure_handlers_locked() != 0) {
		/* No fork handlers, no ticker: a fork would hand the child
		 * this thread's locks and a ticker it does not have. */
		rc = SLUICE_ETHREAD;
	} else {
		uint64_t old = atomic_load_explicit(&ticker_period, memory_order_relaxed);
		atomic_store_explicit(&ticker_period, period_ns, memory_order_relaxed);
		/* Publish a first reading before returning, so a limiter that
		 * reads the cached clock right after start() sees live time. */
		publish_now();
		tick_stop = false; /* no ticker runs: nobody else reads it */
		if (create_ticker_locked() != 0) {
			atomic_store_explicit(&sluice_inline_cached_now, 0, memory_order_relaxed);
			atomic_store_explicit(&ticker_period, old, memory_order_relaxed);
			rc = SLUICE_ETHREAD;
		} else {
			atomic_store_explicit(&ticker_running, 1, memory_order_relaxed);
		}
	}
	unlock_control(cancel);
	return rc;
}

void sluice_clock_cached_stop(void)
{
	int cancel;
	lock_control(&cancel);
	if (atomic_load_explicit(&ticker_running, memory_order_relaxed)) {
		pthread_mutex_lock(&tick_lock);
		tick_stop = true;
		pthread_cond_signal(&tick_cond);
		pthread_mutex_unlock(&tick_lock);
		/* Bounded: the ticker wakes on the signal, sees tick_stop and
		 * returns; it never takes ticker_mutex. */
		pthread_join(ticker_thread, NULL);
		atomic_store_explicit(&ticker_running, 0, memory_order_relaxed);
		atomic_store_explicit(&sluice_inline_cached_now, 0, memory_order_relaxed);
	}
	unlock_control(cancel);
}

int sluice_clock_cached_running(void)
{
	/* Relaxed: a snapshot; nothing is read on the strength of it. */
	return atomic_load_explicit(&ticker_running, memory_order_relaxed);
}

/* ---- the period floor ----------------------------------------------------- */

static int step_check(const sluice_clock_t *c, uint64_t step_ns, bool record)
{
	if (c->kind != SLUICE_CLOCK_CACHED) {
		if (c->kind > SLUICE_CLOCK_MANUAL)
			return SLUICE_ECLOCK;
		/* These clocks' steps are fixed: nothing can coarsen them. */
		return step_ns < sluice_clock_resolution_ns(c) ? SLUICE_ERESOLUTION : 0;
	}
	int rc = 0, cancel;
	lock_control(&cancel);
	/* Under the lock start() holds: the period cannot change between this
	 * check and the record. */
	if (step_ns < atomic_load_explicit(&ticker_period, memory_order_relaxed))
		rc = SLUICE_ERESOLUTION;
	else if (record && step_ns < period_floor)
		period_floor = step_ns;
	unlock_control(cancel);
	return rc;
}

int sluice__clock_require_step(const sluice_clock_t *c, uint64_t step_ns)
{
	return step_check(c, step_ns, true);
}

int sluice__clock_check_step(const sluice_clock_t *c, uint64_t step_ns)
{
	return step_check(c, step_ns, false);
}

/* ---- plain reads ---------------------------------------------------------- */

uint64_t sluice_inline_monotonic_ns(void)
{
	return sluice_clock_monotonic_ns(); /* inline here: clock.c sees the clocks */
}

uint64_t sluice_inline_coarse_ns(void)
{
	return sluice_clock_coarse_ns();
}

uint64_t sluice_clock_resolution_ns(const sluice_clock_t *c)
{
	struct timespec ts;
	switch (c->kind) {
	case SLUICE_CLOCK_MONOTONIC:
		if (clock_getres(CLOCK_MONOTONIC, &ts) == 0)
			return sluice__timespec_ns(&ts);
		return 1;
	case SLUICE_CLOCK_COARSE:
		if (clock_getres(CLOCK_MONOTONIC_COARSE, &ts) == 0)
			return sluice__timespec_ns(&ts);
		return 10000000; /* 10 ms: the coarsest tick Linux uses */
	case SLUICE_CLOCK_CACHED:
		return atomic_load_explicit(&ticker_period, memory_order_relaxed);
	case SLUICE_CLOCK_MANUAL:
		return 1;
	}
	return 0;
}

void sluice_clock_manual_init(sluice_clock_t *c, uint64_t start_ns)
{
	c->kind = SLUICE_CLOCK_MANUAL;
	atomic_store_explicit(&c->manual_ns, start_ns, memory_order_relaxed);
}
