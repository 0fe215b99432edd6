/* SPDX-License-Identifier: MIT */
/*
 * test_rules_backend.c - the loader's side of rules on a backend (rules.h
 * BACKENDS), no server needed: a file with backends: and backend: loads
 * into the description the engine builds from, and each bad backend is
 * refused at its file:line:col with its own message (an unknown name, an
 * unknown type, a bad address, an algorithm Redis cannot run, a duration
 * parse.h refuses, parameters libsluice-redis refuses, and what a rule on
 * a backend cannot be).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sluice/error.h"
#include "sluice/rules.h"

TestSuite(rules_backend, .timeout = 30);

static sluice_rules_t *load_ok(const char *yaml)
{
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	int rc = sluice_rules_load_buffer("t.yaml", yaml, strlen(yaml), NULL, &r, &e);
	if (rc != 0 && e) {
		char line[512];
		sluice_rules_error_text(e, 0, line, sizeof(line));
		cr_assert_fail("load: %d errors, first: %s", rc, line);
	}
	cr_assert_eq(rc, 0);
	return r;
}

/* The file must be refused with an error at @line:@col whose text holds
 * @msg (every other error may be there too). */
static void refused_at(const char *yaml, unsigned line, unsigned col, const char *msg)
{
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	int rc = sluice_rules_load_buffer("t.yaml", yaml, strlen(yaml), NULL, &r, &e);
	cr_assert_gt(rc, 0, "loaded a file that must be refused (%s)", msg);
	cr_assert_null(r);
	int found = 0;
	char all[4096] = "";
	for (size_t i = 0; i < e->count; i++) {
		char l[512];
		sluice_rules_error_text(e, i, l, sizeof(l));
		strncat(all, l, sizeof(all) - strlen(all) - 2);
		strncat(all, "\n", sizeof(all) - strlen(all) - 1);
		found |= e->errors[i].mark.line == line && e->errors[i].mark.col == col &&
		         strstr(e->errors[i].msg, msg) != NULL;
	}
	sluice_rules_errors_free(e);
	cr_assert(found, "no error at %u:%u with '%s'; the errors:\n%s", line, col, msg, all);
}

#define FLEET "backends:\n  fleet: { type: redis, address: 127.0.0.1:6379 }\n"

Test(rules_backend, a_file_with_backends_loads)
{
	sluice_rules_t *r = load_ok(
		"backends:\n"
		"  fleet: { type: redis, address: 127.0.0.1:6379, lease_ttl: 50ms, budget: 1ms,\n"
		"           fallback: local, expected_instances: 4, lease_max: 8 }\n"
		"  six: { type: redis, address: \"[::1]:7000\", fallback: deny, breaker_open: 1s }\n"
		"rules:\n"
		"  - id: global\n"
		"    backend: fleet\n"
		"    limit: { algorithm: fixed_window, window: 1s, max_requests: 100 }\n"
		"  - id: per-ip\n"
		"    dimensions: [ip]\n"
		"    keys: { capacity: 64 }\n"
		"    backend: six\n"
		"    limit: { algorithm: token_bucket, rate: 10/s, burst: 20 }\n"
		"  - id: log\n"
		"    backend: fleet\n"
		"    limit: { algorithm: sliding_log, window: 1s, max_requests: 10 }\n"
		"  - id: ring\n"
		"    backend: fleet\n"
		"    limit: { algorithm: sliding_window, window: 1s, max_requests: 10, buckets: 10 }\n"
		"  - id: here\n"
		"    limit: { algorithm: leaky_bucket, rate: 10/s }\n");
	cr_assert_eq(r->nbackends, 2);
	const sluice_rules_backend_t *f = &r->backends[0], *s = &r->backends[1];
	cr_assert_str_eq(f->name, "fleet");
	cr_assert_eq(f->type, SLUICE_RULES_BACKEND_REDIS);
	cr_assert_str_eq(f->address, "127.0.0.1:6379");
	cr_assert_str_eq(f->host, "127.0.0.1");
	cr_assert_eq(f->port, 6379);
	cr_assert_eq(f->lease_ttl_ns, 50000000ULL);
	cr_assert_eq(f->budget_ns, 1000000ULL);
	cr_assert_eq(f->fallback, SLUICE_RULES_BACKEND_LOCAL);
	cr_assert_eq(f->expected_instances, 4);
	cr_assert_eq(f->lease_max, 8);
	cr_assert_eq(f->mark.line, 2);
	cr_assert_str_eq(s->host, "::1");
	cr_assert_eq(s->port, 7000);
	cr_assert_eq(s->fallback, SLUICE_RULES_BACKEND_DENY);
	cr_assert_eq(s->breaker_open_ns, 1000000000ULL);
	cr_assert_eq(s->lease_max, 16, "the default lease_max");
	cr_assert_eq(s->expected_instances, 1, "the default share");
	cr_assert_eq(r->rules[0].backend, f);
	cr_assert_eq(r->rules[0].backend_mark.line, 7);
	cr_assert_eq(r->rules[0].backend_mark.col, 14);
	cr_assert_eq(r->rules[1].backend, s);
	cr_assert_eq(r->rules[2].backend, f);
	cr_assert_eq(r->rules[3].backend, f);
	cr_assert_null(r->rules[4].backend, "a rule without backend: is per instance");
	sluice_rules_free(r);
}

