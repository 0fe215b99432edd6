/* SPDX-License-Identifier: MIT */
/*
 * test_engine.c - the rules engine on a manual clock: matching, several
 * rules on one request (all or nothing), each fallback, shadow mode,
 * fail-open and fail-closed, versions, the answer's fields, in-flight
 * permits and complete().  tests/rules/test_engine_reload.c has reloads and the
 * shared region.
 *
 * Every test is deterministic: the clock moves only when a test moves it,
 * so each count below is exact.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sluice/error.h"
#include "sluice/engine.h"

#include "test_engine_common.h"

TestSuite(engine, .timeout = 60);

/* ---- matching ------------------------------------------------------ */

static const char match_yaml[] =
	"rules:\n"
	"  - id: all\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1000 }\n"
	"  - id: api\n"
	"    match: { prefix: /api/ }\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1000 }\n"
	"  - id: api-order\n"
	"    match: { prefix: /api/order/ }\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1000 }\n"
	"  - id: order-create\n"
	"    match: { path: /api/order/create, methods: [POST] }\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1000 }\n"
	"  - id: apx\n"
	"    match: { prefix: /apx }\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1000 }\n"
	"  - id: partner\n"
	"    match: { host: Partners.Example.com, prefix: /api/ }\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1000 }\n";

static void expect_ids(const sluice_verdict_t *v, const char *want)
{
	char got[512] = "";
	for (uint32_t i = 0; i < v->nrules; i++) {
		if (i)
			strcat(got, ",");
		strcat(got, v->rules[i].id);
	}
	cr_assert_str_eq(got, want);
}

Test(engine, matching)
{
	struct kit k;
	kit_load(&k, match_yaml);
	sluice_verdict_t v;
	decide(&k, "POST", "/api/order/create", NULL, "1.2.3.4", NULL, &v);
	expect_ids(&v, "all,api,api-order,order-create");
	decide(&k, "GET", "/api/order/create", NULL, "1.2.3.4", NULL, &v);
	expect_ids(&v, "all,api,api-order"); /* methods */
	decide(&k, "POST", "/api/order/create2", NULL, "1.2.3.4", NULL, &v);
	expect_ids(&v, "all,api,api-order"); /* exact is exact */
	decide(&k, "GET", "/api/orders", NULL, "1.2.3.4", NULL, &v);
	expect_ids(&v, "all,api"); /* /api/order/ is not a prefix of it */
	decide(&k, "GET", "/apx/1", NULL, "1.2.3.4", NULL, &v);
	expect_ids(&v, "all,apx"); /* greatest prefix <= path is /apx: matches */
	decide(&k, "GET", "/apw", NULL, "1.2.3.4", NULL, &v);
	expect_ids(&v, "all");
	decide(&k, "GET", "/api/z", "partners.EXAMPLE.com", "1.2.3.4", NULL, &v);
	expect_ids(&v, "all,api,partner"); /* host: case-insensitive */
	decide(&k, "GET", "/api/z", "other.example.com", "1.2.3.4", NULL, &v);
	expect_ids(&v, "all,api");
	decide(&k, "GET", "/", NULL, NULL, NULL, &v);
	expect_ids(&v, "all");
	cr_assert_eq(v.version, 1);
	kit_free(&k);
}

Test(engine, bad_requests)
{
	struct kit k;
	kit_load(&k, match_yaml);
	sluice_verdict_t v;
	sluice_request_t q = { .method = "GET", .path = "api" };
	cr_assert_eq(sluice_engine_decide(k.e, &q, &v), SLUICE_EINVAL);
	q.path = NULL;
	cr_assert_eq(sluice_engine_decide(k.e, &q, &v), SLUICE_EINVAL);
	cr_assert_eq(sluice_engine_decide(k.e, NULL, &v), SLUICE_EINVAL);
	kit_free(&k);
}

/* More rules than a verdict holds could match one path: refused at load,
 * at the rule of the route that reaches the bound (the 17th nested
 * prefix, line 50). */
