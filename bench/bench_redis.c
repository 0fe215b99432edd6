/* SPDX-License-Identifier: MIT */
/*
 * bench_redis.c - libsluice-redis against one EVALSHA per decision, in the
 * same process and the same run, on a private redis-server (127.0.0.1).
 *
 * Cases (one thread deciding, the limit never reached, so both sides admit
 * every request: the same global bound, no refusals):
 *   hot     one limit; sluice-redis spends leases (lease_max 4096), the
 *           baseline sends the same fixed-window script with want = 1
 *   keys    10,000 keys of one keyed limit (sluice_redis_keyed_new, 16,384
 *           slots), a decision picks one at random; the baseline the same
 *           keys
 *   paused  hot, while the server is under CLIENT PAUSE: sluice-redis
 *           falls back (LOCAL) after its budget and the breaker; the
 *           baseline is not run (every call would wait for its timeout)
 *   keys-Nt keys from N = 2, 4, 8 threads at once (their calls share the
 *           I/O thread's pipelined writes: redis/io.c PIPELINE); beside
 *           them evalsha-pipe64, a plain hiredis client pipelining 64
 *           EVALSHA per round trip from one thread
 *   cool-Nt the same keys on 10 ms windows (lease_max 4096, as hot) from
 *           N = 1, 2, 4, 8 threads: each key is asked about once a second,
 *           far less often than its lease lives, so the lease policy
 *           (redis/lease_policy.h) must make every decision one script
 *           call and grant nothing that lapses; this is what pipelining
 *           buys keys too cool for leases
 *   cool-4p cool-1t from 4 processes at once, each its own backend (a
 *           fleet of 4 on one server); beside it pipe64-4p, the pipelined
 *           client from 4 processes
 * Reported per case: decisions/s, p50 and p99 decision latency, round
 * trips per decision; the median of --repeats runs of --seconds each.
 * Benchmarks report; nothing here asserts speed.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "redis_scripts.h"
#include "sluice/redis.h"
#include "test_server.h"

#define NKEYS 10000
#define MAX_SAMPLES 4000000

static sluice_test_redis_t srv;
static uint64_t *lat;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

typedef struct result {
	double rate, p50, p99, trips, fallbacks; /* fallbacks: per decision */
} result_t;

static result_t summarize(uint64_t n, uint64_t ns, uint64_t trips)
{
	uint64_t k = n < MAX_SAMPLES ? n : MAX_SAMPLES;
	qsort(lat, k, sizeof(*lat), cmp_u64);
	return (result_t){ .rate = (double)n * 1e9 / (double)ns, .p50 = (double)lat[k / 2],
		           .p99 = (double)lat[k * 99 / 100], .trips = (double)trips / (double)n };
}

static sluice_redis_limit_config_t limit_cfg(const char *name)
{
	return (sluice_redis_limit_config_t){
		.name = name, .algo = SLUICE_REDIS_FIXED, .limit = 1000000000ULL,
		.window_ns = 1000000000ULL, .lease_max = 4096, .fallback = SLUICE_REDIS_LOCAL,
		.expected_instances = 1,
	};
}

/* decisions a fallback answered: they never reached Redis, so a case's
 * rate counts them apart (the fallbacks column) */
static uint64_t fallbacks(const sluice_redis_stats_t *s)
{
	return s->fallback_local + s->fallback_allow + s->fallback_deny;
}

static uint64_t keyfull, errors; /* SLUICE_EKEYFULL refusals; failed calls */

static sluice_redis_limit_config_t cool_cfg(void)
{
	sluice_redis_limit_config_t cfg = limit_cfg("cool");
	cfg.window_ns = 10000000ULL;
	return cfg;
}
static unsigned seed_base = 1;    /* each process of a -Np case its own keys' sequence */

