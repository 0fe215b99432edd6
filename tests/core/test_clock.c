/* SPDX-License-Identifier: MIT */
/*
 * test_clock.c - the four time sources: the manual clock (set, advance,
 * set backwards), the monotonic and coarse readings, each clock's resolution,
 * and the cached clock's ticker lifecycle (stopped fallback, start twice,
 * stop twice, bad periods, a reading that advances while it runs), the
 * period floor (clock.h, PERIOD FLOOR: every limiter's validated step, and
 * a start() above it refused), and what another thread cannot do to the
 * ticker (a signal handler run on it, a cancellation inside stop()).
 * Fork is in test_fork.c.
 *
 * No test asserts that anything was fast: readings are bracketed by
 * CLOCK_MONOTONIC reads taken before and after, so a descheduled thread only
 * widens the bracket.  Waits are bounded polls.  Every test that starts the
 * ticker stops it in its .fini (and most also stop it explicitly).
 */
/* sluice__clock_require_step() is declared for the library's own build
 * only (clock.h says why); this file tests it directly too.  The macro
 * changes nothing else that a test sees (SLUICE_API's visibility). */
#define SLUICE_BUILDING 1

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice/clock.h"
#include "sluice/static/clock.h" /* the ticker's word, sluice_inline_cached_now */
#include "sluice/error.h"
#include "sluice/fixed.h"
#include "sluice/gcra.h"
#include "sluice/keyed.h"
#include "sluice/leaky.h"
#include "sluice/log.h"
#include "sluice/warmup.h"
#include "sluice/window.h"

#include "test_mono.h"

TestSuite(clock, .timeout = 60);

/* ---- helpers ---------------------------------------------------------- */

static uint64_t raw_ns(clockid_t id)
{
	struct timespec ts;
	cr_assert_eq(clock_gettime(id, &ts), 0, "clock_gettime(%d) failed", (int)id);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t raw_res_ns(clockid_t id)
{
	struct timespec ts;
	cr_assert_eq(clock_getres(id, &ts), 0, "clock_getres(%d) failed", (int)id);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Threads in this process, from /proc/self/task. */
static int thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	cr_assert_not_null(d, "cannot open /proc/self/task");
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* A joined thread can linger in /proc/self/task for a moment after
 * pthread_join returns (the kernel wakes the joiner before it unlinks the
 * task), so a drop in the count is polled for, up to about 2 s. */
static int wait_thread_count(int want)
{
	int n = thread_count();
	for (int i = 0; i < 2000 && n != want; i++) {
		sleep_ns(1000000);
		n = thread_count();
	}
	return n;
}

static void stop_ticker(void)
{
	sluice_clock_cached_stop();
}

/* A stopped cached clock must read exactly CLOCK_MONOTONIC: bracket it. */
static void assert_cached_falls_back(const char *when)
{
	uint64_t prev = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t before = raw_ns(CLOCK_MONOTONIC);
		uint64_t c = sluice_clock_now(&sluice_clock_cached);
		uint64_t after = raw_ns(CLOCK_MONOTONIC);
		cr_assert_neq(c, 0, "%s: stopped cached clock read 0", when);
		cr_assert_geq(c, before,
		              "%s: stopped cached read %llu is before CLOCK_MONOTONIC %llu "
		              "(stale ticker value instead of the fallback?)",
		              when, (unsigned long long)c, (unsigned long long)before);
		cr_assert_leq(c, after, "%s: stopped cached read %llu is after CLOCK_MONOTONIC %llu",
		              when, (unsigned long long)c, (unsigned long long)after);
		cr_assert_geq(c, prev, "%s: stopped cached clock went backwards: %llu after %llu",
		              when, (unsigned long long)c, (unsigned long long)prev);
		prev = c;
	}
}

/* ---- manual clock ----------------------------------------------------- */

Test(clock, manual_init_reads_start_value)
{
	sluice_clock_t c;
	sluice_clock_manual_init(&c, 1234567);
	cr_assert_eq(c.kind, SLUICE_CLOCK_MANUAL, "manual_init left kind %d", (int)c.kind);
	cr_assert_eq(sluice_clock_now(&c), 1234567ULL, "manual clock reads %llu, set 1234567",
	             (unsigned long long)sluice_clock_now(&c));

	/* Re-init overwrites whatever was there, including another kind. */
	sluice_clock_t m = { .kind = SLUICE_CLOCK_MONOTONIC };
	sluice_clock_manual_init(&m, 0);
	cr_assert_eq(m.kind, SLUICE_CLOCK_MANUAL, "re-init left kind %d", (int)m.kind);
	cr_assert_eq(sluice_clock_now(&m), 0ULL, "manual clock inited at 0 reads %llu",
	             (unsigned long long)sluice_clock_now(&m));
}

Test(clock, manual_set_and_advance)
{
	sluice_clock_t c;
	sluice_clock_manual_init(&c, 0);

	sluice_clock_manual_advance(&c, 1);
	cr_assert_eq(sluice_clock_now(&c), 1ULL, "advance(1) from 0 reads %llu",
	             (unsigned long long)sluice_clock_now(&c));
	sluice_clock_manual_advance(&c, 999999999ULL);
	cr_assert_eq(sluice_clock_now(&c), 1000000000ULL, "advance to 1 s reads %llu",
	             (unsigned long long)sluice_clock_now(&c));
	sluice_clock_manual_advance(&c, 0);
	cr_assert_eq(sluice_clock_now(&c), 1000000000ULL, "advance(0) moved the clock to %llu",
	             (unsigned long long)sluice_clock_now(&c));

	sluice_clock_manual_set(&c, 10ULL * 1000000000ULL);
	cr_assert_eq(sluice_clock_now(&c), 10000000000ULL, "set(10 s) reads %llu",
	             (unsigned long long)sluice_clock_now(&c));

	/* Backwards by seconds: allowed, and read back exactly. */
	sluice_clock_manual_set(&c, 7ULL * 1000000000ULL);
	cr_assert_eq(sluice_clock_now(&c), 7000000000ULL, "set back to 7 s reads %llu",
	             (unsigned long long)sluice_clock_now(&c));
	sluice_clock_manual_advance(&c, 500);
	cr_assert_eq(sluice_clock_now(&c), 7000000500ULL,
	             "advance after setting back reads %llu, expected 7000000500",
	             (unsigned long long)sluice_clock_now(&c));

	/* All the way back to 0, and up to the top of the range. */
	sluice_clock_manual_set(&c, 0);
	cr_assert_eq(sluice_clock_now(&c), 0ULL, "set(0) reads %llu",
	             (unsigned long long)sluice_clock_now(&c));
	sluice_clock_manual_set(&c, UINT64_MAX - 5);
	sluice_clock_manual_advance(&c, 5);
	cr_assert_eq(sluice_clock_now(&c), UINT64_MAX, "advance to UINT64_MAX reads %llu",
	             (unsigned long long)sluice_clock_now(&c));
}

Test(clock, manual_clocks_are_independent)
{
	sluice_clock_t a, b;
	sluice_clock_manual_init(&a, 100);
	sluice_clock_manual_init(&b, 200);
	sluice_clock_manual_advance(&a, 5);
	sluice_clock_manual_set(&b, 50);
	cr_assert_eq(sluice_clock_now(&a), 105ULL, "clock a reads %llu",
	             (unsigned long long)sluice_clock_now(&a));
	cr_assert_eq(sluice_clock_now(&b), 50ULL, "clock b reads %llu",
	             (unsigned long long)sluice_clock_now(&b));
}

#define ADV_THREADS 4
#define ADV_EACH 200000

struct advancer {
	pthread_t thread;
	sluice_clock_t *clock;
	pthread_barrier_t *go;
};

static void *advance_many(void *arg)
{
	struct advancer *a = arg;
	pthread_barrier_wait(a->go);
	for (int i = 0; i < ADV_EACH; i++)
		sluice_clock_manual_advance(a->clock, 3);
	return NULL;
}

Test(clock, manual_advance_is_atomic_across_threads)
{
	sluice_clock_t c;
	sluice_clock_manual_init(&c, 1000);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, ADV_THREADS);
	struct advancer a[ADV_THREADS];
	for (int i = 0; i < ADV_THREADS; i++) {
		a[i] = (struct advancer){ .clock = &c, .go = &go };
		cr_assert_eq(pthread_create(&a[i].thread, NULL, advance_many, &a[i]), 0,
		             "pthread_create %d", i);
	}
	for (int i = 0; i < ADV_THREADS; i++)
		pthread_join(a[i].thread, NULL);
	pthread_barrier_destroy(&go);
	uint64_t want = 1000ULL + 3ULL * ADV_THREADS * ADV_EACH;
	cr_assert_eq(sluice_clock_now(&c), want, "concurrent advances: read %llu, expected %llu",
	             (unsigned long long)sluice_clock_now(&c), (unsigned long long)want);
}

