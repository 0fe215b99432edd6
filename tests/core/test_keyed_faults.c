/* SPDX-License-Identifier: MIT */
/*
 * test_keyed_faults.c - keyed tables under the faults another thread or
 * process can cause: a decision or a claim stopped at a given instruction
 * (a stall point), a claim killed midway, a header or slots rewritten in
 * shared memory, a writer that never stops changing a word.
 *
 * It links the test-only library (sluice_testing_dep, lib/meson.build):
 * lib/ compiled with SLUICE_TESTING, which turns on the stall points
 * (STALL() in keyed_internal.h) and sluice__keyed_test_stall(), and makes
 * the internals it calls (header_check, lock_take, field_set:
 * SLUICE_TESTABLE in keyed_internal.h) external; the library that other
 * programs link has none of them (test_keyed.c checks).  Every test
 * is deterministic: a stall point runs the interfering operations itself,
 * from the stalled call, and the clock is the caller's (_at).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* SLUICE_TESTING comes from sluice_testing_dep, with lib/ on the path. */
#include "pair_internal.h"
#include "keyed_internal.h"

#include "test_keyed_common.h"
#include "test_rng.h"

TestSuite(keyed_faults, .timeout = 60);

/* The stall point's action: run once, at the first stall point of @point,
 * with the word the stalled call is about to CAS. */
static sluice_keyed_t tk;
static int hook_point;
static void (*hook_action)(_Atomic uint64_t *word);

static void hook(int point, _Atomic uint64_t *word)
{
	if (point != hook_point || !hook_action)
		return;
	void (*act)(_Atomic uint64_t *) = hook_action;
	hook_action = NULL; /* the action's own calls pass the point freely */
	act(word);
}

static void arm(int point, void (*act)(_Atomic uint64_t *))
{
	hook_point = point;
	hook_action = act;
	sluice__keyed_stall_hook = hook;
}

/* ---- claims stopped midway (a killed process) ------------------------------- */

Test(keyed_faults, stopped_claims_are_finished_by_the_same_key)
{
	for (int stop = 1; stop <= 3; stop++) {
		sluice_keyed_t k;
		make(&k, gcra_cfg(8, 1, SEC, 2, SLUICE_KEYED_REJECT));
		cr_assert_eq(sluice__keyed_test_stall(&k, "victim", 6, 0, stop), 0);
		cr_assert_eq(stats(&k).creations, 0);
		/* the next creator of the same key finishes the claim */
		cr_assert_eq(acq(&k, "victim", 2, 0, NULL), 1, "stop %d", stop);
		cr_assert_eq(acq(&k, "victim", 1, 0, NULL), 0, "one state (stop %d)", stop);
		sluice_keyed_stats_t s = stats(&k);
		cr_assert_eq(s.creations, 1);
		cr_assert_eq(s.steals, 0);
		/* and the seven other slots are all usable */
		char name[16];
		for (int i = 0; i < 7; i++) {
			snprintf(name, sizeof(name), "o%d", i);
			cr_assert_eq(acq(&k, name, 1, 0, NULL), 1, "stop %d key %s", stop, name);
		}
		sluice_keyed_destroy(&k);
	}
}

/*
 * Two claims of one key in two slots, and the validation scan that leaves
 * one (keyed_slot.c, "One copy per key").  In a group of 8, the key's
 * first slot in probe order holds another key's claim in progress and its
 * second one a claim whose lease ran out; the others, claims in progress.
 * Creator A scans, picks the second (the only one it may steal) and stops
 * before its claim's CAS.  While it is stopped the first one's lease runs
 * out too, and creator B of the same key takes the first (the earliest it
 * may steal), publishes it and is admitted (burst 1).  Then A claims the
 * second: its validation finds B's live copy earlier in probe order and
 * decides on it, so A is refused.  Without the validation scan A publishes
 * a second copy with a fresh state and is admitted too (shown failing so).
 */
static sluice_keyed_t dup_k;
static int dup_b;
static void dup_second_creator(_Atomic uint64_t *word)
{
	(void)word;
	struct timespec ts = { 0, (long)((SLUICE_KEYED_LEASE_MS + 3 * 17) * MS) };
	nanosleep(&ts, NULL);
	dup_b = acq(&dup_k, "K", 1, 0, NULL);
}

Test(keyed_faults, two_claims_of_one_key_leave_one_copy)
{
	make(&dup_k, gcra_cfg(8, 1, 3600 * SEC, 1, SLUICE_KEYED_REJECT));
	struct kid id;
	cr_assert_eq(make_kid(&dup_k, "K", 1, &id), 0);
	uint64_t now_u = lease_now();
	for (unsigned pos = 0; pos < G; pos++) {
		_Atomic uint64_t *s = slot_at(&dup_k, slot_index(&id, pos));
		/* another key's id: its fingerprint bits flipped */
		uint64_t other = (id.id ^ ((uint64_t)(pos + 1) << 14)) & ID_MASK;
		uint64_t low = pos == 1 ? (now_u - LEASE_UNITS - 2) & UNIT_MASK : now_u;
		atomic_store(&s[0], MK_TAG(K_BUSY, 1, other, low));
	}
	dup_b = 99;
	arm(STALL_CLAIM, dup_second_creator);
	int a = acq(&dup_k, "K", 1, 0, NULL);
	sluice__keyed_stall_hook = NULL;
	cr_assert_eq(dup_b, 1, "B took the first slot and was admitted");
	cr_assert_eq(a, 0, "A decided on B's copy: refused, burst 1");
	int live = 0;
	for (unsigned pos = 0; pos < G; pos++) {
		uint64_t t = atomic_load(&slot_at(&dup_k, slot_index(&id, pos))[0]);
		live += KIND(t) == K_LIVE && (t & ID_MASK) == id.id;
	}
	cr_assert_eq(live, 1, "one live copy of the key");
	cr_assert_eq(acq(&dup_k, "K", 1, 0, NULL), 0, "still one state");
	sluice_keyed_destroy(&dup_k);
}

Test(keyed_faults, stopped_claims_are_stolen_after_the_lease)
{
	sluice_keyed_t k;
	make(&k, gcra_cfg(8, 1, SEC, 2, SLUICE_KEYED_REJECT));
	char name[16];
	for (int i = 0; i < 8; i++) { /* every slot stopped at some step */
		snprintf(name, sizeof(name), "dead%d", i);
		cr_assert_eq(sluice__keyed_test_stall(&k, name, strlen(name), 0, 1 + i % 3), 0);
	}
	cr_assert_eq(acq(&k, "live", 1, 0, NULL), SLUICE_EKEYFULL, "claims in progress");
	struct timespec ts = { 0, (long)((SLUICE_KEYED_LEASE_MS + 3 * 17) * MS) };
	nanosleep(&ts, NULL);
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "live%d", i);
		cr_assert_eq(acq(&k, name, 1, 0, NULL), 1, "%s after the lease", name);
	}
	sluice_keyed_stats_t s = stats(&k);
	cr_assert_eq(s.steals, 8);
	cr_assert_eq(s.occupancy, 8);
	/* a dead claimer's key comes back: no slot of its own is left */
	cr_assert_eq(acq(&k, "dead0", 1, 0, NULL), SLUICE_EKEYFULL);
	sluice_keyed_destroy(&k);
}

Test(keyed_faults, a_retire_without_its_claim_is_claimable_at_once)
{
	sluice_keyed_t k;
	make(&k, gcra_cfg(8, 1, SEC, 2, SLUICE_KEYED_EVICT));
	char name[16];
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "k%d", i);
		cr_assert_eq(acq(&k, name, 2, 0, NULL), 1);
	}
	/* a reclaimer stops after retiring a fresh state (stop 4): the tag
	 * still names the old key, whose state is retired */
	cr_assert_eq(sluice__keyed_test_stall(&k, "newcomer", 8, 3 * SEC, 4), 0);
	cr_assert_eq(stats(&k).reclaims, 1);
	/* the old key is not stuck on its retired slot: it is recreated
	 * (in that slot or by reclaiming another) */
	int found = -1;
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "k%d", i);
		int rc = acq(&k, name, 2, 3 * SEC, NULL);
		cr_assert_eq(rc, 1, "%s", name);
	}
	(void)found;
	/* all keys are at their limit now: the newcomer evicts one */
	cr_assert_eq(acq(&k, "newcomer", 1, 3 * SEC, NULL), 1);
	cr_assert_eq(stats(&k).evictions, 1);
	sluice_keyed_destroy(&k);
}

