/* SPDX-License-Identifier: MIT */
/*
 * striped_baseline.h - a striped read-check-add sliding window, kept in
 * bench/ as a baseline (not a limiter): the shape of sluice's former
 * SLUICE_STRIPED mode, which measurements showed never beating EXACT
 * (issue 11: "keeps its place only if a measurement shows a case where it
 * wins; otherwise move it to bench/ as a baseline").
 *
 * A decision at bucket e reads every per-CPU cell (stripe.h's cell type
 * and picker: word[0] = tag32(epoch) | count32 of that CPU's admissions in
 * the epoch) and the N - 1 closed buckets' folded totals, checks
 * base + cells + n <= L, and adds n to its own CPU's cell.  The first
 * decision in a later bucket folds the cells of the bucket that ends into
 * its slot and moves head.  Not exact, on purpose kept simple: adds racing
 * with the fold are lost to the closed total, and two deciders can both
 * pass the check (read-check-add).  It is here for its cost: a read of
 * every cell per decision, which is what the library's striped mode paid,
 * and which EXACT's one CAS on one word beats on one thread and on two.
 */
#ifndef SLUICE_BENCH_STRIPED_BASELINE_H
#define SLUICE_BENCH_STRIPED_BASELINE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "sluice/decision.h"
#include "sluice/stripe.h"
#include "sluice/static/stripe.h" /* sluice__stripe_pick: the library's picker */
#include "stripe_internal.h" /* the cells' allocation (bench links the static library) */

#define STRIPED_BASE_SLOTS 16u /* >= N, a power of two */

struct striped_base {
	uint64_t limit, window_ns, width_ns, buckets;
	uint32_t cell_mask;
	struct sluice_stripe_cell *cells;
	_Atomic uint64_t closed[STRIPED_BASE_SLOTS]; /* tag32(epoch) | folded count32 */
	_Atomic uint64_t head;
};

#define SB_TAG(e) ((uint64_t)(e) & 0xffffffffu)

/* 0, or a SLUICE_E* code (the cells' allocation). */
static inline int striped_base_init(struct striped_base *b, uint64_t limit, uint64_t window_ns,
                                    uint64_t buckets)
{
	int rc;
	uint32_t n = 0; /* one per possible CPU */
	b->cells = sluice__stripe_alloc(sizeof(*b->cells), &n, &rc);
	if (!b->cells)
		return rc;
	for (uint32_t i = 0; i < n; i++)
		atomic_init(&b->cells[i].word[0], 0);
	for (uint32_t i = 0; i < STRIPED_BASE_SLOTS; i++)
		atomic_init(&b->closed[i], 0);
	atomic_init(&b->head, 0);
	b->cell_mask = n - 1;
	b->limit = limit;
	b->window_ns = window_ns;
	b->buckets = buckets;
	b->width_ns = window_ns / buckets;
	return 0;
}

static inline void striped_base_destroy(struct striped_base *b)
{
	free(b->cells);
	b->cells = NULL;
}

/* Every cell's count for epoch @e (relaxed: a baseline publishes nothing). */
static inline uint64_t striped_base_cells(const struct striped_base *b, uint64_t e)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i <= b->cell_mask; i++) {
		uint64_t v = (uint64_t)atomic_load_explicit(&b->cells[i].word[0],
		                                            memory_order_relaxed);
		if ((v >> 32) == SB_TAG(e))
			sum += v & 0xffffffffu;
	}
	return sum;
}

static inline int striped_base_acquire_at(struct striped_base *b, uint64_t n, uint64_t now,
                                          sluice_decision_t *d)
{
	uint64_t e = now / b->width_ns;
	uint64_t h = atomic_load_explicit(&b->head, memory_order_relaxed);
	if (e > h) {
		/* fold the bucket that ends, then move head (racy: see above) */
		uint64_t total = striped_base_cells(b, h);
		atomic_store_explicit(&b->closed[h & (STRIPED_BASE_SLOTS - 1)],
		                      (SB_TAG(h) << 32) | (total & 0xffffffffu), memory_order_relaxed);
		atomic_compare_exchange_strong_explicit(&b->head, &h, e, memory_order_relaxed,
		                                        memory_order_relaxed);
	} else {
		e = h; /* time never runs backwards */
	}
	uint64_t base = 0;
	for (uint64_t j = 1; j < b->buckets && j <= e; j++) {
		uint64_t c = atomic_load_explicit(&b->closed[(e - j) & (STRIPED_BASE_SLOTS - 1)],
		                                  memory_order_relaxed);
		if ((c >> 32) == SB_TAG(e - j))
			base += c & 0xffffffffu;
	}
	uint64_t counted = base + striped_base_cells(b, e);
	int ok = counted + n <= b->limit;
	if (ok) {
		_Atomic int64_t *cell = &b->cells[sluice__stripe_pick(b->cell_mask)].word[0];
		int64_t v = atomic_load_explicit(cell, memory_order_relaxed), next;
		do
			next = ((uint64_t)v >> 32) == SB_TAG(e) ? v + (int64_t)n
			                                         : (int64_t)((SB_TAG(e) << 32) | n);
		while (!atomic_compare_exchange_weak_explicit(cell, &v, next, memory_order_relaxed,
		                                              memory_order_relaxed));
		counted += n;
	}
	if (d) {
		uint64_t start = e * b->width_ns, t = now < start ? start : now;
		d->allowed = ok;
		d->limit = b->limit;
		d->remaining = counted >= b->limit ? 0 : b->limit - counted;
		d->reset_ns = b->window_ns - (t - start);
		d->retry_after_ns = ok ? 0 : d->reset_ns;
		d->delay_ns = 0;
		d->now_ns = t;
	}
	return ok;
}

#endif /* SLUICE_BENCH_STRIPED_BASELINE_H */
