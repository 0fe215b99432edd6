/*
 * keyed.c - per-key limiters in one pointer-free block of memory: layout,
 * validation, attach, the slot protocol (lookup, claim, help, steal,
 * reclaim, evict) and the per-key decisions.
 *
 * DESIGN
 *
 * Memory: header (256 B) | 16 statistics cells (64 B each) | one reclaim
 * floor per group (8 B) | slots.  Everything is found by offsets stored in
 * the header, so any process can map it anywhere.  A slot is a run of 64-bit
 * words: [0] tag, [1] unused, [2..2+kw) the key, then at the first even
 * word the state (WINDOW: the ring's head) and the owner counter after it,
 * one 16-byte-aligned pair (see "Owners"), then (WINDOW) the bucket words.
 *
 * Tag: kind:2 | gen:16 | len:8 | fp:24 | low:14.
 *   OPEN  (0)  never used, or abandoned: anyone may claim it.
 *   BUSY  (1)  claimed for the key (len, fp); low = claim time in units of
 *              2^24 ns of CLOCK_MONOTONIC_COARSE (wraps; used for the lease).
 *   LIVE  (2)  holds the key (len, fp) whose bytes are in the key words;
 *              low bit 0 = REF, set by lookups, cleared by evictions (CLOCK).
 * Every claim bumps gen.  Key words are gen:16 | 6 key bytes, so a reader
 * that sees a LIVE tag of gen g and key words all of gen g holding its bytes
 * knows the slot holds its key: words of gen g are only ever written with
 * the key of claim g (see "Claims" for the one exception, a hijack, which
 * only happens between keys of equal (len, fp) before publication and ends
 * with words and tag agreeing).  Generations are compared for equality
 * only, never ordered: 16 bits wrap within a long stop, and an order modulo
 * 2^16 let a claimer resumed after 2^15 claims of its slot take its stale
 * gen for the newer one (every later claim of the slot then failed to write
 * its words and retried for ever).  Instead a claimer writes a key word
 * only after seeing its claim still in the tag, with a CAS that expects the
 * word it read before that check (complete(), step 1, says why that leaves
 * only one stale write, after 65,535 claims, which makes a key unreadable).
 *
 * State word: RETIRED:1 | VIRGIN:1 | value:62.  value is the algorithm's
 * state (GCRA, LEAKY: the TAT; FIXED: window:62-c | count:c; INFLIGHT:
 * gen:62-c | count:c, with c = bit_width(L or K); WINDOW: the head epoch).
 * FIXED's window field is the whole window number (init requires W >= 2^c,
 * so every reading below 2^62 ns has its window number below 2^(62-c)):
 * readings are compared with it as numbers, never modulo (issue 10: a tag of
 * 38 bits compared modulo 2^38 let readings cycling through three windows
 * 2^38/3 apart each open a "newer" window, and a CAS stalled across 2^38
 * windows succeed on a later window of equal tag and count).
 * A retired state takes no admission:
 * every decision CASes the state word (WINDOW: the head when it advances),
 * and nothing ever expects a retired value.  Ownership of a state ends with
 * the CAS that retires it; it starts with the CAS that initialises it from a
 * retired value, to a value that no operation on an older owner can expect:
 *   GCRA: max(now, floor), above the retired TAT after a reclaim;
 *   FIXED: the floor's window, newer than the retired one after a reclaim;
 *   WINDOW: head at the floor's bucket, at least N after the retired head
 *     after a reclaim, so every bucket word left by the old owner is out of
 *     the new owner's range, and a late admission by the old owner's
 *     decisions into those words counts for nobody (it was already checked
 *     against the old owner's state, and the old key's next state starts at
 *     the floor, after it);
 *   INFLIGHT: the next generation (62 - c bits, at least 30);
 * and for every algorithm the owner counter beside it + 1 (see "Owners").
 * After an eviction the new state starts fresh too (see successor(): a
 * stale decision of the evicted key can only charge the new key), except
 * that a WINDOW key keeps the evicted key's bucket words: its new head is
 * max(now's bucket, the old head), so it counts what the evicted key
 * admitted in range.  Zeroing them (as this file once did) was a durable,
 * liberal write that a stalled claimer could apply, after 2^32 buckets, to
 * a bucket of the new key; nothing is ever subtracted from a bucket now.
 * A decision loads the tag, checks the key, loads the owner counter and the
 * state (acquire) and checks the tag and the key words again: the state then
 * belonged to its key (an initialisation is a full barrier, so a state
 * written for a later owner implies a changed tag or key words).  Its pair
 * CAS then succeeds only on that owner's state ("Owners").
 *
 * Owners.  The generation in the state word is finite: a release
 * stopped between its load and its CAS while the slot changed owner
 * 2^(62 - c) times could find the same bits under another key and give its
 * n to it (an acquire likewise take its n from it).  The other algorithms
 * had the same hole one level up: a decision checks its key by the tag,
 * whose generation is 16 bits, so one stopped between that check and its
 * CAS while the slot was claimed 2^16 times, and then held another key
 * with the same 32-bit id at the same generation, whose state repeated the
 * bits it read, decided against that key's state; and an EVICT completer
 * stopped across evictions back to the same retired value initialised the
 * slot from its old reading.  So every slot
 * pairs its state with a full 64-bit owner counter (never wraps: 2^64
 * initialisations), written only by the CAS that initialises a state for a
 * new owner: one sluice__pair_cas() of (state, owner) from (retired, o) to
 * (successor, o + 1), expecting the owner the completer read before the
 * state, so a completer stopped across any later initialisation fails too.
 * Every decision (GCRA, LEAKY, FIXED, INFLIGHT; WINDOW's head advance)
 * and every release reads the owner, then the state, then checks the tag
 * and the key words, and CASes the pair expecting both: it succeeds only
 * on the state of the owner it checked, after a stall of any length.
 * WINDOW's bucket words are outside the pair: their count CAS stays 64-bit
 * and the admission stands only if head and the owner, read after it,
 * show the same owner less than 2^32 buckets on (win_decide() says why that
 * suffices); the permits of a refused one stay counted in a reused word, as
 * window.h does.  An INFLIGHT count must not stay in another key's state,
 * which no later release would ever free, so both its writes pay the
 * double-width CAS.  Cost: the owner load, the key-word check and a
 * CMPXCHG16B instead of a CMPXCHG per decision, and 16 bytes per slot
 * (64 more for default-sized keys, which fill the first line).
 * Retiring stays a 64-bit CAS on the state alone: it expects the exact
 * fresh value it checked and takes nothing from anyone.
 *
 * Claims (keyed_create()): a new key scans its group in its probe order and
 * takes, in this order of preference, an OPEN slot or a LIVE slot whose state
 * is retired, a BUSY slot whose lease ran out (steal), a LIVE slot whose
 * state is fresh-equivalent (reclaim: raise the group's floor, retire the
 * state by CAS, then CAS the tag), or the policy's answer.  Taking is one
 * seq_cst CAS of the tag to BUSY(gen + 1, len, fp).  Then complete():
 *   1. write the key words (CAS from older gens);
 *   2. validate: scan the other slots of the group (seq_cst loads): a LIVE
 *      copy of the key (not retired) wins, so abandon ours (tag -> OPEN) and
 *      use it; a BUSY claim of the same (len, fp) earlier in the key's probe
 *      order wins too (abandon ours, help it); a later one is killed (-> OPEN);
 *   3. initialise the state if it is still retired (CAS; a state that is not
 *      retired was set by another completer of this or an abandoned claim
 *      and never used: it is kept);
 *   4. publish: CAS BUSY -> LIVE (seq_cst, a release).
 * Any thread whose key has the claim's (len, fp) runs complete() on a BUSY
 * slot it meets (helping), so a claimer killed after step 0 is finished by
 * the next creator of its key; if its key words already show another key,
 * the slot is that key's.  A claim nobody finishes is stolen by anyone after
 * the lease.  No step waits.
 *
 * One copy per key.  Two creators of one key both CAS their claim, then scan
 * (seq_cst): at least one sees the other (store-load order of seq_cst), and
 * the ordering rule leaves one: if the earlier claim in probe order is seen
 * by the later, the later abandons; if only the earlier sees the later, it
 * kills it, so it can never be published (its publish CAS expects BUSY); a
 * copy that was published before the other's scan is seen as LIVE.  Helpers
 * validate the same way before publishing.  So no key is ever LIVE twice.
 *
 * Lossless reclaim and the floor: retiring a fresh-equivalent state raises
 * the group's floor to the reclaimer's reading first (relaxed fetch-max,
 * ordered before the retire's release), and every initialisation starts at
 * or after the floor (read after acquiring the retired state or a tag that
 * followed it).  The old key's next state is in the same group, so it starts
 * no fuller than the old state was at any reading (keyed.h).
 *
 * The window ring per key follows lib/window.c (head, epoch-tagged buckets,
 * seal before head moves, helpers finish every step) without `cur`: each
 * decision sums the N - 1 closed buckets, which are sealed and final once
 * head has passed them (head is CASed with release after the seal, and
 * loaded with acquire).  Bucket slots are a power of two >= N.  A bucket's
 * tag is 32 bits of its epoch, so an admission's CAS that was stalled across
 * 2^32 buckets can meet the bucket of h + 2^32 with the same word; as in
 * lib/window.c the admission re-reads head after its CAS (acquire on both)
 * and stands only if head is less than 2^32 past h (win_decide() proves
 * it); otherwise it is a refusal and the permits stay counted.
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
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "sluice/error.h"
#include "sluice/fixed.h"
#include "sluice/gcra.h"
#include "sluice/inflight.h"
#include "sluice/keyed.h"
#include "sluice/leaky.h"
#include "sluice/stripe.h"
#include "sluice/window.h"
#include "pair_internal.h"
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
 * which compiles this file with SLUICE_TESTING).  The production library
 * has none: STALL() is empty and test_stop is the constant 0, so the
 * compiler removes every test branch, and no test symbol is exported.
 */
