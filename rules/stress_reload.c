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
 * Use-after-free and races are the sanitizers' to find: this program runs
 * in the ASan and TSan builds (suite stress).  Exit 0 when every check
 * held, 1 otherwise.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/error.h"
#include "sluice/rules.h"

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

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int threads = 2;
	double seconds = 2, per_s = 1000;
	for (int i = 1; i < argc; i++) {
		if (sscanf(argv[i], "--threads=%d", &threads) == 1 ||
		    sscanf(argv[i], "--seconds=%lf", &seconds) == 1 ||
		    sscanf(argv[i], "--reloads-per-s=%lf", &per_s) == 1)
			continue;
		fprintf(stderr, "usage: stress_reload [--threads=N] [--seconds=S] "
		                "[--reloads-per-s=R]\n");
		return 2;
	}
	if (threads < 1 || threads > MAX_THREADS || seconds <= 0 || per_s <= 0) {
		fprintf(stderr, "stress_reload: threads 1..%d, seconds and reloads-per-s > 0\n",
		        MAX_THREADS);
		return 2;
	}
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
#define CHECK(cond, ...)                                       \
	do {                                                   \
		if (!(cond)) {                                 \
			fprintf(stderr, "FAIL: " __VA_ARGS__); \
			fputc('\n', stderr);                   \
			bad = 1;                               \
		}                                              \
	} while (0)
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
			ok += sluice_engine_decide(eng, &q, &v[j]) == SLUICE_ACTION_PASS;
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
