/* SPDX-License-Identifier: MIT */
/*
 * sluice/http.h - HTTP answer helpers: Retry-After, RateLimit-Policy and
 * RateLimit field values from a decision and its policy.
 *
 * Each function formats one field VALUE (not the "Name: " prefix, not CRLF)
 * into a caller's buffer.  The RateLimit fields follow
 * draft-ietf-httpapi-ratelimit-headers-10 (Structured Field Values,
 * RFC 9651: a List of Items whose bare item is a String, with Integer
 * parameters).
 *
 * GRAMMAR produced (ABNF, RFC 5234; DIGIT = %x30-39, DQUOTE = %x22):
 *
 *   retry-after-value  = 1*11DIGIT                  ; delay-seconds, RFC 9110
 *   ratelimit-policy   = sf-string ";q=" quota [ ";w=" window ]
 *                        ; window is always present in sluice's output
 *   ratelimit          = sf-string ";r=" remaining [ ";t=" reset ]
 *   sf-string          = DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE
 *   unescaped          = %x20-21 / %x23-5B / %x5D-7E
 *   quota, remaining   = 1*15DIGIT                  ; sf-integer, >= 0
 *   window             = 1*11DIGIT                  ; sf-integer, >= 1
 *   reset              = 1*11DIGIT                  ; sf-integer, >= 0
 *
 * Integers are written without sign or leading zeros ("0" for zero).  Each
 * call writes one List member; to advertise several policies, join values
 * with ", " yourself or send the field once per member (RFC 9651 3.1: field
 * lines of a List combine).
 *
 * Example, a fixed window of 100 per 60 s, 99 left, 50 s to the window end:
 *
 *   RateLimit-Policy: "default";q=100;w=60
 *   RateLimit: "default";r=99;t=50
 *
 * and on a refusal 4.2 s before the window ends:
 *
 *   Retry-After: 5
 *   RateLimit: "default";r=0;t=5
 *
 * SECONDS round UP, never down: a client is never told to come back early.
 * 0 ns -> 0; 1 ns -> 1; 1 s -> 1; 1 s + 1 ns -> 2.  The largest value a
 * uint64_t of ns can give is 18446744074 (11 digits).
 *
 * WHICH DECISION FIELD:
 *   Retry-After  = ceil(d->retry_after_ns).  SLUICE_NEVER (a request that
 *                  can never pass: n above the limit) has no honest delay:
 *                  the call fails with SLUICE_ETOOBIG and the caller sends
 *                  no Retry-After (answer 413, or 429 without it).
 *   r            = d->remaining, capped at SLUICE_HTTP_SF_INT_MAX (an
 *                  sf-integer has at most 15 digits; under-reporting what
 *                  is left is the safe direction).
 *   t            = ceil(d->allowed ? d->reset_ns : d->retry_after_ns), the
 *                  seconds until quota comes back: on an admission, until
 *                  every permit counted now has left the window (an upper
 *                  bound, so never early); on a refusal, the same instant as
 *                  Retry-After, as the draft asks ("Retry-After ... SHOULD NOT
 *                  reference a point in time earlier than the reset").  When
 *                  that value is SLUICE_NEVER, t is omitted (the draft's
 *                  "no time window reset"): e.g. an admission by the
 *                  concurrency limiter (sluice/inflight.h), whose slots come
 *                  back on release, not at a time.
 *   A concurrency limiter's refusal carries retry_after_ns = 0 ("a slot may
 *   free at any moment"): that formats as Retry-After 0 and t=0, a true
 *   lower bound; a server usually prefers to send its own estimate (say, a
 *   typical request duration) in that case.
 *
 * POLICY: q = quota, 0..SLUICE_HTTP_SF_INT_MAX (the draft allows 0; a larger
 * quota is rejected, SLUICE_ELIMIT, rather than clamped).  w =
 * ceil(window_ns) in seconds, >= 1: the draft has no sub-second windows, and
 * rounding up advertises the same quota over a longer time, which is a rate
 * no higher than the real one (q per 100 ms advertised as q per 1 s).
 * window_ns = 0 is SLUICE_EWINDOW.
 *
 * NAMES must be 1..SLUICE_HTTP_NAME_MAX bytes of printable ASCII
 * (%x20-7E).  '"' and '\' are escaped as \" and \\ ; any other byte
 * (control characters, DEL, non-ASCII/UTF-8) is rejected with
 * SLUICE_EINVAL, never dropped or replaced: a policy name that the client
 * sees must be the one the server meant.  An empty name is rejected too
 * (the item must identify the policy).
 *
 * BUFFERS: @len is the size of @buf in bytes, including room for the NUL.
 * Nothing is ever written at or past buf[len].  Output is all or nothing:
 * on success the whole value and a NUL are written; on any failure, and
 * when @len is too small, only buf[0] = '\0' is written (if len >= 1), so a
 * caller that ignores the return sends an empty (invalid, hence ignored)
 * field rather than a truncated number that means something else
 * ("r=5" cut from "r=50").  Buffers of SLUICE_HTTP_RETRY_AFTER_MAX and
 * SLUICE_HTTP_FIELD_MAX bytes are always large enough: with them the
 * truncation error cannot happen.
 *
 * THREAD-SAFETY: pure functions of their arguments; reentrant,
 * async-signal-safe, no allocation, no locale, no global state.
 */
#ifndef SLUICE_HTTP_H
#define SLUICE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "decision.h"
#include "error.h"
#include "limiter.h"

