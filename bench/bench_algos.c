/* SPDX-License-Identifier: MIT */
/*
 * bench_algos.c - decisions per second for every algorithm on ONE hot key,
 * at 1 thread, 2 threads and threads = online CPUs, in three regimes, each
 * beside lock-based baselines of the same algorithm run in the same process.
 *
 * Regimes (n = 1 per decision, decision struct filled, as a server would):
 *   allow  limits far above what the threads can offer: every decision
 *          takes the admission path (the table shows the admitted share).
 *   deny   the limit is used up at once (1 permit, or every in-flight slot
 *          held): almost every decision is a refusal.
 *   near   the limit is half of what this very series offered in its allow
 *          runs at this thread count, over short windows (10 ms to 100 ms):
 *          the budget is always nearly spent, about half the decisions are
 *          admitted, and leases shrink to single permits.
 *          In-flight has no rate: near means K = 1 slot (every admission
 *          fills it; with 2+ threads they fight for it).
 *
 * Baselines, the shape typical published implementations have (lock, read
 * the clock, check, update, unlock), with plain arithmetic inside:
 *   mutex         pthread mutex, clock_gettime(CLOCK_MONOTONIC).  vs_mutex
 *                 is relative to this one.
 *   mutex_cached  the same mutex reading sluice's cached clock, so the
 *                 table separates what the lock costs from what the clock
 *                 costs; vs_mutex_cached is relative to it.
 *   spin          ck_spinlock_fas, CLOCK_MONOTONIC.
 * Plain baselines: fixed window, bucket ring (sums N buckets per decision,
 * as most published sliding windows do), GCRA (also the leaky meter's: the
 * header shows they decide alike), sliding log (a ring of timestamps),
 * in-flight counter, ring + GCRA under one lock for the composite.  Warm-up
 * and decay baselines call sluice's own _at function inside the lock (no
 * plain rewrite): their baseline pays one uncontended atomic more than a
 * plain one would, so their vs_mutex is flattered by a few ns.
 *
 * sluice series read the cached clock (the default; ticker at 1 ms), except
 * warm-up: it admits at most one request per clock reading (warmup.h), so
 * it refuses an interval below the cached clock's 1 ms step, and its
 * series reads CLOCK_MONOTONIC, as do its mutex and spin baselines; its
 * mutex_cached baseline is not run (it would time refusals).
 *
 * Threads are pinned round-robin to the online CPUs (a worker per core, as
 * gateways run).  ns_per_decision is what one caller pays: threads x wall
 * time / decisions.  decisions_per_sec is the aggregate.  scaling is the
 * aggregate over the same series' 1-thread aggregate.
 *
 * Method: each timed run is --seconds (default 0.5) of all threads deciding
 * in batches, with a fresh limiter; --repeats runs per case (default 3),
 * interleaved across series so a slow phase of the VM hits all alike;
 * medians reported.  Options: --quick (1 run of 0.1 s), --threads=1,2,4
 * (any list of up to 16 counts, each up to 256, starting with 1: for
 * machines with more cores than this one; bench_common.h parses it for
 * bench_keyed and bench_rules too, and bench/scaling.sh runs them all at
 * 1, 2, 4, ... CPUs), --algos=fixed,ring-exact,...
 * (a subset), --regimes=allow,deny,near, --table (the human table only).
 *
 * Output (docs/performance.md describes every field): a `bench_env` line
 * first (the CPU model from /proc/cpuinfo, the online CPUs, the thread
 * counts, the runs, the clocks each kind of series reads), then one
 * `bench` line per series, thread count and regime, then the tables.
 * The first series is the floor, `rmw`: one uncontended atomic
 * read-modify-write (a fetch_add on a line of each thread's own); every
 * sluice series' 1-thread line carries vs_rmw, its ns per decision over
 * the probe's, from the same run.  Three more probes on the same line
 * show the floor of a decision's shape: fetch_add+fill (the RMW and the
 * seven stores of an admitted decision), cas (a load and a CAS), cas+fill.
 * Series whose mode ends in "call" (fixed-exact/call, gcra-call, ...) are
 * the same loops built without SLUICE_INLINE (bench_algos_call.c): the
 * default, out-of-line calls beside the inline series above them, on the
 * same limiters (common.h, INLINE).
 * Nothing here asserts speed.
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ck_spinlock.h>

#include "sluice/sluice.h"

#include "bench_algos_call.h"
#include "bench_common.h"
#include "decide_loop.h"

#define MS 1000000ULL
#define SEC 1000000000ULL
#define BUCKETS 10u
#define LEASE 1024u      /* the lease cap B of the exact-lease series */
#define LEASE_SMALL 64u  /* and of exact-lease64, to show what B costs */
#define MAX_THREADS BENCH_MAX_THREADS /* per run; any list of counts up to it */
#define MAX_COUNTS BENCH_MAX_COUNTS   /* thread counts per --threads list */

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_algos: %s failed: %s\n", what, sluice_strerror(rc));
	exit(1);
}

enum regime { ALLOW, DENY, NEAR, NREGIMES };
static const char *regime_name[] = { "allow", "deny", "near" };

/*
 * What a series is set up with, derived from the regime: a rate per second
 * and a window (or half-life) for the rate limiters, K for in-flight.
 */
struct params {
	uint64_t rate;      /* permits per second (rate-like algorithms) */
	uint64_t interval;  /* whole ns per permit, about 1e9 / rate */
	uint64_t window_ns; /* W for windows and logs; 1/rate scale for GCRA */
	uint64_t limit;     /* permits per W (windows, log), K (in-flight) */
};

/* ---- plain baselines: the caller holds the lock --------------------------- */

struct base_fixed {
	uint64_t limit, window_ns, start, count;
};

