/* SPDX-License-Identifier: MIT */
/*
 * test_engine_faults.c - the engine against what it cannot trust or did
 * not say (issue 22 R1, R8): the shared region's header rewritten by
 * another process after open, and requests whose key is empty or absent
 * (the rule's empty_key).
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "test_engine_common.h"

TestSuite(engine_faults, .timeout = 120);

/* ---- the region's header, rewritten after open (R1) -------------- */

#define REGION_BYTES (4u << 20)
/* The header's words as reload.c lays them out: magic, version, slots,
 * bytes, data_off, used.  The tests write them as another process would. */
enum { H_MAGIC, H_VERSION, H_SLOTS, H_BYTES, H_DATA_OFF, H_USED };

static const char one_table[] =
	"rules:\n"
	"  - id: per-ip\n"
	"    dimensions: [ip]\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n"
	"    keys: { capacity: 64 }\n";

/* one_table and a rule that needs a new table */
static const char two_tables[] =
	"rules:\n"
	"  - id: per-ip\n"
	"    dimensions: [ip]\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n"
	"    keys: { capacity: 64 }\n"
	"  - id: per-user\n"
	"    dimensions: [user]\n"
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n"
	"    keys: { capacity: 64 }\n";

static void *region_map(size_t bytes)
{
	void *reg = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(reg, MAP_FAILED);
	return reg;
}

/* An engine on a new region with one_table loaded and 1.1.1.1's three
 * permits spent. */
