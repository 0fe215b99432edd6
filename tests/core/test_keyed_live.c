/* SPDX-License-Identifier: MIT */
/*
 * test_keyed_live.c - live parameters of keyed tables (keyed.h, LIVE
 * PARAMETERS): each setter's rule on a manual clock, then a table changed
 * under load by its parent while forked workers decide on it through one
 * MAP_SHARED mapping (GCRA set_rate/set_burst; FIXED and WINDOW set_limit),
 * with a verifier that no key gained a refill.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice/sluice.h"
#include "test_keyed_common.h"

TestSuite(keyed_live, .timeout = 60);

/* Permits of 1 admitted for @key at @now before the first refusal. */
static int take(sluice_keyed_t *k, const char *key, uint64_t now)
{
	int got = 0;
	while (got < 10000 && acq(k, key, 1, now, NULL) == 1)
		got++;
	return got;
}

/* ---- GCRA and LEAKY: gcra.h's SET_RATE / SET_BURST rule ----------------- */

/* Lowering the rate keeps the permits held: 5 of 10 left at 10/s stay 5 at
 * 5/s (keeping the TAT would give 7), and refill at the new rate. */
Test(keyed_live, gcra_lower_rate_keeps_permits_held)
{
	sluice_keyed_t k;
	make(&k, gcra_cfg(64, 10, SEC, 10, SLUICE_KEYED_REJECT));
	cr_assert_eq(take(&k, "a", 0) >= 10, 1);
	/* refill 5 at 10/s: at 500 ms the key holds 5 */
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 5, SEC, 500 * MS), 0);
	cr_assert_eq(take(&k, "a", 500 * MS), 5, "lowering the rate must not refill");
	cr_assert_eq(take(&k, "a", 500 * MS + 199 * MS), 0);
	cr_assert_eq(take(&k, "a", 700 * MS), 1, "refills at 5/s: one per 200 ms");
	sluice_keyed_params_t p;
	cr_assert_eq(sluice_keyed_params(&k, &p), 0);
	cr_assert_eq(p.rate, 5);
	cr_assert_eq(p.era, 1);
	cr_assert_eq(p.nmax, 10);
	sluice_keyed_destroy(&k);
}

/* Raising the rate keeps the TAT: an emptied 10/s, b = 10 key (TAT 1 s)
 * raised to 100/s gets its next permit when the TAT is within the new
 * tau - T (90 ms), at 910 ms, not at once. */
Test(keyed_live, gcra_raise_rate_keeps_tat)
{
	sluice_keyed_t k;
	make(&k, gcra_cfg(64, 10, SEC, 10, SLUICE_KEYED_REJECT));
	cr_assert_eq(take(&k, "a", 0), 10);
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 100, SEC, 0), 0);
	cr_assert_eq(take(&k, "a", 0), 0, "raising the rate must not refill");
	cr_assert_eq(take(&k, "a", 909 * MS), 0);
	cr_assert_eq(take(&k, "a", 910 * MS), 1);
	/* then 100/s: 10 ms each */
	cr_assert_eq(take(&k, "a", 920 * MS), 1);
	sluice_keyed_destroy(&k);
}

/* Raising the burst keeps the permits held: a full bucket of 10 raised to
 * 20 holds 10 (no fresh burst), for a key that existed and for one created
 * after the change; both reach 20 after (20 - 10) T of refill. */
Test(keyed_live, gcra_raise_burst_no_fresh_burst)
{
	sluice_keyed_t k;
	make(&k, gcra_cfg(64, 10, SEC, 10, SLUICE_KEYED_REJECT));
	cr_assert_eq(acq(&k, "old", 1, 0, NULL), 1); /* created, 9 left */
	uint64_t t = 5 * SEC;                       /* full again: 10 */
	cr_assert_eq(sluice_keyed_set_burst_at(&k, 20, t), 0);
	cr_assert_eq(take(&k, "old", t), 10, "raising the burst must not refill");
	cr_assert_eq(take(&k, "new", t), 10, "a key created after the change neither");
	cr_assert_eq(take(&k, "old", t + 2 * SEC), 20, "full at the new burst later");
	sluice_keyed_destroy(&k);
}

