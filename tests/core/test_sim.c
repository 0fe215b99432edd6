/* SPDX-License-Identifier: MIT */
/*
 * test_sim.c - the simulator's pieces (tools/sim/), against numbers worked
 * out by hand.
 *
 * The simulator's value is that its numbers can be trusted, so each test
 * states a case small enough to compute on paper and checks the simulator
 * (driving the real limiters) gets exactly that: the fixed window's 2L
 * across an edge, the ring's 2L within W - W/N, the sliding log never
 * above L, the admitted counts of uniform traffic, the advisor's bucket
 * counts and bytes.  The worst-interval statistic is also checked against
 * brute force on random admissions, trace errors must name their line,
 * and the same seed must give the same run.  Nothing is timed.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/sim.h"

#define MS SIM_MS
#define SEC SIM_SEC

TestSuite(sim, .timeout = 60);

/* ---- helpers ------------------------------------------------------------- */

static sim_run_config_t base_config(sim_profile_t p, uint64_t rate_num, uint64_t rate_den,
                                    uint64_t duration)
{
	sim_run_config_t rc = {
		.traffic = { .profile = p, .start_ns = 0, .duration_ns = duration,
			     .rate_num = rate_num, .rate_den = rate_den, .permits = 1, .seed = 1 },
		.backoff_ns = 100 * MS,
		.bin_ns = 50 * MS,
		.max_events = 10000000,
		.max_bins = SIM_MAX_BINS,
	};
	return rc;
}

/* L at W - 1 ms, L at W + 1 ms, then `knock` x L/W until `duration` */
static sim_run_config_t boundary(uint64_t L, uint64_t W, uint64_t knock, uint64_t duration)
{
	sim_run_config_t rc = base_config(SIM_BOUNDARY, knock * L, W, duration);
	rc.traffic.burst = L;
	rc.traffic.edge_ns = W;
	rc.traffic.gap_ns = 2 * MS;
	return rc;
}

