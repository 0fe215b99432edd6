/* SPDX-License-Identifier: MIT */
/*
 * test_gcra.c - GCRA token bucket, single thread, manual clock.
 *
 * The strongest check is a reference model: the documented rules written
 * out plainly in 128-bit arithmetic (TAT' = max(TAT, t) + n*T, admitted when
 * the delay TAT' - tau - t fits; remaining by real division; the
 * reconfiguration rule; cancel from exactly the TAT a booking left).  Every
 * decision the limiter makes over long pseudo-random schedules (clock jumps
 * back and forward, n > 1, n > b, n = 0, reservations, cancels, set_rate and
 * set_burst, times near 2^64) must equal the model's, field by field.  Then
 * the guarantee itself is checked on what was admitted: over every interval,
 * admitted <= b + t/T (per parameter era, and max(b) + t/min(T) across).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/error.h"
#include "sluice/gcra.h"

#include "test_gcra_forge.h"
#include "test_rng.h"

#define US 1000ULL
#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(gcra, .timeout = 120);

__extension__ typedef unsigned __int128 u128;
__extension__ typedef __int128 s128;

static sluice_clock_t mclock;

static void make(sluice_gcra_t *g, uint64_t rate, uint64_t period, uint64_t burst)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_gcra_config_t cfg = { .rate = rate, .period_ns = period, .burst = burst,
		                     .clock = &mclock };
	int rc = sluice_gcra_init(g, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
}


static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- reference model ----------------------------------------------------- */

struct model {
	uint64_t tat, high;
	uint64_t T, tau, burst;
	uint64_t stamp; /* the newest change's reading (READINGS ACROSS A CHANGE) */
};

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

static void model_init(struct model *m, uint64_t rate, uint64_t period, uint64_t burst)
{
	memset(m, 0, sizeof(*m));
	m->T = ceil_div(period, rate);
	m->burst = burst;
	m->tau = burst * m->T;
}

static void expect_never(sluice_decision_t *d, uint64_t burst, uint64_t now)
{
	d->allowed = 0;
	d->limit = burst;
	d->remaining = 0;
	d->retry_after_ns = SLUICE_NEVER;
	d->reset_ns = 0;
	d->now_ns = now;
}

static void model_fill(const struct model *m, sluice_decision_t *d, int allowed, uint64_t now,
                       uint64_t after, uint64_t retry)
{
	u128 lag = after > now ? after - now : 0;
	u128 base = after > now ? after : now;
	u128 top = base <= SLUICE_GCRA_TIME_MAX ? SLUICE_GCRA_TIME_MAX - base : 0;
	u128 credit = lag < m->tau ? m->tau - lag : 0;
	if (credit > top)
		credit = top;
	d->allowed = allowed;
	d->limit = m->burst;
	d->remaining = (uint64_t)(credit / m->T);
	d->retry_after_ns = allowed ? 0 : retry;
	d->delay_ns = allowed ? retry : 0;
	d->reset_ns = (uint64_t)lag;
	d->now_ns = now;
}

/* acquire is take with max_delay 0 */
static int model_take(struct model *m, uint64_t n, uint64_t now, uint64_t max_delay,
                      sluice_decision_t *d)
{
	if (n == 0)
		return SLUICE_EINVAL;
	if (n > m->burst) {
		expect_never(d, m->burst, now);
		return SLUICE_ETOOBIG;
	}
	/* a reading older than the change is judged at its stamp, the wait
	 * measured from the reading */
	u128 at = now < m->stamp ? m->stamp : now;
	u128 base = m->tat > at ? m->tat : at;
	u128 lag = base - at, need = (u128)n * m->T;
	u128 delay = (lag + need > m->tau ? lag + need - m->tau : 0) + (at - now);
	int fits = base + need <= SLUICE_GCRA_TIME_MAX;
	if (fits && delay <= max_delay) {
		m->tat = (uint64_t)(base + need);
		model_fill(m, d, 1, now, m->tat, (uint64_t)delay);
		return 1;
	}
	model_fill(m, d, 0, now, m->tat, fits ? (uint64_t)(delay - max_delay) : SLUICE_NEVER);
	return 0;
}

static int model_cancel(struct model *m, uint64_t n, const sluice_decision_t *b)
{
	u128 left = (u128)b->now_ns + b->reset_ns;
	if (left != m->tat)
		return SLUICE_ECANCEL;
	if (m->tat > m->high)
		m->high = m->tat;
	m->tat -= n * m->T;
	return 0;
}

static uint64_t model_remaining(const struct model *m, uint64_t now)
{
	sluice_decision_t d;
	model_fill(m, &d, 0, now, m->tat, 0);
	return now < m->stamp ? 0 : d.remaining;
}

/* The documented reconfiguration: at the stamp (the setter's reading, or
 * the previous stamp when that is newer), keep the permits held (capped at
 * the new b, floor), or the booked time when past the tolerance; never
 * move back; strictly above every TAT so far. */
static void model_reconfigure(struct model *m, uint64_t T, uint64_t burst, uint64_t now)
{
	if (now < m->stamp)
		now = m->stamp;
	m->stamp = now;
	uint64_t tau = burst * T;
	u128 base = m->tat > now ? m->tat : now, lag = base - now, c;
	if (lag > m->tau) {
		c = (u128)m->tat + (tau > m->tau ? tau - m->tau : 0);
	} else {
		u128 kept = (m->tau - lag) * (u128)T / m->T;
		if (kept > tau)
			kept = tau;
		c = (u128)now + tau - kept;
	}
	u128 floor = m->tat > m->high ? m->tat : m->high;
	if (floor < SLUICE_GCRA_TIME_MAX)
		floor++;
	if (c < floor)
		c = floor;
	if (c > SLUICE_GCRA_TIME_MAX)
		c = SLUICE_GCRA_TIME_MAX;
	m->tat = (uint64_t)c;
	m->T = T;
	m->burst = burst;
	m->tau = tau;
}

static void assert_same(const sluice_decision_t *got, const sluice_decision_t *want, int step,
                        const char *what)
{
	cr_assert_eq(got->allowed, want->allowed, "step %d %s: allowed", step, what);
	cr_assert_eq(got->limit, want->limit, "step %d %s: limit", step, what);
	cr_assert_eq(got->remaining, want->remaining, "step %d %s: remaining %llu, model %llu",
	             step, what, (unsigned long long)got->remaining,
	             (unsigned long long)want->remaining);
	cr_assert_eq(got->retry_after_ns, want->retry_after_ns,
	             "step %d %s: retry_after %llu, model %llu", step, what,
	             (unsigned long long)got->retry_after_ns,
	             (unsigned long long)want->retry_after_ns);
	cr_assert_eq(got->delay_ns, want->delay_ns, "step %d %s: delay %llu, model %llu", step,
	             what, (unsigned long long)got->delay_ns, (unsigned long long)want->delay_ns);
	cr_assert_eq(got->reset_ns, want->reset_ns, "step %d %s: reset %llu, model %llu", step,
	             what, (unsigned long long)got->reset_ns, (unsigned long long)want->reset_ns);
	cr_assert_eq(got->now_ns, want->now_ns, "step %d %s: now_ns", step, what);
}

