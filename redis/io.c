/* SPDX-License-Identifier: MIT */
/*
 * io.c - a backend's connection and its I/O thread.
 *
 * DESIGN: hiredis 0.14 has no timeouts on its async API, so each backend
 * runs one thread holding one synchronous context (to the server that
 * serves, among its addresses or as its Sentinels say: do_connect), with a connect timeout
 * and a command timeout (SO_RCVTIMEO/SO_SNDTIMEO); it pipelines what is
 * queued (PIPELINE, below: up to SLUICE__REDIS_BATCH calls per write).  Only this thread touches
 * the context, the SHAs and the consecutive-failure count, so hiredis needs
 * no locking and ThreadSanitizer sees no shared hiredis state.
 *
 * Any I/O error or timeout frees the context and counts as a failure (a
 * timed-out command's reply may still arrive, and a context that read it
 * would pair it with the next command); the next request reconnects.
 * Every connect runs SCRIPT LOAD for the four scripts.  A NOSCRIPT reply
 * (cache emptied by a restart, a failover, SCRIPT FLUSH) loads the script
 * again and retries once.
 *
 * Every command is bounded, in bytes and in time, by command() below
 * rather than hiredis's redisGetReply, which reads until a reply is whole:
 * a server that announces a 2 GiB bulk and sends it would have the reader
 * buffer all of it while the thread reads.  command() feeds the reader one
 * read (16 KiB) at a time and drops the connection once the reply would
 * pass SLUICE__REDIS_REPLY_MAX bytes (scripts.c: what it bounds), once
 * command_timeout has passed since the command began (each read or write
 * blocks at most command_timeout too: a command ends within twice it), or
 * once stop is set, so sluice_redis_free waits for one blocking call at
 * most.
 *
 * The thread sleeps on a semaphore that decisions post when they queue a
 * request (sem_post is a futex wake: no lock, no allocation), with a
 * timeout so that stop and the breaker's timer are noticed.  Every signal
 * is blocked in the thread: hiredis writes with write(2), and a peer that
 * closed the connection must give EPIPE here, not a SIGPIPE that kills the
 * process.
 *
 * FORK: the thread does not exist in a child.  A pthread_atfork child
 * handler bumps sluice__redis_fork_gen, so a child's decisions on a
 * backend made before the fork take the fallback at once (never the
 * parent's leases: both would spend them) and freeing it joins nothing.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "redis_internal.h"

static struct timeval tv_of(uint64_t ns)
{
	return (struct timeval){ .tv_sec = (time_t)(ns / 1000000000ULL),
		                 .tv_usec = (suseconds_t)(ns % 1000000000ULL / 1000) };
}

static void drop(struct sluice__redis_node *nd)
{
	if (nd->ctx)
		redisFree(nd->ctx);
	nd->ctx = NULL;
}

/* Write everything appended to @nd's context, by @deadline.  0, or -1
 * (stop, the deadline, a write error). */
static int write_all(sluice_redis_t *r, struct sluice__redis_node *nd, uint64_t deadline)
{
	int done = 0;
	while (!done) {
		if (atomic_load_explicit(&r->stop, memory_order_relaxed) ||
		    sluice__mono_ns() > deadline || redisBufferWrite(nd->ctx, &done) != REDIS_OK)
			return -1;
	}
	return 0;
}

/* The next reply on @nd, by @deadline, the reader fed through the cap of
 * @replies replies (*@fed: bytes fed since the batch began); NULL on any
 * error (the caller drops the context).  Past the deadline it still takes
 * what has arrived (replies that waited while another node was read) but
 * never blocks for more. */
