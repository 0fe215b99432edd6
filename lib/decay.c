/* SPDX-License-Identifier: MIT */
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
 * 1/h is kept as a double, so a decision divides nothing.  log2 (a
 * 64-entry table and six series terms, log2_int()) gives retry_after_ns
 * in closed form from the STORED count: the crossing of cq 2^(-y/h) with
 * the target is h (log2 cq - log2 target) from the count's time, and its
 * error bounds decide the first grid point that passes without
 * evaluating the decay; only a crossing within about 4e-13 h of a grid
 * point falls back to a search that checks candidate grid points with the
 * same decay function the decisions use, so the answer is exact for them
 * (retry_after()).  No libm: the library links without it.
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
#include "refund_internal.h"
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
 * omitted one is below 2^-60; measured: 2^-51.3 at most over 2 x 10^7
 * values of f, against long double exp2l, in the Estrin order below).  Multiplications only: the
 * 18-term series this replaces divided at every term, on every decision.
 */
static double exp2_neg_frac(double f)
{
	double s64 = f * 64.0; /* exact: a power of two; below 64 as f < 1 */
	int j = (int)s64;
	double y = (s64 - (double)j) * (LN2 / 64.0); /* s64 - j exact */
	/* e^-y = sum (-y)^i / i!, i = 0..7, in Estrin's order (pairs, then
	 * y^2 and y^4) rather than Horner's: the same terms, a dependency
	 * chain of about 4 multiply-adds instead of 7, which the refusal and
	 * the admission both wait on. */
	double y2 = y * y, y4 = y2 * y2;
	double p = (1.0 - y) + y2 * (1.0 / 2 - y * (1.0 / 6)) +
	           y4 * ((1.0 / 24 - y * (1.0 / 120)) + y2 * (1.0 / 720 - y * (1.0 / 5040)));
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
	/* k = dt / h from the reciprocal 1/h (init) and a fix-up: every
	 * caller has dt < flush_ns = 34 h, so the rounded quotient is below
	 * 34 and off by at most one near an integer; a division, integer or
	 * double, costs several times a multiplication on the CPUs this runs
	 * on, and sits on the decision's critical path. */
	uint64_t k = (uint64_t)((double)dt * x->inv_half_life), kh = k * h;
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
	/* f = rem / h as rem * (1/h): rem is exact, so f is off by two
	 * roundings (2^-52 relative, f < 1), a few 2^-53 in 2^-f: inside the
	 * 2^-47 the margin below assumes. */
	if (rem)
		v *= exp2_neg_frac((double)rem * x->inv_half_life);
	return v;
}

/* log2(m_j) and 1 / m_j for m_j = 1 + j/64, j = 0..64, each the double
 * nearest the exact value (computed with 50 decimal digits); side by side,
 * so a lookup touches one line. */
