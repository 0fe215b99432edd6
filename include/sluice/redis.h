/* SPDX-License-Identifier: MIT */
/*
 * sluice/redis.h - one limit shared by many processes and hosts, kept in
 * Redis, answered locally from leases (libsluice-redis, on hiredis).
 *
 * A backend (sluice_redis_new) is one Redis connection and one I/O thread.
 * A limit (sluice_redis_limit_new) is one Redis key (two for the log) under
 * a hash tag {name}, decided by a Lua script that takes its time from Redis
 * TIME, so every instance counts on one clock.  A decision never talks to
 * Redis itself: it spends permits from a local lease, which the I/O thread
 * asked Redis for in one script call that grants up to B permits and counts
 * them as admitted there at once.  When no lease is left the decision asks
 * the I/O thread and waits for at most its budget; past the budget, or
 * while the circuit breaker is open, it takes the limit's fallback.
 *
 * GUARANTEE (any number of threads, processes and hosts on one Redis)
 *   Every permit an instance admits from Redis was counted in Redis when it
 *   was granted, so Redis's count bounds the admissions of all instances
 *   together:
 *     FIXED   at most limit in each window [k W, (k+1) W) of Redis time: a
 *             lease lapses at the end of the window it was granted in.
 *     WINDOW  at most limit in any N consecutive buckets (b = W / N) of
 *             Redis time: a lease lapses at the end of its bucket.
 *     GCRA    the permits admitted in any interval of length t number at
 *             most burst + (t + S) / T, where S = lease_ttl_ns: a lease may
 *             be spent for S after it was asked for, so a permit Redis
 *             placed at time x is used in [x, x + S].
 *     LOG     at most limit in any closed interval [a, a + W - S]
 *             (S = lease_ttl_ns, as for GCRA): the log counts an entry at
 *             x while now - W < x, so it holds at most limit in every
 *             (y - W, y], and a lease granted at x is spent in [x, x + S).
 *   TIMELINE: t, a and every window above are on Redis's timeline, the
 *   time the script read when it granted (Redis TIME, whole microseconds;
 *   the limit's clock when one is set), and an admission's place on it is
 *   its grant's time plus how long after the send it was spent (under S
 *   on this host's CLOCK_MONOTONIC).  Timed on the local clock instead,
 *   the bounds hold as long as the two clocks tick at one rate (a constant
 *   offset changes nothing).
 *   Lease expiry is measured on this host's CLOCK_MONOTONIC from the moment
 *   the request was sent, which is before Redis executed it, so it lapses no
 *   later than the bound above allows.  The only further slack is the time a
 *   thread is preempted between its clock reading and the CAS that spends
 *   the permit (the D of sluice/clock.h).
 *   A decision returns within its budget plus the time to notice it: the
 *   wait re-checks the clock at least every 50 us, so the slack is one
 *   such sleep plus scheduling delay (test_redis_faults asserts budget +
 *   20 ms on a loaded 2-core machine under every fault it injects).
 *
 * UNDER-ADMISSION
 *   Permits leased but not spent when a lease lapses are lost.  A request
 *   asks for B less what the live lease holds, so an instance never holds
 *   plus has in flight more than max(lease_max, the n asked): at most
 *   instances x lease_max per window (FIXED window, WINDOW bucket, GCRA and
 *   LOG lease_ttl).  A reply lost to a timeout loses what Redis granted with
 *   it (counted there, never used).
 *
 * PER KEY
 *   One limit is one key (name); a backend holds up to max_limits.  A key
 *   whose lease lapsed (or that never had one) asks for exactly what its
 *   decision needs, and a lease is prefetched only after two or more
 *   decisions spent from the one before: a key costs one round trip per
 *   decision, and a cool one (asked less often than a lease lives) is
 *   granted nothing it cannot spend, but for a grant whose reply comes back
 *   after its window ended (a call sent within a round trip of the end,
 *   about RTT / W of them) and the second permit of a key asked twice in
 *   one window (about lambda x W of the time for random arrivals at lambda
 *   per key); either lapses, and its decision asks once more.  Only keys
 *   that find a live lease short grow B (redis/lease_policy.h, the one
 *   policy; tests/redis redis_lease cool_keys_cost_one_round_trip_per_decision
 *   checks it on loopback, tests/core/test_sim_fleet.c at a 250 us RTT).
 *
 * FAILOVER
 *   A backend may be given several servers (addresses) or Sentinels
 *   (addresses and sentinel_master).  The I/O thread connects, starting
 *   from the address that served last, to the first server that says it is
 *   a primary (ROLE master); with Sentinels, to the primary the first
 *   Sentinel that answers names (SENTINEL get-master-addr-by-name), checked
 *   by ROLE too.  A server that answers a script call READONLY (it became a
 *   replica) is a failure and its connection is dropped, as is one that
 *   errs or times out, so the next connect looks again.  Once the new
 *   primary answers ROLE as one (with Sentinels: and a Sentinel tried
 *   names it), the backend follows within breaker_open_ns
 *   plus, per address tried, a connect (at most connect_timeout_ns; a
 *   refused one fails at once) and each query (at most command_timeout_ns:
 *   the Sentinel's, ROLE, the four SCRIPT LOADs); decisions in the gap take
 *   the fallback within their budget (none waits for a connect).  With one
 *   server (host and port, or a list of one) nothing is asked but SCRIPT
 *   LOAD, as a proxy in
 *   front of Redis may not know ROLE.  Two primaries at once (a split brain
 *   an operator made) are not detected with addresses: use Sentinels.
 *   Replication is asynchronous: a replica promoted has lost the writes it
 *   had not received, the permits granted in that lag, which Redis then
 *   grants again.  Per promotion, as for a server that comes back without
 *   its data (no persistence), which forgets every count: FIXED, WINDOW and
 *   LOG admit at most 2 x limit in the window (WINDOW: the N buckets, LOG:
 *   the interval) that holds it, GCRA at most 2 x burst + (t + S) / T in an
 *   interval t that holds it (test_redis_failover checks FIXED's with
 *   writes lost on purpose).
 *   Scripts use Redis TIME.  A failover to a replica whose clock is delta
 *   ahead moves every key's time forward by delta: a GCRA key admits at most
 *   delta / T extra permits, a window key sees its window end early (at most
 *   one window's limit early).  A clock behind loses permits, never adds.
 *
 * CLUSTER (cluster = 1)
 *   The addresses (or host and port) are seed nodes of a Redis Cluster.
 *   The I/O thread reads the slot map (CLUSTER SLOTS) from a seed, keeps
 *   one pipelined connection per primary (at most 64; the slots of any
 *   more stay unmapped and their calls fail, as an I/O error does), and
 *   sends each call to the primary of its key's slot (CRC16 of the hash
 *   tag, mod 16384).  A limit's keys share the tag {name}, so each
 *   limit's script touches one slot; a keyed limit's keys carry the key
 *   in the tag ({name:key}), so its keys spread over the shards.  A MOVED
 *   reply sets that slot's primary and sends the call again to it, once,
 *   and the whole map is read again before the next batch; an ASK reply
 *   sends it once to the importing node after ASKING, the map unchanged.
 *   A call redirected a second time, or answered TRYAGAIN, is answered with
 *   nothing and its decision asks again within its budget (then the
 *   fallback).  A reshard moves a key with its count (MIGRATE), so it adds
 *   nothing to the bound of a single server: every grant is counted once,
 *   in the key on the node that holds it (test_redis_cluster checks the
 *   sum of the counts against granted_permits across a reshard of 1,500
 *   slots under load).  A primary failing over to its replica is the
 *   FAILOVER bound above, per shard.  The breaker is the backend's: K
 *   consecutive failures on any primaries open it for all of them.
 *
 * FALLBACK (breaker open, or budget spent)
 *   SLUICE_REDIS_LOCAL: a local limiter of the same algorithm holding
 *   limit / expected_instances (GCRA: rate and burst divided), so all
 *   instances together admit at most what Redis admitted before the fault
 *   plus limit per window while it lasts.  SLUICE_REDIS_ALLOW: every request
 *   passes (fail open).  SLUICE_REDIS_DENY: every request is refused.
 *   The breaker opens after breaker_failures consecutive failures: I/O
 *   errors, timeouts, and replies that are not our scripts' (REPLIES: a
 *   script error such as a key of the wrong type, NOSCRIPT again after a
 *   reload, a grant above what was asked, a time past the horizon).  It
 *   stays open for breaker_open_ns, then half-open: the I/O thread probes
 *   with the next decision's own request (decisions queue and wait their
 *   budget as when closed), after a connect and SCRIPT LOAD when it has no
 *   connection.  A probe that succeeds closes it, one that fails opens it
 *   again; only a request our script answered is a success (a connect that
 *   succeeds resets nothing).  Once the server is fixed, decisions reach
 *   Redis again within breaker_open_ns plus a connect and a round trip.
 *
 * REPLIES (the server is outside the process: a stray value at a key, a
 *   proxy, a hostile peer)
 *   A reply is used only when it has the scripts' exact shape and numbers
 *   the script could return for this limit: admitted 0 or 1, no negative
 *   count, a grant of at most what was asked, a remaining of at most the
 *   limit, a retry-after and a reset within the limit's HORIZON (GCRA burst
 *   x T: a TAT the script wrote is never further ahead of its now; FIXED,
 *   WINDOW and LOG the window W).  Anything else is a failure for the
 *   breaker, so nothing a server says makes this instance refuse locally
 *   (the over-limit cache) for longer than the horizon.  A key holding
 *   times past it (a far-future TAT written by hand, a key of a same-named
 *   limit with a longer horizon, a failover to a clock behind) fails every
 *   call on it until it is fixed or its times come within the horizon.
 *   Every command is bounded: a reply that passes 64 KiB on the wire (a
 *   script's is a few hundred bytes) drops the connection before the
 *   reader holds more of it (a 2 GiB bulk, a tree of nested arrays), as
 *   does a command not answered within command_timeout_ns (each read or
 *   write blocks at most that long too: a command ends within twice it);
 *   both are failures.
 *
 * PARAMETERS are fixed for a limit's life: a Redis limit has no setters
 *   (through the generic handle they are SLUICE_ENOTSUP), so no change
 *   ever credits time already counted.  A new limit on the same name is
 *   not a change of the old one: it shares the keys, and each call is
 *   judged by the parameters of the limit that made it.
 *
 * LIMITS  see sluice_redis_limit_config below; times sent to Redis are whole
 *   microseconds, so window_ns, lease_ttl_ns and T must be multiples of 1000.
 *
 * MEMORY (Redis, per key; docs/redis.md has the measurements)
 *   GCRA one string; FIXED one hash of two fields; WINDOW one hash of at
 *   most N + 1 fields; LOG one ZSET of at most limit entries (limit is at
 *   most SLUICE_REDIS_LOG_CAP) plus one counter.  Every key has a PEXPIRE.
 *
 * FORK  a backend owns a thread and a connection: create it after fork()
 *   (one per worker of a pre-fork server).  In a child, a backend made
 *   before the fork decides by its fallback only (a pthread_atfork handler
 *   marks it; the parent's leases are never spent twice), and freeing it
 *   there frees memory without touching the parent's thread or socket.
 */