static void spent_engine(struct kit *k, void *reg)
{
	kit_new_region(k, reg, REGION_BYTES);
	load_ok(k, one_table);
	sluice_verdict_t v;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(decide(k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide(k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT);
}

/* The rules in force are still one_table's, with 1.1.1.1's state: its
 * table was neither replaced nor formatted over. */
static void old_rules_in_force(struct kit *k)
{
	sluice_verdict_t v;
	cr_assert_eq(decide(k, "GET", "/", NULL, "1.1.1.1", NULL, &v), SLUICE_ACTION_REJECT,
	             "1.1.1.1's spent state is gone: a table was laid over it");
	cr_assert_eq(v.version, 1);
	cr_assert_eq(v.nrules, 1);
	cr_assert_str_eq(v.rules[0].id, "per-ip");
	cr_assert_eq(decide(k, "GET", "/", NULL, "2.2.2.2", NULL, &v), SLUICE_ACTION_PASS);
}

/* Spend 1.1.1.1's permits on a new region, @rewrite its header as another
 * process would, then load a file that needs a new table: the load must
 * fail at that rule (line 6), naming the region header, with the rules
 * in force and 1.1.1.1's state intact. */
static void rewritten_refused(void (*rewrite)(uint64_t *h, int arg), int arg)
{
	void *reg = region_map(REGION_BYTES);
	struct kit k;
	spent_engine(&k, reg);
	rewrite(reg, arg);
	cr_assert_eq(load_refused(&k, two_tables, 1, 6, "region header"), SLUICE_ELAYOUT,
	             "rewrite %d", arg);
	old_rules_in_force(&k);
	kit_free(&k);
	munmap(reg, REGION_BYTES);
}

/* far past the region: the old code put the new table at base +
 * data_off + used (a SIGSEGV) */
static void data_off_far(uint64_t *h, int arg)
{
	(void)arg;
	h[H_DATA_OFF] = UINT64_C(1) << 62;
}

/* in range, the next table over the first (data_off - used): the old
 * code formatted it there, wiping 1.1.1.1's state */
static void data_off_overlapping(uint64_t *h, int arg)
{
	(void)arg;
	cr_assert_gt(h[H_USED], 0);
	h[H_DATA_OFF] -= h[H_USED];
}

/* the bump offset moved back: it only grows, so a value below what this
 * engine has seen is a rewrite (the next table would land on the first) */
static void used_back(uint64_t *h, int arg)
{
	(void)arg;
	h[H_USED] = 0;
}

static void word_flipped(uint64_t *h, int w)
{
	h[w] ^= UINT64_C(0x0101010101010101);
}

Test(engine_faults, region_data_off_out_of_range)
{
	rewritten_refused(data_off_far, 0);
}

Test(engine_faults, region_data_off_overlapping)
{
	rewritten_refused(data_off_overlapping, 0);
}

Test(engine_faults, region_used_moved_back)
{
	rewritten_refused(used_back, 0);
}

/* every other header word, one at a time */
Test(engine_faults, region_header_words)
{
	for (int w = H_MAGIC; w <= H_BYTES; w++)
		rewritten_refused(word_flipped, w);
}

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64: a fixed seed makes every run the same */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/*
 * Random writes into the header and the directory (as another process,
 * hostile or buggy, would make), then loads that need new tables, in this
 * engine and in a second one opened on the region afterwards.  Whatever
 * the bytes: no crash (and no sanitizer report in the ASan/UBSan build),
 * every load either publishes or fails with the rules in force kept, and
 * decisions go on.  The old code crashed here (SIGSEGV, UBSan: pointer
 * overflow in reload.c) when a write hit data_off.
 */
Test(engine_faults, region_random_writes)
{
	const size_t bytes = 1u << 20; /* the smallest region */
	const size_t dir_end = 64 + (size_t)SLUICE_ENGINE_DIR_SLOTS * 256;
	uint64_t seed = 22;
	void *reg = region_map(bytes);
	for (int it = 0; it < 150; it++) {
		memset(reg, 0, bytes);
		struct kit k;
		kit_new_region(&k, reg, bytes);
		load_ok(&k, one_table);
		sluice_verdict_t v;
		decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v);
		unsigned char *p = reg;
		int writes = 1 + (int)(rng_next(&seed) % 8);
		for (int i = 0; i < writes; i++) {
			uint64_t r = rng_next(&seed);
			/* half into the 64-byte header, half into the directory */
			size_t at = (r & 1) ? (size_t)((r >> 1) % 64) : (size_t)((r >> 1) % dir_end);
			p[at] = (unsigned char)(r >> 56);
		}
		int rc = sluice_engine_load_buffer(k.e, "t.yaml", two_tables, strlen(two_tables),
		                                   NULL);
		cr_assert(rc >= 0 || rc == SLUICE_ENOMEM, "iteration %d: load %d", it, rc);
		decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v);
		cr_assert_eq(v.version, rc == 0 ? 2u : 1u, "iteration %d", it);
		/* a second engine opened after the writes: refused, or it
		 * loads and decides on what it finds */
		sluice_engine_options_t o = { .clock = &k.clk, .region = reg, .region_bytes = bytes };
		sluice_engine_t *e2 = NULL;
		if (sluice_engine_new(&o, &e2) == 0) {
			rc = sluice_engine_load_buffer(e2, "t.yaml", two_tables, strlen(two_tables),
			                               NULL);
			cr_assert(rc >= 0 || rc == SLUICE_ENOMEM, "iteration %d: second load %d", it,
			          rc);
			unsigned char a[4] = { 1, 1, 1, 1 };
			sluice_request_t q = { .method = "GET", .path = "/", .addr = a, .addr_len = 4,
				               .user = "u", .user_len = 1 };
			cr_assert_eq(sluice_engine_decide(e2, &q, &v), 0);
			sluice_engine_free(e2);
		}
		kit_free(&k);
	}
	munmap(reg, bytes);
}

/* ---- empty and absent keys (R8: one policy, engine.h DECIDE) ------ */

static const char *hdr_value; /* NULL: no such header */

static const void *lookup_hdr(void *ctx, sluice_lookup_kind_t kind, const char *name, size_t *len)
{
	(void)ctx;
	(void)name;
	if (kind != SLUICE_LOOKUP_HEADER || !hdr_value)
		return NULL;
	*len = strlen(hdr_value);
	return hdr_value;
}

/* A GET / from @ip with header value @value (NULL: none) and, unless
 * NULL, user @user. */
static int decide_hdr_user(struct kit *k, const char *ip, const char *value, const char *user,
                           sluice_verdict_t *v)
{
	unsigned char a[4];
	cr_assert_eq(inet_pton(AF_INET, ip, a), 1);
	hdr_value = value;
	sluice_request_t q = { .method = "GET", .path = "/", .addr = a, .addr_len = 4,
		               .user = user, .user_len = user ? strlen(user) : 0,
		               .lookup = lookup_hdr };
	int rc = sluice_engine_decide(k->e, &q, v);
	cr_assert_eq(rc, 0);
	return (int)v->action;
}

static int decide_hdr(struct kit *k, const char *ip, const char *value, sluice_verdict_t *v)
{
	return decide_hdr_user(k, ip, value, NULL, v);
}

