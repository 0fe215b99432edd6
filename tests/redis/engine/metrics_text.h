/* SPDX-License-Identifier: MIT */
/*
 * metrics_text.h - the engine tests' reading of sluice_engine_metrics():
 * the text collected whole, one sample's value by its series, and
 * promtool's check of the text (PROMTOOL: the path meson found, or "").
 * Included by test_engine_redis.c and test_engine_cluster.c only.
 */
#ifndef SLUICE_TEST_METRICS_TEXT_H
#define SLUICE_TEST_METRICS_TEXT_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/engine.h"

struct text {
	char buf[1 << 17];
	size_t len;
};

static int collect(void *ctx, const char *b, size_t n)
{
	struct text *t = ctx;
	if (t->len + n >= sizeof(t->buf))
		return -1;
	memcpy(t->buf + t->len, b, n);
	t->len += n;
	t->buf[t->len] = '\0';
	return 0;
}

/* The value of the sample whose line starts with @series (name and
 * labels exactly), or -1 when there is none. */
static long long sample(const struct text *t, const char *series)
{
	size_t n = strlen(series);
	for (const char *p = t->buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return atoll(p + n + 1);
	return -1;
}

static void metrics(sluice_engine_t *e, struct text *t)
{
	t->len = 0;
	t->buf[0] = '\0';
	cr_assert_eq(sluice_engine_metrics(e, collect, t), 0);
}

static void promtool_ok(const struct text *t)
{
	if (!PROMTOOL[0]) {
		cr_log_warn("promtool not installed: text not checked");
		return;
	}
	char path[] = "/tmp/sluice-engine-metrics-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, t->buf, t->len), (ssize_t)t->len);
	close(fd);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s check metrics < %s", PROMTOOL, path);
	int rc = system(cmd);
	unlink(path);
	cr_assert_eq(rc, 0, "promtool check metrics refused the text:\n%s", t->buf);
}

#endif