Test(clock, manual_resolution_is_1ns)
{
	sluice_clock_t c;
	sluice_clock_manual_init(&c, 42);
	cr_assert_eq(sluice_clock_resolution_ns(&c), 1ULL, "manual resolution %llu, expected 1",
	             (unsigned long long)sluice_clock_resolution_ns(&c));
}

/* ---- shared system clocks --------------------------------------------- */

Test(clock, shared_clocks_have_their_kinds)
{
	cr_assert_eq(sluice_clock_monotonic.kind, SLUICE_CLOCK_MONOTONIC,
	             "sluice_clock_monotonic has kind %d", (int)sluice_clock_monotonic.kind);
	cr_assert_eq(sluice_clock_coarse.kind, SLUICE_CLOCK_COARSE,
	             "sluice_clock_coarse has kind %d", (int)sluice_clock_coarse.kind);
	cr_assert_eq(sluice_clock_cached.kind, SLUICE_CLOCK_CACHED,
	             "sluice_clock_cached has kind %d", (int)sluice_clock_cached.kind);
}

Test(clock, monotonic_is_clock_monotonic_and_non_decreasing)
{
	uint64_t prev = 0;
	for (int i = 0; i < 100000; i++) {
		uint64_t before = raw_ns(CLOCK_MONOTONIC);
		uint64_t m = (i & 1) ? sluice_clock_now(&sluice_clock_monotonic)
		                     : sluice_clock_monotonic_ns();
		uint64_t after = raw_ns(CLOCK_MONOTONIC);
		cr_assert_neq(m, 0, "monotonic read 0");
		cr_assert_geq(m, prev, "monotonic went backwards at read %d: %llu after %llu", i,
		              (unsigned long long)m, (unsigned long long)prev);
		cr_assert(m >= before && m <= after,
		          "monotonic read %llu outside CLOCK_MONOTONIC bracket [%llu, %llu]",
		          (unsigned long long)m, (unsigned long long)before,
		          (unsigned long long)after);
		prev = m;
	}
}

Test(clock, coarse_is_non_decreasing_and_close_to_monotonic)
{
	uint64_t res = raw_res_ns(CLOCK_MONOTONIC_COARSE);
	/* The coarse clock lags by up to a tick; allow two ticks plus a
	 * generous 100 ms for a tick delayed on a loaded VM.  A clock on the
	 * wrong base (realtime, boot time after a suspend) is off by far more. */
	uint64_t slack = 2 * res + 100000000ULL;
	uint64_t prev = 0;
	for (int i = 0; i < 100000; i++) {
		uint64_t before = raw_ns(CLOCK_MONOTONIC);
		uint64_t c = (i & 1) ? sluice_clock_now(&sluice_clock_coarse)
		                     : sluice_clock_coarse_ns();
		uint64_t after = raw_ns(CLOCK_MONOTONIC);
		cr_assert_neq(c, 0, "coarse read 0");
		cr_assert_geq(c, prev, "coarse went backwards at read %d: %llu after %llu", i,
		              (unsigned long long)c, (unsigned long long)prev);
		cr_assert_geq(c + slack, before,
		              "coarse read %llu lags CLOCK_MONOTONIC %llu by more than %llu ns",
		              (unsigned long long)c, (unsigned long long)before,
		              (unsigned long long)slack);
		cr_assert_leq(c, after + slack,
		              "coarse read %llu leads CLOCK_MONOTONIC %llu by more than %llu ns",
		              (unsigned long long)c, (unsigned long long)after,
		              (unsigned long long)slack);
		prev = c;
	}
}

