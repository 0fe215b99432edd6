/* SPDX-License-Identifier: MIT */
/*
 * ngx_http_sluice_rules.c - the rules engine (sluice/engine.h) in nginx:
 * one YAML file of rules (docs/rules.md) decides every request of the
 * http block.  The second module of ngx_http_sluice_module.so.
 *
 *   sluice_rules FILE [zone=NAME:SIZE];   (http; default zone=sluice_rules:64m)
 *   sluice_rules_user EXPR;               (http: the `user` dimension's value)
 *   sluice_rules_stale @NAME;             (http, server, location: where a
 *                                          rule's stale fallback sends a request)
 *
 * DESIGN
 *
 * State.  The engine's keyed tables live in one nginx shared zone, the
 * engine's region (engine.h SHARED STATE).  The master makes the engine
 * on that region and loads the file (init_zone: before the workers are
 * forked, and again at every `nginx -s reload`); every worker inherits the
 * engine by fork() and decides on the same tables, lock-free.  The file is
 * read once, into the cycle's memory, when the directive is parsed: the
 * master and every worker (a respawned one too) load the same bytes, even
 * if the file is edited in between.
 *
 * Reload.  A zone that keeps its name and size keeps its region: the
 * master loads the new file into the same engine, so a rule that keeps
 * its id and layout keeps every key's state, a changed rate or limit
 * applies live, a changed layout starts beside its old state (engine.h
 * RELOAD).  A file with errors is refused by `nginx -t` and by the reload,
 * each error as "FILE:LINE:COL: message"; the old rules stay in force (a
 * failed load keeps the engine's set).  When the new cycle fails after the
 * load (another module's error, a port in use), the cycle's pool cleanup
 * loads the old file again, so the master's engine is the old cycle's.
 *
 * Workers and processes.  A rule with dimensions is one table in the
 * zone, exact across workers; so is a global rule a table can hold (a
 * table of one key in the zone: engine.h SHARED STATE).  A global rule no
 * table holds (sluice_rule_per_process) is a limiter per process: under
 * more than one worker it would admit its limit once per worker, so such
 * a file is refused unless nginx runs one worker process
 * (worker_processes 1, or master_process off).  A rule on
 * a backend (rules.h BACKENDS) is counted in Redis; a backend owns an I/O
 * thread, which a forked worker does not have (sluice/redis.h FORK), so
 * each worker loads the file again in init_process, on the same region:
 * tables are kept, and the worker's backends are its own.
 *
 * Verdicts (sluice_engine_decide in the preaccess phase, once per main
 * request): PASS serves; REJECT answers the rule's status with
 * Retry-After, RateLimit-Policy and RateLimit; QUEUE waits the booked
 * delay on a timer, then serves ($sluice_status DELAYED); SHADOW serves,
 * logs the would-be refusal at warn and sets $sluice_status to
 * REJECTED_DRY_RUN (limit_req's word for it); STALE redirects to the named
 * location of sluice_rules_stale (for example one serving
 * proxy_cache_use_stale content), or answers 503 and logs why when none is
 * set.  The log phase ends the verdict (sluice_engine_complete) with the
 * upstream's response time (the sum over tries; the request's time when
 * there was no upstream) and ok = status below 500, so concurrency
 * permits come back and adaptive rules see real latency.  A worker calls
 * sluice_engine_sync() every second (adaptive limits, pending changes).
 *
 * The request the engine sees: method, r->uri (decoded and normalised, as
 * nginx matches locations; no query string), the Host (nginx's server
 * name of the request, lower case, no port), the client address of
 * c->sockaddr (what the realip module set, if it ran), headers and query
 * arguments by name, the user from sluice_rules_user.
 *
 * Time: CLOCK_MONOTONIC, as the directives' module (its DESIGN says why).
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <string.h>

#include <sluice/engine.h>

#include "ngx_http_sluice.h"

#define NGX_HTTP_SLUICE_RULES_ZONE_SIZE (64 * 1024 * 1024)
#define NGX_HTTP_SLUICE_RULES_SYNC_MS 1000

typedef struct ngx_http_sluice_rules_main_conf_s ngx_http_sluice_rules_main_conf_t;
struct ngx_http_sluice_rules_main_conf_s {
	ngx_str_t file;              /* absolute, NUL-terminated            */
	ngx_str_t text;              /* its bytes, read at parse time        */
	ngx_shm_zone_t *shm_zone;
	ngx_http_complex_value_t *user;
	ngx_cycle_t *cycle;          /* the cycle parsing it                 */
	ngx_uint_t backends;         /* rules on a backend: workers load too */
	const char *process_rule;    /* a global rule on no backend, if any  */
	sluice_rules_mark_t process_mark;
	sluice_engine_t *engine;     /* init_zone; inherited by fork()       */
	ngx_http_sluice_rules_main_conf_t *prev; /* the cycle it replaced   */
	ngx_uint_t committed;        /* the cycle came up (init_module)      */
	ngx_event_t sync_ev;
};

