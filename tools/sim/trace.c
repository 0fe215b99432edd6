/* SPDX-License-Identifier: MIT */
/*
 * trace.c - trace files: one request per line, TIME [KEY [PERMITS]].
 *
 * DESIGN: strict.  A line is blank, a comment, or a request; anything else
 * stops the load with "FILE:LINE:COL: what is wrong ('the field')" (COL: the
 * field's first byte, counted from 1) and the run fails.  A skipped line would make the simulated traffic differ from the
 * trace without a word, and every number after it would be about traffic
 * nobody sent.  Fields are separated by runs of spaces or tabs; a line with
 * a comma is read as CSV instead (exact fields, so "1.5,,3" is time 1.5, no
 * key, 3 permits).  Keys are interned to small ids (0 = no key) through an
 * open-addressing table, so the event loop indexes limiters by id.  Lines
 * may come out of time order (merged logs): the requests are sorted by
 * time with a stable merge sort (equal times keep file order) and the
 * number of lines that went back in time is reported.  A file is read line
 * by line (getline) and a memory buffer split at its newlines; both hand
 * each line to one take_line(), so sim_trace_parse() (what the fuzz target
 * fuzz/fuzz_sim_trace.c drives) is the parser the tool runs, not a copy.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static int table_grow(sim_trace_t *t)
{
	size_t size = t->tabsize ? t->tabsize * 2 : 64;
	uint32_t *tab = calloc(size, sizeof(uint32_t));
	if (!tab)
		return -1;
	for (size_t id = 1; id < t->nkeys; id++) {
		size_t i = fnv1a(t->keys[id]) & (size - 1);
		while (tab[i])
			i = (i + 1) & (size - 1);
		tab[i] = (uint32_t)id + 1;
	}
	free(t->table);
	t->table = tab;
	t->tabsize = size;
	return 0;
}

/* the id of @key, added when new; -1 when out of memory or ids */
static int64_t intern(sim_trace_t *t, const char *key)
{
	if (strcmp(key, "-") == 0)
		return 0;
	if (2 * t->nkeys >= t->tabsize && table_grow(t) != 0)
		return -1;
	size_t i = fnv1a(key) & (t->tabsize - 1);
	while (t->table[i]) {
		uint32_t id = t->table[i] - 1;
		if (strcmp(t->keys[id], key) == 0)
			return id;
		i = (i + 1) & (t->tabsize - 1);
	}
	if (t->nkeys >= UINT32_MAX - 1)
		return -1;
	if (t->nkeys == t->keycap) {
		size_t cap = t->keycap * 2;
		char **k = realloc(t->keys, cap * sizeof(char *));
		if (!k)
			return -1;
		t->keys = k;
		t->keycap = cap;
	}
	char *copy = strdup(key);
	if (!copy)
		return -1;
	t->keys[t->nkeys] = copy;
	t->table[i] = (uint32_t)t->nkeys + 1;
	return (int64_t)t->nkeys++;
}

/* stable sort by time: bottom-up merge sort through @tmp */
static void sort_by_time(sim_event_t *ev, sim_event_t *tmp, size_t n)
{
	sim_event_t *a = ev, *b = tmp;
	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				b[k++] = a[j].t < a[i].t ? a[j++] : a[i++];
			while (i < mid)
				b[k++] = a[i++];
			while (j < hi)
				b[k++] = a[j++];
		}
		sim_event_t *s = a;
		a = b;
		b = s;
	}
	if (a != ev)
		memcpy(ev, a, n * sizeof(*ev));
}

/* Split @line into at most 4 fields (4 means "too many"). */
static int split(char *line, char *f[4])
{
	int nf = 0;
	if (strchr(line, ',')) {
		for (char *p = line;;) {
			char *comma = strchr(p, ',');
			if (comma)
				*comma = '\0';
			while (*p == ' ' || *p == '\t')
				p++;
			char *e = p + strlen(p);
			while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
				*--e = '\0';
			if (nf < 4)
				f[nf] = p;
			nf++;
			if (!comma)
				break;
			p = comma + 1;
		}
		return nf > 4 ? 4 : nf;
	}
	for (char *p = line;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		if (nf == 4)
			return 4;
		f[nf++] = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		if (*p)
			*p++ = '\0';
	}
	return nf;
}

