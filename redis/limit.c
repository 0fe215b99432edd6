/* SPDX-License-Identifier: MIT */
/*
 * limit.c - the limiter face: backends and limits (validation, creation),
 * and the decision path sluice_redis_acquire().
 *
 * DESIGN: a decision first spends from the local lease (lease.c: one CAS).
 * When the lease is short it asks the I/O thread (lease.c: a pending flag,
 * the queue, a sem_post) and polls (sched_yield for the first 100 us, then
 * sleeps of at most 50 us) for
 * one of: a lease that covers it (admitted), a Redis refusal that covers it
 * (refused until the time Redis gave, with no further round trip: the
 * over-limit cache), the breaker leaving closed, or the end of its budget
 * (both: the fallback).  Nothing here blocks on the network, takes a lock or
 * allocates.  After a decision spends from the lease, if the lease held
 * two or more and what is left is at most a quarter of it, it asks for the
 * next lease at once (prefetch, lease_policy.h), so a steady stream finds
 * the next lease installed before this one runs out.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "lease_policy.h"
#include "redis_internal.h"
#include "sluice/static/decision.h" /* sluice__decision_never */

#define MS 1000000ULL

/* A backend: validation, the queue (sized to a power of two at least
 * max_limits, so that one pending request per limit always fits), the
 * semaphore and the I/O thread.  Nothing here talks to Redis: the thread
 * connects, so a server that is down at start costs no caller any wait. */
/* "host:port" or "[v6]:port" into @a; 0 or -1 (redis.h: SLUICE_EINVAL). */
static int parse_address(const char *s, struct sluice__redis_addr *a)
{
	const char *colon = strrchr(s, ':'), *host = s, *host_end = colon;
	if (!colon)
		return -1;
	if (s[0] == '[') { /* [v6]:port */
		host = s + 1;
		host_end = colon > s && colon[-1] == ']' ? colon - 1 : NULL;
		if (!host_end)
			return -1;
	} else if (memchr(s, ':', (size_t)(colon - s))) {
		return -1; /* a bare IPv6 address: its port is ambiguous */
	}
	size_t n = (size_t)(host_end - host);
	if (n == 0 || n >= sizeof(a->host))
		return -1;
	char *end;
	errno = 0;
	long port = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || port < 1 || port > 65535)
		return -1;
	memcpy(a->host, host, n);
	a->host[n] = 0;
	a->port = (int)port;
	return 0;
}

/* @cfg's servers (or Sentinels) into @r; 0 or SLUICE_EINVAL. */
static int addresses_of(const sluice_redis_config_t *cfg, sluice_redis_t *r)
{
	if (!cfg->addresses) {
		if (cfg->n_addresses || cfg->sentinel_master || cfg->port < 1 || cfg->port > 65535)
			return SLUICE_EINVAL;
		const char *host = cfg->host ? cfg->host : "127.0.0.1";
		if (strlen(host) >= sizeof(r->addr[0].host))
			return SLUICE_EINVAL;
		strcpy(r->addr[0].host, host);
		r->addr[0].port = cfg->port;
		r->naddr = 1;
		return 0;
	}
	if (cfg->host || cfg->port || cfg->n_addresses < 1 ||
	    cfg->n_addresses > SLUICE_REDIS_ADDRESSES_MAX)
		return SLUICE_EINVAL;
	for (unsigned i = 0; i < cfg->n_addresses; i++)
		if (!cfg->addresses[i] || parse_address(cfg->addresses[i], &r->addr[i]) != 0)
			return SLUICE_EINVAL;
	r->naddr = cfg->n_addresses;
	if (cfg->sentinel_master) {
		if (cfg->cluster)
			return SLUICE_EINVAL; /* a cluster's nodes are found by its map */
		size_t n = strlen(cfg->sentinel_master);
		if (n == 0 || n >= sizeof(r->master))
			return SLUICE_EINVAL;
		memcpy(r->master, cfg->sentinel_master, n + 1);
	}
	return 0;
}

