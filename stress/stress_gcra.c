/* SPDX-License-Identifier: MIT */
/*
 * stress_gcra - many threads, a real clock, one GCRA token bucket; verify
 * gcra.h's GUARANTEE over every admission recorded.
 *
 *   stress_gcra [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]
 *               [--rate=R] [--burst=B] [--cancel-every=K] [--self-test]
 *
 * GUARANTEE checked (gcra.h): for every interval [x, x + t] of the
 * limiter's timeline, the permits admitted at a time inside it total at most
 * b + t / T, T = sluice_gcra_interval_ns() (the rate's interval rounded up
 * to whole ns).  An admission's time is its now_ns; a reservation's is
 * now_ns + delay_ns, when its slot comes (the header states the bound
 * for those times too).  Workers acquire n = 1..3 and, one decision in four,
 * reserve a slot at most 2 T away.  One admission in K (default 8; 0: none)
 * is given back at once with sluice_gcra_cancel(): a booking cancelled
 * exactly "counts as never made" and is not recorded; one that could not be
 * (SLUICE_ECANCEL: something was booked after it) counts and is recorded.
 * The verifier (stress_worst_conform) checks every interval, not
 * only those starting at a refill: worst = max (permits - floor(t / T)),
 * bound = b.
 *
 * LEASES (--lease=B, --lease-v=K): the limiter runs with per-CPU leases of
 * up to B permits spent within V = K * T of their take (K a whole number
 * of intervals, so the bound stays a whole number of permits), and the
 * verifier checks gcra.h's lease bound, b + (t + V)/T = (b + K) + t/T, on
 * every interval of the merged log: worst <= b + K.  --break-lease makes
 * the run a deliberately broken lease, to prove the check fails on one:
 * each worker takes 2K + 2 permits at once through the real limiter
 * (recording nothing) and then "spends" them one per decision, each at a
 * reading at least 2V after that take, i.e. past V; the meson test expects
 * that run to fail.  --one-cpu=1 pins every worker to the CPU main runs
 * on: all share one lease cell and preempt one another on it, so deposits
 * lose the cell to each other and a spend's CAS can be followed by another
 * thread's deposit before its check (the refusal gcra.h's UNDER-ADMISSION
 * describes), which the bound must survive.
 *
 * LIVE CHANGES (--changes=K, --change-us=U, --change-lag-us=L): worker 0
 * makes K changes, one every U us (default 100; at once when behind),
 * cycling the rate between R and R/2 and the burst between b and 3b/2
 * (set_rate and set_burst alternately; --change-burst=0: the rate only,
 * so max(b) = b), while the other workers decide;
 * with L > 0 each change is stamped with a reading up to L us older than
 * the clock (set_*_at(now - lag): a setter that lags decisions already
 * made), else the plain setters read the clock themselves.  The verifier
 * checks gcra.h's bound across changes, max(b) + t / min(T) (with leases
 * + V / min(T)), over every interval of the merged log: worst <= 3b/2
 * (b with --change-burst=0) (+ K_V).  A run that made fewer than K changes proved nothing about the
 * rest and exits 2.  --stale-us=G: worker 1 plays a decider preempted
 * between its clock reading and its CAS: it reads the clock, waits a
 * random 0..2G us (watching the clock) and then takes, at that reading
 * (acquire_at), every permit it gets; its admissions count at it.  Readings that old
 * arrive after changes stamped later: gcra.h's READINGS ACROSS A CHANGE.
 *
 * Defaults: R = 50,000 per second (T = 20 us), b = 20: every tick of the
 * cached (1 ms) or coarse (4 ms) clock refills the whole bucket, so the
 * race for the last permits happens at every tick.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress_common.h"


static uint64_t n_max; /* largest n asked: stress_n_max() */

static const char usage[] =
	"usage: stress_gcra [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]\n"
	"                   [--rate=R (per second)] [--burst=B] [--cancel-every=K]\n"
	"                   [--lease=B] [--lease-v=K (V = K intervals)] [--break-lease=1]\n"
	"                   [--one-cpu=1] [--changes=K] [--change-us=U] [--change-lag-us=L]\n"
	"                   [--change-burst=0|1] [--stale-us=G]\n"
	"                   [--self-test]\n";

static uint64_t rate = 50000, burst = 20, cancel_every = 8, interval;
static uint64_t lease, lease_v = 4, break_lease, one_cpu;
static uint64_t changes, change_us = 100, change_lag_us, stale_us, change_burst = 1;
static _Atomic uint64_t changes_made;
static sluice_gcra_t gcra;

