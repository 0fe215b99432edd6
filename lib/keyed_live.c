/* SPDX-License-Identifier: MIT */
/*
 * keyed_live.c - a keyed table's live parameters: the block every decision
 * reads, the setters (sluice_keyed_set_rate/_burst/_limit) that change it
 * while the table is in use by any number of processes, and what a change
 * means for the state every key already holds.
 *
 * DESIGN
 *
 * Where the parameters live.  In the table, after the header (keyed_
 * internal.h, struct sluice__keyed_live), not in each process: a change by
 * any attached process is seen by every other at its next decision, so the
 * processes of one table can never disagree on its limits (the nginx
 * reload case: every worker switches at once, the state is kept).  Attach
 * therefore takes no rate: it reads the ones in force.
 *
 * Reading them consistently (the latch).  ctl[1] is the era; blk[era & 1]
 * holds its parameters.  A setter writes blk[(era + 1) & 1], the block no
 * decision of the era in force reads, then publishes era + 1 with a pair
 * CAS on ctl (a full barrier: the release of the block's values).  A
 * decision loads the era, the block's values and the key's state (all
 * acquire), then the era again (kp_load, kp_same): if it moved, it starts
 * over.  A block is rewritten only two eras later, after its era stopped
 * being in force, and the rewriting setter's field CASes come after its
 * lock CAS read the era before it: a decision that read any rewritten
 * value sees that era or a later one on its second load.  So every decision
 * uses one era's parameters, in full, never a torn mix; it never waits for
 * a setter (a stopped setter leaves ctl[1] still, and decisions go on with
 * the era in force).
 *
 * Setters.  One at a time, by a lock in ctl[0] (ticket:49 | held:1 |
 * stamp:14), taken with a pair CAS that also reads the era.  A holder
 * stopped for more than SLUICE_KEYED_LEASE_MS (coarse clock, as claims)
 * has its lock stolen with a new ticket; so a setter waits at most about
 * the lease, then steals: nothing a stopped or killed process does blocks
 * other changes for longer.  A stolen holder, resumed, can do no harm:
 * each field write is a pair CAS (value, ticket) that fails once a newer
 * ticket wrote the field, and the publication is a pair CAS expecting its
 * own lock word, which the steal changed.  A block in force was written
 * entirely by the ticket that published it, so no older ticket writes
 * into it.  Tickets are 49 bits: 5.6 * 10^14 lock acquisitions before one
 * repeats.
 *
 * What a change means for counted state (the rule of gcra.h's SET_RATE /
 * SET_BURST and of the standalone windows: never more permits than before,
 * no fresh burst), per algorithm:
 *
 * GCRA, LEAKY.  A change from (T0, tau0) to (T1, tau1) (tau = b T;
 * LEAKY: b = D + 1), stamped tc, leaves each key's bucket, at tc, holding
 * the FEWER of (a) the permits it held just before, (tau0 - d) / T0 with
 * d its debt max(0, TAT - tc), capped at b1, and (b) what the new
 * parameters give for the unchanged TAT, (tau1 - d) / T1; then it refills
 * at the new rate.  As in gcra.h: raising the rate or lowering the burst
 * keeps the TAT; lowering the rate or raising the burst keeps the permits
 * held (a full bucket keeps b0 of the new b1 and gets the rest at the new
 * rate).  Keys are not rewritten by the setter (a table can hold 2^32):
 * each live state word carries its era's parity in bit 62, and a decision
 * of era e that meets a state of parity e - 1 (or, see "Two eras", a TAT
 * below tc) reads it through sluice__keyed_gcra_convert(), which is that
 * rule taken at tc, so the answer does not depend on when the key is next
 * used.  The converted TAT is never below the old one, and an admission
 * writes more than it, so a state word never repeats a value (no ABA for
 * a decision stalled across changes).  A refusal writes nothing; an
 * admission writes the converted TAT plus its cost with era e's parity.
 * Decisions read the time as max(reading, tc).
 *
 * Debt.  (a) can be negative: a key decided at readings after tc (the
 * stamp lags them, below) can owe d > tau0 at tc.  It then holds
 * -(d - tau0) / T0 permits, and keeps owing them: (a)'s debt is tau1 +
 * (d - tau0) T1 / T0, rounded up (sluice__keyed_gcra_owed()).  Clamping
 * the credit at 0, as this file once did, forgot that debt: a key emptied
 * at x and a change stamped x - 30 us got 30 us of permits back (issue 22,
 * finding 2: up to b1 - b0 for a burst raise, past max(b) + t/min(T) for a
 * rate lowering).
 *
 * A lagging stamp, per key.  Let r be the newest reading decided on a key
 * with the old parameters, x its TAT when the change is published.  Then
 * r <= x: an admission at r writes TAT >= r + T0, a refusal at r needs x
 * - r > tau0 - n T0 >= 0, an initialisation at r writes TAT >= r, and
 * TATs only grow (a refund takes back at most what an admission added).
 * Claim: the conversion at tc is, for every s in [tc, max(tc, x)], no more
 * permissive than the conversion at s followed by nothing (TAT y_tc >=
 * y_s).  (b): s + (x - s) = x = tc + (x - tc), equal.  (a) (uncapped):
 * y_s - y_tc = (s - tc)(1 - T1 / T0), which is <= 0 for a rate lowering
 * (T1 > T0), 0 for a burst change (T1 = T0), and for a rate raise (b)
 * decides both (tau1 - p T1 <= d there: the TAT is kept); capped at b1
 * (a burst lowering) (b) decides both too.  Take s = max(tc, r): the key
 * is converted no more permissively than at its own newest reading, so
 * the time [tc, r] that the old parameters already counted is credited
 * nothing at the new ones.  A decision of the new era with a reading t in
 * [tc, s) meets a TAT >= y_tc >= x >= s > t: it writes max(TAT, t) + nT1
 * = max(TAT, s) + nT1, the TAT a decision at s writes, after a stricter
 * test; one before tc is read as at tc.  So every decision of the new era
 * is dominated by one at max(reading, s), and keyed.h's bound follows
 * with the change in force for the key from s.
 *
 * The newest reading.  hw (keyed_internal.h) is raised by every GCRA or
 * LEAKY decision and creation whose reading passes it, to that reading +
 * HW_SLACK, before it loads the era (hw_note(); seq_cst); the setter
 * stamps tc = max(now, hw - HW_SLACK), a reading some call made (hw -
 * HW_SLACK never passes one), notes tc in hw, publishes, and then loads
 * hw (seq_cst) as pt, the era's newest reading.  A call whose era load saw
 * era e - 1 noted its reading before that load, and the setter of era e
 * loads hw after its publication: in the single order of seq_cst
 * operations the call's note (or the note it read) comes before its era
 * load, which comes before the publication (it saw the era before), which
 * comes before the setter's load, so pt >= every reading of era e - 1.
 * The stamp lags the newest reading by less than HW_SLACK plus the
 * setter's own run: the per-key argument above makes that lag harmless,
 * the stamp only makes it small.  The plain setters read their clock
 * again once they hold the lock, so their own lag is the run from there
 * to the publication (a stop there longer than the lease loses the lock
 * and publishes nothing).
 *
 * Jumps.  A reading more than HW_TRUST (1.07 s) past the stamp is taken
 * as a forward clock jump (a caller on another timeline, a bad reading):
 * it does not raise the stamp (the table's time would jump to it for
 * every key: each one's bucket full at once), and pt is capped at tc +
 * HW_TRUST (else no later change could be made until the clock reached
 * it).  The per-key argument needs no stamp, so such a key is converted
 * as exactly as any; only "Two eras" no longer covers it: the second
 * change after may read its state as its own.  That TAT is at least the
 * jumped reading, so nothing is admitted for the key until the clock
 * comes within that change's tau of it.
 *
 * Two eras.  One parity bit tells only two eras apart: era e + 1 reads a
 * state of era e - 1 as its own unless the TAT is below its stamp.  So a
 * setter refuses (SLUICE_EBUSY, nothing changed) era e + 1 unless its
 * stamp is past Q = max(pt + tau_{e-1}, tc_e + tau_e + owed(pt - tc_e))
 * (sluice__keyed_gcra_quiet()).  Every state era e - 1 wrote is a TAT x
 * <= pt + tau_{e-1}: an admission at reading r <= pt writes at most
 * max(r, tc_{e-1}) + tau_{e-1}, an initialisation at most max(r, floor,
 * tc_{e-1}) + lift_{e-1} with floors and stamps readings (<= pt) and the
 * lift (b1 - b0) T1 <= tau_{e-1}.  Era e converts x, with d = x - tc_e <=
 * (pt - tc_e) + tau_{e-1}, to at most Q (Debt: d past tau_{e-1} owes at
 * most owed(pt - tc_e) more).  A stamp past Q therefore finds every such
 * state a full bucket of era e, and reads it so (a TAT below tc is
 * converted as a full bucket), whatever its parity says.  If era e's pt
 * was not recorded (its setter stopped or died after publishing), the
 * next setter records hw, which covers it.
 *
 * Burst raises and new keys.  New keys start at max(now, floor, tc), and
 * in an era that raised the burst at max(floor, tc) + lift (F_LIFT = (b1 -
 * b0) T1) if that is later: a key reclaimed fresh at the floor's reading
 * held at most b0 there (as of the era before, or b1 - lift if reclaimed
 * in this era: fewer), so it does not come back with the raised burst at
 * once either.  (The setter once raised every group's floor before
 * publishing instead; a reclaim of the era before could then write a
 * later floor after it, and the key came back with b1.)
 *
 * Hostile blocks.  The block is shared memory: a decision refuses one
 * whose T, tau and largest n are not what a setter writes (kp_gcra_ok();
 * issue 22, R7: T = 0 or tau = 2^61 admitted every request); the
 * conversion's T0, tau0 and the lift only ever saturate (owed() of T0 = 0
 * owes everything).
 *
 * FIXED, WINDOW.  The count is kept; the limit of a window (WINDOW: of the
 * N-bucket range ending at bucket h) that contains the change's reading
 * tc, or an earlier time, is the cap min(L_new, L_old) (and the cap before
 * it while that transition still ran), later windows have L_new for the
 * decisions that see the change: the window in progress at tc never gets
 * more room than the old limit left it, and never more than the new one
 * allows.  A window that began after tc but before the publication holds
 * what decisions of the old era admitted in it (at most L_old: their
 * checks were against it) and takes new admissions only up to L_new, so
 * it holds at most max(its count at the publication, L_new) <= max(L_old,
 * L_new): keyed.h states this; no stamp can help, since those admissions
 * are already counted.  This needs no per-key state: the block holds the
 * first window (bucket) number F_FROM where L_new applies alone.  Decisions
 * refuse a block whose largest n is not its L or whose cap exceeds L
 * (kp_win_ok(): every setter keeps both), and clamp L to the count's range.
 * The window length and the bucket count fix the layout: no set_rate.
 *
 * INFLIGHT.  The count held is kept; the new K applies to the next
 * acquire (a lower K refuses until releases bring the count under it).
 *
 * FIXED and INFLIGHT keep the count in bit_width(L or K at init) bits:
 * a new limit must fit (SLUICE_ELIMIT).  The algorithm, key_max, capacity,
 * buckets and the window length never change.
 */
