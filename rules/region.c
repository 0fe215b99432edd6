/* SPDX-License-Identifier: MIT */
/*
 * rules/region.c - the engine's shared region (engine.h SHARED STATE): a
 * directory of keyed tables, the holders that use them, and the reuse of
 * the space of tables no holder uses.
 *
 * LAYOUT.  A 64-byte header; SLUICE_ENGINE_HOLDERS holder slots of 16
 * bytes; SLUICE_ENGINE_DIR_SLOTS directory entries of 256 bytes; then the
 * tables, each in an extent of 64-byte units taken from the free extents
 * or from a bump offset that only grows.
 *
 * HOLDERS.  A holder is one engine in one process.  Its slot's word is
 * 0 (free), LIVE|identity, PENDING|identity of the parent that reserved it
 * for a child across fork(), or DEAD|identity of the holder clearing it.
 * An identity is the pid (identity() says why not its start time too).
 * A holder is dead when kill(pid, 0) says ESRCH or /proc says
 * the pid is a zombie; when /proc cannot be read it is taken as alive (a
 * table kept too long, never one freed too soon).  A stopped process
 * (SIGSTOP) is alive: its tables are kept.  A pid reused by a new process
 * keeps the old holder's tables until the new process exits.
 *
 * ENTRIES.  A word: EMPTY (ends a probe chain), CLAIMED|fp (being made by
 * its claimer), READY|fp, RECLAIMING|fp (a reclaimer checking it),
 * FREE (no name; its extent is free space), TAKING (a claimer taking that
 * extent) or TOMB (no name, no extent).  fp is 61 bits of the name's
 * digest.  Each entry has a bit per holder slot: set by a holder before it
 * uses the table, cleared after its last use (a grace period after the
 * set that used it was unpublished: reload.c).
 *
 * FREEING.  A reclaimer (any load) CASes READY -> RECLAIMING and then
 * reads the holder bits; an attacher sets its bit and then reads the word
 * again.  Both are seq_cst, so one of them sees the other (the store-load
 * pattern): either the reclaimer sees the bit and restores READY, or the
 * attacher sees the word changed and clears its bit and looks again.  A
 * table is therefore freed only when no holder uses it and none can
 * start to.  A dead holder's bits are cleared by the one holder that
 * CASed its slot to DEAD, before the slot is free again (a release store
 * that the next claimant's CAS acquires), so no bit of a later holder is
 * cleared by mistake; if that holder dies too, another takes over.
 *
 * CLAIMS.  A claim takes the first TOMB or EMPTY entry of the name's
 * chain with a seq_cst CAS, then scans the chain again for another claim
 * of the same name: two processes claiming one name at once see each
 * other's (store-load again), and each one that sees another gives its
 * entry back (TOMB) and starts over, so at most one table per name is
 * ever made; the retries are bounded (SLUICE_EBUSY).  A claim whose
 * claimer died (every holder of the entry dead, after a wait of
 * SLUICE_KEYED_LEASE_MS) is turned into a TOMB, its extent lost; a
 * claimer that was only slow finds its publishing CAS failed and starts
 * over.  An extent is reused whole, by a table no larger than it (best
 * fit); free extents are not merged, so tables that keep growing can
 * still exhaust the region.
 *
 * HOSTILE BYTES.  Everything read from the region is checked (offsets and
 * extents against the region, which only the private copies taken at
 * open describe; attach validates the table itself), so another
 * process's bytes cannot make this one read or write outside it.  A load
 * also checks that the header still says what it said at open and that
 * the bump offset has not gone back below the end of any table this
 * engine made or attached: either changed, the load fails with
 * SLUICE_ELAYOUT before it writes anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine_internal.h"
#include "region_internal.h"
#include "sluice/error.h"

#define REGION_MAGIC 0x736c7569636552ULL /* "sluiceR" */
#define REGION_INIT 1ULL
#define REGION_VERSION 2u

/* an entry's word: the state in the low 3 bits, fp above */
enum { E_EMPTY, E_CLAIMED, E_READY, E_RECLAIMING, E_FREE, E_TAKING, E_TOMB };
#define E_STATE(w) ((w) & 7u)
#define E_FP(w) ((w) >> 3)