static redisReply *read_reply(sluice_redis_t *r, struct sluice__redis_node *nd, uint64_t deadline,
                              size_t *fed, size_t replies)
{
	redisContext *c = nd->ctx;
	for (;;) {
		void *rep = NULL;
		if (redisGetReplyFromReader(c, &rep) != REDIS_OK)
			return NULL;
		if (rep)
			return rep;
		if (atomic_load_explicit(&r->stop, memory_order_relaxed))
			return NULL;
		int late = sluice__mono_ns() > deadline;
		/* hiredis's redisBufferRead, but fed through the cap; every
		 * signal is blocked here, so no EINTR */
		char buf[16384];
		ssize_t n = recv(c->fd, buf, sizeof(buf), late ? MSG_DONTWAIT : 0);
		if (n <= 0 || sluice__redis_reader_feed_n(c->reader, buf, (size_t)n, fed, replies) != 0)
			return NULL; /* a timeout (EAGAIN), an error, EOF, the cap */
	}
}

/* The reply to the one command appended to @nd's context, bounded as
 * DESIGN says, in at most @replies replies' bytes; NULL on any error (the
 * caller drops the context). */
static redisReply *command_n(sluice_redis_t *r, struct sluice__redis_node *nd, size_t replies)
{
	uint64_t deadline = sluice__mono_ns() + r->command_timeout_ns;
	size_t fed = 0;
	if (write_all(r, nd, deadline) != 0)
		return NULL;
	return read_reply(r, nd, deadline, &fed, replies);
}

static redisReply *command(sluice_redis_t *r, struct sluice__redis_node *nd)
{
	return command_n(r, nd, 1);
}

static int load_script(sluice_redis_t *r, struct sluice__redis_node *nd, sluice_redis_algo_t a)
{
	const char *src = sluice__redis_script(a);
	redisReply *rep = NULL;
	if (redisAppendCommand(nd->ctx, "SCRIPT LOAD %s", src) == REDIS_OK)
		rep = command(r, nd);
	int ok = rep && rep->type == REDIS_REPLY_STRING && rep->len == 40;
	if (ok)
		memcpy(r->sha[a - 1], rep->str, 41);
	if (rep)
		freeReplyObject(rep);
	return ok ? 0 : -1;
}

/* A context on @a, bounded by connect_timeout and then command_timeout
 * per read or write, its reader capped; in @nd->ctx, 0, or -1. */
static int open_ctx(sluice_redis_t *r, const struct sluice__redis_addr *a,
                    struct sluice__redis_node *nd)
{
	redisContext *c = redisConnectWithTimeout(a->host, a->port, tv_of(r->connect_timeout_ns));
	if (!c || c->err) {
		if (c)
			redisFree(c);
		return -1;
	}
	if (redisSetTimeout(c, tv_of(r->command_timeout_ns)) != REDIS_OK ||
	    sluice__redis_reader_cap(c->reader) != 0) {
		redisFree(c);
		return -1;
	}
	nd->ctx = c;
	return 0;
}

static int is_primary(sluice_redis_t *r, struct sluice__redis_node *nd);

/* @nd connected to @a, a primary when @primary (ROLE), and its scripts
 * loaded (SCRIPT LOAD of all four); 0, -1 or -2 (not a primary); nothing
 * is left open but on 0 */
static int open_loaded(sluice_redis_t *r, const struct sluice__redis_addr *a,
                       struct sluice__redis_node *nd, int primary)
{
	if (open_ctx(r, a, nd) != 0)
		return -1;
	if (primary && !is_primary(r, nd)) {
		drop(nd);
		return -2;
	}
	int loaded = 1;
	for (int k = SLUICE_REDIS_GCRA; loaded && k <= SLUICE_REDIS_LOG; k++)
		loaded = load_script(r, nd, (sluice_redis_algo_t)k) == 0;
	if (!loaded) {
		drop(nd);
		return -1;
	}
	sluice__stat(r, ST_CONNECTS, 1);
	return 0;
}

/* Is the server on @nd a primary?  ROLE's first element is "master". */
static int is_primary(sluice_redis_t *r, struct sluice__redis_node *nd)
{
	redisReply *rep = NULL;
	if (redisAppendCommand(nd->ctx, "ROLE") == REDIS_OK)
		rep = command(r, nd);
	int ok = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
	         rep->element[0]->type == REDIS_REPLY_STRING &&
	         strcmp(rep->element[0]->str, "master") == 0;
	if (rep)
		freeReplyObject(rep);
	return ok;
}

