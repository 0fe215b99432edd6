/* SPDX-License-Identifier: MIT */
/*
 * window.c - sliding window ring: validation, opening and sealing epochs,
 * the slow admission paths (with and without leases), and refusal
 * bookkeeping.
 *
 * DESIGN
 *
 * State: `head` (the newest epoch, full 64 bits, only moves forward), `cur`
 * (tag32(head) | base, base = sum of the N-1 closed buckets before head),
 * and one word per bucket slot: tag32(epoch) | SEALED | FOLDED | own30.
 * Slots are a power of two >= N, so epoch e lives in slot e & mask and any
 * N consecutive epochs use distinct slots.
 *
 * The life of epoch h, each step a CAS that any thread may perform (helping
 * is how the ring stays lock-free: nobody waits for a stalled thread):
 *   1. head: h (CAS from an older epoch, by advance()).
 *   2. open cur: tag h, base(h) computed from the slots of epochs
 *      h-N+1 .. h-1 (open_cur()).
 *   3. open slot: (tag h, own 0) replacing the slot's old, sealed content
 *      (open_slot()).
 *   4. admissions: CAS own += n while base + own + n <= L (a lease take
 *      adds its lease to own in the same CAS).
 *   5. seal: set SEALED and FOLDED in one CAS; after it no admission can
 *      land in this bucket and own is final (seal_and_fold()).
 *   6. head: h -> e (release), only after 2, 3 and 5.
 *
 * Why base(h) is right: step 2 for h reads slots of epochs < h.  Each was
 * sealed and folded before head moved past it (step 6 is a release, and the
 * helper loaded head with acquire), and none of those slots is reused until
 * head passes h, which needs cur tagged h first.  So if a helper's CAS on
 * cur succeeds, cur was unchanged since it read it, head never passed h in
 * between, and the slots it summed were frozen.  A helper that read stale
 * data fails its CAS.  Same argument for the slot open (step 3): a late
 * opener's CAS fails because step 5 changed the word.
 *
 * Old vs new without comparing wrapped tags: a slot, cur or cell is only
 * ever tagged with an epoch that was head, and head only grows, so any
 * tagged word is never newer than head.  A helper reads the word, then
 * checks head is still h: then the word is older than h (or is h).
 *
 * A sealed head with a clock still inside it means another thread has seen
 * a later time and is advancing; we help advance to h+1 rather than wait.
 *
 * Stalls of any length (the full-width design).  A 64-bit word holds only
 * 32 bits of its epoch beside its count, so a thread stalled between
 * reading a word and CASing it while the ring goes round 2^32 times can
 * find a word of epoch h + k * 2^32 that looks exactly like the one it
 * read.  Two mechanisms close that, chosen by what the write does:
 *   - a write that only counts (an admission, a lease take)
 *     keeps its single-width CAS, made an acquire, and loads head after
 *     it: a reused word exists only once head has reached its epoch, so
 *     head fewer than 2^32 epochs past h proves the CAS hit h's word
 *     (sluice__window_cas_was_current in window.h).  Otherwise the
 *     decision reports a refusal and leaves its count where it landed:
 *     conservative.  Cost: one load of a read-mostly line already in cache.
 *   - a write that gives permits out (a refund, a lease deposit or give-
 *     back) cannot be taken back once others have seen it, so it must
 *     fail on a reused word: each bucket and each lease cell keeps its
 *     full epoch beside its word, written together with it by a double-
 *     width CAS (pair_internal.h), and these writes CAS both.  They are
 *     slow paths (once per epoch, once per B admissions, a refund), so
 *     CMPXCHG16B's extra cost never reaches a decision.
 * A double-width CAS on every decision was considered instead: it costs
 * about half again a single-width CAS (README, "Stalls and wraparound"),
 * for no guarantee the head check does not already give.
 * The full epoch also says whether a bucket is open (slot_of()), so a
 * clock jump of exactly k * 2^32 buckets is not mistaken for the old one.
 *
 * Readings across a change (window.h).  set_limit's stores, the bucket
 * openings (open_slot()'s pair CAS, a full barrier), every decision's
 * load of the limit after the bucket word and its admission CAS are
 * seq_cst: one total order S (on x86 plain loads and the LOCK CMPXCHG the
 * CASes were).  A change's stamp is the newest epoch whose bucket has
 * been opened at its place in S.  An admission into epoch h loaded h's open bucket
 * word (acquire: the opening precedes its limit load in S), then the
 * limit, then CASed the word unchanged, so before the seal (an acq_rel CAS
 * on the same word, which synchronises with it) that happens before
 * h + 1's opening: the limit load happens before that opening.  So the limit it read is the
 * last change before a point of S where h's bucket is the newest opened
 * one: a limit in force in epoch h.  A lease take is such an admission
 * (bucket_take()); a spend checks nothing, its permits were counted by the
 * take in its own epoch.  The run of N epochs ending at h is checked by h's
 * last admission against its limit (base + own + n): every run holds at
 * most the largest limit in force in its newest counting epoch.  The old
 * code read the limit once per call: a decision whose epoch moved on went
 * on against the limit it read before a change (tests/core/test_window.c: 11
 * in a window under 10).  Cost: one more load of the limit's line
 * (read-mostly) and a compare on the inline path.
 *
 * Memory orders: the admission CAS is seq_cst (above); its acquire is
 * also what the head check after it needs (see window.h).  Slot and cur opens are releases and their
 * loads in this file acquires, so a reader that sees an open word also
 * sees head at least as new as the opener saw it (which is what the
 * staleness checks rely on).
 *
 * A striped mode (read every CPU's cell, add to one's own) lived here
 * until 1.0; it never beat the single bucket word, and leases serve hot
 * keys exactly.  It is kept as a benchmark baseline in
 * bench/striped_baseline.h, reported by bench_window.
 */
