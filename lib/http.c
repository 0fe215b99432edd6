/* SPDX-License-Identifier: MIT */
/*
 * http.c - format Retry-After, RateLimit-Policy and RateLimit field values.
 *
 * DESIGN: every value is built in a local buffer of SLUICE_HTTP_FIELD_MAX
 * bytes, which holds the longest value any valid input can produce (a name
 * of SLUICE_HTTP_NAME_MAX bytes that all need escaping, 15 + 11 digits).  The
 * caller's buffer is written once at the end: the whole value and its NUL
 * when they fit, otherwise a lone NUL.  So the "never past len" and "all or
 * nothing" promises of the header are kept in one place (emit()), not at
 * every append, and a partial value (a number cut short) can never leave.
 *
 * No snprintf: integers are converted by hand, so the functions take no
 * locale, no lock, allocate nothing and stay async-signal-safe.
 *
 * Rounding: seconds are ceil(ns / 10^9), computed as quotient plus one when
 * there is a remainder, which cannot overflow for any uint64_t.
 */
#include <string.h>

#include "sluice/http.h"

#define NS_PER_SEC 1000000000ULL

/* A value under construction: the local buffer and its length. */
struct out {
	char s[SLUICE_HTTP_FIELD_MAX];
	size_t n;
};

/* The worst-case value must fit the local buffer with its NUL: if someone
 * raises a limit without the size, the build breaks here. */
_Static_assert(SLUICE_HTTP_FIELD_MAX >= 2 + 2 * SLUICE_HTTP_NAME_MAX + 3 + 15 + 3 + 11 + 1,
               "SLUICE_HTTP_FIELD_MAX too small for the longest value");

static uint64_t ceil_seconds(uint64_t ns)
{
	return ns / NS_PER_SEC + (ns % NS_PER_SEC != 0);
}

static void put_str(struct out *o, const char *s)
{
	size_t k = strlen(s);
	memcpy(o->s + o->n, s, k);
	o->n += k;
}

/* Decimal, no sign, no leading zeros.  Callers bound v (15 or 11 digits),
 * so the local buffer never overflows; 20 digits would fit the scratch. */
