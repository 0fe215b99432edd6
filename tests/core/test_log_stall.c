/* SPDX-License-Identifier: MIT */
/*
 * test_log_stall.c - the exact log under stalls at exact instructions:
 * a thread stopped anywhere in its admission blocks nobody, and every
 * retry loop gives up after the bound log.h states (BOUNDED RETRIES).
 *
 * Two tools, both single-threaded and deterministic (the "other threads"
 * run inside a signal handler, between one write and the instruction
 * before it; sluice's decision paths take no lock and allocate nothing,
 * which is what lets a handler call them):
 *   - test_stall.h's stall_arm(): one stall, just before the first write
 *     to a chosen word;
 *   - its stall_arm_repeat(): the same, before each of the next writes
 *     to the word, up to a count.  An attack that makes the call's CAS
 *     fail every time shows how many attempts the call makes before it
 *     gives up: exactly the bound, where the code before the bound (an
 *     unbounded for (;;)) went on as long as the attacks did.
 * Skipped where test_stall.h says it cannot work (not x86-64 Linux, or
 * ThreadSanitizer); the plain and ASan+UBSan builds run them.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sluice/error.h"
#include "sluice/log.h"

#include "test_stall.h"

TestSuite(log_stall, .timeout = 60);

/* log.h, BOUNDED RETRIES: 64 attempts (and 64 failed CASes in a help) */
#define TRIES 64
/* attacks offered: more than the bound, so code without one would outlast
 * them and then succeed */
#define OFFERED (TRIES + 8)

static sluice_clock_t mclock;

/* The log on a page of its own: a trapped page must hold no stack, no
 * malloc metadata another call would write. */
static sluice_log_t *make_paged(uint64_t limit, uint64_t window_ns)
{
	cr_assert_leq(sizeof(sluice_log_t), (size_t)sysconf(_SC_PAGESIZE));
	sluice_log_t *lg = stall_page();
	cr_assert_not_null(lg);
	sluice_clock_manual_init(&mclock, 0);
	sluice_log_config_t cfg = { .limit = limit, .window_ns = window_ns, .clock = &mclock };
	int rc = sluice_log_init(lg, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
	return lg;
}

static void free_paged(sluice_log_t *lg)
{
	sluice_log_destroy(lg);
	stall_page_free(lg);
}


/* ---- the retry bound ---------------------------------------------------- */

static sluice_log_t *victim;
static uint64_t attack_t; /* the attackers' reading */
static uint64_t attack_n; /* the permits each attack asks for */
static int attack_bad;    /* an attack's own decision went wrong */

/*
 * What a storm of other threads does between two of the victim's tries:
 * one admission of attack_n permits at attack_t, which moves the pair
 * (head, last), so the victim's pair CAS fails and its next attempt
 * decides on a new pair: every attempt fails, as each is beaten by
 * progress.
 */
static void attack_admit(void *arg)
{
	(void)arg;
	if (sluice_log_acquire_at(victim, attack_n, attack_t, NULL) != 1)
		attack_bad = 1;
}

/* The attacks' victim: a paged log of @limit and @window_ns with one permit
 * admitted at 100; each attack admits @n permits at @t. */
static sluice_log_t *make_victim(uint64_t limit, uint64_t window_ns, uint64_t n, uint64_t t)
{
	if (!stall_supported())
		cr_skip_test("needs x86-64 Linux, not under ThreadSanitizer");
	sluice_log_t *lg = make_paged(limit, window_ns);
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 100, NULL), 1);
	victim = lg;
	attack_n = n;
	attack_t = t;
	attack_bad = 0;
	return lg;
}

/*
 * A decision beaten on every attempt gives up after 64 with the refusal
 * log.h states (retry_after_ns = 0, nothing taken).  The trap is on the
 * pair CAS (head's word), the admission itself.  Code without the bound
 * would outlast the 72 attacks and be admitted.
 */
