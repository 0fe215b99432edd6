/* SPDX-License-Identifier: MIT */
/*
 * decide_n - make exactly COUNT decisions on one limiter, one thread, and
 * nothing else, so a tool that counts instructions (callgrind) or cycles
 * (perf stat) can divide by COUNT.
 *
 *   decide_n ALGO COUNT
 *
 * ALGO: null (the loop alone, to subtract), fixed, ring-exact, ring-lease, gcra, leaky, log,
 * log-deny (the log's refusal: L = 1, every decision after the first refused; the one
 * case outside the allow regime below),
 * fixed-lease, gcra-lease, leaky-lease (per-CPU leases of 1024; GCRA's with the default V),
 * gcra-deny, gcra-lease-deny (GCRA's refusal, without leases and with leases of 64),
 * warmup, decay, decay-deny and decay-deny-mid (refusals: see main), inflight, composite, keyed-gcra,
 * keyed-gcra-sip, keyed-fixed, keyed-window,
 * keyed-inflight (a keyed table, one existing 11-byte key: the hash, the
 * probe and the per-key decision), or mutex-fixed (the published-style
 * baseline: pthread mutex + clock_gettime(CLOCK_MONOTONIC)).
 *
 * The allow regime (limits nothing reaches), n = 1, decision filled.  Time
 * comes from the caller (the _at variants), advancing 1 ns per decision so
 * buckets still roll over (every 100 ms of virtual time) without a clock
 * read: the count is the decision path alone.  The clock a caller adds is
 * measured by bench_clock (a cached-clock read is one load).
 *
 * perf/instructions.sh runs this twice (COUNT and 2 x COUNT) under
 * callgrind and divides the difference by COUNT, which cancels setup.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/sluice.h"

#define SEC 1000000000ULL
#define START (1000 * SEC)

static volatile uint64_t sink;

static void check(int rc, const char *what)
{
	if (rc != 0) {
		fprintf(stderr, "decide_n: %s: %s\n", what, sluice_strerror(rc));
		exit(2);
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

/*
 * The loop for one algorithm, in a function of its own (noinline), so the
 * count reflects the decision path as a caller's loop would compile it, not
 * register pressure in a large main().  DECIDE may use `o`, `t` and `d`.
 */
#define LOOP_FN(name, TYPE, DECIDE, AFTER)                                      \
	static __attribute__((noinline)) uint64_t name(TYPE *o, uint64_t count) \
	{                                                                      \
		sluice_decision_t d;                                           \
		memset(&d, 0, sizeof(d));                                      \
		uint64_t acc = 0, admitted = 0;                                \
		for (uint64_t i = 0; i < count; i++) {                         \
			uint64_t t = START + i;                                \
			int rc_ = (DECIDE);                                    \
			acc += (uint64_t)rc_ + d.remaining;                    \
			admitted += rc_ == 1;                                  \
			if (rc_ == 1) {                                        \
				AFTER;                                         \
			}                                                      \
		}                                                              \
		sink = acc;                                                    \
		return admitted;                                               \
	}

struct mutex_fixed {
	pthread_mutex_t m;
	uint64_t start, used;
};

/* what bench_algos calls the mutex baseline, fixed window */
static int mutex_fixed_decide(struct mutex_fixed *o, sluice_decision_t *d)
{
	pthread_mutex_lock(&o->m);
	uint64_t t = mono_ns();
	if (t - o->start >= SEC) {
		o->start = t - t % SEC;
		o->used = 0;
	}
	int ok = o->used < UINT32_MAX;
	o->used += (uint64_t)ok;
	d->allowed = ok;
	d->limit = UINT32_MAX;
	d->remaining = UINT32_MAX - o->used;
	d->retry_after_ns = 0;
	d->delay_ns = 0;
	d->reset_ns = o->start + SEC - t;
	d->now_ns = t;
	pthread_mutex_unlock(&o->m);
	return ok;
}

