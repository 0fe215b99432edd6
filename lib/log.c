/*
 * log.c - exact sliding log: validation, decisions, helping a half-written
 * admission to completion, refunds.
 *
 * DESIGN
 *
 * State.  Permits are numbered 0, 1, 2, ... in admission order; R(q) is the
 * time permit q was recorded at.  `head` (64 bits) counts the permits
 * claimed, `tail` (64 bits) the permits whose times are written; both only
 * grow, and tail <= head <= tail + L.  (L is the limit; with set_limit,
 * read the ring's size as M = C + 1 for the capacity C >= every limit,
 * and L as the limit the decision at hand read: each step below uses only
 * L <= C, so every proof holds per decision.)  `last` is the newest time any
 * admission used; it only grows and starts at 1.  The ring has M = L + 1
 * slots: permit q's time lives in slot q % M, and a slot no permit has used
 * yet holds 0.  Invariants:
 *   (I1) R is non-decreasing in q and R(q) >= 1.
 *   (I2) When tail == head == h, slot q % M holds R(q) for every q in
 *        [h - M, h) (0 for q < 0): the last L permits and one older one.
 *   (I3) At most one admission ("batch") is ever half-written: [tail, head).
 *
 * Decision at head h (tail == h), request n, time T = max(reading, last):
 * the deciding entry is p = h + n - 1 - L, the n-th oldest of the last L.
 * Admit iff p < 0 or T - R(p) >= W.  By (I1) every permit before p is then
 * out of (T - W, T] too, so that interval holds at most L - n permits and n
 * more fit.  Proof of the GUARANTEE: every admission reports a now_ns
 * between its T and the time X it recorded.  Take any [s, s + W) and the
 * newest permit z whose admission's now_ns lies in it: that admission
 * checked R(p_z) <= T - W <= now_ns - W < s; every older permit q has
 * now_ns <= R(q) <= R(p_z) < s; so only permits after p_z, at most L of
 * them up to the end of z's batch, can have now_ns in [s, s + W).
 *
 * An admission, each step a CAS that any thread may perform (helping keeps
 * the log lock-free: nobody waits for a stalled thread):
 *   1. raise `last` to T (so helpers never write a time older than T);
 *   2. claim: head h -> h + n (release).  This is the admission: it carries
 *      the position and n in one 64-bit word, and fails if anything was
 *      claimed since h was read, so no decision is made on a slot that was
 *      reused after it was read (reuse of any slot needs head to move);
 *   3. agree on the batch's time X: CAS slot h % M from its old value to a
 *      proposal (the claimant proposes T, helpers the current `last`; both
 *      are >= T, so the check still holds at X);
 *   4. copy X into the slots of permits h+1 .. h+n-1;
 *   5. tail h -> h + n (release).  Only then can anyone claim again (I3).
 *
 * Why L + 1 slots.  The batch [h, h+n) overwrites the slots of permits
 * h - M .. h + n - 1 - M, all at or before p - 1 and so all <= R(p), but not
 * the slot of p = (h + n) - M itself, which lies just outside the batch's n
 * <= L slots.  So while the batch is pending every helper can read
 * sep = R(p) (0 if p < 0), and every slot of the batch holds either an old
 * value <= sep or the agreed X > sep (X >= T >= R(p) + W, or X >= 1 > 0):
 * "written yet?" is one comparison, with no tag bits, and times keep all 64
 * bits.  With L slots, step 4 would overwrite R(p) and a helper could not
 * tell X from an old time equal to it (equal times are the common case of a
 * burst at one clock reading).  The same gap makes the slot CASes free of
 * ABA: across its lifetime a slot's value only grows (R(q + M) >= R(p') + W
 * > R(q) where p' >= q + 1 decided q + M), so a stale CAS that expects an
 * old value always fails.
 *
 * Staleness is decided against the 64-bit counters, never wrapped tags, and
 * the memory orders exist to make that work.  Slot loads are acquires and
 * slot CASes releases: a reader that sees a value written for a later batch
 * also sees that batch's claim on head (its admission CAS or its re-check
 * of head then fails) and tail's move past its own batch (a helper's check
 * of tail fails).  Readers load tail then head (acquire): equal means no
 * batch was pending at the head load.  head's claim is a release that
 * publishes step 1 to helpers, who acquire head and then read `last` (>= T
 * by coherence); tail's advance is a release that publishes the batch's
 * slots to every decision's acquire of tail.  `last` itself is relaxed: it
 * is only read after one of those acquires.  No fences: ThreadSanitizer
 * sees every synchronisation.  Refunds re-date permits to an earlier time,
 * the one write that lowers a slot; refund() says why that stays
 * ABA-free and exact.
 */
