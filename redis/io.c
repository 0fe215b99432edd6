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
#include <time.h>
#include <unistd.h>

#include "redis_internal.h"

static struct timeval tv_of(uint64_t ns)
{
	return (struct timeval){ .tv_sec = (time_t)(ns / 1000000000ULL),
		                 .tv_usec = (suseconds_t)(ns % 1000000000ULL / 1000) };
}

static void drop(sluice_redis_t *r)
{
	if (r->ctx)
		redisFree(r->ctx);
	r->ctx = NULL;
}

/* Write everything appended to @r's context, by @deadline.  0, or -1
 * (stop, the deadline, a write error). */
static int write_all(sluice_redis_t *r, uint64_t deadline)
{
	int done = 0;
	while (!done) {
		if (atomic_load_explicit(&r->stop, memory_order_relaxed) ||
		    sluice__mono_ns() > deadline || redisBufferWrite(r->ctx, &done) != REDIS_OK)
			return -1;
	}
	return 0;
}

/* The next reply, by @deadline, the reader fed through the cap of
 * @replies replies (*@fed: bytes fed since the batch began); NULL on any
 * error (the caller drops the context). */
static redisReply *read_reply(sluice_redis_t *r, uint64_t deadline, size_t *fed, size_t replies)
{
	redisContext *c = r->ctx;
	for (;;) {
		void *rep = NULL;
		if (redisGetReplyFromReader(c, &rep) != REDIS_OK)
			return NULL;
		if (rep)
			return rep;
		if (atomic_load_explicit(&r->stop, memory_order_relaxed) ||
		    sluice__mono_ns() > deadline)
			return NULL;
		/* hiredis's redisBufferRead, but fed through the cap; every
		 * signal is blocked here, so no EINTR */
		char buf[16384];
		ssize_t n = read(c->fd, buf, sizeof(buf));
		if (n <= 0 || sluice__redis_reader_feed_n(c->reader, buf, (size_t)n, fed, replies) != 0)
			return NULL; /* a timeout (EAGAIN), an error, EOF, the cap */
	}
}

/* The reply to the one command appended to @r's context, bounded as
 * DESIGN says; NULL on any error (the caller drops the context). */
static redisReply *command(sluice_redis_t *r)
{
	uint64_t deadline = sluice__mono_ns() + r->command_timeout_ns;
	size_t fed = 0;
	if (write_all(r, deadline) != 0)
		return NULL;
	return read_reply(r, deadline, &fed, 1);
}

static int load_script(sluice_redis_t *r, sluice_redis_algo_t a)
{
	const char *src = sluice__redis_script(a);
	redisReply *rep = NULL;
	if (redisAppendCommand(r->ctx, "SCRIPT LOAD %s", src) == REDIS_OK)
		rep = command(r);
	int ok = rep && rep->type == REDIS_REPLY_STRING && rep->len == 40;
	if (ok)
		memcpy(r->sha[a - 1], rep->str, 41);
	if (rep)
		freeReplyObject(rep);
	return ok ? 0 : -1;
}

/* A context on @a, bounded by connect_timeout and then command_timeout
 * per read or write, its reader capped; in r->ctx, 0, or -1. */
static int open_ctx(sluice_redis_t *r, const struct sluice__redis_addr *a)
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
	r->ctx = c;
	return 0;
}

/* Is the server on r->ctx a primary?  ROLE's first element is "master". */
static int is_primary(sluice_redis_t *r)
{
	redisReply *rep = NULL;
	if (redisAppendCommand(r->ctx, "ROLE") == REDIS_OK)
		rep = command(r);
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
	if (open_ctx(r, s) != 0)
		return -1;
	redisReply *rep = NULL;
	if (redisAppendCommand(r->ctx, "SENTINEL get-master-addr-by-name %s", r->master) == REDIS_OK)
		rep = command(r);
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
	drop(r);
	return ok;
}

/* Connect to the server that serves: redis.h FAILOVER.  Tried from the
 * address that served last, each in turn, stop noticed between them (so
 * sluice_redis_free waits for one connect or query at most). */
static int do_connect(sluice_redis_t *r)
{
	int failover = r->naddr > 1 || r->master[0];
	for (unsigned k = 0; k < r->naddr; k++) {
		if (atomic_load_explicit(&r->stop, memory_order_relaxed))
			return -1;
		unsigned i = (r->last + k) % r->naddr;
		struct sluice__redis_addr server = r->addr[i];
		if (r->master[0] && ask_sentinel(r, &r->addr[i], &server) != 0) {
			sluice__stat(r, ST_NOT_PRIMARY, 1);
			continue;
		}
		if (open_ctx(r, &server) != 0)
			continue;
		if (failover && !is_primary(r)) {
			sluice__stat(r, ST_NOT_PRIMARY, 1);
			drop(r);
			continue;
		}
		int loaded = 1;
		for (int a = SLUICE_REDIS_GCRA; loaded && a <= SLUICE_REDIS_LOG; a++)
			loaded = load_script(r, (sluice_redis_algo_t)a) == 0;
		if (!loaded) {
			drop(r);
			continue;
		}
		sluice__stat(r, ST_CONNECTS, 1);
		if (r->serving.port &&
		    (r->serving.port != server.port || strcmp(r->serving.host, server.host) != 0))
			sluice__stat(r, ST_PRIMARY_CHANGES, 1);
		r->serving = server;
		r->last = i;
		return 0;
	}
	return -1;
}

/* A queued limit in a batch: what its command asks, and when it was sent. */
struct asked {
	sluice_redis_limit_t *l;
	uint64_t need, want, sent;
	int noscript; /* answered NOSCRIPT: sent again after a load */
};

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
	a->noscript = 0;
	return a->want;
}

