/* SPDX-License-Identifier: MIT */
/*
 * keyed_decide.c - decisions on one key's state (GCRA, LEAKY, FIXED,
 * WINDOW, INFLIGHT), the algorithms' freshness and first states for the
 * slot protocol, and the public decision entry points (acquire, release),
 * kept in this file so the whole decision path is one translation unit.
 *
 * DESIGN
 *
 * State word: RETIRED:1 | VIRGIN:1 | value:62.  value is the algorithm's
 * state (GCRA, LEAKY: the TAT; FIXED: window:62-c | count:c; INFLIGHT:
 * gen:62-c | count:c, with c = bit_width(L or K); WINDOW: the head epoch).
 * FIXED's window field is the whole window number (init requires W >= 2^c,
 * so every reading below 2^62 ns has its window number below 2^(62-c)):
 * readings are compared with it as numbers, never modulo (issue 10: a tag of
 * 38 bits compared modulo 2^38 let readings cycling through three windows
 * 2^38/3 apart each open a "newer" window, and a CAS stalled across 2^38
 * windows succeed on a later window of equal tag and count).
 * A retired state takes no admission:
 * every decision CASes the state word (WINDOW: the head when it advances),
 * and nothing ever expects a retired value.  Ownership of a state ends with
 * the CAS that retires it; it starts with the CAS that initialises it from a
 * retired value, to a value that no operation on an older owner can expect:
 *   GCRA: max(now, floor), above the retired TAT after a reclaim;
 *   FIXED: the floor's window, newer than the retired one after a reclaim;
 *   WINDOW: head at the floor's bucket, at least N after the retired head
 *     after a reclaim, so every bucket word left by the old owner is out of
 *     the new owner's range, and a late admission by the old owner's
 *     decisions into those words counts for nobody (it was already checked
 *     against the old owner's state, and the old key's next state starts at
 *     the floor, after it);
 *   INFLIGHT: the next generation (62 - c bits, at least 30);
 * and for every algorithm the owner counter beside it + 1 (see "Owners").
 * After an eviction the new state starts fresh too (see successor(): a
 * stale decision of the evicted key can only charge the new key), except
 * that a WINDOW key keeps the evicted key's bucket words: its new head is
 * max(now's bucket, the old head), so it counts what the evicted key
 * admitted in range.  Zeroing them (as this file once did) was a durable,
 * liberal write that a stalled claimer could apply, after 2^32 buckets, to
 * a bucket of the new key; nothing is ever subtracted from a bucket now.
 * A decision loads the tag, checks the key, loads the owner counter and the
 * state (acquire) and checks the tag and the slot's claim counter again
 * (still_ours(): the claim the lookup matched the key words under; the
 * words themselves when a creation gave the slot): the state then belonged
 * to its key (an initialisation is a full barrier after its claim's
 * counter bump, so a state written for a later owner implies a changed tag
 * or claim counter).  Its pair
 * CAS then succeeds only on that owner's state ("Owners").
 *
 *
 * Owners.  The generation in the state word is finite: a release
 * stopped between its load and its CAS while the slot changed owner
 * 2^(62 - c) times could find the same bits under another key and give its
 * n to it (an acquire likewise take its n from it).  The other algorithms
 * had the same hole one level up: a decision checks its key by the tag,
 * whose generation is 16 bits, so one stopped between that check and its
 * CAS while the slot was claimed 2^16 times, and then held another key
 * with the same 32-bit id at the same generation, whose state repeated the
 * bits it read, decided against that key's state; and an EVICT completer
 * stopped across evictions back to the same retired value initialised the
 * slot from its old reading.  So every slot
 * pairs its state with a full 64-bit owner counter (never wraps: 2^64
 * initialisations), written only by the CAS that initialises a state for a
 * new owner: one sluice__pair_cas() of (state, owner) from (retired, o) to
 * (successor, o + 1), expecting the owner the completer read before the
 * state, so a completer stopped across any later initialisation fails too.
 * Every decision (GCRA, LEAKY, FIXED, INFLIGHT; WINDOW's head advance)
 * and every release reads the owner, then the state, then checks the tag
 * and the key's claim, and CASes the pair expecting both: it succeeds only
 * on the state of the owner it checked, after a stall of any length.
 * WINDOW's bucket words are outside the pair: their count CAS stays 64-bit
 * and the admission stands only if head and the owner, read after it,
 * show the same owner less than 2^32 buckets on (win_decide() says why that
 * suffices); the permits of a refused one stay counted in a reused word, as
 * window.h does.  An INFLIGHT count must not stay in another key's state,
 * which no later release would ever free, so both its writes pay the
 * double-width CAS.  Cost: the owner load, the key-word check and a
 * CMPXCHG16B instead of a CMPXCHG per decision, and 16 bytes per slot
 * (64 more for default-sized keys, which fill the first line).
 * Retiring stays a 64-bit CAS on the state alone: it expects the exact
 * fresh value it checked and takes nothing from anyone.
 *
 *
 * Arithmetic: none of its own.  Each algorithm's step is its module's
 * (GCRA, LEAKY: sluice__gcra_step and sluice__gcra_unstep, gcra.h; FIXED
 * and WINDOW's fill: sluice__decision_window, decision.h; WINDOW's closed
 * sum, seal and refusal walk: window_step.h; INFLIGHT:
 * sluice__inflight_fits and sluice__inflight_room, inflight.h).  What is
 * here is the keyed state's encoding and protocol: the state word, the
 * owner pair, eras, and where a key's buckets live.
 *
 * The window ring per key follows lib/window.c (head, epoch-tagged buckets,
 * seal before head moves, helpers finish every step) without `cur`: each
 * decision sums the N - 1 closed buckets, which are sealed and final once
 * head has passed them (head is CASed with release after the seal, and
 * loaded with acquire).  Bucket slots are a power of two >= N.  A bucket's
 * tag is 32 bits of its epoch, so an admission's CAS that was stalled across
 * 2^32 buckets can meet the bucket of h + 2^32 with the same word; as in
 * lib/window.c the admission re-reads head after its CAS (acquire on both)
 * and stands only if head is less than 2^32 past h (win_decide() proves
 * it); otherwise it is a refusal and the permits stay counted.
 *
 *
 * Cost.  A GCRA decision on an existing 11-byte key, admitted, its
 * decision filled: 334 instructions (perf/instructions.sh BUILD
 * keyed-gcra, callgrind, release; the loop's own 3.5 included; 410 before
 * issue 27, 333 before the state line's prefetch).  Per group (callgrind_annotate of a -Ddebug=true release
 * build, about), and what each buys:
 *   ~44 the call: the caller's arguments, the prologue and epilogue of a
 *       function that holds every path (a large frame: struct kid keeps
 *       up to 240 key bytes), the NULL, n and time checks;
 *   ~56 the key: its two words (no copy), the length checks, the AES
 *       hash (out of line: it needs AES-NI, which this file does not
 *       assume); SipHash-1-3 is 404 in all (keyed-gcra-sip);
 *   ~16 its place: group, probe start, tag id, the first slot, prefetched;
 *   ~37 the lookup: tag and length, both key words under one claim
 *       counter (a torn or recycled key never matches: "Claims");
 *   ~37 the era: hw_note() (the newest reading a change needs), the era,
 *       six fields, kp_gcra_ok() (a forged block refuses, never admits),
 *       kp_same() (one era's parameters in full, across a change);
 *   ~20 ownership: the owner counter and the state, still_ours() (the
 *       slot still holds the key after the state was read: a stall across
 *       any number of claims decides on nobody else's state), retired, n;
 *   ~40 the step: the era's parity and the change's reading (a state of
 *       the era before is converted, not refilled), gcra.h's step;
 *   ~20 the fill (gcra.h's, as the plain GCRA's);
 *   ~35 the rest: the state's address, the pair CAS, the answer, the
 *       CLOCK reference bit, the algorithm switch.
 * The plain GCRA is 65 in all (perf/instructions.sh BUILD gcra).  The
 * difference is the hash, the lookup and the three checks every stated
 * guarantee rests on (stalls, shared memory, live changes); issue 27's
 * goal of 250 was not reached by the cuts that keep them.  What is left to try: the parameters beside the state in the
 * slot (the era group), a 16-byte snapshot of state and owner, and the
 * hash inline in an AES-only copy (tried for all algorithms in issue 15:
 * 20 instructions, no measurable time).
 */
