/* SPDX-License-Identifier: MIT */
/*
 * stress_leaky - many threads, a real clock, one leaky bucket as a meter or
 * as a shaper; verify leaky.h's GUARANTEE over every admission recorded.
 *
 *   stress_leaky [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]
 *                [--mode=meter|shaper] [--rate=R] [--depth=D]
 *                [--max-delay-us=M] [--self-test]
 *
 * GUARANTEES checked (leaky.h), T = sluice_leaky_interval_ns():
 *   meter:  for every interval [x, x + t], the requests admitted at a time
 *           (now_ns) inside it number at most D + 1 + t / T.  Workers
 *           acquire n = 1..min(3, D + 1).  worst = max (requests -
 *           floor(t / T)), bound = D + 1.
 *   shaper: every request's slot (now_ns + delay_ns) counts; in any
 *           interval at most 1 + t / T slots, i.e. the slots sorted by time
 *           are at least T apart (worst = max (slots - floor(t / T)),
 *           bound = 1).  Also checked, as the header states them: no
 *           admitted delay exceeds max_delay_ns, and slots are FIFO in
 *           booking order: one thread's bookings are in its program order,
 *           so its successive slots must each be at least T after the one
 *           before.  Workers pace (queue) one request, or, one decision in
 *           eight, acquire (admitted only when the queue is empty).  They
 *           do not sleep until their slots: the guarantee is about the
 *           slots handed out, and a sleeping worker would only make fewer
 *           decisions.
 *
 * Defaults: R = 50,000 per second (T = 20 us); meter D = 7; shaper
 * max_delay = 1 ms (a queue of 50 slots).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress_common.h"

static const char usage[] =
	"usage: stress_leaky [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]\n"
	"                    [--mode=meter|shaper] [--rate=R (per second)] [--depth=D]\n"
	"                    [--max-delay-us=M] [--self-test]\n";

static uint64_t rate = 50000, depth = 7, max_delay_us = 1000, interval, n_max;
static int rate_given;
static const char *mode = "meter";
static int shaper;
static sluice_leaky_t leaky;

static int opt(const char *key, const char *val)
{
	if (strcmp(key, "mode") == 0) {
		mode = val;
		return strcmp(val, "meter") == 0 || strcmp(val, "shaper") == 0 ? 0 : -1;
	}
	if (strcmp(key, "rate") == 0) {
		rate_given = 1;
		return stress_u64(val, &rate);
	}
	if (strcmp(key, "depth") == 0)
		return stress_u64(val, &depth);
	if (strcmp(key, "max-delay-us") == 0)
		return stress_u64(val, &max_delay_us);
	return -1;
}

static int step_meter(struct stress_worker *w)
{
	uint64_t n = 1 + stress_rand(w) % n_max;
	sluice_decision_t d;
	int rc = sluice_leaky_acquire(&leaky, n, &d);
	if (rc < 0)
		return stress_fail(w, rc);
	return rc == 1 && !stress_record(w, 0, d.now_ns, n, 0);
}

static int step_shaper(struct stress_worker *w)
{
	sluice_decision_t d;
	int rc = stress_rand(w) % 8 == 0 ? sluice_leaky_acquire(&leaky, 1, &d)
	                                 : sluice_leaky_reserve(&leaky, 1, UINT64_MAX, &d);
	if (rc < 0)
		return stress_fail(w, rc);
	/* aux: the delay, saturated (max_delay < 2^32 - 1, so a saturated
	 * delay still shows as too long) */
	uint32_t delay = d.delay_ns > UINT32_MAX ? UINT32_MAX : (uint32_t)d.delay_ns;
	return rc == 1 && !stress_record(w, 0, d.now_ns + d.delay_ns, 1, delay);
}

/* Shaper checks beyond the rate bound: delays and per-thread FIFO. */
static uint64_t delays_over(const struct stress_rec *r, size_t n, uint64_t max_delay,
                            uint64_t *longest)
{
	uint64_t bad = 0;
	for (size_t i = 0; i < n; i++) {
		if (r[i].aux > *longest)
			*longest = r[i].aux;
		bad += r[i].aux > max_delay;
	}
	return bad;
}

/* @r in one thread's booking order: each slot at least T after the last. */
static uint64_t fifo_breaks(const struct stress_rec *r, size_t n, uint64_t t)
{
	uint64_t bad = 0;
	for (size_t i = 1; i < n; i++)
		bad += r[i].t < r[i - 1].t || r[i].t - r[i - 1].t < t;
	return bad;
}

/* T = 10 ns: the meter with D = 2 (bound 3), the shaper (bound 1, delay
 * at most 50, FIFO per thread). */
