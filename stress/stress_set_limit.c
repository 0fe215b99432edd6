/* SPDX-License-Identifier: MIT */
/*
 * stress_set_limit - set_limit under load on a real clock: one setter
 * thread changes the limit --changes times (10,000 by default) while the
 * workers decide; verify the header's READINGS ACROSS A CHANGE bound over
 * every admission recorded (issue 22).
 *
 *   stress_set_limit --algo=fixed|window|log [--threads=T] [--seconds=S]
 *                    [--clock=monotonic|coarse|cached] [--changes=C]
 *                    [--window-ms=W] [--buckets=N] [--low=A] [--high=B]
 *                    [--self-test]
 *
 * Bound checked: every aligned window (fixed), every run of N epochs
 * (window: the ring, N buckets), every interval [s, s + W) (log) holds at
 * most the largest limit in force at its newest admission's time.  A
 * change is in force from its stamp to the next change's stamp, both
 * included (fixed.h, window.h, log.h).  The setter brackets each stamp
 * with what it reads of the limiter just before and just after its call
 * (the fixed window's opened epoch, the ring's head, the log's time), so
 * change i counts as in force on [before_i, after_(i+1)]: an interval that
 * contains the true one, so the check can only be looser than the
 * statement, never stricter.  What it catches is the bug issue 22 names: an
 * admission judged against a limit whose successor took effect a window
 * (an interval) before it.
 *
 * The limits alternate between --low and --high (each side varying by 0..2,
 * so each change differs from the last), so every window sees lowerings
 * and raises.  Workers ask for n = 1..3.  The run is incomplete (exit 2)
 * unless every change was made and some run reached its bound.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stress_common.h"

static const char usage[] =
	"usage: stress_set_limit --algo=fixed|window|log [--threads=T] [--seconds=S]\n"
	"                        [--clock=monotonic|coarse|cached] [--changes=C]\n"
	"                        [--window-ms=W] [--buckets=N] [--low=A] [--high=B] [--self-test]\n";

static const char *algo = "fixed";
static uint64_t changes = 10000, window_ms = 20, buckets = 4, low = 8, high = 64;
static uint64_t n_max;

static const struct stress_u64_opt options[] = {
	{ "changes", &changes }, { "window-ms", &window_ms }, { "buckets", &buckets },
	{ "low", &low },         { "high", &high },           { NULL, NULL },
};

static int opt(const char *key, const char *val)
{
	if (strcmp(key, "algo") == 0) {
		algo = val;
		return 0;
	}
	return stress_u64_opts(options, key, val);
}

enum { FIXED, WINDOW, LOG };
static int kind;
static sluice_fixed_t fixed;
static sluice_window_t ring;
static sluice_log_t slog;

/* One change: its limit and the bracket of its stamp (in epochs for the
 * fixed window and the ring, in ns for the log).  changes[0] is init. */
struct change {
	uint64_t limit, before, after;
};
static struct change *chg;
static size_t nchg;
static uint64_t unit_ns; /* the stamp's unit: W, W / N, or 1 ns */

static int step(struct stress_worker *w)
{
	uint64_t n = 1 + stress_rand(w) % n_max;
	sluice_decision_t d;
	int rc = kind == FIXED  ? sluice_fixed_acquire(&fixed, n, &d)
	         : kind == WINDOW ? sluice_window_acquire(&ring, n, &d)
	                          : sluice_log_acquire(&slog, n, &d);
	if (rc == SLUICE_ETOOBIG)
		return 0; /* n above a lowered limit */
	if (rc < 0)
		return stress_fail(w, rc);
	return rc == 1 && !stress_record(w, 0, d.now_ns, n, 0);
}

/* One side of a stamp's bracket, read just before (@after = 0) or just
 * after the call: the fixed window's opened epoch; the ring's head (after)
 * or head - 1 (before: with head = h, every epoch before h - 1 is sealed
 * and h may not be opened yet; epochs skipped by a jump count nothing);
 * the log's time. */