/* The primary Sentinel @s names for r->master, into @out; 0 or -1.  The
 * Sentinel's connection is closed after the one query. */
static int ask_sentinel(sluice_redis_t *r, const struct sluice__redis_addr *s,
                        struct sluice__redis_addr *out)
{
	struct sluice__redis_node q = { .ctx = NULL };
	if (open_ctx(r, s, &q) != 0)
		return -1;
	redisReply *rep = NULL;
	if (redisAppendCommand(q.ctx, "SENTINEL get-master-addr-by-name %s", r->master) == REDIS_OK)
		rep = command(r, &q);
	int ok = -1;
	if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
	    rep->element[0]->type == REDIS_REPLY_STRING &&
	    rep->element[1]->type == REDIS_REPLY_STRING &&
	    rep->element[0]->len > 0 && rep->element[0]->len < sizeof(out->host)) {
		char *end;
		long port = strtol(rep->element[1]->str, &end, 10);
		if (end != rep->element[1]->str && *end == 0 && port >= 1 && port <= 65535) {
			memcpy(out->host, rep->element[0]->str, rep->element[0]->len + 1);
			out->port = (int)port;
			ok = 0;
		}
	}
	if (rep)
		freeReplyObject(rep);
	drop(&q);
	return ok;
}

/* Connect to the server that serves, as node[0]: redis.h FAILOVER.  Tried
 * from the address that served last, each in turn, stop noticed between
 * them (so sluice_redis_free waits for one connect or query at most). */
static int do_connect(sluice_redis_t *r)
{
	int failover = r->naddr > 1 || r->master[0];
	struct sluice__redis_node *nd = &r->node[0];
	for (unsigned k = 0; k < r->naddr; k++) {
		if (atomic_load_explicit(&r->stop, memory_order_relaxed))
			return -1;
		unsigned i = (r->last + k) % r->naddr;
		struct sluice__redis_addr server = r->addr[i];
		if (r->master[0] && ask_sentinel(r, &r->addr[i], &server) != 0) {
			sluice__stat(r, ST_NOT_PRIMARY, 1);
			continue;
		}
		int rc = open_loaded(r, &server, nd, failover);
		if (rc == -2)
			sluice__stat(r, ST_NOT_PRIMARY, 1);
		if (rc != 0)
			continue;
		if (nd->addr.port &&
		    (nd->addr.port != server.port || strcmp(nd->addr.host, server.host) != 0))
			sluice__stat(r, ST_PRIMARY_CHANGES, 1);
		nd->addr = server;
		r->nnodes = 1;
		r->last = i;
		return 0;
	}
	return -1;
}

/* CLUSTER: read the slot map (cluster.c) from a node that answers: the
 * connected ones first, then the seed addresses, each asked once.  0, or
 * -1 (none answered: the map is kept as it was). */
static int read_slot_map(sluice_redis_t *r)
{
	unsigned tries = r->nnodes + r->naddr;
	for (unsigned k = 0; k < tries; k++) {
		if (atomic_load_explicit(&r->stop, memory_order_relaxed))
			return -1;
		struct sluice__redis_node q = { .ctx = NULL }, *nd = &q;
		if (k < r->nnodes && r->node[k].ctx)
			nd = &r->node[k];
		else if (k < r->nnodes || open_ctx(r, &r->addr[k - r->nnodes], &q) != 0)
			continue;
		redisReply *rep = NULL;
		if (redisAppendCommand(nd->ctx, "CLUSTER SLOTS") == REDIS_OK &&
		    sluice__redis_reader_cap_slots(((redisContext *)nd->ctx)->reader) == 0)
			rep = command_n(r, nd, SLUICE__REDIS_SLOTS_REPLY_MAX / SLUICE__REDIS_REPLY_MAX);
		int ok = rep && sluice__redis_slots_parse(r, rep) == 0;
		if (rep)
			freeReplyObject(rep);
		if (!rep || sluice__redis_reader_cap(((redisContext *)nd->ctx)->reader) != 0)
			drop(nd); /* the reply failed: the connection with it */
		drop(&q);
		if (ok) {
			sluice__stat(r, ST_SLOT_MAPS, 1);
			r->map_stale = 0;
			return 0;
		}
	}
	return -1;
}

