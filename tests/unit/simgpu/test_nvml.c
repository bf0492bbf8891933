/* test_nvml.c: the simulated libnvidia-ml.so.1 next to the simulated runtime, as a program that
 * watches its own GPU memory uses them: NVML's figures must agree with cudaMemGetInfo. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "helpers.h"
#include "simnvml.h"

#define OK(call) cr_assert_eq((call), cudaSuccess, "%s", #call)
#define NV(call) cr_assert_eq((call), NVML_SUCCESS, "%s", #call)

/* The driver the runtime loaded (RTLD_LOCAL, so only reachable by name); NULL if none. */
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

static size_t driver_used(int dev)
{
    size_t (*f)(int) = (size_t(*)(int))driver_symbol("simgpu_device_used_bytes");
    return f(dev);
}

static nvmlDevice_t handle(unsigned int i)
{
    nvmlDevice_t d = NULL;
    NV(nvmlDeviceGetHandleByIndex_v2(i, &d));
    cr_assert_not_null(d);
    return d;
}

static nvmlMemory_t mem_v1(nvmlDevice_t d)
{
    nvmlMemory_t m;
    memset(&m, 0xab, sizeof m);
    NV(nvmlDeviceGetMemoryInfo(d, &m));
    return m;
}

static nvmlMemory_v2_t mem_v2(nvmlDevice_t d)
{
    nvmlMemory_v2_t m;
    memset(&m, 0xab, sizeof m);
    m.version = nvmlMemory_v2;
    NV(nvmlDeviceGetMemoryInfo_v2(d, &m));
    return m;
}

/* NVML (v1 and v2) against cudaMemGetInfo on the current device, and the driver's own count. */
static void assert_agrees(int dev, const char *when)
{
    size_t free_b = 0, total = 0;
    OK(cudaSetDevice(dev));
    OK(cudaMemGetInfo(&free_b, &total));
    nvmlMemory_t a = mem_v1(handle((unsigned int)dev));
    nvmlMemory_v2_t b = mem_v2(handle((unsigned int)dev));
    cr_assert_eq(a.total, total, "%s: total", when);
    cr_assert_eq(a.free, free_b, "%s: free %llu vs cudaMemGetInfo %zu", when, a.free, free_b);
    cr_assert_eq(a.used, total - free_b, "%s: used", when);
    cr_assert_eq(a.used, driver_used(dev), "%s: used vs simgpu_device_used_bytes", when);
    cr_assert_eq(b.version, nvmlMemory_v2);
    cr_assert_eq(b.total, a.total, "%s", when);
    cr_assert_eq(b.reserved, 0, "%s", when);
    cr_assert_eq(b.free, a.free, "%s", when);
    cr_assert_eq(b.used, a.used, "%s", when);
}

/* ---------------------------------------------------------------------------------------- */

Test(simgpu_nvml, abi_layouts)
{
    cr_assert_eq(sizeof(nvmlMemory_t), 24);
    cr_assert_eq(sizeof(nvmlMemory_v2_t), 40);
    cr_assert_eq(offsetof(nvmlMemory_v2_t, total), 8);
    cr_assert_eq(offsetof(nvmlMemory_v2_t, used), 32);
    cr_assert_eq(nvmlMemory_v2, 0x02000028u);
    cr_assert_eq(sizeof(nvmlPciInfo_t), 68);
    cr_assert_eq(offsetof(nvmlPciInfo_t, domain), 16);
    cr_assert_eq(offsetof(nvmlPciInfo_t, busId), 36);
    cr_assert_eq(sizeof(nvmlReturn_t), sizeof(int));
}

Test(simgpu_nvml, exports)
{
    static const char *names[] = {
        "nvmlInit_v2",
        "nvmlInit",
        "nvmlShutdown",
        "nvmlDeviceGetCount_v2",
        "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetIndex",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetPciInfo_v3",
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetNvLinkRemoteDeviceType",
        "nvmlDeviceGetNvLinkRemotePciInfo_v2",
        "nvmlDeviceGetGpuFabricInfoV",
        "nvmlSystemGetCudaDriverVersion",
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlErrorString",
    };
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(h, "the test links the simulated libnvidia-ml.so.1");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_assert_not_null(dlsym(h, names[i]), "%s", names[i]);
    /* The shared configuration parser stays inside. */
    cr_assert_null(dlsym(h, "simgpu_config_read"));
    cr_assert_null(dlsym(h, "simgpu_parse_size"));
    dlclose(h);
}

