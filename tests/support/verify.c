/* SPDX-License-Identifier: MIT */
/*
 * verify.c - the verifiers the stress programs and tests share (verify.h): aligned
 * windows (fixed window, ring), every interval of one length (sliding log),
 * and GCRA conformance (token bucket, leaky bucket).  Pure functions over a
 * stream sorted by time, so --self-test can feed them hand-made streams.
 *
 * Each returns the worst value the guarantee bounds, over EVERY window or
 * interval the statement speaks of, in one pass (two pointers or a running
 * minimum): a soak of 10^8 decisions must verify in seconds.
 */
#include "verify.h"

__extension__ typedef __int128 s128;

uint64_t stress_worst_aligned(const struct stress_rec *r, size_t n, uint64_t width_ns,
                              uint64_t buckets, uint64_t *epochs)
{
	/* [lo, hi] are the records whose epochs lie in the run of `buckets`
	 * epochs ending at hi's; runs that end in an epoch without admissions
	 * hold no more than the run ending at the last epoch that had some. */
	uint64_t worst = 0, sum = 0, ne = 0;
	size_t lo = 0;
	for (size_t hi = 0; hi < n; hi++) {
		uint64_t e = r[hi].t / width_ns;
		if (hi == 0 || e != r[hi - 1].t / width_ns)
			ne++;
		sum += r[hi].n;
		while (e - r[lo].t / width_ns >= buckets)
			sum -= r[lo++].n;
		if (sum > worst)
			worst = sum;
	}
	if (epochs)
		*epochs = ne;
	return worst;
}

uint64_t stress_worst_sliding(const struct stress_rec *r, size_t n, uint64_t window_ns)
{
	/* The fullest [s, s + W) can start at an admission time t_lo: it
	 * then holds exactly the records with t_lo <= t < t_lo + W, i.e. the
	 * [lo, hi] with t_hi - t_lo < W.  Half-open: times W apart never share
	 * an interval. */
	uint64_t worst = 0, sum = 0;
	size_t lo = 0;
	for (size_t hi = 0; hi < n; hi++) {
		sum += r[hi].n;
		while (r[hi].t - r[lo].t >= window_ns)
			sum -= r[lo++].n;
		if (sum > worst)
			worst = sum;
	}
	return worst;
}

uint64_t stress_worst_conform(const struct stress_rec *r, size_t n, uint64_t num, uint64_t den)
{
	if (n == 0)
		return 0;
	/* With T = num/den, interval [t_i, t_j] (i <= j in time order) holds
	 * S = P_j - P_(i-1) permits and
	 *     S - floor((t_j - t_i) / T) = ceil(E / num),
	 *     E = (P_j num - t_j den) - (P_(i-1) num - t_i den).
	 * Maximise E over i <= j with a running minimum of the second term.
	 * Equal times: the first record of a run of equal t has the smallest
	 * P_(i-1), so the minimum covers the whole run.  Times are taken from
	 * the first record (< 2^64) and scaled by den in 128 bits; permits sum
	 * to < 2^64 and num < 2^64: no overflow. */
	s128 p = 0, minv = 0, best = 0;
	for (size_t j = 0; j < n; j++) {
		s128 tj = (s128)(r[j].t - r[0].t) * (s128)den;
		s128 cand = p * (s128)num - tj; /* i = j */
		if (j == 0 || cand < minv)
			minv = cand;
		p += r[j].n;
		s128 e = p * (s128)num - tj - minv;
		if (e > best)
			best = e;
	}
	return (uint64_t)((best + (s128)num - 1) / (s128)num);
}

/*
 * The same sweeps as stress_worst_aligned() and stress_worst_sliding(), with
 * a bound that depends on time (set_limit: the largest limit in force).
 * The run (aligned) or interval (sliding) ending at each record, which is
 * then its newest, is checked against @bound at that record's time.
 */
static void changes_tally(struct stress_changes_check *c, uint64_t sum, uint64_t b)
{
	if (sum > b) {
		c->violations++;
		if (sum - b > c->excess || c->violations == 1) {
			c->excess = sum - b;
			c->sum = sum;
			c->bound = b;
		}
	} else if (!c->violations && sum * c->bound >= c->sum * b) {
		/* no violation yet: remember the fullest run relative to its bound */
		c->sum = sum;
		c->bound = b;
	}
	c->tight += sum == b;
}

void stress_check_aligned_changes(const struct stress_rec *r, size_t n, uint64_t width_ns,
                                  uint64_t buckets, stress_bound_fn bound, void *ctx,
                                  struct stress_changes_check *c)
{
	uint64_t sum = 0;
	size_t lo = 0;
	*c = (struct stress_changes_check){ 0 };
	for (size_t hi = 0; hi < n; hi++) {
		uint64_t e = r[hi].t / width_ns;
		sum += r[hi].n;
		while (e - r[lo].t / width_ns >= buckets)
			sum -= r[lo++].n;
		changes_tally(c, sum, bound(r[hi].t, ctx));
	}
}

void stress_check_sliding_changes(const struct stress_rec *r, size_t n, uint64_t window_ns,
                                  stress_bound_fn bound, void *ctx,
                                  struct stress_changes_check *c)
{
	/* The records in (t_hi - W, t_hi]: the interval [t_hi - W + 1, t_hi + 1)
	 * ending at hi, whose newest admission is hi's (or one at the same
	 * time, sorted after it: checked at its own turn). */
	uint64_t sum = 0;
	size_t lo = 0;
	*c = (struct stress_changes_check){ 0 };
	for (size_t hi = 0; hi < n; hi++) {
		sum += r[hi].n;
		while (r[hi].t - r[lo].t >= window_ns)
			sum -= r[lo++].n;
		changes_tally(c, sum, bound(r[hi].t, ctx));
	}
}

int stress_rec_cmp(const void *a, const void *b)
{
	const struct stress_rec *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return (x->n > y->n) - (x->n < y->n);
}
