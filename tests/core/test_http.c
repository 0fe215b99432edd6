/* SPDX-License-Identifier: MIT */
/*
 * test_http.c - Retry-After, RateLimit-Policy and RateLimit values: exact
 * strings, rounding edges, huge values, names (escaping and rejection),
 * every buffer length from 0 to the full length + 1 with guard bytes and
 * exact-size heap buffers (ASan sees any overrun), a round trip through a
 * small parser of the grammar in sluice/http.h, and decisions taken by real
 * limiters.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"
#include "sluice/http.h"
#include "sluice/static/decision.h" /* sluice__decision_never */
#include "sluice/inflight.h"

#include "test_http_parse.h"

#define MS 1000000ULL
#define SEC 1000000000ULL
#define GUARD 0xa5

TestSuite(http, .timeout = 30);

static sluice_decision_t dec(bool allowed, uint64_t remaining, uint64_t retry, uint64_t reset)
{
	return (sluice_decision_t){ .allowed = allowed, .limit = 100, .remaining = remaining,
		                    .retry_after_ns = retry, .reset_ns = reset, .now_ns = 0 };
}

/* ---- Retry-After ------------------------------------------------------- */

/* Parameters are copied into each test's process (which may run at other
 * addresses): strings live in the struct, never behind a pointer. */
struct secs {
	uint64_t ns;
	char want[16];
};

ParameterizedTestParameters(http, retry_after_rounds_up)
{
	static struct secs p[] = {
		{ 0, "0" },
		{ 1, "1" },                       /* 1 ns: never "0", the client would be early */
		{ SEC - 1, "1" },
		{ SEC, "1" },                     /* exactly 1 s */
		{ SEC + 1, "2" },                 /* 1 s + 1 ns */
		{ 4 * SEC + 200 * MS, "5" },
		{ 60 * SEC, "60" },
		{ 86400 * SEC + 1, "86401" },
		{ SLUICE_NEVER - 1, "18446744074" }, /* the largest finite delay */
	};
	return cr_make_param_array(struct secs, p, sizeof(p) / sizeof(p[0]));
}

ParameterizedTest(struct secs *p, http, retry_after_rounds_up)
{
	char buf[SLUICE_HTTP_RETRY_AFTER_MAX];
	sluice_decision_t d = dec(false, 0, p->ns, p->ns);
	int rc = sluice_http_retry_after(buf, sizeof(buf), &d);
	cr_assert_eq(rc, (int)strlen(p->want), "%llu ns: rc %d", (unsigned long long)p->ns, rc);
	cr_assert_str_eq(buf, p->want, "%llu ns", (unsigned long long)p->ns);
}

Test(http, retry_after_never_is_no_field)
{
	char buf[16];
	memset(buf, GUARD, sizeof(buf));
	sluice_decision_t d;
	sluice__decision_never(&d, 10, 0);
	cr_assert_eq(sluice_http_retry_after(buf, sizeof(buf), &d), SLUICE_ETOOBIG);
	cr_assert_eq(buf[0], '\0', "an empty value, never a made-up delay");
	for (size_t i = 1; i < sizeof(buf); i++)
		cr_assert_eq((unsigned char)buf[i], GUARD);
}

Test(http, retry_after_allowed_is_zero)
{
	char buf[SLUICE_HTTP_RETRY_AFTER_MAX];
	sluice_decision_t d = dec(true, 5, 0, 3 * SEC);
	cr_assert_eq(sluice_http_retry_after(buf, sizeof(buf), &d), 1);
	cr_assert_str_eq(buf, "0");
}

/* ---- RateLimit-Policy -------------------------------------------------- */

struct pol {
	char name[16];
	uint64_t quota, window_ns;
	int rc;
	char want[64];
};

