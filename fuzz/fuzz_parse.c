/* SPDX-License-Identifier: MIT */
/*
 * fuzz_parse.c - the one grammar (sluice/parse.h) on arbitrary bytes.
 *
 * The input is given to every parser as (data, size), from a heap copy of
 * exactly that size so AddressSanitizer sees any read past the end (the
 * text is not NUL-terminated).  The oracle is the header's text:
 *   - success: the formatter writes text that the same parser reads back
 *     as the same value, and that text fits the header's buffer size;
 *   - failure: SLUICE_ESYNTAX with a message and an offset within the input
 *     (offset == size for "ends too early"), and the value not written.
 */
#include <stdlib.h>
#include <string.h>

#include "sluice/error.h"
#include "sluice/parse.h"

#define CHECK(c)          \
	do {              \
		if (!(c)) \
			abort(); \
	} while (0)

static void failed(int rc, const sluice_parse_error_t *e, size_t size)
{
	CHECK(rc == SLUICE_ESYNTAX);
	CHECK(e->message != NULL && e->message[0] != '\0');
	CHECK(e->offset <= size);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char *s = malloc(size ? size : 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	char buf[SLUICE_RATE_STRLEN];
	sluice_parse_error_t e = { 0 };

	uint64_t v = 0x5a5a, w = 0x5a5a, back = 0, back2 = 0;
	int rc = sluice_parse_duration(s, size, &v, &e);
	if (rc == 0) {
		int n = sluice_format_duration(v, buf, SLUICE_DURATION_STRLEN);
		CHECK(n > 0 && (size_t)n < SLUICE_DURATION_STRLEN);
		CHECK(sluice_parse_duration(buf, (size_t)n, &back, NULL) == 0 && back == v);
	} else {
		failed(rc, &e, size);
		CHECK(v == 0x5a5a);
	}

	v = 0x5a5a;
	rc = sluice_parse_rate(s, size, &v, &w, &e);
	if (rc == 0) {
		CHECK(v >= 1 && w >= 1);
		int n = sluice_format_rate(v, w, buf, SLUICE_RATE_STRLEN);
		CHECK(n > 0 && (size_t)n < SLUICE_RATE_STRLEN);
		CHECK(sluice_parse_rate(buf, (size_t)n, &back, &back2, NULL) == 0);
		CHECK(back == v && back2 == w);
	} else {
		failed(rc, &e, size);
		CHECK(v == 0x5a5a && w == 0x5a5a);
	}

	v = 0x5a5a;
	rc = sluice_parse_size(s, size, &v, &e);
	if (rc == 0) {
		int n = sluice_format_size(v, buf, SLUICE_SIZE_STRLEN);
		CHECK(n > 0 && (size_t)n < SLUICE_SIZE_STRLEN);
		CHECK(sluice_parse_size(buf, (size_t)n, &back, NULL) == 0 && back == v);
	} else {
		failed(rc, &e, size);
		CHECK(v == 0x5a5a);
	}

	v = w = 0x5a5a;
	rc = sluice_parse_fraction(s, size, &v, &w, &e);
	if (rc == 0)
		CHECK(w >= 1 && (v != 0 || w == 1));
	else {
		failed(rc, &e, size);
		CHECK(v == 0x5a5a && w == 0x5a5a);
	}

	sluice_algo_t a = SLUICE_ALGO_NONE;
	rc = sluice_parse_algo(s, size, &a, &e);
	if (rc == 0) {
		const char *name = sluice_algo_name(a);
		CHECK(name != NULL);
		sluice_algo_t b = SLUICE_ALGO_NONE;
		CHECK(sluice_parse_algo(name, strlen(name), &b, NULL) == 0 && b == a);
	} else {
		failed(rc, &e, size);
		CHECK(a == SLUICE_ALGO_NONE);
	}
	free(s);
	return 0;
}