static uint64_t stamp_side(int after)
{
	switch (kind) {
	case FIXED:
		return atomic_load_explicit(&fixed.epoch, memory_order_seq_cst);
	case WINDOW: {
		uint64_t h = atomic_load_explicit(&ring.head, memory_order_seq_cst);
		return after || h == 0 ? h : h - 1;
	}
	default:
		return atomic_load_explicit(&slog.last, memory_order_seq_cst);
	}
}

static int set_limit(uint64_t limit)
{
	return kind == FIXED  ? sluice_fixed_set_limit(&fixed, limit)
	       : kind == WINDOW ? sluice_window_set_limit(&ring, limit)
	                        : sluice_log_set_limit(&slog, limit);
}

static double run_seconds;

/* The setter: changes spread over the run, back to back when behind. */
static void *setter_main(void *arg)
{
	(void)arg;
	uint64_t start = sluice_clock_monotonic_ns();
	uint64_t span = (uint64_t)(run_seconds * 0.9e9);
	for (size_t i = 1; i <= changes; i++) {
		uint64_t target = start + span / changes * i;
		for (;;) {
			uint64_t now = sluice_clock_monotonic_ns();
			if (now >= target)
				break;
			if (target - now > 200000) {
				struct timespec ts = { 0, (long)(target - now - 100000) };
				nanosleep(&ts, NULL);
			} else {
				sched_yield();
			}
		}
		/* alternate low and high, each side varying by 0..2, so
		 * consecutive values always differ */
		uint64_t L = (i & 1) ? low + (i / 2) % 3 : high - (i / 2) % 3;
		chg[i].limit = L;
		chg[i].before = stamp_side(0);
		int rc = set_limit(L);
		chg[i].after = stamp_side(1);
		if (rc != 0) {
			fprintf(stderr, "set_limit(%llu): %s\n", (unsigned long long)L,
			        sluice_strerror(rc));
			exit(STRESS_EXIT_USAGE);
		}
		nchg = i + 1;
	}
	return NULL;
}

/*
 * The largest limit possibly in force at time t: change i is in force on
 * [before_i, after_(i+1)] (stamp units), the last one from before_i on.
 * before and after only grow with i (the setter is one thread and what it
 * reads only moves forward), so the changes in force at t are one run
 * i0..i1: binary searches, then a sparse-table maximum.
 */
static uint64_t *sparse; /* sparse[k * nchg + i] = max limit of i .. i + 2^k - 1 */
static int levels;

static void build_sparse(void)
{
	levels = 1;
	while ((1ULL << levels) <= nchg)
		levels++;
	sparse = malloc(sizeof(uint64_t) * nchg * (size_t)levels);
	if (!sparse)
		stress_die("out of memory");
	for (size_t i = 0; i < nchg; i++)
		sparse[i] = chg[i].limit;
	for (int k = 1; k < levels; k++)
		for (size_t i = 0; i + (1ULL << k) <= nchg; i++) {
			uint64_t a = sparse[(size_t)(k - 1) * nchg + i];
			uint64_t b = sparse[(size_t)(k - 1) * nchg + i + (1ULL << (k - 1))];
			sparse[(size_t)k * nchg + i] = a > b ? a : b;
		}
}

static uint64_t in_force_max(uint64_t t, void *ctx)
{
	(void)ctx;
	uint64_t x = t / unit_ns;
	/* i1: the last change with before_i <= x (change 0: before 0) */
	size_t lo = 0, hi = nchg - 1;
	while (lo < hi) {
		size_t mid = (lo + hi + 1) / 2;
		if (chg[mid].before <= x)
			lo = mid;
		else
			hi = mid - 1;
	}
	size_t i1 = lo;
	/* i0: the first change still in force at x: after_(i+1) >= x */
	lo = 0, hi = i1;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (mid + 1 >= nchg || chg[mid + 1].after >= x)
			hi = mid;
		else
			lo = mid + 1;
	}
	size_t i0 = lo;
	int k = 0;
	while ((2ULL << k) <= i1 - i0 + 1)
		k++;
	uint64_t a = sparse[(size_t)k * nchg + i0];
	uint64_t b = sparse[(size_t)k * nchg + i1 + 1 - (1ULL << k)];
	return a > b ? a : b;
}

