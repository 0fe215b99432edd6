/* SPDX-License-Identifier: MIT */
/*
 * stress_composite - many threads, a real clock, one composite of a sliding
 * ring (EXACT) and a GCRA; verify composite.h's GUARANTEE: each part's own
 * guarantee holds for the composite's admissions.
 *
 *   stress_composite [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]
 *                    [--order=window,gcra|gcra,window] [--limit=L] [--window-ms=W]
 *                    [--buckets=N] [--rate=R] [--burst=B] [--self-test]
 *
 * Workers ask the composite for n = 1..3 at a reading of the chosen clock
 * (sluice_composite_acquire_each_at, which returns every part's decision)
 * and record each admission twice: at the ring's now_ns in one stream and
 * at the GCRA's now_ns in the other (a part may use a time other than the
 * reading: the ring holds time at its newest bucket).  Checked after the
 * run, as the parts' headers state them:
 *   ring: every run of N consecutive epochs holds at most L permits;
 *   GCRA: every interval [a, b] holds at most b + floor((b - a) / T).
 * worst and bound are printed as "ring,gcra".  The parts are set so that
 * each refuses in turn: the GCRA's burst binds over a few ms, the ring's L
 * over a window, so the composite refunds in both directions (--order picks
 * which part is asked first, hence which refund path runs).  A refund a part
 * cannot make exactly (composite unreturned) keeps permits counted there:
 * fewer admissions, never more, so it cannot hide a violation.
 *
 * Defaults: ring L = 40 per 100 ms in 10 buckets; GCRA R = 500 per second
 * (T = 2 ms), b = 10.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress_common.h"


static uint64_t n_max; /* largest n asked: stress_n_max() */

static const char usage[] =
	"usage: stress_composite [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]\n"
	"                        [--order=window,gcra|gcra,window] [--limit=L] [--window-ms=W]\n"
	"                        [--buckets=N] [--rate=R (per second)] [--burst=B] [--self-test]\n";

static uint64_t limit = 40, window_ms = 100, buckets = 10, rate = 500, burst = 10;
static const char *order = "window,gcra";
static int gcra_first; /* part index of the ring is gcra_first, the GCRA's !gcra_first */
static const sluice_clock_t *now_clock; /* the reading each decision uses */
static sluice_composite_t comp;

static int opt(const char *key, const char *val)
{
	if (strcmp(key, "order") == 0) {
		order = val;
		return strcmp(val, "window,gcra") == 0 || strcmp(val, "gcra,window") == 0 ? 0 : -1;
	}
	if (strcmp(key, "limit") == 0)
		return stress_u64(val, &limit);
	if (strcmp(key, "window-ms") == 0)
		return stress_u64(val, &window_ms);
	if (strcmp(key, "buckets") == 0)
		return stress_u64(val, &buckets);
	if (strcmp(key, "rate") == 0)
		return stress_u64(val, &rate);
	if (strcmp(key, "burst") == 0)
		return stress_u64(val, &burst);
	return -1;
}

static int step(struct stress_worker *w)
{
	uint64_t n = 1 + stress_rand(w) % n_max;
	sluice_decision_t d, each[SLUICE_COMPOSITE_MAX];
	int rc = sluice_composite_acquire_each_at(&comp, n, sluice_clock_now(now_clock), &d, each);
	if (rc < 0)
		return stress_fail(w, rc);
	if (rc != 1)
		return 0;
	/* stream 0: the ring's time, stream 1: the GCRA's */
	return !stress_record(w, 0, each[gcra_first].now_ns, n, 0) ||
	       !stress_record(w, 1, each[!gcra_first].now_ns, n, 0);
}

struct verdict {
	uint64_t ring, gcra;
};

/* ring: runs of @nb epochs of @width ns; GCRA: interval @t ns. */
static struct verdict check(const struct stress_rec *r, size_t nr, const struct stress_rec *g,
                            size_t ng, uint64_t width, uint64_t nb, uint64_t t)
{
	struct verdict v = { stress_worst_aligned(r, nr, width, nb, NULL),
		             stress_worst_conform(g, ng, t, 1) };
	return v;
}

