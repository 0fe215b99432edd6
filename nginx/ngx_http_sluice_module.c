/* SPDX-License-Identifier: MIT */
/*
 * ngx_http_sluice_module.c - sluice's keyed tables in front of nginx's
 * content: per-key rate limits decided lock-free by every worker.
 *
 *   sluice_zone name size=10m algorithm=gcra rate=100r/s burst=20 [policy=evict];
 *   sluice_limit zone=name key=$binary_remote_addr [status=429] [delay=N] [dry_run]
 *                [empty_key=shared|pass];
 *   sluice_headers on | off;          (RateLimit headers on admissions)
 *   sluice_metrics;                   (content handler: Prometheus text 0.0.4)
 *   variables $sluice_status, $sluice_retry_after, $sluice_remaining.
 *
 * DESIGN
 *
 * State.  Each sluice_zone is an nginx shared-memory zone holding, in
 * memory from its slab pool, a small header (this module's, with the
 * outcome counters the metrics serve) and one pointer-free keyed table
 * (sluice/keyed.h).  The master formats the table when the zone is new
 * (init_zone, before the workers are forked) and attaches a handle to it;
 * the handle is process-local memory in the cycle's pool, so every worker
 * inherits it by fork(): the zone is mapped at the same address in all of
 * them.  A decision is sluice_keyed_acquire_at(), or for several limits
 * one sluice_keyed_acquire_many_at() (SLUICE_KEYED_STOP): lock-free (CASes
 * on the keys' slots), no allocation, no ngx_shmtx.  The slab pool's own
 * mutex is taken only by init_zone in the master, never on a request.
 *
 * Several limits on one location are all or nothing: the limits are asked
 * in order (every key found first, then one batch: their misses overlap);
 * when one refuses, every permit the earlier ones took for this request
 * is given back with sluice_keyed_refund() (exact while the key's
 * state is what the admission left; otherwise the permits stay counted:
 * fewer admissions later, never more).  A dry_run limit that refuses lets
 * the request go on and is counted as rejected_dry_run.
 *
 * Reload.  nginx hands init_zone the previous cycle's context when a zone
 * keeps its name and size; the table is then kept (every key's state) and
 * the parameters that can change live are applied with sluice_keyed_set_*
 * (no refill, no reset: keyed.h, LIVE PARAMETERS).  What fixes the table's
 * layout (algorithm, window, buckets, policy) and the key expression cannot
 * change under a running table: the reload is refused, as limit_req refuses
 * a changed key; a new zone name (or size) starts a new table.
 *
 * Time.  Decisions read CLOCK_MONOTONIC (sluice_clock_monotonic: a vDSO
 * call, 1 ns steps).  Not nginx's ngx_current_msec (through the _at
 * variants): it moves in whole milliseconds and only once per event-loop
 * iteration, so every request of a millisecond would share one time, and
 * at 2000r/s with no burst (T = 0.5 ms) at most one would pass per ms:
 * 1,000 per second, limit_req's own rounding.  Not sluice's cached clock: its ticker is a thread, a
 * worker is forked without it (lib/clock.c falls back to CLOCK_MONOTONIC
 * in a fork child, exactly), and starting one per worker costs a thread
 * for a 1 ms clock that would also refuse sub-ms taus.
 *
 * Empty keys.  A key expression that evaluates to the empty string (an
 * absent variable or an empty value: nginx does not tell them apart) is,
 * with empty_key=shared (the default), counted under one key of the zone,
 * one zero byte, the rules engine's absent key: every request without a
 * value shares it, so leaving a header out evades nothing.  empty_key=pass
 * does not limit such a request at all (limit_req's behaviour).
 *
 * Configuration errors carry nginx's " in FILE:LINE": a parameter given
 * twice is refused where it is read (never "the last wins"); an undefined
 * zone or an unknown variable in key= can only be known once the http
 * block is complete (a sluice_zone, a map may come later), so each
 * sluice_limit keeps its file and line and postconfiguration checks it.
 *
 * Delay.  delay=N on a GCRA or LEAKY zone: an admitted request whose key
 * already held more than N + 1 permits' worth of debt (reset_ns, the time
 * until its bucket is full again) waits reset_ns - (N + 1) T on an nginx
 * timer (never a sleep), which is when its GCRA slot comes: the TAT the
 * admission advanced is the booking.  This is limit_req's delay=N.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <sluice/sluice.h>

#include "ngx_http_sluice.h"

#define NGX_HTTP_SLUICE_MAGIC 0x736c7569636e6778ULL /* "sluicngx" */
#define NGX_HTTP_SLUICE_CELLS 16
#define NGX_HTTP_SLUICE_LIMITS 8 /* sluice_limit directives per location */

static ngx_str_t ngx_http_sluice_status_names[] = {
	ngx_string(""),
	ngx_string("PASSED"),
	ngx_string("DELAYED"),
	ngx_string("REJECTED"),
	ngx_string("REJECTED_DRY_RUN"),
	ngx_string(""), /* REFUNDED, ERRORS: counted, never a request's status */
	ngx_string(""),
	ngx_string("STALE"),
};

static const char *ngx_http_sluice_outcome_labels[] = {
	"", "passed", "delayed", "rejected", "rejected_dry_run", "refunded", "error",
};

/* One statistics cell per worker (modulo 16), on its own cache line, so
 * workers do not bounce one line on every request. */
typedef struct {
	_Alignas(64) _Atomic uint64_t count[SLUICE_NGX_OUTCOMES];
} ngx_http_sluice_cell_t;

/* In the shared zone: written once by init_zone (master), read by all. */
typedef struct {
	uint64_t magic;
	sluice_keyed_config_t cfg; /* as the table was formatted */
	void *table;               /* slab memory: same address in every process */
	size_t table_bytes;
	ngx_http_sluice_cell_t cells[NGX_HTTP_SLUICE_CELLS];
} ngx_http_sluice_sh_t;

/* Per zone, per cycle (cycle pool). */
typedef struct {
	ngx_str_t name;
	ngx_str_t key;               /* the key expression's source, "" if unused */
	ngx_uint_t defined;          /* a sluice_zone directive filled cfg      */
	ngx_uint_t delayed;          /* a sluice_limit with delay= uses it      */
	sluice_keyed_config_t cfg;
	ngx_shm_zone_t *shm_zone;
	ngx_http_sluice_sh_t *sh;
	sluice_keyed_t keyed;        /* attached in init_zone, inherited by fork */
	/* The RateLimit headers' name of the zone: cut to the helpers' most,
	 * NUL-terminated once (ngx_http_sluice_get_zone). */
	char hname[SLUICE_HTTP_NAME_MAX + 1];
	/* This process's RateLimit-Policy value, formatted for the table's
	 * parameters of era policy_era (ngx_http_sluice_rate_headers): again
	 * only when a live change moves the era.  policy_len <= 0: no policy
	 * (INFLIGHT, or the helper refused). */
	ngx_uint_t policy_valid;
	uint64_t policy_era;
	int policy_len;
	char policy[SLUICE_HTTP_FIELD_MAX];
} ngx_http_sluice_zone_t;

typedef struct {
	ngx_shm_zone_t *shm_zone;
	ngx_http_complex_value_t key;
	ngx_int_t var;               /* key= is one variable: its index, else
	                              * NGX_DECLINED (ngx_http_sluice_key)    */
	ngx_uint_t status;
	ngx_int_t delay;             /* -1: no delay (pass or refuse at once) */
	ngx_uint_t dry_run;
	ngx_uint_t empty_pass;       /* empty_key=pass: an empty key is not limited */
} ngx_http_sluice_limit_t;

/* A sluice_limit as written, checked when the http block is complete
 * (ngx_http_sluice_init): its zone may be defined and its key's variables
 * may be added (map, geo, set) later in the block than the limit itself. */
typedef struct {
	ngx_http_sluice_zone_t *zone;
	ngx_str_t key;               /* the key expression's source */
	u_char *file;                /* where it was written (as nginx's upstream */
	ngx_uint_t line;             /* keeps it, for "no port in upstream") */
} ngx_http_sluice_ref_t;

typedef struct {
	ngx_array_t *limits;         /* of ngx_http_sluice_limit_t */
	ngx_flag_t headers;
} ngx_http_sluice_loc_conf_t;

typedef struct {
	ngx_array_t zones;           /* of ngx_http_sluice_zone_t * */
	ngx_array_t refs;            /* of ngx_http_sluice_ref_t */
} ngx_http_sluice_main_conf_t;

