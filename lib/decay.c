/*
 * decay.c - decayed-rate counter: validation, the packed state, decay
 * arithmetic without libm, admissions, re-anchoring and refunds.
 *
 * DESIGN
 *
 * The state is the count c and the time t it is valid at (the newest time
 * an admission was decided at).  Both live in ONE 64-bit word, so check-and-
 * add is a single CAS and two threads can never both take the last of the
 * headroom.  A 64-bit time does not fit next to the count, so the word
 * keeps t relative to an ANCHOR, a 64-bit time that only moves forward:
 *
 *   HOT word    0 | tag:2 | field:29 | cq:32
 *     field = (t / u) mod 2^29, u = unit_ns = 2^g: t is on the u grid and
 *     lies in [A, A + R), A the anchor, R = 2^29 u; it decodes as
 *     A + ((field - A/u) mod 2^29) * u.  cq = c in units of 2^-F.
 *     tag = (A / (R/4)) mod 4 names the anchor the word is read against.
 *   EMPTY word  1 | T/2:63
 *     "count 0 as of T": self-contained.  It announces the anchor
 *     empty_anchor(T) = T rounded down to even and to u.
 *
 * A new limiter is EMPTY(0) with anchor 0: empty stays empty, so that is
 * its state at every time, and its first reading re-anchors it wherever the
 * reading lies (the clock is never read at init: see decay.h CLOCK JUMPS).
 *
 * The anchor protocol is lib/anchor_internal.h's (shared with warm-up;
 * the full argument lives there): the anchor only changes after the word
 * announced the change, so any thread can finish it and a CAS from a
 * consistent snapshot (anchor, word, anchor again) can never pair a word
 * with the wrong anchor.
 *   - step: the tag goes from tag(A) to tag(A)+1, then anchor A -> A + R/4;
 *     legal when t >= A + R/4 (the field reads the same against both).
 *   - jump: the word becomes EMPTY(T), then anchor A -> the anchor it names.
 * A decision whose time is R/2 or more past the anchor re-anchors first:
 * EMPTY if the count has been forgotten by the jump's anchor (exact:
 * forgotten stays forgotten), else a step, which is legal because a count
 * still alive at that time was written less than flush_ns = 34 h before it,
 * and u is chosen so that R/4 >= flush_ns + 2u.  A count below 2^32 units is
 * below a quarter unit after 34 half-lives, so "forgotten" is certain then.
 *
 * Why counts below one unit are dropped: exact decay never reaches 0, so a
 * request of n = L could never pass again after any traffic.  Dropping a
 * count below 2^-F is the only rounding that favours admission; it is
 * stated in the header's guarantee (+2^-F).
 *
 * Arithmetic: dt = k h + rem in integers; 2^-k is an exact scaling (so
 * whole half-lives decay exactly, with no margin), and 2^(-rem/h) is an
 * 18-term Horner series for e^(-f ln2) in doubles, f = rem / h rounded once:
 * relative error below 2^-47 in all.  A margin of 2^-43 relative, then
 * rounding up, makes every kept count an upper bound of the exact one.
 * log2 (an atanh series) only seeds the search for retry_after_ns, which
 * then checks candidate times with the same decay function the decisions
 * use, so the answer is exact for them.  No libm: the library links
 * without it.
 *
 * Stalls of any length (every write from a snapshot is one double-width
 * CAS of (anchor, word), so none counts, forgets or gives back against the
 * wrong anchor) and memory orders: anchor_internal.h.  What this module
 * adds: a stale HOT word (tag two or three quarters off, left by a stalled
 * writer) is read against the current anchor, the latest time its field
 * can stand for, so the count is taken as younger than it is: it fades
 * later (fewer admissions).
 */
#include <sched.h>
#include <string.h>

#include "sluice/decay.h"
#include "sluice/error.h"
#include "anchor_internal.h"
#include "decay_internal.h"
#include "util_internal.h"

