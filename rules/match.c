/* SPDX-License-Identifier: MIT */
/*
 * rules/match.c - the route index: which rules a request's path can
 * match, compiled at load, looked up without a scan of patterns.
 *
 * DESIGN.  Three groups of candidates: exact paths, prefixes, and the
 * rules without a path.  Exact paths and prefixes are each sorted
 * byte-wise (equal strings merged, their rules listed ascending), so an
 * exact path is one binary search.  For prefixes: let p be the greatest
 * prefix in the set that is <= the path.  (Exact paths are also in an
 * open-addressing hash table, hashed a word at a time: the lookup a
 * decision makes, inline in it from match_internal.h, is one hash and one
 * compare; the sorted array serves the build.)  Every prefix q of the
 * path lies in [q, path], and every string in that interval starts with q (a string
 * that does not, but is > q, differs from q at a byte where it is
 * greater, so it is > every extension of q, the path included); so q is a
 * prefix of p.  Each prefix keeps its parent, the longest proper prefix
 * of it in the set (computed with a stack over the sorted order): the
 * prefixes of the path are the ancestors of p from the first one that is
 * a prefix of the path, all of them from there on.  One binary search and
 * a walk of at most the nesting depth.  Methods and host are checked per
 * candidate by the caller (a bit and a case-insensitive compare).
 *
 * The build also bounds what a decision can meet: for every route (each
 * exact path with the prefixes of it, each prefix with its ancestors) the
 * candidates, their limits (dimensions, and the ghost's beside them) and
 * the key bytes their in-flight limits hold must fit the verdict
 * (SLUICE_ENGINE_MATCH_MAX, _PARTS_MAX, _HELD_MAX); a file where they do
 * not is refused, naming the route's first rule, so a decision never
 * drops a match for want of room.  Methods and hosts are ignored for the
 * bound (a request of another method is not asked about it): the bound
 * is conservative.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "match_internal.h"
#include "sluice/error.h"

static int str_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int c = memcmp(a, b, n);
	if (c)
		return c;
	return al < bl ? -1 : al > bl;
}

static int is_prefix(const char *p, size_t pl, const char *s, size_t sl)
{
	return pl <= sl && memcmp(p, s, pl) == 0;
}

struct ent {
	const char *s;
	size_t len;
	uint32_t rule;
};

static int ent_cmp(const void *pa, const void *pb)
{
	const struct ent *a = pa, *b = pb;
	int c = str_cmp(a->s, a->len, b->s, b->len);
	if (c)
		return c;
	return a->rule < b->rule ? -1 : a->rule > b->rule;
}

/* Group sorted entries into routes; candidates appended to cand at *nc. */
static size_t group(const struct ent *v, size_t n, struct sluice__route *out, uint32_t *cand,
                    uint32_t *nc)
{
	size_t nr = 0;
	for (size_t i = 0; i < n; i++) {
		if (nr == 0 || str_cmp(out[nr - 1].s, out[nr - 1].len, v[i].s, v[i].len) != 0) {
			out[nr] = (struct sluice__route){ .s = v[i].s, .len = v[i].len,
				                          .first = *nc, .count = 0, .parent = -1 };
			nr++;
		}
		cand[(*nc)++] = v[i].rule;
		out[nr - 1].count++;
	}
	return nr;
}

/* Rule @i's weight against the verdict's bounds. */
struct weight {
	uint64_t rules, parts, held;
};

static void rule_weight(const struct sluice__set *s, uint32_t i, struct weight *w)
{
	const struct sluice__crule *c = &s->cr[i];
	const sluice_rule_t *rs[2] = { c->r, c->ghost ? &c->ghost->shape : NULL };
	w->rules += 1;
	for (int k = 0; k < 2; k++) {
		const sluice_rule_t *r = rs[k];
		if (!r)
			continue;
		uint32_t nd = r->per_key ? r->ndims : 1;
		w->parts += nd;
		if (r->limit.algo == SLUICE_ALGO_INFLIGHT)
			w->held += r->per_key ? (uint64_t)nd * r->keys.key_max : 0;
	}
}

