/*
 * sluice/common.h - export macro, branch hints and cache-line size shared by
 * every sluice header.
 *
 * The library is built with -fvisibility=hidden; only symbols marked
 * SLUICE_API are exported.  Hot paths live in the public headers as static
 * inline functions, so they need no export and no call.
 */
#ifndef SLUICE_COMMON_H
#define SLUICE_COMMON_H

#include <stdint.h>

#if defined(SLUICE_BUILDING) && defined(__GNUC__)
#define SLUICE_API __attribute__((visibility("default")))
#else
#define SLUICE_API
#endif

#define SLUICE_LIKELY(x)   __builtin_expect(!!(x), 1)
#define SLUICE_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Every x86-64 and most arm64 parts; independently written hot words get
 * a line of their own so one core's writes do not evict another's reads. */
#define SLUICE_CACHELINE 64

#endif /* SLUICE_COMMON_H */
