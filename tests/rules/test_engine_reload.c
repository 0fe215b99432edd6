/* SPDX-License-Identifier: MIT */
/*
 * test_engine_reload.c - reloads that keep state (engine.h RELOAD) and the
 * shared region (SHARED STATE), on a manual clock.
 *
 * The central test is no_refill: one key keeps sending, one request per
 * ms, while the rule file is reloaded 1000 times (the same file; a file
 * that changes what does not touch the state; a layout change back and
 * forth; the rule removed and put back).  The rule's admissions of that
 * key must not exceed those of the same run without reloads.  An engine
 * that rebuilt the tables at each load would hand the key a full bucket
 * every time.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice/error.h"
#include "sluice/engine.h"

#include "test_engine_common.h"

TestSuite(engine_reload, .timeout = 120);

#define GCRA_RULE(id, status)                                                    \
	"  - id: " id "\n"                                                       \
	"    dimensions: [ip]\n"                                                 \
	"    limit: { algorithm: token_bucket, rate: 10/s, burst: 20 }\n"         \
	"    keys: { capacity: 64 }\n"                                           \
	"    fallback: { type: reject, status: " status " }\n"

static const char file_a[] = "rules:\n" GCRA_RULE("k", "429");
/* the same state layout and parameters: only the answer differs */
static const char file_b[] = "rules:\n" GCRA_RULE("k", "503")
	"  - id: other\n"
	"    match: { prefix: /other/ }\n"
	"    limit: { algorithm: fixed_window, window: 1s, max_requests: 5 }\n";
/* another layout for the same id */
static const char file_layout[] =
	"rules:\n"
	"  - id: k\n"
	"    dimensions: [ip]\n"
	"    limit: { algorithm: fixed_window, window: 1s, max_requests: 50 }\n"
	"    keys: { capacity: 64 }\n";
/* the rule removed */
static const char file_none[] = "rules:\n"
	"  - id: other\n"
	"    match: { prefix: /other/ }\n"
	"    limit: { algorithm: fixed_window, window: 1s, max_requests: 5 }\n";

/* Rule "k"'s own admissions (outcome PASSED for the rule named k). */
static int k_admitted(const sluice_verdict_t *v)
{
	for (uint32_t i = 0; i < v->nrules; i++)
		if (strcmp(v->rules[i].id, "k") == 0)
			return v->rules[i].outcome == SLUICE_OUTCOME_PASSED;
	return 0;
}

/* 2000 requests 1 ms apart; with @alt, a reload before every other one,
 * alternating file_a and @alt (1000 reloads).  Return: k's admissions. */
static int run(const char *alt, int *failed_loads)
{
	struct kit k;
	kit_load(&k, file_a);
	int admitted = 0;
	for (int i = 0; i < 2000; i++) {
		if (alt && i % 2 == 0) {
			const char *f = (i / 2) % 2 ? file_a : alt;
			(void)sluice_engine_load_buffer(k.e, "r.yaml", f, strlen(f), NULL);
		}
		sluice_verdict_t v;
		decide(&k, "GET", "/x", NULL, "203.0.113.7", NULL, &v);
		admitted += k_admitted(&v);
		sluice_clock_manual_advance(&k.clk, MS);
	}
	sluice_engine_info_t in;
	sluice_engine_info(k.e, &in);
	if (failed_loads)
		*failed_loads = (int)in.failed_loads;
	if (alt)
		cr_assert_eq(in.version + in.failed_loads, 1 + 1000);
	kit_free(&k);
	return admitted;
}

Test(engine_reload, no_refill)
{
	int base = run(NULL, NULL);
	/* 20 at once, then one per 100 ms over the 1999 ms that follow */
	cr_assert_eq(base, 20 + 19, "baseline %d", base);
	int fl;
	int same = run(file_a, &fl);
	cr_assert_eq(same, base, "reloading the same file: %d admitted, %d without reloads", same,
	             base);
	cr_assert_eq(fl, 0);
	int answer = run(file_b, &fl);
	cr_assert_eq(answer, base, "a change that keeps the layout: %d, base %d", answer, base);
	cr_assert_eq(fl, 0);
	int layout = run(file_layout, &fl);
	cr_assert_leq(layout, base, "layout back and forth: %d admitted, base %d", layout, base);
	int removed = run(file_none, &fl);
	cr_assert_leq(removed, base, "removed and back: %d admitted, base %d", removed, base);
	cr_assert_eq(fl, 0);
}

