/* SPDX-License-Identifier: MIT */
/*
 * rules/backend.c - rules on a backend (rules.h BACKENDS): the one mapping
 * from a rule to a libsluice-redis limit, the backends an engine holds,
 * and the decision through them.
 *
 * DESIGN.  This is the only file of libsluice-rules that includes
 * sluice/redis.h.  With SLUICE_RULES_REDIS 0 (a build without hiredis) it
 * says no backend type is built, and the loader refuses `type: redis` with
 * an error naming the build option; the library exports the same symbols
 * and installs the same headers either way (issue 28, item 6), and nothing
 * below that needs libsluice-redis is reached.
 *
 * What a rule is on Redis: a global rule one sluice_redis_limit_t named
 * "<id>/<algorithm>" (the algorithm in the name: another algorithm's key
 * has another Redis type, and a script meeting it fails, which would open
 * the breaker for every rule on the backend); a per-key rule one
 * sluice_redis_keyed_t per dimension, named "<id>/<algorithm>:<dimension>",
 * each key sent in hex (a key may hold any byte; a Redis limit name no
 * NUL).  The fallback, lease and budget are libsluice-redis's own: the
 * rule's parameters and the backend's go into one
 * sluice_redis_limit_config_t (limit_config below), which the loader
 * validates and the engine builds with, so a rule the loader passed is
 * never refused by the build for a parameter.
 *
 * The decision is sluice_redis_acquire() / sluice_redis_acquire_key():
 * lock-free and allocation-free (redis.h); the hex key is built on the
 * stack.  Nothing here locks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_internal.h"
#include "sluice/error.h"
#include "sluice/parse.h"

#if SLUICE_RULES_REDIS
#include "sluice/redis.h"

_Static_assert(SLUICE__BACKEND_LEASE_MAX == SLUICE_REDIS_LEASE_MAX, "lease_max's range");
_Static_assert(SLUICE__BACKEND_KEY_MAX * 2 <= SLUICE_REDIS_KEY_MAX, "hex keys fit Redis's");
_Static_assert(SLUICE_RULES_ADDRESSES_MAX == SLUICE_REDIS_ADDRESSES_MAX, "a backend's addresses");
_Static_assert((int)SLUICE_RULES_BACKEND_LOCAL == (int)SLUICE_REDIS_LOCAL &&
                       (int)SLUICE_RULES_BACKEND_ALLOW == (int)SLUICE_REDIS_ALLOW &&
                       (int)SLUICE_RULES_BACKEND_DENY == (int)SLUICE_REDIS_DENY,
               "the file's fallbacks are libsluice-redis's");
_Static_assert((int)SLUICE_SOURCE_REDIS_LEASE == (int)SLUICE_REDIS_FROM_LEASE &&
                       (int)SLUICE_SOURCE_REDIS_REFUSAL == (int)SLUICE_REDIS_FROM_REFUSAL &&
                       (int)SLUICE_SOURCE_FALLBACK == (int)SLUICE_REDIS_FROM_FALLBACK,
               "a verdict's source is libsluice-redis's");
#endif

int sluice__backend_built(sluice_rules_backend_type_t t)
{
	return t == SLUICE_RULES_BACKEND_REDIS && SLUICE_RULES_REDIS;
}

int sluice__backend_algo(sluice_algo_t a)
{
	return a == SLUICE_ALGO_GCRA || a == SLUICE_ALGO_FIXED || a == SLUICE_ALGO_WINDOW ||
	       a == SLUICE_ALGO_LOG;
}

uint64_t sluice__backend_need(const sluice_rule_t *r)
{
	if (!r->per_key)
		return 1;
	uint64_t cap = 1;
	while (cap < r->keys.capacity)
		cap <<= 1;
	return cap * r->ndims;
}

#if SLUICE_RULES_REDIS

/* The one mapping: rule @r on its backend as a Redis limit named @name.
 * GCRA: the limit is the burst, rate per period (redis.h's fields). */
