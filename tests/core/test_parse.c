/* SPDX-License-Identifier: MIT */
/*
 * test_parse.c - sluice/parse.h: the one grammar, value by value.
 *
 * Tables of spellings with the value each must give, and of bad ones with
 * the message and offset each must give; then the formatters read back by
 * the parsers (round trips over every unit and boundary).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "sluice/error.h"
#include "sluice/parse.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const struct {
	const char *s;
	uint64_t ns;
} good_durations[] = {
	{ "250ms", 250000000ULL }, { "1.5s", 1500000000ULL }, { "1m", 60000000000ULL },
	{ "1min", 60000000000ULL }, { "2h", 7200000000000ULL }, { "1d", 86400000000000ULL },
	{ "100us", 100000ULL }, { "0.5us", 500ULL }, { "7ns", 7ULL }, { "0s", 0 },
	{ "0.1s", 100000000ULL }, { "18446744073709551615ns", UINT64_MAX },
	{ "1.000000001s", 1000000001ULL }, { "007ms", 7000000ULL },
	{ "30", 30000000000ULL }, { "1.5", 1500000000ULL }, { "0", 0 },
	{ "18446744073.709551615", UINT64_MAX },
};

static const struct {
	const char *s, *msg;
	size_t off;
} bad_durations[] = {
	{ "", "empty", 0 },
	{ "1.5ns", "not a whole number of ns", 3 },
	{ "1x", "unknown unit (ns, us, ms, s, m, min, h, d)", 1 },
	{ "1 s", "unknown unit (ns, us, ms, s, m, min, h, d)", 1 },
	{ "-1s", "must not be negative", 0 },
	{ "18446744073.709551616", "out of range (above 2^64 - 1 ns)", 0 },
	{ "1.0000000001", "not a whole number of ns", 12 },
	{ "1..2", "a '.' needs digits after it", 2 },
	{ "+1s", "takes no sign", 0 },
	{ "s", "not a number", 0 },
	{ "1.s", "a '.' needs digits after it", 2 },
	{ "1e3s", "exponent notation is not accepted: write the number out", 1 },
	{ "1e-3s", "exponent notation is not accepted: write the number out", 1 },
	{ "5sec", "unknown unit (ns, us, ms, s, m, min, h, d)", 1 },
	{ "18446744073709551616ns", "out of range (above 2^64 - 1 ns)", 0 },
	{ "1000000000000000000000000000000s", "too many digits", 30 },
	{ "1MS", "unknown unit (ns, us, ms, s, m, min, h, d)", 1 },
};

Test(parse, durations)
{
	for (size_t i = 0; i < COUNT(good_durations); i++) {
		uint64_t ns = 12345;
		const char *s = good_durations[i].s;
		cr_assert_eq(sluice_parse_duration(s, strlen(s), &ns, NULL), 0, "%s", s);
		cr_assert_eq(ns, good_durations[i].ns, "%s: %llu", s, (unsigned long long)ns);
	}
	for (size_t i = 0; i < COUNT(bad_durations); i++) {
		uint64_t ns = 12345;
		sluice_parse_error_t e = { 0 };
		const char *s = bad_durations[i].s;
		cr_assert_eq(sluice_parse_duration(s, strlen(s), &ns, &e), SLUICE_ESYNTAX, "%s", s);
		cr_assert_eq(ns, 12345, "%s: the value is not written on error", s);
		cr_assert_str_eq(e.message, bad_durations[i].msg, "%s", s);
		cr_assert_eq(e.offset, bad_durations[i].off, "%s: offset %zu", s, e.offset);
	}
}

/* The text is (s, len), not a C string: what follows len is not read. */
Test(parse, length_bounds_the_text)
{
	uint64_t ns = 0;
	cr_assert_eq(sluice_parse_duration("250msXYZ", 5, &ns, NULL), 0);
	cr_assert_eq(ns, 250000000ULL);
	uint64_t r = 0, p = 0;
	cr_assert_eq(sluice_parse_rate("10/s0", 4, &r, &p, NULL), 0);
	cr_assert_eq(r, 10);
	cr_assert_eq(sluice_parse_duration(NULL, 0, &ns, NULL), SLUICE_EINVAL);
	cr_assert_eq(sluice_parse_rate("1/s", 3, NULL, &p, NULL), SLUICE_EINVAL);
}

