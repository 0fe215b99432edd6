/*
 * parse.c - numbers with units, for the command line and trace files.
 *
 * DESIGN: decimals are read exactly, as an integer mantissa and a count of
 * decimal places, and converted with 128-bit integer arithmetic: "0.1s" is
 * 100,000,000 ns, not 99,999,999 after a trip through a double.  Every
 * parser rejects what it cannot represent exactly (too many decimals, a
 * fraction of a nanosecond, overflow) with a reason instead of rounding:
 * a simulator that quietly changes its inputs gives numbers nobody can
 * check.
 */
#include <string.h>

#include "sim.h"

__extension__ typedef unsigned __int128 u128;

#define MAX_DIGITS 30 /* 10^30 < 2^100: room to multiply by a unit */

/* Read digits with at most one '.', into *mant and *frac (decimal places). */
static const char *decimal(const char **sp, u128 *mant, unsigned *frac)
{
	const char *s = *sp;
	unsigned digits = 0;
	int dot = 0;
	*mant = 0;
	*frac = 0;
	for (;; s++) {
		if (*s >= '0' && *s <= '9') {
			if (++digits > MAX_DIGITS)
				return "too many digits";
			*mant = *mant * 10 + (unsigned)(*s - '0');
			*frac += (unsigned)dot;
		} else if (*s == '.' && !dot) {
			dot = 1;
		} else {
			break;
		}
	}
	if (digits == 0)
		return "not a number";
	*sp = s;
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

/* Reduce num/den and check both fit in 64 bits. */
static const char *fraction(u128 num, u128 den, uint64_t *n, uint64_t *d)
{
	if (num == 0) {
		*n = 0;
		*d = 1;
		return NULL;
	}
	u128 g = gcd128(num, den);
	num /= g;
	den /= g;
	if (num > UINT64_MAX || den > UINT64_MAX)
		return "too large or too precise";
	*n = (uint64_t)num;
	*d = (uint64_t)den;
	return NULL;
}

const char *sim_parse_count(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return "empty";
	u128 v = 0;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return "not a whole number";
		v = v * 10 + (unsigned)(*p - '0');
		if (v > UINT64_MAX)
			return "too large";
	}
	*out = (uint64_t)v;
	return NULL;
}

static int unit_ns(const char *u, uint64_t *ns)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = { { "", SIM_SEC }, { "s", SIM_SEC }, { "ms", SIM_MS }, { "us", SIM_US },
		      { "ns", 1 },        { "min", 60 * SIM_SEC }, { "h", 3600 * SIM_SEC } };
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(u, units[i].name) == 0) {
			*ns = units[i].ns;
			return 0;
		}
	}
	return -1;
}

const char *sim_parse_duration(const char *s, uint64_t *ns)
{
	if (!s || !*s)
		return "empty";
	if (*s == '-')
		return "negative";
	u128 mant;
	unsigned frac;
	const char *e = decimal(&s, &mant, &frac);
	if (e)
		return e;
	uint64_t u;
	if (unit_ns(s, &u) != 0)
		return "unknown unit (ns, us, ms, s, min, h; a bare number is seconds)";
	if (frac > 9)
		return "more than 9 decimals";
	u128 p = pow10u(frac), v = mant * u;
	if (v % p != 0)
		return "not a whole number of ns";
	v /= p;
	if (v > UINT64_MAX)
		return "too large";
	*ns = (uint64_t)v;
	return NULL;
}

const char *sim_parse_ratio(const char *s, uint64_t *num, uint64_t *den)
{
	if (!s || !*s)
		return "empty";
	if (*s == '-')
		return "negative";
	u128 mant;
	unsigned frac;
	const char *e = decimal(&s, &mant, &frac);
	if (e)
		return e;
	u128 d = pow10u(frac);
	if (*s == '%') {
		d *= 100;
		s++;
	}
	if (*s)
		return "not a number or percentage";
	if (mant == 0)
		return "must be above 0";
	return fraction(mant, d, num, den);
}

const char *sim_parse_rate(const char *s, uint64_t limit, uint64_t window_ns, uint64_t *num,
                           uint64_t *den)
{
	if (!s || !*s)
		return "empty";
	if (*s == '-')
		return "negative";
	u128 mant;
	unsigned frac;
	const char *e = decimal(&s, &mant, &frac);
	if (e)
		return e;
	u128 n = mant, d = pow10u(frac);
	if (strcmp(s, "x") == 0) {
		n *= limit; /* times L per W */
		d *= window_ns;
	} else {
		uint64_t u = SIM_SEC;
		if (*s == '/') {
			if (unit_ns(s + 1, &u) != 0 || s[1] == '\0')
				return "unknown unit (/s, /ms, /us, /ns, /min, /h)";
		} else if (*s) {
			return "not a rate (200, 200/s, 5/ms, 2x)";
		}
		d *= u;
	}
	return fraction(n, d, num, den);
}

const char *sim_format_duration(uint64_t ns, char *buf, size_t len)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = { { "s", SIM_SEC }, { "ms", SIM_MS }, { "us", SIM_US }, { "ns", 1 } };
	size_t i = 0;
	while (i + 1 < sizeof(units) / sizeof(units[0]) && ns < units[i].ns)
		i++;
	uint64_t u = units[i].ns, whole = ns / u, rest = ns % u;
	if (rest == 0) {
		snprintf(buf, len, "%llu %s", (unsigned long long)whole, units[i].name);
		return buf;
	}
	/* the fraction with as many digits as the unit has, trailing zeros cut */
	char f[16];
	size_t k = 0;
	for (uint64_t x = u / 10; x > 0; x /= 10)
		f[k++] = (char)('0' + rest / x % 10); /* one digit per power of ten below u */
	while (k > 0 && f[k - 1] == '0')
		k--;
	f[k] = '\0';
	snprintf(buf, len, "%llu.%s %s", (unsigned long long)whole, f, units[i].name);
	return buf;
}
