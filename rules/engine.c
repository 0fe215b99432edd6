/* SPDX-License-Identifier: MIT */
/*
 * rules/engine.c - the engine's decision side: decide, complete, and the
 * RCU read sections around them; new, free, info.
 *
 * DESIGN.  A decision reads the published rule set inside one urcu-bp
 * read-side section (inlined: _LGPL_SOURCE; urcu-bp needs no thread
 * registration, so any host thread may decide), and uses only that set
 * and the states its rules point at.  The set pointer is published by the
 * loader with a release store (reload.c) and read here with an acquire
 * load: C11 atomics rather than rcu_assign_pointer / rcu_dereference
 * (liburcu's volatile accesses), with the same ordering on every target
 * sluice builds for and visible to ThreadSanitizer.  What TSan cannot see
 * is the grace period: liburcu's synchronize_rcu (not instrumented) waits
 * for every read section that might hold the old set, after which the
 * loader frees it.  So each read section ends with __tsan_release on the
 * engine's `gp` word and the loader, after synchronize_rcu, does
 * __tsan_acquire on it: the reads of the old set happen before its free,
 * in TSan's eyes as in fact (under __SANITIZE_THREAD__ only).
 *
 * A decision takes one permit from every limit of every enforcing rule it
 * matches, in file order, and on the first refusal gives back what it
 * took (reverse order: the refunds of keyed.h and the handles, cancel for
 * a booking).  No lock, no allocation: the parts it took live in an array
 * on the stack, bounded by SLUICE_ENGINE_PARTS_MAX, which the load
 * guaranteed (match.c).  The in-flight permits a verdict keeps are named
 * by state serial, so complete() gives them back only to the state that
 * took them, whatever was loaded in between.
 *
 * What a decision costs above its limits' own calls: the read section,
 * the route lookup (one hash of the path a word at a time, one compare:
 * match.c), one verdict entry per matched rule, per limit its key, the
 * call and the record of what it took, and per rule one metrics count
 * (an inline stripe add).  A per-key rule of two or more dimensions asks
 * them as one keyed batch (take_keyed_batch: their misses overlap; about
 * 50 instructions a dimension more than single calls, docs/performance.md
 * "Issue 27, second round").  The common path (enforcing rules, no ghost)
 * is one function: decide() inlines take_rule and take_state; a ghost, the
 * shadow rules and a method other than GET and POST go out of line, where
 * only a request that needs them pays for them.
 */
/* First: _LGPL_SOURCE and urcu-bp.h, before any system header (it says why). */
#include "urcu_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine_internal.h"
#include "match_internal.h"
#include "region_internal.h"
#include "sluice/error.h"
/* the clock read inline, as the library's own files have it (common.h,
 * INLINE): libsluice-engine is built and installed with this release */
#include "sluice/static/clock.h"

static inline struct sluice__set *read_begin(sluice_engine_t *e)
{
	urcu_bp_read_lock();
	/* Pairs with the release store of the loader's publication
	 * (reload.c): the compiled set and every state it points at were
	 * written before it. */
	return atomic_load_explicit(&e->set, memory_order_acquire);
}

static inline void read_end(void)
{
	TSAN_RELEASE(&sluice__engine_gp);
	urcu_bp_read_unlock();
}

/* ---- keys --------------------------------------------------------- */

/* The key of a request with no value for a dimension (engine.h EMPTY
 * KEYS, empty_key: shared). */
static const unsigned char absent_key[1] = { 0 };

/* The request's key for dimension @d; an empty or absent value is the
 * shared absent_key.  Return: 1 when the request has a value, 0 when it
 * got the shared key.  @path_len: the path's bytes (q->path_len, or its
 * strlen when the caller left it 0).  Inline: it runs once per limit of
 * every rule. */
static inline int dim_key(const sluice_rules_dim_t *d, const sluice_request_t *q,
                          size_t path_len, const void **key, size_t *len)
{
	const void *k = NULL;
	size_t n = 0;
	switch (d->kind) {
	case SLUICE_RULES_DIM_IP:
		k = q->addr;
		n = q->addr_len;
		break;
	case SLUICE_RULES_DIM_USER:
		k = q->user;
		n = q->user_len;
		break;
	case SLUICE_RULES_DIM_ROUTE:
		k = q->path;
		n = path_len;
		break;
	case SLUICE_RULES_DIM_HEADER:
	case SLUICE_RULES_DIM_QUERY:
		if (q->lookup)
			k = q->lookup(q->ctx,
			              d->kind == SLUICE_RULES_DIM_HEADER ? SLUICE_LOOKUP_HEADER
			                                                 : SLUICE_LOOKUP_QUERY,
			              d->name, &n);
		break;
	default:
		break;
	}
	if (SLUICE_UNLIKELY(!k || n == 0)) {
		*key = absent_key;
		*len = 1;
		return 0;
	}
	*key = k;
	*len = n;
	return 1;
}

/* ---- the parts a decision took ------------------------------------ */

struct took {
	struct sluice__state *st;
	uint32_t dim;          /* UINT32_MAX: the state's limiter */
	int booked;            /* a reservation (cancel, not refund) */
	const void *key;
	size_t keylen;
	uint32_t vrule;
	sluice_decision_t d;
};