Test(engine, too_many_matches_refused)
{
	char y[8192] = "rules:\n";
	for (int i = 0; i < 17; i++)
		snprintf(y + strlen(y), sizeof(y) - strlen(y),
		         "  - id: r%d\n    match: { prefix: /a%.*s }\n"
		         "    limit: { algorithm: fixed_window, window: 1h, max_requests: 10 }\n",
		         i, i, "bbbbbbbbbbbbbbbbbbbbbbbbbb");
	struct kit k;
	kit_new(&k);
	load_refused(&k, y, 1, 50, "can match 17 rules");
	sluice_engine_info_t in;
	sluice_engine_info(k.e, &in);
	cr_assert_eq(in.failed_loads, 1);
	cr_assert_eq(in.version, 0);
	kit_free(&k);
}

/* ---- several rules: all or nothing --------------------------------- */

static const char both_yaml[] =
	"rules:\n"
	"  - id: per-ip\n"
	"    match: { prefix: /a/ }\n"
	"    dimensions: [ip]\n"
	"    limit: { algorithm: token_bucket, rate: 1/h, burst: 5 }\n"
	"    keys: { capacity: 64 }\n"
	"  - id: total\n"
	"    match: { path: /a/b }\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n";

/*
 * /a/b takes from both rules; once `total` refuses, the permit per-ip took
 * for that request must go back.  Afterwards /a/x (per-ip only) finds
 * exactly 5 - 3 = 2 permits: the 3 /a/b admissions.  Without the refund
 * every refused /a/b would have cost per-ip a permit too.
 */
Test(engine, several_rules_all_or_nothing)
{
	struct kit k;
	kit_load(&k, both_yaml);
	sluice_verdict_t v;
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(decide(&k, "GET", "/a/b", NULL, "1.2.3.4", NULL, &v), SLUICE_ACTION_PASS);
		cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_PASSED);
		cr_assert_eq(v.rules[1].outcome, SLUICE_OUTCOME_PASSED);
	}
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(decide(&k, "GET", "/a/b", NULL, "1.2.3.4", NULL, &v),
		             SLUICE_ACTION_REJECT);
		cr_assert_eq(v.status, 429);
		cr_assert_eq(v.refused_by, 1);
		cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_RETURNED);
		cr_assert_eq(v.rules[1].outcome, SLUICE_OUTCOME_REFUSED);
	}
	int passed = 0;
	for (int i = 0; i < 10; i++)
		passed += decide(&k, "GET", "/a/x", NULL, "1.2.3.4", NULL, &v) == SLUICE_ACTION_PASS;
	cr_assert_eq(passed, 2, "per-ip kept %d permits, expected 2", passed);
	/* another address has its own 5 */
	passed = 0;
	for (int i = 0; i < 10; i++)
		passed += decide(&k, "GET", "/a/x", NULL, "5.6.7.8", NULL, &v) == SLUICE_ACTION_PASS;
	cr_assert_eq(passed, 5);
	kit_free(&k);
}

/* The first refusal stops: later rules are not asked. */
Test(engine, refusal_stops_later_rules)
{
	static const char y[] =
		"rules:\n"
		"  - id: first\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1 }\n"
		"  - id: second\n"
		"    dimensions: [ip]\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1 }\n"
		"    keys: { capacity: 64 }\n";
	struct kit k;
	kit_load(&k, y);
	sluice_verdict_t v;
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "2.2.2.2", NULL, &v), SLUICE_ACTION_REJECT);
	cr_assert_eq(v.rules[1].outcome, SLUICE_OUTCOME_NOT_ASKED);
	kit_free(&k);
}

/* ---- fallbacks ----------------------------------------------------- */

