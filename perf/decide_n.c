/*
 * decide_n - make exactly COUNT decisions on one limiter, one thread, and
 * nothing else, so a tool that counts instructions (callgrind) or cycles
 * (perf stat) can divide by COUNT.
 *
 *   decide_n ALGO COUNT
 *
 * ALGO: null (the loop alone, to subtract), fixed, ring-exact, ring-lease, ring-striped, gcra, leaky, log,
 * warmup, decay, inflight, composite, or mutex-fixed (the published-style
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

/* The loop for one algorithm: DECIDE may use `t` and `d`. */
#define RUN(DECIDE, AFTER)                                                      \
	do {                                                                   \
		sluice_decision_t d;                                           \
		memset(&d, 0, sizeof(d));                                      \
		uint64_t acc = 0;                                              \
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
	} while (0)

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
		RUN((d.remaining = t, d.now_ns = t, 1), (void)0);
	} else if (strcmp(algo, "fixed") == 0) {
		sluice_fixed_t f;
		sluice_fixed_config_t c = { .limit = SLUICE_FIXED_LIMIT_MAX, .window_ns = SEC,
			                    .clock = &clk };
		check(sluice_fixed_init(&f, &c), "init");
		RUN(sluice_fixed_acquire_at(&f, 1, t, &d), (void)0);
	} else if (strncmp(algo, "ring-", 5) == 0) {
		sluice_window_t w;
		sluice_window_config_t c = { .limit = SLUICE_WINDOW_LIMIT_MAX, .window_ns = SEC,
			                     .buckets = 10, .clock = &clk,
			                     .mode = strcmp(algo, "ring-striped") == 0 ?
			                                     SLUICE_STRIPED :
			                                     SLUICE_EXACT,
			                     .lease = strcmp(algo, "ring-lease") == 0 ? 1024 : 0 };
		if (strcmp(algo, "ring-exact") && strcmp(algo, "ring-lease") &&
		    strcmp(algo, "ring-striped")) {
			fprintf(stderr, "decide_n: unknown ring mode %s\n", algo);
			return 2;
		}
		check(sluice_window_init(&w, &c), "init");
		RUN(sluice_window_acquire_at(&w, 1, t, &d), (void)0);
		sluice_window_destroy(&w);
	} else if (strcmp(algo, "gcra") == 0) {
		sluice_gcra_t g;
		sluice_gcra_config_t c = { .rate = 1, .period_ns = 1, .burst = 1000000,
			                   .clock = &clk };
		check(sluice_gcra_init(&g, &c), "init");
		RUN(sluice_gcra_acquire_at(&g, 1, t, &d), (void)0);
	} else if (strcmp(algo, "leaky") == 0) {
		sluice_leaky_t l;
		sluice_leaky_config_t c = { .rate = 1, .period_ns = 1, .mode = SLUICE_LEAKY_METER,
			                    .depth = 1000000, .clock = &clk };
		check(sluice_leaky_init(&l, &c), "init");
		RUN(sluice_leaky_acquire_at(&l, 1, t, &d), (void)0);
	} else if (strcmp(algo, "log") == 0) {
		sluice_log_t lg;
		sluice_log_config_t c = { .limit = 1 << 20, .window_ns = 1000000, .clock = &clk };
		check(sluice_log_init(&lg, &c), "init");
		RUN(sluice_log_acquire_at(&lg, 1, t, &d), (void)0);
		sluice_log_destroy(&lg);
	} else if (strcmp(algo, "warmup") == 0) {
		sluice_warmup_t w;
		sluice_warmup_config_t c = { .rate = 1, .period_ns = 1, .warmup_ns = 1 << 19,
			                     .clock = &clk };
		check(sluice_warmup_init(&w, &c), "init");
		RUN(sluice_warmup_acquire_at(&w, 1, t, &d), (void)0);
	} else if (strcmp(algo, "decay") == 0) {
		sluice_decay_t x;
		sluice_decay_config_t c = { .limit = SLUICE_DECAY_LIMIT_MAX, .half_life_ns = SEC,
			                    .clock = &clk };
		check(sluice_decay_init(&x, &c), "init");
		RUN(sluice_decay_acquire_at(&x, 1, t, &d), (void)0);
	} else if (strcmp(algo, "inflight") == 0) {
		sluice_inflight_t f;
		sluice_inflight_config_t c = { .limit = 1000, .clock = &clk };
		check(sluice_inflight_init(&f, &c), "init");
		RUN(sluice_inflight_acquire_at(&f, 1, t, &d), sluice_inflight_release(&f, 1));
	} else if (strcmp(algo, "composite") == 0) {
		sluice_limiter_t *parts[2];
		sluice_limiter_config_t ring = { .kind = SLUICE_KIND_WINDOW };
		ring.window = (sluice_window_config_t){ .limit = SLUICE_WINDOW_LIMIT_MAX,
			                                .window_ns = SEC, .buckets = 10,
			                                .clock = &clk };
		sluice_limiter_config_t gcra = { .kind = SLUICE_KIND_GCRA };
		gcra.gcra = (sluice_gcra_config_t){ .rate = 1, .period_ns = 1, .burst = 1000000,
			                            .clock = &clk };
		check(sluice_limiter_new(&ring, &parts[0]), "ring");
		check(sluice_limiter_new(&gcra, &parts[1]), "gcra");
		sluice_composite_t cmp;
		sluice_composite_config_t c = { .parts = { parts[0], parts[1] }, .count = 2 };
		check(sluice_composite_init(&cmp, &c), "init");
		RUN(sluice_composite_acquire_at(&cmp, 1, t, &d), (void)0);
		sluice_limiter_free(parts[0]);
		sluice_limiter_free(parts[1]);
	} else if (strcmp(algo, "mutex-fixed") == 0) {
		/* what bench_algos calls the mutex baseline, fixed window */
		pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
		uint64_t start = 0, used = 0;
		RUN((pthread_mutex_lock(&m), t = mono_ns(),
		     (t - start >= SEC ? (start = t - t % SEC, used = 0) : 0),
		     d.allowed = used < UINT32_MAX, used += (uint64_t)d.allowed,
		     d.remaining = UINT32_MAX - used, d.now_ns = t, pthread_mutex_unlock(&m),
		     d.allowed),
		    (void)0);
	} else {
		fprintf(stderr, "decide_n: unknown algorithm %s\n", algo);
		return 2;
	}
	/* the regime check: a refusal takes a different path */
	printf("decide_n algo=%s count=%llu admitted=%llu\n", algo, (unsigned long long)count,
	       (unsigned long long)admitted);
	return 0;
}
