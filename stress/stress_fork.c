/* SPDX-License-Identifier: MIT */
/*
 * stress_fork.c - the cached clock across many forks, for as long as asked.
 *
 *   stress_fork [--forks=N] [--seconds=S] [--period-ns=P] [--sigstop-every=K]
 *
 * The parent runs the ticker at period P (default 1 us: it takes its lock
 * every microsecond, so forks land while it holds it) and a churn thread
 * that re-periods it and, one round in 64, stops and restarts it (outside
 * ASan: GCC 12's libasan allocator is not fork-safe, see tests/core/test_fork.c).
 * It forks until N children have run or S seconds have passed.  Each child:
 *   - its cached reading advances within 5 s and is not older than the child;
 *   - sluice_clock_cached_running() is 0 and reads are exactly CLOCK_MONOTONIC;
 *   - one child in 4 (outside TSan, which kills a child that creates a
 *     thread) starts a ticker of its own, sees it tick, and stops it.
 * One child in K is stopped with SIGSTOP for 5 ms right after the fork and
 * continued with SIGCONT: it must finish like the others.
 * The parent waits for each child for at most 10 s; one alive after that is
 * hung: killed, counted, and the run fails.  The parent's ticker must still
 * be running and ticking at the end.
 *
 * N defaults to SLUICE_FORK_LOOP_FORKS, else 10,000: the stress suite's
 * fork-loop (the unit test, tests/core/test_fork.c, runs the same loop,
 * fork_loop_run, 100 forks long).  Soak this longer.
 * Output: one line, key=value, then exit 0 (all children passed) or 1.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice/clock.h"

#include "fork_loop.h"

/* One child: the unit test's checks (fork_loop.h); one child in 4 (outside
 * TSan) also starts a 1 us ticker of its own, sees it tick, and stops it. */
static int child_main(unsigned i)
{
	int rc = child_reads();
	if (rc != C_OK || UNDER_TSAN || (i & 3) != 0)
		return rc;
	return child_start_stop(1000, 1);
}

static int parse(const char *arg, const char *name, double *out)
{
	size_t n = strlen(name);
	if (strncmp(arg, name, n) != 0 || arg[n] != '=')
		return 0;
	char *end;
	*out = strtod(arg + n + 1, &end);
	if (*end != 0 || *out < 0) {
		fprintf(stderr, "bad value: %s\n", arg);
		exit(2);
	}
	return 1;
}

int main(int argc, char **argv)
{
	double forks = fork_loop_forks(10000), seconds = 0, period = 1000, stop_every = 50;
	for (int i = 1; i < argc; i++) {
		if (!parse(argv[i], "--forks", &forks) && !parse(argv[i], "--seconds", &seconds) &&
		    !parse(argv[i], "--period-ns", &period) &&
		    !parse(argv[i], "--sigstop-every", &stop_every)) {
			fprintf(stderr, "usage: %s [--forks=N] [--seconds=S] [--period-ns=P] "
			                "[--sigstop-every=K]\n", argv[0]);
			return 2;
		}
	}
	churn_period = (uint64_t)period;
	if (sluice_clock_cached_start(churn_period) != 0) {
		fprintf(stderr, "start(%llu) failed\n", (unsigned long long)churn_period);
		return 2;
	}
	pthread_t churn;
	if (pthread_create(&churn, NULL, churn_main, NULL) != 0)
		return 2;

	struct fork_loop l = { .forks = (unsigned)forks, .limit_ns = (uint64_t)(seconds * 1e9),
		               .stop_every = stop_every >= 1 ? (unsigned)stop_every : 0,
		               .verbose = 1, .child = child_main };
	fork_loop_run(&l);
	if (l.fork_errno)
		fprintf(stderr, "fork: %s\n", strerror(l.fork_errno));
	atomic_store(&churn_stop, 1);
	pthread_join(churn, NULL);
	int parent_ok = sluice_clock_cached_running() == 1 && word_advances();
	sluice_clock_cached_stop();
	printf("stress_fork forks=%u sigstopped=%u hung=%u failed=%u parent_ok=%d seconds=%.1f "
	       "sanitizer=%s\n",
	       l.done, l.stopped, l.hung, l.failed, parent_ok, l.elapsed_ns / 1e9,
	       UNDER_TSAN ? "tsan" : UNDER_ASAN ? "asan" : "none");
	return l.hung == 0 && l.failed == 0 && parent_ok && l.done > 0 ? 0 : 1;
}
