/* SPDX-License-Identifier: MIT */
/*
 * breaker.c - the circuit breaker and the fallbacks.
 *
 * DESIGN: the breaker's state (closed, open, half-open) is written by the
 * I/O thread alone and read by decisions (relaxed: a decision that reads a
 * stale state either waits its budget and falls back, or falls back one
 * decision early; both are within the contract).  Closed: requests go to
 * Redis; breaker_failures consecutive failures (I/O errors, timeouts,
 * refused connects, and replies that are not our script's: a script error
 * such as a wrong-type key, NOSCRIPT after a reload, a grant above what was
 * asked, a time past the limit's horizon) open it.  Open: decisions take
 * the fallback at once, with no wait; after breaker_open_ns the I/O thread
 * moves to half-open.  Half-open: decisions queue their requests and wait
 * their budget as when closed, and the I/O thread's probe is the first
 * queued request itself, after a connect + SCRIPT LOAD when there is no
 * connection.  A probe that succeeds closes it, one that fails (the
 * connect or the request) opens it again for another breaker_open_ns.
 * Only a request answered by our script counts as a success, in every
 * state: a connect that succeeds resets nothing, or a server that accepts
 * connections and loads scripts but fails every call (a 2 GiB bulk, say)
 * would have the thread reconnect without end, the breaker never opening
 * (351 connects in 800 ms in test_redis_hostile before this rule).
 *
 * Why a real request as the probe while connected: a script-level failure
 * leaves the connection up, so a connect proves nothing, and SCRIPT EXISTS
 * would prove only that the scripts are cached, not that the key they
 * failed on is fixed (a wrong-type or far-future value).  The request
 * proves exactly the path decisions need, costs no extra round trip, and a
 * grant it brings is installed as any other.  Its decision waits at most
 * its budget, as every decision does.  So after the server is fixed,
 * decisions reach Redis again within breaker_open_ns plus one round trip
 * (the stall a half-open breaker without traffic is in costs nothing: it
 * probes with the next decision's request).
 *
 * The fallbacks: LOCAL decides on a local sluice limiter of the same
 * algorithm holding this instance's share (its own lock-free decision
 * path); ALLOW admits; DENY refuses.  Each is counted.
 */
#include "redis_internal.h"

static void set_state(sluice_redis_t *r, int s)
{
	int old = atomic_load_explicit(&r->breaker, memory_order_relaxed);
	if (old == s)
		return;
	atomic_store_explicit(&r->breaker, s, memory_order_relaxed);
	sluice__stat(r, s == SLUICE__BREAKER_OPEN   ? ST_OPENED
	                : s == SLUICE__BREAKER_HALF ? ST_HALF
	                                            : ST_CLOSED,
	             1);
}

void sluice__breaker_success(sluice_redis_t *r)
{
	r->fails = 0;
	set_state(r, SLUICE__BREAKER_CLOSED);
}

void sluice__breaker_failure(sluice_redis_t *r, uint64_t now_ns)
{
	r->fails++;
	int s = atomic_load_explicit(&r->breaker, memory_order_relaxed);
	if (s == SLUICE__BREAKER_HALF || r->fails >= r->breaker_failures) {
		r->open_until = now_ns + r->breaker_open_ns;
		set_state(r, SLUICE__BREAKER_OPEN);
	}
}

/* called by the I/O thread when an open breaker's time is up */
void sluice__breaker_probe(sluice_redis_t *r)
{
	set_state(r, SLUICE__BREAKER_HALF);
}

int sluice__fallback(sluice_redis_limit_t *l, uint64_t n, uint64_t now_ns, sluice_decision_t *d)
{
	switch (l->fallback) {
	case SLUICE_REDIS_LOCAL: {
		sluice__stat(l->r, ST_FB_LOCAL, 1);
		return sluice_limiter_acquire(l->local, n, d);
	}
	case SLUICE_REDIS_ALLOW:
		sluice__stat(l->r, ST_FB_ALLOW, 1);
		if (d)
			*d = (sluice_decision_t){ .allowed = 1, .limit = l->limit, .now_ns = now_ns };
		return 1;
	case SLUICE_REDIS_DENY:
		break;
	}
	sluice__stat(l->r, ST_FB_DENY, 1);
	if (d)
		/* no time is known at which Redis will answer again: the
		 * breaker's next probe is the earliest, and the caller should
		 * not retry faster than its own budget */
		*d = (sluice_decision_t){ .allowed = 0, .limit = l->limit,
		                          .retry_after_ns = l->budget_ns, .now_ns = now_ns };
	return 0;
}
