/* SPDX-License-Identifier: MIT */
/*
 * test_sim_fleet.c - sluice-sim fleet (tools/sim/fleet.h) against the
 * bounds sluice/redis.h states, at fleet sizes no test can run for real:
 *
 *   leases_never_over_admit: no fault and a budget no reply outlasts (the
 *     fallback never decides): across 1 to 1,000 instances and lease_max
 *     1 to 256, no window admits more than L, and none that refused
 *     someone admits less than L - N x B (redis.h: under-admission at most
 *     instances x lease_max per window);
 *   the_fallback_is_one_limit_more: Redis paused for 3 windows, the LOCAL
 *     fallback decides: no window admits more than 2L (what Redis admitted
 *     before plus the shares, L / N each);
 *   a_restart_is_one_limit_more: Redis forgets its counts mid-window: at
 *     most 2L in that window, at most L in every other;
 *   cool_instances_cost_one_round_trip: instances asked far less often
 *     than a lease lives: at most one round trip per decision, and what
 *     lapses is only the grants whose reply outlived their window (about
 *     RTT / W of them: lease_policy.h), none when W is far longer;
 *   the_same_seed_is_the_same_run, and another seed is another run.
 * And the checks can fail: a fallback that decides (a budget shorter than
 * most round trips) over-admits, and the worst_over figure shows it.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "sim/fleet.h"
#include "sim/sim.h"

TestSuite(sim_fleet, .timeout = 120);

static sim_fleet_config_t base(uint32_t n, uint64_t b)
{
	return (sim_fleet_config_t){
		.instances = n, .rate = 15000, .limit = 10000, .window_ns = SIM_SEC,
		.lease_max = b, .budget_ns = 10 * SIM_SEC, .rtt_p50_ns = 250 * SIM_US,
		.rtt_p99_ns = SIM_MS, .service_ns = 10 * SIM_US, .duration_ns = 10 * SIM_SEC,
		.seed = 1,
	};
}

static sim_fleet_result_t run(const sim_fleet_config_t *c)
{
	sim_fleet_result_t r;
	char err[256];
	cr_assert_eq(sim_fleet_run(c, &r, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_gt(r.decisions, 0);
	return r;
}

Test(sim_fleet, leases_never_over_admit)
{
	const uint32_t ns[] = { 1, 4, 100, 1000 };
	const uint64_t bs[] = { 1, 16, 256 };
	for (size_t i = 0; i < 4; i++)
		for (size_t j = 0; j < 3; j++) {
			sim_fleet_config_t c = base(ns[i], bs[j]);
			/* one call in flight per instance, each granting at most
			 * B: a fleet whose N x B per round trip cannot carry the
			 * offered rate queues without end (sizing, docs/redis.md),
			 * and its waiters outlive any budget */
			if ((double)ns[i] * (double)bs[j] * 1e9 / (double)c.rtt_p50_ns < 2 * c.rate)
				continue;
			sim_fleet_result_t r = run(&c);
			cr_expect_eq(r.fallback_admits + r.fallback_refusals, 0,
			             "N %u B %llu: the fallback decided", ns[i],
			             (unsigned long long)bs[j]);
			cr_expect_eq(r.worst_over, 0, "N %u B %llu: a window %llu over", ns[i],
			             (unsigned long long)bs[j], (unsigned long long)r.worst_over);
			cr_expect_leq(r.worst_under, ns[i] * bs[j],
			              "N %u B %llu: a window %llu under, bound %llu", ns[i],
			              (unsigned long long)bs[j], (unsigned long long)r.worst_under,
			              (unsigned long long)(ns[i] * bs[j]));
			cr_expect_gt(r.remote_refusals + r.cache_refusals, 0,
			             "offered 1.5 L: someone is refused");
		}
}

Test(sim_fleet, the_fallback_is_one_limit_more)
{
	for (uint32_t n = 1; n <= 1000; n *= 10) {
		sim_fleet_config_t c = base(n, 16);
		c.budget_ns = SIM_MS;
		c.fault = SIM_FLEET_PAUSE;
		c.fault_at_ns = 3 * SIM_SEC + 500 * SIM_MS;
		c.fault_for_ns = 3 * SIM_SEC;
		sim_fleet_result_t r = run(&c);
		cr_expect_gt(r.fallback_admits, 0, "N %u: the pause was never felt", n);
		cr_expect_leq(r.worst_over, c.limit, "N %u: %llu over in a window", n,
		              (unsigned long long)r.worst_over);
	}
}

