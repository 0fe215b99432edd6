/* SPDX-License-Identifier: MIT */
/*
 * fuzz_keyed_acquire.c - a valid keyed table (sluice/keyed.h), driven by a
 * sequence of acquires and releases with fuzzed keys, permits and readings.
 *
 * The input makes the table (fuzz_keyed.h: any algorithm and policy, 8..32
 * slots so groups fill, hostile parameters when init takes them), then up to
 * 512 operations, each: what (acquire_at with or without a decision, or the
 * same request twice in one sluice_keyed_acquire_many_at; release, stats),
 * the key (one of 24 short or long ones, so keys come back,
 * collide in groups, get evicted and reclaimed; sometimes empty or longer
 * than key_max), n (0, small, or hostile) and the reading (a step forward, a
 * step back, or a hostile absolute time: 0, just below 2^62 where the table
 * stops, 2^64 - 1).
 *
 * The oracle, besides no crash, no hang (libFuzzer's -timeout) and no
 * undefined behaviour:
 *   - every return is documented: 1, 0 or a code of the error table, and a
 *     decision, when asked for, says allowed exactly when 1 came back;
 *   - FIXED under REJECT or ALLOW (nothing evicted; reclaim is lossless):
 *     no key has more than L permits admitted in one aligned window
 *     (keyed.h GUARANTEE), windows taken from d->now_ns (the time the table
 *     used);
 *   - WINDOW likewise: at most L in any N consecutive buckets of W/N;
 *   - INFLIGHT: the table never holds more than K for a key, and a release
 *     succeeds exactly when the key holds at least that many (held counted
 *     here from the returns).
 * Untracked passes (ALLOW, d->limit = 0) are not counted against a key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_keyed.h"

#define OPS_MAX 512
#define NKEYS 24

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct adm {
	uint32_t key;
	uint64_t slot; /* window or bucket index of d->now_ns */
	uint64_t n;
};

static struct adm adms[2 * OPS_MAX]; /* a batch admits twice */
static uint64_t held[NKEYS];

/* key @id of @len bytes: its bytes are a function of id alone */
static size_t make_key(unsigned char *buf, unsigned id, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(id * 37 + i * (id + 1));
	return len;
}