LOOP_FN(run_null, void, ((void)o, d.remaining = t, d.now_ns = t, 1), (void)0)
LOOP_FN(run_fixed, sluice_fixed_t, sluice_fixed_acquire_at(o, 1, t, &d), (void)0)
LOOP_FN(run_window, sluice_window_t, sluice_window_acquire_at(o, 1, t, &d), (void)0)
LOOP_FN(run_gcra, sluice_gcra_t, sluice_gcra_acquire_at(o, 1, t, &d), (void)0)
LOOP_FN(run_leaky, sluice_leaky_t, sluice_leaky_acquire_at(o, 1, t, &d), (void)0)
LOOP_FN(run_log, sluice_log_t, sluice_log_acquire_at(o, 1, t, &d), (void)0)
LOOP_FN(run_warmup, sluice_warmup_t, sluice_warmup_acquire_at(o, 1, t, &d), (void)0)
LOOP_FN(run_decay, sluice_decay_t, sluice_decay_acquire_at(o, 1, t, &d), (void)0)
/* decay-deny-mid: n = 2 refused where the crossing lies between half-lives */
LOOP_FN(run_decay2, sluice_decay_t, sluice_decay_acquire_at(o, 2, t, &d), (void)0)
LOOP_FN(run_inflight, sluice_inflight_t, sluice_inflight_acquire_at(o, 1, t, &d),
        sluice_inflight_release(o, 1))
LOOP_FN(run_composite, sluice_composite_t, sluice_composite_acquire_at(o, 1, t, &d), (void)0)
#define KEY "203.0.113.7" /* 11 bytes: an IPv4 address as text */
LOOP_FN(run_keyed, sluice_keyed_t, sluice_keyed_acquire_at(o, KEY, sizeof(KEY) - 1, 1, t, &d),
        (void)0)
LOOP_FN(run_keyed_inflight, sluice_keyed_t,
        sluice_keyed_acquire_at(o, KEY, sizeof(KEY) - 1, 1, t, &d),
        sluice_keyed_release(o, KEY, sizeof(KEY) - 1, 1))
