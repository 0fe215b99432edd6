/* SPDX-License-Identifier: MIT */
/*
 * test_gcra_lease.c - GCRA's per-CPU leases, one thread, manual clock.
 *
 * The thread is pinned, so every decision uses one cell and each step is
 * exact: which CAS books what (the TAT read after each decision says),
 * what a spend may take, when a lease expires, what is lost.  Then the
 * lease guarantee itself, admitted <= b + (t + V)/T over every interval,
 * on a long pseudo-random schedule that moves the thread between CPUs
 * (so several cells hold leases at once) and the clock back and forth.
 * A stalled taker or spender (test_stall.h) blocks no one.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "sluice/error.h"
#include "sluice/gcra.h"
#include "sluice/static/gcra.h" /* sluice__gcra_init_booking */

#include "test_rng.h"
#include "test_stall.h"

#define US 1000ULL
#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(gcra_lease, .timeout = 120);

__extension__ typedef unsigned __int128 u128;

static sluice_clock_t mclock;

static void pin_to(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	cr_assert_eq(sched_setaffinity(0, sizeof(set), &set), 0);
}

/* Stay on one CPU, so every decision uses the same lease cell. */
static void pin_to_this_cpu(void)
{
	pin_to(sched_getcpu());
}

/* rate 1 per T ns, burst b, lease B, V */
static void make(sluice_gcra_t *g, uint64_t T, uint64_t b, uint32_t B, uint64_t V)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_gcra_config_t cfg = { .rate = 1, .period_ns = T, .burst = b, .clock = &mclock,
		                     .lease = B, .lease_ns = V };
	int rc = sluice_gcra_init(g, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
}

/* GCRA with leases of 16 and V, and this thread pinned to its CPU: the
 * cell of that CPU, the one every call of the test takes and spends. */
static struct sluice_gcra_cell *leased_cell(sluice_gcra_t *g, uint64_t T, uint64_t b, uint64_t V)
{
	pin_to_this_cpu();
	make(g, T, b, 16, V);
	return &g->cells[sched_getcpu() & (int)g->cell_mask];
}

static uint64_t tat(sluice_gcra_t *g)
{
	return atomic_load(&g->tat);
}

/* What a take of n books beyond n from a full bucket of b (gcra_step.h). */
static uint64_t expect_extra(const sluice_gcra_t *g, uint64_t room)
{
	uint64_t e = room >> g->cell_shift;
	return e < g->lease ? e : g->lease;
}

Test(gcra_lease, off_by_default_and_config_limits)
{
	sluice_gcra_t g;
	make(&g, 1000, 100, 0, 0);
	cr_assert_null(g.cells, "no lease asked: none allocated, the exact path");
	sluice_gcra_destroy(&g);

	sluice_gcra_config_t c = { .rate = 1, .period_ns = 1000, .burst = 100, .clock = &mclock };
	c.lease = SLUICE_GCRA_LEASE_MAX + 1;
	cr_assert_eq(sluice_gcra_init(&g, &c), SLUICE_ELEASE);
	c.lease = 8;
	c.lease_ns = SLUICE_GCRA_LEASE_NS_MAX + 1;
	cr_assert_eq(sluice_gcra_init(&g, &c), SLUICE_ELEASE);
	c.lease_ns = 0;
	cr_assert_eq(sluice__gcra_init_booking(&g, &c), SLUICE_ELEASE, "bookings are never leased");
	/* tau just past what a cell can name */
	c.period_ns = SLUICE_GCRA_LEASE_SPAN_MAX / 100 + 1;
	cr_assert_eq(sluice_gcra_init(&g, &c), SLUICE_EBURST);
	c.period_ns = 1000;
	cr_assert_eq(sluice_gcra_init(&g, &c), 0);
	cr_assert_eq(g.lease_ns, SLUICE_GCRA_LEASE_NS_DEFAULT, "lease_ns 0: the default V");
	/* a live change that would make tau too long for a cell is refused */
	cr_assert_eq(sluice_gcra_set_burst_at(&g, SLUICE_GCRA_LEASE_SPAN_MAX / 1000 + 1, 0),
	             SLUICE_EBURST);
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 1, SLUICE_GCRA_LEASE_SPAN_MAX / 100 + 1, 0),
	             SLUICE_ERATE);
	cr_assert_eq(sluice_gcra_burst(&g), 100, "nothing changed");
	sluice_gcra_destroy(&g);
	sluice_gcra_destroy(NULL);
}

