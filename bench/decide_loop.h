/* SPDX-License-Identifier: MIT */
/*
 * bench/decide_loop.h - the decision loop every bench_algos series times:
 * BATCH decisions of n = 1 with the decision filled, admissions counted,
 * d.remaining summed into a per-thread sink so nothing is optimised away.
 * One copy for bench_algos.c (decision paths inline, SLUICE_INLINE) and
 * bench_algos_call.c (the same calls out of line, as a default caller
 * makes them), so the two series differ only in how the call is made.
 */
#ifndef BENCH_DECIDE_LOOP_H
#define BENCH_DECIDE_LOOP_H

#include <stdint.h>
#include <string.h>

#include "sluice/decision.h"

#define BATCH 256

#define NOTHING ((void)0)

#define LOOP(name, DECIDE, AFTER)                                               \
	static uint64_t name(void)                                             \
	{                                                                      \
		sluice_decision_t d;                                           \
		memset(&d, 0, sizeof(d));                                      \
		uint64_t admitted = 0, acc = 0;                                \
		for (unsigned i = 0; i < BATCH; i++) {                         \
			int rc_ = (DECIDE);                                    \
			admitted += rc_ == 1;                                  \
			acc += d.remaining;                                    \
			if (rc_ == 1) {                                        \
				AFTER;                                         \
			}                                                      \
		}                                                              \
		sink += acc;                                                   \
		return admitted;                                               \
	}

#endif /* BENCH_DECIDE_LOOP_H */