/* A queued limit in a batch: what its command asks, when it was sent, and
 * where. */
struct asked {
	sluice_redis_limit_t *l;
	uint64_t need, want, sent;
	unsigned node;  /* the node it goes to (r->node[]) */
	int again;      /* AGAIN_*: sent again, once, in a second batch */
};
enum { AGAIN_NO = 0, AGAIN_NOSCRIPT, AGAIN_MOVED, AGAIN_ASK, AGAIN_DONE };

/* What @l's command asks (lease_policy.h): a->want, 0 when nothing is to
 * be sent. */
static uint64_t ask_of(sluice_redis_limit_t *l, struct asked *a)
{
	uint64_t need = atomic_exchange_explicit(&l->need, 0, memory_order_relaxed);
	if (need == 0)
		need = 1;
	a->l = l;
	a->need = need;
	a->want = sluice__lease_ask(l, need);
	a->again = AGAIN_NO;
	return a->want;
}

static int append(sluice_redis_t *r, struct asked *a)
{
	char bufs[6][32];
	const char *argv[12];
	sluice_redis_limit_t *l = a->l;
	void *ctx = r->node[a->node].ctx;
	uint64_t now_us = l->clock ? sluice_clock_now(l->clock) / 1000 : 0;
	int argc = sluice__redis_argv(l, r->sha[l->algo - 1], a->need, a->want, now_us, bufs, argv);
	a->sent = sluice__limit_now(l);
	sluice__stat(r, ST_ROUND_TRIPS, 1);
	/* ASK: the importing node serves the slot's next command only after
	 * ASKING (its reply, +OK, is read and dropped before the script's) */
	if (a->again == AGAIN_ASK && redisAppendCommand(ctx, "ASKING") != REDIS_OK)
		return -1;
	return redisAppendCommandArgv(ctx, argc, argv, NULL) == REDIS_OK ? 0 : -1;
}

/* @a's answer: rc 0 with *@rep, -1 an I/O error, -2 a reply that is not
 * the script's, -3 the connection dropped under it, or the call must be
 * asked again (the one I/O error and breaker failure of a drop are
 * counted by the caller, once per node, as a single command's would be;
 * a decision whose call is answered -3 asks again within its budget).
 * The I/O thread is done with its limit after this. */
static void answer(sluice_redis_t *r, struct asked *a, int rc, const sluice__redis_reply_t *rep)
{
	sluice_redis_limit_t *l = a->l;
	/* more than was asked, more than the limit, or a time past the
	 * limit's horizon (a refusal for months, a lease that would outlive
	 * its window): not our script's reply, a failure for the breaker */
	if (rc == 0 && !sluice__redis_reply_fits(l, rep, a->want))
		rc = -2;
	if (rc == 0) {
		sluice__breaker_success(r);
		if (rep->admitted) {
			sluice__stat(r, ST_GRANTS, 1);
			sluice__stat(r, ST_GRANTED, (uint64_t)rep->granted);
			sluice__lease_install(l, rep, a->sent);
		} else {
			sluice__stat(r, ST_REMOTE_REFUSALS, 1);
			l->last_remaining = (uint64_t)rep->remaining;
			atomic_store_explicit(&l->refused_need, a->need, memory_order_relaxed);
			/* release: publishes refused_need with it; pairs with the
			 * decision's acquire load of refused_until */
			atomic_store_explicit(&l->refused_until,
			                      a->sent + (uint64_t)rep->retry_us * 1000,
			                      memory_order_release);
		}
	} else if (rc != -3) {
		if (rc == -1)
			sluice__stat(r, ST_IO_ERRORS, 1);
		sluice__breaker_failure(r, sluice__mono_ns());
	}
	a->again = AGAIN_DONE;
	sluice__limit_done(l);
}

/* Node @i failed under a batch: drop its connection, count the one I/O
 * error and breaker failure, answer its calls not answered yet. */
