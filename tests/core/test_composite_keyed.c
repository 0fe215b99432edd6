/* SPDX-License-Identifier: MIT */
/*
 * test_composite_keyed.c - "per key and also in total, all or nothing": a
 * composite of a keyed part (a per-IP GCRA table behind the generic
 * handle) and a global part, with the key given per decision.
 *
 * The clock stands still, so nothing refills and the ledger is exact: at
 * the end every key's state must hold exactly the permits the composite
 * admitted for it plus those a refund could not give back
 * (sluice_composite_unreturned()), and the global part exactly the
 * composite's admissions.  A keyed part that keeps what a refused request
 * took (no refund), or gives back what it never took, breaks one equality.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "sluice/sluice.h"

#define SEC 1000000000ULL
#define NKEYS 16
#define BURST 4    /* per key: b = 4 at one instant, then 1 per s */
#define GLOBAL 40  /* in total: 40 per window (of the 64 the keys allow) */
#define THREADS 4
#define OPS 20000

TestSuite(composite_keyed, .timeout = 120);

static sluice_clock_t mclock;

struct kit {
	sluice_keyed_t table;
	sluice_limiter_t *per_key, *total, *both;
};

static void kit_make(struct kit *k)
{
	sluice_clock_manual_init(&mclock, 10 * SEC);
	sluice_keyed_config_t kc = { .algo = SLUICE_ALGO_GCRA, .policy = SLUICE_KEYED_REJECT,
		                     .capacity = 64, .rate = 1, .period_ns = SEC, .burst = BURST };
	cr_assert_eq(sluice_keyed_init(&k->table, &kc, &mclock), 0);
	sluice_limiter_config_t pk = { .algo = SLUICE_ALGO_KEYED, .keyed = &k->table };
	cr_assert_eq(sluice_limiter_new(&pk, &k->per_key), 0);
	sluice_limiter_config_t tc = { .algo = SLUICE_ALGO_FIXED,
		                       .fixed = { .limit = GLOBAL, .window_ns = 3600 * SEC,
		                                  .clock = &mclock } };
	cr_assert_eq(sluice_limiter_new(&tc, &k->total), 0);
	sluice_limiter_config_t cc = { .algo = SLUICE_ALGO_COMPOSITE,
		                       .composite = { .parts = { k->per_key, k->total },
		                                      .count = 2 } };
	cr_assert_eq(sluice_limiter_new(&cc, &k->both), 0);
}

static void kit_free(struct kit *k)
{
	sluice_limiter_free(k->both);
	sluice_limiter_free(k->total);
	sluice_limiter_free(k->per_key);
	sluice_keyed_destroy(&k->table);
}

static size_t key_name(char *buf, unsigned key)
{
	return (size_t)snprintf(buf, 16, "ip-%u", key);
}

/* How many single permits @key can still take at the frozen time (taking
 * them: call once, at the end). */
static uint64_t drain_key(sluice_keyed_t *t, unsigned key)
{
	char name[16];
	size_t len = key_name(name, key);
	uint64_t got = 0;
	while (sluice_keyed_acquire(t, name, len, 1, NULL) == 1)
		got++;
	return got;
}

Test(composite_keyed, the_keyed_part_gives_back_when_the_global_part_refuses)
{
	struct kit k;
	kit_make(&k);
	char a[16], b[16];
	size_t la = key_name(a, 1), lb = key_name(b, 2);
	sluice_decision_t d;
	/* the plain calls have no key for a keyed part */
	cr_assert_eq(sluice_limiter_acquire(k.per_key, 1, &d), SLUICE_EKEYLEN);
	/* key a takes its whole burst, through both parts */
	for (int i = 0; i < BURST; i++)
		cr_assert_eq(sluice_limiter_acquire_key(k.both, a, la, 1, &d), 1, "a #%d", i);
	cr_assert_eq(sluice_limiter_acquire_key(k.both, a, la, 1, &d), 0, "a is at its burst");
	/* the total takes the rest of its limit elsewhere */
	cr_assert_eq(sluice_limiter_acquire(k.total, GLOBAL - BURST - 1, &d), 1);
	/* key b: one permit fits the total, the second does not, and b's
	 * own permit for it comes back */
	cr_assert_eq(sluice_limiter_acquire_key(k.both, b, lb, 1, &d), 1);
	cr_assert_eq(sluice_limiter_acquire_key(k.both, b, lb, 1, &d), 0, "the total is full");
	cr_assert_eq(drain_key(&k.table, 2), BURST - 1, "b lost nothing to the refusal");
	kit_free(&k);
}

