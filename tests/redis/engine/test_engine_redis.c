/* SPDX-License-Identifier: MIT */
/*
 * test_engine_redis.c - the engine deciding rules on a backend (rules.h
 * BACKENDS) through a real redis-server, which each test starts on a free
 * port of 127.0.0.1 and stops by its pid (tests/support/test_server.c):
 *   - a global rule is decided by Redis (leases, refusals), the verdict
 *     says so, and the metrics carry the backend's counters (promtool);
 *   - two engines, each with its own backend (connection, I/O thread,
 *     leases), deciding one global rule from two threads each, admit per
 *     window of Redis time at most the limit, and at least limit - 2 x
 *     lease_max where Redis refused someone (redis.h GUARANTEE and
 *     UNDER-ADMISSION, the bound the backend states);
 *   - redis-server paused (SIGSTOP), killed and restarted mid-load: every
 *     decision returns within the budget plus a slack for the engine and
 *     the machine, the fallback answers meanwhile (and is counted), and
 *     Redis decides again after the restart;
 *   - reload: an unchanged rule keeps its Redis limit and the backend its
 *     connection; a changed address makes new ones; a failed load changes
 *     nothing.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "sluice/clock.h"
#include "sluice/error.h"
#include "sluice/engine.h"
#include "metrics_text.h"
#include "test_server.h"

#define MS 1000000ULL
#define SEC 1000000000ULL

static sluice_test_redis_t srv;

static void server_up(void)
{
	cr_assert_eq(sluice_test_redis_start(&srv, 0), 0, "redis-server did not start");
}

static void server_down(void)
{
	if (srv.pid > 0)
		kill(srv.pid, SIGCONT); /* a test that failed while it was paused */
	sluice_test_redis_stop(&srv);
}

TestSuite(engine_redis, .init = server_up, .fini = server_down, .timeout = 120);