#include <limits.h>
#include <stdlib.h>
#include <sys/sysinfo.h>

#include "sluice/error.h"
#include "sluice/stripe.h"
#include "sluice/window.h"
#include "window_step.h"
#include "stripe_internal.h"
#include "pair_internal.h"
#include "util_internal.h"
#include "clock_internal.h"
#include "refund_internal.h"
#include "validate_internal.h"

#define TAG_OF(word) ((word) >> 32)
#define BASE_MAX 0xffffffffULL


/* The one validator of init and config_check (clock_internal.h), and of
 * the fixed window's ring (fixed.c). */
int sluice__window_validate_config(const sluice_window_config_t *cfg, sluice__step_use_t use,
                                   const sluice_clock_t **clock)
{
	if (!cfg)
		return SLUICE_EINVAL;
	if (cfg->lease > SLUICE_WINDOW_LEASE_MAX)
		return SLUICE_ELEASE;
	int rc = sluice__window_validate(cfg->limit, cfg->buckets, cfg->window_ns);
	if (rc == 0) /* the clock must step within one bucket */
		rc = sluice__init_clock(cfg->clock, cfg->window_ns / cfg->buckets, use, clock);
	return rc;
}

int sluice_window_config_check(const sluice_window_config_t *cfg)
{
	const sluice_clock_t *clock;
	return sluice__window_validate_config(cfg, SLUICE__ASK, &clock);
}