Test(sim_fleet, a_restart_is_one_limit_more)
{
	sim_fleet_config_t c = base(4, 16);
	c.fault = SIM_FLEET_RESTART;
	c.fault_at_ns = 5 * SIM_SEC + 500 * SIM_MS;
	sim_fleet_result_t r = run(&c);
	cr_expect_gt(r.worst_over, 0, "the restart forgot nothing");
	cr_expect_leq(r.worst_over, c.limit);
	/* and the same run without the restart */
	c.fault = SIM_FLEET_NONE;
	cr_expect_eq(run(&c).worst_over, 0);
}

/* instances asked far less often than once a window (each about every
 * @every_s seconds) on windows of @window_ns */
static void cool(uint64_t window_ns, double every_s)
{
	sim_fleet_config_t c = base(100, 4096);
	c.rate = 100 / every_s;
	c.window_ns = window_ns;
	c.duration_ns = (uint64_t)(every_s * 20) * SIM_SEC;
	sim_fleet_result_t r = run(&c);
	cr_log_info("cool, W %llu ms: %llu decisions, %llu round trips, %llu lapsed\n",
	            (unsigned long long)(window_ns / SIM_MS), (unsigned long long)r.decisions,
	            (unsigned long long)r.round_trips, (unsigned long long)r.lapsed);
	/* lease_policy.h: what lapses is a grant whose reply comes back after
	 * its window ended (a call sent within a round trip of the end:
	 * about RTT / W of them) and the second permit of a key asked twice
	 * in one window (HOT: B doubles once; Poisson arrivals do that a
	 * share lambda x W of the time); each lapse costs its decision one
	 * more round trip at most.  Twice both shares is the bound checked. */
	double lambda_w = every_s > 0 ? (double)window_ns / 1e9 / every_s : 0;
	double share = 2.0 * ((double)c.rtt_p99_ns / (double)c.window_ns + lambda_w);
	cr_expect_leq((double)r.lapsed, share * (double)r.round_trips,
	              "%llu permits lapsed of %llu round trips", (unsigned long long)r.lapsed,
	              (unsigned long long)r.round_trips);
	cr_expect_leq(r.round_trips, r.decisions + r.lapsed,
	              "%llu round trips for %llu decisions and %llu lapsed",
	              (unsigned long long)r.round_trips, (unsigned long long)r.decisions,
	              (unsigned long long)r.lapsed);
}

Test(sim_fleet, cool_instances_cost_one_round_trip)
{
	cool(10 * SIM_MS, 1);
	cool(SIM_SEC, 10);
}

Test(sim_fleet, the_same_seed_is_the_same_run)
{
	sim_fleet_config_t c = base(10, 16);
	c.budget_ns = 500 * SIM_US;
	sim_fleet_result_t a = run(&c), b = run(&c);
	cr_expect_eq(memcmp(&a, &b, sizeof(a)), 0);
	c.seed = 2;
	sim_fleet_result_t d = run(&c);
	cr_expect(d.decisions != a.decisions || d.round_trips != a.round_trips);
}

Test(sim_fleet, a_deciding_fallback_over_admits)
{
	/* the checker's own test: a budget below most round trips makes the
	 * LOCAL fallback decide beside Redis, and the windows show it */
	sim_fleet_config_t c = base(4, 1);
	c.budget_ns = 100 * SIM_US;
	sim_fleet_result_t r = run(&c);
	cr_expect_gt(r.fallback_admits, 0);
	cr_expect_gt(r.worst_over, 0, "over-admission not seen");
}

Test(sim_fleet, bad_configurations_are_named)
{
	char err[256];
	sim_fleet_result_t r;
	sim_fleet_config_t c = base(1001, 16);
	cr_expect_eq(sim_fleet_run(&c, &r, NULL, err, sizeof(err)), -1);
	cr_expect(strstr(err, "--instances"), "%s", err);
	c = base(4, 0);
	cr_expect_eq(sim_fleet_run(&c, &r, NULL, err, sizeof(err)), -1);
	cr_expect(strstr(err, "--lease-max"), "%s", err);
	c = base(4, 16);
	c.rtt_p99_ns = c.rtt_p50_ns - 1;
	cr_expect_eq(sim_fleet_run(&c, &r, NULL, err, sizeof(err)), -1);
	cr_expect(strstr(err, "--rtt"), "%s", err);
}