static const struct {
	const char *s;
	uint64_t rate, period;
} good_rates[] = {
	{ "10/s", 10, 1000000000ULL },        { "10r/s", 10, 1000000000ULL },
	{ "0.5r/s", 1, 2000000000ULL },       { "30r/m", 30, 60000000000ULL },
	{ "30/min", 30, 60000000000ULL },     { "1/h", 1, 3600000000000ULL },
	{ "3r/ms", 3, 1000000ULL },           { "5/250ms", 5, 250000000ULL },
	{ "1.5/s", 3, 2000000000ULL },        { "2500.25r/s", 10001, 4000000000ULL },
	{ "100/1us", 100, 1000ULL },          { "1/500us", 1, 500000ULL },
	{ "2/1.5s", 2, 1500000000ULL },       { "1/d", 1, 86400000000000ULL },
	{ "50/10s", 50, 10000000000ULL },      { "10/5", 10, 5000000000ULL },
};

static const struct {
	const char *s, *msg;
	size_t off;
} bad_rates[] = {
	{ "10", "a rate needs a period: 10/s, 10r/s, 30r/m, 5/250ms", 2 },
	{ "10r", "a rate needs a period: 10/s, 10r/s, 30r/m, 5/250ms", 3 },
	{ "0/s", "a rate must be positive", 0 },
	{ "10/x", "unknown unit (ns, us, ms, s, m, min, h, d)", 3 },
	{ "10/", "unknown unit (ns, us, ms, s, m, min, h, d)", 3 },
	{ "10/0s", "a rate's period must be positive", 3 },
	{ "-1/s", "must not be negative", 0 },
	{ "r/s", "not a number", 0 },
	{ "10rs", "a rate needs a period: 10/s, 10r/s, 30r/m, 5/250ms", 3 },
	{ "100rps", "a rate needs a period: 10/s, 10r/s, 30r/m, 5/250ms", 4 },
	{ "50/sec", "unknown unit (ns, us, ms, s, m, min, h, d)", 3 },
	{ "1e3/s", "exponent notation is not accepted: write the number out", 1 },
	{ "10/0.5ns", "not a whole number of ns", 6 },
};

Test(parse, rates)
{
	for (size_t i = 0; i < COUNT(good_rates); i++) {
		uint64_t r = 0, p = 0;
		const char *s = good_rates[i].s;
		cr_assert_eq(sluice_parse_rate(s, strlen(s), &r, &p, NULL), 0, "%s", s);
		cr_assert_eq(r, good_rates[i].rate, "%s: rate %llu", s, (unsigned long long)r);
		cr_assert_eq(p, good_rates[i].period, "%s: period %llu", s, (unsigned long long)p);
	}
	for (size_t i = 0; i < COUNT(bad_rates); i++) {
		uint64_t r = 7, p = 7;
		sluice_parse_error_t e = { 0 };
		const char *s = bad_rates[i].s;
		cr_assert_eq(sluice_parse_rate(s, strlen(s), &r, &p, &e), SLUICE_ESYNTAX, "%s", s);
		cr_assert(r == 7 && p == 7, "%s: nothing written on error", s);
		cr_assert_str_eq(e.message, bad_rates[i].msg, "%s", s);
		cr_assert_eq(e.offset, bad_rates[i].off, "%s: offset %zu", s, e.offset);
	}
}

Test(parse, fractions)
{
	static const struct {
		const char *s;
		uint64_t n, d;
	} good[] = { { "2.5", 5, 2 }, { "0.02", 1, 50 }, { "2%", 1, 50 }, { "0.5%", 1, 200 },
		     { "0", 0, 1 }, { "3", 3, 1 }, { "100%", 1, 1 }, { "0.000", 0, 1 } };
	for (size_t i = 0; i < COUNT(good); i++) {
		uint64_t n = 9, d = 9;
		cr_assert_eq(sluice_parse_fraction(good[i].s, strlen(good[i].s), &n, &d, NULL), 0,
		             "%s", good[i].s);
		cr_assert(n == good[i].n && d == good[i].d, "%s: %llu/%llu", good[i].s,
		          (unsigned long long)n, (unsigned long long)d);
	}
	static const struct {
		const char *s, *msg;
		size_t off;
	} bad[] = { { "", "empty", 0 },
		    { "2%%", "not a number or percentage", 2 },
		    { "1/2", "not a number or percentage", 1 },
		    { "-1", "must not be negative", 0 },
		    { "%", "not a number", 0 } };
	for (size_t i = 0; i < COUNT(bad); i++) {
		uint64_t n = 9, d = 9;
		sluice_parse_error_t e = { 0 };
		cr_assert_eq(sluice_parse_fraction(bad[i].s, strlen(bad[i].s), &n, &d, &e),
		             SLUICE_ESYNTAX, "%s", bad[i].s);
		cr_assert_str_eq(e.message, bad[i].msg, "%s", bad[i].s);
		cr_assert_eq(e.offset, bad[i].off, "%s", bad[i].s);
		cr_assert(n == 9 && d == 9);
	}
}

