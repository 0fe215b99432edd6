/* SPDX-License-Identifier: MIT */
/*
 * test_keyed_many.c - sluice_keyed_acquire_many_at (keyed.h, "Batches"):
 * without flags, a batch decides exactly as the same calls of
 * sluice_keyed_acquire_at made one after the other (every result and every
 * decision field, over random batches on tables of every algorithm, keys
 * repeated within a batch); with SLUICE_KEYED_ALL, one refusal gives back
 * what the batch took before it and asks nothing after it; with
 * SLUICE_KEYED_STOP, one refusal keeps what came before it and asks nothing
 * after it; the batch's own
 * checks; and, from two threads, batches and single calls sharing a FIXED
 * table never admit more than its limit in a window.
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "sluice/sluice.h"
#include "test_keyed_common.h"

/* Four tables, one of each decision shape, on mclock. */
#define NT 4
static sluice_keyed_config_t table_cfg(int t)
{
	sluice_keyed_config_t c = { .policy = SLUICE_KEYED_REJECT, .capacity = 256,
		                    .flags = SLUICE_KEYED_SEEDED, .seed = { 7, (uint64_t)t } };
	switch (t) {
	case 0:
		c.algo = SLUICE_ALGO_GCRA, c.rate = 10, c.period_ns = SEC, c.burst = 3;
		break;
	case 1:
		c.algo = SLUICE_ALGO_FIXED, c.limit = 4, c.window_ns = SEC;
		break;
	case 2:
		c.algo = SLUICE_ALGO_WINDOW, c.limit = 5, c.window_ns = SEC, c.buckets = 4;
		break;
	default:
		c.algo = SLUICE_ALGO_INFLIGHT, c.limit = 3;
		break;
	}
	return c;
}

static void make_tables(sluice_keyed_t *k)
{
	sluice_clock_manual_init(&mclock, 0);
	for (int t = 0; t < NT; t++) {
		sluice_keyed_config_t c = table_cfg(t);
		cr_assert_eq(sluice_keyed_init(&k[t], &c, &mclock), 0);
	}
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return *x;
}

static void same_decision(const sluice_decision_t *a, const sluice_decision_t *b, int step)
{
	cr_assert_eq(a->allowed, b->allowed, "step %d", step);
	cr_assert_eq(a->limit, b->limit, "step %d", step);
	cr_assert_eq(a->remaining, b->remaining, "step %d", step);
	cr_assert_eq(a->retry_after_ns, b->retry_after_ns, "step %d", step);
	cr_assert_eq(a->delay_ns, b->delay_ns, "step %d", step);
	cr_assert_eq(a->reset_ns, b->reset_ns, "step %d", step);
	cr_assert_eq(a->now_ns, b->now_ns, "step %d", step);
}

/* Two copies of the four tables (the same seeds: the same slots), one
 * driven by batches, the other by the same requests one call at a time. */
