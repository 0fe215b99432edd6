/* SPDX-License-Identifier: MIT */
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
#include "sluice/static/stripe.h" /* sluice__stripe_pick: the library's picker */
#include "keyhash_internal.h"
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

/* decide() results besides 1 and 0 */
#define STALE 2     /* the slot changed owner: look the key up again */
#define RETIRED 3   /* the key's state is retired: create it again   */
#define BUSY 4      /* the retry bound was reached: SLUICE_EBUSY     */
#define TOOBIG 5    /* n is above the era's largest: SLUICE_ETOOBIG  */

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
 * Stall points for the deterministic tests (tests/core/test_keyed_faults.c,
 * which compiles the keyed files with SLUICE_TESTING).  The production library
 * has none: STALL() is empty and test_stop is the constant 0, so the
 * compiler removes every test branch, and no test symbol is exported.
 */
#define STALL_DECIDE 1 /* a decision, between its load and its CAS       */
#define STALL_WORD 2   /* a claim, between its tag check and a key word's CAS */
#define STALL_LOOKUP 3 /* an acquire, between its lookup and the state's loads (the slot) */
#define STALL_CLAIM 4  /* a creation, between its scan and its claim's CAS (the tag) */
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

/*
 * SLUICE_TESTABLE: `static` in the library; external in the test-only
 * library (lib/meson.build, sluice_testing_dep: lib/ compiled with
 * SLUICE_TESTING), so tests/core/test_keyed_faults.c calls these internals
 * without compiling lib/ sources itself.  Neither the names nor the test hooks
 * above exist in libsluice.a or libsluice.so (tests/abi).
 */
#ifdef SLUICE_TESTING
#define SLUICE_TESTABLE
struct sluice__keyed_hdr;
struct sluice__keyed_live;
/* keyed_table.c: the header's checksum */
uint64_t header_check(const struct sluice__keyed_hdr *h);
/* keyed_live.c: the setters' lock and a field's ticketed write */
int lock_take(struct sluice__keyed_live *l, uint64_t *lo, uint64_t *era);
int field_set(_Atomic uint64_t (*f)[2], unsigned i, uint64_t v, uint64_t me);
/* keyed_slot.c: a creation stopped after step @stop (a killed process) */
int sluice__keyed_test_stall(sluice_keyed_t *k, const void *key, size_t keylen, uint64_t now,
                             int stop);
#else
#define SLUICE_TESTABLE static
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
_Static_assert(sizeof(struct sluice_stripe_cell) == SLUICE_CACHELINE, "a cell is one line");
_Static_assert(sizeof(((sluice_keyed_t *)0)->ak) == SLUICE__KEYHASH_WORDS * 8,
               "the handle holds the AES hash's round keys");

/* The key as this table stores it: group, probe start, tag id, words. */
struct kid {
	uint64_t group, id;
	unsigned start, used; /* used: words holding key bytes (pw[used..] unset) */
	/* the claim counter under which find_live() last matched the key's
	 * words (0: none, the rechecks compare the words: still_ours()) */
	uint64_t claim;
	_Atomic uint64_t *first; /* the slot at probe position 0 (kid_place()) */
	uint64_t pw[(SLUICE_KEYED_KEY_MAX + 7) / 8];
};

/* Validated parameters and the layout they imply. */
struct params {
	uint32_t algo, policy, flags, key_max, buckets, cbits;
	uint64_t capacity;
	uint64_t rate, period_ns, burst, depth, limit, window_ns;
	uint64_t interval, tau, recip, shift, width_ns, nmax;
};
struct layout {
	uint64_t groups, live_off, slots_off, floors_off, cells_off, total;
	uint32_t slot_bytes, key_words, bucket_words, state_word;
};

/* The slot word of the state (every algorithm), the first even word after
 * the key words, so that it and the owner counter after it are one
 * 16-byte-aligned pair (slots are 64-byte aligned) for sluice__pair_cas

 * (DESIGN, "Owners").  WINDOW's bucket words follow the pair. */
