/* SPDX-License-Identifier: MIT */
/*
 * test_engine_region.c - region space given back and reused (engine.h
 * SHARED STATE, rules/region.c): 1,000 loads with a layout change each on
 * a region that holds a handful of tables; a forked child, stopped, keeps
 * the tables it holds through the parent's layout changes, and its space
 * comes back once it is killed.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_engine_common.h"

/* 2 MiB: about 1.8 MiB for tables past the directory, so about 26 of
 * the 67 KiB tables below (capacity 512); without reuse a load in the
 * first 50 would fail */
#define REGION_BYTES (2u << 20)

/* The rule's table with capacity @cap, window @win ms (a layout change,
 * so a new table, each time @win changes; the ghost lasts @win). */
static void yaml_of(char *buf, size_t n, unsigned win, unsigned cap)
{
	snprintf(buf, n,
	         "rules:\n"
	         "  - id: per-ip\n"
	         "    dimensions: [ip]\n"
	         "    limit: { algorithm: fixed_window, window: %ums, max_requests: 3 }\n"
	         "    keys: { capacity: %u }\n",
	         win, cap);
}

static sluice_engine_info_t info(struct kit *k)
{
	sluice_engine_info_t in;
	cr_assert_eq(sluice_engine_info(k->e, &in), 0);
	cr_assert_leq(in.region_free, in.region_used);
	return in;
}

static size_t used(struct kit *k)
{
	return info(k).region_used;
}

static void *region_map(void)
{
	void *reg = mmap(NULL, REGION_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
	                 -1, 0);
	cr_assert_neq(reg, MAP_FAILED);
	return reg;
}

/*
 * 1,000 loads, each with another window (so another layout: a new table,
 * the old one a ghost for one window), the clock moved past the ghost's
 * memory between loads; capacities alternate between two sizes, so the
 * free extents are reused best fit.  Every load succeeds, and the region
 * never holds more than a few tables' worth (the new one, the ghost, and
 * one freed by the next load).  Each key still starts the new layout
 * with what the old one counted while the ghost lives: 1.1.1.1 spent in
 * one layout is refused by the next one's first decision.
 */
Test(engine_region, thousand_layout_changes)
{
	void *reg = region_map();
	struct kit k;
	kit_new_region(&k, reg, REGION_BYTES);
	char y[512];
	size_t base = used(&k), high = 0, first = 0; /* base: the directory */
	int check = 0;
	for (unsigned i = 0; i < 1000; i++) {
		yaml_of(y, sizeof(y), 1000 + 5 * i, i % 2 ? 256 : 512);
		load_ok(&k, y);
		size_t u = used(&k);
		if (i == 0)
			first = u;
		if (u > high)
			high = u;
		sluice_verdict_t v;
		if (check) {
			cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v),
			             SLUICE_ACTION_REJECT, "load %u: the new layout refilled the key", i);
			check = 0;
		}
		sluice_clock_manual_advance(&k.clk, 8 * SEC); /* past every ghost */
		if (i % 100 == 0) {
			/* spent in this layout, refused by the next one's ghost */
			for (int j = 0; j < 3; j++)
				decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v);
			cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v),
			             SLUICE_ACTION_REJECT);
			check = 1;
		}
	}
	/* the table in force, its ghost, the one whose state the load just
	 * freed and the one the next load frees, in extents of the larger
	 * size, and the smaller ones: no more than 6 of the larger */
	size_t table = first - base;
	cr_assert_leq(high, base + 6 * table, "region used grew to %zu: %zu tables of %zu", high,
	              (high - base) / table, table);
	printf("1000 layout changes: region used at most %zu bytes, %zu tables of %zu\n", high,
	       (high - base + table - 1) / table, table);
	kit_free(&k);
	munmap(reg, REGION_BYTES);
}

/* pipe helpers for the child's verdicts */
static void put(int fd, int v)
{
	ssize_t n = write(fd, &v, sizeof(v));
	(void)n;
}

static int get(int fd)
{
	int v = -1;
	ssize_t n = read(fd, &v, sizeof(v));
	return n == sizeof(v) ? v : -1;
}

/*
 * A forked child holds the tables its engine (the parent's, copied by
 * fork) uses.  It spends 2 of 1.1.1.1's 3, then stops itself (SIGSTOP).
 * The parent changes the layout 40 times (its own hold on the first table
 * goes, its ghost's memory long past); a stopped child still holds it, so
 * the table is not reused: continued, the child gets exactly 1 more
 * admission for 1.1.1.1 and is then refused.  The child then dies by
 * SIGKILL without freeing its engine; the parent's next load gives its
 * table back, and a table of its size takes that space instead of new.
 */
