/* SPDX-License-Identifier: MIT */
/*
 * keyed_slot.c - the slot protocol of keyed tables: claims (take, write the
 * key words, validate against other copies, initialise, publish), helping,
 * steals, lossless reclaim, eviction and the reclaim floor.  Lookups
 * (find_live(), keyed_internal.h) are on the decision path and inline.
 *
 * DESIGN
 *
 * Tag: kind:2 | gen:16 | len:8 | fp:24 | low:14.
 *   OPEN  (0)  never used, or abandoned: anyone may claim it.
 *   BUSY  (1)  claimed for the key (len, fp); low = claim time in units of
 *              2^24 ns of CLOCK_MONOTONIC_COARSE (wraps; used for the lease).
 *   LIVE  (2)  holds the key (len, fp) whose bytes are in the key words;
 *              low bit 0 = REF, set by lookups, cleared by evictions (CLOCK).
 * Every claim bumps gen.  Key words are gen:16 | 6 key bytes, so a reader
 * that sees a LIVE tag of gen g and key words all of gen g holding its bytes
 * knows the slot holds its key: words of gen g are only ever written with
 * the key of claim g (see "Claims" for the one exception, a hijack, which
 * only happens between keys of equal (len, fp) before publication and ends
 * with words and tag agreeing).  Generations are compared for equality
 * only, never ordered: 16 bits wrap within a long stop, and an order modulo
 * 2^16 let a claimer resumed after 2^15 claims of its slot take its stale
 * gen for the newer one (every later claim of the slot then failed to write
 * its words and retried for ever).  Instead every claim also bumps the
 * slot's 64-bit claim counter (s[1]) in the pair CAS that takes the tag,
 * each key word is a pair (word, counter of the claim that wrote it), and a
 * claimer writes a key word only after seeing its claim still in the tag,
 * with a pair CAS that expects the pair it read before that check: it fails
 * after any later claim, however long the claimer was stopped (complete(),
 * step 1; format 6 CASed the word alone, and a claimer stopped across
 * 65,535 claims could replace a word that repeated what it read, making the
 * slot's key unreadable and so created again with a fresh state).
 *
 *
 * Claims (keyed_create()): a new key scans its group in its probe order and
 * takes, in this order of preference, an OPEN slot or a LIVE slot whose state
 * is retired, a BUSY slot whose lease ran out (steal), a LIVE slot whose
 * state is fresh-equivalent (reclaim: raise the group's floor, retire the
 * state by CAS, then CAS the tag), or the policy's answer.  Taking is one
 * seq_cst CAS of the tag to BUSY(gen + 1, len, fp).  Then complete():
 *   1. write the key words that hold its bytes (CAS from older claims);
 *   2. validate: scan the other slots of the group up to the first one
 *      never used (seq_cst loads; no claim lies past it): a LIVE
 *      copy of the key (not retired) wins, so abandon ours (tag -> OPEN) and
 *      use it; a BUSY claim of the same (len, fp) earlier in the key's probe
 *      order wins too (abandon ours, help it); a later one is killed (-> OPEN);
 *   3. initialise the state if it is still retired (CAS; a state that is not
 *      retired was set by another completer of this or an abandoned claim
 *      and never used: it is kept);
 *   4. publish: CAS BUSY -> LIVE (seq_cst, a release).
 * Any thread whose key has the claim's (len, fp) runs complete() on a BUSY
 * slot it meets (helping), so a claimer killed after step 0 is finished by
 * the next creator of its key; if its key words already show another key,
 * the slot is that key's.  A claim nobody finishes is stolen by anyone after
 * the lease.  No step waits.
 *
 * One copy per key.  Two creators of one key both CAS their claim, then scan
 * (seq_cst): at least one sees the other (store-load order of seq_cst), and
 * the ordering rule leaves one: if the earlier claim in probe order is seen
 * by the later, the later abandons; if only the earlier sees the later, it
 * kills it, so it can never be published (its publish CAS expects BUSY); a
 * copy that was published before the other's scan is seen as LIVE.  Helpers
 * validate the same way before publishing.  So no key is ever LIVE twice.
 *
 * Lossless reclaim and the floor: retiring a fresh-equivalent state raises
 * the group's floor to the reclaimer's reading first (relaxed fetch-max,
 * ordered before the retire's release), and every initialisation starts at
 * or after the floor (read after acquiring the retired state or a tag that
 * followed it).  The old key's next state is in the same group, so it starts
 * no fuller than the old state was at any reading (keyed.h).
 *
 */
