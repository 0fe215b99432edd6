/* SPDX-License-Identifier: MIT */
/*
 * test_keyed_threads.c - many threads on one keyed table.
 *
 *  - creation_race: threads start together on the same new keys at one
 *    frozen instant, round after round, while the keys of earlier rounds
 *    are reclaimed under them; each key must have admitted exactly its
 *    burst (two live copies of a key would admit twice as much).
 *  - ledger_respects_bound: deciders on a few hot keys and a stream of
 *    cold ones (the table is small, so slots are reclaimed all the time)
 *    record every admission (key, decision time, n); a clock thread moves
 *    the manual clock forward and sometimes back.  Afterwards each key's
 *    ledger is checked against the header's GUARANTEE: reclaims are
 *    lossless, so it must hold exactly.
 *  - inflight_never_exceeds: acquire/release on a few keys; an atomic
 *    per-key occupancy counter, raised after each admission and lowered
 *    before each release, must never pass K.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"
#include "test_pace.h"

#define SEC 1000000000ULL

TestSuite(keyed_threads, .timeout = 120);

static sluice_clock_t mclock;

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* ---- creation race ---------------------------------------------------------- */

#define RACE_KEYS_MAX 64
#define BURST 3

static sluice_keyed_t race_table;
static pthread_barrier_t race_barrier;
static _Atomic uint64_t race_admitted[RACE_KEYS_MAX];
static int race_keys, race_rounds;

static void *race_main(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL | 1;
	for (int round = 0; round < race_rounds; round++) {
		pthread_barrier_wait(&race_barrier);
		uint64_t now = (uint64_t)(round + 1) * 10 * SEC;
		for (int pass = 0; pass < BURST + 1; pass++) {
			for (int i = 0; i < race_keys; i++) {
				int key = (int)((i + xorshift(&x) % 4) % race_keys);
				char name[32];
				snprintf(name, sizeof(name), "round%d-key%d", round, key);
				int rc = sluice_keyed_acquire_at(&race_table, name, strlen(name), 1, now,
				                                 NULL);
				cr_assert(rc == 0 || rc == 1 || rc == SLUICE_EKEYFULL, "%s",
				          sluice_err_name(rc));
				if (rc == 1)
					atomic_fetch_add(&race_admitted[key], 1);
			}
		}
		pthread_barrier_wait(&race_barrier);
		if ((uintptr_t)arg == 0) {
			for (int i = 0; i < race_keys; i++) {
				uint64_t a = atomic_exchange(&race_admitted[i], 0);
				cr_assert_leq(a, BURST, "round %d key %d admitted %llu > burst %d: two copies?",
				              round, i, (unsigned long long)a, BURST);
			}
		}
	}
	return NULL;
}

struct race_case {
	int threads, capacity, keys, rounds;
};

ParameterizedTestParameters(keyed_threads, creation_race)
{
	/* 128 slots for 64 new keys a round, or one group of 8 for 6: the
	 * previous rounds' keys are fresh (10 s later) and reclaimed while
	 * the new ones are created, so racing creators see different first
	 * free slots */
	static struct race_case p[] = {
		{ 2, 128, 64, 40 }, { 4, 128, 64, 30 }, { 8, 128, 64, 20 },
		{ 2, 8, 6, 4000 },  { 4, 8, 6, 2000 },  { 8, 8, 6, 1000 },
	};
	return cr_make_param_array(struct race_case, p, sizeof(p) / sizeof(p[0]));
}

