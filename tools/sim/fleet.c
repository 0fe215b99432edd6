/* SPDX-License-Identifier: MIT */
/*
 * fleet.c - the fleet simulation (fleet.h says what is modelled).
 *
 * DESIGN: one event queue (a binary heap ordered by time, then by the
 * order events were made, so a run repeats exactly for a seed) of four
 * kinds: a request ARRIVES at an instance (Poisson, its share of the rate);
 * a call REACHES Redis (half a round trip after it was sent), where it
 * runs the fixed-window script at the instant Redis starts it (FIFO after
 * the calls before it, after a pause ends) and its REPLY is scheduled
 * service_ns and half a round trip later; a decision's BUDGET ends.  An
 * instance is what one libsluice-redis limit holds: the lease (count,
 * expiry, window), B, the HOT flag, the need, one call in flight at most,
 * the over-limit cache, and the decisions waiting for it in arrival order.
 *
 *   decide   spend from a live lease that holds the permit (then prefetch
 *            when lease_policy says so); else refused by the over-limit
 *            cache when it covers; else ask (when nothing is in flight)
 *            and wait
 *   ask      the I/O thread's sluice__lease_ask: B from the policy, the
 *            amount from the policy (0: covered, nothing sent)
 *   reply    install as lease.c does (the same window merges, another
 *            replaces and the unspent are lost, B after the loss), or set
 *            the over-limit cache; then every waiting decision looks again
 *            in order, and one that still finds nothing asks again
 *   budget   a decision still waiting takes the LOCAL fallback: a fixed
 *            window of L / N on this instance
 *
 * The accounting is per window of the one timeline [kW, (k + 1)W): what
 * the fleet admitted (from leases and fallbacks), and whether anyone was
 * refused.  Latency is the decision's wait: 0 when it never waited.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../redis/lease_policy.h"
#include "fleet.h"
#include "sim.h"

enum { EV_ARRIVE, EV_AT_REDIS, EV_REPLY, EV_BUDGET };

typedef struct event {
	uint64_t t, seq;
	uint32_t kind, who; /* who: instance (ARRIVE), call (AT_REDIS, REPLY), waiter (BUDGET) */
} event_t;

typedef struct heap {
	event_t *e;
	size_t n, cap;
	uint64_t seq;
} heap_t;

/* @p with room for one more than @n of @size bytes (doubling), or NULL
 * with *@oom set (@p kept) */
static void *grow(void *p, size_t *cap, size_t n, size_t size, int *oom)
{
	if (n < *cap)
		return p;
	size_t c = *cap ? *cap * 2 : 1024;
	void *q = realloc(p, c * size);
	if (!q) {
		*oom = 1;
		return NULL;
	}
	*cap = c;
	return q;
}

static int before(const event_t *a, const event_t *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int push(heap_t *h, uint64_t t, uint32_t kind, uint32_t who)
{
	int oom = 0;
	event_t *e = grow(h->e, &h->cap, h->n, sizeof(*e), &oom);
	if (!e)
		return -1;
	h->e = e;
	size_t i = h->n++;
	h->e[i] = (event_t){ .t = t, .seq = h->seq++, .kind = kind, .who = who };
	while (i > 0 && before(&h->e[i], &h->e[(i - 1) / 2])) {
		event_t x = h->e[i];
		h->e[i] = h->e[(i - 1) / 2];
		h->e[(i - 1) / 2] = x;
		i = (i - 1) / 2;
	}
	return 0;
}

static event_t pop(heap_t *h)
{
	event_t top = h->e[0];
	h->e[0] = h->e[--h->n];
	for (size_t i = 0;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < h->n && before(&h->e[l], &h->e[m]))
			m = l;
		if (r < h->n && before(&h->e[r], &h->e[m]))
			m = r;
		if (m == i)
			break;
		event_t x = h->e[i];
		h->e[i] = h->e[m];
		h->e[m] = x;
		i = m;
	}
	return top;
}

