/* SPDX-License-Identifier: MIT */
/*
 * keyed_table.c - a keyed table's format: validation of a configuration
 * (through each algorithm's own validator), the layout it implies, the
 * header, init, attach (which trusts nothing it reads), new/free and the
 * statistics.
 *
 * DESIGN
 *
 * Memory: header (256 B) | 16 statistics cells (64 B each) | one reclaim
 * floor per group (8 B) | slots.  Everything is found by offsets stored in
 * the header, so any process can map it anywhere.  A slot is a run of 64-bit
 * words: [0] tag, [1] claim counter (one pair), [2..2+2kw) the key, each
 * word paired with the counter of the claim that wrote it, then the state
 * (WINDOW: the ring's head) and the owner counter after it, one
 * 16-byte-aligned pair (see "Owners"), then (WINDOW) the bucket words.
 *
 * The header is written once, by init, magic last with a release; attach
 * acquires the magic, checks the checksum (accidents only: its key is
 * public), runs the stored configuration through the validator init ran
 * and recomputes every derived value and the layout, refusing a header
 * whose stored values differ.  The handle keeps the recomputed values:
 * nothing a decision reads comes from the header.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "fixed_step.h"
#include "gcra_step.h"
#include "inflight_step.h"
#include "window_step.h"
#include "keyed_internal.h"
#include "clock_internal.h"

/* FIXED, INFLIGHT: bits of the count in the state word, the bit width of
 * @limit (the largest count). */
static uint32_t fixed_cbits(uint64_t limit)
{
	return sluice__bit_width(limit);
}


void sluice__keyed_layout(const struct params *p, struct layout *l)
{
	l->groups = p->capacity / G;
	l->key_words = (p->key_max + 7) / 8; /* 8 key bytes a word */
	l->bucket_words = p->algo == SLUICE_ALGO_WINDOW ? (uint32_t)sluice__pow2_at_least(p->buckets) : 0;
	l->state_word = pair_state_word(l->key_words);
	uint64_t words = l->state_word + 2ULL /* state, owner */ + l->bucket_words;
	l->slot_bytes = (uint32_t)sluice__round_up(8 * words, SLUICE_CACHELINE);
	l->live_off = HDR_BYTES;
	l->cells_off = HDR_BYTES + LIVE_BYTES;
	l->floors_off = l->cells_off + CELLS * sizeof(struct sluice_stripe_cell);
	l->slots_off = sluice__round_up(l->floors_off + l->groups * 8, SLUICE_CACHELINE);
	l->total = l->slots_off + p->capacity * l->slot_bytes;
}

/*
 * Validate a configuration.  The algorithm's parameters are checked by the
 * algorithm's own validator (lib/gcra_step.h, fixed_step.h, window_step.h,
 * inflight_step.h: what each module's init runs, so the codes and the
 * derived T, tau and reciprocal are exactly the module's; no throw-away
 * instance, no read of a module's private fields), then against the
 * narrower ranges of the keyed state words.
 */
