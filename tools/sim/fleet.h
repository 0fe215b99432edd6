/* SPDX-License-Identifier: MIT */
/*
 * fleet.h - sluice-sim fleet: N instances of libsluice-redis sharing one
 * fixed-window limit of L per W on one Redis, simulated exactly in virtual
 * time (tools/sim/fleet.c says how).
 *
 * What is the library's and what is a model:
 *   - the lease policy is the library's own code: redis/lease_policy.c is
 *     compiled in (how large a lease to ask for, when to prefetch, when B
 *     halves), so a change to the policy changes the simulation;
 *   - the decision and I/O protocol around it (a lease spent locally, one
 *     request in flight per instance, the over-limit cache, the budget and
 *     the LOCAL fallback's share L / N per window) and the fixed-window
 *     script are modelled from redis/limit.c, lease.c and fixed.lua;
 *   - the network is a lognormal round trip given by its p50 and p99, split
 *     evenly between the two directions; Redis is one FIFO server taking
 *     service_ns per call (its capacity 1 / service_ns);
 *   - no breaker (every decision waits its budget while Redis is away), no
 *     I/O thread delay, no clock skew, one permit per decision.
 */
#ifndef SLUICE_SIM_FLEET_H
#define SLUICE_SIM_FLEET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum sim_fleet_fault {
	SIM_FLEET_NONE = 0,
	SIM_FLEET_PAUSE,   /* Redis serves nothing in [at, at + for) */
	SIM_FLEET_RESTART, /* Redis forgets every count at at (no persistence) */
} sim_fleet_fault_t;

typedef struct sim_fleet_config {
	uint32_t instances;     /* 1..SIM_FLEET_MAX                          */
	double rate;            /* offered requests per second, all together */
	double skew;            /* instance i's share ~ 1 / (i + 1)^skew; 0: equal */
	uint64_t limit;         /* L per window                              */
	uint64_t window_ns;     /* W                                         */
	uint64_t lease_max;     /* B's ceiling (1..65536)                    */
	uint64_t budget_ns;     /* a decision's wait for Redis               */
	uint64_t rtt_p50_ns, rtt_p99_ns; /* the round trip's lognormal       */
	uint64_t service_ns;    /* Redis's time per call                     */
	uint64_t duration_ns;   /* virtual time simulated                    */
	uint64_t seed;
	sim_fleet_fault_t fault;
	uint64_t fault_at_ns, fault_for_ns;
} sim_fleet_config_t;

#define SIM_FLEET_MAX 1000

typedef struct sim_fleet_result {
	uint64_t decisions, admitted, lease_admits, fallback_admits;
	uint64_t remote_refusals, cache_refusals, fallback_refusals;
	uint64_t round_trips, lapsed;
	uint64_t windows;            /* whole windows judged                 */
	uint64_t worst_over;         /* max over windows of admitted - L     */
	uint64_t worst_under;        /* max over windows that refused someone
	                              * of L - admitted                      */
	double mean_admitted;        /* per window                           */
	uint64_t p50_ns, p99_ns;     /* decision latency, every decision     */
	uint64_t worst_p99_ns;       /* the worst instance's p99             */
} sim_fleet_result_t;

/* @c's own consistency; 0, or -1 with the option to blame in @err */
int sim_fleet_check(const sim_fleet_config_t *c, char *err, size_t errlen);
/* simulate @c into @out; per window "window,admitted,limit" lines to @csv
 * when not NULL; 0, or -1 (out of memory, or @c refused) with @err */
int sim_fleet_run(const sim_fleet_config_t *c, sim_fleet_result_t *out, FILE *csv, char *err,
                  size_t errlen);

#endif
