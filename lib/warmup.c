/* SPDX-License-Identifier: MIT */
/*
 * warmup.c - smooth warm-up limiter (Guava SmoothWarmingUp, cold factor 3):
 * validation, the packed state, bookings, re-anchoring, refunds and live
 * rate changes.
 *
 * DESIGN
 *
 * The state is two numbers, the next free ticket `next` (a 64-bit time) and
 * the stored permits s.  Both live in ONE 64-bit word so that a booking is a
 * single CAS: no lock, nothing allocated, no torn state.  A 64-bit time does
 * not fit next to s, so times in the word are kept relative to an ANCHOR, a
 * separate 64-bit word that only moves forward:
 *
 *   HOT word   0 | tag:2 | field:35 | sq:26
 *     field = (next / u) mod 2^35, u = unit_ns = 2^g: next is on the u grid
 *     and lies in [A, A + R), A the anchor, R = 2^35 u; it decodes as
 *     A + ((field - A/u) mod 2^35) * u.  sq = s in units of 2^-F.
 *     tag = (A / (R/4)) mod 4 names the anchor the word is read against.
 *   COLD word  1 | T/2:63
 *     "fully cold (s = M) as of T": self-contained, needs no anchor.  It
 *     announces the anchor cold_anchor(T) = T rounded down to even and to u.
 *
 * The anchor protocol (lib/anchor_internal.h, shared with decay, where the
 * full argument lives): the anchor changes only after the word announced
 * the change (a step: the tag moves on; a jump: the word becomes COLD(T),
 * the module's SELF word), so any thread can finish it, and every write
 * from a snapshot is one double-width CAS of (anchor, word).  A new
 * limiter is COLD(0) with anchor 0: cold stays cold, so that is its state
 * at every time, and its first reading re-anchors it wherever the reading
 * lies (the clock is never read at init: warmup.h CLOCK JUMPS).
 *
 * Why a step is legal here: a decision whose time t is R/2 or more past
 * the anchor first moves the anchor.  If the state is fully cold at the
 * jump's anchor it writes COLD(t) (exact: cold stays cold as time passes).
 * Otherwise the limiter was used within P of t, so next > t - P - u >=
 * A + R/4 (u is chosen so that R/4 >= P + 2 cost_max + 2u), and a step is
 * legal.  Bookings then write tickets below t + horizon + cost_max + u <
 * A + R/2 + R/4: always inside the field's range.
 *
 * Rounding always makes the limiter slower: costs up, the ticket up to the
 * grid (the stored permits gain the rounded-off time, which keeps the
 * state identical for every reading at or after the rounded ticket), stored
 * permits up.  The curve's area uses doubles in the form k (b - a)(a + b -
 * 2T), whose error is far below the 1 ns + 2^-40 relative margin added.
 *
 * Stalls of any length and memory orders: anchor_internal.h.  What this
 * module adds: a snapshot of a stale HOT word (tag two or three quarters
 * off, left by a stalled writer) is read fully cold (sq = M), the most
 * expensive state, since stored permits of unknown age could be anything.
 *
 * Parameter sets (SET_RATE).  Everything that depends on the rate (I, M's
 * fixed point F and max_q, L, the curve) lives in one of two slots; the
 * anchor's bit 0 (the era: anchor_internal.h) says which one the word is
 * written under, so a snapshot of (anchor, word) names its set and every
 * write from it (a pair CAS comparing the era too) fails once the set
 * changed.  The grid u, the horizon and cost_max are fixed at init for
 * every rate set_rate accepts (L I <= max(P, L I at init)), so the
 * anchor protocol's ranges hold across changes.  set_rate writes the slot
 * not in force (a seqlock: seq odd while written), then converts the word
 * and flips the era in one pair CAS (sluice_warmup_set_rate() says how).
 * Why a decision cannot mix a set with a state of another: it reads the
 * slot its snapshot's era names.  If set_rate has not flipped since, that
 * slot is the one in force, never written while in force.  If it has, the
 * decision's CAS fails, because the flip wrote a word no earlier state had
 * (the ticket moved past every earlier one), even when a second change
 * brought the era bit, and so the anchor word, back to its old value; and
 * a slot rewritten for that second change while being read fails the seq
 * check.  So a booking lands only on the state of the set it was
 * computed with.  A refusal writes nothing; one by a decision overlapping
 * two changes may judge n against (and report) the later set's L while
 * reading the earlier state: a limit that was in force during the call.
 *
 * Readings across a change (warmup.h, READINGS ACROSS A CHANGE).  No
 * reading enters set_rate: it moves the ticket one unit later (so the
 * ticket stays after every admission's start) and scales the stored
 * permits' fraction of M, the temperature as of the ticket.  A decision
 * after the change, at any reading r, starts at max(r, ticket) or later,
 * and an admission at start y moves the ticket to at least y + n I (I of
 * the set it was costed with): the chain of (a), start(k+1) >= start(k) +
 * n(k) I(k), holds through every change and every order of readings, so
 * a reading older than the change, or a setter whose clock lags, gains
 * nothing; the stamp GCRA keeps in its parameter set is here the ticket.
 */