static uint64_t mono(void)
{
	return sluice_clock_monotonic_ns();
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static sluice_engine_t *engine(void)
{
	sluice_engine_t *e;
	cr_assert_eq(sluice_engine_new(NULL, &e), 0);
	return e;
}

static void load(sluice_engine_t *e, const char *yaml)
{
	sluice_rules_errors_t *errs = NULL;
	int rc = sluice_engine_load_buffer(e, "t.yaml", yaml, strlen(yaml), &errs);
	if (rc != 0 && errs) {
		char line[512];
		sluice_rules_error_text(errs, 0, line, sizeof(line));
		cr_assert_fail("load: %d errors, first: %s", rc, line);
	}
	cr_assert_eq(rc, 0, "load: %d", rc);
}

static int decide(sluice_engine_t *e, sluice_verdict_t *v)
{
	sluice_request_t q = { .method = "GET", .path = "/api/x" };
	cr_assert_eq(sluice_engine_decide(e, &q, v), 0);
	cr_assert_eq(v->nrules, 1);
	return v->action == SLUICE_ACTION_PASS;
}

/* Decide until Redis answers (the I/O thread connects in the background:
 * the first decisions may fall back), at most 5 s. */
static void until_redis(sluice_engine_t *e)
{
	sluice_verdict_t v;
	uint64_t end = mono() + 5 * SEC;
	do {
		decide(e, &v);
		if (v.rules[0].source != SLUICE_SOURCE_FALLBACK)
			return;
		sleep_ms(5);
	} while (mono() < end);
	cr_assert_fail("Redis never decided within 5 s");
}

/* A global fixed window of @limit per @window on backend fleet (@port). */
static void yaml_global(char *y, size_t len, int port, unsigned limit, const char *window,
                        const char *extra)
{
	snprintf(y, len,
	         "backends:\n"
	         "  fleet: { type: redis, address: 127.0.0.1:%d, budget: 50ms, lease_max: 8%s }\n"
	         "rules:\n"
	         "  - id: api\n"
	         "    match: { prefix: /api/ }\n"
	         "    backend: fleet\n"
	         "    limit: { algorithm: fixed_window, window: %s, max_requests: %u }\n",
	         port, extra, window, limit);
}

/* Redis decides: leases, then its refusals past the limit; the metrics
 * show it.  A 10 s window; a run that crosses a window boundary of Redis
 * time (CLOCK_REALTIME on this host) is run again, once. */
Test(engine_redis, decides_through_redis)
{
	char y[1024];
	yaml_global(y, sizeof(y), srv.port, 50, "10s", "");
	for (int attempt = 0; attempt < 2; attempt++) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "FLUSHALL");
		char out[64];
		cr_assert_eq(sluice_test_redis_cmd(&srv, cmd, out, sizeof(out)), 0);
		sluice_engine_t *e = engine();
		load(e, y);
		until_redis(e);
		/* the connect's first decisions fell back: counted from here */
		struct text *t = malloc(sizeof(*t));
		metrics(e, t);
		long long fb0 = sample(t, "sluice_rule_fallback_passed_total{rule=\"api\",backend=\"fleet\"}");
		long long pass0 = sample(t, "sluice_rule_passed_total{rule=\"api\"}");
		cr_assert_geq(fb0, 0, "%s", t->buf);
		time_t w0 = time(NULL) / 10;
		unsigned passed = 1, lease = 0, refusal = 0, fallback = 0;
		sluice_verdict_t v;
		for (int i = 0; i < 200; i++) {
			passed += decide(e, &v);
			lease += v.rules[0].source == SLUICE_SOURCE_REDIS_LEASE;
			refusal += v.rules[0].source == SLUICE_SOURCE_REDIS_REFUSAL;
			fallback += v.rules[0].source == SLUICE_SOURCE_FALLBACK;
			if (v.action == SLUICE_ACTION_REJECT)
				cr_assert_eq(v.status, 429);
		}
		if (time(NULL) / 10 != w0 && attempt == 0) {
			free(t);
			sluice_engine_free(e);
			continue; /* crossed a window: once more */
		}
		cr_log_info("passed %u, lease %u, refusal %u, fallback %u", passed, lease, refusal,
		            fallback);
		cr_assert_eq(fallback, 0, "Redis was up: no fallback");
		cr_assert_leq(passed, 50, "the limit of the window");
		cr_assert_geq(passed, 50 - 8, "at most one lease lost (lease_max 8)");
		cr_assert_gt(refusal, 0, "Redis refused past the limit");
		cr_assert_eq(v.action, SLUICE_ACTION_REJECT);
		metrics(e, t);
		cr_assert_gt(sample(t, "sluice_backend_round_trips_total{backend=\"fleet\"}"), 0, "%s",
		             t->buf);
		cr_assert_gt(sample(t, "sluice_backend_lease_admits_total{backend=\"fleet\"}"), 0);
		cr_assert_gt(sample(t, "sluice_backend_connects_total{backend=\"fleet\"}"), 0);
		cr_assert_eq(sample(t, "sluice_backend_breaker_state{backend=\"fleet\"}"), 0);
		cr_assert_eq(sample(t, "sluice_rule_fallback_passed_total{rule=\"api\",backend=\"fleet\"}"),
		             fb0, "no fallback while Redis is up");
		/* until_redis's last decision is in pass0 and in passed */
		cr_assert_eq(sample(t, "sluice_rule_passed_total{rule=\"api\"}") - pass0, passed - 1);
		promtool_ok(t);
		free(t);
		sluice_engine_free(e);
		return;
	}
}

/* ---- two engines, one bound --------------------------------------- */

enum { ENGINES = 2, THREADS = 2, MAX_REC = 200000 };
#define LIMIT 200ULL
#define LEASE 8ULL
#define WINDOW_NS 100000000ULL

struct rec {
	uint64_t at;
	unsigned char kind; /* 1 admitted by Redis, 2 refused by Redis, 3 fallback */
};

