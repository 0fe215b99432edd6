/* SPDX-License-Identifier: MIT */
/*
 * rules/adaptive_internal.h - the adaptive-limit controller of one rule
 * (the rule file's `adaptive:` section, sluice_rules_adaptive_t).  Internal
 * to libsluice-rules: the engine makes one per adaptive rule, calls
 * sluice__adaptive_tick() on every decision of that rule, and applies each
 * new limit the callback reports to the rule's limiters live (set_rate /
 * set_limit, keeping state).
 *
 * WHAT IT DOES.  Time is cut into windows of cfg->window_ns, numbered by
 * epoch = now / window_ns (aligned to the clock's time base, so the first
 * window, from init to its end, is partial).  When the first tick of a
 * later window arrives, one ticking thread closes the window that was open
 * and judges it from the rule's metrics (metrics_internal.h), as the
 * difference between the reading it takes now and the one taken when the
 * window opened (after a gap with no tick, that is everything recorded
 * since it opened, late completions included):
 *   - P99_LATENCY: the latency histogram's buckets in the window give the
 *     bucket holding the 99th percentile completion (rank ceil(0.99 n)),
 *     so the p99 is known to lie in (lo, hi], two neighbouring bounds.
 *     RESOLUTION: neighbouring latency bounds are at most 2x apart (0.5 ms
 *     .. 10 s, 1-1.5-2-3-5-7.5 steps); below 0.5 ms lo is 0, above 10 s
 *     hi is +Inf.  With T = baseline_ns x factor (rounded down to whole
 *     ns), the window is HIGH when lo >= T (the p99 is surely above T),
 *     CALM when hi <= T (surely at or below), and UNSURE when T falls
 *     inside the p99's bucket.  So the judgement is exact when T is one of
 *     the bounds (50 ms x 1.5 = 75 ms is), and otherwise a p99 within one
 *     bucket of T neither cuts nor raises the limit: the controller acts
 *     only on what the buckets prove.  A window of fewer than 100
 *     completions has the largest of them as its p99.
 *   - ERROR_RATIO: failures (complete with ok = 0) over completions in the
 *     window; HIGH when failures / completions > baseline x factor
 *     (compared exactly, in 128-bit integers), else CALM.
 *   - A window with no completion is EMPTY; so is every window in which
 *     no tick ran at all (the engine ticks on every decision, so such a
 *     window had no traffic): there is no evidence either way.
 * Then:
 *   - HIGH: after cfg->windows consecutive HIGH windows, the limit steps
 *     down by step of itself (multiplicative: ceil(limit x step), at least
 *     1), never below cfg->floor; the count starts again, so each further
 *     step needs another cfg->windows HIGH windows at the new limit.
 *   - CALM: after cfg->windows consecutive CALM windows, the limit steps
 *     up by half a step of the configured limit (additive: configured x
 *     step / 2, at least 1), never above the configured limit; the count
 *     starts again.  So recovery is slower than the cut: from 200 with a
 *     10% step, cuts go 200, 180, 162, ..., and each raise adds 10.
 *   - UNSURE, EMPTY: the limit holds and both counts start again (a run of
 *     HIGH or CALM windows must be consecutive).
 * That is additive increase, multiplicative decrease, with the floor as
 * the operator's bound on how far an automatic cut may go (a slow
 * dependency can look like overload; the floor keeps a misjudgement from
 * shutting the route).
 *
 * GUARANTEE (any number of threads)
 *   - tick is lock-free on the decision path and allocation-free: when no
 *     window has closed it is one relaxed load and a compare.  When one
 *     has, every ticking thread tries one CAS on the state word (window
 *     epoch and a busy bit); exactly one wins per epoch and evaluates, the
 *     others return at once (no retry, no wait).  A window is judged at
 *     most once; windows are judged in order.
 *   - Evaluations never overlap: the winner holds the busy bit until it has
 *     stored the new snapshot and limit and the callback has returned, so
 *     callbacks of one controller never run concurrently and report limits
 *     in the order they were set.  A ticking thread that finds the bit set
 *     returns; the next tick after the bit clears closes the window.  So a
 *     winner preempted or stopped mid-evaluation delays adaptation (no
 *     window is judged until it resumes), never a decision.
 *   - The effective limit is always in [floor, configured].
 * CLOCK JUMPS: a tick older than the open window does nothing (time never
 *   runs backwards here either); a jump forward closes the open window and
 *   counts the skipped ones as EMPTY.  Epochs saturate at 2^63 - 1: with
 *   window_ns = 1, times past 2^63 ns (292 years of uptime) are all one
 *   window.
 * WIRING (the engine): for a rule with cfg.enabled, at build
 *   sluice__adaptive_init(&a, &rule->adaptive, configured, kept, &m, now,
 *   apply, rule_state), where configured is the limit the floor is measured
 *   against (GCRA: the rate per its period; the windows and concurrency:
 *   L), kept the old controller's sluice__adaptive_limit() across a reload
 *   that keeps the rule (0 otherwise; the engine brings it into
 *   [floor, configured] if the new file moved them), and apply() calls the
 *   rule's live setter: sluice_gcra_set_rate(effective, period_ns) or
 *   set_limit(effective) on the rule's limiter or keyed table.  On every
 *   decision of the rule: sluice__adaptive_tick(&a, now) (one load and a
 *   compare when no window closed).  Verdicts and the metrics' limit gauge
 *   read sluice__adaptive_limit().  The struct has cache-line-aligned
 *   members: embed it in the rule's state or allocate it with
 *   aligned_alloc(SLUICE_CACHELINE, ...), not with plain malloc.
 *
 * PROCESSES: a controller judges its own process's metrics.  Processes
 *   that share a rule's keyed tables (MAP_SHARED, an nginx zone) and each
 *   run a controller would each set the shared limit from their own
 *   windows, and the last setter wins: such a host should run the
 *   controller in one process (or feed it metrics summed over the
 *   processes).  No thread, no lock: nothing to do across fork().
 *
 * CALLING CONTEXT: the callback runs on whichever thread won the window
 *   (a deciding thread, inside sluice_engine_decide): it must be as cheap
 *   and lock-free as a decision.  One controller's callbacks never overlap,
 *   so they never contend with each other for a limiter's setter; but
 *   GCRA's set_rate/set_burst are serialised by a flag that a concurrent
 *   reload's set_rate on the same limiter may hold (sluice/gcra.h: a
 *   setter waits up to SLUICE_GCRA_WRITER_WAIT_NS for it).  An engine that
 *   applies reload changes with set_rate on live GCRA limiters should not
 *   call set_rate from this callback directly; it can store the new limit
 *   and apply it outside the decision (or have reloads skip adaptive
 *   rules' rates while the controller holds them).
 */
