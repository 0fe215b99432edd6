/* SPDX-License-Identifier: MIT */
/*
 * anchor_internal.h - the anchor protocol decay and warm-up share (never
 * installed): a 64-bit time kept in a narrow field of one state word,
 * relative to an ANCHOR, a separate 64-bit time that only moves forward.
 *
 * Both limiters keep their whole state in ONE 64-bit word so that a
 * decision is a single CAS (check-and-add, check-and-book: no lock, no torn
 * state), and a 64-bit time does not fit next to the rest of the state.
 * So the word holds the time as a field against the anchor, and the anchor
 * and the word are one 16-byte pair (pair_internal.h), laid out anchor
 * first.  Each module chooses its field's width and place (struct
 * sluice__anchor_geom); everything below is the same for both.
 *
 * THE WORD
 *
 *   HOT word   0 | tag:2 | field:FB | low:FS
 *     field = (t / u) mod 2^FB, u = unit_ns = 2^g: t is on the u grid and
 *     lies in [A, A + R), A the anchor, R = 2^FB u; it decodes as
 *     A + ((field - A/u) mod 2^FB) * u.  `low` is the module's (stored
 *     permits, a count).  tag = (A / (R/4)) mod 4 names the anchor the
 *     word is read against.
 *   SELF word  1 | T/2:63
 *     a self-contained state "as of T" that needs no anchor (warm-up:
 *     fully cold; decay: count 0).  It announces the anchor
 *     self_anchor(T) = T rounded down to even and to u.
 *
 * The anchor changes in exactly two ways, and always AFTER the word has
 * announced the change, so the word alone says what the anchor must become
 * and any thread can finish a half-done change (lock-free helping):
 *   - step: the word's tag goes from tag(A) to tag(A)+1 (same field), then
 *     anchor A -> A + R/4.  Legal when t >= A + R/4, so the field decodes
 *     to the same time against either anchor.
 *   - jump: the word becomes SELF(T), then anchor A -> self_anchor(T).
 * A new limiter is SELF(0) with anchor 0: the self-contained state stays
 * what it is as time passes (cold stays cold, empty stays empty), so that
 * is its state at every time, and its first reading re-anchors it wherever
 * the reading lies (the modules never read the clock at init).
 *
 * A reader takes a consistent snapshot: anchor, word, anchor again (equal,
 * so the anchor did not move meanwhile; it never moves back).  In it, a
 * HOT word's tag is tag(A) (read against A) or tag(A)+1 (a step is
 * pending: help it and look again); a SELF word's announced anchor is A,
 * or later (pending jump: help, look again).
 *
 * Why a write cannot use a stale anchor: every anchor change is preceded
 * by a change of the word, so if the CAS from the snapshot's word succeeds,
 * the anchor is still the snapshot's, up to ABA: the word would have to
 * come back bit for bit with a different anchor (the same time modulo R
 * after a jump and the same `low`) while this thread stalls between its
 * loads and its CAS.
 *
 * Re-anchoring: a decision whose time t is R/2 or more past the anchor
 * first moves the anchor.  If the module's state is self-contained at
 * self_anchor(t) (fully cold, forgotten) it writes SELF(t): exact, as that
 * state does not change with time.  Otherwise the module guarantees (by its
 * choice of u) that a live state's time is at least A + R/4, and a step is
 * legal: warm-up, used within P of t, has next > t - P - u >= A + R/4 (u is
 * chosen so that R/4 >= P + 2 cost_max + 2u); decay, a count still alive at
 * t, was written less than flush_ns before it (R/4 >= flush_ns + 2u).
 *
 * Stalls of any length: the tag has 2 bits and the field FB, so a thread
 * stalled between its snapshot and its CAS while the anchor moves on by
 * multiples of R can find the word back bit for bit under a later anchor,
 * and its CAS would then write (book, count, forget, give back) against the
 * wrong time.  So every write of the word from a snapshot is a double-width
 * CAS of (anchor, word) together (sluice__anchor_write()): it fails if the
 * anchor moved at all since the snapshot.  A word that comes back under the
 * same anchor is the same state, so that ABA is harmless.  The anchor
 * itself is a full 64-bit time that only grows: its own CAS cannot meet an
 * ABA.  Writes that only re-tag or announce (a step, a jump) are pair
 * CASes too, so nothing a stalled thread writes lands on another anchor;
 * the states sluice__anchor_snapshot() still tolerates (a SELF word older
 * than the anchor, a HOT word with a far tag) are read toward fewer
 * admissions, so no call can spin on them.
 *
 * Memory orders: the snapshot's loads are acquires and every CAS that
 * succeeds is a release.  A thread that writes a HOT word first read the
 * anchor it is relative to (acquire); its release CAS on the word then
 * guarantees that a reader who acquires the word sees that anchor or a
 * later one.  An anchor CAS is a release of the announcing word it was read
 * after, so a reader who sees the new anchor sees that word or a later one.
 * The pair CAS is a full barrier on success (pair_internal.h: CMPXCHG16B,
 * CASPAL or LDXP/STLXP + DMB), so a release.  What the proof needs from the
 * hardware, and arm64 gives as x86-64 does: the snapshot's three acquires
 * stay in program order (LDAR orders every later access after it); and the
 * anchor CAS is cumulative: a helper releases an anchor after only READING
 * the announcing word another thread wrote, and a reader that acquires the
 * new anchor must see that word too.  Release is cumulative on ARMv8
 * because the architecture is other-multi-copy atomic (a write is seen by
 * all other cores at once), so the chain writer -> helper (acquire) ->
 * helper's release CAS -> reader (acquire) carries the word; no fence is
 * needed beyond these orders on either architecture.
 *
 * THE ERA BIT (warm-up only; decay never sets it, and for it everything
 * below is exactly as if the bit did not exist).  Every anchor a move
 * produces is even (a jump rounds T down to even, a step adds R/4), so bit
 * 0 of the anchor word is free: warm-up keeps there the parity of the
 * parameter set its word is written under (warmup.c, SET_RATE).  Times are
 * taken from the anchor word with the bit cleared (snap.anchor); the CASes
 * compare and keep the whole word (snap.raw), so a move keeps the era and
 * a write fails if the era changed since its snapshot.  Only
 * sluice__anchor_write_era() flips the bit, together with the word.  The
 * anchor word can then come back to a value it had (two flips, no move in
 * between); warmup.c's DESIGN says why that is harmless there: the flip
 * writes a word no earlier state had.
 */