Test(engine_reload, unchanged_rule_keeps_state)
{
	struct kit k;
	kit_load(&k, file_a);
	sluice_engine_rule_info_t ri;
	cr_assert_eq(sluice_engine_rule_info(k.e, "k", &ri), 0);
	uint64_t serial = ri.serial;
	sluice_verdict_t v;
	for (int i = 0; i < 20; i++)
		cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT);
	load_ok(&k, file_b);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT);
	cr_assert_eq(v.status, 503, "the new answer applies");
	cr_assert_eq(v.version, 2);
	cr_assert_eq(sluice_engine_rule_info(k.e, "k", &ri), 0);
	cr_assert_eq(ri.serial, serial, "the same state");
	kit_free(&k);
}

/* A changed rate is applied live: the key's state is kept (still empty
 * right after), and it refills at the new rate. */
Test(engine_reload, live_rate_change)
{
	static const char faster[] = "rules:\n"
		"  - id: k\n"
		"    dimensions: [ip]\n"
		"    limit: { algorithm: token_bucket, rate: 100/s, burst: 20 }\n"
		"    keys: { capacity: 64 }\n";
	struct kit k;
	kit_load(&k, file_a);
	sluice_verdict_t v;
	for (int i = 0; i < 20; i++)
		decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT);
	load_ok(&k, faster);
	sluice_engine_rule_info_t ri;
	sluice_engine_rule_info(k.e, "k", &ri);
	cr_assert_eq(ri.rate, 100);
	cr_assert_eq(ri.pending, 0);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT,
	             "no refill at the change");
	/* raising the rate keeps the TAT (keyed.h LIVE PARAMETERS): 20 x
	 * 100 ms = 2 s ahead, and the new bucket (tau = 20 x 10 ms) admits
	 * once TAT + T - tau = 2 s + 10 ms - 200 ms = 1.81 s have passed */
	sluice_clock_manual_advance(&k.clk, 1800 * MS);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT);
	sluice_clock_manual_advance(&k.clk, 10 * MS);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS);
	/* and then one per 10 ms */
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT);
	sluice_clock_manual_advance(&k.clk, 10 * MS);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS);
	kit_free(&k);
}

/* Rate and burst both changed: the burst change is the second change
 * within tau, refused for now by the table: pending until sync. */
Test(engine_reload, pending_change_and_sync)
{
	static const char both[] = "rules:\n"
		"  - id: k\n"
		"    dimensions: [ip]\n"
		"    limit: { algorithm: token_bucket, rate: 5/s, burst: 10 }\n"
		"    keys: { capacity: 64 }\n";
	struct kit k;
	kit_load(&k, file_a);
	load_ok(&k, both);
	sluice_engine_rule_info_t ri;
	sluice_engine_rule_info(k.e, "k", &ri);
	cr_assert_eq(ri.rate, 5);
	cr_assert_eq(ri.burst, 20, "the burst waits");
	cr_assert_eq(ri.pending, 1);
	sluice_engine_info_t in;
	sluice_engine_info(k.e, &in);
	cr_assert_eq(in.pending, 1);
	cr_assert_eq(sluice_engine_sync(k.e), 1, "still within tau");
	sluice_clock_manual_advance(&k.clk, 5 * SEC); /* past tau = 20 x 200 ms */
	cr_assert_eq(sluice_engine_sync(k.e), 0);
	sluice_engine_rule_info(k.e, "k", &ri);
	cr_assert_eq(ri.burst, 10);
	cr_assert_eq(ri.pending, 0);
	kit_free(&k);
}

/* A new layout: the old state stays in force beside the new one for its
 * memory (tau = 20 x 100 ms = 2 s), so the emptied key stays refused. */
Test(engine_reload, layout_change_is_conservative)
{
	struct kit k;
	kit_load(&k, file_a);
	sluice_verdict_t v;
	for (int i = 0; i < 20; i++)
		decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v);
	load_ok(&k, file_layout);
	sluice_engine_rule_info_t ri;
	sluice_engine_rule_info(k.e, "k", &ri);
	cr_assert_eq(ri.ghost, 1);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT,
	             "the new fixed window must not hand the key 50 fresh permits");
	/* another key: the old bucket had 20 for it, the new window 50 */
	int passed = 0;
	for (int i = 0; i < 60; i++)
		passed += decide(&k, "GET", "/", NULL, "2.2.2.2", NULL, &v) == SLUICE_ACTION_PASS;
	cr_assert_eq(passed, 20);
	/* a second layout change while the first's old state is in force:
	 * refused, the old set kept */
	load_refused(&k, file_a, 1, 0, "changed again");
	/* after tau the old state is out of force */
	sluice_clock_manual_advance(&k.clk, 2 * SEC);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS);
	sluice_engine_rule_info(k.e, "k", &ri);
	cr_assert_eq(ri.ghost, 0);
	kit_free(&k);
}

