/* SPDX-License-Identifier: MIT */
/*
 * tests/rules/test_rules_oom.c - every allocation of a load fails in turn: the
 * load returns SLUICE_ENOMEM with nothing kept, or the answer it gives
 * without the failure; nothing leaks (LeakSanitizer in the ASan build).
 *
 * The program is linked with -Wl,--wrap for malloc, calloc and
 * aligned_alloc, which redirects the calls of the objects linked into it
 * (libsluice-rules and libsluice, static) to the wrappers below; libyaml's
 * own allocations (a shared library) are not redirected, and its failure
 * comes back as YAML_MEMORY_ERROR, which tree.c maps to SLUICE_ENOMEM the
 * same way.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/error.h"
#include "sluice/rules.h"

/* default visibility: the project builds with -fvisibility=hidden, and the
 * linker must see the wrappers from every object it redirects */
#define WRAP __attribute__((visibility("default")))
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_aligned_alloc(size_t a, size_t n);
WRAP void *__wrap_malloc(size_t n);
WRAP void *__wrap_calloc(size_t n, size_t m);
WRAP void *__wrap_aligned_alloc(size_t a, size_t n);

static long fail_at = -1; /* the allocation that fails, counted from 0 */
static long seen;

static int fail_now(void)
{
	return fail_at >= 0 && seen++ == fail_at;
}

void *__wrap_malloc(size_t n)
{
	return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	return fail_now() ? NULL : __real_calloc(n, m);
}

void *__wrap_aligned_alloc(size_t a, size_t n)
{
	return fail_now() ? NULL : __real_aligned_alloc(a, n);
}

TestSuite(rules_oom, .timeout = 120);

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	static char buf[1 << 16];
	*len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	return buf;
}

/* Fail allocation 0, 1, 2, ... of a load of @buf until one load runs
 * without reaching the failure; each gives ENOMEM or @want. */
static void every_failure(const char *buf, size_t len, int want, const sluice_rules_options_t *opt)
{
	long k = 0;
	for (;; k++) {
		sluice_rules_t *r = (sluice_rules_t *)1;
		sluice_rules_errors_t *e = (sluice_rules_errors_t *)1;
		fail_at = k;
		seen = 0;
		int rc = sluice_rules_load_buffer("t.yaml", buf, len, opt, &r, &e);
		int reached = seen > k;
		fail_at = -1;
		if (rc == SLUICE_ENOMEM) {
			cr_assert(reached, "ENOMEM without a failed allocation");
			cr_assert_null(r);
			cr_assert_null(e);
			continue;
		}
		cr_assert_eq(rc, want, "allocation %ld failed: rc %d, want %d", k, rc, want);
		if (rc == 0) {
			cr_assert_not_null(r);
			cr_assert_null(e);
		} else {
			cr_assert_null(r);
			cr_assert_not_null(e);
		}
		sluice_rules_free(rc == 0 ? r : NULL);
		sluice_rules_errors_free(rc > 0 ? e : NULL);
		if (!reached)
			break;
	}
	cr_assert_gt(k, 3, "the load allocates more than that");
}

Test(rules_oom, valid_example)
{
	size_t len;
	const char *b = slurp(RULES_EXAMPLE, &len);
	every_failure(b, len, 0, NULL);
	/* with a clock: the keyed probe tables of 8 slots are allocated too */
	sluice_rules_options_t opt = { .clock = &sluice_clock_cached };
	every_failure(b, len, 0, &opt);
}

Test(rules_oom, eleven_errors)
{
	size_t len;
	const char *b = slurp(RULES_DATA "/errors.yaml", &len);
	every_failure(b, len, 11, NULL);
}

Test(rules_oom, syntax_error_and_refusals)
{
	const char *y = "rules:\n  - &a id: x\n    limit: *a\n  - id: [\n";
	every_failure(y, strlen(y), 3, NULL);
}

Test(rules_oom, load_file)
{
	long k = 0;
	for (;; k++) {
		sluice_rules_t *r = NULL;
		sluice_rules_errors_t *e = NULL;
		fail_at = k;
		seen = 0;
		int rc = sluice_rules_load_file(RULES_DATA "/errors.yaml", NULL, &r, &e);
		int reached = seen > k;
		fail_at = -1;
		cr_assert(rc == SLUICE_ENOMEM || rc == 11, "rc %d", rc);
		sluice_rules_errors_free(e);
		if (!reached)
			break;
	}
}