#include "sluice/gcra.h"
#include "sluice/inflight.h"
#include "sluice/window.h"
#include "window_step.h"
#include "pair_internal.h"
#include "keyed_internal.h"
#include "refund_internal.h"

/* ---------------------------------------------------------------- */
/* Decisions on one key's state                                       */

/*
 * The era's parameters and the key's state, read as one: the era and its
 * block (kp_load), then the owner counter and the state (acquire on both:
 * pair with the pair CAS that initialised the state and the RMWs after
 * it), then the era again (kp_same): a state written in a later era, or a
 * block rewritten for one, shows a later era there, and the decision
 * starts over with that era's parameters.  So every decision applies one
 * era's parameters, in full, to a state of that era (GCRA, LEAKY: or of
 * the era before, converted); then the checks every decision makes.
 * Return: READ; AGAIN (the era moved, retry counted); BUSY past the bound;
 * STALE, RETIRED, TOOBIG as decide() returns them.
 */
enum { KP_GCRA, KP_WIN, KP_LIMIT }; /* which fields a decision reads */
#define AGAIN 6 /* read_state(): the era moved, read again (counted) */
#define READ 7  /* read_state(): a state of the key, of era p->era   */

/* always_inline: @which must fold to a constant, and GCC otherwise keeps
 * one out-of-line copy for the four callers (callgrind: +36 instructions
 * per GCRA decision). */
__attribute__((always_inline)) static inline int
read_state(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag, const struct kid *id,
           uint64_t n, uint64_t now, struct kp *p, int which, uint64_t *o, uint64_t *a,
           unsigned *tries)
{
	_Atomic uint64_t *st = state_at(k, s);
	if (which == KP_GCRA) { /* a constant at every (inlined) call */
		hw_note(k, now); /* before the era (keyed_live.c) */
		kp_load_gcra(k, p);
	} else if (which == KP_WIN)
		kp_load_win(k, p);
	else
		kp_load_limit(k, p);
	*o = atomic_load_explicit(&st[1], memory_order_acquire);
	*a = atomic_load_explicit(st, memory_order_acquire);
	if (SLUICE_UNLIKELY(!kp_same(k, p->era)))
		return ++*tries > RETRY_MAX ? BUSY : AGAIN;
	/* One era's block, whole: is it one a setter writes?  (Shared
	 * memory: keyed_internal.h, kp_gcra_ok.)  Refused whole if not. */
	if (which == KP_GCRA && SLUICE_UNLIKELY(!kp_gcra_ok(p)))
		return BUSY;
	if (which == KP_WIN && SLUICE_UNLIKELY(!kp_win_ok(p)))
		return BUSY;
	/* Then the tag and the key's claim (still_ours(); as
	 * sluice_keyed_release() says why): the state belonged to this key. */
	if (!still_ours(k, s, tag, id))
		return STALE;
	if (*a & S_RET)
		return RETIRED;
	if (SLUICE_UNLIKELY(n > p->nmax))
		return TOOBIG; /* a change lowered the largest n */
	return READ;
}

