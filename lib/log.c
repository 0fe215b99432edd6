/* SPDX-License-Identifier: MIT */
/*
 * log.c - exact sliding log: validation, decisions, refunds.
 *
 * DESIGN
 *
 * State.  Permits are numbered 0, 1, 2, ... in admission order; R(q) is the
 * time permit q was recorded at.  Hot state is one 16-byte pair changed
 * only by one double-width CAS (lib/pair_internal.h):
 *   head = 2 h + m: h permits admitted so far, m = 1 when the newest
 *          admission ("batch") took n > 1 permits;
 *   last = R(h - 1), the time of the newest permit (1 in a fresh log).
 * `bstart` is the first permit of the newest batch of n > 1 (raised by its
 * claimant before its CAS); `hint` only speeds up searches.  The ring has
 * M = C + 1 slots (C the capacity, >= every limit L): permit q's time lives
 * in slot q % M, a slot no permit has used yet holds 0.  Invariants:
 *   (I1) R is non-decreasing in q and R(q) >= 1.
 *   (I2) When the pair is (2h + m, t): t = R(h - 1); the newest batch
 *        B = [b, h) (b = h - 1 when m = 0, b = bstart when m = 1) has all
 *        its permits at t; and slot q % M holds R(q) for every q in
 *        [h - M, b) (0 for q < 0).  The slots of B may still hold older
 *        values: their time is in the pair itself.
 *   (I3) bstart only grows, and when m = 1, bstart is b or (once the next
 *        claimant has written B's slots) h; never between, never below b.
 * So a reader of a consistent (head, last) knows every R(q), h - M <= q < h:
 * R(q) = t for q >= b, the slot otherwise ("rtime" below).
 *
 * Decision at pair (2h + m, t), request n, time T = max(reading, t): the
 * deciding entry is p = h + n - 1 - L, the n-th oldest of the last L.
 * Admit iff p < 0 or T - R(p) >= W.  By (I1) every permit before p is then
 * out of (T - W, T] too, so that interval holds at most L - n permits and n
 * more fit.  A refusal only reads, and is validated by head being unchanged
 * (no admission since: no slot it read was reused).  An admission:
 *   1. help: raise every slot of B to t ("raise only": a CAS from any value
 *      below t, none when the slot is >= t);
 *   2. n > 1: raise bstart to h;
 *   3. the pair CAS (2h + m, t) -> (2 (h + n) + [n > 1], T).  This is the
 *      admission.  It fails if anything was admitted since the pair was
 *      read (h only grows), and then every read above may be stale: decide
 *      again.  The batch's own slots are left to the next claimant's step 1.
 * (I2) holds after step 3: step 1 wrote B, (I2) at h covered [h - M, b), and
 * the new batch [h, h + n) is at T = new last.  It holds while helpers run:
 * a helper only ever writes the right value.  Proof: a helper that read the
 * pair (2h + m, t) and raises slot q, b <= q < h, to t = R(q).  The slot
 * holds R(q - kM) for some k >= 1 (not yet written for q: <= t by (I1), so
 * raising it is q's write), R(q) = t (no write), or R(q + kM) >= t (reused
 * since: no write, raise only).  No other value is ever in a slot (no
 * refund lowers one, below).  So a helper stalled with an old pair, for any
 * time, writes nothing wrong when it resumes.
 * Why M = C + 1: step 1 writes the slots of B, whose previous values are
 * permits [b - M, h - M), all older than h - L for every L <= C, so no
 * decision at this pair needs them; the batch's own slots are written only
 * by the next claimant, at the next pair.
 * (I3): only claimants write bstart, each the h of a pair it read, after
 * its step 1 and before its CAS.  The pair's h only takes batch boundaries,
 * so a value in (b, h) is never written; a stale claimant's h < b fails to
 * raise it; a claimant at the current pair writes h after writing B.
 *
 * GUARANTEE: every admission reports now_ns = its T, the time recorded for
 * its permits.  Take any [s, s + W) and the newest permit z whose
 * admission's now_ns lies in it: that admission checked R(p_z) <= T - W <
 * s; every older permit q has R(q) <= R(p_z) < s; so only permits after
 * p_z, at most L of them up to the end of z's batch, lie in [s, s + W).
 *
 * Consistent reads.  head, then last, then head again, all acquires: the
 * two halves change together, by one CAS that moves h, or last alone, by
 * set_limit's re-dating (below), which only moves it on; so an unchanged
 * head means last is a value the pair held with that head.  No 16-byte
 * load is needed (x86-64 has none that is atomic without a CAS).  A lost
 * pair CAS is the other consistent read: CMPXCHG16B compares and hands
 * back all 16 bytes in one atomic access, so the pair it returns is a
 * (head, last) that held at one instant, and the next attempt decides on
 * it (sluice__pair_cas_observe) instead of loading head, last and head
 * again while the winner keeps the line.  That attempt is exactly an
 * attempt at a pair read by the three loads: (I2) holds at every pair the
 * log passes through, bstart is loaded for it as for any snapshot (the
 * pair does not say where its batch starts), and its help and CAS are
 * step 1 and step 3 above.  After it, the thread pauses a bounded while
 * (backoff() below) before that attempt.
 *
 * Memory orders.  The pair CAS is a full barrier (every __sync builtin):
 * it publishes step 1's slot values and step 2's bstart to every thread
 * that acquires head afterwards, and a failed one acquires as well: it
 * read the value the winner's CAS (a full barrier) wrote, so the winner's
 * slot values and bstart are visible to the attempt that decides on the
 * pair it handed back.  Slot loads are acquires and slot CASes
 * releases: a reader that sees a value written for a later permit (a
 * helper at a later pair wrote it after acquiring that pair) also sees
 * that pair when it next loads head, so its validation fails.  bstart's
 * raise is a release, its load an acquire: a helper that reads bstart = h
 * (raised by the next claimant after its step 1) sees B's slots written.
 * No fences: ThreadSanitizer sees every synchronisation (pair_internal.h
 * tells it the CAS's ordering).
 *
 * Cost.  An admission is two read-modify-writes on shared lines: the help
 * CAS on the previous permit's slot (none when it is already written) and
 * the pair CAS.  Between the pair's read and its CAS an admission does only
 * what the CAS needs (the deciding entry, the help): an admission's
 * `remaining` is searched after its CAS, from the same snapshot (log.h
 * allows a stale one under concurrency; alone it is exact, nothing having
 * changed a slot it reads), so the window another thread can win in is
 * short.  A refusal is three loads of the head line and the slots
 * it reads.  A mutex-protected log pays two (lock, unlock).
 *
 * Wrap.  h counts permits in 63 bits: at 10^9 permits a second it would
 * take 292 years to reach 2^63, and times are nondecreasing along h (and
 * increase at a re-dating, which keeps h), so no pair value ever repeats
 * (no ABA on the CAS).
 *
 * Readings across a change (log.h).  set_limit re-dates: the pair
 * (2h + m, t) -> (2h + m, t + 1), one pair CAS.  (I1)-(I3) hold after it:
 * the newest batch B's time is in the pair, so B is now at t + 1 >= every
 * older permit; its slots are written by the next claimant, at the new
 * pair, with t + 1, and a helper stalled with the old pair raises one
 * only to t (raise only), which the claimant raises again; bstart and the
 * slots before B are untouched.  It is the change's stamp.  The limit's
 * stores, its loads (one per attempt, after the pair the attempt decides
 * on) and the pair CASes are seq_cst: one total order S.  An admission's
 * CAS replaces the pair p it decided on; its limit load came after p was
 * read (acquire) and before the CAS, and no pair CAS came in between, so
 * no re-dating did: the load lies in S between p's writing and the next
 * pair CAS.  A lowering is stored before its re-dating: an admission after
 * the re-dating read its pair after it, so the limit after the store; one
 * whose CAS came between the store and the re-dating may have read the
 * lower limit at a time < t + 1 (stricter).  A raise is stored after its
 * re-dating: an admission before it loaded the limit before the
 * re-dating, before the store; one after may read the old, lower limit.
 * Every admission after the re-dating is at T >= t + 1.  So each admission
 * is judged against a limit no higher than the one in force at its T, and
 * the GUARANTEE's proof (the newest permit z of an interval: at most L_z
 * in it) gives at most the largest limit in force in the interval.  Setters
 * serialise on `writer`, so the stores and re-datings of two changes do
 * not interleave.  The old code read the limit once per call and stored it
 * alone: a decision that lost its CAS went on against the old limit, and
 * one in flight with no admission in between admitted 50 under a limit of
 * 10 (tests/core/test_log_stall.c).
 *
 * Refund.  A slot is never lowered: a stale helper (above) could raise a
 * re-dated slot back to its old time, leaving the ring unsorted, and (I1)
 * is what makes one entry decide for all older ones.  So a refund gives
 * back exactly only what no later decision counts (refund() below).
 *
 * Fork and shared memory.  Nothing is owned between two instructions: a
 * thread that stops, dies or is not copied into a forked child leaves the
 * pair as it was before or after its CAS, and slots holding only right
 * values (the helping rule), so the copy is a valid log.  Every loop is
 * bounded (BOUNDED RETRIES); every index is reduced to the ring, and a
 * bstart read from memory another process rewrote is clamped to a batch
 * of at most C, so a rewritten log can give wrong answers but never crash
 * or spin.
 */
