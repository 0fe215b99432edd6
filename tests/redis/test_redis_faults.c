/* SPDX-License-Identifier: MIT */
/*
 * test_redis_faults.c - faults injected while two threads decide on one
 * limit as fast as they can (one decision per ~20 us each): kill -9 and
 * restart, CLIENT PAUSE, DEBUG SLEEP, SCRIPT FLUSH, and a server that
 * refuses connections when the backend starts.  Every decision is recorded
 * (per-thread buffers, allocated before the threads start) and checked
 * after the join:
 *   - it returned within budget + SLACK_NS (the wait's last 50 us sleep
 *     plus scheduling delay on a loaded 2-core machine: the slack this
 *     test states and docs/redis.md reports), unless the scheduler took
 *     the CPU from the thread during it (an involuntary context switch,
 *     counted by getrusage(RUSAGE_THREAD)): no code of ours can bound
 *     that, and the machine the tests share is busy;
 *   - admissions from leases in each Redis window stay within the limit
 *     (twice the limit in a window where the server restarted with its
 *     memory gone: the documented cost of a restart without persistence);
 *   - admissions from the LOCAL fallback in each of the local limiter's
 *     windows stay within this instance's share;
 *   - service recovers: lease admissions resume after the fault ends, and
 *     the breaker is closed again.
 * Real time throughout (Redis TIME, CLOCK_MONOTONIC): the faults are real.
 */
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "test_redis_common.h"

TestSuite(redis_faults, .init = server_up, .fini = server_down, .timeout = 60);

#define LIMIT 2000ULL
#define WINDOW_NS 100000000ULL /* 100 ms */
#define SHARE 1000ULL          /* LIMIT / 2 expected instances */
#define BUDGET_NS 1000000ULL
#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer's runtime blocks a thread on its own internal mutexes
 * (sync-object and shadow bookkeeping) held by a thread the scheduler took
 * the CPU from: blocked, so neither preempted nor queued, and not our code
 * (the decision path takes no lock).  Seen: 25 ms on a loaded 2-core
 * machine.  Plain and ASan builds keep the 20 ms. */
#define SLACK_NS 100000000ULL
#else
#define SLACK_NS 20000000ULL
#endif
#define MAX_REC 400000

typedef struct rec {
	uint64_t start, end, at; /* CLOCK_MONOTONIC ns; at = d.now_ns */
	uint64_t queued;         /* ns its thread spent runnable, not running */
	int rc;
	int preempted;           /* an involuntary context switch during it */
	sluice_redis_source_t src;
} rec_t;

typedef struct worker {
	pthread_t t;
	sluice_redis_limit_t *l;
	rec_t *rec;
	size_t n;
	_Atomic int *stop;
} worker_t;

/* The time this thread has spent runnable but waiting for a CPU, from
 * /proc/thread-self/schedstat (its second field, ns): a thread woken from
 * its wait for Redis's reply that then waits for a CPU is not preempted
 * (no involuntary switch is counted), yet its decision's wall time grows. */
static uint64_t queued_ns(int fd)
{
	char buf[96];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	unsigned long long run = 0, wait = 0;
	return sscanf(buf, "%llu %llu", &run, &wait) == 2 ? (uint64_t)wait : 0;
}