/*
 * The key of a request whose key expression is empty (empty_key=shared):
 * one zero byte, the rules engine's absent key (rules.h, DECIDE), so the two
 * front ends count a missing value alike.  No other request has it: keys
 * are never empty, and a key of one zero byte would need the expression to
 * yield a lone NUL, which nginx refuses in header lines and in the decoded
 * URI.
 */
static const u_char ngx_http_sluice_absent_key[1] = { 0 };

/* INFLIGHT slots held by a request, released when its pool goes. */
typedef struct {
	ngx_http_sluice_zone_t *zone;
	ngx_str_t key;
} ngx_http_sluice_release_t;

static ngx_int_t ngx_http_sluice_init(ngx_conf_t *cf);
static ngx_int_t ngx_http_sluice_add_variables(ngx_conf_t *cf);
static void *ngx_http_sluice_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_sluice_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_sluice_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *ngx_http_sluice_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_sluice_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_sluice_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

static ngx_command_t ngx_http_sluice_commands[] = {
	{ ngx_string("sluice_zone"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE,
	  ngx_http_sluice_zone, 0, 0, NULL },
	{ ngx_string("sluice_limit"),
	  NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_2MORE,
	  ngx_http_sluice_limit, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
	{ ngx_string("sluice_headers"),
	  NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
	  ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
	  offsetof(ngx_http_sluice_loc_conf_t, headers), NULL },
	{ ngx_string("sluice_metrics"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
	  ngx_http_sluice_metrics, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
	ngx_null_command
};

static ngx_http_module_t ngx_http_sluice_module_ctx = {
	ngx_http_sluice_add_variables, /* preconfiguration */
	ngx_http_sluice_init,          /* postconfiguration */
	ngx_http_sluice_create_main_conf, NULL,
	NULL, NULL,
	ngx_http_sluice_create_loc_conf, ngx_http_sluice_merge_loc_conf
};

ngx_module_t ngx_http_sluice_module = {
	NGX_MODULE_V1,
	&ngx_http_sluice_module_ctx, ngx_http_sluice_commands, NGX_HTTP_MODULE,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NGX_MODULE_V1_PADDING
};

/* ---- parsing ------------------------------------------------------------- */

/* Rates, durations, sizes and algorithm names are the library's grammar
 * (sluice/parse.h), the rules file's and sluice-sim's: a spelling one
 * accepts, all accept, and a bad one reads the same behind our "in
 * FILE:LINE".  This logs its message: "<directive>: invalid <what>
 * "<arg>": <why>". */
static char *ngx_http_sluice_bad_value(ngx_conf_t *cf, ngx_command_t *cmd, const char *what,
                                       ngx_str_t *arg, const sluice_parse_error_t *e)
{
	ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: invalid %s \"%V\": %s", &cmd->name, what, arg,
	                   e->message);
	return NGX_CONF_ERROR;
}

static ngx_int_t ngx_http_sluice_parse_u64(u_char *p, size_t len, uint64_t *v)
{
	uint64_t x = 0;
	if (len == 0 || len > 18)
		return NGX_ERROR;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return NGX_ERROR;
		x = x * 10 + (uint64_t)(p[i] - '0');
	}
	*v = x;
	return NGX_OK;
}

/*
 * The parameter @arg is, among @names ("rate=" takes a value after the
 * '=', "dry_run" is a bare word): its index, with @val set to the text
 * after the '='.  Each parameter at most once per directive: @seen[p] is
 * the argument that gave names[p] (len 0: none yet), and a second one is
 * refused by name, where it is written (ngx_conf_log_error: " in
 * FILE:LINE"), rather than the last silently winning.  NGX_ERROR, logged,
 * for a repeated or an unknown parameter.
 */
static ngx_int_t ngx_http_sluice_param(ngx_conf_t *cf, ngx_command_t *cmd, const ngx_str_t *names,
                                       ngx_uint_t n, ngx_str_t *seen, ngx_str_t *arg,
                                       ngx_str_t *val)
{
	for (ngx_uint_t p = 0; p < n; p++) {
		const ngx_str_t *nm = &names[p];
		ngx_uint_t valued = nm->data[nm->len - 1] == '=';
		if (valued ? arg->len < nm->len : arg->len != nm->len)
			continue;
		if (ngx_strncmp(arg->data, nm->data, nm->len) != 0)
			continue;
		if (seen[p].len) {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
			                   "%V: the parameter \"%V\" is given twice (\"%V\", then \"%V\")",
			                   &cmd->name, nm, &seen[p], arg);
			return NGX_ERROR;
		}
		seen[p] = *arg;
		val->data = arg->data + nm->len;
		val->len = arg->len - nm->len;
		return (ngx_int_t)p;
	}
	ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: invalid parameter \"%V\"", &cmd->name, arg);
	return NGX_ERROR;
}

static ngx_http_sluice_zone_t *ngx_http_sluice_get_zone(ngx_conf_t *cf, ngx_str_t *name,
                                                        size_t size)
{
	ngx_shm_zone_t *shm_zone = ngx_shared_memory_add(cf, name, size, &ngx_http_sluice_module);
	if (shm_zone == NULL)
		return NULL;
	if (shm_zone->data)
		return shm_zone->data;
	ngx_http_sluice_zone_t *z = ngx_pcalloc(cf->pool, sizeof(*z));
	if (z == NULL)
		return NULL;
	z->name = *name;
	size_t hlen = ngx_min(name->len, (size_t)SLUICE_HTTP_NAME_MAX);
	ngx_memcpy(z->hname, name->data, hlen);
	z->hname[hlen] = '\0';
	z->shm_zone = shm_zone;
	shm_zone->data = z;
	return z;
}

static ngx_int_t ngx_http_sluice_init_zone(ngx_shm_zone_t *shm_zone, void *data);

/* sluice_zone's parameters, in the order of zone_params. */
enum { ZP_SIZE, ZP_ALGORITHM, ZP_RATE, ZP_BURST, ZP_LIMIT, ZP_WINDOW, ZP_BUCKETS, ZP_POLICY,
       ZP_COUNT };

static const ngx_str_t zone_params[ZP_COUNT] = {
	ngx_string("size="), ngx_string("algorithm="), ngx_string("rate="), ngx_string("burst="),
	ngx_string("limit="), ngx_string("window="), ngx_string("buckets="), ngx_string("policy="),
};

