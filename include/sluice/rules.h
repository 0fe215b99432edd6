/* SPDX-License-Identifier: MIT */
/*
 * sluice/rules.h - rule files: YAML in, a validated, immutable description
 * of a rule set out (libsluice-rules; the format is docs/rules.md).  The
 * engine that decides requests with it is sluice/engine.h
 * (libsluice-engine, built where liburcu is: -Dengine).
 *
 * The loader decides nothing.  sluice_rules_load_buffer() and
 * sluice_rules_load_file() turn a file into a sluice_rules_t: per rule its
 * id, match (exact path or prefix, host, methods), dimensions, the
 * algorithm and its parameters in sluice's own units (ns, permits), keys
 * (capacity, full-table policy), fallback, mode, on_error and adaptive,
 * each element with the line and column it came from.  The engine (decide,
 * reload, metrics) builds its limiters and keyed tables from it.
 *
 * GUARANTEE.  A load returns either a description or every error the file
 * has, never both:
 *   - a description (return 0) passed every check of docs/rules.md, and
 *     every rule's parameters were accepted by the algorithm's own init
 *     (per-key rules: by sluice_keyed_format()'s validator with the rule's
 *     keys section; the others: by sluice_limiter_new() on a throw-away
 *     limiter), with the clock of the options: so the engine's build of the
 *     same rule, on that clock, is refused for no parameter reason;
 *   - an invalid file (return > 0, the number of errors kept) yields a
 *     list of errors, each with a 1-based line and column (0:0 for an error
 *     of the file itself: unreadable, too large), a message, and the sluice
 *     error code when a sluice init refused the parameters (the message then
 *     names it, e.g. SLUICE_EBURST).  The first SLUICE_RULES_ERRORS_MAX
 *     errors found are kept, sorted by place; the count of the others is
 *     in `dropped`.
 * Nothing is clamped or rounded: a value out of its range is an error.
 * A YAML syntax error ends the reading (libyaml cannot go on past it): the
 * list then holds the refusals found before it (anchors, tags, ...), the
 * syntax error at libyaml's mark (at the end of the input where libyaml's
 * mark lies past it), and nothing of the schema.  Nesting past the depth
 * cap ends the reading the same way, at the collection that crosses it
 * (nothing after it is read: a load costs time linear in its input).
 *
 * LIMITS: input at most opt->max_bytes (default and largest
 * SLUICE_RULES_MAX_BYTES, 4 MiB); nesting at most SLUICE_RULES_DEPTH_MAX
 * (64) collections deep; at most SLUICE_RULES_RULES_MAX (10,000) rules;
 * the state at most a memory budget (MEMORY, at sluice_rules_options_t).
 * Anchors, aliases, tags and more than one document are refused (an alias
 * would let a small file expand without bound, and a tag changes a value's
 * type behind the schema's back).
 *
 * THREADS.  No global state, no lock: loads on different inputs may run
 * in parallel from any threads.  A description is immutable after load,
 * so any number of threads may read it; sluice_rules_free() must not run
 * while one does.  Loads allocate (not for a decision path); every error
 * path frees what it allocated.  The one effect outside the load: with
 * opt->clock set, validation runs the inits on that clock, with what an
 * init does to it (on &sluice_clock_cached, the period floor of
 * sluice/clock.h), as the engine's own build will.
 */
#ifndef SLUICE_RULES_H
#define SLUICE_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "common.h"
#include "keyed.h"
#include "limiter.h"

#define SLUICE_RULES_MAX_BYTES (4u << 20) /* largest input, bytes        */
#define SLUICE_RULES_DEPTH_MAX 64u        /* deepest nesting             */
#define SLUICE_RULES_RULES_MAX 10000u     /* most rules in one file      */
#define SLUICE_RULES_ERRORS_MAX 100u      /* errors kept per load        */
#define SLUICE_RULES_DIMS_MAX 8u          /* dimensions per rule         */
#define SLUICE_RULES_ID_MAX 64u           /* longest rule id, bytes      */
#define SLUICE_RULES_ADDRESSES_MAX 16u    /* a backend's addresses (= redis.h's) */
#define SLUICE_RULES_SENTINEL_MAX 127u    /* longest sentinel name, bytes */
#define SLUICE_RULES_MSG_MAX 200u         /* longest message, with NUL   */
#define SLUICE_RULES_MEMORY_BUDGET_DEFAULT ((uint64_t)1 << 30) /* MEMORY: 1 GiB */

