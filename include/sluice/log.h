/* SPDX-License-Identifier: MIT */
/*
 * sluice/log.h - exact sliding log: at most L permits in ANY interval of
 * length W, not only in aligned windows or buckets.
 *
 * The log keeps the time of each of the last L permits in admission order
 * (a ring; the design is in lib/log.c).  A request for n permits at time T
 * passes when the n-th oldest of those L times is at most T - W (or fewer
 * than L - n + 1 permits were ever admitted): then at most L - n permits
 * lie in (T - W, T], and n more still fit.  A request is one entry per
 * permit, so n > 1 is all or nothing and the n-th oldest entry decides.
 *
 * GUARANTEE (any number of threads, any timing, any alignment):
 *   for every interval [s, s + W) of the log's timeline, the permits of the
 *   admissions whose decision.now_ns lies inside it total at most L (while
 *   set_limit changes L: READINGS ACROSS A CHANGE below).
 *   Admission is one 16-byte CAS on the pair (head, last): the count of
 *   permits and the newest permit's time, so two threads can never both
 *   take the last place; an admission's permits are recorded at its now_ns
 *   (the newest admission's 1 ns later once a change moves the log's time
 *   on: READINGS ACROSS A CHANGE), and times never decrease in admission
 *   order, so "the n-th
 *   oldest of the last L" is always the entry L - n + 1 places back.
 *   tests/core/test_log_threads.c checks exactly this sentence.
 *
 * WORST CASE (what it costs, what a stalled or slow thread can do):
 *   - Memory 8 * (C + 1) bytes (C = config.capacity, default L): one time
 *     per permit the window may hold at the largest limit, plus one
 *     spare slot (an admission writes the previous admission's slots while
 *     every entry a decision may read stays readable; lib/log.c says
 *     why).  L = 2^24 costs 128 MiB.
 *   - A refusal writes nothing (a filled decision may store the search
 *     hint, a word no decision depends on).  An admission of n makes the
 *     previous admission's slots (up to C) hold their time, and leaves its
 *     own n to the next admission: O(n) per admission, O(1) per permit.
 *     Filling a decision (d != NULL) adds a search of the ring for
 *     `remaining`: two loads when the window's boundary has not moved
 *     since the last decision, O(log d) for a move of d entries (O(log L)
 *     at most).
 *   - A thread stalled anywhere in a call holds nothing: the only write
 *     that admits is the pair CAS, which fails when it resumes if anything
 *     was admitted meanwhile (the 63-bit count it read has moved), and it
 *     decides again, on the pair that failed CAS handed back (read whole,
 *     in one atomic access).  It can never admit on the basis of a slot that has
 *     since been reused.  The writes it makes before that CAS (the
 *     previous admission's slots, a batch marker) only ever store the
 *     right time into a slot, or nothing ("raise only": lib/log.c proves
 *     it), however old the pair it read.  There is no write after the
 *     CAS: an admission whose slots are not written yet is the log's
 *     normal state (their time is in the pair), so nothing waits for it.
 *   - An admission is two read-modify-writes on shared lines: the raise of
 *     the previous admission's slot (none when another thread already
 *     wrote it) and the pair CAS; plus one more for n > 1 (the batch
 *     marker).  A mutex-protected log pays two (lock, unlock).  Many
 *     threads admitting at once contend on one cache line (head, last) and
 *     on the ring's newest line; refusals share them read-only.
 *     docs/performance.md has the figures.
 *   - tests/core/test_log_stall.c stops a thread just before each of its
 *     admission's writes (the previous slot, the batch marker, the pair)
 *     and checks that the other threads' decisions, refunds and
 *     available() all return, exact, while it is stopped; and stops a
 *     helper holding an old pair while others wrap the ring, and checks
 *     that it writes nothing wrong when it resumes.
 *   - NOT a fairness guarantee: a thread may keep losing the admission CAS
 *     to others (lock-free, not wait-free).  It does not lose forever:
 *     BOUNDED RETRIES below.  The pause after a lost CAS favours the
 *     thread that won (it admits again on lines it holds), so under a
 *     sustained storm of admissions a thread that has lost several times
 *     in a row is likely to reach the bound: a refusal with
 *     retry_after_ns = 0 that took nothing.
 *
 * BOUNDED RETRIES: every call returns after a bounded number of steps,
 *   whatever other threads do or fail to do (stop, die, be SIGSTOPped at
 *   any instruction).  A decision and an available() each make at most 64
 *   attempts; an attempt fails only when another thread admitted
 *   meanwhile (the pair moved), never because one is stalled (no call
 *   waits for another).  After a lost pair CAS a decision pauses before
 *   its next attempt: 1, 2, 4, ... up to 64 pause instructions, so at
 *   most 64 x 64 in a call, waiting for no thread.  A refund is one
 *   load.  After 64 failed attempts the call gives up with an outcome
 *   that never admits more than an exact decision:
 *     acquire: a refusal (return 0) that took nothing, with
 *       retry_after_ns = 0 (the limit did not decide it: try again at
 *       once), remaining = 0, reset_ns = W (an upper bound) and now_ns the
 *       log's time;
 *     available: 0.
 *   The bound on one attempt's slot CASes (64 failures) is for writers
 *   that are not this log's calls (memory shared with another process and
 *   rewritten there): this log's own calls fail such a CAS only with a
 *   spurious failure of a weak CAS or when another thread writes the same
 *   time first (which ends it).  Such an attempt fails and takes nothing.
 *   tests/core/test_log_stall.c forces each give-up with a stall re-armed
 *   before every write of the call.
 *
 * FORK AND SHARED MEMORY: the log owns no thread and no lock, and no
 *   call holds anything between two instructions, so a child forked while
 *   a thread of the parent is inside a call, or a process killed inside
 *   one, leaves a log every other call uses as it is.  Memory rewritten by
 *   another process can make answers wrong but never makes a call crash
 *   (every index is reduced to the ring) or spin (BOUNDED RETRIES).
 *
 * SET_LIMIT (sluice_log_set_limit(), safe while decisions run): a change
 *   keeps every recorded time.  Nothing counted is forgotten and nothing
 *   is minted: the permits in the window stay counted against the new
 *   limit, so lowering L below them refuses every request until enough of
 *   them leave the window (retry_after_ns says when), and raising it
 *   admits just the difference.  The ring holds C + 1 times for the
 *   capacity C given at init (config.capacity, default L), so a limit
 *   can be raised up to C without allocating.  A decision decides on the
 *   L-th newest entry for the L it is judged against and reports it in
 *   decision.limit.  A request above that limit is SLUICE_ETOOBIG.  The
 *   limit is the only setter: a log has no rate or burst (the generic
 *   handle answers SLUICE_ENOTSUP for those).
 *
 * READINGS ACROSS A CHANGE: a change that alters the limit moves the log's
 *   time on by 1 ns, with nothing admitted: it is stamped t + 1, t the
 *   newest time the log has recorded, and the newest admission's permits
 *   are recorded at t + 1 from then on (they stay in the window 1 ns
 *   longer: fewer admissions).  It is in force from its stamp until the
 *   next change's, both included.  Every decision whose pair CAS comes
 *   after the stamp is decided at a time >= t + 1 (a reading older than
 *   the log's time is used as that time), on a limit read after the pair
 *   it replaces; a decision that read the pair before fails its CAS and
 *   decides again.  A lowering is stored just before the stamp and a
 *   raise just after it, so a decision in between is judged against the
 *   lower of the two.  So no admission is judged against a limit above
 *   the one in force at its now_ns, and across any sequence of changes
 *   and any interleaving of readings (a decision stalled for any time
 *   between its clock read and its CAS included) the GUARANTEE holds for
 *   every [s, s + W) with L = the largest limit in force in it.  At the
 *   last time, 2^64 - 1, the time cannot move: a change is stamped there,
 *   where every decision already is.  set_limit calls serialise among
 *   themselves (SLUICE_LOG_WRITER_WAIT_NS); decisions never wait for them.
 *
 * CLOCK JUMPS: the log keeps `last`, the newest time an admission used, and
 *   a reading older than it is treated as that time (decision.now_ns says
 *   which time was used).  A clock set back by seconds can neither reopen
 *   old places nor shift the log; a forward jump ages every entry, as the
 *   time says.  A fresh log's time is 1 ns: a reading of 0 is used as 1
 *   (the value 0 marks a slot no permit has used yet).  `last` is the
 *   newest admission's own now_ns, changed with head by the admission's
 *   CAS, or moved on by 1 ns alone by set_limit.
 *
 * LIMITS: L in 1..SLUICE_LOG_LIMIT_MAX (2^24); L = 0 is SLUICE_ELIMIT and
 *   an L whose ring would exceed the memory cap is SLUICE_EMEMORY.
 *   W >= 1 ns (SLUICE_EWINDOW) and W >= the clock's resolution
 *   (SLUICE_ERESOLUTION: a window narrower than one clock step would let
 *   L through at every step).  Any 64-bit time; no arithmetic overflows near
 *   2^64.  head counts permits in 63 bits (the low bit marks a batch of
 *   n > 1): at 10^9 permits/s it would reach 2^63 after 292 years.
 *
 * MEMORY: 8 * (C + 1) bytes (C = config.capacity, default L) allocated at
 *   init (one aligned block), plus sizeof(sluice_log_t) = 128 bytes,
 *   aligned to 64 (_Alignas): a caller that allocates it by
 *   sluice_log_size() must keep that alignment (16 bytes at the least: the
 *   pair CAS faults on a misaligned pair).  The cap, 2^24 entries
 *   (128 MiB), is where a sliding log stops being the right tool: its memory grows with
 *   the limit, while sluice/window.h bounds the same rate in 8 bytes per
 *   bucket at the cost of the alignment slack it documents.  The cap also
 *   turns a mistyped limit (10^12 -> 8 TB) into an error at init instead of
 *   an allocation that succeeds lazily (overcommit) and fails under load,
 *   and keeps the remaining-count search within 25 probes.
 */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "common.h"
