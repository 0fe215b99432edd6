/*
 * limiter.c - the generic handle: dispatch to the algorithm of each algorithm,
 * and sluice_limiter_wait().
 *
 * DESIGN: a handle is an algorithm tag plus the algorithm's own struct, allocated
 * together (aligned to a cache line, as the algorithms' hot words expect).
 * Dispatch is a switch on the tag, generated from SLUICE_ALGOS:
 * each case calls the algorithm's public function, so every guarantee,
 * ordering and error is exactly the algorithm's.  Nothing here is shared
 * between threads beyond what the algorithms share.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/error.h"
#include "sluice/limiter.h"

struct sluice_limiter {
	sluice_algo_t algo;
	const sluice_clock_t *clock;
	_Alignas(SLUICE_CACHELINE) union {
		sluice_composite_t composite;
#define MEMBER(K, name) sluice_##name##_t name;
		SLUICE_ALGOS(MEMBER)
#undef MEMBER
	} u;
};

int sluice_limiter_new(const sluice_limiter_config_t *cfg, sluice_limiter_t **out)
{
	if (!cfg || !out)
		return SLUICE_EINVAL;
	sluice_limiter_t *l = aligned_alloc(SLUICE_CACHELINE, sizeof(*l));
	if (!l)
		return SLUICE_ENOMEM;
	memset(l, 0, sizeof(*l));
	int rc;
	l->algo = cfg->algo;
	switch (cfg->algo) {
	case SLUICE_ALGO_COMPOSITE:
		rc = sluice_composite_init(&l->u.composite, &cfg->composite);
		/* the composite's time is its first part's clock */
		l->clock = rc == 0 ? sluice_limiter_clock(cfg->composite.parts[0]) : NULL;
		break;
#define INIT(K, name)                                                             \
	case SLUICE_ALGO_##K:                                                     \
		rc = sluice_##name##_init(&l->u.name, &cfg->name);                \
		l->clock = cfg->name.clock ? cfg->name.clock : &sluice_clock_cached; \
		break;
		SLUICE_ALGOS(INIT)
#undef INIT
	default:
		rc = SLUICE_EALGO;
	}
	if (rc != 0) {
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

void sluice_limiter_free(sluice_limiter_t *l)
{
	if (!l)
		return;
	switch (l->algo) {
	case SLUICE_ALGO_COMPOSITE:
		break; /* the parts are borrowed */
#define DESTROY(K, name)                               \
	case SLUICE_ALGO_##K:                          \
		sluice_##name##_destroy(&l->u.name); \
		break;
		SLUICE_ALGOS(DESTROY)
#undef DESTROY
	case SLUICE_ALGO_NONE:
		break; /* new() never makes one */
	}
	free(l);
}

sluice_algo_t sluice_limiter_algo(const sluice_limiter_t *l)
{
	return l->algo;
}

const sluice_clock_t *sluice_limiter_clock(const sluice_limiter_t *l)
{
	return l->clock;
}

int sluice_limiter_acquire_at(sluice_limiter_t *l, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	switch (l->algo) {
	case SLUICE_ALGO_COMPOSITE:
		return sluice_composite_acquire_at(&l->u.composite, n, now, d);
#define ACQUIRE(K, name)        \
	case SLUICE_ALGO_##K: \
		return sluice_##name##_acquire_at(&l->u.name, n, now, d);
		SLUICE_ALGOS(ACQUIRE)
#undef ACQUIRE
	case SLUICE_ALGO_NONE:
		break;
	}
	return SLUICE_EALGO;
}

int sluice_limiter_acquire(sluice_limiter_t *l, uint64_t n, sluice_decision_t *d)
{
	return sluice_limiter_acquire_at(l, n, sluice_clock_now(l->clock), d);
}

int sluice_limiter_release(sluice_limiter_t *l, uint64_t n)
{
	switch (l->algo) {
	case SLUICE_ALGO_COMPOSITE:
		return sluice_composite_release(&l->u.composite, n);
	case SLUICE_ALGO_INFLIGHT:
		return sluice_inflight_release(&l->u.inflight, n);
	default:
		return 0; /* arrivals, not work in progress: nothing to end */
	}
}

int sluice_limiter_refund(sluice_limiter_t *l, uint64_t n, const sluice_decision_t *admitted)
{
	switch (l->algo) {
	case SLUICE_ALGO_COMPOSITE:
		/* The parts' own decisions are gone: refunding by the
		 * composite's time could hit the wrong bucket of a part. */
		return SLUICE_ENOTSUP;
#define REFUND(K, name)         \
	case SLUICE_ALGO_##K: \
		return sluice_##name##_refund(&l->u.name, n, admitted);
		SLUICE_ALGOS(REFUND)
#undef REFUND
	case SLUICE_ALGO_NONE:
		break;
	}
	return SLUICE_EALGO;
}

/* Book a slot where the algorithm can: 1 booked (d->delay_ns is the
 * delay), 0 too far away (nothing booked), SLUICE_ENOTSUP if it cannot. */
static int reserve_at(sluice_limiter_t *l, uint64_t n, uint64_t now, uint64_t max_delay,
                      sluice_decision_t *d)
{
	switch (l->algo) {
	case SLUICE_ALGO_GCRA:
		return sluice_gcra_reserve_at(&l->u.gcra, n, now, max_delay, d);
	case SLUICE_ALGO_WARMUP:
		return sluice_warmup_reserve_at(&l->u.warmup, n, now, max_delay, d);
	case SLUICE_ALGO_LEAKY:
		if (l->u.leaky.mode == SLUICE_LEAKY_SHAPER)
			return sluice_leaky_reserve_at(&l->u.leaky, n, now, max_delay, d);
		return SLUICE_ENOTSUP; /* a meter never queues: poll it */
	default:
		return SLUICE_ENOTSUP;
	}
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ULL),
		               .tv_nsec = (long)(ns % 1000000000ULL) };
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

int sluice_limiter_wait(sluice_limiter_t *l, uint64_t n, uint64_t timeout_ns, sluice_decision_t *d)
{
	sluice_decision_t local;
	if (!d)
		d = &local;
	uint64_t start = sluice_clock_monotonic_ns();
	int rc = reserve_at(l, n, sluice_clock_now(l->clock), timeout_ns, d);
	if (rc != SLUICE_ENOTSUP) {
		if (rc == 0)
			return SLUICE_ETIMEDOUT; /* nothing was booked */
		if (rc < 0)
			return rc;
		if (d->delay_ns)
			sleep_ns(d->delay_ns);
		return 1;
	}
	for (;;) {
		rc = sluice_limiter_acquire(l, n, d);
		if (rc != 0)
			return rc; /* admitted, or an error such as ETOOBIG */
		uint64_t waited = sluice_clock_monotonic_ns() - start;
		if (d->retry_after_ns == SLUICE_NEVER || waited >= timeout_ns ||
		    d->retry_after_ns > timeout_ns - waited)
			return SLUICE_ETIMEDOUT; /* refused: nothing was taken */
		/* a concurrency limiter refuses with retry_after 0 (a slot may
		 * free at any instant): poll every 100 us, not in a busy loop */
		sleep_ns(d->retry_after_ns ? d->retry_after_ns : 100000);
	}
}
