/* SPDX-License-Identifier: MIT */
/*
 * keyed_per_ip.c - a per-client-IP rate limit: 10 requests per second per
 * address, bursts of 20, for up to 100,000 addresses in 8.1 MiB.
 * (docs/keyed.md; built and run as a test.)
 */
#include <arpa/inet.h>
#include <stdio.h>

#include <sluice/sluice.h>

int main(void)
{
	sluice_keyed_config_t cfg = { .algo = SLUICE_ALGO_GCRA, .policy = SLUICE_KEYED_EVICT,
		                      .capacity = 100000, .rate = 10, .period_ns = 1000000000,
		                      .burst = 20 };
	sluice_keyed_t per_ip;
	if (sluice_keyed_init(&per_ip, &cfg, &sluice_clock_monotonic) != 0)
		return 1;

	struct in6_addr ip; /* the key: the address bytes (IPv4 as ::ffff:a.b.c.d) */
	inet_pton(AF_INET6, "2001:db8::42", &ip);
	int admitted = 0;
	for (int i = 0; i < 25; i++) {
		sluice_decision_t d;
		if (sluice_keyed_acquire(&per_ip, &ip, sizeof(ip), 1, &d) == 1)
			admitted++;
		else if (i == 24)
			printf("429 Too Many Requests; Retry-After: %llu ms\n",
			       (unsigned long long)(d.retry_after_ns / 1000000));
	}
	printf("2001:db8::42: %d of 25 admitted\n", admitted);
	sluice_keyed_destroy(&per_ip);
	return admitted >= 20 && admitted <= 21 ? 0 : 1; /* the burst (+1 if 100 ms passed) */
}
