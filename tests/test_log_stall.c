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
 *   - rtrap_arm() below: the same, but re-armed after every interrupted
 *     write retires, up to a count.  An attack that makes the call's CAS
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

/* log.h, BOUNDED RETRIES: 64 attempts (and 64 slot CASes in a finish) */
#define TRIES 64
/* attacks offered: more than the bound, so code without one would outlast
 * them and then succeed */
#define OFFERED (TRIES + 8)

static sluice_clock_t mclock;

/* The log on a page of its own: a trapped page must hold no stack, no
 * malloc metadata another call would write. */
static sluice_log_t *make_paged(uint64_t limit, uint64_t window_ns)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	cr_assert_leq(sizeof(sluice_log_t), page);
	sluice_log_t *lg = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	                        -1, 0);
	cr_assert_neq(lg, MAP_FAILED);
	sluice_clock_manual_init(&mclock, 0);
	sluice_log_config_t cfg = { .limit = limit, .window_ns = window_ns, .clock = &mclock };
	int rc = sluice_log_init(lg, &cfg);
	cr_assert_eq(rc, 0, "init: %s", sluice_strerror(rc));
	return lg;
}

static void free_paged(sluice_log_t *lg)
{
	sluice_log_destroy(lg);
	munmap(lg, (size_t)sysconf(_SC_PAGESIZE));
}

/* ---- rtrap: a stall at every write to one word, up to a count ----------- */

#if defined(__x86_64__) && defined(__linux__)
static struct {
	uintptr_t target, page;
	size_t len;
	void (*attack)(void);
	volatile sig_atomic_t fired, max, stepping;
} rt;

static void rt_protect(int prot)
{
	mprotect((void *)rt.page, (size_t)sysconf(_SC_PAGESIZE), prot);
}

static void rt_on_segv(int sig, siginfo_t *si, void *uc_)
{
	(void)sig;
	ucontext_t *uc = uc_;
	uintptr_t a = (uintptr_t)si->si_addr;
	rt_protect(PROT_READ | PROT_WRITE); /* the attack writes the page too */
	if (a >= rt.target && a < rt.target + rt.len && rt.fired < rt.max) {
		rt.fired++;
		rt.attack();
	}
	/* Let the interrupted write retire (against what the attack left),
	 * then protect the page again for the next one. */
	rt.stepping = 1;
	uc->uc_mcontext.gregs[REG_EFL] |= 0x100; /* TF */
}

static void rt_on_trap(int sig, siginfo_t *si, void *uc_)
{
	(void)sig;
	(void)si;
	ucontext_t *uc = uc_;
	if (!rt.stepping)
		return;
	rt.stepping = 0;
	uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)0x100;
	if (rt.fired < rt.max)
		rt_protect(PROT_READ);
}

static void rtrap_arm(const void *word, size_t len, void (*attack)(void), int max)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sa.sa_sigaction = rt_on_segv;
	sigaction(SIGSEGV, &sa, NULL);
	sa.sa_sigaction = rt_on_trap;
	sigaction(SIGTRAP, &sa, NULL);
	uintptr_t pagesz = (uintptr_t)sysconf(_SC_PAGESIZE);
	rt.target = (uintptr_t)word;
	rt.len = len;
	rt.page = (uintptr_t)word & ~(pagesz - 1);
	rt.attack = attack;
	rt.fired = 0;
	rt.max = max;
	rt.stepping = 0;
	rt_protect(PROT_READ);
}

/* Disarm; returns how many attacks ran. */
static int rtrap_done(void)
{
	int fired = rt.fired;
	rt.max = 0;
	rt_protect(PROT_READ | PROT_WRITE);
	return fired;
}
#else
static void rtrap_arm(const void *word, size_t len, void (*attack)(void), int max)
{
	(void)word;
	(void)len;
	(void)attack;
	(void)max;
}
static int rtrap_done(void) { return 0; }
#endif

/* ---- the retry bound ---------------------------------------------------- */

static sluice_log_t *victim;
static uint64_t attack_t; /* the attackers' reading */
static int attack_bad;    /* an attack's own decision went wrong */

/*
 * What a storm of other threads does between two of the victim's tries:
 * one decision (which finishes the half-written admission the victim is
 * helping, and is admitted), then another thread claims a permit and
 * stops before writing it (head moves; `last` is already >= its time).
 * The victim's CAS on tail then fails, and its next attempt finds a new
 * half-written admission: every attempt fails, as each is beaten by
 * progress.
 */
static void attack_claim_and_stall(void)
{
	if (sluice_log_acquire_at(victim, 1, attack_t, NULL) != 1)
		attack_bad = 1;
	atomic_fetch_add(&victim->head, 1);
}