int sluice_redis_new(const sluice_redis_config_t *cfg, sluice_redis_t **out)
{
	if (!cfg || !out)
		return SLUICE_EINVAL;
	sluice_redis_t *r = aligned_alloc(SLUICE_CACHELINE, sizeof(*r));
	if (!r)
		return SLUICE_ENOMEM;
	memset(r, 0, sizeof(*r));
	int e = cfg->cluster != 0 && cfg->cluster != 1 ? SLUICE_EINVAL : addresses_of(cfg, r);
	if (e) {
		free(r);
		return e;
	}
	r->connect_timeout_ns = cfg->connect_timeout_ns ? cfg->connect_timeout_ns : 50 * MS;
	r->command_timeout_ns = cfg->command_timeout_ns ? cfg->command_timeout_ns : 20 * MS;
	r->breaker_failures = cfg->breaker_failures ? cfg->breaker_failures : 3;
	r->breaker_open_ns = cfg->breaker_open_ns ? cfg->breaker_open_ns : 200 * MS;
	r->max_limits = cfg->max_limits ? cfg->max_limits : 1024;
	r->cluster = cfg->cluster;
	r->map_stale = r->cluster;
	memset(r->slot_node, SLUICE__NODE_NONE, sizeof(r->slot_node));
	uint64_t size = 1;
	while (size < r->max_limits)
		size <<= 1;
	if (sluice__queue_init(&r->queue, size) != 0) {
		free(r);
		return SLUICE_ENOMEM;
	}
	sem_init(&r->wake, 0, 0);
	if (sluice__io_start(r) != 0) {
		sem_destroy(&r->wake);
		free(r->queue.cells);
		free(r);
		return SLUICE_ETHREAD;
	}
	*out = r;
	return 0;
}

void sluice_redis_free(sluice_redis_t *r)
{
	if (!r)
		return;
	sluice__io_stop(r);
	sem_destroy(&r->wake);
	free(r->queue.cells);
	free(r);
}

void sluice_redis_stats(const sluice_redis_t *r, sluice_redis_stats_t *out)
{
	uint64_t *o = (uint64_t *)out;
	for (size_t i = 0; i < SLUICE__REDIS_NSTATS; i++)
		o[i] = atomic_load_explicit(&((sluice_redis_t *)r)->stats[i], memory_order_relaxed);
}

int sluice_redis_breaker(const sluice_redis_t *r)
{
	return atomic_load_explicit(&((sluice_redis_t *)r)->breaker, memory_order_relaxed);
}

/*
 * The local limiter holding this instance's share: the same algorithm, so a
 * fallback keeps the shape of the limit (a GCRA limit stays smooth, a window
 * stays a window), with every count divided by the instances expected.  A
 * share that rounds to 0 would refuse everything while claiming to be a
 * LOCAL fallback: that is SLUICE_EMODE, not a silent DENY.  It runs on the
 * limit's clock, so a test on a manual clock drives it too.
 */
static int make_local(const sluice_redis_limit_config_t *cfg, sluice_limiter_t **out)
{
	uint64_t k = cfg->expected_instances;
	sluice_limiter_config_t lc;
	memset(&lc, 0, sizeof(lc));
	const sluice_clock_t *clk = cfg->clock ? cfg->clock : &sluice_clock_monotonic;
	/* Every algorithm splits the limit: each instance needs at least one. */
	if (k == 0 || cfg->limit / k == 0)
		return SLUICE_EMODE;
	switch (cfg->algo) {
	case SLUICE_REDIS_GCRA:
		if (cfg->rate / k == 0)
			return SLUICE_EMODE;
		lc.algo = SLUICE_ALGO_GCRA;
		lc.gcra = (sluice_gcra_config_t){ .rate = cfg->rate / k, .period_ns = cfg->window_ns,
			                          .burst = cfg->limit / k, .clock = clk };
		break;
	case SLUICE_REDIS_FIXED:
		lc.algo = SLUICE_ALGO_FIXED;
		lc.fixed = (sluice_fixed_config_t){ .limit = cfg->limit / k,
			                            .window_ns = cfg->window_ns, .clock = clk };
		break;
	case SLUICE_REDIS_WINDOW:
		lc.algo = SLUICE_ALGO_WINDOW;
		lc.window = (sluice_window_config_t){ .limit = cfg->limit / k,
			                              .window_ns = cfg->window_ns,
			                              .buckets = cfg->buckets,
			                              .clock = clk };
		break;
	case SLUICE_REDIS_LOG:
		lc.algo = SLUICE_ALGO_LOG;
		lc.log = (sluice_log_config_t){ .limit = cfg->limit / k,
			                        .window_ns = cfg->window_ns, .clock = clk };
		break;
	}
	return sluice_limiter_new(&lc, out);
}