#include <sched.h>

#include "sluice/gcra.h"
#include "gcra_step.h"
#include "pair_internal.h"
#include "keyed_internal.h"

/* Setter's waits: at most this many yields while the lock is held and its
 * lease runs (the lease is real time, so the loop ends by the lease; the
 * count only bounds a coarse clock that does not move). */
#define SET_SPINS (1u << 22)

static inline void field_init(_Atomic uint64_t (*f)[2], unsigned i, uint64_t v)
{
	atomic_store_explicit(&f[i][0], v, memory_order_relaxed);
	atomic_store_explicit(&f[i][1], 0, memory_order_relaxed);
}

/* Era 0: the validated configuration, ticket 0.  Before the header's magic
 * (release) is stored: an attacher that sees the magic sees this. */
void sluice__keyed_live_format(struct sluice__keyed_live *l, const struct params *p)
{
	_Atomic uint64_t(*f)[2] = l->blk[0].f;
	field_init(f, F_INTERVAL, p->interval);
	field_init(f, F_TAU, p->tau);
	field_init(f, F_NMAX, p->nmax);
	field_init(f, F_RECIP, p->recip);
	field_init(f, F_SHIFT, p->shift);
	field_init(f, F_PINTERVAL, p->interval);
	field_init(f, F_PTAU, p->tau);
	field_init(f, F_TC, 0);
	field_init(f, F_LIMIT, p->limit);
	field_init(f, F_CAP, p->limit);
	field_init(f, F_FROM, 0);
	field_init(f, F_RATE, p->rate);
	field_init(f, F_PERIOD, p->period_ns);
	field_init(f, F_BURST, p->algo == SLUICE_ALGO_LEAKY ? p->depth : p->burst);
	field_init(f, F_LIFT, 0);
	atomic_store_explicit(&l->hw, 0, memory_order_relaxed);
}