Test(log_stall, acquire_gives_up_after_the_retry_bound)
{
	sluice_log_t *lg = make_victim(1000, 1000000000ULL, 1, 100);
	sluice_decision_t d;
	memset(&d, 0xa5, sizeof(d));
	stall_arm_repeat(&lg->head, 16, attack_admit, NULL, OFFERED);
	int rc = sluice_log_acquire_at(lg, 1, 100, &d);
	int fired = stall_fired();
	cr_assert_eq(attack_bad, 0, "every attacker was admitted (no one blocked)");
	cr_assert_eq(fired, TRIES, "one attempt per attack, and no more than %d", TRIES);
	cr_assert_eq(rc, 0, "given up: a refusal");
	cr_assert_eq(d.allowed, 0);
	cr_assert_eq(d.limit, 1000);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(d.retry_after_ns, 0, "not the limit's refusal: try again at once");
	cr_assert_eq(d.delay_ns, 0);
	cr_assert_eq(d.reset_ns, 1000000000ULL, "W: an upper bound");
	cr_assert_eq(d.now_ns, 100);
	cr_assert_eq(atomic_load(&lg->head) >> 1, 1 + TRIES, "the refusal took nothing");
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 100, &d), 1, "the storm over: admitted");
	free_paged(lg);
}

/*
 * available() beaten on every attempt: 0, the answer that admits nothing.
 * available() only reads, except `hint` when the window's boundary moved:
 * here every permit is out of the window at its T, so each attack's
 * admission moves the boundary, the next attempt stores the hint (trapped:
 * another admission), and its validation fails.
 */
static void attack_admit_later(void *arg)
{
	(void)arg;
	attack_t += 1000;
	attack_admit(NULL);
}

Test(log_stall, available_gives_up_after_the_retry_bound)
{
	sluice_log_t *lg = make_victim(4, 1000, 1, 100);
	stall_arm_repeat(&lg->hint, sizeof(lg->hint), attack_admit_later, NULL, OFFERED);
	uint64_t got = sluice_log_available_at(lg, 1000000);
	int fired = stall_fired();
	cr_assert_eq(attack_bad, 0);
	cr_assert_eq(fired, TRIES);
	cr_assert_eq(got, 0, "given up");
	cr_assert_eq(sluice_log_available_at(lg, 1000000), 4, "the storm over");
	free_paged(lg);
}

/*
 * The help's raise of a slot gives up after 64 failed CASes: here a writer
 * outside the log's calls (another process rewriting shared memory) moves
 * the slot to another value below the time to write before each CAS.  The
 * attempt fails, the next one meets the same, and after 64 attempts the
 * decision gives up: a refusal that took nothing.  Code without the help
 * bound spins as long as the writer does.
 */
static _Atomic uint64_t *rewritten;

static void attack_rewrite_slot(void *arg)
{
	(void)arg;
	uint64_t v = atomic_load(rewritten);
	atomic_store(rewritten, (v + 1) % 50); /* below 100, never what it read */
}

Test(log_stall, help_gives_up_after_the_retry_bound)
{
	if (!stall_supported())
		cr_skip_test("needs x86-64 Linux, not under ThreadSanitizer");
	sluice_log_t *lg = make_paged(4, 1000);
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 100, NULL), 1);
	rewritten = &lg->times[0]; /* permit 0's slot, written by the next admission */
	cr_assert_eq(atomic_load(rewritten), 0);
	sluice_decision_t d;
	stall_arm_repeat((const void *)rewritten, sizeof(*rewritten), attack_rewrite_slot, NULL,
	                 TRIES * TRIES + 8);
	int rc = sluice_log_acquire_at(lg, 1, 200, &d);
	int fired = stall_fired();
	cr_assert_eq(fired, TRIES * TRIES, "64 CASes in each of 64 attempts, then it gives up");
	cr_assert_eq(rc, 0, "given up: a refusal");
	cr_assert_eq(d.retry_after_ns, 0);
	cr_assert_eq(atomic_load(&lg->head), 2, "nothing taken");
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 200, &d), 1, "the writer gone: admitted");
	cr_assert_eq(atomic_load(rewritten), 100);
	free_paged(lg);
}

/* ---- deciding again on the pair a lost CAS hands back ------------------- */

/*
 * A lost pair CAS hands back the pair it found (read whole by the
 * CMPXCHG16B) and the next attempt decides on it without reading head
 * again.  Here the pair it finds is a batch: A (1 permit at 200) stops just
 * before its pair CAS; meanwhile 3 permits are admitted at 150 in one
 * batch (permits 1-3, bstart = 1, head's batch bit set).  A's CAS fails
 * and returns (2 * 4 + 1, 150); A must read bstart for it (the pair alone
 * does not say where the batch starts), write the whole batch's slots
 * (its help) and admit permit 4 at 200.  The decisions after it prove the
 * slots: at 1100 only permit 0 (at 100) has left.  An attempt that took
 * the returned pair's batch for one permit (b = h - 1, bstart not read)
 * leaves permits 1 and 2 at 0, and available(1100) says 3; one that
 * decided again on its old pair loses every CAS and gives up (rc 0).
 */
