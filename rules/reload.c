/* SPDX-License-Identifier: MIT */
/*
 * rules/reload.c - loads: compile a rule file into a set, find each rule's
 * state again, publish with RCU, free what only the old set used; the
 * region directory that lets processes share states.
 *
 * DESIGN.  Everything here runs under the engine's load mutex (a control
 * path): the states' owner counts, the applied/target parameters and the
 * engine's counters are written only by the mutex holder.  Decisions read
 * the published set and its states without any lock; what they read of a
 * state after publication is immutable except the tables' and limiters'
 * own atomics (their setters are safe while decisions run).
 *
 * A load: (1) parse and validate with the loader, on the engine's clock;
 * (2) for each rule, the state: the old set's rule of the same id with an
 * equal layout (kept, with every key), else a retired state of that id
 * and layout (brought back), else a new state, the old layout's state of
 * that id becoming its ghost (engine.h RELOAD); (3) the route index and
 * its bounds; (4) only when nothing failed, apply the new live parameters
 * with the setters (a setter's EBUSY leaves the change pending: no
 * partial load, because a setter is the last step and cannot fail for a
 * reason a retry does not cure); (5) publish with a release store; (6)
 * wait for a grace period (urcu_bp_synchronize_rcu), then drop the old
 * set's references.  A failure at (1)..(3) drops the new set's references
 * instead: states made for it are freed, the old set is untouched.
 *
 * The region directory (SHARED STATE in engine.h) is rules/region.c's.
 */
/* First: _LGPL_SOURCE and urcu-bp.h, before any system header (it says why). */
#include "urcu_internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "engine_internal.h"
#include "region_internal.h"
#include "sluice/http.h"
#include "sluice/error.h"

/* ---- layouts and states ------------------------------------------- */

static uint64_t bit_width(uint64_t v)
{
	return v ? 64u - (uint64_t)__builtin_clzll(v) : 0;
}

/* On a region, a global rule a keyed table can hold is a table of one
 * key, so every process decides on it (engine.h SHARED STATE). */
#define ONE_KEY_CAPACITY 8u

static int one_key(const sluice_engine_t *e, const sluice_rule_t *r)
{
	return e->region && !r->per_key && !r->backend && !sluice_rule_per_process(r);
}

static void layout_of(const sluice_engine_t *e, const sluice_rule_t *r, struct sluice__layout *L)
{
	memset(L, 0, sizeof(*L));
	const sluice_rules_limit_t *l = &r->limit;
	L->algo = l->algo;
	L->per_key = r->per_key;
	L->ndims = r->per_key ? r->ndims : 0;
	for (uint32_t i = 0; i < L->ndims; i++) {
		L->dims[i].kind = r->dims[i].kind;
		if (r->dims[i].name) {
			snprintf(L->dims[i].name, sizeof(L->dims[i].name), "%s", r->dims[i].name);
			if (r->dims[i].kind == SLUICE_RULES_DIM_HEADER)
				for (char *c = L->dims[i].name; *c; c++)
					if (*c >= 'A' && *c <= 'Z')
						*c = (char)(*c - 'A' + 'a');
		}
	}
	L->window_ns = l->window_ns;
	L->buckets = l->buckets;
	if (r->per_key || one_key(e, r)) {
		L->capacity = r->per_key ? r->keys.capacity : ONE_KEY_CAPACITY;
		L->key_max = r->keys.key_max;
		L->flags = r->keys.flags;
		L->policy = r->keys.policy;
		L->one_key = !r->per_key;
		if (l->algo == SLUICE_ALGO_FIXED || l->algo == SLUICE_ALGO_INFLIGHT)
			L->cbits = bit_width(l->limit); /* the count's width (keyed.h) */
	} else {
		switch (l->algo) {
		case SLUICE_ALGO_LOG: /* its ring holds the limit at init */
			L->fixed[0] = l->limit;
			break;
		case SLUICE_ALGO_WARMUP: /* no live setter */
			L->fixed[0] = l->rate;
			L->fixed[1] = l->period_ns;
			L->fixed[2] = l->warmup_ns;
			break;
		case SLUICE_ALGO_DECAY:
			L->fixed[0] = l->half_life_ns;
			break;
		case SLUICE_ALGO_LEAKY:
			L->shaper = r->fallback.type == SLUICE_RULES_FALLBACK_QUEUE;
			if (L->shaper) { /* a shaper's queue is a time, fixed at init */
				L->fixed[0] = r->fallback.max_wait_ns;
				L->fixed[1] = l->depth;
			}
			break;
		default:
			break;
		}
	}
}

