/* core_calls.h: the core's allocation entry point with the request's fields as arguments, the
 * way the tests and benchmarks that drive lib/core directly give them (the library itself fills
 * one struct core_request in the shim). One copy for all of them. */
#ifndef VW_TESTS_CORE_CALLS_H
#define VW_TESTS_CORE_CALLS_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"

static inline bool alloc_req(enum core_kind kind, uint64_t key, uint64_t size, int device,
                             const char *api, uint32_t callsite, uint64_t now_ns)
{
    struct core_request r = { .kind = kind,
                              .device = device,
                              .key = key,
                              .size = size,
                              .api = api,
                              .callsite = callsite,
                              .now_ns = now_ns };
    return core_alloc(&r);
}

#endif
