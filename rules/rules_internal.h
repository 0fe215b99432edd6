/* SPDX-License-Identifier: MIT */
/*
 * rules/rules_internal.h - what the loader's files share (never installed):
 * the arena every allocation of a load comes from, the document tree
 * rules/tree.c builds from libyaml's events, and the error list.
 */
#ifndef SLUICE_RULES_INTERNAL_H
#define SLUICE_RULES_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/rules.h"

/*
 * A bump allocator of chunks, freed all at once: a load allocates its tree
 * and its description from two arenas, so no error path has anything to
 * free one by one (and none can leak).  Not thread-safe: one per load.
 */
struct sluice__arena_chunk;
struct sluice__arena {
	struct sluice__arena_chunk *head;
};
void *sluice__arena_alloc(struct sluice__arena *a, size_t n);   /* zeroed; NULL: ENOMEM */
char *sluice__arena_strndup(struct sluice__arena *a, const char *s, size_t n);
void sluice__arena_free(struct sluice__arena *a);

/* The error list of a load; `oom` once an allocation failed. */
struct sluice__errs {
	sluice_rules_errors_t *e;
	int oom;
};
/* Add an error at @m (NULL: 0:0); past SLUICE_RULES_ERRORS_MAX only counted. */
void sluice__err(struct sluice__errs *x, const sluice_rules_mark_t *m, int code,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
size_t sluice__err_total(const struct sluice__errs *x);
/* An empty list naming @name (the engine's errors after a valid parse). */
sluice_rules_errors_t *sluice__errors_new(const char *name);
/* Sort a list by place, as a load hands it back. */
void sluice__errors_sort(sluice_rules_errors_t *e);

/* The document: scalars, mappings (children alternate key, value) and
 * sequences; BAD stands for an alias (refused, already reported). */
enum sluice__node_type { SLUICE__SCALAR, SLUICE__MAP, SLUICE__SEQ, SLUICE__BAD };

struct sluice__node {
	enum sluice__node_type type;
	sluice_rules_mark_t mark;
	/* SCALAR: the bytes (NUL-terminated copy; may hold a NUL of its own)
	 * and whether it was plain (unquoted, not a block scalar) */
	const char *s;
	size_t len;
	int plain;
	/* MAP, SEQ: children in file order */
	struct sluice__node *first, *last, *next;
	size_t n;
	/* a mapping's value: where its key is (for "duplicate key" messages) */
	uint32_t key_line, key_col;
};

/*
 * Parse @len bytes with libyaml into a tree allocated from @a.  Every
 * event-level refusal (anchor, tag, alias, second document, nesting past
 * SLUICE_RULES_DEPTH_MAX) is reported and parsing goes on; a syntax error
 * is reported at libyaml's mark and ends it.
 * Return: the root (NULL for an empty stream), *@complete 1 when the whole
 * input was read and the tree can be checked against the schema.
 */
/* The libyaml events the calling thread's last sluice__tree_parse pulled
 * (for the tests: reading stops at a depth error, tree.c DESIGN). */
extern _Thread_local size_t sluice__tree_events;
struct sluice__node *sluice__tree_parse(struct sluice__arena *a, struct sluice__errs *x,
                                        const unsigned char *buf, size_t len, int *complete);

/*
 * Check @root against the schema and build the description in @out.
 * Return: the rules array (NULL when invalid or out of memory), *@count,
 * *@memory (the total rules.h MEMORY counts), *@budget (the budget
 * applied) and the backends: section (*@backends, *@nbackends; rules
 * point into it).
 */
sluice_rule_t *sluice__schema_check(struct sluice__arena *out, struct sluice__errs *x,
                                    const struct sluice__node *root,
                                    const sluice_rules_options_t *opt, size_t *count,
                                    uint64_t *memory, uint64_t *budget,
                                    const sluice_rules_backend_t **backends, size_t *nbackends);

/* The bytes rule @r's state takes (rules/budget.c DESIGN), with
 * @metrics_bytes for its metrics; saturating. */
uint64_t sluice__rule_memory(const sluice_rule_t *r, uint64_t metrics_bytes);

#endif /* SLUICE_RULES_INTERNAL_H */