static void check(const struct stress_rec *r, size_t n, struct stress_changes_check *c)
{
	uint64_t window_ns = window_ms * 1000000ULL;
	if (kind == LOG)
		stress_check_sliding_changes(r, n, window_ns, in_force_max, NULL, c);
	else
		stress_check_aligned_changes(r, n, window_ns / (kind == WINDOW ? buckets : 1),
		                             kind == WINDOW ? buckets : 1, in_force_max, NULL, c);
}

/* A hand-made history: windows of 10 ns (unit 10), limit 5 from the start,
 * 2 stamped in [3, 3] (epoch 3), 9 in [6, 6].  The verifier must take 5 in
 * epochs 0..3 (epoch 3 has both 5 and 2 in force), 2 in epochs 4 and 5, 9
 * from 6 on, and catch 3 in epoch 4. */
static int self_test(void)
{
	struct stress_selftest st = { "set_limit", 0, 0 };
	static struct change hist[] = { { 5, 0, 0 }, { 2, 3, 3 }, { 9, 6, 6 } };
	chg = hist;
	nchg = 3;
	unit_ns = 10;
	build_sparse();
	static const struct stress_rec ok[] = { { 0, 5, 0 },  { 35, 5, 0 }, { 40, 2, 0 },
		                                { 55, 2, 0 }, { 60, 9, 0 } };
	static const struct stress_rec over[] = { { 35, 5, 0 }, { 40, 3, 0 } };
	static const struct stress_rec late[] = { { 50, 2, 0 }, { 60, 9, 0 }, { 69, 1, 0 } };
	static const struct stress_rec slide[] = { { 38, 2, 0 }, { 45, 1, 0 } };
	struct stress_changes_check c;
	char det[96];
#define CASE(name, want, s, sweep)                                                          \
	sweep;                                                                               \
	snprintf(det, sizeof(det), "violations=%llu sum=%llu bound=%llu",                    \
	         (unsigned long long)c.violations, (unsigned long long)c.sum,               \
	         (unsigned long long)c.bound);                                               \
	stress_expect(&st, name, want, c.violations == 0, det)
	CASE("each window at its limits in force", 1, ok,
	     stress_check_aligned_changes(ok, 5, 10, 1, in_force_max, NULL, &c));
	CASE("3 in epoch 4 under 2", 0, over,
	     stress_check_aligned_changes(over, 2, 10, 1, in_force_max, NULL, &c));
	CASE("10 in epoch 6 under 9", 0, late,
	     stress_check_aligned_changes(late, 3, 10, 1, in_force_max, NULL, &c));
	CASE("a run of 2 epochs: 7 in 3..4 under 2 (its newest epoch's)", 0, ok,
	     stress_check_aligned_changes(ok, 3, 10, 2, in_force_max, NULL, &c));
	CASE("sliding, W = 10: 3 in (35, 45] under 2", 0, slide,
	     stress_check_sliding_changes(slide, 2, 10, in_force_max, NULL, &c));
	CASE("sliding, W = 7: 1 at 45 alone", 1, slide,
	     stress_check_sliding_changes(slide, 2, 7, in_force_max, NULL, &c));
#undef CASE
	free(sparse);
	return stress_self_report(&st);
}