static char *ngx_http_sluice_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_str_t *value = cf->args->elts, name = value[1], s, seen[ZP_COUNT];
	ssize_t size = 0;
	sluice_keyed_config_t c;
	ngx_uint_t have_rate, have_burst, have_limit, have_window, have_policy;
	ngx_http_sluice_main_conf_t *smcf;

	ngx_memzero(seen, sizeof(seen));

	(void)conf;
	ngx_memzero(&c, sizeof(c));
	c.flags = SLUICE_KEYED_HASH_LONG_KEYS; /* any key length, as limit_req */

	for (ngx_uint_t i = 2; i < cf->args->nelts; i++) {
		ngx_int_t p = ngx_http_sluice_param(cf, cmd, zone_params, ZP_COUNT, seen, &value[i], &s);
		if (p == NGX_ERROR)
			return NGX_CONF_ERROR;
		switch (p) {
		case ZP_SIZE: {
			uint64_t bytes;
			sluice_parse_error_t e;
			if (sluice_parse_size((const char *)s.data, s.len, &bytes, &e) != 0)
				return ngx_http_sluice_bad_value(cf, cmd, "size", &value[i], &e);
			if (bytes < 8 * ngx_pagesize || bytes > NGX_MAX_SIZE_T_VALUE / 2) {
				ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				                   "%V: zone \"%V\" is too %s (%V; at least %uz)",
				                   &cmd->name, &name,
				                   bytes < 8 * ngx_pagesize ? "small" : "large", &value[i],
				                   8 * ngx_pagesize);
				return NGX_CONF_ERROR;
			}
			size = (ssize_t)bytes;
			break;
		}
		case ZP_ALGORITHM: {
			sluice_parse_error_t e;
			if (sluice_parse_algo((const char *)s.data, s.len, &c.algo, &e) != 0)
				return ngx_http_sluice_bad_value(cf, cmd, "algorithm", &value[i], &e);
			if (c.algo != SLUICE_ALGO_GCRA && c.algo != SLUICE_ALGO_LEAKY &&
			    c.algo != SLUICE_ALGO_FIXED && c.algo != SLUICE_ALGO_WINDOW &&
			    c.algo != SLUICE_ALGO_INFLIGHT) {
				ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				                   "%V: \"%V\": a zone is a keyed table, which holds "
				                   "gcra, leaky, fixed, window and inflight",
				                   &cmd->name, &value[i]);
				return NGX_CONF_ERROR;
			}
			break;
		}
		case ZP_RATE: {
			sluice_parse_error_t e;
			if (sluice_parse_rate((const char *)s.data, s.len, &c.rate, &c.period_ns, &e) != 0)
				return ngx_http_sluice_bad_value(cf, cmd, "rate", &value[i], &e);
			break;
		}
		case ZP_BURST:
			if (ngx_http_sluice_parse_u64(s.data, s.len, &c.burst) != NGX_OK) {
				ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: invalid burst \"%V\"",
				                   &cmd->name, &value[i]);
				return NGX_CONF_ERROR;
			}
			c.depth = c.burst;
			break;
		case ZP_LIMIT:
			if (ngx_http_sluice_parse_u64(s.data, s.len, &c.limit) != NGX_OK) {
				ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: invalid limit \"%V\"",
				                   &cmd->name, &value[i]);
				return NGX_CONF_ERROR;
			}
			break;
		case ZP_WINDOW: {
			sluice_parse_error_t e;
			if (sluice_parse_duration((const char *)s.data, s.len, &c.window_ns, &e) != 0)
				return ngx_http_sluice_bad_value(cf, cmd, "window", &value[i], &e);
			break;
		}
		case ZP_BUCKETS: {
			uint64_t b;
			if (ngx_http_sluice_parse_u64(s.data, s.len, &b) != NGX_OK || b > 0xffffffffULL) {
				ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: invalid buckets \"%V\"",
				                   &cmd->name, &value[i]);
				return NGX_CONF_ERROR;
			}
			c.buckets = (uint32_t)b;
			break;
		}
		default: /* ZP_POLICY */
			if (s.len == 6 && ngx_strncmp(s.data, "reject", 6) == 0)
				c.policy = SLUICE_KEYED_REJECT;
			else if (s.len == 5 && ngx_strncmp(s.data, "allow", 5) == 0)
				c.policy = SLUICE_KEYED_ALLOW;
			else if (s.len == 5 && ngx_strncmp(s.data, "evict", 5) == 0)
				c.policy = SLUICE_KEYED_EVICT;
			else {
				ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				                   "%V: unknown \"%V\" (reject, allow, evict)",
				                   &cmd->name, &value[i]);
				return NGX_CONF_ERROR;
			}
			break;
		}
	}
	have_rate = seen[ZP_RATE].len != 0;
	have_burst = seen[ZP_BURST].len != 0;
	have_limit = seen[ZP_LIMIT].len != 0;
	have_window = seen[ZP_WINDOW].len != 0;
	have_policy = seen[ZP_POLICY].len != 0;

	if (size == 0 || c.algo == SLUICE_ALGO_NONE) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V \"%V\" needs size= and algorithm=",
		                   &cmd->name, &name);
		return NGX_CONF_ERROR;
	}
	/* Each algorithm's parameters, and only those: a parameter the
	 * algorithm would ignore is a mistake worth saying. */
	ngx_uint_t bucket_algo = c.algo == SLUICE_ALGO_GCRA || c.algo == SLUICE_ALGO_LEAKY;
	ngx_uint_t window_algo = c.algo == SLUICE_ALGO_FIXED || c.algo == SLUICE_ALGO_WINDOW;
	ngx_uint_t have_buckets = seen[ZP_BUCKETS].len != 0;
	if (bucket_algo ? (!have_rate || !have_burst || have_limit || have_window || have_buckets)
	                : (have_rate || have_burst || !have_limit ||
	                   (window_algo ? !have_window : have_window) ||
	                   (c.algo != SLUICE_ALGO_WINDOW && have_buckets))) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
		                   "%V \"%V\": gcra and leaky take rate= and burst=; fixed takes "
		                   "limit= and window=; window takes limit=, window= and buckets=; "
		                   "inflight takes limit=",
		                   &cmd->name, &name);
		return NGX_CONF_ERROR;
	}
	/* the default only when buckets= is absent: buckets=0 is refused by
	 * the library (SLUICE_EBUCKETS), as the rules file refuses it */
	if (c.algo == SLUICE_ALGO_WINDOW && seen[ZP_BUCKETS].len == 0)
		c.buckets = 10;
	if (!have_policy)
		c.policy = c.algo == SLUICE_ALGO_INFLIGHT ? SLUICE_KEYED_REJECT : SLUICE_KEYED_EVICT;

	/* Validate with the library's own validator now, so nginx -t names
	 * the problem: init's and attach's checks, with no table. */
	c.capacity = SLUICE_KEYED_CAPACITY_MIN;
	int rc = sluice_keyed_config_check(&c, &sluice_clock_monotonic);
	if (rc != 0) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V \"%V\": %s (%s)", &cmd->name, &name,
		                   sluice_strerror(rc), sluice_err_name(rc));
		return NGX_CONF_ERROR;
	}

	ngx_http_sluice_zone_t *z = ngx_http_sluice_get_zone(cf, &name, (size_t)size);
	if (z == NULL)
		return NGX_CONF_ERROR;
	if (z->defined) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V \"%V\" is already defined", &cmd->name,
		                   &name);
		return NGX_CONF_ERROR;
	}
	if (z->delayed && !bucket_algo) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
		                   "%V \"%V\": sluice_limit delay= needs a gcra or leaky zone",
		                   &cmd->name, &name);
		return NGX_CONF_ERROR;
	}
	z->defined = 1;
	z->cfg = c;
	z->shm_zone->init = ngx_http_sluice_init_zone;

	smcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_sluice_module);
	ngx_http_sluice_zone_t **slot = ngx_array_push(&smcf->zones);
	if (slot == NULL)
		return NGX_CONF_ERROR;
	*slot = z;
	return NGX_CONF_OK;
}

/* sluice_limit's parameters, in the order of limit_params. */
enum { LP_ZONE, LP_KEY, LP_STATUS, LP_DELAY, LP_DRY_RUN, LP_EMPTY_KEY, LP_COUNT };

static const ngx_str_t limit_params[LP_COUNT] = {
	ngx_string("zone="), ngx_string("key="), ngx_string("status="), ngx_string("delay="),
	ngx_string("dry_run"), ngx_string("empty_key="),
};

/*
 * A key expression that is one variable and nothing else ("$name" or
 * "${name}", the usual key=$binary_remote_addr): the variable's index, so
 * a request reads the variable's value in place (ngx_http_sluice_key)
 * rather than running the script that copies it into a new string of
 * the pool.  NGX_DECLINED for any other expression (a capture, text,
 * several variables): those run the complex value.  NGX_ERROR: out of
 * memory.
 */
static ngx_int_t ngx_http_sluice_lone_variable(ngx_conf_t *cf, ngx_str_t *key)
{
	ngx_str_t name;
	size_t open = key->len > 3 && key->data[1] == '{';

	if (key->len < 2 || key->data[0] != '$' || (open && key->data[key->len - 1] != '}'))
		return NGX_DECLINED;
	name.data = key->data + 1 + open;
	name.len = key->len - 1 - 2 * open;
	if (name.data[0] >= '0' && name.data[0] <= '9')
		return NGX_DECLINED; /* $1..$9: a regex capture, not a variable */
	for (size_t i = 0; i < name.len; i++) {
		u_char ch = name.data[i];
		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		      ch == '_'))
			return NGX_DECLINED;
	}
	return ngx_http_get_variable_index(cf, &name);
}