Test(simgpu_nvml, uninitialized)
{
    unsigned int n = 7, idx = 7;
    nvmlDevice_t d = NULL;
    nvmlMemory_t m;
    nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
    nvmlPciInfo_t pci;
    char name[96];

    sim_env_clear();
    cr_assert_eq(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    cr_assert_eq(n, 7, "left alone");
    cr_assert_eq(nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_ERROR_UNINITIALIZED);
    cr_assert_null(d);
    cr_assert_eq(nvmlShutdown(), NVML_ERROR_UNINITIALIZED);

    /* A handle from an earlier session is refused once NVML is shut down. */
    NV(nvmlInit_v2());
    d = handle(0);
    NV(nvmlShutdown());
    cr_assert_eq(nvmlDeviceGetIndex(d, &idx), NVML_ERROR_UNINITIALIZED);
    cr_assert_eq(nvmlDeviceGetMemoryInfo(d, &m), NVML_ERROR_UNINITIALIZED);
    cr_assert_eq(nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_ERROR_UNINITIALIZED);
    cr_assert_eq(nvmlDeviceGetPciInfo_v3(d, &pci), NVML_ERROR_UNINITIALIZED);
    cr_assert_eq(nvmlDeviceGetName(d, name, sizeof name), NVML_ERROR_UNINITIALIZED);
    cr_assert_eq(nvmlDeviceGetUUID(d, name, sizeof name), NVML_ERROR_UNINITIALIZED);
    cr_assert_eq(nvmlDeviceGetComputeRunningProcesses(d, &n, NULL), NVML_ERROR_UNINITIALIZED);
    cr_assert_eq(nvmlDeviceGetNvLinkRemotePciInfo_v2(d, 0, &pci), NVML_ERROR_UNINITIALIZED);
    cr_assert_eq(nvmlShutdown(), NVML_ERROR_UNINITIALIZED);

    /* No initialisation needed for the error text. */
    cr_assert_str_eq(nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized");
    cr_assert_str_eq(nvmlErrorString(NVML_SUCCESS), "Success");
    cr_assert_str_eq(nvmlErrorString((nvmlReturn_t)12345), "Unknown Error");
    cr_assert_null(loaded_driver(), "NVML never loads the driver itself");
}

Test(simgpu_nvml, init_is_reference_counted)
{
    unsigned int n = 0;
    sim_env_clear();
    NV(nvmlInit_v2());
    NV(nvmlInit());
    NV(nvmlShutdown());
    NV(nvmlDeviceGetCount_v2(&n));
    cr_assert_eq(n, 1);
    NV(nvmlShutdown());
    cr_assert_eq(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    NV(nvmlInit_v2());
    NV(nvmlDeviceGetCount_v2(&n));
    NV(nvmlShutdown());
}

Test(simgpu_nvml, no_devices)
{
    unsigned int n;
    sim_env_clear();
    setenv("SIMGPU_DEVICES", "0", 1);
    cr_assert_eq(nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
    cr_assert_eq(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
}

Test(simgpu_nvml, handles_and_indices)
{
    unsigned int n = 0, idx = 99;
    nvmlDevice_t d = NULL;
    struct nvmlDevice_st *bogus = (struct nvmlDevice_st *)&n;

    sim_env("0:16GiB,1:8GiB,2:4GiB", NULL, NULL);
    NV(nvmlInit_v2());
    NV(nvmlDeviceGetCount_v2(&n));
    cr_assert_eq(n, 3);
    for (unsigned int i = 0; i < n; i++) {
        d = handle(i);
        NV(nvmlDeviceGetIndex(d, &idx));
        cr_assert_eq(idx, i);
        cr_assert_eq(handle(i), d, "the same handle every time");
        if (i > 0)
            cr_assert_neq(handle(i - 1), d);
    }
    cr_assert_eq(mem_v1(handle(0)).total, 16 * GiB);
    cr_assert_eq(mem_v1(handle(1)).total, 8 * GiB);
    cr_assert_eq(mem_v1(handle(2)).total, 4 * GiB);

    d = NULL;
    cr_assert_eq(nvmlDeviceGetHandleByIndex_v2(3, &d), NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_null(d);
    cr_assert_eq(nvmlDeviceGetHandleByIndex_v2(0, NULL), NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(nvmlDeviceGetCount_v2(NULL), NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(nvmlDeviceGetIndex(NULL, &idx), NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(nvmlDeviceGetIndex(bogus, &idx), NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(nvmlDeviceGetIndex(handle(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    /* One past the last device (inside NVML's own table) and a misaligned pointer. */
    char *p1 = (char *)handle(1), *p2 = (char *)handle(2);
    cr_assert_eq(nvmlDeviceGetIndex((nvmlDevice_t)(p2 + (p2 - p1)), &idx),
                 NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(nvmlDeviceGetIndex((nvmlDevice_t)(p1 + 1), &idx), NVML_ERROR_INVALID_ARGUMENT);
    NV(nvmlShutdown());
}

Test(simgpu_nvml, memory_before_the_driver_is_loaded)
{
    sim_env("16GiB", "300MiB", "1GiB");
    NV(nvmlInit_v2());
    cr_assert_null(loaded_driver());
    nvmlMemory_t m = mem_v1(handle(0));
    cr_assert_eq(m.total, 16 * GiB);
    cr_assert_eq(m.used, 1 * GiB, "only the other process");
    cr_assert_eq(m.free, 15 * GiB);
    nvmlMemory_v2_t m2 = mem_v2(handle(0));
    cr_assert_eq(m2.used, 1 * GiB);
    cr_assert_eq(m2.free, 15 * GiB);
    NV(nvmlShutdown());
}

Test(simgpu_nvml, memory_agrees_with_the_runtime)
{
    void *a, *b, *managed, *async;
    int n;

    sim_env("16GiB", "300MiB", "1GiB");
    NV(nvmlInit_v2());
    OK(cudaGetDeviceCount(&n));
    cr_assert_not_null(loaded_driver());
    /* Driver loaded and initialised, no context yet: still only the other process. */
    cr_assert_eq(mem_v1(handle(0)).used, 1 * GiB);

    OK(cudaFree(NULL)); /* the primary context: 300 MiB */
    assert_agrees(0, "context");
    cr_assert_eq(mem_v1(handle(0)).used, 1 * GiB + 300 * MiB);

    OK(cudaMalloc(&a, 2 * GiB));
    assert_agrees(0, "cudaMalloc");
    OK(cudaMalloc(&b, 1000)); /* rounded to 1024 */
    assert_agrees(0, "small cudaMalloc");
    cr_assert_eq(mem_v1(handle(0)).used, 1 * GiB + 300 * MiB + 2 * GiB + 1024);
    OK(cudaMallocManaged(&managed, 64 * MiB, cudaMemAttachGlobal));
    assert_agrees(0, "managed");
    OK(cudaMallocAsync(&async, 5 * MiB, 0)); /* the default pool takes 6 MiB */
    assert_agrees(0, "pool");

    OK(cudaFreeAsync(async, 0));
    assert_agrees(0, "freed into the pool, still reserved");
    OK(cudaDeviceSynchronize());
    assert_agrees(0, "pool trimmed");
    OK(cudaFree(a));
    OK(cudaFree(b));
    OK(cudaFree(managed));
    assert_agrees(0, "all freed");
    cr_assert_eq(mem_v1(handle(0)).used, 1 * GiB + 300 * MiB);
    NV(nvmlShutdown());
}

Test(simgpu_nvml, out_of_memory_card)
{
    void *a;
    sim_env("4GiB", "0", "1GiB");
    NV(nvmlInit_v2());
    OK(cudaFree(NULL));
    OK(cudaMalloc(&a, 3 * GiB));
    assert_agrees(0, "full");
    cr_assert_eq(mem_v1(handle(0)).free, 0);
    cr_assert_eq(cudaMalloc(&a, 512), cudaErrorMemoryAllocation);
    NV(nvmlShutdown());
}

Test(simgpu_nvml, other_process_bigger_than_the_card)
{
    sim_env("4GiB", "0", "6GiB");
    NV(nvmlInit_v2());
    nvmlMemory_t m = mem_v1(handle(0));
    cr_assert_eq(m.total, 4 * GiB);
    cr_assert_eq(m.used, 4 * GiB, "never more than the card");
    cr_assert_eq(m.free, 0);
    NV(nvmlShutdown());
}

Test(simgpu_nvml, memory_per_device)
{
    void *a;
    sim_env("0:16GiB,1:8GiB", "100MiB", "0:1GiB,1:0");
    NV(nvmlInit_v2());
    OK(cudaSetDevice(1));
    OK(cudaMalloc(&a, 3 * GiB));
    assert_agrees(1, "device 1");
    cr_assert_eq(mem_v1(handle(1)).used, 100 * MiB + 3 * GiB);
    /* Device 0 has no context (assert_agrees would make one): other process only. */
    cr_assert_eq(mem_v1(handle(0)).used, 1 * GiB);
    assert_agrees(0, "device 0 with its context");
    cr_assert_eq(mem_v1(handle(0)).used, 1 * GiB + 100 * MiB);
    OK(cudaSetDevice(1));
    OK(cudaFree(a));
    assert_agrees(1, "device 1 freed");
    NV(nvmlShutdown());
}

typedef CUresult (*init_fn)(unsigned int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*set_fn)(CUcontext);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*info_fn)(size_t *, size_t *);

/* A program that links (or globally loads) the driver itself: found in the global scope. */
Test(simgpu_nvml, driver_in_the_global_scope)
{
    CUcontext ctx;
    CUdeviceptr p;
    size_t free_b, total;

    sim_env("8GiB", "200MiB", "512MiB");
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    cr_assert_not_null(h);
    NV(nvmlInit_v2());
    cr_assert_eq(mem_v1(handle(0)).used, 512 * MiB, "loaded, cuInit not called yet");

    init_fn init = (init_fn)dlsym(h, "cuInit");
    retain_fn retain = (retain_fn)dlsym(h, "cuDevicePrimaryCtxRetain");
    set_fn set = (set_fn)dlsym(h, "cuCtxSetCurrent");
    alloc_fn alloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    info_fn info = (info_fn)dlsym(h, "cuMemGetInfo_v2");
    cr_assert(init && retain && set && alloc && info);
    cr_assert_eq(init(0), CUDA_SUCCESS);
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(set(ctx), CUDA_SUCCESS);
    cr_assert_eq(alloc(&p, 1 * GiB), CUDA_SUCCESS);
    cr_assert_eq(info(&free_b, &total), CUDA_SUCCESS);

    nvmlMemory_t m = mem_v1(handle(0));
    cr_assert_eq(m.used, 512 * MiB + 200 * MiB + 1 * GiB);
    cr_assert_eq(m.free, free_b);
    cr_assert_eq(m.total, total);
    NV(nvmlShutdown());
    dlclose(h);
}

Test(simgpu_nvml, memory_v2_version_check)
{
    nvmlMemory_v2_t m;
    sim_env_clear();
    NV(nvmlInit_v2());
    nvmlDevice_t d = handle(0);

    static const unsigned int wrong[] = {
        0,
        2u << 24, /* right version, no size */
        (unsigned int)sizeof(nvmlMemory_v2_t) | (1u << 24),
        (unsigned int)sizeof(nvmlMemory_v2_t) | (3u << 24),
        (unsigned int)sizeof(nvmlMemory_t) | (2u << 24),
        (unsigned int)sizeof(nvmlMemory_v2_t),
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        memset(&m, 0x5a, sizeof m);
        m.version = wrong[i];
        cr_assert_eq(nvmlDeviceGetMemoryInfo_v2(d, &m), NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
                     "version 0x%x", wrong[i]);
        cr_assert_eq(m.total, 0x5a5a5a5a5a5a5a5aULL, "nothing written");
    }
    cr_assert_eq(nvmlDeviceGetMemoryInfo_v2(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(nvmlDeviceGetMemoryInfo(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
    m.version = nvmlMemory_v2;
    cr_assert_eq(nvmlDeviceGetMemoryInfo_v2(NULL, &m), NVML_ERROR_INVALID_ARGUMENT);
    NV(nvmlDeviceGetMemoryInfo_v2(d, &m));
    cr_assert_eq(m.version, nvmlMemory_v2);
    cr_assert_eq(m.total, 16 * GiB);
    cr_assert_str_eq(nvmlErrorString(NVML_ERROR_ARGUMENT_VERSION_MISMATCH),
                     "Argument version mismatch");
    NV(nvmlShutdown());
}

Test(simgpu_nvml, pci_bus_ids_match_the_driver)
{
    struct cudaDeviceProp prop;
    char drv[32], want[40];
    nvmlPciInfo_t pci;
    int n = 0;

    /* Twelve devices: buses 0x01..0x0C, so the hex letters are compared too. */
    sim_env("1GiB", NULL, NULL);
    setenv("SIMGPU_DEVICES", "12", 1);
    NV(nvmlInit_v2());
    OK(cudaGetDeviceCount(&n));
    cr_assert_eq(n, 12);
    CUresult (*bus_id)(char *, int, CUdevice) =
            (CUresult(*)(char *, int, CUdevice))driver_symbol("cuDeviceGetPCIBusId");

    for (int i = 0; i < n; i++) {
        memset(&pci, 0x5a, sizeof pci);
        NV(nvmlDeviceGetPciInfo_v3(handle((unsigned int)i), &pci));
        cr_assert_eq(bus_id(drv, sizeof drv, i), CUDA_SUCCESS);
        cr_assert_str_eq(pci.busIdLegacy, drv, "device %d", i);
        snprintf(want, sizeof want, "0000%s", drv);
        cr_assert_str_eq(pci.busId, want, "device %d: NVML's eight-digit domain", i);
        OK(cudaGetDeviceProperties(&prop, i));
        cr_assert_eq(pci.domain, (unsigned int)prop.pciDomainID);
        cr_assert_eq(pci.bus, (unsigned int)prop.pciBusID);
        cr_assert_eq(pci.device, (unsigned int)prop.pciDeviceID);
        cr_assert_eq(pci.pciDeviceId & 0xffffu, 0x10DE, "NVIDIA's vendor id");
    }
    NV(nvmlDeviceGetPciInfo_v3(handle(10), &pci));
    cr_assert_str_eq(pci.busIdLegacy, "0000:0B:00.0");
    cr_assert_str_eq(pci.busId, "00000000:0B:00.0");
    cr_assert_eq(nvmlDeviceGetPciInfo_v3(handle(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(nvmlDeviceGetPciInfo_v3(NULL, &pci), NVML_ERROR_INVALID_ARGUMENT);
    NV(nvmlShutdown());
}

Test(simgpu_nvml, names)
{
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    struct cudaDeviceProp prop;

    sim_env_clear();
    setenv("SIMGPU_NAME", "Simulated H200", 1);
    NV(nvmlInit_v2());
    NV(nvmlDeviceGetName(handle(0), name, sizeof name));
    cr_assert_str_eq(name, "Simulated H200");
    OK(cudaGetDeviceProperties(&prop, 0));
    cr_assert_str_eq(name, prop.name);
    NV(nvmlDeviceGetName(handle(0), name, 15)); /* exactly enough */
    cr_assert_eq(nvmlDeviceGetName(handle(0), name, 14), NVML_ERROR_INSUFFICIENT_SIZE);
    cr_assert_eq(nvmlDeviceGetName(handle(0), NULL, 64), NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(nvmlDeviceGetName(NULL, name, sizeof name), NVML_ERROR_INVALID_ARGUMENT);
    NV(nvmlShutdown());
}

/* A named card (SIMGPU_CARD) has the same name and capacity in NVML as in the driver. */
Test(simgpu_nvml, named_cards)
{
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    struct cudaDeviceProp prop;

    sim_env_clear();
    setenv("SIMGPU_CARD", "0:H100,1:t4", 1);
    NV(nvmlInit_v2());
    NV(nvmlDeviceGetName(handle(0), name, sizeof name));
    cr_assert_str_eq(name, "NVIDIA H100 80GB HBM3");
    NV(nvmlDeviceGetName(handle(1), name, sizeof name));
    cr_assert_str_eq(name, "Tesla T4");
    cr_assert_eq(mem_v1(handle(0)).total, 85017755648ULL);
    cr_assert_eq(mem_v1(handle(1)).total, 15843721216ULL);
    for (int d = 0; d < 2; d++) {
        NV(nvmlDeviceGetName(handle((unsigned int)d), name, sizeof name));
        OK(cudaGetDeviceProperties(&prop, d));
        cr_assert_str_eq(name, prop.name);
        assert_agrees(d, "named card");
    }
    NV(nvmlShutdown());
}

Test(simgpu_nvml, long_names_fit_nvml_buffers)
{
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], longname[200];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    sim_env_clear();
    setenv("SIMGPU_NAME", longname, 1);
    NV(nvmlInit_v2());
    NV(nvmlDeviceGetName(handle(0), name, sizeof name));
    cr_assert_eq(strlen(name), NVML_DEVICE_NAME_V2_BUFFER_SIZE - 1);
    cr_assert_eq(strncmp(name, longname, strlen(name)), 0);
    NV(nvmlShutdown());
}

Test(simgpu_nvml, bad_values_are_reported_by_the_driver_only)
{
    unsigned int n = 0;
    int devices = 0;
    sim_env("lots", NULL, NULL);
    struct stderr_capture c = stderr_begin();
    NV(nvmlInit_v2());
    NV(nvmlDeviceGetCount_v2(&n));
    nvmlMemory_t m = mem_v1(handle(0));
    char *quiet = stderr_end(c);
    cr_assert_str_empty(quiet, "NVML said: %s", quiet);
    free(quiet);
    cr_assert_eq(m.total, 16 * GiB, "the default, as the driver uses");

    c = stderr_begin();
    OK(cudaGetDeviceCount(&devices));
    char *said = stderr_end(c);
    cr_assert(strstr(said, "simgpu: SIMGPU_MEMORY='lots'") != NULL, "driver said: %s", said);
    cr_assert_null(strstr(strstr(said, "simgpu:") + 1, "simgpu:"), "once: %s", said);
    free(said);
    NV(nvmlShutdown());
}

#define THREADS 8
#define ROUNDS 2000

static void *nvml_worker(void *arg)
{
    int *failures = arg;
    if (nvmlInit_v2() != NVML_SUCCESS) {
        (*failures)++;
        return NULL;
    }
    for (int i = 0; i < ROUNDS; i++) {
        nvmlDevice_t d;
        nvmlMemory_t m;
        unsigned int idx;
        void *p;
        if (nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS ||
            nvmlDeviceGetIndex(d, &idx) != NVML_SUCCESS || idx != 0 ||
            nvmlDeviceGetMemoryInfo(d, &m) != NVML_SUCCESS || m.total != 1 * GiB ||
            m.used + m.free != m.total || m.used < 100 * MiB)
            (*failures)++;
        if (cudaMalloc(&p, (size_t)(i % 97 + 1) * 1000) != cudaSuccess ||
            cudaFree(p) != cudaSuccess)
            (*failures)++;
    }
    if (nvmlShutdown() != NVML_SUCCESS)
        (*failures)++;
    return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* What PyTorch 2.14 resolves from NVML (c10/cuda/driver_api.h) and calls                   */

Test(simgpu_nvml, pytorch_abi_layouts)
{
    cr_assert_eq(sizeof(nvmlProcessInfo_v1_t), 16);
    cr_assert_eq(offsetof(nvmlProcessInfo_v1_t, usedGpuMemory), 8);
    cr_assert_eq(sizeof(nvmlGpuFabricInfo_v2_t), 36);
    cr_assert_eq(offsetof(nvmlGpuFabricInfo_v2_t, status), 20);
    cr_assert_eq(offsetof(nvmlGpuFabricInfo_v2_t, cliqueId), 24);
    cr_assert_eq(offsetof(nvmlGpuFabricInfo_v2_t, state), 28);
    cr_assert_eq(offsetof(nvmlGpuFabricInfo_v2_t, healthMask), 32);
    cr_assert_eq(sizeof(nvmlGpuFabricInfo_v3_t), 40);
    cr_assert_eq(nvmlGpuFabricInfo_v2, 0x02000024u);
    cr_assert_eq(nvmlGpuFabricInfo_v3, 0x03000028u);
}

/* The names its DriverAPI looks up with dlsym, and the way its out-of-memory message asks for
 * the processes on the card: the bus id from cudaDeviceProp, then the v1 process list, growing
 * its buffer of 8 while the answer is NVML_ERROR_INSUFFICIENT_SIZE. */
Test(simgpu_nvml, pytorch_out_of_memory_message_path)
{
    static const char *names[] = {
        "nvmlInit_v2",
        "nvmlDeviceGetHandleByPciBusId_v2",
        "nvmlDeviceGetNvLinkRemoteDeviceType",
        "nvmlDeviceGetNvLinkRemotePciInfo_v2",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetGpuFabricInfoV",
    };
    void *h = dlopen("libnvidia-ml.so.1", RTLD_LAZY);
    cr_assert_not_null(h);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_assert_not_null(dlsym(h, names[i]), "%s", names[i]);

    struct cudaDeviceProp prop;
    char pci_id[32];
    nvmlDevice_t d = NULL;
    void *p;
    sim_env("8GiB", "300MiB", NULL);
    OK(cudaMalloc(&p, 1024ULL << 20));
    OK(cudaGetDeviceProperties(&prop, 0));
    NV(nvmlInit_v2());
    snprintf(pci_id, sizeof pci_id, NVML_DEVICE_PCI_BUS_ID_FMT, (unsigned)prop.pciDomainID,
             (unsigned)prop.pciBusID, (unsigned)prop.pciDeviceID);
    NV(nvmlDeviceGetHandleByPciBusId_v2(pci_id, &d));
    cr_assert_eq(d, handle(0));
    nvmlProcessInfo_v1_t procs[8];
    memset(procs, 0xab, sizeof procs);
    unsigned int n = 8;
    NV(nvmlDeviceGetComputeRunningProcesses(d, &n, procs));
    cr_assert_eq(n, 1);
    cr_assert_eq(procs[0].pid, (unsigned int)getpid());
    cr_assert_eq(procs[0].usedGpuMemory, (1024ULL + 300) << 20, "its memory and its context's");
    dlclose(h);
    NV(nvmlShutdown());
}

Test(simgpu_nvml, processes_v1_and_v3_agree)
{
    nvmlProcessInfo_v1_t v1[2];
    nvmlProcessInfo_t v3[2];
    unsigned int n1 = 0, n3 = 2;
    void *p;
    pid_t other = getppid();
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)other);
    sim_env("4GiB", "0", "1GiB");
    setenv("SIMGPU_OTHER_PID", pid, 1);
    OK(cudaMalloc(&p, 256ULL << 20));
    NV(nvmlInit_v2());
    cr_assert_eq(nvmlDeviceGetComputeRunningProcesses(handle(0), &n1, NULL),
                 NVML_ERROR_INSUFFICIENT_SIZE);
    cr_assert_eq(n1, 2, "the count needed");
    n1 = 1;
    cr_assert_eq(nvmlDeviceGetComputeRunningProcesses(handle(0), &n1, v1),
                 NVML_ERROR_INSUFFICIENT_SIZE);
    n1 = 2;
    NV(nvmlDeviceGetComputeRunningProcesses(handle(0), &n1, v1));
    NV(nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &n3, v3));
    cr_assert_eq(n1, n3);
    for (unsigned int i = 0; i < n1; i++) {
        cr_assert_eq(v1[i].pid, v3[i].pid);
        cr_assert_eq(v1[i].usedGpuMemory, v3[i].usedGpuMemory);
    }
    cr_assert_eq(v1[1].pid, (unsigned int)other);
    cr_assert_eq(v1[1].usedGpuMemory, 1ULL << 30);
    cr_assert_eq(nvmlDeviceGetComputeRunningProcesses(NULL, &n1, v1), NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(nvmlDeviceGetComputeRunningProcesses(handle(0), NULL, v1),
                 NVML_ERROR_INVALID_ARGUMENT);
    NV(nvmlShutdown());
}

Test(simgpu_nvml, no_nvlink)
{
    nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_GPU;
    nvmlPciInfo_t pci;
    sim_env_clear();
    NV(nvmlInit_v2());
    for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; link++) {
        cr_assert_eq(nvmlDeviceGetNvLinkRemoteDeviceType(handle(0), link, &type),
                     NVML_ERROR_NOT_SUPPORTED);
        cr_assert_eq(nvmlDeviceGetNvLinkRemotePciInfo_v2(handle(0), link, &pci),
                     NVML_ERROR_NOT_SUPPORTED);
    }
    cr_assert_eq(nvmlDeviceGetNvLinkRemoteDeviceType(handle(0), NVML_NVLINK_MAX_LINKS, &type),
                 NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(nvmlDeviceGetNvLinkRemoteDeviceType(handle(0), 0, NULL),
                 NVML_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(nvmlDeviceGetNvLinkRemotePciInfo_v2(NULL, 0, &pci), NVML_ERROR_INVALID_ARGUMENT);
    NV(nvmlShutdown());
}

Test(simgpu_nvml, cuda_driver_version)
{
    int v = 0;
    sim_env_clear();
    cr_assert_eq(nvmlSystemGetCudaDriverVersion_v2(&v), NVML_ERROR_UNINITIALIZED);
    NV(nvmlInit_v2());
    NV(nvmlSystemGetCudaDriverVersion_v2(&v));
    cr_assert_eq(v, 13000);
    v = 0;
    NV(nvmlSystemGetCudaDriverVersion(&v));
    cr_assert_eq(v, 13000);
    cr_assert_eq(nvmlSystemGetCudaDriverVersion_v2(NULL), NVML_ERROR_INVALID_ARGUMENT);
    NV(nvmlShutdown());
}

/* No NVLink fabric: the call works and says so, which PyTorch reads as "no fabric handles"
 * without a warning. */
Test(simgpu_nvml, fabric_info)
{
    nvmlGpuFabricInfo_v2_t f2;
    nvmlGpuFabricInfo_v3_t f3;
    sim_env_clear();
    NV(nvmlInit_v2());
    memset(&f2, 0xab, sizeof f2);
    f2.version = nvmlGpuFabricInfo_v2;
    NV(nvmlDeviceGetGpuFabricInfoV(handle(0), (nvmlGpuFabricInfoV_t *)&f2));
    cr_assert_eq(f2.state, NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
    cr_assert_eq(f2.status, NVML_ERROR_NOT_SUPPORTED);
    cr_assert_eq(f2.cliqueId, 0);
    cr_assert_eq(f2.healthMask, 0);
    for (int i = 0; i < NVML_GPU_FABRIC_UUID_LEN; i++)
        cr_assert_eq(f2.clusterUuid[i], 0);
    memset(&f3, 0xab, sizeof f3);
    f3.version = nvmlGpuFabricInfo_v3;
    NV(nvmlDeviceGetGpuFabricInfoV(handle(0), (nvmlGpuFabricInfoV_t *)&f3));
    cr_assert_eq(f3.state, NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
    cr_assert_eq(f3.healthSummary, 0);
    f2.version = 1;
    cr_assert_eq(nvmlDeviceGetGpuFabricInfoV(handle(0), (nvmlGpuFabricInfoV_t *)&f2),
                 NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    cr_assert_eq(nvmlDeviceGetGpuFabricInfoV(handle(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    NV(nvmlShutdown());
}

/* torch.cuda.device_count() reads UUIDs from NVML when CUDA_VISIBLE_DEVICES names them. */
Test(simgpu_nvml, uuids_match_the_driver)
{
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    struct cudaDeviceProp prop;
    sim_env("0:1GiB,1:2GiB", NULL, NULL);
    NV(nvmlInit_v2());
    NV(nvmlDeviceGetUUID(handle(1), uuid, sizeof uuid));
    cr_assert_str_eq(uuid, "GPU-7672616d-7761-7463-682d-4750552d3001");
    OK(cudaGetDeviceProperties(&prop, 1));
    char want[48];
    unsigned char *b = (unsigned char *)prop.uuid.bytes;
    snprintf(want, sizeof want,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
    cr_assert_str_eq(uuid, want, "the driver's cuDeviceGetUuid");
    NV(nvmlDeviceGetUUID(handle(0), uuid, 41)); /* exactly enough */
    cr_assert_eq(nvmlDeviceGetUUID(handle(0), uuid, 40), NVML_ERROR_INSUFFICIENT_SIZE);
    cr_assert_eq(nvmlDeviceGetUUID(handle(0), NULL, 80), NVML_ERROR_INVALID_ARGUMENT);
    NV(nvmlShutdown());
}

Test(simgpu_nvml, threads, .timeout = 60)
{
    pthread_t t[THREADS];
    int failures[THREADS] = { 0 };
    unsigned int n;

    sim_env("1GiB", "0", "100MiB");
    NV(nvmlInit_v2());
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, nvml_worker, &failures[i]);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(failures[i], 0, "thread %d", i);
    }
    assert_agrees(0, "after the threads");
    cr_assert_eq(mem_v1(handle(0)).used, 100 * MiB);
    NV(nvmlShutdown());
    cr_assert_eq(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED, "every init undone");
}
