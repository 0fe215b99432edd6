/* SPDX-License-Identifier: MIT */
/*
 * stress_keyed - keyed tables under real clocks, threads and processes;
 * every admission recorded and checked against keyed.h's GUARANTEE.
 *
 *   stress_keyed --mode=threads [--threads=T] [--seconds=S] [--clock=cached|monotonic]
 *       T threads decide on one hot key and on 1,000 warm keys, and create
 *       a stream of cold keys through a table too small for them (so slots
 *       are reclaimed all the time).  Every admission of the hot and warm
 *       keys is recorded (key, decision time, n); the verifier checks each
 *       key's ledger: admissions in [x, x + t] <= b + t/T for every pair of
 *       admissions.
 *
 *   stress_keyed --mode=flood [--threads=T] [--keys=K] [--capacity=C] [--policy=...]
 *       K distinct keys (default 10,000,000), each sending once, through a
 *       table of C slots (default 100,000) while one abusive key sends at
 *       100 times its rate.  Checks the abuser's ledger against its bound,
 *       that it was never recreated (a reset), and reports VmRSS/VmHWM from
 *       /proc/self/status before and after: memory must stay flat.
 *
 *   stress_keyed --mode=procs [--workers=W] [--seconds=S]
 *       W forked workers share one MAP_SHARED table; each records its
 *       admissions in its own region of the mapping.  Halfway through, the
 *       parent kills one worker with SIGKILL (wherever it is: a decision, a
 *       claim of a cold key, a reclaim).  The others go on; the parent
 *       checks every hot key's guarantee over all workers' records (the
 *       killed worker's included), that the survivors kept deciding after
 *       the kill, and that the table still creates keys afterwards.
 *
 *   stress_keyed --mode=live [--algo=gcra|leaky] [--threads=T] [--changes=N] [--seconds=S]
 *       T threads decide on one hot key of a table whose parameters this
 *       thread changes N times (default 10,000) on the real clock (issue
 *       22, finding 2): the rate between 1/5us and 1/10us and the bucket
 *       (GCRA b, LEAKY D + 1) between 4 and 8, half the changes with the
 *       plain setters (the clock read on entry, published while deciders
 *       go on), half with set_*_at stamped 2 us - 1 ms behind the clock (a
 *       setter preempted between its reading and its publication); a
 *       change refused with SLUICE_EBUSY (too soon after the last) is
 *       retried.  The verifier checks the hot key's ledger against keyed.h's
 *       bounds on every closed interval of admission times (d.now_ns):
 *       max(b) + t/min(T) over the sets in force, and the tighter b + the
 *       time of each rate over its T, each rate given every instant it
 *       may have been in force (live_time_term()).  Exit 77 (a skip) when fewer
 *       than N changes fit in S seconds (a loaded machine), after checking.
 *
 * Output: one line per run, then exit 1 on a violation:
 *   stress algo=keyed-gcra mode=... threads=... decisions=... admitted=...
 *          worst=... bound=... verdict=ok|VIOLATION
 * where worst is the largest "burst" any key used, max over pairs of
 * admissions of count(i..j) - (t_j - t_i)/T, and bound is b.
 */
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice/sluice.h"

#include "stress_keyed_common.h"

#define SEC 1000000000ULL
#define WARM 1000u

/* Sanitizers keep their own, growing, metadata per address touched: the
 * resident-memory check reports but does not judge under them. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define RSS_JUDGED 0
#else
#define RSS_JUDGED 1
#endif
#define BURST 10ULL
/* Per key: 1,000 per second for threads and processes (many admissions to
 * check), 10 per second for the flood (so flood keys stay non-fresh for
 * 100 ms and the table is under pressure). */
static uint64_t RATE = 1000;
#define INTERVAL (SEC / RATE)

static struct {
	const char *mode, *clock, *policy, *algo;
	int threads, workers, kills;
	double seconds;
	uint64_t keys, capacity, changes;
} opt = { "threads", "cached", "evict", "gcra", 2, 3, 3, 1.0, 10000000, 100000, 10000 };

static const char *arg_value(const char *arg, const char *key)
{
	size_t k = strlen(key);
	return strncmp(arg, key, k) == 0 && arg[k] == '=' ? arg + k + 1 : NULL;
}

