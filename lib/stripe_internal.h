/* SPDX-License-Identifier: MIT */
/*
 * stripe_internal.h - the per-CPU cells' allocation, once (never
 * installed): sluice_stripe_init() and the sliding window's lease cells
 * call it, and bench/striped_baseline.h (linked statically) does too.
 */
#ifndef SLUICE_STRIPE_INTERNAL_H
#define SLUICE_STRIPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/stripe.h"

/*
 * sluice__stripe_alloc - *@ncells cells of @cell_bytes (a multiple of the
 * cache line), line-aligned and uninitialised.  @ncells 0 asks for one per
 * possible CPU, capped at SLUICE_STRIPE_CELLS_MAX (the CPUs beyond share
 * cells); any other value 1..SLUICE_STRIPE_CELLS_MAX is taken as it is.
 * Either way it is rounded up to a power of two (a pick is a mask:
 * sluice__stripe_pick()) and written back.  Control path: allocates.
 * Return: the cells, or NULL with SLUICE_ECELLS or SLUICE_ENOMEM in *@rc.
 */
void *sluice__stripe_alloc(size_t cell_bytes, uint32_t *ncells, int *rc);

#endif /* SLUICE_STRIPE_INTERNAL_H */
