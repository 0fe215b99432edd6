/* SPDX-License-Identifier: MIT */
/*
 * cluster.c - what a backend needs to know of a Redis Cluster (redis.h
 * CLUSTER): the slot of a key, the redirects a node answers with, and the
 * slot map read from CLUSTER SLOTS.  Only the I/O thread calls these.
 *
 * DESIGN: the slot map is a byte per slot naming a node of r->node[], so
 * routing a call is one load; a node is an address and its connection
 * (io.c opens it when a call first goes there).  The map is read at the
 * first batch and again after every batch that met a MOVED; a MOVED also
 * sets its one slot at once, so the call it sends again goes to the node
 * that answered for it even if the map could not be read.  Nodes are never
 * removed: a primary that lost all its slots keeps its connection until
 * the backend is freed (at most SLUICE__REDIS_NODES of them).
 */
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "redis_internal.h"

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), the cluster
 * specification's key hash; bitwise, as the I/O thread hashes a few short
 * keys per call */
static unsigned crc16(const char *p, size_t n)
{
	unsigned crc = 0;
	for (size_t i = 0; i < n; i++) {
		crc ^= (unsigned)(unsigned char)p[i] << 8;
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
		crc &= 0xffff;
	}
	return crc;
}

unsigned sluice__redis_slot(const char *key, size_t len)
{
	/* the hash tag: between the first '{' and the first '}' after it,
	 * when that is not empty; else the whole key */
	const char *open = memchr(key, '{', len);
	if (open) {
		size_t from = (size_t)(open - key) + 1;
		const char *close = memchr(open + 1, '}', len - from);
		if (close && close > open + 1)
			return crc16(open + 1, (size_t)(close - open - 1)) & (SLUICE__REDIS_SLOTS - 1);
	}
	return crc16(key, len) & (SLUICE__REDIS_SLOTS - 1);
}

/* "HOST:PORT", HOST bare even for IPv6 (as Redis writes its endpoints):
 * the port is after the last ':'; 0 or -1 */
static int endpoint(const char *s, size_t n, struct sluice__redis_addr *a)
{
	const char *colon = NULL;
	for (size_t i = 0; i < n; i++)
		if (s[i] == ':')
			colon = s + i;
	/* a NUL in the host would cut it short (found by
	 * fuzz/fuzz_redis_cluster.c: "ASK 3705 \0\0...:7002" named host "") */
	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(a->host) ||
	    memchr(s, 0, (size_t)(colon - s)))
		return -1;
	long port = 0;
	const char *p = colon + 1, *end = s + n;
	if (p == end || end - p > 5)
		return -1;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		port = port * 10 + (*p - '0');
	}
	if (port < 1 || port > 65535)
		return -1;
	memcpy(a->host, s, (size_t)(colon - s));
	a->host[colon - s] = 0;
	a->port = (int)port;
	return 0;
}

int sluice__redis_redirect(const char *err, size_t len, unsigned *slot,
                           struct sluice__redis_addr *to)
{
	int kind;
	size_t at;
	if (len > 6 && memcmp(err, "MOVED ", 6) == 0) {
		kind = 1;
		at = 6;
	} else if (len > 4 && memcmp(err, "ASK ", 4) == 0) {
		kind = 2;
		at = 4;
	} else {
		return 0;
	}
	unsigned s = 0;
	size_t digits = 0;
	for (; at < len && err[at] >= '0' && err[at] <= '9' && digits < 6; at++, digits++)
		s = s * 10 + (unsigned)(err[at] - '0');
	if (digits == 0 || s >= SLUICE__REDIS_SLOTS || at >= len || err[at] != ' ')
		return -1;
	if (endpoint(err + at + 1, len - at - 1, to) != 0)
		return -1;
	*slot = s;
	return kind;
}

unsigned sluice__redis_node_of(sluice_redis_t *r, const struct sluice__redis_addr *a)
{
	for (unsigned i = 0; i < r->nnodes; i++)
		if (r->node[i].addr.port == a->port && strcmp(r->node[i].addr.host, a->host) == 0)
			return i;
	if (r->nnodes == SLUICE__REDIS_NODES)
		return SLUICE__NODE_NONE;
	r->node[r->nnodes] = (struct sluice__redis_node){ .addr = *a, .ctx = NULL };
	return r->nnodes++;
}

/* one range of CLUSTER SLOTS: [start, end, [host, port, id, ...], replicas...];
 * 0 with its primary's address, or -1 */
static int range_of(const redisReply *x, long long *lo, long long *hi,
                    struct sluice__redis_addr *a)
{
	if (x->type != REDIS_REPLY_ARRAY || x->elements < 3 ||
	    x->element[0]->type != REDIS_REPLY_INTEGER || x->element[1]->type != REDIS_REPLY_INTEGER)
		return -1;
	const redisReply *p = x->element[2];
	if (p->type != REDIS_REPLY_ARRAY || p->elements < 2 ||
	    p->element[0]->type != REDIS_REPLY_STRING || p->element[1]->type != REDIS_REPLY_INTEGER)
		return -1;
	*lo = x->element[0]->integer;
	*hi = x->element[1]->integer;
	long long port = p->element[1]->integer;
	size_t hl = p->element[0]->len;
	/* an empty host (or "?") is the node we asked's own host: Redis 7
	 * writes it when it does not know its address; we do not guess */
	if (*lo < 0 || *hi < *lo || *hi >= SLUICE__REDIS_SLOTS || port < 1 || port > 65535 ||
	    hl == 0 || hl >= sizeof(a->host) || memchr(p->element[0]->str, 0, hl))
		return -1;
	memcpy(a->host, p->element[0]->str, hl + 1);
	a->port = (int)port;
	return 0;
}

int sluice__redis_slots_parse(sluice_redis_t *r, const void *reply)
{
	const redisReply *x = reply;
	if (!x || x->type != REDIS_REPLY_ARRAY || x->elements == 0)
		return -1;
	uint8_t map[SLUICE__REDIS_SLOTS];
	memset(map, SLUICE__NODE_NONE, sizeof(map));
	/* every range checked before any node is added: a reply that is not
	 * CLUSTER SLOTS' changes nothing */
	for (size_t i = 0; i < x->elements; i++) {
		long long lo, hi;
		struct sluice__redis_addr a;
		if (range_of(x->element[i], &lo, &hi, &a) != 0)
			return -1;
	}
	for (size_t i = 0; i < x->elements; i++) {
		long long lo, hi;
		struct sluice__redis_addr a;
		(void)range_of(x->element[i], &lo, &hi, &a);
		unsigned n = sluice__redis_node_of(r, &a);
		for (long long s = lo; s <= hi; s++)
			map[s] = (uint8_t)n;
	}
	memcpy(r->slot_node, map, sizeof(map));
	return 0;
}
