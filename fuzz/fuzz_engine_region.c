/* SPDX-License-Identifier: MIT */
/*
 * fuzz_engine_region.c - the rules engine's shared region (engine.h SHARED
 * STATE, rules/region.c) written by a hostile or buggy process.
 *
 * rules/region.c: "Everything read from the region is checked ... so
 * another process's bytes cannot make this one read or write outside it",
 * and STYLE.md: nothing another process does to shared memory may crash
 * this one or make a call spin forever.  Each input:
 *   1. a region of 1 MiB (the smallest, in a heap block of exactly that
 *      size: AddressSanitizer flags any access past it) is zeroed, an
 *      engine opened on it and a file loaded (a per-key table, a global
 *      rule held as a table of one key, their metrics blocks), a few
 *      decisions made;
 *   2. the input is a list of patches (offset, 1..16 bytes) written over
 *      the region: most land in the header, the holder slots and the
 *      directory (the first 270 KiB), the rest anywhere; a byte of each
 *      patch may be replaced by a copy of a directory or holder word of
 *      another entry, so valid-looking states, fingerprints and
 *      identities (this process's pid) are tried, not only noise;
 *   3. the engine loads a file with another layout (reclaim, claims,
 *      extents taken from free ones), decides, renders its metrics; a
 *      second engine opens the region, loads and decides; both are freed.
 * Every call may fail with a documented code; none may crash, read or
 * write outside the region, or hang (libFuzzer's -timeout: a wait on a
 * claim is bounded by SLUICE_KEYED_LEASE_MS per table).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "sluice/engine.h"
#include "sluice/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REGION (1u << 20)
/* the header, the holder slots and the directory (rules/region.c LAYOUT) */
#define META (64u + SLUICE_ENGINE_HOLDERS * 16u + SLUICE_ENGINE_DIR_SLOTS * 256u)

static const char file_a[] = "rules:\n"
                             "  - id: per-ip\n"
                             "    dimensions: [ip]\n"
                             "    limit: { algorithm: fixed_window, window: 1s, max_requests: 3 }\n"
                             "    keys: { capacity: 64 }\n"
                             "  - id: all\n"
                             "    limit: { algorithm: token_bucket, rate: 10/s, burst: 5 }\n";
static const char file_b[] = "rules:\n"
                             "  - id: per-ip\n"
                             "    dimensions: [ip]\n"
                             "    limit: { algorithm: fixed_window, window: 2s, max_requests: 3 }\n"
                             "    keys: { capacity: 128 }\n"
                             "  - id: all\n"
                             "    limit: { algorithm: token_bucket, rate: 10/s, burst: 5 }\n";

static int sink(void *ctx, const char *buf, size_t len)
{
	(void)buf;
	*(size_t *)ctx += len;
	return 0;
}

static void decide_some(sluice_engine_t *e)
{
	for (unsigned i = 0; i < 6; i++) {
		unsigned char a[4] = { 10, 0, 0, (unsigned char)(i % 3) };
		sluice_request_t q = { .method = "GET", .path = "/", .addr = a, .addr_len = 4 };
		sluice_verdict_t v;
		if (sluice_engine_decide(e, &q, &v) == 0)
			(void)sluice_engine_complete(e, &v, 1000, 1);
	}
	size_t n = 0;
	(void)sluice_engine_metrics(e, sink, &n);
}

static sluice_engine_t *open_on(void *reg, const sluice_clock_t *clk)
{
	sluice_engine_options_t o = { .clock = clk, .region = reg, .region_bytes = REGION };
	sluice_engine_t *e = NULL;
	return sluice_engine_new(&o, &e) == 0 ? e : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char *reg;
	if (!reg && !(reg = aligned_alloc(64, REGION)))
		abort();
	memset(reg, 0, REGION);
	sluice_clock_t clk;
	sluice_clock_manual_init(&clk, 1000000000000ULL);
	sluice_engine_t *e = open_on(reg, &clk);
	if (!e)
		abort(); /* a zeroed region always opens */
	if (sluice_engine_load_buffer(e, "a.yaml", file_a, sizeof(file_a) - 1, NULL) != 0)
		abort();
	decide_some(e);

	fuzz_in_t in = { data, size };
	for (unsigned n = 0; n < 64 && in.n; n++) {
		unsigned sel = (unsigned)fuzz_bytes(&in, 1);
		size_t off = (size_t)fuzz_bytes(&in, 3);
		off = sel & 1 ? off % META : off % REGION;
		size_t len = 1 + (sel >> 4);
		if (off + len > REGION)
			len = REGION - off;
		if (sel & 2) {
			/* a word of another entry or holder slot, copied */
			size_t from = ((size_t)fuzz_bytes(&in, 3) % (META - 8)) & ~(size_t)7;
			size_t to = off & ~(size_t)7;
			if (to > REGION - 8)
				to = REGION - 8;
			memmove(reg + to, reg + from, 8);
		} else {
			for (size_t i = 0; i < len; i++)
				reg[off + i] = (unsigned char)fuzz_bytes(&in, 1);
		}
	}

	sluice_clock_manual_advance(&clk, 5000000000ULL);
	(void)sluice_engine_load_buffer(e, "b.yaml", file_b, sizeof(file_b) - 1, NULL);
	decide_some(e);
	sluice_engine_t *f = open_on(reg, &clk);
	if (f) {
		(void)sluice_engine_load_buffer(f, "a.yaml", file_a, sizeof(file_a) - 1, NULL);
		decide_some(f);
		sluice_engine_free(f);
	}
	sluice_clock_manual_advance(&clk, 5000000000ULL);
	(void)sluice_engine_load_buffer(e, "a.yaml", file_a, sizeof(file_a) - 1, NULL);
	decide_some(e);
	sluice_engine_free(e);
	return 0;
}
