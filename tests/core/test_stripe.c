/* SPDX-License-Identifier: MIT */
/*
 * test_stripe.c - striped counter: init's cell-count table (default, powers
 * of two, rounding, the 4096 limit, bad mode, NULL), exact quiescent sums
 * including negative adds, sum_and_reset, and two threaded checks for both
 * cell-choice modes: concurrent adds are never lost, and concurrent
 * sum_and_reset calls partition the adds with none lost or counted twice.
 *
 * The threaded tests assert only on totals, never on timing or on which
 * cell an add landed in.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "sluice/error.h"
#include "sluice/stripe.h"

TestSuite(stripe, .timeout = 60);

static const char *mode_name(sluice_stripe_mode_t m)
{
	switch (m) {
	case SLUICE_STRIPE_BY_CPU:
		return "BY_CPU";
	case SLUICE_STRIPE_BY_PROBE:
		return "BY_PROBE";
	}
	return "BAD_MODE";
}

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 1;
	while (p < v)
		p *= 2;
	return p;
}

/* What ncells = 0 must choose: possible CPUs, capped at the maximum,
 * rounded up to a power of two. */
static uint32_t default_cells(void)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);
	cr_assert_gt(n, 0, "sysconf(_SC_NPROCESSORS_CONF) = %ld", n);
	if (n > SLUICE_STRIPE_CELLS_MAX)
		n = SLUICE_STRIPE_CELLS_MAX;
	return pow2_at_least((uint32_t)n);
}

static void init_ok(sluice_stripe_t *s, uint32_t ncells, sluice_stripe_mode_t mode)
{
	int rc = sluice_stripe_init(s, ncells, mode);
	cr_assert_eq(rc, 0, "init(%u, %s) = %d (%s)", ncells, mode_name(mode), rc,
	             sluice_err_name(rc));
}

/* ---- init ------------------------------------------------------------- */

#define CELLS_DEFAULT UINT32_MAX /* marker in the table: default_cells() */

struct init_case {
	uint32_t ncells;
	int mode;
	int rc;
	uint32_t cells; /* expected sluice_stripe_cells() when rc == 0 */
};

