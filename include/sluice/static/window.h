/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/window.h - the sliding window's decision, as static inline
 * functions, for the library's own files and for a caller that defines
 * SLUICE_INLINE (common.h, INLINE).  lib/outline.c exports the calls
 * sluice/window.h declares from these bodies.  Not an interface: the names
 * and layouts here change in any release.
 */
#ifndef SLUICE_STATIC_WINDOW_H
#define SLUICE_STATIC_WINDOW_H

#include "../window.h"
#include "clock.h"
#include "common.h"
#include "decision.h"
#include "stripe.h"

/* private slow paths */
SLUICE_API int sluice_inline_window_acquire_slow(sluice_window_t *w, uint64_t n, uint64_t now,
                                           sluice_decision_t *d);

SLUICE_API int sluice_inline_window_lease_take(sluice_window_t *w, uint64_t n, uint64_t now,
                                         sluice_decision_t *d);

SLUICE_API void sluice_inline_window_fill_refused(sluice_window_t *w, sluice_decision_t *d,
                                            uint64_t limit, uint64_t counted, uint64_t base, uint64_t n,
                                            uint64_t h, uint64_t now);

/* @start: the start of the decision's bucket, h * width. */
static inline void sluice__window_fill_allowed(const sluice_window_t *w, sluice_decision_t *d,
                                               uint64_t limit, uint64_t counted, uint64_t start,
                                               uint64_t now)
{
	sluice__decision_window(d, 1, limit, counted, start, w->window_ns, now);
}

/* private: the fast path's fill, where start <= now < start + width and
 * @counted (after this admission) <= L are known. */
static inline void sluice__window_fill_admitted(const sluice_window_t *w, sluice_decision_t *d,
                                                uint64_t limit, uint64_t counted, uint64_t start,
                                                uint64_t now)
{
	d->allowed = 1;
	d->limit = limit;
	d->remaining = limit - counted;
	d->retry_after_ns = 0;
	d->delay_ns = 0;
	d->reset_ns = w->window_ns - (now - start);
	d->now_ns = now;
}

/*
 * An admission spent from a lease.  d->remaining is L minus what the
 * window had counted (leases included) when this cell last took from the
 * bucket: read from this CPU's own line, because reading the bucket word
 * on every decision would pull the line other CPUs write.  It may be stale
 * by what other CPUs took since; when the cell holds no snapshot for h
 * (rare), the shared words are read.
 */
static inline void sluice__window_fill_leased(const sluice_window_t *w, sluice_decision_t *d,
                                              const struct sluice_window_cell *cell, uint64_t h,
                                              uint64_t now)
{
	uint64_t seen = atomic_load_explicit(&cell->seen, memory_order_relaxed);
	/* A spend checks no limit (its permits were counted against the
	 * taker's): report the current one.  Relaxed: it publishes nothing. */
	uint64_t L = atomic_load_explicit(&((sluice_window_t *)w)->limit, memory_order_relaxed);
	uint64_t counted = L; /* h already closed: nothing remains */
	if ((seen >> 32) == SLUICE__TAG(h)) {
		counted = seen & 0xffffffffu;
	} else {
		uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
		uint64_t s = atomic_load_explicit(&w->slots[h & w->mask].word, memory_order_relaxed);
		if ((c >> 32) == SLUICE__TAG(h) && (s >> 32) == SLUICE__TAG(h))
			counted = (c & 0xffffffffu) + (s & SLUICE__SLOT_OWN);
	}
	sluice__window_fill_allowed(w, d, L, counted, h * w->width_ns, now);
}

/*
 * private: after a successful CAS on a word tagged with the low 32 bits of
 * epoch h, did the CAS hit epoch h itself?  A word tagged like h but of
 * epoch h + k * 2^32 (k >= 1: a decision stalled between its loads and its
 * CAS while the ring went round 2^32 times) exists only once head has
 * reached that epoch; the CAS that hit it was an acquire that synchronised
 * with the word's opening, which came after head got there, so this load
 * then sees head >= h + 2^32.  A head fewer than 2^32 epochs past h proves
 * the CAS was on h's word.  When it is not, the caller reports a refusal
 * and leaves its CAS counted where it landed: never over-admission, at
 * most n under-admitted by a decision that stalled that long.
 */
static inline int sluice__window_cas_was_current(sluice_window_t *w, uint64_t h)
{
	/* sluice__same_lap(head, h), written as a shift: GCC compares with
	 * 2^32 - 1 through a register it must load first. */
	return ((atomic_load_explicit(&w->head, memory_order_relaxed) - h) >> 32) == 0;
}

/* private: fill @d for a decision that stalled across 2^32 epochs (see
 * sluice__window_cas_was_current): refused, nothing known to remain, may
 * be retried at once. */
