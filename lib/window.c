/*
 * window.c - sliding window ring: validation, opening and sealing epochs,
 * the STRIPED admission path, and refusal bookkeeping.
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
 *   4. admissions: CAS own += n while base + own + n <= L (EXACT), or adds
 *      to per-CPU cells (STRIPED).
 *   5. seal: set SEALED; after it no admission can land in this bucket.
 *      EXACT sets FOLDED at the same time: own is final.  STRIPED then sums
 *      the cells tagged h into own and sets FOLDED (seal_and_fold()).
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
 * Memory orders: the EXACT admission path is relaxed (see window.h).  Slot
 * and cur opens are releases and their loads in this file acquires, so a
 * reader that sees an open word also sees head at least as new as the
 * opener saw it (which is what the staleness checks rely on).  STRIPED uses
 * seq_cst for the cell add and the seal and their following loads: a
 * Dekker pair (see striped_acquire()).
 */
#include <stdlib.h>
#include <sys/sysinfo.h>

#include "sluice/error.h"
#include "sluice/stripe.h"
#include "sluice/window.h"

#define TAG_OF(word) ((word) >> 32)
#define BASE_MAX 0xffffffffULL

size_t sluice_window_size(void)
{
	return sizeof(sluice_window_t);
}

static uint32_t round_up_pow2(uint32_t v)
{
	uint32_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

int sluice_window_init(sluice_window_t *w, const sluice_window_config_t *cfg)
{
	if (!w || !cfg)
		return -SLUICE_EINVAL;
	const sluice_clock_t *clock = cfg->clock ? cfg->clock : &sluice_clock_cached;
	if (clock->kind > SLUICE_CLOCK_MANUAL)
		return -SLUICE_ECLOCK;
	if (cfg->mode != SLUICE_EXACT && cfg->mode != SLUICE_STRIPED)
		return -SLUICE_EMODE;
	if (cfg->lease > SLUICE_WINDOW_LEASE_MAX || (cfg->lease && cfg->mode != SLUICE_EXACT))
		return -SLUICE_ELEASE;
	if (cfg->limit < 1 || cfg->limit > SLUICE_WINDOW_LIMIT_MAX)
		return -SLUICE_ELIMIT;
	if (cfg->buckets < 1 || cfg->buckets > SLUICE_WINDOW_BUCKETS_MAX)
		return -SLUICE_EBUCKETS;
	if (cfg->window_ns == 0 || cfg->window_ns % cfg->buckets != 0)
		return -SLUICE_EWINDOW;
	uint64_t width = cfg->window_ns / cfg->buckets;
	if (sluice__clock_require_step(clock, width) != 0)
		return -SLUICE_ERESOLUTION;

	uint32_t nslots = round_up_pow2(cfg->buckets);
	size_t bytes = (sizeof(_Atomic uint64_t) * nslots + SLUICE_CACHELINE - 1) /
	               SLUICE_CACHELINE * SLUICE_CACHELINE;
	_Atomic uint64_t *slots = aligned_alloc(SLUICE_CACHELINE, bytes);
	if (!slots)
		return -SLUICE_ENOMEM;
	struct sluice_window_cell *cells = NULL;
	uint32_t ncells = 1;
	if (cfg->mode == SLUICE_STRIPED || cfg->lease) {
		int cpus = get_nprocs_conf();
		ncells = round_up_pow2(cpus > 0 ? (uint32_t)(cpus < 4096 ? cpus : 4096) : 1);
		cells = aligned_alloc(SLUICE_CACHELINE, sizeof(*cells) * ncells);
		if (!cells) {
			free(slots);
			return -SLUICE_ENOMEM;
		}
		for (uint32_t i = 0; i < ncells; i++) {
			atomic_init(&cells[i].word, 0); /* epoch 0, count 0 */
			atomic_init(&cells[i].seen, UINT64_MAX); /* no snapshot */
		}
	}

	/* Epoch 0 is the initial head, open and empty; every other slot holds
	 * a sealed, empty bucket, exactly what a skipped epoch looks like. */
	atomic_init(&slots[0], 0);
	for (uint32_t i = 1; i < nslots; i++)
		atomic_init(&slots[i], SLUICE__SLOT_SEALED | SLUICE__SLOT_FOLDED);

	w->limit = cfg->limit;
	w->window_ns = cfg->window_ns;
	w->width_ns = width;
	w->buckets = cfg->buckets;
	w->mask = nslots - 1;
	w->cell_mask = ncells - 1;
	w->lease = cfg->lease;
	w->fast_limit = cfg->mode == SLUICE_EXACT && !cfg->lease ? cfg->limit : 0;
	w->mode = cfg->mode;
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

/* own(y) of a closed epoch y, or 0 when its slot holds another epoch (y was
 * skipped: nothing was admitted in it). */
static uint64_t closed_own(const sluice_window_t *w, uint64_t y)
{
	uint64_t s = atomic_load_explicit(&w->slots[y & w->mask], memory_order_relaxed);
	return TAG_OF(s) == SLUICE__LO32(y) ? (s & SLUICE__SLOT_OWN) : 0;
}

/* Step 2: publish base(h) in cur.  Called after an acquire load of head == h
 * and a load of cur that is not tagged h. */
static void open_cur(sluice_window_t *w, uint64_t h, uint64_t c)
{
	/* cur was read before this check, so if head is still h, cur is
	 * not newer than h (see "Old vs new" above). */
	if (atomic_load_explicit(&w->head, memory_order_acquire) != h)
		return;
	uint64_t base = 0;
	for (uint64_t k = 1; k < w->buckets && k <= h; k++)
		base += closed_own(w, h - k);
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
static void open_slot(sluice_window_t *w, uint64_t h, uint64_t s)
{
	if (atomic_load_explicit(&w->head, memory_order_acquire) != h)
		return;
	/* s is older than h, so it is sealed (every epoch is sealed before
	 * head leaves it, and init seals all but epoch 0's slot). */
	uint64_t next = SLUICE__LO32(h) << 32;
	/* Release pairs with the acquire slot loads in this file. */
	atomic_compare_exchange_strong_explicit(&w->slots[h & w->mask], &s, next,
	                                        memory_order_release, memory_order_relaxed);
}

/* Step 5: seal h's slot and make its own count final. */
static void seal_and_fold(sluice_window_t *w, uint64_t h)
{
	_Atomic uint64_t *slot = &w->slots[h & w->mask];
	uint64_t s = atomic_load_explicit(slot, memory_order_seq_cst);
	for (;;) {
		if (TAG_OF(s) != SLUICE__LO32(h) || (s & SLUICE__SLOT_FOLDED))
			return; /* already done, or reused: someone finished */
		uint64_t next = s | SLUICE__SLOT_SEALED;
		if (w->mode == SLUICE_EXACT) {
			next |= SLUICE__SLOT_FOLDED; /* own is final once sealed */
		} else if (s & SLUICE__SLOT_SEALED) {
			/* STRIPED: sealed, so every add that will count is
			 * already in a cell (see striped_acquire()).  seq_cst
			 * loads: the second half of the Dekker pair. */
			uint64_t sum = s & SLUICE__SLOT_OWN;
			for (uint32_t i = 0; i <= w->cell_mask; i++) {
				uint64_t v = atomic_load_explicit(&w->cells[i].word,
				                                  memory_order_seq_cst);
				if (TAG_OF(v) == SLUICE__LO32(h))
					sum += v & 0xffffffffu;
			}
			if (sum > SLUICE__SLOT_OWN)
				sum = SLUICE__SLOT_OWN; /* >= L: still refuses all */
			next = (s & ~SLUICE__SLOT_OWN) | SLUICE__SLOT_FOLDED | sum;
		}
		/* seq_cst: the seal is the first half of the Dekker pair with
		 * striped_acquire(); for EXACT it orders like a release. */
		if (atomic_compare_exchange_weak_explicit(slot, &s, next, memory_order_seq_cst,
		                                          memory_order_seq_cst) &&
		    (next & SLUICE__SLOT_FOLDED))
			return;
		/* Lost a race or only sealed: look again. */
		s = atomic_load_explicit(slot, memory_order_seq_cst);
	}
}

/* Steps 2, 3, 5 for h, then 6: head h -> e. */
/*
 * Leases are tagged with 32 bits of their epoch, and a cell keeps its lease
 * until its CPU takes another: a CPU that stops deciding on this window
 * leaves permits that epoch h + 2^32 would take for its own.  So whenever
 * head crosses a multiple of 2^31 epochs (every tag then in a cell is at
 * least one crossing old, or current), empty every cell first.  This runs
 * before the head CAS that is a release, and lease spends load head with
 * acquire, so a decision that sees the new head sees the empty cells.
 * What it empties is lost (under-admission, once per 2^31 buckets).
 */
static void lease_sweep(sluice_window_t *w, uint64_t h, uint64_t e)
{
	if (!w->lease || ((h ^ e) >> 31) == 0)
		return;
	for (uint32_t i = 0; i <= w->cell_mask; i++) {
		_Atomic uint64_t *cell = &w->cells[i].word;
		uint64_t v = atomic_load_explicit(cell, memory_order_relaxed);
		while ((v & 0xffffffffu) &&
		       !atomic_compare_exchange_weak_explicit(cell, &v, v & ~0xffffffffULL,
		                                              memory_order_relaxed,
		                                              memory_order_relaxed))
			;
	}
}

static void advance(sluice_window_t *w, uint64_t h, uint64_t e)
{
	uint64_t c = atomic_load_explicit(&w->cur, memory_order_acquire);
	if (TAG_OF(c) != SLUICE__LO32(h))
		open_cur(w, h, c);
	uint64_t s = atomic_load_explicit(&w->slots[h & w->mask], memory_order_acquire);
	if (TAG_OF(s) != SLUICE__LO32(h))
		open_slot(w, h, s);
	seal_and_fold(w, h);
	lease_sweep(w, h, e);
	/* Release: publishes the folded count of h (and everything before,
	 * the lease sweep included) to the acquire loads of head in
	 * open_cur(), the slow path and the lease fast path. */
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
		uint64_t s = atomic_load_explicit(&w->slots[h & w->mask], memory_order_acquire);
		if (TAG_OF(s) != SLUICE__LO32(h)) {
			open_slot(w, h, s);
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

static uint64_t cells_count(const sluice_window_t *w, uint64_t h)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i <= w->cell_mask; i++) {
		uint64_t v = atomic_load_explicit(&w->cells[i].word, memory_order_relaxed);
		if (TAG_OF(v) == SLUICE__LO32(h))
			sum += v & 0xffffffffu;
	}
	return sum;
}

/* Take back an add that raced with the seal.  If the cell moved on, the add
 * is gone already (or was counted by the sealer: a conservative miscount). */
static void cell_undo(_Atomic uint64_t *cell, uint64_t h, uint64_t n)
{
	uint64_t v = atomic_load_explicit(cell, memory_order_relaxed);
	while (TAG_OF(v) == SLUICE__LO32(h) && (v & 0xffffffffu) >= n) {
		if (atomic_compare_exchange_weak_explicit(cell, &v, v - n, memory_order_relaxed,
		                                          memory_order_relaxed))
			return;
	}
}

/*
 * STRIPED: read every cell, check, add to this CPU's cell, then confirm the
 * bucket was not sealed in between.  The add (seq_cst CAS) and the seal
 * (seq_cst CAS in seal_and_fold()) each precede a seq_cst load of the
 * other's location, so at least one side sees the other: either our
 * confirming load sees the bucket still open, and then the sealer's cell
 * scan will see our add, or we see it sealed, and then we take the add back
 * and decide again in the next epoch.  Every admission we report is folded.
 */
static int striped_acquire(sluice_window_t *w, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	for (;;) {
		uint64_t c, s;
		uint64_t h = ready_head(w, now, &c, &s);
		uint64_t counted = (c & 0xffffffffu) + (s & SLUICE__SLOT_OWN) + cells_count(w, h);
		if (counted + n > w->limit) {
			if (d)
				sluice__window_fill_refused(w, d, counted, c & 0xffffffffu, n, h, now);
			return 0;
		}
		_Atomic uint64_t *cell = &w->cells[sluice_cpu() & w->cell_mask].word;
		uint64_t v = atomic_load_explicit(cell, memory_order_relaxed);
		uint64_t next;
		if (TAG_OF(v) == SLUICE__LO32(h)) {
			next = v + n;
		} else {
			/* The cell counts an older epoch (never a newer one
			 * while head is still h): restart it at n. */
			if (atomic_load_explicit(&w->head, memory_order_acquire) != h)
				continue;
			next = (SLUICE__LO32(h) << 32) | n;
		}
		if (!atomic_compare_exchange_strong_explicit(cell, &v, next, memory_order_seq_cst,
		                                             memory_order_relaxed))
			continue; /* another thread on this CPU's cell: check again */
		uint64_t s2 = atomic_load_explicit(&w->slots[h & w->mask], memory_order_seq_cst);
		if (TAG_OF(s2) == SLUICE__LO32(h) && !(s2 & SLUICE__SLOT_SEALED)) {
			if (d)
				sluice__window_fill_allowed(w, d, counted + n, h * w->width_ns, now);
			return 1;
		}
		cell_undo(cell, h, n);
	}
}

static int bucket_take(sluice_window_t *w, uint64_t n, uint64_t now, sluice_decision_t *d,
                       uint64_t h, uint64_t c, uint64_t s, struct sluice_window_cell *cell,
                       uint64_t v);

int sluice__window_acquire_slow(sluice_window_t *w, uint64_t n, uint64_t now,
                                sluice_decision_t *d)
{
	if (n == 0)
		return -SLUICE_EINVAL;
	if (n > w->limit) {
		sluice__decision_never(d, w->limit, now);
		return -SLUICE_ETOOBIG;
	}
	if (w->mode == SLUICE_STRIPED)
		return striped_acquire(w, n, now, d);
	if (w->lease)
		return sluice__window_lease_take(w, n, now, d);
	for (;;) {
		uint64_t c, s;
		uint64_t h = ready_head(w, now, &c, &s);
		int rc = bucket_take(w, n, now, d, h, c, s, NULL, 0);
		if (rc >= 0)
			return rc; /* else the epoch moved on: start over */
	}
}

/*
 * Leases (EXACT mode, w->lease = B > 0).
 *
 * A cell holds tag32(epoch) | permits leased to this CPU in that epoch.
 * Invariant: every permit in a cell tagged h was added to h's bucket word
 * (own) by the CAS that leased it, before it was deposited, and is spent
 * only by a decision whose epoch is h.  So admissions in h never exceed
 * own(h) and the EXACT bound carries over unchanged.  All of it is relaxed
 * for the same reason the EXACT path is: the bound is about counts in
 * single words, each changed only by CAS, not about ordering between them.
 *
 * Bounding the waste: a lease is deposited only by a CAS from the cell
 * value its taker saw holding fewer than n permits (or another epoch's), so
 * a cell never holds more than B + n_max - 1.  If the cell changed in the
 * meantime, the extra goes back to the bucket while it is open; once it is
 * sealed the extra is lost with its epoch (at most B per such thread).
 */

/* Give @extra leased permits back to h's bucket; false once it is sealed
 * (then they die with the epoch: under-admission, never over). */
static void lease_give_back(sluice_window_t *w, uint64_t h, uint64_t extra)
{
	_Atomic uint64_t *slot = &w->slots[h & w->mask];
	uint64_t s = atomic_load_explicit(slot, memory_order_relaxed);
	while (TAG_OF(s) == SLUICE__LO32(h) && !(s & SLUICE__SLOT_SEALED) &&
	       (s & SLUICE__SLOT_OWN) >= extra) {
		if (atomic_compare_exchange_weak_explicit(slot, &s, s - extra, memory_order_relaxed,
		                                          memory_order_relaxed))
			return;
	}
}

/* Deposit @extra permits of epoch h into @cell, which held @v when the
 * taker looked at it. */
static void lease_deposit(sluice_window_t *w, _Atomic uint64_t *cell, uint64_t v, uint64_t h,
                          uint64_t extra)
{
	uint64_t next = TAG_OF(v) == SLUICE__LO32(h) ? v + extra : (SLUICE__LO32(h) << 32) | extra;
	if (!atomic_compare_exchange_strong_explicit(cell, &v, next, memory_order_relaxed,
	                                             memory_order_relaxed))
		lease_give_back(w, h, extra);
}

/*
 * One CAS on h's bucket (cur @c and slot @s as read): take n, plus a new
 * lease for @cell (which held @v) when leases are on, or refuse from the
 * reads alone.  Returns 1 or 0, or -1 when the epoch moved on.
 */
static int bucket_take(sluice_window_t *w, uint64_t n, uint64_t now, sluice_decision_t *d,
                       uint64_t h, uint64_t c, uint64_t s, struct sluice_window_cell *cell,
                       uint64_t v)
{
	_Atomic uint64_t *slot = &w->slots[h & w->mask];
	for (;;) {
		uint64_t counted = (c & 0xffffffffu) + (s & SLUICE__SLOT_OWN);
		if (counted + n > w->limit) {
			/* Refused from reads: no shared line written. */
			if (d)
				sluice__window_fill_refused(w, d, counted, c & 0xffffffffu, n, h, now);
			return 0;
		}
		uint64_t extra = 0;
		if (cell) {
			/* room / (2 * cells), cells a power of two; at most B */
			extra = (w->limit - counted - n) >> (__builtin_ctz(w->cell_mask + 1) + 1);
			if (extra > w->lease)
				extra = w->lease;
		}
		if (atomic_compare_exchange_weak_explicit(slot, &s, s + n + extra, memory_order_relaxed,
		                                          memory_order_relaxed)) {
			if (cell) {
				/* the snapshot d->remaining reads on this CPU
				 * (a hint, relaxed: it orders nothing) */
				atomic_store_explicit(&cell->seen,
				                      (SLUICE__LO32(h) << 32) | (counted + n + extra),
				                      memory_order_relaxed);
				if (extra)
					lease_deposit(w, &cell->word, v, h, extra);
			}
			if (d)
				sluice__window_fill_allowed(w, d, counted + n + extra, h * w->width_ns, now);
			return 1;
		}
		if (TAG_OF(s) != SLUICE__LO32(h) || (s & SLUICE__SLOT_SEALED))
			return -1;
	}
}

/*
 * The lease was short: take n (and maybe a new lease) from the bucket in
 * one CAS, or refuse from reads alone.  Called with n in 1..limit.
 */
int sluice__window_lease_take(sluice_window_t *w, uint64_t n, uint64_t now,
                              sluice_decision_t *d)
{
	for (;;) {
		uint64_t c, s;
		uint64_t h = ready_head(w, now, &c, &s);
		struct sluice_window_cell *cell = &w->cells[sluice_cpu() & w->cell_mask];
		/* refilled meanwhile, or the fast path saw an older head */
		if (sluice__window_lease_spend(w, cell, n, h, now, d))
			return 1;
		uint64_t v = atomic_load_explicit(&cell->word, memory_order_relaxed);
		if (TAG_OF(v) == SLUICE__LO32(h) && (v & 0xffffffffu) >= n)
			continue; /* refilled since: spend it */
		if (TAG_OF(v) != SLUICE__LO32(h) &&
		    atomic_load_explicit(&w->head, memory_order_acquire) != h)
			continue; /* the cell may hold a newer epoch: look again */
		int rc = bucket_take(w, n, now, d, h, c, s, cell, v);
		if (rc >= 0)
			return rc;
	}
}

/*
 * A refusal: the same n passes once enough of the oldest buckets have left
 * the window.  Walk from the oldest bucket forward until what leaves covers
 * the excess; bucket y leaves at (y + N) * width.  The walk reads closed
 * buckets, which are frozen, and the current one as the caller saw it.
 */
void sluice__window_fill_refused(sluice_window_t *w, sluice_decision_t *d, uint64_t counted,
                                 uint64_t base, uint64_t n, uint64_t h, uint64_t now)
{
	uint64_t start = h * w->width_ns;
	if (now < start)
		now = start;
	uint64_t excess = counted + n - w->limit; /* > 0 on a refusal */
	uint64_t retry = w->window_ns - (now - start); /* the current bucket leaves */
	uint64_t freed = 0;
	/* base is what all the closed buckets hold: when even all of them
	 * leaving is not enough, only the current bucket's leaving is, and
	 * the walk is skipped (deny-mostly traffic on a key whose admissions
	 * all landed in this bucket, the common shape of a flood). */
	for (uint64_t k = base >= excess ? w->buckets - 1 : 0; k >= 1; k--) {
		if (k > h)
			continue; /* epochs before 0 never existed */
		freed += closed_own(w, h - k);
		if (freed >= excess) {
			/* bucket h-k leaves at (h-k)*width + W, which is
			 * after now because k < N. */
			retry = w->window_ns - (now - (h - k) * w->width_ns);
			break;
		}
	}
	d->allowed = 0;
	d->limit = w->limit;
	d->remaining = counted >= w->limit ? 0 : w->limit - counted;
	d->retry_after_ns = retry;
	d->reset_ns = w->window_ns - (now - start);
	d->now_ns = now;
}

uint64_t sluice_window_count_at(sluice_window_t *w, uint64_t now)
{
	uint64_t c, s;
	uint64_t h = ready_head(w, now, &c, &s);
	uint64_t counted = (c & 0xffffffffu) + (s & SLUICE__SLOT_OWN);
	if (w->mode == SLUICE_STRIPED)
		counted += cells_count(w, h);
	return counted;
}

/*
 * Refund.  EXACT: CAS the open bucket's own count down.  STRIPED: take n
 * from any cell tagged with the bucket (only their sum matters), then
 * confirm the bucket was not sealed meanwhile; if it was, the fold may have
 * counted the cell before our decrement, so the refund may not have taken
 * effect: report -SLUICE_ECANCEL (the permits then stay counted).
 */
int sluice_window_refund_at(sluice_window_t *w, uint64_t n, const sluice_decision_t *admitted)
{
	if (!w || !admitted || !admitted->allowed || n == 0)
		return -SLUICE_EINVAL; /* nothing was taken by a refusal */
	uint64_t e = admitted->now_ns / w->width_ns;
	_Atomic uint64_t *slot = &w->slots[e & w->mask];
	uint64_t s = atomic_load_explicit(slot, memory_order_seq_cst);
	if (TAG_OF(s) != SLUICE__LO32(e)) {
		/* Reused (or never opened): e left the window long ago. */
		return 0;
	}
	if (s & SLUICE__SLOT_SEALED) {
		uint64_t h = atomic_load_explicit(&w->head, memory_order_acquire);
		return h - e >= w->buckets ? 0 : -SLUICE_ECANCEL;
	}
	if (w->mode == SLUICE_EXACT) {
		for (;;) {
			if ((s & SLUICE__SLOT_OWN) < n)
				return -SLUICE_EINVAL;
			/* Relaxed: the count is self-contained; a racing seal
			 * fails this CAS and we look again. */
			if (atomic_compare_exchange_weak_explicit(slot, &s, s - n, memory_order_relaxed,
			                                          memory_order_relaxed))
				return 0;
			if (TAG_OF(s) != SLUICE__LO32(e))
				return 0;
			if (s & SLUICE__SLOT_SEALED)
				return -SLUICE_ECANCEL;
		}
	}
	for (uint32_t i = 0; i <= w->cell_mask; i++) {
		_Atomic uint64_t *cell = &w->cells[i].word;
		uint64_t v = atomic_load_explicit(cell, memory_order_relaxed);
		while (TAG_OF(v) == SLUICE__LO32(e) && (v & 0xffffffffu) >= n) {
			/* seq_cst: a Dekker pair with the seal, as in
			 * striped_acquire(). */
			if (atomic_compare_exchange_weak_explicit(cell, &v, v - n, memory_order_seq_cst,
			                                          memory_order_relaxed)) {
				uint64_t s2 = atomic_load_explicit(slot, memory_order_seq_cst);
				return TAG_OF(s2) == SLUICE__LO32(e) && !(s2 & SLUICE__SLOT_SEALED) ?
					       0 :
					       -SLUICE_ECANCEL;
			}
		}
	}
	return -SLUICE_EINVAL; /* no cell holds n permits of that bucket */
}
