/* sim_job.c: a CUDA job built the way PyTorch's pip wheels are, for run --sim and sim: linked
 * against libcudart.so.13 and finding it through DT_RPATH (the decoy in decoy/), which ld.so
 * searches before LD_LIBRARY_PATH, so only a runtime loaded before it (preloaded) takes its place.
 * Asks the card's memory, then allocates MIB MiB at a time, at most COUNT times, and says what it
 * got: exit 0 when every allocation went through, 3 at an out-of-memory, 4 at another error. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    size_t count = argc > 2 ? strtoul(argv[2], NULL, 10) : 8;
    size_t free_bytes = 0, total = 0;
    cudaError_t e = cudaMemGetInfo(&free_bytes, &total);
    printf("total=%zu error=%d\n", total, (int)e);
    size_t got = 0;
    e = cudaSuccess;
    while (got < count) {
        void *p = NULL;
        e = cudaMalloc(&p, mib << 20);
        if (e != cudaSuccess)
            break;
        got++;
    }
    printf("allocated=%zu error=%d\n", got, (int)e);
    return e == cudaSuccess ? 0 : e == cudaErrorMemoryAllocation ? 3 : 4;
}
