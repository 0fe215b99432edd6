/* SPDX-License-Identifier: MIT */
/*
 * test_metrics.c - the rules engine's per-rule metrics and their Prometheus
 * text exposition: init's parameters, the histogram's bucket edges and the
 * us rounding of _sum, an exposition of several rules (ids that need
 * escaping) parsed back line by line with every value checked exactly
 * (counters, cumulative buckets, _sum, _count, gauges, engine counters),
 * the same text through `promtool check metrics`, the writer's pieces and
 * its error return, and refusals of bad views.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics_internal.h"
#include "sluice/error.h"

TestSuite(metrics, .timeout = 60);

/* ---- helpers ---------------------------------------------------------- */

struct sink {
	char *buf;
	size_t len, cap;
	size_t calls, max_piece;
	size_t fail_at; /* return 7 on this call (1-based); 0: never */
};

static int sink_write(void *ctx, const char *buf, size_t len)
{
	struct sink *s = ctx;
	s->calls++;
	cr_assert_gt(len, 0, "the writer handed out an empty piece");
	if (len > s->max_piece)
		s->max_piece = len;
	if (s->fail_at && s->calls == s->fail_at)
		return 7;
	if (s->len + len + 1 > s->cap) {
		s->cap = (s->len + len + 1) * 2;
		s->buf = realloc(s->buf, s->cap);
		cr_assert_not_null(s->buf);
	}
	memcpy(s->buf + s->len, buf, len);
	s->len += len;
	s->buf[s->len] = '\0';
	return 0;
}

static void init_ok(sluice__metrics_t *m)
{
	int rc = sluice__metrics_init(m, 0);
	cr_assert_eq(rc, 0, "metrics_init = %d (%s)", rc, sluice_err_name(rc));
}

/* One parsed sample line. */
struct sample {
	char name[80];
	char rule[8200]; /* unescaped; "" when the line has no rule label */
	char le[32];     /* "" when none */
	char value[48];
};

struct parsed {
	struct sample *s;
	size_t n;
	char help[64][80], type[64][80], type_kind[64][16];
	size_t nhelp, ntype;
};

/* Parse the exposition strictly: every line is a HELP, a TYPE or a sample
 * of the form name{k="v",...} value; anything else fails the test. */
static void parse(const char *text, struct parsed *p)
{
	memset(p, 0, sizeof(*p));
	size_t cap = 1024;
	p->s = calloc(cap, sizeof(*p->s));
	cr_assert_not_null(p->s);
	const char *line = text;
	while (*line) {
		const char *eol = strchr(line, '\n');
		cr_assert_not_null(eol, "the text does not end with a newline");
		if (!strncmp(line, "# HELP ", 7)) {
			const char *n = line + 7, *sp = memchr(n, ' ', (size_t)(eol - n));
			cr_assert_not_null(sp);
			cr_assert_lt(p->nhelp, 64);
			snprintf(p->help[p->nhelp++], 80, "%.*s", (int)(sp - n), n);
		} else if (!strncmp(line, "# TYPE ", 7)) {
			const char *n = line + 7, *sp = memchr(n, ' ', (size_t)(eol - n));
			cr_assert_not_null(sp);
			cr_assert_lt(p->ntype, 64);
			snprintf(p->type[p->ntype], 80, "%.*s", (int)(sp - n), n);
			snprintf(p->type_kind[p->ntype++], 16, "%.*s", (int)(eol - sp - 1), sp + 1);
		} else {
			cr_assert_neq(line[0], '#', "unexpected comment line");
			if (p->n == cap) {
				cap *= 2;
				p->s = realloc(p->s, cap * sizeof(*p->s));
				cr_assert_not_null(p->s);
			}
			struct sample *s = &p->s[p->n++];
			memset(s, 0, sizeof(*s));
			const char *c = line;
			size_t k = 0;
			while (c < eol && *c != '{' && *c != ' ') {
				cr_assert_lt(k, sizeof(s->name) - 1);
				s->name[k++] = *c++;
			}
			if (*c == '{') {
				c++;
				while (*c != '}') {
					const char *eq = strchr(c, '=');
					cr_assert(eq && eq[1] == '"', "bad label at %.40s", c);
					int is_rule = (size_t)(eq - c) == 4 && !strncmp(c, "rule", 4);
					int is_le = (size_t)(eq - c) == 2 && !strncmp(c, "le", 2);
					cr_assert(is_rule || is_le, "unknown label %.*s", (int)(eq - c), c);
					char *dst = is_rule ? s->rule : s->le;
					size_t dcap = is_rule ? sizeof(s->rule) : sizeof(s->le), d = 0;
					c = eq + 2;
					while (*c != '"') {
						cr_assert(c < eol, "label value runs past the line");
						char ch = *c++;
						if (ch == '\\') {
							ch = *c++;
							cr_assert(ch == '\\' || ch == '"' || ch == 'n',
							          "bad escape \\%c", ch);
							if (ch == 'n')
								ch = '\n';
						}
						cr_assert_lt(d, dcap - 1);
						dst[d++] = ch;
					}
					c++;
					if (*c == ',')
						c++;
				}
				c++;
			}
			cr_assert_eq(*c, ' ', "no space before the value: %.60s", line);
			c++;
			cr_assert_lt((size_t)(eol - c), sizeof(s->value));
			memcpy(s->value, c, (size_t)(eol - c));
		}
		line = eol + 1;
	}
}