/* sluice-redis: one limit */
static result_t run_sluice(sluice_redis_t *r, sluice_redis_limit_t *l, double secs)
{
	sluice_redis_stats_t s0, s1;
	sluice_redis_stats(r, &s0);
	uint64_t n = 0, start = now_ns(), end = start + (uint64_t)(secs * 1e9), t = start;
	while (t < end) {
		uint64_t a = now_ns();
		if (sluice_redis_acquire(l, 1, NULL, NULL) < 0)
			errors++;
		t = now_ns();
		if (n < MAX_SAMPLES)
			lat[n] = t - a;
		n++;
	}
	sluice_redis_stats(r, &s1);
	result_t res = summarize(n, t - start, s1.round_trips - s0.round_trips);
	res.fallbacks = (double)(fallbacks(&s1) - fallbacks(&s0)) / (double)n;
	return res;
}

/* sluice-redis on NKEYS keys of a keyed limit, from @threads threads at
 * once (1: the keys case): each its own keys' sequence; latencies of all
 * threads together */
struct keys_arg {
	sluice_redis_keyed_t *kt;
	uint64_t start, end, n, keyfull, *lat;
	size_t cap;
	unsigned seed;
};

static result_t run_keys_threads_until(sluice_redis_t *r, sluice_redis_keyed_t *kt,
                                       unsigned threads, uint64_t start, double secs);

static void *keys_thread(void *p)
{
	struct keys_arg *a = p;
	char key[16];
	uint64_t t;
	while ((t = now_ns()) < a->start) /* a start shared with other processes */
		usleep(100);
	while (t < a->end) {
		int len = snprintf(key, sizeof(key), "k%u", (unsigned)(rand_r(&a->seed) % NKEYS));
		uint64_t b = now_ns();
		a->keyfull += sluice_redis_acquire_key(a->kt, key, (size_t)len, 1, NULL, NULL) ==
		              SLUICE_EKEYFULL;
		t = now_ns();
		if (a->n < a->cap)
			a->lat[a->n] = t - b;
		a->n++;
	}
	return NULL;
}

static result_t run_keys_threads(sluice_redis_t *r, sluice_redis_keyed_t *kt, unsigned threads,
                                 double secs)
{
	return run_keys_threads_until(r, kt, threads, now_ns(), secs);
}

static result_t run_keys_threads_until(sluice_redis_t *r, sluice_redis_keyed_t *kt,
                                       unsigned threads, uint64_t start, double secs)
{
	struct keys_arg a[8];
	pthread_t th[8];
	size_t cap = MAX_SAMPLES / threads;
	sluice_redis_stats_t s0, s1;
	sluice_redis_stats(r, &s0);
	uint64_t end = start + (uint64_t)(secs * 1e9);
	for (unsigned i = 0; i < threads; i++) {
		a[i] = (struct keys_arg){ .kt = kt, .start = start, .end = end,
			                  .lat = malloc(cap * sizeof(uint64_t)), .cap = cap,
			                  .seed = seed_base + i };
		if (!a[i].lat || pthread_create(&th[i], NULL, keys_thread, &a[i]) != 0)
			exit(1);
	}
	uint64_t n = 0, k = 0;
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		keyfull += a[i].keyfull;
		uint64_t got = a[i].n < a[i].cap ? a[i].n : a[i].cap;
		memcpy(lat + k, a[i].lat, got * sizeof(uint64_t));
		k += got;
		n += a[i].n;
		free(a[i].lat);
	}
	uint64_t ns = now_ns() - start;
	sluice_redis_stats(r, &s1);
	result_t res = summarize(k, ns, s1.round_trips - s0.round_trips);
	res.rate = (double)n * 1e9 / (double)ns;
	res.trips = (double)(s1.round_trips - s0.round_trips) / (double)n;
	res.fallbacks = (double)(fallbacks(&s1) - fallbacks(&s0)) / (double)n;
	return res;
}

/* the pipelined baseline: a plain hiredis client sending 64 EVALSHA of
 * the same script per round trip (append 64, read 64); a decision's
 * latency is its batch's */
