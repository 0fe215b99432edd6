/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http.c - the HTTP field formatters (sluice/http.h) with hostile
 * decisions, names and buffer sizes.
 *
 * The input is a decision (every field a hostile number: 0, 2^64 - 1,
 * SLUICE_NEVER, powers of two), a quota and a window, a policy name of
 * 0..SLUICE_HTTP_NAME_MAX + 7 arbitrary bytes, and a buffer size of
 * 0..SLUICE_HTTP_FIELD_MAX + 7.  Each formatter is called twice: once on a
 * buffer of SLUICE_HTTP_FIELD_MAX bytes (the header says that always
 * suffices) and once on a heap buffer of exactly the fuzzed size, so
 * AddressSanitizer sees any byte written at or past buf[len].  The oracle is
 * the header's text, checked on every call:
 *   - success: the return is the length, buf[len] is never reached, the
 *     value is NUL-terminated right there, the small buffer holds exactly
 *     what the large one does, and it parses back under the header's
 *     grammar to the inputs (name unescaped, q, w, r capped at
 *     SLUICE_HTTP_SF_INT_MAX, t present iff not SLUICE_NEVER, seconds
 *     rounded up);
 *   - failure: a documented code, the same as with the large buffer (or
 *     truncation when the value does not fit), and only buf[0] = '\0'
 *     written: every other byte of the buffer keeps its fill pattern;
 *   - the large buffer never truncates.
 */
#include <stdio.h>
#include <string.h>

#include "fuzz_input.h"
#include "sluice/http.h"

#include "../tests/core/test_http_parse.h"

#define FILL 0xa5
#define NS 1000000000ULL

static uint64_t ceil_s(uint64_t ns)
{
	return ns / NS + (ns % NS != 0);
}

static void expect_prefix(const char **p, const char *lit, const char *what)
{
	size_t k = strlen(lit);
	FUZZ_CHECK(strncmp(*p, lit, k) == 0, "%s: want '%s' at '%s'", what, lit, *p);
	*p += k;
}

/* Is @name what the header accepts?  1..NAME_MAX bytes of %x20-7E. */
static int name_ok(const char *name)
{
	if (!name)
		return 0;
	size_t k = strlen(name);
	if (k == 0 || k > SLUICE_HTTP_NAME_MAX)
		return 0;
	for (size_t i = 0; i < k; i++)
		if ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] > 0x7e)
			return 0;
	return 1;
}

enum { F_RETRY, F_POLICY, F_RATELIMIT };

struct call {
	int f;
	const char *name;
	const sluice_decision_t *d;
	uint64_t quota, window_ns;
};

static int format(const struct call *c, char *buf, size_t len)
{
	switch (c->f) {
	case F_RETRY:
		return sluice_http_retry_after(buf, len, c->d);
	case F_POLICY:
		return sluice_http_ratelimit_policy(buf, len, c->name, c->quota, c->window_ns);
	default:
		return sluice_http_ratelimit(buf, len, c->name, c->d);
	}
}

/* The error the header documents for these inputs, or 0 for success. */
static int expected_error(const struct call *c)
{
	switch (c->f) {
	case F_RETRY:
		if (!c->d)
			return SLUICE_EINVAL;
		return c->d->retry_after_ns == SLUICE_NEVER ? SLUICE_ETOOBIG : 0;
	case F_POLICY:
		if (!name_ok(c->name))
			return SLUICE_EINVAL;
		if (c->quota > SLUICE_HTTP_SF_INT_MAX)
			return SLUICE_ELIMIT;
		return c->window_ns == 0 ? SLUICE_EWINDOW : 0;
	default:
		return !c->d || !name_ok(c->name) ? SLUICE_EINVAL : 0;
	}
}

/* Parse a successful value back and compare it with the inputs. */
static void check_grammar(const struct call *c, const char *v)
{
	const char *p = v;
	char name[SLUICE_HTTP_NAME_MAX + 1];
	uint64_t x;
	if (c->f == F_RETRY) {
		FUZZ_CHECK(http_parse_digits(&p, 11, &x) == 0 && *p == '\0', "retry-after '%s'", v);
		FUZZ_CHECK(x == ceil_s(c->d->retry_after_ns), "retry-after '%s' for %llu ns", v,
		           (unsigned long long)c->d->retry_after_ns);
		return;
	}
	FUZZ_CHECK(http_parse_sf_string(&p, name, sizeof(name)) == 0, "sf-string in '%s'", v);
	FUZZ_CHECK(strcmp(name, c->name) == 0, "name '%s' came back as '%s'", c->name, name);
	if (c->f == F_POLICY) {
		expect_prefix(&p, ";q=", v);
		FUZZ_CHECK(http_parse_digits(&p, 15, &x) == 0 && x == c->quota, "q in '%s'", v);
		expect_prefix(&p, ";w=", v);
		FUZZ_CHECK(http_parse_digits(&p, 11, &x) == 0 && x == ceil_s(c->window_ns) && x >= 1,
		           "w in '%s'", v);
		FUZZ_CHECK(*p == '\0', "trailing '%s'", p);
		return;
	}
	uint64_t r = c->d->remaining > SLUICE_HTTP_SF_INT_MAX ? SLUICE_HTTP_SF_INT_MAX
	                                                      : c->d->remaining;
	uint64_t t = c->d->allowed ? c->d->reset_ns : c->d->retry_after_ns;
	expect_prefix(&p, ";r=", v);
	FUZZ_CHECK(http_parse_digits(&p, 15, &x) == 0 && x == r, "r in '%s'", v);
	if (t == SLUICE_NEVER) {
		FUZZ_CHECK(*p == '\0', "t for SLUICE_NEVER in '%s'", v);
		return;
	}
	expect_prefix(&p, ";t=", v);
	FUZZ_CHECK(http_parse_digits(&p, 11, &x) == 0 && x == ceil_s(t), "t in '%s'", v);
	FUZZ_CHECK(*p == '\0', "trailing '%s'", p);
}

