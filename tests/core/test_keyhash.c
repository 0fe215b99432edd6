/* SPDX-License-Identifier: MIT */
/*
 * test_keyhash.c - the keyed tables' hash choice on this CPU
 * (lib/keyhash_internal.h): a table formatted here records the AES hash
 * exactly where the CPU has AES instructions (x86-64's AES-NI by cpuid,
 * ARMv8's Cryptographic Extension by the kernel's HWCAP_AES), asked here
 * independently of the library, and SipHash-1-3 elsewhere.  That the AES
 * code computes the same function on both architectures is
 * tests/core/test_keyed.c's known answers and its plain-C FIPS-197 reference,
 * which run on both.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "sluice/keyed.h"
#include "../../lib/keyed_internal.h"
#include "test_keyed_common.h"

TestSuite(keyhash, .timeout = 60);

/* The CPU's own report, not the library's. */
static int cpu_has_aes(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	return __builtin_cpu_supports("aes") != 0;
#elif defined(__aarch64__)
	return (getauxval(AT_HWCAP) & HWCAP_AES) != 0;
#else
	return 0;
#endif
}

Test(keyhash, a_new_table_records_the_aes_hash_exactly_where_the_cpu_has_it)
{
	sluice_keyed_config_t c = gcra_cfg(64, 1, SEC, 1, SLUICE_KEYED_REJECT);
	size_t size = sluice_keyed_region_bytes(&c);
	cr_assert_gt(size, 0);
	void *mem = aligned_alloc(SLUICE_CACHELINE, size);
	cr_assert_not_null(mem);
	cr_assert_eq(sluice_keyed_format(mem, size, &c), 0);
	const struct sluice__keyed_hdr *h = mem;
	int aes = cpu_has_aes();
	printf("keyhash: this CPU %s AES instructions\n", aes ? "has" : "lacks");
	cr_assert_eq(!(h->flags & SLUICE_KEYED_SIPHASH), aes,
	             "CPU %s AES, table records %s", aes ? "has" : "lacks",
	             (h->flags & SLUICE_KEYED_SIPHASH) ? "SipHash" : "AES");
	free(mem);
}
