/* SPDX-License-Identifier: MIT */
/*
 * validate_internal.h - the validators one algorithm's init borrows from
 * another's (never installed).  Each algorithm has one validator, called by
 * its init with SLUICE__RECORD and by its sluice_<algo>_config_check() with
 * SLUICE__ASK (clock_internal.h); the two below are also what the fixed
 * window with leases (its ring, window.c) and the leaky bucket (its GCRA
 * meter, gcra.c) run, so an init never builds a throw-away limiter to find
 * out whether its config is good.
 */
#ifndef SLUICE_VALIDATE_INTERNAL_H
#define SLUICE_VALIDATE_INTERNAL_H

#include "sluice/gcra.h"
#include "sluice/window.h"
#include "clock_internal.h"

/* sluice__window_validate_config - sluice_window_init()'s checks of @cfg
 * (no memory): 0 with *@clock, the clock it decides with, or init's code. */
int sluice__window_validate_config(const sluice_window_config_t *cfg, sluice__step_use_t use,
                                   const sluice_clock_t **clock);

/* sluice__gcra_validate_config - sluice_gcra_init()'s checks of @cfg (no
 * memory): 0 or init's code. */
int sluice__gcra_validate_config(const sluice_gcra_config_t *cfg, sluice__step_use_t use);

#endif /* SLUICE_VALIDATE_INTERNAL_H */