/* Raise hw to @to (fetch-max; seq_cst: hw_note() says why).  Bounded:
 * each failure means hw moved, up among honest writers. */
void sluice__keyed_hw_raise(struct sluice__keyed_live *l, uint64_t to)
{
	uint64_t v = atomic_load_explicit(&l->hw, memory_order_seq_cst);
	for (unsigned n = 0; n < RETRY_MAX && v < to; n++)
		if (atomic_compare_exchange_weak_explicit(&l->hw, &v, to, memory_order_seq_cst,
		                                          memory_order_seq_cst))
			return;
}

uint64_t sluice__keyed_gcra_convert(const struct kp *p, uint64_t x)
{
	uint64_t tc = p->tc, t0 = p->pinterval, tau0 = p->ptau, t1 = p->interval, tau1 = p->tau;
	uint64_t d = x > tc ? x - tc : 0; /* the debt at the change */
	/* (a): the permits held at tc, in new ns, at most b1 (gcra.c's own
	 * rule); a key that owes more than tau0 at tc (decided at readings
	 * after tc: a lagging stamp) holds a negative number of them, and
	 * keeps owing it in new ns, rounded up (DESIGN, "Debt") */
	uint64_t da = d <= tau0 ? tau1 - sluice__gcra_kept(tau0 - d, t0, t1, tau1)
	                        : tmax_add(tau1, sluice__keyed_gcra_owed(d - tau0, t0, t1));
	uint64_t dn = d > da ? d : da; /* the fewer permits of (a) and (b) */
	uint64_t y = dn > TMAX - (tc > TMAX ? TMAX : tc) ? TMAX : tc + dn;
	/* y >= x for every x the era before wrote (dn >= d); a forged x
	 * above TMAX is kept as it is (refused: it only ever refuses) */
	return y > x ? y : x;
}

