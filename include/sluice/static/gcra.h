/* SPDX-License-Identifier: MIT */
/*
 * sluice/static/gcra.h - GCRA's decisions and arithmetic, as static inline
 * functions, for the library's own files and for a caller that defines
 * SLUICE_INLINE (common.h, INLINE).  lib/outline.c exports the calls
 * sluice/gcra.h declares from these bodies.  Not an interface: the names and
 * layouts here change in any release.
 */
#ifndef SLUICE_STATIC_GCRA_H
#define SLUICE_STATIC_GCRA_H

#include "../gcra.h"
#include "clock.h"
#include "common.h"
#include "decision.h"
#include "stripe.h"

/* private: init without the resolution check, for a limiter that only
 * books and whose callers absorb a stale reading's delay themselves.  No
 * caller in the library: the leaky shaper is validated as an admitting
 * bucket (leaky.h, LIMITS). */
int sluice__gcra_init_booking(sluice_gcra_t *g, const sluice_gcra_config_t *cfg);

SLUICE_API int sluice_inline_gcra_take_slow(sluice_gcra_t *g, uint64_t n, uint64_t now,
                                      uint64_t max_delay, sluice_decision_t *d);

/* private: acquire with leases on, after this CPU's lease could not pay
 * (lib/gcra.c, "Leases"): a take, or a decision as without leases. */
SLUICE_API int sluice_inline_gcra_lease_take(sluice_gcra_t *g, uint64_t n, uint64_t now,
                                       sluice_decision_t *d);

/* private: floor(x / T) for x < 2^62, with the precomputed reciprocal
 * (Granlund-Montgomery: the error x*e/2^(62+shift) < 1/T, see gcra.c). */
static inline uint64_t sluice__gcra_div(uint64_t x, uint64_t recip, uint64_t shift)
{
	/* x * recip < 2^125, so the product shifted by the constant 62 fits
	 * in 64 bits; a variable 128-bit shift would cost more. */
	return (uint64_t)(((sluice__u128)x * recip) >> 62) >> shift;
}

/* private: fill @d from the TAT @tat after the decision, taken at @now. */
static inline void sluice__gcra_fill(sluice_decision_t *d, int allowed, uint64_t burst,
                                     uint64_t tau, uint64_t recip, uint64_t shift,
                                     uint64_t now, uint64_t tat, uint64_t retry)
{
	uint64_t lag = tat > now ? tat - now : 0;
	uint64_t base = tat > now ? tat : now;
	uint64_t top = base <= SLUICE_GCRA_TIME_MAX ? SLUICE_GCRA_TIME_MAX - base : 0;
	uint64_t credit = lag < tau ? tau - lag : 0; /* ns of permits held now */
	if (credit > top)
		credit = top; /* only what fits before the end of time */
	d->allowed = allowed;
	d->limit = burst;
	d->remaining = sluice__gcra_div(credit, recip, shift);
	/* @retry: a booking's delay when allowed, the wait when refused */
	d->retry_after_ns = allowed ? 0 : retry;
	d->delay_ns = allowed ? retry : 0;
	d->reset_ns = lag; /* until the bucket is full: TAT = now_ns + reset_ns */
	d->now_ns = now;
}

/*
 * private: GCRA's state-word step, the one copy of its decision arithmetic
 * (gcra.h's acquire and booking paths and the keyed tables' GCRA and LEAKY
 * decisions call it; lib/gcra_step.h says why it lives in this installed
 * header).  Books @need = n * T ns on the TAT @a at @now, under the
 * tolerance @tau, with every TAT kept at most @tmax (the owner's end of
 * time).  The caller has checked need <= tau (n <= b).  Pure: no load, no
 * store.  *@next: the TAT the booking leaves, max(a, now) + need.
 * Return: the wait until the booked slot conforms (0: it conforms now), or
 * SLUICE_NEVER when *@next would pass @tmax (the booking never fits).  A
 * real wait is at most the lag, below @tmax, so the two never meet.
 * always_inline: callers test the result against a constant (0 on the
 * acquire paths), which folds the wait into one comparison.
 */
