/* SPDX-License-Identifier: MIT */
/*
 * rules/schema.c - the rule file's schema: which keys each section takes,
 * the grammar of each value type (integers, rates, durations, fractions),
 * and the check of every rule's parameters by sluice itself.
 *
 * DESIGN.  Table-driven: each section is a list of key names
 * (take_map() files every value under its key's index, reporting unknown
 * and duplicate keys), each algorithm a row of algos[] naming its
 * parameters, and each parameter a row of params[] naming its type and
 * where it lands in sluice_rules_limit_t.  A value is read by one typed
 * reader, which reports what is wrong at the value's own mark and returns
 * -1; the section goes on with its other keys, so one pass finds every
 * error of the file.  Nothing is clamped: a reader either stores the exact
 * value written or reports it.
 *
 * Ranges that belong to an algorithm are not repeated here: once a rule's
 * own fields are well-formed, its parameters go to the algorithm's init
 * (check_with_sluice()): per-key rules to sluice_keyed_format()'s validator
 * (the keyed ranges and the algorithm's own, with the keys section), the
 * others to sluice_limiter_new() on a throw-away limiter.  What this file
 * checks itself is only the file's own grammar (a count is at least 1, a
 * duration has a unit, a status is an HTTP error) and what no sluice init
 * sees (dimensions, match, fallback, adaptive).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"
#include "metrics_internal.h"
#include "rules_internal.h"
#include "sluice/error.h"
#include "sluice/keyed.h"
#include "sluice/limiter.h"
#include "sluice/parse.h"

struct ctx {
	struct sluice__arena *out;
	struct sluice__errs *x;
	const sluice_rules_options_t *opt;
	const sluice_rules_backend_t *backends; /* backends:, for `backend:` */
	size_t nbackends;
	const unsigned char *backend_bad; /* per backend: refused (reported) */
};

#define ERR(c, node, ...) sluice__err((c)->x, &(node)->mark, 0, __VA_ARGS__)
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- printing values in messages ------------------------------------ */