Test(keyed_many, a_batch_decides_as_single_calls)
{
	sluice_keyed_t a[NT], b[NT];
	make_tables(a);
	make_tables(b);
	static const char *keys[] = { "alpha", "beta", "gamma", "a-key-of-16-byte", "e" };
	uint64_t x = 0x9E3779B97F4A7C15ULL, now = 0;
	int admitted = 0, refused = 0, released = 0;
	for (int step = 0; step < 4000; step++) {
		now += rnd(&x) % (40 * MS);
		size_t count = 1 + rnd(&x) % SLUICE_KEYED_BATCH_MAX;
		sluice_keyed_request_t req[SLUICE_KEYED_BATCH_MAX];
		sluice_decision_t da[SLUICE_KEYED_BATCH_MAX], db[SLUICE_KEYED_BATCH_MAX];
		for (size_t i = 0; i < count; i++) {
			int t = (int)(rnd(&x) % NT);
			const char *key = keys[rnd(&x) % 5];
			uint64_t n = 1 + rnd(&x) % 3;
			req[i] = (sluice_keyed_request_t){ .table = &a[t], .key = key,
				                           .keylen = strlen(key), .n = n, .d = &da[i],
				                           .result = 99 };
		}
		int got = sluice_keyed_acquire_many_at(req, count, now, 0);
		int want = 0;
		for (size_t i = 0; i < count; i++) {
			sluice_keyed_t *tb = &b[req[i].table - a];
			int r = sluice_keyed_acquire_at(tb, req[i].key, req[i].keylen, req[i].n, now,
			                                &db[i]);
			cr_assert_eq(req[i].result, r, "step %d request %zu: %d, alone %d", step, i,
			             req[i].result, r);
			if (r >= 0)
				same_decision(&da[i], &db[i], step);
			want += r == 1;
			admitted += r == 1;
			refused += r == 0;
		}
		cr_assert_eq(got, want, "step %d: %d admitted, alone %d", step, got, want);
		/* INFLIGHT: give back what was held, now and then, in both
		 * copies, after the whole batch (as its caller would) */
		for (size_t i = 0; i < count; i++)
			if (req[i].result == 1 && req[i].table == &a[3] && rnd(&x) % 2) {
				cr_assert_eq(sluice_keyed_release(&a[3], req[i].key, req[i].keylen,
				                                  req[i].n), 0);
				cr_assert_eq(sluice_keyed_release(&b[3], req[i].key, req[i].keylen,
				                                  req[i].n), 0);
				released++;
			}
	}
	cr_log_info("admitted %d refused %d released %d", admitted, refused, released);
	cr_assert_gt(admitted, 1000);
	cr_assert_gt(refused, 1000);
	for (int t = 0; t < NT; t++) {
		sluice_keyed_destroy(&a[t]);
		sluice_keyed_destroy(&b[t]);
	}
}

/* All or nothing: the third request refuses; the two before it are given
 * back exactly (GCRA, FIXED), the fourth is not asked. */
Test(keyed_many, all_gives_back_before_and_asks_nothing_after)
{
	sluice_keyed_t k[NT];
	make_tables(k);
	/* FIXED "full": its 4 permits taken, so it refuses n = 1 */
	cr_assert_eq(acq(&k[1], "full", 4, 0, NULL), 1);
	sluice_decision_t d0 = { .limit = 12345 }, d3 = { .limit = 12345 };
	sluice_keyed_request_t req[] = {
		{ .table = &k[0], .key = "g", .keylen = 1, .n = 3, .d = &d0 },
		{ .table = &k[1], .key = "f", .keylen = 1, .n = 4 },
		{ .table = &k[1], .key = "full", .keylen = 4, .n = 1 },
		{ .table = &k[3], .key = "i", .keylen = 1, .n = 3, .d = &d3 },
	};
	cr_assert_eq(sluice_keyed_acquire_many_at(req, 4, 0, SLUICE_KEYED_ALL), 0);
	cr_assert_eq(req[0].result, 1, "its own answer: admitted, then given back");
	cr_assert_eq(req[1].result, 1);
	cr_assert_eq(req[2].result, 0, "the refusal");
	cr_assert_eq(req[3].result, 0, "not asked");
	cr_assert_eq(d0.allowed, 1);
	cr_assert_eq(d3.limit, 12345, "a request not asked keeps its decision");
	/* given back: the whole burst and the whole window are there again */
	cr_assert_eq(acq(&k[0], "g", 3, 0, NULL), 1);
	cr_assert_eq(acq(&k[1], "f", 4, 0, NULL), 1);
	/* not asked: the INFLIGHT key holds nothing (3 of 3 free) */
	cr_assert_eq(acq(&k[3], "i", 3, 0, NULL), 1);
	/* every request admitted: 1, and all of them kept */
	sluice_keyed_request_t ok[] = {
		{ .table = &k[0], .key = "h", .keylen = 1, .n = 3 },
		{ .table = &k[3], .key = "j", .keylen = 1, .n = 3 },
	};
	cr_assert_eq(sluice_keyed_acquire_many_at(ok, 2, 0, SLUICE_KEYED_ALL), 1);
	cr_assert_eq(acq(&k[0], "h", 1, 0, NULL), 0);
	cr_assert_eq(acq(&k[3], "j", 1, 0, NULL), 0);
	for (int t = 0; t < NT; t++)
		sluice_keyed_destroy(&k[t]);
}

/* All or nothing with a WINDOW part before the refusal: its refund is
 * never exact (keyed.h), so its permits stay counted: fewer admissions
 * later, never more. */