static void limit_config(const sluice_rule_t *r, const char *name, const sluice_clock_t *clock,
                         sluice_redis_limit_config_t *out)
{
	const sluice_rules_limit_t *l = &r->limit;
	const sluice_rules_backend_t *b = r->backend;
	*out = (sluice_redis_limit_config_t){
		.name = name,
		.lease_max = b->lease_max,
		.lease_ttl_ns = b->lease_ttl_ns,
		.budget_ns = b->budget_ns,
		.fallback = (sluice_redis_fallback_t)b->fallback,
		.expected_instances = b->expected_instances,
		.clock = clock,
	};
	switch (l->algo) {
	case SLUICE_ALGO_GCRA:
		out->algo = SLUICE_REDIS_GCRA;
		out->limit = l->burst;
		out->rate = l->rate;
		out->window_ns = l->period_ns;
		break;
	case SLUICE_ALGO_FIXED:
		out->algo = SLUICE_REDIS_FIXED;
		out->limit = l->limit;
		out->window_ns = l->window_ns;
		break;
	case SLUICE_ALGO_WINDOW:
		out->algo = SLUICE_REDIS_WINDOW;
		out->limit = l->limit;
		out->window_ns = l->window_ns;
		out->buckets = l->buckets;
		break;
	case SLUICE_ALGO_LOG:
		out->algo = SLUICE_REDIS_LOG;
		out->limit = l->limit;
		out->window_ns = l->window_ns;
		break;
	default:
		out->algo = 0; /* EALGO from libsluice-redis */
		break;
	}
}

static const char *dim_name(const sluice_rules_dim_t *d)
{
	switch (d->kind) {
	case SLUICE_RULES_DIM_IP: return "ip";
	case SLUICE_RULES_DIM_USER: return "user";
	case SLUICE_RULES_DIM_ROUTE: return "route";
	case SLUICE_RULES_DIM_HEADER: return "header";
	case SLUICE_RULES_DIM_QUERY: return "query";
	default: return "global";
	}
}

/* The Redis name of @r's limit (@dim UINT32_MAX: global) into @buf.
 * Header names are compared case-insensitively: lower case here, so
 * X-Key and x-key are one limit.  Return: 0, or SLUICE_EINVAL when it
 * does not fit (libsluice-redis takes 256 bytes). */
static int limit_name(const sluice_rule_t *r, uint32_t dim, char *buf, size_t len)
{
	const char *an = sluice_algo_name(r->limit.algo);
	int n;
	if (dim == UINT32_MAX) {
		n = snprintf(buf, len, "%s/%s", r->id, an ? an : "?");
	} else {
		const sluice_rules_dim_t *d = &r->dims[dim];
		n = snprintf(buf, len, "%s/%s:%s%s%s", r->id, an ? an : "?", dim_name(d),
		             d->name ? "." : "", d->name ? d->name : "");
		if (n > 0 && d->kind == SLUICE_RULES_DIM_HEADER)
			for (char *c = buf; *c; c++)
				if (*c >= 'A' && *c <= 'Z')
					*c = (char)(*c - 'A' + 'a');
	}
	return n < 0 || (size_t)n >= len || n > 256 ? SLUICE_EINVAL : 0;
}

int sluice__backend_limit_check(const sluice_rule_t *r, const sluice_clock_t *clock)
{
	char name[300];
	int rc = limit_name(r, r->per_key ? 0 : UINT32_MAX, name, sizeof(name));
	for (uint32_t i = 1; rc == 0 && r->per_key && i < r->ndims; i++)
		rc = limit_name(r, i, name, sizeof(name));
	if (rc != 0)
		return rc;
	sluice_redis_limit_config_t lc;
	limit_config(r, name, clock, &lc);
	return sluice_redis_limit_config_check(&lc);
}

/* The same servers, in the same order, the same Sentinels' name, both a
 * cluster's or neither. */
static int same_addresses(const struct sluice__backend *b, const sluice_rules_backend_t *w)
{
	if (b->naddrs != w->n_addresses || b->cluster != w->cluster ||
	    strcmp(b->sentinel, w->sentinel ? w->sentinel : "") != 0)
		return 0;
	for (uint32_t i = 0; i < b->naddrs; i++)
		if (strcmp(b->addrs[i], w->addresses[i]) != 0)
			return 0;
	return 1;
}

