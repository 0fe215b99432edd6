/* SPDX-License-Identifier: MIT */
/*
 * gcra.c - GCRA token bucket: validation, the slow decision path, cancel,
 * and live reconfiguration (set_rate / set_burst).
 *
 * DESIGN
 *
 * State: one word, the TAT (theoretical arrival time, ns).  Decisions
 * (acquire and reserve, the inline sluice__gcra_try()) read it, compute
 * max(TAT, now) + n*T and CAS it in: the CAS is the linearization point, so
 * the conformance bound of gcra.h is exact under any interleaving.  Only two
 * operations move the TAT other than forward by n*T:
 *   - cancel: back by n*T, only from exactly the value the booking left
 *     (one CAS; any later booking changed the word and makes it fail).
 *   - a reconfiguration: forward, to the converted TAT (below).
 *
 * Parameters: (T, tau, b, reciprocal) live in two slots; `era` (a counter)
 * says which is in force (era & 1).  The TAT and the parameters are two
 * words, and a decision must never combine the old parameters with a TAT
 * converted for the new ones (a lower rate would be charged at the old,
 * smaller n*T: over-admission) nor the new parameters with an unconverted
 * TAT (a larger burst read against the old TAT: a fresh burst).  A
 * reconfiguration from era e to e+1 therefore goes through a seal:
 *
 *   1. (writer, alone: `writer` flag) write the new parameters into slot
 *      (e+1) & 1 with release stores (the slot was era e-1's; a decision
 *      still reading it must fail, see gcra.h's ordering note).
 *   2. compute A1 = convert(A0) from the TAT A0 it loaded, store it in the
 *      slot (`start`), then CAS the TAT A0 -> SEAL(e+1) (a value above
 *      SLUICE_GCRA_TIME_MAX that names the era).  Retry from 2 if A0 moved.
 *   3. CAS era e -> e+1, then CAS the TAT SEAL(e+1) -> A1.
 *
 * (`start` lives beside `high`, start[parity]: only helpers read it, so
 * the slot keeps what decisions read, the stamp included, in 64 bytes.)
 * A decision that finds a seal does step 3 itself (help()) with the `start`
 * the writer stored before sealing, so a writer preempted between its CASes
 * never blocks a decision.  Step 3 is idempotent: each CAS expects the
 * exact previous value, so only the first helper (or the writer) wins.
 * SEAL(e+1) carries the low 32 bits of e+1; help() reads the slot of that
 * parity like a seqlock (era, start, era: 0 while rewritten) and acts only
 * if its era matches the seal, so what it installs is that change's start
 * (the 2^32 wrap is the ABA gcra.h documents).
 * Order: every TAT value of era e+1 is written by the unseal (release) or
 * by an RMW after it; the decision's acquire load of the TAT therefore sees
 * era e+1 and its slot.  A decision that loaded a TAT of era e and then read
 * era e+1's parameters cannot succeed: its CAS expects a pre-seal value.
 *
 * Why a pre-seal value never comes back (no ABA across eras): A1 is above
 * every value the TAT ever had before the seal.  Decisions only raise the
 * TAT; a cancel lowers it, but first records the value it moves back from
 * in `high` (fetch-max, then the cancel CAS with release; the writer's
 * acquire load of the TAT that reads that cancel's result, or a later one,
 * sees `high`).  So max(A0, high) is the highest value so far, and the writer
 * takes A1 >= max(A0, high) + 1.  After the seal, decisions raise the TAT
 * from A1 and cancels of era e+1 bookings restore values >= A1, while a
 * cancel of an era-e booking expects a value below A1 and fails.
 *
 * Conversion (convert()): with lag = max(A0, now) - now, the permits held
 * are (tau - lag) / T.  Keep that credit, capped at the new burst, in the
 * new units (floor: fewer), unless the bucket is booked past its tolerance
 * (lag > tau), where the booked time is kept and the bucket grows by the new
 * tolerance's extra length.  Then take the later of that and A0 + 1: the
 * TAT never moves back, so a change can only lower the permits held.
 *
 * Readings across a change (gcra.h, READINGS ACROSS A CHANGE).  Each era
 * e has a stamp s_e in its slot: the setter's reading or s_(e-1), the
 * later (so stamps never decrease), and its start is converted at s_e.  A
 * decision of era e at reading r < s_e is judged at y = s_e (an acquire
 * is refused, a booking's slot is at or after y); every admission of era e
 * is thus at a time y >= s_e (a booking's time, y + delay, is later still
 * and its slot starts at or after it, so below "admission at y" covers it
 * with y its time).  Why the stated bound holds, for one interval
 * I = [x, x + t]: let Tm and bM be the smallest T and the largest b of
 * the eras from the first admission in I to the last (CAS order), and
 * write, for a state (A, T, tau) and a time z,
 *     L(z) = max(A, z) - z,  g(L) = (tau - L)/T for L <= tau, else
 *     -(L - tau)/Tm   (decreasing, concave, |slope| <= 1/Tm),
 *     Psi = N + g(L(z)) + (x + t - z)/Tm,   z = max(x, s_e),
 * N the permits admitted in I so far.  Psi starts (just before the first
 * admission in I) at most b + t/Tm <= bM + t/Tm.  An admission in I at
 * y >= z raises max(A, z) by at least n*T (the new TAT is max(A, y) + n*T
 * > z), so g falls by at least n while N grows by n; one outside I never
 * lowers A; a cancel restores both.  After an admission in I at y,
 * L(z) <= y + tau - z, so g(L(z)) >= -(y - z)/Tm >= -(x + t - z)/Tm:
 * Psi >= N.  So N <= bM + t/Tm follows if no change raises Psi.  A change
 * e -> e+1 (TAT A0 -> A1, z0 -> z1 >= z0): with the old state, moving z
 * from z0 to z1 lowers L by at most z1 - z0, so g rises by at most
 * (z1 - z0)/Tm, which the last term pays.  What is left is
 * g1(L1(z1)) <= g0(L0(z1)), the new state holding no more at z1:
 *   - z1 = s: convert() keeps min(credit, the new tau) rounded down, or,
 *     in debt (lag > tau0), the debt lag - tau in ns (A1 >= A0 + tau1 -
 *     tau0); the floor A1 >= A0 + 1 only raises L1.  Either way g1 <= g0.
 *   - s < z1 < A0 (the interval starts after the stamp, and admissions of
 *     era e may lie there: a setter whose reading lags them).  set_burst
 *     (T kept): g0, g1 are one function G of L - tau, and A1 >= A0 +
 *     (tau1 - tau0) when tau1 > tau0, else A1 >= A0 + 1: L1 - tau1 >= L0 -
 *     tau0 at every z, so g1 <= g0.  set_rate raising (T1 < T0, b kept,
 *     so tau1 < tau0): A1 >= A0 + 1, so L1 > L0 and L1 - tau1 > L0 - tau0
 *     at every z, and g1 <= g0 on both branches.  set_rate lowering
 *     (T1 > T0): with credit at s, A1 >= s + (A0 - s) T1/T0 (the credit
 *     kept in the slower units, floor), so at z = s + u (u <= A0 - s),
 *     (L1 - u)/T1 >= (A0 - s)/T0 - u/T1 >= (L0 - u)/T0, the permits
 *     missing from b, new against old; in debt the debt in ns is kept
 *     (A1 >= A0 + tau1 - tau0): both pay it off at the same time, and the
 *     new state then refills more slowly.
 *   - z1 >= A0: every admission so far was at a reading below A0 (each
 *     leaves the TAT above its time; only exact cancels move it back), so
 *     N = 0 and Psi = g1 + t/Tm <= b1 + t/Tm.
 * With leases each admitted permit was booked by a take within V before
 * it, and takes are decisions as above: bM + (t + V)/Tm.  The last case
 * is why the stamp need not be the newest admitted reading (the TAT only
 * bounds those from above, and a stamp past the present would refuse
 * readings that are due): a setter that lags them converts at an older s,
 * which the s < z1 < A0 case covers.  Clamping instead of refusing
 * (d->now_ns = s) would keep the bound on the clamped times but make a
 * caller that sleeps delay_ns from its own reading proceed s - r early.
 *
 * Division: remaining = floor(credit / T) with credit < 2^62 uses
 * recip = ceil(2^(62+s) / T), s = ceil(log2 T) (recip < 2^63).  With
 * recip = 2^(62+s)/T + e, 0 <= e < 1: x*recip/2^(62+s) = x/T + x*e/2^(62+s)
 * and the error term is below 2^62 / 2^(62+s) <= 1/T, so writing
 * x = qT + r (r <= T-1) the product stays below q + 1: the floor is q.
 */
