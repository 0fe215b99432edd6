/* SPDX-License-Identifier: MIT */
/*
 * fuzz_keyed_attach.c - sluice_keyed_attach() on a shared-memory region
 * another process wrote, then a few decisions on whatever it accepted.
 *
 * keyed.h: "Memory that is not a table gives an error, never a crash (it
 * reads only inside @size)", and STYLE.md: "Nothing another process does to
 * shared memory ... may crash this one or make a call spin forever".  So
 * the region is the fuzz input, in one of two shapes (byte 0, bit 0):
 *
 *   raw    the rest of the input IS the region, byte for byte, at its exact
 *          size (a 64-byte-aligned heap block of exactly that many bytes:
 *          AddressSanitizer flags any read past @size);
 *   built  a real table (fuzz_keyed.h: any algorithm, policy, capacity and
 *          parameters), then the rest of the input is a list of patches
 *          (offset, 1..16 bytes) written over it anywhere: header fields,
 *          slot tags, state words, key bytes, floors, statistics, which is
 *          what a buggy or hostile process sharing the mapping can do
 *          (half the offsets land in the 256-byte header: keyed.h MEMORY).
 *
 * Byte 0, bit 2 (built only) aims the patches at the live-parameter block
 * instead (keyed.h LIVE PARAMETERS: after the header, read at every
 * decision, never validated by attach; issue 22, R7: interval 0 or tau
 * 2^61 written there admitted every request at burst 5).  When only the
 * block was patched, a fresh key at one instant must be admitted at most
 * what the block in force allows as a set a setter could write
 * (live_holds): nothing at all when it is not one.
 *
 * Byte 0, bit 1 then FORGES the header's check the way any such process
 * can: the check is a SipHash under a key fixed in the library (a checksum
 * against accidents, not a defence), so the target recomputes it over the
 * patched header, and attach has to judge the fields themselves.  Where the
 * check is (its offset) is found once by asking a freshly made table which
 * 8-byte word is the SipHash of the header bytes before it; if no word is
 * (the library changed its check to something a process cannot recompute),
 * forging is skipped and said once on stderr.
 *
 * When attach accepts the region, up to 16 acquires (and an INFLIGHT
 * release) run on it with readings from 0 to 2^64 - 1: no crash, no hang
 * (libFuzzer's -timeout catches a claim that spins), no undefined behaviour
 * (a division by a zero window, a shift by 64), and only documented return
 * codes.  What they admit is checked only where the slots are init's own
 * and only the header was rewritten (limits_hold): then attach must have
 * accepted parameters that limit; with rewritten slots nothing is promised
 * about admissions, only that no call crashes or spins.
 */
#include <stdio.h>
#include <string.h>

#include "fuzz_keyed.h"
#include "siphash_internal.h"
#include "keyed_internal.h" /* the live block's layout (live_holds) */

#define HDR 256 /* the header's size (keyed.h MEMORY): where the check is searched, and header patches */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long check_at = -2; /* -2: not searched yet; -1: no forgeable check */

static uint64_t load64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* the SipHash of the header bytes [8, off), as keyed_table.c's header_check */
static uint64_t check_of(const unsigned char *mem, size_t off)
{
	return sluice__siphash13(0x736c75696365ULL, SLUICE_KEYED_VERSION, mem + 8, off - 8);
}

static void find_check(void)
{
	sluice_keyed_config_t c = { .algo = SLUICE_ALGO_GCRA };
	fuzz_keyed_defaults(&c);
	c.capacity = 8;
	size_t size = sluice_keyed_region_bytes(&c);
	unsigned char *mem = fuzz_region(size);
	FUZZ_CHECK(sluice_keyed_format(mem, size, &c) == 0, "a default table");
	check_at = -1;
	for (size_t off = 16; off + 8 <= HDR && off + 8 <= size; off += 8) {
		if (load64(mem + off) == check_of(mem, off)) {
			check_at = (long)off;
			break;
		}
	}
	free(mem);
	if (check_at < 0)
		fprintf(stderr, "fuzz_keyed_attach: the header's check is not the public SipHash "
		                "any more: forged headers are not tried\n");
}

static void forge(unsigned char *mem, size_t size)
{
	if (check_at < 0 || (size_t)check_at + 8 > size)
		return;
	uint64_t v = check_of(mem, (size_t)check_at);
	memcpy(mem + check_at, &v, 8);
}