/* worst burst in permits (rounded down) and the verdict */
static uint64_t worst_burst(struct record *r, size_t n, int *ok)
{
	s128 w = worst_excess_ns(r, n, INTERVAL);
	*ok = w <= (s128)BURST * (s128)INTERVAL;
	return (uint64_t)(w / (s128)INTERVAL);
}

static sluice_keyed_policy_t parse_policy(void)
{
	return strcmp(opt.policy, "reject") == 0  ? SLUICE_KEYED_REJECT
	       : strcmp(opt.policy, "allow") == 0 ? SLUICE_KEYED_ALLOW
	                                          : SLUICE_KEYED_EVICT;
}

static sluice_keyed_config_t table_config(uint64_t capacity, sluice_keyed_policy_t policy)
{
	return (sluice_keyed_config_t){ .algo = SLUICE_ALGO_GCRA, .policy = policy,
		                        .capacity = capacity, .rate = RATE, .period_ns = SEC,
		                        .burst = BURST };
}

static int acceptable(int rc)
{
	return rc == 0 || rc == 1 || rc == SLUICE_EKEYFULL;
}

/* ---- threads ------------------------------------------------------------------ */

#define RECORD_CAP (1u << 21)

struct worker {
	pthread_t tid;
	sluice_keyed_t *k;
	struct record *rec;
	size_t nrec;
	uint64_t decisions, id;
	int overflow;
};

static uint64_t deadline_ns;

static void *thread_main(void *arg)
{
	struct worker *me = arg;
	uint64_t x = (me->id + 1) * 0x9E3779B97F4A7C15ULL, cold = 0;
	for (;;) {
		if ((me->decisions & 255) == 0 && sluice_clock_monotonic_ns() >= deadline_ns)
			break;
		uint64_t r = xorshift(&x);
		uint32_t key;
		char name[32];
		size_t len;
		if (r % 4 == 0) { /* a cold key: created, used once, reclaimed */
			len = (size_t)snprintf(name, sizeof(name), "cold-%llu-%llu",
			                       (unsigned long long)me->id, (unsigned long long)cold++);
			key = UINT32_MAX;
		} else {
			key = r % 8 == 1 ? 0 : 1 + (uint32_t)((r >> 8) % WARM);
			len = (size_t)snprintf(name, sizeof(name), "key-%u", key);
		}
		uint64_t n = 1 + (r >> 40) % 2;
		sluice_decision_t d;
		int rc = sluice_keyed_acquire(me->k, name, len, n, &d);
		me->decisions++;
		if (!acceptable(rc)) {
			fprintf(stderr, "stress_keyed: acquire: %s\n", sluice_err_name(rc));
			exit(2);
		}
		if (rc == 1 && key != UINT32_MAX) {
			if (me->nrec == RECORD_CAP) {
				me->overflow = 1;
				break;
			}
			me->rec[me->nrec++] = (struct record){ d.now_ns, key, (uint32_t)n };
		}
	}
	return NULL;
}

/* opt.threads workers running @fn on @k, each with a record buffer of
 * RECORD_CAP; NULL when one could not start. */
static struct worker *spawn(sluice_keyed_t *k, void *(*fn)(void *))
{
	struct worker *w = calloc((size_t)opt.threads, sizeof(*w));
	if (!w)
		return NULL;
	for (int i = 0; i < opt.threads; i++) {
		w[i].k = k;
		w[i].id = (uint64_t)i;
		w[i].rec = malloc(sizeof(struct record) * RECORD_CAP);
		if (!w[i].rec || pthread_create(&w[i].tid, NULL, fn, &w[i]) != 0)
			return NULL;
	}
	return w;
}

/* Join spawn()'s workers and merge their records (freeing their buffers):
 * *total records, *decisions made, *admitted permits; NULL on no memory. */
static struct record *join(struct worker *w, size_t *total, uint64_t *decisions,
                           uint64_t *admitted)
{
	*total = 0;
	*decisions = 0;
	*admitted = 0;
	for (int i = 0; i < opt.threads; i++) {
		pthread_join(w[i].tid, NULL);
		*total += w[i].nrec;
		*decisions += w[i].decisions;
		if (w[i].overflow)
			fprintf(stderr, "stress_keyed: thread %d filled its record buffer\n", i);
	}
	struct record *all = malloc(sizeof(*all) * (*total + 1));
	if (!all)
		return NULL;
	size_t m = 0;
	for (int i = 0; i < opt.threads; i++) {
		for (size_t j = 0; j < w[i].nrec; j++)
			*admitted += w[i].rec[j].n;
		memcpy(all + m, w[i].rec, w[i].nrec * sizeof(*all));
		m += w[i].nrec;
		free(w[i].rec);
	}
	return all;
}