#include <sched.h>
#include <stdlib.h>

#include "sluice/error.h"
#include "sluice/gcra.h"
#include "gcra_step.h"
#include "pair_internal.h"
#include "stripe_internal.h"
#include "util_internal.h"
#include "clock_internal.h"
#include "writer_internal.h"
#include "validate_internal.h"

#define SEAL(e) (SLUICE__GCRA_SEAL_MIN + ((e) & SLUICE__GCRA_SEAL_MASK))
/* How long set_rate/set_burst wait for another one to finish. */
#define WRITER_WAIT_NS SLUICE_GCRA_WRITER_WAIT_NS

/* A validated parameter set, before it is published in a slot. */
struct params {
	uint64_t interval, tau, burst, recip, shift, stamp;
};

void sluice_gcra_destroy(sluice_gcra_t *g)
{
	if (!g)
		return;
	free(g->cells); /* NULL without leases */
	g->cells = NULL;
}

/* T from rate per period: whole ns, rounded up, rounding bounded. */
static int make_interval(uint64_t rate, uint64_t period, struct params *p)
{
	return sluice__gcra_interval(rate, period, &p->interval, &p->recip, &p->shift);
}

static int make_burst(uint64_t burst, struct params *p)
{
	int rc = sluice__gcra_tau(burst, p->interval, &p->tau);
	if (rc != 0)
		return rc;
	p->burst = burst;
	return 0;
}

