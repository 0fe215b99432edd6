/* SPDX-License-Identifier: MIT */
/*
 * keyed_shared.c - one keyed table shared by several processes through a
 * MAP_SHARED mapping: every worker sees the same per-user budget.
 * (docs/keyed.md; built and run as a test.)
 */
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sluice/sluice.h>

int main(void)
{
	/* 1 request per minute per user, bursts of 5 */
	sluice_keyed_config_t cfg = { .algo = SLUICE_ALGO_GCRA, .capacity = 1024, .rate = 1,
		                      .period_ns = 60000000000, .burst = 5 };
	size_t size = sluice_keyed_region_bytes(&cfg);
	void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || sluice_keyed_format(mem, size, &cfg) != 0)
		return 1;

	for (int w = 0; w < 3; w++) {
		if (fork() == 0) { /* a worker: attach with its own clock */
			sluice_keyed_t t;
			if (sluice_keyed_attach(mem, size, &sluice_clock_monotonic, &t) != 0)
				_exit(100);
			int ok = 0;
			for (int i = 0; i < 5; i++)
				ok += sluice_keyed_acquire(&t, "user:alice", 10, 1, NULL) == 1;
			_exit(ok);
		}
	}
	int total = 0, status;
	while (wait(&status) > 0)
		total += WEXITSTATUS(status);
	printf("user:alice: %d of 15 requests admitted across 3 processes\n", total);
	munmap(mem, size);
	return total == 5 ? 0 : 1; /* one burst, shared */
}