/*
 * Every bound the scripts rely on: Lua numbers are doubles, exact to 2^53,
 * and the scripts compute in microseconds since the epoch (about 2^51 now),
 * so window lengths and T * burst must stay below 2^50 us; T and W must be
 * whole microseconds (Redis TIME's unit) or the Redis side would round a
 * limit the caller did not ask for.  The name becomes the hash tag between
 * braces, so braces in it would move the tag.
 */
static int validate(const sluice_redis_limit_config_t *cfg)
{
	if (!cfg->name || !cfg->name[0] || strlen(cfg->name) > 256 || strpbrk(cfg->name, "{}"))
		return SLUICE_EINVAL;
	if (cfg->algo < SLUICE_REDIS_GCRA || cfg->algo > SLUICE_REDIS_LOG)
		return SLUICE_EALGO;
	if (cfg->limit == 0 || (cfg->algo == SLUICE_REDIS_LOG && cfg->limit > SLUICE_REDIS_LOG_CAP))
		return SLUICE_ELIMIT;
	/* whole microseconds, and below 2^50 us so Lua's doubles stay exact */
	if (cfg->window_ns < 1000 || cfg->window_ns % 1000 || cfg->window_ns / 1000 >= (1ULL << 50))
		return SLUICE_EWINDOW;
	uint64_t w_us = cfg->window_ns / 1000;
	if (cfg->algo == SLUICE_REDIS_WINDOW) {
		if (cfg->buckets < 1 || cfg->buckets > 4096)
			return SLUICE_EBUCKETS;
		if (w_us % cfg->buckets)
			return SLUICE_EWINDOW;
	}
	if (cfg->algo == SLUICE_REDIS_GCRA) {
		if (cfg->rate == 0 || w_us % cfg->rate || cfg->limit > (1ULL << 50) / (w_us / cfg->rate ? w_us / cfg->rate : 1) ||
		    w_us / cfg->rate == 0)
			return SLUICE_ERATE;
	}
	if (cfg->lease_max < 1 || cfg->lease_max > SLUICE_REDIS_LEASE_MAX)
		return SLUICE_ELEASE;
	if (cfg->algo == SLUICE_REDIS_LOG && cfg->lease_ttl_ns >= cfg->window_ns)
		return SLUICE_ELEASE;
	if (cfg->fallback < SLUICE_REDIS_LOCAL || cfg->fallback > SLUICE_REDIS_DENY)
		return SLUICE_EMODE;
	return 0;
}

/* fill @l for @cfg, named @name (the caller validated and made @local) */
void sluice__limit_setup(sluice_redis_limit_t *l, sluice_redis_t *r,
                         const sluice_redis_limit_config_t *cfg, const char *name,
                         sluice_limiter_t *local)
{
	memset(l, 0, sizeof(*l));
	l->r = r;
	l->algo = cfg->algo;
	if (name)
		sluice__limit_name(l, name, strlen(name));
	l->limit = cfg->limit;
	l->window_us = cfg->window_ns / 1000;
	l->T_us = cfg->algo == SLUICE_REDIS_GCRA ? l->window_us / cfg->rate : 0;
	l->burst = cfg->limit;
	l->buckets = cfg->buckets;
	l->lease_max = cfg->lease_max;
	l->ttl_ns = cfg->lease_ttl_ns ? cfg->lease_ttl_ns : 10 * MS;
	if (cfg->algo == SLUICE_REDIS_LOG && l->ttl_ns >= cfg->window_ns)
		l->ttl_ns = cfg->window_ns / 2; /* the default only: a set one was checked */
	l->budget_ns = cfg->budget_ns ? cfg->budget_ns : 1 * MS;
	l->max_n = cfg->limit;
	l->fallback = cfg->fallback;
	l->local = local;
	l->clock = cfg->clock;
	/* the lease word's origin, up to 1 s back so a lease is never at expiry 0 */
	uint64_t t = sluice__limit_now(l);
	l->base_ns = t - (t < 1000 * MS ? t : 1000 * MS);
	atomic_init(&l->lease, 0);
	atomic_init(&l->b, 1);
	l->last_remaining = cfg->limit;
}

