/* SPDX-License-Identifier: MIT */
/*
 * test_peer.h - a hostile Redis for the tests: a thread with a listening
 * socket on 127.0.0.1 that speaks just enough RESP to be a backend's
 * server and answers EVALSHA as its mode says (a real network peer: the
 * backend under test connects to it as to any server).
 *
 * Every connection is served in turn by the one thread; every wait is
 * bounded (poll with a timeout, the stop flag), and stop joins it.
 */
#ifndef SLUICE_REDIS_TEST_PEER_H
#define SLUICE_REDIS_TEST_PEER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

enum sluice_test_peer_mode {
	PEER_GRANT = 1, /* EVALSHA: a grant of what was asked (want), its
	                 * reset reset_us (0: 1000 us, valid for every test
	                 * limit) */
	PEER_NOSCRIPT,  /* EVALSHA: -NOSCRIPT, every time (SCRIPT LOAD works) */
	PEER_RETRY,     /* EVALSHA: a refusal with retry and reset = retry_us */
	PEER_BULK,      /* EVALSHA: "$2147483647\r\n" then bytes, 64 KiB a
	                 * millisecond, up to bulk_max bytes or bulk_ns, then
	                 * silence until the client hangs up */
	PEER_SILENT,    /* EVALSHA: no answer at all */
	PEER_NESTED,    /* EVALSHA: a full tree of arrays of 16, 6 deep, with
	                 * integers for leaves (64 MiB), sent as PEER_BULK
	                 * sends: the reader makes an object of every element
	                 * as it arrives and keeps no byte unparsed */
};

typedef struct sluice_test_peer {
	int port;
	_Atomic int mode;
	_Atomic int64_t retry_us, reset_us;
	uint64_t bulk_max, bulk_ns;
	_Atomic uint64_t evalshas;   /* EVALSHA commands answered */
	_Atomic uint64_t bulk_sent;  /* bytes of bulk data sent, all connections */
	/* private */
	int fd;
	_Atomic int stop;
	pthread_t t;
} sluice_test_peer_t;

/* listen on a free port and start the thread; 0 or -1 */
int sluice_test_peer_start(sluice_test_peer_t *p, int mode);
/* stop the thread (bounded: every wait in it is at most 10 ms) and close */
void sluice_test_peer_stop(sluice_test_peer_t *p);

#endif