Test(clock, monotonic_resolution_matches_clock_getres)
{
	uint64_t r = sluice_clock_resolution_ns(&sluice_clock_monotonic);
	cr_assert_geq(r, 1ULL, "monotonic resolution is 0");
	cr_assert_eq(r, raw_res_ns(CLOCK_MONOTONIC), "monotonic resolution %llu, clock_getres %llu",
	             (unsigned long long)r, (unsigned long long)raw_res_ns(CLOCK_MONOTONIC));
}

Test(clock, coarse_resolution_matches_clock_getres)
{
	uint64_t r = sluice_clock_resolution_ns(&sluice_clock_coarse);
	uint64_t want = raw_res_ns(CLOCK_MONOTONIC_COARSE);
	cr_assert_eq(r, want, "coarse resolution %llu, clock_getres(CLOCK_MONOTONIC_COARSE) %llu",
	             (unsigned long long)r, (unsigned long long)want);
	cr_assert_gt(r, 1ULL, "coarse resolution %llu: expected a kernel tick, not 1 ns",
	             (unsigned long long)r);
}

/* ---- cached clock: stopped -------------------------------------------- */

Test(clock, cached_stopped_falls_back_to_monotonic)
{
	cr_assert_eq(sluice_clock_cached_running(), 0, "ticker runs before any start");
	assert_cached_falls_back("never started");
	/* The inline reader directly, too. */
	uint64_t before = raw_ns(CLOCK_MONOTONIC);
	uint64_t c = sluice_clock_cached_ns();
	uint64_t after = raw_ns(CLOCK_MONOTONIC);
	cr_assert(c >= before && c <= after,
	          "sluice_clock_cached_ns %llu outside CLOCK_MONOTONIC bracket [%llu, %llu]",
	          (unsigned long long)c, (unsigned long long)before, (unsigned long long)after);
}

Test(clock, cached_stop_without_start_and_twice_is_safe, .fini = stop_ticker)
{
	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_running(), 0, "running after stop without start");
	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_running(), 0, "running after a second stop");
	assert_cached_falls_back("after stop without start");

	cr_assert_eq(sluice_clock_cached_start(0), 0, "start after stray stops failed");
	cr_assert_eq(sluice_clock_cached_running(), 1, "not running after start");
	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_running(), 0, "running after stop");
	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_running(), 0, "running after a second stop");
	assert_cached_falls_back("after start, stop, stop");

	/* And it can be started again after all that. */
	cr_assert_eq(sluice_clock_cached_start(0), 0, "restart failed");
	cr_assert_eq(sluice_clock_cached_running(), 1, "not running after restart");
	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_running(), 0, "running after final stop");
}

/* ---- cached clock: resolution ----------------------------------------- */

ParameterizedTestParameters(clock, cached_resolution_is_the_period)
{
	static uint64_t periods[] = {
		SLUICE_CACHED_PERIOD_MIN_NS,     /* 1 us: lowest accepted */
		SLUICE_CACHED_PERIOD_MIN_NS + 1, /* not a round number */
		250000ULL,                       /* 250 us */
		SLUICE_CACHED_PERIOD_NS,         /* the default, given explicitly */
		SLUICE_CACHED_PERIOD_MAX_NS,     /* 1 s: highest accepted */
	};
	return cr_make_param_array(uint64_t, periods, sizeof(periods) / sizeof(periods[0]));
}

ParameterizedTest(uint64_t *period, clock, cached_resolution_is_the_period, .fini = stop_ticker)
{
	int rc = sluice_clock_cached_start(*period);
	cr_assert_eq(rc, 0, "start(%llu) = %d (%s)", (unsigned long long)*period, rc,
	             sluice_err_name(rc));
	cr_assert_eq(sluice_clock_cached_running(), 1, "not running after start(%llu)",
	             (unsigned long long)*period);
	uint64_t r = sluice_clock_resolution_ns(&sluice_clock_cached);
	cr_assert_eq(r, *period, "cached resolution %llu after start(%llu)",
	             (unsigned long long)r, (unsigned long long)*period);
	/* A reading right after start is live, not 0. */
	cr_assert_neq(sluice_clock_now(&sluice_clock_cached), 0, "cached reads 0 after start");
	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_running(), 0, "running after stop");
}

Test(clock, cached_start_0_uses_the_default_period, .fini = stop_ticker)
{
	/* Move the period away from the default first, so a start(0) that
	 * left the period alone could not pass by accident. */
	cr_assert_eq(sluice_clock_cached_start(250000), 0, "start(250 us) failed");
	cr_assert_eq(sluice_clock_resolution_ns(&sluice_clock_cached), 250000ULL,
	             "resolution %llu after start(250 us)",
	             (unsigned long long)sluice_clock_resolution_ns(&sluice_clock_cached));
	sluice_clock_cached_stop();

	cr_assert_eq(sluice_clock_cached_start(0), 0, "start(0) failed");
	cr_assert_eq(sluice_clock_cached_running(), 1, "not running after start(0)");
	uint64_t r = sluice_clock_resolution_ns(&sluice_clock_cached);
	cr_assert_eq(r, SLUICE_CACHED_PERIOD_NS,
	             "start(0): resolution %llu, expected SLUICE_CACHED_PERIOD_NS %llu",
	             (unsigned long long)r, (unsigned long long)SLUICE_CACHED_PERIOD_NS);
	sluice_clock_cached_stop();
}

/* ---- cached clock: start twice ---------------------------------------- */

