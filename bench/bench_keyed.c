/* SPDX-License-Identifier: MIT */
/*
 * bench_keyed.c - decisions per second of a keyed GCRA table against three
 * baselines in the same process and the same run:
 *   array-gcra    a plain array of sluice GCRA limiters (sluice_gcra_t)
 *                 indexed by the key's number: the same decision with no
 *                 hashing and no probing, the ceiling a keyed table aims at
 *                 (issue 15: keyed >= 0.67x of it);
 *   mutex-array   the C mutex peers: an array of per-key GCRA states, each
 *                 behind its own pthread mutex, indexed by the key's number
 *                 (no hashing: the generous peer; issue 15: keyed >= 2x it
 *                 on the same clock);
 *   mutex-hash    the way a typical implementation does it: a chained hash
 *                 table of per-key GCRA states behind one pthread mutex,
 *                 reading CLOCK_MONOTONIC, allocating a node per new key.
 * Every case but mutex-hash runs on the cached clock (the default) and on
 * CLOCK_MONOTONIC (mode=), so each ratio compares one clock with itself.
 * keyed-gcra is the table with key_max 16 (the keys' length: 64-byte
 * slots, one cache line per key), hashing with the AES hash where the CPU
 * has AES-NI; keyed-gcra-k32 the same table with the default key_max 32
 * (128-byte slots), to show what the layout buys; keyed-gcra-sip the
 * keyed-gcra table with SLUICE_KEYED_SIPHASH (SipHash-1-3), to show what
 * the hash buys; keyed-gcra-prefetch the keyed-gcra table driven as a
 * gateway that knows the next request's key: each step builds key i + 1,
 * calls sluice_keyed_prefetch() on it, then decides key i (cached clock
 * only, as keyed-gcra-sip).
 *
 * Regimes (keys are 16 bytes: an IPv6-looking prefix, the key number, a
 * route id):
 *   random10k  10,000 keys, each 10/s burst 10, drawn uniformly: after the
 *              first second almost every decision is a refusal.
 *   zipf1m     1,000,000 keys drawn with Zipf(1.1) popularity (key k with
 *              probability proportional to k^-1.1), each 100,000/s burst
 *              1,000: all but the ten or so hottest keys always pass, so
 *              most decisions are admissions, and the tail keeps creating
 *              keys (and, in the keyed table, reclaiming fresh slots).
 * Threads: --threads=1,2,4 (any list starting with 1, as bench_algos's;
 * default 1,2), deciding on the same table.
 * Each case runs --seconds (default 0.5 s) wall time, --repeats times
 * (default 3), interleaved across cases; medians reported.  Key sequences
 * are drawn before timing (per thread, 4M draws, cycled; threads 8 and up
 * share the first 8 threads' sequences, from a start half a million draws
 * further on, which keeps setup and memory bounded on large machines);
 * every case builds the 16-byte key of each draw, whether it reads it or
 * not.  Tables and arrays are built fresh for each timed run.
 *
 * Output: a `bench_env` line (as bench_algos's: the CPU model, the online
 * CPUs, threads, repeats, seconds, the clocks), one `bench hash=...` line
 * per hash timed, one `bench ...` line per case, then a
 * human table.
 *   ns_per_decision = wall ns / decisions (all threads);
 *   vs_array = array-gcra's ns_per_decision on the same clock / this one's
 *   (> 1: faster); vs_mutex = mutex-array's on the same clock / this one's;
 *   vs_hash = mutex-hash's / this one's;
 *   scaling (table) = decisions/s at the last thread count / at 1 thread.
 * Options: --quick (1 repeat of 0.2 s), --repeats=N, --seconds=S,
 * --threads=LIST, --batches (only the batch section, below: bench_batch
 * lines).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice/sluice.h"

#include "bench_common.h"
#include "keyhash_internal.h"
#include "siphash_internal.h"

#define SEC 1000000000ULL
#define DRAWS (1u << 22)
#define BATCH 256

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

/* This thread's CPU time: unlike wall time, it does not count the time
 * the thread waited for a core, which on a shared machine (other jobs on
 * the same 2 cores) is most of the noise. */
static uint64_t thread_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

static inline void make_key(unsigned char key[16], uint32_t k)
{
	static const unsigned char prefix[8] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0 };
	memcpy(key, prefix, 8);
	memcpy(key + 8, &k, 4);
	memcpy(key + 12, "/api", 4);
}

/* ---- the baseline: chained hash table + GCRA, one mutex ------------------- */

struct node {
	struct node *next;
	uint64_t tat;
	unsigned char key[16];
};

struct mutex_table {
	pthread_mutex_t lock;
	struct node **buckets;
	uint64_t mask, T, tau;
};

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

/* The mutex peers' GCRA, written once for both: take one permit from the
 * key whose arrival time is *@tat (the caller holds its lock).  Return: 1
 * admitted, 0 refused; @base and @lag are what peer_decision() needs, so
 * the decision is filled after the unlock, as a service would. */