static void give_back(struct took *t)
{
	/* a Redis permit was counted in Redis when it was granted and has no
	 * refund (redis.h): it stays counted, fewer admissions later, never
	 * more (rules.h BACKENDS) */
	if (t->st->rl.b)
		return;
	if (t->dim == UINT32_MAX) {
		if (t->booked)
			(void)sluice_limiter_cancel(t->st->lim, 1, &t->d);
		else
			(void)sluice_limiter_refund(t->st->lim, 1, &t->d);
	} else {
		/* exact while the key's state is what this admission left;
		 * otherwise the permit stays counted (keyed.h) */
		(void)sluice_keyed_refund(&t->st->keyed[t->dim], t->key, t->keylen, 1, &t->d);
	}
}

/* The outcome of one rule over its limits. */
enum { R_PASS, R_REFUSED, R_ERROR_OPEN, R_ERROR_CLOSED, R_SKIPPED };

/*
 * Limit @i of @rule answered @r (not an admission), its decision @d: the
 * rule's outcome, R_REFUSED or R_ERROR_CLOSED (the verdict's @vr names
 * the limit), or R_PASS for an error that on_error: allow passes (nothing
 * taken; *@any_open set).  The one reading of a limit's failure, for the
 * loop of take_state and for take_keyed_batch; always_inline, as they are
 * (inline only, callgrind: 8 instructions a request more).
 */
__attribute__((always_inline)) static inline int
limit_failed(const sluice_rule_t *rule, int r, uint32_t i, const sluice_decision_t *d,
             sluice_verdict_rule_t *vr, int *any_open)
{
	vr->error = r;
	vr->dim = i;
	/* a full table under when_full: reject is that policy's refusal, not
	 * a limiter failure */
	if (r == 0 || r == SLUICE_EKEYFULL) {
		vr->d = *d;
		return R_REFUSED;
	}
	if (rule->on_error == SLUICE_RULES_FAIL_CLOSED) {
		vr->d = *d;
		vr->d.allowed = 0;
		return R_ERROR_CLOSED;
	}
	*any_open = 1; /* nothing taken: this limit is passed */
	return R_PASS;
}

/*
 * The dimensions of a per-key rule on this process's tables, two or more
 * (take_state's choice): one sluice_keyed_acquire_many_at() of them all,
 * SLUICE_KEYED_STOP, so every key is hashed and its slot prefetched
 * before the first is decided (keyed.h "Batches": over tables larger than
 * the cache, the misses of a request's decisions overlap instead of
 * adding up).  The answers are those of the loop in take_state, in the
 * same order: a refusal or a closed error stops, an open error passes that
 * limit and the rest are asked again (rare: each key is hashed again).
 * Every key is found before any is asked (a header's or a query's lookup
 * runs even for a limit a refusal leaves unasked: a read).  The keys are
 * found at t[n0 + i]; what is admitted is moved down to t[n], as the
 * loop leaves it.  Return, *@nt, @vr, *@best, *@any_open: as take_state's.
 */
__attribute__((always_inline)) static inline int
take_keyed_batch(struct sluice__state *st, const sluice_rule_t *shape, const sluice_rule_t *rule,
                 const sluice_request_t *q, size_t plen, uint64_t now, struct took *t,
                 uint32_t *nt, uint32_t vrule, sluice_verdict_rule_t *vr, int *any_open,
                 const sluice_decision_t **best, int keys_found)
{
	const uint32_t nd = shape->ndims, n0 = *nt;
	sluice_keyed_request_t req[SLUICE_RULES_DIMS_MAX];
	for (uint32_t i = 0; i < nd; i++) {
		struct took *p = &t[n0 + i];
		if (!keys_found)
			(void)dim_key(&shape->dims[i], q, plen, &p->key, &p->keylen);
		/* an error may leave it unwritten, and a refusal reports it */
		p->d = (sluice_decision_t){ 0 };
		req[i] = (sluice_keyed_request_t){ .table = &st->keyed[i], .key = p->key,
			                           .keylen = p->keylen, .n = 1, .d = &p->d };
	}
	uint32_t n = n0;
	int rc = R_PASS;
	for (uint32_t from = 0; from < nd;) {
		if (sluice_keyed_acquire_many_at(&req[from], nd - from, now, SLUICE_KEYED_STOP) ==
		    SLUICE_ETIME)
			req[from].result = SLUICE_ETIME; /* the batch's own: none written */
		uint32_t i = from;
		for (; i < nd && req[i].result == 1; i++, n++) {
			struct took *p = &t[n];
			if (n != n0 + i)
				*p = t[n0 + i]; /* below an open error's hole */
			p->st = st;
			p->vrule = vrule;
			p->booked = 0;
			p->dim = i;
			if (!*best || p->d.delay_ns > (*best)->delay_ns ||
			    p->d.remaining < (*best)->remaining)
				*best = &p->d;
		}
		if (i == nd)
			break;
		rc = limit_failed(rule, req[i].result, i, &t[n0 + i].d, vr, any_open);
		if (rc != R_PASS)
			break;
		from = i + 1;
	}
	*nt = n;
	return rc;
}

/*
 * Take one permit from every limit of state @st (its dimensions per
 * @shape) for @q at @now.  Appends what it took to @t (*@nt).  On a
 * refusal or a closed error, stops and leaves the caller to give back.
 * @vr gets the refusing (or the least remaining) decision.  Under
 * empty_key: pass, every key is found first and a request with an empty
 * or absent one takes nothing (R_SKIPPED).  What does not change from
 * one limit to the next is read once, before the loop: the stores into
 * @t could alias it for the compiler.  always_inline, as take_rule: a
 * decision's one rule costs no call frames of its own (a ghost's and a
 * shadow rule's go through the out-of-line take_ghost, take_shadow).
 */
