/* SPDX-License-Identifier: MIT */
/*
 * stress_decay - many threads, a real clock, one decayed-count limiter;
 * verify decay.h's GUARANTEE over every admission recorded.
 *
 *   stress_decay [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]
 *                [--limit=L] [--half-life-us=H] [--self-test]
 *
 * GUARANTEE checked (decay.h), eps = 2^(1-F), F = 32 - bitlen(L):
 *   (i)  at every admission, the exactly decayed sum of all admitted
 *        permits, this one included, sum n_i 2^(-(t - t_i)/h) over the
 *        admissions so far (t_i their now_ns), is at most L + eps.
 *        "So far": an admission's now_ns is never older than the newest
 *        time an admission used (CLOCK JUMPS), so now_ns order is the
 *        admission (CAS) order, up to ties; admissions at one instant are
 *        summed together, which is the sum after the last of them.
 *        worst = the largest such sum, bound = L + eps.
 *   (ii) the permits admitted in any interval of length D number at most
 *        (L + eps)(1 + D ln2 / h): one pass with a running minimum, as for
 *        GCRA (printed as interval_worst = max over intervals of permits -
 *        (L + eps) D ln2 / h, against the same bound).  (ii) follows from
 *        (i); it is checked as well because the header states it and it
 *        exercises different arithmetic.
 * The sums are computed in long double (64-bit mantissa) with times taken
 * from the first admission: the rounding error is below 1e-12 of a permit
 * for any run here, far under eps (2^-30 at L = 1, 2^-7 at the largest L).
 *
 * Defaults: L = 50, h = 10 ms: saturated traffic admits about
 * L ln2 / h = 3,500 permits a second, the count never rests.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress_common.h"


static uint64_t n_max; /* largest n asked: stress_n_max() */

static const char usage[] =
	"usage: stress_decay [--threads=T] [--seconds=S] [--clock=monotonic|coarse|cached]\n"
	"                    [--limit=L] [--half-life-us=H] [--self-test]\n";

static uint64_t limit = 50, half_life_us = 10000;
static sluice_decay_t decay;

static const struct stress_u64_opt options[] = {
	{ "limit", &limit },
	{ "half-life-us", &half_life_us },
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
	int rc = sluice_decay_acquire(&decay, n, &d);
	if (rc < 0)
		return stress_fail(w, rc);
	return rc == 1 && !stress_record(w, 0, d.now_ns, n, 0);
}

/* eps = 2^(1-F), F = 32 - bitlen(L) (decay.h, PRECISION). */
static long double epsilon(uint64_t l)
{
	int bits = 0;
	while (l >> bits)
		bits++;
	return ldexpl(1.0L, 1 - (32 - bits));
}

/* (i): the largest decayed sum right after an admission. */
static long double worst_sum(const struct stress_rec *r, size_t n, uint64_t h)
{
	long double s = 0, worst = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && r[i].t != r[i - 1].t)
			s *= exp2l(-(long double)(r[i].t - r[i - 1].t) / (long double)h);
		s += r[i].n;
		if (s > worst)
			worst = s;
	}
	return worst;
}

/* (ii): max over intervals [t_i, t_j] of permits - c (t_j - t_i),
 * c = (L + eps) ln2 / h. */
static long double worst_interval(const struct stress_rec *r, size_t n, uint64_t h,
                                  long double bound)
{
	long double c = bound * logl(2.0L) / (long double)h;
	long double p = 0, minv = 0, best = 0;
	for (size_t j = 0; j < n; j++) {
		long double tj = (long double)(r[j].t - r[0].t);
		long double cand = p - c * tj; /* i = j */
		if (j == 0 || cand < minv)
			minv = cand;
		p += r[j].n;
		long double e = p - c * tj - minv;
		if (e > best)
			best = e;
	}
	return best;
}