struct worker {
	pthread_t t;
	sluice_engine_t *e;
	uint64_t end;
	struct rec *rec;
	size_t n;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	struct timespec pause = { 0, 20000 };
	sluice_request_t q = { .method = "GET", .path = "/api/x" };
	while (w->n < MAX_REC && mono() < w->end) {
		sluice_verdict_t v;
		if (sluice_engine_decide(w->e, &q, &v) != 0 || v.nrules != 1)
			return (void *)1;
		const sluice_verdict_rule_t *r = &v.rules[0];
		w->rec[w->n].at = r->d.now_ns; /* CLOCK_MONOTONIC at the decision */
		w->rec[w->n].kind = r->source == SLUICE_SOURCE_FALLBACK       ? 3
		                    : r->source == SLUICE_SOURCE_REDIS_REFUSAL ? 2
		                                                               : 1;
		w->n++;
		nanosleep(&pause, NULL); /* demand above the limit, not a spin */
	}
	return NULL;
}

static int64_t real_minus_mono(void)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	clock_gettime(CLOCK_REALTIME, &b);
	return ((int64_t)b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
}

Test(engine_redis, two_engines_share_one_bound)
{
	char y[1024];
	yaml_global(y, sizeof(y), srv.port, (unsigned)LIMIT, "100ms", "");
	sluice_engine_t *e[ENGINES];
	for (int i = 0; i < ENGINES; i++) {
		e[i] = engine();
		load(e[i], y);
		until_redis(e[i]);
	}
	int64_t offset = real_minus_mono();
	uint64_t start = mono();
	struct worker w[ENGINES * THREADS];
	for (int i = 0; i < ENGINES * THREADS; i++) {
		w[i] = (struct worker){ .e = e[i / THREADS], .end = start + 1500 * MS };
		w[i].rec = calloc(MAX_REC, sizeof(struct rec));
		cr_assert_not_null(w[i].rec);
		cr_assert_eq(pthread_create(&w[i].t, NULL, hammer, &w[i]), 0);
	}
	for (int i = 0; i < ENGINES * THREADS; i++) {
		void *rv;
		pthread_join(w[i].t, &rv);
		cr_assert_null(rv, "a decision failed");
	}
	enum { NW = 64 };
	uint64_t admitted[NW] = { 0 }, refused[NW] = { 0 }, fell[NW] = { 0 }, total = 0;
	uint64_t w0 = (uint64_t)((int64_t)start + offset) / WINDOW_NS - 2;
	for (int i = 0; i < ENGINES * THREADS; i++)
		for (size_t k = 0; k < w[i].n; k++) {
			uint64_t wi = (uint64_t)((int64_t)w[i].rec[k].at + offset) / WINDOW_NS - w0;
			cr_assert_lt(wi, (uint64_t)NW);
			if (w[i].rec[k].kind == 1) {
				admitted[wi]++;
				total++;
			} else if (w[i].rec[k].kind == 2) {
				refused[wi]++;
			} else {
				fell[wi]++;
			}
		}
	int checked = 0;
	uint64_t fallbacks = 0;
	for (int i = 0; i < NW; i++) {
		fallbacks += fell[i];
		cr_assert_leq(admitted[i], LIMIT, "window %d: %llu admitted by 2 engines", i,
		              (unsigned long long)admitted[i]);
		/* where Redis refused, its limit was charged: at most a lease
		 * per engine lapsed; not the partial first and last windows,
		 * nor one where the fallback decided */
		if (i > 0 && i + 1 < NW && refused[i] && admitted[i - 1] && admitted[i + 1] && !fell[i]) {
			cr_assert_geq(admitted[i], LIMIT - ENGINES * LEASE,
			              "window %d: only %llu admitted while Redis refused", i,
			              (unsigned long long)admitted[i]);
			checked++;
		}
	}
	cr_log_info("%llu admitted by Redis, %llu fallback decisions, %d windows checked",
	            (unsigned long long)total, (unsigned long long)fallbacks, checked);
	cr_assert_geq(checked, 5, "too few windows where demand passed the limit");
	for (int i = 0; i < ENGINES * THREADS; i++)
		free(w[i].rec);
	for (int i = 0; i < ENGINES; i++)
		sluice_engine_free(e[i]);
}

/* ---- faults: pause, kill, restart --------------------------------- */