__attribute__((always_inline)) static inline int
take_state(struct sluice__state *st, const sluice_rule_t *shape, const sluice_rule_t *rule,
           const sluice_request_t *q, size_t plen, uint64_t now, struct took *t, uint32_t *nt,
           uint32_t vrule, sluice_verdict_rule_t *vr, int *any_open, size_t *budget)
{
	const int per_key = shape->per_key, backend = st->rl.b != NULL;
	const int inflight = shape->limit.algo == SLUICE_ALGO_INFLIGHT;
	const uint32_t nd = per_key ? shape->ndims : 1;
	const sluice_decision_t *best = NULL; /* the admission with least room */
	const uint32_t n0 = *nt; /* the load bounded n0 + nd by SLUICE_ENGINE_PARTS_MAX (match.c) */
	uint32_t n = n0;
	int keyed_first = per_key && rule->empty_key == SLUICE_RULES_EMPTY_KEY_PASS;
	if (keyed_first)
		for (uint32_t i = 0; i < nd; i++)
			if (!dim_key(&shape->dims[i], q, plen, &t[n0 + i].key, &t[n0 + i].keylen))
				return R_SKIPPED;
	int rc = R_PASS;
	if (per_key && nd >= 2 && !backend && !inflight) {
		/* in-flight keys are held within a budget, asked one by one */
		rc = take_keyed_batch(st, shape, rule, q, plen, now, t, nt, vrule, vr, any_open,
		                      &best, keyed_first);
		goto done;
	}
	for (uint32_t i = 0; i < nd; i++) {
		struct took *p = &t[n];
		p->st = st;
		p->vrule = vrule;
		p->booked = 0;
		p->dim = per_key ? i : UINT32_MAX;
		if (keyed_first) {
			/* found first at t[n0 + i]: n is below that once a
			 * limit before this one was passed on an error */
			p->key = t[n0 + i].key;
			p->keylen = t[n0 + i].keylen;
		} else {
			if (per_key) {
				(void)dim_key(&shape->dims[i], q, plen, &p->key, &p->keylen);
			} else {
				p->key = NULL;
				p->keylen = 0;
			}
		}
		/* an error may leave it unwritten, and a refusal reports it */
		p->d = (sluice_decision_t){ 0 };
		int r;
		if (backend) {
			/* on a backend (rules.h BACKENDS): libsluice-redis decides,
			 * waiting at most its budget, and says from where */
			r = sluice__rlimits_acquire(&st->rl, p->dim, p->key, p->keylen, &p->d,
			                            &vr->source);
		} else if (per_key || st->layout.one_key) {
			if (!per_key) {
				/* a global rule on a region: its table's one key
				 * (engine.h SHARED STATE); it books nothing (a queue
				 * fallback keeps its limiter: sluice_rule_per_process) */
				static const unsigned char the_key = 1;
				p->dim = 0;
				p->key = &the_key;
				p->keylen = 1;
			}
			/* an in-flight key must fit the verdict, for complete()
			 * to give it back: the load bounded keys of up to
			 * key_max; a longer, hashed key may not fit, and is then
			 * this limit's error (nothing taken) */
			if (inflight && p->keylen > *budget)
				r = SLUICE_EKEYLEN;
			else
				r = sluice_keyed_acquire_at(&st->keyed[p->dim], p->key, p->keylen, 1, now,
				                            &p->d);
			if (r == 1 && inflight)
				*budget -= p->keylen; /* not given back on a refund: a bound */
		} else {
			/* a shadow rule books nothing: it delays no request */
			if (rule->fallback.type == SLUICE_RULES_FALLBACK_QUEUE &&
			    rule->mode == SLUICE_RULES_ENFORCE) {
				r = sluice_limiter_reserve_at(st->lim, 1, now, rule->fallback.max_wait_ns,
				                              &p->d);
				p->booked = r == 1;
			} else {
				r = sluice_limiter_acquire_at(st->lim, 1, now, &p->d);
			}
		}
		if (SLUICE_LIKELY(r == 1)) {
			n++;
			if (!best || p->d.delay_ns > best->delay_ns || p->d.remaining < best->remaining)
				best = &p->d;
			continue;
		}
		rc = limit_failed(rule, r, i, &p->d, vr, any_open);
		if (rc != R_PASS)
			break;
	}
	*nt = n;
done:
	if (rc == R_PASS && best &&
	    (vr->d.limit == 0 || best->delay_ns > vr->d.delay_ns || best->remaining < vr->d.remaining))
		vr->d = *best;
	return rc;
}

/* The old layout's state, still in force beside @c's (RELOAD): out of
 * line, as it is rare, so the inlined take_state is the common path's. */
__attribute__((noinline)) static int take_ghost(const struct sluice__crule *c,
                                                const sluice_request_t *q, size_t plen,
                                                uint64_t now, struct took *t, uint32_t *nt,
                                                uint32_t vrule, sluice_verdict_rule_t *g,
                                                int *open, size_t *budget)
{
	return take_state(c->ghost, &c->ghost->shape, c->r, q, plen, now, t, nt, vrule, g, open,
	                  budget);
}

/* Take rule @c's limits; @vr->d is all zero on entry (decide clears it
 * when it lists the rule, and a rule is taken once per decision). */
