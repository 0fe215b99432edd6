/* SPDX-License-Identifier: MIT */
/*
 * lib/outline.c - the exported form of every call whose body is a static
 * inline function in include/sluice/static/ (common.h, INLINE).  A caller
 * built without SLUICE_INLINE (the default) calls these; the library's own
 * files, and a caller that opts in, compile the bodies in place.
 *
 * Each definition names the function in parentheses, so the function-like
 * SLUICE_INLINE macros (this file is built with SLUICE_INLINE, as all of
 * lib/ is) leave the name alone and the body is the static one: one
 * implementation, two ways to reach it.
 */
#include "sluice/static/clock.h"
#include "sluice/static/decay.h"
#include "sluice/static/fixed.h"
#include "sluice/static/gcra.h"
#include "sluice/static/inflight.h"
#include "sluice/static/keyed.h"
#include "sluice/static/leaky.h"
#include "sluice/static/log.h"
#include "sluice/static/stripe.h"
#include "sluice/static/warmup.h"
#include "sluice/static/window.h"

/* The release pin (static/common.h): exported in this release's own
 * version node only (lib/sluice.map.in). */
SLUICE_API const int sluice_inline_release = 1;

/* sluice/clock.h */
uint64_t (sluice_clock_monotonic_ns)(void)
{
	return sluice__clock_monotonic_ns();
}

uint64_t (sluice_clock_coarse_ns)(void)
{
	return sluice__clock_coarse_ns();
}

uint64_t (sluice_clock_cached_ns)(void)
{
	return sluice__clock_cached_ns();
}

uint64_t (sluice_clock_now)(const sluice_clock_t *c)
{
	return sluice__clock_now(c);
}

void (sluice_clock_manual_set)(sluice_clock_t *c, uint64_t ns)
{
	sluice__clock_manual_set(c, ns);
}

void (sluice_clock_manual_advance)(sluice_clock_t *c, uint64_t delta_ns)
{
	sluice__clock_manual_advance(c, delta_ns);
}

/* sluice/stripe.h */
unsigned (sluice_cpu)(void)
{
	return sluice__cpu();
}

uint32_t (sluice_stripe_cells)(const sluice_stripe_t *s)
{
	return sluice__stripe_cells(s);
}

void (sluice_stripe_add)(sluice_stripe_t *s, int64_t n)
{
	sluice__stripe_add(s, n);
}

int64_t (sluice_stripe_sum)(const sluice_stripe_t *s)
{
	return sluice__stripe_sum(s);
}

/* sluice/fixed.h */
int (sluice_fixed_acquire_at)(sluice_fixed_t *f, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	return sluice__fixed_acquire_at(f, n, now, d);
}

int (sluice_fixed_acquire)(sluice_fixed_t *f, uint64_t n, sluice_decision_t *d)
{
	return sluice__fixed_acquire(f, n, d);
}

/* sluice/window.h */
int (sluice_window_acquire_at)(sluice_window_t *w, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	return sluice__window_acquire_at(w, n, now, d);
}

int (sluice_window_acquire)(sluice_window_t *w, uint64_t n, sluice_decision_t *d)
{
	return sluice__window_acquire(w, n, d);
}

/* sluice/gcra.h */
int (sluice_gcra_acquire_at)(sluice_gcra_t *g, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	return sluice__gcra_acquire_at(g, n, now, d);
}

int (sluice_gcra_acquire)(sluice_gcra_t *g, uint64_t n, sluice_decision_t *d)
{
	return sluice__gcra_acquire(g, n, d);
}

int (sluice_gcra_reserve_at)(sluice_gcra_t *g, uint64_t n, uint64_t now, uint64_t max_delay_ns, sluice_decision_t *d)
{
	return sluice__gcra_reserve_at(g, n, now, max_delay_ns, d);
}

int (sluice_gcra_reserve)(sluice_gcra_t *g, uint64_t n, uint64_t max_delay_ns, sluice_decision_t *d)
{
	return sluice__gcra_reserve(g, n, max_delay_ns, d);
}

uint64_t (sluice_gcra_interval_ns)(const sluice_gcra_t *g)
{
	return sluice__gcra_interval_ns(g);
}

uint64_t (sluice_gcra_burst)(const sluice_gcra_t *g)
{
	return sluice__gcra_burst(g);
}

/* sluice/leaky.h */
int (sluice_leaky_acquire_at)(sluice_leaky_t *l, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	return sluice__leaky_acquire_at(l, n, now, d);
}

int (sluice_leaky_acquire)(sluice_leaky_t *l, uint64_t n, sluice_decision_t *d)
{
	return sluice__leaky_acquire(l, n, d);
}

int (sluice_leaky_reserve_at)(sluice_leaky_t *l, uint64_t n, uint64_t now, uint64_t max_delay_ns, sluice_decision_t *d)
{
	return sluice__leaky_reserve_at(l, n, now, max_delay_ns, d);
}

int (sluice_leaky_reserve)(sluice_leaky_t *l, uint64_t n, uint64_t max_delay_ns, sluice_decision_t *d)
{
	return sluice__leaky_reserve(l, n, max_delay_ns, d);
}

uint64_t (sluice_leaky_interval_ns)(const sluice_leaky_t *l)
{
	return sluice__leaky_interval_ns(l);
}

/* sluice/log.h */
int (sluice_log_acquire)(sluice_log_t *lg, uint64_t n, sluice_decision_t *d)
{
	return sluice__log_acquire(lg, n, d);
}

/* sluice/warmup.h */
int (sluice_warmup_acquire)(sluice_warmup_t *w, uint64_t n, sluice_decision_t *d)
{
	return sluice__warmup_acquire(w, n, d);
}

int (sluice_warmup_reserve)(sluice_warmup_t *w, uint64_t n, uint64_t max_delay_ns, sluice_decision_t *d)
{
	return sluice__warmup_reserve(w, n, max_delay_ns, d);
}

/* sluice/decay.h */
int (sluice_decay_acquire)(sluice_decay_t *x, uint64_t n, sluice_decision_t *d)
{
	return sluice__decay_acquire(x, n, d);
}

/* sluice/inflight.h */
uint64_t (sluice_inflight_bad_releases)(const sluice_inflight_t *f)
{
	return sluice__inflight_bad_releases(f);
}

int (sluice_inflight_acquire_at)(sluice_inflight_t *f, uint64_t n, uint64_t now, sluice_decision_t *d)
{
	return sluice__inflight_acquire_at(f, n, now, d);
}

int (sluice_inflight_acquire)(sluice_inflight_t *f, uint64_t n, sluice_decision_t *d)
{
	return sluice__inflight_acquire(f, n, d);
}

int (sluice_inflight_release)(sluice_inflight_t *f, uint64_t n)
{
	return sluice__inflight_release(f, n);
}

int (sluice_inflight_refund)(sluice_inflight_t *f, uint64_t n, const sluice_decision_t *admitted)
{
	return sluice__inflight_refund(f, n, admitted);
}

uint64_t (sluice_inflight_available)(const sluice_inflight_t *f)
{
	return sluice__inflight_available(f);
}

/* sluice/keyed.h */
int (sluice_keyed_acquire)(sluice_keyed_t *k, const void *key, size_t keylen, uint64_t n, sluice_decision_t *d)
{
	return sluice__keyed_acquire(k, key, keylen, n, d);
}