Test(engine_region, stopped_child_keeps_killed_child_gives_back)
{
	void *reg = region_map();
	struct kit k;
	kit_new_region(&k, reg, REGION_BYTES);
	char y[512];
	size_t base = used(&k);
	yaml_of(y, sizeof(y), 1000, 512);
	load_ok(&k, y);
	int to_parent[2];
	cr_assert_eq(pipe(to_parent), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* a failing parent must not leave a stopped child behind */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		unsigned char a[4] = { 1, 1, 1, 1 };
		sluice_request_t q = { .method = "GET", .path = "/", .addr = a, .addr_len = 4 };
		sluice_verdict_t cv;
		int ok = action_of(k.e, &q, &cv) == SLUICE_ACTION_PASS &&
		         action_of(k.e, &q, &cv) == SLUICE_ACTION_PASS;
		raise(SIGSTOP);
		ok = ok && action_of(k.e, &q, &cv) == SLUICE_ACTION_PASS &&
		     action_of(k.e, &q, &cv) == SLUICE_ACTION_REJECT;
		put(to_parent[1], ok);
		raise(SIGKILL);
		_exit(99);
	}
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, WUNTRACED), pid);
	cr_assert(WIFSTOPPED(st), "child: status %d", st);
	size_t one = used(&k);
	for (unsigned i = 0; i < 40; i++) {
		yaml_of(y, sizeof(y), 2000 + 5 * i, 512);
		load_ok(&k, y);
		sluice_clock_manual_advance(&k.clk, 8 * SEC);
	}
	/* the last file again, twice: no new table; the first frees the last
	 * ghost's state, the second gives its table back */
	load_ok(&k, y);
	load_ok(&k, y);
	size_t free_alive = info(&k).region_free;
	kill(pid, SIGCONT);
	cr_assert_eq(get(to_parent[0]), 1, "the stopped child's table was reused under it");
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child: status %d", st);
	/* the dead child's table, given back by the next load */
	load_ok(&k, y);
	size_t free_dead = info(&k).region_free, table = one - base;
	cr_assert_geq(free_dead, free_alive + table,
	              "free space %zu with the child alive, %zu dead: its %zu-byte table not given back",
	              free_alive, free_dead, table);
	/* the child's table is given back by this load, and the one after
	 * takes space without growing the region */
	yaml_of(y, sizeof(y), 1000, 512); /* the child's layout again */
	load_ok(&k, y);
	sluice_clock_manual_advance(&k.clk, 8 * SEC);
	size_t before = used(&k);
	for (unsigned i = 0; i < 20; i++) {
		yaml_of(y, sizeof(y), 3000 + 5 * i, 512);
		load_ok(&k, y);
		sluice_clock_manual_advance(&k.clk, 8 * SEC);
	}
	cr_assert_eq(used(&k), before, "region grew from %zu to %zu after the child died", before,
	             used(&k));
	cr_assert_gt(before, one);
	close(to_parent[0]);
	close(to_parent[1]);
	kit_free(&k);
	munmap(reg, REGION_BYTES);
}

/*
 * Two engines on one region in one process are two holders: the first
 * freed (its holds released), the second still decides on the table, and
 * the second's layout changes reuse the first's space once the second
 * lets the table go too.
 */