static char *ngx_http_sluice_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_sluice_loc_conf_t *slcf = conf;
	ngx_str_t *value = cf->args->elts, name = ngx_null_string, key = ngx_null_string, s,
		  seen[LP_COUNT];
	ngx_uint_t status = 429, dry_run = 0, empty_pass = 0;
	ngx_int_t delay = -1;

	ngx_memzero(seen, sizeof(seen));
	for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
		ngx_int_t p = ngx_http_sluice_param(cf, cmd, limit_params, LP_COUNT, seen, &value[i], &s);
		if (p == NGX_ERROR)
			return NGX_CONF_ERROR;
		switch (p) {
		case LP_ZONE:
			name = s;
			break;
		case LP_KEY:
			key = s;
			break;
		case LP_STATUS: {
			ngx_int_t st = ngx_atoi(s.data, s.len);
			if (st < 400 || st > 599) {
				ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				                   "%V: invalid status \"%V\" (400..599)", &cmd->name,
				                   &value[i]);
				return NGX_CONF_ERROR;
			}
			status = (ngx_uint_t)st;
			break;
		}
		case LP_DELAY:
			delay = ngx_atoi(s.data, s.len);
			if (delay < 0) {
				ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: invalid delay \"%V\"",
				                   &cmd->name, &value[i]);
				return NGX_CONF_ERROR;
			}
			break;
		case LP_DRY_RUN:
			dry_run = 1;
			break;
		default: /* LP_EMPTY_KEY */
			if (s.len == 6 && ngx_strncmp(s.data, "shared", 6) == 0)
				empty_pass = 0;
			else if (s.len == 4 && ngx_strncmp(s.data, "pass", 4) == 0)
				empty_pass = 1;
			else {
				ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				                   "%V: unknown \"%V\" (shared, pass)", &cmd->name,
				                   &value[i]);
				return NGX_CONF_ERROR;
			}
			break;
		}
	}
	if (name.len == 0 || key.len == 0) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V needs zone= and key=", &cmd->name);
		return NGX_CONF_ERROR;
	}

	ngx_http_sluice_zone_t *z = ngx_http_sluice_get_zone(cf, &name, 0);
	if (z == NULL)
		return NGX_CONF_ERROR;
	/* One key expression per zone: the table's keys must mean one thing
	 * (and a reload compares it, as limit_req's zone does). */
	if (z->key.len == 0) {
		z->key = key;
	} else if (z->key.len != key.len || ngx_strncmp(z->key.data, key.data, key.len) != 0) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
		                   "%V: zone \"%V\" is used with the key \"%V\" and the key \"%V\"",
		                   &cmd->name, &name, &z->key, &key);
		return NGX_CONF_ERROR;
	}

	/* delay= books the GCRA slot the admission advanced to: only the
	 * bucket algorithms have one.  Checked here when the zone came first,
	 * in sluice_zone when it comes later. */
	if (delay >= 0) {
		if (z->defined && z->cfg.algo != SLUICE_ALGO_GCRA && z->cfg.algo != SLUICE_ALGO_LEAKY) {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
			                   "%V: delay= needs a gcra or leaky zone, \"%V\" is not",
			                   &cmd->name, &name);
			return NGX_CONF_ERROR;
		}
		z->delayed = 1;
	}

	if (slcf->limits == NULL) {
		slcf->limits = ngx_array_create(cf->pool, 2, sizeof(ngx_http_sluice_limit_t));
		if (slcf->limits == NULL)
			return NGX_CONF_ERROR;
	}
	ngx_http_sluice_limit_t *l = slcf->limits->elts;
	for (ngx_uint_t i = 0; i < slcf->limits->nelts; i++) {
		if (l[i].shm_zone == z->shm_zone) {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: zone \"%V\" is used twice here",
			                   &cmd->name, &name);
			return NGX_CONF_ERROR;
		}
	}
	if (slcf->limits->nelts == NGX_HTTP_SLUICE_LIMITS) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V: more than %d limits in one place",
		                   &cmd->name, NGX_HTTP_SLUICE_LIMITS);
		return NGX_CONF_ERROR;
	}
	l = ngx_array_push(slcf->limits);
	if (l == NULL)
		return NGX_CONF_ERROR;
	ngx_memzero(l, sizeof(*l));

	ngx_http_compile_complex_value_t ccv;
	ngx_memzero(&ccv, sizeof(ccv));
	ccv.cf = cf;
	ccv.value = &key;
	ccv.complex_value = &l->key;
	if (ngx_http_compile_complex_value(&ccv) != NGX_OK)
		return NGX_CONF_ERROR;
	l->var = ngx_http_sluice_lone_variable(cf, &key);
	if (l->var == NGX_ERROR)
		return NGX_CONF_ERROR;
	l->shm_zone = z->shm_zone;
	l->status = status;
	l->delay = delay;
	l->dry_run = dry_run;
	l->empty_pass = empty_pass;

	ngx_http_sluice_main_conf_t *smcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_sluice_module);
	ngx_http_sluice_ref_t *ref = ngx_array_push(&smcf->refs);
	if (ref == NULL)
		return NGX_CONF_ERROR;
	ref->zone = z;
	ref->key = key;
	ref->file = cf->conf_file->file.name.data;
	ref->line = cf->conf_file->line;
	return NGX_CONF_OK;
}

/* ---- zones --------------------------------------------------------------- */

/* Apply a reloaded zone's parameters to the live table: keyed.h's
 * set_rate / set_burst / set_limit keep every key's state. */
static ngx_int_t ngx_http_sluice_apply_live(ngx_shm_zone_t *shm_zone, ngx_http_sluice_zone_t *z)
{
	sluice_keyed_params_t p;
	const sluice_keyed_config_t *c = &z->cfg;
	int rc = sluice_keyed_params(&z->keyed, &p);
	const char *what = "params";

	if (rc == 0) {
		if (c->algo == SLUICE_ALGO_GCRA || c->algo == SLUICE_ALGO_LEAKY) {
			/* rate/period as the parser reduced them: the same pair
			 * for the same text, so an unchanged rate is no change. */
			ngx_uint_t rate_changed = p.rate != c->rate || p.period_ns != c->period_ns;
			if (rate_changed && p.burst != c->burst) {
				/* Two changes need a tau between them (keyed.h, LIVE
				 * PARAMETERS): the second would be refused after the
				 * first was applied, leaving the old configuration
				 * over a table with the new rate.  Refuse both. */
				ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
				              "sluice_zone \"%V\": change the rate and the burst of a running "
				              "zone in two reloads, one burst's time (b T) apart",
				              &shm_zone->shm.name);
				return NGX_ERROR;
			}
			if (rate_changed) {
				what = "rate";
				rc = sluice_keyed_set_rate(&z->keyed, c->rate, c->period_ns);
			}
			if (rc == 0 && p.burst != c->burst) {
				what = "burst";
				rc = sluice_keyed_set_burst(&z->keyed, c->burst);
			}
		} else if (p.limit != c->limit) {
			what = "limit";
			rc = sluice_keyed_set_limit(&z->keyed, c->limit);
		}
	}
	if (rc != 0) {
		ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
		              "sluice_zone \"%V\": cannot change the %s of the running zone: %s (%s)%s",
		              &shm_zone->shm.name, what, sluice_strerror(rc), sluice_err_name(rc),
		              rc == SLUICE_EBUSY ? "; the previous change is too recent: retry "
		                                   "once a burst's time (b T) has passed"
		                                 : "");
		return NGX_ERROR;
	}
	return NGX_OK;
}

static ngx_int_t ngx_http_sluice_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
	ngx_http_sluice_zone_t *oz = data, *z = shm_zone->data;
	ngx_slab_pool_t *shpool = (ngx_slab_pool_t *)shm_zone->shm.addr;
	int rc;

	if (oz) {
		/* A reload with the zone's name and size unchanged: keep the
		 * table.  Refuse what would change its meaning or layout. */
		if (oz->key.len && z->key.len &&
		    (oz->key.len != z->key.len || ngx_strncmp(oz->key.data, z->key.data, z->key.len) != 0)) {
			ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
			              "sluice_zone \"%V\" uses the \"%V\" key while previously it used "
			              "the \"%V\" key",
			              &shm_zone->shm.name, &z->key, &oz->key);
			return NGX_ERROR;
		}
		const sluice_keyed_config_t *a = &oz->sh->cfg, *b = &z->cfg;
		if (a->algo != b->algo || a->policy != b->policy || a->window_ns != b->window_ns ||
		    a->buckets != b->buckets) {
			ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
			              "sluice_zone \"%V\": the algorithm, policy, window and buckets of "
			              "a running zone cannot change (they fix its table's layout); "
			              "give the zone a new name or size",
			              &shm_zone->shm.name);
			return NGX_ERROR;
		}
		z->sh = oz->sh;
		z->keyed = oz->keyed;
		if (z->key.len == 0)
			z->key = oz->key;
		return ngx_http_sluice_apply_live(shm_zone, z);
	}

	if (shm_zone->shm.exists) {
		/* Windows-only in nginx (a zone inherited by a new process):
		 * never on Linux. */
		return NGX_ERROR;
	}

	z->sh = ngx_slab_alloc(shpool, sizeof(ngx_http_sluice_sh_t));
	if (z->sh == NULL)
		return NGX_ERROR;
	ngx_memzero(z->sh, sizeof(ngx_http_sluice_sh_t));
	shpool->data = z->sh;

	/* The largest power-of-two capacity whose table fits in the slab:
	 * large allocations are whole pages, so 64-byte aligned. */
	sluice_keyed_config_t c = z->cfg;
	void *mem = NULL;
	size_t bytes = 0;
	shpool->log_nomem = 0;
	for (uint64_t cap = 1ULL << 32; cap >= SLUICE_KEYED_CAPACITY_MIN; cap >>= 1) {
		c.capacity = cap;
		bytes = sluice_keyed_region_bytes(&c);
		if (bytes == 0 || bytes > shm_zone->shm.size)
			continue;
		mem = ngx_slab_alloc(shpool, bytes);
		if (mem)
			break;
	}
	if (mem == NULL) {
		ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
		              "sluice_zone \"%V\": size %uz holds no table of 8 keys",
		              &shm_zone->shm.name, shm_zone->shm.size);
		return NGX_ERROR;
	}
	rc = sluice_keyed_format(mem, bytes, &c);
	if (rc == 0)
		rc = sluice_keyed_attach(mem, bytes, &sluice_clock_monotonic, &z->keyed);
	if (rc != 0) {
		ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0, "sluice_zone \"%V\": %s (%s)",
		              &shm_zone->shm.name, sluice_strerror(rc), sluice_err_name(rc));
		return NGX_ERROR;
	}
	z->sh->cfg = c;
	z->sh->table = mem;
	z->sh->table_bytes = bytes;
	z->sh->magic = NGX_HTTP_SLUICE_MAGIC;
	return NGX_OK;
}