ParameterizedTest(struct race_case *p, keyed_threads, creation_race)
{
	sluice_keyed_config_t c = { .algo = SLUICE_ALGO_GCRA, .capacity = (uint64_t)p->capacity,
		                    .flags = SLUICE_KEYED_COUNT_LOOKUPS, .rate = 1,
		                    .period_ns = SEC, .burst = BURST };
	sluice_clock_manual_init(&mclock, 0);
	cr_assert_eq(sluice_keyed_init(&race_table, &c, &mclock), 0);
	race_keys = p->keys;
	race_rounds = p->rounds;
	int *threads = &p->threads;
	pthread_barrier_init(&race_barrier, NULL, (unsigned)*threads);
	pthread_t t[8];
	for (int i = 0; i < *threads; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, race_main, (void *)(uintptr_t)i), 0);
	for (int i = 0; i < *threads; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&race_barrier);
	sluice_keyed_stats_t s;
	sluice_keyed_stats(&race_table, &s);
	cr_log_info("threads=%d creations=%llu reclaims=%llu rejections=%llu", *threads,
	            (unsigned long long)s.creations, (unsigned long long)s.reclaims,
	            (unsigned long long)s.rejections);
	cr_assert_gt(s.reclaims, 1000, "the rounds must reclaim each other's slots");
	(void)xorshift;
	cr_assert_leq(s.creations, (uint64_t)p->keys * (uint64_t)p->rounds, "a key created twice");
	/* keyed.h: lookups may undercount under racing calls on one CPU's
	 * line (a load and a store), never overcount */
	uint64_t calls = (uint64_t)*threads * (uint64_t)p->rounds * (BURST + 1) * (uint64_t)p->keys;
	cr_assert_leq(s.lookups, calls, "lookups %llu above the %llu calls made",
	              (unsigned long long)s.lookups, (unsigned long long)calls);
	cr_assert_gt(s.lookups, 0);
	sluice_keyed_destroy(&race_table);
}

/* ---- per-key ledger with a moving clock -------------------------------------- */

#define HOT 4
#define RECORD_CAP (1u << 18)
#define STEPS 8000

struct record {
	uint64_t t;
	uint32_t key; /* hot key index, or HOT + cold id */
	uint32_t n;
};

struct decider {
	pthread_t tid;
	struct record *rec;
	size_t nrec;
	uint64_t seed;
	_Atomic uint64_t decisions;
};

static sluice_keyed_t led_table;
static struct decider *deciders;
static int ndeciders;
static _Atomic int running;
static uint64_t led_nmax;

static void *decider_main(void *arg)
{
	struct decider *me = arg;
	uint64_t x = me->seed;
	while (atomic_load_explicit(&running, memory_order_relaxed)) {
		uint64_t r = xorshift(&x);
		uint32_t key = r % 3 ? (uint32_t)(r >> 8) % HOT : HOT + (uint32_t)((r >> 8) % 5000);
		char name[32];
		snprintf(name, sizeof(name), "key-%u", key);
		uint64_t n = 1 + (r >> 40) % led_nmax;
		sluice_decision_t d;
		int rc = sluice_keyed_acquire(&led_table, name, strlen(name), n, &d);
		cr_assert(rc == 0 || rc == 1 || rc == SLUICE_EKEYFULL, "%s", sluice_err_name(rc));
		if (rc == 1 && me->nrec < RECORD_CAP)
			me->rec[me->nrec++] = (struct record){ d.now_ns, key, (uint32_t)n };
		uint64_t k = atomic_load_explicit(&me->decisions, memory_order_relaxed) + 1;
		atomic_store_explicit(&me->decisions, k, memory_order_relaxed);
		if (k % 8 == 0)
			sched_yield();
	}
	return NULL;
}

static void *clock_main(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg | 1, step = (uint64_t)(uintptr_t)arg;
	for (int i = 0; i < STEPS; i++) {
		uint64_t r = xorshift(&x), now = sluice_clock_now(&mclock);
		if (r % 50 == 0)
			sluice_clock_manual_set(&mclock, now - r % (3 * step));
		else
			sluice_clock_manual_advance(&mclock, r % step);
		PACE_WAIT(deciders, ndeciders);
	}
	atomic_store_explicit(&running, 0, memory_order_relaxed);
	return NULL;
}

