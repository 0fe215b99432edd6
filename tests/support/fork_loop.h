/* SPDX-License-Identifier: MIT */
/*
 * fork_loop.h - what tests/core/test_fork.c and stress/stress_fork.c share: the
 * sanitizer flags their children adapt to, the child's clock checks and
 * their exit codes, the bounded wait for a child, the churn thread that
 * re-periods (and restarts) the parent's ticker while it forks, and the
 * fork loop itself (fork_loop_run), SLUICE_FORK_LOOP_FORKS children long:
 * 100 in the unit test, 10,000 in the stress suite's fork-loop.
 *
 * Sanitizers (test_fork.c's comment has the evidence): under TSan a child
 * must not create a thread, so no child starts a ticker; under ASan the
 * churn thread never stops and restarts the ticker (GCC 12's libasan
 * allocator is not fork-safe).
 */
#ifndef SLUICE_FORK_LOOP_H
#define SLUICE_FORK_LOOP_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice/clock.h"
#include "sluice/static/clock.h" /* the ticker's word, sluice_inline_cached_now */

#include "test_mono.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Under an emulator: the arm64 stage of scripts/test.sh runs the tests under
 * qemu-user and says so in SLUICE_TEST_EMULATOR.  qemu-user 7.2, like the
 * sanitizers' runtimes, cannot create a thread in the child of a
 * multi-threaded fork (the child asserts in qemu_plugin_vcpu_init_hook and
 * exits 127), and each fork of the emulator costs far more than a native
 * one. */
#include <stdlib.h>
#define UNDER_EMULATOR (getenv("SLUICE_TEST_EMULATOR") != NULL)

#define HANG_NS (10ULL * 1000000000ULL)        /* a child alive after 10 s is hung */
/* "frozen": no change in 5 s.  A live ticker advances every period (1 us
 * to 1 ms here); 5 s, not less, because under a sanitizer on a loaded
 * 2-core machine a child can wait seconds to run (2 s failed once in
 * 3,000 ASan forks), and a frozen ticker never advances however long. */
#define ADVANCE_WAIT_NS (5ULL * 1000000000ULL)

/* Child exit codes: which check failed. */
enum {
	C_OK = 0,
	C_FROZEN,       /* the cached reading did not advance within 5 s */
	C_STALE,        /* a reading older than CLOCK_MONOTONIC at the child's start */
	C_RUNNING,      /* running() said 1 with no ticker thread in the child */
	C_NOT_FALLBACK, /* a stopped clock's read outside its CLOCK_MONOTONIC bracket */
	C_START,        /* start() in the child failed */
	C_START_DEAD,   /* start() returned 0 but no ticker publishes in the child */
	C_NOT_RUNNING,  /* running() said 0 after a successful start() */
	C_STOP,         /* after stop(): running() 1 or the cached word not 0 */
	C_RECORD,       /* the parent's validated step was not inherited */
	C_UNUSED,
};

static inline const char *child_fail_name(int code)
{
	static const char *names[] = {
		"ok", "cached reading frozen", "reading older than the child's start",
		"running() says 1 with no ticker", "stopped reads are not CLOCK_MONOTONIC",
		"start() failed", "start() returned 0 but nothing ticks",
		"running() says 0 after start()", "stop() did not stop",
		"validated step not inherited", "?",
	};
	return code >= 0 && code < C_UNUSED ? names[code] : "?";
}

/* The cached word (not the fallback) changes within ADVANCE_WAIT_NS: spin
 * briefly, then sleep 10 us a step. */
static inline int word_advances(void)
{
	uint64_t w0 = atomic_load_explicit(&sluice_inline_cached_now, memory_order_relaxed);
	uint64_t start = mono_ns();
	for (int i = 0; mono_ns() - start < ADVANCE_WAIT_NS; i++) {
		uint64_t w = atomic_load_explicit(&sluice_inline_cached_now, memory_order_relaxed);
		if (w != 0 && w != w0)
			return 1;
		if (i >= 1000)
			sleep_ns(10000);
	}
	return 0;
}

/* The child's first checks, whatever the parent was doing: time moves and is
 * not older than the child itself; the clock says it is stopped and reads
 * exactly CLOCK_MONOTONIC. */
static inline int child_reads(void)
{
	uint64_t born = mono_ns();
	uint64_t t0 = sluice_clock_now(&sluice_clock_cached);
	uint64_t t = t0;
	for (int i = 0; t == t0 && mono_ns() - born < ADVANCE_WAIT_NS; i++) {
		if (i >= 1000)
			sleep_ns(10000);
		t = sluice_clock_now(&sluice_clock_cached);
	}
	if (t == t0)
		return C_FROZEN;
	/* A reading taken after `born` must not be older than it: a frozen
	 * or stale inherited word is (it was written before the fork). */
	uint64_t late = sluice_clock_now(&sluice_clock_cached);
	if (late < born)
		return C_STALE;
	if (sluice_clock_cached_running() != 0)
		return C_RUNNING;
	for (int i = 0; i < 100; i++) {
		uint64_t before = mono_ns();
		uint64_t c = sluice_clock_now(&sluice_clock_cached);
		uint64_t after = mono_ns();
		if (c < before || c > after)
			return C_NOT_FALLBACK;
	}
	return C_OK;
}