static int run_threads(void)
{
	const sluice_clock_t *clock =
		strcmp(opt.clock, "monotonic") == 0 ? &sluice_clock_monotonic : &sluice_clock_cached;
	if (clock == &sluice_clock_cached && sluice_clock_cached_start(0) != 0)
		return 2;
	/* 4096 slots: the 1,001 hot and warm keys fit (with room for the
	 * uneven groups), the cold stream forces reclaims */
	sluice_keyed_config_t c = table_config(4096, SLUICE_KEYED_REJECT);
	sluice_keyed_t k;
	int rc = sluice_keyed_init(&k, &c, clock);
	if (rc != 0) {
		fprintf(stderr, "stress_keyed: new: %s\n", sluice_err_name(rc));
		return 2;
	}
	deadline_ns = sluice_clock_monotonic_ns() + (uint64_t)(opt.seconds * 1e9);
	struct worker *w = spawn(&k, thread_main);
	if (!w)
		return 2;
	size_t total;
	uint64_t decisions, admitted;
	struct record *all = join(w, &total, &decisions, &admitted);
	if (clock == &sluice_clock_cached)
		sluice_clock_cached_stop();
	if (!all)
		return 2;
	int ok;
	uint64_t worst = worst_burst(all, total, &ok);
	sluice_keyed_stats_t s;
	sluice_keyed_stats(&k, &s);
	printf("stress algo=keyed-gcra mode=threads clock=%s threads=%d decisions=%llu "
	       "admitted=%llu creations=%llu reclaims=%llu rejections=%llu worst=%llu bound=%llu "
	       "verdict=%s\n",
	       opt.clock, opt.threads, (unsigned long long)decisions, (unsigned long long)admitted,
	       (unsigned long long)s.creations, (unsigned long long)s.reclaims,
	       (unsigned long long)s.rejections, (unsigned long long)worst,
	       (unsigned long long)BURST, ok ? "ok" : "VIOLATION");
	free(all);
	free(w);
	sluice_keyed_destroy(&k);
	return ok ? 0 : 1;
}

/* ---- live ------------------------------------------------------------------------- */

#define LIVE_T_MIN 5000ULL /* 1/5us; the other rate is 1/10us */
#define LIVE_B_MAX 8ULL    /* the other bucket is 4 */

static _Atomic int live_stop;

/* The spans of the table's time in which the fast rate (1/LIVE_T_MIN)
 * may be in force: from the stamp asked for a change to it (the change
 * takes effect no earlier) to the clock after the change back to the slow
 * rate returned (it took effect no later); era 0 is fast from 0. */
#define LIVE_SPANS 8192u
struct span {
	uint64_t lo, hi;
};
static struct span fast[LIVE_SPANS];
static size_t nfast;

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	return (x->lo > y->lo) - (x->lo < y->lo);
}

/* keyed.h's tighter bound's time term: G(t) = t + (the fast time before
 * t), so that the sets in force over [a, c] refill at most (G(c) - G(a))
 * / (2 LIVE_T_MIN) permits (fast time at 1/LIVE_T_MIN, the rest at half
 * that).  The spans are merged first (a lagged stamp can start one before
 * the last ended).  Rewrites the times of @r, sorted by time. */
static void live_time_term(struct record *r, size_t n)
{
	qsort(fast, nfast, sizeof(fast[0]), cmp_span);
	size_t m = 0;
	for (size_t i = 0; i < nfast; i++) {
		if (m > 0 && fast[i].lo <= fast[m - 1].hi) {
			if (fast[i].hi > fast[m - 1].hi)
				fast[m - 1].hi = fast[i].hi;
		} else {
			fast[m++] = fast[i];
		}
	}
	uint64_t before = 0; /* fast time of the spans wholly before t */
	size_t s = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t t = r[i].t;
		for (; s < m && fast[s].hi <= t; s++)
			before += fast[s].hi - fast[s].lo;
		uint64_t part = s < m && fast[s].lo < t ? t - fast[s].lo : 0;
		r[i].t = t + before + part;
	}
}