static int append(sluice_redis_t *r, struct asked *a)
{
	char bufs[6][32];
	const char *argv[12];
	sluice_redis_limit_t *l = a->l;
	uint64_t now_us = l->clock ? sluice_clock_now(l->clock) / 1000 : 0;
	int argc = sluice__redis_argv(l, r->sha[l->algo - 1], a->need, a->want, now_us, bufs, argv);
	a->sent = sluice__limit_now(l);
	sluice__stat(r, ST_ROUND_TRIPS, 1);
	return redisAppendCommandArgv(r->ctx, argc, argv, NULL) == REDIS_OK ? 0 : -1;
}

/* @a's answer: rc 0 with *@rep, -1 an I/O error, -2 a reply that is not
 * the script's, -3 the connection dropped under it (the one I/O error and
 * breaker failure of that drop are counted by the caller, once per
 * batch, as a single command's would be).  The I/O thread is done with
 * its limit after this. */
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
	sluice__limit_done(l);
}

/* The connection failed under a batch: drop it, count the one I/O error
 * and breaker failure, answer @a[0..@n) that are still unanswered. */
static void fail_batch(sluice_redis_t *r, struct asked *a, size_t n, size_t from)
{
	drop(r);
	sluice__stat(r, ST_IO_ERRORS, 1);
	sluice__breaker_failure(r, sluice__mono_ns());
	for (size_t k = 0; k < n; k++)
		if (k >= from || a[k].noscript)
			answer(r, &a[k], -3, NULL);
}

/*
 * PIPELINE: one batch is every limit queued when the I/O thread looks, up
 * to SLUICE__REDIS_BATCH: one command each, appended and written at once,
 * the replies read in order, the i-th being the i-th command's (Redis
 * answers a connection's commands in order).  The batch has one deadline,
 * command_timeout from its write, and one reply cap, SLUICE__REDIS_BATCH
 * replies' worth.  Any I/O error, the deadline, or a reply past the cap
 * drops the connection and answers every command still unread as an I/O
 * error (the fallback decides those), so a late reply is never read as
 * the next command's.  Commands answered NOSCRIPT are sent again, once,
 * in a second batch after the scripts they need are loaded.
 */
static void serve_batch(sluice_redis_t *r, struct asked *a, size_t n, int second)
{
	size_t sent = 0;
	for (; sent < n; sent++)
		if (append(r, &a[sent]) != 0)
			break;
	uint64_t deadline = sluice__mono_ns() + r->command_timeout_ns;
	sluice__stat(r, ST_BATCHES, 1);
	int ok = sent == n && write_all(r, deadline) == 0;
	size_t fed = 0, i = 0, again = 0;
	int readonly = 0;
	for (; ok && i < n; i++) {
		redisReply *x = read_reply(r, deadline, &fed, n);
		if (!x) {
			ok = 0;
			break;
		}
		if (x->type == REDIS_REPLY_ERROR && strncmp(x->str, "NOSCRIPT", 8) == 0 && !second) {
			freeReplyObject(x);
			sluice__stat(r, ST_NOSCRIPT, 1);
			a[i].noscript = 1;
			again++;
			continue;
		}
		/* a server demoted to a replica (FAILOVER): a failure, and its
		 * connection is dropped after the batch so the next connect
		 * finds the primary */
		if (x->type == REDIS_REPLY_ERROR && strncmp(x->str, "READONLY", 8) == 0)
			readonly = 1;
		sluice__redis_reply_t rep;
		int rc = sluice__redis_parse(x, &rep);
		freeReplyObject(x);
		answer(r, &a[i], rc == 0 ? 0 : -2, &rep);
	}
	if (ok && readonly) {
		sluice__stat(r, ST_READONLY_DROPS, 1);
		drop(r);
		for (size_t k = 0; k < n; k++)
			if (a[k].noscript)
				answer(r, &a[k], -3, NULL);
		return;
	}
	if (!ok) {
		/* the connection is gone: every command not read yet, and every
		 * NOSCRIPT one, gets the fallback */
		fail_batch(r, a, n, i);
		return;
	}
	if (!again)
		return;
	/* load each script a NOSCRIPT named, then send those commands again */
	size_t m = 0;
	int loaded[SLUICE_REDIS_LOG + 1] = { 0 };
	for (size_t k = 0; k < n; k++) {
		if (!a[k].noscript)
			continue;
		sluice_redis_algo_t algo = a[k].l->algo;
		if (!loaded[algo])
			loaded[algo] = load_script(r, algo) == 0 ? 1 : -1;
		if (loaded[algo] < 0) {
			/* the load failed: the connection with it */
			fail_batch(r, a, n, n);
			return;
		}
	}
	for (size_t k = 0; k < n; k++)
		if (a[k].noscript) {
			a[m] = a[k];
			a[m++].noscript = 0;
		}
	serve_batch(r, a, m, 1);
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
		if (!r->ctx) {
			if (do_connect(r) != 0) {
				sluice__stat(r, ST_IO_ERRORS, 1);
				sluice__breaker_failure(r, sluice__mono_ns());
				/* a refused connect fails at once: space the
				 * attempts that the breaker allows */
				nap(r, 1000000);
				continue;
			}
			/* no success for the breaker: a server can accept and
			 * load scripts and still fail every call (breaker.c) */
		}
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
	drop(r);
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
		 * here to join, and the socket is the parent's; leave both */
		r->ctx = NULL;
		return;
	}
	atomic_store_explicit(&r->stop, 1, memory_order_relaxed);
	sem_post(&r->wake);
	pthread_join(r->thread, NULL);
}