/* Where an element of the file starts: 1-based line and column (columns
 * count characters, as libyaml does).  0:0 names the file itself. */
typedef struct sluice_rules_mark {
	uint32_t line, col;
} sluice_rules_mark_t;

typedef enum sluice_rules_path_kind {
	SLUICE_RULES_PATH_ANY = 0,    /* no path in the match: every path  */
	SLUICE_RULES_PATH_EXACT = 1,  /* match.path: the path, byte for byte */
	SLUICE_RULES_PATH_PREFIX = 2, /* match.prefix: paths starting with it */
} sluice_rules_path_kind_t;

/* match.methods, as bits; 0 means every method. */
#define SLUICE_RULES_METHODS(X) \
	X(GET) X(HEAD) X(POST) X(PUT) X(DELETE) X(CONNECT) X(OPTIONS) X(TRACE) X(PATCH)
enum {
#define SLUICE__RULES_METHOD_BIT(m) SLUICE_RULES_METHOD_BIT_##m,
	SLUICE_RULES_METHODS(SLUICE__RULES_METHOD_BIT)
#undef SLUICE__RULES_METHOD_BIT
};
#define SLUICE_RULES_METHOD(m) (1u << SLUICE_RULES_METHOD_BIT_##m)

typedef struct sluice_rules_match {
	sluice_rules_path_kind_t path_kind;
	const char *path;   /* NUL-terminated, starts with '/'; NULL for ANY */
	const char *host;   /* NULL: any host; compared case-insensitively  */
	uint32_t methods;   /* SLUICE_RULES_METHOD(...) bits; 0: any        */
	sluice_rules_mark_t mark;
} sluice_rules_match_t;

typedef enum sluice_rules_dim_kind {
	SLUICE_RULES_DIM_GLOBAL = 1, /* one limit for every request          */
	SLUICE_RULES_DIM_IP,         /* per client address                   */
	SLUICE_RULES_DIM_USER,       /* per user id                          */
	SLUICE_RULES_DIM_ROUTE,      /* per request path                     */
	SLUICE_RULES_DIM_HEADER,     /* per value of a header (name below)   */
	SLUICE_RULES_DIM_QUERY,      /* per value of a query argument        */
} sluice_rules_dim_kind_t;

typedef struct sluice_rules_dim {
	sluice_rules_dim_kind_t kind;
	const char *name; /* HEADER, QUERY: the name as written; else NULL */
	sluice_rules_mark_t mark;
} sluice_rules_dim_t;

/*
 * The algorithm and its parameters in sluice's units.  Fields the
 * algorithm does not use are 0.
 *   GCRA (token_bucket): rate per period_ns, burst.
 *   LEAKY (leaky_bucket): rate per period_ns, depth (meter); with a queue
 *     fallback it is the shaper, its max_delay_ns the fallback's max_wait_ns.
 *   FIXED (fixed_window), WINDOW (sliding_window, with buckets), LOG
 *     (sliding_log): limit per window_ns.
 *   WARMUP (warmup): rate per period_ns, warmup_ns.
 *   DECAY (decay): limit, half_life_ns.
 *   INFLIGHT (concurrency): limit.
 */
typedef struct sluice_rules_limit {
	sluice_algo_t algo;
	uint64_t rate, period_ns, burst, depth;
	uint64_t limit, window_ns;
	uint32_t buckets;
	uint64_t warmup_ns, half_life_ns;
	sluice_rules_mark_t mark;
} sluice_rules_limit_t;