int sluice__backend_same(const struct sluice__backend *b, const sluice_rules_backend_t *w)
{
	return b->pid == getpid() && strcmp(b->host, w->host) == 0 && b->port == w->port &&
	       same_addresses(b, w) &&
	       b->connect_timeout_ns == w->connect_timeout_ns &&
	       b->command_timeout_ns == w->command_timeout_ns &&
	       b->breaker_open_ns == w->breaker_open_ns &&
	       b->breaker_failures == w->breaker_failures &&
	       (w->max_limits == 0 || b->max_limits == w->max_limits);
}

int sluice__backend_open(const sluice_rules_backend_t *w, uint32_t max_limits, uint64_t serial,
                         struct sluice__backend **out)
{
	struct sluice__backend *b = calloc(1, sizeof(*b));
	if (!b)
		return SLUICE_ENOMEM;
	snprintf(b->name, sizeof(b->name), "%s", w->name);
	snprintf(b->address, sizeof(b->address), "%s", w->address);
	snprintf(b->host, sizeof(b->host), "%s", w->host);
	b->port = w->port;
	b->naddrs = w->n_addresses;
	const char *list[SLUICE_RULES_ADDRESSES_MAX];
	for (uint32_t i = 0; i < b->naddrs; i++) {
		snprintf(b->addrs[i], sizeof(b->addrs[i]), "%s", w->addresses[i]);
		list[i] = b->addrs[i];
	}
	snprintf(b->sentinel, sizeof(b->sentinel), "%s", w->sentinel ? w->sentinel : "");
	b->cluster = w->cluster;
	b->connect_timeout_ns = w->connect_timeout_ns;
	b->command_timeout_ns = w->command_timeout_ns;
	b->breaker_open_ns = w->breaker_open_ns;
	b->breaker_failures = w->breaker_failures;
	b->max_limits = w->max_limits ? w->max_limits : max_limits;
	b->pid = getpid();
	b->serial = serial;
	sluice_redis_config_t rc = {
		.host = b->host,
		.port = (int)b->port,
		.connect_timeout_ns = b->connect_timeout_ns,
		.command_timeout_ns = b->command_timeout_ns,
		.breaker_failures = b->breaker_failures,
		.breaker_open_ns = b->breaker_open_ns,
		.max_limits = b->max_limits,
	};
	if (b->naddrs > 1 || b->sentinel[0] || b->cluster) { /* a failover, or a cluster */
		rc.host = NULL;
		rc.port = 0;
		rc.addresses = list;
		rc.n_addresses = b->naddrs;
		rc.sentinel_master = b->sentinel[0] ? b->sentinel : NULL;
		rc.cluster = (int)b->cluster;
	}
	sluice_redis_t *conn;
	int e = sluice_redis_new(&rc, &conn);
	if (e) {
		free(b);
		return e;
	}
	b->conn = conn;
	*out = b;
	return 0;
}

void sluice__backend_close(struct sluice__backend *b)
{
	if (!b)
		return;
	sluice_redis_free(b->conn);
	free(b);
}

void sluice__backend_row(const struct sluice__backend *b, sluice__metrics_backend_row_t *row)
{
	sluice_redis_stats_t s;
	sluice_redis_stats(b->conn, &s);
	row->round_trips = s.round_trips;
	row->lease_admits = s.lease_admits;
	row->remote_refusals = s.remote_refusals;
	row->cache_refusals = s.cache_refusals;
	row->fallback_local = s.fallback_local;
	row->fallback_allow = s.fallback_allow;
	row->fallback_deny = s.fallback_deny;
	row->budget_timeouts = s.budget_timeouts;
	row->io_errors = s.io_errors;
	row->connects = s.connects;
	row->breaker_opened = s.breaker_opened;
	row->batches = s.batches;
	row->primary_changes = s.primary_changes;
	row->readonly_drops = s.readonly_drops;
	row->moved = s.moved;
	row->ask_redirects = s.ask_redirects;
	row->breaker = sluice_redis_breaker(b->conn);
}