Test(clock, cached_start_twice_only_changes_the_period, .fini = stop_ticker)
{
	/* Warm up once: the first pthread_create may bring helper threads
	 * (ThreadSanitizer starts its own), which must not count as ours. */
	cr_assert_eq(sluice_clock_cached_start(0), 0, "warm-up start failed");
	int warm = thread_count();
	sluice_clock_cached_stop();
	int base = wait_thread_count(warm - 1);
	cr_assert_eq(base, warm - 1, "warm-up: %d threads while running, %d after stop", warm,
	             base);

	cr_assert_eq(sluice_clock_cached_start(1000000), 0, "first start failed");
	cr_assert_eq(sluice_clock_cached_running(), 1, "not running after first start");
	cr_assert_eq(thread_count(), base + 1, "first start: %d threads, expected %d",
	             thread_count(), base + 1);

	cr_assert_eq(sluice_clock_cached_start(500000), 0, "second start failed");
	cr_assert_eq(sluice_clock_cached_running(), 1, "not running after second start");
	cr_assert_eq(thread_count(), base + 1,
	             "second start: %d threads, expected %d (a second ticker was created)",
	             thread_count(), base + 1);
	cr_assert_eq(sluice_clock_resolution_ns(&sluice_clock_cached), 500000ULL,
	             "second start did not change the period: resolution %llu",
	             (unsigned long long)sluice_clock_resolution_ns(&sluice_clock_cached));

	cr_assert_eq(sluice_clock_cached_start(0), 0, "third start (default) failed");
	cr_assert_eq(sluice_clock_resolution_ns(&sluice_clock_cached), SLUICE_CACHED_PERIOD_NS,
	             "start(0) while running: resolution %llu, expected the default",
	             (unsigned long long)sluice_clock_resolution_ns(&sluice_clock_cached));
	cr_assert_eq(thread_count(), base + 1, "third start: %d threads, expected %d",
	             thread_count(), base + 1);

	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_running(), 0, "running after one stop");
	int left = wait_thread_count(base);
	cr_assert_eq(left, base, "after stop: %d threads, expected %d (a ticker leaked)", left,
	             base);
	assert_cached_falls_back("after start, start, start, stop");
}

/* ---- cached clock: bad periods ---------------------------------------- */

ParameterizedTestParameters(clock, cached_bad_period_is_refused)
{
	static uint64_t periods[] = {
		1ULL,
		SLUICE_CACHED_PERIOD_MIN_NS - 1,
		SLUICE_CACHED_PERIOD_MAX_NS + 1,
		10ULL * SLUICE_CACHED_PERIOD_MAX_NS,
		UINT64_MAX,
	};
	return cr_make_param_array(uint64_t, periods, sizeof(periods) / sizeof(periods[0]));
}

ParameterizedTest(uint64_t *period, clock, cached_bad_period_is_refused, .fini = stop_ticker)
{
	/* Stopped: refused, still stopped, period untouched. */
	uint64_t res0 = sluice_clock_resolution_ns(&sluice_clock_cached);
	int rc = sluice_clock_cached_start(*period);
	cr_assert_eq(rc, SLUICE_EPERIOD, "stopped: start(%llu) = %d (%s), expected SLUICE_EPERIOD",
	             (unsigned long long)*period, rc, sluice_err_name(rc));
	cr_assert_eq(sluice_clock_cached_running(), 0, "stopped: start(%llu) started the ticker",
	             (unsigned long long)*period);
	cr_assert_eq(sluice_clock_resolution_ns(&sluice_clock_cached), res0,
	             "stopped: refused start(%llu) changed the period to %llu",
	             (unsigned long long)*period,
	             (unsigned long long)sluice_clock_resolution_ns(&sluice_clock_cached));
	assert_cached_falls_back("after a refused start");

	/* Running: refused, still running, period untouched. */
	cr_assert_eq(sluice_clock_cached_start(2000000), 0, "start(2 ms) failed");
	rc = sluice_clock_cached_start(*period);
	cr_assert_eq(rc, SLUICE_EPERIOD, "running: start(%llu) = %d (%s), expected SLUICE_EPERIOD",
	             (unsigned long long)*period, rc, sluice_err_name(rc));
	cr_assert_eq(sluice_clock_cached_running(), 1, "running: refused start(%llu) stopped it",
	             (unsigned long long)*period);
	cr_assert_eq(sluice_clock_resolution_ns(&sluice_clock_cached), 2000000ULL,
	             "running: refused start(%llu) changed the period to %llu",
	             (unsigned long long)*period,
	             (unsigned long long)sluice_clock_resolution_ns(&sluice_clock_cached));
	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_running(), 0, "running after stop");
}

/* ---- cached clock: running -------------------------------------------- */

Test(clock, cached_reading_advances_while_running, .fini = stop_ticker)
{
	uint64_t before_start = raw_ns(CLOCK_MONOTONIC);
	cr_assert_eq(sluice_clock_cached_start(1000000), 0, "start(1 ms) failed");
	cr_assert_eq(sluice_clock_cached_running(), 1, "not running after start");

	/* start() publishes a first reading before it returns: the private
	 * word is already set, so the very first read is not a fallback. */
	uint64_t published = atomic_load(&sluice_inline_cached_now);
	cr_assert_geq(published, before_start,
	              "start() returned with the cached word at %llu, before the call (%llu)",
	              (unsigned long long)published, (unsigned long long)before_start);
	uint64_t first = sluice_clock_now(&sluice_clock_cached);
	uint64_t after_first = raw_ns(CLOCK_MONOTONIC);
	cr_assert_geq(first, before_start,
	              "first cached reading %llu predates the start() call (%llu)",
	              (unsigned long long)first, (unsigned long long)before_start);
	cr_assert_leq(first, after_first, "first cached reading %llu is in the future (%llu)",
	              (unsigned long long)first, (unsigned long long)after_first);

	/* Poll, sleeping 1 ms a step, for at most about 2 s of sleep. */
	uint64_t prev = first, cur = first;
	for (int i = 0; i < 2000 && cur == first; i++) {
		sleep_ns(1000000);
		cur = (i & 1) ? sluice_clock_cached_ns() : sluice_clock_now(&sluice_clock_cached);
		uint64_t m_after = raw_ns(CLOCK_MONOTONIC);
		cr_assert_geq(cur, prev, "cached clock went backwards: %llu after %llu",
		              (unsigned long long)cur, (unsigned long long)prev);
		cr_assert_leq(cur, m_after, "cached reading %llu is ahead of CLOCK_MONOTONIC %llu",
		              (unsigned long long)cur, (unsigned long long)m_after);
		prev = cur;
	}
	cr_assert_gt(cur, first, "cached clock stuck at %llu for ~2 s of sleep with the ticker on",
	             (unsigned long long)first);

	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_running(), 0, "running after stop");
	cr_assert_eq(atomic_load(&sluice_inline_cached_now), 0,
	             "stop() left the cached word at %llu; it must be 0 once stopped",
	             (unsigned long long)atomic_load(&sluice_inline_cached_now));
	/* After stop the reading falls back and keeps going forward. */
	uint64_t after_stop = sluice_clock_now(&sluice_clock_cached);
	cr_assert_geq(after_stop, cur, "cached reading went backwards across stop: %llu < %llu",
	              (unsigned long long)after_stop, (unsigned long long)cur);
	assert_cached_falls_back("after stop");
}