typedef struct sluice_rules_keys {
	uint64_t capacity;             /* slots asked for, as written      */
	sluice_keyed_policy_t policy;  /* when_full                        */
	uint32_t key_max;              /* longest key, bytes               */
	uint32_t flags;                /* SLUICE_KEYED_HASH_LONG_KEYS      */
	size_t region_bytes;           /* sluice_keyed_region_bytes() of one
	                                * table of this rule (one per
	                                * dimension); 0 for a global rule  */
	sluice_rules_mark_t mark;      /* 0:0 when the section was omitted */
} sluice_rules_keys_t;

typedef enum sluice_rules_fallback_type {
	SLUICE_RULES_FALLBACK_REJECT = 0, /* answer status                   */
	SLUICE_RULES_FALLBACK_QUEUE = 1,  /* wait up to max_wait_ns, else status */
	SLUICE_RULES_FALLBACK_STALE = 2,  /* serve a stale answer            */
} sluice_rules_fallback_type_t;

typedef struct sluice_rules_fallback {
	sluice_rules_fallback_type_t type;
	uint32_t status;       /* 400..599; 0 for STALE                    */
	uint64_t max_wait_ns;  /* QUEUE: >= 1; else 0                      */
	sluice_rules_mark_t mark;
} sluice_rules_fallback_t;

typedef enum sluice_rules_mode {
	SLUICE_RULES_ENFORCE = 0,
	SLUICE_RULES_SHADOW = 1, /* count what would be refused, refuse nothing */
} sluice_rules_mode_t;

typedef enum sluice_rules_on_error {
	SLUICE_RULES_FAIL_OPEN = 0,   /* on_error: allow (the default) */
	SLUICE_RULES_FAIL_CLOSED = 1, /* on_error: reject              */
} sluice_rules_on_error_t;

typedef enum sluice_rules_signal {
	SLUICE_RULES_SIGNAL_P99_LATENCY = 1,
	SLUICE_RULES_SIGNAL_ERROR_RATIO = 2,
} sluice_rules_signal_t;

/* Fixed-point fractions: parts per million (1.5 is 1500000, 10% is 100000). */
#define SLUICE_RULES_PPM 1000000u

typedef struct sluice_rules_adaptive {
	int enabled;                  /* 0: no adaptive section           */
	sluice_rules_signal_t signal;
	uint64_t baseline_ns;         /* P99_LATENCY                      */
	uint32_t baseline_ppm;        /* ERROR_RATIO: 1..1000000          */
	uint64_t factor_ppm;          /* > 1000000                        */
	uint32_t windows;             /* consecutive windows, 1..1000     */
	uint64_t window_ns;           /* one window                       */
	uint32_t step_ppm;            /* 1..1000000 (1% .. 100%)          */
	uint64_t floor;               /* 1 .. the configured limit        */
	sluice_rules_mark_t mark;
} sluice_rules_adaptive_t;

/* empty_key: what a request whose key is empty or absent does (DECIDE). */
typedef enum sluice_rules_empty_key {
	SLUICE_RULES_EMPTY_KEY_SHARED = 0, /* counted under one shared key (default) */
	SLUICE_RULES_EMPTY_KEY_PASS = 1,   /* not limited by the rule: skipped     */
} sluice_rules_empty_key_t;