Test(parse, sizes)
{
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = { { "4096", 4096 },      { "64k", 65536 },   { "64K", 65536 },
		     { "10m", 10485760 },   { "10M", 10485760 }, { "1g", 1073741824 },
		     { "0", 0 },            { "512B", 512 },    { "4KiB", 4096 },
		     { "2MiB", 2u << 20 },  { "1GiB", 1ULL << 30 }, { "1T", 1ULL << 40 },
		     { "1TiB", 1ULL << 40 }, { "18446744073709551615", UINT64_MAX } };
	for (size_t i = 0; i < COUNT(good); i++) {
		uint64_t v = 1;
		cr_assert_eq(sluice_parse_size(good[i].s, strlen(good[i].s), &v, NULL), 0, "%s",
		             good[i].s);
		cr_assert_eq(v, good[i].v, "%s", good[i].s);
	}
	static const struct {
		const char *s, *msg;
	} bad[] = { { "", "empty" },
		    { "1.5m", "a size is a whole number of bytes" },
		    { "10mb", "unknown size unit (B, k, m, g, t or KiB, MiB, GiB, TiB)" },
		    { "1GB", "unknown size unit (B, k, m, g, t or KiB, MiB, GiB, TiB)" },
		    { "1 g", "unknown size unit (B, k, m, g, t or KiB, MiB, GiB, TiB)" },
		    { "10p", "unknown size unit (B, k, m, g, t or KiB, MiB, GiB, TiB)" },
		    { "m", "not a number" },
		    { "-1k", "must not be negative" },
		    { "17179869184g", "out of range (above 2^64 - 1 bytes)" },
		    { "16777216T", "out of range (above 2^64 - 1 bytes)" },
		    { "18446744073709551616", "out of range (above 2^64 - 1 bytes)" } };
	for (size_t i = 0; i < COUNT(bad); i++) {
		uint64_t v = 1;
		sluice_parse_error_t e = { 0 };
		cr_assert_eq(sluice_parse_size(bad[i].s, strlen(bad[i].s), &v, &e), SLUICE_ESYNTAX,
		             "%s", bad[i].s);
		cr_assert_str_eq(e.message, bad[i].msg, "%s", bad[i].s);
	}
}

Test(parse, algorithm_names_and_aliases)
{
	static const struct {
		const char *s;
		sluice_algo_t a;
	} good[] = {
		{ "fixed", SLUICE_ALGO_FIXED },      { "fixed_window", SLUICE_ALGO_FIXED },
		{ "window", SLUICE_ALGO_WINDOW },    { "sliding_window", SLUICE_ALGO_WINDOW },
		{ "ring", SLUICE_ALGO_WINDOW },      { "gcra", SLUICE_ALGO_GCRA },
		{ "token_bucket", SLUICE_ALGO_GCRA }, { "leaky", SLUICE_ALGO_LEAKY },
		{ "leaky_bucket", SLUICE_ALGO_LEAKY }, { "log", SLUICE_ALGO_LOG },
		{ "sliding_log", SLUICE_ALGO_LOG },  { "warmup", SLUICE_ALGO_WARMUP },
		{ "decay", SLUICE_ALGO_DECAY },      { "inflight", SLUICE_ALGO_INFLIGHT },
		{ "concurrency", SLUICE_ALGO_INFLIGHT },
	};
	for (size_t i = 0; i < COUNT(good); i++) {
		sluice_algo_t a = SLUICE_ALGO_NONE;
		cr_assert_eq(sluice_parse_algo(good[i].s, strlen(good[i].s), &a, NULL), 0, "%s",
		             good[i].s);
		cr_assert_eq(a, good[i].a, "%s", good[i].s);
	}
	static const char *bad[] = { "", "GCRA", "token-bucket", "gcra ", "composite", "keyed" };
	for (size_t i = 0; i < COUNT(bad); i++) {
		sluice_algo_t a = SLUICE_ALGO_NONE;
		sluice_parse_error_t e = { 0 };
		cr_assert_eq(sluice_parse_algo(bad[i], strlen(bad[i]), &a, &e), SLUICE_ESYNTAX, "%s",
		             bad[i]);
		cr_assert_eq(a, SLUICE_ALGO_NONE);
		cr_assert_str_eq(e.message,
		                 "unknown algorithm (one of: fixed window gcra leaky log warmup decay "
		                 "inflight; fixed_window sliding_window ring token_bucket leaky_bucket "
		                 "sliding_log concurrency)");
	}
	/* every algorithm's canonical name reads back as itself */
	for (int a = SLUICE_ALGO_FIXED; a <= SLUICE_ALGO_INFLIGHT; a++) {
		const char *n = sluice_algo_name((sluice_algo_t)a);
		cr_assert_not_null(n, "algo %d", a);
		sluice_algo_t b = SLUICE_ALGO_NONE;
		cr_assert_eq(sluice_parse_algo(n, strlen(n), &b, NULL), 0, "%s", n);
		cr_assert_eq((int)b, a, "%s", n);
	}
	cr_assert_null(sluice_algo_name(SLUICE_ALGO_NONE));
	cr_assert_null(sluice_algo_name(SLUICE_ALGO_COMPOSITE));
}

