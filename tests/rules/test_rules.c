/* SPDX-License-Identifier: MIT */
/*
 * tests/rules/test_rules.c - the rule file loader: every error kind at its exact
 * line and column, valid files to exactly the expected description, the
 * caps, and examples/rules.yaml.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/error.h"
#include "sluice/limiter.h"
#include "sluice/rules.h"

TestSuite(rules, .timeout = 60);

static sluice_rules_errors_t *load_bad(const char *yaml, int *rc)
{
	sluice_rules_t *r = (sluice_rules_t *)1;
	sluice_rules_errors_t *e = NULL;
	*rc = sluice_rules_load_buffer("t.yaml", yaml, strlen(yaml), NULL, &r, &e);
	cr_assert_null(r, "an invalid file gives no description");
	return e;
}

/*
 * The 1-based column of @needle's first occurrence in line @line of @yaml
 * ("" is column 1): the tests name the place by what is written there, so a
 * column is checked against the text, not against the parser's own count.
 */
static uint32_t col_of(const char *yaml, uint32_t line, const char *needle)
{
	const char *l = yaml;
	for (uint32_t i = 1; i < line; i++) {
		l = strchr(l, '\n');
		cr_assert_not_null(l, "no line %u", line);
		l++;
	}
	size_t len = strcspn(l, "\n");
	for (size_t o = 0; o + strlen(needle) <= len; o++)
		if (strncmp(l + o, needle, strlen(needle)) == 0)
			return (uint32_t)o + 1;
	cr_assert_fail("'%s' is not in line %u", needle, line);
	return 0;
}

/* @yaml has exactly one error, at @line and the column of @at, whose
 * message holds @want. */
static void one_error(const char *yaml, uint32_t line, const char *at, const char *want)
{
	uint32_t col = col_of(yaml, line, at);
	int rc;
	sluice_rules_errors_t *e = load_bad(yaml, &rc);
	cr_assert_not_null(e, "no error list for:\n%s", yaml);
	for (size_t i = 0; i < e->count; i++)
		cr_log_info("%u:%u: %s", e->errors[i].mark.line, e->errors[i].mark.col,
		            e->errors[i].msg);
	cr_assert_eq(rc, 1, "rc %d", rc);
	cr_assert_eq(e->count, 1);
	cr_assert_eq(e->dropped, 0);
	cr_assert_eq(e->errors[0].mark.line, line, "line %u, want %u (%s)", e->errors[0].mark.line,
	             line, e->errors[0].msg);
	cr_assert_eq(e->errors[0].mark.col, col, "col %u, want %u (%s)", e->errors[0].mark.col, col,
	             e->errors[0].msg);
	cr_assert(strstr(e->errors[0].msg, want), "message '%s' lacks '%s'", e->errors[0].msg, want);
	sluice_rules_errors_free(e);
}

static const sluice_rules_t *load_ok(const char *yaml, const sluice_rules_options_t *opt)
{
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	int rc = sluice_rules_load_buffer("t.yaml", yaml, strlen(yaml), opt, &r, &e);
	if (e)
		for (size_t i = 0; i < e->count; i++)
			cr_log_error("%u:%u: %s", e->errors[i].mark.line, e->errors[i].mark.col,
			             e->errors[i].msg);
	cr_assert_eq(rc, 0, "rc %d for:\n%s", rc, yaml);
	cr_assert_null(e);
	cr_assert_not_null(r);
	return r;
}

/* A one-rule file with @limit as the rule's limit line and @extra lines. */
#define RULE(extra, limit) "rules:\n  - id: r\n    limit: " limit "\n" extra
#define TB "{ algorithm: token_bucket, rate: 50/s, burst: 20 }"

/* ---- every error kind at its place ----------------------------------- */

Test(rules, unknown_key)
{
	one_error(RULE("    colour: red\n", TB), 4, "colour", "unknown key 'colour'");
	one_error("rules: []\nrulez: []\n", 2, "rulez", "unknown key 'rulez'");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: 20, brust: 3 }"), 3, "brust",
	          "unknown key 'brust'");
}

Test(rules, duplicate_key)
{
	one_error(RULE("    mode: enforce\n    mode: shadow\n", TB), 5, "mode",
	          "duplicate key 'mode' (first at line 4 col 5)");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: 20, burst: 20 }"), 3, "burst: 20 }",
	          "duplicate key 'burst' (first at line 3 col 51)");
}

Test(rules, wrong_type)
{
	one_error(RULE("", "{ algorithm: token_bucket, rate: [50/s], burst: 20 }"), 3, "[50/s]",
	          "limit.rate: expected a rate such as 50/s, 300/m, 10/h or 5/250ms, found a list");
	one_error(RULE("", "token_bucket"), 3, "token_bucket", "limit: expected a mapping, found a scalar");
	one_error("rules:\n  - id: a\n    limit: ~\n", 3, "~", "limit: expected a mapping, found nothing");
	one_error("rules: { id: r }\n", 1, "{ id", "rules: expected a list of rules, found a mapping");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: \"20\" }"), 3, "\"20\"",
	          "expected an integer, found the quoted string '20'");
	one_error(RULE("    dimensions: ip\n", TB), 4, "ip", "dimensions: expected a list");
	one_error(RULE("    keys: { capacity: 64, hash_long_keys: yes }\n    dimensions: [ip]\n", TB),
	          4, "yes", "keys.hash_long_keys: unknown value 'yes' (expected false, true)");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: }"), 3, "}",
	          "limit.burst: expected an integer, found nothing");
	one_error("rules:\n  - id: r\n    ? [a]\n    : 1\n    limit: " TB "\n", 3, "[a]",
	          "rule: a key must be a string, found a list");
}

Test(rules, trailing_junk)
{
	one_error(RULE("", "{ algorithm: token_bucket, rate: 100rps, burst: 20 }"), 3, "100rps",
	          "limit.rate: '100rps': a rate needs a period: 10/s, 10r/s, 30r/m, 5/250ms");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: 20x }"), 3, "20x",
	          "limit.burst: trailing characters 'x' after 20");
	one_error(RULE("", "{ algorithm: fixed_window, window: 5sec, max_requests: 3 }"), 3, "5sec",
	          "limit.window: '5sec': unknown unit (ns, us, ms, s, m, min, h, d)");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/sec, burst: 2 }"), 3, "50/sec",
	          "limit.rate: '50/sec': unknown unit (ns, us, ms, s, m, min, h, d)");
}