#include <stdlib.h>

#include "sluice/error.h"
#include "sluice/log.h"
#include "clock_internal.h"

/* A fresh log's time: 0 is reserved for "no permit used this slot yet". */
#define TIME_FLOOR 1ULL

/*
 * Retry bounds (log.h, BOUNDED RETRIES).  A decision, a refund and an
 * available() make at most LOG_TRIES attempts; each failed attempt means
 * another thread made progress meanwhile (claimed a batch, finished one,
 * raised `last`), so the bound only bites under a storm of admissions that
 * keeps beating this caller, and never because some thread is stalled
 * (helping finishes a stalled batch in one attempt).  Then the call gives
 * up with the outcome log.h names, which never admits more than an exact
 * decision would.  FINISH_TRIES bounds the failed slot CASes of one
 * finish() that leave the slot "not written": a refund lowering it (once
 * per refund), a spurious failure of a weak CAS, or a writer that is not
 * this log's code (shared memory rewritten by another process); after it
 * the caller leaves the batch pending for the next decision.  It also
 * bounds raise_last()'s CAS, each failure of which means another decision
 * raised `last`.
 */
#define LOG_TRIES 64
#define FINISH_TRIES 64

int sluice_log_init(sluice_log_t *lg, const sluice_log_config_t *cfg)
{
	if (!lg || !cfg)
		return SLUICE_EINVAL;
	if (cfg->limit == 0)
		return SLUICE_ELIMIT;
	if (cfg->limit > SLUICE_LOG_LIMIT_MAX)
		return SLUICE_EMEMORY;
	/* the ring holds the largest limit set_limit may set */
	uint64_t cap = cfg->capacity ? cfg->capacity : cfg->limit;
	if (cap < cfg->limit)
		return SLUICE_ELIMIT;
	if (cap > SLUICE_LOG_LIMIT_MAX)
		return SLUICE_EMEMORY;
	if (cfg->window_ns == 0)
		return SLUICE_EWINDOW;
	const sluice_clock_t *clock;
	int rc = sluice__init_clock(cfg->clock, cfg->window_ns, &clock);
	if (rc != 0)
		return rc;

	/* M = C + 1 slots (the DESIGN needs no more).  A permit's slot is
	 * q % M, found by a multiplication by the reciprocal (slot_of()), not
	 * a 64-bit division: a decision touches up to a dozen slots, and the
	 * divisions were most of its time. */
	uint64_t nslots = cap + 1;
	size_t bytes = (size_t)((nslots * sizeof(uint64_t) + SLUICE_CACHELINE - 1) /
	                        SLUICE_CACHELINE * SLUICE_CACHELINE);
	_Atomic uint64_t *times = aligned_alloc(SLUICE_CACHELINE, bytes);
	if (!times)
		return SLUICE_ENOMEM;
	for (uint64_t i = 0; i < nslots; i++)
		atomic_init(&times[i], 0);

	atomic_init(&lg->limit, cfg->limit);
	lg->capacity = cap;
	lg->window_ns = cfg->window_ns;
	lg->slots = nslots;
	lg->slots_inv = UINT64_MAX / nslots;
	lg->clock = clock;
	lg->times = times;
	atomic_init(&lg->head, 0);
	atomic_init(&lg->tail, 0);
	atomic_init(&lg->last, TIME_FLOOR);
	atomic_init(&lg->hint, 0);
	return 0;
}

void sluice_log_destroy(sluice_log_t *lg)
{
	if (!lg)
		return;
	free(lg->times);
	lg->times = NULL;
}

/*
 * q % M without dividing: with inv = floor((2^64 - 1) / M), the high half of
 * q * inv is floor(q / M) or one less (q * inv / 2^64 > q / M - 1), so the
 * remainder it leaves is below 2 M and one subtraction corrects it.
 */