Test(keyed_many, all_keeps_what_window_cannot_give_back)
{
	sluice_keyed_t k[NT];
	make_tables(k);
	cr_assert_eq(acq(&k[1], "full", 4, 0, NULL), 1);
	sluice_keyed_request_t req[] = {
		{ .table = &k[2], .key = "w", .keylen = 1, .n = 2 },
		{ .table = &k[1], .key = "full", .keylen = 4, .n = 1 },
	};
	cr_assert_eq(sluice_keyed_acquire_many_at(req, 2, 0, SLUICE_KEYED_ALL), 0);
	cr_assert_eq(acq(&k[2], "w", 4, 0, NULL), 0, "the 2 permits stayed counted");
	cr_assert_eq(acq(&k[2], "w", 3, 0, NULL), 1);
	for (int t = 0; t < NT; t++)
		sluice_keyed_destroy(&k[t]);
}

/* An error is an answer like a refusal: under ALL the batch's first error
 * found by the checks asks nothing at all; an error in a decision (n above
 * the burst) gives back what came before. */
Test(keyed_many, all_and_errors)
{
	sluice_keyed_t k[NT];
	make_tables(k);
	sluice_keyed_request_t req[] = {
		{ .table = &k[0], .key = "g", .keylen = 1, .n = 1 },
		{ .table = &k[1], .key = "", .keylen = 0, .n = 1 },
	};
	cr_assert_eq(sluice_keyed_acquire_many_at(req, 2, 0, SLUICE_KEYED_ALL), SLUICE_EKEYLEN);
	cr_assert_eq(req[0].result, 0);
	cr_assert_eq(req[1].result, SLUICE_EKEYLEN);
	cr_assert_eq(acq(&k[0], "g", 3, 0, NULL), 1, "nothing was taken");
	sluice_keyed_request_t big[] = {
		{ .table = &k[1], .key = "f", .keylen = 1, .n = 4 },
		{ .table = &k[0], .key = "g2", .keylen = 2, .n = 4 }, /* burst 3 */
	};
	cr_assert_eq(sluice_keyed_acquire_many_at(big, 2, 0, SLUICE_KEYED_ALL), SLUICE_ETOOBIG);
	cr_assert_eq(acq(&k[1], "f", 4, 0, NULL), 1, "given back");
	/* without ALL: the bad request answers, the others are decided */
	sluice_keyed_request_t mixed[] = {
		{ .table = NULL, .key = "x", .keylen = 1, .n = 1 },
		{ .table = &k[0], .key = "m", .keylen = 1, .n = 1 },
		{ .table = &k[0], .key = "m", .keylen = 1, .n = 0 },
	};
	cr_assert_eq(sluice_keyed_acquire_many_at(mixed, 3, 0, 0), 1);
	cr_assert_eq(mixed[0].result, SLUICE_EINVAL);
	cr_assert_eq(mixed[1].result, 1);
	cr_assert_eq(mixed[2].result, SLUICE_EINVAL);
	for (int t = 0; t < NT; t++)
		sluice_keyed_destroy(&k[t]);
}

/* STOP: in order up to the first request not admitted, which answers;
 * what came before it stays taken (nothing given back), what comes after
 * it is not asked. */