#define FIELD_SHIFT 32
#define FIELD_BITS 29
#define FIELD_MASK ((1ULL << FIELD_BITS) - 1)
#define CQ_BITS 32
#define QUARTER_BITS (FIELD_BITS - 2) /* R/4 = 2^27 units */
#define FLUSH_HALF_LIVES 34

/* The HOT word: 0 | tag:2 | field:29 | cq:32 (anchor_internal.h). */
#define GEOM(x) \
	((struct sluice__anchor_geom){ FIELD_SHIFT, FIELD_BITS, (x)->unit_shift })

#define LN2 0.69314718055994530942

struct snap {
	struct sluice__anchor_snap a; /* word, anchor, as the protocol read them */
	uint64_t t;      /* the count's time                     */
	uint64_t cq;     /* the count, units of 2^-F             */
	int empty;
};

size_t sluice_decay_size(void)
{
	return sizeof(sluice_decay_t);
}

void sluice_decay_destroy(sluice_decay_t *x)
{
	(void)x; /* nothing allocated */
}

/* ---- arithmetic --------------------------------------------------------- */

/* 2^-f for 0 <= f < 1, relative error below 2^-48. */
static double exp2_neg_frac(double f)
{
	double y = f * LN2; /* [0, ln 2) */
	/* e^-y = 1 - y(1 - y/2(1 - y/3(...))); the first omitted term is
	 * below 0.7^19 / 19! < 1e-20. */
	double s = 1.0;
	for (int i = 18; i >= 1; i--)
		s = 1.0 - y * s / (double)i;
	return s;
}

/*
 * @q * 2^(-dt/h) as a double and whether it is exact: dt = k h + rem, the
 * 2^-k part is an exact scaling and rem / h one rounding (rem < 2^50), so
 * whole half-lives decay exactly (x 2^-k, k < 34 here).
 */
static double decayed(const sluice_decay_t *x, uint64_t q, uint64_t dt, int *exact)
{
	uint64_t k = dt / x->half_life_ns, rem = dt - k * x->half_life_ns;
	double v = (double)q / (double)(1ULL << k);
	*exact = rem == 0;
	if (rem)
		v *= exp2_neg_frac((double)rem / (double)x->half_life_ns);
	return v;
}

/* log2(v) for v >= 1, absolute error about 1e-15: seeds searches only,
 * and bounds reset_ns with a wide margin. */
static double log2_ge1(double v)
{
	uint64_t bits;
	memcpy(&bits, &v, sizeof(bits));
	int e = (int)((bits >> 52) & 0x7ff) - 1023;
	bits = (bits & ((1ULL << 52) - 1)) | (1023ULL << 52); /* mantissa in [1, 2) */
	double m;
	memcpy(&m, &bits, sizeof(m));
	double z = (m - 1.0) / (m + 1.0), z2 = z * z, p = z, s = 0.0; /* z < 1/3 */
	for (int i = 0; i < 24; i++) {
		s += p / (double)(2 * i + 1);
		p *= z2;
	}
	return (double)e + 2.0 * s / LN2; /* ln m = 2 atanh z */
}

/* The count @cq decayed over @dt, rounded up (an upper bound of the exact
 * value); 0 once below one unit.  Never above @cq. */
static uint64_t decay_up(const sluice_decay_t *x, uint64_t cq, uint64_t dt)
{
	if (cq == 0 || dt == 0)
		return cq;
	if (dt >= x->flush_ns)
		return 0; /* < 2^32 * 2^-34: the series below would agree */
	int exact;
	double v = decayed(x, cq, dt, &exact);
	if (!exact)
		v += v * 0x1p-43;
	if (v < 1.0)
		return 0;
	uint64_t c = sluice__ceil_u64(v);
	return c < cq ? c : cq;
}

/* @q decayed over @dt, rounded down (a lower bound of the exact value). */
static uint64_t decay_down(const sluice_decay_t *x, uint64_t q, uint64_t dt)
{
	if (dt == 0)
		return q;
	if (dt >= x->flush_ns)
		return 0;
	int exact;
	double v = decayed(x, q, dt, &exact);
	if (!exact)
		v -= v * 0x1p-43;
	return v < 1.0 ? 0 : (uint64_t)v;
}

