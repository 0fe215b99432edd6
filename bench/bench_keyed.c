/*
 * bench_keyed.c - decisions per second of a keyed GCRA table against the way
 * a typical implementation does it: a chained hash table of per-key GCRA
 * states behind one pthread mutex, reading CLOCK_MONOTONIC, allocating a
 * node per new key.  Both run in the same process and the same run.
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
 * Threads: 1 and 2 (this machine's cores), deciding on the same table.
 * Cases: keyed-gcra with the cached clock (the default) and with
 * CLOCK_MONOTONIC (the same clock as the baseline), and the mutex baseline.
 * Each case runs --seconds (default 0.5 s) wall time, --repeats times
 * (default 3), interleaved across cases; medians reported.  Key sequences
 * are drawn before timing (per thread, 4M draws, cycled).  The keyed table
 * and the baseline are built fresh for each timed run.
 *
 * Output: one `bench ...` line per case, then a human table.
 *   ns_per_decision = wall ns / decisions (all threads);
 *   vs_mutex = the baseline's ns_per_decision / this one's (> 1: faster);
 *   scaling (table) = decisions/s at 2 threads / at 1 thread.
 * Options: --quick (1 repeat of 0.2 s), --repeats=N, --seconds=S.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/sluice.h"

#include "bench_common.h"

#define SEC 1000000000ULL
#define DRAWS (1u << 22)
#define BATCH 256

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
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
	uint64_t base = p->tat > now ? p->tat : now;
	int ok = base + m->T - now <= m->tau;
	if (ok)
		p->tat = base + m->T;
	uint64_t lag = p->tat > now ? p->tat - now : 0;
	pthread_mutex_unlock(&m->lock);
	d->allowed = ok;
	d->limit = m->tau / m->T;
	d->remaining = lag < m->tau ? (m->tau - lag) / m->T : 0;
	d->retry_after_ns = ok ? 0 : base + m->T - now - m->tau;
	d->delay_ns = 0;
	d->reset_ns = lag;
	d->now_ns = now;
	return ok;
}

/* ---- cases ----------------------------------------------------------------- */

enum impl { KEYED_CACHED, KEYED_MONO, MUTEX, NIMPL };
static const char *impl_name[] = { "keyed-gcra", "keyed-gcra", "mutex-hash" };
static const char *impl_mode[] = { "cached", "monotonic", "monotonic" };

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

static uint32_t *draws[2][2]; /* [regime][thread] */

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