/* a call in flight and what Redis answered */
typedef struct call {
	uint32_t inst;
	uint64_t need, want, sent;
	int admitted;
	uint64_t granted, remaining, retry_ns, reset_ns, redis_ns;
} call_t;

/* a decision waiting for its instance's call */
typedef struct waiter {
	uint32_t inst, next; /* next: the instance's FIFO, UINT32_MAX at its end */
	uint64_t start;
	int done;
} waiter_t;

typedef struct inst {
	double rate;
	uint64_t count, expiry, wid, size; /* the lease: expiry in ns, wid the window + 1 */
	uint64_t b, need, last_remaining;
	int hot, pending;
	uint64_t refused_until, refused_need;
	uint64_t fb_wid, fb_count;         /* the LOCAL fallback's window     */
	uint32_t head, tail;               /* waiters, in arrival order       */
	uint64_t *lat;                     /* latencies of its decisions      */
	size_t nlat, caplat;
} inst_t;

typedef struct fleet {
	const sim_fleet_config_t *c;
	sim_rng_t rng;
	heap_t h;
	inst_t *in;
	call_t *calls;
	size_t ncalls, capcalls;
	waiter_t *w;
	size_t nw, capw;
	uint64_t redis_free;               /* when Redis is next free        */
	uint64_t key_wid, key_count;       /* the one Redis key (fixed.lua)  */
	int restarted;                     /* SIM_FLEET_RESTART happened      */
	double mu, sigma;                  /* the round trip's lognormal     */
	uint64_t share;                    /* L / N, the fallback's          */
	uint64_t *adm;                     /* admitted per window            */
	unsigned char *refused;            /* someone refused, per window    */
	uint64_t nwin;
	sim_fleet_result_t *r;
	int oom;
} fleet_t;

static uint64_t rtt(fleet_t *f)
{
	/* Box-Muller: one standard normal */
	double u1 = sim_rng_unit(&f->rng), u2 = sim_rng_unit(&f->rng);
	double z = sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * 3.14159265358979323846 * u2);
	double v = exp(f->mu + f->sigma * z);
	return v < 1 ? 1 : v > 1e12 ? (uint64_t)1e12 : (uint64_t)v;
}

static void record(fleet_t *f, uint32_t i, uint64_t t, uint64_t lat, int admitted, int refused)
{
	inst_t *x = &f->in[i];
	f->r->decisions++;
	uint64_t k = t / f->c->window_ns;
	if (k < f->nwin) {
		f->adm[k] += (uint64_t)admitted;
		f->refused[k] |= (unsigned char)refused;
	}
	f->r->admitted += (uint64_t)admitted;
	uint64_t *l = grow(x->lat, &x->caplat, x->nlat, sizeof(*l), &f->oom);
	if (!l)
		return;
	x->lat = l;
	x->lat[x->nlat++] = lat;
}

static int live(const inst_t *x, uint64_t t)
{
	return x->count > 0 && x->expiry > t;
}

/* ask (the I/O thread's sluice__lease_ask and send): one call in flight */
static void ask(fleet_t *f, uint32_t i, uint64_t t);

/* a decision, or a waiter looking again: 1 when it is decided */
static int try_decide(fleet_t *f, uint32_t i, uint64_t t, uint64_t start)
{
	inst_t *x = &f->in[i];
	if (x->expiry > t && x->count >= 1) {
		x->count--;
		f->r->lease_admits++;
		record(f, i, t, t - start, 1, 0);
		if (sluice__policy_prefetch(x->size, x->count) && !x->pending) {
			x->hot = 1;
			if (x->need < 1)
				x->need = 1;
			ask(f, i, t);
		}
		return 1;
	}
	if (t < x->refused_until && 1 >= x->refused_need) {
		f->r->cache_refusals++;
		record(f, i, t, t - start, 0, 1);
		return 1;
	}
	if (x->need < 1)
		x->need = 1;
	if (x->expiry > t) /* live but short: HOT */
		x->hot = 1;
	if (!x->pending)
		ask(f, i, t);
	return 0;
}

