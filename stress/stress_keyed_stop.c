/* SPDX-License-Identifier: MIT */
/*
 * stress_keyed_stop - forked workers on keyed tables in one MAP_SHARED
 * mapping while the parent stops (SIGSTOP), resumes (SIGCONT) and kills
 * (SIGKILL) them: no call may hang, the per-key guarantee must hold, and the
 * run must end.
 *
 *   stress_keyed_stop [--workers=W] [--seconds=S] [--bound-ms=B] [--claims=C]
 *
 * Two tables share the mapping:
 *   flood  capacity 8 (one group), EVICT, GCRA: every request is a new key,
 *          so every call claims a slot (issue 10 item 5's setup).
 *   hot    capacity 512, REJECT, GCRA 1,000/s burst 10: 16 hot keys whose
 *          every admission is recorded, and a stream of cold keys that are
 *          reclaimed all the time.
 * Each worker loops over both tables (7 of 8 calls on the flood table) and,
 * after every call, writes a heartbeat (CLOCK_MONOTONIC) in its region of
 * the mapping.  The parent, in rounds: stops one worker for long enough that
 * the others claim each flood slot about C times (default 48,000: past 2^15
 * and short of 2^16, the span in which a 16-bit generation compared modulo
 * 2^16 looks older; the duration is computed from the flood rate measured
 * just before), resumes it; every fourth round it kills one instead and
 * forks a replacement.  All the while it watches the heartbeats: a worker
 * that is not stopped and has not finished a call for B ms (default 3,000)
 * is stuck, and the run fails.  At the end every worker must exit within
 * B ms of being told to, and every hot key's admissions (all workers,
 * killed ones included) must respect b + t/T.
 *
 * Output: one line, then exit 1 on a failure:
 *   stress algo=keyed-gcra mode=stop workers=... stops=... kills=... decisions=...
 *          flood=... ebusy=... admitted=... worst=... bound=... longest_call_ms=...
 *          stuck=0|1 ended=0|1 verdict=ok|VIOLATION
 * longest_call_ms (calls during which the worker was not stopped) is
 * reported, not judged (it includes any preemption of a loaded machine);
 * stuck and ended are judged.  On the code
 * before issue 10's fix, a claimer resumed after 2^15 claims of its slot
 * wrote a stale key word; from then on every claim of that slot failed and
 * retried until another process stole it after the 100 ms lease, and the
 * last process left claiming never returned (ended=0).
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice/sluice.h"

#include "test_mono.h"
#include "stress_keyed_common.h"

#define SEC 1000000000ULL
#define MS 1000000ULL
#define RATE 1000ULL
#define INTERVAL (SEC / RATE)
#define BURST 10ULL
#define HOT 16u
#define REGIONS 16
#define REC_CAP (1u << 18)

struct region {
	_Atomic uint64_t beat;      /* CLOCK_MONOTONIC after the last call   */
	_Atomic uint64_t decisions; /* calls finished                        */
	_Atomic uint64_t flood;     /* of which on the flood table           */
	_Atomic uint64_t ebusy;     /* calls that gave up (SLUICE_EBUSY)    */
	_Atomic uint64_t longest;   /* the longest call not stopped, ns      */
	_Atomic uint64_t stopped;   /* bumped by the parent around a stop    */
	_Atomic uint64_t nrec;      /* records published (release)           */
	_Atomic int go, stop;
	struct record rec[REC_CAP];
};

static struct {
	int workers;
	double seconds;
	uint64_t bound_ms, claims;
} opt = { 3, 8.0, 3000, 48000 };

static sluice_keyed_config_t flood_config(void)
{
	/* long keys: most of a claim is writing its key words, where a
	 * claimer stopped across 2^15 claims used to do its damage */
	return (sluice_keyed_config_t){ .algo = SLUICE_ALGO_GCRA, .policy = SLUICE_KEYED_EVICT,
		                        .capacity = 8, .key_max = 240, .rate = RATE,
		                        .period_ns = SEC, .burst = BURST };
}

static sluice_keyed_config_t hot_config(void)
{
	return (sluice_keyed_config_t){ .algo = SLUICE_ALGO_GCRA, .policy = SLUICE_KEYED_REJECT,
		                        .capacity = 512, .rate = RATE, .period_ns = SEC,
		                        .burst = BURST };
}