/* ---- the decision (preaccess phase) -------------------------------------- */

static void ngx_http_sluice_count(ngx_http_sluice_zone_t *z, ngx_uint_t outcome)
{
	/* Relaxed: a statistic, published with nothing. */
	atomic_fetch_add_explicit(
		&z->sh->cells[(ngx_uint_t)ngx_worker % NGX_HTTP_SLUICE_CELLS].count[outcome], 1,
		memory_order_relaxed);
}

/*
 * The key of limit @l for @r.  A lone variable is read in place, as the
 * complex value reads it (flushed if not cacheable; an absent value, or a
 * handler's failure, is the empty string), without the script's copy: the
 * value lives at least as long as the request.  Any other expression is
 * the complex value.
 */
static ngx_int_t ngx_http_sluice_key(ngx_http_request_t *r, ngx_http_sluice_limit_t *l,
                                     ngx_str_t *key)
{
	if (l->var == NGX_DECLINED)
		return ngx_http_complex_value(r, &l->key, key);
	ngx_http_variable_value_t *vv = ngx_http_get_flushed_variable(r, (ngx_uint_t)l->var);
	if (vv == NULL || vv->not_found) {
		key->len = 0;
		key->data = NULL;
	} else {
		key->len = vv->len;
		key->data = vv->data;
	}
	return NGX_OK;
}

static void ngx_http_sluice_release_cleanup(void *data)
{
	ngx_http_sluice_release_t *rel = data;
	(void)sluice_keyed_release(&rel->zone->keyed, rel->key.data, rel->key.len, 1);
}

static void ngx_http_sluice_delay_handler(ngx_http_request_t *r)
{
	ngx_event_t *wev = r->connection->write;

	if (wev->delayed) {
		/* Woken early (the client wrote): keep waiting for the timer. */
		if (ngx_handle_write_event(wev, 0) != NGX_OK)
			ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
		return;
	}
	if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
		ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
		return;
	}
	r->read_event_handler = ngx_http_block_reading;
	r->write_event_handler = ngx_http_core_run_phases;
	ngx_http_core_run_phases(r);
}

ngx_int_t ngx_http_sluice_add_header(ngx_http_request_t *r, const char *name, const char *val,
                                     int len)
{
	if (len <= 0)
		return NGX_OK; /* the helper refused: send no field rather than a wrong one */
	ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);
	if (h == NULL)
		return NGX_ERROR;
	h->hash = 1;
	h->key.data = (u_char *)name;
	h->key.len = ngx_strlen(name);
	h->value.data = ngx_pnalloc(r->pool, (size_t)len);
	if (h->value.data == NULL)
		return NGX_ERROR;
	ngx_memcpy(h->value.data, val, (size_t)len);
	h->value.len = (size_t)len;
	return NGX_OK;
}

/* RateLimit-Policy and RateLimit for zone @z's decision @d.  The policy
 * is the library's one mapping (sluice_http_policy_of(), http.h), as the
 * rules engine advertises it, from the parameters in force; INFLIGHT has
 * none (its slots come back on release, not at a time).  The parameters
 * change only by a live change, which moves their era: the policy's text
 * is kept per process and formatted again when the era moves (a worker
 * runs one request at a time, so no lock guards it). */
static ngx_int_t ngx_http_sluice_rate_headers(ngx_http_request_t *r, ngx_http_sluice_zone_t *z,
                                              const sluice_decision_t *d)
{
	char buf[SLUICE_HTTP_FIELD_MAX];
	sluice_keyed_params_t p;

	if (sluice_keyed_params(&z->keyed, &p) != 0) {
		z->policy_valid = 0; /* no policy rather than a stale one */
	} else if (!z->policy_valid || z->policy_era != p.era) {
		sluice_limiter_config_t c = { .algo = z->cfg.algo };
		uint64_t quota = 0, window = 0;
		switch (z->cfg.algo) {
		case SLUICE_ALGO_GCRA:
			c.gcra = (sluice_gcra_config_t){ .rate = p.rate, .period_ns = p.period_ns,
				                         .burst = p.burst };
			break;
		case SLUICE_ALGO_LEAKY:
			c.leaky = (sluice_leaky_config_t){ .rate = p.rate, .period_ns = p.period_ns,
				                           .mode = SLUICE_LEAKY_METER,
				                           .depth = p.burst };
			break;
		case SLUICE_ALGO_FIXED:
			c.fixed = (sluice_fixed_config_t){ .limit = p.limit,
				                           .window_ns = z->cfg.window_ns };
			break;
		case SLUICE_ALGO_WINDOW:
			c.window = (sluice_window_config_t){ .limit = p.limit,
				                             .window_ns = z->cfg.window_ns };
			break;
		default:
			break;
		}
		if (sluice_http_policy_of(&c, &quota, &window) != 0)
			window = 0;
		z->policy_len = window ? sluice_http_ratelimit_policy(z->policy, sizeof(z->policy),
		                                                       z->hname, quota, window)
		                       : 0;
		z->policy_era = p.era;
		z->policy_valid = 1;
	}
	if (z->policy_valid && z->policy_len > 0 &&
	    ngx_http_sluice_add_header(r, "RateLimit-Policy", z->policy, z->policy_len) != NGX_OK)
		return NGX_ERROR;
	int n = sluice_http_ratelimit(buf, sizeof(buf), z->hname, d);
	return ngx_http_sluice_add_header(r, "RateLimit", buf, n);
}

/* The request's context lives in a pool cleanup, not only in r->ctx: an
 * internal redirect zeroes r->ctx, and the decision must not run twice
 * (ngx_http_realip_module finds its context the same way).  The cleanup
 * and the context are one allocation, linked as ngx_pool_cleanup_add()
 * links one (which would allocate the two apart). */
static void ngx_http_sluice_ctx_cleanup(void *data)
{
	(void)data;
}

typedef struct {
	ngx_pool_cleanup_t cln;
	ngx_http_sluice_ctx_t ctx;
} ngx_http_sluice_ctx_block_t;

/* ngx_http_sluice_get_ctx, inlined into this file's phase handler, which
 * asks twice for a request the index module redirects. */
static ngx_inline ngx_http_sluice_ctx_t *ngx_http_sluice_ctx(ngx_http_request_t *r,
                                                            ngx_uint_t create)
{
	ngx_http_sluice_ctx_t *ctx = ngx_http_get_module_ctx(r->main, ngx_http_sluice_module);
	if (ctx)
		return ctx;
	ngx_pool_t *pool = r->main->pool;
	for (ngx_pool_cleanup_t *c = pool->cleanup; c; c = c->next) {
		if (c->handler == ngx_http_sluice_ctx_cleanup) {
			ctx = c->data;
			ngx_http_set_ctx(r->main, ctx, ngx_http_sluice_module);
			return ctx;
		}
	}
	if (!create)
		return NULL;
	ngx_http_sluice_ctx_block_t *b = ngx_palloc(pool, sizeof(*b));
	if (b == NULL)
		return NULL;
	b->ctx = (ngx_http_sluice_ctx_t){ .status = SLUICE_NGX_NONE }; /* all zero */
	b->cln.handler = ngx_http_sluice_ctx_cleanup;
	b->cln.data = &b->ctx;
	b->cln.next = pool->cleanup;
	pool->cleanup = &b->cln;
	ngx_http_set_ctx(r->main, &b->ctx, ngx_http_sluice_module);
	return &b->ctx;
}

ngx_http_sluice_ctx_t *ngx_http_sluice_get_ctx(ngx_http_request_t *r, ngx_uint_t create)
{
	return ngx_http_sluice_ctx(r, create);
}