#include <stdlib.h>

#include "sluice/error.h"
#include "sluice/log.h"
#include "clock_internal.h"
#include "pair_internal.h"
#include "writer_internal.h"

/* A fresh log's time: 0 is reserved for "no permit used this slot yet". */
#define TIME_FLOOR 1ULL

/* head's low bit: the newest batch took n > 1 permits (its first is bstart) */
#define HEAD_MULTI 1ULL

/*
 * Retry bounds (log.h, BOUNDED RETRIES).  A decision and an available()
 * make at most LOG_TRIES attempts; each failed attempt means another thread
 * admitted meanwhile (the pair moved), so the bound only bites under a
 * storm of admissions that keeps beating this caller, never because some
 * thread is stalled (nothing waits for another thread).  Then the call
 * gives up with the outcome log.h names, which never admits more than an
 * exact decision would.  HELP_TRIES bounds the failed CASes of one help
 * (and of one raise of bstart): with this log's calls only a spurious
 * failure of a weak CAS, or another helper writing the same value, fails
 * one, so the bound is for writers that are not this log's code (shared
 * memory rewritten by another process); then the attempt fails.
 */
#define LOG_TRIES 64
#define HELP_TRIES 64

/* The one validator of init and config_check (clock_internal.h): 0 with
 * the clock and the ring's capacity C, or init's code. */