Test(rules, exponent)
{
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: 1e3 }"), 3, "1e3",
	          "limit.burst: exponent notation is not accepted ('1e3')");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 1e3/s, burst: 2 }"), 3, "1e3/s",
	          "limit.rate: '1e3/s': exponent notation is not accepted: write the number out");
	one_error(RULE("", "{ algorithm: fixed_window, window: 1e3ms, max_requests: 3 }"), 3, "1e3ms",
	          "exponent notation");
	one_error(RULE("    adaptive: { signal: p99_latency, baseline: 5ms, factor: 1e1, floor: 1 }\n",
	               TB),
	          4, "1e1", "adaptive.factor: '1e1': exponent notation");
}

Test(rules, negative_and_zero)
{
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: -1 }"), 3, "-1",
	          "limit.burst: must not be negative ('-1')");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: 0 }"), 3, "0 }",
	          "limit.burst: must be at least 1 (found 0)");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 0/s, burst: 2 }"), 3, "0/s",
	          "limit.rate: '0/s': a rate must be positive");
	one_error(RULE("", "{ algorithm: fixed_window, window: 0ms, max_requests: 3 }"), 3, "0ms",
	          "limit.window: must be positive");
	one_error(RULE("", "{ algorithm: fixed_window, window: -1s, max_requests: 3 }"), 3, "-1s",
	          "limit.window: '-1s': must not be negative");
	one_error(RULE("    fallback: { type: queue, max_wait: 0ms }\n", TB), 4, "0ms",
	          "fallback.max_wait: must be positive");
	/* depth may be 0: D = 0 is a leaky meter without a queue */
	sluice_rules_free((sluice_rules_t *)load_ok(
		RULE("", "{ algorithm: leaky_bucket, rate: 5/s, depth: 0 }"), NULL));
}

Test(rules, numbers_are_exact)
{
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: 010 }"), 3, "010",
	          "leading zeros are not accepted ('010')");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: 2.5 }"), 3, "2.5",
	          "must be a whole number ('2.5')");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: 18446744073709551616 }"), 3,
	          "18446744073709551616", "out of range");
	one_error(RULE("", "{ algorithm: fixed_window, window: 1.5ns, max_requests: 3 }"), 3, "1.5ns",
	          "limit.window: '1.5ns': not a whole number of ns");
	one_error(RULE("", "{ algorithm: fixed_window, window: 213504d, max_requests: 3 }"), 3, "213504d",
	          "out of range (above 2^64 - 1 ns)");
	one_error(RULE("", "{ algorithm: token_bucket, rate: +5/s, burst: 2 }"), 3, "+5/s",
	          "limit.rate: '+5/s': takes no sign");
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50, burst: 2 }"), 3, "50,",
	          "limit.rate: '50': a rate needs a period");
	one_error(RULE("    adaptive: { signal: p99_latency, baseline: 5ms, step: 10, floor: 1 }\n",
	               TB),
	          4, "10,", "a percentage needs its '%'");
	one_error(RULE("    adaptive: { signal: p99_latency, baseline: 5ms, step: 2.5%, floor: 1 }\n",
	               TB),
	          4, "2.5%", "adaptive.step: a whole percentage in 1%..100%");
	one_error(RULE("    adaptive: { signal: p99_latency, baseline: 5ms, factor: 1.0000001, floor: 1 }\n",
	               TB),
	          4, "1.0000001", "adaptive.factor: '1.0000001' is finer than one part per million");
	one_error(RULE("    adaptive: { signal: p99_latency, baseline: 5ms, factor: 1.0, floor: 1 }\n",
	               TB),
	          4, "1.0", "adaptive.factor: must be above 1");
}

Test(rules, duplicate_rule_id)
{
	one_error("rules:\n  - id: a\n    limit: " TB "\n  - id: b\n    limit: " TB
	          "\n  - id: a\n    limit: " TB "\n",
	          6, "a", "duplicate rule id 'a' (first at line 2 col 9)");
}

Test(rules, unknown_algorithm_and_dimension)
{
	one_error(RULE("", "{ algorithm: rainbow, rate: 50/s, burst: 20 }"), 3, "rainbow",
	          "limit.algorithm: 'rainbow': unknown algorithm (one of: fixed window gcra");
	one_error(RULE("    dimensions: [ip, cookie]\n", TB), 4, "cookie", "unknown dimension 'cookie'");
	one_error(RULE("    dimensions: [ip, \"header:\"]\n", TB), 4, "\"header:\"", "unknown dimension");
	one_error(RULE("    dimensions: [\"header:X Y\"]\n", TB), 4, "\"header:X Y\"",
	          "header name: 'X Y' holds a character outside an HTTP token");
	one_error(RULE("    dimensions: [ip, ip]\n", TB), 4, "ip]",
	          "'ip' listed twice (first at line 4 col 18)");
	one_error(RULE("    dimensions: [\"header:X-Key\", \"header:x-key\"]\n", TB), 4, "\"header:x-key\"",
	          "listed twice");
	one_error(RULE("    dimensions: [global, ip]\n", TB), 4, "[global", "cannot be combined");
	one_error(RULE("    dimensions: []\n", TB), 4, "[]", "dimensions: empty list");
}