/* A log with L = 1000 and W = 1 s, one permit at @t, and a claimant
 * stopped before writing its permit (at a time <= t). */
static sluice_log_t *storm_log(uint64_t t)
{
	sluice_log_t *lg = make_paged(1000, 1000000000ULL);
	cr_assert_eq(sluice_log_acquire_at(lg, 1, t, NULL), 1);
	atomic_fetch_add(&lg->head, 1);
	victim = lg;
	attack_t = t;
	attack_bad = 0;
	return lg;
}

/*
 * A decision beaten on every attempt gives up after 64 with the refusal
 * log.h states (retry_after_ns = 0, nothing taken).  The code before the
 * bound kept trying: it outlasted the 72 attacks and was admitted.
 */
Test(log_stall, acquire_gives_up_after_the_retry_bound)
{
	if (!stall_supported())
		cr_skip_test("needs x86-64 Linux, not under ThreadSanitizer");
	sluice_log_t *lg = storm_log(100);
	sluice_decision_t d;
	memset(&d, 0xa5, sizeof(d));
	rtrap_arm(&lg->tail, sizeof(lg->tail), attack_claim_and_stall, OFFERED);
	int rc = sluice_log_acquire_at(lg, 1, 100, &d);
	int fired = rtrap_done();
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
	/* nothing taken: before it 1 admitted and 1 claimant; each attack
	 * one admitted and one claimant more */
	uint64_t h = atomic_load(&lg->head);
	cr_assert_eq(h, 2 + 2 * TRIES, "the refusal claimed nothing");
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 100, &d), 1, "the storm over: admitted");
	cr_assert_eq(atomic_load(&lg->tail), atomic_load(&lg->head), "pending one finished");
	free_paged(lg);
}

/* A refund beaten on every attempt: SLUICE_ECANCEL, nothing re-dated; the
 * same refund afterwards is exact. */
Test(log_stall, refund_gives_up_after_the_retry_bound)
{
	if (!stall_supported())
		cr_skip_test("needs x86-64 Linux, not under ThreadSanitizer");
	/* the caller's 2 permits at 5000 after an idle log, exact to refund */
	sluice_log_t *lg = make_paged(1000, 1000);
	sluice_decision_t a;
	cr_assert_eq(sluice_log_acquire_at(lg, 2, 5000, &a), 1);
	/* the storm decides at 5500: other permits, in the window */
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 5500, NULL), 1);
	atomic_fetch_add(&lg->head, 1);
	victim = lg;
	attack_t = 5500;
	attack_bad = 0;
	rtrap_arm(&lg->tail, sizeof(lg->tail), attack_claim_and_stall, OFFERED);
	int rc = sluice_log_refund(lg, 2, &a);
	int fired = rtrap_done();
	cr_assert_eq(attack_bad, 0);
	cr_assert_eq(fired, TRIES);
	cr_assert_eq(rc, SLUICE_ECANCEL, "given up: the permits stay counted");
	cr_assert_eq(atomic_load(&lg->times[0]), 5000, "nothing re-dated");
	cr_assert_eq(atomic_load(&lg->times[1]), 5000);
	cr_assert_eq(sluice_log_refund(lg, 2, &a), 0, "the storm over: exact");
	cr_assert_eq(atomic_load(&lg->times[0]), 4000, "re-dated to 5000 - W");
	free_paged(lg);
}

/* available() beaten on every attempt: 0, the answer that admits nothing. */
Test(log_stall, available_gives_up_after_the_retry_bound)
{
	if (!stall_supported())
		cr_skip_test("needs x86-64 Linux, not under ThreadSanitizer");
	sluice_log_t *lg = storm_log(100);
	rtrap_arm(&lg->tail, sizeof(lg->tail), attack_claim_and_stall, OFFERED);
	uint64_t got = sluice_log_available_at(lg, 100);
	int fired = rtrap_done();
	cr_assert_eq(attack_bad, 0);
	cr_assert_eq(fired, TRIES);
	cr_assert_eq(got, 0, "given up");
	cr_assert_eq(sluice_log_available_at(lg, 100), 1000 - (2 + 2 * TRIES), "the storm over");
	free_paged(lg);
}

/*
 * finish() gives up after 64 failed slot CASes.  The attack lowers the
 * claimant's first slot, to another old time, before each of its CASes
 * (what refunds re-dating that slot would do), so every CAS fails with a
 * value that is still "not written".  The claimant is admitted all the
 * same (its claim on head is the admission), reports its reading, and
 * leaves the write to the next decision, which finishes it.  The code
 * before the bound kept trying until the attacks stopped and finished
 * the write itself.
 */
static _Atomic uint64_t *lowered;

static void attack_lower_slot(void)
{
	atomic_fetch_sub(lowered, 1);
}