static const struct sample *find(const struct parsed *p, const char *name, const char *rule,
                                 const char *le)
{
	const struct sample *hit = NULL;
	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->s[i].name, name) && !strcmp(p->s[i].rule, rule) &&
		    !strcmp(p->s[i].le, le)) {
			cr_assert_null(hit, "two samples %s{rule=%s,le=%s}", name, rule, le);
			hit = &p->s[i];
		}
	cr_assert_not_null(hit, "no sample %s{rule=\"%s\",le=\"%s\"}", name, rule, le);
	return hit;
}

static uint64_t value_u64(const struct sample *s)
{
	char *end;
	unsigned long long v = strtoull(s->value, &end, 10);
	cr_assert(*s->value && !*end, "%s: value '%s' is not an integer", s->name, s->value);
	return v;
}

/* ---- recording -------------------------------------------------------- */

Test(metrics, init_parameters)
{
	sluice__metrics_t m;
	cr_assert_eq(sluice__metrics_init(NULL, 0), SLUICE_EINVAL);
	cr_assert_eq(sluice__metrics_init(&m, SLUICE_STRIPE_CELLS_MAX + 1), SLUICE_ECELLS);
	cr_assert_eq(sluice__metrics_init(&m, 1), 0);
	cr_assert_eq(sluice_stripe_cells(&m.counter[0]), 1);
	cr_assert_eq(sluice_stripe_cells(&m.queue_wait.sum_us), 1);
	sluice__metrics_free(&m);
	sluice__metrics_free(&m); /* a second free is a no-op */
	sluice__metrics_free(NULL);
	cr_assert_eq(sluice__metrics_init(&m, 3), 0);
	cr_assert_eq(sluice_stripe_cells(&m.latency.bucket[SLUICE__METRICS_LATENCY_BOUNDS]), 4);
	sluice__metrics_free(&m);
}

/* A value equal to a bound counts in that bound's bucket (le); one ns more
 * in the next; 0 in the first; anything past the last bound in +Inf. */
