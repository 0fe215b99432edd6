/* SPDX-License-Identifier: MIT */
/*
 * algo.c - --algo specifications: NAME[:KEY=VALUE,...] -> a limiter.
 *
 * DESIGN: every algorithm takes its defaults from the policy the run
 * judges (--limit L per --window W), so `--algo fixed --algo ring --algo
 * gcra` compares like with like, and a key only overrides one parameter.
 * The specification is checked by building the limiter once, with a
 * manual clock: the error a user sees is the library's own (SLUICE_E*,
 * sluice_strerror), never a second opinion kept here that could drift from
 * it.  Limiters are built through the generic handle (sluice/limiter.h);
 * the leaky bucket's shaper books a later slot (sluice_limiter_reserve)
 * where every other algorithm is asked with sluice_limiter_acquire.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

enum ptype { COUNT, DURATION, RATE, WORD };

struct param {
	const char *key;
	enum ptype type;
	const char *help;
};

struct algo_def {
	const char *name; /* as sim's help shows it; sluice_parse_algo() reads the rest */
	sluice_algo_t kind;
	const char *what;
	struct param p[6];
};

static const struct algo_def defs[] = {
	{ "fixed", SLUICE_ALGO_FIXED, "fixed window, L per aligned W",
	  { { "limit", COUNT, "L" }, { "window", DURATION, "W" } } },
	{ "ring", SLUICE_ALGO_WINDOW, "sliding ring of N buckets",
	  { { "buckets", COUNT, "10" },
	    { "limit", COUNT, "L" },
	    { "window", DURATION, "W" },
	    { "lease", COUNT, "0 (per-CPU lease cap B)" } } },
	{ "gcra", SLUICE_ALGO_GCRA, "token bucket (GCRA), rate per period, burst b",
	  { { "rate", RATE, "L per W (10/s, 10r/s, 5/250ms)" }, { "burst", COUNT, "L" } } },
	{ "leaky", SLUICE_ALGO_LEAKY, "leaky bucket: meter (burst D+1) or shaper (paced)",
	  { { "rate", RATE, "L per W" },
	    { "mode", WORD, "meter (or shaper)" },
	    { "depth", COUNT, "L-1 (meter)" },
	    { "delay", DURATION, "W (shaper: longest queueing delay)" } } },
	{ "log", SLUICE_ALGO_LOG, "exact sliding log, L in any W",
	  { { "limit", COUNT, "L" }, { "window", DURATION, "W" } } },
	{ "warmup", SLUICE_ALGO_WARMUP, "Guava SmoothWarmingUp, stable rate per period",
	  { { "rate", RATE, "L per W" }, { "warmup", DURATION, "W" } } },
	{ "decay", SLUICE_ALGO_DECAY, "exponentially decayed count <= L",
	  { { "limit", COUNT, "L" }, { "half_life", DURATION, "W ln 2 (long-run rate L/W)" } } },
	{ "inflight", SLUICE_ALGO_INFLIGHT, "at most K in flight, each held for `hold`",
	  { { "limit", COUNT, "L" }, { "hold", DURATION, "W" } } },
};

#define NDEFS (sizeof(defs) / sizeof(defs[0]))

