/* SPDX-License-Identifier: MIT */
/*
 * lease_policy.h - how large a lease to ask Redis for, and when: the one
 * policy libsluice-redis runs (lease.c, io.c, limit.c) and sluice-sim's
 * fleet mode simulates (it compiles lease_policy.c too).  Pure arithmetic
 * on values: no atomics, no clock, no I/O.
 *
 * A request is HOT when it is evidence that the key spends faster than its
 * leases lapse: a decision found a live lease short, or a decision spent a
 * lease of two or more down to a quarter (the prefetch).  Any other
 * request is COLD: the lease it would top up had lapsed, or there was none.
 *
 *   - A COLD request asks for exactly what its waiting decision needs, so
 *     a cool key (asked less often than a lease lives) is granted nothing
 *     it cannot spend: one round trip per decision, never a lease that
 *     lapses unspent.  One the live lease already covers is not sent.
 *   - A HOT request doubles B (up to lease_max) and asks for B less what
 *     the live lease still holds, at least the need.
 *   - B is never above half of what Redis said remained (at least 1), so
 *     near the limit one instance does not hold the last permits while
 *     another is refused; and it halves when a lease lapses or is replaced
 *     with more than half of it unspent.
 *   - A prefetch is asked only after a lease installed with two or more
 *     was spent down to a quarter of that: at least two decisions spent
 *     from it.  A lease of 1 is never followed by one its key did not ask
 *     for.
 *
 * Round trips per key: a request is sent by a decision that found the
 * lease short and waits (the pending flag lets one request per key be in
 * flight), or is a prefetch.  A waiting request's grant is spent by a
 * decision (the waiter, or one that found it first, which sent nothing) or
 * lapses while its waiter took the fallback; a prefetch follows two or
 * more decisions that spent without sending.  So round trips never exceed
 * the key's decisions: a cool key costs one per decision, and its grants
 * hold exactly what its decisions asked.  Two things lapse even so, and a
 * decision that finds its grant lapsed asks once more: a grant whose reply
 * comes back after its window (or TTL) ended, for a call sent within a
 * round trip of the end (about RTT / W of the calls), and the second
 * permit of a key asked twice within one window, which is HOT and doubles
 * B once (random arrivals at lambda per key do that about lambda x W of
 * the time).  sluice-sim fleet runs this policy and measures both
 * (tests/core/test_sim_fleet.c cool_instances_cost_one_round_trip).
 */
#ifndef SLUICE_REDIS_LEASE_POLICY_H
#define SLUICE_REDIS_LEASE_POLICY_H

#include <stdint.h>

/* B for the next request: @b the current, @hot whether it is HOT,
 * @remaining what Redis said remained after the last reply */
uint64_t sluice__policy_next_b(uint64_t b, int hot, uint64_t lease_max, uint64_t remaining);
/* what the request asks for: @b from sluice__policy_next_b, @held what the
 * live lease still holds, @need the largest n a waiting decision wants.
 * 0: send nothing, a COLD request the live lease already covers (its
 * decision asked just as the grant it waited for was installed) */
uint64_t sluice__policy_want(uint64_t b, int hot, uint64_t held, uint64_t need);
/* B after a lease lapsed or was replaced with @lost permits unspent */
uint64_t sluice__policy_after_loss(uint64_t b, uint64_t lost);
/* 1 when a decision that left @left of a lease installed with @size asks
 * for the next one */
int sluice__policy_prefetch(uint64_t size, uint64_t left);

#endif
