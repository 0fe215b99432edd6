/* SPDX-License-Identifier: MIT */
/*
 * test_redis_procs.c - 4 processes x 2 threads share one limit on one
 * redis-server, each process with its own backend (connection, I/O thread,
 * leases), as 4 instances behind a load balancer.  Every admission is
 * stamped (CLOCK_MONOTONIC, system-wide, at the CAS that spent the permit)
 * into memory shared with the parent; the parent merges the 8 streams,
 * places each stamp in Redis time (CLOCK_REALTIME: the server's TIME on this
 * host) and checks, per window of Redis time:
 *   - at most LIMIT admitted by all processes together (the guarantee);
 *   - where Redis refused someone in that window (demand exceeded it), at
 *     least LIMIT - 4 x LEASE admitted (the under-admission bound).
 * Each instance is this program exec'd again (fork + exec: a fresh process,
 * as a real instance is, and ThreadSanitizer cannot start threads in the
 * child of a multi-threaded fork); it finds its part of the shared memory
 * (a memfd it inherits) and its parameters in SLUICE_PROCS_CHILD.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_redis_common.h"

TestSuite(redis_procs, .init = server_up, .fini = server_down, .timeout = 60);

enum { PROCS = 4, THREADS = 2, MAX_REC = 100000 };
#define LIMIT 1000ULL
#define LEASE 32ULL
#define WINDOW_NS 100000000ULL
#define RUN_NS 1500000000ULL

typedef struct stream {
	uint64_t n;
	struct {
		uint64_t at;
		int kind; /* 1 admitted, 2 refused by Redis */
	} rec[MAX_REC];
} stream_t;

typedef struct child_thread {
	pthread_t t;
	sluice_redis_limit_t *l;
	stream_t *s;
	uint64_t end;
} child_thread_t;

static void *decide(void *arg)
{
	child_thread_t *c = arg;
	struct timespec pause = { 0, 20000 };
	while (c->s->n < MAX_REC && sluice_clock_monotonic_ns() < c->end) {
		sluice_decision_t d;
		sluice_redis_source_t src;
		int rc = sluice_redis_acquire(c->l, 1, &d, &src);
		if (rc == 1 || (rc == 0 && src == SLUICE_REDIS_FROM_REFUSAL)) {
			c->s->rec[c->s->n].at = d.now_ns;
			c->s->rec[c->s->n].kind = rc == 1 ? 1 : 2;
			c->s->n++;
		}
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/* one instance: its own backend; exits 0, or 2 when something failed */
static void child(stream_t *s, uint64_t start)
{
	/* generous timeouts: this test is about the bound, not faults (a
	 * sanitized build on a loaded machine must not time out) */
	sluice_redis_config_t rc = { .port = srv.port, .connect_timeout_ns = 2000000000ULL,
		                     .command_timeout_ns = 1000000000ULL };
	sluice_redis_t *r;
	if (sluice_redis_new(&rc, &r) != 0)
		_exit(2);
	sluice_redis_limit_t *l;
	sluice_redis_limit_config_t cfg = {
		.name = "procs", .algo = SLUICE_REDIS_FIXED, .limit = LIMIT,
		.window_ns = WINDOW_NS, .lease_max = LEASE,
		/* long enough that no decision falls back on this machine: the
		 * bound is about Redis's admissions */
		.budget_ns = 2000000000ULL, .fallback = SLUICE_REDIS_DENY,
	};
	if (sluice_redis_limit_new(r, &cfg, &l) != 0)
		_exit(2);
	/* all instances begin together, once every one is up */
	uint64_t now = sluice_clock_monotonic_ns();
	if (now < start) {
		struct timespec ts = { (time_t)((start - now) / 1000000000ULL),
			               (long)((start - now) % 1000000000ULL) };
		nanosleep(&ts, NULL);
	}
	child_thread_t t[THREADS];
	for (int i = 0; i < THREADS; i++) {
		t[i] = (child_thread_t){ .l = l, .s = &s[i], .end = start + RUN_NS };
		pthread_create(&t[i].t, NULL, decide, &t[i]);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i].t, NULL);
	sluice_redis_stats_t st;
	sluice_redis_stats(r, &st);
	sluice_redis_limit_free(l);
	sluice_redis_free(r);
	_exit(st.fallback_deny || st.io_errors ? 3 : 0);
}

/* the exec'd instance: runs before Criterion's main and never returns */
__attribute__((constructor)) static void maybe_child(void)
{
	const char *e = getenv("SLUICE_PROCS_CHILD");
	if (!e)
		return;
	int fd, idx, port;
	unsigned long long start;
	if (sscanf(e, "%d:%d:%d:%llu", &fd, &idx, &port, &start) != 4)
		_exit(4);
	size_t bytes = sizeof(stream_t) * PROCS * THREADS;
	stream_t *s = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s == MAP_FAILED)
		_exit(4);
	srv.port = port;
	child(&s[idx * THREADS], start);
}

