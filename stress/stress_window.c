/* SPDX-License-Identifier: MIT */
/*
 * stress_window - many threads, a real clock, one sliding ring; verify
 * window.h's GUARANTEE over every admission recorded.
 *
 *   stress_window [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]
 *                 [--limit=L] [--window-ms=W] [--buckets=N] [--lease=B]
 *                 [--self-test]
 *
 * GUARANTEE checked (window.h): for every run of N consecutive epochs
 * (epoch = now_ns / (W/N)), the permits admitted total at most L, with
 * n in 1..n_max (3, or L when smaller).
 * With --lease=B (per-CPU leases of up to B permits) the header promises
 * the same bound, L per N consecutive epochs, and that is
 * what is checked.  Its other statement, that leases lose at most
 * cells * (B + n_max - 1) + T * B permits per epoch, bounds UNDER-admission:
 * an admission stream cannot show it (how much more would have passed
 * depends on demand and scheduling), so it is not checked here.
 * Not checked, because not promised: an unaligned interval of length W may
 * see up to 2L.
 *
 * Defaults: L = 50 per 100 ms in 10 buckets of 10 ms, so a 1 s run crosses
 * about a hundred epochs and ten whole windows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress_common.h"


static uint64_t n_max; /* largest n asked: stress_n_max() */

static const char usage[] =
	"usage: stress_window [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]\n"
	"                     [--limit=L] [--window-ms=W] [--buckets=N] [--lease=B]\n"
	"                     [--self-test]\n";

static uint64_t limit = 50, window_ms = 100, buckets = 10, lease;
static sluice_window_t window;

static int opt(const char *key, const char *val)
{
	if (strcmp(key, "limit") == 0)
		return stress_u64(val, &limit);
	if (strcmp(key, "window-ms") == 0)
		return stress_u64(val, &window_ms);
	if (strcmp(key, "buckets") == 0)
		return stress_u64(val, &buckets);
	if (strcmp(key, "lease") == 0)
		return stress_u64(val, &lease);
	return -1;
}

static int step(struct stress_worker *w)
{
	uint64_t n = 1 + stress_rand(w) % n_max;
	sluice_decision_t d;
	int rc = sluice_window_acquire(&window, n, &d);
	if (rc < 0)
		return stress_fail(w, rc);
	return rc == 1 && !stress_record(w, 0, d.now_ns, n, 0);
}

/* Buckets of 10 ns, N = 3, L = 5. */
static int self_test(void)
{
	struct stress_selftest st = { "window", 0, 0 };
	/* every run of 3 epochs holds exactly 5 */
	static const struct stress_rec full[] = { { 0, 2, 0 },  { 10, 2, 0 }, { 29, 1, 0 },
		                                  { 30, 2, 0 }, { 45, 2, 0 }, { 55, 1, 0 } };
	/* epoch 0 leaves exactly N epochs later */
	static const struct stress_rec leave[] = { { 0, 3, 0 }, { 30, 5, 0 } };
	/* 6 in epochs 0..2 */
	static const struct stress_rec over[] = { { 0, 3, 0 }, { 29, 3, 0 } };
	/* 6 in epochs 2..4, later in the stream */
	static const struct stress_rec late[] = { { 0, 5, 0 }, { 30, 1, 0 }, { 40, 2, 0 },
		                                  { 49, 3, 0 } };
	/* 2L over an unaligned interval of length W (not promised) */
	static const struct stress_rec unaligned[] = { { 9, 5, 0 }, { 30, 5, 0 } };
	char det[64];
	uint64_t wst;
#define CASE(name, want, s, bound)                                                        \
	wst = stress_worst_aligned(s, sizeof(s) / sizeof(s[0]), 10, 3, NULL);             \
	snprintf(det, sizeof(det), "worst=%llu bound=%d", (unsigned long long)wst, bound); \
	stress_expect(&st, name, want, wst <= (bound), det)
	CASE("exact: L in every run of N epochs", 1, full, 5);
	CASE("exact: an epoch leaves after N", 1, leave, 5);
	CASE("exact: 2L in an unaligned W (not promised)", 1, unaligned, 5);
	CASE("exact: L+1 in epochs 0..2", 0, over, 5);
	CASE("exact: L+1 in epochs 2..4", 0, late, 5);
#undef CASE
	return stress_self_report(&st);
}

int main(int argc, char **argv)
{
	struct stress_opts o = { .algo = "window" };
	stress_parse(argc, argv, &o, usage, opt);
	if (o.self_test)
		return self_test();
	o.mode = lease ? "lease" : "bucket"; /* where admissions are taken from */
	if (window_ms == 0 || window_ms > 3600000 || buckets == 0 || buckets > 4096)
		stress_die("--window-ms: 1..3600000, --buckets: 1..4096");
	if (lease > UINT32_MAX)
		stress_die("--lease: 0..%u", SLUICE_WINDOW_LEASE_MAX);
	uint64_t window_ns = window_ms * 1000000ULL;
	stress_clock_start(&o);
	sluice_window_config_t c = { .limit = limit, .window_ns = window_ns,
		                     .buckets = (uint32_t)buckets,
		                     .clock = o.clock, .lease = (uint32_t)lease };
	stress_check_init("sluice_window_init", sluice_window_init(&window, &c));
	n_max = stress_n_max(limit);
	uint64_t width_ns = window_ns / buckets;
	uint64_t bound = limit;

	double windows = (o.seconds + 1) * 1e9 / (double)window_ns + 2;
	size_t caps[STRESS_STREAMS] = { stress_cap((double)bound * windows), 0 };
	struct stress_worker *w = stress_run(&o, step, caps);
	stress_clock_stop(&o);

	size_t n;
	uint64_t admitted, epochs;
	int incomplete = 0;
	struct stress_rec *all = stress_merge(&o, w, 0, &n, &admitted, &incomplete);
	uint64_t worst = stress_worst_aligned(all, n, width_ns, buckets, &epochs);
	char extra[64], ws[32], bs[32];
	snprintf(extra, sizeof(extra), " lease=%llu epochs=%llu", (unsigned long long)lease,
	         (unsigned long long)epochs);
	snprintf(ws, sizeof(ws), "%llu", (unsigned long long)worst);
	snprintf(bs, sizeof(bs), "%llu", (unsigned long long)bound);
	int rc = stress_report(&o, stress_decisions(w, o.threads), admitted, extra, ws, bs,
	                       worst <= bound, incomplete);
	free(all);
	stress_free(w, o.threads);
	sluice_window_destroy(&window);
	return rc;
}
