/* SPDX-License-Identifier: MIT */
/*
 * fixed.c - fixed window: validation and the once-per-window slow path.
 *
 * DESIGN: two words.  `head` is the newest epoch (window number, now / W)
 * any thread has opened; it only moves forward, by CAS, so a clock read
 * from before it cannot reopen an old window.  `word` packs the low 32 bits
 * of an epoch with that epoch's count; every admission is one CAS on it.
 * A thread opens the word for epoch h only after seeing head == h, and head
 * only grows, so the word's epoch is never newer than head: that lets the
 * hot path tell an old word from a newer one without comparing wrapped tags.
 * Keeping the full epoch in head also spares the hot path a division: it
 * checks now < (head + 1) * W with one multiply.
 *
 * Stalls of any length: the word carries only 32 bits of its epoch, so it
 * keeps the full epoch beside it (one 16-byte pair), written together with
 * it by the double-width CAS that opens a window (pair_internal.h).  An
 * admission CASes the word alone and then checks head (fixed.h): a CAS
 * that may have hit a word 2^32 windows later is reported as a refusal.
 * A refund, which gives permits out and cannot be taken back, CASes the
 * pair and fails on a reused word.  The same two mechanisms as the ring
 * (window.c, "Stalls of any length"), for the same reasons.
 *
 * Readings across a change (fixed.h).  set_limit's store, the window
 * openings (the pair CAS, a full barrier), every decision's second load
 * of the limit and its count CAS are seq_cst: one total order S (on x86
 * the loads are plain loads and the CASes the LOCK CMPXCHG they were).  A
 * change's stamp is the epoch of the count word at its place in S: the
 * newest window counted in.  An admission into window j loaded the word
 * tagged j (acquire: its opening O_j happens before, so O_j precedes the
 * limit's load in S), then the limit, then CASed the word unchanged:
 * the next opening comes after that CAS in the word's order, so after the
 * load in S.  So the limit it read is the last change before a point of S
 * where the word counts j: a change stamped j or the one in force when j
 * opened, i.e. a limit in force in window j.  An opening counts nothing
 * (it would be judged against a limit read while the word still counted
 * an older window): the opener counts on its next attempt, as any other
 * decision.  A reading older than head's window is decided in head's
 * (CLOCK JUMPS), so no decision is judged in a window older than the
 * change it read.  The window's count is checked by its last admission
 * against its limit: the window holds at most the largest limit in force
 * in it.  The old code read the limit once per call, before the word: a
 * decision that lost its CAS went on across windows against the limit it
 * read before a change (tests/core/test_fixed.c: 11 in a window under 10).
 * Cost: one more load of the limit's line (read-mostly) and a compare on
 * the inline path; one more CAS per window opening.
 *
 * Leases (config.lease > 0): the fixed window is the ring's N = 1 case,
 * so the lease code stays one implementation (window.c's).  init builds
 * a ring of one bucket of width W with leases of B, and stores limit = 0:
 * the inline acquire's first compare (n - 1 >= limit) then always sends
 * the decision to sluice_inline_fixed_bad_n(), which hands it to the ring, so
 * the path without leases pays nothing for the option.  Every other call
 * checks `ring` first.  Why the ring's N = 1 is this module's guarantee:
 * its EXACT bound with N = 1 is "at most L per epoch [kW, (k+1)W)", its
 * head keeps time from running back as `head` does here, and it fills
 * the decision with the same sluice__decision_window().
 */
#include <stdlib.h>

#include "sluice/error.h"
#include "sluice/fixed.h"
#include "fixed_step.h"
#include "pair_internal.h"
#include "clock_internal.h"
#include "refund_internal.h"
#include "validate_internal.h"

/* With leases the window is the ring's N = 1 case (DESIGN): its config. */
static sluice_window_config_t ring_config(const sluice_fixed_config_t *cfg,
                                          const sluice_clock_t *clock)
{
	return (sluice_window_config_t){ .limit = cfg->limit, .window_ns = cfg->window_ns,
		                         .buckets = 1, .clock = clock, .lease = cfg->lease };
}

/* The one validator of init and config_check (clock_internal.h); with
 * leases the ring's own validator decides the rest (its limit range, the
 * lease), as the ring's init would. */
static int validate(const sluice_fixed_config_t *cfg, sluice__step_use_t use,
                    const sluice_clock_t **clock)
{
	if (!cfg)
		return SLUICE_EINVAL;
	int rc = sluice__fixed_validate(cfg->limit, cfg->window_ns);
	if (rc == 0)
		rc = sluice__init_clock(cfg->clock, cfg->window_ns, use, clock);
	if (rc == 0 && cfg->lease) {
		sluice_window_config_t ring = ring_config(cfg, *clock);
		rc = sluice__window_validate_config(&ring, use, clock);
	}
	return rc;
}

