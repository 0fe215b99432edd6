/* SPDX-License-Identifier: MIT */
/*
 * rules/verdict.c - a verdict's answer fields (Retry-After, RateLimit-
 * Policy, RateLimit) through sluice/http.h, and the names of actions and
 * outcomes.
 *
 * DESIGN.  Pure functions of the verdict: nothing here reads the engine,
 * so a verdict can be formatted after a reload freed the set it came
 * from (it holds copies: the rule ids, decisions and quotas).  Each field
 * is built in a stack buffer of the sizes http.h says always suffice, one
 * member per matched enforcing rule that was asked, joined with ", "
 * (RFC 9651 List); a member http.h refuses (a quota past the sf-integer
 * range, a rule with no window: in-flight) is left out rather than sent
 * cut.  Retry-After is the refusing limit's retry_after_ns, omitted when
 * it is SLUICE_NEVER (a fail-closed error has no honest delay).
 */
#include <string.h>

#include "engine_internal.h"
#include "sluice/error.h"
#include "sluice/http.h"

const char *sluice_action_name(sluice_action_t a)
{
	static const char *const n[] = { "pass", "reject", "queue", "stale", "shadow" };
	return (unsigned)a < sizeof(n) / sizeof(n[0]) ? n[a] : "unknown";
}

const char *sluice_outcome_name(sluice_outcome_t o)
{
	static const char *const n[] = { "passed",     "refused",     "shadow-refused",
		                         "error-open", "error-closed", "not-asked",
		                         "returned",   "queued",       "skipped" };
	return (unsigned)o < sizeof(n) / sizeof(n[0]) ? n[o] : "unknown";
}

/* Members of one list field: at most MATCH_MAX, each at most FIELD_MAX. */
#define LIST_MAX (SLUICE_ENGINE_MATCH_MAX * (SLUICE_HTTP_FIELD_MAX + 2))

static int listed(const sluice_verdict_rule_t *r)
{
	/* a shadow rule enforces nothing: a client told its quota would slow
	 * down for a limit that does not exist */
	if (r->shadow)
		return 0;
	return r->outcome == SLUICE_OUTCOME_PASSED || r->outcome == SLUICE_OUTCOME_REFUSED ||
	       r->outcome == SLUICE_OUTCOME_QUEUED || r->outcome == SLUICE_OUTCOME_RETURNED;
}

static void append(char *list, size_t *used, const char *m, int n)
{
	if (n <= 0)
		return;
	if (*used) {
		memcpy(list + *used, ", ", 2);
		*used += 2;
	}
	memcpy(list + *used, m, (size_t)n);
	*used += (size_t)n;
	list[*used] = '\0';
}

int sluice_verdict_headers(const sluice_verdict_t *v, sluice_header_fn emit, void *ctx)
{
	if (!v || !emit || v->nrules > SLUICE_ENGINE_MATCH_MAX)
		return SLUICE_EINVAL;
	int fields = 0;
	char m[SLUICE_HTTP_FIELD_MAX];
	if (v->action == SLUICE_ACTION_REJECT && v->retry_after_ns != SLUICE_NEVER) {
		sluice_decision_t d = { .retry_after_ns = v->retry_after_ns };
		if (sluice_http_retry_after(m, sizeof(m), &d) > 0) {
			emit(ctx, "Retry-After", m);
			fields++;
		}
	}
	char policy[LIST_MAX], limit[LIST_MAX];
	size_t pu = 0, lu = 0;
	policy[0] = limit[0] = '\0';
	for (uint32_t i = 0; i < v->nrules; i++) {
		const sluice_verdict_rule_t *r = &v->rules[i];
		if (!listed(r) || r->window_ns == 0)
			continue;
		int n = sluice_http_ratelimit_policy(m, sizeof(m), r->id, r->quota, r->window_ns);
		if (n <= 0)
			continue;
		append(policy, &pu, m, n);
		sluice_decision_t d = r->d;
		if (r->outcome == SLUICE_OUTCOME_RETURNED)
			d.allowed = 1; /* its permit went back: the room it reports stands */
		append(limit, &lu, m, sluice_http_ratelimit(m, sizeof(m), r->id, &d));
	}
	if (pu) {
		emit(ctx, "RateLimit-Policy", policy);
		fields++;
	}
	if (lu) {
		emit(ctx, "RateLimit", limit);
		fields++;
	}
	return fields;
}
