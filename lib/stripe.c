/* SPDX-License-Identifier: MIT */
/*
 * stripe.c - the per-CPU cells' allocation (stripes, and the sliding
 * window's lease cells) and the LongAdder probe.
 *
 * DESIGN: cells are written only with atomic RMWs (fetch_add, CAS, exchange)
 * and read with relaxed loads; a counter publishes nothing but its own
 * value, so no operation needs stronger ordering.  The probe is a plain
 * thread-local: only its own thread reads or writes it.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "sluice/error.h"
#include "sluice/stripe.h"
#include "stripe_internal.h"
#include "util_internal.h"


void *sluice__stripe_alloc(size_t cell_bytes, uint32_t *ncells, int *rc)
{
	uint32_t n = *ncells;
	if (n == 0) {
		int cpus = get_nprocs_conf();
		n = cpus > 0 ? (uint32_t)cpus : 1;
		if (n > SLUICE_STRIPE_CELLS_MAX)
			n = SLUICE_STRIPE_CELLS_MAX; /* CPUs beyond share cells */
	}
	if (n > SLUICE_STRIPE_CELLS_MAX) {
		*rc = SLUICE_ECELLS;
		return NULL;
	}
	n = (uint32_t)sluice__pow2_at_least(n);
	void *cells = aligned_alloc(SLUICE_CACHELINE, cell_bytes * n);
	if (!cells) {
		*rc = SLUICE_ENOMEM;
		return NULL;
	}
	*ncells = n;
	*rc = 0;
	return cells;
}

int sluice_stripe_init(sluice_stripe_t *s, uint32_t ncells, sluice_stripe_mode_t mode)
{
	if (!s)
		return SLUICE_EINVAL;
	if (mode != SLUICE_STRIPE_BY_CPU && mode != SLUICE_STRIPE_BY_PROBE)
		return SLUICE_EMODE;
	int rc;
	struct sluice_stripe_cell *cells = sluice__stripe_alloc(sizeof(*cells), &ncells, &rc);
	if (!cells)
		return rc;
	for (uint32_t i = 0; i < ncells; i++)
		for (size_t j = 0; j < SLUICE_STRIPE_CELL_WORDS; j++)
			atomic_init(&cells[i].word[j], 0);
	s->cells = cells;
	s->mask = ncells - 1;
	s->mode = mode;
	s->caller_memory = 0;
	return 0;
}

size_t sluice_stripe_bytes(uint32_t ncells)
{
	if (ncells == 0 || ncells > SLUICE_STRIPE_CELLS_MAX || (ncells & (ncells - 1)))
		return 0;
	return (size_t)ncells * sizeof(struct sluice_stripe_cell);
}

int sluice_stripe_attach(sluice_stripe_t *s, void *mem, size_t bytes, uint32_t ncells,
                         sluice_stripe_mode_t mode)
{
	if (!s || !mem || ((uintptr_t)mem & (SLUICE_CACHELINE - 1)))
		return SLUICE_EINVAL;
	if (mode != SLUICE_STRIPE_BY_CPU && mode != SLUICE_STRIPE_BY_PROBE)
		return SLUICE_EMODE;
	size_t need = sluice_stripe_bytes(ncells);
	if (!need)
		return SLUICE_ECELLS;
	if (bytes < need)
		return SLUICE_EINVAL;
	s->cells = mem;
	s->mask = ncells - 1;
	s->mode = mode;
	s->caller_memory = 1;
	return 0;
}

void sluice_stripe_destroy(sluice_stripe_t *s)
{
	if (s) {
		if (!s->caller_memory)
			free(s->cells);
		s->cells = NULL; /* a second destroy frees nothing */
	}
}

int64_t sluice_stripe_sum_and_reset(sluice_stripe_t *s)
{
	uint64_t total = 0; /* wraps, as sum() */
	for (uint32_t i = 0; i <= s->mask; i++)
		total += (uint64_t)atomic_exchange_explicit(&s->cells[i].word[0], 0,
		                                            memory_order_relaxed);
	return (int64_t)total;
}

unsigned sluice_inline_getcpu(void)
{
	int cpu = sched_getcpu();
	return cpu < 0 ? 0u : (unsigned)cpu;
}

static _Thread_local uint32_t probe_state;
static _Atomic uint32_t probe_seed_counter;

uint32_t *sluice_inline_stripe_probe(void)
{
	if (SLUICE_UNLIKELY(probe_state == 0)) {
		/* Successive threads take successive multiples of the golden
		 * ratio, as Java's ThreadLocalRandom seeds its probes: they
		 * start on well spread cells, whatever the cell count, and a
		 * thread reusing a dead thread's stack does not inherit its
		 * cell.  Relaxed: only uniqueness matters.  0 means unseeded. */
		uint32_t k = atomic_fetch_add_explicit(&probe_seed_counter, 1, memory_order_relaxed);
		uint32_t seed = (k + 1) * 0x9E3779B9u;
		probe_state = seed ? seed : 1u;
	}
	return &probe_state;
}

void sluice_inline_stripe_probe_move(uint32_t *probe)
{
	/* xorshift32, as LongAdder's advanceProbe: cheap and never 0. */
	uint32_t x = *probe;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*probe = x ? x : 1u;
}