Test(parse, formatters)
{
	char b[SLUICE_RATE_STRLEN];
	static const struct {
		uint64_t ns;
		const char *s;
	} d[] = { { 1500000000ULL, "1500ms" }, { 60000000000ULL, "1m" }, { 250000ULL, "250us" },
		  { 7, "7ns" }, { 0, "0ns" }, { 86400000000000ULL, "1d" }, { 90000000000ULL, "90s" },
		  { UINT64_MAX, "18446744073709551615ns" } };
	for (size_t i = 0; i < COUNT(d); i++) {
		int n = sluice_format_duration(d[i].ns, b, SLUICE_DURATION_STRLEN);
		cr_assert_str_eq(b, d[i].s);
		cr_assert_eq(n, (int)strlen(d[i].s));
	}
	static const struct {
		uint64_t r, p;
		const char *s;
	} r[] = { { 50, 1000000000ULL, "50/s" }, { 30, 60000000000ULL, "30/m" },
		  { 1, 2000000000ULL, "1/2s" }, { 5, 250000000ULL, "5/250ms" },
		  { 10001, 4000000000ULL, "10001/4s" }, { 3, 1000000ULL, "3/ms" } };
	for (size_t i = 0; i < COUNT(r); i++) {
		int n = sluice_format_rate(r[i].r, r[i].p, b, sizeof(b));
		cr_assert_str_eq(b, r[i].s);
		cr_assert_eq(n, (int)strlen(r[i].s));
	}
	cr_assert_eq(sluice_format_rate(0, 1, b, sizeof(b)), SLUICE_EINVAL);
	cr_assert_eq(sluice_format_duration(1500000000ULL, b, 6), SLUICE_ETRUNC);
	cr_assert_eq(sluice_format_duration(1500000000ULL, b, 7), 6);
	cr_assert_eq(sluice_format_rate(50, 1000000000ULL, b, 4), SLUICE_ETRUNC);
	cr_assert_eq(sluice_format_rate(50, 1000000000ULL, b, 5), 4);
	cr_assert_eq(sluice_format_size(10485760, b, sizeof(b)), 3);
	cr_assert_str_eq(b, "10m");
	cr_assert_eq(sluice_format_size(4097, b, sizeof(b)), 4);
	cr_assert_str_eq(b, "4097");
	cr_assert_eq(sluice_format_size(0, b, sizeof(b)), 1);
	cr_assert_str_eq(b, "0");
}

/* format then parse gives the value back, at every power of ten and unit edge */
Test(parse, round_trips)
{
	char b[SLUICE_RATE_STRLEN];
	uint64_t v = 1;
	for (int i = 0; i < 64; i++, v = v * 3 + (uint64_t)i) {
		uint64_t vals[] = { v, v * 1000, v * 60000000000ULL, (uint64_t)1 << i };
		for (size_t k = 0; k < COUNT(vals); k++) {
			uint64_t got = 0, r = 0, p = 0;
			int n = sluice_format_duration(vals[k], b, sizeof(b));
			cr_assert_gt(n, 0);
			cr_assert_eq(sluice_parse_duration(b, (size_t)n, &got, NULL), 0, "%s", b);
			cr_assert_eq(got, vals[k], "%s", b);
			if (vals[k] == 0)
				continue;
			n = sluice_format_rate(i + 1, vals[k], b, sizeof(b));
			cr_assert_gt(n, 0);
			cr_assert_eq(sluice_parse_rate(b, (size_t)n, &r, &p, NULL), 0, "%s", b);
			cr_assert(r == (uint64_t)i + 1 && p == vals[k], "%s", b);
			n = sluice_format_size(vals[k], b, sizeof(b));
			cr_assert_eq(sluice_parse_size(b, (size_t)n, &got, NULL), 0, "%s", b);
			cr_assert_eq(got, vals[k], "%s", b);
		}
	}
}
