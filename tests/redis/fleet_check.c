/* SPDX-License-Identifier: MIT */
/*
 * fleet_check.c - sluice-sim fleet (tools/sim/fleet.h) against the real
 * libsluice-redis: the same fleet run twice, once for real and once
 * simulated, and their figures side by side.
 *
 * Real: a private redis-server (tests/support/test_server.h); NPROC
 * processes forked at once, each its own backend and FIXED limit of LIMIT
 * per WINDOW (lease_max B, budget BUDGET, fallback LOCAL with
 * expected_instances NPROC), each offering Poisson traffic at RATE / NPROC
 * in real time (absolute sleeps) for SECONDS.  Every decision is bucketed
 * by CLOCK_REALTIME into Redis's windows (TIME is the same clock here).
 * The round trip for the simulation is measured first (PING, p50 and p99
 * of 2,000), and Redis's time per call after the run (INFO commandstats:
 * evalsha's usec_per_call).
 *
 * Simulated: sluice-sim fleet with those figures, the same seed-free
 * traffic shape (Poisson, equal shares).  Compared: admitted per window
 * (mean), round trips per second, round trips per decision, fallback
 * admissions.  The tolerance (TOLERANCE below, and docs/redis.md
 * "Sizing") is for what the simulation leaves out: the I/O thread's own
 * delay and the scheduler of a 2-core machine.  Exit status 1 when a
 * figure is outside it.  A benchmark (meson test --benchmark fleet_check),
 * not a unit test: it runs in real time.
 */
#include <hiredis/hiredis.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim/fleet.h"
#include "sim/sim.h"
#include "sluice/redis.h"
#include "test_server.h"

#define NPROC 4
#define LIMIT 2000ULL
#define WINDOW_NS 1000000000ULL
#define RATE 3000.0 /* 1.5 L / W */
#define SECONDS 12
#define BUDGET_NS 1000000ULL
#define NWIN (SECONDS + 4)
#define TOL_ADMITTED 0.02 /* admitted per window: within 2 % */
#define TOL_TRIPS 0.25    /* round trips per second: within 25 % */

struct shared {
	_Atomic uint64_t adm[NWIN]; /* by window, from the run's first */
	_Atomic uint64_t decisions, fallback_admits, round_trips;
	uint64_t first_win;
};

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* PING round trips: p50 and p99 of 2,000 */
static void measure_rtt(int port, uint64_t *p50, uint64_t *p99)
{
	static uint64_t v[2000];
	redisContext *c = redisConnect("127.0.0.1", port);
	if (!c || c->err)
		exit(1);
	for (int i = 0; i < 2000; i++) {
		uint64_t a = clock_ns(CLOCK_MONOTONIC);
		redisReply *x = redisCommand(c, "PING");
		v[i] = clock_ns(CLOCK_MONOTONIC) - a;
		if (!x)
			exit(1);
		freeReplyObject(x);
	}
	redisFree(c);
	qsort(v, 2000, sizeof(*v), cmp_u64);
	*p50 = v[1000];
	*p99 = v[1980];
}

/* evalsha's usec_per_call from INFO commandstats, in ns */
static uint64_t service_ns(int port)
{
	redisContext *c = redisConnect("127.0.0.1", port);
	redisReply *x = c && !c->err ? redisCommand(c, "INFO commandstats") : NULL;
	uint64_t ns = 10000;
	const char *p = x && x->type == REDIS_REPLY_STRING ? strstr(x->str, "cmdstat_evalsha:") : NULL;
	p = p ? strstr(p, "usec_per_call=") : NULL;
	if (p)
		ns = (uint64_t)(atof(p + 14) * 1000);
	if (x)
		freeReplyObject(x);
	if (c)
		redisFree(c);
	return ns;
}

static void instance(int port, unsigned p, uint64_t B, uint64_t start_real, struct shared *sh)
{
	sluice_redis_config_t rc = { .port = port };
	sluice_redis_t *r;
	sluice_redis_limit_t *l;
	sluice_redis_limit_config_t cfg = {
		.name = "fleet", .algo = SLUICE_REDIS_FIXED, .limit = LIMIT, .window_ns = WINDOW_NS,
		.lease_max = B, .budget_ns = BUDGET_NS, .fallback = SLUICE_REDIS_LOCAL,
		.expected_instances = NPROC,
	};
	if (sluice_redis_new(&rc, &r) != 0 || sluice_redis_limit_new(r, &cfg, &l) != 0)
		_exit(1);
	sim_rng_t rng;
	sim_rng_seed(&rng, 1000 + p);
	uint64_t t = start_real, end = start_real + SECONDS * 1000000000ULL;
	sluice_redis_stats_t s0;
	sluice_redis_stats(r, &s0);
	for (;;) {
		t += sim_rng_exp_ns(&rng, 1e9 * NPROC / RATE);
		if (t >= end)
			break;
		struct timespec ts = { (time_t)(t / 1000000000ULL), (long)(t % 1000000000ULL) };
		while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) != 0)
			;
		sluice_redis_source_t src;
		int rc2 = sluice_redis_acquire(l, 1, NULL, &src);
		uint64_t k = clock_ns(CLOCK_REALTIME) / WINDOW_NS - sh->first_win;
		atomic_fetch_add(&sh->decisions, 1);
		if (rc2 == 1 && k < NWIN)
			atomic_fetch_add(&sh->adm[k], 1);
		if (rc2 == 1 && src == SLUICE_REDIS_FROM_FALLBACK)
			atomic_fetch_add(&sh->fallback_admits, 1);
	}
	sluice_redis_stats_t s1;
	sluice_redis_stats(r, &s1);
	atomic_fetch_add(&sh->round_trips, s1.round_trips - s0.round_trips);
	sluice_redis_limit_free(l);
	sluice_redis_free(r);
	_exit(0);
}