int sluice__rlimits_new(struct sluice__rlimits *rl, struct sluice__backend *b,
                        const sluice_rule_t *r, const sluice_clock_t *clock)
{
	memset(rl, 0, sizeof(*rl));
	rl->b = b;
	rl->key_max = r->keys.key_max;
	char name[300];
	sluice_redis_limit_config_t lc;
	int rc;
	if (!r->per_key) {
		if ((rc = limit_name(r, UINT32_MAX, name, sizeof(name))) != 0)
			return rc;
		limit_config(r, name, clock, &lc);
		sluice_redis_limit_t *l;
		rc = sluice_redis_limit_new(b->conn, &lc, &l);
		if (rc == 0)
			rl->global = l;
		return rc;
	}
	uint32_t cap = 1;
	while (cap < r->keys.capacity)
		cap <<= 1;
	for (uint32_t i = 0; i < r->ndims; i++) {
		if ((rc = limit_name(r, i, name, sizeof(name))) != 0)
			return rc;
		limit_config(r, name, clock, &lc);
		sluice_redis_keyed_t *k;
		if ((rc = sluice_redis_keyed_new(b->conn, &lc, cap, &k)) != 0)
			return rc; /* the caller frees what was made */
		rl->keyed[rl->nkeyed++] = k;
	}
	return 0;
}

void sluice__rlimits_free(struct sluice__rlimits *rl)
{
	sluice_redis_limit_free(rl->global);
	for (uint32_t i = 0; i < rl->nkeyed; i++)
		sluice_redis_keyed_free(rl->keyed[i]);
	rl->global = NULL;
	rl->nkeyed = 0;
}

int sluice__rlimits_acquire(const struct sluice__rlimits *rl, uint32_t dim, const void *key,
                            size_t keylen, sluice_decision_t *d, unsigned char *src)
{
	static const char hex[] = "0123456789abcdef";
	sluice_redis_source_t s = 0;
	int rc;
	if (dim == UINT32_MAX) {
		rc = sluice_redis_acquire(rl->global, 1, d, &s);
	} else {
		if (SLUICE_UNLIKELY(keylen > rl->key_max || dim >= rl->nkeyed))
			return SLUICE_EKEYLEN;
		char hk[2 * SLUICE__BACKEND_KEY_MAX];
		const unsigned char *k = key;
		for (size_t i = 0; i < keylen; i++) {
			hk[2 * i] = hex[k[i] >> 4];
			hk[2 * i + 1] = hex[k[i] & 15];
		}
		rc = sluice_redis_acquire_key(rl->keyed[dim], hk, 2 * keylen, 1, d, &s);
	}
	if (s > *src)
		*src = (unsigned char)s; /* fallback > refusal > lease: the most telling */
	return rc;
}

#else /* !SLUICE_RULES_REDIS: the loader refused every backend */

int sluice__backend_limit_check(const sluice_rule_t *r, const sluice_clock_t *clock)
{
	(void)r;
	(void)clock;
	return SLUICE_ENOTSUP;
}

int sluice__backend_same(const struct sluice__backend *b, const sluice_rules_backend_t *want)
{
	(void)b;
	(void)want;
	return 0;
}

int sluice__backend_open(const sluice_rules_backend_t *want, uint32_t max_limits, uint64_t serial,
                         struct sluice__backend **out)
{
	(void)want;
	(void)max_limits;
	(void)serial;
	(void)out;
	return SLUICE_ENOTSUP;
}

void sluice__backend_close(struct sluice__backend *b)
{
	free(b);
}

void sluice__backend_row(const struct sluice__backend *b, sluice__metrics_backend_row_t *row)
{
	(void)b;
	memset(row, 0, sizeof(*row));
}

int sluice__rlimits_new(struct sluice__rlimits *rl, struct sluice__backend *b,
                        const sluice_rule_t *r, const sluice_clock_t *clock)
{
	(void)b;
	(void)r;
	(void)clock;
	memset(rl, 0, sizeof(*rl));
	return SLUICE_ENOTSUP;
}

void sluice__rlimits_free(struct sluice__rlimits *rl)
{
	(void)rl;
}

int sluice__rlimits_acquire(const struct sluice__rlimits *rl, uint32_t dim, const void *key,
                            size_t keylen, sluice_decision_t *d, unsigned char *src)
{
	(void)rl;
	(void)dim;
	(void)key;
	(void)keylen;
	(void)d;
	(void)src;
	return SLUICE_ENOTSUP;
}

#endif