static const struct {
	double log2, inv;
} M_64THS[65] = {
	{ 0x0.0p+0, 0x1.0000000000000p+0 },
	{ 0x1.6e79685c2d22ap-6, 0x1.f81f81f81f820p-1 },
	{ 0x1.6bad3758efd87p-5, 0x1.f07c1f07c1f08p-1 },
	{ 0x1.0eb389fa29f9bp-4, 0x1.e9131abf0b767p-1 },
	{ 0x1.663f6fac91316p-4, 0x1.e1e1e1e1e1e1ep-1 },
	{ 0x1.bc84240adabbap-4, 0x1.dae6076b981dbp-1 },
	{ 0x1.08c588cda79e4p-3, 0x1.d41d41d41d41dp-1 },
	{ 0x1.32ae9e278ae1ap-3, 0x1.cd85689039b0bp-1 },
	{ 0x1.5c01a39fbd688p-3, 0x1.c71c71c71c71cp-1 },
	{ 0x1.84c2bd02f03b3p-3, 0x1.c0e070381c0e0p-1 },
	{ 0x1.acf5e2db4ec94p-3, 0x1.bacf914c1bad0p-1 },
	{ 0x1.d49ee4c325970p-3, 0x1.b4e81b4e81b4fp-1 },
	{ 0x1.fbc16b902680ap-3, 0x1.af286bca1af28p-1 },
	{ 0x1.11307dad30b76p-2, 0x1.a98ef606a63bep-1 },
	{ 0x1.24407ab0e073ap-2, 0x1.a41a41a41a41ap-1 },
	{ 0x1.37124cea4cdedp-2, 0x1.9ec8e951033d9p-1 },
	{ 0x1.49a784bcd1b8bp-2, 0x1.999999999999ap-1 },
	{ 0x1.5c01a39fbd688p-2, 0x1.948b0fcd6e9e0p-1 },
	{ 0x1.6e221cd9d0cdep-2, 0x1.8f9c18f9c18fap-1 },
	{ 0x1.800a563161c54p-2, 0x1.8acb90f6bf3aap-1 },
	{ 0x1.91bba891f1709p-2, 0x1.8618618618618p-1 },
	{ 0x1.a33760a7f6051p-2, 0x1.8181818181818p-1 },
	{ 0x1.b47ebf73882a1p-2, 0x1.7d05f417d05f4p-1 },
	{ 0x1.c592fad295b56p-2, 0x1.78a4c8178a4c8p-1 },
	{ 0x1.d6753e032ea0fp-2, 0x1.745d1745d1746p-1 },
	{ 0x1.e726aa1e754d2p-2, 0x1.702e05c0b8170p-1 },
	{ 0x1.f7a8568cb06cfp-2, 0x1.6c16c16c16c17p-1 },
	{ 0x1.03fda8b97997fp-1, 0x1.6816816816817p-1 },
	{ 0x1.0c10500d63aa6p-1, 0x1.642c8590b2164p-1 },
	{ 0x1.140c9faa1e544p-1, 0x1.6058160581606p-1 },
	{ 0x1.1bf311e95d00ep-1, 0x1.5c9882b931057p-1 },
	{ 0x1.23c41d42727c8p-1, 0x1.58ed2308158edp-1 },
	{ 0x1.2b803473f7ad1p-1, 0x1.5555555555555p-1 },
	{ 0x1.3327c6ab49ca7p-1, 0x1.51d07eae2f815p-1 },
	{ 0x1.3abb3faa02167p-1, 0x1.4e5e0a72f0539p-1 },
	{ 0x1.423b07e986aa9p-1, 0x1.4afd6a052bf5bp-1 },
	{ 0x1.49a784bcd1b8bp-1, 0x1.47ae147ae147bp-1 },
	{ 0x1.510118708a8f9p-1, 0x1.446f86562d9fbp-1 },
	{ 0x1.5848226989d34p-1, 0x1.4141414141414p-1 },
	{ 0x1.5f7cff41e09afp-1, 0x1.3e22cbce4a902p-1 },
	{ 0x1.66a008e4788ccp-1, 0x1.3b13b13b13b14p-1 },
	{ 0x1.6db196a76194ap-1, 0x1.3813813813814p-1 },
	{ 0x1.74b1fd64e0754p-1, 0x1.3521cfb2b78c1p-1 },
	{ 0x1.7ba18f93502e4p-1, 0x1.323e34a2b10bfp-1 },
	{ 0x1.82809d5be7073p-1, 0x1.2f684bda12f68p-1 },
	{ 0x1.894f74b06ef8bp-1, 0x1.2c9fb4d812ca0p-1 },
	{ 0x1.900e6160002cdp-1, 0x1.29e4129e4129ep-1 },
	{ 0x1.96bdad2acb5f6p-1, 0x1.27350b8812735p-1 },
	{ 0x1.9d5d9fd5010b3p-1, 0x1.2492492492492p-1 },
	{ 0x1.a3ee7f38e181fp-1, 0x1.21fb78121fb78p-1 },
	{ 0x1.aa708f58014d3p-1, 0x1.1f7047dc11f70p-1 },
	{ 0x1.b0e4126bcc86cp-1, 0x1.1cf06ada2811dp-1 },
	{ 0x1.b74948f5532dap-1, 0x1.1a7b9611a7b96p-1 },
	{ 0x1.bda071cc67e6ep-1, 0x1.1811811811812p-1 },
	{ 0x1.c3e9ca2e1a055p-1, 0x1.15b1e5f75270dp-1 },
	{ 0x1.ca258dca93316p-1, 0x1.135c81135c811p-1 },
	{ 0x1.d053f6d260896p-1, 0x1.1111111111111p-1 },
	{ 0x1.d6753e032ea0fp-1, 0x1.0ecf56be69c90p-1 },
	{ 0x1.dc899ab3ff56cp-1, 0x1.0c9714fbcda3bp-1 },
	{ 0x1.e29142e0e0140p-1, 0x1.0a6810a6810a7p-1 },
	{ 0x1.e88c6b3626a73p-1, 0x1.0842108421084p-1 },
	{ 0x1.ee7b471b3a950p-1, 0x1.0624dd2f1a9fcp-1 },
	{ 0x1.f45e08bcf0655p-1, 0x1.0410410410410p-1 },
	{ 0x1.fa34e1177c233p-1, 0x1.0204081020408p-1 },
	{ 0x1.0000000000000p+0, 0x1.0000000000000p-1 },
};