/* Upper bound on the time until @cq decays to 0 (is forgotten), a whole
 * number of grid units (decisions happen on the grid). */
static uint64_t forget_bound(const sluice_decay_t *x, uint64_t cq)
{
	if (cq == 0)
		return 0;
	double b = (double)x->half_life_ns * (log2_ge1((double)cq) + 0x1p-30);
	b += b * 0x1p-30;
	uint64_t r = sluice__ceil_u64(b) + 2;
	if (r > x->flush_ns)
		r = x->flush_ns;
	return (r + x->unit_ns - 1) & ~(x->unit_ns - 1);
}

/*
 * The smallest y >= 1 such that the count @cq, valid @dt0 ns before now,
 * has decayed to at most @tgt at now + y, by the decisions' own decay
 * function (monotone in time).  decay_up(cq, dt0) > tgt on entry.
 */
static uint64_t time_until(const sluice_decay_t *x, uint64_t cq, uint64_t dt0, uint64_t tgt)
{
#define OK(y) (decay_up(x, cq, dt0 + (y)) <= tgt)
	double est = (double)x->half_life_ns *
	             (log2_ge1((double)cq) - (tgt ? log2_ge1((double)tgt) : 0.0)) -
	             (double)dt0;
	uint64_t cap = x->flush_ns; /* OK(cap): dt0 + cap >= flush_ns */
	uint64_t guess = est < 1.0 ? 1 : est >= (double)cap ? cap : (uint64_t)est;
	uint64_t lo, hi, step = (guess >> 26) + 2;
	if (OK(guess)) {
		hi = guess; /* walk down until a failing time: lo = 0 fails */
		for (;;) {
			lo = hi > step ? hi - step : 0;
			if (lo == 0 || !OK(lo))
				break;
			hi = lo;
			step <<= 1;
		}
	} else {
		lo = guess;
		for (;;) {
			hi = cap - lo > step ? lo + step : cap;
			if (hi == cap || OK(hi))
				break;
			lo = hi;
			step <<= 1;
		}
	}
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (OK(mid))
			hi = mid;
		else
			lo = mid;
	}
	return hi;
#undef OK
}

/* ---- the packed word and the anchor -------------------------------------- */

static inline uint64_t quarter(const sluice_decay_t *x)
{
	return sluice__anchor_quarter(GEOM(x));
}

static inline uint64_t grid_down(const sluice_decay_t *x, uint64_t t)
{
	return sluice__anchor_grid_down(GEOM(x), t);
}

/*
 * A consistent snapshot, helping any announced anchor move; 0: look again.
 * The protocol's snapshot (anchor_internal.h) says what it found; here
 * EMPTY (the SELF word, as of the anchor or before: the count is 0 then
 * and stays 0, so it is 0 at the anchor, exact) is a zero count at the
 * anchor, and a stale HOT word is its count at the time its field decodes
 * to against the current anchor (younger than it is: it fades later).
 */
/* always_inline: on the decision path (a call costs more than the
 * snapshot; GCC stopped inlining it once it became two calls deep) */
static inline __attribute__((always_inline)) int snapshot(sluice_decay_t *x, struct snap *s)
{
	if (!sluice__anchor_snapshot(&x->anchor, &x->word, GEOM(x), &s->a))
		return 0;
	s->t = s->a.time;
	s->cq = s->a.low;
	s->empty = s->a.kind == SLUICE__ANCHOR_SELF;
	return 1;
}

/* Move the anchor so that @t is less than R/2 past it: a jump when the
 * count has been forgotten by the jump's anchor. */
static void reanchor(sluice_decay_t *x, const struct snap *s, uint64_t t)
{
	uint64_t to = sluice__anchor_jump_to(GEOM(x), t);
	int forgotten = s->t <= to && decay_up(x, s->cq, to - s->t) == 0;
	sluice__anchor_move(&x->anchor, GEOM(x), &s->a, t, forgotten);
}

/* ---- decisions ------------------------------------------------------------ */