/* One take books n + extra in one CAS; the extra is spent from the cell
 * without touching the TAT; the next take moves it again. */
Test(gcra_lease, take_then_spend_from_the_cell)
{
	pin_to_this_cpu();
	const uint64_t T = 1000, b = 10000, t0 = 5 * SEC;
	sluice_gcra_t g;
	make(&g, T, b, 16, 100 * US);
	uint64_t e = expect_extra(&g, b - 1);
	cr_assert_gt(e, 0, "the test wants a real lease");
	sluice_decision_t d;
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0, &d), 1);
	cr_assert_eq(tat(&g), t0 + (1 + e) * T, "the take books n + extra in one CAS");
	cr_assert_eq(d.reset_ns, (1 + e) * T);
	cr_assert_eq(d.remaining, b - 1 - e, "leased permits count as taken");
	for (uint64_t i = 0; i < e; i++) {
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0 + i, &d), 1);
		cr_assert_eq(tat(&g), t0 + (1 + e) * T, "spend %llu touched the TAT",
		             (unsigned long long)i);
		cr_assert_eq(d.now_ns, t0 + i);
		cr_assert_eq(d.reset_ns, t0 + (1 + e) * T - (t0 + i), "as the lease's take left it");
	}
	/* the lease is spent: the next decision takes again */
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0 + e, &d), 1);
	cr_assert_gt(tat(&g), t0 + (1 + e) * T, "a take after the lease ran out");
	/* n above what the cell holds takes from the TAT directly */
	uint64_t before = tat(&g);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 17, t0 + e, &d), 1);
	cr_assert_geq(tat(&g), before + 17 * T);
	sluice_gcra_destroy(&g);
}

/* A lease is spent only within V of its take: at t0 + V it is, at
 * t0 + V + 1 it is not (a new take), and a reading before t0 never is.
 * A take at a reading before the cell's lease leases nothing (books
 * exactly n, the cell unchanged): a cell's stamps never decrease, which
 * the single-width spend relies on.  What a lease still held when it
 * expired is lost, at most B. */
Test(gcra_lease, expiry_after_v_loses_at_most_b)
{
	const uint64_t T = 1000, b = 10000, V = 50 * US, t0 = 5 * SEC;
	sluice_gcra_t g;
	struct sluice_gcra_cell *cell = leased_cell(&g, T, b, V);
	uint64_t e = expect_extra(&g, b - 1);
	cr_assert_geq(e, 4);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0, NULL), 1);
	uint64_t booked = tat(&g);
	uint64_t held = atomic_load(&cell->held);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0 - 1, NULL), 1);
	cr_assert_eq(tat(&g), booked + T,
	             "a reading before the take spends none of its lease and leases nothing");
	cr_assert_eq(atomic_load(&cell->stamp), t0, "a deposit lowered the cell's stamp");
	cr_assert_eq(atomic_load(&cell->held), held, "the cell changed");
	booked = tat(&g);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0 + V, NULL), 1);
	cr_assert_eq(tat(&g), booked, "spent at exactly V after the take");
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0 + V + 1, NULL), 1);
	cr_assert_gt(tat(&g), booked, "spent past V: the bound b + (t + V)/T would not hold");
	/* Lost: e - 1 of the first lease (one spent, then expired), at most
	 * B; the second take booked 1 + its own lease from max(TAT, now). */
	uint64_t now = t0 + V + 1, base = booked > now ? booked : now;
	uint64_t e2 = (tat(&g) - base) / T - 1;
	cr_assert_leq(e2, g.lease, "a lease holds at most B");
	cr_assert_eq(e2, expect_extra(&g, (b * T - (base + T - now)) / T));
	cr_assert_eq(atomic_load(&cell->stamp), now);
	cr_assert_leq(e, g.lease);
	sluice_gcra_destroy(&g);
}

