/* A stand-in GPU for the thread benchmark (bench_threads_e2e): libcuda.so.1 with the runtime's
 * allocation calls beside the driver's, sharing nothing between threads. The simulated GPU
 * (tools/simgpu) serialises every call on its own lock, so two threads through it cannot show
 * whether the library scales; here each thread hands out addresses from its own range (a bump
 * pointer; a free gives nothing back) and keeps its current device in a thread-local, so the
 * library is the only thing the threads could share.
 *
 * cudaMalloc reaches cuMemAlloc_v2 through the global scope, as the real runtime reaches the
 * driver through pointers it looked up: under the preload that is the library's driver shim,
 * nested inside the runtime shim, as on a real GPU. What the library asks the driver on its own
 * (cuCtxGetDevice, cuMemGetInfo_v2) is here too; what it does not find it does without. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))
#define CARD (80ull << 30)

static _Thread_local uint64_t next;  /* this thread's bump pointer; 0: no range yet */
static _Thread_local int device;     /* cudaSetDevice's, per thread as in CUDA */
static uint64_t ranges;              /* ranges handed out: once per thread */

EXPORT CUresult cuInit(unsigned int flags)
{
    (void)flags;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
    *d = device;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    *free = CARD / 2;
    *total = CARD;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    (void)d;
    *bytes = CARD;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
    if (!next)
        next = (__atomic_add_fetch(&ranges, 1, __ATOMIC_RELAXED)) << 40;
    *p = next;
    next += (size + 511) & ~(uint64_t)511;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    (void)p;
    return CUDA_SUCCESS;
}

/* ---- the runtime's side ---- */

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
static alloc_fn drv_alloc;
static free_fn drv_free;

static void find_driver(void)
{
    /* Whoever comes first looks them up; the answer is the same for every thread. */
    void *a = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), *f = dlsym(RTLD_DEFAULT, "cuMemFree_v2");
    __atomic_store_n(&drv_alloc, (alloc_fn)a, __ATOMIC_RELEASE);
    __atomic_store_n(&drv_free, (free_fn)f, __ATOMIC_RELEASE);
}

EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
    alloc_fn a = __atomic_load_n(&drv_alloc, __ATOMIC_ACQUIRE);
    if (__builtin_expect(!a, 0)) {
        find_driver();
        a = __atomic_load_n(&drv_alloc, __ATOMIC_ACQUIRE);
    }
    CUdeviceptr d;
    if (a(&d, size) != CUDA_SUCCESS)
        return cudaErrorMemoryAllocation;
    *p = (void *)(uintptr_t)d;
    return cudaSuccess;
}

EXPORT cudaError_t cudaFree(void *p)
{
    free_fn f = __atomic_load_n(&drv_free, __ATOMIC_ACQUIRE);
    if (__builtin_expect(!f, 0)) {
        find_driver();
        f = __atomic_load_n(&drv_free, __ATOMIC_ACQUIRE);
    }
    return f((CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

EXPORT cudaError_t cudaSetDevice(int d)
{
    device = d;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDevice(int *d)
{
    *d = device;
    return cudaSuccess;
}