__attribute__((always_inline)) static inline int
take_rule(const struct sluice__crule *c, const sluice_request_t *q, size_t plen, uint64_t now,
          struct took *t, uint32_t *nt, uint32_t vrule, sluice_verdict_rule_t *vr, size_t *budget)
{
	int open = 0;
	uint32_t start = *nt;
	int rc = take_state(c->st, c->r, c->r, q, plen, now, t, nt, vrule, vr, &open, budget);
	if (rc == R_PASS && SLUICE_UNLIKELY(c->ghost != NULL) && now < c->ghost_until) {
		/* the old layout's state, still in force (RELOAD): its
		 * decision counts, the new state's is the one reported */
		sluice_verdict_rule_t g = *vr;
		rc = take_ghost(c, q, plen, now, t, nt, vrule, &g, &open, budget);
		if (rc != R_PASS)
			*vr = g;
		vr->source = g.source; /* the most telling of both */
	}
	if (rc != R_PASS) {
		while (*nt > start)
			give_back(&t[--*nt]);
		return rc;
	}
	return open ? R_ERROR_OPEN : R_PASS;
}

/* Record the in-flight permits of parts [from, to) for complete(). */
static inline void hold(sluice_verdict_t *v, const uint32_t *matched, const struct took *t,
                        uint32_t from, uint32_t to)
{
	for (uint32_t i = from; i < to; i++) {
		const struct took *p = &t[i];
		sluice_algo_t a = p->st->layout.algo;
		if (a != SLUICE_ALGO_INFLIGHT)
			continue;
		struct sluice__verdict_held *h = &v->held[v->nheld];
		h->serial = p->st->serial;
		h->vrule = p->vrule;
		h->rule = matched[p->vrule];
		h->dim = p->dim;
		h->off = h->len = 0;
		if (p->dim != UINT32_MAX) {
			/* fits: take_state admitted it only within the budget */
			uint32_t used = v->held_used;
			if (p->keylen > SLUICE_ENGINE_HELD_MAX - used)
				continue; /* not reached */
			memcpy(v->held_keys + used, p->key, p->keylen);
			h->off = used;
			h->len = (uint32_t)p->keylen;
			v->held_used = used + h->len;
		}
		v->nheld++;
	}
}

_Static_assert(sizeof(((struct sluice__crule *)0)->id) == sizeof(((sluice_verdict_rule_t *)0)->id),
               "decide copies a rule's id whole");

/* Shadow rules: each on its own, all or nothing over its limits,
 * refusing nothing (DECIDE).  Out of line: only a file with shadow rules
 * pays for its code. */
__attribute__((noinline)) static void take_shadow(sluice_verdict_t *v, const struct sluice__set *s,
                                                  const uint32_t *matched,
                                                  const sluice_request_t *q, size_t plen,
                                                  uint64_t now, struct took *t, size_t *budget)
{
	for (uint32_t k = 0; k < v->nrules; k++) {
		const struct sluice__crule *c = &s->cr[matched[k]];
		if (c->r->mode != SLUICE_RULES_SHADOW)
			continue;
		sluice_verdict_rule_t *vr = &v->rules[k];
		uint32_t nt = 0;
		int rc = take_rule(c, q, plen, now, t, &nt, k, vr, budget);
		if (rc == R_PASS || rc == R_ERROR_OPEN) {
			vr->outcome = rc == R_PASS ? SLUICE_OUTCOME_PASSED : SLUICE_OUTCOME_ERROR_OPEN;
			hold(v, matched, t, 0, nt);
		} else if (rc == R_SKIPPED) {
			vr->outcome = SLUICE_OUTCOME_SKIPPED;
		} else {
			vr->outcome = SLUICE_OUTCOME_SHADOW_REFUSED;
			if (v->action == SLUICE_ACTION_PASS) {
				v->action = SLUICE_ACTION_SHADOW;
				v->refused_by = k;
			}
		}
	}
}

/*
 * Count rule @c's outcome in its metrics (sluice_engine_metrics says what
 * each counts) and tell its adaptive controller the time.  Relaxed stripe
 * adds: a counter publishes nothing.
 */
static inline void account(const struct sluice__crule *c, const sluice_verdict_rule_t *vr,
                           uint64_t now)
{
	sluice__metrics_t *m = &c->st->metrics;
	switch (vr->outcome) {
	case SLUICE_OUTCOME_NOT_ASKED:
		return;
	case SLUICE_OUTCOME_PASSED:
	case SLUICE_OUTCOME_RETURNED:
		sluice__metrics_count(m, SLUICE__METRICS_PASSED, 1);
		break;
	case SLUICE_OUTCOME_QUEUED:
		sluice__metrics_count(m, SLUICE__METRICS_PASSED, 1);
		sluice__metrics_count(m, SLUICE__METRICS_QUEUED, 1);
		sluice__metrics_observe(&m->queue_wait, vr->d.delay_ns);
		break;
	case SLUICE_OUTCOME_ERROR_OPEN:
		sluice__metrics_count(m, SLUICE__METRICS_PASSED, 1);
		sluice__metrics_count(m, SLUICE__METRICS_ERRORS, 1);
		break;
	case SLUICE_OUTCOME_REFUSED:
		sluice__metrics_count(m, SLUICE__METRICS_REFUSED, 1);
		break;
	case SLUICE_OUTCOME_ERROR_CLOSED:
		sluice__metrics_count(m, SLUICE__METRICS_REFUSED, 1);
		sluice__metrics_count(m, SLUICE__METRICS_ERRORS, 1);
		break;
	case SLUICE_OUTCOME_SHADOW_REFUSED:
		sluice__metrics_count(m, SLUICE__METRICS_PASSED, 1);
		sluice__metrics_count(m, SLUICE__METRICS_SHADOW_REFUSED, 1);
		break;
	case SLUICE_OUTCOME_SKIPPED:
		sluice__metrics_count(m, SLUICE__METRICS_SKIPPED, 1);
		break;
	}
	/* a backend's fallback decided (rules.h BACKENDS): its outcome too */
	if (vr->source == SLUICE_SOURCE_FALLBACK && c->st->fb_ok) {
		int refused = vr->outcome == SLUICE_OUTCOME_REFUSED ||
		              vr->outcome == SLUICE_OUTCOME_SHADOW_REFUSED ||
		              vr->outcome == SLUICE_OUTCOME_ERROR_CLOSED;
		sluice_stripe_add(&c->st->fb[refused], 1);
	}
	if (c->adaptive)
		(void)sluice__adaptive_tick(c->adaptive, now);
}