static int cmp_record(const void *a, const void *b)
{
	const struct record *x = a, *y = b;
	if (x->key != y->key)
		return (x->key > y->key) - (x->key < y->key);
	return (x->t > y->t) - (x->t < y->t);
}

struct led_case {
	sluice_keyed_config_t c;
	char name[16];
	uint64_t step; /* clock step */
	int threads;
};

ParameterizedTestParameters(keyed_threads, ledger_respects_bound)
{
	static struct led_case p[] = {
		{ { .algo = SLUICE_ALGO_GCRA, .capacity = 64, .rate = 1, .period_ns = 1000000,
		    .burst = 8 },
		  "gcra", 200000, 4 },
		{ { .algo = SLUICE_ALGO_LEAKY, .capacity = 64, .rate = 1, .period_ns = 1000000,
		    .depth = 3 },
		  "leaky", 200000, 2 },
		{ { .algo = SLUICE_ALGO_FIXED, .capacity = 64, .limit = 10, .window_ns = 1000000 },
		  "fixed", 100000, 4 },
		{ { .algo = SLUICE_ALGO_WINDOW, .capacity = 64, .limit = 12, .window_ns = 800000,
		    .buckets = 8 },
		  "window", 60000, 4 },
		{ { .algo = SLUICE_ALGO_WINDOW, .capacity = 64, .limit = 12, .window_ns = 800000,
		    .buckets = 8 },
		  "window-8t", 60000, 8 },
	};
	return cr_make_param_array(struct led_case, p, sizeof(p) / sizeof(p[0]));
}

