/* SPDX-License-Identifier: MIT */
/*
 * redis_limit.c - "1000 requests per second to the payment API", across
 * every instance behind the load balancer, kept in Redis and answered
 * locally from leases.  Usage: redis_limit [port]  (default 6379).
 */
#include <stdio.h>
#include <stdlib.h>

#include <sluice/redis.h>

int main(int argc, char **argv)
{
	sluice_redis_config_t rc = { .host = "127.0.0.1", .port = argc > 1 ? atoi(argv[1]) : 6379 };
	sluice_redis_t *redis;
	int err = sluice_redis_new(&rc, &redis); /* one connection, one I/O thread */
	if (err) {
		fprintf(stderr, "sluice_redis_new: %s\n", sluice_strerror(err));
		return 1;
	}
	sluice_redis_limit_config_t cfg = {
		.name = "payment-api",        /* keys sluice:{payment-api}:... */
		.algo = SLUICE_REDIS_GCRA,
		.rate = 1000, .window_ns = 1000000000, /* 1000 per second ... */
		.limit = 100,                 /* ... in bursts of at most 100 */
		.lease_max = 64,              /* up to 64 permits per round trip */
		.budget_ns = 1000000,         /* never wait on Redis past 1 ms */
		.fallback = SLUICE_REDIS_LOCAL, .expected_instances = 10, /* then 100/s here */
	};
	sluice_redis_limit_t *api;
	if ((err = sluice_redis_limit_new(redis, &cfg, &api))) {
		fprintf(stderr, "sluice_redis_limit_new: %s\n", sluice_strerror(err));
		return 1;
	}
	int admitted = 0, from_redis = 0, fell_back = 0;
	for (int i = 0; i < 1000; i++) {
		sluice_decision_t d;
		sluice_redis_source_t src;
		if (sluice_redis_acquire(api, 1, &d, &src) == 1) {
			admitted++;
			from_redis += src == SLUICE_REDIS_FROM_LEASE;
		} /* else: answer 429 with Retry-After = d.retry_after_ns */
		fell_back += src == SLUICE_REDIS_FROM_FALLBACK;
	}
	sluice_redis_stats_t st;
	sluice_redis_stats(redis, &st);
	if (st.connects == 0) /* never reached Redis: say so, and what decided */
		fprintf(stderr, "Redis at %s:%d unreachable: %d of 1000 decisions took the LOCAL "
		        "fallback (this instance's share, 100/s)\n", rc.host, rc.port, fell_back);
	printf("admitted %d of 1000 (%d from leases) in %llu round trips\n", admitted, from_redis,
	       (unsigned long long)st.round_trips);
	sluice_redis_limit_free(api);
	sluice_redis_free(redis);
	/* a burst of 1000 at once: the burst (100) passes, plus what refills */
	return admitted >= 100 - 64 && admitted <= 1000 ? 0 : 1;
}