static inline void sluice__window_fill_stale(const sluice_window_t *w, sluice_decision_t *d,
                                             uint64_t limit, uint64_t now)
{
	if (!d)
		return;
	d->allowed = 0;
	d->limit = limit;
	d->remaining = 0;
	d->retry_after_ns = 0;
	d->delay_ns = 0;
	d->reset_ns = w->window_ns;
	d->now_ns = now;
}

/* private: the shared words of epoch h are open and its bucket unsealed */
static inline int sluice__window_open(uint64_t c, uint64_t s, uint64_t h)
{
	uint64_t tag = h << 32;
	return ((((c ^ tag) | (s ^ tag)) >> 32) | (s & SLUICE__SLOT_SEALED)) == 0;
}

/*
 * private: spend n permits of epoch h from @cell's lease.  Returns 1
 * admitted, 0 when the cell holds fewer (or another epoch's), -1 when the
 * spend took permits it cannot prove were h's (a stall across 2^32 epochs:
 * report a refusal; what it took is lost).
 * The cell's epoch only grows (deposits never lower it), so an epoch read
 * as h before the CAS is h or newer at the CAS; a newer deposit with the
 * same 32-bit tag is h + k * 2^32 and the head check after the CAS sees it.
 */
static inline int sluice__window_lease_spend(sluice_window_t *w, struct sluice_window_cell *cell,
                                             uint64_t n, uint64_t h, uint64_t now,
                                             sluice_decision_t *d)
{
	/* Acquire: pairs with the deposit's double-width CAS, so the word
	 * loaded next is at least as new as the deposit of this epoch. */
	if (atomic_load_explicit(&cell->epoch, memory_order_acquire) != h)
		return 0;
	uint64_t v = atomic_load_explicit(&cell->word, memory_order_relaxed);
	while ((v >> 32) == SLUICE__TAG(h) && (v & 0xffffffffu) >= n) {
		/* Acquire on success: see sluice__window_cas_was_current(). */
		if (atomic_compare_exchange_weak_explicit(&cell->word, &v, v - n,
		                                          memory_order_acquire,
		                                          memory_order_relaxed)) {
			if (SLUICE_UNLIKELY(!sluice__window_cas_was_current(w, h)))
				return -1;
			if (d)
				sluice__window_fill_leased(w, d, cell, h, now);
			return 1;
		}
	}
	return 0;
}

/* private: the leased path, inline; see the GUARANTEES above. */
static inline int sluice__window_acquire_leased(sluice_window_t *w, uint64_t n, uint64_t now,
                                                sluice_decision_t *d)
{
	/* Relaxed, as every load of the limit: it publishes nothing.  A
	 * spend checks no limit (SET_LIMIT), only n against it here. */
	if (SLUICE_UNLIKELY(n - 1 >= atomic_load_explicit(&w->limit, memory_order_relaxed)))
		return sluice_inline_window_acquire_slow(w, n, now, d);
	/* Acquire: pairs with the release CAS that moved head (window.c). */
	uint64_t h = atomic_load_explicit(&w->head, memory_order_acquire);
	uint64_t start = h * w->width_ns;
	if (SLUICE_UNLIKELY(now - start >= w->width_ns))
		return sluice_inline_window_acquire_slow(w, n, now, d);
	/* Spend from this CPU's lease if it holds n permits of h. */
	int spent = sluice__window_lease_spend(w, &w->cells[sluice__stripe_pick(w->cell_mask)], n, h,
	                                       now, d);
	if (spent) {
		if (SLUICE_UNLIKELY(spent < 0)) {
			sluice__window_fill_stale(
				w, d, atomic_load_explicit(&w->limit, memory_order_relaxed), now);
			return 0;
		}
		return 1;
	}
	/* Short: refuse from reads alone against the limit read now (the
	 * one this refusal reports), or take a new lease (which reads it
	 * once more for its own check: sluice_inline_window_lease_take). */
	uint64_t L = atomic_load_explicit(&w->limit, memory_order_relaxed);
	uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
	uint64_t s = atomic_load_explicit(&w->slots[h & w->mask].word, memory_order_relaxed);
	uint64_t counted = (c & 0xffffffffu) + (s & SLUICE__SLOT_OWN);
	if (sluice__window_open(c, s, h) && counted + n > L) {
		if (d)
			sluice_inline_window_fill_refused(w, d, L, counted, c & 0xffffffffu, n, h, now);
		return 0;
	}
	return sluice_inline_window_lease_take(w, n, now, d);
}

