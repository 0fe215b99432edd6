/* SPDX-License-Identifier: MIT */
/*
 * rules/rules.c - the loader's entry points: read the input (capped), parse
 * it into a tree (tree.c), check it against the schema (schema.c), and hand
 * back either the description or the error list.
 *
 * DESIGN.  A load owns three allocations, all local to the call: the tree's
 * arena (freed before return, whatever happened), the description's arena
 * (kept in the sluice_rules_t on success, freed otherwise) and the error
 * list (kept on failure, freed otherwise).  Nothing is global and nothing
 * is static but constant tables, so loads are reentrant; every exit path
 * goes through one cleanup, so none leaks (the ASan build runs every error
 * kind of tests/rules/test_rules.c and the fuzz target).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rules_internal.h"
#include "sluice/error.h"

/* ---- arena ---------------------------------------------------------- */

struct sluice__arena_chunk {
	struct sluice__arena_chunk *next;
	size_t used, cap;
	_Alignas(16) unsigned char data[];
};

/* 64 KiB chunks: a typical rule file's tree fits in one or two, and a
 * 4 MiB hostile one costs a few hundred mallocs, not one per node. */
#define ARENA_CHUNK (64u << 10)

void *sluice__arena_alloc(struct sluice__arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15; /* every block 16-byte aligned */
	struct sluice__arena_chunk *c = a->head;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		c->next = a->head;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += n;
	memset(p, 0, n);
	return p;
}

char *sluice__arena_strndup(struct sluice__arena *a, const char *s, size_t n)
{
	if (n == SIZE_MAX)
		return NULL;
	char *d = sluice__arena_alloc(a, n + 1);
	if (d && n)
		memcpy(d, s, n);
	return d;
}

void sluice__arena_free(struct sluice__arena *a)
{
	if (!a)
		return; /* finish(): the arena's own allocation may have failed */
	struct sluice__arena_chunk *c = a->head;
	while (c) {
		struct sluice__arena_chunk *next = c->next;
		free(c);
		c = next;
	}
	a->head = NULL;
}

/* ---- errors --------------------------------------------------------- */

/*
 * The list is allocated whole at the start of a load (100 entries): adding
 * an error never allocates, so a load that runs out of memory can still
 * report what it found, and the cap bounds what a hostile file costs.
 */