Test(log_stall, lost_cas_decides_on_the_returned_batch)
{
	sluice_log_t *lg = make_victim(5, 1000, 3, 150);
	sluice_decision_t d;
	stall_arm(&lg->head, 16, attack_admit, NULL);
	int rc = sluice_log_acquire_at(lg, 1, 200, &d);
	cr_assert_eq(stall_fired(), 1, "A stopped before its pair CAS");
	cr_assert_eq(attack_bad, 0, "the batch was admitted while A was stopped");
	cr_assert_eq(rc, 1, "A admitted on the pair its CAS returned");
	cr_assert_eq(d.now_ns, 200);
	cr_assert_eq(d.remaining, 0, "5 permits in (-800, 200]");
	cr_assert_eq(atomic_load(&lg->head), 5 * 2, "5 permits, the newest batch of one");
	for (int q = 1; q <= 3; q++)
		cr_assert_eq(atomic_load(&lg->times[q]), 150, "the batch's permit %d written by A", q);
	cr_assert_eq(sluice_log_available_at(lg, 1100), 1, "only permit 0 (at 100) left");
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 1100, &d), 1);
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 1100, &d), 0, "permits 1-4 still in");
	cr_assert_eq(d.retry_after_ns, 50, "permit 1 (at 150) leaves at 1150");
	free_paged(lg);
}

/*
 * The same when the returned pair leaves no room: L = 2, one permit at
 * 100; A (1 at 300) stops before its pair CAS while another permit is
 * admitted at 200.  A's retry on the returned pair (2 permits, 200) is a
 * refusal decided by permit 0, exact: retry_after 800 (100 + W - 300),
 * nothing taken.  Deciding again on the old pair would admit a third
 * permit in (-700, 300] if its CAS could succeed; it cannot, so such code
 * gives up after 64 lost CASes with retry_after 0, which fails this test.
 */
Test(log_stall, lost_cas_refuses_exactly_on_the_returned_pair)
{
	sluice_log_t *lg = make_victim(2, 1000, 1, 200);
	sluice_decision_t d;
	stall_arm(&lg->head, 16, attack_admit, NULL);
	int rc = sluice_log_acquire_at(lg, 1, 300, &d);
	cr_assert_eq(stall_fired(), 1, "A stopped before its pair CAS");
	cr_assert_eq(attack_bad, 0);
	cr_assert_eq(rc, 0, "2 permits in (-700, 300]: refused");
	cr_assert_eq(d.retry_after_ns, 800, "permit 0 (at 100) leaves at 1100");
	cr_assert_eq(d.now_ns, 300);
	cr_assert_eq(d.reset_ns, 900, "permit 1 (at 200) leaves at 1200");
	cr_assert_eq(atomic_load(&lg->head), 2 * 2, "A took nothing");
	cr_assert_eq(atomic_load(&lg->times[1]), 0, "a refusal writes no slot");
	free_paged(lg);
}

/* ---- the helping rule --------------------------------------------------- */

/*
 * A helper stalled with an old pair writes nothing wrong when it resumes.
 * Thread A reads the pair (1 permit, at 100) and stops just before raising
 * permit 0's slot to 100.  Meanwhile the others admit 6 permits, later,
 * so the ring (M = 5) wraps: permit 5's time (2300) is in that slot.  A
 * resumes: its raise must not write 100 over 2300 (a raise only), and its
 * pair CAS fails, so it decides again on the new pair.  The decisions
 * after it prove the slot: a request whose deciding entry is permit 5 is
 * refused until 2300 + W.  A helper that checked the slot and then stored
 * (not a CAS) would put 100 there and admit at 2400.
 */
/* The log the attacks below decide on (L = 4, W = 1000): one permit
 * already admitted at 100, no attack failed yet. */
static sluice_log_t *victim_log(void)
{
	sluice_log_t *lg = make_paged(4, 1000);
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 100, NULL), 1);
	victim = lg;
	attack_bad = 0;
	return lg;
}

static void attack_wrap(void *arg)
{
	(void)arg;
	static const uint64_t at[] = { 1200, 1300, 1400, 1500, 2300, 2400 };
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		if (sluice_log_acquire_at(victim, 1, at[i], NULL) != 1)
			attack_bad = 1;
}