/* a holder's word: the state in the low 2 bits, the identity above */
enum { H_FREE, H_LIVE, H_PENDING, H_DEAD };
#define H_STATE(w) ((w) & 3u)
#define H_ID(w) ((w) & ~(uint64_t)3)

/* a child's slot reserved across fork() and never taken is given back
 * after this much real time (engine.h FORK) */
#define PENDING_MS 10000u
/* claims given back and started over before SLUICE_EBUSY */
#define CLAIM_TRIES 64

struct rhdr {
	_Atomic uint64_t magic;
	uint64_t version, slots, bytes, data_off;
	_Atomic uint64_t used; /* bytes taken after data_off */
	unsigned char pad[16];
};

struct rholder {
	_Atomic uint64_t word;
	_Atomic uint64_t since_ms; /* PENDING: when it was reserved */
};

struct rent {
	_Atomic uint64_t word;
	uint64_t digest, off, bytes, cap; /* cap: the extent, bytes: the table */
	_Atomic uint64_t holders[SLUICE_ENGINE_HOLDERS / 64];
	uint32_t kind;
	char id[SLUICE_RULES_ID_MAX + 1];
	/* the dimension's name, cut to fit: the digest tells longer ones apart */
	char name[256 - 8 * 5 - SLUICE_ENGINE_HOLDERS / 8 - 4 - (SLUICE_RULES_ID_MAX + 1) - 2];
	unsigned char pad[2];
};
_Static_assert(sizeof(struct rent) == 256, "a directory entry is 256 bytes");
_Static_assert(sizeof(((struct rent *)0)->name) >= 64, "room for a header's name");
_Static_assert(SLUICE_ENGINE_HOLDERS % 64 == 0, "holder bits come in words");

#define HOLDERS_OFF 64u
#define ENTS_OFF (HOLDERS_OFF + SLUICE_ENGINE_HOLDERS * sizeof(struct rholder))
_Static_assert(ENTS_OFF % 64 == 0, "entries start on a line");

struct sluice__region {
	unsigned char *base;
	size_t bytes;
	struct rhdr *hdr;
	struct rholder *holders;
	struct rent *ents;
	/* private copies, taken at open: what the header said then */
	uint64_t data_off;
	uint64_t seen_end; /* the end of the furthest table made or attached */
	int slot;          /* this engine's holder slot, -1: none           */
	uint64_t self;     /* its identity (H_ID form)                      */
	int fork_slot;     /* reserved for the child across fork(), -1: none */
	uint64_t fork_parent; /* the word that slot holds (PENDING|self)    */
	/* how many of this engine's states use each entry: the bit is set on
	 * 0 -> 1 and cleared on 1 -> 0 */
	uint32_t held[SLUICE_ENGINE_DIR_SLOTS];
};

/* ---- identities ---------------------------------------------------- */

/* Whether /proc says @pid is gone or a zombie (its state, field 3 of
 * /proc/PID/stat).  Return: 1 gone or a zombie, 0 a live process, -1
 * cannot tell. */
static int proc_gone(long pid)
{
	char path[40] = "/proc/", *p = path + 6, digits[24];
	int nd = 0;
	for (long v = pid; v > 0 && nd < 20; v /= 10)
		digits[nd++] = (char)('0' + v % 10);
	while (nd)
		*p++ = digits[--nd];
	memcpy(p, "/stat", 6);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? 1 : -1;
	char buf[1024];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* "pid (comm) S ...": comm may hold anything, so from its last ')' */
	char *c = strrchr(buf, ')');
	if (!c || c[1] != ' ')
		return -1;
	return c[2] == 'Z' || c[2] == 'X';
}

/* An identity: the pid in bits 2..25 (Linux pids are below 2^22), in a
 * holder's word beside its state.  Not the pid's start time too: under
 * an emulator (qemu-user) a process's own /proc/self is the emulator's
 * invention and disagrees with what other processes read in
 * /proc/PID/stat, which made a live holder look like a reused pid and its
 * tables be freed under it.  So a pid reused by another process keeps the
 * slot (and its tables) until that process exits too: space kept, never a
 * table freed under a holder. */
static uint64_t identity(long pid)
{
	return ((uint64_t)pid & 0xffffffu) << 2;
}

static uint64_t self_identity(void)
{
	return identity((long)getpid());
}

