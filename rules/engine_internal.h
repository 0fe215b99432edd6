/* SPDX-License-Identifier: MIT */
/*
 * rules/engine_internal.h - what the engine's files share (never
 * installed): a rule's persistent state, the compiled rule set, the
 * route index, the region directory, and the engine itself.
 *
 * Who owns what.  A compiled set (struct sluice__set) is immutable once
 * published and owned by the engine until a later load replaces it and a
 * grace period has passed.  Its rules point at states (struct
 * sluice__state): the tables or the limiter of one rule, found again by
 * id and layout across loads.  A state is shared by every set that uses
 * it (as a rule's state or as its ghost, see reload.c) and by the
 * engine's retired list; `owners` counts them and is changed only under
 * the load mutex, and a state is freed only when it drops to 0, which
 * happens only after the grace period that retired the last set using it.
 */
#ifndef SLUICE_ENGINE_INTERNAL_H
#define SLUICE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "adaptive_internal.h"
#include "backend_internal.h"
#include "metrics_internal.h"
#include "rules_internal.h"
#include "sluice/engine.h"

/* What fixes a state's memory: two rules with equal layouts can share a
 * state; rate, burst and limit are not in it (they change live). */
struct sluice__layout {
	sluice_algo_t algo;
	int per_key;
	uint32_t ndims;
	struct {
		sluice_rules_dim_kind_t kind;
		char name[SLUICE_RULES_ID_MAX * 2 + 1]; /* header/query name, lower case for headers */
	} dims[SLUICE_RULES_DIMS_MAX];
	uint64_t window_ns, buckets;
	uint64_t capacity, key_max, flags, policy;
	uint64_t cbits;      /* keyed FIXED, INFLIGHT: bit_width(limit)          */
	uint64_t fixed[4];   /* global algorithms whose parameters are all fixed */
	int shaper;          /* leaky: a queue fallback makes it the shaper       */
	int one_key;         /* a global rule as a region table of one key      */
	/* a rule on a backend: the backend's serial and every parameter of
	 * its Redis limit (none changes live: redis.h PARAMETERS) */
	uint64_t backend;
	uint64_t rparams[12];
};

struct sluice__state {
	char id[SLUICE_RULES_ID_MAX + 1];
	struct sluice__layout layout;
	uint64_t serial;              /* unique per state, per engine        */
	uint32_t ndims;
	sluice_keyed_t keyed[SLUICE_RULES_DIMS_MAX]; /* per-key rules       */
	void *mem[SLUICE_RULES_DIMS_MAX]; /* owned table memory (no region) */
	uint32_t held[SLUICE_RULES_DIMS_MAX]; /* region entries held (0: none) */
	sluice_limiter_t *lim;        /* global rules                        */
	struct sluice__rlimits rl;    /* a rule on a backend (rl.b set): its
	                               * Redis limits, instead of the above  */
	sluice_stripe_t fb[2];        /* on a backend: decisions its fallback
	                               * took, [0] admitted, [1] refused     */
	int fb_ok;                    /* fb initialised                      */
	uint32_t fb_held;             /* on a region: fb's block's entry     */
	sluice_rules_limit_t applied; /* the parameters in force              */
	sluice_rules_limit_t target;  /* what the newest load asked for       */
	int pending;                  /* applied != target                    */
	uint64_t memory_ns;           /* how long its counts matter (ghosts)  */
	uint64_t retired_until;       /* on the retired list: kept until then */
	unsigned owners;              /* sets + the retired list (load mutex) */
	struct sluice__state *next;   /* the engine's list of every state     */
	sluice__metrics_t metrics;    /* counters and histograms: kept with the
	                               * state, so they never go back across
	                               * a reload that keeps it             */
	int metrics_ok;               /* initialised (freed with the state) */
	uint32_t metrics_held;        /* on a region: its block's entry      */
	_Atomic uint64_t adapt_limit; /* the adaptive controller's limit (0:
	                               * none yet): applied by load and sync,
	                               * never by a decision (setters lock)  */
	/* the state's own description of its dimensions and limit: a
	 * ghost is decided with it after the description it came from is
	 * freed (its strings point into this state) */
	sluice_rule_t shape;
};

