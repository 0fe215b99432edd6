/* SPDX-License-Identifier: MIT */
/*
 * recorder.h - the merge step of the threaded record-and-verify tests.
 * Each decider thread appends its admissions to a buffer of its own,
 * allocated before the threads start (d[i].rec, d[i].nrec records of at
 * most @cap), and counts its refusals (d[i].refused); after the join,
 * REC_MERGE checks that no buffer filled (a full one would have dropped
 * records), sums the refusals into *@refused_out and returns every record in
 * one malloc'd array, sorted by @cmp (NULL: in thread order), its length in
 * *@total_out.  The verifier that reads the array stays the test's own.
 * Criterion assertions: use it inside a test.
 */
#ifndef SLUICE_TEST_RECORDER_H
#define SLUICE_TEST_RECORDER_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REC_MERGE(d, nthreads, cap, cmp, total_out, refused_out)                                      \
	__extension__({                                                                       \
		size_t rm_total_ = 0;                                                         \
		*(refused_out) = 0;                                                               \
		for (int rm_i_ = 0; rm_i_ < (nthreads); rm_i_++) {                            \
			cr_assert_lt((d)[rm_i_].nrec, (cap), "record buffer overflowed");     \
			rm_total_ += (d)[rm_i_].nrec;                                         \
			*(refused_out) += (d)[rm_i_].refused;                                     \
		}                                                                             \
		__typeof__((d)[0].rec) rm_all_ = malloc(sizeof(*rm_all_) * (rm_total_ + 1)); \
		cr_assert_not_null(rm_all_);                                                  \
		size_t rm_k_ = 0;                                                             \
		for (int rm_i_ = 0; rm_i_ < (nthreads); rm_i_++) {                            \
			memcpy(rm_all_ + rm_k_, (d)[rm_i_].rec,                               \
			       sizeof(*rm_all_) * (d)[rm_i_].nrec);                           \
			rm_k_ += (d)[rm_i_].nrec;                                             \
		}                                                                             \
		int (*rm_cmp_)(const void *, const void *) = (cmp);                           \
		if (rm_cmp_)                                                                  \
			qsort(rm_all_, rm_total_, sizeof(*rm_all_), rm_cmp_);                 \
		*(total_out) = rm_total_;                                                         \
		rm_all_;                                                                      \
	})

#endif /* SLUICE_TEST_RECORDER_H */