/* At one instant, one thread asking n = 1 empties a full bucket exactly:
 * each lease is spent before the next is taken, leases shrink with the
 * room, and the last takes book exactly n (no permit is lost). */
Test(gcra_lease, shrinks_near_the_limit_and_loses_nothing_on_one_cpu)
{
	pin_to_this_cpu();
	const uint64_t T = 1000, b = 5000, t0 = 10 * SEC;
	sluice_gcra_t g;
	make(&g, T, b, 64, 100 * US);
	uint64_t admitted = 0, exact_takes = 0, prev = tat(&g);
	sluice_decision_t d;
	while (sluice_gcra_acquire_at(&g, 1, t0, &d) == 1) {
		admitted++;
		uint64_t a = tat(&g);
		if (a != prev && a - (prev > t0 ? prev : t0) == T)
			exact_takes++;
		prev = a;
		cr_assert_leq(admitted, b);
	}
	cr_assert_eq(admitted, b, "one CPU spending n = 1 must lose nothing");
	cr_assert_geq(exact_takes, 1ULL << g.cell_shift, "near the limit takes are exact");
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(d.retry_after_ns, T, "the refusal is exact, as without leases");
	sluice_gcra_destroy(&g);
}

/* Refunds: the take's, exact; a spend's, exact while nothing was booked
 * since its lease's take (its permits were part of that booking); once
 * the take's TAT has passed (reset_ns 0), SLUICE_ECANCEL. */
Test(gcra_lease, refunds)
{
	pin_to_this_cpu();
	const uint64_t T = 1000, b = 10000, t0 = 5 * SEC;
	sluice_gcra_t g;
	make(&g, T, b, 16, 100 * SEC / 1000);
	sluice_decision_t take, spend, spend2;
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0, &take), 1);
	uint64_t left = tat(&g);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0, &spend), 1);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0, &spend2), 1);
	cr_assert_eq(tat(&g), left);
	cr_assert_eq(sluice_gcra_refund(&g, 1, &spend), 0);
	cr_assert_eq(tat(&g), left - T, "a spend's refund gives back one interval");
	cr_assert_eq(sluice_gcra_refund(&g, 1, &spend2), SLUICE_ECANCEL, "TAT moved: kept");
	cr_assert_eq(sluice_gcra_refund(&g, 1, &take), SLUICE_ECANCEL);
	cr_assert_eq(tat(&g), left - T);
	/* a spend after the take's TAT has passed: nothing names it */
	sluice_gcra_t h;
	make(&h, T, b, 16, SLUICE_GCRA_LEASE_NS_MAX);
	cr_assert_eq(sluice_gcra_acquire_at(&h, 1, t0, NULL), 1);
	uint64_t hl = tat(&h);
	cr_assert_eq(sluice_gcra_acquire_at(&h, 1, hl + 1, &spend), 1);
	cr_assert_eq(tat(&h), hl, "a spend, within V");
	cr_assert_eq(spend.reset_ns, 0);
	cr_assert_eq(sluice_gcra_refund(&h, 1, &spend), SLUICE_ECANCEL);
	cr_assert_eq(tat(&h), hl, "kept: fewer future admissions, never more");
	/* the take of a fresh limiter is exact, its lease stays */
	sluice_gcra_t k;
	make(&k, T, b, 16, 100 * US);
	cr_assert_eq(sluice_gcra_acquire_at(&k, 1, t0, &take), 1);
	left = tat(&k);
	cr_assert_eq(sluice_gcra_cancel(&k, 1, &take), 0);
	cr_assert_eq(tat(&k), left - T);
	sluice_gcra_destroy(&g);
	sluice_gcra_destroy(&h);
	sluice_gcra_destroy(&k);
}

