/* SPDX-License-Identifier: MIT */
/*
 * decay_internal.h - decay's private view for its own tests (never
 * installed, never exported).
 */
#ifndef SLUICE_DECAY_INTERNAL_H
#define SLUICE_DECAY_INTERNAL_H

#include <stdint.h>

#include "sluice/decay.h"

/*
 * sluice__decay_count_at - the kept count (fixed point, rounded up, in
 * permits) that a decision at @now would see.  Not API: callers act on
 * sluice_decay_available_at(); tests/core/test_decay.c checks the PRECISION
 * statements (the kept count is never below the exact decayed sum, and
 * exceeds it by a few units at most) against its reference model, which
 * needs the fraction.  Hidden from the shared library: tests link the
 * static one.
 */
double sluice__decay_count_at(sluice_decay_t *x, uint64_t now);

#endif /* SLUICE_DECAY_INTERNAL_H */