#include <sched.h>
#include <string.h>

#include "sluice/error.h"
#include "anchor_internal.h"
#include "util_internal.h"
#include "sluice/warmup.h"
#include "clock_internal.h"
#include "refund_internal.h"
#include "writer_internal.h"


#define FIELD_SHIFT 26
#define FIELD_BITS 35
#define SQ_BITS FIELD_SHIFT
#define SQ_MASK ((1ULL << SQ_BITS) - 1)
#define QUARTER_BITS (FIELD_BITS - 2) /* R/4 = 2^33 units */

/* The HOT word: 0 | tag:2 | field:35 | sq:26 (anchor_internal.h). */
#define GEOM(w) \
	((struct sluice__anchor_geom){ FIELD_SHIFT, FIELD_BITS, (w)->unit_shift })

/* One parameter set, as a decision uses it (a copy of a stable slot). */
struct params {
	uint64_t rate, period, limit, frac_bits, max_q;
	double interval, thresh, curve_k;
};

/* The slot's fields (struct sluice__warmup_params) beside the set's (struct
 * params), once: load_params() and store_params() both walk this list, so
 * a field added to the set cannot be written and not read, or the
 * reverse. */
#define PARAM_FIELDS(X)                                                 \
	X(rate, rate) X(period_ns, period) X(limit, limit) X(frac_bits, frac_bits) \
	X(max_q, max_q) X(interval, interval) X(thresh, thresh) X(curve_k, curve_k)

/* A consistent view of the state, against the anchor it was read with,
 * and the parameter set it is written under. */
struct snap {
	struct sluice__anchor_snap a; /* word, anchor, as the protocol read them */
	const struct sluice__warmup_params *sl; /* the slot the era bit names */
	uint64_t seq;    /* sl's seq when the snapshot was taken (even)   */
	struct params p; /* its set: limit (and max_q) by snapshot(), the
	                  * rest by full() when a decision books          */
	uint64_t next;   /* decoded next free ticket                      */
	uint64_t sq;     /* stored permits, units of 2^-F                 */
	int cold;        /* the word is COLD                              */
};

void sluice_warmup_destroy(sluice_warmup_t *w)
{
	(void)w; /* nothing allocated */
}

static inline uint64_t quarter(const sluice_warmup_t *w)
{
	return sluice__anchor_quarter(GEOM(w));
}

static inline uint64_t grid_down(const sluice_warmup_t *w, uint64_t t)
{
	return sluice__anchor_grid_down(GEOM(w), t);
}

/*
 * Read one parameter slot, seqlock style; 0 when it was being rewritten
 * (then the anchor has moved to the other era since the caller's snapshot:
 * set_rate rewrites only the slot not in force).  No fences (which
 * ThreadSanitizer cannot see): the field loads are acquires, pairing with
 * the writer's release stores of them (store_params()), so a load that
 * sees a new field also sees the odd seq stored before it, and the second
 * load of seq (after them) differs; the first load of seq is an acquire
 * pairing with the release store of the even seq that ends a rewrite.
 * Free on x86-64 (plain loads).
 */
static inline __attribute__((always_inline)) int load_params(
	const struct sluice__warmup_params *sl, struct params *p)
{
	struct sluice__warmup_params *m = (struct sluice__warmup_params *)sl;
	uint64_t q = atomic_load_explicit(&m->seq, memory_order_acquire);
	if (q & 1)
		return 0;
#define LOAD(slot_field, field) \
	p->field = atomic_load_explicit(&m->slot_field, memory_order_acquire);
	PARAM_FIELDS(LOAD)
#undef LOAD
	return atomic_load_explicit(&m->seq, memory_order_relaxed) == q;
}

/* Rewrite a slot (the spare one, under the writer flag): seq odd, the
 * fields, seq even.  Each field store is a release (so it comes after the
 * odd seq: see load_params()); the even seq's release publishes them. */