/* ceil(a * b / c), saturating (c > 0: the loader validated rates). */
/* Can a state of layout @have hold a rule of layout @want?  Equal, but for
 * the count's width: a table made for a limit of b bits takes any limit
 * of at most b bits (keyed.h set_limit). */
static int layout_fits(const struct sluice__layout *have, const struct sluice__layout *want)
{
	struct sluice__layout w = *want;
	if (w.cbits <= have->cbits)
		w.cbits = have->cbits;
	return memcmp(have, &w, sizeof(w)) == 0;
}

static uint64_t div_ceil_mul(uint64_t a, uint64_t b, uint64_t c)
{
	__extension__ typedef unsigned __int128 u128;
	u128 p = (u128)a * b;
	p = c ? (p + c - 1) / c : p;
	return p > UINT64_MAX ? UINT64_MAX : (uint64_t)p;
}

uint64_t sluice__memory_ns(const sluice_rule_t *r)
{
	const sluice_rules_limit_t *l = &r->limit;
	switch (l->algo) {
	case SLUICE_ALGO_GCRA:
		return div_ceil_mul(l->burst, l->period_ns, l->rate);
	case SLUICE_ALGO_LEAKY: {
		uint64_t t = div_ceil_mul(l->depth + 1, l->period_ns, l->rate);
		if (!r->per_key && r->fallback.type == SLUICE_RULES_FALLBACK_QUEUE)
			t += r->fallback.max_wait_ns;
		return t;
	}
	case SLUICE_ALGO_FIXED:
	case SLUICE_ALGO_WINDOW:
	case SLUICE_ALGO_LOG:
		return l->window_ns;
	default:
		return SLUICE_ENGINE_GHOST_NS;
	}
}

/* A backend's last reference gone (no set names it, no state holds a
 * limit on it): off the engine's list, its thread stopped. */
void sluice__backend_unref(sluice_engine_t *e, struct sluice__backend *b)
{
	if (!b || --b->owners > 0)
		return;
	for (struct sluice__backend **p = &e->backends; *p; p = &(*p)->next)
		if (*p == b) {
			*p = b->next;
			break;
		}
	sluice__backend_close(b);
}

static void state_free(sluice_engine_t *e, struct sluice__state *st)
{
	if (st->metrics_ok)
		sluice__metrics_free(&st->metrics);
	sluice__region_release(e, st->metrics_held);
	sluice__region_release(e, st->fb_held);
	for (uint32_t i = 0; i < st->ndims; i++) {
		free(st->mem[i]);
		sluice__region_release(e, st->held[i]);
	}
	sluice_limiter_free(st->lim);
	if (st->fb_ok) {
		sluice_stripe_destroy(&st->fb[0]);
		sluice_stripe_destroy(&st->fb[1]);
	}
	if (st->rl.b) {
		/* its limits before the backend they are on (redis.h) */
		struct sluice__backend *b = st->rl.b;
		sluice__rlimits_free(&st->rl);
		sluice__backend_unref(e, b);
	}
	free(st);
}

void sluice__state_unref(sluice_engine_t *e, struct sluice__state *st)
{
	if (st && --st->owners == 0)
		state_free(e, st);
}

static struct sluice__state *ref(struct sluice__state *st)
{
	st->owners++;
	return st;
}

/* A new state for @r (on backend @bk, or NULL: per instance).  Return:
 * the state (owners 1), or NULL and *@rc. */