/*
 * Release stores: a reader whose acquire load returns one of these values
 * also sees everything the writer did before (the slot's era = 0, the
 * previous change's seal and unseal), so a decision that read a rewritten
 * slot fails its CAS.  The seal's release then publishes the whole slot.
 */
static void store_params(struct sluice__gcra_params *s, const struct params *p, uint32_t lease)
{
	atomic_store_explicit(&s->interval, p->interval, memory_order_release);
	atomic_store_explicit(&s->tau, p->tau, memory_order_release);
	atomic_store_explicit(&s->burst, p->burst, memory_order_release);
	/* the inline admission's one compare for n and leases (gcra.h) */
	atomic_store_explicit(&s->gate, lease ? 0 : p->burst, memory_order_release);
	atomic_store_explicit(&s->recip, p->recip, memory_order_release);
	atomic_store_explicit(&s->shift, p->shift, memory_order_release);
	atomic_store_explicit(&s->stamp, p->stamp, memory_order_release);
}

/* Acquire loads: pair with store_params() (see there). */
static void load_params(struct sluice__gcra_params *s, struct params *p)
{
	p->interval = atomic_load_explicit(&s->interval, memory_order_acquire);
	p->tau = atomic_load_explicit(&s->tau, memory_order_acquire);
	p->burst = atomic_load_explicit(&s->burst, memory_order_acquire);
	p->recip = atomic_load_explicit(&s->recip, memory_order_acquire);
	p->shift = atomic_load_explicit(&s->shift, memory_order_acquire);
	p->stamp = atomic_load_explicit(&s->stamp, memory_order_acquire);
}

/*
 * A bucket smaller than one clock step (tau < resolution) caps the rate at
 * b per step, below the configured one: refuse it rather than clamp.
 */
static int check_resolution(const sluice_clock_t *clock, const struct params *p, int booking,
                            sluice__step_use_t use)
{
	if (!booking && sluice__step(clock, p->tau, use) != 0)
		return SLUICE_ERESOLUTION;
	return 0;
}

/* With leases a cell keeps its take's TAT as 47 bits beside its count
 * (gcra.h, SLUICE_GCRA_LEASE_SPAN_MAX): a longer tolerance is refused. */
static int check_lease_span(uint32_t lease, const struct params *p, int rc)
{
	return lease && p->tau > SLUICE_GCRA_LEASE_SPAN_MAX ? rc : 0;
}

/* The one validator of init and config_check (clock_internal.h): 0 with
 * the clock and the derived parameters, or init's code. */
static int validate(const sluice_gcra_config_t *cfg, int booking, sluice__step_use_t use,
                    const sluice_clock_t **clock, struct params *p)
{
	if (!cfg)
		return SLUICE_EINVAL;
	*clock = sluice__config_clock(cfg->clock);
	if (!*clock)
		return SLUICE_ECLOCK;
	*p = (struct params){ .stamp = 0 };
	int rc = make_interval(cfg->rate, cfg->period_ns, p);
	if (rc == 0)
		rc = make_burst(cfg->burst, p);
	if (rc == 0)
		rc = check_resolution(*clock, p, booking, use);
	if (rc == 0 && (cfg->lease > SLUICE_GCRA_LEASE_MAX || cfg->lease_ns > SLUICE_GCRA_LEASE_NS_MAX ||
	                (cfg->lease && booking)))
		rc = SLUICE_ELEASE; /* bookings are never leased: a lease is "now" */
	if (rc == 0)
		rc = check_lease_span(cfg->lease, p, SLUICE_EBURST);
	return rc;
}

int sluice__gcra_validate_config(const sluice_gcra_config_t *cfg, sluice__step_use_t use)
{
	const sluice_clock_t *clock;
	struct params p;
	return validate(cfg, 0, use, &clock, &p);
}

int sluice_gcra_config_check(const sluice_gcra_config_t *cfg)
{
	return sluice__gcra_validate_config(cfg, SLUICE__ASK);
}

