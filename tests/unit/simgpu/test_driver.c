/* test_driver.c: the simulated libcuda.so.1 through its driver API: memory model, pools, VMM,
 * cuGetProcAddress, failure injection and threads. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>

#include "helpers.h"
#include "simgpu.h"

#define OK(call) cr_assert_eq((call), CUDA_SUCCESS, "%s", #call)

/* cuInit, then device 0's primary context current on this thread. */
static CUcontext start(void)
{
    CUcontext ctx;
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    return ctx;
}

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    OK(cuMemPoolGetAttribute(pool, a, &v));
    return v;
}

static void *driver_symbol(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    cr_assert(h != NULL);
    void *p = dlsym(h, name);
    dlclose(h);
    cr_assert(p != NULL, "%s", name);
    return p;
}

/* ---------------------------------------------------------------------------------------- */

Test(simgpu_driver, needs_cuinit)
{
    CUdeviceptr p;
    int v = 0, n;
    sim_env_clear();
    cr_assert_eq(cuMemAlloc_v2(&p, 512), CUDA_ERROR_NOT_INITIALIZED);
    cr_assert_eq(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuDriverGetVersion(&v));
    cr_assert_eq(v, 13000);
    cr_assert_eq(simgpu_used_bytes(0), 0);
    cr_assert_eq(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    OK(cuInit(0));
    OK(cuInit(0));
    OK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 1);
    cr_assert_eq(cuMemAlloc_v2(&p, 512), CUDA_ERROR_INVALID_CONTEXT, "no current context");
}

Test(simgpu_driver, no_devices)
{
    sim_env_clear();
    setenv("SIMGPU_DEVICES", "0", 1);
    cr_assert_eq(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

Test(simgpu_driver, device_queries)
{
    char name[256], bus[32];
    size_t total;
    int v;
    CUdevice dev;
    CUuuid u1, u2;

    sim_env_clear();
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    cr_assert_eq(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
    OK(cuDeviceGetName(name, sizeof name, 0));
    cr_assert_str_eq(name, "vramwatch simulated GPU");
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, 16 * GiB);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    cr_assert_eq(v, 9);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0));
    cr_assert_eq(v, 0);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    cr_assert_gt(v, 0);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    cr_assert_eq(v, 1);
    cr_assert_eq(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3),
                 CUDA_ERROR_INVALID_DEVICE);
    OK(cuDeviceGetPCIBusId(bus, sizeof bus, 0));
    cr_assert_str_eq(bus, "0000:01:00.0");
    OK(cuDeviceGetUuid(&u1, 0));
    OK(cuDeviceGetUuid_v2(&u2, 0));
    cr_assert_eq(memcmp(&u1, &u2, sizeof u1), 0);
    cr_assert_eq(cuDeviceGetName(NULL, 10, 0), CUDA_ERROR_INVALID_VALUE);
}

Test(simgpu_driver, contexts)
{
    CUcontext ctx, cur = (CUcontext)1;
    CUdevice dev = -1;
    sim_env_clear();
    OK(cuInit(0));
    OK(cuCtxGetCurrent(&cur));
    cr_assert_null(cur);
    cr_assert_eq(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
    cr_assert_eq(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    cr_assert_eq(cuCtxSetCurrent((CUcontext)&dev), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    OK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, ctx);
    OK(cuCtxGetDevice(&dev));
    cr_assert_eq(dev, 0);
    dev = -1;
    OK(cuCtxGetDevice_v2(&dev, NULL));
    cr_assert_eq(dev, 0);
    OK(cuCtxSynchronize());
    OK(cuCtxSynchronize_v2(ctx));
    OK(cuStreamSynchronize(NULL));
    OK(cuDevicePrimaryCtxRelease_v2(0));
    cr_assert_eq(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT, "released twice");
}

Test(simgpu_driver, context_needs_memory)
{
    CUcontext ctx;
    sim_env("64MiB", "16MiB", "60MiB");
    OK(cuInit(0));
    cr_assert_eq(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_ERROR_OUT_OF_MEMORY,
                 "another process leaves no room for a context");
}

Test(simgpu_driver, capacity_and_oom)
{
    CUdeviceptr a, b, c;
    sim_env("64MiB", "0", NULL);
    start();
    OK(cuMemAlloc_v2(&a, 1));
    cr_assert_eq(simgpu_used_bytes(0), 512, "rounded up to 512");
    OK(cuMemFree_v2(a));
    cr_assert_eq(simgpu_used_bytes(0), 0);

    OK(cuMemAlloc_v2(&a, 32 * MiB));
    OK(cuMemAlloc_v2(&b, 32 * MiB));
    cr_assert_eq(cuMemAlloc_v2(&c, 512), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(simgpu_used_bytes(0), 64 * MiB);
    cr_assert_eq(simgpu_largest_free_block(0), 0);
    OK(cuMemFree_v2(a));
    OK(cuMemFree_v2(b));
    cr_assert_eq(cuMemFree_v2(b), CUDA_ERROR_INVALID_VALUE, "double free");
    cr_assert_eq(cuMemFree_v2(12345), CUDA_ERROR_INVALID_VALUE, "unknown pointer");
    OK(cuMemFree_v2(0));
    OK(cuMemFreeHost(NULL));
    cr_assert_eq(cuMemAlloc_v2(NULL, 512), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemAlloc_v2(&a, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemAlloc_v2(&a, (size_t)-1), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAlloc_v2(&a, 64 * MiB));
    OK(cuMemFree_v2(a));
    cr_assert_eq(simgpu_largest_free_block(0), 64 * MiB);
}

Test(simgpu_driver, device_pointers_are_not_host_memory)
{
    CUdeviceptr a;
    sim_env("64MiB", "0", NULL);
    start();
    OK(cuMemAlloc_v2(&a, MiB));
    cr_assert_neq(a, 0);
    cr_assert_eq(a % 512, 0);
    /* The range is reserved PROT_NONE: malloc can never hand out the same addresses. */
    void *m = malloc(MiB);
    cr_assert((uintptr_t)m + MiB <= a || (uintptr_t)m >= a + MiB);
    free(m);
}

Test(simgpu_driver, fragmentation)
{
    CUdeviceptr p[64], big;
    size_t free_b, total;
    sim_env("64MiB", "0", NULL);
    start();
    for (int i = 0; i < 64; i++)
        OK(cuMemAlloc_v2(&p[i], MiB));
    for (int i = 0; i < 64; i += 2)
        OK(cuMemFree_v2(p[i]));
    OK(cuMemGetInfo_v2(&free_b, &total));
    cr_assert_eq(free_b, 32 * MiB, "half the card is free...");
    cr_assert_eq(simgpu_largest_free_block(0), MiB, "...in 1 MiB holes");
    cr_assert_eq(cuMemAlloc_v2(&big, 2 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemFree_v2(p[1]));
    cr_assert_eq(simgpu_largest_free_block(0), 3 * MiB, "neighbours coalesce");
    OK(cuMemAlloc_v2(&big, 3 * MiB));
    cr_assert_eq(big, p[0]);
}

Test(simgpu_driver, mem_get_info_counts_context_and_others)
{
    CUdeviceptr a, b;
    size_t free_b = 0, total = 0;
    sim_env("1GiB", "100MiB", "50MiB");
    OK(cuInit(0));
    cr_assert_eq(cuMemGetInfo_v2(&free_b, &total), CUDA_ERROR_INVALID_CONTEXT);
    start();
    OK(cuMemGetInfo_v2(&free_b, &total));
    cr_assert_eq(total, GiB);
    cr_assert_eq(free_b, GiB - 150 * MiB);
    OK(cuMemAlloc_v2(&a, 100 * MiB));
    OK(cuMemGetInfo_v2(&free_b, &total));
    cr_assert_eq(free_b, GiB - 250 * MiB);
    cr_assert_eq(simgpu_used_bytes(0), 100 * MiB, "context and other process not included");
    cr_assert_eq(simgpu_largest_free_block(0), free_b, "capped by capacity, not by the hole");
    cr_assert_eq(cuMemAlloc_v2(&b, free_b + 512), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAlloc_v2(&b, free_b));
    OK(cuMemGetInfo_v2(&free_b, &total));
    cr_assert_eq(free_b, 0);
    cr_assert_eq(cuMemGetInfo_v2(NULL, &total), CUDA_ERROR_INVALID_VALUE);
}

Test(simgpu_driver, device_used_bytes_counts_everything)
{
    CUdeviceptr a;
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    size_t free_b = 0, total = 0;
    sim_env("0:4GiB,1:2GiB", "100MiB", "0:50MiB,1:30MiB");
    /* Before cuInit: only the other process is on the card; nothing for a device that isn't. */
    cr_assert_eq(simgpu_device_used_bytes(0), 50 * MiB);
    cr_assert_eq(simgpu_device_used_bytes(1), 30 * MiB);
    cr_assert_eq(simgpu_device_used_bytes(2), 0);
    cr_assert_eq(simgpu_device_used_bytes(-1), 0);
    OK(cuInit(0));
    cr_assert_eq(simgpu_device_used_bytes(0), 50 * MiB, "no context yet");
    start();
    cr_assert_eq(simgpu_device_used_bytes(0), 150 * MiB);
    cr_assert_eq(simgpu_device_used_bytes(1), 30 * MiB, "device 1 has no context");
    OK(cuMemAlloc_v2(&a, 1000));
    OK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    OK(cuMemGetInfo_v2(&free_b, &total));
    cr_assert_eq(simgpu_device_used_bytes(0), total - free_b);
    cr_assert_eq(simgpu_device_used_bytes(0), simgpu_used_bytes(0) + 150 * MiB);
    cr_assert_eq(simgpu_device_used_bytes(0), 150 * MiB + 1024 + 2 * MiB);
    cr_assert_eq(simgpu_device_used_bytes(2), 0);
}

Test(simgpu_driver, per_device_capacity)
{
    size_t total, free_b;
    int n;
    CUcontext c1;
    CUdeviceptr p;
    sim_env("0:16GiB,1:8GiB", "0", NULL);
    OK(cuInit(0));
    OK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 2);
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, 16 * GiB);
    OK(cuDeviceTotalMem_v2(&total, 1));
    cr_assert_eq(total, 8 * GiB);
    OK(cuDevicePrimaryCtxRetain(&c1, 1));
    OK(cuCtxSetCurrent(c1));
    OK(cuMemAlloc_v2(&p, GiB));
    OK(cuMemGetInfo_v2(&free_b, &total));
    cr_assert_eq(total, 8 * GiB, "cuMemGetInfo follows the current context");
    cr_assert_eq(free_b, 7 * GiB);
    cr_assert_eq(simgpu_used_bytes(1), GiB);
    cr_assert_eq(simgpu_used_bytes(0), 0);
}

Test(simgpu_driver, decimal_units)
{
    size_t total;
    sim_env("16000MB", NULL, NULL);
    OK(cuInit(0));
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, 16000000000ULL / 512 * 512);
}

Test(simgpu_driver, bad_memory_value_warns)
{
    size_t total;
    char name[64];
    sim_env("sixteen", NULL, NULL);
    setenv("SIMGPU_NAME", "NVIDIA H100 80GB HBM3", 1);
    struct stderr_capture cap = stderr_begin();
    OK(cuInit(0));
    char *err = stderr_end(cap);
    cr_assert(strncmp(err, "simgpu: SIMGPU_MEMORY", 21) == 0, "got: %s", err);
    cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "one line: %s", err);
    free(err);
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, 16 * GiB);
    OK(cuDeviceGetName(name, sizeof name, 0));
    cr_assert_str_eq(name, "NVIDIA H100 80GB HBM3");
}