static int peer_take(uint64_t *tat, uint64_t T, uint64_t tau, uint64_t now, uint64_t *base,
                     uint64_t *lag)
{
	*base = *tat > now ? *tat : now;
	int ok = *base + T - now <= tau;
	if (ok)
		*tat = *base + T;
	*lag = *tat > now ? *tat - now : 0;
	return ok;
}

static int peer_decision(int ok, uint64_t base, uint64_t lag, uint64_t T, uint64_t tau,
                         uint64_t now, sluice_decision_t *d)
{
	d->allowed = ok;
	d->limit = tau / T;
	d->remaining = lag < tau ? (tau - lag) / T : 0;
	d->retry_after_ns = ok ? 0 : base + T - now - tau;
	d->delay_ns = 0;
	d->reset_ns = lag;
	d->now_ns = now;
	return ok;
}

static void mutex_init(struct mutex_table *m, uint64_t keys, uint64_t T, uint64_t burst)
{
	uint64_t n = 1;
	while (n < keys)
		n <<= 1;
	pthread_mutex_init(&m->lock, NULL);
	m->buckets = calloc(n, sizeof(*m->buckets));
	if (!m->buckets)
		exit(2);
	m->mask = n - 1;
	m->T = T;
	m->tau = T * burst;
}

static void mutex_free(struct mutex_table *m)
{
	for (uint64_t i = 0; i <= m->mask; i++)
		for (struct node *p = m->buckets[i], *q; p; p = q) {
			q = p->next;
			free(p);
		}
	free(m->buckets);
	pthread_mutex_destroy(&m->lock);
}

static int mutex_acquire(struct mutex_table *m, const unsigned char key[16], sluice_decision_t *d)
{
	uint64_t now = mono_ns();
	uint64_t h = fnv1a(key, 16);
	pthread_mutex_lock(&m->lock);
	struct node **b = &m->buckets[h & m->mask], *p = *b;
	while (p && memcmp(p->key, key, 16) != 0)
		p = p->next;
	if (!p) {
		p = malloc(sizeof(*p));
		if (!p)
			exit(2);
		memcpy(p->key, key, 16);
		p->tat = 0;
		p->next = *b;
		*b = p;
	}
	uint64_t base, lag;
	int ok = peer_take(&p->tat, m->T, m->tau, now, &base, &lag);
	pthread_mutex_unlock(&m->lock);
	return peer_decision(ok, base, lag, m->T, m->tau, now, d);
}

/* ---- the C mutex peers: per-key mutex, array index ------------------------ */

struct mutex_cell {
	pthread_mutex_t lock;
	uint64_t tat;
};

struct mutex_array {
	struct mutex_cell *cell;
	uint64_t T, tau;
	const sluice_clock_t *clock;
};

static void marray_init(struct mutex_array *m, uint64_t keys, uint64_t T, uint64_t burst,
                        const sluice_clock_t *clock)
{
	m->cell = calloc(keys, sizeof(*m->cell));
	if (!m->cell)
		exit(2);
	for (uint64_t i = 0; i < keys; i++)
		pthread_mutex_init(&m->cell[i].lock, NULL);
	m->T = T;
	m->tau = T * burst;
	m->clock = clock;
}

static int marray_acquire(struct mutex_array *m, uint32_t key, sluice_decision_t *d)
{
	uint64_t now = m->clock == &sluice_clock_monotonic ? mono_ns() : sluice_clock_now(m->clock);
	struct mutex_cell *p = &m->cell[key];
	pthread_mutex_lock(&p->lock);
	uint64_t base, lag;
	int ok = peer_take(&p->tat, m->T, m->tau, now, &base, &lag);
	pthread_mutex_unlock(&p->lock);
	return peer_decision(ok, base, lag, m->T, m->tau, now, d);
}

/* ---- cases ----------------------------------------------------------------- */

enum impl {
	KEYED_CACHED, KEYED32_CACHED, KEYEDSIP_CACHED, KEYEDPF_CACHED, ARRAY_CACHED, MARRAY_CACHED,
	KEYED_MONO, KEYED32_MONO, ARRAY_MONO, MARRAY_MONO,
	MUTEX, NIMPL
};
static const char *impl_name[] = { "keyed-gcra", "keyed-gcra-k32", "keyed-gcra-sip",
	                           "keyed-gcra-prefetch", "array-gcra", "mutex-array",
	                           "keyed-gcra", "keyed-gcra-k32", "array-gcra", "mutex-array",
	                           "mutex-hash" };
static int is_mono(enum impl im)
{
	return im >= KEYED_MONO;
}
static int is_keyed(enum impl im)
{
	return im == KEYED_CACHED || im == KEYED32_CACHED || im == KEYEDSIP_CACHED ||
	       im == KEYEDPF_CACHED || im == KEYED_MONO || im == KEYED32_MONO;
}
/* the same-clock baselines of @im */
static enum impl array_of(enum impl im)
{
	return is_mono(im) ? ARRAY_MONO : ARRAY_CACHED;
}
static enum impl marray_of(enum impl im)
{
	return is_mono(im) ? MARRAY_MONO : MARRAY_CACHED;
}