int sluice_window_init(sluice_window_t *w, const sluice_window_config_t *cfg)
{
	if (!w)
		return SLUICE_EINVAL;
	const sluice_clock_t *clock = NULL;
	int vrc = sluice__window_validate_config(cfg, SLUICE__RECORD, &clock);
	if (vrc != 0)
		return vrc;

	uint32_t nslots = (uint32_t)sluice__pow2_at_least(cfg->buckets);
	size_t bytes = (sizeof(struct sluice__window_slot) * nslots + SLUICE_CACHELINE - 1) /
	               SLUICE_CACHELINE * SLUICE_CACHELINE;
	struct sluice__window_slot *slots = aligned_alloc(SLUICE_CACHELINE, bytes);
	if (!slots)
		return SLUICE_ENOMEM;
	struct sluice_window_cell *cells = NULL;
	uint32_t ncells = 1;
	if (cfg->lease) {
		/* one per possible CPU, as a stripe's (stripe.h's allocation) */
		int arc;
		ncells = 0;
		cells = sluice__stripe_alloc(sizeof(*cells), &ncells, &arc);
		if (!cells) {
			free(slots);
			return arc;
		}
		for (uint32_t i = 0; i < ncells; i++) {
			atomic_init(&cells[i].word, 0); /* epoch 0, count 0 */
			atomic_init(&cells[i].epoch, 0);
			atomic_init(&cells[i].seen, UINT64_MAX); /* no snapshot */
		}
	}

	/* Epoch 0 is the initial head, open and empty; every other slot holds
	 * a sealed, empty bucket, exactly what a skipped epoch looks like. */
	atomic_init(&slots[0].word, 0);
	atomic_init(&slots[0].epoch, 0);
	for (uint32_t i = 1; i < nslots; i++) {
		atomic_init(&slots[i].word, SLUICE__SLOT_SEALED | SLUICE__SLOT_FOLDED);
		atomic_init(&slots[i].epoch, 0); /* below every epoch it will hold */
	}

	atomic_init(&w->limit, cfg->limit);
	w->window_ns = cfg->window_ns;
	w->width_ns = cfg->window_ns / cfg->buckets;
	w->buckets = cfg->buckets;
	w->mask = nslots - 1;
	w->cell_mask = ncells - 1;
	w->lease = cfg->lease;
	atomic_init(&w->fast_limit, cfg->lease ? 0 : cfg->limit);
	w->clock = clock;
	w->slots = slots;
	w->cells = cells;
	atomic_init(&w->head, 0);
	atomic_init(&w->cur, 0); /* epoch 0, base 0 */
	return 0;
}

void sluice_window_destroy(sluice_window_t *w)
{
	if (!w)
		return;
	free(w->slots);
	free(w->cells);
	w->slots = NULL;
	w->cells = NULL;
}

/* The word of epoch y's slot, for window_step.h's walks (relaxed: a
 * closed epoch's word is final once head, loaded with acquire, passed it). */
static uint64_t slot_word(const void *ctx, uint64_t y)
{
	const sluice_window_t *w = ctx;
	return atomic_load_explicit(&w->slots[y & w->mask].word, memory_order_relaxed);
}

/* Step 2: publish base(h) in cur.  Called after an acquire load of head == h
 * and a load of cur that is not tagged h. */
static void open_cur(sluice_window_t *w, uint64_t h, uint64_t c)
{
	/* cur was read before this check, so if head is still h, cur is
	 * not newer than h (see "Old vs new" above). */
	if (atomic_load_explicit(&w->head, memory_order_acquire) != h)
		return;
	uint64_t base = sluice__window_closed_sum(h, w->buckets, slot_word, w);
	if (base > BASE_MAX)
		base = BASE_MAX; /* any base >= L refuses everything: safe */
	uint64_t next = (SLUICE__LO32(h) << 32) | base;
	/* Release pairs with the acquire load of cur in the slow path: a
	 * thread that sees this cur also sees head >= h. */
	atomic_compare_exchange_strong_explicit(&w->cur, &c, next, memory_order_release,
	                                        memory_order_relaxed);
}

/* Step 3: open h's slot.  @s is the slot word read with acquire, not
 * tagged h. */
