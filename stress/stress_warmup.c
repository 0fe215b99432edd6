/* SPDX-License-Identifier: MIT */
/*
 * stress_warmup - many threads, a real clock, one warm-up limiter, with
 * idle phases so it cools down and warms up again many times; verify
 * warmup.h's GUARANTEE over every admission recorded.
 *
 *   stress_warmup [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]
 *                 [--rate=R] [--warmup-us=P] [--active-ms=A] [--idle-ms=Z]
 *                 [--self-test]
 *
 * An admission's START is now_ns + delay_ns; its TICKET (the next free
 * ticket it booked) is now_ns + reset_ns.  Checked, as warmup.h states them
 * (I = 1 s / R, M = P / I, L = sluice_warmup_limit()):
 *   chain  admissions in start order each start at or after the ticket the
 *          one before booked ("start(k+1) >= start(k) + cost(k)"; the starts
 *          strictly increase in booking order, so start order is booking
 *          order, and any break of the chain shows as a pair out of it);
 *   cost   every cost (ticket - start) is at least n I;
 *   (a)    the starts inside any interval of length D total at most
 *          D / I + L permits: worst = max (permits - floor(D / I)) over every
 *          interval (stress_worst_conform), bound = L: the printed worst/bound;
 *   (b)    after init, or once the previous ticket lies P or more before a
 *          start (an idle limiter: fully cold), the starts within D <= P of
 *          that one total at most X(D) + L, X(D) = M (3 - sqrt(9 - 8 D/P)) / 4;
 *   (b')   the same without the last request's permits: the permits of the
 *          starts BEFORE one at distance D from the cold start are at most
 *          X(D).  This is what the chain gives when each cost is at least
 *          the area under the throttling curve (the header's definition of
 *          cost, rounded up), so a ramp that is too cheap fails here even
 *          when L makes (a) and (b) slack.
 * Workers acquire (tryAcquire) n = 1..3, or, one decision in four, reserve
 * with a delay of at most 3 I.  Every worker sleeps through the idle part
 * of a common A + Z cycle (Z > P), so each cycle starts cold.
 *
 * Defaults: R = 20,000 per second (I = 50 us), P = 5 ms (M = L = 100),
 * A = 20 ms, Z = 10 ms: about 33 cold starts a second.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stress_common.h"


__extension__ typedef unsigned __int128 u128;

static uint64_t n_max; /* largest n asked: stress_n_max() */

static const char usage[] =
	"usage: stress_warmup [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]\n"
	"                     [--rate=R (per second)] [--warmup-us=P] [--active-ms=A]\n"
	"                     [--idle-ms=Z] [--self-test]\n";

static uint64_t rate = 20000, warmup_us = 5000, active_ms = 20, idle_ms = 10;
static uint64_t period = 1000000000ULL, max_delay, cycle_ns, t0;
static sluice_warmup_t warm;

static const struct stress_u64_opt options[] = {
	{ "rate", &rate },
	{ "warmup-us", &warmup_us },
	{ "active-ms", &active_ms },
	{ "idle-ms", &idle_ms },
	{ NULL, NULL },
};

static int opt(const char *key, const char *val)
{
	return stress_u64_opts(options, key, val);
}

/* Sleep through the idle part of the cycle (checked every 64 decisions:
 * a monotonic read per decision would dominate a refusal). */
static void idle_if_due(struct stress_worker *w)
{
	if (w->decisions % 64)
		return;
	uint64_t phase = (sluice_clock_monotonic_ns() - t0) % cycle_ns;
	uint64_t active = active_ms * 1000000ULL;
	if (phase < active)
		return;
	uint64_t left = cycle_ns - phase;
	struct timespec ts = { (time_t)(left / 1000000000ULL), (long)(left % 1000000000ULL) };
	nanosleep(&ts, NULL);
}

static int step(struct stress_worker *w)
{
	idle_if_due(w);
	uint64_t x = stress_rand(w);
	uint64_t n = 1 + x % n_max;
	sluice_decision_t d;
	int rc = (x >> 20) % 4 == 0 ? sluice_warmup_reserve(&warm, n, max_delay, &d)
	                            : sluice_warmup_acquire(&warm, n, &d);
	if (rc < 0)
		return stress_fail(w, rc);
	if (rc != 1)
		return 0;
	/* cost = ticket - start <= n I + P/2 + rounding < 2^32 for P <= 1 s;
	 * saturating could only make the chain check weaker, never fail it */
	uint64_t cost = d.reset_ns - d.delay_ns;
	return !stress_record(w, 0, d.now_ns + d.delay_ns, n,
	                      cost > UINT32_MAX ? UINT32_MAX : (uint32_t)cost);
}