/* ---------------------------------------------------------------------------------------- */
/* Named cards (SIMGPU_CARD)                                                                */

/* The cards as cards.def lists them: the test reads the same table the simulator is built from. */
static const struct {
    const char *key, *name;
    unsigned long long bytes;
    int major, minor, sms, bf16, mem_clock_khz, bus_bits, l2_bytes, clock_khz, threads_per_sm,
            smem_per_sm, smem_optin, blocks_per_sm;
} cards[] = {
#define CARD(...) { __VA_ARGS__ },
#include "cards.def"
#undef CARD
};
#define NCARDS ((int)(sizeof cards / sizeof cards[0]))

static int attr(CUdevice_attribute a, CUdevice dev)
{
    int v = -12345;
    OK(cuDeviceGetAttribute(&v, a, dev));
    return v;
}

/* What the default device (no SIMGPU_CARD) has always answered: an H100/H200-like part. */
static const struct {
    CUdevice_attribute a;
    int v;
} default_attrs[] = {
    { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647 },
    { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152 },
    { CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536 },
    { CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
    { CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536 },
    { CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000 },
    { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132 },
    { CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1 },
    { CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 1 },
    { CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1 },
    { CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 2619000 },
    { CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120 },
    { CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 50331648 },
    { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048 },
    { CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 3 },
    { CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1 },
    { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9 },
    { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0 },
    { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472 },
    { CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536 },
    { CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1 },
    { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32 },
    { CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 32505856 },
    { CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, 134213632 },
    { CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1024 },
    { CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 1 },
    { CU_DEVICE_ATTRIBUTE_INTEGRATED, 0 },
    { CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0 },
};

Test(simgpu_driver, default_card_answers_as_before)
{
    char name[128];
    size_t total;
    sim_env_clear();
    OK(cuInit(0));
    for (size_t i = 0; i < sizeof default_attrs / sizeof default_attrs[0]; i++)
        cr_assert_eq(attr(default_attrs[i].a, 0), default_attrs[i].v, "attribute %d",
                     (int)default_attrs[i].a);
    OK(cuDeviceGetName(name, sizeof name, 0));
    cr_assert_str_eq(name, "vramwatch simulated GPU");
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, 16 * GiB);
}

/* Every card of cards.def at once, one per device: name, capacity and attributes. */
Test(simgpu_driver, every_named_card)
{
    char list[512] = "", name[256];
    size_t n = 0, total, free_b;
    for (int i = 0; i < NCARDS; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%d:%s", i ? "," : "", i, cards[i].key);
    sim_env_clear();
    setenv("SIMGPU_CARD", list, 1);
    setenv("SIMGPU_CONTEXT_BYTES", "0", 1);
    OK(cuInit(0));
    int count = 0;
    OK(cuDeviceGetCount(&count));
    cr_assert_eq(count, NCARDS, "the device count follows the per-device list");
    for (int d = 0; d < NCARDS; d++) {
        OK(cuDeviceGetName(name, sizeof name, d));
        cr_assert_str_eq(name, cards[d].name);
        OK(cuDeviceTotalMem_v2(&total, d));
        cr_assert_eq(total, cards[d].bytes, "%s", cards[d].key);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d), cards[d].major);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d), cards[d].minor);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d), cards[d].sms);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, d), cards[d].mem_clock_khz);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, d), cards[d].bus_bits);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, d), cards[d].l2_bytes);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, d), cards[d].clock_khz);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, d),
                     cards[d].threads_per_sm);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, d),
                     cards[d].smem_per_sm);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d),
                     cards[d].smem_optin);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, d),
                     cards[d].blocks_per_sm);
        /* What follows from the architecture. */
        int ampere = cards[d].major >= 8;
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, d),
                     ampere ? 1024 : 0, "%s", cards[d].key);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, d), cards[d].major >= 9);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, d),
                     ampere ? cards[d].l2_bytes / 4 * 3 : 0, "%s", cards[d].key);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, d),
                     ampere ? 134213632 : 0, "%s", cards[d].key);
        /* The same on every card. */
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, d), 32);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, d), 1024);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, d), 49152);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, d), 65536);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, d), 1);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, d), 1);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_INTEGRATED, d), 0);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, d), 1);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, d), 0);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d), 1);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, d), 1);
        cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d), d + 1);
    }
    /* cuMemGetInfo counts the card's capacity too. */
    CUcontext ctx;
    OK(cuDevicePrimaryCtxRetain(&ctx, NCARDS - 1));
    OK(cuCtxSetCurrent(ctx));
    OK(cuMemGetInfo_v2(&free_b, &total));
    cr_assert_eq(total, cards[NCARDS - 1].bytes);
    cr_assert_eq(free_b, total);
}

Test(simgpu_driver, card_with_memory_and_name_overrides)
{
    char name[128];
    size_t total;
    sim_env("8GiB", NULL, NULL);
    setenv("SIMGPU_CARD", "t4", 1);
    OK(cuInit(0));
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, 8 * GiB, "SIMGPU_MEMORY wins over the card's capacity");
    OK(cuDeviceGetName(name, sizeof name, 0));
    cr_assert_str_eq(name, "Tesla T4");
    cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0), 5);
}

Test(simgpu_driver, card_follows_visible_devices)
{
    char name[128];
    sim_env_clear();
    setenv("SIMGPU_CARD", "0:H100,1:A10", 1);
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    OK(cuInit(0));
    unsetenv("CUDA_VISIBLE_DEVICES");
    OK(cuDeviceGetName(name, sizeof name, 0));
    cr_assert_str_eq(name, "NVIDIA A10");
    cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), 72);
}

Test(simgpu_driver, unknown_card_warns)
{
    char name[128];
    sim_env_clear();
    setenv("SIMGPU_CARD", "GTX480", 1);
    struct stderr_capture cap = stderr_begin();
    OK(cuInit(0));
    char *err = stderr_end(cap);
    cr_assert(strncmp(err, "simgpu: SIMGPU_CARD='GTX480'", 28) == 0, "got: %s", err);
    cr_assert(strstr(err, "H100") && strstr(err, "V100") && strstr(err, "RTX2080Ti"), "got: %s",
              err);
    cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "one line: %s", err);
    free(err);
    OK(cuDeviceGetName(name, sizeof name, 0));
    cr_assert_str_eq(name, "vramwatch simulated GPU");
}

