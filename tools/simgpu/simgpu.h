/* simgpu.h: inspection API of the simulated driver (libcuda.so.1 from tools/simgpu), for tests. */
#ifndef SIMGPU_H
#define SIMGPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Device memory in use on device dev: plain allocations, memory reserved by stream-ordered
 * pools (used or not), managed memory and VMM physical memory. The context overhead
 * (SIMGPU_CONTEXT_BYTES) and other processes (SIMGPU_OTHER_BYTES) are not included.
 * 0 before cuInit or for a device that does not exist.
 */
size_t simgpu_used_bytes(int dev);

/*
 * Everything that takes memory on device dev, as cuMemGetInfo counts it: simgpu_used_bytes plus
 * the context overhead once the device's primary context exists plus other processes
 * (SIMGPU_OTHER_BYTES). Before cuInit: SIMGPU_OTHER_BYTES alone. 0 for a device that does not
 * exist. May exceed the capacity (other processes are not limited by it). The simulated NVML
 * reports this as "used".
 */
size_t simgpu_device_used_bytes(int dev);

/*
 * The largest cuMemAlloc that would succeed on device dev right now: the biggest hole in the
 * device address range, capped by what the capacity still allows once context, other
 * processes, managed and VMM memory are counted. 0 before cuInit or for a bad device.
 */
size_t simgpu_largest_free_block(int dev);

#ifdef __cplusplus
}
#endif

#endif
