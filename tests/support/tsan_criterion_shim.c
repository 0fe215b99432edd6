/* SPDX-License-Identifier: MIT */
/*
 * tsan_criterion_shim.c - lets Criterion start under ThreadSanitizer.
 * Linked into the test programs of -Db_sanitize=thread builds only.
 *
 * Criterion's sandbox (BoxFort 0.1.x) places its inheritable arena at a
 * random fixed address: base = 0x200000000000 + (rand_r() & 0x3fffff) << 24,
 * probes the pages there with mincore(), and maps them with MAP_FIXED.
 * Under TSan nearly all of that range is shadow or reserved, TSan's mmap
 * interceptor refuses MAP_FIXED outside application memory, and after a few
 * draws BoxFort gives up: "Could not initialize inheritable arena" (Criterion
 * issue #274, open upstream; setarch -R does not help).
 *
 * This rand_r() returns a draw whose region TSan will map.  It asks TSan
 * rather than hard-coding its layout: a hinted (non-fixed) mmap through
 * TSan's interceptor lands on the hint only where application mappings are
 * allowed and the range is free.  Nothing in sluice or its tests calls
 * rand_r(); the library under test is untouched.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define BXF_BASE 0x200000000000ULL
#define BXF_MASK 0x3fffffu
#define BXF_SHIFT 24
#define PROBE_BYTES (1u << 20) /* more than BoxFort's first arena */

static int region_usable(uint32_t r)
{
	void *want = (void *)(uintptr_t)(BXF_BASE + ((uint64_t)r << BXF_SHIFT));
	void *p = mmap(want, PROBE_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 0;
	munmap(p, PROBE_BYTES);
	return p == want;
}

__attribute__((visibility("default"))) int rand_r(unsigned int *seedp)
{
	/* Start where x86-64 TSan keeps PIE application memory (0x55..0x56
	 * TB); scan the whole draw space if that guess is wrong. */
	static const uint32_t start = 0x358000;
	for (uint32_t i = 0; i <= BXF_MASK; i++) {
		uint32_t r = (start + i + (*seedp & 0xff)) & BXF_MASK;
		if (region_usable(r)) {
			*seedp += 1;
			return (int)r;
		}
	}
	return (int)(++*seedp & 0x7fffffff);
}
