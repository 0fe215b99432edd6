/* SPDX-License-Identifier: MIT */
/*
 * qemu_exec_shim.c - lets an emulated arm64 program exec arm64 programs
 * under qemu-user where the kernel has no binfmt_misc entry for them.
 * Built by scripts/arm64-sysroot.sh for arm64 and preloaded into the tests
 * (cross/aarch64-linux-gnu.ini's exe_wrapper, through qemu's -E).
 *
 * Criterion runs each test in a child that re-executes the test program
 * (BoxFort: fork, then execve("/proc/self/exe")).  Under qemu-user that
 * execve reaches the host kernel, which cannot run an arm64 ELF without a
 * binfmt_misc handler; registering one would change the whole machine (and
 * a container may not), so instead this execve() runs an arm64 program as
 * `qemu-aarch64 -E LD_PRELOAD=<this shim> <program> <args>`; anything else
 * (bash, a host tool) is executed as asked.  qemu reads the arm64 library
 * root from QEMU_LD_PREFIX in the environment, which the child inherits.
 * The library under test is untouched: only the tests' process launching.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Is @path an arm64 ELF (the emulated kind)? */
static int is_arm64_elf(const char *path)
{
	Elf64_Ehdr h;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, &h, sizeof(h));
	close(fd);
	return n == (ssize_t)sizeof(h) && memcmp(h.e_ident, ELFMAG, SELFMAG) == 0 &&
	       h.e_machine == EM_AARCH64;
}

int execve(const char *path, char *const argv[], char *const envp[])
{
	static int (*real)(const char *, char *const[], char *const[]);
	if (!real)
		real = (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execve");
	/* /proc/self/exe names the program qemu emulates; resolve it here,
	 * where qemu answers for the guest, not in the new process. */
	char self[PATH_MAX];
	if (strcmp(path, "/proc/self/exe") == 0) {
		ssize_t n = readlink(path, self, sizeof(self) - 1);
		if (n <= 0)
			return real(path, argv, envp);
		self[n] = '\0';
		path = self;
	}
	if (!is_arm64_elf(path))
		return real(path, argv, envp);

	const char *qemu = getenv("SLUICE_QEMU");
	const char *shim = getenv("SLUICE_QEMU_SHIM");
	if (!qemu || !shim)
		return real(path, argv, envp);
	size_t argc = 0;
	while (argv[argc])
		argc++;
	char preload[PATH_MAX + 16];
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", shim);
	/* qemu, -E LD_PRELOAD=shim, -0 argv[0], path, argv[1..], NULL */
	char **qargv = calloc(argc + 7, sizeof(*qargv));
	if (!qargv) {
		errno = ENOMEM;
		return -1;
	}
	size_t i = 0;
	qargv[i++] = (char *)qemu;
	qargv[i++] = "-E";
	qargv[i++] = preload;
	qargv[i++] = "-0";
	qargv[i++] = argc ? argv[0] : (char *)path;
	qargv[i++] = (char *)path;
	for (size_t a = 1; a < argc; a++)
		qargv[i++] = argv[a];
	qargv[i] = NULL;
	/* The host's loader must not see the arm64 shim: the guest's LD_PRELOAD
	 * is set by -E above, the host's environment is envp without it. */
	size_t envc = 0;
	while (envp[envc])
		envc++;
	char **qenv = calloc(envc + 1, sizeof(*qenv));
	if (!qenv) {
		free(qargv);
		errno = ENOMEM;
		return -1;
	}
	size_t j = 0;
	for (size_t e = 0; e < envc; e++)
		if (strncmp(envp[e], "LD_PRELOAD=", 11) != 0)
			qenv[j++] = envp[e];
	qenv[j] = NULL;
	int rc = real(qemu, qargv, qenv);
	int err = errno;
	free(qargv);
	free(qenv);
	errno = err;
	return rc;
}