Test(rules_backend, unknown_backend_name)
{
	refused_at(FLEET "rules:\n  - id: a\n    backend: flet\n"
	           "    limit: { algorithm: fixed_window, window: 1s, max_requests: 1 }\n",
	           5, 14, "unknown backend 'flet' (the file's backends: fleet)");
	refused_at("rules:\n  - id: a\n    backend: fleet\n"
	           "    limit: { algorithm: fixed_window, window: 1s, max_requests: 1 }\n",
	           3, 14, "unknown backend 'fleet' (the file has no backends: section)");
}

Test(rules_backend, unknown_type_and_missing_keys)
{
	refused_at("backends:\n  m: { type: memcached, address: 127.0.0.1:11211 }\nrules: []\n", 2, 14,
	           "backends.m.type: unknown value 'memcached' (expected redis)");
	refused_at("backends:\n  m: { address: 127.0.0.1:1 }\nrules: []\n", 2, 6,
	           "backends.m: 'type' is missing");
	refused_at("backends:\n  m: { type: redis }\nrules: []\n", 2, 6,
	           "backends.m: 'address' is missing");
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, colour: red }\nrules: []\n",
	           2, 43, "backends.m: unknown key 'colour'");
	refused_at("backends: [a]\nrules: []\n", 1, 11, "backends: expected a mapping");
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1 }\n"
	           "  m: { type: redis, address: 127.0.0.1:2 }\nrules: []\n",
	           3, 3, "backends: duplicate backend 'm' (first at line 2 col 6)");
}

Test(rules_backend, bad_addresses)
{
	static const char *const bad[] = { "localhost:6379", "127.0.0.1", "127.0.0.1:0",
		                           "127.0.0.1:65536", "127.0.0.1:63x", "::1:6379",
		                           "[::1]6379", "1.2.3:4", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char y[256];
		snprintf(y, sizeof(y), "backends:\n  m: { type: redis, address: \"%s\" }\nrules: []\n", bad[i]);
		refused_at(y, 2, 30, "backends.m.address:");
	}
}