Test(composite_keyed, two_keyed_handles_over_one_table_are_a_duplicate)
{
	struct kit k;
	kit_make(&k);
	sluice_limiter_config_t pk = { .algo = SLUICE_ALGO_KEYED, .keyed = &k.table };
	sluice_limiter_t *again, *c = NULL;
	cr_assert_eq(sluice_limiter_new(&pk, &again), 0);
	sluice_limiter_config_t cc = { .algo = SLUICE_ALGO_COMPOSITE,
		                       .composite = { .parts = { k.per_key, again }, .count = 2 } };
	cr_assert_eq(sluice_limiter_new(&cc, &c), SLUICE_EDUPLICATE);
	sluice_limiter_free(again);
	kit_free(&k);
}

struct worker {
	pthread_t tid;
	sluice_composite_t *both;
	uint64_t seed;
	uint64_t admitted[NKEYS];
};

static void *worker_main(void *arg)
{
	struct worker *me = arg;
	uint64_t x = me->seed;
	for (int i = 0; i < OPS; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		unsigned key = (unsigned)(x % NKEYS);
		char name[16];
		size_t len = key_name(name, key);
		int rc = sluice_composite_acquire_key_at(me->both, name, len, 1,
		                                         sluice_clock_now(&mclock), NULL, NULL);
		cr_assert_geq(rc, 0, "acquire_key: %s", sluice_err_name(rc));
		if (rc == 1)
			me->admitted[key]++;
	}
	return NULL;
}

Test(composite_keyed, all_or_nothing_under_threads)
{
	struct kit k;
	kit_make(&k);
	/* the composite itself (not behind a handle), for its unreturned count */
	sluice_composite_t both;
	sluice_composite_config_t cc = { .parts = { k.per_key, k.total }, .count = 2 };
	cr_assert_eq(sluice_composite_init(&both, &cc), 0);
	struct worker w[THREADS];
	memset(w, 0, sizeof(w));
	for (int i = 0; i < THREADS; i++) {
		w[i].both = &both;
		w[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
		cr_assert_eq(pthread_create(&w[i].tid, NULL, worker_main, &w[i]), 0);
	}
	uint64_t per_key[NKEYS] = { 0 }, total = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(w[i].tid, NULL);
		for (int j = 0; j < NKEYS; j++)
			per_key[j] += w[i].admitted[j];
	}
	/* the global part counted exactly the composite's admissions */
	for (int j = 0; j < NKEYS; j++)
		total += per_key[j];
	cr_assert_eq(total, GLOBAL, "the total binds: %llu admitted", (unsigned long long)total);
	uint64_t room = 0;
	cr_assert_eq(sluice_limiter_available(k.total, &room), 0);
	cr_assert_eq(room, 0, "the global part holds what was admitted, no more");
	/* each key: its burst = what the composite admitted for it + what is
	 * left + what a refund could not give back (each unreturned refund
	 * kept exactly one permit: n = 1) */
	uint64_t kept = 0;
	for (int j = 0; j < NKEYS; j++) {
		cr_assert_leq(per_key[j], BURST, "key %d admitted %llu", j,
		              (unsigned long long)per_key[j]);
		uint64_t left = drain_key(&k.table, (unsigned)j);
		cr_assert_leq(per_key[j] + left, BURST, "key %d: %llu + %llu above its burst", j,
		              (unsigned long long)per_key[j], (unsigned long long)left);
		kept += BURST - per_key[j] - left;
	}
	cr_assert_eq(kept, sluice_composite_unreturned(&both),
	             "permits kept by keys (%llu) are exactly the refunds that failed",
	             (unsigned long long)kept);
	kit_free(&k);
}

