/* SPDX-License-Identifier: MIT */
/*
 * traffic.c - the synthetic traffic profiles, as generators.
 *
 * DESIGN: a profile is a generator that hands out one request at a time in
 * time order (sim_traffic_next), so a run of 10^7 requests needs no array
 * of 10^7 arrivals: the event loop (run.c) merges this stream with its own
 * retries and releases.  Regular arrivals are computed, not accumulated:
 * the k-th request of a uniform stream is at start + floor(k * den / num)
 * in 128-bit arithmetic, so a rate like 3 per second never drifts.  Poisson
 * gaps come from the generator's own xoshiro stream (rng.c), seeded from
 * --seed alone, so every algorithm of a run sees the same arrivals.
 * Times near 2^64 do not wrap: the end (start + duration, up to 2^64), the
 * k-th regular arrival and the on/off phases are computed in 128 bits, and
 * an arrival past 2^64 - 1 ends the stream (it is after every run's end),
 * never saturates to 2^64 - 1.
 */
#include <string.h>

#include "sim.h"

__extension__ typedef unsigned __int128 u128;

static const char *const names[] = {
	[SIM_UNIFORM] = "uniform", [SIM_POISSON] = "poisson", [SIM_BOUNDARY] = "boundary",
	[SIM_ONOFF] = "onoff",     [SIM_RETRY] = "retry",     [SIM_TRACE] = "trace",
};

const char *sim_profile_name(sim_profile_t p)
{
	return (unsigned)p < sizeof(names) / sizeof(names[0]) ? names[p] : "?";
}

int sim_profile_parse(const char *name, sim_profile_t *p)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(name, names[i]) == 0) {
			*p = (sim_profile_t)i;
			return 0;
		}
	}
	return -1;
}

void sim_traffic_start(sim_traffic_t *g, const sim_traffic_config_t *c)
{
	memset(g, 0, sizeof(*g));
	g->c = *c;
	sim_rng_seed(&g->rng, c->seed);
	g->t = c->start_ns;
	g->phase = c->profile == SIM_ONOFF ? c->start_ns : 0;
}

/* the k-th request (k = 0, 1, ...) of a regular stream that starts at t0 */
static u128 regular(const sim_traffic_t *g, uint64_t t0, uint64_t k)
{
	return t0 + (u128)k * g->c.rate_den / g->c.rate_num; /* < 2^129: no wrap */
}

int sim_traffic_next(sim_traffic_t *g, sim_event_t *ev)
{
	const sim_traffic_config_t *c = &g->c;
	u128 end = (u128)c->start_ns + c->duration_ns, t;
	ev->n = c->permits;
	ev->key = 0;
	switch (c->profile) {
	case SIM_TRACE:
		if (g->k >= c->trace->n)
			return 0;
		*ev = c->trace->ev[g->k++];
		return 1;
	case SIM_UNIFORM:
		if (c->rate_num == 0)
			return 0;
		t = regular(g, c->start_ns, g->k++);
		break;
	case SIM_POISSON:
	case SIM_RETRY:
		if (c->rate_num == 0)
			return 0;
		t = (u128)g->t + sim_rng_exp_ns(&g->rng, (double)c->rate_den / (double)c->rate_num);
		if (t >= end)
			return 0;
		g->t = (uint64_t)t; /* < end <= 2^64 */
		break;
	case SIM_BOUNDARY: {
		/* phase 0: the burst before the edge, 1: the one after it,
		 * 2: knocking at the rate after the second burst */
		/* sim_traffic_check: edge >= gap / 2, and second < end */
		uint64_t first = c->edge_ns - c->gap_ns / 2, second = first + c->gap_ns;
		while (g->phase < 2 && g->k >= c->burst) {
			g->phase++;
			g->k = 0;
		}
		if (g->phase == 0) {
			t = first;
			g->k++;
		} else if (g->phase == 1) {
			t = second;
			g->k++;
		} else {
			if (c->rate_num == 0)
				return 0;
			t = regular(g, second, ++g->k);
		}
		break;
	}
	case SIM_ONOFF:
		for (;;) {
			if (c->rate_num == 0 || g->phase >= end)
				return 0;
			t = regular(g, g->phase, g->k);
			if (t < (u128)g->phase + c->on_ns)
				break;
			u128 next = (u128)g->phase + c->on_ns + c->off_ns;
			if (next >= end)
				return 0; /* the next on phase starts after the run */
			g->phase = (uint64_t)next;
			g->k = 0;
		}
		g->k++;
		break;
	default:
		return 0;
	}
	if (t >= end)
		return 0;
	ev->t = (uint64_t)t; /* < end <= 2^64 */
	return 1;
}

int sim_traffic_check(const sim_traffic_config_t *c, char *err, size_t errlen)
{
	if (c->profile == SIM_BOUNDARY) {
		u128 first = (u128)c->edge_ns - c->gap_ns / 2, second = first + c->gap_ns;
		if (c->gap_ns / 2 > c->edge_ns) {
			snprintf(err, errlen, "--gap: the first burst would come before time 0 "
			                      "(edge - gap/2)");
			return -1;
		}
		if (second >= (u128)c->start_ns + c->duration_ns) {
			snprintf(err, errlen, "--duration: the run ends before the second burst "
			                      "(edge - gap/2 + gap)");
			return -1;
		}
	}
	if (c->profile == SIM_ONOFF && c->on_ns == 0) {
		snprintf(err, errlen, "--on: must be above 0");
		return -1;
	}
	if (c->profile != SIM_TRACE && c->profile != SIM_BOUNDARY && c->rate_num == 0) {
		snprintf(err, errlen, "--rate: must be above 0");
		return -1;
	}
	if (c->rate_num != 0 && c->rate_den == 0) {
		snprintf(err, errlen, "--rate: zero time per request");
		return -1;
	}
	return 0;
}
