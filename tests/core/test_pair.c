/* SPDX-License-Identifier: MIT */
/*
 * test_pair.c - the 16-byte CAS of lib/pair_internal.h, each instruction
 * form this architecture has (x86-64: CMPXCHG16B; arm64: CASPAL where the
 * CPU has LSE, and the LDXP/STLXP loop), called directly, and the form the
 * library picks:
 *   - a match stores both halves, each where it belongs (lo at the lower
 *     address), and leaves the expected pair as it was;
 *   - a mismatch in either half stores nothing and hands back the pair
 *     found;
 *   - under two writers that keep lo == hi and a reader whose CAS always
 *     fails, no increment is lost and every pair handed back on failure
 *     has lo == hi (one atomic read, never a new half beside an old one);
 *     on arm64 one writer runs CASPAL and the other the LL/SC loop, which
 *     must work on the same pair at once.
 * Threaded checks assert on counts and snapshots only, never on time.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "../../lib/pair_internal.h"

TestSuite(pair, .timeout = 120);

typedef _Bool (*cas_fn)(_Atomic uint64_t *, uint64_t *, uint64_t *, uint64_t, uint64_t);

struct form {
	const char *name;
	cas_fn cas;
	int usable;
};

static _Bool picked(_Atomic uint64_t *lo, uint64_t *a, uint64_t *dx, uint64_t nl, uint64_t nh)
{
	return sluice__pair_cas_observe(lo, a, dx, nl, nh);
}

#if defined(__aarch64__)
static int have_lse(void)
{
	return (getauxval(AT_HWCAP) & HWCAP_ATOMICS) != 0;
}
#endif

/* The forms to test, in @f; returns how many. */
static size_t forms(struct form f[3])
{
	size_t n = 0;
#if defined(__x86_64__)
	f[n++] = (struct form){ "cmpxchg16b", sluice__pair_cas_insn, 1 };
#elif defined(__aarch64__)
	f[n++] = (struct form){ "caspal", sluice__pair_cas_casp, have_lse() };
	f[n++] = (struct form){ "ldxp/stlxp", sluice__pair_cas_llsc, 1 };
#endif
	f[n++] = (struct form){ "picked", picked, 1 };
	return n;
}

static _Alignas(16) _Atomic uint64_t pair[2];

static void set(uint64_t lo, uint64_t hi)
{
	atomic_store_explicit(&pair[0], lo, memory_order_relaxed);
	atomic_store_explicit(&pair[1], hi, memory_order_relaxed);
}

Test(pair, match_stores_both_halves_in_place)
{
	struct form f[3];
	size_t n = forms(f);
	for (size_t i = 0; i < n; i++) {
		if (!f[i].usable) {
			printf("pair: %s skipped: the CPU lacks it\n", f[i].name);
			continue;
		}
		set(0x1111111111111111ULL, 0x2222222222222222ULL);
		uint64_t a = 0x1111111111111111ULL, d = 0x2222222222222222ULL;
		cr_assert(f[i].cas(pair, &a, &d, 0x3333333333333333ULL, 0x4444444444444444ULL),
		          "%s: a matching pair must store", f[i].name);
		cr_assert_eq(atomic_load(&pair[0]), 0x3333333333333333ULL, "%s: lo", f[i].name);
		cr_assert_eq(atomic_load(&pair[1]), 0x4444444444444444ULL, "%s: hi", f[i].name);
		cr_assert_eq(a, 0x1111111111111111ULL, "%s: expected lo kept", f[i].name);
		cr_assert_eq(d, 0x2222222222222222ULL, "%s: expected hi kept", f[i].name);
	}
}

