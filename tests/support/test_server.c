/* SPDX-License-Identifier: MIT */
/*
 * test_server.c - the tests' private redis-server (test_server.h).
 *
 * DESIGN: the fixture owns exactly the pids it forked.  The child asks for
 * SIGKILL when its parent dies (PR_SET_PDEATHSIG), so even a test worker
 * killed by Criterion's timeout leaves no server; an atexit handler stops
 * every server still recorded when a test exits through a failed assertion.
 * A started server is accepted only when the socket listening on its port
 * belongs to that pid, so a test never talks to (or stops) someone else's.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_server.h"

#ifndef SLUICE_REDIS_SERVER
#define SLUICE_REDIS_SERVER "redis-server"
#endif

static pid_t owned[16];

static void forget(pid_t pid)
{
	for (int i = 0; i < 16; i++)
		if (owned[i] == pid)
			owned[i] = 0;
}

static void kill_all(void)
{
	for (int i = 0; i < 16; i++)
		if (owned[i] > 0) {
			kill(owned[i], SIGKILL);
			waitpid(owned[i], NULL, 0);
			owned[i] = 0;
		}
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int port = -1;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* the inode of the socket listening on 127.0.0.1:@port, or 0 */
static unsigned long listen_inode(int port)
{
	FILE *f = fopen("/proc/net/tcp", "r");
	if (!f)
		return 0;
	char line[512];
	unsigned long inode = 0;
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned addr, lport, st;
		unsigned long ino;
		if (sscanf(line, " %*d: %8x:%4x %*8x:%*4x %2x %*s %*s %*s %*s %*s %lu", &addr, &lport,
		           &st, &ino) == 4 &&
		    (int)lport == port && st == 0x0A) {
			inode = ino;
			break;
		}
	}
	fclose(f);
	return inode;
}

static int pid_has_socket(pid_t pid, unsigned long inode)
{
	char path[64], want[64], link[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	struct dirent *e;
	int found = 0;
	while (!found && (e = readdir(d)) != NULL) {
		char fd[600];
		snprintf(fd, sizeof(fd), "%s/%s", path, e->d_name);
		ssize_t n = readlink(fd, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = 0;
			found = strcmp(link, want) == 0;
		}
	}
	closedir(d);
	return found;
}

int sluice_test_redis_start(sluice_test_redis_t *s, int port)
{
	return sluice_test_redis_start_with(s, port, NULL, NULL);
}

int sluice_test_redis_start_with(sluice_test_redis_t *s, int port, const char *conf,
                                 const char *const *extra)
{
	static int registered;
	if (!registered) {
		atexit(kill_all);
		registered = 1;
	}
	if (port == 0) {
		port = free_port();
		if (port < 0)
			return -1;
		snprintf(s->dir, sizeof(s->dir), "/tmp/sluice-redis-XXXXXX");
		if (!mkdtemp(s->dir))
			return -1;
	}
	s->port = port;
	char portstr[16];
	snprintf(portstr, sizeof(portstr), "%d", port);
	/* a cluster node's bus is on port + 10000 unless told: past 65535
	 * for most free ports, so it gets a free port of its own */
	char bus[16] = "";
	for (int i = 0; extra && extra[i]; i++)
		if (strcmp(extra[i], "--cluster-enabled") == 0) {
			int b = free_port();
			if (b < 0)
				return -1;
			snprintf(bus, sizeof(bus), "%d", b);
		}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		rmdir(s->dir);
		return -1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		char log[128];
		snprintf(log, sizeof(log), "%s/out.log", s->dir);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		const char *argv[64] = { "redis-server" };
		int argc = 1;
		char conf_path[128];
		if (conf) { /* the config file comes first (a Sentinel rewrites it) */
			snprintf(conf_path, sizeof(conf_path), "%s/redis.conf", s->dir);
			FILE *f = fopen(conf_path, "w");
			if (!f || fputs(conf, f) < 0 || fclose(f) != 0)
				_exit(127);
			argv[argc++] = conf_path;
		}
		static const char *const usual[] = { "--port", NULL, "--bind", "127.0.0.1", "--save", "",
			                             "--appendonly", "no", "--enable-debug-command",
			                             "local", "--dir", NULL, "--daemonize", "no" };
		for (size_t i = 0; i < sizeof(usual) / sizeof(usual[0]); i++)
			argv[argc++] = i == 1 ? portstr : i == 11 ? s->dir : usual[i];
		for (int i = 0; extra && extra[i] && argc < 61; i++)
			argv[argc++] = extra[i];
		if (bus[0]) {
			argv[argc++] = "--cluster-port";
			argv[argc++] = bus;
		}
		argv[argc] = NULL;
		execv(SLUICE_REDIS_SERVER, (char *const *)argv);
		_exit(127);
	}
	s->pid = pid;
	for (int i = 0; i < 16; i++)
		if (owned[i] == 0) {
			owned[i] = pid;
			break;
		}
	/* ready when our pid listens on the port: at most 5 s */
	for (int i = 0; i < 500; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			forget(pid);
			s->pid = 0;
			sluice_test_redis_stop(s); /* the dir */
			return -1; /* it died: the port was taken, or no binary */
		}
		unsigned long ino = listen_inode(port);
		if (ino && pid_has_socket(pid, ino)) {
			char pong[32];
			if (sluice_test_redis_cmd(s, "PING", pong, sizeof(pong)) == 0 &&
			    strcmp(pong, "+PONG") == 0)
				return 0;
		} else if (ino) {
			break; /* someone else's server on the port */
		}
		sleep_ms(10);
	}
	sluice_test_redis_stop(s);
	return -1;
}

void sluice_test_redis_kill(sluice_test_redis_t *s)
{
	if (s->pid <= 0)
		return;
	kill(s->pid, SIGKILL);
	waitpid(s->pid, NULL, 0); /* SIGKILL cannot be caught: bounded */
	forget(s->pid);
	s->pid = 0;
}

void sluice_test_redis_stop(sluice_test_redis_t *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		int i;
		for (i = 0; i < 300 && waitpid(s->pid, NULL, WNOHANG) != s->pid; i++)
			sleep_ms(10);
		if (i == 300)
			sluice_test_redis_kill(s);
		forget(s->pid);
		s->pid = 0;
	}
	/* out.log, and what a replica or a Sentinel wrote (dump.rdb, its
	 * rewritten redis.conf): the dir is ours, every file in it goes */
	DIR *d = opendir(s->dir);
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		char path[400];
		if (e->d_name[0] != '.' &&
		    snprintf(path, sizeof(path), "%s/%s", s->dir, e->d_name) < (int)sizeof(path))
			unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(s->dir);
}

int sluice_test_redis_cmd(const sluice_test_redis_t *s, const char *cmd, char *out, size_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	struct timeval tv = { 10, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)s->port),
		                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int rc = -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
		char buf[512];
		int n = snprintf(buf, sizeof(buf), "%s\r\n", cmd);
		if (send(fd, buf, (size_t)n, MSG_NOSIGNAL) == n) {
			size_t got = 0;
			while (got + 1 < len) {
				ssize_t k = recv(fd, out + got, 1, 0);
				if (k <= 0)
					break;
				if (out[got] == '\n') {
					if (got && out[got - 1] == '\r')
						got--;
					rc = 0;
					break;
				}
				got++;
			}
			out[got] = 0;
		}
	}
	close(fd);
	return rc;
}