__attribute__((always_inline)) static inline uint64_t
sluice__gcra_step(uint64_t a, uint64_t need, uint64_t now, uint64_t tau, uint64_t tmax,
                  uint64_t *next)
{
	uint64_t base = a > now ? a : now;
	uint64_t lag = base - now, room = tau - need;
	*next = base + need;
	if (need > tmax || base > tmax - need)
		return SLUICE_NEVER;
	return lag > room ? lag - room : 0; /* lag + need - tau */
}

/*
 * private: GCRA's give-back step, the one copy (sluice_gcra_cancel() and
 * the keyed tables' refund): the TAT before a booking of @need ns that left
 * @tat, when that booking can have been made on a TAT at or above @floor
 * (0: any; the keyed tables' floor is their last change's time).
 * Return: 1 with *@prev = tat - need, or 0 when need is more than one
 * booking that left @tat can have taken.
 */
static inline int sluice__gcra_unstep(uint64_t tat, uint64_t need, uint64_t floor, uint64_t *prev)
{
	if (tat < floor || need > tat - floor)
		return 0;
	*prev = tat - need;
	return 1;
}

/*
 * private: one attempt at booking @n at @now with a delay of at most
 * @max_delay (0: acquire).  Returns 1 booked (d->delay_ns = the delay),
 * 0 refused, or SLUICE__GCRA_SLOW when the slow path must decide (a seal,
 * n = 0, n > b).
 *
 * Ordering: the TAT load is an acquire.  Every TAT value of an era is
 * written by that era's unseal (a release) or by a CAS after it (an RMW, so
 * in its release sequence), so the load makes the era and its parameters
 * visible.  The parameters are read with acquire loads, which pair with the
 * release stores a reconfiguration rewrites a slot with: a decision that
 * read a rewritten (torn) parameter therefore sees a TAT sealed since it
 * loaded, and its CAS (or the refusal's reload) fails.  The era load is an
 * acquire too: it pairs with the acq_rel CAS that flips the era
 * (reconfigure() step 3, or help()), which comes after the seal of that
 * era in the writer's (or helper's) order.  So a decision that reads era
 * e+1 has the seal of e+1 happen before its own CAS; write-write coherence
 * then puts the seal before that CAS in the TAT's modification order, and
 * the CAS, expecting the pre-seal TAT it loaded, fails.  With a relaxed
 * era load nothing would order the seal before the CAS, and era e+1's
 * parameters could be applied to an era-e TAT.  (Acquire loads, not a
 * fence: ThreadSanitizer does not model fences.)  TAT values of a
 * new era are above every value of the old one (gcra.c), so a CAS on a TAT
 * loaded before a reconfiguration can never succeed after it.  An
 * admission publishes nothing: its CAS is acquire only for the value a
 * failure reloads.
 */