typedef struct {
	ngx_str_t stale;             /* sluice_rules_stale's @name           */
} ngx_http_sluice_rules_loc_conf_t;

static char *ngx_http_sluice_rules(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_sluice_rules_user(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_http_sluice_rules_init(ngx_conf_t *cf);
static void *ngx_http_sluice_rules_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_sluice_rules_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_sluice_rules_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static ngx_int_t ngx_http_sluice_rules_init_module(ngx_cycle_t *cycle);
static ngx_int_t ngx_http_sluice_rules_init_process(ngx_cycle_t *cycle);

static ngx_command_t ngx_http_sluice_rules_commands[] = {
	{ ngx_string("sluice_rules"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE12,
	  ngx_http_sluice_rules, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
	{ ngx_string("sluice_rules_user"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
	  ngx_http_sluice_rules_user, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
	{ ngx_string("sluice_rules_stale"),
	  NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
	  ngx_conf_set_str_slot, NGX_HTTP_LOC_CONF_OFFSET,
	  offsetof(ngx_http_sluice_rules_loc_conf_t, stale), NULL },
	ngx_null_command
};

static ngx_http_module_t ngx_http_sluice_rules_module_ctx = {
	NULL,                          /* preconfiguration */
	ngx_http_sluice_rules_init,    /* postconfiguration */
	ngx_http_sluice_rules_create_main_conf, NULL,
	NULL, NULL,
	ngx_http_sluice_rules_create_loc_conf, ngx_http_sluice_rules_merge_loc_conf
};

ngx_module_t ngx_http_sluice_rules_module = {
	NGX_MODULE_V1,
	&ngx_http_sluice_rules_module_ctx, ngx_http_sluice_rules_commands, NGX_HTTP_MODULE,
	NULL,                               /* init master */
	ngx_http_sluice_rules_init_module,  /* init module */
	ngx_http_sluice_rules_init_process, /* init process */
	NULL, NULL, NULL, NULL,
	NGX_MODULE_V1_PADDING
};

/* ---- loading ------------------------------------------------------------- */

/* One line at emerg: in nginx's configuration form (with " in FILE:LINE")
 * while a directive is parsed (@cf), else on @log. */
static void ngx_http_sluice_rules_emerg(ngx_log_t *log, ngx_conf_t *cf, const char *text)
{
	if (cf)
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "sluice_rules: %s", text);
	else
		ngx_log_error(NGX_LOG_EMERG, log, 0, "sluice_rules: %s", text);
}

/* Log every error of a failed load as FILE:LINE:COL: message. */
static void ngx_http_sluice_rules_log_errors(ngx_log_t *log, ngx_conf_t *cf, int rc,
                                             sluice_rules_errors_t *errs)
{
	char line[SLUICE_RULES_MSG_MAX + 512];

	if (errs == NULL || errs->count == 0) {
		ngx_snprintf((u_char *)line, sizeof(line) - 1, "%s (%s)%Z", sluice_strerror(rc),
		             sluice_err_name(rc));
		ngx_http_sluice_rules_emerg(log, cf, line);
		return;
	}
	for (size_t i = 0; i < errs->count; i++)
		if (sluice_rules_error_text(errs, i, line, sizeof(line)) >= 0)
			ngx_http_sluice_rules_emerg(log, cf, line);
	if (errs->dropped) {
		ngx_snprintf((u_char *)line, sizeof(line) - 1, "%uz more errors%Z", errs->dropped);
		ngx_http_sluice_rules_emerg(log, cf, line);
	}
}

/* Read @path (a regular file of at most SLUICE_RULES_MAX_BYTES) into
 * cf->pool.  NGX_OK, or an error logged in nginx's form. */
static ngx_int_t ngx_http_sluice_rules_read(ngx_conf_t *cf, ngx_str_t *path, ngx_str_t *text)
{
	ngx_file_t file;
	ngx_file_info_t fi;

	ngx_memzero(&file, sizeof(file));
	file.name = *path;
	file.log = cf->log;
	file.fd = ngx_open_file(path->data, NGX_FILE_RDONLY | NGX_FILE_NONBLOCK, NGX_FILE_OPEN, 0);
	if (file.fd == NGX_INVALID_FILE) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno, "sluice_rules: %s: cannot open",
		                   path->data);
		return NGX_ERROR;
	}
	ngx_int_t rc = NGX_ERROR;
	if (ngx_fd_info(file.fd, &fi) == NGX_FILE_ERROR) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno, "sluice_rules: %s: cannot stat",
		                   path->data);
	} else if (!ngx_is_file(&fi)) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "sluice_rules: %s: cannot open: not a regular file",
		                   path->data);
	} else if (ngx_file_size(&fi) > (off_t)SLUICE_RULES_MAX_BYTES) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
		                   "sluice_rules: %s: larger than %uz bytes (rules.h LIMITS)",
		                   path->data, (size_t)SLUICE_RULES_MAX_BYTES);
	} else {
		text->len = (size_t)ngx_file_size(&fi);
		text->data = ngx_pnalloc(cf->pool, text->len + 1);
		if (text->data != NULL) {
			ssize_t n = ngx_read_file(&file, text->data, text->len, 0);
			if (n == (ssize_t)text->len) {
				text->data[text->len] = '\0';
				rc = NGX_OK;
			} else {
				ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
				                   "sluice_rules: %s: short read", path->data);
			}
		}
	}
	(void)ngx_close_file(file.fd);
	return rc;
}

