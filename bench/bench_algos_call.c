/* SPDX-License-Identifier: MIT */
/*
 * bench_algos_call.c - bench_algos' sluice loops built WITHOUT SLUICE_INLINE:
 * every decision is a call into the library, as a program built the default
 * way makes it (common.h, INLINE).  bench_algos.c, built with SLUICE_INLINE,
 * runs these beside its inline series (mode "<mode>/call"), in the same
 * process on the same limiters, so the table shows what the call costs.
 * The library is linked statically here, so the call is direct; a program
 * linked to libsluice.so adds the PLT's indirect jump.
 */
#ifdef SLUICE_INLINE
#error "bench_algos_call.c times the out-of-line calls: build it without SLUICE_INLINE"
#endif

#include "sluice/sluice.h"

#include "bench_algos_call.h"
#include "decide_loop.h"

static _Thread_local volatile uint64_t sink;

static sluice_fixed_t *fixed;
static sluice_window_t *window;
static sluice_gcra_t *gcra;
static sluice_leaky_t *leaky;
static sluice_log_t *log_;
static sluice_warmup_t *warmup;
static sluice_decay_t *decay;
static sluice_inflight_t *inflight;

void bench_call_use(sluice_fixed_t *f, sluice_window_t *w, sluice_gcra_t *g, sluice_leaky_t *l,
                    sluice_log_t *lg, sluice_warmup_t *wu, sluice_decay_t *dc, sluice_inflight_t *in)
{
	fixed = f, window = w, gcra = g, leaky = l, log_ = lg, warmup = wu, decay = dc, inflight = in;
}

LOOP(loop_fixed, sluice_fixed_acquire(fixed, 1, &d), NOTHING)
LOOP(loop_window, sluice_window_acquire(window, 1, &d), NOTHING)
LOOP(loop_gcra, sluice_gcra_acquire(gcra, 1, &d), NOTHING)
LOOP(loop_leaky, sluice_leaky_acquire(leaky, 1, &d), NOTHING)
LOOP(loop_log, sluice_log_acquire(log_, 1, &d), NOTHING)
LOOP(loop_warmup, sluice_warmup_acquire(warmup, 1, &d), NOTHING)
LOOP(loop_decay, sluice_decay_acquire(decay, 1, &d), NOTHING)
LOOP(loop_inflight, sluice_inflight_acquire(inflight, 1, &d), sluice_inflight_release(inflight, 1))

uint64_t bench_call_fixed(void) { return loop_fixed(); }
uint64_t bench_call_window(void) { return loop_window(); }
uint64_t bench_call_gcra(void) { return loop_gcra(); }
uint64_t bench_call_leaky(void) { return loop_leaky(); }
uint64_t bench_call_log(void) { return loop_log(); }
uint64_t bench_call_warmup(void) { return loop_warmup(); }
uint64_t bench_call_decay(void) { return loop_decay(); }
uint64_t bench_call_inflight(void) { return loop_inflight(); }