static int init(sluice_gcra_t *g, const sluice_gcra_config_t *cfg, int booking)
{
	if (!g)
		return SLUICE_EINVAL;
	const sluice_clock_t *clock;
	struct params p;
	int rc = validate(cfg, booking, SLUICE__RECORD, &clock, &p);
	if (rc != 0)
		return rc; /* nothing written yet */
	struct sluice_gcra_cell *cells = NULL;
	uint32_t ncells = 0; /* one per possible CPU, as a stripe's */
	if (cfg->lease) {
		cells = sluice__stripe_alloc(sizeof(*cells), &ncells, &rc);
		if (!cells)
			return rc; /* SLUICE_ECELLS or SLUICE_ENOMEM; @g untouched */
		for (uint32_t i = 0; i < ncells; i++) {
			atomic_init(&cells[i].stamp, 0);
			atomic_init(&cells[i].held, 0); /* no permits: never spent */
		}
	}

	g->clock = clock;
	g->booking = (uint32_t)booking;
	g->lease = cfg->lease;
	g->cells = cells;
	g->cell_mask = cells ? ncells - 1 : 0;
	g->cell_shift = cells ? (uint32_t)__builtin_ctz(ncells) + 1 : 0;
	g->lease_ns = !cfg->lease ? 0 : cfg->lease_ns ? cfg->lease_ns : SLUICE_GCRA_LEASE_NS_DEFAULT;
	/* Era 1 is in force (slot 1); slot 0 is empty, era 0 marks it so. */
	atomic_init(&g->era, 1);
	atomic_init(&g->high, 0);
	atomic_init(&g->writer, 0);
	struct params none = { 0 };
	for (int i = 0; i < 2; i++) {
		atomic_init(&g->params[i].era, (uint64_t)i);
		atomic_init(&g->start[i], 0);
		store_params(&g->params[i], i ? &p : &none, cfg->lease);
	}
	/* TAT 0: the bucket is full at every time. */
	atomic_init(&g->tat, 0);
	atomic_init(&g->seal_era, 0);
	return 0;
}

int sluice_gcra_init(sluice_gcra_t *g, const sluice_gcra_config_t *cfg)
{
	return init(g, cfg, 0);
}

int sluice__gcra_init_booking(sluice_gcra_t *g, const sluice_gcra_config_t *cfg)
{
	return init(g, cfg, 1);
}

/*
 * A decision found the TAT sealed (@seal): finish the reconfiguration with
 * what the writer stored before sealing.  Read the slot like a seqlock: its
 * `era` is written last before the seal and is 0 while the slot is being
 * rewritten, so a helper that was stalled until a later reconfiguration
 * reuses the slot sees a mismatch and gives up (its caller reloads the TAT).
 */
static void help(sluice_gcra_t *g, uint64_t seal)
{
	uint64_t lo = seal - SLUICE__GCRA_SEAL_MIN;
	struct sluice__gcra_params *s = &g->params[lo & 1];
	/* Acquire loads keep the three reads in order: era, start, era. */
	uint64_t e1 = atomic_load_explicit(&s->era, memory_order_acquire);
	uint64_t start = atomic_load_explicit(&g->start[lo & 1], memory_order_acquire);
	uint64_t e2 = atomic_load_explicit(&s->era, memory_order_acquire);
	if (e1 != e2 || e1 == 0 || ((e1 ^ lo) & SLUICE__GCRA_SEAL_MASK) != 0)
		return;
	/* acq_rel: the flip publishes the slot (which we saw through the
	 * seal's release) to decisions that load `era` after the TAT. */
	uint64_t prev = e1 - 1;
	atomic_compare_exchange_strong_explicit(&g->era, &prev, e1, memory_order_acq_rel,
	                                        memory_order_acquire);
	/* Pair CAS of (tat, seal_era): the seal must be e1's in full, not
	 * only in its low 32 bits, or a helper stalled across 2^32 changes
	 * would install an old change's start.  A full barrier: the release
	 * every later TAT value of era e1 carries the flip by. */
	sluice__pair_cas(&g->tat, seal, e1, start, e1);
}

/*
 * The slow path: a seal (help, then decide), n = 0, n > b.  The b that
 * makes n "never" must be the b of one consistent state: read it like the
 * fast path (TAT, era, slot) and confirm the TAT did not move.
 */
int sluice_inline_gcra_take_slow(sluice_gcra_t *g, uint64_t n, uint64_t now, uint64_t max_delay,
                           sluice_decision_t *d)
{
	if (!g || n == 0)
		return SLUICE_EINVAL;
	for (;;) {
		uint64_t a = atomic_load_explicit(&g->tat, memory_order_acquire);
		if (a > SLUICE_GCRA_TIME_MAX) {
			help(g, a);
			continue;
		}
		/* Acquire: pairs with the era flip, as in sluice__gcra_try(). */
		uint64_t e = atomic_load_explicit(&g->era, memory_order_acquire);
		uint64_t burst = atomic_load_explicit(&g->params[e & 1].burst, memory_order_acquire);
		if (atomic_load_explicit(&g->tat, memory_order_acquire) != a)
			continue;
		if (n > burst) {
			sluice__decision_never(d, burst, now);
			return SLUICE_ETOOBIG;
		}
		int rc = sluice__gcra_try(g, n, now, max_delay, d);
		if (rc != SLUICE__GCRA_SLOW)
			return rc;
		/* sealed again, or b changed under us: look again */
	}
}

