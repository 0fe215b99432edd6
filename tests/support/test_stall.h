/* SPDX-License-Identifier: MIT */
/*
 * test_stall.h - stall a thread at an exact instruction: just before its
 * first write to a chosen word, after every read it made before it.
 *
 * How: the page holding the word is made read-only.  The thread's next
 * write to that page faults; the SIGSEGV handler makes the page writable
 * again and, when the faulting address is the chosen word, runs the
 * attack (what other threads or processes could do while this one is
 * stopped: move the clock by 2^32 buckets, refill a bucket, ...) on the
 * same thread, then returns, and the interrupted write runs again against
 * whatever the attack left.  A write to another word of the page (the
 * same allocation's neighbours) is let through: the handler sets the trap
 * flag, the write retires, the SIGTRAP handler protects the page again.
 * This is what a signal handler that spins does to a decision, made
 * deterministic: the stall lands between the decision's loads and its CAS
 * every time, not in 5% of rounds.
 *
 * x86-64 Linux only (the trap flag), and not under ThreadSanitizer (see
 * below); stall_supported() says so and tests skip elsewhere.  Single-threaded use: one armed stall at a time.  The
 * attack must only use async-signal-safe calls: sluice's decision paths
 * take no lock and allocate nothing, which is what lets it call them.
 */
#ifndef SLUICE_TEST_STALL_H
#define SLUICE_TEST_STALL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

static struct {
	uintptr_t target, page;
	size_t target_len;
	void (*attack)(void *);
	void *arg;
	volatile sig_atomic_t armed, fired, stepping;
	volatile sig_atomic_t left; /* attacks still to run (stall_arm_repeat) */
} stall_state;

/* ThreadSanitizer performs every atomic inside its runtime, holding its
 * own lock on the address: an attack run from a fault inside one would
 * wait for that lock forever.  These tests are single-threaded and
 * deterministic, so the plain and ASan+UBSan builds run them. */
#if defined(__SANITIZE_THREAD__)
#define STALL_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STALL_UNDER_TSAN 1
#endif
#endif

static inline int stall_supported(void)
{
#if defined(__x86_64__) && defined(__linux__) && !defined(STALL_UNDER_TSAN)
	return 1;
#else
	return 0;
#endif
}

#if defined(__x86_64__) && defined(__linux__)
static void stall_protect(int prot)
{
	mprotect((void *)stall_state.page, (size_t)sysconf(_SC_PAGESIZE), prot);
}

static void stall_on_segv(int sig, siginfo_t *si, void *uc_)
{
	(void)sig;
	ucontext_t *uc = uc_;
	uintptr_t a = (uintptr_t)si->si_addr;
	stall_protect(PROT_READ | PROT_WRITE);
	if (!stall_state.armed)
		return;
	if (a >= stall_state.target && a < stall_state.target + stall_state.target_len) {
		stall_state.fired++;
		stall_state.armed = --stall_state.left > 0;
		stall_state.attack(stall_state.arg);
		if (!stall_state.armed)
			return; /* the last attack: the page stays writable */
		/* more to come: let the interrupted write retire against what
		 * the attack left, then protect the page again (below) */
	}
	/* another word of the page (or a repeat): let this one write through */
	stall_state.stepping = 1;
	uc->uc_mcontext.gregs[REG_EFL] |= 0x100; /* TF: trap after one instruction */
}

static void stall_on_trap(int sig, siginfo_t *si, void *uc_)
{
	(void)sig;
	(void)si;
	ucontext_t *uc = uc_;
	if (!stall_state.stepping)
		return;
	stall_state.stepping = 0;
	uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)0x100;
	if (stall_state.armed)
		stall_protect(PROT_READ);
}
#endif

/*
 * stall_arm_repeat - run @attack(@arg) before each of this thread's next
 * @times writes to any of the @len bytes at @word (each write then runs
 * against what the attack left).  stall_fired() afterwards says how many
 * ran: fewer than @times when the operation wrote the word less often.
 */
static inline void stall_arm_repeat(const void *word, size_t len, void (*attack)(void *),
                                    void *arg, int times)
{
#if defined(__x86_64__) && defined(__linux__)
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sa.sa_sigaction = stall_on_segv;
	sigaction(SIGSEGV, &sa, NULL);
	sa.sa_sigaction = stall_on_trap;
	sigaction(SIGTRAP, &sa, NULL);
	uintptr_t pagesz = (uintptr_t)sysconf(_SC_PAGESIZE);
	stall_state.target = (uintptr_t)word;
	stall_state.target_len = len;
	stall_state.page = (uintptr_t)word & ~(pagesz - 1);
	stall_state.attack = attack;
	stall_state.arg = arg;
	stall_state.fired = 0;
	stall_state.stepping = 0;
	stall_state.left = times;
	stall_state.armed = times > 0;
	stall_protect(PROT_READ);
#else
	(void)word;
	(void)len;
	(void)attack;
	(void)arg;
	(void)times;
#endif
}

/*
 * stall_arm - run @attack(@arg) the next time this thread writes to any of
 * the @len bytes at @word, just before that write.  Call stall_fired()
 * after the operation to check that the stall happened.
 */
static inline void stall_arm(const void *word, size_t len, void (*attack)(void *), void *arg)
{
	stall_arm_repeat(word, len, attack, arg, 1);
}

/*
 * stall_page - a zeroed page of its own for the object a stall traps
 * (the trap protects the whole page: it must hold no stack, no malloc
 * metadata that another call writes).  NULL if mmap fails.
 */
static inline void *stall_page(void)
{
	void *p = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static inline void stall_page_free(void *p)
{
	munmap(p, (size_t)sysconf(_SC_PAGESIZE));
}

/* stall_fired - how many times the armed stall ran (0: never).  Disarms
 * it either way. */
static inline int stall_fired(void)
{
#if defined(__x86_64__) && defined(__linux__)
	if (stall_state.armed) {
		stall_state.armed = 0;
		stall_protect(PROT_READ | PROT_WRITE);
	}
#endif
	return stall_state.fired;
}

#endif /* SLUICE_TEST_STALL_H */
