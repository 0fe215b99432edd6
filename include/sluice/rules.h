/* SPDX-License-Identifier: MIT */
/*
 * sluice/rules.h - rule files: YAML in, a validated, immutable description
 * of a rule set out (libsluice-rules; the format is docs/rules.md); and
 * the engine that decides requests with them (THE ENGINE, below).
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
 * process (FORK below).  What a backend's decision is:
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
	const char *address;            /* as written: "127.0.0.1:6379"        */
	const char *host;               /* its numeric address: "127.0.0.1", "::1" */
	uint32_t port;                  /* 1..65535                            */
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

/* ==================================================================== */
/*
 * THE ENGINE: decide, reload, explain (rules/engine.c, match.c, reload.c,
 * verdict.c).
 *
 * sluice_engine_new() makes an engine with no rules (every request
 * passes); sluice_engine_load_file/_buffer() compile a rule file into an
 * immutable rule set and publish it; sluice_engine_decide() finds the
 * rules a request matches and takes one permit from each of their limits,
 * all or nothing; sluice_engine_complete() ends what a verdict holds
 * (concurrency permits).
 *
 * MATCHING.  Compiled at load, no scan of patterns: exact paths in a
 * sorted array (binary search), prefixes in a sorted array whose entries
 * point at their longest proper prefix in the set (one binary search
 * finds the longest prefix of the path, its chain the others), plus the
 * rules without a path.  A candidate then matches when its methods (a
 * bit mask) and its host (case-insensitive, exact) do.  Matched rules are
 * applied in file order.  At most SLUICE_ENGINE_MATCH_MAX rules can match
 * one request and they hold at most SLUICE_ENGINE_PARTS_MAX limits: a
 * file where more could is refused at load, so decide never truncates.
 *
 * DECIDE.  Each rule x dimension has its own keyed table (sluice/keyed.h)
 * of keys.capacity slots, keyed by the request's value of the dimension:
 * ip: the address bytes; user: the user id; route: the path; header:NAME,
 * query:NAME: the value the request's lookup callback returns (a value
 * longer than keys.key_max is a limiter error, SLUICE_EKEYLEN, unless
 * keys.hash_long_keys: size key_max for routes and headers).  EMPTY KEYS:
 * a value that is absent (no address, no user, no such header or query
 * argument) and one that is empty (0 bytes) are the same thing, and the
 * rule's empty_key says what such a request does: shared (the default),
 * it is counted under one key shared by every such request of the rule, a
 * single 0 byte, so leaving a header out (or sending it empty) never
 * escapes the limit; pass, it is not limited by the rule at all (nginx
 * limit_req's behaviour): when any dimension the rule keys on is empty or
 * absent, nothing is taken from any of its dimensions and its outcome is
 * SLUICE_OUTCOME_SKIPPED (counted in sluice_rule_skipped_total).  A global rule is one limiter (sluice/limiter.h).  Enforcing
 * rules are all or nothing, as sluice/composite.h: the first refusal
 * gives back what the parts before it took (sluice_keyed_refund,
 * sluice_limiter_refund / _cancel for a booking) and asks no later part;
 * a refund a table cannot make exactly leaves those permits counted
 * (fewer admissions later, never more).  The refusing rule's fallback
 * makes the action: REJECT (status), QUEUE (a booking of at most
 * max_wait: action QUEUE with its delay, else REJECT with the status),
 * STALE.  Shadow rules are decided after the enforcing ones, each on its
 * own, all or nothing over its dimensions, and refuse nothing: a refusal
 * is SLUICE_OUTCOME_SHADOW_REFUSED and, when nothing enforcing refused,
 * the action SLUICE_ACTION_SHADOW (serve the request).  A limiter error
 * (a key longer than the table takes, a full table under keys.when_full:
 * reject, SLUICE_EBUSY, ...) follows on_error: allow passes that part
 * (nothing taken, outcome SLUICE_OUTCOME_ERROR_OPEN), reject refuses the
 * request through the rule's fallback (SLUICE_OUTCOME_ERROR_CLOSED).
 * No lock, no allocation, no system call but the clock's: one RCU read
 * section (urcu-bp, inlined) around the whole decision.  Once per thread,
 * its first read section registers it with urcu-bp, inside liburcu (an
 * allocation of its registry and liburcu's registry lock): warm each
 * thread up, e.g. with one decision at its start, where that matters.
 *
 * RELOAD.  A load parses and validates (sluice_rules_load_*), compiles
 * the new set while decisions go on with the old one, publishes it with
 * rcu_assign_pointer, waits for a grace period (synchronize_rcu: no
 * call_rcu thread) and frees what only the old set used.  Loads serialise
 * on a mutex (a control path); readers never wait.  A rule's state (its
 * tables or limiter) is found again by its id and
 * its state layout:
 *   - same id, same layout (algorithm, dimensions, window, buckets, keys
 *     section, and what fixes a table's slot: FIXED's and INFLIGHT's count
 *     width, bit_width of the limit; a global sliding_log's capacity, a
 *     leaky bucket's meter or shaper, warm-up's whole configuration): the
 *     tables and every key's state are kept.  A changed rate, burst or
 *     limit is applied live by the tables' own setters
 *     (sluice_keyed_set_*, sluice_limiter_set_*), with their rule for what
 *     is already counted (no refill, no reset).  A change a table refuses
 *     for now (SLUICE_EBUSY: keyed.h LIVE PARAMETERS, a GCRA or leaky
 *     change within tau of the previous one, or the second of a rate and a
 *     burst change) stays pending: the rule decides with the parameters in
 *     force until the next load or sluice_engine_sync() applies it
 *     (sluice_engine_rule_info() says which).
 *   - same id, another layout: a new state, and the old one stays in
 *     force beside it for the old layout's memory (GCRA, leaky: its tau,
 *     burst x T; windows and the log: one window; in-flight, decay and
 *     warm-up: SLUICE_ENGINE_GHOST_NS, 10 s): each
 *     decision must pass both, all or nothing.  So every key starts the
 *     new layout with what the old one still counted for it (conservative:
 *     fewer admissions, never more), not with a fresh bucket.
 *   - a rule that leaves the file keeps its state, unused, for the same
 *     memory (SLUICE_ENGINE_GHOST_NS at least), and a load that brings it
 *     back with the same layout in that time gets it back: removing a rule
 *     and adding it again does not refill it either.
 * A failed load (any error, SLUICE_ENOMEM included) keeps the old set,
 * returns its errors and is counted (sluice_engine_info()).  Each
 * successful load increments the version, and each verdict carries the
 * version of the set it was decided with.
 *
 * SHARED STATE (opt->region).  Given a region (MAP_SHARED memory, an
 * nginx zone), the keyed tables live in it: a directory of
 * SLUICE_ENGINE_DIR_SLOTS entries at its start, then the tables.  An
 * entry is named by the rule id, the dimension (kind and name) and a
 * 64-bit digest of the table's layout (its sluice_keyed_config_t but the
 * live rate, burst and limit); a process that loads the same file on the
 * same region finds each rule's tables by that name and attaches to them
 * (sluice_keyed_attach), so every process decides on one state per key.
 * The first process to need an entry claims it with a CAS and formats its
 * table; the others wait for it (yielding, at most SLUICE_KEYED_LEASE_MS
 * of real time, then SLUICE_EBUSY: the load fails).  Region space is
 * taken, never given back: a layout no longer used keeps its table (and a
 * load that brings it back finds it, with its keys' states).  Global rules
 * stay per process (a limiter holds pointers).  Live changes made by one
 * process reach every process at its next decision (keyed.h LIVE
 * PARAMETERS); every process should load the same file.
 *
 * ADAPTIVE.  A rule with an adaptive section gets a controller
 * (rules/adaptive_internal.h: AIMD between the floor and the file's
 * limit, judged per window from the rule's latency histogram or failure
 * ratio, which complete() feeds), told the time by every decision of the
 * rule.  The limit it sets (GCRA: the rate, per the file's period; the
 * windows and concurrency: the limit) is applied by the next
 * sluice_engine_sync() or load with the tables' setters, state kept; not
 * by the decision that closed the window, because a setter takes the
 * table's lock.  Call sluice_engine_sync() periodically (each window) on
 * an engine with adaptive rules.  A reload that keeps the rule's state
 * keeps its effective limit (within the new floor and limit).
 *
 * FORK.  The engine registers liburcu's fork handlers (urcu_bp_before_fork
 * and the two after handlers) with pthread_atfork once per process, so a
 * child's read sections and grace periods work.  A child inherits each
 * engine as it was: it may decide at once, and load if no load was in
 * progress in another thread at the fork (the load mutex would be held
 * for ever in the child: pre-fork servers load in the master, then fork,
 * and each worker reloads on its own).  With a region, parent and
 * children share the keyed tables; without one each has its own copy.
 *
 * THREADS.  decide and complete: any number of threads, lock-free, no
 * allocation.  load, sync: any thread, serialised.  free: no other call
 * may run or start.
 */

