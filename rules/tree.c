/* SPDX-License-Identifier: MIT */
/*
 * rules/tree.c - a rule file's YAML, through libyaml's event API, into a
 * small document tree with the exact mark of every node.
 *
 * DESIGN.  libyaml's parser (yaml_parser_parse) hands out one event at a
 * time with its start mark; it keeps its own explicit stacks, never
 * recursion, so a deep or hostile input costs memory in proportion to its
 * size, never the C stack.  This file keeps a stack of the collections
 * still open (at most SLUICE_RULES_DEPTH_MAX deep) and appends each
 * finished node to its parent.  Deeper is refused and ends the reading, as
 * a syntax error does: no event past the error is pulled, because
 * libyaml's cost per event grows with the depth of flow collections (its
 * simple-key checks walk the open levels), so reading on through 100,000
 * levels was quadratic, seconds to hours on a 4 MiB file; stopping there,
 * a load's cost is linear in the input (sluice__tree_events counts what
 * was pulled, for the tests).
 * Every node and scalar is copied into the caller's arena, so an error at
 * any event frees everything with the arena: there is no partial tree to
 * unwind.
 *
 * What is refused here, because the schema cannot see it once the tree is
 * built: anchors (&a), aliases (*a: a few bytes could stand for an
 * unbounded tree, the "billion laughs"), tags (!!int, !x: they change a
 * value's type behind the schema) and a second document (one file, one
 * rule set).  Each is an error at its own mark and parsing goes on, so the
 * file's other errors are still found; an alias becomes a BAD node that
 * the schema skips silently (it has been reported).
 *
 * Marks: libyaml counts lines and columns from 0 (columns in characters);
 * the description and the messages count from 1, as compilers do.
 */
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "rules_internal.h"

static sluice_rules_mark_t mark_of(yaml_mark_t m)
{
	sluice_rules_mark_t r;
	/* libyaml's marks are size_t; a 4 MiB input stays far below 2^32 */
	r.line = (uint32_t)m.line + 1;
	r.col = (uint32_t)m.column + 1;
	return r;
}

/*
 * The line and column of byte @off, counting line breaks as libyaml does
 * (\n, \r\n, \r, NEL, LS, PS) and columns in characters.  For reader
 * errors, which give an offset only, and for marks libyaml puts past the
 * end: at the end of a last line without a line break, libyaml's scanner
 * forces a line break and reports the next line, which the file does not
 * have; the end of the input is where the problem is.
 */
static sluice_rules_mark_t mark_at_offset(const unsigned char *buf, size_t len, size_t off)
{
	sluice_rules_mark_t r = { 1, 1 };
	for (size_t i = 0; i < off && i < len; i++) {
		unsigned char ch = buf[i];
		int lb = ch == '\n' || (ch == '\r' && !(i + 1 < len && buf[i + 1] == '\n'));
		if (ch == 0xc2 && i + 1 < len && buf[i + 1] == 0x85) {
			lb = 1; /* NEL */
			i++;
		} else if (ch == 0xe2 && i + 2 < len && buf[i + 1] == 0x80 &&
		           (buf[i + 2] == 0xa8 || buf[i + 2] == 0xa9)) {
			lb = 1; /* LS, PS */
			i += 2;
		}
		if (lb) {
			r.line++;
			r.col = 1;
		} else if ((ch & 0xc0) != 0x80 && ch != '\r') { /* characters, not bytes */
			r.col++;
		}
	}
	return r;
}

/*
 * @m, or the end of the input when @m lies past it.  Compared by line and
 * column, not by libyaml's mark.index: that counts characters, not bytes,
 * so it cannot be compared with the input's length (a file with a
 * two-byte character ends at index len - 1).
 */
static sluice_rules_mark_t within(sluice_rules_mark_t m, const unsigned char *buf, size_t len)
{
	sluice_rules_mark_t end = mark_at_offset(buf, len, len);
	if (m.line > end.line || (m.line == end.line && m.col > end.col))
		return end;
	return m;
}

static void append(struct sluice__node *parent, struct sluice__node *child)
{
	if (parent->last)
		parent->last->next = child;
	else
		parent->first = child;
	parent->last = child;
	parent->n++;
}

static void syntax_error(struct sluice__errs *x, const yaml_parser_t *p, const unsigned char *buf,
                         size_t len)
{
	const char *problem = p->problem ? p->problem : "unknown problem";
	sluice_rules_mark_t m;
	if (p->error == YAML_READER_ERROR) {
		m = mark_at_offset(buf, len, p->problem_offset);
		sluice__err(x, &m, 0, "YAML: %s", problem);
		return;
	}
	if (p->error == YAML_MEMORY_ERROR) {
		x->oom = 1;
		return;
	}
	m = within(mark_of(p->problem_mark), buf, len);
	if (p->context) {
		sluice_rules_mark_t cm = within(mark_of(p->context_mark), buf, len);
		sluice__err(x, &m, 0, "YAML syntax error: %s (%s at line %u col %u)", problem,
		            p->context, cm.line, cm.col);
	} else {
		sluice__err(x, &m, 0, "YAML syntax error: %s", problem);
	}
}