/* Write field @i of @f as @v under ticket @me: a pair CAS expecting the
 * ticket read, refused once a newer ticket wrote it.  A full barrier (the
 * release kp_load()'s acquire loads pair with).  Return: 1, or 0 when a newer
 * setter owns the block (this one's lock was stolen). */
SLUICE_TESTABLE int field_set(_Atomic uint64_t (*f)[2], unsigned i, uint64_t v, uint64_t me)
{
	for (unsigned n = 0; n < RETRY_MAX; n++) {
		uint64_t tk = atomic_load_explicit(&f[i][1], memory_order_acquire);
		uint64_t old = atomic_load_explicit(&f[i][0], memory_order_relaxed);
		if (tk > me)
			return 0;
		if (sluice__pair_cas(&f[i][0], old, tk, v, me))
			return 1;
	}
	return 0;
}

/* Take the setters' lock.  *lo: the lock word now held, *era: the era read
 * with it (stable while it is held: only the holder's pair CAS changes
 * ctl).  Return: 0, or SLUICE_EBUSY when the lock kept changing hands. */
SLUICE_TESTABLE int lock_take(struct sluice__keyed_live *l, uint64_t *lo, uint64_t *era)
{
	for (unsigned n = 0; n < SET_SPINS; n++) {
		/* Acquire: pairs with the pair CAS that wrote them (the
		 * previous holder's publication and release). */
		uint64_t w = atomic_load_explicit(&l->ctl[0], memory_order_acquire);
		uint64_t e = atomic_load_explicit(&l->ctl[1], memory_order_acquire);
		uint64_t stamp = lease_now();
		int free = !(w & LOCK_HELD);
		int stale = !free && ((stamp - (w & UNIT_MASK)) & UNIT_MASK) > LEASE_UNITS;
		if (free || stale) {
			uint64_t mine = ((LOCK_TICKET(w) + 1) << 15) | LOCK_HELD | stamp;
			/* A full barrier: the values this setter reads next are
			 * those of the era e it read with the lock. */
			if (sluice__pair_cas(&l->ctl[0], w, e, mine, e)) {
				*lo = mine;
				*era = e;
				return 0;
			}
			continue;
		}
		sched_yield(); /* a setter runs for microseconds: wait for it */
	}
	return SLUICE_EBUSY;
}

