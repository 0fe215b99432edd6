/* SPDX-License-Identifier: MIT */
/*
 * test_metrics_threads.c - two threads record into three rules' metrics
 * while a third renders the exposition again and again.  Each rendering
 * must show every counter and every cumulative bucket no lower than the
 * rendering before (no count goes backwards), buckets cumulative, +Inf
 * equal to _count; after the join one more rendering must show every
 * total exactly.  Run in the plain, asan and tsan builds (TSan sees the
 * stripes' atomics and the writer's reads).
 *
 * Asserts only on counts, never on timing.  The recorders record at
 * least ITERS times each and go on until the writer has rendered
 * MIN_WRITES times (bounded by ITERS_MAX), so renderings overlap
 * recording however the threads are scheduled.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"
#include "sluice/error.h"

TestSuite(metrics_threads, .timeout = 60);

#define RULES 3
#define RECORDERS 2
#define ITERS 20000      /* each recorder at least this many ...       */
#define ITERS_MAX 5000000 /* ... and goes on until MIN_WRITES renderings */
#define MIN_WRITES 50     /* ran while it recorded, up to ITERS_MAX      */

static const char *const ids[RULES] = { "a", "b\"q", "c" };
static sluice__metrics_t m[RULES];
static atomic_int recorders_done;
static atomic_uint writes_done;
static uint64_t iters[RECORDERS];

/* Latencies cycled through: bucket edges, in between, past the last. */
static const uint64_t lat[] = { 400000, 1000000, 1000001, 74999999, 75000000, 11000000000ull };
#define NLAT (sizeof(lat) / sizeof(lat[0]))

static void *recorder(void *arg)
{
	uintptr_t t = (uintptr_t)arg;
	uint64_t i = 0;
	for (; i < ITERS_MAX && (i < ITERS || atomic_load(&writes_done) < MIN_WRITES); i++) {
		sluice__metrics_t *r = &m[(i + t) % RULES];
		sluice__metrics_count(r, i % 4 ? SLUICE__METRICS_PASSED : SLUICE__METRICS_REFUSED, 1);
		sluice__metrics_complete(r, lat[i % NLAT], i % 10 != 0);
		if (i % 8 == 0)
			sluice__metrics_observe(&r->queue_wait, (i % 100) * 1000000);
	}
	iters[t] = i; /* read after the join */
	atomic_fetch_add(&recorders_done, 1);
	return NULL;
}

struct sink {
	char *buf;
	size_t len, cap;
};

static int sink_write(void *ctx, const char *buf, size_t len)
{
	struct sink *s = ctx;
	if (s->len + len + 1 > s->cap)
		return -1; /* preallocated: fail loudly rather than realloc */
	memcpy(s->buf + s->len, buf, len);
	s->len += len;
	s->buf[s->len] = '\0';
	return 0;
}

/* The value of the sample whose line starts with @prefix (exact line
 * start, up to the value). */
static uint64_t value(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	for (const char *l = text; *l;) {
		const char *eol = strchr(l, '\n');
		cr_assert_not_null(eol);
		if (!strncmp(l, prefix, n) && l[n] == ' ') {
			char *end;
			unsigned long long v = strtoull(l + n + 1, &end, 10);
			cr_assert_eq(end, eol, "value of %s is not an integer", prefix);
			return v;
		}
		l = eol + 1;
	}
	cr_assert_fail("no sample %s", prefix);
	return 0;
}

/* Everything compared between renderings, per rule: the counters, then
 * the latency histogram's cumulative buckets and its count. */
#define NVALS (1 + SLUICE__METRICS_NCOUNTERS + SLUICE__METRICS_LATENCY_BOUNDS + 2)
#define V_REQUESTS 0
#define V_COUNTER(c) (1 + (c))
#define V_BUCKET(b) (1 + SLUICE__METRICS_NCOUNTERS + (b))

static void esc(char *out, size_t cap, const char *id)
{
	size_t k = 0;
	for (; *id && k + 3 < cap; id++) {
		if (*id == '"' || *id == '\\')
			out[k++] = '\\';
		out[k++] = *id;
	}
	out[k] = '\0';
}

static const char *const counter_names[SLUICE__METRICS_NCOUNTERS] = {
	"sluice_rule_passed_total",
	"sluice_rule_refused_total",        "sluice_rule_shadow_refused_total",
	"sluice_rule_queued_total",         "sluice_rule_errors_total",
	"sluice_rule_failures_total",       "sluice_rule_skipped_total",
};