/* the real fleet: admitted per whole window (mean), round trips/s, per
 * decision, fallback admits */
static void real_run(int port, uint64_t B, double out[4])
{
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		exit(1);
	memset(sh, 0, sizeof(*sh));
	/* start on a window's edge, 1.5 s away (the forks connect meanwhile) */
	uint64_t start = (clock_ns(CLOCK_REALTIME) / WINDOW_NS + 2) * WINDOW_NS;
	sh->first_win = start / WINDOW_NS;
	for (unsigned p = 0; p < NPROC; p++) {
		pid_t pid = fork();
		if (pid < 0)
			exit(1);
		if (pid == 0)
			instance(port, p, B, start, sh);
	}
	for (unsigned p = 0; p < NPROC; p++) {
		int st;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			exit(1);
	}
	double sum = 0;
	for (unsigned k = 0; k < SECONDS; k++)
		sum += (double)sh->adm[k];
	out[0] = sum / SECONDS;
	out[1] = (double)sh->round_trips / SECONDS;
	out[2] = (double)sh->round_trips / (double)sh->decisions;
	out[3] = (double)sh->fallback_admits;
	munmap(sh, sizeof(*sh));
}

static void simulated(uint64_t B, uint64_t p50, uint64_t p99, uint64_t svc, double out[4])
{
	sim_fleet_config_t c = {
		.instances = NPROC, .rate = RATE, .limit = LIMIT, .window_ns = WINDOW_NS,
		.lease_max = B, .budget_ns = BUDGET_NS, .rtt_p50_ns = p50, .rtt_p99_ns = p99,
		.service_ns = svc, .duration_ns = SECONDS * 1000000000ULL, .seed = 1,
	};
	sim_fleet_result_t r;
	char err[256];
	if (sim_fleet_run(&c, &r, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "fleet_check: %s\n", err);
		exit(1);
	}
	out[0] = r.mean_admitted;
	out[1] = (double)r.round_trips / SECONDS;
	out[2] = (double)r.round_trips / (double)r.decisions;
	out[3] = (double)r.fallback_admits;
}

int main(void)
{
	sluice_test_redis_t srv;
	if (sluice_test_redis_start(&srv, 0) != 0) {
		fprintf(stderr, "fleet_check: could not start redis-server\n");
		return 1;
	}
	uint64_t p50, p99;
	measure_rtt(srv.port, &p50, &p99);
	const uint64_t bs[] = { 1, 16, 256 };
	int bad = 0;
	printf("fleet_check: %d processes, L %llu per 1 s, offered %.0f/s (Poisson), budget 1 ms, "
	       "%d s; PING p50 %.1f us p99 %.1f us\n\n",
	       NPROC, (unsigned long long)LIMIT, RATE, SECONDS, (double)p50 / 1e3,
	       (double)p99 / 1e3);
	printf("| lease_max | admitted per window (real / sim) | round trips/s (real / sim) | "
	       "per decision (real / sim) | fallback admits (real / sim) |\n|---|---|---|---|---|\n");
	for (size_t i = 0; i < 3; i++) {
		double real[4], sim[4];
		real_run(srv.port, bs[i], real);
		uint64_t svc = service_ns(srv.port);
		simulated(bs[i], p50, p99, svc, sim);
		int ok = fabs(real[0] - sim[0]) <= TOL_ADMITTED * sim[0] &&
		         fabs(real[1] - sim[1]) <= TOL_TRIPS * sim[1];
		bad |= !ok;
		printf("| %llu | %.0f / %.0f | %.0f / %.0f | %.4f / %.4f | %.0f / %.0f |%s\n",
		       (unsigned long long)bs[i], real[0], sim[0], real[1], sim[1], real[2], sim[2],
		       real[3], sim[3], ok ? "" : " outside the tolerance");
		printf("bench case=fleet-check lease_max=%llu admitted_real=%.0f admitted_sim=%.0f "
		       "trips_real=%.0f trips_sim=%.0f service_ns=%llu\n",
		       (unsigned long long)bs[i], real[0], sim[0], real[1], sim[1],
		       (unsigned long long)svc);
	}
	printf("\ntolerance: admitted per window within %.0f %%, round trips/s within %.0f %%\n",
	       TOL_ADMITTED * 100, TOL_TRIPS * 100);
	sluice_test_redis_stop(&srv);
	return bad;
}