static struct sluice__state *state_new(sluice_engine_t *e, const sluice_rule_t *r,
                                       const struct sluice__layout *L,
                                       struct sluice__backend *bk, int *rc)
{
	struct sluice__state *st = calloc(1, sizeof(*st));
	if (!st) {
		*rc = SLUICE_ENOMEM;
		return NULL;
	}
	snprintf(st->id, sizeof(st->id), "%s", r->id);
	st->layout = *L;
	st->serial = e->next_serial++;
	st->applied = r->limit;
	st->target = r->limit;
	st->owners = 1;
	atomic_init(&st->adapt_limit, 0);
	if (e->region) {
		/* on a region, one block per state, named like its tables:
		 * every process holding the state counts into it
		 * (metrics_internal.h PROCESSES) */
		void *mem = NULL;
		uint64_t dg = sluice__fnv(SLUICE__FNV_BASIS, &st->layout, sizeof(st->layout));
		*rc = sluice__region_block(e, r->id, "metrics", dg, sluice__metrics_shared_bytes(),
		                           &mem, &st->metrics_held);
		if (*rc == 0 && (*rc = sluice__metrics_attach(&st->metrics, mem,
		                                              sluice__metrics_shared_bytes())) != 0)
			sluice__region_release(e, st->metrics_held);
	sluice__region_release(e, st->fb_held);
	} else {
		*rc = sluice__metrics_init(&st->metrics, 0);
	}
	if (*rc) {
		free(st);
		return NULL;
	}
	st->metrics_ok = 1;
	/* the shape: what a ghost decides with, pointing into this state */
	st->shape = *r;
	st->shape.id = st->id;
	st->shape.backend = NULL; /* the description's: freed before the state */
	if (bk) {
		/* the rule's limits on its backend, in place of local ones; a
		 * manual clock (tests) is the scripts' time, else Redis TIME */
		if (e->region) {
			/* its fallback's counts in the region too, summed over
			 * the processes like its metrics */
			size_t one = sluice_stripe_bytes(SLUICE__METRICS_SHARED_CELLS);
			void *mem = NULL;
			uint64_t dg = sluice__fnv(SLUICE__FNV_BASIS, &st->layout, sizeof(st->layout));
			*rc = sluice__region_block(e, r->id, "fallback", dg, 2 * one, &mem,
			                           &st->fb_held);
			if (*rc == 0)
				*rc = sluice_stripe_attach(&st->fb[0], mem, one,
				                           SLUICE__METRICS_SHARED_CELLS,
				                           SLUICE_STRIPE_BY_CPU);
			if (*rc == 0)
				*rc = sluice_stripe_attach(&st->fb[1], (unsigned char *)mem + one, one,
				                           SLUICE__METRICS_SHARED_CELLS,
				                           SLUICE_STRIPE_BY_CPU);
		} else {
			*rc = sluice_stripe_init(&st->fb[0], 0, SLUICE_STRIPE_BY_CPU);
			if (*rc == 0 &&
			    (*rc = sluice_stripe_init(&st->fb[1], 0, SLUICE_STRIPE_BY_CPU)) != 0)
				sluice_stripe_destroy(&st->fb[0]);
		}
		st->fb_ok = *rc == 0;
		if (*rc == 0) {
			bk->owners++; /* held by st->rl.b, dropped by state_free */
			*rc = sluice__rlimits_new(&st->rl, bk, r,
			                          e->clock->kind == SLUICE_CLOCK_MANUAL ? e->clock : NULL);
			st->rl.b = bk;
		}
		if (*rc) {
			state_free(e, st);
			return NULL;
		}
		return st;
	}
	memset(&st->shape.match, 0, sizeof(st->shape.match));
	for (uint32_t i = 0; i < r->ndims; i++)
		st->shape.dims[i].name = r->dims[i].name ? st->layout.dims[i].name : NULL;
	*rc = 0;
	if (r->per_key || L->one_key) {
		sluice_keyed_config_t kc;
		sluice_rule_keyed_config(r, &kc);
		/* one key: a pseudo dimension, the table's name's */
		const sluice_rules_dim_t one = { .kind = SLUICE_RULES_DIM_GLOBAL };
		const sluice_rules_dim_t *dims = L->one_key ? &one : r->dims;
		uint32_t nd = L->one_key ? 1 : r->ndims;
		if (L->one_key) {
			kc.capacity = ONE_KEY_CAPACITY;
			kc.policy = SLUICE_KEYED_REJECT;
		}
		uint64_t dg = 0;
		if (e->region) {
			/* the table's name: its config but the live values */
			sluice_keyed_config_t z = kc;
			z.rate = z.period_ns = z.burst = z.depth = z.limit = 0;
			uint64_t cb = L->cbits;
			dg = sluice__fnv(sluice__fnv(SLUICE__FNV_BASIS, &z, sizeof(z)), &cb, sizeof(cb));
		}
		for (uint32_t i = 0; i < nd && *rc == 0; i++) {
			if (e->region) {
				*rc = sluice__region_table(e, r->id, &dims[i], st->layout.dims[i].name,
				                           &kc, dg, &st->keyed[i], &st->held[i]);
			} else {
				size_t n = sluice_keyed_region_bytes(&kc);
				size_t sz = (n + 63) & ~(size_t)63;
				st->mem[i] = n ? aligned_alloc(64, sz) : NULL;
				if (!st->mem[i]) {
					*rc = n ? SLUICE_ENOMEM : SLUICE_EINVAL;
					break;
				}
				*rc = sluice_keyed_format(st->mem[i], sz, &kc);
				if (*rc == 0)
					*rc = sluice_keyed_attach(st->mem[i], sz, e->clock, &st->keyed[i]);
			}
			st->ndims = i + 1;
		}
		if (*rc == 0 && e->region) {
			/* an existing table decides with its own live parameters
			 * until the commit applies the file's */
			sluice_keyed_params_t p;
			if (sluice_keyed_params(&st->keyed[0], &p) == 0) {
				st->applied.rate = p.rate;
				st->applied.period_ns = p.period_ns;
				if (r->limit.algo == SLUICE_ALGO_LEAKY)
					st->applied.depth = p.burst;
				else
					st->applied.burst = p.burst;
				st->applied.limit = p.limit;
			}
		}
	} else {
		sluice_limiter_config_t lc;
		*rc = sluice_rule_limiter_config(r, e->clock, &lc);
		if (*rc == 0)
			*rc = sluice_limiter_new(&lc, &st->lim);
	}
	if (*rc) {
		state_free(e, st);
		return NULL;
	}
	return st;
}

