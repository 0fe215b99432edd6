/* SPDX-License-Identifier: MIT */
/*
 * test_http_parse.h - a parser of the structured-field grammar that
 * sluice/http.h promises, for reading formatted fields back: tests/core/test_http.c
 * and the fuzz target fuzz/fuzz_http.c both check their round trips with it.
 * Each parser reads at *p and, on success, advances *p past what it read.
 */
#ifndef SLUICE_TEST_HTTP_PARSE_H
#define SLUICE_TEST_HTTP_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* An sf-string at *p, unescaped into @out (@cap bytes, the NUL included).
 * 0, or -1 when malformed (a bad escape, a byte outside %x20-7E, the NUL:
 * an unterminated string) or longer than @cap - 1. */
static inline int http_parse_sf_string(const char **p, char *out, size_t cap)
{
	const char *s = *p;
	size_t k = 0;
	if (*s++ != '"')
		return -1;
	for (;;) {
		unsigned char c = (unsigned char)*s++;
		if (c == '"')
			break;
		if (c == '\\') {
			c = (unsigned char)*s++;
			if (c != '"' && c != '\\')
				return -1;
		} else if (c < 0x20 || c > 0x7e) {
			return -1;
		}
		if (k + 1 >= cap)
			return -1;
		out[k++] = (char)c;
	}
	out[k] = '\0';
	*p = s;
	return 0;
}

/* 1*@max DIGIT without a leading zero at *p, into @v.  0, or -1 when
 * malformed (no digit, a leading zero, more than @max digits). */
static inline int http_parse_digits(const char **p, unsigned max, uint64_t *v)
{
	const char *s = *p;
	unsigned k = 0;
	*v = 0;
	while (s[k] >= '0' && s[k] <= '9') {
		if (k == max)
			return -1;
		*v = *v * 10 + (uint64_t)(s[k] - '0');
		k++;
	}
	if (k == 0 || (k > 1 && s[0] == '0'))
		return -1;
	*p = s + k;
	return 0;
}

#endif /* SLUICE_TEST_HTTP_PARSE_H */
