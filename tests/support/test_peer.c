/* SPDX-License-Identifier: MIT */
/*
 * test_peer.c - the tests' hostile Redis (test_peer.h).
 *
 * DESIGN: one thread accepts and serves one connection at a time.  It
 * reads commands as hiredis writes them (RESP arrays of bulk strings),
 * answers SCRIPT LOAD with a 40-character SHA, EVALSHA as the mode says,
 * anything else +OK.  Every socket call is bounded (poll 10 ms, SO_SNDTIMEO
 * 10 ms), so the stop flag is seen within about 10 ms.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "test_peer.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int send_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return 1; /* the send timed out: try again later */
		if (k <= 0)
			return -1;
		s += k;
		n -= (size_t)k;
	}
	return 0;
}

/* One command at @b (@n bytes): its argument count, *@used bytes, and
 * argv[i]/lens[i] for the first 16; 0 when incomplete, -1 malformed. */
static int parse(const char *b, size_t n, size_t *used, const char *argv[16], size_t lens[16])
{
	const char *p = b, *end = b + n;
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	if (!nl)
		return 0;
	if (*p != '*')
		return -1;
	long argc = strtol(p + 1, NULL, 10);
	if (argc < 1 || argc > 64)
		return -1;
	p = nl + 1;
	for (long i = 0; i < argc; i++) {
		nl = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
		if (!nl)
			return 0;
		if (*p != '$')
			return -1;
		long len = strtol(p + 1, NULL, 10);
		if (len < 0 || len > 1 << 20)
			return -1;
		p = nl + 1;
		if ((size_t)(end - p) < (size_t)len + 2)
			return 0;
		if (i < 16) {
			argv[i] = p;
			lens[i] = (size_t)len;
		}
		p += len + 2;
	}
	*used = (size_t)(p - b);
	return (int)argc;
}

static int is(const char *a, size_t n, const char *word)
{
	return n == strlen(word) && strncasecmp(a, word, n) == 0;
}

/* What a stream sends after its header: fill @buf (@cap bytes), return
 * how much (0: the reply is whole, stop). */
typedef struct gen {
	int depth, left[8]; /* PEER_NESTED: the arrays open, their elements left */
} gen_t;

static size_t gen_bulk(gen_t *g, char *buf, size_t cap)
{
	(void)g;
	memset(buf, 'x', cap);
	return cap;
}

/* the serialisation of a full tree of arrays of 16, NEST_LEVELS deep, with
 * integers for leaves: 16^NEST_LEVELS of them, 4 bytes each on the wire */
#define NEST_LEVELS 6
static size_t gen_nested(gen_t *g, char *buf, size_t cap)
{
	size_t n = 0;
	while (n + 8 <= cap && g->depth >= 0) {
		if (g->left[g->depth] == 0) {
			g->depth--;
			continue;
		}
		g->left[g->depth]--;
		if (g->depth + 1 < NEST_LEVELS) {
			memcpy(buf + n, "*16\r\n", 5);
			n += 5;
			g->left[++g->depth] = 16;
		} else {
			memcpy(buf + n, ":1\r\n", 4);
			n += 4;
		}
	}
	return n;
}