/* sluice_keyed_refund on its own: exact while the key's state is what the
 * admission left, SLUICE_ECANCEL (nothing given back) otherwise. */
Test(composite_keyed, keyed_refund_is_exact_only_on_the_state_it_left)
{
	sluice_clock_manual_init(&mclock, 10 * SEC);
	const char *a = "a", *b = "b";
	sluice_decision_t d1, d2;
	/* GCRA: the latest admission of a key comes back, an older one not */
	sluice_keyed_t g;
	sluice_keyed_config_t gc = { .algo = SLUICE_ALGO_GCRA, .capacity = 8, .rate = 1,
		                     .period_ns = SEC, .burst = 3 };
	cr_assert_eq(sluice_keyed_init(&g, &gc, &mclock), 0);
	cr_assert_eq(sluice_keyed_acquire(&g, a, 1, 1, &d1), 1);
	cr_assert_eq(sluice_keyed_acquire(&g, a, 1, 1, &d2), 1);
	cr_assert_eq(sluice_keyed_refund(&g, a, 1, 1, &d1), SLUICE_ECANCEL, "decided on since");
	cr_assert_eq(sluice_keyed_refund(&g, a, 1, 1, &d2), 0);
	cr_assert_eq(sluice_keyed_refund(&g, a, 1, 1, &d2), SLUICE_ECANCEL, "twice: not exact");
	cr_assert_eq(sluice_keyed_refund(&g, b, 1, 1, &d2), SLUICE_ECANCEL, "no such key");
	int left = 0;
	while (sluice_keyed_acquire(&g, a, 1, 1, NULL) == 1)
		left++;
	cr_assert_eq(left, 2, "3 - 2 taken + 1 given back");
	sluice_decision_t no = d2;
	no.allowed = 0;
	cr_assert_eq(sluice_keyed_refund(&g, a, 1, 1, &no), SLUICE_EINVAL);
	cr_assert_eq(sluice_keyed_refund(&g, a, 1, 0, &d2), SLUICE_EINVAL);
	sluice_keyed_destroy(&g);
	/* FIXED: within the admission's window, its count drops */
	sluice_keyed_t f;
	sluice_keyed_config_t fc = { .algo = SLUICE_ALGO_FIXED, .capacity = 8, .limit = 3,
		                     .window_ns = SEC };
	cr_assert_eq(sluice_keyed_init(&f, &fc, &mclock), 0);
	cr_assert_eq(sluice_keyed_acquire(&f, a, 1, 2, &d1), 1);
	cr_assert_eq(sluice_keyed_acquire(&f, a, 1, 1, &d2), 1);
	cr_assert_eq(sluice_keyed_acquire(&f, a, 1, 1, NULL), 0, "full");
	cr_assert_eq(sluice_keyed_refund(&f, a, 1, 2, &d1), 0, "same window: any admission of it");
	cr_assert_eq(sluice_keyed_acquire(&f, a, 1, 2, NULL), 1, "the 2 came back");
	sluice_clock_manual_advance(&mclock, SEC);
	cr_assert_eq(sluice_keyed_acquire(&f, a, 1, 1, NULL), 1, "a new window");
	cr_assert_eq(sluice_keyed_refund(&f, a, 1, 1, &d2), SLUICE_EEXPIRED, "its window is over");
	sluice_keyed_destroy(&f);
	/* WINDOW: never exact */
	sluice_keyed_t w;
	sluice_keyed_config_t wc = { .algo = SLUICE_ALGO_WINDOW, .capacity = 8, .limit = 3,
		                     .window_ns = SEC, .buckets = 4 };
	cr_assert_eq(sluice_keyed_init(&w, &wc, &mclock), 0);
	cr_assert_eq(sluice_keyed_acquire(&w, a, 1, 1, &d1), 1);
	cr_assert_eq(sluice_keyed_refund(&w, a, 1, 1, &d1), SLUICE_ECANCEL);
	sluice_keyed_destroy(&w);
}

