/* SPDX-License-Identifier: MIT */
/*
 * leaky.c - leaky bucket (meter and shaper) on GCRA's state machine.
 *
 * DESIGN: no state of its own.  The bucket's level is GCRA's TAT: the time
 * at which the bucket would be empty (the queue drained).  init maps the
 * configuration onto a GCRA (meter: burst = depth + 1; shaper: burst = 1
 * with the maximum delay kept here) and every decision is one GCRA call
 * (acquire, reserve, cancel), so the ordering, the conformance bound and
 * the clock handling are GCRA's (see gcra.c's DESIGN), readings older than
 * a change included (gcra.c, "Readings across a change": the meter is
 * GCRA's acquire, the shaper its reserve); nothing here adds an atomic.  Why the meter is nginx's limit_req, step by step, and why the
 * shaper's slots are FIFO and T apart: see leaky.h's MAPPING.
 */
#include "sluice/error.h"
#include "sluice/leaky.h"
#include "validate_internal.h"

void sluice_leaky_destroy(sluice_leaky_t *l)
{
	if (l)
		sluice_gcra_destroy(&l->gcra);
}

/*
 * The one validator of init and config_check (clock_internal.h): the
 * mode's own checks, then the meter's GCRA config through GCRA's own
 * validator.  Both modes are validated as GCRA validates an admitting
 * bucket: b * T at least the clock's step, which for the shaper (b = 1) is
 * T >= the step.  The shaper used to be exempt ("it only books"), and on a
 * clock coarser than T it delivered far less than its rate with no error:
 * its acquire passes only when the queue is empty, so at most one request
 * per clock reading (T = 1 ms on the 4 ms clock: at most a quarter of the
 * rate); and its pace delays are measured from a reading up to one step
 * old, so a caller that sleeps one out and then books the next lands up to
 * a step late every time, which a booking T ahead cannot absorb when T is
 * below the step (leaky.h, LIMITS).  Fills @g with the meter's config.
 */
static int validate(const sluice_leaky_config_t *cfg, sluice__step_use_t use,
                    sluice_gcra_config_t *g)
{
	if (!cfg)
		return SLUICE_EINVAL;
	*g = (sluice_gcra_config_t){ .rate = cfg->rate, .period_ns = cfg->period_ns,
		                     .clock = cfg->clock, .lease = cfg->lease,
		                     .lease_ns = cfg->lease_ns };
	switch (cfg->mode) {
	case SLUICE_LEAKY_METER:
		if (cfg->max_delay_ns != 0)
			return SLUICE_EDELAY; /* a meter never queues */
		/* depth = UINT64_MAX wraps to 0: GCRA says SLUICE_EBURST, as
		 * it does for any (depth + 1) * T above its span */
		g->burst = cfg->depth + 1;
		break;
	case SLUICE_LEAKY_SHAPER:
		if (cfg->depth != 0)
			return SLUICE_EBURST; /* the queue is given as a time */
		if (cfg->lease != 0 || cfg->lease_ns != 0)
			return SLUICE_ELEASE; /* b = 1 and bookings: nothing to lease */
		if (cfg->max_delay_ns > SLUICE_GCRA_SPAN_MAX)
			return SLUICE_EDELAY;
		g->burst = 1; /* strict pacing: one request per T */
		break;
	default:
		return SLUICE_EMODE;
	}
	return sluice__gcra_validate_config(g, use);
}

int sluice_leaky_config_check(const sluice_leaky_config_t *cfg)
{
	sluice_gcra_config_t g;
	return validate(cfg, SLUICE__ASK, &g);
}

int sluice_leaky_init(sluice_leaky_t *l, const sluice_leaky_config_t *cfg)
{
	if (!l)
		return SLUICE_EINVAL;
	sluice_gcra_config_t g;
	int rc = validate(cfg, SLUICE__RECORD, &g);
	if (rc != 0)
		return rc;
	rc = sluice_gcra_init(&l->gcra, &g); /* validated: only SLUICE_ENOMEM, @l untouched */
	if (rc != 0)
		return rc;
	l->mode = cfg->mode;
	l->max_delay_ns = cfg->mode == SLUICE_LEAKY_SHAPER ? cfg->max_delay_ns : 0;
	return 0;
}

int sluice_leaky_refund(sluice_leaky_t *l, uint64_t n, const sluice_decision_t *admitted)
{
	if (!l)
		return SLUICE_EINVAL;
	return sluice_gcra_refund(&l->gcra, n, admitted);
}

/* ---- queries, cancel and live changes: each one GCRA call --------------- */

uint64_t sluice_leaky_available_at(sluice_leaky_t *l, uint64_t now)
{
	/* GCRA's available is the largest n its acquire admits, capped at b:
	 * D + 1 for a meter, 1 for a shaper (whose acquire passes only with an
	 * empty queue, i.e. when GCRA with b = 1 holds its one permit). */
	return sluice_gcra_available_at(&l->gcra, now);
}

uint64_t sluice_leaky_available(sluice_leaky_t *l)
{
	return sluice_gcra_available(&l->gcra);
}

int sluice_leaky_cancel(sluice_leaky_t *l, uint64_t n, const sluice_decision_t *booked)
{
	if (!l)
		return SLUICE_EINVAL;
	return sluice_gcra_cancel(&l->gcra, n, booked);
}

int sluice_leaky_set_rate_at(sluice_leaky_t *l, uint64_t rate, uint64_t period_ns, uint64_t now)
{
	if (!l)
		return SLUICE_EINVAL;
	/* GCRA keeps b (D + 1, or 1 for a shaper) and checks b * T against
	 * the span and the clock's step, as init checks them here. */
	return sluice_gcra_set_rate_at(&l->gcra, rate, period_ns, now);
}

int sluice_leaky_set_rate(sluice_leaky_t *l, uint64_t rate, uint64_t period_ns)
{
	if (!l)
		return SLUICE_EINVAL;
	return sluice_gcra_set_rate(&l->gcra, rate, period_ns);
}

int sluice_leaky_set_burst_at(sluice_leaky_t *l, uint64_t depth, uint64_t now)
{
	if (!l)
		return SLUICE_EINVAL;
	if (l->mode != SLUICE_LEAKY_METER)
		return SLUICE_ENOTSUP; /* a shaper's queue is a time, not a depth */
	if (depth == UINT64_MAX)
		return SLUICE_EBURST; /* D + 1 would wrap to 0 */
	return sluice_gcra_set_burst_at(&l->gcra, depth + 1, now);
}

int sluice_leaky_set_burst(sluice_leaky_t *l, uint64_t depth)
{
	if (!l)
		return SLUICE_EINVAL;
	return sluice_leaky_set_burst_at(l, depth, sluice_clock_now(l->gcra.clock));
}
