/*
 * sluice/fixed.h - fixed window counter: at most L permits per aligned window.
 *
 * GUARANTEE (any number of threads, any timing): for every aligned window
 * [k*W, (k+1)*W) of the limiter's timeline, the permits admitted at a time
 * inside it total at most L.  A decision's time is its reading, or the start
 * of the newest window when the reading is older (decision.now_ns).  Check-and-count is one CAS on one 64-bit word
 * that packs the window's epoch tag (low 32 bits of k) with its count, so two
 * racing threads can never both take the last permit.
 *
 * WORST CASE (this is why it is the contrast case): windows are aligned, so
 * an adversary sends L just before a boundary and L just after it: 2L pass
 * within any interval longer than the gap between them, e.g. 2L in 2 ms with
 * a 1 s window.  Use the sliding window (sluice/window.h) when that matters.
 *
 * CLOCK JUMPS: the limiter keeps the newest epoch it has opened (a 64-bit
 * word, advanced by CAS and never moved back).  A reading before it is
 * treated as a reading in that newest window: a clock set back cannot reopen
 * an old window.  A clock that jumps forward opens a new window, as the time
 * says (CLOCK_MONOTONIC, the default base, does not jump).
 *
 * LIMITS: L in 1..SLUICE_FIXED_LIMIT_MAX; W >= the clock's resolution.
 * The epoch tag in the count word is 32 bits: a thread stalled inside one
 * decision for exactly a multiple of 2^32 windows could see an old count as
 * current (ABA); the effect is a refusal, never an extra admission.
 * Memory: 64 bytes (one cache line) of hot state.
 */
#ifndef SLUICE_FIXED_H
#define SLUICE_FIXED_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "common.h"
#include "decision.h"

#define SLUICE_FIXED_LIMIT_MAX 0xffffffffULL

typedef struct sluice_fixed_config {
	uint64_t limit;              /* L: permits per window, >= 1          */
	uint64_t window_ns;          /* W: window length in ns               */
	const sluice_clock_t *clock; /* NULL: &sluice_clock_cached           */
} sluice_fixed_config_t;

typedef struct sluice_fixed {
	/* read-only after init */
	uint64_t limit;
	uint64_t window_ns;
	const sluice_clock_t *clock;
	/* private: written on decision paths, on a line of their own */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t head; /* newest epoch opened */
	_Atomic uint64_t word;                             /* tag32 | count32     */
} sluice_fixed_t;

/*
 * sluice_fixed_init - validate @cfg and set up @f (caller-allocated).
 * Return: 0; -SLUICE_EINVAL (NULL), -SLUICE_ELIMIT, -SLUICE_EWINDOW (W = 0),
 * -SLUICE_ERESOLUTION (W below the clock's resolution), -SLUICE_ECLOCK.
 * On error @f is untouched.  No allocation; not thread-safe for the same @f.
 */
SLUICE_API int sluice_fixed_init(sluice_fixed_t *f, const sluice_fixed_config_t *cfg);
SLUICE_API size_t sluice_fixed_size(void);
/* sluice_fixed_destroy - nothing to free (a fixed window allocates nothing);
 * present so every limiter has the same life cycle.  NULL is fine. */
static inline void sluice_fixed_destroy(sluice_fixed_t *f)
{
	(void)f;
}

/* private slow paths */
SLUICE_API uint64_t sluice__fixed_advance(sluice_fixed_t *f, uint64_t now);
SLUICE_API int sluice__fixed_bad_n(const sluice_fixed_t *f, uint64_t n, uint64_t now,
                                   sluice_decision_t *d);

static inline void sluice__fixed_fill(const sluice_fixed_t *f, sluice_decision_t *d, int allowed,
                                      uint64_t count, uint64_t h, uint64_t now)
{
	uint64_t start = h * f->window_ns;
	if (now < start)
		now = start; /* a reading from before the newest window */
	uint64_t left = f->window_ns - (now - start); /* no overflow near 2^64 */
	d->allowed = allowed;
	d->limit = f->limit;
	d->remaining = count >= f->limit ? 0 : f->limit - count;
	d->reset_ns = left;
	d->retry_after_ns = allowed ? 0 : left;
	d->now_ns = now;
}

/*
 * sluice_fixed_acquire_at - take @n permits at time @now, all or nothing.
 * @f: the limiter.  @n: 1..limit.  @now: ns on the limiter's clock base.
 * @d: NULL, or filled with the decision.
 *
 * Lock-free (one CAS on success; a failed CAS means another thread made
 * progress), no allocation, safe from any number of threads.  Relaxed
 * ordering throughout: the decision depends only on the count word itself,
 * and an admission publishes no other data.
 * Return: 1 admitted, 0 refused, -SLUICE_EINVAL (n = 0), -SLUICE_ETOOBIG
 * (n > limit: can never pass; @d says retry_after_ns = SLUICE_NEVER).
 */
static inline int sluice_fixed_acquire_at(sluice_fixed_t *f, uint64_t n, uint64_t now,
                                          sluice_decision_t *d)
{
	if (SLUICE_UNLIKELY(n - 1 >= f->limit))
		return sluice__fixed_bad_n(f, n, now, d);
	uint64_t h = atomic_load_explicit(&f->head, memory_order_relaxed);
	/* Unsigned: a reading before h's window wraps to a huge value and
	 * takes the slow path too, which keeps h (time never runs back). */
	if (SLUICE_UNLIKELY(now - h * f->window_ns >= f->window_ns))
		h = sluice__fixed_advance(f, now);
	uint64_t w = atomic_load_explicit(&f->word, memory_order_relaxed);
	for (;;) {
		uint64_t tag = h & 0xffffffffu, next;
		if (SLUICE_LIKELY((w >> 32) == tag)) {
			uint64_t count = w & 0xffffffffu;
			if (count + n > f->limit) {
				if (d)
					sluice__fixed_fill(f, d, 0, count, h, now);
				return 0;
			}
			next = w + n;
		} else {
			/* The word counts another epoch.  Its tag is never
			 * newer than head, so if head is still h the word is
			 * older: restart it at n.  If head moved, our h is
			 * stale: retry with the new one. */
			uint64_t h2 = atomic_load_explicit(&f->head, memory_order_relaxed);
			if (h2 != h) {
				h = h2;
				w = atomic_load_explicit(&f->word, memory_order_relaxed);
				continue;
			}
			next = (tag << 32) | n;
		}
		if (atomic_compare_exchange_weak_explicit(&f->word, &w, next, memory_order_relaxed,
		                                          memory_order_relaxed)) {
			if (d)
				sluice__fixed_fill(f, d, 1, next & 0xffffffffu, h, now);
			return 1;
		}
	}
}

/*
 * sluice_fixed_refund_at - give back @n permits of the admission @admitted
 * describes (its decision, as filled by acquire).
 *
 * While that window is current, the count drops by n at once (one CAS).
 * Once the window is over its permits no longer count, so there is nothing
 * left to give back.  Lock-free, no allocation.
 * Return: 0; -SLUICE_EINVAL (NULL, a refused decision, n = 0, or more
 * than the window counts).
 */
SLUICE_API int sluice_fixed_refund_at(sluice_fixed_t *f, uint64_t n,
                                      const sluice_decision_t *admitted);

/* sluice_fixed_acquire - as _at, reading the limiter's clock. */
static inline int sluice_fixed_acquire(sluice_fixed_t *f, uint64_t n, sluice_decision_t *d)
{
	return sluice_fixed_acquire_at(f, n, sluice_clock_now(f->clock), d);
}

#endif /* SLUICE_FIXED_H */