static void extract(const char *text, uint64_t vals[RULES][NVALS])
{
	char prefix[160], id[16];
	for (int r = 0; r < RULES; r++) {
		esc(id, sizeof(id), ids[r]);
		size_t k = 0;
		snprintf(prefix, sizeof(prefix), "sluice_rule_requests_total{rule=\"%s\"}", id);
		vals[r][k++] = value(text, prefix);
		for (unsigned c = 0; c < SLUICE__METRICS_NCOUNTERS; c++) {
			snprintf(prefix, sizeof(prefix), "%s{rule=\"%s\"}", counter_names[c], id);
			vals[r][k++] = value(text, prefix);
		}
		uint64_t prev = 0;
		for (uint32_t b = 0; b <= SLUICE__METRICS_LATENCY_BOUNDS; b++) {
			/* le as the writer spells it: found by bucket order */
			const char *p = text;
			for (uint32_t skip = 0; skip <= b; skip++) {
				snprintf(prefix, sizeof(prefix),
				         "sluice_rule_latency_seconds_bucket{rule=\"%s\",le=\"", id);
				p = strstr(p, prefix);
				cr_assert_not_null(p, "bucket %u of %s", b, id);
				p += strlen(prefix);
			}
			const char *sp = strstr(p, "} ");
			cr_assert_not_null(sp);
			uint64_t v = strtoull(sp + 2, NULL, 10);
			cr_assert_geq(v, prev, "buckets of %s not cumulative at %u", id, b);
			prev = v;
			vals[r][k++] = v;
		}
		snprintf(prefix, sizeof(prefix), "sluice_rule_latency_seconds_count{rule=\"%s\"}", id);
		vals[r][k] = value(text, prefix);
		cr_assert_eq(vals[r][k], prev, "_count of %s is not its +Inf bucket", id);
	}
}

Test(metrics_threads, record_while_writing)
{
	for (int r = 0; r < RULES; r++)
		cr_assert_eq(sluice__metrics_init(&m[r], 0), 0);
	sluice__metrics_row_t rows[RULES];
	for (int r = 0; r < RULES; r++)
		rows[r] = (sluice__metrics_row_t){ .rule_id = ids[r], .m = &m[r], .limit = 10,
			                           .limit_configured = 10 };
	sluice__metrics_view_t v = { .rows = rows, .nrows = RULES };
	struct sink s = { .cap = 1 << 20 };
	s.buf = malloc(s.cap);
	cr_assert_not_null(s.buf);

	pthread_t th[RECORDERS];
	for (uintptr_t t = 0; t < RECORDERS; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, recorder, (void *)t), 0);

	static uint64_t prev[RULES][NVALS], cur[RULES][NVALS];
	unsigned writes = 0;
	while (atomic_load(&recorders_done) < RECORDERS) {
		s.len = 0;
		cr_assert_eq(sluice__metrics_write(&v, sink_write, &s), 0);
		extract(s.buf, cur);
		for (int r = 0; r < RULES; r++)
			for (size_t k = 0; k < NVALS; k++)
				cr_assert_geq(cur[r][k], prev[r][k],
				              "rule %d value %zu went back: %" PRIu64 " after %" PRIu64,
				              r, k, cur[r][k], prev[r][k]);
		memcpy(prev, cur, sizeof(prev));
		writes++;
		atomic_store(&writes_done, writes);
	}
	for (int t = 0; t < RECORDERS; t++)
		pthread_join(th[t], NULL);

	/* quiescent: exact */
	s.len = 0;
	cr_assert_eq(sluice__metrics_write(&v, sink_write, &s), 0);
	extract(s.buf, cur);
	uint64_t want_req[RULES] = { 0 }, want_pass[RULES] = { 0 }, want_fail[RULES] = { 0 };
	uint64_t want_bucket[RULES][SLUICE__METRICS_LATENCY_BOUNDS + 1] = { { 0 } };
	for (uintptr_t t = 0; t < RECORDERS; t++)
		for (uint64_t i = 0; i < iters[t]; i++) {
			size_t r = (i + t) % RULES;
			want_req[r]++;
			want_pass[r] += i % 4 != 0;
			want_fail[r] += i % 10 == 0;
			for (uint32_t b = 0; b <= SLUICE__METRICS_LATENCY_BOUNDS; b++)
				want_bucket[r][b] += b == SLUICE__METRICS_LATENCY_BOUNDS ||
				                     lat[i % NLAT] <= sluice__metrics_latency_bounds[b];
		}
	for (int r = 0; r < RULES; r++) {
		cr_assert_eq(cur[r][V_REQUESTS], want_req[r]);
		cr_assert_eq(cur[r][V_COUNTER(SLUICE__METRICS_PASSED)], want_pass[r]);
		cr_assert_eq(cur[r][V_COUNTER(SLUICE__METRICS_REFUSED)], want_req[r] - want_pass[r]);
		cr_assert_eq(cur[r][V_COUNTER(SLUICE__METRICS_FAILURES)], want_fail[r]);
		for (uint32_t b = 0; b <= SLUICE__METRICS_LATENCY_BOUNDS; b++)
			cr_assert_eq(cur[r][V_BUCKET(b)], want_bucket[r][b],
			             "rule %d bucket %u", r, b);
		cr_assert_eq(cur[r][NVALS - 1], want_req[r]);
	}
	cr_log_info("%u renderings while recording %" PRIu64 " + %" PRIu64 " iterations", writes,
	            iters[0], iters[1]);
	free(s.buf);
	for (int r = 0; r < RULES; r++)
		sluice__metrics_free(&m[r]);
}
