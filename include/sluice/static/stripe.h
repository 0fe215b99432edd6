/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/stripe.h - the CPU number, the picker and the stripe's add
 * and sum, as static inline functions, for the library's own files and for
 * a caller that defines SLUICE_INLINE (common.h, INLINE).  lib/outline.c
 * exports the calls sluice/stripe.h declares from these bodies.  Not an
 * interface: the names and layouts here change in any release.
 */
#ifndef SLUICE_STATIC_STRIPE_H
#define SLUICE_STATIC_STRIPE_H

#include "../stripe.h"
#include "common.h"

/* private: sched_getcpu() out of line (it is a GNU extension, and the
 * fallback is only taken where the rseq area is not registered). */
SLUICE_API unsigned sluice_inline_getcpu(void);

/* private: the per-thread probe of BY_PROBE stripes */
SLUICE_API uint32_t *sluice_inline_stripe_probe(void);

SLUICE_API void sluice_inline_stripe_probe_move(uint32_t *probe);

static inline unsigned sluice__cpu(void)
{
#ifdef SLUICE_HAVE_RSEQ
	if (SLUICE_LIKELY(__rseq_size != 0)) {
		const struct rseq *rs =
			(const struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
		/* The kernel writes cpu_id on every migration; a relaxed
		 * atomic load keeps ThreadSanitizer and the compiler honest. */
		int32_t cpu = (int32_t)__atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);
		if (SLUICE_LIKELY(cpu >= 0))
			return (unsigned)cpu;
	}
#endif
	return sluice_inline_getcpu();
}

/*
 * private: the picker, the one copy: this CPU's cell index among @mask + 1
 * cells (a power of two).  A thread migrated right after it lands on
 * another CPU's cell, which every user tolerates (atomic adds; a lease
 * cell's CAS fails or spends another CPU's lease, both exact).
 */
static inline uint32_t sluice__stripe_pick(uint32_t mask)
{
	return sluice__cpu() & mask;
}

static inline uint32_t sluice__stripe_cells(const sluice_stripe_t *s) { return s->mask + 1; }

static inline void sluice__stripe_add(sluice_stripe_t *s, int64_t n)
{
	if (SLUICE_LIKELY(s->mode == SLUICE_STRIPE_BY_CPU)) {
		atomic_fetch_add_explicit(&s->cells[sluice__stripe_pick(s->mask)].word[0], n,
		                          memory_order_relaxed);
		return;
	}
	uint32_t *probe = sluice_inline_stripe_probe();
	for (;;) {
		_Atomic int64_t *cell = &s->cells[*probe & s->mask].word[0];
		int64_t v = atomic_load_explicit(cell, memory_order_relaxed);
		/* wraps like the BY_CPU fetch_add, instead of signed overflow */
		int64_t next = (int64_t)((uint64_t)v + (uint64_t)n);
		if (atomic_compare_exchange_strong_explicit(cell, &v, next, memory_order_relaxed,
		                                            memory_order_relaxed))
			return;
		/* Somebody else writes this cell: move away for next time,
		 * and retry on the new cell now. */
		sluice_inline_stripe_probe_move(probe);
	}
}

static inline int64_t sluice__stripe_sum(const sluice_stripe_t *s)
{
	/* unsigned: cells another process wrote (sluice_stripe_attach) may
	 * hold anything, and their sum wraps instead of overflowing */
	uint64_t total = 0;
	for (uint32_t i = 0; i <= s->mask; i++)
		total += (uint64_t)atomic_load_explicit(&s->cells[i].word[0], memory_order_relaxed);
	return (int64_t)total;
}

/* SLUICE_INLINE: the calls above, inline (common.h, INLINE). */
#ifdef SLUICE_INLINE
#define sluice_cpu(...) sluice__cpu(__VA_ARGS__)
#define sluice_stripe_cells(...) sluice__stripe_cells(__VA_ARGS__)
#define sluice_stripe_add(...) sluice__stripe_add(__VA_ARGS__)
#define sluice_stripe_sum(...) sluice__stripe_sum(__VA_ARGS__)
#endif

#endif /* SLUICE_STATIC_STRIPE_H */
