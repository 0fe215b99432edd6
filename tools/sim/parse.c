/* SPDX-License-Identifier: MIT */
/*
 * parse.c - numbers with units, for the command line and trace files.
 *
 * DESIGN: every number is read by the library's grammar (sluice/parse.h:
 * exact decimals, no rounding, a reason for every refusal), as the rules
 * file and the nginx module read theirs, so a spelling one accepts, all
 * accept.  What is the simulator's own is only the shape of its options: a
 * bare request rate is per second, "2.5x" is a multiple of the limit's
 * rate, and the fractions of a rate are reduced to one request per ns
 * ratio (num / den, 128-bit: a simulator that quietly changes its inputs
 * gives numbers nobody can check).
 */
#include <string.h>

#include "sim.h"

typedef sluice__u128 u128;

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

/* Durations are the library's grammar (sluice/parse.h), as every front end's. */
const char *sim_parse_duration(const char *s, uint64_t *ns)
{
	sluice_parse_error_t e;
	if (!s)
		return "empty";
	return sluice_parse_duration(s, strlen(s), ns, &e) == 0 ? NULL : e.message;
}

const char *sim_parse_ratio(const char *s, uint64_t *num, uint64_t *den)
{
	sluice_parse_error_t e;
	if (!s)
		return "empty";
	if (sluice_parse_fraction(s, strlen(s), num, den, &e) != 0)
		return e.message;
	return *num == 0 ? "must be above 0" : NULL;
}

const char *sim_parse_rate(const char *s, uint64_t limit, uint64_t window_ns, uint64_t *num,
                           uint64_t *den)
{
	sluice_parse_error_t e;
	if (!s || !*s)
		return "empty";
	size_t len = strlen(s);
	if (strchr(s, '/')) { /* 200/s, 5/ms, 10r/s: the library's rates */
		uint64_t r, p;
		if (sluice_parse_rate(s, len, &r, &p, &e) != 0)
			return e.message;
		return fraction(r, p, num, den);
	}
	/* "200" per second, or "2.5x" times the limit's rate L / W */
	static const char form[] = "not a rate (200, 200/s, 5/ms, 10r/s, 2x)";
	int times = s[len - 1] == 'x';
	uint64_t n, d;
	if (strchr(s, '%'))
		return form;
	if (sluice_parse_fraction(s, len - (size_t)times, &n, &d, &e) != 0)
		return e.offset > 0 ? form : e.message; /* "3q": a number, then no rate */
	if (times)
		return fraction((u128)n * limit, (u128)d * window_ns, num, den);
	return fraction(n, (u128)d * SIM_SEC, num, den);
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