#include "decision.h"

#define SLUICE_LOG_LIMIT_MAX (1ULL << 24)

/* set_limit gives up (SLUICE_ETIMEDOUT) after waiting this long for a
 * concurrent set_limit (one stopped mid-change) to finish. */
#define SLUICE_LOG_WRITER_WAIT_NS 1000000000ULL

typedef struct sluice_log_config {
	uint64_t limit;              /* L: permits in any interval of W, 1..2^24 */
	uint64_t window_ns;          /* W: >= 1 and >= the clock's resolution    */
	const sluice_clock_t *clock; /* NULL: &sluice_clock_cached               */
	uint64_t capacity;           /* C: the largest limit set_limit may set,
	                              * L..2^24; 0 = L.  The ring is sized for it */
} sluice_log_config_t;

typedef struct sluice_log {
	/* written only by sluice_log_set_limit(); each attempt of a decision
	 * reads it after the pair (READINGS ACROSS A CHANGE) */
	_Atomic uint64_t limit;      /* L                                        */
	/* read-only after init */
	uint64_t capacity;           /* C >= every L                             */
	uint64_t window_ns;          /* W                                        */
	uint64_t slots;              /* M = C + 1                                */
	uint64_t slots_inv;          /* floor((2^64 - 1) / M): q % M by multiplying */
	const sluice_clock_t *clock;
	_Atomic uint64_t *times;     /* permit q's time lives in times[q % slots] */
	_Atomic uint32_t writer;     /* set_limit serialisation flag            */
	/* private: read by every decision, written by every admission.
	 * head and last are one 16-byte pair, changed together by one
	 * double-width CAS (lib/log.c, DESIGN) */
	_Alignas(SLUICE_CACHELINE) _Atomic uint64_t head; /* 2 * permits admitted
	                              * + 1 when the newest admission took n > 1 */
	_Atomic uint64_t last;       /* the newest permit's time (>= 1)          */
	_Atomic uint64_t bstart;     /* first permit of the newest n > 1 batch   */
	_Atomic uint64_t hint;       /* where the window's boundary was last seen
	                              * (a search's starting point, any value) */
} sluice_log_t;

