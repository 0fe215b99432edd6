/* SPDX-License-Identifier: MIT */
/*
 * test_keyed_common.h - what the single-threaded keyed tests share
 * (test_keyed.c against the library, test_keyed_faults.c against its own
 * build of lib/keyed_*.c): a table on a manual clock starting at 0, a GCRA
 * configuration, a decision on a C-string key, and the table's statistics.
 * Include after the sluice headers (or lib/keyed_*.c) and criterion.h.
 */
#ifndef SLUICE_TEST_KEYED_COMMON_H
#define SLUICE_TEST_KEYED_COMMON_H

#include <stdint.h>
#include <string.h>

#include "sluice/keyed.h"

#define MS 1000000ULL
#define SEC 1000000000ULL

static sluice_clock_t mclock;

/* A new table @k of @c on mclock, reset to 0; asserts it succeeded. */
static inline void make(sluice_keyed_t *k, sluice_keyed_config_t c)
{
	sluice_clock_manual_init(&mclock, 0);
	int rc = sluice_keyed_init(k, &c, &mclock);
	cr_assert_eq(rc, 0, "new: %s", sluice_err_name(rc));
}

static inline sluice_keyed_config_t gcra_cfg(uint64_t cap, uint64_t rate, uint64_t period,
                                             uint64_t burst, sluice_keyed_policy_t pol)
{
	return (sluice_keyed_config_t){ .algo = SLUICE_ALGO_GCRA, .policy = pol, .capacity = cap,
		                        .rate = rate, .period_ns = period, .burst = burst };
}

/* GCRA with burst @bucket, or LEAKY with depth @bucket - 1 (its bucket
 * D + 1 = @bucket): the same limit in either algorithm. */
static inline sluice_keyed_config_t bucket_cfg(sluice_algo_t algo, uint64_t cap, uint64_t rate,
                                               uint64_t period, uint64_t bucket,
                                               sluice_keyed_policy_t pol)
{
	sluice_keyed_config_t c = gcra_cfg(cap, rate, period, bucket, pol);
	if (algo == SLUICE_ALGO_LEAKY) {
		c.algo = SLUICE_ALGO_LEAKY;
		c.burst = 0;
		c.depth = bucket - 1;
	}
	return c;
}

static inline int acq(sluice_keyed_t *k, const char *key, uint64_t n, uint64_t now,
                      sluice_decision_t *d)
{
	return sluice_keyed_acquire_at(k, key, strlen(key), n, now, d);
}

static inline sluice_keyed_stats_t stats(sluice_keyed_t *k)
{
	sluice_keyed_stats_t s;
	cr_assert_eq(sluice_keyed_stats(k, &s), 0);
	return s;
}

#endif /* SLUICE_TEST_KEYED_COMMON_H */
