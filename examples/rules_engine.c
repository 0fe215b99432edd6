/* SPDX-License-Identifier: MIT */
/*
 * rules_engine.c - the rules engine in a server, start to end: load a rule
 * file, decide each request, write the answer's header fields, complete
 * the request, and reload without losing any key's state.  docs/rules.md
 * (its quick start) prints this program; it runs as a test (examples/).
 */
#include <stdio.h>
#include <string.h>

#include <sluice/engine.h>

static const char rules_yaml[] =
	"rules:\n"
	"  - id: order-create\n"
	"    match: { path: /api/order/create, methods: [POST] }\n"
	"    dimensions: [ip, user]\n"
	"    limit: { algorithm: token_bucket, rate: 1/m, burst: 2 }\n"
	"    keys: { capacity: 1024 }\n"
	"    fallback: { type: reject, status: 429 }\n";

/* The same rule answering 503: a reload that keeps the state layout. */
static const char rules_yaml_503[] =
	"rules:\n"
	"  - id: order-create\n"
	"    match: { path: /api/order/create, methods: [POST] }\n"
	"    dimensions: [ip, user]\n"
	"    limit: { algorithm: token_bucket, rate: 1/m, burst: 2 }\n"
	"    keys: { capacity: 1024 }\n"
	"    fallback: { type: reject, status: 503 }\n";

static void print_header(void *ctx, const char *name, const char *value)
{
	(void)ctx;
	printf("    %s: %s\n", name, value);
}

static int load(sluice_engine_t *e, const char *yaml)
{
	sluice_rules_errors_t *errs = NULL;
	int rc = sluice_engine_load_buffer(e, "rules.yaml", yaml, strlen(yaml), &errs);
	if (rc > 0) { /* every error, file:line:col: message; the old rules stay */
		char line[512];
		for (size_t i = 0; i < errs->count; i++) {
			sluice_rules_error_text(errs, i, line, sizeof(line));
			fprintf(stderr, "%s\n", line);
		}
		sluice_rules_errors_free(errs);
	}
	return rc;
}

/* One request, as a server's handler would do it; returns the action. */
static int handle(sluice_engine_t *e, const char *user)
{
	unsigned char ip[4] = { 203, 0, 113, 7 };
	sluice_request_t req = { .method = "POST", .path = "/api/order/create",
		                 .addr = ip, .addr_len = sizeof(ip),
		                 .user = user, .user_len = strlen(user) };
	sluice_verdict_t v;
	if (sluice_engine_decide(e, &req, &v) != 0) /* 0, or a negative error */
		return -1;
	printf("user %s: %s %u (rules version %llu)\n", user, sluice_action_name(v.action),
	       v.status, (unsigned long long)v.version);
	sluice_verdict_headers(&v, print_header, NULL);
	/* ... serve it, or answer v.status ... then: */
	sluice_engine_complete(e, &v, 1200000 /* ns it took */, 1 /* ok */);
	return (int)v.action;
}

int main(void)
{
	sluice_engine_t *e;
	if (sluice_engine_new(NULL, &e) != 0 || load(e, rules_yaml) != 0)
		return 1;
	int ok = handle(e, "42") == SLUICE_ACTION_PASS;
	ok &= handle(e, "42") == SLUICE_ACTION_PASS;
	ok &= handle(e, "42") == SLUICE_ACTION_REJECT;  /* burst of 2 per ip and per user */
	ok &= load(e, rules_yaml_503) == 0;            /* version 2, states kept */
	ok &= handle(e, "43") == SLUICE_ACTION_REJECT;  /* the ip's bucket is still empty */
	sluice_engine_free(e);
	return ok ? 0 : 1;
}
