/*
 * keyed_internal.h - what the keyed files share (never installed): the
 * table header, the slot and state word encodings, the key as a table
 * stores it, the small slot accessors, the retry bound and the stall points
 * of the test build.
 *
 * lib/keyed_table.c formats, validates and attaches tables; lib/keyed_slot.c
 * runs the slot protocol (lookup, claim, help, steal, reclaim, evict);
 * lib/keyed_decide.c decides on one key's state and holds the public
 * decision entry points, so the decision path (hash, lookup, decision) is
 * one translation unit and nothing on it is a cross-file call.
 *
 * DESIGN (shared by the three files)
 *
 * Bounded retries: each public call carries one retry budget (RETRY_MAX)
 * through every loop it runs (decisions, the ring's steps, claims, the
 * floor), so no value another process writes, and no stop of another
 * process, can make a call run longer than that: it ends with
 * SLUICE_EBUSY, having taken nothing.  Values read from shared memory on a
 * decision path are used only through masks, saturating or unsigned
 * arithmetic and bounded loops; the parameters come from the handle, which
 * attach filled from its own validation, never from the header.
 */
#ifndef SLUICE_KEYED_INTERNAL_H
#define SLUICE_KEYED_INTERNAL_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sluice/error.h"
#include "sluice/keyed.h"
#include "sluice/stripe.h"
#include "siphash_internal.h"
#include "util_internal.h"

#define MAGIC 0x3144455945484c53ULL /* "SLHEYED1" read as little-endian */
#define HDR_BYTES 256u
#define CELLS 16u
#define G SLUICE_KEYED_GROUP

/* tag */
#define K_OPEN 0ULL
#define K_BUSY 1ULL
#define K_LIVE 2ULL
#define KIND(t) ((t) >> 62)
#define GEN(t) (((t) >> 46) & 0xffffu)
#define ID_MASK (((1ULL << 32) - 1) << 14) /* len:8 | fp:24 */
#define REF 1ULL
#define UNIT_MASK 0x3fffULL
#define LEN_HASHED 255u
#define MK_TAG(kind, gen, id, low) \
	(((uint64_t)(kind) << 62) | ((uint64_t)((gen) & 0xffffu) << 46) | (id) | (low))

/* state */
#define S_RET (1ULL << 63)
#define S_VIRGIN (1ULL << 62)
#define S_VAL ((1ULL << 62) - 1)
#define TMAX SLUICE_KEYED_TIME_MAX
#define M48 ((1ULL << 48) - 1)

/* decide() results besides 1 and 0 */
#define STALE 2     /* the slot changed owner: look the key up again */
#define RETIRED 3   /* the key's state is retired: create it again   */
#define BUSY 4      /* the retry bound was reached: SLUICE_EBUSY     */

/*
 * Retry bound of one call (acquire, release): every retry anywhere in the
 * call (a failed CAS on the state, a bucket or a tag, a lookup that found
 * the slot changed owner, a creation round that lost its slot) counts, and
 * past RETRY_MAX the call gives up with SLUICE_EBUSY, having taken nothing.
 * A retry means another operation changed that word meanwhile; among honest
 * callers that is progress (lock-free), so the bound only ends a call whose
 * words another process rewrites without end (a hostile writer) or a
 * sequence that cannot converge (a forged slot).  4096 retries is far more
 * than contention produces (each needs another decision on the same key to
 * succeed in between) and a few hundred microseconds of work.
 */
#define RETRY_MAX 4096u

/*
 * Stall points for the deterministic tests (tests/test_keyed_faults.c,
 * which compiles the keyed files with SLUICE_TESTING).  The production library
 * has none: STALL() is empty and test_stop is the constant 0, so the
 * compiler removes every test branch, and no test symbol is exported.
 */
#define STALL_DECIDE 1 /* a decision, between its load and its CAS       */
#define STALL_WORD 2   /* a claim, between its tag check and a key word's CAS */
#ifdef SLUICE_TESTING
extern void (*sluice__keyed_stall_hook)(int point, _Atomic uint64_t *word);
#define STALL(point, word)                                     \
	do {                                                   \
		if (sluice__keyed_stall_hook)                  \
			sluice__keyed_stall_hook((point), (word)); \
	} while (0)
extern int sluice__keyed_test_stop; /* keyed_slot.c: where a test creation stops */
#define test_stop sluice__keyed_test_stop
#else
#define STALL(point, word) ((void)0)
#define test_stop 0
#endif

/* Lease: claim-time units of 2^24 ns; stale after LEASE_UNITS + 1 units. */
#define UNIT_SHIFT 24
#define LEASE_UNITS ((((uint64_t)SLUICE_KEYED_LEASE_MS * 1000000ULL) >> UNIT_SHIFT) + 1)