/* Truncation: the buffer was too small; nothing but a NUL was written.
 * An alias of SLUICE_ETRUNC, kept for the name http.c and its tests use. */
#define SLUICE_HTTP_ETRUNC SLUICE_ETRUNC

/* The largest sf-integer (RFC 9651 3.3.1: at most 15 decimal digits). */
#define SLUICE_HTTP_SF_INT_MAX 999999999999999ULL
/* Longest policy name accepted, in bytes before escaping. */
#define SLUICE_HTTP_NAME_MAX 128
/* Buffer sizes (with the NUL) that always suffice. */
#define SLUICE_HTTP_RETRY_AFTER_MAX 12 /* 11 digits + NUL */
#define SLUICE_HTTP_FIELD_MAX                                                      \
	(2 + 2 * SLUICE_HTTP_NAME_MAX /* quoted, every byte escaped */ +           \
	 3 + 15 /* ";q=" or ";r=" and 15 digits */ + 3 + 11 /* ";w=" or ";t=" */ + \
	 1 /* NUL */)

/*
 * sluice_http_retry_after - Retry-After value (delay-seconds) for @d.
 * @buf, @len: the output buffer and its size.  @d: a decision.
 *
 * Writes ceil(d->retry_after_ns / 1 s) in decimal.  Thread-safe, reentrant.
 * Return: the length written (excluding the NUL); SLUICE_EINVAL (@d NULL,
 * or @buf NULL with @len > 0); SLUICE_ETOOBIG (retry_after_ns is
 * SLUICE_NEVER: send no Retry-After); SLUICE_HTTP_ETRUNC (@len too small;
 * buf[0] = '\0' when len >= 1).
 */
SLUICE_API int sluice_http_retry_after(char *buf, size_t len, const sluice_decision_t *d);

/*
 * sluice_http_ratelimit_policy - RateLimit-Policy member "name";q=Q;w=W.
 * @name: the policy name (see NAMES).  @quota: permits per window
 * (0..SLUICE_HTTP_SF_INT_MAX).  @window_ns: the window, > 0, written as
 * ceil(window_ns / 1 s).
 *
 * Thread-safe, reentrant.
 * Return: the length written (excluding the NUL); SLUICE_EINVAL (NULL
 * @name, bad name, or @buf NULL with @len > 0); SLUICE_ELIMIT (quota above
 * SLUICE_HTTP_SF_INT_MAX); SLUICE_EWINDOW (window_ns = 0);
 * SLUICE_HTTP_ETRUNC (@len too small).  On any error buf[0] = '\0' when
 * len >= 1, and nothing else is written.
 */
SLUICE_API int sluice_http_ratelimit_policy(char *buf, size_t len, const char *name,
                                            uint64_t quota, uint64_t window_ns);

/*
 * sluice_http_policy_of - the quota and window every front end advertises
 * in RateLimit-Policy for a limit configured as @c (the engine's rules and
 * the nginx module's zones both call this, so one limit is advertised one
 * way).  @quota, @window_ns: filled on success.
 *
 * The mapping, one per algorithm.  w is a whole number of seconds (the
 * field's unit, rounded up) and q never more than the limit lets through in
 * any window of that length at its long-run rate, so a client that keeps to
 * q per w is never refused for rate; and q is at least the burst, so the
 * remaining r that RateLimit reports never exceeds q:
 *   GCRA          T = ceil(period / rate), b the burst:  w = the seconds
 *                 holding max(b T, 1 s), q = floor(w / T)  (100/s, b = 1:
 *                 q=100;w=1; 1/m, b = 2: q=2;w=120)
 *   LEAKY         as GCRA with b = D + 1 (meter) or 1 (shaper)
 *   WARMUP        as GCRA with b = 1 at the cold interval 3T (the slowest
 *                 rate it admits at; a warm limiter admits more)
 *   FIXED, WINDOW, LOG   q = L, w = the window's seconds (rounded up)
 *   DECAY         q = L, w = the seconds of the mean life h / ln 2 (rounded
 *                 up: its long-run rate is L ln 2 / h)
 *   INFLIGHT (and the handle-only kinds): no window, no policy:
 *                 SLUICE_ENOTSUP.
 * The config is read, not validated: a config its init would refuse gives
 * SLUICE_EINVAL only where the mapping cannot be computed (rate 0, a zero
 * window).  Thread-safe, no allocation.
 * Return: 0; SLUICE_ENOTSUP (no policy for this kind); SLUICE_EINVAL (NULL,
 * or parameters the mapping cannot use); SLUICE_ELIMIT (q or w beyond an
 * sf-integer's 15 digits).
 */
SLUICE_API int sluice_http_policy_of(const sluice_limiter_config_t *c, uint64_t *quota,
                                     uint64_t *window_ns);

/*
 * sluice_http_ratelimit - RateLimit member "name";r=R[;t=T] for @d.
 * @name: the policy name, as in RateLimit-Policy.  @d: the decision.
 *
 * r and t as described under WHICH DECISION FIELD.  Thread-safe, reentrant.
 * Return: the length written (excluding the NUL); SLUICE_EINVAL (NULL @d
 * or @name, bad name, or @buf NULL with @len > 0); SLUICE_HTTP_ETRUNC
 * (@len too small).  On any error buf[0] = '\0' when len >= 1, and nothing
 * else is written.
 */
SLUICE_API int sluice_http_ratelimit(char *buf, size_t len, const char *name,
                                     const sluice_decision_t *d);

#endif /* SLUICE_HTTP_H */