#ifndef SLUICE_ANCHOR_INTERNAL_H
#define SLUICE_ANCHOR_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "pair_internal.h"

#define SLUICE__ANCHOR_SELF_BIT (1ULL << 63)
#define SLUICE__ANCHOR_TAG_SHIFT 61
#define SLUICE__ANCHOR_TAG_MASK (3ULL << SLUICE__ANCHOR_TAG_SHIFT)
#define SLUICE__ANCHOR_ERA 1ULL /* bit 0 of the anchor word: see THE ERA BIT */

/*
 * A module's layout of the HOT word: the field of FB bits at FS (the
 * module's `low` part is the FS bits below it; FS + FB = 61), and the
 * grid u = 2^unit_shift.  The modules pass compile-time FS and FB, so the
 * inline functions below fold to the same code as a private copy would.
 */
struct sluice__anchor_geom {
	unsigned field_shift; /* FS */
	unsigned field_bits;  /* FB: R = 2^FB u, R/4 = 2^(FB-2) u */
	unsigned unit_shift;  /* g: u = 2^g */
};

/* What a snapshot found (see sluice__anchor_snapshot()). */
enum sluice__anchor_kind {
	SLUICE__ANCHOR_HOT = 0,   /* a HOT word written against the anchor      */
	SLUICE__ANCHOR_STALE = 1, /* a HOT word whose tag is 2 or 3 quarters off */
	SLUICE__ANCHOR_SELF = 2,  /* a SELF word (as of the anchor or before)    */
};

/* A consistent view of the state, against the anchor it was read with. */
struct sluice__anchor_snap {
	uint64_t word;   /* the word as loaded: the CAS's expected value      */
	uint64_t anchor; /* the anchor it is read against (a time: era clear) */
	uint64_t raw;    /* the anchor word as loaded, era bit included       */
	uint64_t time;   /* HOT/STALE: the field decoded; SELF: the anchor     */
	uint64_t low;    /* HOT/STALE: the word's low FS bits; SELF: 0         */
	int kind;        /* enum sluice__anchor_kind                          */
};

/* R/4, ns. */
static inline uint64_t sluice__anchor_quarter(struct sluice__anchor_geom g)
{
	return 1ULL << (g.field_bits - 2 + g.unit_shift);
}

/* tag(A) = (A / (R/4)) mod 4. */
static inline uint64_t sluice__anchor_tag(struct sluice__anchor_geom g, uint64_t a)
{
	return (a >> (g.field_bits - 2 + g.unit_shift)) & 3;
}

