/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - the rules engine's per-rule metrics (striped counters and
 * histograms) and their Prometheus text exposition (format 0.0.4).
 *
 * DESIGN: every recorded value lives in a sluice_stripe_t (BY_CPU), written
 * only with the stripe's relaxed fetch_add and read only with its relaxed
 * loads: a metric publishes nothing but itself, so nothing here needs an
 * ordering stronger than relaxed.  A histogram keeps non-cumulative bucket
 * counts (one add per observation, whatever the bucket), and the writer
 * makes them cumulative from one read of each: a concurrent observation
 * then shows up in at most one bucket read, never as a decrease, and
 * _count is the last cumulative value, so +Inf and _count always agree.
 * The writer formats into a fixed buffer on its stack and hands it out
 * whenever it fills: no allocation, no line-length limit.  Numbers are
 * formatted by hand (integers, and seconds as exact decimals from ns or
 * us), so the output has no locale and no float rounding.
 */
#include <string.h>

#include "metrics_internal.h"
#include "sluice/error.h"

#define MS 1000000ull
#define US 1000ull

/* le bounds: see metrics_internal.h for why these */
const uint64_t sluice__metrics_latency_bounds[SLUICE__METRICS_LATENCY_BOUNDS] = {
	500 * US,  1 * MS,   1500 * US, 2 * MS,    3 * MS,     5 * MS,     7500 * US, 10 * MS,
	15 * MS,   20 * MS,  30 * MS,   50 * MS,   75 * MS,    100 * MS,   150 * MS,  200 * MS,
	300 * MS,  500 * MS, 750 * MS,  1000 * MS, 1500 * MS,  2000 * MS,  3000 * MS, 5000 * MS,
	10000 * MS,
};
const uint64_t sluice__metrics_queue_bounds[SLUICE__METRICS_QUEUE_BOUNDS] = {
	100 * US,  250 * US,  500 * US,  1 * MS,    2500 * US, 5 * MS,    10 * MS,    25 * MS,
	50 * MS,   100 * MS,  250 * MS,  500 * MS,  1000 * MS, 2500 * MS, 5000 * MS,  10000 * MS,
};

/* ---- recording objects ------------------------------------------------ */

/* Where a metrics object's stripes come from: allocated (mem NULL), or
 * attached one after another to caller memory (a shared region). */
struct cells_src {
	unsigned char *mem;
	size_t left;
	uint32_t ncells;
};

static int stripe_make(sluice_stripe_t *s, struct cells_src *src)
{
	if (!src->mem)
		return sluice_stripe_init(s, src->ncells, SLUICE_STRIPE_BY_CPU);
	int rc = sluice_stripe_attach(s, src->mem, src->left, src->ncells, SLUICE_STRIPE_BY_CPU);
	if (rc == 0) {
		size_t n = sluice_stripe_bytes(src->ncells);
		src->mem += n;
		src->left -= n;
	}
	return rc;
}

static int hist_init(sluice__hist_t *h, const uint64_t *bounds, uint32_t nbounds,
                     struct cells_src *src)
{
	uint32_t made = 0; /* bucket stripes initialised */
	int rc = 0;
	for (; made <= nbounds; made++)
		if ((rc = stripe_make(&h->bucket[made], src)) != 0)
			break;
	if (rc == 0)
		rc = stripe_make(&h->sum_us, src);
	if (rc != 0) {
		for (uint32_t j = 0; j < made; j++)
			sluice_stripe_destroy(&h->bucket[j]);
		return rc;
	}
	h->bounds = bounds;
	h->nbounds = nbounds;
	return 0;
}

static void hist_free(sluice__hist_t *h)
{
	if (!h->bounds)
		return;
	for (uint32_t i = 0; i <= h->nbounds; i++)
		sluice_stripe_destroy(&h->bucket[i]);
	sluice_stripe_destroy(&h->sum_us);
	h->bounds = NULL;
}

