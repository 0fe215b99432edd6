/* SPDX-License-Identifier: MIT */
/*
 * rules/match_internal.h - the route index's lookup (match.c DESIGN),
 * inline: decide (engine.c) calls it on every request, and a file of
 * exact paths then pays for one hash and one compare, no call.  The
 * prefix routes' search stays out of line in match.c.  Never installed.
 */
#ifndef SLUICE_RULES_MATCH_INTERNAL_H
#define SLUICE_RULES_MATCH_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "engine_internal.h"

/* Up to 8 bytes of a path (@n 0..8) as one word: for 4..8 bytes two
 * 4-byte loads that overlap, for 1..3 the first, middle and last byte.
 * Every byte lands in the word, so two strings of one length n give the
 * same word only when they are equal: path_hash and path_eq read a path
 * the same way, a word at a time, without a byte loop or a call. */
static inline uint64_t path_chunk(const char *p, size_t n)
{
	if (n >= 4) {
		uint32_t a, b;
		memcpy(&a, p, 4);
		memcpy(&b, p + n - 4, 4);
		return (uint64_t)a | (uint64_t)b << 32;
	}
	if (n == 0)
		return 0;
	return (uint64_t)(unsigned char)p[0] | (uint64_t)(unsigned char)p[n / 2] << 8 |
	       (uint64_t)(unsigned char)p[n - 1] << 16;
}

static inline uint64_t path_word(const char *p)
{
	uint64_t w;
	memcpy(&w, p, 8);
	return w;
}

/* The exact paths' hash: each 8-byte word (the last one path_chunk's)
 * mixed by a multiply.  Unseeded: it spreads the file's own paths over
 * the table; a request's path only picks where its probe starts, and a
 * probe run is at most the table's longest cluster of the file's paths. */
static inline uint64_t path_hash(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ n;
	for (; n > 8; p += 8, n -= 8)
		h = (h ^ path_word(p)) * 0x9e3779b97f4a7c15ULL;
	h = (h ^ path_chunk(p, n)) * 0x9e3779b97f4a7c15ULL;
	/* a product's low bits see only the factors' low bits, and the
	 * table's index is the low bits: fold the high half down and mix
	 * once more (splitmix64's finish) */
	h = (h ^ (h >> 32)) * 0xbf58476d1ce4e5b9ULL;
	return h ^ (h >> 29);
}

/* Two paths of @n bytes each: equal? (the words of path_hash) */
static inline int path_eq(const char *a, const char *b, size_t n)
{
	for (; n > 8; a += 8, b += 8, n -= 8)
		if (path_word(a) != path_word(b))
			return 0;
	return path_chunk(a, n) == path_chunk(b, n);
}

/* Append candidates cand[first .. first + count) to @out (*@n), up to
 * SLUICE_ENGINE_MATCH_MAX (which the build guaranteed is never cut). */
static inline void sluice__index_push(uint32_t *out, uint32_t *n, const uint32_t *cand,
                                      uint32_t first, uint32_t count)
{
	for (uint32_t k = 0; k < count && *n < SLUICE_ENGINE_MATCH_MAX; k++)
		out[(*n)++] = cand[first + k];
}

/* match.c: the rules of the prefixes of @path, appended to @out (*@n). */
void sluice__index_prefixes(const struct sluice__index *ix, const char *path, size_t len,
                            uint32_t out[SLUICE_ENGINE_MATCH_MAX], uint32_t *n);

/* The rules @path (@len bytes) can match, ascending, into @out (at most
 * SLUICE_ENGINE_MATCH_MAX, which the build guaranteed).  Return: count. */
static inline uint32_t sluice__index_lookup(const struct sluice__index *ix, const char *path,
                                            size_t len, uint32_t out[SLUICE_ENGINE_MATCH_MAX])
{
	uint32_t n = 0;
	sluice__index_push(out, &n, ix->cand, ix->any_first, ix->any_count);
	/* exact: one hash, a probe run of at most the table (half empty) */
	if (ix->nexact) {
		for (uint64_t h = path_hash(path, len) & ix->hash_mask;; h = (h + 1) & ix->hash_mask) {
			int32_t j = ix->exact_hash[h];
			if (j < 0)
				break;
			const struct sluice__route *e = &ix->exact[j];
			if (e->len == len && path_eq(e->s, path, len)) {
				sluice__index_push(out, &n, ix->cand, e->first, e->count);
				break;
			}
		}
	}
	if (ix->nprefix)
		sluice__index_prefixes(ix, path, len, out, &n);
	/* file order: insertion sort of at most SLUICE_ENGINE_MATCH_MAX */
	for (uint32_t i = 1; i < n; i++) {
		uint32_t v = out[i], j = i;
		while (j > 0 && out[j - 1] > v) {
			out[j] = out[j - 1];
			j--;
		}
		out[j] = v;
	}
	return n;
}

#endif /* SLUICE_RULES_MATCH_INTERNAL_H */
