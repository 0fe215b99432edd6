/* SPDX-License-Identifier: MIT */
/*
 * test_redis_failover.c - a backend with several servers or Sentinels
 * (redis.h FAILOVER) against real ones: a primary and its replica, each a
 * private redis-server this test starts and stops by pid, and a Sentinel
 * (redis-server --sentinel) watching them.
 *
 *   promoted_replica_with_lost_writes: addresses [primary, replica].  The
 *     replica's link is cut at the start of a window (it follows a port
 *     where nobody listens, keeping its data), so every grant the primary
 *     makes in that window is a write the replica never receives; the
 *     primary is killed (-9) and the replica promoted (REPLICAOF NO ONE).  Checked: every decision returns within
 *     its budget + SLACK_NS unless the scheduler preempted it; lease
 *     admissions resume within the header's bound after the promotion; the
 *     window that holds the promotion admits at most 2 x LIMIT (and more
 *     than LIMIT: the writes were lost, which is what this test is about),
 *     every other window at most LIMIT; the server skipped while it was a
 *     replica, and the change of primary, are counted.
 *   demoted_primary_is_left: addresses [a, b], a serving; the two swap
 *     roles (b promoted, a made b's replica).  a answers READONLY, the
 *     backend drops it and finds b: admissions resume, readonly_drops and
 *     primary_changes count it.
 *   sentinel_follows_its_failover: the backend is given the Sentinel only;
 *     the primary is killed, the Sentinel promotes the replica on its own
 *     (down-after 300 ms), and the backend follows within the header's
 *     bound of the Sentinel naming the replica, which answers ROLE master.
 * Real time throughout (CLOCK_MONOTONIC, the servers' own timers).
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>

#include "sluice/clock.h"
#include "sluice/redis.h"
#include "test_server.h"

#define MS 1000000ULL
#define LIMIT 1000ULL
#define WINDOW_NS (2000 * MS)
#define BUDGET_NS (1 * MS)
#if defined(__SANITIZE_THREAD__)
#define SLACK_NS (100 * MS) /* as test_redis_faults: TSan's runtime blocks */
#else
#define SLACK_NS (20 * MS) /* as test_redis_faults: a loaded 2-core machine */
#endif
#define BREAKER_OPEN_NS (100 * MS)
#define CONNECT_NS (50 * MS)
#define COMMAND_NS (20 * MS)
#define MAX_REC 400000

static sluice_test_redis_t primary, replica, sentinel;

/* kill -9 first: a primary asked to stop (SIGTERM) waits up to 10 s for
 * its replicas (shutdown-timeout), which nothing here needs */
static void servers_down(void)
{
	sluice_test_redis_t *all[] = { &sentinel, &replica, &primary };
	for (int i = 0; i < 3; i++) {
		sluice_test_redis_kill(all[i]);
		sluice_test_redis_stop(all[i]);
	}
}

TestSuite(redis_failover, .fini = servers_down, .timeout = 60);

static sluice_redis_stats_t stats(const sluice_redis_t *r)
{
	sluice_redis_stats_t s;
	sluice_redis_stats(r, &s);
	return s;
}