static const struct stress_u64_opt options[] = {
	{ "rate", &rate },
	{ "burst", &burst },
	{ "cancel-every", &cancel_every },
	{ "lease", &lease },
	{ "lease-v", &lease_v },
	{ "break-lease", &break_lease },
	{ "one-cpu", &one_cpu },
	{ "changes", &changes },
	{ "change-us", &change_us },
	{ "change-lag-us", &change_lag_us },
	{ "stale-us", &stale_us },
	{ "change-burst", &change_burst },
	{ NULL, NULL },
};

static int opt(const char *key, const char *val)
{
	return stress_u64_opts(options, key, val);
}

/* --break-lease: a private lease spent past V (stat[2] permits left,
 * taken at stat[3]).  Never what the library does: the check must fail. */
static int broken_step(struct stress_worker *w)
{
	sluice_decision_t d;
	uint64_t V = lease_v * interval;
	if (w->stat[2] == 0) {
		uint64_t k = 2 * lease_v + 2;
		int rc = sluice_gcra_acquire(&gcra, k < burst ? k : burst, &d);
		if (rc < 0)
			return stress_fail(w, rc);
		if (rc == 1)
			w->stat[2] = k < burst ? k : burst, w->stat[3] = d.now_ns;
		return 0;
	}
	uint64_t now = sluice_clock_now(gcra.clock);
	if (now - w->stat[3] < 2 * V)
		return 0; /* wait until the lease is well past V */
	w->stat[2]--;
	return !stress_record(w, 0, now, 1, 0);
}

/* --changes: worker 0 changes the rate or the burst every change_us
 * (stat[2]: when the next change is due), cycling (R, b), (R/2, b),
 * (R/2, 3b/2), (R, 3b/2). */
static int change_step(struct stress_worker *w)
{
	uint64_t k = atomic_load_explicit(&changes_made, memory_order_relaxed);
	if (k >= changes) {
		sched_yield();
		return 0;
	}
	uint64_t now = sluice_clock_now(gcra.clock);
	if (now < w->stat[2])
		return 0;
	w->stat[2] = (w->stat[2] ? w->stat[2] : now) + change_us * 1000;
	uint64_t lag = change_lag_us ? stress_rand(w) % (change_lag_us * 1000 + 1) : 0;
	uint64_t at = now > lag ? now - lag : 0;
	int rc;
	if (k % 2 == 0 || !change_burst) { /* the rate: R -> R/2 -> R */
		uint64_t r = (change_burst ? k % 4 == 0 : k % 2 == 0) ? rate / 2 : rate;
		rc = change_lag_us ? sluice_gcra_set_rate_at(&gcra, r, 1000000000ULL, at)
		                   : sluice_gcra_set_rate(&gcra, r, 1000000000ULL);
	} else { /* the burst: b -> 3b/2 -> b */
		uint64_t b = k % 4 == 1 ? burst + burst / 2 : burst;
		rc = change_lag_us ? sluice_gcra_set_burst_at(&gcra, b, at)
		                   : sluice_gcra_set_burst(&gcra, b);
	}
	if (rc < 0)
		return stress_fail(w, rc);
	atomic_store_explicit(&changes_made, k + 1, memory_order_relaxed);
	return 0;
}

/* --stale-us: a decision whose reading is up to 2G us old when it decides. */
static int stale_step(struct stress_worker *w)
{
	uint64_t r = sluice_clock_now(gcra.clock);
	uint64_t wait = stress_rand(w) % (2 * stale_us * 1000 + 1);
	while (sluice_clock_now(gcra.clock) - r < wait)
		;
	/* everything that reading gets, one permit at a time */
	for (uint64_t k = 0; k < 2 * burst; k++) {
		sluice_decision_t d;
		int rc = sluice_gcra_acquire_at(&gcra, 1, r, &d);
		if (rc < 0)
			return stress_fail(w, rc);
		if (rc == 0)
			break;
		if (!stress_record(w, 0, d.now_ns, 1, 0))
			return 1;
	}
	return 0;
}