/*
 * The decisions' one loop (GCRA, LEAKY, FIXED, INFLIGHT, and the refunds):
 * read the era and the key's state (read_state), let the algorithm's step
 * look at them, and, when the step wants the state changed, CAS the pair
 * (state, owner) from (a, o) to (next, o): a pair CAS expecting the owner
 * too, so it succeeds only on owner o's state, never on a later owner's
 * state that repeats a's bits (the same 32-bit id at the same generation,
 * 2^16 claims later; or 2^(62 - c) INFLIGHT generations), however long
 * this call stalled (DESIGN, "Owners"); and only on the exact word a, so
 * on a state still of era p.era (GCRA, LEAKY: or the one before: a
 * conversion or an admission of a later era changes the word, both move
 * the TAT up).  The CAS is a full barrier: for INFLIGHT it also acquires
 * what the releases it reads published (as sluice_inflight_acquire()); an
 * admission of the others publishes nothing (as their modules).  A failed
 * CAS is a retry, counted in the call's bound.
 *
 * A step returns STEP_CAS with *next (and @d filled as the decision the
 * CAS makes, which stands only if it succeeds: a failed CAS reads again
 * and the step fills @d again), or the call's answer: 0 (refused, @d
 * filled), TOOBIG, CANCEL (a refund that cannot be made), or AGAIN (the
 * era moved under loads of its own: read again, counted).  @which and
 * @step fold to constants at every (inlined) call, so each algorithm
 * compiles to its own straight loop.
 */
#define STEP_CAS 8 /* a step's "CAS the state to *next" */
#define CANCEL 9   /* a refund's step: nothing can be given back */
#define EXPIRED 10 /* a refund's step: the admission's window is over */
typedef int (*step_fn)(const sluice_keyed_t *k, const struct kp *p, uint64_t a, uint64_t n,
                       uint64_t now, sluice_decision_t *d, const void *ctx, uint64_t *next);

__attribute__((always_inline)) static inline int
decide_loop(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag, const struct kid *id,
            uint64_t n, uint64_t now, sluice_decision_t *d, unsigned *tries, int which,
            step_fn step, const void *ctx)
{
	_Atomic uint64_t *st = state_at(k, s);
	for (;;) {
		struct kp p;
		uint64_t o, a, next;
		int r = read_state(k, s, tag, id, n, now, &p, which, &o, &a, tries);
		if (r == AGAIN)
			continue;
		if (r != READ)
			return r;
		r = step(k, &p, a, n, now, d, ctx, &next);
		if (r == AGAIN) { /* the era moved under the step's own loads */
			if (++*tries > RETRY_MAX)
				return BUSY;
			continue;
		}
		if (r != STEP_CAS)
			return r;
		STALL(STALL_DECIDE, st);
		if (sluice__pair_cas(st, a, o, next, o))
			return 1;
		if (++*tries > RETRY_MAX)
			return BUSY;
	}
}

/* GCRA, LEAKY: gcra.h's step on the key's TAT. */
static inline int gcra_step(const sluice_keyed_t *k, const struct kp *p, uint64_t a, uint64_t n,
                            uint64_t now, sluice_decision_t *d, const void *ctx, uint64_t *next)
{
	(void)ctx;
	/* A reading before the change's is read as the change's (keyed
	 * live.c: no state of the era before two changes is then still owed
	 * anything). */
	uint64_t t = now > p->tc ? now : p->tc;
	uint64_t par = (p->era & 1) ? S_PAR : 0, x = a & S_VAL;
	/* A state of the era before, or a TAT below the change's reading (a
	 * full bucket at the change, whatever era wrote it: keyed_live.c),
	 * is read through the change's rule. */
	if (SLUICE_UNLIKELY((a & S_PAR) != par || x < p->tc)) {
		struct kp q = *p; /* with the era before's T and tau, same era */
		kp_load_before(k, &q);
		if (!kp_same(k, q.era))
			return AGAIN;
		x = sluice__keyed_gcra_convert(&q, x);
	}
	/* n <= b: need <= tau < 2^62 for the values a setter writes; any
	 * other value is only wrong, never out of range (unsigned, the fits
	 * test first).  The step is gcra.h's own. */
	uint64_t tau = p->tau, tat;
	uint64_t delay = sluice__gcra_step(x, n * p->interval, t, tau, TMAX, &tat);
	if (delay > 0) { /* SLUICE_NEVER: it never fits */
		if (d)
			sluice__gcra_fill(d, 0, p->nmax, tau, p->recip, p->shift, t, x, delay);
		return 0;
	}
	/* Two fills, each with its `allowed` a constant, fold better than
	 * one (callgrind: 12 instructions a decision). */
	if (d)
		sluice__gcra_fill(d, 1, p->nmax, tau, p->recip, p->shift, t, tat, 0);
	*next = par | tat;
	return STEP_CAS;
}

/* FIXED, WINDOW: the limit of the window (the range ending at bucket) @e
 * in era @p: the era's own limit from p->from on, the cap before
 * (keyed_live.c). */
static inline uint64_t win_limit(const struct kp *p, uint64_t e)
{
	return e >= p->from ? p->limit : p->cap;
}

/* FIXED: the key's window and count.  The count word is self-contained (as
 * fixed.h) and names its window in full, so a CAS that succeeds after any
 * stall succeeded on exactly the window and count checked here. */
static inline int fixed_step(const sluice_keyed_t *k, const struct kp *p, uint64_t a,
                             uint64_t n, uint64_t now, sluice_decision_t *d, const void *ctx,
                             uint64_t *next)
{
	(void)ctx;
	const uint64_t cmask = (1ULL << k->cbits) - 1;
	uint64_t e = now / k->window_ns; /* < 2^(62 - cbits): fits the field */
	/* The window number in full (no modulo): a reading in a later window
	 * opens it, any other reading counts in the key's window, whatever
	 * the sequence of readings (keyed.h, CLOCK JUMPS).  A count above L
	 * (a forged state) only refuses. */
	uint64_t we = (a & S_VAL) >> k->cbits, count = a & cmask, used;
	if (e > we) {
		used = e; /* a newer window: its count starts at n */
		count = 0;
		*next = (e << k->cbits) | n;
	} else {
		used = we;     /* this window, or a reading before it */
		*next = a + n; /* count + n <= L < 2^cbits: no carry */
	}
	uint64_t lim = win_limit(p, used);
	if (lim > cmask)
		lim = cmask; /* a forged limit: the count never carries */
	uint64_t start = sluice__sat_mul(used, k->window_ns);
	if (count + n > lim) {
		if (d) /* retry: the window's end, as fixed.h's */
			sluice__decision_window(d, 0, lim, count, start, k->window_ns, now);
		return 0;
	}
	if (d)
		sluice__decision_window(d, 1, lim, count + n, start, k->window_ns, now);
	return STEP_CAS;
}