static void check(const struct call *c, size_t len)
{
	char big[SLUICE_HTTP_FIELD_MAX];
	memset(big, FILL, sizeof(big));
	int want = expected_error(c);
	int rb = format(c, big, sizeof(big));
	FUZZ_CHECK(want ? rb == want : rb >= 0,
	           "formatter %d: %d (%s) with the always-large-enough buffer, want %d", c->f,
	           rb, sluice_err_name(rb), want);
	if (rb >= 0) {
		FUZZ_CHECK((size_t)rb < sizeof(big) && big[rb] == '\0' && strlen(big) == (size_t)rb,
		           "formatter %d: length %d, NUL not there", c->f, rb);
		check_grammar(c, big);
	} else {
		FUZZ_CHECK(big[0] == '\0', "formatter %d: error %d without buf[0] = NUL", c->f, rb);
		for (size_t i = 1; i < sizeof(big); i++)
			FUZZ_CHECK((unsigned char)big[i] == FILL,
			           "formatter %d: error %d wrote buf[%zu]", c->f, rb, i);
	}

	/* exactly @len bytes on the heap: ASan flags buf[len] and beyond */
	char *buf = len ? malloc(len) : NULL;
	if (len)
		FUZZ_CHECK(buf != NULL, "malloc(%zu)", len);
	if (buf)
		memset(buf, FILL, len);
	int rs = format(c, buf, len);
	if (rb >= 0 && (size_t)rb < len) {
		FUZZ_CHECK(rs == rb, "formatter %d, len %zu: %d, want %d", c->f, len, rs, rb);
		FUZZ_CHECK(memcmp(buf, big, (size_t)rb + 1) == 0,
		           "formatter %d, len %zu: '%.*s' differs from '%s'", c->f, len, rs, buf,
		           big);
	} else {
		int want_s = rb >= 0 ? SLUICE_HTTP_ETRUNC : rb;
		FUZZ_CHECK(rs == want_s, "formatter %d, len %zu: %d, want %d", c->f, len, rs, want_s);
		if (len >= 1) {
			FUZZ_CHECK(buf[0] == '\0', "formatter %d, len %zu: failure without NUL", c->f,
			           len);
			for (size_t i = 1; i < len; i++)
				FUZZ_CHECK((unsigned char)buf[i] == FILL,
				           "formatter %d, len %zu: failure wrote buf[%zu]", c->f, len,
				           i);
		}
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_in_t in = { data, size };
	uint8_t flags = fuzz_u8(&in);
	sluice_decision_t d = { .allowed = flags & 1 };
	d.limit = fuzz_hostile(&in);
	d.remaining = fuzz_hostile(&in);
	d.retry_after_ns = fuzz_hostile(&in);
	d.reset_ns = fuzz_hostile(&in);
	d.now_ns = fuzz_hostile(&in);
	uint64_t quota = fuzz_hostile(&in), window_ns = fuzz_hostile(&in);
	size_t len = (size_t)(fuzz_bytes(&in, 2) % (SLUICE_HTTP_FIELD_MAX + 8));
	/* the name: the rest of the input, at most NAME_MAX + 7 bytes (any
	 * bytes; an embedded NUL just ends it early) */
	char name[SLUICE_HTTP_NAME_MAX + 8];
	size_t k = in.n < sizeof(name) - 1 ? in.n : sizeof(name) - 1;
	memcpy(name, in.p, k);
	name[k] = '\0';

	const sluice_decision_t *dp = flags & 2 ? NULL : &d;
	const char *np = flags & 4 ? NULL : name;
	for (int f = F_RETRY; f <= F_RATELIMIT; f++) {
		struct call c = { .f = f, .name = np, .d = dp, .quota = quota,
			          .window_ns = window_ns };
		check(&c, len);
	}
	return 0;
}