Test(keyed_faults, floor_protects_a_key_recreated_elsewhere_with_an_old_reading)
{
	/* K's slot is reclaimed at 20 s; K comes back with a reading of
	 * 10.5 s and lands in a slot with no history (a stolen claim of a
	 * never-used slot).  Without the group's floor it would start full at
	 * 10.5 s, right after taking its burst at 10 s. */
	sluice_keyed_t k;
	make(&k, gcra_cfg(8, 1, SEC, 3, SLUICE_KEYED_REJECT));
	cr_assert_eq(sluice__keyed_test_stall(&k, "zombie", 6, 0, 1), 0); /* BUSY, virgin */
	cr_assert_eq(acq(&k, "K", 3, 10 * SEC, NULL), 1); /* TAT 13 s */
	char name[16];
	for (int i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "o%d", i);
		cr_assert_eq(acq(&k, name, 3, 19 * SEC, NULL), 1); /* TAT 22 s */
	}
	cr_assert_eq(acq(&k, "X", 1, 20 * SEC, NULL), 1, "reclaims K's slot");
	cr_assert_eq(stats(&k).reclaims, 1);
	struct timespec ts = { 0, (long)((SLUICE_KEYED_LEASE_MS + 3 * 17) * MS) };
	nanosleep(&ts, NULL); /* the zombie claim becomes stealable */
	uint64_t again = 0;
	for (int i = 0; i < 3; i++)
		again += acq(&k, "K", 1, 10 * SEC + SEC / 2, NULL) == 1;
	cr_assert_eq(stats(&k).steals, 1, "K took the zombie's slot");
	cr_assert_eq(again, 0, "K got %llu more at 10.5 s after 3 at 10 s (bound 3.5)",
	             (unsigned long long)again);
	sluice_keyed_destroy(&k);
}

/* ---- item 1: a decision stalled across 2^32 buckets (WINDOW) -------------- */

static const uint64_t H = 1000; /* the stalled decision's epoch */

static void window_wrap(_Atomic uint64_t *word)
{
	(void)word;
	/* fill epoch H to L = 4, then open H + 2^32 (same bucket word, same
	 * 32-bit tag) and bring its count back to what the stalled decision
	 * read (1) */
	for (int i = 0; i < 3; i++)
		cr_assert_eq(acq(&tk, "x", 1, H, NULL), 1);
	cr_assert_eq(acq(&tk, "x", 1, H, NULL), 0, "H is full");
	/* H + 1 takes the bucket word over (H's is sealed), so that H + 2^32
	 * finds it tagged otherwise and opens it afresh */
	cr_assert_eq(acq(&tk, "x", 1, H + 1, NULL), 1);
	cr_assert_eq(acq(&tk, "x", 1, H + (1ULL << 32), NULL), 1);
}

Test(keyed_faults, window_decision_stalled_across_2_32_buckets_is_refused)
{
	/* W = N = 1 bucket of 1 ns, L = 4: the stalled decision read H's
	 * bucket with count 1; when it resumes, its CAS meets the same word
	 * in H + 2^32.  It must not be admitted in H (which would then hold
	 * L + 1). */
	make(&tk, (sluice_keyed_config_t){ .algo = SLUICE_ALGO_WINDOW, .capacity = 8, .limit = 4,
	     .window_ns = 1, .buckets = 1 });
	cr_assert_eq(acq(&tk, "x", 1, H, NULL), 1);
	arm(STALL_DECIDE, window_wrap);
	sluice_decision_t d;
	int rc = acq(&tk, "x", 1, H, &d);
	cr_assert_null(hook_action, "the stall point was reached");
	cr_assert_eq(rc, 0, "admitted in epoch H, which already holds L = 4 (now_ns %llu)",
	             (unsigned long long)d.now_ns);
	cr_assert_eq(d.allowed, 0);
	sluice__keyed_stall_hook = NULL;
	/* the permit stays counted in H + 2^32 (fewer admissions, never more) */
	cr_assert_eq(acq(&tk, "x", 2, H + (1ULL << 32), NULL), 1);
	cr_assert_eq(acq(&tk, "x", 1, H + (1ULL << 32), NULL), 0, "1 + 1 + 2 = L");
	sluice_keyed_destroy(&tk);
}

/* ---- item 1: a decision stalled across 2^38 windows (FIXED) --------------- */

static const uint64_t FW = 16; /* W; L = 10 needs W >= 16 */

static void fixed_wrap(_Atomic uint64_t *word)
{
	(void)word;
	for (int i = 0; i < 9; i++)
		cr_assert_eq(acq(&tk, "x", 1, H * FW, NULL), 1);
	/* the window 2^38 windows later: the old 38-bit tag repeats */
	cr_assert_eq(acq(&tk, "x", 1, (H + (1ULL << 38)) * FW, NULL), 1);
}

Test(keyed_faults, fixed_decision_stalled_across_2_38_windows_counts_in_the_newest)
{
	make(&tk, (sluice_keyed_config_t){ .algo = SLUICE_ALGO_FIXED, .capacity = 8, .limit = 10,
	     .window_ns = FW });
	cr_assert_eq(acq(&tk, "x", 1, H * FW, NULL), 1);
	arm(STALL_DECIDE, fixed_wrap);
	sluice_decision_t d;
	int rc = acq(&tk, "x", 1, H * FW, &d);
	cr_assert_null(hook_action, "the stall point was reached");
	sluice__keyed_stall_hook = NULL;
	/* window H holds 10 (1 + 9): the resumed decision counts in the
	 * key's newest window or is refused, never in H */
	cr_assert(rc == 0 || d.now_ns / FW != H,
	          "admitted in window H, which already holds L = 10");
	if (rc == 1)
		cr_assert_eq(d.now_ns / FW, H + (1ULL << 38));
	sluice_keyed_destroy(&tk);
}

/* ---- item 5: a claim stopped across 2^15 claims of its slot --------------- */

static uint64_t flood_no;

static void flood(uint64_t n, uint64_t now)
{
	for (uint64_t i = 0; i < n; i++) {
		char name[24];
		snprintf(name, sizeof(name), "f%llu", (unsigned long long)flood_no++);
		int rc = acq(&tk, name, 1, now, NULL);
		cr_assert(rc == 0 || rc == 1, "flood key %s: %s", name, sluice_err_name(rc));
	}
}

static void claims_wrap(_Atomic uint64_t *word)
{
	/* the stalled claim's slot: the one holding @word */
	uint64_t i = (uint64_t)((unsigned char *)word - tk.slots) / tk.slot_bytes;
	_Atomic uint64_t *s = slot_at(&tk, i);
	uint64_t g0 = GEN(atomic_load(&s[0]));
	/* new keys claim the 8 slots until this one's generation is more than
	 * 2^15 ahead (a stalled claimer would take its own gen for the newer
	 * one, modulo 2^16) and it holds a published key */
	for (;;) {
		flood(64, SEC);
		uint64_t t = atomic_load(&s[0]);
		uint64_t ahead = (GEN(t) - g0) & 0xffffu;
		if (ahead > 0x8000u + 64 && KIND(t) == K_LIVE)
			break;
		cr_assert_lt(ahead, 0xf000u, "overshot");
	}
}