/*
 * Bring @st's live parameters to its target, each keyed setter stamped
 * with a reading of @clock taken just before it (issue 22, Deliver 6): a
 * change stamped with a reading older than decisions already made could
 * forget what the keys owe, and a load's parse and compile take long
 * enough for the reading the load began with to lag every decision made
 * meanwhile.  The setters keep the newest reading a table has seen
 * (keyed.h LIVE PARAMETERS); reading here as late as possible makes the
 * stamp that newest reading, or as near it as this thread can.
 * Return: 1 when a change is still pending, else 0.
 */
static int apply(struct sluice__state *st, const sluice_clock_t *clock)
{
	/* the adaptive controller's limit, when it has one, in place of the
	 * file's: GCRA's rate (per the same period), the others' limit */
	sluice_rules_limit_t want = st->target;
	uint64_t al = atomic_load_explicit(&st->adapt_limit, memory_order_relaxed);
	if (al) {
		if (st->layout.algo == SLUICE_ALGO_GCRA)
			want.rate = al;
		else
			want.limit = al;
	}
	sluice_rules_limit_t *a = &st->applied, *t = &want;
	sluice_algo_t algo = st->layout.algo;
	int gcra = algo == SLUICE_ALGO_GCRA || algo == SLUICE_ALGO_LEAKY;
	int leaky = algo == SLUICE_ALGO_LEAKY;
	uint64_t ab = leaky ? a->depth : a->burst, tb = leaky ? t->depth : t->burst;
	int rc = 0;
	if (gcra && (a->rate != t->rate || a->period_ns != t->period_ns)) {
		for (uint32_t i = 0; i < st->ndims && rc == 0; i++) {
			sluice_keyed_params_t p;
			if (sluice_keyed_params(&st->keyed[i], &p) == 0 && p.rate == t->rate &&
			    p.period_ns == t->period_ns)
				continue; /* already in force (another process) */
			rc = sluice_keyed_set_rate_at(&st->keyed[i], t->rate, t->period_ns,
			                              sluice_clock_now(clock));
		}
		if (st->lim && rc == 0)
			rc = sluice_limiter_set_rate(st->lim, t->rate, t->period_ns);
		if (rc == 0) {
			a->rate = t->rate;
			a->period_ns = t->period_ns;
		}
	}
	if (rc == 0 && gcra && ab != tb) {
		for (uint32_t i = 0; i < st->ndims && rc == 0; i++) {
			sluice_keyed_params_t p;
			if (sluice_keyed_params(&st->keyed[i], &p) == 0 && p.burst == tb)
				continue;
			rc = sluice_keyed_set_burst_at(&st->keyed[i], tb, sluice_clock_now(clock));
		}
		if (st->lim && rc == 0)
			rc = sluice_limiter_set_burst(st->lim, tb);
		if (rc == 0) {
			if (leaky)
				a->depth = tb;
			else
				a->burst = tb;
		}
	}
	if (rc == 0 && !gcra && a->limit != t->limit) {
		for (uint32_t i = 0; i < st->ndims && rc == 0; i++) {
			sluice_keyed_params_t p;
			if (sluice_keyed_params(&st->keyed[i], &p) == 0 && p.limit == t->limit)
				continue;
			rc = sluice_keyed_set_limit_at(&st->keyed[i], t->limit, sluice_clock_now(clock));
		}
		if (st->lim && rc == 0)
			rc = sluice_limiter_set_limit(st->lim, t->limit);
		if (rc == 0)
			a->limit = t->limit;
	}
	st->pending = rc != 0;
	return st->pending;
}