/* ---------------------------------------------------------------------------------------- */
/* Pools                                                                                    */

Test(simgpu_driver, pool_keeps_memory_until_sync)
{
    CUmemoryPool pool;
    CUdeviceptr a;
    size_t free_b, total;
    sim_env("1GiB", "0", NULL);
    start();
    OK(cuDeviceGetDefaultMemPool(&pool, 0));
    OK(cuMemAllocAsync(&a, 10 * MiB, NULL));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 10 * MiB);
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 10 * MiB);
    OK(cuMemFreeAsync(a, NULL));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 10 * MiB,
                 "freed memory stays in the pool");
    cr_assert_eq(simgpu_used_bytes(0), 10 * MiB);
    OK(cuMemGetInfo_v2(&free_b, &total));
    cr_assert_eq(free_b, GiB - 10 * MiB, "the card sees it as used");
    OK(cuStreamSynchronize(NULL));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0,
                 "threshold 0: released at the sync");
    cr_assert_eq(simgpu_used_bytes(0), 0);
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 10 * MiB);
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 10 * MiB);
}

Test(simgpu_driver, pool_release_threshold)
{
    CUmemoryPool pool;
    CUdeviceptr p[3];
    cuuint64_t thr = 8 * MiB, zero = 0;
    sim_env("1GiB", "0", NULL);
    start();
    OK(cuDeviceGetDefaultMemPool(&pool, 0));
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 8 * MiB);
    for (int i = 0; i < 3; i++)
        OK(cuMemAllocAsync(&p[i], 4 * MiB, NULL));
    for (int i = 0; i < 3; i++)
        OK(cuMemFreeAsync(p[i], NULL));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 12 * MiB);
    OK(cuCtxSynchronize());
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 8 * MiB,
                 "kept up to the threshold");
    OK(cuMemPoolTrimTo(pool, 4 * MiB));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
    OK(cuMemPoolTrimTo(pool, 0));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    cr_assert_eq(simgpu_used_bytes(0), 0);

    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 12 * MiB);
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 0, "reset to current");
    cr_assert_eq(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &thr),
                 CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero),
                 CUDA_ERROR_INVALID_VALUE);
}

Test(simgpu_driver, pool_reuses_and_suballocates)
{
    CUmemoryPool pool;
    CUdeviceptr a, b, c;
    sim_env("1GiB", "0", NULL);
    start();
    OK(cuDeviceGetDefaultMemPool(&pool, 0));
    OK(cuMemAllocAsync(&a, 10 * MiB, NULL));
    OK(cuMemFreeAsync(a, NULL));
    OK(cuMemAllocAsync_ptsz(&b, 4 * MiB, NULL));
    OK(cuMemAllocAsync(&c, 6 * MiB, NULL));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 10 * MiB,
                 "both came out of the chunk already reserved");
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 10 * MiB);
    OK(cuMemFreeAsync_ptsz(b, NULL));
    OK(cuMemFree_v2(c)); /* cuMemFree takes stream-ordered memory too */
    OK(cuStreamSynchronize_ptsz(NULL));
    cr_assert_eq(simgpu_used_bytes(0), 0);
}

Test(simgpu_driver, pool_gives_back_idle_chunks_before_failing)
{
    CUmemoryPool pool;
    CUdeviceptr a, b;
    sim_env("64MiB", "0", NULL);
    start();
    OK(cuDeviceGetDefaultMemPool(&pool, 0));
    OK(cuMemAllocAsync(&a, 40 * MiB, NULL));
    OK(cuMemFreeAsync(a, NULL));
    cr_assert_eq(cuMemAlloc_v2(&b, 40 * MiB), CUDA_ERROR_OUT_OF_MEMORY,
                 "the pool still holds 40 MiB");
    OK(cuMemAllocAsync(&b, 50 * MiB, NULL));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 50 * MiB);
    cr_assert_eq(cuMemAllocAsync(&a, 20 * MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemFreeAsync(b, NULL));
}

Test(simgpu_driver, user_pools)
{
    CUmemoryPool pool, got, def;
    CUmemPoolProps props;
    CUdeviceptr a, b;
    sim_env("1GiB", "0", NULL);
    start();
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    props.maxSize = 16 * MiB;
    OK(cuMemPoolCreate(&pool, &props));
    OK(cuMemAllocFromPoolAsync(&a, 10 * MiB, pool, NULL));
    cr_assert_eq(cuMemAllocFromPoolAsync_ptsz(&b, 10 * MiB, pool, NULL), CUDA_ERROR_OUT_OF_MEMORY,
                 "maxSize caps the pool");
    OK(cuDeviceGetDefaultMemPool(&def, 0));
    OK(cuDeviceGetMemPool(&got, 0));
    cr_assert_eq(got, def);
    OK(cuDeviceSetMemPool(0, pool));
    OK(cuDeviceGetMemPool(&got, 0));
    cr_assert_eq(got, pool);
    OK(cuMemAllocAsync(&b, 2 * MiB, NULL));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 12 * MiB);

    cr_assert_eq(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE, "default pool");
    OK(cuMemPoolDestroy(pool));
    OK(cuDeviceGetMemPool(&got, 0));
    cr_assert_eq(got, def, "back to the default pool");
    cr_assert_eq(cuMemPoolTrimTo(pool, 0), CUDA_ERROR_INVALID_VALUE, "handle is gone");
    cr_assert_eq(simgpu_used_bytes(0), 12 * MiB, "outstanding allocations keep their memory");
    OK(cuMemFreeAsync(a, NULL));
    OK(cuMemFreeAsync(b, NULL));
    cr_assert_eq(simgpu_used_bytes(0), 0);

    props.location.id = 5;
    cr_assert_eq(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_DEVICE);
    props.location.id = 0;
    props.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
    cr_assert_eq(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_VALUE);
}

/* ---------------------------------------------------------------------------------------- */
/* VMM                                                                                      */

static CUmemAllocationProp vmm_prop(int dev)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