static void *live_main(void *arg)
{
	struct worker *me = arg;
	while (!atomic_load_explicit(&live_stop, memory_order_relaxed)) {
		sluice_decision_t d;
		int rc = sluice_keyed_acquire(me->k, "hot", 3, 1, &d);
		/* give the setter the CPU now and then (every 256): with a decider per
		 * CPU it would otherwise change once per time slice */
		if ((++me->decisions & 255) == 0)
			sched_yield();
		if (rc != 0 && rc != 1) {
			fprintf(stderr, "stress_keyed: acquire: %s\n", sluice_err_name(rc));
			exit(2);
		}
		if (rc == 1) {
			if (me->nrec == RECORD_CAP) {
				me->overflow = 1;
				break;
			}
			me->rec[me->nrec++] = (struct record){ d.now_ns, 0, 1 };
		}
	}
	return NULL;
}

/* Change @k's parameters opt.changes times (mode=live, the top of the
 * file says how); return the number made before the deadline. */
static uint64_t live_changes(sluice_keyed_t *k, int leaky, uint64_t *tries)
{
	uint64_t deadline = sluice_clock_monotonic_ns() + (uint64_t)(opt.seconds * 1e9);
	uint64_t done = 0, x = 0x9E3779B97F4A7C15ULL;
	*tries = 0;
	nfast = 1; /* era 0: fast from 0, until the first change to slow */
	fast[0] = (struct span){ 0, UINT64_MAX };
	while (done < opt.changes && sluice_clock_monotonic_ns() < deadline) {
		unsigned which = (unsigned)(done % 4);
		uint64_t r = xorshift(&x), now = sluice_clock_monotonic_ns();
		int lag = r & 1; /* half stamped 2 us .. 1 ms behind the clock */
		uint64_t behind = 2000 + (r >> 8) % (1000000 - 2000 + 1);
		uint64_t at = lag && now > behind ? now - behind : now;
		uint64_t rate = which == 0 ? SEC / (2 * LIVE_T_MIN) : SEC / LIVE_T_MIN;
		uint64_t bucket = which == 1 ? LIVE_B_MAX : LIVE_B_MAX / 2;
		uint64_t burst = leaky ? bucket - 1 : bucket; /* LEAKY's depth: D + 1 */
		int rc;
		if (which % 2 == 0)
			rc = lag ? sluice_keyed_set_rate_at(k, rate, SEC, at)
			         : sluice_keyed_set_rate(k, rate, SEC);
		else
			rc = lag ? sluice_keyed_set_burst_at(k, burst, at)
			         : sluice_keyed_set_burst(k, burst);
		++*tries;
		if (rc == 0 && which == 0) /* to slow: the fast span ends by now */
			fast[nfast - 1].hi = sluice_clock_monotonic_ns();
		if (rc == 0 && which == 2) { /* to fast, from its stamp on */
			if (nfast < LIVE_SPANS)
				fast[nfast++] = (struct span){ at, UINT64_MAX };
			else
				fast[nfast - 1].hi = UINT64_MAX; /* out of spans: fast from here */
		}
		if (rc == 0)
			done++;
		else if (rc == SLUICE_EBUSY)
			sched_yield(); /* too soon after the last change */
		else {
			fprintf(stderr, "stress_keyed: set: %s\n", sluice_err_name(rc));
			exit(2);
		}
	}
	return done;
}

