/*
 * stress_fork.c - the cached clock across many forks, for as long as asked.
 *
 *   stress_fork [--forks=N] [--seconds=S] [--period-ns=P] [--sigstop-every=K]
 *
 * The parent runs the ticker at period P (default 1 us: it takes its lock
 * every microsecond, so forks land while it holds it) and a churn thread
 * that re-periods it and, one round in 64, stops and restarts it (outside
 * ASan: GCC 12's libasan allocator is not fork-safe, see tests/test_fork.c).
 * It forks until N children have run or S seconds have passed.  Each child:
 *   - its cached reading advances within 2 s and is not older than the child;
 *   - sluice_clock_cached_running() is 0 and reads are exactly CLOCK_MONOTONIC;
 *   - one child in 4 (outside TSan, which kills a child that creates a
 *     thread) starts a ticker of its own, sees it tick, and stops it.
 * One child in K is stopped with SIGSTOP for 5 ms right after the fork and
 * continued with SIGCONT: it must finish like the others.
 * The parent waits for each child for at most 5 s; one alive after that is
 * hung: killed, counted, and the run fails.  The parent's ticker must still
 * be running and ticking at the end.
 *
 * Output: one line, key=value, then exit 0 (all children passed) or 1.
 * The unit test (tests/test_fork.c) runs a fixed 10,000; soak this longer.
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

#define HANG_NS (5ULL * 1000000000ULL)
#define ADVANCE_WAIT_NS (2ULL * 1000000000ULL)

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ULL),
		               .tv_nsec = (long)(ns % 1000000000ULL) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Child exit codes. */
enum { C_OK, C_FROZEN, C_STALE, C_RUNNING, C_NOT_FALLBACK, C_START, C_START_DEAD, C_STOP };
static const char *code_name[] = { "ok", "frozen", "stale", "running() says 1",
	                           "not CLOCK_MONOTONIC", "start failed",
	                           "start returned 0, nothing ticks", "stop did not stop" };

static int word_advances(void)
{
	uint64_t w0 = atomic_load_explicit(&sluice__cached_now, memory_order_relaxed);
	uint64_t start = mono_ns();
	for (int i = 0; mono_ns() - start < ADVANCE_WAIT_NS; i++) {
		uint64_t w = atomic_load_explicit(&sluice__cached_now, memory_order_relaxed);
		if (w != 0 && w != w0)
			return 1;
		if (i >= 1000)
			sleep_ns(10000);
	}
	return 0;
}

static int child_main(unsigned i)
{
	uint64_t born = mono_ns();
	uint64_t t0 = sluice_clock_now(&sluice_clock_cached), t = t0;
	for (int k = 0; t == t0 && mono_ns() - born < ADVANCE_WAIT_NS; k++) {
		if (k >= 1000)
			sleep_ns(10000);
		t = sluice_clock_now(&sluice_clock_cached);
	}
	if (t == t0)
		return C_FROZEN;
	if (sluice_clock_now(&sluice_clock_cached) < born)
		return C_STALE;
	if (sluice_clock_cached_running() != 0)
		return C_RUNNING;
	for (int k = 0; k < 100; k++) {
		uint64_t before = mono_ns();
		uint64_t c = sluice_clock_now(&sluice_clock_cached);
		if (c < before || c > mono_ns())
			return C_NOT_FALLBACK;
	}
	if (UNDER_TSAN || (i & 3) != 0)
		return C_OK;
	if (sluice_clock_cached_start(1000) != 0)
		return C_START;
	if (!word_advances())
		return C_START_DEAD;
	sluice_clock_cached_stop();
	if (sluice_clock_cached_running() != 0 ||
	    atomic_load_explicit(&sluice__cached_now, memory_order_relaxed) != 0)
		return C_STOP;
	return C_OK;
}

/* Exit code, 128 + signal, or -1 when hung (killed). */
static int wait_child(pid_t pid)
{
	uint64_t start = mono_ns(), nap = 20000;
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

static _Atomic int churn_stop;
static uint64_t churn_period;

static void *churn_main(void *arg)
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
	double forks = 10000, seconds = 0, period = 1000, stop_every = 50;
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

	unsigned done = 0, hung = 0, failed = 0, stopped = 0;
	uint64_t t0 = mono_ns(), limit = (uint64_t)(seconds * 1e9);
	for (unsigned i = 0; i < (unsigned)forks && (limit == 0 || mono_ns() - t0 < limit); i++) {
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			break;
		}
		if (pid == 0)
			_exit(child_main(i));
		if (stop_every >= 1 && i % (unsigned)stop_every == 0) {
			kill(pid, SIGSTOP);
			sleep_ns(5000000);
			kill(pid, SIGCONT);
			stopped++;
		}
		int code = wait_child(pid);
		done++;
		if (code == -1) {
			hung++;
			fprintf(stderr, "fork %u: child hung (killed)\n", i);
		} else if (code != 0) {
			failed++;
			fprintf(stderr, "fork %u: child exit %d (%s)\n", i, code,
			        code > 0 && code <= C_STOP ? code_name[code] : "?");
		}
	}
	uint64_t elapsed = mono_ns() - t0;
	atomic_store(&churn_stop, 1);
	pthread_join(churn, NULL);
	int parent_ok = sluice_clock_cached_running() == 1 && word_advances();
	sluice_clock_cached_stop();
	printf("stress_fork forks=%u sigstopped=%u hung=%u failed=%u parent_ok=%d seconds=%.1f "
	       "sanitizer=%s\n",
	       done, stopped, hung, failed, parent_ok, elapsed / 1e9,
	       UNDER_TSAN ? "tsan" : UNDER_ASAN ? "asan" : "none");
	return hung == 0 && failed == 0 && parent_ok && done > 0 ? 0 : 1;
}