static result_t run_pipelined_until(redisContext *c, const char *sha, unsigned nl,
                                   uint64_t start, double secs)
{
	uint64_t n = 0, end = start + (uint64_t)(secs * 1e9), t;
	while ((t = now_ns()) < start)
		usleep(100);
	unsigned seed = seed_base;
	char key[64];
	while (t < end) {
		uint64_t a = now_ns();
		for (int i = 0; i < 64; i++) {
			snprintf(key, sizeof(key), "sluice:{base:k%u}:s", (unsigned)(rand_r(&seed) % nl));
			redisAppendCommand(c, "EVALSHA %s 1 %s 1 1 0 1000000000 1000000", sha, key);
		}
		for (int i = 0; i < 64; i++) {
			redisReply *x = NULL;
			if (redisGetReply(c, (void **)&x) != REDIS_OK || !x ||
			    x->type != REDIS_REPLY_ARRAY) {
				fprintf(stderr, "pipelined baseline: bad reply\n");
				exit(1);
			}
			freeReplyObject(x);
		}
		t = now_ns();
		for (int i = 0; i < 64 && n < MAX_SAMPLES; i++)
			lat[n++] = t - a;
	}
	return summarize(n, t - start, n / 64);
}

static result_t run_pipelined(redisContext *c, const char *sha, unsigned nl, double secs)
{
	return run_pipelined_until(c, sha, nl, now_ns(), secs);
}

/*
 * A -Np case: @procs processes forked at once, each with its own backend
 * (cool: a keyed limit like the parent's cool one) or its own hiredis
 * connection (pipe64), all starting at one instant 300 ms after the fork
 * (set-up and connects done before it) and running @secs.  Each reports
 * its decisions/s, p50, p99 and round trips over a pipe; the case's rate
 * is their sum, p50 and p99 the worst process's, round trips per
 * decision over all.
 */
enum { PROC_COOL, PROC_PIPE64 };

static result_t run_procs(int kind, unsigned procs, const char *sha, double secs)
{
	int fd[2];
	if (pipe(fd) != 0)
		exit(1);
	uint64_t start = now_ns() + 300000000ULL;
	for (unsigned p = 0; p < procs; p++) {
		pid_t pid = fork();
		if (pid < 0)
			exit(1);
		if (pid > 0)
			continue;
		close(fd[0]);
		seed_base = 1000 * (p + 1);
		result_t res;
		if (kind == PROC_COOL) {
			sluice_redis_config_t rc = { .port = srv.port, .max_limits = 16385 };
			sluice_redis_t *r;
			sluice_redis_keyed_t *kt;
			sluice_redis_limit_config_t cfg = cool_cfg();
			if (sluice_redis_new(&rc, &r) != 0 ||
			    sluice_redis_keyed_new(r, &cfg, 16384, &kt) != 0)
				_exit(1);
			res = run_keys_threads_until(r, kt, 1, start, secs);
			sluice_redis_keyed_free(kt);
			sluice_redis_free(r);
		} else {
			redisContext *c = redisConnect("127.0.0.1", srv.port);
			if (!c || c->err)
				_exit(1);
			res = run_pipelined_until(c, sha, NKEYS, start, secs);
			redisFree(c);
		}
		if (write(fd[1], &res, sizeof(res)) != (ssize_t)sizeof(res))
			_exit(1);
		_exit(0);
	}
	close(fd[1]);
	result_t sum = { 0 };
	double calls = 0, fell = 0;
	for (unsigned p = 0; p < procs; p++) {
		result_t x;
		if (read(fd[0], &x, sizeof(x)) != (ssize_t)sizeof(x))
			exit(1);
		sum.rate += x.rate;
		sum.p50 = x.p50 > sum.p50 ? x.p50 : sum.p50;
		sum.p99 = x.p99 > sum.p99 ? x.p99 : sum.p99;
		calls += x.trips * x.rate;
		fell += x.fallbacks * x.rate;
	}
	close(fd[0]);
	for (unsigned p = 0; p < procs; p++) {
		int st;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			exit(1);
	}
	sum.trips = calls / sum.rate;
	sum.fallbacks = fell / sum.rate;
	return sum;
}