/* a few decisions on an accepted region: nothing may crash or spin */
static void decide(sluice_keyed_t *k, sluice_clock_t *clk)
{
	static const uint64_t times[] = { 0, 1, 1000000000ULL, (1ULL << 62) - 1, 1ULL << 62,
		                          UINT64_MAX, 12345678901ULL, 2 };
	for (unsigned i = 0; i < 16; i++) {
		unsigned char key[8];
		size_t keylen = 1 + i % 8;
		for (size_t j = 0; j < keylen; j++)
			key[j] = (unsigned char)('a' + (i + j) % 5);
		uint64_t now = times[i % 8] + i / 8;
		sluice_clock_manual_set(clk, now);
		sluice_decision_t d;
		int rc = i % 3 == 2 ? sluice_keyed_acquire(k, key, keylen, 1, &d)
		                    : sluice_keyed_acquire_at(k, key, keylen, 1 + i % 2, now, &d);
		FUZZ_CHECK(fuzz_known_rc(rc), "acquire on an accepted region: %d", rc);
		if (k->algo == SLUICE_ALGO_INFLIGHT && i % 4 == 3) {
			rc = sluice_keyed_release(k, key, keylen, 1);
			FUZZ_CHECK(fuzz_known_rc(rc) && rc != 1, "release: %d", rc);
		}
	}
	sluice_keyed_stats_t s;
	FUZZ_CHECK(sluice_keyed_stats(k, &s) == 0, "stats on an accepted region");
}

/* the largest n keyed.h's LIMITS allow per algorithm */
static uint64_t limit_max(sluice_algo_t a)
{
	switch (a) {
	case SLUICE_ALGO_FIXED:
		return SLUICE_KEYED_FIXED_LIMIT_MAX;
	case SLUICE_ALGO_WINDOW:
		return (1ULL << 30) - 1;
	case SLUICE_ALGO_INFLIGHT:
		return SLUICE_KEYED_INFLIGHT_LIMIT_MAX;
	default:
		return UINT64_MAX; /* GCRA, LEAKY: b and D + 1 are bounded by the rate */
	}
}

/*
 * A region whose slots init wrote and whose header alone was rewritten (and
 * its check forged), when attach accepts it, must limit as some table init
 * could make: the largest n within LIMITS, a fresh key admitted n = that
 * largest at one instant and then refused one more at the same instant
 * (GCRA b, LEAKY D + 1, FIXED and WINDOW L, INFLIGHT K: keyed.h GUARANTEE at
 * t = 0).  A header with interval 0, or a limit past the 24-bit count, is
 * caught here; then the usual decisions.
 */
static void limits_hold(sluice_keyed_t *k, sluice_clock_t *clk)
{
	/* the largest n in force (the live parameters init wrote) */
	sluice_keyed_params_t pp;
	FUZZ_CHECK(sluice_keyed_params(k, &pp) == 0, "params of an attached table");
	const uint64_t nmax = pp.nmax;
	FUZZ_CHECK(nmax >= 1 && nmax <= limit_max(k->algo),
	           "attach accepted algo %d with the largest n = %llu", (int)k->algo,
	           (unsigned long long)nmax);
	const uint64_t now = 5000000000ULL;
	sluice_clock_manual_set(clk, now);
	sluice_decision_t d;
	int rc = sluice_keyed_acquire_at(k, "f", 1, nmax, now, &d); /* key_max >= 1 */
	FUZZ_CHECK(rc == 1, "algo %d: a fresh key refused n = %llu, the largest: %d", (int)k->algo,
	           (unsigned long long)nmax, rc);
	rc = sluice_keyed_acquire_at(k, "f", 1, 1, now, &d);
	FUZZ_CHECK(rc == 0, "algo %d: %llu taken at one instant, then 1 more: %d (remaining %llu)",
	           (int)k->algo, (unsigned long long)nmax, rc,
	           (unsigned long long)d.remaining);
	decide(k, clk);
}

/*
 * Only the live block was patched: what may a fresh key get at one instant?
 * The decisions read the block of the era in force; if it is a set a
 * setter writes (kp_gcra_ok, kp_win_ok: keyed_internal.h) they use it,
 * clamped to the count's range, else they refuse it whole.  So at most:
 * GCRA, LEAKY its largest n (b, D + 1: tau = n T); FIXED, WINDOW its L
 * (FIXED at most the count's bits, WINDOW init's largest); INFLIGHT its K
 * at most the count's bits.  64 takes of 1 at one reading, then the usual
 * decisions.
 */