#ifndef SLUICE_REDIS_H
#define SLUICE_REDIS_H

#include <stdint.h>

#include "clock.h"
#include "common.h"
#include "decision.h"
#include "error.h"
#include "limiter.h"

/* The largest limit of a LOG key: the ZSET holds one entry per permit. */
#define SLUICE_REDIS_LOG_CAP 100000
/* The largest lease a limit may ask for (lease_max). */
#define SLUICE_REDIS_LEASE_MAX 65536

typedef enum sluice_redis_algo {
	SLUICE_REDIS_GCRA = 1,
	SLUICE_REDIS_FIXED,
	SLUICE_REDIS_WINDOW,
	SLUICE_REDIS_LOG,
} sluice_redis_algo_t;

typedef enum sluice_redis_fallback {
	SLUICE_REDIS_LOCAL = 1, /* this instance's share, locally */
	SLUICE_REDIS_ALLOW,     /* fail open */
	SLUICE_REDIS_DENY,      /* fail closed */
} sluice_redis_fallback_t;

/* Where a decision came from (sluice_redis_acquire's @src). */
typedef enum sluice_redis_source {
	SLUICE_REDIS_FROM_LEASE = 1,  /* admitted from a lease           */
	SLUICE_REDIS_FROM_REFUSAL,    /* Redis refused (or the over-limit
	                               * cache, with no round trip)      */
	SLUICE_REDIS_FROM_FALLBACK,   /* the fallback decided            */
} sluice_redis_source_t;

