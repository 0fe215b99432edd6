/* SPDX-License-Identifier: MIT */
/* lease_policy.c - the lease policy (lease_policy.h says what and why). */
#include "lease_policy.h"

uint64_t sluice__policy_next_b(uint64_t b, int hot, uint64_t lease_max, uint64_t remaining)
{
	if (hot)
		b = b * 2 > lease_max ? lease_max : b * 2;
	uint64_t cap = remaining / 2;
	if (cap < 1)
		cap = 1;
	if (b > cap)
		b = cap;
	return b < 1 ? 1 : b;
}

uint64_t sluice__policy_want(uint64_t b, int hot, uint64_t held, uint64_t need)
{
	if (need < 1)
		need = 1;
	if (!hot)
		return held >= need ? 0 : need;
	/* what this instance holds plus what is in flight never passes B:
	 * the under-admission bound (instances x lease_max per window) */
	uint64_t want = b > held ? b - held : 0;
	return want < need ? need : want;
}

uint64_t sluice__policy_after_loss(uint64_t b, uint64_t lost)
{
	return lost * 2 > b && b > 1 ? b / 2 : b;
}

int sluice__policy_prefetch(uint64_t size, uint64_t left)
{
	return size >= 2 && left * 4 <= size;
}