/* run @spec on @rc; the admissions come back sorted for sim_worst_in */
static void run(const sim_run_config_t *rc, const char *spec, uint64_t L, uint64_t W,
                sim_result_t *r)
{
	sim_algo_t a;
	char err[256];
	cr_assert_eq(sim_algo_parse(spec, L, W, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(sim_run(rc, &a, r, err, sizeof(err)), 0, "%s: %s", spec, err);
	cr_assert_eq(r->admitted + r->rejected, r->offered, "%s: every request decided", spec);
	sim_sort_events(r->adm, r->nadm);
}

static uint64_t worst(const sim_result_t *r, uint64_t len)
{
	return sim_worst_in(r->adm, r->nadm, len).count;
}

/* most permits in any run of @n consecutive aligned buckets of @width */
static uint64_t worst_aligned(const sim_result_t *r, uint64_t width, uint64_t n)
{
	uint64_t last = r->nadm ? r->adm[r->nadm - 1].t / width + 1 : 0, best = 0;
	uint64_t *count = calloc(last + 1, sizeof(uint64_t));
	cr_assert_not_null(count);
	for (size_t i = 0; i < r->nadm; i++)
		count[r->adm[i].t / width] += r->adm[i].n;
	for (uint64_t e = 0; e <= last; e++) {
		uint64_t sum = 0;
		for (uint64_t k = 0; k < n && k <= e; k++)
			sum += count[e - k];
		if (sum > best)
			best = sum;
	}
	free(count);
	return best;
}

/* ---- parse.c ------------------------------------------------------------- */

/* one test, not a ParameterizedTest: under TSan each Criterion case is a
 * process that costs more than the whole table */
Test(sim, durations)
{
	static const struct {
		const char *text;
		uint64_t ns;
		int ok;
	} cases[] = {
		{ "1s", SEC, 1 },          { "1", SEC, 1 },          { "1.5", 1500 * MS, 1 },
		{ "250ms", 250 * MS, 1 },  { "0.1s", 100 * MS, 1 },  { "50us", 50000, 1 },
		{ "7ns", 7, 1 },           { "2min", 120 * SEC, 1 }, { "1h", 3600 * SEC, 1 },
		{ "1.000000001", SEC + 1, 1 },
		{ "1700000000.25", 1700000000ULL * SEC + 250 * MS, 1 },
		{ "0", 0, 1 },             { "", 0, 0 },             { "s", 0, 0 },
		{ "-1s", 0, 0 },           { "1.5ns", 0, 0 },        { "1.0000000001", 0, 0 },
		{ "1x", 0, 0 },            { "1 s", 0, 0 },          { "1..2", 0, 0 },
		{ "18446744073.709551616", 0, 0 }, /* 2^64 ns */
		{ "18446744073.709551615", UINT64_MAX, 1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t ns = 12345;
		const char *e = sim_parse_duration(cases[i].text, &ns);
		if (cases[i].ok) {
			cr_assert_null(e, "'%s': %s", cases[i].text, e);
			cr_assert_eq(ns, cases[i].ns, "'%s' = %llu ns", cases[i].text,
			             (unsigned long long)ns);
		} else {
			cr_assert_not_null(e, "'%s' must be refused", cases[i].text);
		}
	}
}

Test(sim, ratios_and_rates)
{
	uint64_t n, d;
	cr_assert_null(sim_parse_ratio("2%", &n, &d));
	cr_assert(n == 1 && d == 50);
	cr_assert_null(sim_parse_ratio("0.5%", &n, &d));
	cr_assert(n == 1 && d == 200);
	cr_assert_null(sim_parse_ratio("0.02", &n, &d));
	cr_assert(n == 1 && d == 50);
	cr_assert_null(sim_parse_ratio("3%", &n, &d));
	cr_assert(n == 3 && d == 100);
	cr_assert_not_null(sim_parse_ratio("0%", &n, &d));
	cr_assert_not_null(sim_parse_ratio("2%%", &n, &d));
	cr_assert_not_null(sim_parse_ratio("-1%", &n, &d));

	/* rates: requests per ns as n / d */
	cr_assert_null(sim_parse_rate("200", 100, SEC, &n, &d));
	cr_assert(n == 1 && d == 5000000, "200/s: one per 5 ms");
	cr_assert_null(sim_parse_rate("5/ms", 100, SEC, &n, &d));
	cr_assert(n == 1 && d == 200000);
	cr_assert_null(sim_parse_rate("2x", 100, SEC, &n, &d));
	cr_assert(n == 1 && d == 5000000, "2x of 100/s is 200/s");
	cr_assert_null(sim_parse_rate("1.5x", 100, SEC, &n, &d));
	cr_assert(n == 3 && d == 20000000);
	cr_assert_null(sim_parse_rate("0", 100, SEC, &n, &d));
	cr_assert_eq(n, 0);
	cr_assert_not_null(sim_parse_rate("3q", 100, SEC, &n, &d));
	cr_assert_not_null(sim_parse_rate("3/fortnight", 100, SEC, &n, &d));

	char buf[32];
	cr_assert_str_eq(sim_format_duration(980 * MS, buf, sizeof(buf)), "980 ms");
	cr_assert_str_eq(sim_format_duration(1001 * MS, buf, sizeof(buf)), "1.001 s");
	cr_assert_str_eq(sim_format_duration(2500000, buf, sizeof(buf)), "2.5 ms");
	cr_assert_str_eq(sim_format_duration(7, buf, sizeof(buf)), "7 ns");
	cr_assert_str_eq(sim_format_duration(0, buf, sizeof(buf)), "0 ns");
}

/* ---- stats.c ------------------------------------------------------------- */

Test(sim, worst_interval_by_hand)
{
	/* half-open [s, s + 1 s): 0, 0.5, 0.999 and 1.0 never all fit */
	sim_event_t ev[] = {
		{ 1000 * MS, 1, 0 }, { 0, 1, 0 }, { 500 * MS, 1, 0 }, { 999 * MS, 1, 0 },
	};
	sim_sort_events(ev, 4);
	sim_worst_t w = sim_worst_in(ev, 4, SEC);
	cr_assert_eq(w.count, 3);
	cr_assert_eq(w.start_ns, 0, "the first interval holding 3 starts at 0");
	cr_assert_eq(sim_worst_in(ev, 4, SEC + 1).count, 4, "1 s + 1 ns holds all four");
	cr_assert_eq(sim_worst_in(ev, 4, 1 * MS).count, 1);
	cr_assert_eq(sim_worst_in(ev, 4, 1 * MS + 1).count, 2, "0.999 and 1.0 are 1 ms apart");
	cr_assert_eq(sim_worst_in(ev, 4, 0).count, 0);
	cr_assert_eq(sim_worst_in(ev, 0, SEC).count, 0);

	/* permits weigh; equal times count together; keys never mix */
	sim_event_t k[] = {
		{ 10, 5, 1 }, { 10, 2, 1 }, { 11, 1, 2 }, { 12, 4, 2 }, { 12, 4, 2 }, { 30, 1, 1 },
	};
	sim_sort_events(k, 6);
	w = sim_worst_in(k, 6, 5);
	cr_assert_eq(w.count, 9, "key 2: 1 + 4 + 4");
	cr_assert_eq(w.key, 2);
	cr_assert_eq(w.start_ns, 11);
	cr_assert_eq(sim_worst_in(k, 6, 1).count, 8, "key 2 at 12: 4 + 4 (key 1 has 7 at 10)");
	cr_assert_eq(sim_worst_in(k, 6, 100).count, 9, "key 1 totals 8, key 2 totals 9");
}

Test(sim, worst_interval_matches_brute_force)
{
	sim_rng_t rng;
	sim_rng_seed(&rng, 99);
	enum { N = 200 };
	for (int round = 0; round < 30; round++) {
		sim_event_t ev[N];
		uint64_t span = 1 + sim_rng_below(&rng, 500);
		for (int i = 0; i < N; i++)
			ev[i] = (sim_event_t){ .t = sim_rng_below(&rng, span),
				               .n = 1 + (uint32_t)sim_rng_below(&rng, 3),
				               .key = (uint32_t)sim_rng_below(&rng, 2) };
		sim_sort_events(ev, N);
		uint64_t len = 1 + sim_rng_below(&rng, span);
		/* every start from 0 to the last time, every key */
		uint64_t best = 0;
		for (uint64_t s = 0; s <= span; s++) {
			for (uint32_t key = 0; key < 2; key++) {
				uint64_t sum = 0;
				for (int i = 0; i < N; i++)
					if (ev[i].key == key && ev[i].t >= s && ev[i].t - s < len)
						sum += ev[i].n;
				if (sum > best)
					best = sum;
			}
		}
		cr_assert_eq(sim_worst_in(ev, N, len).count, best, "round %d, len %llu", round,
		             (unsigned long long)len);
	}
}

/* ---- algorithms on hand-computed traffic --------------------------------- */

Test(sim, fixed_window_boundary_burst_is_2L)
{
	/* L just before the edge at 1 s, L just after: a fixed window
	 * counts them in different windows and admits both */
	const uint64_t L = 100, W = SEC;
	sim_run_config_t rc = boundary(L, W, 0, 3 * SEC);
	sim_result_t r;
	run(&rc, "fixed", L, W, &r);
	cr_assert_eq(r.offered, 2 * L);
	cr_assert_eq(r.admitted, 2 * L);
	sim_worst_t w = sim_worst_in(r.adm, r.nadm, W);
	cr_assert_eq(w.count, 2 * L, "2L in an interval of W");
	cr_assert_eq(w.start_ns, W - MS);
	cr_assert_eq(worst(&r, 50 * MS), 2 * L, "... and in 50 ms");
	cr_assert_eq(worst(&r, 2 * MS), L, "the bursts are 2 ms apart: [s, s + 2 ms) holds one");
	cr_assert_eq(worst(&r, 2 * MS + 1), 2 * L);
	cr_assert_eq(worst_aligned(&r, W, 1), L, "yet every aligned window holds L");
	sim_result_free(&r);
}

Test(sim, sliding_log_never_above_L)
{
	const uint64_t L = 50, W = SEC;
	sim_run_config_t cfgs[5];
	cfgs[0] = boundary(L, W, 40, 3 * SEC);
	cfgs[1] = base_config(SIM_POISSON, 3 * L, W, 20 * SEC);
	cfgs[2] = base_config(SIM_ONOFF, 4 * L, W, 20 * SEC);
	cfgs[2].traffic.on_ns = W / 4;
	cfgs[2].traffic.off_ns = W / 2;
	cfgs[3] = base_config(SIM_RETRY, 12 * L, 10 * W, 20 * SEC);
	cfgs[3].retries = 4;
	cfgs[3].jitter = 1;
	cfgs[4] = base_config(SIM_UNIFORM, 7 * L, 3 * W, 20 * SEC);
	for (size_t i = 0; i < 5; i++) {
		sim_result_t r;
		run(&cfgs[i], "log", L, W, &r);
		cr_assert_leq(worst(&r, W), L, "profile %zu", i);
		cr_assert_geq(worst(&r, W), L, "profile %zu overloads the log: it reaches L", i);
		sim_result_free(&r);
	}
	/* the boundary burst, by hand: L at 0.999 s; refused until those
	 * leave at 1.999 s; the knocks (every 250 us from 1.001 s) then take
	 * L more from 1.999 s, and 4 from 2.999 s to the end at 3 s */
	sim_result_t r;
	sim_run_config_t rc = boundary(100, W, 40, 3 * SEC);
	run(&rc, "log", 100, W, &r);
	cr_assert_eq(r.admitted, 204);
	cr_assert_eq(r.adm[100].t, 1999 * MS, "the first admission after the burst");
	sim_result_free(&r);
}

Test(sim, ring_worst_case_is_2L_within_W_minus_width)
{
	/* window.h's worst case: L at the end of bucket 9 (0.999 s), then,
	 * once bucket 9 leaves at 1.9 s (bucket 19 opens), L again: the two
	 * groups are W - W/N apart, and [0.999 s, 1.999 s) holds both. */
	const uint64_t L = 100, W = SEC;
	sim_run_config_t rc = boundary(L, W, 40, 3 * SEC);
	sim_result_t r;
	run(&rc, "ring:buckets=10", L, W, &r);
	sim_worst_t w = sim_worst_in(r.adm, r.nadm, W);
	cr_assert_eq(w.count, 2 * L);
	cr_assert_eq(w.start_ns, W - MS);
	cr_assert_eq(r.adm[L - 1].t, W - MS, "the first burst is admitted whole");
	cr_assert_eq(r.adm[L].t, 1900 * MS, "nothing more until bucket 9 leaves the window");
	cr_assert_eq(worst_aligned(&r, W / 10, 10), L, "every 10 aligned buckets hold L");
	cr_assert_eq(r.admitted, 3 * L, "L per 1.9 s cycle: 0.999, 1.9, 2.9 s");
	sim_result_free(&r);

	/* N = 100: the first burst's bucket leaves at 1.99 s; the knocks the
	 * ring admitted meanwhile are spread, so the worst is under 2L */
	run(&rc, "ring:buckets=100", L, W, &r);
	cr_assert_eq(worst_aligned(&r, W / 100, 100), L);
	cr_assert_eq(r.adm[L].t, 1990 * MS, "nothing more until bucket 99 leaves at 1.99 s");
	/* then 40 knocks per 10 ms bucket: [0.999 s, 1.999 s) holds the
	 * burst and the 36 knocks from 1.99 s to 1.99875 s */
	cr_assert_eq(worst(&r, W), L + 36);
	sim_result_free(&r);
}

Test(sim, gcra_bound_is_burst_plus_rate)
{
	const uint64_t L = 100, W = SEC;
	sim_run_config_t rc = boundary(L, W, 40, 3 * SEC);
	sim_result_t r;
	run(&rc, "gcra", L, W, &r); /* b = L */
	cr_assert_leq(worst(&r, W), 2 * L, "b + W/T");
	cr_assert_geq(worst(&r, W), 2 * L - 1, "the attacker gets (almost) all of it");
	sim_result_free(&r);
	run(&rc, "gcra:burst=1", L, W, &r);
	cr_assert_leq(worst(&r, W), L + 1);
	cr_assert_leq(worst(&r, 10 * MS), 1, "b = 1: one per T = 10 ms");
	sim_result_free(&r);
}

Test(sim, uniform_traffic_admitted_counts)
{
	/* 200/s for 5 s against 100 per s: one request every 5 ms */
	const uint64_t L = 100, W = SEC;
	sim_run_config_t rc = base_config(SIM_UNIFORM, 2 * L, W, 5 * SEC);
	static const char *const exact[] = { "fixed", "ring:buckets=10", "log" };
	for (size_t i = 0; i < 3; i++) {
		sim_result_t r;
		run(&rc, exact[i], L, W, &r);
		cr_assert_eq(r.offered, 1000, "%s", exact[i]);
		cr_assert_eq(r.admitted, 500, "%s: L per W", exact[i]);
		cr_assert_eq(worst(&r, W), L, "%s: evenly spaced traffic never passes L", exact[i]);
		sim_result_free(&r);
	}
	/* the fixed window admits the first half of each second */
	sim_result_t r;
	run(&rc, "fixed", L, W, &r);
	for (size_t b = 0; b < r.nbins; b++)
		cr_assert_eq(r.bin_admitted[b], (b % 20) < 10 ? 10 : 0, "bin %zu", b);
	sim_result_free(&r);

	/* at half the rate, nothing is refused by any rate limiter */
	rc = base_config(SIM_UNIFORM, L, 2 * W, 5 * SEC);
	static const char *const all[] = { "fixed",       "ring",  "ring:buckets=100",
		                           "gcra",        "leaky", "leaky:mode=shaper",
		                           "log",         "decay", "inflight" };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		run(&rc, all[i], L, W, &r);
		cr_assert_eq(r.offered, 250, "%s", all[i]);
		cr_assert_eq(r.rejected, 0, "%s refused at half its rate", all[i]);
		sim_result_free(&r);
	}
}

Test(sim, inflight_hold_of_W_is_L_in_any_W)
{
	/* each admission holds its slot for exactly W, and a release at t
	 * comes before a request at t: so [t, t + W) never holds more than K */
	const uint64_t L = 20, W = SEC;
	sim_run_config_t rc = base_config(SIM_POISSON, 5 * L, W, 30 * SEC);
	sim_result_t r;
	run(&rc, "inflight", L, W, &r);
	cr_assert_eq(worst(&r, W), L);
	sim_result_free(&r);
	rc = base_config(SIM_UNIFORM, 2 * L, W, 3 * SEC); /* one every 25 ms */
	run(&rc, "inflight", L, W, &r);
	cr_assert_eq(r.admitted, 60, "released at W, taken again at once: 20 per second");
	cr_assert_eq(r.adm[20].t, SEC, "the slot freed at 1 s serves the request at 1 s");
	sim_result_free(&r);
}

Test(sim, shaper_releases_one_per_interval)
{
	const uint64_t L = 100, W = SEC;
	sim_run_config_t rc = boundary(L, W, 40, 3 * SEC);
	sim_result_t r;
	run(&rc, "leaky:mode=shaper", L, W, &r);
	for (size_t i = 1; i < r.nadm; i++)
		cr_assert_geq(r.adm[i].t - r.adm[i - 1].t, W / L, "slots T apart (%zu)", i);
	cr_assert_leq(worst(&r, W), L, "paced: W/T = L in any [s, s + W)");
	sim_result_free(&r);
}

/* ---- retries, keys, determinism ------------------------------------------ */

Test(sim, retry_storm_accounting)
{
	const uint64_t L = 50, W = SEC;
	sim_run_config_t rc = base_config(SIM_RETRY, 3 * L, 2 * W, 20 * SEC);
	rc.retries = 3;
	sim_result_t r;
	run(&rc, "fixed", L, W, &r);
	cr_assert_eq(r.offered, r.clients + r.retried);
	cr_assert_gt(r.retried, 0);
	cr_assert_gt(r.gave_up, 0);
	cr_assert_leq(r.gave_up, r.clients);
	/* every refused request was retried, gave up, or was cut at the end */
	cr_assert_eq(r.rejected, r.retried + r.cut + r.gave_up);
	uint64_t with = r.offered;
	sim_result_free(&r);
	rc.retries = 0;
	run(&rc, "fixed", L, W, &r);
	cr_assert_eq(r.retried, 0);
	cr_assert_eq(r.offered, r.clients);
	cr_assert_gt(with, r.offered, "retries add load: the storm");
	sim_result_free(&r);
}

static void read_trace(const char *text, sim_trace_t *t, char *err, size_t len, int expect)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	cr_assert_not_null(f);
	int rc = sim_trace_read(f, "trace", t, err, len);
	fclose(f);
	cr_assert_eq(rc, expect, "%s", rc ? err : "(parsed)");
}

Test(sim, per_key_limiters)
{
	/* two keys, 2L each at one instant: one limiter for both admits L,
	 * one per key admits L each, and the worst key holds L */
	char text[4096] = "", err[256];
	size_t off = 0;
	for (int i = 0; i < 20; i++)
		off += (size_t)snprintf(text + off, sizeof(text) - off, "1.5 %s\n",
		                        i % 2 ? "bob" : "alice");
	sim_trace_t t;
	read_trace(text, &t, err, sizeof(err), 0);
	sim_run_config_t rc = base_config(SIM_TRACE, 0, 1, 1);
	rc.traffic.trace = &t;
	rc.traffic.start_ns = t.ev[0].t;
	sim_result_t r;
	run(&rc, "log", 5, SEC, &r);
	cr_assert_eq(r.admitted, 5);
	sim_result_free(&r);
	rc.per_key = 1;
	run(&rc, "log", 5, SEC, &r);
	cr_assert_eq(r.admitted, 10);
	cr_assert_eq(r.keys, 2);
	cr_assert_eq(worst(&r, SEC), 5, "per key");
	sim_result_free(&r);
	sim_trace_free(&t);
}

static void same(const sim_result_t *a, const sim_result_t *b)
{
	cr_assert_eq(a->offered, b->offered);
	cr_assert_eq(a->admitted, b->admitted);
	cr_assert_eq(a->retried, b->retried);
	cr_assert_eq(a->nadm, b->nadm);
	cr_assert_eq(memcmp(a->adm, b->adm, a->nadm * sizeof(*a->adm)), 0);
	cr_assert_eq(a->nbins, b->nbins);
	cr_assert_eq(memcmp(a->bin_offered, b->bin_offered, a->nbins * sizeof(uint64_t)), 0);
}

Test(sim, same_seed_same_run)
{
	const uint64_t L = 50, W = SEC;
	sim_run_config_t rc = base_config(SIM_RETRY, 2 * L, W, 10 * SEC);
	rc.retries = 4;
	rc.jitter = 1;
	rc.traffic.seed = 7;
	sim_result_t a, b, c;
	run(&rc, "ring", L, W, &a);
	run(&rc, "ring", L, W, &b);
	same(&a, &b);
	rc.traffic.seed = 8;
	run(&rc, "ring", L, W, &c);
	cr_assert_neq(a.clients, c.clients, "another seed, other arrivals");
	cr_assert(a.nadm != c.nadm || memcmp(a.adm, c.adm, a.nadm * sizeof(*a.adm)) != 0,
	          "another seed, other admissions");
	sim_result_free(&a);
	sim_result_free(&b);
	sim_result_free(&c);

	/* the first attempts do not depend on the algorithm */
	rc.traffic.seed = 7;
	run(&rc, "fixed", L, W, &a);
	run(&rc, "log", L, W, &b);
	cr_assert_eq(a.clients, b.clients);
	sim_result_free(&a);
	sim_result_free(&b);
}

/* ---- trace.c ------------------------------------------------------------- */

Test(sim, trace_parses_and_sorts)
{
	sim_trace_t t;
	char err[256];
	read_trace("# time key permits\n"
	           "0.5 alice\n"
	           "250ms bob 3   # a comment\n"
	           "\n"
	           "0.25,alice,2\n"
	           "1s,,4\n"
	           "\t2 -  \r\n",
	           &t, err, sizeof(err), 0);
	cr_assert_eq(t.n, 5);
	cr_assert_eq(t.nkeys, 3);
	cr_assert_str_eq(t.keys[1], "alice");
	cr_assert_str_eq(t.keys[2], "bob");
	cr_assert_eq(t.unsorted, 2);
	sim_event_t want[] = {
		{ 250 * MS, 3, 2 }, /* equal times keep file order */
		{ 250 * MS, 2, 1 },
		{ 500 * MS, 1, 1 },
		{ SEC, 4, 0 },
		{ 2 * SEC, 1, 0 },
	};
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(t.ev[i].t, want[i].t, "event %d", i);
		cr_assert_eq(t.ev[i].n, want[i].n, "event %d", i);
		cr_assert_eq(t.ev[i].key, want[i].key, "event %d", i);
	}
	sim_trace_free(&t);
}