static int host_eq(const char *a, const char *b)
{
	return b && strcasecmp(a, b) == 0;
}

/* A method other than the usual two: out of line. */
__attribute__((noinline)) static uint32_t method_bit_named(const char *m)
{
#define SLUICE__M(x) \
	if (strcmp(m, #x) == 0) \
		return SLUICE_RULES_METHOD(x);
	SLUICE_RULES_METHODS(SLUICE__M)
#undef SLUICE__M
	return 0;
}

static inline uint32_t method_bit(const char *m)
{
	if (!m)
		return 0;
	/* the usual two first, without a call */
	if (m[0] == 'G' && m[1] == 'E' && m[2] == 'T' && m[3] == '\0')
		return SLUICE_RULES_METHOD(GET);
	if (m[0] == 'P' && m[1] == 'O' && m[2] == 'S' && m[3] == 'T' && m[4] == '\0')
		return SLUICE_RULES_METHOD(POST);
	return method_bit_named(m);
}

static sluice_action_t fallback_action(const sluice_rule_t *r, sluice_verdict_t *v)
{
	if (r->fallback.type == SLUICE_RULES_FALLBACK_STALE)
		return SLUICE_ACTION_STALE;
	v->status = r->fallback.status;
	return SLUICE_ACTION_REJECT;
}

/* The decision (engine.h DECIDE); inline in both entry points, so that
 * sluice_engine_decide is one call, not two. */
__attribute__((always_inline)) static inline int decide(sluice_engine_t *e,
                                                        const sluice_request_t *req,
                                                        uint64_t now, sluice_verdict_t *v)
{
	if (!req || !v || !req->path || req->path[0] != '/')
		return SLUICE_EINVAL;
	if (e->region_lost)
		return SLUICE_ELAYOUT; /* engine.h FORK */
	const sluice_request_t *q = req;
	size_t plen = q->path_len ? q->path_len : strlen(q->path);
	v->action = SLUICE_ACTION_PASS;
	v->status = 0;
	v->delay_ns = 0;
	v->retry_after_ns = 0;
	v->version = 0;
	v->now_ns = now;
	v->refused_by = UINT32_MAX;
	v->nrules = 0;
	v->nheld = 0;
	v->completed = 0;
	v->held_used = 0;

	struct sluice__set *s = read_begin(e);
	if (!s) {
		read_end();
		return SLUICE_ACTION_PASS;
	}
	v->version = s->version;
	uint32_t cand[SLUICE_ENGINE_MATCH_MAX], matched[SLUICE_ENGINE_MATCH_MAX];
	uint32_t nc = sluice__index_lookup(&s->idx, q->path, plen, cand), nm = 0;
	uint32_t mbit = method_bit(q->method);
	uint32_t nshadow = 0;
	int holds = 0; /* a matched rule may hold in-flight permits (hold()) */
	for (uint32_t i = 0; i < nc; i++) {
		const struct sluice__crule *c = &s->cr[cand[i]];
		const sluice_rule_t *r = c->r;
		if (r->match.methods && !(r->match.methods & mbit))
			continue;
		if (r->match.host && !host_eq(r->match.host, q->host))
			continue;
		sluice_verdict_rule_t *vr = &v->rules[nm];
		/* the whole field, NUL-padded at load: a copy of fixed size */
		memcpy(vr->id, c->id, sizeof(vr->id));
		vr->outcome = SLUICE_OUTCOME_NOT_ASKED;
		vr->source = SLUICE_SOURCE_LOCAL;
		vr->shadow = r->mode == SLUICE_RULES_SHADOW;
		nshadow += vr->shadow;
		holds |= c->st->layout.algo == SLUICE_ALGO_INFLIGHT || c->ghost != NULL;
		vr->error = 0;
		vr->dim = 0;
		memset(&vr->d, 0, sizeof(vr->d));
		vr->quota = c->quota;
		vr->window_ns = c->window_ns;
		v->rix[nm] = cand[i];
		v->rserial[nm] = c->st->serial;
		matched[nm++] = cand[i];
	}
	v->nrules = nm;

	struct took t[SLUICE_ENGINE_PARTS_MAX];
	uint32_t nt = 0;
	size_t budget = SLUICE_ENGINE_HELD_MAX; /* in-flight key bytes left */
	int refused = 0;
	for (uint32_t k = 0; k < nm && !refused; k++) {
		const struct sluice__crule *c = &s->cr[matched[k]];
		if (c->r->mode != SLUICE_RULES_ENFORCE)
			continue;
		sluice_verdict_rule_t *vr = &v->rules[k];
		int rc = take_rule(c, q, plen, now, t, &nt, k, vr, &budget);
		switch (rc) {
		case R_PASS:
		case R_ERROR_OPEN:
			vr->outcome = rc == R_PASS ? SLUICE_OUTCOME_PASSED : SLUICE_OUTCOME_ERROR_OPEN;
			if (vr->d.delay_ns) {
				vr->outcome = SLUICE_OUTCOME_QUEUED;
				if (vr->d.delay_ns > v->delay_ns)
					v->delay_ns = vr->d.delay_ns;
			}
			break;
		case R_SKIPPED:
			vr->outcome = SLUICE_OUTCOME_SKIPPED;
			break;
		default:
			refused = 1;
			vr->outcome = rc == R_REFUSED ? SLUICE_OUTCOME_REFUSED
			                              : SLUICE_OUTCOME_ERROR_CLOSED;
			v->refused_by = k;
			v->action = fallback_action(c->r, v);
			v->retry_after_ns = rc == R_REFUSED ? vr->d.retry_after_ns : SLUICE_NEVER;
			break;
		}
	}
	if (refused) {
		/* all or nothing: what the rules before the refusal took goes
		 * back, newest first (as the composite) */
		while (nt > 0) {
			struct took *p = &t[--nt];
			if (v->rules[p->vrule].outcome == SLUICE_OUTCOME_PASSED ||
			    v->rules[p->vrule].outcome == SLUICE_OUTCOME_QUEUED)
				v->rules[p->vrule].outcome = SLUICE_OUTCOME_RETURNED;
			give_back(p);
		}
		v->delay_ns = 0;
	} else {
		if (holds)
			hold(v, matched, t, 0, nt);
		if (v->delay_ns)
			v->action = SLUICE_ACTION_QUEUE;
	}

	if (nshadow)
		take_shadow(v, s, matched, q, plen, now, t, &budget);
	for (uint32_t k = 0; k < nm; k++)
		account(&s->cr[matched[k]], &v->rules[k], now);
	read_end();
	return 0; /* the outcome is v->action (engine.h: one return rule) */
}

int sluice_engine_decide_at(sluice_engine_t *e, const sluice_request_t *req, uint64_t now,
                            sluice_verdict_t *v)
{
	if (!e)
		return SLUICE_EINVAL;
	return decide(e, req, now, v);
}

int sluice_engine_decide(sluice_engine_t *e, const sluice_request_t *req, sluice_verdict_t *v)
{
	if (!e)
		return SLUICE_EINVAL;
	return decide(e, req, sluice__clock_now(e->clock), v);
}

/* ---- complete ----------------------------------------------------- */

/* The i-th id of each of a set's two lists sorted by id (reload.c sorts
 * them): its rules, through by_id, and its retired states. */
static const char *rule_id_at(const struct sluice__set *s, size_t i)
{
	return s->cr[s->by_id[i]].r->id;
}

static const char *retired_id_at(const struct sluice__set *s, size_t i)
{
	return s->retired[i]->id;
}

/* The index of @id in one of @s's sorted lists (@n entries, the i-th id
 * id_at(s, i)), or @n when it is not there: the one binary search both
 * lists use.  Static with constant accessors, so each caller's search is
 * inlined with its accessor: no call through a pointer on complete(). */
static inline size_t set_search(const struct sluice__set *s, size_t n, const char *id,
                                const char *(*id_at)(const struct sluice__set *, size_t))
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(id_at(s, mid), id);
		if (cmp == 0)
			return mid;
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return n;
}

const struct sluice__crule *sluice__set_find(const struct sluice__set *s, const char *id)
{
	size_t i = set_search(s, s->count, id, rule_id_at);
	return i < s->count ? &s->cr[s->by_id[i]] : NULL;
}

static struct sluice__state *retired_find(const struct sluice__set *s, const char *id,
                                          uint64_t serial)
{
	size_t i = set_search(s, s->nretired, id, retired_id_at);
	return i < s->nretired && s->retired[i]->serial == serial ? s->retired[i] : NULL;
}

static struct sluice__state *held_state(const struct sluice__set *s, const sluice_verdict_t *v,
                                        const struct sluice__verdict_held *h)
{
	const struct sluice__crule *c;
	if (s->version == v->version && h->rule < s->count)
		c = &s->cr[h->rule];
	else
		c = sluice__set_find(s, v->rules[h->vrule].id);
	if (c && c->st->serial == h->serial)
		return c->st;
	if (c && c->ghost && c->ghost->serial == h->serial)
		return c->ghost;
	return retired_find(s, v->rules[h->vrule].id, h->serial);
}

/* The state rule @i of @v was decided with, if still in @s. */
static struct sluice__state *rule_state(const struct sluice__set *s, const sluice_verdict_t *v,
                                        uint32_t i)
{
	const struct sluice__crule *c;
	if (s->version == v->version && v->rix[i] < s->count)
		c = &s->cr[v->rix[i]];
	else
		c = sluice__set_find(s, v->rules[i].id);
	if (c && c->st->serial == v->rserial[i])
		return c->st;
	return retired_find(s, v->rules[i].id, v->rserial[i]);
}

int sluice_engine_complete(sluice_engine_t *e, sluice_verdict_t *v, uint64_t latency_ns, int ok)
{
	if (!e || !v || v->nrules > SLUICE_ENGINE_MATCH_MAX)
		return SLUICE_EINVAL;
	if (v->completed)
		return 0;
	int first = 0;
	struct sluice__set *s = read_begin(e);
	/* the latency and the outcome, per rule that decided the request:
	 * into the metrics of the state that decided it (a state replaced
	 * since has none to give) */
	for (uint32_t i = 0; s && i < v->nrules; i++) {
		if (v->rules[i].outcome == SLUICE_OUTCOME_NOT_ASKED)
			continue;
		struct sluice__state *st = rule_state(s, v, i);
		if (st)
			sluice__metrics_complete(&st->metrics, latency_ns, ok);
	}
	for (uint32_t i = 0; s && i < v->nheld && i < SLUICE_ENGINE_PARTS_MAX; i++) {
		const struct sluice__verdict_held *h = &v->held[i];
		if (h->vrule >= v->nrules)
			continue;
		struct sluice__state *st = held_state(s, v, h);
		if (!st)
			continue; /* the permit went with a freed state */
		int rc;
		if (h->dim == UINT32_MAX) {
			rc = st->lim ? sluice_limiter_release(st->lim, 1) : 0;
		} else if (h->dim < st->ndims && h->len > 0 && h->off + h->len <= SLUICE_ENGINE_HELD_MAX) {
			rc = sluice_keyed_release(&st->keyed[h->dim], v->held_keys + h->off, h->len, 1);
		} else {
			continue;
		}
		if (rc < 0 && !first)
			first = rc;
	}
	read_end();
	v->completed = 1;
	return first;
}

/* ---- new, free, info ---------------------------------------------- */

int sluice__engine_gp;

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* Every engine of this process, for fork() (engine.h FORK): under
 * fork_lock, which the prepare handler holds across fork(). */
static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static sluice_engine_t *fork_engines;

/* Before fork(): every engine's load mutex, so no load is half done in
 * the child, and for an engine on a region the child's holder slot with
 * every table the engine holds (rules/region.c HOLDERS). */
static void engines_before_fork(void)
{
	pthread_mutex_lock(&fork_lock);
	for (sluice_engine_t *e = fork_engines; e; e = e->fork_next) {
		pthread_mutex_lock(&e->lock);
		if (e->region)
			sluice__region_fork_prepare(e);
	}
}

static void engines_after_fork_parent(void)
{
	for (sluice_engine_t *e = fork_engines; e; e = e->fork_next)
		pthread_mutex_unlock(&e->lock);
	pthread_mutex_unlock(&fork_lock);
}

static void engines_after_fork_child(void)
{
	for (sluice_engine_t *e = fork_engines; e; e = e->fork_next) {
		if (e->region)
			sluice__region_fork_child(e);
		pthread_mutex_unlock(&e->lock);
	}
	pthread_mutex_unlock(&fork_lock);
}

/* liburcu-bp's own fork handlers hold its registry lock across fork(),
 * so the child's first read section or grace period does not meet a lock
 * some other thread of the parent held (urcu-bp.h).  Registered first, so
 * that its prepare runs after the engines' (prepare handlers run in the
 * reverse order): a load holding an engine's mutex finishes its grace
 * period, which takes that registry lock, before fork() takes it. */
static void fork_handlers(void)
{
	(void)pthread_atfork(urcu_bp_before_fork, urcu_bp_after_fork_parent,
	                     urcu_bp_after_fork_child);
	(void)pthread_atfork(engines_before_fork, engines_after_fork_parent,
	                     engines_after_fork_child);
}

int sluice_engine_new(const sluice_engine_options_t *opt, sluice_engine_t **out)
{
	if (!out)
		return SLUICE_EINVAL;
	sluice_engine_options_t o = { 0 };
	if (opt)
		o = *opt;
	if (o.max_bytes > SLUICE_RULES_MAX_BYTES)
		return SLUICE_EINVAL;
	const sluice_clock_t *clk = o.clock ? o.clock : &sluice_clock_cached;
	if (clk->kind != SLUICE_CLOCK_MONOTONIC && clk->kind != SLUICE_CLOCK_COARSE &&
	    clk->kind != SLUICE_CLOCK_CACHED && clk->kind != SLUICE_CLOCK_MANUAL)
		return SLUICE_ECLOCK;
	if (o.region && (o.region_bytes < (1u << 20) || ((uintptr_t)o.region & 63)))
		return SLUICE_EINVAL;
	sluice_engine_t *e = calloc(1, sizeof(*e));
	if (!e)
		return SLUICE_ENOMEM;
	e->clock = clk;
	e->max_bytes = o.max_bytes;
	e->memory_budget = o.memory_budget;
	e->next_serial = 1;
	if (pthread_mutex_init(&e->lock, NULL) != 0) {
		free(e);
		return SLUICE_ENOMEM;
	}
	if (o.region) {
		int rc = sluice__region_open(e, o.region, o.region_bytes);
		if (rc) {
			pthread_mutex_destroy(&e->lock);
			free(e);
			return rc;
		}
	}
	atomic_init(&e->set, NULL);
	(void)pthread_once(&fork_once, fork_handlers);
	pthread_mutex_lock(&fork_lock);
	e->fork_next = fork_engines;
	fork_engines = e;
	pthread_mutex_unlock(&fork_lock);
	*out = e;
	return 0;
}

void sluice_engine_free(sluice_engine_t *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&fork_lock);
	for (sluice_engine_t **p = &fork_engines; *p; p = &(*p)->fork_next)
		if (*p == e) {
			*p = e->fork_next;
			break;
		}
	pthread_mutex_unlock(&fork_lock);
	struct sluice__set *s = atomic_load_explicit(&e->set, memory_order_relaxed);
	atomic_store_explicit(&e->set, NULL, memory_order_relaxed);
	if (s)
		sluice__set_free(e, s);
	sluice__region_close(e);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

int sluice_engine_info(sluice_engine_t *e, sluice_engine_info_t *out)
{
	if (!e || !out)
		return SLUICE_EINVAL;
	pthread_mutex_lock(&e->lock);
	struct sluice__set *s = atomic_load_explicit(&e->set, memory_order_relaxed);
	*out = (sluice_engine_info_t){ .version = e->version, .failed_loads = e->failed };
	if (s) {
		out->rules = s->count;
		for (size_t i = 0; i < s->count; i++)
			out->pending += s->cr[i].st->pending != 0;
	}
	out->region_used = sluice__region_used(e);
	out->region_free = sluice__region_free_bytes(e);
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int sluice_engine_rule_info(sluice_engine_t *e, const char *id, sluice_engine_rule_info_t *out)
{
	if (!e || !id || !out)
		return SLUICE_EINVAL;
	pthread_mutex_lock(&e->lock);
	struct sluice__set *s = atomic_load_explicit(&e->set, memory_order_relaxed);
	const struct sluice__crule *c = s ? sluice__set_find(s, id) : NULL;
	int rc = SLUICE_EINVAL;
	if (c) {
		const struct sluice__state *st = c->st;
		*out = (sluice_engine_rule_info_t){ .serial = st->serial, .rate = st->applied.rate,
			                            .period_ns = st->applied.period_ns,
			                            .burst = st->applied.algo == SLUICE_ALGO_LEAKY
			                                             ? st->applied.depth
			                                             : st->applied.burst,
			                            .limit = st->applied.limit, .pending = st->pending,
			                            .adaptive_limit = atomic_load_explicit(
				                            &st->adapt_limit, memory_order_relaxed),
			                            .ghost = c->ghost != NULL &&
			                                     sluice_clock_now(e->clock) < c->ghost_until };
		rc = 0;
	}
	pthread_mutex_unlock(&e->lock);
	return rc;
}

int sluice_engine_metrics(sluice_engine_t *e, int (*write)(void *ctx, const char *buf, size_t len),
                          void *ctx)
{
	if (!e || !write)
		return SLUICE_EINVAL;
	/* under the load mutex: no set or state is freed while it renders */
	pthread_mutex_lock(&e->lock);
	struct sluice__set *s = atomic_load_explicit(&e->set, memory_order_relaxed);
	size_t n = s ? s->count : 0;
	sluice__metrics_row_t *rows = calloc(n + 1, sizeof(*rows));
	if (!rows) {
		pthread_mutex_unlock(&e->lock);
		return SLUICE_ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct sluice__crule *c = &s->cr[i];
		const sluice_rules_limit_t *a = &c->st->applied, *f = &c->r->limit;
		int rate = f->algo == SLUICE_ALGO_GCRA || f->algo == SLUICE_ALGO_LEAKY ||
		           f->algo == SLUICE_ALGO_WARMUP;
		rows[i] = (sluice__metrics_row_t){ .rule_id = c->r->id, .m = &c->st->metrics,
			                           .limit = rate ? a->rate : a->limit,
			                           .limit_configured = rate ? f->rate : f->limit };
		if (c->st->fb_ok) {
			rows[i].fallback = c->st->fb;
			rows[i].backend = c->r->backend->name;
		}
	}
	/* the backends the set names, each under its name in the file */
	size_t nb = s ? s->nbk : 0;
	sluice__metrics_backend_row_t *brows = calloc(nb + 1, sizeof(*brows));
	if (!brows) {
		free(rows);
		pthread_mutex_unlock(&e->lock);
		return SLUICE_ENOMEM;
	}
	for (size_t i = 0; i < nb; i++) {
		sluice__backend_row(s->bk[i], &brows[i]);
		brows[i].name = s->rules->backends[i].name;
	}
	sluice__metrics_view_t view = { .rows = rows, .nrows = n, .engine = &e->metrics,
		                        .backends = brows, .nbackends = nb };
	int rc = sluice__metrics_write(&view, write, ctx);
	free(brows);
	free(rows);
	pthread_mutex_unlock(&e->lock);
	return rc;
}

int sluice_engine_sync(sluice_engine_t *e)
{
	if (!e)
		return SLUICE_EINVAL;
	pthread_mutex_lock(&e->lock);
	int rc = sluice__engine_sync_locked(e);
	pthread_mutex_unlock(&e->lock);
	return rc;
}

int sluice_engine_load_buffer(sluice_engine_t *e, const char *name, const void *buf, size_t len,
                              sluice_rules_errors_t **errs)
{
	if (errs)
		*errs = NULL;
	if (!e)
		return SLUICE_EINVAL;
	return sluice__engine_load(e, name, buf, len, 0, errs);
}

int sluice_engine_load_file(sluice_engine_t *e, const char *path, sluice_rules_errors_t **errs)
{
	if (errs)
		*errs = NULL;
	if (!e || !path)
		return SLUICE_EINVAL;
	return sluice__engine_load(e, path, NULL, 0, 1, errs);
}