static void open_slot(sluice_window_t *w, uint64_t h, uint64_t s, uint64_t se)
{
	if (se >= h || atomic_load_explicit(&w->head, memory_order_acquire) != h)
		return;
	/* s is older than h, so it is sealed (every epoch is sealed before
	 * head leaves it, and init seals all but epoch 0's slot). */
	struct sluice__window_slot *slot = &w->slots[h & w->mask];
	/* Word and full epoch together (a full barrier, so also the release
	 * the acquire slot loads in this file and the acquire CASes of the
	 * decision paths pair with).  A torn read of the pair fails it. */
	sluice__pair_cas(&slot->word, s, se, SLUICE__LO32(h) << 32, h);
}

/* Load h's slot word into *@s and its full epoch into *@se; true when
 * the word is h's.  The word is read first, so a word of h's comes with an
 * epoch of h (or newer, if the slot moved on meanwhile: then false).  The
 * full epoch, not the tag, says whether h's slot is open: after a jump of
 * exactly k * 2^32 buckets the old word has h's tag. */
static int slot_of(const sluice_window_t *w, uint64_t h, uint64_t *s, uint64_t *se)
{
	const struct sluice__window_slot *slot = &w->slots[h & w->mask];
	/* Acquire: pairs with the opening CAS (open_slot()). */
	*s = atomic_load_explicit(&slot->word, memory_order_acquire);
	*se = atomic_load_explicit(&slot->epoch, memory_order_acquire);
	return *se == h && TAG_OF(*s) == SLUICE__LO32(h);
}

/* Step 5: seal h's slot and make its own count final. */
static void seal_and_fold(sluice_window_t *w, uint64_t h)
{
	_Atomic uint64_t *slot = &w->slots[h & w->mask].word;
	/* Acquire, both, as in slot_of(): pair with the opening CAS
	 * (open_slot()); the word is read first, as there. */
	uint64_t s = atomic_load_explicit(slot, memory_order_acquire);
	if (atomic_load_explicit(&w->slots[h & w->mask].epoch, memory_order_acquire) != h)
		return; /* not opened (skipped: nothing to seal), or reused */
	/* window_step.h's seal, as the keyed tables': own is final once
	 * sealed (SEALED and FOLDED in one CAS, a release: head's release CAS
	 * in advance() comes after it).  Unbounded but lock-free: each
	 * failure is an admission into the bucket. */
	unsigned tries = 0;
	(void)sluice__window_seal(slot, s, h, &tries, UINT_MAX);
}

/* Steps 2, 3, 5 for h, then 6: head h -> e. */
static void advance(sluice_window_t *w, uint64_t h, uint64_t e)
{
	uint64_t c = atomic_load_explicit(&w->cur, memory_order_acquire);
	if (TAG_OF(c) != SLUICE__LO32(h))
		open_cur(w, h, c);
	uint64_t s, se;
	if (!slot_of(w, h, &s, &se))
		open_slot(w, h, s, se);
	seal_and_fold(w, h);
	/* Release: publishes the folded count of h (and everything before)
	 * to the acquire loads of head in open_cur(), the slow path and the
	 * fast paths. */
	atomic_compare_exchange_strong_explicit(&w->head, &h, e, memory_order_release,
	                                        memory_order_relaxed);
}

/* The epoch a decision at @now belongs to, given head @h: never older than h. */
static uint64_t epoch_of(const sluice_window_t *w, uint64_t h, uint64_t now)
{
	if (now < h * w->width_ns || now - h * w->width_ns < w->width_ns)
		return h; /* older than head's bucket (time never runs back), or in it */
	return now / w->width_ns;
}

/*
 * Make head's epoch fully open and return it (with its cur and slot words),
 * advancing the ring to @now first.  Helps every step it finds unfinished.
 */
