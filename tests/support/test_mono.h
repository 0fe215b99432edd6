/* SPDX-License-Identifier: MIT */
/*
 * test_mono.h - real-time helpers for the programs that wait on real time
 * (the fork tests, the fork stress program, the clock benchmark): a reading
 * of a POSIX clock in ns, and a sleep that resumes after a signal.
 */
#ifndef SLUICE_TEST_MONO_H
#define SLUICE_TEST_MONO_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

/* @id's reading in ns (CLOCK_MONOTONIC, or a CPU-time clock). */
static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* Sleep @ns, the remainder again after each EINTR. */
static inline void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ULL),
		               .tv_nsec = (long)(ns % 1000000000ULL) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

#endif /* SLUICE_TEST_MONO_H */
