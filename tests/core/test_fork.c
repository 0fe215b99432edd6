/* SPDX-License-Identifier: MIT */
/*
 * test_fork.c - the cached clock across fork() (clock.h, FORK).
 *
 * What a child must see, whatever the parent's ticker was doing at the fork:
 *   - time that advances (the ticker thread did not survive the fork);
 *   - sluice_clock_cached_running() == 0, and reads that are exactly
 *     CLOCK_MONOTONIC (the documented fallback);
 *   - a sluice_clock_cached_start() that starts a real ticker, and a stop()
 *     that stops it: no lock, condition variable or flag left over from the
 *     parent's ticker may block, freeze or lie;
 *   - the parent's record of the finest step a limiter was validated
 *     against (item 8): the child's limiters are the parent's.
 * And the parent's ticker keeps running, with its locks usable, after it.
 *
 * Every child does its checks and leaves with _exit(code): 0 means all held,
 * any other code names the check that failed (child_fail_name).  The parent
 * waits for each child with a timeout: a child that has not exited after
 * HANG_NS is hung (a lock inherited held, a join of a thread that does not
 * exist in the child), is killed with SIGKILL, and fails the test.
 *
 * Sanitizers.  ThreadSanitizer kills a child of a multi-threaded process
 * that creates a thread ("starting new threads after multi-threaded fork is
 * not supported. Dying"), so under TSan the children never start a ticker
 * (the start/stop-in-child checks run in the plain build).
 * AddressSanitizer's allocator (GCC 12's libasan) takes no lock around
 * fork(): a child forked while another thread of the parent was inside it
 * blocks for ever on its first allocation (seen with gdb: a child's new
 * ticker stuck in SizeClassAllocator64::GetFromAllocator, from glibc's
 * pthread_getattr_np, 1 child in 10,000; and a child's own new ticker that
 * never ticked within 2 s, once in a CI run), so under ASan the loop's churn
 * thread only re-periods the ticker and never creates or joins one, and no
 * child creates a thread either (glibc's own malloc is fork-safe, so the
 * plain build keeps the full churn and the children's own tickers).  A fork
 * costs about 0.6 ms here plain and 4 ms under either sanitizer (1,000 TSan
 * forks took 4.3 s, 10,000 ASan forks 41 s), so the loop here runs
 * LOOP_FORKS (100) forks in every build, and the stress suite's fork-loop
 * (stress/stress_fork.c, the same loop: fork_loop.h) runs 10,000 plain and
 * 3,000 under a sanitizer (stress/meson.build).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice/clock.h"
#include "sluice/error.h"
#include "sluice/window.h"

#include "fork_loop.h"

TestSuite(fork, .timeout = 120);

/* The loop's default length (SLUICE_FORK_LOOP_FORKS overrides it): the
 * 10,000-fork loop is the stress suite's fork-loop (stress_fork.c). */
#define LOOP_FORKS 100
#define LOOP_MAX_BAD 3 /* stop the loop after this many bad children */

/* ---- helpers (parent and child) --------------------------------------- */

static void stop_ticker(void)
{
	sluice_clock_cached_stop();
}

typedef int (*child_fn)(void *arg);

/* Fork, run @fn in the child, and assert that it exited with 0 in time. */
static void run_child(const char *what, child_fn fn, void *arg)
{
	fflush(NULL); /* no buffered output is written twice */
	pid_t pid = fork();
	cr_assert_geq(pid, 0, "%s: fork failed: %s", what, strerror(errno));
	if (pid == 0)
		_exit(fn(arg));
	int code = wait_child(pid);
	cr_assert_neq(code, -1, "%s: the child hung (alive after %llu s; killed)", what,
	              (unsigned long long)(HANG_NS / 1000000000ULL));
	cr_assert_eq(code, 0, "%s: child exit %d: %s", what, code, child_fail_name(code));
}

/* The parent's clock after a fork: still running, still ticking, and its
 * locks still usable (start and stop return). */
static void assert_parent_ticker_ok(const char *what, uint64_t period)
{
	cr_assert_eq(sluice_clock_cached_running(), 1, "%s: parent's ticker not running", what);
	cr_assert(word_advances(), "%s: parent's cached word stopped advancing", what);
	cr_assert_eq(sluice_clock_resolution_ns(&sluice_clock_cached), period,
	             "%s: parent's period changed", what);
	cr_assert_eq(sluice_clock_cached_start(period), 0, "%s: parent's start failed", what);
}

/* ---- one fork at a time ----------------------------------------------- */

static int child_reads_fn(void *arg)
{
	(void)arg;
	return child_reads();
}

Test(fork, child_clock_advances_and_reads_monotonic, .fini = stop_ticker)
{
	cr_assert_eq(sluice_clock_cached_start(1000000), 0, "start(1 ms) failed");
	cr_assert(word_advances(), "parent's ticker does not tick before the fork");
	run_child("ticker running", child_reads_fn, NULL);
	assert_parent_ticker_ok("after the fork", 1000000);
	sluice_clock_cached_stop();
	/* A child of a stopped clock: the same, trivially. */
	run_child("ticker stopped", child_reads_fn, NULL);
}

static int child_start_stop_fn(void *arg)
{
	int rc = child_reads();
	if (rc != C_OK)
		return rc;
	return child_start_stop(*(const uint64_t *)arg, 2);
}