static int run_live(void)
{
	int leaky = strcmp(opt.algo, "leaky") == 0;
	sluice_keyed_config_t c = { .algo = leaky ? SLUICE_ALGO_LEAKY : SLUICE_ALGO_GCRA,
		                    .policy = SLUICE_KEYED_REJECT, .capacity = 64,
		                    .rate = SEC / LIVE_T_MIN, .period_ns = SEC };
	if (leaky)
		c.depth = LIVE_B_MAX - 1;
	else
		c.burst = LIVE_B_MAX;
	sluice_keyed_t k;
	int rc = sluice_keyed_init(&k, &c, &sluice_clock_monotonic);
	if (rc != 0) {
		fprintf(stderr, "stress_keyed: new: %s\n", sluice_err_name(rc));
		return 2;
	}
	struct worker *w = spawn(&k, live_main);
	if (!w)
		return 2;
	uint64_t tries, done = live_changes(&k, leaky, &tries);
	atomic_store_explicit(&live_stop, 1, memory_order_relaxed);
	size_t total;
	uint64_t decisions, admitted;
	struct record *all = join(w, &total, &decisions, &admitted);
	if (!all)
		return 2;
	/* max over [t_i, t_j] of (admitted T_MIN - (t_j - t_i)), in ns: the
	 * bound over the sets in force, max(b) + t/min(T) (sorts @all) */
	s128 worst = worst_excess_ns(all, total, LIVE_T_MIN);
	int ok = worst <= (s128)LIVE_B_MAX * (s128)LIVE_T_MIN;
	/* keyed.h's tighter bound, with b(x) at most LIVE_B_MAX and each set
	 * given every instant it may have been in force: the same check on
	 * G(t) with the slow interval */
	live_time_term(all, total);
	s128 tight = worst_excess_ns(all, total, 2 * LIVE_T_MIN);
	int tight_ok = tight <= (s128)LIVE_B_MAX * (s128)(2 * LIVE_T_MIN);
	printf("stress algo=keyed-%s mode=live threads=%d changes=%llu tries=%llu decisions=%llu "
	       "admitted=%llu worst=%.3f tight=%.3f bound=%llu verdict=%s\n",
	       opt.algo, opt.threads, (unsigned long long)done, (unsigned long long)tries,
	       (unsigned long long)decisions, (unsigned long long)admitted,
	       (double)worst / (double)LIVE_T_MIN, (double)tight / (double)(2 * LIVE_T_MIN),
	       (unsigned long long)LIVE_B_MAX, ok && tight_ok ? "ok" : "VIOLATION");
	ok = ok && tight_ok;
	free(all);
	free(w);
	sluice_keyed_destroy(&k);
	if (!ok)
		return 1;
	return done < opt.changes ? 77 : 0;
}

/* ---- flood ------------------------------------------------------------------------ */

static _Atomic uint64_t flood_next; /* next flood key number */
static uint64_t flood_end;            /* this phase stops here  */

struct flooder {
	pthread_t tid;
	sluice_keyed_t *k;
	struct record *rec;
	size_t nrec, cap;
	uint64_t decisions, abuser_tries, id;
};

static void *flood_main(void *arg)
{
	struct flooder *me = arg;
	/* the abuser tries once every 16 flood keys: far above 100x its rate
	 * (10/s) at any flood speed above 16,000 keys/s (counted by key, not by
	 * time: a descheduled VM would skip tries timed by the clock) */
	for (;;) {
		uint64_t base = atomic_fetch_add_explicit(&flood_next, 256, memory_order_relaxed);
		if (base >= flood_end)
			break;
		uint64_t end = base + 256 < flood_end ? base + 256 : flood_end;
		for (uint64_t f = base; f < end; f++) {
			uint64_t now = sluice_clock_now(me->k->clock);
			if ((f & 15) == 0) {
				sluice_decision_t d;
				int rc = sluice_keyed_acquire_at(me->k, "abuser", 6, 1, now, &d);
				me->abuser_tries++;
				if (!acceptable(rc) || (rc == 1 && d.limit == 0)) {
					fprintf(stderr, "stress_keyed: abuser: %d %s\n", rc,
					        sluice_err_name(rc));
					exit(2);
				}
				if (rc == 1 && me->nrec < me->cap)
					me->rec[me->nrec++] = (struct record){ d.now_ns, 0, 1 };
			}
			unsigned char key[16];
			memcpy(key, &f, 8);
			memcpy(key + 8, "floodkey", 8);
			int rc = sluice_keyed_acquire_at(me->k, key, sizeof(key), 1, now, NULL);
			me->decisions++;
			if (!acceptable(rc)) {
				fprintf(stderr, "stress_keyed: flood: %s\n", sluice_err_name(rc));
				exit(2);
			}
		}
	}
	return NULL;
}

static void read_mem(long *rss_kb, long *hwm_kb)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	*rss_kb = *hwm_kb = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "VmRSS:", 6) == 0)
			*rss_kb = atol(line + 6);
		else if (strncmp(line, "VmHWM:", 6) == 0)
			*hwm_kb = atol(line + 6);
	}
	fclose(f);
}

static void flood_phase(struct flooder *w, uint64_t end)
{
	flood_end = end;
	for (int i = 0; i < opt.threads; i++)
		if (pthread_create(&w[i].tid, NULL, flood_main, &w[i]) != 0)
			exit(2);
	for (int i = 0; i < opt.threads; i++)
		pthread_join(w[i].tid, NULL);
}

