/* SPDX-License-Identifier: MIT */
/*
 * rules/metrics_internal.h - per-rule metrics of the rules engine and
 * their Prometheus text exposition (format 0.0.4).  Internal to
 * libsluice-rules: the engine owns one sluice__metrics_t per rule and one
 * sluice__metrics_engine_t, records into them on decide and complete, and
 * renders them with sluice__metrics_write() behind sluice_engine_metrics().
 *
 * GUARANTEE (any number of threads)
 *   - Recording (sluice__metrics_count, _observe, _complete) is lock-free,
 *     wait-free and allocation-free: a count is one relaxed fetch_add on
 *     a sluice_stripe_t cell of the calling CPU (SLUICE_STRIPE_BY_CPU), an
 *     observation two (bucket, sum) after a binary search over the fixed
 *     bounds, a completion those two and one more for a failure.  No
 *     recorded event is ever lost (sluice/stripe.h).
 *   - A write while no thread records renders every counter, every bucket,
 *     _sum and _count exactly.  A write concurrent with recording reads
 *     each cell once: every value it prints lies between the value when the
 *     write began and the value when it returned, so successive writes never
 *     see a counter go down.  Within one histogram the buckets are
 *     cumulative and _count equals the +Inf bucket by construction (both
 *     come from the same reads); _sum is read separately and may include an
 *     observation that the buckets do not yet show, or the reverse.
 *     Counters of different families are not a snapshot of one instant:
 *     requests (passed + refused, read for that line) may be read before
 *     the passed line's read, and differ from their sum by what was
 *     recorded in between.
 *   - The writer allocates nothing: it formats into a buffer on its own
 *     stack (SLUICE__METRICS_BUF bytes) and hands it to the caller's write
 *     function whenever it fills, so lines of any length (a long rule id)
 *     are written whole across calls.
 *
 * UNITS: times are recorded in ns and exposed in seconds (Prometheus'
 *   base unit): bucket bounds are exact decimals ("0.0075"), and _sum is
 *   kept in whole microseconds (each observation rounded to the nearest
 *   us) so that a 64-bit cell holds 2^63 us (292,000 years) of summed time
 *   instead of 292 years in ns, which a busy rule (1e5 requests/s at 10 ms
 *   each adds 1e12 ns per second) would overflow within 107 days.
 *
 * WIRING (the engine):
 *   per rule, at build:   sluice__metrics_init(&m, 0) (a rule kept across a
 *                         reload keeps its metrics object: counters must not
 *                         go back, Prometheus reads a drop as a restart);
 *   decide, per rule applied: exactly one of count(PASSED, 1) and
 *                         count(REFUSED, 1); on top of it SHADOW_REFUSED
 *                         (shadow mode: what it would have refused, counted
 *                         PASSED since it was admitted), ERRORS (a limiter
 *                         error, answered PASSED or REFUSED as on_error
 *                         says), QUEUED (an admission after a wait: PASSED,
 *                         and sluice__metrics_observe(&m.queue_wait,
 *                         delay_ns); a wait that times out is REFUSED);
 *   complete:             sluice__metrics_complete(&m, latency_ns, ok);
 *   load:                 sluice__metrics_engine_reload(&e, ok, version);
 *   sluice_engine_metrics: a view of the published set's rules (inside the
 *                         read-side section, so no row is freed under it)
 *                         and sluice__metrics_write(&view, write_fn, ctx);
 *   free:                 sluice__metrics_free() after the grace period.
 *
 * PROCESSES: without a region the stripes are this process's heap
 *   (sluice__metrics_init), so each process counts its own decisions (a
 *   fork child inherits a copy of the counts so far and counts on from
 *   there on its own).  On an engine's region (engine.h SHARED STATE) a
 *   rule state's metrics are a block of the region named like its tables
 *   (sluice__metrics_attach): every process on the region that holds
 *   that state counts into the same cells, so any process's writer
 *   renders the sum over all of them (nginx: every worker's scrape is
 *   the whole instance's).  No thread, no lock.
 *
 * CARDINALITY: one series per rule and family (per bucket for the
 *   histograms), never per key: a rule's label is its id alone.
 *
 * MEMORY: SLUICE__METRICS_STRIPES stripes per rule, each of 64 bytes per
 *   cell; cells as the ncells argument of sluice__metrics_init (0: one per
 *   possible CPU, sluice_stripe_init's default).  On this 2-CPU machine
 *   that is 51 x 64 x 2 = 6,528 bytes per rule; on a 64-CPU machine with
 *   the default, 204 KiB per rule, so an engine with many rules on a large
 *   machine should pass a smaller ncells (contention grows as CPUs share
 *   a cell; no count is lost either way).
 */