static int metrics_make(sluice__metrics_t *m, struct cells_src *src)
{
	memset(m, 0, sizeof(*m));
	int rc = 0;
	unsigned c = 0; /* counters initialised */
	for (; c < SLUICE__METRICS_NCOUNTERS; c++)
		if ((rc = stripe_make(&m->counter[c], src)) != 0)
			goto undo_counters;
	rc = hist_init(&m->latency, sluice__metrics_latency_bounds, SLUICE__METRICS_LATENCY_BOUNDS,
	               src);
	if (rc != 0)
		goto undo_counters;
	rc = hist_init(&m->queue_wait, sluice__metrics_queue_bounds, SLUICE__METRICS_QUEUE_BOUNDS,
	               src);
	if (rc != 0) {
		hist_free(&m->latency);
		goto undo_counters;
	}
	return 0;
undo_counters:
	for (unsigned j = 0; j < c; j++)
		sluice_stripe_destroy(&m->counter[j]);
	memset(m, 0, sizeof(*m)); /* free() on it is then a no-op */
	return rc;
}

int sluice__metrics_init(sluice__metrics_t *m, uint32_t ncells)
{
	if (!m)
		return SLUICE_EINVAL;
	if (ncells > SLUICE_STRIPE_CELLS_MAX)
		return SLUICE_ECELLS;
	struct cells_src src = { NULL, 0, ncells };
	return metrics_make(m, &src);
}

size_t sluice__metrics_shared_bytes(void)
{
	return (size_t)SLUICE__METRICS_STRIPES * sluice_stripe_bytes(SLUICE__METRICS_SHARED_CELLS);
}

int sluice__metrics_attach(sluice__metrics_t *m, void *mem, size_t bytes)
{
	if (!m || !mem || bytes < sluice__metrics_shared_bytes())
		return SLUICE_EINVAL;
	struct cells_src src = { mem, bytes, SLUICE__METRICS_SHARED_CELLS };
	return metrics_make(m, &src);
}

uint64_t sluice__metrics_bytes(int *oom)
{
	/* the cells a stripe takes on this machine, from the stripe itself */
	sluice_stripe_t s;
	*oom = 0;
	if (sluice_stripe_init(&s, 0, SLUICE_STRIPE_BY_CPU) != 0) {
		*oom = 1;
		return 0;
	}
	uint64_t cells = sluice_stripe_cells(&s);
	sluice_stripe_destroy(&s);
	return (uint64_t)SLUICE__METRICS_STRIPES * cells * sizeof(struct sluice_stripe_cell);
}

void sluice__metrics_free(sluice__metrics_t *m)
{
	if (!m || !m->latency.bounds)
		return;
	for (unsigned c = 0; c < SLUICE__METRICS_NCOUNTERS; c++)
		sluice_stripe_destroy(&m->counter[c]);
	hist_free(&m->latency);
	hist_free(&m->queue_wait);
}

uint64_t sluice__metrics_read(const sluice__metrics_t *m, sluice__metrics_outcome_t o)
{
	/* Only non-negative adds reach a counter, so the sum is >= 0. */
	return (uint64_t)sluice_stripe_sum(&m->counter[o]);
}

uint64_t sluice__metrics_requests(const sluice__metrics_t *m)
{
	return sluice__metrics_read(m, SLUICE__METRICS_PASSED) +
	       sluice__metrics_read(m, SLUICE__METRICS_REFUSED);
}

uint64_t sluice__hist_read(const sluice__hist_t *h, uint64_t *counts, uint64_t *sum_us)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i <= h->nbounds; i++) {
		counts[i] = (uint64_t)sluice_stripe_sum(&h->bucket[i]);
		total += counts[i];
	}
	if (sum_us)
		*sum_us = (uint64_t)sluice_stripe_sum(&h->sum_us);
	return total;
}

void sluice__metrics_engine_reload(sluice__metrics_engine_t *e, int ok, uint64_t version)
{
	if (ok) {
		atomic_fetch_add_explicit(&e->reloads, 1, memory_order_relaxed);
		atomic_store_explicit(&e->version, version, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&e->reload_failures, 1, memory_order_relaxed);
	}
}

/* ---- the writer ------------------------------------------------------- */

struct out {
	int (*write)(void *ctx, const char *buf, size_t len);
	void *ctx;
	int rc;       /* the first non-zero write() return; then nothing more */
	size_t len;
	char buf[SLUICE__METRICS_BUF];
};