/* every waiting decision of @i looks again, in arrival order */
static void wake(fleet_t *f, uint32_t i, uint64_t t)
{
	inst_t *x = &f->in[i];
	uint32_t prev = UINT32_MAX;
	for (uint32_t k = x->head; k != UINT32_MAX;) {
		waiter_t *w = &f->w[k];
		uint32_t next = w->next;
		if (!w->done && try_decide(f, i, t, w->start))
			w->done = 1;
		if (w->done) { /* unlink */
			if (prev == UINT32_MAX)
				x->head = next;
			else
				f->w[prev].next = next;
			if (x->tail == k)
				x->tail = prev;
		} else {
			prev = k;
		}
		k = next;
	}
}

static void ask(fleet_t *f, uint32_t i, uint64_t t)
{
	inst_t *x = &f->in[i];
	uint64_t need = x->need ? x->need : 1;
	x->need = 0;
	int hot = x->hot;
	x->hot = 0;
	x->b = sluice__policy_next_b(x->b, hot, f->c->lease_max, x->last_remaining);
	uint64_t want = sluice__policy_want(x->b, hot, live(x, t) ? x->count : 0, need);
	if (want == 0)
		return; /* covered already: never here, as the ask follows a take
		         * that failed at this same instant */
	call_t *cs = grow(f->calls, &f->capcalls, f->ncalls, sizeof(*cs), &f->oom);
	if (!cs)
		return;
	f->calls = cs;
	uint32_t k = (uint32_t)f->ncalls++;
	f->calls[k] = (call_t){ .inst = i, .need = need, .want = want, .sent = t };
	x->pending = 1;
	f->r->round_trips++;
	uint64_t half = rtt(f) / 2;
	if (push(&f->h, t + half, EV_AT_REDIS, k) != 0)
		f->oom = 1;
}

/* fixed.lua at Redis time @s */
static void script(fleet_t *f, call_t *c, uint64_t s)
{
	uint64_t W = f->c->window_ns, L = f->c->limit, wid = s / W;
	if (wid != f->key_wid) {
		f->key_wid = wid;
		f->key_count = 0;
	}
	uint64_t room = L - f->key_count, wend = (wid + 1) * W;
	c->redis_ns = s;
	c->reset_ns = wend - s;
	if (room < c->need) {
		c->admitted = 0;
		c->remaining = room;
		c->retry_ns = wend - s;
		return;
	}
	uint64_t g = c->want < room ? c->want : room;
	f->key_count += g;
	c->admitted = 1;
	c->granted = g;
	c->remaining = room - g;
}

static void at_redis(fleet_t *f, uint32_t k, uint64_t t)
{
	const sim_fleet_config_t *c = f->c;
	uint64_t s = t > f->redis_free ? t : f->redis_free;
	if (c->fault == SIM_FLEET_PAUSE && s >= c->fault_at_ns && s < c->fault_at_ns + c->fault_for_ns)
		s = c->fault_at_ns + c->fault_for_ns;
	if (c->fault == SIM_FLEET_RESTART && !f->restarted && s >= c->fault_at_ns) {
		f->restarted = 1;
		f->key_wid = UINT64_MAX; /* every count forgotten: the key is new */
	}
	script(f, &f->calls[k], s);
	f->redis_free = s + c->service_ns;
	if (push(&f->h, f->redis_free + rtt(f) / 2, EV_REPLY, k) != 0)
		f->oom = 1;
}