static int run_flood(void)
{
	RATE = 10;
	sluice_keyed_config_t c = table_config(opt.capacity, parse_policy());
	sluice_keyed_t k;
	int rc = sluice_keyed_init(&k, &c, &sluice_clock_monotonic);
	if (rc != 0) {
		fprintf(stderr, "stress_keyed: new: %s\n", sluice_err_name(rc));
		return 2;
	}
	struct flooder *w = calloc((size_t)opt.threads, sizeof(*w));
	if (!w)
		return 2;
	for (int i = 0; i < opt.threads; i++) {
		w[i].k = &k;
		w[i].id = (uint64_t)i;
		w[i].cap = 1u << 20;
		w[i].rec = malloc(sizeof(struct record) * w[i].cap);
		if (!w[i].rec)
			return 2;
		memset(w[i].rec, 0xff, sizeof(struct record) * w[i].cap); /* resident now */
	}
	/* warm-up on the first 2% of the keys (threads started once, their
	 * stacks and stdio settled), then measure, then the rest */
	uint64_t t0 = sluice_clock_monotonic_ns();
	flood_phase(w, opt.keys / 50);
	long rss0, hwm0, rss1, hwm1;
	read_mem(&rss0, &hwm0);
	flood_phase(w, opt.keys);
	size_t total = 0;
	uint64_t decisions = 0, tries = 0;
	for (int i = 0; i < opt.threads; i++) {
		total += w[i].nrec;
		decisions += w[i].decisions;
		tries += w[i].abuser_tries;
	}
	double secs = (double)(sluice_clock_monotonic_ns() - t0) / 1e9;
	read_mem(&rss1, &hwm1);
	struct record *all = malloc(sizeof(*all) * (total + 1));
	if (!all)
		return 2;
	size_t m = 0;
	for (int i = 0; i < opt.threads; i++) {
		memcpy(all + m, w[i].rec, w[i].nrec * sizeof(*all));
		m += w[i].nrec;
		free(w[i].rec);
	}
	int bound_ok;
	uint64_t worst = worst_burst(all, total, &bound_ok);
	sluice_keyed_stats_t s;
	sluice_keyed_stats(&k, &s);
	/* a reset of the abuser would show as a burst above b (worst) and a
	 * rate above its own */
	double rate = (double)total / secs;
	int ok = bound_ok && rate <= (double)RATE * 1.05 + (double)BURST / secs;
	long grew = RSS_JUDGED ? rss1 - rss0 : 0;
	printf("stress algo=keyed-gcra mode=flood policy=%s threads=%d keys=%llu capacity=%llu "
	       "decisions=%llu seconds=%.2f abuser_tries=%llu (%.0fx its rate) admitted=%zu "
	       "abuser_rate=%.1f/s "
	       "creations=%llu reclaims=%llu evictions=%llu rejections=%llu untracked=%llu "
	       "occupancy=%llu rss_before_kb=%ld rss_after_kb=%ld hwm_before_kb=%ld "
	       "hwm_after_kb=%ld worst=%llu bound=%llu verdict=%s\n",
	       opt.policy, opt.threads, (unsigned long long)opt.keys,
	       (unsigned long long)s.capacity, (unsigned long long)decisions, secs,
	       (unsigned long long)tries, (double)tries / secs / (double)RATE, total, rate, (unsigned long long)s.creations,
	       (unsigned long long)s.reclaims, (unsigned long long)s.evictions,
	       (unsigned long long)s.rejections, (unsigned long long)s.untracked,
	       (unsigned long long)s.occupancy, rss0, rss1, hwm0, hwm1,
	       (unsigned long long)worst, (unsigned long long)BURST,
	       ok && grew < 1024 ? "ok" : "VIOLATION");
	if (grew >= 1024)
		fprintf(stderr, "stress_keyed: resident memory grew by %ld kB\n", grew);
	free(all);
	free(w);
	sluice_keyed_destroy(&k);
	return ok && grew < 1024 ? 0 : 1;
}

/* ---- processes ------------------------------------------------------------------- */

#define PROC_HOT 16
#define PROC_CAP (1u << 20)

struct region {
	_Atomic uint64_t nrec;      /* records published (release)         */
	_Atomic uint64_t decisions; /* progress, read by the parent        */
	_Atomic int go, stop;
	struct record rec[PROC_CAP];
};