/* Lowering the burst keeps the TAT: a full bucket of 20 lowered to 5
 * holds 5; one that held 3 with 1.7 s of debt keeps its debt, which the
 * 500 ms bucket cannot hold: nothing until the debt is under 400 ms. */
Test(keyed_live, gcra_lower_burst)
{
	sluice_keyed_t k;
	make(&k, gcra_cfg(64, 10, SEC, 20, SLUICE_KEYED_REJECT));
	cr_assert_eq(acq(&k, "full", 1, 0, NULL), 1);
	cr_assert_eq(take(&k, "low", 0), 20);
	/* at 300 ms: "full" holds 20, "low" holds 3 */
	cr_assert_eq(sluice_keyed_set_burst_at(&k, 5, 300 * MS), 0);
	cr_assert_eq(take(&k, "full", 300 * MS), 5);
	cr_assert_eq(take(&k, "low", 300 * MS), 0);
	cr_assert_eq(take(&k, "low", 1599 * MS), 0);
	cr_assert_eq(take(&k, "low", 1600 * MS), 1);
	sluice_keyed_params_t p;
	cr_assert_eq(sluice_keyed_params(&k, &p), 0);
	cr_assert_eq(p.burst, 5);
	cr_assert_eq(p.nmax, 5);
	/* n above the new burst can never pass */
	cr_assert_eq(acq(&k, "full", 6, 10 * SEC, NULL), SLUICE_ETOOBIG);
	sluice_keyed_destroy(&k);
}

/* LEAKY: set_burst is the depth D (bucket D + 1); set_rate as GCRA. */
Test(keyed_live, leaky_depth_and_rate)
{
	sluice_keyed_t k;
	make(&k, (sluice_keyed_config_t){ .algo = SLUICE_ALGO_LEAKY, .capacity = 64, .rate = 10,
	                                   .period_ns = SEC, .depth = 4 });
	cr_assert_eq(take(&k, "a", 0), 5);
	cr_assert_eq(sluice_keyed_set_burst_at(&k, 9, 0), 0);
	cr_assert_eq(take(&k, "a", 0), 0, "raising the depth must not refill");
	cr_assert_eq(take(&k, "a", SEC + 100 * MS), 10);
	sluice_keyed_params_t p;
	cr_assert_eq(sluice_keyed_params(&k, &p), 0);
	cr_assert_eq(p.burst, 9);
	cr_assert_eq(p.nmax, 10);
	sluice_keyed_destroy(&k);
}

/* One parity bit tells two eras apart: a change within the larger tau of
 * the last two eras after the previous one is refused (nothing changes);
 * after it, accepted.  Parameters init refuses are refused with its code. */
Test(keyed_live, gcra_change_spacing_and_codes)
{
	sluice_keyed_t k;
	make(&k, gcra_cfg(64, 10, SEC, 10, SLUICE_KEYED_REJECT));
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 20, SEC, SEC), 0);
	/* taus: 1 s (era 0), 500 ms (era 1) */
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 30, SEC, 2 * SEC), SLUICE_EBUSY);
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 30, SEC, 2 * SEC + 1), 0);
	sluice_keyed_params_t p;
	cr_assert_eq(sluice_keyed_params(&k, &p), 0);
	cr_assert_eq(p.rate, 30);
	cr_assert_eq(p.era, 2);
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 0, SEC, 10 * SEC), SLUICE_ERATE);
	cr_assert_eq(sluice_keyed_set_burst_at(&k, 0, 10 * SEC), SLUICE_EBURST);
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 5, 10 * SEC), SLUICE_ENOTSUP);
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 1, SEC, 1ULL << 62), SLUICE_ETIME);
	cr_assert_eq(sluice_keyed_set_rate(NULL, 1, SEC), SLUICE_EINVAL);
	cr_assert_eq(sluice_keyed_params(&k, &p), 0);
	cr_assert_eq(p.era, 2, "refused changes change nothing");
	sluice_keyed_destroy(&k);
}

/* ---- FIXED, WINDOW, INFLIGHT: set_limit ----------------------------------- */

/* FIXED: the count is kept; the change's window has min(old, new), later
 * windows the new limit. */
