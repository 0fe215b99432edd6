/* SPDX-License-Identifier: MIT */
/*
 * writer_internal.h - the flag a limiter's setters serialise on (never
 * installed): GCRA's set_rate/set_burst, decay's set_limit, warm-up's
 * set_rate.  Decisions never take it; they go on while a setter runs.
 */
#ifndef SLUICE_WRITER_INTERNAL_H
#define SLUICE_WRITER_INTERNAL_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "sluice/clock.h"
#include "sluice/error.h"

/*
 * sluice__writer_take - take @flag, waiting (sched_yield) at most @wait_ns
 * on CLOCK_MONOTONIC.  Bounded: a holder that was stopped (SIGSTOP, a
 * signal handler that never returns) would otherwise keep every later
 * setter waiting for ever; a running holder keeps it for microseconds, a
 * preempted one for a scheduling delay.
 * Return: 0 (taken), or SLUICE_ETIMEDOUT (not taken, nothing changed).
 */
static inline int sluice__writer_take(_Atomic uint32_t *flag, uint64_t wait_ns)
{
	uint64_t since = 0;
	/* Acquire: pairs with sluice__writer_drop()'s release, so the previous
	 * setter's whole change happens before this one's reads. */
	while (atomic_exchange_explicit(flag, 1, memory_order_acquire)) {
		uint64_t t = sluice_clock_monotonic_ns();
		if (since == 0)
			since = t;
		else if (t - since >= wait_ns)
			return SLUICE_ETIMEDOUT;
		sched_yield();
	}
	return 0;
}

/* sluice__writer_drop - release @flag: the change is complete (pairs with
 * the acquire of the next sluice__writer_take()). */
static inline void sluice__writer_drop(_Atomic uint32_t *flag)
{
	atomic_store_explicit(flag, 0, memory_order_release);
}

#endif /* SLUICE_WRITER_INTERNAL_H */