static void fail_node(sluice_redis_t *r, struct asked *a, size_t n, unsigned i)
{
	drop(&r->node[i]);
	sluice__stat(r, ST_IO_ERRORS, 1);
	sluice__breaker_failure(r, sluice__mono_ns());
	for (size_t k = 0; k < n; k++)
		if (a[k].node == i && a[k].again != AGAIN_DONE)
			answer(r, &a[k], -3, NULL);
}

/* A redirect (CLUSTER) or READONLY in @x for @a; 1 when it was handled
 * (@a marked for the second batch, or answered), 0 when @x is another
 * reply.  *@readonly is set for a server demoted to a replica. */
static int redirected(sluice_redis_t *r, struct asked *a, const redisReply *x, int second,
                      int *readonly)
{
	if (x->type != REDIS_REPLY_ERROR)
		return 0;
	/* a server demoted to a replica (FAILOVER): a failure, and its
	 * connection is dropped after the batch so the next connect finds
	 * the primary */
	if (strncmp(x->str, "READONLY", 8) == 0) {
		*readonly = 1;
		return 0;
	}
	if (!r->cluster)
		return 0;
	if (strncmp(x->str, "TRYAGAIN", 8) == 0) {
		/* a multi-key call during a migration: asked again */
		answer(r, a, -3, NULL);
		return 1;
	}
	unsigned slot;
	struct sluice__redis_addr to;
	int kind = sluice__redis_redirect(x->str, x->len, &slot, &to);
	if (kind <= 0)
		return 0; /* another error, or a malformed redirect: -2 */
	unsigned node = sluice__redis_node_of(r, &to);
	sluice__stat(r, kind == 1 ? ST_MOVED : ST_ASK, 1);
	if (kind == 1) {
		r->slot_node[slot] = (uint8_t)node;
		r->map_stale = 1;
	}
	if (second || node == SLUICE__NODE_NONE) {
		answer(r, a, -3, NULL); /* followed once: the decision asks again */
		return 1;
	}
	a->node = node;
	a->again = kind == 1 ? AGAIN_MOVED : AGAIN_ASK;
	return 1;
}

/* Does @a go to node @i in this batch?  The first sends each call once;
 * the second every call marked again. */
static int goes(const struct asked *a, unsigned i, int second)
{
	return a->node == i && (second ? a->again != AGAIN_DONE : a->again == AGAIN_NO);
}

/* Send node @i's calls of @a[0..@n) and read their replies: see PIPELINE. */
static void serve_node(sluice_redis_t *r, struct asked *a, size_t n, unsigned i, int second)
{
	struct sluice__redis_node *nd = &r->node[i];
	size_t calls = 0;
	if (!nd->ctx && (!r->cluster || open_loaded(r, &nd->addr, nd, 0) != 0)) {
		fail_node(r, a, n, i);
		return;
	}
	int ok = 1;
	for (size_t k = 0; ok && k < n; k++)
		if (goes(&a[k], i, second)) {
			ok = append(r, &a[k]) == 0;
			calls += 1 + (a[k].again == AGAIN_ASK);
		}
	uint64_t deadline = sluice__mono_ns() + r->command_timeout_ns;
	sluice__stat(r, ST_BATCHES, 1);
	ok = ok && write_all(r, nd, deadline) == 0;
	size_t fed = 0;
	int readonly = 0;
	for (size_t k = 0; ok && k < n; k++) {
		if (!goes(&a[k], i, second))
			continue;
		redisReply *x = NULL;
		if (a[k].again == AGAIN_ASK) { /* ASKING's +OK */
			x = read_reply(r, nd, deadline, &fed, calls);
			int asked = x && x->type == REDIS_REPLY_STATUS;
			if (x)
				freeReplyObject(x);
			if (!asked) {
				ok = 0;
				break;
			}
		}
		x = read_reply(r, nd, deadline, &fed, calls);
		if (!x) {
			ok = 0;
			break;
		}
		a[k].again = AGAIN_NO; /* the first batch's mark, until a reply sets another */
		if (x->type == REDIS_REPLY_ERROR && strncmp(x->str, "NOSCRIPT", 8) == 0 && !second) {
			sluice__stat(r, ST_NOSCRIPT, 1);
			a[k].again = AGAIN_NOSCRIPT;
		} else if (!redirected(r, &a[k], x, second, &readonly)) {
			sluice__redis_reply_t rep;
			int rc = sluice__redis_parse(x, &rep);
			answer(r, &a[k], rc == 0 ? 0 : -2, &rep);
		}
		freeReplyObject(x);
	}
	if (!ok) {
		/* the connection is gone: every call of it not answered yet
		 * gets the fallback */
		fail_node(r, a, n, i);
		return;
	}
	if (readonly) {
		sluice__stat(r, ST_READONLY_DROPS, 1);
		drop(nd);
		for (size_t k = 0; k < n; k++)
			if (a[k].node == i && a[k].again == AGAIN_NOSCRIPT)
				answer(r, &a[k], -3, NULL);
		return;
	}
	/* load each script a NOSCRIPT named, for the second batch */
	int loaded[SLUICE_REDIS_LOG + 1] = { 0 };
	for (size_t k = 0; k < n; k++) {
		if (a[k].node != i || a[k].again != AGAIN_NOSCRIPT)
			continue;
		sluice_redis_algo_t algo = a[k].l->algo;
		if (!loaded[algo])
			loaded[algo] = load_script(r, nd, algo) == 0 ? 1 : -1;
		if (loaded[algo] < 0) {
			fail_node(r, a, n, i); /* the load failed: the connection with it */
			return;
		}
	}
}

