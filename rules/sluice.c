/* SPDX-License-Identifier: MIT */
/*
 * rules/sluice.c - the `sluice` command.
 *
 *   sluice check FILE   exit 0 when FILE is a valid rule file (printing
 *                       its rules and the memory its state needs, rules.h
 *                       MEMORY); else every error as
 *                       "FILE:line:col: message" on stderr, exit 1
 *   sluice explain FILE 'METHOD PATH [ip=ADDR] [user=ID] [host=HOST]
 *                       [header:NAME=VALUE] [query:NAME=VALUE]...'...
 *                       which rules each request matches, the key each of
 *                       their dimensions uses, and what each decides, the
 *                       requests in order on one fresh engine (the first
 *                       on every key's state new; each later one after
 *                       those before it, each ended at once as by
 *                       sluice_engine_complete), exit 0; an invalid FILE
 *                       as check, exit 1
 *
 * Both take --memory-budget=SIZE after the subcommand (a size as the
 * file's memory_budget: 512MiB, 2g): the budget the file is checked
 * against, in place of the file's own or the 1 GiB default.
 *
 * Anything else (no subcommand, an unknown one, a missing or extra
 * argument, a request that does not parse) prints the usage on stderr and
 * exits 2; `sluice -h` (or --help) prints it on stdout and exits 0;
 * `sluice --version` prints the library's version and exits 0.  A request
 * that does not parse is named in the error, with the word refused.
 *
 * explain decides with the engine itself (sluice_engine_decide), not with
 * a model of it: what it prints is what a server embedding the engine
 * would do with that request first.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sluice/parse.h"
#include "sluice/error.h"
#include "sluice/rules.h"
#include "sluice/version.h"
#if SLUICE_RULES_ENGINE
#include "sluice/engine.h"
#endif

/* explain needs the engine; a build without it (-Dengine=disabled) does
 * not offer it, and names why when asked for it */
static const char usage[] =
	"usage: sluice check [--memory-budget=SIZE] RULES.yaml\n"
	"       sluice -h | --help | --version\n"
#if SLUICE_RULES_ENGINE
	"       sluice explain [--memory-budget=SIZE] RULES.yaml 'METHOD PATH [ip=ADDR] [user=ID] "
	"[host=HOST] [header:NAME=VALUE] [query:NAME=VALUE]...'...\n"
#endif
	;

static uint64_t memory_budget; /* --memory-budget; 0: the file's or the default */

static void print_errors(const char *path, int rc, sluice_rules_errors_t *e)
{
	if (rc < 0 || !e) {
		fprintf(stderr, "%s: %s (%s)\n", path, sluice_strerror(rc), sluice_err_name(rc));
		return;
	}
	char line[1024 + SLUICE_RULES_MSG_MAX];
	for (size_t i = 0; i < e->count; i++) {
		sluice_rules_error_text(e, i, line, sizeof(line));
		fprintf(stderr, "%s\n", line);
	}
	if (e->dropped)
		fprintf(stderr, "%s: %zu more error%s not shown\n", path, e->dropped,
		        e->dropped == 1 ? "" : "s");
}

static int check(const char *path)
{
	sluice_rules_t *r = NULL;
	sluice_rules_errors_t *e = NULL;
	sluice_rules_options_t o = { .memory_budget = memory_budget };
	int rc = sluice_rules_load_file(path, &o, &r, &e);
	if (rc == 0) {
		printf("%s: %zu rule%s, valid; needs %llu bytes of memory (budget %llu)\n", path,
		       r->count, r->count == 1 ? "" : "s", (unsigned long long)r->memory_bytes,
		       (unsigned long long)r->memory_budget);
		sluice_rules_free(r);
		return 0;
	}
	print_errors(path, rc, e);
	sluice_rules_errors_free(e);
	return 1;
}

/* ---- explain ------------------------------------------------------- */
#if SLUICE_RULES_ENGINE

#define ARGS_MAX 32

struct req {
	char *method, *path, *host;
	unsigned char addr[16];
	size_t addr_len;
	char *ip_text, *user;
	struct {
		sluice_lookup_kind_t kind;
		char *name, *value;
	} args[ARGS_MAX];
	int nargs;
};

static const void *lookup(void *ctx, sluice_lookup_kind_t kind, const char *name, size_t *len)
{
	struct req *q = ctx;
	for (int i = 0; i < q->nargs; i++) {
		if (q->args[i].kind != kind)
			continue;
		int eq = kind == SLUICE_LOOKUP_HEADER ? strcasecmp(q->args[i].name, name) == 0
		                                      : strcmp(q->args[i].name, name) == 0;
		if (eq) {
			*len = strlen(q->args[i].value);
			return q->args[i].value;
		}
	}
	return NULL;
}