/* A spend whose lease's TAT has passed reports reset_ns 0 and now_ns =
 * its reading, which another CPU's take may have left as the TAT: a cancel
 * must not take that for its own booking (it would free a slot of a lease
 * that still holds all its permits). */
Test(gcra_lease, a_spend_past_its_takes_tat_is_not_refunded)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		cr_skip_test("needs two CPUs, one lease cell each");
	const uint64_t T = 1000, b = 10000, t0 = 5 * SEC;
	sluice_gcra_t g;
	make(&g, T, b, 16, 1 * MS);
	if ((0 & g.cell_mask) == (1 & g.cell_mask))
		cr_skip_test("CPUs 0 and 1 share a cell");
	pin_to(0);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0, NULL), 1); /* lease A */
	uint64_t left_a = tat(&g);
	pin_to(1);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, left_a + 10, NULL), 1); /* lease B */
	uint64_t x = tat(&g);
	pin_to(0);
	sluice_decision_t spend;
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, x, &spend), 1);
	cr_assert_eq(tat(&g), x, "spent from lease A");
	cr_assert_eq(spend.reset_ns, 0);
	cr_assert_eq(sluice_gcra_refund(&g, 1, &spend), SLUICE_ECANCEL,
	             "lease B's booking given back for lease A's spend");
	cr_assert_eq(tat(&g), x);
	sluice_gcra_destroy(&g);
}

/* available: the calling CPU's live lease counts (a decision here spends
 * it), and it takes nothing. */
Test(gcra_lease, available_counts_this_cpus_lease)
{
	pin_to_this_cpu();
	const uint64_t T = 1000, b = 64, t0 = 5 * SEC;
	sluice_gcra_t g;
	make(&g, T, b, 16, 100 * US);
	/* empty the bucket but for this CPU's last lease */
	while (sluice_gcra_acquire_at(&g, 1, t0, NULL) == 1)
		;
	cr_assert_eq(sluice_gcra_available_at(&g, t0), 0);
	sluice_gcra_destroy(&g);
	make(&g, T, 10000, 16, 100 * US);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0, NULL), 1);
	uint64_t e = expect_extra(&g, 10000 - 1);
	uint64_t avail = sluice_gcra_available_at(&g, t0);
	cr_assert_eq(avail, 10000 - 1 - e, "the TAT's credit is the larger here");
	uint64_t before = tat(&g);
	cr_assert_eq(sluice_gcra_acquire_at(&g, e, t0, NULL), 1, "the lease, in one spend");
	cr_assert_eq(tat(&g), before);
	sluice_gcra_destroy(&g);
}

/* ---- the lease guarantee over a long schedule -------------------------- */

static uint64_t below(uint64_t k)
{
	return rnd() % k;
}

struct adm {
	uint64_t t, n;
};

/* Every interval [x, x + t] of the log: at most b + (t + V)/T, i.e. a
 * GCRA with tolerance b*T + V run over the log sorted by time never
 * goes above it. */
static int cmp_adm(const void *a, const void *b)
{
	const struct adm *x = a, *y = b;
	return x->t < y->t ? -1 : x->t > y->t;
}

static void check_bound(struct adm *log, size_t m, uint64_t T, uint64_t b, uint64_t V)
{
	qsort(log, m, sizeof(*log), cmp_adm);
	/* O(m^2) over admissions that share a time span: m is small */
	for (size_t i = 0; i < m; i++) {
		u128 sum = 0;
		for (size_t j = i; j < m; j++) {
			sum += log[j].n;
			u128 cap = (u128)b * T + (log[j].t - log[i].t) + V; /* in ns of T */
			cr_assert_leq(sum * T, cap,
			              "admitted %llu in [%llu, %llu]: above b + (t + V)/T",
			              (unsigned long long)sum, (unsigned long long)log[i].t,
			              (unsigned long long)log[j].t);
		}
	}
}