struct sluice__keyed_hdr {
	_Atomic uint64_t magic; /* written last, with release */
	uint32_t version, hdr_bytes;
	uint64_t total_bytes, capacity, groups;
	uint64_t slots_off, floors_off, cells_off;
	uint32_t algo, policy, flags, key_max;
	uint32_t slot_bytes, key_words, group_slots, cells;
	uint32_t buckets, bucket_words;
	uint64_t k0, k1, d0, d1, d2, d3;
	uint64_t rate, period_ns, burst, depth, limit, window_ns;
	uint64_t interval, tau, recip, shift, width_ns, nmax;
	uint64_t check; /* SipHash of the fields above (after magic) */
};
_Static_assert(sizeof(struct sluice__keyed_hdr) <= HDR_BYTES, "header grew past 256 bytes");
_Static_assert(sizeof(struct sluice__keyed_cell) == SLUICE_CACHELINE, "a cell is one line");

/* The key as this table stores it: group, probe start, tag id, words. */
struct kid {
	uint64_t group, id;
	unsigned start, used; /* used: words holding key bytes (the rest 0) */
	uint64_t pw[(SLUICE_KEYED_KEY_MAX + 5) / 6];
};

/* Validated parameters and the layout they imply. */
struct params {
	uint32_t algo, policy, flags, key_max, buckets, cbits;
	uint64_t capacity;
	uint64_t rate, period_ns, burst, depth, limit, window_ns;
	uint64_t interval, tau, recip, shift, width_ns, nmax;
};
struct layout {
	uint64_t groups, slots_off, floors_off, cells_off, total;
	uint32_t slot_bytes, key_words, bucket_words, state_word;
};

/* The slot word of the state (every algorithm), the first even word after
 * the key words, so that it and the owner counter after it are one
 * 16-byte-aligned pair (slots are 64-byte aligned) for sluice__pair_cas

 * (DESIGN, "Owners").  WINDOW's bucket words follow the pair. */
static inline uint32_t pair_state_word(uint32_t key_words)
{
	return 2 + key_words + (key_words & 1);
}


/* ---------------------------------------------------------------- */
/* Slots, keys, statistics                                           */

static inline _Atomic uint64_t *slot_at(const sluice_keyed_t *k, uint64_t i)
{
	return (_Atomic uint64_t *)(k->slots + i * k->slot_bytes);
}

/* The state word (WINDOW: the ring's head), paired with its owner counter,
 * the word after it. */
static inline _Atomic uint64_t *state_at(const sluice_keyed_t *k, _Atomic uint64_t *s)
{
	return &s[pair_state_word(k->key_words)];
}

static inline _Atomic uint64_t *key_word(_Atomic uint64_t *s, uint32_t j)
{
	return &s[2 + j];
}

static inline _Atomic uint64_t *bucket(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t e)
{
	return &s[pair_state_word(k->key_words) + 2 + (e & k->bucket_mask)];
}

/* Relaxed adds on this CPU's cell: statistics publish nothing. */
static inline void stat_add(const sluice_keyed_t *k, size_t field, uint64_t v)
{
	struct sluice__keyed_cell *c = &k->cells[sluice_cpu() & k->cell_mask];
	atomic_fetch_add_explicit((_Atomic uint64_t *)((char *)c + field), v,
	                          memory_order_relaxed);
}
#define STAT(k, f, v) stat_add((k), offsetof(struct sluice__keyed_cell, f), (uint64_t)(v))

static inline uint64_t sluice__keyed_load_le64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}
static inline int make_kid(const sluice_keyed_t *k, const void *key, size_t len, struct kid *id)
{
	if (len == 0)
		return SLUICE_EKEYLEN;
	const unsigned char *p = key;
	unsigned char digest[16];
	unsigned lencode = (unsigned)len;
	if (len > k->key_max) {
		if (!(k->flags & SLUICE_KEYED_HASH_LONG_KEYS))
			return SLUICE_EKEYLEN;
		uint64_t a = htole64(sluice__siphash13(k->d0, k->d1, key, len));
		uint64_t b = htole64(sluice__siphash13(k->d2, k->d3, key, len));
		memcpy(digest, &a, 8);
		memcpy(digest + 8, &b, 8);
		p = digest;
		len = 16;
		lencode = LEN_HASHED; /* never a short key's length */
	}
	uint64_t h = sluice__siphash13(k->k0, k->k1, p, len);
	id->group = h & k->group_mask;
	id->start = (unsigned)(h >> 32) & (G - 1);
	id->id = ((uint64_t)lencode << 38) | ((h >> 40) << 14);
	/* 6 bytes per word, zero-padded: 8-byte loads where the key has
	 * them, the tail byte by byte (no copy, no memset) */
	id->used = (unsigned)((len + 5) / 6);
	for (uint32_t j = 0; j < k->key_words; j++) {
		size_t o = 6 * (size_t)j;
		uint64_t w = 0;
		if (o + 8 <= len) {
			w = sluice__keyed_load_le64(p + o) & M48;
		} else if (o < len) {
			for (size_t b = o; b < len && b < o + 6; b++)
				w |= (uint64_t)p[b] << (8 * (b - o));
		}
		id->pw[j] = w;
	}
	return 0;
}