Test(metrics, bucket_edges)
{
	sluice__metrics_t m;
	init_ok(&m);
	const sluice__hist_t *h = &m.latency;
	cr_assert_eq(sluice__hist_index(h, 0), 0);
	for (uint32_t i = 0; i < h->nbounds; i++) {
		cr_assert_eq(sluice__hist_index(h, h->bounds[i]), i, "bound %u", i);
		cr_assert_eq(sluice__hist_index(h, h->bounds[i] + 1), i + 1, "bound %u + 1", i);
		if (i > 0)
			cr_assert_lt(h->bounds[i - 1], h->bounds[i]);
		/* the p99 resolution adaptive_internal.h states: at most 2x */
		if (i > 0)
			cr_assert_leq(h->bounds[i], 2 * h->bounds[i - 1], "bounds %u, %u", i - 1, i);
	}
	cr_assert_eq(sluice__hist_index(h, UINT64_MAX), h->nbounds);
	for (uint32_t i = 0; i < m.queue_wait.nbounds; i++)
		cr_assert_eq(sluice__hist_index(&m.queue_wait, m.queue_wait.bounds[i]), i);

	uint64_t counts[SLUICE__METRICS_BOUNDS_MAX + 1], sum;
	sluice__metrics_observe(&m.latency, 5000000);     /* = 5 ms bound */
	sluice__metrics_observe(&m.latency, 5000001);     /* next bucket  */
	sluice__metrics_observe(&m.latency, UINT64_MAX);  /* +Inf         */
	cr_assert_eq(sluice__hist_read(&m.latency, counts, &sum), 3);
	cr_assert_eq(counts[5], 1);
	cr_assert_eq(counts[6], 1);
	cr_assert_eq(counts[SLUICE__METRICS_LATENCY_BOUNDS], 1);
	/* UINT64_MAX ns rounds to 18446744073709552 us */
	cr_assert_eq(sum, 5000u + 5000u + 18446744073709552ull, "sum %" PRIu64, sum);
	sluice__metrics_free(&m);
}

/* _sum is kept in whole us, each observation rounded to the nearest. */
Test(metrics, sum_rounds_to_nearest_us)
{
	sluice__metrics_t m;
	init_ok(&m);
	uint64_t counts[SLUICE__METRICS_BOUNDS_MAX + 1], sum;
	sluice__metrics_observe(&m.queue_wait, 1499); /* 1 us */
	sluice__metrics_observe(&m.queue_wait, 1500); /* 2 us */
	sluice__metrics_observe(&m.queue_wait, 499);  /* 0 us */
	sluice__metrics_observe(&m.queue_wait, 0);    /* 0 us */
	cr_assert_eq(sluice__hist_read(&m.queue_wait, counts, &sum), 4);
	cr_assert_eq(sum, 3);
	sluice__metrics_complete(&m, 2000000, 1);
	sluice__metrics_complete(&m, 3000000, 0);
	cr_assert_eq(sluice__hist_read(&m.latency, counts, &sum), 2);
	cr_assert_eq(sum, 5000);
	cr_assert_eq(sluice__metrics_read(&m, SLUICE__METRICS_FAILURES), 1);
	sluice__metrics_free(&m);
}

/* ---- the exposition ---------------------------------------------------- */

#define NROWS 4
static const char *const ids[NROWS] = { "order-create", "quo\"te", "back\\slash",
	                                "new\nline\\\"" };

static const char *const counter_names[SLUICE__METRICS_NCOUNTERS] = {
	"sluice_rule_passed_total",
	"sluice_rule_refused_total",        "sluice_rule_shadow_refused_total",
	"sluice_rule_queued_total",         "sluice_rule_errors_total",
	"sluice_rule_failures_total",       "sluice_rule_skipped_total",
};

/* The le values as the text must spell them (seconds, exact decimals). */
static const char *const latency_le[] = {
	"0.0005", "0.001", "0.0015", "0.002", "0.003", "0.005", "0.0075", "0.01", "0.015",
	"0.02",   "0.03",  "0.05",   "0.075", "0.1",   "0.15",  "0.2",    "0.3",  "0.5",
	"0.75",   "1",     "1.5",    "2",     "3",     "5",     "10",     "+Inf",
};
static const char *const queue_le[] = {
	"0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
	"0.1",    "0.25",    "0.5",    "1",     "2.5",    "5",     "10",   "+Inf",
};

/* What row r records, and what the text must then say. */
static uint64_t counter_value(size_t r, unsigned c)
{
	if (c == SLUICE__METRICS_FAILURES)
		return r + 1; /* each is also a latency observation below */
	return (r + 1) * 1000 + c * 7 + r;
}

/* Latency observations of row r: r + 2 of them, spread over the buckets,
 * with bound-equal values and one past the last bound. */
static uint64_t latency_obs(size_t r, size_t i)
{
	static const uint64_t v[] = { 0, 500000, 75000000, 75000001, 999999999, 20000000000ull, 1234 };
	return v[(r + i) % 7];
}

static struct sluice__metrics_engine engine_counters;