ParameterizedTestParameters(stripe, init_table)
{
	static struct init_case cases[] = {
		{ 0, SLUICE_STRIPE_BY_CPU, 0, CELLS_DEFAULT },
		{ 0, SLUICE_STRIPE_BY_PROBE, 0, CELLS_DEFAULT },
		{ 1, SLUICE_STRIPE_BY_CPU, 0, 1 },
		{ 1, SLUICE_STRIPE_BY_PROBE, 0, 1 },
		{ 2, SLUICE_STRIPE_BY_CPU, 0, 2 },
		{ 3, SLUICE_STRIPE_BY_CPU, 0, 4 },
		{ 3, SLUICE_STRIPE_BY_PROBE, 0, 4 },
		{ 4, SLUICE_STRIPE_BY_PROBE, 0, 4 },
		{ 5, SLUICE_STRIPE_BY_CPU, 0, 8 },
		{ 1000, SLUICE_STRIPE_BY_PROBE, 0, 1024 },
		{ 2049, SLUICE_STRIPE_BY_CPU, 0, 4096 },
		{ 4095, SLUICE_STRIPE_BY_CPU, 0, 4096 },
		{ 4096, SLUICE_STRIPE_BY_CPU, 0, 4096 },
		{ 4096, SLUICE_STRIPE_BY_PROBE, 0, 4096 },
		{ 4097, SLUICE_STRIPE_BY_CPU, SLUICE_ECELLS, 0 },
		{ 4097, SLUICE_STRIPE_BY_PROBE, SLUICE_ECELLS, 0 },
		{ 8192, SLUICE_STRIPE_BY_CPU, SLUICE_ECELLS, 0 },
		{ UINT32_MAX, SLUICE_STRIPE_BY_CPU, SLUICE_ECELLS, 0 },
		{ 4, 2, SLUICE_EMODE, 0 },
		{ 4, -1, SLUICE_EMODE, 0 },
		{ 0, 99, SLUICE_EMODE, 0 },
	};
	return cr_make_param_array(struct init_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct init_case *c, stripe, init_table)
{
	sluice_stripe_t s;
	int rc = sluice_stripe_init(&s, c->ncells, (sluice_stripe_mode_t)c->mode);
	cr_assert_eq(rc, c->rc, "init(%u, mode %d) = %d (%s), expected %d (%s)", c->ncells,
	             c->mode, rc, sluice_err_name(rc), c->rc, sluice_err_name(c->rc));
	if (rc != 0)
		return;

	uint32_t want = c->cells == CELLS_DEFAULT ? default_cells() : c->cells;
	uint32_t got = sluice_stripe_cells(&s);
	cr_assert_eq(got, want, "init(%u, mode %d) chose %u cells, expected %u", c->ncells,
	             c->mode, got, want);
	cr_assert_eq(got & (got - 1), 0, "%u cells is not a power of two", got);
	cr_assert_eq((int)s.mode, c->mode, "mode stored as %d, asked for %d", (int)s.mode,
	             c->mode);
	cr_assert_not_null(s.cells, "init succeeded with no cells");
	for (uint32_t i = 0; i < got; i++) {
		cr_assert_eq((uintptr_t)&s.cells[i] % SLUICE_CACHELINE, 0,
		             "cell %u at %p is not cache-line aligned", i, (void *)&s.cells[i]);
		cr_assert_eq(atomic_load(&s.cells[i].word[0]), 0, "cell %u starts at %lld", i,
		             (long long)atomic_load(&s.cells[i].word[0]));
	}
	cr_assert_eq(sluice_stripe_sum(&s), 0, "fresh stripe sums to %lld",
	             (long long)sluice_stripe_sum(&s));
	/* Every cell is usable: write the last one, which a wrong mask would
	 * leave outside the allocation. */
	atomic_store(&s.cells[got - 1].word[0], 5);
	sluice_stripe_add(&s, 2);
	cr_assert_eq(sluice_stripe_sum(&s), 7, "sum %lld after poking the last cell and adding 2",
	             (long long)sluice_stripe_sum(&s));
	sluice_stripe_destroy(&s);
	cr_assert_null(s.cells, "destroy left cells = %p", (void *)s.cells);
}

Test(stripe, init_null_is_einval)
{
	int rc = sluice_stripe_init(NULL, 4, SLUICE_STRIPE_BY_CPU);
	cr_assert_eq(rc, SLUICE_EINVAL, "init(NULL) = %d (%s), expected SLUICE_EINVAL", rc,
	             sluice_err_name(rc));
	rc = sluice_stripe_init(NULL, 0, SLUICE_STRIPE_BY_PROBE);
	cr_assert_eq(rc, SLUICE_EINVAL, "init(NULL, 0, BY_PROBE) = %d (%s)", rc,
	             sluice_err_name(rc));
}

Test(stripe, cell_is_one_cache_line)
{
	cr_assert_eq(sizeof(struct sluice_stripe_cell), SLUICE_CACHELINE,
	             "a cell is %zu bytes, expected one %d-byte line",
	             sizeof(struct sluice_stripe_cell), SLUICE_CACHELINE);
}

Test(stripe, destroy_null_is_safe)
{
	sluice_stripe_destroy(NULL);
	sluice_stripe_t s;
	init_ok(&s, 2, SLUICE_STRIPE_BY_CPU);
	sluice_stripe_destroy(&s);
	cr_assert_null(s.cells, "destroy left cells = %p", (void *)s.cells);
	sluice_stripe_destroy(&s); /* free(NULL): a second destroy is harmless */
}

/* ---- quiescent sums --------------------------------------------------- */

static const int64_t deltas[] = { 1, 5, -3, 100, -200, 0, 7, -1, 1000000007, -1000000000 };
#define NDELTAS (sizeof(deltas) / sizeof(deltas[0]))

static int64_t deltas_total(void)
{
	int64_t t = 0;
	for (size_t i = 0; i < NDELTAS; i++)
		t += deltas[i];
	return t;
}

struct mode_cells {
	int mode;
	uint32_t ncells;
};

ParameterizedTestParameters(stripe, quiescent_sum_is_exact)
{
	static struct mode_cells cases[] = {
		{ SLUICE_STRIPE_BY_CPU, 0 },   { SLUICE_STRIPE_BY_CPU, 1 },
		{ SLUICE_STRIPE_BY_CPU, 64 },  { SLUICE_STRIPE_BY_PROBE, 0 },
		{ SLUICE_STRIPE_BY_PROBE, 1 }, { SLUICE_STRIPE_BY_PROBE, 64 },
	};
	return cr_make_param_array(struct mode_cells, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct mode_cells *mc, stripe, quiescent_sum_is_exact)
{
	sluice_stripe_mode_t mode = (sluice_stripe_mode_t)mc->mode;
	sluice_stripe_t s;
	init_ok(&s, mc->ncells, mode);

	int64_t want = 0;
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < NDELTAS; i++) {
			sluice_stripe_add(&s, deltas[i]);
			want += deltas[i];
			int64_t got = sluice_stripe_sum(&s);
			cr_assert_eq(got, want, "%s/%u cells: sum %lld after add(%lld), expected %lld",
			             mode_name(mode), mc->ncells, (long long)got, (long long)deltas[i],
			             (long long)want);
		}
	}
	cr_assert_eq(want, 3 * deltas_total(), "test bookkeeping");

	/* Down through zero into negative totals. */
	sluice_stripe_add(&s, -want - 42);
	cr_assert_eq(sluice_stripe_sum(&s), -42, "%s: sum %lld, expected -42", mode_name(mode),
	             (long long)sluice_stripe_sum(&s));
	/* sum() only reads. */
	cr_assert_eq(sluice_stripe_sum(&s), -42, "%s: second sum %lld changed the total",
	             mode_name(mode), (long long)sluice_stripe_sum(&s));
	sluice_stripe_destroy(&s);
}

