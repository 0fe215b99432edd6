/* SPDX-License-Identifier: MIT */
/*
 * test_engine_metrics.c - the engine's metrics and adaptive limits, on a
 * manual clock: what each outcome counts, the latency histogram from
 * complete(), counters kept across a reload, the engine's reload
 * counters, promtool's check of the text; an adaptive rule's limit
 * falling while latency is high, stopping at the floor, recovering, each
 * change applied by sluice_engine_sync() with the key's state kept.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/error.h"
#include "sluice/engine.h"

#include "test_engine_common.h"

TestSuite(engine_metrics, .timeout = 60);

struct text {
	char buf[65536];
	size_t len;
};

static int collect(void *ctx, const char *b, size_t n)
{
	struct text *t = ctx;
	cr_assert_lt(t->len + n, sizeof(t->buf));
	memcpy(t->buf + t->len, b, n);
	t->len += n;
	t->buf[t->len] = '\0';
	return 0;
}

/* The value of the sample @name{rule="@rule"} (rule NULL: no label). */
static long long sample(struct kit *k, const char *name, const char *rule)
{
	static struct text t;
	t.len = 0;
	cr_assert_eq(sluice_engine_metrics(k->e, collect, &t), 0);
	char want[256];
	if (rule)
		snprintf(want, sizeof(want), "\n%s{rule=\"%s\"} ", name, rule);
	else
		snprintf(want, sizeof(want), "\n%s ", name);
	const char *p = strstr(t.buf, want);
	cr_assert_not_null(p, "no sample %s", want + 1);
	return atoll(p + strlen(want));
}

static const char rules_yaml[] =
	"rules:\n"
	"  - id: cap\n"
	"    match: { path: /cap }\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 2 }\n"
	"  - id: watch\n"
	"    match: { path: /cap }\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 1 }\n"
	"    mode: shadow\n"
	"  - id: q\n"
	"    match: { path: /q }\n"
	"    limit: { algorithm: token_bucket, rate: 10/s, burst: 1 }\n"
	"    fallback: { type: queue, max_wait: 150ms }\n"
	"  - id: err\n"
	"    match: { path: /err }\n"
	"    dimensions: [user]\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 5 }\n"
	"    keys: { capacity: 64, key_max: 2 }\n";

Test(engine_metrics, outcomes_counted)
{
	struct kit k;
	kit_load(&k, rules_yaml);
	sluice_verdict_t v;
	for (int i = 0; i < 3; i++) { /* cap: 2 passed, 1 refused; watch: 1 would-refuse per extra */
		decide(&k, "GET", "/cap", NULL, NULL, NULL, &v);
		sluice_engine_complete(k.e, &v, 3 * MS, i != 1);
	}
	for (int i = 0; i < 3; i++) /* q: pass, queued 100 ms, refused (200 > 150 ms) */
		decide(&k, "GET", "/q", NULL, NULL, NULL, &v);
	decide(&k, "GET", "/err", NULL, NULL, "toolong", &v); /* EKEYLEN, open */
	cr_assert_eq(sample(&k, "sluice_rule_passed_total", "cap"), 2);
	cr_assert_eq(sample(&k, "sluice_rule_refused_total", "cap"), 1);
	cr_assert_eq(sample(&k, "sluice_rule_requests_total", "cap"), 3);
	cr_assert_eq(sample(&k, "sluice_rule_latency_seconds_count", "cap"), 3);
	cr_assert_eq(sample(&k, "sluice_rule_failures_total", "cap"), 1);
	cr_assert_eq(sample(&k, "sluice_rule_passed_total", "watch"), 3);
	cr_assert_eq(sample(&k, "sluice_rule_shadow_refused_total", "watch"), 2);
	cr_assert_eq(sample(&k, "sluice_rule_refused_total", "watch"), 0);
	cr_assert_eq(sample(&k, "sluice_rule_passed_total", "q"), 2);
	cr_assert_eq(sample(&k, "sluice_rule_queued_total", "q"), 1);
	cr_assert_eq(sample(&k, "sluice_rule_refused_total", "q"), 1);
	cr_assert_eq(sample(&k, "sluice_rule_queue_wait_seconds_count", "q"), 1);
	cr_assert_eq(sample(&k, "sluice_rule_errors_total", "err"), 1);
	cr_assert_eq(sample(&k, "sluice_rule_passed_total", "err"), 1);
	cr_assert_eq(sample(&k, "sluice_rules_version", NULL), 1);
	cr_assert_eq(sample(&k, "sluice_reloads_total", NULL), 1);
	/* a reload keeping the states keeps the counters; a failed one counts */
	load_ok(&k, rules_yaml);
	cr_assert_gt(sluice_engine_load_buffer(k.e, "x", "rules: [", 8, NULL), 0);
	cr_assert_eq(sample(&k, "sluice_rule_passed_total", "cap"), 2);
	cr_assert_eq(sample(&k, "sluice_rules_version", NULL), 2);
	cr_assert_eq(sample(&k, "sluice_reloads_total", NULL), 2);
	cr_assert_eq(sample(&k, "sluice_reload_failures_total", NULL), 1);
	kit_free(&k);
}