Test(log_stall, stale_helper_writes_nothing_wrong)
{
	if (!stall_supported())
		cr_skip_test("needs x86-64 Linux, not under ThreadSanitizer");
	sluice_log_t *lg = victim_log();
	stall_arm(&lg->times[0], sizeof(uint64_t), attack_wrap, NULL);
	sluice_decision_t d;
	int rc = sluice_log_acquire_at(lg, 1, 2400, &d);
	cr_assert(stall_fired(), "A stopped before its raise");
	cr_assert_eq(attack_bad, 0, "nobody waited for A");
	/* 7 permits: 100, 1200, 1300, 1400, 1500, 2300, 2400; A decided
	 * again at 2400: (1400, 2400] holds 1500, 2300, 2400 */
	cr_assert_eq(rc, 1, "A admitted on the new pair");
	cr_assert_eq(d.now_ns, 2400);
	cr_assert_eq(atomic_load(&lg->times[0]), 2300, "permit 5's time, not A's stale 100");
	/* permits 5..8 = 2300, 2400, 2400 (A), and now: permit 5 decides */
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 2500, &d), 1, "4th in (1500, 2500]");
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 3299, &d), 0, "permit 5 (2300) still in");
	cr_assert_eq(d.retry_after_ns, 1, "it leaves at 3300");
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 3300, &d), 1);
	free_paged(lg);
}

/*
 * The same for the batch marker.  A (2 permits at 150) reads the pair at
 * 1 permit and stops just before raising bstart to 1.  Meanwhile one
 * permit is admitted at 200 (permit 1) and a batch of 2 at 300 (permits
 * 2, 3: bstart = 2).  A resumes: its raise must fail (bstart is above 1),
 * or the next helper would take permit 1 for part of the batch and raise
 * its time from 200 to 300.  The decisions after it prove permit 1's
 * time: at 1200 it has left the window (200 + W).  A stale claimant that
 * stored bstart without the raise-only CAS fails this test.
 */
static void attack_batch(void *arg)
{
	(void)arg;
	if (sluice_log_acquire_at(victim, 1, 200, NULL) != 1 ||
	    sluice_log_acquire_at(victim, 2, 300, NULL) != 1)
		attack_bad = 1;
}

Test(log_stall, stale_batch_marker_writes_nothing_wrong)
{
	if (!stall_supported())
		cr_skip_test("needs x86-64 Linux, not under ThreadSanitizer");
	sluice_log_t *lg = victim_log();
	stall_arm(&lg->bstart, sizeof(uint64_t), attack_batch, NULL);
	sluice_decision_t d;
	int rc = sluice_log_acquire_at(lg, 2, 150, &d);
	cr_assert(stall_fired(), "A stopped before its raise of bstart");
	cr_assert_eq(attack_bad, 0, "nobody waited for A");
	cr_assert_eq(rc, 0, "A decided again: permits 0-3 in (-700, 300]");
	cr_assert_eq(d.retry_after_ns, 900, "permit 1 (at 200) leaves at 1200");
	cr_assert_eq(atomic_load(&lg->bstart), 2, "the batch's first permit, not A's stale 1");
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 1100, &d), 1, "permit 0 left at 1100");
	cr_assert_eq(atomic_load(&lg->times[1]), 200, "permit 1 kept its time");
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 1200, &d), 1, "permit 1 left at 1200");
	free_paged(lg);
}

/* ---- a stalled admission blocks nobody ---------------------------------- */

/*
 * Thread A asks for 2 permits at 500 and stops just before one of its
 * writes: the raise of the previous permit's slot (its help), the raise of
 * bstart (n > 1), or the pair CAS (its admission).  While it is stopped,
 * other threads decide, give back and ask available(): every call returns,
 * with the answer an exact log gives.  Then A resumes and decides again.
 * Finally every admission's now_ns is checked against the GUARANTEE (at
 * most L in any [s, s + W)).  There is no write after the pair CAS: an
 * admitted batch whose slots are not written yet is the log's normal
 * state (its time is in the pair), which every decision above reads.
 */
struct stall_point {
	char name[8];
};

ParameterizedTestParameters(log_stall, stalled_admission_blocks_nobody)
{
	static struct stall_point params[] = {
		{ "slot" }, { "bstart" }, { "head" },
	};
	return cr_make_param_array(struct stall_point, params, sizeof(params) / sizeof(params[0]));
}

#define REC_MAX 64
static struct {
	uint64_t t[REC_MAX], n[REC_MAX];
	int count;
	int others_admitted, others_refused, bad;
} rec;