static void store_params(struct sluice__warmup_params *sl, const struct params *p)
{
	uint64_t q = atomic_load_explicit(&sl->seq, memory_order_relaxed);
	atomic_store_explicit(&sl->seq, q + 1, memory_order_relaxed);
#define STORE(slot_field, field) \
	atomic_store_explicit(&sl->slot_field, p->field, memory_order_release);
	PARAM_FIELDS(STORE)
#undef STORE
	atomic_store_explicit(&sl->seq, q + 2, memory_order_release);
}

/*
 * Take a consistent snapshot; 0 when the caller must look again.  The
 * protocol's snapshot (anchor_internal.h) says what it found; what it
 * means here: COLD (the SELF word, as of the anchor or before: cold stays
 * cold, so it is cold at the anchor, exact) is fully cold with the ticket
 * at the anchor; a stale HOT word (left by a stalled writer) is the
 * ticket it decodes to against the current anchor, fully cold (M stored:
 * the most expensive state; the next booking re-tags it).
 */
/* always_inline: on the decision path (a call costs more than the
 * snapshot; GCC stopped inlining it once it became two calls deep) */
static inline __attribute__((always_inline)) int snapshot(sluice_warmup_t *w, struct snap *s)
{
	if (!sluice__anchor_snapshot(&w->anchor, &w->word, GEOM(w), &s->a))
		return 0;
	/* Acquires, as in load_params(): what a refusal reports is then
	 * checked by same_set() after them. */
	s->sl = &w->params[s->a.raw & SLUICE__ANCHOR_ERA];
	struct sluice__warmup_params *m = (struct sluice__warmup_params *)s->sl;
	s->seq = atomic_load_explicit(&m->seq, memory_order_acquire);
	if (s->seq & 1)
		return 0; /* rewritten for a later change: this snapshot is stale */
	s->p.limit = atomic_load_explicit(&m->limit, memory_order_acquire);
	s->next = s->a.time;
	if (s->a.kind == SLUICE__ANCHOR_HOT) {
		s->sq = s->a.low;
	} else {
		s->p.max_q = atomic_load_explicit(&m->max_q, memory_order_acquire);
		s->sq = s->p.max_q;
	}
	s->cold = s->a.kind == SLUICE__ANCHOR_SELF;
	return 1;
}

/*
 * Did the slot stay as the snapshot found it?  Checked before anything
 * computed from the set leaves without a CAS (a refusal, ETOOBIG,
 * available): after the acquire loads of the fields, a rewrite that
 * overlapped them shows as another seq (load_params()).  A booking needs
 * no check: a rewrite of its slot means the era moved on since its
 * snapshot, so its pair CAS fails (DESIGN).
 */
static inline __attribute__((always_inline)) int same_set(const struct snap *s)
{
	return atomic_load_explicit(&((struct sluice__warmup_params *)s->sl)->seq,
	                            memory_order_relaxed) == s->seq;
}

/* The rest of the snapshot's set, for a decision that computes a cost
 * (acquire loads, as in load_params()). */
static inline __attribute__((always_inline)) void full(struct snap *s)
{
	struct sluice__warmup_params *m = (struct sluice__warmup_params *)s->sl;
	s->p.rate = atomic_load_explicit(&m->rate, memory_order_acquire);
	s->p.period = atomic_load_explicit(&m->period_ns, memory_order_acquire);
	s->p.frac_bits = atomic_load_explicit(&m->frac_bits, memory_order_acquire);
	s->p.max_q = atomic_load_explicit(&m->max_q, memory_order_acquire);
	s->p.thresh = atomic_load_explicit(&m->thresh, memory_order_acquire);
	s->p.curve_k = atomic_load_explicit(&m->curve_k, memory_order_acquire);
}

/* Stored permits after @dt ns of idleness: one per I, rounded up, capped. */
static uint64_t accrue(const sluice_warmup_t *w, const struct params *p, uint64_t sq,
                       uint64_t dt)
{
	if (dt == 0)
		return sq;
	if (dt >= w->warmup_ns)
		return p->max_q; /* P / I = M: fully cold from anywhere */
	/* dt < 2^46, rate <= 2^46, 2^F <= 2^25: fits in 128 bits. */
	sluice__u128 num = ((sluice__u128)dt * p->rate) << p->frac_bits;
	/* rounded up: with period 1 the product itself; while the numerator
	 * fits in 64 bits one 64-bit division; the 128-bit one (a library
	 * call) only beyond (as cost_of()'s n I) */
	uint64_t add;
	if (SLUICE_LIKELY(num <= UINT64_MAX - (p->period - 1)))
		add = p->period == 1 ? (uint64_t)num : ((uint64_t)num + p->period - 1) / p->period;
	else
		add = (uint64_t)((num + p->period - 1) / p->period);
	return sq + add >= p->max_q ? p->max_q : sq + add;
}