Test(engine, fallback_reject_with_headers)
{
	static const char y[] =
		"rules:\n"
		"  - id: login\n"
		"    dimensions: [user]\n"
		"    limit: { algorithm: token_bucket, rate: 1/s, burst: 2 }\n"
		"    keys: { capacity: 64 }\n"
		"    fallback: { type: reject, status: 503 }\n";
	struct kit k;
	kit_load(&k, y);
	sluice_verdict_t v;
	cr_assert_eq(decide(&k, "POST", "/login", NULL, NULL, "alice", &v), SLUICE_ACTION_PASS);
	struct hdrs h = { 0 };
	cr_assert_eq(sluice_verdict_headers(&v, hdr_collect, &h), 2);
	cr_assert_str_eq(h.text, "RateLimit-Policy: \"login\";q=2;w=2\n"
	                         "RateLimit: \"login\";r=1;t=1\n");
	cr_assert_eq(decide(&k, "POST", "/login", NULL, NULL, "alice", &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "POST", "/login", NULL, NULL, "alice", &v), SLUICE_ACTION_REJECT);
	cr_assert_eq(v.status, 503);
	cr_assert_eq(v.retry_after_ns, SEC);
	memset(&h, 0, sizeof(h));
	cr_assert_eq(sluice_verdict_headers(&v, hdr_collect, &h), 3);
	cr_assert_str_eq(h.text, "Retry-After: 1\n"
	                         "RateLimit-Policy: \"login\";q=2;w=2\n"
	                         "RateLimit: \"login\";r=0;t=1\n");
	/* q=2;w=2: the library's one mapping (sluice_http_policy_of), the nginx
	 * module's too: the rate in the whole seconds holding the burst of 2 */
	/* a request without a user counts under the one absent key */
	cr_assert_eq(decide(&k, "POST", "/login", NULL, NULL, NULL, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "POST", "/login", NULL, NULL, NULL, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "POST", "/login", NULL, NULL, NULL, &v), SLUICE_ACTION_REJECT);
	kit_free(&k);
}

Test(engine, fallback_queue)
{
	static const char y[] =
		"rules:\n"
		"  - id: search\n"
		"    limit: { algorithm: token_bucket, rate: 10/s, burst: 1 }\n"
		"    fallback: { type: queue, max_wait: 200ms, status: 429 }\n";
	struct kit k;
	kit_load(&k, y);
	sluice_verdict_t v;
	cr_assert_eq(decide(&k, "GET", "/s", NULL, NULL, NULL, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(v.delay_ns, 0);
	cr_assert_eq(decide(&k, "GET", "/s", NULL, NULL, NULL, &v), SLUICE_ACTION_QUEUE);
	cr_assert_eq(v.delay_ns, 100 * MS);
	cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_QUEUED);
	cr_assert_eq(decide(&k, "GET", "/s", NULL, NULL, NULL, &v), SLUICE_ACTION_QUEUE);
	cr_assert_eq(v.delay_ns, 200 * MS);
	cr_assert_eq(decide(&k, "GET", "/s", NULL, NULL, NULL, &v), SLUICE_ACTION_REJECT);
	cr_assert_eq(v.status, 429);
	kit_free(&k);
}

/* A booking is cancelled when a later rule refuses: the slot it took is
 * free again for the next request. */
Test(engine, queue_booking_given_back)
{
	static const char y[] =
		"rules:\n"
		"  - id: shaper\n"
		"    limit: { algorithm: token_bucket, rate: 10/s, burst: 1 }\n"
		"    fallback: { type: queue, max_wait: 1s }\n"
		"  - id: cap\n"
		"    match: { path: /capped }\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1 }\n";
	struct kit k;
	kit_load(&k, y);
	sluice_verdict_t v;
	cr_assert_eq(decide(&k, "GET", "/capped", NULL, NULL, NULL, &v), SLUICE_ACTION_PASS);
	/* books 100 ms ahead, then cap refuses: the booking goes back */
	cr_assert_eq(decide(&k, "GET", "/capped", NULL, NULL, NULL, &v), SLUICE_ACTION_REJECT);
	cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_RETURNED);
	cr_assert_eq(decide(&k, "GET", "/x", NULL, NULL, NULL, &v), SLUICE_ACTION_QUEUE);
	cr_assert_eq(v.delay_ns, 100 * MS, "the cancelled booking's slot: %llu",
	             (unsigned long long)v.delay_ns);
	kit_free(&k);
}

Test(engine, fallback_stale)
{
	static const char y[] =
		"rules:\n"
		"  - id: reports\n"
		"    limit: { algorithm: fixed_window, window: 1s, max_requests: 1 }\n"
		"    fallback: { type: stale }\n";
	struct kit k;
	kit_load(&k, y);
	sluice_verdict_t v;
	cr_assert_eq(decide(&k, "GET", "/r", NULL, NULL, NULL, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "GET", "/r", NULL, NULL, NULL, &v), SLUICE_ACTION_STALE);
	cr_assert_eq(v.status, 0);
	sluice_clock_manual_advance(&k.clk, SEC);
	cr_assert_eq(decide(&k, "GET", "/r", NULL, NULL, NULL, &v), SLUICE_ACTION_PASS);
	kit_free(&k);
}

