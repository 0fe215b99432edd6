/*
 * stress_keyed_live.c - a keyed table's parameters changed thousands of
 * times on the real clock while threads decide on one hot key (issue 22,
 * finding 2): the setter reads the clock, then publishes while the
 * deciders go on, and half of the changes are stamped 2 us - 1 ms behind
 * the clock on purpose (set_*_at), as a setter preempted between its
 * reading and its publication would be.
 *
 *   stress_keyed_live [--algo=gcra|leaky] [--threads=T] [--changes=N] [--seconds=S]
 *
 * The changes cycle the rate between 1/5us and 1/10us and the burst (GCRA
 * b, LEAKY D + 1) between 4 and 8, with set_rate / set_burst (a change
 * refused with SLUICE_EBUSY, too soon after the one before, is retried).
 * Every admission is recorded with the time it was decided at (d.now_ns)
 * and the verifier checks keyed.h's bound over the parameter sets in
 * force, max(b) + t / min(T), on every closed interval [t_i, t_j] of
 * admission times (worst_excess_ns(), as stress_keyed.c).  One line:
 *
 *   stress algo=keyed-gcra-live threads=... changes=... decisions=...
 *   admitted=... worst=... bound=8 verdict=ok|VIOLATION
 *
 * Exit 0 when the bound held and N changes were made, 1 on a violation,
 * 2 on a setup error, 77 (a skip) when fewer than N changes fit in S seconds (a
 * loaded machine: the bound was still checked).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#include "stress_keyed_common.h"

#define SEC 1000000000ULL
#define US 1000ULL
#define T_MIN (5 * US)
#define B_MAX 8ULL
#define RECORD_CAP (1u << 22)

static struct {
	const char *algo;
	int threads;
	uint64_t changes;
	double seconds;
} opt = { "gcra", 2, 10000, 10.0 };

static _Atomic int stop;

struct worker {
	pthread_t tid;
	sluice_keyed_t *k;
	struct record *rec;
	size_t nrec;
	uint64_t decisions;
	int overflow, bad;
};

static void *decider(void *arg)
{
	struct worker *me = arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		sluice_decision_t d;
		int rc = sluice_keyed_acquire(me->k, "hot", 3, 1, &d);
		me->decisions++;
		if (rc != 0 && rc != 1) {
			fprintf(stderr, "stress_keyed_live: acquire: %s\n", sluice_err_name(rc));
			me->bad = 1;
			break;
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

static const char *arg_value(const char *arg, const char *key)
{
	size_t k = strlen(key);
	return strncmp(arg, key, k) == 0 && arg[k] == '=' ? arg + k + 1 : NULL;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *v;
		if ((v = arg_value(argv[i], "--algo")))
			opt.algo = v;
		else if ((v = arg_value(argv[i], "--threads")))
			opt.threads = atoi(v);
		else if ((v = arg_value(argv[i], "--changes")))
			opt.changes = strtoull(v, NULL, 10);
		else if ((v = arg_value(argv[i], "--seconds")))
			opt.seconds = atof(v);
		else {
			fprintf(stderr, "usage: see the comment at the top of stress_keyed_live.c\n");
			return 2;
		}
	}
	int leaky = strcmp(opt.algo, "leaky") == 0;
	if ((!leaky && strcmp(opt.algo, "gcra") != 0) || opt.threads < 1 || opt.threads > 64 ||
	    !(opt.seconds > 0)) {
		fprintf(stderr, "stress_keyed_live: need --algo=gcra|leaky, 1..64 threads, seconds > 0\n");
		return 2;
	}
	sluice_keyed_config_t c = { .algo = leaky ? SLUICE_ALGO_LEAKY : SLUICE_ALGO_GCRA,
		                    .policy = SLUICE_KEYED_REJECT, .capacity = 64,
		                    .rate = SEC / T_MIN, .period_ns = SEC };
	if (leaky)
		c.depth = B_MAX - 1;
	else
		c.burst = B_MAX;
	sluice_keyed_t k;
	int rc = sluice_keyed_new(&k, &c, &sluice_clock_monotonic);
	if (rc != 0) {
		fprintf(stderr, "stress_keyed_live: new: %s\n", sluice_err_name(rc));
		return 2;
	}
	struct worker *w = calloc((size_t)opt.threads, sizeof(*w));
	if (!w)
		return 2;
	for (int i = 0; i < opt.threads; i++) {
		w[i].k = &k;
		w[i].rec = malloc(sizeof(struct record) * RECORD_CAP);
		if (!w[i].rec || pthread_create(&w[i].tid, NULL, decider, &w[i]) != 0)
			return 2;
	}
	/* The setter: this thread.  Bounded by the count and the time. */
	uint64_t deadline = sluice_clock_monotonic_ns() + (uint64_t)(opt.seconds * 1e9);
	uint64_t done = 0, tries = 0, x = 0x9E3779B97F4A7C15ULL;
	while (done < opt.changes && sluice_clock_monotonic_ns() < deadline) {
		unsigned which = (unsigned)(done % 4);
		uint64_t r = xorshift(&x);
		/* half the changes stamped 2 us .. 1 ms behind the clock */
		int lag = r & 1;
		uint64_t now = sluice_clock_monotonic_ns();
		uint64_t behind = 2 * US + (r >> 8) % (1000 * US - 2 * US + 1);
		uint64_t at = lag && now > behind ? now - behind : now;
		uint64_t burst = which == 1 ? B_MAX : 4;
		if (leaky)
			burst -= 1; /* LEAKY's depth D: D + 1 is the bucket */
		switch (which) {
		case 0:
			rc = lag ? sluice_keyed_set_rate_at(&k, SEC / (10 * US), SEC, at)
			         : sluice_keyed_set_rate(&k, SEC / (10 * US), SEC);
			break;
		case 2:
			rc = lag ? sluice_keyed_set_rate_at(&k, SEC / T_MIN, SEC, at)
			         : sluice_keyed_set_rate(&k, SEC / T_MIN, SEC);
			break;
		default:
			rc = lag ? sluice_keyed_set_burst_at(&k, burst, at)
			         : sluice_keyed_set_burst(&k, burst);
			break;
		}
		tries++;
		if (rc == 0)
			done++;
		else if (rc == SLUICE_EBUSY)
			sched_yield(); /* too soon after the last change */
		else {
			fprintf(stderr, "stress_keyed_live: set: %s\n", sluice_err_name(rc));
			return 2;
		}
	}
	atomic_store_explicit(&stop, 1, memory_order_relaxed);
	size_t total = 0;
	uint64_t decisions = 0;
	int bad = 0;
	for (int i = 0; i < opt.threads; i++) {
		pthread_join(w[i].tid, NULL);
		total += w[i].nrec;
		decisions += w[i].decisions;
		bad |= w[i].bad;
		if (w[i].overflow)
			fprintf(stderr, "stress_keyed_live: thread %d filled its record buffer\n", i);
	}
	struct record *all = malloc(sizeof(*all) * (total + 1));
	if (!all || bad)
		return 2;
	size_t m = 0;
	for (int i = 0; i < opt.threads; i++) {
		memcpy(all + m, w[i].rec, w[i].nrec * sizeof(*all));
		m += w[i].nrec;
		free(w[i].rec);
	}
	/* max over [t_i, t_j] of (admitted T_MIN - (t_j - t_i)), in ns */
	s128 worst = worst_excess_ns(all, total, T_MIN);
	int ok = worst <= (s128)B_MAX * (s128)T_MIN;
	printf("stress algo=keyed-%s-live threads=%d changes=%llu tries=%llu decisions=%llu "
	       "admitted=%zu worst=%.3f bound=%llu verdict=%s\n",
	       opt.algo, opt.threads, (unsigned long long)done, (unsigned long long)tries,
	       (unsigned long long)decisions, total, (double)worst / (double)T_MIN,
	       (unsigned long long)B_MAX, ok ? "ok" : "VIOLATION");
	free(all);
	free(w);
	sluice_keyed_free(&k);
	if (!ok)
		return 1;
	return done < opt.changes ? 77 : 0;
}
