/* SPDX-License-Identifier: MIT */
/*
 * advise.c - `sluice-sim advise`: how many buckets a ring needs for a
 * tolerance, what it costs, and when another algorithm fits better.
 *
 * DESIGN.  The formula (stated in --help and docs/sim.md, tested in
 * tests/core/test_sim.c):
 *
 *   The ring (sluice/window.h) bounds every run of N consecutive buckets
 *   to L.  An interval of length W that is not bucket-aligned overlaps
 *   N + 1 buckets, so with traffic spread evenly it can hold about one
 *   bucket's share more: the overshoot is about L / N (window.h: "about
 *   L (1 + 1/N)").  Keeping L / N <= tolerance * L gives
 *
 *       N = ceil(1 / tolerance),
 *
 *   raised to the first count that divides W into whole nanoseconds (the
 *   ring requires W % N == 0) and at most SLUICE_WINDOW_BUCKETS_MAX.
 *   Memory: sluice_window_size() + 8 bytes per slot, slots = N rounded up
 *   to a power of two (window.h MEMORY).  Adversarial worst case
 *   (window.h): 2L within W - W/N + 1 ns, whatever N.
 *
 *   Alternatives: the exact sliding log holds L in every interval of W at
 *   sluice_log_size() + 8 (L + 1) bytes (log.h): it is picked when that is
 *   no more than the ring's memory (L + 1 <= slots) or when no ring fits.
 *   GCRA with burst b holds at most b + L in any interval of W,
 *   adversarial timing included (gcra.h: b + t/T), in sluice_gcra_size()
 *   bytes; b = max(1, floor(tolerance * L)) meets the tolerance when the
 *   clients never need to send more than b at once.  It is picked only
 *   when neither a ring nor a log fits.
 */
#include <string.h>

#include "sim.h"

__extension__ typedef unsigned __int128 u128;

int sim_advise(uint64_t limit, uint64_t window_ns, uint64_t num, uint64_t den, sim_advice_t *a,
               char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	if (limit == 0 || window_ns == 0 || num == 0 || den == 0) {
		snprintf(err, errlen, "advise: the limit, the window and the tolerance must be above 0");
		return -1;
	}
	a->limit = limit;
	a->window_ns = window_ns;
	a->tol_num = num;
	a->tol_den = den;
	a->n_min = den / num + (den % num != 0);
	if (a->n_min == 0)
		a->n_min = 1;
	if (limit > SLUICE_WINDOW_LIMIT_MAX) {
		a->no_ring = "L is above the ring's maximum (2^30 - 1)";
	} else if (a->n_min > SLUICE_WINDOW_BUCKETS_MAX) {
		a->no_ring = "the tolerance needs more than 4096 buckets";
	} else {
		for (uint64_t n = a->n_min; n <= SLUICE_WINDOW_BUCKETS_MAX; n++) {
			if (window_ns % n == 0) {
				a->buckets = (uint32_t)n;
				break;
			}
		}
		if (!a->buckets)
			a->no_ring = "no bucket count from ceil(1/tolerance) to 4096 divides W";
	}
	if (a->buckets) {
		a->width_ns = window_ns / a->buckets;
		a->slots = 1;
		while (a->slots < a->buckets)
			a->slots *= 2;
		a->ring_bytes = sluice_window_size() + 8 * a->slots;
		a->overshoot = (double)limit / a->buckets;
		a->adv_span_ns = window_ns - a->width_ns;
		a->clock_ok = a->width_ns >= SLUICE_CACHED_PERIOD_NS;
	}
	a->adv_worst = 2 * limit;
	if (limit <= SLUICE_LOG_LIMIT_MAX)
		a->log_bytes = sluice_log_size() + 8 * (limit + 1);
	a->gcra_bytes = sluice_gcra_size();
	u128 b = (u128)limit * num / den;
	a->gcra_burst = b < 1 ? 1 : b > limit ? limit : (uint64_t)b;

	if (!a->buckets)
		a->pick = a->log_bytes ? SIM_PICK_LOG : SIM_PICK_GCRA;
	else if (a->log_bytes && a->log_bytes <= a->ring_bytes)
		a->pick = SIM_PICK_LOG;
	else
		a->pick = SIM_PICK_RING;
	return 0;
}