struct wcheck {
	uint64_t chain, cost, cold_starts, cold_b, cold_tight;
	double cold_worst; /* max over cold segments of permits - X(D), (b)   */
	double cold_slack; /* min of X(D) - permits before, D > 0, (b'): how
	                    * close the ramp came to the curve (-1: no point) */
};

/* X(D) = M (3 - sqrt(9 - 8 D / P)) / 4, D <= P */
static double x_of(double m, double p, double dd)
{
	return m * (3.0 - sqrt(9.0 - 8.0 * dd / p)) / 4.0;
}

/*
 * The checks above, over @r sorted by start (aux = cost).  I = @num / @den
 * ns; @p = P ns; @m = M; @l = L.
 */
static struct wcheck check(const struct stress_rec *r, size_t n, uint64_t num, uint64_t den,
                           uint64_t p, double m, uint64_t l)
{
	struct wcheck c = { 0, 0, 0, 0, 0, 0.0, -1.0 };
	for (size_t k = 0; k < n; k++) {
		/* cost >= n I  <=>  cost den >= n num (exact) */
		if ((u128)r[k].aux * den < (u128)r[k].n * num)
			c.cost++;
		uint64_t prev_ticket = k ? r[k - 1].t + r[k - 1].aux : 0;
		if (k && r[k].t < prev_ticket)
			c.chain++;
		if (k && (r[k].t < prev_ticket || r[k].t - prev_ticket < p))
			continue; /* not a cold start */
		/* cold: the starts within P of this one */
		c.cold_starts++;
		uint64_t before = 0;
		for (size_t j = k; j < n && r[j].t - r[k].t <= p; j++) {
			double x = x_of(m, (double)p, (double)(r[j].t - r[k].t));
			double slack = 1e-9 * m; /* X's rounding, not the limiter's */
			if ((double)before > x + slack)
				c.cold_tight++;
			if (j > k && (c.cold_slack < 0 || x - (double)before < c.cold_slack))
				c.cold_slack = x - (double)before;
			before += r[j].n;
			if ((double)before - x > c.cold_worst)
				c.cold_worst = (double)before - x;
			if ((double)before > x + (double)l + slack)
				c.cold_b++;
		}
	}
	return c;
}

/* I = 10 ns, P = 100 ns: M = L = 10.  Cold costs (n = 1) are the areas
 * under the curve 3I -> I over [M - k, M - k + 1]: 28, 24, 20, 16, 12, then
 * I = 10 once at the threshold M/2: the exact ramp meets X(D) at every step. */
static int self_test(void)
{
	struct stress_selftest st = { "warmup", 0, 0 };
	static const struct stress_rec ramp[] = {
		{ 0, 1, 28 },  { 28, 1, 24 },  { 52, 1, 20 },  { 72, 1, 16 },  { 88, 1, 12 },
		{ 100, 1, 10 }, { 110, 1, 10 }, { 120, 1, 10 },
		/* idle P after the ticket at 130: cold again */
		{ 230, 1, 28 }, { 258, 1, 24 }, { 282, 1, 20 }
	};
	/* one ns too cheap at the first step: chain and cost still hold */
	static const struct stress_rec cheap[] = { { 0, 1, 27 }, { 27, 1, 24 }, { 51, 1, 20 } };
	/* the stable rate from cold: chain and cost hold, the ramp does not */
	static const struct stress_rec stable[] = { { 0, 1, 10 }, { 10, 1, 10 }, { 20, 1, 10 } };
	/* idle P - 1 only: not cold, so stable costs are allowed */
	static const struct stress_rec warm_ok[] = { { 0, 1, 28 },  { 28, 1, 24 },  { 52, 1, 20 },
		                                     { 171, 1, 10 }, { 181, 1, 10 } };
	/* after an idle of exactly P: cold, so stable costs are not */
	static const struct stress_rec rewarm[] = { { 0, 1, 28 },  { 28, 1, 24 },  { 52, 1, 20 },
		                                    { 172, 1, 10 }, { 182, 1, 10 } };
	static const struct stress_rec chain[] = { { 0, 1, 28 }, { 27, 1, 24 } };
	static const struct stress_rec cost[] = { { 0, 2, 19 }, { 200, 1, 28 } };
	char det[128];
	struct wcheck c;
#define CASE(name, want, s)                                                               \
	c = check(s, sizeof(s) / sizeof(s[0]), 10, 1, 100, 10.0, 10);                      \
	snprintf(det, sizeof(det), "chain=%llu cost=%llu cold=%llu b=%llu b'=%llu",        \
	         (unsigned long long)c.chain, (unsigned long long)c.cost,                 \
	         (unsigned long long)c.cold_starts, (unsigned long long)c.cold_b,         \
	         (unsigned long long)c.cold_tight);                                       \
	stress_expect(&st, name, want, !c.chain && !c.cost && !c.cold_b && !c.cold_tight, det)
	CASE("exact cold ramps (Guava's costs)", 1, ramp);
	CASE("ramp 1 ns too cheap", 0, cheap);
	CASE("stable rate from cold", 0, stable);
	CASE("stable rate after idle < P", 1, warm_ok);
	CASE("stable rate after idle = P", 0, rewarm);
	CASE("start before the last ticket", 0, chain);
	CASE("cost below n I", 0, cost);
#undef CASE
	/* (b) with L: 10 + 6 permits within 50 ns of a cold start > X(50) + L */
	static const struct stress_rec b_bad[] = { { 0, 10, 100 }, { 50, 6, 60 } };
	c = check(b_bad, 2, 10, 1, 100, 10.0, 10);
	snprintf(det, sizeof(det), "b=%llu cold_worst=%.3f", (unsigned long long)c.cold_b,
	         c.cold_worst);
	stress_expect(&st, "(b) X(D)+L+1 after a cold start", 0, !c.cold_b, det);
	/* (a) with L = 10 and I = 10/3 ns (a rational interval) */
	static const struct stress_rec a_ok[] = { { 0, 10, 0 }, { 10, 3, 0 } };
	static const struct stress_rec a_bad[] = { { 0, 10, 0 }, { 9, 3, 0 } };
	uint64_t wst = stress_worst_conform(a_ok, 2, 10, 3);
	snprintf(det, sizeof(det), "worst=%llu bound=10", (unsigned long long)wst);
	stress_expect(&st, "(a) L, then 3 after 3 I", 1, wst <= 10, det);
	wst = stress_worst_conform(a_bad, 2, 10, 3);
	snprintf(det, sizeof(det), "worst=%llu bound=10", (unsigned long long)wst);
	stress_expect(&st, "(a) L, then 3 after 3 I - 1 ns", 0, wst <= 10, det);
	return stress_self_report(&st);
}