#define SLUICE_ENGINE_MATCH_MAX 16u  /* rules one request can match       */
#define SLUICE_ENGINE_PARTS_MAX 32u  /* limits those rules hold at most   */
#define SLUICE_ENGINE_HELD_MAX 512u  /* key bytes of in-flight parts held */
#define SLUICE_ENGINE_DIR_SLOTS 1024u /* region directory entries (256 B each) */
#define SLUICE_ENGINE_GHOST_NS (10ULL * 1000000000ULL) /* see RELOAD      */

typedef struct sluice_engine sluice_engine_t;

typedef struct sluice_engine_options {
	const sluice_clock_t *clock; /* NULL: &sluice_clock_cached            */
	void *region;                /* NULL: tables in process memory         */
	size_t region_bytes;         /* with region: its size (>= 1 MiB)       */
	size_t max_bytes;            /* rule files: 0 for SLUICE_RULES_MAX_BYTES */
	uint64_t memory_budget;      /* MEMORY, for every load: 0 for the file's
	                              * memory_budget, else 1 GiB; tables in the
	                              * region count too                        */
} sluice_engine_options_t;

/* The kind of a lookup: a header (name compared case-insensitively by the
 * callback) or a query argument. */
typedef enum sluice_lookup_kind {
	SLUICE_LOOKUP_HEADER = 1,
	SLUICE_LOOKUP_QUERY = 2,
} sluice_lookup_kind_t;