/* A list of addresses (a primary and its replicas), or Sentinels. */
Test(rules_backend, a_list_of_addresses_or_sentinels)
{
	sluice_rules_t *r = load_ok(
		"backends:\n"
		"  ha: { type: redis, address: [127.0.0.1:6379, \"[::1]:6380\", 10.0.0.2:6379] }\n"
		"  watched: { type: redis, address: [127.0.0.1:26379], sentinel: limits-1 }\n"
		"  one: { type: redis, address: 127.0.0.1:6379 }\n"
		"rules: []\n");
	const sluice_rules_backend_t *ha = &r->backends[0], *w = &r->backends[1], *one = &r->backends[2];
	cr_assert_eq(ha->n_addresses, 3);
	cr_assert_str_eq(ha->addresses[0], "127.0.0.1:6379");
	cr_assert_str_eq(ha->addresses[1], "[::1]:6380");
	cr_assert_str_eq(ha->addresses[2], "10.0.0.2:6379");
	cr_assert_str_eq(ha->address, "127.0.0.1:6379, [::1]:6380, 10.0.0.2:6379");
	cr_assert_str_eq(ha->host, "127.0.0.1", "host and port: the first's");
	cr_assert_eq(ha->port, 6379);
	cr_assert_null(ha->sentinel);
	cr_assert_eq(w->n_addresses, 1);
	cr_assert_str_eq(w->sentinel, "limits-1");
	cr_assert_eq(one->n_addresses, 1);
	cr_assert_str_eq(one->addresses[0], "127.0.0.1:6379");
	sluice_rules_free(r);

	refused_at("backends:\n  m: { type: redis, address: [] }\nrules: []\n", 2, 30,
	           "backends.m.address: a list of 0 addresses (1 to 16)");
	char y[1024] = "backends:\n  m: { type: redis, address: [";
	for (int i = 0; i < 17; i++)
		snprintf(y + strlen(y), sizeof(y) - strlen(y), "%s127.0.0.1:%d", i ? ", " : "", 7000 + i);
	strcat(y, "] }\nrules: []\n");
	refused_at(y, 2, 30, "backends.m.address: a list of 17 addresses (1 to 16)");
	/* the bad one of a list is named where it is */
	refused_at("backends:\n  m: { type: redis, address: [127.0.0.1:1, localhost:2] }\nrules: []\n",
	           2, 44, "backends.m.address: 'localhost:2' is not HOST:PORT");
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, sentinel: \"a b\" }\n"
	           "rules: []\n",
	           2, 53, "backends.m.sentinel:");
}

/* cluster: true makes the addresses a Redis Cluster's seed nodes. */
Test(rules_backend, a_cluster_backend)
{
	sluice_rules_t *r = load_ok(
		"backends:\n"
		"  shards: { type: redis, address: [127.0.0.1:7000, 127.0.0.1:7001], cluster: true }\n"
		"  one: { type: redis, address: 127.0.0.1:6379, cluster: false }\n"
		"  plain: { type: redis, address: 127.0.0.1:6379 }\n"
		"rules: []\n");
	cr_assert_eq(r->backends[0].cluster, 1);
	cr_assert_eq(r->backends[0].n_addresses, 2);
	cr_assert_eq(r->backends[1].cluster, 0);
	cr_assert_eq(r->backends[2].cluster, 0, "the default");
	sluice_rules_free(r);
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, cluster: yes }\nrules: []\n",
	           2, 52, "backends.m.cluster:");
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, sentinel: s, cluster: true }\n"
	           "rules: []\n",
	           2, 65, "backends.m.cluster: a cluster's primaries come from its slot map");
}

Test(rules_backend, durations_go_through_parse_h)
{
	/* parse.h's own message after the field's name */
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, lease_ttl: 50xs }\nrules: []\n",
	           2, 54, "backends.m.lease_ttl: '50xs': unknown unit");
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, budget: 1.5ns }\nrules: []\n",
	           2, 51, "backends.m.budget: '1.5ns'");
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, budget: 0ms }\nrules: []\n",
	           2, 51, "backends.m.budget: must be positive");
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, lease_max: 65537 }\nrules: []\n",
	           2, 54, "backends.m.lease_max: must be at most 65536");
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, fallback: open }\nrules: []\n",
	           2, 53, "backends.m.fallback: unknown value 'open' (expected local, allow, deny)");
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, fallback: allow,\n"
	           "       expected_instances: 2 }\nrules: []\n",
	           3, 28, "expected_instances: sizes the local share of fallback: local");
}