Test(rules, refused_by_the_algorithm)
{
	/* per key: the keyed validator (b * T = 3.6e18 ns, past keyed's 2^61 - 1
	 * but within gcra.h's 2^62 - 1) */
	int rc;
	sluice_rules_errors_t *e = load_bad(
		"rules:\n  - id: r\n    dimensions: [ip]\n"
		"    limit: { algorithm: token_bucket, rate: 1/h, burst: 1000000 }\n",
		&rc);
	cr_assert_eq(rc, 1);
	cr_assert_eq(e->errors[0].mark.line, 2, "at the rule's line");
	cr_assert_eq(e->errors[0].mark.col, 5);
	cr_assert_eq(e->errors[0].code, SLUICE_EBURST);
	cr_assert(strstr(e->errors[0].msg, "rule 'r': token_bucket parameters refused by "
	                                   "sluice_keyed_config_check: SLUICE_EBURST"),
	          "%s", e->errors[0].msg);
	sluice_rules_errors_free(e);

	/* the same rule without dimensions is a plain GCRA: gcra.h's 2^62 allows it */
	sluice_rules_free((sluice_rules_t *)load_ok(
		RULE("", "{ algorithm: token_bucket, rate: 1/h, burst: 1000000 }"), NULL));

	/* global: sluice_limiter_config_check (the window's W % N) */
	one_error(RULE("", "{ algorithm: sliding_window, window: 1m, max_requests: 3, buckets: 7 }"),
	          2, "id", "refused by sluice_limiter_config_check: SLUICE_EWINDOW");
	/* keys: the keyed capacity, key length, policy */
	one_error(RULE("    dimensions: [ip]\n    keys: { capacity: 4 }\n", TB), 2, "id",
	          "SLUICE_ECAPACITY");
	one_error(RULE("    dimensions: [ip]\n    keys: { key_max: 241 }\n", TB), 2, "id",
	          "SLUICE_EKEYLEN");
	one_error(RULE("    dimensions: [ip]\n    keys: { when_full: evict }\n",
	               "{ algorithm: concurrency, max_inflight: 3 }"),
	          2, "id", "SLUICE_EPOLICY");
	/* keyed's own ranges, narrower than the module's: FIXED L <= 2^24 - 1 */
	one_error(RULE("    dimensions: [user]\n",
	               "{ algorithm: fixed_window, window: 1h, max_requests: 16777216 }"),
	          2, "id", "sluice_keyed_config_check: SLUICE_ELIMIT");
	sluice_rules_free((sluice_rules_t *)load_ok(
		RULE("", "{ algorithm: fixed_window, window: 1h, max_requests: 16777216 }"), NULL));
	/* a leaky shaper (queue fallback) takes its queue as a time, not a depth */
	one_error(RULE("    fallback: { type: queue, max_wait: 1s }\n",
	               "{ algorithm: leaky_bucket, rate: 5/s, depth: 3 }"),
	          2, "id", "SLUICE_EBURST");
}

Test(rules, resolution_against_the_clock)
{
	const char *y = RULE("    dimensions: [ip]\n",
	                     "{ algorithm: sliding_window, window: 1ms, max_requests: 3, buckets: 10 }");
	/* a 1 ns clock: 100 us buckets are fine */
	sluice_rules_free((sluice_rules_t *)load_ok(y, NULL));
	/* the coarse clock (a kernel tick, >= 1 ms here): the keyed attach refuses */
	sluice_rules_options_t opt = { .clock = &sluice_clock_coarse };
	/* a jiffy: 1 ms at HZ = 1000, coarser below */
	cr_assert_gt(sluice_clock_resolution_ns(&sluice_clock_coarse), 100000);
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	int rc = sluice_rules_load_buffer("t.yaml", y, strlen(y), &opt, &r, &e);
	cr_assert_eq(rc, 1);
	cr_assert_eq(e->errors[0].code, SLUICE_ERESOLUTION, "%s", e->errors[0].msg);
	cr_assert(strstr(e->errors[0].msg, "sluice_keyed_config_check"), "%s", e->errors[0].msg);
	sluice_rules_errors_free(e);
	/* global: the module's own init */
	const char *g = RULE("", "{ algorithm: fixed_window, window: 100us, max_requests: 3 }");
	rc = sluice_rules_load_buffer("t.yaml", g, strlen(g), &opt, &r, &e);
	cr_assert_eq(rc, 1);
	cr_assert_eq(e->errors[0].code, SLUICE_ERESOLUTION, "%s", e->errors[0].msg);
	sluice_rules_errors_free(e);
}

Test(rules, status_range)
{
	one_error(RULE("    fallback: { type: reject, status: 399 }\n", TB), 4, "399",
	          "399 is not an HTTP error status (400-599)");
	one_error(RULE("    fallback: { type: reject, status: 600 }\n", TB), 4, "600", "600 is not");
	one_error(RULE("    fallback: { type: stale, status: 503 }\n", TB), 4, "503",
	          "status is not used with type stale");
	const sluice_rules_t *r;
	r = load_ok(RULE("    fallback: { type: reject, status: 400 }\n", TB), NULL);
	cr_assert_eq(r->rules[0].fallback.status, 400);
	sluice_rules_free((sluice_rules_t *)r);
	r = load_ok(RULE("    fallback: { type: reject, status: 599 }\n", TB), NULL);
	cr_assert_eq(r->rules[0].fallback.status, 599);
	sluice_rules_free((sluice_rules_t *)r);
}

Test(rules, section_rules)
{
	one_error(RULE("    fallback: { type: queue, max_wait: 1s }\n",
	               "{ algorithm: fixed_window, window: 1s, max_requests: 3 }"),
	          4, "{ type", "queue needs an algorithm that books");
	one_error(RULE("    fallback: { type: queue, max_wait: 1s }\n    dimensions: [ip]\n", TB), 4, "{ type",
	          "queue needs a global rule");
	one_error(RULE("    fallback: { type: queue }\n", TB), 4, "{ type", "'max_wait' is missing");
	one_error(RULE("    fallback: { type: reject, max_wait: 1s }\n", TB), 4, "1s",
	          "max_wait is only for type queue");
	one_error(RULE("    dimensions: [ip]\n",
	               "{ algorithm: sliding_log, window: 1s, max_requests: 3 }"),
	          3, "{ algorithm", "sliding_log is not per key");
	one_error(RULE("    keys: { capacity: 64 }\n", TB), 4, "{ capacity", "no per-key dimension");
	one_error(RULE("", "{ algorithm: sliding_window, window: 1s, max_requests: 3 }"), 3, "{ algorithm",
	          "'buckets' is missing (sliding_window needs it)");
	one_error(RULE("", "{ algorithm: fixed_window, window: 1s, max_requests: 3, burst: 2 }"), 3,
	          "2 }", "'burst' is not a parameter of fixed_window");
	one_error("rules:\n  - limit: " TB "\n", 2, "limit", "'id' is missing");
	one_error("rules:\n  - id: r\n", 2, "id", "'limit' is missing");
	one_error(RULE("", "{ rate: 5/s }"), 3, "{ rate", "'algorithm' is missing");
	one_error(RULE("    mode: dry-run\n", TB), 4, "dry-run", "mode: unknown value 'dry-run'");
	one_error(RULE("    on_error: open\n", TB), 4, "open", "on_error: unknown value 'open'");
	one_error(RULE("", TB) "  - id: \"a b\"\n    limit: " TB "\n", 4, "\"a b\"",
	          "id: 'a b' holds a character outside");
	one_error("version: 2\nrules: []\n", 1, "2", "version: 2 is not a version");
	one_error("rules: []\nrules: []\n", 2, "rules", "duplicate key 'rules'");
	one_error("version: 1\n", 1, "version", "'rules' is missing");
}