static int base_fixed_decide(struct base_fixed *b, uint64_t now, sluice_decision_t *d)
{
	if (now - b->start >= b->window_ns) {
		b->start = now - now % b->window_ns;
		b->count = 0;
	}
	int ok = b->count < b->limit;
	b->count += (uint64_t)ok;
	d->allowed = ok;
	d->limit = b->limit;
	d->remaining = b->limit - b->count;
	d->reset_ns = b->start + b->window_ns - now;
	d->retry_after_ns = ok ? 0 : d->reset_ns;
	d->delay_ns = 0;
	d->now_ns = now;
	return ok;
}

/* The sliding window most libraries publish: N buckets tagged with their
 * epoch, summed on every decision. */
struct base_ring {
	uint64_t limit, width;
	uint64_t epoch[BUCKETS], count[BUCKETS];
};

static int base_ring_decide(struct base_ring *b, uint64_t now, sluice_decision_t *d)
{
	uint64_t e = now / b->width, sum = 0;
	for (unsigned k = 0; k < BUCKETS; k++)
		if (b->epoch[k] + BUCKETS > e && b->epoch[k] <= e)
			sum += b->count[k];
	int ok = sum < b->limit;
	if (ok) {
		unsigned i = (unsigned)(e % BUCKETS);
		if (b->epoch[i] != e) {
			b->epoch[i] = e;
			b->count[i] = 0;
		}
		b->count[i]++;
		sum++;
	}
	d->allowed = ok;
	d->limit = b->limit;
	d->remaining = b->limit - sum;
	d->reset_ns = (e + 1) * b->width - now;
	d->retry_after_ns = ok ? 0 : d->reset_ns;
	d->delay_ns = 0;
	d->now_ns = now;
	return ok;
}

struct base_gcra {
	uint64_t interval, tau, tat;
};

static int base_gcra_decide(struct base_gcra *b, uint64_t now, sluice_decision_t *d)
{
	uint64_t tat = b->tat > now ? b->tat : now;
	int ok = tat - now <= b->tau;
	if (ok)
		b->tat = tat + b->interval;
	d->allowed = ok;
	d->limit = b->tau / b->interval + 1;
	d->remaining = ok ? (b->tau - (b->tat - now < b->tau ? b->tat - now : b->tau)) / b->interval : 0;
	d->retry_after_ns = ok ? 0 : tat - now - b->tau;
	d->delay_ns = 0;
	d->reset_ns = b->tat > now ? b->tat - now : 0;
	d->now_ns = now;
	return ok;
}

/* A sliding log: the admission times of the last L admissions. */
struct base_log {
	uint64_t limit, window_ns, head, count;
	uint64_t *ts; /* limit entries, head = oldest */
};

static int base_log_decide(struct base_log *b, uint64_t now, sluice_decision_t *d)
{
	while (b->count && now - b->ts[b->head] >= b->window_ns) {
		b->head = b->head + 1 == b->limit ? 0 : b->head + 1;
		b->count--;
	}
	int ok = b->count < b->limit;
	if (ok) {
		uint64_t tail = b->head + b->count;
		b->ts[tail >= b->limit ? tail - b->limit : tail] = now;
		b->count++;
	}
	d->allowed = ok;
	d->limit = b->limit;
	d->remaining = b->limit - b->count;
	d->retry_after_ns = ok ? 0 : b->ts[b->head] + b->window_ns - now;
	d->delay_ns = 0;
	d->reset_ns = d->retry_after_ns;
	d->now_ns = now;
	return ok;
}

struct base_inflight {
	uint64_t limit, held;
};

static int base_inflight_decide(struct base_inflight *b, uint64_t now, sluice_decision_t *d)
{
	int ok = b->held < b->limit;
	b->held += (uint64_t)ok;
	d->allowed = ok;
	d->limit = b->limit;
	d->remaining = b->limit - b->held;
	d->retry_after_ns = 0;
	d->delay_ns = 0;
	d->reset_ns = 0;
	d->now_ns = now;
	return ok;
}

struct base_composite {
	struct base_ring ring;
	struct base_gcra gcra;
};

static int base_composite_decide(struct base_composite *b, uint64_t now, sluice_decision_t *d)
{
	/* check both, then take both: one lock makes it atomic */
	uint64_t tat = b->gcra.tat > now ? b->gcra.tat : now;
	if (tat - now > b->gcra.tau)
		return base_gcra_decide(&b->gcra, now, d);
	if (!base_ring_decide(&b->ring, now, d))
		return 0;
	return base_gcra_decide(&b->gcra, now, d);
}

/* ---- every limiter a series may use (one series runs at a time) ----------- */

static struct {
	sluice_fixed_t fixed;
	sluice_window_t window;
	sluice_gcra_t gcra;
	sluice_leaky_t leaky;
	sluice_log_t log;
	sluice_warmup_t warmup;
	sluice_decay_t decay;
	sluice_inflight_t inflight;
	sluice_limiter_t *parts[2];
	sluice_composite_t composite;

	pthread_mutex_t mutex;
	ck_spinlock_fas_t spin;
	struct base_fixed b_fixed;
	struct base_ring b_ring;
	struct base_gcra b_gcra;
	struct base_log b_log;
	struct base_inflight b_inflight;
	struct base_composite b_composite;
} g;

static void setup_fixed(const struct params *p)
{
	sluice_fixed_config_t c = { .limit = p->limit, .window_ns = p->window_ns };
	int rc = sluice_fixed_init(&g.fixed, &c);
	if (rc)
		die("fixed init", rc);
}

static void window_setup(const struct params *p, uint32_t lease)
{
	sluice_window_config_t c = { .limit = p->limit, .window_ns = p->window_ns,
		                     .buckets = BUCKETS, .lease = lease };
	int rc = sluice_window_init(&g.window, &c);
	if (rc)
		die("window init", rc);
}
static void setup_exact(const struct params *p) { window_setup(p, 0); }
static void setup_lease(const struct params *p) { window_setup(p, LEASE); }
static void setup_lease_small(const struct params *p) { window_setup(p, LEASE_SMALL); }
static void teardown_window(void) { sluice_window_destroy(&g.window); }

