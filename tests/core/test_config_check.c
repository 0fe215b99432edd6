/* SPDX-License-Identifier: MIT */
/*
 * test_config_check.c - every config check answers what its init answers
 * (common.h, CONFIG CHECKS; issue 28 item 2): for each algorithm, a valid
 * config and each of its fields set to each value of an edge table, on
 * three clocks (manual: 1 ns steps; monotonic; coarse: milliseconds), the
 * check's code equals the init's, and the limiter handle's check equals
 * the algorithm's.  And a check leaves nothing behind: no period floor on
 * the cached clock, where an init records one.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#include "sluice/sluice.h"

#define MS 1000000ULL
#define SEC 1000000000ULL

TestSuite(config_check, .timeout = 60);

/* Values around every documented bound (the headers' _MIN and _MAX). */
static const uint64_t edges[] = {
	0, 1, 2, 3, 7, 10, 999, 1000, 4095, 4096, 4097, 65536, 65537, 1000000,
	(1ULL << 20), (1ULL << 20) + 1, (1ULL << 24) - 1, (1ULL << 24), (1ULL << 24) + 1,
	(1ULL << 26), (1ULL << 30) - 1, (1ULL << 30), 0xffffffffULL, 0x100000000ULL,
	SEC, SEC + 1, 3600 * SEC, (1ULL << 47) - 1, (1ULL << 47), (1ULL << 62) - 1,
	(1ULL << 62), (1ULL << 62) + 1, UINT64_MAX - 1, UINT64_MAX,
};

/* One field of a config: where, and how wide (uint32_t or uint64_t). */
struct field {
	const char *name;
	size_t off, size;
};
#define F(type, f) { #f, offsetof(type, f), sizeof(((type *)0)->f) }

static void set_field(void *cfg, const struct field *f, uint64_t v)
{
	if (f->size == sizeof(uint32_t)) {
		uint32_t w = (uint32_t)v;
		memcpy((char *)cfg + f->off, &w, sizeof(w));
	} else {
		memcpy((char *)cfg + f->off, &v, sizeof(v));
	}
}

/* Every limiter, for init. */
union any {
#define SLUICE__T(K, name) sluice_##name##_t name;
	SLUICE_ALGOS(SLUICE__T)
#undef SLUICE__T
};

/* The algorithm's own init of @lc's config, destroyed again on success. */
static int init_of(const sluice_limiter_config_t *lc)
{
	static union any u;
	int rc;
	switch (lc->algo) {
#define SLUICE__INIT(K, name)                                     \
	case SLUICE_ALGO_##K:                                     \
		rc = sluice_##name##_init(&u.name, &lc->name);    \
		if (rc == 0)                                      \
			sluice_##name##_destroy(&u.name);         \
		return rc;
		SLUICE_ALGOS(SLUICE__INIT)
#undef SLUICE__INIT
	default:
		return SLUICE_EALGO;
	}
}

/* The algorithm's own check. */
static int check_of(const sluice_limiter_config_t *lc)
{
	switch (lc->algo) {
#define SLUICE__CHECK(K, name) \
	case SLUICE_ALGO_##K:  \
		return sluice_##name##_config_check(&lc->name);
		SLUICE_ALGOS(SLUICE__CHECK)
#undef SLUICE__CHECK
	default:
		return SLUICE_EALGO;
	}
}

struct algo_case {
	sluice_limiter_config_t base;
	struct field fields[8];
};

/* Compare check and init for @c's base and every one-field change of it,
 * with the clock @clk.  Return how many configs were compared; *@refused
 * counts those refused, so the table is known to reach both answers. */
static unsigned compare(struct algo_case *c, const sluice_clock_t *clk, unsigned *refused)
{
	unsigned n = 0;
	sluice_limiter_config_t lc = c->base;
	/* every algorithm's config starts with fields of its own: its clock
	 * is set through the union member's own field below */
	for (size_t f = 0; f <= sizeof(c->fields) / sizeof(c->fields[0]); f++) {
		size_t nvals = f == 0 ? 1 : sizeof(edges) / sizeof(edges[0]);
		if (f > 0 && !c->fields[f - 1].name)
			break;
		for (size_t v = 0; v < nvals; v++) {
			lc = c->base;
			switch (lc.algo) {
#define SLUICE__CLOCK(K, name)                 \
	case SLUICE_ALGO_##K:                  \
		lc.name.clock = clk;           \
		break;
				SLUICE_ALGOS(SLUICE__CLOCK)
#undef SLUICE__CLOCK
			default:
				break;
			}
			if (f > 0)
				set_field((char *)&lc + offsetof(sluice_limiter_config_t, fixed),
				          &c->fields[f - 1], edges[v]);
			int want = init_of(&lc);
			int got = check_of(&lc);
			int handle = sluice_limiter_config_check(&lc);
			cr_assert_eq(got, want, "%s, %s = %llu: check %s, init %s",
			             sluice_algo_name(lc.algo), f ? c->fields[f - 1].name : "(base)",
			             (unsigned long long)(f ? edges[v] : 0), sluice_err_name(got),
			             sluice_err_name(want));
			cr_assert_eq(handle, want, "%s: the handle's check %s, init %s",
			             sluice_algo_name(lc.algo), sluice_err_name(handle),
			             sluice_err_name(want));
			*refused += want != 0;
			n++;
		}
	}
	return n;
}

