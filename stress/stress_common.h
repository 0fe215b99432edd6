/* SPDX-License-Identifier: MIT */
/*
 * stress_common.h - what every stress program shares: options, the real
 * clocks, worker threads with pre-allocated record buffers, the merged
 * record stream, the result line and the self-test bookkeeping; the
 * verifiers that several algorithms use are tests/support/verify.h's.
 *
 * A stress program (stress_<module>.c) supplies one decision step, runs it
 * on --threads workers against one limiter for --seconds on a real clock,
 * then checks its header's GUARANTEE over everything the workers recorded.
 *
 * Hot loop rules (stress_harness.c): a worker calls the step in a loop; the
 * step decides once and, on an admission, appends (time, permits) to the
 * worker's own buffer, allocated before the threads start.  No allocation,
 * no lock, no shared write besides the limiter's own on that loop.  A full
 * buffer stops its worker and is reported (the run is then incomplete, exit
 * 2, unless it already shows a violation): nothing is dropped silently.
 *
 * Exit codes: 0 ok, 1 VIOLATION, 2 usage or setup error (or incomplete).
 */
#ifndef SLUICE_STRESS_COMMON_H
#define SLUICE_STRESS_COMMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/sluice.h"

/* struct stress_rec and the verifiers: tests/support/verify.h */
#include "verify.h"

#define STRESS_EXIT_OK 0
#define STRESS_EXIT_VIOLATION 1
#define STRESS_EXIT_USAGE 2

struct stress_buf {
	struct stress_rec *rec;
	size_t len, cap;
};

/* A composite records one stream per part; the others use stream 0. */
#define STRESS_STREAMS 2

/* One per thread, on cache lines of its own: the hot loop writes
 * decisions, rng and the buffers' lengths on every decision. */
struct stress_worker {
	_Alignas(SLUICE_CACHELINE) pthread_t tid;
	int id;
	uint64_t rng;       /* xorshift64 state, distinct per worker        */
	uint64_t decisions;
	struct stress_buf buf[STRESS_STREAMS];
	int full;           /* a buffer filled up: this worker stopped       */
	int err;            /* a negative return code that stopped it        */
	uint64_t stat[4];   /* per program (e.g. the in-flight maximum seen) */
};

/* One decision.  Return 0 to go on, non-zero to stop this worker (set
 * w->full or w->err first: stress_record() and stress_fail() do). */
typedef int (*stress_step_fn)(struct stress_worker *w);

struct stress_opts {
	const char *algo, *mode, *clock_name;
	const sluice_clock_t *clock;
	int threads;
	double seconds;
	int self_test;
	uint64_t pause_us;    /* 0: saturate; else sleep 0..2x this ...     */
	uint64_t pause_every; /* ... after one decision in this many        */
};

/*
 * stress_parse - parse --threads, --seconds, --clock, --pause-us,
 * --pause-every, --self-test and --help; every other --key=value goes to
 * @opt (return 0 when taken, -1 for an unknown key or a bad value).  Exits 2
 * with @usage on anything wrong.  Defaults: 2 threads, 1 s, cached clock,
 * no pauses.
 *
 * Pauses shape the load.  Saturating workers take a window's whole limit in
 * its first bucket, so a ring never sums more than one non-empty bucket and
 * a log's times come in clumps; with --pause-us=G a worker sleeps a random
 * 0..2G us after one decision in --pause-every (default 8), which spreads
 * admissions over a window when the offered load is near the limit.
 */
void stress_parse(int argc, char **argv, struct stress_opts *o, const char *usage,
                  int (*opt)(const char *key, const char *val));

/* Strict number parsing for --key=value options: 0, or -1 if not a number. */
int stress_u64(const char *v, uint64_t *out);

/* A program's numeric options: --key=value sets *val.  A table ends with a
 * NULL key; stress_u64_opts() is an `opt` for stress_parse() over it. */
struct stress_u64_opt {
	const char *key;
	uint64_t *val;
};
int stress_u64_opts(const struct stress_u64_opt *table, const char *key, const char *v);
int stress_f64(const char *v, double *out);