void sluice__err(struct sluice__errs *x, const sluice_rules_mark_t *m, int code,
                 const char *fmt, ...)
{
	sluice_rules_errors_t *e = x->e;
	if (e->count == SLUICE_RULES_ERRORS_MAX) {
		e->dropped++;
		return;
	}
	sluice_rules_error_t *r = &e->errors[e->count++];
	r->mark = m ? *m : (sluice_rules_mark_t){ 0, 0 };
	r->code = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

size_t sluice__err_total(const struct sluice__errs *x)
{
	return x->e->count + x->e->dropped;
}

static int mark_cmp(const void *pa, const void *pb)
{
	const sluice_rules_error_t *a = pa, *b = pb;
	if (a->mark.line != b->mark.line)
		return a->mark.line < b->mark.line ? -1 : 1;
	if (a->mark.col != b->mark.col)
		return a->mark.col < b->mark.col ? -1 : 1;
	/* equal marks keep the order they were found in: the index is the
	 * tie-break (qsort is not stable) */
	return a < b ? -1 : a > b;
}

void sluice__errors_sort(sluice_rules_errors_t *e)
{
	qsort(e->errors, e->count, sizeof(e->errors[0]), mark_cmp);
}

void sluice_rules_errors_free(sluice_rules_errors_t *e)
{
	if (!e)
		return;
	free(e->errors);
	free((char *)e->file);
	free(e);
}

sluice_rules_errors_t *sluice__errors_new(const char *name)
{
	sluice_rules_errors_t *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->errors = calloc(SLUICE_RULES_ERRORS_MAX, sizeof(*e->errors));
	e->file = strdup(name);
	if (!e->errors || !e->file) {
		sluice_rules_errors_free(e);
		return NULL;
	}
	return e;
}

int sluice_rules_error_text(const sluice_rules_errors_t *e, size_t i, char *buf, size_t len)
{
	if (!e || i >= e->count || (!buf && len))
		return SLUICE_EINVAL;
	const sluice_rules_error_t *r = &e->errors[i];
	int n;
	if (r->mark.line == 0)
		n = snprintf(buf, len, "%s: %s", e->file, r->msg);
	else
		n = snprintf(buf, len, "%s:%u:%u: %s", e->file, r->mark.line, r->mark.col, r->msg);
	return n < 0 ? SLUICE_EINVAL : n;
}

/* ---- loads ---------------------------------------------------------- */

void sluice_rules_free(sluice_rules_t *r)
{
	if (!r)
		return;
	struct sluice__arena *a = r->arena;
	sluice__arena_free(a);
	free(a);
	free((char *)r->file);
	free(r);
}

/* The load proper, once the input is in memory (or known to be bad: then
 * @x already holds its error and @buf is NULL). */
static int finish(const char *name, const unsigned char *buf, size_t len,
                  const sluice_rules_options_t *opt, struct sluice__errs *x,
                  sluice_rules_t **out, sluice_rules_errors_t **errs)
{
	struct sluice__arena tree = { 0 };
	struct sluice__arena *desc = calloc(1, sizeof(*desc));
	sluice_rules_t *r = calloc(1, sizeof(*r));
	char *file = strdup(name);
	sluice_rule_t *rules = NULL;
	size_t count = 0;
	uint64_t memory = 0, budget = 0;
	const sluice_rules_backend_t *backends = NULL;
	size_t nbackends = 0;
	int rc;

	if (!desc || !r || !file)
		x->oom = 1;
	if (!x->oom && buf) {
		int complete = 0;
		struct sluice__node *root = sluice__tree_parse(&tree, x, buf, len, &complete);
		if (complete && !x->oom) {
			/* the schema is checked only on a tree read to its end:
			 * after a syntax error it would report what is missing */
			rules = sluice__schema_check(desc, x, root, opt, &count, &memory, &budget,
			                             &backends, &nbackends);
		}
	}
	sluice__arena_free(&tree);

	if (x->oom) {
		rc = SLUICE_ENOMEM;
	} else if (sluice__err_total(x) > 0) {
		sluice__errors_sort(x->e);
		rc = (int)(x->e->count > 0 ? x->e->count : 1);
		if (errs) {
			*errs = x->e;
			x->e = NULL;
		}
	} else {
		r->file = file;
		r->count = count;
		r->rules = rules;
		r->memory_bytes = memory;
		r->memory_budget = budget;
		r->nbackends = nbackends;
		r->backends = backends;
		r->arena = desc;
		*out = r;
		return 0;
	}
	sluice__arena_free(desc);
	free(desc);
	free(r);
	free(file);
	return rc;
}

/* A cap above the largest is refused, not lowered: the caller asked for
 * something the loader does not do. */
static int check_args(const sluice_rules_options_t *opt, sluice_rules_t **out, size_t *cap)
{
	if (!out)
		return SLUICE_EINVAL;
	*cap = SLUICE_RULES_MAX_BYTES;
	if (opt && opt->max_bytes) {
		if (opt->max_bytes > SLUICE_RULES_MAX_BYTES)
			return SLUICE_EINVAL;
		*cap = opt->max_bytes;
	}
	return 0;
}

int sluice_rules_load_buffer(const char *name, const void *buf, size_t len,
                             const sluice_rules_options_t *opt, sluice_rules_t **out,
                             sluice_rules_errors_t **errs)
{
	size_t cap;
	int rc = check_args(opt, out, &cap);
	if (rc == 0 && !buf && len)
		rc = SLUICE_EINVAL;
	if (errs)
		*errs = NULL;
	if (out)
		*out = NULL;
	if (rc)
		return rc;
	if (!name)
		name = "<buffer>";
	struct sluice__errs x = { sluice__errors_new(name), 0 };
	if (!x.e)
		return SLUICE_ENOMEM;
	const void *in = buf ? buf : (const void *)"";
	if (len > cap) {
		sluice__err(&x, NULL, 0, "%zu bytes, above the cap of %zu bytes", len, cap);
		in = NULL; /* not parsed */
	}
	rc = finish(name, in, in ? len : 0, opt, &x, out, errs);
	sluice_rules_errors_free(x.e);
	return rc;
}

int sluice_rules_load_file(const char *path, const sluice_rules_options_t *opt,
                           sluice_rules_t **out, sluice_rules_errors_t **errs)
{
	size_t cap;
	int rc = check_args(opt, out, &cap);
	if (rc == 0 && !path)
		rc = SLUICE_EINVAL;
	if (errs)
		*errs = NULL;
	if (out)
		*out = NULL;
	if (rc)
		return rc;
	struct sluice__errs x = { sluice__errors_new(path), 0 };
	if (!x.e)
		return SLUICE_ENOMEM;

	unsigned char *buf = NULL;
	size_t len = 0;
	/* O_NONBLOCK: a FIFO with no writer would block open() for ever;
	 * only a regular file is read (a FIFO, a device or a directory is
	 * refused before any read), and for one the flag changes nothing */
	FILE *f = NULL;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0) {
		sluice__err(&x, NULL, 0, "cannot open: %s", strerror(errno));
	} else if (fstat(fd, &st) != 0) {
		sluice__err(&x, NULL, 0, "cannot open: %s", strerror(errno));
		close(fd);
	} else if (!S_ISREG(st.st_mode)) {
		sluice__err(&x, NULL, 0, "cannot open: not a regular file");
		close(fd);
	} else if (!(f = fdopen(fd, "rb"))) {
		sluice__err(&x, NULL, 0, "cannot open: %s", strerror(errno));
		close(fd);
	} else if (!(buf = malloc(cap + 1))) {
		x.oom = 1;
	} else {
		/* read one byte past the cap: a larger file is refused without
		 * reading (or allocating) the rest of it */
		len = fread(buf, 1, cap + 1, f);
		if (ferror(f)) {
			sluice__err(&x, NULL, 0, "cannot read: %s", strerror(errno));
		} else if (len > cap) {
			sluice__err(&x, NULL, 0, "larger than the cap of %zu bytes", cap);
		}
	}
	if (f)
		fclose(f);
	int bad = sluice__err_total(&x) > 0;
	rc = finish(path, bad ? NULL : buf, bad ? 0 : len, opt, &x, out, errs);
	free(buf);
	sluice_rules_errors_free(x.e);
	return rc;
}
