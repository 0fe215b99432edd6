/* SPDX-License-Identifier: MIT */
/*
 * stress_region.c - processes that share an engine region (engine.h
 * SHARED STATE, rules/region.c) reload with a layout change each time,
 * all at once, while they decide; one of them is killed and one stopped
 * on the way.
 *
 *   stress_region [--procs=N] [--loads=L] [--seed=S]
 *
 * N processes (forked; each makes its own engine on the MAP_SHARED
 * region) each load L times a file whose rule `churn` has another window
 * at every load (a new table, the old one a ghost, then freed), and whose
 * rule `total` never changes: a global fixed window of LIMIT per 1000 h
 * (a table of one key, held by every process for the whole run).  The
 * clock is a manual one each process moves by 3 s per load (past every
 * ghost: windows are 1..2 s), 2.5 h in all, so `total` never refills.  Between loads
 * each process asks `total` a few times and records what it admitted.
 * Process 1 stops itself (SIGSTOP) half way and is SIGKILLed there (its
 * engine never freed); process 2 stops itself at a quarter and is
 * continued 0.2 s later, the others loading all the while.
 * The verifier, after every process ended:
 *   - `total` admitted exactly LIMIT over all processes (the killed one's
 *     admissions recorded in shared memory before it stopped); demand is
 *     several times LIMIT, so with one table fewer cannot happen, and a
 *     table freed or reused under a holder, or two tables for one name,
 *     shows as more;
 *   - every load succeeded but those refused with SLUICE_EBUSY (a claim
 *     met while another process was mid-claim, which bounded waits
 *     allow; at least half of all loads must succeed), and none ran out
 *     of space: the region holds a few dozen of these tables, and N x L
 *     layout changes would need thousands.
 * Exit 0 when every check held, 1 otherwise.  Checked to fail: with
 * rules/region.c's reclaim skipping the holder check (freeing tables in
 * use), `total` admits more than LIMIT.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice/engine.h"
#include "sluice/error.h"

#define REGION (4u << 20)
#define LIMIT 2000
#define PROCS_MAX 8

struct shared {
	_Atomic long admitted[PROCS_MAX];
	_Atomic long loads_ok[PROCS_MAX], loads_busy[PROCS_MAX], loads_bad[PROCS_MAX];
	_Atomic long bad_code[PROCS_MAX];
	_Atomic long used_end[PROCS_MAX];
};

static int child(int id, void *reg, struct shared *sh, int loads)
{
	sluice_clock_t clk;
	sluice_clock_manual_init(&clk, 1000000000000ULL);
	sluice_engine_options_t o = { .clock = &clk, .region = reg, .region_bytes = REGION };
	sluice_engine_t *e;
	int rc = sluice_engine_new(&o, &e);
	if (rc) {
		atomic_store(&sh->bad_code[id], rc);
		return 1;
	}
	char y[512];
	for (int i = 0; i < loads; i++) {
		/* another window every load, and per process, so claims of one
		 * name by several processes at once happen too */
		unsigned win = 1000 + (unsigned)((i * 7 + id * 3) % 1000);
		snprintf(y, sizeof(y),
		         "rules:\n"
		         "  - id: churn\n"
		         "    match: { prefix: /churn }\n"
		         "    dimensions: [ip]\n"
		         "    limit: { algorithm: fixed_window, window: %ums, max_requests: 5 }\n"
		         "    keys: { capacity: 256 }\n"
		         "  - id: total\n"
		         "    match: { prefix: /total }\n"
		         "    limit: { algorithm: fixed_window, window: 1000h, max_requests: %d }\n",
		         win, LIMIT);
		sluice_rules_errors_t *errs = NULL;
		rc = sluice_engine_load_buffer(e, "s.yaml", y, strlen(y), &errs);
		if (rc == 0) {
			atomic_fetch_add(&sh->loads_ok[id], 1);
		} else if (errs && errs->count && errs->errors[0].code == SLUICE_EBUSY) {
			atomic_fetch_add(&sh->loads_busy[id], 1);
		} else {
			atomic_fetch_add(&sh->loads_bad[id], 1);
			atomic_store(&sh->bad_code[id],
			             errs && errs->count ? errs->errors[0].code : rc);
		}
		sluice_rules_errors_free(errs);
		unsigned char a[4] = { 10, 0, (unsigned char)id, (unsigned char)i };
		sluice_request_t q = { .method = "GET", .path = "/churn", .addr = a, .addr_len = 4 };
		sluice_verdict_t v;
		int drc = sluice_engine_decide(e, &q, &v); /* churn: decided, not checked */
		(void)drc;
		q.path = "/total";
		for (int j = 0; j < 4; j++)
			if (sluice_engine_decide(e, &q, &v) == 0 && v.action == SLUICE_ACTION_PASS)
				atomic_fetch_add(&sh->admitted[id], 1);
		sluice_clock_manual_advance(&clk, 3000000000ULL);
		if ((id == 1 && i == loads / 2) || (id == 2 && i == loads / 4))
			raise(SIGSTOP); /* the parent kills 1 here, and continues 2 */
	}
	sluice_engine_info_t in;
	if (sluice_engine_info(e, &in) == 0)
		atomic_store(&sh->used_end[id], (long)in.region_used);
	sluice_engine_free(e);
	return 0;
}