static inline _Atomic uint64_t *slot_of(const sluice_log_t *lg, uint64_t q)
{
	__extension__ typedef unsigned __int128 u128;
	uint64_t qe = (uint64_t)(((u128)q * lg->slots_inv) >> 64);
	uint64_t r = q - qe * lg->slots;
	return &lg->times[r >= lg->slots ? r - lg->slots : r];
}

/* A slot's value.  Acquire: pairs with the release CAS that wrote it (see
 * "Memory orders"): a reader that gets a later batch's value also sees that
 * batch's claim when it next loads head or tail. */
static inline uint64_t load_slot(const sluice_log_t *lg, uint64_t q)
{
	return atomic_load_explicit(slot_of(lg, q), memory_order_acquire);
}

/*
 * Steps 3-5 for the pending batch [tl, hd), read from a consistent
 * (tail, head) pair.  @propose: the claimant's T, or 0 for a helper (who
 * proposes the current `last`).  Returns 1 with *x_out = the batch's agreed
 * time when it saw the batch pending (and then finished it, or saw it
 * finished); 0 when the batch was already finished before it looked (the
 * slots may hold newer values by then); -1 when it gave up after
 * FINISH_TRIES failed slot CASes (the batch may still be pending: whoever
 * decides next helps it again).
 */
static int finish(sluice_log_t *lg, uint64_t tl, uint64_t hd, uint64_t propose,
                  uint64_t *x_out)
{
	_Atomic uint64_t *first = slot_of(lg, tl);
	/* sep = R(hd - M), the batch's deciding entry (0 before permit 0):
	 * outside the batch's slots, so stable until tail reaches hd. */
	uint64_t sep = load_slot(lg, hd);
	uint64_t u = load_slot(lg, tl);
	/* Both reads were made while the batch was pending, or this load of
	 * tail sees that it no longer is (a newer slot value is written
	 * after tail passes tl). */
	if (atomic_load_explicit(&lg->tail, memory_order_acquire) != tl)
		return 0;
	uint64_t x = propose;
	int tries = FINISH_TRIES;
	while (u <= sep) {
		if (tries-- == 0)
			return -1;
		/* Step 3 not done.  A helper proposes `last`: it acquired
		 * head == hd, whose release CAS came after the claimant raised
		 * last to its T, so last >= T > sep here. */
		if (!propose)
			x = atomic_load_explicit(&lg->last, memory_order_relaxed);
		/* Release: publishes X to the helpers that read this slot
		 * (acquire) before they copy it and advance tail.  A failure
		 * returns the current value: someone's X (> sep), or an old
		 * time a refund lowered (still <= sep: try again). */
		if (atomic_compare_exchange_strong_explicit(first, &u, x, memory_order_release,
		                                            memory_order_acquire))
			u = x;
		else if (u > sep && atomic_load_explicit(&lg->tail, memory_order_acquire) != tl)
			return 0; /* finished and possibly reused since: not X */
	}
	x = u; /* agreed: the first value above sep is the batch's time */
	for (uint64_t q = tl + 1; q < hd; q++) {
		_Atomic uint64_t *s = slot_of(lg, q);
		/* Acquire: pairs with other helpers' release CASes, so the
		 * copies we only read are published by our tail CAS too. */
		uint64_t v = atomic_load_explicit(s, memory_order_acquire);
		/* Step 4.  Release as in step 3.  v is an old time (<= sep),
		 * X, or (if the batch finished and the slot was reused since)
		 * a later time > X. */
		while (v <= sep &&
		       !atomic_compare_exchange_weak_explicit(s, &v, x, memory_order_release,
		                                              memory_order_acquire)) {
			if (tries-- == 0)
				return -1;
		}
		if (v > x)
			goto done; /* finished by others and reused: nothing to do */
	}
	/* Step 5.  Release: every slot of the batch holds X, written by us or
	 * read by us with acquire, so a decision that acquires this tail sees
	 * them.  Fails harmlessly if someone advanced it first. */
	atomic_compare_exchange_strong_explicit(&lg->tail, &tl, hd, memory_order_release,
	                                        memory_order_relaxed);
done:
	if (x_out)
		*x_out = x;
	return 1;
}

/*
 * Load a consistent snapshot.  Returns 1 with *h_out when no batch is
 * pending (tail == head == h, so (I2) holds at h); otherwise finishes the
 * pending batch and returns 0: the caller starts over.
 */