ParameterizedTestParameters(http, ratelimit_policy)
{
	static struct pol p[] = {
		{ "default", 100, 10 * SEC, 0, "\"default\";q=100;w=10" },
		{ "burst", 100, 60 * SEC, 0, "\"burst\";q=100;w=60" }, /* the draft's example */
		{ "daily", 1000, 86400 * SEC, 0, "\"daily\";q=1000;w=86400" },
		{ "sub", 10, 100 * MS, 0, "\"sub\";q=10;w=1" },  /* sub-second: w rounds up */
		{ "ns", 1, 1, 0, "\"ns\";q=1;w=1" },
		{ "one", 5, SEC, 0, "\"one\";q=5;w=1" },
		{ "onep", 5, SEC + 1, 0, "\"onep\";q=5;w=2" },
		{ "zero", 0, SEC, 0, "\"zero\";q=0;w=1" },      /* the draft allows q=0 */
		{ "max", SLUICE_HTTP_SF_INT_MAX, UINT64_MAX, 0,
		  "\"max\";q=999999999999999;w=18446744074" },
		{ "over", SLUICE_HTTP_SF_INT_MAX + 1, SEC, SLUICE_ELIMIT, "" },
		{ "huge", UINT64_MAX, SEC, SLUICE_ELIMIT, "" },
		{ "nowin", 10, 0, SLUICE_EWINDOW, "" },
	};
	return cr_make_param_array(struct pol, p, sizeof(p) / sizeof(p[0]));
}

ParameterizedTest(struct pol *p, http, ratelimit_policy)
{
	char buf[SLUICE_HTTP_FIELD_MAX];
	memset(buf, GUARD, sizeof(buf));
	int rc = sluice_http_ratelimit_policy(buf, sizeof(buf), p->name, p->quota, p->window_ns);
	int want_rc = p->rc ? p->rc : (int)strlen(p->want);
	cr_assert_eq(rc, want_rc, "%s: got %d (%s), want %d", p->name, rc, sluice_err_name(rc),
	             want_rc);
	cr_assert_str_eq(buf, p->want);
	if (p->rc)
		cr_assert_eq((unsigned char)buf[1], GUARD, "an error writes the NUL and nothing else");
}

/* ---- RateLimit --------------------------------------------------------- */

struct rl {
	sluice_decision_t d;
	char want[64];
};

ParameterizedTestParameters(http, ratelimit)
{
	static struct rl p[] = {
		/* admitted: r = remaining, t = the reset bound */
		{ { true, 100, 50, 0, 30 * SEC, 0, 0 }, "\"default\";r=50;t=30" },
		{ { true, 100, 99, 0, 50 * SEC - 1, 0, 0 }, "\"default\";r=99;t=50" },
		{ { true, 100, 99, 0, 1, 0, 0 }, "\"default\";r=99;t=1" },
		{ { true, 100, 0, 0, 0, 0, 0 }, "\"default\";r=0;t=0" },
		{ { true, 100, 7, 0, SEC + 1, 0, 0 }, "\"default\";r=7;t=2" },
		/* refused: t = the Retry-After instant, not the (later) reset */
		{ { false, 100, 0, 4 * SEC + 200 * MS, 10 * SEC, 0, 0 }, "\"default\";r=0;t=5" },
		{ { false, 100, 2, SEC, 60 * SEC, 0, 0 }, "\"default\";r=2;t=1" },
		/* no time known: t omitted */
		{ { true, 8, 3, 0, SLUICE_NEVER, 0, 0 }, "\"default\";r=3" },
		{ { false, 10, 0, SLUICE_NEVER, 0, 0, 0 }, "\"default\";r=0" },
		/* huge: r capped to an sf-integer, t up to 11 digits */
		{ { true, UINT64_MAX, UINT64_MAX, 0, SLUICE_NEVER - 1, 0, 0 },
		  "\"default\";r=999999999999999;t=18446744074" },
		{ { true, 0, SLUICE_HTTP_SF_INT_MAX, 0, 0, 0, 0 }, "\"default\";r=999999999999999;t=0" },
		{ { true, 0, SLUICE_HTTP_SF_INT_MAX + 1, 0, 0, 0, 0 }, "\"default\";r=999999999999999;t=0" },
	};
	return cr_make_param_array(struct rl, p, sizeof(p) / sizeof(p[0]));
}