int sluice_fixed_config_check(const sluice_fixed_config_t *cfg)
{
	const sluice_clock_t *clock;
	return validate(cfg, SLUICE__ASK, &clock);
}

int sluice_fixed_init(sluice_fixed_t *f, const sluice_fixed_config_t *cfg)
{
	if (!f)
		return SLUICE_EINVAL;
	const sluice_clock_t *clock = NULL;
	int rc = validate(cfg, SLUICE__RECORD, &clock);
	if (rc != 0)
		return rc;
	sluice_window_t *ring = NULL;
	if (cfg->lease) {
		sluice_window_config_t rc_cfg = ring_config(cfg, clock);
		ring = malloc(sizeof(*ring));
		if (!ring)
			return SLUICE_ENOMEM;
		rc = sluice_window_init(ring, &rc_cfg); /* validated: only SLUICE_ENOMEM */
		if (rc != 0) {
			free(ring);
			return rc;
		}
	}

	f->ring = ring;
	/* 0 with leases: every inline decision goes to the ring (DESIGN) */
	atomic_init(&f->limit, ring ? 0 : cfg->limit);
	f->window_ns = cfg->window_ns;
	f->clock = clock;
	atomic_init(&f->head, 0);
	atomic_init(&f->word, 0); /* epoch 0, count 0 */
	atomic_init(&f->epoch, 0);
	return 0;
}

void sluice_fixed_destroy(sluice_fixed_t *f)
{
	if (!f || !f->ring)
		return; /* without leases nothing was allocated */
	sluice_window_destroy(f->ring);
	free(f->ring);
	f->ring = NULL;
}

static uint64_t fixed_advance(sluice_fixed_t *f, uint64_t now)
{
	uint64_t e = now / f->window_ns;
	uint64_t h = atomic_load_explicit(&f->head, memory_order_acquire);
	/* Move head forward to e unless someone already moved it further.
	 * Release: pairs with the acquire loads of head on the decision
	 * paths, which then see the word opened before (nothing is, today:
	 * the word is opened after head; the release costs nothing on x86
	 * and keeps head's modification order a release sequence). */
	while (h < e &&
	       !atomic_compare_exchange_weak_explicit(&f->head, &h, e, memory_order_release,
	                                              memory_order_acquire))
		;
	return h < e ? e : h;
}

/*
 * The slow path: a reading past head's window, or a word still counting an
 * older window.  Opening the word for epoch h is one double-width CAS of
 * (word, epoch): it fails if the pair changed at all since it was read, and
 * it only ever raises the epoch, so a thread that read head long ago can
 * never open (and count into) a window that was already opened.  Every
 * retry follows a CAS another thread won, or a head that moved on.
 */
int sluice_inline_fixed_acquire_slow(sluice_fixed_t *f, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	/* A request above the limit moves nothing, not even head (relaxed: it
	 * publishes nothing).  The limit the decision is judged against is
	 * read in the loop, after the word. */
	uint64_t L0 = atomic_load_explicit(&f->limit, memory_order_relaxed);
	if (n > L0) {
		sluice__decision_never(d, L0, now);
		return SLUICE_ETOOBIG;
	}
	for (;;) {
		uint64_t h = atomic_load_explicit(&f->head, memory_order_acquire);
		if (now - h * f->window_ns >= f->window_ns && now / f->window_ns > h)
			h = fixed_advance(f, now);
		uint64_t w = atomic_load_explicit(&f->word, memory_order_acquire);
		uint64_t e = atomic_load_explicit(&f->epoch, memory_order_acquire);
		/* The limit this attempt is judged against, read after the
		 * word, on every attempt (READINGS ACROSS A CHANGE, DESIGN).
		 * Seq_cst: as on the fast path. */
		uint64_t L = atomic_load_explicit(&f->limit, memory_order_seq_cst);
		if (n > L) {
			sluice__decision_never(d, L, now);
			return SLUICE_ETOOBIG;
		}
		if (e == h && (w >> 32) == (h & 0xffffffffu)) {
			uint64_t count = w & 0xffffffffu;
			if (count + n > L) {
				if (d)
					sluice__fixed_fill(f, d, 0, L, count, h, now);
				return 0;
			}
			/* Seq_cst on success: as on the fast path. */
			if (!atomic_compare_exchange_strong_explicit(&f->word, &w, w + n,
			                                             memory_order_seq_cst,
			                                             memory_order_relaxed))
				continue;
			if (!sluice__same_lap(atomic_load_explicit(&f->head, memory_order_relaxed), h)) {
				if (d)
					sluice__fixed_fill(f, d, 0, L, L, h, now);
				return 0; /* stalled across 2^32 windows: see fixed.h */
			}
			if (d)
				sluice__fixed_fill(f, d, 1, L, count + n, h, now);
			return 1;
		}
		if (e >= h)
			continue; /* a newer window's word (head moved), or a torn read */
		/* Open h's word with a count of 0 and count into it on the next
		 * attempt, with a limit read after this opening: an opening that
		 * counted n would be judged against a limit read while the word
		 * still counted an older window (DESIGN).  Full barrier (the
		 * release the acquire loads of word pair with).  A failure is
		 * another thread's opening or count: look again. */
		(void)sluice__pair_cas(&f->word, w, e, (h & 0xffffffffu) << 32, h);
	}
}