static int quiescent(sluice_log_t *lg, uint64_t *h_out)
{
	/* Acquires: tail pairs with the release that finished the last
	 * batch (its slots), head with the release claim (`last`). */
	uint64_t tl = atomic_load_explicit(&lg->tail, memory_order_acquire);
	uint64_t h = atomic_load_explicit(&lg->head, memory_order_acquire);
	if (tl == h) {
		*h_out = h;
		return 1;
	}
	/* tail unchanged across the head load: head was read while [tl, h)
	 * was the pending batch (a newer claim needs tail to move first). */
	if (atomic_load_explicit(&lg->tail, memory_order_acquire) == tl)
		finish(lg, tl, h, 0, NULL);
	return 0;
}

/*
 * How many of the last L entries before h (permits h - L .. h - 1, those
 * before permit 0 counting as empty) are out of the window at T: by (I1)
 * they are a prefix, so the count is where the window's boundary lies.
 * Equivalently: a request of k would pass at T iff k <= this count.
 *
 * The boundary only moves forward with time, and decisions ask about it
 * at nearly the same time over and over, so `hint` keeps where the last
 * search found it: the search checks the two entries around the hint
 * (one cache line, usually), and only when the boundary has moved gallops
 * from there (1, 2, 4, ... entries) and bisects the bracket, O(log d)
 * loads for a move of d entries instead of O(log L) on every decision.
 * The hint is only a starting point: any value, however stale or raced
 * by other threads' stores, gives the same count, so it is relaxed and
 * written only when it changes.  Reads may be overwritten while we
 * search; callers validate against head as for any read, and the search
 * is bounded by [h - L, h] whatever it reads.
 */
static int out_at(const sluice_log_t *lg, uint64_t q, uint64_t T)
{
	uint64_t r = load_slot(lg, q);
	/* r > T only for a value read after reuse: the caller's
	 * validation discards this count then. */
	return r <= T && T - r >= lg->window_ns;
}

static uint64_t left_count(sluice_log_t *lg, uint64_t h, uint64_t T, uint64_t L)
{
	const uint64_t lo0 = h > L ? h - L : 0;
	uint64_t g = atomic_load_explicit(&lg->hint, memory_order_relaxed);
	g = g < lo0 ? lo0 : g > h ? h : g;
	uint64_t a, b; /* the boundary lies in (a, b]: out below a+1.., in from b */
	int up = g < h && out_at(lg, g, T);
	if (up) {
		/* boundary above g: gallop up to an entry in the window */
		uint64_t step = 1;
		a = g;
		/* ends within 2 + log2(L) rounds: step doubles, b stops at h */
		for (;;) {
			b = h - a > step ? a + step : h;
			if (b == h || !out_at(lg, b, T))
				break;
			a = b;
			step <<= 1;
		}
		/* out(a), and b == h or in(b): the boundary is in (a, b] */
	} else if (g > lo0 && !out_at(lg, g - 1, T)) {
		/* boundary below g: gallop down to an entry out of it */
		uint64_t step = 1;
		b = g - 1;
		/* ends within 2 + log2(L) rounds: step doubles, c stops at lo0 */
		for (;;) {
			uint64_t c = b - lo0 > step ? b - step : lo0;
			if (c == lo0 && !out_at(lg, lo0, T)) {
				a = lo0;
				b = lo0; /* nothing out: the boundary is lo0 */
				break;
			}
			if (out_at(lg, c, T)) {
				a = c; /* out(a), in(b) */
				break;
			}
			b = c;
			step <<= 1;
		}
	} else {
		a = b = g; /* the hint is the boundary */
	}
	/* bisect (a, b]: out(a) and in(b) (b == h counts as in) */
	while (b - a > 1) {
		uint64_t mid = a + (b - a) / 2;
		if (out_at(lg, mid, T))
			a = mid;
		else
			b = mid;
	}
	if (g != b)
		atomic_store_explicit(&lg->hint, b, memory_order_relaxed);
	return (h >= L ? 0 : L - h) + (b - lo0);
}

/*
 * Step 1: raise `last` to @t.  Returns 1 when last >= t afterwards, 0 when
 * it gave up: each failure means another decision raised last meanwhile,
 * so the caller spends one of its LOG_TRIES attempts and decides again
 * (its claim would be stale anyway: the raiser is about to claim).
 */