/* ---- shadow -------------------------------------------------------- */

Test(engine, shadow_refuses_nothing)
{
	static const char y[] =
		"rules:\n"
		"  - id: watch\n"
		"    dimensions: [ip]\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 2 }\n"
		"    keys: { capacity: 64 }\n"
		"    mode: shadow\n"
		"  - id: real\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n";
	struct kit k;
	kit_load(&k, y);
	sluice_verdict_t v;
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS);
		cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_PASSED);
	}
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_SHADOW);
	cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_SHADOW_REFUSED);
	cr_assert_eq(v.rules[1].outcome, SLUICE_OUTCOME_PASSED);
	cr_assert_eq(v.refused_by, 0);
	/* the enforcing rule refuses: its action wins, the shadow still counts */
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT);
	cr_assert_eq(v.refused_by, 1);
	cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_SHADOW_REFUSED);
	kit_free(&k);
}

/* ---- on_error ------------------------------------------------------ */

/* The injected limiter error: a user id longer than the table's key_max
 * (SLUICE_EKEYLEN from sluice_keyed_acquire_at). */
static const char err_yaml_fmt[] =
	"rules:\n"
	"  - id: users\n"
	"    dimensions: [user]\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1 }\n"
	"    keys: { capacity: 64, key_max: 4 }\n"
	"    fallback: { type: reject, status: 429 }\n"
	"    on_error: %s\n";

Test(engine, fail_open)
{
	char y[512];
	snprintf(y, sizeof(y), err_yaml_fmt, "allow");
	struct kit k;
	kit_load(&k, y);
	sluice_verdict_t v;
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(decide(&k, "GET", "/", NULL, NULL, "too-long-user", &v),
		             SLUICE_ACTION_PASS);
		cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_ERROR_OPEN);
		cr_assert_eq(v.rules[0].error, SLUICE_EKEYLEN);
	}
	/* a short id is limited as usual */
	cr_assert_eq(decide(&k, "GET", "/", NULL, NULL, "bob", &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "GET", "/", NULL, NULL, "bob", &v), SLUICE_ACTION_REJECT);
	kit_free(&k);
}

/* A shadow rule refuses nothing, so it is not advertised: the fields
 * name the enforcing rule only, on an admission and on a refusal. */
Test(engine, shadow_rules_not_advertised)
{
	static const char y[] =
		"rules:\n"
		"  - id: enforced\n"
		"    dimensions: [user]\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 2 }\n"
		"    keys: { capacity: 64 }\n"
		"  - id: watched\n"
		"    dimensions: [user]\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1 }\n"
		"    keys: { capacity: 64 }\n"
		"    mode: shadow\n";
	struct kit k;
	kit_load(&k, y);
	sluice_verdict_t v;
	for (int i = 0; i < 3; i++) {
		int want = i < 2 ? SLUICE_ACTION_PASS : SLUICE_ACTION_REJECT;
		if (i == 1)
			want = SLUICE_ACTION_SHADOW;
		cr_assert_eq(decide(&k, "GET", "/", NULL, NULL, "alice", &v), want, "request %d", i);
		cr_assert_eq(v.rules[1].shadow, 1);
		cr_assert_eq(v.rules[0].shadow, 0);
		struct hdrs h = { 0 };
		sluice_verdict_headers(&v, hdr_collect, &h);
		cr_assert_null(strstr(h.text, "watched"), "request %d: %s", i, h.text);
		cr_assert_not_null(strstr(h.text, "\"enforced\""), "request %d: %s", i, h.text);
	}
	kit_free(&k);
}

Test(engine, fail_closed)
{
	char y[512];
	snprintf(y, sizeof(y), err_yaml_fmt, "reject");
	struct kit k;
	kit_load(&k, y);
	sluice_verdict_t v;
	cr_assert_eq(decide(&k, "GET", "/", NULL, NULL, "too-long-user", &v), SLUICE_ACTION_REJECT);
	cr_assert_eq(v.status, 429);
	cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_ERROR_CLOSED);
	cr_assert_eq(v.rules[0].error, SLUICE_EKEYLEN);
	struct hdrs h = { 0 };
	sluice_verdict_headers(&v, hdr_collect, &h);
	cr_assert_null(strstr(h.text, "Retry-After"), "no honest delay for an error: %s", h.text);
	kit_free(&k);
}

