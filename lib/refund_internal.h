/* SPDX-License-Identifier: MIT */
/*
 * refund_internal.h - what every refund checks first (never installed).
 */
#ifndef SLUICE_REFUND_INTERNAL_H
#define SLUICE_REFUND_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "sluice/decision.h"
#include "sluice/error.h"

/* sluice__names_admission - @admitted is a decision that admitted, and @n
 * is at least 1: a refusal took nothing, so it has nothing to give back. */
static inline int sluice__names_admission(const sluice_decision_t *admitted, uint64_t n)
{
	return admitted && admitted->allowed && n != 0;
}

/* sluice__refund_epoch - *@e, the epoch (window or bucket number, each
 * @width_ns wide) that @admitted counted in, and *@h, the limiter's @head
 * read now.  SLUICE_EINVAL when e is later than any epoch opened: not an
 * admission of this limiter.  Acquire: pairs with the release CAS that
 * moved head, so what the caller loads next is at least as new as that
 * head's epoch. */
static inline int sluice__refund_epoch(const sluice_decision_t *admitted, uint64_t width_ns,
                                       _Atomic uint64_t *head, uint64_t *e, uint64_t *h)
{
	*e = admitted->now_ns / width_ns;
	*h = atomic_load_explicit(head, memory_order_acquire);
	return *e > *h ? SLUICE_EINVAL : 0;
}

#endif /* SLUICE_REFUND_INTERNAL_H */
