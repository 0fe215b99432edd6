/* SPDX-License-Identifier: MIT */
/*
 * run.c - one simulation: a profile's requests against one algorithm, in
 * virtual time.
 *
 * DESIGN: a discrete-event loop over two sources, merged in time order:
 * the profile's generator (traffic.c: first attempts) and a binary heap of
 * events the run itself creates (retries of refused requests, and the
 * releases of a concurrency limiter's slots).  At equal times a release
 * comes first (a slot freed at t is free for a request at t), then first
 * attempts, then retries, each in creation order (a sequence number):
 * the order is total, so a run is a pure function of its configuration
 * and the seed.  Each event sets the one manual clock to its time and
 * calls the real limiter, which reads that clock: the simulator never
 * decides anything itself.  Every admission is recorded (time, permits,
 * key) for stats.c; per-bin permit counts go to the CSV.  A leaky shaper's
 * admission is recorded at its slot (now + delay_ns), when the
 * request actually proceeds.  The run ends at the end of the profile's
 * time span; retries that would come later are counted as cut.
 *
 * Times are full 64-bit ns and a trace may sit anywhere in them, up to
 * 2^64 - 1: the run's end (start + duration) can be 2^64, so it is
 * compared in 128 bits; a retry or a release that would come after 2^64 - 1
 * is past the end of every run (cut, or never released), not saturated to
 * 2^64 - 1, where it would act on a request that is really there.  The
 * per-bin counts are bounded by max_bins before anything is allocated,
 * counting the shaper's queue past the run's end (sim_run_bins), and every
 * later growth is checked against the same bound.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

enum { EV_RELEASE = 0, EV_ARRIVAL = 1, EV_RETRY = 2 }; /* order at equal times */

struct pending {
	uint64_t t, seq;
	uint32_t n, key, attempt, kind;
};

struct heap {
	struct pending *a;
	size_t n, cap;
};

static int before(const struct pending *x, const struct pending *y)
{
	if (x->t != y->t)
		return x->t < y->t;
	if (x->kind != y->kind)
		return x->kind < y->kind;
	return x->seq < y->seq;
}

static int heap_push(struct heap *h, struct pending p)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 256;
		struct pending *a = realloc(h->a, cap * sizeof(*a));
		if (!a)
			return -1;
		h->a = a;
		h->cap = cap;
	}
	size_t i = h->n++;
	while (i > 0 && before(&p, &h->a[(i - 1) / 2])) {
		h->a[i] = h->a[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->a[i] = p;
	return 0;
}

static struct pending heap_pop(struct heap *h)
{
	struct pending top = h->a[0], last = h->a[--h->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && before(&h->a[c + 1], &h->a[c]))
			c++;
		if (!before(&h->a[c], &last))
			break;
		h->a[i] = h->a[c];
		i = c;
	}
	if (h->n)
		h->a[i] = last;
	return top;
}

void sim_result_free(sim_result_t *r)
{
	if (!r)
		return;
	free(r->adm);
	free(r->bin_offered);
	free(r->bin_admitted);
	memset(r, 0, sizeof(*r));
}

__extension__ typedef unsigned __int128 u128;

uint64_t sim_run_bins(const sim_run_config_t *rc, const sim_algo_t *a)
{
	u128 span = (u128)rc->traffic.duration_ns + sim_algo_late_ns(a);
	u128 n = (span + rc->bin_ns - 1) / rc->bin_ns; /* bin_ns >= 1: no wrap in 128 bits */
	return n > UINT64_MAX ? UINT64_MAX : (uint64_t)n; /* a count compared with a cap */
}

/*
 * make bin @i exist (a shaper's slots lie past the run's end): 0, 1 when
 * that would pass @cap bins, -1 out of memory
 */
static int bins_reach(sim_result_t *r, uint64_t i, uint64_t cap)
{
	if (i < r->nbins)
		return 0;
	if (i >= cap)
		return 1;
	size_t n = (size_t)i + 1;
	uint64_t *o = realloc(r->bin_offered, n * sizeof(uint64_t));
	if (!o)
		return -1;
	r->bin_offered = o;
	uint64_t *a = realloc(r->bin_admitted, n * sizeof(uint64_t));
	if (!a)
		return -1;
	r->bin_admitted = a;
	memset(o + r->nbins, 0, (n - r->nbins) * sizeof(uint64_t));
	memset(a + r->nbins, 0, (n - r->nbins) * sizeof(uint64_t));
	r->nbins = n;
	return 0;
}