ngx_uint_t ngx_http_sluice_headers_on(ngx_http_request_t *r)
{
	ngx_http_sluice_loc_conf_t *slcf = ngx_http_get_module_loc_conf(r, ngx_http_sluice_module);
	return slcf->headers == 1;
}

ngx_int_t ngx_http_sluice_delay(ngx_http_request_t *r, uint64_t delay_ns)
{
	/* Wait on a timer (whole ms, rounded up: never early). */
	ngx_msec_t ms = (ngx_msec_t)((delay_ns + 999999) / 1000000);
	if (r->connection->read->ready) {
		ngx_post_event(r->connection->read, &ngx_posted_events);
	} else if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	}
	r->read_event_handler = ngx_http_test_reading;
	r->write_event_handler = ngx_http_sluice_delay_handler;
	r->connection->write->delayed = 1;
	ngx_add_timer(r->connection->write, ms);
	return NGX_AGAIN;
}

/*
 * Limit @l's key for @r into *@key: 1 to ask it, 0 when empty_key=pass
 * leaves it unasked (key->len 0 marks it below), NGX_ERROR.  The empty key
 * (absent or empty value): empty_key=pass does not limit it (limit_req's
 * way), shared counts every such request under the one absent key.
 */
static ngx_inline ngx_int_t ngx_http_sluice_limit_key(ngx_http_request_t *r,
                                                      ngx_http_sluice_limit_t *l, ngx_str_t *key)
{
	if (ngx_http_sluice_key(r, l, key) != NGX_OK)
		return NGX_ERROR;
	if (key->len == 0) {
		if (l->empty_pass)
			return 0;
		key->data = (u_char *)ngx_http_sluice_absent_key;
		key->len = sizeof(ngx_http_sluice_absent_key);
	}
	return 1;
}

/* An admission of limit @l with delay=: how long the request waits for
 * it, the longest of the limits' (*@delay_ns). */
static ngx_inline void ngx_http_sluice_admitted(ngx_http_sluice_limit_t *l,
                                                const sluice_decision_t *d, uint64_t *delay_ns)
{
	if (l->delay >= 0 && d->limit != 0) { /* gcra, leaky: checked */
		ngx_http_sluice_zone_t *z = l->shm_zone->data;
		sluice_keyed_params_t p;
		if (sluice_keyed_params(&z->keyed, &p) == 0) {
			uint64_t t = (p.period_ns + p.rate - 1) / p.rate;
			uint64_t free_ns = ((uint64_t)l->delay + 1) * t;
			if (d->reset_ns > free_ns && d->reset_ns - free_ns > *delay_ns)
				*delay_ns = d->reset_ns - free_ns;
		}
	}
}

/* Limit @l did not admit (@rc): an error other than a full table is
 * logged and counted; a full table refuses as a refusal does. */
static ngx_inline void ngx_http_sluice_not_admitted(ngx_http_request_t *r,
                                                    ngx_http_sluice_limit_t *l, int rc)
{
	if (rc < 0 && rc != SLUICE_EKEYFULL) {
		/* EBUSY (the table kept changing for 4096 retries) or a
		 * broken table: refuse, as a full table refuses, and say so. */
		ngx_http_sluice_zone_t *z = l->shm_zone->data;
		ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "sluice_limit zone \"%V\": %s",
		              &z->name, sluice_strerror(rc));
		ngx_http_sluice_count(z, SLUICE_NGX_ERRORS);
	}
}

/*
 * Several limits (@n >= 2) asked at @now as sluice_keyed_acquire_many_at()
 * batches (keyed.h "Batches": every key hashed and its slot prefetched
 * before the first is decided, so their misses overlap).  SLUICE_KEYED_STOP
 * stops at the first limit not admitted, as the one-limit loop of
 * ngx_http_sluice_decide does; a dry_run limit's refusal asks the limits
 * after it again.  Fills @keys, @ds, @got, *@refused, *@dry_refused and
 * *@delay_ns as that loop does.  Out of line: one limit, the usual case,
 * pays nothing for the arrays.
 */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static ngx_int_t ngx_http_sluice_ask_many(ngx_http_request_t *r, ngx_http_sluice_limit_t *limits,
                                          ngx_uint_t n, uint64_t now, ngx_str_t *keys,
                                          sluice_decision_t *ds, int *got, ngx_uint_t *refused,
                                          ngx_uint_t *dry_refused, uint64_t *delay_ns)
{
	sluice_keyed_request_t req[NGX_HTTP_SLUICE_LIMITS];
	ngx_uint_t at[NGX_HTTP_SLUICE_LIMITS], nreq = 0, from, i, j;
	for (i = 0; i < n; i++) {
		ngx_int_t k = ngx_http_sluice_limit_key(r, &limits[i], &keys[i]);
		if (k == NGX_ERROR)
			return NGX_ERROR;
		if (k == 0) {
			got[i] = 0;
			continue;
		}
		ngx_http_sluice_zone_t *z = limits[i].shm_zone->data;
		/* Every field known even on the errors that fill nothing. */
		ngx_memzero(&ds[i], sizeof(ds[i]));
		req[nreq] = (sluice_keyed_request_t){ .table = &z->keyed, .key = keys[i].data,
			                              .keylen = keys[i].len, .n = 1, .d = &ds[i] };
		at[nreq++] = i;
	}
	for (from = 0; from < nreq;) {
		if (sluice_keyed_acquire_many_at(&req[from], nreq - from, now, SLUICE_KEYED_STOP) ==
		    SLUICE_ETIME)
			req[from].result = SLUICE_ETIME; /* the batch's own: none written */
		for (j = from; j < nreq && req[j].result == 1; j++) {
			got[at[j]] = 1;
			ngx_http_sluice_admitted(&limits[at[j]], &ds[at[j]], delay_ns);
		}
		if (j == nreq)
			break;
		i = at[j];
		got[i] = req[j].result;
		ngx_http_sluice_not_admitted(r, &limits[i], got[i]);
		if (!limits[i].dry_run) {
			*refused = i;
			break;
		}
		*dry_refused = 1;
		from = j + 1;
	}
	return NGX_OK;
}

