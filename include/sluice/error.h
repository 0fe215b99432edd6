/* SPDX-License-Identifier: MIT */
/*
 * sluice/error.h - error codes.
 *
 * Every sluice function that can fail returns an int: 0 (or a positive
 * decision) on success, a SLUICE_E* code on failure.  The codes are
 * negative enum values (as libuv's), so a caller compares directly:
 * rc == SLUICE_ETOOBIG.  Invalid
 * configuration is rejected at init with the code that names what is wrong;
 * nothing is clamped silently.  The enum, sluice_strerror() and
 * sluice_err_name() are generated from one table so they cannot drift.
 */
#ifndef SLUICE_ERROR_H
#define SLUICE_ERROR_H

#include "common.h"

/* X(name, value, message); the enum value is -value */
#define SLUICE_ERRORS(X)                                                        \
	X(EINVAL, 1, "invalid argument (NULL pointer or zero permits)")        \
	X(ELIMIT, 2, "limit out of range (0, or above the algorithm's maximum)") \
	X(EBUCKETS, 3, "bucket count out of range (must be 1..4096)")          \
	X(EWINDOW, 4, "window is zero or not a whole number of ns per bucket") \
	X(ERESOLUTION, 5, "bucket narrower than the clock's resolution")       \
	X(ETOOBIG, 6, "permits requested exceed the limit: can never pass")    \
	X(ENOMEM, 7, "out of memory")                                          \
	X(ECLOCK, 8, "unknown clock or clock failure")                         \
	X(EMODE, 9, "unknown admission mode")                                  \
	X(ETHREAD, 10, "could not start the clock ticker thread")              \
	X(EPERIOD, 11, "ticker period out of range (1 us .. 1 s)")             \
	X(ECELLS, 12, "stripe cell count out of range (1..4096)")               \
	X(ERATE, 13, "rate out of range (zero, an interval under 1 ns, or whole-ns rounding off by > 0.1%)") \
	X(EBURST, 14, "burst out of range")                                     \
	X(EMEMORY, 15, "configuration needs more memory than the documented cap") \
	X(EWARMUP, 16, "warm-up period out of range")                           \
	X(EHALFLIFE, 17, "half-life out of range")                              \
	X(ECOUNT, 18, "composite needs 2..8 limiters")                          \
	X(EALGO, 19, "unknown algorithm, or one this call cannot use")                                    \
	X(ERELEASE, 20, "release without a matching acquire")                   \
	X(ETIMEDOUT, 21, "the wait would exceed the timeout; nothing was taken") \
	X(EDELAY, 22, "maximum queueing delay out of range")                    \
	X(ECANCEL, 23, "booking could not be cancelled exactly")               \
	X(ENOTSUP, 24, "operation not supported by this limiter kind")          \
	X(ETRUNC, 25, "output buffer too small; nothing usable was written")   \
	X(ELEASE, 26, "lease out of range (0..65536)")                         \
	X(EKEYLEN, 27, "key empty, or longer than the table's maximum key length") \
	X(EKEYFULL, 28, "no room for a new key in its probe group (policy reject)") \
	X(ELAYOUT, 29, "memory does not hold a keyed table of this version and layout") \
	X(EPOLICY, 30, "unknown full-table policy, or one this algorithm cannot use") \
	X(ESIZE, 31, "memory region too small or not aligned to 64 bytes")      \
	X(ECAPACITY, 32, "table capacity out of range")                         \
	X(ETIME, 33, "time beyond the range the table stores (2^62 ns)")        \
	X(EDUPLICATE, 34, "a composite lists the same limiter more than once")   \
	X(EBUSY, 35, "gave up after the retry bound: shared state kept changing; nothing was taken") \
	X(EEXPIRED, 36, "the decision is too old to give back: its window or booking no longer counts") \
	X(ESYNTAX, 37, "the value does not parse (sluice/parse.h says why and where)")

enum sluice_error {
#define SLUICE__ERR_ENUM(name, value, msg) SLUICE_##name = -(value),
	SLUICE_ERRORS(SLUICE__ERR_ENUM)
#undef SLUICE__ERR_ENUM
};

/*
 * sluice_strerror - human-readable message for an error code.
 * @err: a code returned by sluice (a SLUICE_E* value, negative).
 * Return: a static string; "unknown error" for values sluice does not define
 * (positive ones included), "success" for 0.  Thread-safe.
 */
SLUICE_API const char *sluice_strerror(int err);

/*
 * sluice_err_name - the code's symbolic name, e.g. "SLUICE_ELIMIT".
 * Return: a static string; "SLUICE_UNKNOWN" for unknown codes.  Thread-safe.
 */
SLUICE_API const char *sluice_err_name(int err);

#endif /* SLUICE_ERROR_H */