/* INFLIGHT: the key's count of held permits (inflight.h's test and fill). */
static inline int inflight_step(const sluice_keyed_t *k, const struct kp *p, uint64_t a,
                                uint64_t n, uint64_t now, sluice_decision_t *d,
                                const void *ctx, uint64_t *next)
{
	(void)ctx;
	const uint64_t cmask = (1ULL << k->cbits) - 1;
	uint64_t lim = p->limit > cmask ? cmask : p->limit; /* forged: no carry */
	if (SLUICE_UNLIKELY(n > lim))
		return TOOBIG;
	uint64_t held = a & cmask;
	int ok = sluice__inflight_fits(held, n, lim); /* a forged count: refuse */
	if (d) /* as inflight.h's */
		sluice__inflight_fill(d, ok, lim, sluice__inflight_room(ok ? held + n : held, lim),
		                      now);
	*next = a + n;
	return ok ? STEP_CAS : 0;
}

/* always_inline: decide() inlines it into two copies */
static inline __attribute__((always_inline)) int
gcra_decide(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
	    const struct kid *id, uint64_t n, uint64_t now, sluice_decision_t *d,
	    unsigned *tries)
{
	return decide_loop(k, s, tag, id, n, now, d, tries, KP_GCRA, gcra_step, NULL);
}

/* always_inline: decide() inlines it into two copies */
static inline __attribute__((always_inline)) int
fixed_decide(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
	     const struct kid *id, uint64_t n, uint64_t now, sluice_decision_t *d,
	     unsigned *tries)
{
	return decide_loop(k, s, tag, id, n, now, d, tries, KP_WIN, fixed_step, NULL);
}

/* always_inline: decide() inlines it into two copies */
static inline __attribute__((always_inline)) int
inflight_decide(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
		const struct kid *id, uint64_t n, uint64_t now, sluice_decision_t *d,
		unsigned *tries)
{
	return decide_loop(k, s, tag, id, n, now, d, tries, KP_LIMIT, inflight_step, NULL);
}

/* WINDOW: the bucket word of epoch @y of the key whose slot is ctx->s,
 * for window_step.h's walks (relaxed: closed buckets are final once head,
 * loaded with acquire, has passed them). */
struct win_ctx {
	const sluice_keyed_t *k;
	_Atomic uint64_t *s;
};
static inline uint64_t win_word(const void *ctx, uint64_t y)
{
	const struct win_ctx *c = ctx;
	return atomic_load_explicit(bucket(c->k, c->s, y), memory_order_relaxed);
}

/* WINDOW: own count of closed epoch @y, 0 when its word holds another. */
static inline uint64_t closed_own(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t y)
{
	const struct win_ctx c = { k, s };
	return sluice__window_own(win_word(&c, y), y);
}

/* Open @h's bucket (word @w read with acquire, not tagged h) while head is
 * still h (lib/window.c open_slot). */
static void win_open(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t h, uint64_t w)
{
	if (atomic_load_explicit(state_at(k, s), memory_order_acquire) != h)
		return;
	/* Release pairs with the acquire bucket loads in win_decide(). */
	atomic_compare_exchange_strong_explicit(bucket(k, s, h), &w, SLUICE__LO32(h) << 32,
	                                        memory_order_release, memory_order_relaxed);
}

/* Open and seal @h's bucket, then move head h -> @e (window.c advance)
 * while the owner is still @o. */
static void win_advance(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t h, uint64_t o,
                        uint64_t e, unsigned *tries)
{
	_Atomic uint64_t *b = bucket(k, s, h);
	uint64_t w = atomic_load_explicit(b, memory_order_acquire);
	if ((w >> 32) != SLUICE__LO32(h)) {
		win_open(k, s, h, w);
		w = atomic_load_explicit(b, memory_order_acquire);
	}
	/* Bounded: each failure is an admission (or a forged write) into
	 * the bucket, counted in the call's retry bound.  Release (inside):
	 * the sealed, final count is published with head's release below. */
	if (!sluice__window_seal(b, w, h, tries, RETRY_MAX))
		return; /* not sealed: head must not move past it */
	/* A pair CAS (a full barrier, so also the release by which a thread
	 * that loads head >= h + 1 with acquire sees h's bucket sealed and
	 * final).  Fails on a retired head (RETIRED bit), and on any later
	 * owner's head, even one equal to h, however long this call stalled
	 * (as gcra_decide). */
	sluice__pair_cas(state_at(k, s), h, o, e, o);
}

