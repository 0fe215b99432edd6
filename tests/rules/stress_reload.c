/* SPDX-License-Identifier: MIT */
/*
 * stress_reload.c - threads decide while another thread reloads,
 * alternately, two rule files about 1000 times a second (issue 12 item 8).
 *
 *   stress_reload [--threads=N] [--seconds=S] [--reloads-per-s=R]
 *
 * The engine's clock is a manual clock that never moves, so nothing
 * refills and every count is exact.  The two files share four rules with
 * the same state layout (some with other answers or limits), and one rule
 * is only in the first file (removed and put back at every other load).
 * Each request goes to one rule (disjoint prefixes), so a rule's
 * admissions are the requests it passed.  After the run the verifier
 * checks, over everything the deciders recorded:
 *   - no lost decision: every call returned a verdict of a published
 *     version, versions never went back within a thread, and the rules a
 *     verdict matched are those of its version's file;
 *   - unchanged rules kept their state and nothing was refilled: each key
 *     of `keep` (GCRA, burst 50, no refill) passed exactly 50 times,
 *     `total` (a global window of 300) exactly 300; `flip`, whose limit
 *     alternates 20 and 10 (live set_limit: counts kept) at most 20 per
 *     user; `only-a`, removed and put back, at most 5 in total;
 *   - no lost release: after the run, with every verdict completed, each
 *     user of `conc` (concurrency 4, completed at once) can hold 4 again.
 *
 * Then (issue 22, Deliver 6) a reload that lowers a rate while traffic
 * flows, on the real clock (sluice_clock_monotonic): the reloader
 * alternates a file whose per-key token bucket is fast (T_A = 100 us) and
 * one where it is slower by a fifth (T_B = 125 us: a change stamped L
 * behind the decisions, losing L of debt, admits about L / T_B too many,
 * against the verifier's slack of W / T_A), the same burst b = 4 and layout, so
 * each load changes the tables' rate live (sluice_keyed_set_rate_at
 * through reload.c), each with 40 more rules no request matches (a load
 * takes a gateway file's while to parse and compile), one load per
 * 1/reloads-per-s after the last one ended; deciders take permits from
 * two keys.  Each admission
 * is recorded with its reading r (the verdict's now_ns) and a reading
 * taken when decide returned; the admission happened in between, and
 * only admissions whose gap is at most W = 20 us are counted (dropping
 * one can only hide an excess, never make one).  The reloader records
 * each load's readings before and after and the rate in force after it
 * (a change a table refuses for now stays pending, engine.h RELOAD).  The
 * verifier, per key, over the admissions sorted by reading, with closed
 * intervals and exact integer arithmetic:
 *   - every interval [r_i, r_j]: at most b + (r_j - r_i + W) / T_A
 *     admissions (the bound of the parameter set in force with the most
 *     room, the fast one: max over the sets of b + t/T);
 *   - every interval in which only the slow set was in force (after a
 *     load that left it in force, before the next load began, each
 *     admission's whole [r, r + W] inside): at most b + (r_j - r_i + W) / T_B.
 * Use-after-free and races are the sanitizers' to find: this program runs
 * in the ASan and TSan builds (suite stress).  Exit 0 when every check
 * held, 1 otherwise.
 *
 *   stress_reload [...] [--case=all|swap|lower]  (default all: both)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/error.h"
#include "sluice/engine.h"

#define NKEYS 8
#define NUSERS 4
#define KEEP_BURST 50
#define TOTAL 300
#define FLIP_MAX 20
#define ONLY_A 5
#define CONC 4
#define MAX_THREADS 16

#define COMMON                                                                     \
	"  - id: keep\n"                                                           \
	"    match: { prefix: /k/ }\n"                                             \
	"    dimensions: [ip]\n"                                                   \
	"    limit: { algorithm: token_bucket, rate: 1/h, burst: 50 }\n"            \
	"    keys: { capacity: 1024 }\n"                                           \
	"  - id: total\n"                                                          \
	"    match: { prefix: /t/ }\n"                                             \
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 300 }\n"   \
	"  - id: conc\n"                                                           \
	"    match: { prefix: /c/ }\n"                                             \
	"    dimensions: [user]\n"                                                 \
	"    limit: { algorithm: concurrency, max_inflight: 4 }\n"                 \
	"    keys: { capacity: 64 }\n"

static const char file_a[] = "rules:\n" COMMON
	"  - id: flip\n"
	"    match: { prefix: /f/ }\n"
	"    dimensions: [user]\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 20 }\n"
	"    keys: { capacity: 64 }\n"
	"    fallback: { type: reject, status: 429 }\n"
	"  - id: only-a\n"
	"    match: { prefix: /a/ }\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 5 }\n";
static const char file_b[] = "rules:\n" COMMON
	"  - id: flip\n"
	"    match: { prefix: /f/ }\n"
	"    dimensions: [user]\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 10 }\n"
	"    keys: { capacity: 64 }\n"
	"    fallback: { type: reject, status: 503 }\n";

static sluice_engine_t *eng;
static sluice_clock_t clk;
static atomic_int stop;

struct rec {
	uint64_t calls, verdicts, bad_version, went_back, wrong_match, errors;
	uint64_t keep[NKEYS], total, flip[NUSERS], only_a, conc_refused;
	uint64_t last_version;
	char why[160];
};

static void note(struct rec *r, const char *what)
{
	if (!r->why[0])
		snprintf(r->why, sizeof(r->why), "%s", what);
}

static int passed_rule(const sluice_verdict_t *v, const char *id)
{
	return v->nrules == 1 && strcmp(v->rules[0].id, id) == 0 &&
	       v->rules[0].outcome == SLUICE_OUTCOME_PASSED;
}

static void *decider(void *arg)
{
	struct rec *r = arg;
	unsigned char ip[4] = { 10, 0, 0, 0 };
	char user[8];
	uint64_t i = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		sluice_request_t q = { .method = "GET" };
		sluice_verdict_t v;
		unsigned kind = (unsigned)(i % 5), k = (unsigned)((i / 5) % NKEYS);
		unsigned u = k % NUSERS;
		snprintf(user, sizeof(user), "u%u", u);
		q.user = user;
		q.user_len = strlen(user);
		ip[3] = (unsigned char)k;
		q.addr = ip;
		q.addr_len = 4;
		static const char *const paths[] = { "/k/x", "/t/x", "/f/x", "/a/x", "/c/x" };
		q.path = paths[kind];
		i++;
		r->calls++;
		int rc = sluice_engine_decide(eng, &q, &v);
		if (rc < 0) {
			r->errors++;
			note(r, "decide returned an error");
			continue;
		}
		r->verdicts++;
		if (v.version == 0)
			r->bad_version++;
		if (v.version < r->last_version)
			r->went_back++;
		r->last_version = v.version;
		int in_a = v.version % 2 == 1; /* loads alternate A, B, A, ... */
		switch (kind) {
		case 0:
			r->keep[k] += passed_rule(&v, "keep");
			break;
		case 1:
			r->total += passed_rule(&v, "total");
			break;
		case 2:
			r->flip[u] += passed_rule(&v, "flip");
			if (v.nrules != 1 || (v.action == SLUICE_ACTION_REJECT &&
			                      v.status != (in_a ? 429u : 503u))) {
				r->wrong_match++;
				note(r, "flip: the answer is not its version's");
			}
			break;
		case 3:
			r->only_a += passed_rule(&v, "only-a");
			if (v.nrules != (in_a ? 1u : 0u)) {
				r->wrong_match++;
				note(r, "only-a matched in a version without it, or not in one with it");
			}
			break;
		case 4:
			r->conc_refused += v.action != SLUICE_ACTION_PASS;
			if (sluice_engine_complete(eng, &v, 1000, 1) != 0) {
				r->errors++;
				note(r, "complete returned an error");
			}
			break;
		}
	}
	return NULL;
}