/*
 * sluice_log_init - validate @cfg and allocate the ring (8 * (C + 1) bytes).
 * @lg: caller-allocated.  @cfg: the configuration.
 *
 * Not thread-safe for the same @lg; allocates.  On success every slot is
 * empty and the log's time is 1 ns.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ECLOCK, SLUICE_ELIMIT (L = 0, or
 * a capacity below L), SLUICE_EMEMORY (L or the capacity above
 * SLUICE_LOG_LIMIT_MAX), SLUICE_EWINDOW (W = 0),
 * SLUICE_ERESOLUTION (W below the clock's resolution), SLUICE_ENOMEM.
 * On error @lg is left untouched and nothing is allocated.
 */
SLUICE_NODISCARD SLUICE_API int sluice_log_init(sluice_log_t *lg, const sluice_log_config_t *cfg);
/* sluice_log_config_check - what sluice_log_init() returns for @cfg,
 * from init's own validator, with no memory and no limiter (common.h,
 * CONFIG CHECKS): 0 or the same code, never SLUICE_ENOMEM. */
SLUICE_NODISCARD SLUICE_API int sluice_log_config_check(const sluice_log_config_t *cfg);

/*
 * sluice_log_destroy - free the ring.  NULL-safe.  No decision or refund may
 * be running on @lg, and none may start afterwards.
 */