/* always_inline: decide() inlines it into two copies */
static inline __attribute__((always_inline)) int
win_decide(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
	   const struct kid *id, uint64_t n, uint64_t now, sluice_decision_t *d,
	   unsigned *tries)
{
	_Atomic uint64_t *hw = state_at(k, s);
	for (;; ++*tries) {
		if (*tries > RETRY_MAX)
			return BUSY;
		/* The era, the owner, head, the era again (read_state), then
		 * the tag and key (as gcra_decide).  Acquire: pairs with
		 * head's pair CAS (advance) and the initialising pair CAS:
		 * closed buckets are final. */
		struct kp p;
		uint64_t o, h;
		int r = read_state(k, s, tag, id, n, now, &p, KP_WIN, &o, &h, tries);
		if (r == AGAIN)
			continue;
		if (r != READ)
			return r;
		h &= S_VAL; /* a forged VIRGIN bit: ignored */
		uint64_t e = now / k->width_ns;
		if (e > h) {
			win_advance(k, s, h, o, e, tries);
			continue;
		}
		_Atomic uint64_t *b = bucket(k, s, h);
		uint64_t w = atomic_load_explicit(b, memory_order_acquire);
		if ((w >> 32) != SLUICE__LO32(h)) {
			win_open(k, s, h, w);
			continue;
		}
		if (w & SLUICE__SLOT_SEALED) {
			win_advance(k, s, h, o, h + 1, tries); /* another reader saw a later time */
			continue;
		}
		const struct win_ctx wc = { k, s };
		uint64_t base = sluice__window_closed_sum(h, k->buckets, win_word, &wc);
		/* the limit of the range that ends at bucket h (keyed_live.c);
		 * a forged one at most init's largest (the counts stay in
		 * their bits) */
		uint64_t lim = win_limit(&p, h);
		if (SLUICE_UNLIKELY(lim > SLUICE_WINDOW_LIMIT_MAX))
			lim = SLUICE_WINDOW_LIMIT_MAX;
		for (;;) {
			uint64_t counted = base + (w & SLUICE__SLOT_OWN);
			uint64_t start = h * k->width_ns;
			if (counted + n > lim) {
				if (d) /* window_step.h's walk: the oldest leave first */
					sluice__window_refused(d, lim, counted, base, n, h, now,
					                       k->window_ns, k->width_ns, k->buckets,
					                       win_word, &wc);
				return 0;
			}
			STALL(STALL_DECIDE, b);
			/* The bucket word tags its epoch with 32 bits only: after
			 * a stall across 2^32 buckets this CAS can succeed on the
			 * bucket of epoch h + m 2^32 (same slot, same tag, same
			 * count), against a stale base.  So the admission stands
			 * only if head, read after the CAS, is less than 2^32
			 * ahead of h: that bucket was opened while head was at
			 * its epoch (win_open), so a CAS on the bucket of h + m
			 * 2^32 (m >= 1) is followed by a head >= h + 2^32.
			 * Otherwise the permits stay counted where the CAS put
			 * them and the answer is a refusal: fewer admissions,
			 * never more.  Likewise the owner, read after the CAS
			 * (the bucket words are not in the pair CAS): every
			 * write of a later owner to this word (its open, seal
			 * or count) comes after that owner's decision acquired
			 * a head written by its initialising pair CAS (owner
			 * o + 1 or more), and is a release (open, seal: release;
			 * count: this acq_rel CAS), so a CAS here that reads
			 * such a write, or a later one in the word's RMW chain,
			 * synchronises with it, and the owner load after it
			 * sees o + 1 or more: refused, the permits charging
			 * only that later key.  A CAS that reads only writes
			 * made for owner o lands on this key's own word,
			 * checked against this key's base, whatever the stall.
			 * Acq_rel on success: the acquire orders the loads
			 * below after the CAS, the release is what a stale CAS
			 * of an older owner synchronises with (the argument
			 * above, one owner earlier; free on x86: a locked op
			 * either way).  Relaxed on
			 * failure: the word is checked again. */
			if (atomic_compare_exchange_weak_explicit(b, &w, w + n, memory_order_acq_rel,
			                                          memory_order_relaxed)) {
				/* Acquire: pair with head's and the owner's pair
				 * CASes (initialisation, advance). */
				uint64_t after_o = atomic_load_explicit(&hw[1], memory_order_acquire);
				uint64_t after = atomic_load_explicit(hw, memory_order_acquire) &
				                 S_VAL;
				int ok = sluice__same_lap(after, h) && after_o == o;
				if (d) {
					sluice__decision_window(d, ok, lim, counted + n, start,
					                        k->window_ns, now);
					d->retry_after_ns = 0; /* a stale one: at once */
				}
				return ok;
			}
			if ((w >> 32) != SLUICE__LO32(h) || (w & SLUICE__SLOT_SEALED))
				break; /* the epoch moved on: start over */
			if (++*tries > RETRY_MAX)
				return BUSY;
		}
	}
}

/* always_inline: with two callers (acquire_kid()'s copies in
 * sluice_keyed_acquire_at() and sluice_keyed_acquire_many_at()) GCC kept
 * it out of line, 31 more instructions a decision (callgrind). */
static inline __attribute__((always_inline)) int
decide(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
       const struct kid *id, uint64_t n, uint64_t now, sluice_decision_t *d,
       unsigned *tries)
{
	switch (k->algo) {
	case SLUICE_ALGO_FIXED:
		return fixed_decide(k, s, tag, id, n, now, d, tries);
	case SLUICE_ALGO_WINDOW:
		return win_decide(k, s, tag, id, n, now, d, tries);
	case SLUICE_ALGO_INFLIGHT:
		return inflight_decide(k, s, tag, id, n, now, d, tries);
	default:
		return gcra_decide(k, s, tag, id, n, now, d, tries);
	}
}

/* ---------------------------------------------------------------- */
/* Freshness, loss, successors                                        */

/* Is @st (not retired) equivalent to a fresh state at @now?  Else, *loss
 * is what resetting it forgets and *wait the time until it is fresh (or
 * SLUICE_NEVER when unknown). */
int sluice__keyed_state_fresh(const sluice_keyed_t *k, const struct kp *p, _Atomic uint64_t *s,
                              uint64_t st, uint64_t now, uint64_t *loss, uint64_t *wait)
{
	*wait = SLUICE_NEVER;
	switch (k->algo) {
	case SLUICE_ALGO_FIXED: {
		uint64_t e = now / k->window_ns, we = (st & S_VAL) >> k->cbits;
		if (e > we)
			return 1; /* its window is over */
		*loss = st & ((1ULL << k->cbits) - 1);
		if (e == we)
			*wait = (e + 1) * k->window_ns - now;
		return 0;
	}
	case SLUICE_ALGO_WINDOW: {
		uint64_t h = st, e = now / k->width_ns;
		if (h + k->buckets <= e)
			return 1; /* every bucket out of range */
		uint64_t top = e > h ? e : h, sum = 0;
		for (uint64_t j = 0; j < k->buckets && j <= top; j++)
			if (top - j <= h)
				sum += closed_own(k, s, top - j);
		*loss = sum;
		*wait = (h + k->buckets) * k->width_ns - now;
		return 0;
	}
	case SLUICE_ALGO_INFLIGHT:
		*loss = st & ((1ULL << k->cbits) - 1);
		return *loss == 0;
	default: {
		/* As a decision of era p reads it: a state of the era before
		 * converted (so a key the change left owing is not fresh), the
		 * reading no earlier than the change's. */
		uint64_t x = st & S_VAL, t = now > p->tc ? now : p->tc;
		if ((st & S_PAR) != ((p->era & 1) ? S_PAR : 0) || x < p->tc)
			x = sluice__keyed_gcra_convert(p, x);
		if (x < t)
			return 1; /* TAT in the past: the bucket is full */
		*loss = x - t;
		*wait = x - now + 1;
		return 0;
	}
	}
}