/*
 * Leases (config.lease = B > 0; gcra.h, LEASES).
 *
 * A cell is a 16-byte pair (stamp, held): the reading t0 of the take that
 * filled it, and (left - t0) << 17 | count, where left is the TAT that take
 * left and count what is still unspent.  Invariant: every permit in a cell
 * was booked in the TAT, at t0, by the CAS of the take that deposited it,
 * and is spent only by a decision whose reading s has t0 <= s <= t0 + V.
 * So every admission at s maps to its own booked slot at a time in
 * [s - V, s], and GCRA's bound on bookings, b + t/T over any interval,
 * becomes b + (t + V)/T over admissions.
 *
 * Who writes what.  A deposit writes the pair whole, with a double-width
 * CAS from the value its taker read, and only when its reading is at or
 * after the stamp it replaces: so in the cell's modification order the
 * stamps never decrease (the stamp is the cell's generation, 64 bits: it
 * does not wrap).  A spend writes `held` alone, with a single-width CAS on
 * this CPU's own line (sluice__gcra_lease_spend(), gcra.h): read stamp s0
 * (acquire), read held, check count >= n and s0 <= now <= s0 + V, CAS held
 * -> held - n, read stamp s1, and admit only if s1 <= now.
 *
 * Why that keeps the invariant, with no tag on the word.  s0 is the stamp
 * of some deposit D0, and held was read after it, so the CAS lands on the
 * word of D0 or of a later deposit D (a CAS that finds the same value
 * after any number of leases, the ABA case, lands on the latest).  The
 * stamps never decrease: t0(D) >= s0 >= now - V.  The CAS read D's word
 * (or a spend's since), so s1 is D's stamp or a later one: t0(D) <= s1.
 * Hence s1 <= now gives t0(D) <= now, and the permit is D's, booked within
 * [now - V, now], whichever lease D is.  When s1 > now (another thread of
 * this CPU deposited between the CAS and the check, or this reading is
 * older than the newest take's) the spend cannot prove it: it refuses,
 * and the n it took are lost (UNDER-ADMISSION in gcra.h).  A stalled
 * spender blocks no one: it holds nothing, and its CAS fails on any
 * change or lands as above.
 *
 * A take is the one CAS GCRA always makes, booking n + extra (gcra_step.h:
 * extra shrinks with the room left, so near the limit takes are exact),
 * then a deposit: a pair CAS from the value the taker saw, which was short
 * (count < n) or expired, and stamped at or before the take's reading (a
 * take whose reading is older than the cell's stamp leases nothing, so
 * the stamps stay ordered).  What that value still held is lost (fewer
 * than n, or an expired lease).  If the cell changed meanwhile (another
 * thread of this CPU, a migration), the extra goes back to the TAT while
 * nothing was booked after it (unbook(), exact) and is lost otherwise: at
 * most B.
 */

static int unbook(sluice_gcra_t *g, uint64_t left, uint64_t prev);

/* Tries at the TAT's CAS on a take before it decides as without leases
 * (sluice__gcra_try(), whose loop is GCRA's own). */
#define TAKE_TRIES 4

/* A pair of @cell that @now may spend @n of: its count and its window. */
static int lease_fits(const sluice_gcra_t *g, uint64_t stamp, uint64_t held, uint64_t n,
                      uint64_t now)
{
	/* unsigned: a reading before the take (s < t0) wraps and fails */
	return (held & SLUICE__GCRA_HELD_COUNT) >= n && now - stamp <= g->lease_ns;
}

/* The calling CPU's live lease, at most @burst: what available() adds. */
static uint64_t lease_live(sluice_gcra_t *g, uint64_t now, uint64_t burst)
{
	if (!g->cells)
		return 0;
	struct sluice_gcra_cell *cell = &g->cells[sluice__stripe_pick(g->cell_mask)];
	uint64_t stamp = atomic_load_explicit(&cell->stamp, memory_order_relaxed);
	uint64_t held = atomic_load_explicit(&cell->held, memory_order_relaxed);
	if (!lease_fits(g, stamp, held, 1, now))
		return 0;
	uint64_t c = held & SLUICE__GCRA_HELD_COUNT;
	return c < burst ? c : burst;
}

/* Deposit @extra permits booked at @now (the take left TAT @next, T the
 * interval it booked with) into @cell, whose pair was (@stamp, @held),
 * stamp <= now (the take checked). */
static void lease_deposit(sluice_gcra_t *g, struct sluice_gcra_cell *cell, uint64_t stamp,
                          uint64_t held, uint64_t now, uint64_t next, uint64_t extra,
                          uint64_t T)
{
	/* next - now <= tau <= SLUICE_GCRA_LEASE_SPAN_MAX: fits 47 bits */
	uint64_t fresh = ((next - now) << SLUICE__GCRA_HELD_BITS) | extra;
	/* Full barrier: the release a spend's acquire load of the stamp
	 * pairs with.  It expects the pair the taker read, so it replaces
	 * a stamp <= now: the cell's stamps never decrease. */
	if (sluice__pair_cas(&cell->stamp, stamp, held, now, fresh))
		return;
	/* Lost the cell to another decision: give the extra back to the
	 * TAT while nothing was booked after this take, else lose it. */
	(void)unbook(g, next, next - extra * T);
}

