/* SPDX-License-Identifier: MIT */
/*
 * bench_rules.c - the rules engine's costs (issue 12 item 9).
 *
 * Cases:
 *   decide      sluice_engine_decide with 20 rules (20 exact paths, each
 *               per ip and per user: 2 dimensions, token buckets that
 *               admit), 10,000 keys (key k is ip 10.0.k/256.k%256 and user
 *               "user-k"), paths and keys drawn before timing;
 *   keyed       the same two keyed decisions made directly
 *               (sluice_keyed_acquire_at on the rule's two tables: 40
 *               tables of the engine's configuration, so both touch the
 *               same memory; one clock reading per request): the
 *               baseline, in the same process and run;
 *   keyed-batch the same two as one sluice_keyed_acquire_many_at
 *               (SLUICE_KEYED_STOP, as the engine asks a rule's
 *               dimensions): what the batch's prefetch buys here;
 *   read        one urcu-bp read-side section (lock + unlock, inlined),
 *               and decide on an engine with no rule set (the read
 *               section, the request's checks and an empty verdict);
 *   reload      sluice_engine_load_buffer of 1,000 rules (per-key, 64
 *               slots each): the first load (tables made) and a reload of
 *               the same file (every state kept), grace period included.
 * decide, keyed and keyed-batch run with each count of --threads=LIST (default 1,2; any
 * list starting with 1, as bench_algos's) on the same engine / tables.
 * Each case runs once untimed (every key created, every page touched),
 * then --seconds (default 0.3 s) --repeats times (default 7,
 * interleaved); medians reported.  The engine and the tables use the
 * cached clock (the default).
 *
 * Output: one `bench ...` line per case, then a human table with the
 * engine's overhead per request (decide - keyed).  Nothing asserts speed.
 *
 * Instructions, which a noisy machine does not move: `--instr=CASE:N`
 * (CASE decide, keyed, keyed-batch or empty-decide) builds the same engine and tables
 * on a manual clock that stands still, runs 400,000 untimed requests of
 * CASE (every key created), then N more, and exits; under callgrind, the
 * instructions of N = 200,000 minus those of N = 100,000, over 100,000, are
 * one request's (perf/instructions.sh does the same for the algorithms):
 *   for n in 100000 200000; do valgrind --tool=callgrind \
 *     --callgrind-out-file=cg.$n ./build/bench/bench_rules --instr=decide:$n; done
 */
#define _LGPL_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <urcu-bp.h>
#pragma GCC diagnostic pop

#include "sluice/sluice.h"
#include "sluice/engine.h"

#include "bench_common.h"

#define SEC 1000000000ULL
#define NRULES 20
#define NKEYS 10000
#define DRAWS (1u << 20)
#define BATCH 256

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

struct key {
	unsigned char ip[4];
	char user[12];
	size_t user_len;
};

static struct key keys[NKEYS];
static char paths[NRULES][16];
static uint32_t *draws[BENCH_MAX_THREADS]; /* per thread: rule * NKEYS + key */
static int ndraws;                          /* threads with draws */

static sluice_engine_t *eng;
#define CAPACITY 32768 /* slots per table: 10,000 keys at about 30% */
#define PER_COUNT 3    /* cases per thread count: decide, keyed, keyed-batch */
static sluice_keyed_t base[NRULES][2]; /* the baseline: each rule's two tables */

enum kind { K_DECIDE, K_KEYED, K_BATCH, K_READ, K_EMPTY };

static const sluice_clock_t *bclock = &sluice_clock_cached;

struct run {
	enum kind kind;
	int thread;
	sluice_engine_t *e;
	uint64_t deadline, ops, limit; /* limit: stop after that many (0: time) */
	pthread_barrier_t *start;
	volatile uint64_t sink;
};