/*
 * The first state of a new owner, from the retired @st (see DESIGN): fresh
 * at t = max(now, floor).  After a lossless reclaim the retired state was
 * fresh at the reclaimer's reading, which the floor covers, so the new
 * state is above every value the old owner had (no ABA).  After an eviction
 * (the retired state is not older than t) the new state may repeat a value
 * the evicted owner had; a stale decision of the evicted key whose CAS then
 * succeeds charges the new key (fewer admissions for it), and the evicted
 * key was reset anyway: harmless.
 */
uint64_t sluice__keyed_successor(const sluice_keyed_t *k, const struct kp *p, uint64_t st,
                                 uint64_t floor, uint64_t now)
{
	int virgin = (st & S_VIRGIN) != 0;
	uint64_t r = st & S_VAL, t = now > floor ? now : floor;
	if (t > TMAX)
		t = TMAX; /* a forged floor: every field below stays in range */
	switch (k->algo) {
	case SLUICE_ALGO_FIXED: {
		uint64_t ef = t / k->window_ns, re = r >> k->cbits;
		if (!virgin && ef <= re)
			ef = re; /* evicted in its window: that window, count 0 */
		return ef << k->cbits;
	}
	case SLUICE_ALGO_WINDOW: {
		uint64_t e0 = t / k->width_ns;
		return !virgin && e0 < r ? r : e0; /* never before the old head */
	}
	case SLUICE_ALGO_INFLIGHT: {
		/* the generation takes the 62 - cbits bits above the count */
		uint64_t gen = virgin ? 0 : (r >> k->cbits);
		return ((gen + 1) & (S_VAL >> k->cbits)) << k->cbits;
	}
	default: {
		/* in the era the initialisation read (its parity), never
		 * before that era's change, and after a burst raise no fuller
		 * than b0 of b1 at the later of the change and the floor: the
		 * key it replaces, reclaimed fresh at the floor's reading
		 * (or before the change), held b0 there (keyed_live.c) */
		uint64_t base = floor > p->tc ? floor : p->tc;
		if (t < base)
			t = base;
		if (p->lift)
			base = tmax_add(base, p->lift);
		if (t < base)
			t = base;
		return ((p->era & 1) ? S_PAR : 0) | (t > TMAX ? TMAX : t);
	}
	}
}
/* ---------------------------------------------------------------- */
/* Public decisions                                                   */

/* make_kid(), and on success the lookups counter when the table counts
 * them (SLUICE_KEYED_COUNT_LOOKUPS): the start of every acquire and
 * release (a refund is not counted: it looks up a key that an acquire
 * already counted). */
static inline __attribute__((always_inline)) int
kid_counted(const sluice_keyed_t *k, const void *key, size_t keylen, struct kid *id)
{
	int rc = make_kid(k, key, keylen, id);
	if (rc == 0 && (k->flags & SLUICE_KEYED_COUNT_LOOKUPS))
		stat_lookup(k);
	return rc;
}

/* make_kid() places the key and prefetches its first slot (kid_place());
 * the kid itself is dropped: the decision makes its own. */
void sluice_keyed_prefetch(const sluice_keyed_t *k, const void *key, size_t keylen)
{
	struct kid id;
	if (k && key)
		(void)make_kid(k, key, keylen, &id);
}

/* The largest n of the era in force (relaxed, a hint: a decision checks
 * it in the era it decides in; read_state()).  Only the refusals and the
 * creation read it: a key found needs no second look at the era. */
static uint64_t nmax_hint(const sluice_keyed_t *k)
{
	return atomic_load_explicit(
		&k->live->blk[atomic_load_explicit(&k->live->ctl[1], memory_order_relaxed) & 1]
			 .f[F_NMAX][0],
		memory_order_relaxed);
}

/*
 * The decision on the key @id names (made and counted by kid_counted()),
 * after the call's checks: the one body of sluice_keyed_acquire_at() and
 * of every request of sluice_keyed_acquire_many_at().  Return: as
 * sluice_keyed_acquire_at().
 */
static inline __attribute__((always_inline)) int
acquire_kid(sluice_keyed_t *k, struct kid *id, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	int rc = 0;
	int recreate = 0;
	unsigned tries = 0; /* the call's retry bound (RETRY_MAX) */
	for (;; tries++) {
		if (tries > RETRY_MAX) {
			busy_decision(nmax_hint(k), d, now);
			return SLUICE_EBUSY;
		}
		uint64_t tag = 0;
		_Atomic uint64_t *s = recreate ? NULL : find_live(k, id, &tag);
		int hit = s != NULL;
		if (hit)
			STALL(STALL_LOOKUP, s);
		else {
			/* An n no era in force takes creates no key (a key
			 * found is refused by read_state(), in its era). */
			uint64_t nmax = nmax_hint(k);
			if (n > nmax) {
				sluice__decision_never(d, nmax, now);
				return SLUICE_ETOOBIG;
			}
			id->claim = 0; /* the creation's slot: compare the words */
			int64_t i = sluice__keyed_create(k, id, now, d, &rc, &tag, &tries);
			if (i < 0)
				return rc;
			s = slot_at(k, (uint64_t)i);
		}
		int r = decide(k, s, tag, id, n, now, d, &tries);
		if (r == BUSY) {
			busy_decision(nmax_hint(k), d, now);
			return SLUICE_EBUSY;
		}
		if (r == TOOBIG) { /* n above the largest n of the era it read */
			sluice__decision_never(d, nmax_hint(k), now);
			return SLUICE_ETOOBIG;
		}
		if (r == 0 || r == 1) {
			/* CLOCK reference bit, on lookups that found the key;
			 * relaxed: a hint, and a failed CAS leaves it. */
			if (hit && !(tag & REF))
				atomic_compare_exchange_strong_explicit(&s[0], &tag, tag | REF,
				                                        memory_order_relaxed,
				                                        memory_order_relaxed);
			return r;
		}
		recreate = r == RETIRED; /* the retirer may be gone: claim it */
	}
}