struct regime {
	const char *name;
	uint64_t keys, rate, burst, capacity;
	int zipf;
};

static const struct regime regimes[] = {
	{ "random10k", 10000, 10, 10, 32768, 0 },
	{ "zipf1m", 1000000, 100000, 1000, 1u << 21, 1 },
};
#define NREG 2

#define NSEQ_MAX 8 /* distinct draw sequences per regime; threads share beyond */
static uint32_t *draws[2][NSEQ_MAX]; /* [regime][sequence] */
static int nseq;                     /* sequences drawn: min(threads, NSEQ_MAX) */

/* k^-1.1 for k >= 1 without libm (bench/ links no -lm): ln by exponent and
 * the atanh series of the mantissa, exp by its Taylor series (|y| < 1.4);
 * relative error far below what a popularity curve needs. */
static double zipf_weight(double k)
{
	uint64_t bits;
	memcpy(&bits, &k, 8);
	int e = (int)((bits >> 52) & 0x7ff) - 1023;
	bits = (bits & ((1ULL << 52) - 1)) | (1023ULL << 52);
	double m;
	memcpy(&m, &bits, 8); /* k = m * 2^e, m in [1, 2) */
	double s = (m - 1) / (m + 1), s2 = s * s, term = s, ln = 0;
	for (int i = 1; i < 40; i += 2, term *= s2)
		ln += term / i;
	ln = 2 * ln + e * 0.69314718055994530942;
	double y = -0.1 * ln, ex = 1, t = 1; /* k^-0.1 = exp(y) */
	for (int i = 1; i < 30; i++) {
		t *= y / i;
		ex += t;
	}
	return ex / k;
}

static void make_draws(int threads)
{
	nseq = threads < NSEQ_MAX ? threads : NSEQ_MAX;
	if (nseq < 2)
		nseq = 2;
	/* Zipf(1.1) over 1M keys by inverse CDF (binary search) */
	uint64_t nk = regimes[1].keys;
	double *cdf = malloc(sizeof(double) * nk);
	if (!cdf)
		exit(2);
	double sum = 0;
	for (uint64_t k = 0; k < nk; k++) {
		sum += zipf_weight((double)(k + 1));
		cdf[k] = sum;
	}
	uint64_t x = 0x9E3779B97F4A7C15ULL;
	for (int t = 0; t < nseq; t++) {
		for (int r = 0; r < NREG; r++) {
			draws[r][t] = malloc(sizeof(uint32_t) * DRAWS);
			if (!draws[r][t])
				exit(2);
		}
		for (uint32_t i = 0; i < DRAWS; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			draws[0][t][i] = (uint32_t)(x % regimes[0].keys);
			double u = (double)(x >> 11) / 9007199254740992.0 * sum;
			uint64_t lo = 0, hi = nk - 1;
			while (lo < hi) {
				uint64_t mid = (lo + hi) / 2;
				if (cdf[mid] < u)
					lo = mid + 1;
				else
					hi = mid;
			}
			draws[1][t][i] = (uint32_t)lo;
		}
	}
	free(cdf);
}

struct run {
	enum impl impl;
	const struct regime *rg;
	int regime, tid;
	sluice_keyed_t *k;
	struct mutex_table *m;
	struct mutex_array *ma;
	sluice_gcra_t *arr;
	pthread_barrier_t *start;
	uint64_t deadline, decisions, admitted, cpu_ns;
};

static void *run_main(void *arg)
{
	struct run *r = arg;
	/* thread t walks sequence t % nseq; past the first nseq threads,
	 * from 524,287 draws further per lap (draws are independent, so a
	 * start that far apart reads as another sequence) */
	const uint32_t *dr = draws[r->regime][r->tid % nseq];
	uint32_t i = (uint32_t)r->tid * 7919u + (uint32_t)(r->tid / nseq) * 524287u;
	uint64_t decisions = 0, admitted = 0;
	/* keyed-gcra-prefetch: the key decided next, prefetched a step ago */
	unsigned char next[16];
	make_key(next, dr[i++ & (DRAWS - 1)]);
	pthread_barrier_wait(r->start);
	uint64_t c0 = thread_ns();
	for (;;) {
		for (int b = 0; b < BATCH; b++) {
			unsigned char key[16];
			uint32_t kn = dr[i++ & (DRAWS - 1)];
			make_key(key, kn);
			sluice_decision_t d;
			int rc;
			switch (r->impl) {
			case MUTEX:
				rc = mutex_acquire(r->m, key, &d);
				break;
			case ARRAY_CACHED:
			case ARRAY_MONO:
				rc = sluice_gcra_acquire(&r->arr[kn], 1, &d);
				break;
			case MARRAY_CACHED:
			case MARRAY_MONO:
				rc = marray_acquire(r->ma, kn, &d);
				break;
			case KEYEDPF_CACHED:
				/* key (draw i) is the next draw's; decide the
				 * one prefetched a step ago */
				memcpy(key, next, 16);
				make_key(next, kn);
				sluice_keyed_prefetch(r->k, next, 16);
				rc = sluice_keyed_acquire(r->k, key, 16, 1, &d);
				break;
			default:
				rc = sluice_keyed_acquire(r->k, key, 16, 1, &d);
				break;
			}
			admitted += rc == 1;
		}
		decisions += BATCH;
		if (mono_ns() >= r->deadline)
			break;
	}
	r->cpu_ns = thread_ns() - c0;
	r->decisions = decisions;
	r->admitted = admitted;
	return NULL;
}