/* sluice_keyed_refund on a LEAKY table (the TAT path with the meter's
 * depth): exact on the state the admission left, in the era it was made
 * in; SLUICE_ECANCEL once decided on since, or after a change. */
Test(composite_keyed, keyed_refund_on_a_leaky_table)
{
	sluice_clock_manual_init(&mclock, 10 * SEC);
	const char *a = "a";
	sluice_decision_t d1, d2, d3;
	sluice_keyed_t l;
	/* rate 1/s, depth 2: D + 1 = 3 at one instant */
	sluice_keyed_config_t lc = { .algo = SLUICE_ALGO_LEAKY, .capacity = 8, .rate = 1,
		                     .period_ns = SEC, .depth = 2 };
	cr_assert_eq(sluice_keyed_init(&l, &lc, &mclock), 0);
	cr_assert_eq(sluice_keyed_acquire(&l, a, 1, 1, &d1), 1);
	cr_assert_eq(sluice_keyed_acquire(&l, a, 1, 1, &d2), 1);
	cr_assert_eq(sluice_keyed_acquire(&l, a, 1, 1, &d3), 1);
	cr_assert_eq(sluice_keyed_acquire(&l, a, 1, 1, NULL), 0, "full at D + 1");
	cr_assert_eq(sluice_keyed_refund(&l, a, 1, 1, &d2), SLUICE_ECANCEL, "decided on since");
	cr_assert_eq(sluice_keyed_refund(&l, a, 1, 1, &d3), 0, "the latest comes back");
	cr_assert_eq(sluice_keyed_refund(&l, a, 1, 1, &d3), SLUICE_ECANCEL, "twice: not exact");
	cr_assert_eq(sluice_keyed_acquire(&l, a, 1, 1, &d3), 1, "the permit given back");
	cr_assert_eq(sluice_keyed_acquire(&l, a, 1, 1, NULL), 0, "and no more");
	/* a change since the admission: its state word was converted */
	cr_assert_eq(sluice_keyed_set_rate(&l, 2, SEC), 0);
	cr_assert_eq(sluice_keyed_refund(&l, a, 1, 1, &d3), SLUICE_ECANCEL, "another era");
	cr_assert_eq(sluice_keyed_acquire(&l, a, 1, 1, NULL), 0, "nothing was given back");
	/* n more than any admission can take (D + 1): nothing back */
	sluice_clock_manual_advance(&mclock, 10 * SEC);
	cr_assert_eq(sluice_keyed_acquire(&l, a, 1, 1, &d1), 1);
	cr_assert_eq(sluice_keyed_refund(&l, a, 1, 4, &d1), SLUICE_ECANCEL, "above D + 1");
	cr_assert_eq(sluice_keyed_refund(&l, a, 1, 1, &d1), 0);
	int left = 0;
	while (left < 10 && sluice_keyed_acquire(&l, a, 1, 1, NULL) == 1)
		left++;
	cr_assert_eq(left, 3, "a full meter again: D + 1");
	sluice_keyed_destroy(&l);
}

/* sluice_limiter_release_key on a keyed INFLIGHT table, alone and as the
 * keyed part of a composite with a global in-flight limit: it ends the
 * key's requests (and the global part's), and only that key's. */
