/* SPDX-License-Identifier: MIT */
/*
 * redis_internal.h - libsluice-redis's shared internals (never installed).
 *
 * Who writes what:
 *   decision threads  a limit's lease word (spend: CAS down), its pending
 *                     flag (0 -> 1) and need, the queue's tail;
 *   the I/O thread    everything else: the connection, the script SHAs, the
 *                     breaker state, a limit's B, refusal cache, lease word
 *                     (install) and pending (QUEUED or ORPHAN -> IDLE, and
 *                     then the free of an ORPHAN);
 *   a free            pending IDLE -> QUEUED (then frees) or QUEUED ->
 *                     ORPHAN (the I/O thread frees), limit.c.
 */
#ifndef SLUICE_REDIS_INTERNAL_H
#define SLUICE_REDIS_INTERNAL_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>

#include "sluice/limiter.h"
#include "sluice/redis.h"

#include "queue.h"

enum { SLUICE__BREAKER_CLOSED = 0, SLUICE__BREAKER_OPEN = 1, SLUICE__BREAKER_HALF = 2 };
/* a limit's pending flag (limit.c: who frees it) */
enum { SLUICE__IDLE = 0, SLUICE__QUEUED = 1, SLUICE__ORPHAN = 2 };

/* One counter per field of sluice_redis_stats_t, in its order. */
#define SLUICE__REDIS_NSTATS (sizeof(sluice_redis_stats_t) / sizeof(uint64_t))
enum {
	ST_ROUND_TRIPS, ST_GRANTS, ST_GRANTED, ST_REMOTE_REFUSALS, ST_LEASE_ADMITS,
	ST_CACHE_REFUSALS, ST_FB_LOCAL, ST_FB_ALLOW, ST_FB_DENY, ST_BUDGET, ST_IO_ERRORS,
	ST_CONNECTS, ST_NOSCRIPT, ST_OPENED, ST_HALF, ST_CLOSED, ST_LAPSED, ST_BATCHES,
	ST_PRIMARY_CHANGES, ST_READONLY_DROPS, ST_NOT_PRIMARY, ST_MOVED, ST_ASK, ST_SLOT_MAPS,
};

/* One address of a backend: a server, or a Sentinel (redis.h FAILOVER). */
struct sluice__redis_addr {
	char host[256];
	int port;
};

/* A server the I/O thread talks to: the one that serves, or (CLUSTER) one
 * primary of the cluster. */
struct sluice__redis_node {
	struct sluice__redis_addr addr;
	void *ctx; /* redisContext *, NULL while disconnected */
};

/* CLUSTER: the most primaries a backend talks to (the slots of any more
 * stay unmapped: their calls take the fallback, redis.h CLUSTER), the
 * cluster's slots, and a slot no node is known for. */
#define SLUICE__REDIS_NODES 64
#define SLUICE__REDIS_SLOTS 16384
#define SLUICE__NODE_NONE 0xff

struct sluice_redis {
	/* read-only after new */
	struct sluice__redis_addr addr[SLUICE_REDIS_ADDRESSES_MAX];
	unsigned naddr;              /* 1: host and port; more: FAILOVER       */
	char master[128];            /* the Sentinels' name for it, or ""      */
	int cluster;                 /* the addresses are cluster seed nodes */
	uint64_t connect_timeout_ns, command_timeout_ns, breaker_open_ns;
	unsigned breaker_failures, max_limits;
	/* shared */
	sluice__redis_queue_t queue;
	sem_t wake;                  /* decisions post, the I/O thread waits */
	_Atomic int stop;
	_Atomic int breaker;         /* written by the I/O thread only */
	_Atomic unsigned nlimits;
	unsigned fork_gen;           /* sluice__redis_fork_gen at creation */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t stats[SLUICE__REDIS_NSTATS];
	/* the I/O thread's own */
	pthread_t thread;
	/* node[0] the server that serves; CLUSTER: every primary in the map */
	struct sluice__redis_node node[SLUICE__REDIS_NODES];
	unsigned nnodes;
	int map_stale;               /* CLUSTER: read the slot map before the
	                              * next batch (none yet, or a MOVED) */
	uint8_t slot_node[SLUICE__REDIS_SLOTS]; /* CLUSTER: node per slot */
	char sha[4][41];             /* per algorithm, from SCRIPT LOAD */
	unsigned fails;              /* consecutive failures */
	unsigned last;               /* the address that served last         */
	struct sluice__redis_addr serving; /* the server it was (port 0: none yet) */
	uint64_t open_until;         /* CLOCK_MONOTONIC ns */
};

/* The lease word: expiry (us after the limit's base, 44 bits) << 20 | count. */
#define SLUICE__LEASE_BITS 20
#define SLUICE__LEASE_MASK ((1ULL << SLUICE__LEASE_BITS) - 1)