int main(int argc, char **argv)
{
	struct stress_opts o = { .algo = "set_limit", .mode = "fixed" };
	stress_parse(argc, argv, &o, usage, opt);
	if (o.self_test)
		return self_test();
	if (strcmp(algo, "fixed") == 0)
		kind = FIXED;
	else if (strcmp(algo, "window") == 0)
		kind = WINDOW;
	else if (strcmp(algo, "log") == 0)
		kind = LOG;
	else
		stress_die("--algo: fixed, window or log");
	o.mode = algo;
	if (window_ms == 0 || window_ms > 60000)
		stress_die("--window-ms: 1..60000");
	if (changes == 0 || changes > 10000000)
		stress_die("--changes: 1..10000000");
	if (low == 0 || high <= low + 4 || high > 1000000)
		stress_die("--low, --high: 1 <= low, low + 4 < high <= 1000000");
	uint64_t window_ns = window_ms * 1000000ULL;
	stress_clock_start(&o);
	int rc;
	if (kind == FIXED) {
		sluice_fixed_config_t c = { .limit = high, .window_ns = window_ns, .clock = o.clock };
		rc = sluice_fixed_init(&fixed, &c);
		unit_ns = window_ns;
	} else if (kind == WINDOW) {
		if (buckets == 0 || buckets > 4096 || window_ns % buckets)
			stress_die("--buckets: 1..4096, dividing the window");
		sluice_window_config_t c = { .limit = high, .window_ns = window_ns,
			                     .buckets = (uint32_t)buckets, .clock = o.clock };
		rc = sluice_window_init(&ring, &c);
		unit_ns = window_ns / buckets;
	} else {
		sluice_log_config_t c = { .limit = high, .window_ns = window_ns, .clock = o.clock,
			                  .capacity = high };
		rc = sluice_log_init(&slog, &c);
		unit_ns = 1;
	}
	stress_check_init("init", rc);
	n_max = stress_n_max(low);
	chg = calloc(changes + 1, sizeof(*chg));
	if (!chg)
		stress_die("out of memory");
	chg[0] = (struct change){ high, 0, 0 };
	nchg = 1;
	run_seconds = o.seconds;

	double windows = (o.seconds + 1) * 1e9 / (double)(kind == WINDOW ? unit_ns : window_ns) + 2;
	size_t caps[STRESS_STREAMS] = { stress_cap((double)high * windows), 0 };
	pthread_t setter;
	if (pthread_create(&setter, NULL, setter_main, NULL) != 0)
		stress_die("cannot start the setter");
	struct stress_worker *w = stress_run(&o, step, caps);
	pthread_join(setter, NULL);
	stress_clock_stop(&o);

	size_t n;
	uint64_t admitted;
	int incomplete = 0;
	struct stress_rec *all = stress_merge(&o, w, 0, &n, &admitted, &incomplete);
	build_sparse();
	struct stress_changes_check c;
	check(all, n, &c);
	char extra[128], ws[32], bs[32];
	snprintf(extra, sizeof(extra), " changes=%llu violations=%llu tight=%llu",
	         (unsigned long long)(nchg - 1), (unsigned long long)c.violations,
	         (unsigned long long)c.tight);
	snprintf(ws, sizeof(ws), "%llu", (unsigned long long)c.sum);
	snprintf(bs, sizeof(bs), "%llu", (unsigned long long)c.bound);
	int ok = c.violations == 0;
	if (ok && (nchg - 1 < changes || c.tight == 0)) {
		fprintf(stderr, "stress_set_limit: %s\n",
		        nchg - 1 < changes ? "fewer changes than asked" : "no run reached its bound");
		incomplete = 1; /* it tested less than it says */
	}
	rc = stress_report(&o, stress_decisions(w, o.threads), admitted, extra, ws, bs, ok,
	                   incomplete);
	free(all);
	free(sparse);
	free(chg);
	stress_free(w, o.threads);
	if (kind == FIXED)
		sluice_fixed_destroy(&fixed);
	else if (kind == WINDOW)
		sluice_window_destroy(&ring);
	else
		sluice_log_destroy(&slog);
	return rc;
}