LOOP_FN(run_mutex_fixed, struct mutex_fixed, ((void)t, mutex_fixed_decide(o, &d)), (void)0)

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: decide_n ALGO COUNT\n");
		return 2;
	}
	const char *algo = argv[1];
	uint64_t count = strtoull(argv[2], NULL, 10), admitted = 0;
	sluice_clock_t clk; /* unused by _at, but configs want a valid clock */
	sluice_clock_manual_init(&clk, START);

	if (strcmp(algo, "null") == 0) {
		/* the harness alone: the loop, the time, the sums, the fill */
		admitted = run_null(NULL, count);
	} else if (strcmp(algo, "fixed") == 0) {
		sluice_fixed_t f;
		sluice_fixed_config_t c = { .limit = SLUICE_FIXED_LIMIT_MAX, .window_ns = SEC,
			                    .clock = &clk };
		check(sluice_fixed_init(&f, &c), "init");
		admitted = run_fixed(&f, count);
	} else if (strncmp(algo, "ring-", 5) == 0) {
		sluice_window_t w;
		sluice_window_config_t c = { .limit = SLUICE_WINDOW_LIMIT_MAX, .window_ns = SEC,
			                     .buckets = 10, .clock = &clk,
			                     .lease = strcmp(algo, "ring-lease") == 0 ? 1024 : 0 };
		if (strcmp(algo, "ring-exact") && strcmp(algo, "ring-lease")) {
			fprintf(stderr, "decide_n: unknown ring mode %s\n", algo);
			return 2;
		}
		check(sluice_window_init(&w, &c), "init");
		admitted = run_window(&w, count);
		sluice_window_destroy(&w);
	} else if (strcmp(algo, "gcra") == 0) {
		sluice_gcra_t g;
		sluice_gcra_config_t c = { .rate = 1, .period_ns = 1, .burst = 1000000,
			                   .clock = &clk };
		check(sluice_gcra_init(&g, &c), "init");
		admitted = run_gcra(&g, count);
	} else if (strcmp(algo, "leaky") == 0) {
		sluice_leaky_t l;
		sluice_leaky_config_t c = { .rate = 1, .period_ns = 1, .mode = SLUICE_LEAKY_METER,
			                    .depth = 1000000, .clock = &clk };
		check(sluice_leaky_init(&l, &c), "init");
		admitted = run_leaky(&l, count);
	} else if (strcmp(algo, "fixed-lease") == 0) {
		sluice_fixed_t f;
		sluice_fixed_config_t c = { .limit = SLUICE_WINDOW_LIMIT_MAX, .window_ns = 100000000,
			                    .clock = &clk, .lease = 1024 };
		check(sluice_fixed_init(&f, &c), "init");
		admitted = run_fixed(&f, count);
		sluice_fixed_destroy(&f);
	} else if (strcmp(algo, "gcra-lease") == 0) {
		sluice_gcra_t g;
		sluice_gcra_config_t c = { .rate = 1, .period_ns = 1, .burst = 1000000,
			                   .clock = &clk, .lease = 1024 };
		check(sluice_gcra_init(&g, &c), "init");
		admitted = run_gcra(&g, count);
		sluice_gcra_destroy(&g);
	} else if (strcmp(algo, "gcra-deny") == 0 || strcmp(algo, "gcra-lease-deny") == 0) {
		/* the refusal: burst 1 at 1 per 1000 s, so every decision after
		 * the first is refused; -lease-deny with leases of 64 (issue 27
		 * item 5: a refusal with leases against one without) */
		sluice_gcra_t g;
		sluice_gcra_config_t c = { .rate = 1, .period_ns = 1000 * SEC, .burst = 1,
			                   .clock = &clk,
			                   .lease = strcmp(algo, "gcra-lease-deny") == 0 ? 64 : 0 };
		check(sluice_gcra_init(&g, &c), "init");
		admitted = run_gcra(&g, count);
		sluice_gcra_destroy(&g);
	} else if (strcmp(algo, "leaky-lease") == 0) {
		sluice_leaky_t l;
		sluice_leaky_config_t c = { .rate = 1, .period_ns = 1, .mode = SLUICE_LEAKY_METER,
			                    .depth = 1000000, .clock = &clk, .lease = 1024 };
		check(sluice_leaky_init(&l, &c), "init");
		admitted = run_leaky(&l, count);
		sluice_leaky_destroy(&l);
	} else if (strcmp(algo, "log") == 0 || strcmp(algo, "log-deny") == 0) {
		/* log-deny: L = 1 in a window longer than the run, so every
		 * decision after the first is the refusal path (reads only) */
		int deny = strcmp(algo, "log-deny") == 0;
		sluice_log_t lg;
		sluice_log_config_t c = { .limit = deny ? 1 : 1 << 20,
			                  .window_ns = deny ? 1000 * SEC : 1000000, .clock = &clk };
		check(sluice_log_init(&lg, &c), "init");
		admitted = run_log(&lg, count);
		sluice_log_destroy(&lg);
	} else if (strcmp(algo, "warmup") == 0) {
		sluice_warmup_t w;
		sluice_warmup_config_t c = { .rate = 1, .period_ns = 1, .warmup_ns = 1 << 19,
			                     .clock = &clk };
		check(sluice_warmup_init(&w, &c), "init");
		admitted = run_warmup(&w, count);
	} else if (strcmp(algo, "decay") == 0) {
		sluice_decay_t x;
		sluice_decay_config_t c = { .limit = SLUICE_DECAY_LIMIT_MAX, .half_life_ns = SEC,
			                    .clock = &clk };
		check(sluice_decay_init(&x, &c), "init");
		admitted = run_decay(&x, count);
	} else if (strcmp(algo, "decay-deny") == 0 || strcmp(algo, "decay-deny-mid") == 0) {
		/* The refusal: decay-deny is bench_algos' deny case (L = 1,
		 * h = 10 ms, the one permit taken just before the count
		 * starts, so every decision refuses with the crossing on whole
		 * half-lives); decay-deny-mid takes 3 of L = 3 and asks for 2
		 * (the crossing between half-lives: the closed form's bounds). */
		int mid = strcmp(algo, "decay-deny-mid") == 0;
		sluice_decay_t x;
		sluice_decay_config_t c = { .limit = mid ? 3 : 1, .half_life_ns = 10000000,
			                    .clock = &clk };
		check(sluice_decay_init(&x, &c), "init");
		check(sluice_decay_acquire_at(&x, mid ? 3 : 1, START - 1, NULL) == 1 ? 0
		                                                                   : SLUICE_EINVAL,
		      "the burst");
		admitted = mid ? run_decay2(&x, count) : run_decay(&x, count);
	} else if (strcmp(algo, "inflight") == 0) {
		sluice_inflight_t f;
		sluice_inflight_config_t c = { .limit = 1000, .clock = &clk };
		check(sluice_inflight_init(&f, &c), "init");
		admitted = run_inflight(&f, count);
	} else if (strcmp(algo, "composite") == 0) {
		sluice_limiter_t *parts[2];
		sluice_limiter_config_t ring = { .algo = SLUICE_ALGO_WINDOW };
		ring.window = (sluice_window_config_t){ .limit = SLUICE_WINDOW_LIMIT_MAX,
			                                .window_ns = SEC, .buckets = 10,
			                                .clock = &clk };
		sluice_limiter_config_t gcra = { .algo = SLUICE_ALGO_GCRA };
		gcra.gcra = (sluice_gcra_config_t){ .rate = 1, .period_ns = 1, .burst = 1000000,
			                            .clock = &clk };
		check(sluice_limiter_new(&ring, &parts[0]), "ring");
		check(sluice_limiter_new(&gcra, &parts[1]), "gcra");
		sluice_composite_t cmp;
		sluice_composite_config_t c = { .parts = { parts[0], parts[1] }, .count = 2 };
		check(sluice_composite_init(&cmp, &c), "init");
		admitted = run_composite(&cmp, count);
		sluice_limiter_free(parts[0]);
		sluice_limiter_free(parts[1]);
	} else if (strncmp(algo, "keyed-", 6) == 0) {
		/* seeded, so every run hashes the key to the same slot */
		sluice_keyed_config_t c = { .policy = SLUICE_KEYED_REJECT, .capacity = 1024,
			                    .flags = SLUICE_KEYED_SEEDED, .seed = { 1, 2 } };
		/* keyed-gcra-sip: the keyed-gcra table hashing with SipHash-1-3
		 * (the others use the AES hash where the CPU has AES-NI) */
		if (strcmp(algo, "keyed-gcra-sip") == 0)
			c.flags |= SLUICE_KEYED_SIPHASH;
		if (strcmp(algo, "keyed-gcra") == 0 || strcmp(algo, "keyed-gcra-sip") == 0)
			c.algo = SLUICE_ALGO_GCRA, c.rate = 1, c.period_ns = 1, c.burst = 1000000;
		else if (strcmp(algo, "keyed-fixed") == 0)
			c.algo = SLUICE_ALGO_FIXED, c.limit = SLUICE_KEYED_FIXED_LIMIT_MAX,
			c.window_ns = SEC;
		else if (strcmp(algo, "keyed-window") == 0)
			c.algo = SLUICE_ALGO_WINDOW, c.limit = SLUICE_WINDOW_LIMIT_MAX,
			c.window_ns = SEC, c.buckets = 8;
		else if (strcmp(algo, "keyed-inflight") == 0)
			c.algo = SLUICE_ALGO_INFLIGHT, c.limit = 1000;
		else {
			fprintf(stderr, "decide_n: unknown algorithm %s\n", algo);
			return 2;
		}
		sluice_keyed_t k;
		check(sluice_keyed_init(&k, &c, &clk), "init");
		/* the key exists before the count starts (a lookup, not a claim) */
		check(sluice_keyed_acquire_at(&k, KEY, sizeof(KEY) - 1, 1, START, NULL) == 1 ? 0
		                                                                           : SLUICE_EINVAL,
		      "first decision");
		if (c.algo == SLUICE_ALGO_INFLIGHT) {
			check(sluice_keyed_release(&k, KEY, sizeof(KEY) - 1, 1), "release");
			admitted = run_keyed_inflight(&k, count);
		} else {
			admitted = run_keyed(&k, count);
		}
		sluice_keyed_destroy(&k);
	} else if (strcmp(algo, "mutex-fixed") == 0) {
		struct mutex_fixed m = { PTHREAD_MUTEX_INITIALIZER, 0, 0 };
		admitted = run_mutex_fixed(&m, count);
	} else {
		fprintf(stderr, "decide_n: unknown algorithm %s\n", algo);
		return 2;
	}
	/* the regime check: a refusal takes a different path */
	printf("decide_n algo=%s count=%llu admitted=%llu\n", algo, (unsigned long long)count,
	       (unsigned long long)admitted);
	return 0;
}