static void fill(const sluice_decay_t *x, sluice_decision_t *d, int allowed, uint64_t t,
                 uint64_t cq, uint64_t lim, uint64_t retry)
{
	d->allowed = allowed;
	d->limit = lim >> x->frac_bits;
	d->remaining = cq >= lim ? 0 : (lim - cq) >> x->frac_bits;
	d->retry_after_ns = retry;
	d->delay_ns = 0;
	d->reset_ns = forget_bound(x, cq);
	d->now_ns = t;
}

/* The limit in force, in units of 2^-F.  Relaxed: read after the state
 * word's acquire load, which pairs with set_limit's pair CAS (a release)
 * written after its store, so a decision that saw the word set_limit
 * wrote (or a later one) sees the new limit (DESIGN, SET_LIMIT). */
static inline uint64_t limit_q(const sluice_decay_t *x)
{
	return atomic_load_explicit(&((sluice_decay_t *)x)->limit, memory_order_relaxed)
	       << x->frac_bits;
}

int sluice_decay_acquire_at(sluice_decay_t *x, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	if (!x || n == 0)
		return SLUICE_EINVAL;
	uint64_t nq = n << x->frac_bits; /* n <= limit_max checked first */
	if (n > x->limit_max) {
		sluice__decision_never(d, atomic_load_explicit(&x->limit, memory_order_relaxed), now);
		return SLUICE_ETOOBIG;
	}
	uint64_t end = grid_down(x, UINT64_MAX);
	uint64_t r = grid_down(x, now); /* decide at the grid point at or before now */
	for (;;) {
		struct snap s;
		if (!snapshot(x, &s))
			continue;
		/* Time never runs backwards: not before the count's time
		 * (which is never before the anchor). */
		uint64_t t = r > s.t ? r : s.t;
		if (SLUICE_UNLIKELY(t - s.a.anchor >= 2 * quarter(x))) {
			reanchor(x, &s, t);
			continue;
		}
		uint64_t lim = limit_q(x); /* after the snapshot: see limit_q() */
		if (SLUICE_UNLIKELY(nq > lim)) {
			sluice__decision_never(d, lim >> x->frac_bits, t);
			return SLUICE_ETOOBIG; /* n above the limit in force */
		}
		uint64_t c = decay_up(x, s.cq, t - s.t);
		if (c + nq > lim) {
			if (d) {
				/* the first grid point where it passes */
				uint64_t y = time_until(x, s.cq, t - s.t, lim - nq);
				uint64_t yg = y > end - t ? SLUICE_NEVER
				                          : grid_down(x, t + y + x->unit_ns - 1) - t;
				fill(x, d, 0, t, c, lim, yg);
			}
			return 0;
		}
		uint64_t after = c + nq;
		uint64_t w = sluice__anchor_hot_word(GEOM(x), s.a.anchor, t, after);
		/* Pair CAS (full barrier, so a release): publishes which anchor
		 * w is relative to, and fails if the anchor moved (DESIGN). */
		if (sluice__anchor_write(&x->anchor, &s.a, w)) {
			if (d)
				fill(x, d, 1, t, after, lim, 0);
			return 1;
		}
	}
}

/* The kept count at the time a decision at @now would use, units of 2^-F. */
static uint64_t count_q_at(sluice_decay_t *x, uint64_t now, struct snap *sp)
{
	struct snap s;
	/* Bounded by others' progress: a failed snapshot means the anchor
	 * moved or this call helped move it (lock-free, as a decision). */
	while (!snapshot(x, &s))
		;
	*sp = s;
	uint64_t r = grid_down(x, now);
	uint64_t t = r > s.t ? r : s.t; /* as a decision: never before t */
	/* A decision R/2 past the anchor would re-anchor first; that changes
	 * no count (a jump only when decay_up gives 0 there, a step keeps the
	 * word's time), so the count is the same without moving it. */
	return decay_up(x, s.cq, t - s.t);
}