static inline int sluice__gcra_try(sluice_gcra_t *g, uint64_t n, uint64_t now,
                                   uint64_t max_delay, sluice_decision_t *d)
{
	uint64_t a = atomic_load_explicit(&g->tat, memory_order_acquire);
	for (;;) {
		if (SLUICE_UNLIKELY(a > SLUICE_GCRA_TIME_MAX))
			return SLUICE__GCRA_SLOW; /* sealed: help the reconfiguration */
		/* Acquire: see the ordering note above (pairs with the
		 * era flip, which comes after the seal). */
		const struct sluice__gcra_params *p =
			&g->params[atomic_load_explicit(&g->era, memory_order_acquire) & 1];
		uint64_t T = atomic_load_explicit(&p->interval, memory_order_acquire);
		uint64_t tau = atomic_load_explicit(&p->tau, memory_order_acquire);
		uint64_t burst = atomic_load_explicit(&p->burst, memory_order_acquire);
		uint64_t stamp = atomic_load_explicit(&p->stamp, memory_order_acquire);
		uint64_t recip = 0, shift = 0;
		if (d) {
			recip = atomic_load_explicit(&p->recip, memory_order_acquire);
			shift = atomic_load_explicit(&p->shift, memory_order_acquire);
		}
		if (SLUICE_UNLIKELY(n - 1 >= burst))
			return SLUICE__GCRA_SLOW;
		uint64_t need = n * T; /* <= tau <= 2^62: n <= b */
		uint64_t next;
		/* Judged at the change's stamp when the reading is older, the
		 * wait measured from the reading (READINGS ACROSS A CHANGE).
		 * No overflow: a real wait at `at` is below TIME_MAX - at. */
		uint64_t at = now < stamp ? stamp : now;
		uint64_t delay = sluice__gcra_step(a, need, at, tau, SLUICE_GCRA_TIME_MAX, &next);
		if (SLUICE_UNLIKELY(at != now) && delay != SLUICE_NEVER)
			delay += at - now;
		int fits = delay != SLUICE_NEVER;
		if (SLUICE_LIKELY(fits && delay <= max_delay)) {
			/* Acquire (C11 wants success >= failure): a failure
			 * reloads a TAT that may open a new era. */
			if (atomic_compare_exchange_weak_explicit(&g->tat, &a, next,
			                                          memory_order_acquire,
			                                          memory_order_acquire)) {
				if (d)
					sluice__gcra_fill(d, 1, burst, tau, recip, shift, now,
					                  next, delay);
				return 1;
			}
			continue; /* another booking moved the TAT: decide again */
		}
		/* Refused.  Reload: if the TAT moved, (a, p) may not have been
		 * one state; decide again on the fresh one. */
		uint64_t a2 = atomic_load_explicit(&g->tat, memory_order_acquire);
		if (a2 != a) {
			a = a2;
			continue;
		}
		if (d)
			sluice__gcra_fill(d, 0, burst, tau, recip, shift, now, a,
			                  fits ? delay - max_delay : SLUICE_NEVER);
		return 0;
	}
}

/*
 * private: spend @n permits at @now from @cell, this CPU's lease (leases
 * on; @p the parameter set in force, @b its burst, n already checked
 * against it).  Single-width: one CAS on @held, the line this CPU owns.
 * Return: 1 admitted (@d filled), 0 the lease cannot pay (short, expired,
 * or taken at a reading after @now: the caller takes), -1 the CAS took n
 * from a lease this spend cannot prove was taken at or before @now
 * (another thread of this CPU deposited a newer one between the CAS and
 * the check): refused, with those n lost (LEASES, UNDER-ADMISSION).
 *
 * Why that suffices (lib/gcra.c, "Leases", has the whole argument): a
 * cell's stamps never decrease (a take deposits only when its reading is
 * at or after the stamp it replaces).  The stamp s0 read first belongs to
 * a deposit D0; the CAS hits the held word of D0 or a later deposit D, so
 * t0(D) >= s0 >= @now - V; the stamp s1 read after the CAS is D's or a
 * later one, so t0(D) <= s1, and s1 <= @now proves t0(D) <= @now.  No tag
 * is needed: a held word that comes back equal (ABA, after any number of
 * leases) is spent only when those two checks hold for whichever lease
 * it is.  The lease's TAT (d->now_ns + d->reset_ns, the booking a refund
 * names) is s0 + offset when s1 = s0 (then t0(D) = s0 and the offset is
 * D's); otherwise no booking is named (reset_ns = 0).
 */