static int validate(const sluice_log_config_t *cfg, sluice__step_use_t use,
                    const sluice_clock_t **clock, uint64_t *capacity)
{
	if (!cfg)
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
	*capacity = cap;
	return sluice__init_clock(cfg->clock, cfg->window_ns, use, clock);
}

int sluice_log_config_check(const sluice_log_config_t *cfg)
{
	const sluice_clock_t *clock;
	uint64_t cap;
	return validate(cfg, SLUICE__ASK, &clock, &cap);
}

int sluice_log_init(sluice_log_t *lg, const sluice_log_config_t *cfg)
{
	if (!lg)
		return SLUICE_EINVAL;
	const sluice_clock_t *clock;
	uint64_t cap;
	int rc = validate(cfg, SLUICE__RECORD, &clock, &cap);
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
	atomic_init(&lg->writer, 0);
	lg->capacity = cap;
	lg->window_ns = cfg->window_ns;
	lg->slots = nslots;
	lg->slots_inv = UINT64_MAX / nslots;
	lg->clock = clock;
	lg->times = times;
	atomic_init(&lg->head, 0);
	atomic_init(&lg->last, TIME_FLOOR);
	atomic_init(&lg->bstart, 0);
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
 * "Memory orders"): a reader that gets a later permit's value also sees
 * the pair that helper read when it next loads head. */
static inline uint64_t load_slot(const sluice_log_t *lg, uint64_t q)
{
	return atomic_load_explicit(slot_of(lg, q), memory_order_acquire);
}

/*
 * A consistent read of the pair: h, t = R(h - 1) and b, the first permit
 * whose time is t but whose slot may not be written yet ((I2)).
 */
struct snap {
	uint64_t word; /* head as read: the validation compares it */
	uint64_t h;    /* permits admitted */
	uint64_t t;    /* R(h - 1), the log's time */
	uint64_t b;    /* R(q) = t for b <= q < h, the slot for q < b */
};

/*
 * The snapshot of a pair (@w, @t) known to be consistent: read by the
 * three loads below, or handed back whole by a failed pair CAS.
 */