int sluice__keyed_validate(const sluice_keyed_config_t *c, struct params *p)
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
	if (c->flags & ~(SLUICE_KEYED_HASH_LONG_KEYS | SLUICE_KEYED_SEEDED | SLUICE_KEYED_SIPHASH |
	                 SLUICE_KEYED_COUNT_LOOKUPS))
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

	/* Each algorithm's own validator (lib/<algo>_step.h, what its init
	 * runs), then the keyed ranges; the clock's resolution is checked at
	 * attach. */
	int rc = 0;
	switch (c->algo) {
	case SLUICE_ALGO_GCRA:
	case SLUICE_ALGO_LEAKY: {
		/* GCRA's own validation (lib/gcra_step.h, as sluice_gcra_init()
		 * runs it); LEAKY's meter is a GCRA of burst D + 1 (leaky.h;
		 * D = UINT64_MAX wraps to 0, refused as leaky.c refuses it).
		 * The clock's resolution is checked at attach. */
		uint64_t b = c->algo == SLUICE_ALGO_GCRA ? c->burst : c->depth + 1;
		rc = sluice__gcra_interval(c->rate, c->period_ns, &p->interval, &p->recip,
		                           &p->shift);
		if (rc == 0)
			rc = sluice__gcra_tau(b, p->interval, &p->tau);
		if (rc != 0)
			return rc;
		p->nmax = b;
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
		rc = sluice__fixed_validate(c->limit, c->window_ns);
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
		rc = sluice__window_validate(c->limit, c->buckets, c->window_ns);
		if (rc != 0)
			return rc;
		if (c->buckets > SLUICE_KEYED_BUCKETS_MAX)
			return SLUICE_EBUCKETS; /* the ring lives in the slot */
		p->limit = p->nmax = c->limit;
		p->window_ns = c->window_ns;
		p->buckets = c->buckets;
		p->width_ns = c->window_ns / c->buckets;
		break;
	}
	case SLUICE_ALGO_INFLIGHT: {
		rc = sluice__inflight_validate(c->limit);
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
	if (sluice__keyed_validate(cfg, &p) != 0)
		return 0;
	sluice__keyed_layout(&p, &l);
	return l.total > SIZE_MAX ? 0 : (size_t)l.total;
}

/* SipHash of the header after the magic, up to the checksum. */
SLUICE_TESTABLE uint64_t header_check(const struct sluice__keyed_hdr *h)
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

#ifdef SLUICE_TESTING
int sluice__keyed_test_no_aes;
#endif

/* Can this process run the AES hash (keyhash_internal.h)?  The CPU's word
 * for it: sluice__keyhash_cpu_aes() (cpuid on x86-64, HWCAP_AES on arm64). */
int sluice__keyed_have_aes(void)
{
#ifdef SLUICE_TESTING
	if (sluice__keyed_test_no_aes)
		return 0;
#endif
#ifdef SLUICE__KEYHASH_AES
	return sluice__keyhash_cpu_aes();
#else
	return 0;
#endif
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

int sluice_keyed_format(void *mem, size_t size, const sluice_keyed_config_t *cfg)
{
	struct params p;
	struct layout l;
	if (!mem || !cfg)
		return SLUICE_EINVAL;
	int rc = sluice__keyed_validate(cfg, &p);
	if (rc != 0)
		return rc;
	sluice__keyed_layout(&p, &l);
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
	/* The hash the table uses, for every process that attaches: the AES
	 * hash where this CPU has AES-NI, unless the config asked for
	 * SipHash-1-3; SLUICE_KEYED_SIPHASH in the stored flags says SipHash. */
	h->flags = p.flags | (sluice__keyed_have_aes() ? 0 : SLUICE_KEYED_SIPHASH);
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
	sluice__keyed_live_format((struct sluice__keyed_live *)((char *)mem + l.live_off), &p);

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

/* What a table of @p needs of the clock its process decides on: a known
 * kind, and (windows) a bucket no narrower than the clock's step, which
 * attach records and a config check only asks (clock_internal.h). */
static int check_clock(const struct params *p, const sluice_clock_t *c, sluice__step_use_t use)
{
	if (c->kind > SLUICE_CLOCK_MANUAL)
		return SLUICE_ECLOCK;
	if ((p->algo == SLUICE_ALGO_FIXED || p->algo == SLUICE_ALGO_WINDOW) &&
	    sluice__step(c, p->width_ns, use) != 0)
		return SLUICE_ERESOLUTION;
	return 0;
}

int sluice_keyed_config_check(const sluice_keyed_config_t *cfg, const sluice_clock_t *clock)
{
	struct params p;
	if (!cfg)
		return SLUICE_EINVAL;
	int rc = sluice__keyed_validate(cfg, &p); /* init's own validator */
	if (rc == 0 && clock)
		rc = check_clock(&p, clock, SLUICE__ASK); /* attach's, with that clock */
	return rc;
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
	int rc = sluice__keyed_validate(&cfg, &p);
	if (rc != 0)
		return rc;
	/* Every derived value is recomputed, never trusted: the stored ones
	 * must be exactly what init derives from the stored configuration,
	 * and the layout recomputed from it must match the stored offsets
	 * and fit in @size. */
	struct layout l;
	sluice__keyed_layout(&p, &l);
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
	/* An AES table where this CPU cannot compute the AES hash: its keys'
	 * places cannot be found here. */
	if (!(p.flags & SLUICE_KEYED_SIPHASH) && !sluice__keyed_have_aes())
		return SLUICE_ELAYOUT;
	const sluice_clock_t *c = clock ? clock : &sluice_clock_cached;
	if ((rc = check_clock(&p, c, SLUICE__RECORD)) != 0)
		return rc;

	/* From here only the validated copy (p, l, dk) is used: a later
	 * rewrite of the header changes nothing in this handle. */
	memset(k, 0, sizeof(*k));
	k->clock = c;
	k->slots = (unsigned char *)mem + l.slots_off;
	k->floors = (_Atomic uint64_t *)((unsigned char *)mem + l.floors_off);
	k->cells = (struct sluice_stripe_cell *)((unsigned char *)mem + l.cells_off);
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
	sluice__keyhash_expand(k->k0, k->k1, k->ak); /* from the copy: one read of the seed */
	k->live = (struct sluice__keyed_live *)((unsigned char *)mem + l.live_off);
	k->window_ns = p.window_ns;
	k->width_ns = p.width_ns;
	return 0;
}

int sluice_keyed_init(sluice_keyed_t *k, const sluice_keyed_config_t *cfg,
                     const sluice_clock_t *clock)
{
	if (!k || !cfg)
		return SLUICE_EINVAL;
	struct params p;
	int rc = sluice__keyed_validate(cfg, &p);
	if (rc != 0)
		return rc;
	size_t size = sluice_keyed_region_bytes(cfg);
	void *mem = aligned_alloc(SLUICE_CACHELINE, sluice__round_up(size, SLUICE_CACHELINE));
	if (!mem)
		return SLUICE_ENOMEM;
	rc = sluice_keyed_format(mem, size, cfg);
	if (rc == 0)
		rc = sluice_keyed_attach(mem, size, clock, k);
	if (rc != 0) {
		free(mem);
		return rc;
	}
	k->owned = mem;
	return 0;
}

void sluice_keyed_destroy(sluice_keyed_t *k)
{
	/* An attached handle owns nothing (free(NULL)); either way the
	 * handle forgets the table, so a later call finds no slots. */
	if (k) {
		free(k->owned);
		k->owned = NULL;
		k->slots = NULL;
	}
}

int sluice_keyed_stats(const sluice_keyed_t *k, sluice_keyed_stats_t *s)
{
	if (!k || !s)
		return SLUICE_EINVAL;
	memset(s, 0, sizeof(*s));
	s->lookups = stat_sum(k, KS_lookups);
	s->creations = stat_sum(k, KS_creations);
	s->reclaims = stat_sum(k, KS_reclaims);
	s->evictions = stat_sum(k, KS_evictions);
	s->rejections = stat_sum(k, KS_rejections);
	s->untracked = stat_sum(k, KS_untracked);
	s->steals = stat_sum(k, KS_steals);
	uint64_t live = stat_sum(k, KS_live);
	/* live is a sum of +1 and -1 (wrapping) over cells; a racing read
	 * can see a -1 before its +1: clamp to the possible range. */
	s->occupancy = (int64_t)live < 0 ? 0 : live > k->capacity ? k->capacity : live;
	s->capacity = k->capacity;
	return 0;
}