#include "pair_internal.h"
#include "keyed_internal.h"

#ifdef SLUICE_TESTING
void (*sluice__keyed_stall_hook)(int point, _Atomic uint64_t *word);
int sluice__keyed_test_stop;
#endif

/* Relaxed fetch-max: ordered before the retire's release CAS (DESIGN). */
static void raise_floor(const sluice_keyed_t *k, uint64_t group, uint64_t now, unsigned *tries)
{
	_Atomic uint64_t *f = &k->floors[group];
	uint64_t v = atomic_load_explicit(f, memory_order_relaxed);
	/* Bounded: each failure means the floor moved (up, among honest
	 * writers).  A floor left below now by a writer that keeps lowering
	 * it only weakens the floor for this group, as a forged floor does. */
	for (; *tries <= RETRY_MAX && v < now; ++*tries)
		if (atomic_compare_exchange_weak_explicit(f, &v, now, memory_order_relaxed,
		                                          memory_order_relaxed))
			break;
}

/* Give up our claim @bt on @s: OPEN with the next gen.  seq_cst, as every
 * tag CAS of the claim protocol (the validation scan's Dekker pairing). */
static void abandon(_Atomic uint64_t *s, uint64_t bt)
{
	atomic_compare_exchange_strong_explicit(&s[0], &bt, MK_TAG(K_OPEN, next_gen(GEN(bt)), 0, 0),
	                                        memory_order_seq_cst, memory_order_seq_cst);
}

/*
 * complete - finish the claim @bt of slot @x for @id (ours or one we help):
 * key words, validation against other copies, state, publication.
 * Return: the slot to use (x or the winning copy, *tag set), or -1 when the
 * claim is lost (stolen, killed, another key's): the caller scans again.
 */