/* @n's bytes for a message: at most 40, anything unprintable as '?'. */
static const char *shown(const struct sluice__node *n, char buf[48])
{
	size_t i = 0;
	for (; i < n->len && i < 40; i++) {
		unsigned char ch = (unsigned char)n->s[i];
		buf[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	if (n->len > 40) {
		memcpy(buf + i, "...", 4);
	} else {
		buf[i] = 0;
	}
	return buf;
}

static int is_null(const struct sluice__node *n);

static const char *type_name(const struct sluice__node *n)
{
	switch (n->type) {
	case SLUICE__MAP:
		return "a mapping";
	case SLUICE__SEQ:
		return "a list";
	default:
		return is_null(n) ? "nothing" : "a scalar"; /* `limit:` left empty */
	}
}

/* ---- sections: keys ------------------------------------------------- */

/*
 * File the values of mapping @m under the index of their key in @keys
 * (vals[i] = NULL when absent).  Unknown and duplicate keys are errors at
 * the key; a key that is not a plain string is one too.
 *
 * Every mapping of the file is a section of the schema, so duplicates are
 * found here, by the key's index, in one pass: a generic check in the tree
 * would compare every key with every other, quadratic in a hostile
 * mapping of 100,000 keys.  Unknown keys are each reported once, with the
 * list of the keys the section takes (a typo is the usual cause).
 * Return: 0, or -1 (reported) when @m is not a mapping.
 */
static int take_map(struct ctx *c, const struct sluice__node *m, const char *section,
                    const char *const *keys, size_t nkeys, const struct sluice__node **vals)
{
	for (size_t i = 0; i < nkeys; i++)
		vals[i] = NULL;
	if (m->type == SLUICE__BAD)
		return -1;
	if (m->type != SLUICE__MAP) {
		ERR(c, m, "%s: expected a mapping, found %s", section, type_name(m));
		return -1;
	}
	char b[48];
	for (const struct sluice__node *k = m->first; k && k->next; k = k->next->next) {
		const struct sluice__node *v = k->next;
		if (k->type != SLUICE__SCALAR) {
			if (k->type != SLUICE__BAD)
				ERR(c, k, "%s: a key must be a string, found %s", section, type_name(k));
			continue;
		}
		size_t i = 0;
		while (i < nkeys && !(strlen(keys[i]) == k->len && memcmp(keys[i], k->s, k->len) == 0))
			i++;
		if (i == nkeys) {
			char list[256];
			size_t o = 0;
			for (size_t j = 0; j < nkeys && o < sizeof(list); j++)
				o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", j ? ", " : "",
				                      keys[j]);
			ERR(c, k, "%s: unknown key '%s' (expected %s)", section, shown(k, b), list);
		} else if (vals[i]) {
			/* name the first occurrence: an operator who pasted a
			 * block twice must see both places */
			ERR(c, k, "%s: duplicate key '%s' (first at line %u col %u)", section, keys[i],
			    vals[i]->key_line, vals[i]->key_col);
		} else {
			vals[i] = v;
			((struct sluice__node *)v)->key_line = k->mark.line;
			((struct sluice__node *)v)->key_col = k->mark.col;
		}
	}
	return 0;
}

/* ---- values --------------------------------------------------------- */

static int is_null(const struct sluice__node *n)
{
	return n->plain && (n->len == 0 || (n->len == 1 && n->s[0] == '~') ||
	                    (n->len == 4 && (memcmp(n->s, "null", 4) == 0 ||
	                                     memcmp(n->s, "Null", 4) == 0 ||
	                                     memcmp(n->s, "NULL", 4) == 0)));
}

/* A scalar, else an error naming what was found.  Return 0 or -1. */
static int need_scalar(struct ctx *c, const struct sluice__node *n, const char *what,
                       const char *expected)
{
	if (n->type == SLUICE__BAD)
		return -1;
	if (n->type != SLUICE__SCALAR) {
		ERR(c, n, "%s: expected %s, found %s", what, expected, type_name(n));
		return -1;
	}
	if (is_null(n)) {
		ERR(c, n, "%s: expected %s, found nothing", what, expected);
		return -1;
	}
	return 0;
}

/*
 * Leading decimal digits of @s (length @len) from *@pos: at least one, no
 * leading zero (YAML 1.1 reads 010 as octal 8: refused, not guessed).
 * No sign is taken: every number of the file is a count, a size or a time,
 * so "-5" and "+5" are errors, each explained by bad_number().  The digits
 * are all consumed even past an overflow, so the caller's "trailing
 * characters" test never mistakes the rest of a long number for junk.
 * Return: 0 and *@v, 1 on overflow (past 2^64 - 1), 2 with no digit, 3 for
 * a leading zero.
 */
static int digits(const char *s, size_t len, size_t *pos, uint64_t *v)
{
	size_t i = *pos;
	uint64_t r = 0;
	int over = 0;
	if (i >= len || !isdigit((unsigned char)s[i]))
		return 2;
	if (s[i] == '0' && i + 1 < len && isdigit((unsigned char)s[i + 1]))
		return 3;
	for (; i < len && isdigit((unsigned char)s[i]); i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (r > (UINT64_MAX - d) / 10)
			over = 1;
		else
			r = r * 10 + d;
	}
	*pos = i;
	*v = r;
	return over;
}

/*
 * Explain why @n is not a number of the expected form, after digits()
 * returned @rc with the digits ending at @pos.  @what is the field.
 * The cases are the ones other YAML loaders get wrong silently (libcyaml
 * reads "100rps" as 100 and "1e3" as 1): each gets its own message,
 * because "not an integer" does not tell the operator what to write.
 */
static void bad_number(struct ctx *c, const struct sluice__node *n, const char *what, int rc,
                       size_t pos, const char *form)
{
	char b[48];
	const char *s = n->s;
	if (!n->plain) {
		ERR(c, n, "%s: expected %s, found the quoted string '%s'", what, form, shown(n, b));
	} else if (rc == 3) {
		ERR(c, n, "%s: leading zeros are not accepted ('%s')", what, shown(n, b));
	} else if (rc == 1) {
		ERR(c, n, "%s: '%s' is out of range (above 2^64 - 1)", what, shown(n, b));
	} else if (rc == 2 && s[0] == '-') {
		ERR(c, n, "%s: must not be negative ('%s')", what, shown(n, b));
	} else if (rc == 2) {
		ERR(c, n, "%s: expected %s, found '%s'", what, form, shown(n, b));
	} else if (pos < n->len && (s[pos] == 'e' || s[pos] == 'E')) {
		ERR(c, n, "%s: exponent notation is not accepted ('%s'): write the number out", what,
		    shown(n, b));
	} else if (pos < n->len && s[pos] == '.') {
		ERR(c, n, "%s: must be a whole number ('%s')", what, shown(n, b));
	} else {
		char t[48];
		struct sluice__node tail = *n;
		tail.s = n->s + pos;
		tail.len = n->len - pos;
		ERR(c, n, "%s: trailing characters '%s' after %.*s (expected %s)", what,
		    shown(&tail, t), (int)pos, n->s, form);
	}
}

/* An integer in @min..@max.  Return 0 and *@v, or -1 (reported). */
static int get_uint(struct ctx *c, const struct sluice__node *n, const char *what, uint64_t min,
                    uint64_t max, uint64_t *v)
{
	if (need_scalar(c, n, what, "an integer"))
		return -1;
	size_t pos = 0;
	uint64_t r = 0;
	int rc = digits(n->s, n->len, &pos, &r);
	if (!n->plain || rc != 0 || pos != n->len) {
		bad_number(c, n, what, rc, pos, "an integer");
		return -1;
	}
	if (r < min) {
		ERR(c, n, "%s: must be at least %llu (found %llu)", what, (unsigned long long)min,
		    (unsigned long long)r);
		return -1;
	}
	if (r > max) {
		ERR(c, n, "%s: must be at most %llu (found %llu)", what, (unsigned long long)max,
		    (unsigned long long)r);
		return -1;
	}
	*v = r;
	return 0;
}

/*
 * Durations, rates and fractions are the library's grammar (sluice/parse.h),
 * the nginx module's and sluice-sim's: a spelling one accepts, all accept,
 * and a bad value gives the library's message behind this file's
 * file:line:col and the field's name.  Quoted or not: "250ms" is a string
 * to YAML either way.
 */
static int bad_value(struct ctx *c, const struct sluice__node *n, const char *what,
                     const sluice_parse_error_t *pe)
{
	char b[48];
	ERR(c, n, "%s: '%s': %s", what, shown(n, b), pe->message);
	return -1;
}

/* A duration, at least @min ns.  Return 0 and *@ns, or -1 (reported). */
static int get_duration(struct ctx *c, const struct sluice__node *n, const char *what,
                        uint64_t min, uint64_t *ns)
{
	if (need_scalar(c, n, what, "a duration such as 250ms"))
		return -1;
	sluice_parse_error_t pe;
	if (sluice_parse_duration(n->s, n->len, ns, &pe) != 0)
		return bad_value(c, n, what, &pe);
	if (*ns < min) {
		char b[48];
		ERR(c, n, "%s: must be positive (found '%s')", what, shown(n, b));
		return -1;
	}
	return 0;
}

/*
 * A rate (50/s, 10r/s, 0.5/s, 5/250ms).  It lands as sluice's own pair
 * (rate permits per period_ns), never as a derived interval: GCRA derives
 * T = ceil(period / rate) itself and refuses a rounding above 0.1%
 * (SLUICE_ERATE), which only it can judge.
 */
static int get_rate(struct ctx *c, const struct sluice__node *n, const char *what,
                    uint64_t *rate, uint64_t *period_ns)
{
	if (need_scalar(c, n, what, "a rate such as 50/s, 300/m, 10/h or 5/250ms"))
		return -1;
	sluice_parse_error_t pe;
	if (sluice_parse_rate(n->s, n->len, rate, period_ns, &pe) != 0)
		return bad_value(c, n, what, &pe);
	return 0;
}

/*
 * A decimal number ("1.5", @percent 0) or a percentage ("10%", "0.5%",
 * @percent 1, its '%' required), in parts per million, exactly: a value
 * finer than 1 ppm is refused, never rounded (the engine compares these
 * with integer latencies).
 */
static int get_ppm(struct ctx *c, const struct sluice__node *n, const char *what, int percent,
                   uint64_t *ppm)
{
	const char *form = percent ? "a percentage such as 10%" : "a decimal number such as 1.5";
	if (need_scalar(c, n, what, form))
		return -1;
	char b[48];
	uint64_t num, den;
	sluice_parse_error_t pe;
	if (sluice_parse_fraction(n->s, n->len, &num, &den, &pe) != 0)
		return bad_value(c, n, what, &pe);
	int has_pct = n->s[n->len - 1] == '%';
	if (has_pct != percent) {
		if (percent)
			ERR(c, n, "%s: a percentage needs its '%%' ('%s%%'?)", what, shown(n, b));
		else
			ERR(c, n, "%s: expected %s, found '%s'", what, form, shown(n, b));
		return -1;
	}
	sluice__u128 v = (sluice__u128)num * 1000000;
	if (v % den != 0) {
		ERR(c, n, "%s: '%s' is finer than one part per million", what, shown(n, b));
		return -1;
	}
	if (v / den > UINT64_MAX) {
		ERR(c, n, "%s: '%s' is out of range", what, shown(n, b));
		return -1;
	}
	*ppm = (uint64_t)(v / den);
	return 0;
}

/* One of @names.  Return 0 and *@i, or -1 (reported). */
static int get_enum(struct ctx *c, const struct sluice__node *n, const char *what,
                    const char *const *names, size_t count, unsigned *i)
{
	char list[160];
	size_t o = 0;
	for (size_t j = 0; j < count && o < sizeof(list); j++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", j ? ", " : "", names[j]);
	if (need_scalar(c, n, what, list))
		return -1;
	for (unsigned j = 0; j < count; j++)
		if (strlen(names[j]) == n->len && memcmp(names[j], n->s, n->len) == 0) {
			*i = j;
			return 0;
		}
	char b[48];
	ERR(c, n, "%s: unknown value '%s' (expected %s)", what, shown(n, b), list);
	return -1;
}

static int get_bool(struct ctx *c, const struct sluice__node *n, const char *what, int *v)
{
	static const char *const names[] = { "false", "true" };
	unsigned i;
	if (n->type == SLUICE__SCALAR && !n->plain && !is_null(n)) {
		char b[48];
		ERR(c, n, "%s: expected true or false, found the quoted string '%s'", what, shown(n, b));
		return -1;
	}
	if (get_enum(c, n, what, names, 2, &i))
		return -1;
	*v = (int)i;
	return 0;
}

/*
 * A string of 1..@max bytes whose every byte passes @ok.  Copied into the
 * description, which outlives the tree.  A YAML scalar may hold any byte,
 * NUL included ("\0" in a quoted string), so the check is on every byte
 * of the scalar's length, never up to the first NUL.
 * Return 0 and *@out, or -1 (reported).
 */
static int get_string(struct ctx *c, const struct sluice__node *n, const char *what, size_t max,
                      int (*ok)(unsigned char), const char *rule, const char **out)
{
	if (need_scalar(c, n, what, "a string"))
		return -1;
	char b[48];
	if (n->len > max) {
		ERR(c, n, "%s: longer than %zu bytes", what, max);
		return -1;
	}
	for (size_t i = 0; i < n->len; i++)
		if (!ok((unsigned char)n->s[i])) {
			ERR(c, n, "%s: '%s' holds a character outside %s", what, shown(n, b), rule);
			return -1;
		}
	if (!(*out = sluice__arena_strndup(c->out, n->s, n->len))) {
		c->x->oom = 1;
		return -1;
	}
	return 0;
}

static int id_char(unsigned char ch)
{
	return isalnum(ch) || ch == '-' || ch == '_' || ch == '.';
}

/* A path: visible ASCII, no '?' or '#' (a path, not a URL) */
static int path_char(unsigned char ch)
{
	return ch > 0x20 && ch < 0x7f && ch != '?' && ch != '#';
}

static int host_char(unsigned char ch)
{
	return isalnum(ch) || ch == '-' || ch == '.' || ch == ':' || ch == '[' || ch == ']' ||
	       ch == '_';
}

/* RFC 9110 tchar: a header field name */
static int token_char(unsigned char ch)
{
	return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* RFC 3986 unreserved: a query argument's name */
static int query_char(unsigned char ch)
{
	return isalnum(ch) || (ch && strchr("-._~", ch));
}

/* ---- the algorithms ------------------------------------------------- */

enum ptype { P_RATE, P_COUNT, P_COUNT0, P_DURATION, P_BUCKETS };

/* Every limit parameter of the file, and where it lands. */
enum pid { RATE, BURST, DEPTH, WINDOW, MAX_REQUESTS, BUCKETS, WARMUP, HALF_LIFE, LIMIT,
	   MAX_INFLIGHT, NPARAMS };
static const struct {
	const char *name;
	enum ptype type;
	size_t off; /* offset of the field in sluice_rules_limit_t */
} params[NPARAMS] = {
	[RATE] = { "rate", P_RATE, offsetof(sluice_rules_limit_t, rate) },
	[BURST] = { "burst", P_COUNT, offsetof(sluice_rules_limit_t, burst) },
	[DEPTH] = { "depth", P_COUNT0, offsetof(sluice_rules_limit_t, depth) },
	[WINDOW] = { "window", P_DURATION, offsetof(sluice_rules_limit_t, window_ns) },
	[MAX_REQUESTS] = { "max_requests", P_COUNT, offsetof(sluice_rules_limit_t, limit) },
	[BUCKETS] = { "buckets", P_BUCKETS, offsetof(sluice_rules_limit_t, buckets) },
	[WARMUP] = { "warmup", P_DURATION, offsetof(sluice_rules_limit_t, warmup_ns) },
	[HALF_LIFE] = { "half_life", P_DURATION, offsetof(sluice_rules_limit_t, half_life_ns) },
	[LIMIT] = { "limit", P_COUNT, offsetof(sluice_rules_limit_t, limit) },
	[MAX_INFLIGHT] = { "max_inflight", P_COUNT, offsetof(sluice_rules_limit_t, limit) },
};

#define B(p) (1u << (p))
/*
 * One row per algorithm name of the file.  per_key: a keyed table
 * (sluice/keyed.h) holds it.  live: the engine can change its limit
 * while keeping state (adaptive).  books: it can queue a request (a
 * booking: gcra/warmup reserve_at, the leaky shaper), so a queue fallback
 * is possible, for a global rule only (keyed tables do not book).
 */
static const struct algo {
	const char *name;
	sluice_algo_t algo;
	uint32_t required, optional;
	int per_key, live, books;
} algos[] = {
	{ "token_bucket", SLUICE_ALGO_GCRA, B(RATE) | B(BURST), 0, 1, 1, 1 },
	{ "leaky_bucket", SLUICE_ALGO_LEAKY, B(RATE), B(DEPTH), 1, 0, 1 },
	{ "fixed_window", SLUICE_ALGO_FIXED, B(WINDOW) | B(MAX_REQUESTS), 0, 1, 1, 0 },
	{ "sliding_window", SLUICE_ALGO_WINDOW, B(WINDOW) | B(MAX_REQUESTS) | B(BUCKETS), 0, 1, 1,
	  0 },
	{ "sliding_log", SLUICE_ALGO_LOG, B(WINDOW) | B(MAX_REQUESTS), 0, 0, 0, 0 },
	{ "warmup", SLUICE_ALGO_WARMUP, B(RATE) | B(WARMUP), 0, 0, 0, 1 },
	{ "decay", SLUICE_ALGO_DECAY, B(LIMIT) | B(HALF_LIFE), 0, 0, 0, 0 },
	{ "concurrency", SLUICE_ALGO_INFLIGHT, B(MAX_INFLIGHT), 0, 1, 1, 0 },
};

const char *sluice_rules_algo_name(sluice_algo_t a)
{
	for (size_t i = 0; i < COUNT(algos); i++)
		if (algos[i].algo == a)
			return algos[i].name;
	return NULL;
}

static const struct algo *algo_of(sluice_algo_t a)
{
	for (size_t i = 0; i < COUNT(algos); i++)
		if (algos[i].algo == a)
			return &algos[i];
	return NULL;
}

/*
 * The limit section.  The keys are the union of every algorithm's
 * parameters, so a parameter of another algorithm is reported as such
 * ("'burst' is not a parameter of fixed_window"), not as an unknown key:
 * the operator picked the wrong algorithm or the wrong word, and the
 * message says which.  Return 0 (well-formed) or -1.
 */
static int take_limit(struct ctx *c, const struct sluice__node *n, sluice_rules_limit_t *l)
{
	const char *keys[NPARAMS + 1];
	const struct sluice__node *v[NPARAMS + 1];
	keys[0] = "algorithm";
	for (size_t i = 0; i < NPARAMS; i++)
		keys[i + 1] = params[i].name;
	l->mark = n->mark;
	if (take_map(c, n, "limit", keys, NPARAMS + 1, v))
		return -1;
	if (!v[0]) {
		ERR(c, n, "limit: 'algorithm' is missing");
		return -1;
	}
	/* the names every front end reads, aliases included (sluice/parse.h):
	 * token_bucket and gcra, concurrency and inflight, ... */
	sluice_algo_t kind = SLUICE_ALGO_NONE;
	sluice_parse_error_t pe;
	if (need_scalar(c, v[0], "limit.algorithm", "an algorithm such as token_bucket"))
		return -1;
	if (sluice_parse_algo(v[0]->s, v[0]->len, &kind, &pe) != 0)
		return bad_value(c, v[0], "limit.algorithm", &pe);
	const struct algo *a = algo_of(kind);
	if (!a) { /* an algorithm of SLUICE_ALGOS this table has no row for */
		ERR(c, v[0], "limit.algorithm: '%.*s' has no rule-file parameters", (int)v[0]->len,
		    v[0]->s);
		return -1;
	}
	l->algo = a->algo;
	int bad = 0;
	for (size_t p = 0; p < NPARAMS; p++) {
		const struct sluice__node *pv = v[p + 1];
		char what[40];
		snprintf(what, sizeof(what), "limit.%s", params[p].name);
		if (!pv) {
			if (a->required & B(p)) {
				ERR(c, n, "limit: '%s' is missing (%s needs it)", params[p].name, a->name);
				bad = -1;
			}
			continue;
		}
		if (!((a->required | a->optional) & B(p))) {
			ERR(c, pv, "limit: '%s' is not a parameter of %s", params[p].name, a->name);
			bad = -1;
			continue;
		}
		uint64_t *dst = (uint64_t *)((char *)l + params[p].off);
		uint64_t u = 0;
		switch (params[p].type) {
		case P_RATE:
			bad |= get_rate(c, pv, what, &l->rate, &l->period_ns);
			break;
		case P_COUNT:
			bad |= get_uint(c, pv, what, 1, UINT64_MAX, dst);
			break;
		case P_COUNT0:
			bad |= get_uint(c, pv, what, 0, UINT64_MAX, dst);
			break;
		case P_DURATION:
			bad |= get_duration(c, pv, what, 1, dst);
			break;
		case P_BUCKETS: /* a uint32_t field: wider is not a count sluice takes */
			if (get_uint(c, pv, what, 1, UINT32_MAX, &u) == 0)
				l->buckets = (uint32_t)u;
			else
				bad = -1;
			break;
		}
	}
	return bad;
}

/* ---- the other sections --------------------------------------------- */

/*
 * match: exact path or prefix (not both: a rule has one route), host,
 * methods.  Matching itself is the engine's (compiled into a trie at
 * load); this only makes sure each piece can be matched byte for byte.
 */
static int take_match(struct ctx *c, const struct sluice__node *n, sluice_rules_match_t *m)
{
	static const char *const keys[] = { "path", "prefix", "host", "methods" };
	const struct sluice__node *v[COUNT(keys)];
	static const char *const mnames[] = {
#define SLUICE__RULES_METHOD_NAME(x) #x,
		SLUICE_RULES_METHODS(SLUICE__RULES_METHOD_NAME)
#undef SLUICE__RULES_METHOD_NAME
	};
	m->mark = n->mark;
	if (take_map(c, n, "match", keys, COUNT(keys), v))
		return -1;
	int bad = 0;
	if (v[0] && v[1]) {
		ERR(c, v[1], "match: path and prefix exclude each other (path is exact, prefix a prefix)");
		bad = -1;
	} else if (v[0] || v[1]) {
		const struct sluice__node *p = v[0] ? v[0] : v[1];
		const char *what = v[0] ? "match.path" : "match.prefix";
		if (get_string(c, p, what, 4096, path_char, "visible ASCII without '?' and '#'",
		               &m->path)) {
			bad = -1;
		} else if (m->path[0] != '/') {
			ERR(c, p, "%s: must start with '/'", what);
			bad = -1;
		} else {
			m->path_kind = v[0] ? SLUICE_RULES_PATH_EXACT : SLUICE_RULES_PATH_PREFIX;
		}
	}
	if (v[2] && get_string(c, v[2], "match.host", 255, host_char,
	                       "letters, digits and - . : [ ] _", &m->host))
		bad = -1;
	if (v[3]) {
		const struct sluice__node *l = v[3];
		if (l->type != SLUICE__SEQ) {
			if (l->type != SLUICE__BAD)
				ERR(c, l, "match.methods: expected a list such as [GET, POST], found %s",
				    type_name(l));
			return -1;
		}
		if (l->n == 0) {
			ERR(c, l, "match.methods: empty list (omit methods to match every method)");
			return -1;
		}
		for (const struct sluice__node *e = l->first; e; e = e->next) {
			unsigned i;
			if (get_enum(c, e, "match.methods", mnames, COUNT(mnames), &i)) {
				bad = -1;
			} else if (m->methods & (1u << i)) {
				ERR(c, e, "match.methods: %s listed twice", mnames[i]);
				bad = -1;
			} else {
				m->methods |= 1u << i;
			}
		}
	}
	return bad;
}

/*
 * dimensions: each is one keyed table of the rule (one limit per value).
 * A header name is compared case-insensitively (HTTP field names are), so
 * header:X-Key twice in two spellings is one dimension listed twice; a
 * query argument's name is case-sensitive, as in the URL.  `global` with
 * another dimension would be two limits that mean different things under
 * one rule: refused, write two rules.
 */
static int take_dims(struct ctx *c, const struct sluice__node *n, sluice_rule_t *r)
{
	if (n->type == SLUICE__BAD)
		return -1;
	if (n->type != SLUICE__SEQ) {
		ERR(c, n, "dimensions: expected a list such as [ip, user], found %s", type_name(n));
		return -1;
	}
	if (n->n == 0) {
		ERR(c, n, "dimensions: empty list (omit dimensions, or [global], for one limit)");
		return -1;
	}
	if (n->n > SLUICE_RULES_DIMS_MAX) {
		ERR(c, n, "dimensions: %zu listed, at most %u", n->n, SLUICE_RULES_DIMS_MAX);
		return -1;
	}
	static const struct {
		const char *name;
		sluice_rules_dim_kind_t kind;
	} plain[] = { { "global", SLUICE_RULES_DIM_GLOBAL }, { "ip", SLUICE_RULES_DIM_IP },
		      { "user", SLUICE_RULES_DIM_USER },     { "route", SLUICE_RULES_DIM_ROUTE } };
	int bad = 0;
	char b[48];
	for (const struct sluice__node *e = n->first; e; e = e->next) {
		if (need_scalar(c, e, "dimensions", "a dimension")) {
			bad = -1;
			continue;
		}
		sluice_rules_dim_t d = { .mark = e->mark };
		for (size_t i = 0; i < COUNT(plain); i++)
			if (strlen(plain[i].name) == e->len && memcmp(plain[i].name, e->s, e->len) == 0)
				d.kind = plain[i].kind;
		if (!d.kind) {
			struct sluice__node name = *e;
			const char *what = NULL;
			int (*ok)(unsigned char) = NULL;
			const char *rule = NULL;
			if (e->len > 7 && memcmp(e->s, "header:", 7) == 0) {
				d.kind = SLUICE_RULES_DIM_HEADER;
				name.s += 7;
				name.len -= 7;
				what = "dimensions: header name";
				ok = token_char;
				rule = "an HTTP token";
			} else if (e->len > 6 && memcmp(e->s, "query:", 6) == 0) {
				d.kind = SLUICE_RULES_DIM_QUERY;
				name.s += 6;
				name.len -= 6;
				what = "dimensions: query argument";
				ok = query_char;
				rule = "letters, digits and - . _ ~";
			} else {
				ERR(c, e, "dimensions: unknown dimension '%s' (ip, user, route, global, "
				          "header:NAME, query:NAME)",
				    shown(e, b));
				bad = -1;
				continue;
			}
			if (get_string(c, &name, what, 128, ok, rule, &d.name)) {
				bad = -1;
				continue;
			}
		}
		for (uint32_t j = 0; j < r->ndims; j++) {
			const sluice_rules_dim_t *o = &r->dims[j];
			if (o->kind == d.kind &&
			    (!d.name || (d.kind == SLUICE_RULES_DIM_HEADER ? strcasecmp(o->name, d.name)
			                                                    : strcmp(o->name, d.name)) == 0)) {
				ERR(c, e, "dimensions: '%s' listed twice (first at line %u col %u)",
				    shown(e, b), o->mark.line, o->mark.col);
				d.kind = 0;
				bad = -1;
				break;
			}
		}
		if (d.kind)
			r->dims[r->ndims++] = d;
	}
	for (uint32_t j = 0; j < r->ndims; j++) {
		if (r->dims[j].kind == SLUICE_RULES_DIM_GLOBAL && r->ndims > 1) {
			ERR(c, n, "dimensions: global is one limit for every request: it cannot be "
			          "combined with others");
			bad = -1;
		}
		if (r->dims[j].kind != SLUICE_RULES_DIM_GLOBAL)
			r->per_key = 1;
	}
	return bad;
}

/*
 * keys: the keyed table's size and policy.  Only the file's grammar is
 * checked here (a count, a policy name); the ranges (capacity 8..2^32,
 * key_max 1..240, INFLIGHT only with reject) are keyed_table.c's and come back
 * from check_with_sluice() with its code.
 */
static int take_keys(struct ctx *c, const struct sluice__node *n, sluice_rules_keys_t *k)
{
	static const char *const keys[] = { "capacity", "when_full", "key_max", "hash_long_keys" };
	static const char *const policies[] = { "reject", "allow", "evict" };
	const struct sluice__node *v[COUNT(keys)];
	k->mark = n->mark;
	if (take_map(c, n, "keys", keys, COUNT(keys), v))
		return -1;
	int bad = 0;
	uint64_t u;
	unsigned i;
	int h;
	if (v[0])
		bad |= get_uint(c, v[0], "keys.capacity", 1, UINT64_MAX, &k->capacity);
	if (v[1]) {
		if (get_enum(c, v[1], "keys.when_full", policies, 3, &i) == 0)
			k->policy = (sluice_keyed_policy_t)i; /* listed in the enum's order */
		else
			bad = -1;
	}
	if (v[2]) {
		if (get_uint(c, v[2], "keys.key_max", 1, UINT32_MAX, &u) == 0)
			k->key_max = (uint32_t)u;
		else
			bad = -1;
	}
	if (v[3]) {
		if (get_bool(c, v[3], "keys.hash_long_keys", &h) == 0)
			k->flags = h ? SLUICE_KEYED_HASH_LONG_KEYS : 0;
		else
			bad = -1;
	}
	return bad;
}

/*
 * fallback: what a refused request gets.  The status must be an HTTP
 * error (400..599): a 2xx or 3xx would tell the client its request was
 * served or moved while it was refused.  `type` is read first because the
 * other keys mean something only for some types.
 */
static int take_fallback(struct ctx *c, const struct sluice__node *n, sluice_rules_fallback_t *f)
{
	static const char *const keys[] = { "type", "status", "max_wait" };
	static const char *const types[] = { "reject", "queue", "stale" };
	const struct sluice__node *v[COUNT(keys)];
	f->mark = n->mark;
	if (take_map(c, n, "fallback", keys, COUNT(keys), v))
		return -1;
	unsigned t;
	if (!v[0]) {
		ERR(c, n, "fallback: 'type' is missing (reject, queue or stale)");
		return -1;
	}
	if (get_enum(c, v[0], "fallback.type", types, 3, &t))
		return -1;
	f->type = (sluice_rules_fallback_type_t)t;
	if (t == SLUICE_RULES_FALLBACK_STALE)
		f->status = 0; /* stale answers with what it serves */
	int bad = 0;
	if (v[1]) {
		uint64_t s;
		if (t == SLUICE_RULES_FALLBACK_STALE) {
			ERR(c, v[1], "fallback: status is not used with type stale");
			bad = -1;
		} else if (get_uint(c, v[1], "fallback.status", 0, UINT64_MAX, &s) == 0) {
			if (s < 400 || s > 599) {
				ERR(c, v[1], "fallback.status: %llu is not an HTTP error status (400-599)",
				    (unsigned long long)s);
				bad = -1;
			} else {
				f->status = (uint32_t)s;
			}
		} else {
			bad = -1;
		}
	}
	if (v[2]) {
		if (t != SLUICE_RULES_FALLBACK_QUEUE) {
			ERR(c, v[2], "fallback: max_wait is only for type queue");
			bad = -1;
		} else {
			bad |= get_duration(c, v[2], "fallback.max_wait", 1, &f->max_wait_ns);
		}
	} else if (t == SLUICE_RULES_FALLBACK_QUEUE) {
		ERR(c, n, "fallback: 'max_wait' is missing (type queue needs it)");
		bad = -1;
	}
	return bad;
}

/*
 * adaptive: the signal decides the baseline's type (a latency is a
 * duration, an error ratio a percentage), so `signal` is read first.  The
 * floor is required, with no default: an automatic limit needs a bound an
 * operator chose ("never below 120"), not one this file invents.
 */
static int take_adaptive(struct ctx *c, const struct sluice__node *n, sluice_rules_adaptive_t *ad)
{
	static const char *const keys[] = { "signal", "baseline", "factor", "windows",
		                            "window", "step", "floor" };
	static const char *const signals[] = { "p99_latency", "error_ratio" };
	const struct sluice__node *v[COUNT(keys)];
	ad->mark = n->mark;
	if (take_map(c, n, "adaptive", keys, COUNT(keys), v))
		return -1;
	ad->enabled = 1;
	int bad = 0;
	uint64_t u;
	unsigned s = 0;
	if (!v[0]) {
		ERR(c, n, "adaptive: 'signal' is missing (p99_latency or error_ratio)");
		bad = -1;
	} else if (get_enum(c, v[0], "adaptive.signal", signals, 2, &s)) {
		bad = -1;
	} else {
		ad->signal = s == 0 ? SLUICE_RULES_SIGNAL_P99_LATENCY : SLUICE_RULES_SIGNAL_ERROR_RATIO;
	}
	if (!v[1]) {
		ERR(c, n, "adaptive: 'baseline' is missing");
		bad = -1;
	} else if (ad->signal == SLUICE_RULES_SIGNAL_P99_LATENCY) {
		bad |= get_duration(c, v[1], "adaptive.baseline", 1, &ad->baseline_ns);
	} else if (ad->signal == SLUICE_RULES_SIGNAL_ERROR_RATIO) {
		if (get_ppm(c, v[1], "adaptive.baseline", 1, &u) != 0) {
			bad = -1;
		} else if (u < 1 || u > SLUICE_RULES_PPM) {
			ERR(c, v[1], "adaptive.baseline: an error ratio in 0.0001%%..100%%");
			bad = -1;
		} else {
			ad->baseline_ppm = (uint32_t)u;
		}
	}
	ad->factor_ppm = 1500000; /* defaults: docs/rules.md */
	ad->windows = 3;
	ad->window_ns = 10000000000ULL;
	ad->step_ppm = 100000;
	if (v[2]) {
		if (get_ppm(c, v[2], "adaptive.factor", 0, &u) != 0) {
			bad = -1;
		} else if (u <= SLUICE_RULES_PPM) {
			ERR(c, v[2], "adaptive.factor: must be above 1 (the signal's multiple of baseline "
			             "that counts as overload)");
			bad = -1;
		} else {
			ad->factor_ppm = u;
		}
	}
	if (v[3]) {
		if (get_uint(c, v[3], "adaptive.windows", 1, 1000, &u) == 0)
			ad->windows = (uint32_t)u;
		else
			bad = -1;
	}
	if (v[4])
		bad |= get_duration(c, v[4], "adaptive.window", 1, &ad->window_ns);
	if (v[5]) {
		if (get_ppm(c, v[5], "adaptive.step", 1, &u) != 0) {
			bad = -1;
		} else if (u < 10000 || u > SLUICE_RULES_PPM || u % 10000 != 0) {
			ERR(c, v[5], "adaptive.step: a whole percentage in 1%%..100%%");
			bad = -1;
		} else {
			ad->step_ppm = (uint32_t)u;
		}
	}
	if (!v[6]) {
		ERR(c, n, "adaptive: 'floor' is missing (the lowest limit it may set)");
		bad = -1;
	} else {
		bad |= get_uint(c, v[6], "adaptive.floor", 1, UINT64_MAX, &ad->floor);
	}
	return bad;
}

/* ---- the check by sluice itself -------------------------------------- */

int sluice_rule_per_process(const sluice_rule_t *r)
{
	if (!r || r->per_key || r->backend)
		return 0;
	if (r->fallback.type == SLUICE_RULES_FALLBACK_QUEUE)
		return 1;
	switch (r->limit.algo) {
	case SLUICE_ALGO_GCRA:
	case SLUICE_ALGO_LEAKY:
	case SLUICE_ALGO_FIXED:
	case SLUICE_ALGO_WINDOW:
	case SLUICE_ALGO_INFLIGHT:
		return 0;
	default:
		return 1;
	}
}

void sluice_rule_keyed_config(const sluice_rule_t *r, sluice_keyed_config_t *out)
{
	const sluice_rules_limit_t *l = &r->limit;
	*out = (sluice_keyed_config_t){
		.algo = l->algo, .policy = r->keys.policy, .flags = r->keys.flags,
		.key_max = r->keys.key_max, .capacity = r->keys.capacity, .rate = l->rate,
		.period_ns = l->period_ns, .burst = l->burst, .depth = l->depth,
		.limit = l->limit, .window_ns = l->window_ns, .buckets = l->buckets,
	};
}

int sluice_rule_limiter_config(const sluice_rule_t *r, const sluice_clock_t *clk,
                               sluice_limiter_config_t *out)
{
	const sluice_rules_limit_t *l = &r->limit;
	*out = (sluice_limiter_config_t){ .algo = l->algo };
	switch (l->algo) {
	case SLUICE_ALGO_GCRA:
		out->gcra = (sluice_gcra_config_t){ .rate = l->rate, .period_ns = l->period_ns,
			                            .burst = l->burst, .clock = clk };
		break;
	case SLUICE_ALGO_LEAKY:
		out->leaky = (sluice_leaky_config_t){ .rate = l->rate, .period_ns = l->period_ns,
			                              .mode = SLUICE_LEAKY_METER, .depth = l->depth,
			                              .clock = clk };
		if (r->fallback.type == SLUICE_RULES_FALLBACK_QUEUE) {
			out->leaky.mode = SLUICE_LEAKY_SHAPER;
			out->leaky.max_delay_ns = r->fallback.max_wait_ns;
		}
		break;
	case SLUICE_ALGO_FIXED:
		out->fixed = (sluice_fixed_config_t){ .limit = l->limit, .window_ns = l->window_ns,
			                              .clock = clk };
		break;
	case SLUICE_ALGO_WINDOW:
		out->window = (sluice_window_config_t){ .limit = l->limit, .window_ns = l->window_ns,
			                                .buckets = l->buckets,
			                                .clock = clk };
		break;
	case SLUICE_ALGO_LOG:
		out->log = (sluice_log_config_t){ .limit = l->limit, .window_ns = l->window_ns,
			                          .clock = clk };
		break;
	case SLUICE_ALGO_WARMUP:
		out->warmup = (sluice_warmup_config_t){ .rate = l->rate, .period_ns = l->period_ns,
			                                .warmup_ns = l->warmup_ns, .clock = clk };
		break;
	case SLUICE_ALGO_DECAY:
		out->decay = (sluice_decay_config_t){ .limit = l->limit,
			                              .half_life_ns = l->half_life_ns, .clock = clk };
		break;
	case SLUICE_ALGO_INFLIGHT:
		out->inflight = (sluice_inflight_config_t){ .limit = l->limit, .clock = clk };
		break;
	default:
		return SLUICE_EALGO;
	}
	return 0;
}

/*
 * Hand the rule's parameters to the algorithm's own validation.  Per-key
 * rules: sluice_keyed_config_check(), init's own validator (the
 * algorithm's init and the keyed ranges, the keys section's capacity,
 * policy and key length) and, with a clock in the options, the resolution
 * checks attach makes with it: no probe table.  Global rules:
 * sluice_limiter_config_check(), the algorithm's init's own validator: no
 * probe limiter.  Return: 0 or the sluice code (reported).
 */
static int check_with_sluice(struct ctx *c, sluice_rule_t *r)
{
	const sluice_rules_limit_t *l = &r->limit;
	sluice_clock_t manual;
	sluice_clock_manual_init(&manual, 0);
	const sluice_clock_t *clk = c->opt && c->opt->clock ? c->opt->clock : &manual;
	const char *who;
	int rc;
	if (r->per_key) {
		sluice_keyed_config_t kc;
		sluice_rule_keyed_config(r, &kc);
		who = "sluice_keyed_config_check";
		rc = sluice_keyed_config_check(&kc, c->opt ? c->opt->clock : NULL);
		if (rc == 0)
			r->keys.region_bytes = sluice_keyed_region_bytes(&kc);
	} else {
		sluice_limiter_config_t lc;
		sluice_rule_limiter_config(r, clk, &lc); /* EALGO: the check says so */
		who = "sluice_limiter_config_check";
		rc = sluice_limiter_config_check(&lc);
	}
	if (rc != 0)
		sluice__err(c->x, &r->mark, rc, "rule '%s': %s parameters refused by %s: %s (%s)", r->id,
		            sluice_rules_algo_name(l->algo), who, sluice_err_name(rc),
		            sluice_strerror(rc));
	return rc;
}

/* ---- backends (rules.h BACKENDS) --------------------------------------- */

/*
 * HOST:PORT with a numeric host (IPv4, or IPv6 in brackets): a name would
 * make every connect wait on the resolver, past any budget (redis.h,
 * sluice_redis_free).  Return 0 with @host (into the arena) and @port, or
 * -1 (reported).
 */
static int get_address(struct ctx *c, const struct sluice__node *n, const char *what,
                       const char **host, uint32_t *port)
{
	if (need_scalar(c, n, what, "HOST:PORT such as 127.0.0.1:6379"))
		return -1;
	char b[48], h[INET6_ADDRSTRLEN + 1];
	const char *s = n->s, *colon = NULL;
	size_t len = n->len, hl;
	unsigned char addr[16];
	int ok = 0;
	if (len && s[0] == '[') {
		const char *end = memchr(s, ']', len);
		if (end && end + 1 < s + len && end[1] == ':') {
			colon = end + 1;
			hl = (size_t)(end - s - 1);
			if (hl < sizeof(h)) {
				memcpy(h, s + 1, hl);
				h[hl] = '\0';
				ok = inet_pton(AF_INET6, h, addr) == 1;
			}
		}
	} else if ((colon = memchr(s, ':', len)) != NULL) {
		hl = (size_t)(colon - s);
		if (hl < sizeof(h)) {
			memcpy(h, s, hl);
			h[hl] = '\0';
			ok = inet_pton(AF_INET, h, addr) == 1;
		}
	}
	uint64_t p = 0;
	size_t pos = 0;
	if (ok) {
		const char *ps = colon + 1;
		size_t pl = len - (size_t)(ps - s);
		ok = digits(ps, pl, &pos, &p) == 0 && pos == pl && p >= 1 && p <= 65535;
	}
	if (!ok) {
		ERR(c, n, "%s: '%s' is not HOST:PORT with a numeric address and a port 1..65535 "
		          "(127.0.0.1:6379, [::1]:6379; a host name would wait on the resolver)",
		    what, shown(n, b));
		return -1;
	}
	if (!(*host = sluice__arena_strndup(c->out, h, strlen(h)))) {
		c->x->oom = 1;
		return -1;
	}
	*port = (uint32_t)p;
	return 0;
}

/*
 * A backend's address: HOST:PORT, or a list of 1..SLUICE_RULES_ADDRESSES_MAX
 * of them (a failover: sluice/redis.h FAILOVER), each as get_address says.
 * Fills @b's address (as written, a list joined with ", "), host and port
 * (the first's), n_addresses and addresses ("host:port", IPv6 in
 * brackets).  Return 0, or -1 (reported; c->x->oom on no memory).
 */
static int take_addresses(struct ctx *c, const struct sluice__node *n, const char *what,
                          sluice_rules_backend_t *b)
{
	const struct sluice__node *one[SLUICE_RULES_ADDRESSES_MAX];
	size_t count = 0;
	if (n->type == SLUICE__SEQ) {
		if (n->n == 0 || n->n > SLUICE_RULES_ADDRESSES_MAX) {
			ERR(c, n, "%s: a list of %zu addresses (1 to %u)", what, n->n,
			    SLUICE_RULES_ADDRESSES_MAX);
			return -1;
		}
		for (const struct sluice__node *e = n->first; e; e = e->next)
			one[count++] = e;
	} else {
		one[count++] = n;
	}
	const char **list = sluice__arena_alloc(c->out, count * sizeof(*list));
	char *joined = sluice__arena_alloc(c->out, count * 64);
	if (!list || !joined) {
		c->x->oom = 1;
		return -1;
	}
	int bad = 0;
	size_t at = 0;
	for (size_t i = 0; i < count; i++) {
		const char *host;
		uint32_t port;
		if (get_address(c, one[i], what, &host, &port) != 0) {
			if (c->x->oom)
				return -1;
			bad = -1;
			continue;
		}
		if (i == 0) {
			b->host = host;
			b->port = port;
		}
		char a[64];
		int w = snprintf(a, sizeof(a), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host,
		                 (unsigned)port);
		if (!(list[i] = sluice__arena_strndup(c->out, a, (size_t)w))) {
			c->x->oom = 1;
			return -1;
		}
		at += (size_t)snprintf(joined + at, count * 64 - at, "%s%.*s", i ? ", " : "",
		                       (int)one[i]->len, one[i]->s);
	}
	if (bad)
		return -1;
	b->n_addresses = (uint32_t)count;
	b->addresses = list;
	b->address = joined;
	return 0;
}

static int take_backend(struct ctx *c, const struct sluice__node *k, const struct sluice__node *n,
                        sluice_rules_backend_t *b)
{
	static const char *const keys[] = { "type",           "address",         "lease_ttl",
		                            "budget",         "lease_max",       "fallback",
		                            "expected_instances", "connect_timeout", "command_timeout",
		                            "breaker_failures", "breaker_open",  "max_limits",
		                            "sentinel",       "cluster" };
	static const char *const types[] = { "redis" };
	static const char *const fallbacks[] = { "local", "allow", "deny" };
	const struct sluice__node *v[COUNT(keys)];
	char what[SLUICE_RULES_ID_MAX + 32];
	int bad = 0;
	b->mark = n->mark;
	b->lease_max = 16;
	b->fallback = SLUICE_RULES_BACKEND_LOCAL;
	b->expected_instances = 1;
	if (get_string(c, k, "backends: a backend's name", SLUICE_RULES_ID_MAX, id_char,
	               "letters, digits and - _ .", &b->name))
		return -1;
	snprintf(what, sizeof(what), "backends.%s", b->name);
	if (take_map(c, n, what, keys, COUNT(keys), v))
		return -1;
	unsigned i;
	snprintf(what, sizeof(what), "backends.%s.type", b->name);
	if (!v[0]) {
		ERR(c, n, "backends.%s: 'type' is missing (redis)", b->name);
		bad = -1;
	} else if (get_enum(c, v[0], what, types, COUNT(types), &i)) {
		bad = -1;
	} else if (!sluice__backend_built(SLUICE_RULES_BACKEND_REDIS)) {
		ERR(c, v[0], "%s: redis needs libsluice-redis, which this build of libsluice-rules "
		             "does not have (configure with -Dredis=enabled, hiredis installed)",
		    what);
		bad = -1;
	} else {
		b->type = SLUICE_RULES_BACKEND_REDIS;
	}
	snprintf(what, sizeof(what), "backends.%s.address", b->name);
	if (!v[1]) {
		ERR(c, n, "backends.%s: 'address' is missing (HOST:PORT, or a list of them)", b->name);
		bad = -1;
	} else if (take_addresses(c, v[1], what, b) != 0) {
		if (c->x->oom)
			return -1;
		bad = -1;
	}
	snprintf(what, sizeof(what), "backends.%s.sentinel", b->name);
	if (v[12] && get_string(c, v[12], what, SLUICE_RULES_SENTINEL_MAX, id_char,
	                        "letters, digits and - _ .", &b->sentinel))
		bad = -1;
	snprintf(what, sizeof(what), "backends.%s.cluster", b->name);
	int cluster = 0;
	if (v[13] && get_bool(c, v[13], what, &cluster))
		bad = -1;
	else if (cluster && v[12]) {
		ERR(c, v[13], "%s: a cluster's primaries come from its slot map; 'sentinel' is for "
		              "one primary and its replicas", what);
		bad = -1;
	}
	b->cluster = (uint32_t)cluster;
	/* the durations, each optional: 0 leaves libsluice-redis's default */
	static const struct {
		unsigned key;
		size_t off;
	} durs[] = { { 2, offsetof(sluice_rules_backend_t, lease_ttl_ns) },
		     { 3, offsetof(sluice_rules_backend_t, budget_ns) },
		     { 7, offsetof(sluice_rules_backend_t, connect_timeout_ns) },
		     { 8, offsetof(sluice_rules_backend_t, command_timeout_ns) },
		     { 10, offsetof(sluice_rules_backend_t, breaker_open_ns) } };
	for (size_t d = 0; d < COUNT(durs); d++) {
		if (!v[durs[d].key])
			continue;
		snprintf(what, sizeof(what), "backends.%s.%s", b->name, keys[durs[d].key]);
		uint64_t ns;
		if (get_duration(c, v[durs[d].key], what, 1, &ns))
			bad = -1;
		else
			memcpy((char *)b + durs[d].off, &ns, sizeof(ns));
	}
	static const struct {
		unsigned key;
		uint64_t max;
		size_t off;
	} counts[] = { { 4, SLUICE__BACKEND_LEASE_MAX, offsetof(sluice_rules_backend_t, lease_max) },
		       { 6, UINT32_MAX, offsetof(sluice_rules_backend_t, expected_instances) },
		       { 9, UINT32_MAX, offsetof(sluice_rules_backend_t, breaker_failures) },
		       { 11, UINT32_MAX, offsetof(sluice_rules_backend_t, max_limits) } };
	for (size_t d = 0; d < COUNT(counts); d++) {
		if (!v[counts[d].key])
			continue;
		snprintf(what, sizeof(what), "backends.%s.%s", b->name, keys[counts[d].key]);
		uint64_t u;
		if (get_uint(c, v[counts[d].key], what, 1, counts[d].max, &u)) {
			bad = -1;
		} else {
			uint32_t u32 = (uint32_t)u;
			memcpy((char *)b + counts[d].off, &u32, sizeof(u32));
		}
	}
	snprintf(what, sizeof(what), "backends.%s.fallback", b->name);
	if (v[5] && get_enum(c, v[5], what, fallbacks, COUNT(fallbacks), &i) == 0)
		b->fallback = (sluice_rules_backend_fallback_t)(i + 1);
	else if (v[5])
		bad = -1;
	if (v[6] && b->fallback != SLUICE_RULES_BACKEND_LOCAL && !bad)
		ERR(c, v[6], "backends.%s.expected_instances: sizes the local share of fallback: "
		             "local, and the fallback is not local", b->name);
	return bad;
}

/* backends: a mapping of names to backends.  Return: 0 or -1 (reported). */
static int take_backends(struct ctx *c, const struct sluice__node *n)
{
	if (n->type == SLUICE__BAD)
		return -1;
	if (n->type != SLUICE__MAP) {
		ERR(c, n, "backends: expected a mapping of names to backends, found %s", type_name(n));
		return -1;
	}
	size_t count = n->n / 2;
	if (count > SLUICE__BACKENDS_MAX) {
		ERR(c, n, "backends: %zu backends, at most %u", count, SLUICE__BACKENDS_MAX);
		return -1;
	}
	sluice_rules_backend_t *bs = sluice__arena_alloc(c->out, (count + 1) * sizeof(*bs));
	if (!bs) {
		c->x->oom = 1;
		return -1;
	}
	unsigned char *refused = sluice__arena_alloc(c->out, count + 1);
	if (!refused) {
		c->x->oom = 1;
		return -1;
	}
	int bad = 0;
	size_t k = 0;
	for (const struct sluice__node *key = n->first; key && key->next; key = key->next->next) {
		if (key->type != SLUICE__SCALAR) {
			if (key->type != SLUICE__BAD)
				ERR(c, key, "backends: a name must be a string, found %s", type_name(key));
			bad = -1;
			continue;
		}
		for (size_t j = 0; j < k; j++)
			if (strlen(bs[j].name) == key->len && memcmp(bs[j].name, key->s, key->len) == 0) {
				ERR(c, key, "backends: duplicate backend '%s' (first at line %u col %u)",
				    bs[j].name, bs[j].mark.line, bs[j].mark.col);
				bad = -1;
				goto next;
			}
		/* a refused backend stays in the list (flagged): a rule naming
		 * it is still checked for what a backend cannot run, and gets
		 * no second error for the name */
		int rc = take_backend(c, key, key->next, &bs[k]);
		if (rc != 0)
			bad = -1;
		if (!bs[k].name) { /* no name to find it by: not listed */
			memset(&bs[k], 0, sizeof(bs[k]));
			continue;
		}
		refused[k++] = rc != 0;
	next:;
	}
	c->backends = bs;
	c->nbackends = k;
	c->backend_bad = refused;
	return bad;
}

/* The rule's `backend: NAME`.  Return: 0; 1 for a backend refused
 * (already reported: the rule is checked, not built); -1 (reported). */
static int take_rule_backend(struct ctx *c, const struct sluice__node *n, sluice_rule_t *r)
{
	const char *name;
	r->backend_mark = n->mark;
	if (get_string(c, n, "backend", SLUICE_RULES_ID_MAX, id_char, "letters, digits and - _ .",
	               &name))
		return -1;
	for (size_t i = 0; i < c->nbackends; i++)
		if (strcmp(c->backends[i].name, name) == 0) {
			r->backend = &c->backends[i];
			return c->backend_bad[i] ? 1 : 0;
		}
	char list[160];
	size_t o = 0;
	for (size_t i = 0; i < c->nbackends && o < sizeof(list); i++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "",
		                      c->backends[i].name);
	if (c->nbackends)
		ERR(c, n, "backend: unknown backend '%s' (the file's backends: %s)", name, list);
	else
		ERR(c, n, "backend: unknown backend '%s' (the file has no backends: section)", name);
	return -1;
}

/* What a rule on a backend cannot be, once its sections are read. */
static void check_on_backend(struct ctx *c, const struct sluice__node *bn, sluice_rule_t *r)
{
	const sluice_rules_backend_t *b = r->backend;
	const char *an = sluice_rules_algo_name(r->limit.algo);
	if (!sluice__backend_algo(r->limit.algo)) {
		ERR(c, bn, "backend: %s (%s) cannot run %s: a rule on a backend takes token_bucket, "
		           "fixed_window, sliding_window or sliding_log",
		    b->name, b->address, an ? an : "this algorithm");
		return;
	}
	if (r->fallback.type == SLUICE_RULES_FALLBACK_QUEUE)
		ERR(c, bn, "backend: a rule on backend %s cannot have fallback: queue (a Redis "
		           "limit books no slot)", b->name);
	if (r->adaptive.enabled)
		ERR(c, bn, "backend: a rule on backend %s cannot be adaptive (a Redis limit's "
		           "parameters are fixed for its life)", b->name);
	if (r->per_key) {
		if (r->keys.key_max > SLUICE__BACKEND_KEY_MAX)
			ERR(c, bn, "backend: a per-key rule on backend %s takes keys.key_max up to %u "
			           "(keys go to Redis in hex), not %u",
			    b->name, SLUICE__BACKEND_KEY_MAX, r->keys.key_max);
		if (r->keys.flags & SLUICE_KEYED_HASH_LONG_KEYS)
			ERR(c, bn, "backend: a per-key rule on backend %s cannot hash_long_keys",
			    b->name);
		if (r->keys.capacity > SLUICE__BACKEND_CAPACITY_MAX)
			ERR(c, bn, "backend: a per-key rule on backend %s takes keys.capacity up to %u, "
			           "not %llu",
			    b->name, SLUICE__BACKEND_CAPACITY_MAX, (unsigned long long)r->keys.capacity);
	}
}

/* The rule's parameters, by libsluice-redis's own validation (the global
 * limit or the per-key one, and its LOCAL share): no connection made. */
static int check_with_backend(struct ctx *c, sluice_rule_t *r)
{
	const char *who = "sluice_redis_limit_config_check";
	int rc = sluice__backend_limit_check(r, c->opt ? c->opt->clock : NULL);
	/* what the code means here, where its generic text says too little */
	const char *hint = "";
	if (rc == SLUICE_EMODE && r->backend->fallback == SLUICE_RULES_BACKEND_LOCAL)
		hint = "; fallback: local keeps limit / expected_instances (token_bucket: rate and "
		       "burst divided) and that share must be at least 1";
	else if (rc == SLUICE_EWINDOW || rc == SLUICE_ERATE)
		hint = "; Redis counts in whole microseconds: the window, a bucket, and a "
		       "token_bucket's period / rate must each be whole microseconds";
	else if (rc == SLUICE_ELEASE)
		hint = "; lease_max 1..65536, and a sliding_log's lease_ttl below its window";
	if (rc != 0)
		sluice__err(c->x, &r->mark, rc,
		            "rule '%s': %s parameters refused by %s on backend %s: %s (%s%s)", r->id,
		            sluice_rules_algo_name(r->limit.algo), who, r->backend->name,
		            sluice_err_name(rc), sluice_strerror(rc), hint);
	return rc;
}

/* ---- rules ----------------------------------------------------------- */

/* The limit the adaptive floor is measured against: GCRA's rate (per its
 * period), the windows' and the concurrency limit's L. */
static uint64_t configured_limit(const sluice_rules_limit_t *l)
{
	return l->algo == SLUICE_ALGO_GCRA ? l->rate : l->limit;
}

/*
 * One rule: each section is read on its own (an error in one does not
 * hide another), then the checks across sections (per-key algorithm, a
 * queue's algorithm, adaptive on a live limit, the floor under the
 * limit), then, only when all of that is clean, sluice's own validation.
 */
static void take_rule(struct ctx *c, const struct sluice__node *n, sluice_rule_t *r)
{
	static const char *const keys[] = { "id",       "match",    "dimensions", "limit",
		                            "keys",     "fallback", "mode",       "on_error",
		                            "adaptive", "empty_key", "backend" };
	static const char *const modes[] = { "enforce", "shadow" };
	static const char *const empty_key[] = { "shared", "pass" };
	static const char *const on_error[] = { "allow", "reject" };
	const struct sluice__node *v[COUNT(keys)];
	size_t before = sluice__err_total(c->x);
	r->mark = n->mark;
	r->fallback.type = SLUICE_RULES_FALLBACK_REJECT;
	r->fallback.status = 429;
	r->keys.capacity = 65536;
	r->keys.policy = SLUICE_KEYED_REJECT;
	r->keys.key_max = SLUICE_KEYED_KEY_DEFAULT;
	if (take_map(c, n, "rule", keys, COUNT(keys), v))
		return;
	if (!v[0]) {
		ERR(c, n, "rule: 'id' is missing");
	} else {
		r->id_mark = v[0]->mark;
		get_string(c, v[0], "id", SLUICE_RULES_ID_MAX, id_char,
		           "letters, digits and - _ .", &r->id);
	}
	int bad = 0; /* a section refused (maybe silently: an alias, reported) */
	if (v[1])
		bad |= take_match(c, v[1], &r->match);
	if (v[2])
		bad |= take_dims(c, v[2], r);
	int limit_ok = -1;
	if (!v[3])
		ERR(c, n, "rule: 'limit' is missing");
	else
		limit_ok = take_limit(c, v[3], &r->limit);
	const struct algo *a = algo_of(r->limit.algo);
	if (v[4]) {
		if (take_keys(c, v[4], &r->keys) != 0)
			bad = -1;
		else if (!r->per_key && (!v[2] || r->ndims > 0))
			ERR(c, v[4], "keys: sizes the per-key tables, and the rule has no per-key dimension");
	}
	if (a && r->per_key && !a->per_key)
		ERR(c, v[3], "limit: %s is not per key (keyed tables hold token_bucket, leaky_bucket, "
		             "fixed_window, sliding_window, concurrency): use dimensions [global]",
		    a->name);
	int fb = v[5] ? take_fallback(c, v[5], &r->fallback) : 0;
	bad |= fb;
	if (fb == 0 && r->fallback.type == SLUICE_RULES_FALLBACK_QUEUE && a) {
		if (!a->books)
			ERR(c, v[5], "fallback: queue needs an algorithm that books a slot (token_bucket, "
			             "leaky_bucket, warmup), not %s", a->name);
		else if (r->per_key)
			ERR(c, v[5], "fallback: queue needs a global rule (keyed tables do not book)");
	}
	unsigned i;
	if (v[6] && get_enum(c, v[6], "mode", modes, 2, &i) == 0)
		r->mode = (sluice_rules_mode_t)i;
	if (v[7] && get_enum(c, v[7], "on_error", on_error, 2, &i) == 0)
		r->on_error = (sluice_rules_on_error_t)i;
	if (v[9] && get_enum(c, v[9], "empty_key", empty_key, 2, &i) == 0) {
		r->empty_key = (sluice_rules_empty_key_t)i;
		if (!r->per_key && (!v[2] || r->ndims > 0))
			ERR(c, v[9], "empty_key: says what a request with an empty or absent key does, "
			             "and the rule has no per-key dimension");
	}
	int ad = v[8] ? take_adaptive(c, v[8], &r->adaptive) : 0;
	bad |= ad;
	if (v[8] && ad == 0 && limit_ok == 0 && a) {
		if (!a->live)
			ERR(c, v[8], "adaptive: the limit of %s cannot change live (token_bucket, "
			             "fixed_window, sliding_window, concurrency can)",
			    a->name);
		else if (r->adaptive.floor > configured_limit(&r->limit))
			ERR(c, v[8], "adaptive.floor: %llu is above the configured limit %llu",
			    (unsigned long long)r->adaptive.floor,
			    (unsigned long long)configured_limit(&r->limit));
	}
	int bk = v[10] ? take_rule_backend(c, v[10], r) : 0;
	if (bk >= 0 && r->backend && limit_ok == 0 && a)
		check_on_backend(c, v[10], r);
	if (bk != 0)
		bad = -1;
	/* the parameters go to sluice only when everything they are made of
	 * is well-formed: an error above already names the cause */
	if (sluice__err_total(c->x) == before && !bad && limit_ok == 0 && r->id && !c->x->oom) {
		if (r->backend)
			check_with_backend(c, r);
		else
			check_with_sluice(c, r);
	}
}

/* Duplicate ids are found by sorting (10,000 rules: n log n, not n^2). */
struct id_ref {
	const char *id;
	sluice_rules_mark_t mark;
};

static int id_cmp(const void *pa, const void *pb)
{
	const struct id_ref *a = pa, *b = pb;
	int d = strcmp(a->id, b->id);
	if (d)
		return d;
	if (a->mark.line != b->mark.line)
		return a->mark.line < b->mark.line ? -1 : 1;
	return a->mark.col < b->mark.col ? -1 : a->mark.col > b->mark.col;
}

sluice_rule_t *sluice__schema_check(struct sluice__arena *out, struct sluice__errs *x,
                                    const struct sluice__node *root,
                                    const sluice_rules_options_t *opt, size_t *count,
                                    uint64_t *memory, uint64_t *budget,
                                    const sluice_rules_backend_t **backends, size_t *nbackends)
{
	struct ctx c = { out, x, opt, NULL, 0, NULL };
	static const char *const keys[] = { "version", "rules", "memory_budget", "backends" };
	const struct sluice__node *v[COUNT(keys)];
	*count = 0;
	*memory = 0;
	*budget = SLUICE_RULES_MEMORY_BUDGET_DEFAULT;
	*backends = NULL;
	*nbackends = 0;
	if (!root) {
		sluice_rules_mark_t m = { 1, 1 };
		sluice__err(x, &m, 0, "empty file: expected a mapping with 'rules'");
		return NULL;
	}
	if (take_map(&c, root, "file", keys, COUNT(keys), v))
		return NULL;
	uint64_t ver;
	if (v[0] && get_uint(&c, v[0], "version", 0, UINT64_MAX, &ver) == 0 && ver != 1)
		ERR(&c, v[0], "version: %llu is not a version this sluice reads (1)",
		    (unsigned long long)ver);
	if (v[2] && !need_scalar(&c, v[2], "memory_budget", "a size such as 512MiB or 2g")) {
		uint64_t b = 0;
		sluice_parse_error_t pe;
		int rc = sluice_parse_size(v[2]->s, v[2]->len, &b, &pe);
		char sb[48];
		if (rc != 0)
			ERR(&c, v[2], "memory_budget: '%s': %s", shown(v[2], sb), pe.message);
		else if (!v[2]->plain)
			ERR(&c, v[2], "memory_budget: '%s' is not a size (a size such as 512MiB or 2g)",
			    shown(v[2], sb));
		else if (b == 0)
			ERR(&c, v[2], "memory_budget: must be at least 1 byte");
		else
			*budget = b;
	}
	if (opt && opt->memory_budget)
		*budget = opt->memory_budget; /* the caller's wins (rules.h MEMORY) */
	/* before the rules, which name them; a backend refused is not in the
	 * list, so a rule naming it gets one more error, at its own place */
	if (v[3])
		(void)take_backends(&c, v[3]);
	*backends = c.backends;
	*nbackends = c.nbackends;
	if (!v[1]) {
		ERR(&c, root, "file: 'rules' is missing");
		return NULL;
	}
	const struct sluice__node *list = v[1];
	if (list->type != SLUICE__SEQ) {
		if (list->type != SLUICE__BAD)
			ERR(&c, list, "rules: expected a list of rules, found %s", type_name(list));
		return NULL;
	}
	size_t n = list->n;
	if (n > SLUICE_RULES_RULES_MAX) {
		ERR(&c, list, "rules: %zu rules, at most %u", n, SLUICE_RULES_RULES_MAX);
		return NULL;
	}
	/* +1: an empty rule set still gets an array, so a valid load of
	 * `rules: []` is told from an allocation failure */
	sluice_rule_t *rules = sluice__arena_alloc(out, (n + 1) * sizeof(*rules));
	struct id_ref *ids = calloc(n + 1, sizeof(*ids));
	if (!rules || !ids) {
		free(ids);
		x->oom = 1;
		return NULL;
	}
	size_t k = 0, nid = 0;
	int oom = 0, crossed = 0;
	uint64_t mbytes = n ? sluice__metrics_bytes(&oom) : 0, total = 0;
	if (oom)
		x->oom = 1;
	for (const struct sluice__node *e = list->first; e && !x->oom; e = e->next, k++) {
		size_t before = sluice__err_total(x);
		take_rule(&c, e, &rules[k]);
		if (rules[k].id)
			ids[nid++] = (struct id_ref){ rules[k].id, rules[k].id_mark };
		/* MEMORY: a valid rule's cost, in file order; the first rule
		 * that crosses the budget is the error */
		if (sluice__err_total(x) != before)
			continue;
		uint64_t cost = sluice__rule_memory(&rules[k], mbytes);
		total = total + cost < total ? UINT64_MAX : total + cost;
		if (total > *budget && !crossed) {
			crossed = 1;
			sluice__err(x, &rules[k].mark, SLUICE_EMEMORY,
			            "rule '%s': the file needs %llu bytes of memory up to this rule, over "
			            "the memory budget of %llu bytes (its tables, limiters and metrics)",
			            rules[k].id, (unsigned long long)total, (unsigned long long)*budget);
		}
	}
	*memory = total;
	qsort(ids, nid, sizeof(*ids), id_cmp);
	/* sorted by id, then by place: each later copy names the first */
	for (size_t i = 1, first = 0; i < nid; i++) {
		if (strcmp(ids[i].id, ids[first].id) != 0)
			first = i;
		else
			sluice__err(x, &ids[i].mark, 0, "duplicate rule id '%s' (first at line %u col %u)",
			            ids[i].id, ids[first].mark.line, ids[first].mark.col);
	}
	free(ids);
	*count = n;
	return rules;
}
