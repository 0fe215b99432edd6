/* SPDX-License-Identifier: MIT */
/*
 * test_error.c - the error table: every SLUICE_ERRORS entry is a negative
 * enum value (so rc == SLUICE_ETOOBIG compares what a call returns), with
 * its own message and symbolic name; 0 is success; anything else, the
 * positive magnitudes included, is unknown.
 *
 * The codes are enumerated with the SLUICE_ERRORS X-macro itself, so a code
 * added to the table is covered here without touching this file.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "sluice/error.h"

struct err_entry {
	int value;
	const char *name; /* "SLUICE_<NAME>", built by the preprocessor */
	const char *msg;  /* the message the table gives */
};

#define ERR_ENTRY(name, value, msg) { value, "SLUICE_" #name, msg },
static const struct err_entry table[] = { SLUICE_ERRORS(ERR_ENTRY) };
#undef ERR_ENTRY

#define NCODES (sizeof(table) / sizeof(table[0]))

/* The enum is generated from the same table: check it agrees. */
#define ERR_ENUM_CHECK(name, value, msg) \
	_Static_assert(SLUICE_##name == -(value) && SLUICE_##name < 0, "enum value drifted from table: " #name);
SLUICE_ERRORS(ERR_ENUM_CHECK)
#undef ERR_ENUM_CHECK

static int max_code(void)
{
	int m = 0;
	for (size_t i = 0; i < NCODES; i++)
		if (table[i].value > m)
			m = table[i].value;
	return m;
}

TestSuite(error, .timeout = 60);

Test(error, table_is_not_empty_and_values_are_distinct_and_positive)
{
	cr_assert_gt(NCODES, 0, "SLUICE_ERRORS has no entries");
	for (size_t i = 0; i < NCODES; i++) {
		cr_assert_gt(table[i].value, 0, "%s has value %d; codes must be > 0 (0 is success)",
		             table[i].name, table[i].value);
		for (size_t j = i + 1; j < NCODES; j++)
			cr_assert_neq(table[i].value, table[j].value, "%s and %s share value %d",
			              table[i].name, table[j].name, table[i].value);
	}
}

Test(error, every_code_has_its_own_message)
{
	for (size_t i = 0; i < NCODES; i++) {
		int code = -table[i].value;
		const char *m = sluice_strerror(code);

		cr_assert_not_null(m, "sluice_strerror(%s) returned NULL", table[i].name);
		cr_assert_str_eq(m, table[i].msg, "sluice_strerror(%s) = \"%s\", table says \"%s\"",
		                 table[i].name, m, table[i].msg);
		cr_assert_str_neq(m, "unknown error", "%s (%d) reads as unknown", table[i].name, code);
		cr_assert_str_neq(m, "success", "%s (%d) reads as success", table[i].name, code);
		cr_assert_gt(strlen(m), 0, "%s has an empty message", table[i].name);
		/* one meaning per value: the positive magnitude is no code */
		cr_assert_str_eq(sluice_strerror(-code), "unknown error",
		                 "sluice_strerror(%d), the positive magnitude of %s, is known", -code,
		                 table[i].name);
	}
}

Test(error, messages_are_distinct)
{
	for (size_t i = 0; i < NCODES; i++)
		for (size_t j = i + 1; j < NCODES; j++) {
			const char *a = sluice_strerror(-table[i].value);
			const char *b = sluice_strerror(-table[j].value);
			cr_assert_str_neq(a, b, "%s and %s share the message \"%s\"", table[i].name,
			                  table[j].name, a);
		}
}

Test(error, every_code_has_its_name)
{
	for (size_t i = 0; i < NCODES; i++) {
		int code = -table[i].value;
		const char *n = sluice_err_name(code);

		cr_assert_not_null(n, "sluice_err_name(%d) returned NULL", code);
		cr_assert_str_eq(n, table[i].name, "sluice_err_name(%d) = \"%s\", expected \"%s\"",
		                 code, n, table[i].name);
		cr_assert_str_eq(sluice_err_name(-code), "SLUICE_UNKNOWN",
		                 "sluice_err_name(%d), the positive magnitude of %s, is known", -code,
		                 table[i].name);
	}
}

Test(error, names_are_distinct)
{
	for (size_t i = 0; i < NCODES; i++)
		for (size_t j = i + 1; j < NCODES; j++) {
			const char *a = sluice_err_name(-table[i].value);
			const char *b = sluice_err_name(-table[j].value);
			cr_assert_str_neq(a, b, "codes %d and %d share the name \"%s\"", table[i].value,
			                  table[j].value, a);
		}
}

Test(error, zero_is_success)
{
	cr_assert_str_eq(sluice_strerror(0), "success", "sluice_strerror(0) = \"%s\"",
	                 sluice_strerror(0));
	cr_assert_str_eq(sluice_err_name(0), "SLUICE_OK", "sluice_err_name(0) = \"%s\"",
	                 sluice_err_name(0));
}

/* Values the table does not define, on both sides of it, down to INT_MIN
 * (whose negation overflows an int: error.c must not negate it; the
 * ASan+UBSan build fails this test if it does). */
static int unknown_codes(int *out, int cap)
{
	int n = 0;
	int above = max_code() + 1;
	int candidates[] = { above, -above, above + 1, -(above + 1), 1000, -1000, 4096,
		             INT_MAX, -INT_MAX, INT_MIN };
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]) && n < cap; i++) {
		int c = candidates[i];
		int defined = 0;
		for (size_t k = 0; k < NCODES; k++)
			if (-table[k].value == c)
				defined = 1;
		if (!defined && c != 0)
			out[n++] = c;
	}
	return n;
}

Test(error, undefined_codes_are_unknown)
{
	int codes[16];
	int n = unknown_codes(codes, 16);
	cr_assert_geq(n, 6, "too few undefined codes to probe (%d)", n);
	for (int i = 0; i < n; i++) {
		cr_assert_str_eq(sluice_strerror(codes[i]), "unknown error",
		                 "sluice_strerror(%d) = \"%s\", expected \"unknown error\"", codes[i],
		                 sluice_strerror(codes[i]));
		cr_assert_str_eq(sluice_err_name(codes[i]), "SLUICE_UNKNOWN",
		                 "sluice_err_name(%d) = \"%s\", expected \"SLUICE_UNKNOWN\"", codes[i],
		                 sluice_err_name(codes[i]));
	}
}

Test(error, results_are_static_strings)
{
	/* The contract is a static string: repeated calls give the same
	 * pointer, so callers may keep it without copying. */
	for (size_t i = 0; i < NCODES; i++) {
		int v = -table[i].value;
		cr_assert_eq(sluice_strerror(v), sluice_strerror(v),
		             "sluice_strerror(%d) returned different pointers", v);
		cr_assert_eq(sluice_err_name(v), sluice_err_name(v),
		             "sluice_err_name(%d) returned different pointers", v);
	}
}
