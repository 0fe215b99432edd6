/*
 * composite.c - all-or-nothing across several limiters.
 *
 * DESIGN: ask the parts in order with the same n and the same time; keep
 * each part's decision; on the first refusal (or error) give back, in
 * reverse order, what the parts before it took, with their own decisions
 * (each part's refund knows exactly which bucket or booking to undo).
 * No state is shared between calls except the `unreturned` statistic
 * (relaxed: a counter, publishes nothing).  The parts' own atomics provide
 * all the ordering; the composite adds none and takes no lock.
 *
 * Two things are checked here rather than left to the parts:
 *   - n = 0 is refused before any part is asked.  A part refuses it too,
 *     but without filling its decision (the convention for EINVAL), and the
 *     composite would then copy that unwritten decision to the caller.
 *   - a part listed twice is refused at init (SLUICE_EDUPLICATE): each
 *     listing would take n from the same limiter, so an admission would
 *     cost 2n there, and a refusal by the second listing would give back
 *     through a decision the first one made.
 */
#include "sluice/composite.h"
#include "sluice/error.h"
#include "sluice/limiter.h"

int sluice_composite_init(sluice_composite_t *c, const sluice_composite_config_t *cfg)
{
	if (!c || !cfg)
		return SLUICE_EINVAL;
	if (cfg->count < 2 || cfg->count > SLUICE_COMPOSITE_MAX)
		return SLUICE_ECOUNT;
	for (unsigned i = 0; i < cfg->count; i++) {
		if (!cfg->parts[i])
			return SLUICE_ECOUNT;
		if (sluice_limiter_algo(cfg->parts[i]) == SLUICE_ALGO_COMPOSITE)
			return SLUICE_EALGO;
		/* Parts are never composites, so a shared limiter is always
		 * the same handle: pointer equality finds every duplicate. */
		for (unsigned k = 0; k < i; k++)
			if (cfg->parts[k] == cfg->parts[i])
				return SLUICE_EDUPLICATE;
	}
	for (unsigned i = 0; i < cfg->count; i++)
		c->parts[i] = cfg->parts[i];
	c->count = cfg->count;
	atomic_init(&c->unreturned, 0);
	return 0;
}

int sluice_composite_acquire_at(sluice_composite_t *c, uint64_t n, uint64_t now,
                                sluice_decision_t *d)
{
	sluice_decision_t got[SLUICE_COMPOSITE_MAX];
	return sluice_composite_acquire_each_at(c, n, now, d, got);
}

int sluice_composite_acquire_each_at(sluice_composite_t *c, uint64_t n, uint64_t now,
                                     sluice_decision_t *d, sluice_decision_t got[SLUICE_COMPOSITE_MAX])
{
	unsigned i;
	int rc = 1;
	if (SLUICE_UNLIKELY(n == 0))
		return SLUICE_EINVAL; /* @d and @got untouched, as every part does */
	for (i = 0; i < c->count; i++) {
		rc = sluice_limiter_acquire_at(c->parts[i], n, now, &got[i]);
		if (rc != 1)
			break;
	}
	if (rc != 1) {
		/* give back what the parts before the refusal took */
		for (unsigned k = i; k-- > 0;)
			if (sluice_limiter_refund(c->parts[k], n, &got[k]) != 0)
				atomic_fetch_add_explicit(&c->unreturned, 1, memory_order_relaxed);
		if (d) {
			*d = got[i]; /* the refusing part's decision */
			for (unsigned k = 0; k < i; k++) {
				if (got[k].limit < d->limit)
					d->limit = got[k].limit;
				if (got[k].now_ns > d->now_ns)
					d->now_ns = got[k].now_ns;
			}
		}
		return rc;
	}
	if (d) {
		*d = got[0];
		for (unsigned k = 1; k < c->count; k++) {
			if (got[k].remaining < d->remaining)
				d->remaining = got[k].remaining;
			if (got[k].limit < d->limit)
				d->limit = got[k].limit;
			if (got[k].reset_ns != SLUICE_NEVER &&
			    (d->reset_ns == SLUICE_NEVER || got[k].reset_ns > d->reset_ns))
				d->reset_ns = got[k].reset_ns;
			if (got[k].now_ns > d->now_ns)
				d->now_ns = got[k].now_ns;
		}
	}
	return 1;
}

int sluice_composite_release(sluice_composite_t *c, uint64_t n)
{
	int first = 0;
	for (unsigned i = 0; i < c->count; i++) {
		int rc = sluice_limiter_release(c->parts[i], n);
		if (rc != 0 && first == 0)
			first = rc;
	}
	return first;
}

uint64_t sluice_composite_unreturned(const sluice_composite_t *c)
{
	return atomic_load_explicit(&((sluice_composite_t *)c)->unreturned, memory_order_relaxed);
}