/*
 * The cost in ns of @n permits with @sq stored: n I for all of them, plus,
 * for the stored ones above the threshold, the area between the curve and
 * I: the curve rises by slope 4I/M from T, so the area over [a, b] is
 * (2I/M)((b-T)^2 - (a-T)^2) = k (b - a)(a + b - 2T).  Rounded up.  The
 * curve ends at M: stored permits above M exist only through rounding up
 * (by less than 2^-F) and are charged I, as the curve's last point would
 * overcharge them wildly when M is tiny; so the area is at most P/2.
 */
static uint64_t cost_of(const struct params *p, uint64_t sq, uint64_t n, uint64_t *taken)
{
	uint64_t nq = n << p->frac_bits;
	uint64_t tk = nq < sq ? nq : sq;
	*taken = tk;
	/* n I rounded up, I = period / rate: with rate 1 (a rate given as one
	 * permit per interval) a product; otherwise one 64-bit division when
	 * the numerator fits, the 128-bit one (a library call) only beyond. */
	uint64_t cost, np;
	if (SLUICE_LIKELY(!__builtin_mul_overflow(n, p->period, &np))) {
		if (p->rate == 1)
			cost = np;
		else if (np <= UINT64_MAX - (p->rate - 1))
			cost = (np + p->rate - 1) / p->rate;
		else
			cost = (uint64_t)(((sluice__u128)np + p->rate - 1) / p->rate);
	} else {
		cost = (uint64_t)(((sluice__u128)n * p->period + p->rate - 1) / p->rate);
	}
	/* 2^-F, exact, built from its exponent (F <= 25): no division */
	uint64_t sbits = (uint64_t)(1023 - p->frac_bits) << 52;
	double scale;
	memcpy(&scale, &sbits, sizeof(scale));
	double b = (double)sq * scale, top = 2.0 * p->thresh;
	if (b > top)
		b = top;
	if (tk > 0 && b > p->thresh) {
		double a = (double)(sq - tk) * scale;
		if (a < p->thresh)
			a = p->thresh;
		if (a > b)
			a = b;
		double x = p->curve_k * (b - a) * (a + b - 2.0 * p->thresh);
		if (x > 0)
			cost += sluice__ceil_u64(x + x * 0x1p-40) + 1;
	}
	return cost;
}

static void fill(const struct params *p, sluice_decision_t *d, int allowed, uint64_t t,
                 uint64_t retry, uint64_t reset)
{
	if (!d)
		return;
	d->allowed = allowed;
	d->limit = p->limit;
	d->remaining = 0; /* one request at a time: the ticket is now ahead */
	/* @retry: a booking's delay when allowed, the wait when refused */
	d->retry_after_ns = allowed ? 0 : retry;
	d->delay_ns = allowed ? retry : 0;
	d->reset_ns = reset;
	d->now_ns = t;
}

/* Move the anchor so that @t is less than R/2 past it (one step or jump):
 * a jump when the limiter is fully cold at the jump's anchor. */
static void reanchor(sluice_warmup_t *w, struct snap *s, uint64_t t)
{
	full(s); /* a torn set only makes its CASes fail, as a booking's */
	uint64_t to = sluice__anchor_jump_to(GEOM(w), t);
	int cold = s->next <= to && accrue(w, &s->p, s->sq, to - s->next) == s->p.max_q;
	sluice__anchor_move(&w->anchor, GEOM(w), &s->a, t, cold);
}

/*
 * A consistent snapshot into @s, and whether the set in force can take @n
 * at all: 0 when @n is above its L (SET_RATE: a request the new set cannot
 * take is refused as it would be by a new limiter), read in one set.  Each
 * retry follows another thread's write (a move or a change), so the loop
 * is lock-free, as the callers' CAS loops are.
 */
static inline __attribute__((always_inline)) int
snapshot_taking(sluice_warmup_t *w, struct snap *s, uint64_t n)
{
	for (;;) {
		if (!snapshot(w, s))
			continue;
		if (n <= s->p.limit)
			return 1;
		if (same_set(s))
			return 0;
	}
}

/*
 * The decision, for reserve_at and acquire_at (@maxd: the booking's
 * longest delay, already capped at the horizon; acquire's 0 folds the
 * refusal's arithmetic away).  always_inline: each public function gets
 * its own copy, so acquire, the common call, pays no second call and no
 * max_delay arithmetic.
 */
