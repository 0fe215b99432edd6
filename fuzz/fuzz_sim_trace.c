/* SPDX-License-Identifier: MIT */
/*
 * fuzz_sim_trace.c - sluice-sim's trace parser (tools/sim/trace.c,
 * sim_trace_parse: the code the tool runs on a file, fed a buffer), then a
 * short run of the parsed trace.
 *
 * The input is the trace text itself, any bytes.  The oracle:
 *   - a failure leaves nothing (t zeroed) and a message that names the
 *     input ("fuzz:" ...), NUL-terminated inside the error buffer;
 *   - a success holds 1.. requests sorted by time, each with 1.. permits
 *     and a key id below the key count, keys of 1..SIM_KEY_MAX bytes;
 *   - the span (sim_trace_span) is the first to the last time, or an error
 *     only for a trace from 0 to 2^64 - 1;
 *   - a run of the trace (fixed window, one limiter per key, and the leaky
 *     shaper, whose slots lie past the run) with a bin width from the span
 *     and a cap of 4096 bins and 4096 requests either fails with a message
 *     or offers every request once (admitted + rejected = offered = n),
 *     with the bins inside the cap: times near 2^64 included.
 * AddressSanitizer checks every byte the parser and the run touch, and
 * LeakSanitizer that a failure frees what it had.
 */
#include <string.h>

#include "fuzz_input.h"
#include "sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void run_one(const sim_trace_t *t, uint64_t start, uint64_t duration, const char *spec,
                    int per_key)
{
	sim_algo_t a;
	char err[256];
	FUZZ_CHECK(sim_algo_parse(spec, 10, SIM_SEC, &a, err, sizeof(err)) == 0, "%s: %s", spec,
	           err);
	sim_run_config_t rc = {
		.traffic = { .profile = SIM_TRACE, .start_ns = start, .duration_ns = duration,
			     .permits = 1, .seed = 1, .trace = t },
		.bin_ns = duration / 64 + 1,
		.per_key = per_key,
		.max_events = 4096,
		.max_bins = 4096,
	};
	sim_result_t r;
	memset(err, 0x5a, sizeof(err));
	if (sim_run(&rc, &a, &r, err, sizeof(err)) != 0) {
		FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0',
		           "a failed run without a message");
		FUZZ_CHECK(r.adm == NULL && r.bin_offered == NULL, "a failed run kept its result");
		return;
	}
	FUZZ_CHECK(r.offered == t->n && r.admitted + r.rejected == r.offered,
	           "%s: offered %llu of %zu, admitted %llu + rejected %llu", spec,
	           (unsigned long long)r.offered, t->n, (unsigned long long)r.admitted,
	           (unsigned long long)r.rejected);
	FUZZ_CHECK(r.nbins <= rc.max_bins, "%zu bins", r.nbins);
	uint64_t offered = 0;
	for (size_t b = 0; b < r.nbins; b++)
		offered += r.bin_offered[b];
	uint64_t permits = 0;
	for (size_t i = 0; i < t->n; i++)
		permits += t->ev[i].n;
	FUZZ_CHECK(offered == permits, "bins hold %llu permits of %llu", (unsigned long long)offered,
	           (unsigned long long)permits);
	sim_sort_events(r.adm, r.nadm);
	(void)sim_worst_in(r.adm, r.nadm, SIM_SEC);
	sim_result_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sim_trace_t t;
	char err[256];
	memset(err, 0x5a, sizeof(err));
	if (sim_trace_parse((const char *)data, size, "fuzz", &t, err, sizeof(err)) != 0) {
		FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL, "error message not terminated");
		FUZZ_CHECK(strncmp(err, "fuzz:", 5) == 0, "message does not name the input: %s", err);
		FUZZ_CHECK(t.ev == NULL && t.keys == NULL && t.n == 0, "a failed parse kept data");
		return 0;
	}
	FUZZ_CHECK(t.n >= 1 && t.nkeys >= 1, "%zu requests, %zu keys", t.n, t.nkeys);
	for (size_t i = 0; i < t.n; i++) {
		FUZZ_CHECK(t.ev[i].n >= 1, "request %zu: 0 permits", i);
		FUZZ_CHECK(t.ev[i].key < t.nkeys, "request %zu: key %u of %zu", i, t.ev[i].key,
		           t.nkeys);
		FUZZ_CHECK(i == 0 || t.ev[i - 1].t <= t.ev[i].t, "request %zu out of order", i);
	}
	for (size_t k = 1; k < t.nkeys; k++) {
		size_t kl = strlen(t.keys[k]);
		FUZZ_CHECK(kl >= 1 && kl <= SIM_KEY_MAX, "key %zu: %zu bytes", k, kl);
	}
	uint64_t start, duration;
	if (sim_trace_span(&t, "fuzz", &start, &duration, err, sizeof(err)) != 0) {
		FUZZ_CHECK(t.ev[0].t == 0 && t.ev[t.n - 1].t == UINT64_MAX,
		           "span refused: %s", err);
	} else {
		FUZZ_CHECK(start == t.ev[0].t && duration - 1 == t.ev[t.n - 1].t - start,
		           "span %llu + %llu", (unsigned long long)start,
		           (unsigned long long)duration);
		if (t.n <= 4096) {
			run_one(&t, start, duration, "fixed", 1);
			run_one(&t, start, duration, "leaky:mode=shaper", 0);
		}
	}
	sim_trace_free(&t);
	return 0;
}