static void record(int rc, uint64_t n, const sluice_decision_t *d)
{
	if (rc == 1 && rec.count < REC_MAX) {
		rec.t[rec.count] = d->now_ns;
		rec.n[rec.count] = n;
		rec.count++;
	}
}

/* L = 4, W = 1000; before A: 1 permit at 100.  A (2 at 500) is stopped
 * before its admission; the others decide at 600, 700. */
static void attack_others(void *arg)
{
	(void)arg;
	sluice_decision_t d;
	int rc = sluice_log_acquire_at(victim, 1, 600, &d);
	record(rc, 1, &d);
	rec.others_admitted += rc == 1;
	rec.others_refused += rc == 0;
	if (rc == 0 && d.retry_after_ns == 0)
		rec.bad = 1; /* gave up: someone blocked it */
	/* a refund of that permit: in the window, so kept; it must return */
	if (rc == 1 && sluice_log_refund(victim, 1, &d) != SLUICE_ECANCEL)
		rec.bad = 1;
	uint64_t av = sluice_log_available_at(victim, 700);
	rc = sluice_log_acquire_at(victim, 1, 700, &d);
	record(rc, 1, &d);
	rec.others_admitted += rc == 1;
	rec.others_refused += rc == 0;
	if ((uint64_t)(rc == 1) != (av >= 1))
		rec.bad = 1; /* available() and the decision disagree */
	if (rc == 0 && d.retry_after_ns == 0)
		rec.bad = 1;
}

ParameterizedTest(struct stall_point *p, log_stall, stalled_admission_blocks_nobody)
{
	if (!stall_supported())
		cr_skip_test("needs x86-64 Linux, not under ThreadSanitizer");
	sluice_log_t *lg = make_paged(4, 1000);
	memset(&rec, 0, sizeof(rec));
	victim = lg;
	sluice_decision_t d;
	int rc = sluice_log_acquire_at(lg, 1, 100, &d);
	cr_assert_eq(rc, 1);
	record(rc, 1, &d);
	const void *word = &lg->head;
	if (strcmp(p->name, "slot") == 0)
		word = &lg->times[0]; /* permit 0's, A's help */
	else if (strcmp(p->name, "bstart") == 0)
		word = &lg->bstart;
	stall_arm(word, sizeof(uint64_t), attack_others, NULL);
	rc = sluice_log_acquire_at(lg, 2, 500, &d);
	cr_assert(stall_fired(), "%s: A stopped there", p->name);
	cr_assert_eq(rec.bad, 0, "%s: every other call returned an exact answer", p->name);
	cr_assert_eq(rec.others_admitted, 2, "%s: nobody waited for A", p->name);
	record(rc, 2, &d);
	/* A decides again on what they left: 1 + 1 + 1 + A's 2 > 4 */
	cr_assert_eq(rc, 0, "%s: A refused on the new pair", p->name);
	cr_assert_eq(d.now_ns, 700, "%s: the log's time", p->name);
	cr_assert_eq(d.retry_after_ns, 400, "%s: permit 0 (at 100) leaves at 1100", p->name);
	cr_assert_eq(atomic_load(&lg->head), 3 * 2, "%s: A took nothing", p->name);
	/* the GUARANTEE over every admission recorded */
	for (int i = 0; i < rec.count; i++) {
		uint64_t in = 0;
		for (int j = 0; j < rec.count; j++)
			if (rec.t[j] >= rec.t[i] && rec.t[j] - rec.t[i] < 1000)
				in += rec.n[j];
		cr_assert_leq(in, 4, "%s: %llu permits in [%llu, +W)", p->name,
		              (unsigned long long)in, (unsigned long long)rec.t[i]);
	}
	free_paged(lg);
}

/* ---- readings across a change ------------------------------------------- */

/*
 * A decision stalled across a change must not be judged against the limit
 * it read before it (log.h, READINGS ACROSS A CHANGE).  The victim reads
 * L = 100; just before its pair CAS the attack lowers L to 10, takes 1 at
 * 1000 (the new limit's first admission) and 10 at 1000 + W, an interval
 * that no longer holds the one at 1000.  The victim's CAS fails; it decides
 * again on the pair handed back, at the log's time 1000 + W: against 10 it
 * is refused; against the 100 it read, [1000 + W, 1000 + 2W) would hold 11.
 */
#define CHANGE_W 1000000ULL
static int change_rc[2];

static void attack_lower_then_fill(void *arg)
{
	sluice_log_t *lg = arg;
	cr_assert_eq(sluice_log_set_limit(lg, 10), 0);
	change_rc[0] = sluice_log_acquire_at(lg, 1, 1000, NULL);
	change_rc[1] = sluice_log_acquire_at(lg, 10, 1000 + CHANGE_W, NULL);
}