static inline __attribute__((always_inline)) int
decide(sluice_warmup_t *w, uint64_t n, uint64_t now, uint64_t maxd, sluice_decision_t *d)
{
	/* w->end_ns, the last representable ticket, and w->half_range_ns,
	 * R/2, are read-only after init (precomputed there: shifts by the
	 * grid otherwise), and read where used: kept in registers across
	 * the loop they only pushed others onto the stack.  A reading past
	 * the last ticket is read as it (every anchor is at or before it). */
	if (now > w->end_ns)
		now = w->end_ns;
	for (;;) {
		struct snap s;
		if (!snapshot_taking(w, &s, n)) {
			sluice__decision_never(d, s.p.limit, now);
			return SLUICE_ETOOBIG;
		}
		uint64_t t = now > s.a.anchor ? now : s.a.anchor; /* never before the anchor */
		if (SLUICE_UNLIKELY(t - s.a.anchor >= w->half_range_ns)) {
			/* a copy: the snapshot's address never leaves this
			 * function, so its fields stay in registers */
			struct snap c = s;
			reanchor(w, &c, t);
			continue;
		}
		uint64_t wait = s.next > t ? s.next - t : 0;
		if (wait > maxd) {
			if (!same_set(&s))
				continue;
			fill(&s.p, d, 0, t, wait - maxd, wait);
			return 0;
		}
		full(&s);
		/* The set as a local of its own, passed by address to the
		 * arithmetic (as the copy above: s stays in registers). */
		const struct params p = s.p;
		/* Resync (Guava): idle time since next becomes stored permits. */
		uint64_t start = s.next > t ? s.next : t;
		uint64_t sq = s.next < t ? accrue(w, &p, s.sq, t - s.next) : s.sq;
		uint64_t taken, cost = cost_of(&p, sq, n, &taken);
		sq -= taken;
		if (SLUICE_UNLIKELY(cost > w->end_ns - start)) {
			/* The ticket would pass the end of the time base. */
			if (!same_set(&s))
				continue;
			fill(&p, d, 0, t, SLUICE_NEVER, wait);
			return 0;
		}
		uint64_t raw = start + cost;
		uint64_t next = (raw + w->unit_ns - 1) & ~(w->unit_ns - 1); /* <= end */
		sq = accrue(w, &p, sq, next - raw); /* the rounded-off time cools */
		uint64_t x = sluice__anchor_hot_word(GEOM(w), s.a.anchor, next, sq);
		/* Pair CAS (full barrier, so a release): publishes which anchor
		 * x is relative to, and fails if the anchor or its era moved
		 * (DESIGN, SET_RATE). */
		if (sluice__anchor_write(&w->anchor, &s.a, x)) {
			fill(&p, d, 1, t, wait, next - t);
			return 1;
		}
	}
}

int sluice_warmup_reserve_at(sluice_warmup_t *w, uint64_t n, uint64_t now, uint64_t max_delay_ns,
                             sluice_decision_t *d)
{
	if (!w || n == 0)
		return SLUICE_EINVAL;
	return decide(w, n, now, max_delay_ns < w->horizon_ns ? max_delay_ns : w->horizon_ns, d);
}

int sluice_warmup_acquire_at(sluice_warmup_t *w, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	if (!w || n == 0)
		return SLUICE_EINVAL;
	return decide(w, n, now, 0, d);
}

int sluice_warmup_refund(sluice_warmup_t *w, uint64_t n, const sluice_decision_t *admitted)
{
	return sluice_warmup_cancel(w, n, admitted);
}

int sluice_warmup_cancel(sluice_warmup_t *w, uint64_t n, const sluice_decision_t *admitted)
{
	if (!w || !sluice__names_admission(admitted, n))
		return SLUICE_EINVAL;
	uint64_t t = admitted->now_ns;
	if (admitted->delay_ns > admitted->reset_ns || admitted->reset_ns > UINT64_MAX - t)
		return SLUICE_EINVAL; /* not a booking this limiter made */
	uint64_t start = t + admitted->delay_ns; /* its start */
	uint64_t booked = t + admitted->reset_ns;      /* the ticket it booked */
	for (;;) {
		struct snap s;
		if (!snapshot_taking(w, &s, n))
			return SLUICE_EINVAL;
		/* Only the latest booking can be taken back exactly; an older
		 * one has later bookings chained on its ticket, and one made
		 * before a set_rate has the change's moved ticket after it. */
		if (s.cold || s.next != booked || start < s.a.anchor)
			return SLUICE_ECANCEL;
		/*
		 * Back to the start, rounded DOWN to the grid: the previous
		 * ticket is on the grid and at or before the start, so this is
		 * never before it.  The stored permits the booking found there
		 * were s_after + taken <= s_after + n, so with n added back
		 * the state is at least as cold as before the booking for every
		 * reading at or after the start.
		 */
		uint64_t next = grid_down(w, start);
		full(&s);
		uint64_t sq = s.sq + (n << s.p.frac_bits);
		if (sq > s.p.max_q)
			sq = s.p.max_q;
		uint64_t x = sluice__anchor_hot_word(GEOM(w), s.a.anchor, next, sq);
		/* Pair CAS: as for a booking. */
		if (sluice__anchor_write(&w->anchor, &s.a, x))
			return 0;
	}
}

