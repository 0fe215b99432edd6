/* SPDX-License-Identifier: MIT */
/*
 * lease.c - a limit's local lease: permits Redis granted (and counted) in
 * one script call, spent here by decisions without a round trip.
 *
 * DESIGN: the lease is one 64-bit word, expiry << 20 | count, where expiry
 * is in microseconds after the limit's base (CLOCK_MONOTONIC ns at
 * creation), rounded down, so a lease is never used past the instant its
 * bound allows.  A decision spends n by one CAS from a word it saw unexpired
 * with count >= n; the I/O thread installs a grant by CAS too.  Because
 * count and expiry change together in one word, a decision can never spend
 * a permit of one lease under another's expiry, and a reused word value
 * (ABA) means the same count under the same expiry: spending it is right.
 * Every access is relaxed: the word carries all the state it describes and
 * publishes no other memory.
 *
 * Expiry: FIXED, the end of the window it was granted in; WINDOW, the end
 * of its bucket; GCRA and LOG, lease_ttl after the request was sent.  It is
 * measured from the send, which is before Redis ran the script, so the
 * local expiry is never later than the Redis-time instant the bound needs.
 *
 * How much to ask for, and when, is lease_policy.h's: this file keeps the
 * word and the state that policy reads (B, the HOT flag, the installed
 * size).
 */
#include "lease_policy.h"
#include "redis_internal.h"

static uint64_t now_us_of(const sluice_redis_limit_t *l, uint64_t now_ns)
{
	return now_ns > l->base_ns ? (now_ns - l->base_ns) / 1000 : 0;
}

uint64_t sluice__lease_live(const sluice_redis_limit_t *l, uint64_t w)
{
	if ((w >> SLUICE__LEASE_BITS) <= now_us_of(l, sluice__limit_now(l)))
		return 0;
	return w & SLUICE__LEASE_MASK;
}

int sluice__lease_take(sluice_redis_limit_t *l, uint64_t n, uint64_t *left, uint64_t *now_ns,
                       int *hot)
{
	uint64_t w = atomic_load_explicit(&l->lease, memory_order_relaxed);
	*hot = 1; /* unless the word lapsed: 64 lost CASes are a hot key */
	for (int i = 0; i < 64; i++) {
		/* the clock is read after the word, so the expiry check is
		 * against a time no earlier than the word's install */
		uint64_t now = sluice__limit_now(l);
		*now_ns = now;
		uint64_t count = w & SLUICE__LEASE_MASK;
		if ((w >> SLUICE__LEASE_BITS) <= now_us_of(l, now)) {
			*hot = 0; /* lapsed, or never installed: COLD */
			return 0;
		}
		if (count < n)
			return 0;
		if (atomic_compare_exchange_weak_explicit(&l->lease, &w, w - n,
		                                          memory_order_relaxed,
		                                          memory_order_relaxed)) {
			*left = count - n;
			return 1;
		}
	}
	return 0; /* 64 CASes lost: treat as short (the wait path retries) */
}

void sluice__lease_want(sluice_redis_limit_t *l, uint64_t n, int hot, const uint64_t *seen)
{
	sluice_redis_t *r = l->r;
	uint64_t need = atomic_load_explicit(&l->need, memory_order_relaxed);
	for (int i = 0; i < 8 && need < n; i++)
		if (atomic_compare_exchange_weak_explicit(&l->need, &need, n, memory_order_relaxed,
		                                          memory_order_relaxed))
			break;
	if (hot)
		atomic_store_explicit(&l->hot, 1, memory_order_relaxed);
	int idle = 0;
	/* acquire: pairs with sluice__limit_done's exchange (its release
	 * half), so the answered count it bumped before is seen below */
	if (!atomic_compare_exchange_strong_explicit(&l->pending, &idle, 1, memory_order_acquire,
	                                             memory_order_relaxed))
		return; /* a request is already queued or in flight */
	if (seen && atomic_load_explicit(&l->answered, memory_order_relaxed) != *seen) {
		/* answered since the failed take: the next take sees it */
		atomic_store_explicit(&l->pending, 0, memory_order_relaxed);
		return;
	}
	if (sluice__queue_push(&r->queue, l) != 0) {
		atomic_store_explicit(&l->pending, 0, memory_order_relaxed);
		return; /* not sent: the decision's budget ends its wait */
	}
	sem_post(&r->wake); /* a futex wake, no lock: async-signal-safe */
}

