/*
 * trace.c - trace files: one request per line, TIME [KEY [PERMITS]].
 *
 * DESIGN: strict.  A line is blank, a comment, or a request; anything else
 * stops the load with "FILE:LINE: what is wrong ('the field')" and the run
 * fails.  A skipped line would make the simulated traffic differ from the
 * trace without a word, and every number after it would be about traffic
 * nobody sent.  Fields are separated by runs of spaces or tabs; a line with
 * a comma is read as CSV instead (exact fields, so "1.5,,3" is time 1.5, no
 * key, 3 permits).  Keys are interned to small ids (0 = no key) through an
 * open-addressing table, so the event loop indexes limiters by id.  Lines
 * may come out of time order (merged logs): the requests are sorted by
 * time with a stable merge sort (equal times keep file order) and the
 * number of lines that went back in time is reported.
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

int sim_trace_read(FILE *f, const char *name, sim_trace_t *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	char *line = NULL;
	size_t linecap = 0, lineno = 0;
	ssize_t got;
	uint64_t newest = 0;
	t->keycap = 16;
	t->keys = malloc(t->keycap * sizeof(char *));
	if (!t->keys || !(t->keys[0] = strdup("-")))
		goto nomem;
	t->nkeys = 1;
	while ((got = getline(&line, &linecap, f)) != -1) {
		lineno++;
		if (strlen(line) != (size_t)got) {
			snprintf(err, errlen, "%s:%zu: NUL byte in the line", name, lineno);
			goto fail;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		line[strcspn(line, "\r\n")] = '\0';
		char *fld[4];
		int nf = split(line, fld);
		if (nf == 0 || (nf == 1 && fld[0][0] == '\0'))
			continue; /* blank or comment */
		if (nf > 3) {
			snprintf(err, errlen,
			         "%s:%zu: too many fields (expected TIME [KEY [PERMITS]])", name,
			         lineno);
			goto fail;
		}
		sim_event_t ev = { .n = 1, .key = 0 };
		const char *why = sim_parse_duration(fld[0], &ev.t);
		if (why) {
			snprintf(err, errlen, "%s:%zu: bad time '%.40s': %s", name, lineno, fld[0],
			         why);
			goto fail;
		}
		if (nf >= 2 && fld[1][0] != '\0') {
			if (strlen(fld[1]) > SIM_KEY_MAX) {
				snprintf(err, errlen, "%s:%zu: key longer than %d bytes", name, lineno,
				         SIM_KEY_MAX);
				goto fail;
			}
			int64_t id = intern(t, fld[1]);
			if (id < 0)
				goto nomem;
			ev.key = (uint32_t)id;
		}
		if (nf == 3 && fld[2][0] != '\0') {
			uint64_t n;
			why = sim_parse_count(fld[2], &n);
			if (!why && (n == 0 || n > UINT32_MAX))
				why = "must be 1..4294967295";
			if (why) {
				snprintf(err, errlen, "%s:%zu: bad permits '%.40s': %s", name, lineno,
				         fld[2], why);
				goto fail;
			}
			ev.n = (uint32_t)n;
		}
		if (t->n == t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 1024;
			sim_event_t *e = realloc(t->ev, cap * sizeof(*e));
			if (!e)
				goto nomem;
			t->ev = e;
			t->cap = cap;
		}
		if (ev.t < newest)
			t->unsorted++;
		else
			newest = ev.t;
		t->ev[t->n++] = ev;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s:%zu: read error: %s", name, lineno + 1, strerror(errno));
		goto fail;
	}
	if (t->n == 0) {
		snprintf(err, errlen, "%s: no requests (%zu lines, all blank or comments)", name,
		         lineno);
		goto fail;
	}
	if (t->unsorted) {
		sim_event_t *tmp = malloc(t->n * sizeof(*tmp));
		if (!tmp)
			goto nomem;
		sort_by_time(t->ev, tmp, t->n);
		free(tmp);
	}
	free(line);
	return 0;
nomem:
	snprintf(err, errlen, "%s:%zu: out of memory", name, lineno);
fail:
	free(line);
	sim_trace_free(t);
	return -1;
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
