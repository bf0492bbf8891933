/* decoy.c: a libcudart.so.13 that is not the simulator's, found by sim_job through its RPATH: a
 * job that reaches this one was not put on the simulated card. */
#include <cuda_runtime_api.h>

#define DECOY_TOTAL 12345

__attribute__((visibility("default"))) cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    *free = DECOY_TOTAL;
    *total = DECOY_TOTAL;
    return cudaSuccess;
}

__attribute__((visibility("default"))) cudaError_t cudaMalloc(void **ptr, size_t size)
{
    (void)size;
    *ptr = 0;
    return cudaErrorUnknown;
}