/* One permit per whole-ns interval (a rate in permits per second would
 * be rejected when its interval rounds off by more than 0.1%), and a burst
 * of what 1 ms brings: one cached-clock tick. */
static sluice_gcra_config_t gcra_config(const struct params *p)
{
	uint64_t burst = (MS + p->interval - 1) / p->interval; /* b * T >= 1 ms */
	sluice_gcra_config_t c = { .rate = 1, .period_ns = p->interval, .burst = burst };
	return c;
}

static void setup_gcra(const struct params *p)
{
	sluice_gcra_config_t c = gcra_config(p);
	int rc = sluice_gcra_init(&g.gcra, &c);
	if (rc)
		die("gcra init", rc);
}

static void setup_leaky(const struct params *p)
{
	sluice_gcra_config_t gc = gcra_config(p);
	sluice_leaky_config_t c = { .rate = 1, .period_ns = p->interval, .mode = SLUICE_LEAKY_METER,
		                    .depth = gc.burst - 1 };
	int rc = sluice_leaky_init(&g.leaky, &c);
	if (rc)
		die("leaky init", rc);
}

/* The leased series of issue 15: GCRA and the leaky meter with per-CPU
 * leases of up to LEASE permits and the default V (gcra.h, LEASES). */
static void setup_gcra_lease(const struct params *p)
{
	sluice_gcra_config_t c = gcra_config(p);
	c.lease = LEASE;
	int rc = sluice_gcra_init(&g.gcra, &c);
	if (rc)
		die("gcra init", rc);
}
static void setup_gcra_lease_small(const struct params *p)
{
	sluice_gcra_config_t c = gcra_config(p);
	c.lease = LEASE_SMALL;
	int rc = sluice_gcra_init(&g.gcra, &c);
	if (rc)
		die("gcra init", rc);
}
static void teardown_gcra(void) { sluice_gcra_destroy(&g.gcra); }
static void setup_leaky_lease(const struct params *p)
{
	sluice_gcra_config_t gc = gcra_config(p);
	sluice_leaky_config_t c = { .rate = 1, .period_ns = p->interval, .mode = SLUICE_LEAKY_METER,
		                    .depth = gc.burst - 1, .lease = LEASE };
	int rc = sluice_leaky_init(&g.leaky, &c);
	if (rc)
		die("leaky init", rc);
}
static void teardown_leaky(void) { sluice_leaky_destroy(&g.leaky); }
/* The fixed window with leases of LEASE: the ring's N = 1 case (fixed.h). */
static void setup_fixed_lease(const struct params *p)
{
	/* The ring's limit range (2^30 - 1), below the fixed window's: allow's
	 * limit is capped to it, still far above what 1 s of threads offer. */
	uint64_t limit = p->limit < SLUICE_WINDOW_LIMIT_MAX ? p->limit : SLUICE_WINDOW_LIMIT_MAX;
	sluice_fixed_config_t c = { .limit = limit, .window_ns = p->window_ns, .lease = LEASE };
	int rc = sluice_fixed_init(&g.fixed, &c);
	if (rc)
		die("fixed init", rc);
}
static void teardown_fixed(void) { sluice_fixed_destroy(&g.fixed); }

static void setup_log(const struct params *p)
{
	sluice_log_config_t c = { .limit = p->limit, .window_ns = p->window_ns };
	int rc = sluice_log_init(&g.log, &c);
	if (rc)
		die("log init", rc);
}
static void teardown_log(void) { sluice_log_destroy(&g.log); }

static void setup_warmup(const struct params *p)
{
	/* warm-up in 10 ms, or in 2^19 intervals when that is shorter (the
	 * header caps warm-up at 2^20 intervals) */
	uint64_t warm = p->interval << 19 < 10 * MS ? p->interval << 19 : 10 * MS;
	sluice_warmup_config_t c = { .rate = 1, .period_ns = p->interval,
		                     .warmup_ns = warm > 1000 ? warm : 1000,
		                     .clock = &sluice_clock_monotonic };
	int rc = sluice_warmup_init(&g.warmup, &c);
	if (rc)
		die("warmup init", rc);
}

/* Half-life = W; the count settles near rate * W / ln 2. */
static uint64_t decay_limit(const struct params *p)
{
	double l = (double)p->rate * ((double)p->window_ns / 1e9) / log(2.0);
	if (l > (double)SLUICE_DECAY_LIMIT_MAX)
		l = (double)SLUICE_DECAY_LIMIT_MAX;
	return l < 1 ? 1 : (uint64_t)l;
}

static void setup_decay(const struct params *p)
{
	sluice_decay_config_t c = { .limit = decay_limit(p), .half_life_ns = p->window_ns };
	int rc = sluice_decay_init(&g.decay, &c);
	if (rc)
		die("decay init", rc);
}

static void setup_inflight(const struct params *p)
{
	sluice_inflight_config_t c = { .limit = p->limit };
	int rc = sluice_inflight_init(&g.inflight, &c);
	if (rc)
		die("inflight init", rc);
	if (p->rate == 0) /* deny: every slot is held by somebody else */
		if (sluice_inflight_acquire(&g.inflight, p->limit, NULL) != 1)
			die("inflight fill", SLUICE_EINVAL);
}

static void setup_composite(const struct params *p)
{
	sluice_limiter_config_t ring = { .algo = SLUICE_ALGO_WINDOW };
	ring.window = (sluice_window_config_t){ .limit = p->limit, .window_ns = p->window_ns,
		                                .buckets = BUCKETS };
	sluice_limiter_config_t gcra = { .algo = SLUICE_ALGO_GCRA };
	gcra.gcra = gcra_config(p);
	int rc = sluice_limiter_new(&ring, &g.parts[0]);
	if (!rc)
		rc = sluice_limiter_new(&gcra, &g.parts[1]);
	sluice_composite_config_t c = { .parts = { g.parts[0], g.parts[1] }, .count = 2 };
	if (!rc)
		rc = sluice_composite_init(&g.composite, &c);
	if (rc)
		die("composite init", rc);
}