uint64_t sluice__lease_ask(sluice_redis_limit_t *l, uint64_t need)
{
	int hot = atomic_exchange_explicit(&l->hot, 0, memory_order_relaxed);
	uint64_t b = atomic_load_explicit(&l->b, memory_order_relaxed);
	b = sluice__policy_next_b(b, hot, l->lease_max, l->last_remaining);
	atomic_store_explicit(&l->b, b, memory_order_relaxed);
	uint64_t w = atomic_load_explicit(&l->lease, memory_order_relaxed);
	return sluice__policy_want(b, hot, sluice__lease_live(l, w), need);
}

void sluice__lease_install(sluice_redis_limit_t *l, const sluice__redis_reply_t *rep,
                           uint64_t sent_ns)
{
	l->last_remaining = (uint64_t)rep->remaining;
	uint64_t g = (uint64_t)rep->granted;
	if (g == 0)
		return;
	uint64_t expiry_ns, wid = 0;
	int merge = 0;
	switch (l->algo) {
	case SLUICE_REDIS_FIXED:
		expiry_ns = sent_ns + (uint64_t)rep->reset_us * 1000;
		wid = (uint64_t)rep->now_us / l->window_us + 1;
		merge = 1;
		break;
	case SLUICE_REDIS_WINDOW: {
		uint64_t b_us = l->window_us / l->buckets;
		uint64_t reset = (uint64_t)rep->reset_us;
		uint64_t rest = (l->buckets - 1) * b_us;
		expiry_ns = sent_ns + (reset > rest ? reset - rest : 0) * 1000;
		wid = (uint64_t)rep->now_us / b_us + 1;
		merge = 1;
		break;
	}
	default:
		expiry_ns = sent_ns + l->ttl_ns;
		break;
	}
	uint64_t exp_us = now_us_of(l, expiry_ns);
	if (g > SLUICE__LEASE_MASK)
		g = SLUICE__LEASE_MASK; /* never: lease_max is 65536 */
	uint64_t w = atomic_load_explicit(&l->lease, memory_order_relaxed);
	uint64_t lost;
	for (uint64_t tries = 0;; tries++) {
		/* every failed CAS is a decision that spent from the word, which
		 * holds fewer than 2^20 permits: this bound is never reached
		 * unless the CAS fails spuriously that often, and then the
		 * grant is dropped (fewer admissions, never more) */
		if (tries > (1u << 21)) {
			sluice__stat(l->r, ST_LAPSED, g);
			return;
		}
		uint64_t oc = w & SLUICE__LEASE_MASK, oexp = w >> SLUICE__LEASE_BITS;
		uint64_t nw;
		int live = oc > 0 && oexp > now_us_of(l, sluice__limit_now(l));
		if (merge && live && wid == l->lease_wid) {
			/* the same window: one lease, lapsing at the earlier end */
			uint64_t c = oc + g > SLUICE__LEASE_MASK ? SLUICE__LEASE_MASK : oc + g;
			nw = (oexp < exp_us ? oexp : exp_us) << SLUICE__LEASE_BITS | c;
			lost = 0;
		} else {
			nw = exp_us << SLUICE__LEASE_BITS | g;
			lost = oc;
		}
		/* the size first: a decision that sees the new word and the
		 * old size prefetches early or late, never wrongly (relaxed,
		 * as every access here) */
		atomic_store_explicit(&l->size, nw & SLUICE__LEASE_MASK, memory_order_relaxed);
		if (atomic_compare_exchange_weak_explicit(&l->lease, &w, nw, memory_order_relaxed,
		                                          memory_order_relaxed))
			break;
	}
	l->lease_wid = wid;
	if (lost) {
		sluice__stat(l->r, ST_LAPSED, lost);
		uint64_t b = atomic_load_explicit(&l->b, memory_order_relaxed);
		atomic_store_explicit(&l->b, sluice__policy_after_loss(b, lost), memory_order_relaxed);
	}
}