static int raise_last(sluice_log_t *lg, uint64_t cur, uint64_t t)
{
	for (int i = 0; i < FINISH_TRIES; i++) {
		if (cur >= t)
			return 1;
		/* Relaxed: helpers read last only after acquiring the claim
		 * on head that follows this in program order (release). */
		if (atomic_compare_exchange_weak_explicit(&lg->last, &cur, t, memory_order_relaxed,
		                                          memory_order_relaxed))
			return 1;
	}
	return cur >= t;
}

/* W - (T - r) for an entry r <= T still in the window: when it leaves. */
static inline uint64_t leaves_in(const sluice_log_t *lg, uint64_t r, uint64_t T)
{
	uint64_t age = T - r;
	return age >= lg->window_ns ? 0 : lg->window_ns - age;
}

int sluice_log_acquire_at(sluice_log_t *lg, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	if (n == 0)
		return SLUICE_EINVAL;
	/* The limit this decision is judged against, read once (relaxed: it
	 * publishes nothing; SET_LIMIT in log.h).  L <= capacity, so the
	 * deciding entry h + n - 1 - L is one the ring still holds. */
	const uint64_t L = atomic_load_explicit(&lg->limit, memory_order_relaxed);
	const uint64_t W = lg->window_ns;
	if (n > L) {
		uint64_t last = atomic_load_explicit(&lg->last, memory_order_relaxed);
		sluice__decision_never(d, L, now > last ? now : last);
		return SLUICE_ETOOBIG;
	}
	for (int attempt = 0; attempt < LOG_TRIES; attempt++) {
		uint64_t h;
		if (!quiescent(lg, &h))
			continue;
		/* After the acquire of tail == h: last >= every R(q), q < h. */
		uint64_t last = atomic_load_explicit(&lg->last, memory_order_relaxed);
		uint64_t T = now > last ? now : last;
		/* The deciding entry, read directly (not from the search
		 * below): one load is a value the slot really held, which a
		 * concurrent refund's ascending re-dating keeps sorted. */
		uint64_t rp = 0;
		int fits = h + n <= L;
		if (!fits) {
			rp = load_slot(lg, h + n - 1 - L);
			fits = rp <= T && T - rp >= W;
		}
		uint64_t left = d ? left_count(lg, h, T, L) : 0;
		if (!fits) {
			uint64_t newest = load_slot(lg, h - 1); /* h >= 1: p >= 0 */
			/* Validate: no claim since h was read, so rp and newest
			 * are R(p) and R(h-1), not values of reused slots. */
			if (atomic_load_explicit(&lg->head, memory_order_acquire) != h)
				continue;
			if (d) {
				d->allowed = 0;
				d->limit = L;
				d->remaining = left < n ? left : n - 1;
				d->retry_after_ns = W - (T - rp); /* exact: p leaves */
				d->delay_ns = 0;
				d->reset_ns = leaves_in(lg, newest, T);
				d->now_ns = T;
			}
			return 0;
		}
		if (T > last && !raise_last(lg, last, T))
			continue;
		/* Step 2.  Release: publishes the raise of last to helpers.
		 * Fails if anything was claimed since h was read, and then
		 * every read above may be stale: decide again. */
		if (!atomic_compare_exchange_strong_explicit(&lg->head, &h, h + n,
		                                             memory_order_release,
		                                             memory_order_relaxed))
			continue;
		uint64_t x = T;
		int got = finish(lg, h, h + n, T, &x);
		/* got == -1: finish() gave up with the batch possibly still
		 * pending; the next decision finishes it at a time >= T, and
		 * we report T (not known, as below). */
		int known = got == 1;
		if (got == 0) {
			/* Others finished our batch before we looked (tail has
			 * passed h + n).  Our last slot still holds X unless
			 * permit h + n - 1 + M was claimed since, i.e. unless
			 * head > h + n + C.  If it was, a later batch decided
			 * that all our permits had left the window (its
			 * deciding entry is newer than them): report T <= X;
			 * the guarantee holds on either, and refund() sees
			 * them as gone (case (a)). */
			uint64_t v = load_slot(lg, h + n - 1);
			/* Acquire, as for every validation: had v been written
			 * for permit h + n - 1 + M, we would see its claim. */
			if (atomic_load_explicit(&lg->head, memory_order_acquire) <=
			    h + n + lg->capacity) { /* h + n - 1 + M, M = capacity + 1 */
				x = v;
				known = 1;
			}
		}
		if (d) {
			d->allowed = 1;
			d->limit = L;
			d->remaining = left >= n ? left - n : 0;
			d->retry_after_ns = 0;
			d->delay_ns = 0;
			if (known) {
				d->reset_ns = W; /* our permits are the newest */
			} else {
				uint64_t lst = atomic_load_explicit(&lg->last, memory_order_relaxed);
				uint64_t extra = lst - x; /* lst >= X >= T = x */
				d->reset_ns = extra > UINT64_MAX - W ? UINT64_MAX : W + extra;
			}
			d->now_ns = x;
		}
		return 1;
	}
	/* LOG_TRIES attempts, each beaten by another thread's progress: a
	 * refusal that took nothing (log.h, BOUNDED RETRIES).  retry_after_ns
	 * 0 says the limit did not decide it; reset_ns W bounds the newest
	 * entry's stay (it is at most T). */
	if (d) {
		uint64_t last = atomic_load_explicit(&lg->last, memory_order_relaxed);
		uint64_t T = now > last ? now : last;
		d->allowed = 0;
		d->limit = L;
		d->remaining = 0;
		d->retry_after_ns = 0;
		d->delay_ns = 0;
		d->reset_ns = W;
		d->now_ns = T;
	}
	return 0;
}