int sluice__engine_sync_locked(sluice_engine_t *e)
{
	struct sluice__set *s = atomic_load_explicit(&e->set, memory_order_relaxed);
	int n = 0;
	for (size_t i = 0; s && i < s->count; i++) {
		struct sluice__state *st = s->cr[i].st;
		/* pending, or an adaptive limit that moved */
		if (st->pending || atomic_load_explicit(&st->adapt_limit, memory_order_relaxed))
			n += apply(st, e->clock);
	}
	return n;
}

/* The number the adaptive controller moves: GCRA's rate, else the limit. */
static uint64_t adaptive_number(const sluice_rules_limit_t *l)
{
	return l->algo == SLUICE_ALGO_GCRA ? l->rate : l->limit;
}

/* The controller's callback, on a deciding thread: keep the new limit
 * for the next sync or load (a setter takes the table's lock, which a
 * decision must not).  Relaxed: a value, read under the load mutex. */
static void adaptive_changed(void *ctx, uint64_t old_limit, uint64_t new_limit,
                             const sluice__adaptive_window_t *w)
{
	(void)old_limit;
	(void)w;
	struct sluice__state *st = ctx;
	atomic_store_explicit(&st->adapt_limit, new_limit, memory_order_relaxed);
}

/* ---- sets --------------------------------------------------------- */

void sluice__set_free(sluice_engine_t *e, struct sluice__set *s)
{
	if (!s)
		return;
	for (size_t i = 0; s->cr && i < s->count; i++) {
		sluice__state_unref(e, s->cr[i].st);
		sluice__state_unref(e, s->cr[i].ghost);
		free(s->cr[i].adaptive);
	}
	for (size_t i = 0; i < s->nretired; i++)
		sluice__state_unref(e, s->retired[i]);
	for (size_t i = 0; s->bk && i < s->nbk; i++)
		sluice__backend_unref(e, s->bk[i]);
	free(s->bk);
	sluice__index_free(&s->idx);
	sluice_rules_free(s->rules);
	free(s->retired);
	free(s->by_id);
	free(s->cr);
	free(s);
}

static int by_id_cmp(const void *pa, const void *pb, void *ctx)
{
	const sluice_rules_t *rules = ctx;
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	return strcmp(rules->rules[a].id, rules->rules[b].id);
}

static int state_id_cmp(const void *pa, const void *pb)
{
	const struct sluice__state *a = *(struct sluice__state *const *)pa;
	const struct sluice__state *b = *(struct sluice__state *const *)pb;
	return strcmp(a->id, b->id);
}

static struct sluice__state *retired_take(struct sluice__set *old, const char *id)
{
	for (size_t i = 0; old && i < old->nretired; i++)
		if (old->retired[i] && strcmp(old->retired[i]->id, id) == 0)
			return old->retired[i];
	return NULL;
}

/* The rule's RateLimit-Policy: the library's one mapping per algorithm
 * (sluice_http_policy_of(), http.h), as the nginx module advertises a zone;
 * none (window 0) for in-flight limits and anything it cannot map. */
static void quota_of(const sluice_rule_t *r, struct sluice__crule *c)
{
	sluice_limiter_config_t lc;
	if (sluice_rule_limiter_config(r, NULL, &lc) != 0 ||
	    sluice_http_policy_of(&lc, &c->quota, &c->window_ns) != 0) {
		c->quota = 0;
		c->window_ns = 0;
	}
}

/* The layout of a rule on backend @bk: the backend and every parameter of
 * its Redis limit, so a change of any makes a new limit (and a new state). */
static void remote_layout(const sluice_rule_t *r, const struct sluice__backend *bk,
                          struct sluice__layout *L)
{
	const sluice_rules_limit_t *l = &r->limit;
	const sluice_rules_backend_t *b = r->backend;
	L->backend = bk->serial;
	const uint64_t p[12] = { l->rate,           l->period_ns,  l->burst,
		                 l->limit,          l->window_ns,  l->buckets,
		                 b->lease_ttl_ns,   b->budget_ns,  b->lease_max,
		                 (uint64_t)b->fallback, b->expected_instances, 0 };
	memcpy(L->rparams, p, sizeof(p));
}

/*
 * The set's backends: for each of the description's, the engine's backend
 * with its connection parameters made by this process (kept across the
 * load: its connection, its leases' limits and its counters), else a new
 * one, with room for twice the limits this file puts on it (a reload that
 * changes every rule holds old and new limits until the old set is freed)
 * and at least 1024, unless the file sets max_limits.  Each gets one
 * reference from the set.  Return: 0, or -1 with the errors in @x.
 */