static void teardown_composite(void)
{
	sluice_limiter_free(g.parts[0]);
	sluice_limiter_free(g.parts[1]);
}

/* Baselines share one lock of each kind; the state is per family. */
static void base_ring_init(struct base_ring *b, const struct params *p)
{
	memset(b, 0, sizeof(*b));
	b->limit = p->limit;
	b->width = p->window_ns / BUCKETS;
	for (unsigned k = 0; k < BUCKETS; k++)
		b->epoch[k] = UINT64_MAX / 2; /* far from any epoch: counts nothing */
}

static void base_gcra_init(struct base_gcra *b, const struct params *p)
{
	sluice_gcra_config_t c = gcra_config(p);
	b->interval = c.period_ns;
	b->tau = (c.burst - 1) * b->interval;
	b->tat = 0;
}

static void setup_locks(void)
{
	pthread_mutex_init(&g.mutex, NULL);
	ck_spinlock_fas_init(&g.spin);
}
static void teardown_locks(void) { pthread_mutex_destroy(&g.mutex); }

static void setup_b_fixed(const struct params *p)
{
	setup_locks();
	g.b_fixed = (struct base_fixed){ .limit = p->limit, .window_ns = p->window_ns };
}
static void setup_b_ring(const struct params *p)
{
	setup_locks();
	base_ring_init(&g.b_ring, p);
}
static void setup_b_gcra(const struct params *p)
{
	setup_locks();
	base_gcra_init(&g.b_gcra, p);
}
static void setup_b_log(const struct params *p)
{
	setup_locks();
	g.b_log = (struct base_log){ .limit = p->limit, .window_ns = p->window_ns };
	g.b_log.ts = malloc(sizeof(uint64_t) * p->limit);
	if (!g.b_log.ts)
		die("baseline log", SLUICE_ENOMEM);
}
static void teardown_b_log(void)
{
	teardown_locks();
	free(g.b_log.ts);
}
static void setup_b_inflight(const struct params *p)
{
	setup_locks();
	g.b_inflight = (struct base_inflight){ .limit = p->limit, .held = p->rate ? 0 : p->limit };
}
static void setup_b_composite(const struct params *p)
{
	setup_locks();
	base_ring_init(&g.b_composite.ring, p);
	base_gcra_init(&g.b_composite.gcra, p);
}

/* ---- the decision loops: inline bodies, one call per batch --------------- */

/* Per thread, so the threads do not share a written line through it. */
static _Thread_local volatile uint64_t sink;

LOOP(loop_fixed, sluice_fixed_acquire(&g.fixed, 1, &d), NOTHING)
LOOP(loop_window, sluice_window_acquire(&g.window, 1, &d), NOTHING)
LOOP(loop_gcra, sluice_gcra_acquire(&g.gcra, 1, &d), NOTHING)
LOOP(loop_leaky, sluice_leaky_acquire(&g.leaky, 1, &d), NOTHING)
LOOP(loop_log, sluice_log_acquire(&g.log, 1, &d), NOTHING)
LOOP(loop_warmup, sluice_warmup_acquire(&g.warmup, 1, &d), NOTHING)
LOOP(loop_decay, sluice_decay_acquire(&g.decay, 1, &d), NOTHING)
LOOP(loop_inflight, sluice_inflight_acquire(&g.inflight, 1, &d),
     sluice_inflight_release(&g.inflight, 1))
LOOP(loop_composite, sluice_composite_acquire_at(&g.composite, 1, sluice_clock_cached_ns(), &d),
     NOTHING)

/*
 * The floor: one uncontended atomic read-modify-write, as a decision that
 * admits costs at least one.  A fetch_add on a line of the thread's own
 * (so threads never share it), BATCH per call like the decision loops,
 * with the loop's own bookkeeping.  Each sluice series' 1-thread cost is
 * reported as a multiple of it (vs_rmw), measured in the same run.
 */
static _Thread_local _Alignas(64) _Atomic uint64_t rmw_line[8];

static uint64_t loop_rmw(void)
{
	uint64_t acc = 0;
	for (unsigned i = 0; i < BATCH; i++)
		acc += atomic_fetch_add_explicit(&rmw_line[0], 1, memory_order_relaxed);
	sink += acc;
	return BATCH;
}

/*
 * Two more floors, so the ratios above can be read against what any
 * decision of the same shape costs on this CPU: a load and a CAS of that
 * line (every read-check-CAS algorithm waits for its load after the
 * previous locked instruction), with and without the seven stores that
 * fill an admitted decision; and the fetch_add with the fill.  Same loop
 * as the decisions (LOOP).  The CAS is an acquire as the fast paths' are
 * (free on x86-64); it pairs with nothing: no other thread uses the line.
 */
static inline int probe_cas(sluice_decision_t *d, int fill)
{
	uint64_t w = atomic_load_explicit(&rmw_line[0], memory_order_relaxed), seen = w;
	(void)atomic_compare_exchange_strong_explicit(&rmw_line[0], &seen, w + 1,
	                                              memory_order_acquire, memory_order_relaxed);
	if (seen != w)
		return 0;
	if (fill)
		sluice__decision_admitted(d, UINT32_MAX, w & 0xffff, SEC - (w & 0xffff), w);
	return 1;
}
static inline int probe_rmw_fill(sluice_decision_t *d)
{
	uint64_t w = atomic_fetch_add_explicit(&rmw_line[0], 1, memory_order_relaxed);
	sluice__decision_admitted(d, UINT32_MAX, w & 0xffff, SEC - (w & 0xffff), w);
	return 1;
}
LOOP(loop_probe_cas, probe_cas(&d, 0), NOTHING)
LOOP(loop_probe_cas_fill, probe_cas(&d, 1), NOTHING)
LOOP(loop_probe_rmw_fill, probe_rmw_fill(&d), NOTHING)