/* A verifier's check: say what failed, set the caller's `bad`. */
#define CHECK(cond, ...)                                       \
	do {                                                   \
		if (!(cond)) {                                 \
			fprintf(stderr, "FAIL: " __VA_ARGS__); \
			fputc('\n', stderr);                   \
			bad = 1;                               \
		}                                              \
	} while (0)

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int run_swap(int threads, double seconds, double per_s)
{
	sluice_clock_manual_init(&clk, 1000000000000ULL);
	sluice_engine_options_t o = { .clock = &clk };
	if (sluice_engine_new(&o, &eng) != 0 ||
	    sluice_engine_load_buffer(eng, "a.yaml", file_a, strlen(file_a), NULL) != 0) {
		fprintf(stderr, "stress_reload: setup failed\n");
		return 1;
	}
	static struct rec recs[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	for (int t = 0; t < threads; t++)
		pthread_create(&tid[t], NULL, decider, &recs[t]);

	/* the reloader: this thread, paced to per_s loads a second */
	uint64_t t0 = mono_ns(), end = t0 + (uint64_t)(seconds * 1e9);
	uint64_t gap = (uint64_t)(1e9 / per_s), loads = 0, failed = 0;
	for (uint64_t next = t0; mono_ns() < end; next += gap) {
		const char *f = loads % 2 == 0 ? file_b : file_a;
		if (sluice_engine_load_buffer(eng, "r.yaml", f, strlen(f), NULL) != 0)
			failed++;
		loads++;
		uint64_t now = mono_ns();
		if (next + gap > now) {
			struct timespec ts = { 0, (long)(next + gap - now) };
			nanosleep(&ts, NULL);
		}
	}
	double took = (double)(mono_ns() - t0) / 1e9;
	atomic_store(&stop, 1);
	for (int t = 0; t < threads; t++)
		pthread_join(tid[t], NULL);

	/* the verifier */
	struct rec all = { 0 };
	int bad = 0;
	for (int t = 0; t < threads; t++) {
		struct rec *r = &recs[t];
		all.calls += r->calls;
		all.verdicts += r->verdicts;
		all.bad_version += r->bad_version;
		all.went_back += r->went_back;
		all.wrong_match += r->wrong_match;
		all.errors += r->errors;
		for (int k = 0; k < NKEYS; k++)
			all.keep[k] += r->keep[k];
		for (int u = 0; u < NUSERS; u++)
			all.flip[u] += r->flip[u];
		all.total += r->total;
		all.only_a += r->only_a;
		all.conc_refused += r->conc_refused;
		if (r->why[0]) {
			fprintf(stderr, "thread %d: %s\n", t, r->why);
			bad = 1;
		}
	}
	CHECK(failed == 0, "%llu of %llu loads failed", (unsigned long long)failed,
	      (unsigned long long)loads);
	CHECK(all.verdicts == all.calls && all.errors == 0, "%llu calls, %llu verdicts, %llu errors",
	      (unsigned long long)all.calls, (unsigned long long)all.verdicts,
	      (unsigned long long)all.errors);
	CHECK(all.bad_version == 0 && all.went_back == 0, "versions: %llu unpublished, %llu back",
	      (unsigned long long)all.bad_version, (unsigned long long)all.went_back);
	CHECK(all.wrong_match == 0, "%llu verdicts matched another version's rules",
	      (unsigned long long)all.wrong_match);
	/* every key of keep was asked far more than 50 times in a run of
	 * this length: exactly its burst, no more (a refill), no fewer (a
	 * lost state would not give fewer, but a lost decision could) */
	for (int k = 0; k < NKEYS; k++)
		CHECK(all.keep[k] == KEEP_BURST, "keep: key %d passed %llu times, burst %d", k,
		      (unsigned long long)all.keep[k], KEEP_BURST);
	CHECK(all.total == TOTAL, "total passed %llu, limit %d", (unsigned long long)all.total, TOTAL);
	for (int u = 0; u < NUSERS; u++)
		CHECK(all.flip[u] <= FLIP_MAX, "flip: user %d passed %llu, limit at most %d", u,
		      (unsigned long long)all.flip[u], FLIP_MAX);
	CHECK(all.only_a <= ONLY_A, "only-a passed %llu, limit %d", (unsigned long long)all.only_a,
	      ONLY_A);
	/* nothing held: each user of conc gets its 4 again */
	for (int u = 0; u < NUSERS; u++) {
		char user[8];
		snprintf(user, sizeof(user), "u%d", u);
		sluice_request_t q = { .method = "GET", .path = "/c/x", .user = user,
			               .user_len = strlen(user) };
		sluice_verdict_t v[CONC + 1];
		int ok = 0;
		for (int j = 0; j <= CONC; j++)
			ok += sluice_engine_decide(eng, &q, &v[j]) == 0 && v[j].action == SLUICE_ACTION_PASS;
		CHECK(ok == CONC, "conc: user %d could take %d of %d after the run (a lost release)",
		      u, ok, CONC);
		for (int j = 0; j <= CONC; j++)
			sluice_engine_complete(eng, &v[j], 0, 1);
	}
	sluice_engine_info_t in;
	sluice_engine_info(eng, &in);
	printf("stress=reload threads=%d seconds=%.2f loads=%llu loads_per_s=%.0f failed=%llu "
	       "decisions=%llu version=%llu result=%s\n",
	       threads, took, (unsigned long long)loads, (double)loads / took,
	       (unsigned long long)failed, (unsigned long long)all.calls,
	       (unsigned long long)in.version, bad ? "FAIL" : "ok");
	sluice_engine_free(eng);
	return bad;
}


/* ---- a rate lowered by reloads while traffic flows (Deliver 6) ---- */

#define LOW_KEYS 2
#define LOW_BURST 4
#define T_FAST 100000ULL /* ns: 10000/s */
#define T_SLOW 125000ULL /* ns: 8000/s */
#define GAP_W 20000ULL   /* ns: the widest decide counted */
#define LOW_RECS (1u << 18)
#define LOW_LOADS (1u << 16)

/* The rule, then LOW_PAD rules no request matches: a file of a gateway's
 * size, whose parse and compile take a while (the old reload.c read the
 * clock before them and stamped the rate change with that reading). */
#define LOW_PAD 40
#define LOW_RULE(rate)                                                          \
	"rules:\n"                                                              \
	"  - id: lower\n"                                                       \
	"    match: { prefix: /x/ }\n"                                          \
	"    dimensions: [ip]\n"                                                \
	"    limit: { algorithm: token_bucket, rate: " rate ", burst: 4 }\n"     \
	"    keys: { capacity: 64 }\n"
static char low_fast[LOW_PAD * 160 + 512], low_slow[LOW_PAD * 160 + 512];

static void low_files(void)
{
	char pad[LOW_PAD * 160];
	size_t o = 0;
	for (int i = 0; i < LOW_PAD; i++)
		o += (size_t)snprintf(pad + o, sizeof(pad) - o,
		                      "  - id: pad%d\n"
		                      "    match: { prefix: /pad%d/ }\n"
		                      "    limit: { algorithm: fixed_window, window: 1h, max_requests: %d }\n",
		                      i, i, 100 + i);
	snprintf(low_fast, sizeof(low_fast), "%s%s", LOW_RULE("10000/s"), pad);
	snprintf(low_slow, sizeof(low_slow), "%s%s", LOW_RULE("8000/s"), pad);
}

struct adm {
	uint64_t r, after;
};

struct lrec {
	struct adm *a[LOW_KEYS];
	size_t n[LOW_KEYS];
	uint64_t calls, dropped_wide, full, errors;
};

static void *low_decider(void *arg)
{
	struct lrec *r = arg;
	unsigned char ip[4] = { 10, 9, 0, 0 };
	uint64_t i = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned k = (unsigned)(i++ % LOW_KEYS);
		ip[3] = (unsigned char)k;
		sluice_request_t q = { .method = "GET", .path = "/x/", .addr = ip, .addr_len = 4 };
		sluice_verdict_t v;
		int rc = sluice_engine_decide(eng, &q, &v);
		uint64_t after = sluice_clock_now(&sluice_clock_monotonic);
		r->calls++;
		if (rc < 0 || v.nrules != 1) {
			r->errors++;
			continue;
		}
		if (v.rules[0].outcome != SLUICE_OUTCOME_PASSED)
			continue;
		if (after - v.now_ns > GAP_W) {
			r->dropped_wide++;
			continue;
		}
		if (r->n[k] == LOW_RECS) {
			r->full++;
			continue;
		}
		r->a[k][r->n[k]++] = (struct adm){ v.now_ns, after };
	}
	return NULL;
}

