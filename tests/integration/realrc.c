/* Calls the real toolkit libcudart without a GPU and prints every return code, so a run with
 * the preload can be compared with a run without it (they must be identical). */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void)
{
    void *p = NULL;
    int n = -1;
    size_t f = 0, t = 0;
    struct cudaDeviceProp prop;
    printf("count=%d ", (int)cudaGetDeviceCount(&n));
    printf("malloc=%d ", (int)cudaMalloc(&p, 1 << 20));
    printf("last=%d ", (int)cudaGetLastError());
    printf("meminfo=%d ", (int)cudaMemGetInfo(&f, &t));
    printf("props=%d ", (int)cudaGetDeviceProperties(&prop, 0));
    printf("async=%d ", (int)cudaMallocAsync(&p, 100, 0));
    printf("host=%d ", (int)cudaMallocHost(&p, 100));
    printf("managed=%d ", (int)cudaMallocManaged(&p, 100, cudaMemAttachGlobal));
    printf("free=%d\n", (int)cudaFree(p));
    return 0;
}
