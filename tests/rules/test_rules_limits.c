/* SPDX-License-Identifier: MIT */
/*
 * tests/rules/test_rules_limits.c - the loader against inputs that cost more
 * than their size says (issue 22 R5, R6): nesting far past the depth cap,
 * and valid files whose tables would take more memory than the budget.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules_internal.h"
#include "sluice/error.h"
#include "sluice/rules.h"

/*
 * The timeout is the test for the old code: it went on parsing after the
 * depth error, and libyaml is quadratic in the depth of flow collections
 * (100,000 levels took over 30 s, 1,000,000 hours).  Stopping at the
 * error, each case is the 65 events up to the cap (well under a second
 * plain, and under TSan); the timeout is generous for a loaded machine
 * under TSan and far below the old code's time.  On the new code each
 * case also counts the events the loader pulled (sluice__tree_events).
 */
TestSuite(rules_limits, .timeout = 30);

/* "rules: " then @levels of @open and as many @close. */
static char *nested(size_t levels, const char *open, const char *close, size_t *len)
{
	size_t lo = strlen(open), lc = strlen(close);
	char *y = malloc(8 + levels * (lo + lc) + 2);
	cr_assert_not_null(y);
	size_t o = (size_t)sprintf(y, "rules: ");
	for (size_t i = 0; i < levels; i++, o += lo)
		memcpy(y + o, open, lo);
	for (size_t i = 0; i < levels; i++, o += lc)
		memcpy(y + o, close, lc);
	y[o++] = '\n';
	y[o] = 0;
	*len = o;
	return y;
}

static void deep_refused(size_t levels, const char *open, const char *close, uint32_t col)
{
	size_t len;
	char *y = nested(levels, open, close, &len);
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	int rc = sluice_rules_load_buffer("deep.yaml", y, len, NULL, &r, &e);
	cr_assert_eq(rc, 1, "%zu levels: rc %d", levels, rc);
	cr_assert_null(r);
	cr_assert_not_null(e);
	cr_assert(strstr(e->errors[0].msg, "nested deeper than 64 levels"), "%s", e->errors[0].msg);
	/* the root mapping is level 1, rules' value level 2: the 64th open
	 * after "rules: " is the 65th level */
	cr_assert_eq(e->errors[0].mark.line, 1);
	cr_assert_eq(e->errors[0].mark.col, col, "col %u", e->errors[0].mark.col);
	char line[256];
	sluice_rules_error_text(e, 0, line, sizeof(line));
	cr_assert_str_eq(line, "deep.yaml:1:71: nested deeper than 64 levels");
	/* the reading stopped at the error: stream, document, the root
	 * mapping and its key, the 63 levels that fit, and the one that
	 * crossed (the old code pulled all 2 x levels more) */
	cr_assert_eq(sluice__tree_events, 4 + 63 + 1, "%zu events pulled", sluice__tree_events);
	sluice_rules_errors_free(e);
	free(y);
}

Test(rules_limits, deep_sequences_100k)
{
	deep_refused(100000, "[", "]", 8 + 63);
}

Test(rules_limits, deep_sequences_1m)
{
	deep_refused(1000000, "[", "]", 8 + 63);
}

/* unclosed: the file ends inside the nesting (a syntax error the loader
 * no longer reads to) */
Test(rules_limits, deep_sequences_unclosed)
{
	deep_refused(1000000, "[", "", 8 + 63);
}

/* ---- the memory budget (R6) --------------------------------------- */

/* @n per-key rules at the default capacity (65,536 keys), each its own
 * prefix.  Rule i's mapping is at line 2 + 4 i. */
static char *per_key_rules(size_t n, size_t *len)
{
	char *y = malloc(16 + n * 200);
	cr_assert_not_null(y);
	size_t o = (size_t)sprintf(y, "rules:\n");
	for (size_t i = 0; i < n; i++)
		o += (size_t)sprintf(y + o,
		                     "  - id: r%zu\n"
		                     "    match: { prefix: /p%zu/ }\n"
		                     "    dimensions: [ip]\n"
		                     "    limit: { algorithm: fixed_window, window: 1h, max_requests: 10 }\n",
		                     i, i);
	*len = o;
	return y;
}

/* 400 per-key rules at the default capacity: about 3.3 GB of tables.  The
 * old loader called the file valid (and explain, or an engine, then
 * allocated it all); now the load is refused under the default budget at
 * the rule that crosses it, naming the total and the budget. */