/*
 * BACKENDS.  A rule is per instance (every process counts on its own) unless
 * it names a backend: `backends:` at the top of the file names each one,
 * and `backend: NAME` in a rule makes its limit global, kept on that
 * backend by libsluice-redis (sluice/redis.h) and shared by every instance
 * that loads a rule of the same id on the same Redis.  The engine links
 * libsluice-redis when the build has it (-Dredis, hiredis found); a build
 * without it refuses `type: redis` at load with an error naming the option.
 * One backend is one Redis connection and one I/O thread per engine and
 * process (sluice/engine.h, FORK).  What a backend's decision is:
 *   - fallback (what the rule decides on while Redis does not answer within
 *     the budget, or the breaker is open) is libsluice-redis's own, not a
 *     second mechanism: local (SLUICE_REDIS_LOCAL, the default): a local
 *     limiter of the rule's algorithm holding limit / expected_instances
 *     (GCRA: rate and burst divided), so a fleet of that many instances
 *     admits about the limit while Redis is away; allow (fail open); deny
 *     (fail closed).  A refusal, by Redis or by the local share, is then
 *     the rule's refusal: its own `fallback:` section (reject with status,
 *     stale) says what the request gets.
 *   - algorithms: those libsluice-redis runs: token_bucket (GCRA: the limit
 *     is the burst, the rate per its period), fixed_window, sliding_window
 *     (its buckets), sliding_log (global rules only, as locally).  Per-key
 *     rules use sluice_redis_keyed_new(): one Redis limit per key, named
 *     "<id>/<algorithm>:<dimension>:<key in hex>"; global ones
 *     sluice_redis_limit_new(), named "<id>/<algorithm>".
 *   - not on a backend (check errors): fallback: queue (a Redis limit
 *     books nothing), adaptive (a Redis limit has no setters), and per-key
 *     tables wider than libsluice-redis's (key_max above 32 bytes: keys go
 *     to Redis in hex; capacity above 65536; hash_long_keys).
 *   - reload: a rule whose id, backend (address, connection settings) and
 *     parameters are unchanged keeps its Redis limit (its lease, its
 *     over-limit cache) and the backend its connection; a changed address
 *     makes a new backend and limit; a changed parameter a new limit on the
 *     same Redis key, with no ghost (Redis keeps the count: a ghost on it
 *     would take each permit twice).  A failed load keeps every one and
 *     closes what it opened.  A backend serves only the process that made
 *     it: a child of fork() that loads makes its own (redis.h FORK).
 *   - all or nothing: a Redis permit has no refund; when a later rule
 *     refuses, it stays counted (fewer admissions later, never more).
 *   - the verdict says where each rule's decision came from
 *     (sluice_verdict_rule_t.source); the metrics count per backend and
 *     per rule what the fallback decided (sluice_engine_metrics).
 *   - the decision: sluice_redis_acquire / _acquire_key, lock-free and
 *     allocation-free, waiting at most the budget; nothing more.
 */
typedef enum sluice_rules_backend_type {
	SLUICE_RULES_BACKEND_REDIS = 1,
} sluice_rules_backend_type_t;

/* The values of sluice_redis_fallback_t (sluice/redis.h), without it. */
typedef enum sluice_rules_backend_fallback {
	SLUICE_RULES_BACKEND_LOCAL = 1, /* limit / expected_instances, locally */
	SLUICE_RULES_BACKEND_ALLOW = 2, /* fail open                          */
	SLUICE_RULES_BACKEND_DENY = 3,  /* fail closed                        */
} sluice_rules_backend_fallback_t;

typedef struct sluice_rules_backend {
	const char *name;               /* the key under backends:             */
	sluice_rules_backend_type_t type;
	const char *address;            /* as written: "127.0.0.1:6379"; a list
	                                 * joined with ", "                    */
	const char *host;               /* the (first) numeric address: "127.0.0.1", "::1" */
	uint32_t port;                  /* its port, 1..65535                  */
	/* every address (address: HOST:PORT or a list of up to
	 * SLUICE_RULES_ADDRESSES_MAX), "host:port" as libsluice-redis
	 * takes them; more than one, or a sentinel, and the backend follows a
	 * failover (sluice/redis.h FAILOVER) */
	uint32_t n_addresses;
	const char *const *addresses;
	const char *sentinel;           /* NULL, or the name the Sentinels at
	                                 * the addresses know the primary by */
	uint32_t cluster;               /* 1: the addresses are seed nodes of
	                                 * a Redis Cluster (sluice/redis.h
	                                 * CLUSTER); default 0                 */
	uint64_t lease_ttl_ns;          /* GCRA, log: S; 0: libsluice-redis's  */
	uint64_t budget_ns;             /* a decision's wait for Redis; 0: its  */
	uint32_t lease_max;             /* largest lease B (default 16)         */
	sluice_rules_backend_fallback_t fallback; /* default LOCAL             */
	uint32_t expected_instances;    /* LOCAL: the share; default 1          */
	uint64_t connect_timeout_ns, command_timeout_ns, breaker_open_ns; /* 0: its */
	uint32_t breaker_failures;      /* 0: its                               */
	uint32_t max_limits;            /* 0: twice the limits the file puts on
	                                 * it, at least 1024 (RELOAD, BACKENDS) */
	sluice_rules_mark_t mark;       /* the backend's mapping               */
} sluice_rules_backend_t;