__attribute__((always_inline)) static inline int
sluice__gcra_lease_spend(sluice_gcra_t *g, struct sluice_gcra_cell *cell, uint64_t b,
                         uint64_t tau, uint64_t recip, uint64_t shift, uint64_t n, uint64_t now,
                         sluice_decision_t *d)
{
	for (int i = 0; i < SLUICE__GCRA_SPEND_TRIES; i++) {
		/* Acquire: pairs with the deposit's double-width CAS (a full
		 * barrier), so the held word loaded next is that deposit's or
		 * a later one. */
		uint64_t s0 = atomic_load_explicit(&cell->stamp, memory_order_acquire);
		uint64_t h = atomic_load_explicit(&cell->held, memory_order_relaxed);
		/* unsigned: a reading before the take (now < s0) wraps, fails */
		if ((h & SLUICE__GCRA_HELD_COUNT) < n || now - s0 > g->lease_ns)
			return 0;
		/* Acquire on success: the CAS reads the held word a deposit
		 * wrote (or a spend since), so the stamp load after it sees
		 * that deposit's stamp or a later one (x86-64: the deposit's
		 * CMPXCHG16B wrote both at once, pair_internal.h). */
		if (atomic_compare_exchange_weak_explicit(&cell->held, &h, h - n, memory_order_acquire,
		                                          memory_order_relaxed)) {
			uint64_t s1 = atomic_load_explicit(&cell->stamp, memory_order_relaxed);
			if (SLUICE_UNLIKELY(s1 > now))
				return -1;
			if (d) {
				sluice__gcra_fill(d, 1, b, tau, recip, shift, now,
				                  s0 + (h >> SLUICE__GCRA_HELD_BITS), 0);
				if (SLUICE_UNLIKELY(s1 != s0))
					d->reset_ns = 0; /* no booking named (see above) */
			}
			return 1;
		}
	}
	return 0;
}

/* private: the leased acquire: this CPU's lease, else a refusal from the
 * TAT, else a take (gcra.c).  @era: the era the caller read (acquire);
 * @p: its parameter set, and @tau, @recip, @shift from it (recip and shift
 * only when @d is set). */
__attribute__((always_inline)) static inline int
sluice__gcra_acquire_leased(sluice_gcra_t *g, uint64_t era, const struct sluice__gcra_params *p,
                            uint64_t tau, uint64_t recip, uint64_t shift, uint64_t n, uint64_t now,
                            sluice_decision_t *d)
{
	/* n = 0 and n above b go the general way (EINVAL, ETOOBIG).  n > b
	 * needs b of the era in force (@p): a lease may outlive a set_burst.
	 * Acquire, as every parameter load (sluice__gcra_try()'s note). */
	uint64_t b = atomic_load_explicit(&p->burst, memory_order_acquire);
	if (SLUICE_LIKELY(n - 1 < b)) {
		int r = sluice__gcra_lease_spend(g, &g->cells[sluice__stripe_pick(g->cell_mask)], b,
		                                 tau, recip, shift, n, now, d);
		if (SLUICE_LIKELY(r > 0))
			return 1;
		if (SLUICE_UNLIKELY(r < 0)) {
			if (d) /* n lost; nothing known to remain; retry at once */
				sluice__gcra_fill(d, 0, b, 0, 1, 0, now, now, 0);
			return 0;
		}
		/* The lease cannot pay: a refusal the take would make (its
		 * step finds no room and the TAT read again is unchanged),
		 * made here, without the take's call, second CPU number and
		 * parameter loads (issue 27 item 5: a refusal with leases of
		 * 64 cost 7.9 ns against 4.3 without).  Acquire on the TAT,
		 * then the era again: a TAT of a later era is written after
		 * that era's flip, so the same era means (a, p) are one state
		 * (and p was not rewritten: that needs two flips); as
		 * sluice__gcra_try()'s note.  Anything else (room, a seal, a
		 * reading before the change, a moved TAT or era): the take. */
		uint64_t a = atomic_load_explicit(&g->tat, memory_order_acquire);
		uint64_t T = atomic_load_explicit(&p->interval, memory_order_acquire);
		uint64_t stamp = atomic_load_explicit(&p->stamp, memory_order_acquire);
		if (a <= SLUICE_GCRA_TIME_MAX && now >= stamp &&
		    atomic_load_explicit(&g->era, memory_order_acquire) == era) {
			uint64_t tat;
			uint64_t wait = sluice__gcra_step(a, n * T, now, tau, SLUICE_GCRA_TIME_MAX,
			                                  &tat);
			if (wait != 0 && atomic_load_explicit(&g->tat, memory_order_acquire) == a) {
				if (d) /* wait: the exact wait, or SLUICE_NEVER */
					sluice__gcra_fill(d, 0, b, tau, recip, shift, now, a, wait);
				return 0;
			}
		}
	}
	return sluice_inline_gcra_lease_take(g, n, now, d);
}