/*
 * PIPELINE: one batch is every limit queued when the I/O thread looks, up
 * to SLUICE__REDIS_BATCH: one command each, appended and written at once
 * to the node it goes to (CLUSTER: the slot map's node of its key's slot;
 * else node[0]), the replies read in order, the i-th being the i-th
 * command's (Redis answers a connection's commands in order).  Each node's
 * part has one deadline, command_timeout from its write, and one reply
 * cap, SLUICE__REDIS_REPLY_MAX per command.  Any I/O error, the deadline,
 * or a reply past the cap drops that node's connection and answers every
 * command of it still unread as an I/O error (the fallback decides those),
 * so a late reply is never read as the next command's.  Commands answered
 * NOSCRIPT are sent again, once, in a second batch after the scripts they
 * need are loaded; so are commands answered MOVED (to the node it names,
 * which the slot map now holds for that slot; the whole map is read again
 * before the next batch) and ASK (to the node it names, after ASKING; the
 * map unchanged).  A second redirect, or TRYAGAIN, answers the call with
 * nothing: its decision asks again within its budget.
 */
static void serve_batch(sluice_redis_t *r, struct asked *a, size_t n, int second)
{
	/* every call routed before any is sent: a node's part is all its calls */
	for (size_t k = 0; k < n && !second; k++) {
		unsigned node = 0;
		if (r->cluster) {
			const char *key = a[k].l->key[0];
			node = r->slot_node[sluice__redis_slot(key, strlen(key))];
		}
		a[k].node = node;
		if (node == SLUICE__NODE_NONE) {
			/* no node serves its slot (the map lacks it) */
			r->map_stale = 1;
			answer(r, &a[k], -1, NULL);
		}
	}
	_Static_assert(SLUICE__REDIS_NODES <= 64, "served has a bit per node");
	uint64_t served = 0;
	for (size_t k = 0; k < n; k++) {
		unsigned i = a[k].node;
		if (a[k].again == AGAIN_DONE || served >> i & 1)
			continue;
		served |= 1ULL << i;
		serve_node(r, a, n, i, second);
	}
	if (second)
		return;
	/* the second batch: the calls marked again, compacted */
	size_t m = 0;
	for (size_t k = 0; k < n; k++)
		if (a[k].again != AGAIN_DONE && a[k].again != AGAIN_NO)
			a[m++] = a[k];
	if (m) {
		for (size_t k = 0; k < m; k++)
			if (a[k].again == AGAIN_NOSCRIPT)
				a[k].again = AGAIN_NO;
		serve_batch(r, a, m, 1);
	}
}