Test(config_check, every_check_answers_as_its_init)
{
	struct algo_case cases[] = {
		{ { .algo = SLUICE_ALGO_FIXED, .fixed = { .limit = 10, .window_ns = SEC } },
		  { F(sluice_fixed_config_t, limit), F(sluice_fixed_config_t, window_ns),
		    F(sluice_fixed_config_t, lease) } },
		{ { .algo = SLUICE_ALGO_FIXED,
		    .fixed = { .limit = 10, .window_ns = SEC, .lease = 4 } },
		  { F(sluice_fixed_config_t, limit), F(sluice_fixed_config_t, window_ns),
		    F(sluice_fixed_config_t, lease) } },
		{ { .algo = SLUICE_ALGO_WINDOW,
		    .window = { .limit = 10, .window_ns = SEC, .buckets = 10 } },
		  { F(sluice_window_config_t, limit), F(sluice_window_config_t, window_ns),
		    F(sluice_window_config_t, buckets), F(sluice_window_config_t, lease) } },
		{ { .algo = SLUICE_ALGO_GCRA, .gcra = { .rate = 10, .period_ns = SEC, .burst = 5 } },
		  { F(sluice_gcra_config_t, rate), F(sluice_gcra_config_t, period_ns),
		    F(sluice_gcra_config_t, burst), F(sluice_gcra_config_t, lease),
		    F(sluice_gcra_config_t, lease_ns) } },
		{ { .algo = SLUICE_ALGO_GCRA,
		    .gcra = { .rate = 1000, .period_ns = SEC, .burst = 64, .lease = 16 } },
		  { F(sluice_gcra_config_t, burst), F(sluice_gcra_config_t, lease),
		    F(sluice_gcra_config_t, lease_ns) } },
		{ { .algo = SLUICE_ALGO_LEAKY,
		    .leaky = { .rate = 10, .period_ns = SEC, .mode = SLUICE_LEAKY_METER, .depth = 4 } },
		  { F(sluice_leaky_config_t, rate), F(sluice_leaky_config_t, period_ns),
		    F(sluice_leaky_config_t, depth), F(sluice_leaky_config_t, max_delay_ns),
		    F(sluice_leaky_config_t, lease), F(sluice_leaky_config_t, lease_ns),
		    F(sluice_leaky_config_t, mode) } },
		{ { .algo = SLUICE_ALGO_LEAKY,
		    .leaky = { .rate = 10, .period_ns = SEC, .mode = SLUICE_LEAKY_SHAPER,
		               .max_delay_ns = SEC } },
		  { F(sluice_leaky_config_t, rate), F(sluice_leaky_config_t, period_ns),
		    F(sluice_leaky_config_t, depth), F(sluice_leaky_config_t, max_delay_ns),
		    F(sluice_leaky_config_t, lease) } },
		{ { .algo = SLUICE_ALGO_LOG, .log = { .limit = 10, .window_ns = SEC } },
		  { F(sluice_log_config_t, limit), F(sluice_log_config_t, window_ns),
		    F(sluice_log_config_t, capacity) } },
		{ { .algo = SLUICE_ALGO_WARMUP,
		    .warmup = { .rate = 100, .period_ns = SEC, .warmup_ns = 10 * SEC } },
		  { F(sluice_warmup_config_t, rate), F(sluice_warmup_config_t, period_ns),
		    F(sluice_warmup_config_t, warmup_ns) } },
		{ { .algo = SLUICE_ALGO_DECAY, .decay = { .limit = 10, .half_life_ns = SEC } },
		  { F(sluice_decay_config_t, limit), F(sluice_decay_config_t, limit_max),
		    F(sluice_decay_config_t, half_life_ns) } },
		{ { .algo = SLUICE_ALGO_INFLIGHT, .inflight = { .limit = 4 } },
		  { F(sluice_inflight_config_t, limit) } },
	};
	sluice_clock_t manual;
	sluice_clock_manual_init(&manual, 0);
	const sluice_clock_t *clocks[] = { &manual, &sluice_clock_monotonic, &sluice_clock_coarse };
	unsigned n = 0, refused = 0;
	for (size_t k = 0; k < sizeof(clocks) / sizeof(clocks[0]); k++)
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			n += compare(&cases[i], clocks[k], &refused);
	/* the table reaches both answers, many times: a check that always
	 * said 0, or always refused, fails above */
	cr_assert_gt(refused, n / 10, "%u of %u refused", refused, n);
	cr_assert_lt(refused, n - n / 10, "%u of %u refused", refused, n);
	cr_log_info("%u configs compared, %u refused", n, refused);
}