static inline uint32_t pair_state_word(uint32_t key_words)
{
	return 2 + 2 * key_words;
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

/* Key word @j: 8 key bytes, the first of a 16-byte pair whose second word
 * is the claim counter of the claim that wrote it (keyed_slot.c, "Claims"). */
static inline _Atomic uint64_t *key_word(_Atomic uint64_t *s, uint32_t j)
{
	return &s[2 + 2 * j];
}

static inline _Atomic uint64_t *bucket(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t e)
{
	return &s[pair_state_word(k->key_words) + 2 + (e & k->bucket_mask)];
}

/*
 * Statistics: CELLS per-CPU cells of stripe.h's type (one cache line of
 * counters each, picked by stripe.h's picker), in the table's region, so
 * every process that maps it adds to and reads the same cells.  One word
 * of each cell per counter; live is creations minus slots taken from live
 * keys (it wraps: a sum of +1 and -1 over cells).
 */
enum {
	KS_lookups,
	KS_creations,
	KS_reclaims,
	KS_evictions,
	KS_rejections,
	KS_untracked,
	KS_steals,
	KS_live,
	KS_COUNT
};
_Static_assert(KS_COUNT <= SLUICE_STRIPE_CELL_WORDS, "the counters fit one cell");

/* Relaxed adds on this CPU's cell: statistics publish nothing.  The words
 * are signed (stripe.h's), and atomic arithmetic wraps: @v as uint64_t
 * (a -1 included) adds modulo 2^64, as an unsigned counter would. */
static inline void stat_add(const sluice_keyed_t *k, unsigned counter, uint64_t v)
{
	struct sluice_stripe_cell *c = &k->cells[sluice__stripe_pick(k->cell_mask)];
	atomic_fetch_add_explicit(&c->word[counter], (int64_t)v, memory_order_relaxed);
}
#define STAT(k, f, v) stat_add((k), KS_##f, (uint64_t)(v))

/* Two counters on one pick of this CPU's cell (a creation counts itself
 * and a live key; a slot retaken counts one live key less and why): the
 * CPU number is read once (some 40 instructions without rseq). */
static inline void stat_add2(const sluice_keyed_t *k, unsigned c1, uint64_t v1, unsigned c2,
                             uint64_t v2)
{
	struct sluice_stripe_cell *c = &k->cells[sluice__stripe_pick(k->cell_mask)];
	atomic_fetch_add_explicit(&c->word[c1], (int64_t)v1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->word[c2], (int64_t)v2, memory_order_relaxed);
}
#define STAT2(k, f1, v1, f2, v2) \
	stat_add2((k), KS_##f1, (uint64_t)(v1), KS_##f2, (uint64_t)(v2))

/*
 * The lookups counter, on every decision of a table made with
 * SLUICE_KEYED_COUNT_LOOKUPS: a relaxed load and store of this CPU's word,
 * not an atomic read-modify-write (a locked add was about 6 ns, a sixth of
 * a keyed decision, for a statistic; docs/performance.md).  Opt-in: the CPU
 * number alone is 8 instructions with rseq and some 40 without (valgrind,
 * kernels before 4.18), a tenth of a decision, for a count that every
 * gateway already keeps of its own requests (issue 27).  A
 * count is lost only when another call adds to the same cell between this
 * call's load and store (it was preempted or migrated there, or another
 * process runs on the same CPU number): lookups may then undercount, never
 * overcount (keyed.h, sluice_keyed_stats_t).
 */
static inline void stat_lookup(const sluice_keyed_t *k)
{
	_Atomic int64_t *w = &k->cells[sluice__stripe_pick(k->cell_mask)].word[KS_lookups];
	int64_t v = atomic_load_explicit(w, memory_order_relaxed);
	atomic_store_explicit(w, (int64_t)((uint64_t)v + 1), memory_order_relaxed);
}

/* A counter's total over the cells (relaxed: ordered with nothing). */
static inline uint64_t stat_sum(const sluice_keyed_t *k, unsigned counter)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i <= k->cell_mask; i++)
		total += (uint64_t)atomic_load_explicit(&k->cells[i].word[counter],
		                                        memory_order_relaxed);
	return total;
}

static inline uint64_t sluice__keyed_load_le64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}
/* @id's hash fields from the key's hash @h, and the prefetch of its first
 * slot: its line is loaded next (find_live()), so the load starts now,
 * under the rest of make_kid() and the statistics' add (a hint: no fault,
 * no effect on any result).  The state's line too: past the first line
 * when the key words fill it (key_max above 24: a slot of two lines), and
 * read right after the lookup; the same line otherwise (a hit). */