static void lock_drop(struct sluice__keyed_live *l, uint64_t lo, uint64_t era)
{
	/* Fails only when stolen: then it is not ours to drop. */
	sluice__pair_cas(&l->ctl[0], lo, era, lo & ~LOCK_HELD, era);
}

/* Record @t as the reading after era @era's publication, unless a later
 * era's is recorded (pub[1] holds era + 1; 0: none).  Pair CAS expecting
 * what was read, so a late writer never overwrites a newer record. */
static void pub_set(struct sluice__keyed_live *l, uint64_t era, uint64_t t)
{
	for (unsigned n = 0; n < RETRY_MAX; n++) {
		uint64_t pe = atomic_load_explicit(&l->pub[1], memory_order_acquire);
		uint64_t pt = atomic_load_explicit(&l->pub[0], memory_order_relaxed);
		if (pe > era + 1 || (pe == era + 1 && pt >= t))
			return;
		if (sluice__pair_cas(&l->pub[0], pt, pe, t, era + 1))
			return;
	}
}

/*
 * sluice__keyed_gcra_quiet - the latest stamp at which era e + 1 may not
 * yet be published (DESIGN, "Two eras"): every state era e - 1 wrote is a
 * TAT x <= pt + tau_{e-1} (pt: the newest reading after era e's
 * publication), and era e reads it through the conversion at tc, to at
 * most max(pt + tau_{e-1}, tc + tau_e + owed(pt - tc)); a stamp past
 * that finds every such state a full bucket of era e.
 */
static uint64_t sluice__keyed_gcra_quiet(uint64_t tc, uint64_t pt, uint64_t t0, uint64_t tau0,
                                         uint64_t t1, uint64_t tau1)
{
	uint64_t lag = pt > tc ? pt - tc : 0;
	uint64_t a = tmax_add(pt, tau0);
	uint64_t b = tmax_add(tmax_add(tc, tau1), sluice__keyed_gcra_owed(lag, t0, t1));
	return a > b ? a : b;
}

enum what { SET_RATE, SET_BURST, SET_LIMIT };

/* The newest reading after era @e's publication, for the next setter:
 * hw, but a jump past the era's stamp @tc by more than HW_TRUST is not
 * waited for (DESIGN, "Jumps"). */
static uint64_t pub_reading(struct sluice__keyed_live *l, uint64_t tc)
{
	uint64_t h = atomic_load_explicit(&l->hw, memory_order_seq_cst);
	uint64_t top = tmax_add(tc, HW_TRUST);
	return h < top ? h : top;
}

/* @plain: the plain setter, whose reading is the handle's clock: read it
 * again once the lock is held (a wait for the lock is no lag). */