Test(gcra_lease, bound_b_plus_t_plus_v_over_every_interval)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	const uint64_t T = 1000, b = 40, V = 3 * US; /* B > V/T: a lease outliving V would show */
	struct adm *log = malloc(sizeof(*log) * 3000);
	cr_assert_not_null(log);
	for (uint64_t seed = 1; seed <= 4; seed++) {
		rng_state = seed * 0x9e3779b97f4a7c15ULL;
		sluice_gcra_t g;
		make(&g, T, b, 16, V);
		size_t m = 0;
		uint64_t now = 3 * SEC;
		for (int step = 0; step < 3000; step++) {
			/* move between CPUs often, so one CPU's lease waits
			 * while another drains the bucket */
			if (ncpu >= 2 && below(8) == 0)
				pin_to((int)below((uint64_t)(ncpu < 4 ? ncpu : 4)));
			uint64_t k = below(100);
			if (k < 60)
				now += below(3 * T);
			else if (k < 63)
				now -= below(5 * T); /* a clock set back */
			else if (k < 66)
				now += below(60 * T); /* idle: the bucket refills */
			uint64_t n = 1 + (below(8) == 0 ? below(4) : 0);
			if (sluice_gcra_acquire_at(&g, n, now, NULL) == 1)
				log[m++] = (struct adm){ now, n };
		}
		cr_assert_gt(m, 500, "the schedule admitted too little to test anything");
		check_bound(log, m, T, b, V);
		sluice_gcra_destroy(&g);
	}
	free(log);
}

/* ---- stalls ------------------------------------------------------------- */

struct stall_ctx {
	sluice_gcra_t *g;
	uint64_t now, admitted;
};

/* While a decision is stopped just before it writes the cell, this CPU's
 * other decisions go on: they spend, take and deposit on that very cell. */
static void attack_spend(void *arg)
{
	struct stall_ctx *c = arg;
	for (int i = 0; i < 100; i++)
		c->admitted += (uint64_t)sluice_gcra_acquire_at(c->g, 1, c->now, NULL);
}

Test(gcra_lease, a_stalled_taker_or_spender_blocks_no_one)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
	pin_to_this_cpu();
	const uint64_t T = 1000, b = 100000, t0 = 5 * SEC;
	for (int spender = 0; spender <= 1; spender++) {
		sluice_gcra_t g;
		make(&g, T, b, 32, 100 * US);
		struct sluice_gcra_cell *cell = &g.cells[sched_getcpu() & (int)g.cell_mask];
		struct stall_ctx c = { &g, t0, 0 };
		if (spender) /* a lease to spend from */
			c.admitted += (uint64_t)sluice_gcra_acquire_at(&g, 1, t0, NULL);
		stall_arm(cell, 16, attack_spend, &c);
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0, NULL), 1);
		c.admitted++;
		cr_assert(stall_fired(), "the decision never wrote its cell");
		cr_assert_eq(c.admitted, 100 + 1 + (uint64_t)spender,
		             "decisions during the stall were held up");
		/* Nothing admitted that was not booked: drain the rest at t0
		 * and count every admission against the bucket's b. */
		while (sluice_gcra_acquire_at(&g, 1, t0, NULL) == 1)
			c.admitted++;
		cr_assert_leq(c.admitted, b, "more admitted than the bucket held");
		cr_assert_geq(c.admitted, b - 2 * g.lease, "lost more than the stalled lease");
		sluice_gcra_destroy(&g);
	}
}