/* Load the cycle's text into @e.  NGX_OK, or the errors logged. */
static ngx_int_t ngx_http_sluice_rules_load(ngx_http_sluice_rules_main_conf_t *mcf,
                                            sluice_engine_t *e, ngx_log_t *log)
{
	sluice_rules_errors_t *errs = NULL;
	int rc = sluice_engine_load_buffer(e, (const char *)mcf->file.data, mcf->text.data,
	                                   mcf->text.len, &errs);
	if (rc == 0)
		return NGX_OK;
	ngx_http_sluice_rules_log_errors(log, NULL, rc, errs);
	sluice_rules_errors_free(errs);
	return NGX_ERROR;
}

/* The cycle's pool goes: a cycle that never came up (its reload failed
 * after init_zone loaded its file) gives the master's engine back the
 * rules of the cycle still in force. */
static void ngx_http_sluice_rules_cleanup(void *data)
{
	ngx_http_sluice_rules_main_conf_t *mcf = data;

	if (mcf->committed || mcf->prev == NULL || mcf->engine == NULL)
		return;
	if (ngx_http_sluice_rules_load(mcf->prev, mcf->engine, ngx_cycle->log) != NGX_OK)
		ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, 0,
		              "sluice_rules: the rules in force could not be loaded again after a "
		              "failed reload: the master keeps the refused cycle's rules");
}

static ngx_int_t ngx_http_sluice_rules_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
	ngx_http_sluice_rules_main_conf_t *mcf = shm_zone->data, *old = data;
	ngx_log_t *log = shm_zone->shm.log;
	ngx_core_conf_t *ccf = (ngx_core_conf_t *)ngx_get_conf(mcf->cycle->conf_ctx, ngx_core_module);

	if (mcf->process_rule && ccf->master && ccf->worker_processes > 1) {
		ngx_log_error(NGX_LOG_EMERG, log, 0,
		              "sluice_rules: %s:%uD:%uD: rule '%s' is global and on no backend, and "
		              "no table holds it (sliding_log, decay, warmup, or a queue fallback), "
		              "so it is counted per process: with %i worker processes it would "
		              "admit its limit %i times; give it a dimension or a backend, use "
		              "another algorithm, or run one worker",
		              mcf->file.data, mcf->process_mark.line, mcf->process_mark.col,
		              mcf->process_rule, ccf->worker_processes, ccf->worker_processes);
		return NGX_ERROR;
	}

	sluice_engine_t *e;
	if (old) {
		/* The zone kept its name and size: the same region, the same
		 * engine, every state kept (RELOAD). */
		e = old->engine;
		mcf->prev = old;
	} else {
		ngx_slab_pool_t *shpool = (ngx_slab_pool_t *)shm_zone->shm.addr;
		if (shm_zone->shm.exists)
			return NGX_ERROR; /* Windows only: never on Linux */
		/* The largest block the slab gives, page aligned (so 64-byte
		 * aligned, as the engine wants), fresh from mmap: all zero. */
		void *region = NULL;
		size_t bytes = shm_zone->shm.size;
		shpool->log_nomem = 0;
		while (bytes >= ((size_t)1 << 20)) {
			region = ngx_slab_alloc(shpool, bytes);
			if (region)
				break;
			bytes -= bytes / 64 > ngx_pagesize ? bytes / 64 : ngx_pagesize;
		}
		if (region == NULL) {
			ngx_log_error(NGX_LOG_EMERG, log, 0,
			              "sluice_rules: zone \"%V\" of %uz bytes has no room for the "
			              "engine's region (1 MiB at least)",
			              &shm_zone->shm.name, shm_zone->shm.size);
			return NGX_ERROR;
		}
		sluice_engine_options_t opt = { .clock = &sluice_clock_monotonic, .region = region,
			                        .region_bytes = bytes };
		int rc = sluice_engine_new(&opt, &e);
		if (rc != 0) {
			ngx_log_error(NGX_LOG_EMERG, log, 0, "sluice_rules: zone \"%V\": %s (%s)",
			              &shm_zone->shm.name, sluice_strerror(rc), sluice_err_name(rc));
			return NGX_ERROR;
		}
	}
	if (ngx_http_sluice_rules_load(mcf, e, log) != NGX_OK) {
		/* The old set stays in force (a failed load keeps it); a new
		 * engine that never loaded is dropped with the cycle. */
		if (old == NULL)
			sluice_engine_free(e);
		mcf->prev = NULL;
		return NGX_ERROR;
	}
	mcf->engine = e;
	return NGX_OK;
}