int sluice_keyed_acquire_at(sluice_keyed_t *k, const void *key, size_t keylen, uint64_t n,
                            uint64_t now, sluice_decision_t *d)
{
	if (!k || !key || n == 0)
		return SLUICE_EINVAL;
	if (now > TMAX)
		return SLUICE_ETIME;
	struct kid id;
	int rc = kid_counted(k, key, keylen, &id);
	if (rc != 0)
		return rc;
	return acquire_kid(k, &id, n, now, d);
}

/*
 * Batches.  Two passes: the first checks every request, makes its key
 * (hash, probe start) and issues the prefetches (the key's first slot:
 * kid_place(); its table's era line and the first two lines of both
 * parameter blocks, which hold every field a GCRA decision reads), and
 * no load waits on any of them; the second decides each request with
 * acquire_kid() (inlined: one loop for the three modes), by then with its
 * lines on the way or in cache.  So the misses of a batch overlap instead
 * of being taken one after the other.
 * The keys live on the stack (struct kid, BATCH_MAX of them): no
 * allocation.  All or nothing gives back with sluice_keyed_refund(), as
 * the composite does, in reverse order.
 */
static void prefetch_live(const sluice_keyed_t *k)
{
	const struct sluice__keyed_live *l = k->live;
	__builtin_prefetch(l->ctl);
	for (int b = 0; b < 2; b++) {
		__builtin_prefetch(&l->blk[b].f[0]);
		__builtin_prefetch(&l->blk[b].f[4]); /* the next line: SHIFT, TC */
	}
}

static int request_kid(const sluice_keyed_request_t *r, struct kid *id)
{
	if (!r->table || !r->key || r->n == 0)
		return SLUICE_EINVAL;
	int rc = make_kid(r->table, r->key, r->keylen, id); /* counted when decided */
	if (rc == 0)
		prefetch_live(r->table);
	return rc;
}

int sluice_keyed_acquire_many_at(sluice_keyed_request_t *req, size_t count, uint64_t now,
                                 unsigned flags)
{
	const unsigned modes = SLUICE_KEYED_ALL | SLUICE_KEYED_STOP;
	if (!req || count == 0 || count > SLUICE_KEYED_BATCH_MAX || (flags & ~modes) ||
	    (flags & modes) == modes)
		return SLUICE_EINVAL;
	if (now > TMAX)
		return SLUICE_ETIME;
	if (count == 1) { /* nothing to overlap: the single call, either mode */
		sluice_keyed_request_t *r = req;
		r->result = sluice_keyed_acquire_at(r->table, r->key, r->keylen, r->n, now, r->d);
		return flags ? r->result : r->result == 1;
	}
	struct kid id[SLUICE_KEYED_BATCH_MAX];
	int rc[SLUICE_KEYED_BATCH_MAX];
	for (size_t i = 0; i < count; i++)
		rc[i] = request_kid(&req[i], &id[i]);
	const int all = (flags & SLUICE_KEYED_ALL) != 0;
	/* All or nothing: a request the checks refused asks nothing at all. */
	for (size_t i = 0; all && i < count; i++)
		if (rc[i] != 0) {
			for (size_t j = 0; j < count; j++)
				req[j].result = j == i ? rc[i] : 0;
			return rc[i];
		}
	/* One loop for the three modes, acquire_kid() inlined in it: a
	 * decision of a batch costs what a single call's does (a call of its
	 * own per request was ~20 instructions more a key). */
	sluice_decision_t own[SLUICE_KEYED_BATCH_MAX]; /* ALL: a refund needs the admission's */
	int admitted = 0;
	for (size_t i = 0; i < count; i++) {
		sluice_keyed_request_t *r = &req[i];
		if (rc[i] != 0) { /* STOP: its checks' code is its answer, in its turn */
			r->result = rc[i];
		} else {
			sluice_decision_t *d = r->d || !all ? r->d : &own[i];
			if (r->table->flags & SLUICE_KEYED_COUNT_LOOKUPS) /* counted when decided */
				stat_lookup(r->table);
			r->result = acquire_kid(r->table, &id[i], r->n, now, d);
		}
		if (r->result == 1) {
			admitted++;
			continue;
		}
		if (!flags)
			continue; /* independent requests */
		for (size_t j = i + 1; j < count; j++)
			req[j].result = 0; /* not asked */
		for (size_t j = i; all && j-- > 0;) {
			sluice_keyed_request_t *q = &req[j];
			/* ECANCEL, EEXPIRED: the permits stay counted (keyed.h) */
			(void)sluice_keyed_refund(q->table, q->key, q->keylen, q->n,
			                          q->d ? q->d : &own[j]);
		}
		return r->result;
	}
	return flags ? 1 : admitted;
}

int sluice_keyed_acquire_many(sluice_keyed_request_t *req, size_t count, unsigned flags)
{
	if (!req || count == 0 || !req[0].table)
		return SLUICE_EINVAL;
	return sluice_keyed_acquire_many_at(req, count, sluice_clock_now(req[0].table->clock),
	                                    flags);
}