/* start/stop in the child, @rounds times: a ticker of the child's own, then
 * none. */
static inline int child_start_stop(uint64_t period, int rounds)
{
	for (int round = 0; round < rounds; round++) {
		int rc = sluice_clock_cached_start(period);
		if (rc != 0)
			return C_START;
		if (sluice_clock_cached_running() != 1)
			return C_NOT_RUNNING;
		if (!word_advances())
			return C_START_DEAD;
		sluice_clock_cached_stop();
		if (sluice_clock_cached_running() != 0 ||
		    atomic_load_explicit(&sluice_inline_cached_now, memory_order_relaxed) != 0)
			return C_STOP;
	}
	return C_OK;
}

/* Wait for @pid at most HANG_NS.  Return its exit code, 128 + the signal
 * that killed it, -1 when it hung (then it is killed and reaped), or -2
 * when waitpid fails. */
static inline int wait_child(pid_t pid)
{
	uint64_t start = mono_ns();
	uint64_t nap = 20000; /* 20 us, doubling to 1 ms */
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (r < 0 && errno != EINTR)
			return -2;
		if (mono_ns() - start > HANG_NS) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return -1;
		}
		sleep_ns(nap);
		if (nap < 1000000)
			nap *= 2;
	}
}

/* The churn thread: until churn_stop, re-period the ticker between
 * churn_period and twice that (start() holds both locks and signals the
 * condition variable) and, one round in 64 outside ASan, stop and restart
 * it (the ticker's creation and join).  Set both before starting it. */
static _Atomic int churn_stop;
static uint64_t churn_period;

static inline void *churn_main(void *arg)
{
	(void)arg;
	for (uint64_t round = 0; !atomic_load_explicit(&churn_stop, memory_order_relaxed); round++) {
		sluice_clock_cached_start((round & 1) ? churn_period : 2 * churn_period);
		if (!UNDER_ASAN && (round & 63) == 63) {
			sluice_clock_cached_stop();
			sluice_clock_cached_start(churn_period);
		}
		sleep_ns(20000);
	}
	return NULL;
}

/* The fork loop's length: SLUICE_FORK_LOOP_FORKS from the environment (a
 * count, 1 or more), else @dflt: 100 in the unit test (test_fork.c), 10,000
 * in stress_fork (the stress suite's fork-loop, stress/meson.build). */
static inline unsigned fork_loop_forks(unsigned dflt)
{
	const char *v = getenv("SLUICE_FORK_LOOP_FORKS");
	if (!v || !*v)
		return dflt;
	char *end;
	unsigned long n = strtoul(v, &end, 10);
	return *end == 0 && n >= 1 && n <= 100000000UL ? (unsigned)n : dflt;
}

/*
 * One fork loop: fork @forks children one at a time while the caller's
 * ticker (and churn thread) runs; each child runs @child(i) and exits with
 * its code; the parent waits for it (wait_child: at most HANG_NS, then it
 * is killed and counted hung).  One child in @stop_every (0: none) is
 * stopped with SIGSTOP for 5 ms right after the fork and continued.  The
 * loop stops early after @max_bad hung or failed children (0: never), after
 * @limit_ns (0: no limit) or when fork() fails (fork_errno).  @verbose
 * prints each bad child on stderr.
 */
struct fork_loop {
	unsigned forks, stop_every, max_bad;
	uint64_t limit_ns;
	int verbose;
	int (*child)(unsigned i);
	/* out */
	unsigned done, hung, failed, stopped;
	unsigned first_at; /* the first bad child's index */
	int first_code;    /* its code (-1: hung), 0 when none went wrong */
	int fork_errno;    /* fork() failed: its errno (the loop stopped) */
	uint64_t elapsed_ns;
};

static inline void fork_loop_run(struct fork_loop *l)
{
	l->done = l->hung = l->failed = l->stopped = l->first_at = 0;
	l->first_code = l->fork_errno = 0;
	uint64_t t0 = mono_ns();
	for (unsigned i = 0; i < l->forks; i++) {
		if (l->max_bad && l->hung + l->failed >= l->max_bad)
			break;
		if (l->limit_ns && mono_ns() - t0 >= l->limit_ns)
			break;
		fflush(NULL); /* no buffered output is written twice */
		pid_t pid = fork();
		if (pid < 0) {
			l->fork_errno = errno;
			break;
		}
		if (pid == 0)
			_exit(l->child(i));
		if (l->stop_every && i % l->stop_every == 0) {
			kill(pid, SIGSTOP);
			sleep_ns(5000000);
			kill(pid, SIGCONT);
			l->stopped++;
		}
		int code = wait_child(pid);
		l->done++;
		if (code == 0)
			continue;
		if (l->first_code == 0) {
			l->first_code = code;
			l->first_at = i;
		}
		if (code == -1)
			l->hung++;
		else
			l->failed++;
		if (l->verbose && code == -1)
			fprintf(stderr, "fork %u: child hung (killed)\n", i);
		else if (l->verbose)
			fprintf(stderr, "fork %u: child exit %d (%s)\n", i, code, child_fail_name(code));
	}
	l->elapsed_ns = mono_ns() - t0;
}

#endif /* SLUICE_FORK_LOOP_H */