SLUICE_API void sluice_log_destroy(sluice_log_t *lg);

/* sluice_log_size - sizeof(sluice_log_t), for FFI callers that allocate it. */
SLUICE_API size_t sluice_log_size(void);

/*
 * sluice_log_acquire_at - take @n permits at time @now, all or nothing.
 * @lg: the log.  @n: 1..L.  @now: ns on the log's clock base (any value; a
 * reading older than the log's newest time is used as that time).
 * @d: NULL, or filled with the decision: now_ns the time used (for an
 * admission, the time its permits were recorded at, until a change moves
 * them 1 ns on); retry_after_ns exact
 * (when the deciding entry leaves the window); remaining how many more
 * permits would pass at now_ns; reset_ns when every permit counted now has
 * left the window.
 *
 * Lock-free; safe from any number of threads; no allocation, no lock.  An
 * admitting thread first writes the previous admission's times into the
 * ring (raise only), then makes its own admission.
 * Ordering: an admission is the CAS on the pair (head, last), a full
 * barrier; it publishes its time and the previous admission's slots to
 * every later decision (acquire loads of head).  A refusal writes nothing
 * (but the search hint) and publishes nothing.  remaining is exact when no other thread
 * decides at the same moment; otherwise it is a snapshot that may be stale.
 * Calling context: any thread; never blocks.
 * Return: 1 admitted, 0 refused (by the limit, or after the retry bound:
 * BOUNDED RETRIES, retry_after_ns = 0), SLUICE_EINVAL (n = 0),
 * SLUICE_ETOOBIG (n above the L this decision read: can pass only once
 * set_limit raises it; @d says retry_after_ns = SLUICE_NEVER).
 */
SLUICE_NODISCARD SLUICE_API int sluice_log_acquire_at(sluice_log_t *lg, uint64_t n, uint64_t now,
                                     sluice_decision_t *d);