/* the keys sluice:{name}:s and sluice:{name}:q (@name: @len bytes, no NUL) */
void sluice__limit_name(sluice_redis_limit_t *l, const char *name, size_t len)
{
	snprintf(l->key[0], sizeof(l->key[0]), "sluice:{%.*s}:s", (int)len, name);
	snprintf(l->key[1], sizeof(l->key[1]), "sluice:{%.*s}:q", (int)len, name);
}

int sluice__limit_validate(const sluice_redis_limit_config_t *cfg, sluice_limiter_t **local)
{
	int rc = validate(cfg);
	if (rc != 0)
		return rc;
	*local = NULL;
	if (cfg->fallback == SLUICE_REDIS_LOCAL)
		return make_local(cfg, local);
	return 0;
}

/* Everything sluice_redis_limit_new() checks of @cfg, with no backend: the
 * rules loader validates a file this way before any connection exists
 * (validation lives in the module, not in its callers).  The LOCAL share
 * is checked by making the local limiter the limit would hold, once. */
int sluice_redis_limit_config_check(const sluice_redis_limit_config_t *cfg)
{
	if (!cfg)
		return SLUICE_EINVAL;
	sluice_limiter_t *local = NULL;
	int rc = sluice__limit_validate(cfg, &local);
	sluice_limiter_free(local);
	return rc;
}

int sluice__limits_reserve(sluice_redis_t *r, unsigned n)
{
	unsigned had = atomic_fetch_add_explicit(&r->nlimits, n, memory_order_relaxed);
	if (had + n > r->max_limits || had + n < had) {
		atomic_fetch_sub_explicit(&r->nlimits, n, memory_order_relaxed);
		return SLUICE_ECAPACITY;
	}
	return 0;
}

int sluice_redis_limit_new(sluice_redis_t *r, const sluice_redis_limit_config_t *cfg,
                           sluice_redis_limit_t **out)
{
	if (!r || !cfg || !out)
		return SLUICE_EINVAL;
	sluice_limiter_t *local;
	int rc = sluice__limit_validate(cfg, &local);
	if (rc != 0)
		return rc;
	if ((rc = sluice__limits_reserve(r, 1)) != 0) {
		sluice_limiter_free(local);
		return rc;
	}
	sluice_redis_limit_t *l = aligned_alloc(SLUICE_CACHELINE, sizeof(*l));
	if (!l) {
		atomic_fetch_sub_explicit(&r->nlimits, 1, memory_order_relaxed);
		sluice_limiter_free(local);
		return SLUICE_ENOMEM;
	}
	sluice__limit_setup(l, r, cfg, cfg->name, local);
	*out = l;
	return 0;
}

/*
 * Freeing a limit never waits for the I/O thread.  Its pending flag says
 * who holds it: IDLE nobody but the caller; QUEUED a request is queued or
 * in flight, so the I/O thread will touch it once more; ORPHAN the same,
 * and its owner has let it go, so the I/O thread frees it when it is done
 * (sluice__limit_done: the end of that request, bounded as every command
 * is, or the drain of an open breaker or of sluice_redis_free).
 */
