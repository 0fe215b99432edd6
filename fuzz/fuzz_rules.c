/* SPDX-License-Identifier: MIT */
/*
 * fuzz_rules.c - the rule file loader (libsluice-rules,
 * sluice_rules_load_buffer: what `sluice check` and the engine run on a
 * file), fed any bytes as the file.
 *
 * The oracle:
 *   - the return is 0 with a description and no error list, or the number
 *     of errors kept (1..SLUICE_RULES_ERRORS_MAX) with the list and no
 *     description, or SLUICE_ENOMEM with neither;
 *   - every error has a mark inside the input (line 1.. the line breaks
 *     it holds + 1, column >= 1; the input is under the cap, so no 0:0),
 *     errors are in file order, each message is NUL-terminated and not
 *     empty, its code is 0 or a code sluice names, and it formats as
 *     "fuzz:line:col: message";
 *   - a description keeps the schema's promises: ids of 1..64 bytes, all
 *     different; a known algorithm, per key only where keyed tables hold it
 *     (and then with its table's size); statuses in 400..599; a queue's
 *     wait >= 1 ns; at most 8 dimensions; marks inside the input;
 *   - the engine's build cannot fail for a parameter reason: each rule's
 *     limiter (sluice_limiter_new) or keyed table of 8 slots
 *     (sluice_keyed_init) is built with the same parameters;
 *   - a second load of the same bytes gives the same answer, byte for
 *     byte in the error list (no state kept between loads, nothing read
 *     uninitialised).
 * AddressSanitizer checks every byte the loader touches and LeakSanitizer
 * that every error path frees what it had.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "sluice/error.h"
#include "sluice/keyed.h"
#include "sluice/limiter.h"
#include "sluice/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An upper bound on the lines libyaml can count: \n, \r, and the bytes
 * that end NEL (C2 85), LS and PS (E2 80 A8/A9). */
static uint32_t max_line(const uint8_t *d, size_t n)
{
	uint32_t l = 1;
	for (size_t i = 0; i < n; i++)
		l += d[i] == '\n' || d[i] == '\r' || d[i] == 0x85 || d[i] == 0xa8 || d[i] == 0xa9;
	return l;
}

static void check_mark(sluice_rules_mark_t m, uint32_t lines, const char *what)
{
	FUZZ_CHECK(m.line >= 1 && m.line <= lines && m.col >= 1, "%s at %u:%u (%u lines)", what,
	           m.line, m.col, lines);
}

/* Build what the engine will build from @r: it must succeed. */
static void build(const sluice_rule_t *r)
{
	sluice_clock_t manual;
	sluice_clock_manual_init(&manual, 0);
	int rc;
	if (r->per_key) {
		sluice_keyed_config_t kc;
		sluice_rule_keyed_config(r, &kc);
		kc.capacity = SLUICE_KEYED_CAPACITY_MIN; /* the parameters, not the size */
		sluice_keyed_t k;
		rc = sluice_keyed_init(&k, &kc, &manual);
		if (rc == 0)
			sluice_keyed_destroy(&k);
	} else {
		sluice_limiter_config_t lc;
		rc = sluice_rule_limiter_config(r, &manual, &lc);
		FUZZ_CHECK(rc == 0, "rule %s: algorithm %d", r->id, (int)r->limit.algo);
		sluice_limiter_t *lim = NULL;
		rc = sluice_limiter_new(&lc, &lim);
		sluice_limiter_free(lim);
	}
	FUZZ_CHECK(rc == 0 || rc == SLUICE_ENOMEM, "rule %s: the build fails with %s", r->id,
	           sluice_err_name(rc));
}