/* Refuse an anchor or a tag on a node (reported, the node is kept). */
static void refuse_props(struct sluice__errs *x, const yaml_event_t *ev, const yaml_char_t *anchor,
                         const yaml_char_t *tag, int implicit_tag)
{
	sluice_rules_mark_t m = mark_of(ev->start_mark);
	if (anchor)
		sluice__err(x, &m, 0, "anchors (&%.40s) are not supported: write the value out",
		            (const char *)anchor);
	if (tag && !implicit_tag)
		sluice__err(x, &m, 0, "tags (%.40s) are not supported: values take their type from the schema",
		            (const char *)tag);
}

_Thread_local size_t sluice__tree_events;

struct sluice__node *sluice__tree_parse(struct sluice__arena *a, struct sluice__errs *x,
                                        const unsigned char *buf, size_t len, int *complete)
{
	yaml_parser_t p;
	struct sluice__node *stack[SLUICE_RULES_DEPTH_MAX];
	size_t depth = 0;
	struct sluice__node *root = NULL;
	int docs = 0, done = 0, cut = 0;

	*complete = 0;
	sluice__tree_events = 0;
	if (!yaml_parser_initialize(&p)) {
		x->oom = 1;
		return NULL;
	}
	yaml_parser_set_input_string(&p, buf, len);
	while (!done && !cut && !x->oom) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&p, &ev)) {
			syntax_error(x, &p, buf, len);
			yaml_parser_delete(&p);
			return root;
		}
		sluice__tree_events++;
		struct sluice__node *node = NULL;
		sluice_rules_mark_t m = mark_of(ev.start_mark);
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs == 2)
				sluice__err(x, &m, 0, "a second document: a rule file holds one");
			break;
		case YAML_ALIAS_EVENT:
			sluice__err(x, &m, 0, "aliases (*%.40s) are not supported: write the value out",
			            (const char *)ev.data.alias.anchor);
			if ((node = sluice__arena_alloc(a, sizeof(*node))))
				node->type = SLUICE__BAD;
			else
				x->oom = 1;
			break;
		case YAML_SCALAR_EVENT:
			refuse_props(x, &ev, ev.data.scalar.anchor, ev.data.scalar.tag,
			             ev.data.scalar.plain_implicit || ev.data.scalar.quoted_implicit);
			if ((node = sluice__arena_alloc(a, sizeof(*node)))) {
				node->type = SLUICE__SCALAR;
				node->len = ev.data.scalar.length;
				node->s = sluice__arena_strndup(a, (const char *)ev.data.scalar.value,
				                                node->len);
				node->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
				if (!node->s)
					node = NULL;
			}
			break;
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT: {
			int seq = ev.type == YAML_SEQUENCE_START_EVENT;
			refuse_props(x, &ev,
			             seq ? ev.data.sequence_start.anchor : ev.data.mapping_start.anchor,
			             seq ? ev.data.sequence_start.tag : ev.data.mapping_start.tag,
			             seq ? ev.data.sequence_start.implicit : ev.data.mapping_start.implicit);
			if (depth == SLUICE_RULES_DEPTH_MAX) {
				/* the last event pulled (the DESIGN says why) */
				sluice__err(x, &m, 0, "nested deeper than %u levels",
				            SLUICE_RULES_DEPTH_MAX);
				cut = 1;
				break;
			}
			struct sluice__node *c = sluice__arena_alloc(a, sizeof(*c));
			if (c) {
				c->type = seq ? SLUICE__SEQ : SLUICE__MAP;
				c->mark = m;
				stack[depth++] = c;
			} else {
				x->oom = 1;
			}
			break;
		}
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			if (depth > 0)
				node = stack[--depth];
			break;
		default: /* STREAM_START, DOCUMENT_END, NONE */
			break;
		}
		if (node) {
			if (node->type != SLUICE__MAP && node->type != SLUICE__SEQ)
				node->mark = m;
			if (depth > 0)
				append(stack[depth - 1], node);
			else if (docs == 1)
				root = node; /* later documents were refused above */
		} else if (ev.type == YAML_SCALAR_EVENT) {
			x->oom = 1; /* the scalar's allocation failed */
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	/* a tree cut off (too deep) is not checked: the schema would
	 * report what was cut as missing */
	*complete = done && !x->oom && !cut;
	return root;
}
