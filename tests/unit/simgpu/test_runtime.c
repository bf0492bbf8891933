/* test_runtime.c: the simulated libcudart.so.13 used the way an application uses it (linked,
 * nothing of the driver linked): lazy driver loading, error mapping, pools, entry points. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_runtime_api.h>

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "helpers.h"

#define OK(call) cr_assert_eq((call), cudaSuccess, "%s", #call)

/* The driver the runtime loaded; NULL when it has not loaded one. */
static void *loaded_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h)
        dlclose(h); /* the runtime's own reference keeps it loaded */
    return h;
}

static void *driver_symbol(const char *name)
{
    void *h = loaded_driver();
    cr_assert(h != NULL, "the runtime should have loaded libcuda.so.1");
    void *p = dlsym(h, name);
    cr_assert(p != NULL, "%s", name);
    return p;
}

static size_t used_bytes(int dev)
{
    size_t (*f)(int) = (size_t(*)(int))driver_symbol("simgpu_used_bytes");
    return f(dev);
}

static uint64_t pool_attr(cudaMemPool_t pool, enum cudaMemPoolAttr a)
{
    uint64_t v = 0;
    OK(cudaMemPoolGetAttribute(pool, a, &v));
    return v;
}

/* ---------------------------------------------------------------------------------------- */

Test(simgpu_runtime, loads_the_driver_lazily)
{
    int n = 0;
    sim_env_clear();
    cr_assert_null(loaded_driver(), "linking the runtime must not pull in libcuda");
    OK(cudaGetDeviceCount(&n));
    cr_assert_eq(n, 1);
    cr_assert_not_null(loaded_driver());
}

Test(simgpu_runtime, exports_carry_the_version_node)
{
    void *v = dlvsym(RTLD_DEFAULT, "cudaMalloc", "libcudart.so.13");
    cr_assert_not_null(v);
    cr_assert_eq(v, (void *)cudaMalloc);
    cr_assert_not_null(dlvsym(RTLD_DEFAULT, "cudaMallocAsync_ptsz", "libcudart.so.13"));
    cr_assert_null(dlsym(RTLD_DEFAULT, "cudaGetDeviceProperties_v2"), "CUDA 13 has no _v2");
}

Test(simgpu_runtime, versions)
{
    int v = 0;
    sim_env_clear();
    OK(cudaRuntimeGetVersion(&v));
    cr_assert_eq(v, 13000);
    OK(cudaDriverGetVersion(&v));
    cr_assert_eq(v, 13000);
}

Test(simgpu_runtime, malloc_free_and_mem_info)
{
    void *a = (void *)1, *b;
    size_t free_b, total;
    sim_env("1GiB", "100MiB", NULL);
    OK(cudaMemGetInfo(&free_b, &total));
    cr_assert_eq(total, GiB);
    cr_assert_eq(free_b, GiB - 100 * MiB, "the context's own memory shows as used");
    OK(cudaMalloc(&a, 0));
    cr_assert_null(a, "size 0 gives NULL and success");
    OK(cudaMalloc(&a, 100 * MiB));
    OK(cudaMalloc(&b, 1));
    OK(cudaMemGetInfo(&free_b, &total));
    cr_assert_eq(free_b, GiB - 200 * MiB - 512);
    cr_assert_eq(used_bytes(0), 100 * MiB + 512);
    OK(cudaFree(a));
    OK(cudaFree(b));
    OK(cudaFree(NULL));
    cr_assert_eq(used_bytes(0), 0);
}

Test(simgpu_runtime, cudafree_null_creates_the_context)
{
    size_t free_b, total;
    sim_env("1GiB", "100MiB", "20MiB");
    OK(cudaFree(NULL));
    OK(cudaMemGetInfo(&free_b, &total));
    cr_assert_eq(free_b, GiB - 120 * MiB);
}

