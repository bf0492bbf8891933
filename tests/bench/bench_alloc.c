/* Benchmark: nanoseconds per cudaMalloc + cudaFree pair on the simulated GPU. Run it with and
 * without the preload (tests/bench/run.sh does both, and callgrind for instruction counts);
 * the difference is what the library adds. The pairs are made from 40 frames deep so that a
 * 32-frame stack capture really walks 32 frames. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int pairs(long n)
{
    /* Distinct sizes from a few call sites, as a caching allocator's segments would be. */
    for (long i = 0; i < n; i++) {
        void *p;
        if (cudaMalloc(&p, 4096 + (size_t)(i & 7) * 512) != cudaSuccess ||
            cudaFree(p) != cudaSuccess)
            return 1;
    }
    return 0;
}

__attribute__((noinline)) static int deep(int depth, long n)
{
    int r = depth > 0 ? deep(depth - 1, n) : pairs(n);
    __asm__ volatile("" ::: "memory"); /* no tail call: every level stays a frame */
    return r;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200000;
    void *warm;
    if (cudaMalloc(&warm, 1) != cudaSuccess)
        return 1;
    deep(40, 1000);
    double t0 = now();
    if (deep(40, n))
        return 1;
    double t1 = now();
    printf("%.1f\n", (t1 - t0) / (double)n);
    return 0;
}