/*
 * The largest n an acquire at @now would admit: every n up to L when the
 * ticket has come (Guava's pay-later rule: the cost falls on the next
 * request), unless the ticket n books would pass the end of the time base
 * (cost_of grows with n, so the largest that fits is found by bisection;
 * only there).  Read-only: a decision this far past the anchor would
 * re-anchor first, which changes neither the ticket nor the stored permits.
 */
uint64_t sluice_warmup_available_at(sluice_warmup_t *w, uint64_t now)
{
	if (!w)
		return 0;
	uint64_t end = grid_down(w, UINT64_MAX);
	for (;;) {
		struct snap s;
		/* Bounded by others' progress, as a decision's snapshot. */
		if (!snapshot(w, &s))
			continue;
		uint64_t t = now > s.a.anchor ? now : s.a.anchor;
		if (t > end)
			t = end;
		if (s.next > t)
			return 0; /* the ticket has not come: acquire refuses every n */
		full(&s);
		uint64_t sq = accrue(w, &s.p, s.sq, t - s.next), taken, lo = s.p.limit;
		if (cost_of(&s.p, sq, s.p.limit, &taken) > end - t) {
			/* cost(lo) fits (lo = 0: nothing), cost(hi) not */
			uint64_t hi = s.p.limit;
			for (lo = 0; hi - lo > 1;) {
				uint64_t mid = lo + (hi - lo) / 2;
				if (cost_of(&s.p, sq, mid, &taken) <= end - t)
					lo = mid;
				else
					hi = mid;
			}
		}
		if (same_set(&s)) /* else a change overlapped: look again */
			return lo;
	}
}

uint64_t sluice_warmup_available(sluice_warmup_t *w)
{
	return sluice_warmup_available_at(w, sluice_clock_now(w->clock));
}

/*
 * The parameter set of a stable rate of @rate per @period with warm-up @p
 * on @clock, validated as init does (init's codes, in init's order after
 * the warm-up period's own range, which only init checks).
 */
static int make_params(uint64_t rate, uint64_t period, uint64_t p, const sluice_clock_t *clock,
                       sluice__step_use_t use, struct params *o)
{
	/* I = period / rate must be at least 1 ns. */
	if (rate == 0 || period == 0 || period > SLUICE_WARMUP_PERIOD_MAX_NS || period < rate)
		return SLUICE_ERATE;
	/* An acquire passes only when the next free ticket is <= now, so at
	 * most one request passes per clock reading: an interval below the
	 * clock's step would cap the rate silently (warmup.h, LIMITS). */
	if (sluice__step(clock, period / rate, use) != 0)
		return SLUICE_ERESOLUTION;
	sluice__u128 pr = (sluice__u128)p * rate; /* M = pr / period */
	if (pr > (sluice__u128)SLUICE_WARMUP_STORED_MAX * period)
		return SLUICE_EWARMUP;
	uint64_t m_floor = (uint64_t)(pr / period);
	uint64_t m_ceil = (uint64_t)((pr + period - 1) / period); /* 1 .. 2^20 */
	/* F: M in units of 2^-F below 2^26, so sq fits its field. */
	uint32_t frac = SQ_BITS - sluice__bit_width(m_ceil);
	double interval = (double)period / (double)rate;
	double m = (double)pr / (double)period;
	o->rate = rate;
	o->period = period;
	o->limit = m_floor ? m_floor : 1;
	o->frac_bits = frac;
	o->max_q = (uint64_t)(((pr << frac) + period - 1) / period);
	o->interval = interval;
	o->thresh = m / 2.0;
	o->curve_k = 2.0 * interval / m;
	return 0;
}

