/* SPDX-License-Identifier: MIT */
/*
 * sluice/version.h - the version of the headers a program was compiled with,
 * and of the library it runs with.
 *
 * SLUICE_VERSION_* are the version of these headers, fixed when a caller is
 * compiled; sluice_version() is the version of the library the program is
 * linked with at run time.  They differ when a program built against one
 * release runs with another installed: the ABI policy in docs/build.md says
 * which pairs work (same major: a library at least as new as the headers).
 *
 * The numbers here and the project version in meson.build are one version:
 * configuring the build fails when they differ (meson.build checks).  This
 * file is written, not generated, so it sits beside the other public headers
 * and sluice.h includes it the same way in the source tree, the build tree
 * and an installed tree.
 */
#ifndef SLUICE_VERSION_H
#define SLUICE_VERSION_H

#include "common.h"

#define SLUICE_VERSION_MAJOR 1
#define SLUICE_VERSION_MINOR 0
#define SLUICE_VERSION_PATCH 0

/* 0xMMmmpp: one byte each, so versions compare as integers (also in #if). */
#define SLUICE_VERSION_HEX \
	((SLUICE_VERSION_MAJOR << 16) | (SLUICE_VERSION_MINOR << 8) | SLUICE_VERSION_PATCH)

#define SLUICE__VERSION_STR2(x) #x
#define SLUICE__VERSION_STR(x) SLUICE__VERSION_STR2(x)
/* "MAJOR.MINOR.PATCH", as meson's project() and pkg-config --modversion. */
#define SLUICE_VERSION_STRING                      \
	SLUICE__VERSION_STR(SLUICE_VERSION_MAJOR) "." \
	SLUICE__VERSION_STR(SLUICE_VERSION_MINOR) "." \
	SLUICE__VERSION_STR(SLUICE_VERSION_PATCH)

/*
 * sluice_version - the version of the library linked at run time, as
 * SLUICE_VERSION_HEX (0xMMmmpp).
 *
 * A caller that wants to refuse an older library than the one it was built
 * against compares: sluice_version() >= SLUICE_VERSION_HEX, and the same
 * major, (sluice_version() >> 16) == SLUICE_VERSION_MAJOR.
 * Thread-safe, no side effects; any context.
 * Return: the library's version, a constant of the library.
 */
SLUICE_API unsigned long sluice_version(void);

/*
 * sluice_version_string - the same version as "MAJOR.MINOR.PATCH".
 * Thread-safe, no side effects; any context.
 * Return: a static string owned by the library; never NULL.
 */
SLUICE_API const char *sluice_version_string(void);

#endif /* SLUICE_VERSION_H */