int sim_advise_measure(const sim_advice_t *a, uint64_t rho_num, uint64_t rho_den, uint64_t seed,
                       uint64_t *worst, uint64_t *duration_ns, char *err, size_t errlen)
{
	if (!a->buckets)
		return 1;
	/* windows of traffic: 60, or fewer to stay within 2e6 requests */
	u128 per_window = (u128)a->limit * rho_num / rho_den + 1;
	u128 windows = 2000000 / per_window;
	if (windows > 60)
		windows = 60;
	if (windows < 5 || (u128)a->window_ns * windows > UINT64_MAX / 2)
		return 1;
	char spec[64];
	snprintf(spec, sizeof(spec), "ring:buckets=%u", a->buckets);
	sim_algo_t algo;
	if (sim_algo_parse(spec, a->limit, a->window_ns, &algo, err, errlen) != 0)
		return -1;
	sim_run_config_t rc = {
		.traffic = { .profile = SIM_POISSON, .start_ns = 0,
			     .duration_ns = (uint64_t)windows * a->window_ns,
			     .permits = 1, .seed = seed },
		.bin_ns = a->window_ns,
		.max_events = 4000000,
		.max_bins = SIM_MAX_BINS,
	};
	u128 num = (u128)rho_num * a->limit, den = (u128)rho_den * a->window_ns;
	while (num > UINT64_MAX || den > UINT64_MAX) {
		num >>= 1;
		den >>= 1;
	}
	rc.traffic.rate_num = (uint64_t)num;
	rc.traffic.rate_den = (uint64_t)den;
	sim_result_t r;
	if (sim_run(&rc, &algo, &r, err, errlen) != 0)
		return -1;
	sim_sort_events(r.adm, r.nadm);
	*worst = sim_worst_in(r.adm, r.nadm, a->window_ns).count;
	*duration_ns = rc.traffic.duration_ns;
	sim_result_free(&r);
	return 0;
}

static const char *dur(uint64_t ns, char *buf)
{
	return sim_format_duration(ns, buf, 32);
}

