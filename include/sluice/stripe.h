/* SPDX-License-Identifier: MIT */
/*
 * sluice/stripe.h - striped counter (LongAdder semantics), the library's
 * one per-CPU cell type and its picker.
 *
 * The cell (struct sluice_stripe_cell) is a cache line of 64-bit counters,
 * one line per CPU, picked by sluice_cpu().  Three users, one type and one
 * picker: a stripe (one counter per cell, below), a keyed table's
 * statistics (seven counters per cell, in the table's shared region:
 * lib/keyed_table.c), and, for its picker and allocation only, the sliding
 * window's lease cells (window.h says why their line holds a 16-byte
 * (lease, epoch) pair for a double-width CAS instead of counters).
 *
 * A stripe is an array of 64-bit cells, each on its own cache line.  add()
 * touches one cell, so threads on different CPUs never write the same line;
 * sum() reads every cell.  Use it for counts that are written far more often
 * than read (statistics: keyed tables, the rules engine's metrics).
 *
 * Cell choice (fixed at init):
 *   SLUICE_STRIPE_BY_CPU    the cell of the CPU the thread runs on, read
 *                           from the kernel's rseq area (one load) or from
 *                           sched_getcpu().  A thread migrated between the
 *                           read and the add simply adds to another CPU's
 *                           cell: adds are atomic, so nothing is lost.
 *   SLUICE_STRIPE_BY_PROBE  a per-thread probe index, as in Java's
 *                           LongAdder: the add is a CAS, and a thread whose
 *                           CAS fails (another thread shares its cell) moves
 *                           its probe to another cell for next time.  For
 *                           platforms without a cheap CPU number, or threads
 *                           pinned more densely than CPUs.
 *
 * Guarantees:
 *   - add() is lock-free, wait-free for BY_CPU, and never loses an add.
 *   - sum() is exact when no add runs concurrently (quiescent).
 *   - A concurrent sum() reads each cell once; for adds of non-negative n it
 *     returns a value between the true total when sum() began and the true
 *     total when it returned: the error is bounded by the sum of the adds
 *     that ran during the call.  It is not a snapshot of any one instant.
 *   - sum_and_reset() swaps each cell with 0 atomically: every add lands in
 *     exactly one sum_and_reset() result (or in the cells afterwards), so
 *     successive calls partition the adds with none lost or counted twice.
 * Memory: 64 bytes per cell; cells = possible CPUs by default.
 */
#ifndef SLUICE_STRIPE_H
#define SLUICE_STRIPE_H

#include <stdatomic.h>
#include <stdint.h>

#include "common.h"

#if defined(__has_include)
#if __has_include(<sys/rseq.h>) && (defined(__x86_64__) || defined(__aarch64__))
#include <sys/rseq.h>
#define SLUICE_HAVE_RSEQ 1
#endif
#endif

typedef enum sluice_stripe_mode {
	SLUICE_STRIPE_BY_CPU = 0,
	SLUICE_STRIPE_BY_PROBE = 1,
} sluice_stripe_mode_t;

#define SLUICE_STRIPE_CELLS_MAX 4096

/* Counters per cell: a cache line of them.  A stripe uses word[0]; a
 * keyed table's statistics use one word per counter. */
#define SLUICE_STRIPE_CELL_WORDS (SLUICE_CACHELINE / sizeof(int64_t))

struct sluice_stripe_cell {
	_Alignas(SLUICE_CACHELINE) _Atomic int64_t word[SLUICE_STRIPE_CELL_WORDS];
};

typedef struct sluice_stripe {
	/* read-only after init */
	struct sluice_stripe_cell *cells;
	uint32_t mask;            /* cells - 1; cells is a power of two */
	sluice_stripe_mode_t mode;
	uint32_t caller_memory;   /* attached: destroy frees nothing      */
} sluice_stripe_t;

/*
 * sluice_cpu - the CPU this thread runs on (may be stale by the time it is
 * used; callers only use it to spread load).  Lock-free, no system call when
 * the kernel's rseq area is registered (glibc >= 2.35).
 */
SLUICE_API unsigned sluice_cpu(void);

/*
 * sluice_stripe_init - allocate and zero the cells.
 * @ncells: 0 for the number of possible CPUs, else 1..4096; rounded up to a
 * power of two so a cell index is a mask, not a division.
 * Return: 0, SLUICE_EINVAL, SLUICE_ECELLS, SLUICE_ENOMEM.  Not thread-safe
 * with respect to the same stripe; allocates.
 */
SLUICE_NODISCARD SLUICE_API int sluice_stripe_init(sluice_stripe_t *s, uint32_t ncells,
                                  sluice_stripe_mode_t mode);
/*
 * sluice_stripe_bytes - the memory sluice_stripe_attach needs for @ncells
 * cells (64 bytes each), or 0 when @ncells is not a power of two in
 * 1..SLUICE_STRIPE_CELLS_MAX.
 */
SLUICE_API size_t sluice_stripe_bytes(uint32_t ncells);
/*
 * sluice_stripe_attach - a stripe on caller memory: @ncells cells at @mem
 * (64-byte aligned, at least sluice_stripe_bytes(@ncells) bytes), used as
 * they are (zero them once, before the first attach).  For counts shared
 * by processes: every process attaches its own stripe to the same
 * MAP_SHARED memory with the same @ncells, and each add is an atomic add
 * on the cell of the CPU it runs on, so no add of any process is lost and
 * sum() is every process's total, with the guarantees above (modulo
 * 2^64: cells a hostile process wrote give a wrong sum, never undefined
 * behaviour).  destroy
 * forgets the memory without freeing it.  Allocates nothing.
 * Return: 0, SLUICE_EINVAL (NULL, misaligned or too small @mem),
 * SLUICE_ECELLS (@ncells), SLUICE_EMODE.
 */
SLUICE_NODISCARD SLUICE_API int sluice_stripe_attach(sluice_stripe_t *s, void *mem, size_t bytes,
                                                     uint32_t ncells, sluice_stripe_mode_t mode);
/* sluice_stripe_destroy - free the cells (an attached stripe's are the
 * caller's: not freed).  No add or sum may be running. */
SLUICE_API void sluice_stripe_destroy(sluice_stripe_t *s);
/* sluice_stripe_cells - how many cells init chose. */
SLUICE_API uint32_t sluice_stripe_cells(const sluice_stripe_t *s);

/*
 * sluice_stripe_add - add @n (may be negative) to this thread's cell.
 * Lock-free, no allocation.  Relaxed: a counter publishes nothing else;
 * readers that need ordering with other data must provide it themselves.
 */
SLUICE_API void sluice_stripe_add(sluice_stripe_t *s, int64_t n);

/*
 * sluice_stripe_sum - total of all cells.  Exact when quiescent; see the
 * error bound above when adds run concurrently.  Lock-free, O(cells).
 */
SLUICE_API int64_t sluice_stripe_sum(const sluice_stripe_t *s);

/*
 * sluice_stripe_sum_and_reset - take the total and leave every cell at 0.
 * Each cell is swapped atomically, so no concurrent add is lost: it is
 * either in this result or in the cells afterwards.  Lock-free, O(cells).
 */
SLUICE_API int64_t sluice_stripe_sum_and_reset(sluice_stripe_t *s);

#ifdef SLUICE_INLINE
#include "static/stripe.h"
#endif

#endif /* SLUICE_STRIPE_H */