Test(pair, a_mismatch_in_either_half_stores_nothing_and_hands_back_the_pair)
{
	struct form f[3];
	size_t n = forms(f);
	for (size_t i = 0; i < n; i++) {
		if (!f[i].usable)
			continue;
		for (int half = 0; half < 2; half++) {
			set(5, 7);
			uint64_t a = half == 0 ? 6 : 5, d = half == 1 ? 8 : 7;
			cr_assert(!f[i].cas(pair, &a, &d, 100, 200), "%s: mismatch in half %d stored",
			          f[i].name, half);
			cr_assert_eq(atomic_load(&pair[0]), 5, "%s: lo written", f[i].name);
			cr_assert_eq(atomic_load(&pair[1]), 7, "%s: hi written", f[i].name);
			cr_assert_eq(a, 5, "%s: lo found %llu", f[i].name, (unsigned long long)a);
			cr_assert_eq(d, 7, "%s: hi found %llu", f[i].name, (unsigned long long)d);
		}
	}
}

#define ADDS 20000u
#define READS 20000u

struct worker {
	cas_fn cas;
	unsigned done;  /* increments this writer made */
	unsigned torn;  /* snapshots with lo != hi */
	unsigned reads; /* reader: failed CASes made */
};

static _Atomic int go;

/* A writer: ADDS increments of both halves, each CAS expecting the pair
 * the last failure handed back.  Bounded: each failure is another CAS's
 * write, so 64 * ADDS attempts are far more than three threads need. */
static void *writer(void *arg)
{
	struct worker *w = arg;
	while (!atomic_load_explicit(&go, memory_order_acquire))
		;
	uint64_t a = 0, d = 0;
	for (unsigned long n = 0; w->done < ADDS && n < 64ul * ADDS; n++) {
		if (w->cas(pair, &a, &d, a + 1, d + 1)) {
			w->done++;
			a++, d++;
		} else if (a != d) {
			w->torn++;
		}
	}
	return NULL;
}

/* A reader: CASes expecting a pair that never exists, so each one fails
 * and hands back the pair it read. */
static void *reader(void *arg)
{
	struct worker *w = arg;
	while (!atomic_load_explicit(&go, memory_order_acquire))
		;
	for (w->reads = 0; w->reads < READS; w->reads++) {
		uint64_t a = UINT64_MAX, d = 0;
		cr_assert(!w->cas(pair, &a, &d, 0, 0));
		if (a != d)
			w->torn++;
	}
	return NULL;
}

static void race(cas_fn w0, cas_fn w1, cas_fn r, const char *what)
{
	struct worker w[3] = { { .cas = w0 }, { .cas = w1 }, { .cas = r } };
	pthread_t t[3];
	set(0, 0);
	atomic_store(&go, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, i < 2 ? writer : reader, &w[i]), 0);
	atomic_store_explicit(&go, 1, memory_order_release);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(atomic_load(&pair[0]), 2 * ADDS, "%s: lo %llu", what,
	             (unsigned long long)atomic_load(&pair[0]));
	cr_assert_eq(atomic_load(&pair[1]), 2 * ADDS, "%s: hi", what);
	cr_assert_eq(w[0].torn + w[1].torn + w[2].torn, 0, "%s: %u torn snapshots", what,
	             w[0].torn + w[1].torn + w[2].torn);
}

Test(pair, concurrent_writers_lose_nothing_and_every_failure_reads_one_pair)
{
	struct form f[3];
	size_t n = forms(f);
	for (size_t i = 0; i < n; i++)
		if (f[i].usable)
			race(f[i].cas, f[i].cas, f[i].cas, f[i].name);
#if defined(__aarch64__)
	if (have_lse())
		race(sluice__pair_cas_casp, sluice__pair_cas_llsc, sluice__pair_cas_llsc,
		     "caspal beside ldxp/stlxp");
	else
		printf("pair: caspal beside ldxp/stlxp skipped: the CPU lacks LSE\n");
#endif
}

#if defined(__aarch64__)
/* The library's choice is the kernel's word for this CPU (lib/pair.c). */
Test(pair, the_library_picks_casp_exactly_where_the_cpu_has_lse)
{
	cr_assert_eq(atomic_load(&sluice__pair_lse), have_lse());
}
#endif