static int self_test(void)
{
	struct stress_selftest st = { "leaky", 0, 0 };
	static const struct stress_rec m_ok[] = { { 0, 2, 0 }, { 0, 1, 0 }, { 10, 1, 0 },
		                                  { 20, 1, 0 } };
	static const struct stress_rec m_burst[] = { { 0, 2, 0 }, { 5, 2, 0 } };
	static const struct stress_rec m_late[] = { { 0, 1, 0 },  { 50, 3, 0 }, { 60, 1, 0 },
		                                    { 65, 1, 0 } };
	static const struct stress_rec s_ok[] = { { 0, 1, 0 }, { 10, 1, 10 }, { 20, 1, 50 } };
	static const struct stress_rec s_close[] = { { 0, 1, 0 }, { 10, 1, 0 }, { 19, 1, 0 } };
	static const struct stress_rec s_same[] = { { 30, 1, 0 }, { 30, 1, 0 } };
	static const struct stress_rec s_delay[] = { { 0, 1, 0 }, { 60, 1, 51 } };
	/* one thread's bookings: slots out of booking order, or too close */
	static const struct stress_rec f_back[] = { { 20, 1, 0 }, { 10, 1, 0 } };
	static const struct stress_rec f_close[] = { { 10, 1, 0 }, { 19, 1, 0 } };
	char det[80];
	uint64_t wst, bad, longest = 0;
#define CASE(name, want, s, bound)                                                         \
	wst = stress_worst_conform(s, sizeof(s) / sizeof(s[0]), 10, 1);                     \
	snprintf(det, sizeof(det), "worst=%llu bound=%d", (unsigned long long)wst, bound); \
	stress_expect(&st, name, want, wst <= (bound), det)
	CASE("meter: D+1 at once, then one per T", 1, m_ok, 3);
	CASE("meter: D+2 within T", 0, m_burst, 3);
	CASE("meter: excess after an idle", 0, m_late, 3);
	CASE("shaper: slots T apart", 1, s_ok, 1);
	CASE("shaper: two slots T-1 apart", 0, s_close, 1);
	CASE("shaper: one slot given twice", 0, s_same, 1);
#undef CASE
#define CASE(name, want, expr, s)                                                      \
	bad = expr;                                                                    \
	snprintf(det, sizeof(det), "breaks=%llu", (unsigned long long)bad);            \
	stress_expect(&st, name, want, bad == 0, det)
	CASE("shaper: delays within max", 1, delays_over(s_ok, 3, 50, &longest), s_ok);
	CASE("shaper: a delay of max+1", 0, delays_over(s_delay, 2, 50, &longest), s_delay);
	CASE("shaper: one thread's slots in order", 1, fifo_breaks(s_ok, 3, 10), s_ok);
	CASE("shaper: a later booking, earlier slot", 0, fifo_breaks(f_back, 2, 10), f_back);
	CASE("shaper: a later booking, slot T-1 after", 0, fifo_breaks(f_close, 2, 10), f_close);
#undef CASE
	return stress_self_report(&st);
}

int main(int argc, char **argv)
{
	struct stress_opts o = { .algo = "leaky" };
	stress_parse(argc, argv, &o, usage, opt);
	if (o.self_test)
		return self_test();
	o.mode = mode;
	shaper = strcmp(mode, "shaper") == 0;
	if (max_delay_us > 4000000)
		stress_die("--max-delay-us: at most 4000000 (delays are recorded in 32 bits)");
	stress_clock_start(&o);
	/* A shaper's interval must be at least the clock's step (leaky.h,
	 * LIMITS): on a coarse clock the default rate is one per step. */
	uint64_t step = sluice_clock_resolution_ns(o.clock);
	if (shaper && !rate_given && step > 1000000000ULL / rate)
		rate = 1000000000ULL / step;
	sluice_leaky_config_t c = { .rate = rate, .period_ns = 1000000000ULL,
		                    .mode = shaper ? SLUICE_LEAKY_SHAPER : SLUICE_LEAKY_METER,
		                    .depth = shaper ? 0 : depth,
		                    .max_delay_ns = shaper ? max_delay_us * 1000 : 0,
		                    .clock = o.clock };
	stress_check_init("sluice_leaky_init", sluice_leaky_init(&leaky, &c));
	interval = sluice_leaky_interval_ns(&leaky);
	uint64_t bound = shaper ? 1 : depth + 1;
	n_max = bound < 3 ? bound : 3;

	size_t caps[STRESS_STREAMS] = {
		stress_cap((double)bound + (o.seconds + 2) * 1e9 / (double)interval), 0
	};
	struct stress_worker *w = stress_run(&o, shaper ? step_shaper : step_meter, caps);
	stress_clock_stop(&o);

	uint64_t fifo = 0, late = 0, longest = 0;
	if (shaper)
		for (int i = 0; i < o.threads; i++)
			fifo += fifo_breaks(w[i].buf[0].rec, w[i].buf[0].len, interval);
	size_t n;
	uint64_t admitted;
	int incomplete = 0;
	struct stress_rec *all = stress_merge(&o, w, 0, &n, &admitted, &incomplete);
	if (shaper)
		late = delays_over(all, n, max_delay_us * 1000, &longest);
	uint64_t worst = stress_worst_conform(all, n, interval, 1);
	char extra[128], ws[32], bs[32];
	int len = snprintf(extra, sizeof(extra), " interval_ns=%llu", (unsigned long long)interval);
	if (shaper)
		snprintf(extra + len, sizeof(extra) - (size_t)len,
		         " longest_delay_ns=%llu delays_over=%llu fifo_breaks=%llu",
		         (unsigned long long)longest, (unsigned long long)late,
		         (unsigned long long)fifo);
	snprintf(ws, sizeof(ws), "%llu", (unsigned long long)worst);
	snprintf(bs, sizeof(bs), "%llu", (unsigned long long)bound);
	int rc = stress_report(&o, stress_decisions(w, o.threads), admitted, extra, ws, bs,
	                       worst <= bound && late == 0 && fifo == 0, incomplete);
	free(all);
	stress_free(w, o.threads);
	sluice_leaky_destroy(&leaky);
	return rc;
}
