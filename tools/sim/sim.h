/* SPDX-License-Identifier: MIT */
/*
 * sim.h - internals of sluice-sim, the traffic simulator (issue 6).
 *
 * The simulator drives the real limiters (through sluice/limiter.h: the
 * leaky shaper books with sluice_limiter_reserve) with a manual clock in virtual
 * time: every request sets the clock to its arrival time and asks the
 * limiter, exactly as a server would, so the numbers are the library's,
 * not a model's.  One concern per file, compiled into a small static
 * library that both the tool (tools/sluice-sim.c) and the unit tests
 * (tests/core/test_sim.c) link:
 *
 *   rng.c      xoshiro256** seeded by splitmix64: --seed makes runs repeat
 *   parse.c    numbers with units: durations, rates, ratios, counts
 *   traffic.c  the synthetic profiles, as generators of arrivals
 *   trace.c    trace files: parsing, with the line number of any error
 *   algo.c     --algo specifications -> limiters
 *   run.c      the event loop: arrivals, retries, releases, recording
 *   stats.c    the worst count in any interval (sort + two pointers)
 *   advise.c   the ring's bucket count for a tolerance, and alternatives
 *   output.c   the table, the CSV, the gnuplot script
 *
 * Nothing here is thread-safe or needs to be: one simulation is one
 * thread stepping one clock.  Functions that can fail take a caller's
 * buffer (err, errlen) and write one line saying what and where.
 */
#ifndef SLUICE_SIM_H
#define SLUICE_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sluice/sluice.h"

#define SIM_US 1000ULL
#define SIM_MS 1000000ULL
#define SIM_SEC 1000000000ULL

/* ---- rng.c ----------------------------------------------------------------- */

typedef struct sim_rng {
	uint64_t s[4];
} sim_rng_t;

/* sim_rng_seed - seed xoshiro256** from @seed through splitmix64. */
void sim_rng_seed(sim_rng_t *r, uint64_t seed);
uint64_t sim_rng_next(sim_rng_t *r);
/* sim_rng_unit - uniform in [0, 1), 53 bits. */
double sim_rng_unit(sim_rng_t *r);
/* sim_rng_below - uniform in [0, n), n >= 1 (unbiased, Lemire). */
uint64_t sim_rng_below(sim_rng_t *r, uint64_t n);
/*
 * sim_rng_exp_ns - exponential with mean @mean_ns, rounded to whole ns;
 * UINT64_MAX for any draw of 2^64 ns or more (later than every run's end).
 */
uint64_t sim_rng_exp_ns(sim_rng_t *r, double mean_ns);

/* ---- parse.c ----------------------------------------------------------------
 * Every parser takes the whole string (no trailing junk) and returns NULL on
 * success or a short reason ("not a number", "unknown unit 'h'") for the
 * caller to put after the option's name or the trace's line number.
 */

/* sim_parse_count - a decimal integer, no sign, no unit. */
const char *sim_parse_count(const char *s, uint64_t *out);
/*
 * sim_parse_duration - a duration in whole ns, in the grammar every front
 * end shares (sluice/parse.h: sluice_parse_duration): ns, us, ms, s, m,
 * min, h or d; a bare number is seconds ("1.5" = "1500ms").
 */
const char *sim_parse_duration(const char *s, uint64_t *ns);
/*
 * sim_parse_ratio - a fraction as @num / @den, exactly: "2%" = 2/100,
 * "0.5%" = 5/1000, "0.02" = 2/100.  Must be above 0.
 */
const char *sim_parse_ratio(const char *s, uint64_t *num, uint64_t *den);
/*
 * sim_parse_rate - a request rate as @num requests per @den ns: "200" (per
 * second), any rate of sluice/parse.h ("200/s", "5/ms", "10r/s", "1/m"),
 * or "2.5x" (2.5 times the limit's rate L / W).
 */
const char *sim_parse_rate(const char *s, uint64_t limit, uint64_t window_ns, uint64_t *num,
                           uint64_t *den);
/* sim_format_duration - "1 s", "50 ms", "2.5 ms", "980 ms", "7 ns". */
const char *sim_format_duration(uint64_t ns, char *buf, size_t len);

/* ---- traffic.c -------------------------------------------------------------- */

/* One request: @n permits at @t, for @key (0: no key). */
typedef struct sim_event {
	uint64_t t;
	uint32_t n;
	uint32_t key;
} sim_event_t;

typedef enum sim_profile {
	SIM_UNIFORM = 0,  /* one request every 1/rate                        */
	SIM_POISSON = 1,  /* exponential gaps with mean 1/rate                */
	SIM_BOUNDARY = 2, /* burst at edge - gap/2, burst at edge + gap/2,
	                   * then knocking at the rate                      */
	SIM_ONOFF = 3,    /* uniform at the rate for on_ns, silent for off_ns */
	SIM_RETRY = 4,    /* Poisson; the run adds retries (run.c)           */
	SIM_TRACE = 5,    /* a trace file's requests                         */
} sim_profile_t;