/* ---- the guarantee, checked on a ledger ---------------------------------- */

struct entry {
	uint64_t t; /* admission time, or a booking's slot */
	uint64_t n; /* 0 once cancelled exactly */
	int era;
};

static int by_time(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return x->t < y->t ? -1 : x->t > y->t;
}

/*
 * Max over every interval [t_i, t_j] of (permits in it) * T - (t_j - t_i),
 * minus tau: <= 0 is the bound b + t/T.  With the entries sorted by time and
 * S the prefix sums, the interval from entry i to entry j counts
 * S_j - S_(i-1) (fewer when equal times precede i: a weaker check that the
 * first of the group covers), so track min(S_(i-1) T - t_i) as j advances.
 * era < 0 checks every entry; otherwise only that era's.
 */
static s128 worst_excess(struct entry *e, size_t n, uint64_t T, uint64_t burst, int era)
{
	/* sorted once: called once per era on the same ledger */
	size_t k = 1;
	while (k < n && by_time(&e[k - 1], &e[k]) <= 0)
		k++;
	if (k < n)
		qsort(e, n, sizeof(*e), by_time);
	s128 S = 0, best_min = 0, worst = -(s128)burst * T;
	int have = 0;
	for (size_t j = 0; j < n; j++) {
		if (e[j].n == 0 || (era >= 0 && e[j].era != era))
			continue;
		s128 before = S * T - (s128)e[j].t;
		if (!have || before < best_min)
			best_min = before;
		have = 1;
		S += e[j].n;
		s128 v = (S * T - (s128)e[j].t) - best_min - (s128)burst * T;
		if (v > worst)
			worst = v;
	}
	return worst;
}

/* ---- long schedules against the model ------------------------------------ */

struct schedule {
	uint64_t rate, period, burst, start, seed;
	int reserve; /* also reserve and cancel            */
	int reconf;  /* also set_rate and set_burst         */
	int spread;  /* steps this many times longer: a bucket that often
	              * holds permits, so readings older than a change
	              * find some (READINGS ACROSS A CHANGE)            */
};

ParameterizedTestParameters(gcra, matches_reference_model)
{
	static struct schedule params[] = {
		{ 10, SEC, 10, 0, 1, 0, 0, 0 },
		{ 10, SEC, 10, 5 * SEC, 2, 1, 0, 0 },
		{ 3, SEC, 4, 0, 3, 1, 0, 0 },                   /* T not whole: 333,333,334 */
		{ 1, 1, 1, 100, 4, 1, 0, 0 },                   /* T = 1 ns, b = 1 */
		{ 1000000, SEC, 64, 1 * SEC, 5, 1, 0, 0 },      /* 1 us */
		{ 7, 1000, 3, 0, 6, 1, 0, 0 },                  /* T = 143 (142.857..) */
		{ 1, SEC, 1, 0, 7, 0, 0, 0 },                   /* b = 1: strict spacing */
		/* near 2^64: the run crosses SLUICE_GCRA_TIME_MAX and readings
		 * go up to UINT64_MAX */
		{ 1000, SEC, 20, SLUICE_GCRA_TIME_MAX - 200 * MS, 8, 1, 0, 0 },
		{ 1, 1, 1000, SLUICE_GCRA_TIME_MAX - 3 * MS, 9, 1, 0, 0 },
		/* live reconfiguration mixed in */
		{ 100, SEC, 10, 0, 10, 1, 1, 0 },
		{ 3, SEC, 5, 7 * SEC, 11, 1, 1, 0 },
		{ 1000, SEC, 20, SLUICE_GCRA_TIME_MAX - 4 * SEC, 12, 1, 1, 0 },
		{ 100, SEC, 10, 0, 13, 1, 1, 40 },
		{ 1000000, SEC, 64, 1 * SEC, 14, 1, 1, 200 },
	};
	return cr_make_param_array(struct schedule, params, sizeof(params) / sizeof(params[0]));
}

#define STEPS 60000
#define MAX_ERAS 4096