/*
 * log2(v) for an integer 1 <= v < 2^33, absolute error below 4e-15
 * (measured: 3.9e-15 at most over 2 x 10^7 values, a million small ones
 * and the rest spread over every bit length, against long double log2l;
 * counts and targets here are below 2^32): v =
 * 2^e m with m in [1, 2) (exact: v is exact in a double), m = m_j (1 + r)
 * with m_j = 1 + j/64 the nearest 64th, so |m - m_j| <= 1/128 exactly and
 * |r| <= 1/128; log2(1 + r) is six terms of its series (the first omitted
 * one below 2^-51: r^7 / (7 ln 2)), in Estrin's order.  The error is
 * dominated by the one rounding of e + log2 m for large e (half an ulp
 * of 32: 3.6e-15); retry_after() allows 1e-14 per call, and reset_ns has a wide
 * margin.  Integer bit work, two table loads and about a dozen
 * multiply-adds, no division: what a refusal computes twice, in parallel
 * (the count's and the target's), and an admission once.
 */
static double log2_int(uint64_t v)
{
	double dv = (double)v;
	uint64_t bits;
	memcpy(&bits, &dv, sizeof(bits));
	int e = (int)(bits >> 52) - 1023;
	uint64_t mant = bits & ((1ULL << 52) - 1);
	unsigned j = (unsigned)((mant + (1ULL << 45)) >> 46); /* nearest 64th: 0..64 */
	bits = mant | (1023ULL << 52);
	double m;
	memcpy(&m, &bits, sizeof(m)); /* in [1, 2) */
	double r = (m - (1.0 + (double)j * (1.0 / 64))) * M_64THS[j].inv; /* the difference is exact */
	/* log2(1 + r) = sum (-1)^(i+1) r^i / (i ln 2), i = 1..6 */
	const double c1 = 0x1.71547652b82fep+0, c2 = -0x1.71547652b82fep-1,
	             c3 = 0x1.ec709dc3a03fdp-2, c4 = -0x1.71547652b82fep-2,
	             c5 = 0x1.2776c50ef9bfep-2, c6 = -0x1.ec709dc3a03fdp-3;
	double r2 = r * r, r4 = r2 * r2;
	double p = r * ((c1 + r * c2) + r2 * (c3 + r * c4) + r4 * (c5 + r * c6));
	return (double)e + (M_64THS[j].log2 + p); /* one rounding at the size of e */
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

/*
 * Upper bound on the time from @t until the count @cq, valid @dt0 ns
 * before @t, decays to 0 (is forgotten), a whole number of grid units
 * (decisions happen on the grid), from @l2q = log2_int(@cq).  The kept
 * count is 0 once cq 2^(-y/h) (1 + 2^-42) < 1 (decay_up: its margin and
 * rounding), i.e. from y = h (log2 cq + 2^-41.5) on, y counted from the
 * count's time; the bound adds 2^-30 to log2 cq, 2^-30 relative and 2 ns
 * for the doubles' roundings, is capped at flush_ns (where decay_up gives
 * 0 outright), and is measured from @t by subtracting dt0.  Computed from
 * the stored count, not the decayed one: a refusal has log2 cq already,
 * and a count's log2 after decay would cost a second evaluation.
 */
static uint64_t forget_bound_l2(const sluice_decay_t *x, double l2q, uint64_t dt0)
{
	double b = (double)x->half_life_ns * (l2q + 0x1p-30);
	b += b * 0x1p-30;
	uint64_t r = sluice__ceil_u64(b) + 2;
	if (r > x->flush_ns)
		r = x->flush_ns;
	/* r > dt0 for a count still alive at t (c >= 1 there), which is
	 * every caller's; one unit at least, should a rounding say else */
	r = r > dt0 ? r - dt0 : 1;
	return (r + x->unit_ns - 1) & ~(x->unit_ns - 1);
}

static uint64_t forget_bound(const sluice_decay_t *x, uint64_t cq)
{
	return cq ? forget_bound_l2(x, log2_int(cq), 0) : 0;
}

/*
 * retry_after_ns of a refusal at grid point @t: the offset from @t of the
 * first grid point where the count @cq, valid @dt0 ns before @t, has
 * decayed to at most @tgt by the decisions' own decay function (monotone
 * in time), or SLUICE_NEVER when no grid point of the time base is late
 * enough.  decay_up(cq, dt0) > tgt on entry; @l2q is log2_int(@cq) (which
 * reset_ns needs too).
 *
 * Decisions happen on grid points only, so the answer is j grid units for
 * the smallest j >= 1 that passes.  Three ways to it, cheapest first:
 *   1. the crossing on whole half-lives (cq = thr 2^k), where the decay is
 *      exact: integer arithmetic, no logarithm;
 *   2. the closed form h (log2 cq - log2 thr) - dt0, the exact crossing
 *      of the exact decay of cq, with error bounds that decide j without
 *      evaluating the decay at all, unless the crossing lies within about
 *      4e-13 h of a grid point;
 *   3. in that rare case, a search that evaluates the decisions' own decay
 *      function, seeded by the estimate (doubling, then bisection: O(log)
 *      evaluations at worst, never unbounded).
 * Each answer is exact for the decisions: the first grid point that
 * passes, not an earlier one, not a later one.
 */
static uint64_t retry_after(const sluice_decay_t *x, uint64_t cq, uint64_t dt0, uint64_t tgt,
                            uint64_t t, uint64_t end, double l2q)
{
	const uint32_t g = x->unit_shift;
	/* dt0 < flush_ns (else nothing would be left to refuse on), so
	 * dt0 + j u <= dt0 + jcap u < 2 flush_ns + u: no overflow. */
#define OK(j) (decay_up(x, cq, dt0 + ((j) << g)) <= tgt)
	uint64_t jcap = (x->flush_ns + x->unit_ns - 1) >> g; /* OK(jcap): all forgotten */
	const double h = (double)x->half_life_ns, u = (double)x->unit_ns;
	/* The last grid point of the time base is @end: beyond it, never. */
	const uint64_t jend = (end - t) >> g;
	/*
	 * With V(y) = cq 2^(-(dt0 + y)/h) the exact decayed count y ns after
	 * t and thr = max(tgt, 1), a time fails for certain while V > thr, and
	 * passes for certain once V (1 + 2^-42) < thr (decay_up's value lies
	 * in [V, V (1 + 2^-42)): error below 2^-47, margin 2^-43).  In time
	 * from t: fails before tau, passes after tau + beta, with tau the
	 * exact crossing and beta = h log2(1 + 2^-42) < h 3.3e-13.
	 */
	/*
	 * 1. The crossing on whole half-lives: cq 2^-k == thr exactly (the
	 * common case of a limiter refusing after one burst: cq = n 2^F).
	 * There the decay is exact, with no margin, so the bounds below cannot
	 * place the grid point at it; but its value is known: at y_x = k h -
	 * dt0 the kept count is exactly thr, which passes when tgt >= 1 (c <=
	 * tgt) and fails when tgt = 0 (a count of one unit is not forgotten).
	 * Before y_x it fails for certain (V > thr), after y_x + beta it
	 * passes for certain.
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
			return jx > jend ? SLUICE_NEVER : jx << g;
	}
	/*
	 * 2. The closed form.  tau = h (log2 cq - log2 thr) - dt0 exactly; est
	 * computes it with two log2_int() errors (4e-15 each, times h) and
	 * the roundings of the product and the difference (2^-52 of h (log2
	 * cq - log2 thr) + dt0 at most, each), so |est - tau| <= mu.  If the
	 * first grid point past est + mu + beta is j and the one before it
	 * lies below est - mu, j is the answer: exact, no evaluation.
	 */
	double span = h * (l2q - (tgt ? log2_int(tgt) : 0.0));
	double est = span - (double)dt0;
	double mu = h * 1e-14 + (span + (double)dt0) * 0x1p-50;
	double top = (est + mu + h * 3.3e-13) / u; /* u a power of two: exact */
	if (top < (double)jcap) {
		uint64_t jj = top < 0 ? 1 : (uint64_t)top + 1; /* first grid point past it */
		if (jj == 1 || (double)(jj - 1) * u < est - mu)
			return jj > jend ? SLUICE_NEVER : jj << g;
	}
	/* 3. The search, for a crossing too close to a grid point to call. */
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
	return hi > jend ? SLUICE_NEVER : hi << g;
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

/* The limit in force, in units of 2^-F, read after the state word's
 * acquire load.  Seq_cst (a plain load on x86): in one total order with
 * set_limit's stores and rewrite and the decisions' pair CASes, so a
 * decision that saw the word a lowering's rewrite wrote (or a later one)
 * reads the new limit, and one whose CAS came before a raise's rewrite
 * cannot have read the raise (DESIGN, SET_LIMIT). */
static inline uint64_t limit_q(const sluice_decay_t *x)
{
	return atomic_load_explicit(&((sluice_decay_t *)x)->limit, memory_order_seq_cst)
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
				/* c >= 1 here (else nq > lim, above), so
				 * cq >= 1: both from the stored count */
				uint64_t dt0 = t - s.t;
				double l2q = log2_int(s.cq);
				uint64_t yg = retry_after(x, s.cq, dt0, lim - nq, t, end, l2q);
				fill(x, d, 0, t, c, lim, yg, forget_bound_l2(x, l2q, dt0));
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
	if (!x || !sluice__names_admission(admitted, n) || n > x->limit_max)
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


/* The one validator of init and config_check (clock_internal.h): 0 with
 * the clock and the largest limit, or init's code. */
static int validate(const sluice_decay_config_t *cfg, sluice__step_use_t use,
                    const sluice_clock_t **clock, uint64_t *limit_max)
{
	if (!cfg)
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
	*limit_max = lmax;
	return sluice__init_clock(cfg->clock, h, use, clock); /* init records: keeps the cached clock this fine */
}

int sluice_decay_config_check(const sluice_decay_config_t *cfg)
{
	const sluice_clock_t *clock;
	uint64_t lmax;
	return validate(cfg, SLUICE__ASK, &clock, &lmax);
}

int sluice_decay_init(sluice_decay_t *x, const sluice_decay_config_t *cfg)
{
	if (!x)
		return SLUICE_EINVAL;
	const sluice_clock_t *clock;
	uint64_t lmax;
	int rc = validate(cfg, SLUICE__RECORD, &clock, &lmax);
	if (rc != 0)
		return rc;
	uint64_t h = cfg->half_life_ns;
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
	x->inv_half_life = 1.0 / (double)h;
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
 * storing a lowered limit (before storing a raised one: below), set_limit
 * rewrites the state word from a snapshot
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
 *
 * Readings across a change (decay.h).  The rewrite is the change's stamp:
 * the count's time t_c = t + u, newer than every time the state has
 * decided at.  A decision that reads the rewritten word decides at t_c or
 * later (a reading older than the state's time is taken as that time), so
 * every admission after the stamp is judged at a time >= t_c.  Which limit
 * it is judged against: the seq_cst stores, the rewrite, every decision's
 * limit load and pair CAS lie in one total order S.  A lowering is stored
 * before the rewrite: a decision whose CAS comes after the rewrite read
 * the word after it, hence the limit after the store (S), so the new one;
 * a decision between the store and the rewrite may be judged against the
 * lower limit before the stamp, which only admits fewer.  A raise is
 * stored after the rewrite: a decision whose CAS comes before the rewrite
 * loaded the limit before its CAS, before the rewrite, before the store
 * (S), so the old one; one after may be judged against the old, lower
 * limit after the stamp: fewer again.  So every admission is judged
 * against a limit no higher than the one in force at its time (the limit
 * of the newest change stamped at or before it), and the GUARANTEE's
 * bound (b) holds with the largest limit in force over the interval.
 * Stored before the rewrite, a raise let a decision between the two
 * (the setter preempted there) admit up to the new limit at the old
 * state's time, before the change's stamp (tests/core/test_decay.c).
 */
int sluice_decay_set_limit(sluice_decay_t *x, uint64_t limit)
{
	if (!x)
		return SLUICE_EINVAL;
	if (limit < 1 || limit > x->limit_max)
		return SLUICE_ELIMIT;
	if (sluice__writer_take(&x->writer, SLUICE_DECAY_WRITER_WAIT_NS) != 0)
		return SLUICE_ETIMEDOUT;
	/* A lowering is stored before the rewrite, a raise after it (DESIGN,
	 * SET_LIMIT): no decision is judged against a limit above the one in
	 * force at its time.  Seq_cst: in one total order with the rewrite
	 * and the decisions' pair CASes and limit loads. */
	uint64_t old = atomic_load_explicit(&x->limit, memory_order_relaxed);
	if (limit <= old)
		atomic_store_explicit(&x->limit, limit, memory_order_seq_cst);
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
	if (limit > old)
		atomic_store_explicit(&x->limit, limit, memory_order_seq_cst);
	/* Release: the next writer starts after this change is complete. */
	sluice__writer_drop(&x->writer);
	return 0;
}

uint64_t sluice_decay_limit(const sluice_decay_t *x)
{
	return atomic_load_explicit(&((sluice_decay_t *)x)->limit, memory_order_relaxed);
}
