/* SPDX-License-Identifier: MIT */
/*
 * stress_fixed - many threads, a real clock, one fixed window; verify
 * fixed.h's GUARANTEE over every admission recorded.
 *
 *   stress_fixed [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]
 *                [--limit=L] [--window-ms=W] [--self-test]
 *
 * GUARANTEE checked (fixed.h): for every aligned window [k W, (k+1) W) of
 * the limiter's timeline, the permits admitted at a time inside it (the
 * decision's now_ns) total at most L.  Not checked, because not promised:
 * an unaligned interval may see 2L (the self-test shows the verifier lets
 * that through).  Each worker asks for n = 1..3 permits in a loop.
 *
 * Defaults (L = 50 per 100 ms, 2 threads, 1 s) roll the window ten times a
 * second and refuse almost every decision, so admissions are a small
 * fraction and the record buffers stay small for long soaks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress_common.h"


static uint64_t n_max; /* largest n asked: stress_n_max() */

static const char usage[] =
	"usage: stress_fixed [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]\n"
	"                    [--limit=L] [--window-ms=W] [--lease=B] [--self-test]\n";

static uint64_t limit = 50, window_ms = 100, lease; /* --lease=B: the ring's N = 1 */
static sluice_fixed_t fixed;

static const struct stress_u64_opt options[] = {
	{ "limit", &limit },
	{ "window-ms", &window_ms },
	{ "lease", &lease },
	{ NULL, NULL },
};

static int opt(const char *key, const char *val)
{
	return stress_u64_opts(options, key, val);
}

static int step(struct stress_worker *w)
{
	uint64_t n = 1 + stress_rand(w) % n_max;
	sluice_decision_t d;
	int rc = sluice_fixed_acquire(&fixed, n, &d);
	if (rc < 0)
		return stress_fail(w, rc);
	return rc == 1 && !stress_record(w, 0, d.now_ns, n, 0);
}

/* Windows of 10 ns, L = 5: the verifier must let L per aligned window
 * through, including 2L across an edge, and catch L + 1 in one window. */
static int self_test(void)
{
	struct stress_selftest st = { "fixed", 0, 0 };
	static const struct stress_rec edge[] = { { 9, 5, 0 }, { 10, 5, 0 } };
	static const struct stress_rec full[] = { { 0, 2, 0 }, { 5, 2, 0 }, { 9, 1, 0 },
		                                  { 10, 3, 0 }, { 19, 2, 0 } };
	static const struct stress_rec over[] = { { 0, 3, 0 }, { 9, 3, 0 }, { 10, 1, 0 } };
	static const struct stress_rec late[] = { { 10, 1, 0 }, { 20, 4, 0 }, { 29, 2, 0 } };
	char det[64];
	uint64_t wst;
#define CASE(name, want, s)                                                        \
	wst = stress_worst_aligned(s, sizeof(s) / sizeof(s[0]), 10, 1, NULL);      \
	snprintf(det, sizeof(det), "worst=%llu bound=5", (unsigned long long)wst); \
	stress_expect(&st, name, want, wst <= 5, det)
	CASE("2L across an edge (not promised)", 1, edge);
	CASE("L in each window", 1, full);
	CASE("L+1 in window 0", 0, over);
	CASE("L+1 in a later window", 0, late);
#undef CASE
	return stress_self_report(&st);
}

int main(int argc, char **argv)
{
	struct stress_opts o = { .algo = "fixed", .mode = "exact" };
	stress_parse(argc, argv, &o, usage, opt);
	if (o.self_test)
		return self_test();
	if (window_ms == 0 || window_ms > 3600000)
		stress_die("--window-ms: 1..3600000");
	uint64_t window_ns = window_ms * 1000000ULL;
	stress_clock_start(&o);
	if (lease)
		o.mode = "lease";
	sluice_fixed_config_t c = { .limit = limit, .window_ns = window_ns, .clock = o.clock,
		                    .lease = (uint32_t)lease };
	stress_check_init("sluice_fixed_init", sluice_fixed_init(&fixed, &c));
	n_max = stress_n_max(limit);

	/* at most L per window over the run (plus a second of clock slack) */
	double windows = (o.seconds + 1) * 1e9 / (double)window_ns + 2;
	size_t caps[STRESS_STREAMS] = { stress_cap((double)limit * windows), 0 };
	struct stress_worker *w = stress_run(&o, step, caps);
	stress_clock_stop(&o);

	size_t n;
	uint64_t admitted, epochs;
	int incomplete = 0;
	struct stress_rec *all = stress_merge(&o, w, 0, &n, &admitted, &incomplete);
	uint64_t worst = stress_worst_aligned(all, n, window_ns, 1, &epochs);
	char extra[64], ws[32], bs[32];
	snprintf(extra, sizeof(extra), " epochs=%llu", (unsigned long long)epochs);
	snprintf(ws, sizeof(ws), "%llu", (unsigned long long)worst);
	snprintf(bs, sizeof(bs), "%llu", (unsigned long long)limit);
	int rc = stress_report(&o, stress_decisions(w, o.threads), admitted, extra, ws, bs,
	                       worst <= limit, incomplete);
	free(all);
	stress_free(w, o.threads);
	sluice_fixed_destroy(&fixed);
	return rc;
}
