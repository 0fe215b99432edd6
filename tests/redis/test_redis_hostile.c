/* SPDX-License-Identifier: MIT */
/*
 * test_redis_hostile.c - what a server can do to a backend while the
 * connection stays up: keys holding what no script wrote (a string, a
 * list, a TAT far in the future) in a real redis-server, and a hostile peer
 * (test_peer.h: a real socket on 127.0.0.1) that answers NOSCRIPT forever,
 * a refusal months long, or a bulk reply of 2 GiB.  Each test then fixes
 * the server and checks that decisions go through Redis again within a
 * bounded time: nothing a server once said may silence it for longer than
 * the breaker's open time or the limit's own horizon.
 * Real time throughout (Redis TIME, CLOCK_MONOTONIC); every loop is bounded
 * by count and by time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "test_peer.h"
#include "test_redis_common.h"

TestSuite(redis_hostile, .init = server_up, .fini = server_down, .timeout = 60);

#define MS 1000000ULL
#define OPEN_NS (50 * MS) /* breaker_open_ns: short, so recovery is quick */

static sluice_redis_t *backend_on(int port, uint64_t open_ns)
{
	sluice_redis_config_t rc = { .port = port, .breaker_open_ns = open_ns };
	sluice_redis_t *r;
	cr_assert_eq(sluice_redis_new(&rc, &r), 0);
	return r;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* GCRA, burst 10, T = 1 ms: its horizon (burst x T) is 10 ms */
static sluice_redis_limit_config_t gcra_cfg(const char *name)
{
	return (sluice_redis_limit_config_t){ .name = name, .algo = SLUICE_REDIS_GCRA, .limit = 10,
		                              .window_ns = 1000 * MS, .rate = 1000, .lease_max = 4,
		                              .budget_ns = 2 * MS, .fallback = SLUICE_REDIS_DENY };
}

/* FIXED, 100 per 100 ms: its horizon is the window */
static sluice_redis_limit_config_t fixed_cfg(const char *name)
{
	return (sluice_redis_limit_config_t){ .name = name, .algo = SLUICE_REDIS_FIXED,
		                              .limit = 100, .window_ns = 100 * MS, .lease_max = 4,
		                              .budget_ns = 2 * MS, .fallback = SLUICE_REDIS_DENY };
}

/* Decide (about 1 ms apart, at most @ms ms and 4000 decisions) until the
 * breaker has opened more than @opened times; every refusal's retry-after
 * is at most @horizon_ns.  1 when it opened. */
static int until_open(sluice_redis_t *r, sluice_redis_limit_t *l, uint64_t opened, unsigned ms,
                      uint64_t horizon_ns)
{
	uint64_t end = sluice_clock_monotonic_ns() + ms * MS;
	for (int i = 0; i < 4000 && sluice_clock_monotonic_ns() < end; i++) {
		sluice_decision_t d;
		sluice_redis_source_t src;
		int rc = sluice_redis_acquire(l, 1, &d, &src);
		cr_assert(rc == 0 || rc == 1);
		if (rc == 0)
			cr_assert_leq(d.retry_after_ns, horizon_ns,
			              "refused for %llu ns, beyond the limit's horizon (%llu ns)",
			              (unsigned long long)d.retry_after_ns,
			              (unsigned long long)horizon_ns);
		if (stats(r).breaker_opened > opened)
			return 1;
		sleep_ms(1);
	}
	return 0;
}

/* Decide (as above) until one is admitted from a lease; 1 when one was. */
static int until_lease(sluice_redis_limit_t *l, unsigned ms)
{
	uint64_t end = sluice_clock_monotonic_ns() + ms * MS;
	for (int i = 0; i < 4000 && sluice_clock_monotonic_ns() < end; i++) {
		sluice_redis_source_t src;
		if (sluice_redis_acquire(l, 1, NULL, &src) == 1 && src == SLUICE_REDIS_FROM_LEASE)
			return 1;
		sleep_ms(1);
	}
	return 0;
}

static void cmd_ok(const char *c)
{
	char out[128];
	cr_assert_eq(sluice_test_redis_cmd(&srv, c, out, sizeof(out)), 0, "%s", c);
	cr_assert(out[0] != '-', "%s: %s", c, out);
}

/*
 * R2: a key holding what no script wrote makes every call a script error
 * while the connection stays up.  The breaker opens; once the key is fixed
 * the half-open probe (a real decision's request) must succeed and close
 * it, connection or not.
 */
static void wrong_type(sluice_redis_limit_config_t cfg, const char *set)
{
	sluice_redis_t *r = backend_on(srv.port, OPEN_NS);
	sluice_redis_limit_t *l;
	cr_assert_eq(sluice_redis_limit_new(r, &cfg, &l), 0);
	cr_assert(until_lease(l, 2000), "no lease from a healthy server");
	char del[128];
	snprintf(del, sizeof(del), "DEL sluice:{%s}:s", cfg.name);
	cmd_ok(del);
	cmd_ok(set);
	cr_assert(until_open(r, l, 0, 2000, UINT64_MAX), "script errors never opened the breaker");
	cmd_ok(del);
	cr_assert(until_lease(l, 2000), "no decision went through Redis within 2 s of the fix");
	cr_assert_eq(sluice_redis_breaker(r), 0);
	cr_assert_eq(stats(r).connects, 1, "the connection stayed up throughout");
	sluice_redis_limit_free(l);
	sluice_redis_free(r);
}

Test(redis_hostile, string_at_a_gcra_key_then_fixed)
{
	wrong_type(gcra_cfg("r2s"), "SET sluice:{r2s}:s abc");
}

Test(redis_hostile, list_at_a_fixed_key_then_fixed)
{
	wrong_type(fixed_cfg("r2l"), "LPUSH sluice:{r2l}:s x");
}

/* R2: NOSCRIPT twice (the reload's retry finds the script gone again)
 * while the connection stays up; then the server behaves. */
Test(redis_hostile, noscript_twice_then_fixed)
{
	sluice_test_peer_t p = { 0 };
	cr_assert_eq(sluice_test_peer_start(&p, PEER_NOSCRIPT), 0);
	sluice_redis_t *r = backend_on(p.port, OPEN_NS);
	sluice_redis_limit_config_t cfg = fixed_cfg("r2n");
	sluice_redis_limit_t *l;
	cr_assert_eq(sluice_redis_limit_new(r, &cfg, &l), 0);
	cr_assert(until_open(r, l, 0, 2000, UINT64_MAX), "NOSCRIPT twice never opened the breaker");
	atomic_store(&p.mode, PEER_GRANT);
	cr_assert(until_lease(l, 2000), "no decision went through Redis within 2 s of the fix");
	cr_assert_eq(sluice_redis_breaker(r), 0);
	cr_assert_eq(stats(r).connects, 1, "the connection stayed up throughout");
	sluice_redis_limit_free(l);
	sluice_redis_free(r);
	sluice_test_peer_stop(&p);
}

/*
 * R3: a TAT 10^13 us (115 days) ahead of Redis TIME at a real GCRA key.
 * No refusal may say "come back" later than the limit's horizon (burst x
 * T = 10 ms), and once the key is deleted decisions go through Redis again.
 */
Test(redis_hostile, far_future_tat_at_a_gcra_key)
{
	sluice_redis_t *r = backend_on(srv.port, OPEN_NS);
	sluice_redis_limit_config_t cfg = gcra_cfg("r3");
	sluice_redis_limit_t *l;
	cr_assert_eq(sluice_redis_limit_new(r, &cfg, &l), 0);
	cr_assert(until_lease(l, 2000), "no lease from a healthy server");
	cmd_ok("EVAL \"local t = redis.call('TIME') return redis.call('SET', KEYS[1], "
	       "string.format('%d', t[1] * 1000000 + t[2] + 1e13))\" 1 sluice:{r3}:s");
	/* a refusal beyond the horizon is a malformed reply: the breaker */
	cr_assert(until_open(r, l, 0, 2000, 10 * MS), "the far-future TAT never opened the breaker");
	cmd_ok("DEL sluice:{r3}:s");
	cr_assert(until_lease(l, 2000), "no decision went through Redis within 2 s of the fix");
	sluice_redis_limit_free(l);
	sluice_redis_free(r);
}

/* R3: a hostile peer's refusal with retry-after @retry_us, then a server
 * that grants. */
static void far_retry(int64_t retry_us)
{
	sluice_test_peer_t p = { 0 };
	atomic_store(&p.retry_us, retry_us);
	cr_assert_eq(sluice_test_peer_start(&p, PEER_RETRY), 0);
	sluice_redis_t *r = backend_on(p.port, OPEN_NS);
	sluice_redis_limit_config_t cfg = fixed_cfg("r3p");
	sluice_redis_limit_t *l;
	cr_assert_eq(sluice_redis_limit_new(r, &cfg, &l), 0);
	cr_assert(until_open(r, l, 0, 2000, cfg.window_ns), "the refusals never opened the breaker");
	atomic_store(&p.mode, PEER_GRANT);
	cr_assert(until_lease(l, 2000), "no decision went through Redis within 2 s of the fix");
	sluice_redis_limit_free(l);
	sluice_redis_free(r);
	sluice_test_peer_stop(&p);
}

Test(redis_hostile, refusal_for_115_days_from_a_peer) { far_retry(10000000000000LL); }
/* 2^62 us: times 1000 wraps a 64-bit count of ns */
Test(redis_hostile, refusal_whose_ns_wrap_from_a_peer) { far_retry(INT64_C(1) << 62); }

/* R3: a grant whose reset lies 10^13 us ahead: a FIXED lease lapses at its
 * reset, so taking it would spend the lease in every window to come.  No
 * decision may be admitted from such a lease; the breaker opens; a server
 * that grants with a valid reset is used again. */
Test(redis_hostile, lease_past_its_window_from_a_peer)
{
	sluice_test_peer_t p = { 0 };
	atomic_store(&p.reset_us, 10000000000000LL);
	cr_assert_eq(sluice_test_peer_start(&p, PEER_GRANT), 0);
	sluice_redis_t *r = backend_on(p.port, OPEN_NS);
	sluice_redis_limit_config_t cfg = fixed_cfg("r3l");
	sluice_redis_limit_t *l;
	cr_assert_eq(sluice_redis_limit_new(r, &cfg, &l), 0);
	uint64_t end = sluice_clock_monotonic_ns() + 2000 * MS;
	for (int i = 0; i < 2000 && stats(r).breaker_opened == 0 &&
	                sluice_clock_monotonic_ns() < end; i++) {
		sluice_redis_source_t src;
		cr_assert_eq(sluice_redis_acquire(l, 1, NULL, &src), 0,
		             "admitted from a lease that would outlive its window");
		sleep_ms(1);
	}
	cr_assert_gt(stats(r).breaker_opened, 0, "the grants never opened the breaker");
	atomic_store(&p.reset_us, 0);
	cr_assert(until_lease(l, 2000), "no decision went through Redis within 2 s of the fix");
	sluice_redis_limit_free(l);
	sluice_redis_free(r);
	sluice_test_peer_stop(&p);
}

/* VmHWM (peak resident set) of this process, in bytes */
static uint64_t peak_rss(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	cr_assert(f);
	char line[256];
	unsigned long long kb = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

/*
 * R4: a peer that answers EVALSHA with a reply that never ends (a bulk of
 * 2 GiB, or arrays nested as deep as hiredis reads) and sends 64 KiB a
 * millisecond for 2 s.  The client holds a bounded amount of it (the reply
 * cap, SLUICE__REDIS_REPLY_MAX); decisions are answered within their
 * budget (by the fallback); and both frees return within what redis.h
 * states, while the peer still sends.
 */
#define BULK_SLACK_NS (500 * MS) /* a loaded 2-core machine, sanitizers */
static void huge_reply(int mode, uint64_t bulk_max)
{
	sluice_test_peer_t p = { .bulk_max = bulk_max, .bulk_ns = 2000 * MS };
	cr_assert_eq(sluice_test_peer_start(&p, mode), 0);
	uint64_t rss0 = peak_rss();
	/* the default open time (200 ms): each reconnect is a fresh reader */
	sluice_redis_t *r = backend_on(p.port, 0);
	sluice_redis_limit_config_t cfg = fixed_cfg("r4");
	sluice_redis_limit_t *l;
	cr_assert_eq(sluice_redis_limit_new(r, &cfg, &l), 0);
	uint64_t worst = 0, end = sluice_clock_monotonic_ns() + 400 * MS;
	for (int i = 0; i < 400 && sluice_clock_monotonic_ns() < end; i++) {
		uint64_t t0 = sluice_clock_monotonic_ns();
		sluice_redis_source_t src;
		cr_assert_eq(sluice_redis_acquire(l, 1, NULL, &src), 0);
		cr_assert_eq(src, SLUICE_REDIS_FROM_FALLBACK);
		uint64_t took = sluice_clock_monotonic_ns() - t0;
		worst = took > worst ? took : worst;
		sleep_ms(1);
	}
	cr_assert_leq(worst, cfg.budget_ns + BULK_SLACK_NS, "a decision took %llu us",
	              (unsigned long long)(worst / 1000));
	/* each reconnect is a failure: the breaker opens after three, for
	 * 200 ms, so 400 ms hold at most about 3 x 3 connects (a successful
	 * connect must not reset the count of failed commands) */
	uint64_t connects = stats(r).connects;
	cr_assert_leq(connects, 20, "%llu connects in 400 ms", (unsigned long long)connects);
	uint64_t grew = peak_rss() - rss0;
	cr_assert_gt(atomic_load(&p.bulk_sent), 0);
	/* One connection's reply is at most 64 KiB on the wire: a reader
	 * buffer of at most 128 KiB and at most 64 Ki / 3 reply objects of 48
	 * bytes, under 2 MiB with any allocator's overhead.  A plain build
	 * reuses that memory from one connection to the next; ASan's
	 * quarantine keeps it, so the peak sums over connections: 2 MiB a
	 * connect, plus 4 MiB for the rest of the process. */
	uint64_t bound = (4ULL << 20) + connects * (2ULL << 20);
	cr_assert_leq(grew, bound, "the client's peak RSS grew by %llu KiB over %llu connects "
	              "(%llu KiB sent)", (unsigned long long)(grew >> 10),
	              (unsigned long long)connects,
	              (unsigned long long)(atomic_load(&p.bulk_sent) >> 10));
	uint64_t t0 = sluice_clock_monotonic_ns();
	sluice_redis_limit_free(l);
	uint64_t t1 = sluice_clock_monotonic_ns();
	sluice_redis_free(r);
	uint64_t t2 = sluice_clock_monotonic_ns();
	cr_log_info("huge reply %d: peak RSS +%llu KiB, %llu connects, %llu KiB sent, worst "
	            "decision %llu us, limit_free %llu us, redis_free %llu us",
	            mode, (unsigned long long)(grew >> 10), (unsigned long long)connects,
	            (unsigned long long)(atomic_load(&p.bulk_sent) >> 10),
	            (unsigned long long)(worst / 1000), (unsigned long long)((t1 - t0) / 1000),
	            (unsigned long long)((t2 - t1) / 1000));
	/* redis.h: limit_free does not wait for the I/O thread; redis_free
	 * returns within connect_timeout + command_timeout (50 + 20 ms) */
	cr_assert_leq(t1 - t0, BULK_SLACK_NS, "sluice_redis_limit_free took %llu us",
	              (unsigned long long)((t1 - t0) / 1000));
	cr_assert_leq(t2 - t1, 70 * MS + BULK_SLACK_NS, "sluice_redis_free took %llu us",
	              (unsigned long long)((t2 - t1) / 1000));
	sluice_test_peer_stop(&p);
}

Test(redis_hostile, huge_bulk_reply) { huge_reply(PEER_BULK, 256ULL << 20); }
/* every byte becomes a reply object at once, so the reader holds nothing
 * unparsed: the cap must count the reply's bytes, not the reader's buffer
 * (8 MiB at most: what the client holds when that is wrong is 15 times
 * what was sent) */
Test(redis_hostile, huge_nested_array_reply) { huge_reply(PEER_NESTED, 8ULL << 20); }

/*
 * R4, the frees: a peer that never answers EVALSHA, a command timeout of
 * 500 ms.  A decision's request is in flight when its limit (or keyed table)
 * is freed: the free must not wait for the I/O thread (the thread frees
 * the limit when the command ends; LeakSanitizer checks it does), and
 * sluice_redis_free returns within connect_timeout + command_timeout.
 */
static void free_in_flight(int keyed)
{
	sluice_test_peer_t p = { 0 };
	cr_assert_eq(sluice_test_peer_start(&p, PEER_SILENT), 0);
	sluice_redis_config_t rc = { .port = p.port, .command_timeout_ns = 500 * MS };
	sluice_redis_t *r;
	cr_assert_eq(sluice_redis_new(&rc, &r), 0);
	sluice_redis_limit_config_t cfg = fixed_cfg("r4f");
	sluice_redis_limit_t *l = NULL;
	sluice_redis_keyed_t *k = NULL;
	if (keyed)
		cr_assert_eq(sluice_redis_keyed_new(r, &cfg, 4, &k), 0);
	else
		cr_assert_eq(sluice_redis_limit_new(r, &cfg, &l), 0);
	sluice_redis_source_t src;
	int rc1 = keyed ? sluice_redis_acquire_key(k, "a", 1, 1, NULL, &src)
	                : sluice_redis_acquire(l, 1, NULL, &src);
	cr_assert_eq(rc1, 0);
	cr_assert_eq(src, SLUICE_REDIS_FROM_FALLBACK);
	/* bounded: the request reaches the peer (the I/O thread now waits) */
	for (int i = 0; i < 2000 && atomic_load(&p.evalshas) == 0; i++)
		sleep_ms(1);
	cr_assert_eq(atomic_load(&p.evalshas), 1);
	uint64_t t0 = sluice_clock_monotonic_ns();
	if (keyed)
		sluice_redis_keyed_free(k);
	else
		sluice_redis_limit_free(l);
	uint64_t t1 = sluice_clock_monotonic_ns();
	sluice_redis_free(r);
	uint64_t t2 = sluice_clock_monotonic_ns();
	cr_log_info("in flight: the free %llu us, redis_free %llu us",
	            (unsigned long long)((t1 - t0) / 1000), (unsigned long long)((t2 - t1) / 1000));
	/* a few atomic operations: the slack is the machine's load alone */
	cr_assert_leq(t1 - t0, 250 * MS, "the free waited %llu us for the I/O thread",
	              (unsigned long long)((t1 - t0) / 1000));
	cr_assert_leq(t2 - t1, 50 * MS + 500 * MS + BULK_SLACK_NS, "sluice_redis_free took %llu us",
	              (unsigned long long)((t2 - t1) / 1000));
	sluice_test_peer_stop(&p);
}

Test(redis_hostile, limit_free_with_its_request_in_flight) { free_in_flight(0); }
Test(redis_hostile, keyed_free_with_a_request_in_flight) { free_in_flight(1); }