static void destroy(sluice_redis_limit_t *l)
{
	if (l->owner) {
		sluice__keyed_release(l->owner, l);
		return;
	}
	atomic_fetch_sub_explicit(&l->r->nlimits, 1, memory_order_relaxed);
	sluice_limiter_free(l->local);
	free(l);
}

int sluice__limit_let_go(sluice_redis_limit_t *l)
{
	if (l->r->fork_gen != atomic_load_explicit(&sluice__redis_fork_gen, memory_order_relaxed))
		return 1; /* a fork child: no I/O thread here holds it */
	/* Only the I/O thread moves pending while no decision runs (QUEUED
	 * or ORPHAN -> IDLE), so the second pass succeeds; the bound is for
	 * a caller that decides on a limit it frees. */
	for (int i = 0; i < 64; i++) {
		int seen = SLUICE__IDLE;
		/* acquire: pairs with sluice__limit_done's release, so the I/O
		 * thread's last use of @l happens before the caller frees it */
		if (atomic_compare_exchange_strong_explicit(&l->pending, &seen, SLUICE__QUEUED,
		                                            memory_order_acquire,
		                                            memory_order_relaxed))
			return 1;
		if (seen == SLUICE__ORPHAN)
			return 0; /* freed twice: the first free stands */
		/* release: pairs with sluice__limit_done's acquire, so all the
		 * caller did with @l happens before the I/O thread frees it */
		if (atomic_compare_exchange_strong_explicit(&l->pending, &seen, SLUICE__ORPHAN,
		                                            memory_order_release,
		                                            memory_order_relaxed))
			return 0;
	}
	return 0; /* decisions still queue it: leak rather than free under them */
}

void sluice__limit_done(sluice_redis_limit_t *l)
{
	/* release: pairs with the waiting decision's acquire load in
	 * sluice_redis_acquire, so a decision that sees the count sees the
	 * lease this request installed */
	atomic_fetch_add_explicit(&l->answered, 1, memory_order_release);
	/* acq_rel: the release half pairs with let_go's acquire (IDLE ->
	 * QUEUED), the acquire half with its release (QUEUED -> ORPHAN) */
	if (atomic_exchange_explicit(&l->pending, SLUICE__IDLE, memory_order_acq_rel) ==
	    SLUICE__ORPHAN)
		destroy(l);
}

void sluice_redis_limit_free(sluice_redis_limit_t *l)
{
	if (l && sluice__limit_let_go(l))
		destroy(l);
}

/* The decision's fields from what this instance knows without a round trip:
 * remaining is the local lease's (Redis's own remaining is older than the
 * decision), reset the lease's lapse (an upper bound for a window: the
 * lease ends no later than its window). */
static void fill(sluice_decision_t *d, const sluice_redis_limit_t *l, int allowed, uint64_t left,
                 uint64_t retry, uint64_t now)
{
	if (!d)
		return;
	uint64_t w = atomic_load_explicit(&((sluice_redis_limit_t *)l)->lease, memory_order_relaxed);
	uint64_t exp = l->base_ns + (w >> SLUICE__LEASE_BITS) * 1000;
	*d = (sluice_decision_t){ .allowed = allowed, .limit = l->limit, .remaining = left,
		                  .retry_after_ns = retry, .now_ns = now,
		                  .reset_ns = exp > now ? exp - now : 0 };
}