static void *work(void *arg)
{
	worker_t *w = arg;
	int sched = open("/proc/thread-self/schedstat", O_RDONLY);
	struct timespec pause = { 0, 20000 };
	while (!atomic_load_explicit(w->stop, memory_order_relaxed) && w->n < MAX_REC) {
		rec_t *r = &w->rec[w->n++];
		sluice_decision_t d;
		struct rusage ru0, ru1;
		getrusage(RUSAGE_THREAD, &ru0);
		uint64_t q0 = sched >= 0 ? queued_ns(sched) : 0;
		r->start = sluice_clock_monotonic_ns();
		r->rc = sluice_redis_acquire(w->l, 1, &d, &r->src);
		r->end = sluice_clock_monotonic_ns();
		r->queued = sched >= 0 ? queued_ns(sched) - q0 : 0;
		getrusage(RUSAGE_THREAD, &ru1);
		r->preempted = ru1.ru_nivcsw != ru0.ru_nivcsw;
		r->at = d.now_ns;
		nanosleep(&pause, NULL);
	}
	if (sched >= 0)
		close(sched);
	return NULL;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int64_t real_minus_mono(void)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	clock_gettime(CLOCK_REALTIME, &b);
	return ((int64_t)b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
}

enum fault { KILL, PAUSE, SLEEP, FLUSH, REFUSED };

static void *debug_sleep(void *arg)
{
	(void)arg;
	char out[64];
	sluice_test_redis_cmd(&srv, "DEBUG SLEEP 0.5", out, sizeof(out));
	return NULL;
}

static void run(enum fault f)
{
	if (f == REFUSED)
		sluice_test_redis_kill(&srv); /* the port refuses from the start */
	sluice_redis_t *r = backend();
	sluice_redis_limit_t *l;
	sluice_redis_limit_config_t cfg = {
		.name = "f", .algo = SLUICE_REDIS_FIXED, .limit = LIMIT, .window_ns = WINDOW_NS,
		.lease_max = 64, .budget_ns = BUDGET_NS, .fallback = SLUICE_REDIS_LOCAL,
		.expected_instances = 2,
	};
	cr_assert_eq(sluice_redis_limit_new(r, &cfg, &l), 0);
	int64_t offset = real_minus_mono();
	_Atomic int stop = 0;
	worker_t w[2];
	for (int i = 0; i < 2; i++) {
		w[i] = (worker_t){ .l = l, .rec = calloc(MAX_REC, sizeof(rec_t)), .stop = &stop };
		cr_assert(w[i].rec);
	}
	for (int i = 0; i < 2; i++)
		pthread_create(&w[i].t, NULL, work, &w[i]);
	uint64_t fault_start = sluice_clock_monotonic_ns(), fault_end;
	pthread_t sleeper;
	char out[64];
	switch (f) {
	case KILL:
		sleep_ms(300);
		fault_start = sluice_clock_monotonic_ns();
		sluice_test_redis_kill(&srv);
		sleep_ms(500);
		cr_assert_eq(sluice_test_redis_start(&srv, srv.port), 0, "restart");
		break;
	case REFUSED:
		sleep_ms(500);
		cr_assert_eq(sluice_test_redis_start(&srv, srv.port), 0, "start");
		break;
	case PAUSE:
		sleep_ms(300);
		fault_start = sluice_clock_monotonic_ns();
		cr_assert_eq(sluice_test_redis_cmd(&srv, "CLIENT PAUSE 500", out, sizeof(out)), 0);
		sleep_ms(500);
		break;
	case SLEEP:
		sleep_ms(300);
		fault_start = sluice_clock_monotonic_ns();
		pthread_create(&sleeper, NULL, debug_sleep, NULL);
		pthread_join(sleeper, NULL);
		break;
	case FLUSH:
		sleep_ms(300);
		fault_start = sluice_clock_monotonic_ns();
		for (int i = 0; i < 5; i++) {
			cr_assert_eq(sluice_test_redis_cmd(&srv, "SCRIPT FLUSH", out, sizeof(out)), 0);
			sleep_ms(50);
		}
		break;
	}
	fault_end = sluice_clock_monotonic_ns();
	/* recovery: bounded wait for the breaker to close and leases to flow */
	sluice_redis_stats_t s0 = stats(r);
	int recovered = 0;
	for (int i = 0; i < 500 && !recovered; i++) {
		sleep_ms(10);
		sluice_redis_stats_t s = stats(r);
		recovered = sluice_redis_breaker(r) == 0 && s.lease_admits > s0.lease_admits + 100;
	}
	sleep_ms(200);
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(w[i].t, NULL);
	sluice_redis_stats_t s = stats(r);
	cr_assert(recovered, "no recovery within 5 s after the fault");

	/* every decision within budget + slack; per-window bounds */
	enum { NW = 4096 };
	static uint64_t lease_in[NW], local_in[NW];
	memset(lease_in, 0, sizeof(lease_in));
	memset(local_in, 0, sizeof(local_in));
	uint64_t w0 = (uint64_t)((int64_t)fault_start + offset) / WINDOW_NS - 64;
	uint64_t l0 = fault_start / WINDOW_NS - 64;
	uint64_t worst = 0, worst_all = 0, fallbacks = 0, preempted = 0;
	for (int i = 0; i < 2; i++)
		for (size_t k = 0; k < w[i].n; k++) {
			rec_t *x = &w[i].rec[k];
			/* the decision's own time: waiting for a CPU is the
			 * machine's load, not the decision's wait */
			uint64_t took = x->end - x->start - (x->queued < x->end - x->start ? x->queued : 0);
			worst_all = took > worst_all ? took : worst_all;
			if (x->preempted) {
				preempted++;
			} else {
				worst = took > worst ? took : worst;
				cr_assert_leq(took, BUDGET_NS + SLACK_NS, "a decision took %llu ns",
				              (unsigned long long)took);
			}
			if (x->rc != 1)
				continue;
			if (x->src == SLUICE_REDIS_FROM_LEASE) {
				uint64_t wid = (uint64_t)((int64_t)x->at + offset) / WINDOW_NS - w0;
				cr_assert_lt(wid, (uint64_t)NW);
				lease_in[wid]++;
			} else {
				cr_assert_eq(x->src, SLUICE_REDIS_FROM_FALLBACK);
				uint64_t wid = x->at / WINDOW_NS - l0;
				cr_assert_lt(wid, (uint64_t)NW);
				local_in[wid]++;
				fallbacks++;
			}
		}
	uint64_t restart_w = (uint64_t)((int64_t)fault_start + offset) / WINDOW_NS - w0;
	uint64_t end_w = (uint64_t)((int64_t)fault_end + offset) / WINDOW_NS - w0 + 60;
	for (uint64_t k = 0; k < NW; k++) {
		/* a server that lost its memory restarts the window's count */
		uint64_t bound = f == KILL && k >= restart_w && k <= end_w ? 2 * LIMIT : LIMIT;
		cr_assert_leq(lease_in[k], bound, "window %llu: %llu from leases",
		              (unsigned long long)k, (unsigned long long)lease_in[k]);
		cr_assert_leq(local_in[k], SHARE, "local window %llu: %llu from the fallback",
		              (unsigned long long)k, (unsigned long long)local_in[k]);
	}
	if (f != FLUSH)
		cr_assert_gt(fallbacks + s.fallback_local, 0, "the fault took the fallback");
	if (f == FLUSH)
		cr_assert_gt(s.noscript_reloads, 0);
	cr_log_info("fault %d: %zu decisions, worst %llu us (%llu us with the %llu preempted), "
	            "%llu fallback admissions, breaker opened %llu, budget timeouts %llu, "
	            "io errors %llu",
	            (int)f, w[0].n + w[1].n, (unsigned long long)(worst / 1000),
	            (unsigned long long)(worst_all / 1000), (unsigned long long)preempted,
	            (unsigned long long)fallbacks, (unsigned long long)s.breaker_opened,
	            (unsigned long long)s.budget_timeouts, (unsigned long long)s.io_errors);
	for (int i = 0; i < 2; i++)
		free(w[i].rec);
	sluice_redis_limit_free(l);
	sluice_redis_free(r);
}

Test(redis_faults, kill_9_and_restart) { run(KILL); }
Test(redis_faults, client_pause) { run(PAUSE); }
Test(redis_faults, debug_sleep) { run(SLEEP); }
Test(redis_faults, script_flush) { run(FLUSH); }
Test(redis_faults, refused_at_start) { run(REFUSED); }
