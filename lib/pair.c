/* SPDX-License-Identifier: MIT */
/*
 * pair.c - which 16-byte CAS instruction an arm64 CPU runs
 * (lib/pair_internal.h); built for arm64 only (lib/meson.build).
 *
 * DESIGN: one byte, sluice__pair_lse, written once by a constructor from the
 * kernel's HWCAP_ATOMICS (LSE: CASP) before main runs and before dlopen()
 * of the library returns, and read relaxed by every pair CAS.  Nothing pairs
 * with it: both values are correct on every arm64 CPU that reports it, and
 * 0 (the LDXP/STLXP loop, ARMv8.0) is also what a call from another
 * library's constructor that ran first would see.  So the hot path pays one
 * load of a read-mostly byte and a predictable branch.  A build for a target
 * with LSE (-march=armv8.1-a or later: __ARM_FEATURE_ATOMICS) does not read
 * it at all.
 */
#include <sys/auxv.h>

#include "pair_internal.h"

_Atomic unsigned char sluice__pair_lse;

__attribute__((constructor)) static void pair_detect(void)
{
	atomic_store_explicit(&sluice__pair_lse, (getauxval(AT_HWCAP) & HWCAP_ATOMICS) ? 1 : 0,
	                      memory_order_relaxed);
}
