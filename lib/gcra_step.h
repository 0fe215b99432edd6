/* SPDX-License-Identifier: MIT */
/*
 * gcra_step.h - GCRA's parameter arithmetic, once (never installed): the
 * emission interval T from a rate, the tolerance tau from a burst, the
 * reciprocal that turns credit into permits, and the SET_RATE / SET_BURST
 * conversion of the credit a bucket holds.  lib/gcra.c (init, set_rate,
 * set_burst) and the keyed tables (lib/keyed_table.c validation,
 * lib/keyed_live.c changes) call these; neither has its own copy.
 *
 * The decision step (sluice__gcra_step(): TAT, n, now, T, tau -> new TAT
 * and delay), its inverse (sluice__gcra_unstep(), cancel and refund) and
 * the decision fill (sluice__gcra_fill()) live in sluice/gcra.h, not here:
 * GCRA's acquire is inline in that installed header, so its step must be
 * visible there.  They are private (sluice__) and the keyed tables call
 * the same functions: still one copy.
 */
#ifndef SLUICE_GCRA_STEP_H
#define SLUICE_GCRA_STEP_H

#include <stdint.h>

#include "sluice/error.h"
#include "sluice/gcra.h"
#include "util_internal.h"

/*
 * sluice__gcra_interval - T = period / rate in whole ns, rounded up, and
 * its reciprocal and shift for sluice__gcra_div().  Refused (SLUICE_ERATE)
 * for a zero rate, under 1 ns per permit, or a rounding that adds more
 * than 1 / SLUICE_GCRA_ROUNDING of the rate.
 */
static inline int sluice__gcra_interval(uint64_t rate, uint64_t period, uint64_t *t,
                                        uint64_t *recip, uint64_t *shift)
{
	if (rate == 0 || period < rate)
		return SLUICE_ERATE; /* zero, or under 1 ns per permit */
	uint64_t T = period / rate + (period % rate != 0);
	/* Rounding up adds T*rate - period ns per period: at most period/1000. */
	sluice__u128 excess = (sluice__u128)T * rate - period;
	if (excess * SLUICE_GCRA_ROUNDING > period)
		return SLUICE_ERATE;
	*t = T;
	*shift = sluice__bit_width(T - 1); /* T >= 1 */
	*recip = (uint64_t)((((sluice__u128)1 << (62 + *shift)) + T - 1) / T);
	return 0;
}

/* sluice__gcra_tau - tau = burst * T, refused (SLUICE_EBURST) for a zero
 * burst or a tau above SLUICE_GCRA_SPAN_MAX. */
static inline int sluice__gcra_tau(uint64_t burst, uint64_t t, uint64_t *tau)
{
	if (burst == 0 || burst > SLUICE_GCRA_SPAN_MAX / t)
		return SLUICE_EBURST;
	*tau = burst * t;
	return 0;
}

/*
 * sluice__gcra_kept - the credit @credit (ns of permits held under the old
 * interval @t_old) in ns of the new interval @t_new, rounded down (fewer
 * permits), at most the new tolerance @tau_new: SET_RATE / SET_BURST's (a),
 * "the permits held just before, capped at the new burst".  @t_old = 0 (a
 * forged value) keeps nothing.
 */
static inline uint64_t sluice__gcra_kept(uint64_t credit, uint64_t t_old, uint64_t t_new,
                                         uint64_t tau_new)
{
	if (t_old == 0)
		return 0;
	sluice__u128 kept = (sluice__u128)credit * t_new / t_old;
	return kept > tau_new ? tau_new : (uint64_t)kept;
}

/*
 * sluice__gcra_lease_extra - how many permits a lease take books beyond
 * its own n: the credit left after the take's booking (@tat, the TAT that
 * booking of n leaves at @now, conforming: tat - now <= tau), in permits,
 * divided by 2 * cells (@cell_shift = log2(cells) + 1), at most @lease.
 * So leases shrink as the bucket empties and near the limit every take
 * is exactly n (one CAS, as without leases): with room r permits left,
 * C cells each take at most r / 2C, so all of them together leave at
 * least r / 2 for whoever comes next.  Only what fits before @tmax.
 */
static inline uint64_t sluice__gcra_lease_extra(uint64_t tat, uint64_t now, uint64_t tau,
                                                uint64_t recip, uint64_t shift, uint64_t lease,
                                                uint32_t cell_shift, uint64_t tmax)
{
	uint64_t credit = tau - (tat - now); /* tat - now <= tau: conforming */
	uint64_t top = tmax - tat;           /* tat <= tmax: the step said so */
	if (credit > top)
		credit = top;
	uint64_t extra = sluice__gcra_div(credit, recip, shift) >> cell_shift;
	return extra < lease ? extra : lease;
}

#endif /* SLUICE_GCRA_STEP_H */