static void put_u64(struct out *o, uint64_t v)
{
	char tmp[20];
	size_t k = 0;
	do {
		tmp[k++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (k)
		o->s[o->n++] = tmp[--k];
}

/*
 * Append @name as an sf-string: DQUOTE, the bytes with '"' and '\' escaped,
 * DQUOTE.  Return 0, or SLUICE_EINVAL for a NULL, empty or too long name
 * or a byte outside %x20-7E (checked before anything is appended, though
 * nothing leaves the local buffer on error anyway).
 */
static int put_name(struct out *o, const char *name)
{
	if (!name)
		return SLUICE_EINVAL;
	size_t k = strnlen(name, SLUICE_HTTP_NAME_MAX + 1);
	if (k == 0 || k > SLUICE_HTTP_NAME_MAX)
		return SLUICE_EINVAL;
	for (size_t i = 0; i < k; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c < 0x20 || c > 0x7e)
			return SLUICE_EINVAL;
	}
	o->s[o->n++] = '"';
	for (size_t i = 0; i < k; i++) {
		if (name[i] == '"' || name[i] == '\\')
			o->s[o->n++] = '\\';
		o->s[o->n++] = name[i];
	}
	o->s[o->n++] = '"';
	return 0;
}

/*
 * The only place the caller's buffer is written.  @rc: 0 to copy @o out,
 * or the error to report.  On error or when the value and its NUL do not
 * fit in @len, write a lone NUL (when there is room for it) and fail.
 */
static int emit(char *buf, size_t len, const struct out *o, int rc)
{
	if (rc == 0 && o->n >= len)
		rc = SLUICE_HTTP_ETRUNC;
	if (rc != 0) {
		if (len > 0)
			buf[0] = '\0';
		return rc;
	}
	memcpy(buf, o->s, o->n);
	buf[o->n] = '\0';
	return (int)o->n; /* < SLUICE_HTTP_FIELD_MAX: fits an int */
}

int sluice_http_retry_after(char *buf, size_t len, const sluice_decision_t *d)
{
	struct out o = { .n = 0 };
	if (!buf && len > 0)
		return SLUICE_EINVAL;
	if (!d)
		return emit(buf, len, &o, SLUICE_EINVAL);
	if (d->retry_after_ns == SLUICE_NEVER)
		return emit(buf, len, &o, SLUICE_ETOOBIG);
	put_u64(&o, ceil_seconds(d->retry_after_ns));
	return emit(buf, len, &o, 0);
}

int sluice_http_ratelimit_policy(char *buf, size_t len, const char *name, uint64_t quota,
                                 uint64_t window_ns)
{
	struct out o = { .n = 0 };
	if (!buf && len > 0)
		return SLUICE_EINVAL;
	int rc = put_name(&o, name);
	if (rc == 0 && quota > SLUICE_HTTP_SF_INT_MAX)
		rc = SLUICE_ELIMIT; /* never clamp a configuration silently */
	if (rc == 0 && window_ns == 0)
		rc = SLUICE_EWINDOW;
	if (rc == 0) {
		put_str(&o, ";q=");
		put_u64(&o, quota);
		put_str(&o, ";w=");
		put_u64(&o, ceil_seconds(window_ns)); /* >= 1 since window_ns > 0 */
	}
	return emit(buf, len, &o, rc);
}

int sluice_http_ratelimit(char *buf, size_t len, const char *name, const sluice_decision_t *d)
{
	struct out o = { .n = 0 };
	if (!buf && len > 0)
		return SLUICE_EINVAL;
	int rc = d ? put_name(&o, name) : SLUICE_EINVAL;
	if (rc == 0) {
		/* r: what is left, capped to an sf-integer (under-reporting is
		 * the safe side; a concurrency limit counting bytes can pass
		 * 10^15). */
		uint64_t r = d->remaining > SLUICE_HTTP_SF_INT_MAX ? SLUICE_HTTP_SF_INT_MAX
		                                                   : d->remaining;
		put_str(&o, ";r=");
		put_u64(&o, r);
		/* t: on a refusal the Retry-After instant, on an admission the
		 * reset bound; no t when the limiter knows no such time. */
		uint64_t t = d->allowed ? d->reset_ns : d->retry_after_ns;
		if (t != SLUICE_NEVER) {
			put_str(&o, ";t=");
			put_u64(&o, ceil_seconds(t));
		}
	}
	return emit(buf, len, &o, rc);
}

/*
 * The policy of a bucket: b permits at one per T ns.  The window is the
 * whole seconds holding max(b T, 1 s); the quota what the rate gives in it,
 * floor(w / T), which is >= b because w >= b T.
 */
static int bucket_policy(uint64_t b, uint64_t t, uint64_t *quota, uint64_t *window_ns)
{
	sluice__u128 span = (sluice__u128)b * t;
	if (span < NS_PER_SEC)
		span = NS_PER_SEC;
	sluice__u128 w = (span + NS_PER_SEC - 1) / NS_PER_SEC * NS_PER_SEC;
	sluice__u128 q = w / t;
	if (w / NS_PER_SEC > SLUICE_HTTP_SF_INT_MAX || q > SLUICE_HTTP_SF_INT_MAX)
		return SLUICE_ELIMIT;
	*quota = (uint64_t)q;
	*window_ns = (uint64_t)w;
	return 0;
}

/* A limit of L per window: the window rounded up to whole seconds. */
static int window_policy(uint64_t limit, uint64_t window_ns, uint64_t *quota, uint64_t *win)
{
	if (window_ns == 0)
		return SLUICE_EINVAL;
	uint64_t secs = ceil_seconds(window_ns);
	if (limit > SLUICE_HTTP_SF_INT_MAX || secs > SLUICE_HTTP_SF_INT_MAX)
		return SLUICE_ELIMIT;
	*quota = limit;
	*win = secs * NS_PER_SEC;
	return 0;
}

/* ceil(period / rate): the emission interval, as GCRA derives it. */
static int interval(uint64_t rate, uint64_t period_ns, uint64_t *t)
{
	if (rate == 0 || period_ns == 0)
		return SLUICE_EINVAL;
	*t = period_ns / rate + (period_ns % rate != 0);
	return 0;
}

int sluice_http_policy_of(const sluice_limiter_config_t *c, uint64_t *quota, uint64_t *window_ns)
{
	if (!c || !quota || !window_ns)
		return SLUICE_EINVAL;
	uint64_t t = 0;
	int rc;
	switch (c->algo) {
	case SLUICE_ALGO_GCRA:
		if ((rc = interval(c->gcra.rate, c->gcra.period_ns, &t)) != 0)
			return rc;
		return c->gcra.burst ? bucket_policy(c->gcra.burst, t, quota, window_ns)
		                     : SLUICE_EINVAL;
	case SLUICE_ALGO_LEAKY:
		if ((rc = interval(c->leaky.rate, c->leaky.period_ns, &t)) != 0)
			return rc;
		return bucket_policy(c->leaky.mode == SLUICE_LEAKY_METER ? c->leaky.depth + 1 : 1, t,
		                     quota, window_ns);
	case SLUICE_ALGO_WARMUP:
		if ((rc = interval(c->warmup.rate, c->warmup.period_ns, &t)) != 0)
			return rc;
		if (t > UINT64_MAX / 3)
			return SLUICE_ELIMIT;
		return bucket_policy(1, 3 * t, quota, window_ns);
	case SLUICE_ALGO_FIXED:
		return window_policy(c->fixed.limit, c->fixed.window_ns, quota, window_ns);
	case SLUICE_ALGO_WINDOW:
		return window_policy(c->window.limit, c->window.window_ns, quota, window_ns);
	case SLUICE_ALGO_LOG:
		return window_policy(c->log.limit, c->log.window_ns, quota, window_ns);
	case SLUICE_ALGO_DECAY: {
		/* h / ln 2 = h * 1.4426950408889634..., rounded up; u128 for h near 2^64 */
		sluice__u128 tau = ((sluice__u128)c->decay.half_life_ns * 14426950408889634ULL +
		                    9999999999999999ULL) /
		                   10000000000000000ULL;
		if (tau > UINT64_MAX)
			return SLUICE_ELIMIT;
		return window_policy(c->decay.limit, (uint64_t)tau, quota, window_ns);
	}
	default:
		return SLUICE_ENOTSUP;
	}
}