/* One timed run; returns ns per decision, sets *admitted_frac. */
static double timed(enum impl impl, int regime, int threads, double seconds, double *frac,
                    double *cpu_ns)
{
	const struct regime *rg = &regimes[regime];
	sluice_keyed_t k;
	struct mutex_table m;
	struct mutex_array ma;
	sluice_gcra_t *arr = NULL;
	const sluice_clock_t *clock = is_mono(impl) ? &sluice_clock_monotonic : &sluice_clock_cached;
	if (impl == MUTEX) {
		mutex_init(&m, rg->keys, SEC / rg->rate, rg->burst);
	} else if (impl == MARRAY_CACHED || impl == MARRAY_MONO) {
		marray_init(&ma, rg->keys, SEC / rg->rate, rg->burst, clock);
	} else if (impl == ARRAY_CACHED || impl == ARRAY_MONO) {
		arr = aligned_alloc(SLUICE_CACHELINE, rg->keys * sizeof(*arr));
		if (!arr)
			exit(2);
		sluice_gcra_config_t gc = { .rate = rg->rate, .period_ns = SEC, .burst = rg->burst,
			                    .clock = clock };
		for (uint64_t i = 0; i < rg->keys; i++)
			if (sluice_gcra_init(&arr[i], &gc) != 0) {
				fprintf(stderr, "bench_keyed: gcra init\n");
				exit(2);
			}
	} else {
		/* keyed-gcra: key_max 16, the keys' length (one 64-byte slot a
		 * key); keyed-gcra-k32: the default 32 (128-byte slots) */
		sluice_keyed_config_t c = { .algo = SLUICE_ALGO_GCRA, .capacity = rg->capacity,
			                    .rate = rg->rate, .period_ns = SEC, .burst = rg->burst,
			                    .key_max = impl == KEYED32_CACHED || impl == KEYED32_MONO ? 0 : 16,
			                    .flags = impl == KEYEDSIP_CACHED ? SLUICE_KEYED_SIPHASH : 0 };
		int rc = sluice_keyed_init(&k, &c, clock);
		if (rc != 0) {
			fprintf(stderr, "bench_keyed: new: %s\n", sluice_err_name(rc));
			exit(2);
		}
	}
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	static struct run r[BENCH_MAX_THREADS];
	static pthread_t tid[BENCH_MAX_THREADS];
	for (int t = 0; t < threads; t++) {
		r[t] = (struct run){ .impl = impl, .rg = rg, .regime = regime, .tid = t, .k = &k,
			             .m = &m, .ma = &ma, .arr = arr, .start = &start };
	}
	uint64_t t0 = mono_ns() + 1000000; /* after the threads are up */
	for (int t = 0; t < threads; t++) {
		r[t].deadline = t0 + (uint64_t)(seconds * 1e9);
		if (pthread_create(&tid[t], NULL, run_main, &r[t]) != 0)
			exit(2);
	}
	while (mono_ns() < t0)
		;
	uint64_t begin = mono_ns();
	pthread_barrier_wait(&start);
	uint64_t decisions = 0, admitted = 0, cpu = 0;
	for (int t = 0; t < threads; t++) {
		pthread_join(tid[t], NULL);
		cpu += r[t].cpu_ns;
		decisions += r[t].decisions;
		admitted += r[t].admitted;
	}
	uint64_t wall = mono_ns() - begin;
	pthread_barrier_destroy(&start);
	if (impl == MUTEX) {
		mutex_free(&m);
	} else if (impl == MARRAY_CACHED || impl == MARRAY_MONO) {
		for (uint64_t i = 0; i < rg->keys; i++)
			pthread_mutex_destroy(&ma.cell[i].lock);
		free(ma.cell);
	} else if (arr) {
		free(arr);
	} else {
		sluice_keyed_destroy(&k);
	}
	*frac = (double)admitted / (double)decisions;
	*cpu_ns = (double)cpu / (double)decisions;
	return (double)wall / (double)decisions;
}

/* ---- the hash: SipHash-1-3 against alternatives that are also keyed -------- */

/* HalfSipHash-1-3 with 64-bit output (Aumasson's reference, 32-bit words),
 * written here for this timing only: the keyed tables do not use it. */
#define HROTL(x, b) (uint32_t)(((x) << (b)) | ((x) >> (32 - (b))))
#define HROUND                                                                               \
	do {                                                                                 \
		v0 += v1; v1 = HROTL(v1, 5); v1 ^= v0; v0 = HROTL(v0, 16);                   \
		v2 += v3; v3 = HROTL(v3, 8); v3 ^= v2; v0 += v3; v3 = HROTL(v3, 7); v3 ^= v0; \
		v2 += v1; v1 = HROTL(v1, 13); v1 ^= v2; v2 = HROTL(v2, 16);                  \
	} while (0)