typedef struct sluice_redis_config {
	const char *host;            /* NULL: "127.0.0.1"                       */
	int port;                    /* 1..65535                                */
	uint64_t connect_timeout_ns; /* 0: 50 ms                                */
	uint64_t command_timeout_ns; /* 0: 20 ms                                */
	unsigned breaker_failures;   /* K consecutive failures open it; 0: 3    */
	uint64_t breaker_open_ns;    /* open this long before a probe; 0: 200 ms */
	unsigned max_limits;         /* limits on this backend; 0: 1024         */
	/* FAILOVER (above), instead of host and port (then NULL and 0):
	 * 1..SLUICE_REDIS_ADDRESSES_MAX "host:port" ("[::1]:6379" for IPv6),
	 * tried in turn. */
	const char *const *addresses;
	unsigned n_addresses;
	/* NULL: the addresses are Redis servers; a name: they are Sentinels
	 * monitoring the primary of that name */
	const char *sentinel_master;
	/* 1: the addresses (or host and port) are seed nodes of a Redis
	 * Cluster (CLUSTER, above); no sentinel_master then */
	int cluster;
} sluice_redis_config_t;

/* The most addresses a backend takes (sluice_redis_config_t.addresses). */
#define SLUICE_REDIS_ADDRESSES_MAX 16