/* Return the value of header/query @name (@len set to its bytes), or NULL
 * when the request has none.  Called on the decision path: it must not
 * block; the bytes must stay valid until decide returns. */
typedef const void *(*sluice_lookup_fn)(void *ctx, sluice_lookup_kind_t kind, const char *name,
                                        size_t *len);

typedef struct sluice_request {
	const char *method;     /* "GET", ... (NULL: matches rules without methods only) */
	const char *path;       /* starts with '/'; without the query string  */
	size_t path_len;        /* 0: strlen(path)                           */
	const char *host;       /* NULL: matches rules without host only      */
	const void *addr;       /* client address bytes (4 or 16), or NULL    */
	size_t addr_len;
	const void *user;       /* user id bytes, or NULL                    */
	size_t user_len;
	sluice_lookup_fn lookup; /* NULL: no header, no query argument        */
	void *ctx;
} sluice_request_t;

typedef enum sluice_action {
	SLUICE_ACTION_PASS = 0,   /* serve it                                */
	SLUICE_ACTION_REJECT = 1, /* answer status (Retry-After: headers)     */
	SLUICE_ACTION_QUEUE = 2,  /* serve it after delay_ns (booked)        */
	SLUICE_ACTION_STALE = 3,  /* serve a stale answer                    */
	SLUICE_ACTION_SHADOW = 4, /* serve it; a shadow rule would refuse it  */
} sluice_action_t;