SLUICE_NODISCARD static inline int sluice__window_acquire_at(sluice_window_t *w, uint64_t n, uint64_t now,
                                           sluice_decision_t *d)
{
	/* n = 0, n > L and leases all fail this one compare.
	 * Relaxed: the limit publishes nothing; the one value read here is
	 * what this decision is judged against (SET_LIMIT). */
	uint64_t L = atomic_load_explicit(&w->fast_limit, memory_order_relaxed);
	if (SLUICE_UNLIKELY(n - 1 >= L)) {
		if (w->lease)
			return sluice__window_acquire_leased(w, n, now, d);
		return sluice_inline_window_acquire_slow(w, n, now, d);
	}
	/* Acquire (free on x86), head and cur: a cur or slot word of a later
	 * epoch that this decision goes on to read or CAS was opened after
	 * head reached it, so the check after the CAS sees that head. */
	uint64_t h = atomic_load_explicit(&w->head, memory_order_acquire);
	uint64_t start = h * w->width_ns;
	/* Unsigned: a reading before h's bucket wraps and goes slow too.
	 * Below, start <= now < start + width. */
	uint64_t off = now - start;
	if (SLUICE_UNLIKELY(off >= w->width_ns))
		return sluice_inline_window_acquire_slow(w, n, now, d);
	uint64_t c = atomic_load_explicit(&w->cur, memory_order_acquire);
	_Atomic uint64_t *slot = &w->slots[h & w->mask].word;
	/* Acquire (free on x86): keeps the limit's second load below after
	 * this one (READINGS ACROSS A CHANGE). */
	uint64_t s = atomic_load_explicit(slot, memory_order_acquire);
	/* One test for "cur and the bucket are h's and the bucket is
	 * unsealed" (sluice__window_open): with tag = h's, c - tag is the
	 * base and s - tag the bucket's own count when they are tagged h; a
	 * later tag leaves 2^32 or more, an earlier one wraps near 2^64, and
	 * SEALED (with FOLDED, which is only ever set with it) leaves 2^30 or
	 * more.  Counts below 2^30 (L <= 2^30 - 1 bounds them) then pass with
	 * exactly the values the masks would give; anything else, including a
	 * base of 2^30 or more that no admission can leave, is decided by the
	 * slow path, which makes the full checks. */
	uint64_t tag = h << 32, base = c - tag, own = s - tag;
	if (SLUICE_UNLIKELY((base | own) >> 30))
		return sluice_inline_window_acquire_slow(w, n, now, d);
	uint64_t counted = base + own, room = L - n; /* n <= L */
	if (counted > room) {
		if (d)
			sluice_inline_window_fill_refused(w, d, L, counted, base, n, h, now);
		return 0;
	}
	/* Seq_cst (an acquire) on success: see
	 * sluice__window_cas_was_current() and the limit's load above.  One
	 * attempt inline; a failed CAS (another thread counted first, or
	 * sealed the bucket) goes to the slow path, which retries on others'
	 * progress only.  The CAS's success is read from the value it found
	 * (seen == s), which GCC branches on directly. */
	/* The limit again, read after the bucket word (READINGS ACROSS A
	 * CHANGE): a change that landed since the first load sends the
	 * decision to the slow path, which judges it against the limit read
	 * there.  Seq_cst, as set_limit's stores and the CAS below (a plain
	 * load and the same LOCK CMPXCHG on x86): the limit it is judged
	 * against was current while the bucket of epoch h was open. */
	if (SLUICE_UNLIKELY(atomic_load_explicit(&w->fast_limit, memory_order_seq_cst) != L))
		return sluice_inline_window_acquire_slow(w, n, now, d);
	uint64_t seen = s;
	(void)atomic_compare_exchange_strong_explicit(slot, &seen, s + n, memory_order_seq_cst,
	                                              memory_order_relaxed);
	if (SLUICE_UNLIKELY(seen != s))
		return sluice_inline_window_acquire_slow(w, n, now, d);
	if (SLUICE_UNLIKELY(!sluice__window_cas_was_current(w, h))) {
		sluice__window_fill_stale(w, d, L, now);
		return 0;
	}
	if (d)
		sluice__decision_admitted(d, L, room - counted, w->window_ns - off, now);
	return 1;
}

SLUICE_NODISCARD static inline int sluice__window_acquire(sluice_window_t *w, uint64_t n, sluice_decision_t *d)
{
	return sluice__window_acquire_at(w, n, sluice__clock_now(w->clock), d);
}

/* SLUICE_INLINE: the calls above, inline (common.h, INLINE). */
#ifdef SLUICE_INLINE
#define sluice_window_acquire_at(...) sluice__window_acquire_at(__VA_ARGS__)
#define sluice_window_acquire(...) sluice__window_acquire(__VA_ARGS__)
#endif

#endif /* SLUICE_STATIC_WINDOW_H */