ParameterizedTest(struct schedule *p, gcra, matches_reference_model)
{
	sluice_gcra_t g;
	make(&g, p->rate, p->period, p->burst);
	struct model m;
	model_init(&m, p->rate, p->period, p->burst);
	rng_state = p->seed * 0x9E3779B97F4A7C15ULL + 1;

	struct entry *ledger = calloc(STEPS, sizeof(*ledger));
	uint64_t *era_T = calloc(MAX_ERAS, sizeof(uint64_t));
	uint64_t *era_b = calloc(MAX_ERAS, sizeof(uint64_t));
	struct booking {
		sluice_decision_t d;
		uint64_t n;
		size_t entry;
	} *books = calloc(STEPS, sizeof(*books));
	cr_assert(ledger && era_T && era_b && books);
	size_t nledger = 0, nbooks = 0;
	int era = 0;
	era_T[0] = m.T;
	era_b[0] = m.burst;

	uint64_t t = p->start;
	uint64_t admitted = 0, refused = 0, cancelled = 0, kept = 0, reconfs = 0;
	for (int i = 0; i < STEPS; i++) {
		uint64_t r = rnd();
		uint64_t T = m.T, tau = m.tau;
		/* the clock: mostly small steps, sometimes jumps either way, by
		 * up to 3 tolerances, or (rarely) by up to 3 s */
		if (r % 512 == 0) {
			uint64_t back = (r >> 9) % (3 * SEC);
			t = t > back ? t - back : 0;
		} else if (r % 512 == 1) {
			t = sat_add(t, (r >> 9) % (3 * SEC));
		} else if (r % 64 == 2) {
			uint64_t back = (r >> 8) % (3 * tau + 1);
			t = t > back ? t - back : 0;
		} else if (r % 64 == 3) {
			t = sat_add(t, (r >> 8) % (3 * tau + 1)); /* past a full refill */
		} else {
			t = sat_add(t, (r >> 8) % ((2 * T / p->burst + 2) *
			                           (uint64_t)(p->spread ? p->spread : 1)));
		}
		uint64_t op = (r >> 32) % 100;
		uint64_t n = 1 + (r >> 40) % (m.burst < 4 ? m.burst : (m.burst + 1) / 2);
		if ((r >> 50) % 97 == 0)
			n = m.burst + 1 + (r >> 58) % 3; /* can never pass */
		if ((r >> 50) % 97 == 1)
			n = 0;
		sluice_decision_t got, want;
		memset(&got, 0x5a, sizeof(got));
		memset(&want, 0x5a, sizeof(want));
		if (op < 60 || (!p->reserve && op < 96)) {
			int w = model_take(&m, n, t, 0, &want);
			int rc = sluice_gcra_acquire_at(&g, n, t, &got);
			cr_assert_eq(rc, w, "step %d acquire t=%llu n=%llu: %d, model %d", i,
			             (unsigned long long)t, (unsigned long long)n, rc, w);
			if (rc >= 0)
				assert_same(&got, &want, i, "acquire");
			if (rc == 1) {
				ledger[nledger] = (struct entry){ got.now_ns, n, era };
				books[nbooks++] = (struct booking){ got, n, nledger++ };
				admitted += n;
			} else if (rc == 0) {
				refused++;
			}
		} else if (op < 80) {
			uint64_t md;
			switch ((r >> 20) % 4) {
			case 0: md = 0; break;
			case 1: md = (r >> 24) % (2 * tau + 1); break;
			case 2: md = (r >> 24) % (20 * tau + 1); break;
			default: md = UINT64_MAX;
			}
			int w = model_take(&m, n, t, md, &want);
			int rc = sluice_gcra_reserve_at(&g, n, t, md, &got);
			cr_assert_eq(rc, w, "step %d reserve: %d, model %d", i, rc, w);
			if (rc >= 0)
				assert_same(&got, &want, i, "reserve");
			if (rc == 1) {
				ledger[nledger] = (struct entry){ got.now_ns + got.delay_ns, n, era };
				books[nbooks++] = (struct booking){ got, n, nledger++ };
				admitted += n;
			} else if (rc == 0) {
				refused++;
			}
		} else if (op < 86) {
			if (nbooks == 0)
				continue;
			/* mostly the newest booking (exact unless a reconfiguration
			 * came after it), sometimes an older one (kept) */
			size_t k = (r >> 20) % 2 ? nbooks - 1 : (r >> 24) % nbooks;
			struct booking *b = &books[k];
			if (b->n == 0)
				continue; /* given back already: once only */
			uint64_t part = (r >> 28) % 5 == 0 && b->n > 1 ? b->n - 1 : b->n;
			int w = model_cancel(&m, part, &b->d);
			int rc = sluice_gcra_cancel(&g, part, &b->d);
			cr_assert_eq(rc, w, "step %d cancel of booking %zu: %d, model %d", i, k, rc, w);
			if (rc == 0) {
				cancelled++;
				ledger[b->entry].n -= part;
				if (part == b->n) {
					b->n = 0;
					nbooks = k; /* later ones were all kept or given back */
				} else {
					b->n -= part;
					/* the TAT it now leaves is n*T lower */
					b->d.reset_ns -= part * m.T;
				}
			} else {
				kept++;
			}
		} else if (op < 97 || !p->reconf) {
			cr_assert_eq(sluice_gcra_available_at(&g, t), model_remaining(&m, t),
			             "step %d available_at", i);
		} else if (era + 1 < MAX_ERAS) {
			/* reconfigure: rate or burst, up or down, within 4x of the
			 * initial ones */
			uint64_t newT = m.T, burst = m.burst;
			int rc;
			if ((r >> 20) & 1) {
				uint64_t k2 = 1 + (r >> 24) % 4;
				uint64_t T0 = ceil_div(p->period, p->rate);
				newT = (r >> 30) & 1 ? T0 * k2 : (T0 / k2 ? T0 / k2 : 1);
				rc = sluice_gcra_set_rate_at(&g, 1, newT, t); /* 1 per newT ns */
			} else {
				burst = 1 + (r >> 24) % (2 * p->burst);
				rc = sluice_gcra_set_burst_at(&g, burst, t);
			}
			cr_assert_eq(rc, 0, "step %d reconfigure: %s", i, sluice_strerror(rc));
			model_reconfigure(&m, newT, burst, t);
			era++;
			era_T[era] = m.T;
			era_b[era] = m.burst;
			reconfs++;
			cr_assert_eq(sluice_gcra_interval_ns(&g), m.T);
			cr_assert_eq(sluice_gcra_burst(&g), m.burst);
			cr_assert_eq(sluice_gcra_available_at(&g, t), model_remaining(&m, t),
			             "step %d remaining after reconfigure", i);
		}
	}
	cr_assert_gt(admitted, 20 * p->burst, "must admit plenty of permits (%llu)",
	             (unsigned long long)admitted);
	cr_assert_gt(refused, 500, "and refuse plenty (%llu)", (unsigned long long)refused);
	if (p->reserve)
		cr_assert(cancelled > 50 && kept > 50, "cancels: %llu exact, %llu kept",
		          (unsigned long long)cancelled, (unsigned long long)kept);

	/* The guarantee, per era: b + t/T with that era's T and b. */
	s128 tightest = -(s128)UINT64_MAX;
	uint64_t Tmin = UINT64_MAX, bmax = 0;
	for (int e = 0; e <= era; e++) {
		s128 w = worst_excess(ledger, nledger, era_T[e], era_b[e], e);
		cr_assert(w <= 0, "era %d (T=%llu b=%llu): %lld ns over the bound", e,
		          (unsigned long long)era_T[e], (unsigned long long)era_b[e], (long long)w);
		if (w > tightest)
			tightest = w;
		Tmin = era_T[e] < Tmin ? era_T[e] : Tmin;
		bmax = era_b[e] > bmax ? era_b[e] : bmax;
	}
	/* and it is reached: some interval holds b + t/T to within one
	 * request (or the schedule is not testing much) */
	uint64_t n_big = p->burst < 4 ? 1 : (p->burst + 1) / 2;
	if (!p->reconf)
		cr_assert(tightest >= -(s128)(n_big * m.T), "the schedule never filled the bound (%lld)",
		          (long long)tightest);
	/* across changes: max(b) + t / min(T) */
	s128 w = worst_excess(ledger, nledger, Tmin, bmax, -1);
	cr_assert(w <= 0, "across %llu changes: %lld ns over max(b) + t/min(T)",
	              (unsigned long long)reconfs, (long long)w);
	cr_log_info("rate=%llu/%llu b=%llu: admitted %llu refused %llu cancel %llu/%llu "
	            "reconf %llu",
	            (unsigned long long)p->rate, (unsigned long long)p->period,
	            (unsigned long long)p->burst, (unsigned long long)admitted,
	            (unsigned long long)refused, (unsigned long long)cancelled,
	            (unsigned long long)kept, (unsigned long long)reconfs);
	free(ledger);
	free(era_T);
	free(era_b);
	free(books);
	sluice_gcra_destroy(&g);
}

/* ---- targeted behaviour -------------------------------------------------- */

Test(gcra, non_whole_interval_rounds_up_within_documented_bound)
{
	sluice_gcra_t g;
	make(&g, 3, SEC, 1); /* 333,333,333.3 ns -> 333,333,334 */
	cr_assert_eq(sluice_gcra_interval_ns(&g), 333333334ULL);
	sluice_decision_t d;
	for (uint64_t k = 0; k < 3; k++)
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, k * 333333334ULL, &d), 1, "permit %llu",
		             (unsigned long long)k);
	/* the 4th would come 2 ns after 1 s: exactly the rounding, never earlier */
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, SEC, &d), 0);
	cr_assert_eq(d.retry_after_ns, 2);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, SEC + 2, &d), 1);
	/* at full speed, slot k is at k*T exactly: 3000 slots in [0, 1000 s]
	 * where the exact rate would give 3001, never earlier */
	uint64_t n = 4;
	for (uint64_t k = 4; k * 333333334ULL <= 1000 * SEC; k++, n++) {
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, k * 333333334ULL - 1, NULL), 0);
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, k * 333333334ULL, NULL), 1);
	}
	cr_assert_eq(n, 3000, "admitted %llu", (unsigned long long)n);

	/* 1,500,000/s: T = 667 (0.05%): accepted; 3,000,000/s: 0.2%: refused;
	 * 7,000,000/s: exactly 0.1%: accepted */
	sluice_gcra_config_t cfg = { .rate = 1500000, .period_ns = SEC, .burst = 1,
		                     .clock = &mclock };
	cr_assert_eq(sluice_gcra_init(&g, &cfg), 0);
	cr_assert_eq(sluice_gcra_interval_ns(&g), 667);
	cfg.rate = 3000000;
	cr_assert_eq(sluice_gcra_init(&g, &cfg), SLUICE_ERATE);
	cfg.rate = 7000000;
	cr_assert_eq(sluice_gcra_init(&g, &cfg), 0);
	cr_assert_eq(sluice_gcra_interval_ns(&g), 143);
}

