/* SPDX-License-Identifier: MIT */
/*
 * ngx_http_sluice.h - what the two modules of ngx_http_sluice_module.so
 * share: the directives' module (ngx_http_sluice_module.c: sluice_zone,
 * sluice_limit, sluice_metrics) and the rules module
 * (ngx_http_sluice_rules.c: sluice_rules).  One request context, one
 * $sluice_status, one way to add a header field and to wait on a timer.
 */
#ifndef NGX_HTTP_SLUICE_H
#define NGX_HTTP_SLUICE_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <stdint.h>

/* Outcomes, as $sluice_status names them and the metrics count them
 * (limit_req's $limit_req_status words where they mean the same). */
enum {
	SLUICE_NGX_NONE = 0,
	SLUICE_NGX_PASSED,
	SLUICE_NGX_DELAYED,          /* delay= or a rule's queue fallback     */
	SLUICE_NGX_REJECTED,
	SLUICE_NGX_REJECTED_DRY_RUN, /* dry_run, or a shadow rule refused     */
	SLUICE_NGX_REFUNDED,  /* admitted by this zone, refused by another   */
	SLUICE_NGX_ERRORS,    /* the table failed (EBUSY, EKEYFULL, ...)     */
	SLUICE_NGX_OUTCOMES,  /* the outcomes a sluice_zone counts           */
	SLUICE_NGX_STALE = SLUICE_NGX_OUTCOMES, /* a rule's stale fallback   */
};

/* Per request, on r->main (ngx_http_sluice_get_ctx). */
typedef struct {
	ngx_uint_t status;           /* SLUICE_NGX_*: the last decision's     */
	uint64_t retry_after_ns;
	uint64_t remaining;
	ngx_uint_t have_remaining;
	void *verdict;               /* the rules' sluice_verdict_t, if any   */
	unsigned limits_done : 1;    /* the sluice_limit directives decided   */
	unsigned rules_done : 1;     /* the sluice_rules file decided         */
} ngx_http_sluice_ctx_t;

/* The request's context, kept across internal redirects (which zero
 * r->ctx); @create: make it when there is none.  NULL: none, or out of
 * memory when @create. */
ngx_http_sluice_ctx_t *ngx_http_sluice_get_ctx(ngx_http_request_t *r, ngx_uint_t create);

/* Add the response header field @name: @val of @len bytes (copied; @len
 * <= 0 adds nothing: a helper that refused sends no field rather than a
 * wrong one). */
ngx_int_t ngx_http_sluice_add_header(ngx_http_request_t *r, const char *name, const char *val,
                                     int len);

/* Whether `sluice_headers on` is in force for @r's location: RateLimit
 * fields on admissions too, not only on refusals. */
ngx_uint_t ngx_http_sluice_headers_on(ngx_http_request_t *r);

/* Hold the request @delay_ns on an nginx timer (whole ms, rounded up),
 * then run its phases again: return this from a phase handler. */
ngx_int_t ngx_http_sluice_delay(ngx_http_request_t *r, uint64_t delay_ns);

/* The rules engine's metrics (sluice_engine_metrics: counters in the
 * shared zone, so every worker's answer is the instance's) as a chain of
 * the request's pool into *@out (NULL: no sluice_rules), *@len bytes. */
ngx_int_t ngx_http_sluice_rules_metrics(ngx_http_request_t *r, ngx_chain_t **out, off_t *len);

#endif /* NGX_HTTP_SLUICE_H */