/* ---- directives ---------------------------------------------------------- */

static char *ngx_http_sluice_rules(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_sluice_rules_main_conf_t *mcf = conf;
	ngx_str_t *value = cf->args->elts;
	ngx_str_t zone = ngx_string("sluice_rules");
	ssize_t size = NGX_HTTP_SLUICE_RULES_ZONE_SIZE;
	(void)cmd;

	if (mcf->file.data)
		return "is duplicate";
	if (cf->args->nelts == 3) {
		ngx_str_t *v = &value[2];
		u_char *colon = v->len > 5 ? ngx_strlchr(v->data + 5, v->data + v->len, ':') : NULL;
		if (ngx_strncmp(v->data, "zone=", 5) != 0 || colon == NULL || colon == v->data + 5) {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
			                   "sluice_rules: invalid parameter \"%V\": expected zone=NAME:SIZE",
			                   v);
			return NGX_CONF_ERROR;
		}
		zone.data = v->data + 5;
		zone.len = (size_t)(colon - zone.data);
		ngx_str_t s = { (size_t)(v->data + v->len - colon - 1), colon + 1 };
		size = ngx_parse_size(&s);
		if (size == NGX_ERROR || size < (ssize_t)(2 << 20)) {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
			                   "sluice_rules: invalid zone size \"%V\": at least 2m", &s);
			return NGX_CONF_ERROR;
		}
	}

	mcf->file = value[1];
	if (ngx_conf_full_name(cf->cycle, &mcf->file, 1) != NGX_OK)
		return NGX_CONF_ERROR;
	u_char *z = ngx_pnalloc(cf->pool, mcf->file.len + 1);
	if (z == NULL)
		return NGX_CONF_ERROR;
	ngx_memcpy(z, mcf->file.data, mcf->file.len);
	z[mcf->file.len] = '\0';
	mcf->file.data = z;
	if (ngx_http_sluice_rules_read(cf, &mcf->file, &mcf->text) != NGX_OK)
		return NGX_CONF_ERROR;

	/* Validate here, so `nginx -t` and a reload name each error of the
	 * file and this directive's place; the engine's own checks (rules
	 * that could match one request, room in the zone) come at init_zone. */
	sluice_rules_t *rules = NULL;
	sluice_rules_errors_t *errs = NULL;
	int rc = sluice_rules_load_buffer((const char *)mcf->file.data, mcf->text.data, mcf->text.len,
	                                  NULL, &rules, &errs);
	if (rc != 0) {
		ngx_http_sluice_rules_log_errors(cf->log, cf, rc, errs);
		sluice_rules_errors_free(errs);
		return NGX_CONF_ERROR;
	}
	mcf->backends = rules->nbackends > 0;
	for (size_t i = 0; i < rules->count; i++) {
		const sluice_rule_t *ru = &rules->rules[i];
		if (sluice_rule_per_process(ru)) {
			size_t n = ngx_strlen(ru->id);
			u_char *id = ngx_pnalloc(cf->pool, n + 1);
			if (id == NULL) {
				sluice_rules_free(rules);
				return NGX_CONF_ERROR;
			}
			ngx_memcpy(id, ru->id, n + 1);
			mcf->process_rule = (const char *)id;
			mcf->process_mark = ru->id_mark;
			break;
		}
	}
	sluice_rules_free(rules);

	mcf->cycle = cf->cycle;
	mcf->shm_zone = ngx_shared_memory_add(cf, &zone, (size_t)size, &ngx_http_sluice_rules_module);
	if (mcf->shm_zone == NULL)
		return NGX_CONF_ERROR;
	if (mcf->shm_zone->data) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "sluice_rules: zone \"%V\" is already used",
		                   &zone);
		return NGX_CONF_ERROR;
	}
	mcf->shm_zone->init = ngx_http_sluice_rules_init_zone;
	mcf->shm_zone->data = mcf;

	ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool, 0);
	if (cln == NULL)
		return NGX_CONF_ERROR;
	cln->handler = ngx_http_sluice_rules_cleanup;
	cln->data = mcf;
	return NGX_CONF_OK;
}