static uint64_t ready_head(sluice_window_t *w, uint64_t now, uint64_t *cur_out,
                           uint64_t *slot_out)
{
	for (;;) {
		uint64_t h = atomic_load_explicit(&w->head, memory_order_acquire);
		uint64_t e = epoch_of(w, h, now);
		if (e > h) {
			advance(w, h, e);
			continue;
		}
		uint64_t c = atomic_load_explicit(&w->cur, memory_order_acquire);
		if (TAG_OF(c) != SLUICE__LO32(h)) {
			open_cur(w, h, c);
			continue;
		}
		uint64_t s, se;
		if (!slot_of(w, h, &s, &se)) {
			open_slot(w, h, s, se);
			continue;
		}
		if (s & SLUICE__SLOT_SEALED) {
			/* Someone saw a later time and is moving past h. */
			advance(w, h, h + 1);
			continue;
		}
		*cur_out = c;
		*slot_out = s;
		return h;
	}
}

/* bucket_take()'s "the epoch moved on: start over" (its other returns
 * are 1, 0 and SLUICE_ETOOBIG) */
#define TAKE_MOVED 2

static int bucket_take(sluice_window_t *w, uint64_t n, uint64_t now, sluice_decision_t *d,
                       uint64_t h, uint64_t c, uint64_t s, struct sluice_window_cell *cell,
                       uint64_t v, uint64_t ev);

int sluice_inline_window_acquire_slow(sluice_window_t *w, uint64_t n, uint64_t now,
                                sluice_decision_t *d)
{
	if (n == 0)
		return SLUICE_EINVAL;
	/* A request above the limit moves nothing (relaxed: it publishes
	 * nothing).  The limit it is judged against is read by bucket_take(),
	 * after the bucket word, on every attempt (window.h, READINGS ACROSS
	 * A CHANGE). */
	uint64_t L = atomic_load_explicit(&w->limit, memory_order_relaxed);
	if (n > L) {
		sluice__decision_never(d, L, now);
		return SLUICE_ETOOBIG;
	}
	if (w->lease)
		return sluice_inline_window_lease_take(w, n, now, d);
	for (;;) {
		uint64_t c, s;
		uint64_t h = ready_head(w, now, &c, &s);
		int rc = bucket_take(w, n, now, d, h, c, s, NULL, 0, 0);
		if (rc != TAKE_MOVED)
			return rc; /* else the epoch moved on: start over */
	}
}

/*
 * Leases (w->lease = B > 0).
 *
 * A cell holds tag32(epoch) | permits leased to this CPU in that epoch,
 * and beside it the full 64-bit epoch, written together with the word by
 * the double-width CAS that deposits a lease (pair_internal.h).
 * Invariant: every permit in a cell of epoch h was added to h's bucket word
 * (own) by the CAS that leased it, before it was deposited, and is spent
 * only by a decision whose epoch is h.  So admissions in h never exceed
 * own(h) and the bound without leases carries over unchanged.
 *
 * Why the full epoch: the 32-bit tag alone cannot tell a lease of h from
 * one of h - 2^32, and a taker that stalls between its bucket CAS and its
 * deposit (for any time: a signal handler, a stopped process) would
 * deposit an old lease that a decision 2^32 epochs later spends in a
 * bucket already full.  With the epoch in the pair, a deposit fails if the
 * cell changed at all since the taker read it and never moves the cell's
 * epoch back, and a spend checks the epoch first.  The cell's epoch only
 * grows, so (sluice__window_lease_spend) a spend that read epoch h and
 * then won its CAS on the word took h's permits, unless a later deposit
 * with the same tag, of an epoch >= h + 2^32, came in between: the head
 * check after the CAS sees that.  No sweep, no tag arithmetic.
 *
 * Bounding the waste: a lease is deposited only by a CAS from the cell
 * value its taker saw holding fewer than n permits (or another epoch's), so
 * a cell never holds more than B + n_max - 1.  If the cell changed in the
 * meantime, the extra goes back to the bucket while it is open; once it is
 * sealed the extra is lost with its epoch (at most B per such thread).
 */

/* Give @extra leased permits back to h's bucket while it is open; once it
 * is sealed (or reused) they die with the epoch: under-admission, never
 * over.  Liberal, so it CASes the word with its full epoch: a stalled
 * thread can never give them to a reused bucket. */