/* ring: buckets of 10 ns, N = 3, L = 5; GCRA: T = 10 ns, b = 3. */
static int self_test(void)
{
	struct stress_selftest st = { "composite", 0, 0 };
	static const struct stress_rec ring_ok[] = { { 0, 3, 0 }, { 10, 2, 0 }, { 30, 3, 0 } };
	static const struct stress_rec ring_bad[] = { { 0, 3, 0 }, { 10, 2, 0 }, { 29, 1, 0 } };
	static const struct stress_rec gcra_ok[] = { { 0, 3, 0 }, { 10, 1, 0 }, { 30, 2, 0 } };
	static const struct stress_rec gcra_bad[] = { { 0, 3, 0 }, { 10, 1, 0 }, { 29, 2, 0 } };
	const struct {
		const char *name;
		int want;
		const struct stress_rec *r, *g;
		size_t nr, ng;
	} cases[] = {
		{ "both parts at their bounds", 1, ring_ok, gcra_ok, 3, 3 },
		{ "ring over L, GCRA fine", 0, ring_bad, gcra_ok, 3, 3 },
		{ "ring fine, GCRA over b + t/T", 0, ring_ok, gcra_bad, 3, 3 },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct verdict v = check(cases[c].r, cases[c].nr, cases[c].g, cases[c].ng, 10, 3, 10);
		char det[64];
		snprintf(det, sizeof(det), "worst=%llu,%llu bound=5,3", (unsigned long long)v.ring,
		         (unsigned long long)v.gcra);
		stress_expect(&st, cases[c].name, cases[c].want, v.ring <= 5 && v.gcra <= 3, det);
	}
	return stress_self_report(&st);
}

int main(int argc, char **argv)
{
	struct stress_opts o = { .algo = "composite" };
	stress_parse(argc, argv, &o, usage, opt);
	if (o.self_test)
		return self_test();
	gcra_first = strcmp(order, "gcra,window") == 0;
	o.mode = gcra_first ? "gcra+window" : "window+gcra";
	now_clock = o.clock;
	if (window_ms == 0 || window_ms > 3600000 || buckets == 0 || buckets > 4096)
		stress_die("--window-ms: 1..3600000, --buckets: 1..4096");
	uint64_t window_ns = window_ms * 1000000ULL;
	stress_clock_start(&o);

	sluice_limiter_config_t rc_cfg = { .algo = SLUICE_ALGO_WINDOW };
	rc_cfg.window = (sluice_window_config_t){ .limit = limit, .window_ns = window_ns,
		                                  .buckets = (uint32_t)buckets,
		                                  .clock = o.clock };
	sluice_limiter_config_t gc_cfg = { .algo = SLUICE_ALGO_GCRA };
	gc_cfg.gcra = (sluice_gcra_config_t){ .rate = rate, .period_ns = 1000000000ULL,
		                              .burst = burst, .clock = o.clock };
	sluice_limiter_t *ring, *gcra;
	stress_check_init("ring", sluice_limiter_new(&rc_cfg, &ring));
	stress_check_init("gcra", sluice_limiter_new(&gc_cfg, &gcra));
	sluice_composite_config_t cc = { .count = 2 };
	cc.parts[gcra_first] = ring;
	cc.parts[!gcra_first] = gcra;
	stress_check_init("sluice_composite_init", sluice_composite_init(&comp, &cc));
	n_max = stress_n_max(limit < burst ? limit : burst);
	/* the rounded interval, as the GCRA uses it (gcra.h: T = period / rate
	 * rounded up; init refuses roundings above 0.1%) */
	uint64_t t = (1000000000ULL + rate - 1) / rate;
	uint64_t width_ns = window_ns / buckets;

	double run = (o.seconds + 1) * 1e9;
	double by_ring = (double)limit * (run / (double)window_ns + 2);
	double by_gcra = (double)burst + run / (double)t;
	size_t cap = stress_cap(by_ring < by_gcra ? by_ring : by_gcra);
	size_t caps[STRESS_STREAMS] = { cap, cap };
	struct stress_worker *w = stress_run(&o, step, caps);
	stress_clock_stop(&o);

	size_t nr, ng;
	uint64_t admitted, admitted_g;
	int incomplete = 0;
	struct stress_rec *r = stress_merge(&o, w, 0, &nr, &admitted, &incomplete);
	struct stress_rec *g = stress_merge(&o, w, 1, &ng, &admitted_g, &incomplete);
	struct verdict v = check(r, nr, g, ng, width_ns, buckets, t);
	char extra[96], ws[48], bs[48];
	snprintf(extra, sizeof(extra), " interval_ns=%llu unreturned=%llu", (unsigned long long)t,
	         (unsigned long long)sluice_composite_unreturned(&comp));
	snprintf(ws, sizeof(ws), "%llu,%llu", (unsigned long long)v.ring, (unsigned long long)v.gcra);
	snprintf(bs, sizeof(bs), "%llu,%llu", (unsigned long long)limit, (unsigned long long)burst);
	/* both streams record every admission (unless a buffer filled) */
	int ok = v.ring <= limit && v.gcra <= burst && (incomplete || admitted == admitted_g);
	int rc = stress_report(&o, stress_decisions(w, o.threads), admitted, extra, ws, bs, ok,
	                       incomplete);
	free(r);
	free(g);
	stress_free(w, o.threads);
	sluice_limiter_free(ring);
	sluice_limiter_free(gcra);
	return rc;
}