Test(keyed_live, fixed_limit)
{
	sluice_keyed_t k;
	make(&k, (sluice_keyed_config_t){ .algo = SLUICE_ALGO_FIXED, .capacity = 64, .limit = 10,
	                                   .window_ns = SEC });
	for (int i = 0; i < 3; i++)
		cr_assert_eq(acq(&k, "b", 1, 100 * MS, NULL), 1);
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 15, 200 * MS), 0);
	cr_assert_eq(take(&k, "b", 300 * MS), 7, "raising L must not add room to this window");
	cr_assert_eq(take(&k, "b", SEC), 15);
	cr_assert_eq(acq(&k, "c", 1, SEC + 10 * MS, NULL), 1);
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 4, SEC + 20 * MS), 0);
	cr_assert_eq(take(&k, "b", SEC + 30 * MS), 0);
	cr_assert_eq(take(&k, "c", SEC + 30 * MS), 3);
	cr_assert_eq(take(&k, "c", 2 * SEC), 4);
	/* the count's bits are bit_width(10) = 4: up to 15 */
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 16, 3 * SEC), SLUICE_ELIMIT);
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 0, 3 * SEC), SLUICE_ELIMIT);
	cr_assert_eq(sluice_keyed_set_rate_at(&k, 1, SEC, 3 * SEC), SLUICE_ENOTSUP);
	cr_assert_eq(sluice_keyed_set_burst_at(&k, 1, 3 * SEC), SLUICE_ENOTSUP);
	sluice_keyed_destroy(&k);
}

/* WINDOW: N = 4 buckets of 250 ms; a raise applies alone only to ranges
 * with no bucket at or before the change's, a cut at once. */
Test(keyed_live, window_limit)
{
	sluice_keyed_t k;
	make(&k, (sluice_keyed_config_t){ .algo = SLUICE_ALGO_WINDOW, .capacity = 64, .limit = 6,
	                                   .window_ns = SEC, .buckets = 4 });
	for (int i = 0; i < 4; i++)
		cr_assert_eq(acq(&k, "a", 1, 0, NULL), 1);
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 10, 300 * MS), 0); /* bucket 1 */
	cr_assert_eq(take(&k, "a", 300 * MS), 2, "the range holds min(6, 10)");
	/* bucket 4: range 1..4 still holds bucket 1 (the change's): cap */
	cr_assert_eq(take(&k, "a", SEC), 6 - 2);
	/* bucket 5: range 2..5, after the change: 10, with bucket 1's 2 gone
	 * and bucket 4's 4 counted */
	cr_assert_eq(take(&k, "a", SEC + 250 * MS), 6);
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 3, SEC + 260 * MS), 0);
	cr_assert_eq(take(&k, "a", SEC + 270 * MS), 0, "a cut applies at once");
	sluice_keyed_destroy(&k);
}

/* INFLIGHT: the held count is kept; a lower K refuses until releases bring
 * the count under it; K is limited by the count's bits. */
Test(keyed_live, inflight_limit)
{
	sluice_keyed_t k;
	make(&k, (sluice_keyed_config_t){ .algo = SLUICE_ALGO_INFLIGHT, .capacity = 64,
	                                   .limit = 4 });
	cr_assert_eq(take(&k, "a", 0), 4);
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 2, 0), 0);
	cr_assert_eq(take(&k, "a", 0), 0);
	cr_assert_eq(sluice_keyed_release(&k, "a", 1, 2), 0);
	cr_assert_eq(take(&k, "a", 0), 0, "held 2 of K = 2");
	cr_assert_eq(sluice_keyed_release(&k, "a", 1, 1), 0);
	cr_assert_eq(take(&k, "a", 0), 1);
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 7, 0), 0);
	cr_assert_eq(take(&k, "a", 0), 5);
	cr_assert_eq(sluice_keyed_set_limit_at(&k, 8, 0), SLUICE_ELIMIT); /* 3 count bits */
	sluice_keyed_destroy(&k);
}

/* ---- many processes under load ------------------------------------------ */