static void setup_none(const struct params *p) { (void)p; }

/* The three lock styles around one plain decision. */
#define MUTEX_DECIDE(CALL, CLOCK)                                               \
	(pthread_mutex_lock(&g.mutex), rc_m = (CALL)(CLOCK), pthread_mutex_unlock(&g.mutex), rc_m)
#define SPIN_DECIDE(CALL)                                                       \
	(ck_spinlock_fas_lock(&g.spin), rc_m = (CALL)(mono_ns()), ck_spinlock_fas_unlock(&g.spin), rc_m)

#define LOOP_BODY(DECIDE, AFTER)                                                \
	sluice_decision_t d;                                                   \
	memset(&d, 0, sizeof(d));                                              \
	uint64_t admitted = 0, acc = 0;                                        \
	for (unsigned i = 0; i < BATCH; i++) {                                 \
		cur_d = &d;                                                    \
		int rc_ = (DECIDE);                                            \
		admitted += rc_ == 1;                                          \
		acc += d.remaining;                                            \
		if (rc_ == 1) {                                                \
			AFTER;                                                 \
		}                                                              \
	}                                                                      \
	sink += acc;                                                           \
	return admitted;

/* The decision pointer for the (now)-only call shape the lock macros use. */
static _Thread_local sluice_decision_t *cur_d;

#define FAM_D(fam)                                                              \
	static inline int fam##_call_d(uint64_t now) { return fam##_call(now, cur_d); }

/* A family's three baselines.  AFTER runs after an admission under the
 * mutex styles, SPIN_AFTER under the spinlock (in-flight's release). */