int main(int argc, char **argv)
{
	int procs = 4, loads = 3000;
	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--procs=", 8) == 0)
			procs = atoi(argv[i] + 8);
		else if (strncmp(argv[i], "--loads=", 8) == 0)
			loads = atoi(argv[i] + 8);
		else {
			fprintf(stderr, "usage: stress_region [--procs=N] [--loads=L]\n");
			return 2;
		}
	}
	if (procs < 3 || procs > PROCS_MAX || loads < 10) {
		fprintf(stderr, "stress_region: --procs 3..%d, --loads >= 10\n", PROCS_MAX);
		return 2;
	}
	void *reg = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (reg == MAP_FAILED || sh == MAP_FAILED)
		return 1;
	pid_t pid[PROCS_MAX];
	for (int i = 0; i < procs; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			return 1;
		if (pid[i] == 0)
			_exit(child(i, reg, sh, loads));
	}
	/* process 2 stopped (itself) at a quarter: 0.2 s, then on; process 1
	 * stopped (itself) half way: killed there */
	int st = 0;
	if (waitpid(pid[2], &st, WUNTRACED) != pid[2] || !WIFSTOPPED(st)) {
		fprintf(stderr, "stress_region: process 2 did not stop (status %d)\n", st);
		return 1;
	}
	nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
	kill(pid[2], SIGCONT);
	if (waitpid(pid[1], &st, WUNTRACED) != pid[1] || !WIFSTOPPED(st)) {
		fprintf(stderr, "stress_region: process 1 did not stop (status %d)\n", st);
		return 1;
	}
	kill(pid[1], SIGKILL);
	int bad = 0;
	for (int i = 0; i < procs; i++) {
		waitpid(pid[i], &st, 0);
		if (i != 1 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			fprintf(stderr, "stress_region: process %d ended with status %d (code %ld)\n", i,
			        st, atomic_load(&sh->bad_code[i]));
			bad = 1;
		}
	}
	long total = 0, ok = 0, busy = 0, failed = 0, used = 0;
	for (int i = 0; i < procs; i++) {
		total += atomic_load(&sh->admitted[i]);
		ok += atomic_load(&sh->loads_ok[i]);
		busy += atomic_load(&sh->loads_busy[i]);
		failed += atomic_load(&sh->loads_bad[i]);
		if (atomic_load(&sh->loads_bad[i]))
			fprintf(stderr, "stress_region: process %d: a load failed with %ld\n", i,
			        atomic_load(&sh->bad_code[i]));
		if (atomic_load(&sh->used_end[i]) > used)
			used = atomic_load(&sh->used_end[i]);
	}
	printf("stress_region: %d processes x %d loads: %ld loads ok, %ld busy, %ld failed; "
	       "`total` admitted %ld of %d; region used %ld of %u bytes\n",
	       procs, loads, ok, busy, failed, total, LIMIT, used, REGION);
	if (total != LIMIT) {
		fprintf(stderr, "stress_region: `total` admitted %ld, want exactly %d\n", total, LIMIT);
		bad = 1;
	}
	if (failed) {
		fprintf(stderr, "stress_region: %ld loads failed\n", failed);
		bad = 1;
	}
	if (ok < (long)(procs - 1) * loads / 2) {
		fprintf(stderr, "stress_region: only %ld loads succeeded\n", ok);
		bad = 1;
	}
	return bad;
}
