/* SPDX-License-Identifier: MIT */
/*
 * test_engine_cluster.c - a rule global on a Redis Cluster: the rules
 * file's backend with cluster: true (include/sluice/rules.h BACKENDS,
 * sluice/redis.h CLUSTER), against three real primaries this test starts
 * and stops by pid (tests/support/test_cluster.h).
 *
 *   a_per_key_rule_spreads_over_the_shards: a per-ip rule of LIMIT per
 *     window on the backend, given one seed node; NKEYS addresses each
 *     asked LIMIT + 2 times admit exactly LIMIT each, decided by Redis
 *     (never the fallback); every primary holds some of the keys; the
 *     metrics name one connect per primary and no redirect, and promtool
 *     (when installed) accepts them.
 */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/clock.h"
#include "sluice/engine.h"
#include "metrics_text.h"
#include "test_cluster.h"

#define SEC 1000000000ULL
#define NKEYS 300
#define LIMIT 5

static sluice_test_cluster_t cl;

static void cluster_up(void)
{
	cr_assert_eq(sluice_test_cluster_start(&cl), 0, "the cluster did not start");
}

static void cluster_down(void)
{
	sluice_test_cluster_stop(&cl);
}

TestSuite(engine_cluster, .init = cluster_up, .fini = cluster_down, .timeout = 90);

static long long dbsize(int port)
{
	struct timeval tv = { 2, 0 };
	redisContext *x = redisConnectWithTimeout("127.0.0.1", port, tv);
	cr_assert(x && !x->err);
	redisReply *rep = redisCommand(x, "DBSIZE");
	cr_assert(rep && rep->type == REDIS_REPLY_INTEGER);
	long long n = rep->integer;
	freeReplyObject(rep);
	redisFree(x);
	return n;
}

Test(engine_cluster, a_per_key_rule_spreads_over_the_shards)
{
	char seed[32], y[1024];
	sluice_test_cluster_addr(&cl, 0, seed, sizeof(seed));
	snprintf(y, sizeof(y),
	         "backends:\n"
	         "  shards: { type: redis, address: [%s], cluster: true, budget: 50ms,\n"
	         "            fallback: deny }\n"
	         "rules:\n"
	         "  - id: per-ip\n"
	         "    dimensions: [ip]\n"
	         "    keys: { capacity: 1024 }\n"
	         "    backend: shards\n"
	         "    limit: { algorithm: fixed_window, window: 1h, max_requests: %d }\n",
	         seed, LIMIT);
	sluice_engine_t *e;
	cr_assert_eq(sluice_engine_new(NULL, &e), 0);
	sluice_rules_errors_t *errs = NULL;
	int rc = sluice_engine_load_buffer(e, "t.yaml", y, strlen(y), &errs);
	if (rc != 0 && errs) {
		char line[512];
		sluice_rules_error_text(errs, 0, line, sizeof(line));
		cr_assert_fail("load: %s", line);
	}
	cr_assert_eq(rc, 0);
	/* the slot map is read in the background: wait for Redis to decide
	 * (one extra address, never counted below) */
	const unsigned char warm[4] = { 192, 0, 2, 1 };
	sluice_request_t q = { .method = "GET", .path = "/", .addr = warm, .addr_len = 4 };
	sluice_verdict_t v;
	uint64_t end = sluice_clock_monotonic_ns() + 5 * SEC;
	do {
		cr_assert_eq(sluice_engine_decide(e, &q, &v), 0);
	} while (v.rules[0].source == SLUICE_SOURCE_FALLBACK && sluice_clock_monotonic_ns() < end);
	cr_assert_neq(v.rules[0].source, SLUICE_SOURCE_FALLBACK, "Redis never decided in 5 s");
	for (unsigned i = 0; i < NKEYS; i++) {
		const unsigned char a[4] = { 10, 0, (unsigned char)(i >> 8), (unsigned char)i };
		q.addr = a;
		unsigned passed = 0;
		for (int j = 0; j < LIMIT + 2; j++) {
			cr_assert_eq(sluice_engine_decide(e, &q, &v), 0);
			cr_assert_neq(v.rules[0].source, SLUICE_SOURCE_FALLBACK, "10.0.%u.%u fell back",
			              i >> 8, i & 255);
			passed += v.action == SLUICE_ACTION_PASS;
		}
		cr_assert_eq(passed, LIMIT, "10.0.%u.%u passed %u of %d", i >> 8, i & 255, passed,
		             LIMIT);
	}
	long long total = 0;
	for (int i = 0; i < SLUICE_TEST_CLUSTER_NODES; i++) {
		long long n = dbsize(cl.node[i].port);
		cr_expect_gt(n, NKEYS / 6, "node %d holds %lld of %d keys", i, n, NKEYS + 1);
		total += n;
	}
	cr_expect_eq(total, NKEYS + 1, "the shards hold %lld keys", total);
	struct text *t = calloc(1, sizeof(*t));
	metrics(e, t);
	cr_expect_eq(sample(t, "sluice_backend_connects_total{backend=\"shards\"}"),
	             SLUICE_TEST_CLUSTER_NODES, "%s", t->buf);
	cr_expect_eq(sample(t, "sluice_backend_moved_total{backend=\"shards\"}"), 0);
	cr_expect_eq(sample(t, "sluice_backend_ask_redirects_total{backend=\"shards\"}"), 0);
	promtool_ok(t);
	free(t);
	sluice_engine_free(e);
}