/* Return: 0 when @id's process has exited (or is a zombie), else 1; a
 * pid /proc cannot tell about is alive (a table kept too long, never one
 * freed too soon).  Bits other than the pid's (another process may have
 * written them) are ignored. */
static int alive(uint64_t id)
{
	long pid = (long)((id >> 2) & 0xffffffu);
	if (pid <= 0)
		return 0;
	if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
		return 0;
	return proc_gone(pid) != 1;
}

static uint64_t real_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- holder slots -------------------------------------------------- */

/* Claim a free holder slot as @word (H_LIVE or H_PENDING with an
 * identity).  Return: the slot, or -1. */
static int slot_claim(struct sluice__region *g, uint64_t word)
{
	for (int s = 0; s < (int)SLUICE_ENGINE_HOLDERS; s++) {
		uint64_t w = 0;
		/* Acquire: pairs with the release store that freed the slot,
		 * after every bit of its last holder was cleared. */
		if (atomic_compare_exchange_strong_explicit(&g->holders[s].word, &w, word,
		                                            memory_order_acquire,
		                                            memory_order_relaxed)) {
			atomic_store_explicit(&g->holders[s].since_ms, real_ms(), memory_order_relaxed);
			return s;
		}
	}
	return -1;
}

static void bit_set(struct rent *en, int slot)
{
	/* seq_cst: the attach side of FREEING's store-load pattern */
	atomic_fetch_or_explicit(&en->holders[slot / 64], 1ULL << (slot % 64),
	                         memory_order_seq_cst);
}

static void bit_clear(struct rent *en, int slot)
{
	/* release: this holder's uses of the table come before a reclaimer
	 * that reads the bits cleared (its seq_cst load) frees it */
	atomic_fetch_and_explicit(&en->holders[slot / 64], ~(1ULL << (slot % 64)),
	                          memory_order_release);
}

static int held_by_anyone(struct rent *en)
{
	for (unsigned i = 0; i < SLUICE_ENGINE_HOLDERS / 64; i++)
		if (atomic_load_explicit(&en->holders[i], memory_order_seq_cst))
			return 1;
	return 0;
}

/* Every holder bit of @en belongs to a dead holder or a free slot. */
static int holders_gone(struct sluice__region *g, struct rent *en)
{
	for (int s = 0; s < (int)SLUICE_ENGINE_HOLDERS; s++) {
		if (!(atomic_load_explicit(&en->holders[s / 64], memory_order_acquire) &
		      (1ULL << (s % 64))))
			continue;
		uint64_t w = atomic_load_explicit(&g->holders[s].word, memory_order_acquire);
		if (H_STATE(w) == H_LIVE && alive(H_ID(w)))
			return 0;
		if (H_STATE(w) == H_PENDING)
			return 0;
	}
	return 1;
}

/* Clear a dead holder's slot @s (its word @w) if this engine wins it. */
static void slot_bury(struct sluice__region *g, int s, uint64_t w)
{
	if (!atomic_compare_exchange_strong_explicit(&g->holders[s].word, &w, g->self | H_DEAD,
	                                             memory_order_acquire, memory_order_relaxed))
		return;
	for (unsigned i = 0; i < SLUICE_ENGINE_DIR_SLOTS; i++)
		bit_clear(&g->ents[i], s);
	atomic_store_explicit(&g->holders[s].since_ms, 0, memory_order_relaxed);
	/* Release: the bits cleared above come before the slot's next
	 * claimant (slot_claim's acquire CAS) sets any of its own. */
	atomic_store_explicit(&g->holders[s].word, 0, memory_order_release);
}

/* ---- open, close --------------------------------------------------- */