struct sim_trace;

typedef struct sim_traffic_config {
	sim_profile_t profile;
	uint64_t start_ns;    /* the run's timeline starts here              */
	uint64_t duration_ns; /* arrivals in [start, start + duration)        */
	uint64_t rate_num;    /* rate: rate_num requests per rate_den ns      */
	uint64_t rate_den;
	uint32_t permits;     /* n of every synthetic request                 */
	uint64_t seed;
	uint64_t burst;       /* boundary: requests in each burst             */
	uint64_t edge_ns;     /* boundary: the window edge, absolute          */
	uint64_t gap_ns;      /* boundary: time between the two bursts        */
	uint64_t on_ns;       /* on/off phases                                */
	uint64_t off_ns;
	const struct sim_trace *trace; /* SIM_TRACE                            */
} sim_traffic_config_t;

typedef struct sim_traffic {
	sim_traffic_config_t c;
	sim_rng_t rng;
	uint64_t k;      /* index of the next request (phase-local for on/off) */
	uint64_t phase;  /* on/off: start of the current on phase; boundary: step */
	uint64_t t;      /* poisson: time of the previous request             */
} sim_traffic_t;

/* sim_traffic_start - begin generating the requests @c describes. */
void sim_traffic_start(sim_traffic_t *g, const sim_traffic_config_t *c);
/*
 * sim_traffic_check - the configuration's own consistency, with 2^64 in
 * mind: the boundary's bursts inside [0, start + duration) with no wrap,
 * an on phase above 0, a rate above 0 where the profile needs one.
 * Return: 0; -1 with the option to blame in @err.  sim_run calls it.
 */
int sim_traffic_check(const sim_traffic_config_t *c, char *err, size_t errlen);
/* sim_traffic_next - the next request in time order: 1, or 0 when done. */
int sim_traffic_next(sim_traffic_t *g, sim_event_t *ev);
const char *sim_profile_name(sim_profile_t p);
/* sim_profile_parse - name -> profile; -1 when unknown. */
int sim_profile_parse(const char *name, sim_profile_t *p);

/* ---- trace.c ----------------------------------------------------------------
 * A trace has one request per line:   TIME [KEY [PERMITS]]
 * fields separated by spaces, tabs or commas.  TIME as sim_parse_duration
 * (bare = seconds, e.g. 1700000000.250 or 250ms); KEY any token, "-" for
 * none; PERMITS 1..2^32-1 (default 1).  '#' starts a comment; blank lines
 * are skipped.  Anything else is an error naming the file and line.  Lines
 * need not be in time order: the requests are sorted (stably).
 */

#define SIM_KEY_MAX 255

typedef struct sim_trace {
	sim_event_t *ev;
	size_t n, cap;
	char **keys;      /* keys[0] = "-" (no key), then in order of appearance */
	size_t nkeys, keycap;
	uint32_t *table;  /* open addressing: key id + 1, 0 = empty             */
	size_t tabsize;
	size_t unsorted;  /* lines that came before an earlier time             */
	size_t first_line, last_line; /* lines of the earliest and latest time  */
} sim_trace_t;

/*
 * sim_trace_read - parse @f (named @name in messages) into @t.
 * Return: 0, with at least one request; -1 with "NAME:LINE:COL: reason"
 * (or "NAME: no requests ...", "NAME:LINE: out of memory") in @err, and
 * nothing kept (@t is zeroed).
 */
int sim_trace_read(FILE *f, const char *name, sim_trace_t *t, char *err, size_t errlen);
/*
 * sim_trace_parse - the same parser on @len bytes at @buf (any bytes: NULs
 * are an error, the last line needs no newline).  Same return and messages
 * as sim_trace_read; this is what fuzz/fuzz_sim_trace.c drives.
 */
int sim_trace_parse(const char *buf, size_t len, const char *name, sim_trace_t *t, char *err,
                    size_t errlen);
/*
 * sim_trace_span - the run's start (the earliest time) and duration (up to
 * and including the latest time) for a parsed trace.
 * Return: 0; -1 when the trace holds both 0 and 2^64 - 1 ns, whose 2^64 ns
 * no duration can hold, with both lines named in @err.
 */
int sim_trace_span(const sim_trace_t *t, const char *name, uint64_t *start_ns,
                   uint64_t *duration_ns, char *err, size_t errlen);
/* sim_trace_load - open @path and sim_trace_read() it. */
int sim_trace_load(const char *path, sim_trace_t *t, char *err, size_t errlen);
void sim_trace_free(sim_trace_t *t);

/* ---- algo.c -------------------------------------------------------------- */