#define STALL_DECIDE 1 /* a decision, between its load and its CAS       */
#define STALL_WORD 2   /* a claim, between its tag check and a key word's CAS */
#ifdef SLUICE_TESTING
void (*sluice__keyed_stall_hook)(int point, _Atomic uint64_t *word);
#define STALL(point, word)                                     \
	do {                                                   \
		if (sluice__keyed_stall_hook)                  \
			sluice__keyed_stall_hook((point), (word)); \
	} while (0)
static int test_stop;
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

/* FIXED, INFLIGHT: bits of the count in the state word, the bit width of
 * @limit (the largest count). */
static uint32_t fixed_cbits(uint64_t limit)
{
	return sluice__bit_width(limit);
}


static void compute_layout(const struct params *p, struct layout *l)
{
	l->groups = p->capacity / G;
	l->key_words = (p->key_max + 5) / 6;
	l->bucket_words = p->algo == SLUICE_ALGO_WINDOW ? (uint32_t)sluice__pow2_at_least(p->buckets) : 0;
	l->state_word = pair_state_word(l->key_words);
	uint64_t words = l->state_word + 2ULL /* state, owner */ + l->bucket_words;
	l->slot_bytes = (uint32_t)sluice__round_up(8 * words, SLUICE_CACHELINE);
	l->cells_off = HDR_BYTES;
	l->floors_off = l->cells_off + CELLS * sizeof(struct sluice__keyed_cell);
	l->slots_off = sluice__round_up(l->floors_off + l->groups * 8, SLUICE_CACHELINE);
	l->total = l->slots_off + p->capacity * l->slot_bytes;
}

/*
 * Validate a configuration.  The algorithm's parameters are checked by the
 * algorithm's own init on a throw-away instance (so the codes and the
 * derived T, tau and reciprocal are exactly the module's), then against the
 * narrower ranges of the keyed state words.
 */
static int validate(const sluice_keyed_config_t *c, struct params *p)
{
	memset(p, 0, sizeof(*p));
	if (!c)
		return SLUICE_EINVAL;
	switch (c->algo) {
	case SLUICE_ALGO_GCRA:
	case SLUICE_ALGO_LEAKY:
	case SLUICE_ALGO_FIXED:
	case SLUICE_ALGO_WINDOW:
	case SLUICE_ALGO_INFLIGHT:
		break;
	default: /* the others have no per-key state word here */
		return SLUICE_EALGO;
	}
	if ((unsigned)c->policy > SLUICE_KEYED_EVICT)
		return SLUICE_EPOLICY;
	if (c->algo == SLUICE_ALGO_INFLIGHT && c->policy != SLUICE_KEYED_REJECT)
		return SLUICE_EPOLICY; /* ALLOW: nothing to release; EVICT: forgets held slots */
	if (c->flags & ~(SLUICE_KEYED_HASH_LONG_KEYS | SLUICE_KEYED_SEEDED))
		return SLUICE_EINVAL;
	p->key_max = c->key_max ? c->key_max : SLUICE_KEYED_KEY_DEFAULT;
	if (p->key_max > SLUICE_KEYED_KEY_MAX ||
	    ((c->flags & SLUICE_KEYED_HASH_LONG_KEYS) && p->key_max < 16))
		return SLUICE_EKEYLEN;
	if (c->capacity < SLUICE_KEYED_CAPACITY_MIN || c->capacity > SLUICE_KEYED_CAPACITY_MAX)
		return SLUICE_ECAPACITY;
	p->capacity = sluice__pow2_at_least(c->capacity);
	p->algo = c->algo;
	p->policy = c->policy;
	p->flags = c->flags;

	sluice_clock_t manual; /* resolution 1 ns: the clock is checked at attach */
	sluice_clock_manual_init(&manual, 0);
	int rc = 0;
	switch (c->algo) {
	case SLUICE_ALGO_GCRA:
	case SLUICE_ALGO_LEAKY: {
		sluice_gcra_t g;
		sluice_leaky_t l;
		sluice_gcra_t *src;
		if (c->algo == SLUICE_ALGO_GCRA) {
			sluice_gcra_config_t gc = { .rate = c->rate, .period_ns = c->period_ns,
				                    .burst = c->burst, .clock = &manual };
			rc = sluice_gcra_init(&g, &gc);
			src = &g;
		} else {
			sluice_leaky_config_t lc = { .rate = c->rate, .period_ns = c->period_ns,
				                     .mode = SLUICE_LEAKY_METER, .depth = c->depth,
				                     .clock = &manual };
			rc = sluice_leaky_init(&l, &lc);
			src = &l.gcra;
		}
		if (rc != 0)
			return rc;
		const struct sluice__gcra_params *gp =
			&src->params[atomic_load_explicit(&src->era, memory_order_relaxed) & 1];
		p->interval = atomic_load_explicit(&gp->interval, memory_order_relaxed);
		p->tau = atomic_load_explicit(&gp->tau, memory_order_relaxed);
		p->nmax = atomic_load_explicit(&gp->burst, memory_order_relaxed);
		p->recip = atomic_load_explicit(&gp->recip, memory_order_relaxed);
		p->shift = atomic_load_explicit(&gp->shift, memory_order_relaxed);
		/* The TAT lives in the 62 bits of the state (readings below
		 * 2^62 ns), and a decision at reading t writes up to t + tau:
		 * a tau near gcra.h's span max (2^62 - 1) would leave no
		 * reading that can pass.  Half the range keeps every reading
		 * below 2^61 ns (73 years) usable. */
		if (p->tau > SLUICE_KEYED_TAU_MAX)
			return SLUICE_EBURST;
		p->rate = c->rate;
		p->period_ns = c->period_ns;
		p->burst = c->burst;
		p->depth = c->depth;
		break;
	}
	case SLUICE_ALGO_FIXED: {
		sluice_fixed_t f;
		sluice_fixed_config_t fc = { .limit = c->limit, .window_ns = c->window_ns,
			                     .clock = &manual };
		rc = sluice_fixed_init(&f, &fc);
		if (rc != 0)
			return rc;
		if (c->limit > SLUICE_KEYED_FIXED_LIMIT_MAX)
			return SLUICE_ELIMIT; /* the count is at most 24 bits of the state */
		/* The count takes cbits = bit_width(L) bits, the window number
		 * the other 62 - cbits, which must hold every window number
		 * below 2^62 ns: W >= 2^cbits.  So the state names its window
		 * in full, never modulo anything (DESIGN, "FIXED"). */
		p->cbits = fixed_cbits(c->limit);
		if ((c->window_ns >> p->cbits) == 0)
			return SLUICE_ELIMIT; /* L above 2^floor(log2 W) - 1 */
		p->limit = p->nmax = c->limit;
		p->window_ns = p->width_ns = c->window_ns;
		break;
	}
	case SLUICE_ALGO_WINDOW: {
		sluice_window_t w;
		sluice_window_config_t wc = { .limit = c->limit, .window_ns = c->window_ns,
			                      .buckets = c->buckets, .mode = SLUICE_EXACT,
			                      .clock = &manual };
		rc = sluice_window_init(&w, &wc);
		if (rc != 0)
			return rc;
		sluice_window_destroy(&w);
		if (c->buckets > SLUICE_KEYED_BUCKETS_MAX)
			return SLUICE_EBUCKETS; /* the ring lives in the slot */
		p->limit = p->nmax = c->limit;
		p->window_ns = c->window_ns;
		p->buckets = c->buckets;
		p->width_ns = c->window_ns / c->buckets;
		break;
	}
	case SLUICE_ALGO_INFLIGHT: {
		sluice_inflight_t f;
		sluice_inflight_config_t ic = { .limit = c->limit, .clock = &manual };
		rc = sluice_inflight_init(&f, &ic);
		if (rc != 0)
			return rc;
		if (c->limit > SLUICE_KEYED_INFLIGHT_LIMIT_MAX)
			return SLUICE_ELIMIT; /* the count is at most 32 bits of the state */
		/* the count takes bit_width(K) bits, the owner generation the
		 * rest (62 - bit_width(K) >= 30): as wide as K allows */
		p->cbits = fixed_cbits(c->limit);
		p->limit = p->nmax = c->limit;
		break;
	}
	default:
		break; /* refused above */
	}
	return 0;
}