Test(gcra, clock_backwards_by_seconds_mints_nothing)
{
	sluice_gcra_t g;
	make(&g, 10, SEC, 10); /* T = 100 ms, tau = 1 s */
	sluice_decision_t d;
	cr_assert_eq(sluice_gcra_acquire_at(&g, 10, 30 * SEC, &d), 1);
	cr_assert_eq(d.reset_ns, SEC, "TAT = 31 s");
	/* the next permit is due at 30.1 s, whatever the reading says */
	for (uint64_t back = 1; back <= 10; back++) {
		uint64_t t = 30 * SEC - back * SEC;
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t, &d), 0, "%llu s back",
		             (unsigned long long)back);
		cr_assert_eq(d.now_ns, t, "the reading is the time used");
		cr_assert_eq(d.retry_after_ns, 30 * SEC + 100 * MS - t, "measured from the reading");
		cr_assert_eq(d.remaining, 0);
		cr_assert_eq(sluice_gcra_reserve_at(&g, 1, t, SEC / 2, &d), 0, "no slot either");
	}
	/* readings just before 30.1 s: still nothing */
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, 30 * SEC + 100 * MS - 1, &d), 0);
	cr_assert_eq(d.retry_after_ns, 1);
	/* then exactly one permit per T, as if the clock had never moved */
	for (uint64_t k = 1; k <= 20; k++) {
		uint64_t t = 30 * SEC + k * 100 * MS;
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t, NULL), 1, "slot %llu",
		             (unsigned long long)k);
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t, NULL), 0, "only one at %llu",
		             (unsigned long long)k);
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t - 5 * SEC, NULL), 0, "nor in the past");
	}
	/* the plain variant reads the manual clock the same way */
	sluice_clock_manual_set(&mclock, 2 * SEC);
	cr_assert_eq(sluice_gcra_acquire(&g, 1, &d), 0);
	cr_assert_eq(d.now_ns, 2 * SEC);
	sluice_clock_manual_set(&mclock, 40 * SEC);
	cr_assert_eq(sluice_gcra_acquire(&g, 10, &d), 1, "forward jump: full again, no more");
	cr_assert_eq(sluice_gcra_acquire(&g, 1, &d), 0);
}

Test(gcra, n_zero_and_above_burst)
{
	sluice_gcra_t g;
	make(&g, 10, SEC, 5);
	sluice_decision_t d;
	cr_assert_eq(sluice_gcra_acquire_at(&g, 0, 1, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_gcra_reserve_at(&g, 0, 1, UINT64_MAX, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 6, 1, &d), SLUICE_ETOOBIG);
	cr_assert_not(d.allowed);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	cr_assert_eq(d.limit, 5);
	cr_assert_eq(sluice_gcra_reserve_at(&g, UINT64_MAX, 1, UINT64_MAX, &d), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 5, 1, &d), 1, "nothing was taken");
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(d.reset_ns, 500 * MS);
	cr_assert_eq(d.limit, 5);
}

Test(gcra, retry_after_and_remaining_are_exact)
{
	sluice_gcra_t g;
	make(&g, 1000, 7 * SEC, 9); /* T = 7 ms */
	rng_state = 99;
	uint64_t t = 1000 * SEC;
	int refusals = 0;
	for (int i = 0; i < 3000; i++) {
		t += rnd() % (20 * MS);
		uint64_t r = sluice_gcra_available_at(&g, t);
		cr_assert_leq(r, 9);
		/* remaining is how many single permits pass right now */
		for (uint64_t k = 0; k < r; k++)
			cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t, NULL), 1, "permit %llu of %llu",
			             (unsigned long long)k, (unsigned long long)r);
		sluice_decision_t d;
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t, &d), 0, "one more than remaining");
		cr_assert_eq(d.remaining, 0);
		/* retry_after: refused 1 ns before it, admitted at it (any n) */
		uint64_t n = 1 + rnd() % 9;
		cr_assert_eq(sluice_gcra_acquire_at(&g, n, t, &d), 0);
		uint64_t at = t + d.retry_after_ns;
		cr_assert_eq(sluice_gcra_acquire_at(&g, n, at - 1, &d), 0);
		cr_assert_eq(sluice_gcra_acquire_at(&g, n, at, &d), 1, "n=%llu at retry_after",
		             (unsigned long long)n);
		t = at;
		refusals++;
	}
	cr_assert_eq(refusals, 3000);
}

Test(gcra, reserve_books_fifo_and_respects_max_delay)
{
	sluice_gcra_t g;
	make(&g, 1000, SEC, 1); /* T = 1 ms, b = 1: strict spacing */
	sluice_decision_t d;
	for (uint64_t k = 0; k < 5; k++) {
		cr_assert_eq(sluice_gcra_reserve_at(&g, 1, 10 * SEC, 10 * MS, &d), 1);
		cr_assert(d.allowed);
		cr_assert_eq(d.delay_ns, k * MS, "slot %llu", (unsigned long long)k);
		cr_assert_eq(d.now_ns, 10 * SEC);
	}
	/* the next slot is 5 ms away: over a 2 ms limit, nothing booked */
	cr_assert_eq(sluice_gcra_reserve_at(&g, 1, 10 * SEC, 2 * MS, &d), 0);
	cr_assert_not(d.allowed);
	cr_assert_eq(d.retry_after_ns, 3 * MS, "5 ms wait - 2 ms limit");
	cr_assert_eq(sluice_gcra_reserve_at(&g, 1, 10 * SEC, 5 * MS, &d), 1, "nothing was booked");
	cr_assert_eq(d.delay_ns, 5 * MS);
	/* acquire does not jump the queue */
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, 10 * SEC + 5 * MS, &d), 0);
	cr_assert_eq(d.retry_after_ns, MS);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, 10 * SEC + 6 * MS, &d), 1);
	/* a later arrival books after the queue, from its own reading */
	cr_assert_eq(sluice_gcra_reserve_at(&g, 1, 10 * SEC + 6 * MS + 300 * US, UINT64_MAX, &d), 1);
	cr_assert_eq(d.delay_ns, 700 * US);
	/* an idle bucket books "now" */
	cr_assert_eq(sluice_gcra_reserve_at(&g, 1, 20 * SEC, 0, &d), 1);
	cr_assert_eq(d.delay_ns, 0);
	cr_assert_eq(d.remaining, 0);
}