Test(clock, cached_reading_is_cached_while_running, .fini = stop_ticker)
{
	/* With a 1 s period the word changes once a second.  Back-to-back
	 * reads that fell through to CLOCK_MONOTONIC (1 ns steps, ~20 ns a
	 * read) would never be equal; reads of the cached word nearly always
	 * are.  Ask for one equal pair in 1000 tries: only a ticker that
	 * ticked between every pair could fail that. */
	cr_assert_eq(sluice_clock_cached_start(SLUICE_CACHED_PERIOD_MAX_NS), 0, "start(1 s) failed");
	int equal = 0;
	for (int i = 0; i < 1000 && !equal; i++) {
		uint64_t a = sluice_clock_now(&sluice_clock_cached);
		uint64_t b = sluice_clock_now(&sluice_clock_cached);
		cr_assert_geq(b, a, "cached clock went backwards: %llu after %llu",
		              (unsigned long long)b, (unsigned long long)a);
		equal = (a == b);
	}
	cr_assert(equal, "1000 pairs of cached reads all differed: reads are not cached");
	cr_assert_leq(sluice_clock_cached_ns(), raw_ns(CLOCK_MONOTONIC),
	              "cached reading ahead of CLOCK_MONOTONIC");
	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_running(), 0, "running after stop");
}

/* Readers on other threads while the ticker starts and stops (TSan checks
 * the accesses).  Every reading is non-zero and is a past CLOCK_MONOTONIC
 * value.  Not asserted: that readings never step back across a start().
 * They can, by a little: a reader that loaded 0 and fell back to
 * CLOCK_MONOTONIC may get a later time than the reading start() took just
 * before storing it.  Limiters tolerate that (they never go back an epoch). */
#define READERS 2

static _Atomic int readers_stop;

struct reader {
	pthread_t thread;
	uint64_t reads;
	uint64_t zero;   /* readings of 0 */
	uint64_t future; /* readings ahead of CLOCK_MONOTONIC read just after */
};

static void *cached_reader(void *arg)
{
	struct reader *r = arg;
	while (!atomic_load_explicit(&readers_stop, memory_order_relaxed)) {
		uint64_t c = sluice_clock_now(&sluice_clock_cached);
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t m = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
		r->reads++;
		r->zero += (c == 0);
		r->future += (c > m);
	}
	return NULL;
}

Test(clock, cached_readers_during_start_stop, .fini = stop_ticker)
{
	struct reader r[READERS] = { 0 };
	atomic_store(&readers_stop, 0);
	for (int i = 0; i < READERS; i++)
		cr_assert_eq(pthread_create(&r[i].thread, NULL, cached_reader, &r[i]), 0,
		             "pthread_create %d", i);
	for (int round = 0; round < 20; round++) {
		cr_assert_eq(sluice_clock_cached_start(100000), 0, "start round %d failed", round);
		sleep_ns(2000000);
		sluice_clock_cached_stop();
		cr_assert_eq(sluice_clock_cached_running(), 0, "running after stop, round %d", round);
		sleep_ns(1000000);
	}
	atomic_store(&readers_stop, 1);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i].thread, NULL);
	for (int i = 0; i < READERS; i++) {
		cr_assert_gt(r[i].reads, 0, "reader %d never read", i);
		cr_assert_eq(r[i].zero, 0, "reader %d: %llu of %llu readings were 0", i,
		             (unsigned long long)r[i].zero, (unsigned long long)r[i].reads);
		cr_assert_eq(r[i].future, 0,
		             "reader %d: %llu of %llu readings were ahead of CLOCK_MONOTONIC", i,
		             (unsigned long long)r[i].future, (unsigned long long)r[i].reads);
	}
}

/* ---- period floor (clock.h, PERIOD FLOOR) ------------------------------- */

/* Each limiter that validates a step against the cached clock, made with
 * that step (and destroyed again: the record must outlive it). */
enum floor_module {
	FM_FIXED,
	FM_WINDOW,
	FM_GCRA,
	FM_GCRA_SET_RATE, /* a reconfiguration validates its new step too */
	FM_LEAKY_METER,
	FM_LOG,
	FM_WARMUP,
	FM_KEYED_FIXED,
	FM_KEYED_WINDOW,
};

struct floor_case {
	enum floor_module module;
	char name[24];
};

static int make_with_step(enum floor_module m, uint64_t step)
{
	const sluice_clock_t *ck = &sluice_clock_cached;
	int rc = -1;
	switch (m) {
	case FM_FIXED: {
		sluice_fixed_t f;
		sluice_fixed_config_t cfg = { .limit = 1, .window_ns = step, .clock = ck };
		rc = sluice_fixed_init(&f, &cfg);
		break;
	}
	case FM_WINDOW: {
		sluice_window_t w;
		sluice_window_config_t cfg = { .limit = 10, .window_ns = 4 * step, .buckets = 4,
			                       .clock = ck };
		rc = sluice_window_init(&w, &cfg);
		if (rc == 0)
			sluice_window_destroy(&w);
		break;
	}
	case FM_GCRA: {
		sluice_gcra_t g;
		sluice_gcra_config_t cfg = { .rate = 1, .period_ns = step, .burst = 1, .clock = ck };
		rc = sluice_gcra_init(&g, &cfg);
		if (rc == 0)
			sluice_gcra_destroy(&g);
		break;
	}
	case FM_GCRA_SET_RATE: {
		sluice_gcra_t g;
		sluice_gcra_config_t cfg = { .rate = 1, .period_ns = SLUICE_CACHED_PERIOD_MAX_NS,
			                     .burst = 1, .clock = ck };
		cr_assert_eq(sluice_gcra_init(&g, &cfg), 0, "gcra with tau = 1 s refused");
		rc = sluice_gcra_set_rate(&g, 1, step);
		sluice_gcra_destroy(&g);
		break;
	}
	case FM_LEAKY_METER: {
		sluice_leaky_t l;
		sluice_leaky_config_t cfg = { .rate = 1, .period_ns = step,
			                      .mode = SLUICE_LEAKY_METER, .depth = 0, .clock = ck };
		rc = sluice_leaky_init(&l, &cfg);
		if (rc == 0)
			sluice_leaky_destroy(&l);
		break;
	}
	case FM_LOG: {
		sluice_log_t lg;
		sluice_log_config_t cfg = { .limit = 4, .window_ns = step, .clock = ck };
		rc = sluice_log_init(&lg, &cfg);
		if (rc == 0)
			sluice_log_destroy(&lg);
		break;
	}
	case FM_WARMUP: {
		sluice_warmup_t w;
		sluice_warmup_config_t cfg = { .rate = 1, .period_ns = step,
			                       .warmup_ns = 64 * step, .clock = ck };
		rc = sluice_warmup_init(&w, &cfg);
		if (rc == 0)
			sluice_warmup_destroy(&w);
		break;
	}
	case FM_KEYED_FIXED:
	case FM_KEYED_WINDOW: {
		sluice_keyed_t k;
		sluice_keyed_config_t cfg = { .algo = SLUICE_ALGO_FIXED, .capacity = 8,
			                      .limit = 1, .window_ns = step };
		if (m == FM_KEYED_WINDOW) {
			cfg.algo = SLUICE_ALGO_WINDOW;
			cfg.window_ns = 4 * step;
			cfg.buckets = 4;
		}
		rc = sluice_keyed_init(&k, &cfg, ck);
		if (rc == 0)
			sluice_keyed_destroy(&k);
		break;
	}
	}
	return rc;
}