/* sluice_log_acquire - as _at, reading the log's clock. */
SLUICE_NODISCARD SLUICE_API int sluice_log_acquire(sluice_log_t *lg, uint64_t n, sluice_decision_t *d);

/*
 * sluice_log_refund - give back @n permits of the admission @admitted
 * describes (its decision as filled by acquire; admitted->now_ns is the time
 * its permits were recorded at).
 *
 * A log never gives permits back: once they have left the window, i.e.
 * the log's time (the newest admission's now_ns) is at least now_ns + W,
 * nothing counts them any more and it returns SLUICE_EEXPIRED (the
 * decision is too old: nothing to give back).  Before that, including
 * the permits of an admission just made, it returns SLUICE_ECANCEL and
 * they stay counted until they leave the window on their own (fewer
 * future admissions, never more): a slot is never lowered, because a
 * thread stalled with an old view of the log could write the old time
 * back (lib/log.c, DESIGN).  So a composite that gives back a log's
 * permits when another limiter refuses gets SLUICE_ECANCEL from the log,
 * and the log keeps counting them.  @admitted must be this log's own
 * decision.
 * Lock-free (one load); safe from any number of threads; no allocation;
 * writes nothing.
 * Return: SLUICE_EEXPIRED (left the window at the log's time: the first
 * time it is, now_ns + W, and every later one; for the newest admission
 * at a change, which the change moved 1 ns on, its last nanosecond in the
 * window answers so too: nothing is given back either way);
 * SLUICE_ECANCEL (still in the window: kept); SLUICE_EINVAL (NULL, n = 0,
 * n above the capacity, or @admitted is not an admission).  Never 0: no
 * refund is exact.
 */
SLUICE_API int sluice_log_refund(sluice_log_t *lg, uint64_t n,
                                 const sluice_decision_t *admitted);

/*
 * sluice_log_available_at - the largest n an acquire at @now would admit
 * right now (0 when none), taking nothing: at T = max(@now, the log's
 * newest time), how many of the last L permits (L the current limit) have
 * left (T - W, T], counting places never used as left.  So it is L minus
 * the permits in the window, or 0 when they are L or more (a lowered
 * limit).  Exact when no admission runs concurrently; otherwise a
 * snapshot.  Lock-free, no allocation; writes nothing but the search
 * hint.  O(log L).
 * Return: 0..limit (0 also after the retry bound: BOUNDED RETRIES).
 */
SLUICE_API uint64_t sluice_log_available_at(sluice_log_t *lg, uint64_t now);

/* sluice_log_available - as _at, reading the log's clock. */
SLUICE_API uint64_t sluice_log_available(sluice_log_t *lg);

/*
 * sluice_log_set_limit - change L to @limit (1..capacity), keeping every
 * recorded time (see SET_LIMIT above), stamped at the log's time + 1 ns
 * (READINGS ACROSS A CHANGE; the same limit again changes nothing).  Safe
 * while decisions and refunds run on any number of threads: a store and
 * one pair CAS, retried only when an admission came in between (each
 * retry is another thread's progress); decisions never wait for it.  Calls
 * serialise among themselves on a flag, waiting with sched_yield at most
 * SLUICE_LOG_WRITER_WAIT_NS: a control-path call.  No allocation: the
 * ring was sized for the capacity at init.  It takes effect at once; its
 * time is the log's own, so there is no _at variant.
 * Return: 0; SLUICE_EINVAL (NULL), SLUICE_ELIMIT (0, or above the
 * capacity the ring was sized for), SLUICE_ETIMEDOUT (another set_limit
 * held the flag that long: stopped mid-change): then nothing changes.
 */
SLUICE_API int sluice_log_set_limit(sluice_log_t *lg, uint64_t limit);

#ifdef SLUICE_INLINE
#include "static/log.h"
#endif

#endif /* SLUICE_LOG_H */