static void *worker(void *arg)
{
	struct run *r = arg;
	const uint32_t *d = draws[r->thread];
	uint64_t i = 0, ops = 0, sink = 0;
	sluice_verdict_t v;
	pthread_barrier_wait(r->start);
	while (r->limit ? ops < r->limit : mono_ns() < r->deadline) {
		for (int b = 0; b < BATCH; b++, i++) {
			uint32_t x = d[i & (DRAWS - 1)], rule = x / NKEYS, k = x % NKEYS;
			switch (r->kind) {
			case K_DECIDE:
			case K_EMPTY: {
				sluice_request_t q = { .method = "GET", .path = paths[rule],
					               .addr = keys[k].ip, .addr_len = 4,
					               .user = keys[k].user, .user_len = keys[k].user_len };
				sink += (uint64_t)sluice_engine_decide(r->e, &q, &v) + v.action;
				break;
			}
			case K_KEYED: {
				uint64_t now = sluice_clock_now(bclock);
				sluice_decision_t dd;
				sink += (uint64_t)sluice_keyed_acquire_at(&base[rule][0], keys[k].ip, 4, 1,
				                                          now, &dd);
				sink += (uint64_t)sluice_keyed_acquire_at(&base[rule][1], keys[k].user,
				                                          keys[k].user_len, 1, now, &dd);
				break;
			}
			case K_BATCH: {
				uint64_t now = sluice_clock_now(bclock);
				sluice_decision_t dd[2];
				sluice_keyed_request_t rq[2] = {
					{ .table = &base[rule][0], .key = keys[k].ip, .keylen = 4,
					  .n = 1, .d = &dd[0] },
					{ .table = &base[rule][1], .key = keys[k].user,
					  .keylen = keys[k].user_len, .n = 1, .d = &dd[1] },
				};
				sink += (uint64_t)sluice_keyed_acquire_many_at(rq, 2, now,
				                                               SLUICE_KEYED_STOP);
				break;
			}
			case K_READ:
				urcu_bp_read_lock();
				sink += i;
				urcu_bp_read_unlock();
				break;
			}
		}
		ops += BATCH;
	}
	r->ops = ops;
	r->sink = sink;
	return NULL;
}

/* One timed run: ns per operation over all threads. */
static double timed(enum kind kind, int threads, sluice_engine_t *e, double seconds)
{
	static pthread_t t[BENCH_MAX_THREADS];
	static struct run r[BENCH_MAX_THREADS];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++) {
		r[i] = (struct run){ .kind = kind, .thread = i, .e = e, .start = &start };
		pthread_create(&t[i], NULL, worker, &r[i]);
	}
	/* the deadline is set before the barrier releases the workers (the
	 * barrier orders it) */
	uint64_t t0 = mono_ns(), deadline = t0 + (uint64_t)(seconds * 1e9);
	for (int i = 0; i < threads; i++)
		r[i].deadline = deadline;
	pthread_barrier_wait(&start);
	uint64_t ops = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		ops += r[i].ops;
	}
	uint64_t t1 = mono_ns();
	pthread_barrier_destroy(&start);
	/* wall ns per operation, all threads together (as bench_keyed's
	 * ns_per_decision): at 2 threads, the inverse of the combined rate */
	return (double)(t1 - t0) / (double)ops;
}

static char *rules_file(int n, int per_key, size_t *len)
{
	size_t cap = (size_t)n * 300 + 64, u = 0;
	char *y = malloc(cap);
	if (!y)
		exit(1);
	u += (size_t)snprintf(y + u, cap - u, "rules:\n");
	for (int i = 0; i < n; i++)
		u += (size_t)snprintf(y + u, cap - u,
		                      "  - id: r%d\n    match: { path: /api/r%d }\n"
		                      "    dimensions: [ip, user]\n"
		                      "    limit: { algorithm: token_bucket, rate: 1000000000/s, "
		                      "burst: 1000000 }\n"
		                      "    keys: { capacity: %d }\n",
		                      i, i, per_key);
	*len = u;
	return y;
}

/* The keys, the paths and the draws of @threads threads, before any
 * timing (one sequence: thread t's draws follow thread t - 1's). */
static void setup_keys(int threads)
{
	for (int k = 0; k < NKEYS; k++) {
		keys[k].ip[0] = 10;
		keys[k].ip[1] = 0;
		keys[k].ip[2] = (unsigned char)(k / 256);
		keys[k].ip[3] = (unsigned char)(k % 256);
		keys[k].user_len = (size_t)snprintf(keys[k].user, sizeof(keys[k].user), "user-%d", k);
	}
	for (int i = 0; i < NRULES; i++)
		snprintf(paths[i], sizeof(paths[i]), "/api/r%d", i);
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	ndraws = threads;
	for (int t = 0; t < threads; t++) {
		draws[t] = malloc(sizeof(uint32_t) * DRAWS);
		if (!draws[t])
			exit(1);
		for (uint32_t i = 0; i < DRAWS; i++) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			uint32_t rule = (uint32_t)(seed % NRULES), k = (uint32_t)((seed >> 20) % NKEYS);
			draws[t][i] = rule * NKEYS + k;
		}
	}
}