/* L I rounded up: what the largest request costs at the stable rate. */
static uint64_t fresh_ns(const struct params *o)
{
	return (uint64_t)(((sluice__u128)o->limit * o->period + o->rate - 1) / o->rate);
}

/* The one validator of init and config_check (clock_internal.h): 0 with
 * the clock and the parameter set, or init's code. */
static int validate(const sluice_warmup_config_t *cfg, sluice__step_use_t use,
                    const sluice_clock_t **clock, struct params *o)
{
	if (!cfg)
		return SLUICE_EINVAL;
	uint64_t rate = cfg->rate, period = cfg->period_ns, p = cfg->warmup_ns;
	if (rate == 0 || period == 0 || period > SLUICE_WARMUP_PERIOD_MAX_NS || period < rate)
		return SLUICE_ERATE;
	if (p < SLUICE_WARMUP_MIN_NS || p > SLUICE_WARMUP_MAX_NS)
		return SLUICE_EWARMUP;
	/* Step 0 here: make_params() checks the clock against the interval. */
	int rc = sluice__init_clock(cfg->clock, 0, use, clock);
	if (rc == 0)
		rc = make_params(rate, period, p, *clock, use, o);
	return rc;
}

int sluice_warmup_config_check(const sluice_warmup_config_t *cfg)
{
	const sluice_clock_t *clock;
	struct params o;
	return validate(cfg, SLUICE__ASK, &clock, &o);
}

int sluice_warmup_init(sluice_warmup_t *w, const sluice_warmup_config_t *cfg)
{
	if (!w)
		return SLUICE_EINVAL;
	const sluice_clock_t *clock = NULL;
	struct params o;
	int rc = validate(cfg, SLUICE__RECORD, &clock, &o);
	if (rc != 0)
		return rc;
	uint64_t p = cfg->warmup_ns;
	/* Any one cost: n I <= L I, plus at most the area above I, P/2 (the
	 * curve is capped at M), plus its rounding margin.  L I is bounded
	 * by max(P, L I now) rather than by L I itself, so the grid below
	 * holds for every rate set_rate accepts: L I <= P whenever M >= 1. */
	uint64_t fresh_max = fresh_ns(&o) > p ? fresh_ns(&o) : p;
	uint64_t cost_max = fresh_max + p / 2 + (p >> 30) + 4;
	/* The smallest grid whose quarter range covers an idle of P plus two
	 * maximal bookings (one waited for, one booked). */
	uint32_t g = 0;
	while ((1ULL << (QUARTER_BITS + g)) < p + 2 * cost_max + (2ULL << g))
		g++;
	uint64_t unit = 1ULL << g;

	w->warmup_ns = p;
	w->unit_ns = unit;
	w->horizon_ns = (1ULL << (QUARTER_BITS + g)) - cost_max - unit;
	w->clock = clock;
	w->unit_shift = g;
	w->end_ns = UINT64_MAX & ~(unit - 1);        /* grid_down(UINT64_MAX) */
	w->half_range_ns = 2ULL << (QUARTER_BITS + g); /* R/2 = 2 quarter() */
	w->fresh_max = fresh_max;
	w->cost_max = cost_max;
	/* Era 0 (the anchor's bit 0) names slot 0; slot 1 is the spare,
	 * holding a copy until the first set_rate rewrites it. */
	for (int i = 0; i < 2; i++) {
		struct sluice__warmup_params *sl = &w->params[i];
		atomic_init(&sl->seq, 0);
		atomic_init(&sl->rate, o.rate);
		atomic_init(&sl->period_ns, o.period);
		atomic_init(&sl->limit, o.limit);
		atomic_init(&sl->frac_bits, o.frac_bits);
		atomic_init(&sl->max_q, o.max_q);
		atomic_init(&sl->interval, o.interval);
		atomic_init(&sl->thresh, o.thresh);
		atomic_init(&sl->curve_k, o.curve_k);
	}
	atomic_init(&w->writer, 0);
	/* Cold as of time 0, the start of every time base, as Guava starts:
	 * cold stays cold, so this is the state at every reading, and the
	 * first reading (whatever clock it comes from) re-anchors there.  The
	 * clock is not read: anchoring at its init-time reading froze a
	 * limiter fed `_at` readings from another base (each one below the
	 * anchor was taken as the anchor, so the first ticket never came). */
	atomic_init(&w->anchor, 0);
	atomic_init(&w->word, sluice__anchor_self_word(0));
	return 0;
}

/* The parameter set in force (the anchor's era), read until stable:
 * bounded by set_rate calls completing, as a snapshot is. */