int main(int argc, char **argv)
{
	struct stress_opts o = { .algo = "warmup", .mode = "acquire+reserve" };
	stress_parse(argc, argv, &o, usage, opt);
	if (o.self_test)
		return self_test();
	uint64_t p = warmup_us * 1000;
	if (p > 1000000000ULL || active_ms == 0 || idle_ms * 1000000ULL <= p)
		stress_die("--warmup-us: at most 10^6; --active-ms > 0; --idle-ms above P");
	cycle_ns = (active_ms + idle_ms) * 1000000ULL;
	stress_clock_start(&o);
	sluice_warmup_config_t c = { .rate = rate, .period_ns = period, .warmup_ns = p,
		                     .clock = o.clock };
	stress_check_init("sluice_warmup_init", sluice_warmup_init(&warm, &c));
	n_max = stress_n_max(sluice_warmup_limit(&warm));
	double interval = (double)period / (double)rate;
	double m = (double)p / interval;
	max_delay = (uint64_t)(3 * interval);
	t0 = sluice_clock_monotonic_ns();

	/* (a) over the run: D / I + L */
	size_t caps[STRESS_STREAMS] = {
		stress_cap((o.seconds + 1) * 1e9 / interval + (double)sluice_warmup_limit(&warm)), 0
	};
	struct stress_worker *w = stress_run(&o, step, caps);
	stress_clock_stop(&o);

	size_t n;
	uint64_t admitted;
	int incomplete = 0;
	struct stress_rec *all = stress_merge(&o, w, 0, &n, &admitted, &incomplete);
	struct wcheck k = check(all, n, period, rate, p, m, sluice_warmup_limit(&warm));
	uint64_t worst = stress_worst_conform(all, n, period, rate);
	char extra[256], ws[32], bs[32];
	snprintf(extra, sizeof(extra),
	         " chain_breaks=%llu cost_breaks=%llu cold_starts=%llu cold_worst=%.3f "
	         "cold_breaks=%llu cold_slack=%.6f cold_tight_breaks=%llu",
	         (unsigned long long)k.chain, (unsigned long long)k.cost,
	         (unsigned long long)k.cold_starts, k.cold_worst, (unsigned long long)k.cold_b,
	         k.cold_slack, (unsigned long long)k.cold_tight);
	snprintf(ws, sizeof(ws), "%llu", (unsigned long long)worst);
	snprintf(bs, sizeof(bs), "%llu", (unsigned long long)sluice_warmup_limit(&warm));
	int ok = worst <= sluice_warmup_limit(&warm) && !k.chain && !k.cost && !k.cold_b && !k.cold_tight;
	int rc = stress_report(&o, stress_decisions(w, o.threads), admitted, extra, ws, bs, ok,
	                       incomplete);
	free(all);
	stress_free(w, o.threads);
	sluice_warmup_destroy(&warm);
	return rc;
}
