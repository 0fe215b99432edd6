/* SPDX-License-Identifier: MIT */
/*
 * test_engine_common.h - what the engine's tests share: an engine on a
 * manual clock, loads that must succeed, a request builder, and a header
 * collector.
 */
#ifndef SLUICE_TEST_ENGINE_COMMON_H
#define SLUICE_TEST_ENGINE_COMMON_H

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sluice/error.h"
#include "sluice/engine.h"

#define SEC 1000000000ULL
#define MS 1000000ULL

struct kit {
	sluice_clock_t clk;
	sluice_engine_t *e;
};

static inline void kit_new_region(struct kit *k, void *region, size_t bytes)
{
	sluice_clock_manual_init(&k->clk, 1000 * SEC);
	sluice_engine_options_t o = { .clock = &k->clk, .region = region, .region_bytes = bytes };
	cr_assert_eq(sluice_engine_new(&o, &k->e), 0);
}

static inline void kit_new(struct kit *k)
{
	kit_new_region(k, NULL, 0);
}

static inline void load_ok(struct kit *k, const char *yaml)
{
	sluice_rules_errors_t *errs = NULL;
	int rc = sluice_engine_load_buffer(k->e, "test.yaml", yaml, strlen(yaml), &errs);
	if (rc != 0 && errs) {
		char line[512];
		sluice_rules_error_text(errs, 0, line, sizeof(line));
		cr_assert_fail("load: %d errors, first: %s", rc, line);
	}
	cr_assert_eq(rc, 0, "load: %d", rc);
}

/* A load that must be refused: @nerr errors (0: any number above 0), the
 * first at line @line (0: any) with @msg in its message (NULL: any); the
 * loaded set is kept (the callers check).  Return: the first error's code. */
static inline int load_refused(struct kit *k, const char *yaml, int nerr, int line,
                               const char *msg)
{
	sluice_rules_errors_t *errs = NULL;
	int rc = sluice_engine_load_buffer(k->e, "test.yaml", yaml, strlen(yaml), &errs);
	if (nerr)
		cr_assert_eq(rc, nerr, "load: %d errors, want %d", rc, nerr);
	else
		cr_assert_gt(rc, 0, "load: %d, want errors", rc);
	cr_assert_not_null(errs);
	if (line)
		cr_assert_eq(errs->errors[0].mark.line, line, "first error at line %d, want %d",
		             (int)errs->errors[0].mark.line, line);
	if (msg)
		cr_assert(strstr(errs->errors[0].msg, msg), "%s", errs->errors[0].msg);
	int code = errs->errors[0].code;
	sluice_rules_errors_free(errs);
	return code;
}

static inline void kit_load(struct kit *k, const char *yaml)
{
	kit_new(k);
	load_ok(k, yaml);
}

static inline void kit_free(struct kit *k)
{
	sluice_engine_free(k->e);
}

/* Decide a request; @ip a dotted IPv4 address or NULL. */
static inline int decide(struct kit *k, const char *method, const char *path, const char *host,
                         const char *ip, const char *user, sluice_verdict_t *v)
{
	unsigned char a[4];
	sluice_request_t q = { .method = method, .path = path, .host = host };
	if (ip) {
		cr_assert_eq(inet_pton(AF_INET, ip, a), 1);
		q.addr = a;
		q.addr_len = 4;
	}
	if (user) {
		q.user = user;
		q.user_len = strlen(user);
	}
	int rc = sluice_engine_decide(k->e, &q, v);
	cr_assert_eq(rc, 0, "decide: %d", rc);
	return (int)v->action;
}

/* The action of a decision the engine made (decide returns 0: engine.h). */
static inline int action_of(sluice_engine_t *e, const sluice_request_t *q, sluice_verdict_t *v)
{
	int rc = sluice_engine_decide(e, q, v);
	return rc < 0 ? rc : (int)v->action;
}

struct hdrs {
	char text[2048];
};

static inline void hdr_collect(void *ctx, const char *name, const char *value)
{
	struct hdrs *h = ctx;
	size_t n = strlen(h->text);
	snprintf(h->text + n, sizeof(h->text) - n, "%s: %s\n", name, value);
}

#endif /* SLUICE_TEST_ENGINE_COMMON_H */