SLUICE_NODISCARD __attribute__((always_inline)) static inline int
sluice__gcra_acquire_at(sluice_gcra_t *g, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	/* The admission, inline: n in 1..b (the gate: b, or 0 with leases,
	 * so one compare turns away n = 0, n > b and a leased limiter), the
	 * booking conforms now and fits before the end of time (the step,
	 * with a wait of 0), one CAS.  A sealed TAT needs no test of its
	 * own: it is above SLUICE_GCRA_TIME_MAX, so the step finds that no
	 * booking fits after it (whatever parameters were read with it) and
	 * returns SLUICE_NEVER.  Anything else (a refusal, a seal, a lost
	 * CAS, leases) is decided below.  Ordering as in sluice__gcra_try().
	 * always_inline: with the step called twice GCC's size estimate
	 * stops inlining this function and calls a copy (perf/instructions.sh
	 * gcra: 58 -> 89 instructions per decision). */
	if (SLUICE_UNLIKELY(g->cells != NULL)) {
		/* Leases: this CPU's lease first, before any load of the TAT,
		 * whose line every take writes: a decision the lease pays
		 * touches no line another CPU writes (issue 27 item 5: GCRA
		 * with leases of 64 scaled 1.50x at 2 threads while it loaded
		 * the TAT first).  The era and parameters as below (acquire). */
		uint64_t era = atomic_load_explicit(&g->era, memory_order_acquire);
		const struct sluice__gcra_params *lp = &g->params[era & 1];
		uint64_t ltau = atomic_load_explicit(&lp->tau, memory_order_acquire);
		uint64_t lrecip = 0, lshift = 0;
		if (d) {
			lrecip = atomic_load_explicit(&lp->recip, memory_order_acquire);
			lshift = atomic_load_explicit(&lp->shift, memory_order_acquire);
		}
		return sluice__gcra_acquire_leased(g, era, lp, ltau, lrecip, lshift, n, now, d);
	}
	uint64_t a = atomic_load_explicit(&g->tat, memory_order_acquire);
	/* Acquire: pairs with the era flip (sluice__gcra_try()'s note). */
	const struct sluice__gcra_params *p =
		&g->params[atomic_load_explicit(&g->era, memory_order_acquire) & 1];
	uint64_t T = atomic_load_explicit(&p->interval, memory_order_acquire);
	uint64_t tau = atomic_load_explicit(&p->tau, memory_order_acquire);
	uint64_t gate = atomic_load_explicit(&p->gate, memory_order_acquire);
	uint64_t stamp = atomic_load_explicit(&p->stamp, memory_order_acquire);
	uint64_t recip = 0, shift = 0; /* before the CAS: one parameter set */
	if (d) {
		recip = atomic_load_explicit(&p->recip, memory_order_acquire);
		shift = atomic_load_explicit(&p->shift, memory_order_acquire);
	}
	uint64_t need = n * T; /* used only once n <= b is known: no overflow */
	uint64_t tat;
	/* A reading older than the change in force goes below: it is judged
	 * at the change's stamp, where an acquire cannot pass (READINGS
	 * ACROSS A CHANGE). */
	if (SLUICE_LIKELY(n - 1 < gate && now >= stamp)) {
		uint64_t wait = sluice__gcra_step(a, need, now, tau, SLUICE_GCRA_TIME_MAX, &tat);
		if (SLUICE_LIKELY(wait == 0)) {
			if (atomic_compare_exchange_strong_explicit(&g->tat, &a, tat,
			                                            memory_order_acquire,
			                                            memory_order_acquire)) {
				if (d) {
					uint64_t lag = tat - now; /* <= tau */
					uint64_t credit = tau - lag, top = SLUICE_GCRA_TIME_MAX - tat;
					d->allowed = 1;
					d->limit = gate; /* b: no leases here */
					d->remaining = sluice__gcra_div(credit < top ? credit : top,
					                                recip, shift);
					d->retry_after_ns = 0;
					d->delay_ns = 0;
					d->reset_ns = lag;
					d->now_ns = now;
				}
				return 1;
			}
			/* a lost CAS: decided again below */
		} else if (a <= SLUICE_GCRA_TIME_MAX &&
		           atomic_load_explicit(&g->tat, memory_order_acquire) == a) {
			/* Refused by the limit, from the loads above, as
			 * sluice__gcra_try() refuses: the TAT read again
			 * unchanged means (a, p) were one state.  A sealed TAT
			 * goes below, to help the reconfiguration. */
			if (d)
				sluice__gcra_fill(d, 0, gate, tau, recip, shift, now, a, wait);
			return 0;
		}
	}
	int rc = sluice__gcra_try(g, n, now, 0, d);
	if (SLUICE_UNLIKELY(rc == SLUICE__GCRA_SLOW))
		rc = sluice_inline_gcra_take_slow(g, n, now, 0, d);
	return rc;
}

