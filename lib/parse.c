/* SPDX-License-Identifier: MIT */
/*
 * parse.c - the one grammar of sluice/parse.h: durations, rates, sizes,
 * algorithm names, and their formatters.
 *
 * DESIGN
 *
 * Exact.  A number is read as an integer mantissa and a count of decimal
 * places and converted with 128-bit integer arithmetic, so "0.1s" is
 * 100,000,000 ns, not 99,999,999 after a trip through a double, and
 * anything that cannot be represented exactly (a fraction of a ns, a
 * value above 2^64 - 1) is refused with its reason instead of rounded: a
 * limit that quietly differs from what was written is a limit nobody can
 * check.  No strtod, no strtoull: they accept signs, spaces, exponents,
 * hex and "inf", depend on the locale, and stop silently.
 *
 * One table each.  The units, the size multiples and the algorithm names
 * live here once; the names come from SLUICE_ALGOS (common.h) and the
 * aliases from SLUICE_ALGO_ALIASES (parse.h), so a new algorithm is named
 * by every front end the day it is added.  The messages are static
 * strings: the front ends print them as they are, behind their own
 * file:line, so one bad value reads the same everywhere.
 */
#include <string.h>

#include "sluice/error.h"
#include "sluice/parse.h"

typedef sluice__u128 u128;

/* 10^30 < 2^100: a mantissa times a unit (< 2^47 ns a day) stays in 128 bits */
#define MAX_DIGITS 30

#define UNITS_TEXT "ns, us, ms, s, m, min, h, d"