struct sluice_redis_limit {
	/* read-only after new */
	sluice_redis_t *r;
	sluice_redis_algo_t algo;
	char key[2][400];            /* sluice:{name}:s and sluice:{name}:q */
	uint64_t limit, window_us, T_us, burst, buckets, lease_max, ttl_ns, budget_ns;
	uint64_t max_n;              /* the largest n that can ever pass */
	sluice_redis_fallback_t fallback;
	sluice_limiter_t *local;     /* LOCAL fallback, else NULL */
	const sluice_clock_t *clock; /* NULL: Redis TIME + CLOCK_MONOTONIC */
	uint64_t base_ns;            /* the lease word's time origin */
	/* decision threads spend it, the I/O thread installs it */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t lease;
	struct sluice_redis_keyed *owner; /* the keyed table it is a slot of, or NULL */
	/* decisions set pending IDLE -> QUEUED and push; the I/O thread
	 * clears it; a free sets QUEUED -> ORPHAN (limit.c) */
	_Alignas(SLUICE_CACHELINE) _Atomic int pending;
	_Atomic uint64_t need;       /* the largest n a waiting decision wants */
	_Atomic uint64_t answered;   /* requests the I/O thread is done with
	                              * (sluice__limit_done counts them) */
	_Atomic int hot;             /* a HOT request since the last ask
	                              * (lease_policy.h) */
	/* the I/O thread writes these; decisions read them (relaxed) */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t refused_until; /* monotonic ns */
	_Atomic uint64_t refused_need;
	_Atomic uint64_t b;          /* B, the next lease's size */
	_Atomic uint64_t size;       /* the live lease word's count when it was
	                              * installed (decisions read it for the
	                              * prefetch mark) */
	/* the I/O thread's own */
	uint64_t lease_wid;          /* FIXED/WINDOW: window or bucket of the lease */
	uint64_t last_remaining;     /* Redis's remaining after the last reply */
};

/* redis/scripts.c: the scripts and their replies */
typedef struct sluice__redis_reply {
	int64_t admitted, remaining, retry_us, reset_us, granted, now_us;
} sluice__redis_reply_t;

const char *sluice__redis_script(sluice_redis_algo_t algo);
/* argv for one call: EVALSHA sha nkeys keys... need want now params... */
int sluice__redis_argv(const sluice_redis_limit_t *l, const char *sha, uint64_t need,
                       uint64_t want, uint64_t now_us, char bufs[][32], const char *argv[12]);
/* parse a script's reply (a redisReply *); -1 when it is not one */
int sluice__redis_parse(const void *reply, sluice__redis_reply_t *out);
/* 1 when @reply's times lie within @l's horizon (redis.h LIMITS: GCRA
 * burst x T, the others W), it grants at most @want and leaves at most the
 * limit: any other reply is not our script's (a malformed reply) */
int sluice__redis_reply_fits(const sluice_redis_limit_t *l, const sluice__redis_reply_t *rep,
                             uint64_t want);
/* The most bytes one reply may take on the wire.  Every reply
 * sluice reads is far smaller (a script's six integers, a 40-character SHA,
 * an error line of a few hundred bytes): a reader holding more is not
 * reading one of ours. */
#define SLUICE__REDIS_REPLY_MAX 65536
/* The most commands the I/O thread pipelines in one write (io.c
 * PIPELINE): the queue's limits waiting when it looks, up to this. */
#define SLUICE__REDIS_BATCH 64
/* feed @n bytes of one reply to @rd (a redisReader *); *@fed counts what
 * was fed for it so far.  0, or -1: a reader error, or the reply would pass
 * SLUICE__REDIS_REPLY_MAX bytes (nothing of @buf was fed): drop the
 * connection */
int sluice__redis_reader_feed(void *rd, const char *buf, size_t n, size_t *fed);
/* the same for the replies to @replies pipelined commands: at most
 * @replies x SLUICE__REDIS_REPLY_MAX bytes in all */
int sluice__redis_reader_feed_n(void *rd, const char *buf, size_t n, size_t *fed, size_t replies);
/* make @rd (a redisReader *) refuse array replies longer than any script
 * returns, before hiredis allocates them; 0, or -1 (no table: out of
 * memory at the first call) */
int sluice__redis_reader_cap(void *rd);
/* the same for a CLUSTER SLOTS reply: arrays of up to SLUICE__REDIS_SLOTS
 * (a range per slot at most); sluice__redis_reader_cap restores the cap */
int sluice__redis_reader_cap_slots(void *rd);
/* the most bytes a CLUSTER SLOTS reply may take (a range per slot, each
 * with its primary and a few replicas: about 200 bytes) */