#define BUDGET_NS (2 * MS)
/* the decision's own slack: one 50 us sleep, scheduling on a loaded 2-core
 * machine, the engine's part (redis.h; test_redis_faults uses 20 ms) */
#define SLACK_NS (20 * MS)

struct timed {
	pthread_t t;
	sluice_engine_t *e;
	_Atomic int *stop;
	uint64_t n, late, preempted, worst, lease, fallback;
	_Atomic uint64_t after_restart_lease; /* the main thread watches it */
	_Atomic int *restarted;
};

static void *timed_decide(void *arg)
{
	struct timed *w = arg;
	sluice_request_t q = { .method = "GET", .path = "/api/x" };
	while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
		struct rusage r0, r1;
		getrusage(RUSAGE_THREAD, &r0);
		uint64_t t0 = mono();
		sluice_verdict_t v;
		int rc = sluice_engine_decide(w->e, &q, &v);
		uint64_t dt = mono() - t0;
		getrusage(RUSAGE_THREAD, &r1);
		if (rc != 0 || v.nrules != 1)
			return (void *)1;
		w->n++;
		if (r1.ru_nivcsw != r0.ru_nivcsw) {
			w->preempted++; /* time no code of ours bounds */
		} else {
			if (dt > w->worst)
				w->worst = dt;
			w->late += dt > BUDGET_NS + SLACK_NS;
		}
		w->lease += v.rules[0].source == SLUICE_SOURCE_REDIS_LEASE;
		w->fallback += v.rules[0].source == SLUICE_SOURCE_FALLBACK;
		if (atomic_load_explicit(w->restarted, memory_order_relaxed))
			atomic_fetch_add_explicit(&w->after_restart_lease,
			                          v.rules[0].source == SLUICE_SOURCE_REDIS_LEASE ||
			                                  v.rules[0].source == SLUICE_SOURCE_REDIS_REFUSAL,
			                          memory_order_relaxed);
		struct timespec pause = { 0, 100000 };
		nanosleep(&pause, NULL);
	}
	return NULL;
}

Test(engine_redis, paused_killed_restarted_within_budget)
{
	char y[1024];
	snprintf(y, sizeof(y),
	         "backends:\n"
	         "  fleet: { type: redis, address: 127.0.0.1:%d, budget: 2ms, lease_max: 8,\n"
	         "           fallback: local, expected_instances: 2, breaker_open: 100ms }\n"
	         "rules:\n"
	         "  - id: api\n"
	         "    backend: fleet\n"
	         "    limit: { algorithm: fixed_window, window: 100ms, max_requests: 100000 }\n",
	         srv.port);
	sluice_engine_t *e = engine();
	load(e, y);
	until_redis(e);
	_Atomic int stop = 0, restarted = 0;
	struct timed w[2];
	for (int i = 0; i < 2; i++) {
		w[i] = (struct timed){ .e = e, .stop = &stop, .restarted = &restarted };
		cr_assert_eq(pthread_create(&w[i].t, NULL, timed_decide, &w[i]), 0);
	}
	sleep_ms(300);
	cr_assert_eq(kill(srv.pid, SIGSTOP), 0);
	sleep_ms(600);
	cr_assert_eq(kill(srv.pid, SIGCONT), 0);
	sleep_ms(300);
	sluice_test_redis_kill(&srv);
	sleep_ms(600);
	cr_assert_eq(sluice_test_redis_start(&srv, srv.port), 0, "restart on the same port");
	atomic_store(&restarted, 1);
	/* recovery: within breaker_open + a connect, Redis decides again */
	uint64_t end = mono() + 5 * SEC;
	while (mono() < end && w[0].after_restart_lease + w[1].after_restart_lease < 100)
		sleep_ms(20);
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++) {
		void *rv;
		pthread_join(w[i].t, &rv);
		cr_assert_null(rv, "a decision failed");
	}
	uint64_t n = w[0].n + w[1].n, late = w[0].late + w[1].late;
	uint64_t worst = w[0].worst > w[1].worst ? w[0].worst : w[1].worst;
	cr_log_info("%llu decisions, worst unpreempted %.3f ms, %llu preempted, %llu fallback, "
	            "%llu from Redis after the restart",
	            (unsigned long long)n, worst / 1e6,
	            (unsigned long long)(w[0].preempted + w[1].preempted),
	            (unsigned long long)(w[0].fallback + w[1].fallback),
	            (unsigned long long)(w[0].after_restart_lease + w[1].after_restart_lease));
	cr_assert_eq(late, 0, "%llu decisions took more than budget + slack (worst %llu ns)",
	             (unsigned long long)late, (unsigned long long)worst);
	cr_assert_gt(w[0].fallback + w[1].fallback, 0, "the fallback decided during the faults");
	cr_assert_geq(w[0].after_restart_lease + w[1].after_restart_lease, 100,
	              "Redis did not decide again after the restart");
	struct text *t = malloc(sizeof(*t));
	metrics(e, t);
	cr_assert_gt(sample(t, "sluice_rule_fallback_passed_total{rule=\"api\",backend=\"fleet\"}"), 0,
	             "%s", t->buf);
	cr_assert_gt(sample(t, "sluice_backend_fallbacks_total{backend=\"fleet\",kind=\"local\"}"), 0);
	cr_assert_gt(sample(t, "sluice_backend_breaker_opened_total{backend=\"fleet\"}"), 0);
	cr_assert_gt(sample(t, "sluice_backend_io_errors_total{backend=\"fleet\"}"), 0);
	promtool_ok(t);
	free(t);
	sluice_engine_free(e);
}