int sluice_inline_gcra_lease_take(sluice_gcra_t *g, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	struct sluice_gcra_cell *cell = &g->cells[sluice__stripe_pick(g->cell_mask)];
	/* Relaxed: the deposit's pair CAS checks both values. */
	uint64_t stamp = atomic_load_explicit(&cell->stamp, memory_order_relaxed);
	uint64_t held = atomic_load_explicit(&cell->held, memory_order_relaxed);
	/* A lease only into a cell that was short or expired (never replace
	 * one that still holds n: the spend came here by losing its CAS
	 * SLUICE__GCRA_SPEND_TRIES times), and only at a reading at or after
	 * its stamp (the stamps never decrease, see above). */
	int lease = n != 0 && !lease_fits(g, stamp, held, n, now) && now >= stamp;
	for (int i = 0; n != 0 && i < TAKE_TRIES; i++) {
		uint64_t a = atomic_load_explicit(&g->tat, memory_order_acquire);
		if (SLUICE_UNLIKELY(a > SLUICE_GCRA_TIME_MAX))
			break; /* sealed: the general path helps */
		/* Acquire: pairs with the era flip, as in sluice__gcra_try()
		 * (which this mirrors, with the extra booked in the same CAS). */
		const struct sluice__gcra_params *p =
			&g->params[atomic_load_explicit(&g->era, memory_order_acquire) & 1];
		uint64_t T = atomic_load_explicit(&p->interval, memory_order_acquire);
		uint64_t tau = atomic_load_explicit(&p->tau, memory_order_acquire);
		uint64_t burst = atomic_load_explicit(&p->burst, memory_order_acquire);
		uint64_t recip = atomic_load_explicit(&p->recip, memory_order_acquire);
		uint64_t shift = atomic_load_explicit(&p->shift, memory_order_acquire);
		if (n > burst)
			break; /* the general path decides (ETOOBIG) */
		if (now < atomic_load_explicit(&p->stamp, memory_order_acquire))
			break; /* older than the change: the general path refuses */
		uint64_t tat;
		uint64_t delay = sluice__gcra_step(a, n * T, now, tau, SLUICE_GCRA_TIME_MAX, &tat);
		if (delay != 0) {
			/* Refused from reads, as sluice__gcra_try() refuses: if
			 * the TAT moved, (a, p) may not have been one state;
			 * decide again on the fresh one. */
			if (atomic_load_explicit(&g->tat, memory_order_acquire) != a)
				continue;
			if (d) /* delay: the exact wait, or SLUICE_NEVER */
				sluice__gcra_fill(d, 0, burst, tau, recip, shift, now, a, delay);
			return 0;
		}
		uint64_t extra = 0;
		if (lease)
			extra = sluice__gcra_lease_extra(tat, now, tau, recip, shift, g->lease,
			                                 g->cell_shift, SLUICE_GCRA_TIME_MAX);
		uint64_t next = tat + extra * T; /* extra*T <= credit left */
		/* Acquire, as sluice__gcra_try()'s CAS. */
		if (atomic_compare_exchange_strong_explicit(&g->tat, &a, next, memory_order_acquire,
		                                            memory_order_acquire)) {
			if (extra)
				lease_deposit(g, cell, stamp, held, now, next, extra, T);
			if (d)
				sluice__gcra_fill(d, 1, burst, tau, recip, shift, now, next, 0);
			return 1;
		}
	}
	/* Without a lease: a seal, n = 0 or above b, or a TAT that kept
	 * moving. */
	int rc = sluice__gcra_try(g, n, now, 0, d);
	if (SLUICE_UNLIKELY(rc == SLUICE__GCRA_SLOW))
		rc = sluice_inline_gcra_take_slow(g, n, now, 0, d);
	return rc;
}

/* Fetch-max on `high` (cancels only; relaxed: ordered by the cancel's
 * release CAS that follows it). */
static void raise_high(sluice_gcra_t *g, uint64_t v)
{
	uint64_t h = atomic_load_explicit(&g->high, memory_order_relaxed);
	while (h < v && !atomic_compare_exchange_weak_explicit(&g->high, &h, v, memory_order_relaxed,
	                                                       memory_order_relaxed))
		;
}

/*
 * Move the TAT back from @left (the TAT a booking left) to @prev, only if
 * it is still @left: the one copy of a give-back (cancel, and a lease whose
 * deposit lost a race).  0, or SLUICE_ECANCEL when the TAT moved.
 */