/* @t rounded down to the grid u. */
static inline uint64_t sluice__anchor_grid_down(struct sluice__anchor_geom g, uint64_t t)
{
	return t & ~((1ULL << g.unit_shift) - 1);
}

/* SELF(@t): the module's self-contained state as of @t. */
static inline uint64_t sluice__anchor_self_word(uint64_t t)
{
	return SLUICE__ANCHOR_SELF_BIT | (t >> 1);
}

/* The anchor a SELF word announces: its T rounded down to even and to u. */
static inline uint64_t sluice__anchor_self_anchor(struct sluice__anchor_geom g, uint64_t word)
{
	return sluice__anchor_grid_down(g, (word & ~SLUICE__ANCHOR_SELF_BIT) << 1);
}

/* The HOT word for time @t (on the grid, in [anchor, anchor + R)) and the
 * module's @low bits, against @anchor. */
static inline uint64_t sluice__anchor_hot_word(struct sluice__anchor_geom g, uint64_t anchor,
                                               uint64_t t, uint64_t low)
{
	uint64_t fmask = (1ULL << g.field_bits) - 1;
	return (sluice__anchor_tag(g, anchor) << SLUICE__ANCHOR_TAG_SHIFT) |
	       (((t >> g.unit_shift) & fmask) << g.field_shift) | low;
}

/* The word with its low FS bits replaced by @low (same time, same tag). */
static inline uint64_t sluice__anchor_with_low(struct sluice__anchor_geom g, uint64_t word,
                                               uint64_t low)
{
	return (word & ~((1ULL << g.field_shift) - 1)) | low;
}

/* The time a HOT word's field stands for against @anchor: the latest time
 * at or after @anchor, below anchor + R, with that field. */
static inline uint64_t sluice__anchor_decode(struct sluice__anchor_geom g, uint64_t word,
                                             uint64_t anchor)
{
	uint64_t fmask = (1ULL << g.field_bits) - 1;
	uint64_t field = (word >> g.field_shift) & fmask;
	uint64_t base = (anchor >> g.unit_shift) & fmask;
	return anchor + (((field - base) & fmask) << g.unit_shift);
}

/* Finish an announced anchor move from @from to @to (no-op if done). */
static inline void sluice__anchor_help(_Atomic uint64_t *anchor, uint64_t from, uint64_t to)
{
	/* Release: publishes the announcing word (read with acquire before
	 * this) to every thread that acquires the new anchor. */
	atomic_compare_exchange_strong_explicit(anchor, &from, to, memory_order_release,
	                                        memory_order_relaxed);
}

/*
 * sluice__anchor_snapshot - a consistent snapshot of (*@anchor, *@word),
 * helping any announced anchor move; 0 when the caller must look again
 * (it helped a move, or the anchor moved under it).
 *
 * In a consistent snapshot (the anchor read twice the same) the word is one
 * written against that anchor, or one announcing its move.  Anything else
 * can only be left by a thread that stalled between its snapshot and its
 * CAS while the word came back bit for bit under a later anchor (the ABA
 * of the headers' LIMITS): such a thread can write a SELF word announcing
 * an anchor older than the current one, or a HOT word whose tag is two or
 * three quarters off.  Looking again would then find the same word for
 * ever and every call would spin.  So both are returned as states, and the
 * modules read them toward fewer admissions:
 *   - SELF as of a time before the anchor: the self-contained state does
 *     not change with time, so it is the state at the anchor (exact):
 *     kind SELF, time = the anchor.
 *   - a stale HOT word: its field is read against the current anchor, the
 *     latest time at or after the anchor the field can stand for (the time
 *     it was written for is that or R earlier): kind STALE.  Decay takes
 *     the count as younger than it is (it fades later); warm-up takes the
 *     ticket as that latest time and the limiter as fully cold (stored
 *     permits of unknown age could be anything up to M; M is the most
 *     expensive).  The next write from such a snapshot re-tags the word.
 */
