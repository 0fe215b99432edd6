/* SPDX-License-Identifier: MIT */
/*
 * sluice/parse.h - the one grammar for what a user writes: durations,
 * rates, sizes and algorithm names, and a formatter for each.
 *
 * Every front end (the rules file, the nginx directives, sluice-sim) reads
 * these values through these functions and nowhere else, so a spelling one
 * accepts, all accept, and a bad value gives the same message everywhere;
 * each front end adds only its own context (file:line:col, nginx's
 * "in FILE:LINE").
 *
 * GRAMMAR (exact: no value is rounded, none is clamped):
 *   number    digits, with at most one '.' and decimals after it: 250, 1.5, 0.25
 *   unit      ns | us | ms | s | m | min | h | d    (m and min are minutes)
 *   duration  number [unit]: 250ms, 1.5s, 1m, 2h, 100us; a bare number is
 *             seconds, as nginx reads its times (30 is 30s).  The value must
 *             be a whole number of ns (1.5ns is refused) and fit 64 bits.
 *   rate      number ['r'] '/' (unit | duration): 10/s, 10r/s, 0.5r/s, 30r/m,
 *             1/h, 3r/ms, 5/250ms, 1.5/s, 10/5 (per 5 s).  It lands as sluice's own pair,
 *             rate permits per period_ns, with the number's decimals folded
 *             into the period and the fraction reduced: 10/s is 10 per 1 s,
 *             0.5r/s is 1 per 2 s, 2500.25r/s is 10001 per 4 s, 5/250ms is 5
 *             per 250 ms.  The rate must be positive.
 *   fraction  number ['%']: an exact ratio, reduced: 2.5 is 5/2, 0.02 and 2% are
 *             1/50, 0.5% is 1/200 (tolerances, multiples, error ratios).
 *   size      digits [suffix]: bytes (no suffix, or B), or the binary multiples
 *             k K KiB, m M MiB, g G GiB, t T TiB (nginx's letters and the IEC
 *             names): 4096, 512B, 64k, 10m, 2MiB, 1g.
 *   algorithm a name of sluice_algo_t (fixed, window, gcra, leaky, log,
 *             warmup, decay, inflight) or one of its aliases
 *             (SLUICE_ALGO_ALIASES below: token_bucket = gcra, ...).
 * Nothing else: no sign, no exponent, no spaces, no hex; lower-case units
 * and names only (sizes take either case, as nginx's).
 *
 * Each parser takes the text as (s, len) (not NUL-terminated: a YAML scalar
 * or an ngx_str_t) and returns 0 with the value, or SLUICE_ESYNTAX with
 * @err filled (when not NULL): a static message naming what is wrong, and
 * the offset in s where it was found.  The value is not written on error.
 * Each formatter writes a text its parser reads back as the same value (a
 * whole number in the largest unit that holds the value whole: "1500ms",
 * not "1.5s"; tests/core/test_parse.c and fuzz_parse check the round trip),
 * NUL-terminated, and returns its length, or SLUICE_ETRUNC when @len
 * is too small (nothing usable written).  All are pure functions: no
 * allocation, no locale, thread-safe.
 */
#ifndef SLUICE_PARSE_H
#define SLUICE_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* What a parser found wrong: @message is static, @offset indexes s. */
typedef struct sluice_parse_error {
	const char *message;
	size_t offset;
} sluice_parse_error_t;

/*
 * The aliases every front end accepts beside sluice_algo_t's own names, as
 * X(ALGO, alias).  The first names of the rules file and the shorter names
 * of sluice-sim, in one table.
 */
#define SLUICE_ALGO_ALIASES(X)          \
	X(FIXED, fixed_window)          \
	X(WINDOW, sliding_window)       \
	X(WINDOW, ring)                 \
	X(GCRA, token_bucket)           \
	X(LEAKY, leaky_bucket)          \
	X(LOG, sliding_log)             \
	X(INFLIGHT, concurrency)

/* Buffer sizes that every formatter's output fits in (NUL included). */
#define SLUICE_DURATION_STRLEN 24 /* "18446744073709551615ns" */
#define SLUICE_RATE_STRLEN 48     /* "<rate>/<duration>" */
#define SLUICE_SIZE_STRLEN 24

/*
 * sluice_parse_duration - a duration in ns, e.g. "250ms", "1.5s", "1m".
 * Return: 0 and *@ns; SLUICE_ESYNTAX (with @err) for anything else, and
 * SLUICE_EINVAL when @s or @ns is NULL.
 */
SLUICE_API int sluice_parse_duration(const char *s, size_t len, uint64_t *ns,
                                     sluice_parse_error_t *err);

/*
 * sluice_parse_rate - a rate as @rate permits per @period_ns, e.g. "10/s",
 * "10r/s", "0.5r/s", "5/250ms".  Both are at least 1.
 * Return: 0; SLUICE_ESYNTAX (with @err); SLUICE_EINVAL for a NULL pointer.
 */
SLUICE_API int sluice_parse_rate(const char *s, size_t len, uint64_t *rate, uint64_t *period_ns,
                                 sluice_parse_error_t *err);

/*
 * sluice_parse_fraction - a decimal number or percentage as the reduced
 * fraction @num / @den (@den >= 1; 0 is 0/1), e.g. "2.5", "0.02", "2%".
 * Return: 0; SLUICE_ESYNTAX (with @err); SLUICE_EINVAL for a NULL pointer.
 */
SLUICE_API int sluice_parse_fraction(const char *s, size_t len, uint64_t *num, uint64_t *den,
                                     sluice_parse_error_t *err);

/*
 * sluice_parse_size - a size in bytes, e.g. "4096", "64k", "10m", "1g".
 * Return: 0; SLUICE_ESYNTAX (with @err); SLUICE_EINVAL for a NULL pointer.
 */
SLUICE_API int sluice_parse_size(const char *s, size_t len, uint64_t *bytes,
                                 sluice_parse_error_t *err);

/*
 * sluice_parse_algo - an algorithm by its name or an alias, e.g. "gcra",
 * "token_bucket", "sliding_window".
 * Return: 0 and *@algo; SLUICE_ESYNTAX (with @err, whose message lists the
 * names); SLUICE_EINVAL for a NULL pointer.
 */
SLUICE_API int sluice_parse_algo(const char *s, size_t len, sluice_algo_t *algo,
                                 sluice_parse_error_t *err);

/*
 * sluice_algo_name - the canonical name of @algo ("gcra", ...), the one
 * sluice_parse_algo() reads back; NULL for a value that names none of the
 * algorithms (NONE and the handle-only kinds included).
 */
SLUICE_API const char *sluice_algo_name(sluice_algo_t algo);

/* sluice_format_duration - @ns in the largest unit that holds it whole:
 * "1500ms", "1m", "250us", "7ns", "0ns". */
SLUICE_API int sluice_format_duration(uint64_t ns, char *buf, size_t len);

/* sluice_format_rate - "<rate>/<unit>" when the period is one unit ("50/s",
 * "30/m"), else "<rate>/<duration>" ("1/2s", "5/250ms").  @rate and
 * @period_ns at least 1 (else SLUICE_EINVAL). */
SLUICE_API int sluice_format_rate(uint64_t rate, uint64_t period_ns, char *buf, size_t len);

/* sluice_format_size - @bytes in the largest of t, g, m, k that holds it
 * whole, else bare bytes: "10m", "64k", "4097". */
SLUICE_API int sluice_format_size(uint64_t bytes, char *buf, size_t len);

#endif /* SLUICE_PARSE_H */