/*
 * Workers (forked) decide n = 1 on KEYS keys of one MAP_SHARED GCRA table
 * at the reading of a manual clock that lives in the shared mapping; the
 * parent advances it by STEP each time every worker has made PER attempts
 * at the current reading, and every CHANGE steps changes the rate or the
 * burst (cycling through a schedule that lowers and raises both).  Every
 * admission is recorded (key, reading).  The verifier checks, per key, the
 * potential argument of LIVE PARAMETERS: a key's permits P(t) never exceed
 * the burst in force, grow by dt / T of the era in force, never by a
 * change, and an admission takes one; so between any two admissions i and
 * j (readings x <= y), j - i + 1 <= b(x) + sum over eras of
 * |[x, y] within the era| / T_era, with b(x) the larger burst of the eras in
 * force at x (a reading equal to a change's is in either).  A change that
 * refilled keys would break it by up to b.
 */
#define WORKERS 2
#define KEYS 8
#define STEPS 1200
#define STEP (1 * MS)
#define PER 24
#define CHANGE 100
#define MAXREC 400000

struct era {
	uint64_t start, interval, burst; /* GCRA */
	uint64_t limit;                  /* FIXED, WINDOW */
};

struct shared {
	sluice_clock_t clock;
	_Atomic uint64_t step;            /* parent: current step; STEPS + 1: stop */
	_Atomic uint64_t done[WORKERS];   /* workers: last step completed     */
	_Atomic uint64_t nrec[WORKERS];
	uint32_t eras;
	struct era era[20]; /* the GCRA schedule: 12; the limits: 17 */
	struct {
		uint32_t key;
		uint64_t t;
	} rec[WORKERS][MAXREC];
};

static void worker(struct shared *sh, void *mem, size_t size, int w)
{
	sluice_keyed_t k;
	if (sluice_keyed_attach(mem, size, &sh->clock, &k) != 0)
		_exit(2);
	uint64_t seen = 0;
	unsigned rng = 7u + (unsigned)w;
	for (;;) {
		uint64_t s = atomic_load_explicit(&sh->step, memory_order_acquire);
		if (s > STEPS)
			break;
		if (s == seen) {
			sched_yield();
			continue;
		}
		for (int i = 0; i < PER; i++) {
			rng = rng * 1103515245u + 12345u;
			uint32_t key = (rng >> 16) % KEYS;
			char name[8] = { 'k', (char)('a' + key), 0 };
			uint64_t now = sluice_clock_now(&sh->clock);
			int rc = sluice_keyed_acquire_at(&k, name, 2, 1, now, NULL);
			if (rc < 0)
				_exit(3);
			if (rc == 1) {
				uint64_t r = atomic_load_explicit(&sh->nrec[w], memory_order_relaxed);
				if (r >= MAXREC)
					_exit(4);
				sh->rec[w][r].key = key;
				sh->rec[w][r].t = now;
				atomic_store_explicit(&sh->nrec[w], r + 1, memory_order_release);
			}
		}
		seen = s;
		atomic_store_explicit(&sh->done[w], s, memory_order_release);
	}
	_exit(0);
}

/* The processes of one run: the table's region and the shared record, both
 * MAP_SHARED, and the workers deciding on it. */
struct procs {
	void *mem;
	size_t size;
	struct shared *sh;
	pid_t pid[WORKERS];
};

/* Map both, format the table with @c, attach *@k to it on the shared
 * manual clock (at SEC), start the schedule with @first, then fork the
 * workers (worker()). */
