/* SPDX-License-Identifier: MIT */
/*
 * queue.h - the bounded request queue from decision threads to the I/O
 * thread: many producers, one consumer, no lock, no allocation after init.
 *
 * DESIGN: Dmitry Vyukov's bounded MPMC ring: each cell has a sequence
 * number; a producer claims the tail by CAS when the cell's sequence says it
 * is free, writes the item, then publishes it by storing sequence = pos + 1
 * (release, paired with the consumer's acquire load of the sequence); the
 * consumer reads the item and frees the cell with sequence = pos + size
 * (release, paired with the producer's acquire load).  A producer's retry
 * is bounded: after SLUICE__QUEUE_TRIES failed CASes it gives up and the
 * caller treats the request as not sent (its decision takes the fallback
 * when its budget ends).  Each limit has at most one request queued (its
 * pending flag), and a backend holds at most `size` limits, so a push never
 * finds the ring full.
 */
#ifndef SLUICE_REDIS_QUEUE_H
#define SLUICE_REDIS_QUEUE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#define SLUICE__QUEUE_TRIES 64

struct sluice_redis_limit;

typedef struct sluice__redis_cell {
	_Atomic uint64_t seq;
	struct sluice_redis_limit *item;
} sluice__redis_cell_t;

typedef struct sluice__redis_queue {
	sluice__redis_cell_t *cells;
	uint64_t mask;
	_Alignas(64) _Atomic uint64_t tail; /* producers */
	_Alignas(64) uint64_t head;         /* the consumer's own */
} sluice__redis_queue_t;

static inline int sluice__queue_init(sluice__redis_queue_t *q, uint64_t size)
{
	q->cells = calloc(size, sizeof(*q->cells));
	if (!q->cells)
		return -1;
	q->mask = size - 1;
	for (uint64_t i = 0; i < size; i++)
		atomic_init(&q->cells[i].seq, i);
	atomic_init(&q->tail, 0);
	q->head = 0;
	return 0;
}

static inline int sluice__queue_push(sluice__redis_queue_t *q, struct sluice_redis_limit *l)
{
	uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
	for (int i = 0; i < SLUICE__QUEUE_TRIES; i++) {
		sluice__redis_cell_t *c = &q->cells[pos & q->mask];
		/* acquire: pairs with the consumer's release that freed the cell,
		 * so our write of item comes after its read */
		uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		if (seq == pos) {
			if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1,
			                                          memory_order_relaxed,
			                                          memory_order_relaxed)) {
				c->item = l;
				/* release: publishes item; pairs with pop's acquire */
				atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
				return 0;
			}
		} else if (seq < pos) {
			return -1; /* full */
		} else {
			pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
		}
	}
	return -1;
}

static inline struct sluice_redis_limit *sluice__queue_pop(sluice__redis_queue_t *q)
{
	sluice__redis_cell_t *c = &q->cells[q->head & q->mask];
	/* acquire: pairs with push's release, so item is the producer's */
	uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
	if (seq != q->head + 1)
		return NULL;
	struct sluice_redis_limit *l = c->item;
	/* release: our read of item happens before the next producer's write */
	atomic_store_explicit(&c->seq, q->head + q->mask + 1, memory_order_release);
	q->head++;
	return l;
}

#endif