typedef enum sluice_outcome {
	SLUICE_OUTCOME_PASSED = 0,         /* every limit of the rule admitted */
	SLUICE_OUTCOME_REFUSED = 1,        /* a limit refused (enforce)        */
	SLUICE_OUTCOME_SHADOW_REFUSED = 2, /* a limit refused (shadow)         */
	SLUICE_OUTCOME_ERROR_OPEN = 3,     /* a limiter error, on_error: allow */
	SLUICE_OUTCOME_ERROR_CLOSED = 4,   /* a limiter error, on_error: reject */
	SLUICE_OUTCOME_NOT_ASKED = 5,      /* an earlier rule refused          */
	SLUICE_OUTCOME_RETURNED = 6,       /* admitted, given back: a later rule refused */
	SLUICE_OUTCOME_QUEUED = 7,         /* booked a slot delay_ns ahead     */
	SLUICE_OUTCOME_SKIPPED = 8,        /* empty_key: pass, and a key the rule
	                                    * keys on was empty or absent: not
	                                    * limited, nothing taken           */
} sluice_outcome_t;

/* Where a rule's decision came from (sluice_verdict_rule_t.source): this
 * instance's own limits, or a backend (rules.h BACKENDS) and how.  A rule
 * of several dimensions reports the most telling of its parts (fallback,
 * then refusal, then lease). */
typedef enum sluice_verdict_source {
	SLUICE_SOURCE_LOCAL = 0,         /* per instance (or not asked)        */
	SLUICE_SOURCE_REDIS_LEASE = 1,   /* admitted from a Redis lease       */
	SLUICE_SOURCE_REDIS_REFUSAL = 2, /* Redis refused (or its over-limit
	                                  * cache, with no round trip)        */
	SLUICE_SOURCE_FALLBACK = 3,      /* the backend's fallback decided:
	                                  * Redis late or the breaker open    */
} sluice_verdict_source_t;

typedef struct sluice_verdict_rule {
	char id[SLUICE_RULES_ID_MAX + 1];
	/* a sluice_verdict_source_t, in the byte after id that was padding
	 * (the struct's size and every other offset are unchanged) */
	unsigned char source;
	sluice_outcome_t outcome;
	int error;               /* the SLUICE_E* a limiter returned, else 0  */
	uint32_t dim;            /* refused/error: the dimension's index       */
	sluice_decision_t d;     /* refused: the refusing limit's decision;
	                          * else the limit with the least remaining    */
	uint64_t quota, window_ns; /* RateLimit-Policy: q and w               */
} sluice_verdict_rule_t;

struct sluice__verdict_held {
	uint64_t serial;          /* the state's serial                       */
	uint32_t vrule;           /* its rule in the verdict's rules[]        */
	uint32_t rule, dim;       /* index in the set of version `version`;
	                           * dim UINT32_MAX: a global limiter         */
	uint32_t off, len;        /* the key in held_keys                    */
};

typedef struct sluice_verdict {
	/* read-only */
	sluice_action_t action;
	uint32_t status;         /* REJECT: the refusing rule's fallback status
	                          * (a queue that could not book: its status);
	                          * else 0                                    */
	uint64_t delay_ns;       /* QUEUE: wait this long, then serve          */
	uint64_t retry_after_ns; /* REJECT: the refusing limit's retry_after   */
	uint64_t version;        /* the rule set decided with (0: none loaded) */
	uint64_t now_ns;         /* the clock reading used                     */
	uint32_t refused_by;     /* REJECT, STALE, SHADOW: the index in rules[]
	                          * of the rule that made the action; else
	                          * UINT32_MAX                                */
	uint32_t nrules;         /* matched rules, in file order               */
	sluice_verdict_rule_t rules[SLUICE_ENGINE_MATCH_MAX];
	/* private: what complete() gives back */
	uint32_t nheld, completed, held_used;
	uint32_t rix[SLUICE_ENGINE_MATCH_MAX];     /* rules[i]'s index in the set */
	uint64_t rserial[SLUICE_ENGINE_MATCH_MAX]; /* and its state's serial      */
	struct sluice__verdict_held held[SLUICE_ENGINE_PARTS_MAX];
	unsigned char held_keys[SLUICE_ENGINE_HELD_MAX];
} sluice_verdict_t;