#ifndef SLUICE_RULES_METRICS_INTERNAL_H
#define SLUICE_RULES_METRICS_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/stripe.h"
/* The add inline, as the library's own files have it (static/stripe.h):
 * a decision's count is the fetch_add, not a call into libsluice.  It
 * binds libsluice-engine to this release's SLUICE_INLINE_ node
 * (common.h, INLINE), which it is built and installed with. */
#include "sluice/static/stripe.h"

/*
 * What a rule counts, one stripe each.  The names are the exposition's
 * families: sluice_rule_<name>_total.  Every decision of a rule counts
 * exactly one of PASSED and REFUSED (shadow refusals, queueing and
 * limiter errors count on top of the one that says how the request was
 * answered), so requests is not a stripe of its own: the writer renders
 * sluice_rule_requests_total as PASSED + REFUSED (sluice__metrics_requests),
 * and a decision costs one atomic add, not two.
 */
#define SLUICE__METRICS_COUNTERS(X)                                                        \
	X(PASSED, passed, "Requests this rule admitted.")                                     \
	X(REFUSED, refused, "Requests this rule refused (answered with its fallback).")       \
	X(SHADOW_REFUSED, shadow_refused,                                                     \
	  "Requests a shadow-mode rule would have refused (they were admitted).")             \
	X(QUEUED, queued, "Requests this rule admitted after a queueing delay.")              \
	X(ERRORS, errors, "Limiter errors on this rule (answered as its on_error says).")     \
	X(FAILURES, failures, "Completed requests the caller reported as failed (ok = 0).")   \
	X(SKIPPED, skipped,                                                                   \
	  "Requests this rule did not limit: a key it keys on was empty or absent "          \
	  "(empty_key: pass).")

typedef enum sluice__metrics_outcome {
#define SLUICE__METRICS_ENUM(E, n, h) SLUICE__METRICS_##E,
	SLUICE__METRICS_COUNTERS(SLUICE__METRICS_ENUM)
#undef SLUICE__METRICS_ENUM
	SLUICE__METRICS_NCOUNTERS
} sluice__metrics_outcome_t;

/* Fixed bucket bounds, in ns (upper bounds, le semantics: a value equal to
 * a bound falls in that bound's bucket).  Latency: 0.5 ms .. 10 s with
 * neighbouring bounds at most 2x apart (1-1.5-2-3-5-7.5 steps), so the p99
 * the adaptive controller derives is known to within a factor of 2 (see
 * adaptive_internal.h).  Queue wait: 0.1 ms .. 10 s in 1-2.5-5 steps (a
 * queue's max_wait is typically a few hundred ms). */
#define SLUICE__METRICS_LATENCY_BOUNDS 25u
#define SLUICE__METRICS_QUEUE_BOUNDS 16u
#define SLUICE__METRICS_BOUNDS_MAX 25u
extern const uint64_t sluice__metrics_latency_bounds[SLUICE__METRICS_LATENCY_BOUNDS];
extern const uint64_t sluice__metrics_queue_bounds[SLUICE__METRICS_QUEUE_BOUNDS];

/* A histogram: per bucket (non-cumulative; the last is +Inf) a stripe,
 * and the sum in us.  Its count is the sum of the buckets. */
typedef struct sluice__hist {
	/* read-only after init */
	const uint64_t *bounds;
	uint32_t nbounds;
	/* private */
	sluice_stripe_t bucket[SLUICE__METRICS_BOUNDS_MAX + 1];
	sluice_stripe_t sum_us;
} sluice__hist_t;

/* 7 counters, 26 + 1 latency stripes, 17 + 1 queue stripes */
#define SLUICE__METRICS_STRIPES \
	(SLUICE__METRICS_NCOUNTERS + SLUICE__METRICS_LATENCY_BOUNDS + 2 + SLUICE__METRICS_QUEUE_BOUNDS + 2)

typedef struct sluice__metrics {
	/* private: record with the functions below */
	sluice_stripe_t counter[SLUICE__METRICS_NCOUNTERS];
	sluice__hist_t latency;    /* from complete: the request's latency  */
	sluice__hist_t queue_wait; /* a queued admission's delay            */
} sluice__metrics_t;

/*
 * sluice__metrics_init - allocate and zero every stripe of @m.
 * @ncells: the stripes' cells, 0 for sluice_stripe_init's default (one
 * per possible CPU), else 1..SLUICE_STRIPE_CELLS_MAX.
 * Allocates; not for a decision path.  A failed init frees what it took
 * and leaves @m unusable (not to be freed twice: free is then a no-op).
 * Return: 0, SLUICE_EINVAL (NULL @m), SLUICE_ECELLS, SLUICE_ENOMEM.
 */
