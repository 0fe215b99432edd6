/* SPDX-License-Identifier: MIT */
/*
 * adaptive.c - the adaptive-limit controller: per window, judge the rule's
 * p99 latency or error ratio from its metrics and step the effective limit
 * down (after `windows` HIGH windows) or back up (after `windows` CALM
 * ones) between the floor and the configured limit.  The rules and their
 * reasons are in adaptive_internal.h.
 *
 * DESIGN: one word, state = open epoch << 1 | busy, decides who closes a
 * window.  A ticking thread in a later epoch CASes it from (open, idle) to
 * (its epoch, busy); the one that succeeds owns every private field
 * (prev_counts, prev_failures, the runs) until it stores (epoch, idle)
 * with release.  Its CAS is an acquire that pairs with that release store
 * of the previous owner, so each owner sees the snapshot and runs the
 * previous one left: the private fields are handed from owner to owner
 * like a lock's data, but nobody ever waits for the hand-over (a thread
 * that finds busy set returns).  limit, judged and next_close_ns are
 * single values read by others without needing anything else, so they are
 * relaxed.  The metrics are read with the stripes' relaxed loads: every
 * cell only grows, and the owners' reads of one cell are ordered by the
 * hand-over, so one window's difference is never negative (it is clamped
 * at 0 anyway rather than trusted).
 */
#include "adaptive_internal.h"
#include "sluice/error.h"

#define PPM 1000000ull
#define EPOCH_MAX (UINT64_MAX >> 1)

static uint64_t epoch_of(const sluice__adaptive_t *a, uint64_t now)
{
	uint64_t e = now / a->cfg.window_ns;
	return e > EPOCH_MAX ? EPOCH_MAX : e;
}

/* The first ns of the window after @epoch, saturating: the tick's hint. */
static uint64_t close_of(const sluice__adaptive_t *a, uint64_t epoch)
{
	sluice__u128 t = ((sluice__u128)epoch + 1) * a->cfg.window_ns;
	return t > UINT64_MAX ? UINT64_MAX : (uint64_t)t;
}

int sluice__adaptive_init(sluice__adaptive_t *a, const sluice_rules_adaptive_t *cfg,
                          uint64_t configured, uint64_t initial, const sluice__metrics_t *m,
                          uint64_t now, sluice__adaptive_cb cb, void *ctx)
{
	if (!a || !cfg || !m || !cfg->enabled)
		return SLUICE_EINVAL;
	if (cfg->signal != SLUICE_RULES_SIGNAL_P99_LATENCY &&
	    cfg->signal != SLUICE_RULES_SIGNAL_ERROR_RATIO)
		return SLUICE_EINVAL;
	if (cfg->windows < 1 || cfg->windows > 1000 || cfg->step_ppm < 1 || cfg->step_ppm > PPM ||
	    cfg->factor_ppm <= PPM)
		return SLUICE_EINVAL;
	if (cfg->signal == SLUICE_RULES_SIGNAL_P99_LATENCY ? cfg->baseline_ns == 0
	                                                   : cfg->baseline_ppm < 1 ||
	                                                             cfg->baseline_ppm > PPM)
		return SLUICE_EINVAL;
	if (cfg->window_ns == 0)
		return SLUICE_EWINDOW;
	if (configured == 0 || cfg->floor < 1 || cfg->floor > configured)
		return SLUICE_ELIMIT;
	if (initial == 0)
		initial = configured;
	if (initial < cfg->floor || initial > configured)
		return SLUICE_ELIMIT;

	*a = (sluice__adaptive_t){ .cfg = *cfg, .configured = configured, .m = m, .cb = cb,
		                   .cb_ctx = ctx };
	sluice__u128 t = (sluice__u128)cfg->baseline_ns * cfg->factor_ppm / PPM;
	a->threshold_ns = t > UINT64_MAX ? UINT64_MAX : (uint64_t)t;
	/* failures/completions > baseline x factor  <=>
	 * failures x 10^12 > completions x (baseline_ppm x factor_ppm): a
	 * threshold of 10^12 ppm^2 or more is a ratio of 100% or more, which
	 * failures <= completions never exceeds. */
	sluice__u128 r = (sluice__u128)cfg->baseline_ppm * cfg->factor_ppm;
	a->threshold_ppm2 = r >= (sluice__u128)PPM * PPM ? UINT64_MAX : (uint64_t)r;
	sluice__u128 up = (sluice__u128)configured * cfg->step_ppm / (2 * PPM);
	a->up_step = up < 1 ? 1 : (uint64_t)up;

	uint64_t epoch = epoch_of(a, now);
	atomic_init(&a->state, epoch << 1);
	atomic_init(&a->next_close_ns, close_of(a, epoch));
	atomic_init(&a->limit, initial);
	atomic_init(&a->judged, 0);
	sluice__hist_read(&m->latency, a->prev_counts, NULL);
	a->prev_failures = sluice__metrics_read(m, SLUICE__METRICS_FAILURES);
	return 0;
}

static uint64_t sub0(uint64_t x, uint64_t y) { return x > y ? x - y : 0; }

/* Judge the window that just closed from the metrics' growth since the
 * previous owner's reading, and move the reading on. */