/* the baseline: one EVALSHA of the same script per decision */
static result_t run_baseline(redisContext *c, const char *sha, unsigned nl, double secs)
{
	uint64_t n = 0, start = now_ns(), end = start + (uint64_t)(secs * 1e9), t = start;
	unsigned seed = 1;
	char key[64];
	while (t < end) {
		unsigned k = nl > 1 ? (unsigned)(rand_r(&seed) % nl) : 0;
		snprintf(key, sizeof(key), "sluice:{base:k%u}:s", k);
		uint64_t a = now_ns();
		redisReply *x = redisCommand(c, "EVALSHA %s 1 %s 1 1 0 1000000000 1000000", sha, key);
		t = now_ns();
		if (!x || x->type != REDIS_REPLY_ARRAY) {
			fprintf(stderr, "baseline: bad reply\n");
			exit(1);
		}
		freeReplyObject(x);
		if (n < MAX_SAMPLES)
			lat[n] = t - a;
		n++;
	}
	return summarize(n, t - start, n);
}

static void line(const char *cs, const char *impl, result_t r)
{
	printf("bench case=%s impl=%s decisions_per_s=%.0f p50_ns=%.0f p99_ns=%.0f "
	       "round_trips_per_decision=%.6f fallbacks_per_decision=%.6f\n",
	       cs, impl, r.rate, r.p50, r.p99, r.trips, r.fallbacks);
}