typedef struct sluice_redis_limit_config {
	const char *name;            /* the hash tag: keys are sluice:{name}:... */
	sluice_redis_algo_t algo;
	uint64_t limit;              /* FIXED/WINDOW/LOG: permits per window;
	                              * GCRA: the burst                          */
	uint64_t window_ns;          /* FIXED/WINDOW/LOG: W; GCRA: the period in
	                              * which `rate` permits pass                */
	uint64_t rate;               /* GCRA only: permits per window_ns         */
	uint32_t buckets;            /* WINDOW only: N, 1..4096, W % N == 0      */
	uint32_t lease_max;          /* largest lease B, 1..SLUICE_REDIS_LEASE_MAX;
	                              * 1: one round trip per admission          */
	uint64_t lease_ttl_ns;       /* GCRA/LOG: S; 0: 10 ms (LOG: < W)          */
	uint64_t budget_ns;          /* a decision's wait for Redis; 0: 1 ms     */
	sluice_redis_fallback_t fallback;
	uint32_t expected_instances; /* LOCAL: the share is limit / this (>= 1)  */
	/* NULL (production): scripts use Redis TIME, leases lapse on
	 * CLOCK_MONOTONIC.  A clock (tests, simulation: every instance must
	 * share it): its reading is sent as the scripts' time, and leases, the
	 * over-limit cache and the LOCAL fallback run on it.  Budgets are
	 * always real time (CLOCK_MONOTONIC). */
	const sluice_clock_t *clock;
} sluice_redis_limit_config_t;

/* Counters, every state change included (relaxed: statistics). */
typedef struct sluice_redis_stats {
	uint64_t round_trips;      /* script calls sent (NOSCRIPT retries too) */
	uint64_t grants;           /* leases granted                           */
	uint64_t granted_permits;  /* permits in them                          */
	uint64_t remote_refusals;  /* Redis said no                            */
	uint64_t lease_admits;     /* decisions admitted from a lease          */
	uint64_t cache_refusals;   /* refused locally by the over-limit cache  */
	uint64_t fallback_local, fallback_allow, fallback_deny;
	uint64_t budget_timeouts;  /* decisions that spent their budget        */
	uint64_t io_errors;        /* errors and timeouts (each a reconnect)   */
	uint64_t connects;         /* successful connects (with SCRIPT LOAD)   */
	uint64_t noscript_reloads; /* NOSCRIPT replies answered by a reload    */
	uint64_t breaker_opened, breaker_half_opened, breaker_closed;
	uint64_t lease_lapsed;     /* permits lost with a lease that lapsed or
	                            * was replaced                            */
	uint64_t batches;          /* pipelined writes: each carried 1 to 64 of
	                            * the round_trips' script calls, their
	                            * replies read in order (round_trips /
	                            * batches: calls per round trip)          */
	uint64_t primary_changes;  /* connects to another server than the last
	                            * one's (a failover followed)             */
	uint64_t readonly_drops;   /* connections dropped because the server
	                            * answered READONLY (it became a replica) */
	uint64_t not_primary;      /* servers skipped at connect: ROLE was not
	                            * master, or a Sentinel named none        */
	uint64_t moved;            /* CLUSTER: MOVED replies (the slot map
	                            * updated, the call sent again)           */
	uint64_t ask_redirects;    /* CLUSTER: ASK replies (the call sent once
	                            * to the importing node, after ASKING)    */
	uint64_t slot_maps;        /* CLUSTER: slot maps read (CLUSTER SLOTS)  */
} sluice_redis_stats_t;

