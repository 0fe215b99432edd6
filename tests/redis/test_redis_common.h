/* SPDX-License-Identifier: MIT */
/*
 * test_redis_common.h - what the libsluice-redis tests share: a private
 * server per test (test_server.h), a backend on it, a limit config.
 */
#ifndef SLUICE_TEST_REDIS_COMMON_H
#define SLUICE_TEST_REDIS_COMMON_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "redis_internal.h"
#include "test_server.h"

static sluice_test_redis_t srv;

static void server_up(void)
{
	cr_assert_eq(sluice_test_redis_start(&srv, 0), 0, "redis-server did not start");
}

static void server_down(void)
{
	sluice_test_redis_stop(&srv);
}

static inline sluice_redis_t *backend(void)
{
	sluice_redis_config_t rc = { .port = srv.port };
	sluice_redis_t *r;
	cr_assert_eq(sluice_redis_new(&rc, &r), 0);
	return r;
}

static inline sluice_redis_stats_t stats(const sluice_redis_t *r)
{
	sluice_redis_stats_t s;
	sluice_redis_stats(r, &s);
	return s;
}

static inline long long server_int(const char *cmd)
{
	char out[128];
	cr_assert_eq(sluice_test_redis_cmd(&srv, cmd, out, sizeof(out)), 0, "%s", cmd);
	long long v = 0;
	if (out[0] == ':')
		v = atoll(out + 1);
	else if (out[0] == '$') /* a bulk string: read the value with a second command */
		v = -1;
	return v;
}

#endif