Test(rules, match_rules)
{
	one_error(RULE("    match: { path: api }\n", TB), 4, "api", "match.path: must start with '/'");
	one_error(RULE("    match: { path: /a, prefix: /b }\n", TB), 4, "/b", "exclude each other");
	one_error(RULE("    match: { path: \"/a?b=1\" }\n", TB), 4, "\"/a?b=1\"", "outside visible ASCII");
	one_error(RULE("    match: { methods: [GET, post] }\n", TB), 4, "post", "unknown value 'post'");
	one_error(RULE("    match: { methods: [GET, GET] }\n", TB), 4, "GET]", "GET listed twice");
	one_error(RULE("    match: { methods: GET }\n", TB), 4, "GET", "expected a list");
	one_error(RULE("    match: { methods: [] }\n", TB), 4, "[]", "empty list");
	one_error(RULE("    match: { host: \"a b\" }\n", TB), 4, "\"a b\"", "match.host");
}

Test(rules, adaptive_rules)
{
	one_error(RULE("    adaptive: { signal: p99_latency, baseline: 5ms, floor: 51 }\n", TB), 4,
	          "{ signal", "adaptive.floor: 51 is above the configured limit 50");
	one_error(RULE("    adaptive: { signal: cpu, baseline: 5ms, floor: 5 }\n", TB), 4, "cpu",
	          "adaptive.signal: unknown value 'cpu'");
	one_error(RULE("    adaptive: { signal: p99_latency, floor: 5 }\n", TB), 4, "{ signal",
	          "'baseline' is missing");
	one_error(RULE("    adaptive: { signal: p99_latency, baseline: 5ms }\n", TB), 4, "{ signal",
	          "'floor' is missing");
	one_error(RULE("    adaptive: { signal: error_ratio, baseline: 5ms, floor: 5 }\n", TB), 4,
	          "5ms", "adaptive.baseline: '5ms': not a number or percentage");
	one_error(RULE("    adaptive: { signal: error_ratio, baseline: 101%, floor: 5 }\n", TB), 4,
	          "101%", "an error ratio in");
	one_error(RULE("    adaptive: { signal: p99_latency, baseline: 5ms, windows: 1001, floor: 5 }\n",
	               TB),
	          4, "1001", "adaptive.windows: must be at most 1000");
	one_error(RULE("    adaptive: { signal: p99_latency, baseline: 5ms, floor: 5 }\n",
	               "{ algorithm: decay, limit: 10, half_life: 1s }"),
	          4, "{ signal", "the limit of decay cannot change live");
}

/* ---- YAML-level refusals and syntax errors -------------------------- */

Test(rules, anchors_aliases_tags)
{
	one_error("rules:\n  - &r id: a\n    limit: " TB "\n", 2, "&r", "anchors (&r) are not supported");
	int rc;
	const char *y = "rules:\n  - id: a\n    limit: &l " TB "\n  - id: b\n    limit: *l\n";
	sluice_rules_errors_t *e = load_bad(y, &rc);
	cr_assert_eq(rc, 2, "the anchor and the alias, nothing else");
	cr_assert_eq(e->errors[0].mark.line, 3);
	cr_assert_eq(e->errors[0].mark.col, col_of(y, 3, "&l"));
	cr_assert(strstr(e->errors[0].msg, "anchors (&l)"));
	cr_assert_eq(e->errors[1].mark.line, 5);
	cr_assert_eq(e->errors[1].mark.col, col_of(y, 5, "*l"));
	cr_assert(strstr(e->errors[1].msg, "aliases (*l) are not supported"));
	sluice_rules_errors_free(e);
	one_error(RULE("", "{ algorithm: token_bucket, rate: 50/s, burst: !!int 20 }"), 3, "!!int",
	          "tags (tag:yaml.org,2002:int) are not supported");
	one_error("rules: []\n---\nrules: []\n", 2, "---", "a second document");
}

Test(rules, syntax_errors)
{
	one_error("rules:\n  - id: [\n", 3, "", "YAML syntax error: did not find expected node content");
	one_error("rules:\n  - id: a\n   limit: 3\n", 3, "limit", "YAML syntax error");
	one_error("rules: [\n", 2, "", "YAML syntax error");
	/* the last line has no line break: libyaml's mark is on the next line,
	 * which the file does not have; the end of the input is named (found
	 * by fuzz_rules, corpus/rules/crash-syntax-error-mark-past-last-line) */
	int rc;
	sluice_rules_errors_t *e = load_bad("rules:\n  -rules:\n  - hm\nd", &rc);
	cr_assert_eq(rc, 1);
	cr_assert_eq(e->errors[0].mark.line, 4, "line %u", e->errors[0].mark.line);
	cr_assert_eq(e->errors[0].mark.col, 2, "col %u: just past the 'd'", e->errors[0].mark.col);
	cr_assert(strstr(e->errors[0].msg, "could not find expected ':' (while scanning a simple "
	                                   "key at line 4 col 1)"),
	          "%s", e->errors[0].msg);
	sluice_rules_errors_free(e);
	/* the same with a two-byte character before: libyaml's mark.index
	 * counts characters, so it cannot tell the end from the byte length
	 * (fuzz_rules, corpus/rules/crash-syntax-error-mark-past-end-multibyte) */
	e = load_bad("rules:es:\n  \xdf\xa4\nhost", &rc);
	cr_assert_eq(rc, 1);
	cr_assert_eq(e->errors[0].mark.line, 3, "line %u", e->errors[0].mark.line);
	cr_assert_eq(e->errors[0].mark.col, 5, "col %u: just past 'host'", e->errors[0].mark.col);
	sluice_rules_errors_free(e);
	/* libyaml's reader: invalid UTF-8 at byte 13 (line 2, after "  - id: ") */
	one_error("rules:\n  - id: \xff\n", 2, "\xff", "YAML: invalid leading UTF-8 octet");
	one_error("", 1, "", "empty file");
	one_error("# nothing\n", 1, "", "empty file");
}

/* ---- caps ------------------------------------------------------------ */