#define KEYED_RULE(extra)                                                        \
	"rules:\n"                                                               \
	"  - id: per-key\n"                                                      \
	"    dimensions: [ip, header:x-api-key]\n"                                \
	"    limit: { algorithm: fixed_window, window: 1h, max_requests: 2 }\n"   \
	"    keys: { capacity: 64 }\n" extra

/* shared (the default, and written out): an absent header and an empty
 * one are one key, shared by every such request of the rule, so leaving
 * the header out (or sending it empty) evades nothing. */
Test(engine_faults, empty_key_shared)
{
	const char *files[] = { KEYED_RULE(""), KEYED_RULE("    empty_key: shared\n") };
	for (int f = 0; f < 2; f++) {
		struct kit k;
		kit_load(&k, files[f]);
		sluice_verdict_t v;
		cr_assert_eq(decide_hdr(&k, "1.1.1.1", NULL, &v), SLUICE_ACTION_PASS);
		cr_assert_eq(decide_hdr(&k, "2.2.2.2", "", &v), SLUICE_ACTION_PASS);
		/* the header's table: absent and empty took its shared key's 2 */
		cr_assert_eq(decide_hdr(&k, "3.3.3.3", NULL, &v), SLUICE_ACTION_REJECT, "file %d", f);
		cr_assert_eq(v.rules[0].dim, 1, "refused by the header's dimension");
		cr_assert_eq(decide_hdr(&k, "4.4.4.4", "", &v), SLUICE_ACTION_REJECT);
		/* a real value is its own key */
		cr_assert_eq(decide_hdr(&k, "5.5.5.5", "K1", &v), SLUICE_ACTION_PASS);
		kit_free(&k);
	}
}

/* pass: a request with an empty or absent key is not limited by the rule
 * (nginx limit_req's behaviour): outcome skipped, nothing taken from any
 * of its dimensions (the ip's key is not charged either). */
Test(engine_faults, empty_key_pass)
{
	struct kit k;
	kit_load(&k, KEYED_RULE("    empty_key: pass\n"));
	sluice_verdict_t v;
	for (int i = 0; i < 10; i++) {
		cr_assert_eq(decide_hdr(&k, "1.1.1.1", i % 2 ? "" : NULL, &v), SLUICE_ACTION_PASS,
		             "request %d", i);
		cr_assert_eq(v.nrules, 1);
		cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_SKIPPED);
		cr_assert_str_eq(sluice_outcome_name(v.rules[0].outcome), "skipped");
	}
	/* 1.1.1.1 with a key: its ip key still has both permits */
	cr_assert_eq(decide_hdr(&k, "1.1.1.1", "K1", &v), SLUICE_ACTION_PASS);
	cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_PASSED);
	cr_assert_eq(decide_hdr(&k, "1.1.1.1", "K2", &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide_hdr(&k, "1.1.1.1", "K3", &v), SLUICE_ACTION_REJECT);
	cr_assert_eq(v.rules[0].dim, 0, "refused by the ip's dimension");
	kit_free(&k);
}

/* pass with on_error: allow: each dimension is asked with its own key,
 * even after an earlier one failed open.  A header longer than key_max (4)
 * is a limiter error, allowed; the ip (4 bytes) must still be limited by
 * its own key.  (Once the ip was asked with the header's key, EKEYLEN
 * again, and never limited: engine.c take_state().) */