Test(fork, child_can_start_and_stop_its_own_ticker, .fini = stop_ticker)
{
	if (UNDER_TSAN || UNDER_ASAN)
		cr_skip_test("the sanitizers' runtimes do not support creating threads in the "
		             "child of a multi-threaded fork (see the file's comment)");
	if (UNDER_EMULATOR)
		cr_skip_test("qemu-user cannot create threads in the child of a multi-threaded "
		             "fork (fork_loop.h)");
	uint64_t period = 1000000, child_period = 200000;
	cr_assert_eq(sluice_clock_cached_start(period), 0, "start(1 ms) failed");
	run_child("ticker running", child_start_stop_fn, &child_period);
	assert_parent_ticker_ok("after the fork", period);

	/* Never started in the parent: the child's start is a first start. */
	sluice_clock_cached_stop();
	run_child("ticker stopped", child_start_stop_fn, &child_period);
	cr_assert_eq(sluice_clock_cached_running(), 0, "the child's start reached the parent");
}

/* A child of a child: the handlers are registered once, but run at every
 * fork, from any process. */
static int grandchild_fn(void *arg)
{
	int rc = child_reads();
	if (rc != C_OK)
		return rc;
	if (!UNDER_TSAN && !UNDER_ASAN && !UNDER_EMULATOR) {
		if (sluice_clock_cached_start(*(const uint64_t *)arg) != 0)
			return C_START;
		if (!word_advances())
			return C_START_DEAD;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return C_START;
	if (pid == 0)
		_exit(child_reads());
	int code = wait_child(pid);
	sluice_clock_cached_stop();
	return code == -1 ? 100 : code;
}

Test(fork, grandchild_sees_the_same, .fini = stop_ticker)
{
	uint64_t period = 100000;
	cr_assert_eq(sluice_clock_cached_start(period), 0, "start(100 us) failed");
	run_child("child and grandchild", grandchild_fn, &period);
	assert_parent_ticker_ok("after the fork", period);
}

/* Item 8 across a fork: a ring validated in the parent against the 1 ms
 * ticker is the child's ring too, so the child may not coarsen the clock
 * under it either. */
static int child_record_fn(void *arg)
{
	sluice_window_t *w = arg;
	int rc = child_reads();
	if (rc != C_OK)
		return rc;
	if (sluice_clock_cached_start(SLUICE_CACHED_PERIOD_MAX_NS) != SLUICE_ERESOLUTION)
		return C_RECORD;
	if (sluice_clock_resolution_ns(&sluice_clock_cached) != 1000000)
		return C_RECORD;
	/* The ring still decides in the child (falling back to CLOCK_MONOTONIC). */
	if (sluice_window_acquire(w, 1, NULL) < 0)
		return C_RECORD;
	return C_OK;
}

Test(fork, child_inherits_the_validated_step, .fini = stop_ticker)
{
	cr_assert_eq(sluice_clock_cached_start(1000000), 0, "start(1 ms) failed");
	sluice_window_t w;
	sluice_window_config_t cfg = { .limit = 1000, .window_ns = 100000000, .buckets = 100,
		                       .clock = &sluice_clock_cached };
	cr_assert_eq(sluice_window_init(&w, &cfg), 0, "ring with 1 ms buckets refused");
	run_child("ring validated at 1 ms", child_record_fn, &w);
	sluice_window_destroy(&w);
}

/* ---- the fork loop ---------------------------------------------------- */

/*
 * LOOP_FORKS forks (or SLUICE_FORK_LOOP_FORKS) while the ticker runs at the shortest period (it takes
 * its lock every microsecond, so forks land while it holds it) and a churn
 * thread (churn_main, fork_loop.h) re-periods it between 1 and 2 us (start() holds both locks and signals the condition
 * variable) and, one round in 64 outside ASan, stops and restarts it (the
 * ticker's creation and join).  Each child checks child_reads(); outside the sanitizers one
 * child in 4 also starts and stops a ticker of its own, which must neither
 * block on a lock inherited held nor join a thread that is not there.
 */
static int loop_child_fn(unsigned i)
{
	int rc = child_reads();
	if (rc != C_OK || UNDER_TSAN || UNDER_ASAN || UNDER_EMULATOR || (i & 3) != 0)
		return rc;
	return child_start_stop(1000, 2);
}

Test(fork, loop_of_forks_with_the_ticker_running, .fini = stop_ticker, .timeout = 300)
{
	struct fork_loop l = { .forks = fork_loop_forks(LOOP_FORKS), .max_bad = LOOP_MAX_BAD,
		               .child = loop_child_fn };
	cr_assert_eq(sluice_clock_cached_start(1000), 0, "start(1 us) failed");
	pthread_t churn;
	atomic_store(&churn_stop, 0);
	churn_period = 1000;
	cr_assert_eq(pthread_create(&churn, NULL, churn_main, NULL), 0, "pthread_create");
	fork_loop_run(&l);
	atomic_store(&churn_stop, 1);
	pthread_join(churn, NULL);
	cr_assert_eq(l.fork_errno, 0, "fork %u failed: %s", l.done, strerror(l.fork_errno));
	cr_log_info("%u forks in %.1f s (%s): %u hung, %u failed", l.done, l.elapsed_ns / 1e9,
	            UNDER_TSAN ? "TSan" : UNDER_ASAN ? "ASan" : "no sanitizer", l.hung, l.failed);
	cr_assert_eq(l.hung + l.failed, 0,
	             "%u of %u children went wrong (%u hung, %u failed); the first, fork %u: %s",
	             l.hung + l.failed, l.done, l.hung, l.failed, l.first_at,
	             l.first_code == -1 ? "hung" : child_fail_name(l.first_code));
	cr_assert_eq(l.done, l.forks, "only %u of %u forks ran", l.done, l.forks);
	cr_assert_eq(sluice_clock_cached_running(), 1, "parent's ticker stopped by the loop");
	cr_assert(word_advances(), "parent's ticker no longer ticks after the loop");
}