/* Feed the same history to two limiters, then require the same answers. */
static void assert_twins(sluice_gcra_t *a, sluice_gcra_t *b, uint64_t t, const char *why)
{
	for (int k = 0; k < 40; k++, t += 250 * US) {
		sluice_decision_t x, y;
		int ra = sluice_gcra_acquire_at(a, 1 + (uint64_t)k % 3, t, &x);
		int rb = sluice_gcra_acquire_at(b, 1 + (uint64_t)k % 3, t, &y);
		cr_assert_eq(ra, rb, "%s: decision %d", why, k);
		assert_same(&x, &y, k, why);
	}
}

Test(gcra, cancel_gives_back_exactly_only_when_last)
{
	sluice_gcra_t g, twin;
	make(&g, 1000, SEC, 5); /* T = 1 ms, b = 5 */
	make(&twin, 1000, SEC, 5);
	uint64_t t = 3 * SEC;
	sluice_decision_t a, b, c, x;
	cr_assert_eq(sluice_gcra_reserve_at(&g, 2, t, UINT64_MAX, &a), 1);
	cr_assert_eq(sluice_gcra_reserve_at(&g, 2, t, UINT64_MAX, &b), 1);
	cr_assert_eq(sluice_gcra_reserve_at(&g, 3, t, UINT64_MAX, &c), 1);
	cr_assert_eq(c.delay_ns, 2 * MS, "7 permits from a bucket of 5");
	cr_assert_eq(sluice_gcra_reserve_at(&twin, 2, t, UINT64_MAX, &x), 1);
	cr_assert_eq(sluice_gcra_reserve_at(&twin, 2, t, UINT64_MAX, &x), 1);

	/* a is not the last booking: kept, nothing changes */
	cr_assert_eq(sluice_gcra_cancel(&g, 2, &a), SLUICE_ECANCEL);
	/* c is: given back exactly, g now equals its twin that never booked c */
	cr_assert_eq(sluice_gcra_cancel(&g, 3, &c), 0);
	cr_assert_eq(sluice_gcra_available_at(&g, t), sluice_gcra_available_at(&twin, t));
	/* then b, then a: back to a fresh limiter */
	cr_assert_eq(sluice_gcra_cancel(&g, 2, &b), 0);
	cr_assert_eq(sluice_gcra_cancel(&g, 2, &a), 0);
	cr_assert_eq(sluice_gcra_available_at(&g, t), 5);
	sluice_gcra_t fresh;
	make(&fresh, 1000, SEC, 5);
	sluice_gcra_t g2 = g; /* single thread: a plain copy is a snapshot */
	assert_twins(&g2, &fresh, t, "after cancelling everything");

	/* an admission refunded (the composite's use) */
	cr_assert_eq(sluice_gcra_acquire_at(&g, 4, t, &a), 1);
	cr_assert_eq(sluice_gcra_refund(&g, 4, &a), 0);
	cr_assert_eq(sluice_gcra_available_at(&g, t), 5);
	/* partial: give back 1 of 3, then the other 2 from the TAT left */
	cr_assert_eq(sluice_gcra_acquire_at(&g, 3, t, &a), 1);
	cr_assert_eq(sluice_gcra_cancel(&g, 1, &a), 0);
	cr_assert_eq(sluice_gcra_available_at(&g, t), 3);
	a.reset_ns -= MS;
	cr_assert_eq(sluice_gcra_cancel(&g, 2, &a), 0);
	cr_assert_eq(sluice_gcra_available_at(&g, t), 5);

	/* kept means kept: later bookings stay where they were promised */
	cr_assert_eq(sluice_gcra_acquire_at(&g, 5, t, &a), 1);
	cr_assert_eq(sluice_gcra_reserve_at(&g, 1, t, UINT64_MAX, &b), 1);
	cr_assert_eq(b.delay_ns, MS);
	cr_assert_eq(sluice_gcra_cancel(&g, 5, &a), SLUICE_ECANCEL);
	cr_assert_eq(sluice_gcra_reserve_at(&g, 1, t, UINT64_MAX, &c), 1);
	cr_assert_eq(c.delay_ns, 2 * MS, "after b's slot, not in a's");

	/* bad arguments */
	cr_assert_eq(sluice_gcra_cancel(NULL, 1, &c), SLUICE_EINVAL);
	cr_assert_eq(sluice_gcra_cancel(&g, 1, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_gcra_cancel(&g, 0, &c), SLUICE_EINVAL);
	x = c;
	x.allowed = 0;
	cr_assert_eq(sluice_gcra_cancel(&g, 1, &x), SLUICE_EINVAL);
	cr_assert_eq(sluice_gcra_cancel(&g, 6, &c), SLUICE_EINVAL, "more than b");
	x = c;
	x.now_ns = UINT64_MAX;
	cr_assert_eq(sluice_gcra_cancel(&g, 1, &x), SLUICE_EINVAL, "no such TAT");
	/* n*T above the TAT the booking left: not a booking of this limiter */
	sluice_gcra_t h;
	make(&h, 1000, SEC, 5);
	cr_assert_eq(sluice_gcra_acquire_at(&h, 1, 0, &x), 1); /* TAT = 1 ms */
	cr_assert_eq(sluice_gcra_cancel(&h, 2, &x), SLUICE_EINVAL);
	cr_assert_eq(sluice_gcra_cancel(&h, 1, &x), 0);
}

Test(gcra, set_rate_and_burst_keep_the_state)
{
	sluice_gcra_t g;
	sluice_decision_t d;
	/* slower rate on an empty bucket: still empty, next permit one new T later */
	make(&g, 10, SEC, 10);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 10, SEC, NULL), 1);
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 1, SEC, SEC), 0);
	cr_assert_eq(sluice_gcra_interval_ns(&g), SEC);
	cr_assert_eq(sluice_gcra_available_at(&g, SEC), 0, "no fresh burst");
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, SEC, &d), 0);
	cr_assert_eq(d.retry_after_ns, SEC, "one permit at the new rate");
	cr_assert_eq(d.limit, 10);

	/* slower rate on a half-full bucket: the 5 held are kept */
	make(&g, 10, SEC, 10);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 5, SEC, NULL), 1);
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 1, SEC, SEC), 0);
	cr_assert_eq(sluice_gcra_available_at(&g, SEC), 5);
	cr_assert_eq(sluice_gcra_available_at(&g, 2 * SEC), 6, "refills at the new rate");

	/* larger burst, empty bucket: stays empty, refills at the rate */
	make(&g, 10, SEC, 10);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 10, SEC, NULL), 1);
	cr_assert_eq(sluice_gcra_set_burst_at(&g, 100, SEC), 0);
	cr_assert_eq(sluice_gcra_burst(&g), 100);
	cr_assert_eq(sluice_gcra_available_at(&g, SEC), 0, "no fresh burst");
	cr_assert_eq(sluice_gcra_available_at(&g, 2 * SEC), 10, "10 per second");
	cr_assert_eq(sluice_gcra_available_at(&g, 11 * SEC - 1), 99);
	cr_assert_eq(sluice_gcra_available_at(&g, 11 * SEC), 100, "full after 10 s");

	/* larger burst, full bucket: the 10 held, growing to 100 */
	make(&g, 10, SEC, 10);
	cr_assert_eq(sluice_gcra_set_burst_at(&g, 100, 5 * SEC), 0);
	cr_assert_eq(sluice_gcra_available_at(&g, 5 * SEC), 10);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 11, 5 * SEC, NULL), 0);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 10, 5 * SEC, NULL), 1);

	/* smaller burst, full bucket: the new burst */
	make(&g, 10, SEC, 10);
	cr_assert_eq(sluice_gcra_set_burst_at(&g, 3, 5 * SEC), 0);
	cr_assert_eq(sluice_gcra_available_at(&g, 5 * SEC), 3);

	/* smaller burst, half-empty bucket: the TAT (the debt) is kept */
	make(&g, 10, SEC, 10);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 8, 5 * SEC, NULL), 1); /* 2 left, TAT 5.8 s */
	cr_assert_eq(sluice_gcra_set_burst_at(&g, 5, 5 * SEC), 0);
	cr_assert_eq(sluice_gcra_available_at(&g, 5 * SEC), 0, "8 used of 5");
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, 5 * SEC, &d), 0);
	cr_assert_eq(d.retry_after_ns, 400 * MS + 1, "when 4 of the 8 have drained (+1 ns)");

	/* faster rate, empty bucket: the TAT is kept (documented example) */
	make(&g, 1, SEC, 10);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 10, 0, NULL), 1); /* TAT 10 s */
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 100, SEC, 0), 0);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, 0, &d), 0);
	cr_assert_eq(d.retry_after_ns, 9 * SEC + 910 * MS + 1, "about 9.9 s");
	cr_assert_eq(d.limit, 10);
	cr_assert_eq(sluice_gcra_available_at(&g, 10 * SEC + 1), 10, "full when the old TAT passes");

	/* faster rate, full bucket: full */
	make(&g, 1, SEC, 10);
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 100, SEC, 100 * SEC), 0);
	cr_assert_eq(sluice_gcra_available_at(&g, 100 * SEC), 10);

	/* bookings past the tolerance: their slots stay, the next one comes
	 * one new T after the last booked slot */
	make(&g, 1000, SEC, 2); /* T = 1 ms, tau = 2 ms */
	for (uint64_t k = 0; k < 5; k++) {
		cr_assert_eq(sluice_gcra_reserve_at(&g, 1, SEC, UINT64_MAX, &d), 1);
		cr_assert_eq(d.delay_ns, k < 2 ? 0 : (k - 1) * MS, "booking %llu",
		             (unsigned long long)k);
	}
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 500, SEC, SEC), 0); /* T = 2 ms, tau = 4 ms */
	cr_assert_eq(sluice_gcra_reserve_at(&g, 1, SEC, UINT64_MAX, &d), 1);
	cr_assert_eq(d.delay_ns, 5 * MS, "last slot at 3 ms, + 2 ms");
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, SEC + 7 * MS - 1, &d), 0);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, SEC + 7 * MS, &d), 1);
	/* just past the tolerance (by 1 ns) too */
	make(&g, 1000, SEC, 2);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 2, SEC, &d), 1); /* TAT = 1 s + 2 ms */
	cr_assert_eq(sluice_gcra_set_burst_at(&g, 5, SEC - 1), 0); /* lag = tau + 1 ns */
	/* the bucket empties at 1 s either way, then refills from there */
	cr_assert_eq(sluice_gcra_available_at(&g, SEC + MS), 1, "as the old burst would hold");
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, SEC + MS, &d), 1);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, SEC + MS, &d), 0);
	cr_assert_eq(d.retry_after_ns, MS);
	/* raising the rate with bookings: the TAT is kept */
	make(&g, 500, SEC, 2); /* T = 2 ms, tau = 4 ms */
	for (int k = 0; k < 4; k++)
		cr_assert_eq(sluice_gcra_reserve_at(&g, 1, SEC, UINT64_MAX, &d), 1);
	cr_assert_eq(d.delay_ns, 4 * MS, "TAT 1 s + 8 ms");
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 1000, SEC, SEC), 0); /* T = 1 ms, tau = 2 ms */
	cr_assert_eq(sluice_gcra_reserve_at(&g, 1, SEC, UINT64_MAX, &d), 1);
	cr_assert_eq(d.delay_ns, 7 * MS + 1, "TAT 1 s + 8 ms + 1 ns + 1 ms - tau 2 ms");

	/* errors change nothing */
	make(&g, 10, SEC, 10);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 4, SEC, NULL), 1);
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 0, SEC, SEC), SLUICE_ERATE);
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 10, 9, SEC), SLUICE_ERATE);
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 3000000, SEC, SEC), SLUICE_ERATE);
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 1, SLUICE_GCRA_SPAN_MAX / 5, SEC), SLUICE_ERATE,
	             "b * T too long");
	cr_assert_eq(sluice_gcra_set_burst_at(&g, 0, SEC), SLUICE_EBURST);
	cr_assert_eq(sluice_gcra_set_burst_at(&g, SLUICE_GCRA_SPAN_MAX, SEC), SLUICE_EBURST);
	cr_assert_eq(sluice_gcra_set_rate_at(NULL, 1, SEC, SEC), SLUICE_EINVAL);
	cr_assert_eq(sluice_gcra_set_burst_at(NULL, 1, SEC), SLUICE_EINVAL);
	cr_assert_eq(sluice_gcra_interval_ns(&g), 100 * MS);
	cr_assert_eq(sluice_gcra_burst(&g), 10);
	cr_assert_eq(sluice_gcra_available_at(&g, SEC), 6);

	/* a booking made before a change cannot be given back after it */
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, SEC, &d), 1);
	cr_assert_eq(sluice_gcra_set_burst_at(&g, 10, SEC), 0); /* same burst */
	cr_assert_eq(sluice_gcra_cancel(&g, 1, &d), SLUICE_ECANCEL);
	cr_assert_eq(sluice_gcra_available_at(&g, SEC), 4, "kept (the change cost < 1 permit)");

	/* the plain variants read the clock */
	make(&g, 10, SEC, 10);
	sluice_clock_manual_set(&mclock, 7 * SEC);
	cr_assert_eq(sluice_gcra_acquire(&g, 10, NULL), 1);
	cr_assert_eq(sluice_gcra_set_rate(&g, 1, SEC), 0);
	cr_assert_eq(sluice_gcra_set_burst(&g, 20), 0);
	cr_assert_eq(sluice_gcra_available(&g), 0);
	sluice_clock_manual_set(&mclock, 8 * SEC);
	cr_assert_eq(sluice_gcra_available(&g), 1);
}

