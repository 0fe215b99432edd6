/* SPDX-License-Identifier: MIT */
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
 *
 * The input is fed as the I/O thread feeds a reply (sluice__redis_reader_feed,
 * the 64 KiB cap on one reply's bytes), and a server that goes on sending
 * is played too: when the input leaves the reader in the middle of a reply,
 * its tail is sent again and again until a reply is whole, the reader
 * fails or the cap drops the connection, or 2 GiB have gone by.  So an
 * over-long bulk ("$2147483647", corpus/redis_reply/huge-bulk) costs 64 KiB
 * with the cap, and without it runs into libFuzzer's timeout (shown with
 * the cap taken out: "timeout after 6 seconds").  A tree of nested arrays
 * needs a stream no repeated tail makes: test_redis_hostile's peer sends
 * it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* One read of the I/O thread: feed @n bytes of the reply, then take every
 * whole reply (at most 64 an input, *@got counts them); -1 when the
 * connection would be dropped. */
static int feed(redisReader *rd, const char *p, size_t n, size_t *fed, int *got)
{
	if (sluice__redis_reader_feed(rd, p, n, fed) != 0)
		return -1;
	for (; *got < 64; (*got)++) {
		void *reply = NULL;
		if (redisReaderGetReply(rd, &reply) != REDIS_OK)
			return -1;
		if (!reply)
			break;
		check(reply);
		freeReplyObject(reply);
	}
	return 0;
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
	size_t cut = size ? data[0] % (size + 1) : 0, fed = 0;
	int got = 0;
	const char *in = (const char *)data;
	if (feed(rd, in, cut, &fed, &got) == 0 && feed(rd, in + cut, size - cut, &fed, &got) == 0 &&
	    got == 0 && size > 0) {
		/* a server that keeps sending: the input's tail, over and over,
		 * in reads of up to 4 KiB */
		static char piece[4096];
		size_t tail = size - cut ? size - cut : size, n = 0;
		const char *t = in + size - tail;
		while (n + tail <= sizeof(piece) || n == 0) {
			size_t k = tail < sizeof(piece) ? tail : sizeof(piece);
			memcpy(piece + n, t, k);
			n += k;
			if (k < tail)
				break;
		}
		for (uint64_t sent = 0; got == 0 && sent < (2ULL << 30); sent += n)
			if (feed(rd, piece, n, &fed, &got) != 0)
				break;
	}
	redisReaderFree(rd);
	return 0;
}