static int acceptable(int rc)
{
	return rc == 0 || rc == 1 || rc == SLUICE_EKEYFULL || rc == SLUICE_EBUSY;
}

static void worker(unsigned char *fmem, size_t fsize, unsigned char *hmem, size_t hsize,
                   struct region *me, int id)
{
	sluice_keyed_t f, h;
	if (sluice_keyed_attach(fmem, fsize, &sluice_clock_monotonic, &f) != 0 ||
	    sluice_keyed_attach(hmem, hsize, &sluice_clock_monotonic, &h) != 0)
		_exit(3);
	uint64_t x = (uint64_t)(id + 1) * 0x9E3779B97F4A7C15ULL, n = 0;
	wait_for_go(&me->go);
	while (!atomic_load_explicit(&me->stop, memory_order_relaxed)) {
		uint64_t r = xorshift(&x);
		char name[256];
		size_t len;
		int rc;
		uint32_t key = UINT32_MAX;
		sluice_decision_t d;
		uint64_t t0 = mono_ns();
		uint64_t s0 = atomic_load_explicit(&me->stopped, memory_order_relaxed);
		if (r % 8 != 0) { /* a new key on the flood table: a claim */
			len = (size_t)snprintf(name, sizeof(name), "flood-%d-%llu-%0200d", id,
			                       (unsigned long long)n++, 0);
			rc = sluice_keyed_acquire(&f, name, len, 1, &d);
			atomic_fetch_add_explicit(&me->flood, 1, memory_order_relaxed);
		} else if ((r >> 8) % 2 == 0) { /* a cold key: reclaims */
			len = (size_t)snprintf(name, sizeof(name), "cold-%d-%llu", id,
			                       (unsigned long long)n++);
			rc = sluice_keyed_acquire(&h, name, len, 1, &d);
		} else {
			key = (uint32_t)((r >> 16) % HOT);
			len = (size_t)snprintf(name, sizeof(name), "hot-%u", key);
			rc = sluice_keyed_acquire(&h, name, len, 1, &d);
		}
		if (!acceptable(rc))
			_exit(4);
		if (rc == SLUICE_EBUSY)
			atomic_fetch_add_explicit(&me->ebusy, 1, memory_order_relaxed);
		if (rc == 1 && key != UINT32_MAX) {
			uint64_t i = atomic_load_explicit(&me->nrec, memory_order_relaxed);
			if (i < REC_CAP) {
				me->rec[i] = (struct record){ d.now_ns, key, 1 };
				/* Release: the parent reads the record after the
				 * count (a worker killed before this store loses
				 * the record: the check can miss, never invent). */
				atomic_store_explicit(&me->nrec, i + 1, memory_order_release);
			}
		}
		/* Relaxed: the parent only compares times. */
		uint64_t t1 = mono_ns();
		atomic_store_explicit(&me->beat, t1, memory_order_relaxed);
		if (atomic_load_explicit(&me->stopped, memory_order_relaxed) == s0 &&
		    t1 - t0 > atomic_load_explicit(&me->longest, memory_order_relaxed))
			atomic_store_explicit(&me->longest, t1 - t0, memory_order_relaxed);
		atomic_fetch_add_explicit(&me->decisions, 1, memory_order_relaxed);
	}
	_exit(0);
}

struct proc {
	pid_t pid;
	struct region *reg;
	uint64_t since; /* started or last resumed: the heartbeat's grace */
};

static struct region *reg[REGIONS];
static unsigned char *fmem, *hmem;
static size_t fsize, hsize;

static pid_t start_worker(int r)
{
	fflush(NULL);
	pid_t p = fork();
	if (p == 0)
		worker(fmem, fsize, hmem, hsize, reg[r], r);
	if (p > 0) {
		atomic_store_explicit(&reg[r]->beat, mono_ns(), memory_order_relaxed);
		/* Release: pairs with the worker's acquire of go. */
		atomic_store_explicit(&reg[r]->go, 1, memory_order_release);
	}
	return p;
}

/* Watch every running worker for @ns: fail on one that has neither
 * finished a call nor been (re)started for bound_ms.  @stopped: the index
 * of a worker stopped on purpose (not watched), or -1. */