/* ---- versions ------------------------------------------------------ */

Test(engine, versions_and_failed_loads)
{
	struct kit k;
	kit_new(&k);
	sluice_verdict_t v;
	cr_assert_eq(decide(&k, "GET", "/", NULL, NULL, NULL, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(v.version, 0);
	cr_assert_eq(v.nrules, 0);
	load_ok(&k, both_yaml);
	decide(&k, "GET", "/a/b", NULL, "1.1.1.1", NULL, &v);
	cr_assert_eq(v.version, 1);
	cr_assert_eq(v.nrules, 2);
	/* a broken file: errors returned, the old set kept, counted */
	static const char bad[] = "rules:\n  - id: x\n    limit: { algorithm: gcra }\n";
	load_refused(&k, bad, 0, 3, NULL);
	decide(&k, "GET", "/a/b", NULL, "1.1.1.1", NULL, &v);
	cr_assert_eq(v.version, 1);
	cr_assert_eq(v.nrules, 2);
	load_ok(&k, match_yaml);
	decide(&k, "GET", "/a/b", NULL, "1.1.1.1", NULL, &v);
	cr_assert_eq(v.version, 2);
	sluice_engine_info_t in;
	cr_assert_eq(sluice_engine_info(k.e, &in), 0);
	cr_assert_eq(in.version, 2);
	cr_assert_eq(in.failed_loads, 1);
	cr_assert_eq(in.rules, 6);
	/* a file that cannot be opened counts too */
	cr_assert_gt(sluice_engine_load_file(k.e, "/nonexistent/rules.yaml", NULL), 0);
	sluice_engine_info(k.e, &in);
	cr_assert_eq(in.failed_loads, 2);
	cr_assert_eq(in.version, 2);
	kit_free(&k);
}

/* ---- in-flight permits and complete() ------------------------------ */

static const char inflight_yaml[] =
	"rules:\n"
	"  - id: upload\n"
	"    dimensions: [user]\n"
	"    limit: { algorithm: concurrency, max_inflight: 2 }\n"
	"    keys: { capacity: 64 }\n";

Test(engine, complete_releases_inflight)
{
	struct kit k;
	kit_load(&k, inflight_yaml);
	sluice_verdict_t a, b, c;
	cr_assert_eq(decide(&k, "PUT", "/u", NULL, NULL, "alice", &a), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "PUT", "/u", NULL, NULL, "alice", &b), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "PUT", "/u", NULL, NULL, "alice", &c), SLUICE_ACTION_REJECT);
	cr_assert_eq(sluice_engine_complete(k.e, &c, 0, 1), 0); /* held nothing */
	cr_assert_eq(sluice_engine_complete(k.e, &a, 1000, 1), 0);
	cr_assert_eq(sluice_engine_complete(k.e, &a, 1000, 1), 0); /* once only */
	cr_assert_eq(decide(&k, "PUT", "/u", NULL, NULL, "alice", &c), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "PUT", "/u", NULL, NULL, "alice", &a), SLUICE_ACTION_REJECT);
	/* a reload that keeps the state: the permit goes back to it */
	load_ok(&k, inflight_yaml);
	cr_assert_eq(sluice_engine_complete(k.e, &b, 1000, 1), 0);
	cr_assert_eq(decide(&k, "PUT", "/u", NULL, NULL, "alice", &a), SLUICE_ACTION_PASS);
	kit_free(&k);
}

/* ---- keys from the lookup callback --------------------------------- */

struct kv {
	const char *header, *query;
	int calls;
};

static const void *kv_lookup(void *ctx, sluice_lookup_kind_t kind, const char *name, size_t *len)
{
	struct kv *k = ctx;
	k->calls++;
	const char *v = NULL;
	if (kind == SLUICE_LOOKUP_HEADER && strcasecmp(name, "x-api-key") == 0)
		v = k->header;
	if (kind == SLUICE_LOOKUP_QUERY && strcmp(name, "tenant") == 0)
		v = k->query;
	if (v)
		*len = strlen(v);
	return v;
}

