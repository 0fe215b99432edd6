/* SPDX-License-Identifier: MIT */
/*
 * test_adaptive.c - the adaptive-limit controller on a manual clock: init's
 * refusals, the limit falling window by window while the p99 latency is
 * high, stopping at the floor and recovering (every step checked), the
 * exact 99th-percentile rank, a threshold inside a bucket (UNSURE holds),
 * the error-ratio signal at and above its threshold, windows with no
 * traffic (with a tick, and skipped by a clock jump) breaking a run, time
 * going back, a starting limit, and times near 2^64.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <inttypes.h>
#include <string.h>

#include "adaptive_internal.h"
#include "sluice/clock.h"
#include "sluice/error.h"

TestSuite(adaptive, .timeout = 60);

#define MS 1000000ull
#define SEC 1000000000ull

/* ---- harness ------------------------------------------------------------ */

#define CHANGES_MAX 64
struct changes {
	size_t n;
	uint64_t old_limit[CHANGES_MAX], new_limit[CHANGES_MAX];
	sluice__adaptive_window_t w[CHANGES_MAX];
};

static void on_change(void *ctx, uint64_t old_limit, uint64_t new_limit,
                      const sluice__adaptive_window_t *w)
{
	struct changes *c = ctx;
	cr_assert_neq(old_limit, new_limit, "callback without a change");
	cr_assert_lt(c->n, CHANGES_MAX);
	c->old_limit[c->n] = old_limit;
	c->new_limit[c->n] = new_limit;
	c->w[c->n] = *w;
	c->n++;
}

struct rig {
	sluice_clock_t clock;
	sluice__metrics_t m;
	sluice__adaptive_t a;
	struct changes ch;
};

static sluice_rules_adaptive_t latency_cfg(void)
{
	return (sluice_rules_adaptive_t){
		.enabled = 1, .signal = SLUICE_RULES_SIGNAL_P99_LATENCY, .baseline_ns = 50 * MS,
		.factor_ppm = 1500000, .windows = 3, .window_ns = 1 * SEC, .step_ppm = 100000,
		.floor = 120,
	};
}

static void rig_init(struct rig *r, const sluice_rules_adaptive_t *cfg, uint64_t configured,
                     uint64_t initial, uint64_t start)
{
	memset(r, 0, sizeof(*r));
	sluice_clock_manual_init(&r->clock, start);
	int rc = sluice__metrics_init(&r->m, 1);
	cr_assert_eq(rc, 0);
	rc = sluice__adaptive_init(&r->a, cfg, configured, initial, &r->m,
	                           sluice_clock_now(&r->clock), on_change, &r->ch);
	cr_assert_eq(rc, 0, "adaptive_init = %d (%s)", rc, sluice_err_name(rc));
}

static void rig_free(struct rig *r) { sluice__metrics_free(&r->m); }

/* One window: @n completions at @lat ns (@fail of them failed) recorded
 * inside the open window, then the clock moves to the next window's start
 * and a tick closes it.  Returns the limit after. */
static uint64_t window(struct rig *r, uint64_t n, uint64_t lat, uint64_t fail)
{
	uint64_t now = sluice_clock_now(&r->clock);
	cr_assert_eq(sluice__adaptive_tick(&r->a, now), 0, "a tick inside the window judged one");
	for (uint64_t i = 0; i < n; i++)
		sluice__metrics_complete(&r->m, lat, i >= fail);
	uint64_t next = (now / r->a.cfg.window_ns + 1) * r->a.cfg.window_ns;
	sluice_clock_manual_set(&r->clock, next);
	cr_assert_eq(sluice__adaptive_tick(&r->a, sluice_clock_now(&r->clock)), 1,
	             "the first tick of a window judged nothing");
	cr_assert_eq(sluice__adaptive_tick(&r->a, sluice_clock_now(&r->clock)), 0,
	             "a window judged twice");
	return sluice__adaptive_limit(&r->a);
}

/* One row of a run of windows: window(r, n, lat, fail) must leave the
 * limit at @limit; @why says what the row checks. */
struct step {
	uint64_t n, lat, fail, limit;
	const char *why;
};