static uint64_t mono(void)
{
	return sluice_clock_monotonic_ns();
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* One command on a fresh connection to @port (2 s timeouts). */
static redisReply *cmd(int port, const char *c)
{
	struct timeval tv = { 2, 0 };
	redisContext *x = redisConnectWithTimeout("127.0.0.1", port, tv);
	cr_assert(x && !x->err, "connect to %d", port);
	redisSetTimeout(x, tv);
	redisReply *rep = redisCommand(x, c);
	redisFree(x);
	cr_assert(rep, "%s on %d: no reply", c, port);
	return rep;
}

static void cmd_ok(int port, const char *c)
{
	redisReply *rep = cmd(port, c);
	cr_assert(rep->type != REDIS_REPLY_ERROR, "%s on %d: %s", c, port, rep->str);
	freeReplyObject(rep);
}

/* ROLE's first element ("master", "slave"); a replica's link state in
 * @link ("connected" once in sync) when it is one. */
static void role(int port, char *out, size_t len, char *link, size_t llen)
{
	redisReply *rep = cmd(port, "ROLE");
	cr_assert(rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1);
	snprintf(out, len, "%s", rep->element[0]->str);
	if (link)
		snprintf(link, llen, "%s",
		         rep->elements >= 4 && rep->element[3]->type == REDIS_REPLY_STRING ?
		                 rep->element[3]->str : "");
	freeReplyObject(rep);
}

/* A primary and its replica, the replica in sync (at most 5 s). */
static void pair_up(void)
{
	/* a primary waits 5 s (repl-diskless-sync-delay) for more replicas
	 * before it sends one its data: none is coming */
	const char *const now[] = { "--repl-diskless-sync-delay", "0", NULL };
	cr_assert_eq(sluice_test_redis_start_with(&primary, 0, NULL, now), 0,
	             "primary did not start");
	char p[16];
	snprintf(p, sizeof(p), "%d", primary.port);
	const char *const extra[] = { "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1",
		                      p, NULL };
	cr_assert_eq(sluice_test_redis_start_with(&replica, 0, NULL, extra), 0,
	             "replica did not start");
	char r[16], link[32];
	for (int i = 0; i < 500; i++) {
		role(replica.port, r, sizeof(r), link, sizeof(link));
		if (strcmp(r, "slave") == 0 && strcmp(link, "connected") == 0)
			return;
		sleep_ms(10);
	}
	cr_assert_fail("the replica did not sync with its primary in 5 s");
}

typedef struct {
	uint64_t at, start, end;
	int rc, preempted;
	sluice_redis_source_t src;
} rec_t;

typedef struct {
	sluice_redis_limit_t *l;
	_Atomic int *stop;
	_Atomic uint64_t *leased; /* lease admissions of every worker */
	rec_t *rec;
	size_t n;
} worker_t;

static void *decide(void *arg)
{
	worker_t *w = arg;
	struct timespec pause = { 0, 50000 };
	while (!atomic_load_explicit(w->stop, memory_order_relaxed) && w->n < MAX_REC) {
		rec_t *r = &w->rec[w->n++];
		sluice_decision_t d;
		struct rusage ru0, ru1;
		getrusage(RUSAGE_THREAD, &ru0);
		r->start = mono();
		r->rc = sluice_redis_acquire(w->l, 1, &d, &r->src);
		r->end = mono();
		getrusage(RUSAGE_THREAD, &ru1);
		r->preempted = ru1.ru_nivcsw != ru0.ru_nivcsw;
		r->at = d.now_ns;
		if (r->rc == 1 && r->src == SLUICE_REDIS_FROM_LEASE)
			atomic_fetch_add_explicit(w->leased, 1, memory_order_relaxed);
		nanosleep(&pause, NULL);
	}
	return NULL;
}

enum { NW = 2 };

typedef struct {
	pthread_t t[NW];
	worker_t w[NW];
	_Atomic int stop;
	_Atomic uint64_t leased;
} load_t;

static void load_start(load_t *ld, sluice_redis_limit_t *l)
{
	atomic_store(&ld->stop, 0);
	for (int i = 0; i < NW; i++) {
		ld->w[i] = (worker_t){ .l = l, .stop = &ld->stop, .leased = &ld->leased,
			               .rec = calloc(MAX_REC, sizeof(rec_t)) };
		cr_assert(ld->w[i].rec);
		cr_assert_eq(pthread_create(&ld->t[i], NULL, decide, &ld->w[i]), 0);
	}
}

static void load_stop(load_t *ld)
{
	atomic_store(&ld->stop, 1);
	for (int i = 0; i < NW; i++)
		pthread_join(ld->t[i], NULL);
}

static void load_free(load_t *ld)
{
	for (int i = 0; i < NW; i++)
		free(ld->w[i].rec);
}

/* Every decision within budget + SLACK_NS unless preempted; the first
 * lease admission at or after @from (UINT64_MAX: none). */
static uint64_t check_load(const load_t *ld, uint64_t from)
{
	uint64_t first = UINT64_MAX, worst = 0, preempted = 0;
	for (int i = 0; i < NW; i++)
		for (size_t k = 0; k < ld->w[i].n; k++) {
			const rec_t *r = &ld->w[i].rec[k];
			cr_assert(r->rc >= 0, "decision error %d", r->rc);
			if (r->preempted) {
				preempted++;
				continue;
			}
			uint64_t took = r->end - r->start;
			worst = took > worst ? took : worst;
			cr_assert_leq(took, BUDGET_NS + SLACK_NS, "a decision took %llu us",
			              (unsigned long long)(took / 1000));
			if (r->rc == 1 && r->src == SLUICE_REDIS_FROM_LEASE && r->start >= from &&
			    r->end < first)
				first = r->end;
		}
	printf("redis_failover: worst unpreempted decision %.2f ms (%llu preempted)\n",
	       (double)worst / 1e6, (unsigned long long)preempted);
	return first;
}

/* Lease admissions in window @k of the limit's clock. */
static uint64_t admitted_in(const load_t *ld, uint64_t k)
{
	uint64_t n = 0;
	for (int i = 0; i < NW; i++)
		for (size_t j = 0; j < ld->w[i].n; j++) {
			const rec_t *r = &ld->w[i].rec[j];
			n += r->rc == 1 && r->src == SLUICE_REDIS_FROM_LEASE && r->at / WINDOW_NS == k;
		}
	return n;
}

static sluice_redis_t *backend_on(const char *const *addrs, unsigned n, const char *master)
{
	sluice_redis_config_t rc = { .addresses = addrs, .n_addresses = n,
		                     .sentinel_master = master,
		                     .connect_timeout_ns = CONNECT_NS,
		                     .command_timeout_ns = COMMAND_NS,
		                     .breaker_open_ns = BREAKER_OPEN_NS };
	sluice_redis_t *r;
	cr_assert_eq(sluice_redis_new(&rc, &r), 0);
	return r;
}

static sluice_redis_limit_t *fixed_limit(sluice_redis_t *r, uint32_t lease, uint64_t limit)
{
	sluice_redis_limit_config_t lc = { .name = "failover", .algo = SLUICE_REDIS_FIXED,
		                           .limit = limit, .window_ns = WINDOW_NS,
		                           .lease_max = lease, .budget_ns = BUDGET_NS,
		                           .fallback = SLUICE_REDIS_DENY,
		                           .clock = &sluice_clock_monotonic };
	sluice_redis_limit_t *l;
	cr_assert_eq(sluice_redis_limit_new(r, &lc, &l), 0);
	return l;
}

/* The header's bound for following a primary that answers ROLE master:
 * breaker_open + per address a connect and its queries, + 50 ms slack. */
static uint64_t follow_bound(unsigned addresses)
{
	return BREAKER_OPEN_NS + addresses * (CONNECT_NS + 7 * COMMAND_NS) + SLACK_NS + 50 * MS;
}

/* @ld's decisions as check_load says, and its first lease admission after
 * @promoted within @bound: the backend followed (@what: the instant). */
static void followed_within(const load_t *ld, uint64_t promoted, uint64_t bound, const char *what)
{
	uint64_t first = check_load(ld, promoted);
	cr_assert_neq(first, UINT64_MAX, "no admission from Redis after %s", what);
	printf("redis_failover: first lease admission %.1f ms after %s (bound %.0f ms)\n",
	       (double)(first - promoted) / 1e6, what, (double)bound / 1e6);
	cr_assert_leq(first - promoted, bound);
}

/* A decision that succeeds from Redis, at most 3 s of trying. */
static void wait_serving(sluice_redis_limit_t *l)
{
	for (int i = 0; i < 3000; i++) {
		sluice_redis_source_t src;
		if (sluice_redis_acquire(l, 1, NULL, &src) == 1 && src == SLUICE_REDIS_FROM_LEASE)
			return;
		sleep_ms(1);
	}
	cr_assert_fail("the backend never admitted from Redis");
}

Test(redis_failover, promoted_replica_with_lost_writes)
{
	pair_up();
	char a[2][32];
	snprintf(a[0], sizeof(a[0]), "127.0.0.1:%d", primary.port);
	snprintf(a[1], sizeof(a[1]), "127.0.0.1:%d", replica.port);
	const char *const addrs[] = { a[0], a[1] };
	sluice_redis_t *r = backend_on(addrs, 2, NULL);
	sluice_redis_limit_t *l = fixed_limit(r, 8, LIMIT);
	wait_serving(l); /* connected to the primary, the scripts loaded */

	/* the window must hold all of it: the promotion is at most 1.3 s in */
	cr_assert_geq(WINDOW_NS, 2000 * MS);
	/* 20 ms into a window the replica stops receiving its primary's
	 * writes (it follows a port where nobody listens, keeping its data:
	 * a replica whose link is down), then the load starts, so every grant
	 * of this window is a write the replica will not have */
	uint64_t w0 = (mono() / WINDOW_NS + 1) * WINDOW_NS;
	while (mono() < w0 + 20 * MS)
		sleep_ms(1);
	cmd_ok(replica.port, "REPLICAOF 127.0.0.1 1");
	load_t *ld = calloc(1, sizeof(*ld));
	cr_assert(ld);
	load_start(ld, l);
	/* the primary grants half the limit, never all of it (a refusal
	 * would be cached to the window's end: no call, nothing to lose) */
	while (atomic_load(&ld->leased) < LIMIT / 2 && mono() < w0 + 1000 * MS)
		sleep_ms(1);
	cr_assert_geq(atomic_load(&ld->leased), LIMIT / 2, "the primary admitted too little");
	sluice_test_redis_kill(&primary);
	uint64_t killed = mono();
	/* 300 ms with no primary: the backend finds the primary refused and
	 * the replica not a primary, and decisions take the fallback */
	while (mono() < killed + 300 * MS)
		sleep_ms(5);
	cmd_ok(replica.port, "REPLICAOF NO ONE");
	uint64_t promoted = mono();
	/* to the end of the next window: one whole window after */
	while (mono() < w0 + 2 * WINDOW_NS + 50 * MS)
		sleep_ms(10);
	load_stop(ld);

	followed_within(ld, promoted, follow_bound(2), "the promotion");
	uint64_t k = w0 / WINDOW_NS, in0 = admitted_in(ld, k), in1 = admitted_in(ld, k + 1);
	printf("redis_failover: admitted %llu in the window of the promotion, %llu in the next "
	       "(limit %llu)\n",
	       (unsigned long long)in0, (unsigned long long)in1, (unsigned long long)LIMIT);
	cr_assert_leq(in0, 2 * LIMIT, "the promotion's window admitted past 2 x limit");
	cr_assert_gt(in0, LIMIT, "no write was lost: the test did not test a lost write");
	cr_assert_leq(in1, LIMIT, "the window after the promotion admitted past the limit");
	sluice_redis_stats_t s = stats(r);
	cr_assert_geq(s.primary_changes, 1);
	cr_assert_geq(s.not_primary, 1, "the cut-off replica was never skipped");
	load_free(ld);
	free(ld);
	sluice_redis_limit_free(l);
	sluice_redis_free(r);
}

Test(redis_failover, demoted_primary_is_left)
{
	pair_up();
	char a[2][32], q[64];
	snprintf(a[0], sizeof(a[0]), "127.0.0.1:%d", primary.port);
	snprintf(a[1], sizeof(a[1]), "127.0.0.1:%d", replica.port);
	const char *const addrs[] = { a[0], a[1] };
	sluice_redis_t *r = backend_on(addrs, 2, NULL);
	sluice_redis_limit_t *l = fixed_limit(r, 1, LIMIT); /* every admission a call */
	wait_serving(l);
	/* swap: the replica first becomes a primary, then the primary its
	 * replica; the backend's connection to the old one stays open */
	cmd_ok(replica.port, "REPLICAOF NO ONE");
	snprintf(q, sizeof(q), "REPLICAOF 127.0.0.1 %d", replica.port);
	cmd_ok(primary.port, q);
	uint64_t swapped = mono();
	wait_serving(l);
	printf("redis_failover: READONLY: served again %.1f ms after the swap\n",
	       (double)(mono() - swapped) / 1e6);
	cr_assert_leq(mono() - swapped, follow_bound(2));
	sluice_redis_stats_t s = stats(r);
	cr_assert_geq(s.readonly_drops, 1, "READONLY never dropped the connection");
	cr_assert_geq(s.primary_changes, 1);
	sluice_redis_limit_free(l);
	sluice_redis_free(r);
}

Test(redis_failover, sentinel_follows_its_failover)
{
	pair_up();
	char conf[512];
	snprintf(conf, sizeof(conf),
	         "sentinel monitor m 127.0.0.1 %d 1\n"
	         "sentinel down-after-milliseconds m 300\n"
	         "sentinel failover-timeout m 3000\n",
	         primary.port);
	const char *const extra[] = { "--sentinel", NULL };
	cr_assert_eq(sluice_test_redis_start_with(&sentinel, 0, conf, extra), 0,
	             "the Sentinel did not start");
	char a[32];
	snprintf(a, sizeof(a), "127.0.0.1:%d", sentinel.port);
	const char *const addrs[] = { a };
	sluice_redis_t *r = backend_on(addrs, 1, "m");
	/* never reached: a refusal would be cached to the window's end, and
	 * what is measured is when Redis answers again */
	sluice_redis_limit_t *l = fixed_limit(r, 8, 1000 * 1000 * 1000);
	wait_serving(l);
	/* the Sentinel must know the replica before the primary goes: it
	 * learns it from the primary's INFO, every 10 s at first, so ask */
	redisReply *rep = NULL;
	for (int i = 0; i < 150; i++) {
		rep = cmd(sentinel.port, "SENTINEL REPLICAS m");
		int known = rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1;
		freeReplyObject(rep);
		if (known)
			break;
		cr_assert_lt(i, 149, "the Sentinel never learned of the replica");
		sleep_ms(100);
	}
	load_t *ld = calloc(1, sizeof(*ld));
	cr_assert(ld);
	load_start(ld, l);
	sleep_ms(200);
	sluice_test_redis_kill(&primary);
	/* the Sentinel promotes the replica on its own: wait (10 s) until it
	 * names the replica as the primary, which answers ROLE master */
	uint64_t promoted = 0;
	for (int i = 0; i < 1000 && !promoted; i++) {
		rep = cmd(sentinel.port, "SENTINEL get-master-addr-by-name m");
		int named = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
		            atoi(rep->element[1]->str) == replica.port;
		freeReplyObject(rep);
		char role_now[16];
		if (named)
			role(replica.port, role_now, sizeof(role_now), NULL, 0);
		if (named && strcmp(role_now, "master") == 0)
			promoted = mono();
		else
			sleep_ms(10);
	}
	cr_assert_neq(promoted, 0, "the Sentinel did not promote the replica in 10 s");
	uint64_t end = promoted + follow_bound(1) + 200 * MS;
	while (mono() < end)
		sleep_ms(10);
	load_stop(ld);
	/* promoted is when the test saw it, up to 10 ms of polling late */
	followed_within(ld, promoted, follow_bound(1) + 10 * MS,
	                "the Sentinel named the promoted replica");
	cr_assert_geq(stats(r).primary_changes, 1);
	load_free(ld);
	free(ld);
	sluice_redis_limit_free(l);
	sluice_redis_free(r);
}

/* What sluice_redis_new refuses (redis.h): each a specific SLUICE_EINVAL,
 * and a good list makes a backend (which connects in the background). */
Test(redis_failover, addresses_are_checked)
{
	const char *const good[] = { "127.0.0.1:6379", "[::1]:6380", "localhost:1" };
	static const struct {
		const char *addr;
	} bad[] = { { "127.0.0.1" },      { "127.0.0.1:" },      { "127.0.0.1:0" },
		    { "127.0.0.1:65536" }, { "127.0.0.1:63x" },   { "::1:6379" },
		    { "[::1:6379" },       { "[]:6379" },         { ":6379" },
		    { "[::1]6379" } };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *const one[] = { bad[i].addr };
		sluice_redis_config_t rc = { .addresses = one, .n_addresses = 1 };
		sluice_redis_t *r = NULL;
		cr_assert_eq(sluice_redis_new(&rc, &r), SLUICE_EINVAL, "'%s' accepted", bad[i].addr);
		cr_assert_null(r);
	}
	char longname[200];
	memset(longname, 'm', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	const char *const many[SLUICE_REDIS_ADDRESSES_MAX + 1] = { 0 };
	const sluice_redis_config_t refused[] = {
		{ .addresses = good, .n_addresses = 3, .port = 6379 },   /* both ways */
		{ .addresses = good, .n_addresses = 3, .host = "h" },    /* both ways */
		{ .addresses = good, .n_addresses = 0 },                 /* none */
		{ .addresses = many, .n_addresses = SLUICE_REDIS_ADDRESSES_MAX + 1 },
		{ .addresses = many, .n_addresses = 2 },                 /* NULL entries */
		{ .addresses = good, .n_addresses = 1, .sentinel_master = "" },
		{ .addresses = good, .n_addresses = 1, .sentinel_master = longname },
		{ .port = 6379, .sentinel_master = "m" },                /* no Sentinels */
		{ .port = 6379, .n_addresses = 2 },                      /* no list */
		{ .port = 0 },
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		sluice_redis_t *r = NULL;
		cr_assert_eq(sluice_redis_new(&refused[i], &r), SLUICE_EINVAL, "config %zu accepted", i);
	}
	sluice_redis_config_t ok = { .addresses = good, .n_addresses = 3,
		                     .connect_timeout_ns = 10 * MS };
	sluice_redis_t *r;
	cr_assert_eq(sluice_redis_new(&ok, &r), 0);
	sluice_redis_free(r);
	ok.sentinel_master = "m";
	cr_assert_eq(sluice_redis_new(&ok, &r), 0);
	sluice_redis_free(r);
}