ParameterizedTestParameters(clock, floor_every_limiter_records_its_step)
{
	static struct floor_case cases[] = {
		{ FM_FIXED, "fixed" },
		{ FM_WINDOW, "window" },
		{ FM_GCRA, "gcra" },
		{ FM_GCRA_SET_RATE, "gcra set_rate" },
		{ FM_LEAKY_METER, "leaky meter" },
		{ FM_LOG, "log" },
		{ FM_WARMUP, "warmup" },
		{ FM_KEYED_FIXED, "keyed fixed" },
		{ FM_KEYED_WINDOW, "keyed window" },
	};
	return cr_make_param_array(struct floor_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct floor_case *fc, clock, floor_every_limiter_records_its_step,
                  .fini = stop_ticker)
{
	const uint64_t ms = 1000000;
	/* Stopped at the default period (1 ms): the resolution is the period. */
	cr_assert_eq(sluice_clock_resolution_ns(&sluice_clock_cached), ms, "default period");

	/* A step below the period: refused, and nothing recorded. */
	int rc = make_with_step(fc->module, ms - 1);
	cr_assert_eq(rc, SLUICE_ERESOLUTION, "%s: step 1 ms - 1 ns on a 1 ms clock: %d (%s)",
	             fc->name, rc, sluice_err_name(rc));

	/* A step of 2 ms: accepted and recorded, though the limiter is gone. */
	rc = make_with_step(fc->module, 2 * ms);
	cr_assert_eq(rc, 0, "%s: step 2 ms on a 1 ms clock: %d (%s)", fc->name, rc,
	             sluice_err_name(rc));
	rc = sluice_clock_cached_start(2 * ms + 1);
	cr_assert_eq(rc, SLUICE_ERESOLUTION,
	             "%s: start(2 ms + 1 ns) above the recorded 2 ms step: %d (%s)", fc->name,
	             rc, sluice_err_name(rc));
	cr_assert_eq(sluice_clock_cached_running(), 0, "%s: a refused start started it",
	             fc->name);
	cr_assert_eq(sluice_clock_resolution_ns(&sluice_clock_cached), ms,
	             "%s: a refused start changed the period", fc->name);
	rc = sluice_clock_cached_start(2 * ms);
	cr_assert_eq(rc, 0, "%s: start(2 ms), the recorded step itself: %d (%s)", fc->name, rc,
	             sluice_err_name(rc));
	sluice_clock_cached_stop();
}

Test(clock, floor_a_refused_step_records_nothing, .fini = stop_ticker)
{
	/* Only steps that passed are recorded: a failed check must not pin
	 * the clock (here: below the 1 ms default, then start(1 s) is fine). */
	cr_assert_eq(sluice__clock_require_step(&sluice_clock_cached, 999999), SLUICE_ERESOLUTION,
	             "999999 ns on a 1 ms clock accepted");
	cr_assert_eq(sluice_clock_cached_start(SLUICE_CACHED_PERIOD_MAX_NS), 0,
	             "start(1 s) refused after a refused step");
	sluice_clock_cached_stop();
}

Test(clock, floor_keeps_the_finest_step_and_never_loosens, .fini = stop_ticker)
{
	const uint64_t ms = 1000000;
	sluice_clock_t *ck = &sluice_clock_cached;
	cr_assert_eq(sluice_clock_cached_start(2 * ms), 0, "start(2 ms)");
	cr_assert_eq(sluice__clock_require_step(ck, 2 * ms - 1), SLUICE_ERESOLUTION,
	             "a step below the running period accepted");
	cr_assert_eq(sluice__clock_require_step(ck, 5 * ms), 0, "5 ms on a 2 ms clock");
	cr_assert_eq(sluice__clock_require_step(ck, 3 * ms), 0, "3 ms on a 2 ms clock");
	cr_assert_eq(sluice__clock_require_step(ck, 10 * ms), 0, "10 ms on a 2 ms clock");
	/* The floor is 3 ms: the finest of 5, 3 and 10. */
	cr_assert_eq(sluice_clock_cached_start(3 * ms + 1), SLUICE_ERESOLUTION,
	             "start above the finest recorded step (3 ms) accepted");
	cr_assert_eq(sluice_clock_cached_running(), 1, "a refused start stopped the ticker");
	cr_assert_eq(sluice_clock_resolution_ns(ck), 2 * ms, "a refused start changed the period");
	cr_assert_eq(sluice_clock_cached_start(3 * ms), 0, "start(3 ms) = the floor refused");
	cr_assert_eq(sluice_clock_cached_start(1000), 0, "start(1 us) below the floor refused");
	cr_assert_eq(sluice_clock_cached_start(0), 0, "start(0): the 1 ms default is finer");
	/* Stopped, a first start is held to the floor as well. */
	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_start(4 * ms), SLUICE_ERESOLUTION,
	             "stopped: start(4 ms) above the 3 ms floor accepted");
	cr_assert_eq(sluice_clock_cached_running(), 0, "a refused first start started it");
	cr_assert_eq(sluice_clock_resolution_ns(ck), ms, "a refused first start changed the period");
	/* A coarser step later does not loosen the floor. */
	cr_assert_eq(sluice__clock_require_step(ck, SLUICE_CACHED_PERIOD_MAX_NS), 0, "1 s step");
	cr_assert_eq(sluice_clock_cached_start(4 * ms), SLUICE_ERESOLUTION,
	             "the floor loosened after a coarser step");
}