ParameterizedTest(struct led_case *p, keyed_threads, ledger_respects_bound)
{
	sluice_clock_manual_init(&mclock, 1000 * SEC);
	cr_assert_eq(sluice_keyed_init(&led_table, &p->c, &mclock), 0);
	led_nmax = p->c.algo == SLUICE_ALGO_GCRA ? 3 : 2;
	deciders = calloc((size_t)p->threads, sizeof(*deciders));
	cr_assert_not_null(deciders);
	ndeciders = p->threads;
	atomic_store(&running, 1);
	for (int i = 0; i < p->threads; i++) {
		deciders[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
		deciders[i].rec = malloc(sizeof(struct record) * RECORD_CAP);
		cr_assert_not_null(deciders[i].rec);
		cr_assert_eq(pthread_create(&deciders[i].tid, NULL, decider_main, &deciders[i]), 0);
	}
	pthread_t ct;
	cr_assert_eq(pthread_create(&ct, NULL, clock_main, (void *)(uintptr_t)p->step), 0);
	pthread_join(ct, NULL);
	size_t total = 0;
	for (int i = 0; i < p->threads; i++) {
		pthread_join(deciders[i].tid, NULL);
		cr_assert_lt(deciders[i].nrec, RECORD_CAP, "record buffer overflowed");
		total += deciders[i].nrec;
	}
	struct record *all = malloc(sizeof(*all) * (total + 1));
	cr_assert_not_null(all);
	size_t m = 0;
	for (int i = 0; i < p->threads; i++) {
		memcpy(all + m, deciders[i].rec, deciders[i].nrec * sizeof(*all));
		m += deciders[i].nrec;
		free(deciders[i].rec);
	}
	free(deciders);
	qsort(all, total, sizeof(*all), cmp_record);

	/* per key: every interval (GCRA, LEAKY), aligned window (FIXED), run of
	 * N buckets (WINDOW) */
	uint64_t worst_excess = 0, hot_admitted = 0;
	size_t lo = 0;
	while (lo < total) {
		size_t hi = lo;
		while (hi < total && all[hi].key == all[lo].key)
			hi++;
		if (all[lo].key < HOT)
			for (size_t i = lo; i < hi; i++)
				hot_admitted += all[i].n;
		for (size_t i = lo; i < hi; i++) {
			uint64_t sum = 0;
			for (size_t j = i; j < hi; j++) {
				sum += all[j].n;
				uint64_t bound;
				uint64_t dt = all[j].t - all[i].t;
				if (p->c.algo == SLUICE_ALGO_GCRA)
					bound = p->c.burst + dt / (p->c.period_ns / p->c.rate);
				else if (p->c.algo == SLUICE_ALGO_LEAKY)
					bound = p->c.depth + 1 + dt / (p->c.period_ns / p->c.rate);
				else if (p->c.algo == SLUICE_ALGO_FIXED)
					bound = all[i].t / p->c.window_ns == all[j].t / p->c.window_ns
						        ? p->c.limit
						        : UINT64_MAX;
				else {
					uint64_t w = p->c.window_ns / p->c.buckets;
					bound = all[j].t / w - all[i].t / w < p->c.buckets ? p->c.limit
					                                                    : UINT64_MAX;
				}
				if (bound == UINT64_MAX)
					break;
				if (sum > bound && sum - bound > worst_excess)
					worst_excess = sum - bound;
			}
		}
		lo = hi;
	}
	sluice_keyed_stats_t s;
	sluice_keyed_stats(&led_table, &s);
	cr_log_info("%s threads=%d admissions=%zu hot=%llu creations=%llu reclaims=%llu "
	            "rejections=%llu worst_excess=%llu",
	            p->name, p->threads, total, (unsigned long long)hot_admitted,
	            (unsigned long long)s.creations, (unsigned long long)s.reclaims,
	            (unsigned long long)s.rejections, (unsigned long long)worst_excess);
	cr_assert_eq(worst_excess, 0, "%s: a key admitted %llu above its bound", p->name,
	             (unsigned long long)worst_excess);
	cr_assert_gt(s.reclaims, 100, "%s: the table must reclaim under the cold keys", p->name);
	cr_assert_gt(hot_admitted, 100);
	free(all);
	sluice_keyed_destroy(&led_table);
}

/* ---- in-flight ------------------------------------------------------------------ */

#define IF_KEYS 3
#define IF_LIMIT 2

static sluice_keyed_t if_table;
static _Atomic int64_t inside[IF_KEYS];
static _Atomic int64_t if_worst;

static void *inflight_main(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL | 1;
	for (int i = 0; i < 30000; i++) {
		int key = (int)(xorshift(&x) % IF_KEYS);
		char name[16];
		snprintf(name, sizeof(name), "if%d", key);
		int rc = sluice_keyed_acquire_at(&if_table, name, strlen(name), 1, 0, NULL);
		cr_assert(rc == 0 || rc == 1);
		if (rc != 1)
			continue;
		int64_t v = atomic_fetch_add(&inside[key], 1) + 1;
		int64_t w = atomic_load(&if_worst);
		while (v > w && !atomic_compare_exchange_weak(&if_worst, &w, v))
			;
		if (i % 4 == 0)
			sched_yield();
		atomic_fetch_sub(&inside[key], 1);
		cr_assert_eq(sluice_keyed_release(&if_table, name, strlen(name), 1), 0);
	}
	return NULL;
}

Test(keyed_threads, inflight_never_exceeds)
{
	sluice_keyed_config_t c = { .algo = SLUICE_ALGO_INFLIGHT, .capacity = 64,
		                    .limit = IF_LIMIT };
	cr_assert_eq(sluice_keyed_init(&if_table, &c, &sluice_clock_monotonic), 0);
	pthread_t t[6];
	for (int i = 0; i < 6; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, inflight_main, (void *)(uintptr_t)(i + 1)), 0);
	for (int i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	cr_assert_leq(atomic_load(&if_worst), IF_LIMIT);
	cr_assert_eq(atomic_load(&if_worst), IF_LIMIT, "the limit must be reached");
	for (int i = 0; i < IF_KEYS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "if%d", i);
		cr_assert_eq(sluice_keyed_release(&if_table, name, strlen(name), 1), SLUICE_ERELEASE,
		             "every acquire was released");
	}
	sluice_keyed_destroy(&if_table);
}
