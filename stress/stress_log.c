/* SPDX-License-Identifier: MIT */
/*
 * stress_log - many threads, a real clock, one exact sliding log; verify
 * log.h's GUARANTEE over every admission recorded.
 *
 *   stress_log [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]
 *              [--limit=L] [--window-ms=W] [--self-test]
 *
 * GUARANTEE checked (log.h): for every interval [s, s + W) of the log's
 * timeline, any s (not only aligned ones), the permits of the admissions
 * whose now_ns lies inside it total at most L.  The verifier sorts the
 * admission times and slides a two-pointer window over them
 * (stress_worst_sliding): the fullest interval starts at an admission.
 * Workers ask for n = 1..3.
 *
 * Defaults: L = 100 per 10 ms (a hundred windows a second; every window's
 * permits age out one by one, so the log's ring wraps constantly).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress_common.h"


static uint64_t n_max; /* largest n asked: stress_n_max() */
/* Refusals that were the retry bound's, not the limit's (log.h, BOUNDED
 * RETRIES: retry_after_ns = 0).  Counted, not failed: they admit nothing,
 * so the GUARANTEE holds with them; the count says how often contention
 * reaches the bound.  Relaxed: a counter read after the join. */
static _Atomic uint64_t gave_up;

static const char usage[] =
	"usage: stress_log [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]\n"
	"                  [--limit=L] [--window-ms=W] [--self-test]\n";

static uint64_t limit = 100, window_ms = 10;
static sluice_log_t lg;

static const struct stress_u64_opt options[] = {
	{ "limit", &limit },
	{ "window-ms", &window_ms },
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
	int rc = sluice_log_acquire(&lg, n, &d);
	if (rc < 0)
		return stress_fail(w, rc);
	if (rc == 0 && d.retry_after_ns == 0)
		atomic_fetch_add_explicit(&gave_up, 1, memory_order_relaxed);
	return rc == 1 && !stress_record(w, 0, d.now_ns, n, 0);
}

/* W = 100 ns, L = 3. */
static int self_test(void)
{
	struct stress_selftest st = { "log", 0, 0 };
	static const struct stress_rec spread[] = { { 0, 1, 0 },   { 40, 1, 0 },  { 80, 1, 0 },
		                                    { 120, 1, 0 }, { 160, 1, 0 }, { 200, 1, 0 } };
	static const struct stress_rec apart[] = { { 0, 3, 0 }, { 100, 3, 0 } };
	static const struct stress_rec close[] = { { 0, 3, 0 }, { 99, 1, 0 } };
	static const struct stress_rec four[] = { { 0, 1, 0 }, { 40, 1, 0 }, { 80, 1, 0 },
		                                  { 99, 1, 0 } };
	/* each aligned [100k, 100k + 100) holds 3 or less; [150, 250) holds 4 */
	static const struct stress_rec unaligned[] = { { 0, 1, 0 }, { 150, 2, 0 }, { 240, 2, 0 } };
	char det[64];
	uint64_t wst;
#define CASE(name, want, s)                                                        \
	wst = stress_worst_sliding(s, sizeof(s) / sizeof(s[0]), 100);               \
	snprintf(det, sizeof(det), "worst=%llu bound=3", (unsigned long long)wst); \
	stress_expect(&st, name, want, wst <= 3, det)
	CASE("L in every W, sliding", 1, spread);
	CASE("L, then L exactly W later", 1, apart);
	CASE("L, then 1 at W-1", 0, close);
	CASE("L+1 spread inside W", 0, four);
	CASE("L+1 in an unaligned W only", 0, unaligned);
#undef CASE
	return stress_self_report(&st);
}

int main(int argc, char **argv)
{
	struct stress_opts o = { .algo = "log", .mode = "exact" };
	stress_parse(argc, argv, &o, usage, opt);
	if (o.self_test)
		return self_test();
	if (window_ms == 0 || window_ms > 3600000)
		stress_die("--window-ms: 1..3600000");
	uint64_t window_ns = window_ms * 1000000ULL;
	stress_clock_start(&o);
	sluice_log_config_t c = { .limit = limit, .window_ns = window_ns, .clock = o.clock };
	stress_check_init("sluice_log_init", sluice_log_init(&lg, &c));
	n_max = stress_n_max(limit);

	double windows = (o.seconds + 1) * 1e9 / (double)window_ns + 2;
	size_t caps[STRESS_STREAMS] = { stress_cap((double)limit * windows), 0 };
	struct stress_worker *w = stress_run(&o, step, caps);
	stress_clock_stop(&o);

	size_t n;
	uint64_t admitted;
	int incomplete = 0;
	struct stress_rec *all = stress_merge(&o, w, 0, &n, &admitted, &incomplete);
	uint64_t worst = stress_worst_sliding(all, n, window_ns);
	char ws[32], bs[32], extra[48];
	snprintf(extra, sizeof(extra), " gave_up=%llu",
	         (unsigned long long)atomic_load_explicit(&gave_up, memory_order_relaxed));
	snprintf(ws, sizeof(ws), "%llu", (unsigned long long)worst);
	snprintf(bs, sizeof(bs), "%llu", (unsigned long long)limit);
	int rc = stress_report(&o, stress_decisions(w, o.threads), admitted, extra, ws, bs,
	                       worst <= limit, incomplete);
	free(all);
	stress_free(w, o.threads);
	sluice_log_destroy(&lg);
	return rc;
}