/* --instr=CASE:N (see the top). */
static int instr(const char *arg)
{
	char name[32];
	unsigned long long n = 0;
	if (sscanf(arg, "%31[a-z-]:%llu", name, &n) != 2 || n == 0)
		return 2;
	enum kind kind = strcmp(name, "decide") == 0  ? K_DECIDE
	                 : strcmp(name, "keyed") == 0 ? K_KEYED
	                 : strcmp(name, "keyed-batch") == 0 ? K_BATCH
	                 : strcmp(name, "empty-decide") == 0 ? K_EMPTY
	                                                      : (enum kind)-1;
	if ((int)kind < 0)
		return 2;
	setup_keys(1);
	static sluice_clock_t manual;
	sluice_clock_manual_init(&manual, 1000 * SEC);
	bclock = &manual;
	sluice_engine_options_t eo = { .clock = &manual };
	size_t len;
	char *y = rules_file(NRULES, CAPACITY, &len);
	sluice_engine_t *e;
	if (sluice_engine_new(&eo, &e) ||
	    (kind != K_EMPTY && sluice_engine_load_buffer(e, "bench.yaml", y, len, NULL)))
		return 1;
	free(y);
	sluice_keyed_config_t kc = { .algo = SLUICE_ALGO_GCRA, .capacity = CAPACITY,
		                     .rate = 1000000000, .period_ns = SEC, .burst = 1000000 };
	for (int i = 0; (kind == K_KEYED || kind == K_BATCH) && i < NRULES; i++)
		for (int j = 0; j < 2; j++)
			if (sluice_keyed_init(&base[i][j], &kc, &manual))
				return 1;
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, 1);
	struct run r = { .kind = kind, .e = e, .start = &start, .limit = 400000 };
	worker(&r); /* warm */
	r.limit = n;
	worker(&r);
	printf("instr case=%s n=%llu done\n", name, n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strncmp(argv[1], "--instr=", 8) == 0) {
		int rc = instr(argv[1] + 8);
		if (rc == 2)
			fprintf(stderr, "usage: bench_rules --instr=decide|keyed|keyed-batch|empty-decide:N\n");
		return rc;
	}
	struct bench_opts o;
	int prc = bench_parse_args_threads(argc, argv, "bench_rules", &o);
	if (prc)
		return prc;
	if (sluice_clock_cached_start(0) != 0)
		fprintf(stderr, "bench_rules: no ticker; the cached clock reads CLOCK_MONOTONIC\n");
	setup_keys(bench_threads_max(&o));

	/* the engine: 20 rules x [ip, user], CAPACITY slots per table */
	size_t len;
	char *y = rules_file(NRULES, CAPACITY, &len);
	sluice_engine_t *empty;
	if (sluice_engine_new(NULL, &eng) || sluice_engine_new(NULL, &empty) ||
	    sluice_engine_load_buffer(eng, "bench.yaml", y, len, NULL)) {
		fprintf(stderr, "bench_rules: engine setup failed\n");
		return 1;
	}
	free(y);
	/* the baseline: the tables the engine's rules have */
	sluice_keyed_config_t kc = { .algo = SLUICE_ALGO_GCRA, .capacity = CAPACITY,
		                     .rate = 1000000000, .period_ns = SEC, .burst = 1000000 };
	for (int i = 0; i < NRULES; i++)
		for (int j = 0; j < 2; j++)
			if (sluice_keyed_init(&base[i][j], &kc, NULL)) {
				fprintf(stderr, "bench_rules: keyed setup failed\n");
				return 1;
			}

	/* decide, keyed and keyed-batch at each thread count, in the list's
	 * order, then read and empty-decide at 1 */
	struct rcase {
		const char *name;
		enum kind kind;
		int threads;
	} cases[PER_COUNT * BENCH_MAX_COUNTS + 2];
	int nc = 0;
	for (int t = 0; t < o.nthreads; t++) {
		cases[nc++] = (struct rcase){ "decide", K_DECIDE, o.threads[t] };
		cases[nc++] = (struct rcase){ "keyed", K_KEYED, o.threads[t] };
		cases[nc++] = (struct rcase){ "keyed-batch", K_BATCH, o.threads[t] };
	}
	const int c_read = nc, c_empty = nc + 1;
	cases[nc++] = (struct rcase){ "read", K_READ, 1 };
	cases[nc++] = (struct rcase){ "empty-decide", K_EMPTY, 1 };
	double *res[PER_COUNT * BENCH_MAX_COUNTS + 2], med[PER_COUNT * BENCH_MAX_COUNTS + 2];
	for (int c = 0; c < nc; c++)
		res[c] = calloc(o.repeats, sizeof(double));
	for (int c = 0; c < nc; c++) /* warm: keys created, pages touched */
		(void)timed(cases[c].kind, cases[c].threads, cases[c].kind == K_EMPTY ? empty : eng,
		            o.seconds);
	for (unsigned rep = 0; rep < o.repeats; rep++)
		for (int c = 0; c < nc; c++)
			res[c][rep] = timed(cases[c].kind, cases[c].threads,
			                    cases[c].kind == K_EMPTY ? empty : eng, o.seconds);
	for (int c = 0; c < nc; c++) {
		med[c] = bench_median(res[c], o.repeats);
		printf("bench name=%s threads=%d rules=%d dims=2 keys=%d ns_per_op=%.1f min=%.1f "
		       "max=%.1f repeats=%u\n",
		       cases[c].name, cases[c].threads, cases[c].kind == K_DECIDE ? NRULES : 0, NKEYS,
		       med[c], res[c][0], res[c][o.repeats - 1], o.repeats);
	}

	/* reload: 1,000 rules, first load and a reload of the same file */
	y = rules_file(1000, 64, &len);
	double first[64], again[64];
	unsigned nr = o.repeats < 64 ? o.repeats : 64;
	for (unsigned rep = 0; rep < nr; rep++) {
		sluice_engine_t *e;
		if (sluice_engine_new(NULL, &e) != 0) {
			fprintf(stderr, "bench_rules: sluice_engine_new failed\n");
			exit(1);
		}
		uint64_t t0 = mono_ns();
		int rc1 = sluice_engine_load_buffer(e, "big.yaml", y, len, NULL);
		uint64_t t1 = mono_ns();
		int rc2 = sluice_engine_load_buffer(e, "big.yaml", y, len, NULL);
		uint64_t t2 = mono_ns();
		if (rc1 || rc2) {
			fprintf(stderr, "bench_rules: load of 1,000 rules failed (%d, %d)\n", rc1, rc2);
			return 1;
		}
		first[rep] = (double)(t1 - t0) / 1e6;
		again[rep] = (double)(t2 - t1) / 1e6;
		sluice_engine_free(e);
	}
	free(y);
	double mf = bench_median(first, nr), ma = bench_median(again, nr);
	printf("bench name=load rules=1000 dims=2 ms=%.2f repeats=%u\n", mf, nr);
	printf("bench name=reload rules=1000 dims=2 ms=%.2f repeats=%u\n", ma, nr);

	/* one column per thread count; decide at count t is cases[3t], keyed
	 * cases[3t + 1], keyed-batch cases[3t + 2] */
	printf("\n%-28s", "case");
	for (int t = 0; t < o.nthreads; t++) {
		char h[24];
		snprintf(h, sizeof(h), "%d thread%s", o.threads[t], o.threads[t] == 1 ? "" : "s");
		printf(" %10s", h);
	}
	printf("\n");
	static const char *const per_req[] = { "decide (20 rules, 2 dims)", "2 bare keyed decisions",
		                               "the 2 as one batch", "engine overhead" };
	for (int row = 0; row < 4; row++) {
		printf("%-28s", per_req[row]);
		for (int t = 0; t < o.nthreads; t++)
			printf(" %10.1f", row < 3 ? med[PER_COUNT * t + row]
			                          : med[PER_COUNT * t] - med[PER_COUNT * t + 1]);
		printf("  ns per request\n");
	}
	/* the single figures: the value in the first column, the others blank */
	struct {
		const char *what, *unit;
		double v;
		int ms;
	} one[] = { { "read section (lock+unlock)", "ns", med[c_read], 0 },
		    { "decide, no rule set", "ns", med[c_empty], 0 },
		    { "load 1,000 rules", "ms (tables made)", mf, 1 },
		    { "reload 1,000 rules", "ms (states kept)", ma, 1 } };
	for (size_t row = 0; row < sizeof(one) / sizeof(one[0]); row++) {
		printf(one[row].ms ? "%-28s %10.2f" : "%-28s %10.1f", one[row].what, one[row].v);
		for (int t = 1; t < o.nthreads; t++)
			printf(" %10s", "");
		printf("  %s\n", one[row].unit);
	}
	for (int c = 0; c < nc; c++)
		free(res[c]);
	for (int t = 0; t < ndraws; t++)
		free(draws[t]);
	sluice_engine_free(eng);
	sluice_engine_free(empty);
	for (int i = 0; i < NRULES; i++)
		for (int j = 0; j < 2; j++)
			sluice_keyed_destroy(&base[i][j]);
	sluice_clock_cached_stop();
	return 0;
}