SLUICE_NODISCARD static inline int sluice__gcra_acquire(sluice_gcra_t *g, uint64_t n, sluice_decision_t *d)
{
	return sluice__gcra_acquire_at(g, n, sluice__clock_now(g->clock), d);
}

SLUICE_NODISCARD static inline int sluice__gcra_reserve_at(sluice_gcra_t *g, uint64_t n, uint64_t now,
                                         uint64_t max_delay_ns, sluice_decision_t *d)
{
	int rc = sluice__gcra_try(g, n, now, max_delay_ns, d);
	if (SLUICE_UNLIKELY(rc == SLUICE__GCRA_SLOW))
		rc = sluice_inline_gcra_take_slow(g, n, now, max_delay_ns, d);
	return rc;
}

SLUICE_NODISCARD static inline int sluice__gcra_reserve(sluice_gcra_t *g, uint64_t n, uint64_t max_delay_ns,
                                      sluice_decision_t *d)
{
	return sluice__gcra_reserve_at(g, n, sluice__clock_now(g->clock), max_delay_ns, d);
}

static inline uint64_t sluice__gcra_interval_ns(const sluice_gcra_t *g)
{
	sluice_gcra_t *m = (sluice_gcra_t *)g;
	uint64_t e = atomic_load_explicit(&m->era, memory_order_acquire);
	return atomic_load_explicit(&m->params[e & 1].interval, memory_order_relaxed);
}

static inline uint64_t sluice__gcra_burst(const sluice_gcra_t *g)
{
	sluice_gcra_t *m = (sluice_gcra_t *)g;
	uint64_t e = atomic_load_explicit(&m->era, memory_order_acquire);
	return atomic_load_explicit(&m->params[e & 1].burst, memory_order_relaxed);
}

/* SLUICE_INLINE: the calls above, inline (common.h, INLINE). */
#ifdef SLUICE_INLINE
#define sluice_gcra_acquire_at(...) sluice__gcra_acquire_at(__VA_ARGS__)
#define sluice_gcra_acquire(...) sluice__gcra_acquire(__VA_ARGS__)
#define sluice_gcra_reserve_at(...) sluice__gcra_reserve_at(__VA_ARGS__)
#define sluice_gcra_reserve(...) sluice__gcra_reserve(__VA_ARGS__)
#define sluice_gcra_interval_ns(...) sluice__gcra_interval_ns(__VA_ARGS__)
#define sluice_gcra_burst(...) sluice__gcra_burst(__VA_ARGS__)
#endif

#endif /* SLUICE_STATIC_GCRA_H */