Test(simgpu_driver, vmm_create_map_release)
{
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h1, h2;
    CUdeviceptr va;
    CUmemAccessDesc acc;
    size_t gran, free_b, total;

    sim_env("64MiB", "0", NULL);
    start();
    OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    cr_assert_eq(gran, 2 * MiB);
    cr_assert_eq(cuMemCreate(&h1, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE, "not a multiple");
    OK(cuMemCreate(&h1, 4 * MiB, &prop, 0));
    OK(cuMemCreate(&h2, 2 * MiB, &prop, 0));
    cr_assert_neq(h1, 0);
    cr_assert_neq(h1, h2);
    cr_assert_eq(simgpu_used_bytes(0), 6 * MiB);

    OK(cuMemAddressReserve(&va, 16 * MiB, 0, 0, 0));
    cr_assert_eq(va % (2 * MiB), 0);
    cr_assert_eq(simgpu_used_bytes(0), 6 * MiB, "address space costs no memory");
    OK(cuMemMap(va, 4 * MiB, 0, h1, 0));
    OK(cuMemMap(va + 4 * MiB, 2 * MiB, 0, h2, 0));
    cr_assert_eq(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h2, 0), CUDA_ERROR_INVALID_VALUE, "overlap");
    cr_assert_eq(cuMemMap(va + 14 * MiB, 4 * MiB, 0, h1, 0), CUDA_ERROR_INVALID_VALUE,
                 "past the reservation");
    cr_assert_eq(cuMemMap(va + 8 * MiB, 2 * MiB, 4 * MiB, h1, 0), CUDA_ERROR_INVALID_VALUE,
                 "past the handle");
    cr_assert_eq(cuMemMap(va + 8 * MiB, 2 * MiB, 0, 777, 0), CUDA_ERROR_INVALID_VALUE,
                 "bad handle");
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = 0;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    OK(cuMemSetAccess(va, 6 * MiB, &acc, 1));
    cr_assert_eq(cuMemSetAccess(va, 8 * MiB, &acc, 1), CUDA_ERROR_INVALID_VALUE, "unmapped tail");
    OK(cuMemGetInfo_v2(&free_b, &total));
    cr_assert_eq(free_b, 58 * MiB);

    /* Released while mapped: the memory stays until the unmap. */
    OK(cuMemRelease(h1));
    cr_assert_eq(cuMemRelease(h1), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(simgpu_used_bytes(0), 6 * MiB);
    cr_assert_eq(cuMemUnmap(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE, "partial unmap");
    cr_assert_eq(cuMemAddressFree(va, 16 * MiB), CUDA_ERROR_INVALID_VALUE, "still mapped");
    OK(cuMemUnmap(va, 6 * MiB));
    cr_assert_eq(simgpu_used_bytes(0), 2 * MiB);
    OK(cuMemRelease(h2));
    cr_assert_eq(simgpu_used_bytes(0), 0);
    cr_assert_eq(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE, "wrong size");
    OK(cuMemAddressFree(va, 16 * MiB));
}

Test(simgpu_driver, vmm_ignores_fragmentation_but_not_capacity)
{
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    CUdeviceptr p[32], va;
    sim_env("64MiB", "0", NULL);
    start();
    for (int i = 0; i < 32; i++)
        OK(cuMemAlloc_v2(&p[i], 2 * MiB));
    for (int i = 0; i < 32; i += 2)
        OK(cuMemFree_v2(p[i]));
    cr_assert_eq(cuMemAlloc_v2(&va, 4 * MiB), CUDA_ERROR_OUT_OF_MEMORY, "no 4 MiB hole");
    OK(cuMemCreate(&h, 32 * MiB, &prop, 0));
    cr_assert_eq(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY, "card is full");
    cr_assert_eq(cuMemAlloc_v2(&va, 512), CUDA_ERROR_OUT_OF_MEMORY, "holes exist, capacity not");
    /* A VA reservation far bigger than the card is fine. */
    OK(cuMemAddressReserve(&va, 256 * MiB, 0, 0, 0));
    OK(cuMemAddressFree(va, 256 * MiB));
}

/* ---------------------------------------------------------------------------------------- */
/* Host-visible memory                                                                      */

Test(simgpu_driver, managed_and_pinned_are_host_writable)
{
    CUdeviceptr m;
    void *h1, *h2;
    CUdeviceptr base;
    size_t size;
    sim_env("64MiB", "0", NULL);
    start();

    OK(cuMemAllocManaged(&m, 3 * MiB, CU_MEM_ATTACH_GLOBAL));
    memset((void *)(uintptr_t)m, 0xab, 3 * MiB);
    cr_assert_eq(((unsigned char *)(uintptr_t)m)[3 * MiB - 1], 0xab);
    cr_assert_eq(simgpu_used_bytes(0), 3 * MiB, "managed memory counts against the card");
    OK(cuMemsetD8_v2(m + 10, 0x11, 20));
    cr_assert_eq(((unsigned char *)(uintptr_t)m)[29], 0x11);
    cr_assert_eq(((unsigned char *)(uintptr_t)m)[30], 0xab);
    OK(cuMemGetAddressRange_v2(&base, &size, m + 100));
    cr_assert_eq(base, m);
    cr_assert_eq(size, 3 * MiB);
    cr_assert_eq(cuMemAllocManaged(&m, 64 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(cuMemAllocManaged(&m, 512, 0), CUDA_ERROR_INVALID_VALUE);

    OK(cuMemAllocHost_v2(&h1, 5000));
    OK(cuMemHostAlloc(&h2, 100 * MiB, CU_MEMHOSTALLOC_PORTABLE));
    memset(h1, 1, 5000);
    memset(h2, 2, 100 * MiB);
    cr_assert_eq(((unsigned char *)h2)[100 * MiB - 1], 2);
    cr_assert_eq(simgpu_used_bytes(0), 3 * MiB, "pinned host memory does not");
    cr_assert_eq(cuMemFree_v2((CUdeviceptr)(uintptr_t)h1), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemFreeHost((void *)(uintptr_t)m), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemHostAlloc(&h1, 512, 0x80), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeHost(h1));
    OK(cuMemFreeHost(h2));
    OK(cuMemFree_v2(m));
    cr_assert_eq(simgpu_used_bytes(0), 0);
}

Test(simgpu_driver, pitch_and_address_range)
{
    CUdeviceptr p, base;
    size_t pitch, size;
    sim_env("64MiB", "0", NULL);
    start();
    OK(cuMemAllocPitch_v2(&p, &pitch, 1000, 10, 4));
    cr_assert_eq(pitch, 1024);
    cr_assert_eq(simgpu_used_bytes(0), 10240);
    OK(cuMemGetAddressRange_v2(&base, &size, p + 5000));
    cr_assert_eq(base, p);
    cr_assert_eq(size, 10240);
    cr_assert_eq(cuMemGetAddressRange_v2(&base, &size, p + 10240), CUDA_ERROR_NOT_FOUND);
    OK(cuMemsetD8_v2(p, 0, 10240));
    cr_assert_eq(cuMemsetD8_v2(p, 0, 10241), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemAllocPitch_v2(&p, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);
}

/* ---------------------------------------------------------------------------------------- */
/* cuGetProcAddress                                                                         */

static void *lookup(const char *name, int version, cuuint64_t flags, CUresult want,
                    CUdriverProcAddressQueryResult want_status)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;
    CUresult r = cuGetProcAddress_v2(name, &fn, version, flags, &st);
    cr_assert_eq(r, want, "%s@%d flags %llu: %d", name, version, (unsigned long long)flags, r);
    cr_assert_eq(st, want_status, "%s@%d: status %d", name, version, st);
    if (r != CUDA_SUCCESS)
        cr_assert_null(fn, "%s@%d", name, version);
    return fn;
}

#define FOUND(name, ver, flags, sym)                                                  \
    cr_assert_eq(lookup(name, ver, flags, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS), \
                 driver_symbol(sym), "%s@%d flags %d should be %s", name, ver, flags, sym)
#define TOO_OLD(name, ver) \
    lookup(name, ver, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)

Test(simgpu_driver, proc_address_versions)
{
    sim_env_clear();
    /* Works before cuInit, as cudart needs it to. */
    FOUND("cuMemAlloc", 13000, 0, "cuMemAlloc_v2");
    FOUND("cuMemAlloc", 3020, 0, "cuMemAlloc_v2");
    FOUND("cuMemAlloc", 3010, 0, "cuMemAlloc");
    TOO_OLD("cuMemAlloc", 1000);
    FOUND("cuMemFree", 3020, 0, "cuMemFree_v2");
    FOUND("cuMemFree", 2000, 0, "cuMemFree");
    FOUND("cuMemGetInfo", 3020, 0, "cuMemGetInfo_v2");
    TOO_OLD("cuMemGetInfo", 3010);
    FOUND("cuMemAllocPitch", 12000, 0, "cuMemAllocPitch_v2");
    FOUND("cuDeviceTotalMem", 3020, 0, "cuDeviceTotalMem_v2");
    FOUND("cuMemAllocHost", 3020, 0, "cuMemAllocHost_v2");
    TOO_OLD("cuMemAllocHost", 3000);
    FOUND("cuMemAllocManaged", 6000, 0, "cuMemAllocManaged");
    TOO_OLD("cuMemAllocManaged", 5050);
    FOUND("cuMemCreate", 10020, 0, "cuMemCreate");
    TOO_OLD("cuMemCreate", 10010);
    TOO_OLD("cuMemAddressReserve", 10000);
    FOUND("cuMemPoolGetAttribute", 11020, 0, "cuMemPoolGetAttribute");
    TOO_OLD("cuMemPoolTrimTo", 11010);
    FOUND("cuDeviceGetUuid", 11000, 0, "cuDeviceGetUuid");
    FOUND("cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2");
    FOUND("cuDevicePrimaryCtxRelease", 10020, 0, "cuDevicePrimaryCtxRelease");
    FOUND("cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2");
    FOUND("cuCtxSynchronize", 12080, 0, "cuCtxSynchronize");
    FOUND("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2");
    FOUND("cuGetExportTable", 13000, 0, "cuGetExportTable");
}

Test(simgpu_driver, proc_address_entry_points)
{
    sim_env_clear();
    FOUND("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
    FOUND("cuGetProcAddress", 11080, 0, "cuGetProcAddress");
    FOUND("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
    FOUND("cuGetProcAddress", 13000, 0, "cuGetProcAddress_v2");
    TOO_OLD("cuGetProcAddress", 11020);

    /* The 4-argument entry point answers the same way. */
    void *fn = NULL;
    OK(cuGetProcAddress("cuMemAlloc", &fn, 11030, 0));
    cr_assert_eq(fn, driver_symbol("cuMemAlloc_v2"));
    cr_assert_eq(cuGetProcAddress("cuNoSuchFunction", &fn, 11030, 0), CUDA_ERROR_NOT_FOUND);
    cr_assert_null(fn);
}

Test(simgpu_driver, proc_address_per_thread_stream)
{
    sim_env_clear();
    FOUND("cuMemAllocAsync", 11020, 0, "cuMemAllocAsync");
    FOUND("cuMemAllocAsync", 11020, 1, "cuMemAllocAsync");
    FOUND("cuMemAllocAsync", 11020, 2, "cuMemAllocAsync_ptsz");
    FOUND("cuMemAllocAsync", 13000, 2, "cuMemAllocAsync_ptsz");
    FOUND("cuMemAllocFromPoolAsync", 12000, 0, "cuMemAllocFromPoolAsync");
    FOUND("cuMemAllocFromPoolAsync", 12000, 2, "cuMemAllocFromPoolAsync_ptsz");
    FOUND("cuMemFreeAsync", 12000, 0, "cuMemFreeAsync");
    FOUND("cuMemFreeAsync", 12000, 2, "cuMemFreeAsync_ptsz");
    FOUND("cuStreamSynchronize", 12000, 2, "cuStreamSynchronize_ptsz");
    /* No per-thread variant: the legacy function is the answer. */
    FOUND("cuMemAlloc", 12000, 2, "cuMemAlloc_v2");
    lookup("cuMemAllocAsync", 11010, 2, CUDA_ERROR_NOT_FOUND,
           CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

Test(simgpu_driver, proc_address_misses)
{
    void *fn = (void *)1;
    sim_env_clear();
    lookup("", 13000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    lookup("cuNoSuchFunction", 13000, 0, CUDA_ERROR_NOT_FOUND,
           CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    lookup("cuMemAlloc_v2", 13000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    cr_assert_eq(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, 0, NULL), CUDA_SUCCESS,
                 "status pointer is optional");
    cr_assert_eq(cuGetProcAddress_v2("cuMemAlloc", &fn, 13010, 0, NULL), CUDA_ERROR_INVALID_VALUE,
                 "newer than the driver");
    cr_assert_eq(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, 8, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGetProcAddress_v2(NULL, &fn, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGetProcAddress_v2("cuMemAlloc", NULL, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
}

/* ---------------------------------------------------------------------------------------- */
/* What PyTorch resolves (c10/cuda/driver_api.h of 2.14, cudaGetDriverEntryPointByVersion)   */

/* Every function its DriverAPI asserts, at the version it asks for, without flags. */
static const struct {
    const char *name;
    int version;
    const char *symbol;
} pytorch_required[] = {
    { "cuDeviceGet", 12000, "cuDeviceGet" },
    { "cuDeviceGetAttribute", 12000, "cuDeviceGetAttribute" },
    { "cuMemGetAddressRange", 12000, "cuMemGetAddressRange_v2" },
    { "cuMemAddressReserve", 12000, "cuMemAddressReserve" },
    { "cuMemRelease", 12000, "cuMemRelease" },
    { "cuMemMap", 12000, "cuMemMap" },
    { "cuMemAddressFree", 12000, "cuMemAddressFree" },
    { "cuMemSetAccess", 12000, "cuMemSetAccess" },
    { "cuMemUnmap", 12000, "cuMemUnmap" },
    { "cuMemCreate", 12000, "cuMemCreate" },
    { "cuMemGetAllocationGranularity", 12000, "cuMemGetAllocationGranularity" },
    { "cuMemExportToShareableHandle", 12000, "cuMemExportToShareableHandle" },
    { "cuMemImportFromShareableHandle", 12000, "cuMemImportFromShareableHandle" },
    { "cuMemRetainAllocationHandle", 12000, "cuMemRetainAllocationHandle" },
    { "cuMemGetAllocationPropertiesFromHandle", 12000, "cuMemGetAllocationPropertiesFromHandle" },
    { "cuMemsetD32Async", 12000, "cuMemsetD32Async" },
    { "cuStreamWriteValue32", 12000, "cuStreamWriteValue32_v2" },
    { "cuGetErrorString", 12000, "cuGetErrorString" },
};

Test(simgpu_driver, pytorch_required_functions)
{
    sim_env_clear();
    for (size_t i = 0; i < sizeof pytorch_required / sizeof pytorch_required[0]; i++)
        FOUND(pytorch_required[i].name, pytorch_required[i].version, 0, pytorch_required[i].symbol);
    /* The versions they came with, and the per-thread variants. */
    TOO_OLD("cuMemRetainAllocationHandle", 10020);
    FOUND("cuMemGetAllocationPropertiesFromHandle", 10020, 0,
          "cuMemGetAllocationPropertiesFromHandle");
    TOO_OLD("cuMemExportToShareableHandle", 10010);
    FOUND("cuMemsetD32Async", 3020, 0, "cuMemsetD32Async");
    FOUND("cuMemsetD32Async", 12000, 2, "cuMemsetD32Async_ptsz");
    FOUND("cuStreamWriteValue32", 8000, 0, "cuStreamWriteValue32");
    FOUND("cuStreamWriteValue32", 11060, 2, "cuStreamWriteValue32_ptsz");
    FOUND("cuStreamWriteValue32", 11070, 2, "cuStreamWriteValue32_v2_ptsz");
    TOO_OLD("cuStreamWriteValue32", 7050);
}

/* The optional ones: a miss is no error, but PyTorch logs "Failed to resolve symbol" for each. */
static const struct {
    const char *name;
    int version;
    const char *symbol;
} pytorch_optional[] = {
    { "cuMulticastAddDevice", 12030, "cuMulticastAddDevice" },
    { "cuMulticastBindMem", 12030, "cuMulticastBindMem" },
    { "cuMulticastCreate", 12030, "cuMulticastCreate" },
    { "cuMulticastUnbind", 12030, "cuMulticastUnbind" },
    { "cuCtxFromGreenCtx", 12080, "cuCtxFromGreenCtx" },
    { "cuCtxGetCurrent", 12080, "cuCtxGetCurrent" },
    { "cuCtxPopCurrent", 12080, "cuCtxPopCurrent_v2" },
    { "cuCtxPushCurrent", 12080, "cuCtxPushCurrent_v2" },
    { "cuCtxSetCurrent", 12080, "cuCtxSetCurrent" },
    { "cuGreenCtxCreate", 12080, "cuGreenCtxCreate" },
    { "cuGreenCtxDestroy", 12080, "cuGreenCtxDestroy" },
    { "cuGreenCtxStreamCreate", 12080, "cuGreenCtxStreamCreate" },
    { "cuDevSmResourceSplitByCount", 12080, "cuDevSmResourceSplitByCount" },
    { "cuDeviceGet", 12080, "cuDeviceGet" },
    { "cuDeviceGetDevResource", 12080, "cuDeviceGetDevResource" },
    { "cuDevResourceGenerateDesc", 12080, "cuDevResourceGenerateDesc" },
    { "cuLogsRegisterCallback", 12090, "cuLogsRegisterCallback" },
    { "cuLogsUnregisterCallback", 12090, "cuLogsUnregisterCallback" },
};

Test(simgpu_driver, pytorch_optional_functions)
{
    sim_env_clear();
    for (size_t i = 0; i < sizeof pytorch_optional / sizeof pytorch_optional[0]; i++)
        FOUND(pytorch_optional[i].name, pytorch_optional[i].version, 0, pytorch_optional[i].symbol);
    FOUND("cuCtxPushCurrent", 3020, 0, "cuCtxPushCurrent");
    FOUND("cuCtxPopCurrent", 4000, 0, "cuCtxPopCurrent_v2");
    TOO_OLD("cuGreenCtxCreate", 12030);
    TOO_OLD("cuLogsRegisterCallback", 12080);
}

Test(simgpu_driver, context_stack)
{
    CUcontext c0, c1, got = (CUcontext)1;
    CUdevice dev;
    sim_env("0:1GiB,1:1GiB", "0", NULL);
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&c0, 0));
    OK(cuDevicePrimaryCtxRetain(&c1, 1));
    cr_assert_eq(cuCtxPopCurrent_v2(&got), CUDA_ERROR_INVALID_CONTEXT, "nothing current");
    OK(cuCtxPushCurrent_v2(c0));
    OK(cuCtxPushCurrent(c1));
    OK(cuCtxGetCurrent(&got));
    cr_assert_eq(got, c1);
    OK(cuCtxGetDevice(&dev));
    cr_assert_eq(dev, 1);
    OK(cuCtxPopCurrent_v2(&got));
    cr_assert_eq(got, c1);
    OK(cuCtxGetCurrent(&got));
    cr_assert_eq(got, c0, "the one below is current again");
    OK(cuCtxSetCurrent(c1)); /* replaces the top */
    OK(cuCtxPopCurrent(NULL));
    OK(cuCtxGetCurrent(&got));
    cr_assert_null(got);
    cr_assert_eq(cuCtxPushCurrent_v2(NULL), CUDA_ERROR_INVALID_CONTEXT);
    cr_assert_eq(cuCtxPushCurrent_v2((CUcontext)&dev), CUDA_ERROR_INVALID_CONTEXT);
    for (int i = 0; i < 64; i++)
        OK(cuCtxPushCurrent_v2(i % 2 ? c1 : c0));
    for (int i = 63; i >= 0; i--) {
        OK(cuCtxPopCurrent_v2(&got));
        cr_assert_eq(got, i % 2 ? c1 : c0, "level %d", i);
    }
    cr_assert_eq(cuCtxPopCurrent_v2(&got), CUDA_ERROR_INVALID_CONTEXT);
}

static void log_callback(void *data, CUlogLevel level, char *message, size_t length)
{
    (void)level;
    (void)message;
    (void)length;
    ++*(int *)data;
}

Test(simgpu_driver, logs_callbacks)
{
    CUlogsCallbackHandle a = NULL, b = NULL;
    int calls = 0;
    CUdeviceptr p;
    sim_env("64MiB", "0", NULL);
    /* Registered before cuInit, as PyTorch may: the simulator never has anything to log. */
    OK(cuLogsRegisterCallback(log_callback, &calls, &a));
    cr_assert_not_null(a);
    start();
    OK(cuLogsRegisterCallback(log_callback, &calls, &b));
    cr_assert_neq(a, b);
    cr_assert_eq(cuMemAlloc_v2(&p, 128 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(calls, 0);
    OK(cuLogsUnregisterCallback(a));
    cr_assert_eq(cuLogsUnregisterCallback(a), CUDA_ERROR_INVALID_VALUE, "twice");
    OK(cuLogsUnregisterCallback(b));
    cr_assert_eq(cuLogsRegisterCallback(NULL, &calls, &a), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuLogsRegisterCallback(log_callback, &calls, NULL), CUDA_ERROR_INVALID_VALUE);
}

Test(simgpu_driver, green_contexts_and_multicast_are_not_supported)
{
    CUgreenCtx green = NULL;
    CUdevResourceDesc desc = NULL;
    CUdevResource res;
    CUcontext ctx;
    CUstream stream;
    CUmemGenericAllocationHandle mc = 0;
    CUmulticastObjectProp mprop;
    unsigned int groups = 1;
    sim_env_clear();
    start();
    cr_assert_eq(attr(CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 0), 0);
    memset(&res, 0, sizeof res);
    memset(&mprop, 0, sizeof mprop);
    cr_assert_eq(cuDeviceGetDevResource(0, &res, CU_DEV_RESOURCE_TYPE_SM),
                 CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(cuDevSmResourceSplitByCount(&res, &groups, &res, NULL, 0, 8),
                 CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(cuDevResourceGenerateDesc(&desc, &res, 1), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(cuGreenCtxCreate(&green, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM),
                 CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(cuCtxFromGreenCtx(&ctx, green), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(cuGreenCtxStreamCreate(&stream, green, CU_STREAM_NON_BLOCKING, 0),
                 CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(cuGreenCtxDestroy(green), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(cuMulticastCreate(&mc, &mprop), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(cuMulticastAddDevice(mc, 0), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(cuMulticastBindMem(mc, 0, 1, 0, 2 * MiB, 0), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(cuMulticastUnbind(mc, 0, 0, 2 * MiB), CUDA_ERROR_NOT_SUPPORTED);
}

Test(simgpu_driver, vmm_retain_by_address)
{
    CUmemAllocationProp prop = vmm_prop(0), got;
    CUmemGenericAllocationHandle h, r1 = 0, r2 = 0;
    CUdeviceptr va;

    sim_env("64MiB", "0", NULL);
    start();
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    OK(cuMemCreate(&h, 4 * MiB, &prop, 0));
    OK(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
    cr_assert_eq(cuMemRetainAllocationHandle(&r1, (void *)(uintptr_t)va), CUDA_ERROR_INVALID_VALUE,
                 "nothing mapped there yet");
    OK(cuMemMap(va, 4 * MiB, 0, h, 0));

    /* Any address inside the mapping gives the handle that was mapped, one reference more. */
    OK(cuMemRetainAllocationHandle(&r1, (void *)(uintptr_t)(va + 3 * MiB + 7)));
    cr_assert_eq(r1, h);
    OK(cuMemRetainAllocationHandle(&r2, (void *)(uintptr_t)va));
    cr_assert_eq(r2, h);
    cr_assert_eq(cuMemRetainAllocationHandle(NULL, (void *)(uintptr_t)va),
                 CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemRetainAllocationHandle(&r1, (void *)(uintptr_t)(va + 4 * MiB)),
                 CUDA_ERROR_INVALID_VALUE, "past the mapping");

    memset(&got, 0x5a, sizeof got);
    OK(cuMemGetAllocationPropertiesFromHandle(&got, r1));
    cr_assert_eq(got.type, CU_MEM_ALLOCATION_TYPE_PINNED);
    cr_assert_eq(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    cr_assert_eq(got.location.id, 0);
    cr_assert_eq(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    cr_assert_eq(cuMemGetAllocationPropertiesFromHandle(NULL, h), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemGetAllocationPropertiesFromHandle(&got, 777), CUDA_ERROR_INVALID_VALUE);

    /* Three references now: the memory lives until the last release and the unmap. */
    OK(cuMemRelease(h));
    OK(cuMemRelease(r1));
    cr_assert_eq(simgpu_used_bytes(0), 4 * MiB);
    OK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    OK(cuMemRelease(r2));
    cr_assert_eq(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE, "one release too many");
    cr_assert_eq(cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_ERROR_INVALID_VALUE,
                 "every reference released");
    cr_assert_eq(simgpu_used_bytes(0), 4 * MiB, "still mapped");

    /* Retaining a released but mapped handle by its address brings it back (the usual
     * map-then-release pattern): then unmap, free, release. */
    OK(cuMemRetainAllocationHandle(&r1, (void *)(uintptr_t)va));
    cr_assert_eq(r1, h);
    OK(cuMemUnmap(va, 4 * MiB));
    cr_assert_eq(simgpu_used_bytes(0), 4 * MiB, "a reference is left");
    OK(cuMemAddressFree(va, 8 * MiB));
    OK(cuMemRelease(r1));
    cr_assert_eq(simgpu_used_bytes(0), 0);
}

Test(simgpu_driver, shareable_handles_are_not_supported)
{
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h, got = 1;
    int fd = -1;

    sim_env("64MiB", "0", NULL);
    start();
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    OK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    cr_assert_eq(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                 CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(fd, -1, "nothing written");
    cr_assert_eq(
            cuMemExportToShareableHandle(&fd, 777, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_ERROR_INVALID_VALUE, "not a handle");
    cr_assert_eq(cuMemExportToShareableHandle(NULL, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                 CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemImportFromShareableHandle(&got, (void *)(intptr_t)3,
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                 CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(got, 1, "nothing written");
    cr_assert_eq(cuMemImportFromShareableHandle(NULL, (void *)(intptr_t)3,
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                 CUDA_ERROR_INVALID_VALUE);
    OK(cuMemRelease(h));
}

Test(simgpu_driver, memset_d32_async)
{
    CUdeviceptr p, m;
    uint32_t *w;
    sim_env("64MiB", "0", NULL);
    start();
    OK(cuMemAlloc_v2(&p, 4096));
    OK(cuMemsetD32Async(p, 0xdeadbeef, 1024, NULL));
    w = (uint32_t *)(uintptr_t)p;
    cr_assert_eq(w[0], 0xdeadbeef);
    cr_assert_eq(w[1023], 0xdeadbeef);
    OK(cuMemsetD32Async_ptsz(p + 8, 0, 2, NULL));
    cr_assert_eq(w[1], 0xdeadbeef);
    cr_assert_eq(w[2], 0);
    cr_assert_eq(w[3], 0);
    cr_assert_eq(w[4], 0xdeadbeef);
    OK(cuMemsetD32Async(p, 7, 0, NULL));
    cr_assert_eq(cuMemsetD32Async(p, 0, 1025, NULL), CUDA_ERROR_INVALID_VALUE, "past the end");
    cr_assert_eq(cuMemsetD32Async(p + 2, 0, 1, NULL), CUDA_ERROR_INVALID_VALUE, "misaligned");
    cr_assert_eq(cuMemsetD32Async(12345 * 4, 0, 1, NULL), CUDA_ERROR_INVALID_VALUE, "not memory");
    cr_assert_eq(cuMemsetD32Async(p, 0, (size_t)-1 / 2, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAllocManaged(&m, 64, CU_MEM_ATTACH_GLOBAL));
    OK(cuMemsetD32Async(m, 0x01020304, 16, NULL));
    cr_assert_eq(((uint32_t *)(uintptr_t)m)[15], 0x01020304);
}

Test(simgpu_driver, memset_d32_async_on_vmm)
{
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    sim_env("64MiB", "0", NULL);
    start();
    OK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    OK(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0));
    OK(cuMemMap(va, 2 * MiB, 0, h, 0));
    OK(cuMemsetD32Async(va, 42, 2 * MiB / 4, NULL));
    cr_assert_eq(((uint32_t *)(uintptr_t)va)[2 * MiB / 4 - 1], 42);
    cr_assert_eq(cuMemsetD32Async(va, 42, 2 * MiB / 4 + 1, NULL), CUDA_ERROR_INVALID_VALUE,
                 "past the mapping");
}

Test(simgpu_driver, stream_write_value32)
{
    CUdeviceptr p;
    void *host;
    sim_env("64MiB", "0", NULL);
    start();
    OK(cuMemAlloc_v2(&p, 512));
    OK(cuStreamWriteValue32_v2(NULL, p + 4, 0x1234, 0));
    cr_assert_eq(((uint32_t *)(uintptr_t)p)[1], 0x1234);
    OK(cuStreamWriteValue32(NULL, p + 8, 5, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER));
    cr_assert_eq(((uint32_t *)(uintptr_t)p)[2], 5);
    OK(cuStreamWriteValue32_v2_ptsz(NULL, p + 508, 6, 0));
    OK(cuStreamWriteValue32_ptsz(NULL, p + 12, 7, 0));
    cr_assert_eq(((uint32_t *)(uintptr_t)p)[3], 7);
    /* Pinned host memory is where a stream usually signals the host. */
    OK(cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    OK(cuStreamWriteValue32_v2(NULL, (CUdeviceptr)(uintptr_t)host + 64, 99, 0));
    cr_assert_eq(((uint32_t *)host)[16], 99);
    cr_assert_eq(cuStreamWriteValue32_v2(NULL, p + 510, 1, 0), CUDA_ERROR_INVALID_VALUE,
                 "misaligned");
    cr_assert_eq(cuStreamWriteValue32_v2(NULL, p + 512, 1, 0), CUDA_ERROR_INVALID_VALUE,
                 "past the end");
    cr_assert_eq(cuStreamWriteValue32_v2(NULL, p, 1, 4), CUDA_ERROR_INVALID_VALUE, "flags");
    OK(cuMemFreeHost(host));
}

/* libcaffe2_nvrtc.so links these from libcuda.so.1 (PyTorch dlopens it with RTLD_NOW, for its
 * primary-context checks and the kernels it compiles at run time). */
static const struct {
    const char *name;
    const char *symbol;
} nvrtc_imports[] = {
    { "cuCtxGetCurrent", "cuCtxGetCurrent" },
    { "cuCtxSetCurrent", "cuCtxSetCurrent" },
    { "cuDeviceGet", "cuDeviceGet" },
    { "cuDeviceGetAttribute", "cuDeviceGetAttribute" },
    { "cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxGetState" },
    { "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain" },
    { "cuFuncGetAttribute", "cuFuncGetAttribute" },
    { "cuFuncSetAttribute", "cuFuncSetAttribute" },
    { "cuFuncSetCacheConfig", "cuFuncSetCacheConfig" },
    { "cuGetErrorString", "cuGetErrorString" },
    { "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel" },
    { "cuLaunchKernel", "cuLaunchKernel" },
    { "cuLinkAddData", "cuLinkAddData_v2" },
    { "cuLinkComplete", "cuLinkComplete" },
    { "cuLinkCreate", "cuLinkCreate_v2" },
    { "cuLinkDestroy", "cuLinkDestroy" },
    { "cuModuleGetFunction", "cuModuleGetFunction" },
    { "cuModuleLoad", "cuModuleLoad" },
    { "cuModuleLoadData", "cuModuleLoadData" },
    { "cuModuleLoadDataEx", "cuModuleLoadDataEx" },
    { "cuModuleUnload", "cuModuleUnload" },
    { "cuOccupancyMaxActiveBlocksPerMultiprocessor",
      "cuOccupancyMaxActiveBlocksPerMultiprocessor" },
    { "cuPointerGetAttribute", "cuPointerGetAttribute" },
    { "cuTensorMapEncodeTiled", "cuTensorMapEncodeTiled" },
};

Test(simgpu_driver, nvrtc_stub_imports)
{
    sim_env_clear();
    for (size_t i = 0; i < sizeof nvrtc_imports / sizeof nvrtc_imports[0]; i++)
        FOUND(nvrtc_imports[i].name, 13000, 0, nvrtc_imports[i].symbol);
    FOUND("cuLaunchKernel", 13000, 2, "cuLaunchKernel_ptsz");
    FOUND("cuLaunchCooperativeKernel", 13000, 2, "cuLaunchCooperativeKernel_ptsz");
    TOO_OLD("cuLinkCreate", 6000);
    TOO_OLD("cuTensorMapEncodeTiled", 11080);
}

Test(simgpu_driver, modules_functions_and_launches)
{
    static const char image[] = "not really a cubin";
    CUmodule mod, mod2;
    CUfunction f, g, f2;
    int v;
    sim_env_clear();
    OK(cuInit(0));
    cr_assert_eq(cuModuleLoadData(&mod, image), CUDA_ERROR_INVALID_CONTEXT, "no context");
    start();
    /* Any image loads (nothing is ever run); functions are found by name, once each. */
    OK(cuModuleLoadData(&mod, image));
    cr_assert_eq(cuModuleLoadData(&mod, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuModuleGetFunction(&f, mod, "kernel_a"));
    OK(cuModuleGetFunction(&f2, mod, "kernel_a"));
    cr_assert_eq(f, f2);
    OK(cuModuleGetFunction(&g, mod, "kernel_b"));
    cr_assert_neq(f, g);
    cr_assert_eq(cuModuleGetFunction(&f2, (CUmodule)&v, "kernel_a"), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(cuModuleGetFunction(&f2, mod, NULL), CUDA_ERROR_INVALID_VALUE);

    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    cr_assert_eq(v, 1024);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    cr_assert_eq(v, 32);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
    cr_assert_eq(v, 90, "the device's compute capability");
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    cr_assert_eq(v, 49152);
    OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000));
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    cr_assert_eq(v, 100000);
    cr_assert_eq(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 232449),
                 CUDA_ERROR_INVALID_VALUE, "above the opt-in limit");
    cr_assert_eq(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 1), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX, f), CUDA_ERROR_INVALID_VALUE);
    OK(cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_SHARED));
    cr_assert_eq(cuFuncSetCacheConfig(NULL, CU_FUNC_CACHE_PREFER_SHARED),
                 CUDA_ERROR_INVALID_HANDLE);

    /* A launch checks its shape and does nothing. */
    OK(cuLaunchKernel(f, 1000, 2, 3, 256, 2, 2, 0, NULL, NULL, NULL));
    OK(cuLaunchKernel_ptsz(f, 1, 1, 1, 1024, 1, 1, 100000, NULL, NULL, NULL));
    cr_assert_eq(cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, NULL, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE, "too many threads");
    cr_assert_eq(cuLaunchKernel(f, 1, 1, 1, 512, 1, 3, 0, NULL, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE, "too many threads in all");
    cr_assert_eq(cuLaunchKernel(f, 1, 1, 1, 1, 1, 65, 0, NULL, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE, "block z above 64");
    cr_assert_eq(cuLaunchKernel(f, 1, 65536, 1, 1, 1, 1, 0, NULL, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE, "grid y above 65535");
    cr_assert_eq(cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 100001, NULL, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE, "more dynamic shared memory than allowed");
    void *params[1] = { NULL }, *extra[1] = { CU_LAUNCH_PARAM_END };
    cr_assert_eq(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, extra),
                 CUDA_ERROR_INVALID_VALUE, "parameters both ways");
    cr_assert_eq(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
                 CUDA_ERROR_INVALID_HANDLE);

    /* Occupancy of the default device (2048 threads, 32 blocks, 233472 bytes per SM). */
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 256, 0));
    cr_assert_eq(v, 8);
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 32, 0));
    cr_assert_eq(v, 32);
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 100, 100000));
    cr_assert_eq(v, 2, "limited by shared memory");
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 1025, 0));
    cr_assert_eq(v, 0);
    /* A cooperative grid must fit on the device at once: 132 SMs x 8 blocks of 256. */
    OK(cuLaunchCooperativeKernel(f, 1056, 1, 1, 256, 1, 1, 0, NULL, NULL));
    OK(cuLaunchCooperativeKernel_ptsz(f, 528, 2, 1, 256, 1, 1, 0, NULL, NULL));
    cr_assert_eq(cuLaunchCooperativeKernel(f, 1057, 1, 1, 256, 1, 1, 0, NULL, NULL),
                 CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);

    /* Unloading takes the functions with it. */
    OK(cuModuleLoadDataEx(&mod2, image, 0, NULL, NULL));
    OK(cuModuleUnload(mod));
    cr_assert_eq(cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
                 CUDA_ERROR_INVALID_HANDLE);
    OK(cuModuleUnload(mod2));
    cr_assert_eq(cuModuleLoad(&mod, "/nonexistent/kernels.cubin"), CUDA_ERROR_FILE_NOT_FOUND);
    OK(cuModuleLoad(&mod, "/proc/self/exe"));
    OK(cuModuleUnload(mod));
    const char *s = NULL;
    OK(cuGetErrorName(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, &s));
    cr_assert_str_eq(s, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE");
}

Test(simgpu_driver, named_card_occupancy)
{
    CUmodule mod;
    CUfunction f;
    int v;
    sim_env_clear();
    setenv("SIMGPU_CARD", "T4", 1);
    start();
    OK(cuModuleLoadData(&mod, "x"));
    OK(cuModuleGetFunction(&f, mod, "k"));
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
    cr_assert_eq(v, 75);
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 256, 0));
    cr_assert_eq(v, 4, "1024 threads per SM on a T4");
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 32, 0));
    cr_assert_eq(v, 16, "16 blocks per SM");
    cr_assert_eq(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65537),
                 CUDA_ERROR_INVALID_VALUE);
}

Test(simgpu_driver, linker)
{
    CUlinkState st;
    CUmodule mod;
    void *cubin = NULL;
    size_t size = 0;
    sim_env_clear();
    start();
    OK(cuLinkCreate_v2(0, NULL, NULL, &st));
    cr_assert_eq(cuLinkComplete(st, &cubin, &size), CUDA_ERROR_INVALID_VALUE, "nothing added");
    OK(cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, (void *)".version 8.0", 12, "a.ptx", 0, NULL, NULL));
    cr_assert_eq(cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, NULL, 12, "a.ptx", 0, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE);
    OK(cuLinkComplete(st, &cubin, &size));
    cr_assert_not_null(cubin);
    cr_assert_gt(size, 0);
    OK(cuModuleLoadData(&mod, cubin));
    OK(cuModuleUnload(mod));
    OK(cuLinkDestroy(st));
    cr_assert_eq(cuLinkDestroy(st), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(cuLinkCreate_v2(0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
}

Test(simgpu_driver, pointer_attributes)
{
    CUdeviceptr p, m, base, dp, va;
    CUcontext ctx, c = NULL;
    unsigned int type = 0, managed = 7;
    int ordinal = -1;
    size_t size = 0;
    void *host, *hp = NULL;
    sim_env("64MiB", "0", NULL);
    ctx = start();
    OK(cuMemAlloc_v2(&p, 1000));
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 100));
    cr_assert_eq(type, CU_MEMORYTYPE_DEVICE);
    OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p + 100));
    cr_assert_eq(ordinal, 0);
    OK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p));
    cr_assert_eq(c, ctx);
    OK(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 100));
    cr_assert_eq(base, p);
    OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 100));
    cr_assert_eq(size, 1024, "as allocated, rounded to 512");
    OK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p + 100));
    cr_assert_eq(dp, p + 100);
    OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
    cr_assert_eq(managed, 0);
    cr_assert_eq(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, p),
                 CUDA_ERROR_INVALID_VALUE, "device memory has no host pointer");

    OK(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
    OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m + 1));
    cr_assert_eq(managed, 1);
    OK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, m + 1));
    cr_assert_eq((uintptr_t)hp, m + 1);

    OK(cuMemHostAlloc(&host, 4096, 0));
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                             (CUdeviceptr)(uintptr_t)host + 8));
    cr_assert_eq(type, CU_MEMORYTYPE_HOST);

    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    OK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    OK(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0));
    OK(cuMemMap(va, 2 * MiB, 0, h, 0));
    OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + 5));
    cr_assert_eq(size, 2 * MiB);
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va));
    cr_assert_eq(type, CU_MEMORYTYPE_DEVICE);

    int local = 0;
    cr_assert_eq(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                       (CUdeviceptr)(uintptr_t)&local),
                 CUDA_ERROR_INVALID_VALUE, "ordinary host memory");
    cr_assert_eq(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p),
                 CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_P2P_TOKENS, p),
                 CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeHost(host));
}