static int64_t complete(const sluice_keyed_t *k, const struct kid *id, uint64_t x, uint64_t bt,
                        uint64_t now, uint64_t *tag, unsigned *tries)
{
	for (int depth = 0; depth <= (int)G; depth++) {
		_Atomic uint64_t *s = slot_at(k, x);
		uint64_t g = GEN(bt);
		/*
		 * 1. key words: write each as gen g, with this claim's counter
		 * beside it, while the tag is still this claim.  Every claim
		 * bumps the slot's 64-bit claim counter in the same pair CAS
		 * that takes the tag, and every key word is a pair (word,
		 * counter of the claim that wrote it) written only by a pair
		 * CAS that expects the pair read before the check that the
		 * claim is still in the tag.  A later claim writes its words
		 * with a larger counter, so a CAS of ours that lands after it,
		 * however long this claimer was stopped, fails even when the
		 * word half repeats what we read (the same 6 key bytes under
		 * the same 16-bit generation, 65,536 claims later: the case the
		 * 8-byte CAS let through, making the current key unreadable
		 * and so created again with a fresh state).  A pair with a
		 * larger counter than ours belongs to a later claim (the claim
		 * check below then fails: stop) or is forged.  A word of our
		 * counter with other bytes is another key's write
		 * for this claim (a helper of equal (len, fp): a hijack) or a
		 * forged word: the claim is lost, nothing is written.  No order
		 * between generations is used (16 bits wrap); counters are
		 * ordered, and never wrap (2^64 claims).
		 */
		uint64_t myc = atomic_load_explicit(&s[1], memory_order_acquire);
		/* seq_cst, as every load of the claim protocol's tags: (bt,
		 * myc) is the pair claim bt wrote (no claim came between the
		 * two counter loads, and only a claim writes a BUSY tag). */
		if (atomic_load_explicit(&s[0], memory_order_seq_cst) != bt ||
		    atomic_load_explicit(&s[1], memory_order_acquire) != myc)
			return -1;
		/* Only the words that hold the key's bytes (id->used): a lookup
		 * matches a slot only under a tag of the key's length, and reads
		 * exactly those (words_match_at()); the words past them keep an
		 * older claim's counter, which no check of this claim takes for
		 * its own (words_foreign() reads the same words).  A key of 4
		 * bytes in a table of key_max 32 writes one pair, not four. */
		for (uint32_t j = 0; j < id->used; j++) {
			uint64_t want = id->pw[j];
			_Atomic uint64_t *kw = key_word(s, j);
			for (;;) {
				/* Acquire on both halves: pair with the pair CAS
				 * of whoever wrote them (a full barrier after its
				 * claim), so a later claim's tag is seen below. */
				uint64_t wc = atomic_load_explicit(&kw[1], memory_order_acquire);
				uint64_t w = atomic_load_explicit(kw, memory_order_acquire);
				if (w == want && wc == myc)
					break; /* written, by us or a helper */
				if (wc == myc || ++*tries > RETRY_MAX)
					return -1; /* a hijack or a forged word */
				/* Is the slot still this claim?  A pair of a later
				 * claim (counter above myc) fails this too: that
				 * claim bumped the counter before writing it, and
				 * the acquire loads above made that visible.  A
				 * larger counter with the slot's still at myc was
				 * forged: overwritten, so a forged counter cannot
				 * lock a slot's claims out. */
				if (atomic_load_explicit(&s[0], memory_order_seq_cst) != bt ||
				    atomic_load_explicit(&s[1], memory_order_acquire) != myc)
					return -1; /* overtaken: write nothing */
				STALL(STALL_WORD, kw);
				/* A full barrier: a claimer that reads this pair
				 * (acquire) sees our claim; published to lookups by
				 * the tag's CAS (step 4).  Fails on any write since
				 * the loads above, however long we were stopped. */
				if (sluice__pair_cas(kw, w, wc, want, myc))
					break;
			}
		}
		if (test_stop == 2)
			return -1;
		/* 2. validate against the other slots of the group */
		unsigned mypos = (unsigned)((x - id->group * G - id->start) & (G - 1));
		int64_t help = -1;
		uint64_t help_tag = 0;
		for (unsigned pos = 0; pos < G && help < 0; pos++) {
			if (pos == mypos)
				continue;
			uint64_t y = slot_index(id, pos);
			_Atomic uint64_t *sy = slot_at(k, y);
			uint64_t ty = atomic_load_explicit(&sy[0], memory_order_seq_cst);
			/* A never-used slot ends the scan, as it ends create()'s:
			 * a claim is taken only at or before the first slot its
			 * claimer's scan found unused, and a slot unused now was
			 * unused then (tags never return to 0), so every other
			 * claim of the group is earlier in probe order than this
			 * slot.  (A forged 0 hides what lies past it from the
			 * lookups already.)  In a table far from full, most of a
			 * group: callgrind, ~14 instructions a slot not read. */
			if (ty == 0)
				break;
			/* another key's slot, the common case: no retry to count */
			if ((ty & ID_MASK) != id->id)
				continue;
			for (;; ++*tries) {
				if (*tries > RETRY_MAX) {
					/* a tag that keeps changing (forged): we
					 * cannot tell it is no copy; give ours up */
					abandon(s, bt);
					return -1;
				}
				if ((ty & ID_MASK) != id->id)
					break;
				if (KIND(ty) == K_LIVE) {
					uint64_t sty = atomic_load_explicit(state_at(k, sy),
					                                    memory_order_acquire);
					if ((sty & S_RET) || !words_match(k, sy, id))
						break;
					abandon(s, bt); /* a live copy wins */
					*tag = ty;
					return (int64_t)y;
				}
				if (KIND(ty) != K_BUSY || words_foreign(k, sy, id))
					break;
				if (pos < mypos) {
					help = (int64_t)y; /* the earlier claim wins */
					help_tag = ty;
					break;
				}
				/* kill the later claim (it can never publish) */
				if (atomic_compare_exchange_strong_explicit(
					    &sy[0], &ty, MK_TAG(K_OPEN, next_gen(GEN(ty)), 0, 0),
					    memory_order_seq_cst, memory_order_seq_cst))
					break;
			}
		}
		if (help >= 0) {
			abandon(s, bt);
			x = (uint64_t)help;
			bt = help_tag;
			continue;
		}
		/* 3. initialise the state if it is still retired */
		_Atomic uint64_t *sw = state_at(k, s);
		/* The owner counter first (acquire: pairs with the pair CAS
		 * that wrote it), then the state. */
		uint64_t owner = atomic_load_explicit(&sw[1], memory_order_acquire);
		uint64_t st = atomic_load_explicit(sw, memory_order_acquire);
		struct kp p;
		kp_load(k, &p);
		if (st & S_RET) {
			uint64_t floor = atomic_load_explicit(&k->floors[id->group],
			                                      memory_order_relaxed);
			uint64_t init = sluice__keyed_successor(k, &p, st, floor, now);
			/* The first state is of era p.era (GCRA, LEAKY: its
			 * parity), computed from readings made before the era
			 * check: if a change was published meanwhile, start
			 * over (keyed_live.c needs every state of an era to
			 * come from readings before the next era's
			 * publication). */
			if (!kp_same(k, p.era)) {
				if (++*tries > RETRY_MAX) {
					abandon(s, bt);
					return -1;
				}
				continue;
			}
			/* A new owner: the state and owner + 1 in one pair CAS
			 * (a full barrier, so also the release by which a
			 * decision that acquires this value, or a later one,
			 * sees the tag this claim changed), expecting the owner
			 * read before the state, so it fails after any other
			 * initialisation however long this completer stalled,
			 * even one whose retired value repeats st bit for bit
			 * (an EVICT slot evicted back to it); a decision or a
			 * release expecting an older owner then fails. */
			sluice__pair_cas(sw, st, owner, init, owner + 1);
		}
		if (test_stop == 3)
			return -1;
		/* 4. publish (release: key words and state) */
		uint64_t lt = MK_TAG(K_LIVE, g, id->id, 0), cur = bt;
		if (atomic_compare_exchange_strong_explicit(&s[0], &cur, lt, memory_order_seq_cst,
		                                            memory_order_seq_cst)) {
			STAT2(k, creations, 1, live, 1);
			*tag = lt;
			return (int64_t)x;
		}
		if ((cur | REF) == (lt | REF)) {
			*tag = cur; /* a helper published it */
			return (int64_t)x;
		}
		return -1;
	}
	return -1;
}