int sluice__metrics_init(sluice__metrics_t *m, uint32_t ncells);

/*
 * sluice__metrics_attach - @m's stripes on caller memory (@bytes at @mem,
 * 64-byte aligned, zeroed before the first attach): SLUICE__METRICS_STRIPES
 * stripes of SLUICE__METRICS_SHARED_CELLS cells one after another
 * (sluice_stripe_attach).  Processes that attach to the same shared
 * memory count into the same cells: each one's writer renders the sum
 * over all of them.  Allocates nothing; free forgets the memory.
 * Return: 0, SLUICE_EINVAL (NULL, misaligned or too small).
 */
#define SLUICE__METRICS_SHARED_CELLS 8u
int sluice__metrics_attach(sluice__metrics_t *m, void *mem, size_t bytes);
/* The bytes sluice__metrics_attach needs: 51 x 8 x 64 = 26,112. */
size_t sluice__metrics_shared_bytes(void);

/* sluice__metrics_bytes - the bytes one rule's metrics allocate on this
 * machine (every stripe of sluice__metrics_init at the default cells),
 * for the memory budget (rules/budget.c).  Allocates one stripe for a
 * moment to learn the cells; *@oom set (and 0 returned) if it cannot. */
uint64_t sluice__metrics_bytes(int *oom);

/* sluice__metrics_free - free the stripes.  NULL-safe; no recording or
 * write may be running on @m (the engine frees after a grace period). */
void sluice__metrics_free(sluice__metrics_t *m);

/*
 * sluice__metrics_count - add @n events of @o.  Lock-free, wait-free, no
 * allocation; relaxed (a counter publishes nothing else).  @o must be one
 * of SLUICE__METRICS_COUNTERS; @n at most INT64_MAX.
 */
static inline void sluice__metrics_count(sluice__metrics_t *m, sluice__metrics_outcome_t o,
                                         uint64_t n)
{
	sluice__stripe_add(&m->counter[o], (int64_t)n);
}

/* sluice__hist_index - the bucket of @ns: the first bound >= @ns, or
 * nbounds (+Inf).  A binary search: 5 steps for 25 bounds. */