static void add_route(const struct sluice__set *s, const struct sluice__route *rt,
                      const uint32_t *cand, struct weight *w)
{
	for (uint32_t k = 0; k < rt->count; k++)
		rule_weight(s, cand[rt->first + k], w);
}

/* Check one route's weight; report at the first rule it names. */
static int check(const struct sluice__set *s, const struct weight *w, uint32_t first_rule,
                 const char *what, const char *route, struct sluice__errs *x)
{
	if (w->rules <= SLUICE_ENGINE_MATCH_MAX && w->parts <= SLUICE_ENGINE_PARTS_MAX &&
	    w->held <= SLUICE_ENGINE_HELD_MAX)
		return 0;
	const sluice_rule_t *r = s->cr[first_rule].r;
	sluice__err(x, &r->mark, SLUICE_ECOUNT,
	            "a request to %s %.200s can match %llu rules holding %llu limits and %llu "
	            "in-flight key bytes: the engine takes at most %u, %u and %u",
	            what, route, (unsigned long long)w->rules, (unsigned long long)w->parts,
	            (unsigned long long)w->held, SLUICE_ENGINE_MATCH_MAX, SLUICE_ENGINE_PARTS_MAX,
	            SLUICE_ENGINE_HELD_MAX);
	return 1;
}

int sluice__index_build(struct sluice__index *ix, const struct sluice__set *s,
                        struct sluice__errs *x)
{
	memset(ix, 0, sizeof(*ix));
	size_t n = s->count, ne = 0, np = 0, na = 0;
	for (size_t i = 0; i < n; i++) {
		sluice_rules_path_kind_t k = s->cr[i].r->match.path_kind;
		ne += k == SLUICE_RULES_PATH_EXACT;
		np += k == SLUICE_RULES_PATH_PREFIX;
		na += k == SLUICE_RULES_PATH_ANY;
	}
	struct ent *ve = calloc(ne + 1, sizeof(*ve)), *vp = calloc(np + 1, sizeof(*vp));
	ix->exact = calloc(ne + 1, sizeof(*ix->exact));
	ix->prefix = calloc(np + 1, sizeof(*ix->prefix));
	ix->cand = calloc(n + 1, sizeof(*ix->cand));
	int32_t *stack = calloc(np + 1, sizeof(*stack));
	if (!ve || !vp || !ix->exact || !ix->prefix || !ix->cand || !stack) {
		free(ve);
		free(vp);
		free(stack);
		sluice__index_free(ix);
		return SLUICE_ENOMEM;
	}
	ne = np = 0;
	uint32_t nc = 0;
	/* rules without a path first: they are candidates of every request */
	ix->any_first = 0;
	for (size_t i = 0; i < n; i++) {
		const sluice_rules_match_t *m = &s->cr[i].r->match;
		if (m->path_kind == SLUICE_RULES_PATH_ANY)
			ix->cand[nc++] = (uint32_t)i;
		else if (m->path_kind == SLUICE_RULES_PATH_EXACT)
			ve[ne++] = (struct ent){ m->path, strlen(m->path), (uint32_t)i };
		else
			vp[np++] = (struct ent){ m->path, strlen(m->path), (uint32_t)i };
	}
	ix->any_count = (uint32_t)na;
	qsort(ve, ne, sizeof(*ve), ent_cmp);
	qsort(vp, np, sizeof(*vp), ent_cmp);
	ix->nexact = group(ve, ne, ix->exact, ix->cand, &nc);
	size_t slots = 4;
	while (slots < 2 * ix->nexact)
		slots *= 2;
	ix->exact_hash = malloc(slots * sizeof(*ix->exact_hash));
	if (!ix->exact_hash) {
		free(vp);
		free(stack);
		sluice__index_free(ix);
		return SLUICE_ENOMEM;
	}
	ix->hash_mask = slots - 1;
	for (size_t j = 0; j < slots; j++)
		ix->exact_hash[j] = -1;
	for (size_t j = 0; j < ix->nexact; j++) {
		uint64_t h = path_hash(ix->exact[j].s, ix->exact[j].len) & ix->hash_mask;
		while (ix->exact_hash[h] >= 0)
			h = (h + 1) & ix->hash_mask;
		ix->exact_hash[h] = (int32_t)j;
	}
	ix->nprefix = group(vp, np, ix->prefix, ix->cand, &nc);
	free(ve);
	free(vp);