static int unbook(sluice_gcra_t *g, uint64_t left, uint64_t prev)
{
	uint64_t a = left;
	raise_high(g, left);
	/* Strong: a spurious failure would turn an exact cancel into a kept
	 * one.  Release: a reconfiguration that sees the lowered TAT sees
	 * `high` (see DESIGN). */
	if (atomic_compare_exchange_strong_explicit(&g->tat, &a, prev, memory_order_release,
	                                            memory_order_relaxed))
		return 0;
	return SLUICE_ECANCEL;
}

int sluice_gcra_cancel(sluice_gcra_t *g, uint64_t n, const sluice_decision_t *booked)
{
	if (!g || !booked || n == 0 || !booked->allowed)
		return SLUICE_EINVAL;
	/* Every booking leaves TAT > its time (n*T >= 1 ns), so reset_ns is
	 * at least 1; 0 marks a spend from a lease whose take's TAT has
	 * passed: nothing names its permits any more (gcra.h, LEASES). */
	if (booked->reset_ns == 0)
		return SLUICE_ECANCEL;
	if (booked->reset_ns > SLUICE_GCRA_TIME_MAX ||
	    booked->now_ns > SLUICE_GCRA_TIME_MAX - booked->reset_ns)
		return SLUICE_EINVAL; /* no booking leaves such a TAT */
	uint64_t left = booked->now_ns + booked->reset_ns; /* the TAT it left */
	uint64_t a = atomic_load_explicit(&g->tat, memory_order_acquire);
	if (a != left)
		return SLUICE_ECANCEL; /* booked after it (or reconfigured, or sealed) */
	/* The TAT is the one this booking left, so its era is in force and
	 * its slot stable; a seal after this load makes the CAS below fail. */
	/* Acquire: pairs with the era flip (sluice__gcra_try()'s note): an
	 * era read here that is newer than the TAT's has its seal ordered
	 * before the CAS below, which then fails. */
	uint64_t e = atomic_load_explicit(&g->era, memory_order_acquire);
	uint64_t T = atomic_load_explicit(&g->params[e & 1].interval, memory_order_acquire);
	uint64_t burst = atomic_load_explicit(&g->params[e & 1].burst, memory_order_acquire);
	uint64_t prev;
	if (n > burst || !sluice__gcra_unstep(left, n * T, 0, &prev)) {
		/* More than one booking can take, unless (T, b) were read
		 * after a reconfiguration that has already moved the TAT. */
		if (atomic_load_explicit(&g->tat, memory_order_relaxed) != left)
			return SLUICE_ECANCEL;
		return SLUICE_EINVAL;
	}
	return unbook(g, left, prev);
}

int sluice_gcra_refund(sluice_gcra_t *g, uint64_t n, const sluice_decision_t *admitted)
{
	return sluice_gcra_cancel(g, n, admitted);
}

uint64_t sluice_gcra_available_at(sluice_gcra_t *g, uint64_t now)
{
	for (;;) {
		uint64_t a = atomic_load_explicit(&g->tat, memory_order_acquire);
		if (a > SLUICE_GCRA_TIME_MAX) {
			help(g, a);
			continue;
		}
		struct params p;
		/* Acquire: pairs with the era flip; the TAT reload below then
		 * confirms (a, p) were one state. */
		load_params(&g->params[atomic_load_explicit(&g->era, memory_order_acquire) & 1], &p);
		if (atomic_load_explicit(&g->tat, memory_order_acquire) != a)
			continue; /* (a, p) may not be one state */
		sluice_decision_t d;
		sluice__gcra_fill(&d, 0, p.burst, p.tau, p.recip, p.shift, now, a, 0);
		if (now < p.stamp)
			d.remaining = 0; /* older than the change: nothing passes */
		uint64_t own = lease_live(g, now, p.burst);
		return own > d.remaining ? own : d.remaining;
	}
}

uint64_t sluice_gcra_available(sluice_gcra_t *g)
{
	return sluice_gcra_available_at(g, sluice_clock_now(g->clock));
}

/*
 * The TAT of the new era for the TAT @a0 of the old one, at @now, before
 * the "never back" and "above every old value" floors (see DESIGN).
 */
static sluice__u128 convert(uint64_t a0, uint64_t now, const struct params *o,
                            const struct params *p)
{
	uint64_t base = a0 > now ? a0 : now;
	uint64_t lag = base - now;
	if (lag > o->tau) /* booked past the tolerance: keep the booked time */
		return (sluice__u128)a0 + (p->tau > o->tau ? p->tau - o->tau : 0);
	/* credit held, in old ns, converted to new ns (floor: fewer), at
	 * most the new burst */
	uint64_t kept = sluice__gcra_kept(o->tau - lag, o->interval, p->interval, p->tau);
	return (sluice__u128)now + (p->tau - kept);
}