static uint64_t halfsip13(uint32_t k0, uint32_t k1, const unsigned char *p, size_t len)
{
	uint32_t v0 = k0, v1 = k1 ^ 0xee, v2 = 0x6c796765u ^ k0, v3 = 0x74656462u ^ k1;
	size_t whole = len - len % 4;
	for (size_t i = 0; i < whole; i += 4) {
		uint32_t m;
		memcpy(&m, p + i, 4);
		v3 ^= m;
		HROUND;
		v0 ^= m;
	}
	uint32_t b = (uint32_t)len << 24;
	for (size_t i = whole; i < len; i++)
		b |= (uint32_t)p[i] << (8 * (i - whole));
	v3 ^= b;
	HROUND;
	v0 ^= b;
	v2 ^= 0xee;
	HROUND; HROUND; HROUND;
	uint32_t lo = v1 ^ v3;
	v1 ^= 0xdd;
	HROUND; HROUND; HROUND;
	return ((uint64_t)(v1 ^ v3) << 32) | lo;
}

/* A keyed multiply-and-fold hash of up to 16 bytes (the wyhash/mum shape:
 * the two halves XOR-ed with secret words, one 128-bit product folded,
 * then a second keyed fold), for this timing only: no proof bounds what
 * an attacker learns about its key from collisions (docs/performance.md). */
static uint64_t mulfold16(uint64_t k0, uint64_t k1, const unsigned char *p, size_t len)
{
	uint64_t a = 0, b = 0;
	if (len >= 8) {
		memcpy(&a, p, 8);
		memcpy(&b, p + len - 8, 8);
	} else {
		a = sluice__siphash_tail(p, len);
	}
	sluice__u128 x = (sluice__u128)(a ^ k0) * (b ^ k1 ^ len);
	uint64_t h = (uint64_t)x ^ (uint64_t)(x >> 64);
	x = (sluice__u128)(h ^ k1) * (k0 | 1);
	return (uint64_t)x ^ (uint64_t)(x >> 64);
}

#if defined(__x86_64__)
#include <wmmintrin.h>
/* AES-128 (FIPS-197, AES-NI) of the key's 16 bytes XOR-ed with a secret
 * tweak of its length: a keyed pseudorandom permutation of one block, as
 * strong a keyed function for keys up to 16 bytes as SipHash (a tweak per
 * length keeps keys of different lengths apart), for this timing only:
 * the keyed tables do not use it (docs/performance.md, "Keyed decisions",
 * says why).  The round keys are expanded once, as a table's attach would. */
static __m128i aes_rk[11];
#define AES_EXPAND(i, rcon)                                                          \
	do {                                                                         \
		__m128i t = _mm_aeskeygenassist_si128(k, rcon);                      \
		t = _mm_shuffle_epi32(t, 0xff);                                      \
		k = _mm_xor_si128(k, _mm_slli_si128(k, 4));                          \
		k = _mm_xor_si128(k, _mm_slli_si128(k, 4));                          \
		k = _mm_xor_si128(k, _mm_slli_si128(k, 4));                          \
		aes_rk[i] = k = _mm_xor_si128(k, t);                                 \
	} while (0)
__attribute__((target("aes,sse2"))) static void aes_setup(uint64_t k0, uint64_t k1)
{
	__m128i k = _mm_set_epi64x((long long)k1, (long long)k0);
	aes_rk[0] = k;
	AES_EXPAND(1, 0x01); AES_EXPAND(2, 0x02); AES_EXPAND(3, 0x04); AES_EXPAND(4, 0x08);
	AES_EXPAND(5, 0x10); AES_EXPAND(6, 0x20); AES_EXPAND(7, 0x40); AES_EXPAND(8, 0x80);
	AES_EXPAND(9, 0x1b); AES_EXPAND(10, 0x36);
}
__attribute__((target("aes,sse2"))) static uint64_t aes128_16(uint64_t t0, uint64_t t1,
                                                             const unsigned char *p, size_t len)
{
	uint64_t w0, w1;
	sluice__siphash_words16(p, len, &w0, &w1);
	__m128i b = _mm_set_epi64x((long long)(w1 ^ t1), (long long)(w0 ^ t0));
	b = _mm_xor_si128(b, aes_rk[0]);
	for (int r = 1; r < 10; r++)
		b = _mm_aesenc_si128(b, aes_rk[r]);
	b = _mm_aesenclast_si128(b, aes_rk[10]);
	return (uint64_t)_mm_cvtsi128_si64(b);
}
static int have_aes(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("aes");
}
#else
static void aes_setup(uint64_t k0, uint64_t k1)
{
	(void)k0, (void)k1;
}
static uint64_t aes128_16(uint64_t t0, uint64_t t1, const unsigned char *p, size_t len)
{
	(void)t0, (void)t1, (void)p, (void)len;
	return 0;
}
static int have_aes(void)
{
	return 0;
}
#endif