static inline void kid_place(const sluice_keyed_t *k, uint64_t h, unsigned lencode,
                             struct kid *id)
{
	id->group = h & k->group_mask;
	id->start = (unsigned)(h >> 32) & (G - 1);
	id->id = ((uint64_t)lencode << 38) | ((h >> 40) << 14);
	id->first = slot_at(k, id->group * G + id->start);
	__builtin_prefetch(id->first);
	__builtin_prefetch(state_at(k, id->first));
}

/*
 * hash16 - the table's hash of a key of @len (1..16) bytes given as its
 * words (sluice__siphash_words16()): the AES hash of keyhash_internal.h,
 * or SipHash-1-3 when the table's header says so (SLUICE_KEYED_SIPHASH in
 * k->flags: chosen at init, or the CPU that formatted the table lacked
 * AES-NI).  attach refused an AES table in a process whose CPU cannot run
 * it, so the AES branch runs only where AES-NI is present.  The branch
 * goes the same way on every call of a handle: predicted.
 */
static inline __attribute__((always_inline)) uint64_t hash16(const sluice_keyed_t *k, uint64_t w0,
                                                           uint64_t w1, size_t len)
{
#ifdef SLUICE__KEYHASH_AES
	if (SLUICE_LIKELY(!(k->flags & SLUICE_KEYED_SIPHASH)))
		return sluice__keyhash_aes16(k->ak, w0, w1, len);
#endif
	return sluice__siphash13_words16(k->k0, k->k1, w0, w1, len);
}

/*
 * make_kid - the key as this table stores it: its words (8 bytes each, the
 * last one zero-padded; id->used of them: nothing reads or writes a slot's
 * words past its key's, words_match_at()), its group, probe start and tag id, from the table's hash
 * under its secret seed (hash16() for keys of up to 16 bytes and digests,
 * SipHash-1-3 under (k0, k1) for longer keys).  A key longer than key_max is, with
 * SLUICE_KEYED_HASH_LONG_KEYS, replaced by its 16-byte digest (two
 * SipHash-1-3 under the digest keys) and the length code LEN_HASHED.
 *
 * Keys of up to 16 bytes (every key of a table with key_max <= 16, and
 * every digest) take sluice__siphash13_words16(): the key's bytes are
 * loaded once, as the two words the slot compare needs, and hashed from
 * those registers with the rounds written out (no loop, no tail loads, no
 * copy of the words: GCC turned the word loop into a memcpy call).
 * Longer keys take the generic body and the word loop.
 */
static inline __attribute__((always_inline)) int make_kid(const sluice_keyed_t *k, const void *key,
                                                        size_t len, struct kid *id)
{
	if (len == 0)
		return SLUICE_EKEYLEN;
	const unsigned char *p = key;
	uint64_t w0, w1;
	id->claim = 0;
	if (len > k->key_max) {
		if (!(k->flags & SLUICE_KEYED_HASH_LONG_KEYS))
			return SLUICE_EKEYLEN;
		/* the digest's bytes, read as sluice__siphash_words16() would
		 * read them (little-endian words) */
		w0 = sluice__siphash13(k->d0, k->d1, key, len);
		w1 = sluice__siphash13(k->d2, k->d3, key, len);
		kid_place(k, hash16(k, w0, w1, 16), LEN_HASHED, id);
		id->used = 2;
		id->pw[0] = w0;
		id->pw[1] = w1;
		return 0;
	}
	if (SLUICE_LIKELY(len <= 16)) {
		sluice__siphash_words16(p, len, &w0, &w1);
		kid_place(k, hash16(k, w0, w1, len), (unsigned)len, id);
		id->used = len > 8 ? 2 : 1;
		id->pw[0] = w0;
		id->pw[1] = w1;
		return 0;
	}
	kid_place(k, sluice__siphash13_short(k->k0, k->k1, p, len), (unsigned)len, id);
	id->used = (unsigned)((len + 7) / 8);
	size_t whole = len / 8;
	for (size_t j = 0; j < whole; j++)
		id->pw[j] = sluice__keyed_load_le64(p + 8 * j);
	if (len % 8)
		id->pw[whole] = sluice__siphash_tail(p + 8 * whole, len % 8);
	return 0;
}

