/* SPDX-License-Identifier: MIT */
/*
 * test_server.h - a private redis-server for one test: 127.0.0.1, a free
 * port, no persistence, DEBUG allowed locally, a private temp dir.
 *
 * The fixture starts the server with fork + exec, checks that the pid
 * listening on the port is the child it started (/proc/net/tcp's inode
 * against /proc/<pid>/fd), and stops it by that pid only.  Every wait is
 * bounded.  An atexit handler and the fixture's own kill on every failure
 * path leave no server behind a failed test (Criterion runs each test in a
 * child process: the handler runs when it exits).
 */
#ifndef SLUICE_REDIS_TEST_SERVER_H
#define SLUICE_REDIS_TEST_SERVER_H

#include <sys/types.h>

typedef struct sluice_test_redis {
	int port;
	pid_t pid;
	char dir[64];
} sluice_test_redis_t;

/* start on a free port (@port 0) or on @port; 0 or -1 (nothing left running) */
int sluice_test_redis_start(sluice_test_redis_t *s, int port);
/* as sluice_test_redis_start, with @conf (NULL: none) written to the
 * server's dir as its config file, and @extra (NULL-terminated; NULL:
 * none) after the usual arguments: a replica ("--replicaof", "127.0.0.1",
 * PORT), a Sentinel (@conf "sentinel monitor ...", @extra "--sentinel"), a
 * cluster node (@extra "--cluster-enabled" "yes" ...: its bus gets a free
 * port of its own, --cluster-port, as port + 10000 may pass 65535) */
int sluice_test_redis_start_with(sluice_test_redis_t *s, int port, const char *conf,
                                 const char *const *extra);
/* kill -9 and reap (bounded); the port and dir are kept for a restart */
void sluice_test_redis_kill(sluice_test_redis_t *s);
/* SIGTERM, reap (bounded, then SIGKILL), remove the dir */
void sluice_test_redis_stop(sluice_test_redis_t *s);
/* one command on a fresh connection (hiredis-free: inline protocol), the
 * reply's first line into @out; 0 or -1 */
int sluice_test_redis_cmd(const sluice_test_redis_t *s, const char *cmd, char *out, size_t len);

#endif