Test(composite_keyed, release_key_on_a_keyed_inflight_table)
{
	sluice_clock_manual_init(&mclock, 10 * SEC);
	sluice_keyed_t t;
	sluice_keyed_config_t kc = { .algo = SLUICE_ALGO_INFLIGHT, .capacity = 8, .limit = 2 };
	cr_assert_eq(sluice_keyed_init(&t, &kc, &mclock), 0);
	sluice_limiter_t *pk, *total, *both;
	sluice_limiter_config_t pc = { .algo = SLUICE_ALGO_KEYED, .keyed = &t };
	cr_assert_eq(sluice_limiter_new(&pc, &pk), 0);
	sluice_limiter_config_t tc = { .algo = SLUICE_ALGO_INFLIGHT,
		                       .inflight = { .limit = 3, .clock = &mclock } };
	cr_assert_eq(sluice_limiter_new(&tc, &total), 0);
	sluice_limiter_config_t cc = { .algo = SLUICE_ALGO_COMPOSITE,
		                       .composite = { .parts = { pk, total }, .count = 2 } };
	cr_assert_eq(sluice_limiter_new(&cc, &both), 0);

	/* the keyed handle alone */
	cr_assert_eq(sluice_limiter_acquire_key(pk, "a", 1, 1, NULL), 1);
	cr_assert_eq(sluice_limiter_acquire_key(pk, "a", 1, 1, NULL), 1);
	cr_assert_eq(sluice_limiter_acquire_key(pk, "a", 1, 1, NULL), 0, "K = 2 held");
	cr_assert_eq(sluice_limiter_release_key(pk, "b", 1, 1), SLUICE_ERELEASE, "b holds none");
	cr_assert_eq(sluice_limiter_acquire_key(pk, "a", 1, 1, NULL), 0, "b's release freed no a");
	cr_assert_eq(sluice_limiter_release_key(pk, "a", 1, 3), SLUICE_ERELEASE, "more than held");
	cr_assert_eq(sluice_limiter_release_key(pk, "a", 1, 1), 0);
	cr_assert_eq(sluice_limiter_acquire_key(pk, "a", 1, 1, NULL), 1, "the slot came back");
	cr_assert_eq(sluice_limiter_release(pk, 1), SLUICE_EKEYLEN, "a keyed table needs the key");
	cr_assert_eq(sluice_limiter_release_key(pk, "a", 1, 2), 0);
	cr_assert_eq(sluice_keyed_release(&t, "a", 1, 1), SLUICE_ERELEASE, "a holds none now");

	/* through the composite: per key 2, in total 3 */
	cr_assert_eq(sluice_limiter_acquire_key(both, "a", 1, 2, NULL), 1);
	cr_assert_eq(sluice_limiter_acquire_key(both, "b", 1, 1, NULL), 1);
	cr_assert_eq(sluice_limiter_acquire_key(both, "c", 1, 1, NULL), 0, "3 held in total");
	uint64_t room = 9;
	cr_assert_eq(sluice_limiter_available(total, &room), 0);
	cr_assert_eq(room, 0);
	cr_assert_eq(sluice_limiter_release_key(both, "a", 1, 1), 0);
	cr_assert_eq(sluice_limiter_available(total, &room), 0);
	cr_assert_eq(room, 1, "the global part was released too");
	cr_assert_eq(sluice_limiter_acquire_key(both, "b", 1, 1, NULL), 1, "b: 2 of 2");
	cr_assert_eq(sluice_limiter_acquire_key(both, "b", 1, 1, NULL), 0, "b's own limit");
	cr_assert_eq(sluice_limiter_release_key(both, "b", 1, 2), 0);
	cr_assert_eq(sluice_limiter_release_key(both, "a", 1, 1), 0);
	cr_assert_eq(sluice_limiter_available(total, &room), 0);
	cr_assert_eq(room, 3, "everything ended");
	cr_assert_eq(sluice_keyed_release(&t, "b", 1, 1), SLUICE_ERELEASE, "b holds none");

	sluice_limiter_free(both);
	sluice_limiter_free(total);
	sluice_limiter_free(pk);
	sluice_keyed_destroy(&t);
}