static int step(struct stress_worker *w)
{
	if (break_lease && w->id == 0)
		return broken_step(w);
	if (changes && w->id == 0)
		return change_step(w);
	if (stale_us && w->id == 1)
		return stale_step(w);
	uint64_t x = stress_rand(w);
	uint64_t n = 1 + x % n_max;
	sluice_decision_t d;
	int rc;
	uint64_t t;
	if ((x >> 20) % 4 == 0) {
		rc = sluice_gcra_reserve(&gcra, n, 2 * interval, &d);
		t = d.now_ns + d.delay_ns; /* the slot */
	} else {
		rc = sluice_gcra_acquire(&gcra, n, &d);
		t = d.now_ns;
	}
	if (rc < 0)
		return stress_fail(w, rc);
	if (rc == 0 && d.retry_after_ns == 0)
		w->stat[2]++; /* a spend that could not prove its lease (gcra.h) */
	if (rc != 1)
		return 0;
	if (cancel_every && (x >> 30) % cancel_every == 0) {
		int c = sluice_gcra_cancel(&gcra, n, &d);
		if (c == 0) {
			w->stat[0]++; /* never made: not recorded */
			return 0;
		}
		if (c != SLUICE_ECANCEL)
			return stress_fail(w, c);
		w->stat[1]++; /* kept: it counts */
	}
	return !stress_record(w, 0, t, n, 0);
}

/* T = 10 ns, b = 3: the bound is reached exactly, then passed by one
 * permit at once, early, with n > 1, and over a long interval. */
static int self_test(void)
{
	struct stress_selftest st = { "gcra", 0, 0 };
	static const struct stress_rec rate_ok[] = { { 0, 3, 0 }, { 10, 1, 0 }, { 20, 1, 0 },
		                                     { 30, 1, 0 } };
	static const struct stress_rec burst1[] = { { 0, 3, 0 }, { 0, 1, 0 } };
	static const struct stress_rec early[] = { { 0, 3, 0 }, { 9, 1, 0 } };
	static const struct stress_rec n_ok[] = { { 0, 3, 0 }, { 20, 2, 0 } };
	static const struct stress_rec n_early[] = { { 0, 3, 0 }, { 19, 2, 0 } };
	/* twice the rate from empty: 3 + 2 over [0, 20] is fine, the 6th at
	 * 25 makes [0, 25] hold 6 > 3 + 2 */
	static const struct stress_rec fast_ok[] = { { 0, 1, 0 }, { 5, 1, 0 }, { 10, 1, 0 },
		                                     { 15, 1, 0 }, { 20, 1, 0 } };
	static const struct stress_rec fast[] = { { 0, 1, 0 },  { 5, 1, 0 },  { 10, 1, 0 },
		                                  { 15, 1, 0 }, { 20, 1, 0 }, { 25, 1, 0 } };
	/* an excess in the middle of a long conforming stream */
	static const struct stress_rec mid[] = { { 0, 1, 0 },   { 100, 3, 0 }, { 110, 1, 0 },
		                                 { 119, 1, 0 }, { 200, 1, 0 } };
	char det[64];
	uint64_t wst;
#define CASE(name, want, s)                                                        \
	wst = stress_worst_conform(s, sizeof(s) / sizeof(s[0]), 10, 1);             \
	snprintf(det, sizeof(det), "worst=%llu bound=3", (unsigned long long)wst); \
	stress_expect(&st, name, want, wst <= 3, det)
	/* The lease bound with V = T: b + (t + T)/T, worst <= b + 1 = 4.  A
	 * take at 0 books 1 + a lease of 2 (the bucket, b = 3, is empty);
	 * at 30 it is full again and 3 pass at once.  A lease permit spent
	 * then, booked within V before, makes 4: allowed.  The take's two
	 * lease permits spent at 30, 30 after their take (past V), make 5. */
	static const struct stress_rec lease_ok[] = { { 0, 1, 0 }, { 30, 3, 0 }, { 30, 1, 0 } };
	static const struct stress_rec lease_late[] = { { 0, 1, 0 }, { 30, 3, 0 }, { 30, 2, 0 } };
	wst = stress_worst_conform(lease_ok, 3, 10, 1);
	snprintf(det, sizeof(det), "worst=%llu bound=4", (unsigned long long)wst);
	stress_expect(&st, "lease: b + (t + V)/T reached", 1, wst <= 4, det);
	wst = stress_worst_conform(lease_late, 3, 10, 1);
	snprintf(det, sizeof(det), "worst=%llu bound=4", (unsigned long long)wst);
	stress_expect(&st, "lease: spent past V", 0, wst <= 4, det);
	CASE("b at once, then one per T", 1, rate_ok);
	CASE("b+1 at one instant", 0, burst1);
	CASE("b, then one 1 ns early", 0, early);
	CASE("b, then n=2 after 2T", 1, n_ok);
	CASE("b, then n=2 1 ns early", 0, n_early);
	CASE("2x rate from empty, at the bound", 1, fast_ok);
	CASE("2x rate from empty, one past it", 0, fast);
	CASE("excess mid-stream", 0, mid);
#undef CASE
	return stress_self_report(&st);
}

