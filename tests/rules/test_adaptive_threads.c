/* SPDX-License-Identifier: MIT */
/*
 * test_adaptive_threads.c - two threads record completions and tick one
 * controller while a third moves a manual clock forward one window at a
 * time (sometimes several).  Checks what adaptive_internal.h's GUARANTEE
 * says: callbacks never overlap and report windows in order, each window
 * is judged once (after a last tick, the windows judged are exactly the
 * windows that passed), the effective limit stays in [floor, configured],
 * and each callback's new limit is the next one's old limit.
 *
 * Asserts on counts and order only, never on timing.  The clock thread
 * paces itself on the tickers' progress with a bounded yield loop, so a
 * run is a fixed amount of work on 2 cores and under TSan.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "adaptive_internal.h"
#include "sluice/clock.h"

TestSuite(adaptive_threads, .timeout = 60);

#define MS 1000000ull
#define WINDOW (100 * MS)
#define STEPS 2000
#define TICKERS 2

static sluice_clock_t clk;
static sluice__metrics_t m;
static sluice__adaptive_t a;
static atomic_int stop, out_of_range;
static atomic_uint_fast64_t ticks[TICKERS];

/* written only inside callbacks, which must not overlap: plain on purpose,
 * so TSan reports a race if two ever run at once */
static uint64_t cb_count, cb_last_epoch, cb_last_limit;
static int cb_order_ok = 1, cb_chain_ok = 1;
static atomic_int in_cb;

static void on_change(void *ctx, uint64_t old_limit, uint64_t new_limit,
                      const sluice__adaptive_window_t *w)
{
	(void)ctx;
	if (atomic_fetch_add(&in_cb, 1) != 0)
		cb_order_ok = 0;
	if (cb_count && w->epoch <= cb_last_epoch)
		cb_order_ok = 0;
	if (cb_count && old_limit != cb_last_limit)
		cb_chain_ok = 0;
	if (new_limit < 50 || new_limit > 500)
		cb_chain_ok = 0;
	cb_last_epoch = w->epoch;
	cb_last_limit = new_limit;
	cb_count++;
	/* A stall point: now and then the winner lingers in the callback
	 * while the clock moves on and the other ticker reaches the next
	 * window, which it must leave alone (the busy bit). */
	if (cb_count % 4 == 0)
		for (int i = 0; i < 3; i++)
			sched_yield();
	atomic_fetch_sub(&in_cb, 1);
}

static void *ticker(void *arg)
{
	uintptr_t t = (uintptr_t)arg;
	uint64_t i = 0;
	while (!atomic_load(&stop)) {
		/* phases of slow and fast completions, so the limit moves both
		 * ways many times */
		uint64_t now = sluice_clock_now(&clk);
		uint64_t phase = (now / WINDOW / 7) % 2;
		sluice__metrics_complete(&m, phase ? 500 * MS : 2 * MS, 1);
		sluice__adaptive_tick(&a, sluice_clock_now(&clk));
		uint64_t l = sluice__adaptive_limit(&a);
		if (l < 50 || l > 500)
			atomic_store(&out_of_range, 1); /* asserted on the main thread */
		atomic_store(&ticks[t], ++i);
		if (i % 8 == 0)
			sched_yield(); /* let the clock thread in on 2 cores */
	}
	return NULL;
}

Test(adaptive_threads, one_judge_per_window)
{
	sluice_rules_adaptive_t cfg = {
		.enabled = 1, .signal = SLUICE_RULES_SIGNAL_P99_LATENCY, .baseline_ns = 50 * MS,
		.factor_ppm = 1500000, .windows = 2, .window_ns = WINDOW, .step_ppm = 200000,
		.floor = 50,
	};
	sluice_clock_manual_init(&clk, 0);
	cr_assert_eq(sluice__metrics_init(&m, 0), 0);
	cr_assert_eq(sluice__adaptive_init(&a, &cfg, 500, 0, &m, 0, on_change, NULL), 0);

	pthread_t th[TICKERS];
	for (uintptr_t t = 0; t < TICKERS; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, ticker, (void *)t), 0);
	uint64_t windows = 0;
	for (int s = 0; s < STEPS; s++) {
		/* wait (bounded) until the tickers have ticked a few times
		 * since the last step, whichever of them did: so most windows
		 * see traffic, and one ticker stalled in a callback does not
		 * hold the clock back (the other meets the next window) */
		uint64_t seen = 0, now_ticks;
		for (int t = 0; t < TICKERS; t++)
			seen += atomic_load(&ticks[t]);
		for (int spin = 0; spin < 100000; spin++) {
			now_ticks = 0;
			for (int t = 0; t < TICKERS; t++)
				now_ticks += atomic_load(&ticks[t]);
			if (now_ticks >= seen + 4)
				break;
			sched_yield();
		}
		uint64_t jump = s % 50 == 49 ? 3 : 1; /* now and then skip windows */
		sluice_clock_manual_advance(&clk, jump * WINDOW);
		windows += jump;
	}
	atomic_store(&stop, 1);
	for (int t = 0; t < TICKERS; t++)
		pthread_join(th[t], NULL);

	/* a last tick closes the last window; then every window that passed
	 * has been judged exactly once */
	sluice__adaptive_tick(&a, sluice_clock_now(&clk));
	cr_assert_eq(sluice__adaptive_judged(&a), windows, "judged %" PRIu64 " of %" PRIu64,
	             sluice__adaptive_judged(&a), windows);
	cr_assert(!atomic_load(&out_of_range), "a ticker saw the limit outside [floor, configured]");
	cr_assert(cb_order_ok, "callbacks overlapped or went out of window order");
	cr_assert(cb_chain_ok, "a callback's old limit was not the previous new limit");
	cr_assert_gt(cb_count, 10, "the limit hardly moved (%" PRIu64 " changes)", cb_count);
	cr_assert_eq(cb_last_limit, sluice__adaptive_limit(&a));
	cr_log_info("%" PRIu64 " windows, %" PRIu64 " limit changes", windows, cb_count);
	sluice__metrics_free(&m);
}