static void params_in_force(sluice_warmup_t *w, struct params *p)
{
	/* Acquire: pairs with the pair CAS that flipped the era, which came
	 * after the slot's rewrite. */
	while (!load_params(&w->params[atomic_load_explicit(&w->anchor, memory_order_acquire) &
	                                SLUICE__ANCHOR_ERA],
	                    p))
		;
}

uint64_t sluice_warmup_limit(sluice_warmup_t *w)
{
	struct params p;
	params_in_force(w, &p);
	return p.limit;
}

void sluice_warmup_rate(sluice_warmup_t *w, uint64_t *rate, uint64_t *period_ns)
{
	struct params p;
	params_in_force(w, &p);
	*rate = p.rate;
	*period_ns = p.period;
}

/*
 * set_rate (warmup.h SET_RATE).  Under the writer flag: rewrite the spare
 * slot with the new set, then convert the state into it with ONE pair CAS
 * that also flips the anchor's era bit, so no decision ever sees the new
 * set with the old word or the reverse:
 *   - the ticket moves one unit later and the stored permits gain that
 *     unit's cooling (so every reading at or after the new ticket sees the
 *     state it saw before, and the readings in between are refused: the
 *     change hands out nothing).  This makes the word written differ from
 *     every word written before the change: tickets only grow past it
 *     (bookings), refunds go back only to a later booking's start, and a
 *     COLD word becomes a HOT one at anchor + u.  So a decision or refund
 *     whose snapshot predates the change fails its CAS even after two
 *     changes bring the era bit back, and a refund of a booking made
 *     before it finds another ticket (SLUICE_ECANCEL).
 *   - the stored permits keep their fraction of M (Guava's proportional
 *     rule), rounded up: sq' = ceil(sq * max_q' / max_q), fully cold and
 *     fully warm stay exactly that.
 * A decision that snapshots the old era after the spare slot was rewritten
 * for a later change reads a torn or newer slot; load_params() notices the
 * first, and with the second its CAS fails (the era moved since), so it
 * decides again.
 */
int sluice_warmup_set_rate(sluice_warmup_t *w, uint64_t rate, uint64_t period_ns)
{
	if (!w)
		return SLUICE_EINVAL;
	struct params np, o;
	int rc = make_params(rate, period_ns, w->warmup_ns, w->clock, SLUICE__RECORD, &np);
	if (rc != 0)
		return rc;
	if (fresh_ns(&np) > w->fresh_max)
		return SLUICE_ERATE; /* the grid was sized for less (init, I > P) */
	if (w->unit_ns > 1 && (sluice__u128)w->unit_ns * 512 * rate > period_ns)
		return SLUICE_ERATE; /* unit_ns / I' > 2^-9 (PRECISION): same case */
	/* Decisions never wait for the flag. */
	if (sluice__writer_take(&w->writer, SLUICE_WARMUP_WRITER_WAIT_NS) != 0)
		return SLUICE_ETIMEDOUT;
	/* Only writers flip the era, so under the flag it is stable, and so
	 * is the slot it names (relaxed: the flag's acquire ordered us after
	 * the previous writer's flip). */
	uint64_t e = atomic_load_explicit(&w->anchor, memory_order_relaxed) & SLUICE__ANCHOR_ERA;
	while (!load_params(&w->params[e], &o))
		; /* never rewritten while in force: succeeds at once */
	store_params(&w->params[e ^ SLUICE__ANCHOR_ERA], &np);
	for (;;) {
		struct snap s;
		if (!snapshot(w, &s))
			continue;
		uint64_t next = s.next + w->unit_ns;
		if (next - s.a.anchor >= 3 * quarter(w)) {
			/* past what bookings may write (DESIGN): refuse */
			sluice__writer_drop(&w->writer);
			return SLUICE_EBUSY;
		}
		uint64_t sq = (uint64_t)(((sluice__u128)s.sq * np.max_q + o.max_q - 1) / o.max_q);
		if (sq > np.max_q)
			sq = np.max_q;
		sq = accrue(w, &np, sq, w->unit_ns); /* the moved unit cools */
		uint64_t x = sluice__anchor_hot_word(GEOM(w), s.a.anchor, next, sq);
		/* Pair CAS (full barrier, so a release): publishes the new slot
		 * with the era that names it; fails when a decision wrote the
		 * state since the snapshot (its progress: look again). */
		if (sluice__anchor_write_era(&w->anchor, &s.a, x))
			break;
	}
	sluice__writer_drop(&w->writer); /* the next writer starts after this change */
	return 0;
}