/* The spend's CAS is single-width on `held`, with no tag: a spender
 * stalled between its reads and its CAS can find the very word it read
 * again, deposited by a later lease (the ABA, the reuse a tag of k bits
 * would show after 2^k leases: here after one).  The attack expires the
 * lease and, from a full bucket, takes one that books the same offset
 * and count, stamped after the spender's reading.  The CAS succeeds; the
 * stamp read after it names a take later than the reading, so the spend
 * must refuse (its n lost, retry at once): admitting would spend, at
 * reading t0, a permit booked at t1 > t0, outside [s - V, s]. */
struct aba_ctx {
	sluice_gcra_t *g;
	uint64_t now;
	int rc;
};

static void attack_reuse(void *arg)
{
	struct aba_ctx *c = arg;
	c->rc = sluice_gcra_acquire_at(c->g, 1, c->now, NULL);
}

Test(gcra_lease, a_spend_whose_word_came_back_from_a_later_lease_refuses)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
	const uint64_t T = 1000, b = 10000, V = 100 * US, t0 = 5 * SEC;
	sluice_gcra_t g;
	struct sluice_gcra_cell *cell = leased_cell(&g, T, b, V);
	uint64_t e = expect_extra(&g, b - 1);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0, NULL), 1); /* the lease: e at t0 */
	uint64_t word = atomic_load(&cell->held);
	cr_assert_eq(word & SLUICE__GCRA_HELD_COUNT, e);
	/* t1: past V, and the bucket full again (the TAT passed) */
	uint64_t t1 = t0 + V + 1;
	cr_assert_leq(tat(&g), t1, "the test wants a full bucket at t1");
	struct aba_ctx c = { &g, t1, -100 };
	stall_arm(&cell->held, sizeof(uint64_t), attack_reuse, &c);
	sluice_decision_t d;
	int rc = sluice_gcra_acquire_at(&g, 1, t0, &d);
	cr_assert(stall_fired(), "the spend never wrote its cell");
	cr_assert_eq(c.rc, 1, "the attack's take");
	cr_assert_eq(atomic_load(&cell->stamp), t1);
	uint64_t after = tat(&g);
	cr_assert_eq(after, t1 + (1 + e) * T, "the attack's take booked the same offset");
	cr_assert_eq(rc, 0, "a permit booked at t1 admitted at t0");
	cr_assert_eq(d.allowed, 0);
	cr_assert_eq(d.retry_after_ns, 0, "may retry at once");
	cr_assert_eq(d.reset_ns, 0);
	cr_assert_eq(atomic_load(&cell->held), word - 1, "the n it took are lost");
	cr_assert_eq(tat(&g), after, "nothing else booked");
	sluice_gcra_destroy(&g);
}

/* A spend at the last ns of its lease's window (t0 + V) stalls before
 * its CAS; meanwhile a decision past the window expires the lease and
 * deposits a new one stamped after the stalled reading.  The CAS fails,
 * the spend reads the cell again and must not spend the new lease (its
 * take came after the reading) nor replace it (a deposit would lower the
 * cell's stamp): it books exactly n from the TAT. */
struct race_ctx {
	sluice_gcra_t *g;
	struct sluice_gcra_cell *cell;
	uint64_t now;
	int rc;
	uint64_t tat, stamp, held; /* as the attack left them */
};

static void attack_expire(void *arg)
{
	struct race_ctx *r = arg;
	r->rc = sluice_gcra_acquire_at(r->g, 1, r->now, NULL);
	r->tat = atomic_load(&r->g->tat);
	r->stamp = atomic_load(&r->cell->stamp);
	r->held = atomic_load(&r->cell->held);
}

