/* SPDX-License-Identifier: MIT */
/*
 * rules/budget.c - what a rule set costs in memory before anything is
 * allocated (rules.h MEMORY), and the size grammar the budget is written
 * in.
 *
 * DESIGN.  Each rule's cost is the sum of what the engine allocates for
 * its state, from the same functions the allocations are sized with:
 * per-key rules, one table per dimension of sluice_keyed_region_bytes()
 * rounded to the 64 bytes reload.c rounds to; global rules, the
 * algorithm's limiter struct (its _size()) and, for the sliding log and the
 * sliding window, the ring and the buckets their headers state (log.h
 * MEMORY, window.h MEMORY); every rule, its metrics' stripes
 * (sluice__metrics_bytes).  The loader adds the costs in file order and
 * refuses the file at the first rule whose running total crosses the
 * budget: nothing is allocated for a file over it, by check, explain or a
 * load.  Not counted: the engine's few hundred bytes of bookkeeping per
 * rule and the parse itself (bounded by the 4 MiB input cap).
 */
#include <string.h>

#include "metrics_internal.h"
#include "rules_internal.h"
#include "sluice/decay.h"
#include "sluice/error.h"
#include "sluice/fixed.h"
#include "sluice/gcra.h"
#include "sluice/inflight.h"
#include "sluice/leaky.h"
#include "sluice/log.h"
#include "sluice/warmup.h"
#include "sluice/window.h"

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

uint64_t sluice__rule_memory(const sluice_rule_t *r, uint64_t metrics_bytes)
{
	uint64_t m = metrics_bytes;
	const sluice_rules_limit_t *l = &r->limit;
	if (r->per_key) {
		uint64_t t = ((uint64_t)r->keys.region_bytes + 63) & ~(uint64_t)63;
		return sat_add(m, sat_mul(t, r->ndims));
	}
	uint64_t lim = 0, b = 1;
	switch (l->algo) {
	case SLUICE_ALGO_GCRA: lim = sluice_gcra_size(); break;
	case SLUICE_ALGO_LEAKY: lim = sluice_leaky_size(); break;
	case SLUICE_ALGO_FIXED: lim = sluice_fixed_size(); break;
	case SLUICE_ALGO_WARMUP: lim = sluice_warmup_size(); break;
	case SLUICE_ALGO_DECAY: lim = sluice_decay_size(); break;
	case SLUICE_ALGO_INFLIGHT: lim = sluice_inflight_size(); break;
	case SLUICE_ALGO_WINDOW: /* window.h MEMORY: 16 bytes per bucket, a power of two */
		while (b < l->buckets)
			b <<= 1;
		lim = sat_add(sluice_window_size(), 16 * b);
		break;
	case SLUICE_ALGO_LOG: /* log.h MEMORY: 8 (C + 1) bytes, C = L */
		lim = sat_add(sluice_log_size(), sat_mul(8, sat_add(l->limit, 1)));
		break;
	default:
		break;
	}
	return sat_add(m, lim);
}