ParameterizedTestParameters(stripe, sum_and_reset_takes_total_and_leaves_zero)
{
	static struct mode_cells cases[] = {
		{ SLUICE_STRIPE_BY_CPU, 0 },
		{ SLUICE_STRIPE_BY_CPU, 4 },
		{ SLUICE_STRIPE_BY_PROBE, 0 },
		{ SLUICE_STRIPE_BY_PROBE, 4 },
	};
	return cr_make_param_array(struct mode_cells, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct mode_cells *mc, stripe, sum_and_reset_takes_total_and_leaves_zero)
{
	sluice_stripe_mode_t mode = (sluice_stripe_mode_t)mc->mode;
	sluice_stripe_t s;
	init_ok(&s, mc->ncells, mode);

	int64_t fresh = sluice_stripe_sum_and_reset(&s);
	cr_assert_eq(fresh, 0, "%s: fresh stripe reset gave %lld", mode_name(mode),
	             (long long)fresh);

	for (size_t i = 0; i < NDELTAS; i++)
		sluice_stripe_add(&s, deltas[i]);
	int64_t got = sluice_stripe_sum_and_reset(&s);
	cr_assert_eq(got, deltas_total(), "%s: sum_and_reset %lld, expected %lld",
	             mode_name(mode), (long long)got, (long long)deltas_total());
	cr_assert_eq(sluice_stripe_sum(&s), 0, "%s: sum %lld after reset", mode_name(mode),
	             (long long)sluice_stripe_sum(&s));
	for (uint32_t i = 0; i < sluice_stripe_cells(&s); i++)
		cr_assert_eq(atomic_load(&s.cells[i].word[0]), 0, "%s: cell %u holds %lld after reset",
		             mode_name(mode), i, (long long)atomic_load(&s.cells[i].word[0]));
	cr_assert_eq(sluice_stripe_sum_and_reset(&s), 0, "%s: second reset was not 0",
	             mode_name(mode));

	/* A negative total comes back as such. */
	sluice_stripe_add(&s, -17);
	sluice_stripe_add(&s, 4);
	got = sluice_stripe_sum_and_reset(&s);
	cr_assert_eq(got, -13, "%s: sum_and_reset %lld, expected -13", mode_name(mode),
	             (long long)got);

	/* Adds after a reset start again from zero. */
	sluice_stripe_add(&s, 9);
	cr_assert_eq(sluice_stripe_sum(&s), 9, "%s: sum %lld after reset and add(9)",
	             mode_name(mode), (long long)sluice_stripe_sum(&s));
	sluice_stripe_destroy(&s);
}

/* ---- threads: no add is lost ------------------------------------------ */

#define NTHREADS 4
#define ADDS_EACH 200000

struct adder {
	pthread_t thread;
	sluice_stripe_t *s;
	pthread_barrier_t *go;
	int64_t n;     /* added each time */
	int64_t count; /* how many adds */
};

static void *adder_main(void *arg)
{
	struct adder *a = arg;
	pthread_barrier_wait(a->go);
	for (int64_t i = 0; i < a->count; i++)
		sluice_stripe_add(a->s, a->n);
	return NULL;
}

ParameterizedTestParameters(stripe, concurrent_adds_sum_exactly)
{
	/* Default cells, and one cell: every thread on the same word, which
	 * drives BY_PROBE through its failed-CAS path constantly. */
	static struct mode_cells cases[] = {
		{ SLUICE_STRIPE_BY_CPU, 0 },
		{ SLUICE_STRIPE_BY_PROBE, 0 },
		{ SLUICE_STRIPE_BY_CPU, 1 },
		{ SLUICE_STRIPE_BY_PROBE, 1 },
	};
	return cr_make_param_array(struct mode_cells, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct mode_cells *mc, stripe, concurrent_adds_sum_exactly)
{
	sluice_stripe_mode_t mode = (sluice_stripe_mode_t)mc->mode;
	sluice_stripe_t s;
	init_ok(&s, mc->ncells, mode);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, NTHREADS);

	/* Thread t adds t+1 (the last one adds -1), so a lost add, an add
	 * counted twice or one applied with another thread's n all show. */
	struct adder a[NTHREADS];
	int64_t want = 0;
	for (int t = 0; t < NTHREADS; t++) {
		a[t] = (struct adder){ .s = &s, .go = &go, .count = ADDS_EACH };
		a[t].n = t == NTHREADS - 1 ? -1 : t + 1;
		want += a[t].n * a[t].count;
		cr_assert_eq(pthread_create(&a[t].thread, NULL, adder_main, &a[t]), 0,
		             "pthread_create %d", t);
	}
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(a[t].thread, NULL);
	pthread_barrier_destroy(&go);

	int64_t got = sluice_stripe_sum(&s);
	cr_assert_eq(got, want, "%s/%u cells: %d threads x %d adds summed to %lld, expected %lld",
	             mode_name(mode), mc->ncells, NTHREADS, ADDS_EACH, (long long)got,
	             (long long)want);
	got = sluice_stripe_sum_and_reset(&s);
	cr_assert_eq(got, want, "%s: sum_and_reset %lld, expected %lld", mode_name(mode),
	             (long long)got, (long long)want);
	sluice_stripe_destroy(&s);
}

/* ---- threads: sum_and_reset partitions the adds ----------------------- */

static _Atomic int adders_left;

static void *partition_adder(void *arg)
{
	struct adder *a = arg;
	pthread_barrier_wait(a->go);
	for (int64_t i = 0; i < a->count; i++)
		sluice_stripe_add(a->s, 1);
	atomic_fetch_sub_explicit(&adders_left, 1, memory_order_relaxed);
	return NULL;
}

ParameterizedTestParameters(stripe, sum_and_reset_partitions_concurrent_adds)
{
	static struct mode_cells cases[] = {
		{ SLUICE_STRIPE_BY_CPU, 0 },
		{ SLUICE_STRIPE_BY_PROBE, 0 },
		{ SLUICE_STRIPE_BY_PROBE, 1 },
	};
	return cr_make_param_array(struct mode_cells, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct mode_cells *mc, stripe, sum_and_reset_partitions_concurrent_adds)
{
	sluice_stripe_mode_t mode = (sluice_stripe_mode_t)mc->mode;
	sluice_stripe_t s;
	init_ok(&s, mc->ncells, mode);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, NTHREADS + 1);
	atomic_store(&adders_left, NTHREADS);

	struct adder a[NTHREADS];
	for (int t = 0; t < NTHREADS; t++) {
		a[t] = (struct adder){ .s = &s, .go = &go, .n = 1, .count = ADDS_EACH };
		cr_assert_eq(pthread_create(&a[t].thread, NULL, partition_adder, &a[t]), 0,
		             "pthread_create %d", t);
	}
	pthread_barrier_wait(&go);

	/* Drain while the adders run.  Adds are all +1, so every partial
	 * result is >= 0 and the running total never exceeds the adds. */
	const int64_t total = (int64_t)NTHREADS * ADDS_EACH;
	int64_t acc = 0;
	long resets = 0;
	while (atomic_load_explicit(&adders_left, memory_order_relaxed) > 0) {
		int64_t part = sluice_stripe_sum_and_reset(&s);
		resets++;
		cr_assert_geq(part, 0, "%s: reset %ld returned %lld with only +1 adds running",
		              mode_name(mode), resets, (long long)part);
		acc += part;
		cr_assert_leq(acc, total, "%s: resets took %lld, more than the %lld adds",
		              mode_name(mode), (long long)acc, (long long)total);
	}
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(a[t].thread, NULL);
	pthread_barrier_destroy(&go);

	int64_t rest = sluice_stripe_sum_and_reset(&s);
	cr_assert_geq(rest, 0, "%s: final reset returned %lld", mode_name(mode), (long long)rest);
	cr_assert_eq(acc + rest, total,
	             "%s/%u cells: %ld resets took %lld, final reset %lld: total %lld, "
	             "expected exactly %lld adds",
	             mode_name(mode), mc->ncells, resets, (long long)acc, (long long)rest,
	             (long long)(acc + rest), (long long)total);
	cr_assert_eq(sluice_stripe_sum(&s), 0, "%s: %lld left after the final reset",
	             mode_name(mode), (long long)sluice_stripe_sum(&s));
	sluice_stripe_destroy(&s);
}

/* ---- the concurrent sum's bound ---------------------------------------- */

/*
 * stripe.h: "for adds of non-negative n, a concurrent sum() returns a value
 * between the true total when sum() began and the true total when it
 * returned".  Each adder counts an add as started before it adds and as
 * done after, so the adds complete before a sum() number at least the
 * done-counts read just before it, and the adds begun by its end at most the
 * started-counts read just after it.  Every sum() must lie in that bracket.
 */
#define BOUND_ADDERS 3
#define BOUND_OVERLAPS 20000 /* sums that must overlap running adds */

struct bound_adder {
	pthread_t tid;
	sluice_stripe_t *s;
	_Atomic int64_t started, done;
};

/* Adders run until the summer has seen enough overlapping sums, so a busy
 * machine that deschedules the summer cannot let them finish unobserved. */
static _Atomic int bound_stop;

static void *bound_adder_main(void *arg)
{
	struct bound_adder *a = arg;
	while (!atomic_load_explicit(&bound_stop, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&a->started, 1, memory_order_seq_cst);
		sluice_stripe_add(a->s, 1);
		atomic_fetch_add_explicit(&a->done, 1, memory_order_seq_cst);
	}
	return NULL;
}

ParameterizedTestParameters(stripe, concurrent_sum_within_bound)
{
	static struct mode_cells cases[] = {
		{ SLUICE_STRIPE_BY_CPU, 0 },
		{ SLUICE_STRIPE_BY_PROBE, 0 },
	};
	return cr_make_param_array(struct mode_cells, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct mode_cells *mc, stripe, concurrent_sum_within_bound)
{
	sluice_stripe_t s;
	cr_assert_eq(sluice_stripe_init(&s, mc->ncells, (sluice_stripe_mode_t)mc->mode), 0);
	struct bound_adder a[BOUND_ADDERS];
	atomic_store(&bound_stop, 0);
	for (int i = 0; i < BOUND_ADDERS; i++) {
		a[i].s = &s;
		atomic_init(&a[i].started, 0);
		atomic_init(&a[i].done, 0);
		cr_assert_eq(pthread_create(&a[i].tid, NULL, bound_adder_main, &a[i]), 0);
	}
	int64_t sums = 0, inside = 0;
	while (inside < BOUND_OVERLAPS) {
		int64_t lo = 0, hi = 0;
		for (int i = 0; i < BOUND_ADDERS; i++)
			lo += atomic_load_explicit(&a[i].done, memory_order_seq_cst);
		int64_t got = sluice_stripe_sum(&s);
		for (int i = 0; i < BOUND_ADDERS; i++)
			hi += atomic_load_explicit(&a[i].started, memory_order_seq_cst);
		cr_assert(lo <= got && got <= hi, "sum %lld outside [%lld, %lld]", (long long)got,
		          (long long)lo, (long long)hi);
		sums++;
		inside += lo < hi; /* adds were in flight during this sum */
	}
	atomic_store(&bound_stop, 1);
	int64_t total = 0;
	for (int i = 0; i < BOUND_ADDERS; i++) {
		pthread_join(a[i].tid, NULL);
		total += atomic_load(&a[i].done);
	}
	cr_assert_eq(sluice_stripe_sum(&s), total, "quiescent: exact");
	cr_log_info("%lld sums, %lld while adds ran", (long long)sums, (long long)inside);
	sluice_stripe_destroy(&s);
}