/* CPU ns per hash of 16-byte keys (the regimes' keys), median of 5 runs
 * of 4M hashes each; which key is hashed depends on the hash before (its
 * low bit), so hashes are timed one after another, latency included, as a
 * decision waits for its hash before it can load the key's slot. */
static void bench_hashes(const char *cpu)
{
	enum { NK = 4096, N = 1 << 22 };
	static unsigned char keys[NK][16];
	for (uint32_t i = 0; i < NK; i++)
		make_key(keys[i], i * 2654435761u);
	/* siphash13: the generic inline body; siphash13-words16: what a keyed
	 * decision runs (the key loaded once as two words, the rounds written
	 * out); aes128: skipped without AES-NI; aes4-keyhash: the keyed
	 * tables' AES hash as a decision runs it (lib/keyhash_internal.h: the
	 * words, the out-of-line call, the per-length whitening and four
	 * rounds), skipped without AES-NI */
	const char *name[] = { "siphash13", "siphash13-words16", "halfsiphash13", "mulfold",
		               "aes128", "aes4-keyhash" };
	aes_setup(0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL);
	uint64_t ak[SLUICE__KEYHASH_WORDS];
	sluice__keyhash_expand(0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL, ak);
	for (int h = 0; h < 6; h++) {
		if (h >= 4 && !have_aes()) {
			printf("bench hash=%s key_bytes=16 skipped=no-aes-ni\n", name[h]);
			continue;
		}
		double t[5];
		uint64_t acc = 0;
		for (int r = 0; r < 5; r++) {
			uint64_t c0 = thread_ns();
			for (uint32_t i = 0; i < N; i++) {
				const unsigned char *k = keys[(i ^ (uint32_t)(acc & 1)) & (NK - 1)];
				uint64_t w0, w1;
				if (h == 0) {
					acc += sluice__siphash13_short(0x0706050403020100ULL,
					                               0x0f0e0d0c0b0a0908ULL, k, 16);
				} else if (h == 1) {
					sluice__siphash_words16(k, 16, &w0, &w1);
					acc += sluice__siphash13_words16(0x0706050403020100ULL,
					                                 0x0f0e0d0c0b0a0908ULL, w0, w1,
					                                 16);
				} else if (h == 2) {
					acc += halfsip13(0x03020100u, 0x07060504u, k, 16);
				} else if (h == 3) {
					acc += mulfold16(0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL, k,
					                 16);
				} else if (h == 4) {
					acc += aes128_16(0x1f1e1d1c1b1a1918ULL, 0x1716151413121110ULL, k,
					                 16);
				} else {
#ifdef SLUICE__KEYHASH_AES
					sluice__siphash_words16(k, 16, &w0, &w1);
					acc += sluice__keyhash_aes16(ak, w0, w1, 16);
#endif
				}
			}
			t[r] = (double)(thread_ns() - c0) / N;
		}
		printf("bench hash=%s key_bytes=16 cpu_ns_per_hash=%.2f cpu=\"%s\" (sum %llx)\n",
		       name[h], bench_median(t, 5), cpu, (unsigned long long)(acc & 0xf));
	}
}

/* ---- batches: a request's keyed decisions, one call each or one batch ------
 *
 * Four keyed GCRA tables as random10k's (10,000 keys each, 10/s burst 10,
 * 16-byte keys, key_max 16, cached clock), one per limit of a request, as a
 * gateway limits per route, user, IP and tenant; each request draws one key
 * per table (consecutive draws of the random10k sequence).  single: one
 * sluice_keyed_acquire() per key; batch: one sluice_keyed_acquire_many()
 * of the request's keys (issue 27 item 2: per key <= 0.6x single).  Also
 * with 1 key per request (batch of one against the single call).  Every
 * key is created before the timing.  One thread; every case builds every
 * key; cases interleaved per repeat; thread CPU ns per key decision,
 * medians. */