static inline uint64_t slot_index(const struct kid *id, unsigned pos)
{
	return id->group * G + ((id->start + pos) & (G - 1));
}

/*
 * Do the key words of @s hold @id's key, as written by the slot's current
 * claim?  Each used word pair must hold @id's bytes and one common claim
 * counter c, and the slot's claim counter, loaded after them, must still be
 * c.  Every claim bumps the slot's counter (in the pair CAS that takes the
 * tag) before it writes any word, and writes each word pair with its own
 * counter in one pair CAS, so a word read from a later claim (or a pair
 * torn between claims: the halves are loaded one by one) makes the counter
 * load that follows it show that later claim (acquire: pairs with the
 * words' pair CASes, full barriers after the counter's bump), and the
 * match fails.  So a match means: at the counter load, the slot's claim
 * was c and its words (written only by claim c's completers) held our key
 * (see "Claims" in keyed_slot.c for the one exception, a hijack, which
 * only happens between keys of equal (len, fp) before publication and ends
 * with words and tag agreeing).  No 16-bit generation is involved: the
 * 64-bit counter never repeats, so no stop of any length and no number of
 * claims since makes an old claim's words look current.  The caller loaded
 * the tag (acquire) and checked the length in it, so the slot's key has
 * the length of @id's: only the words that hold its bytes are read, and
 * only those are written (complete(): the words past them keep whatever
 * an older claim of a longer key left, under its counter).
 */
static inline int words_match_at(const sluice_keyed_t *k, _Atomic uint64_t *s,
                                 const struct kid *id, uint64_t *claim)
{
	(void)k;
	/* Acquire on the counter halves: each pairs with the pair CAS that
	 * wrote the word (see above); the word half is then that write's or
	 * a later one's, which the final counter load catches. */
	uint64_t c = atomic_load_explicit(&key_word(s, 0)[1], memory_order_acquire);
	if (atomic_load_explicit(key_word(s, 0), memory_order_acquire) != id->pw[0])
		return 0;
	/* The second word apart (keys of 9 to 16 bytes, and digests: the
	 * common case, without the loop's own instructions). */
	if (id->used > 1 && (atomic_load_explicit(&key_word(s, 1)[1], memory_order_acquire) != c ||
	                     atomic_load_explicit(key_word(s, 1), memory_order_acquire) != id->pw[1]))
		return 0;
	for (uint32_t j = 2; j < id->used; j++) {
		_Atomic uint64_t *kw = key_word(s, j);
		if (atomic_load_explicit(&kw[1], memory_order_acquire) != c ||
		    atomic_load_explicit(kw, memory_order_acquire) != id->pw[j])
			return 0;
	}
	/* Acquire: ordered after the word loads above (see above). */
	*claim = c;
	return atomic_load_explicit(&s[1], memory_order_acquire) == c;
}

/* words_match_at(), the claim not wanted. */
static inline int words_match(const sluice_keyed_t *k, _Atomic uint64_t *s,
                              const struct kid *id)
{
	uint64_t c;
	return words_match_at(k, s, id, &c);
}

/* Some key word of the slot's current claim already holds another key:
 * not ours.  The claim counter first (acquire: pairs with the claim's pair
 * CAS), then each word pair of that counter; a later claim meanwhile makes
 * the caller's tag CAS or check fail. */
