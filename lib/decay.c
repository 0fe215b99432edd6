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
 * whole half-lives decay exactly, with no margin), and 2^(-rem/h) is a
 * 64-entry table of 2^(-j/64) times a 7-term series in doubles, f = rem / h
 * rounded once:
 * relative error below 2^-47 in all.  A margin of 2^-43 relative, then
 * rounding up, makes every kept count an upper bound of the exact one.
 * log2 (an atanh series) only seeds the search for retry_after_ns, which
 * then checks candidate grid points with the same decay function the
 * decisions use, so the answer is exact for them; the seed is close enough
 * that two checks usually settle it (retry_after()).  No libm: the library links
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
#include "clock_internal.h"
#include "writer_internal.h"

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

void sluice_decay_destroy(sluice_decay_t *x)
{
	(void)x; /* nothing allocated */
}

/* ---- arithmetic --------------------------------------------------------- */

/* 2^(-j/64), j = 0..63, each the double nearest the exact value
 * (computed with 50 decimal digits). */
static const double EXP2_NEG_64THS[64] = {
	0x1.0000000000000p+0, 0x1.fa7c1819e90d8p-1, 0x1.f50765b6e4540p-1, 0x1.efa1bee615a27p-1,
	0x1.ea4afa2a490dap-1, 0x1.e502ee78b3ff6p-1, 0x1.dfc97337b9b5fp-1, 0x1.da9e603db3285p-1,
	0x1.d5818dcfba487p-1, 0x1.d072d4a07897cp-1, 0x1.cb720dcef9069p-1, 0x1.c67f12e57d14bp-1,
	0x1.c199bdd85529cp-1, 0x1.bcc1e904bc1d2p-1, 0x1.b7f76f2fb5e47p-1, 0x1.b33a2b84f15fbp-1,
	0x1.ae89f995ad3adp-1, 0x1.a9e6b5579fdbfp-1, 0x1.a5503b23e255dp-1, 0x1.a0c667b5de565p-1,
	0x1.9c49182a3f090p-1, 0x1.97d829fde4e50p-1, 0x1.93737b0cdc5e5p-1, 0x1.8f1ae99157736p-1,
	0x1.8ace5422aa0dbp-1, 0x1.868d99b4492edp-1, 0x1.82589994cce13p-1, 0x1.7e2f336cf4e62p-1,
	0x1.7a11473eb0187p-1, 0x1.75feb564267c9p-1, 0x1.71f75e8ec5f74p-1, 0x1.6dfb23c651a2fp-1,
	0x1.6a09e667f3bcdp-1, 0x1.6623882552225p-1, 0x1.6247eb03a5585p-1, 0x1.5e76f15ad2148p-1,
	0x1.5ab07dd485429p-1, 0x1.56f4736b527dap-1, 0x1.5342b569d4f82p-1, 0x1.4f9b2769d2ca7p-1,
	0x1.4bfdad5362a27p-1, 0x1.486a2b5c13cd0p-1, 0x1.44e086061892dp-1, 0x1.4160a21f72e2ap-1,
	0x1.3dea64c123422p-1, 0x1.3a7db34e59ff7p-1, 0x1.371a7373aa9cbp-1, 0x1.33c08b26416ffp-1,
	0x1.306fe0a31b715p-1, 0x1.2d285a6e4030bp-1, 0x1.29e9df51fdee1p-1, 0x1.26b4565e27cddp-1,
	0x1.2387a6e756238p-1, 0x1.2063b88628cd6p-1, 0x1.1d4873168b9aap-1, 0x1.1a35beb6fcb75p-1,
	0x1.172b83c7d517bp-1, 0x1.1429aaea92de0p-1, 0x1.11301d0125b51p-1, 0x1.0e3ec32d3d1a2p-1,
	0x1.0b5586cf9890fp-1, 0x1.0874518759bc8p-1, 0x1.059b0d3158574p-1, 0x1.02c9a3e778061p-1,
};