typedef struct sluice_rule {
	const char *id;                 /* 1..SLUICE_RULES_ID_MAX bytes    */
	sluice_rules_match_t match;
	uint32_t ndims;                 /* 0: no dimensions (global)       */
	sluice_rules_dim_t dims[SLUICE_RULES_DIMS_MAX];
	int per_key;                    /* a dimension other than global   */
	sluice_rules_limit_t limit;
	sluice_rules_keys_t keys;       /* meaningful when per_key         */
	sluice_rules_fallback_t fallback;
	sluice_rules_mode_t mode;
	sluice_rules_on_error_t on_error;
	sluice_rules_adaptive_t adaptive;
	sluice_rules_mark_t mark;       /* the rule's mapping              */
	sluice_rules_mark_t id_mark;
	sluice_rules_empty_key_t empty_key; /* per-key rules; SHARED otherwise */
	const sluice_rules_backend_t *backend; /* NULL: per instance; else the
	                                * rules_t's backend it names (BACKENDS) */
	sluice_rules_mark_t backend_mark; /* its `backend:` value; 0:0 if none */
} sluice_rule_t;

/* A validated rule set: immutable, rules in file order. */
typedef struct sluice_rules {
	/* read-only */
	const char *file;         /* the name the load was given */
	size_t count;
	const sluice_rule_t *rules;
	uint64_t memory_bytes;    /* what the rules' state needs (MEMORY) */
	uint64_t memory_budget;   /* the budget it was checked against   */
	size_t nbackends;         /* backends:, in file order (BACKENDS)  */
	const sluice_rules_backend_t *backends;
	/* private */
	void *arena;
} sluice_rules_t;

typedef struct sluice_rules_error {
	sluice_rules_mark_t mark;
	int code;                      /* the SLUICE_E* a sluice init returned, else 0 */
	char msg[SLUICE_RULES_MSG_MAX];
} sluice_rules_error_t;

typedef struct sluice_rules_errors {
	/* read-only */
	const char *file;
	size_t count;                  /* kept, sorted by place     */
	size_t dropped;                /* found past the cap        */
	sluice_rules_error_t *errors;
} sluice_rules_errors_t;

/*
 * MEMORY.  A valid file can still ask for more memory than a machine has
 * (a per-key rule's tables are keys.capacity slots per dimension: 400
 * such rules at the default capacity are 3.3 GB).  So the loader adds up,
 * before anything is allocated, what the engine would allocate for the
 * file: per-key rules, their tables (sluice_keyed_region_bytes() each);
 * global rules, their limiter (a sliding log's ring, a sliding window's
 * buckets); every rule, its metrics (per-CPU stripes).  A file whose
 * total passes the memory budget is invalid: one error at the rule whose
 * running total crosses it, naming the total so far and the budget
 * ("rule 'r131': the file needs N bytes of memory up to this rule, over
 * the memory budget of B bytes").  The budget is opt->memory_budget when
 * given, else the file's top-level memory_budget (a size: 512MiB, 2g),
 * else SLUICE_RULES_MEMORY_BUDGET_DEFAULT (1 GiB).  The total and the
 * budget of a valid file are in sluice_rules_t (memory_bytes,
 * memory_budget).  Not counted: the engine's bookkeeping, a few hundred
 * bytes per rule.
 */
typedef struct sluice_rules_options {
	size_t max_bytes;              /* 0: SLUICE_RULES_MAX_BYTES; at most that */
	const sluice_clock_t *clock;   /* validate against this clock's resolution;
	                                * NULL: a 1 ns clock (no resolution check) */
	uint64_t memory_budget;        /* MEMORY: 0 for the file's memory_budget,
	                                * else SLUICE_RULES_MEMORY_BUDGET_DEFAULT */
} sluice_rules_options_t;

