/* SPDX-License-Identifier: MIT */
/*
 * limiter.c - the generic handle and the composite: dispatch to the
 * algorithm of each handle, the composite's all-or-nothing over handles,
 * and the waits (sluice_limiter_wait_until(), sluice_limiter_wait()).
 *
 * DESIGN: a handle is an algorithm tag plus the algorithm's own struct, allocated
 * together (aligned to a cache line, as the algorithms' hot words expect).
 * Dispatch is a switch on the tag, generated from SLUICE_ALGOS where every
 * algorithm has the verb, written out where only some have it:
 * each case calls the algorithm's public function, so every guarantee,
 * ordering and error is exactly the algorithm's.  Nothing here is shared
 * between threads beyond what the algorithms share.
 *
 * Why the composite lives here: its parts are handles, so it calls the
 * handle's acquire/refund/release/available, and a handle can hold a
 * composite, so the handle calls the composite.  In two files that was a
 * link cycle (composite.c <-> limiter.c); splitting them the other way
 * (a composite of algorithm structs, not handles) would have duplicated the
 * dispatch.  One module, one file: both directions are calls inside it.
 *
 * THE COMPOSITE: ask the parts in order with the same n and the same time; keep
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
		sluice_keyed_t *keyed; /* borrowed */
		struct { const sluice_limiter_ops_t *ops; void *ctx; } external;
#define MEMBER(K, name) sluice_##name##_t name;
		SLUICE_ALGOS(MEMBER)
#undef MEMBER
	} u;
};

/* external limiters: at the end of the file */
static int external_acquire_at(sluice_limiter_t *l, uint64_t n, uint64_t now, sluice_decision_t *d);
static int external_refund(sluice_limiter_t *l, uint64_t n, const sluice_decision_t *admitted);
static int external_available_at(sluice_limiter_t *l, uint64_t now, uint64_t *out);
static void external_free(sluice_limiter_t *l);

int sluice_limiter_config_check(const sluice_limiter_config_t *cfg)
{
	if (!cfg)
		return SLUICE_EINVAL;
	switch (cfg->algo) {
	case SLUICE_ALGO_KEYED:
		return cfg->keyed ? 0 : SLUICE_EINVAL; /* the table is borrowed, already made */
	case SLUICE_ALGO_COMPOSITE:
		return sluice_composite_config_check(&cfg->composite);
#define CHECK(K, name)        \
	case SLUICE_ALGO_##K: \
		return sluice_##name##_config_check(&cfg->name);
		SLUICE_ALGOS(CHECK)
#undef CHECK
	default:
		return SLUICE_EALGO;
	}
}

