/*
 * warmup.c - smooth warm-up limiter (Guava SmoothWarmingUp, cold factor 3):
 * validation, the packed state, bookings, re-anchoring and refunds.
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
 */
#include "sluice/error.h"
#include "anchor_internal.h"
#include "util_internal.h"
#include "sluice/warmup.h"


#define FIELD_SHIFT 26
#define FIELD_BITS 35
#define SQ_BITS FIELD_SHIFT
#define SQ_MASK ((1ULL << SQ_BITS) - 1)
#define QUARTER_BITS (FIELD_BITS - 2) /* R/4 = 2^33 units */

/* The HOT word: 0 | tag:2 | field:35 | sq:26 (anchor_internal.h). */
#define GEOM(w) \
	((struct sluice__anchor_geom){ FIELD_SHIFT, FIELD_BITS, (w)->unit_shift })

/* A consistent view of the state, against the anchor it was read with. */
struct snap {
	struct sluice__anchor_snap a; /* word, anchor, as the protocol read them */
	uint64_t next;   /* decoded next free ticket                      */
	uint64_t sq;     /* stored permits, units of 2^-F                 */
	int cold;        /* the word is COLD                              */
};

size_t sluice_warmup_size(void)
{
	return sizeof(sluice_warmup_t);
}

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
	s->next = s->a.time;
	s->sq = s->a.kind == SLUICE__ANCHOR_HOT ? s->a.low : w->max_q;
	s->cold = s->a.kind == SLUICE__ANCHOR_SELF;
	return 1;
}

