/* SPDX-License-Identifier: MIT */
/* bench/bench_algos_call.h - the out-of-line loops of bench_algos_call.c. */
#ifndef BENCH_ALGOS_CALL_H
#define BENCH_ALGOS_CALL_H

#include <stdint.h>

#include "sluice/sluice.h"

/* The limiters the loops decide on: bench_algos' own, set once. */
void bench_call_use(sluice_fixed_t *f, sluice_window_t *w, sluice_gcra_t *g, sluice_leaky_t *l,
                    sluice_log_t *lg, sluice_warmup_t *wu, sluice_decay_t *dc, sluice_inflight_t *in);

uint64_t bench_call_fixed(void);
uint64_t bench_call_window(void);
uint64_t bench_call_gcra(void);
uint64_t bench_call_leaky(void);
uint64_t bench_call_log(void);
uint64_t bench_call_warmup(void);
uint64_t bench_call_decay(void);
uint64_t bench_call_inflight(void);

#endif /* BENCH_ALGOS_CALL_H */