/* L = 3, h = 1000 ns. */
static int self_test(void)
{
	struct stress_selftest st = { "decay", 0, 0 };
	long double bound = 3 + epsilon(3);
	static const struct stress_rec burst[] = { { 0, 3, 0 } };
	static const struct stress_rec twice[] = { { 0, 2, 0 }, { 0, 2, 0 } };
	/* 2 decays to exactly 1 in one half-life: 1 + 2 = L */
	static const struct stress_rec half[] = { { 0, 2, 0 }, { 1000, 2, 0 } };
	static const struct stress_rec early[] = { { 0, 2, 0 }, { 999, 2, 0 } };
	static const struct stress_rec soon[] = { { 0, 3, 0 }, { 100, 1, 0 } };
	/* 1/64 + 2 at 6000 is fine; at 7000 that halves, + 2 = 3.008 */
	static const struct stress_rec mid[] = { { 0, 1, 0 }, { 6000, 2, 0 }, { 7000, 2, 0 } };
	static const struct stress_rec idle[] = { { 0, 3, 0 }, { 40000, 3, 0 } };
	char det[96];
	long double wst;
#define CASE(name, want, s)                                                                 \
	wst = worst_sum(s, sizeof(s) / sizeof(s[0]), 1000);                                  \
	snprintf(det, sizeof(det), "worst=%.9Lf bound=%.9Lf", wst, bound);                   \
	stress_expect(&st, name, want, wst <= bound, det)
	CASE("(i) L at once", 1, burst);
	CASE("(i) L+1 at one instant", 0, twice);
	CASE("(i) L again after it halves", 1, half);
	CASE("(i) the same 1 ns early", 0, early);
	CASE("(i) one more soon after L", 0, soon);
	CASE("(i) excess mid-stream", 0, mid);
	CASE("(i) L after a long idle", 1, idle);
#undef CASE
	/* (ii) over D = 1000: (L + eps)(1 + ln2) = 5.08 permits */
	static const struct stress_rec rate_ok[] = { { 0, 3, 0 }, { 1000, 2, 0 } };
	static const struct stress_rec rate_bad[] = { { 0, 3, 0 }, { 100, 3, 0 } };
#define CASE(name, want, s)                                                                 \
	wst = worst_interval(s, sizeof(s) / sizeof(s[0]), 1000, bound);                      \
	snprintf(det, sizeof(det), "interval_worst=%.6Lf bound=%.6Lf", wst, bound);          \
	stress_expect(&st, name, want, wst <= bound, det)
	CASE("(ii) 5 permits over one half-life", 1, rate_ok);
	CASE("(ii) 6 permits within 0.1 half-life", 0, rate_bad);
#undef CASE
	return stress_self_report(&st);
}

int main(int argc, char **argv)
{
	struct stress_opts o = { .algo = "decay", .mode = "acquire" };
	stress_parse(argc, argv, &o, usage, opt);
	if (o.self_test)
		return self_test();
	if (half_life_us == 0 || half_life_us > 1000000000ULL)
		stress_die("--half-life-us: 1..10^9");
	uint64_t h = half_life_us * 1000;
	stress_clock_start(&o);
	sluice_decay_config_t c = { .limit = limit, .half_life_ns = h, .clock = o.clock };
	stress_check_init("sluice_decay_init", sluice_decay_init(&decay, &c));
	n_max = stress_n_max(limit);
	long double bound = (long double)limit + epsilon(limit);

	/* (ii) over the run: L (1 + D ln2 / h) */
	double permits = (double)limit * (1 + (o.seconds + 1) * 1e9 * 0.6931471805599453 / (double)h);
	size_t caps[STRESS_STREAMS] = { stress_cap(permits), 0 };
	struct stress_worker *w = stress_run(&o, step, caps);
	stress_clock_stop(&o);

	size_t n;
	uint64_t admitted;
	int incomplete = 0;
	struct stress_rec *all = stress_merge(&o, w, 0, &n, &admitted, &incomplete);
	long double worst = worst_sum(all, n, h);
	long double iworst = worst_interval(all, n, h, bound);
	char extra[64], ws[48], bs[48];
	snprintf(extra, sizeof(extra), " interval_worst=%.6Lf", iworst);
	snprintf(ws, sizeof(ws), "%.9Lf", worst);
	snprintf(bs, sizeof(bs), "%.9Lf", bound);
	int rc = stress_report(&o, stress_decisions(w, o.threads), admitted, extra, ws, bs,
	                       worst <= bound && iworst <= bound, incomplete);
	free(all);
	stress_free(w, o.threads);
	sluice_decay_destroy(&decay);
	return rc;
}