static void lease_give_back(sluice_window_t *w, uint64_t h, uint64_t extra)
{
	struct sluice__window_slot *slot = &w->slots[h & w->mask];
	for (;;) {
		uint64_t s = atomic_load_explicit(&slot->word, memory_order_relaxed);
		uint64_t e = atomic_load_explicit(&slot->epoch, memory_order_relaxed);
		if (e != h || TAG_OF(s) != SLUICE__LO32(h) || (s & SLUICE__SLOT_SEALED) ||
		    (s & SLUICE__SLOT_OWN) < extra)
			return;
		/* fails only when the pair changed: another thread's progress */
		if (sluice__pair_cas(&slot->word, s, h, s - extra, h))
			return;
	}
}

/* Deposit @extra permits of epoch h into @cell, whose pair was (@v, @ev)
 * when the taker looked at it (ev <= h). */
static void lease_deposit(sluice_window_t *w, struct sluice_window_cell *cell, uint64_t v,
                          uint64_t ev, uint64_t h, uint64_t extra)
{
	uint64_t next = ev == h && TAG_OF(v) == SLUICE__LO32(h) ? v + extra
	                                                         : (SLUICE__LO32(h) << 32) | extra;
	/* Full barrier; the release that the spend's acquire load of the
	 * cell's epoch pairs with. */
	if (!sluice__pair_cas(&cell->word, v, ev, next, h))
		lease_give_back(w, h, extra);
}

/*
 * One CAS on h's bucket (cur @c and slot @s as read): take n, plus a new
 * lease for @cell (whose pair was @v, @ev) when leases are on, or refuse
 * from the reads alone.  Returns 1 or 0, SLUICE_ETOOBIG (n above the limit
 * read here), or TAKE_MOVED when the epoch moved on.
 */
static int bucket_take(sluice_window_t *w, uint64_t n, uint64_t now, sluice_decision_t *d,
                       uint64_t h, uint64_t c, uint64_t s, struct sluice_window_cell *cell,
                       uint64_t v, uint64_t ev)
{
	_Atomic uint64_t *slot = &w->slots[h & w->mask].word;
	for (;;) {
		/* The limit this attempt is judged against, read after the
		 * bucket word @s (an acquire: ready_head()'s load, or the
		 * failed CAS below), on every attempt (DESIGN, readings across
		 * a change).  Seq_cst, as set_limit's stores and the CAS. */
		uint64_t L = atomic_load_explicit(&w->limit, memory_order_seq_cst);
		if (n > L) {
			sluice__decision_never(d, L, now);
			return SLUICE_ETOOBIG;
		}
		uint64_t counted = (c & 0xffffffffu) + (s & SLUICE__SLOT_OWN);
		if (counted + n > L) {
			/* Refused from reads: no shared line written. */
			if (d)
				sluice_inline_window_fill_refused(w, d, L, counted, c & 0xffffffffu, n, h, now);
			return 0;
		}
		uint64_t extra = 0;
		if (cell) {
			/* room / (2 * cells), cells a power of two; at most B */
			extra = (L - counted - n) >> (__builtin_ctz(w->cell_mask + 1) + 1);
			if (extra > w->lease)
				extra = w->lease;
		}
		/* Seq_cst (an acquire) on success: see
		 * sluice__window_cas_was_current() and the limit's load above.
		 * Acquire on failure: the word it hands back is what the next
		 * attempt's limit is read after. */
		if (atomic_compare_exchange_weak_explicit(slot, &s, s + n + extra, memory_order_seq_cst,
		                                          memory_order_acquire)) {
			if (SLUICE_UNLIKELY(!sluice__window_cas_was_current(w, h))) {
				/* n + extra stay counted where the CAS landed */
				sluice__window_fill_stale(w, d, L, now);
				return 0;
			}
			if (cell) {
				/* the snapshot d->remaining reads on this CPU
				 * (a hint, relaxed: it orders nothing) */
				atomic_store_explicit(&cell->seen,
				                      (SLUICE__LO32(h) << 32) | (counted + n + extra),
				                      memory_order_relaxed);
				if (extra)
					lease_deposit(w, cell, v, ev, h, extra);
			}
			if (d)
				sluice__window_fill_allowed(w, d, L, counted + n + extra, h * w->width_ns,
				                            now);
			return 1;
		}
		if (TAG_OF(s) != SLUICE__LO32(h) || (s & SLUICE__SLOT_SEALED))
			return TAKE_MOVED;
	}
}