Test(clock, floor_other_clocks_check_and_record_nothing, .fini = stop_ticker)
{
	sluice_clock_t manual;
	sluice_clock_manual_init(&manual, 0);
	uint64_t tick = sluice_clock_resolution_ns(&sluice_clock_coarse);
	cr_assert_eq(sluice__clock_require_step(&manual, 0), SLUICE_ERESOLUTION, "manual: 0 ns");
	cr_assert_eq(sluice__clock_require_step(&manual, 1), 0, "manual: 1 ns");
	cr_assert_eq(sluice__clock_require_step(&sluice_clock_monotonic, 1), 0, "monotonic: 1 ns");
	cr_assert_eq(sluice__clock_require_step(&sluice_clock_coarse, tick - 1),
	             SLUICE_ERESOLUTION, "coarse: a tick - 1 ns accepted");
	cr_assert_eq(sluice__clock_require_step(&sluice_clock_coarse, tick), 0, "coarse: a tick");
	sluice_clock_t bad = { .kind = (sluice_clock_kind_t)7 };
	cr_assert_eq(sluice__clock_require_step(&bad, 1000), SLUICE_ECLOCK, "unknown kind");
	/* None of them is the cached clock: its period may still go to 1 s. */
	cr_assert_eq(sluice_clock_cached_start(SLUICE_CACHED_PERIOD_MAX_NS), 0,
	             "a step on another clock pinned the cached clock");
}

/*
 * The case: a ring validated against the 1 ms ticker (L = 10 per
 * 100 ms in 1 ms buckets), then start(1 s).  Before the floor, the start
 * succeeded and the ring admitted 20 in 2 s (readings in 1 s steps) instead
 * of about 205.  Now the start is refused, the ticker keeps 1 ms, and the
 * ring admits 30 (three windows' worth) in well under 1.5 s: at a 1 s
 * period that would take more than 2 s.  The bound is a liveness bound, 5x
 * what 30 permits take on a 1 ms ticker, not a speed assertion.
 */
Test(clock, floor_refused_start_leaves_the_ring_at_its_rate, .fini = stop_ticker)
{
	const uint64_t ms = 1000000;
	cr_assert_eq(sluice_clock_cached_start(ms), 0, "start(1 ms)");
	sluice_window_t w;
	sluice_window_config_t cfg = { .limit = 10, .window_ns = 100 * ms, .buckets = 100,
		                       .clock = &sluice_clock_cached };
	cr_assert_eq(sluice_window_init(&w, &cfg), 0, "ring with 1 ms buckets refused");
	int rc = sluice_clock_cached_start(SLUICE_CACHED_PERIOD_MAX_NS);
	cr_assert_eq(rc, SLUICE_ERESOLUTION, "start(1 s) under a 1 ms ring: %d (%s)", rc,
	             sluice_err_name(rc));
	cr_assert_eq(sluice_clock_cached_running(), 1, "the refused start stopped the ticker");
	cr_assert_eq(sluice_clock_resolution_ns(&sluice_clock_cached), ms,
	             "the refused start changed the period to %llu",
	             (unsigned long long)sluice_clock_resolution_ns(&sluice_clock_cached));

	uint64_t t0 = raw_ns(CLOCK_MONOTONIC);
	int admitted = 0;
	while (admitted < 30 && raw_ns(CLOCK_MONOTONIC) - t0 < 1500 * ms) {
		rc = sluice_window_acquire(&w, 1, NULL);
		cr_assert_geq(rc, 0, "acquire: %d (%s)", rc, sluice_err_name(rc));
		admitted += rc;
		if (rc == 0)
			sleep_ns(ms);
	}
	cr_assert_geq(admitted, 30, "the ring admitted %d in 1.5 s with L = 10 per 100 ms",
	              admitted);
	sluice_window_destroy(&w);
}

/* ---- what another thread cannot do to the ticker ------------------------ */

/* SigBlk of one thread of this process, from /proc (hex mask). */
static unsigned long long thread_sigblk(long tid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/self/task/%ld/status", tid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot open %s", path);
	unsigned long long m = 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "SigBlk:", 7) == 0)
			m = strtoull(line + 7, NULL, 16);
	fclose(f);
	return m;
}

/* The task ids in /proc/self/task, into @ids (at most @max); the count. */
static int task_ids(long *ids, int max)
{
	DIR *d = opendir("/proc/self/task");
	cr_assert_not_null(d, "cannot open /proc/self/task");
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < max)
		if (e->d_name[0] != '.')
			ids[n++] = strtol(e->d_name, NULL, 10);
	closedir(d);
	return n;
}

/* The ticker blocks every signal: a process-directed signal's handler never
 * runs on it (it would stall the clock for as long as it runs, and take a
 * signal the application expects on its own threads).  Found as the one
 * task start() added.  SIGKILL and SIGSTOP cannot be blocked, and glibc
 * keeps its two internal signals (32, 33) out of any mask, so "every" is
 * 1..64 but those four. */