int sluice__region_open(sluice_engine_t *e, void *mem, size_t bytes)
{
	struct sluice__region *g = calloc(1, sizeof(*g));
	if (!g)
		return SLUICE_ENOMEM;
	g->base = mem;
	g->bytes = bytes;
	g->hdr = mem;
	g->holders = (struct rholder *)(g->base + HOLDERS_OFF);
	g->ents = (struct rent *)(g->base + ENTS_OFF);
	g->slot = g->fork_slot = -1;
	uint64_t data = ENTS_OFF + (uint64_t)SLUICE_ENGINE_DIR_SLOTS * sizeof(struct rent);
	uint64_t m = 0;
	g->data_off = data;
	g->seen_end = data;
	/* The first engine formats the header: CAS 0 -> INIT, the fields,
	 * then the magic with a release store that attachers' acquire pairs
	 * with.  A region of all zero bytes is a new one. */
	if (atomic_compare_exchange_strong_explicit(&g->hdr->magic, &m, REGION_INIT,
	                                            memory_order_relaxed, memory_order_relaxed)) {
		g->hdr->version = REGION_VERSION;
		g->hdr->slots = SLUICE_ENGINE_DIR_SLOTS;
		g->hdr->bytes = bytes;
		g->hdr->data_off = data;
		atomic_store_explicit(&g->hdr->used, 0, memory_order_relaxed);
		/* Publishes the header fields; pairs with the acquire below
		 * in another process. */
		atomic_store_explicit(&g->hdr->magic, REGION_MAGIC, memory_order_release);
	} else {
		uint64_t t0 = real_ms();
		/* Pairs with the formatter's release store of the magic. */
		while ((m = atomic_load_explicit(&g->hdr->magic, memory_order_acquire)) ==
		       REGION_INIT) {
			if (real_ms() - t0 > SLUICE_KEYED_LEASE_MS) {
				free(g);
				return SLUICE_EBUSY;
			}
			sched_yield();
		}
		if (m != REGION_MAGIC || g->hdr->version != REGION_VERSION ||
		    g->hdr->slots != SLUICE_ENGINE_DIR_SLOTS || g->hdr->data_off != data ||
		    g->hdr->bytes != bytes) {
			free(g);
			return SLUICE_ELAYOUT;
		}
	}
	g->self = self_identity();
	e->region = g;
	e->region_bytes = bytes;
	g->slot = slot_claim(g, g->self | H_LIVE);
	if (g->slot < 0) {
		sluice__region_reclaim(e); /* dead holders give theirs back */
		g->slot = slot_claim(g, g->self | H_LIVE);
	}
	if (g->slot < 0) {
		e->region = NULL;
		free(g);
		return SLUICE_EBUSY;
	}
	return 0;
}

void sluice__region_close(sluice_engine_t *e)
{
	struct sluice__region *g = e->region;
	if (!g)
		return;
	if (!e->region_lost && g->slot >= 0) {
		for (unsigned i = 0; i < SLUICE_ENGINE_DIR_SLOTS; i++)
			if (g->held[i])
				bit_clear(&g->ents[i], g->slot);
		/* Release: pairs with the next claimant's acquire CAS. */
		atomic_store_explicit(&g->holders[g->slot].word, 0, memory_order_release);
	}
	free(g);
	e->region = NULL;
}

size_t sluice__region_used(const sluice_engine_t *e)
{
	if (!e->region)
		return 0;
	/* the private data_off; a used past the region (rewritten) is
	 * reported as the whole region */
	const struct sluice__region *g = e->region;
	uint64_t used = atomic_load_explicit(&g->hdr->used, memory_order_relaxed);
	if (used > g->bytes - g->data_off)
		used = g->bytes - g->data_off;
	return (size_t)(g->data_off + used);
}

size_t sluice__region_free_bytes(const sluice_engine_t *e)
{
	const struct sluice__region *g = e->region;
	size_t n = 0;
	for (unsigned i = 0; g && i < SLUICE_ENGINE_DIR_SLOTS; i++)
		if (E_STATE(atomic_load_explicit(&g->ents[i].word, memory_order_acquire)) == E_FREE)
			n += (size_t)g->ents[i].cap;
	return n;
}

/* ---- space --------------------------------------------------------- */

/* Does the shared header still say what it said at open, and has the
 * bump offset not gone back?  @used: the offset read.  Return: 1 if so. */
static int header_intact(const struct sluice__region *g, uint64_t used)
{
	const struct rhdr *h = g->hdr;
	return atomic_load_explicit(&g->hdr->magic, memory_order_relaxed) == REGION_MAGIC &&
	       h->version == REGION_VERSION && h->slots == SLUICE_ENGINE_DIR_SLOTS &&
	       h->bytes == g->bytes && h->data_off == g->data_off &&
	       used <= g->bytes - g->data_off && g->data_off + used >= g->seen_end;
}