static void reply(fleet_t *f, uint32_t k, uint64_t t)
{
	call_t *c = &f->calls[k];
	inst_t *x = &f->in[c->inst];
	x->pending = 0;
	x->last_remaining = c->remaining;
	if (c->admitted) {
		/* lease.c: expiry from the send, the window's end in Redis time */
		uint64_t expiry = c->sent + c->reset_ns, wid = c->redis_ns / f->c->window_ns + 1;
		if (live(x, t) && wid == x->wid) {
			x->count += c->granted;
			x->expiry = x->expiry < expiry ? x->expiry : expiry;
		} else {
			uint64_t lost = x->count; /* lapsed or replaced, unspent */
			if (lost) {
				f->r->lapsed += lost;
				x->b = sluice__policy_after_loss(x->b, lost);
			}
			x->count = c->granted;
			x->expiry = expiry;
		}
		x->size = x->count;
		x->wid = wid;
	} else {
		f->r->remote_refusals++;
		x->refused_need = c->need;
		x->refused_until = c->sent + c->retry_ns;
	}
	wake(f, c->inst, t);
}

static void budget(fleet_t *f, uint32_t k, uint64_t t)
{
	waiter_t *w = &f->w[k];
	if (w->done)
		return;
	w->done = 1;
	inst_t *x = &f->in[w->inst];
	uint64_t wid = t / f->c->window_ns;
	if (wid != x->fb_wid) {
		x->fb_wid = wid;
		x->fb_count = 0;
	}
	int ok = x->fb_count < f->share;
	x->fb_count += (uint64_t)ok;
	if (ok)
		f->r->fallback_admits++;
	else
		f->r->fallback_refusals++;
	record(f, w->inst, t, t - w->start, ok, !ok);
	wake(f, w->inst, t); /* unlinks it */
}

static void arrive(fleet_t *f, uint32_t i, uint64_t t)
{
	inst_t *x = &f->in[i];
	if (!try_decide(f, i, t, t)) {
		waiter_t *ws = grow(f->w, &f->capw, f->nw, sizeof(*ws), &f->oom);
		if (!ws)
			return;
		f->w = ws;
		uint32_t k = (uint32_t)f->nw++;
		f->w[k] = (waiter_t){ .inst = i, .next = UINT32_MAX, .start = t };
		if (x->head == UINT32_MAX)
			x->head = k;
		else
			f->w[x->tail].next = k;
		x->tail = k;
		if (push(&f->h, t + f->c->budget_ns, EV_BUDGET, k) != 0)
			f->oom = 1;
	}
	uint64_t gap = sim_rng_exp_ns(&f->rng, 1e9 / x->rate);
	if (gap < f->c->duration_ns - t && push(&f->h, t + gap, EV_ARRIVE, i) != 0)
		f->oom = 1;
}

int sim_fleet_check(const sim_fleet_config_t *c, char *err, size_t errlen)
{
	const char *bad = NULL;
	if (c->instances < 1 || c->instances > SIM_FLEET_MAX)
		bad = "--instances: 1 to 1000";
	else if (c->limit < c->instances)
		bad = "--limit: at least one permit per instance (the fallback's share L / N)";
	else if (c->window_ns == 0 || c->duration_ns < c->window_ns)
		bad = "--duration: at least one window";
	else if (c->lease_max < 1 || c->lease_max > 65536)
		bad = "--lease-max: 1 to 65536";
	else if (!(c->rate > 0) || c->budget_ns == 0)
		bad = "--rate and --budget: above 0";
	else if (c->rtt_p50_ns == 0 || c->rtt_p99_ns < c->rtt_p50_ns)
		bad = "--rtt: P50:P99 with 0 < P50 <= P99";
	else if (!(c->skew >= 0))
		bad = "--skew: 0 or more";
	else if (c->fault != SIM_FLEET_NONE && c->fault_at_ns >= c->duration_ns)
		bad = "--fault: within the run";
	if (bad)
		snprintf(err, errlen, "%s", bad);
	return bad ? -1 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static uint64_t pct(uint64_t *v, size_t n, unsigned p)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[(n - 1) * p / 100];
}

