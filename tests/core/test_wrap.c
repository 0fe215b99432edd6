/* SPDX-License-Identifier: MIT */
/*
 * test_wrap.c - the fixed window and the ring across 2^32 epochs: a
 * decision, a lease take or a refund stalled between its reads and its
 * write while the limiter goes round 2^32 buckets, and refunds of any age.
 *
 * Each attack is the one that broke the 32-bit tags: the stalled thread's
 * CAS finds a word that looks exactly like the one it read (same 32-bit
 * tag, same count) but belongs to an epoch 2^32 later.  The stall is
 * deterministic (test_stall.h: just before the thread's first write to
 * the word, after all its reads), so every run hits the window the attack
 * needs.  Each test checks the header's bound on the epochs involved:
 * never more than L admitted, however long the stall.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <sys/mman.h>

#include "sluice/sluice.h"
#include "sluice/static/stripe.h" /* sluice__stripe_pick */

#include "test_gcra_forge.h"
#include "test_stall.h"

#define L 100
#define WRAP (1ULL << 32)

static sluice_clock_t mclock;

static void need_stall(void)
{
	if (!stall_supported())
		cr_skip_test("the stall needs x86-64 Linux");
}

/* A caller-allocated limiter on a page of its own, so protecting its page
 * protects nothing else (never the stack the signal handler runs on). */
static void *own_page(size_t size)
{
	cr_assert_leq(size, (size_t)sysconf(_SC_PAGESIZE));
	void *p = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	return p;
}