#define BASE_FAMILY(fam, CALL, AFTER, SPIN_AFTER)                               \
	static inline int fam##_call(uint64_t now, sluice_decision_t *d)       \
	{                                                                      \
		return CALL;                                                   \
	}                                                                      \
	FAM_D(fam)                                                             \
	static uint64_t loop_mutex_##fam(void)                                 \
	{                                                                      \
		int rc_m;                                                      \
		LOOP_BODY(MUTEX_DECIDE(fam##_call_d, mono_ns()), AFTER)        \
	}                                                                      \
	static uint64_t loop_mutex_cached_##fam(void)                          \
	{                                                                      \
		int rc_m;                                                      \
		LOOP_BODY(MUTEX_DECIDE(fam##_call_d, sluice_clock_cached_ns()), AFTER) \
	}                                                                      \
	static uint64_t loop_spin_##fam(void)                                  \
	{                                                                      \
		int rc_m;                                                      \
		LOOP_BODY(SPIN_DECIDE(fam##_call_d), SPIN_AFTER)               \
	}

/* in-flight: the release takes the lock again, as it would in a server */
#define BASE_RELEASE                                                            \
	do {                                                                   \
		pthread_mutex_lock(&g.mutex);                                  \
		g.b_inflight.held--;                                           \
		pthread_mutex_unlock(&g.mutex);                                \
	} while (0)
#define SPIN_RELEASE                                                            \
	do {                                                                   \
		ck_spinlock_fas_lock(&g.spin);                                 \
		g.b_inflight.held--;                                           \
		ck_spinlock_fas_unlock(&g.spin);                               \
	} while (0)

BASE_FAMILY(fixed, base_fixed_decide(&g.b_fixed, now, d), NOTHING, NOTHING)
BASE_FAMILY(ring, base_ring_decide(&g.b_ring, now, d), NOTHING, NOTHING)
BASE_FAMILY(gcra, base_gcra_decide(&g.b_gcra, now, d), NOTHING, NOTHING)
BASE_FAMILY(log, base_log_decide(&g.b_log, now, d), NOTHING, NOTHING)
BASE_FAMILY(warmup, sluice_warmup_acquire_at(&g.warmup, 1, now, d), NOTHING, NOTHING)
BASE_FAMILY(decay, sluice_decay_acquire_at(&g.decay, 1, now, d), NOTHING, NOTHING)
BASE_FAMILY(composite, base_composite_decide(&g.b_composite, now, d), NOTHING, NOTHING)
BASE_FAMILY(inflight, base_inflight_decide(&g.b_inflight, now, d), BASE_RELEASE, SPIN_RELEASE)

/* ---- series -------------------------------------------------------------- */

enum impl { SLUICE, MUTEX, MUTEX_CACHED, SPIN, PROBE, NIMPLS };
static const char *impl_name[] = { "sluice", "mutex", "mutex_cached", "spin", "probe" };

enum kind { K_FIXED, K_RING, K_GCRA, K_LOG, K_WARMUP, K_DECAY, K_INFLIGHT, K_COMPOSITE, K_PROBE };

struct series {
	const char *algo, *mode; /* what the bench line says */
	enum impl impl;
	enum kind kind;
	void (*setup)(const struct params *);
	uint64_t (*loop)(void);
	void (*teardown)(void);
	int baseline_of;         /* index of the mutex baseline for sluice series */
	int selected;
	/* results per threads index and regime */
	double agg[MAX_COUNTS][NREGIMES];      /* decisions per second, median */
	double admitted[MAX_COUNTS][NREGIMES]; /* admitted share of all runs */
};

static void teardown_warmup_base(void) { teardown_locks(); }
static void setup_b_warmup(const struct params *p)
{
	setup_locks();
	setup_warmup(p);
}
static void setup_b_decay(const struct params *p)
{
	setup_locks();
	setup_decay(p);
}

#define S(a, m, k, su, lo, td) { a, m, SLUICE, k, su, lo, td, -1, 1, { { 0 } }, { { 0 } } }
#define B(a, i, k, su, lo, td) { a, "-", i, k, su, lo, td, -1, 1, { { 0 } }, { { 0 } } }
#define BASES(a, k, fam, su, td)                                                 \
	B(a, MUTEX, k, su, loop_mutex_##fam, td),                               \
	B(a, MUTEX_CACHED, k, su, loop_mutex_cached_##fam, td),                 \
	B(a, SPIN, k, su, loop_spin_##fam, td)

static struct series series[] = {
	{ "rmw", "fetch_add", PROBE, K_PROBE, setup_none, loop_rmw, NULL, -1, 1, { { 0 } }, { { 0 } } },
	{ "rmw", "fetch_add+fill", PROBE, K_PROBE, setup_none, loop_probe_rmw_fill, NULL, -1, 1,
	  { { 0 } }, { { 0 } } },
	{ "rmw", "cas", PROBE, K_PROBE, setup_none, loop_probe_cas, NULL, -1, 1, { { 0 } }, { { 0 } } },
	{ "rmw", "cas+fill", PROBE, K_PROBE, setup_none, loop_probe_cas_fill, NULL, -1, 1,
	  { { 0 } }, { { 0 } } },
	BASES("fixed", K_FIXED, fixed, setup_b_fixed, teardown_locks),
	S("fixed", "exact", K_FIXED, setup_fixed, loop_fixed, NULL),
	S("fixed", "exact/call", K_FIXED, setup_fixed, bench_call_fixed, NULL),
	S("fixed", "lease", K_FIXED, setup_fixed_lease, loop_fixed, teardown_fixed),
	BASES("ring", K_RING, ring, setup_b_ring, teardown_locks),
	S("ring", "exact", K_RING, setup_exact, loop_window, teardown_window),
	S("ring", "exact/call", K_RING, setup_exact, bench_call_window, teardown_window),
	S("ring", "exact-lease", K_RING, setup_lease, loop_window, teardown_window),
	S("ring", "exact-lease64", K_RING, setup_lease_small, loop_window, teardown_window),
	BASES("gcra", K_GCRA, gcra, setup_b_gcra, teardown_locks),
	S("gcra", "-", K_GCRA, setup_gcra, loop_gcra, NULL),
	S("gcra", "call", K_GCRA, setup_gcra, bench_call_gcra, NULL),
	S("leaky", "meter", K_GCRA, setup_leaky, loop_leaky, NULL),
	S("leaky", "meter/call", K_GCRA, setup_leaky, bench_call_leaky, NULL),
	S("gcra", "lease", K_GCRA, setup_gcra_lease, loop_gcra, teardown_gcra),
	S("gcra", "lease64", K_GCRA, setup_gcra_lease_small, loop_gcra, teardown_gcra),
	S("leaky", "lease", K_GCRA, setup_leaky_lease, loop_leaky, teardown_leaky),
	BASES("log", K_LOG, log, setup_b_log, teardown_b_log),
	S("log", "-", K_LOG, setup_log, loop_log, teardown_log),
	S("log", "call", K_LOG, setup_log, bench_call_log, teardown_log),
	BASES("warmup", K_WARMUP, warmup, setup_b_warmup, teardown_warmup_base),
	S("warmup", "-", K_WARMUP, setup_warmup, loop_warmup, NULL),
	S("warmup", "call", K_WARMUP, setup_warmup, bench_call_warmup, NULL),
	BASES("decay", K_DECAY, decay, setup_b_decay, teardown_locks),
	S("decay", "-", K_DECAY, setup_decay, loop_decay, NULL),
	S("decay", "call", K_DECAY, setup_decay, bench_call_decay, NULL),
	BASES("inflight", K_INFLIGHT, inflight, setup_b_inflight, teardown_locks),
	S("inflight", "-", K_INFLIGHT, setup_inflight, loop_inflight, NULL),
	S("inflight", "call", K_INFLIGHT, setup_inflight, bench_call_inflight, NULL),
	BASES("composite", K_COMPOSITE, composite, setup_b_composite, teardown_locks),
	S("composite", "ring+gcra", K_COMPOSITE, setup_composite, loop_composite,
	  teardown_composite),
};
#define NSERIES ((int)(sizeof(series) / sizeof(series[0])))

/*
 * Parameters for a series in a regime.  @offered: the aggregate decisions
 * per second this series reached in the allow regime (near only).
 */
static struct params params_for(const struct series *s, enum regime r, double offered)
{
	struct params p = { 0, 0, 0, 0 };
	switch (s->kind) {
	case K_INFLIGHT:
		p.rate = r == DENY ? 0 : 1; /* rate 0: setup holds every slot */
		p.limit = r == ALLOW ? SLUICE_INFLIGHT_LIMIT_MAX : 1;
		return p;
	case K_LOG:
		/* W = 10 ms: the log keeps L timestamps, so the allow regime
		 * needs L above what 10 ms of traffic brings */
		p.window_ns = 10 * MS;
		break;
	case K_DECAY:
		p.window_ns = 10 * MS; /* half-life */
		break;
	default:
		p.window_ns = r == NEAR ? 100 * MS : SEC;
	}
	double rate;
	if (r == ALLOW)
		rate = 4e9; /* capped per algorithm below */
	else if (r == DENY)
		rate = 1;
	else
		rate = offered / 2;
	if (rate < 1)
		rate = 1;
	double per_window = rate * (double)p.window_ns / 1e9;
	uint64_t cap = s->kind == K_FIXED ? SLUICE_FIXED_LIMIT_MAX :
	               s->kind == K_LOG   ? (1ULL << 20) : SLUICE_WINDOW_LIMIT_MAX;
	p.limit = r == DENY ? 1 : per_window > (double)cap ? cap : per_window < 1 ? 1 : (uint64_t)per_window;
	p.rate = rate > 1e9 ? 1000000000ULL : (uint64_t)rate;
	if (r == DENY)
		p.rate = 1;
	p.interval = (uint64_t)llround(1e9 / (double)p.rate);
	return p;
}

/* ---- running a case -------------------------------------------------------- */

static struct {
	_Alignas(64) pthread_barrier_t start;
	_Atomic int stop;
	uint64_t (*loop)(void);
	int ncpu;
} run;

struct worker {
	pthread_t tid;
	int cpu;
	uint64_t decisions, admitted;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set); /* best effort */
	pthread_barrier_wait(&run.start);
	uint64_t decisions = 0, admitted = 0;
	while (!atomic_load_explicit(&run.stop, memory_order_relaxed)) {
		admitted += run.loop();
		decisions += BATCH;
	}
	w->decisions = decisions;
	w->admitted = admitted;
	return NULL;
}

struct result {
	double agg; /* decisions per second, all threads */
	uint64_t decisions, admitted;
};

static struct result run_case(const struct series *s, const struct params *p, int threads,
                              double seconds)
{
	static struct worker workers[MAX_THREADS];
	s->setup(p);
	run.loop = s->loop;
	atomic_store(&run.stop, 0);
	pthread_barrier_init(&run.start, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++) {
		workers[i].cpu = i % run.ncpu;
		if (pthread_create(&workers[i].tid, NULL, worker_main, &workers[i]))
			die("pthread_create", SLUICE_ETHREAD);
	}
	pthread_barrier_wait(&run.start);
	uint64_t t0 = mono_ns();
	struct timespec nap = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
	nanosleep(&nap, NULL);
	atomic_store(&run.stop, 1);
	struct result r = { 0, 0, 0 };
	for (int i = 0; i < threads; i++) {
		pthread_join(workers[i].tid, NULL);
		r.decisions += workers[i].decisions;
		r.admitted += workers[i].admitted;
	}
	uint64_t t1 = mono_ns();
	pthread_barrier_destroy(&run.start);
	if (s->teardown)
		s->teardown();
	r.agg = (double)r.decisions * 1e9 / (double)(t1 - t0);
	return r;
}

/* ---- command line ------------------------------------------------------------- */

static int name_in(const char *list, const char *name)
{
	size_t len = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t l = comma ? (size_t)(comma - p) : strlen(p);
		if (l == len && strncmp(p, name, l) == 0)
			return 1;
		p = comma ? comma + 1 : NULL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct bench_opts o = { .repeats = 3, .seconds = 0.5 };
	const char *algos = NULL, *regimes = "allow,deny,near";
	int table_only = 0; /* --table: no key=value lines (the demo) */
	run.ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (run.ncpu < 1)
		run.ncpu = 1;
	int bad = 0;
	for (int i = 1; i < argc && !bad; i++) {
		int taken = bench_parse_opt(argv[i], &o, 1, 0.1, 1);
		if (taken) {
			bad = taken < 0;
		} else if (strncmp(argv[i], "--algos=", 8) == 0) {
			algos = argv[i] + 8;
		} else if (strncmp(argv[i], "--regimes=", 10) == 0) {
			regimes = argv[i] + 10;
		} else if (strcmp(argv[i], "--table") == 0) {
			table_only = 1;
		} else {
			bad = 1;
		}
	}
	if (bad || o.repeats < 1 || !(o.seconds > 0)) {
		fprintf(stderr, "usage: %s [--quick] [--repeats=N] [--seconds=S] [--threads=1,2,4]\n"
		                "       [--algos=fixed,ring-exact,ring-exact-lease,...] "
		                "[--regimes=allow,deny,near] [--table]\n", argv[0]);
		return 2;
	}
	/* default: 1, 2 and every online CPU, without repeats */
	if (bench_threads_finish(&o, "bench_algos", 1, run.ncpu))
		return 2;
	const unsigned repeats = o.repeats;
	const double seconds = o.seconds;
	const int *threads = o.threads, nthreads = o.nthreads;
	int want_regime[NREGIMES];
	for (int r = 0; r < NREGIMES; r++)
		want_regime[r] = name_in(regimes, regime_name[r]);
	if (want_regime[NEAR])
		want_regime[ALLOW] = 1; /* near is calibrated from allow */

	/* select series; a baseline runs when a sluice series of its kind does */
	int kind_wanted[16] = { 0 };
	for (int i = 0; i < NSERIES; i++) {
		struct series *s = &series[i];
		char full[64];
		snprintf(full, sizeof(full), "%s-%s", s->algo, s->mode);
		if (s->impl == SLUICE) {
			s->selected = !algos || name_in(algos, s->algo) || name_in(algos, full);
			kind_wanted[s->kind] |= s->selected;
		}
	}
	int last_mutex = -1;
	for (int i = 0; i < NSERIES; i++) {
		struct series *s = &series[i];
		if (s->impl != SLUICE)
			s->selected = s->kind == K_PROBE || kind_wanted[s->kind];
		/* Warm-up admits one request per clock reading: on the cached
		 * clock's 1 ms steps its baseline would time refusals, not
		 * the same work.  Not run; its ratio prints as "na". */
		if (s->kind == K_WARMUP && s->impl == MUTEX_CACHED)
			s->selected = 0;
		if (s->impl == MUTEX)
			last_mutex = i;
		s->baseline_of = last_mutex;
	}

	/* What the figures depend on, first, so a pasted run names its
	 * machine (docs/performance.md describes every field). */
	char cpu[128];
	bench_cpu_model(cpu, sizeof(cpu));
	printf("bench_env cpu=\"%s\" online_cpus=%d threads=", cpu, run.ncpu);
	bench_print_threads(&o);
	printf(" repeats=%u seconds=%.2f clock_sluice=cached(%llu_ns_ticker) "
	       "clock_mutex=monotonic clock_mutex_cached=cached\n",
	       repeats, seconds, (unsigned long long)SLUICE_CACHED_PERIOD_NS);
	fflush(stdout);

	bench_call_use(&g.fixed, &g.window, &g.gcra, &g.leaky, &g.log, &g.warmup, &g.decay,
	               &g.inflight);
	int rc = sluice_clock_cached_start(0);
	if (rc)
		die("sluice_clock_cached_start", rc);
	double *samples = calloc(repeats, sizeof(double));
	double *all = calloc((size_t)NSERIES * repeats, sizeof(double));
	uint64_t *dec = calloc((size_t)NSERIES, sizeof(uint64_t));
	uint64_t *adm = calloc((size_t)NSERIES, sizeof(uint64_t));
	if (!samples || !all || !dec || !adm)
		die("calloc", SLUICE_ENOMEM);

	for (int ti = 0; ti < nthreads; ti++) {
		for (int r = 0; r < NREGIMES; r++) {
			if (!want_regime[r])
				continue;
			memset(dec, 0, sizeof(uint64_t) * (size_t)NSERIES);
			memset(adm, 0, sizeof(uint64_t) * (size_t)NSERIES);
			for (unsigned k = 0; k < repeats; k++) {
				for (int i = 0; i < NSERIES; i++) {
					struct series *s = &series[i];
					if (!s->selected)
						continue;
					struct params p = params_for(s, (enum regime)r, s->agg[ti][ALLOW]);
					struct result res = run_case(s, &p, threads[ti], seconds);
					all[(size_t)i * repeats + k] = res.agg;
					dec[i] += res.decisions;
					adm[i] += res.admitted;
				}
			}
			for (int i = 0; i < NSERIES; i++) {
				struct series *s = &series[i];
				if (!s->selected)
					continue;
				memcpy(samples, &all[(size_t)i * repeats], sizeof(double) * repeats);
				s->agg[ti][r] = bench_median(samples, repeats);
				s->admitted[ti][r] = dec[i] ? (double)adm[i] / (double)dec[i] : 0;
			}
			for (int i = 0; i < NSERIES && !table_only; i++) {
				struct series *s = &series[i];
				if (!s->selected)
					continue;
				double agg = s->agg[ti][r];
				double ns = 1e9 * threads[ti] / agg;
				printf("bench algo=%s mode=%s impl=%s threads=%d regime=%s clock=%s "
				       "ns_per_decision=%.2f decisions_per_sec=%.0f admitted=%.4f "
				       "scaling=%.2f",
				       s->algo, s->mode, impl_name[s->impl], threads[ti], regime_name[r],
				       s->impl == MUTEX || s->impl == SPIN || s->kind == K_WARMUP ?
					       "monotonic" :
					       "cached",
				       ns,
				       agg, s->admitted[ti][r], agg / s->agg[0][r]);
				if (s->impl == SLUICE) {
					const struct series *m = &series[s->baseline_of];
					const struct series *mc = &series[s->baseline_of + 1];
					printf(" vs_mutex=%.2f", agg / m->agg[ti][r]);
					if (mc->selected)
						printf(" vs_mutex_cached=%.2f", agg / mc->agg[ti][r]);
					else
						printf(" vs_mutex_cached=na");
					printf(" vs_spin=%.2f", agg / series[s->baseline_of + 2].agg[ti][r]);
					if (threads[ti] == 1) /* series[0]: the RMW probe */
						printf(" vs_rmw=%.2f", series[0].agg[ti][r] / agg);
				}
				printf("\n");
				fflush(stdout);
			}
		}
	}
	sluice_clock_cached_stop();

	/* human table: one block per regime */
	for (int r = 0; r < NREGIMES; r++) {
		if (!want_regime[r])
			continue;
		printf("\n%s regime: million decisions/s, all threads (median of %u x %.2f s); "
		       "one hot key; sluice reads the cached clock\n",
		       regime_name[r], repeats, seconds);
		printf("  %-10s %-14s %-12s", "algo", "mode", "impl");
		for (int ti = 0; ti < nthreads; ti++)
			printf("  %2dT Mdec/s  ns/dec", threads[ti]);
		printf("  vs_mutex  vs_m_cached  admitted  1T_x_rmw\n");
		for (int i = 0; i < NSERIES; i++) {
			struct series *s = &series[i];
			if (!s->selected)
				continue;
			printf("  %-10s %-14s %-12s", s->algo, s->mode, impl_name[s->impl]);
			for (int ti = 0; ti < nthreads; ti++)
				printf("  %10.1f %7.1f", s->agg[ti][r] / 1e6,
				       1e9 * threads[ti] / s->agg[ti][r]);
			int last = nthreads - 1;
			if (s->impl == SLUICE && series[s->baseline_of + 1].selected)
				printf("  %8.1f %12.1f", s->agg[last][r] / series[s->baseline_of].agg[last][r],
				       s->agg[last][r] / series[s->baseline_of + 1].agg[last][r]);
			else if (s->impl == SLUICE)
				printf("  %8.1f %12s", s->agg[last][r] / series[s->baseline_of].agg[last][r],
				       "na");
			else
				printf("  %8s %12s", "", "");
			printf("  %7.1f%%", 100 * s->admitted[last][r]);
			if (i != 0) /* series[0]: the fetch_add every 1T_x_rmw divides by */
				printf("  %8.2f", series[0].agg[0][r] / s->agg[0][r]);
			printf("\n");
		}
		printf("  (vs_ columns and admitted at %d threads; ns/dec = threads x wall / "
		       "decisions; 1T_x_rmw = 1-thread ns/dec over the rmw probe's)\n",
		       threads[nthreads - 1]);
		printf("  cpu: %s, %d online CPUs\n", cpu, run.ncpu);
	}
	free(samples);
	free(all);
	free(dec);
	free(adm);
	return 0;
}