/*
 * White box: a writer stopped right after sealing the TAT (as if preempted
 * between its CASes).  The next decision must finish the change itself and
 * decide with the new parameters and the converted TAT.
 */
Test(gcra, decisions_finish_a_half_done_reconfiguration)
{
	sluice_gcra_t g, spec;
	make(&g, 10, SEC, 10);
	make(&spec, 1, SEC, 4); /* the parameters the writer was installing */
	cr_assert_eq(sluice_gcra_acquire_at(&g, 6, SEC, NULL), 1);
	uint64_t e = atomic_load(&g.era);
	struct sluice__gcra_params *src = &spec.params[atomic_load(&spec.era) & 1];
	/* start 12 s, the converted TAT: 4 - 4 = 0 held... */
	gcra_forge_half_done(&g, src, 12 * SEC);

	sluice_decision_t d;
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, SEC, &d), 0, "decided on the new state");
	cr_assert_eq(d.limit, 4, "with the new burst");
	cr_assert_eq(d.retry_after_ns, 8 * SEC, "TAT 12 s + T 1 s - tau 4 s - now 1 s");
	cr_assert_eq(atomic_load(&g.era), e + 1, "the era was flipped");
	cr_assert_eq(atomic_load(&g.tat), 12 * SEC, "and the TAT unsealed");
	cr_assert_eq(sluice_gcra_interval_ns(&g), SEC);
	/* a real change after it works as usual */
	cr_assert_eq(sluice_gcra_set_burst_at(&g, 8, SEC), 0);
	cr_assert_eq(sluice_gcra_burst(&g), 8);
	cr_assert_eq(atomic_load(&g.era), e + 2);

	/* available_at and reserve help too */
	make(&g, 10, SEC, 10);
	gcra_forge_half_done(&g, src, 1);
	cr_assert_eq(sluice_gcra_available_at(&g, 100 * SEC), 4);
	cr_assert_eq(sluice_gcra_reserve_at(&g, 4, 100 * SEC, 0, &d), 1);
	cr_assert_eq(d.limit, 4);
}