static int reconfigure(sluice_gcra_t *g, uint64_t rate, uint64_t period, uint64_t burst,
                       int which, uint64_t now)
{
	/* The previous change's era flip and unseal happen before everything
	 * below (the flag's acquire).  Decisions never wait for the flag
	 * (they help a sealed change instead). */
	if (sluice__writer_take(&g->writer, WRITER_WAIT_NS) != 0)
		return SLUICE_ETIMEDOUT;
	uint64_t e = atomic_load_explicit(&g->era, memory_order_relaxed);
	struct sluice__gcra_params *cur = &g->params[e & 1], *next = &g->params[(e + 1) & 1];
	struct params o, p;
	load_params(cur, &o);
	int rc;
	if (which == 0) { /* set_rate: keep b */
		rc = make_interval(rate, period, &p);
		if (rc == 0 && make_burst(o.burst, &p) != 0)
			rc = SLUICE_ERATE; /* this T makes the current b too long */
	} else { /* set_burst: keep the rate */
		p = o;
		rc = make_burst(burst, &p);
	}
	if (rc == 0)
		rc = check_resolution(g->clock, &p, (int)g->booking, SLUICE__RECORD);
	if (rc == 0)
		rc = check_lease_span(g->lease, &p, which == 0 ? SLUICE_ERATE : SLUICE_EBURST);
	if (rc != 0) {
		sluice__writer_drop(&g->writer);
		return rc;
	}
	/* The stamp: the setter's reading, never before the previous one's
	 * (DESIGN, "Readings across a change"); the conversion is made at it. */
	p.stamp = now > o.stamp ? now : o.stamp;

	/* 1. Rewrite the spare slot.  era = 0 first, then release stores: a
	 * decision or helper still reading this slot (era e-1's) that sees any
	 * of the new values sees era = 0 and the era-e seal too, and fails. */
	atomic_store_explicit(&next->era, 0, memory_order_relaxed);
	store_params(next, &p, g->lease);

	/* 2. Seal. */
	uint64_t a0 = atomic_load_explicit(&g->tat, memory_order_acquire), a1;
	for (;;) {
		/* Never sealed here: only writers seal, and the previous one
		 * returned after its unseal (or a helper's). */
		uint64_t high = atomic_load_explicit(&g->high, memory_order_relaxed);
		sluice__u128 c = convert(a0, p.stamp, &o, &p);
		uint64_t floor = (a0 > high ? a0 : high);
		if (floor < SLUICE_GCRA_TIME_MAX)
			floor++; /* strictly above every old value */
		if (c < floor)
			c = floor;
		if (c > SLUICE_GCRA_TIME_MAX)
			c = SLUICE_GCRA_TIME_MAX; /* nothing passes any more: safe */
		a1 = (uint64_t)c;
		atomic_store_explicit(&g->start[(e + 1) & 1], a1, memory_order_relaxed);
		atomic_store_explicit(&next->era, e + 1, memory_order_relaxed);
		/* Pair CAS (full barrier): releases the slot to helpers (they
		 * load the seal with acquire) and names the seal's full era
		 * beside it.  seal_era is written only here and by unseals,
		 * which leave it as it is, under the writer flag: stable. */
		uint64_t se = atomic_load_explicit(&g->seal_era, memory_order_relaxed);
		if (sluice__pair_cas(&g->tat, a0, se, SEAL(e + 1), e + 1))
			break;
		/* acquire: reloads a0 with the ordering the cancel's `high`
		 * needs */
		a0 = atomic_load_explicit(&g->tat, memory_order_acquire);
	}

	/* 3. Flip the era, unseal (a helper may have done either already). */
	uint64_t prev = e;
	atomic_compare_exchange_strong_explicit(&g->era, &prev, e + 1, memory_order_acq_rel,
	                                        memory_order_acquire);
	sluice__pair_cas(&g->tat, SEAL(e + 1), e + 1, a1, e + 1);
	/* Release: the next writer starts after this change is complete. */
	sluice__writer_drop(&g->writer);
	return 0;
}

int sluice_gcra_set_rate_at(sluice_gcra_t *g, uint64_t rate, uint64_t period_ns, uint64_t now)
{
	if (!g)
		return SLUICE_EINVAL;
	return reconfigure(g, rate, period_ns, 0, 0, now);
}

int sluice_gcra_set_rate(sluice_gcra_t *g, uint64_t rate, uint64_t period_ns)
{
	if (!g)
		return SLUICE_EINVAL;
	return reconfigure(g, rate, period_ns, 0, 0, sluice_clock_now(g->clock));
}

int sluice_gcra_set_burst_at(sluice_gcra_t *g, uint64_t burst, uint64_t now)
{
	if (!g)
		return SLUICE_EINVAL;
	return reconfigure(g, 0, 0, burst, 1, now);
}

int sluice_gcra_set_burst(sluice_gcra_t *g, uint64_t burst)
{
	if (!g)
		return SLUICE_EINVAL;
	return reconfigure(g, 0, 0, burst, 1, sluice_clock_now(g->clock));
}
