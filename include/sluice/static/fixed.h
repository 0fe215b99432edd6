/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/fixed.h - the fixed window's decision, as static inline
 * functions, for the library's own files and for a caller that defines
 * SLUICE_INLINE (common.h, INLINE).  lib/outline.c exports the calls
 * sluice/fixed.h declares from these bodies.  Not an interface: the names
 * and layouts here change in any release.
 */
#ifndef SLUICE_STATIC_FIXED_H
#define SLUICE_STATIC_FIXED_H

#include "../fixed.h"
#include "clock.h"
#include "common.h"
#include "decision.h"
#include "window.h"

/* private slow paths (lib/fixed.c) */
SLUICE_API int sluice_inline_fixed_acquire_slow(sluice_fixed_t *f, uint64_t n, uint64_t now,
                                          sluice_decision_t *d);

SLUICE_API int sluice_inline_fixed_bad_n(const sluice_fixed_t *f, uint64_t n, uint64_t now,
                                   sluice_decision_t *d);

static inline void sluice__fixed_fill(const sluice_fixed_t *f, sluice_decision_t *d, int allowed,
                                      uint64_t limit, uint64_t count, uint64_t h, uint64_t now)
{
	sluice__decision_window(d, allowed, limit, count, h * f->window_ns, f->window_ns, now);
}

SLUICE_NODISCARD static inline int sluice__fixed_acquire_at(sluice_fixed_t *f, uint64_t n, uint64_t now,
                                          sluice_decision_t *d)
{
	/* Relaxed: the limit publishes nothing; this first read gates n and
	 * leases, and the one after the count word confirms it (READINGS
	 * ACROSS A CHANGE). */
	uint64_t L = atomic_load_explicit(&f->limit, memory_order_relaxed);
	if (SLUICE_UNLIKELY(n - 1 >= L)) {
		/* With leases L is 0 and the ring decides, inline here as the
		 * ring's own acquire is (a call into fixed.c cost 34 more
		 * instructions per decision than the ring: perf/instructions.sh). */
		if (f->ring)
			return sluice__window_acquire_leased(f->ring, n, now, d);
		return sluice_inline_fixed_bad_n(f, n, now, d);
	}
	/* Acquire (free on x86): a word of a later epoch that this decision
	 * goes on to CAS was opened after head reached it, so the check after
	 * the CAS sees that head. */
	uint64_t h = atomic_load_explicit(&f->head, memory_order_acquire);
	uint64_t W = f->window_ns, start = h * W;
	/* Unsigned: a reading before h's window wraps to a huge value and
	 * takes the slow path too, which keeps h (time never runs back).
	 * Below, start <= now < start + W. */
	uint64_t off = now - start;
	if (SLUICE_UNLIKELY(off >= W))
		return sluice_inline_fixed_acquire_slow(f, n, now, d);
	uint64_t tag = h << 32, room = L - n; /* room < 2^32: n <= L */
	/* Acquire (free on x86): pairs with the window's opening (a full
	 * barrier), and keeps the limit's second load below after this one
	 * (READINGS ACROSS A CHANGE). */
	uint64_t w = atomic_load_explicit(&f->word, memory_order_acquire);
	/* One compare for "tagged h" and "count + n <= L": for a word tagged
	 * h, w - tag is its count; for a later tag it is 2^32 or more, for
	 * an earlier one it wraps near 2^64, either way above room.  The rare
	 * branch tells the two apart. */
	uint64_t count = w - tag;
	if (SLUICE_UNLIKELY(count > room)) {
		/* The word counts another epoch: open h's (slow path). */
		if ((w >> 32) != (h & 0xffffffffu))
			return sluice_inline_fixed_acquire_slow(f, n, now, d);
		if (d)
			sluice__fixed_fill(f, d, 0, L, count, h, now);
		return 0;
	}
	/* Seq_cst (an acquire) on success, then head again: a word tagged like h but of
	 * epoch h + k * 2^32 (this decision stalled between its loads and its
	 * CAS while 2^32 windows went by) exists only once head got there, and
	 * its opening synchronises with this CAS.  Head fewer than 2^32 epochs
	 * past h proves the CAS hit h's word; otherwise refuse, leaving n
	 * counted where it landed (under-admission, never over).  A failed CAS
	 * (another thread counted first) goes to the slow path, which loops
	 * on others' progress only: one attempt inline keeps the inline path
	 * short and free of a loop's register pressure. */
	/* The limit again, read after the word (READINGS ACROSS A CHANGE):
	 * a change that landed since the first load sends the decision to
	 * the slow path, which judges it against the limit read there.
	 * Seq_cst, as set_limit's store and the CAS below (a plain load and
	 * the same LOCK CMPXCHG on x86): one total order holds the changes,
	 * the window openings and this decision, so the limit it is judged
	 * against was current while the word counted window h. */
	if (SLUICE_UNLIKELY(atomic_load_explicit(&f->limit, memory_order_seq_cst) != L))
		return sluice_inline_fixed_acquire_slow(f, n, now, d);
	uint64_t seen = w;
	(void)atomic_compare_exchange_strong_explicit(&f->word, &seen, w + n, memory_order_seq_cst,
	                                              memory_order_relaxed);
	/* The word as the CAS found it: the CAS succeeded iff it is w (a
	 * compare of the value, which GCC branches on directly, where the
	 * CAS's boolean costs a setcc and a zero-extend first). */
	if (SLUICE_UNLIKELY(seen != w))
		return sluice_inline_fixed_acquire_slow(f, n, now, d);
	if (SLUICE_UNLIKELY((atomic_load_explicit(&f->head, memory_order_relaxed) - h) >> 32)) {
		/* sluice__same_lap(head, h) failed (written as a shift, as
		 * sluice__window_cas_was_current() does): see above */
		if (d)
			sluice__fixed_fill(f, d, 0, L, L, h, now);
		return 0;
	}
	if (d)
		sluice__decision_admitted(d, L, room - count, W - off, now);
	return 1;
}

SLUICE_NODISCARD static inline int sluice__fixed_acquire(sluice_fixed_t *f, uint64_t n, sluice_decision_t *d)
{
	return sluice__fixed_acquire_at(f, n, sluice__clock_now(f->clock), d);
}

/* SLUICE_INLINE: the calls above, inline (common.h, INLINE). */
#ifdef SLUICE_INLINE
#define sluice_fixed_acquire_at(...) sluice__fixed_acquire_at(__VA_ARGS__)
#define sluice_fixed_acquire(...) sluice__fixed_acquire(__VA_ARGS__)
#endif

#endif /* SLUICE_STATIC_FIXED_H */