static void results(fleet_t *f, FILE *csv)
{
	const sim_fleet_config_t *c = f->c;
	sim_fleet_result_t *r = f->r;
	uint64_t sum = 0;
	r->windows = f->nwin;
	for (uint64_t k = 0; k < f->nwin; k++) {
		uint64_t a = f->adm[k];
		sum += a;
		if (a > c->limit && a - c->limit > r->worst_over)
			r->worst_over = a - c->limit;
		if (f->refused[k] && a < c->limit && c->limit - a > r->worst_under)
			r->worst_under = c->limit - a;
		if (csv)
			fprintf(csv, "%llu,%llu,%llu\n", (unsigned long long)k,
			        (unsigned long long)a, (unsigned long long)c->limit);
	}
	r->mean_admitted = f->nwin ? (double)sum / (double)f->nwin : 0;
	size_t total = 0;
	for (uint32_t i = 0; i < c->instances; i++) {
		inst_t *x = &f->in[i];
		total += x->nlat;
		uint64_t p = pct(x->lat, x->nlat, 99);
		if (p > r->worst_p99_ns)
			r->worst_p99_ns = p;
	}
	uint64_t *all = malloc((total ? total : 1) * sizeof(*all));
	if (!all) {
		f->oom = 1;
		return;
	}
	size_t n = 0;
	for (uint32_t i = 0; i < c->instances; i++) {
		memcpy(all + n, f->in[i].lat, f->in[i].nlat * sizeof(*all));
		n += f->in[i].nlat;
	}
	r->p50_ns = pct(all, n, 50);
	r->p99_ns = pct(all, n, 99);
	free(all);
}

int sim_fleet_run(const sim_fleet_config_t *c, sim_fleet_result_t *out, FILE *csv, char *err,
                  size_t errlen)
{
	if (sim_fleet_check(c, err, errlen) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	fleet_t f = { .c = c, .r = out, .key_wid = UINT64_MAX };
	sim_rng_seed(&f.rng, c->seed);
	f.mu = log((double)c->rtt_p50_ns);
	f.sigma = (log((double)c->rtt_p99_ns) - f.mu) / 2.326348; /* z of the 99th percentile */
	f.share = c->limit / c->instances;
	f.nwin = c->duration_ns / c->window_ns;
	f.in = calloc(c->instances, sizeof(*f.in));
	f.adm = calloc(f.nwin, sizeof(*f.adm));
	f.refused = calloc(f.nwin, 1);
	int rc = -1;
	if (!f.in || !f.adm || !f.refused)
		goto out;
	double wsum = 0;
	for (uint32_t i = 0; i < c->instances; i++)
		wsum += 1.0 / pow((double)(i + 1), c->skew);
	for (uint32_t i = 0; i < c->instances; i++) {
		inst_t *x = &f.in[i];
		x->rate = c->rate * (1.0 / pow((double)(i + 1), c->skew)) / wsum;
		x->b = 1;
		x->last_remaining = c->limit;
		x->fb_wid = UINT64_MAX;
		x->head = x->tail = UINT32_MAX;
		uint64_t first = sim_rng_exp_ns(&f.rng, 1e9 / x->rate);
		if (first < c->duration_ns && push(&f.h, first, EV_ARRIVE, i) != 0)
			goto out;
	}
	while (f.h.n && !f.oom) {
		event_t e = pop(&f.h);
		switch (e.kind) {
		case EV_ARRIVE: arrive(&f, e.who, e.t); break;
		case EV_AT_REDIS: at_redis(&f, e.who, e.t); break;
		case EV_REPLY: reply(&f, e.who, e.t); break;
		default: budget(&f, e.who, e.t); break;
		}
	}
	if (!f.oom)
		results(&f, csv);
	rc = f.oom ? -1 : 0;
out:
	if (rc != 0)
		snprintf(err, errlen, "out of memory");
	if (f.in)
		for (uint32_t i = 0; i < c->instances; i++)
			free(f.in[i].lat);
	free(f.in);
	free(f.adm);
	free(f.refused);
	free(f.h.e);
	free(f.calls);
	free(f.w);
	return rc;
}