	/* parents: a stack of the current chain over the sorted prefixes */
	size_t depth = 0;
	for (size_t j = 0; j < ix->nprefix; j++) {
		struct sluice__route *p = &ix->prefix[j];
		while (depth > 0) {
			const struct sluice__route *t = &ix->prefix[stack[depth - 1]];
			if (is_prefix(t->s, t->len, p->s, p->len))
				break;
			depth--;
		}
		p->parent = depth ? stack[depth - 1] : -1;
		stack[depth++] = (int32_t)j;
	}
	free(stack);

	/* the bounds (DESIGN): every route with everything above it */
	int bad = 0;
	struct weight any = { 0, 0, 0 };
	for (uint32_t k = 0; k < ix->any_count; k++)
		rule_weight(s, ix->cand[ix->any_first + k], &any);
	if (ix->any_count)
		bad |= check(s, &any, ix->cand[ix->any_first], "any path", "", x);
	for (size_t j = 0; j < ix->nprefix && !bad; j++) {
		struct weight w = any;
		for (int32_t a = (int32_t)j; a >= 0; a = ix->prefix[a].parent)
			add_route(s, &ix->prefix[a], ix->cand, &w);
		bad |= check(s, &w, ix->cand[ix->prefix[j].first], "the prefix", ix->prefix[j].s, x);
	}
	for (size_t j = 0; j < ix->nexact && !bad; j++) {
		const struct sluice__route *e = &ix->exact[j];
		struct weight w = any;
		add_route(s, e, ix->cand, &w);
		/* the prefixes of this exact path: as a lookup finds them */
		size_t lo = 0, hi = ix->nprefix;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (str_cmp(ix->prefix[mid].s, ix->prefix[mid].len, e->s, e->len) <= 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		int32_t a = (int32_t)lo - 1;
		while (a >= 0 && !is_prefix(ix->prefix[a].s, ix->prefix[a].len, e->s, e->len))
			a = ix->prefix[a].parent;
		for (; a >= 0; a = ix->prefix[a].parent)
			add_route(s, &ix->prefix[a], ix->cand, &w);
		bad |= check(s, &w, ix->cand[e->first], "the path", e->s, x);
	}
	return bad;
}

void sluice__index_free(struct sluice__index *ix)
{
	free(ix->exact);
	free(ix->prefix);
	free(ix->cand);
	free(ix->exact_hash);
	memset(ix, 0, sizeof(*ix));
}


void sluice__index_prefixes(const struct sluice__index *ix, const char *path, size_t len,
                            uint32_t out[SLUICE_ENGINE_MATCH_MAX], uint32_t *n)
{
	/* the greatest prefix <= path, then its chain (DESIGN) */
	size_t lo = 0, hi = ix->nprefix;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (str_cmp(ix->prefix[mid].s, ix->prefix[mid].len, path, len) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	int32_t a = (int32_t)lo - 1;
	while (a >= 0 && !is_prefix(ix->prefix[a].s, ix->prefix[a].len, path, len))
		a = ix->prefix[a].parent;
	for (; a >= 0; a = ix->prefix[a].parent)
		sluice__index_push(out, n, ix->cand, ix->prefix[a].first, ix->prefix[a].count);
}