/*
 * Refund.  The permits cannot simply be removed: head cannot go back (a
 * stale helper would then advance tail past head, and a stale CAS could
 * match a restored slot), and the slots the admission overwrote held live
 * (expired) entries that are gone.  Two cases are exact anyway:
 *
 *   (a) The permits have left the window: last - now_ns >= W.  Every later
 *       decision runs at >= last, so they, and everything older, count as
 *       out; whether they exist changes no decision.  Nothing to do.
 *
 *   (b) They are the only permits recorded at now_ns (the run [s, s+n)),
 *       and the permits before them had all left the window by now_ns
 *       (R(s-1) < now_ns - W, or s = 0 and now_ns > W).  Then re-dating
 *       them to V = now_ns - W puts them out of every future window, keeps
 *       (I1) (R(s-1) < V < now_ns), and makes every later decision equal to
 *       the one without them: the entries a decision looks at are either
 *       newer than the run (the same in both cases) or older and out of the
 *       window in both.
 *       Why "the only permits": permits recorded at one time are
 *       interchangeable for the ring, but not for their callers.  A
 *       claimant whose batch was finished by helpers reads its time back
 *       from its last slot after tail has passed it; had another thread's
 *       refund re-dated that slot, it would report V, W before its decision
 *       (found by tests/test_log_threads.c under ASan: L + 1 in a window).
 *       So a refund only ever re-dates the caller's own permits.
 *
 * Re-dating goes oldest first, one CAS now_ns -> V per slot, so every
 * intermediate state is sorted and counts a subset of the permits: a
 * concurrent decision may still count some of them (never fewer than
 * after).  It is the one write that lowers a slot, so ABA needs a look:
 *   - a stale helper of any batch expects an old value <= R(s-1) < V: its
 *     CAS fails on V and on now_ns alike;
 *   - our own CAS expects now_ns.  A slot that was reused holds a time >
 *     now_ns: a later permit q + M was decided on an entry >= q + 1, which
 *     still holds now_ns (we re-date in order and have not reached it), or
 *     is newer, so R(q + M) >= now_ns + W.  We count that permit as given
 *     back: its batch found it out of the window, as every later decision
 *     will;
 *   - the run is exactly the caller's n permits, and any other refund
 *     finds R(s'-1) = V (not below now_ns - W) or a run of another length
 *     and gets SLUICE_ECANCEL: only one refund re-dates a run, so nobody
 *     else lowers a slot we still expect at now_ns.
 * A batch claimed while we re-date may use a re-dated slot as its deciding
 * entry (sep): helpers that read sep = V read it after the claimant did
 * (acquire chain), and ascending order means every older entry they read
 * is re-dated too; X >= V + W > V, so the gap in finish() still holds.
 */