/*
 * The decision of the location's limits @slcf for @r, once per request
 * (ngx_http_sluice_handler).  Kept out of line: the phase handler runs
 * for every request of the http block, twice for one the index module
 * redirects, and only the first call of a limited request decides; the
 * others should not pay this frame's set-up (its arrays, the stack
 * protector's canary, six saved registers).
 */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static ngx_int_t ngx_http_sluice_decide(ngx_http_request_t *r, ngx_http_sluice_loc_conf_t *slcf,
                                        ngx_http_sluice_ctx_t *ctx)
{
	ngx_http_sluice_limit_t *limits;
	ngx_uint_t n, i, refused = (ngx_uint_t)-1, dry_refused = 0, best = (ngx_uint_t)-1;
	uint64_t now, delay_ns = 0;
	/* On the stack: a location has at most NGX_HTTP_SLUICE_LIMITS limits
	 * (sluice_limit refuses more), so a decision allocates only its
	 * context (and, INFLIGHT, its release). */
	sluice_decision_t ds[NGX_HTTP_SLUICE_LIMITS];
	ngx_str_t keys[NGX_HTTP_SLUICE_LIMITS];
	int got[NGX_HTTP_SLUICE_LIMITS];

	limits = slcf->limits->elts;
	n = slcf->limits->nelts;

	/* One reading for every limit of the request. */
	now = sluice_clock_monotonic_ns();
	if (n >= 2) {
		if (ngx_http_sluice_ask_many(r, limits, n, now, keys, ds, got, &refused, &dry_refused,
		                             &delay_ns) != NGX_OK)
			return NGX_HTTP_INTERNAL_SERVER_ERROR;
	} else {
		ngx_int_t k = ngx_http_sluice_limit_key(r, &limits[0], &keys[0]);
		if (k == NGX_ERROR)
			return NGX_HTTP_INTERNAL_SERVER_ERROR;
		got[0] = 0;
		if (k == 1) {
			ngx_http_sluice_zone_t *z = limits[0].shm_zone->data;
			/* Every field known even on the errors that fill nothing. */
			ngx_memzero(&ds[0], sizeof(ds[0]));
			got[0] = sluice_keyed_acquire_at(&z->keyed, keys[0].data, keys[0].len, 1, now,
			                                 &ds[0]);
			if (got[0] == 1)
				ngx_http_sluice_admitted(&limits[0], &ds[0], &delay_ns);
			else {
				ngx_http_sluice_not_admitted(r, &limits[0], got[0]);
				if (limits[0].dry_run)
					dry_refused = 1;
				else
					refused = 0;
			}
		}
	}

	if (refused != (ngx_uint_t)-1) {
		/* All or nothing: give back what the earlier limits took. */
		for (i = 0; i < refused; i++) {
			ngx_http_sluice_zone_t *z = limits[i].shm_zone->data;
			if (got[i] == 1) {
				if (ds[i].limit != 0)
					(void)sluice_keyed_refund(&z->keyed, keys[i].data, keys[i].len, 1, &ds[i]);
				ngx_http_sluice_count(z, SLUICE_NGX_REFUNDED);
			} else if (keys[i].len) {
				ngx_http_sluice_count(z, SLUICE_NGX_REJECTED_DRY_RUN);
			}
		}
		ngx_http_sluice_zone_t *z = limits[refused].shm_zone->data;
		ngx_http_sluice_count(z, SLUICE_NGX_REJECTED);
		ctx->status = SLUICE_NGX_REJECTED;
		ctx->retry_after_ns = ds[refused].retry_after_ns;
		ctx->remaining = 0;
		ctx->have_remaining = 1;
		ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
		              "sluice: limiting requests by zone \"%V\"", &z->name);
		char ra[SLUICE_HTTP_RETRY_AFTER_MAX];
		int len = sluice_http_retry_after(ra, sizeof(ra), &ds[refused]);
		if (ngx_http_sluice_add_header(r, "Retry-After", ra, len) != NGX_OK ||
		    ngx_http_sluice_rate_headers(r, z, &ds[refused]) != NGX_OK)
			return NGX_HTTP_INTERNAL_SERVER_ERROR;
		return (ngx_int_t)limits[refused].status;
	}

	/* Admitted by every limit that is not dry_run. */
	for (i = 0; i < n; i++) {
		ngx_http_sluice_zone_t *z = limits[i].shm_zone->data;
		if (keys[i].len == 0)
			continue;
		if (got[i] != 1) {
			ngx_http_sluice_count(z, SLUICE_NGX_REJECTED_DRY_RUN);
			continue;
		}
		ngx_http_sluice_count(z, delay_ns ? SLUICE_NGX_DELAYED : SLUICE_NGX_PASSED);
		if (ds[i].limit != 0 && (!ctx->have_remaining || ds[i].remaining < ctx->remaining)) {
			ctx->remaining = ds[i].remaining;
			ctx->have_remaining = 1;
			best = i;
		}
		if (z->cfg.algo == SLUICE_ALGO_INFLIGHT && ds[i].limit != 0) {
			/* The key copied beside the release: a variable read in
			 * place (ngx_http_sluice_key) may live in a buffer the
			 * connection reuses before the pool goes. */
			ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(
				r->pool, sizeof(ngx_http_sluice_release_t) + keys[i].len);
			if (cln == NULL) {
				(void)sluice_keyed_release(&z->keyed, keys[i].data, keys[i].len, 1);
				return NGX_HTTP_INTERNAL_SERVER_ERROR;
			}
			ngx_http_sluice_release_t *rel = cln->data;
			rel->zone = z;
			rel->key.data = (u_char *)(rel + 1);
			rel->key.len = keys[i].len;
			ngx_memcpy(rel->key.data, keys[i].data, keys[i].len);
			cln->handler = ngx_http_sluice_release_cleanup;
		}
	}
	ctx->status = dry_refused ? SLUICE_NGX_REJECTED_DRY_RUN
	                          : delay_ns ? SLUICE_NGX_DELAYED : SLUICE_NGX_PASSED;
	if (slcf->headers == 1 && best != (ngx_uint_t)-1 &&
	    ngx_http_sluice_rate_headers(r, limits[best].shm_zone->data, &ds[best]) != NGX_OK)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	if (delay_ns == 0)
		return NGX_DECLINED;
	return ngx_http_sluice_delay(r, delay_ns); /* the slot's time */
}

static ngx_int_t ngx_http_sluice_handler(ngx_http_request_t *r)
{
	ngx_http_sluice_loc_conf_t *slcf = ngx_http_get_module_loc_conf(r, ngx_http_sluice_module);

	if (slcf->limits == NULL || slcf->limits->nelts == 0)
		return NGX_DECLINED;
	/* Once per request: not again after an internal redirect (the index
	 * module's "/" -> "/index.html"), nor when the phases run again after
	 * a delay.  The rules (ngx_http_sluice_rules.c) decide on their own
	 * flag of the same context. */
	ngx_http_sluice_ctx_t *ctx = ngx_http_sluice_ctx(r, 1);
	if (ctx == NULL)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	if (ctx->limits_done)
		return NGX_DECLINED;
	ctx->limits_done = 1;
	return ngx_http_sluice_decide(r, slcf, ctx);
}

/* ---- variables ----------------------------------------------------------- */

static ngx_int_t ngx_http_sluice_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
                                          uintptr_t data)
{
	ngx_http_sluice_ctx_t *ctx = ngx_http_sluice_get_ctx(r, 0);
	u_char *p;

	if (ctx == NULL || ctx->status == SLUICE_NGX_NONE) {
		v->not_found = 1;
		return NGX_OK;
	}
	v->valid = 1;
	v->no_cacheable = 0;
	v->not_found = 0;
	switch (data) {
	case 0:
		v->len = ngx_http_sluice_status_names[ctx->status].len;
		v->data = ngx_http_sluice_status_names[ctx->status].data;
		return NGX_OK;
	case 1: {
		if (ctx->status != SLUICE_NGX_REJECTED || ctx->retry_after_ns == SLUICE_NEVER) {
			v->not_found = 1;
			return NGX_OK;
		}
		/* Seconds, rounded up as Retry-After (sluice/http.h). */
		p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
		if (p == NULL)
			return NGX_ERROR;
		uint64_t s = ctx->retry_after_ns / 1000000000ULL +
		             (ctx->retry_after_ns % 1000000000ULL != 0);
		v->len = (unsigned)(ngx_sprintf(p, "%uL", s) - p);
		v->data = p;
		return NGX_OK;
	}
	default:
		if (!ctx->have_remaining) {
			v->not_found = 1;
			return NGX_OK;
		}
		p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
		if (p == NULL)
			return NGX_ERROR;
		v->len = (unsigned)(ngx_sprintf(p, "%uL", ctx->remaining) - p);
		v->data = p;
		return NGX_OK;
	}
}

static ngx_http_variable_t ngx_http_sluice_vars[] = {
	{ ngx_string("sluice_status"), NULL, ngx_http_sluice_variable, 0,
	  NGX_HTTP_VAR_NOCACHEABLE, 0 },
	{ ngx_string("sluice_retry_after"), NULL, ngx_http_sluice_variable, 1,
	  NGX_HTTP_VAR_NOCACHEABLE, 0 },
	{ ngx_string("sluice_remaining"), NULL, ngx_http_sluice_variable, 2,
	  NGX_HTTP_VAR_NOCACHEABLE, 0 },
	ngx_http_null_variable
};

static ngx_int_t ngx_http_sluice_add_variables(ngx_conf_t *cf)
{
	for (ngx_http_variable_t *v = ngx_http_sluice_vars; v->name.len; v++) {
		ngx_http_variable_t *var = ngx_http_add_variable(cf, &v->name, v->flags);
		if (var == NULL)
			return NGX_ERROR;
		var->get_handler = v->get_handler;
		var->data = v->data;
	}
	return NGX_OK;
}

/* ---- metrics ------------------------------------------------------------- */