size_t sluice_keyed_region_bytes(const sluice_keyed_config_t *cfg)
{
	struct params p;
	struct layout l;
	if (validate(cfg, &p) != 0)
		return 0;
	compute_layout(&p, &l);
	return l.total > SIZE_MAX ? 0 : (size_t)l.total;
}

size_t sluice_keyed_size(void)
{
	return sizeof(sluice_keyed_t);
}

/* SipHash of the header after the magic, up to the checksum. */
static uint64_t header_check(const struct sluice__keyed_hdr *h)
{
	const unsigned char *b = (const unsigned char *)h;
	size_t from = sizeof(h->magic), to = offsetof(struct sluice__keyed_hdr, check);
	return sluice__siphash13(0x736c75696365ULL, SLUICE_KEYED_VERSION, b + from, to - from);
}

/* Digest keys for long keys, derived from the seed: independent of the
 * lookup hash.  Init stores them; attach recomputes and compares them. */
static void digest_keys(uint64_t k0, uint64_t k1, uint64_t dk[4])
{
	static const char tags[4][8] = { "digest0", "digest1", "digest2", "digest3" };
	for (int i = 0; i < 4; i++)
		dk[i] = sluice__siphash13(k0, k1, tags[i], 8);
}

static int get_seed(uint64_t seed[2])
{
	unsigned char *p = (unsigned char *)seed;
	size_t got = 0;
	while (got < 16) {
		ssize_t r = getrandom(p + got, 16 - got, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return SLUICE_ENOTSUP; /* no kernel randomness: refuse, never a weak seed */
		}
		got += (size_t)r;
	}
	return 0;
}

int sluice_keyed_init(void *mem, size_t size, const sluice_keyed_config_t *cfg)
{
	struct params p;
	struct layout l;
	if (!mem || !cfg)
		return SLUICE_EINVAL;
	int rc = validate(cfg, &p);
	if (rc != 0)
		return rc;
	compute_layout(&p, &l);
	if ((uintptr_t)mem % SLUICE_CACHELINE != 0 || size < l.total)
		return SLUICE_ESIZE;
	uint64_t seed[2] = { cfg->seed[0], cfg->seed[1] };
	if (!(cfg->flags & SLUICE_KEYED_SEEDED) && (rc = get_seed(seed)) != 0)
		return rc;

	struct sluice__keyed_hdr *h = mem;
	/* Invalidate first: a process attaching during a re-init fails. */
	atomic_store_explicit(&h->magic, 0, memory_order_relaxed);
	memset((char *)mem + sizeof(h->magic), 0, l.slots_off - sizeof(h->magic));
	h->version = SLUICE_KEYED_VERSION;
	h->hdr_bytes = HDR_BYTES;
	h->total_bytes = l.total;
	h->capacity = p.capacity;
	h->groups = l.groups;
	h->slots_off = l.slots_off;
	h->floors_off = l.floors_off;
	h->cells_off = l.cells_off;
	h->algo = p.algo;
	h->policy = p.policy;
	h->flags = p.flags;
	h->key_max = p.key_max;
	h->slot_bytes = l.slot_bytes;
	h->key_words = l.key_words;
	h->group_slots = G;
	h->cells = CELLS;
	h->buckets = p.buckets;
	h->bucket_words = l.bucket_words;
	h->k0 = seed[0];
	h->k1 = seed[1];
	uint64_t dk[4];
	digest_keys(seed[0], seed[1], dk);
	h->d0 = dk[0];
	h->d1 = dk[1];
	h->d2 = dk[2];
	h->d3 = dk[3];
	h->rate = p.rate;
	h->period_ns = p.period_ns;
	h->burst = p.burst;
	h->depth = p.depth;
	h->limit = p.limit;
	h->window_ns = p.window_ns;
	h->interval = p.interval;
	h->tau = p.tau;
	h->recip = p.recip;
	h->shift = p.shift;
	h->width_ns = p.width_ns;
	h->nmax = p.nmax;
	h->check = header_check(h);

	/* Slots: tag OPEN gen 0, state retired and virgin, key and bucket
	 * words zero (gen 0: older than any claim; bucket epoch 0 own 0;
	 * INFLIGHT: owner counter 0). */
	unsigned char *slots = (unsigned char *)mem + l.slots_off;
	memset(slots, 0, p.capacity * l.slot_bytes);
	for (uint64_t i = 0; i < p.capacity; i++) {
		_Atomic uint64_t *s = (_Atomic uint64_t *)(slots + i * l.slot_bytes);
		atomic_store_explicit(&s[l.state_word], S_RET | S_VIRGIN, memory_order_relaxed);
	}
	/* Release: an attacher whose acquire load sees the magic sees the
	 * whole formatted table. */
	atomic_store_explicit(&h->magic, MAGIC, memory_order_release);
	return 0;
}

/*
 * The configuration a header stores, as init was given it (capacity is the
 * rounded one, key_max the resolved one: validate() maps both to
 * themselves), so attach can run the same validate() that init ran.
 */
static sluice_keyed_config_t header_config(const struct sluice__keyed_hdr *h)
{
	return (sluice_keyed_config_t){ .algo = (sluice_algo_t)h->algo,
		                        .policy = (sluice_keyed_policy_t)h->policy,
		                        .flags = h->flags, .key_max = h->key_max,
		                        .capacity = h->capacity, .rate = h->rate,
		                        .period_ns = h->period_ns, .burst = h->burst,
		                        .depth = h->depth, .limit = h->limit,
		                        .window_ns = h->window_ns, .buckets = h->buckets };
}

int sluice_keyed_attach(void *mem, size_t size, const sluice_clock_t *clock, sluice_keyed_t *k)
{
	if (!mem || !k)
		return SLUICE_EINVAL;
	if ((uintptr_t)mem % SLUICE_CACHELINE != 0 || size < HDR_BYTES)
		return SLUICE_ESIZE;
	struct sluice__keyed_hdr *h = mem;
	/* Acquire: pairs with the release store of the magic in init. */
	if (atomic_load_explicit(&h->magic, memory_order_acquire) != MAGIC)
		return SLUICE_ELAYOUT;
	/* The checksum catches accidents (another table version, a stray
	 * write); its key is public, so it is no defence against a process
	 * that rewrites the header on purpose: everything below is checked
	 * as if the header were hostile. */
	if (h->version != SLUICE_KEYED_VERSION || h->hdr_bytes != HDR_BYTES ||
	    h->check != header_check(h))
		return SLUICE_ELAYOUT;
	/* The stored configuration goes through init's own validator (the
	 * algorithm modules' inits and the keyed ranges): a header init
	 * would have refused is refused with the same code. */
	sluice_keyed_config_t cfg = header_config(h);
	struct params p;
	int rc = validate(&cfg, &p);
	if (rc != 0)
		return rc;
	/* Every derived value is recomputed, never trusted: the stored ones
	 * must be exactly what init derives from the stored configuration,
	 * and the layout recomputed from it must match the stored offsets
	 * and fit in @size. */
	struct layout l;
	compute_layout(&p, &l);
	uint64_t dk[4];
	digest_keys(h->k0, h->k1, dk);
	if (p.capacity != h->capacity || p.key_max != h->key_max || p.interval != h->interval ||
	    p.tau != h->tau || p.recip != h->recip || p.shift != h->shift ||
	    p.width_ns != h->width_ns || p.nmax != h->nmax || p.limit != h->limit ||
	    p.window_ns != h->window_ns || dk[0] != h->d0 || dk[1] != h->d1 ||
	    dk[2] != h->d2 || dk[3] != h->d3)
		return SLUICE_ELAYOUT;
	if (l.groups != h->groups || l.slots_off != h->slots_off ||
	    l.floors_off != h->floors_off || l.cells_off != h->cells_off ||
	    l.total != h->total_bytes || l.slot_bytes != h->slot_bytes ||
	    l.key_words != h->key_words || l.bucket_words != h->bucket_words ||
	    h->group_slots != G || h->cells != CELLS)
		return SLUICE_ELAYOUT;
	if (size < l.total)
		return SLUICE_ESIZE;
	const sluice_clock_t *c = clock ? clock : &sluice_clock_cached;
	if (c->kind > SLUICE_CLOCK_MANUAL)
		return SLUICE_ECLOCK;
	if ((p.algo == SLUICE_ALGO_FIXED || p.algo == SLUICE_ALGO_WINDOW) &&
	    sluice__clock_require_step(c, p.width_ns) != 0)
		return SLUICE_ERESOLUTION;

	/* From here only the validated copy (p, l, dk) is used: a later
	 * rewrite of the header changes nothing in this handle. */
	memset(k, 0, sizeof(*k));
	k->clock = c;
	k->slots = (unsigned char *)mem + l.slots_off;
	k->floors = (_Atomic uint64_t *)((unsigned char *)mem + l.floors_off);
	k->cells = (struct sluice__keyed_cell *)((unsigned char *)mem + l.cells_off);
	k->group_mask = l.groups - 1;
	k->capacity = p.capacity;
	k->slot_bytes = l.slot_bytes;
	k->key_words = l.key_words;
	k->key_max = p.key_max;
	k->flags = p.flags;
	k->algo = (sluice_algo_t)p.algo;
	k->policy = (sluice_keyed_policy_t)p.policy;
	k->buckets = p.buckets;
	k->bucket_mask = l.bucket_words ? l.bucket_words - 1 : 0;
	k->cell_mask = CELLS - 1;
	k->cbits = p.cbits;
	k->k0 = h->k0;
	k->k1 = h->k1;
	k->d0 = dk[0];
	k->d1 = dk[1];
	k->d2 = dk[2];
	k->d3 = dk[3];
	k->limit = p.nmax;
	k->interval = p.interval;
	k->tau = p.tau;
	k->recip = p.recip;
	k->shift = p.shift;
	k->window_ns = p.window_ns;
	k->width_ns = p.width_ns;
	return 0;
}