static void judge(sluice__adaptive_t *a, sluice__adaptive_window_t *w)
{
	const sluice__hist_t *h = &a->m->latency;
	uint64_t now_counts[SLUICE__METRICS_BOUNDS_MAX + 1];
	sluice__hist_read(h, now_counts, NULL);
	uint64_t fails = sluice__metrics_read(a->m, SLUICE__METRICS_FAILURES);
	uint64_t delta[SLUICE__METRICS_BOUNDS_MAX + 1];
	uint64_t n = 0;
	for (uint32_t i = 0; i <= h->nbounds; i++) {
		delta[i] = sub0(now_counts[i], a->prev_counts[i]);
		n += delta[i];
		a->prev_counts[i] = now_counts[i];
	}
	w->completions = n;
	w->failures = sub0(fails, a->prev_failures);
	a->prev_failures = fails;
	if (n == 0) {
		w->verdict = SLUICE__ADAPTIVE_EMPTY;
		return;
	}
	/* The p99's bucket: the first whose cumulative count reaches rank
	 * ceil(0.99 n).  Found for both signals: the callback reports it. */
	uint64_t rank = (uint64_t)(((sluice__u128)n * 99 + 99) / 100);
	uint64_t cum = 0;
	uint32_t j = 0;
	for (; j < h->nbounds; j++) {
		cum += delta[j];
		if (cum >= rank)
			break;
	}
	w->p99_lo_ns = j == 0 ? 0 : h->bounds[j - 1];
	w->p99_hi_ns = j < h->nbounds ? h->bounds[j] : UINT64_MAX;

	if (a->cfg.signal == SLUICE_RULES_SIGNAL_P99_LATENCY) {
		if (w->p99_lo_ns >= a->threshold_ns)
			w->verdict = SLUICE__ADAPTIVE_HIGH;
		else if (w->p99_hi_ns <= a->threshold_ns)
			w->verdict = SLUICE__ADAPTIVE_CALM;
		else
			w->verdict = SLUICE__ADAPTIVE_UNSURE;
	} else {
		int high = a->threshold_ppm2 != UINT64_MAX &&
		           (sluice__u128)w->failures * (PPM * PPM) >
		                   (sluice__u128)n * a->threshold_ppm2;
		w->verdict = high ? SLUICE__ADAPTIVE_HIGH : SLUICE__ADAPTIVE_CALM;
	}
}

/* The limit after one more judged window with verdict @v. */
static uint64_t step(sluice__adaptive_t *a, sluice__adaptive_verdict_t v, uint64_t limit)
{
	switch (v) {
	case SLUICE__ADAPTIVE_HIGH:
		a->calm_run = 0;
		if (++a->high_run < a->cfg.windows)
			return limit;
		a->high_run = 0;
		{
			sluice__u128 d = ((sluice__u128)limit * a->cfg.step_ppm + PPM - 1) / PPM;
			uint64_t down = d < 1 ? 1 : (uint64_t)d;
			return limit - a->cfg.floor <= down ? a->cfg.floor : limit - down;
		}
	case SLUICE__ADAPTIVE_CALM:
		a->high_run = 0;
		if (++a->calm_run < a->cfg.windows)
			return limit;
		a->calm_run = 0;
		return a->configured - limit <= a->up_step ? a->configured : limit + a->up_step;
	case SLUICE__ADAPTIVE_UNSURE:
	case SLUICE__ADAPTIVE_EMPTY:
		break;
	}
	a->high_run = a->calm_run = 0;
	return limit;
}

int sluice__adaptive_close(sluice__adaptive_t *a, uint64_t now)
{
	uint64_t epoch = epoch_of(a, now);
	uint64_t s = atomic_load_explicit(&a->state, memory_order_relaxed);
	if ((s & 1) || (s >> 1) >= epoch)
		return 0; /* being judged, or not closed (or time went back) */
	/* Acquire on success: pairs with the release store that ended the
	 * previous owner's turn, so its prev_counts, prev_failures and runs
	 * are the ones we read.  Failure: another thread won; go on. */
	if (!atomic_compare_exchange_strong_explicit(&a->state, &s, epoch << 1 | 1,
	                                             memory_order_acquire, memory_order_relaxed))
		return 0;

	uint64_t open = s >> 1;
	uint64_t before = atomic_load_explicit(&a->limit, memory_order_relaxed);
	sluice__adaptive_window_t w = { .epoch = open, .limit_before = before };
	judge(a, &w);
	uint64_t after = step(a, w.verdict, before);
	uint64_t judged = 1;
	if (epoch - open > 1) {
		/* No tick ran in the windows open+1 .. epoch-1: no traffic, no
		 * evidence; one EMPTY resets the runs as any number would. */
		step(a, SLUICE__ADAPTIVE_EMPTY, after);
		judged = epoch - open;
	}
	w.limit_after = after;
	atomic_store_explicit(&a->limit, after, memory_order_relaxed);
	atomic_fetch_add_explicit(&a->judged, judged, memory_order_relaxed);
	if (after != before && a->cb)
		a->cb(a->cb_ctx, before, after, &w);
	atomic_store_explicit(&a->next_close_ns, close_of(a, epoch), memory_order_relaxed);
	/* Release: publishes prev_counts, prev_failures and the runs to the
	 * next owner; pairs with the acquire of its CAS above. */
	atomic_store_explicit(&a->state, epoch << 1, memory_order_release);
	return 1;
}