static ngx_int_t ngx_http_sluice_metrics_handler(ngx_http_request_t *r)
{
	ngx_http_sluice_main_conf_t *smcf = ngx_http_get_module_main_conf(r, ngx_http_sluice_module);
	ngx_http_sluice_zone_t **zones = smcf->zones.elts;
	ngx_uint_t nz = smcf->zones.nelts;

	if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD)))
		return NGX_HTTP_NOT_ALLOWED;
	if (ngx_http_discard_request_body(r) != NGX_OK)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;

	/* Bounded text: per zone, SLUICE_NGX_OUTCOMES + 8 lines of at most
	 * 100 bytes plus the zone's name, and the HELP/TYPE lines. */
	size_t size = 4096;
	for (ngx_uint_t i = 0; i < nz; i++)
		size += (SLUICE_NGX_OUTCOMES + 8) * (120 + zones[i]->name.len);
	ngx_buf_t *b = ngx_create_temp_buf(r->pool, size);
	if (b == NULL)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	u_char *p = b->last;

	p = ngx_sprintf(p, "# HELP sluice_requests_total Requests decided by a sluice zone, "
	                   "by outcome, over every worker.\n"
	                   "# TYPE sluice_requests_total counter\n");
	for (ngx_uint_t i = 0; i < nz; i++) {
		for (ngx_uint_t o = SLUICE_NGX_PASSED; o < SLUICE_NGX_OUTCOMES; o++) {
			uint64_t sum = 0;
			for (ngx_uint_t c = 0; c < NGX_HTTP_SLUICE_CELLS; c++)
				sum += atomic_load_explicit(&zones[i]->sh->cells[c].count[o],
				                            memory_order_relaxed);
			p = ngx_sprintf(p, "sluice_requests_total{zone=\"%V\",outcome=\"%s\"} %uL\n",
			                &zones[i]->name, ngx_http_sluice_outcome_labels[o], sum);
		}
	}
	static const struct {
		const char *name, *type, *help;
	} kmetrics[] = {
		{ "sluice_keys", "gauge", "Live keys in the zone's table." },
		{ "sluice_capacity", "gauge", "Slots in the zone's table." },
		{ "sluice_key_creations_total", "counter", "Keys given a slot." },
		{ "sluice_key_reclaims_total", "counter", "Fresh-equivalent slots retaken (lossless)." },
		{ "sluice_key_evictions_total", "counter", "Live keys reset by the evict policy." },
		{ "sluice_key_rejections_total", "counter", "New keys refused by the reject policy." },
		{ "sluice_key_untracked_total", "counter", "Requests passed untracked by the allow policy." },
	};
	for (size_t m = 0; m < sizeof(kmetrics) / sizeof(kmetrics[0]); m++) {
		p = ngx_sprintf(p, "# HELP %s %s\n# TYPE %s %s\n", kmetrics[m].name, kmetrics[m].help,
		                kmetrics[m].name, kmetrics[m].type);
		for (ngx_uint_t i = 0; i < nz; i++) {
			sluice_keyed_stats_t st;
			if (sluice_keyed_stats(&zones[i]->keyed, &st) != 0)
				continue;
			uint64_t v[] = { st.occupancy, st.capacity, st.creations, st.reclaims,
				         st.evictions, st.rejections, st.untracked };
			p = ngx_sprintf(p, "%s{zone=\"%V\"} %uL\n", kmetrics[m].name, &zones[i]->name,
			                v[m]);
		}
	}
	b->last = p;
	/* then the rules engine's, when sluice_rules is in force */
	ngx_chain_t *rules = NULL;
	off_t rules_len = 0;
	if (ngx_http_sluice_rules_metrics(r, &rules, &rules_len) != NGX_OK)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	ngx_chain_t out = { b, rules };
	ngx_chain_t *last = &out;
	while (last->next)
		last = last->next;
	last->buf->last_buf = (r == r->main);
	last->buf->last_in_chain = 1;

	ngx_str_set(&r->headers_out.content_type, "text/plain; version=0.0.4; charset=utf-8");
	r->headers_out.content_type_len = sizeof("text/plain") - 1;
	r->headers_out.status = NGX_HTTP_OK;
	r->headers_out.content_length_n = (b->last - b->pos) + rules_len;
	ngx_int_t rc = ngx_http_send_header(r);
	if (rc == NGX_ERROR || rc > NGX_OK || r->header_only)
		return rc;
	return ngx_http_output_filter(r, &out);
}

static char *ngx_http_sluice_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_core_loc_conf_t *clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
	(void)cmd;
	(void)conf;
	clcf->handler = ngx_http_sluice_metrics_handler;
	return NGX_CONF_OK;
}

/* ---- configuration ------------------------------------------------------- */

static void *ngx_http_sluice_create_main_conf(ngx_conf_t *cf)
{
	ngx_http_sluice_main_conf_t *smcf = ngx_pcalloc(cf->pool, sizeof(*smcf));
	if (smcf == NULL)
		return NULL;
	if (ngx_array_init(&smcf->zones, cf->pool, 4, sizeof(ngx_http_sluice_zone_t *)) != NGX_OK ||
	    ngx_array_init(&smcf->refs, cf->pool, 4, sizeof(ngx_http_sluice_ref_t)) != NGX_OK)
		return NULL;
	return smcf;
}

static void *ngx_http_sluice_create_loc_conf(ngx_conf_t *cf)
{
	ngx_http_sluice_loc_conf_t *conf = ngx_pcalloc(cf->pool, sizeof(*conf));
	if (conf == NULL)
		return NULL;
	conf->headers = NGX_CONF_UNSET;
	return conf;
}

static char *ngx_http_sluice_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
	ngx_http_sluice_loc_conf_t *prev = parent, *conf = child;
	(void)cf;
	/* As limit_req: a level with no sluice_limit inherits its parent's. */
	if (conf->limits == NULL)
		conf->limits = prev->limits;
	ngx_conf_merge_value(conf->headers, prev->headers, 0);
	return NGX_CONF_OK;
}

/*
 * Whether the variable @name (without '$') will exist once nginx resolves
 * the http block's variables, right after every module's postconfiguration
 * (ngx_http_variables_init_vars, which would refuse it with no file:line):
 * a variable added with a handler (core, map, geo, set, a named regex
 * capture), or one of a prefix ($http_, $arg_, $cookie_, ...).  The same
 * test as init_vars, on the same arrays, so nothing it accepts is refused
 * here.  This module is dynamic, so loaded after the static modules, and
 * its postconfiguration runs after theirs: every variable they add there
 * exists by now.
 */
static ngx_uint_t ngx_http_sluice_variable_known(ngx_http_core_main_conf_t *cmcf, ngx_str_t *name)
{
	ngx_hash_key_t *key = cmcf->variables_keys->keys.elts;
	for (ngx_uint_t n = 0; n < cmcf->variables_keys->keys.nelts; n++) {
		ngx_http_variable_t *v = key[n].value;
		if (key[n].key.len == name->len &&
		    ngx_strncasecmp(key[n].key.data, name->data, name->len) == 0 && v->get_handler)
			return 1;
	}
	ngx_http_variable_t *pv = cmcf->prefix_variables.elts;
	for (ngx_uint_t n = 0; n < cmcf->prefix_variables.nelts; n++)
		if (name->len >= pv[n].name.len &&
		    ngx_strncasecmp(name->data, pv[n].name.data, pv[n].name.len) == 0)
			return 1;
	return 0;
}

/*
 * The first variable of the key expression @key that will not exist, or a
 * NULL name.  The names as ngx_http_script_compile reads them (which has
 * already accepted the syntax): "$name" or "${name}" of [A-Za-z0-9_],
 * "$1".."$9" being regex captures, not variables.
 */
static ngx_str_t ngx_http_sluice_unknown_variable(ngx_http_core_main_conf_t *cmcf, ngx_str_t *key)
{
	ngx_str_t name = ngx_null_string;
	size_t i = 0;

	while (i < key->len) {
		if (key->data[i++] != '$' || i == key->len)
			continue;
		if (key->data[i] >= '1' && key->data[i] <= '9') {
			i++;
			continue;
		}
		if (key->data[i] == '{')
			i++;
		name.data = key->data + i;
		for (name.len = 0; i < key->len; i++, name.len++) {
			u_char ch = key->data[i];
			if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
			      (ch >= '0' && ch <= '9') || ch == '_'))
				break;
		}
		if (name.len && !ngx_http_sluice_variable_known(cmcf, &name))
			return name;
	}
	name.len = 0;
	name.data = NULL;
	return name;
}

static ngx_int_t ngx_http_sluice_init(ngx_conf_t *cf)
{
	ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
	ngx_http_sluice_main_conf_t *smcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_sluice_module);
	ngx_http_sluice_ref_t *ref = smcf->refs.elts;

	/* The http block is complete: what a sluice_limit names must exist.
	 * Said with the limit's own file and line, in ngx_conf_log_error's
	 * form, before nginx finds it out without them (an undefined zone is
	 * "zero size shared memory zone" at cycle init, an unknown variable
	 * is init_vars' "unknown variable"). */
	for (ngx_uint_t i = 0; i < smcf->refs.nelts; i++) {
		if (!ref[i].zone->defined) {
			ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
			              "sluice_limit: zone \"%V\" is not defined by any sluice_zone in %s:%ui",
			              &ref[i].zone->name, ref[i].file, ref[i].line);
			return NGX_ERROR;
		}
		ngx_str_t v = ngx_http_sluice_unknown_variable(cmcf, &ref[i].key);
		if (v.len) {
			ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
			              "sluice_limit: unknown \"%V\" variable in key=\"%V\" in %s:%ui", &v,
			              &ref[i].key, ref[i].file, ref[i].line);
			return NGX_ERROR;
		}
	}

	ngx_http_handler_pt *h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
	if (h == NULL)
		return NGX_ERROR;
	*h = ngx_http_sluice_handler;
	return NGX_OK;
}