static int watch(struct proc *w, int nw, int stopped, uint64_t ns)
{
	uint64_t end = mono_ns() + ns;
	for (;;) {
		uint64_t now = mono_ns();
		for (int i = 0; i < nw; i++) {
			if (i == stopped || w[i].pid <= 0)
				continue;
			uint64_t beat = atomic_load_explicit(&w[i].reg->beat, memory_order_relaxed);
			uint64_t last = beat > w[i].since ? beat : w[i].since;
			if (now > last && now - last > opt.bound_ms * MS) {
				fprintf(stderr,
				        "stress_keyed_stop: worker %d (pid %d) made no call for %llu ms\n",
				        i, (int)w[i].pid, (unsigned long long)((now - last) / MS));
				return 0;
			}
		}
		if (now >= end)
			return 1;
		sleep_ns(ns < 10 * MS ? ns : 10 * MS);
	}
}

static uint64_t flood_calls(struct proc *w, int nw, int except)
{
	uint64_t s = 0;
	for (int i = 0; i < nw; i++)
		if (i != except && w[i].pid > 0)
			s += atomic_load_explicit(&w[i].reg->flood, memory_order_relaxed);
	return s;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strncmp(a, "--workers=", 10) == 0)
			opt.workers = atoi(a + 10);
		else if (strncmp(a, "--seconds=", 10) == 0)
			opt.seconds = atof(a + 10);
		else if (strncmp(a, "--bound-ms=", 11) == 0)
			opt.bound_ms = strtoull(a + 11, NULL, 10);
		else if (strncmp(a, "--claims=", 9) == 0)
			opt.claims = strtoull(a + 9, NULL, 10);
		else {
			fprintf(stderr, "usage: see the comment at the top of stress_keyed_stop.c\n");
			return 2;
		}
	}
	if (opt.workers < 2 || opt.workers > 8 || !(opt.seconds > 0) || opt.bound_ms == 0) {
		fprintf(stderr, "stress_keyed_stop: need 2..8 workers, seconds > 0, bound > 0\n");
		return 2;
	}
	sluice_keyed_config_t fc = flood_config(), hc = hot_config();
	fsize = (sluice_keyed_region_bytes(&fc) + 4095) / 4096 * 4096;
	hsize = (sluice_keyed_region_bytes(&hc) + 4095) / 4096 * 4096;
	size_t rsize = (sizeof(struct region) + 4095) / 4096 * 4096;
	size_t total = fsize + hsize + rsize * REGIONS;
	unsigned char *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
	                          -1, 0);
	if (mem == MAP_FAILED)
		return 2;
	fmem = mem;
	hmem = mem + fsize;
	int rc = sluice_keyed_format(fmem, fsize, &fc);
	if (rc == 0)
		rc = sluice_keyed_format(hmem, hsize, &hc);
	if (rc != 0) {
		fprintf(stderr, "stress_keyed_stop: init: %s\n", sluice_err_name(rc));
		return 2;
	}
	for (int i = 0; i < REGIONS; i++)
		reg[i] = (struct region *)(mem + fsize + hsize + rsize * (size_t)i);

	struct proc w[8];
	int next_reg = 0;
	for (int i = 0; i < opt.workers; i++) {
		w[i].reg = reg[next_reg];
		w[i].since = mono_ns();
		if ((w[i].pid = start_worker(next_reg++)) < 0)
			return 2;
	}
	int ok = watch(w, opt.workers, -1, 200 * MS), stops = 0, kills = 0;
	uint64_t end = mono_ns() + (uint64_t)(opt.seconds * 1e9);
	for (int round = 0; ok && mono_ns() < end; round++) {
		int v = round % opt.workers;
		if (round % 4 == 3 && next_reg < REGIONS) {
			kill(w[v].pid, SIGKILL); /* wherever it is */
			int st;
			waitpid(w[v].pid, &st, 0);
			kills += WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
			w[v].reg = reg[next_reg];
			w[v].since = mono_ns();
			if ((w[v].pid = start_worker(next_reg++)) < 0)
				return 2;
			ok = watch(w, opt.workers, -1, 100 * MS);
			continue;
		}
		/* the others' flood rate, measured now, sets the stop's length:
		 * about opt.claims claims of each of the 8 flood slots */
		uint64_t c0 = flood_calls(w, opt.workers, v), t0 = mono_ns();
		if (!(ok = watch(w, opt.workers, -1, 100 * MS)))
			break;
		uint64_t c1 = flood_calls(w, opt.workers, v), t1 = mono_ns();
		double rate = (double)(c1 - c0) * 1e9 / (double)(t1 - t0 + 1);
		double secs = rate > 0 ? (double)opt.claims * 8.0 / rate : 1.0;
		if (secs < 0.02)
			secs = 0.02;
		if (secs > 1.5)
			secs = 1.5;
		atomic_fetch_add_explicit(&w[v].reg->stopped, 1, memory_order_relaxed);
		kill(w[v].pid, SIGSTOP);
		stops++;
		ok = watch(w, opt.workers, v, (uint64_t)(secs * 1e9));
		w[v].since = mono_ns();
		kill(w[v].pid, SIGCONT);
		sleep_ns(MS); /* a call that spans the stop ends before the bump */
		atomic_fetch_add_explicit(&w[v].reg->stopped, 1, memory_order_relaxed);
		if (ok)
			ok = watch(w, opt.workers, -1, 150 * MS);
	}
	/* a last watch of twice the bound, so damage done by the last stop
	 * shows as a stuck worker too */
	if (ok)
		ok = watch(w, opt.workers, -1, 2 * opt.bound_ms * MS);
	/* the end: every worker told to stop (and resumed, in case) must exit
	 * within the bound */
	int ended = 1;
	for (int i = 0; i < opt.workers; i++) {
		atomic_store_explicit(&w[i].reg->stop, 1, memory_order_relaxed);
		kill(w[i].pid, SIGCONT);
	}
	uint64_t deadline = mono_ns() + opt.bound_ms * MS;
	for (int i = 0; i < opt.workers; i++) {
		int st = 0;
		pid_t p;
		while ((p = waitpid(w[i].pid, &st, WNOHANG)) == 0 && mono_ns() < deadline)
			sleep_ns(5 * MS);
		if (p == 0) {
			fprintf(stderr, "stress_keyed_stop: worker %d did not end\n", i);
			kill(w[i].pid, SIGKILL);
			waitpid(w[i].pid, &st, 0);
			ended = 0;
		} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "stress_keyed_stop: worker %d failed (status %d)\n", i, st);
			ended = 0;
		}
	}
	uint64_t decisions = 0, flood = 0, ebusy = 0, longest = 0;
	size_t nrec = 0;
	for (int i = 0; i < next_reg; i++) {
		decisions += atomic_load_explicit(&reg[i]->decisions, memory_order_relaxed);
		flood += atomic_load_explicit(&reg[i]->flood, memory_order_relaxed);
		ebusy += atomic_load_explicit(&reg[i]->ebusy, memory_order_relaxed);
		uint64_t l = atomic_load_explicit(&reg[i]->longest, memory_order_relaxed);
		longest = l > longest ? l : longest;
		/* Acquire: pairs with the workers' release of nrec. */
		nrec += atomic_load_explicit(&reg[i]->nrec, memory_order_acquire);
	}
	struct record *all = malloc(sizeof(*all) * (nrec + 1));
	if (!all)
		return 2;
	size_t m = 0;
	for (int i = 0; i < next_reg; i++) {
		uint64_t n = atomic_load_explicit(&reg[i]->nrec, memory_order_acquire);
		memcpy(all + m, reg[i]->rec, n * sizeof(*all));
		m += n;
	}
	s128 worst = worst_excess_ns(all, m, INTERVAL);
	int bound_ok = worst <= (s128)BURST * (s128)INTERVAL;
	int pass = ok && ended && bound_ok && stops > 0;
	printf("stress algo=keyed-gcra mode=stop workers=%d stops=%d kills=%d decisions=%llu "
	       "flood=%llu ebusy=%llu admitted=%zu worst=%llu bound=%llu longest_call_ms=%llu "
	       "stuck=%d ended=%d verdict=%s\n",
	       opt.workers, stops, kills, (unsigned long long)decisions,
	       (unsigned long long)flood, (unsigned long long)ebusy, m,
	       (unsigned long long)(worst / (s128)INTERVAL), (unsigned long long)BURST,
	       (unsigned long long)(longest / MS), !ok, ended, pass ? "ok" : "VIOLATION");
	free(all);
	munmap(mem, total);
	return pass ? 0 : 1;
}