void sim_advice_print(FILE *f, const sim_advice_t *a, int measure)
{
	char b1[32], b2[32];
	double tol = 100.0 * (double)a->tol_num / (double)a->tol_den;
	double tol_permits = (double)a->limit * (double)a->tol_num / (double)a->tol_den;
	fprintf(f, "sluice-sim advise: L = %llu per W = %s, tolerance %.6g%% of L (%.6g permits)\n\n",
	        (unsigned long long)a->limit, dur(a->window_ns, b1), tol, tol_permits);
	fprintf(f, "  Formula: a ring of N buckets holds every N consecutive buckets to L; an\n"
	           "  interval of W that is not aligned overlaps one bucket more, so traffic\n"
	           "  spread evenly sees about L/N above L.  L/N <= tolerance x L gives\n"
	           "  N = ceil(1 / tolerance) = %llu, raised to the first count <= 4096 that\n"
	           "  divides W into whole ns.\n\n",
	        (unsigned long long)a->n_min);
	if (a->buckets) {
		fprintf(f, "  sliding ring, N = %u buckets of %s\n", a->buckets, dur(a->width_ns, b1));
		fprintf(f, "    uniform traffic   overshoot about L/N = %.4g permits (%.4g%% of L)\n",
		        a->overshoot, 100.0 / a->buckets);
		fprintf(f, "    adversarial       2L = %llu within W - W/N = %s (bursts timed at bucket edges)\n",
		        (unsigned long long)a->adv_worst, dur(a->adv_span_ns, b2));
		fprintf(f, "    memory            %zu + 8 x %llu slots = %llu bytes\n",
		        sluice_window_size(), (unsigned long long)a->slots,
		        (unsigned long long)a->ring_bytes);
		if (measure) {
			static const struct {
				uint64_t num, den;
				const char *name;
			} rho[] = { { 3, 2, "1.5x" }, { 3, 1, "3x" }, { 10, 1, "10x" } };
			for (size_t i = 0; i < sizeof(rho) / sizeof(rho[0]); i++) {
				uint64_t worst = 0, d = 0;
				char err[256];
				int rc = sim_advise_measure(a, rho[i].num, rho[i].den, 1, &worst, &d, err,
				                            sizeof(err));
				if (rc < 0) {
					fprintf(f, "    measured          (failed: %s)\n", err);
					break;
				}
				if (rc > 0) {
					fprintf(f, "    measured          (skipped: L is too large for a quick run)\n");
					break;
				}
				fprintf(f, "    measured          worst W = %llu (%+.3g%% of L): Poisson at %s L/W, %s, seed 1\n",
				        (unsigned long long)worst,
				        100.0 * ((double)worst - (double)a->limit) / (double)a->limit,
				        rho[i].name, dur(d, b1));
				if (i + 1 == sizeof(rho) / sizeof(rho[0]))
					fprintf(f, "                      (the real ring, sluice-sim --profile poisson.  Evenly\n"
					           "                      spaced traffic measures +0%%; random traffic above the\n"
					           "                      rate fills some buckets fuller than L/N, and the overshoot\n"
					           "                      is bounded by the fullest bucket, so it can pass L/N when\n"
					           "                      L/N is a few permits or the overload is heavy)\n");
			}
		}
		if (!a->clock_ok)
			fprintf(f, "    clock             buckets of %s are narrower than the cached clock's\n"
			           "                      default period (1 ms): start its ticker with a period\n"
			           "                      <= %s, or use sluice_clock_monotonic\n",
			        dur(a->width_ns, b1), dur(a->width_ns, b2));
	} else {
		fprintf(f, "  sliding ring: none fits (%s)\n", a->no_ring);
	}
	if (a->log_bytes)
		fprintf(f, "  exact sliding log\n"
		           "    any traffic       never above L = %llu in any interval of W\n"
		           "    memory            %zu + 8 x (L + 1) = %llu bytes\n",
		        (unsigned long long)a->limit, sluice_log_size(),
		        (unsigned long long)a->log_bytes);
	else
		fprintf(f, "  exact sliding log: L is above its cap (2^24 entries, 128 MiB)\n");
	fprintf(f, "  GCRA, burst b = %llu\n"
	           "    any traffic       at most L + b = %llu in any interval of W%s\n"
	           "    but               refuses more than %llu at one instant (no bursts)\n"
	           "    memory            %llu bytes (the state is one 64-bit word)\n\n",
	        (unsigned long long)a->gcra_burst, (unsigned long long)(a->limit + a->gcra_burst),
	        tol_permits < 1 ? " (b = 1 is already above the tolerance)" : "",
	        (unsigned long long)a->gcra_burst, (unsigned long long)a->gcra_bytes);

	switch (a->pick) {
	case SIM_PICK_LOG:
		if (a->buckets)
			fprintf(f, "  Pick: the exact sliding log (--algo log): L + 1 = %llu <= %llu slots,\n"
			           "  so it is exact for no more memory than the ring.\n",
			        (unsigned long long)(a->limit + 1), (unsigned long long)a->slots);
		else
			fprintf(f, "  Pick: the exact sliding log (--algo log): no ring fits.\n");
		break;
	case SIM_PICK_GCRA:
		fprintf(f, "  Pick: GCRA with burst %llu (--algo gcra:burst=%llu): no ring fits and L\n"
		           "  is above the sliding log's cap.\n",
		        (unsigned long long)a->gcra_burst, (unsigned long long)a->gcra_burst);
		break;
	case SIM_PICK_RING:
		fprintf(f, "  Pick: the sliding ring (--algo ring:buckets=%u) for traffic that is not\n"
		           "  timed against it.  Where clients may time bursts at bucket edges,\n",
		        a->buckets);
		if (a->log_bytes)
			fprintf(f, "  the sliding log is exact for %.3gx the ring's memory; ",
			        (double)a->log_bytes / (double)a->ring_bytes);
		else
			fprintf(f, "  (the sliding log cannot hold this L) ");
		fprintf(f, "GCRA (b = %llu) needs\n"
		           "  only %llu bytes if clients never send more than %llu at once.\n",
		        (unsigned long long)a->gcra_burst, (unsigned long long)a->gcra_bytes,
		        (unsigned long long)a->gcra_burst);
		break;
	}
}
