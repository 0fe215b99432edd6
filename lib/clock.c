/*
 * clock.c - the shared system clocks and the cached-clock ticker.
 *
 * DESIGN: the ticker is one process-wide thread that stores a fresh
 * CLOCK_MONOTONIC reading into sluice__cached_now every period, sleeping on
 * absolute deadlines (a condition variable on CLOCK_MONOTONIC) so the period
 * does not drift and a stop or a new period wakes it at once.  Readers do one
 * relaxed load; the reading carries no other data, so no ordering is needed.
 * The ticker is the only writer while it runs; stop() writes 0 after joining
 * it, which sends readers back to CLOCK_MONOTONIC.
 *
 * start/stop are serialised by ticker_mutex and talk to the thread under
 * tick_lock; neither lock is ever touched by a read.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "sluice/clock.h"
#include "sluice/error.h"

sluice_clock_t sluice_clock_monotonic = { .kind = SLUICE_CLOCK_MONOTONIC };
sluice_clock_t sluice_clock_coarse = { .kind = SLUICE_CLOCK_COARSE };
sluice_clock_t sluice_clock_cached = { .kind = SLUICE_CLOCK_CACHED };

_Atomic uint64_t sluice__cached_now;

/* start/stop serialisation: never touched by a read. */
static pthread_mutex_t ticker_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_t ticker_thread;
static bool ticker_running; /* under ticker_mutex */

/* The ticker sleeps on tick_cond so that stop() and a new period take
 * effect at once instead of after the current period (which may be 1 s). */
static pthread_mutex_t tick_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tick_cond;
static pthread_once_t tick_cond_once = PTHREAD_ONCE_INIT;
static bool tick_stop;           /* under tick_lock */
static bool tick_changed;        /* under tick_lock: period changed */
static _Atomic uint64_t ticker_period = SLUICE_CACHED_PERIOD_NS;

static void tick_cond_init(void)
{
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* deadlines on our base */
	pthread_cond_init(&tick_cond, &attr);
	pthread_condattr_destroy(&attr);
}

static void publish_now(void)
{
	/* Relaxed: the reading is self-contained (see clock.h). */
	atomic_store_explicit(&sluice__cached_now, sluice_clock_monotonic_ns(),
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
		/* Fell behind (the VM was descheduled)?  Do not catch up with
		 * a burst of ticks: restart from now. */
		if (next <= now)
			next = now + period;
		struct timespec deadline = { .tv_sec = (time_t)(next / 1000000000ULL),
			                     .tv_nsec = (long)(next % 1000000000ULL) };
		tick_changed = false;
		while (!tick_stop && !tick_changed &&
		       pthread_cond_timedwait(&tick_cond, &tick_lock, &deadline) != ETIMEDOUT)
			;
		if (tick_changed)
			next = sluice_clock_monotonic_ns(); /* new period from now */
	}
	pthread_mutex_unlock(&tick_lock);
	return NULL;
}

int sluice_clock_cached_start(uint64_t period_ns)
{
	if (period_ns == 0)
		period_ns = SLUICE_CACHED_PERIOD_NS;
	if (period_ns < SLUICE_CACHED_PERIOD_MIN_NS || period_ns > SLUICE_CACHED_PERIOD_MAX_NS)
		return -SLUICE_EPERIOD;
	pthread_once(&tick_cond_once, tick_cond_init);

	int rc = 0;
	pthread_mutex_lock(&ticker_mutex);
	if (ticker_running) {
		pthread_mutex_lock(&tick_lock);
		atomic_store_explicit(&ticker_period, period_ns, memory_order_relaxed);
		tick_changed = true;
		pthread_cond_signal(&tick_cond);
		pthread_mutex_unlock(&tick_lock);
	} else {
		uint64_t old = atomic_load_explicit(&ticker_period, memory_order_relaxed);
		atomic_store_explicit(&ticker_period, period_ns, memory_order_relaxed);
		/* Publish a first reading before returning, so a limiter that
		 * reads the cached clock right after start() sees live time. */
		publish_now();
		tick_stop = false; /* no ticker runs: nobody else reads it */
		if (pthread_create(&ticker_thread, NULL, ticker_main, NULL) != 0) {
			atomic_store_explicit(&sluice__cached_now, 0, memory_order_relaxed);
			atomic_store_explicit(&ticker_period, old, memory_order_relaxed);
			rc = -SLUICE_ETHREAD;
		} else {
			ticker_running = true;
		}
	}
	pthread_mutex_unlock(&ticker_mutex);
	return rc;
}

void sluice_clock_cached_stop(void)
{
	pthread_mutex_lock(&ticker_mutex);
	if (ticker_running) {
		pthread_mutex_lock(&tick_lock);
		tick_stop = true;
		pthread_cond_signal(&tick_cond);
		pthread_mutex_unlock(&tick_lock);
		pthread_join(ticker_thread, NULL);
		ticker_running = false;
		atomic_store_explicit(&sluice__cached_now, 0, memory_order_relaxed);
	}
	pthread_mutex_unlock(&ticker_mutex);
}

int sluice_clock_cached_running(void)
{
	pthread_mutex_lock(&ticker_mutex);
	int r = ticker_running;
	pthread_mutex_unlock(&ticker_mutex);
	return r;
}

uint64_t sluice__monotonic_ns(void)
{
	return sluice_clock_monotonic_ns(); /* inline here: clock.c sees the clocks */
}

uint64_t sluice__coarse_ns(void)
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