/* promtool (Debian prometheus) accepts the text, when it is installed. */
Test(engine_metrics, promtool_accepts)
{
	struct kit k;
	kit_load(&k, rules_yaml);
	sluice_verdict_t v;
	decide(&k, "GET", "/cap", NULL, NULL, NULL, &v);
	sluice_engine_complete(k.e, &v, 3 * MS, 1);
	static struct text t;
	cr_assert_eq(sluice_engine_metrics(k.e, collect, &t), 0);
	kit_free(&k);
	if (system("command -v promtool >/dev/null 2>&1") != 0) {
		cr_log_warn("promtool not installed: text not checked");
		return;
	}
	char path[] = "/tmp/sluice-engine-metrics-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	fwrite(t.buf, 1, t.len, f);
	fclose(f);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
	int rc = system(cmd);
	unlink(path);
	cr_assert_eq(rc, 0, "promtool check metrics refused the text");
}

/*
 * token_bucket 100/s per user, adaptive on p99 latency: baseline 10 ms x
 * 1.5, 1 window of 1 s, step 20%, floor 50.  Slow windows (100 ms each
 * request) make the controller cut 100 -> 80 -> 64 -> 51 -> 50 (the
 * floor); fast ones (1 ms) step back up by half a step of the configured
 * limit, 10 per window, to 100.  Each change is applied by a sync, with
 * the key's state kept, once the table takes it: a GCRA change must come
 * more than tau (100 x T, over 1 s here) after the previous one, so a
 * change a window after the last stays pending and the next sync applies
 * the controller's newest limit.  Seen at each window's sync: 80 80 51 51
 * 50 50, then 50 60 60 60 90 90 100 100.
 */
Test(engine_metrics, adaptive_falls_to_floor_and_recovers)
{
	static const char y[] =
		"rules:\n"
		"  - id: api\n"
		"    dimensions: [user]\n"
		"    limit: { algorithm: token_bucket, rate: 100/s, burst: 100 }\n"
		"    keys: { capacity: 64 }\n"
		"    adaptive: { signal: p99_latency, baseline: 10ms, factor: 1.5, windows: 1, "
		"window: 1s, step: 20%, floor: 50 }\n";
	struct kit k;
	kit_load(&k, y);
	sluice_engine_rule_info_t ri;
	sluice_engine_rule_info(k.e, "api", &ri);
	uint64_t serial = ri.serial;
	uint64_t seen[16];
	for (int w = 0; w < 14; w++) {
		uint64_t lat = w < 6 ? 100 * MS : MS;
		for (int i = 0; i < 20; i++) {
			sluice_verdict_t v;
			decide(&k, "GET", "/", NULL, NULL, "u", &v);
			sluice_engine_complete(k.e, &v, lat, 1);
		}
		sluice_clock_manual_advance(&k.clk, SEC);
		sluice_verdict_t v; /* the first decision of the next window judges this one */
		decide(&k, "GET", "/", NULL, NULL, "u", &v);
		sluice_engine_complete(k.e, &v, lat, 1);
		sluice_engine_sync(k.e);
		sluice_engine_rule_info(k.e, "api", &ri);
		seen[w] = ri.rate;
	}
	cr_log_info("rates: %llu %llu %llu %llu %llu %llu | %llu %llu %llu %llu %llu %llu %llu %llu",
	            (unsigned long long)seen[0], (unsigned long long)seen[1],
	            (unsigned long long)seen[2], (unsigned long long)seen[3],
	            (unsigned long long)seen[4], (unsigned long long)seen[5],
	            (unsigned long long)seen[6], (unsigned long long)seen[7],
	            (unsigned long long)seen[8], (unsigned long long)seen[9],
	            (unsigned long long)seen[10], (unsigned long long)seen[11],
	            (unsigned long long)seen[12], (unsigned long long)seen[13]);
	cr_assert_eq(ri.serial, serial, "every change kept the state");
	cr_assert_lt(seen[0], 100, "a slow window cuts the rate: %llu", (unsigned long long)seen[0]);
	for (int w = 1; w < 6; w++)
		cr_assert_leq(seen[w], seen[w - 1]);
	cr_assert_eq(seen[5], 50, "stops at the floor: %llu", (unsigned long long)seen[5]);
	cr_assert_gt(seen[13], seen[5], "fast windows recover: %llu", (unsigned long long)seen[13]);
	cr_assert_leq(seen[13], 100);
	cr_assert_eq(sample(&k, "sluice_rule_limit", "api"), (long long)seen[13]);
	cr_assert_eq(sample(&k, "sluice_rule_limit_configured", "api"), 100);
	kit_free(&k);
}