Test(engine_faults, empty_key_pass_each_dimension_its_own_key)
{
	struct kit k;
	kit_load(&k, "rules:\n"
	             "  - id: per-key\n"
	             "    dimensions: [header:x-api-key, ip]\n"
	             "    limit: { algorithm: fixed_window, window: 1h, max_requests: 2 }\n"
	             "    keys: { capacity: 64, key_max: 4 }\n"
	             "    empty_key: pass\n"
	             "    on_error: allow\n");
	sluice_verdict_t v;
	cr_assert_eq(decide_hdr(&k, "1.1.1.1", "a-key-too-long", &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide_hdr(&k, "1.1.1.1", "a-key-too-long", &v), SLUICE_ACTION_PASS);
	cr_assert_eq(decide_hdr(&k, "1.1.1.1", "a-key-too-long", &v), SLUICE_ACTION_REJECT,
	             "the ip's own key has had its 2");
	cr_assert_eq(v.rules[0].dim, 1, "refused by the ip's dimension");
	kit_free(&k);
}

/* on_error: allow over a rule's dimensions, then a later rule's refusal:
 * what the first rule took is given back to the key that took it.  The
 * header (longer than key_max) fails open, the ip is admitted; the
 * per-user rule refuses the second request of "u", and the ip's permit
 * goes back, so the ip (2 an hour) still admits the third request.  (Given
 * back to the header's key instead, the refund fails and the third request
 * is refused by the ip.) */
Test(engine_faults, an_open_error_then_a_refusal_gives_back_the_right_key)
{
	struct kit k;
	kit_load(&k, "rules:\n"
	             "  - id: per-key\n"
	             "    dimensions: [header:x-api-key, ip]\n"
	             "    limit: { algorithm: fixed_window, window: 1h, max_requests: 2 }\n"
	             "    keys: { capacity: 64, key_max: 4 }\n"
	             "    on_error: allow\n"
	             "  - id: per-user\n"
	             "    dimensions: [user]\n"
	             "    limit: { algorithm: fixed_window, window: 1h, max_requests: 1 }\n"
	             "    keys: { capacity: 64 }\n");
	sluice_verdict_t v;
	cr_assert_eq(decide_hdr_user(&k, "1.1.1.1", "a-key-too-long", "u", &v), SLUICE_ACTION_PASS);
	cr_assert_eq(v.rules[0].outcome, SLUICE_OUTCOME_ERROR_OPEN);
	cr_assert_eq(decide_hdr_user(&k, "1.1.1.1", "a-key-too-long", "u", &v), SLUICE_ACTION_REJECT);
	cr_assert_eq(v.refused_by, 1, "refused by the per-user rule");
	cr_assert_eq(decide_hdr_user(&k, "1.1.1.1", "a-key-too-long", "w", &v), SLUICE_ACTION_PASS,
	             "the ip's second permit was given back");
	cr_assert_eq(decide_hdr_user(&k, "1.1.1.1", "a-key-too-long", "x", &v), SLUICE_ACTION_REJECT,
	             "the ip has had its 2");
	cr_assert_eq(v.refused_by, 0);
	cr_assert_eq(v.rules[0].dim, 1, "refused by the ip's dimension");
	kit_free(&k);
}

/* The option's errors: an unknown value, and a rule with no key. */
Test(engine_faults, empty_key_errors)
{
	struct kit k;
	kit_new(&k);
	load_refused(&k, KEYED_RULE("    empty_key: drop\n"), 1, 6,
	             "empty_key: unknown value 'drop' (expected shared, pass)");
	load_refused(&k,
	             "rules:\n"
	             "  - id: all\n"
	             "    limit: { algorithm: fixed_window, window: 1h, max_requests: 2 }\n"
	             "    empty_key: pass\n",
	             1, 4, "empty_key");
	kit_free(&k);
}

/* ---- the memory budget at load (R6) -------------------------------- */

/* An engine's budget refuses a file before its tables are allocated: the
 * load fails at the crossing rule and the rules in force stay. */
Test(engine_faults, load_over_the_budget)
{
	struct kit k;
	sluice_clock_manual_init(&k.clk, 1000 * SEC);
	sluice_engine_options_t o = { .clock = &k.clk, .memory_budget = 4u << 20 };
	cr_assert_eq(sluice_engine_new(&o, &k.e), 0);
	load_ok(&k, one_table);
	static const char big[] =
		"rules:\n"
		"  - id: per-ip\n"
		"    dimensions: [ip]\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n"
		"    keys: { capacity: 64 }\n"
		"  - id: wide\n"
		"    dimensions: [user]\n"
		"    limit: { algorithm: fixed_window, window: 1h, max_requests: 3 }\n"
		"    keys: { capacity: 1000000 }\n";
	cr_assert_eq(load_refused(&k, big, 1, 6, "over the memory budget of 4194304 bytes"),
	             SLUICE_EMEMORY);
	sluice_verdict_t v;
	decide(&k, "GET", "/", NULL, "1.1.1.1", NULL, &v);
	cr_assert_eq(v.version, 1);
	sluice_engine_info_t in;
	sluice_engine_info(k.e, &in);
	cr_assert_eq(in.failed_loads, 1);
	kit_free(&k);
}