static void check_rules(const sluice_rules_t *rs, uint32_t lines)
{
	FUZZ_CHECK(rs->count <= SLUICE_RULES_RULES_MAX, "%zu rules", rs->count);
	FUZZ_CHECK(strcmp(rs->file, "fuzz") == 0, "file %s", rs->file);
	for (size_t i = 0; i < rs->count; i++) {
		const sluice_rule_t *r = &rs->rules[i];
		size_t idlen = r->id ? strlen(r->id) : 0;
		FUZZ_CHECK(idlen >= 1 && idlen <= SLUICE_RULES_ID_MAX, "rule %zu: id of %zu bytes", i,
		           idlen);
		for (size_t j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(rs->rules[j].id, r->id) != 0, "id %s twice", r->id);
		check_mark(r->mark, lines, "rule");
		check_mark(r->id_mark, lines, "id");
		check_mark(r->limit.mark, lines, "limit");
		FUZZ_CHECK(sluice_rules_algo_name(r->limit.algo) != NULL, "rule %s: algorithm %d", r->id,
		           (int)r->limit.algo);
		FUZZ_CHECK(r->ndims <= SLUICE_RULES_DIMS_MAX, "%u dimensions", r->ndims);
		int per_key = 0;
		for (uint32_t d = 0; d < r->ndims; d++) {
			check_mark(r->dims[d].mark, lines, "dimension");
			per_key |= r->dims[d].kind != SLUICE_RULES_DIM_GLOBAL;
			FUZZ_CHECK((r->dims[d].name != NULL) == (r->dims[d].kind == SLUICE_RULES_DIM_HEADER ||
			                                         r->dims[d].kind == SLUICE_RULES_DIM_QUERY),
			           "dimension name");
		}
		FUZZ_CHECK(per_key == r->per_key, "rule %s: per_key %d", r->id, r->per_key);
		if (r->per_key) {
			sluice_algo_t a = r->limit.algo;
			FUZZ_CHECK(a == SLUICE_ALGO_GCRA || a == SLUICE_ALGO_LEAKY || a == SLUICE_ALGO_FIXED ||
			                   a == SLUICE_ALGO_WINDOW || a == SLUICE_ALGO_INFLIGHT,
			           "rule %s: per key with %s", r->id, sluice_rules_algo_name(a));
			FUZZ_CHECK(r->keys.region_bytes > 0, "rule %s: no table size", r->id);
			FUZZ_CHECK(r->fallback.type != SLUICE_RULES_FALLBACK_QUEUE, "per-key queue");
		}
		if (r->fallback.type != SLUICE_RULES_FALLBACK_STALE)
			FUZZ_CHECK(r->fallback.status >= 400 && r->fallback.status <= 599, "status %u",
			           r->fallback.status);
		if (r->fallback.type == SLUICE_RULES_FALLBACK_QUEUE)
			FUZZ_CHECK(r->fallback.max_wait_ns >= 1, "queue without a wait");
		if (r->match.path_kind != SLUICE_RULES_PATH_ANY)
			FUZZ_CHECK(r->match.path && r->match.path[0] == '/', "path");
		if (r->adaptive.enabled) {
			FUZZ_CHECK(r->adaptive.floor >= 1 && r->adaptive.factor_ppm > SLUICE_RULES_PPM &&
			                   r->adaptive.windows >= 1 && r->adaptive.step_ppm >= 1,
			           "adaptive");
		}
		build(r);
	}
}

static void check_errors(const sluice_rules_errors_t *e, int rc, uint32_t lines)
{
	FUZZ_CHECK(e != NULL, "rc %d without a list", rc);
	FUZZ_CHECK((size_t)rc == e->count && e->count >= 1 && e->count <= SLUICE_RULES_ERRORS_MAX,
	           "rc %d, %zu errors", rc, e->count);
	for (size_t i = 0; i < e->count; i++) {
		const sluice_rules_error_t *x = &e->errors[i];
		check_mark(x->mark, lines, x->msg);
		if (i > 0) {
			const sluice_rules_mark_t p = e->errors[i - 1].mark;
			FUZZ_CHECK(p.line < x->mark.line || (p.line == x->mark.line && p.col <= x->mark.col),
			           "errors out of order");
		}
		FUZZ_CHECK(memchr(x->msg, 0, sizeof(x->msg)) && x->msg[0], "message");
		FUZZ_CHECK(x->code == 0 || strcmp(sluice_err_name(x->code), "SLUICE_UNKNOWN") != 0,
		           "code %d", x->code);
		char line[512];
		int n = sluice_rules_error_text(e, i, line, sizeof(line));
		char want[32];
		snprintf(want, sizeof(want), "fuzz:%u:%u: ", x->mark.line, x->mark.col);
		FUZZ_CHECK(n > 0 && strncmp(line, want, strlen(want)) == 0, "formatted %s", line);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t lines = max_line(data, size);
	sluice_rules_t *r = NULL, *r2 = NULL;
	sluice_rules_errors_t *e = NULL, *e2 = NULL;
	int rc = sluice_rules_load_buffer("fuzz", data, size, NULL, &r, &e);
	if (rc == SLUICE_ENOMEM) {
		FUZZ_CHECK(!r && !e, "ENOMEM kept something");
		return 0;
	}
	if (rc == 0) {
		FUZZ_CHECK(r && !e, "valid: description %p, errors %p", (void *)r, (void *)e);
		check_rules(r, lines);
	} else {
		FUZZ_CHECK(rc > 0 && !r, "rc %d, description %p", rc, (void *)r);
		check_errors(e, rc, lines);
	}
	int rc2 = sluice_rules_load_buffer("fuzz", data, size, NULL, &r2, &e2);
	FUZZ_CHECK(rc2 == rc || rc2 == SLUICE_ENOMEM, "second load: %d, first %d", rc2, rc);
	if (rc2 == rc && rc > 0) {
		FUZZ_CHECK(e2->count == e->count && e2->dropped == e->dropped &&
		                   memcmp(e2->errors, e->errors, e->count * sizeof(e->errors[0])) == 0,
		           "second load: other errors");
	}
	if (rc2 == rc && rc == 0)
		FUZZ_CHECK(r2->count == r->count, "second load: %zu rules, first %zu", r2->count, r->count);
	sluice_rules_free(r);
	sluice_rules_free(r2);
	sluice_rules_errors_free(e);
	sluice_rules_errors_free(e2);
	return 0;
}
