/*
 * clock.c - the shared system clocks and the cached-clock ticker.
 *
 * DESIGN: the ticker is one process-wide thread that stores a fresh
 * CLOCK_MONOTONIC reading into sluice__cached_now every period, sleeping on
 * absolute deadlines so the period does not drift.  Readers do one relaxed
 * load; the reading carries no other data, so no ordering is needed.  The
 * ticker is the only writer while it runs; stop() writes 0 after joining it,
 * which sends readers back to CLOCK_MONOTONIC.
 *
 * start/stop are serialised by ticker_mutex; the mutex is never touched on a
 * read.  The period lives in an atomic so start() can change it while the
 * thread runs (the thread picks it up at its next tick).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "sluice/clock.h"
#include "sluice/error.h"

sluice_clock_t sluice_clock_monotonic = { .kind = SLUICE_CLOCK_MONOTONIC };
sluice_clock_t sluice_clock_coarse = { .kind = SLUICE_CLOCK_COARSE };
sluice_clock_t sluice_clock_cached = { .kind = SLUICE_CLOCK_CACHED };

_Atomic uint64_t sluice__cached_now;

static pthread_mutex_t ticker_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_t ticker_thread;
static bool ticker_running;                      /* under ticker_mutex */
static _Atomic bool ticker_stop;                 /* stop request        */
static _Atomic uint64_t ticker_period = SLUICE_CACHED_PERIOD_NS;

static void *ticker_main(void *arg)
{
	(void)arg;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	/* Acquire pairs with the release store in sluice_clock_cached_stop(),
	 * though the flag carries no data: relaxed would do; acquire documents
	 * that everything before the stop request is visible here. */
	while (!atomic_load_explicit(&ticker_stop, memory_order_acquire)) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		atomic_store_explicit(&sluice__cached_now, sluice__timespec_ns(&now),
		                      memory_order_relaxed);
		uint64_t period = atomic_load_explicit(&ticker_period, memory_order_relaxed);
		uint64_t t = sluice__timespec_ns(&next) + period;
		/* If we fell behind (the VM was descheduled), do not try to
		 * catch up with a burst of ticks: restart from now. */
		if (t < sluice__timespec_ns(&now))
			t = sluice__timespec_ns(&now) + period;
		next.tv_sec = (time_t)(t / 1000000000ULL);
		next.tv_nsec = (long)(t % 1000000000ULL);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
	}
	return NULL;
}

int sluice_clock_cached_start(uint64_t period_ns)
{
	if (period_ns == 0)
		period_ns = SLUICE_CACHED_PERIOD_NS;
	if (period_ns < SLUICE_CACHED_PERIOD_MIN_NS || period_ns > SLUICE_CACHED_PERIOD_MAX_NS)
		return -SLUICE_EPERIOD;

	int rc = 0;
	pthread_mutex_lock(&ticker_mutex);
	atomic_store_explicit(&ticker_period, period_ns, memory_order_relaxed);
	if (!ticker_running) {
		/* Publish a first reading before returning, so a limiter that
		 * reads the cached clock right after start() sees live time. */
		atomic_store_explicit(&sluice__cached_now, sluice_clock_monotonic_ns(),
		                      memory_order_relaxed);
		atomic_store_explicit(&ticker_stop, false, memory_order_relaxed);
		if (pthread_create(&ticker_thread, NULL, ticker_main, NULL) != 0) {
			atomic_store_explicit(&sluice__cached_now, 0, memory_order_relaxed);
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
		/* Release pairs with the acquire load in ticker_main(). */
		atomic_store_explicit(&ticker_stop, true, memory_order_release);
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
