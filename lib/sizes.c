/* SPDX-License-Identifier: MIT */
/*
 * sizes.c - sluice_<handle>_size(): sizeof each handle as this library was
 * built, one definition for all.  A program compares them with the sizeof
 * its headers give, to catch a header of one version compiled against a
 * library of another (docs/build.md, the ABI policy).
 */
#include "sluice/sluice.h"

#define SLUICE__HANDLES(X) \
	X(fixed)           \
	X(window)          \
	X(gcra)            \
	X(leaky)           \
	X(log)             \
	X(warmup)          \
	X(decay)           \
	X(inflight)        \
	X(keyed)

#define SLUICE__SIZE_OF(name)              \
	size_t sluice_##name##_size(void)  \
	{                                  \
		return sizeof(sluice_##name##_t); \
	}
SLUICE__HANDLES(SLUICE__SIZE_OF)
#undef SLUICE__SIZE_OF