/* Exit 2 with a message: a bad parameter or a failed init. */
_Noreturn void stress_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* stress_check_init - exit 2 naming the error when @rc < 0. */
void stress_check_init(const char *what, int rc);

/* Start the cached clock's ticker if --clock=cached (before any limiter
 * init: warm-up and decay read the clock there); stop it after the run. */
void stress_clock_start(const struct stress_opts *o);
void stress_clock_stop(const struct stress_opts *o);

/* Requests ask for n = 1..STRESS_N_MAX permits, or fewer when the limiter's
 * largest request is smaller (stress_n_max). */
#define STRESS_N_MAX 3u
static inline uint64_t stress_n_max(uint64_t largest)
{
	return largest < STRESS_N_MAX ? largest : STRESS_N_MAX;
}

/* xorshift64: cheap per-worker randomness for n and hold times. */
static inline uint64_t stress_rand(struct stress_worker *w)
{
	uint64_t x = w->rng;
	x ^= x << 13, x ^= x >> 7, x ^= x << 17;
	return w->rng = x;
}

/* Append one admission to stream @s; 0 when the buffer is full (then
 * w->full is set and the step must return non-zero). */
static inline int stress_record(struct stress_worker *w, int s, uint64_t t, uint64_t n,
                                uint32_t aux)
{
	struct stress_buf *b = &w->buf[s];
	if (b->len == b->cap) {
		w->full = 1;
		return 0;
	}
	b->rec[b->len++] = (struct stress_rec){ t, (uint32_t)n, aux };
	return 1;
}

/* A negative return code from the limiter: stop and report it. */
static inline int stress_fail(struct stress_worker *w, int rc)
{
	w->err = rc;
	return 1;
}

/*
 * stress_run - run @step on o->threads workers until o->seconds pass.
 * @caps: records per stream per worker (0: stream unused).  Each worker may
 * alone make every admission of the run, so a cap is the most the
 * guarantee allows over the whole run (plus slack), not a share of it.
 * Return: the workers (joined; free with stress_free()).  Exits 2 when a
 * buffer cannot be allocated or a thread cannot start.
 */
struct stress_worker *stress_run(const struct stress_opts *o, stress_step_fn step,
                                 const size_t caps[STRESS_STREAMS]);
void stress_free(struct stress_worker *w, int threads);

/* stress_cap - records for @permits_bound permits over the run (n >= 1 each),
 * with slack; exits 2 above the memory a stress run may use. */
size_t stress_cap(double permits_bound);

/*
 * stress_merge - every worker's stream @s in one array sorted by (t, n).
 * Sets *total (records) and *permits; reports and counts workers that
 * stopped early (*incomplete) or on an error (exits 2).  Free the result.
 */
struct stress_rec *stress_merge(const struct stress_opts *o, struct stress_worker *w, int s,
                                size_t *total, uint64_t *permits, int *incomplete);
uint64_t stress_decisions(const struct stress_worker *w, int threads);

/*
 * stress_report - print the one result line and return the exit code.
 *   stress algo=A mode=M clock=C threads=T decisions=D admitted=P [extra]
 *          worst=W bound=B verdict=ok|VIOLATION
 * @extra: "" or " key=value ..." (leading space).  An incomplete run that
 * shows no violation exits 2: it proved nothing about what it did not record.
 */
int stress_report(const struct stress_opts *o, uint64_t decisions, uint64_t admitted,
                  const char *extra, const char *worst, const char *bound, int ok,
                  int incomplete);

/*
 * Self-tests (--self-test): each program feeds its verifier hand-made
 * streams, one that reaches the bound exactly and one that passes it by one
 * permit, and checks the verdicts.  stress_expect() logs a case on stderr
 * and counts failures; stress_self_report() prints the one line:
 *   selftest algo=A cases=C failed=F verdict=ok|FAILED
 */
struct stress_selftest {
	const char *algo;
	int cases, failed;
};
void stress_expect(struct stress_selftest *st, const char *name, int want_ok, int got_ok,
                   const char *detail);
int stress_self_report(const struct stress_selftest *st);

#endif /* SLUICE_STRESS_COMMON_H */
