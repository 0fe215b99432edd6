/* SPDX-License-Identifier: MIT */
/*
 * verify.h - the one set of admission-stream verifiers (verify.c), for the
 * stress programs (stress/, each with its --self-test showing its checker
 * can fail) and the tests that record admissions on a manual clock
 * (tests/core/test_change_gcra.c): an admission record, its time order,
 * aligned windows, every interval of a length, GCRA conformance, and the
 * same with a bound that changes over time.
 */
#ifndef SLUICE_TEST_VERIFY_H
#define SLUICE_TEST_VERIFY_H

#include <stddef.h>
#include <stdint.h>

/* One admission: the time the guarantee is stated on (usually the
 * decision's now_ns) and its permits.  aux: per program (e.g. a booking's
 * cost).  16 bytes, so a buffer of a million admissions is 16 MiB. */
struct stress_rec {
	uint64_t t;
	uint32_t n;
	uint32_t aux;
};

/*
 * Verifiers over a stream sorted by time (verify.c).  Each returns
 * the worst value the statement bounds, so the caller compares it with the
 * bound and prints both.
 */

/* Permits in the worst run of @buckets consecutive epochs (epoch = t /
 * @width_ns): the fixed window (buckets = 1) and the ring.  *@epochs: how
 * many distinct epochs saw admissions. */
uint64_t stress_worst_aligned(const struct stress_rec *r, size_t n, uint64_t width_ns,
                              uint64_t buckets, uint64_t *epochs);

/* Permits in the worst interval [s, s + @window_ns), any s: the sliding log. */
uint64_t stress_worst_sliding(const struct stress_rec *r, size_t n, uint64_t window_ns);

/*
 * Conformance (GCRA, leaky bucket): the largest over all intervals [a, b]
 * of  permits admitted at a time inside it - floor((b - a) / T),  with the
 * emission interval T = @num / @den ns.  The header's "at most burst +
 * t / T in any interval of length t" is exactly "this is <= burst" (the
 * permits are whole, so b + t/T and b + floor(t/T) bound them alike).
 * O(n): with prefix sums P, the interval [t_i, t_j] holds P_j - P_(i-1)
 * permits, and (P_j - P_(i-1)) num - (t_j - t_i) den, maximised over i <= j,
 * is one pass keeping the minimum of P_(i-1) num - t_i den.  128-bit.
 */
uint64_t stress_worst_conform(const struct stress_rec *r, size_t n, uint64_t num, uint64_t den);

/* qsort comparator for stress_rec: by t, then n. */
int stress_rec_cmp(const void *a, const void *b);

/*
 * Verifiers with a bound that changes over time (stress_set_limit.c): every
 * run of @buckets epochs, or every interval of @window_ns, is checked
 * against @bound(t, @ctx) at its newest admission's time t.  Appended for
 * issue 22.  @c: violations (runs over their bound), the largest excess
 * with its sum and bound (or, with none, the fullest run and its bound),
 * and how many runs reached their bound exactly.
 */
typedef uint64_t (*stress_bound_fn)(uint64_t t, void *ctx);
struct stress_changes_check {
	uint64_t violations, excess, sum, bound, tight;
};
void stress_check_aligned_changes(const struct stress_rec *r, size_t n, uint64_t width_ns,
                                  uint64_t buckets, stress_bound_fn bound, void *ctx,
                                  struct stress_changes_check *c);
void stress_check_sliding_changes(const struct stress_rec *r, size_t n, uint64_t window_ns,
                                  stress_bound_fn bound, void *ctx,
                                  struct stress_changes_check *c);

#endif /* SLUICE_TEST_VERIFY_H */