ParameterizedTest(struct rl *p, http, ratelimit)
{
	char buf[SLUICE_HTTP_FIELD_MAX];
	int rc = sluice_http_ratelimit(buf, sizeof(buf), "default", &p->d);
	cr_assert_eq(rc, (int)strlen(p->want), "got %d for %s", rc, p->want);
	cr_assert_str_eq(buf, p->want);
}

/* ---- names ------------------------------------------------------------- */

Test(http, names_escaped)
{
	char buf[SLUICE_HTTP_FIELD_MAX];
	sluice_decision_t d = dec(true, 1, 0, SEC);
	cr_assert_gt(sluice_http_ratelimit(buf, sizeof(buf), "a\"b\\c", &d), 0);
	cr_assert_str_eq(buf, "\"a\\\"b\\\\c\";r=1;t=1");
	cr_assert_gt(sluice_http_ratelimit_policy(buf, sizeof(buf), "per user, v2!", 3, SEC), 0);
	cr_assert_str_eq(buf, "\"per user, v2!\";q=3;w=1", "space and other printables pass as is");
	cr_assert_gt(sluice_http_ratelimit_policy(buf, sizeof(buf), "\\", 3, SEC), 0);
	cr_assert_str_eq(buf, "\"\\\\\";q=3;w=1");
	cr_assert_gt(sluice_http_ratelimit_policy(buf, sizeof(buf), "\"", 3, SEC), 0);
	cr_assert_str_eq(buf, "\"\\\"\";q=3;w=1");
}

Test(http, every_printable_byte_accepted)
{
	char name[2] = { 0, 0 }, buf[SLUICE_HTTP_FIELD_MAX], want[16];
	for (int c = 0x20; c <= 0x7e; c++) {
		name[0] = (char)c;
		int rc = sluice_http_ratelimit_policy(buf, sizeof(buf), name, 1, SEC);
		if (c == '"' || c == '\\')
			snprintf(want, sizeof(want), "\"\\%c\";q=1;w=1", c);
		else
			snprintf(want, sizeof(want), "\"%c\";q=1;w=1", c);
		cr_assert_eq(rc, (int)strlen(want), "byte 0x%02x", c);
		cr_assert_str_eq(buf, want);
	}
}

