/* SPDX-License-Identifier: MIT */
/* test_cluster.c - see test_cluster.h. */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_cluster.h"

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

void sluice_test_cluster_addr(const sluice_test_cluster_t *c, int i, char *out, size_t len)
{
	snprintf(out, len, "127.0.0.1:%d", c->node[i].port);
}

pid_t sluice_test_cluster_cli(const sluice_test_cluster_t *c, const char *const *argv)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	char log[128];
	snprintf(log, sizeof(log), "%s/cli.log", c->node[0].dir);
	if (!freopen(log, "a", stdout) || !freopen(log, "a", stderr))
		_exit(127);
	const char *v[32] = { "redis-cli" };
	int n = 1;
	for (int i = 0; argv[i] && n < 31; i++)
		v[n++] = argv[i];
	v[n] = NULL;
	execvp("redis-cli", (char *const *)v);
	_exit(127);
}

int sluice_test_cluster_wait(pid_t pid, unsigned secs)
{
	if (pid < 0)
		return -1;
	for (unsigned i = 0; i < secs * 100; i++) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* cluster_state:ok on node @i */
static int state_ok(const sluice_test_cluster_t *c, int i)
{
	struct timeval tv = { 2, 0 };
	redisContext *x = redisConnectWithTimeout("127.0.0.1", c->node[i].port, tv);
	if (!x || x->err) {
		if (x)
			redisFree(x);
		return 0;
	}
	redisSetTimeout(x, tv);
	redisReply *rep = redisCommand(x, "CLUSTER INFO");
	int ok = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, "cluster_state:ok");
	if (rep)
		freeReplyObject(rep);
	redisFree(x);
	return ok;
}

int sluice_test_cluster_start(sluice_test_cluster_t *c)
{
	static const char *const extra[] = { "--cluster-enabled", "yes", "--cluster-config-file",
		                             "nodes.conf", "--cluster-node-timeout", "5000", NULL };
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < SLUICE_TEST_CLUSTER_NODES; i++)
		if (sluice_test_redis_start_with(&c->node[i], 0, NULL, extra) != 0) {
			sluice_test_cluster_stop(c);
			return -1;
		}
	char a[SLUICE_TEST_CLUSTER_NODES][32];
	for (int i = 0; i < SLUICE_TEST_CLUSTER_NODES; i++)
		sluice_test_cluster_addr(c, i, a[i], sizeof(a[i]));
	const char *const create[] = { "--cluster", "create", a[0], a[1], a[2], "--cluster-yes",
		                       NULL };
	if (sluice_test_cluster_wait(sluice_test_cluster_cli(c, create), 30) != 0) {
		sluice_test_cluster_stop(c);
		return -1;
	}
	for (int t = 0; t < 1000; t++) {
		int ok = 0;
		for (int i = 0; i < SLUICE_TEST_CLUSTER_NODES; i++)
			ok += state_ok(c, i);
		if (ok == SLUICE_TEST_CLUSTER_NODES)
			return 0;
		sleep_ms(10);
	}
	sluice_test_cluster_stop(c);
	return -1;
}

void sluice_test_cluster_stop(sluice_test_cluster_t *c)
{
	for (int i = 0; i < SLUICE_TEST_CLUSTER_NODES; i++)
		if (c->node[i].dir[0]) { /* started */
			sluice_test_redis_kill(&c->node[i]);
			sluice_test_redis_stop(&c->node[i]);
		}
}