static char *ngx_http_sluice_rules_user(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_sluice_rules_main_conf_t *mcf = conf;
	ngx_str_t *value = cf->args->elts;
	ngx_http_compile_complex_value_t ccv;
	(void)cmd;

	if (mcf->user)
		return "is duplicate";
	mcf->user = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
	if (mcf->user == NULL)
		return NGX_CONF_ERROR;
	ngx_memzero(&ccv, sizeof(ccv));
	ccv.cf = cf;
	ccv.value = &value[1];
	ccv.complex_value = mcf->user;
	if (ngx_http_compile_complex_value(&ccv) != NGX_OK)
		return NGX_CONF_ERROR;
	return NGX_CONF_OK;
}

/* ---- the decision (preaccess phase) -------------------------------------- */

/* Whether @lc (a header's name as nginx lowercased it) is @name in any
 * case, both @n bytes: one side to fold, not two as ngx_strncasecmp. */
static ngx_uint_t ngx_http_sluice_rules_name_is(const u_char *lc, const char *name, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (lc[i] != ngx_tolower((u_char)name[i]))
			return 0;
	return 1;
}

/* A header (case-insensitive name) or a query argument of the request. */
static const void *ngx_http_sluice_rules_lookup(void *ctx, sluice_lookup_kind_t kind,
                                                const char *name, size_t *len)
{
	ngx_http_request_t *r = ctx;
	size_t n = ngx_strlen(name);

	if (kind == SLUICE_LOOKUP_QUERY) {
		ngx_str_t v;
		if (ngx_http_arg(r, (u_char *)name, n, &v) != NGX_OK)
			return NULL;
		*len = v.len;
		return v.data;
	}
	ngx_list_part_t *part = &r->headers_in.headers.part;
	ngx_table_elt_t *h = part->elts;
	for (ngx_uint_t i = 0;; i++) {
		if (i >= part->nelts) {
			if (part->next == NULL)
				return NULL;
			part = part->next;
			h = part->elts;
			i = 0;
		}
		if (h[i].key.len == n && ngx_http_sluice_rules_name_is(h[i].lowcase_key, name, n)) {
			*len = h[i].value.len;
			return h[i].value.data;
		}
	}
}

typedef struct {
	ngx_http_request_t *r;
	ngx_int_t rc;
} ngx_http_sluice_rules_emit_t;

static void ngx_http_sluice_rules_emit(void *ctx, const char *name, const char *value)
{
	ngx_http_sluice_rules_emit_t *em = ctx;
	if (ngx_http_sluice_add_header(em->r, name, value, (int)ngx_strlen(value)) != NGX_OK)
		em->rc = NGX_ERROR;
}

/*
 * Verdicts, per worker.  A sluice_verdict_t is about 4 KB: from the
 * request's pool it is a large allocation (a malloc and a free per
 * request, about 700 instructions of the 1,100 the first version of this
 * handler cost), and copied it costs about 500 more.  A worker decides one
 * request at a time (nginx's event loop), so it decides into a buffer of
 * this worker's free list, in place: a verdict that matched no rule goes
 * straight back; one that matched, which complete() must end, stays with
 * its request until it ends.  Only when the list is empty does a request
 * decide into the one scratch verdict, and a match then moves to a new
 * buffer (the list grows to the most such requests in progress at once,
 * never shrinks).
 */
typedef union ngx_http_sluice_rules_buf_u ngx_http_sluice_rules_buf_t;
union ngx_http_sluice_rules_buf_u {
	sluice_verdict_t v;
	ngx_http_sluice_rules_buf_t *next;
};
static sluice_verdict_t ngx_http_sluice_rules_scratch;
static ngx_http_sluice_rules_buf_t *ngx_http_sluice_rules_free;

/* A verdict to decide into: the free list's first, else the scratch. */
static sluice_verdict_t *ngx_http_sluice_rules_take(void)
{
	ngx_http_sluice_rules_buf_t *b = ngx_http_sluice_rules_free;
	if (b == NULL)
		return &ngx_http_sluice_rules_scratch;
	ngx_http_sluice_rules_free = b->next;
	return &b->v;
}