static int change(sluice_keyed_t *k, enum what what, uint64_t a, uint64_t b, uint64_t now,
                  int plain)
{
	if (!k || !k->live)
		return SLUICE_EINVAL;
	int gcra = k->algo == SLUICE_ALGO_GCRA || k->algo == SLUICE_ALGO_LEAKY;
	if ((what == SET_LIMIT) == gcra)
		return SLUICE_ENOTSUP; /* rate, burst: GCRA, LEAKY; limit: the others */
	if (now > TMAX)
		return SLUICE_ETIME;
	struct sluice__keyed_live *l = k->live;
	uint64_t lo, e;
	int rc = lock_take(l, &lo, &e);
	if (rc != 0)
		return rc;
	if (plain) {
		uint64_t c = sluice_clock_now(k->clock);
		if (c > now)
			now = c > TMAX ? TMAX : c;
	}
	if (gcra) {
		/* The stamp: never older than the newest reading the table
		 * has seen, less the slack (DESIGN, "The newest reading"),
		 * and itself noted there before the publication. */
		uint64_t h = atomic_load_explicit(&l->hw, memory_order_seq_cst);
		if (h > HW_SLACK && h - HW_SLACK > now && h - HW_SLACK - now <= HW_TRUST)
			now = h - HW_SLACK > TMAX ? TMAX : h - HW_SLACK;
		sluice__keyed_hw_raise(l, now);
	}
	_Atomic uint64_t(*cur)[2] = l->blk[e & 1].f;
	_Atomic uint64_t(*nxt)[2] = l->blk[(e + 1) & 1].f;
#define CUR(i) atomic_load_explicit(&cur[i][0], memory_order_relaxed)
	/* The new configuration: the fixed parameters from the handle (as
	 * attach validated them), the changeable ones from the era in force
	 * with the one that changes replaced; then init's own validator, so
	 * a change is refused with init's code exactly when init would
	 * refuse that configuration. */
	sluice_keyed_config_t c = { .algo = k->algo, .policy = k->policy, .flags = k->flags,
		                    .key_max = k->key_max, .capacity = k->capacity,
		                    .window_ns = k->window_ns, .buckets = k->buckets };
	if (gcra) {
		c.rate = what == SET_RATE ? a : CUR(F_RATE);
		c.period_ns = what == SET_RATE ? b : CUR(F_PERIOD);
		uint64_t burst = what == SET_BURST ? a : CUR(F_BURST);
		if (k->algo == SLUICE_ALGO_LEAKY)
			c.depth = burst;
		else
			c.burst = burst;
	} else {
		c.limit = a;
	}
	struct params p;
	rc = sluice__keyed_validate(&c, &p);
	if (rc == 0 && !gcra && p.cbits > k->cbits)
		rc = SLUICE_ELIMIT; /* FIXED, INFLIGHT: the count's bits are fixed */
	if (rc == 0 && gcra && e > 0) {
		/* One parity bit: era e - 1's states must be full buckets of
		 * era e by now (DESIGN, "Two eras").  If era e's newest
		 * reading was not recorded (its setter stopped or died after
		 * publishing), record hw now: the publication came before. */
		uint64_t pe = atomic_load_explicit(&l->pub[1], memory_order_acquire);
		uint64_t pt = atomic_load_explicit(&l->pub[0], memory_order_relaxed);
		if (pe != e + 1) {
			pt = pub_reading(l, CUR(F_TC));
			pub_set(l, e, pt);
		}
		if (now <= sluice__keyed_gcra_quiet(CUR(F_TC), pt, CUR(F_PINTERVAL), CUR(F_PTAU),
		                                    CUR(F_INTERVAL), CUR(F_TAU)))
			rc = SLUICE_EBUSY;
	}
	if (rc != 0) {
		lock_drop(l, lo, e);
		return rc;
	}
	uint64_t me = LOCK_TICKET(lo);
	int ok = 1;
	if (gcra) {
		ok = field_set(nxt, F_INTERVAL, p.interval, me) && field_set(nxt, F_TAU, p.tau, me) &&
		     field_set(nxt, F_NMAX, p.nmax, me) && field_set(nxt, F_RECIP, p.recip, me) &&
		     field_set(nxt, F_SHIFT, p.shift, me) &&
		     field_set(nxt, F_PINTERVAL, CUR(F_INTERVAL), me) &&
		     field_set(nxt, F_PTAU, CUR(F_TAU), me) && field_set(nxt, F_TC, now, me) &&
		     field_set(nxt, F_RATE, c.rate, me) && field_set(nxt, F_PERIOD, c.period_ns, me) &&
		     field_set(nxt, F_BURST, what == SET_BURST ? a : CUR(F_BURST), me);
		/* A burst raise: a full bucket keeps b0 of b1 (DESIGN), and so
		 * do keys created from here on, from the later of the change
		 * and their group's floor (sluice__keyed_successor()). */
		uint64_t b0 = CUR(F_NMAX);
		uint64_t lift = p.nmax > b0 ? sluice__sat_mul(p.nmax - b0, p.interval) : 0;
		ok = ok && field_set(nxt, F_LIFT, lift, me);
	} else {
		/* FIXED: windows of W; WINDOW: ranges of N buckets of W / N
		 * ending at bucket h.  The change's window (range) and every
		 * earlier one get the cap; F_FROM is the first without a
		 * bucket at or before the change. */
		uint64_t cap = p.limit, from = 0; /* INFLIGHT: no windows */
		if (k->algo != SLUICE_ALGO_INFLIGHT) {
			uint64_t ce = now / k->width_ns; /* width_ns > 0: attach validated it */
			uint64_t old = CUR(F_LIMIT);
			from = ce + (k->algo == SLUICE_ALGO_WINDOW ? k->buckets : 1);
			cap = p.limit < old ? p.limit : old;
			if (ce < CUR(F_FROM) && CUR(F_CAP) < cap)
				cap = CUR(F_CAP); /* the previous transition still runs */
		}
		ok = field_set(nxt, F_LIMIT, p.limit, me) && field_set(nxt, F_NMAX, p.nmax, me) &&
		     field_set(nxt, F_CAP, cap, me) && field_set(nxt, F_FROM, from, me) &&
		     field_set(nxt, F_TC, now, me) && field_set(nxt, F_LIFT, 0, me);
	}
#undef CUR
	/* Publish era e + 1: a pair CAS expecting our lock word (fails if it
	 * was stolen) and era e; a full barrier, the release of the block
	 * that kp_load()'s acquire of the era pairs with. */
	if (!ok || !sluice__pair_cas(&l->ctl[0], lo, e, lo, e + 1))
		return SLUICE_EBUSY; /* stolen: the new holder decides */
	/* The newest reading after the publication (seq_cst, after the
	 * publication's full barrier: hw_note() says why it covers every
	 * reading of the era before). */
	pub_set(l, e + 1, pub_reading(l, now));
	lock_drop(l, lo, e + 1);
	return 0;
}