/* Removed and put back within its memory: the same state. */
Test(engine_reload, removed_rule_comes_back_with_its_state)
{
	struct kit k;
	kit_load(&k, file_a);
	sluice_engine_rule_info_t ri;
	sluice_engine_rule_info(k.e, "k", &ri);
	uint64_t serial = ri.serial;
	sluice_verdict_t v;
	for (int i = 0; i < 20; i++)
		decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v);
	load_ok(&k, file_none);
	cr_assert_eq(sluice_engine_rule_info(k.e, "k", &ri), SLUICE_EINVAL);
	load_ok(&k, file_a);
	sluice_engine_rule_info(k.e, "k", &ri);
	cr_assert_eq(ri.serial, serial);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT);
	/* past SLUICE_ENGINE_GHOST_NS (and the rule's memory) it is let go */
	load_ok(&k, file_none);
	sluice_clock_manual_advance(&k.clk, SLUICE_ENGINE_GHOST_NS + SEC);
	load_ok(&k, file_none);
	load_ok(&k, file_a);
	sluice_engine_rule_info(k.e, "k", &ri);
	cr_assert_neq(ri.serial, serial);
	kit_free(&k);
}

/* An in-flight permit taken before a layout change goes back to the old
 * state (found by its serial), not to the new one. */
Test(engine_reload, complete_after_layout_change)
{
	static const char k2[] = "rules:\n"
		"  - id: up\n"
		"    dimensions: [user]\n"
		"    limit: { algorithm: concurrency, max_inflight: 1 }\n"
		"    keys: { capacity: 64 }\n";
	static const char k2b[] = "rules:\n"
		"  - id: up\n"
		"    dimensions: [user]\n"
		"    limit: { algorithm: concurrency, max_inflight: 1 }\n"
		"    keys: { capacity: 128 }\n";
	struct kit k;
	kit_load(&k, k2);
	sluice_verdict_t a, b;
	cr_assert_eq(decide(&k, "PUT", "/", NULL, NULL, "u", &a), SLUICE_ACTION_PASS);
	load_ok(&k, k2b);
	/* the old state (in force beside the new one) still holds a's permit */
	cr_assert_eq(decide(&k, "PUT", "/", NULL, NULL, "u", &b), SLUICE_ACTION_REJECT);
	cr_assert_eq(sluice_engine_complete(k.e, &a, 0, 1), 0);
	cr_assert_eq(decide(&k, "PUT", "/", NULL, NULL, "u", &b), SLUICE_ACTION_PASS);
	cr_assert_eq(sluice_engine_complete(k.e, &b, 0, 1), 0);
	cr_assert_eq(decide(&k, "PUT", "/", NULL, NULL, "u", &b), SLUICE_ACTION_PASS);
	kit_free(&k);
}

/* An in-flight permit taken before its rule was removed goes back to the
 * removed (retired) state, found by its serial: put back, the rule has its
 * permit again. */
Test(engine_reload, complete_after_rule_removed)
{
	static const char up[] = "rules:\n"
		"  - id: up\n"
		"    dimensions: [user]\n"
		"    limit: { algorithm: concurrency, max_inflight: 1 }\n"
		"    keys: { capacity: 64 }\n";
	struct kit k;
	kit_load(&k, up);
	sluice_engine_rule_info_t ri;
	cr_assert_eq(sluice_engine_rule_info(k.e, "up", &ri), 0);
	uint64_t serial = ri.serial;
	sluice_verdict_t a, b;
	cr_assert_eq(decide(&k, "PUT", "/", NULL, NULL, "u", &a), SLUICE_ACTION_PASS);
	load_ok(&k, file_none);
	cr_assert_eq(sluice_engine_complete(k.e, &a, 0, 1), 0);
	load_ok(&k, up);
	cr_assert_eq(sluice_engine_rule_info(k.e, "up", &ri), 0);
	cr_assert_eq(ri.serial, serial, "the removed state came back");
	cr_assert_eq(decide(&k, "PUT", "/", NULL, NULL, "u", &b), SLUICE_ACTION_PASS,
	             "the permit a held went back to the removed state");
	kit_free(&k);
}