Test(simgpu_runtime, out_of_memory_and_last_error)
{
    void *a, *b;
    sim_env("1GiB", "0", NULL);
    cr_assert_eq(cudaMalloc(&a, 2 * GiB), cudaErrorMemoryAllocation);
    cr_assert_eq(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    cr_assert_eq(cudaPeekAtLastError(), cudaErrorMemoryAllocation, "peek does not clear");
    OK(cudaMalloc(&b, MiB));
    cr_assert_eq(cudaGetLastError(), cudaErrorMemoryAllocation, "success does not clear it");
    cr_assert_eq(cudaGetLastError(), cudaSuccess, "get does");
    cr_assert_str_eq(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
    cr_assert_str_eq(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
    cr_assert_str_eq(cudaGetErrorName((cudaError_t)12345), "unrecognized error code");
    OK(cudaFree(b));
}

static void *other_thread_error(void *arg)
{
    *(cudaError_t *)arg = cudaGetLastError();
    return NULL;
}

Test(simgpu_runtime, last_error_is_per_thread)
{
    void *a;
    pthread_t t;
    cudaError_t seen = cudaErrorUnknown;
    sim_env("1GiB", "0", NULL);
    cr_assert_eq(cudaMalloc(&a, 4 * GiB), cudaErrorMemoryAllocation);
    pthread_create(&t, NULL, other_thread_error, &seen);
    pthread_join(t, NULL);
    cr_assert_eq(seen, cudaSuccess);
    cr_assert_eq(cudaGetLastError(), cudaErrorMemoryAllocation);
}

Test(simgpu_runtime, invalid_values)
{
    void *a;
    sim_env("1GiB", "0", NULL);
    OK(cudaMalloc(&a, MiB));
    cr_assert_eq(cudaFree((char *)a + 512), cudaErrorInvalidValue, "not an allocation");
    OK(cudaFree(a));
    cr_assert_eq(cudaFree(a), cudaErrorInvalidValue, "double free");
    cr_assert_eq(cudaMalloc(NULL, 512), cudaErrorInvalidValue);
    cr_assert_eq(cudaSetDevice(3), cudaErrorInvalidDevice);
    cr_assert_eq(cudaMemset((void *)(uintptr_t)0x1234, 0, 16), cudaErrorInvalidValue);
    cr_assert_eq(cudaMallocManaged(&a, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
    cr_assert_eq(cudaGetLastError(), cudaErrorInvalidValue);
}

Test(simgpu_runtime, no_driver)
{
    void *a;
    int n = 5, v = 5;
    sim_env_clear();
    setenv("SIMGPU_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    cr_assert_eq(cudaMalloc(&a, 512), cudaErrorInsufficientDriver);
    cr_assert_eq(cudaGetDeviceCount(&n), cudaErrorInsufficientDriver);
    cr_assert_eq(cudaGetLastError(), cudaErrorInsufficientDriver);
    OK(cudaDriverGetVersion(&v));
    cr_assert_eq(v, 0, "no driver reads as version 0");
    OK(cudaRuntimeGetVersion(&v));
    cr_assert_eq(v, 13000);
}

Test(simgpu_runtime, stub_driver)
{
    void *a;
    sim_env_clear();
    /* The probe is the first cuGetProcAddress_v2 call: make it answer like the toolkit stub. */
    setenv("SIMGPU_FAIL", "cuGetProcAddress_v2:1:34", 1);
    cr_assert_eq(cudaMalloc(&a, 512), cudaErrorStubLibrary);
    cr_assert_eq(cudaGetLastError(), cudaErrorStubLibrary);
}

Test(simgpu_runtime, no_device)
{
    int n;
    sim_env_clear();
    setenv("SIMGPU_DEVICES", "0", 1);
    cr_assert_eq(cudaGetDeviceCount(&n), cudaErrorNoDevice);
}

Test(simgpu_runtime, device_properties)
{
    struct cudaDeviceProp prop;
    cr_assert_eq(sizeof prop, 1008, "CUDA 13 layout");
    cr_assert_eq(offsetof(struct cudaDeviceProp, totalGlobalMem), 288);
    sim_env("0:24GiB,1:8GiB", NULL, NULL);
    setenv("SIMGPU_NAME", "Simulated H200", 1);
    OK(cudaGetDeviceProperties(&prop, 1));
    cr_assert_str_eq(prop.name, "Simulated H200");
    cr_assert_eq(prop.totalGlobalMem, 8 * GiB);
    cr_assert_eq(prop.major, 9);
    cr_assert_eq(prop.minor, 0);
    cr_assert_gt(prop.multiProcessorCount, 0);
    cr_assert_eq(prop.warpSize, 32);
    cr_assert_eq(prop.pciBusID, 2);
    cr_assert_eq(prop.pciDomainID, 0);
    cr_assert_eq(prop.managedMemory, 1);
    cr_assert_eq(prop.memoryPoolsSupported, 1);
    cr_assert_eq((unsigned char)prop.uuid.bytes[15], 1);
    OK(cudaGetDeviceProperties(&prop, 0));
    cr_assert_eq(prop.totalGlobalMem, 24 * GiB);
    cr_assert_eq(cudaGetDeviceProperties(&prop, 2), cudaErrorInvalidDevice);
    cr_assert_eq(cudaGetDeviceProperties(NULL, 0), cudaErrorInvalidValue);
}

struct dev_probe {
    int device;
    size_t total;
    cudaError_t err;
};

static void *probe_thread(void *arg)
{
    struct dev_probe *p = arg;
    size_t free_b;
    p->err = cudaGetDevice(&p->device);
    if (p->err == cudaSuccess)
        p->err = cudaMemGetInfo(&free_b, &p->total);
    return NULL;
}

Test(simgpu_runtime, set_device_is_per_thread)
{
    void *a;
    int dev = -1, n;
    size_t free_b, total;
    pthread_t t;
    struct dev_probe probe;
    sim_env("0:1GiB,1:2GiB", "0", NULL);
    OK(cudaGetDeviceCount(&n));
    cr_assert_eq(n, 2);
    OK(cudaGetDevice(&dev));
    cr_assert_eq(dev, 0);
    OK(cudaSetDevice(1));
    OK(cudaGetDevice(&dev));
    cr_assert_eq(dev, 1);
    OK(cudaMemGetInfo(&free_b, &total));
    cr_assert_eq(total, 2 * GiB);
    OK(cudaMalloc(&a, 64 * MiB));
    cr_assert_eq(used_bytes(1), 64 * MiB);
    cr_assert_eq(used_bytes(0), 0);

    pthread_create(&t, NULL, probe_thread, &probe);
    pthread_join(t, NULL);
    cr_assert_eq(probe.err, cudaSuccess);
    cr_assert_eq(probe.device, 0, "a new thread starts on device 0");
    cr_assert_eq(probe.total, GiB);
    OK(cudaFree(a));
}

Test(simgpu_runtime, pitch_and_3d)
{
    void *p;
    size_t pitch;
    struct cudaPitchedPtr pp;
    sim_env("1GiB", "0", NULL);
    OK(cudaMallocPitch(&p, &pitch, 1000, 10));
    cr_assert_eq(pitch, 1024);
    cr_assert_eq(used_bytes(0), 10240);
    struct cudaExtent ext = { .width = 1000, .height = 10, .depth = 3 };
    OK(cudaMalloc3D(&pp, ext));
    cr_assert_eq(pp.pitch, 1024);
    cr_assert_eq(pp.xsize, 1000);
    cr_assert_eq(pp.ysize, 10);
    cr_assert_eq(used_bytes(0), 10240 + 30720);
    OK(cudaFree(p));
    OK(cudaFree(pp.ptr));
    cr_assert_eq(used_bytes(0), 0);
}

Test(simgpu_runtime, managed_and_host_memory)
{
    unsigned char *m, *h1, *h2;
    sim_env("1GiB", "0", NULL);
    OK(cudaMallocManaged((void **)&m, 4096, cudaMemAttachGlobal));
    OK(cudaMemset(m, 0x5a, 4096));
    cr_assert_eq(m[0], 0x5a, "managed memory is written by cudaMemset");
    cr_assert_eq(m[4095], 0x5a);
    m[7] = 1;
    cr_assert_eq(used_bytes(0), 4096);
    OK(cudaMallocHost((void **)&h1, 1000));
    OK(cudaHostAlloc((void **)&h2, 1000, cudaHostAllocMapped));
    memset(h1, 1, 1000);
    memset(h2, 2, 1000);
    cr_assert_eq(used_bytes(0), 4096, "pinned host memory is not device memory");
    cr_assert_eq(cudaFree(h1), cudaErrorInvalidValue);
    OK(cudaFreeHost(h1));
    OK(cudaFreeHost(h2));
    OK(cudaMallocHost((void **)&h1, 0));
    cr_assert_null(h1);
    OK(cudaFreeHost(NULL));
    OK(cudaFree(m));
    cr_assert_eq(used_bytes(0), 0);
}

Test(simgpu_runtime, stream_ordered_pools)
{
    void *a, *b;
    cudaMemPool_t pool, cur;
    uint64_t thr = 4 * MiB;
    sim_env("1GiB", "0", NULL);
    OK(cudaDeviceGetDefaultMemPool(&pool, 0));
    OK(cudaDeviceGetMemPool(&cur, 0));
    cr_assert_eq(pool, cur);
    OK(cudaMallocAsync(&a, 4 * MiB, 0));
    OK(cudaMallocAsync_ptsz(&b, 4 * MiB, 0));
    cr_assert_eq(pool_attr(pool, cudaMemPoolAttrUsedMemCurrent), 8 * MiB);
    OK(cudaFreeAsync(a, 0));
    OK(cudaFreeAsync_ptsz(b, 0));
    OK(cudaFreeAsync(NULL, 0));
    cr_assert_eq(pool_attr(pool, cudaMemPoolAttrReservedMemCurrent), 8 * MiB);
    cr_assert_eq(used_bytes(0), 8 * MiB);
    OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
    OK(cudaStreamSynchronize(0));
    cr_assert_eq(pool_attr(pool, cudaMemPoolAttrReservedMemCurrent), 4 * MiB,
                 "one chunk released, the other kept under the threshold");
    OK(cudaMemPoolTrimTo(pool, 0));
    cr_assert_eq(used_bytes(0), 0);
    cr_assert_eq(pool_attr(pool, cudaMemPoolAttrReservedMemHigh), 8 * MiB);
    OK(cudaDeviceSynchronize());
    OK(cudaStreamSynchronize_ptsz(0));
}

Test(simgpu_runtime, user_pool)
{
    cudaMemPool_t pool;
    struct cudaMemPoolProps props;
    void *a;
    sim_env("1GiB", "0", NULL);
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    OK(cudaMemPoolCreate(&pool, &props));
    OK(cudaMallocFromPoolAsync(&a, 3 * MiB, pool, 0));
    cr_assert_eq(pool_attr(pool, cudaMemPoolAttrReservedMemCurrent), 4 * MiB,
                 "pools reserve in 2 MiB chunks");
    OK(cudaFreeAsync(a, 0));
    OK(cudaMallocFromPoolAsync_ptsz(&a, MiB, pool, 0));
    OK(cudaFreeAsync(a, 0));
    OK(cudaMemPoolDestroy(pool));
    cr_assert_eq(used_bytes(0), 0);
    props.location.id = 4;
    cr_assert_eq(cudaMemPoolCreate(&pool, &props), cudaErrorInvalidDevice);
}

Test(simgpu_runtime, driver_calls_go_through_the_resolved_functions)
{
    void *a, *b;
    cudaMemPool_t pool;
    sim_env("1GiB", "0", NULL);
    /* Injected failures hit the exact exported function the runtime resolved: the _v2
     * allocator for cudaMalloc, and the _ptsz one only for the _ptsz runtime entry point. */
    setenv("SIMGPU_FAIL", "cuMemAlloc_v2:2,cuMemAllocAsync_ptsz:1,cuMemAllocFromPoolAsync_ptsz:1",
           1);
    OK(cudaMalloc(&a, MiB));
    cr_assert_eq(cudaMalloc(&b, MiB), cudaErrorMemoryAllocation);
    OK(cudaMalloc(&b, MiB));
    OK(cudaMallocAsync(&a, MiB, 0));
    cr_assert_eq(cudaMallocAsync_ptsz(&b, MiB, 0), cudaErrorMemoryAllocation);
    OK(cudaMallocAsync_ptsz(&b, MiB, 0));
    OK(cudaDeviceGetDefaultMemPool(&pool, 0));
    OK(cudaMallocFromPoolAsync(&a, MiB, pool, 0));
    cr_assert_eq(cudaMallocFromPoolAsync_ptsz(&b, MiB, pool, 0), cudaErrorMemoryAllocation);
}

Test(simgpu_runtime, other_driver_errors_map)
{
    void *a;
    sim_env("1GiB", "0", NULL);
    setenv("SIMGPU_FAIL", "cuMemAlloc_v2:1:1,cuMemAlloc_v2:2:999,cuMemAlloc_v2:3:801", 1);
    cr_assert_eq(cudaMalloc(&a, MiB), cudaErrorInvalidValue);
    cr_assert_eq(cudaMalloc(&a, MiB), cudaErrorUnknown);
    cr_assert_eq(cudaMalloc(&a, MiB), cudaErrorNotSupported);
}

/* ---------------------------------------------------------------------------------------- */
/* Driver entry points                                                                      */

typedef int (*alloc_fn)(unsigned long long *dptr, size_t bytesize);
typedef int (*free_fn)(unsigned long long dptr);

Test(simgpu_runtime, driver_entry_point)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    sim_env("1GiB", "0", NULL);

    OK(cudaGetDriverEntryPoint("cuMemAlloc", &fn, cudaEnableDefault, &st));
    cr_assert_eq(st, cudaDriverEntryPointSuccess);
    cr_assert_eq(fn, driver_symbol("cuMemAlloc_v2"));

    /* The pointer is a working driver function on the runtime's context. */
    OK(cudaFree(NULL));
    unsigned long long d = 0;
    cr_assert_eq(((alloc_fn)fn)(&d, MiB), 0);
    cr_assert_eq(used_bytes(0), MiB);
    OK(cudaGetDriverEntryPoint("cuMemFree", &fn, cudaEnableDefault, NULL));
    cr_assert_eq(((free_fn)fn)(d), 0);
    cr_assert_eq(used_bytes(0), 0);

    OK(cudaGetDriverEntryPoint("cuMemAllocAsync", &fn, cudaEnableDefault, NULL));
    cr_assert_eq(fn, driver_symbol("cuMemAllocAsync"));
    OK(cudaGetDriverEntryPoint("cuMemAllocAsync", &fn, cudaEnablePerThreadDefaultStream, NULL));
    cr_assert_eq(fn, driver_symbol("cuMemAllocAsync_ptsz"));
    OK(cudaGetDriverEntryPoint("cuMemAllocAsync", &fn, cudaEnableLegacyStream, NULL));
    cr_assert_eq(fn, driver_symbol("cuMemAllocAsync"));
    /* Deprecated in CUDA 13 in favour of ...ByVersion, still exported and still used. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    OK(cudaGetDriverEntryPoint_ptsz("cuMemFreeAsync", &fn, cudaEnableDefault, NULL));
#pragma GCC diagnostic pop
    cr_assert_eq(fn, driver_symbol("cuMemFreeAsync_ptsz"));
    OK(cudaGetDriverEntryPoint("cuMemCreate", &fn, cudaEnableDefault, NULL));
    cr_assert_eq(fn, driver_symbol("cuMemCreate"));

    fn = (void *)1;
    OK(cudaGetDriverEntryPoint("cuNoSuchFunction", &fn, cudaEnableDefault, &st));
    cr_assert_null(fn, "a miss is not an error: NULL and a status");
    cr_assert_eq(st, cudaDriverEntryPointSymbolNotFound);
    cr_assert_eq(cudaGetDriverEntryPoint("cuMemAlloc", &fn, 7, NULL), cudaErrorInvalidValue);
    cr_assert_eq(cudaGetDriverEntryPoint(NULL, &fn, 0, NULL), cudaErrorInvalidValue);
}

Test(simgpu_runtime, driver_entry_point_by_version)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    sim_env("1GiB", "0", NULL);
    OK(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 3020, cudaEnableDefault, &st));
    cr_assert_eq(fn, driver_symbol("cuMemAlloc_v2"));
    OK(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 3010, cudaEnableDefault, &st));
    cr_assert_eq(fn, driver_symbol("cuMemAlloc"), "the 32-bit v1 function");
    OK(cudaGetDriverEntryPointByVersion("cuGetProcAddress", &fn, 11030, cudaEnableDefault, &st));
    cr_assert_eq(fn, driver_symbol("cuGetProcAddress"));
    OK(cudaGetDriverEntryPointByVersion("cuGetProcAddress", &fn, 12000, cudaEnableDefault, &st));
    cr_assert_eq(fn, driver_symbol("cuGetProcAddress_v2"));
    OK(cudaGetDriverEntryPointByVersion_ptsz("cuMemAllocFromPoolAsync", &fn, 12000,
                                             cudaEnableDefault, &st));
    cr_assert_eq(fn, driver_symbol("cuMemAllocFromPoolAsync_ptsz"));
    OK(cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &fn, 11010, cudaEnableDefault, &st));
    cr_assert_null(fn);
    cr_assert_eq(st, cudaDriverEntryPointVersionNotSufficent);
    cr_assert_eq(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 13010, 0, &st),
                 cudaErrorInvalidValue, "newer than the driver");
}

/* ---------------------------------------------------------------------------------------- */
/* Threads                                                                                  */

#define THREADS 8
#define ROUNDS 20000

static void *rt_worker(void *arg)
{
    int *failures = arg;
    for (int i = 0; i < ROUNDS; i++) {
        void *p;
        if (cudaMalloc(&p, (size_t)(i % 97 + 1) * 1000) != cudaSuccess ||
            cudaFree(p) != cudaSuccess)
            (*failures)++;
    }
    return NULL;
}

Test(simgpu_runtime, threads, .timeout = 60)
{
    pthread_t t[THREADS];
    int failures[THREADS] = { 0 };
    sim_env("1GiB", "0", NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, rt_worker, &failures[i]);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(failures[i], 0, "thread %d", i);
    }
    cr_assert_eq(used_bytes(0), 0);
}

/* What reads back (tools/simgpu/readback.c): bytes the host wrote since the last launch as they
 * are, everything else zeros; a launch ends the window. */
static void stand_in_kernel(void)
{
}

static void expect_bytes(const unsigned char *b, size_t n, unsigned char v, const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(b[i], v, "%s: byte %zu is %u, not %u", what, i, b[i], v);
}

Test(simgpu_runtime, reads_back_what_the_host_wrote_until_a_launch)
{
    unsigned char in[256], out[256];
    void *d = NULL, *e = NULL;
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i + 1);
    OK(cudaMalloc(&d, sizeof in));
    OK(cudaMalloc(&e, sizeof in));
    OK(cudaMemcpy(d, in, sizeof in, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost));
    cr_assert_arr_eq(out, in, sizeof in, "a copy in reads back as it was");
    OK(cudaMemcpy(e, d, sizeof in, cudaMemcpyDeviceToDevice));
    OK(cudaMemcpy(out, e, sizeof out, cudaMemcpyDefault));
    cr_assert_arr_eq(out, in, sizeof in, "so does its copy within the card");

    /* A launch: the kernel could have written anything, and the card holds none of it. */
    dim3 one = { 1, 1, 1 };
    OK(cudaLaunchKernel((const void *)stand_in_kernel, one, one, NULL, 0, NULL));
    OK(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost));
    expect_bytes(out, sizeof out, 0, "after a launch");
    /* A copy of stale bytes within the card carries the zeros, and is exact afterwards. */
    OK(cudaMemcpy(e, d, sizeof in, cudaMemcpyDeviceToDevice));
    OK(cudaMemcpy(out, e, sizeof out, cudaMemcpyDeviceToHost));
    expect_bytes(out, sizeof out, 0, "a copy of what a kernel wrote");

    /* Half written again, half stale: each part by the rule. */
    OK(cudaMemset(d, 7, 100));
    OK(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost));
    expect_bytes(out, 100, 7, "the memset part");
    expect_bytes(out + 100, sizeof out - 100, 0, "the stale part");

    /* Host memory is never subject to the rule. */
    unsigned char host[16] = { 9, 9, 9 };
    OK(cudaMemcpy(out, host, sizeof host, cudaMemcpyHostToHost));
    cr_assert_arr_eq(out, host, sizeof host);
    OK(cudaFree(d));
    OK(cudaFree(e));
}