Test(rules, input_cap)
{
	size_t cap = SLUICE_RULES_MAX_BYTES;
	char *big = malloc(cap + 1);
	cr_assert_not_null(big);
	/* a valid file padded with a comment to exactly the cap loads */
	const char *head = "rules: []\n#";
	memset(big, 'x', cap + 1);
	memcpy(big, head, strlen(head));
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	cr_assert_eq(sluice_rules_load_buffer("big", big, cap, NULL, &r, &e), 0);
	cr_assert_eq(r->count, 0);
	sluice_rules_free(r);
	/* one byte more: refused at 0:0, not parsed */
	cr_assert_eq(sluice_rules_load_buffer("big", big, cap + 1, NULL, &r, &e), 1);
	cr_assert_null(r);
	cr_assert_eq(e->errors[0].mark.line, 0);
	cr_assert(strstr(e->errors[0].msg, "above the cap of 4194304 bytes"), "%s", e->errors[0].msg);
	char line[256];
	sluice_rules_error_text(e, 0, line, sizeof(line));
	cr_assert_str_eq(line, "big: 4194305 bytes, above the cap of 4194304 bytes");
	sluice_rules_errors_free(e);
	/* a smaller cap from the options; one above the largest is EINVAL */
	sluice_rules_options_t opt = { .max_bytes = 16 };
	cr_assert_eq(sluice_rules_load_buffer("b", big, 17, &opt, &r, &e), 1);
	sluice_rules_errors_free(e);
	opt.max_bytes = cap + 1;
	cr_assert_eq(sluice_rules_load_buffer("b", big, 1, &opt, &r, &e), SLUICE_EINVAL);
	free(big);
}

Test(rules, file_cap)
{
	char path[] = "/tmp/sluice-rules-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	FILE *f = fdopen(fd, "w");
	fputs("rules: []\n#", f);
	for (int i = 0; i < 40; i++)
		fputc('x', f);
	fclose(f);
	sluice_rules_options_t opt = { .max_bytes = 16 };
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	cr_assert_eq(sluice_rules_load_file(path, &opt, &r, &e), 1);
	char line[256];
	sluice_rules_error_text(e, 0, line, sizeof(line));
	char want[256];
	snprintf(want, sizeof(want), "%s: larger than the cap of 16 bytes", path);
	cr_assert_str_eq(line, want);
	sluice_rules_errors_free(e);
	opt.max_bytes = 0;
	cr_assert_eq(sluice_rules_load_file(path, &opt, &r, &e), 0);
	sluice_rules_free(r);
	unlink(path);
}

Test(rules, depth_cap)
{
	/* rules: [[[[ ... ]]]]: 64 levels deep is read, 65 is refused */
	for (int depth = 63; depth <= 64; depth++) {
		char y[512];
		int o = snprintf(y, sizeof(y), "rules: ");
		for (int i = 0; i < depth; i++)
			y[o++] = '[';
		for (int i = 0; i < depth; i++)
			y[o++] = ']';
		y[o++] = '\n';
		y[o] = 0;
		int rc;
		sluice_rules_errors_t *e = load_bad(y, &rc);
		cr_assert_not_null(e);
		/* the root mapping is level 1, rules' list level 2 */
		if (depth + 1 <= (int)SLUICE_RULES_DEPTH_MAX) {
			cr_assert_eq(rc, 1);
			cr_assert(strstr(e->errors[0].msg, "rule: expected a mapping, found a list"), "%s",
			          e->errors[0].msg);
		} else {
			cr_assert_eq(rc, 1, "one error: nothing below the cap is kept");
			cr_assert(strstr(e->errors[0].msg, "nested deeper than 64 levels"), "%s",
			          e->errors[0].msg);
			cr_assert_eq(e->errors[0].mark.col, 8 + 63);
		}
		sluice_rules_errors_free(e);
	}
}

Test(rules, rule_and_error_caps)
{
	size_t n = SLUICE_RULES_RULES_MAX + 1;
	size_t sz = 16 + n * 96;
	char *y = malloc(sz);
	size_t o = (size_t)snprintf(y, sz, "rules:\n");
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(y + o, sz - o, "  - { id: r%zu, limit: " TB " }\n", i);
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	cr_assert_eq(sluice_rules_load_buffer("t", y, o, NULL, &r, &e), 1);
	cr_assert(strstr(e->errors[0].msg, "10001 rules, at most 10000"), "%s", e->errors[0].msg);
	sluice_rules_errors_free(e);
	/* 10,000 load */
	size_t last = o - strlen(strrchr(y, '\n') ? "" : "");
	(void)last;
	char *cut = y;
	for (size_t i = 0; i < n; i++)
		cut = strchr(cut, '\n') + 1; /* after the last-but-one rule's line */
	cr_assert_eq(sluice_rules_load_buffer("t", y, (size_t)(cut - y), NULL, &r, &e), 0);
	cr_assert_eq(r->count, SLUICE_RULES_RULES_MAX);
	cr_assert_str_eq(r->rules[9999].id, "r9999");
	sluice_rules_free(r);

	/* 150 bad rules: 100 errors kept, in file order, 50 counted */
	o = (size_t)snprintf(y, sz, "rules:\n");
	for (size_t i = 0; i < 150; i++)
		o += (size_t)snprintf(y + o, sz - o, "  - { id: r%zu, limit: " TB ", x: 1 }\n", i);
	cr_assert_eq(sluice_rules_load_buffer("t", y, o, NULL, &r, &e), SLUICE_RULES_ERRORS_MAX);
	cr_assert_eq(e->count, SLUICE_RULES_ERRORS_MAX);
	cr_assert_eq(e->dropped, 50);
	for (size_t i = 0; i < e->count; i++)
		cr_assert_eq(e->errors[i].mark.line, i + 2);
	sluice_rules_errors_free(e);
	free(y);
}

Test(rules, every_error_collected)
{
	/* one file, errors in several rules and sections: all reported, in file order */
	int rc;
	const char *y = "rules:\n"
	                "  - id: a\n"
	                "    limit: { algorithm: token_bucket, rate: 5/x, burst: 0 }\n"
	                "    mode: loud\n"
	                "  - id: b\n"
	                "    match: { path: nope }\n"
	                "    limit: { algorithm: nope }\n";
	sluice_rules_errors_t *e = load_bad(y, &rc);
	cr_assert_eq(rc, 5);
	struct {
		uint32_t line;
		const char *at, *msg;
	} want[5] = { { 3, "5/x", "limit.rate: '5/x': unknown unit" }, { 3, "0 }", "limit.burst: must be at least 1" },
		      { 4, "loud", "mode: unknown value" }, { 6, "nope", "match.path: must start" },
		      { 7, "nope", "limit.algorithm: 'nope': unknown algorithm" } };
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(e->errors[i].mark.line, want[i].line, "%d: %s", i, e->errors[i].msg);
		cr_assert_eq(e->errors[i].mark.col, col_of(y, want[i].line, want[i].at), "%d: %s", i,
		             e->errors[i].msg);
		cr_assert(strstr(e->errors[i].msg, want[i].msg), "%d: %s", i, e->errors[i].msg);
	}
	sluice_rules_errors_free(e);
}

