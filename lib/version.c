/* SPDX-License-Identifier: MIT */
/*
 * version.c - sluice_version() and sluice_version_string(): the version this
 * library was compiled as, for callers to compare with the headers they were
 * compiled with.
 *
 * DESIGN: the values are SLUICE_VERSION_HEX and SLUICE_VERSION_STRING as
 * this file sees them when the library is built, so they travel with the
 * library binary (a static library, a libsluice.so.1 swapped for a newer
 * one) and not with the caller's headers, which may be of another release.
 * No state, nothing shared: both are constants.
 */
#include "sluice/version.h"

unsigned long sluice_version(void)
{
	return SLUICE_VERSION_HEX;
}

const char *sluice_version_string(void)
{
	return SLUICE_VERSION_STRING;
}