static int record(sim_result_t *r, uint64_t t, uint32_t n, uint32_t key)
{
	if (sim_events_reserve(&r->adm, &r->admcap, r->nadm, 4096) != 0)
		return -1;
	r->adm[r->nadm++] = (sim_event_t){ .t = t, .n = n, .key = key };
	return 0;
}

int sim_run(const sim_run_config_t *rc, const sim_algo_t *a, sim_result_t *r, char *err,
            size_t errlen)
{
	const sim_traffic_config_t *tc = &rc->traffic;
	memset(r, 0, sizeof(*r));
	char d1[32];
	if (sim_traffic_check(tc, err, errlen) != 0)
		return -1;
	if (rc->bin_ns == 0) {
		snprintf(err, errlen, "--bin: must be above 0");
		return -1;
	}
	uint64_t nbins = sim_run_bins(rc, a);
	if (nbins > rc->max_bins) {
		snprintf(err, errlen,
		         "--bin: %llu intervals of %s%s, more than %llu; use a wider --bin",
		         (unsigned long long)nbins,
		         sim_format_duration(rc->bin_ns, d1, sizeof(d1)),
		         sim_algo_late_ns(a) ? " (the run and the shaper's delay after it)" : "",
		         (unsigned long long)rc->max_bins);
		return -1;
	}
	/* 2^64 when a trace ends at 2^64 - 1: 128 bits */
	u128 end = (u128)tc->start_ns + tc->duration_ns;
	size_t nlim = rc->per_key && tc->profile == SIM_TRACE ? tc->trace->nkeys : 1;
	sim_lim_t *lims = calloc(nlim, sizeof(*lims));
	struct heap heap = { 0 };
	sluice_clock_t clock;
	sim_traffic_t gen;
	sim_rng_t jitter;
	int ok = -1;
	uint64_t seq = 0, events = 0;

	/* the run's own bins now; the shaper's later ones as they fill */
	uint64_t own = (uint64_t)(((u128)tc->duration_ns + rc->bin_ns - 1) / rc->bin_ns);
	if (!lims || bins_reach(r, own ? own - 1 : 0, rc->max_bins) != 0)
		goto nomem;

	sluice_clock_manual_init(&clock, tc->start_ns);
	sim_traffic_start(&gen, tc);
	/* retry jitter: its own stream, the same for every algorithm */
	sim_rng_seed(&jitter, tc->seed ^ 0x6a09e667f3bcc909ULL);
	sim_event_t base;
	int have_base = sim_traffic_next(&gen, &base);

	for (;;) {
		struct pending ev;
		struct pending b = { .t = have_base ? base.t : 0, .kind = EV_ARRIVAL };
		if (heap.n && (!have_base || before(&heap.a[0], &b))) {
			ev = heap_pop(&heap);
		} else if (have_base) {
			ev = (struct pending){ .t = base.t, .n = base.n, .key = base.key,
				               .kind = EV_ARRIVAL };
			have_base = sim_traffic_next(&gen, &base);
		} else {
			break;
		}
		if ((u128)ev.t >= end) {
			/* everything left is later still */
			r->cut += ev.kind == EV_RETRY;
			for (size_t i = 0; i < heap.n; i++)
				r->cut += heap.a[i].kind == EV_RETRY;
			break;
		}
		sluice_clock_manual_set(&clock, ev.t);
		uint32_t k = rc->per_key ? ev.key : 0;
		if (k >= nlim) {
			snprintf(err, errlen, "internal: key %u out of range", k);
			goto fail;
		}
		sim_lim_t *lim = &lims[k];
		if (!lim->h) {
			/* built at its key's first request: a warm-up limiter
			 * starts cold there, as a new key would in a server */
			int e = sim_lim_new(a, &clock, lim);
			if (e < 0) {
				snprintf(err, errlen, "%s: %s", a->label, sluice_strerror(e));
				goto fail;
			}
			r->keys++;
		}
		if (ev.kind == EV_RELEASE) {
			int e = sim_lim_release(lim, ev.n);
			if (e < 0) {
				snprintf(err, errlen, "%s: release: %s", a->label, sluice_strerror(e));
				goto fail;
			}
			continue;
		}
		if (++events > rc->max_events) {
			snprintf(err, errlen,
			         "more than %llu requests (--max-events): lower --rate or --duration",
			         (unsigned long long)rc->max_events);
			goto fail;
		}
		r->offered++;
		if (ev.attempt == 0)
			r->clients++;
		else
			r->retried++;
		/* ev.t in [start, end): inside the run's own bins */
		size_t bin = (size_t)((ev.t - tc->start_ns) / rc->bin_ns);
		r->bin_offered[bin] += ev.n;

		sluice_decision_t d;
		int got = sim_lim_take(lim, ev.n, &d);
		if (got == 1) {
			uint64_t at = ev.t;
			if (a->shaper) {
				/* proceeds at its slot, which must be a time */
				if (d.delay_ns > UINT64_MAX - ev.t) {
					snprintf(err, errlen,
					         "the shaper's slot for the request at %llu ns lies "
					         "past 2^64 - 1 ns",
					         (unsigned long long)ev.t);
					goto fail;
				}
				at += d.delay_ns;
			}
			r->admitted++;
			uint64_t ab = (at - tc->start_ns) / rc->bin_ns;
			if (record(r, at, ev.n, k) != 0)
				goto nomem;
			int grown = bins_reach(r, ab, rc->max_bins);
			if (grown < 0)
				goto nomem;
			if (grown > 0) {
				snprintf(err, errlen,
				         "--bin: the admission at %llu ns lands in interval %llu of "
				         "%s, past %llu; use a wider --bin",
				         (unsigned long long)at, (unsigned long long)ab,
				         sim_format_duration(rc->bin_ns, d1, sizeof(d1)),
				         (unsigned long long)rc->max_bins);
				goto fail;
			}
			r->bin_admitted[ab] += ev.n;
			/* a hold that ends after 2^64 - 1 ends after every request:
			 * the slot is never given back in this run */
			if (a->hold_ns && a->hold_ns <= UINT64_MAX - ev.t) {
				struct pending rel = { .t = ev.t + a->hold_ns, .seq = seq++,
					               .n = ev.n, .key = ev.key,
					               .kind = EV_RELEASE };
				if (heap_push(&heap, rel) != 0)
					goto nomem;
			}
			continue;
		}
		r->rejected++;
		if (got == SLUICE_ETOOBIG) {
			r->never++; /* can never pass: no client retries that */
			continue;
		}
		if (got < 0) {
			snprintf(err, errlen, "%s: %s", a->label, sluice_strerror(got));
			goto fail;
		}
		if (ev.attempt < rc->retries) {
			uint64_t delay = rc->backoff_ns;
			for (uint32_t i = 0; i < ev.attempt && delay < (1ULL << 62); i++)
				delay *= 2;
			if (rc->jitter)
				delay = 1 + sim_rng_below(&jitter, delay);
			if (rc->honor_retry_after && d.retry_after_ns != SLUICE_NEVER &&
			    d.retry_after_ns > delay)
				delay = d.retry_after_ns;
			if (delay > UINT64_MAX - ev.t) {
				r->cut++; /* after 2^64 - 1: after every run's end */
				continue;
			}
			struct pending retry = { .t = ev.t + delay, .seq = seq++, .n = ev.n,
				                 .key = ev.key, .attempt = ev.attempt + 1,
				                 .kind = EV_RETRY };
			if (heap_push(&heap, retry) != 0)
				goto nomem;
		} else if (rc->retries > 0) {
			r->gave_up++;
		}
	}
	ok = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	sim_result_free(r);
out:
	if (lims)
		for (size_t i = 0; i < nlim; i++)
			sim_lim_free(&lims[i]);
	free(lims);
	free(heap.a);
	return ok;
}