Test(engine_region, two_engines_two_holders)
{
	void *reg = region_map();
	struct kit a, b;
	kit_new_region(&a, reg, REGION_BYTES);
	kit_new_region(&b, reg, REGION_BYTES);
	char y[512];
	size_t base = used(&a);
	yaml_of(y, sizeof(y), 1000, 512);
	load_ok(&a, y);
	load_ok(&b, y);
	sluice_verdict_t v;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(decide(&a, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS);
	kit_free(&a);
	cr_assert_eq(decide(&b, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT,
	             "a's table was freed under b");
	size_t u0 = used(&b), table = u0 - base;
	for (unsigned i = 0; i < 50; i++) {
		yaml_of(y, sizeof(y), 2000 + 5 * i, 512);
		load_ok(&b, y);
		sluice_clock_manual_advance(&b.clk, 8 * SEC);
	}
	cr_assert_leq(used(&b), base + 6 * table, "region used grew to %zu", used(&b));
	kit_free(&b);
	munmap(reg, REGION_BYTES);
}

struct text {
	char buf[65536];
	size_t len;
};

static int text_write(void *ctx, const char *buf, size_t len)
{
	struct text *t = ctx;
	if (t->len + len >= sizeof(t->buf))
		return 1;
	memcpy(t->buf + t->len, buf, len);
	t->len += len;
	t->buf[t->len] = 0;
	return 0;
}

/* The value of the line starting with @series in @e's metrics, or -1. */
static long long metric(sluice_engine_t *e, const char *series)
{
	static struct text t;
	t.len = 0;
	t.buf[0] = 0;
	cr_assert_eq(sluice_engine_metrics(e, text_write, &t), 0);
	size_t n = strlen(series);
	for (const char *p = t.buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return atoll(p + n + 1);
	return -1;
}

/*
 * On a region a rule's counters are in the region (metrics_internal.h
 * PROCESSES): a forked child's decisions (2 admitted, 3 refused: 1.1.1.1
 * of limit 3, after the parent's 1) show in the parent's metrics, and
 * the parent's in the child's, so either process's scrape is the sum.
 */
Test(engine_region, metrics_summed_over_processes)
{
	void *reg = region_map();
	struct kit k;
	kit_new_region(&k, reg, REGION_BYTES);
	char y[512];
	yaml_of(y, sizeof(y), 1000, 512);
	load_ok(&k, y);
	sluice_verdict_t v;
	cr_assert_eq(decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		unsigned char a[4] = { 1, 1, 1, 1 };
		sluice_request_t q = { .method = "GET", .path = "/", .addr = a, .addr_len = 4 };
		sluice_verdict_t cv;
		int passed = 0;
		for (int i = 0; i < 5; i++)
			passed += action_of(k.e, &q, &cv) == SLUICE_ACTION_PASS;
		_exit(passed == 2 ? 0 : 10 + passed);
	}
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %d", st);
	cr_assert_eq(metric(k.e, "sluice_rule_passed_total{rule=\"per-ip\"}"), 3);
	cr_assert_eq(metric(k.e, "sluice_rule_refused_total{rule=\"per-ip\"}"), 3);
	cr_assert_eq(metric(k.e, "sluice_rule_requests_total{rule=\"per-ip\"}"), 6);
	kit_free(&k);
	munmap(reg, REGION_BYTES);
}

/*
 * A global rule a table can hold is a table of one key on a region
 * (engine.h SHARED STATE): a forked child decides on the parent's count
 * (limit 3: the parent's 1, the child's 2, then refused in both), and a
 * concurrency limit's permit the child holds is not free for the parent
 * (the child exited holding it: a dead process's in-flight permits stay
 * taken, keyed.h).  A sliding log stays
 * per process (sluice_rule_per_process).
 */
Test(engine_region, global_rule_shared_across_fork)
{
	static const char yaml[] =
		"rules:\n"
		"  - id: all\n"
		"    match: { path: /a }\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n"
		"  - id: one-at-a-time\n"
		"    match: { path: /b }\n"
		"    limit: { algorithm: concurrency, max_inflight: 1 }\n";
	void *reg = region_map();
	struct kit k;
	kit_new_region(&k, reg, REGION_BYTES);
	load_ok(&k, yaml);
	sluice_verdict_t v;
	cr_assert_eq(decide(&k, "GET", "/a", NULL, NULL, NULL, &v), SLUICE_ACTION_PASS);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		sluice_request_t a = { .method = "GET", .path = "/a" };
		sluice_request_t b = { .method = "GET", .path = "/b" };
		sluice_verdict_t cv;
		int ok = action_of(k.e, &a, &cv) == SLUICE_ACTION_PASS &&
		         action_of(k.e, &a, &cv) == SLUICE_ACTION_PASS &&
		         action_of(k.e, &a, &cv) == SLUICE_ACTION_REJECT;
		ok = ok && action_of(k.e, &b, &cv) == SLUICE_ACTION_PASS;
		_exit(ok ? 0 : 1); /* holds /b's permit */
	}
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %d", st);
	cr_assert_eq(decide(&k, "GET", "/a", NULL, NULL, NULL, &v), SLUICE_ACTION_REJECT,
	             "the child's two did not count for the parent");
	cr_assert_eq(decide(&k, "GET", "/b", NULL, NULL, NULL, &v), SLUICE_ACTION_REJECT,
	             "the child's in-flight permit is not the parent's");
	kit_free(&k);
	munmap(reg, REGION_BYTES);
}

Test(engine_region, per_process_rules)
{
	sluice_rules_t *rules = NULL;
	static const char yaml[] =
		"rules:\n"
		"  - id: log\n"
		"    limit: { algorithm: sliding_log, window: 1s, max_requests: 3 }\n"
		"  - id: fixed\n"
		"    limit: { algorithm: fixed_window, window: 1s, max_requests: 3 }\n"
		"  - id: keyed-log\n"
		"    dimensions: [ip]\n"
		"    limit: { algorithm: token_bucket, rate: 1/s, burst: 2 }\n";
	cr_assert_eq(sluice_rules_load_buffer("t.yaml", yaml, strlen(yaml), NULL, &rules, NULL), 0);
	cr_assert_eq(sluice_rule_per_process(&rules->rules[0]), 1);
	cr_assert_eq(sluice_rule_per_process(&rules->rules[1]), 0);
	cr_assert_eq(sluice_rule_per_process(&rules->rules[2]), 0);
	sluice_rules_free(rules);
}

/* A dimension name longer than an entry holds (a header of 120 bytes):
 * a second engine still finds the first's table (the digest names it)
 * instead of making its own. */
Test(engine_region, long_dimension_name)
{
	char name[121];
	memset(name, 'x', 120);
	name[120] = 0;
	char yaml[512];
	snprintf(yaml, sizeof(yaml),
	         "rules:\n"
	         "  - id: long\n"
	         "    dimensions: [\"header:%s\"]\n"
	         "    limit: { algorithm: fixed_window, window: 1h, max_requests: 2 }\n"
	         "    keys: { capacity: 64 }\n",
	         name);
	void *reg = region_map();
	struct kit a, b;
	kit_new_region(&a, reg, REGION_BYTES);
	kit_new_region(&b, reg, REGION_BYTES);
	load_ok(&a, yaml);
	size_t u = used(&a);
	load_ok(&b, yaml);
	cr_assert_eq(used(&b), u, "the second engine made its own table (%zu bytes more)",
	             used(&b) - u);
	kit_free(&a);
	kit_free(&b);
	munmap(reg, REGION_BYTES);
}

/*
 * engine.h SHARED STATE and FORK: at most SLUICE_ENGINE_HOLDERS engines
 * on a region at once (the next sluice_engine_new fails with
 * SLUICE_EBUSY), and a child forked while every slot is held by a live
 * engine has no slot of its own: its engine refuses decide and load with
 * SLUICE_ELAYOUT instead of deciding on tables it does not hold.  Once
 * one engine is freed, a new one opens again.
 */
Test(engine_region, holders_full)
{
#if defined(__SANITIZE_THREAD__)
	/* fork()'s prepare handler holds every engine's load mutex (engine.h
	 * FORK): 256 at once, past the 64 ThreadSanitizer's deadlock detector
	 * can track (its CHECK fails); the plain and ASan builds run this */
	cr_skip_test("ThreadSanitizer tracks at most 64 locks held at once");
#endif
	void *reg = region_map();
	static struct kit k[SLUICE_ENGINE_HOLDERS];
	for (unsigned i = 0; i < SLUICE_ENGINE_HOLDERS; i++)
		kit_new_region(&k[i], reg, REGION_BYTES);
	char y[512];
	yaml_of(y, sizeof(y), 1000, 64);
	load_ok(&k[0], y);
	sluice_engine_options_t o = { .clock = &k[0].clk, .region = reg,
		                      .region_bytes = REGION_BYTES };
	sluice_engine_t *extra = NULL;
	cr_assert_eq(sluice_engine_new(&o, &extra), SLUICE_EBUSY);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		unsigned char a[4] = { 1, 1, 1, 1 };
		sluice_request_t q = { .method = "GET", .path = "/", .addr = a, .addr_len = 4 };
		sluice_verdict_t v;
		int d = sluice_engine_decide(k[0].e, &q, &v);
		int l = sluice_engine_load_buffer(k[0].e, "y", y, strlen(y), NULL);
		_exit(d == SLUICE_ELAYOUT && l == SLUICE_ELAYOUT ? 0 : 1);
	}
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %d", st);
	sluice_verdict_t v;
	cr_assert_eq(decide(&k[0], "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS,
	             "the parent still decides");
	kit_free(&k[SLUICE_ENGINE_HOLDERS - 1]);
	cr_assert_eq(sluice_engine_new(&o, &extra), 0, "a freed slot is taken again");
	sluice_engine_free(extra);
	for (unsigned i = 0; i + 1 < SLUICE_ENGINE_HOLDERS; i++)
		kit_free(&k[i]);
	munmap(reg, REGION_BYTES);
}