Test(rules_backend, algorithms_redis_cannot_run)
{
	static const char *const limits[] = {
		"{ algorithm: leaky_bucket, rate: 10/s }",
		"{ algorithm: warmup, rate: 10/s, warmup: 10s }",
		"{ algorithm: decay, limit: 10, half_life: 1s }",
		"{ algorithm: concurrency, max_inflight: 10 }",
	};
	static const char *const names[] = { "leaky_bucket", "warmup", "decay", "concurrency" };
	for (size_t i = 0; i < 4; i++) {
		char y[512], m[128];
		snprintf(y, sizeof(y), FLEET "rules:\n  - id: a\n    backend: fleet\n    limit: %s\n",
		         limits[i]);
		snprintf(m, sizeof(m), "backend: fleet (127.0.0.1:6379) cannot run %s", names[i]);
		refused_at(y, 5, 14, m);
	}
}

Test(rules_backend, what_a_rule_on_a_backend_cannot_be)
{
	refused_at(FLEET "rules:\n  - id: a\n    backend: fleet\n"
	           "    fallback: { type: queue, max_wait: 1s }\n"
	           "    limit: { algorithm: token_bucket, rate: 10/s, burst: 10 }\n",
	           5, 14, "cannot have fallback: queue");
	refused_at(FLEET "rules:\n  - id: a\n    backend: fleet\n"
	           "    adaptive: { signal: p99_latency, baseline: 10ms, floor: 1 }\n"
	           "    limit: { algorithm: token_bucket, rate: 10/s, burst: 10 }\n",
	           5, 14, "cannot be adaptive");
	refused_at(FLEET "rules:\n  - id: a\n    backend: fleet\n    dimensions: [user]\n"
	           "    keys: { key_max: 33 }\n"
	           "    limit: { algorithm: fixed_window, window: 1s, max_requests: 1 }\n",
	           5, 14, "takes keys.key_max up to 32");
	refused_at(FLEET "rules:\n  - id: a\n    backend: fleet\n    dimensions: [user]\n"
	           "    keys: { capacity: 65537 }\n"
	           "    limit: { algorithm: fixed_window, window: 1s, max_requests: 1 }\n",
	           5, 14, "takes keys.capacity up to 65536");
}

Test(rules_backend, parameters_libsluice_redis_refuses)
{
	/* Redis counts whole microseconds: a 1500 ns window */
	refused_at(FLEET "rules:\n  - id: a\n    backend: fleet\n"
	           "    limit: { algorithm: fixed_window, window: 1500ns, max_requests: 10 }\n",
	           4, 5, "refused by sluice_redis_limit_config_check on backend fleet: SLUICE_EWINDOW");
	/* a local share of 100 / 300 = 0 */
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, expected_instances: 300 }\n"
	           "rules:\n  - id: a\n    backend: m\n"
	           "    limit: { algorithm: fixed_window, window: 1s, max_requests: 100 }\n",
	           4, 5, "SLUICE_EMODE");
	/* a sliding log's lease_ttl at its window */
	refused_at("backends:\n  m: { type: redis, address: 127.0.0.1:1, lease_ttl: 1s }\n"
	           "rules:\n  - id: a\n    backend: m\n"
	           "    limit: { algorithm: sliding_log, window: 1s, max_requests: 100 }\n",
	           4, 5, "SLUICE_ELEASE");
	/* GCRA's T = 1 s / 3 is not whole microseconds */
	refused_at(FLEET "rules:\n  - id: a\n    backend: fleet\n"
	           "    limit: { algorithm: token_bucket, rate: 3/s, burst: 10 }\n",
	           4, 5, "SLUICE_ERATE");
}

/* A refused backend is reported once; a rule naming it gets no second
 * error for the name, but is still checked for its algorithm. */
Test(rules_backend, a_refused_backend_is_reported_once)
{
	const char *y = "backends:\n  m: { type: redis, address: nowhere:1 }\n"
	                "rules:\n  - id: a\n    backend: m\n"
	                "    limit: { algorithm: leaky_bucket, rate: 10/s }\n";
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	int rc = sluice_rules_load_buffer("t.yaml", y, strlen(y), NULL, &r, &e);
	cr_assert_eq(rc, 2, "the address and the algorithm: %d errors", rc);
	cr_assert_eq(e->errors[0].mark.line, 2);
	cr_assert(strstr(e->errors[1].msg, "cannot run leaky_bucket") != NULL, "%s", e->errors[1].msg);
	sluice_rules_errors_free(e);
}
