/* SPDX-License-Identifier: MIT */
/*
 * inflight.c - concurrency limiter: validation and the two rare paths (a
 * request that can never pass, a release of more than is held).
 *
 * DESIGN: one word, `held`, the slots in flight.  It is the whole state, so
 * there is no invariant between words to keep: every change is one CAS that
 * re-checks the bound (acquire: held + n <= K; release: n <= held) against
 * the exact value it replaces.  A CAS that fails means another thread
 * changed held and made progress; the loser retries with the fresh value
 * (no thread can make another spin: a stopped thread holds no CAS open, so
 * every failed CAS is someone else's completed operation).
 * Hence 0 <= held <= K at every point of held's modification order, which is
 * the header's GUARANTEE.  K itself is a second word, written only by set_limit;
 * an acquire checks against a K it read after its last read of held, so
 * the bound it keeps is a K current while held had the value its CAS
 * replaced (held may stay above a lowered K until releases bring it down:
 * SET_LIMIT).  The check is never a separate load followed by a
 * store: that would let two threads both see the last free slot.
 *
 * Readings across a change (inflight.h).  set_limit's store, every
 * acquire's load of K and its CAS on held are seq_cst: one total order S.
 * An acquire loads held (h), then K, then CASes h -> h + n; the CAS
 * succeeds only if held is h again, and a lost CAS hands back held and
 * the next attempt loads K after it.  So the K an admission was checked
 * against is the last value stored before its K load in S, a point
 * between its read of h and its CAS: held + n <= a K in force during that
 * span.  The old code read K once per call, so an acquire that lost its
 * CAS to acquires judged against a lowered K went on against the old one
 * (tests/core/test_inflight.c: held 11 under K = 10).  Cost: one load of K's
 * line (read-mostly) and one compare per acquire; x86 adds no fence.
 *
 * Who writes what: acquire and release write held (acquire and release
 * orders: the limiter is a semaphore, and a holder's work must happen before
 * the next holder's, as sem_post/sem_wait promise).  Bad releases write the
 * cold counter, relaxed: it publishes nothing.  Nothing is ever printed: a
 * library must not write to its host's stderr (a daemon's stderr may be a
 * closed descriptor, a log another program parses, or /dev/null); the
 * counter and the return code are how a bad release is observed.  init writes
 * everything before the limiter is shared; publishing the limiter to other
 * threads is the caller's job (thread creation, a release store, ...).
 *
 * Time is not part of the state (see CLOCK JUMPS in the header).
 */
#include "sluice/error.h"
#include "sluice/inflight.h"
#include "inflight_step.h"
#include "clock_internal.h"

/* The one validator of init and config_check (clock_internal.h). */
static int validate(const sluice_inflight_config_t *cfg, const sluice_clock_t **clock)
{
	if (!cfg)
		return SLUICE_EINVAL;
	int rc = sluice__inflight_validate(cfg->limit);
	if (rc != 0)
		return rc;
	/* Step 0: in-flight decides without the time (the clock only dates
	 * its decisions), so any clock will do and nothing is recorded. */
	return sluice__init_clock(cfg->clock, 0, SLUICE__ASK, clock);
}

int sluice_inflight_config_check(const sluice_inflight_config_t *cfg)
{
	const sluice_clock_t *clock;
	return validate(cfg, &clock);
}

int sluice_inflight_init(sluice_inflight_t *f, const sluice_inflight_config_t *cfg)
{
	if (!f)
		return SLUICE_EINVAL;
	const sluice_clock_t *clock;
	int rc = validate(cfg, &clock);
	if (rc != 0)
		return rc;

	/* Validated: only now touch *f (a failed init leaves it as it was). */
	atomic_init(&f->limit, cfg->limit);
	f->clock = clock;
	atomic_init(&f->bad_releases, 0);
	atomic_init(&f->held, 0);
	return 0;
}

void sluice_inflight_destroy(sluice_inflight_t *f)
{
	/* Nothing allocated.  Slots still held at destroy are the caller's
	 * leak, not ours to report: the limiter may be torn down on purpose
	 * while workers are being cancelled. */
	(void)f;
}

int sluice_inline_inflight_bad_n(const sluice_inflight_t *f, uint64_t n, uint64_t now,
                           sluice_decision_t *d)
{
	if (n == 0)
		return SLUICE_EINVAL;
	sluice__decision_never(d, atomic_load_explicit(&((sluice_inflight_t *)f)->limit,
	                                               memory_order_relaxed), now);
	return SLUICE_ETOOBIG;
}

/*
 * A release of n when only @held were in flight.  Nothing was changed (the
 * caller returned before its CAS), so held stays >= 0 and the limiter stays
 * exact for everybody else.  Count it; report nothing else (see DESIGN).
 */
int sluice_inline_inflight_bad_release(sluice_inflight_t *f, uint64_t n, uint64_t held)
{
	(void)n;
	(void)held;
	/* Relaxed: a statistic; it publishes no other data. */
	atomic_fetch_add_explicit(&f->bad_releases, 1, memory_order_relaxed);
	return SLUICE_ERELEASE;
}

/*
 * set_limit is one store: held stays as it is (nothing forgotten, nothing
 * minted) and every acquire compares held + n with a K it read after held,
 * so no acquire ever takes held above that K.  Seq_cst: in one total order
 * with the acquires' loads of K and their CASes (DESIGN); K orders no
 * other data.
 */
int sluice_inflight_set_limit(sluice_inflight_t *f, uint64_t limit)
{
	int rc = f ? sluice__inflight_limit_ok(limit) : SLUICE_EINVAL;
	if (rc != 0)
		return rc; /* SLUICE_ELIMIT: the validator's range, as init */
	atomic_store_explicit(&f->limit, limit, memory_order_seq_cst);
	return 0;
}