/* ---- the shared region ------------------------------------------- */

#define REGION_BYTES (4u << 20)

static const char shared_yaml[] =
	"rules:\n"
	"  - id: per-ip\n"
	"    dimensions: [ip]\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n"
	"    keys: { capacity: 64 }\n";

/*
 * A second engine in a forked child loads the same file on the same
 * MAP_SHARED region: it finds the rule's table by id and layout and
 * decides on the parent's state (the parent's key is spent there), and
 * what the child takes is spent for the parent too.
 */
Test(engine_reload, shared_region_across_fork)
{
	void *reg = mmap(NULL, REGION_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
	                 -1, 0);
	cr_assert_neq(reg, MAP_FAILED);
	struct kit k;
	kit_new_region(&k, reg, REGION_BYTES);
	load_ok(&k, shared_yaml);
	sluice_verdict_t v;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* the child: no Criterion asserts, an exit code per check */
		sluice_clock_t clk;
		sluice_clock_manual_init(&clk, 1000 * SEC);
		sluice_engine_options_t o = { .clock = &clk, .region = reg,
			                      .region_bytes = REGION_BYTES };
		sluice_engine_t *e;
		if (sluice_engine_new(&o, &e) != 0)
			_exit(10);
		if (sluice_engine_load_buffer(e, "s.yaml", shared_yaml, strlen(shared_yaml), NULL))
			_exit(11);
		unsigned char a1[4] = { 1, 1, 1, 1 }, a2[4] = { 2, 2, 2, 2 };
		sluice_request_t q = { .method = "GET", .path = "/", .addr = a1, .addr_len = 4 };
		sluice_verdict_t cv;
		if (action_of(e, &q, &cv) != SLUICE_ACTION_REJECT)
			_exit(12); /* the parent's three admissions are in the table */
		q.addr = a2;
		for (int i = 0; i < 2; i++)
			if (action_of(e, &q, &cv) != SLUICE_ACTION_PASS)
				_exit(13);
		sluice_engine_free(e);
		_exit(0);
	}
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %d", st);
	/* the child's two for 2.2.2.2 count here */
	cr_assert_eq(decide(&k, "GET", "/", NULL, "2.2.2.2", NULL, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(&k, "GET", "/", NULL, "2.2.2.2", NULL, &v), SLUICE_ACTION_REJECT);
	sluice_engine_info_t in;
	sluice_engine_info(k.e, &in);
	cr_assert_gt(in.region_used, 0);
	kit_free(&k);
	munmap(reg, REGION_BYTES);
}

Test(engine_reload, region_not_ours)
{
	void *reg = mmap(NULL, REGION_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
	                 -1, 0);
	cr_assert_neq(reg, MAP_FAILED);
	memset(reg, 0x5a, 4096);
	sluice_clock_t clk;
	sluice_clock_manual_init(&clk, SEC);
	sluice_engine_options_t o = { .clock = &clk, .region = reg, .region_bytes = REGION_BYTES };
	sluice_engine_t *e = NULL;
	cr_assert_eq(sluice_engine_new(&o, &e), SLUICE_ELAYOUT);
	o.region_bytes = 4096;
	cr_assert_eq(sluice_engine_new(&o, &e), SLUICE_EINVAL);
	munmap(reg, REGION_BYTES);
}

/* A table the region has no room for: the load fails at the rule's line
 * with SLUICE_EMEMORY, and the rule set in force stays. */
Test(engine_reload, region_full)
{
	size_t bytes = 1u << 20;
	void *reg = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(reg, MAP_FAILED);
	struct kit k;
	kit_new_region(&k, reg, bytes);
	load_ok(&k, shared_yaml);
	static const char big[] = "rules:\n"
		"  - id: big\n"
		"    dimensions: [ip]\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n"
		"    keys: { capacity: 100000 }\n";
	cr_assert_eq(load_refused(&k, big, 1, 2, "SLUICE_EMEMORY"), SLUICE_EMEMORY);
	sluice_verdict_t v;
	decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v);
	cr_assert_eq(v.version, 1);
	cr_assert_str_eq(v.rules[0].id, "per-ip");
	/* the refused table took no space: a small one still fits */
	static const char small[] = "rules:\n"
		"  - id: small\n"
		"    dimensions: [user]\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n"
		"    keys: { capacity: 64 }\n";
	load_ok(&k, small);
	kit_free(&k);
	munmap(reg, bytes);
}