Test(clock, ticker_thread_blocks_every_signal, .fini = stop_ticker)
{
	/* qemu-user (the arm64 stage of scripts/test.sh) emulates the guest's
	 * signal masks and keeps the host signals it needs (SIGBUS, SIGSEGV,
	 * ...) out of the real thread's mask, which is what /proc shows. */
	if (getenv("SLUICE_TEST_EMULATOR"))
		cr_skip_test("under qemu-user /proc shows the emulator's signal mask, not the "
		             "ticker's");
	/* Warm up: the first thread creation may bring runtime helpers. */
	cr_assert_eq(sluice_clock_cached_start(0), 0, "warm-up start failed");
	int warm = thread_count();
	sluice_clock_cached_stop();
	wait_thread_count(warm - 1);

	/* The ticker must not just inherit a full mask from its creator: start
	 * it from a thread that blocks nothing (Criterion's test thread may
	 * block some signals of its own). */
	sigset_t none, saved;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, &saved);
	long before[64], after[64];
	int nb = task_ids(before, 64);
	cr_assert_eq(sluice_clock_cached_start(0), 0, "start failed");
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	/* glibc creates a thread with every signal blocked and installs the
	 * creator's mask once it runs: wait until the ticker has run (its
	 * first tick replaces the reading start() published), up to ~2 s. */
	uint64_t published = atomic_load(&sluice_inline_cached_now);
	for (int i = 0; i < 2000 && atomic_load(&sluice_inline_cached_now) == published; i++)
		sleep_ns(1000000);
	cr_assert_neq(atomic_load(&sluice_inline_cached_now), published, "the ticker never ticked");
	int na = task_ids(after, 64);
	cr_assert_eq(na, nb + 1, "start added %d tasks, expected 1", na - nb);
	long ticker = 0;
	for (int i = 0; i < na; i++) {
		int old = 0;
		for (int k = 0; k < nb; k++)
			old |= before[k] == after[i];
		if (!old)
			ticker = after[i];
	}
	cr_assert_neq(ticker, 0, "the ticker's task not found");
	unsigned long long m = thread_sigblk(ticker);
	for (int sig = 1; sig <= 64; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || sig == 32 || sig == 33)
			continue;
		cr_assert(m & (1ULL << (sig - 1)),
		          "the ticker (task %ld) does not block signal %d (SigBlk %016llx)", ticker,
		          sig, m);
	}
	sluice_clock_cached_stop();
}

/*
 * A thread cancelled inside stop() (pthread_join is a cancellation point)
 * must not leave the ticker's mutex locked: every later start, stop and
 * limiter init on the cached clock would block for ever.  The thread
 * cancels itself (deferred: the cancel is pending) and calls stop(); the
 * cancellation must take effect only after stop() returned.  start() from
 * another thread must then return, checked with a bounded join.
 */
static void *cancelled_stopper(void *arg)
{
	_Atomic int *returned = arg;
	pthread_cancel(pthread_self());
	sluice_clock_cached_stop();
	atomic_store(returned, 1);
	pthread_testcancel();
	return NULL;
}

static void *starter(void *arg)
{
	_Atomic int *rc = arg;
	atomic_store(rc, sluice_clock_cached_start(0));
	return NULL;
}

Test(clock, cancelled_stop_leaves_no_lock_held, .fini = stop_ticker)
{
	cr_assert_eq(sluice_clock_cached_start(0), 0, "start failed");
	_Atomic int returned = 0;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, cancelled_stopper, &returned), 0, "pthread_create");
	void *res;
	pthread_join(t, &res);
	cr_assert_eq(res, PTHREAD_CANCELED, "the stopper was not cancelled at all");
	cr_assert_eq(atomic_load(&returned), 1,
	             "the stopper was cancelled inside stop() (at its pthread_join)");
	cr_assert_eq(sluice_clock_cached_running(), 0, "stop() did not finish");

	_Atomic int rc = 1;
	pthread_t s;
	cr_assert_eq(pthread_create(&s, NULL, starter, &rc), 0, "pthread_create");
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 5;
	int j = pthread_timedjoin_np(s, NULL, &deadline);
	cr_assert_eq(j, 0, "start() after a cancelled stop() blocked for 5 s (mutex left locked)");
	cr_assert_eq(atomic_load(&rc), 0, "start() after a cancelled stop() failed");
}

/* ---- what a lagging reading does (clock.h, WORST CASE) ------------------ */

/*
 * A ticker stalled for D = 1 s, seen through a manual clock that stands
 * still while "real" time runs: GCRA with T = 100 ms and b = 5.  At real
 * time 10.99 s the reading is still 10 s and the full bucket passes (5);
 * at real 11 s the stall ends, the reading jumps to 11 s, and the bucket,
 * refilled over the 1 s the limiter saw, passes 5 again.  So 10 admissions
 * fall within 10 ms of real time, twice GCRA's b + 10 ms / T = 5: a lag is
 * not "never an extra admission" over real time.  And no more than the
 * bound for 10 ms + D, b + 1010 ms / T = 15, as clock.h states.
 */
Test(clock, lag_widens_a_real_interval_by_the_lag_and_no_more)
{
	const uint64_t ms = 1000000, T = 100 * ms, b = 5, D = 1000 * ms;
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 10000 * ms);
	sluice_gcra_t g;
	sluice_gcra_config_t cfg = { .rate = 1, .period_ns = T, .burst = b, .clock = &m };
	cr_assert_eq(sluice_gcra_init(&g, &cfg), 0, "gcra init");

	/* Real time 10.99 s, reading frozen at 10 s since real 10 s. */
	uint64_t early = 0;
	while (early < 100 && sluice_gcra_acquire(&g, 1, NULL) == 1)
		early++;
	/* Real time 11 s: the stall ends. */
	sluice_clock_manual_set(&m, 11000 * ms);
	uint64_t late = 0;
	while (late < 100 && sluice_gcra_acquire(&g, 1, NULL) == 1)
		late++;
	uint64_t within_10ms = early + late;
	cr_assert_eq(early, b, "frozen reading: %llu admitted, expected the burst %llu",
	             (unsigned long long)early, (unsigned long long)b);
	cr_assert_gt(within_10ms, b + (10 * ms) / T,
	             "a 1 s lag put %llu admissions within 10 ms of real time: expected more "
	             "than the unlagged bound %llu (else this test shows nothing)",
	             (unsigned long long)within_10ms, (unsigned long long)(b + (10 * ms) / T));
	cr_assert_leq(within_10ms, b + (10 * ms + D) / T,
	              "%llu admissions within 10 ms of real time with a 1 s lag: above the "
	              "bound for 10 ms + D, %llu",
	              (unsigned long long)within_10ms,
	              (unsigned long long)(b + (10 * ms + D) / T));
	sluice_gcra_destroy(&g);
}