/* @head, then what @fn makes until bulk_max, bulk_ns, an error or stop */
static int stream(sluice_test_peer_t *p, int fd, const char *head,
                  size_t (*fn)(gen_t *, char *, size_t))
{
	static char chunk[65536];
	gen_t g = { .depth = 0, .left = { 16 } };
	if (send_all(fd, head, strlen(head)) < 0)
		return -1;
	uint64_t sent = 0, end = mono_ns() + p->bulk_ns;
	while (sent < p->bulk_max && mono_ns() < end && !atomic_load(&p->stop)) {
		size_t n = sizeof(chunk);
		if (n > p->bulk_max - sent)
			n = (size_t)(p->bulk_max - sent);
		n = fn(&g, chunk, n);
		if (n == 0)
			break;
		for (size_t off = 0; off < n && !atomic_load(&p->stop);) {
			ssize_t k = send(fd, chunk + off, n - off, MSG_NOSIGNAL);
			if (k < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (k <= 0)
				return -1; /* the client hung up */
			off += (size_t)k;
			sent += (uint64_t)k;
			atomic_fetch_add(&p->bulk_sent, (uint64_t)k);
		}
		/* 64 KiB a millisecond: a stream that lasts (bulk_ns) without
		 * filling the test machine's memory when a client keeps it */
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	return 0;
}

static int answer(sluice_test_peer_t *p, int fd, int argc, const char *argv[16], size_t lens[16])
{
	char out[256];
	if (argc >= 2 && is(argv[0], lens[0], "SCRIPT") && is(argv[1], lens[1], "LOAD"))
		return send_all(fd, "$40\r\n0123456789abcdef0123456789abcdef01234567\r\n", 47);
	if (!is(argv[0], lens[0], "EVALSHA") || argc < 6)
		return send_all(fd, "+OK\r\n", 5);
	atomic_fetch_add(&p->evalshas, 1);
	int64_t r = atomic_load(&p->retry_us);
	long nkeys = strtol(argv[2], NULL, 10);
	long want = 1;
	if (3 + nkeys + 1 < argc && 3 + nkeys + 1 < 16)
		want = strtol(argv[3 + nkeys + 1], NULL, 10);
	int n;
	switch (atomic_load(&p->mode)) {
	case PEER_GRANT:
		n = snprintf(out, sizeof(out), "*6\r\n:1\r\n:0\r\n:0\r\n:%lld\r\n:%ld\r\n:0\r\n",
		             (long long)(atomic_load(&p->reset_us) ? atomic_load(&p->reset_us) : 1000),
		             want);
		return send_all(fd, out, (size_t)n);
	case PEER_NOSCRIPT:
		return send_all(fd, "-NOSCRIPT No matching script.\r\n", 31);
	case PEER_RETRY:
		n = snprintf(out, sizeof(out), "*6\r\n:0\r\n:0\r\n:%lld\r\n:%lld\r\n:0\r\n:0\r\n",
		             (long long)r, (long long)r);
		return send_all(fd, out, (size_t)n);
	case PEER_BULK:
		return stream(p, fd, "$2147483647\r\n", gen_bulk);
	case PEER_NESTED:
		return stream(p, fd, "*16\r\n", gen_nested);
	case PEER_SILENT:
		return 0;
	}
	return -1;
}

static void serve(sluice_test_peer_t *p, int fd)
{
	static char buf[1 << 16];
	size_t have = 0;
	struct timeval tv = { 0, 10000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (!atomic_load(&p->stop)) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 10) <= 0)
			continue;
		ssize_t k = recv(fd, buf + have, sizeof(buf) - have, 0);
		if (k <= 0)
			return;
		have += (size_t)k;
		for (;;) {
			const char *argv[16];
			size_t lens[16], used = 0;
			int argc = parse(buf, have, &used, argv, lens);
			if (argc < 0 || (argc == 0 && have == sizeof(buf)))
				return;
			if (argc == 0)
				break;
			if (answer(p, fd, argc, argv, lens) < 0)
				return;
			memmove(buf, buf + used, have - used);
			have -= used;
		}
	}
}

static void *run(void *arg)
{
	sluice_test_peer_t *p = arg;
	while (!atomic_load(&p->stop)) {
		struct pollfd pf = { .fd = p->fd, .events = POLLIN };
		if (poll(&pf, 1, 10) <= 0)
			continue;
		int c = accept(p->fd, NULL, NULL);
		if (c < 0)
			continue;
		serve(p, c);
		close(c);
	}
	return NULL;
}

int sluice_test_peer_start(sluice_test_peer_t *p, int mode)
{
	p->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (p->fd < 0)
		return -1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	if (bind(p->fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(p->fd, 8) != 0 ||
	    getsockname(p->fd, (struct sockaddr *)&a, &len) != 0) {
		close(p->fd);
		return -1;
	}
	p->port = ntohs(a.sin_port);
	atomic_store(&p->mode, mode);
	atomic_store(&p->stop, 0);
	if (pthread_create(&p->t, NULL, run, p) != 0) {
		close(p->fd);
		return -1;
	}
	return 0;
}

void sluice_test_peer_stop(sluice_test_peer_t *p)
{
	atomic_store(&p->stop, 1);
	pthread_join(p->t, NULL);
	close(p->fd);
}