struct load_rec {
	uint64_t start, end, rate; /* readings around the load; rate in force after */
};

static int adm_cmp(const void *pa, const void *pb)
{
	const struct adm *a = pa, *b = pb;
	return a->r < b->r ? -1 : a->r > b->r;
}

/*
 * The closed-interval check over admissions @a[0..n) sorted by reading:
 * for every i <= j, (j - i + 1) <= b + (r_j - r_i + W) / T, in integers:
 * g(k) = k T - r_k, and g(j) - min_{i <= j} g(i) <= (b - 1) T + W.
 * Return: the largest excess over the bound, in permits (<= 0: held).
 */
static double interval_excess(const struct adm *a, size_t n, uint64_t T, uint64_t b)
{
	__extension__ typedef __int128 i128;
	if (n == 0)
		return -(double)b;
	i128 ming = 0 - (i128)a[0].r, worst = -((i128)1 << 100);
	for (size_t k = 0; k < n; k++) {
		i128 g = (i128)k * (i128)T - (i128)a[k].r;
		if (g < ming)
			ming = g;
		i128 e = g - ming - ((i128)(b - 1) * (i128)T + (i128)GAP_W);
		if (e > worst)
			worst = e;
	}
	return (double)worst / (double)T;
}

static int run_lower(int threads, double seconds, double per_s)
{
	low_files();
	sluice_engine_options_t o = { .clock = &sluice_clock_monotonic };
	if (sluice_engine_new(&o, &eng) != 0 ||
	    sluice_engine_load_buffer(eng, "fast.yaml", low_fast, strlen(low_fast), NULL) != 0) {
		fprintf(stderr, "stress_reload lower: setup failed\n");
		return 1;
	}
	static struct lrec recs[MAX_THREADS];
	for (int t = 0; t < threads; t++)
		for (int k = 0; k < LOW_KEYS; k++) {
			recs[t].a[k] = malloc(LOW_RECS * sizeof(struct adm));
			if (!recs[t].a[k]) {
				fprintf(stderr, "stress_reload lower: out of memory\n");
				return 1;
			}
		}
	static struct load_rec loads[LOW_LOADS];
	size_t nloads = 0;
	loads[nloads++] = (struct load_rec){ 0, 0, 10000 };
	atomic_store(&stop, 0);
	pthread_t tid[MAX_THREADS];
	for (int t = 0; t < threads; t++)
		pthread_create(&tid[t], NULL, low_decider, &recs[t]);
	uint64_t t0 = mono_ns(), end = t0 + (uint64_t)(seconds * 1e9);
	/* paced from each load's end, not caught up: the slow set is
	 * then alone in force for a gap after each load that left it */
	uint64_t gap = (uint64_t)(1e9 / per_s), failed = 0, pending = 0;
	while (mono_ns() < end && nloads < LOW_LOADS) {
		const char *f = nloads % 2 == 1 ? low_slow : low_fast;
		struct load_rec *L = &loads[nloads++];
		L->start = sluice_clock_now(&sluice_clock_monotonic);
		if (sluice_engine_load_buffer(eng, "r.yaml", f, strlen(f), NULL) != 0)
			failed++;
		L->end = sluice_clock_now(&sluice_clock_monotonic);
		sluice_engine_rule_info_t ri;
		if (sluice_engine_rule_info(eng, "lower", &ri) != 0)
			failed++;
		L->rate = ri.rate;
		pending += ri.pending != 0;
		struct timespec ts = { (time_t)(gap / 1000000000u), (long)(gap % 1000000000u) };
		nanosleep(&ts, NULL);
	}
	double took = (double)(mono_ns() - t0) / 1e9;
	atomic_store(&stop, 1);
	for (int t = 0; t < threads; t++)
		pthread_join(tid[t], NULL);

	int bad = 0;
	uint64_t calls = 0, wide = 0, full = 0, errors = 0, admitted = 0;
	double worst_fast = -1e9, worst_slow = -1e9;
	size_t slow_runs = 0;
	for (int k = 0; k < LOW_KEYS; k++) {
		size_t n = 0;
		for (int t = 0; t < threads; t++)
			n += recs[t].n[k];
		struct adm *all = malloc((n + 1) * sizeof(*all));
		if (!all) {
			fprintf(stderr, "stress_reload lower: out of memory\n");
			return 1;
		}
		n = 0;
		for (int t = 0; t < threads; t++) {
			memcpy(all + n, recs[t].a[k], recs[t].n[k] * sizeof(*all));
			n += recs[t].n[k];
		}
		admitted += n;
		qsort(all, n, sizeof(*all), adm_cmp);
		double e = interval_excess(all, n, T_FAST, LOW_BURST);
		if (e > worst_fast)
			worst_fast = e;
		/* the slow-only periods: after a load that left the slow rate
		 * in force, before the next load began */
		size_t j = 0;
		for (size_t l = 0; l < nloads; l++) {
			if (loads[l].rate != 8000)
				continue;
			uint64_t from = loads[l].end;
			uint64_t to = l + 1 < nloads ? loads[l + 1].start : UINT64_MAX;
			while (j < n && all[j].r < from)
				j++;
			size_t i0 = j;
			while (j < n && all[j].r + GAP_W <= to)
				j++;
			if (j > i0) {
				slow_runs++;
				e = interval_excess(all + i0, j - i0, T_SLOW, LOW_BURST);
				if (e > worst_slow)
					worst_slow = e;
			}
		}
		free(all);
	}
	for (int t = 0; t < threads; t++) {
		calls += recs[t].calls;
		wide += recs[t].dropped_wide;
		full += recs[t].full;
		errors += recs[t].errors;
		for (int k = 0; k < LOW_KEYS; k++)
			free(recs[t].a[k]);
	}
	CHECK(failed == 0, "lower: %llu of %zu loads failed", (unsigned long long)failed, nloads);
	CHECK(errors == 0, "lower: %llu decisions returned an error or no rule",
	      (unsigned long long)errors);
	CHECK(full == 0, "lower: %llu admissions not recorded (buffer full)",
	      (unsigned long long)full);
	CHECK(worst_fast <= 0, "lower: an interval admitted %.3f permits over b + (t + W)/T_fast",
	      worst_fast);
	CHECK(worst_slow <= 0,
	      "lower: an interval with only the slow rate in force admitted %.3f permits over "
	      "b + (t + W)/T_slow",
	      worst_slow);
	CHECK(admitted > 0 && slow_runs > 0, "lower: nothing to check (%llu admissions, %zu slow runs)",
	      (unsigned long long)admitted, slow_runs);
	printf("stress=reload-lower threads=%d seconds=%.2f loads=%zu pending=%llu decisions=%llu "
	       "admitted=%llu wide=%llu slow_runs=%zu worst_fast=%.3f worst_slow=%.3f result=%s\n",
	       threads, took, nloads - 1, (unsigned long long)pending, (unsigned long long)calls,
	       (unsigned long long)admitted, (unsigned long long)wide, slow_runs, worst_fast,
	       worst_slow, bad ? "FAIL" : "ok");
	sluice_engine_free(eng);
	eng = NULL;
	return bad;
}

