/* SPDX-License-Identifier: MIT */
/*
 * scripts.c - the four Lua scripts (redis/<algo>.lua, embedded at build time by
 * lua2c.py), the arguments of one call, and the parse of a reply.
 *
 * DESIGN: every script has the same calling convention, so the I/O thread
 * has one path for all of them: KEYS are the limit's keys (one, or two for
 * the log), all under the hash tag {name} so a Redis Cluster keeps them in
 * one slot; ARGV is need, want, now, then the algorithm's parameters.  need
 * is the fewest permits that make an admission, want the lease asked for
 * (>= need); the script grants min(want, room) when room >= need.  now = 0
 * means "Redis TIME" (production); a test passes a synthetic time.  Every
 * reply is {admitted, remaining, retry_after_us, reset_us, granted, now_us}.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>

#include "redis_internal.h"
#include "redis_scripts.h"

const char *sluice__redis_script(sluice_redis_algo_t algo)
{
	switch (algo) {
	case SLUICE_REDIS_GCRA:
		return sluice__redis_lua_gcra;
	case SLUICE_REDIS_FIXED:
		return sluice__redis_lua_fixed;
	case SLUICE_REDIS_WINDOW:
		return sluice__redis_lua_window;
	case SLUICE_REDIS_LOG:
		return sluice__redis_lua_log;
	}
	return NULL;
}

/* EVALSHA's argv for one call; the numbers are written into @bufs (the
 * caller's stack: nothing is allocated, and hiredis copies them into its
 * output buffer before this returns to the I/O loop). */
int sluice__redis_argv(const sluice_redis_limit_t *l, const char *sha, uint64_t need,
                       uint64_t want, uint64_t now_us, char bufs[][32], const char *argv[12])
{
	int n = 0, b = 0;
	argv[n++] = "EVALSHA";
	argv[n++] = sha;
	int nkeys = l->algo == SLUICE_REDIS_LOG ? 2 : 1;
	argv[n++] = nkeys == 2 ? "2" : "1";
	for (int k = 0; k < nkeys; k++)
		argv[n++] = l->key[k];
	uint64_t vals[6];
	int nv = 0;
	vals[nv++] = need;
	vals[nv++] = want;
	vals[nv++] = now_us;
	switch (l->algo) {
	case SLUICE_REDIS_GCRA:
		vals[nv++] = l->T_us;
		vals[nv++] = l->burst;
		break;
	case SLUICE_REDIS_WINDOW:
		vals[nv++] = l->limit;
		vals[nv++] = l->window_us;
		vals[nv++] = l->buckets;
		break;
	case SLUICE_REDIS_FIXED:
	case SLUICE_REDIS_LOG:
		vals[nv++] = l->limit;
		vals[nv++] = l->window_us;
		break;
	}
	for (int i = 0; i < nv; i++) {
		snprintf(bufs[b], 32, "%llu", (unsigned long long)vals[i]);
		argv[n++] = bufs[b++];
	}
	return n;
}

/* A reply comes from outside the process: a different script under our
 * SHA, a proxy, a server bug.  Take it only when it has the exact shape the
 * scripts return (the I/O thread also refuses a grant above what it asked
 * for), so a forged reply can refuse or grant what was asked, never more. */
int sluice__redis_parse(const void *reply, sluice__redis_reply_t *out)
{
	const redisReply *r = reply;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 6)
		return -1;
	int64_t v[6];
	for (int i = 0; i < 6; i++) {
		if (r->element[i]->type != REDIS_REPLY_INTEGER)
			return -1;
		v[i] = (int64_t)r->element[i]->integer;
	}
	*out = (sluice__redis_reply_t){ v[0], v[1], v[2], v[3], v[4], v[5] };
	/* validate what came from outside: a reply that grants more than was
	 * asked, or negative counts, is not one of ours */
	if (out->admitted < 0 || out->admitted > 1 || out->granted < 0 || out->remaining < 0 ||
	    out->retry_us < 0 || out->reset_us < 0 || (out->admitted && out->granted == 0))
		return -1;
	return 0;
}

/*
 * The horizon of @l's replies: how far past the script's now any time it
 * reports can lie.  GCRA: burst x T (an admission needs room, so a TAT the
 * script wrote is never further than that ahead of its now: retry-after is
 * at most need x T, reset at most burst x T); FIXED, WINDOW and LOG: the
 * window W (a window, a bucket's last window or a log entry ends within W
 * of now).  limit.c's validation keeps both below 2^50 us, so a time within
 * the horizon times 1000 fits a uint64_t with room to spare.
 */
