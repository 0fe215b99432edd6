/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/inflight.h - the concurrency limiter's acquire and release,
 * as static inline functions, for the library's own files and for a caller
 * that defines SLUICE_INLINE (common.h, INLINE).  lib/outline.c exports the
 * calls sluice/inflight.h declares from these bodies.  Not an interface: the
 * names and layouts here change in any release.
 */
#ifndef SLUICE_STATIC_INFLIGHT_H
#define SLUICE_STATIC_INFLIGHT_H

#include "../inflight.h"
#include "clock.h"
#include "common.h"
#include "decision.h"

/* private slow paths (lib/inflight.c) */
SLUICE_API int sluice_inline_inflight_bad_n(const sluice_inflight_t *f, uint64_t n, uint64_t now,
                                      sluice_decision_t *d);

SLUICE_API int sluice_inline_inflight_bad_release(sluice_inflight_t *f, uint64_t n, uint64_t held);

static inline uint64_t sluice__inflight_bad_releases(const sluice_inflight_t *f)
{
	return atomic_load_explicit(&((sluice_inflight_t *)f)->bad_releases,
	                            memory_order_relaxed);
}

/*
 * private: the in-flight limit's step, the one copy of its arithmetic
 * (inflight.h's acquire and the keyed tables' INFLIGHT decisions): can @n
 * more slots be taken while @held are, under @limit?  @held may be above a
 * lowered limit (SET_LIMIT) or, in a keyed table, forged: then nothing
 * fits, and nothing wraps.  sluice__inflight_room(): the slots free.
 */
static inline int sluice__inflight_fits(uint64_t held, uint64_t n, uint64_t limit)
{
	return held <= limit && n <= limit - held;
}

static inline uint64_t sluice__inflight_room(uint64_t held, uint64_t limit)
{
	return held >= limit ? 0 : limit - held;
}

static inline void sluice__inflight_fill(sluice_decision_t *d, int allowed, uint64_t limit,
                                         uint64_t remaining, uint64_t now)
{
	d->allowed = allowed;
	d->limit = limit;
	d->remaining = remaining;
	d->retry_after_ns = 0;          /* see DECISION above               */
	d->delay_ns = 0;
	d->reset_ns = SLUICE_NEVER;
	d->now_ns = now;
}

SLUICE_NODISCARD static inline int sluice__inflight_acquire_at(sluice_inflight_t *f, uint64_t n, uint64_t now,
                                             sluice_decision_t *d)
{
	/* Relaxed: the limit publishes nothing; this first read gates n, and
	 * the one after held below is what the acquire is judged against. */
	uint64_t K = atomic_load_explicit(&f->limit, memory_order_relaxed);
	if (SLUICE_UNLIKELY(n - 1 >= K))
		return sluice_inline_inflight_bad_n(f, n, now, d);
	/* Acquire (free on x86): a guess for the CAS, which re-checks the
	 * real value, and what the limit's second load below comes after. */
	uint64_t h = atomic_load_explicit(&f->held, memory_order_acquire);
	for (;;) {
		/* The limit again, after held, on every attempt (READINGS
		 * ACROSS A CHANGE): an acquire is judged against a K current
		 * after it last read held.  Seq_cst, as set_limit's store and
		 * the CAS (a plain load and the same LOCK CMPXCHG on x86). */
		uint64_t K2 = atomic_load_explicit(&f->limit, memory_order_seq_cst);
		if (SLUICE_UNLIKELY(K2 != K)) {
			if (n - 1 >= K2)
				return sluice_inline_inflight_bad_n(f, n, now, d);
			K = K2;
		}
		/* h may exceed K after K was lowered below what is held:
		 * the step says no, and the room is 0. */
		if (!sluice__inflight_fits(h, n, K)) {
			if (d)
				sluice__inflight_fill(d, 0, K, sluice__inflight_room(h, K), now);
			return 0;
		}
		/* Seq_cst (an acquire) on success: pairs with the release CAS
		 * in sluice_inflight_release(), so the releaser's earlier writes
		 * happen before this holder's work.  Acquire on failure: h is
		 * reloaded, and the limit is read again after it. */
		if (atomic_compare_exchange_weak_explicit(&f->held, &h, h + n, memory_order_seq_cst,
		                                          memory_order_acquire)) {
			if (d)
				sluice__inflight_fill(d, 1, K, K - h - n, now);
			return 1;
		}
	}
}

SLUICE_NODISCARD static inline int sluice__inflight_acquire(sluice_inflight_t *f, uint64_t n, sluice_decision_t *d)
{
	return sluice__inflight_acquire_at(f, n, d ? sluice__clock_now(f->clock) : 0, d);
}

static inline int sluice__inflight_release(sluice_inflight_t *f, uint64_t n)
{
	if (SLUICE_UNLIKELY(n == 0))
		return SLUICE_EINVAL;
	uint64_t h = atomic_load_explicit(&f->held, memory_order_relaxed);
	do {
		if (SLUICE_UNLIKELY(n > h))
			return sluice_inline_inflight_bad_release(f, n, h);
		/* Release on success: publishes this holder's writes to the
		 * next acquirer (pairs with the acquire CAS above). */
	} while (!atomic_compare_exchange_weak_explicit(&f->held, &h, h - n, memory_order_release,
	                                                memory_order_relaxed));
	return 0;
}

static inline int sluice__inflight_refund(sluice_inflight_t *f, uint64_t n,
                                         const sluice_decision_t *admitted)
{
	(void)admitted;
	return sluice__inflight_release(f, n);
}

static inline uint64_t sluice__inflight_available(const sluice_inflight_t *f)
{
	sluice_inflight_t *m = (sluice_inflight_t *)f; /* loads only */
	uint64_t K = atomic_load_explicit(&m->limit, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&m->held, memory_order_relaxed);
	return h >= K ? 0 : K - h;
}

/* SLUICE_INLINE: the calls above, inline (common.h, INLINE). */
#ifdef SLUICE_INLINE
#define sluice_inflight_bad_releases(...) sluice__inflight_bad_releases(__VA_ARGS__)
#define sluice_inflight_acquire_at(...) sluice__inflight_acquire_at(__VA_ARGS__)
#define sluice_inflight_acquire(...) sluice__inflight_acquire(__VA_ARGS__)
#define sluice_inflight_release(...) sluice__inflight_release(__VA_ARGS__)
#define sluice_inflight_refund(...) sluice__inflight_refund(__VA_ARGS__)
#define sluice_inflight_available(...) sluice__inflight_available(__VA_ARGS__)
#endif

#endif /* SLUICE_STATIC_INFLIGHT_H */