static void record_rows(sluice__metrics_t *m, sluice__metrics_row_t *rows)
{
	for (size_t r = 0; r < NROWS; r++) {
		init_ok(&m[r]);
		for (unsigned c = 0; c < SLUICE__METRICS_NCOUNTERS; c++)
			if (c != SLUICE__METRICS_FAILURES)
				sluice__metrics_count(&m[r], (sluice__metrics_outcome_t)c,
				                      counter_value(r, c));
		/* FAILURES through complete() as the engine records them: one
		 * latency observation each, then plain observations */
		for (uint64_t k = 0; k < counter_value(r, SLUICE__METRICS_FAILURES); k++)
			sluice__metrics_complete(&m[r], 3000000, 0);
		for (size_t i = 0; i < r + 2; i++)
			sluice__metrics_observe(&m[r].latency, latency_obs(r, i));
		for (size_t i = 0; i <= r; i++)
			sluice__metrics_observe(&m[r].queue_wait, 250000 * (i + 1) + 499);
		rows[r] = (sluice__metrics_row_t){ .rule_id = ids[r], .m = &m[r],
			                           .limit = 120 + r, .limit_configured = 200 + r };
	}
	atomic_store(&engine_counters.reloads, 0);
	atomic_store(&engine_counters.reload_failures, 0);
	sluice__metrics_engine_reload(&engine_counters, 1, 1);
	sluice__metrics_engine_reload(&engine_counters, 0, 99);
	sluice__metrics_engine_reload(&engine_counters, 1, 2);
	sluice__metrics_engine_reload(&engine_counters, 1, 3);
	sluice__metrics_engine_reload(&engine_counters, 0, 99);
}

static char *render(void)
{
	static sluice__metrics_t m[NROWS];
	sluice__metrics_row_t rows[NROWS];
	record_rows(m, rows);
	sluice__metrics_view_t v = { .rows = rows, .nrows = NROWS, .engine = &engine_counters };
	struct sink s = { 0 };
	int rc = sluice__metrics_write(&v, sink_write, &s);
	cr_assert_eq(rc, 0, "write = %d", rc);
	cr_assert_leq(s.max_piece, SLUICE__METRICS_BUF);
	for (size_t r = 0; r < NROWS; r++)
		sluice__metrics_free(&m[r]);
	return s.buf;
}

static void check_hist(const struct parsed *p, const char *name, const char *id,
                       const uint64_t *bounds, uint32_t nb, const char *const *le,
                       const uint64_t *obs, size_t nobs)
{
	char full[96];
	uint64_t sum_us = 0;
	for (size_t i = 0; i < nobs; i++)
		sum_us += (obs[i] + 500) / 1000;
	for (uint32_t b = 0; b <= nb; b++) {
		uint64_t want = 0;
		for (size_t i = 0; i < nobs; i++)
			want += b == nb || obs[i] <= bounds[b];
		snprintf(full, sizeof(full), "%s_bucket", name);
		uint64_t got = value_u64(find(p, full, id, le[b]));
		cr_assert_eq(got, want, "%s{rule=%s,le=%s} = %" PRIu64 ", want %" PRIu64, full, id,
		             le[b], got, want);
	}
	snprintf(full, sizeof(full), "%s_count", name);
	cr_assert_eq(value_u64(find(p, full, id, "")), nobs);
	snprintf(full, sizeof(full), "%s_sum", name);
	char want_sum[48];
	if (sum_us % 1000000)
		snprintf(want_sum, sizeof(want_sum), "%" PRIu64 ".%06" PRIu64, sum_us / 1000000,
		         sum_us % 1000000);
	else
		snprintf(want_sum, sizeof(want_sum), "%" PRIu64, sum_us / 1000000);
	/* trailing zeros of the fraction are not written */
	if (strchr(want_sum, '.'))
		for (size_t k = strlen(want_sum); want_sum[k - 1] == '0'; k--)
			want_sum[k - 1] = '\0';
	cr_assert_str_eq(find(p, full, id, "")->value, want_sum, "%s{rule=%s}", full, id);
}