/*
 * sluice_engine_new - an engine with no rule set (every request passes,
 * version 0).  @opt: NULL for the defaults.
 * With opt->region: the region is used as SHARED STATE says; a region
 * whose directory is not the engine's (nor all zero bytes) is refused.
 * Allocates; registers the fork handlers once per process.
 * Return: 0 and *@out; SLUICE_EINVAL (NULL @out, region_bytes below 1 MiB
 * or a region not 64-byte aligned, max_bytes above SLUICE_RULES_MAX_BYTES),
 * SLUICE_ECLOCK, SLUICE_ELAYOUT (the region holds something else),
 * SLUICE_ENOMEM.
 */
SLUICE_NODISCARD SLUICE_API int sluice_engine_new(const sluice_engine_options_t *opt, sluice_engine_t **out);

/* sluice_engine_free - free the engine, its rule set and its states
 * (region tables stay in the region).  NULL is fine. */
SLUICE_API void sluice_engine_free(sluice_engine_t *e);

/*
 * sluice_engine_load_file, sluice_engine_load_buffer - load a rule file
 * and publish it (RELOAD).  @errs: NULL, or set to the error list of a
 * failed load (else NULL; free with sluice_rules_errors_free).
 * Errors of the engine's own (more rules could match one request than
 * SLUICE_ENGINE_MATCH_MAX, a table the region has no room for, a table
 * init refused) are in the list at the rule's line, as the loader's.
 * Blocks for one grace period (decisions in progress end); not from a
 * decision path, nor inside an RCU read section.
 * Return: 0 (published: the version went up by one); > 0 (invalid: the
 * number of errors, the old set kept); SLUICE_EINVAL, SLUICE_ENOMEM (the
 * old set kept; no list when the list itself could not be allocated).
 * Every failure counts in sluice_engine_info().failed_loads.
 */
SLUICE_API int sluice_engine_load_file(sluice_engine_t *e, const char *path,
                                       sluice_rules_errors_t **errs);
SLUICE_API int sluice_engine_load_buffer(sluice_engine_t *e, const char *name, const void *buf,
                                         size_t len, sluice_rules_errors_t **errs);

/*
 * sluice_engine_decide - decide @req with the rule set in force (DECIDE),
 * filling @v.  Lock-free, no allocation, safe from any number of threads,
 * also while another thread loads.
 * Return: 0, with what to do in @v->action (the one return rule of
 * common.h: a call that is not a decision returns 0 or a negative error,
 * its outcome in an out-parameter; @v->action is never the return value,
 * so `if (sluice_engine_decide(...))` is true on errors only);
 * SLUICE_EINVAL (NULL @e, @req, @v or path, a path that does not start
 * with '/').
 */
SLUICE_NODISCARD SLUICE_API int sluice_engine_decide(sluice_engine_t *e, const sluice_request_t *req,
                                    sluice_verdict_t *v);
/* sluice_engine_decide_at - the same at the reading @now of the engine's
 * clock's timeline. */
SLUICE_NODISCARD SLUICE_API int sluice_engine_decide_at(sluice_engine_t *e, const sluice_request_t *req,
                                       uint64_t now, sluice_verdict_t *v);

/*
 * sluice_engine_complete - the request of @v is done: give back the
 * concurrency permits it holds (release per key), once (a second call
 * does nothing); @latency_ns and @ok are the request's latency and
 * success, kept for the metrics and adaptive limits.  When the rule that
 * took a permit has changed state since (a new layout, removed and its
 * state freed), the permit went with the old state and nothing is
 * released.  Lock-free, no allocation.
 * Return: 0; SLUICE_EINVAL (NULL); the first release error (the others
 * are still released).
 */
SLUICE_API int sluice_engine_complete(sluice_engine_t *e, sluice_verdict_t *v,
                                      uint64_t latency_ns, int ok);

/*
 * sluice_engine_sync - apply pending live changes (RELOAD) at the clock's
 * reading.  Serialised with loads; no grace period.
 * Return: the number of changes still pending (0: none), or SLUICE_EINVAL.
 */
SLUICE_API int sluice_engine_sync(sluice_engine_t *e);

typedef struct sluice_engine_info {
	uint64_t version;      /* successful loads                            */
	uint64_t failed_loads; /* loads that kept the old set                 */
	size_t rules;          /* rules in force                              */
	size_t pending;        /* live changes not applied yet                */
	size_t region_used;    /* region bytes taken (0 without a region)      */
} sluice_engine_info_t;

