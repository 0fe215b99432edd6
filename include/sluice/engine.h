/* SPDX-License-Identifier: MIT */
/*
 * sluice/engine.h - the rules engine: decide, reload, explain, metrics
 * (libsluice-engine: rules/engine.c, match.c, reload.c, verdict.c,
 * adaptive.c).  It decides requests with the rule files of sluice/rules.h
 * (libsluice-rules, which it requires).  Built and installed only where
 * liburcu's urcu-bp flavour is found (-Dengine, docs/build.md): a build
 * without it installs neither this header nor the library, so no soname
 * means one thing on one machine and another elsewhere.
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
 * of real time, then SLUICE_EBUSY: the load fails; a claimer found dead
 * then has its claim dropped and the next load claims again).
 * Region space is given back and reused: each engine on a region is one
 * of at most SLUICE_ENGINE_HOLDERS holders (sluice_engine_new fails with
 * SLUICE_EBUSY beyond), and holds each table its rule states use, from
 * the load that attaches it until a grace period after the last set that
 * used it is gone (a ghost's and a retired rule's memory included).  A
 * table no holder holds is freed by the next load of any holder on the
 * region, and its extent is reused whole by a later table no larger than
 * it (best fit; free extents are not merged).  A holder is gone when its
 * engine is freed or its process has exited (kill(pid, 0) says ESRCH, or
 * /proc says zombie; all processes on one region must share a pid
 * namespace); a stopped process (SIGSTOP) still holds its tables, and so
 * does a pid reused by a new process, until that one exits (space kept,
 * never a table freed under a live holder).  So a table is never freed while a
 * process may still decide on it, and a file reloaded with a changed
 * layout any number of times reuses the space of the layouts it left.
 * A layout no longer used and not yet freed is found again by a load
 * that brings it back, with its keys' states.  A global rule that a
 * keyed table can hold (sluice_rule_per_process() says 0: token_bucket,
 * leaky_bucket, fixed_window, sliding_window, concurrency, without a
 * queue fallback) is a table of one key in the region, so every process
 * decides on one state for it too; the others (sliding_log, decay,
 * warmup, a queue fallback) stay a limiter per process (a limiter holds
 * pointers).  Live changes made by one
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
 * progress in another thread at the fork: the fork handlers take every
 * engine's load mutex across fork() (a load in progress finishes first).
 * With a region, parent and children share the keyed tables; without one
 * each has its own copy.  On a region, the prepare handler reserves the
 * child's holder slot and gives it every table the parent's engine
 * holds, so the parent letting one go right after fork() cannot free it
 * under the child; the child takes the slot in its handler.  A slot the
 * child has not taken after 10 s of real time (fork() failed, or the
 * child was stopped inside fork() that long) is given back by the next
 * load on the region; such a child finds its slot gone and its engine
 * refuses every decide and load with SLUICE_ELAYOUT (free it and make a
 * new one): it never decides on a table that may have been freed.  So
 * does a child forked when all SLUICE_ENGINE_HOLDERS slots are held by
 * live processes.  A child that calls exec keeps its slot, and the
 * tables the parent held at the fork, until it exits.
 *
 * THREADS.  decide and complete: any number of threads, lock-free, no
 * allocation.  load, sync: any thread, serialised.  free: no other call
 * may run or start.
 */
#ifndef SLUICE_ENGINE_H
#define SLUICE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "rules.h"


#define SLUICE_ENGINE_MATCH_MAX 16u  /* rules one request can match       */
#define SLUICE_ENGINE_PARTS_MAX 32u  /* limits those rules hold at most   */
#define SLUICE_ENGINE_HELD_MAX 512u  /* key bytes of in-flight parts held */
#define SLUICE_ENGINE_DIR_SLOTS 1024u /* region directory entries (256 B each) */
#define SLUICE_ENGINE_HOLDERS 256u    /* engines (processes) on one region at once */
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
	/* 1: a shadow rule (mode: shadow), which refuses nothing, so the
	 * RateLimit fields do not advertise it; in the next padding byte */
	unsigned char shadow;
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
	size_t region_free;    /* of those, free extents a new table can take
	                        * (SHARED STATE: given back, not yet reused)   */
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
 * across a reload keeps its counters (they never go back).  On a region
 * (SHARED STATE) a rule's counters are a block of the region, so every
 * process holding its state counts into them and this is their sum over
 * the processes; the backends' counters and the reloads are this
 * process's.  The format's
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

#endif /* SLUICE_ENGINE_H */