uint64_t sluice_decay_available_at(sluice_decay_t *x, uint64_t now)
{
	if (!x)
		return 0;
	/* acquire admits n iff c + n 2^F <= L 2^F (c the kept count) */
	struct snap s;
	uint64_t c = count_q_at(x, now, &s), lim = limit_q(x);
	return c >= lim ? 0 : (lim - c) >> x->frac_bits;
}

uint64_t sluice_decay_available(sluice_decay_t *x)
{
	return sluice_decay_available_at(x, sluice_clock_now(x->clock));
}

double sluice__decay_count_at(sluice_decay_t *x, uint64_t now)
{
	struct snap s;
	return (double)count_q_at(x, now, &s) / (double)(1ULL << x->frac_bits);
}

int sluice_decay_refund(sluice_decay_t *x, uint64_t n, const sluice_decision_t *admitted)
{
	if (!x || !admitted || n == 0 || n > x->limit_max || !admitted->allowed)
		return SLUICE_EINVAL;
	uint64_t ta = admitted->now_ns;
	for (;;) {
		struct snap s;
		if (!snapshot(x, &s))
			continue;
		if (ta > s.t)
			return SLUICE_ECANCEL; /* newer than any admission here */
		if (s.empty)
			return 0; /* forgotten since: nothing left to give back */
		uint64_t sub = decay_down(x, n << x->frac_bits, s.t - ta);
		if (sub > s.cq)
			return SLUICE_ECANCEL;
		uint64_t w = sluice__anchor_with_low(GEOM(x), s.a.word, s.cq - sub);
		/* Pair CAS: as for an admission (same anchor, same time). */
		if (sluice__anchor_write(&x->anchor, &s.a, w))
			return 0;
	}
}


int sluice_decay_init(sluice_decay_t *x, const sluice_decay_config_t *cfg)
{
	if (!x || !cfg)
		return SLUICE_EINVAL;
	const sluice_clock_t *clock = cfg->clock ? cfg->clock : &sluice_clock_cached;
	if (clock->kind > SLUICE_CLOCK_MANUAL)
		return SLUICE_ECLOCK;
	if (cfg->limit < 1 || cfg->limit > SLUICE_DECAY_LIMIT_MAX)
		return SLUICE_ELIMIT;
	uint64_t lmax = cfg->limit_max ? cfg->limit_max : cfg->limit;
	if (lmax < cfg->limit || lmax > SLUICE_DECAY_LIMIT_MAX)
		return SLUICE_ELIMIT;
	uint64_t h = cfg->half_life_ns;
	if (h < SLUICE_DECAY_HALFLIFE_MIN_NS || h > SLUICE_DECAY_HALFLIFE_MAX_NS)
		return SLUICE_EHALFLIFE;
	/* Readings move in clock steps, and a count fades by 2^(-step/h)
	 * between two of them: with h below the step nearly all of it is gone
	 * before the next reading, so at most about L pass per step instead of
	 * the mean L ln2 / h (1 us on a 4 ms clock: about 250 L per second
	 * against 693,147 L).
	 * Refuse it, as the other limiters refuse a bucket below the step. */
	if (sluice__clock_require_step(clock, h) != 0)
		return SLUICE_ERESOLUTION; /* and keeps the cached clock this fine */
	uint64_t flush = FLUSH_HALF_LIVES * h;
	/* The smallest grid whose quarter range holds a live count. */
	uint32_t g = 0;
	while ((1ULL << (QUARTER_BITS + g)) < flush + (2ULL << g))
		g++;

	atomic_init(&x->limit, cfg->limit);
	atomic_init(&x->writer, 0);
	x->limit_max = lmax;
	x->half_life_ns = h;
	x->unit_ns = 1ULL << g;
	x->clock = clock;
	x->unit_shift = g;
	x->frac_bits = CQ_BITS - sluice__bit_width(lmax); /* every L << F < 2^32 */
	x->flush_ns = flush;
	/* Empty as of time 0, the start of every time base: an empty count
	 * stays empty, so this is the state at every reading, and the first
	 * reading (whatever clock it comes from) re-anchors there.  The clock
	 * is not read: anchoring at its init-time reading froze a limiter fed
	 * `_at` readings from another base (all of them below the anchor were
	 * taken as the anchor, so the count never decayed). */
	atomic_init(&x->anchor, 0);
	atomic_init(&x->word, sluice__anchor_self_word(0));
	return 0;
}