Test(rules_limits, budget_refuses_400_rules)
{
	size_t len;
	char *y = per_key_rules(400, &len);
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	int rc = sluice_rules_load_buffer("big.yaml", y, len, NULL, &r, &e);
	cr_assert_eq(rc, 1, "rc %d: the file was called valid", rc);
	cr_assert_null(r);
	cr_assert(strstr(e->errors[0].msg, "memory budget"), "%s", e->errors[0].msg);
	cr_assert(strstr(e->errors[0].msg, "1073741824"), "%s", e->errors[0].msg);
	cr_assert_eq((e->errors[0].mark.line - 2) % 4, 0, "at a rule's mapping: line %u",
	             e->errors[0].mark.line);
	sluice_rules_errors_free(e);
	free(y);
}

/* The crossing rule is exactly the first whose running total passes the
 * budget: each rule here costs what a one-rule file's total says. */
Test(rules_limits, budget_names_the_crossing_rule)
{
	size_t len;
	char *y = per_key_rules(1, &len);
	sluice_rules_t *r = NULL;
	cr_assert_eq(sluice_rules_load_buffer("one.yaml", y, len, NULL, &r, NULL), 0);
	uint64_t cost = r->memory_bytes;
	cr_assert_eq(r->memory_budget, SLUICE_RULES_MEMORY_BUDGET_DEFAULT);
	cr_assert_geq(cost, r->rules[0].keys.region_bytes, "the table is counted");
	sluice_rules_free(r);
	free(y);
	/* a budget of 10 rules and a half: the 11th rule (index 10) crosses */
	sluice_rules_options_t o = { .memory_budget = cost * 10 + cost / 2 };
	y = per_key_rules(20, &len);
	sluice_rules_errors_t *e = NULL;
	cr_assert_eq(sluice_rules_load_buffer("t.yaml", y, len, &o, &r, &e), 1);
	cr_assert_eq(e->errors[0].mark.line, 2 + 4 * 10);
	cr_assert_eq(e->errors[0].mark.col, 5);
	cr_assert_eq(e->errors[0].code, SLUICE_EMEMORY);
	char want[200];
	snprintf(want, sizeof(want),
	         "rule 'r10': the file needs %llu bytes of memory up to this rule, over the memory "
	         "budget of %llu bytes",
	         (unsigned long long)(cost * 11), (unsigned long long)o.memory_budget);
	cr_assert(strstr(e->errors[0].msg, want), "%s\nwant %s", e->errors[0].msg, want);
	sluice_rules_errors_free(e);
	/* at exactly 10 rules' cost, 10 rules fit */
	o.memory_budget = cost * 10;
	y[0] = 0;
	free(y);
	y = per_key_rules(10, &len);
	cr_assert_eq(sluice_rules_load_buffer("t.yaml", y, len, &o, &r, NULL), 0);
	cr_assert_eq(r->memory_bytes, cost * 10);
	sluice_rules_free(r);
	free(y);
}

/* The file's memory_budget, when the caller gives none; the caller's
 * wins over it; a value that is not a size is an error at its place. */
Test(rules_limits, budget_in_the_file)
{
	static const char f[] =
		"memory_budget: 1MiB\n"
		"rules:\n"
		"  - id: r\n"
		"    dimensions: [ip]\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 10 }\n";
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	cr_assert_eq(sluice_rules_load_buffer("t.yaml", f, strlen(f), NULL, &r, &e), 1);
	cr_assert(strstr(e->errors[0].msg, "over the memory budget of 1048576 bytes"), "%s",
	          e->errors[0].msg);
	cr_assert_eq(e->errors[0].mark.line, 3);
	sluice_rules_errors_free(e);
	sluice_rules_options_t o = { .memory_budget = 1ULL << 30 };
	cr_assert_eq(sluice_rules_load_buffer("t.yaml", f, strlen(f), &o, &r, NULL), 0);
	cr_assert_eq(r->memory_budget, 1ULL << 30);
	sluice_rules_free(r);
	static const char bad[] = "memory_budget: 2 GB\nrules: []\n";
	cr_assert_eq(sluice_rules_load_buffer("t.yaml", bad, strlen(bad), NULL, &r, &e), 1);
	cr_assert(strstr(e->errors[0].msg, "memory_budget: '2 GB': unknown size unit (B, k, m, g, t or KiB, MiB, GiB, TiB)"), "%s",
	          e->errors[0].msg);
	cr_assert_eq(e->errors[0].mark.col, 16);
	sluice_rules_errors_free(e);
}