static void saw_table(struct sluice__region *g, uint64_t off, uint64_t bytes)
{
	if (off + bytes > g->seen_end)
		g->seen_end = off + bytes;
}

/* The smallest free extent of at least @sz bytes, taken: *@at, *@cap.
 * Return: 1 taken, 0 none. */
static int take_free(struct sluice__region *g, uint64_t sz, uint64_t *at, uint64_t *cap)
{
	for (unsigned round = 0; round < SLUICE_ENGINE_DIR_SLOTS; round++) {
		int best = -1;
		uint64_t best_cap = 0;
		for (unsigned i = 0; i < SLUICE_ENGINE_DIR_SLOTS; i++) {
			struct rent *en = &g->ents[i];
			if (E_STATE(atomic_load_explicit(&en->word, memory_order_relaxed)) != E_FREE)
				continue;
			uint64_t c = en->cap; /* a hint until the entry is ours */
			if (c >= sz && (best < 0 || c < best_cap)) {
				best = (int)i;
				best_cap = c;
			}
		}
		if (best < 0)
			return 0;
		struct rent *en = &g->ents[best];
		uint64_t w = E_FREE;
		/* Acquire: pairs with the reclaimer's release store of FREE,
		 * after which off and cap are the extent's. */
		if (!atomic_compare_exchange_strong_explicit(&en->word, &w, E_TAKING,
		                                             memory_order_acquire,
		                                             memory_order_relaxed))
			continue;
		uint64_t off = en->off, c = en->cap; /* read once: shared */
		uint64_t used = atomic_load_explicit(&g->hdr->used, memory_order_relaxed);
		int sane = off >= g->data_off && off % 64 == 0 && c % 64 == 0 && off <= g->bytes &&
		           c <= g->bytes - off && off + c <= g->data_off + used;
		if (sane && c < sz) {
			/* Release: hands off and cap back to the next taker. */
			atomic_store_explicit(&en->word, E_FREE, memory_order_release);
			continue;
		}
		atomic_store_explicit(&en->word, E_TOMB, memory_order_release);
		if (!sane)
			continue; /* hostile or torn bytes: the extent is dropped */
		*at = off;
		*cap = c;
		return 1;
	}
	return 0;
}

/* @sz bytes from the bump offset: *@at.  Return: 0, SLUICE_EMEMORY,
 * SLUICE_EBUSY, SLUICE__EREGION. */
static int take_bump(struct sluice__region *g, uint64_t sz, uint64_t *at)
{
	/* a CAS taken only when the table fits, so a table too large for
	 * what is left takes nothing and a smaller one can still come; the
	 * retries are bounded (other processes taking space).  Relaxed: the
	 * entry's release publishes the table, the offset only partitions. */
	uint64_t room = g->bytes - g->data_off;
	uint64_t off = atomic_load_explicit(&g->hdr->used, memory_order_relaxed);
	for (int tries = 0; tries < 4096; tries++) {
		/* each value the CAS could take is checked, with the header
		 * (another process may have rewritten either since open) */
		if (!header_intact(g, off))
			return SLUICE__EREGION;
		if (sz > room - off)
			return SLUICE_EMEMORY;
		if (atomic_compare_exchange_weak_explicit(&g->hdr->used, &off, off + sz,
		                                          memory_order_relaxed,
		                                          memory_order_relaxed)) {
			*at = g->data_off + off;
			return 0;
		}
	}
	return SLUICE_EBUSY;
}

/* ---- tables -------------------------------------------------------- */

#define RETRY 1 /* find_or_claim: look again */

struct want {
	const char *id, *dname;
	uint32_t kind;
	uint64_t h, fp;
	size_t need;
	const sluice_keyed_config_t *kc; /* a keyed table's; NULL: a block */
};

/* A new entry's memory made what it names: a keyed table formatted, a
 * block zeroed (an extent taken from the free ones holds old bytes). */
static int make(void *mem, const struct want *q)
{
	if (q->kc)
		return sluice_keyed_format(mem, q->need, q->kc);
	memset(mem, 0, q->need);
	return 0;
}

static int same_name(const struct rent *en, const struct want *q)
{
	return en->digest == q->h && en->kind == q->kind &&
	       strncmp(en->id, q->id, sizeof(en->id)) == 0 &&
	       strncmp(en->name, q->dname, sizeof(en->name) - 1) == 0;
}