typedef struct sim_algo {
	char label[128];             /* the specification as given           */
	sluice_limiter_config_t cfg; /* clock: set per run                   */
	int shaper;                  /* leaky shaper: paced, admitted at its slot */
	uint64_t hold_ns;            /* inflight: each admission released after */
} sim_algo_t;

/*
 * sim_algo_parse - NAME[:KEY=VALUE,...] -> @a, defaults from the policy
 * (@limit per @window_ns).  Validated by building the limiter once.
 * Return: 0; -1 with the reason in @err.  sim_algo_help() lists them.
 */
int sim_algo_parse(const char *spec, uint64_t limit, uint64_t window_ns, sim_algo_t *a,
                   char *err, size_t errlen);
void sim_algo_help(FILE *f);
/*
 * sim_algo_late_ns - how long after its request an admission of @a can be
 * recorded: the shaper's max_delay_ns (it proceeds at its slot, which the
 * shaper keeps within that delay: leaky.h), else 0.
 */
uint64_t sim_algo_late_ns(const sim_algo_t *a);

/* A limiter built from a sim_algo_t, reading @clock. */
typedef struct sim_lim {
	sluice_limiter_t *h;
	int reserve; /* a leaky shaper: book (sluice_limiter_reserve), not acquire */
} sim_lim_t;

int sim_lim_new(const sim_algo_t *a, sluice_clock_t *clock, sim_lim_t *l);
/* sim_lim_take - ask for @n at the clock's reading: 1, 0 or SLUICE_E*. */
int sim_lim_take(sim_lim_t *l, uint64_t n, sluice_decision_t *d);
int sim_lim_release(sim_lim_t *l, uint64_t n);
void sim_lim_free(sim_lim_t *l);

/* ---- run.c ------------------------------------------------------------------ */

typedef struct sim_run_config {
	sim_traffic_config_t traffic;
	uint32_t retries;       /* a refused request is retried up to this often */
	uint64_t backoff_ns;    /* retry k (1, 2, ...) waits backoff * 2^(k-1)    */
	int jitter;             /* ... times a uniform draw in (0, 1] ("full")   */
	int honor_retry_after;  /* ... or retry_after_ns when that is longer      */
	int per_key;            /* one limiter per key instead of one for all     */
	uint64_t bin_ns;        /* width of the CSV's intervals, >= 1             */
	uint64_t max_events;    /* refuse runs with more requests than this       */
	uint64_t max_bins;      /* ... or needing more intervals (SIM_MAX_BINS)   */
} sim_run_config_t;

/* the tool's cap on a run's CSV intervals: 2 x 8 bytes each, per algorithm */
#define SIM_MAX_BINS 10000000ULL

typedef struct sim_result {
	uint64_t offered, admitted, rejected; /* requests, retries included     */
	uint64_t never;    /* refused for good: n above what can ever pass       */
	uint64_t clients;  /* first attempts                                     */
	uint64_t retried;  /* retry attempts sent                                */
	uint64_t gave_up;  /* refused on the last attempt                        */
	uint64_t cut;      /* retries that would come after the end of the run   */
	uint64_t keys;     /* limiters built (1, or the keys seen with per_key)  */
	sim_event_t *adm;  /* every admission (time, permits, key)               */
	size_t nadm, admcap;
	uint64_t *bin_offered, *bin_admitted; /* permits per bin from start_ns */
	size_t nbins;
} sim_result_t;

/*
 * sim_run - offer @rc's traffic to a fresh limiter built from @a, in virtual
 * time.  The admitted stream is in r->adm in admission order.
 * Return: 0; -1 with the reason in @err (r is then freed).
 */
int sim_run(const sim_run_config_t *rc, const sim_algo_t *a, sim_result_t *r, char *err,
            size_t errlen);
/*
 * sim_run_bins - the intervals of bin_ns a run of @a needs: its duration
 * plus sim_algo_late_ns(@a), rounded up, computed without wrapping
 * (UINT64_MAX stands for "more than any cap").  sim_run refuses a run
 * where this is above max_bins, before allocating anything.
 */
uint64_t sim_run_bins(const sim_run_config_t *rc, const sim_algo_t *a);
void sim_result_free(sim_result_t *r);

/* ---- stats.c ---------------------------------------------------------------- */

typedef struct sim_worst {
	uint64_t count;    /* most permits admitted in one interval           */
	uint64_t start_ns; /* where the first such interval starts (an admission) */
	uint32_t key;      /* ... for this key                                  */
} sim_worst_t;

/* sim_sort_events - sort by (key, t, n): the order sim_worst_in expects. */
void sim_sort_events(sim_event_t *ev, size_t n);
/*
 * sim_events_reserve - room in *@ev (*@cap events, @n of them used) for one
 * more: when full, doubles *@cap (to @first when 0) and reallocs *@ev.
 * Return: 0, or -1 when out of memory (*@ev and *@cap unchanged).
 */