Test(rules, bad_arguments)
{
	sluice_rules_t *r;
	sluice_rules_errors_t *e;
	cr_assert_eq(sluice_rules_load_buffer("t", NULL, 3, NULL, &r, &e), SLUICE_EINVAL);
	cr_assert_eq(sluice_rules_load_buffer("t", "rules: []", 9, NULL, NULL, &e), SLUICE_EINVAL);
	cr_assert_eq(sluice_rules_load_file(NULL, NULL, &r, &e), SLUICE_EINVAL);
	/* errs may be NULL: the count is still returned */
	cr_assert_eq(sluice_rules_load_buffer("t", "x: 1", 4, NULL, &r, NULL), 2);
	cr_assert_eq(sluice_rules_error_text(NULL, 0, NULL, 0), SLUICE_EINVAL);
	/* NULL name: "<buffer>" */
	cr_assert_eq(sluice_rules_load_buffer(NULL, "x: 1", 4, NULL, &r, &e), 2);
	char line[128];
	int n = sluice_rules_error_text(e, 0, line, 8);
	cr_assert_gt(n, 8, "the length it needs");
	cr_assert_str_eq(line, "<buffer");
	cr_assert_eq(sluice_rules_error_text(e, 2, line, sizeof(line)), SLUICE_EINVAL);
	sluice_rules_errors_free(e);
	sluice_rules_free(NULL);
	sluice_rules_errors_free(NULL);
}

/* ---- valid files to the exact description ---------------------------- */

static void mark_is(sluice_rules_mark_t m, uint32_t line, uint32_t col)
{
	cr_assert_eq(m.line, line, "line %u, want %u", m.line, line);
	cr_assert_eq(m.col, col, "col %u, want %u", m.col, col);
}

Test(rules, issue_example_exactly)
{
	const char *y =
		"rules:\n"
		"  - id: order-create\n"
		"    match: { path: /api/order/create, methods: [POST] }\n"
		"    dimensions: [ip, user]\n"
		"    limit: { algorithm: token_bucket, rate: 50/s, burst: 20 }\n"
		"    keys: { capacity: 100000, when_full: reject }\n"
		"    fallback: { type: reject, status: 429 }\n"
		"    mode: enforce\n"
		"    on_error: allow\n"
		"  - id: product-list\n"
		"    match: { prefix: /api/product/ }\n"
		"    limit: { algorithm: sliding_window, window: 1m, max_requests: 300, buckets: 60 }\n"
		"    adaptive: { signal: p99_latency, baseline: 50ms, factor: 1.5, windows: 3, step: 10%, floor: 120 }\n";
	const sluice_rules_t *rs = load_ok(y, NULL);
	cr_assert_str_eq(rs->file, "t.yaml");
	cr_assert_eq(rs->count, 2);

	const sluice_rule_t *r = &rs->rules[0];
	sluice_rule_t want0 = { 0 };
	cr_assert_str_eq(r->id, "order-create");
	mark_is(r->mark, 2, 5);
	mark_is(r->id_mark, 2, 9);
	cr_assert_eq(r->match.path_kind, SLUICE_RULES_PATH_EXACT);
	cr_assert_str_eq(r->match.path, "/api/order/create");
	cr_assert_null(r->match.host);
	cr_assert_eq(r->match.methods, SLUICE_RULES_METHOD(POST));
	mark_is(r->match.mark, 3, 12);
	cr_assert_eq(r->ndims, 2);
	cr_assert_eq(r->dims[0].kind, SLUICE_RULES_DIM_IP);
	cr_assert_null(r->dims[0].name);
	mark_is(r->dims[0].mark, 4, 18);
	cr_assert_eq(r->dims[1].kind, SLUICE_RULES_DIM_USER);
	mark_is(r->dims[1].mark, 4, 22);
	for (uint32_t i = 2; i < SLUICE_RULES_DIMS_MAX; i++)
		cr_assert_eq(r->dims[i].kind, 0);
	cr_assert_eq(r->per_key, 1);
	want0.limit = (sluice_rules_limit_t){ .algo = SLUICE_ALGO_GCRA, .rate = 50,
		                              .period_ns = 1000000000, .burst = 20,
		                              .mark = { 5, 12 } };
	cr_assert_eq(memcmp(&r->limit, &want0.limit, sizeof(r->limit)), 0, "limit");
	cr_assert_eq(r->keys.capacity, 100000);
	cr_assert_eq(r->keys.policy, SLUICE_KEYED_REJECT);
	cr_assert_eq(r->keys.key_max, 32);
	cr_assert_eq(r->keys.flags, 0);
	sluice_keyed_config_t kc = { .algo = SLUICE_ALGO_GCRA, .capacity = 100000, .rate = 50,
		                     .period_ns = 1000000000, .burst = 20 };
	cr_assert_eq(r->keys.region_bytes, sluice_keyed_region_bytes(&kc));
	cr_assert_gt(r->keys.region_bytes, 0);
	mark_is(r->keys.mark, 6, 11);
	cr_assert_eq(r->fallback.type, SLUICE_RULES_FALLBACK_REJECT);
	cr_assert_eq(r->fallback.status, 429);
	cr_assert_eq(r->fallback.max_wait_ns, 0);
	mark_is(r->fallback.mark, 7, 15);
	cr_assert_eq(r->mode, SLUICE_RULES_ENFORCE);
	cr_assert_eq(r->on_error, SLUICE_RULES_FAIL_OPEN);
	cr_assert_eq(r->adaptive.enabled, 0);

	r = &rs->rules[1];
	cr_assert_str_eq(r->id, "product-list");
	mark_is(r->mark, 10, 5);
	cr_assert_eq(r->match.path_kind, SLUICE_RULES_PATH_PREFIX);
	cr_assert_str_eq(r->match.path, "/api/product/");
	cr_assert_eq(r->match.methods, 0);
	cr_assert_eq(r->ndims, 0);
	cr_assert_eq(r->per_key, 0);
	sluice_rules_limit_t l1 = { .algo = SLUICE_ALGO_WINDOW, .limit = 300,
		                    .window_ns = 60000000000ULL, .buckets = 60, .mark = { 12, 12 } };
	cr_assert_eq(memcmp(&r->limit, &l1, sizeof(l1)), 0, "limit");
	cr_assert_eq(r->keys.region_bytes, 0, "a global rule has no table");
	mark_is(r->keys.mark, 0, 0);
	cr_assert_eq(r->fallback.type, SLUICE_RULES_FALLBACK_REJECT, "default fallback");
	cr_assert_eq(r->fallback.status, 429);
	mark_is(r->fallback.mark, 0, 0);
	sluice_rules_adaptive_t a1 = { .enabled = 1, .signal = SLUICE_RULES_SIGNAL_P99_LATENCY,
		                       .baseline_ns = 50000000, .factor_ppm = 1500000, .windows = 3,
		                       .window_ns = 10000000000ULL, .step_ppm = 100000, .floor = 120,
		                       .mark = { 13, 15 } };
	cr_assert_eq(memcmp(&r->adaptive, &a1, sizeof(a1)), 0, "adaptive");
	sluice_rules_free((sluice_rules_t *)rs);
}

