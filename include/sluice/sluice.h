/* SPDX-License-Identifier: MIT */
/* sluice/sluice.h - umbrella header: includes every public sluice header. */
#ifndef SLUICE_SLUICE_H
#define SLUICE_SLUICE_H

#include "common.h"
#include "version.h"
#include "error.h"
#include "decision.h"
#include "clock.h"
#include "stripe.h"
#include "fixed.h"
#include "window.h"
#include "composite.h"
#include "limiter.h"
#include "inflight.h"
#include "http.h"
#include "gcra.h"
#include "leaky.h"
#include "log.h"
#include "warmup.h"
#include "decay.h"
#include "keyed.h"
#include "parse.h"

#endif /* SLUICE_SLUICE_H */