static int backends_open(sluice_engine_t *e, const sluice_rules_t *rules, struct sluice__set *s,
                         struct sluice__errs *x)
{
	if (!rules->nbackends)
		return 0;
	s->bk = calloc(rules->nbackends, sizeof(*s->bk));
	if (!s->bk) {
		x->oom = 1;
		return -1;
	}
	s->nbk = rules->nbackends;
	int bad = 0;
	for (size_t i = 0; i < rules->nbackends; i++) {
		const sluice_rules_backend_t *want = &rules->backends[i];
		struct sluice__backend *b = e->backends;
		while (b && !sluice__backend_same(b, want))
			b = b->next;
		if (!b) {
			uint64_t need = 0;
			for (size_t k = 0; k < rules->count; k++)
				if (rules->rules[k].backend == want)
					need += sluice__backend_need(&rules->rules[k]);
			need *= 2;
			uint32_t room = need < 1024 ? 1024 : need > UINT32_MAX ? UINT32_MAX : (uint32_t)need;
			int rc = sluice__backend_open(want, room, ++e->next_backend, &b);
			if (rc == SLUICE_ENOMEM) {
				x->oom = 1;
				return -1;
			}
			if (rc) {
				sluice__err(x, &want->mark, rc,
				            "backends.%s: redis %s could not be started: %s (%s)",
				            want->name, want->address, sluice_err_name(rc),
				            sluice_strerror(rc));
				bad = -1;
				continue;
			}
			b->next = e->backends;
			e->backends = b;
		}
		b->owners++;
		s->bk[i] = b;
	}
	return bad;
}

/* Compile @rules into a new set against @old (may be NULL).  Return: the
 * set, or NULL with errors in @x (or x->oom). */