/* The verdict @v, which matched, in a buffer of its own: @v itself, or a
 * new buffer when @v is the scratch.  NULL: out of memory. */
static sluice_verdict_t *ngx_http_sluice_rules_keep(sluice_verdict_t *v)
{
	if (v != &ngx_http_sluice_rules_scratch)
		return v;
	ngx_http_sluice_rules_buf_t *b = ngx_alloc(sizeof(*b), ngx_cycle->log);
	if (b == NULL)
		return NULL;
	ngx_memcpy(&b->v, v, sizeof(*v));
	return &b->v;
}

static void ngx_http_sluice_rules_drop(sluice_verdict_t *v)
{
	ngx_http_sluice_rules_buf_t *b = (ngx_http_sluice_rules_buf_t *)v;
	if (v == &ngx_http_sluice_rules_scratch)
		return;
	b->next = ngx_http_sluice_rules_free;
	ngx_http_sluice_rules_free = b;
}

/* ---- metrics ------------------------------------------------------ */

struct metrics_out {
	ngx_pool_t *pool;
	ngx_chain_t **tail;
	off_t len;
};

/* sluice_engine_metrics' writer: each piece copied into a buffer of the
 * request's pool, chained. */
static int ngx_http_sluice_rules_metrics_piece(void *ctx, const char *buf, size_t len)
{
	struct metrics_out *o = ctx;
	ngx_buf_t *b = ngx_create_temp_buf(o->pool, len ? len : 1);
	ngx_chain_t *cl = ngx_alloc_chain_link(o->pool);
	if (b == NULL || cl == NULL)
		return 1;
	b->last = ngx_cpymem(b->last, buf, len);
	cl->buf = b;
	cl->next = NULL;
	*o->tail = cl;
	o->tail = &cl->next;
	o->len += (off_t)len;
	return 0;
}

ngx_int_t ngx_http_sluice_rules_metrics(ngx_http_request_t *r, ngx_chain_t **out, off_t *len)
{
	ngx_http_sluice_rules_main_conf_t *mcf =
		ngx_http_get_module_main_conf(r, ngx_http_sluice_rules_module);
	*out = NULL;
	*len = 0;
	if (mcf == NULL || mcf->engine == NULL)
		return NGX_OK;
	struct metrics_out o = { r->pool, out, 0 };
	if (sluice_engine_metrics(mcf->engine, ngx_http_sluice_rules_metrics_piece, &o) != 0)
		return NGX_ERROR;
	*len = o.len;
	return NGX_OK;
}

/* The request is over (log phase, or its pool going without one): give
 * back what the verdict holds, with its latency and success. */
static void ngx_http_sluice_rules_complete(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
	ngx_http_sluice_rules_main_conf_t *mcf =
		ngx_http_get_module_main_conf(r, ngx_http_sluice_rules_module);
	sluice_verdict_t *v = ctx->verdict;

	if (v == NULL)
		return;
	ctx->verdict = NULL;
	if (mcf == NULL || mcf->engine == NULL) {
		ngx_http_sluice_rules_drop(v);
		return;
	}
	uint64_t ms = 0;
	ngx_uint_t upstream = 0;
	if (r->upstream_states) {
		ngx_http_upstream_state_t *st = r->upstream_states->elts;
		for (ngx_uint_t i = 0; i < r->upstream_states->nelts; i++) {
			if (st[i].peer) {
				ms += st[i].response_time;
				upstream = 1;
			}
		}
	}
	if (!upstream) {
		ngx_time_t *tp = ngx_timeofday();
		ngx_msec_int_t d = (ngx_msec_int_t)((tp->sec - r->start_sec) * 1000 +
		                                    (tp->msec - r->start_msec));
		ms = d > 0 ? (uint64_t)d : 0;
	}
	ngx_uint_t status = r->headers_out.status;
	(void)sluice_engine_complete(mcf->engine, v, ms * 1000000ULL, status != 0 && status < 500);
	ngx_http_sluice_rules_drop(v);
}

static ngx_int_t ngx_http_sluice_rules_log_handler(ngx_http_request_t *r)
{
	ngx_http_sluice_ctx_t *ctx = ngx_http_sluice_get_ctx(r, 0);
	if (ctx)
		ngx_http_sluice_rules_complete(r, ctx);
	return NGX_OK;
}

typedef struct {
	ngx_http_request_t *r;
	ngx_http_sluice_ctx_t *ctx;
} ngx_http_sluice_rules_done_t;

static void ngx_http_sluice_rules_done_cleanup(void *data)
{
	ngx_http_sluice_rules_done_t *d = data;
	ngx_http_sluice_rules_complete(d->r, d->ctx);
}