int sluice_log_refund(sluice_log_t *lg, uint64_t n, const sluice_decision_t *admitted)
{
	if (!lg || !admitted || !admitted->allowed || n == 0 || n > lg->capacity)
		return SLUICE_EINVAL;
	/* C: the ring's capacity (M = C + 1 slots); no admission took more */
	const uint64_t L = lg->capacity, W = lg->window_ns, ta = admitted->now_ns;
	for (int attempt = 0; attempt < LOG_TRIES; attempt++) {
		uint64_t h;
		if (!quiescent(lg, &h))
			continue;
		uint64_t last = atomic_load_explicit(&lg->last, memory_order_relaxed);
		if (last >= ta && last - ta >= W)
			return 0; /* (a) */
		/* s = first permit in [lo, h) recorded at >= ta.  lo = h - M is
		 * the oldest permit the ring still holds (I2). */
		uint64_t lo = h > L + 1 ? h - (L + 1) : 0;
		uint64_t a = lo, b = h;
		while (a < b) {
			uint64_t mid = a + (b - a) / 2;
			if (load_slot(lg, mid) < ta)
				a = mid + 1;
			else
				b = mid;
		}
		uint64_t s = a;
		/* exactly n permits at ta: the caller's own (see (b)) */
		int exact = s + n <= h && load_slot(lg, s + n - 1) == ta &&
		            (s + n == h || load_slot(lg, s + n) != ta);
		if (exact && s == 0)
			exact = ta > W; /* V = ta - W >= 1 > 0 (empty slots) */
		else if (exact)
			exact = s > lo && ta - load_slot(lg, s - 1) > W; /* R(s-1) < V */
		if (atomic_load_explicit(&lg->head, memory_order_acquire) != h)
			continue; /* a claim moved the ring: look again */
		if (!exact)
			return SLUICE_ECANCEL;
		uint64_t v = ta - W;
		for (uint64_t q = s; q < s + n; q++) {
			uint64_t cur = ta;
			/* Release: a decision that reads V (acquire) sees the
			 * older re-datings too, so it never sees an unsorted
			 * ring. */
			if (!atomic_compare_exchange_strong_explicit(slot_of(lg, q), &cur, v,
			                                             memory_order_release,
			                                             memory_order_relaxed) &&
			    cur < ta)
				return SLUICE_ECANCEL; /* another refund won the run */
		}
		return 0;
	}
	/* Beaten LOG_TRIES times by claims moving the ring: nothing was
	 * re-dated, so the permits stay counted (fewer admissions). */
	return SLUICE_ECANCEL;
}

/*
 * What a decision at @now would see: left_count() is exactly the largest
 * request that passes at T (a request of k passes iff k <= it), read from
 * a quiescent ring and validated as a refusal is (no claim moved it).
 */
uint64_t sluice_log_available_at(sluice_log_t *lg, uint64_t now)
{
	for (int attempt = 0; attempt < LOG_TRIES; attempt++) {
		uint64_t h;
		if (!quiescent(lg, &h))
			continue;
		/* Relaxed: the limit publishes nothing. */
		uint64_t L = atomic_load_explicit(&lg->limit, memory_order_relaxed);
		uint64_t last = atomic_load_explicit(&lg->last, memory_order_relaxed);
		uint64_t T = now > last ? now : last;
		uint64_t left = left_count(lg, h, T, L);
		/* Acquire, as every validation: see "Memory orders". */
		if (atomic_load_explicit(&lg->head, memory_order_acquire) == h)
			return left;
	}
	return 0; /* no snapshot held still for LOG_TRIES attempts (log.h) */
}

uint64_t sluice_log_available(sluice_log_t *lg)
{
	return sluice_log_available_at(lg, sluice_clock_now(lg->clock));
}

/*
 * set_limit is one store.  The ring, head, tail and every recorded time
 * stay as they are (nothing forgotten, nothing minted): a decision with
 * limit L looks at the L-th newest entry, which the ring holds for any
 * L <= capacity (it keeps capacity + 1 times), so the DESIGN's proofs hold
 * for each decision with the L it read.  Relaxed: the limit orders no
 * other data; a decision that happens after this store reads it or a
 * later value.
 */
int sluice_log_set_limit(sluice_log_t *lg, uint64_t limit)
{
	if (!lg)
		return SLUICE_EINVAL;
	if (limit < 1 || limit > lg->capacity)
		return SLUICE_ELIMIT;
	atomic_store_explicit(&lg->limit, limit, memory_order_relaxed);
	return 0;
}
