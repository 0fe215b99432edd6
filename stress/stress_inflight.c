/* SPDX-License-Identifier: MIT */
/*
 * stress_inflight - many threads take and release slots of one concurrency
 * limiter; an observer counts what is really in flight.  Verifies
 * inflight.h's GUARANTEE: at most K in flight at every instant.
 *
 *   stress_inflight [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]
 *                   [--limit=K] [--hold=H] [--self-test]
 *
 * Each worker asks for n = 1..min(2, K) slots; after a successful acquire it
 * adds n to a shared observer counter and notes the level it reached, holds
 * the slots for a random 0..H spin iterations (yielding the CPU one time in
 * eight, so holders are also preempted on threads = cores), subtracts n, and
 * only then releases.  A refused worker yields one time in 64, so that with
 * more threads than cores a preempted holder gets back to its release.  Observer updates sit strictly inside the slots'
 * lifetime, so the observed level can exceed K only if more than K slots
 * were held at once.  The observer may be relaxed: a releaser's subtraction
 * happens before its release CAS, which synchronises with the acquire CAS
 * that takes the slots next, which happens before that taker's addition;
 * so in the observer's modification order every subtraction precedes the
 * additions it made room for (this also checks the limiter's acquire and
 * release orders).  worst = the highest level seen, bound = K.  After the
 * run the observer, slots held (K - sluice_inflight_available()) and bad
 * releases must be 0.
 * --clock plays no part in a decision (inflight.h, CLOCK JUMPS); it is
 * accepted for a uniform command line.
 *
 * Defaults: K = 3, H = 256 (two threads asking for up to 2 each can
 * exceed K, so a race would show on threads = cores too).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress_common.h"

static const char usage[] =
	"usage: stress_inflight [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]\n"
	"                       [--limit=K] [--hold=H (spins)] [--self-test]\n";

static uint64_t limit = 3, hold = 256, n_max;
static sluice_inflight_t inflight;
static _Atomic uint64_t observed; /* slots the workers say they hold */

static const struct stress_u64_opt options[] = {
	{ "limit", &limit },
	{ "hold", &hold },
	{ NULL, NULL },
};

static int opt(const char *key, const char *val)
{
	return stress_u64_opts(options, key, val);
}

/* The observer: enter returns the level reached, *max keeps the highest.
 * Relaxed: see the header comment for why the order still holds. */
static void enter(_Atomic uint64_t *lvl, uint64_t n, uint64_t *max)
{
	uint64_t v = atomic_fetch_add_explicit(lvl, n, memory_order_relaxed) + n;
	if (v > *max)
		*max = v;
}

static void leave(_Atomic uint64_t *lvl, uint64_t n)
{
	atomic_fetch_sub_explicit(lvl, n, memory_order_relaxed);
}

static int step(struct stress_worker *w)
{
	uint64_t x = stress_rand(w);
	uint64_t n = 1 + x % n_max;
	int rc = sluice_inflight_acquire(&inflight, n, NULL);
	if (rc < 0)
		return stress_fail(w, rc);
	if (rc == 0) {
		/* now and then let a preempted holder run: with more threads
		 * than cores the refusers would otherwise spin out its slice */
		if ((x >> 40) % 64 == 0)
			sched_yield();
		return 0;
	}
	enter(&observed, n, &w->stat[0]);
	w->stat[1] += n;
	for (volatile uint64_t i = (x >> 8) % (hold + 1); i > 0; i--)
		;
	if ((x >> 40) % 8 == 0)
		sched_yield();
	leave(&observed, n);
	rc = sluice_inflight_release(&inflight, n);
	return rc < 0 ? stress_fail(w, rc) : 0;
}

/* K = 4: replay enter/leave sequences through the observer. */
static int self_test(void)
{
	struct stress_selftest st = { "inflight", 0, 0 };
	/* +n enters, -n leaves */
	static const int at_k[] = { 2, 2, -2, 1, 1, -1, -1, -2 };
	static const int over[] = { 2, 2, 1, -1, -2, -2 };
	static const int late[] = { 1, -1, 3, 1, 1, -3, -1, -1 };
	static const int unbalanced[] = { 2, 1, -1 };
	const struct {
		const char *name;
		int want;
		const int *ev;
		size_t n;
	} cases[] = {
		{ "K held, never more", 1, at_k, sizeof(at_k) / sizeof(at_k[0]) },
		{ "K+1 held at once", 0, over, sizeof(over) / sizeof(over[0]) },
		{ "K+1 later in the run", 0, late, sizeof(late) / sizeof(late[0]) },
		{ "an enter never left", 0, unbalanced, sizeof(unbalanced) / sizeof(unbalanced[0]) },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		_Atomic uint64_t lvl = 0;
		uint64_t max = 0;
		for (size_t i = 0; i < cases[c].n; i++) {
			if (cases[c].ev[i] > 0)
				enter(&lvl, (uint64_t)cases[c].ev[i], &max);
			else
				leave(&lvl, (uint64_t)-cases[c].ev[i]);
		}
		uint64_t left = atomic_load(&lvl);
		char det[64];
		snprintf(det, sizeof(det), "worst=%llu bound=4 left=%llu", (unsigned long long)max,
		         (unsigned long long)left);
		stress_expect(&st, cases[c].name, cases[c].want, max <= 4 && left == 0, det);
	}
	return stress_self_report(&st);
}

int main(int argc, char **argv)
{
	struct stress_opts o = { .algo = "inflight", .mode = "acquire-release" };
	stress_parse(argc, argv, &o, usage, opt);
	if (o.self_test)
		return self_test();
	if (hold > 1000000)
		stress_die("--hold: at most 10^6 spins");
	stress_clock_start(&o);
	sluice_inflight_config_t c = { .limit = limit, .clock = o.clock };
	stress_check_init("sluice_inflight_init", sluice_inflight_init(&inflight, &c));
	n_max = limit < 2 ? limit : 2;

	/* nothing to record per admission: the observer is the verifier */
	size_t caps[STRESS_STREAMS] = { 0, 0 };
	struct stress_worker *w = stress_run(&o, step, caps);
	stress_clock_stop(&o);

	uint64_t worst = 0, admitted = 0;
	for (int i = 0; i < o.threads; i++) {
		if (w[i].err)
			stress_die("thread %d: %s (%s)", i, sluice_strerror(w[i].err),
			           sluice_err_name(w[i].err));
		if (w[i].stat[0] > worst)
			worst = w[i].stat[0];
		admitted += w[i].stat[1];
	}
	uint64_t left = atomic_load_explicit(&observed, memory_order_relaxed);
	uint64_t held = limit - sluice_inflight_available(&inflight); /* held <= K here */
	uint64_t bad = sluice_inflight_bad_releases(&inflight);
	char extra[96], ws[32], bs[32];
	snprintf(extra, sizeof(extra), " held_after=%llu observed_after=%llu bad_releases=%llu",
	         (unsigned long long)held, (unsigned long long)left, (unsigned long long)bad);
	snprintf(ws, sizeof(ws), "%llu", (unsigned long long)worst);
	snprintf(bs, sizeof(bs), "%llu", (unsigned long long)limit);
	int rc = stress_report(&o, stress_decisions(w, o.threads), admitted, extra, ws, bs,
	                       worst <= limit && left == 0 && held == 0 && bad == 0, 0);
	stress_free(w, o.threads);
	sluice_inflight_destroy(&inflight);
	return rc;
}