int sluice_keyed_new(sluice_keyed_t *k, const sluice_keyed_config_t *cfg,
                     const sluice_clock_t *clock)
{
	if (!k || !cfg)
		return SLUICE_EINVAL;
	struct params p;
	int rc = validate(cfg, &p);
	if (rc != 0)
		return rc;
	size_t size = sluice_keyed_region_bytes(cfg);
	void *mem = aligned_alloc(SLUICE_CACHELINE, sluice__round_up(size, SLUICE_CACHELINE));
	if (!mem)
		return SLUICE_ENOMEM;
	rc = sluice_keyed_init(mem, size, cfg);
	if (rc == 0)
		rc = sluice_keyed_attach(mem, size, clock, k);
	if (rc != 0) {
		free(mem);
		return rc;
	}
	k->owned = mem;
	return 0;
}

void sluice_keyed_free(sluice_keyed_t *k)
{
	if (!k)
		return;
	free(k->owned);
	k->owned = NULL;
	k->slots = NULL;
}

int sluice_keyed_stats(const sluice_keyed_t *k, sluice_keyed_stats_t *s)
{
	if (!k || !s)
		return SLUICE_EINVAL;
	memset(s, 0, sizeof(*s));
	uint64_t live = 0;
	for (uint32_t i = 0; i <= k->cell_mask; i++) {
		struct sluice__keyed_cell *c = &k->cells[i];
		/* Relaxed: statistics, ordered with nothing. */
		s->lookups += atomic_load_explicit(&c->lookups, memory_order_relaxed);
		s->creations += atomic_load_explicit(&c->creations, memory_order_relaxed);
		s->reclaims += atomic_load_explicit(&c->reclaims, memory_order_relaxed);
		s->evictions += atomic_load_explicit(&c->evictions, memory_order_relaxed);
		s->rejections += atomic_load_explicit(&c->rejections, memory_order_relaxed);
		s->untracked += atomic_load_explicit(&c->untracked, memory_order_relaxed);
		s->steals += atomic_load_explicit(&c->steals, memory_order_relaxed);
		live += atomic_load_explicit(&c->live, memory_order_relaxed);
	}
	/* live is a sum of +1 and -1 (wrapping) over cells; a racing read
	 * can see a -1 before its +1: clamp to the possible range. */
	s->occupancy = (int64_t)live < 0 ? 0 : live > k->capacity ? k->capacity : live;
	s->capacity = k->capacity;
	return 0;
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

static inline uint64_t load_le64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

static int make_kid(const sluice_keyed_t *k, const void *key, size_t len, struct kid *id)
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
			w = load_le64(p + o) & M48;
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
static int words_foreign(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t gen,
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

static uint64_t lease_now(void)
{
	return (sluice_clock_coarse_ns() >> UNIT_SHIFT) & UNIT_MASK;
}


/* ---------------------------------------------------------------- */
/* Decisions on one key's state                                       */

/* Fill a windowed decision: @start = the window's (bucket's) start. */
static void fill_window(sluice_decision_t *d, int allowed, uint64_t limit, uint64_t counted,
                        uint64_t start, uint64_t length, uint64_t now, uint64_t retry)
{
	if (now < start)
		now = start; /* time never runs backwards: the newest window */
	uint64_t in = now - start;
	d->allowed = allowed;
	d->limit = limit;
	d->remaining = counted >= limit ? 0 : limit - counted;
	d->reset_ns = in < length ? length - in : 0;
	d->retry_after_ns = allowed ? 0 : retry;
	d->delay_ns = 0;
	d->now_ns = now;
}

static int gcra_decide(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
                       const struct kid *id, uint64_t n, uint64_t now, sluice_decision_t *d,
                       unsigned *tries)
{
	_Atomic uint64_t *st = state_at(k, s);
	for (;;) {
		/* The owner counter, then the state, then the tag and key
		 * words (as sluice_keyed_release() says why).  Acquire on
		 * both: pair with the pair CAS that initialised the state
		 * (and the RMWs after it), so the checks see a later owner. */
		uint64_t o = atomic_load_explicit(&st[1], memory_order_acquire);
		uint64_t a = atomic_load_explicit(st, memory_order_acquire);
		if (!same_owner(s, tag) || !words_match(k, s, GEN(tag), id))
			return STALE;
		if (a & S_RET)
			return RETIRED;
		uint64_t base = a > now ? a : now;
		uint64_t lag = base - now, tau = k->tau;
		uint64_t need = n * k->interval; /* n <= b: need <= tau < 2^62 */
		uint64_t delay = lag > tau - need ? lag - (tau - need) : 0;
		int fits = base <= TMAX - need;
		if (!fits || delay > 0) {
			if (d)
				sluice__gcra_fill(d, 0, k->limit, tau, k->recip, k->shift, now, a,
				                  fits ? delay : SLUICE_NEVER);
			return 0;
		}
		STALL(STALL_DECIDE, st);
		/* A pair CAS expecting the owner too: it succeeds only on
		 * owner o's state, never on a later owner's state that repeats
		 * a's bits (the same 32-bit id at the same generation, 2^16
		 * claims later), however long this call stalled.  An admission
		 * publishes nothing (as gcra.h); the full barrier is more than
		 * the reload needs, which the loop does with acquire. */
		if (sluice__pair_cas(st, a, o, base + need, o)) {
			if (d)
				sluice__gcra_fill(d, 1, k->limit, tau, k->recip, k->shift, now,
				                  base + need, 0);
			return 1;
		}
		if (++*tries > RETRY_MAX)
			return BUSY;
	}
}

static int fixed_decide(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
                        const struct kid *id, uint64_t n, uint64_t now, sluice_decision_t *d,
                        unsigned *tries)
{
	_Atomic uint64_t *st = state_at(k, s);
	const uint64_t cmask = (1ULL << k->cbits) - 1;
	uint64_t e = now / k->window_ns; /* < 2^(62 - cbits): fits the field */
	for (;;) {
		/* The owner, then the state, then the tag and key (acquire:
		 * as gcra_decide). */
		uint64_t o = atomic_load_explicit(&st[1], memory_order_acquire);
		uint64_t a = atomic_load_explicit(st, memory_order_acquire);
		if (!same_owner(s, tag) || !words_match(k, s, GEN(tag), id))
			return STALE;
		if (a & S_RET)
			return RETIRED;
		/* The window number in full (no modulo): a reading in a later
		 * window opens it, any other reading counts in the key's
		 * window, whatever the sequence of readings (keyed.h, CLOCK
		 * JUMPS).  A count above L (a forged state) only refuses. */
		uint64_t we = (a & S_VAL) >> k->cbits, count = a & cmask, next, used, counted;
		if (e > we) {
			used = e; /* a newer window: its count starts at n */
			counted = n;
			next = (e << k->cbits) | n;
		} else {
			used = we; /* this window, or a reading before it */
			if (count + n > k->limit) {
				if (d) {
					uint64_t start = sluice__sat_mul(used, k->window_ns);
					fill_window(d, 0, k->limit, count, start, k->window_ns, now,
					            0);
					d->retry_after_ns = d->reset_ns;
					d->delay_ns = 0;
				}
				return 0;
			}
			counted = count + n;
			next = a + n; /* count + n <= L < 2^cbits: no carry */
		}
		STALL(STALL_DECIDE, st);
		/* The count word is self-contained (as fixed.h) and names its
		 * window in full, and the pair CAS expects owner o too (as
		 * gcra_decide), so a CAS that succeeds after any stall
		 * succeeded on exactly this key's window and count checked
		 * above. */
		if (sluice__pair_cas(st, a, o, next, o)) {
			if (d)
				fill_window(d, 1, k->limit, counted, sluice__sat_mul(used, k->window_ns),
				            k->window_ns, now, 0);
			return 1;
		}
		if (++*tries > RETRY_MAX)
			return BUSY;
	}
}

static int inflight_decide(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
                           const struct kid *id, uint64_t n, uint64_t now, sluice_decision_t *d,
                           unsigned *tries)
{
	_Atomic uint64_t *st = state_at(k, s);
	for (;;) {
		/* The owner counter, then the state (acquire on both: pair
		 * with the initialising pair CAS and with releases), then the
		 * tag and key words, as sluice_keyed_release() says why. */
		uint64_t o = atomic_load_explicit(&st[1], memory_order_acquire);
		uint64_t a = atomic_load_explicit(st, memory_order_acquire);
		if (!same_owner(s, tag) || !words_match(k, s, GEN(tag), id))
			return STALE;
		if (a & S_RET)
			return RETIRED;
		uint64_t held = a & ((1ULL << k->cbits) - 1);
		int ok = held <= k->limit && n <= k->limit - held; /* a forged count: refuse */
		STALL(STALL_DECIDE, st);
		/* A pair CAS expecting the owner too: a count taken here is
		 * owner o's, never a later owner's whose state repeats a's
		 * bits (after 2^(62 - c) owners), however long this call
		 * stalled; a full barrier, so it also acquires what the
		 * releases it reads published (as sluice_inflight_acquire()). */
		if (ok && !sluice__pair_cas(st, a, o, a + n, o)) {
			if (++*tries > RETRY_MAX)
				return BUSY;
			continue;
		}
		if (d) {
			d->allowed = ok;
			d->limit = k->limit;
			d->remaining = ok ? k->limit - held - n : held < k->limit ? k->limit - held : 0;
			d->retry_after_ns = 0;
			d->delay_ns = 0;
			d->reset_ns = SLUICE_NEVER;
			d->now_ns = now;
		}
		return ok;
	}
}

/* WINDOW: own count of closed epoch @y, 0 when its word holds another. */
static inline uint64_t closed_own(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t y)
{
	uint64_t w = atomic_load_explicit(bucket(k, s, y), memory_order_relaxed);
	return (w >> 32) == SLUICE__LO32(y) ? (w & SLUICE__SLOT_OWN) : 0;
}

/* Open @h's bucket (word @w read with acquire, not tagged h) while head is
 * still h (lib/window.c open_slot). */
static void win_open(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t h, uint64_t w)
{
	if (atomic_load_explicit(state_at(k, s), memory_order_acquire) != h)
		return;
	/* Release pairs with the acquire bucket loads in win_decide(). */
	atomic_compare_exchange_strong_explicit(bucket(k, s, h), &w, SLUICE__LO32(h) << 32,
	                                        memory_order_release, memory_order_relaxed);
}

/* Open and seal @h's bucket, then move head h -> @e (window.c advance)
 * while the owner is still @o. */
static void win_advance(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t h, uint64_t o,
                        uint64_t e, unsigned *tries)
{
	_Atomic uint64_t *b = bucket(k, s, h);
	uint64_t w = atomic_load_explicit(b, memory_order_acquire);
	if ((w >> 32) != SLUICE__LO32(h)) {
		win_open(k, s, h, w);
		w = atomic_load_explicit(b, memory_order_acquire);
	}
	/* Bounded: each failure is an admission (or a forged write) into
	 * the bucket; head's CAS below fails on an unsealed bucket's epoch
	 * only in the sense that the caller retries (and counts it). */
	for (; *tries <= RETRY_MAX && (w >> 32) == SLUICE__LO32(h) && !(w & SLUICE__SLOT_SEALED);
	     ++*tries) {
		/* Release: the sealed, final count is published with head's
		 * release below. */
		if (atomic_compare_exchange_weak_explicit(
			    b, &w, w | SLUICE__SLOT_SEALED | SLUICE__SLOT_FOLDED,
			    memory_order_release, memory_order_acquire))
			break;
	}
	if ((w >> 32) == SLUICE__LO32(h) && !(w & SLUICE__SLOT_SEALED))
		return; /* not sealed: head must not move past it */
	/* A pair CAS (a full barrier, so also the release by which a thread
	 * that loads head >= h + 1 with acquire sees h's bucket sealed and
	 * final).  Fails on a retired head (RETIRED bit), and on any later
	 * owner's head, even one equal to h, however long this call stalled
	 * (as gcra_decide). */
	sluice__pair_cas(state_at(k, s), h, o, e, o);
}

static int win_decide(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
                      const struct kid *id, uint64_t n, uint64_t now, sluice_decision_t *d,
                      unsigned *tries)
{
	_Atomic uint64_t *hw = state_at(k, s);
	for (;; ++*tries) {
		if (*tries > RETRY_MAX)
			return BUSY;
		/* The owner, then head, then the tag and key (as
		 * gcra_decide).  Acquire: pairs with head's pair CAS (advance)
		 * and the initialising pair CAS: closed buckets are final. */
		uint64_t o = atomic_load_explicit(&hw[1], memory_order_acquire);
		uint64_t h = atomic_load_explicit(hw, memory_order_acquire);
		if (!same_owner(s, tag) || !words_match(k, s, GEN(tag), id))
			return STALE;
		if (h & S_RET)
			return RETIRED;
		h &= S_VAL; /* a forged VIRGIN bit: ignored */
		uint64_t e = now / k->width_ns;
		if (e > h) {
			win_advance(k, s, h, o, e, tries);
			continue;
		}
		_Atomic uint64_t *b = bucket(k, s, h);
		uint64_t w = atomic_load_explicit(b, memory_order_acquire);
		if ((w >> 32) != SLUICE__LO32(h)) {
			win_open(k, s, h, w);
			continue;
		}
		if (w & SLUICE__SLOT_SEALED) {
			win_advance(k, s, h, o, h + 1, tries); /* another reader saw a later time */
			continue;
		}
		uint64_t base = 0;
		for (uint64_t j = 1; j < k->buckets && j <= h; j++)
			base += closed_own(k, s, h - j);
		for (;;) {
			uint64_t counted = base + (w & SLUICE__SLOT_OWN);
			uint64_t start = h * k->width_ns;
			if (counted + n > k->limit) {
				if (d) {
					/* window.c: the oldest buckets that leave first */
					uint64_t used = now < start ? start : now;
					uint64_t excess = counted + n - k->limit, freed = 0;
					uint64_t retry = k->window_ns - (used - start);
					for (uint64_t j = k->buckets - 1; j >= 1; j--) {
						if (j > h)
							continue;
						freed += closed_own(k, s, h - j);
						if (freed >= excess) {
							retry = k->window_ns -
							        (used - (h - j) * k->width_ns);
							break;
						}
					}
					fill_window(d, 0, k->limit, counted, start, k->window_ns,
					            now, retry);
				}
				return 0;
			}
			STALL(STALL_DECIDE, b);
			/* The bucket word tags its epoch with 32 bits only: after
			 * a stall across 2^32 buckets this CAS can succeed on the
			 * bucket of epoch h + m 2^32 (same slot, same tag, same
			 * count), against a stale base.  So the admission stands
			 * only if head, read after the CAS, is less than 2^32
			 * ahead of h: that bucket was opened while head was at
			 * its epoch (win_open), so a CAS on the bucket of h + m
			 * 2^32 (m >= 1) is followed by a head >= h + 2^32.
			 * Otherwise the permits stay counted where the CAS put
			 * them and the answer is a refusal: fewer admissions,
			 * never more.  Likewise the owner, read after the CAS
			 * (the bucket words are not in the pair CAS): every
			 * write of a later owner to this word (its open, seal
			 * or count) comes after that owner's decision acquired
			 * a head written by its initialising pair CAS (owner
			 * o + 1 or more), and is a release (open, seal: release;
			 * count: this acq_rel CAS), so a CAS here that reads
			 * such a write, or a later one in the word's RMW chain,
			 * synchronises with it, and the owner load after it
			 * sees o + 1 or more: refused, the permits charging
			 * only that later key.  A CAS that reads only writes
			 * made for owner o lands on this key's own word,
			 * checked against this key's base, whatever the stall.
			 * Acq_rel on success: the acquire orders the loads
			 * below after the CAS, the release is what a stale CAS
			 * of an older owner synchronises with (the argument
			 * above, one owner earlier; free on x86: a locked op
			 * either way).  Relaxed on
			 * failure: the word is checked again. */
			if (atomic_compare_exchange_weak_explicit(b, &w, w + n, memory_order_acq_rel,
			                                          memory_order_relaxed)) {
				/* Acquire: pair with head's and the owner's pair
				 * CASes (initialisation, advance). */
				uint64_t after_o = atomic_load_explicit(&hw[1], memory_order_acquire);
				uint64_t after = atomic_load_explicit(hw, memory_order_acquire) &
				                 S_VAL;
				int ok = sluice__same_lap(after, h) && after_o == o;
				if (d)
					fill_window(d, ok, k->limit, counted + n, start,
					            k->window_ns, now, 0);
				return ok;
			}
			if ((w >> 32) != SLUICE__LO32(h) || (w & SLUICE__SLOT_SEALED))
				break; /* the epoch moved on: start over */
			if (++*tries > RETRY_MAX)
				return BUSY;
		}
	}
}

static int decide(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t tag,
                  const struct kid *id, uint64_t n, uint64_t now, sluice_decision_t *d,
                  unsigned *tries)
{
	switch (k->algo) {
	case SLUICE_ALGO_FIXED:
		return fixed_decide(k, s, tag, id, n, now, d, tries);
	case SLUICE_ALGO_WINDOW:
		return win_decide(k, s, tag, id, n, now, d, tries);
	case SLUICE_ALGO_INFLIGHT:
		return inflight_decide(k, s, tag, id, n, now, d, tries);
	default:
		return gcra_decide(k, s, tag, id, n, now, d, tries);
	}
}

/* ---------------------------------------------------------------- */
/* Freshness, loss, successors                                        */

/* Is @st (not retired) equivalent to a fresh state at @now?  Else, *loss
 * is what resetting it forgets and *wait the time until it is fresh (or
 * SLUICE_NEVER when unknown). */
static int state_fresh(const sluice_keyed_t *k, _Atomic uint64_t *s, uint64_t st, uint64_t now,
                       uint64_t *loss, uint64_t *wait)
{
	*wait = SLUICE_NEVER;
	switch (k->algo) {
	case SLUICE_ALGO_FIXED: {
		uint64_t e = now / k->window_ns, we = (st & S_VAL) >> k->cbits;
		if (e > we)
			return 1; /* its window is over */
		*loss = st & ((1ULL << k->cbits) - 1);
		if (e == we)
			*wait = (e + 1) * k->window_ns - now;
		return 0;
	}
	case SLUICE_ALGO_WINDOW: {
		uint64_t h = st, e = now / k->width_ns;
		if (h + k->buckets <= e)
			return 1; /* every bucket out of range */
		uint64_t top = e > h ? e : h, sum = 0;
		for (uint64_t j = 0; j < k->buckets && j <= top; j++)
			if (top - j <= h)
				sum += closed_own(k, s, top - j);
		*loss = sum;
		*wait = (h + k->buckets) * k->width_ns - now;
		return 0;
	}
	case SLUICE_ALGO_INFLIGHT:
		*loss = st & ((1ULL << k->cbits) - 1);
		return *loss == 0;
	default:
		if (st < now)
			return 1; /* TAT in the past: the bucket is full */
		*loss = st - now;
		*wait = st - now + 1;
		return 0;
	}
}

/*
 * The first state of a new owner, from the retired @st (see DESIGN): fresh
 * at t = max(now, floor).  After a lossless reclaim the retired state was
 * fresh at the reclaimer's reading, which the floor covers, so the new
 * state is above every value the old owner had (no ABA).  After an eviction
 * (the retired state is not older than t) the new state may repeat a value
 * the evicted owner had; a stale decision of the evicted key whose CAS then
 * succeeds charges the new key (fewer admissions for it), and the evicted
 * key was reset anyway: harmless.
 */
static uint64_t successor(const sluice_keyed_t *k, uint64_t st, uint64_t floor, uint64_t now)
{
	int virgin = (st & S_VIRGIN) != 0;
	uint64_t r = st & S_VAL, t = now > floor ? now : floor;
	if (t > TMAX)
		t = TMAX; /* a forged floor: every field below stays in range */
	switch (k->algo) {
	case SLUICE_ALGO_FIXED: {
		uint64_t ef = t / k->window_ns, re = r >> k->cbits;
		if (!virgin && ef <= re)
			ef = re; /* evicted in its window: that window, count 0 */
		return ef << k->cbits;
	}
	case SLUICE_ALGO_WINDOW: {
		uint64_t e0 = t / k->width_ns;
		return !virgin && e0 < r ? r : e0; /* never before the old head */
	}
	case SLUICE_ALGO_INFLIGHT: {
		/* the generation takes the 62 - cbits bits above the count */
		uint64_t gen = virgin ? 0 : (r >> k->cbits);
		return ((gen + 1) & (S_VAL >> k->cbits)) << k->cbits;
	}
	default:
		return t;
	}
}

/* Relaxed fetch-max: ordered before the retire's release CAS (DESIGN). */
static void raise_floor(const sluice_keyed_t *k, uint64_t group, uint64_t now, unsigned *tries)
{
	_Atomic uint64_t *f = &k->floors[group];
	uint64_t v = atomic_load_explicit(f, memory_order_relaxed);
	/* Bounded: each failure means the floor moved (up, among honest
	 * writers).  A floor left below now by a writer that keeps lowering
	 * it only weakens the floor for this group, as a forged floor does. */
	for (; *tries <= RETRY_MAX && v < now; ++*tries)
		if (atomic_compare_exchange_weak_explicit(f, &v, now, memory_order_relaxed,
		                                          memory_order_relaxed))
			break;
}

/* ---------------------------------------------------------------- */
/* Claims                                                             */

/* Lookup: the slot holding @id's key, LIVE, or -1. */
static int64_t find_live(const sluice_keyed_t *k, const struct kid *id, uint64_t *tag)
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

/* Give up our claim @bt on @s: OPEN with the next gen.  seq_cst, as every
 * tag CAS of the claim protocol (the validation scan's Dekker pairing). */
static void abandon(_Atomic uint64_t *s, uint64_t bt)
{
	atomic_compare_exchange_strong_explicit(&s[0], &bt, MK_TAG(K_OPEN, next_gen(GEN(bt)), 0, 0),
	                                        memory_order_seq_cst, memory_order_seq_cst);
}

/*
 * complete - finish the claim @bt of slot @x for @id (ours or one we help):
 * key words, validation against other copies, state, publication.
 * Return: the slot to use (x or the winning copy, *tag set), or -1 when the
 * claim is lost (stolen, killed, another key's): the caller scans again.
 */
static int64_t complete(const sluice_keyed_t *k, const struct kid *id, uint64_t x, uint64_t bt,
                        uint64_t now, uint64_t *tag, unsigned *tries)
{
	for (int depth = 0; depth <= (int)G; depth++) {
		_Atomic uint64_t *s = slot_at(k, x);
		uint64_t g = GEN(bt);
		/*
		 * 1. key words: write each as gen g while the tag is still
		 * this claim.  No order between generations is used (16 bits
		 * wrap: a claimer stopped across 2^15 claims of its slot would
		 * see its stale gen as "newer" than every later claim's, and
		 * those claims could never write their words).  Instead: a
		 * word of another gen is overwritten only after the tag has
		 * been seen to still be this claim, and the CAS expects the
		 * exact word read before that check.  A later claim of the
		 * slot writes its words after its tag CAS, so (a) if the word
		 * we read was written by a later claim, the acquire load of
		 * the word makes its tag visible and we stop; (b) otherwise
		 * the CAS succeeds only if no later claim has changed the word
		 * since, and a later claim that comes after us overwrites
		 * ours.  What is left (keyed.h, SHARED MEMORY): a claimer
		 * stopped between its check and its CAS for 65,535 or more
		 * claims of the slot, whose word is then exactly as it read
		 * it (same gen modulo 2^16, same 6 key bytes), replaces one
		 * word of the current key: that key is then unreadable.
		 * A word of gen g with other bytes is another key's claim of
		 * equal (len, fp) (a hijack) or a forged word: the claim is
		 * lost, nothing is written.
		 */
		for (uint32_t j = 0; j < k->key_words; j++) {
			uint64_t want = (g << 48) | id->pw[j];
			/* Acquire: pairs with the release CAS of whoever wrote
			 * the word (below), so a later claim's tag is seen. */
			uint64_t w = atomic_load_explicit(key_word(s, j), memory_order_acquire);
			while (w != want) {
				if ((w >> 48) == g || ++*tries > RETRY_MAX)
					return -1; /* another key's claim (or forged) */
				/* seq_cst, as every load of the claim protocol's
				 * tags: is the slot still this claim? */
				if (atomic_load_explicit(&s[0], memory_order_seq_cst) != bt)
					return -1; /* overtaken: write nothing */
				STALL(STALL_WORD, key_word(s, j));
				/* Release: a claimer that reads this word (acquire)
				 * sees our tag CAS; published to lookups by the
				 * tag's release CAS (step 4). */
				if (atomic_compare_exchange_weak_explicit(key_word(s, j), &w, want,
				                                          memory_order_release,
				                                          memory_order_acquire))
					break;
			}
		}
		if (test_stop == 2)
			return -1;
		/* 2. validate against the other slots of the group */
		unsigned mypos = (unsigned)((x - id->group * G - id->start) & (G - 1));
		int64_t help = -1;
		uint64_t help_tag = 0;
		for (unsigned pos = 0; pos < G && help < 0; pos++) {
			if (pos == mypos)
				continue;
			uint64_t y = slot_index(id, pos);
			_Atomic uint64_t *sy = slot_at(k, y);
			uint64_t ty = atomic_load_explicit(&sy[0], memory_order_seq_cst);
			for (;; ++*tries) {
				if (*tries > RETRY_MAX) {
					/* a tag that keeps changing (forged): we
					 * cannot tell it is no copy; give ours up */
					abandon(s, bt);
					return -1;
				}
				if ((ty & ID_MASK) != id->id)
					break;
				if (KIND(ty) == K_LIVE) {
					uint64_t sty = atomic_load_explicit(state_at(k, sy),
					                                    memory_order_acquire);
					if ((sty & S_RET) || !words_match(k, sy, GEN(ty), id))
						break;
					abandon(s, bt); /* a live copy wins */
					*tag = ty;
					return (int64_t)y;
				}
				if (KIND(ty) != K_BUSY || words_foreign(k, sy, GEN(ty), id))
					break;
				if (pos < mypos) {
					help = (int64_t)y; /* the earlier claim wins */
					help_tag = ty;
					break;
				}
				/* kill the later claim (it can never publish) */
				if (atomic_compare_exchange_strong_explicit(
					    &sy[0], &ty, MK_TAG(K_OPEN, next_gen(GEN(ty)), 0, 0),
					    memory_order_seq_cst, memory_order_seq_cst))
					break;
			}
		}
		if (help >= 0) {
			abandon(s, bt);
			x = (uint64_t)help;
			bt = help_tag;
			continue;
		}
		/* 3. initialise the state if it is still retired */
		_Atomic uint64_t *sw = state_at(k, s);
		/* The owner counter first (acquire: pairs with the pair CAS
		 * that wrote it), then the state. */
		uint64_t owner = atomic_load_explicit(&sw[1], memory_order_acquire);
		uint64_t st = atomic_load_explicit(sw, memory_order_acquire);
		if (st & S_RET) {
			uint64_t floor = atomic_load_explicit(&k->floors[id->group],
			                                      memory_order_relaxed);
			uint64_t init = successor(k, st, floor, now);
			/* A new owner: the state and owner + 1 in one pair CAS
			 * (a full barrier, so also the release by which a
			 * decision that acquires this value, or a later one,
			 * sees the tag this claim changed), expecting the owner
			 * read before the state, so it fails after any other
			 * initialisation however long this completer stalled,
			 * even one whose retired value repeats st bit for bit
			 * (an EVICT slot evicted back to it); a decision or a
			 * release expecting an older owner then fails. */
			sluice__pair_cas(sw, st, owner, init, owner + 1);
		}
		if (test_stop == 3)
			return -1;
		/* 4. publish (release: key words and state) */
		uint64_t lt = MK_TAG(K_LIVE, g, id->id, 0), cur = bt;
		if (atomic_compare_exchange_strong_explicit(&s[0], &cur, lt, memory_order_seq_cst,
		                                            memory_order_seq_cst)) {
			STAT(k, creations, 1);
			STAT(k, live, 1);
			*tag = lt;
			return (int64_t)x;
		}
		if ((cur | REF) == (lt | REF)) {
			*tag = cur; /* a helper published it */
			return (int64_t)x;
		}
		return -1;
	}
	return -1;
}

/* CLOCK's second chance: the victim had its REF bit set, so every key of
 * the same loss had it too; they all have had their chance now.  Relaxed:
 * a hint; a CAS that fails (the tag moved) leaves it. */
static void clear_refs(const sluice_keyed_t *k, const struct kid *id, const uint64_t *loss,
                       uint64_t vloss)
{
	for (unsigned pos = 0; pos < G; pos++) {
		if (loss[pos] != vloss)
			continue;
		_Atomic uint64_t *s = slot_at(k, slot_index(id, pos));
		uint64_t t = atomic_load_explicit(&s[0], memory_order_relaxed);
		if (KIND(t) == K_LIVE && (t & REF))
			atomic_compare_exchange_strong_explicit(&s[0], &t, t & ~REF,
			                                        memory_order_relaxed,
			                                        memory_order_relaxed);
	}
}

struct cand {
	int64_t i;
	uint64_t t, st;
};

/* Fill @d as a refusal that took nothing (SLUICE_EBUSY). */
static void busy_decision(const sluice_keyed_t *k, sluice_decision_t *d, uint64_t now)
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

/*
 * create - give @id's key a slot (or find that it got one meanwhile).
 * Each round scans the group and tries one slot; a round that loses its
 * slot (the slot changed under it) counts as a retry in *@tries, so a
 * creation ends after at most RETRY_MAX rounds (SLUICE_EBUSY).
 * Return: the slot (*tag set), or -1 with *rc the policy's answer.
 */
static int64_t create(const sluice_keyed_t *k, const struct kid *id, uint64_t now,
                      sluice_decision_t *d, int *rc, uint64_t *tag, unsigned *tries)
{
	for (;; ++*tries) {
		if (*tries > RETRY_MAX) {
			busy_decision(k, d, now);
			*rc = SLUICE_EBUSY;
			return -1;
		}
		struct cand open = { -1, 0, 0 }, steal = { -1, 0, 0 }, fresh = { -1, 0, 0 };
		struct cand victim = { -1, 0, 0 }, pending = { -1, 0, 0 };
		uint64_t vloss = UINT64_MAX, vref = 2, min_wait = SLUICE_NEVER, lnow = 0;
		uint64_t losses[G];
		int have_lnow = 0;
		for (unsigned pos = 0; pos < G; pos++) {
			losses[pos] = UINT64_MAX;
			uint64_t i = slot_index(id, pos);
			_Atomic uint64_t *s = slot_at(k, i);
			/* seq_cst: the claim protocol's scans (see complete()). */
			uint64_t t = atomic_load_explicit(&s[0], memory_order_seq_cst);
			if (KIND(t) == K_OPEN) {
				if (open.i < 0)
					open = (struct cand){ (int64_t)i, t, 0 };
				/* A never-used slot (tag 0) ends the scan: every key
				 * is placed in the first OPEN (or retired) slot of its
				 * probe order, which is never after a slot that is
				 * still unused, and slots never become unused again.
				 * So neither the key nor a claim for it is further,
				 * and we take this slot or an earlier one.  (Lookups
				 * stop here too; the validation scan does not.) */
				if (t == 0)
					break;
				continue;
			}
			if (KIND(t) == K_BUSY) {
				if ((t & ID_MASK) == id->id && !words_foreign(k, s, GEN(t), id)) {
					if (pending.i < 0)
						pending = (struct cand){ (int64_t)i, t, 0 };
					continue;
				}
				if (!have_lnow) {
					lnow = lease_now();
					have_lnow = 1;
				}
				if (((lnow - (t & UNIT_MASK)) & UNIT_MASK) > LEASE_UNITS && steal.i < 0)
					steal = (struct cand){ (int64_t)i, t, 0 };
				continue;
			}
			if (KIND(t) != K_LIVE)
				continue;
			/* Acquire: a retired value comes with the floor raised
			 * before it (DESIGN). */
			uint64_t st = atomic_load_explicit(state_at(k, s), memory_order_acquire);
			if (st & S_RET) {
				if (open.i < 0) /* a half-done reclaim: claimable now */
					open = (struct cand){ (int64_t)i, t, st };
				continue;
			}
			if ((t & ID_MASK) == id->id && words_match(k, s, GEN(t), id)) {
				*tag = t; /* created meanwhile */
				return (int64_t)i;
			}
			uint64_t loss = 0, wait;
			if (state_fresh(k, s, st, now, &loss, &wait)) {
				if (fresh.i < 0)
					fresh = (struct cand){ (int64_t)i, t, st };
				continue;
			}
			if (wait < min_wait)
				min_wait = wait;
			losses[pos] = loss;
			if (loss < vloss || (loss == vloss && (t & REF) < vref)) {
				victim = (struct cand){ (int64_t)i, t, st };
				vloss = loss;
				vref = t & REF;
			}
		}
		if (pending.i >= 0) {
			int64_t r = complete(k, id, (uint64_t)pending.i, pending.t, now, tag, tries);
			if (r >= 0 || test_stop)
				return r;
			continue;
		}
		struct cand c = open.i >= 0 ? open : steal.i >= 0 ? steal : fresh;
		int evicting = 0;
		if (c.i < 0) {
			if (k->policy == SLUICE_KEYED_EVICT && victim.i >= 0) {
				c = victim;
				evicting = 1;
			} else if (k->policy == SLUICE_KEYED_ALLOW) {
				STAT(k, untracked, 1);
				if (d) {
					d->allowed = 1;
					d->limit = 0; /* untracked: no limit applied */
					d->remaining = 0;
					d->retry_after_ns = 0;
					d->delay_ns = 0;
					d->reset_ns = 0;
					d->now_ns = now;
				}
				*rc = 1;
				return -1;
			} else {
				STAT(k, rejections, 1);
				if (d) {
					d->allowed = 0;
					d->limit = k->limit;
					d->remaining = 0;
					d->retry_after_ns = min_wait == SLUICE_NEVER ? 0 : min_wait;
					d->delay_ns = 0;
					d->reset_ns = 0;
					d->now_ns = now;
				}
				*rc = SLUICE_EKEYFULL;
				return -1;
			}
		}
		_Atomic uint64_t *s = slot_at(k, (uint64_t)c.i);
		if (c.i == fresh.i || evicting) {
			/* Retire the old key's state: from here it takes no
			 * admission.  The floor first (DESIGN). */
			raise_floor(k, id->group, now, tries);
			uint64_t st = c.st;
			/* Release: publishes the floor to whoever acquires the
			 * retired value. */
			if (!atomic_compare_exchange_strong_explicit(state_at(k, s), &st, S_RET | c.st,
			                                             memory_order_release,
			                                             memory_order_relaxed))
				continue; /* the key was used meanwhile: look again */
			STAT(k, live, (uint64_t)-1);
			if (evicting) {
				STAT(k, evictions, 1);
				if (vref)
					clear_refs(k, id, losses, vloss);
			} else {
				STAT(k, reclaims, 1);
			}
			if (test_stop == 4)
				return -1;
		}
		if (!have_lnow)
			lnow = lease_now();
		uint64_t bt = MK_TAG(K_BUSY, next_gen(GEN(c.t)), id->id, lnow);
		uint64_t t = c.t;
		int taken = 0;
		for (; *tries <= RETRY_MAX; ++*tries) {
			/* seq_cst: the claim, first half of the Dekker pairing
			 * with other claimers' validation scans. */
			if (atomic_compare_exchange_strong_explicit(&s[0], &t, bt, memory_order_seq_cst,
			                                            memory_order_seq_cst)) {
				taken = 1;
				break;
			}
			/* A LIVE tag whose REF bit moved is still ours to take. */
			if (!(KIND(c.t) == K_LIVE && (t | REF) == (c.t | REF)))
				break;
		}
		if (!taken)
			continue;
		if (c.i == steal.i)
			STAT(k, steals, 1);
		if (test_stop == 1)
			return -1;
		int64_t r = complete(k, id, (uint64_t)c.i, bt, now, tag, tries);
		if (r >= 0 || test_stop)
			return r;
	}
}

/* ---------------------------------------------------------------- */
/* Public decisions                                                   */

int sluice_keyed_acquire_at(sluice_keyed_t *k, const void *key, size_t keylen, uint64_t n,
                            uint64_t now, sluice_decision_t *d)
{
	if (!k || !key || n == 0)
		return SLUICE_EINVAL;
	if (n > k->limit) {
		sluice__decision_never(d, k->limit, now);
		return SLUICE_ETOOBIG;
	}
	if (now > TMAX)
		return SLUICE_ETIME;
	struct kid id;
	int rc = make_kid(k, key, keylen, &id);
	if (rc != 0)
		return rc;
	STAT(k, lookups, 1);
	int recreate = 0;
	unsigned tries = 0; /* the call's retry bound (RETRY_MAX) */
	for (;; tries++) {
		if (tries > RETRY_MAX) {
			busy_decision(k, d, now);
			return SLUICE_EBUSY;
		}
		uint64_t tag = 0;
		int64_t i = recreate ? -1 : find_live(k, &id, &tag);
		int hit = i >= 0;
		if (i < 0) {
			i = create(k, &id, now, d, &rc, &tag, &tries);
			if (i < 0)
				return rc;
		}
		_Atomic uint64_t *s = slot_at(k, (uint64_t)i);
		int r = decide(k, s, tag, &id, n, now, d, &tries);
		if (r == BUSY) {
			busy_decision(k, d, now);
			return SLUICE_EBUSY;
		}
		if (r == 0 || r == 1) {
			/* CLOCK reference bit, on lookups that found the key;
			 * relaxed: a hint, and a failed CAS leaves it. */
			if (hit && !(tag & REF))
				atomic_compare_exchange_strong_explicit(&s[0], &tag, tag | REF,
				                                        memory_order_relaxed,
				                                        memory_order_relaxed);
			return r;
		}
		recreate = r == RETIRED; /* the retirer may be gone: claim it */
	}
}

int sluice_keyed_release(sluice_keyed_t *k, const void *key, size_t keylen, uint64_t n)
{
	if (!k || !key || n == 0)
		return SLUICE_EINVAL;
	if (k->algo != SLUICE_ALGO_INFLIGHT)
		return SLUICE_ENOTSUP;
	struct kid id;
	int rc = make_kid(k, key, keylen, &id);
	if (rc != 0)
		return rc;
	STAT(k, lookups, 1);
	for (unsigned tries = 0;; tries++) {
		if (tries > RETRY_MAX)
			return SLUICE_EBUSY;
		uint64_t tag;
		int64_t i = find_live(k, &id, &tag);
		if (i < 0)
			return SLUICE_ERELEASE;
		_Atomic uint64_t *s = slot_at(k, (uint64_t)i);
		_Atomic uint64_t *st = state_at(k, s);
		for (;; tries++) {
			if (tries > RETRY_MAX)
				return SLUICE_EBUSY;
			/* The owner counter, then the state, then the key: a
			 * pair CAS expecting (a, o) below succeeds only while
			 * the state is a and the owner still o (only an
			 * initialisation writes o, always to o + 1, never
			 * back), so a is owner o's state; and owner o is our
			 * key: o was read after find_live() saw our key
			 * published (so o is our key's owner or later), and a
			 * later owner's initialisation (acquired by the loads
			 * of o and a) comes after its claim and key words, so
			 * the tag and key words read below would show another
			 * key (the key words: the tag's 16-bit generation
			 * alone could repeat).  Acquire on both: pair with
			 * that initialisation's pair CAS (a full barrier) and
			 * with the acquires' CASes on the state. */
			uint64_t o = atomic_load_explicit(&st[1], memory_order_acquire);
			uint64_t a = atomic_load_explicit(st, memory_order_acquire);
			if (!same_owner(s, tag) || !words_match(k, s, GEN(tag), &id))
				break; /* look it up again */
			if ((a & S_RET) || (a & ((1ULL << k->cbits) - 1)) < n)
				return SLUICE_ERELEASE; /* nothing changed */
			STALL(STALL_DECIDE, st);
			/* A full barrier: publishes this holder's writes to the
			 * next acquirer (inflight.h; its CAS on the state word
			 * reads this write).  Fails on any change of the state
			 * or of its owner, however long this call stalled. */
			if (sluice__pair_cas(st, a, o, a - n, o))
				return 0;
		}
	}
}

#ifdef SLUICE_TESTING
/* Test builds only (tests/test_keyed_faults.c): run a creation of @key
 * that stops after step @stop as if its process were killed there: 1 after
 * the claim CAS, 2 after the key words, 3 after the state, 4 after retiring
 * a reclaimed or evicted state (before the tag CAS).  Not thread-safe. */
int sluice__keyed_test_stall(sluice_keyed_t *k, const void *key, size_t keylen, uint64_t now,
                             int stop);
int sluice__keyed_test_stall(sluice_keyed_t *k, const void *key, size_t keylen, uint64_t now,
                             int stop)
{
	struct kid id;
	int rc = make_kid(k, key, keylen, &id);
	if (rc != 0)
		return rc;
	uint64_t tag;
	unsigned tries = 0;
	test_stop = stop;
	int64_t i = create(k, &id, now, NULL, &rc, &tag, &tries);
	test_stop = 0;
	return i >= 0 ? 1 : 0;
}
#endif