#ifndef SLUICE_RULES_ADAPTIVE_INTERNAL_H
#define SLUICE_RULES_ADAPTIVE_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "metrics_internal.h"
#include "sluice/engine.h"

typedef enum sluice__adaptive_verdict {
	SLUICE__ADAPTIVE_EMPTY = 0,  /* no completion in the window         */
	SLUICE__ADAPTIVE_CALM = 1,   /* signal surely at or below threshold */
	SLUICE__ADAPTIVE_UNSURE = 2, /* threshold inside the p99's bucket   */
	SLUICE__ADAPTIVE_HIGH = 3,   /* signal surely above threshold       */
} sluice__adaptive_verdict_t;

/* One judged window, as the callback sees it. */
typedef struct sluice__adaptive_window {
	uint64_t epoch;           /* the window [epoch x W, (epoch+1) x W)   */
	uint64_t completions;     /* in the window                           */
	uint64_t failures;        /* in the window (ok = 0)                  */
	uint64_t p99_lo_ns;       /* P99_LATENCY: p99 in (lo, hi]; 0 if empty */
	uint64_t p99_hi_ns;       /* UINT64_MAX for the +Inf bucket          */
	sluice__adaptive_verdict_t verdict;
	uint64_t limit_before, limit_after;
} sluice__adaptive_window_t;