Test(log_stall, finish_gives_up_and_the_claimant_stays_admitted)
{
	if (!stall_supported())
		cr_skip_test("needs x86-64 Linux, not under ThreadSanitizer");
	/* L = 4, W = 1000: 4 permits at 100 (slots 0-3), one at 1100
	 * (slot 4); the claimant's permit 5 goes to slot 0, which holds 100,
	 * and its deciding entry, permit 1, holds 100 too (out at 1100) */
	sluice_log_t *lg = make_paged(4, 1000);
	cr_assert_eq(sluice_log_acquire_at(lg, 4, 100, NULL), 1);
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 1100, NULL), 1);
	lowered = &lg->times[5 % lg->slots];
	cr_assert_eq(atomic_load(lowered), 100);
	sluice_decision_t d;
	rtrap_arm((const void *)lowered, sizeof(*lowered), attack_lower_slot, OFFERED);
	int rc = sluice_log_acquire_at(lg, 1, 1100, &d);
	int fired = rtrap_done();
	cr_assert_eq(fired, TRIES, "64 slot CASes, then it gives up");
	cr_assert_eq(rc, 1, "the claim is the admission");
	cr_assert_eq(d.now_ns, 1100, "its own reading");
	cr_assert_eq(atomic_load(&lg->head), 6);
	cr_assert_eq(atomic_load(&lg->tail), 5, "its write left to the next decision");
	cr_assert_eq(sluice_log_acquire_at(lg, 1, 1200, &d), 1,
	             "(200, 1200] holds permits 4, 5 at 1100 only");
	cr_assert_eq(atomic_load(lowered), 1100, "finished at the log's time, >= the claimant's");
	cr_assert_eq(atomic_load(&lg->tail), 7);
	cr_assert_eq(atomic_load(&lg->head), 7);
	cr_assert_eq(sluice_log_acquire_at(lg, 2, 1200, &d), 0, "permits 4, 5, 6 in the window: 2 more do not fit");
	free_paged(lg);
}

/* ---- a stalled admission blocks nobody ---------------------------------- */

/*
 * Thread A asks for 2 permits at 500 and stops just before one of its
 * writes: raising `last` (before its claim), the claim on head, its first
 * slot, or tail (its slots written).  While it is stopped, other threads
 * decide, give back and ask available(): every call returns, with the
 * answer an exact log gives.  Then A resumes and reports a time its
 * permits really were recorded at.  Finally every admission's now_ns is
 * checked against the GUARANTEE (at most L in any [s, s + W)).
 */
struct stall_point {
	char name[8];
};

ParameterizedTestParameters(log_stall, stalled_admission_blocks_nobody)
{
	static struct stall_point params[] = {
		{ "last" }, { "head" }, { "slot" }, { "tail" },
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

/* L = 4, W = 1000; before A: 1 permit at 100.  A (2 at 500) is claimed
 * or not depending on where it stopped; the others decide at 600, 700. */
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
	/* a refund of that permit: exact or not, it must return */
	if (rc == 1) {
		int r = sluice_log_refund(victim, 1, &d);
		if (r != 0 && r != SLUICE_ECANCEL)
			rec.bad = 1;
		if (r == 0)
			rec.count--; /* given back: not an admission any more */
	}
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
	const void *word = &lg->last;
	if (strcmp(p->name, "head") == 0)
		word = &lg->head;
	else if (strcmp(p->name, "slot") == 0)
		word = &lg->times[1 % lg->slots]; /* A's first permit is permit 1 */
	else if (strcmp(p->name, "tail") == 0)
		word = &lg->tail;
	stall_arm(word, sizeof(uint64_t), attack_others, NULL);
	rc = sluice_log_acquire_at(lg, 2, 500, &d);
	cr_assert(stall_fired(), "%s: A stopped there", p->name);
	cr_assert_eq(rec.bad, 0, "%s: every other call returned an exact answer", p->name);
	cr_assert_eq(rec.others_admitted + rec.others_refused, 2);
	record(rc, 2, &d);
	if (strcmp(p->name, "last") == 0 || strcmp(p->name, "head") == 0) {
		/* stopped before its claim: the others took places, A decides
		 * again on what they left (4 places: 1 + 2 + A's 2 > 4) */
		cr_assert_eq(rec.others_admitted, 2, "%s: nobody waited for A", p->name);
	} else {
		/* claimed: A's 2 count, the others see them (1 + 2 + 1 = 4) */
		cr_assert_eq(rc, 1, "%s: A's claim is its admission", p->name);
		cr_assert_geq(d.now_ns, 500);
		cr_assert_eq(rec.others_admitted, 1, "%s: one place was left", p->name);
	}
	cr_assert_eq(atomic_load(&lg->tail), atomic_load(&lg->head), "nothing left half-written");
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