/*
 * The lease was short: take n (and maybe a new lease) from the bucket in
 * one CAS, or refuse from reads alone.  Called with n in 1..limit.
 */
int sluice_inline_window_lease_take(sluice_window_t *w, uint64_t n, uint64_t now,
                              sluice_decision_t *d)
{
	/* As in the slow path: one limit per decision, n checked against it. */
	uint64_t L = atomic_load_explicit(&w->limit, memory_order_relaxed);
	if (n > L) {
		sluice__decision_never(d, L, now);
		return SLUICE_ETOOBIG;
	}
	for (;;) {
		uint64_t c, s;
		uint64_t h = ready_head(w, now, &c, &s);
		struct sluice_window_cell *cell = &w->cells[sluice__stripe_pick(w->cell_mask)];
		/* refilled meanwhile, or the fast path saw an older head */
		int spent = sluice__window_lease_spend(w, cell, n, h, now, d);
		if (spent > 0)
			return 1;
		if (spent < 0) {
			sluice__window_fill_stale(w, d, L, now);
			return 0;
		}
		/* Acquire: pairs with the deposit's CAS, as in the spend. */
		uint64_t ev = atomic_load_explicit(&cell->epoch, memory_order_acquire);
		uint64_t v = atomic_load_explicit(&cell->word, memory_order_relaxed);
		if (ev == h && TAG_OF(v) == SLUICE__LO32(h) && (v & 0xffffffffu) >= n)
			continue; /* refilled since: spend it */
		if (ev > h)
			continue; /* a newer epoch's lease: head has moved, look again */
		int rc = bucket_take(w, n, now, d, h, c, s, cell, v, ev);
		if (rc != TAKE_MOVED)
			return rc;
	}
}

/* A refusal: window_step.h's walk over this ring's slots. */
void sluice_inline_window_fill_refused(sluice_window_t *w, sluice_decision_t *d, uint64_t limit,
                                 uint64_t counted, uint64_t base, uint64_t n, uint64_t h,
                                 uint64_t now)
{
	sluice__window_refused(d, limit, counted, base, n, h, now, w->window_ns, w->width_ns,
	                       w->buckets, slot_word, w);
}


/*
 * Refund.  Only the bucket of the admission may be given back to, and a
 * refund is liberal (it lets others admit), so it must never land in a
 * reused bucket: it CASes the slot's word together with its full epoch
 * (pair_internal.h), which fails on a reused slot however long the refund
 * stalled.  The admission's epoch e is compared with head in 64 bits, so a
 * decision of any age is judged by its full epoch, not by a wrapped tag.
 * The open bucket's own count drops by n (a lease's permits were counted
 * there too, so the same holds with leases).
 */