Test(metrics, exposition_parses_back_exactly)
{
	char *text = render();
	struct parsed p;
	parse(text, &p);

	/* one HELP and one TYPE per family, in the same order */
	static const char *const families[] = {
		"sluice_rule_requests_total", "sluice_rule_passed_total",
		"sluice_rule_refused_total", "sluice_rule_shadow_refused_total",
		"sluice_rule_queued_total", "sluice_rule_errors_total",
		"sluice_rule_failures_total", "sluice_rule_skipped_total",
		"sluice_rule_latency_seconds",
		"sluice_rule_queue_wait_seconds", "sluice_rule_limit",
		"sluice_rule_limit_configured", "sluice_reloads_total",
		"sluice_reload_failures_total", "sluice_rules_version",
	};
	static const char *const kinds[] = { "counter", "counter", "counter", "counter",
		                             "counter", "counter", "counter", "counter", "histogram",
		                             "histogram", "gauge", "gauge", "counter",
		                             "counter", "gauge" };
	size_t nf = sizeof(families) / sizeof(families[0]);
	cr_assert_eq(p.nhelp, nf);
	cr_assert_eq(p.ntype, nf);
	for (size_t f = 0; f < nf; f++) {
		cr_assert_str_eq(p.help[f], families[f]);
		cr_assert_str_eq(p.type[f], families[f]);
		cr_assert_str_eq(p.type_kind[f], kinds[f], "%s", families[f]);
	}

	size_t want_samples = 0;
	for (size_t r = 0; r < NROWS; r++) {
		for (unsigned c = 0; c < SLUICE__METRICS_NCOUNTERS; c++) {
			uint64_t got = value_u64(find(&p, counter_names[c], ids[r], ""));
			cr_assert_eq(got, counter_value(r, c), "%s{rule=%s}", counter_names[c], ids[r]);
		}
		/* requests is passed + refused (metrics_internal.h) */
		cr_assert_eq(value_u64(find(&p, "sluice_rule_requests_total", ids[r], "")),
		             counter_value(r, SLUICE__METRICS_PASSED) +
		                     counter_value(r, SLUICE__METRICS_REFUSED));
		uint64_t lat[64];
		size_t nlat = 0;
		for (uint64_t k = 0; k < counter_value(r, SLUICE__METRICS_FAILURES); k++)
			lat[nlat++] = 3000000;
		for (size_t i = 0; i < r + 2; i++)
			lat[nlat++] = latency_obs(r, i);
		check_hist(&p, "sluice_rule_latency_seconds", ids[r], sluice__metrics_latency_bounds,
		           SLUICE__METRICS_LATENCY_BOUNDS, latency_le, lat, nlat);
		uint64_t q[NROWS];
		for (size_t i = 0; i <= r; i++)
			q[i] = 250000 * (i + 1) + 499;
		check_hist(&p, "sluice_rule_queue_wait_seconds", ids[r], sluice__metrics_queue_bounds,
		           SLUICE__METRICS_QUEUE_BOUNDS, queue_le, q, r + 1);
		cr_assert_eq(value_u64(find(&p, "sluice_rule_limit", ids[r], "")), 120 + r);
		cr_assert_eq(value_u64(find(&p, "sluice_rule_limit_configured", ids[r], "")), 200 + r);
		want_samples += 1 + SLUICE__METRICS_NCOUNTERS + (SLUICE__METRICS_LATENCY_BOUNDS + 3) +
		                (SLUICE__METRICS_QUEUE_BOUNDS + 3) + 2;
	}
	cr_assert_eq(value_u64(find(&p, "sluice_reloads_total", "", "")), 3);
	cr_assert_eq(value_u64(find(&p, "sluice_reload_failures_total", "", "")), 2);
	cr_assert_eq(value_u64(find(&p, "sluice_rules_version", "", "")), 3);
	want_samples += 3;
	cr_assert_eq(p.n, want_samples, "%zu samples, want %zu", p.n, want_samples);
	free(p.s);
	free(text);
}

/* promtool (Debian's prometheus package) must accept the text, lint
 * included.  Skipped, saying so, only where meson found no promtool. */
