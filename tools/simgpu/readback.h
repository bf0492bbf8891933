/* readback.h: what the host reads back from simulated device memory (readback.c). */
#ifndef SIMGPU_READBACK_H
#define SIMGPU_READBACK_H

#include <stddef.h>
#include <stdint.h>

#include "simconfig.h"

/* A range of device addresses (a device's own, or VMM's), added by cuInit before any copy can
 * name a device address; at most READBACK_RANGES of them. */
#define READBACK_RANGES (SIMGPU_MAX_DEVICES + 1)
void readback_add_range(uint64_t base, uint64_t len);

/* Exported for the runtime and the stand-in libraries, which find them in the loaded driver
 * (readback.c says the rule): a launch happened; the host wrote device bytes itself; a copy. */
void simgpu_kernel_launched(void);
void simgpu_device_written(const void *p, size_t n);
void simgpu_copy(void *dst, const void *src, size_t n);

#endif