static inline __attribute__((always_inline)) int sluice__anchor_snapshot(_Atomic uint64_t *anchor, _Atomic uint64_t *word,
                                          struct sluice__anchor_geom g,
                                          struct sluice__anchor_snap *s)
{
	/* Acquires: pair with the release CASes on both words (see above). */
	uint64_t raw = atomic_load_explicit(anchor, memory_order_acquire);
	uint64_t x = atomic_load_explicit(word, memory_order_acquire);
	if (atomic_load_explicit(anchor, memory_order_acquire) != raw)
		return 0;
	uint64_t a = raw & ~SLUICE__ANCHOR_ERA; /* the time; the era stays in raw */
	if (x & SLUICE__ANCHOR_SELF_BIT) {
		uint64_t sa = sluice__anchor_self_anchor(g, x);
		if (sa > a) {
			/* a jump is pending (keeping the era) */
			sluice__anchor_help(anchor, raw, sa | (raw & SLUICE__ANCHOR_ERA));
			return 0;
		}
		s->time = a; /* sa < a only after a stalled writer: see above */
		s->low = 0;
		s->kind = SLUICE__ANCHOR_SELF;
	} else {
		uint64_t tg = (x >> SLUICE__ANCHOR_TAG_SHIFT) & 3, ta = sluice__anchor_tag(g, a);
		if (tg == ((ta + 1) & 3)) {
			sluice__anchor_help(anchor, raw, raw + sluice__anchor_quarter(g)); /* step */
			return 0;
		}
		s->time = sluice__anchor_decode(g, x, a);
		s->low = x & ((1ULL << g.field_shift) - 1);
		/* tg != ta only after a stalled writer: see above */
		s->kind = tg == ta ? SLUICE__ANCHOR_HOT : SLUICE__ANCHOR_STALE;
	}
	s->word = x;
	s->anchor = a;
	s->raw = raw;
	return 1;
}

/*
 * sluice__anchor_write - replace the snapshot's word by @x, against the
 * snapshot's anchor: one double-width CAS of (anchor, word), which fails if
 * either moved since the snapshot (see "Stalls" above).  A full barrier,
 * so a release: publishes which anchor @x is relative to.
 */
static inline _Bool sluice__anchor_write(_Atomic uint64_t *anchor,
                                         const struct sluice__anchor_snap *s, uint64_t x)
{
	return sluice__pair_cas(anchor, s->raw, s->word, s->raw, x);
}

/*
 * sluice__anchor_write_era - as sluice__anchor_write(), and flip the era
 * bit in the same double-width CAS (warm-up's set_rate: the word @x is
 * written under the other parameter set).  Fails if either word moved.
 */
static inline _Bool sluice__anchor_write_era(_Atomic uint64_t *anchor,
                                             const struct sluice__anchor_snap *s, uint64_t x)
{
	return sluice__pair_cas(anchor, s->raw, s->word, s->raw ^ SLUICE__ANCHOR_ERA, x);
}

/* The anchor a jump at time @t announces (what SELF(@t) names). */
static inline uint64_t sluice__anchor_jump_to(struct sluice__anchor_geom g, uint64_t t)
{
	return sluice__anchor_grid_down(g, t & ~1ULL);
}

/*
 * sluice__anchor_move - move the anchor so that @t (R/2 or more past the
 * snapshot's anchor) is less than R/2 past it: a jump when @self_at_to
 * (the module found its state self-contained at sluice__anchor_jump_to(@t):
 * fully cold, forgotten), else a step (legal by the module's choice of u:
 * see "Re-anchoring" above).  The caller takes a new snapshot afterwards,
 * whether this thread's CASes won or another thread's did.
 */
static inline void sluice__anchor_move(_Atomic uint64_t *anchor, struct sluice__anchor_geom g,
                                       const struct sluice__anchor_snap *s, uint64_t t,
                                       int self_at_to)
{
	if (self_at_to) {
		/* Pair CAS (a release): a reader of SELF(t) then sees an
		 * anchor at least as new as ours. */
		if (sluice__anchor_write(anchor, s, sluice__anchor_self_word(t)))
			sluice__anchor_help(anchor, s->raw,
			                    sluice__anchor_jump_to(g, t) |
			                            (s->raw & SLUICE__ANCHOR_ERA));
		return;
	}
	/* Live at `to`: its time is >= A + R/4, and the field reads the same
	 * against A + R/4.  Announce the step, then make it. */
	uint64_t tg = (sluice__anchor_tag(g, s->anchor) + 1) & 3;
	uint64_t stepped = (s->word & ~SLUICE__ANCHOR_TAG_MASK) | (tg << SLUICE__ANCHOR_TAG_SHIFT);
	if (sluice__anchor_write(anchor, s, stepped))
		sluice__anchor_help(anchor, s->raw, s->raw + sluice__anchor_quarter(g));
}

#endif /* SLUICE_ANCHOR_INTERNAL_H */