static int64_t real_minus_mono(void)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	clock_gettime(CLOCK_REALTIME, &b);
	return ((int64_t)b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
}

Test(redis_procs, four_processes_two_threads_one_bound)
{
	size_t bytes = sizeof(stream_t) * PROCS * THREADS;
	int fd = memfd_create("sluice-procs", 0); /* inherited across exec */
	cr_assert(fd >= 0 && ftruncate(fd, (off_t)bytes) == 0);
	stream_t *s = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert(s != MAP_FAILED);
	int64_t offset = real_minus_mono();
	uint64_t start = sluice_clock_monotonic_ns() + 500000000ULL; /* after the execs */
	pid_t pid[PROCS];
	for (int p = 0; p < PROCS; p++) {
		pid[p] = fork();
		cr_assert(pid[p] >= 0);
		if (pid[p] == 0) {
			char env[128];
			snprintf(env, sizeof(env), "SLUICE_PROCS_CHILD=%d:%d:%d:%llu", fd, p, srv.port,
			         (unsigned long long)start);
			char *envp[] = { env, NULL };
			char *args[] = { "test_redis_procs", NULL };
			execve("/proc/self/exe", args, envp);
			_exit(5);
		}
	}
	/* bounded wait: RUN_NS plus 20 s, then kill what is left */
	int status[PROCS], done = 0;
	for (int i = 0; i < 2200 && done < PROCS; i++) {
		for (int p = 0; p < PROCS; p++)
			if (pid[p] > 0 && waitpid(pid[p], &status[p], WNOHANG) == pid[p]) {
				pid[p] = 0;
				done++;
			}
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	for (int p = 0; p < PROCS; p++)
		if (pid[p] > 0) {
			kill(pid[p], SIGKILL);
			waitpid(pid[p], &status[p], 0);
			cr_assert_fail("instance %d did not finish", p);
		}
	for (int p = 0; p < PROCS; p++)
		cr_assert(WIFEXITED(status[p]) && WEXITSTATUS(status[p]) == 0,
		          "instance %d: status %d (3: a fallback or an I/O error)", p, status[p]);

	enum { NW = 64 };
	uint64_t admitted[NW] = { 0 }, refused[NW] = { 0 }, total = 0;
	uint64_t w0 = (uint64_t)((int64_t)start + offset) / WINDOW_NS - 2;
	for (int i = 0; i < PROCS * THREADS; i++)
		for (uint64_t k = 0; k < s[i].n; k++) {
			uint64_t w = (uint64_t)((int64_t)s[i].rec[k].at + offset) / WINDOW_NS - w0;
			cr_assert_lt(w, (uint64_t)NW);
			if (s[i].rec[k].kind == 1) {
				admitted[w]++;
				total++;
			} else {
				refused[w]++;
			}
		}
	int checked = 0;
	for (int w = 0; w < NW; w++) {
		cr_assert_leq(admitted[w], LIMIT, "window %d: %llu admitted by 4 instances", w,
		              (unsigned long long)admitted[w]);
		/* a window where Redis refused had its whole limit charged: the
		 * instances lost at most 4 x LEASE of it with lapsed leases.  The
		 * first and last windows are partial for the instances. */
		if (refused[w] && admitted[w - 1] && admitted[w + 1]) {
			cr_assert_geq(admitted[w], LIMIT - PROCS * LEASE,
			              "window %d: only %llu admitted while Redis refused", w,
			              (unsigned long long)admitted[w]);
			checked++;
		}
	}
	cr_log_info("%llu admitted in all, %d full windows checked for under-admission",
	            (unsigned long long)total, checked);
	cr_assert_geq(checked, 5, "too few windows where demand passed the limit");
	munmap(s, bytes);
	close(fd);
}