static void check_windows(const sluice_keyed_config_t *c, size_t nadm, uint64_t span)
{
	/* the admissions of each key in every run of @span slots: O(n^2) on
	 * at most 512, fine for a fuzz target */
	for (size_t i = 0; i < nadm; i++) {
		uint64_t sum = 0;
		for (size_t j = 0; j < nadm; j++)
			if (adms[j].key == adms[i].key && adms[j].slot <= adms[i].slot &&
			    adms[i].slot - adms[j].slot < span)
				sum += adms[j].n;
		FUZZ_CHECK(sum <= c->limit,
		           "algo %d: key %u holds %llu in the %llu slots ending at %llu, limit %llu",
		           (int)c->algo, adms[i].key, (unsigned long long)sum,
		           (unsigned long long)span, (unsigned long long)adms[i].slot,
		           (unsigned long long)c->limit);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_in_t in = { data, size };
	fuzz_table_t t;
	FUZZ_CHECK(fuzz_keyed_table(&in, &t) == 0, "the default configuration failed");
	const sluice_keyed_config_t *c = &t.cfg;
	sluice_clock_t clk;
	sluice_clock_manual_init(&clk, 0);
	sluice_keyed_t k;
	int rc = sluice_keyed_attach(t.mem, t.size, &clk, &k);
	FUZZ_CHECK(rc == 0, "attach to a table init made: %s", sluice_err_name(rc));

	/* FUZZ_TRACE=1 in the environment: print every operation (to read a
	 * reproducer: fuzz_keyed_acquire corpus/keyed_acquire/crash-...) */
	static int trace = -1;
	if (trace < 0)
		trace = getenv("FUZZ_TRACE") != NULL;
	if (trace)
		fprintf(stderr,
		        "table: algo %d policy %d capacity %llu key_max %u flags %u rate %llu "
		        "period %llu burst %llu depth %llu limit %llu window %llu buckets %u%s\n",
		        (int)c->algo, (int)c->policy, (unsigned long long)c->capacity, c->key_max,
		        c->flags, (unsigned long long)c->rate, (unsigned long long)c->period_ns,
		        (unsigned long long)c->burst, (unsigned long long)c->depth,
		        (unsigned long long)c->limit, (unsigned long long)c->window_ns, c->buckets,
		        t.fuzzed ? "" : " (defaults)");
	int counted = c->policy != SLUICE_KEYED_EVICT;
	uint64_t width = c->algo == SLUICE_ALGO_WINDOW ? c->window_ns / c->buckets : c->window_ns;
	size_t nadm = 0;
	uint64_t now = 0;
	memset(held, 0, sizeof(held));
	for (int op = 0; op < OPS_MAX && in.n > 0; op++) {
		uint8_t what = fuzz_u8(&in), kb = fuzz_u8(&in), nb = fuzz_u8(&in), tb = fuzz_u8(&in);
		unsigned id = kb % NKEYS;
		unsigned char key[SLUICE_KEYED_KEY_MAX + 16];
		size_t keylen;
		switch (kb / NKEYS % 8) {
		case 0:
			keylen = 0; /* SLUICE_EKEYLEN */
			break;
		case 1:
			keylen = sizeof(key); /* longer than any key_max: hashed or EKEYLEN */
			break;
		default:
			keylen = 1 + id % 8; /* a key's length is its own: it comes back */
			break;
		}
		if (keylen == 0 || keylen == sizeof(key))
			id = NKEYS; /* not one of the tracked keys */
		make_key(key, id, keylen);
		uint64_t n = nb == 0 ? 0 : nb == 255 ? fuzz_hostile(&in) : 1 + nb % 6;
		switch (tb % 4) {
		case 0:
			now += fuzz_bytes(&in, 2) * (1ULL << (tb / 4 % 40));
			break;
		case 1:
			now -= fuzz_bytes(&in, 2) * (1ULL << (tb / 4 % 40));
			break;
		case 2:
			now = fuzz_hostile(&in);
			break;
		default:
			break; /* the same instant again */
		}
		sluice_decision_t d;
		memset(&d, 0x77, sizeof(d));
		switch (what % 5) {
		case 0:
		case 1:
		case 2: {
			/* one call, or (what / 5 odd) the same request twice in
			 * one sluice_keyed_acquire_many_at: decided in order, as
			 * two calls, each checked as one */
			sluice_decision_t d2;
			memset(&d2, 0x77, sizeof(d2));
			sluice_decision_t *dp = what % 5 == 2 ? NULL : &d;
			int rcs[2], calls = 1;
			if (what / 5 % 2) {
				sluice_keyed_request_t req[2] = {
					{ .table = &k, .key = key, .keylen = keylen, .n = n, .d = dp },
					{ .table = &k, .key = key, .keylen = keylen, .n = n,
					  .d = dp ? &d2 : NULL },
				};
				rc = sluice_keyed_acquire_many_at(req, 2, now, 0);
				FUZZ_CHECK(rc == SLUICE_ETIME ||
				           rc == (req[0].result == 1) + (req[1].result == 1),
				           "a batch returned %d for %d and %d", rc, req[0].result,
				           req[1].result);
				if (rc == SLUICE_ETIME)
					rcs[0] = rc;
				else
					rcs[0] = req[0].result, rcs[1] = req[1].result, calls = 2;
			} else {
				rcs[0] = sluice_keyed_acquire_at(&k, key, keylen, n, now, dp);
			}
			for (int call = 0; call < calls; call++) {
				sluice_decision_t *cd = call == 0 ? dp : dp ? &d2 : NULL;
				rc = rcs[call];
				if (trace)
					fprintf(stderr,
					        "acquire key %u len %zu n %llu at %llu: %d (%s) now_ns %llu "
					        "limit %llu remaining %llu\n",
					        id, keylen, (unsigned long long)n, (unsigned long long)now, rc,
					        rc < 0 ? sluice_err_name(rc) : rc ? "admitted" : "refused",
					        cd ? (unsigned long long)cd->now_ns : 0ULL,
					        cd ? (unsigned long long)cd->limit : 0ULL,
					        cd ? (unsigned long long)cd->remaining : 0ULL);
				FUZZ_CHECK(fuzz_known_rc(rc), "acquire returned %d", rc);
				if (cd && (rc == 0 || rc == 1))
					FUZZ_CHECK(cd->allowed == (rc == 1), "acquire %d with allowed = %d", rc,
					           (int)cd->allowed);
				if (rc != 1 || id >= NKEYS)
					continue; /* only admissions for a key we know */
				if (c->algo == SLUICE_ALGO_INFLIGHT) {
					/* REJECT only: every admission is held by the key */
					held[id] += n;
					FUZZ_CHECK(held[id] <= c->limit, "key %u holds %llu of %llu", id,
					           (unsigned long long)held[id], (unsigned long long)c->limit);
				} else if (cd && cd->limit != 0 && counted && nadm < 2 * OPS_MAX &&
				           (c->algo == SLUICE_ALGO_FIXED || c->algo == SLUICE_ALGO_WINDOW)) {
					adms[nadm++] = (struct adm){ .key = id, .slot = cd->now_ns / width,
						                     .n = n };
				}
			}
			break;
		}
		case 3:
			rc = sluice_keyed_release(&k, key, keylen, n);
			if (trace)
				fprintf(stderr, "release key %u len %zu n %llu: %d (%s)\n", id, keylen,
				        (unsigned long long)n, rc, rc < 0 ? sluice_err_name(rc) : "given back");
			FUZZ_CHECK(fuzz_known_rc(rc) && rc != 1, "release returned %d", rc);
			if (c->algo == SLUICE_ALGO_INFLIGHT && id < NKEYS && n >= 1) {
				/* given back exactly when the key holds that many */
				FUZZ_CHECK((rc == 0) == (n <= held[id]),
				           "key %u holds %llu: release of %llu: %s", id,
				           (unsigned long long)held[id], (unsigned long long)n,
				           sluice_err_name(rc));
				if (rc == 0)
					held[id] -= n;
			}
			break;
		default: {
			sluice_keyed_stats_t s;
			rc = sluice_keyed_stats(&k, &s);
			FUZZ_CHECK(rc == 0, "stats: %d", rc);
			FUZZ_CHECK(s.capacity == k.capacity, "stats: capacity %llu",
			           (unsigned long long)s.capacity);
			break;
		}
		}
	}
	if (c->algo == SLUICE_ALGO_FIXED)
		check_windows(c, nadm, 1);
	else if (c->algo == SLUICE_ALGO_WINDOW)
		check_windows(c, nadm, c->buckets);
	fuzz_table_free(&t);
	return 0;
}