/* One compiled rule: the description's rule (in the set's rules_t), its
 * state, and an old layout's state still in force beside it. */
struct sluice__crule {
	const sluice_rule_t *r;
	struct sluice__state *st;
	struct sluice__state *ghost;   /* NULL, or in force until ghost_until */
	uint64_t ghost_until;
	sluice__adaptive_t *adaptive;  /* adaptive rules: the controller, one
	                                * per set (freed with it)             */
	uint32_t index;
	/* r->id, NUL-padded to the verdict's field: decide copies it whole */
	char id[SLUICE_RULES_ID_MAX + 1];
	uint64_t quota, window_ns;     /* RateLimit-Policy                    */
};

/* The route index (match.c). */
struct sluice__route {
	const char *s;
	size_t len;
	uint32_t first, count;  /* candidates: cand[first .. first+count) */
	int32_t parent;         /* prefixes: the longest proper prefix in the set, or -1 */
};
struct sluice__index {
	struct sluice__route *exact, *prefix;
	size_t nexact, nprefix;
	int32_t *exact_hash;     /* open addressing: exact route or -1      */
	uint64_t hash_mask;      /* slots - 1 (a power of two >= 2 nexact)  */
	uint32_t *cand;          /* rule indices, ascending per route         */
	uint32_t any_first, any_count; /* rules without a path               */
};

struct sluice__set {
	uint64_t version;
	sluice_rules_t *rules;         /* the description (owned)            */
	size_t count;
	struct sluice__crule *cr;      /* count entries                      */
	uint32_t *by_id;               /* rule indices sorted by id          */
	struct sluice__index idx;
	/* states of rules no longer in the file, kept for their memory
	 * (RELOAD in engine.h), sorted by id: a load brings one back, and
	 * complete() finds one to release what it holds */
	struct sluice__state **retired;
	size_t nretired;
	/* the backends of the description, by its index (one reference
	 * each; two names on one connection share one object) */
	struct sluice__backend **bk;
	size_t nbk;
};

struct sluice__region;

struct sluice_engine {
	/* decision side: read by every decide */
	struct sluice__set *_Atomic set; /* rcu_dereference / rcu_assign_pointer */
	const sluice_clock_t *clock;
	size_t max_bytes;
	uint64_t memory_budget; /* options: 0 for the file's, else the default */
	/* control side: the load mutex's */
	pthread_mutex_t lock;
	struct sluice__state *states;  /* every live state                   */
	uint64_t next_serial;
	uint64_t version, failed;
	sluice__metrics_engine_t metrics; /* reloads, failures, version     */
	struct sluice__region *region; /* NULL: process memory               */
	size_t region_bytes;
	int region_lost;               /* a fork child without its holder slot
	                                * (engine.h FORK): decide and load
	                                * refuse; set before the child runs  */
	struct sluice_engine *fork_next; /* engine.c's list for fork()       */
	struct sluice__backend *backends; /* every open backend (rules.h BACKENDS) */
	uint64_t next_backend;         /* backend serials                     */
};

/* match.c: build the index of @s's rules; errors (too many rules could
 * match one request) into @x.  Return: 0, > 0 errors, SLUICE_ENOMEM. */
int sluice__index_build(struct sluice__index *ix, const struct sluice__set *s,
                        struct sluice__errs *x);
void sluice__index_free(struct sluice__index *ix);
/* sluice__index_lookup: match_internal.h (inline, for decide). */


/* reload.c */
void sluice__state_unref(sluice_engine_t *e, struct sluice__state *st);
void sluice__backend_unref(sluice_engine_t *e, struct sluice__backend *b);
void sluice__set_free(sluice_engine_t *e, struct sluice__set *s);
int sluice__engine_load(sluice_engine_t *e, const char *name, const void *buf, size_t len,
                        int is_file, sluice_rules_errors_t **errs);
int sluice__engine_sync_locked(sluice_engine_t *e);

/* engine.c: rule @id in @s (binary search of by_id), or NULL */
const struct sluice__crule *sluice__set_find(const struct sluice__set *s, const char *id);
/* A state's memory: how long what it counted matters (RELOAD). */
uint64_t sluice__memory_ns(const sluice_rule_t *r);

#endif /* SLUICE_ENGINE_INTERNAL_H */