int main(int argc, char **argv)
{
	struct stress_opts o = { .algo = "gcra", .mode = "acquire+reserve" };
	stress_parse(argc, argv, &o, usage, opt);
	if (o.self_test)
		return self_test();
	if (cancel_every)
		o.mode = "acquire+reserve+cancel";
	stress_clock_start(&o);
	if (lease || break_lease)
		o.mode = break_lease ? "broken-lease" : cancel_every ? "lease+reserve+cancel"
		                                                     : "lease+reserve";
	sluice_gcra_config_t c = { .rate = rate, .period_ns = 1000000000ULL, .burst = burst,
		                   .clock = o.clock, .lease = (uint32_t)lease };
	/* V = K whole intervals, T known only once the rate is validated */
	stress_check_init("sluice_gcra_init", sluice_gcra_init(&gcra, &c));
	interval = sluice_gcra_interval_ns(&gcra);
	if (lease) {
		sluice_gcra_destroy(&gcra);
		c.lease_ns = lease_v * interval;
		stress_check_init("sluice_gcra_init", sluice_gcra_init(&gcra, &c));
	}
	n_max = stress_n_max(burst);
	/* the bound checked: b, or b + K with leases (or the broken one);
	 * across changes max(b) = 3b/2 and min(T) = T, the interval of R */
	uint64_t bound = (changes && change_burst ? burst + burst / 2 : burst) +
	                 (lease || break_lease ? lease_v : 0);
	if (changes) {
		if (o.threads < 2 || break_lease || rate < 2 || burst < 2)
			stress_die("--changes needs --threads >= 2, R >= 2, b >= 2, no --break-lease");
		o.mode = change_lag_us ? "acquire+reserve+cancel+lagging-changes"
		                       : "acquire+reserve+cancel+changes";
	}

	size_t caps[STRESS_STREAMS] = {
		stress_cap((double)(burst + lease_v) + (o.seconds + 1) * 1e9 / (double)interval), 0
	};
	if (one_cpu) { /* workers inherit main's affinity: one CPU, one cell */
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(sched_getcpu(), &set);
		if (sched_setaffinity(0, sizeof(set), &set) != 0) {
			perror("stress_gcra: sched_setaffinity");
			return 2;
		}
	}
	int incomplete = 0;
	struct stress_worker *w = stress_run(&o, step, caps);
	stress_clock_stop(&o);
	uint64_t made = atomic_load(&changes_made);
	if (made < changes) {
		fprintf(stderr, "stress_gcra: %llu of %llu changes made in the run: raise --seconds\n",
		        (unsigned long long)made, (unsigned long long)changes);
		incomplete = 1;
	}

	size_t n;
	uint64_t admitted;
	struct stress_rec *all = stress_merge(&o, w, 0, &n, &admitted, &incomplete);
	uint64_t worst = stress_worst_conform(all, n, interval, 1);
	uint64_t cancelled = 0, kept = 0, unproved = 0;
	for (int i = 0; i < o.threads; i++) {
		cancelled += w[i].stat[0], kept += w[i].stat[1];
		if (!((break_lease || changes) && i == 0)) /* worker 0's stat[2]: its lease, its deadline */
			unproved += w[i].stat[2];
	}
	char extra[240], ws[32], bs[32];
	snprintf(extra, sizeof(extra),
	         " interval_ns=%llu cancelled=%llu cancel_kept=%llu lease_v_ns=%llu spend_refused=%llu"
	         " changes=%llu",
	         (unsigned long long)interval, (unsigned long long)cancelled,
	         (unsigned long long)kept,
	         (unsigned long long)(lease || break_lease ? lease_v * interval : 0),
	         (unsigned long long)unproved, (unsigned long long)made);
	snprintf(ws, sizeof(ws), "%llu", (unsigned long long)worst);
	snprintf(bs, sizeof(bs), "%llu", (unsigned long long)bound);
	int rc = stress_report(&o, stress_decisions(w, o.threads), admitted, extra, ws, bs,
	                       worst <= bound, incomplete);
	free(all);
	stress_free(w, o.threads);
	sluice_gcra_destroy(&gcra);
	return rc;
}