/* CLOCK's second chance: the victim had its REF bit set, so every key of
 * the same loss had it too; they all have had their chance now.  Relaxed:
 * a hint; a CAS that fails (the tag moved) leaves it. */
static void clear_refs(const sluice_keyed_t *k, const struct kid *id, const uint64_t *loss,
                       uint64_t vloss)
{
	for (unsigned pos = 0; pos < G; pos++) {
		if (loss[pos] != vloss)
			continue;
		_Atomic uint64_t *s = slot_at(k, slot_index(id, pos));
		uint64_t t = atomic_load_explicit(&s[0], memory_order_relaxed);
		if (KIND(t) == K_LIVE && (t & REF))
			atomic_compare_exchange_strong_explicit(&s[0], &t, t & ~REF,
			                                        memory_order_relaxed,
			                                        memory_order_relaxed);
	}
}

struct cand {
	int64_t i;
	uint64_t t, st;
};


/*
 * create - give @id's key a slot (or find that it got one meanwhile).
 * Each round scans the group and tries one slot; a round that loses its
 * slot (the slot changed under it) counts as a retry in *@tries, so a
 * creation ends after at most RETRY_MAX rounds (SLUICE_EBUSY).
 * Return: the slot (*tag set), or -1 with *rc the policy's answer.
 */