static inline uint64_t slot_index(const struct kid *id, unsigned pos)
{
	return id->group * G + ((id->start + pos) & (G - 1));
}

/* Do the key words of @s, under generation @gen, hold @id's key?  Relaxed
 * loads: words of gen g only ever hold claim g's key (DESIGN), so no
 * bracketing is needed; the caller loaded the tag with acquire first and
 * checked the length in it.  Only the words that hold key bytes are read:
 * a published claim wrote every word (zeros past the key) before its tag. */
static inline int words_match(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t gen,
                              const struct kid *id)
{
	(void)k;
	for (uint32_t j = 0; j < id->used; j++)
		if (atomic_load_explicit(key_word(s, j), memory_order_relaxed) !=
		    ((gen << 48) | id->pw[j]))
			return 0;
	return 1;
}

/* Some key word of claim @gen already holds another key: not ours. */
static inline int words_foreign(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t gen,
                         const struct kid *id)
{
	for (uint32_t j = 0; j < k->key_words; j++) {
		uint64_t w = atomic_load_explicit(key_word(s, j), memory_order_relaxed);
		if ((w >> 48) == gen && (w & M48) != id->pw[j])
			return 1;
	}
	return 0;
}

/* The generation after @g: 16 bits, skipping 0, so that a tag of 0 always
 * means a slot that was never used (lookups stop there, see create()). */
static inline uint64_t next_gen(uint64_t g)
{
	uint64_t n = (g + 1) & 0xffffu;
	return n ? n : 1;
}

/* The tag still names the owner @tag named (REF may differ). */
static inline int same_owner(_Atomic uint64_t *s, uint64_t tag)
{
	return (atomic_load_explicit(&s[0], memory_order_relaxed) | REF) == (tag | REF);
}

static inline uint64_t lease_now(void)
{
	return (sluice_clock_coarse_ns() >> UNIT_SHIFT) & UNIT_MASK;
}

/* ---------------------------------------------------------------- */
/* Claims                                                             */

/* Lookup: the slot holding @id's key, LIVE, or -1. */
static inline int64_t find_live(const sluice_keyed_t *k, const struct kid *id, uint64_t *tag)
{
	const uint64_t want = (K_LIVE << 62) | id->id;
	for (unsigned pos = 0; pos < G; pos++) {
		uint64_t i = slot_index(id, pos);
		_Atomic uint64_t *s = slot_at(k, i);
		/* Acquire: pairs with the publishing CAS (release): the key
		 * words and the initial state are visible. */
		uint64_t t = atomic_load_explicit(&s[0], memory_order_acquire);
		if (t == 0)
			break; /* never used: the key is not further (see create()) */
		if ((t & ((3ULL << 62) | ID_MASK)) != want || !words_match(k, s, GEN(t), id))
			continue;
		*tag = t;
		return (int64_t)i;
	}
	return -1;
}

/* Fill @d as a refusal that took nothing (SLUICE_EBUSY). */
static inline void busy_decision(const sluice_keyed_t *k, sluice_decision_t *d, uint64_t now)
{
	if (d) {
		d->allowed = 0;
		d->limit = k->limit;
		d->remaining = 0;
		d->retry_after_ns = 0;
		d->delay_ns = 0;
		d->reset_ns = 0;
		d->now_ns = now;
	}
}

/* keyed_table.c */
int sluice__keyed_validate(const sluice_keyed_config_t *c, struct params *p);
void sluice__keyed_layout(const struct params *p, struct layout *l);
/* keyed_decide.c: the algorithms' freshness, loss and first state */
int sluice__keyed_state_fresh(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t st,
                              uint64_t now, uint64_t *loss, uint64_t *wait);
uint64_t sluice__keyed_successor(const sluice_keyed_t *k, uint64_t st, uint64_t floor,
                                 uint64_t now);
/* keyed_slot.c: give a new key a slot */
int64_t sluice__keyed_create(const sluice_keyed_t *k, const struct kid *id, uint64_t now,
                             sluice_decision_t *d, int *rc, uint64_t *tag, unsigned *tries);

#endif /* SLUICE_KEYED_INTERNAL_H */