static ngx_int_t ngx_http_sluice_rules_handler(ngx_http_request_t *r)
{
	ngx_http_sluice_rules_main_conf_t *mcf =
		ngx_http_get_module_main_conf(r, ngx_http_sluice_rules_module);
	char method[16], host[256];

	if (mcf->engine == NULL || r != r->main)
		return NGX_DECLINED;
	ngx_http_sluice_ctx_t *ctx = ngx_http_sluice_get_ctx(r, 1);
	if (ctx == NULL)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	/* Once per request: not after an internal redirect (the stale
	 * location, the index module), nor when a queued request's phases run
	 * again. */
	if (ctx->rules_done)
		return NGX_DECLINED;
	ctx->rules_done = 1;
	if (r->uri.len == 0 || r->uri.data[0] != '/')
		return NGX_DECLINED; /* not a path the rules can match */

	sluice_request_t req = { .path = (const char *)r->uri.data, .path_len = r->uri.len,
		                 .lookup = ngx_http_sluice_rules_lookup, .ctx = r };
	if (r->method_name.len < sizeof(method)) {
		ngx_memcpy(method, r->method_name.data, r->method_name.len);
		method[r->method_name.len] = '\0';
		req.method = method;
	}
	if (r->headers_in.server.len && r->headers_in.server.len < sizeof(host)) {
		ngx_memcpy(host, r->headers_in.server.data, r->headers_in.server.len);
		host[r->headers_in.server.len] = '\0';
		req.host = host;
	}
	struct sockaddr *sa = r->connection->sockaddr;
	if (sa->sa_family == AF_INET) {
		req.addr = &((struct sockaddr_in *)sa)->sin_addr;
		req.addr_len = 4;
#if (NGX_HAVE_INET6)
	} else if (sa->sa_family == AF_INET6) {
		req.addr = &((struct sockaddr_in6 *)sa)->sin6_addr;
		req.addr_len = 16;
#endif
	}
	ngx_str_t user = ngx_null_string;
	if (mcf->user) {
		if (ngx_http_complex_value(r, mcf->user, &user) != NGX_OK)
			return NGX_HTTP_INTERNAL_SERVER_ERROR;
		if (user.len) {
			req.user = user.data;
			req.user_len = user.len;
		}
	}

	sluice_verdict_t *v = ngx_http_sluice_rules_take();
	int rc = sluice_engine_decide(mcf->engine, &req, v);
	if (rc != 0 || v->nrules == 0) {
		ngx_http_sluice_rules_drop(v);
		if (rc != 0)
			ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "sluice_rules: %s (%s)",
			              sluice_strerror(rc), sluice_err_name(rc));
		return NGX_DECLINED; /* no rule: nothing to end, nothing to say */
	}
	/* complete() ends it when the request does: the log phase, or the
	 * pool's cleanup when there is none (registered first: a failure
	 * after it leaves nothing held) */
	ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(r->pool, sizeof(ngx_http_sluice_rules_done_t));
	sluice_verdict_t *kept = cln ? ngx_http_sluice_rules_keep(v) : NULL;
	if (kept == NULL) {
		(void)sluice_engine_complete(mcf->engine, v, 0, 0);
		ngx_http_sluice_rules_drop(v);
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	}
	v = kept;
	ctx->verdict = v;
	ngx_http_sluice_rules_done_t *done = cln->data;
	done->r = r;
	done->ctx = ctx;
	cln->handler = ngx_http_sluice_rules_done_cleanup;

	const sluice_verdict_rule_t *by = v->refused_by < v->nrules ? &v->rules[v->refused_by] : NULL;
	ngx_http_sluice_rules_emit_t em = { r, NGX_OK };
	switch (v->action) {
	case SLUICE_ACTION_REJECT:
		ctx->status = SLUICE_NGX_REJECTED;
		ctx->retry_after_ns = v->retry_after_ns;
		ctx->remaining = 0;
		ctx->have_remaining = 1;
		ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
		              "sluice: limiting requests by rule \"%s\"", by ? by->id : "");
		(void)sluice_verdict_headers(v, ngx_http_sluice_rules_emit, &em);
		return em.rc == NGX_OK ? (ngx_int_t)v->status : NGX_HTTP_INTERNAL_SERVER_ERROR;
	case SLUICE_ACTION_STALE: {
		ngx_http_sluice_rules_loc_conf_t *lcf =
			ngx_http_get_module_loc_conf(r, ngx_http_sluice_rules_module);
		ctx->status = SLUICE_NGX_STALE;
		if (lcf->stale.len == 0) {
			ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
			              "sluice: rule \"%s\" asks for a stale answer and this location "
			              "has no sluice_rules_stale: 503",
			              by ? by->id : "");
			return NGX_HTTP_SERVICE_UNAVAILABLE;
		}
		(void)ngx_http_named_location(r, &lcf->stale);
		ngx_http_finalize_request(r, NGX_DONE);
		return NGX_DONE;
	}
	case SLUICE_ACTION_SHADOW:
		ctx->status = SLUICE_NGX_REJECTED_DRY_RUN;
		ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
		              "sluice: shadow rule \"%s\" would refuse the request", by ? by->id : "");
		break;
	case SLUICE_ACTION_QUEUE:
		ctx->status = SLUICE_NGX_DELAYED;
		break;
	default:
		ctx->status = SLUICE_NGX_PASSED;
		break;
	}
	if (ngx_http_sluice_headers_on(r)) {
		(void)sluice_verdict_headers(v, ngx_http_sluice_rules_emit, &em);
		if (em.rc != NGX_OK)
			return NGX_HTTP_INTERNAL_SERVER_ERROR;
	}
	if (v->action == SLUICE_ACTION_QUEUE && v->delay_ns)
		return ngx_http_sluice_delay(r, v->delay_ns);
	return NGX_DECLINED;
}