static void worker_proc(void *mem, size_t tsize, struct region *me, int id)
{
	sluice_keyed_t k;
	if (sluice_keyed_attach(mem, tsize, &sluice_clock_monotonic, &k) != 0)
		_exit(3);
	uint64_t x = (uint64_t)(id + 1) * 0x9E3779B97F4A7C15ULL, cold = 0;
	wait_for_go(&me->go);
	while (!atomic_load_explicit(&me->stop, memory_order_relaxed)) {
		uint64_t r = xorshift(&x);
		char name[32];
		size_t len;
		uint32_t key = UINT32_MAX;
		if (r % 2 == 0) { /* cold keys: claims and reclaims all the time */
			len = (size_t)snprintf(name, sizeof(name), "cold-%d-%llu", id,
			                       (unsigned long long)cold++);
		} else {
			key = (uint32_t)((r >> 8) % PROC_HOT);
			len = (size_t)snprintf(name, sizeof(name), "hot-%u", key);
		}
		sluice_decision_t d;
		int rc = sluice_keyed_acquire(&k, name, len, 1, &d);
		if (!acceptable(rc))
			_exit(4);
		if (rc == 1 && key != UINT32_MAX) {
			uint64_t i = atomic_load_explicit(&me->nrec, memory_order_relaxed);
			if (i < PROC_CAP) {
				me->rec[i] = (struct record){ d.now_ns, key, 1 };
				/* Release: the parent reads the record after the
				 * count (an admission killed before this store is
				 * not seen: the check can only miss, never invent). */
				atomic_store_explicit(&me->nrec, i + 1, memory_order_release);
			}
		}
		atomic_fetch_add_explicit(&me->decisions, 1, memory_order_relaxed);
	}
	_exit(0);
}