static int add_arg(struct req *q, sluice_lookup_kind_t kind, char *name, char *value)
{
	if (q->nargs == ARGS_MAX || !*name)
		return -1;
	q->args[q->nargs].kind = kind;
	q->args[q->nargs].name = name;
	q->args[q->nargs].value = value;
	q->nargs++;
	return 0;
}

/* *@why, naming what is refused: the message in a static buffer (the
 * command parses its requests once, on one thread).  Return: -1. */
__attribute__((format(printf, 2, 3))) static int refuse(const char **why, const char *fmt, ...)
{
	static char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	*why = buf;
	return -1;
}

/* Parse @s (modified in place).  Return: 0, or -1 with *@why set. */
static int parse_request(char *s, struct req *q, const char **why)
{
	memset(q, 0, sizeof(*q));
	char *save = NULL;
	q->method = strtok_r(s, " \t", &save);
	q->path = q->method ? strtok_r(NULL, " \t", &save) : NULL;
	if (!q->method || !q->path || q->path[0] != '/')
		return refuse(why, "'%s': the request starts with a method and a path such as "
		                   "/api/order", q->path ? q->path : q->method ? q->method : "");
	char *qs = strchr(q->path, '?');
	if (qs) {
		*qs++ = '\0';
		for (char *a = strtok_r(qs, "&", &qs); a; a = strtok_r(NULL, "&", &qs)) {
			char *eq = strchr(a, '=');
			if (!eq)
				return refuse(why, "query argument '%s': a query argument is NAME=VALUE",
				              a);
			*eq = '\0';
			if (add_arg(q, SLUICE_LOOKUP_QUERY, a, eq + 1))
				return refuse(why, "query argument '%s': too many arguments, or an "
				                   "empty name", a);
		}
	}
	for (char *t = strtok_r(NULL, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(t, '=');
		if (!eq)
			return refuse(why, "'%s': after the path come KEY=VALUE words (ip, user, host, "
			                   "header:NAME, query:NAME)", t);
		*eq = '\0';
		char *v = eq + 1;
		if (strcmp(t, "ip") == 0) {
			q->ip_text = v;
			if (inet_pton(AF_INET, v, q->addr) == 1) {
				q->addr_len = 4;
			} else if (inet_pton(AF_INET6, v, q->addr) == 1) {
				q->addr_len = 16;
			} else {
				return refuse(why, "ip=%s: not an IPv4 or IPv6 address", v);
			}
		} else if (strcmp(t, "user") == 0) {
			q->user = v;
		} else if (strcmp(t, "host") == 0) {
			q->host = v;
		} else if (strncmp(t, "header:", 7) == 0) {
			if (add_arg(q, SLUICE_LOOKUP_HEADER, t + 7, v))
				return refuse(why, "'%s=%s': too many arguments, or an empty header name",
				              t, v);
		} else if (strncmp(t, "query:", 6) == 0) {
			if (add_arg(q, SLUICE_LOOKUP_QUERY, t + 6, v))
				return refuse(why, "'%s=%s': too many arguments, or an empty query name",
				              t, v);
		} else {
			return refuse(why, "unknown word '%s': use ip=, user=, host=, header:NAME=, "
			                   "query:NAME=", t);
		}
	}
	return 0;
}

/* A duration and a rate as the file may write them (sluice/parse.h's
 * formatters: the text every front end reads back as the same value). */
static const char *dur(uint64_t ns, char *b, size_t n)
{
	if (sluice_format_duration(ns, b, n) < 0)
		snprintf(b, n, "?");
	return b;
}

static const char *rate(uint64_t r, uint64_t period_ns, char *b, size_t n)
{
	if (sluice_format_rate(r, period_ns, b, n) < 0)
		snprintf(b, n, "?");
	return b;
}

static void print_limit(const sluice_rule_t *r)
{
	char b1[SLUICE_RATE_STRLEN], b2[SLUICE_RATE_STRLEN];
	const sluice_rules_limit_t *l = &r->limit;
	const char *a = sluice_rules_algo_name(l->algo);
	switch (l->algo) {
	case SLUICE_ALGO_GCRA:
		printf("%s, %s, burst %llu", a, rate(l->rate, l->period_ns, b1, sizeof(b1)),
		       (unsigned long long)l->burst);
		break;
	case SLUICE_ALGO_LEAKY:
		printf("%s, %s, depth %llu", a, rate(l->rate, l->period_ns, b1, sizeof(b1)),
		       (unsigned long long)l->depth);
		break;
	case SLUICE_ALGO_WARMUP:
		printf("%s, %s after a warm-up of %s", a, rate(l->rate, l->period_ns, b1, sizeof(b1)),
		       dur(l->warmup_ns, b2, sizeof(b2)));
		break;
	case SLUICE_ALGO_DECAY:
		printf("%s, %llu, half-life %s", a, (unsigned long long)l->limit,
		       dur(l->half_life_ns, b1, sizeof(b1)));
		break;
	case SLUICE_ALGO_INFLIGHT:
		printf("%s, %llu in flight", a, (unsigned long long)l->limit);
		break;
	default:
		printf("%s, %llu per %s", a, (unsigned long long)l->limit,
		       dur(l->window_ns, b1, sizeof(b1)));
		break;
	}
}

static void print_key(const sluice_rule_t *ru, const sluice_rules_dim_t *d, const struct req *q)
{
	const char *val = NULL;
	size_t len = 0;
	switch (d->kind) {
	case SLUICE_RULES_DIM_IP:
		printf("  key ip");
		val = q->ip_text;
		break;
	case SLUICE_RULES_DIM_USER:
		printf("  key user");
		val = q->user;
		break;
	case SLUICE_RULES_DIM_ROUTE:
		printf("  key route");
		val = q->path;
		break;
	case SLUICE_RULES_DIM_HEADER:
	case SLUICE_RULES_DIM_QUERY:
		printf("  key %s:%s", d->kind == SLUICE_RULES_DIM_HEADER ? "header" : "query", d->name);
		val = lookup((void *)q,
		             d->kind == SLUICE_RULES_DIM_HEADER ? SLUICE_LOOKUP_HEADER
		                                                : SLUICE_LOOKUP_QUERY,
		             d->name, &len);
		break;
	default:
		printf("  key global\n");
		return;
	}
	if (val && *val)
		printf(" = %s\n", val);
	else
		printf(ru->empty_key == SLUICE_RULES_EMPTY_KEY_PASS
		               ? ": none in the request (empty_key: pass, the rule does not limit it)\n"
		               : ": none in the request (the one shared key of requests without it)\n");
}

/* Which backend decided (rules.h BACKENDS), and how: "backend local", or
 * "backend fleet (redis 127.0.0.1:6379): ..." */
static void print_backend(const sluice_rule_t *ru, const sluice_verdict_rule_t *vr)
{
	static const char *const how[] = {
		[SLUICE_SOURCE_LOCAL] = "not asked",
		[SLUICE_SOURCE_REDIS_LEASE] = "admitted from a Redis lease",
		[SLUICE_SOURCE_REDIS_REFUSAL] = "refused by Redis",
		/* one literal: clang's -Wstring-concatenation refuses two in an array */
		[SLUICE_SOURCE_FALLBACK] = "by its fallback (Redis did not answer within the budget, or the breaker is open)",
	};
	if (!ru->backend) {
		printf("  backend local\n");
		return;
	}
	static const char *const fb[] = { "", "local", "allow", "deny" };
	printf("  backend %s (redis %s, fallback %s): %s\n", ru->backend->name,
	       ru->backend->address, fb[ru->backend->fallback & 3],
	       vr->source <= SLUICE_SOURCE_FALLBACK ? how[vr->source] : "?");
}

/* One request's block: the rules it matched, each one's keys and
 * outcome, and the action. */
static void explain_print(const char *path, const sluice_rules_t *rules, const struct req *q,
                          const sluice_verdict_t *v)
{
	printf("%s: %zu rule%s; %u match%s %s %s\n", path, rules->count,
	       rules->count == 1 ? "" : "s", v->nrules, v->nrules == 1 ? "es" : "", q->method, q->path);
	for (uint32_t i = 0; i < v->nrules; i++) {
		const sluice_verdict_rule_t *vr = &v->rules[i];
		const sluice_rule_t *ru = NULL;
		for (size_t j = 0; j < rules->count; j++)
			if (strcmp(rules->rules[j].id, vr->id) == 0)
				ru = &rules->rules[j];
		if (!ru)
			continue;
		printf("rule %s (%s:%u): ", vr->id, path, ru->mark.line);
		print_limit(ru);
		printf("%s\n", ru->mode == SLUICE_RULES_SHADOW ? ", shadow" : "");
		if (ru->per_key)
			for (uint32_t d = 0; d < ru->ndims; d++)
				print_key(ru, &ru->dims[d], q);
		else
			printf("  key global\n");
		printf("  decides: %s", sluice_outcome_name(vr->outcome));
		if (vr->error)
			printf(" (%s)", sluice_err_name(vr->error));
		if (vr->outcome == SLUICE_OUTCOME_PASSED || vr->outcome == SLUICE_OUTCOME_QUEUED)
			printf(", %llu left", (unsigned long long)vr->d.remaining);
		if (vr->d.delay_ns) {
			char db[32];
			printf(", after %s", dur(vr->d.delay_ns, db, sizeof(db)));
		}
		printf("\n");
		if (rules->nbackends) /* without backends every rule is local: no line */
			print_backend(ru, vr);
	}
	char b[32];
	printf("action: %s", sluice_action_name(v->action));
	if (v->action == SLUICE_ACTION_REJECT)
		printf(" %u", v->status);
	if (v->action == SLUICE_ACTION_QUEUE)
		printf(" %s", dur(v->delay_ns, b, sizeof(b)));
	printf("\n");
}

static int explain(const char *path, int n, char **requests)
{
	struct req *q = calloc((size_t)n, sizeof(*q));
	char **bufs = calloc((size_t)n, sizeof(*bufs));
	const char *why = NULL;
	int rc = q && bufs ? 0 : -1;
	/* every request parses, or none is decided */
	for (int i = 0; rc == 0 && i < n; i++) {
		bufs[i] = strdup(requests[i]);
		if (!bufs[i] || parse_request(bufs[i], &q[i], &why))
			rc = -1;
	}
	sluice_rules_t *rules = NULL;
	sluice_rules_errors_t *e = NULL;
	sluice_engine_t *eng = NULL;
	int status = 0;
	if (rc != 0) {
		fprintf(stderr, "sluice explain: %s\n%s", why ? why : "out of memory", usage);
		status = 2;
		goto out;
	}
	sluice_rules_options_t lo = { .memory_budget = memory_budget };
	rc = sluice_rules_load_file(path, &lo, &rules, &e);
	if (rc == 0) {
		sluice_engine_options_t eo = { .memory_budget = memory_budget };
		rc = sluice_engine_new(&eo, &eng);
		if (rc == 0)
			rc = sluice_engine_load_file(eng, path, &e);
	}
	if (rc != 0) {
		print_errors(path, rc, e);
		status = 1;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		sluice_request_t r = { .method = q[i].method, .path = q[i].path, .host = q[i].host,
			               .addr = q[i].addr_len ? q[i].addr : NULL,
			               .addr_len = q[i].addr_len, .user = q[i].user,
			               .user_len = q[i].user ? strlen(q[i].user) : 0,
			               .lookup = lookup, .ctx = &q[i] };
		sluice_verdict_t v;
		rc = sluice_engine_decide(eng, &r, &v);
		if (rc < 0) {
			fprintf(stderr, "sluice explain: %s (%s)\n%s", sluice_strerror(rc),
			        sluice_err_name(rc), usage);
			status = 2;
			goto out;
		}
		explain_print(path, rules, &q[i], &v);
		(void)sluice_engine_complete(eng, &v, 0, 1);
	}
out:
	sluice_rules_errors_free(e);
	sluice_rules_free(rules);
	sluice_engine_free(eng);
	for (int i = 0; bufs && i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(q);
	return status;
}
#endif /* SLUICE_RULES_ENGINE */

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		/* the library it runs with, and the headers it was built with */
		printf("sluice %s (built with %s)\n", sluice_version_string(), SLUICE_VERSION_STRING);
		return 0;
	}
	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		fputs(usage, stdout);
		return 0;
	}
	if (argc > 2 && strncmp(argv[2], "--memory-budget=", 16) == 0) {
		const char *v = argv[2] + 16;
		sluice_parse_error_t e = { "must be above 0", 0 };
		if (sluice_parse_size(v, strlen(v), &memory_budget, &e) != 0 || memory_budget == 0) {
			fprintf(stderr, "sluice: --memory-budget: '%s': %s\n%s", v, e.message, usage);
			return 2;
		}
		for (int i = 2; i + 1 < argc; i++) /* the flag is read: drop it */
			argv[i] = argv[i + 1];
		argc--;
	}
	if (argc == 3 && strcmp(argv[1], "check") == 0)
		return check(argv[2]);
#if SLUICE_RULES_ENGINE
	if (argc >= 4 && strcmp(argv[1], "explain") == 0)
		return explain(argv[2], argc - 3, argv + 3);
#else
	if (argc > 1 && strcmp(argv[1], "explain") == 0) {
		fprintf(stderr, "sluice explain: this sluice was built without the rules engine "
		                "(meson setup -Dengine=enabled)\n%s", usage);
		return 2;
	}
#endif
	/* say what was wrong, naming the word, before the usage */
	if (argc < 2)
		fprintf(stderr, "sluice: a command is needed (check, explain)\n");
	else if (strcmp(argv[1], "check") == 0)
		fprintf(stderr, "sluice check: takes one RULES.yaml, given %d arguments\n", argc - 2);
	else if (strcmp(argv[1], "explain") == 0)
		fprintf(stderr, "sluice explain: takes RULES.yaml and at least one request, given %d "
		                "argument%s\n", argc - 2, argc == 3 ? "" : "s");
	else
		fprintf(stderr, "sluice: unknown command '%s' (check, explain, -h, --help, --version)\n",
		        argv[1]);
	fputs(usage, stderr);
	return 2;
}