/* Called on a change of the effective limit (never with old == new). */
typedef void (*sluice__adaptive_cb)(void *ctx, uint64_t old_limit, uint64_t new_limit,
                                    const sluice__adaptive_window_t *w);

typedef struct sluice__adaptive {
	/* read-only after init */
	sluice_rules_adaptive_t cfg;
	uint64_t configured;      /* the file's limit: the ceiling           */
	uint64_t threshold_ns;    /* P99_LATENCY: baseline x factor          */
	uint64_t threshold_ppm2;  /* ERROR_RATIO: baseline x factor in ppm^2;
	                           * UINT64_MAX when >= 100% (never HIGH)    */
	uint64_t up_step;         /* configured x step / 2, at least 1       */
	const sluice__metrics_t *m;
	sluice__adaptive_cb cb;
	void *cb_ctx;

	/* read by every tick; written by the winner */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t next_close_ns; /* hint: end of open window */
	_Atomic uint64_t state;   /* open epoch << 1 | busy                  */
	_Atomic uint64_t limit;   /* effective limit                         */
	_Atomic uint64_t judged;  /* windows judged (skipped ones included)  */

	/* private: written only by the thread holding the busy bit */
	_Alignas(SLUICE_CACHELINE) uint32_t high_run, calm_run;
	uint64_t prev_failures;
	uint64_t prev_counts[SLUICE__METRICS_BOUNDS_MAX + 1];
} sluice__adaptive_t;

/*
 * sluice__adaptive_init - a controller for a rule whose limit is
 * @configured (the number the engine applies: GCRA's rate, a window's L),
 * reading @m (its latency histogram and FAILURES), starting at @initial
 * (0: @configured; the engine passes the old effective limit across a
 * reload that keeps the rule), with its first window the one holding @now.
 * @cb (may be NULL) gets every change, with @ctx.
 * Not thread-safe with ticks on @a; no allocation; reads @m once (its
 * current counts are the first window's starting point).
 * Return: 0, or (nothing changed) SLUICE_EINVAL for NULL @a, @cfg or @m,
 * cfg->enabled 0, an unknown signal, windows outside 1..1000, step outside
 * 1..1000000 ppm, factor at or below 1000000 ppm, a zero latency baseline
 * or an error-ratio baseline outside 1..1000000 ppm; SLUICE_EWINDOW for
 * window_ns 0; SLUICE_ELIMIT for @configured 0, a floor outside
 * 1..@configured, @initial outside floor..@configured.
 */
int sluice__adaptive_init(sluice__adaptive_t *a, const sluice_rules_adaptive_t *cfg,
                          uint64_t configured, uint64_t initial, const sluice__metrics_t *m,
                          uint64_t now, sluice__adaptive_cb cb, void *ctx);

/* private: the slow path of tick */
int sluice__adaptive_close(sluice__adaptive_t *a, uint64_t now);

/*
 * sluice__adaptive_tick - tell the controller the time is @now (the
 * decision's time).  Lock-free, no allocation; see GUARANTEE.
 * Return: 1 when this call judged a window (and ran the callback if the
 * limit changed), else 0.
 */
static inline int sluice__adaptive_tick(sluice__adaptive_t *a, uint64_t now)
{
	/* Relaxed: only a hint that only grows; a stale (smaller) value sends
	 * the tick to the CAS, which decides. */
	if (SLUICE_LIKELY(now < atomic_load_explicit(&a->next_close_ns, memory_order_relaxed)))
		return 0;
	return sluice__adaptive_close(a, now);
}

/* sluice__adaptive_limit - the effective limit now.  Relaxed: a value for
 * verdicts and metrics; the limiters get it through the callback. */
static inline uint64_t sluice__adaptive_limit(const sluice__adaptive_t *a)
{
	return atomic_load_explicit(&a->limit, memory_order_relaxed);
}

/* sluice__adaptive_judged - windows judged so far (tests, diagnostics). */
static inline uint64_t sluice__adaptive_judged(const sluice__adaptive_t *a)
{
	return atomic_load_explicit(&a->judged, memory_order_relaxed);
}

#endif /* SLUICE_RULES_ADAPTIVE_INTERNAL_H */