void sim_trace_free(sim_trace_t *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nkeys; i++)
		free(t->keys[i]);
	free(t->keys);
	free(t->table);
	free(t->ev);
	memset(t, 0, sizeof(*t));
}

/* One parse in progress: what the messages name, and where it is. */
struct reader {
	sim_trace_t *t;
	const char *name;
	size_t lineno;
	uint64_t oldest, newest; /* the earliest and the latest time so far */
	char *err;
	size_t errlen;
};

/* the 1-based column of @p in @line */
static size_t col(const char *line, const char *p)
{
	return (size_t)(p - line) + 1;
}

/*
 * Parse one line of @len bytes (its newline included, if any; line[len] is
 * a NUL the caller put there) into r->t.  Return: 0; -1 with the message in
 * r->err; -2 out of memory.
 */
static int take_line(struct reader *r, char *line, size_t len)
{
	sim_trace_t *t = r->t;
	r->lineno++;
	size_t nul = strlen(line);
	if (nul != len) {
		snprintf(r->err, r->errlen, "%s:%zu:%zu: NUL byte in the line", r->name, r->lineno,
		         nul + 1);
		return -1;
	}
	char *hash = strchr(line, '#');
	if (hash)
		*hash = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	char *fld[4];
	int nf = split(line, fld);
	if (nf == 0 || (nf == 1 && fld[0][0] == '\0'))
		return 0; /* blank or comment */
	if (nf > 3) {
		snprintf(r->err, r->errlen,
		         "%s:%zu:%zu: too many fields (expected TIME [KEY [PERMITS]])", r->name,
		         r->lineno, col(line, fld[3]));
		return -1;
	}
	sim_event_t ev = { .n = 1, .key = 0 };
	const char *why = sim_parse_duration(fld[0], &ev.t);
	if (why) {
		snprintf(r->err, r->errlen, "%s:%zu:%zu: bad time '%.40s': %s", r->name, r->lineno,
		         col(line, fld[0]), fld[0], why);
		return -1;
	}
	if (nf >= 2 && fld[1][0] != '\0') {
		if (strlen(fld[1]) > SIM_KEY_MAX) {
			snprintf(r->err, r->errlen, "%s:%zu:%zu: key longer than %d bytes", r->name,
			         r->lineno, col(line, fld[1]), SIM_KEY_MAX);
			return -1;
		}
		int64_t id = intern(t, fld[1]);
		if (id < 0)
			return -2;
		ev.key = (uint32_t)id;
	}
	if (nf == 3 && fld[2][0] != '\0') {
		uint64_t n;
		why = sim_parse_count(fld[2], &n);
		if (!why && (n == 0 || n > UINT32_MAX))
			why = "must be 1..4294967295";
		if (why) {
			snprintf(r->err, r->errlen, "%s:%zu:%zu: bad permits '%.40s': %s", r->name,
			         r->lineno, col(line, fld[2]), fld[2], why);
			return -1;
		}
		ev.n = (uint32_t)n;
	}
	if (sim_events_reserve(&t->ev, &t->cap, t->n, 1024) != 0)
		return -2;
	/* the lines of the earliest and the latest time, for sim_trace_span's
	 * message (the sort below loses the order) */
	if (t->n == 0 || ev.t < r->oldest) {
		r->oldest = ev.t;
		t->first_line = r->lineno;
	}
	if (t->n == 0 || ev.t >= r->newest) {
		r->newest = ev.t;
		t->last_line = r->lineno;
	} else {
		t->unsorted++;
	}
	t->ev[t->n++] = ev;
	return 0;
}