Test(keyed_faults, claim_stopped_across_2_15_claims_of_its_slot_never_hangs, .timeout = 30)
{
	/* issue 10 item 5: capacity 8, EVICT, a flood of new keys.  A claim
	 * stops between its check and a key word's CAS while its slot is
	 * claimed 2^15+ times; it resumes.  Before the fix it wrote its stale
	 * word (its gen looked newer modulo 2^16) and every later claim of the
	 * slot spun for ever (this test's timeout).  Now it writes nothing and
	 * every call returns. */
	make(&tk, gcra_cfg(8, 1, SEC, 1, SLUICE_KEYED_EVICT));
	flood(8, SEC);
	arm(STALL_WORD, claims_wrap);
	int rc = acq(&tk, "stalled", 1, SEC, NULL);
	cr_assert_null(hook_action, "the stall point was reached");
	sluice__keyed_stall_hook = NULL;
	cr_assert(rc == 0 || rc == 1, "%s", sluice_err_name(rc));
	/* every slot is claimed many more times, each call returning */
	flood(20000, SEC);
	/* and every key published since is readable: 8 fresh keys, each one
	 * found again by its second request */
	for (int j = 0; j < 8; j++) {
		char name[16];
		snprintf(name, sizeof(name), "last%d", j);
		cr_assert_eq(acq(&tk, name, 1, 5 * SEC, NULL), 1);
	}
	sluice_keyed_stats_t before = stats(&tk);
	for (int j = 0; j < 8; j++) {
		char name[16];
		snprintf(name, sizeof(name), "last%d", j);
		cr_assert_eq(acq(&tk, name, 1, 5 * SEC, NULL), 0, "%s: its state was found", name);
	}
	cr_assert_eq(stats(&tk).creations, before.creations, "no key created twice");
	sluice_keyed_destroy(&tk);
}

/* ---- item 5: a writer that never stops changing a word -------------------- */

static void keep_changing(_Atomic uint64_t *word)
{
	/* re-arm: this runs at every pass of the stall point, and changes the
	 * word the call is about to CAS, so every CAS fails */
	hook_action = keep_changing;
	uint64_t v = atomic_load(word);
	atomic_store(word, v ^ 1);
}

struct hostile_case {
	sluice_keyed_config_t c;
	int point;
	char name[16];
};

Test(keyed_faults, a_writer_that_never_stops_gets_ebusy_not_a_spin, .timeout = 30)
{
	static const struct hostile_case cases[] = {
		{ { .algo = SLUICE_ALGO_GCRA, .capacity = 8, .rate = 1, .period_ns = SEC, .burst = 5 },
		  STALL_DECIDE, "gcra" },
		{ { .algo = SLUICE_ALGO_FIXED, .capacity = 8, .limit = 5, .window_ns = SEC },
		  STALL_DECIDE, "fixed" },
		{ { .algo = SLUICE_ALGO_WINDOW, .capacity = 8, .limit = 5, .window_ns = SEC,
		    .buckets = 4 },
		  STALL_DECIDE, "window" },
		{ { .algo = SLUICE_ALGO_INFLIGHT, .capacity = 8, .limit = 5 }, STALL_DECIDE,
		  "inflight" },
		{ { .algo = SLUICE_ALGO_GCRA, .capacity = 8, .rate = 1, .period_ns = SEC, .burst = 5 },
		  STALL_WORD, "gcra-claim" },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		make(&tk, cases[c].c);
		if (cases[c].point == STALL_DECIDE)
			cr_assert_eq(acq(&tk, "x", 1, SEC, NULL), 1, "%s", cases[c].name);
		arm(cases[c].point, keep_changing);
		sluice_decision_t d;
		int rc = acq(&tk, "x", 1, SEC, &d);
		sluice__keyed_stall_hook = NULL;
		hook_action = NULL;
		if (cases[c].point == STALL_DECIDE) {
			cr_assert_eq(rc, SLUICE_EBUSY, "%s: %s", cases[c].name, sluice_err_name(rc));
			cr_assert_eq(d.allowed, 0);
		} else {
			/* a claim whose key word keeps changing is lost each
			 * round; the call ends (EBUSY) or takes another slot */
			cr_assert(rc == SLUICE_EBUSY || rc == 1, "%s: %s", cases[c].name,
			          sluice_err_name(rc));
		}
		if (cases[c].c.algo == SLUICE_ALGO_INFLIGHT) {
			/* and a release under the same writer */
			arm(STALL_DECIDE, keep_changing);
			rc = sluice_keyed_release(&tk, "x", 1, 1);
			sluice__keyed_stall_hook = NULL;
			hook_action = NULL;
			cr_assert(rc == SLUICE_EBUSY || rc == SLUICE_ERELEASE, "release: %s",
			          sluice_err_name(rc));
		}
		sluice_keyed_destroy(&tk);
	}
}

/* ---- forged slots ------------------------------------------------------------ */

Test(keyed_faults, forged_slots_never_crash_or_hang, .timeout = 60)
{
	/* Every word of every slot (tags, states, key words, buckets) and the
	 * floors rewritten at random (with bias towards the values the
	 * protocol uses: our keys' ids and generations near each other), then
	 * requests for the keys the forgeries imitate.  Every call must end
	 * with a documented code; nothing may crash (the sanitizer builds run
	 * this too). */
	static const sluice_keyed_config_t cfgs[] = {
		{ .algo = SLUICE_ALGO_GCRA, .policy = SLUICE_KEYED_EVICT, .capacity = 8, .rate = 10,
		  .period_ns = SEC, .burst = 5 },
		{ .algo = SLUICE_ALGO_FIXED, .policy = SLUICE_KEYED_EVICT, .capacity = 8,
		  .limit = 5, .window_ns = SEC },
		{ .algo = SLUICE_ALGO_WINDOW, .policy = SLUICE_KEYED_REJECT, .capacity = 8,
		  .limit = 5, .window_ns = SEC, .buckets = 4 },
		{ .algo = SLUICE_ALGO_INFLIGHT, .policy = SLUICE_KEYED_REJECT, .capacity = 8,
		  .limit = 5 },
		{ .algo = SLUICE_ALGO_LEAKY, .policy = SLUICE_KEYED_ALLOW, .capacity = 8, .rate = 10,
		  .period_ns = SEC, .depth = 3 },
	};
	rng_state = 0xf0f9e;
	for (size_t c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
		for (int round = 0; round < 150; round++) {
			make(&tk, cfgs[c]);
			char key[8];
			snprintf(key, sizeof(key), "k%d", round % 5);
			struct kid id;
			cr_assert_eq(make_kid(&tk, key, strlen(key), &id), 0);
			/* a real claim first, so the forgeries start from a slot
			 * in use */
			acq(&tk, key, 1, SEC, NULL);
			uint32_t words = tk.slot_bytes / 8;
			for (uint64_t i = 0; i < tk.capacity; i++) {
				_Atomic uint64_t *s = slot_at(&tk, i);
				for (uint32_t j = 0; j < words; j++) {
					uint64_t r = rnd(), v = atomic_load(&s[j]);
					switch (r % 8) {
					case 0: v = rnd(); break;
					case 1: v ^= 1ULL << (r >> 8) % 64; break;
					case 2: /* our key's id, any kind and gen */
						if (j == 0)
							v = MK_TAG(r >> 8, r >> 16, id.id, r >> 40 & UNIT_MASK);
						else if (j >= 2 && j < 2 + 2 * tk.key_words && j % 2 == 0)
							/* our key's bytes (0 past them) */
							v = (j - 2) / 2 < id.used ? id.pw[(j - 2) / 2] : 0;
						break;
					case 3: /* a counter (the slot's or a word's) moved a little */
						if (j % 2 == 1 && j < 2 + 2 * tk.key_words)
							v += (r >> 8) % 3 - 1;
						break;
					default: break;
					}
					atomic_store(&s[j], v);
				}
			}
			if (rnd() % 4 == 0)
				atomic_store(&tk.floors[0], rnd());
			for (int q = 0; q < 20; q++) {
				snprintf(key, sizeof(key), "k%d", (int)(rnd() % 7));
				uint64_t now = rnd() % 4 == 0 ? rnd() % SLUICE_KEYED_TIME_MAX : SEC + q * MS;
				sluice_decision_t d;
				int rc = acq(&tk, key, 1 + rnd() % 2, now, &d);
				cr_assert(rc == 0 || rc == 1 || rc == SLUICE_EKEYFULL ||
				          rc == SLUICE_EBUSY,
				          "cfg %zu round %d: %s", c, round, sluice_err_name(rc));
				if (tk.algo == SLUICE_ALGO_INFLIGHT) {
					rc = sluice_keyed_release(&tk, key, strlen(key), 1);
					cr_assert(rc == 0 || rc == SLUICE_ERELEASE ||
					          rc == SLUICE_EBUSY, "release: %s", sluice_err_name(rc));
				}
			}
			sluice_keyed_destroy(&tk);
		}
	}
}