#define MANY_TABLES 4
static double batch_run(int batch, int per, double seconds, uint64_t *adm)
{
	const struct regime *rg = &regimes[0];
	sluice_keyed_t k[MANY_TABLES];
	for (int t = 0; t < MANY_TABLES; t++) {
		sluice_keyed_config_t c = { .algo = SLUICE_ALGO_GCRA, .capacity = rg->capacity,
			                    .rate = rg->rate, .period_ns = SEC, .burst = rg->burst,
			                    .key_max = 16 };
		if (sluice_keyed_init(&k[t], &c, &sluice_clock_cached) != 0)
			exit(2);
	}
	/* every key of every table created first, untimed: the timed part
	 * is the steady state (tables hit at random, no creation, no first
	 * touch of a table's pages) */
	for (int t = 0; t < MANY_TABLES; t++)
		for (uint32_t key = 0; key < rg->keys; key++) {
			unsigned char kb[16];
			make_key(kb, key);
			int rc = sluice_keyed_acquire(&k[t], kb, 16, 1, NULL);
			if (rc < 0 && rc != SLUICE_EKEYFULL) { /* a full group: as the timed part */
				fprintf(stderr, "bench_keyed: batch warm-up: %s\n", sluice_err_name(rc));
				exit(2);
			}
		}
	const uint32_t *dr = draws[0][0];
	uint32_t i = 0;
	uint64_t keys = 0, admitted = 0, deadline = mono_ns() + (uint64_t)(seconds * 1e9);
	uint64_t c0 = thread_ns();
	do {
		for (int b = 0; b < BATCH; b++) {
			unsigned char key[MANY_TABLES][16];
			sluice_decision_t d[MANY_TABLES];
			for (int j = 0; j < per; j++)
				make_key(key[j], dr[i++ & (DRAWS - 1)]);
			if (batch) {
				sluice_keyed_request_t req[MANY_TABLES];
				for (int j = 0; j < per; j++)
					req[j] = (sluice_keyed_request_t){ .table = &k[j], .key = key[j],
						                           .keylen = 16, .n = 1,
						                           .d = &d[j] };
				int rc = sluice_keyed_acquire_many(req, (size_t)per, 0);
				admitted += rc > 0 ? (uint64_t)rc : 0;
			} else {
				for (int j = 0; j < per; j++)
					admitted += sluice_keyed_acquire(&k[j], key[j], 16, 1, &d[j]) == 1;
			}
		}
		keys += (uint64_t)BATCH * (uint64_t)per;
	} while (mono_ns() < deadline);
	double ns = (double)(thread_ns() - c0) / (double)keys;
	for (int t = 0; t < MANY_TABLES; t++)
		sluice_keyed_destroy(&k[t]);
	*adm = admitted;
	return ns;
}

static void bench_batches(const struct bench_opts *o)
{
	static const int per[] = { 1, 4 };
	double t[2][2][64]; /* [per][batch][repeat] */
	uint64_t adm[2][2] = { { 0 } };
	for (unsigned r = 0; r < o->repeats; r++)
		for (int p = 0; p < 2; p++)
			for (int b = 0; b < 2; b++)
				t[p][b][r] = batch_run(b, per[p], o->seconds, &adm[p][b]);
	for (int p = 0; p < 2; p++) {
		double single = bench_median(t[p][0], o->repeats);
		double batch = bench_median(t[p][1], o->repeats);
		printf("bench_batch regime=random10k tables=%d keys_per_request=%d "
		       "single_cpu_ns_per_key=%.1f batch_cpu_ns_per_key=%.1f batch_vs_single=%.2f "
		       "admitted_single=%llu admitted_batch=%llu\n",
		       MANY_TABLES, per[p], single, batch, batch / single,
		       (unsigned long long)adm[p][0], (unsigned long long)adm[p][1]);
	}
}

/* med and frac: [regime][thread count index][impl] */
typedef double per_count[NREG][BENCH_MAX_COUNTS][NIMPL];

static void print_table(const char *what, const struct bench_opts *o, per_count med,
                        per_count frac)
{
	int last = o->nthreads - 1, w[BENCH_MAX_COUNTS];
	char label[BENCH_MAX_COUNTS][24], vsn[24];
	for (int t = 0; t < o->nthreads; t++) {
		snprintf(label[t], sizeof(label[t]), "ns (%d thr)", o->threads[t]);
		w[t] = (int)strlen(label[t]) > 10 ? (int)strlen(label[t]) : 10;
	}
	snprintf(vsn, sizeof(vsn), "vs_mutex%d", o->threads[last]);
	printf("\n%s\n", what);
	printf("  %-10s %-15s %-9s", "regime", "algo", "clock");
	for (int t = 0; t < o->nthreads; t++)
		printf(" %*s", w[t], label[t]);
	printf(" %8s %10s %10s %10s %9s\n", "scaling", "vs_array", "vs_mutex", vsn, "admitted");
	for (int rg = 0; rg < NREG; rg++)
		for (int im = 0; im < NIMPL; im++) {
			const double *m1 = med[rg][0], *mn = med[rg][last];
			printf("  %-10s %-15s %-9s", regimes[rg].name, impl_name[im],
			       is_mono((enum impl)im) ? "monotonic" : "cached");
			for (int t = 0; t < o->nthreads; t++)
				printf(" %*.1f", w[t], med[rg][t][im]);
			printf(" %7.2fx", m1[im] / mn[im]);
			if (is_keyed((enum impl)im))
				printf(" %9.2fx %9.2fx %9.2fx", m1[array_of((enum impl)im)] / m1[im],
				       m1[marray_of((enum impl)im)] / m1[im],
				       mn[marray_of((enum impl)im)] / mn[im]);
			else
				printf(" %10s %10s %10s", "", "", "");
			printf(" %8.1f%%\n", 100 * frac[rg][0][im]);
		}
}