static inline int words_foreign(const sluice_keyed_t *k, _Atomic uint64_t *s,
                                const struct kid *id)
{
	(void)k;
	uint64_t c = atomic_load_explicit(&s[1], memory_order_acquire);
	/* the words a claim of @id's (len, fp) writes: those of its bytes */
	for (uint32_t j = 0; j < id->used; j++) {
		_Atomic uint64_t *kw = key_word(s, j);
		/* Acquire: pairs with the word's pair CAS (the counter half
		 * first, so the word half is that write's or later). */
		uint64_t wc = atomic_load_explicit(&kw[1], memory_order_acquire);
		uint64_t w = atomic_load_explicit(kw, memory_order_acquire);
		if (wc == c && w != id->pw[j])
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

/*
 * still_ours - does the slot still hold @id's key, as the lookup that gave
 * @tag found it?  The recheck a decision or a release makes after loading
 * the owner counter and the state (keyed_decide.c says why it is needed).
 * The tag first; then, when find_live() matched the key's words under
 * claim id->claim, only the slot's claim counter, which must still be
 * that claim: a word pair of claim c is written once, by claim c's
 * completers, before the tag is published (keyed_slot.c, complete(): a
 * completer that finds a word of its counter stops, it never rewrites
 * one), so the words find_live() matched under a LIVE tag of claim c stay
 * until a later claim, and every later claim bumps the counter (in the
 * pair CAS that takes the tag) before it writes any word or state.  A
 * state the caller acquired that a later owner's initialisation wrote
 * therefore makes this acquire load see a later counter, exactly as
 * words_match()'s own last load would: the words themselves need not be
 * read again (callgrind: 15 instructions a decision).  Without a claim
 * (a slot that a creation returned) the words are compared.
 */
static inline int still_ours(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
                             const struct kid *id)
{
	if (!same_owner(s, tag))
		return 0;
	if (SLUICE_LIKELY(id->claim != 0))
		/* Acquire: ordered after the caller's loads of the owner and
		 * the state; pairs with the claim's pair CAS (see above). */
		return atomic_load_explicit(&s[1], memory_order_acquire) == id->claim;
	return words_match(k, s, id);
}

static inline uint64_t lease_now(void)
{
	return (sluice_clock_coarse_ns() >> UNIT_SHIFT) & UNIT_MASK;
}

/* ---------------------------------------------------------------- */
/* Claims                                                             */

/* Lookup: the slot holding @id's key, LIVE, or NULL; id->claim is the
 * claim counter its words matched under (0 when not found: still_ours()).
 * The slot, not its index: every caller wants the slot, and computing it
 * again was a multiply and 6 more instructions a decision. */
static inline _Atomic uint64_t *find_live(const sluice_keyed_t *k, struct kid *id, uint64_t *tag)
{
	id->claim = 0;
	const uint64_t want = (K_LIVE << 62) | id->id;
	for (unsigned pos = 0; pos < G; pos++) {
		/* the first slot as kid_place() found it (no second multiply) */
		_Atomic uint64_t *s = pos == 0 ? id->first : slot_at(k, slot_index(id, pos));
		/* Acquire: pairs with the publishing CAS (release): the key
		 * words and the initial state are visible. */
		uint64_t t = atomic_load_explicit(&s[0], memory_order_acquire);
		if (t == 0)
			break; /* never used: the key is not further (see create()) */
		uint64_t c;
		if ((t & ((3ULL << 62) | ID_MASK)) != want || !words_match_at(k, s, id, &c))
			continue;
		id->claim = c;
		*tag = t;
		return s;
	}
	return NULL;
}

/* Fill @d as a refusal that took nothing (SLUICE_EBUSY). */
static inline void busy_decision(uint64_t limit, sluice_decision_t *d, uint64_t now)
{
	if (d) {
		d->allowed = 0;
		d->limit = limit;
		d->remaining = 0;
		d->retry_after_ns = 0;
		d->delay_ns = 0;
		d->reset_ns = 0;
		d->now_ns = now;
	}
}

/* ---------------------------------------------------------------- */
/* Live parameters (lib/keyed_live.c says how they change)            */

/*
 * The parameter block: after the header, one line of control words and
 * two blocks of fields, each field a 16-byte (value, ticket) pair.
 * ctl[0] is the setters' lock: ticket:49 | held:1 | stamp:14 (the
 * holder's CLOCK_MONOTONIC_COARSE time in units of 2^24 ns, as claims);
 * ctl[1] is the era, the number of changes published: blk[era & 1] holds
 * the parameters in force.  Setters change ctl (both words) only with one
 * pair CAS, so publishing era e + 1 succeeds only for the setter that
 * still holds the lock it took (a setter whose lock was stolen cannot
 * publish).  Every field write is a pair CAS that expects the ticket it
 * read and fails on a newer one, so a setter resumed after its lock was
 * stolen can never write into a block a newer setter filled (the only
 * blocks that are ever in force).  Decisions read only the value words.
 * pub is (the newest reading after the last publication, its era + 1):
 * what the next setter needs to know when the era before it is all fresh
 * (keyed_live.c).  hw is the newest reading: at least every reading a GCRA
 * or LEAKY decision, creation or setter of the table used, at most
 * HW_SLACK past one of them (hw_note(); keyed_live.c, "The newest
 * reading").
 */
enum {
	F_INTERVAL, /* GCRA, LEAKY: T                                       */
	F_TAU,      /* tau = b T ((D + 1) T)                                */
	F_NMAX,     /* the largest n: b, D + 1, L or K                     */
	F_RECIP,    /* gcra.h's reciprocal of T, and its shift             */
	F_SHIFT,
	F_PINTERVAL, /* the era before: T and tau, for the conversion     */
	F_PTAU,
	F_TC,     /* the change's reading (0 for era 0)                    */
	F_LIMIT,  /* FIXED, WINDOW, INFLIGHT: L (K)                       */
	F_CAP,    /* FIXED, WINDOW: the limit before epoch F_FROM          */
	F_FROM,   /* the first window (bucket) where F_LIMIT applies alone */
	F_RATE,   /* as configured: the next change starts from these      */
	F_PERIOD,
	F_BURST,  /* GCRA: b; LEAKY: D                                     */
	F_LIFT,   /* GCRA, LEAKY: a burst raise's (b1 - b0) T1, else 0      */
	F_COUNT
};
struct sluice__keyed_blk {
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t f[F_COUNT][2];
};
struct sluice__keyed_live {
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t ctl[2];
	_Atomic uint64_t pub[2];
	_Atomic uint64_t hw; /* in the era's line: loaded with it */
	struct sluice__keyed_blk blk[2];
};
#define LIVE_BYTES ((uint32_t)sizeof(struct sluice__keyed_live))
#define LOCK_HELD (1ULL << 14)
#define LOCK_TICKET(w) ((w) >> 15)
/* GCRA, LEAKY: the era's parity in a live state word (bit 62, which only a
 * retired state uses, as S_VIRGIN) */
#define S_PAR (1ULL << 62)

/* The parameters one decision uses, all from one era. */
struct kp {
	uint64_t era, interval, tau, nmax, recip, shift, pinterval, ptau, tc;
	uint64_t limit, cap, from, lift;
};

/*
 * The newest reading (keyed_live.c, "The newest reading").  hw is raised
 * to a reading plus HW_SLACK whenever a reading passes it, so it is
 * written about once per HW_SLACK of the table's time (2^16 ns, 65.5 us:
 * some 15,000 writes a second to the era's line, a miss per CPU each),
 * and hw - HW_SLACK is never past a reading some call used.
 */
#define HW_SLACK (1ULL << 16)
/* Readings more than HW_TRUST (2^30 ns, 1.07 s) past a change's stamp are
 * a forward clock jump to it: they neither raise the stamp nor make the
 * next change wait (keyed_live.c, "Jumps"). */
#define HW_TRUST (1ULL << 30)

void sluice__keyed_hw_raise(struct sluice__keyed_live *l, uint64_t to);

/*
 * hw_note - make the newest reading cover @now, before the era is loaded
 * (kp_era()).  seq_cst, as the era load after it and the setter's
 * publication and hw load (keyed_live.c): of a call whose era load saw
 * era e - 1 and the setter of era e, which loads hw after publishing e,
 * one comes first, so that setter's hw covers every reading of era e - 1
 * (the store-buffer pattern: each side writes its word, then reads the
 * other's).  On the hot path: a load of the era's line, already loaded,
 * and a compare.
 */
static inline void hw_note(const sluice_keyed_t *k, uint64_t now)
{
	if (SLUICE_UNLIKELY(now > atomic_load_explicit(&k->live->hw, memory_order_seq_cst)))
		sluice__keyed_hw_raise(k->live, now + HW_SLACK);
}

/* @a + @b, at most TMAX (the latest time a state word holds). */
static inline uint64_t tmax_add(uint64_t a, uint64_t b)
{
	return a >= TMAX || b >= TMAX - a ? TMAX : a + b;
}

/*
 * sluice__keyed_gcra_owed - GCRA, LEAKY: a debt of @over ns past the old
 * tolerance (permits owed, @over / @t_old of them) in ns of the new
 * interval @t_new, rounded up (more owed: against admission), at most
 * TMAX.  A change's conversion (keyed_live.c) keeps it; @t_old = 0 (a
 * forged value) owes everything.  (Arithmetic of gcra_step.h's kind, kept
 * here because only the keyed conversion keeps a debt past the horizon.)
 */
static inline uint64_t sluice__keyed_gcra_owed(uint64_t over, uint64_t t_old, uint64_t t_new)
{
	if (t_old == 0)
		return TMAX;
	sluice__u128 owed = ((sluice__u128)over * t_new + t_old - 1) / t_old;
	return owed > TMAX ? TMAX : (uint64_t)owed;
}

/*
 * kp_gcra_ok - GCRA, LEAKY: are the era's T, tau and largest n what a
 * setter or init writes (1 <= T, tau = nmax T with no overflow, tau at most
 * SLUICE_KEYED_TAU_MAX)?  The block is shared memory: another process can
 * write anything there (issue 22, R7: T = 0 or tau = 2^61 admitted every
 * request).  A block that fails is refused whole (the decision returns
 * SLUICE_EBUSY, having taken nothing), not clamped: no clamp of an
 * inconsistent set is a set init accepted.  A multiply and three
 * compares on values already loaded.
 */
static inline int kp_gcra_ok(const struct kp *p)
{
	uint64_t prod;
	return !__builtin_mul_overflow(p->nmax, p->interval, &prod) && prod == p->tau &&
	       p->tau - 1 < SLUICE_KEYED_TAU_MAX;
}

/*
 * kp_win_ok - FIXED, WINDOW: the relations every setter keeps: the
 * largest n is the limit, and the cap of a transition never exceeds the
 * limit (it is the smaller of the old and new L, or an earlier cap).  A
 * block that fails is refused whole (SLUICE_EBUSY); values that pass are
 * clamped to the count's range where they are used.
 */
static inline int kp_win_ok(const struct kp *p)
{
	return p->nmax == p->limit && p->cap <= p->limit;
}

/*
 * kp_load - the era in force and its parameters.  Acquire on the era:
 * pairs with the pair CAS that published it (a full barrier after the
 * block's field CASes), so the block's values are those of that era.
 * The block may be rewritten meanwhile only by a setter of era + 1 (it
 * writes blk[(era + 1) & 1]: the other block) or later (era + 2 writes
 * this block, after era + 1 was published); kp_same() after the state
 * load detects both.  Values are used as harmless at any value (the
 * callers mask, saturate and guard divisors): a hostile process can write
 * them.
 */
static inline _Atomic uint64_t (*kp_era(const sluice_keyed_t *k, uint64_t *e))[2]
{
	/* seq_cst (a plain load on x86, as acquire): also ordered after
	 * hw_note() (see there). */
	*e = atomic_load_explicit(&k->live->ctl[1], memory_order_seq_cst);
	return k->live->blk[*e & 1].f;
}

/* Acquire (plain loads on x86): each pairs with the field's pair CAS by
 * the setter that wrote it, so a value a later era's setter wrote makes
 * that setter's view of the era visible to kp_same()'s load, which these
 * loads are ordered before. */
#define KPF(f, i) atomic_load_explicit(&(f)[i][0], memory_order_acquire)

/* The decision paths load only their algorithm's fields (no other field
 * of *p is read there). */
static inline void kp_load_gcra(const sluice_keyed_t *k, struct kp *p)
{
	_Atomic uint64_t(*f)[2] = kp_era(k, &p->era);
	p->nmax = KPF(f, F_NMAX);
	p->interval = KPF(f, F_INTERVAL);
	p->tau = KPF(f, F_TAU);
	p->recip = KPF(f, F_RECIP);
	p->shift = KPF(f, F_SHIFT) & 63; /* a forged shift: in range */
	p->tc = KPF(f, F_TC);
}

/* GCRA, LEAKY: the era before's T and tau, which only a conversion reads
 * (sluice__keyed_gcra_convert()), from @p's era's block: loaded apart so a
 * decision on a state of its own era does not load them.  The caller checks
 * kp_same() after them (these acquires order that load after them, as in
 * kp_load()): a block rewritten for a later era shows a later era there. */
static inline void kp_load_before(const sluice_keyed_t *k, struct kp *p)
{
	_Atomic uint64_t(*f)[2] = k->live->blk[p->era & 1].f;
	p->pinterval = KPF(f, F_PINTERVAL);
	p->ptau = KPF(f, F_PTAU);
}

/* FIXED, WINDOW: the windows' fields of @p's era (after a kp_load_*). */
static inline void kp_load_windows(const sluice_keyed_t *k, struct kp *p)
{
	_Atomic uint64_t(*f)[2] = k->live->blk[p->era & 1].f;
	p->limit = KPF(f, F_LIMIT);
	p->cap = KPF(f, F_CAP);
	p->from = KPF(f, F_FROM);
}

/* INFLIGHT: the era, n's bound and the limit. */
static inline void kp_load_limit(const sluice_keyed_t *k, struct kp *p)
{
	_Atomic uint64_t(*f)[2] = kp_era(k, &p->era);
	p->nmax = KPF(f, F_NMAX);
	p->limit = KPF(f, F_LIMIT);
}

/* FIXED, WINDOW: the era, n's bound, then the windows' fields. */
static inline void kp_load_win(const sluice_keyed_t *k, struct kp *p)
{
	_Atomic uint64_t(*f)[2] = kp_era(k, &p->era);
	p->nmax = KPF(f, F_NMAX);
	kp_load_windows(k, p);
}

/* Every field, for the slow paths (creation, freshness, first states):
 * the GCRA ones, then the others from the same era's block. */
static inline void kp_load(const sluice_keyed_t *k, struct kp *p)
{
	kp_load_gcra(k, p);
	kp_load_before(k, p);
	kp_load_windows(k, p);
	p->lift = KPF(k->live->blk[p->era & 1].f, F_LIFT);
}

/*
 * kp_same - is era @e still in force?  Called after the acquire loads it
 * covers (the parameters, and the state word a decision read), which order
 * this load after them.  A parameter value written by a setter of a later
 * era (a pair CAS, a full barrier, after its lock CAS read the era before
 * it) happens before this load, and so does that era's publication: the
 * load then returns a later era (write-read coherence).  Likewise a state
 * word written by a decision of a later era (whose era load acquired that
 * era).  Relaxed: the ordering comes from those acquires (no fence, which
 * ThreadSanitizer would not model).
 */
static inline int kp_same(const sluice_keyed_t *k, uint64_t e)
{
	return atomic_load_explicit(&k->live->ctl[1], memory_order_relaxed) == e;
}

/* GCRA, LEAKY: the TAT @x of the era before, read in era @p (keyed_live.c
 * says why this is gcra.h's SET_RATE / SET_BURST rule, taken at the
 * change's reading p->tc).  Never below x, at most TMAX. */
uint64_t sluice__keyed_gcra_convert(const struct kp *p, uint64_t x);

/* keyed_live.c: write era 0's parameters (init) */
void sluice__keyed_live_format(struct sluice__keyed_live *l, const struct params *p);

/* keyed_table.c */
int sluice__keyed_have_aes(void); /* the AES hash can run here (cpuid) */
#ifdef SLUICE_TESTING
extern int sluice__keyed_test_no_aes; /* tests: act as a CPU without AES-NI */
#endif
int sluice__keyed_validate(const sluice_keyed_config_t *c, struct params *p);
void sluice__keyed_layout(const struct params *p, struct layout *l);
/* keyed_decide.c: the algorithms' freshness, loss and first state */
int sluice__keyed_state_fresh(const sluice_keyed_t *k, const struct kp *p, _Atomic uint64_t *s,
                              uint64_t st, uint64_t now, uint64_t *loss, uint64_t *wait);
uint64_t sluice__keyed_successor(const sluice_keyed_t *k, const struct kp *p, uint64_t st,
                                 uint64_t floor, uint64_t now);
/* keyed_slot.c: give a new key a slot */
int64_t sluice__keyed_create(const sluice_keyed_t *k, const struct kid *id, uint64_t now,
                             sluice_decision_t *d, int *rc, uint64_t *tag, unsigned *tries);

#endif /* SLUICE_KEYED_INTERNAL_H */
