/* SPDX-License-Identifier: MIT */
/*
 * sluice/common.h - export macro, branch hints and cache-line size shared by
 * every sluice header.
 *
 * The library is built with -fvisibility=hidden and a linker version
 * script (lib/sluice.map.in): only symbols marked SLUICE_API and named
 * sluice_* are exported, every one under the version node SLUICE_1.0.
 *
 * INLINE.  By default every call is a call into the library, so a program
 * depends only on the functions and on the sizes of the structs it
 * allocates (the ABI that NEWS.md promises for all of 1.x), never on their
 * private fields.  A program that defines SLUICE_INLINE before including any
 * sluice header (as liburcu's _LGPL_SOURCE) compiles the decision paths in
 * place instead, from include/sluice/static/: a call's cost less per
 * decision, which shows on refusals (docs/performance.md, "Issue 28 item 5"),
 * in exchange for being bound to the exact release it was built with.  The
 * bodies read private fields and call helpers exported under the node
 * SLUICE_INLINE_<release> only, and static/common.h pins every such file to
 * that node, so the same program against another release of libsluice.so
 * fails to start, never runs with the wrong layout.  Rebuild it with each
 * release.  The same holds for static linking (libsluice.a), trivially.
 *
 * THE ONE RETURN RULE, for every public call:
 *   - a decision (acquire, reserve, try, the keyed and handle forms)
 *     returns 1 when admitted, 0 when refused, a negative SLUICE_E* code on
 *     error: SLUICE_ADMITTED and SLUICE_REFUSED name the two outcomes, so
 *     `if (sluice_gcra_acquire(...) == SLUICE_ADMITTED)` reads right and
 *     `if (rc < 0)` finds every error;
 *   - every other call returns 0 or a negative SLUICE_E* code, its outcome
 *     in an out-parameter (sluice_engine_decide: the action in v->action);
 *     sizes, lengths and counts, where a call computes one, are the
 *     documented exceptions (sluice_*_size, the formatters' lengths, a
 *     loader's count of errors, the count of changes still pending).
 * THE VERBS, the same in every header: `_init` initialises a struct the
 * caller allocated, allocating what it holds where it needs to (a GCRA's
 * stripes, a keyed table's region), and `_destroy` releases what it holds;
 * `_new` allocates the object itself and returns a pointer, `_free` frees
 * it; `_format` writes a shared table into memory the caller mapped, which
 * any number of processes then `_attach` (sluice/keyed.h).  A struct whose
 * init holds nothing (sluice_composite_t: pointers to limiters it does not
 * own) has no `_destroy`.
 * CONFIG CHECKS: every config has its check, sluice_<algo>_config_check(),
 * sluice_composite_config_check(), sluice_limiter_config_check() and
 * sluice_keyed_config_check(), which returns what the init (new, format)
 * would for it, because the init calls the same validator: no memory, no
 * limiter, no throw-away instance.  The one answer that can change between
 * a check and an init is SLUICE_ERESOLUTION on the cached clock, when the
 * process starts or re-periods its ticker in between (clock.h): an init
 * records its step so that no later start can coarsen the clock under it,
 * a check records nothing.  The rules file and the nginx module validate
 * through these.
 * SLUICE_NODISCARD marks the calls whose result must be looked at: a
 * decision ignored is a limit not enforced, an init ignored a limiter that
 * may not exist.
 */
#ifndef SLUICE_COMMON_H
#define SLUICE_COMMON_H

#include <stdint.h>

#if defined(SLUICE_BUILDING) && defined(__GNUC__)
#define SLUICE_API __attribute__((visibility("default")))
#else
#define SLUICE_API
#endif

/* The two outcomes of a decision (THE ONE RETURN RULE above). */
#define SLUICE_ADMITTED 1
#define SLUICE_REFUSED 0

#if defined(__GNUC__)
#define SLUICE_NODISCARD __attribute__((warn_unused_result))
#else
#define SLUICE_NODISCARD
#endif

#define SLUICE_LIKELY(x)   __builtin_expect(!!(x), 1)
#define SLUICE_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Every x86-64 and most arm64 parts; independently written hot words get
 * a line of their own so one core's writes do not evict another's reads. */
#define SLUICE_CACHELINE 64

/* private: 128-bit products (GCC and clang on 64-bit targets) */
__extension__ typedef unsigned __int128 sluice__u128;

/*
 * Every algorithm, as X(ALGO, name): its config is `sluice_<name>_config_t`,
 * its functions `sluice_<name>_init`, ... (docs/conventions.md).  One table,
 * so adding an algorithm is one line.  sluice_algo_t is the one algorithm
 * enum: the generic handle's (sluice/limiter.h, which adds the composite
 * and the keyed table) and a keyed table's (sluice/keyed.h, which holds GCRA, LEAKY, FIXED,
 * WINDOW and INFLIGHT).  0 is no algorithm, so a zeroed config is refused
 * (SLUICE_EALGO).
 */
#define SLUICE_ALGOS(X)         \
	X(FIXED, fixed)         \
	X(WINDOW, window)       \
	X(GCRA, gcra)           \
	X(LEAKY, leaky)         \
	X(LOG, log)             \
	X(WARMUP, warmup)       \
	X(DECAY, decay)         \
	X(INFLIGHT, inflight)

typedef enum sluice_algo {
	SLUICE_ALGO_NONE = 0,
#define SLUICE__ALGO_ENUM(ALGO, name) SLUICE_ALGO_##ALGO,
	SLUICE_ALGOS(SLUICE__ALGO_ENUM)
#undef SLUICE__ALGO_ENUM
	SLUICE_ALGO_COMPOSITE, /* the handle only: all or nothing over handles */
	SLUICE_ALGO_KEYED,     /* the handle only: a keyed table, key per call */
	SLUICE_ALGO_EXTERNAL,  /* the handle only: sluice_limiter_new_external() */
} sluice_algo_t;

#ifdef SLUICE_INLINE
#include "static/common.h"
#endif

#endif /* SLUICE_COMMON_H */
