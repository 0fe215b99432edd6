/* SPDX-License-Identifier: MIT */
/*
 * stats.c - the most permits admitted in any interval of a given length.
 *
 * DESIGN: exact, over every interval, not only the aligned ones a fixed
 * window or a ring would count: an interval [s, s + len) holding the most
 * admissions can be slid right until its last admission t sits at its
 * right end without losing any, so the candidates are the windows
 * (t - len, t] ending at each admission.  Sorted by time, a left pointer
 * that only moves forward finds each window's first admission: O(n) after
 * the sort, and no interval is missed.  Admissions are weighted by their
 * permits, and grouped by key (the worst key wins) when the run kept one
 * limiter per key.  Also the growth of the event arrays (traces and
 * admissions) that feed it.
 */
#include <stdlib.h>

#include "sim.h"

static int cmp_event(const void *pa, const void *pb)
{
	const sim_event_t *a = pa, *b = pb;
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return (a->n > b->n) - (a->n < b->n);
}

void sim_sort_events(sim_event_t *ev, size_t n)
{
	if (n > 1)
		qsort(ev, n, sizeof(*ev), cmp_event);
}

int sim_events_reserve(sim_event_t **ev, size_t *cap, size_t n, size_t first)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : first;
	sim_event_t *e = realloc(*ev, c * sizeof(*e));
	if (!e)
		return -1;
	*ev = e;
	*cap = c;
	return 0;
}

sim_worst_t sim_worst_in(const sim_event_t *ev, size_t n, uint64_t len)
{
	sim_worst_t w = { 0, 0, 0 };
	uint64_t sum = 0;
	size_t j = 0;
	if (len == 0)
		return w; /* an empty interval holds nothing */
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && ev[i].key != ev[i - 1].key) {
			j = i; /* a new key: its own intervals */
			sum = 0;
		}
		sum += ev[i].n;
		/* drop admissions at or before ev[i].t - len */
		while (ev[i].t - ev[j].t >= len)
			sum -= ev[j++].n;
		if (sum > w.count) {
			w.count = sum;
			w.start_ns = ev[j].t;
			w.key = ev[i].key;
		}
	}
	return w;
}