static const struct {
	const char *name;
	uint64_t ns;
} units[] = {
	{ "ns", 1ULL },          { "us", 1000ULL },      { "ms", 1000000ULL },
	{ "s", 1000000000ULL },  { "m", 60000000000ULL }, { "min", 60000000000ULL },
	{ "h", 3600000000000ULL }, { "d", 86400000000000ULL },
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int fail(sluice_parse_error_t *err, const char *msg, size_t off)
{
	if (err) {
		err->message = msg;
		err->offset = off;
	}
	return SLUICE_ESYNTAX;
}

/* The ns of the unit spelled s[pos..len); 0 when none is. */
static uint64_t unit_ns(const char *s, size_t pos, size_t len)
{
	for (size_t i = 0; i < COUNT(units); i++)
		if (strlen(units[i].name) == len - pos && memcmp(units[i].name, s + pos, len - pos) == 0)
			return units[i].ns;
	return 0;
}

/*
 * A decimal number from *@pos: *@mant and *@frac (places after the dot).
 * Return NULL, or the message (with *@pos at the offending character).
 */
static const char *decimal(const char *s, size_t len, size_t *pos, u128 *mant, unsigned *frac)
{
	size_t p = *pos;
	unsigned digits = 0;
	int dot = 0;
	*mant = 0;
	*frac = 0;
	if (p < len && (s[p] == '-' || s[p] == '+'))
		return s[p] == '-' ? "must not be negative" : "takes no sign";
	for (; p < len; p++) {
		if (s[p] >= '0' && s[p] <= '9') {
			if (++digits > MAX_DIGITS) {
				*pos = p;
				return "too many digits";
			}
			*mant = *mant * 10 + (unsigned)(s[p] - '0');
			*frac += (unsigned)dot;
		} else if (s[p] == '.' && !dot) {
			dot = 1;
		} else {
			break;
		}
	}
	if (digits == 0 || (dot && s[p - 1] == '.')) {
		*pos = p;
		return digits == 0 ? "not a number" : "a '.' needs digits after it";
	}
	*pos = p;
	/* 1e3: say what it is (a bare "unknown unit 'e3'" helps nobody) */
	if (p + 1 < len && (s[p] == 'e' || s[p] == 'E') &&
	    ((s[p + 1] >= '0' && s[p + 1] <= '9') || s[p + 1] == '-' || s[p + 1] == '+'))
		return "exponent notation is not accepted: write the number out";
	return NULL;
}

static u128 pow10u(unsigned k)
{
	u128 p = 1;
	while (k--)
		p *= 10;
	return p;
}

static u128 gcd128(u128 a, u128 b)
{
	while (b) {
		u128 t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/*
 * The duration at s[pos..len): mantissa, decimals and unit, exactly.
 * Return 0 and *@ns, or the error (filled).
 */
static int duration_from(const char *s, size_t len, size_t pos, uint64_t *ns,
                         sluice_parse_error_t *err)
{
	u128 mant;
	unsigned frac;
	const char *e = decimal(s, len, &pos, &mant, &frac);
	if (e)
		return fail(err, e, pos);
	/* a bare number is seconds, as nginx reads its times */
	uint64_t u = pos == len ? 1000000000ULL : unit_ns(s, pos, len);
	if (!u)
		return fail(err, "unknown unit (" UNITS_TEXT ")", pos);
	u128 v = mant * u, p = pow10u(frac);
	if (v % p != 0)
		return fail(err, "not a whole number of ns", pos);
	v /= p;
	if (v > UINT64_MAX)
		return fail(err, "out of range (above 2^64 - 1 ns)", 0);
	*ns = (uint64_t)v;
	return 0;
}

/* The number that opens a non-empty s, as the exact mant / den (10^decimals). */
static int leading_number(const char *s, size_t len, size_t *pos, u128 *mant, u128 *den,
                          sluice_parse_error_t *err)
{
	unsigned frac;
	if (len == 0)
		return fail(err, "empty", 0);
	const char *e = decimal(s, len, pos, mant, &frac);
	if (e)
		return fail(err, e, *pos);
	*den = pow10u(frac);
	return 0;
}

int sluice_parse_duration(const char *s, size_t len, uint64_t *ns, sluice_parse_error_t *err)
{
	if (!s || !ns)
		return SLUICE_EINVAL;
	if (len == 0)
		return fail(err, "empty", 0);
	return duration_from(s, len, 0, ns, err);
}

int sluice_parse_rate(const char *s, size_t len, uint64_t *rate, uint64_t *period_ns,
                      sluice_parse_error_t *err)
{
	if (!s || !rate || !period_ns)
		return SLUICE_EINVAL;
	size_t pos = 0;
	u128 mant, den;
	int rc = leading_number(s, len, &pos, &mant, &den, err);
	if (rc)
		return rc;
	if (pos < len && s[pos] == 'r')
		pos++;
	if (pos == len || s[pos] != '/')
		return fail(err, "a rate needs a period: 10/s, 10r/s, 30r/m, 5/250ms", pos);
	pos++;
	if (mant == 0)
		return fail(err, "a rate must be positive", 0);
	/* "/s": one unit; "/250ms": a duration */
	uint64_t p = 0;
	if (pos < len && s[pos] >= '0' && s[pos] <= '9') {
		rc = duration_from(s, len, pos, &p, err);
		if (rc)
			return rc;
		if (p == 0)
			return fail(err, "a rate's period must be positive", pos);
	} else if (pos == len || !(p = unit_ns(s, pos, len))) {
		return fail(err, "unknown unit (" UNITS_TEXT ")", pos);
	}
	/* mant / 10^frac per p: reduce the number's fraction, fold its
	 * denominator into the period (10/s stays 10 per 1 s) */
	u128 g = gcd128(mant, den);
	u128 r = mant / g, per = (den / g) * p;
	if (r > UINT64_MAX || per > UINT64_MAX)
		return fail(err, "out of range (rate or period above 2^64 - 1)", 0);
	*rate = (uint64_t)r;
	*period_ns = (uint64_t)per;
	return 0;
}

/* Binary multiples, in nginx's letters (k, m, g) and the IEC names; none
 * or B is bytes. */
#define SIZE_UNITS_TEXT "B, k, m, g, t or KiB, MiB, GiB, TiB"
static const struct {
	const char *name;
	uint64_t mul;
} size_units[] = {
	{ "", 1 },           { "B", 1 },
	{ "k", 1ULL << 10 }, { "K", 1ULL << 10 }, { "KiB", 1ULL << 10 },
	{ "m", 1ULL << 20 }, { "M", 1ULL << 20 }, { "MiB", 1ULL << 20 },
	{ "g", 1ULL << 30 }, { "G", 1ULL << 30 }, { "GiB", 1ULL << 30 },
	{ "t", 1ULL << 40 }, { "T", 1ULL << 40 }, { "TiB", 1ULL << 40 },
};

int sluice_parse_fraction(const char *s, size_t len, uint64_t *num, uint64_t *den,
                          sluice_parse_error_t *err)
{
	if (!s || !num || !den)
		return SLUICE_EINVAL;
	size_t pos = 0;
	u128 mant, d;
	int rc = leading_number(s, len, &pos, &mant, &d, err);
	if (rc)
		return rc;
	if (pos < len && s[pos] == '%') {
		d *= 100;
		pos++;
	}
	if (pos != len)
		return fail(err, "not a number or percentage", pos);
	u128 g = mant ? gcd128(mant, d) : d;
	if (mant / g > UINT64_MAX || d / g > UINT64_MAX)
		return fail(err, "out of range (above 2^64 - 1)", 0);
	*num = (uint64_t)(mant / g);
	*den = (uint64_t)(d / g);
	return 0;
}

int sluice_parse_size(const char *s, size_t len, uint64_t *bytes, sluice_parse_error_t *err)
{
	if (!s || !bytes)
		return SLUICE_EINVAL;
	if (len == 0)
		return fail(err, "empty", 0);
	size_t pos = 0;
	u128 v = 0;
	if (s[0] == '-' || s[0] == '+')
		return fail(err, s[0] == '-' ? "must not be negative" : "takes no sign", 0);
	for (; pos < len && s[pos] >= '0' && s[pos] <= '9'; pos++) {
		v = v * 10 + (unsigned)(s[pos] - '0');
		if (v > UINT64_MAX)
			return fail(err, "out of range (above 2^64 - 1 bytes)", 0);
	}
	if (pos == 0)
		return fail(err, "not a number", 0);
	uint64_t mult = 0;
	for (size_t i = 0; i < COUNT(size_units); i++)
		if (strlen(size_units[i].name) == len - pos &&
		    memcmp(size_units[i].name, s + pos, len - pos) == 0)
			mult = size_units[i].mul;
	if (!mult)
		return fail(err, pos < len && s[pos] == '.' ? "a size is a whole number of bytes"
		                                            : "unknown size unit (" SIZE_UNITS_TEXT ")",
		            pos);
	v *= mult;
	if (v > UINT64_MAX)
		return fail(err, "out of range (above 2^64 - 1 bytes)", 0);
	*bytes = (uint64_t)v;
	return 0;
}

/* The names every front end reads: sluice_algo_t's own, then the aliases. */
static const struct {
	const char *name;
	sluice_algo_t algo;
} names[] = {
#define SLUICE__NAME(ALGO, name) { #name, SLUICE_ALGO_##ALGO },
	SLUICE_ALGOS(SLUICE__NAME) SLUICE_ALGO_ALIASES(SLUICE__NAME)
#undef SLUICE__NAME
};

/* The list in the message, from the same two tables (a literal: static). */
#define SLUICE__TEXT(ALGO, name) " " #name
#define NAMES_TEXT SLUICE_ALGOS(SLUICE__TEXT) ";" SLUICE_ALGO_ALIASES(SLUICE__TEXT)

int sluice_parse_algo(const char *s, size_t len, sluice_algo_t *algo, sluice_parse_error_t *err)
{
	if (!s || !algo)
		return SLUICE_EINVAL;
	for (size_t i = 0; i < COUNT(names); i++)
		if (strlen(names[i].name) == len && memcmp(names[i].name, s, len) == 0) {
			*algo = names[i].algo;
			return 0;
		}
	return fail(err, "unknown algorithm (one of:" NAMES_TEXT ")", 0);
}

const char *sluice_algo_name(sluice_algo_t algo)
{
	switch (algo) {
#define SLUICE__CASE(ALGO, name) \
	case SLUICE_ALGO_##ALGO: \
		return #name;
		SLUICE_ALGOS(SLUICE__CASE)
#undef SLUICE__CASE
	default:
		return NULL;
	}
}

/* Write the decimal @v then @unit to buf; the length or SLUICE_ETRUNC. */
static int put(char *buf, size_t len, uint64_t v, const char *unit)
{
	char tmp[24];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	size_t ul = strlen(unit);
	if (!buf || n + ul + 1 > len)
		return SLUICE_ETRUNC;
	for (size_t i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	memcpy(buf + n, unit, ul + 1);
	return (int)(n + ul);
}

/* The largest unit dividing @ns whole ("m", not "min": the short name). */
static size_t unit_of(uint64_t ns)
{
	size_t best = 0;
	for (size_t i = 0; i < COUNT(units); i++)
		if (ns && ns % units[i].ns == 0 && units[i].ns > units[best].ns &&
		    strcmp(units[i].name, "min") != 0)
			best = i;
	return best;
}

int sluice_format_duration(uint64_t ns, char *buf, size_t len)
{
	size_t u = unit_of(ns);
	return put(buf, len, ns / units[u].ns, units[u].name);
}

int sluice_format_rate(uint64_t rate, uint64_t period_ns, char *buf, size_t len)
{
	if (rate == 0 || period_ns == 0)
		return SLUICE_EINVAL;
	int a = put(buf, len, rate, "/");
	if (a < 0)
		return a;
	size_t u = unit_of(period_ns);
	uint64_t k = period_ns / units[u].ns;
	size_t rest = len - (size_t)a;
	int b;
	if (k == 1) { /* "50/s", not "50/1s" */
		b = (int)strlen(units[u].name);
		if ((size_t)b + 1 > rest)
			return SLUICE_ETRUNC;
		memcpy(buf + a, units[u].name, (size_t)b + 1);
	} else {
		b = put(buf + a, rest, k, units[u].name);
		if (b < 0)
			return b;
	}
	return a + b;
}

int sluice_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const struct {
		const char *name;
		unsigned shift;
	} mult[] = { { "t", 40 }, { "g", 30 }, { "m", 20 }, { "k", 10 } };
	for (size_t i = 0; i < COUNT(mult); i++)
		if (bytes && bytes % (1ULL << mult[i].shift) == 0)
			return put(buf, len, bytes >> mult[i].shift, mult[i].name);
	return put(buf, len, bytes, "");
}