static void flush(struct out *o)
{
	if (o->len && !o->rc)
		o->rc = o->write(o->ctx, o->buf, o->len);
	o->len = 0;
}

static void put(struct out *o, const char *s, size_t n)
{
	while (n && !o->rc) {
		size_t room = sizeof(o->buf) - o->len;
		size_t k = n < room ? n : room;
		memcpy(o->buf + o->len, s, k);
		o->len += k;
		s += k;
		n -= k;
		if (o->len == sizeof(o->buf))
			flush(o);
	}
}

static void puts_(struct out *o, const char *s) { put(o, s, strlen(s)); }

static void put_u64(struct out *o, uint64_t v)
{
	char d[20];
	size_t i = sizeof(d);
	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(o, d + i, sizeof(d) - i);
}

/* @v / 10^@digits as an exact decimal with no trailing zeros: 7500000 ns
 * with 9 digits is "0.0075", 10^9 is "1". */
static void put_fixed(struct out *o, uint64_t v, unsigned digits)
{
	uint64_t scale = 1;
	for (unsigned i = 0; i < digits; i++)
		scale *= 10;
	put_u64(o, v / scale);
	uint64_t frac = v % scale;
	if (!frac)
		return;
	char d[20];
	unsigned n = digits;
	while (frac % 10 == 0) { /* drop trailing zeros */
		frac /= 10;
		n--;
	}
	for (unsigned i = n; i-- > 0;) {
		d[i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	put(o, ".", 1);
	put(o, d, n);
}

/* A label value: backslash, double quote and newline escaped, the three
 * the text format requires; every other byte as it is. */
static void put_label_value(struct out *o, const char *s)
{
	const char *run = s;
	for (; *s; s++) {
		const char *esc = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;
		if (!esc)
			continue;
		put(o, run, (size_t)(s - run));
		put(o, esc, 2);
		run = s + 1;
	}
	put(o, run, (size_t)(s - run));
}

static void put_family(struct out *o, const char *name, const char *type, const char *help)
{
	puts_(o, "# HELP ");
	puts_(o, name);
	put(o, " ", 1);
	puts_(o, help);
	puts_(o, "\n# TYPE ");
	puts_(o, name);
	put(o, " ", 1);
	puts_(o, type);
	put(o, "\n", 1);
}

/* name{rule="id"} or name{rule="id",le="..."}, then " value\n" by the caller */
static void put_series(struct out *o, const char *name, const char *suffix, const char *id)
{
	puts_(o, name);
	puts_(o, suffix);
	puts_(o, "{rule=\"");
	put_label_value(o, id);
	put(o, "\"", 1);
}

static void put_value_u64(struct out *o, uint64_t v)
{
	put(o, "} ", 2);
	put_u64(o, v);
	put(o, "\n", 1);
}

static void put_hist(struct out *o, const char *name, const sluice__hist_t *h, const char *id)
{
	uint64_t counts[SLUICE__METRICS_BOUNDS_MAX + 1], sum_us;
	sluice__hist_read(h, counts, &sum_us);
	uint64_t cum = 0;
	for (uint32_t i = 0; i <= h->nbounds; i++) {
		cum += counts[i];
		put_series(o, name, "_bucket", id);
		puts_(o, ",le=\"");
		if (i < h->nbounds)
			put_fixed(o, h->bounds[i], 9);
		else
			puts_(o, "+Inf");
		put(o, "\"", 1);
		put_value_u64(o, cum);
	}
	put_series(o, name, "_sum", id);
	put(o, "} ", 2);
	put_fixed(o, sum_us, 6);
	put(o, "\n", 1);
	put_series(o, name, "_count", id);
	put_value_u64(o, cum);
}

static void put_engine_u64(struct out *o, const char *name, const char *type, const char *help,
                           uint64_t v)
{
	put_family(o, name, type, help);
	puts_(o, name);
	put(o, " ", 1);
	put_u64(o, v);
	put(o, "\n", 1);
}

/* name{backend="b"} or name{backend="b",kind="k"}, then the value */
static void put_backend_series(struct out *o, const char *name, const char *backend,
                               const char *kind, uint64_t value)
{
	puts_(o, name);
	puts_(o, "{backend=\"");
	put_label_value(o, backend);
	if (kind) {
		puts_(o, "\",kind=\"");
		puts_(o, kind);
	}
	put(o, "\"", 1);
	put_value_u64(o, value);
}

/*
 * Rules on a backend and the backends (rules.h BACKENDS): per such rule
 * the outcome of the decisions its backend's fallback took, and per
 * backend libsluice-redis's counters and its breaker.  Families with no
 * sample are left out (a file with no backend writes none of them).
 */
static void put_backends(struct out *o, const sluice__metrics_view_t *v)
{
	static const struct {
		const char *name, *help;
	} fb[2] = {
		{ "sluice_rule_fallback_passed_total",
		  "Requests of a rule on a backend that the backend's fallback admitted (Redis did "
		  "not answer within the budget, or its breaker was open)." },
		{ "sluice_rule_fallback_refused_total",
		  "Requests of a rule on a backend that the backend's fallback refused." },
	};
	int any = 0;
	for (size_t r = 0; r < v->nrows; r++)
		any |= v->rows[r].fallback != NULL;
	for (unsigned f = 0; any && f < 2; f++) {
		put_family(o, fb[f].name, "counter", fb[f].help);
		for (size_t r = 0; r < v->nrows; r++) {
			if (!v->rows[r].fallback)
				continue;
			put_series(o, fb[f].name, "", v->rows[r].rule_id);
			puts_(o, ",backend=\"");
			put_label_value(o, v->rows[r].backend ? v->rows[r].backend : "");
			put(o, "\"", 1);
			put_value_u64(o, (uint64_t)sluice_stripe_sum(&v->rows[r].fallback[f]));
		}
	}
	if (!v->nbackends || !v->backends)
		return;
#define SLUICE__BACKEND_COUNTER(field, help)                                           \
	do {                                                                           \
		put_family(o, "sluice_backend_" #field "_total", "counter", help);     \
		for (size_t b = 0; b < v->nbackends; b++)                              \
			put_backend_series(o, "sluice_backend_" #field "_total",       \
			                   v->backends[b].name, NULL, v->backends[b].field); \
	} while (0)
	SLUICE__BACKEND_COUNTER(round_trips, "Script calls sent to Redis (NOSCRIPT retries too).");
	SLUICE__BACKEND_COUNTER(batches, "Pipelined writes to Redis, each with one or more script calls.");
	SLUICE__BACKEND_COUNTER(lease_admits, "Decisions admitted from a local lease.");
	SLUICE__BACKEND_COUNTER(remote_refusals, "Decisions Redis refused.");
	SLUICE__BACKEND_COUNTER(cache_refusals,
	                        "Decisions refused locally by the over-limit cache (no round trip).");
	SLUICE__BACKEND_COUNTER(budget_timeouts, "Decisions that spent their budget waiting for Redis.");
	SLUICE__BACKEND_COUNTER(io_errors, "I/O errors and timeouts (each a reconnect).");
	SLUICE__BACKEND_COUNTER(connects, "Successful connects (each with SCRIPT LOAD).");
	SLUICE__BACKEND_COUNTER(breaker_opened, "Times the circuit breaker opened.");
	SLUICE__BACKEND_COUNTER(primary_changes,
	                        "Connects to another server than the last one's (a failover followed).");
	SLUICE__BACKEND_COUNTER(readonly_drops,
	                        "Connections dropped because the server answered READONLY (a replica).");
	SLUICE__BACKEND_COUNTER(moved, "Cluster: MOVED replies (the slot map updated, the call sent again).");
	SLUICE__BACKEND_COUNTER(ask_redirects,
	                        "Cluster: ASK replies (the call sent once to the importing node).");
#undef SLUICE__BACKEND_COUNTER
	put_family(o, "sluice_backend_fallbacks_total", "counter",
	           "Decisions taken by the fallback, by kind (local share, allow, deny).");
	for (size_t b = 0; b < v->nbackends; b++) {
		const sluice__metrics_backend_row_t *br = &v->backends[b];
		put_backend_series(o, "sluice_backend_fallbacks_total", br->name, "local",
		                   br->fallback_local);
		put_backend_series(o, "sluice_backend_fallbacks_total", br->name, "allow",
		                   br->fallback_allow);
		put_backend_series(o, "sluice_backend_fallbacks_total", br->name, "deny",
		                   br->fallback_deny);
	}
	put_family(o, "sluice_backend_breaker_state", "gauge",
	           "The circuit breaker now: 0 closed, 1 open, 2 half-open.");
	for (size_t b = 0; b < v->nbackends; b++)
		put_backend_series(o, "sluice_backend_breaker_state", v->backends[b].name, NULL,
		                   (uint64_t)v->backends[b].breaker);
}

int sluice__metrics_write(const sluice__metrics_view_t *v,
                          int (*write)(void *ctx, const char *buf, size_t len), void *ctx)
{
	if (!v || !write || (v->nrows && !v->rows))
		return SLUICE_EINVAL;
	for (size_t r = 0; r < v->nrows; r++)
		if (!v->rows[r].rule_id || !v->rows[r].m)
			return SLUICE_EINVAL;

	struct out o = { .write = write, .ctx = ctx };
	static const struct {
		const char *name, *help;
	} counters[] = {
#define SLUICE__METRICS_FAMILY(E, n, h) { "sluice_rule_" #n "_total", h },
		SLUICE__METRICS_COUNTERS(SLUICE__METRICS_FAMILY)
#undef SLUICE__METRICS_FAMILY
	};
	put_family(&o, "sluice_rule_requests_total", "counter",
	           "Decisions of this rule (passed + refused; shadow refusals are passed).");
	for (size_t r = 0; r < v->nrows; r++) {
		put_series(&o, "sluice_rule_requests_total", "", v->rows[r].rule_id);
		put_value_u64(&o, sluice__metrics_requests(v->rows[r].m));
	}
	for (unsigned c = 0; c < SLUICE__METRICS_NCOUNTERS; c++) {
		put_family(&o, counters[c].name, "counter", counters[c].help);
		for (size_t r = 0; r < v->nrows; r++) {
			put_series(&o, counters[c].name, "", v->rows[r].rule_id);
			put_value_u64(&o, sluice__metrics_read(v->rows[r].m, (sluice__metrics_outcome_t)c));
		}
	}

	put_family(&o, "sluice_rule_latency_seconds", "histogram",
	           "Latency of completed requests, as the caller reported it to complete.");
	for (size_t r = 0; r < v->nrows; r++)
		put_hist(&o, "sluice_rule_latency_seconds", &v->rows[r].m->latency, v->rows[r].rule_id);
	put_family(&o, "sluice_rule_queue_wait_seconds", "histogram",
	           "Queueing delay of requests this rule admitted after a wait.");
	for (size_t r = 0; r < v->nrows; r++)
		put_hist(&o, "sluice_rule_queue_wait_seconds", &v->rows[r].m->queue_wait,
		         v->rows[r].rule_id);

	put_family(&o, "sluice_rule_limit", "gauge",
	           "The limit this rule enforces now (lowered by adaptive limits).");
	for (size_t r = 0; r < v->nrows; r++) {
		put_series(&o, "sluice_rule_limit", "", v->rows[r].rule_id);
		put_value_u64(&o, v->rows[r].limit);
	}
	put_family(&o, "sluice_rule_limit_configured", "gauge",
	           "The limit the rule file sets for this rule.");
	for (size_t r = 0; r < v->nrows; r++) {
		put_series(&o, "sluice_rule_limit_configured", "", v->rows[r].rule_id);
		put_value_u64(&o, v->rows[r].limit_configured);
	}

	put_backends(&o, v);

	if (v->engine) {
		const sluice__metrics_engine_t *e = v->engine;
		put_engine_u64(&o, "sluice_reloads_total", "counter", "Rule files loaded and published.",
		               atomic_load_explicit(&e->reloads, memory_order_relaxed));
		put_engine_u64(&o, "sluice_reload_failures_total", "counter",
		               "Rule file loads refused (the previous rule set stayed).",
		               atomic_load_explicit(&e->reload_failures, memory_order_relaxed));
		put_engine_u64(&o, "sluice_rules_version", "gauge",
		               "Version of the rule set now in use (each successful load adds one).",
		               atomic_load_explicit(&e->version, memory_order_relaxed));
	}
	flush(&o);
	return o.rc;
}