/* The windows of @steps in order, each checked as its row says. */
static void windows(struct rig *r, const struct step *steps, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const struct step *s = &steps[i];
		uint64_t got = window(r, s->n, s->lat, s->fail);
		cr_assert_eq(got, s->limit, "window %zu of the run (%s): limit %" PRIu64 ", want %" PRIu64,
		             i, s->why ? s->why : "", got, s->limit);
	}
}
#define WINDOWS(r, ...)                                                              \
	do {                                                                         \
		static const struct step steps_[] = { __VA_ARGS__ };                   \
		windows((r), steps_, sizeof(steps_) / sizeof(steps_[0]));              \
	} while (0)

/* Close the open window by a tick at @t (no window() around it: the
 * caller recorded the completions, or none); Return: the limit after. */
static uint64_t close_at(struct rig *r, uint64_t t)
{
	sluice_clock_manual_set(&r->clock, t);
	cr_assert_eq(sluice__adaptive_tick(&r->a, sluice_clock_now(&r->clock)), 1,
	             "the tick at %" PRIu64 " judged nothing", t);
	return sluice__adaptive_limit(&r->a);
}

/* ---- init --------------------------------------------------------------- */

struct bad_case {
	int field;
	uint64_t value;
	uint64_t configured, initial;
	int rc;
};

enum { F_NONE, F_ENABLED, F_SIGNAL, F_WINDOWS, F_STEP, F_FACTOR, F_BASE_NS, F_BASE_PPM,
       F_WINDOW_NS, F_FLOOR };

