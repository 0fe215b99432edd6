/* SPDX-License-Identifier: MIT */
/*
 * window_step.h - the sliding window's arithmetic, once (never installed):
 * validation (lib/window.c's init, lib/keyed_table.c), a closed bucket's
 * own count, the sum of the closed buckets, the seal of a bucket word and
 * the refusal's retry walk.  lib/window.c and the keyed tables' WINDOW
 * decisions (lib/keyed_decide.c) both call these; neither has a copy.
 *
 * Both keep the same bucket word (tag32(epoch) | SEALED | FOLDED | own30,
 * window.h) in different places: the ring's slots, a key's bucket array.
 * So the steps that read several buckets take the word's location as a
 * function (@word_of, with @ctx), which is a constant at every call and
 * inlined: the walk costs what a hand-written loop costs.
 */
#ifndef SLUICE_WINDOW_STEP_H
#define SLUICE_WINDOW_STEP_H

#include <stdint.h>

#include "sluice/error.h"
#include "sluice/window.h"

/* sluice__window_limit_ok - L in 1..SLUICE_WINDOW_LIMIT_MAX (SLUICE_ELIMIT): init's
 * check and set_limit's, once. */
static inline int sluice__window_limit_ok(uint64_t limit)
{
	return limit < 1 || limit > SLUICE_WINDOW_LIMIT_MAX ? SLUICE_ELIMIT : 0;
}

/* sluice__window_validate - L in 1..SLUICE_WINDOW_LIMIT_MAX (SLUICE_ELIMIT),
 * N in 1..SLUICE_WINDOW_BUCKETS_MAX (SLUICE_EBUCKETS), W > 0 and a multiple
 * of N (SLUICE_EWINDOW).  Lease and the clock's resolution are the
 * caller's checks. */
static inline int sluice__window_validate(uint64_t limit, uint64_t buckets, uint64_t window_ns)
{
	if (sluice__window_limit_ok(limit) != 0)
		return SLUICE_ELIMIT;
	if (buckets < 1 || buckets > SLUICE_WINDOW_BUCKETS_MAX)
		return SLUICE_EBUCKETS;
	if (window_ns == 0 || window_ns % buckets != 0)
		return SLUICE_EWINDOW;
	return 0;
}

/* The bucket word of epoch @y (a relaxed load: closed buckets are final
 * once head, loaded with acquire by the caller, has passed them). */
typedef uint64_t (*sluice__window_word_fn)(const void *ctx, uint64_t y);

/* own(y) from @word, the bucket word that holds epoch @y's slot: 0 when
 * the word is another epoch's (y was skipped: nothing admitted in it). */
static inline uint64_t sluice__window_own(uint64_t word, uint64_t y)
{
	return (word >> 32) == SLUICE__LO32(y) ? (word & SLUICE__SLOT_OWN) : 0;
}

/* base(h): the sum of the N - 1 closed buckets before @h (fewer near
 * epoch 0: epochs before 0 never existed). */
__attribute__((always_inline)) static inline uint64_t
sluice__window_closed_sum(uint64_t h, uint64_t buckets, sluice__window_word_fn word_of,
                          const void *ctx)
{
	uint64_t base = 0;
	for (uint64_t j = 1; j < buckets && j <= h; j++)
		base += sluice__window_own(word_of(ctx, h - j), h - j);
	return base;
}

/*
 * Seal the bucket word @b of epoch @h (set SEALED and FOLDED: its own count
 * is final), starting from the value @w the caller loaded.  Each failed
 * CAS is an admission into the bucket (another thread's progress); at most
 * @max of them (the caller's retry bound, counted in *@tries).  Release:
 * the sealed, final count is what the head move after it publishes (the
 * acquire loads of head pair with that, and the acquire on failure
 * reloads the count an admission wrote).  Acquire too (acq_rel, the same
 * LOCK CMPXCHG on x86): it synchronises with the admissions it seals
 * after, so each one's load of the limit happens before the next bucket
 * opens (window.c DESIGN, readings across a change).
 * Return: 1 when the word is sealed (by this call or another), or is no
 * longer @h's; 0 when the bound ran out first (head must not move).
 */
static inline int sluice__window_seal(_Atomic uint64_t *b, uint64_t w, uint64_t h,
                                      unsigned *tries, unsigned max)
{
	for (; (w >> 32) == SLUICE__LO32(h) && !(w & SLUICE__SLOT_SEALED); ++*tries) {
		if (*tries > max)
			return 0;
		if (atomic_compare_exchange_weak_explicit(
			    b, &w, w | SLUICE__SLOT_SEALED | SLUICE__SLOT_FOLDED,
			    memory_order_acq_rel, memory_order_acquire))
			break;
	}
	return 1;
}

/*
 * Fill a refusal of @n at @now in bucket @h, whose closed buckets hold
 * @base and which counts @counted in all (base included) against @limit:
 * the same n passes once enough of the oldest buckets have left the
 * window.  Walk from the oldest bucket forward until what leaves covers
 * the excess; bucket y leaves at y * width + W.  The walk reads closed
 * buckets, which are final, through @word_of.  When even all of them
 * leaving is not enough (base < excess: deny-mostly traffic on a key whose
 * admissions all landed in this bucket, the common shape of a flood), only
 * the current bucket's leaving is, and the walk is skipped.
 */
__attribute__((always_inline)) static inline void
sluice__window_refused(sluice_decision_t *d, uint64_t limit, uint64_t counted, uint64_t base,
                       uint64_t n, uint64_t h, uint64_t now, uint64_t window_ns,
                       uint64_t width_ns, uint64_t buckets, sluice__window_word_fn word_of,
                       const void *ctx)
{
	uint64_t start = h * width_ns;
	sluice__decision_window(d, 0, limit, counted, start, window_ns, now);
	now = d->now_ns; /* not before the bucket */
	uint64_t excess = counted + n - limit; /* > 0 on a refusal */
	uint64_t freed = 0;
	for (uint64_t j = base >= excess ? buckets - 1 : 0; j >= 1; j--) {
		if (j > h)
			continue; /* epochs before 0 never existed */
		freed += sluice__window_own(word_of(ctx, h - j), h - j);
		if (freed >= excess) {
			/* bucket h-j leaves at (h-j)*width + W, which is
			 * after now because j < N. */
			d->retry_after_ns = window_ns - (now - (h - j) * width_ns);
			return;
		}
	}
	/* else retry_after_ns = reset_ns: the current bucket leaves */
}

#endif /* SLUICE_WINDOW_STEP_H */