static int run_procs(void)
{
	/* a small table (512 slots) under a stream of cold keys: most
	 * decisions of the cold half claim or reclaim a slot */
	sluice_keyed_config_t c = table_config(512, SLUICE_KEYED_REJECT);
	size_t tsize = (sluice_keyed_region_bytes(&c) + 4095) / 4096 * 4096;
	size_t rsize = (sizeof(struct region) + 4095) / 4096 * 4096;
	int nreg = opt.workers + opt.kills;
	size_t total = tsize + rsize * (size_t)nreg;
	unsigned char *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
	                          -1, 0);
	if (mem == MAP_FAILED)
		return 2;
	int rc = sluice_keyed_format(mem, tsize, &c);
	if (rc != 0) {
		fprintf(stderr, "stress_keyed: init: %s\n", sluice_err_name(rc));
		return 2;
	}
	pid_t pid[32];
	struct region *reg[32];
	for (int i = 0; i < nreg; i++)
		reg[i] = (struct region *)(mem + tsize + rsize * (size_t)i);
	/* regions 0..workers-1 start now; each kill replaces the victim by
	 * the next region's worker */
	for (int i = 0; i < opt.workers; i++) {
		fflush(NULL);
		pid[i] = fork();
		if (pid[i] < 0)
			return 2;
		if (pid[i] == 0)
			worker_proc(mem, tsize, reg[i], i);
		atomic_store_explicit(&reg[i]->go, 1, memory_order_release);
	}
	useconds_t slice = (useconds_t)(opt.seconds * 1e6 / (opt.kills + 1));
	int killed = 0, victim = 0, survivors_went_on = 1;
	uint64_t at_kill[32] = { 0 }; /* decisions of each survivor at the last kill */
	for (int r = 0; r < opt.kills; r++) {
		usleep(slice);
		kill(pid[victim], SIGKILL); /* wherever it is */
		for (int i = 0; i < opt.workers + r; i++)
			at_kill[i] = atomic_load_explicit(&reg[i]->decisions, memory_order_relaxed);
		int st;
		waitpid(pid[victim], &st, 0);
		killed += WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
		int fresh = opt.workers + r;
		fflush(NULL);
		pid[fresh] = fork();
		if (pid[fresh] < 0)
			return 2;
		if (pid[fresh] == 0)
			worker_proc(mem, tsize, reg[fresh], fresh);
		atomic_store_explicit(&reg[fresh]->go, 1, memory_order_release);
		pid[victim] = -1;
		victim = fresh;
	}
	usleep(slice);
	uint64_t decisions = 0;
	for (int i = 0; i < nreg; i++) {
		if (pid[i] > 0) {
			int st;
			/* it went on after the last kill (no slot held it up) */
			if (atomic_load_explicit(&reg[i]->decisions, memory_order_relaxed) <=
			    at_kill[i])
				survivors_went_on = 0;
			atomic_store_explicit(&reg[i]->stop, 1, memory_order_relaxed);
			waitpid(pid[i], &st, 0);
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fprintf(stderr, "stress_keyed: worker %d failed (%d)\n", i, st);
				survivors_went_on = 0;
			}
		}
		decisions += atomic_load_explicit(&reg[i]->decisions, memory_order_relaxed);
	}
	/* merge every worker's records (acquire: pairs with their release) */
	size_t nrec = 0;
	for (int i = 0; i < nreg; i++)
		nrec += atomic_load_explicit(&reg[i]->nrec, memory_order_acquire);
	struct record *all = malloc(sizeof(*all) * (nrec + 1));
	if (!all)
		return 2;
	size_t m = 0;
	for (int i = 0; i < nreg; i++) {
		uint64_t n = atomic_load_explicit(&reg[i]->nrec, memory_order_acquire);
		memcpy(all + m, reg[i]->rec, n * sizeof(*all));
		m += n;
	}
	int bound_ok;
	uint64_t worst = worst_burst(all, nrec, &bound_ok);
	/* the table after the kills: every slot can be had again (a claim a
	 * killed worker left half-done is finished or stolen after the lease) */
	usleep((SLUICE_KEYED_LEASE_MS + 60) * 1000);
	sluice_keyed_t k;
	int usable = sluice_keyed_attach(mem, tsize, &sluice_clock_monotonic, &k) == 0;
	uint64_t created = 0;
	for (int i = 0; usable && i < 20000; i++) {
		char name[32];
		size_t len = (size_t)snprintf(name, sizeof(name), "after-%d", i);
		created += sluice_keyed_acquire(&k, name, len, 1, NULL) == 1;
	}
	sluice_keyed_stats_t s = { 0 };
	if (usable)
		sluice_keyed_stats(&k, &s);
	int ok = bound_ok && killed == opt.kills && survivors_went_on && created >= 512;
	printf("stress algo=keyed-gcra mode=procs workers=%d kills=%d decisions=%llu admitted=%zu "
	       "steals=%llu created_after=%llu worst=%llu bound=%llu verdict=%s\n",
	       opt.workers, killed, (unsigned long long)decisions, nrec,
	       (unsigned long long)s.steals, (unsigned long long)created,
	       (unsigned long long)worst, (unsigned long long)BURST, ok ? "ok" : "VIOLATION");
	free(all);
	munmap(mem, total);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *v;
		if ((v = arg_value(argv[i], "--mode")))
			opt.mode = v;
		else if ((v = arg_value(argv[i], "--threads")))
			opt.threads = atoi(v);
		else if ((v = arg_value(argv[i], "--workers")))
			opt.workers = atoi(v);
		else if ((v = arg_value(argv[i], "--kills")))
			opt.kills = atoi(v);
		else if ((v = arg_value(argv[i], "--seconds")))
			opt.seconds = atof(v);
		else if ((v = arg_value(argv[i], "--keys")))
			opt.keys = strtoull(v, NULL, 10);
		else if ((v = arg_value(argv[i], "--capacity")))
			opt.capacity = strtoull(v, NULL, 10);
		else if ((v = arg_value(argv[i], "--clock")))
			opt.clock = v;
		else if ((v = arg_value(argv[i], "--policy")))
			opt.policy = v;
		else if ((v = arg_value(argv[i], "--algo")))
			opt.algo = v;
		else if ((v = arg_value(argv[i], "--changes")))
			opt.changes = strtoull(v, NULL, 10);
		else {
			fprintf(stderr, "usage: see the comment at the top of stress_keyed.c\n");
			return 2;
		}
	}
	if (opt.threads < 1 || opt.threads > 256 || opt.workers < 2 || opt.workers > 16 ||
	    opt.kills < 1 || opt.kills > 16 ||
	    !(opt.seconds > 0)) {
		fprintf(stderr, "stress_keyed: need 1..256 threads, 2..16 workers, seconds > 0\n");
		return 2;
	}
	if (strcmp(opt.mode, "flood") == 0)
		return run_flood();
	if (strcmp(opt.mode, "procs") == 0)
		return run_procs();
	if (strcmp(opt.mode, "live") == 0) {
		if (strcmp(opt.algo, "gcra") != 0 && strcmp(opt.algo, "leaky") != 0) {
			fprintf(stderr, "stress_keyed: --algo=gcra|leaky\n");
			return 2;
		}
		return run_live();
	}
	return run_threads();
}