int sluice_window_refund(sluice_window_t *w, uint64_t n, const sluice_decision_t *admitted)
{
	uint64_t e, h; /* the slot loads below are at least as new as h's bucket */
	if (!w || !sluice__names_admission(admitted, n) ||
	    sluice__refund_epoch(admitted, w->width_ns, &w->head, &e, &h) != 0)
		return SLUICE_EINVAL;
	if (h - e >= w->buckets)
		return SLUICE_EEXPIRED; /* e has left the window: its permits count no more */
	struct sluice__window_slot *slot = &w->slots[e & w->mask];
	for (;;) {
		uint64_t s = atomic_load_explicit(&slot->word, memory_order_acquire);
		uint64_t se = atomic_load_explicit(&slot->epoch, memory_order_acquire);
		/* The word was read first: if it was e's, the epoch is e or newer. */
		if (se > e)
			return SLUICE_EEXPIRED; /* reused: e left the window */
		if (se < e)
			return SLUICE_EINVAL; /* e never opened: no admission in it */
		if (TAG_OF(s) != SLUICE__LO32(e))
			continue; /* the word was older than the epoch read: again */
		if (s & SLUICE__SLOT_SEALED) {
			h = atomic_load_explicit(&w->head, memory_order_acquire);
			return h - e >= w->buckets ? SLUICE_EEXPIRED : SLUICE_ECANCEL;
		}
		if ((s & SLUICE__SLOT_OWN) < n)
			return SLUICE_EINVAL; /* more than the bucket counts */
		/* Full barrier; fails only when the pair changed (an admission,
		 * the seal, a reuse): look again. */
		if (sluice__pair_cas(&slot->word, s, e, s - n, e))
			return 0;
	}
}

/*
 * What a decision at @now would see, read as the decision paths read it:
 * ready_head() opens now's epoch (the step a decision there would take
 * first, and nothing else: it never counts a permit), then the limit
 * minus base + own.  With leases, a decision on a
 * CPU whose lease holds more than that spends it without touching the
 * bucket: the calling CPU's lease of epoch h counts too.
 */
uint64_t sluice_window_available_at(sluice_window_t *w, uint64_t now)
{
	uint64_t c, s;
	uint64_t h = ready_head(w, now, &c, &s);
	/* Relaxed: the limit publishes nothing. */
	uint64_t L = atomic_load_explicit(&w->limit, memory_order_relaxed);
	uint64_t counted = (c & 0xffffffffu) + (s & SLUICE__SLOT_OWN);
	uint64_t room = counted >= L ? 0 : L - counted;
	if (w->lease) {
		struct sluice_window_cell *cell = &w->cells[sluice__stripe_pick(w->cell_mask)];
		/* Acquire: as in the spend (sluice__window_lease_spend). */
		if (atomic_load_explicit(&cell->epoch, memory_order_acquire) == h) {
			uint64_t v = atomic_load_explicit(&cell->word, memory_order_relaxed);
			if (TAG_OF(v) == SLUICE__LO32(h) && (v & 0xffffffffu) > room)
				room = v & 0xffffffffu;
		}
	}
	return room;
}

uint64_t sluice_window_available(sluice_window_t *w)
{
	return sluice_window_available_at(w, sluice_clock_now(w->clock));
}

/*
 * set_limit stores the limit and, without leases, the inline
 * path's copy.  Buckets, cur and leases are not touched: what is counted
 * stays counted (nothing forgotten, nothing minted), and each decision
 * compares it with the one limit it read.  Two concurrent calls could
 * leave the two words with different values; the loop makes the last
 * store to fast_limit one whose writer then saw limit equal to it.
 * seq_cst, so the four accesses of all writers are in one order: a store
 * to limit after a writer's check is followed by that writer's own store
 * to fast_limit.  Decisions read one of the words, relaxed.
 */
int sluice_window_set_limit(sluice_window_t *w, uint64_t limit)
{
	int rc = w ? sluice__window_limit_ok(limit) : SLUICE_EINVAL;
	if (rc != 0)
		return rc; /* SLUICE_ELIMIT: the validator's range, as init */
	atomic_store_explicit(&w->limit, limit, memory_order_seq_cst);
	if (w->lease)
		return 0; /* fast_limit stays 0: every decision takes the slow path */
	uint64_t L;
	do {
		L = atomic_load_explicit(&w->limit, memory_order_seq_cst);
		atomic_store_explicit(&w->fast_limit, L, memory_order_seq_cst);
	} while (atomic_load_explicit(&w->limit, memory_order_seq_cst) != L);
	return 0;
}