static struct sluice__set *compile(sluice_engine_t *e, sluice_rules_t *rules,
                                   struct sluice__set *old, uint64_t now, struct sluice__errs *x)
{
	struct sluice__set *s = calloc(1, sizeof(*s));
	if (!s) {
		x->oom = 1;
		return NULL;
	}
	s->rules = rules;
	s->count = rules->count;
	s->cr = calloc(s->count + 1, sizeof(*s->cr));
	s->by_id = calloc(s->count + 1, sizeof(*s->by_id));
	size_t maxret = s->count + (old ? old->count + old->nretired : 0);
	s->retired = calloc(maxret + 1, sizeof(*s->retired));
	/* which old states the new set uses (as a state or a ghost) */
	unsigned char *used_old = old ? calloc(old->count + 1, 1) : NULL;
	unsigned char *used_ret = old ? calloc(old->nretired + 1, 1) : NULL;
	if (!s->cr || !s->by_id || !s->retired || (old && (!used_old || !used_ret))) {
		x->oom = 1;
		goto fail;
	}
	int bad = backends_open(e, rules, s, x);
	if (x->oom)
		goto fail;
	for (size_t i = 0; i < s->count; i++) {
		const sluice_rule_t *r = &rules->rules[i];
		struct sluice__crule *c = &s->cr[i];
		c->r = r;
		c->index = (uint32_t)i;
		/* 1..SLUICE_RULES_ID_MAX bytes (rules.h); the rest stays calloc's 0 */
		memcpy(c->id, r->id, strlen(r->id));
		quota_of(r, c);
		s->by_id[i] = (uint32_t)i;
		struct sluice__layout L;
		layout_of(e, r, &L);
		struct sluice__backend *bk = NULL;
		if (r->backend) {
			bk = s->bk[r->backend - rules->backends];
			if (!bk)
				continue; /* its backend's error is reported */
			remote_layout(r, bk, &L);
		}
		const struct sluice__crule *oc = old ? sluice__set_find(old, r->id) : NULL;
		struct sluice__state *rs = retired_take(old, r->id);
		if (oc && layout_fits(&oc->st->layout, &L)) {
			c->st = ref(oc->st);
			used_old[oc - old->cr] = 1;
			if (oc->ghost && now < oc->ghost_until) {
				c->ghost = ref(oc->ghost);
				c->ghost_until = oc->ghost_until;
			}
			continue;
		}
		if (rs && layout_fits(&rs->layout, &L)) {
			c->st = ref(rs); /* removed, and back within its memory */
			for (size_t k = 0; k < old->nretired; k++)
				used_ret[k] |= old->retired[k] == rs;
			continue;
		}
		/* a new layout: the old one's state stays in force beside it */
		struct sluice__state *prev = oc ? oc->st : rs;
		if (oc && oc->ghost && now < oc->ghost_until) {
			sluice__err(x, &r->mark, SLUICE_EBUSY,
			            "rule '%s': its state layout changed again while the layout before "
			            "the last is still in force (for %llu ns more): load again later",
			            r->id, (unsigned long long)(oc->ghost_until - now));
			bad = 1;
			continue;
		}
		int rc;
		c->st = state_new(e, r, &L, bk, &rc);
		if (!c->st) {
			if (rc == SLUICE_ENOMEM)
				x->oom = 1;
			else if (bk && rc == SLUICE_ECAPACITY)
				sluice__err(x, &r->mark, rc,
				            "rule '%s': backend %s (redis %s) has no room for its %llu "
				            "limits: it holds at most %u (backends.%s.max_limits) "
				            "(SLUICE_ECAPACITY)",
				            r->id, r->backend->name, bk->address,
				            (unsigned long long)sluice__backend_need(r), bk->max_limits,
				            r->backend->name);
			else if (rc == SLUICE__EREGION)
				sluice__err(x, &r->mark, SLUICE_ELAYOUT,
				            "rule '%s': its table could not be made: the shared region header "
				            "changed since this engine opened the region (another process "
				            "wrote it), so no table is placed in it (SLUICE_ELAYOUT)",
				            r->id);
			else
				sluice__err(x, &r->mark, rc, "rule '%s': its table could not be made: %s (%s)",
				            r->id, sluice_err_name(rc), sluice_strerror(rc));
			bad = 1;
			continue;
		}
		if (prev && L.backend && prev->layout.backend) {
			/* Redis keeps the count across the change: a ghost on the
			 * same Redis would take each permit twice (rules.h
			 * BACKENDS; engine.h RELOAD); the old state goes with the old set */
			if (oc)
				used_old[oc - old->cr] = 1;
			else
				for (size_t k = 0; k < old->nretired; k++)
					used_ret[k] |= old->retired[k] == rs;
		} else if (prev) {
			c->ghost = ref(prev);
			c->ghost_until = now + prev->memory_ns;
			if (c->ghost_until < now)
				c->ghost_until = UINT64_MAX;
			if (oc)
				used_old[oc - old->cr] = 1;
			else
				for (size_t k = 0; k < old->nretired; k++)
					used_ret[k] |= old->retired[k] == rs;
		}
	}
	if (bad || x->oom)
		goto fail;
	/* a state's memory, as the file now gives its parameters: how long
	 * it stays in force as a ghost or on the retired list after this */
	for (size_t i = 0; i < s->count; i++)
		s->cr[i].st->memory_ns = sluice__memory_ns(s->cr[i].r);
	/* adaptive controllers: one per rule and set, starting from the
	 * effective limit the state had (kept across the reload, within the
	 * new file's floor and limit) */
	for (size_t i = 0; i < s->count; i++) {
		struct sluice__crule *c = &s->cr[i];
		if (!c->r->adaptive.enabled)
			continue;
		uint64_t conf = adaptive_number(&c->r->limit);
		uint64_t kept = atomic_load_explicit(&c->st->adapt_limit, memory_order_relaxed);
		if (kept > conf)
			kept = conf;
		if (kept && kept < c->r->adaptive.floor)
			kept = c->r->adaptive.floor;
		c->adaptive = aligned_alloc(SLUICE_CACHELINE, (sizeof(*c->adaptive) + SLUICE_CACHELINE - 1) &
		                                                      ~(size_t)(SLUICE_CACHELINE - 1));
		if (!c->adaptive) {
			x->oom = 1;
			goto fail;
		}
		int rc = sluice__adaptive_init(c->adaptive, &c->r->adaptive, conf, kept,
		                               &c->st->metrics, now, adaptive_changed, c->st);
		if (rc) {
			sluice__err(x, &c->r->adaptive.mark, rc,
			            "rule '%s': adaptive refused by the controller: %s", c->r->id,
			            sluice_err_name(rc));
			goto fail;
		}
	}
	qsort_r(s->by_id, s->count, sizeof(*s->by_id), by_id_cmp, rules);
	int rc = sluice__index_build(&s->idx, s, x);
	if (rc < 0)
		x->oom = 1;
	if (rc != 0)
		goto fail;
	/* the retired: old rules not used here, and old retired ones still
	 * within their time and not brought back (RELOAD) */
	for (size_t i = 0; old && i < old->count; i++) {
		struct sluice__state *st = old->cr[i].st;
		if (used_old[i] || sluice__set_find(s, st->id))
			continue;
		uint64_t keep = st->memory_ns > SLUICE_ENGINE_GHOST_NS ? st->memory_ns
		                                                       : SLUICE_ENGINE_GHOST_NS;
		st->retired_until = now + keep < now ? UINT64_MAX : now + keep;
		s->retired[s->nretired++] = ref(st);
	}
	for (size_t k = 0; old && k < old->nretired; k++) {
		struct sluice__state *st = old->retired[k];
		if (used_ret[k] || now >= st->retired_until || sluice__set_find(s, st->id))
			continue;
		int dup = 0;
		for (size_t j = 0; j < s->nretired; j++)
			dup |= strcmp(s->retired[j]->id, st->id) == 0; /* the newer one wins */
		if (!dup)
			s->retired[s->nretired++] = ref(st);
	}
	qsort(s->retired, s->nretired, sizeof(*s->retired), state_id_cmp);
	free(used_old);
	free(used_ret);
	return s;
fail:
	free(used_old);
	free(used_ret);
	s->rules = NULL; /* the caller frees the description */
	sluice__set_free(e, s);
	return NULL;
}

