/* SPDX-License-Identifier: MIT */
/*
 * test_version.c - sluice/version.h and lib/version.c agree: the hex packs
 * MAJOR, MINOR and PATCH one byte each, the string spells the same three
 * numbers, and the library linked (the static one) reports exactly what
 * the header says.  tests/install_test.sh checks the installed copies (the
 * shared library's sluice_version() among them) and pkg-config against
 * each other.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sluice/sluice.h" /* the umbrella: it must bring version.h in */

TestSuite(version, .timeout = 10);

/* Usable in #if, as a caller's compile-time check would use it. */
#if SLUICE_VERSION_HEX < 0x010000
#error "SLUICE_VERSION_HEX is below 1.0.0 or not a preprocessor constant"
#endif

Test(version, hex_packs_one_byte_each)
{
	cr_assert_eq(SLUICE_VERSION_HEX >> 16, SLUICE_VERSION_MAJOR);
	cr_assert_eq((SLUICE_VERSION_HEX >> 8) & 0xff, SLUICE_VERSION_MINOR);
	cr_assert_eq(SLUICE_VERSION_HEX & 0xff, SLUICE_VERSION_PATCH);
	cr_assert(SLUICE_VERSION_MINOR <= 0xff && SLUICE_VERSION_PATCH <= 0xff);
}

Test(version, string_spells_the_numbers)
{
	char want[32];
	snprintf(want, sizeof(want), "%d.%d.%d", SLUICE_VERSION_MAJOR, SLUICE_VERSION_MINOR,
	         SLUICE_VERSION_PATCH);
	cr_assert_str_eq(SLUICE_VERSION_STRING, want);
}

Test(version, library_reports_the_header_version)
{
	cr_assert_eq(sluice_version(), (unsigned long)SLUICE_VERSION_HEX,
	             "library 0x%06lx, header 0x%06x", sluice_version(), SLUICE_VERSION_HEX);
	cr_assert_not_null(sluice_version_string());
	cr_assert_str_eq(sluice_version_string(), SLUICE_VERSION_STRING);
}