int main(int argc, char **argv)
{
	int threads = 2;
	double seconds = 2, per_s = 1000;
	char which[16] = "all";
	for (int i = 1; i < argc; i++) {
		if (sscanf(argv[i], "--threads=%d", &threads) == 1 ||
		    sscanf(argv[i], "--seconds=%lf", &seconds) == 1 ||
		    sscanf(argv[i], "--reloads-per-s=%lf", &per_s) == 1 ||
		    sscanf(argv[i], "--case=%15s", which) == 1)
			continue;
		fprintf(stderr, "usage: stress_reload [--threads=N] [--seconds=S] "
		                "[--reloads-per-s=R] [--case=all|swap|lower]\n");
		return 2;
	}
	int swap = strcmp(which, "all") == 0 || strcmp(which, "swap") == 0;
	int lower = strcmp(which, "all") == 0 || strcmp(which, "lower") == 0;
	if (threads < 1 || threads > MAX_THREADS || seconds <= 0 || per_s <= 0 || !(swap || lower)) {
		fprintf(stderr, "stress_reload: threads 1..%d, seconds and reloads-per-s > 0, "
		                "case all, swap or lower\n",
		        MAX_THREADS);
		return 2;
	}
	int bad = 0;
	if (swap)
		bad |= run_swap(threads, seconds, per_s);
	if (lower)
		bad |= run_lower(threads, seconds, per_s);
	return bad;
}