/*
 * 2^-f for 0 <= f < 1, relative error below 2^-50: f = j/64 + r with
 * r < 1/64, so 2^-f = 2^(-j/64) (the table) times e^(-r ln2), whose
 * argument is below 0.0109 and needs only seven Taylor terms (the first
 * omitted one is below 2^-60; measured: 2^-51.8 at most over 2 x 10^7
 * values of f, against long double exp2l).  Multiplications only: the
 * 18-term series this replaces divided at every term, on every decision.
 */
static double exp2_neg_frac(double f)
{
	double s64 = f * 64.0; /* exact: a power of two; below 64 as f < 1 */
	int j = (int)s64;
	double y = (s64 - (double)j) * (LN2 / 64.0); /* s64 - j exact */
	double p = 1.0 - y * (1.0 - y * (1.0 / 2 - y * (1.0 / 6 - y * (1.0 / 24 - y * (1.0 / 120 -
	           y * (1.0 / 720 - y * (1.0 / 5040)))))));
	return EXP2_NEG_64THS[j] * p;
}

/*
 * @q * 2^(-dt/h) as a double and whether it is exact: dt = k h + rem, the
 * 2^-k part is an exact scaling and rem / h one rounding (rem < 2^50), so
 * whole half-lives decay exactly (x 2^-k, k < 34 here).
 */
static double decayed(const sluice_decay_t *x, uint64_t q, uint64_t dt, int *exact)
{
	const uint64_t h = x->half_life_ns;
	/* k = dt / h by a double division and a fix-up: every caller has
	 * dt < flush_ns = 34 h, so the rounded quotient is below 34 and off
	 * by at most one near an integer; a 64-bit integer division costs
	 * several times more on the CPUs this runs on. */
	uint64_t k = (uint64_t)((double)dt / (double)h), kh = k * h;
	if (kh > dt) {
		k--;
		kh -= h;
	} else if (dt - kh >= h) {
		k++;
		kh += h;
	}
	uint64_t rem = dt - kh;
	/* 2^-k exactly, built from its exponent (k < 34): no division */
	uint64_t bits = (uint64_t)(1023 - k) << 52;
	double scale;
	memcpy(&scale, &bits, sizeof(scale));
	double v = (double)q * scale;
	*exact = rem == 0;
	if (rem)
		v *= exp2_neg_frac((double)rem / (double)h);
	return v;
}

/* log2(v) for v >= 1, absolute error below 4e-15 (3.7e-15 at most over
 * 10^7 values up to 2^34 against long double log2l; the rounding of
 * e + 2s/ln2 dominates for large e): retry_after() allows 1e-14 per call,
 * and reset_ns has a wide margin.  v = 2^e m with m
 * in [sqrt(1/2), sqrt(2)), and ln m = 2 atanh z, z = (m-1)/(m+1), |z| <
 * 0.172: eleven odd terms leave less than 1e-17 out. */