/*
 * sluice_rules_load_buffer - parse and validate @len bytes at @buf.
 * @name: the file name errors carry (not opened; NULL: "<buffer>").
 * @opt: NULL for the defaults.
 * @out: set to the description when the input is valid, else NULL.
 * @errs: NULL, or set to the error list when the input is invalid (else NULL).
 *
 * Reentrant; allocates; nothing of a failed load is kept (ASan-clean).
 * Return: 0 (valid: *@out set); > 0 (invalid: the number of errors in
 * *@errs, at least 1); SLUICE_EINVAL (NULL @buf with @len > 0, NULL @out,
 * opt->max_bytes above SLUICE_RULES_MAX_BYTES); SLUICE_ENOMEM (then
 * neither list nor description).
 */
SLUICE_API int sluice_rules_load_buffer(const char *name, const void *buf, size_t len,
                                        const sluice_rules_options_t *opt,
                                        sluice_rules_t **out, sluice_rules_errors_t **errs);

/*
 * sluice_rules_load_file - read @path (at most opt->max_bytes + 1 bytes are
 * read: a larger file is an error at 0:0) and load it as above, errors
 * naming @path.  A file that cannot be opened or read is one error at 0:0
 * with the system's message; a path that is not a regular file (a FIFO, a
 * device, a directory) is one error at 0:0, "cannot open: not a regular
 * file", found without blocking (opened O_NONBLOCK, nothing read).
 * Return: as sluice_rules_load_buffer().
 */
SLUICE_API int sluice_rules_load_file(const char *path, const sluice_rules_options_t *opt,
                                      sluice_rules_t **out, sluice_rules_errors_t **errs);

/* sluice_rules_free, sluice_rules_errors_free - NULL is fine. */
SLUICE_API void sluice_rules_free(sluice_rules_t *r);
SLUICE_API void sluice_rules_errors_free(sluice_rules_errors_t *e);

/*
 * sluice_rules_error_text - write error @i of @e as "file:line:col:
 * message" (or "file: message" for 0:0) into @buf of @len bytes.
 * Return: the length it needs without the NUL (as snprintf; the output is
 * cut, NUL-terminated, when that is >= @len), or SLUICE_EINVAL.
 */
SLUICE_API int sluice_rules_error_text(const sluice_rules_errors_t *e, size_t i, char *buf,
                                       size_t len);

/*
 * sluice_rule_per_process - whether @r's state is one per process even on
 * an engine's shared region (engine.h SHARED STATE): 1 for a global rule
 * on no backend whose algorithm a keyed table does not hold
 * (sliding_log, decay, warmup) or that books its slot (a queue
 * fallback); 0 for every other rule (per key, on a backend, or global
 * and held on the region as a table of one key).  A front end with more
 * than one process (nginx's workers) refuses a rule this says 1 for.
 */
SLUICE_API int sluice_rule_per_process(const sluice_rule_t *r);

/*
 * sluice_rule_keyed_config - the keyed table a per-key rule @r describes
 * (its algorithm, parameters and keys section), for sluice_keyed_format/_new.
 * sluice_rule_limiter_config - the limiter a global rule @r describes, on
 * @clock (a leaky bucket with a queue fallback is the shaper of that
 * max_wait), for sluice_limiter_new.  The one mapping from a rule to
 * sluice's configs: the loader validates through it, the engine builds
 * through it.  Return: 0, or SLUICE_EALGO for an algorithm it cannot hold.
 */
SLUICE_API void sluice_rule_keyed_config(const sluice_rule_t *r, sluice_keyed_config_t *out);
SLUICE_API int sluice_rule_limiter_config(const sluice_rule_t *r, const sluice_clock_t *clock,
                                          sluice_limiter_config_t *out);

/* sluice_rules_algo_name - the file's name of @a ("token_bucket", ...), or NULL. */
SLUICE_API const char *sluice_rules_algo_name(sluice_algo_t a);

#endif /* SLUICE_RULES_H */