typedef struct sluice_redis sluice_redis_t;
typedef struct sluice_redis_limit sluice_redis_limit_t;

/*
 * sluice_redis_new - validate @cfg and start the backend's I/O thread.  It
 * connects in the background: a server that refuses at start opens the
 * breaker, and the limits fall back until it answers.
 * Return: 0 and *@out; SLUICE_EINVAL (NULL, bad port, a host longer than
 * 255 bytes, addresses given with host or port too, n_addresses 0 or above
 * SLUICE_REDIS_ADDRESSES_MAX, an address not HOST:PORT with a port
 * 1..65535, an empty sentinel_master or one without addresses, or longer
 * than 127 bytes), SLUICE_ENOMEM, SLUICE_ETHREAD.  Not a decision path.
 */
SLUICE_NODISCARD SLUICE_API int sluice_redis_new(const sluice_redis_config_t *cfg, sluice_redis_t **out);
/* sluice_redis_free - stop the I/O thread and free (NULL is fine).  Free
 * its limits first.  Returns within connect_timeout_ns + command_timeout_ns
 * plus scheduling delay (the one connect, read or write in progress; host
 * a numeric address: resolving a name takes the resolver's time). */
SLUICE_API void sluice_redis_free(sluice_redis_t *r);
/* sluice_redis_stats - a snapshot of the counters. */
SLUICE_API void sluice_redis_stats(const sluice_redis_t *r, sluice_redis_stats_t *out);
/* sluice_redis_breaker - 0 closed, 1 open, 2 half-open (a snapshot). */
SLUICE_API int sluice_redis_breaker(const sluice_redis_t *r);

/*
 * sluice_redis_limit_new - validate @cfg and make a limit on @r.
 * Return: 0 and *@out; SLUICE_EINVAL (NULL, empty name), SLUICE_EALGO,
 * SLUICE_ELIMIT (0, or LOG above SLUICE_REDIS_LOG_CAP), SLUICE_EWINDOW
 * (0 or not whole microseconds or buckets), SLUICE_EBUCKETS, SLUICE_ERATE
 * (T not whole microseconds), SLUICE_ELEASE (lease_max out of range, or a
 * LOG lease_ttl_ns not below W), SLUICE_EMODE (unknown fallback, or
 * expected_instances 0 or above the limit with LOCAL), SLUICE_ECAPACITY
 * (max_limits reached), SLUICE_ENOMEM.  Not a decision path.
 */
SLUICE_NODISCARD SLUICE_API int sluice_redis_limit_new(sluice_redis_t *r, const sluice_redis_limit_config_t *cfg,
                                      sluice_redis_limit_t **out);
/*
 * sluice_redis_limit_config_check - what sluice_redis_limit_new() would
 * say of @cfg, without a backend: no connection, no thread (the rules
 * loader checks a file's global rules with it before anything connects).
 * Return: 0, or sluice_redis_limit_new()'s validation errors (not
 * SLUICE_ECAPACITY, which depends on the backend).  Not a decision path.
 */
SLUICE_NODISCARD SLUICE_API int sluice_redis_limit_config_check(const sluice_redis_limit_config_t *cfg);
/* sluice_redis_limit_free - NULL is fine; no decision may run on it.  Never
 * waits for the I/O thread: a limit whose request is queued or in flight is
 * freed by that thread when it is done with it (the request's end, the
 * drain of an open breaker, or sluice_redis_free at the latest). */
SLUICE_API void sluice_redis_limit_free(sluice_redis_limit_t *l);

