/* SPDX-License-Identifier: MIT */
/*
 * test_redis_scripts.c - the four Lua scripts against a real redis-server,
 * on synthetic time (every edge exact) and on Redis TIME.
 */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <string.h>
#include <sys/time.h>

#include "redis_internal.h"
#include "redis_scripts.h"
#include "test_server.h"

static sluice_test_redis_t srv;
static redisContext *c;

static void up(void)
{
	cr_assert_eq(sluice_test_redis_start(&srv, 0), 0, "redis-server did not start");
	c = redisConnect("127.0.0.1", srv.port);
	cr_assert(c && !c->err);
}

static void down(void)
{
	if (c)
		redisFree(c);
	sluice_test_redis_stop(&srv);
}

TestSuite(redis_scripts, .init = up, .fini = down, .timeout = 60);

typedef struct res {
	long long v[6]; /* admitted, remaining, retry_us, reset_us, granted, now_us */
} res_t;

/* one EVAL of @src on @key (and @key2 for the log) with ARGV need, want, now, params */
static res_t run(const char *src, int nkeys, const char *key, const char *key2,
                 long long need, long long want, long long now, long long p1, long long p2,
                 long long p3)
{
	char a[6][32];
	snprintf(a[0], 32, "%lld", need);
	snprintf(a[1], 32, "%lld", want);
	snprintf(a[2], 32, "%lld", now);
	snprintf(a[3], 32, "%lld", p1);
	snprintf(a[4], 32, "%lld", p2);
	snprintf(a[5], 32, "%lld", p3);
	const char *argv[12] = { "EVAL", src, nkeys == 2 ? "2" : "1", key };
	int n = 4;
	if (nkeys == 2)
		argv[n++] = key2;
	for (int i = 0; i < 6; i++)
		argv[n++] = a[i];
	redisReply *r = redisCommandArgv(c, n, argv, NULL);
	cr_assert(r, "no reply");
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "reply type %d: %s", r->type,
	             r->type == REDIS_REPLY_ERROR ? r->str : "");
	cr_assert_eq(r->elements, 6);
	res_t out;
	for (int i = 0; i < 6; i++)
		out.v[i] = r->element[i]->integer;
	sluice__redis_reply_t parsed;
	cr_assert_eq(sluice__redis_parse(r, &parsed), 0, "the C parse refuses the script's reply");
	freeReplyObject(r);
	return out;
}

static long long integer(const char *fmt, const char *key)
{
	redisReply *r = redisCommand(c, fmt, key);
	cr_assert(r && r->type == REDIS_REPLY_INTEGER);
	long long v = r->integer;
	freeReplyObject(r);
	return v;
}

#define GCRA(need, want, now) \
	run(sluice__redis_lua_gcra, 1, "sluice:{g}:s", NULL, need, want, now, 1000000, 5, 0)

Test(redis_scripts, gcra_lease_is_charged_at_once)
{
	/* T = 1 s: the keys' PEXPIRE runs on real time, so synthetic steps
	 * must stay well inside it */
	const long long T = 1000000;
	long long t = 1000000000000LL;
	res_t r = GCRA(1, 3, t);
	cr_assert_eq(r.v[0], 1);
	cr_assert_eq(r.v[4], 3, "min(want, room) granted");
	cr_assert_eq(r.v[1], 2);
	cr_assert_eq(r.v[3], 3 * T, "reset: TAT - now = 3 T");
	r = GCRA(1, 5, t); /* the lease took 3: 2 left */
	cr_assert_eq(r.v[4], 2);
	r = GCRA(1, 1, t);
	cr_assert_eq(r.v[0], 0, "5 = burst admitted at one instant");
	cr_assert_eq(r.v[2], T, "retry after exactly T");
	r = GCRA(1, 1, t + T - 1);
	cr_assert_eq(r.v[0], 0);
	r = GCRA(1, 1, t + T);
	cr_assert_eq(r.v[0], 1);
	r = GCRA(2, 2, t + T);
	cr_assert_eq(r.v[0], 0);
	cr_assert_eq(r.v[2], 2 * T, "two permits need 2 T more");
	/* a clock behind the writer's (a failover to a slower node) only finds less room */
	r = GCRA(1, 1, t - 5 * T);
	cr_assert_eq(r.v[0], 0);
	long long pttl = integer("PTTL %s", "sluice:{g}:s");
	cr_assert(pttl > 0 && pttl <= 5001, "PEXPIRE: the key lives while it holds state (%lld)", pttl);
}

#define FIXED(need, want, now) \
	run(sluice__redis_lua_fixed, 1, "sluice:{f}:s", NULL, need, want, now, 10, 1000000, 0)

Test(redis_scripts, fixed_window_edges)
{
	long long t = 5000000000000LL; /* a window start */
	res_t r = FIXED(1, 4, t + 100);
	cr_assert_eq(r.v[4], 4);
	cr_assert_eq(r.v[1], 6);
	cr_assert_eq(r.v[3], 1000000 - 100);
	r = FIXED(1, 100, t + 200);
	cr_assert_eq(r.v[4], 6, "granted min(want, room)");
	r = FIXED(1, 1, t + 999999);
	cr_assert_eq(r.v[0], 0);
	cr_assert_eq(r.v[2], 1, "retry at the window's end");
	r = FIXED(10, 10, t + 1000000);
	cr_assert_eq(r.v[0], 1, "a new window starts at 0");
	r = FIXED(11, 11, t + 2000000);
	cr_assert_eq(r.v[0], 0);
	long long pttl = integer("PTTL %s", "sluice:{f}:s");
	cr_assert(pttl > 0 && pttl <= 1001, "PEXPIRE to the window's end (%lld)", pttl);
}