struct bad_trace {
	char text[400];
	char want[80]; /* the message starts with this */
	char why[48];  /* and contains this */
};

ParameterizedTestParameters(sim, trace_errors_name_the_line)
{
	static struct bad_trace cases[] = {
		{ "0.1\n0.2 a 0\n", "trace:2:7: bad permits '0'", "1..4294967295" },
		{ "# c\n\n1.5ms\nabc\n", "trace:4:1: bad time 'abc'", "not a number" },
		{ "1 a 2 3\n", "trace:1:7: too many fields", "TIME [KEY [PERMITS]]" },
		{ "1\n2\n3,a,2,3\n", "trace:3:7: too many fields", "" },
		{ "1\n-1\n", "trace:2:1: bad time '-1'", "negative" },
		{ "1.0000000001\n", "trace:1:1: bad time", "not a whole number of ns" },
		{ "1\n1.5ns\n", "trace:2:1: bad time", "whole number of ns" },
		{ "99999999999999999999\n", "trace:1:1: bad time", "out of range (above 2^64 - 1 ns)" },
		{ "1 a 4294967296\n", "trace:1:5: bad permits", "1..4294967295" },
		{ "1 a x\n", "trace:1:5: bad permits 'x'", "" },
		{ "1 a 2\n2 b -3\n", "trace:2:5: bad permits '-3'", "" },
		{ "1 a\n,a\n", "trace:2:1: bad time ''", "empty" },
		{ "1\n2 k 3\n4h5\n", "trace:3:1: bad time '4h5'", "unknown unit" },
		{ "\n# only comments\n", "trace: no requests", "2 lines" },
		{ "", "trace: no requests", "0 lines" },
		{ "1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
		  "trace:1:3: key longer than 255 bytes", "" },
	};
	return cr_make_param_array(struct bad_trace, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct bad_trace *c, sim, trace_errors_name_the_line)
{
	sim_trace_t t;
	char err[256];
	read_trace(c->text, &t, err, sizeof(err), -1);
	cr_assert_eq(strncmp(err, c->want, strlen(c->want)), 0, "got \"%s\", want \"%s...\"", err,
	             c->want);
	cr_assert_not_null(strstr(err, c->why), "got \"%s\", want \"%s\" in it", err, c->why);
	cr_assert_null(t.ev, "nothing is kept");
}

Test(sim, trace_nul_byte_is_an_error)
{
	static const char text[] = "1\n2\0junk\n";
	FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");
	cr_assert_not_null(f);
	sim_trace_t t;
	char err[256];
	cr_assert_eq(sim_trace_read(f, "trace", &t, err, sizeof(err)), -1);
	fclose(f);
	cr_assert_str_eq(err, "trace:2:2: NUL byte in the line");
}

Test(sim, trace_parse_buffer_is_the_file_parser)
{
	/* the buffer parser (what fuzz/fuzz_sim_trace.c drives) reads exactly
	 * what the file parser reads: NULs are errors, the last line needs no
	 * newline, and the columns point at the field */
	static const char text[] = "2 bob 3\n1,alice\n\n3";
	sim_trace_t t;
	char err[256];
	cr_assert_eq(sim_trace_parse(text, sizeof(text) - 1, "buf", &t, err, sizeof(err)), 0,
	             "%s", err);
	cr_assert_eq(t.n, 3);
	cr_assert_eq(t.ev[0].t, SEC);
	cr_assert_eq(t.ev[0].key, 2);
	cr_assert_eq(t.ev[2].t, 3 * SEC);
	cr_assert_eq(t.unsorted, 1);
	sim_trace_free(&t);
	static const char nul[] = "1\n2 a\0b\n";
	cr_assert_eq(sim_trace_parse(nul, sizeof(nul) - 1, "buf", &t, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "buf:2:4: NUL byte in the line");
	cr_assert_null(t.ev);
	cr_assert_eq(sim_trace_parse("1\n  \t 5q k\n", 11, "buf", &t, err, sizeof(err)), -1);
	cr_assert_eq(strncmp(err, "buf:2:5: bad time '5q'", 22), 0, "%s", err);
	cr_assert_eq(sim_trace_parse("", 0, "buf", &t, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "buf: no requests (0 lines, all blank or comments)");
}

/* ---- near 2^64: no sum wraps, no bin count overflows (issue 10, item 10) --- */

/* a trace as a run: start and duration from sim_trace_span */
static void trace_config(const char *text, sim_trace_t *t, sim_run_config_t *rc)
{
	char err[256];
	read_trace(text, t, err, sizeof(err), 0);
	*rc = base_config(SIM_TRACE, 0, 1, 1);
	rc->traffic.trace = t;
	cr_assert_eq(sim_trace_span(t, "trace", &rc->traffic.start_ns, &rc->traffic.duration_ns,
	                            err, sizeof(err)),
	             0, "%s", err);
}

Test(sim, bin_count_does_not_wrap_near_2_64)
{
	/* 1e18-ns bins over a trace from 0 to 18446744073.7 s: the run spans
	 * 18446744073700000001 ns, 19 bins; (duration + bin - 1) wrapped to 0
	 * bins, and the request in bin 18 was written past the array */
	sim_trace_t t;
	sim_run_config_t rc;
	trace_config("0\n18446744073.7\n", &t, &rc);
	rc.bin_ns = 1000000000ULL * SEC;
	cr_assert_eq(rc.traffic.duration_ns, 18446744073700000001ULL);
	sim_result_t r;
	run(&rc, "fixed", 100, SEC, &r);
	cr_assert_eq(r.nbins, 19);
	cr_assert_eq(r.offered, 2);
	cr_assert_eq(r.bin_offered[0], 1);
	cr_assert_eq(r.bin_offered[18], 1);
	cr_assert_eq(r.bin_admitted[18], 1);
	sim_result_free(&r);
	sim_trace_free(&t);
}

Test(sim, shaper_slots_count_against_the_bin_cap)
{
	/* 20 requests at one instant to a shaper of 100/s: slots up to 190 ms
	 * later, inside its delay of W = 1 s.  With 1-ms bins the run needs
	 * ceil((1 ns + 1 s) / 1 ms) = 1001 bins: refused under a cap of 1000
	 * before anything is allocated (the shaper's late slots used to grow
	 * the bins past any cap: 2 GB for --bin 1ns), run under 1001 */
	char text[256] = "";
	for (int i = 0; i < 20; i++)
		strcat(text, "1\n");
	sim_trace_t t;
	sim_run_config_t rc;
	trace_config(text, &t, &rc);
	rc.bin_ns = MS;
	rc.max_bins = 1000;
	sim_algo_t a;
	char err[256];
	cr_assert_eq(sim_algo_parse("leaky:mode=shaper", 100, SEC, &a, err, sizeof(err)), 0);
	cr_assert_eq(sim_run_bins(&rc, &a), 1001);
	sim_result_t r;
	cr_assert_eq(sim_run(&rc, &a, &r, err, sizeof(err)), -1, "the cap holds");
	cr_assert_not_null(strstr(err, "--bin: 1001 intervals of 1 ms (the run and the shaper's"),
	                   "%s", err);
	cr_assert_null(r.bin_offered);
	rc.max_bins = 1001;
	run(&rc, "leaky:mode=shaper", 100, SEC, &r);
	cr_assert_eq(r.admitted, 20);
	cr_assert_leq(r.nbins, 1001);
	cr_assert_eq(r.bin_admitted[190], 1, "the last slot: 1 s + 190 ms");
	sim_result_free(&r);
	sim_trace_free(&t);
}

Test(sim, trace_at_2_64_minus_1_is_offered)
{
	/* a trace ending at 2^64 - 1 ns: its end, start + duration, is 2^64,
	 * which wrapped to 0 and every request was "after the end": 0 offered */
	sim_trace_t t;
	sim_run_config_t rc;
	trace_config("18446744073.709551614\n18446744073.709551615 k\n", &t, &rc);
	cr_assert_eq(rc.traffic.start_ns, UINT64_MAX - 1);
	cr_assert_eq(rc.traffic.duration_ns, 2);
	sim_result_t r;
	run(&rc, "fixed:limit=1", 1, SEC, &r);
	cr_assert_eq(r.offered, 2);
	cr_assert_eq(r.admitted, 1);
	cr_assert_eq(r.bin_offered[0], 2);
	sim_result_free(&r);
	/* a retry that would come after 2^64 - 1 is cut, not saturated to
	 * 2^64 - 1 where a real request is */
	rc.retries = 2;
	rc.backoff_ns = 1;
	run(&rc, "fixed:limit=1", 1, SEC, &r);
	cr_assert_eq(r.clients, 2);
	cr_assert_eq(r.cut, 1);
	cr_assert_eq(r.offered, 2, "the refused request at 2^64 - 1 has no later time");
	sim_result_free(&r);
	sim_trace_free(&t);
}

Test(sim, trace_of_2_64_ns_is_an_error)
{
	sim_trace_t t;
	char err[256];
	uint64_t start, duration;
	read_trace("# both ends of time\n0 a\n\n18446744073.709551615 b\n", &t, err, sizeof(err), 0);
	cr_assert_eq(sim_trace_span(&t, "trace", &start, &duration, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "trace:2 and line 4: the trace spans every ns from 0 to 2^64 - 1 "
	                      "(2^64 ns), one more than a run can hold");
	sim_trace_free(&t);
}

Test(sim, boundary_edge_near_2_64_does_not_wrap)
{
	/* the second burst, edge - gap/2 + gap, past 2^64 - 1: it wrapped to
	 * 1 ms and passed the "run ends before the second burst" check */
	sim_run_config_t rc = boundary(10, SEC, 0, UINT64_MAX);
	rc.traffic.edge_ns = UINT64_MAX - 500 * SIM_US;
	rc.bin_ns = 1ULL << 50;
	sim_algo_t a;
	char err[256];
	sim_result_t r;
	cr_assert_eq(sim_algo_parse("fixed", 10, SEC, &a, err, sizeof(err)), 0);
	cr_assert_eq(sim_run(&rc, &a, &r, err, sizeof(err)), -1);
	cr_assert_eq(strncmp(err, "--duration: the run ends before the second burst", 48), 0, "%s",
	             err);
	/* 1 ms earlier both bursts fit before 2^64 - 1 and are offered */
	rc.traffic.edge_ns = UINT64_MAX - 1500 * SIM_US;
	run(&rc, "fixed", 10, SEC, &r);
	cr_assert_eq(r.offered, 20);
	sim_result_free(&r);
}

Test(sim, onoff_phases_do_not_wrap)
{
	/* on 1 s at 200/s, then off for 18446744073 s: the next on phase
	 * starts after 2^64 - 1, so the run is 200 requests; phase + on + off
	 * wrapped to 0.29 s and the run started over */
	sim_run_config_t rc = base_config(SIM_ONOFF, 200, SEC, UINT64_MAX);
	rc.traffic.on_ns = SEC;
	rc.traffic.off_ns = 18446744073ULL * SEC;
	rc.bin_ns = 1ULL << 50;
	rc.max_events = 1000;
	sim_result_t r;
	run(&rc, "fixed", 100, SEC, &r);
	cr_assert_eq(r.offered, 200);
	sim_result_free(&r);
}

/* ---- algo.c -------------------------------------------------------------- */

Test(sim, algorithm_specs)
{
	sim_algo_t a;
	char err[256];
	cr_assert_eq(sim_algo_parse("ring:buckets=50,lease=8", 100, SEC, &a, err, sizeof(err)), 0);
	cr_assert_eq(a.cfg.algo, SLUICE_ALGO_WINDOW);
	cr_assert_eq(a.cfg.window.buckets, 50);
	cr_assert_eq(a.cfg.window.lease, 8);
	cr_assert_eq(a.cfg.window.limit, 100, "defaults from the policy");
	cr_assert_eq(sim_algo_parse("window", 100, SEC, &a, err, sizeof(err)), 0, "alias");
	cr_assert_eq(a.cfg.window.buckets, 10);
	cr_assert_eq(sim_algo_parse("gcra:burst=5,rate=100/2s", 100, SEC, &a, err, sizeof(err)), 0);
	cr_assert(a.cfg.gcra.burst == 5 && a.cfg.gcra.period_ns == 2 * SEC && a.cfg.gcra.rate == 100);
	/* the rules file's and nginx's rate spellings, and their messages */
	cr_assert_eq(sim_algo_parse("token_bucket:rate=0.5r/s,burst=2", 100, SEC, &a, err,
	                            sizeof(err)), 0, "%s", err);
	cr_assert(a.cfg.gcra.rate == 1 && a.cfg.gcra.period_ns == 2 * SEC);
	cr_assert_eq(sim_algo_parse("gcra:rate=10", 100, SEC, &a, err, sizeof(err)), -1);
	cr_assert(strstr(err, "rate=10: a rate needs a period: 10/s, 10r/s, 30r/m, 5/250ms"), "%s",
	          err);
	cr_assert_eq(sim_algo_parse("leaky:mode=shaper,delay=50ms", 100, SEC, &a, err, sizeof(err)), 0);
	cr_assert(a.shaper && a.cfg.leaky.max_delay_ns == 50 * MS && a.cfg.leaky.depth == 0);
	cr_assert_eq(sim_algo_parse("decay", 100, SEC, &a, err, sizeof(err)), 0);
	cr_assert_eq(a.cfg.decay.half_life_ns, 693147181, "W ln 2");

	static const struct {
		const char *spec, *why;
	} bad[] = {
		{ "bogus", "name 'bogus': unknown algorithm (one of:" },
		{ "ring:buckets=7", "SLUICE_EWINDOW" },
		{ "ring:buckets=5000", "SLUICE_EBUCKETS" },
		{ "gcra:bucket=3", "unknown parameter 'bucket' (gcra takes rate, burst)" },
		{ "gcra:burst", "is not KEY=VALUE" },
		{ "log:limit=0", "SLUICE_ELIMIT" },
		{ "fixed:window=1parsec", "window=1parsec" },
		{ "ring:mode=exact", "unknown parameter 'mode' (ring takes buckets, limit, window, lease)" },
		{ "leaky:mode=fast", "use meter or shaper" },
		{ "leaky:mode=shaper,depth=3", "depth is the meter's burst" },
		{ "inflight:hold=0", "hold must be above 0" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(sim_algo_parse(bad[i].spec, 100, SEC, &a, err, sizeof(err)), -1, "%s",
		             bad[i].spec);
		cr_assert_not_null(strstr(err, bad[i].why), "%s: got \"%s\"", bad[i].spec, err);
	}
}

/* ---- advise.c ------------------------------------------------------------ */

struct advice_case {
	uint64_t L, W, num, den;
	uint32_t N;         /* expected buckets (0: none) */
	uint64_t width, slots, gcra_burst;
	int log_fits;       /* L <= 2^24 */
	sim_pick_t pick;
};

ParameterizedTestParameters(sim, advisor_formula)
{
	static struct advice_case cases[] = {
		/* N = ceil(1/T): 2% -> 50, 20 ms buckets, 64 slots */
		{ 100, SEC, 2, 100, 50, 20 * MS, 64, 2, 1, SIM_PICK_RING },
		/* L + 1 = 11 <= 64 slots: the log is exact for less */
		{ 10, SEC, 2, 100, 50, 20 * MS, 64, 1, 1, SIM_PICK_LOG },
		/* ceil(100/3) = 34; 34..39 do not divide 10^9 = 2^9 5^9: 40 */
		{ 100, SEC, 3, 100, 40, 25 * MS, 64, 3, 1, SIM_PICK_RING },
		{ 1000, 60 * SEC, 1, 100, 100, 600 * MS, 128, 10, 1, SIM_PICK_RING },
		/* 0.5%: 200 buckets, 256 slots: L + 1 = 101 fits, the log wins */
		{ 100, SEC, 1, 200, 200, 5 * MS, 256, 1, 1, SIM_PICK_LOG },
		{ 1000, SEC, 1, 200, 200, 5 * MS, 256, 5, 1, SIM_PICK_RING },
		/* 0.05%: 500 us buckets, under the cached clock's 1 ms */
		{ 10000, SEC, 1, 2000, 2000, 500000, 2048, 5, 1, SIM_PICK_RING },
		{ 100, SEC, 1, 1, 1, SEC, 1, 100, 1, SIM_PICK_RING },      /* 100%: N = 1 */
		{ 100, SEC, 1, 2, 2, 500 * MS, 2, 50, 1, SIM_PICK_RING },
		/* 0.01% needs 10000 buckets: no ring */
		{ 10, SEC, 1, 10000, 0, 0, 0, 1, 1, SIM_PICK_LOG },
		/* a prime window: nothing from 50 to 4096 divides it */
		{ 100, 1000003, 2, 100, 0, 0, 0, 2, 1, SIM_PICK_LOG },
		/* L above the log's cap: the ring still fits */
		{ 1ULL << 25, SEC, 1, 100, 100, 10 * MS, 128, 335544, 0, SIM_PICK_RING },
		/* L above the ring's cap too: GCRA */
		{ 1ULL << 31, SEC, 1, 100, 0, 0, 0, 21474836, 0, SIM_PICK_GCRA },
	};
	return cr_make_param_array(struct advice_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct advice_case *c, sim, advisor_formula)
{
	sim_advice_t a;
	char err[256];
	cr_assert_eq(sim_advise(c->L, c->W, c->num, c->den, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(a.n_min, (c->den + c->num - 1) / c->num, "ceil(1 / tolerance)");
	cr_assert_eq(a.buckets, c->N);
	cr_assert_eq(a.pick, c->pick);
	cr_assert_eq(a.gcra_burst, c->gcra_burst, "max(1, floor(T L))");
	cr_assert_eq(a.adv_worst, 2 * c->L);
	cr_assert_eq(a.gcra_bytes, sluice_gcra_size());
	cr_assert_eq(a.log_bytes, c->log_fits ? sluice_log_size() + 8 * (c->L + 1) : 0);
	if (c->N) {
		cr_assert_eq(a.width_ns, c->width);
		cr_assert_eq(a.slots, c->slots);
		cr_assert_eq(a.ring_bytes, sluice_window_size() + 8 * c->slots);
		cr_assert_eq(a.adv_span_ns, c->W - c->width, "W - W/N");
		cr_assert_leq((double)c->L / c->N, (double)c->L * c->num / c->den + 1e-9,
		              "L/N within the tolerance");
		cr_assert_eq(a.clock_ok, c->width >= SLUICE_CACHED_PERIOD_NS);
		/* the ring the advisor names must build */
		char spec[64];
		sim_algo_t algo;
		snprintf(spec, sizeof(spec), "ring:buckets=%u", a.buckets);
		if (c->L <= SLUICE_WINDOW_LIMIT_MAX)
			cr_assert_eq(sim_algo_parse(spec, c->L, c->W, &algo, err, sizeof(err)), 0, "%s",
			             err);
	} else {
		cr_assert_not_null(a.no_ring);
	}
	/* the report prints without measuring (and must not crash) */
	FILE *devnull = fopen("/dev/null", "w");
	cr_assert_not_null(devnull);
	sim_advice_print(devnull, &a, 0);
	fclose(devnull);
}

Test(sim, advisor_rejects_zero)
{
	sim_advice_t a;
	char err[256];
	cr_assert_eq(sim_advise(0, SEC, 1, 50, &a, err, sizeof(err)), -1);
	cr_assert_eq(sim_advise(100, 0, 1, 50, &a, err, sizeof(err)), -1);
	cr_assert_eq(sim_advise(100, SEC, 0, 50, &a, err, sizeof(err)), -1);
}

Test(sim, advised_ring_on_uniform_traffic)
{
	/* the formula's premise: evenly spread traffic stays within L + L/N */
	static const uint64_t tol_den[] = { 10, 20, 50 };
	const uint64_t L = 200, W = SEC;
	for (size_t i = 0; i < 3; i++) {
		sim_advice_t a;
		char err[256], spec[64];
		cr_assert_eq(sim_advise(L, W, 1, tol_den[i], &a, err, sizeof(err)), 0);
		snprintf(spec, sizeof(spec), "ring:buckets=%u", a.buckets);
		for (uint64_t x = 1; x <= 4; x++) {
			sim_run_config_t rc = base_config(SIM_UNIFORM, (2 * x + 1) * L, 2 * W, 10 * SEC);
			sim_result_t r;
			run(&rc, spec, L, W, &r);
			cr_assert_leq((double)worst(&r, W), L + (double)L / a.buckets, "%s at %llu/2 x", spec,
			              (unsigned long long)(2 * x + 1));
			sim_result_free(&r);
		}
		/* and the measured check runs the same ring on Poisson traffic */
		uint64_t w = 0, d = 0;
		cr_assert_eq(sim_advise_measure(&a, 3, 2, 1, &w, &d, err, sizeof(err)), 0, "%s", err);
		cr_assert_geq(w, L, "Poisson at 1.5x fills the window");
		cr_assert_leq(w, 2 * L, "and never passes the adversarial bound");
		cr_assert_eq(d, 60 * W);
	}
}

/* ---- output.c ------------------------------------------------------------ */

Test(sim, csv_and_plot_script_without_gnuplot)
{
	const uint64_t L = 100, W = SEC;
	sim_run_config_t rc = boundary(L, W, 0, 3 * SEC);
	sim_algo_t algos[2];
	sim_result_t res[2];
	sim_worst_t ww[2], ws[2];
	char err[256];
	const char *specs[] = { "fixed", "ring:buckets=10" };
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(sim_algo_parse(specs[i], L, W, &algos[i], err, sizeof(err)), 0);
		cr_assert_eq(sim_run(&rc, &algos[i], &res[i], err, sizeof(err)), 0);
		sim_sort_events(res[i].adm, res[i].nadm);
		ww[i] = sim_worst_in(res[i].adm, res[i].nadm, W);
		ws[i] = sim_worst_in(res[i].adm, res[i].nadm, 50 * MS);
	}
	sim_report_t rep = { .title = "test", .limit = L, .window_ns = W, .short_ns = 50 * MS,
		             .bin_ns = 50 * MS, .nalgo = 2, .algos = algos, .results = res,
		             .worst_w = ww, .worst_s = ws };
	char dir[] = "/tmp/sluice-sim-test-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char csv[128], svg[128], gp[128];
	snprintf(csv, sizeof(csv), "%s/out.csv", dir);
	snprintf(svg, sizeof(svg), "%s/out.svg", dir);
	snprintf(gp, sizeof(gp), "%s/out.gp", dir);
	cr_assert_eq(sim_write_csv(csv, &rep, err, sizeof(err)), 0, "%s", err);

	FILE *f = fopen(csv, "r");
	cr_assert_not_null(f);
	char line[512];
	cr_assert_not_null(fgets(line, sizeof(line), f));
	cr_assert_str_eq(line, "t_s,bin_start_ns,\"offered:fixed\",\"admitted:fixed\","
	                       "\"offered:ring:buckets=10\","
	                       "\"admitted:ring:buckets=10\"\n");
	int rows = 0;
	uint64_t offered = 0, admitted = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long o1, a1, o2, a2, start;
		char t[32];
		cr_assert_eq(sscanf(line, "%31[^,],%llu,%llu,%llu,%llu,%llu", t, &start, &o1, &a1, &o2,
		                    &a2),
		             6, "%s", line);
		cr_assert_eq(start, (unsigned long long)rows * 50 * MS);
		offered += o1;
		admitted += a1;
		rows++;
	}
	fclose(f);
	cr_assert_eq(rows, 60, "3 s in bins of 50 ms");
	cr_assert_eq(offered, 2 * L);
	cr_assert_eq(admitted, 2 * L);

	setenv("SLUICE_SIM_GNUPLOT", "", 1);
	char found[64];
	cr_assert_eq(sim_find_gnuplot(found, sizeof(found)), 0);
	cr_assert_eq(sim_plot(csv, svg, &rep, err, sizeof(err)), SIM_PLOT_NO_GNUPLOT);
	cr_assert_eq(access(gp, R_OK), 0, "the script is written anyway");
	cr_assert_neq(access(svg, F_OK), 0, "no plot without gnuplot");
	cr_assert_eq(sim_plot(csv, "x.pdf", &rep, err, sizeof(err)), SIM_PLOT_FAILED);
	unlink(csv);
	unlink(gp);
	rmdir(dir);
	for (int i = 0; i < 2; i++)
		sim_result_free(&res[i]);
}

Test(sim, rng_is_reproducible_and_in_range)
{
	sim_rng_t a, b;
	sim_rng_seed(&a, 0);
	sim_rng_seed(&b, 0);
	for (int i = 0; i < 1000; i++) {
		cr_assert_eq(sim_rng_next(&a), sim_rng_next(&b));
		double u = sim_rng_unit(&a);
		cr_assert(u >= 0 && u < 1);
		cr_assert_lt(sim_rng_below(&a, 7), 7);
		(void)sim_rng_unit(&b);
		(void)sim_rng_below(&b, 7);
	}
	/* the mean of exponential gaps is the mean asked for (within 5%) */
	double sum = 0;
	for (int i = 0; i < 20000; i++)
		sum += (double)sim_rng_exp_ns(&a, 1000.0);
	cr_assert(sum / 20000 > 950 && sum / 20000 < 1050, "mean %g", sum / 20000);
}