/* sluice_engine_info - counters of @e (read under the load mutex).
 * Return: 0, SLUICE_EINVAL. */
SLUICE_API int sluice_engine_info(sluice_engine_t *e, sluice_engine_info_t *out);

typedef struct sluice_engine_rule_info {
	uint64_t serial;       /* the state's serial: equal across loads while
	                        * the state is kept                            */
	uint64_t rate, period_ns, burst, limit; /* the parameters in force    */
	int pending;           /* a live change waits (RELOAD)                 */
	uint64_t adaptive_limit; /* the adaptive controller's limit (GCRA: the
	                        * rate; else the limit), 0 before its first
	                        * change; in force after the next sync or load */
	int ghost;             /* an old layout's state is still in force      */
} sluice_engine_rule_info_t;

/* sluice_engine_rule_info - the state of rule @id in force.
 * Return: 0; SLUICE_EINVAL (NULL, no such rule). */
SLUICE_API int sluice_engine_rule_info(sluice_engine_t *e, const char *id,
                                       sluice_engine_rule_info_t *out);

/*
 * sluice_verdict_headers - write the answer's header fields for @v through
 * @emit(ctx, name, value): Retry-After (REJECT with a finite
 * retry_after_ns), then one RateLimit-Policy and one RateLimit member per
 * matched enforcing rule that was asked (sluice/http.h), joined with ", ".
 * Fields a decision cannot honestly fill are left out (http.h).  No
 * allocation; thread-safe.
 * Return: the number of fields emitted; SLUICE_EINVAL.
 */
typedef void (*sluice_header_fn)(void *ctx, const char *name, const char *value);
SLUICE_API int sluice_verdict_headers(const sluice_verdict_t *v, sluice_header_fn emit, void *ctx);

/*
 * sluice_engine_metrics - write the engine's metrics as Prometheus text
 * (exposition format 0.0.4) through @write(ctx, buf, len) (pieces of the
 * text; a non-zero return stops the write and is returned): per rule of
 * the set in force, labelled {rule="<id>"} (no per-key labels),
 * sluice_rule_requests_total (passed + refused), _passed_total,
 * _refused_total, _shadow_refused_total, _queued_total, _errors_total,
 * _failures_total, _skipped_total, (rules on a backend, BACKENDS)
 * _fallback_passed_total and _fallback_refused_total {rule, backend}, the
 * latency histogram (from complete()) and the
 * queue-wait histogram (a queued admission's delay), the effective and
 * the configured limit as gauges; per backend of the set
 * {backend="<name>"}, libsluice-redis's counters (sluice_backend_*_total:
 * round trips, lease admits, remote and cache refusals, budget timeouts,
 * I/O errors, connects, breaker opened; fallbacks by kind) and
 * sluice_backend_breaker_state; and the engine's reloads, failed reloads
 * and version.  What a decision counts per rule it matched:
 * passed (admitted, also when a later rule refused and its permit went
 * back, and a shadow rule's admissions and would-be refusals), refused
 * (enforce: refused, or a closed error), shadow_refused, queued (+ the
 * wait), errors (a limiter error, open or closed), skipped (empty_key:
 * pass, a key empty or absent; not in requests); a rule not asked (an
 * earlier rule refused) counts nothing.  A rule whose state is kept
 * across a reload keeps its counters (they never go back).  The format's
 * details are rules/metrics_internal.h's.  Takes the load mutex (a
 * control path: loads wait for it); allocates one row per rule.
 * Return: 0, SLUICE_EINVAL, SLUICE_ENOMEM, or @write's non-zero value.
 */
SLUICE_API int sluice_engine_metrics(sluice_engine_t *e,
                                     int (*write)(void *ctx, const char *buf, size_t len),
                                     void *ctx);

/* Names of actions and outcomes ("pass", "reject", ...; "refused", ...). */
SLUICE_API const char *sluice_action_name(sluice_action_t a);
SLUICE_API const char *sluice_outcome_name(sluice_outcome_t o);

#endif /* SLUICE_RULES_H */
