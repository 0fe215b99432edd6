/* SPDX-License-Identifier: MIT */
/*
 * tests/rules/test_metrics_oom.c - every allocation of sluice__metrics_init fails
 * in turn (one per stripe, SLUICE__METRICS_STRIPES in all): init returns
 * SLUICE_ENOMEM, every stripe it had allocated is freed again, and free on
 * the failed object is a no-op; with no failure, free returns every cell.
 *
 * Linked with -Wl,--wrap=aligned_alloc,--wrap=free (the stripes' cells
 * come from aligned_alloc): the wrappers count the cells outstanding, so
 * a leak fails the plain build too, not only LeakSanitizer's.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"
#include "sluice/error.h"

#define WRAP __attribute__((visibility("default")))
void *__real_aligned_alloc(size_t a, size_t n);
void __real_free(void *p);
WRAP void *__wrap_aligned_alloc(size_t a, size_t n);
WRAP void __wrap_free(void *p);

#define TRACK_MAX 256
static void *live[TRACK_MAX];
static long fail_at = -1, seen;
static int tracking;

void *__wrap_aligned_alloc(size_t a, size_t n)
{
	if (!tracking)
		return __real_aligned_alloc(a, n);
	if (seen++ == fail_at)
		return NULL;
	void *p = __real_aligned_alloc(a, n);
	for (int i = 0; p && i < TRACK_MAX; i++)
		if (!live[i]) {
			live[i] = p;
			break;
		}
	return p;
}

void __wrap_free(void *p)
{
	for (int i = 0; p && i < TRACK_MAX; i++)
		if (live[i] == p)
			live[i] = NULL;
	__real_free(p);
}

static int outstanding(void)
{
	int n = 0;
	for (int i = 0; i < TRACK_MAX; i++)
		n += live[i] != NULL;
	return n;
}

TestSuite(metrics_oom, .timeout = 60);

Test(metrics_oom, every_allocation_fails_in_turn)
{
	cr_assert_lt(SLUICE__METRICS_STRIPES, TRACK_MAX);
	for (long k = 0;; k++) {
		sluice__metrics_t m;
		memset(&m, 0x5A, sizeof(m));
		fail_at = k;
		seen = 0;
		tracking = 1;
		int rc = sluice__metrics_init(&m, 1);
		tracking = 0;
		if (rc == SLUICE_ENOMEM) {
			cr_assert_lt(k, SLUICE__METRICS_STRIPES);
			cr_assert_eq(outstanding(), 0, "allocation %ld failed: %d cells leaked", k,
			             outstanding());
			sluice__metrics_free(&m); /* a no-op on a failed init */
			continue;
		}
		cr_assert_eq(rc, 0, "rc %d (%s)", rc, sluice_err_name(rc));
		cr_assert_eq(k, SLUICE__METRICS_STRIPES, "init made %ld allocations, not one per stripe",
		             seen);
		cr_assert_eq(outstanding(), SLUICE__METRICS_STRIPES);
		sluice__metrics_count(&m, SLUICE__METRICS_PASSED, 1);
		sluice__metrics_complete(&m, 1000, 0);
		sluice__metrics_free(&m);
		cr_assert_eq(outstanding(), 0, "free left %d cells", outstanding());
		break;
	}
}