/* ---- reload --------------------------------------------------------- */

static uint64_t serial(sluice_engine_t *e)
{
	sluice_engine_rule_info_t ri;
	cr_assert_eq(sluice_engine_rule_info(e, "api", &ri), 0);
	return ri.serial;
}

Test(engine_redis, reload_keeps_or_remakes_the_redis_limit)
{
	sluice_test_redis_t two;
	cr_assert_eq(sluice_test_redis_start(&two, 0), 0);
	char y[1024];
	yaml_global(y, sizeof(y), srv.port, 1000, "10s", "");
	sluice_engine_t *e = engine();
	load(e, y);
	until_redis(e);
	uint64_t s1 = serial(e);
	struct text *t = malloc(sizeof(*t));
	metrics(e, t);
	long long c1 = sample(t, "sluice_backend_connects_total{backend=\"fleet\"}");
	cr_assert_eq(c1, 1);
	/* the same file: the same state, limit and connection */
	load(e, y);
	cr_assert_eq(serial(e), s1, "an unchanged rule keeps its Redis limit");
	sluice_verdict_t v;
	decide(e, &v);
	cr_assert_neq(v.rules[0].source, SLUICE_SOURCE_FALLBACK,
	              "the kept limit decides on the kept connection at once");
	metrics(e, t);
	cr_assert_eq(sample(t, "sluice_backend_connects_total{backend=\"fleet\"}"), c1,
	             "the connection was kept");
	/* a failed load changes nothing */
	const char *bad = "backends:\n  fleet: { type: redis, address: 127.0.0.1:1, budget: 1xs }\n"
	                  "rules: []\n";
	sluice_rules_errors_t *errs = NULL;
	cr_assert_gt(sluice_engine_load_buffer(e, "bad.yaml", bad, strlen(bad), &errs), 0);
	sluice_rules_errors_free(errs);
	cr_assert_eq(serial(e), s1);
	decide(e, &v);
	cr_assert_neq(v.rules[0].source, SLUICE_SOURCE_FALLBACK);
	/* another address: a new backend and a new limit */
	yaml_global(y, sizeof(y), two.port, 1000, "10s", "");
	load(e, y);
	cr_assert_neq(serial(e), s1, "a changed address makes a new limit");
	until_redis(e);
	char out[64];
	cr_assert_eq(sluice_test_redis_cmd(&two, "EXISTS sluice:{api/fixed}:s", out, sizeof(out)), 0);
	cr_assert_str_eq(out, ":1", "the new server holds the limit's key (%s)", out);
	/* a changed limit on the same address: a new limit, no ghost (Redis
	 * keeps the count: the state's limit parameters change, its key not) */
	yaml_global(y, sizeof(y), two.port, 500, "10s", "");
	uint64_t s2 = serial(e);
	load(e, y);
	cr_assert_neq(serial(e), s2);
	sluice_engine_rule_info_t ri;
	cr_assert_eq(sluice_engine_rule_info(e, "api", &ri), 0);
	cr_assert_eq(ri.ghost, 0, "no ghost on the same Redis");
	free(t);
	sluice_engine_free(e);
	sluice_test_redis_stop(&two);
}