/*
 * sluice_redis_acquire - take @n permits of the shared limit.
 * @src: NULL, or where the decision came from.
 *
 * Lock-free and allocation-free; safe from any number of threads.  From a
 * lease it is one CAS.  With no lease left it wakes the I/O thread (a
 * sem_post) and waits for a lease, a refusal or the breaker, at most
 * budget_ns (yielding the CPU for the first 100 us, then sleeping in steps
 * of at most 50 us); then it takes the fallback.
 * d->now_ns is CLOCK_MONOTONIC at the decision; d->remaining what is left
 * in the local lease.
 * Return: 1 admitted, 0 refused, SLUICE_EINVAL (n == 0), SLUICE_ETOOBIG
 * (n above the limit or burst: never, taking nothing).
 */
SLUICE_NODISCARD SLUICE_API int sluice_redis_acquire(sluice_redis_limit_t *l, uint64_t n, sluice_decision_t *d,
                                    sluice_redis_source_t *src);

/* The longest key of a keyed limit. */
#define SLUICE_REDIS_KEY_MAX 64

typedef struct sluice_redis_keyed sluice_redis_keyed_t;

/*
 * sluice_redis_keyed_new - one limit per key (per IP, per user) across
 * instances: @cfg as for sluice_redis_limit_new(), its name the prefix, so
 * key K is the Redis limit "name:K" (keys sluice:{name:K}:...; the same
 * scripts and the same guarantee per key).  @capacity keys (a power of
 * two, 1..65536) are made now, with all they allocate, and count against
 * the backend's max_limits; a key is never evicted.
 * Return: 0 and *@out; sluice_redis_limit_new()'s errors; SLUICE_ECAPACITY
 * (capacity out of range or above what the backend has left).
 */
SLUICE_NODISCARD SLUICE_API int sluice_redis_keyed_new(sluice_redis_t *r, const sluice_redis_limit_config_t *cfg,
                                      uint32_t capacity, sluice_redis_keyed_t **out);
/* sluice_redis_keyed_free - as sluice_redis_limit_free(), for every key. */
SLUICE_API void sluice_redis_keyed_free(sluice_redis_keyed_t *k);

/*
 * sluice_redis_acquire_key - sluice_redis_acquire() on @key's limit
 * (@keylen bytes, no NUL byte), making it if it is new: lock-free, no
 * allocation.  The lease policy decides which keys hold leases (PER KEY,
 * above): a key costs at most one round trip per decision, and a cool
 * key holds nothing.  Two threads that
 * make the same new key at once may give it two local slots; both name the
 * same Redis key, so the bound is unchanged (only the under-admission
 * bound counts that key twice).
 * Return: as sluice_redis_acquire(); SLUICE_EKEYLEN (empty, longer than
 * SLUICE_REDIS_KEY_MAX, or holding a NUL byte); SLUICE_EKEYFULL (a new key
 * whose probe window of 64 slots is full: nothing decided, take your own
 * fallback).  CAPACITY: keys are never evicted, and a new key is refused
 * when its window is full, which can happen before every slot is used:
 * size the table for at most 0.61 of its slots (10,000 keys in 16,384:
 * tests/redis redis_lease/ten_thousand_keys_fit places all; at 0.75 and
 * above expect refusals).
 */
SLUICE_NODISCARD SLUICE_API int sluice_redis_acquire_key(sluice_redis_keyed_t *k, const void *key, size_t keylen,
                                        uint64_t n, sluice_decision_t *d,
                                        sluice_redis_source_t *src);

/*
 * sluice_redis_limiter_new - a generic handle (sluice/limiter.h,
 * SLUICE_ALGO_EXTERNAL) over @l, borrowed: free the handle before @l.
 * Through it: acquire/_at/_key are sluice_redis_acquire() (the time given
 * is not used: Redis decides on its own time, the leases on the limit's
 * clock; the key is not used); available is what the local lease holds
 * (what passes with no round trip); refund is SLUICE_ENOTSUP (a composite
 * counts it unreturned: fewer admissions later, never more); reserve,
 * cancel and the setters SLUICE_ENOTSUP.  A composite of a Redis limit and
 * local limits is all or nothing as any other.
 * Return: 0 and *@out; SLUICE_EINVAL; SLUICE_ENOMEM.
 */
SLUICE_NODISCARD SLUICE_API int sluice_redis_limiter_new(sluice_redis_limit_t *l, sluice_limiter_t **out);

#endif /* SLUICE_REDIS_H */