static void procs_start(struct procs *p, const sluice_keyed_config_t *c, sluice_keyed_t *k,
                        struct era first)
{
	p->size = sluice_keyed_region_bytes(c);
	p->mem = mmap(NULL, p->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	p->sh = mmap(NULL, sizeof(*p->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
	             0);
	cr_assert_neq(p->mem, MAP_FAILED);
	cr_assert_neq(p->sh, MAP_FAILED);
	cr_assert_eq(sluice_keyed_format(p->mem, p->size, c), 0);
	sluice_clock_manual_init(&p->sh->clock, SEC);
	cr_assert_eq(sluice_keyed_attach(p->mem, p->size, &p->sh->clock, k), 0);
	p->sh->eras = 1;
	p->sh->era[0] = first;
	for (int w = 0; w < WORKERS; w++) {
		p->pid[w] = fork();
		cr_assert_geq(p->pid[w], 0);
		if (p->pid[w] == 0)
			worker(p->sh, p->mem, p->size, w);
	}
}

/* Wait until every worker has done step @s; bounded: a dead worker ends
 * the test. */
static void procs_wait(const struct procs *p, uint64_t s)
{
	for (int w = 0; w < WORKERS; w++) {
		for (long spin = 0; atomic_load_explicit(&p->sh->done[w], memory_order_acquire) < s;
		     spin++) {
			cr_assert_lt(spin, 20000000L, "worker %d stuck", w);
			sched_yield();
		}
	}
}

/* Stop the workers and reap them: each must have exited 0. */
static void procs_stop(struct procs *p)
{
	atomic_store_explicit(&p->sh->step, STEPS + 1, memory_order_release);
	for (int w = 0; w < WORKERS; w++) {
		int st;
		cr_assert_eq(waitpid(p->pid[w], &st, 0), p->pid[w]);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d: status %d", w, st);
	}
}

static void procs_unmap(struct procs *p)
{
	munmap(p->sh, sizeof(*p->sh));
	munmap(p->mem, p->size);
}

static int cmp_t(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Permits an interval [x, y] can refill: sum of overlap / T per era. */
/* The times of every admission of @key, by any worker, sorted into @ts
 * (room for WORKERS * MAXREC).  Return: how many. */
static size_t key_times(const struct shared *sh, uint32_t key, uint64_t *ts)
{
	size_t m = 0;
	for (int w = 0; w < WORKERS; w++)
		for (uint64_t r = 0; r < sh->nrec[w]; r++)
			if (sh->rec[w][r].key == key)
				ts[m++] = sh->rec[w][r].t;
	qsort(ts, m, sizeof(ts[0]), cmp_t);
	return m;
}

static double refill(const struct shared *sh, uint64_t x, uint64_t y)
{
	double sum = 0;
	for (uint32_t e = 0; e < sh->eras; e++) {
		uint64_t a = sh->era[e].start, b = e + 1 < sh->eras ? sh->era[e + 1].start : UINT64_MAX;
		uint64_t lo = x > a ? x : a, hi = y < b ? y : b;
		if (hi > lo)
			sum += (double)(hi - lo) / (double)sh->era[e].interval;
	}
	return sum;
}

/* The larger burst of the eras in force at @x. */
static uint64_t burst_at(const struct shared *sh, uint64_t x)
{
	uint64_t b = 0;
	for (uint32_t e = 0; e < sh->eras; e++) {
		uint64_t a = sh->era[e].start, z = e + 1 < sh->eras ? sh->era[e + 1].start : UINT64_MAX;
		if (a <= x && x <= z && sh->era[e].burst > b)
			b = sh->era[e].burst;
	}
	return b;
}

/* Returns the worst excess (admissions - bound) over all keys and pairs. */
static double verify(const struct shared *sh, uint64_t *total)
{
	static uint64_t ts[WORKERS * MAXREC];
	double worst = -1e18;
	*total = 0;
	for (uint32_t key = 0; key < KEYS; key++) {
		size_t m = key_times(sh, key, ts);
		*total += m;
		for (size_t i = 0; i < m; i++) {
			uint64_t b = burst_at(sh, ts[i]);
			/* pairs up to 300 ms apart: three burst times of the
			 * slowest era, past which the bound only loosens */
			for (size_t j = i; j < m && ts[j] - ts[i] <= 300 * MS; j++) {
				double bound = (double)b + refill(sh, ts[i], ts[j]) + 1e-9;
				double ex = (double)(j - i + 1) - bound;
				if (ex > worst)
					worst = ex;
			}
		}
	}
	return worst;
}

Test(keyed_live, procs_change_rate_under_load)
{
	const sluice_keyed_config_t c = gcra_cfg(256, 1000, SEC, 8, SLUICE_KEYED_REJECT);
	sluice_keyed_t k;
	struct procs pr;
	procs_start(&pr, &c, &k, (struct era){ .start = 0, .interval = SEC / 1000, .burst = 8 });
	struct shared *sh = pr.sh;
	/* rates per second and bursts: lower, raise, both ways */
	static const uint64_t sched[][2] = { { 250, 8 },   { 250, 16 },  { 2000, 16 }, { 2000, 4 },
		                             { 500, 4 },   { 500, 12 },  { 4000, 12 }, { 4000, 6 },
		                             { 1000, 6 },  { 1000, 16 }, { 300, 16 } };
	uint32_t next = 0;
	uint64_t rate = 1000;
	for (uint64_t s = 1; s <= STEPS; s++) {
		uint64_t now = SEC + s * STEP;
		sluice_clock_manual_set(&sh->clock, now);
		/* the workers decide at @now while the change below runs */
		atomic_store_explicit(&sh->step, s, memory_order_release);
		if (s % CHANGE == 0 && next < sizeof(sched) / sizeof(sched[0])) {
			int rc = sched[next][0] != rate
			                 ? sluice_keyed_set_rate_at(&k, sched[next][0], SEC, now)
			                 : sluice_keyed_set_burst_at(&k, sched[next][1], now);
			cr_assert_eq(rc, 0, "change %u: %s", next, sluice_err_name(rc));
			sluice_keyed_params_t p;
			cr_assert_eq(sluice_keyed_params(&k, &p), 0);
			cr_assert_eq(p.rate, sched[next][0]);
			cr_assert_eq(p.burst, sched[next][1]);
			rate = p.rate;
			sh->era[sh->eras++] = (struct era){ .start = now, .interval = (SEC + rate - 1) / rate,
				                             .burst = p.burst };
			next++;
		}
		procs_wait(&pr, s);
	}
	procs_stop(&pr);
	uint64_t total;
	double worst = verify(sh, &total);
	cr_assert_eq(sh->eras, 12, "every change of the schedule was made");
	cr_assert_gt(total, 1000, "the load admitted %llu", (unsigned long long)total);
	cr_assert_leq(worst, 0.0, "a key gained %.3f permits over the bound (%llu admissions)",
	              worst, (unsigned long long)total);
	procs_unmap(&pr);
}

/*
 * FIXED and WINDOW: the same workers and clock, the parent changing the
 * limit every CHANGE steps (lowering and raising it).  The rule (keyed.h,
 * LIVE PARAMETERS): counts are kept, and a window (WINDOW: the range of N
 * buckets) never holds more than the least limit in force at any time it
 * covers.  The clock only moves forward, so every admission in a range
 * came before every admission in a later bucket, and each admission in
 * bucket y was checked against the range ending at y: so, per key and per
 * bucket y that admitted anything, the admissions in buckets y - N + 1 .. y
 * are at most the least limit of the eras in force in
 * [(y - N + 1) width, t], t the reading of the last of them.  A change made
 * at the reading c races with the decisions at c, which may decide in
 * either era: its era is recorded as starting at c + 1, which is sound
 * both ways (at c the change's window has min(old, new) <= old, and the
 * era before it, in force at c, is bounded by old), and every later
 * reading comes after the change returned.  A change that forgot counts, gave the change's
 * window the raised limit, or dropped a running transition's cap, breaks
 * it.  FIXED is N = 1.
 */
#define LWINDOW (10 * MS) /* 10 steps per window */

struct limit_case {
	sluice_algo_t algo;
	uint64_t buckets;
};

/* The least limit of the eras in force at some time in [@lo, @last]. */
static uint64_t least_limit(const struct shared *sh, uint64_t lo, uint64_t last)
{
	uint64_t l = UINT64_MAX;
	for (uint32_t e = 0; e < sh->eras; e++) {
		uint64_t a = sh->era[e].start, z = e + 1 < sh->eras ? sh->era[e + 1].start : UINT64_MAX;
		if (a <= last && lo < z && sh->era[e].limit < l)
			l = sh->era[e].limit; /* [a, z) meets [lo, last] */
	}
	return l;
}

/* Returns the worst excess (admissions in a range - its bound). */
static int64_t verify_limits(const struct shared *sh, uint64_t buckets, uint64_t *total)
{
	static uint64_t ts[WORKERS * MAXREC];
	const uint64_t width = LWINDOW / buckets;
	int64_t worst = INT64_MIN;
	*total = 0;
	for (uint32_t key = 0; key < KEYS; key++) {
		size_t m = key_times(sh, key, ts);
		*total += m;
		/* for each admission's bucket y, the range y - N + 1 .. y */
		size_t lo = 0;
		for (size_t i = 0; i < m; i++) {
			uint64_t y = ts[i] / width;
			uint64_t first = y + 1 >= buckets ? y + 1 - buckets : 0;
			while (ts[lo] / width < first)
				lo++;
			size_t hi = i;
			while (hi + 1 < m && ts[hi + 1] / width == y)
				hi++; /* every admission of bucket y */
			uint64_t bound = least_limit(sh, first * width, ts[hi]);
			int64_t ex = (int64_t)(hi - lo + 1) - (int64_t)bound;
			if (ex > worst)
				worst = ex;
			i = hi;
		}
	}
	return worst;
}

ParameterizedTestParameters(keyed_live, procs_change_limit_under_load)
{
	static struct limit_case cases[] = {
		{ SLUICE_ALGO_FIXED, 1 },
		{ SLUICE_ALGO_WINDOW, 5 },
	};
	return cr_make_param_array(struct limit_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct limit_case *lc, keyed_live, procs_change_limit_under_load)
{
	/* L = 15 at init: FIXED's count has 4 bits, so every limit below
	 * fits; each key sees about 12 attempts per step, 120 per window:
	 * every limit binds. */
	const sluice_keyed_config_t c = { .algo = lc->algo, .policy = SLUICE_KEYED_REJECT,
		                          .capacity = 256, .limit = 15, .window_ns = LWINDOW,
		                          .buckets = lc->algo == SLUICE_ALGO_WINDOW ? lc->buckets
		                                                                    : 0 };
	sluice_keyed_t k;
	struct procs pr;
	procs_start(&pr, &c, &k, (struct era){ .start = 0, .limit = 15 });
	struct shared *sh = pr.sh;
	/* {step, limit}: lower, raise, by much and by little, each alone
	 * (ranges are 10 steps: a change 50 steps after the last finds it
	 * over), on a window's first reading (a multiple of 10) or inside one;
	 * then changes 3 steps apart, each landing while the one before is
	 * still in transition (its cap must hold: 2 -> 13 -> 10 keeps 2 for
	 * the windows that hold the first). */
	static const uint64_t sched[][2] = { { 100, 5 },  { 153, 12 }, { 200, 3 },  { 250, 15 },
		                             { 303, 8 },  { 350, 9 },  { 400, 1 },  { 453, 14 },
		                             { 500, 6 },  { 503, 11 }, { 600, 2 },  { 603, 13 }, { 606, 10 },
		                             { 700, 4 },  { 705, 3 },  { 800, 10 } };
	const uint32_t changes = sizeof(sched) / sizeof(sched[0]);
	uint32_t next = 0;
	for (uint64_t s = 1; s <= STEPS; s++) {
		uint64_t now = SEC + s * STEP;
		sluice_clock_manual_set(&sh->clock, now);
		atomic_store_explicit(&sh->step, s, memory_order_release);
		if (next < changes && s == sched[next][0]) {
			int rc = sluice_keyed_set_limit_at(&k, sched[next][1], now);
			cr_assert_eq(rc, 0, "change %u: %s", next, sluice_err_name(rc));
			sluice_keyed_params_t p;
			cr_assert_eq(sluice_keyed_params(&k, &p), 0);
			cr_assert_eq(p.limit, sched[next][1]);
			/* c + 1: see above */
			sh->era[sh->eras++] = (struct era){ .start = now + 1, .limit = p.limit };
			next++;
		}
		procs_wait(&pr, s);
	}
	procs_stop(&pr);
	uint64_t total;
	int64_t worst = verify_limits(sh, lc->buckets, &total);
	cr_assert_eq(sh->eras, changes + 1, "every change of the schedule was made");
	cr_assert_gt(total, 1000, "the load admitted %llu", (unsigned long long)total);
	cr_assert_leq(worst, 0, "%s: a range held %lld admissions over its bound (%llu in all)",
	              lc->algo == SLUICE_ALGO_FIXED ? "FIXED" : "WINDOW", (long long)worst, (unsigned long long)total);
	/* and the bound is tight somewhere: the limits bind */
	cr_assert_eq(worst, 0, "no range reached its limit: the load is too light to test");
	procs_unmap(&pr);
}