/* ---- item 6: attach checks every parameter as init does -------------------- */

struct forge_case {
	sluice_keyed_config_t c;
	size_t field;  /* offsetof in the header */
	uint64_t value;
	int width;     /* 4 or 8 bytes */
	int want;      /* the code attach must give */
	char name[24];
};

#define HF(f) offsetof(struct sluice__keyed_hdr, f)
#define GC { .algo = SLUICE_ALGO_GCRA, .capacity = 64, .rate = 10, .period_ns = SEC, .burst = 5 }
#define FC { .algo = SLUICE_ALGO_FIXED, .capacity = 64, .limit = 10, .window_ns = SEC }
#define WC { .algo = SLUICE_ALGO_WINDOW, .capacity = 64, .limit = 10, .window_ns = SEC, \
	     .buckets = 4 }

Test(keyed_faults, attach_refuses_a_rewritten_header_with_its_checksum_redone)
{
	/* The checksum's key is public: a process that rewrites a field can
	 * compute it again (as done here), so attach must not rely on it. */
	static const struct forge_case cases[] = {
		{ FC, HF(window_ns), 0, 8, SLUICE_EWINDOW, "fixed window 0" },
		{ FC, HF(width_ns), 0, 8, SLUICE_ELAYOUT, "fixed width 0" },
		{ FC, HF(limit), 1ULL << 26, 8, SLUICE_ELIMIT, "fixed limit 2^26" },
		{ FC, HF(nmax), 1ULL << 26, 8, SLUICE_ELAYOUT, "fixed nmax 2^26" },
		{ FC, HF(limit), 0, 8, SLUICE_ELIMIT, "fixed limit 0" },
		{ GC, HF(shift), 64, 8, SLUICE_ELAYOUT, "gcra shift 64" },
		{ GC, HF(interval), 0, 8, SLUICE_ELAYOUT, "gcra interval 0" },
		{ GC, HF(tau), 0, 8, SLUICE_ELAYOUT, "gcra tau 0" },
		{ GC, HF(recip), 12345, 8, SLUICE_ELAYOUT, "gcra recip" },
		{ GC, HF(rate), 0, 8, SLUICE_ERATE, "gcra rate 0" },
		{ GC, HF(burst), 1000, 8, SLUICE_ELAYOUT, "gcra burst (derived)" },
		{ GC, HF(d0), 7, 8, SLUICE_ELAYOUT, "digest key" },
		{ GC, HF(algo), 9, 4, SLUICE_EALGO, "algo" },
		{ GC, HF(policy), 7, 4, SLUICE_EPOLICY, "policy" },
		{ GC, HF(key_max), 0, 4, SLUICE_ELAYOUT, "key_max 0" },
		{ WC, HF(buckets), 0, 4, SLUICE_EBUCKETS, "window buckets 0" },
		{ WC, HF(width_ns), 1, 8, SLUICE_ELAYOUT, "window width" },
		{ WC, HF(window_ns), 3, 8, SLUICE_ELAYOUT, "window 3 ns (layout)" },
		{ WC, HF(limit), 1ULL << 31, 8, SLUICE_ELIMIT, "window limit 2^31" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct forge_case *f = &cases[i];
		size_t size = sluice_keyed_region_bytes(&f->c);
		unsigned char *mem = aligned_alloc(64, (size + 63) / 64 * 64);
		cr_assert_not_null(mem);
		cr_assert_eq(sluice_keyed_format(mem, size, &f->c), 0);
		sluice_keyed_t a;
		cr_assert_eq(sluice_keyed_attach(mem, size, &sluice_clock_monotonic, &a), 0);
		struct sluice__keyed_hdr *h = (struct sluice__keyed_hdr *)mem;
		if (f->width == 8)
			memcpy(mem + f->field, &f->value, 8);
		else {
			uint32_t v = (uint32_t)f->value;
			memcpy(mem + f->field, &v, 4);
		}
		h->check = header_check(h); /* forged with the public key */
		int rc = sluice_keyed_attach(mem, size, &sluice_clock_monotonic, &a);
		/* a layout the stored config no longer gives is ELAYOUT too:
		 * either code says "not this table", never 0 */
		cr_assert(rc == f->want || (rc != 0 && f->want == SLUICE_ELAYOUT) ||
		          rc == SLUICE_ELAYOUT,
		          "%s: attach gave %s, want %s", f->name, sluice_err_name(rc),
		          sluice_err_name(f->want));
		cr_assert_neq(rc, 0, "%s: a forged header was attached", f->name);
		free(mem);
	}
}

/* ---- the one residual stale write keyed.h documents ------------------------ */

static char residual_last[32];
static uint64_t residual_no;

static int flood_one_prefixed(uint64_t now)
{
	/* every flood key starts with the same 8 bytes: key word 0 repeats */
	snprintf(residual_last, sizeof(residual_last), "floodkey%llu",
	         (unsigned long long)residual_no++);
	return acq(&tk, residual_last, 1, now, NULL);
}

static void residual_wrap(_Atomic uint64_t *word)
{
	/* the stalled claimer has read this word and seen its claim in the
	 * tag; the slot is now claimed until a later claim of a key with the
	 * same first 8 bytes holds it (format 7: 65,535 claims later, under
	 * the same 16-bit generation; format 8 has no generation in the word,
	 * so the next such claim): the word is then exactly what the claimer
	 * read, and only its claim counter differs */
	uint64_t i = (uint64_t)((unsigned char *)word - tk.slots) / tk.slot_bytes;
	_Atomic uint64_t *s = slot_at(&tk, i);
	uint64_t w = atomic_load(word), c0 = atomic_load(&s[1]);
	for (;;) {
		int rc = flood_one_prefixed(SEC);
		cr_assert(rc == 0 || rc == 1, "%s", sluice_err_name(rc));
		uint64_t t = atomic_load(&s[0]);
		/* and still a stop across 65,535 claims of the slot, so that
		 * the 16-bit generation in the tag repeats too */
		if (KIND(t) == K_LIVE && atomic_load(word) == w && atomic_load(&s[1]) - c0 > 65535)
			break;
		cr_assert_lt(residual_no, 1u << 21, "never came back");
	}
	/* end the stalled creation right after its key-word CAS (as a
	 * process killed there), so it evicts nobody afterwards */
	test_stop = 5;
}

Test(keyed_faults, a_claim_stopped_across_65535_claims_writes_nothing, .timeout = 60)
{
	/* keyed.h (SHARED MEMORY, CRASHES, STOPS): a claimer stopped between
	 * its tag check and a key word's CAS, while its slot is claimed 65,535
	 * times, whose word then holds exactly what it read (the same 8 key
	 * bytes; format 7: the same 6 bytes under the same 16-bit generation),
	 * writes nothing: the key
	 * word is paired with the counter of the claim that wrote it, which
	 * the later claims moved on.  The key now in the slot keeps its word
	 * and its state (format 6 and before: that word was replaced, the key
	 * became unreadable and was created again with a fresh state), and
	 * every call returns. */
	make(&tk, gcra_cfg(8, 1, SEC, 1, SLUICE_KEYED_EVICT));
	for (int i = 0; i < 8; i++)
		cr_assert_eq(flood_one_prefixed(SEC), 1);
	arm(STALL_WORD, residual_wrap);
	int rc = acq(&tk, "zzzzzz-stalled", 1, SEC, NULL);
	test_stop = 0;
	cr_assert_null(hook_action, "the stall point was reached");
	sluice__keyed_stall_hook = NULL;
	cr_assert(rc == 0 || rc == 1, "%s", sluice_err_name(rc));
	/* the key the slot held when the stale word landed */
	char victim[32];
	memcpy(victim, residual_last, sizeof(victim));
	uint64_t before = stats(&tk).creations;
	rc = acq(&tk, victim, 1, SEC, NULL);
	cr_assert(rc == 0 || rc == 1, "%s", sluice_err_name(rc));
	cr_assert_eq(stats(&tk).creations, before, "%s was created again: a stale key word", victim);
	cr_assert_eq(rc, 0, "%s kept its state (1 per s, burst 1, used at 1 s)", victim);
	/* and the table goes on: every slot claimed again, every call ends */
	for (int i = 0; i < 2000; i++) {
		rc = flood_one_prefixed(2 * SEC);
		cr_assert(rc == 0 || rc == 1, "%s", sluice_err_name(rc));
	}
	sluice_keyed_destroy(&tk);
}

/* ---- INFLIGHT: a release or an acquire stopped while its slot changes owner -- */

/* The stalled call's state word as it read it, and what the interference
 * does before forging that word back: re-own the slot for key "b" (the
 * other 7 slots of the one group are held by keys that never release, so
 * "b" reclaims the slot of "a" once "a" holds nothing) and take 2 for it. */
static uint64_t stale_word;

static void hold_seven_at(uint64_t now)
{
	for (int i = 0; i < 7; i++) {
		char name[8];
		snprintf(name, sizeof(name), "h%d", i);
		cr_assert_eq(acq(&tk, name, 1, now, NULL), 1, "%s", name);
	}
}

static void hold_seven(void)
{
	hold_seven_at(SEC);
}

static void reown_and_forge(_Atomic uint64_t *word, uint64_t release_a, uint64_t release_b)
{
	stale_word = atomic_load(word);
	if (release_a)
		cr_assert_eq(sluice_keyed_release(&tk, "a", 1, release_a), 0);
	cr_assert_eq(acq(&tk, "b", 2, SEC, NULL), 1, "b reclaims the slot of a");
	cr_assert_eq(stats(&tk).reclaims, 1);
	if (release_b)
		cr_assert_eq(sluice_keyed_release(&tk, "b", 1, release_b), 0);
	/* 2^(62 - c) owner changes later the state word shows, bit for bit,
	 * what the stalled call read (generation and count): forge that */
	atomic_store(word, stale_word);
}

static void reown_release(_Atomic uint64_t *word)
{
	/* another process releases every permit of "a", the stalled one's
	 * included (a caller that releases what it does not hold): only "a"
	 * may suffer from that */
	reown_and_forge(word, 2, 0);
}

static void reown_acquire(_Atomic uint64_t *word)
{
	/* "a" held nothing when it stalled, so the state it read repeats
	 * only when b holds nothing too */
	reown_and_forge(word, 0, 2);
}

Test(keyed_faults, inflight_release_stopped_across_owner_changes_gives_nothing_to_the_new_owner)
{
	/* keyed.h once said: a release stopped between its load and its CAS
	 * while its slot changes owner 2^(62 - bit_width(K)) times can give its
	 * n to the new owner.  Its CAS compared the state word alone; it now
	 * compares the word and the slot's 64-bit owner counter, and fails. */
	make(&tk, (sluice_keyed_config_t){ .algo = SLUICE_ALGO_INFLIGHT, .capacity = 8,
	     .limit = 5 });
	cr_assert_eq(acq(&tk, "a", 2, SEC, NULL), 1);
	hold_seven();
	arm(STALL_DECIDE, reown_release);
	int rc = sluice_keyed_release(&tk, "a", 1, 1);
	cr_assert_null(hook_action, "the stall point was reached");
	sluice__keyed_stall_hook = NULL;
	cr_assert_eq(rc, SLUICE_ERELEASE, "the stale release gave its permit to b: %s",
	             sluice_err_name(rc));
	/* b holds 2 of 5: exactly 3 more */
	sluice_decision_t d;
	cr_assert_eq(acq(&tk, "b", 3, SEC, &d), 1);
	cr_assert_eq(d.remaining, 0);
	cr_assert_eq(acq(&tk, "b", 1, SEC, NULL), 0, "b over-admitted");
	sluice_keyed_destroy(&tk);
}

Test(keyed_faults, inflight_acquire_stopped_across_owner_changes_takes_nothing_from_the_new_owner)
{
	/* The same stall in an acquire of "a": its CAS on the state word alone
	 * admitted "a" against b's state (b charged, and a's holders counted
	 * nowhere for "a", whose release then fails).  Now it fails, looks
	 * "a" up again and creates it, in the one slot whose key holds
	 * nothing: b's (a second reclaim). */
	make(&tk, (sluice_keyed_config_t){ .algo = SLUICE_ALGO_INFLIGHT, .capacity = 8,
	     .limit = 5 });
	cr_assert_eq(acq(&tk, "a", 2, SEC, NULL), 1);
	cr_assert_eq(sluice_keyed_release(&tk, "a", 1, 2), 0); /* a: fresh-equivalent */
	hold_seven();
	arm(STALL_DECIDE, reown_acquire);
	int rc = acq(&tk, "a", 2, SEC, NULL);
	cr_assert_null(hook_action, "the stall point was reached");
	sluice__keyed_stall_hook = NULL;
	cr_assert_eq(rc, 1, "%s", sluice_err_name(rc));
	cr_assert_eq(stats(&tk).reclaims, 2, "a admitted against b's state");
	cr_assert_eq(sluice_keyed_release(&tk, "a", 1, 2), 0, "a holds its 2 in its own state");
	cr_assert_eq(sluice_keyed_release(&tk, "b", 1, 1), SLUICE_ERELEASE, "b was charged");
	sluice_keyed_destroy(&tk);
}

/* A region of c's size, formatted by sluice_keyed_format (freed by the caller). */
static void *formatted_region(const sluice_keyed_config_t *c, size_t *size)
{
	*size = sluice_keyed_region_bytes(c);
	void *mem = aligned_alloc(SLUICE_CACHELINE, *size);
	cr_assert_not_null(mem);
	cr_assert_eq(sluice_keyed_format(mem, *size, c), 0);
	return mem;
}

Test(keyed_faults, attach_refuses_a_version_2_table)
{
	/* Version 3 moved INFLIGHT's state word (version 2 kept it at s[1],
	 * without an owner counter): a table a version-2 library wrote, with
	 * its version and its own checksum, is refused. */
	sluice_keyed_config_t c = { .algo = SLUICE_ALGO_INFLIGHT, .capacity = 8, .limit = 5 };
	size_t size;
	void *mem = formatted_region(&c, &size);
	sluice_keyed_t a;
	cr_assert_eq(sluice_keyed_attach(mem, size, NULL, &a), 0);
	struct sluice__keyed_hdr *h = mem;
	h->version = 2;
	const unsigned char *b = mem;
	size_t to = offsetof(struct sluice__keyed_hdr, check);
	h->check = sluice__siphash13(0x736c75696365ULL, 2, b + 8, to - 8);
	cr_assert_eq(sluice_keyed_attach(mem, size, NULL, &a), SLUICE_ELAYOUT);
	free(mem);
}

/* ---- every algorithm: a decision stopped while its slot changes owner ------- */

static uint64_t reown_at = SEC; /* when "b" comes */

static void reown_gcra(_Atomic uint64_t *word)
{
	/* "a" is fresh-equivalent at SEC (its one admission at 0 has run
	 * out), so "b" reclaims its slot; 2^16 claims later a key with the
	 * same 32-bit id at the same generation could show the state word
	 * the stalled decision read, bit for bit: forge that */
	stale_word = atomic_load(word);
	int rc = acq(&tk, "b", 1, reown_at, NULL);
	cr_assert_eq(rc, 1, "b reclaims the slot of a: %s", sluice_err_name(rc));
	cr_assert_eq(stats(&tk).reclaims, 1);
	atomic_store(word, stale_word);
}

Test(keyed_faults, gcra_decision_stopped_across_owner_changes_decides_nothing_against_the_new_owner)
{
	/* keyed.h once said: a GCRA, LEAKY, FIXED or WINDOW decision stopped
	 * between finding its slot and its CAS while the slot is claimed 2^16+
	 * times and then holds another key with the same 32-bit id at the same
	 * generation decides against that other key's state.  Its CAS compared
	 * the state word alone (so it admitted "a" into b's state, and "a",
	 * created again later, got a fresh burst); it now compares the word
	 * and the slot's 64-bit owner counter, fails, looks "a" up again and
	 * creates it in the one slot whose key is fresh-equivalent: b's (its
	 * state forged back to a's old one). */
	make(&tk, gcra_cfg(8, 10, SEC, 1, SLUICE_KEYED_REJECT));
	cr_assert_eq(acq(&tk, "a", 1, 0, NULL), 1);
	hold_seven();
	arm(STALL_DECIDE, reown_gcra);
	int rc = acq(&tk, "a", 1, SEC, NULL);
	cr_assert_null(hook_action, "the stall point was reached");
	sluice__keyed_stall_hook = NULL;
	cr_assert_eq(rc, 1, "%s", sluice_err_name(rc));
	cr_assert_eq(stats(&tk).reclaims, 2, "a admitted against b's state");
	/* a's one admission is in a's own state: burst 1, nothing more now */
	cr_assert_eq(acq(&tk, "a", 1, SEC, NULL), 0, "a admitted twice at one instant");
	sluice_keyed_destroy(&tk);
}

/* The stalled lookup's slot: "b" reclaims it, then its tag is forged back
 * to the one the lookup saw (a key of a's 32-bit id at a's generation,
 * 2^16 claims later), over b's key words, claim and state. */
static uint64_t b_tag;
static _Atomic uint64_t *b_slot;

static void reown_under_the_same_tag(_Atomic uint64_t *slot)
{
	uint64_t a_tag = atomic_load(&slot[0]);
	int rc = acq(&tk, "b", 1, SEC, NULL);
	cr_assert_eq(rc, 1, "b reclaims the slot of a: %s", sluice_err_name(rc));
	cr_assert_eq(stats(&tk).reclaims, 1);
	b_tag = atomic_load(&slot[0]);
	b_slot = slot;
	cr_assert_neq(b_tag | REF, a_tag | REF);
	atomic_store(&slot[0], a_tag);
}

Test(keyed_faults, a_decision_whose_slot_changes_key_under_the_same_tag_decides_nothing)
{
	/* A lookup found "a"; before its decision loaded the state, the slot
	 * was reclaimed by "b" and shows a's tag again.  The decision's
	 * recheck (still_ours(): the tag, then the slot's claim counter, which
	 * b's claim bumped) sends it back to the lookup, which no longer finds
	 * "a" (b's key words), and the full group refuses to create it.  A
	 * recheck of the tag alone would admit "a" against b's state (burst 2:
	 * b's second permit).  Covers the recheck after the words compare
	 * gave way to the claim counter's. */
	make(&tk, gcra_cfg(8, 10, SEC, 2, SLUICE_KEYED_REJECT));
	cr_assert_eq(acq(&tk, "a", 1, 0, NULL), 1);
	hold_seven(); /* at SEC: not fresh, so only a's slot is reclaimable */
	arm(STALL_LOOKUP, reown_under_the_same_tag);
	int rc = acq(&tk, "a", 1, SEC, NULL);
	cr_assert_null(hook_action, "the stall point was reached");
	sluice__keyed_stall_hook = NULL;
	cr_assert_eq(rc, SLUICE_EKEYFULL, "a decided on b's state: %s", sluice_err_name(rc));
	/* b's slot made readable again: b still has exactly its second permit */
	atomic_store(&b_slot[0], b_tag);
	cr_assert_eq(acq(&tk, "b", 1, SEC, NULL), 1, "b was charged for a");
	cr_assert_eq(acq(&tk, "b", 1, SEC, NULL), 0);
	sluice_keyed_destroy(&tk);
}

Test(keyed_faults, fixed_and_window_decisions_stopped_across_owner_changes_are_not_b_s)
{
	/* The same stall in FIXED (its state word) and WINDOW (the bucket
	 * word of its CAS, whose epoch bits and count the new owner's bucket
	 * repeats): "a" is fresh-equivalent at SEC (its admission at 0 is in
	 * an older window, or out of the N buckets).  FIXED: the pair CAS
	 * fails, "a" is looked up again and created in b's slot (a second
	 * reclaim).  WINDOW: the bucket CAS lands in b's word (charging b) and
	 * the owner read after it is b's: refused.  Before, both admitted "a"
	 * against b's state. */
	static const struct {
		sluice_keyed_config_t c;
		uint64_t later; /* when the holders and "b" come */
		int rc;
		uint64_t reclaims;
		const char *name;
	} cases[] = {
		{ { .algo = SLUICE_ALGO_FIXED, .capacity = 8, .limit = 1, .window_ns = SEC }, SEC, 1,
		  2, "fixed" },
		/* a's stalled decision moved its head to bucket 2 (of width
		 * SEC/2); at 2 SEC that is out of range, and b's bucket 4
		 * uses the same word */
		{ { .algo = SLUICE_ALGO_WINDOW, .capacity = 8, .limit = 1, .window_ns = SEC,
		    .buckets = 2 },
		  2 * SEC, 0, 1, "window" },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		make(&tk, cases[c].c);
		cr_assert_eq(acq(&tk, "a", 1, 0, NULL), 1, "%s", cases[c].name);
		hold_seven_at(cases[c].later);
		reown_at = cases[c].later;
		arm(STALL_DECIDE, reown_gcra);
		int rc = acq(&tk, "a", 1, SEC, NULL);
		cr_assert_null(hook_action, "%s: the stall point was reached", cases[c].name);
		sluice__keyed_stall_hook = NULL;
		cr_assert_eq(rc, cases[c].rc, "%s: a admitted against b's state: %s", cases[c].name,
		             sluice_err_name(rc));
		cr_assert_eq(stats(&tk).reclaims, cases[c].reclaims, "%s", cases[c].name);
		if (cases[c].rc == 1) /* a's one admission is in a's own state */
			cr_assert_eq(acq(&tk, "a", 1, SEC, NULL), 0, "%s: a admitted twice",
			             cases[c].name);
		sluice_keyed_destroy(&tk);
	}
	reown_at = SEC;
}

Test(keyed_faults, attach_refuses_a_version_3_table)
{
	/* Version 4 moved every algorithm's state word next to an owner
	 * counter (version 3 kept it at s[1] for all but INFLIGHT): a table a
	 * version-3 library wrote, with its version and its own checksum, is
	 * refused. */
	sluice_keyed_config_t c = gcra_cfg(8, 10, SEC, 5, SLUICE_KEYED_REJECT);
	size_t size;
	void *mem = formatted_region(&c, &size);
	sluice_keyed_t a;
	cr_assert_eq(sluice_keyed_attach(mem, size, NULL, &a), 0);
	struct sluice__keyed_hdr *h = mem;
	h->version = 3;
	const unsigned char *b = mem;
	size_t to = offsetof(struct sluice__keyed_hdr, check);
	h->check = sluice__siphash13(0x736c75696365ULL, 3, b + 8, to - 8);
	cr_assert_eq(sluice_keyed_attach(mem, size, NULL, &a), SLUICE_ELAYOUT);
	free(mem);
}

/* ---- live parameters: setters stopped, killed, overtaken ----------------- */

/* A setter stopped (or killed) while it holds the setters' lock: decisions
 * never wait for it, and the next change overtakes it once its lease ran
 * out (the call waits at most about SLUICE_KEYED_LEASE_MS). */
Test(keyed_faults, a_setter_stopped_holding_the_lock_blocks_nothing_for_long, .timeout = 30)
{
	sluice_keyed_t lk;
	make(&lk, gcra_cfg(8, 10, SEC, 5, SLUICE_KEYED_REJECT));
	struct sluice__keyed_live *l = lk.live;
	/* held now, by ticket 7, which never comes back */
	atomic_store(&l->ctl[0], (7ULL << 15) | LOCK_HELD | lease_now());
	cr_assert_eq(acq(&lk, "a", 1, 0, NULL), 1, "a decision must not wait for a setter");
	cr_assert_eq(sluice_keyed_set_rate_at(&lk, 20, SEC, 0), 0);
	sluice_keyed_params_t p;
	cr_assert_eq(sluice_keyed_params(&lk, &p), 0);
	cr_assert_eq(p.rate, 20);
	cr_assert_eq(p.era, 1);
	cr_assert_eq(LOCK_TICKET(atomic_load(&l->ctl[0])), 8, "the stolen lock's next ticket");
	cr_assert_eq(atomic_load(&l->ctl[0]) & LOCK_HELD, 0, "released after the change");
	sluice_keyed_destroy(&lk);
}

/* A setter overtaken while stopped mid-change (its lock stolen), resumed:
 * it can neither write into the block the newer setter filled (its
 * ticketed field CASes fail) nor publish (its pair CAS expects its own lock
 * word): the parameters in force stay the newer setter's, whole. */
Test(keyed_faults, an_overtaken_setter_writes_and_publishes_nothing)
{
	sluice_keyed_t lk;
	make(&lk, (sluice_keyed_config_t){ .algo = SLUICE_ALGO_FIXED, .capacity = 8, .limit = 10,
	                                    .window_ns = SEC });
	struct sluice__keyed_live *l = lk.live;
	uint64_t lo_a, e_a;
	cr_assert_eq(lock_take(l, &lo_a, &e_a), 0); /* setter A takes the lock... */
	_Atomic uint64_t(*blk_a)[2] = l->blk[(e_a + 1) & 1].f;
	cr_assert_eq(field_set(blk_a, F_LIMIT, 3, LOCK_TICKET(lo_a)), 1); /* ...writes one field */
	/* ...and stops past its lease: B overtakes it and changes L to 12 */
	uint64_t old = (lease_now() - LEASE_UNITS - 2) & UNIT_MASK;
	atomic_store(&l->ctl[0], (lo_a & ~UNIT_MASK) | old);
	cr_assert_eq(sluice_keyed_set_limit_at(&lk, 12, 0), 0);
	/* A resumes: every write and the publication fail */
	cr_assert_eq(field_set(blk_a, F_LIMIT, 3, LOCK_TICKET(lo_a)), 0);
	cr_assert_eq(field_set(blk_a, F_CAP, 3, LOCK_TICKET(lo_a)), 0);
	cr_assert_eq(sluice__pair_cas(&l->ctl[0], lo_a, e_a, lo_a, e_a + 1), 0);
	sluice_keyed_params_t p;
	cr_assert_eq(sluice_keyed_params(&lk, &p), 0);
	cr_assert_eq(p.era, 1);
	cr_assert_eq(p.limit, 12);
	/* the change's window keeps min(10, 12), whole: 10 */
	int got = 0;
	while (got < 100 && acq(&lk, "k", 1, 0, NULL) == 1)
		got++;
	cr_assert_eq(got, 10);
	sluice_keyed_destroy(&lk);
}

/* ---- the table's hash (lib/keyhash_internal.h): recorded, refused, whole ---- */

/* A table formatted with the AES hash cannot be attached where the CPU lacks
 * AES-NI (the detection overridden: sluice__keyed_test_no_aes); a table
 * formatted there uses SipHash-1-3, says so in its header, and attaches and
 * decides anywhere. */
Test(keyed_faults, attach_refuses_an_aes_table_where_aes_ni_is_absent)
{
	if (!sluice__keyed_have_aes())
		cr_skip_test("no AES-NI on this CPU: every table is SipHash");
	sluice_keyed_config_t c = gcra_cfg(64, 1, SEC, 1, SLUICE_KEYED_REJECT);
	size_t size;
	void *mem = formatted_region(&c, &size);
	struct sluice__keyed_hdr *h = mem;
	cr_assert_eq(h->flags & SLUICE_KEYED_SIPHASH, 0, "AES-NI here: the AES hash");
	sluice_keyed_t a;
	cr_assert_eq(sluice_keyed_attach(mem, size, NULL, &a), 0);
	sluice__keyed_test_no_aes = 1;
	cr_assert_eq(sluice_keyed_attach(mem, size, NULL, &a), SLUICE_ELAYOUT,
	             "an AES table where AES-NI is absent");
	/* formatted without AES-NI: SipHash-1-3, recorded in the header */
	cr_assert_eq(sluice_keyed_format(mem, size, &c), 0);
	cr_assert_neq(h->flags & SLUICE_KEYED_SIPHASH, 0);
	cr_assert_eq(sluice_keyed_attach(mem, size, NULL, &a), 0);
	cr_assert_eq(acq(&a, "k", 1, 0, NULL), 1);
	sluice__keyed_test_no_aes = 0;
	sluice_keyed_t b;
	cr_assert_eq(sluice_keyed_attach(mem, size, NULL, &b), 0, "SipHash runs anywhere");
	cr_assert_eq(acq(&b, "k", 1, 0, NULL), 0, "b finds a's key: the same hash");
	free(mem);
}

/* A version-8 table (the format before the header named the hash: its
 * flags without SLUICE_KEYED_SIPHASH meant SipHash) is refused. */
Test(keyed_faults, attach_refuses_a_version_8_table)
{
	sluice_keyed_config_t c = gcra_cfg(64, 1, SEC, 1, SLUICE_KEYED_REJECT);
	size_t size;
	void *mem = formatted_region(&c, &size);
	struct sluice__keyed_hdr *h = mem;
	h->version = 8;
	const unsigned char *b = mem;
	size_t to = offsetof(struct sluice__keyed_hdr, check);
	h->check = sluice__siphash13(0x736c75696365ULL, 8, b + 8, to - 8);
	sluice_keyed_t a;
	cr_assert_eq(sluice_keyed_attach(mem, size, NULL, &a), SLUICE_ELAYOUT);
	free(mem);
}

/*
 * Every length is hashed, and the length with it: for a fixed seed, the
 * prefixes of one 32-byte buffer (all zero bytes, whose zero-padded words
 * are equal for every length up to 8 and up to 16; then bytes 1..32) get
 * 34 hash bits (group, probe start, fingerprint) that differ pairwise, for
 * both hashes, up to 16 bytes (the AES hash or SipHash-1-3) and past them
 * (SipHash-1-3).  A hash that ignored the length or a tail byte would make
 * two of them equal.  (Chance collisions among 32 keys in 34 bits: about
 * 2^-25 per seed; the seeds are fixed, so the test is deterministic.)
 */
Test(keyed_faults, every_length_is_hashed_with_its_length)
{
	for (int sip = 0; sip < 2; sip++) {
		for (int fill = 0; fill < 2; fill++) {
			sluice_keyed_config_t c = gcra_cfg(1024, 1, SEC, 1, SLUICE_KEYED_REJECT);
			c.flags = SLUICE_KEYED_SEEDED | (sip ? SLUICE_KEYED_SIPHASH : 0);
			c.seed[0] = 7;
			c.seed[1] = 11;
			sluice_keyed_t k;
			make(&k, c);
			unsigned char buf[32];
			for (int i = 0; i < 32; i++)
				buf[i] = fill ? (unsigned char)(i + 1) : 0;
			uint64_t h[33];
			for (size_t len = 1; len <= 32; len++) {
				struct kid id;
				cr_assert_eq(make_kid(&k, buf, len, &id), 0);
				cr_assert_eq(id.id >> 38, len, "the length code");
				/* the hash's bits, without the length code */
				h[len] = (id.group << 40) | ((uint64_t)id.start << 37) |
				         ((id.id >> 14) & 0xffffff);
			}
			for (size_t a = 1; a <= 32; a++)
				for (size_t b = a + 1; b <= 32; b++)
					cr_assert_neq(h[a], h[b], "siphash %d fill %d: lengths %zu, %zu",
					              sip, fill, a, b);
			sluice_keyed_destroy(&k);
		}
	}
}

/* ---- the live-parameter block rewritten by another process (R7) ----------- */

/* Write @v into field @i of the block in force (value half), as a hostile
 * or broken attacher could. */
static void forge_live(sluice_keyed_t *k, unsigned i, uint64_t v)
{
	struct sluice__keyed_live *l = k->live;
	uint64_t e = atomic_load(&l->ctl[1]);
	atomic_store(&l->blk[e & 1].f[i][0], v);
}

/* Permits of 1 admitted for @key at @now in @tries calls; every call
 * returns an answer (1, 0, or a refusal code), never hangs. */
static int admitted_of(sluice_keyed_t *k, const char *key, uint64_t now, int tries)
{
	int got = 0;
	for (int i = 0; i < tries; i++) {
		int rc = acq(k, key, 1, now, NULL);
		cr_assert(rc == 1 || rc == 0 || rc == SLUICE_EBUSY || rc == SLUICE_ETOOBIG,
		          "acquire: %s", sluice_err_name(rc));
		got += rc == 1;
	}
	return got;
}

/* issue 22, R7: interval 0 or tau 2^61 written into the live block made
 * 100,000 of 100,000 pass at burst 5 (here 20,000 tries).  No value in any field may make a
 * decision admit more than what init would accept allows: here the
 * table's own b = 5 at one reading (a key that existed before the forge
 * and one created after it). */
Test(keyed_faults, a_forged_live_block_admits_no_more_than_its_parameters, .timeout = 60)
{
	static const struct {
		unsigned f;
		uint64_t v;
	} forge[] = {
		{ F_INTERVAL, 0 },
		{ F_INTERVAL, 1 },
		{ F_TAU, 1ULL << 61 },
		{ F_TAU, 1ULL << 63 },
		{ F_TAU, 0 },
		{ F_NMAX, 1ULL << 63 },
		{ F_NMAX, 0 },
		{ F_NMAX, 1000 },
		{ F_RECIP, 0 },
		{ F_SHIFT, 200 },
		{ F_PINTERVAL, 0 },
		{ F_PTAU, 1ULL << 63 },
		{ F_TC, SLUICE_KEYED_TIME_MAX },
		{ F_TC, ~0ULL },
	};
	static const sluice_algo_t algos[] = { SLUICE_ALGO_GCRA, SLUICE_ALGO_LEAKY };
	for (size_t ai = 0; ai < 2; ai++)
		for (size_t i = 0; i < sizeof(forge) / sizeof(forge[0]); i++) {
			sluice_algo_t algo = algos[ai];
			sluice_keyed_t lk;
			make(&lk, bucket_cfg(algo, 8, 10, SEC, 5, SLUICE_KEYED_REJECT));
			cr_assert_eq(acq(&lk, "old", 1, SEC, NULL), 1);
			forge_live(&lk, forge[i].f, forge[i].v);
			int got_old = admitted_of(&lk, "old", SEC, 20000);
			int got_new = admitted_of(&lk, "new", SEC, 20000);
			cr_assert_leq(got_old, 4, "algo %d field %u = %#llx: %d of 20000 admitted",
			              (int)algo, forge[i].f,
			              (unsigned long long)forge[i].v, got_old);
			cr_assert_leq(got_new, 5, "algo %d field %u = %#llx: %d of 20000 admitted (new key)",
			              (int)algo, forge[i].f,
			              (unsigned long long)forge[i].v, got_new);
			sluice_keyed_destroy(&lk);
		}
}

/* The same at random: every field of the block in force rewritten with
 * random values, for every algorithm; no crash, no hang, and GCRA admits
 * no more than its b at one reading, FIXED and INFLIGHT no more than the
 * largest limit their count's bits hold (what set_limit would accept),
 * WINDOW no more than init's largest L. */
Test(keyed_faults, a_randomly_forged_live_block_never_crashes_or_overadmits, .timeout = 60)
{
	static const sluice_keyed_config_t cfgs[] = {
		{ .algo = SLUICE_ALGO_GCRA, .capacity = 8, .rate = 10, .period_ns = SEC, .burst = 5 },
		{ .algo = SLUICE_ALGO_LEAKY, .capacity = 8, .rate = 10, .period_ns = SEC, .depth = 4 },
		{ .algo = SLUICE_ALGO_FIXED, .capacity = 8, .limit = 5, .window_ns = SEC },
		{ .algo = SLUICE_ALGO_WINDOW, .capacity = 8, .limit = 5, .window_ns = SEC, .buckets = 4 },
		{ .algo = SLUICE_ALGO_INFLIGHT, .capacity = 8, .limit = 5 },
	};
	rng_state = 22;
	for (size_t a = 0; a < sizeof(cfgs) / sizeof(cfgs[0]); a++)
		for (int round = 0; round < 150; round++) {
			sluice_keyed_t lk;
			make(&lk, cfgs[a]);
			cr_assert_eq(acq(&lk, "old", 1, SEC, NULL), 1);
			for (unsigned f = 0; f < F_COUNT; f++)
				if (rnd() & 1)
					forge_live(&lk, f, rnd() >> (rnd() & 63));
			int got = admitted_of(&lk, "new", SEC, 500);
			uint64_t most = cfgs[a].algo == SLUICE_ALGO_GCRA || cfgs[a].algo == SLUICE_ALGO_LEAKY
			                        ? 5
			                        : 7; /* 2^bit_width(5) - 1 */
			cr_assert_leq((uint64_t)got, most, "algo %d round %d: %d admitted",
			              (int)cfgs[a].algo, round, got);
			sluice_keyed_destroy(&lk);
		}
}

/* The conversion alone, without the newest reading (hw written back to 0,
 * as a table formatted before it kept none would have it): a key emptied
 * at X (owes tau = 100 us at 1/us), a rate lowering to 1/2us stamped 30
 * us behind X.  At the stamp the key owes 130 us: 30 us of old permits
 * past the old tau, kept as 60 us of new ones on top of the new tau
 * (200 us): TAT X + 230 us, so the next permit is at X + 32 us exactly
 * (fewer than at X's own conversion, never more).  The clamped conversion
 * forgot the 30 us: 15 permits at X. */
Test(keyed_faults, a_lagging_stamp_keeps_the_debt_past_the_old_tau_in_new_units)
{
	sluice_keyed_t lk;
	make(&lk, gcra_cfg(8, 1000000, SEC, 100, SLUICE_KEYED_REJECT));
	const uint64_t X = 2 * MS, us = 1000;
	int got = 0;
	while (got < 1000 && acq(&lk, "k", 1, X, NULL) == 1)
		got++;
	cr_assert_eq(got, 100);
	atomic_store(&lk.live->hw, 0);
	cr_assert_eq(sluice_keyed_set_rate_at(&lk, 500000, SEC, X - 30 * us), 0);
	cr_assert_eq(admitted_of(&lk, "k", X, 100), 0, "the debt past tau0 was forgotten");
	cr_assert_eq(admitted_of(&lk, "k", X + 32 * us - 1, 100), 0);
	cr_assert_eq(admitted_of(&lk, "k", X + 32 * us, 100), 1);
	sluice_keyed_destroy(&lk);
}