/* ---- processes ----------------------------------------------------------- */

static ngx_int_t ngx_http_sluice_rules_init_module(ngx_cycle_t *cycle)
{
	ngx_http_sluice_rules_main_conf_t *mcf =
		ngx_http_cycle_get_module_main_conf(cycle, ngx_http_sluice_rules_module);
	/* The cycle came up: its rules are the ones in force. */
	if (mcf)
		mcf->committed = 1;
	return NGX_OK;
}

static void ngx_http_sluice_rules_sync(ngx_event_t *ev)
{
	ngx_http_sluice_rules_main_conf_t *mcf = ev->data;
	(void)sluice_engine_sync(mcf->engine);
	if (!ngx_exiting && !ngx_quit && !ngx_terminate)
		ngx_add_timer(ev, NGX_HTTP_SLUICE_RULES_SYNC_MS);
}

static ngx_int_t ngx_http_sluice_rules_init_process(ngx_cycle_t *cycle)
{
	ngx_http_sluice_rules_main_conf_t *mcf =
		ngx_http_cycle_get_module_main_conf(cycle, ngx_http_sluice_rules_module);

	if (mcf == NULL || mcf->engine == NULL)
		return NGX_OK;
	/* Backends: this worker's own I/O threads (sluice/redis.h FORK), on
	 * the same region (tables kept). */
	if (mcf->backends && ngx_http_sluice_rules_load(mcf, mcf->engine, cycle->log) != NGX_OK)
		return NGX_ERROR;
	mcf->sync_ev.handler = ngx_http_sluice_rules_sync;
	mcf->sync_ev.data = mcf;
	mcf->sync_ev.log = cycle->log;
	mcf->sync_ev.cancelable = 1;
	ngx_add_timer(&mcf->sync_ev, NGX_HTTP_SLUICE_RULES_SYNC_MS);
	return NGX_OK;
}

/* ---- configuration ------------------------------------------------------- */

static void *ngx_http_sluice_rules_create_main_conf(ngx_conf_t *cf)
{
	return ngx_pcalloc(cf->pool, sizeof(ngx_http_sluice_rules_main_conf_t));
}

static void *ngx_http_sluice_rules_create_loc_conf(ngx_conf_t *cf)
{
	return ngx_pcalloc(cf->pool, sizeof(ngx_http_sluice_rules_loc_conf_t));
}

static char *ngx_http_sluice_rules_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
	ngx_http_sluice_rules_loc_conf_t *prev = parent, *conf = child;
	(void)cf;
	ngx_conf_merge_str_value(conf->stale, prev->stale, "");
	if (conf->stale.len && conf->stale.data[0] != '@') {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
		                   "sluice_rules_stale: \"%V\" is not a named location (@name)",
		                   &conf->stale);
		return NGX_CONF_ERROR;
	}
	return NGX_CONF_OK;
}

static ngx_int_t ngx_http_sluice_rules_init(ngx_conf_t *cf)
{
	ngx_http_sluice_rules_main_conf_t *mcf =
		ngx_http_conf_get_module_main_conf(cf, ngx_http_sluice_rules_module);
	ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

	if (mcf->file.data == NULL)
		return NGX_OK;
	ngx_http_handler_pt *h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
	if (h == NULL)
		return NGX_ERROR;
	*h = ngx_http_sluice_rules_handler;
	h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
	if (h == NULL)
		return NGX_ERROR;
	*h = ngx_http_sluice_rules_log_handler;
	return NGX_OK;
}
