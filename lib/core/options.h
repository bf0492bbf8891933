/* The library's options: the struct options_current, filled from VRAMWATCH_* once, at first use (options_load). */
#ifndef VW_OPTIONS_H
#define VW_OPTIONS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "sizes.h"

struct vw_options {
    bool disable;       /* VRAMWATCH_DISABLE=1: pure pass-through */
    int stack_depth;    /* VRAMWATCH_STACK_DEPTH, 0..VW_MAX_FRAMES (core.h) */
    bool python;        /* VRAMWATCH_PYTHON */
    char dir[PATH_MAX]; /* VRAMWATCH_DIR, empty: the working directory at first use */
    uint64_t limit[SIZES_MAX_DEVICES];     /* VRAMWATCH_LIMIT per device, 0: none */
    double limit_share[SIZES_MAX_DEVICES]; /* VRAMWATCH_LIMIT=90%: a share of the card (0: none),
                                           turned into limit[] at the device's first use */
    bool observe;                          /* VRAMWATCH_LIMIT_MODE=observe */
    char status[PATH_MAX];    /* VRAMWATCH_STATUS: a file kept up to date with the peak */
    bool cuda_visible_set;    /* CUDA_VISIBLE_DEVICES is set: NVML indices are not CUDA's */
    bool torch_async_backend; /* PyTorch's allocator setting selects backend:cudaMallocAsync */
    uint32_t trace_events;    /* VRAMWATCH_TRACE: latest allocations and frees kept, 0: off */
};

extern struct vw_options options_current;

/* Read the environment into options_current, and VRAMWATCH_LOG into the log's level (log.h); warns once
 * per bad value and keeps the default. */
void options_load(void);

#endif