static void nap(sluice_redis_t *r, uint64_t ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t t = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec + ns;
	ts.tv_sec = (time_t)(t / 1000000000ULL);
	ts.tv_nsec = (long)(t % 1000000000ULL);
	while (sem_clockwait(&r->wake, CLOCK_MONOTONIC, &ts) != 0 && errno == EINTR)
		;
}

/* The breaker is open: nothing goes to Redis; clear what was queued (its
 * decisions have taken or will take the fallback). */
static void drain(sluice_redis_t *r)
{
	sluice_redis_limit_t *l;
	while ((l = sluice__queue_pop(&r->queue)) != NULL)
		sluice__limit_done(l);
}

static void *io_main(void *arg)
{
	sluice_redis_t *r = arg;
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		uint64_t now = sluice__mono_ns();
		if (atomic_load_explicit(&r->breaker, memory_order_relaxed) == SLUICE__BREAKER_OPEN) {
			drain(r);
			if (now < r->open_until) {
				uint64_t left = r->open_until - now;
				nap(r, left < 50000000 ? left : 50000000);
				continue;
			}
			sluice__breaker_probe(r);
		}
		/* CLUSTER: the slot map read at the first batch and after a
		 * MOVED; one that cannot be read leaves the last one in use,
		 * and with none yet it is a failed connect */
		int down = r->cluster ? r->map_stale && read_slot_map(r) != 0 && r->nnodes == 0
		                      : !r->node[0].ctx && do_connect(r) != 0;
		if (down) {
			sluice__stat(r, ST_IO_ERRORS, 1);
			sluice__breaker_failure(r, sluice__mono_ns());
			/* a refused connect fails at once: space the attempts
			 * that the breaker allows */
			nap(r, 1000000);
			continue;
		}
		/* a connect is no success for the breaker: a server can accept
		 * and load scripts and still fail every call (breaker.c) */
		/* every queued limit, up to a batch (PIPELINE) */
		struct asked a[SLUICE__REDIS_BATCH];
		size_t n = 0;
		sluice_redis_limit_t *l;
		while (n < SLUICE__REDIS_BATCH && (l = sluice__queue_pop(&r->queue)) != NULL) {
			/* relaxed: a limit freed while queued is not served, only
			 * freed (sluice__limit_done's exchange orders the free) */
			if (atomic_load_explicit(&l->pending, memory_order_relaxed) == SLUICE__ORPHAN)
				sluice__limit_done(l);
			else if (ask_of(l, &a[n]) == 0)
				sluice__limit_done(l); /* covered already: nothing sent */
			else
				n++;
		}
		if (n == 0) {
			nap(r, 50000000);
			continue;
		}
		serve_batch(r, a, n, 0);
	}
	drain(r);
	for (unsigned i = 0; i < r->nnodes; i++)
		drop(&r->node[i]);
	return NULL;
}

_Atomic unsigned sluice__redis_fork_gen;

static void in_child(void)
{
	atomic_fetch_add_explicit(&sluice__redis_fork_gen, 1, memory_order_relaxed);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void install_atfork(void)
{
	pthread_atfork(NULL, NULL, in_child);
}

int sluice__io_start(sluice_redis_t *r)
{
	pthread_once(&atfork_once, install_atfork);
	r->fork_gen = atomic_load_explicit(&sluice__redis_fork_gen, memory_order_relaxed);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits it */
	int rc = pthread_create(&r->thread, NULL, io_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc == 0 ? 0 : -1;
}

void sluice__io_stop(sluice_redis_t *r)
{
	if (r->fork_gen != atomic_load_explicit(&sluice__redis_fork_gen, memory_order_relaxed)) {
		/* a fork child freeing its parent's backend: the thread is not
		 * here to join, and the sockets are the parent's; leave them */
		for (unsigned i = 0; i < r->nnodes; i++)
			r->node[i].ctx = NULL;
		return;
	}
	atomic_store_explicit(&r->stop, 1, memory_order_relaxed);
	sem_post(&r->wake);
	pthread_join(r->thread, NULL);
}
