/* SPDX-License-Identifier: MIT */
/*
 * keyed.c - per-key distributed limits: one Redis limit per key (per IP,
 * per user), found in a bounded table of limits made at creation.
 *
 * DESIGN: @capacity slots, each a state word and a limit whose every
 * allocation (the LOCAL fallback's limiter) was made by keyed_new, so a new
 * key allocates nothing.  A key hashes (FNV-1a, finalized: key_hash) to a
 * probe window of at most PROBES (64) slots.  A free slot (0) is claimed by CAS 0 -> 1; the claimer writes
 * the key and the limit's Redis names, then publishes them by storing 2
 * (release; paired with the acquire load of every reader, which then
 * compares the key).  A reader that finds a claim in progress (1) yields a
 * bounded number of times and then probes on: the same key may then get a
 * second slot, whose limit names the same Redis key, so Redis still counts
 * every admission once (only the local lease is split).  A probe group with
 * no free slot refuses the new key (SLUICE_EKEYFULL); keys are never
 * evicted (a slot in use may be spent from at any moment, and reclaiming
 * it safely needs a grace period this table does not have yet).
 * Each key's lease policy is the limit's: B starts at 1, so a cold key
 * costs one round trip per admission and only hot keys hold leases.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "redis_internal.h"

/* A key's probe window.  10,000 keys in 16,384 slots (load 0.61, the
 * bench's): with 16 probes 22 to 30 keys found no free slot (k0..k9999
 * simulated, 10.0.x.y in ten_thousand_keys_fit), with 64 none did (the
 * longest probe was 33); at a load of 0.75 and above a new key can be
 * refused while slots are free (redis.h CAPACITY).  A lookup stops at its
 * key, a new key at the first free slot, so the window bounds only the
 * worst case. */
#define PROBES 64

typedef struct slot {
	_Atomic int state; /* 0 free, 1 being claimed, 2 in use */
	uint8_t keylen;
	char key[SLUICE_REDIS_KEY_MAX];
} slot_t;

struct sluice_redis_keyed {
	sluice_redis_t *r;
	uint32_t mask;
	char prefix[257];
	slot_t *slots;
	sluice_redis_limit_t *limits; /* capacity of them, cache-line aligned */
	/* the free's own reference plus one per limit not yet freed: the last
	 * one gone frees the table (a limit the I/O thread still held at the
	 * free is freed by it, limit.c) */
	_Atomic uint32_t refs;
};

/* FNV-1a, then a 64-bit finalizer (MurmurHash3's fmix64), so that the low
 * bits that pick the slot behave like a random hash whatever the keys'
 * structure, and the load a table holds (PROBES) does not depend on the
 * shape of the keys: FNV alone spreads some key sets better than random
 * (10.0.x.y: 8 refused at 16 probes, against 30 finalized) and others
 * worse (k0..k9999: 58 against 22, simulated). */
static uint64_t key_hash(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

int sluice_redis_keyed_new(sluice_redis_t *r, const sluice_redis_limit_config_t *cfg,
                           uint32_t capacity, sluice_redis_keyed_t **out)
{
	if (!r || !cfg || !out)
		return SLUICE_EINVAL;
	if (capacity == 0 || capacity > 65536 || (capacity & (capacity - 1)))
		return SLUICE_ECAPACITY;
	sluice_limiter_t *probe;
	int rc = sluice__limit_validate(cfg, &probe); /* the name is the prefix */
	if (rc != 0)
		return rc;
	sluice_limiter_free(probe);
	if ((rc = sluice__limits_reserve(r, capacity)) != 0)
		return rc;
	sluice_redis_keyed_t *k = calloc(1, sizeof(*k));
	slot_t *slots = calloc(capacity, sizeof(*slots));
	sluice_redis_limit_t *limits =
	        aligned_alloc(SLUICE_CACHELINE, (size_t)capacity * sizeof(*limits));
	uint32_t made = 0;
	if (k && slots && limits) {
		for (; made < capacity; made++) {
			sluice_limiter_t *local = NULL;
			if (sluice__limit_validate(cfg, &local) != 0)
				break;
			sluice__limit_setup(&limits[made], r, cfg, NULL, local);
			limits[made].owner = k;
		}
	}
	if (made < capacity) {
		for (uint32_t i = 0; i < made; i++)
			sluice_limiter_free(limits[i].local);
		free(k);
		free(slots);
		free(limits);
		atomic_fetch_sub_explicit(&r->nlimits, capacity, memory_order_relaxed);
		return SLUICE_ENOMEM;
	}
	k->r = r;
	k->mask = capacity - 1;
	strcpy(k->prefix, cfg->name);
	k->slots = slots;
	k->limits = limits;
	atomic_init(&k->refs, capacity + 1);
	*out = k;
	return 0;
}

static void table_free(sluice_redis_keyed_t *k)
{
	atomic_fetch_sub_explicit(&k->r->nlimits, k->mask + 1, memory_order_relaxed);
	free(k->slots);
	free(k->limits);
	free(k);
}

void sluice__keyed_release(sluice_redis_keyed_t *k, sluice_redis_limit_t *l)
{
	sluice_limiter_free(l->local);
	/* acq_rel: whichever reference is dropped last frees the table, after
	 * every other holder's last use of it (the I/O thread's and the
	 * free's) */
	if (atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) == 1)
		table_free(k);
}

