/* SPDX-License-Identifier: MIT */
/*
 * fuzz_redis_cluster.c - what libsluice-redis takes from a Redis Cluster
 * node (redis/cluster.c): a CLUSTER SLOTS reply, read by hiredis's reader
 * with the cap the I/O thread sets for it (sluice__redis_reader_cap_slots,
 * SLUICE__REDIS_SLOTS_REPLY_MAX bytes), becomes the slot map; an error
 * reply may be a MOVED or ASK redirect.  The input is a RESP stream; every
 * reply in it is handed to both, as a node could send either anywhere.
 *
 * The oracle is each function's contract:
 *   - sluice__redis_slots_parse: 0 or -1; on -1 the map and the nodes are
 *     exactly as before; on 0 every slot names a node in use or none, and
 *     at most SLUICE__REDIS_NODES nodes are in use, each with a non-empty
 *     host and a port in 1..65535;
 *   - sluice__redis_redirect: 0, -1, 1 (MOVED) or 2 (ASK), and on 1 or 2 a
 *     slot below 16384 and an address as above;
 *   - sluice__redis_slot of the input's bytes is below 16384 and is the
 *     slot of its hash tag alone when it has one (the cluster's rule).
 * No crash, leak or sanitizer report.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis_internal.h"

/* only the I/O thread's map and nodes are used; the map starts as
 * sluice_redis_new leaves it, every slot unmapped, and carries over from
 * input to input as a backend's does from reply to reply */
static sluice_redis_t r;

static void check_addr(const struct sluice__redis_addr *a)
{
	size_t n = strnlen(a->host, sizeof(a->host));
	if (n == 0 || n == sizeof(a->host) || a->port < 1 || a->port > 65535)
		abort();
}

static void check_map(void)
{
	if (r.nnodes > SLUICE__REDIS_NODES)
		abort();
	for (unsigned i = 0; i < r.nnodes; i++)
		check_addr(&r.node[i].addr);
	for (unsigned s = 0; s < SLUICE__REDIS_SLOTS; s++)
		if (r.slot_node[s] != SLUICE__NODE_NONE && r.slot_node[s] >= r.nnodes)
			abort();
}

static void check(const redisReply *x)
{
	static uint8_t map[SLUICE__REDIS_SLOTS];
	static struct sluice__redis_node nodes[SLUICE__REDIS_NODES];
	unsigned n0 = r.nnodes;
	memcpy(map, r.slot_node, sizeof(map));
	memcpy(nodes, r.node, sizeof(nodes));
	int rc = sluice__redis_slots_parse(&r, x);
	if (rc != 0 && rc != -1)
		abort();
	if (rc == -1 && (r.nnodes != n0 || memcmp(map, r.slot_node, sizeof(map)) != 0 ||
	                 memcmp(nodes, r.node, sizeof(nodes)) != 0))
		abort(); /* a refused reply changed the map */
	check_map();
	if (x->type == REDIS_REPLY_ERROR || x->type == REDIS_REPLY_STRING) {
		unsigned slot = SLUICE__REDIS_SLOTS;
		struct sluice__redis_addr to;
		int k = sluice__redis_redirect(x->str, x->len, &slot, &to);
		if (k < -1 || k > 2)
			abort();
		if (k > 0) {
			if (slot >= SLUICE__REDIS_SLOTS)
				abort();
			check_addr(&to);
		}
	}
}

static void check_slot(const char *p, size_t n)
{
	unsigned s = sluice__redis_slot(p, n);
	if (s >= SLUICE__REDIS_SLOTS)
		abort();
	const char *open = memchr(p, '{', n);
	if (!open)
		return;
	const char *close = memchr(open + 1, '}', n - (size_t)(open + 1 - p));
	if (close && close > open + 1 &&
	    sluice__redis_slot(open + 1, (size_t)(close - open - 1)) != s)
		abort(); /* a tag that does not decide the slot */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	if (!ready) {
		memset(r.slot_node, SLUICE__NODE_NONE, sizeof(r.slot_node));
		ready = 1;
	}
	check_slot((const char *)data, size);
	redisReader *rd = redisReaderCreate();
	if (!rd)
		return 0;
	if (sluice__redis_reader_cap_slots(rd) != 0)
		abort(); /* the I/O thread's reader for CLUSTER SLOTS, exactly */
	size_t fed = 0;
	if (sluice__redis_reader_feed_n(rd, (const char *)data, size, &fed,
	                                SLUICE__REDIS_SLOTS_REPLY_MAX / SLUICE__REDIS_REPLY_MAX) == 0)
		for (int got = 0; got < 64; got++) {
			void *reply = NULL;
			if (redisReaderGetReply(rd, &reply) != REDIS_OK || !reply)
				break;
			check(reply);
			freeReplyObject(reply);
		}
	redisReaderFree(rd);
	return 0;
}