int64_t sluice__keyed_create(const sluice_keyed_t *k, const struct kid *id, uint64_t now,
                      sluice_decision_t *d, int *rc, uint64_t *tag, unsigned *tries)
{
	for (;; ++*tries) {
		struct kp p;
		hw_note(k, now); /* the initialisation's reading (keyed_live.c) */
		kp_load(k, &p);
		if (*tries > RETRY_MAX) {
			busy_decision(p.nmax, d, now);
			*rc = SLUICE_EBUSY;
			return -1;
		}
		struct cand open = { -1, 0, 0 }, steal = { -1, 0, 0 }, fresh = { -1, 0, 0 };
		struct cand victim = { -1, 0, 0 }, pending = { -1, 0, 0 };
		uint64_t vloss = UINT64_MAX, vref = 2, min_wait = SLUICE_NEVER, lnow = 0;
		uint64_t losses[G];
		int have_lnow = 0;
		for (unsigned pos = 0; pos < G; pos++) {
			losses[pos] = UINT64_MAX;
			uint64_t i = slot_index(id, pos);
			_Atomic uint64_t *s = slot_at(k, i);
			/* seq_cst: the claim protocol's scans (see complete()). */
			uint64_t t = atomic_load_explicit(&s[0], memory_order_seq_cst);
			if (KIND(t) == K_OPEN) {
				if (open.i < 0)
					open = (struct cand){ (int64_t)i, t, 0 };
				/* A never-used slot (tag 0) ends the scan: every key
				 * is placed in the first OPEN (or retired) slot of its
				 * probe order, which is never after a slot that is
				 * still unused, and slots never become unused again.
				 * So neither the key nor a claim for it is further,
				 * and we take this slot or an earlier one.  (Lookups
				 * and the validation scan stop here too.) */
				if (t == 0)
					break;
				continue;
			}
			if (KIND(t) == K_BUSY) {
				if ((t & ID_MASK) == id->id && !words_foreign(k, s, id)) {
					if (pending.i < 0)
						pending = (struct cand){ (int64_t)i, t, 0 };
					continue;
				}
				if (!have_lnow) {
					lnow = lease_now();
					have_lnow = 1;
				}
				if (((lnow - (t & UNIT_MASK)) & UNIT_MASK) > LEASE_UNITS && steal.i < 0)
					steal = (struct cand){ (int64_t)i, t, 0 };
				continue;
			}
			if (KIND(t) != K_LIVE)
				continue;
			/* Acquire: a retired value comes with the floor raised
			 * before it (DESIGN). */
			uint64_t st = atomic_load_explicit(state_at(k, s), memory_order_acquire);
			if (st & S_RET) {
				if (open.i < 0) /* a half-done reclaim: claimable now */
					open = (struct cand){ (int64_t)i, t, st };
				continue;
			}
			if ((t & ID_MASK) == id->id && words_match(k, s, id)) {
				*tag = t; /* created meanwhile */
				return (int64_t)i;
			}
			uint64_t loss = 0, wait;
			if (sluice__keyed_state_fresh(k, &p, s, st, now, &loss, &wait)) {
				if (fresh.i < 0)
					fresh = (struct cand){ (int64_t)i, t, st };
				continue;
			}
			if (wait < min_wait)
				min_wait = wait;
			losses[pos] = loss;
			if (loss < vloss || (loss == vloss && (t & REF) < vref)) {
				victim = (struct cand){ (int64_t)i, t, st };
				vloss = loss;
				vref = t & REF;
			}
		}
		if (pending.i >= 0) {
			int64_t r = complete(k, id, (uint64_t)pending.i, pending.t, now, tag, tries);
			if (r >= 0 || test_stop)
				return r;
			continue;
		}
		struct cand c = open.i >= 0 ? open : steal.i >= 0 ? steal : fresh;
		int evicting = 0;
		if (c.i < 0) {
			if (k->policy == SLUICE_KEYED_EVICT && victim.i >= 0) {
				c = victim;
				evicting = 1;
			} else if (k->policy == SLUICE_KEYED_ALLOW) {
				STAT(k, untracked, 1);
				if (d) {
					d->allowed = 1;
					d->limit = 0; /* untracked: no limit applied */
					d->remaining = 0;
					d->retry_after_ns = 0;
					d->delay_ns = 0;
					d->reset_ns = 0;
					d->now_ns = now;
				}
				*rc = 1;
				return -1;
			} else {
				STAT(k, rejections, 1);
				if (d) {
					d->allowed = 0;
					d->limit = p.nmax;
					d->remaining = 0;
					d->retry_after_ns = min_wait == SLUICE_NEVER ? 0 : min_wait;
					d->delay_ns = 0;
					d->reset_ns = 0;
					d->now_ns = now;
				}
				*rc = SLUICE_EKEYFULL;
				return -1;
			}
		}
		_Atomic uint64_t *s = slot_at(k, (uint64_t)c.i);
		if (c.i == fresh.i || evicting) {
			/* Retire the old key's state: from here it takes no
			 * admission.  The floor first (DESIGN). */
			raise_floor(k, id->group, now, tries);
			uint64_t st = c.st;
			/* Judged fresh (or least loaded) in era p.era: if a
			 * change came since, judge again in the new era (a
			 * change can make a fresh state owe: keyed_live.c). */
			if (!kp_same(k, p.era))
				continue;
			/* Release: publishes the floor to whoever acquires the
			 * retired value. */
			if (!atomic_compare_exchange_strong_explicit(state_at(k, s), &st, S_RET | c.st,
			                                             memory_order_release,
			                                             memory_order_relaxed))
				continue; /* the key was used meanwhile: look again */
			if (evicting) {
				STAT2(k, live, (uint64_t)-1, evictions, 1);
				if (vref)
					clear_refs(k, id, losses, vloss);
			} else {
				STAT2(k, live, (uint64_t)-1, reclaims, 1);
			}
			if (test_stop == 4)
				return -1;
		}
		if (!have_lnow)
			lnow = lease_now();
		uint64_t bt = MK_TAG(K_BUSY, next_gen(GEN(c.t)), id->id, lnow);
		uint64_t t = c.t;
		int taken = 0;
		for (; *tries <= RETRY_MAX; ++*tries) {
			/* The claim: the tag and the slot's 64-bit claim counter
			 * (s[1], + 1 per claim, never wrapping) in one pair CAS,
			 * a full barrier: the first half of the Dekker pairing
			 * with other claimers' validation scans (as a seq_cst
			 * CAS of the tag was). */
			STALL(STALL_CLAIM, &s[0]);
			uint64_t cc = atomic_load_explicit(&s[1], memory_order_acquire);
			if (sluice__pair_cas(&s[0], t, cc, bt, cc + 1)) {
				taken = 1;
				break;
			}
			t = atomic_load_explicit(&s[0], memory_order_seq_cst);
			/* A LIVE tag whose REF bit moved is still ours to take. */
			if (!(KIND(c.t) == K_LIVE && (t | REF) == (c.t | REF)))
				break;
		}
		if (!taken)
			continue;
		if (c.i == steal.i)
			STAT(k, steals, 1);
		if (test_stop == 1)
			return -1;
		int64_t r = complete(k, id, (uint64_t)c.i, bt, now, tag, tries);
		if (r >= 0 || test_stop)
			return r;
	}
}

#ifdef SLUICE_TESTING
/* Test builds only (tests/core/test_keyed_faults.c): run a creation of @key
 * that stops after step @stop as if its process were killed there: 1 after
 * the claim CAS, 2 after the key words, 3 after the state, 4 after retiring
 * a reclaimed or evicted state (before the tag CAS).  Not thread-safe.
 * Declared in keyed_internal.h. */
int sluice__keyed_test_stall(sluice_keyed_t *k, const void *key, size_t keylen, uint64_t now,
                             int stop)
{
	struct kid id;
	int rc = make_kid(k, key, keylen, &id);
	if (rc != 0)
		return rc;
	uint64_t tag;
	unsigned tries = 0;
	test_stop = stop;
	int64_t i = sluice__keyed_create(k, &id, now, NULL, &rc, &tag, &tries);
	test_stop = 0;
	return i >= 0 ? 1 : 0;
}
#endif