Test(config_check, null_and_unknown)
{
	cr_assert_eq(sluice_gcra_config_check(NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_limiter_config_check(NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_composite_config_check(NULL), SLUICE_EINVAL);
	sluice_limiter_config_t lc = { .algo = SLUICE_ALGO_NONE };
	cr_assert_eq(sluice_limiter_config_check(&lc), SLUICE_EALGO);
	lc.algo = SLUICE_ALGO_EXTERNAL;
	cr_assert_eq(sluice_limiter_config_check(&lc), SLUICE_EALGO);
	lc.algo = SLUICE_ALGO_KEYED;
	cr_assert_eq(sluice_limiter_config_check(&lc), SLUICE_EINVAL, "no table");
	sluice_clock_t bogus = { .kind = (sluice_clock_kind_t)99 };
	sluice_inflight_config_t f = { .limit = 1, .clock = &bogus };
	sluice_inflight_t x;
	cr_assert_eq(sluice_inflight_config_check(&f), SLUICE_ECLOCK);
	cr_assert_eq(sluice_inflight_init(&x, &f), SLUICE_ECLOCK);
}

Test(config_check, composite_as_its_init)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 0);
	sluice_limiter_config_t a = { .algo = SLUICE_ALGO_INFLIGHT,
		                      .inflight = { .limit = 2, .clock = &m } };
	sluice_limiter_t *p, *q;
	cr_assert_eq(sluice_limiter_new(&a, &p), 0);
	cr_assert_eq(sluice_limiter_new(&a, &q), 0);
	sluice_composite_t c;
	sluice_composite_config_t cc = { .count = 2, .parts = { p, q } };
	cr_assert_eq(sluice_composite_config_check(&cc), 0);
	cr_assert_eq(sluice_composite_init(&c, &cc), 0);
	cc.parts[1] = p;
	cr_assert_eq(sluice_composite_config_check(&cc), SLUICE_EDUPLICATE);
	cr_assert_eq(sluice_composite_init(&c, &cc), SLUICE_EDUPLICATE);
	cc.count = 1;
	cr_assert_eq(sluice_composite_config_check(&cc), SLUICE_ECOUNT);
	cr_assert_eq(sluice_composite_init(&c, &cc), SLUICE_ECOUNT);
	sluice_limiter_config_t lc = { .algo = SLUICE_ALGO_COMPOSITE, .composite = cc };
	cr_assert_eq(sluice_limiter_config_check(&lc), SLUICE_ECOUNT);
	sluice_limiter_free(p);
	sluice_limiter_free(q);
}

/*
 * A check records no period floor; an init does.  A 2 ms bucket on the
 * cached clock: after only its check, a 5 ms ticker may start (nothing
 * exists that it would coarsen); after its init, the same start is
 * refused (SLUICE_ERESOLUTION), as clock.h's PERIOD FLOOR says.  Each
 * Criterion test runs in a fresh process, so the floor starts unset.
 */
Test(config_check, a_check_leaves_no_floor)
{
	sluice_window_config_t w = { .limit = 10, .window_ns = 20 * MS, .buckets = 10,
		                     .clock = &sluice_clock_cached };
	sluice_keyed_config_t k = { .algo = SLUICE_ALGO_WINDOW, .capacity = 64, .limit = 10,
		                    .window_ns = 20 * MS, .buckets = 10 };
	cr_assert_eq(sluice_window_config_check(&w), 0);
	cr_assert_eq(sluice_keyed_config_check(&k, &sluice_clock_cached), 0);
	sluice_limiter_config_t lc = { .algo = SLUICE_ALGO_WINDOW, .window = w };
	cr_assert_eq(sluice_limiter_config_check(&lc), 0);
	cr_assert_eq(sluice_clock_cached_start(5 * MS), 0, "a check recorded a floor");
	sluice_clock_cached_stop();
	cr_assert_eq(sluice_clock_cached_start(1 * MS), 0);
	sluice_window_t x;
	cr_assert_eq(sluice_window_init(&x, &w), 0);
	cr_assert_eq(sluice_clock_cached_start(5 * MS), SLUICE_ERESOLUTION,
	             "an init must record its floor (else this test proves nothing)");
	sluice_clock_cached_stop();
	sluice_window_destroy(&x);
}