Test(gcra, times_near_2_64)
{
	sluice_gcra_t g;
	make(&g, 1000, SEC, 10); /* T = 1 ms, tau = 10 ms */
	sluice_decision_t d;
	const uint64_t end = SLUICE_GCRA_TIME_MAX;
	/* a full bucket well before the end */
	cr_assert_eq(sluice_gcra_available_at(&g, end - 20 * MS), 10);
	/* 4 ms before the end only 4 fit: the 5th would book past it */
	cr_assert_eq(sluice_gcra_available_at(&g, end - 4 * MS), 4);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 5, end - 4 * MS, &d), 0);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER, "only the end of time stops it");
	cr_assert_eq(sluice_gcra_acquire_at(&g, 4, end - 4 * MS, &d), 1);
	cr_assert_eq(d.reset_ns, 4 * MS);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, end, &d), 0);
	cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
	/* readings past the TAT range, up to UINT64_MAX: refused, no wrap */
	for (uint64_t t = end; t >= end && t <= UINT64_MAX - 1000003; t += 1000003) {
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, t, &d), 0);
		cr_assert_eq(d.retry_after_ns, SLUICE_NEVER);
		cr_assert_eq(sluice_gcra_reserve_at(&g, 1, t, UINT64_MAX, &d), 0);
	}
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, UINT64_MAX, &d), 0);
	cr_assert_eq(d.now_ns, UINT64_MAX);
	cr_assert_eq(d.reset_ns, 0);
	cr_assert_eq(sluice_gcra_available_at(&g, UINT64_MAX), 0);
	/* a reconfiguration there is clamped, never wraps: nothing passes */
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 1, SEC, UINT64_MAX), 0);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, UINT64_MAX - SEC, &d), 0);
	/* time 0 works too: a fresh bucket is full at 0 */
	make(&g, 1000, SEC, 10);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 10, 0, &d), 1);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, 0, &d), 0);
	cr_assert_eq(d.retry_after_ns, MS);
}

struct bad_cfg {
	uint64_t rate, period, burst;
	int clock; /* 0 manual, 1 a bogus kind */
	int want;
};

ParameterizedTestParameters(gcra, invalid_config)
{
	static struct bad_cfg params[] = {
		{ 0, SEC, 1, 0, SLUICE_ERATE },                   /* zero rate */
		{ 10, 9, 1, 0, SLUICE_ERATE },                     /* T under 1 ns */
		{ 1, 0, 1, 0, SLUICE_ERATE },                      /* zero period */
		{ 3000000, SEC, 1, 0, SLUICE_ERATE },              /* rounding 0.2% */
		{ 3, 10, 1, 0, SLUICE_ERATE },                     /* 3.33 -> 4 ns: 20% */
		{ 10, SEC, 0, 0, SLUICE_EBURST },                  /* zero burst */
		{ 1, 1, SLUICE_GCRA_SPAN_MAX + 1, 0, SLUICE_EBURST }, /* b * T too long */
		{ 1, SEC, SLUICE_GCRA_SPAN_MAX / SEC + 1, 0, SLUICE_EBURST },
		{ 1, UINT64_MAX, 1, 0, SLUICE_EBURST },            /* T alone too long */
		{ 10, SEC, 1, 1, SLUICE_ECLOCK },
		{ 1, 1, 1, 0, 0 },                                  /* smallest: T = 1 ns, b = 1 */
		{ 1, 1, SLUICE_GCRA_SPAN_MAX, 0, 0 },               /* largest burst */
		{ 1, SLUICE_GCRA_SPAN_MAX, 1, 0, 0 },               /* largest interval */
		{ 7000000, SEC, 1, 0, 0 },                          /* rounding exactly 0.1% */
		{ UINT64_MAX, UINT64_MAX, 1, 0, 0 },                /* T = 1 from huge numbers */
	};
	return cr_make_param_array(struct bad_cfg, params, sizeof(params) / sizeof(params[0]));
}

ParameterizedTest(struct bad_cfg *p, gcra, invalid_config)
{
	sluice_clock_t m, bogus;
	sluice_clock_manual_init(&m, 0);
	memset(&bogus, 0, sizeof(bogus));
	bogus.kind = (sluice_clock_kind_t)7;
	sluice_gcra_config_t cfg = { .rate = p->rate, .period_ns = p->period, .burst = p->burst,
		                     .clock = p->clock ? &bogus : &m };
	sluice_gcra_t g, before;
	memset(&g, 0xab, sizeof(g));
	memcpy(&before, &g, sizeof(g));
	int rc = sluice_gcra_init(&g, &cfg);
	cr_assert_eq(rc, p->want, "rate=%llu period=%llu burst=%llu: got %s (%s), want %s",
	             (unsigned long long)p->rate, (unsigned long long)p->period,
	             (unsigned long long)p->burst, sluice_err_name(rc), sluice_strerror(rc),
	             sluice_err_name(p->want));
	if (rc == 0) {
		/* and it works: a full burst, then nothing */
		cr_assert_eq(sluice_gcra_acquire_at(&g, p->burst, 0, NULL), 1);
		cr_assert_eq(sluice_gcra_acquire_at(&g, 1, 0, NULL), 0);
		sluice_gcra_destroy(&g);
	} else {
		cr_assert_eq(memcmp(&g, &before, sizeof(g)), 0, "a failed init must not touch it");
	}
}