int sluice_inline_fixed_bad_n(const sluice_fixed_t *f, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	if (f->ring) /* leases: the ring decides (DESIGN) */
		return sluice_window_acquire_at(f->ring, n, now, d);
	if (n == 0)
		return SLUICE_EINVAL;
	sluice__decision_never(d, atomic_load_explicit(&((sluice_fixed_t *)f)->limit,
	                                               memory_order_relaxed), now);
	return SLUICE_ETOOBIG;
}

int sluice_fixed_refund(sluice_fixed_t *f, uint64_t n, const sluice_decision_t *admitted)
{
	if (f && f->ring)
		return sluice_window_refund(f->ring, n, admitted);
	uint64_t e, h;
	if (!f || !sluice__names_admission(admitted, n) ||
	    sluice__refund_epoch(admitted, f->window_ns, &f->head, &e, &h) != 0)
		return SLUICE_EINVAL;
	if (e < h)
		return SLUICE_EEXPIRED; /* that window is over: its permits count no more */
	for (;;) {
		uint64_t w = atomic_load_explicit(&f->word, memory_order_acquire);
		uint64_t we = atomic_load_explicit(&f->epoch, memory_order_acquire);
		if (we > e)
			return SLUICE_EEXPIRED; /* a later window opened: e is over */
		if (we < e)
			return SLUICE_EINVAL; /* e never opened: no admission in it */
		if ((w >> 32) != (e & 0xffffffffu))
			continue; /* the word was older than the epoch read: again */
		if ((w & 0xffffffffu) < n)
			return SLUICE_EINVAL; /* more than was ever taken */
		/* Full barrier; fails only when the pair changed: look again. */
		if (sluice__pair_cas(&f->word, w, e, w - n, e))
			return 0;
	}
}

/*
 * The largest n an acquire at @now would admit, read as the slow path
 * reads: head, then the word and its full epoch.  Only reads: a later
 * window than head's is empty whether or not anyone opened it, and a
 * word still of an older epoch means head's window is not opened yet,
 * so it counts nothing either.  A retry follows a head that moved or a
 * window opened between the two loads (another thread's progress).
 */
uint64_t sluice_fixed_available_at(sluice_fixed_t *f, uint64_t now)
{
	if (f->ring)
		return sluice_window_available_at(f->ring, now);
	for (;;) {
		/* Relaxed: the limit publishes nothing. */
		uint64_t L = atomic_load_explicit(&f->limit, memory_order_relaxed);
		/* Acquires: as in the slow path. */
		uint64_t h = atomic_load_explicit(&f->head, memory_order_acquire);
		if (now - h * f->window_ns >= f->window_ns && now / f->window_ns > h)
			return L; /* a window later than any opened: empty */
		uint64_t w = atomic_load_explicit(&f->word, memory_order_acquire);
		uint64_t e = atomic_load_explicit(&f->epoch, memory_order_acquire);
		if (e == h && (w >> 32) == (h & 0xffffffffu)) {
			uint64_t count = w & 0xffffffffu;
			return count >= L ? 0 : L - count;
		}
		if (e < h)
			return L; /* head's window not opened yet: empty */
	}
}

uint64_t sluice_fixed_available(sluice_fixed_t *f)
{
	return sluice_fixed_available_at(f, sluice_clock_now(f->clock));
}

/*
 * set_limit is one store: the count stays where it is (nothing forgotten,
 * nothing minted) and every decision compares it with the limit it read
 * after the count word.  Seq_cst: it takes its place in the one total
 * order with the window openings and the decisions' second loads of the
 * limit (DESIGN, readings across a change); the window it lands in is the
 * change's stamp.  It orders no other data.
 */
int sluice_fixed_set_limit(sluice_fixed_t *f, uint64_t limit)
{
	if (!f)
		return SLUICE_EINVAL;
	if (f->ring) /* its own range check: SLUICE_ELIMIT above its maximum */
		return sluice_window_set_limit(f->ring, limit);
	if (sluice__fixed_limit_ok(limit) != 0)
		return SLUICE_ELIMIT; /* the validator's range, as init */
	atomic_store_explicit(&f->limit, limit, memory_order_seq_cst);
	return 0;
}