int sluice__engine_load(sluice_engine_t *e, const char *name, const void *buf, size_t len,
                        int is_file, sluice_rules_errors_t **errs)
{
	sluice_rules_options_t ro = { .max_bytes = e->max_bytes, .clock = e->clock,
	                              .memory_budget = e->memory_budget };
	sluice_rules_t *rules = NULL;
	sluice_rules_errors_t *le = NULL;
	pthread_mutex_lock(&e->lock);
	if (e->region_lost) {
		/* engine.h FORK: this child's region states may be gone */
		e->failed++;
		pthread_mutex_unlock(&e->lock);
		if (errs)
			*errs = NULL;
		return SLUICE_ELAYOUT;
	}
	/* space no holder uses any more, before this load needs some */
	sluice__region_reclaim(e);
	int rc = is_file ? sluice_rules_load_file(name, &ro, &rules, &le)
	                 : sluice_rules_load_buffer(name, buf, len, &ro, &rules, &le);
	if (rc != 0) {
		e->failed++;
		sluice__metrics_engine_reload(&e->metrics, 0, e->version);
		pthread_mutex_unlock(&e->lock);
		if (errs)
			*errs = le;
		else
			sluice_rules_errors_free(le);
		return rc;
	}
	struct sluice__errs x = { sluice__errors_new(rules->file ? rules->file : "<buffer>"), 0 };
	if (!x.e) {
		sluice_rules_free(rules);
		e->failed++;
		sluice__metrics_engine_reload(&e->metrics, 0, e->version);
		pthread_mutex_unlock(&e->lock);
		return SLUICE_ENOMEM;
	}
	uint64_t now = sluice_clock_now(e->clock);
	struct sluice__set *old = atomic_load_explicit(&e->set, memory_order_relaxed);
	struct sluice__set *s = compile(e, rules, old, now, &x);
	if (!s) {
		sluice_rules_free(rules);
		e->failed++;
		sluice__metrics_engine_reload(&e->metrics, 0, e->version);
		pthread_mutex_unlock(&e->lock);
		if (x.oom) {
			sluice_rules_errors_free(x.e);
			return SLUICE_ENOMEM;
		}
		sluice__errors_sort(x.e);
		rc = (int)(x.e->count ? x.e->count : 1);
		if (errs)
			*errs = x.e;
		else
			sluice_rules_errors_free(x.e);
		return rc;
	}
	sluice_rules_errors_free(x.e);
	/* commit: the file's live parameters (a refused one stays pending) */
	for (size_t i = 0; i < s->count; i++) {
		s->cr[i].st->target = s->cr[i].r->limit;
		apply(s->cr[i].st, e->clock);
	}
	s->version = ++e->version;
	sluice__metrics_engine_reload(&e->metrics, 1, s->version);
	/* Publish: the release store makes the compiled set, its index and
	 * every state it points at visible to a decision that acquires the
	 * pointer (engine.c read_begin). */
	atomic_store_explicit(&e->set, s, memory_order_release);
	if (old) {
		/* every read section that may hold the old set ends here */
		urcu_bp_synchronize_rcu();
		TSAN_ACQUIRE(&sluice__engine_gp);
		sluice__set_free(e, old);
	}
	pthread_mutex_unlock(&e->lock);
	return 0;
}