Test(rules, values_in_sluice_units)
{
	const char *y =
		"rules:\n"
		"  - id: a.b_c-1\n"
		"    match: { host: api.example.com, path: \"/x\", methods: [GET, HEAD, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH, POST] }\n"
		"    dimensions: [route, \"header:X-Api-Key\", \"query:tenant\"]\n"
		"    limit: { algorithm: token_bucket, rate: \"5/250ms\", burst: 1 }\n"
		"    keys: { capacity: 8, when_full: evict, key_max: 240, hash_long_keys: true }\n"
		"    mode: shadow\n"
		"    on_error: reject\n"
		"    adaptive: { signal: error_ratio, baseline: 0.5%, factor: 2, windows: 1000, window: 250ms, step: 100%, floor: 1 }\n"
		"  - id: q\n"
		"    limit: { algorithm: token_bucket, rate: 7/h, burst: 1 }\n"
		"    fallback: { type: queue, max_wait: 1d }\n"
		"  - { id: l, limit: { algorithm: leaky_bucket, rate: 3/m, depth: 4 }, dimensions: [global] }\n"
		"  - { id: s, limit: { algorithm: leaky_bucket, rate: 3/1s }, fallback: { type: queue, max_wait: 5us, status: 503 } }\n"
		"  - { id: f, limit: { algorithm: fixed_window, window: 2h, max_requests: 9 }, fallback: { type: stale } }\n"
		"  - { id: g, limit: { algorithm: sliding_log, window: 1000ns, max_requests: 2 } }\n"
		"  - { id: w, limit: { algorithm: warmup, rate: 10/s, warmup: 3s } }\n"
		"  - { id: d, limit: { algorithm: decay, limit: 5, half_life: 2ms } }\n"
		"  - { id: i, limit: { algorithm: concurrency, max_inflight: 4611686018427387904 } }\n";
	const sluice_rules_t *rs = load_ok(y, NULL);
	cr_assert_eq(rs->count, 9);
	const sluice_rule_t *r = &rs->rules[0];
	cr_assert_str_eq(r->id, "a.b_c-1");
	cr_assert_str_eq(r->match.host, "api.example.com");
	cr_assert_eq(r->match.methods, 0x1ff);
	cr_assert_eq(r->ndims, 3);
	cr_assert_eq(r->dims[0].kind, SLUICE_RULES_DIM_ROUTE);
	cr_assert_eq(r->dims[1].kind, SLUICE_RULES_DIM_HEADER);
	cr_assert_str_eq(r->dims[1].name, "X-Api-Key");
	cr_assert_eq(r->dims[2].kind, SLUICE_RULES_DIM_QUERY);
	cr_assert_str_eq(r->dims[2].name, "tenant");
	cr_assert_eq(r->limit.rate, 5);
	cr_assert_eq(r->limit.period_ns, 250000000);
	cr_assert_eq(r->keys.capacity, 8);
	cr_assert_eq(r->keys.policy, SLUICE_KEYED_EVICT);
	cr_assert_eq(r->keys.key_max, 240);
	cr_assert_eq(r->keys.flags, SLUICE_KEYED_HASH_LONG_KEYS);
	cr_assert_eq(r->mode, SLUICE_RULES_SHADOW);
	cr_assert_eq(r->on_error, SLUICE_RULES_FAIL_CLOSED);
	cr_assert_eq(r->adaptive.signal, SLUICE_RULES_SIGNAL_ERROR_RATIO);
	cr_assert_eq(r->adaptive.baseline_ppm, 5000);
	cr_assert_eq(r->adaptive.baseline_ns, 0);
	cr_assert_eq(r->adaptive.factor_ppm, 2000000);
	cr_assert_eq(r->adaptive.windows, 1000);
	cr_assert_eq(r->adaptive.window_ns, 250000000);
	cr_assert_eq(r->adaptive.step_ppm, 1000000);
	cr_assert_eq(r->adaptive.floor, 1);

	r = &rs->rules[1];
	cr_assert_eq(r->limit.period_ns, 3600000000000ULL);
	cr_assert_eq(r->fallback.type, SLUICE_RULES_FALLBACK_QUEUE);
	cr_assert_eq(r->fallback.max_wait_ns, 86400000000000ULL);
	cr_assert_eq(r->fallback.status, 429);
	r = &rs->rules[2];
	cr_assert_eq(r->limit.algo, SLUICE_ALGO_LEAKY);
	cr_assert_eq(r->limit.period_ns, 60000000000ULL);
	cr_assert_eq(r->limit.depth, 4);
	cr_assert_eq(r->ndims, 1);
	cr_assert_eq(r->dims[0].kind, SLUICE_RULES_DIM_GLOBAL);
	cr_assert_eq(r->per_key, 0);
	r = &rs->rules[3];
	cr_assert_eq(r->limit.period_ns, 1000000000);
	cr_assert_eq(r->fallback.max_wait_ns, 5000);
	cr_assert_eq(r->fallback.status, 503);
	r = &rs->rules[4];
	cr_assert_eq(r->limit.algo, SLUICE_ALGO_FIXED);
	cr_assert_eq(r->limit.window_ns, 7200000000000ULL);
	cr_assert_eq(r->fallback.type, SLUICE_RULES_FALLBACK_STALE);
	cr_assert_eq(r->fallback.status, 0, "stale has no status");
	r = &rs->rules[5];
	cr_assert_eq(r->limit.algo, SLUICE_ALGO_LOG);
	cr_assert_eq(r->limit.window_ns, 1000);
	r = &rs->rules[6];
	cr_assert_eq(r->limit.algo, SLUICE_ALGO_WARMUP);
	cr_assert_eq(r->limit.warmup_ns, 3000000000ULL);
	r = &rs->rules[7];
	cr_assert_eq(r->limit.algo, SLUICE_ALGO_DECAY);
	cr_assert_eq(r->limit.half_life_ns, 2000000);
	cr_assert_eq(r->limit.limit, 5);
	r = &rs->rules[8];
	cr_assert_eq(r->limit.algo, SLUICE_ALGO_INFLIGHT);
	cr_assert_eq(r->limit.limit, 1ULL << 62);
	sluice_rules_free((sluice_rules_t *)rs);
}

