/* cublaslt.h: the one cuBLASLt type whose layout the simulated libcublasLt.so.13 writes and its
 * tests read: cublasLtMatmulHeuristicResult_t of cublasLt.h (the build has no NVIDIA header). */
#ifndef SIMGPU_STANDINS_CUBLASLT_H
#define SIMGPU_STANDINS_CUBLASLT_H

#include <stddef.h>
#include <stdint.h>

/* An opaque 64-byte algorithm, its workspace, its state, its waves count, four reserved ints. */
struct heuristic_result {
    uint64_t algo[8];
    size_t workspace_bytes;
    int state;
    float waves;
    int reserved[4];
};

#endif