static uint64_t horizon_us(const sluice_redis_limit_t *l)
{
	return l->algo == SLUICE_REDIS_GCRA ? l->burst * l->T_us : l->window_us;
}

int sluice__redis_reply_fits(const sluice_redis_limit_t *l, const sluice__redis_reply_t *rep,
                             uint64_t want)
{
	uint64_t h = horizon_us(l);
	return (uint64_t)rep->granted <= want && (uint64_t)rep->remaining <= l->limit &&
	       (uint64_t)rep->retry_us <= h && (uint64_t)rep->reset_us <= h;
}

/*
 * The cap counts a reply's bytes as they arrive, before the reader sees
 * them: hiredis 0.14 keeps every byte of a bulk in its buffer until the
 * bulk is whole ("$2147483647" waits for 2 GiB), makes an object of every
 * element of an array as it arrives (arrays of 16 nested six deep are 16^6
 * objects, none of them refused by the array cap below), and has no limit
 * of its own (maxbuf only trims an idle buffer).  Counting what was fed
 * bounds both: the reader never holds more than SLUICE__REDIS_REPLY_MAX
 * bytes of one reply, nor more objects than that many bytes can encode
 * (at least three bytes each).
 */
int sluice__redis_reader_feed_n(void *reader, const char *buf, size_t n, size_t *fed,
                                size_t replies)
{
	size_t cap = replies * (size_t)SLUICE__REDIS_REPLY_MAX;
	if (*fed > cap || n > cap - *fed)
		return -1;
	*fed += n;
	return redisReaderFeed(reader, buf, n) == REDIS_OK ? 0 : -1;
}

int sluice__redis_reader_feed(void *reader, const char *buf, size_t n, size_t *fed)
{
	return sluice__redis_reader_feed_n(reader, buf, n, fed, 1);
}

/*
 * hiredis 0.14's reader allocates an array reply's element pointers as
 * soon as it reads the header "*N": a server (or anything speaking for it)
 * that announces N = 333,333,336 made the I/O thread calloc 2.6 GB before
 * one element arrived (found by fuzz/fuzz_redis_reply.c).  Every reply
 * sluice reads is a scalar or an array of at most six, so a reader that
 * refuses larger arrays loses nothing: the reader then fails ("Out of
 * memory"), which the I/O thread handles as any I/O error (the context is
 * dropped, a failure counted, the next request reconnects).
 */
#define SLUICE__REDIS_ARRAY_MAX 16

static redisReplyObjectFunctions capped_fns, slots_fns;
static void *(*default_create_array)(const redisReadTask *, int);
static pthread_once_t capped_once = PTHREAD_ONCE_INIT;
static int capped_ready; /* written once, under capped_once */

static void *capped_create_array(const redisReadTask *task, int elements)
{
	if (elements < 0 || elements > SLUICE__REDIS_ARRAY_MAX)
		return NULL;
	return default_create_array(task, elements);
}

/* CLUSTER SLOTS: a range per slot at most, as many nodes per range as
 * the byte cap allows (SLUICE__REDIS_SLOTS_REPLY_MAX) */
static void *slots_create_array(const redisReadTask *task, int elements)
{
	if (elements < 0 || elements > SLUICE__REDIS_SLOTS)
		return NULL;
	return default_create_array(task, elements);
}

static void make_capped(void)
{
	/* hiredis's default reply functions are not exported: a fresh
	 * reader's table is them */
	redisReader *fresh = redisReaderCreate();
	if (!fresh || !fresh->fn)
		return;
	capped_fns = *fresh->fn;
	redisReaderFree(fresh);
	default_create_array = capped_fns.createArray;
	capped_fns.createArray = capped_create_array;
	slots_fns = capped_fns;
	slots_fns.createArray = slots_create_array;
	capped_ready = 1;
}

int sluice__redis_reader_cap(void *reader)
{
	redisReader *rd = reader;
	pthread_once(&capped_once, make_capped);
	if (!capped_ready || !rd)
		return -1;
	rd->fn = &capped_fns;
	return 0;
}

int sluice__redis_reader_cap_slots(void *reader)
{
	redisReader *rd = reader;
	pthread_once(&capped_once, make_capped);
	if (!capped_ready || !rd)
		return -1;
	rd->fn = &slots_fns;
	return 0;
}