Test(log_stall, a_decision_stalled_across_a_change_is_judged_by_the_new_limit)
{
	sluice_log_t *lg = make_victim(100, CHANGE_W, 1, 0);
	stall_arm(&lg->head, 16, attack_lower_then_fill, lg);
	sluice_decision_t d;
	int rc = sluice_log_acquire_at(lg, 1, 500, &d);
	cr_assert(stall_fired(), "the victim never wrote the pair");
	cr_assert_eq(change_rc[0], 1);
	cr_assert_eq(change_rc[1], 1);
	cr_assert_eq(rc, 0, "10 in [1000 + W, 1000 + 2W) against a limit of 10: admitted at %llu "
	             "against d.limit %llu", (unsigned long long)d.now_ns,
	             (unsigned long long)d.limit);
	cr_assert_eq(d.limit, 10);
	cr_assert_eq(d.now_ns, 1000 + CHANGE_W, "judged at the log's time");
	cr_assert_eq(sluice_log_available_at(lg, 1000 + CHANGE_W), 0);
	free_paged(lg);
}

/*
 * A decision in flight across a lowering, with no admission in between:
 * the victim (n = 50) reads L = 100 after the pair; just before its pair
 * CAS the attack lowers L to 10 and nothing else.  The change moves the
 * log's time on (set_limit's re-dating), so the victim's CAS fails and it
 * decides again: 50 is above 10, SLUICE_ETOOBIG.  A set_limit that only
 * stored the limit left the pair as the victim read it: 50 admitted, an
 * interval of W holding 50 while the only limit in force was 10.
 */
static void attack_lower_only(void *arg)
{
	cr_assert_eq(sluice_log_set_limit(arg, 10), 0);
}

Test(log_stall, a_decision_in_flight_across_a_lowering_decides_again)
{
	sluice_log_t *lg = make_victim(100, CHANGE_W, 1, 0);
	stall_arm(&lg->head, 16, attack_lower_only, lg);
	sluice_decision_t d;
	int rc = sluice_log_acquire_at(lg, 50, 5 * CHANGE_W, &d);
	cr_assert(stall_fired(), "the victim never wrote the pair");
	cr_assert_eq(rc, SLUICE_ETOOBIG, "%d: %llu admitted at %llu against d.limit %llu", rc,
	             50ULL, (unsigned long long)d.now_ns, (unsigned long long)d.limit);
	cr_assert_eq(d.limit, 10);
	cr_assert_eq(atomic_load(&lg->head) >> 1, 1, "nothing admitted");
	free_paged(lg);
}

/*
 * A raise whose setter is stopped before it re-dates the log: no decision
 * may see the raise before the change's stamp.  The attack, a decision at
 * an older reading while the setter (L 2 -> 10) is stopped, is judged
 * against 2 and refused; after the call, at the stamp, the raise admits.
 */
static sluice_decision_t raise_d;
static int raise_rc;

static void attack_decide_old_reading(void *arg)
{
	raise_rc = sluice_log_acquire_at(arg, 5, 50, &raise_d);
}

Test(log_stall, a_raise_stopped_before_its_stamp_is_not_seen_early)
{
	if (!stall_supported())
		cr_skip_test("needs x86-64 Linux, not under ThreadSanitizer");
	sluice_log_t *lg = stall_page();
	cr_assert_not_null(lg);
	sluice_log_config_t cfg = { .limit = 2, .window_ns = CHANGE_W, .clock = &mclock,
		                    .capacity = 10 };
	cr_assert_eq(sluice_log_init(lg, &cfg), 0);
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 100, NULL), 1);
	stall_arm(&lg->head, 16, attack_decide_old_reading, lg);
	cr_assert_eq(sluice_log_set_limit(lg, 10), 0);
	cr_assert(stall_fired(), "the setter never moved the pair");
	cr_assert_eq(raise_rc, SLUICE_ETOOBIG, "admitted at %llu against d.limit %llu, before "
	             "the change", (unsigned long long)raise_d.now_ns,
	             (unsigned long long)raise_d.limit);
	cr_assert_eq(raise_d.limit, 2);
	sluice_decision_t d;
	cr_assert_eq(sluice_log_acquire_at(lg, 5, 50, &d), 1, "after it: the raise");
	cr_assert_eq(d.limit, 10);
	free_paged(lg);
}
