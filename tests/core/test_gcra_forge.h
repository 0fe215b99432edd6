/* SPDX-License-Identifier: MIT */
/*
 * test_gcra_forge.h - the white-box GCRA tests' forgery of a writer stopped
 * half-way through a reconfiguration, done through the private fields the
 * way lib/gcra.c's writer does it: fill the spare parameter slot (its era
 * cleared first, so a reader of that slot's old era rejects it while it
 * changes), give it its start and era, name the era in seal_era, and seal
 * the TAT.  What is left undone (the era flip and the unseal) is what a
 * decision must finish.  test_gcra.c, test_gcra_threads.c and test_wrap.c
 * use it.
 */
#ifndef SLUICE_TEST_GCRA_FORGE_H
#define SLUICE_TEST_GCRA_FORGE_H

#include <stdatomic.h>
#include <stdint.h>

#include "sluice/gcra.h"

/* Clear @next's era, then copy @src's parameters into it (not its start,
 * not its era). */
static inline void gcra_forge_params(struct sluice__gcra_params *next,
                                     struct sluice__gcra_params *src)
{
	atomic_store(&next->era, 0);
	atomic_store(&next->interval, atomic_load(&src->interval));
	atomic_store(&next->tau, atomic_load(&src->tau));
	atomic_store(&next->burst, atomic_load(&src->burst));
	atomic_store(&next->gate, atomic_load(&src->gate));
	atomic_store(&next->recip, atomic_load(&src->recip));
	atomic_store(&next->shift, atomic_load(&src->shift));
	atomic_store(&next->stamp, atomic_load(&src->stamp));
}

/* Era @era's slot gets @start and its era; the seal names @era in full
 * beside the TAT, and the TAT is sealed with @era's low bits. */
static inline void gcra_forge_seal(sluice_gcra_t *g, uint64_t era, uint64_t start)
{
	struct sluice__gcra_params *slot = &g->params[era & 1];
	atomic_store(&g->start[era & 1], start);
	atomic_store(&slot->era, era);
	atomic_store(&g->seal_era, era);
	atomic_store(&g->tat, SLUICE__GCRA_SEAL_MIN + (era & SLUICE__GCRA_SEAL_MASK));
}

/* A change of @g to @src's parameters with start @start, sealed as era
 * g->era + 1, its writer stopped before the era flip and the unseal. */
static inline void gcra_forge_half_done(sluice_gcra_t *g, struct sluice__gcra_params *src,
                                        uint64_t start)
{
	uint64_t e = atomic_load(&g->era);
	gcra_forge_params(&g->params[(e + 1) & 1], src);
	gcra_forge_seal(g, e + 1, start);
}

#endif /* SLUICE_TEST_GCRA_FORGE_H */