/* The other names sluice_parse_algo() reads for @kind, after ", " each. */
static void print_aliases(FILE *f, const char *shown, sluice_algo_t kind)
{
	const char *sep = "; also: ";
	const char *canon = sluice_algo_name(kind);
	if (canon && strcmp(canon, shown) != 0) {
		fprintf(f, "%s%s", sep, canon);
		sep = ", ";
	}
#define ALIAS(K, alias)                                                              \
	if (SLUICE_ALGO_##K == kind && strcmp(#alias, shown) != 0) {                 \
		fprintf(f, "%s%s", sep, #alias);                                     \
		sep = ", ";                                                          \
	}
	SLUICE_ALGO_ALIASES(ALIAS)
#undef ALIAS
}

void sim_algo_help(FILE *f)
{
	for (size_t i = 0; i < NDEFS; i++) {
		fprintf(f, "    %-9s %s", defs[i].name, defs[i].what);
		print_aliases(f, defs[i].name, defs[i].kind);
		fputc('\n', f);
		for (size_t k = 0; k < 6 && defs[i].p[k].key; k++)
			fprintf(f, "      %-10s default %s\n", defs[i].p[k].key, defs[i].p[k].help);
	}
}

static void set_clock(sluice_limiter_config_t *c, const sluice_clock_t *clock)
{
	switch (c->algo) {
#define SET(K, name)                  \
	case SLUICE_ALGO_##K:         \
		c->name.clock = clock; \
		break;
		SLUICE_ALGOS(SET)
#undef SET
	default:
		break;
	}
}

int sim_lim_new(const sim_algo_t *a, sluice_clock_t *clock, sim_lim_t *l)
{
	sluice_limiter_config_t c = a->cfg;
	set_clock(&c, clock);
	l->h = NULL;
	l->reserve = a->shaper;
	return sluice_limiter_new(&c, &l->h);
}

uint64_t sim_algo_late_ns(const sim_algo_t *a)
{
	return a->shaper ? a->cfg.leaky.max_delay_ns : 0;
}

int sim_lim_take(sim_lim_t *l, uint64_t n, sluice_decision_t *d)
{
	if (l->reserve)
		return sluice_limiter_reserve(l->h, n, UINT64_MAX, d);
	return sluice_limiter_acquire(l->h, n, d);
}

int sim_lim_release(sim_lim_t *l, uint64_t n)
{
	return l->h ? sluice_limiter_release(l->h, n) : 0;
}

void sim_lim_free(sim_lim_t *l)
{
	sluice_limiter_free(l->h);
	l->h = NULL;
}

/* apply KEY=VALUE to @a; returns a reason or NULL */
static const char *apply(const struct algo_def *def, sim_algo_t *a, const char *key,
                         const char *val, char *why, size_t len)
{
	const struct param *p = NULL;
	for (size_t k = 0; k < 6 && def->p[k].key; k++)
		if (strcmp(def->p[k].key, key) == 0)
			p = &def->p[k];
	if (!p) {
		size_t off = (size_t)snprintf(why, len, "unknown parameter '%s' (%s takes", key,
		                              def->name);
		for (size_t k = 0; k < 6 && def->p[k].key && off < len; k++)
			off += (size_t)snprintf(why + off, len - off, "%s%s", k ? ", " : " ",
			                        def->p[k].key);
		if (off < len)
			snprintf(why + off, len - off, ")");
		return why;
	}
	uint64_t v = 0, period = 0;
	const char *e = NULL;
	sluice_parse_error_t pe;
	if (p->type == COUNT)
		e = sim_parse_count(val, &v);
	else if (p->type == DURATION)
		e = sim_parse_duration(val, &v);
	else if (p->type == RATE && sluice_parse_rate(val, strlen(val), &v, &period, &pe) != 0)
		e = pe.message; /* the rules file's and nginx's rate grammar */
	if (e) {
		snprintf(why, len, "%s=%s: %s", key, val, e);
		return why;
	}
	sluice_limiter_config_t *c = &a->cfg;
	if (p->type == RATE) { /* gcra, leaky, warmup: rate and period at once */
		uint64_t *r = def->kind == SLUICE_ALGO_GCRA    ? &c->gcra.rate
		              : def->kind == SLUICE_ALGO_LEAKY ? &c->leaky.rate
		                                               : &c->warmup.rate;
		uint64_t *per = def->kind == SLUICE_ALGO_GCRA    ? &c->gcra.period_ns
		                : def->kind == SLUICE_ALGO_LEAKY ? &c->leaky.period_ns
		                                                 : &c->warmup.period_ns;
		*r = v;
		*per = period;
		return NULL;
	}
	if (strcmp(key, "mode") == 0) { /* only the leaky bucket has modes */
		int m = strcmp(val, "meter") == 0 ? 0 : strcmp(val, "shaper") == 0 ? 1 : -1;
		if (m < 0) {
			snprintf(why, len, "mode=%s: use meter or shaper", val);
			return why;
		}
		a->shaper = m;
		c->leaky.mode = m ? SLUICE_LEAKY_SHAPER : SLUICE_LEAKY_METER;
		return NULL;
	}
	if (strcmp(key, "lease") == 0) {
		if (v > UINT32_MAX) {
			snprintf(why, len, "lease=%s: too large", val);
			return why;
		}
		c->window.lease = (uint32_t)v; /* range checked by init */
		return NULL;
	}
	if (strcmp(key, "buckets") == 0) {
		if (v > UINT32_MAX) {
			snprintf(why, len, "buckets=%s: too large", val);
			return why;
		}
		c->window.buckets = (uint32_t)v;
		return NULL;
	}
	/* the rest map onto one field of the kind's config */
	switch (def->kind) {
	case SLUICE_ALGO_FIXED:
		*(key[0] == 'l' ? &c->fixed.limit : &c->fixed.window_ns) = v;
		break;
	case SLUICE_ALGO_WINDOW:
		*(key[0] == 'l' ? &c->window.limit : &c->window.window_ns) = v;
		break;
	case SLUICE_ALGO_LOG:
		*(key[0] == 'l' ? &c->log.limit : &c->log.window_ns) = v;
		break;
	case SLUICE_ALGO_GCRA:
		c->gcra.burst = v;
		break;
	case SLUICE_ALGO_LEAKY:
		*(key[1] == 'e' && key[2] == 'p' ? &c->leaky.depth : &c->leaky.max_delay_ns) = v;
		break;
	case SLUICE_ALGO_WARMUP:
		c->warmup.warmup_ns = v;
		break;
	case SLUICE_ALGO_DECAY:
		*(key[0] == 'l' ? &c->decay.limit : &c->decay.half_life_ns) = v;
		break;
	case SLUICE_ALGO_INFLIGHT:
		if (key[0] == 'l')
			c->inflight.limit = v;
		else
			a->hold_ns = v;
		break;
	default:
		break;
	}
	return NULL;
}

int sim_algo_parse(const char *spec, uint64_t limit, uint64_t window_ns, sim_algo_t *a,
                   char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	if (strlen(spec) >= sizeof(a->label)) {
		snprintf(err, errlen, "algo '%.40s...': specification too long", spec);
		return -1;
	}
	strcpy(a->label, spec);
	char name[32];
	size_t nl = strcspn(spec, ":");
	if (nl >= sizeof(name))
		nl = sizeof(name) - 1;
	memcpy(name, spec, nl);
	name[nl] = '\0';
	/* the names and aliases every front end reads (sluice/parse.h) */
	const struct algo_def *def = NULL;
	sluice_algo_t kind = SLUICE_ALGO_NONE;
	sluice_parse_error_t pe;
	if (sluice_parse_algo(name, nl, &kind, &pe) == 0)
		for (size_t i = 0; i < NDEFS; i++)
			if (defs[i].kind == kind)
				def = &defs[i];
	if (!def) {
		snprintf(err, errlen, "algo '%s': name '%s': %s", spec, name,
		         pe.message);
		return -1;
	}
	sluice_limiter_config_t *c = &a->cfg;
	c->algo = def->kind;
	switch (def->kind) {
	case SLUICE_ALGO_FIXED:
		c->fixed = (sluice_fixed_config_t){ .limit = limit, .window_ns = window_ns };
		break;
	case SLUICE_ALGO_WINDOW:
		c->window = (sluice_window_config_t){ .limit = limit, .window_ns = window_ns,
			                              .buckets = 10 };
		break;
	case SLUICE_ALGO_GCRA:
		c->gcra = (sluice_gcra_config_t){ .rate = limit, .period_ns = window_ns,
			                          .burst = limit };
		break;
	case SLUICE_ALGO_LEAKY:
		c->leaky = (sluice_leaky_config_t){ .rate = limit, .period_ns = window_ns,
			                            .mode = SLUICE_LEAKY_METER,
			                            .depth = limit ? limit - 1 : 0 };
		break;
	case SLUICE_ALGO_LOG:
		c->log = (sluice_log_config_t){ .limit = limit, .window_ns = window_ns };
		break;
	case SLUICE_ALGO_WARMUP:
		c->warmup = (sluice_warmup_config_t){ .rate = limit, .period_ns = window_ns,
			                              .warmup_ns = window_ns };
		break;
	case SLUICE_ALGO_DECAY:
		/* h = W ln 2: the long-run rate L ln2 / h is L per W */
		c->decay = (sluice_decay_config_t){
			.limit = limit,
			.half_life_ns = (uint64_t)((double)window_ns * 0.6931471805599453 + 0.5)
		};
		break;
	case SLUICE_ALGO_INFLIGHT:
		c->inflight = (sluice_inflight_config_t){ .limit = limit };
		a->hold_ns = window_ns;
		break;
	default:
		break;
	}
	char buf[sizeof(a->label)], why[256];
	strcpy(buf, spec);
	char *p = buf[nl] == ':' ? buf + nl + 1 : NULL;
	int leaky_delay_set = 0, leaky_depth_set = 0;
	while (p && *p) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		char *eq = strchr(p, '=');
		if (!eq || eq == p) {
			snprintf(err, errlen, "algo '%s': '%s' is not KEY=VALUE", spec, p);
			return -1;
		}
		*eq = '\0';
		const char *e = apply(def, a, p, eq + 1, why, sizeof(why));
		if (e) {
			snprintf(err, errlen, "algo '%s': %s", spec, e);
			return -1;
		}
		leaky_delay_set |= def->kind == SLUICE_ALGO_LEAKY && strcmp(p, "delay") == 0;
		leaky_depth_set |= def->kind == SLUICE_ALGO_LEAKY && strcmp(p, "depth") == 0;
		p = comma ? comma + 1 : NULL;
	}
	if (a->shaper) {
		/* a shaper queues instead of holding a burst: depth 0, and the
		 * queue is a time (W unless given) */
		if (leaky_depth_set) {
			snprintf(err, errlen,
			         "algo '%s': depth is the meter's burst; a shaper's queue is "
			         "delay=DURATION",
			         spec);
			return -1;
		}
		c->leaky.depth = 0;
		if (!leaky_delay_set)
			c->leaky.max_delay_ns = window_ns;
	}
	if (def->kind == SLUICE_ALGO_INFLIGHT && a->hold_ns == 0) {
		snprintf(err, errlen, "algo '%s': hold must be above 0", spec);
		return -1;
	}
	/* the library's own verdict on the parameters */
	sluice_clock_t manual;
	sluice_clock_manual_init(&manual, 0);
	sim_lim_t l;
	int rc = sim_lim_new(a, &manual, &l);
	if (rc < 0) {
		snprintf(err, errlen, "algo '%s': %s (%s)", spec, sluice_strerror(rc),
		         sluice_err_name(rc));
		return -1;
	}
	sim_lim_free(&l);
	return 0;
}
