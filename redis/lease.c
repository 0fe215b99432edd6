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
 * B, the size asked for next: it doubles (up to lease_max) each time
 * decisions ask for more, halves when a lease lapses or is replaced with
 * more than half of it unspent, and is never above half of what Redis said
 * remained (at least 1): near the limit it shrinks to 1, so one instance
 * does not hold the last permits while another is refused.  A cold key
 * therefore stays at B = 1: it gets a lease only once it spends one.
 */
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

int sluice__lease_take(sluice_redis_limit_t *l, uint64_t n, uint64_t *left, uint64_t *now_ns)
{
	uint64_t w = atomic_load_explicit(&l->lease, memory_order_relaxed);
	for (int i = 0; i < 64; i++) {
		/* the clock is read after the word, so the expiry check is
		 * against a time no earlier than the word's install */
		uint64_t now = sluice__limit_now(l);
		*now_ns = now;
		uint64_t count = w & SLUICE__LEASE_MASK;
		if ((w >> SLUICE__LEASE_BITS) <= now_us_of(l, now) || count < n)
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

void sluice__lease_want(sluice_redis_limit_t *l, uint64_t n)
{
	sluice_redis_t *r = l->r;
	uint64_t need = atomic_load_explicit(&l->need, memory_order_relaxed);
	for (int i = 0; i < 8 && need < n; i++)
		if (atomic_compare_exchange_weak_explicit(&l->need, &need, n, memory_order_relaxed,
		                                          memory_order_relaxed))
			break;
	atomic_fetch_add_explicit(&l->demand, 1, memory_order_relaxed);
	int idle = 0;
	/* relaxed: the flag only stops a second push; nothing is published
	 * through it in this direction */
	if (!atomic_compare_exchange_strong_explicit(&l->pending, &idle, 1, memory_order_relaxed,
	                                             memory_order_relaxed))
		return; /* a request is already queued or in flight */
	if (sluice__queue_push(&r->queue, l) != 0) {
		atomic_store_explicit(&l->pending, 0, memory_order_relaxed);
		return; /* not sent: the decision's budget ends its wait */
	}
	sem_post(&r->wake); /* a futex wake, no lock: async-signal-safe */
}

uint64_t sluice__lease_next_b(sluice_redis_limit_t *l)
{
	uint64_t b = atomic_load_explicit(&l->b, memory_order_relaxed);
	if (atomic_exchange_explicit(&l->demand, 0, memory_order_relaxed) > 0)
		b = b * 2 > l->lease_max ? l->lease_max : b * 2;
	uint64_t cap = l->last_remaining / 2;
	if (cap < 1)
		cap = 1;
	if (b > cap)
		b = cap;
	if (b < 1)
		b = 1;
	atomic_store_explicit(&l->b, b, memory_order_relaxed);
	return b;
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
		if (atomic_compare_exchange_weak_explicit(&l->lease, &w, nw, memory_order_relaxed,
		                                          memory_order_relaxed))
			break;
	}
	l->lease_wid = wid;
	if (lost) {
		sluice__stat(l->r, ST_LAPSED, lost);
		uint64_t b = atomic_load_explicit(&l->b, memory_order_relaxed);
		if (lost * 2 > b && b > 1)
			atomic_store_explicit(&l->b, b / 2, memory_order_relaxed);
	}
}
