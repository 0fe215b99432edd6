/*
 * fuzz_redis_reply.c - what libsluice-redis takes from a Redis server: the
 * bytes of a reply stream (RESP), read by hiredis's own reader as the I/O
 * thread's context reads them, then each reply handed to
 * sluice__redis_parse (redis/scripts.c), the one place a script's answer
 * becomes numbers a decision trusts.
 *
 * The reader is capped as the I/O thread's is (sluice__redis_reader_cap):
 * without the cap, hiredis 0.14 allocated an announced array's element
 * pointers before any element arrived (2.6 GB for "*333333336", the first
 * crash this target found; corpus/redis_reply/crash-huge-array).
 *
 * The server is outside the process (a different script under our SHA, a
 * proxy, a bug), so the oracle is the parser's contract, checked on every
 * reply:
 *   - accepted only when the reply is an array of exactly six integers, and
 *     then the six values are those integers, in order;
 *   - an accepted reply admits 0 or 1, grants nothing negative (and
 *     something when it admits), and has no negative remaining, retry or
 *     reset: a forged reply can refuse or grant what was asked, never mint
 *     a negative count;
 *   - anything else is refused (-1) and writes nothing that is used.
 * A reader error (malformed protocol) ends the input, as it ends the
 * connection in the I/O thread.  No crash, leak or sanitizer report.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <hiredis/hiredis.h>

#include "redis_internal.h"

static int six_integers(const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 6)
		return 0;
	for (size_t i = 0; i < 6; i++)
		if (r->element[i]->type != REDIS_REPLY_INTEGER)
			return 0;
	return 1;
}

static void check(const redisReply *r)
{
	sluice__redis_reply_t out;
	int rc = sluice__redis_parse(r, &out);
	if (rc != 0 && rc != -1)
		abort();
	if (rc == -1)
		return;
	if (!six_integers(r))
		abort(); /* took a reply of another shape */
	const int64_t got[6] = { out.admitted, out.remaining, out.retry_us,
		                 out.reset_us,  out.granted,   out.now_us };
	for (size_t i = 0; i < 6; i++)
		if (got[i] != (int64_t)r->element[i]->integer)
			abort(); /* a value other than the server's, or out of order */
	if (out.admitted < 0 || out.admitted > 1 || out.granted < 0 || out.remaining < 0 ||
	    out.retry_us < 0 || out.reset_us < 0 || (out.admitted && out.granted == 0))
		abort(); /* accepted what the contract refuses */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	redisReader *rd = redisReaderCreate();
	if (!rd)
		return 0;
	if (sluice__redis_reader_cap(rd) != 0)
		abort(); /* the I/O thread's reader, exactly */
	/* Fed in two pieces, as a reply may arrive in two reads. */
	size_t cut = size ? data[0] % (size + 1) : 0;
	if (redisReaderFeed(rd, (const char *)data, cut) == REDIS_OK &&
	    redisReaderFeed(rd, (const char *)data + cut, size - cut) == REDIS_OK) {
		for (int i = 0; i < 64; i++) { /* bounded: at most 64 replies an input */
			void *reply = NULL;
			if (redisReaderGetReply(rd, &reply) != REDIS_OK || !reply)
				break;
			check(reply);
			freeReplyObject(reply);
		}
	}
	redisReaderFree(rd);
	return 0;
}