#define SLUICE__REDIS_SLOTS_REPLY_MAX (SLUICE__REDIS_SLOTS * 256)

/* redis/lease.c */
/* what the lease word @w still holds now (0 when it lapsed) */
uint64_t sluice__lease_live(const sluice_redis_limit_t *l, uint64_t w);
/* spend @n from the lease: 1 (*@left what is left), or 0, with *@hot set
 * when the lease was live but short (lease_policy.h: a HOT request) */
int sluice__lease_take(sluice_redis_limit_t *l, uint64_t n, uint64_t *left, uint64_t *now_ns,
                       int *hot);
void sluice__lease_install(sluice_redis_limit_t *l, const sluice__redis_reply_t *rep,
                           uint64_t sent_ns);
/* ask the I/O thread for a lease covering @n; @hot: lease_policy.h.
 * @seen (NULL: a prefetch) is l->answered as the decision read it before
 * the take that failed: once a request was answered since, its lease (or
 * refusal) is there for the next take, and nothing is sent */
void sluice__lease_want(sluice_redis_limit_t *l, uint64_t n, int hot, const uint64_t *seen);
/* the I/O thread: B and the amount for @l's next request (@need from the
 * waiting decisions) */
uint64_t sluice__lease_ask(sluice_redis_limit_t *l, uint64_t need);

/* redis/breaker.c */
void sluice__breaker_success(sluice_redis_t *r);
void sluice__breaker_failure(sluice_redis_t *r, uint64_t now_ns);
void sluice__breaker_probe(sluice_redis_t *r);
int sluice__fallback(sluice_redis_limit_t *l, uint64_t n, uint64_t now_ns, sluice_decision_t *d);

/* redis/limit.c: what the keyed table shares with single limits */
int sluice__limit_validate(const sluice_redis_limit_config_t *cfg, sluice_limiter_t **local);
int sluice__limits_reserve(sluice_redis_t *r, unsigned n);
void sluice__limit_setup(sluice_redis_limit_t *l, sluice_redis_t *r,
                         const sluice_redis_limit_config_t *cfg, const char *name,
                         sluice_limiter_t *local);
void sluice__limit_name(sluice_redis_limit_t *l, const char *name, size_t len);
/* a free's part: 1, the caller frees @l now; 0, the I/O thread holds it
 * and frees it when it is done (never waits) */
int sluice__limit_let_go(sluice_redis_limit_t *l);
/* the I/O thread is done with @l: clear pending, and free @l when its
 * owner has let it go */
void sluice__limit_done(sluice_redis_limit_t *l);

/* redis/keyed.c: a slot's limit the I/O thread freed after its table's free */
void sluice__keyed_release(struct sluice_redis_keyed *k, sluice_redis_limit_t *l);

/* redis/cluster.c: slots, redirects and the slot map (redis.h CLUSTER) */
/* the cluster slot of a key: CRC16 (XMODEM) of its hash tag, mod 16384 */
unsigned sluice__redis_slot(const char *key, size_t len);
/* a MOVED or ASK error reply's text: 1 (MOVED) or 2 (ASK) with the slot
 * and the node's address, 0 when it is neither, -1 malformed */
int sluice__redis_redirect(const char *err, size_t len, unsigned *slot,
                           struct sluice__redis_addr *to);
/* the node of @r for @a: found, or added (disconnected); SLUICE__NODE_NONE
 * when SLUICE__REDIS_NODES are in use */
unsigned sluice__redis_node_of(sluice_redis_t *r, const struct sluice__redis_addr *a);
/* a CLUSTER SLOTS reply (a redisReply *) into r->slot_node, every slot it
 * does not name unmapped; 0, or -1 (not such a reply: the map is kept) */
int sluice__redis_slots_parse(sluice_redis_t *r, const void *reply);

/* redis/io.c */
/* bumped in the child of every fork(): a backend made before it belongs to
 * the parent (its thread is not in the child, its leases are the parent's) */
extern _Atomic unsigned sluice__redis_fork_gen;
int sluice__io_start(sluice_redis_t *r);
void sluice__io_stop(sluice_redis_t *r);

static inline void sluice__stat(sluice_redis_t *r, int i, uint64_t v)
{
	atomic_fetch_add_explicit(&r->stats[i], v, memory_order_relaxed);
}

static inline uint64_t sluice__mono_ns(void)
{
	return sluice_clock_monotonic_ns();
}

/* the limit's lease time: its clock, or CLOCK_MONOTONIC */
static inline uint64_t sluice__limit_now(const sluice_redis_limit_t *l)
{
	return l->clock ? sluice_clock_now(l->clock) : sluice_clock_monotonic_ns();
}

#endif
