/* SPDX-License-Identifier: MIT */
/*
 * run_example.c - run an example program against a private redis-server:
 * run_example PROGRAM  starts the server (test_server.c), runs PROGRAM PORT
 * (at most 30 s, then SIGKILL), stops the server, and exits with
 * PROGRAM's status.
 */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_server.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: run_example PROGRAM\n");
		return 2;
	}
	sluice_test_redis_t s;
	if (sluice_test_redis_start(&s, 0) != 0) {
		fprintf(stderr, "run_example: redis-server did not start\n");
		return 1;
	}
	char port[16];
	snprintf(port, sizeof(port), "%d", s.port);
	pid_t pid = fork();
	if (pid == 0) {
		execl(argv[1], argv[1], port, (char *)NULL);
		_exit(127);
	}
	int status = 0, done = 0;
	for (int i = 0; i < 3000 && pid > 0; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			done = 1;
			break;
		}
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	if (!done && pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	sluice_test_redis_stop(&s);
	return done && WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