Test(gcra_lease, a_spend_racing_the_expiry_takes_exactly_n)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
	const uint64_t T = 1000, b = 10000, V = 100 * US, t0 = 5 * SEC;
	sluice_gcra_t g;
	struct sluice_gcra_cell *cell = leased_cell(&g, T, b, V);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0, NULL), 1);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0 + 1, NULL), 1); /* a spend */
	struct race_ctx r = { &g, cell, t0 + V + 1, -100, 0, 0, 0 };
	stall_arm(&cell->held, sizeof(uint64_t), attack_expire, &r);
	sluice_decision_t d;
	int rc = sluice_gcra_acquire_at(&g, 1, t0 + V, &d);
	cr_assert(stall_fired(), "the spend never wrote its cell");
	cr_assert_eq(r.rc, 1, "the attack's take");
	cr_assert_eq(r.stamp, t0 + V + 1, "the attack leased");
	cr_assert_gt(r.held & SLUICE__GCRA_HELD_COUNT, 0);
	cr_assert_eq(rc, 1, "booked from the TAT");
	cr_assert_eq(d.now_ns, t0 + V);
	cr_assert_eq(tat(&g), r.tat + T, "exactly n: no lease at a reading before the cell's");
	cr_assert_eq(atomic_load(&cell->stamp), r.stamp, "the cell's stamp moved back");
	cr_assert_eq(atomic_load(&cell->held), r.held, "the new lease was spent or replaced");
	sluice_gcra_destroy(&g);
}

/* The ABA once more, now with the later lease stamped at or before the
 * spender's reading: the spend is valid (that lease's window holds the
 * reading) and admitted, but which take booked it is not known, so its
 * decision names no booking (reset_ns = 0) and its refund is kept.  The
 * attack drains the lease, gives one spend back (the TAT moves back to
 * exactly the spender's reading) and takes again: the new lease has the
 * same offset and count, stamped t1.  Named as the old lease, the spend
 * would say reset_ns = T, a booking that is not its own. */
struct reuse_ctx {
	sluice_gcra_t *g;
	uint64_t now;
	int spent, refunded, took;
};

static void attack_drain_refund_take(void *arg)
{
	struct reuse_ctx *c = arg;
	sluice_decision_t first, d;
	for (int i = 0; i < 16; i++)
		c->spent += sluice_gcra_acquire_at(c->g, 1, c->now, i ? &d : &first) == 1;
	c->refunded = sluice_gcra_refund(c->g, 1, &first);
	c->took = sluice_gcra_acquire_at(c->g, 1, c->now, NULL);
}

Test(gcra_lease, a_spend_from_an_unnamed_lease_names_no_booking)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
	const uint64_t T = 1000, b = 10000, V = 100 * US, t0 = 5 * SEC;
	sluice_gcra_t g;
	struct sluice_gcra_cell *cell = leased_cell(&g, T, b, V);
	cr_assert_eq(expect_extra(&g, b - 1), 16, "the test wants leases of B = 16");
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t0, NULL), 1); /* 1 + 16 booked */
	uint64_t word = atomic_load(&cell->held);
	uint64_t t1 = t0 + 16 * T; /* the TAT after one refund */
	struct reuse_ctx c = { &g, t1, 0, -100, -100 };
	stall_arm(&cell->held, sizeof(uint64_t), attack_drain_refund_take, &c);
	sluice_decision_t d;
	int rc = sluice_gcra_acquire_at(&g, 1, t1, &d);
	cr_assert(stall_fired(), "the spend never wrote its cell");
	cr_assert_eq(c.spent, 16, "the attack drained the lease");
	cr_assert_eq(c.refunded, 0, "the attack's refund moved the TAT back");
	cr_assert_eq(c.took, 1);
	cr_assert_eq(atomic_load(&cell->stamp), t1, "the attack's take leased");
	cr_assert_eq(tat(&g), t1 + 17 * T);
	cr_assert_eq(atomic_load(&cell->held), word - 1, "the spend landed on the same word");
	cr_assert_eq(rc, 1, "a lease stamped t1 <= the reading: a valid spend");
	cr_assert_eq(d.reset_ns, 0, "named a booking that is not its own");
	cr_assert_eq(sluice_gcra_refund(&g, 1, &d), SLUICE_ECANCEL);
	cr_assert_eq(tat(&g), t1 + 17 * T, "kept");
	sluice_gcra_destroy(&g);
}