#define WINDOW(need, want, now) \
	run(sluice__redis_lua_window, 1, "sluice:{w}:s", NULL, need, want, now, 10, 1000000, 10)

Test(redis_scripts, window_buckets_slide_and_stay_bounded)
{
	long long t = 7000000000000LL; /* bucket e = t / 100000 */
	res_t r = WINDOW(1, 6, t);
	cr_assert_eq(r.v[4], 6);
	r = WINDOW(1, 4, t + 300000);
	cr_assert_eq(r.v[4], 4);
	r = WINDOW(1, 1, t + 500000);
	cr_assert_eq(r.v[0], 0);
	cr_assert_eq(r.v[2], 500000, "the first bucket leaves at t + W");
	cr_assert_eq(r.v[3], 800000, "the last bucket leaves at t + 300000 + W");
	r = WINDOW(5, 5, t + 999999);
	cr_assert_eq(r.v[0], 0, "6 + 4 still in the last N buckets");
	r = WINDOW(5, 6, t + 1000000);
	cr_assert_eq(r.v[0], 1);
	cr_assert_eq(r.v[4], 6, "the 6 of bucket e left");
	r = WINDOW(4, 4, t + 1000000);
	cr_assert_eq(r.v[0], 0);
	cr_assert_eq(r.v[2], 300000, "4 more need the 4 of bucket e+3 gone");
	r = WINDOW(7, 7, t + 1000000);
	cr_assert_eq(r.v[2], 1000000, "7 more need the 6 of bucket e+10 gone too");
	/* many buckets later: stale fields are deleted, at most N + 1 remain */
	for (long long k = 0; k < 50; k++)
		WINDOW(1, 1, t + 2000000 + k * 100000);
	long long fields = integer("HLEN %s", "sluice:{w}:s");
	cr_assert(fields <= 11, "bounded: %lld fields", fields);
}

#define LOG(need, want, now) \
	run(sluice__redis_lua_log, 2, "sluice:{l}:s", "sluice:{l}:q", need, want, now, 3, 1000000, 0)

Test(redis_scripts, log_counts_every_permit_in_any_window)
{
	long long t = 9000000000000LL;
	res_t r = LOG(1, 2, t);
	cr_assert_eq(r.v[4], 2);
	cr_assert_eq(integer("ZCARD %s", "sluice:{l}:s"), 2, "two permits in one us are two entries");
	r = LOG(1, 1, t + 10);
	cr_assert_eq(r.v[4], 1);
	r = LOG(1, 1, t + 20);
	cr_assert_eq(r.v[0], 0);
	cr_assert_eq(r.v[2], 1000000 - 20, "the oldest leaves at t + W");
	r = LOG(2, 2, t + 20);
	cr_assert_eq(r.v[2], 1000000 - 20, "both oldest are at t");
	r = LOG(3, 3, t + 20);
	cr_assert_eq(r.v[2], 1000000 - 10, "the third leaves at t + 10 + W");
	r = LOG(1, 1, t + 999999);
	cr_assert_eq(r.v[0], 0);
	r = LOG(2, 2, t + 1000000);
	cr_assert_eq(r.v[0], 1, "the two at t left at t + W");
	cr_assert(integer("ZCARD %s", "sluice:{l}:s") <= 3, "never more entries than the limit");
	cr_assert(integer("PTTL %s", "sluice:{l}:s") > 0);
	cr_assert(integer("PTTL %s", "sluice:{l}:q") > 0);
}

Test(redis_scripts, redis_time_when_now_is_zero)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	long long before = (long long)tv.tv_sec * 1000000 + tv.tv_usec;
	res_t g = GCRA(1, 1, 0);
	res_t f = FIXED(1, 1, 0);
	res_t w = WINDOW(1, 1, 0);
	res_t l = LOG(1, 1, 0);
	gettimeofday(&tv, NULL);
	long long after = (long long)tv.tv_sec * 1000000 + tv.tv_usec;
	res_t all[4] = { g, f, w, l };
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(all[i].v[0], 1);
		/* the server runs on this host: its TIME is this gettimeofday */
		cr_assert(all[i].v[5] >= before && all[i].v[5] <= after,
		          "script %d used Redis TIME (%lld not in [%lld, %lld])", i, all[i].v[5],
		          before, after);
	}
}

/* the log's memory per entry, for docs/redis.md (reported, not asserted) */
Test(redis_scripts, log_memory_per_entry)
{
	run(sluice__redis_lua_log, 2, "sluice:{m}:s", "sluice:{m}:q", 1, 1, 1000, 100000, 60000000, 0);
	long long one = integer("MEMORY USAGE %s", "sluice:{m}:s");
	for (int i = 0; i < 10; i++)
		run(sluice__redis_lua_log, 2, "sluice:{m}:s", "sluice:{m}:q", 1, 1000, 2000 + i,
		    100000, 60000000, 0);
	redisReply *r = redisCommand(c, "MEMORY USAGE %s SAMPLES 0", "sluice:{m}:s");
	cr_assert(r && r->type == REDIS_REPLY_INTEGER);
	cr_log_info("log ZSET: %lld bytes with 1 entry, %lld with 10001: %.1f bytes per entry", one,
	            r->integer, (double)(r->integer - one) / 10000.0);
	freeReplyObject(r);
}