Test(gcra, null_arguments_size_and_default_clock)
{
	sluice_gcra_t g;
	sluice_gcra_config_t cfg = { .rate = 1, .period_ns = SEC, .burst = 1 };
	cr_assert_eq(sluice_gcra_init(NULL, &cfg), SLUICE_EINVAL);
	cr_assert_eq(sluice_gcra_init(&g, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_gcra_init(&g, &cfg), 0);
	cr_assert_eq(g.clock, &sluice_clock_cached, "NULL clock means the cached clock");
	cr_assert_eq(sluice_gcra_acquire(&g, 1, NULL), 1, "reads a live clock");
	sluice_gcra_destroy(NULL);
	sluice_gcra_destroy(&g);
	cr_assert_eq(sluice_gcra_size(), sizeof(sluice_gcra_t));
	cr_assert_eq(sizeof(sluice_gcra_t), 320, "as gcra.h's MEMORY says");
	cr_assert_eq(sluice_gcra_refund(NULL, 1, NULL), SLUICE_EINVAL);
}

/* A bucket smaller than one clock step would cap the rate at b per step:
 * init, set_rate and set_burst refuse it and change nothing. */
Test(gcra, bucket_below_clock_resolution)
{
	uint64_t r = sluice_clock_resolution_ns(&sluice_clock_cached);
	if (r < 1000)
		cr_skip_test("the cached clock's step is only %llu ns", (unsigned long long)r);
	/* T = r / 4: a burst of 3 spans less than one step, 4 exactly one */
	sluice_gcra_config_t c = { .rate = 1, .period_ns = r / 4, .burst = 3,
		                   .clock = &sluice_clock_cached };
	sluice_gcra_t g, before;
	memset(&g, 0x5a, sizeof(g));
	memcpy(&before, &g, sizeof(g));
	cr_assert_eq(sluice_gcra_init(&g, &c), SLUICE_ERESOLUTION);
	cr_assert_eq(memcmp(&g, &before, sizeof(g)), 0, "a failed init must not touch it");
	c.burst = 4;
	cr_assert_eq(sluice_gcra_init(&g, &c), 0);
	cr_assert_eq(sluice_gcra_set_burst(&g, 3), SLUICE_ERESOLUTION);
	cr_assert_eq(sluice_gcra_set_rate(&g, 1, r / 8), SLUICE_ERESOLUTION, "4 x r/8 < r");
	sluice_decision_t d;
	cr_assert_eq(sluice_gcra_acquire_at(&g, 4, 1000 * r, &d), 1, "b = 4 kept");
	cr_assert_eq(d.limit, 4);
}

/* A cancel writes `high`; no decision reads it.  It must not share a cache
 * line with the era and the parameters, which every decision reads (the old
 * layout had it beside the era), nor with the TAT.  Lines are counted from
 * the struct's start, which init's callers align to a cache line. */
Test(gcra, cancel_bookkeeping_is_off_the_decision_lines)
{
	size_t line = SLUICE_CACHELINE;
	size_t high = offsetof(sluice_gcra_t, high) / line;
	size_t writer = offsetof(sluice_gcra_t, writer) / line;
	size_t tat = offsetof(sluice_gcra_t, tat) / line;
	size_t era = offsetof(sluice_gcra_t, era) / line;
	size_t params_first = offsetof(sluice_gcra_t, params) / line;
	size_t params_end = offsetof(sluice_gcra_t, params) + sizeof(((sluice_gcra_t *)0)->params);
	size_t params_last = (params_end - 1) / line;
	cr_assert_neq(high, era, "high shares the era's line");
	cr_assert(high < params_first || high > params_last, "high shares a parameter line");
	cr_assert_neq(high, tat, "high shares the TAT's line");
	cr_assert_eq(writer, high, "the reconfiguration flag sits with high, off the read lines");
	cr_assert(tat > params_last && tat != era, "the TAT has a line of its own");
	cr_assert_eq(_Alignof(sluice_gcra_t), SLUICE_CACHELINE);
}

/* The refund contract (gcra.h, CANCEL / REFUND): a second cancel of one
 * booking is refused and changes nothing, except when a booking made since
 * ended at exactly the same ns: that one is then given back (the documented
 * hole the caller's "at most once" closes). */
Test(gcra, second_cancel_is_refused_unless_a_later_booking_ends_there)
{
	sluice_gcra_t g;
	make(&g, 10, SEC, 5);
	sluice_decision_t a, b, c;
	cr_assert_eq(sluice_gcra_acquire_at(&g, 2, 0, &a), 1);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, 0, &b), 1);
	cr_assert_eq(sluice_gcra_cancel(&g, 1, &b), 0);
	uint64_t tat = atomic_load(&g.tat);
	cr_assert_eq(sluice_gcra_cancel(&g, 1, &b), SLUICE_ECANCEL, "twice: refused");
	cr_assert_eq(atomic_load(&g.tat), tat, "and nothing changed");
	/* the same request again, before the bucket refilled: it ends where b
	 * ended, so a second cancel of b cannot be told from c's */
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, 0, &c), 1);
	cr_assert_eq(c.now_ns + c.reset_ns, b.now_ns + b.reset_ns);
	cr_assert_eq(sluice_gcra_cancel(&g, 1, &b), 0, "the hole the contract closes");
	cr_assert_eq(sluice_gcra_available_at(&g, 0), 3, "c's permit was given back too");
	(void)a;
}

/*
 * White box: a set_rate stopped while it holds the writers' flag (SIGSTOP, a
 * signal handler that never returns), here right after sealing.  Decisions
 * finish its change and go on; a later set_rate waits
 * SLUICE_GCRA_WRITER_WAIT_NS, then returns SLUICE_ETIMEDOUT with nothing
 * changed.  The old code spun in sched_yield() for ever (the timeout
 * catches it).  Once the stopped writer lets go, set_rate works again.
 */
Test(gcra, a_stopped_writer_times_out_later_writers, .timeout = 30)
{
	sluice_gcra_t g, spec;
	make(&g, 10, SEC, 10);
	make(&spec, 1, SEC, 4);
	uint64_t e = atomic_load(&g.era);
	struct sluice__gcra_params *src = &spec.params[atomic_load(&spec.era) & 1];
	atomic_store(&g.writer, 1); /* the stopped writer holds the flag */
	gcra_forge_half_done(&g, src, 1);

	cr_assert_eq(sluice_gcra_acquire_at(&g, 4, SEC, NULL), 1, "a decision helps and decides");
	cr_assert_eq(sluice_gcra_burst(&g), 4, "the stopped writer's change, finished");
	cr_assert_eq(sluice_gcra_set_rate_at(&g, 5, SEC, SEC), SLUICE_ETIMEDOUT);
	cr_assert_eq(sluice_gcra_set_burst_at(&g, 7, SEC), SLUICE_ETIMEDOUT);
	cr_assert_eq(sluice_gcra_interval_ns(&g), SEC, "nothing changed");
	cr_assert_eq(sluice_gcra_burst(&g), 4);
	cr_assert_eq(atomic_load(&g.era), e + 1);
	cr_assert_eq(sluice_gcra_acquire_at(&g, 1, SEC, NULL), 0, "still limiting: 4 taken");

	atomic_store(&g.writer, 0); /* it resumed and finished */
	cr_assert_eq(sluice_gcra_set_burst_at(&g, 7, SEC), 0);
	cr_assert_eq(sluice_gcra_burst(&g), 7);
}