Test(metrics, promtool_accepts)
{
	if (!PROMTOOL[0] || access(PROMTOOL, X_OK) != 0)
		cr_skip_test("promtool not found at configure time (Debian package prometheus): "
		             "exposition not checked by promtool");
	char *text = render();
	char out[] = "/tmp/sluice-promtool-XXXXXX";
	int fd = mkstemp(out);
	cr_assert_geq(fd, 0);
	close(fd);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "'%s' check metrics >'%s' 2>&1", PROMTOOL, out);
	FILE *f = popen(cmd, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
	int status = pclose(f);
	char msg[4096] = "";
	FILE *o = fopen(out, "r");
	if (o) {
		size_t k = fread(msg, 1, sizeof(msg) - 1, o);
		msg[k] = '\0';
		fclose(o);
	}
	unlink(out);
	cr_assert_eq(status, 0, "promtool check metrics: status %d:\n%s\n--- text:\n%s", status, msg,
	             text);
	free(text);
}

/* The writer hands out pieces of at most its buffer, and a rule id far
 * longer than the buffer is written whole and escaped. */
Test(metrics, long_id_crosses_pieces)
{
	sluice__metrics_t m;
	init_ok(&m);
	sluice__metrics_count(&m, SLUICE__METRICS_PASSED, 5);
	static char id[5001];
	for (size_t i = 0; i < 5000; i++)
		id[i] = i % 3 == 0 ? '"' : i % 3 == 1 ? '\\' : 'x';
	sluice__metrics_row_t row = { .rule_id = id, .m = &m, .limit = 1, .limit_configured = 2 };
	sluice__metrics_view_t v = { .rows = &row, .nrows = 1 };
	struct sink s = { 0 };
	cr_assert_eq(sluice__metrics_write(&v, sink_write, &s), 0);
	cr_assert_gt(s.calls, 1);
	cr_assert_eq(s.max_piece, SLUICE__METRICS_BUF);
	struct parsed p;
	parse(s.buf, &p);
	cr_assert_eq(value_u64(find(&p, "sluice_rule_requests_total", id, "")), 5);
	cr_assert_eq(value_u64(find(&p, "sluice_rule_passed_total", id, "")), 5);
	cr_assert_eq(p.ntype, 12, "no engine families without an engine");
	free(p.s);
	free(s.buf);
	sluice__metrics_free(&m);
}

/* A non-zero return from write stops the writer and is its result. */
Test(metrics, write_error_stops)
{
	sluice__metrics_t m;
	init_ok(&m);
	static char id[3000];
	memset(id, 'a', sizeof(id) - 1);
	sluice__metrics_row_t row = { .rule_id = id, .m = &m };
	sluice__metrics_view_t v = { .rows = &row, .nrows = 1 };
	struct sink s = { .fail_at = 2 };
	cr_assert_eq(sluice__metrics_write(&v, sink_write, &s), 7);
	cr_assert_eq(s.calls, 2, "write called %zu times after failing", s.calls);
	free(s.buf);
	sluice__metrics_free(&m);
}

Test(metrics, bad_views)
{
	sluice__metrics_t m;
	init_ok(&m);
	struct sink s = { 0 };
	sluice__metrics_row_t row = { .rule_id = NULL, .m = &m };
	sluice__metrics_view_t v = { .rows = &row, .nrows = 1 };
	cr_assert_eq(sluice__metrics_write(&v, sink_write, &s), SLUICE_EINVAL);
	row = (sluice__metrics_row_t){ .rule_id = "a", .m = NULL };
	cr_assert_eq(sluice__metrics_write(&v, sink_write, &s), SLUICE_EINVAL);
	v = (sluice__metrics_view_t){ .rows = NULL, .nrows = 1 };
	cr_assert_eq(sluice__metrics_write(&v, sink_write, &s), SLUICE_EINVAL);
	cr_assert_eq(sluice__metrics_write(NULL, sink_write, &s), SLUICE_EINVAL);
	v = (sluice__metrics_view_t){ 0 };
	cr_assert_eq(sluice__metrics_write(&v, NULL, &s), SLUICE_EINVAL);
	cr_assert_eq(s.calls, 0, "nothing is written for a refused view");
	/* an empty view is valid: every family's HELP and TYPE, no samples */
	cr_assert_eq(sluice__metrics_write(&v, sink_write, &s), 0);
	struct parsed p;
	parse(s.buf, &p);
	cr_assert_eq(p.n, 0);
	cr_assert_eq(p.ntype, 12);
	free(p.s);
	free(s.buf);
	sluice__metrics_free(&m);
}