Test(keyed_many, stop_keeps_before_and_asks_nothing_after)
{
	sluice_keyed_t k[NT];
	make_tables(k);
	cr_assert_eq(acq(&k[1], "full", 4, 0, NULL), 1);
	sluice_decision_t d3 = { .limit = 12345 };
	sluice_keyed_request_t req[] = {
		{ .table = &k[0], .key = "g", .keylen = 1, .n = 3 },
		{ .table = &k[1], .key = "f", .keylen = 1, .n = 4 },
		{ .table = &k[1], .key = "full", .keylen = 4, .n = 1 },
		{ .table = &k[3], .key = "i", .keylen = 1, .n = 3, .d = &d3 },
	};
	cr_assert_eq(sluice_keyed_acquire_many_at(req, 4, 0, SLUICE_KEYED_STOP), 0);
	cr_assert_eq(req[0].result, 1);
	cr_assert_eq(req[1].result, 1);
	cr_assert_eq(req[2].result, 0, "the refusal");
	cr_assert_eq(req[3].result, 0, "not asked");
	cr_assert_eq(d3.limit, 12345, "a request not asked keeps its decision");
	/* kept: the burst and the window are spent; not asked: free */
	cr_assert_eq(acq(&k[0], "g", 1, 0, NULL), 0, "the admission stayed taken");
	cr_assert_eq(acq(&k[1], "f", 1, 0, NULL), 0, "the admission stayed taken");
	cr_assert_eq(acq(&k[3], "i", 3, 0, NULL), 1, "not asked: nothing held");
	/* all admitted: 1 */
	sluice_keyed_request_t ok[] = {
		{ .table = &k[0], .key = "h", .keylen = 1, .n = 3 },
		{ .table = &k[3], .key = "j", .keylen = 1, .n = 3 },
	};
	cr_assert_eq(sluice_keyed_acquire_many_at(ok, 2, 0, SLUICE_KEYED_STOP), 1);
	cr_assert_eq(ok[0].result, 1);
	cr_assert_eq(ok[1].result, 1);
	for (int t = 0; t < NT; t++)
		sluice_keyed_destroy(&k[t]);
}

/* STOP and a request its checks refuse: it answers when its turn comes,
 * so the requests before it are asked (unlike ALL, which asks nothing),
 * and the ones after it are not. */
Test(keyed_many, stop_and_errors)
{
	sluice_keyed_t k[NT];
	make_tables(k);
	sluice_keyed_request_t req[] = {
		{ .table = &k[0], .key = "g", .keylen = 1, .n = 3 },
		{ .table = &k[1], .key = "", .keylen = 0, .n = 1 },
		{ .table = &k[1], .key = "f", .keylen = 1, .n = 4 },
	};
	cr_assert_eq(sluice_keyed_acquire_many_at(req, 3, 0, SLUICE_KEYED_STOP), SLUICE_EKEYLEN);
	cr_assert_eq(req[0].result, 1);
	cr_assert_eq(req[1].result, SLUICE_EKEYLEN);
	cr_assert_eq(req[2].result, 0, "not asked");
	cr_assert_eq(acq(&k[0], "g", 1, 0, NULL), 0, "asked and kept");
	cr_assert_eq(acq(&k[1], "f", 4, 0, NULL), 1, "not asked: the window is whole");
	/* a batch of one, STOP: the single call's answer */
	sluice_keyed_request_t one[] = { { .table = &k[0], .key = "g", .keylen = 1, .n = 1 } };
	cr_assert_eq(sluice_keyed_acquire_many_at(one, 1, 0, SLUICE_KEYED_STOP), 0);
	cr_assert_eq(one[0].result, 0);
	for (int t = 0; t < NT; t++)
		sluice_keyed_destroy(&k[t]);
}

/* Lookups (SLUICE_KEYED_COUNT_LOOKUPS) count the requests decided, not
 * those a refused ALL batch never asked. */
Test(keyed_many, lookups_count_what_was_decided)
{
	sluice_keyed_t k;
	sluice_keyed_config_t c = gcra_cfg(64, 1, SEC, 1, SLUICE_KEYED_REJECT);
	c.flags = SLUICE_KEYED_COUNT_LOOKUPS;
	make(&k, c);
	sluice_keyed_request_t req[] = {
		{ .table = &k, .key = "a", .keylen = 1, .n = 1 },
		{ .table = &k, .key = "b", .keylen = 1, .n = 1 },
		{ .table = &k, .key = "", .keylen = 0, .n = 1 },
	};
	cr_assert_eq(sluice_keyed_acquire_many_at(req, 3, 0, SLUICE_KEYED_ALL), SLUICE_EKEYLEN);
	cr_assert_eq(stats(&k).lookups, 0, "nothing was asked");
	cr_assert_eq(sluice_keyed_acquire_many_at(req, 2, 0, 0), 2);
	cr_assert_eq(stats(&k).lookups, 2);
	sluice_keyed_destroy(&k);
}