static inline uint32_t sluice__hist_index(const sluice__hist_t *h, uint64_t ns)
{
	uint32_t lo = 0, hi = h->nbounds; /* answer in [lo, hi] */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (h->bounds[mid] >= ns)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/*
 * sluice__metrics_observe - record one observation of @ns in @h (one of
 * &m->latency, &m->queue_wait).  Lock-free, wait-free, no allocation: two
 * relaxed stripe adds (bucket, sum).  Any ns is valid; above the last
 * bound it counts in +Inf.
 */
static inline void sluice__metrics_observe(sluice__hist_t *h, uint64_t ns)
{
	sluice__stripe_add(&h->bucket[sluice__hist_index(h, ns)], 1);
	/* nearest us; ns near 2^64 cannot overflow: the quotient is < 2^54 */
	sluice__stripe_add(&h->sum_us, (int64_t)(ns / 1000u + (ns % 1000u >= 500u)));
}

/*
 * sluice__metrics_complete - what the engine's complete records: the
 * latency, and a failure when !@ok.  The latency histogram's count is then
 * the number of completions, and FAILURES over it the error ratio the
 * adaptive controller reads.  Lock-free, wait-free, no allocation.  The
 * two adds are not one event to a concurrent reader: a window the
 * controller closes in between sees the failure without its completion
 * (or, read the other way round, the reverse); each is still counted in
 * exactly one window, so only the windows' split of the completions in
 * flight at the instant one closes can be off.
 */
static inline void sluice__metrics_complete(sluice__metrics_t *m, uint64_t latency_ns, int ok)
{
	if (!ok)
		sluice__stripe_add(&m->counter[SLUICE__METRICS_FAILURES], 1);
	sluice__metrics_observe(&m->latency, latency_ns);
}

/* sluice__metrics_read - counter @o's total (sluice_stripe_sum: exact when
 * quiescent, see GUARANTEE otherwise).  Lock-free. */
uint64_t sluice__metrics_read(const sluice__metrics_t *m, sluice__metrics_outcome_t o);

/* sluice__metrics_requests - the rule's requests: PASSED + REFUSED (each
 * read as above; the total is monotonic across successive calls too). */
uint64_t sluice__metrics_requests(const sluice__metrics_t *m);

/*
 * sluice__hist_read - @h's per-bucket counts into @counts (nbounds + 1
 * entries, non-cumulative, +Inf last); returns their total (the count).
 * @sum_us, if not NULL, gets the sum in us.  Each stripe is read once
 * (lock-free, O(buckets x cells)); the adaptive controller diffs two of
 * these to get one window's distribution.
 */
uint64_t sluice__hist_read(const sluice__hist_t *h, uint64_t *counts, uint64_t *sum_us);

/*
 * Engine-level counters.  Reloads are rare and written by the one thread
 * that reloads, so plain atomics do (no stripe); relaxed, because a reader
 * only prints them.  version is the loaded rule set's version.
 */
typedef struct sluice__metrics_engine {
	_Atomic uint64_t reloads;         /* successful loads                */
	_Atomic uint64_t reload_failures; /* loads refused (errors, ENOMEM)  */
	_Atomic uint64_t version;         /* the version now published       */
} sluice__metrics_engine_t;

/* sluice__metrics_engine_reload - count a load: @ok 1 with the @version it
 * published, 0 for a refused one (version unchanged).  Lock-free. */
void sluice__metrics_engine_reload(sluice__metrics_engine_t *e, int ok, uint64_t version);

/* One rule in a view. */
typedef struct sluice__metrics_row {
	const char *rule_id;          /* NUL-terminated; any bytes, escaped  */
	const sluice__metrics_t *m;   /* its metrics                          */
	uint64_t limit;               /* effective limit now (adaptive's)     */
	uint64_t limit_configured;    /* the file's limit                     */
	/* a rule on a backend: its decisions taken by the backend's fallback,
	 * [0] admitted, [1] refused (sluice_rule_fallback_*_total); NULL for
	 * a rule per instance, which has no such series */
	const sluice_stripe_t *fallback;
	const char *backend;          /* its backend's name, or NULL          */
} sluice__metrics_row_t;

/* One backend in a view (rules.h BACKENDS): libsluice-redis's counters,
 * copied (this header does not include sluice/redis.h). */
typedef struct sluice__metrics_backend_row {
	const char *name;             /* the backend's name in the file       */
	uint64_t round_trips, lease_admits, remote_refusals, cache_refusals;
	uint64_t fallback_local, fallback_allow, fallback_deny, budget_timeouts;
	uint64_t io_errors, connects, breaker_opened, batches;
	uint64_t primary_changes, readonly_drops; /* sluice/redis.h FAILOVER */
	uint64_t moved, ask_redirects;            /* sluice/redis.h CLUSTER */
	int breaker;                  /* 0 closed, 1 open, 2 half-open        */
} sluice__metrics_backend_row_t;

/* What sluice__metrics_write renders: rows in the order given (rule ids
 * unique: the loader refuses duplicates; a view with two rows of one id
 * would make a duplicate series) and the engine counters (NULL: omitted). */
typedef struct sluice__metrics_view {
	const sluice__metrics_row_t *rows;
	size_t nrows;
	const sluice__metrics_engine_t *engine;
	const sluice__metrics_backend_row_t *backends; /* names unique */
	size_t nbackends;
} sluice__metrics_view_t;

/* The writer's stack buffer. */
#define SLUICE__METRICS_BUF 1024u

/*
 * sluice__metrics_write - render @v as Prometheus text exposition 0.0.4:
 * per family one "# HELP" and one "# TYPE" line, then its samples, one per
 * row, labelled {rule="<id>"} with backslash, double quote and newline
 * escaped (\\, \", \n); histograms as _bucket{rule=...,le="..."}
 * cumulative up to le="+Inf", then _sum and _count.  No timestamps.
 * @write is called with consecutive pieces of the text (never empty, at
 * most SLUICE__METRICS_BUF bytes each, lines not necessarily whole); a
 * non-zero return stops the write and is returned.
 *
 * Thread-safe with concurrent recording (see GUARANTEE for what it reads);
 * several writes may run at once.  Allocates nothing (one stack buffer);
 * callable from a worker process with no heap to spare.  Time: O(rows x
 * stripes x cells).
 * Return: 0, SLUICE_EINVAL (NULL @v or @write, rows NULL with nrows > 0,
 * a row with a NULL id or metrics; nothing is written then), or the first
 * non-zero value @write returned.
 */
int sluice__metrics_write(const sluice__metrics_view_t *v,
                          int (*write)(void *ctx, const char *buf, size_t len), void *ctx);

#endif /* SLUICE_RULES_METRICS_INTERNAL_H */