Test(simgpu_driver, tensor_map_encode_tiled)
{
    CUtensorMap map;
    CUdeviceptr p;
    cuuint64_t dims[2] = { 64, 64 }, strides[1] = { 128 };
    cuuint32_t box[2] = { 16, 16 }, estr[2] = { 1, 1 };
    sim_env_clear();
    start();
    OK(cuMemAlloc_v2(&p, 8192));
    memset(&map, 0x5a, sizeof map);
    OK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)(uintptr_t)p, dims,
                              strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    cr_assert_eq(map.opaque[0], 0);
    cr_assert_eq(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 6,
                                        (void *)(uintptr_t)p, dims, strides, box, estr,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                        CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                 CUDA_ERROR_INVALID_VALUE, "rank above 5");
    cr_assert_eq(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                                        (void *)(uintptr_t)(p + 8), dims, strides, box, estr,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                        CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                 CUDA_ERROR_INVALID_VALUE, "not 16-byte aligned");
}

Test(simgpu_driver, legacy_v1_functions_refuse)
{
    CUdeviceptr_v1 p;
    sim_env_clear();
    start();
    cr_assert_eq(cuMemAlloc(&p, 512), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(cuMemFree(0), CUDA_ERROR_NOT_SUPPORTED);
}

Test(simgpu_driver, misc_entry_points)
{
    const char *s = NULL;
    const void *table = (const void *)1;
    CUuuid id;
    sim_env_clear();
    memset(&id, 0, sizeof id);
    cr_assert_eq(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_null(table);
    OK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    cr_assert_str_eq(s, "CUDA_ERROR_OUT_OF_MEMORY");
    OK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    cr_assert_str_eq(s, "out of memory");
    cr_assert_eq(cuGetErrorName((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(s);
}

/* ---------------------------------------------------------------------------------------- */
/* Failure injection                                                                        */

Test(simgpu_driver, failure_injection)
{
    CUmemAllocationProp prop = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    CUdeviceptr a, b, c;
    sim_env("1GiB", "0", NULL);
    setenv("SIMGPU_FAIL", "cuMemAlloc_v2:2,cuMemCreate:1:999,cuMemAllocAsync_ptsz:1", 1);
    start();
    OK(cuMemAlloc_v2(&a, MiB));
    cr_assert_eq(cuMemAlloc_v2(&b, MiB), CUDA_ERROR_OUT_OF_MEMORY, "second call fails");
    cr_assert_eq(simgpu_used_bytes(0), MiB, "without allocating");
    OK(cuMemAlloc_v2(&c, MiB));
    cr_assert_eq(cuMemCreate(&h, 2 * MiB, &prop, 0), (CUresult)999);
    OK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    OK(cuMemAllocAsync(&b, MiB, NULL));
    cr_assert_eq(cuMemAllocAsync_ptsz(&b, MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY,
                 "counted per exported function");
}

Test(simgpu_driver, failure_injection_before_init)
{
    sim_env_clear();
    setenv("SIMGPU_FAIL", "cuInit:1:100", 1);
    cr_assert_eq(cuInit(0), CUDA_ERROR_NO_DEVICE);
    OK(cuInit(0));
}

/* ---------------------------------------------------------------------------------------- */
/* Threads                                                                                  */

#define THREADS 8
#define ROUNDS 20000

struct worker {
    CUcontext ctx;
    int id;
    int failures;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    CUdeviceptr held[4] = { 0 };
    unsigned seed = (unsigned)w->id * 2654435761u + 1;

    if (cuCtxSetCurrent(w->ctx) != CUDA_SUCCESS) {
        w->failures++;
        return NULL;
    }
    for (int i = 0; i < ROUNDS; i++) {
        CUdeviceptr p;
        seed = seed * 1103515245u + 12345u;
        size_t size = 1 + (seed >> 8) % (256 * 1024);
        int slot = (int)((seed >> 4) & 3);
        /* Keep a few allocations alive across rounds so threads really interleave. */
        if (held[slot]) {
            if (cuMemFree_v2(held[slot]) != CUDA_SUCCESS)
                w->failures++;
            held[slot] = 0;
        }
        if (cuMemAlloc_v2(&p, size) != CUDA_SUCCESS) {
            w->failures++;
            continue;
        }
        held[slot] = p;
    }
    for (int s = 0; s < 4; s++)
        if (held[s] && cuMemFree_v2(held[s]) != CUDA_SUCCESS)
            w->failures++;
    return NULL;
}

Test(simgpu_driver, threads, .timeout = 60)
{
    pthread_t t[THREADS];
    struct worker w[THREADS];
    sim_env("1GiB", "0", NULL);
    CUcontext ctx = start();
    for (int i = 0; i < THREADS; i++) {
        w[i].ctx = ctx;
        w[i].id = i;
        w[i].failures = 0;
        cr_assert_eq(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(w[i].failures, 0, "thread %d", i);
    }
    cr_assert_eq(simgpu_used_bytes(0), 0, "every byte came back");
    cr_assert_eq(simgpu_largest_free_block(0), GiB, "and coalesced into one hole");
}