static inline void snap_of(sluice_log_t *lg, uint64_t w, uint64_t t, struct snap *s)
{
	uint64_t h = w >> 1;
	uint64_t b = h ? h - 1 : 0;
	if (SLUICE_UNLIKELY(w & HEAD_MULTI)) {
		/* Acquire: pairs with the release raise of bstart; b is the
		 * batch's first permit, or h - 1 when the next claimant has
		 * already written the batch (I3). */
		uint64_t bs = atomic_load_explicit(&lg->bstart, memory_order_acquire);
		if (bs < b)
			b = bs;
		/* a batch holds at most C permits; a larger one is memory
		 * rewritten from outside: keep the help bounded */
		if (h - b > lg->capacity)
			b = h - lg->capacity;
	}
	s->word = w;
	s->h = h;
	s->t = t;
	s->b = b;
}

static int snapshot(sluice_log_t *lg, struct snap *s)
{
	/* Acquires: pair with the pair CAS (a full barrier) that wrote head,
	 * so every slot value and bstart it published is visible below. */
	uint64_t w = atomic_load_explicit(&lg->head, memory_order_acquire);
	uint64_t t = atomic_load_explicit(&lg->last, memory_order_acquire);
	if (atomic_load_explicit(&lg->head, memory_order_acquire) != w)
		return 0; /* an admission between the loads: t may not be w's */
	snap_of(lg, w, t, s);
	return 1;
}

/* R(q) for h - M <= q < h, read at the snapshot @s ((I2)). */
static inline uint64_t rtime(const sluice_log_t *lg, const struct snap *s, uint64_t q)
{
	return q >= s->b ? s->t : load_slot(lg, q);
}

/*
 * Step 1: raise the slots of the newest batch [b, h) to t.  Returns 0 after
 * HELP_TRIES failed CASes (only a writer outside this log's calls, or a
 * run of spurious weak-CAS failures): the caller's attempt fails.
 */
static int help(sluice_log_t *lg, const struct snap *s)
{
	int tries = HELP_TRIES;
	for (uint64_t q = s->b; q < s->h; q++) {
		_Atomic uint64_t *slot = slot_of(lg, q);
		/* Acquire: a value >= t written by another helper is published
		 * by our pair CAS too (its release, our acquire, our barrier). */
		uint64_t v = atomic_load_explicit(slot, memory_order_acquire);
		while (v < s->t) {
			if (tries-- == 0)
				return 0;
			/* Release: publishes R(q) to readers that acquire the
			 * slot; the pair CAS that follows publishes it to every
			 * decision.  Raise only: a failure reloads v, and a
			 * value >= t (written for q or a later permit) ends it. */
			if (atomic_compare_exchange_weak_explicit(slot, &v, s->t,
			                                          memory_order_release,
			                                          memory_order_acquire))
				break;
		}
	}
	return 1;
}

/*
 * Step 2: raise bstart to @h.  1 when bstart == h afterwards; 0 when it is
 * above h (the pair moved on: this claimant's CAS would fail) or after
 * HELP_TRIES failures.
 */