int sluice_redis_acquire(sluice_redis_limit_t *l, uint64_t n, sluice_decision_t *d,
                         sluice_redis_source_t *src)
{
	if (SLUICE_UNLIKELY(!l || n == 0))
		return SLUICE_EINVAL;
	if (SLUICE_UNLIKELY(n > l->max_n)) {
		sluice__decision_never(d, l->limit, sluice__mono_ns());
		return SLUICE_ETOOBIG;
	}
	sluice_redis_t *r = l->r;
	sluice_redis_source_t from_local;
	if (!src)
		src = &from_local;
	uint64_t left, now;
	if (SLUICE_UNLIKELY(r->fork_gen !=
	                    atomic_load_explicit(&sluice__redis_fork_gen, memory_order_relaxed))) {
		now = sluice__limit_now(l); /* a fork child: the backend is the parent's */
		goto fallback;
	}
	int hot;
	/* acquire: pairs with sluice__limit_done's release (below: why) */
	uint64_t seen = atomic_load_explicit(&l->answered, memory_order_acquire);
	int got = sluice__lease_take(l, n, &left, &now, &hot);
	/* the budget is real time, whatever clock the leases run on */
	uint64_t start = got ? 0 : sluice__mono_ns(), spent = 0;
	while (!got) {
		/* half-open queues the request as closed does: the I/O thread
		 * sends the first one it gets as the probe (breaker.c) */
		if (atomic_load_explicit(&r->breaker, memory_order_relaxed) == SLUICE__BREAKER_OPEN)
			goto fallback;
		/* acquire: pairs with the I/O thread's release store, so the
		 * refused_need read below is the one stored with it */
		uint64_t until = atomic_load_explicit(&l->refused_until, memory_order_acquire);
		if (now < until && n >= atomic_load_explicit(&l->refused_need, memory_order_relaxed)) {
			sluice__stat(r, ST_CACHE_REFUSALS, 1);
			*src = SLUICE_REDIS_FROM_REFUSAL;
			fill(d, l, 0, 0, until - now, now);
			return 0;
		}
		/* asks only when no request was answered since the take that
		 * failed: one answered after it installed a lease (or a
		 * refusal) the next take sees, and asking again would fetch a
		 * second grant for this one decision */
		sluice__lease_want(l, n, hot, &seen);
		if (spent >= l->budget_ns) {
			sluice__stat(r, ST_BUDGET, 1);
			goto fallback;
		}
		if (spent < 100000) {
			/* a round trip on loopback is tens of us: yield for the
			 * first 100 us (a nanosleep costs its timer slack, 50 us
			 * by default, on top of the step) */
			sched_yield();
		} else {
			uint64_t step = l->budget_ns - spent < 50000 ? l->budget_ns - spent : 50000;
			struct timespec ts = { 0, (long)step };
			nanosleep(&ts, NULL);
		}
		seen = atomic_load_explicit(&l->answered, memory_order_acquire);
		got = sluice__lease_take(l, n, &left, &now, &hot);
		spent = sluice__mono_ns() - start;
	}
	sluice__stat(r, ST_LEASE_ADMITS, 1);
	if (sluice__policy_prefetch(atomic_load_explicit(&l->size, memory_order_relaxed), left))
		sluice__lease_want(l, 1, 1, NULL); /* prefetch the next lease: HOT */
	*src = SLUICE_REDIS_FROM_LEASE;
	fill(d, l, 1, left, 0, now);
	return 1;
fallback:
	*src = SLUICE_REDIS_FROM_FALLBACK;
	return sluice__fallback(l, n, now, d);
}

/* ---- behind the generic handle (sluice/limiter.h) ------------------------ */

/* @now is the handle's clock: unused, a Redis limit decides on Redis time
 * and its leases on its own clock (the limit config's). */
static int ext_acquire_at(void *ctx, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	(void)now;
	return sluice_redis_acquire(ctx, n, d, NULL);
}

/* what this instance could admit now without a round trip: its lease */
static int ext_available_at(void *ctx, uint64_t now, uint64_t *out)
{
	(void)now;
	sluice_redis_limit_t *l = ctx;
	*out = sluice__lease_live(l, atomic_load_explicit(&l->lease, memory_order_relaxed));
	return 0;
}

static const sluice_limiter_ops_t ext_ops = {
	.acquire_at = ext_acquire_at,
	/* no refund: giving permits back to Redis would be a round trip on
	 * a decision path; a composite counts it as unreturned (fewer
	 * admissions later, never more) */
	.refund = NULL,
	.available_at = ext_available_at,
	.free = NULL, /* the limit is borrowed */
};

int sluice_redis_limiter_new(sluice_redis_limit_t *l, sluice_limiter_t **out)
{
	if (!l || !out)
		return SLUICE_EINVAL;
	return sluice_limiter_new_external(&ext_ops, l, l->clock, out);
}