static void live_holds(sluice_keyed_t *k, sluice_clock_t *clk)
{
	struct sluice__keyed_live *l = k->live;
	uint64_t e = atomic_load(&l->ctl[1]);
	_Atomic uint64_t(*f)[2] = l->blk[e & 1].f;
	struct kp p = { .era = e };
	p.interval = atomic_load(&f[F_INTERVAL][0]);
	p.tau = atomic_load(&f[F_TAU][0]);
	p.nmax = atomic_load(&f[F_NMAX][0]);
	p.limit = atomic_load(&f[F_LIMIT][0]);
	p.cap = atomic_load(&f[F_CAP][0]);
	uint64_t cmask = k->cbits < 64 ? (1ULL << k->cbits) - 1 : UINT64_MAX, most;
	switch (k->algo) {
	case SLUICE_ALGO_FIXED:
		most = kp_win_ok(&p) ? (p.limit < cmask ? p.limit : cmask) : 0;
		break;
	case SLUICE_ALGO_WINDOW:
		most = kp_win_ok(&p) ? (p.limit < (1ULL << 30) - 1 ? p.limit : (1ULL << 30) - 1) : 0;
		break;
	case SLUICE_ALGO_INFLIGHT:
		most = p.limit < cmask ? p.limit : cmask;
		break;
	default:
		most = kp_gcra_ok(&p) ? p.nmax : 0;
		break;
	}
	const uint64_t now = 5000000000ULL;
	sluice_clock_manual_set(clk, now);
	uint64_t got = 0;
	for (int i = 0; i < 64; i++) {
		sluice_decision_t d;
		int rc = sluice_keyed_acquire_at(k, "f", 1, 1, now, &d);
		FUZZ_CHECK(fuzz_known_rc(rc), "acquire on a forged live block: %d", rc);
		got += rc == 1;
	}
	FUZZ_CHECK(got <= most, "algo %d: a forged live block admitted %llu at one instant, "
	                        "its parameters allow %llu",
	           (int)k->algo, (unsigned long long)got, (unsigned long long)most);
	decide(k, clk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (check_at == -2)
		find_check();
	fuzz_in_t in = { data, size };
	uint8_t mode = fuzz_u8(&in);
	unsigned char *mem;
	size_t len;
	int header_only = 0; /* built, and no patch reached past the header */
	int live_only = 0;   /* built, bit 2: every patch in the live block */
	fuzz_table_t t = { 0 };
	if (!(mode & 1)) {
		len = in.n;
		mem = fuzz_region(len);
		memcpy(mem, in.p, len);
		in.n = 0;
	} else {
		FUZZ_CHECK(fuzz_keyed_table(&in, &t) == 0, "the default configuration failed");
		mem = t.mem;
		len = t.size;
		/* patches: offset, count, bytes.  The offset's 2 bytes: below
		 * 0x8000 a header byte (modulo its 256), else any byte of the
		 * region (modulo its size), so half the patches hit the header */
		header_only = !(mode & 4);
		live_only = (mode & 4) != 0;
		while (in.n > 0) {
			size_t raw = (size_t)fuzz_bytes(&in, 2);
			size_t off = raw < 0x8000 ? raw % HDR : (raw - 0x8000) % len;
			if (mode & 4) /* the live block, right after the header */
				off = HDR + raw % LIVE_BYTES;
			size_t n = 1 + fuzz_u8(&in) % 16;
			header_only &= off + n <= HDR;
			live_only &= off + n <= HDR + LIVE_BYTES;
			for (size_t i = 0; i < n && off + i < len; i++)
				mem[off + i] = fuzz_u8(&in);
		}
	}
	if (mode & 2)
		forge(mem, len);

	sluice_clock_t clk;
	sluice_clock_manual_init(&clk, 0);
	sluice_keyed_t k;
	memset(&k, 0x3c, sizeof(k));
	sluice_keyed_t before = k;
	int rc = sluice_keyed_attach(mem, len, &clk, &k);
	FUZZ_CHECK(rc == 0 || fuzz_known_rc(rc), "attach returned %d", rc);
	if (rc != 0)
		FUZZ_CHECK(memcmp(&k, &before, sizeof(k)) == 0, "a failed attach (%s) wrote the handle",
		           sluice_err_name(rc));
	else if (header_only)
		limits_hold(&k, &clk);
	else if (live_only && !(mode & 2))
		live_holds(&k, &clk);
	else
		decide(&k, &clk);
	free(mem);
	return 0;
}