static result_t median(result_t *v, unsigned n)
{
	double a[64], b[64], c[64], d[64], e[64];
	for (unsigned i = 0; i < n; i++) {
		a[i] = v[i].rate;
		b[i] = v[i].p50;
		c[i] = v[i].p99;
		d[i] = v[i].trips;
		e[i] = v[i].fallbacks;
	}
	return (result_t){ bench_median(a, n), bench_median(b, n), bench_median(c, n),
		           bench_median(d, n), bench_median(e, n) };
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	if (bench_parse_args(argc, argv, "bench_redis", &o))
		return 2;
	if (o.repeats > 64)
		o.repeats = 64;
	lat = malloc(MAX_SAMPLES * sizeof(*lat));
	if (!lat || sluice_test_redis_start(&srv, 0) != 0) {
		fprintf(stderr, "bench_redis: could not start redis-server\n");
		return 1;
	}
	sluice_redis_config_t rc = { .port = srv.port, .max_limits = 2 * 16384 + 1 };
	sluice_redis_t *r;
	if (sluice_redis_new(&rc, &r) != 0)
		return 1;
	sluice_redis_limit_t *hot;
	sluice_redis_limit_config_t cfg = limit_cfg("hot");
	if (sluice_redis_limit_new(r, &cfg, &hot) != 0)
		return 1;
	sluice_redis_keyed_t *keys;
	cfg = limit_cfg("per-key");
	if (sluice_redis_keyed_new(r, &cfg, 16384, &keys) != 0)
		return 1;
	redisContext *c = redisConnect("127.0.0.1", srv.port);
	redisReply *x = c ? redisCommand(c, "SCRIPT LOAD %s", sluice__redis_lua_fixed) : NULL;
	if (!x || x->type != REDIS_REPLY_STRING)
		return 1;
	char sha[41];
	memcpy(sha, x->str, 41);
	freeReplyObject(x);

	/* cool: the same keys on 10 ms windows, each asked about once a
	 * second: far less often than a lease lives */
	sluice_redis_keyed_t *cool;
	cfg = cool_cfg();
	if (sluice_redis_keyed_new(r, &cfg, 16384, &cool) != 0)
		return 1;
	enum { NCASES = 15 };
	result_t res[NCASES][64];
	const char *names_c[NCASES] = { "hot", "hot", "keys", "keys", "paused",
		                        "keys-2t", "keys-4t", "keys-8t", "keys",
		                        "cool-1t", "cool-2t", "cool-4t", "cool-8t",
		                        "cool-4p", "pipe64-4p" };
	const char *impls[NCASES] = { "sluice-redis", "evalsha", "sluice-redis", "evalsha",
		                      "sluice-redis", "sluice-redis", "sluice-redis",
		                      "sluice-redis", "evalsha-pipe64", "sluice-redis",
		                      "sluice-redis", "sluice-redis", "sluice-redis",
		                      "sluice-redis", "evalsha-pipe64" };
	run_sluice(r, hot, o.seconds); /* warm-up: B grows */
	run_keys_threads(r, keys, 1, o.seconds);
	for (unsigned i = 0; i < o.repeats; i++) {
		res[0][i] = run_sluice(r, hot, o.seconds);
		res[1][i] = run_baseline(c, sha, 1, o.seconds);
		res[2][i] = run_keys_threads(r, keys, 1, o.seconds);
		res[3][i] = run_baseline(c, sha, NKEYS, o.seconds);
		res[5][i] = run_keys_threads(r, keys, 2, o.seconds);
		res[6][i] = run_keys_threads(r, keys, 4, o.seconds);
		res[7][i] = run_keys_threads(r, keys, 8, o.seconds);
		res[8][i] = run_pipelined(c, sha, NKEYS, o.seconds);
		for (unsigned t = 0; t < 4; t++)
			res[9 + t][i] = run_keys_threads(r, cool, 1u << t, o.seconds);
		res[13][i] = run_procs(PROC_COOL, 4, sha, o.seconds);
		res[14][i] = run_procs(PROC_PIPE64, 4, sha, o.seconds);
	}
	char out[64];
	for (unsigned i = 0; i < o.repeats; i++) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "CLIENT PAUSE %u", (unsigned)(o.seconds * 1000) + 300);
		sluice_test_redis_cmd(&srv, cmd, out, sizeof(out));
		res[4][i] = run_sluice(r, hot, o.seconds);
		sluice_test_redis_cmd(&srv, "CLIENT UNPAUSE", out, sizeof(out));
		struct timespec ts = { 0, 500000000 }; /* let the breaker close */
		nanosleep(&ts, NULL);
	}
	result_t m[NCASES];
	for (int k = 0; k < NCASES; k++) {
		m[k] = median(res[k], o.repeats);
		line(names_c[k], impls[k], m[k]);
	}
	printf("\n%-8s %-14s %14s %10s %10s %16s %14s\n", "case", "impl", "decisions/s",
	       "p50 ns", "p99 ns", "round trips/dec", "fallbacks/dec");
	for (int k = 0; k < NCASES; k++)
		printf("%-8s %-14s %14.0f %10.0f %10.0f %16.6f %14.6f\n", names_c[k], impls[k],
		       m[k].rate, m[k].p50, m[k].p99, m[k].trips, m[k].fallbacks);
	printf("\nhot: %.0fx the decisions/s, %.0fx fewer round trips; keys: %.1fx, %.1fx\n",
	       m[0].rate / m[1].rate, m[1].trips / (m[0].trips > 0 ? m[0].trips : 1e-12),
	       m[2].rate / m[3].rate, m[3].trips / (m[2].trips > 0 ? m[2].trips : 1e-12));
	printf("keys refused as SLUICE_EKEYFULL (probe window full): %llu; calls that failed: %llu\n",
	       (unsigned long long)keyfull, (unsigned long long)errors);
	redisFree(c);
	sluice_redis_limit_free(hot);
	sluice_redis_keyed_free(keys);
	sluice_redis_keyed_free(cool);
	sluice_redis_free(r);
	sluice_test_redis_stop(&srv);
	free(lat);
	return 0;
}