int sluice_keyed_release(sluice_keyed_t *k, const void *key, size_t keylen, uint64_t n)
{
	if (!k || !key || n == 0)
		return SLUICE_EINVAL;
	if (k->algo != SLUICE_ALGO_INFLIGHT)
		return SLUICE_ENOTSUP;
	struct kid id;
	int rc = kid_counted(k, key, keylen, &id);
	if (rc != 0)
		return rc;
	for (unsigned tries = 0;; tries++) {
		if (tries > RETRY_MAX)
			return SLUICE_EBUSY;
		uint64_t tag;
		_Atomic uint64_t *s = find_live(k, &id, &tag);
		if (!s)
			return SLUICE_ERELEASE;
		_Atomic uint64_t *st = state_at(k, s);
		for (;; tries++) {
			if (tries > RETRY_MAX)
				return SLUICE_EBUSY;
			/* The owner counter, then the state, then the key: a
			 * pair CAS expecting (a, o) below succeeds only while
			 * the state is a and the owner still o (only an
			 * initialisation writes o, always to o + 1, never
			 * back), so a is owner o's state; and owner o is our
			 * key: o was read after find_live() saw our key
			 * published (so o is our key's owner or later), and a
			 * later owner's initialisation (acquired by the loads
			 * of o and a) comes after its claim and key words, so
			 * the tag and the slot's claim counter read below
			 * (still_ours()) would show another key (the counter:
			 * the tag's 16-bit generation alone could repeat).  Acquire on both: pair with
			 * that initialisation's pair CAS (a full barrier) and
			 * with the acquires' CASes on the state. */
			uint64_t o = atomic_load_explicit(&st[1], memory_order_acquire);
			uint64_t a = atomic_load_explicit(st, memory_order_acquire);
			if (!still_ours(k, s, tag, &id))
				break; /* look it up again */
			if ((a & S_RET) || (a & ((1ULL << k->cbits) - 1)) < n)
				return SLUICE_ERELEASE; /* nothing changed */
			STALL(STALL_DECIDE, st);
			/* A full barrier: publishes this holder's writes to the
			 * next acquirer (inflight.h; its CAS on the state word
			 * reads this write).  Fails on any change of the state
			 * or of its owner, however long this call stalled. */
			if (sluice__pair_cas(st, a, o, a - n, o))
				return 0;
		}
	}
}


/*
 * Refund (the composite gives a keyed part back what a later part refused):
 * exact when the key's state is still exactly what the admission left, as
 * gcra.h's cancel and fixed.h's refund are; otherwise nothing is given back
 * (SLUICE_ECANCEL: fewer admissions later, never more).
 *   GCRA, LEAKY: the TAT the admission left is now_ns + reset_ns; if the
 *     state still holds it, in the same era (same parity, and a change
 *     since converts the word, which then differs), it moves back by n T.
 *   FIXED: while the key's window is still the admission's, its count
 *     drops by n.
 *   WINDOW: never (its buckets are shared by every decision of the key
 *     and the ring moves on): ECANCEL.
 * The CAS is the decisions' pair CAS of (state, owner), after the same
 * reads and key checks (read_state), so a refund stopped for any time gives
 * nothing to a later owner of the slot, nor to a later state of this key.
 */
/* FIXED's give-back: while the key's window is still the admission's
 * (@ctx), its count drops by n. */
static inline int fixed_unstep(const sluice_keyed_t *k, const struct kp *p, uint64_t a,
                               uint64_t n, uint64_t now, sluice_decision_t *d, const void *ctx,
                               uint64_t *next)
{
	(void)p, (void)now, (void)d;
	const sluice_decision_t *admitted = ctx;
	const uint64_t cmask = (1ULL << k->cbits) - 1;
	uint64_t we = (a & S_VAL) >> k->cbits, aw = admitted->now_ns / k->window_ns;
	if (we > aw)
		return EXPIRED; /* the key is in a later window: that one is over */
	if (we != aw || (a & cmask) < n)
		return CANCEL; /* not this key's window, or not this much */
	*next = a - n;
	return STEP_CAS;
}

/* GCRA, LEAKY: gcra.h's give-back step, while the state still holds the
 * TAT the admission (@ctx) left, in the same era. */
static inline int gcra_unstep(const sluice_keyed_t *k, const struct kp *p, uint64_t a,
                              uint64_t n, uint64_t now, sluice_decision_t *d, const void *ctx,
                              uint64_t *next)
{
	(void)k, (void)now, (void)d;
	const sluice_decision_t *admitted = ctx;
	uint64_t par = (p->era & 1) ? S_PAR : 0, x = a & S_VAL, prev;
	uint64_t left = admitted->now_ns + admitted->reset_ns;
	/* no booking before the change */
	if (admitted->reset_ns > TMAX || admitted->now_ns > TMAX || (a & S_PAR) != par ||
	    x != left || !sluice__gcra_unstep(x, n * p->interval, p->tc, &prev))
		return CANCEL; /* decided on since, or another era */
	*next = par | prev;
	return STEP_CAS;
}

/* One refund on the key's slot: the decisions' loop (read_state, then the
 * pair CAS of (state, owner) after the same reads and key checks), so a
 * refund stopped for any time gives nothing to a later owner of the slot,
 * nor to a later state of this key. */
static int refund_once(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
                       const struct kid *id, uint64_t n, const sluice_decision_t *admitted,
                       unsigned *tries)
{
	int r = k->algo == SLUICE_ALGO_FIXED
		        ? decide_loop(k, s, tag, id, n, 0, NULL, tries, KP_WIN, fixed_unstep, admitted)
		        : decide_loop(k, s, tag, id, n, 0, NULL, tries, KP_GCRA, gcra_unstep, admitted);
	if (r == 1)
		return 0;
	if (r == EXPIRED)
		return SLUICE_EEXPIRED;
	/* BUSY: the bound; the rest (the key's state gone or retired, a
	 * change that lowered the largest n, decided on since): nothing */
	return r == BUSY ? SLUICE_EBUSY : SLUICE_ECANCEL;
}

int sluice_keyed_refund(sluice_keyed_t *k, const void *key, size_t keylen, uint64_t n,
                        const sluice_decision_t *admitted)
{
	if (!k || !key || !sluice__names_admission(admitted, n))
		return SLUICE_EINVAL;
	if (k->algo == SLUICE_ALGO_INFLIGHT)
		return sluice_keyed_release(k, key, keylen, n); /* ends what it took */
	if (k->algo == SLUICE_ALGO_WINDOW)
		return SLUICE_ECANCEL;
	struct kid id;
	uint64_t tag = 0;
	int rc = make_kid(k, key, keylen, &id); /* not counted: its acquire was */
	if (rc != 0)
		return rc;
	_Atomic uint64_t *s = find_live(k, &id, &tag);
	if (!s)
		return SLUICE_ECANCEL; /* reclaimed (fresh) or evicted: nothing owed */
	unsigned tries = 0;
	return refund_once(k, s, tag, &id, n, admitted, &tries);
}