/* The batch's own checks: nothing asked, no result written. */
Test(keyed_many, the_batch_checks)
{
	sluice_keyed_t k[NT];
	make_tables(k);
	sluice_keyed_request_t req[SLUICE_KEYED_BATCH_MAX + 1];
	for (size_t i = 0; i <= SLUICE_KEYED_BATCH_MAX; i++)
		req[i] = (sluice_keyed_request_t){ .table = &k[0], .key = "g", .keylen = 1, .n = 1,
			                           .result = 99 };
	cr_assert_eq(sluice_keyed_acquire_many_at(NULL, 1, 0, 0), SLUICE_EINVAL);
	cr_assert_eq(sluice_keyed_acquire_many_at(req, 0, 0, 0), SLUICE_EINVAL);
	cr_assert_eq(sluice_keyed_acquire_many_at(req, SLUICE_KEYED_BATCH_MAX + 1, 0, 0),
	             SLUICE_EINVAL);
	cr_assert_eq(sluice_keyed_acquire_many_at(req, 1, 0, 4), SLUICE_EINVAL, "unknown flag");
	cr_assert_eq(sluice_keyed_acquire_many_at(req, 2, 0, SLUICE_KEYED_ALL | SLUICE_KEYED_STOP),
	             SLUICE_EINVAL, "two modes");
	cr_assert_eq(sluice_keyed_acquire_many_at(req, 1, SLUICE_KEYED_TIME_MAX + 1, 0),
	             SLUICE_ETIME);
	cr_assert_eq(req[0].result, 99, "no result written");
	cr_assert_eq(acq(&k[0], "g", 3, 0, NULL), 1, "nothing taken");
	/* the clock form reads req[0].table's clock */
	sluice_clock_manual_set(&mclock, 10 * SEC);
	sluice_decision_t d;
	req[0].d = &d;
	cr_assert_eq(sluice_keyed_acquire_many(req, 1, 0), 1);
	cr_assert_eq(d.now_ns, 10 * SEC);
	for (int t = 0; t < NT; t++)
		sluice_keyed_destroy(&k[t]);
}

/* Two threads, one deciding by batches (two FIXED keys and the shared key
 * "hot"), one by single calls on "hot": in every window, "hot" admits at
 * most its limit (4), exactly as with single calls only. */
static sluice_keyed_t shared[NT];
static pthread_barrier_t go;
static int admitted_hot[2][64];
static int bad_count; /* a batch's return below its own results' count */
static void *batcher(void *arg)
{
	int me = (int)(uintptr_t)arg;
	for (uint64_t w = 0; w < 64; w++) {
		/* both threads in window w: a reading of an older window
		 * counts in the key's newer one (keyed.h, CLOCK JUMPS), so
		 * the tally per window needs both in the same one */
		pthread_barrier_wait(&go);
		for (int i = 0; i < 200; i++) {
			uint64_t now = w * SEC + (uint64_t)i * MS;
			if (me == 0) {
				sluice_keyed_request_t req[] = {
					{ .table = &shared[1], .key = "a", .keylen = 1, .n = 1 },
					{ .table = &shared[1], .key = "hot", .keylen = 3, .n = 1 },
					{ .table = &shared[1], .key = "b", .keylen = 1, .n = 1 },
				};
				int got = sluice_keyed_acquire_many_at(req, 3, now, 0);
				if (got < (req[1].result == 1))
					bad_count = 1; /* checked by the main thread */
				admitted_hot[0][w] += req[1].result == 1;
			} else {
				admitted_hot[1][w] += acq(&shared[1], "hot", 1, now, NULL) == 1;
			}
		}
	}
	return NULL;
}

Test(keyed_many, batches_and_single_calls_share_a_limit)
{
	make_tables(shared);
	pthread_barrier_init(&go, NULL, 2);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, batcher, (void *)(uintptr_t)i), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	cr_assert_eq(bad_count, 0, "a return below the admissions it counts");
	int full = 0;
	for (int w = 0; w < 64; w++) {
		int sum = admitted_hot[0][w] + admitted_hot[1][w];
		cr_assert_leq(sum, 4, "window %d admitted %d of 4", w, sum);
		full += sum == 4;
	}
	cr_assert_gt(full, 0);
	for (int t2 = 0; t2 < NT; t2++)
		sluice_keyed_destroy(&shared[t2]);
}