static void hold(struct sluice__region *g, unsigned idx)
{
	if (g->held[idx]++ == 0)
		bit_set(&g->ents[idx], g->slot);
}

static void unhold(struct sluice__region *g, unsigned idx)
{
	if (g->held[idx] && --g->held[idx] == 0)
		bit_clear(&g->ents[idx], g->slot);
}

/* Hold READY entry @idx (its word @w): its memory into *@mem, *@bytes. */
static int attach(sluice_engine_t *e, unsigned idx, uint64_t w, const struct want *q,
                  void **mem, size_t *bytes, uint32_t *held)
{
	struct sluice__region *g = e->region;
	struct rent *en = &g->ents[idx];
	hold(g, idx);
	/* seq_cst: the other half of FREEING's pattern (after bit_set) */
	if (atomic_load_explicit(&en->word, memory_order_seq_cst) != w) {
		unhold(g, idx);
		return RETRY;
	}
	uint64_t eoff = en->off, ebytes = en->bytes; /* read once: shared */
	if (eoff < g->data_off || eoff > g->bytes || ebytes > g->bytes - eoff || ebytes < q->need ||
	    eoff % 64) {
		unhold(g, idx);
		return SLUICE_ELAYOUT;
	}
	saw_table(g, eoff, ebytes);
	*mem = g->base + eoff;
	*bytes = (size_t)ebytes;
	*held = idx + 1;
	return 0;
}

/* Is there, in @q's chain, a claim or a table of @q's name other than
 * entry @mine?  (seq_cst loads: the scan side of CLAIMS' pattern) */
static int claimed_elsewhere(struct sluice__region *g, const struct want *q, unsigned mine)
{
	for (uint64_t probe = 0; probe < SLUICE_ENGINE_DIR_SLOTS; probe++) {
		unsigned idx = (unsigned)((q->h + probe) % SLUICE_ENGINE_DIR_SLOTS);
		uint64_t w = atomic_load_explicit(&g->ents[idx].word, memory_order_seq_cst);
		if (E_STATE(w) == E_EMPTY)
			return 0;
		if (idx == mine || E_FP(w) != q->fp)
			continue;
		if (E_STATE(w) == E_CLAIMED || E_STATE(w) == E_RECLAIMING)
			return 1;
		if (E_STATE(w) == E_READY && same_name(&g->ents[idx], q))
			return 1;
	}
	return 0;
}

/* Claim entry @idx (seen as @w0: EMPTY or TOMB), make its memory, hold it. */
static int claim(sluice_engine_t *e, unsigned idx, uint64_t w0, const struct want *q,
                 void **mem, size_t *bytes, uint32_t *held)
{
	struct sluice__region *g = e->region;
	struct rent *en = &g->ents[idx];
	uint64_t mine = (q->fp << 3) | E_CLAIMED;
	/* seq_cst: the claim side of CLAIMS' pattern */
	if (!atomic_compare_exchange_strong_explicit(&en->word, &w0, mine, memory_order_seq_cst,
	                                             memory_order_relaxed))
		return RETRY;
	if (claimed_elsewhere(g, q, idx)) {
		/* Release: nothing of ours to publish; TOMB keeps the chain. */
		atomic_store_explicit(&en->word, E_TOMB, memory_order_release);
		return RETRY;
	}
	hold(g, idx);
	uint64_t sz = (q->need + 63) & ~(uint64_t)63, at = 0, cap = sz;
	int rc = take_free(g, sz, &at, &cap) ? 0 : take_bump(g, sz, &at);
	if (rc) {
		unhold(g, idx);
		atomic_store_explicit(&en->word, E_TOMB, memory_order_release);
		return rc;
	}
	saw_table(g, at, cap);
	en->digest = q->h;
	en->off = at;
	en->bytes = q->need;
	en->cap = cap;
	en->kind = q->kind;
	snprintf(en->id, sizeof(en->id), "%s", q->id);
	snprintf(en->name, sizeof(en->name), "%s", q->dname);
	rc = make(g->base + at, q);
	/* Release: publishes the entry's fields and the formatted table;
	 * pairs with the acquire loads of the word in find_or_claim.  A CAS:
	 * a claim taken for a dead claimer's (CLAIMS) is no longer ours. */
	uint64_t next = rc ? E_FREE : (q->fp << 3) | E_READY;
	if (!atomic_compare_exchange_strong_explicit(&en->word, &mine, next, memory_order_release,
	                                             memory_order_relaxed)) {
		unhold(g, idx);
		return RETRY; /* the extent is lost: never used twice */
	}
	if (rc) {
		unhold(g, idx);
		return rc;
	}
	*mem = g->base + at;
	*bytes = q->need;
	*held = idx + 1;
	return 0;
}

