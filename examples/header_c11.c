/* SPDX-License-Identifier: MIT */
/*
 * header_c11.c - every public header compiles as strict ISO C11, without
 * _GNU_SOURCE or _POSIX_C_SOURCE, under -pedantic, and the inline paths
 * work there (the POSIX clocks are then reached out of line).
 */
#include <sluice/sluice.h>

int main(void)
{
	sluice_fixed_t f;
	sluice_fixed_config_t cfg = { .limit = 1, .window_ns = 1000000000ULL,
		                      .clock = &sluice_clock_monotonic };
	if (sluice_fixed_init(&f, &cfg) != 0)
		return 1;
	if (sluice_fixed_acquire(&f, 1, NULL) != 1 || sluice_fixed_acquire(&f, 1, NULL) != 0)
		return 1;
	return sluice_clock_coarse_ns() > 0 && sluice_clock_monotonic_ns() > 0 ? 0 : 1;
}