/*
 * SET_LIMIT.  The limit is one word beside the state; the fixed point F
 * was chosen at init for every limit up to limit_max, so a change needs
 * no rescaling of the count: the count is kept exactly (nothing forgotten,
 * nothing minted), and decisions compare it with the new limit.
 *
 * What makes the change take effect for every decision at once: after
 * storing the limit, set_limit rewrites the state word from a snapshot
 * with one pair CAS, to the same count at the count's time plus one grid
 * unit (u).  A decision reads the limit after its snapshot's acquire load
 * of the word:
 *   - if it read the rewritten word (or a later one), that load
 *     synchronises with the pair CAS (a release, after the store), so it
 *     reads the new limit (or a newer one);
 *   - if it read an older word, its pair CAS expects that word, which can
 *     never come back: every word written under the same anchor after the
 *     rewrite has a time at or after the rewritten one (decisions never
 *     move the count's time back, refunds keep it, and a jump writes an
 *     EMPTY word for a time R/2 past the anchor), so the CAS fails and the
 *     decision starts again, reading the new limit.
 * So every admission whose CAS comes after set_limit's rewrite was checked
 * against the new limit: set_limit is linearised at its rewrite.  Moving
 * the count's time on by u without decaying the count keeps the kept count
 * an upper bound of the exact one (decay.h PRECISION); a decision whose
 * reading is older than that time is decided at it, one grid unit later
 * than its reading at most.  Writers serialise on `writer` with a bounded
 * wait; decisions never look at it.
 */
int sluice_decay_set_limit(sluice_decay_t *x, uint64_t limit)
{
	if (!x)
		return SLUICE_EINVAL;
	if (limit < 1 || limit > x->limit_max)
		return SLUICE_ELIMIT;
	/* Acquire: pairs with the release that ends the previous change.
	 * Bounded, as GCRA's writers (a writer stopped holding the flag must
	 * not keep every later set_limit waiting). */
	uint64_t since = 0;
	while (atomic_exchange_explicit(&x->writer, 1, memory_order_acquire)) {
		uint64_t t = sluice_clock_monotonic_ns();
		if (since == 0)
			since = t;
		else if (t - since >= SLUICE_DECAY_WRITER_WAIT_NS)
			return SLUICE_ETIMEDOUT;
		sched_yield();
	}
	/* Relaxed: published by the pair CAS below (a release). */
	atomic_store_explicit(&x->limit, limit, memory_order_relaxed);
	for (;;) {
		struct snap s;
		if (!snapshot(x, &s))
			continue;
		uint64_t end = grid_down(x, UINT64_MAX), t = s.t, cq = s.cq;
		if (SLUICE_LIKELY(t < end)) {
			t += x->unit_ns; /* on the grid, at most end */
		} else if (cq < (1ULL << CQ_BITS) - 1) {
			/* At the last grid point the time cannot move on: one
			 * unit more count instead (fewer admissions; the only
			 * case where the old word could come back, see above). */
			cq++;
		}
		if (SLUICE_UNLIKELY(t - s.a.anchor >= 2 * quarter(x))) {
			reanchor(x, &s, t);
			continue;
		}
		uint64_t w = sluice__anchor_hot_word(GEOM(x), s.a.anchor, t, cq);
		/* Pair CAS (full barrier, so a release): publishes the limit
		 * stored above to every decision that acquires this word. */
		if (sluice__anchor_write(&x->anchor, &s.a, w))
			break;
	}
	/* Release: the next writer starts after this change is complete. */
	atomic_store_explicit(&x->writer, 0, memory_order_release);
	return 0;
}

uint64_t sluice_decay_limit(const sluice_decay_t *x)
{
	return atomic_load_explicit(&((sluice_decay_t *)x)->limit, memory_order_relaxed);
}