static int raise_bstart(sluice_log_t *lg, uint64_t h)
{
	uint64_t b = atomic_load_explicit(&lg->bstart, memory_order_relaxed);
	for (int i = 0; i < HELP_TRIES; i++) {
		if (b >= h)
			return b == h;
		/* Release: after step 1's slot writes, so a helper that
		 * acquires bstart = h sees them ((I3)). */
		if (atomic_compare_exchange_weak_explicit(&lg->bstart, &b, h, memory_order_release,
		                                          memory_order_relaxed))
			return 1;
	}
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
static int out_at(const sluice_log_t *lg, const struct snap *s, uint64_t q, uint64_t T)
{
	uint64_t r = rtime(lg, s, q);
	/* r > T only for a value read after reuse: the caller's
	 * validation discards this count then. */
	return r <= T && T - r >= lg->window_ns;
}

static __attribute__((noinline)) uint64_t left_search(sluice_log_t *lg, const struct snap *s,
                                                      uint64_t T, uint64_t L, uint64_t g)
{
	const uint64_t h = s->h;
	const uint64_t lo0 = h > L ? h - L : 0;
	g = g < lo0 ? lo0 : g > h ? h : g;
	uint64_t a, b; /* the boundary lies in (a, b]: out below a+1.., in from b */
	int up = g < h && out_at(lg, s, g, T);
	if (up) {
		/* boundary above g: gallop up to an entry in the window */
		uint64_t step = 1;
		a = g;
		/* ends within 2 + log2(L) rounds: step doubles, b stops at h */
		for (;;) {
			b = h - a > step ? a + step : h;
			if (b == h || !out_at(lg, s, b, T))
				break;
			a = b;
			step <<= 1;
		}
		/* out(a), and b == h or in(b): the boundary is in (a, b] */
	} else if (g > lo0 && !out_at(lg, s, g - 1, T)) {
		/* boundary below g: gallop down to an entry out of it */
		uint64_t step = 1;
		b = g - 1;
		/* ends within 2 + log2(L) rounds: step doubles, c stops at lo0 */
		for (;;) {
			uint64_t c = b - lo0 > step ? b - step : lo0;
			if (c == lo0 && !out_at(lg, s, lo0, T)) {
				a = lo0;
				b = lo0; /* nothing out: the boundary is lo0 */
				break;
			}
			if (out_at(lg, s, c, T)) {
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
		if (out_at(lg, s, mid, T))
			a = mid;
		else
			b = mid;
	}
	if (g != b)
		atomic_store_explicit(&lg->hint, b, memory_order_relaxed);
	return (h >= L ? 0 : L - h) + (b - lo0);
}

/*
 * The common case inline: the hint is the boundary (entry g - 1 out, or
 * g the first of the range; entry g in, or g = h), as it is for every
 * decision between two moves of the window's edge.  Exactly the count
 * left_search() returns for that g, with its two loads and no store (it
 * stores only a hint that changed); anything else searches.
 */
static inline uint64_t left_count(sluice_log_t *lg, const struct snap *s, uint64_t T, uint64_t L)
{
	const uint64_t h = s->h;
	const uint64_t lo0 = h > L ? h - L : 0;
	uint64_t g = atomic_load_explicit(&lg->hint, memory_order_relaxed);
	if (SLUICE_LIKELY(g >= lo0 && g <= h) && (g == h || !out_at(lg, s, g, T)) &&
	    (g == lo0 || out_at(lg, s, g - 1, T)))
		return (h >= L ? 0 : L - h) + (g - lo0);
	return left_search(lg, s, T, L, g);
}

/* W - (T - r) for an entry r <= T still in the window: when it leaves. */
static inline uint64_t leaves_in(const sluice_log_t *lg, uint64_t r, uint64_t T)
{
	uint64_t age = T - r;
	return age >= lg->window_ns ? 0 : lg->window_ns - age;
}

/*
 * After a lost pair CAS: a few pause instructions before deciding again,
 * 1, 2, 4, ... per lost CAS, at most LOG_BACKOFF_MAX, so the winner's next
 * admission runs on the lines it already holds instead of being fought
 * line by line (bench_algos, allow regime, 2 threads: the commit that
 * added it has the figures).  Bounded: a call pauses at most LOG_TRIES x
 * LOG_BACKOFF_MAX times, and it waits for no thread (BOUNDED RETRIES).
 * The pair the lost CAS handed back may be stale after the pause; the
 * next CAS then fails as it would have, and hands back a newer one.
 */
#define LOG_BACKOFF_MAX 64

static inline void backoff(int attempt)
{
	int k = attempt < 6 ? 1 << attempt : LOG_BACKOFF_MAX;
	while (k-- > 0) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#elif defined(__aarch64__)
		__asm__ __volatile__("yield"); /* arm64's spin-wait hint, as pause */
#else
		__asm__ __volatile__("" ::: "memory"); /* a bounded spin, no hint */
#endif
	}
}

int sluice_log_acquire_at(sluice_log_t *lg, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	if (n == 0)
		return SLUICE_EINVAL;
	const uint64_t W = lg->window_ns;
	uint64_t L = 0; /* read on every attempt, below */
	struct snap s;
	int have = 0; /* s holds the pair a failed CAS handed back */
	for (int attempt = 0; attempt < LOG_TRIES; attempt++) {
		if (!have && !snapshot(lg, &s))
			continue;
		have = 0;
		/* The limit this attempt is judged against, read after the pair
		 * it decides on, on every attempt (DESIGN, "Readings across a
		 * change").  Seq_cst, as set_limit's store: with the pair CASes
		 * (full barriers) in one total order.  L <= capacity, so the
		 * deciding entry h + n - 1 - L is one the ring still holds. */
		L = atomic_load_explicit(&lg->limit, memory_order_seq_cst);
		if (n > L) {
			sluice__decision_never(d, L, now > s.t ? now : s.t);
			return SLUICE_ETOOBIG;
		}
		const uint64_t h = s.h;
		uint64_t T = now > s.t ? now : s.t;
		uint64_t rp = 0;
		int fits = h + n <= L;
		if (!fits) {
			rp = rtime(lg, &s, h + n - 1 - L);
			fits = rp <= T && T - rp >= W;
		}
		if (!fits) {
			uint64_t left = d ? left_count(lg, &s, T, L) : 0;
			/* Validate: no admission since the pair was read, so rp
			 * is R(p), not a value of a reused slot.  Acquire, as
			 * every validation: see "Memory orders". */
			if (atomic_load_explicit(&lg->head, memory_order_acquire) != s.word)
				continue;
			if (d) {
				d->allowed = 0;
				d->limit = L;
				d->remaining = left < n ? left : n - 1;
				d->retry_after_ns = W - (T - rp); /* exact: p leaves */
				d->delay_ns = 0;
				d->reset_ns = leaves_in(lg, s.t, T); /* t: the newest */
				d->now_ns = T;
			}
			return 0;
		}
		if (!help(lg, &s))
			continue;
		if (n > 1 && !raise_bstart(lg, h))
			continue;
		/* Step 3, the admission.  Full barrier (pair_internal.h):
		 * publishes steps 1 and 2 to every decision that acquires
		 * head after it.  Fails if anything was admitted since the
		 * pair was read: then it hands back the pair it found, read
		 * in one atomic access and acquired by the same barrier (it
		 * read the value the winner's CAS wrote), and the next
		 * attempt decides on it without reading head again. */
		uint64_t w = s.word, t = s.t;
		if (!sluice__pair_cas_observe(&lg->head, &w, &t,
		                              ((h + n) << 1) | (n > 1 ? HEAD_MULTI : 0), T)) {
			snap_of(lg, w, t, &s);
			have = 1;
			backoff(attempt);
			continue;
		}
		if (d) {
			/* After the CAS, out of the window between the pair's
			 * read and the CAS: remaining is the snapshot log.h
			 * allows (exact when no other thread decides meanwhile:
			 * then every slot it reads still holds what it held at
			 * the pair s). */
			uint64_t left = left_count(lg, &s, T, L);
			d->allowed = 1;
			d->limit = L;
			d->remaining = left >= n ? left - n : 0;
			d->retry_after_ns = 0;
			d->delay_ns = 0;
			d->reset_ns = W; /* our permits are the newest */
			d->now_ns = T;   /* the time recorded for them, in the pair */
		}
		return 1;
	}
	/* LOG_TRIES attempts, each beaten by another thread's admission: a
	 * refusal that took nothing (log.h, BOUNDED RETRIES).  retry_after_ns
	 * 0 says the limit did not decide it; reset_ns W bounds the newest
	 * entry's stay (it is at most T). */
	if (d) {
		uint64_t last = atomic_load_explicit(&lg->last, memory_order_relaxed);
		uint64_t T = now > last ? now : last;
		d->allowed = 0;
		/* the limit of the last attempt, or (none got a snapshot) the
		 * current one: relaxed, it publishes nothing */
		d->limit = L ? L : atomic_load_explicit(&lg->limit, memory_order_relaxed);
		d->remaining = 0;
		d->retry_after_ns = 0;
		d->delay_ns = 0;
		d->reset_ns = W;
		d->now_ns = T;
	}
	return 0;
}

/*
 * Refund.  Exact only when nothing later counts the permits: the log's
 * time (last, the newest admission's) is at least now_ns + W.  Every later
 * decision runs at >= last, so they, and everything older, are out of
 * every window it looks at; whether they exist changes no decision: 0.
 * Otherwise SLUICE_ECANCEL and they stay counted until they leave the
 * window on their own (fewer admissions, never more).  Removing or
 * re-dating them would need to lower slots, which the helping rule
 * forbids (DESIGN, "Refund"); head cannot go back either (a stale claimant
 * could then CAS a pair that repeats).  One load: no retry to bound.
 */
int sluice_log_refund(sluice_log_t *lg, uint64_t n, const sluice_decision_t *admitted)
{
	if (!lg || !admitted || !admitted->allowed || n == 0 || n > lg->capacity)
		return SLUICE_EINVAL;
	const uint64_t W = lg->window_ns, ta = admitted->now_ns;
	/* Relaxed: last only grows, and the answer publishes nothing. */
	uint64_t last = atomic_load_explicit(&lg->last, memory_order_relaxed);
	if (last >= ta && last - ta >= W)
		return SLUICE_EEXPIRED;
	return SLUICE_ECANCEL;
}

/*
 * What a decision at @now would see: left_count() is exactly the largest
 * request that passes at T (a request of k passes iff k <= it), read from
 * a consistent pair and validated as a refusal is (no admission since).
 */
uint64_t sluice_log_available_at(sluice_log_t *lg, uint64_t now)
{
	for (int attempt = 0; attempt < LOG_TRIES; attempt++) {
		struct snap s;
		if (!snapshot(lg, &s))
			continue;
		/* Relaxed: the limit publishes nothing. */
		uint64_t L = atomic_load_explicit(&lg->limit, memory_order_relaxed);
		uint64_t T = now > s.t ? now : s.t;
		uint64_t left = left_count(lg, &s, T, L);
		/* Acquire, as every validation: see "Memory orders". */
		if (atomic_load_explicit(&lg->head, memory_order_acquire) == s.word)
			return left;
	}
	return 0; /* no snapshot held still for LOG_TRIES attempts (log.h) */
}

uint64_t sluice_log_available(sluice_log_t *lg)
{
	return sluice_log_available_at(lg, sluice_clock_now(lg->clock));
}

/*
 * Move the log's time on by 1 ns with nothing admitted (DESIGN, "Readings
 * across a change"): the pair (2h + m, t) -> (2h + m, t + 1).  Every
 * decision that read the pair before fails its CAS and decides again, on
 * the new pair, with the limit read after it.  At t = 2^64 - 1 the time
 * cannot move: nothing is done (every decision is then at that time, the
 * change's own).  Lock-free: a failure is an admission (setters hold the
 * writer flag), so no bound is needed; decay's set_limit is the same.
 */
static void redate(sluice_log_t *lg)
{
	for (;;) {
		struct snap s;
		if (!snapshot(lg, &s))
			continue;
		if (s.t == UINT64_MAX)
			return;
		/* Full barrier: in the one total order with the decisions'
		 * pair CASes and their loads of the limit (seq_cst). */
		if (sluice__pair_cas(&lg->head, s.word, s.t, s.word, s.t + 1))
			return;
	}
}

/*
 * set_limit keeps the ring, head and every recorded time (nothing
 * forgotten, nothing minted): a decision with limit L looks at the L-th
 * newest entry, which the ring holds for any L <= capacity (it keeps
 * capacity + 1 times), so the DESIGN's proofs hold for each decision with
 * the L it read.  The change is stamped t + 1 by redate(); a lowering is
 * stored before it (a decision in between is judged against the lower
 * limit: stricter), a raise after it (a decision in between against the
 * old, lower one), so no admission is ever judged against a limit above
 * the one in force at its time.  Seq_cst stores: in the one total order
 * with the decisions' loads (DESIGN).  Setters serialise on `writer`
 * (bounded wait); decisions never look at it.
 */
int sluice_log_set_limit(sluice_log_t *lg, uint64_t limit)
{
	if (!lg)
		return SLUICE_EINVAL;
	if (limit < 1 || limit > lg->capacity)
		return SLUICE_ELIMIT;
	if (sluice__writer_take(&lg->writer, SLUICE_LOG_WRITER_WAIT_NS) != 0)
		return SLUICE_ETIMEDOUT;
	uint64_t old = atomic_load_explicit(&lg->limit, memory_order_relaxed);
	if (limit < old)
		atomic_store_explicit(&lg->limit, limit, memory_order_seq_cst);
	if (limit != old)
		redate(lg);
	if (limit > old)
		atomic_store_explicit(&lg->limit, limit, memory_order_seq_cst);
	/* Release: the next setter starts after this change is complete. */
	sluice__writer_drop(&lg->writer);
	return 0;
}
