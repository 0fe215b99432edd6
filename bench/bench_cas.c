/* SPDX-License-Identifier: MIT */
/*
 * bench_cas.c - what the full-width design costs at the instruction level:
 * one thread, a dependent chain of (load, CAS) on one word, three ways:
 *   cas64        a 64-bit CAS (LOCK CMPXCHG): what every decision does
 *   cas64_check  the same plus the load of a second word and the compare
 *                that decisions do after their CAS (window.h, fixed.h)
 *   cas128       the double-width CAS of lib/pair_internal.h (CMPXCHG16B):
 *                what a decision would pay if it CASed word and epoch
 * Each is timed --repeats times for --seconds with CLOCK_MONOTONIC; the
 * median is reported, with the ratios to cas64 from the same run.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "bench_common.h"
#include "pair_internal.h"

static struct {
	_Alignas(64) _Atomic uint64_t word;
	_Atomic uint64_t epoch;
	_Atomic uint64_t head;
} line;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum { CAS64, CAS64_CHECK, CAS128, KINDS };
static const char *kind_name[KINDS] = { "cas64", "cas64_check", "cas128" };

/* ns per (load, CAS) over about @seconds; chunks of 2^16 between clock reads */
static double run(int kind, double seconds)
{
	uint64_t ops = 0, t0 = now_ns(), stale = 0;
	uint64_t budget = (uint64_t)(seconds * 1e9);
	while (now_ns() - t0 < budget) {
		for (int i = 0; i < 1 << 16; i++) {
			uint64_t w = atomic_load_explicit(&line.word, memory_order_relaxed);
			if (kind == CAS128) {
				uint64_t e = atomic_load_explicit(&line.epoch, memory_order_relaxed);
				sluice__pair_cas(&line.word, w, e, w + 1, e);
			} else if (atomic_compare_exchange_strong_explicit(&line.word, &w, w + 1,
			                                                   memory_order_acquire,
			                                                   memory_order_relaxed) &&
			           kind == CAS64_CHECK) {
				stale += atomic_load_explicit(&line.head, memory_order_relaxed) - w >=
				         (1ULL << 32);
			}
		}
		ops += 1 << 16;
	}
	if (stale == UINT64_MAX)
		puts(""); /* keeps the check from being optimised away */
	return (double)(now_ns() - t0) / (double)ops;
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	int rc = bench_parse_args(argc, argv, "bench_cas", &o);
	if (rc)
		return rc;
	double v[KINDS][64], med[KINDS];
	unsigned reps = o.repeats > 64 ? 64 : o.repeats;
	for (unsigned r = 0; r < reps; r++) /* interleaved, so drift hits all alike */
		for (int k = 0; k < KINDS; k++)
			v[k][r] = run(k, o.seconds);
	for (int k = 0; k < KINDS; k++) {
		med[k] = bench_median(v[k], reps);
		printf("bench cas kind=%s threads=1 clock=monotonic ns_per_op=%.2f min=%.2f max=%.2f "
		       "vs_cas64=%.2f\n",
		       kind_name[k], med[k], v[k][0], v[k][reps - 1], med[k] / med[CAS64]);
	}
	printf("\none thread, dependent (load, CAS) chain, median of %u x %.2f s:\n", reps,
	       o.seconds);
	for (int k = 0; k < KINDS; k++)
		printf("  %-12s %6.2f ns  %.2fx cas64\n", kind_name[k], med[k], med[k] / med[CAS64]);
	return 0;
}
