/* SPDX-License-Identifier: MIT */
/*
 * rules/backend_internal.h - a rule's limit kept on a backend (rules.h
 * BACKENDS): what the loader asks of libsluice-redis (is it built, which
 * algorithms, is this rule's limit valid) and what the engine holds (a
 * backend per connection, a rule's Redis limits, the decision).  Never
 * installed; the only file of libsluice-rules that includes sluice/redis.h
 * is backend.c, so the library's headers and exports are the same with and
 * without hiredis (issue 28, item 6): a build without it refuses
 * `type: redis` at load.
 */
#ifndef SLUICE_RULES_BACKEND_INTERNAL_H
#define SLUICE_RULES_BACKEND_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "metrics_internal.h"
#include "sluice/engine.h"

#define SLUICE__BACKENDS_MAX 64u            /* backends in one file        */
#define SLUICE__BACKEND_LEASE_MAX 65536u    /* SLUICE_REDIS_LEASE_MAX       */
#define SLUICE__BACKEND_KEY_MAX 32u         /* key bytes: 64 hex characters,
                                             * SLUICE_REDIS_KEY_MAX          */
#define SLUICE__BACKEND_CAPACITY_MAX 65536u /* sluice_redis_keyed_new's cap */

/* Is a backend of type @t in this build?  (1 or 0) */
int sluice__backend_built(sluice_rules_backend_type_t t);
/* Can a backend run algorithm @a?  (1 or 0) */
int sluice__backend_algo(sluice_algo_t a);
/* Rule @r's limit on its backend, by libsluice-redis's validation, on
 * @clock (NULL: Redis TIME).  Return: 0 or its SLUICE_E* code. */
int sluice__backend_limit_check(const sluice_rule_t *r, const sluice_clock_t *clock);

/* ---- the engine's side (load mutex; decisions only acquire) -------- */

/* One connection and I/O thread, shared by every rule on it, in every set
 * that uses it; found again across loads by its connection parameters and
 * the process that made it (a child of fork() makes its own: redis.h FORK). */
struct sluice__backend {
	char name[SLUICE_RULES_ID_MAX + 1];
	char address[SLUICE_RULES_ADDRESSES_MAX * 64]; /* as written, for messages */
	char host[64];
	uint32_t port;
	/* sluice/redis.h FAILOVER: every address, and the Sentinels' name */
	char addrs[SLUICE_RULES_ADDRESSES_MAX][64];
	uint32_t naddrs;
	char sentinel[SLUICE_RULES_SENTINEL_MAX + 1];
	uint32_t cluster;                /* sluice/redis.h CLUSTER          */
	uint64_t connect_timeout_ns, command_timeout_ns, breaker_open_ns;
	uint32_t breaker_failures, max_limits;
	pid_t pid;
	void *conn;                      /* sluice_redis_t                   */
	unsigned owners;                 /* sets + states (load mutex)       */
	uint64_t serial;                 /* unique per engine                */
	struct sluice__backend *next;    /* the engine's list                */
};

/* Does @b serve @want in this process?  Its name may differ (the label). */
int sluice__backend_same(const struct sluice__backend *b, const sluice_rules_backend_t *want);
/* Open a backend for @want with room for @max_limits limits (its own
 * max_limits when set).  Return: 0 and *@out (owners 0), or a code. */
int sluice__backend_open(const sluice_rules_backend_t *want, uint32_t max_limits,
                         uint64_t serial, struct sluice__backend **out);
/* Stop its thread and free it: every limit on it freed first. */
void sluice__backend_close(struct sluice__backend *b);
/* The limits rule @r needs on a backend: 1, or its keys (capacity,
 * rounded to a power of two) per dimension. */
uint64_t sluice__backend_need(const sluice_rule_t *r);
/* Its counters, for the metrics (a snapshot, relaxed). */
void sluice__backend_row(const struct sluice__backend *b, sluice__metrics_backend_row_t *row);

/* A rule's limits on a backend: one global limit or one keyed table per
 * dimension, made at load, immutable after. */
struct sluice__rlimits {
	struct sluice__backend *b;       /* NULL: the rule is per instance   */
	void *global;                    /* sluice_redis_limit_t             */
	void *keyed[SLUICE_RULES_DIMS_MAX]; /* sluice_redis_keyed_t          */
	uint32_t nkeyed;
	uint32_t key_max;
};

/* Make @r's limits on @b (@clock: a manual clock is sent to the scripts
 * as their time, rules.h BACKENDS; else NULL).  Return: 0, or a code
 * (SLUICE_ECAPACITY: the backend's max_limits is reached). */
int sluice__rlimits_new(struct sluice__rlimits *rl, struct sluice__backend *b,
                        const sluice_rule_t *r, const sluice_clock_t *clock);
void sluice__rlimits_free(struct sluice__rlimits *rl);

/*
 * sluice__rlimits_acquire - one permit of the global limit (@dim
 * UINT32_MAX) or of @key's limit in dimension @dim, through libsluice-redis
 * (lock-free, no allocation; waits at most the backend's budget).  The key
 * goes to Redis in hex (a key holds any byte, Redis limit names no NUL).
 * *@src gets where the decision came from (sluice_verdict_source_t).
 * Return: 1, 0, or a negative code (SLUICE_EKEYLEN past key_max,
 * SLUICE_EKEYFULL: a full probe group, as a full local table).
 */
int sluice__rlimits_acquire(const struct sluice__rlimits *rl, uint32_t dim, const void *key,
                            size_t keylen, sluice_decision_t *d, unsigned char *src);

#endif /* SLUICE_RULES_BACKEND_INTERNAL_H */
