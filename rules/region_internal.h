/* SPDX-License-Identifier: MIT */
/*
 * rules/region_internal.h - the engine's shared region: a directory of
 * keyed tables in MAP_SHARED memory, the holders that use them, and the
 * reuse of what no holder uses any more (rules/region.c says how).
 * Every call but the fork ones runs under the engine's load mutex.
 */
#ifndef SLUICE_RULES_REGION_INTERNAL_H
#define SLUICE_RULES_REGION_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/engine.h"
#include "sluice/keyed.h"
#include "sluice/rules.h"

/* sluice__region_table's own code, never returned by the engine: the
 * header changed since open (compile() reports it as SLUICE_ELAYOUT) */
#define SLUICE__EREGION 1000

/* FNV-1a, the digest of a table's name and layout (reload.c names a
 * table's layout with it, region.c its directory entry). */
static inline uint64_t sluice__fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}
#define SLUICE__FNV_BASIS 0xcbf29ce484222325ULL

/* Open @mem (@bytes) for @e: format it if all zero, else check it is the
 * engine's; register @e as one of its holders.  Return: 0, SLUICE_ENOMEM,
 * SLUICE_EBUSY (being formatted for too long, or every holder slot is
 * taken by a live process), SLUICE_ELAYOUT (something else). */
int sluice__region_open(sluice_engine_t *e, void *mem, size_t bytes);
/* Release every table @e holds and its holder slot; free the handle. */
void sluice__region_close(sluice_engine_t *e);
size_t sluice__region_used(const sluice_engine_t *e);
/* Bytes of free extents a new table could take (tests, info). */
size_t sluice__region_free_bytes(const sluice_engine_t *e);

/* The table named (@id, @d, @dname, @layout_digest), found and attached
 * or claimed, formatted and attached, into *@k; *@held is set to the
 * entry's handle (> 0) that sluice__region_release takes.  Return: 0 or a
 * sluice code (SLUICE__EREGION: the header changed). */
int sluice__region_table(sluice_engine_t *e, const char *id, const sluice_rules_dim_t *d,
                         const char *dname, const sluice_keyed_config_t *kc,
                         uint64_t layout_digest, sluice_keyed_t *k, uint32_t *held);
/* A block of @bytes named (@id, @tag, @layout_digest), zeroed when it is
 * made, found and held: *@mem (64-byte aligned), *@held as above.
 * Return: 0 or a sluice code. */
#define SLUICE__REGION_BLOCK 0xffffffffu /* an entry's kind: not a table */
int sluice__region_block(sluice_engine_t *e, const char *id, const char *tag,
                         uint64_t layout_digest, size_t bytes, void **mem, uint32_t *held);
/* @e no longer uses the entry of @held (0: nothing). */
void sluice__region_release(sluice_engine_t *e, uint32_t held);
/* Give back what dead holders held, and turn every table no holder holds
 * into free space (called by each load before it compiles). */
void sluice__region_reclaim(sluice_engine_t *e);

/* fork(): prepare, with @e's load mutex held (reserves the child's holder
 * slot and gives it every table @e holds); child: take that slot, or mark
 * the region lost (engine.h FORK). */
void sluice__region_fork_prepare(sluice_engine_t *e);
void sluice__region_fork_child(sluice_engine_t *e);

#endif