Test(rules, empty_rule_set)
{
	const sluice_rules_t *r = load_ok("rules: []\n", NULL);
	cr_assert_eq(r->count, 0);
	cr_assert_not_null(r->rules);
	sluice_rules_free((sluice_rules_t *)r);
}

Test(rules, algo_names)
{
	cr_assert_str_eq(sluice_rules_algo_name(SLUICE_ALGO_GCRA), "token_bucket");
	cr_assert_str_eq(sluice_rules_algo_name(SLUICE_ALGO_INFLIGHT), "concurrency");
	cr_assert_null(sluice_rules_algo_name(SLUICE_ALGO_NONE));
	cr_assert_null(sluice_rules_algo_name(SLUICE_ALGO_COMPOSITE));
}

/* The complete example of docs/rules.md and the README, from the tree. */
Test(rules, example_file)
{
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	int rc = sluice_rules_load_file(RULES_EXAMPLE, NULL, &r, &e);
	if (e)
		for (size_t i = 0; i < e->count; i++)
			cr_log_error("%u:%u: %s", e->errors[i].mark.line, e->errors[i].mark.col,
			             e->errors[i].msg);
	cr_assert_eq(rc, 0);
	cr_assert_eq(r->count, 9);
	/* one rule of each algorithm sluice has (the composite is what
	 * several matching rules make, not a rule of its own) */
	uint32_t seen = 0;
	for (size_t i = 0; i < r->count; i++)
		seen |= 1u << r->rules[i].limit.algo;
	uint32_t all = 0;
#define ALL_ALGOS(ALGO, name) all |= 1u << SLUICE_ALGO_##ALGO;
	SLUICE_ALGOS(ALL_ALGOS)
#undef ALL_ALGOS
	cr_assert_eq(seen, all);
	cr_assert_str_eq(r->rules[0].id, "order-create");
	cr_assert_eq(r->rules[2].limit.algo, SLUICE_ALGO_LEAKY);
	cr_assert_eq(r->rules[2].fallback.type, SLUICE_RULES_FALLBACK_QUEUE);
	sluice_rules_free(r);
	/* the errors file of the command's test loads to its eleven errors */
	rc = sluice_rules_load_file(RULES_DATA "/errors.yaml", NULL, &r, &e);
	cr_assert_eq(rc, 11);
	sluice_rules_errors_free(e);
}

/* Loads share nothing: two threads load at once, each its own input, and
 * each gets what a load alone gets (ThreadSanitizer checks the rest). */
static void *load_loop(void *arg)
{
	const char *path = arg;
	for (int i = 0; i < 20; i++) {
		sluice_rules_t *r = NULL;
		sluice_rules_errors_t *e = NULL;
		int rc = sluice_rules_load_file(path, NULL, &r, &e);
		if (strstr(path, "errors.yaml") ? rc != 11 || e->count != 11 : rc != 0 || r->count != 9)
			return (void *)1;
		sluice_rules_free(r);
		sluice_rules_errors_free(e);
	}
	return NULL;
}

Test(rules, reentrant)
{
	pthread_t a, b;
	void *ra, *rb;
	cr_assert_eq(pthread_create(&a, NULL, load_loop, (void *)RULES_EXAMPLE), 0);
	cr_assert_eq(pthread_create(&b, NULL, load_loop, (void *)(RULES_DATA "/errors.yaml")), 0);
	pthread_join(a, &ra);
	pthread_join(b, &rb);
	cr_assert_null(ra);
	cr_assert_null(rb);
}

/* rules.h's GUARANTEE: what a load accepts, the engine can build (each
 * rule's limiter, or a keyed table of the rule's parameters). */
static int build(const sluice_rule_t *r, const sluice_clock_t *clk)
{
	if (r->per_key) {
		sluice_keyed_config_t kc;
		sluice_rule_keyed_config(r, &kc);
		sluice_keyed_t k;
		int rc = sluice_keyed_init(&k, &kc, clk);
		if (rc == 0)
			sluice_keyed_destroy(&k);
		return rc;
	}
	sluice_limiter_config_t lc;
	int rc = sluice_rule_limiter_config(r, clk, &lc);
	if (rc != 0)
		return rc;
	sluice_limiter_t *lim = NULL;
	rc = sluice_limiter_new(&lc, &lim);
	sluice_limiter_free(lim);
	return rc;
}

Test(rules, what_loads_builds)
{
	sluice_clock_t manual;
	sluice_clock_manual_init(&manual, 0);
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	cr_assert_eq(sluice_rules_load_file(RULES_EXAMPLE, NULL, &r, &e), 0);
	for (size_t i = 0; i < r->count; i++)
		cr_assert_eq(build(&r->rules[i], &manual), 0, "rule %s", r->rules[i].id);
	sluice_rules_free(r);
	/* loaded against the cached clock (1 ms, the default period), the
	 * example builds on it too */
	sluice_rules_options_t opt = { .clock = &sluice_clock_cached };
	cr_assert_eq(sluice_clock_resolution_ns(&sluice_clock_cached), 1000000);
	cr_assert_eq(sluice_rules_load_file(RULES_EXAMPLE, &opt, &r, &e), 0);
	for (size_t i = 0; i < r->count; i++)
		cr_assert_eq(build(&r->rules[i], &sluice_clock_cached), 0, "rule %s", r->rules[i].id);
	sluice_rules_free(r);
	/* the coarse clock (a jiffy, 4 ms at HZ = 250: warmup's 2 ms interval
	 * is finer): a refusal is for the resolution alone; what it accepts
	 * builds */
	opt.clock = &sluice_clock_coarse;
	int rc = sluice_rules_load_file(RULES_EXAMPLE, &opt, &r, &e);
	if (rc == 0) {
		for (size_t i = 0; i < r->count; i++)
			cr_assert_eq(build(&r->rules[i], &sluice_clock_coarse), 0, "%s", r->rules[i].id);
		sluice_rules_free(r);
	} else {
		cr_assert_gt(rc, 0);
		for (size_t i = 0; i < e->count; i++)
			cr_assert_eq(e->errors[i].code, SLUICE_ERESOLUTION, "%s", e->errors[i].msg);
		sluice_rules_errors_free(e);
	}
}