static int reader_start(struct reader *r, const char *name, sim_trace_t *t, char *err,
                        size_t errlen)
{
	memset(t, 0, sizeof(*t));
	*r = (struct reader){ .t = t, .name = name, .err = err, .errlen = errlen };
	t->keycap = 16;
	t->keys = malloc(t->keycap * sizeof(char *));
	if (!t->keys || !(t->keys[0] = strdup("-")))
		return -2;
	t->nkeys = 1;
	return 0;
}

/* After the last line: at least one request, sorted by time. */
static int reader_finish(struct reader *r)
{
	sim_trace_t *t = r->t;
	if (t->n == 0) {
		snprintf(r->err, r->errlen, "%s: no requests (%zu lines, all blank or comments)",
		         r->name, r->lineno);
		return -1;
	}
	if (t->unsorted) {
		sim_event_t *tmp = malloc(t->n * sizeof(*tmp));
		if (!tmp)
			return -2;
		sort_by_time(t->ev, tmp, t->n);
		free(tmp);
	}
	return 0;
}

/* -2 (out of memory) and -1 both fail the load and keep nothing */
static int reader_end(struct reader *r, int rc)
{
	if (rc == -2)
		snprintf(r->err, r->errlen, "%s:%zu: out of memory", r->name, r->lineno);
	if (rc != 0) {
		sim_trace_free(r->t);
		return -1;
	}
	return 0;
}

int sim_trace_read(FILE *f, const char *name, sim_trace_t *t, char *err, size_t errlen)
{
	struct reader r;
	char *line = NULL;
	size_t linecap = 0;
	ssize_t got;
	int rc = reader_start(&r, name, t, err, errlen);
	while (rc == 0 && (got = getline(&line, &linecap, f)) != -1)
		rc = take_line(&r, line, (size_t)got);
	if (rc == 0 && ferror(f)) {
		snprintf(err, errlen, "%s:%zu: read error: %s", name, r.lineno + 1, strerror(errno));
		rc = -1;
	}
	if (rc == 0)
		rc = reader_finish(&r);
	free(line);
	return reader_end(&r, rc);
}

int sim_trace_parse(const char *buf, size_t len, const char *name, sim_trace_t *t, char *err,
                    size_t errlen)
{
	struct reader r;
	char *line = NULL;
	size_t linecap = 0;
	int rc = reader_start(&r, name, t, err, errlen);
	/* each line, its newline included, copied out (take_line writes into
	 * it) with a NUL after it, exactly as getline hands it over */
	for (size_t at = 0; rc == 0 && at < len;) {
		const char *nl = memchr(buf + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (buf + at)) + 1 : len - at;
		if (n + 1 > linecap) {
			char *l = realloc(line, n + 1);
			if (!l) {
				rc = -2;
				break;
			}
			line = l;
			linecap = n + 1;
		}
		memcpy(line, buf + at, n);
		line[n] = '\0';
		rc = take_line(&r, line, n);
		at += n;
	}
	if (rc == 0)
		rc = reader_finish(&r);
	free(line);
	return reader_end(&r, rc);
}

int sim_trace_load(const char *path, sim_trace_t *t, char *err, size_t errlen)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	if (!f) {
		memset(t, 0, sizeof(*t));
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	int rc = sim_trace_read(f, path, t, err, errlen);
	if (f != stdin)
		fclose(f);
	return rc;
}

int sim_trace_span(const sim_trace_t *t, const char *name, uint64_t *start_ns,
                   uint64_t *duration_ns, char *err, size_t errlen)
{
	uint64_t first = t->ev[0].t, last = t->ev[t->n - 1].t;
	/* [first, last] holds last - first + 1 ns: 2^64 when the trace has
	 * both 0 and 2^64 - 1, one more than a duration can say */
	if (last - first == UINT64_MAX) {
		snprintf(err, errlen,
		         "%s:%zu and line %zu: the trace spans every ns from 0 to 2^64 - 1 "
		         "(2^64 ns), one more than a run can hold",
		         name, t->first_line, t->last_line);
		return -1;
	}
	*start_ns = first;
	*duration_ns = last - first + 1;
	return 0;
}