int sluice_keyed_set_rate_at(sluice_keyed_t *k, uint64_t rate, uint64_t period_ns, uint64_t now)
{
	return change(k, SET_RATE, rate, period_ns, now, 0);
}

int sluice_keyed_set_rate(sluice_keyed_t *k, uint64_t rate, uint64_t period_ns)
{
	return k ? change(k, SET_RATE, rate, period_ns, sluice_clock_now(k->clock), 1) : SLUICE_EINVAL;
}

int sluice_keyed_set_burst_at(sluice_keyed_t *k, uint64_t burst, uint64_t now)
{
	return change(k, SET_BURST, burst, 0, now, 0);
}

int sluice_keyed_set_burst(sluice_keyed_t *k, uint64_t burst)
{
	return k ? change(k, SET_BURST, burst, 0, sluice_clock_now(k->clock), 1) : SLUICE_EINVAL;
}

int sluice_keyed_set_limit_at(sluice_keyed_t *k, uint64_t limit, uint64_t now)
{
	return change(k, SET_LIMIT, limit, 0, now, 0);
}

int sluice_keyed_set_limit(sluice_keyed_t *k, uint64_t limit)
{
	return k ? change(k, SET_LIMIT, limit, 0, sluice_clock_now(k->clock), 1) : SLUICE_EINVAL;
}

int sluice_keyed_params(const sluice_keyed_t *k, sluice_keyed_params_t *out)
{
	if (!k || !out || !k->live)
		return SLUICE_EINVAL;
	struct sluice__keyed_live *l = k->live;
	for (unsigned n = 0; n < RETRY_MAX; n++) {
		/* The latch, as kp_load() and kp_same(). */
		uint64_t e = atomic_load_explicit(&l->ctl[1], memory_order_acquire);
		_Atomic uint64_t(*f)[2] = l->blk[e & 1].f;
		sluice_keyed_params_t r = { .era = e };
		r.nmax = atomic_load_explicit(&f[F_NMAX][0], memory_order_acquire);
		if (k->algo == SLUICE_ALGO_GCRA || k->algo == SLUICE_ALGO_LEAKY) {
			r.rate = atomic_load_explicit(&f[F_RATE][0], memory_order_acquire);
			r.period_ns = atomic_load_explicit(&f[F_PERIOD][0], memory_order_acquire);
			r.burst = atomic_load_explicit(&f[F_BURST][0], memory_order_acquire);
		} else {
			r.limit = atomic_load_explicit(&f[F_LIMIT][0], memory_order_acquire);
		}
		if (atomic_load_explicit(&l->ctl[1], memory_order_relaxed) == e) {
			*out = r;
			return 0;
		}
	}
	return SLUICE_EBUSY;
}