Test(http, other_bytes_rejected)
{
	char buf[SLUICE_HTTP_FIELD_MAX];
	sluice_decision_t d = dec(true, 1, 0, SEC);
	for (int c = 1; c <= 0xff; c++) {
		if (c >= 0x20 && c <= 0x7e)
			continue;
		char name[4] = { 'a', (char)c, 'b', 0 }; /* the bad byte mid-name */
		memset(buf, GUARD, sizeof(buf));
		cr_assert_eq(sluice_http_ratelimit_policy(buf, sizeof(buf), name, 1, SEC),
		             SLUICE_EINVAL, "byte 0x%02x", c);
		cr_assert_eq(buf[0], '\0');
		cr_assert_eq((unsigned char)buf[1], GUARD, "nothing but the NUL written");
		cr_assert_eq(sluice_http_ratelimit(buf, sizeof(buf), name, &d), SLUICE_EINVAL);
		cr_assert_eq(buf[0], '\0');
	}
	/* UTF-8 is not an sf-string: rejected, not mangled */
	cr_assert_eq(sluice_http_ratelimit(buf, sizeof(buf), "caf\xc3\xa9", &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_http_ratelimit(buf, sizeof(buf), "", &d), SLUICE_EINVAL, "empty");
	cr_assert_eq(sluice_http_ratelimit(buf, sizeof(buf), NULL, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_http_ratelimit_policy(buf, sizeof(buf), NULL, 1, SEC), SLUICE_EINVAL);
}

Test(http, name_length_limit)
{
	char name[SLUICE_HTTP_NAME_MAX + 2];
	char buf[SLUICE_HTTP_FIELD_MAX];
	memset(name, 'n', sizeof(name));
	name[SLUICE_HTTP_NAME_MAX] = '\0';
	int rc = sluice_http_ratelimit_policy(buf, sizeof(buf), name, 1, SEC);
	cr_assert_eq(rc, SLUICE_HTTP_NAME_MAX + 2 + 8, "NAME_MAX bytes pass");
	name[SLUICE_HTTP_NAME_MAX] = 'n';
	name[SLUICE_HTTP_NAME_MAX + 1] = '\0';
	cr_assert_eq(sluice_http_ratelimit_policy(buf, sizeof(buf), name, 1, SEC), SLUICE_EINVAL,
	             "one more is refused");
}

/* The documented buffer sizes are enough for the longest possible value,
 * and not a byte more than needed. */
Test(http, worst_case_fits_documented_sizes)
{
	char name[SLUICE_HTTP_NAME_MAX + 1];
	char buf[SLUICE_HTTP_FIELD_MAX];
	memset(name, '"', SLUICE_HTTP_NAME_MAX); /* every byte escaped */
	name[SLUICE_HTTP_NAME_MAX] = '\0';
	int rc = sluice_http_ratelimit_policy(buf, sizeof(buf), name, SLUICE_HTTP_SF_INT_MAX,
	                                      UINT64_MAX);
	cr_assert_eq(rc, SLUICE_HTTP_FIELD_MAX - 1, "policy: %d", rc);
	sluice_decision_t d = dec(true, UINT64_MAX, 0, SLUICE_NEVER - 1);
	rc = sluice_http_ratelimit(buf, sizeof(buf), name, &d);
	cr_assert_eq(rc, SLUICE_HTTP_FIELD_MAX - 1, "ratelimit: %d", rc);
	char ra[SLUICE_HTTP_RETRY_AFTER_MAX];
	d = dec(false, 0, SLUICE_NEVER - 1, 0);
	cr_assert_eq(sluice_http_retry_after(ra, sizeof(ra), &d), SLUICE_HTTP_RETRY_AFTER_MAX - 1);
}

/* ---- truncation: every length, guard bytes, exact-size heap buffers ----- */

enum which { RETRY_AFTER, POLICY, RATELIMIT };

struct call {
	enum which which;
	const char *name;
	uint64_t quota, window_ns;
	sluice_decision_t d;
};

static int do_call(const struct call *c, char *buf, size_t len)
{
	switch (c->which) {
	case RETRY_AFTER:
		return sluice_http_retry_after(buf, len, &c->d);
	case POLICY:
		return sluice_http_ratelimit_policy(buf, len, c->name, c->quota, c->window_ns);
	case RATELIMIT:
	default:
		return sluice_http_ratelimit(buf, len, c->name, &c->d);
	}
}

static void every_length(const struct call *c, const char *want)
{
	const size_t full = strlen(want);
	enum { SLACK = 8 };
	for (size_t len = 0; len <= full + 1; len++) {
		/* 1. a heap block of exactly len bytes: ASan reports any write
		 * past it (malloc(0) may give NULL or a 0-byte block, both
		 * valid with len = 0) */
		char *exact = malloc(len);
		cr_assert(len == 0 || exact != NULL);
		int rc_exact = do_call(c, exact, len);
		free(exact);
		/* 2. guard bytes after len in a larger buffer: the plain build
		 * sees an overrun too */
		char big[SLUICE_HTTP_FIELD_MAX + SLACK];
		cr_assert_leq(full + 1, SLUICE_HTTP_FIELD_MAX);
		memset(big, GUARD, sizeof(big));
		int rc = do_call(c, big, len);
		cr_assert_eq(rc_exact, rc);
		for (size_t i = len; i < sizeof(big); i++)
			cr_assert_eq((unsigned char)big[i], GUARD, "len %zu: byte %zu written", len, i);
		if (len <= full) {
			cr_assert_eq(rc, SLUICE_HTTP_ETRUNC, "len %zu of %zu: rc %d", len, full + 1, rc);
			if (len > 0)
				cr_assert_eq(big[0], '\0', "len %zu: NUL-terminated", len);
			for (size_t i = 1; i < len; i++)
				cr_assert_eq((unsigned char)big[i], GUARD,
				             "len %zu: no partial value (byte %zu)", len, i);
		} else {
			cr_assert_eq(rc, (int)full);
			cr_assert_str_eq(big, want);
		}
	}
}

Test(http, truncation_every_length_retry_after)
{
	struct call c = { .which = RETRY_AFTER, .d = dec(false, 0, SLUICE_NEVER - 1, 0) };
	every_length(&c, "18446744074");
	c.d.retry_after_ns = 0;
	every_length(&c, "0");
	c.d.retry_after_ns = 42 * SEC;
	every_length(&c, "42");
}

Test(http, truncation_every_length_policy)
{
	struct call c = { .which = POLICY, .name = "default", .quota = 100, .window_ns = 60 * SEC };
	every_length(&c, "\"default\";q=100;w=60");
	c.name = "a\"b";
	c.quota = SLUICE_HTTP_SF_INT_MAX;
	c.window_ns = UINT64_MAX;
	every_length(&c, "\"a\\\"b\";q=999999999999999;w=18446744074");
}

Test(http, truncation_every_length_ratelimit)
{
	struct call c = { .which = RATELIMIT, .name = "default", .d = dec(true, 50, 0, 30 * SEC) };
	every_length(&c, "\"default\";r=50;t=30");
	c.d = dec(true, 3, 0, SLUICE_NEVER);
	every_length(&c, "\"default\";r=3");
	c.name = "x\\";
	c.d = dec(false, 0, 5 * SEC + 1, 9 * SEC);
	every_length(&c, "\"x\\\\\";r=0;t=6");
}

Test(http, null_buffer_and_decision)
{
	sluice_decision_t d = dec(true, 1, 0, SEC);
	cr_assert_eq(sluice_http_retry_after(NULL, 0, &d), SLUICE_HTTP_ETRUNC,
	             "len 0: nothing written, too small");
	cr_assert_eq(sluice_http_retry_after(NULL, 8, &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_http_ratelimit(NULL, 8, "a", &d), SLUICE_EINVAL);
	cr_assert_eq(sluice_http_ratelimit_policy(NULL, 8, "a", 1, SEC), SLUICE_EINVAL);
	char buf[8];
	memset(buf, GUARD, sizeof(buf));
	cr_assert_eq(sluice_http_retry_after(buf, sizeof(buf), NULL), SLUICE_EINVAL);
	cr_assert_eq(buf[0], '\0');
	cr_assert_eq((unsigned char)buf[1], GUARD);
	cr_assert_eq(sluice_http_ratelimit(buf, sizeof(buf), "a", NULL), SLUICE_EINVAL);
	cr_assert_eq(buf[0], '\0');
}

/* ---- round trip through a parser of the grammar in http.h -------------- */

/* Parse ";<key>=<sf-integer>" at *p; 0 or -1. */
static int parse_param(const char **p, char key, unsigned max_digits, uint64_t *v)
{
	const char *s = *p;
	if (s[0] != ';' || s[1] != key || s[2] != '=')
		return -1;
	s += 3;
	if (http_parse_digits(&s, max_digits, v) != 0)
		return -1;
	*p = s;
	return 0;
}

/* Random names of printable ASCII (quotes and backslashes frequent), random
 * numbers: the output parses back to exactly the inputs, rounded as
 * documented. */
Test(http, round_trip_random)
{
	uint64_t x = 0x9E3779B97F4A7C15ULL;
	char name[SLUICE_HTTP_NAME_MAX + 1], back[SLUICE_HTTP_NAME_MAX + 1];
	char buf[SLUICE_HTTP_FIELD_MAX];
	for (int iter = 0; iter < 20000; iter++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t k = 1 + x % SLUICE_HTTP_NAME_MAX;
		for (size_t i = 0; i < k; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			name[i] = (x & 7) == 0 ? '"' : (x & 7) == 1 ? '\\' : (char)(0x20 + x % 95);
		}
		name[k] = '\0';
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t q = x % (SLUICE_HTTP_SF_INT_MAX + 1), w = x | 1, v;
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		w = (iter & 1) ? w : w % (100 * SEC) + 1;
		int rc = sluice_http_ratelimit_policy(buf, sizeof(buf), name, q, w);
		cr_assert_gt(rc, 0);
		cr_assert_eq((size_t)rc, strlen(buf));
		const char *p = buf;
		cr_assert_eq(http_parse_sf_string(&p, back, sizeof(back)), 0, "%s", buf);
		cr_assert_str_eq(back, name);
		cr_assert_eq(parse_param(&p, 'q', 15, &v), 0, "%s", buf);
		cr_assert_eq(v, q);
		cr_assert_eq(parse_param(&p, 'w', 15, &v), 0, "%s", buf);
		cr_assert_eq(v, w / SEC + (w % SEC != 0), "w=%llu for %llu ns: ceil",
		             (unsigned long long)v, (unsigned long long)w);
		cr_assert_eq(*p, '\0');

		sluice_decision_t d = dec(x & 1, x >> 1, (x >> 3) % (1000 * SEC), x >> 5);
		rc = sluice_http_ratelimit(buf, sizeof(buf), name, &d);
		cr_assert_gt(rc, 0);
		p = buf;
		cr_assert_eq(http_parse_sf_string(&p, back, sizeof(back)), 0, "%s", buf);
		cr_assert_str_eq(back, name);
		cr_assert_eq(parse_param(&p, 'r', 15, &v), 0, "%s", buf);
		cr_assert_eq(v, d.remaining > SLUICE_HTTP_SF_INT_MAX ? SLUICE_HTTP_SF_INT_MAX
		                                                     : d.remaining);
		uint64_t tns = d.allowed ? d.reset_ns : d.retry_after_ns;
		cr_assert_eq(parse_param(&p, 't', 15, &v), 0, "%s", buf);
		cr_assert_eq(v, tns / SEC + (tns % SEC != 0), "t=%llu for %llu ns: ceil",
		             (unsigned long long)v, (unsigned long long)tns);
		cr_assert_eq(*p, '\0');
	}
}

/* ---- decisions from real limiters -------------------------------------- */

Test(http, fixed_window_end_to_end)
{
	sluice_clock_t m;
	sluice_clock_manual_init(&m, 0);
	sluice_fixed_t f;
	sluice_fixed_config_t cfg = { .limit = 100, .window_ns = 60 * SEC, .clock = &m };
	cr_assert_eq(sluice_fixed_init(&f, &cfg), 0);
	char pol[SLUICE_HTTP_FIELD_MAX], rl[SLUICE_HTTP_FIELD_MAX], ra[SLUICE_HTTP_RETRY_AFTER_MAX];
	cr_assert_gt(sluice_http_ratelimit_policy(pol, sizeof(pol), "default", f.limit, f.window_ns),
	             0);
	cr_assert_str_eq(pol, "\"default\";q=100;w=60");

	sluice_decision_t d;
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 10 * SEC, &d), 1);
	cr_assert_gt(sluice_http_ratelimit(rl, sizeof(rl), "default", &d), 0);
	cr_assert_str_eq(rl, "\"default\";r=99;t=50");

	cr_assert_eq(sluice_fixed_acquire_at(&f, 99, 55 * SEC + 800 * MS, &d), 1);
	cr_assert_eq(sluice_fixed_acquire_at(&f, 1, 55 * SEC + 800 * MS, &d), 0);
	cr_assert_gt(sluice_http_retry_after(ra, sizeof(ra), &d), 0);
	cr_assert_gt(sluice_http_ratelimit(rl, sizeof(rl), "default", &d), 0);
	cr_assert_str_eq(ra, "5", "4.2 s to the window end, rounded up");
	cr_assert_str_eq(rl, "\"default\";r=0;t=5", "t is the Retry-After instant");

	cr_assert_eq(sluice_fixed_acquire_at(&f, 101, 56 * SEC, &d), SLUICE_ETOOBIG);
	cr_assert_eq(sluice_http_retry_after(ra, sizeof(ra), &d), SLUICE_ETOOBIG);
	cr_assert_gt(sluice_http_ratelimit(rl, sizeof(rl), "default", &d), 0);
	cr_assert_str_eq(rl, "\"default\";r=0", "can never pass: no t");
}

Test(http, inflight_end_to_end)
{
	sluice_inflight_t f;
	sluice_inflight_config_t cfg = { .limit = 2, .clock = &sluice_clock_monotonic };
	cr_assert_eq(sluice_inflight_init(&f, &cfg), 0);
	char rl[SLUICE_HTTP_FIELD_MAX], ra[SLUICE_HTTP_RETRY_AFTER_MAX];
	sluice_decision_t d;
	cr_assert_eq(sluice_inflight_acquire(&f, 1, &d), 1);
	cr_assert_gt(sluice_http_ratelimit(rl, sizeof(rl), "conc", &d), 0);
	cr_assert_str_eq(rl, "\"conc\";r=1", "slots come back on release, not at a time: no t");
	cr_assert_eq(sluice_inflight_acquire(&f, 2, &d), 0);
	cr_assert_gt(sluice_http_ratelimit(rl, sizeof(rl), "conc", &d), 0);
	cr_assert_str_eq(rl, "\"conc\";r=1;t=0", "a refusal's lower bound: possibly now");
	cr_assert_eq(sluice_http_retry_after(ra, sizeof(ra), &d), 1);
	cr_assert_str_eq(ra, "0");
	cr_assert_eq(sluice_inflight_release(&f, 1), 0);
}

/* ---- the one policy of each algorithm (sluice_http_policy_of) ------------- */

static void policy_is(sluice_limiter_config_t c, uint64_t q, uint64_t w_s)
{
	uint64_t quota = 7, window = 7;
	cr_assert_eq(sluice_http_policy_of(&c, &quota, &window), 0, "algo %d", c.algo);
	cr_assert_eq(quota, q, "algo %d: q=%llu, want %llu", c.algo, (unsigned long long)quota,
	             (unsigned long long)q);
	cr_assert_eq(window, w_s * SEC, "algo %d: w=%llu ns, want %llu s", c.algo,
	             (unsigned long long)window, (unsigned long long)w_s);
}

Test(http, policy_of_every_algorithm)
{
	sluice_limiter_config_t c;
	/* GCRA: the rate per max(b T, 1 s) in whole seconds, q >= b */
	c = (sluice_limiter_config_t){ .algo = SLUICE_ALGO_GCRA,
		                       .gcra = { .rate = 100, .period_ns = SEC, .burst = 1 } };
	policy_is(c, 100, 1);
	c.gcra = (sluice_gcra_config_t){ .rate = 1, .period_ns = 60 * SEC, .burst = 2 };
	policy_is(c, 2, 120); /* the "1/m, burst 2" */
	c.gcra = (sluice_gcra_config_t){ .rate = 3, .period_ns = SEC, .burst = 10 };
	/* T = 333,333,334 ns (rounded up); b T = 3.33 s -> w = 4 s; 4 s / T =
	 * 11.99..: q = 11, never the 12 the rate would give without rounding */
	policy_is(c, 11, 4);
	c.gcra = (sluice_gcra_config_t){ .rate = 1, .period_ns = 0, .burst = 1 };
	uint64_t q = 0, w = 0;
	cr_assert_eq(sluice_http_policy_of(&c, &q, &w), SLUICE_EINVAL);

	/* LEAKY: a meter's bucket is D + 1, a shaper's 1 */
	c = (sluice_limiter_config_t){ .algo = SLUICE_ALGO_LEAKY,
		                       .leaky = { .rate = 10, .period_ns = SEC,
		                                  .mode = SLUICE_LEAKY_METER, .depth = 19 } };
	policy_is(c, 20, 2);
	c.leaky = (sluice_leaky_config_t){ .rate = 10, .period_ns = SEC, .mode = SLUICE_LEAKY_SHAPER,
		                           .max_delay_ns = SEC };
	policy_is(c, 10, 1);

	/* WARMUP: the cold interval 3T, one permit: 2/s -> T = 0.5 s, 3T = 1.5 s
	 * -> w = 2 s, q = 1 */
	c = (sluice_limiter_config_t){ .algo = SLUICE_ALGO_WARMUP,
		                       .warmup = { .rate = 2, .period_ns = SEC, .warmup_ns = SEC } };
	policy_is(c, 1, 2);

	/* the windows: L per the window's seconds, rounded up */
	c = (sluice_limiter_config_t){ .algo = SLUICE_ALGO_FIXED,
		                       .fixed = { .limit = 100, .window_ns = 60 * SEC } };
	policy_is(c, 100, 60);
	c = (sluice_limiter_config_t){ .algo = SLUICE_ALGO_WINDOW,
		                       .window = { .limit = 5, .window_ns = 1500 * MS, .buckets = 3 } };
	policy_is(c, 5, 2);
	c = (sluice_limiter_config_t){ .algo = SLUICE_ALGO_LOG,
		                       .log = { .limit = 7, .window_ns = 10 * SEC } };
	policy_is(c, 7, 10);

	/* DECAY: the mean life h / ln 2: h = 10 s -> 14.43 s -> 15 s */
	c = (sluice_limiter_config_t){ .algo = SLUICE_ALGO_DECAY,
		                       .decay = { .limit = 50, .half_life_ns = 10 * SEC } };
	policy_is(c, 50, 15);
	/* h = ln 2 s exactly to the ns (693,147,181 ns) -> 1.0000000005.. s -> 2 s */
	c.decay.half_life_ns = 693147181ULL;
	policy_is(c, 50, 2);
	c.decay.half_life_ns = 693147180ULL; /* -> 0.99999999.. s -> 1 s */
	policy_is(c, 50, 1);

	/* INFLIGHT: no window, no policy */
	c = (sluice_limiter_config_t){ .algo = SLUICE_ALGO_INFLIGHT, .inflight = { .limit = 4 } };
	cr_assert_eq(sluice_http_policy_of(&c, &q, &w), SLUICE_ENOTSUP);
	cr_assert_eq(sluice_http_policy_of(NULL, &q, &w), SLUICE_EINVAL);
}

/* q is never above what the limit admits in w at its long-run rate, and
 * never below its burst: checked over a sweep of rates and bursts. */
Test(http, policy_of_bucket_bounds)
{
	for (uint64_t rate = 1; rate <= 3000; rate = rate * 3 + 1)
		for (uint64_t b = 1; b <= 5000; b = b * 7 + 1) {
			sluice_limiter_config_t c = { .algo = SLUICE_ALGO_GCRA,
				                      .gcra = { .rate = rate, .period_ns = SEC,
				                                .burst = b } };
			uint64_t q = 0, w = 0;
			cr_assert_eq(sluice_http_policy_of(&c, &q, &w), 0);
			uint64_t t = SEC / rate + (SEC % rate != 0);
			cr_assert_eq(w % SEC, 0);
			cr_assert_geq(w, SEC);
			cr_assert_geq(q, b, "rate %llu b %llu: q %llu", (unsigned long long)rate,
			              (unsigned long long)b, (unsigned long long)q);
			cr_assert_leq((sluice__u128)q * t, w, "q per w above the rate");
			cr_assert_gt((sluice__u128)(q + 1) * t, w, "q is the most the rate gives");
		}
}