Test(engine, keys_from_headers_queries_and_routes)
{
	static const char y[] =
		"rules:\n"
		"  - id: by-key\n"
		"    match: { prefix: /k/ }\n"
		"    dimensions: [\"header:X-Api-Key\", \"query:tenant\"]\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1 }\n"
		"    keys: { capacity: 64 }\n"
		"  - id: by-route\n"
		"    match: { prefix: /r/ }\n"
		"    dimensions: [route]\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1 }\n"
		"    keys: { capacity: 64 }\n";
	struct kit k;
	kit_load(&k, y);
	sluice_verdict_t v;
	struct kv a = { "A", "t1", 0 };
	sluice_request_t q = { .method = "GET", .path = "/k/x", .lookup = kv_lookup, .ctx = &a };
	cr_assert_eq(action_of(k.e, &q, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(a.calls, 2);
	/* the header's key A is spent: refused even for another tenant */
	a.query = "t2";
	cr_assert_eq(action_of(k.e, &q, &v), SLUICE_ACTION_REJECT);
	cr_assert_eq(v.rules[0].dim, 0);
	/* key B, tenant t1 spent: refused by the second dimension */
	a.header = "B";
	a.query = "t1";
	cr_assert_eq(action_of(k.e, &q, &v), SLUICE_ACTION_REJECT);
	cr_assert_eq(v.rules[0].dim, 1);
	/* ... and nothing taken from B's key: B with a new tenant passes */
	a.query = "t3";
	cr_assert_eq(action_of(k.e, &q, &v), SLUICE_ACTION_PASS);
	/* no lookup callback: the shared absent key, once */
	q.lookup = NULL;
	cr_assert_eq(action_of(k.e, &q, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(action_of(k.e, &q, &v), SLUICE_ACTION_REJECT);
	/* route: one limit per path */
	cr_assert_eq(decide(&k, "GET", "/r/1", NULL, NULL, NULL, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "GET", "/r/2", NULL, NULL, NULL, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "GET", "/r/1", NULL, NULL, NULL, &v), SLUICE_ACTION_REJECT);
	kit_free(&k);
}

/* ---- every algorithm ----------------------------------------------- */

/* examples/rules.yaml has one rule per algorithm: the engine builds each
 * (keyed tables and global limiters), decides a request of each rule's
 * route, and a reload of the same file keeps every state. */
Test(engine, every_algorithm_of_the_example)
{
	struct kit k;
	kit_new(&k);
	cr_assert_eq(sluice_engine_load_file(k.e, RULES_EXAMPLE, NULL), 0);
	static const struct {
		const char *method, *path, *host, *id;
	} reqs[] = {
		{ "POST", "/api/order/create", NULL, "order-create" },
		{ "GET", "/api/product/1", NULL, "product-list" },
		{ "GET", "/api/search", NULL, "search" },
		{ "GET", "/v2/items", "partners.example.com", "partner-api" },
		{ "GET", "/api/export", NULL, "export" },
		{ "PUT", "/upload/x", NULL, "upload" },
		{ "POST", "/login", NULL, "login" },
		{ "GET", "/reports/q", NULL, "reports" },
		{ "GET", "/static/a.css", NULL, "static" },
	};
	uint64_t serial[9];
	for (size_t i = 0; i < 9; i++) {
		sluice_verdict_t v;
		int rc = decide(&k, reqs[i].method, reqs[i].path, reqs[i].host, "1.2.3.4", "u", &v);
		cr_assert_eq(v.nrules, 1, "%s: %u rules", reqs[i].path, v.nrules);
		cr_assert_str_eq(v.rules[0].id, reqs[i].id);
		cr_assert(rc == SLUICE_ACTION_PASS || rc == SLUICE_ACTION_SHADOW, "%s: %d", reqs[i].id,
		          rc);
		sluice_engine_complete(k.e, &v, 0, 1);
		sluice_engine_rule_info_t ri;
		cr_assert_eq(sluice_engine_rule_info(k.e, reqs[i].id, &ri), 0);
		serial[i] = ri.serial;
	}
	cr_assert_eq(sluice_engine_load_file(k.e, RULES_EXAMPLE, NULL), 0);
	for (size_t i = 0; i < 9; i++) {
		sluice_engine_rule_info_t ri;
		cr_assert_eq(sluice_engine_rule_info(k.e, reqs[i].id, &ri), 0);
		cr_assert_eq(ri.serial, serial[i], "%s: a new state", reqs[i].id);
		cr_assert_eq(ri.pending, 0);
	}
	kit_free(&k);
}