static int find_or_claim(sluice_engine_t *e, const struct want *q, void **mem, size_t *bytes,
                         uint32_t *held)
{
	struct sluice__region *g = e->region;
	long cand = -1;
	uint64_t cand_w = 0;
	for (uint64_t probe = 0; probe < SLUICE_ENGINE_DIR_SLOTS; probe++) {
		unsigned idx = (unsigned)((q->h + probe) % SLUICE_ENGINE_DIR_SLOTS);
		struct rent *en = &g->ents[idx];
		/* Acquire: pairs with the release store that made it READY */
		uint64_t w = atomic_load_explicit(&en->word, memory_order_acquire);
		unsigned st = (unsigned)E_STATE(w);
		if (st == E_EMPTY) {
			if (cand < 0) {
				cand = (long)idx;
				cand_w = w;
			}
			break;
		}
		if (st == E_TOMB) {
			if (cand < 0) {
				cand = (long)idx;
				cand_w = w;
			}
			continue;
		}
		if (st == E_FREE || st == E_TAKING || E_FP(w) != q->fp)
			continue;
		if (st == E_CLAIMED || st == E_RECLAIMING) {
			uint64_t t0 = real_ms();
			while (atomic_load_explicit(&en->word, memory_order_acquire) == w) {
				if (real_ms() - t0 > SLUICE_KEYED_LEASE_MS) {
					if (st == E_CLAIMED && holders_gone(g, en))
						/* a dead claimer's: CLAIMS */
						atomic_compare_exchange_strong_explicit(
							&en->word, &w, E_TOMB, memory_order_relaxed,
							memory_order_relaxed);
					else
						return SLUICE_EBUSY;
					break;
				}
				sched_yield();
			}
			return RETRY;
		}
		if (!same_name(en, q))
			continue;
		return attach(e, idx, w, q, mem, bytes, held);
	}
	if (cand < 0)
		return SLUICE_EMEMORY; /* the directory is full */
	return claim(e, (unsigned)cand, cand_w, q, mem, bytes, held);
}

/* The entry named by @q's fields: found and held, or made.  */
static int region_entry(sluice_engine_t *e, struct want *q, uint64_t layout_digest, void **mem,
                        size_t *bytes, uint32_t *held)
{
	*held = 0;
	if (!q->need)
		return SLUICE_EINVAL;
	if (e->region_lost)
		return SLUICE_ELAYOUT;
	uint64_t h = sluice__fnv(SLUICE__FNV_BASIS, q->id, strlen(q->id));
	h = sluice__fnv(h, &q->kind, sizeof(q->kind));
	h = sluice__fnv(h, q->dname, strlen(q->dname));
	h = sluice__fnv(h, &layout_digest, sizeof(layout_digest));
	q->h = h;
	q->fp = h >> 3;
	for (int tries = 0; tries < CLAIM_TRIES; tries++) {
		int rc = find_or_claim(e, q, mem, bytes, held);
		if (rc != RETRY)
			return rc;
		sched_yield();
	}
	return SLUICE_EBUSY;
}

int sluice__region_table(sluice_engine_t *e, const char *id, const sluice_rules_dim_t *d,
                         const char *dname, const sluice_keyed_config_t *kc,
                         uint64_t layout_digest, sluice_keyed_t *k, uint32_t *held)
{
	struct want q = { .id = id, .dname = dname, .kind = (uint32_t)d->kind, .kc = kc,
		          .need = sluice_keyed_region_bytes(kc) };
	void *mem = NULL;
	size_t bytes = 0;
	int rc = region_entry(e, &q, layout_digest, &mem, &bytes, held);
	if (rc == 0 && (rc = sluice_keyed_attach(mem, bytes, e->clock, k)) != 0) {
		sluice__region_release(e, *held);
		*held = 0;
	}
	return rc;
}