int sim_events_reserve(sim_event_t **ev, size_t *cap, size_t n, size_t first);
/*
 * sim_worst_in - the most permits of @ev (sorted by sim_sort_events) whose
 * times fall in one half-open interval [s, s + len), over every s, per key.
 * Exact: the best interval can always start at an admission, so two
 * pointers over the sorted times see every candidate.  O(n).
 */
sim_worst_t sim_worst_in(const sim_event_t *ev, size_t n, uint64_t len);

/* ---- advise.c --------------------------------------------------------------- */

typedef enum sim_pick {
	SIM_PICK_RING = 0,
	SIM_PICK_LOG = 1,
	SIM_PICK_GCRA = 2,
} sim_pick_t;

typedef struct sim_advice {
	uint64_t limit, window_ns, tol_num, tol_den;
	uint64_t n_min;      /* ceil(tol_den / tol_num): L/N <= tolerance * L   */
	uint32_t buckets;    /* N: the smallest n >= n_min, <= 4096, dividing W; 0: none */
	const char *no_ring; /* why no ring fits (buckets = 0), else NULL       */
	uint64_t width_ns;   /* W / N                                           */
	uint64_t slots;      /* N rounded up to a power of two                  */
	uint64_t ring_bytes; /* sluice_window_size() + 8 * slots                */
	double overshoot;    /* L / N permits, uniform traffic                  */
	uint64_t adv_worst;  /* 2L                                              */
	uint64_t adv_span_ns;/* ... within W - W/N (plus a nanosecond)          */
	uint64_t log_bytes;  /* sluice_log_size() + 8 (L + 1); 0: L above the cap */
	uint64_t gcra_bytes; /* sluice_gcra_size()                              */
	uint64_t gcra_burst; /* max(1, floor(tolerance * L))                    */
	int clock_ok;        /* W/N >= the cached clock's default period        */
	sim_pick_t pick;
} sim_advice_t;

/*
 * sim_advise - the bucket count and the alternatives for @limit per
 * @window_ns within @num/@den of L.  Return: 0; -1 with the reason in @err.
 */
int sim_advise(uint64_t limit, uint64_t window_ns, uint64_t num, uint64_t den, sim_advice_t *a,
               char *err, size_t errlen);
/*
 * sim_advise_measure - offer Poisson traffic at @rho_num/@rho_den times L/W
 * to the advised ring (seed @seed) and return the worst count in any
 * interval of W in *@worst, over *@duration_ns of virtual time (60 W, or
 * less to stay within 2 * 10^6 requests).
 * Return: 0; 1 when no ring fits or the run would be under 5 W (not
 * measured); -1 with the reason in @err.
 */
int sim_advise_measure(const sim_advice_t *a, uint64_t rho_num, uint64_t rho_den, uint64_t seed,
                       uint64_t *worst, uint64_t *duration_ns, char *err, size_t errlen);
/* sim_advice_print - the advice; with @measure, also the measured check. */
void sim_advice_print(FILE *f, const sim_advice_t *a, int measure);

/* ---- output.c --------------------------------------------------------------- */

typedef struct sim_report {
	const char *title;     /* one line: profile and its parameters          */
	uint64_t limit, window_ns, short_ns, bin_ns, start_ns;
	uint64_t duration_ns;  /* the traffic's span from start_ns (the plot's axis) */
	size_t nalgo;
	const sim_algo_t *algos;
	const sim_result_t *results;
	const sim_worst_t *worst_w, *worst_s;
} sim_report_t;

/* sim_print_table - the per-algorithm table (see --help for the columns). */
void sim_print_table(FILE *f, const sim_report_t *rep);
/* sim_write_csv - one row per bin: t, then offered,admitted per algorithm. */
int sim_write_csv(const char *path, const sim_report_t *rep, char *err, size_t errlen);

typedef enum sim_plot_status {
	SIM_PLOT_DONE = 0,
	SIM_PLOT_NO_GNUPLOT = 1, /* not installed: the CSV and script are written */
	SIM_PLOT_FAILED = 2,
} sim_plot_status_t;

/*
 * sim_find_gnuplot - the gnuplot to run: $SLUICE_SIM_GNUPLOT when set (empty:
 * none, for tests), else "gnuplot" on $PATH.  Writes the path to @buf.
 * Return: 1 found, 0 not.
 */
int sim_find_gnuplot(char *buf, size_t len);
/*
 * sim_plot - write the gnuplot script for @csv next to @out (@out + ".gp")
 * and run gnuplot on it, making @out (.svg or .png).
 */
sim_plot_status_t sim_plot(const char *csv, const char *out, const sim_report_t *rep, char *err,
                           size_t errlen);

#endif /* SLUICE_SIM_H */