/* Stored permits after @dt ns of idleness: one per I, rounded up, capped. */
static uint64_t accrue(const sluice_warmup_t *w, uint64_t sq, uint64_t dt)
{
	if (dt == 0)
		return sq;
	if (dt >= w->warmup_ns)
		return w->max_q; /* P / I = M: fully cold from anywhere */
	/* dt < 2^46, rate <= 2^46, 2^F <= 2^25: fits in 128 bits. */
	sluice__u128 num = ((sluice__u128)dt * w->rate) << w->frac_bits;
	uint64_t add = (uint64_t)((num + w->period_ns - 1) / w->period_ns);
	return sq + add >= w->max_q ? w->max_q : sq + add;
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
static uint64_t cost_of(const sluice_warmup_t *w, uint64_t sq, uint64_t n, uint64_t *taken)
{
	uint64_t nq = n << w->frac_bits;
	uint64_t tk = nq < sq ? nq : sq;
	*taken = tk;
	uint64_t cost = (uint64_t)(((sluice__u128)n * w->period_ns + w->rate - 1) / w->rate);
	double scale = 1.0 / (double)(1ULL << w->frac_bits); /* exact */
	double b = (double)sq * scale, top = 2.0 * w->thresh;
	if (b > top)
		b = top;
	if (tk > 0 && b > w->thresh) {
		double a = (double)(sq - tk) * scale;
		if (a < w->thresh)
			a = w->thresh;
		if (a > b)
			a = b;
		double x = w->curve_k * (b - a) * (a + b - 2.0 * w->thresh);
		if (x > 0)
			cost += sluice__ceil_u64(x + x * 0x1p-40) + 1;
	}
	return cost;
}

static void fill(const sluice_warmup_t *w, sluice_decision_t *d, int allowed, uint64_t t,
                 uint64_t retry, uint64_t reset)
{
	if (!d)
		return;
	d->allowed = allowed;
	d->limit = w->limit;
	d->remaining = 0; /* one request at a time: the ticket is now ahead */
	/* @retry: a booking's delay when allowed, the wait when refused */
	d->retry_after_ns = allowed ? 0 : retry;
	d->delay_ns = allowed ? retry : 0;
	d->reset_ns = reset;
	d->now_ns = t;
}

/* Move the anchor so that @t is less than R/2 past it (one step or jump):
 * a jump when the limiter is fully cold at the jump's anchor. */
static void reanchor(sluice_warmup_t *w, const struct snap *s, uint64_t t)
{
	uint64_t to = sluice__anchor_jump_to(GEOM(w), t);
	int cold = s->next <= to && accrue(w, s->sq, to - s->next) == w->max_q;
	sluice__anchor_move(&w->anchor, GEOM(w), &s->a, t, cold);
}

int sluice_warmup_reserve_at(sluice_warmup_t *w, uint64_t n, uint64_t now, uint64_t max_delay_ns,
                             sluice_decision_t *d)
{
	if (!w || n == 0)
		return SLUICE_EINVAL;
	if (n > w->limit) {
		sluice__decision_never(d, w->limit, now);
		return SLUICE_ETOOBIG;
	}
	uint64_t maxd = max_delay_ns < w->horizon_ns ? max_delay_ns : w->horizon_ns;
	uint64_t end = grid_down(w, UINT64_MAX); /* the last representable ticket */
	for (;;) {
		struct snap s;
		if (!snapshot(w, &s))
			continue;
		uint64_t t = now > s.a.anchor ? now : s.a.anchor; /* never before the anchor */
		if (t > end)
			t = end;
		if (SLUICE_UNLIKELY(t - s.a.anchor >= 2 * quarter(w))) {
			reanchor(w, &s, t);
			continue;
		}
		uint64_t wait = s.next > t ? s.next - t : 0;
		if (wait > maxd) {
			fill(w, d, 0, t, wait - maxd, wait);
			return 0;
		}
		/* Resync (Guava): idle time since next becomes stored permits. */
		uint64_t start = s.next > t ? s.next : t;
		uint64_t sq = s.next < t ? accrue(w, s.sq, t - s.next) : s.sq;
		uint64_t taken, cost = cost_of(w, sq, n, &taken);
		sq -= taken;
		if (SLUICE_UNLIKELY(cost > end - start)) {
			/* The ticket would pass the end of the time base. */
			fill(w, d, 0, t, SLUICE_NEVER, wait);
			return 0;
		}
		uint64_t raw = start + cost;
		uint64_t next = (raw + w->unit_ns - 1) & ~(w->unit_ns - 1); /* <= end */
		sq = accrue(w, sq, next - raw); /* the rounded-off time cools */
		uint64_t x = sluice__anchor_hot_word(GEOM(w), s.a.anchor, next, sq);
		/* Pair CAS (full barrier, so a release): publishes which anchor
		 * x is relative to, and fails if the anchor moved (DESIGN). */
		if (sluice__anchor_write(&w->anchor, &s.a, x)) {
			fill(w, d, 1, t, wait, next - t);
			return 1;
		}
	}
}

int sluice_warmup_acquire_at(sluice_warmup_t *w, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	return sluice_warmup_reserve_at(w, n, now, 0, d);
}

int sluice_warmup_refund(sluice_warmup_t *w, uint64_t n, const sluice_decision_t *admitted)
{
	return sluice_warmup_cancel(w, n, admitted);
}

int sluice_warmup_cancel(sluice_warmup_t *w, uint64_t n, const sluice_decision_t *admitted)
{
	if (!w || !admitted || n == 0 || n > w->limit || !admitted->allowed)
		return SLUICE_EINVAL;
	uint64_t t = admitted->now_ns;
	if (admitted->delay_ns > admitted->reset_ns || admitted->reset_ns > UINT64_MAX - t)
		return SLUICE_EINVAL; /* not a booking this limiter made */
	uint64_t start = t + admitted->delay_ns; /* its start */
	uint64_t booked = t + admitted->reset_ns;      /* the ticket it booked */
	for (;;) {
		struct snap s;
		if (!snapshot(w, &s))
			continue;
		/* Only the latest booking can be taken back exactly; an older
		 * one has later bookings chained on its ticket. */
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
		uint64_t sq = s.sq + (n << w->frac_bits);
		if (sq > w->max_q)
			sq = w->max_q;
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
	struct snap s;
	/* Bounded by others' progress, as a decision's snapshot. */
	while (!snapshot(w, &s))
		;
	uint64_t t = now > s.a.anchor ? now : s.a.anchor;
	if (t > end)
		t = end;
	if (s.next > t)
		return 0; /* the ticket has not come: acquire refuses every n */
	uint64_t sq = accrue(w, s.sq, t - s.next), taken;
	if (cost_of(w, sq, w->limit, &taken) <= end - t)
		return w->limit;
	uint64_t lo = 0, hi = w->limit; /* cost(lo) fits (lo = 0: nothing), cost(hi) not */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (cost_of(w, sq, mid, &taken) <= end - t)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

uint64_t sluice_warmup_available(sluice_warmup_t *w)
{
	return sluice_warmup_available_at(w, sluice_clock_now(w->clock));
}

int sluice_warmup_init(sluice_warmup_t *w, const sluice_warmup_config_t *cfg)
{
	if (!w || !cfg)
		return SLUICE_EINVAL;
	const sluice_clock_t *clock = cfg->clock ? cfg->clock : &sluice_clock_cached;
	if (clock->kind > SLUICE_CLOCK_MANUAL)
		return SLUICE_ECLOCK;
	uint64_t rate = cfg->rate, period = cfg->period_ns, p = cfg->warmup_ns;
	/* I = period / rate must be at least 1 ns. */
	if (rate == 0 || period == 0 || period > SLUICE_WARMUP_PERIOD_MAX_NS || period < rate)
		return SLUICE_ERATE;
	if (p < SLUICE_WARMUP_MIN_NS || p > SLUICE_WARMUP_MAX_NS)
		return SLUICE_EWARMUP;
	/* An acquire passes only when the next free ticket is <= now, so at
	 * most one request passes per clock reading: an interval below the
	 * clock's step would cap the rate silently (warmup.h, LIMITS). */
	if (sluice__clock_require_step(clock, period / rate) != 0)
		return SLUICE_ERESOLUTION;
	sluice__u128 pr = (sluice__u128)p * rate; /* M = pr / period */
	if (pr > (sluice__u128)SLUICE_WARMUP_STORED_MAX * period)
		return SLUICE_EWARMUP;
	uint64_t m_floor = (uint64_t)(pr / period);
	uint64_t m_ceil = (uint64_t)((pr + period - 1) / period); /* 1 .. 2^20 */
	uint64_t limit = m_floor ? m_floor : 1;
	/* F: M in units of 2^-F below 2^26, so sq fits its field. */
	uint32_t frac = SQ_BITS - sluice__bit_width(m_ceil);
	uint64_t max_q = (uint64_t)(((pr << frac) + period - 1) / period);
	/* Any one cost: n I <= L I, plus at most the area above I, P/2 (the
	 * curve is capped at M), plus its rounding margin. */
	uint64_t cost_max = (uint64_t)(((sluice__u128)limit * period + rate - 1) / rate) + p / 2 +
	                    (p >> 30) + 4;
	/* The smallest grid whose quarter range covers an idle of P plus two
	 * maximal bookings (one waited for, one booked). */
	uint32_t g = 0;
	while ((1ULL << (QUARTER_BITS + g)) < p + 2 * cost_max + (2ULL << g))
		g++;
	uint64_t unit = 1ULL << g;
	double interval = (double)period / (double)rate;
	double m = (double)pr / (double)period;

	w->rate = rate;
	w->period_ns = period;
	w->warmup_ns = p;
	w->limit = limit;
	w->unit_ns = unit;
	w->horizon_ns = (1ULL << (QUARTER_BITS + g)) - cost_max - unit;
	w->clock = clock;
	w->unit_shift = g;
	w->frac_bits = frac;
	w->max_q = max_q;
	w->cost_max = cost_max;
	w->interval = interval;
	w->thresh = m / 2.0;
	w->curve_k = 2.0 * interval / m;
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