int sluice__region_block(sluice_engine_t *e, const char *id, const char *tag,
                         uint64_t layout_digest, size_t bytes, void **mem, uint32_t *held)
{
	struct want q = { .id = id, .dname = tag, .kind = SLUICE__REGION_BLOCK, .need = bytes };
	size_t got = 0;
	return region_entry(e, &q, layout_digest, mem, &got, held);
}

void sluice__region_release(sluice_engine_t *e, uint32_t held)
{
	if (held && e->region && !e->region_lost && held <= SLUICE_ENGINE_DIR_SLOTS)
		unhold(e->region, held - 1);
}

void sluice__region_reclaim(sluice_engine_t *e)
{
	struct sluice__region *g = e->region;
	if (!g || e->region_lost)
		return;
	uint64_t now = real_ms();
	for (int s = 0; s < (int)SLUICE_ENGINE_HOLDERS; s++) {
		if (s == g->slot)
			continue;
		uint64_t w = atomic_load_explicit(&g->holders[s].word, memory_order_acquire);
		switch (H_STATE(w)) {
		case H_LIVE:
			if (!alive(H_ID(w)))
				slot_bury(g, s, w);
			break;
		case H_PENDING: {
			uint64_t since = atomic_load_explicit(&g->holders[s].since_ms,
			                                      memory_order_relaxed);
			if (since && now - since > PENDING_MS)
				slot_bury(g, s, w);
			break;
		}
		case H_DEAD:
			if (H_ID(w) != g->self && !alive(H_ID(w)))
				slot_bury(g, s, w); /* its burier died burying it */
			break;
		default:
			break;
		}
	}
	for (unsigned i = 0; i < SLUICE_ENGINE_DIR_SLOTS; i++) {
		struct rent *en = &g->ents[i];
		uint64_t w = atomic_load_explicit(&en->word, memory_order_acquire);
		if (E_STATE(w) != E_READY || g->held[i] || held_by_anyone(en))
			continue;
		/* seq_cst: the reclaim side of FREEING's pattern */
		if (!atomic_compare_exchange_strong_explicit(&en->word, &w,
		                                             (w & ~(uint64_t)7) | E_RECLAIMING,
		                                             memory_order_seq_cst,
		                                             memory_order_relaxed))
			continue;
		/* Release either way: FREE hands off and cap to a taker's
		 * acquire CAS; READY back to the attachers' acquire loads. */
		atomic_store_explicit(&en->word, held_by_anyone(en) ? w : E_FREE,
		                      memory_order_release);
	}
}

/* ---- fork ---------------------------------------------------------- */

void sluice__region_fork_prepare(sluice_engine_t *e)
{
	struct sluice__region *g = e->region;
	g->fork_slot = -1;
	if (e->region_lost || g->slot < 0)
		return;
	g->fork_parent = g->self | H_PENDING;
	g->fork_slot = slot_claim(g, g->fork_parent);
	if (g->fork_slot < 0) {
		sluice__region_reclaim(e); /* exited children give theirs back */
		g->fork_slot = slot_claim(g, g->fork_parent);
	}
	if (g->fork_slot < 0)
		return;
	/* the child holds every table this engine holds, before fork()
	 * returns in the parent and the parent can let one go */
	for (unsigned i = 0; i < SLUICE_ENGINE_DIR_SLOTS; i++)
		if (g->held[i])
			bit_set(&g->ents[i], g->fork_slot);
}

void sluice__region_fork_child(sluice_engine_t *e)
{
	struct sluice__region *g = e->region;
	if (e->region_lost)
		return;
	uint64_t self = self_identity(), w = g->fork_parent;
	/* Acquire: a burier that took the slot first cleared its bits. */
	if (g->fork_slot < 0 ||
	    !atomic_compare_exchange_strong_explicit(&g->holders[g->fork_slot].word, &w,
	                                             self | H_LIVE, memory_order_acquire,
	                                             memory_order_relaxed)) {
		e->region_lost = 1;
		return;
	}
	g->slot = g->fork_slot;
	g->fork_slot = -1;
	g->self = self;
}
