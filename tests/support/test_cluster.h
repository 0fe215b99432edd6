/* SPDX-License-Identifier: MIT */
/*
 * test_cluster.h - a private Redis Cluster for one test: three primaries,
 * each a private redis-server (test_server.h: 127.0.0.1, a free port, by
 * pid) started with --cluster-enabled yes, joined by `redis-cli --cluster
 * create` (no replicas).  Every wait is bounded; redis-cli's output goes
 * to cli.log in the first node's dir.
 */
#ifndef SLUICE_REDIS_TEST_CLUSTER_H
#define SLUICE_REDIS_TEST_CLUSTER_H

#include <sys/types.h>

#include "test_server.h"

#define SLUICE_TEST_CLUSTER_NODES 3

typedef struct sluice_test_cluster {
	sluice_test_redis_t node[SLUICE_TEST_CLUSTER_NODES];
} sluice_test_cluster_t;

/* start the nodes, create the cluster, wait (at most 10 s) for
 * cluster_state:ok on each; 0, or -1 (what started is stopped) */
int sluice_test_cluster_start(sluice_test_cluster_t *c);
/* kill -9 every node and remove its dir (a cluster keeps no data here) */
void sluice_test_cluster_stop(sluice_test_cluster_t *c);
/* "127.0.0.1:PORT" of node @i into @out */
void sluice_test_cluster_addr(const sluice_test_cluster_t *c, int i, char *out, size_t len);
/* redis-cli with @argv (NULL-terminated, after "redis-cli") in the
 * background: its pid, or -1 */
pid_t sluice_test_cluster_cli(const sluice_test_cluster_t *c, const char *const *argv);
/* wait for @pid at most @secs, then kill it: its exit status, or -1 (killed) */
int sluice_test_cluster_wait(pid_t pid, unsigned secs);

#endif