static void make_draws(void)
{
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
	for (int t = 0; t < 2; t++) {
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
	pthread_barrier_t *start;
	uint64_t deadline, decisions, admitted;
};

static void *run_main(void *arg)
{
	struct run *r = arg;
	const uint32_t *dr = draws[r->regime][r->tid];
	uint32_t i = (uint32_t)r->tid * 7919u;
	uint64_t decisions = 0, admitted = 0;
	pthread_barrier_wait(r->start);
	for (;;) {
		for (int b = 0; b < BATCH; b++) {
			unsigned char key[16];
			make_key(key, dr[i++ & (DRAWS - 1)]);
			sluice_decision_t d;
			int rc = r->impl == MUTEX ? mutex_acquire(r->m, key, &d)
			                          : sluice_keyed_acquire(r->k, key, 16, 1, &d);
			admitted += rc == 1;
		}
		decisions += BATCH;
		if (mono_ns() >= r->deadline)
			break;
	}
	r->decisions = decisions;
	r->admitted = admitted;
	return NULL;
}

/* One timed run; returns ns per decision, sets *admitted_frac. */
static double timed(enum impl impl, int regime, int threads, double seconds, double *frac)
{
	const struct regime *rg = &regimes[regime];
	sluice_keyed_t k;
	struct mutex_table m;
	if (impl == MUTEX) {
		mutex_init(&m, rg->keys, SEC / rg->rate, rg->burst);
	} else {
		sluice_keyed_config_t c = { .algo = SLUICE_ALGO_GCRA, .capacity = rg->capacity,
			                    .rate = rg->rate, .period_ns = SEC, .burst = rg->burst };
		int rc = sluice_keyed_new(&k, &c,
		                          impl == KEYED_CACHED ? &sluice_clock_cached
		                                               : &sluice_clock_monotonic);
		if (rc != 0) {
			fprintf(stderr, "bench_keyed: new: %s\n", sluice_err_name(rc));
			exit(2);
		}
	}
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	struct run r[2];
	pthread_t tid[2];
	for (int t = 0; t < threads; t++) {
		r[t] = (struct run){ .impl = impl, .rg = rg, .regime = regime, .tid = t, .k = &k,
			             .m = &m, .start = &start };
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
	uint64_t decisions = 0, admitted = 0;
	for (int t = 0; t < threads; t++) {
		pthread_join(tid[t], NULL);
		decisions += r[t].decisions;
		admitted += r[t].admitted;
	}
	uint64_t wall = mono_ns() - begin;
	pthread_barrier_destroy(&start);
	if (impl == MUTEX)
		mutex_free(&m);
	else
		sluice_keyed_free(&k);
	*frac = (double)admitted / (double)decisions;
	return (double)wall / (double)decisions;
}

int main(int argc, char **argv)
{
	struct bench_opts o = { 3, 0.5 };
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			o.repeats = 1;
			o.seconds = 0.2;
		} else if (strncmp(argv[i], "--repeats=", 10) == 0) {
			o.repeats = (unsigned)strtoul(argv[i] + 10, NULL, 10);
		} else if (strncmp(argv[i], "--seconds=", 10) == 0) {
			o.seconds = strtod(argv[i] + 10, NULL);
		} else {
			fprintf(stderr, "usage: %s [--quick] [--repeats=N] [--seconds=S]\n", argv[0]);
			return 2;
		}
	}
	if (o.repeats < 1 || o.repeats > 64 || !(o.seconds > 0)) {
		fprintf(stderr, "bench_keyed: need 1..64 repeats and seconds > 0\n");
		return 2;
	}
	if (sluice_clock_cached_start(0) != 0)
		return 2;
	make_draws();

	double ns[NREG][2][NIMPL][64], frac[NREG][2][NIMPL];
	for (unsigned rep = 0; rep < o.repeats; rep++)
		for (int rg = 0; rg < NREG; rg++)
			for (int th = 0; th < 2; th++)
				for (int im = 0; im < NIMPL; im++)
					ns[rg][th][im][rep] = timed((enum impl)im, rg, th + 1, o.seconds,
					                            &frac[rg][th][im]);
	double med[NREG][2][NIMPL];
	for (int rg = 0; rg < NREG; rg++)
		for (int th = 0; th < 2; th++)
			for (int im = 0; im < NIMPL; im++)
				med[rg][th][im] = bench_median(ns[rg][th][im], o.repeats);
	for (int rg = 0; rg < NREG; rg++)
		for (int th = 0; th < 2; th++)
			for (int im = 0; im < NIMPL; im++)
				printf("bench algo=%s mode=%s threads=%d regime=%s ns_per_decision=%.1f "
				       "decisions_per_sec=%.0f vs_mutex=%.2f admitted=%.3f\n",
				       impl_name[im], impl_mode[im], th + 1, regimes[rg].name,
				       med[rg][th][im], 1e9 / med[rg][th][im],
				       med[rg][th][MUTEX] / med[rg][th][im], frac[rg][th][im]);

	printf("\nkeyed GCRA vs a mutex-protected chained hash table (same process, same run);\n"
	       "median of %u runs of %.2f s; ns = wall ns per decision over all threads\n",
	       o.repeats, o.seconds);
	printf("  %-10s %-10s %-9s %12s %12s %9s %12s %9s\n", "regime", "algo", "clock",
	       "ns (1 thr)", "ns (2 thr)", "scaling", "vs_mutex(1)", "admitted");
	for (int rg = 0; rg < NREG; rg++)
		for (int im = 0; im < NIMPL; im++)
			printf("  %-10s %-10s %-9s %12.1f %12.1f %8.2fx %11.2fx %8.1f%%\n",
			       regimes[rg].name, impl_name[im], impl_mode[im], med[rg][0][im],
			       med[rg][1][im], med[rg][0][im] / med[rg][1][im],
			       med[rg][0][MUTEX] / med[rg][0][im], 100 * frac[rg][0][im]);
	printf("  (scaling = decisions/s at 2 threads / at 1 thread; vs_mutex(1) at 1 thread;\n"
	       "   at 2 threads vs_mutex is in the bench lines)\n");
	for (int rg = 0; rg < NREG; rg++)
		for (int t = 0; t < 2; t++)
			free(draws[rg][t]);
	sluice_clock_cached_stop();
	return 0;
}