static void pin_to_this_cpu(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(sched_getcpu(), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void make_ring(sluice_window_t *w, uint64_t width, uint32_t lease)
{
	sluice_clock_manual_init(&mclock, 0);
	sluice_window_config_t cfg = {
		.limit = L,
		.window_ns = width,
		.buckets = 1,
		.clock = &mclock,
		.lease = lease,
	};
	cr_assert_eq(sluice_window_init(w, &cfg), 0);
}

static sluice_fixed_t *make_fixed(void)
{
	sluice_fixed_t *f = own_page(sizeof(*f));
	sluice_clock_manual_init(&mclock, 0);
	sluice_fixed_config_t cfg = { .limit = L, .window_ns = 1, .clock = &mclock };
	cr_assert_eq(sluice_fixed_init(f, &cfg), 0);
	return f;
}

/* Epoch H (W = 1 ns, so reading == epoch): it holds L - 1 when the stalled
 * decision reads it. */
#define H 5ULL

/* ------------------------------------------------------------------ */
/* A decision stalled between its reads and its CAS (issue item 1). */

/* Go round the ring to the bucket just before H + 2^32, so that H + 2^32
 * then opens in the usual way, reusing H's slot and 32-bit tag. */
static void ring_go_round(sluice_window_t *w, uint64_t width)
{
	(void)sluice_window_available_at(w, (H + WRAP - 1) * width);
}

/* While the decision is stopped: fill H to L, open H + 2^32 (same slot,
 * same 32-bit tag) and bring its count back to L - 1, the value read. */
static void attack_ring_refill(void *arg)
{
	sluice_window_t *w = arg;
	cr_assert_eq(sluice_window_acquire_at(w, 1, H, NULL), 1);
	ring_go_round(w, 1);
	cr_assert_eq(sluice_window_acquire_at(w, L - 1, H + WRAP, NULL), 1);
}

Test(wrap, ring_decision_stalled_across_2_32_buckets)
{
	need_stall();
	sluice_window_t w;
	make_ring(&w, 1, 0);
	cr_assert_eq(sluice_window_acquire_at(&w, L - 1, H, NULL), 1);
	stall_arm(&w.slots[H & w.mask].word, 8, attack_ring_refill, &w);
	sluice_decision_t d;
	int rc = sluice_window_acquire_at(&w, 1, H, &d);
	cr_assert(stall_fired(), "the decision never wrote the bucket word");
	/* Epoch H already holds L: an admission reported in it makes L + 1.
	 * (Its CAS did hit a word, H + 2^32's, which then holds L.) */
	cr_assert_eq(rc, 0, "admitted at %llu, in an epoch already holding L",
	             (unsigned long long)d.now_ns);
	cr_assert_eq(d.allowed, 0);
	cr_assert_eq(sluice_window_available_at(&w, H + WRAP), 0, "L counted: none available");
	cr_assert_eq(sluice_window_acquire_at(&w, 1, H + WRAP, NULL), 0);
	sluice_window_destroy(&w);
}

static void attack_fixed_refill(void *arg)
{
	sluice_fixed_t *f = arg;
	cr_assert_eq(sluice_fixed_acquire_at(f, 1, H, NULL), 1);
	cr_assert_eq(sluice_fixed_acquire_at(f, L - 1, H + WRAP, NULL), 1);
}

Test(wrap, fixed_decision_stalled_across_2_32_windows)
{
	need_stall();
	sluice_fixed_t *f = make_fixed();
	cr_assert_eq(sluice_fixed_acquire_at(f, L - 1, H, NULL), 1);
	stall_arm(&f->word, 8, attack_fixed_refill, f);
	sluice_decision_t d;
	int rc = sluice_fixed_acquire_at(f, 1, H, &d);
	cr_assert(stall_fired(), "the decision never wrote the count word");
	cr_assert_eq(rc, 0, "admitted at %llu, in a window already holding L",
	             (unsigned long long)d.now_ns);
	cr_assert_eq(sluice_fixed_acquire_at(f, 1, H + WRAP, NULL), 0);
	munmap(f, (size_t)sysconf(_SC_PAGESIZE));
}

/* ------------------------------------------------------------------ */
/* A lease take stalled between its bucket CAS and its deposit (item 2). */

#define LW 1000ULL /* lease ring: 1 bucket of 1 us */

/* While the taker is stopped: go round 2^32 buckets and fill the bucket
 * with the same 32-bit tag, taking no lease (n = L leaves no room). */
static void attack_lease(void *arg)
{
	sluice_window_t *w = arg;
	ring_go_round(w, LW);
	cr_assert_eq(sluice_window_acquire_at(w, L, (H + WRAP) * LW, NULL), 1);
}

Test(wrap, lease_deposited_after_2_32_buckets_is_not_spent_there)
{
	need_stall();
	pin_to_this_cpu();
	sluice_window_t w;
	make_ring(&w, LW, 64);
	struct sluice_window_cell *cell = &w.cells[sluice__stripe_pick(w.cell_mask)];
	stall_arm(cell, sizeof(*cell), attack_lease, &w);
	cr_assert_eq(sluice_window_acquire_at(&w, 1, H * LW, NULL), 1); /* takes a lease */
	cr_assert(stall_fired(), "the take never wrote its cell");
	uint64_t extra = 0;
	for (int i = 0; i < 200; i++)
		extra += (uint64_t)sluice_window_acquire_at(&w, 1, (H + WRAP) * LW + 1, NULL);
	cr_assert_eq(extra, 0, "bucket H + 2^32 held L and admitted %llu more from H's lease",
	             (unsigned long long)extra);
	sluice_window_destroy(&w);
}

/* ------------------------------------------------------------------ */
/* Refunds of any age (item 3), and refunds stalled across 2^32. */

Test(wrap, ring_refund_2_32_buckets_old)
{
	sluice_window_t w;
	make_ring(&w, 1, 0);
	sluice_decision_t a;
	cr_assert_eq(sluice_window_acquire_at(&w, 1, H, &a), 1);
	ring_go_round(&w, 1);
	cr_assert_eq(sluice_window_acquire_at(&w, L, H + WRAP, NULL), 1);
	cr_assert_eq(sluice_window_refund(&w, 1, &a), SLUICE_EEXPIRED, "nothing to give back");
	cr_assert_eq(sluice_window_acquire_at(&w, 1, H + WRAP, NULL), 0,
	             "a refund from 2^32 buckets ago freed a permit now");
	sluice_window_destroy(&w);
}

Test(wrap, fixed_refund_2_32_windows_old)
{
	sluice_fixed_t *f = make_fixed();
	sluice_decision_t a;
	cr_assert_eq(sluice_fixed_acquire_at(f, 1, H, &a), 1);
	cr_assert_eq(sluice_fixed_acquire_at(f, L, H + WRAP, NULL), 1);
	cr_assert_eq(sluice_fixed_refund(f, 1, &a), SLUICE_EEXPIRED, "nothing to give back");
	cr_assert_eq(sluice_fixed_acquire_at(f, 1, H + WRAP, NULL), 0,
	             "a refund from 2^32 windows ago freed a permit now");
	munmap(f, (size_t)sysconf(_SC_PAGESIZE));
}

/* A decision from later than anything the limiter opened is not one of its
 * admissions (a forged or foreign decision): refused, nothing changed. */
Test(wrap, refund_of_a_future_decision)
{
	sluice_fixed_t *f = make_fixed();
	sluice_window_t w;
	make_ring(&w, 1, 0);
	sluice_decision_t a;
	cr_assert_eq(sluice_fixed_acquire_at(f, L, H, NULL), 1);
	cr_assert_eq(sluice_window_acquire_at(&w, L, H, NULL), 1);
	cr_assert_eq(sluice_fixed_acquire_at(f, 1, H + WRAP, &a), 1); /* then time goes back */
	a.now_ns = H + 2 * WRAP;
	cr_assert_eq(sluice_fixed_refund(f, 1, &a), SLUICE_EINVAL);
	cr_assert_eq(sluice_window_refund(&w, 1, &a), SLUICE_EINVAL);
	cr_assert_eq(sluice_window_acquire_at(&w, 1, H, NULL), 0);
	sluice_window_destroy(&w);
	munmap(f, (size_t)sysconf(_SC_PAGESIZE));
}

/* While the refund is stopped: open H + 2^32 and admit 1 there, so the
 * word is back to (tag of H, count 1), exactly what the refund read. */
static void attack_ring_reopen(void *arg)
{
	sluice_window_t *w = arg;
	ring_go_round(w, 1);
	cr_assert_eq(sluice_window_acquire_at(w, 1, H + WRAP, NULL), 1);
}

Test(wrap, ring_refund_stalled_across_2_32_buckets)
{
	need_stall();
	sluice_window_t w;
	make_ring(&w, 1, 0);
	sluice_decision_t a;
	cr_assert_eq(sluice_window_acquire_at(&w, 1, H, &a), 1);
	stall_arm(&w.slots[H & w.mask].word, 8, attack_ring_reopen, &w);
	int rc = sluice_window_refund(&w, 1, &a);
	cr_assert(stall_fired(), "the refund never wrote the bucket word");
	cr_assert_eq(rc, SLUICE_EEXPIRED, "bucket H left the window: %s", sluice_err_name(rc));
	uint64_t admitted = 1; /* the attack's */
	for (int i = 0; i < 2 * L; i++)
		admitted += (uint64_t)sluice_window_acquire_at(&w, 1, H + WRAP, NULL);
	cr_assert_eq(admitted, L, "bucket H + 2^32 admitted %llu with L = %d",
	             (unsigned long long)admitted, L);
	sluice_window_destroy(&w);
}

static void attack_fixed_reopen(void *arg)
{
	sluice_fixed_t *f = arg;
	/* the window before, so H + 2^32 opens fresh: (tag of H, count 1) */
	cr_assert_eq(sluice_fixed_acquire_at(f, 1, H + WRAP - 1, NULL), 1);
	cr_assert_eq(sluice_fixed_acquire_at(f, 1, H + WRAP, NULL), 1);
}

Test(wrap, fixed_refund_stalled_across_2_32_windows)
{
	need_stall();
	sluice_fixed_t *f = make_fixed();
	sluice_decision_t a;
	cr_assert_eq(sluice_fixed_acquire_at(f, 1, H, &a), 1);
	stall_arm(&f->word, 8, attack_fixed_reopen, f);
	int rc = sluice_fixed_refund(f, 1, &a);
	cr_assert(stall_fired(), "the refund never wrote the count word");
	cr_assert_eq(rc, SLUICE_EEXPIRED, "window H is over: %s", sluice_err_name(rc));
	uint64_t admitted = 1;
	for (int i = 0; i < 2 * L; i++)
		admitted += (uint64_t)sluice_fixed_acquire_at(f, 1, H + WRAP, NULL);
	cr_assert_eq(admitted, L, "window H + 2^32 admitted %llu with L = %d",
	             (unsigned long long)admitted, L);
	munmap(f, (size_t)sysconf(_SC_PAGESIZE));
}

/* Readings from the top of the range down to 0 and back: time never runs
 * back, and no window ever holds more than L. */
Test(wrap, readings_near_2_64)
{
	sluice_fixed_t *f = make_fixed();
	sluice_window_t w;
	make_ring(&w, 1, 0);
	uint64_t reads[] = { UINT64_MAX - 1, 0, UINT64_MAX, 1, UINT64_MAX - WRAP, UINT64_MAX };
	uint64_t fixed_in = 0, ring_in = 0;
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
		for (int k = 0; k < L; k++) {
			fixed_in += (uint64_t)sluice_fixed_acquire_at(f, 1, reads[i], NULL);
			ring_in += (uint64_t)sluice_window_acquire_at(&w, 1, reads[i], NULL);
		}
	/* windows UINT64_MAX - 1 and UINT64_MAX: L each, nothing else */
	cr_assert_eq(fixed_in, 2 * L);
	cr_assert_eq(ring_in, 2 * L);
	sluice_window_destroy(&w);
	munmap(f, (size_t)sysconf(_SC_PAGESIZE));
}

/* ------------------------------------------------------------------ */
/* Decay: the word keeps its time relative to an anchor, in 29 bits with a
 * 2-bit tag, so it comes back bit for bit under an anchor R later. */

#define T0 10000000000ULL /* 10 s: even, on every grid */

struct decay_attack {
	sluice_decay_t *x;
	uint64_t r; /* R: the span the word's time field covers */
};

/* While the decision is stopped: fill T0 to L, then jump R on (the count
 * is long forgotten: the anchor jumps exactly R) and admit there what T0
 * held when the decision read it, so the word is back bit for bit. */
static void attack_decay(void *arg)
{
	struct decay_attack *a = arg;
	cr_assert_eq(sluice_decay_acquire_at(a->x, L - 1, T0, NULL), 1);
	cr_assert_eq(sluice_decay_acquire_at(a->x, 1, T0 + a->r, NULL), 1);
}

Test(wrap, decay_decision_stalled_across_an_anchor_wrap)
{
	need_stall();
	sluice_decay_t *x = own_page(sizeof(*x));
	sluice_clock_manual_init(&mclock, 0);
	sluice_decay_config_t cfg = { .limit = L, .half_life_ns = 1000000, .clock = &mclock };
	cr_assert_eq(sluice_decay_init(x, &cfg), 0);
	struct decay_attack a = { x, 1ULL << (29 + x->unit_shift) };
	cr_assert_eq(sluice_decay_acquire_at(x, 1, T0, NULL), 1);
	stall_arm(&x->anchor, 16, attack_decay, &a);
	sluice_decision_t d;
	int rc = sluice_decay_acquire_at(x, 1, T0, &d);
	cr_assert(stall_fired(), "the decision never wrote the state");
	/* T0 holds L: an admission reported at T0 makes L + 1 there. */
	cr_assert(!(rc == 1 && d.now_ns == T0), "admitted at T0, where the count was already L");
	munmap(x, (size_t)sysconf(_SC_PAGESIZE));
}

/* ------------------------------------------------------------------ */
/* GCRA: a seal names its change by the low 32 bits of its era in the TAT;
 * a decision that helps finish a change and stalls before its unseal while
 * 2^32 more changes go by finds the same seal value again. */

struct gcra_attack {
	sluice_gcra_t *g;
	uint64_t era; /* the era the stalled helper is finishing */
	uint64_t later_start;
};

/* While the helper is stopped: the state 2^32 changes later, half done in
 * the same way (same slot parity, same seal value, a later start). */
static void attack_gcra(void *arg)
{
	struct gcra_attack *a = arg;
	uint64_t later = a->era + WRAP;
	struct sluice__gcra_params *slot = &a->g->params[later & 1];
	atomic_store(&slot->era, 0);
	atomic_store(&a->g->era, later - 1);
	gcra_forge_seal(a->g, later, a->later_start);
}

Test(wrap, gcra_unseal_stalled_across_2_32_changes)
{
	need_stall();
	sluice_gcra_t *g = own_page(sizeof(*g));
	sluice_clock_manual_init(&mclock, 0);
	sluice_gcra_config_t cfg = { .rate = 10, .period_ns = 10000000000ULL, .burst = 10,
		                     .clock = &mclock };
	cr_assert_eq(sluice_gcra_init(g, &cfg), 0);
	/* a change to era e + 1, sealed, its writer stopped before the unseal */
	uint64_t e = atomic_load(&g->era);
	gcra_forge_half_done(g, &g->params[e & 1], 1);
	struct gcra_attack a = { g, e + 1, 1000 * 10000000000ULL };
	stall_arm(&g->tat, 16, attack_gcra, &a);
	int helped = sluice_gcra_acquire_at(g, 1, 0, NULL); /* helps, stalls at its unseal */
	cr_assert_geq(helped, 0);
	cr_assert(stall_fired(), "the helper never wrote the TAT");
	/* The change in force is the later one: its start, not era e + 1's
	 * (which would hand out the whole burst again). */
	cr_assert_eq(atomic_load(&g->tat), a.later_start, "the TAT is %llu",
	             (unsigned long long)atomic_load(&g->tat));
	cr_assert_eq(sluice_gcra_acquire_at(g, 1, 0, NULL), 0);
	munmap(g, (size_t)sysconf(_SC_PAGESIZE));
}

/* ------------------------------------------------------------------ */
/* Warm-up: the ticket lives in a 35-bit field beside a 2-bit tag, relative
 * to an anchor: after the anchor moves on by R, the word comes back. */

#define TW (1ULL << 40) /* on every grid warm-up can choose */

struct warmup_attack {
	sluice_warmup_t *w;
	uint64_t r;        /* R: the span the ticket field covers */
	uint64_t ticket;   /* the slot the attack's booking at TW got */
};

/* While the booking is stopped: book the next slot at TW, then jump R on
 * (long cold by then: the anchor jumps exactly R) and book from cold the
 * way the first booking did, so the word is back bit for bit. */
static void attack_warmup(void *arg)
{
	struct warmup_attack *a = arg;
	sluice_decision_t d;
	cr_assert_eq(sluice_warmup_reserve_at(a->w, 1, TW, 100 * 1000000000ULL, &d), 1);
	a->ticket = d.now_ns + d.delay_ns;
	cr_assert_eq(sluice_warmup_reserve_at(a->w, 1, TW + a->r, 100 * 1000000000ULL, NULL), 1);
}

Test(wrap, warmup_booking_stalled_across_an_anchor_wrap)
{
	need_stall();
	sluice_warmup_t *w = own_page(sizeof(*w));
	sluice_clock_manual_init(&mclock, 0);
	sluice_warmup_config_t cfg = { .rate = 1, .period_ns = 1000000000ULL,
		                       .warmup_ns = 10 * 1000000000ULL, .clock = &mclock };
	cr_assert_eq(sluice_warmup_init(w, &cfg), 0);
	struct warmup_attack a = { w, 1ULL << (35 + w->unit_shift), 0 };
	cr_assert_eq(sluice_warmup_reserve_at(w, 1, TW, 100 * 1000000000ULL, NULL), 1);
	stall_arm(&w->anchor, 16, attack_warmup, &a);
	sluice_decision_t d;
	int rc = sluice_warmup_reserve_at(w, 1, TW, 100 * 1000000000ULL, &d);
	cr_assert(stall_fired(), "the booking never wrote the state");
	/* A booking against the old anchor takes the slot the attack took. */
	cr_assert(!(rc == 1 && d.now_ns + d.retry_after_ns == a.ticket),
	          "booked slot %llu twice", (unsigned long long)a.ticket);
	munmap(w, (size_t)sysconf(_SC_PAGESIZE));
}