int main(int argc, char **argv)
{
	struct bench_opts o = { .repeats = 3, .seconds = 0.5 };
	int batches_only = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--batches") == 0) {
			batches_only = 1;
			continue;
		}
		if (bench_parse_opt(argv[i], &o, 1, 0.2, 1) != 1) {
			fprintf(stderr, "usage: %s [--quick] [--repeats=N] [--seconds=S] "
			                "[--threads=1,2,4] [--batches]\n", argv[0]);
			return 2;
		}
	}
	if (o.repeats < 1 || o.repeats > 64 || !(o.seconds > 0)) {
		fprintf(stderr, "bench_keyed: need 1..64 repeats and seconds > 0\n");
		return 2;
	}
	if (bench_threads_finish(&o, "bench_keyed", 0, 0))
		return 2;
	if (sluice_clock_cached_start(0) != 0)
		return 2;
	char cpu[128];
	bench_cpu_model(cpu, sizeof(cpu));
	/* the environment line bench_algos prints (docs/performance.md) */
	printf("bench_env cpu=\"%s\" online_cpus=%ld threads=", cpu, sysconf(_SC_NPROCESSORS_ONLN));
	bench_print_threads(&o);
	printf(" repeats=%u seconds=%.2f "
	       "clock_sluice=cached(%llu_ns_ticker),monotonic clock_mutex=cached,monotonic "
	       "clock_mutex_hash=monotonic\n",
	       o.repeats, o.seconds, (unsigned long long)SLUICE_CACHED_PERIOD_NS);
	if (!batches_only)
		bench_hashes(cpu);
	fflush(stdout);
	make_draws(bench_threads_max(&o));
	if (batches_only)
		goto batches;

	/* [regime][thread count index][impl][repeat] */
	static double ns[NREG][BENCH_MAX_COUNTS][NIMPL][64], cns[NREG][BENCH_MAX_COUNTS][NIMPL][64];
	static per_count frac, med, cmed;
	for (unsigned rep = 0; rep < o.repeats; rep++)
		for (int rg = 0; rg < NREG; rg++)
			for (int th = 0; th < o.nthreads; th++)
				for (int im = 0; im < NIMPL; im++)
					ns[rg][th][im][rep] = timed((enum impl)im, rg, o.threads[th],
					                            o.seconds, &frac[rg][th][im],
					                            &cns[rg][th][im][rep]);
	for (int rg = 0; rg < NREG; rg++)
		for (int th = 0; th < o.nthreads; th++)
			for (int im = 0; im < NIMPL; im++)
				med[rg][th][im] = bench_median(ns[rg][th][im], o.repeats),
				cmed[rg][th][im] = bench_median(cns[rg][th][im], o.repeats);
	for (int rg = 0; rg < NREG; rg++)
		for (int th = 0; th < o.nthreads; th++)
			for (int im = 0; im < NIMPL; im++) {
				const double *m = med[rg][th];
				printf("bench algo=%s mode=%s threads=%d regime=%s ns_per_decision=%.1f "
				       "decisions_per_sec=%.0f",
				       impl_name[im], is_mono((enum impl)im) ? "monotonic" : "cached",
				       o.threads[th], regimes[rg].name, m[im], 1e9 / m[im]);
				if (im != MUTEX)
					printf(" vs_array=%.2f vs_mutex=%.2f",
					       m[array_of((enum impl)im)] / m[im],
					       m[marray_of((enum impl)im)] / m[im]);
				const double *c = cmed[rg][th];
				printf(" vs_hash=%.2f cpu_ns_per_decision=%.1f", m[MUTEX] / m[im], c[im]);
				if (im != MUTEX)
					printf(" cpu_vs_array=%.2f cpu_vs_mutex=%.2f",
					       c[array_of((enum impl)im)] / c[im],
					       c[marray_of((enum impl)im)] / c[im]);
				printf(" admitted=%.3f\n", frac[rg][th][im]);
			}

	printf("\nkeyed GCRA vs a plain array of sluice GCRA limiters, per-key mutexes in an\n"
	       "array, and a mutex-protected chained hash table (same process, same run);\n"
	       "median of %u runs of %.2f s; cpu: %s\n",
	       o.repeats, o.seconds, cpu);
	print_table("wall ns per decision over all threads", &o, med, frac);
	print_table("CPU ns per decision (thread CPU time: what a shared machine's waits leave out)",
	            &o, cmed, frac);
	int nl = o.threads[o.nthreads - 1];
	printf("  (scaling = decisions/s at %d threads / at 1 thread; vs_array and vs_mutex at\n"
	       "   1 thread against array-gcra and mutex-array on the same clock, vs_mutex%d at\n"
	       "   %d threads; every ratio > 1 means keyed is faster)\n", nl, nl, nl);
	printf("\n");
batches:
	bench_batches(&o);
	printf("  (bench_batch: %d keyed GCRA tables of random10k, one key of each per request;\n"
	       "   batch_vs_single = batch CPU ns per key / single's: < 1 means the batch is\n"
	       "   cheaper; one thread, median of %u runs of %.2f s)\n",
	       MANY_TABLES, o.repeats, o.seconds);
	for (int rg = 0; rg < NREG; rg++)
		for (int t = 0; t < nseq; t++)
			free(draws[rg][t]);
	sluice_clock_cached_stop();
	return 0;
}