/* A per-key rule on the backend: one Redis limit per key, keys in hex. */
Test(engine_redis, per_key_rule_on_redis)
{
	char y[1024];
	snprintf(y, sizeof(y),
	         "backends:\n"
	         "  fleet: { type: redis, address: 127.0.0.1:%d, budget: 50ms, lease_max: 1 }\n"
	         "rules:\n"
	         "  - id: per-ip\n"
	         "    dimensions: [ip]\n"
	         "    keys: { capacity: 16 }\n"
	         "    backend: fleet\n"
	         "    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n",
	         srv.port);
	char out[64];
	cr_assert_eq(sluice_test_redis_cmd(&srv, "FLUSHALL", out, sizeof(out)), 0);
	sluice_engine_t *e = engine();
	load(e, y);
	const unsigned char a[4] = { 10, 0, 0, 1 }, b[4] = { 10, 0, 0, 2 };
	sluice_request_t q = { .method = "GET", .path = "/", .addr = a, .addr_len = 4 };
	sluice_verdict_t v;
	/* warm: the connect happens in the background */
	uint64_t end = mono() + 5 * SEC;
	do {
		cr_assert_eq(sluice_engine_decide(e, &q, &v), 0);
		sleep_ms(5);
	} while (v.rules[0].source == SLUICE_SOURCE_FALLBACK && mono() < end);
	cr_assert_neq(v.rules[0].source, SLUICE_SOURCE_FALLBACK);
	unsigned pa = v.action == SLUICE_ACTION_PASS;
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(sluice_engine_decide(e, &q, &v), 0);
		pa += v.action == SLUICE_ACTION_PASS;
	}
	cr_assert_leq(pa, 3, "key a: %u admitted of 3", pa);
	cr_assert_eq(v.action, SLUICE_ACTION_REJECT);
	q.addr = b;
	cr_assert_eq(sluice_engine_decide(e, &q, &v), 0);
	cr_assert_eq(v.action, SLUICE_ACTION_PASS, "another key has its own limit");
	cr_assert_eq(sluice_test_redis_cmd(&srv, "EXISTS sluice:{per-ip/fixed:ip:0a000002}:s", out,
	                                   sizeof(out)), 0);
	cr_assert_str_eq(out, ":1", "key b's Redis key (%s)", out);
	sluice_engine_free(e);
}

/* A backend given a list (sluice/redis.h FAILOVER): the first address
 * refuses (nobody listens on port 1), the second is the primary; Redis
 * decides through it, and the connect that skipped the first is the one
 * counted. */
Test(engine_redis, a_list_of_addresses_finds_the_primary)
{
	char y[1024];
	snprintf(y, sizeof(y),
	         "backends:\n"
	         "  fleet: { type: redis, address: [127.0.0.1:1, 127.0.0.1:%d], budget: 50ms,\n"
	         "           connect_timeout: 20ms }\n"
	         "rules:\n"
	         "  - id: api\n"
	         "    match: { prefix: /api/ }\n"
	         "    backend: fleet\n"
	         "    limit: { algorithm: fixed_window, window: 10s, max_requests: 100000 }\n",
	         srv.port);
	sluice_engine_t *e = engine();
	load(e, y);
	until_redis(e);
	struct text *t = malloc(sizeof(*t));
	metrics(e, t);
	cr_assert_geq(sample(t, "sluice_backend_connects_total{backend=\"fleet\"}"), 1, "%s", t->buf);
	free(t);
	sluice_engine_free(e);
}