void sluice_redis_keyed_free(sluice_redis_keyed_t *k)
{
	if (!k)
		return;
	uint32_t freed = 0;
	for (uint32_t i = 0; i <= k->mask; i++)
		if (sluice__limit_let_go(&k->limits[i])) {
			sluice_limiter_free(k->limits[i].local);
			freed++;
		}
	/* acq_rel: as in sluice__keyed_release() */
	if (atomic_fetch_sub_explicit(&k->refs, freed + 1, memory_order_acq_rel) == freed + 1)
		table_free(k);
}

static int same(const slot_t *s, const void *key, size_t keylen)
{
	return s->keylen == keylen && memcmp(s->key, key, keylen) == 0;
}

int sluice_redis_acquire_key(sluice_redis_keyed_t *k, const void *key, size_t keylen, uint64_t n,
                             sluice_decision_t *d, sluice_redis_source_t *src)
{
	if (SLUICE_UNLIKELY(!k || !key))
		return SLUICE_EINVAL;
	if (keylen == 0 || keylen > SLUICE_REDIS_KEY_MAX || memchr(key, 0, keylen))
		return SLUICE_EKEYLEN;
	uint64_t h = key_hash(key, keylen);
	uint32_t probes = k->mask + 1 < PROBES ? k->mask + 1 : PROBES;
	for (uint32_t i = 0; i < probes; i++) {
		uint32_t at = (uint32_t)(h + i) & k->mask;
		slot_t *s = &k->slots[at];
		/* acquire: pairs with the claimer's release store of 2, so the
		 * key bytes and the limit's names are its */
		int st = atomic_load_explicit(&s->state, memory_order_acquire);
		for (int w = 0; st == 1 && w < 64; w++) {
			sched_yield(); /* a claim is a few stores: bounded wait */
			st = atomic_load_explicit(&s->state, memory_order_acquire);
		}
		if (st == 2) {
			if (same(s, key, keylen))
				return sluice_redis_acquire(&k->limits[at], n, d, src);
			continue;
		}
		if (st != 0)
			continue; /* still being claimed: probe on (see DESIGN) */
		int free_ = 0;
		if (!atomic_compare_exchange_strong_explicit(&s->state, &free_, 1,
		                                             memory_order_relaxed,
		                                             memory_order_relaxed)) {
			i--; /* lost the claim: look at this slot again */
			continue;
		}
		memcpy(s->key, key, keylen);
		s->keylen = (uint8_t)keylen;
		char name[257 + 1 + SLUICE_REDIS_KEY_MAX];
		size_t pl = strlen(k->prefix);
		memcpy(name, k->prefix, pl);
		name[pl] = ':';
		memcpy(name + pl + 1, key, keylen);
		sluice__limit_name(&k->limits[at], name, pl + 1 + keylen);
		/* release: publishes the key and the names; pairs with the
		 * readers' acquire load above */
		atomic_store_explicit(&s->state, 2, memory_order_release);
		return sluice_redis_acquire(&k->limits[at], n, d, src);
	}
	return SLUICE_EKEYFULL;
}