int sluice_limiter_new(const sluice_limiter_config_t *cfg, sluice_limiter_t **out)
{
	if (!out)
		return SLUICE_EINVAL;
	/* Checked before the allocation, so an invalid config is never
	 * answered SLUICE_ENOMEM; the init below can then fail only so. */
	int rc = sluice_limiter_config_check(cfg);
	if (rc != 0)
		return rc;
	sluice_limiter_t *l = aligned_alloc(SLUICE_CACHELINE, sizeof(*l));
	if (!l)
		return SLUICE_ENOMEM;
	memset(l, 0, sizeof(*l));
	l->algo = cfg->algo;
	switch (cfg->algo) {
	case SLUICE_ALGO_KEYED:
		/* the table is borrowed; its handle knows the clock it attached with */
		rc = cfg->keyed ? 0 : SLUICE_EINVAL;
		l->u.keyed = cfg->keyed;
		l->clock = cfg->keyed ? cfg->keyed->clock : NULL;
		break;
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
	case SLUICE_ALGO_KEYED:
		break; /* the parts and the table are borrowed */
	case SLUICE_ALGO_EXTERNAL:
		external_free(l);
		break;
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

static int composite_take(sluice_composite_t *c, const void *key, size_t keylen, uint64_t n,
                          uint64_t now, sluice_decision_t *d,
                          sluice_decision_t got[SLUICE_COMPOSITE_MAX]);
static int composite_release(sluice_composite_t *c, const void *key, size_t keylen, uint64_t n);

/* One body for the keyed and the plain calls (inlined into both, so the
 * plain path pays no extra call): a keyed table decides for @key; every
 * other algorithm ignores it; a composite hands it to each part. */
static inline int acquire_at(sluice_limiter_t *l, const void *key, size_t keylen, uint64_t n,
                             uint64_t now, sluice_decision_t *d)
{
	switch (l->algo) {
	case SLUICE_ALGO_COMPOSITE:
		/* out of line: its array of part decisions would put a stack
		 * protector check on every other algorithm's path here */
		return sluice_composite_acquire_key_at(&l->u.composite, key, keylen, n, now, d, NULL);
	case SLUICE_ALGO_KEYED:
		if (!key)
			return SLUICE_EKEYLEN; /* the plain calls: no key */
		return sluice_keyed_acquire_at(l->u.keyed, key, keylen, n, now, d);
	case SLUICE_ALGO_EXTERNAL:
		return external_acquire_at(l, n, now, d); /* no key */
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

int sluice_limiter_acquire_at(sluice_limiter_t *l, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	return acquire_at(l, NULL, 0, n, now, d);
}

int sluice_limiter_acquire_key_at(sluice_limiter_t *l, const void *key, size_t keylen, uint64_t n,
                                  uint64_t now, sluice_decision_t *d)
{
	return acquire_at(l, key, keylen, n, now, d);
}

int sluice_limiter_acquire_key(sluice_limiter_t *l, const void *key, size_t keylen, uint64_t n,
                               sluice_decision_t *d)
{
	return acquire_at(l, key, keylen, n, sluice_clock_now(l->clock), d);
}

int sluice_limiter_acquire(sluice_limiter_t *l, uint64_t n, sluice_decision_t *d)
{
	return sluice_limiter_acquire_at(l, n, sluice_clock_now(l->clock), d);
}

static inline int release(sluice_limiter_t *l, const void *key, size_t keylen, uint64_t n)
{
	switch (l->algo) {
	case SLUICE_ALGO_COMPOSITE:
		return composite_release(&l->u.composite, key, keylen, n);
	case SLUICE_ALGO_INFLIGHT:
		return sluice_inflight_release(&l->u.inflight, n);
	case SLUICE_ALGO_KEYED:
		/* an INFLIGHT table ends @key's requests; the others count
		 * arrivals: nothing to end */
		if (l->u.keyed->algo != SLUICE_ALGO_INFLIGHT)
			return 0;
		return key ? sluice_keyed_release(l->u.keyed, key, keylen, n) : SLUICE_EKEYLEN;
	default:
		return 0; /* arrivals, not work in progress: nothing to end */
	}
}

int sluice_limiter_release(sluice_limiter_t *l, uint64_t n)
{
	return release(l, NULL, 0, n);
}

int sluice_limiter_release_key(sluice_limiter_t *l, const void *key, size_t keylen, uint64_t n)
{
	return release(l, key, keylen, n);
}

static inline int refund(sluice_limiter_t *l, const void *key, size_t keylen, uint64_t n,
                         const sluice_decision_t *admitted)
{
	switch (l->algo) {
	case SLUICE_ALGO_COMPOSITE:
		/* The parts' own decisions are gone: refunding by the
		 * composite's time could hit the wrong bucket of a part. */
		return SLUICE_ENOTSUP;
	case SLUICE_ALGO_KEYED:
		if (!key)
			return SLUICE_EKEYLEN;
		return sluice_keyed_refund(l->u.keyed, key, keylen, n, admitted);
	case SLUICE_ALGO_EXTERNAL:
		return external_refund(l, n, admitted);
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

int sluice_limiter_refund(sluice_limiter_t *l, uint64_t n, const sluice_decision_t *admitted)
{
	return refund(l, NULL, 0, n, admitted);
}

int sluice_limiter_refund_key(sluice_limiter_t *l, const void *key, size_t keylen, uint64_t n,
                              const sluice_decision_t *admitted)
{
	return refund(l, key, keylen, n, admitted);
}

/* ---- booking ----------------------------------------------------------- */

int sluice_limiter_reserve_at(sluice_limiter_t *l, uint64_t n, uint64_t now, uint64_t max_delay_ns,
                              sluice_decision_t *d)
{
	if (!l)
		return SLUICE_EINVAL;
	switch (l->algo) {
	case SLUICE_ALGO_GCRA:
		return sluice_gcra_reserve_at(&l->u.gcra, n, now, max_delay_ns, d);
	case SLUICE_ALGO_WARMUP:
		return sluice_warmup_reserve_at(&l->u.warmup, n, now, max_delay_ns, d);
	case SLUICE_ALGO_LEAKY:
		if (l->u.leaky.mode == SLUICE_LEAKY_SHAPER)
			return sluice_leaky_reserve_at(&l->u.leaky, n, now, max_delay_ns, d);
		return SLUICE_ENOTSUP; /* a meter never queues: poll it */
	default:
		/* Windows, the log, decay and in-flight count what passed,
		 * with no slot to hold for later.  A composite cannot book
		 * either: its parts would give different slots, and a caller
		 * proceeding at the latest would use an earlier part's slot
		 * late, bunching that part's traffic beyond its bound. */
		return SLUICE_ENOTSUP;
	}
}

int sluice_limiter_reserve(sluice_limiter_t *l, uint64_t n, uint64_t max_delay_ns,
                           sluice_decision_t *d)
{
	if (!l)
		return SLUICE_EINVAL;
	return sluice_limiter_reserve_at(l, n, sluice_clock_now(l->clock), max_delay_ns, d);
}

int sluice_limiter_cancel(sluice_limiter_t *l, uint64_t n, const sluice_decision_t *booked)
{
	if (!l)
		return SLUICE_EINVAL;
	/* Only the bookers book (reserve); the others take now, and refund
	 * gives back. */
	if (l->algo == SLUICE_ALGO_GCRA)
		return sluice_gcra_cancel(&l->u.gcra, n, booked);
	if (l->algo == SLUICE_ALGO_WARMUP)
		return sluice_warmup_cancel(&l->u.warmup, n, booked);
	if (l->algo == SLUICE_ALGO_LEAKY)
		return sluice_leaky_cancel(&l->u.leaky, n, booked);
	return l->algo == SLUICE_ALGO_NONE ? SLUICE_EALGO : SLUICE_ENOTSUP;
}


/* ---- queries and live changes ------------------------------------------- */

int sluice_limiter_available_at(sluice_limiter_t *l, uint64_t now, uint64_t *out)
{
	if (!l || !out)
		return SLUICE_EINVAL;
	switch (l->algo) {
	case SLUICE_ALGO_GCRA:
		*out = sluice_gcra_available_at(&l->u.gcra, now);
		return 0;
	case SLUICE_ALGO_LEAKY:
		*out = sluice_leaky_available_at(&l->u.leaky, now);
		return 0;
	case SLUICE_ALGO_WARMUP:
		*out = sluice_warmup_available_at(&l->u.warmup, now);
		return 0;
	case SLUICE_ALGO_DECAY:
		*out = sluice_decay_available_at(&l->u.decay, now);
		return 0;
	case SLUICE_ALGO_FIXED:
		*out = sluice_fixed_available_at(&l->u.fixed, now);
		return 0;
	case SLUICE_ALGO_WINDOW:
		*out = sluice_window_available_at(&l->u.window, now);
		return 0;
	case SLUICE_ALGO_LOG:
		*out = sluice_log_available_at(&l->u.log, now);
		return 0;
	case SLUICE_ALGO_INFLIGHT:
		*out = sluice_inflight_available(&l->u.inflight); /* takes no time */
		return 0;
	case SLUICE_ALGO_COMPOSITE:
		return sluice_composite_available_at(&l->u.composite, now, out);
	case SLUICE_ALGO_KEYED:
		return SLUICE_ENOTSUP; /* available for which key? */
	case SLUICE_ALGO_EXTERNAL:
		return external_available_at(l, now, out);
	case SLUICE_ALGO_NONE:
		break;
	}
	return SLUICE_EALGO;
}

int sluice_limiter_available(sluice_limiter_t *l, uint64_t *out)
{
	if (!l)
		return SLUICE_EINVAL;
	return sluice_limiter_available_at(l, sluice_clock_now(l->clock), out);
}

int sluice_limiter_set_rate(sluice_limiter_t *l, uint64_t rate, uint64_t period_ns)
{
	if (!l)
		return SLUICE_EINVAL;
	switch (l->algo) {
	case SLUICE_ALGO_GCRA:
		return sluice_gcra_set_rate(&l->u.gcra, rate, period_ns);
	case SLUICE_ALGO_LEAKY:
		return sluice_leaky_set_rate(&l->u.leaky, rate, period_ns);
	case SLUICE_ALGO_WARMUP:
		return sluice_warmup_set_rate(&l->u.warmup, rate, period_ns);
	case SLUICE_ALGO_NONE:
		return SLUICE_EALGO;
	default:
		/* windows, log, decay, in-flight: a limit, not a rate (set_limit);
		 * a composite: which part's? change the part's own handle */
		return SLUICE_ENOTSUP;
	}
}

int sluice_limiter_set_burst(sluice_limiter_t *l, uint64_t burst)
{
	if (!l)
		return SLUICE_EINVAL;
	if (l->algo == SLUICE_ALGO_GCRA)
		return sluice_gcra_set_burst(&l->u.gcra, burst);
	if (l->algo == SLUICE_ALGO_LEAKY)
		return sluice_leaky_set_burst(&l->u.leaky, burst); /* the depth D */
	/* the others have no burst apart from the limit itself */
	return l->algo == SLUICE_ALGO_NONE ? SLUICE_EALGO : SLUICE_ENOTSUP;
}

int sluice_limiter_set_limit(sluice_limiter_t *l, uint64_t limit)
{
	if (!l)
		return SLUICE_EINVAL;
	switch (l->algo) {
	case SLUICE_ALGO_DECAY:
		return sluice_decay_set_limit(&l->u.decay, limit);
	case SLUICE_ALGO_FIXED:
		return sluice_fixed_set_limit(&l->u.fixed, limit);
	case SLUICE_ALGO_WINDOW:
		return sluice_window_set_limit(&l->u.window, limit);
	case SLUICE_ALGO_LOG:
		return sluice_log_set_limit(&l->u.log, limit);
	case SLUICE_ALGO_INFLIGHT:
		return sluice_inflight_set_limit(&l->u.inflight, limit);
	case SLUICE_ALGO_NONE:
		return SLUICE_EALGO;
	default:
		/* GCRA, leaky: a rate and a burst (set_rate, set_burst);
		 * warm-up: a rate (set_rate), whose limit follows from it;
		 * a composite: which part's? */
		return SLUICE_ENOTSUP;
	}
}

/* ---- waits ----------------------------------------------------------------- */

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ULL),
		               .tv_nsec = (long)(ns % 1000000000ULL) };
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

int sluice_limiter_wait_until(sluice_limiter_t *l, uint64_t n, uint64_t deadline_ns,
                              sluice_decision_t *d)
{
	if (!l)
		return SLUICE_EINVAL;
	sluice_decision_t local;
	if (!d)
		d = &local;
	uint64_t now = sluice_clock_now(l->clock);
	uint64_t budget = deadline_ns > now ? deadline_ns - now : 0;
	int rc = sluice_limiter_reserve_at(l, n, now, budget, d);
	if (rc != SLUICE_ENOTSUP) {
		if (rc == 0)
			return SLUICE_ETIMEDOUT; /* nothing was booked */
		if (rc < 0)
			return rc;
		if (d->delay_ns)
			sleep_ns(d->delay_ns);
		return 1;
	}
	/* Polled.  The deadline is on the limiter's clock; the sleeps are on
	 * CLOCK_MONOTONIC, and their total is bounded by the budget measured
	 * there too, so a clock that does not move while we sleep (a manual
	 * clock nobody advances, a stopped ticker's last reading) ends the
	 * wait after the budget instead of polling for ever. */
	uint64_t start = sluice_clock_monotonic_ns();
	for (;;) {
		rc = sluice_limiter_acquire_at(l, n, now, d);
		if (rc != 0)
			return rc; /* admitted, or an error such as ETOOBIG */
		uint64_t slept = sluice_clock_monotonic_ns() - start;
		uint64_t left = now < deadline_ns ? deadline_ns - now : 0;
		if (slept >= budget)
			left = 0;
		else if (budget - slept < left)
			left = budget - slept;
		if (d->retry_after_ns == SLUICE_NEVER || left == 0 || d->retry_after_ns > left)
			return SLUICE_ETIMEDOUT; /* refused: nothing was taken */
		/* a concurrency limiter refuses with retry_after 0 (a slot may
		 * free at any instant): poll every 100 us, not in a busy loop */
		uint64_t nap = d->retry_after_ns ? d->retry_after_ns : 100000;
		sleep_ns(nap < left ? nap : left);
		now = sluice_clock_now(l->clock);
	}
}

int sluice_limiter_wait(sluice_limiter_t *l, uint64_t n, uint64_t timeout_ns, sluice_decision_t *d)
{
	if (!l)
		return SLUICE_EINVAL;
	uint64_t now = sluice_clock_now(l->clock);
	/* saturating: a timeout past the end of the time base waits as long
	 * as the time base allows */
	uint64_t deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
	return sluice_limiter_wait_until(l, n, deadline, d);
}

/* ---- the composite ------------------------------------------------------ */

/* The one validator of init and config_check: it reads the parts' handles,
 * which must exist (the composite borrows them), and allocates nothing. */
int sluice_composite_config_check(const sluice_composite_config_t *cfg)
{
	if (!cfg)
		return SLUICE_EINVAL;
	if (cfg->count < 2 || cfg->count > SLUICE_COMPOSITE_MAX)
		return SLUICE_ECOUNT;
	for (unsigned i = 0; i < cfg->count; i++) {
		if (!cfg->parts[i])
			return SLUICE_ECOUNT;
		if (sluice_limiter_algo(cfg->parts[i]) == SLUICE_ALGO_COMPOSITE)
			return SLUICE_EALGO;
		/* Parts are never composites, so a shared limiter is always
		 * the same handle, or two keyed handles over the same table
		 * (each charged per listing): pointer equality finds both. */
		for (unsigned k = 0; k < i; k++)
			if (cfg->parts[k] == cfg->parts[i] ||
			    (cfg->parts[k]->algo == SLUICE_ALGO_KEYED &&
			     cfg->parts[i]->algo == SLUICE_ALGO_KEYED &&
			     cfg->parts[k]->u.keyed == cfg->parts[i]->u.keyed))
				return SLUICE_EDUPLICATE;
	}
	return 0;
}

int sluice_composite_init(sluice_composite_t *c, const sluice_composite_config_t *cfg)
{
	if (!c)
		return SLUICE_EINVAL;
	int rc = sluice_composite_config_check(cfg);
	if (rc != 0)
		return rc;
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
	return composite_take(c, NULL, 0, n, now, d, got);
}

int sluice_composite_acquire_each_at(sluice_composite_t *c, uint64_t n, uint64_t now,
                                     sluice_decision_t *d, sluice_decision_t got[SLUICE_COMPOSITE_MAX])
{
	return composite_take(c, NULL, 0, n, now, d, got);
}

int sluice_composite_acquire_key_at(sluice_composite_t *c, const void *key, size_t keylen,
                                    uint64_t n, uint64_t now, sluice_decision_t *d,
                                    sluice_decision_t each[SLUICE_COMPOSITE_MAX])
{
	sluice_decision_t got[SLUICE_COMPOSITE_MAX];
	return composite_take(c, key, keylen, n, now, d, each ? each : got);
}

/* Every part in order; the first that does not admit stops, and the parts
 * before it give back what they took (a keyed part for the same @key). */
static int composite_take(sluice_composite_t *c, const void *key, size_t keylen, uint64_t n,
                          uint64_t now, sluice_decision_t *d,
                          sluice_decision_t got[SLUICE_COMPOSITE_MAX])
{
	unsigned i;
	int rc = 1;
	if (SLUICE_UNLIKELY(n == 0))
		return SLUICE_EINVAL; /* @d and @got untouched, as every part does */
	for (i = 0; i < c->count; i++) {
		rc = acquire_at(c->parts[i], key, keylen, n, now, &got[i]);
		if (rc != 1)
			break;
	}
	if (rc != 1) {
		/* give back what the parts before the refusal took */
		for (unsigned k = i; k-- > 0;) {
			/* SLUICE_EEXPIRED: the part's window ended meanwhile, so
			 * its permits count no more: nothing left unreturned */
			int r = refund(c->parts[k], key, keylen, n, &got[k]);
			if (r != 0 && r != SLUICE_EEXPIRED)
				atomic_fetch_add_explicit(&c->unreturned, 1, memory_order_relaxed);
		}
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
	return composite_release(c, NULL, 0, n);
}

int sluice_composite_release_key(sluice_composite_t *c, const void *key, size_t keylen, uint64_t n)
{
	return composite_release(c, key, keylen, n);
}

static int composite_release(sluice_composite_t *c, const void *key, size_t keylen, uint64_t n)
{
	int first = 0;
	for (unsigned i = 0; i < c->count; i++) {
		int rc = release(c->parts[i], key, keylen, n);
		if (rc != 0 && first == 0)
			first = rc;
	}
	return first;
}

uint64_t sluice_composite_unreturned(const sluice_composite_t *c)
{
	return atomic_load_explicit(&((sluice_composite_t *)c)->unreturned, memory_order_relaxed);
}

int sluice_composite_available_at(sluice_composite_t *c, uint64_t now, uint64_t *out)
{
	if (!c || !out)
		return SLUICE_EINVAL;
	/* All or nothing: n passes only if it passes every part, so the
	 * largest n is the smallest of the parts' (each a snapshot, taken one
	 * after the other: concurrent decisions may change any of them). */
	uint64_t least = UINT64_MAX;
	for (unsigned i = 0; i < c->count; i++) {
		uint64_t v;
		int rc = sluice_limiter_available_at(c->parts[i], now, &v);
		if (rc != 0)
			return rc;
		if (v < least)
			least = v;
	}
	*out = least;
	return 0;
}

/* ---- external limiters ---------------------------------------------------- */

/*
 * A limiter whose state lives outside this library (libsluice-redis): the
 * handle keeps the caller's ops and context and calls them.  The core
 * library links nothing for it; every guarantee is the ops' own.  Reserve,
 * cancel, release and the setters are SLUICE_ENOTSUP / no-ops through the
 * handle's existing defaults.
 */
int sluice_limiter_new_external(const sluice_limiter_ops_t *ops, void *ctx,
                                const sluice_clock_t *clock, sluice_limiter_t **out)
{
	if (!ops || !ops->acquire_at || !out)
		return SLUICE_EINVAL;
	sluice_limiter_t *l = aligned_alloc(SLUICE_CACHELINE, sizeof(*l));
	if (!l)
		return SLUICE_ENOMEM;
	memset(l, 0, sizeof(*l));
	l->algo = SLUICE_ALGO_EXTERNAL;
	l->clock = clock ? clock : &sluice_clock_monotonic;
	l->u.external.ops = ops;
	l->u.external.ctx = ctx;
	*out = l;
	return 0;
}

static int external_acquire_at(sluice_limiter_t *l, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	return l->u.external.ops->acquire_at(l->u.external.ctx, n, now, d);
}

static int external_refund(sluice_limiter_t *l, uint64_t n, const sluice_decision_t *admitted)
{
	if (!l->u.external.ops->refund)
		return SLUICE_ENOTSUP;
	return l->u.external.ops->refund(l->u.external.ctx, n, admitted);
}

static int external_available_at(sluice_limiter_t *l, uint64_t now, uint64_t *out)
{
	if (!l->u.external.ops->available_at)
		return SLUICE_ENOTSUP;
	return l->u.external.ops->available_at(l->u.external.ctx, now, out);
}

static void external_free(sluice_limiter_t *l)
{
	if (l->u.external.ops->free)
		l->u.external.ops->free(l->u.external.ctx);
}