static double log2_ge1(double v)
{
	uint64_t bits;
	memcpy(&bits, &v, sizeof(bits));
	int e = (int)((bits >> 52) & 0x7ff) - 1023;
	bits = (bits & ((1ULL << 52) - 1)) | (1023ULL << 52); /* mantissa in [1, 2) */
	double m;
	memcpy(&m, &bits, sizeof(m));
	if (m > 1.4142135623730951) {
		m *= 0.5; /* exact */
		e++;
	}
	double z = (m - 1.0) / (m + 1.0), z2 = z * z;
	double s = z * (1.0 + z2 * (1.0 / 3 + z2 * (1.0 / 5 + z2 * (1.0 / 7 + z2 * (1.0 / 9 +
	           z2 * (1.0 / 11 + z2 * (1.0 / 13 + z2 * (1.0 / 15 + z2 * (1.0 / 17 +
	           z2 * (1.0 / 19 + z2 * (1.0 / 21)))))))))));
	return (double)e + 2.0 * s / LN2;
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

/* Upper bound on the time until a count decays to 0 (is forgotten), a
 * whole number of grid units (decisions happen on the grid), from @l2, the
 * log2_ge1() of the count (a refusal has it already). */
static uint64_t forget_bound_l2(const sluice_decay_t *x, double l2)
{
	double b = (double)x->half_life_ns * (l2 + 0x1p-30);
	b += b * 0x1p-30;
	uint64_t r = sluice__ceil_u64(b) + 2;
	if (r > x->flush_ns)
		r = x->flush_ns;
	return (r + x->unit_ns - 1) & ~(x->unit_ns - 1);
}

static uint64_t forget_bound(const sluice_decay_t *x, uint64_t cq)
{
	return cq ? forget_bound_l2(x, log2_ge1((double)cq)) : 0;
}

/*
 * retry_after_ns of a refusal at grid point @t: the offset from @t of the
 * first grid point where the count @cq, valid @dt0 ns before @t, has
 * decayed to at most @tgt by the decisions' own decay function (monotone
 * in time), or SLUICE_NEVER when no grid point of the time base is late
 * enough.  @c = decay_up(cq, dt0) > tgt on entry; @l2c is log2_ge1(@c)
 * (the refusal's count at @t, which reset_ns needs too).
 *
 * Decisions happen on grid points only, so the answer is j grid units for
 * the smallest j >= 1 that passes.  The closed form h (log2 c - log2 tgt),
 * c the count at t, puts j within a unit or so of it (log2_ge1 is good to about 1e-15;
 * the decay function's own margin is 2^-43 relative, under 1 ns of time
 * for any h below 2^50 ns), so two evaluations usually settle it: j passes
 * and j - 1 does not.  When they do not (the estimate landed further off),
 * the bracket widens by doubling and is then bisected: O(log) evaluations
 * at worst, never unbounded.  The answer is the search's, not the
 * estimate's: exact for the decisions whatever the estimate's error.
 */
static uint64_t retry_after(const sluice_decay_t *x, uint64_t cq, uint64_t dt0, uint64_t tgt,
                            uint64_t t, uint64_t end, uint64_t c, double l2c)
{
	const uint32_t g = x->unit_shift;
	/* dt0 < flush_ns (else nothing would be left to refuse on), so
	 * dt0 + j u <= dt0 + jcap u < 2 flush_ns + u: no overflow. */
#define OK(j) (decay_up(x, cq, dt0 + ((j) << g)) <= tgt)
	uint64_t jcap = (x->flush_ns + x->unit_ns - 1) >> g; /* OK(jcap): all forgotten */
	const double h = (double)x->half_life_ns, u = (double)x->unit_ns;
	double est = h * (l2c - (tgt ? log2_ge1((double)tgt) : 0.0));
	/*
	 * Without evaluating at all.  With V the exact decayed count and
	 * thr = max(tgt, 1), a time fails for certain while V > thr, and
	 * passes for certain once V (1 + 2^-42) < thr (decay_up's value lies
	 * in [V, V (1 + 2^-42)): error below 2^-49, margin 2^-43).  In time
	 * from t: fails before tau, passes after tau + beta, with tau the
	 * exact crossing and beta = h log2(1 + 2^-42) < h 3.3e-13.  est
	 * misses tau by at most mu (two log2_ge1 errors, 1e-14 each, and the
	 * rounding of est) below, and by gamma = h log2(c / V) <= h 1.45
	 * (2^-42 + 1/(c - 1)) above (c is V rounded up).  So if the first
	 * grid point past est + mu + beta is j and the one before it lies
	 * below est - mu - gamma, j is the answer: exact, no evaluation.
	 * Otherwise (the crossing is within those few 1e-13 h of a grid
	 * point, or c is tiny) the search below decides by evaluating.
	 */
	/*
	 * The crossing on whole half-lives: cq 2^-k == thr exactly (the common
	 * case of a limiter refusing after one burst: cq = n 2^F).  There the
	 * decay is exact, with no margin, so the bounds below cannot place
	 * the grid point at it; but its value is known: at y_x = k h - dt0
	 * the kept count is exactly thr, which passes when tgt >= 1 (c <= tgt)
	 * and fails when tgt = 0 (a count of one unit is not forgotten).
	 * Before y_x it fails for certain (V > thr), after y_x + beta it
	 * passes for certain (see below).
	 */
	const uint64_t thr = tgt ? tgt : 1;
	unsigned k = sluice__bit_width(cq) - sluice__bit_width(thr); /* cq > thr */
	if (k < FLUSH_HALF_LIVES && (thr << k) == cq && k * x->half_life_ns > dt0) {
		uint64_t yx = k * x->half_life_ns - dt0, jx;
		if (tgt)
			jx = (yx + x->unit_ns - 1) >> g; /* the first grid point >= y_x */
		else
			jx = (yx >> g) + 1; /* the first one > y_x */
		uint64_t past = (jx << g) - yx; /* how far past y_x it lies */
		if ((tgt && past == 0) || (double)past > h * 3.3e-13)
			return jx > (end - t) >> g ? SLUICE_NEVER : jx << g;
	}
	const uint64_t c_gt1 = c > 1 ? c : 0; /* gamma needs c >= 2 */
	if (c_gt1) {
		double mu = h * 3e-14 + est * 0x1p-50;
		double beta = h * 3.3e-13, gamma = h * 1.45 * (0x1p-42 + 1.01 / (double)(c_gt1 - 1));
		double top = (est + mu + beta) / u; /* u a power of two: exact */
		if (top < (double)jcap) {
			uint64_t jj = (uint64_t)top + 1; /* first grid point past it */
			if (jj == 1 || (double)(jj - 1) * u < est - mu - gamma)
				return jj > (end - t) >> g ? SLUICE_NEVER : jj << g;
		}
	}
	double ju = est / u;
	uint64_t j = ju < 1.0 ? 1 : ju >= (double)jcap ? jcap : sluice__ceil_u64(ju);
	uint64_t lo, hi, step = 1; /* OK(hi), !OK(lo); j = 0 fails (entry) */
	if (OK(j)) {
		hi = j;
		for (;;) {
			lo = hi > step ? hi - step : 0;
			if (lo == 0 || !OK(lo))
				break;
			hi = lo;
			step <<= 1;
		}
	} else {
		lo = j;
		for (;;) {
			hi = jcap - lo > step ? lo + step : jcap;
			if (hi == jcap || OK(hi))
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
#undef OK
	/* @end: the last grid point of the time base */
	return hi > (end - t) >> g ? SLUICE_NEVER : hi << g;
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

/* @reset: forget_bound() of @cq */
static void fill(const sluice_decay_t *x, sluice_decision_t *d, int allowed, uint64_t t,
                 uint64_t cq, uint64_t lim, uint64_t retry, uint64_t reset)
{
	d->allowed = allowed;
	d->limit = lim >> x->frac_bits;
	d->remaining = cq >= lim ? 0 : (lim - cq) >> x->frac_bits;
	d->retry_after_ns = retry;
	d->delay_ns = 0;
	d->reset_ns = reset;
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
				/* c >= 1 here (else nq > lim, above) */
				double l2c = log2_ge1((double)c);
				uint64_t yg = retry_after(x, s.cq, t - s.t, lim - nq, t, end, c, l2c);
				fill(x, d, 0, t, c, lim, yg, forget_bound_l2(x, l2c));
			}
			return 0;
		}
		uint64_t after = c + nq;
		uint64_t w = sluice__anchor_hot_word(GEOM(x), s.a.anchor, t, after);
		/* Pair CAS (full barrier, so a release): publishes which anchor
		 * w is relative to, and fails if the anchor moved (DESIGN). */
		if (sluice__anchor_write(&x->anchor, &s.a, w)) {
			if (d)
				fill(x, d, 1, t, after, lim, 0, forget_bound(x, after));
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
	const sluice_clock_t *clock;
	int rc = sluice__init_clock(cfg->clock, h, &clock); /* keeps the cached clock this fine */
	if (rc != 0)
		return rc;
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
	if (sluice__writer_take(&x->writer, SLUICE_DECAY_WRITER_WAIT_NS) != 0)
		return SLUICE_ETIMEDOUT;
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
	sluice__writer_drop(&x->writer);
	return 0;
}

uint64_t sluice_decay_limit(const sluice_decay_t *x)
{
	return atomic_load_explicit(&((sluice_decay_t *)x)->limit, memory_order_relaxed);
}