ParameterizedTestParameters(adaptive, init_refuses)
{
	static struct bad_case cases[] = {
		{ F_NONE, 0, 200, 0, 0 },
		{ F_ENABLED, 0, 200, 0, SLUICE_EINVAL },
		{ F_SIGNAL, 0, 200, 0, SLUICE_EINVAL },
		{ F_SIGNAL, 3, 200, 0, SLUICE_EINVAL },
		{ F_WINDOWS, 0, 200, 0, SLUICE_EINVAL },
		{ F_WINDOWS, 1001, 200, 0, SLUICE_EINVAL },
		{ F_WINDOWS, 1000, 200, 0, 0 },
		{ F_STEP, 0, 200, 0, SLUICE_EINVAL },
		{ F_STEP, 1000001, 200, 0, SLUICE_EINVAL },
		{ F_STEP, 1000000, 200, 0, 0 },
		{ F_FACTOR, 1000000, 200, 0, SLUICE_EINVAL },
		{ F_FACTOR, 1000001, 200, 0, 0 },
		{ F_BASE_NS, 0, 200, 0, SLUICE_EINVAL },
		{ F_BASE_PPM, 0, 200, 0, SLUICE_EINVAL },
		{ F_BASE_PPM, 1000001, 200, 0, SLUICE_EINVAL },
		{ F_BASE_PPM, 1000000, 200, 0, 0 },
		{ F_WINDOW_NS, 0, 200, 0, SLUICE_EWINDOW },
		{ F_FLOOR, 0, 200, 0, SLUICE_ELIMIT },
		{ F_FLOOR, 201, 200, 0, SLUICE_ELIMIT },
		{ F_FLOOR, 200, 200, 0, 0 },
		{ F_NONE, 0, 0, 0, SLUICE_ELIMIT },
		{ F_NONE, 0, 200, 119, SLUICE_ELIMIT },
		{ F_NONE, 0, 200, 201, SLUICE_ELIMIT },
		{ F_NONE, 0, 200, 120, 0 },
	};
	return cr_make_param_array(struct bad_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct bad_case *c, adaptive, init_refuses)
{
	sluice_rules_adaptive_t cfg = latency_cfg();
	switch (c->field) {
	case F_ENABLED: cfg.enabled = (int)c->value; break;
	case F_SIGNAL: cfg.signal = (sluice_rules_signal_t)c->value; break;
	case F_WINDOWS: cfg.windows = (uint32_t)c->value; break;
	case F_STEP: cfg.step_ppm = (uint32_t)c->value; break;
	case F_FACTOR: cfg.factor_ppm = c->value; break;
	case F_BASE_NS: cfg.baseline_ns = c->value; break;
	case F_BASE_PPM:
		cfg.signal = SLUICE_RULES_SIGNAL_ERROR_RATIO;
		cfg.baseline_ppm = (uint32_t)c->value;
		break;
	case F_WINDOW_NS: cfg.window_ns = c->value; break;
	case F_FLOOR: cfg.floor = c->value; break;
	}
	sluice__metrics_t m;
	cr_assert_eq(sluice__metrics_init(&m, 1), 0);
	sluice__adaptive_t a;
	memset(&a, 0xA5, sizeof(a));
	unsigned char before[sizeof(a)];
	memcpy(before, &a, sizeof(a));
	int rc = sluice__adaptive_init(&a, &cfg, c->configured, c->initial, &m, 0, NULL, NULL);
	cr_assert_eq(rc, c->rc, "field %d = %" PRIu64 ": rc %d (%s), want %d", c->field, c->value,
	             rc, sluice_err_name(rc), c->rc);
	if (rc != 0)
		cr_assert_eq(memcmp(before, &a, sizeof(a)), 0, "a refused init wrote the controller");
	sluice__metrics_free(&m);
	cr_assert_eq(sluice__adaptive_init(NULL, &cfg, 200, 0, &m, 0, NULL, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice__adaptive_init(&a, NULL, 200, 0, &m, 0, NULL, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice__adaptive_init(&a, &cfg, 200, 0, NULL, 0, NULL, NULL), SLUICE_EINVAL);
}

/* ---- p99 latency -------------------------------------------------------- */

/* The scenario: baseline 50 ms x 1.5 = 75 ms, 3 windows, 10%
 * steps, floor 120 under a limit of 200.  p99 100 ms cuts every third
 * window, by 10% of the limit then in force (rounded up), down to the
 * floor and no further; p99 20 ms raises every third window by 10
 * (half a 10% step of 200), up to 200 and no further. */
Test(adaptive, falls_while_high_stops_at_floor_recovers)
{
	static struct rig r;
	sluice_rules_adaptive_t cfg = latency_cfg();
	rig_init(&r, &cfg, 200, 0, 1000 * SEC + 123);
	cr_assert_eq(sluice__adaptive_limit(&r.a), 200);

	static const uint64_t down[] = { 180, 162, 145, 130, 120 };
	for (size_t s = 0; s < 5; s++) {
		uint64_t before = sluice__adaptive_limit(&r.a);
		cr_assert_eq(window(&r, 200, 100 * MS, 0), before, "cut before 3 windows");
		cr_assert_eq(window(&r, 200, 100 * MS, 0), before, "cut before 3 windows");
		cr_assert_eq(window(&r, 200, 100 * MS, 0), down[s], "step %zu: %" PRIu64, s,
		             sluice__adaptive_limit(&r.a));
	}
	/* at the floor: high windows change nothing, no callback */
	for (int i = 0; i < 9; i++)
		cr_assert_eq(window(&r, 200, 100 * MS, 0), 120);
	cr_assert_eq(r.ch.n, 5);
	for (size_t s = 0; s < 5; s++) {
		cr_assert_eq(r.ch.new_limit[s], down[s]);
		cr_assert_eq(r.ch.old_limit[s], s ? down[s - 1] : 200);
		cr_assert_eq(r.ch.w[s].verdict, SLUICE__ADAPTIVE_HIGH);
		cr_assert_eq(r.ch.w[s].completions, 200);
		cr_assert_eq(r.ch.w[s].p99_lo_ns, 75 * MS);
		cr_assert_eq(r.ch.w[s].p99_hi_ns, 100 * MS);
		cr_assert_eq(r.ch.w[s].limit_after, down[s]);
	}
	/* the callback's epoch is the window that closed */
	cr_assert_eq(r.ch.w[0].epoch, 1000 + 2);

	/* calm: +10 every third window, 120 -> 200 in 8 raises */
	for (uint64_t want = 130; want <= 200; want += 10) {
		uint64_t before = sluice__adaptive_limit(&r.a);
		cr_assert_eq(window(&r, 50, 20 * MS, 0), before);
		cr_assert_eq(window(&r, 50, 20 * MS, 0), before);
		cr_assert_eq(window(&r, 50, 20 * MS, 0), want);
	}
	for (int i = 0; i < 6; i++)
		cr_assert_eq(window(&r, 50, 20 * MS, 0), 200, "raised above the configured limit");
	cr_assert_eq(r.ch.n, 5 + 8);
	cr_assert_eq(r.ch.w[5].verdict, SLUICE__ADAPTIVE_CALM);
	cr_assert_eq(r.ch.w[5].p99_lo_ns, 15 * MS);
	cr_assert_eq(r.ch.w[5].p99_hi_ns, 20 * MS);
	cr_assert_eq(sluice__adaptive_judged(&r.a), 15 + 9 + 24 + 6);
	rig_free(&r);
}

/* A high window in a calm run (or the reverse) starts the count again. */
Test(adaptive, runs_must_be_consecutive)
{
	static struct rig r;
	sluice_rules_adaptive_t cfg = latency_cfg();
	rig_init(&r, &cfg, 200, 0, 0);
	for (int i = 0; i < 4; i++)
		WINDOWS(&r, { 10, 100 * MS, 0, 200, "high" }, { 10, 100 * MS, 0, 200, "high" },
		        { 10, 10 * MS, 0, 200, "calm breaks the run" });
	WINDOWS(&r, { 10, 100 * MS, 0, 200, NULL }, { 10, 100 * MS, 0, 200, NULL },
	        { 10, 100 * MS, 0, 180, "three high in a row" },
	        /* from 180: calm, calm, high, calm, calm: no raise */
	        { 10, 10 * MS, 0, 180, NULL }, { 10, 10 * MS, 0, 180, NULL },
	        { 10, 100 * MS, 0, 180, "high breaks the run" }, { 10, 10 * MS, 0, 180, NULL },
	        { 10, 10 * MS, 0, 180, NULL }, { 10, 10 * MS, 0, 190, "three calm in a row" });
	rig_free(&r);
}

/* p99 is the completion of rank ceil(0.99 n): with 100 completions, one
 * slow one is the 1% above it; two slow ones make the p99 slow. */
Test(adaptive, p99_rank)
{
	static struct rig r;
	sluice_rules_adaptive_t cfg = latency_cfg();
	cfg.windows = 1;
	rig_init(&r, &cfg, 200, 0, 0);
	uint64_t now = sluice_clock_now(&r.clock);
	for (int i = 0; i < 99; i++)
		sluice__metrics_complete(&r.m, 10 * MS, 1);
	sluice__metrics_complete(&r.m, 1 * SEC, 1);
	cr_assert_eq(close_at(&r, now + SEC), 200, "1 slow in 100 is above the p99");

	for (int i = 0; i < 98; i++)
		sluice__metrics_complete(&r.m, 10 * MS, 1);
	sluice__metrics_complete(&r.m, 1 * SEC, 1);
	sluice__metrics_complete(&r.m, 1 * SEC, 1);
	cr_assert_eq(close_at(&r, now + 2 * SEC), 180, "2 slow in 100 are the p99");
	cr_assert_eq(r.ch.w[0].p99_lo_ns, 750 * MS);
	cr_assert_eq(r.ch.w[0].p99_hi_ns, 1 * SEC);

	/* beyond the last bound: the +Inf bucket, still HIGH */
	sluice__metrics_complete(&r.m, 60 * SEC, 1);
	cr_assert_eq(close_at(&r, now + 3 * SEC), 162);
	cr_assert_eq(r.ch.w[1].p99_lo_ns, 10 * SEC);
	cr_assert_eq(r.ch.w[1].p99_hi_ns, UINT64_MAX);
	rig_free(&r);
}

/* A threshold between two bounds (40 ms x 1.5 = 60 ms, inside (50, 75]):
 * a p99 in that bucket is UNSURE and holds the limit (and breaks runs);
 * above 75 ms is HIGH, at or below 50 ms CALM. */
Test(adaptive, threshold_inside_a_bucket_holds)
{
	static struct rig r;
	sluice_rules_adaptive_t cfg = latency_cfg();
	cfg.baseline_ns = 40 * MS;
	cfg.windows = 1;
	rig_init(&r, &cfg, 200, 150, 0);
	cr_assert_eq(sluice__adaptive_limit(&r.a), 150, "initial limit");
	for (int i = 0; i < 5; i++)
		cr_assert_eq(window(&r, 100, 70 * MS, 0), 150, "UNSURE moved the limit");
	cr_assert_eq(window(&r, 100, 80 * MS, 0), 135);
	cr_assert_eq(window(&r, 100, 60 * MS, 0), 135);
	cr_assert_eq(window(&r, 100, 50 * MS, 0), 145);
	cr_assert_eq(r.ch.n, 2);
	rig_free(&r);
}

/* ---- error ratio --------------------------------------------------------- */

/* baseline 1% x factor 2 = 2%: 3 failures in 100 is above, 2 in 100 is
 * not (the comparison is strict and exact). */
Test(adaptive, error_ratio)
{
	static struct rig r;
	sluice_rules_adaptive_t cfg = {
		.enabled = 1, .signal = SLUICE_RULES_SIGNAL_ERROR_RATIO, .baseline_ppm = 10000,
		.factor_ppm = 2000000, .windows = 2, .window_ns = 10 * SEC, .step_ppm = 500000,
		.floor = 10,
	};
	rig_init(&r, &cfg, 100, 0, 5 * SEC);
	/* latency does not matter for this signal */
	WINDOWS(&r, { 100, 5 * SEC, 3, 100, "slow but no error" }, { 100, 1 * MS, 3, 50, "3% twice" });
	cr_assert_eq(r.ch.w[0].failures, 3);
	cr_assert_eq(r.ch.w[0].completions, 100);
	WINDOWS(&r, { 100, 1 * MS, 3, 50, NULL }, { 100, 1 * MS, 100, 25, NULL },
	        { 100, 1 * MS, 3, 25, NULL }, { 100, 1 * MS, 3, 12, NULL },
	        { 100, 1 * MS, 3, 12, NULL }, { 100, 1 * MS, 3, 10, "the floor" },
	        /* exactly 2%: calm; raises by 100 x 50% / 2 = 25 */
	        { 100, 1 * MS, 2, 10, "2% is calm" }, { 100, 1 * MS, 2, 35, NULL },
	        { 1000, 1 * MS, 20, 35, NULL }, { 1000, 1 * MS, 0, 60, NULL },
	        { 1000, 1 * MS, 0, 60, NULL }, { 1000, 1 * MS, 0, 85, NULL },
	        { 1000, 1 * MS, 0, 85, NULL }, { 1000, 1 * MS, 0, 100, "back to the configured limit" });
	rig_free(&r);
}

/* ---- windows with no traffic --------------------------------------------- */

/* A window with a tick but no completion, or windows skipped by a clock
 * jump (no tick at all), hold the limit and break a run. */
Test(adaptive, empty_windows_hold_and_break_runs)
{
	static struct rig r;
	sluice_rules_adaptive_t cfg = latency_cfg();
	rig_init(&r, &cfg, 200, 0, 0);
	WINDOWS(&r, { 10, 100 * MS, 0, 200, NULL }, { 10, 100 * MS, 0, 200, NULL },
	        { 0, 0, 0, 200, "an empty window" },
	        { 10, 100 * MS, 0, 200, "the run went on across an empty window" },
	        { 10, 100 * MS, 0, 200, NULL }, { 10, 100 * MS, 0, 180, NULL });
	uint64_t judged = sluice__adaptive_judged(&r.a);

	WINDOWS(&r, { 10, 100 * MS, 0, 180, NULL }, { 10, 100 * MS, 0, 180, NULL });
	/* completions in the open window, then 10 windows without a tick:
	 * the open window is judged (HIGH: third of the run: cut), the nine
	 * after it are EMPTY and break the next run */
	uint64_t now = sluice_clock_now(&r.clock);
	for (int i = 0; i < 10; i++)
		sluice__metrics_complete(&r.m, 100 * MS, 1);
	cr_assert_eq(close_at(&r, now + 10 * SEC), 162);
	cr_assert_eq(sluice__adaptive_judged(&r.a), judged + 2 + 10);
	WINDOWS(&r, { 10, 100 * MS, 0, 162, "the empty windows broke the run" },
	        { 10, 100 * MS, 0, 162, NULL }, { 10, 100 * MS, 0, 145, NULL });

	/* a jump breaks a half-done run: two high windows, a jump, two more */
	WINDOWS(&r, { 10, 100 * MS, 0, 145, NULL }, { 10, 100 * MS, 0, 145, NULL });
	now = sluice_clock_now(&r.clock);
	cr_assert_eq(close_at(&r, now + 5 * SEC), 145);
	WINDOWS(&r, { 10, 100 * MS, 0, 145, "the jump broke the run" },
	        { 10, 100 * MS, 0, 145, NULL }, { 10, 100 * MS, 0, 130, NULL });
	rig_free(&r);
}

/* ---- time ---------------------------------------------------------------- */

/* A tick older than the open window judges nothing and changes nothing. */
Test(adaptive, time_going_back_does_nothing)
{
	static struct rig r;
	sluice_rules_adaptive_t cfg = latency_cfg();
	cfg.windows = 1;
	rig_init(&r, &cfg, 200, 0, 100 * SEC);
	cr_assert_eq(window(&r, 10, 100 * MS, 0), 180);
	uint64_t judged = sluice__adaptive_judged(&r.a);
	for (int i = 0; i < 10; i++)
		sluice__metrics_complete(&r.m, 100 * MS, 1);
	cr_assert_eq(sluice__adaptive_tick(&r.a, 50 * SEC), 0);
	cr_assert_eq(sluice__adaptive_tick(&r.a, 0), 0);
	cr_assert_eq(sluice__adaptive_judged(&r.a), judged);
	cr_assert_eq(sluice__adaptive_limit(&r.a), 180);
	/* the completions count in the open window when it closes */
	cr_assert_eq(close_at(&r, 102 * SEC), 162);
	cr_assert_eq(r.ch.w[1].completions, 10);
	rig_free(&r);
}

/* Times near 2^64: the next window's start saturates instead of wrapping
 * (a wrapped hint would judge a window on every tick), and with 1 ns
 * windows the epochs past 2^63 are one (adaptive_internal.h). */
Test(adaptive, times_near_2_64)
{
	static struct rig r;
	sluice_rules_adaptive_t cfg = latency_cfg();
	cfg.windows = 1;
	rig_init(&r, &cfg, 200, 0, UINT64_MAX - 3 * SEC);
	cr_assert_eq(window(&r, 10, 100 * MS, 0), 180);
	cr_assert_eq(window(&r, 10, 100 * MS, 0), 162);
	cr_assert_eq(window(&r, 10, 100 * MS, 0), 145);
	/* now in the last, partial window: its end is past 2^64 */
	cr_assert_eq(atomic_load(&r.a.next_close_ns), UINT64_MAX);
	cr_assert_eq(sluice__adaptive_tick(&r.a, UINT64_MAX - 1), 0);
	cr_assert_eq(sluice__adaptive_judged(&r.a), 3);
	rig_free(&r);

	cfg.window_ns = 1;
	rig_init(&r, &cfg, 200, 0, (1ull << 63) - 2);
	sluice__metrics_complete(&r.m, 100 * MS, 1);
	cr_assert_eq(sluice__adaptive_tick(&r.a, (1ull << 63) - 1), 1);
	cr_assert_eq(sluice__adaptive_limit(&r.a), 180);
	sluice__metrics_complete(&r.m, 100 * MS, 1);
	cr_assert_eq(sluice__adaptive_tick(&r.a, UINT64_MAX), 0, "epochs saturate at 2^63 - 1");
	cr_assert_eq(sluice__adaptive_limit(&r.a), 180);
	rig_free(&r);
}

/* A controller started on metrics that already hold counts (a reload that
 * keeps a rule's metrics) judges only what came after its init. */
Test(adaptive, starts_from_current_counts)
{
	static struct rig r;
	sluice_rules_adaptive_t cfg = latency_cfg();
	cfg.windows = 1;
	memset(&r, 0, sizeof(r));
	sluice_clock_manual_init(&r.clock, 0);
	cr_assert_eq(sluice__metrics_init(&r.m, 1), 0);
	for (int i = 0; i < 1000; i++)
		sluice__metrics_complete(&r.m, 5 * SEC, 0);
	cr_assert_eq(sluice__adaptive_init(&r.a, &cfg, 200, 0, &r.m, 0, on_change, &r.ch), 0);
	cr_assert_eq(window(&r, 10, 1 * MS, 0), 200);
	cr_assert_eq(r.ch.n, 0);
	rig_free(&r);
}
