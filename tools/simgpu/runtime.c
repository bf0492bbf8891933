/* runtime.c: libcudart.so.13 of the simulated GPU, a fake CUDA runtime that reaches its driver
 * the way the real one does (dlopen + cuGetProcAddress), so interposers see the same calls. */

/* Declares the _ptsz entry points next to the plain ones, so both can be defined here. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define EXPORT __attribute__((visibility("default")))

#define RT_VERSION 13000
#define RT_MAX_DEVICES 64
#define RT_PITCH 512

/* Every driver function the runtime calls, resolved once through cuGetProcAddress. */
static struct driver {
    PFN_cuGetProcAddress_v12000 getProcAddress;
    PFN_cuInit_v2000 init;
    PFN_cuDriverGetVersion_v2020 driverGetVersion;
    PFN_cuDeviceGetCount_v2000 deviceGetCount;
    PFN_cuDeviceGet_v2000 deviceGet;
    PFN_cuDeviceGetName_v2000 deviceGetName;
    PFN_cuDeviceTotalMem_v3020 deviceTotalMem;
    PFN_cuDeviceGetAttribute_v2000 deviceGetAttribute;
    PFN_cuDeviceGetUuid_v9020 deviceGetUuid;
    PFN_cuDevicePrimaryCtxRetain_v7000 primaryCtxRetain;
    PFN_cuCtxSetCurrent_v4000 ctxSetCurrent;
    PFN_cuCtxSynchronize_v13000 ctxSynchronize;
    PFN_cuStreamSynchronize_v2000 streamSynchronize;
    PFN_cuStreamSynchronize_v7000_ptsz streamSynchronize_ptsz;
    PFN_cuMemGetInfo_v3020 memGetInfo;
    PFN_cuMemAlloc_v3020 memAlloc;
    PFN_cuMemFree_v3020 memFree;
    PFN_cuMemAllocPitch_v3020 memAllocPitch;
    PFN_cuMemAllocManaged_v6000 memAllocManaged;
    PFN_cuMemHostAlloc_v2020 memHostAlloc;
    PFN_cuMemFreeHost_v2000 memFreeHost;
    PFN_cuMemsetD8_v3020 memsetD8;
    PFN_cuMemAllocAsync_v11020 memAllocAsync;
    PFN_cuMemAllocAsync_v11020_ptsz memAllocAsync_ptsz;
    PFN_cuMemAllocFromPoolAsync_v11020 memAllocFromPoolAsync;
    PFN_cuMemAllocFromPoolAsync_v11020_ptsz memAllocFromPoolAsync_ptsz;
    PFN_cuMemFreeAsync_v11020 memFreeAsync;
    PFN_cuMemFreeAsync_v11020_ptsz memFreeAsync_ptsz;
    PFN_cuDeviceGetDefaultMemPool_v11020 deviceGetDefaultMemPool;
    PFN_cuDeviceGetMemPool_v11020 deviceGetMemPool;
    PFN_cuMemPoolCreate_v11020 memPoolCreate;
    PFN_cuMemPoolDestroy_v11020 memPoolDestroy;
    PFN_cuMemPoolGetAttribute_v11020 memPoolGetAttribute;
    PFN_cuMemPoolSetAttribute_v11020 memPoolSetAttribute;
    PFN_cuMemPoolTrimTo_v11020 memPoolTrimTo;
    PFN_cuMemGetAddressRange_v3020 memGetAddressRange;
    PFN_cuDeviceGetPCIBusId_v4010 deviceGetPCIBusId;
} drv;

/* The driver's read-back rule (readback.c), found by name: a driver that is not the simulated one
 * (SIMGPU_LIBCUDA) has neither, and copies then move bytes as they are. */
static void (*drv_copy)(void *dst, const void *src, size_t n);
static void (*drv_launched)(void);

#define WANT(name, version, ptsz, field)                    \
    {                                                       \
        name, version, ptsz, offsetof(struct driver, field) \
    }

/* Base names, as cuGetProcAddress expects them, each at the version of the ABI this file was
 * written against (the version in its PFN_ type), which is how the real libcudart.so.13 asks;
 * ptsz rows ask for the per-thread-default-stream variant. */
static const struct {
    const char *name;
    int version;
    int ptsz;
    size_t offset;
} wanted[] = {
    WANT("cuInit", 2000, 0, init),
    WANT("cuDriverGetVersion", 2020, 0, driverGetVersion),
    WANT("cuDeviceGetCount", 2000, 0, deviceGetCount),
    WANT("cuDeviceGet", 2000, 0, deviceGet),
    WANT("cuDeviceGetName", 2000, 0, deviceGetName),
    WANT("cuDeviceTotalMem", 3020, 0, deviceTotalMem),
    WANT("cuDeviceGetAttribute", 2000, 0, deviceGetAttribute),
    WANT("cuDeviceGetUuid", 9020, 0, deviceGetUuid),
    WANT("cuDevicePrimaryCtxRetain", 7000, 0, primaryCtxRetain),
    WANT("cuCtxSetCurrent", 4000, 0, ctxSetCurrent),
    WANT("cuCtxSynchronize", 13000, 0, ctxSynchronize),
    WANT("cuStreamSynchronize", 2000, 0, streamSynchronize),
    WANT("cuStreamSynchronize", 7000, 1, streamSynchronize_ptsz),
    WANT("cuMemGetInfo", 3020, 0, memGetInfo),
    WANT("cuMemAlloc", 3020, 0, memAlloc),
    WANT("cuMemFree", 3020, 0, memFree),
    WANT("cuMemAllocPitch", 3020, 0, memAllocPitch),
    WANT("cuMemAllocManaged", 6000, 0, memAllocManaged),
    WANT("cuMemHostAlloc", 2020, 0, memHostAlloc),
    WANT("cuMemFreeHost", 2000, 0, memFreeHost),
    WANT("cuMemsetD8", 3020, 0, memsetD8),
    WANT("cuMemAllocAsync", 11020, 0, memAllocAsync),
    WANT("cuMemAllocAsync", 11020, 1, memAllocAsync_ptsz),
    WANT("cuMemAllocFromPoolAsync", 11020, 0, memAllocFromPoolAsync),
    WANT("cuMemAllocFromPoolAsync", 11020, 1, memAllocFromPoolAsync_ptsz),
    WANT("cuMemFreeAsync", 11020, 0, memFreeAsync),
    WANT("cuMemFreeAsync", 11020, 1, memFreeAsync_ptsz),
    WANT("cuDeviceGetDefaultMemPool", 11020, 0, deviceGetDefaultMemPool),
    WANT("cuDeviceGetMemPool", 11020, 0, deviceGetMemPool),
    WANT("cuMemPoolCreate", 11020, 0, memPoolCreate),
    WANT("cuMemPoolDestroy", 11020, 0, memPoolDestroy),
    WANT("cuMemPoolGetAttribute", 11020, 0, memPoolGetAttribute),
    WANT("cuMemPoolSetAttribute", 11020, 0, memPoolSetAttribute),
    WANT("cuMemPoolTrimTo", 11020, 0, memPoolTrimTo),
    WANT("cuMemGetAddressRange", 3020, 0, memGetAddressRange),
    WANT("cuDeviceGetPCIBusId", 4010, 0, deviceGetPCIBusId),
};

static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static cudaError_t rt_init_error; /* why the driver is unusable, cudaSuccess if it is fine */
static int rt_device_count;
static pthread_mutex_t rt_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext rt_primary[RT_MAX_DEVICES]; /* retained once per device, for the process */

static __thread int tls_device;      /* cudaSetDevice; device 0 until then */
static __thread int tls_bound_plus1; /* device whose context is current here, plus one */
static __thread cudaError_t tls_last_error;

/* ---------------------------------------------------------------------------------------- */
/* Errors                                                                                   */

static cudaError_t map_error(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS:
        return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE:
        return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED:
        return cudaErrorInitializationError;
    case CUDA_ERROR_DEINITIALIZED:
        return cudaErrorCudartUnloading;
    case CUDA_ERROR_STUB_LIBRARY:
        return cudaErrorStubLibrary;
    case CUDA_ERROR_NO_DEVICE:
        return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE:
        return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT:
        return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_OPERATING_SYSTEM:
        return cudaErrorOperatingSystem;
    case CUDA_ERROR_INVALID_HANDLE:
        return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_FOUND:
        return cudaErrorSymbolNotFound;
    case CUDA_ERROR_NOT_READY:
        return cudaErrorNotReady;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        return cudaErrorIllegalAddress;
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return cudaErrorContextIsDestroyed;
    case CUDA_ERROR_NOT_PERMITTED:
        return cudaErrorNotPermitted;
    case CUDA_ERROR_NOT_SUPPORTED:
        return cudaErrorNotSupported;
    default:
        return cudaErrorUnknown;
    }
}

/* Every API result passes here: a failure becomes the thread's last error, success leaves it. */
static cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess)
        tls_last_error = e;
    return e;
}

static cudaError_t ret_cu(CUresult r)
{
    return ret(map_error(r));
}

static const struct {
    cudaError_t code;
    const char *name;
    const char *text;
} error_names[] = {
    { cudaSuccess, "cudaSuccess", "no error" },
    { cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument" },
    { cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory" },
    { cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error" },
    { cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down" },
    { cudaErrorStubLibrary, "cudaErrorStubLibrary", "CUDA driver is a stub library" },
    { cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
      "CUDA driver version is insufficient for CUDA runtime version" },
    { cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected" },
    { cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal" },
    { cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context" },
    { cudaErrorOperatingSystem, "cudaErrorOperatingSystem",
      "OS call failed or operation not supported on this OS" },
    { cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle" },
    { cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found" },
    { cudaErrorNotReady, "cudaErrorNotReady", "device not ready" },
    { cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
      "an illegal memory access was encountered" },
    { cudaErrorContextIsDestroyed, "cudaErrorContextIsDestroyed", "context is destroyed" },
    { cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted" },
    { cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported" },
    { cudaErrorUnknown, "cudaErrorUnknown", "unknown error" },
};

EXPORT const char *cudaGetErrorName(cudaError_t error)
{
    for (size_t i = 0; i < sizeof error_names / sizeof error_names[0]; i++)
        if (error_names[i].code == error)
            return error_names[i].name;
    return "unrecognized error code";
}

EXPORT const char *cudaGetErrorString(cudaError_t error)
{
    for (size_t i = 0; i < sizeof error_names / sizeof error_names[0]; i++)
        if (error_names[i].code == error)
            return error_names[i].text;
    return "unrecognized error code";
}

EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = tls_last_error;
    tls_last_error = cudaSuccess;
    return e;
}

EXPORT cudaError_t cudaPeekAtLastError(void)
{
    return tls_last_error;
}

/* ---------------------------------------------------------------------------------------- */
/* Finding the driver                                                                       */

/*
 * cuDNN is not emulated (docs/simgpu.md, "cuDNN"): its graph API hands back engine lists,
 * plans and workspace sizes that only the real heuristics know. So when the process is
 * PyTorch, the simulated runtime turns PyTorch's cuDNN switch off at its first CUDA call, as
 * `torch.backends.cudnn.enabled = False` would, and convolutions take PyTorch's own kernels.
 * SIMGPU_CUDNN=on leaves the switch alone. libtorch_cpu is loaded with RTLD_LOCAL, so its
 * symbols are found through its own handle; the two are at::globalContext() and
 * at::Context::setUserEnabledCuDNN(bool), stable across PyTorch 2.x.
 */
static void torch_cudnn_policy(void *libtorch_cpu)
{
    const char *v = getenv("SIMGPU_CUDNN");
    if (v && strcmp(v, "on") == 0)
        return;
    void *get = dlsym(libtorch_cpu, "_ZN2at13globalContextEv");
    void *set = dlsym(libtorch_cpu, "_ZN2at7Context19setUserEnabledCuDNNEb");
    if (get && set) {
        void *(*global_context)(void);
        void (*set_enabled)(void *, _Bool);
        memcpy(&global_context, &get, sizeof get);
        memcpy(&set_enabled, &set, sizeof set);
        set_enabled(global_context(), 0);
    }
}

/* The few functions of Python's C API the module needs, found in the process (the interpreter
 * is the program, or a library it loaded with its symbols global). */
struct python_api {
    int (*gil_held)(void);
    void *(*dict_new)(void);
    void *(*builtins)(void);
    int (*dict_set)(void *, const char *, void *);
    void *(*decode)(const char *);
    void *(*run)(const char *, int, void *, void *, void *);
    void (*decref)(void *);
    void (*print_error)(void);
};

static bool find_python(struct python_api *py)
{
    static const struct {
        const char *name;
        size_t offset;
    } want[] = {
        { "PyGILState_Check", offsetof(struct python_api, gil_held) },
        { "PyDict_New", offsetof(struct python_api, dict_new) },
        { "PyEval_GetBuiltins", offsetof(struct python_api, builtins) },
        { "PyDict_SetItemString", offsetof(struct python_api, dict_set) },
        { "PyUnicode_DecodeFSDefault", offsetof(struct python_api, decode) },
        { "PyRun_StringFlags", offsetof(struct python_api, run) },
        { "Py_DecRef", offsetof(struct python_api, decref) },
        { "PyErr_Print", offsetof(struct python_api, print_error) },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        void *sym = dlsym(RTLD_DEFAULT, want[i].name);
        if (!sym)
            return false;
        memcpy((char *)py + want[i].offset, &sym, sizeof sym);
    }
    return true;
}

/*
 * The unique operators, on the host (simgpu_torch.py says why): when the process is Python
 * with PyTorch, the simulated runtime runs simgpu_torch.py, installed beside it, at PyTorch's
 * first CUDA call. Only on a thread that already holds the interpreter's lock, which PyTorch's
 * lazy initialisation does: taking the lock here could wait on a thread that waits on us. The
 * module runs in a namespace of its own, so the program's __main__ sees nothing.
 * SIMGPU_HOST_OPS=off leaves PyTorch's own kernels (and their empty results) in place.
 */
static void torch_host_ops(void)
{
    const char *v = getenv("SIMGPU_HOST_OPS");
    if (v && strcmp(v, "off") == 0)
        return;
    struct python_api py;
    if (!find_python(&py) || !py.gil_held())
        return;

    Dl_info self;
    char path[4096];
    if (!dladdr((void *)torch_host_ops, &self) || !self.dli_fname)
        return;
    const char *slash = strrchr(self.dli_fname, '/');
    size_t dir = slash ? (size_t)(slash - self.dli_fname) : 0;
    if (dir + sizeof "/simgpu_torch.py" > sizeof path)
        return;
    memcpy(path, self.dli_fname, dir);
    memcpy(path + dir, slash ? "/simgpu_torch.py" : "simgpu_torch.py", sizeof "/simgpu_torch.py");

    void *ns = py.dict_new();
    void *p = ns ? py.decode(path) : NULL;
    if (p && py.dict_set(ns, "__builtins__", py.builtins()) == 0 &&
        py.dict_set(ns, "path", p) == 0) {
        static const char code[] =
            "import importlib.util, os, sys\n"
            "if os.path.isfile(path) and '_simgpu_torch' not in sys.modules:\n"
            "    spec = importlib.util.spec_from_file_location('_simgpu_torch', path)\n"
            "    module = importlib.util.module_from_spec(spec)\n"
            "    spec.loader.exec_module(module)\n"
            "    sys.modules['_simgpu_torch'] = module\n";
        void *r = py.run(code, 257 /* Py_file_input */, ns, ns, NULL);
        if (r)
            py.decref(r);
        else
            py.print_error();
    }
    if (p)
        py.decref(p);
    if (ns)
        py.decref(ns);
}

/* What the simulated card changes in PyTorch, once its library is loaded (libtorch_cpu is loaded
 * with RTLD_LOCAL, so it is looked for by name): cuDNN off, the unique operators on the host. */
static void torch_policies(void)
{
    void *h = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return;
    torch_cudnn_policy(h);
    torch_host_ops();
    dlclose(h);
}

static void rt_load(void)
{
    PFN_cuGetProcAddress_v12000 lookup;
    CUdriverProcAddressQueryResult status;
    void *fn = NULL;
    CUresult r;

    /* SIMGPU_LIBCUDA exists for tests that need "no driver" on a machine that has one. */
    const char *path = getenv("SIMGPU_LIBCUDA");
    void *h = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        rt_init_error = cudaErrorInsufficientDriver;
        return;
    }
    void *sym = dlsym(h, "cuGetProcAddress_v2");
    if (!sym) {
        rt_init_error = cudaErrorInsufficientDriver;
        return;
    }
    memcpy(&lookup, &sym, sizeof lookup);
    sym = dlsym(h, "simgpu_copy");
    memcpy(&drv_copy, &sym, sizeof sym);
    sym = dlsym(h, "simgpu_kernel_launched");
    memcpy(&drv_launched, &sym, sizeof sym);

    /* The probe (empty name, version 0, as the real runtime sends it): a working driver says
     * "not found"; the toolkit's stub says 34 to everything. */
    r = lookup("", &fn, 0, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (r == CUDA_ERROR_STUB_LIBRARY) {
        rt_init_error = cudaErrorStubLibrary;
        return;
    }
    /* The real runtime asks for both entry points and works through the newer one. */
    (void)lookup("cuGetProcAddress", &fn, 11030, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    r = lookup("cuGetProcAddress", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (r != CUDA_SUCCESS || !fn) {
        rt_init_error = cudaErrorInsufficientDriver;
        return;
    }
    memcpy(&drv.getProcAddress, &fn, sizeof fn);

    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        cuuint64_t flags = wanted[i].ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                          : CU_GET_PROC_ADDRESS_DEFAULT;
        fn = NULL;
        r = drv.getProcAddress(wanted[i].name, &fn, wanted[i].version, flags, &status);
        if (r != CUDA_SUCCESS || !fn) {
            rt_init_error = r == CUDA_ERROR_STUB_LIBRARY ? cudaErrorStubLibrary
                                                         : cudaErrorInsufficientDriver;
            return;
        }
        memcpy((char *)&drv + wanted[i].offset, &fn, sizeof fn);
    }

    int version = 0;
    if (drv.driverGetVersion(&version) != CUDA_SUCCESS || version < RT_VERSION) {
        rt_init_error = cudaErrorInsufficientDriver;
        return;
    }
    r = drv.init(0);
    if (r == CUDA_SUCCESS)
        r = drv.deviceGetCount(&rt_device_count);
    if (r == CUDA_SUCCESS)
        torch_policies();
    if (r == CUDA_SUCCESS && rt_device_count > RT_MAX_DEVICES)
        rt_device_count = RT_MAX_DEVICES;
    rt_init_error = map_error(r);
}

/* The driver, loaded and initialised; nothing about contexts. */
static cudaError_t need_driver(void)
{
    pthread_once(&rt_once, rt_load);
    return rt_init_error;
}

static cudaError_t bind_device(int dev)
{
    CUcontext ctx;
    CUresult r = CUDA_SUCCESS;

    pthread_mutex_lock(&rt_lock);
    if (!rt_primary[dev]) {
        r = drv.primaryCtxRetain(&ctx, dev);
        if (r == CUDA_SUCCESS)
            rt_primary[dev] = ctx;
    }
    ctx = rt_primary[dev];
    pthread_mutex_unlock(&rt_lock);
    if (r == CUDA_SUCCESS)
        r = drv.ctxSetCurrent(ctx);
    if (r != CUDA_SUCCESS)
        return map_error(r);
    tls_device = dev;
    tls_bound_plus1 = dev + 1;
    return cudaSuccess;
}

/* The driver plus this thread's device context, created on first use as the real runtime does. */
static cudaError_t need_context(void)
{
    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return e;
    if (tls_bound_plus1 == tls_device + 1)
        return cudaSuccess;
    return bind_device(tls_device);
}

/* ---------------------------------------------------------------------------------------- */
/* Versions and devices                                                                     */

EXPORT cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return ret(cudaErrorInvalidValue);
    *runtimeVersion = RT_VERSION;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return ret(cudaErrorInvalidValue);
    /* No usable driver reads as version 0, not as an error. */
    if (need_driver() != cudaSuccess || drv.driverGetVersion(driverVersion) != CUDA_SUCCESS)
        *driverVersion = 0;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return ret(e);
    if (!count)
        return ret(cudaErrorInvalidValue);
    *count = rt_device_count;
    return cudaSuccess;
}

EXPORT cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return ret(e);
    if (device < 0 || device >= rt_device_count)
        return ret(cudaErrorInvalidDevice);
    return ret(bind_device(device));
}

EXPORT cudaError_t cudaGetDevice(int *device)
{
    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return ret(e);
    if (!device)
        return ret(cudaErrorInvalidValue);
    *device = tls_device;
    /* A new thread asking first (PyTorch's autograd threads do, and then skip cudaSetDevice
     * when the answer is already their device) gets the device's primary context made current
     * if the process has one, so later driver calls on this thread find a context, as they do
     * on a real card; no context is created here. */
    if (tls_bound_plus1 != tls_device + 1) {
        pthread_mutex_lock(&rt_lock);
        CUcontext ctx = rt_primary[tls_device];
        pthread_mutex_unlock(&rt_lock);
        if (ctx && drv.ctxSetCurrent(ctx) == CUDA_SUCCESS)
            tls_bound_plus1 = tls_device + 1;
    }
    return cudaSuccess;
}

static int attr(CUdevice dev, CUdevice_attribute a)
{
    int v = 0;
    if (drv.deviceGetAttribute(&v, a, dev) != CUDA_SUCCESS)
        return 0;
    return v;
}

/* What every query of a device starts with, in the real runtime's order: the driver loaded,
 * the caller's arguments (args_ok false: cudaErrorInvalidValue), the driver's handle of runtime
 * device `device`. An error is already recorded as the thread's last. */
static cudaError_t device_handle(int device, bool args_ok, CUdevice *d)
{
    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return ret(e);
    if (!args_ok)
        return ret(cudaErrorInvalidValue);
    return ret_cu(drv.deviceGet(d, device));
}

EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    CUdevice d;
    CUresult r;
    size_t total = 0;
    CUuuid uuid;

    cudaError_t e = device_handle(device, prop != NULL, &d);
    if (e != cudaSuccess)
        return e;
    memset(prop, 0, sizeof *prop);
    if ((r = drv.deviceGetName(prop->name, (int)sizeof prop->name, d)) != CUDA_SUCCESS ||
        (r = drv.deviceTotalMem(&total, d)) != CUDA_SUCCESS ||
        (r = drv.deviceGetUuid(&uuid, d)) != CUDA_SUCCESS)
        return ret_cu(r);
    memcpy(&prop->uuid, &uuid, sizeof prop->uuid);
    prop->totalGlobalMem = total;
    prop->sharedMemPerBlock = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    prop->regsPerBlock = attr(d, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    prop->warpSize = attr(d, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    prop->memPitch = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_MAX_PITCH);
    prop->maxThreadsPerBlock = attr(d, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    prop->maxThreadsDim[0] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
    prop->maxThreadsDim[1] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
    prop->maxThreadsDim[2] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
    prop->maxGridSize[0] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
    prop->maxGridSize[1] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
    prop->maxGridSize[2] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
    prop->totalConstMem = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
    prop->major = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    prop->minor = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    prop->textureAlignment = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
    prop->texturePitchAlignment = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT);
    prop->multiProcessorCount = attr(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    prop->integrated = attr(d, CU_DEVICE_ATTRIBUTE_INTEGRATED);
    prop->canMapHostMemory = attr(d, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
    prop->surfaceAlignment = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT);
    prop->concurrentKernels = attr(d, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS);
    prop->ECCEnabled = attr(d, CU_DEVICE_ATTRIBUTE_ECC_ENABLED);
    prop->pciBusID = attr(d, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
    prop->pciDeviceID = attr(d, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
    prop->pciDomainID = attr(d, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
    prop->tccDriver = attr(d, CU_DEVICE_ATTRIBUTE_TCC_DRIVER);
    prop->asyncEngineCount = attr(d, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
    prop->unifiedAddressing = attr(d, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
    prop->memoryBusWidth = attr(d, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    prop->l2CacheSize = attr(d, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    prop->persistingL2CacheMaxSize = attr(d, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE);
    prop->maxThreadsPerMultiProcessor = attr(d, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    prop->streamPrioritiesSupported = attr(d, CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED);
    prop->globalL1CacheSupported = attr(d, CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED);
    prop->localL1CacheSupported = attr(d, CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED);
    prop->sharedMemPerMultiprocessor =
            (size_t)attr(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    prop->regsPerMultiprocessor = attr(d, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    prop->managedMemory = attr(d, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
    prop->isMultiGpuBoard = attr(d, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD);
    prop->multiGpuBoardGroupID = attr(d, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID);
    prop->concurrentManagedAccess = attr(d, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
    prop->computePreemptionSupported = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED);
    prop->cooperativeLaunch = attr(d, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH);
    prop->sharedMemPerBlockOptin =
            (size_t)attr(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    prop->maxBlocksPerMultiProcessor = attr(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
    prop->accessPolicyMaxWindowSize = attr(d, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE);
    prop->reservedSharedMemPerBlock =
            (size_t)attr(d, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
    prop->hostRegisterSupported = attr(d, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
    prop->memoryPoolsSupported = attr(d, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
    prop->clusterLaunch = attr(d, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH);
    return cudaSuccess;
}

/* ---------------------------------------------------------------------------------------- */
/* Memory                                                                                   */

static CUdeviceptr dptr_of(const void *p)
{
    return (CUdeviceptr)(uintptr_t)p;
}

EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    CUdeviceptr d;
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (!devPtr)
        return ret(cudaErrorInvalidValue);
    if (size == 0) {
        *devPtr = NULL; /* as the real runtime: success, and no driver call */
        return cudaSuccess;
    }
    CUresult r = drv.memAlloc(&d, size);
    if (r != CUDA_SUCCESS)
        return ret_cu(r);
    *devPtr = (void *)(uintptr_t)d;
    return cudaSuccess;
}

EXPORT cudaError_t cudaFree(void *devPtr)
{
    /* cudaFree(NULL) is the customary way to create the context: it must do that. */
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (!devPtr)
        return cudaSuccess;
    return ret_cu(drv.memFree(dptr_of(devPtr)));
}

EXPORT cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    CUdeviceptr d;
    size_t p;
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (!devPtr || !pitch)
        return ret(cudaErrorInvalidValue);
    if (width == 0 || height == 0) {
        *devPtr = NULL;
        *pitch = 0;
        return cudaSuccess;
    }
    CUresult r = drv.memAllocPitch(&d, &p, width, height, 16);
    if (r != CUDA_SUCCESS)
        return ret_cu(r);
    *devPtr = (void *)(uintptr_t)d;
    *pitch = p;
    return cudaSuccess;
}

EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent)
{
    CUdeviceptr d = 0;
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (!pitchedDevPtr)
        return ret(cudaErrorInvalidValue);
    if (extent.width > SIZE_MAX - (RT_PITCH - 1))
        return ret(cudaErrorMemoryAllocation);
    size_t pitch = (extent.width + RT_PITCH - 1) / RT_PITCH * RT_PITCH;
    size_t rows = extent.height * extent.depth;
    if (extent.depth && rows / extent.depth != extent.height)
        return ret(cudaErrorMemoryAllocation);
    if (rows && pitch > SIZE_MAX / rows)
        return ret(cudaErrorMemoryAllocation);
    if (pitch * rows > 0) {
        CUresult r = drv.memAlloc(&d, pitch * rows);
        if (r != CUDA_SUCCESS)
            return ret_cu(r);
    }
    pitchedDevPtr->ptr = (void *)(uintptr_t)d;
    pitchedDevPtr->pitch = pitch;
    pitchedDevPtr->xsize = extent.width;
    pitchedDevPtr->ysize = extent.height;
    return cudaSuccess;
}

EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    CUdeviceptr d;
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (!devPtr)
        return ret(cudaErrorInvalidValue);
    CUresult r = drv.memAllocManaged(&d, size, flags);
    if (r != CUDA_SUCCESS)
        return ret_cu(r);
    *devPtr = (void *)(uintptr_t)d;
    return cudaSuccess;
}

EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (ptr && size == 0) {
        *ptr = NULL; /* like cudaMalloc: the driver is not asked */
        return cudaSuccess;
    }
    /* The real runtime never resolves cuMemAllocHost: pinned memory goes through cuMemHostAlloc. */
    return ret_cu(drv.memHostAlloc(ptr, size, 0));
}

EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (pHost && size == 0) {
        *pHost = NULL;
        return cudaSuccess;
    }
    /* cudaHostAlloc* flags have the values of CU_MEMHOSTALLOC_*. */
    return ret_cu(drv.memHostAlloc(pHost, size, flags));
}

EXPORT cudaError_t cudaFreeHost(void *ptr)
{
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (!ptr)
        return cudaSuccess;
    return ret_cu(drv.memFreeHost(ptr));
}

EXPORT cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    return ret_cu(drv.memGetInfo(free, total));
}

EXPORT cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    return ret_cu(drv.memsetD8(dptr_of(devPtr), (unsigned char)value, count));
}

/* ---------------------------------------------------------------------------------------- */
/* Synchronisation                                                                          */

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    return ret_cu(drv.ctxSynchronize(NULL));
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    return ret_cu(drv.streamSynchronize((CUstream)stream));
}

EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    return ret_cu(drv.streamSynchronize_ptsz((CUstream)stream));
}

/* ---------------------------------------------------------------------------------------- */
/* Stream-ordered allocation                                                                */

static cudaError_t malloc_async(void **devPtr, size_t size, cudaStream_t stream, int ptsz)
{
    CUdeviceptr d;
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (!devPtr)
        return ret(cudaErrorInvalidValue);
    if (size == 0) {
        *devPtr = NULL; /* same convention as cudaMalloc */
        return cudaSuccess;
    }
    CUresult r = ptsz ? drv.memAllocAsync_ptsz(&d, size, (CUstream)stream)
                      : drv.memAllocAsync(&d, size, (CUstream)stream);
    if (r != CUDA_SUCCESS)
        return ret_cu(r);
    *devPtr = (void *)(uintptr_t)d;
    return cudaSuccess;
}

EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(devPtr, size, hStream, 0);
}

EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(devPtr, size, hStream, 1);
}

static cudaError_t malloc_from_pool(void **ptr, size_t size, cudaMemPool_t pool,
                                    cudaStream_t stream, int ptsz)
{
    CUdeviceptr d;
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (!ptr)
        return ret(cudaErrorInvalidValue);
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    CUresult r =
            ptsz ? drv.memAllocFromPoolAsync_ptsz(&d, size, (CUmemoryPool)pool, (CUstream)stream)
                 : drv.memAllocFromPoolAsync(&d, size, (CUmemoryPool)pool, (CUstream)stream);
    if (r != CUDA_SUCCESS)
        return ret_cu(r);
    *ptr = (void *)(uintptr_t)d;
    return cudaSuccess;
}

EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                           cudaStream_t stream)
{
    return malloc_from_pool(ptr, size, memPool, stream, 0);
}

EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                cudaStream_t stream)
{
    return malloc_from_pool(ptr, size, memPool, stream, 1);
}

static cudaError_t free_async(void *devPtr, cudaStream_t stream, int ptsz)
{
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (!devPtr)
        return cudaSuccess;
    CUresult r = ptsz ? drv.memFreeAsync_ptsz(dptr_of(devPtr), (CUstream)stream)
                      : drv.memFreeAsync(dptr_of(devPtr), (CUstream)stream);
    return ret_cu(r);
}

EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return free_async(devPtr, hStream, 0);
}

EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    return free_async(devPtr, hStream, 1);
}

static cudaError_t device_pool(cudaMemPool_t *memPool, int device, int want_default)
{
    CUdevice d;
    CUresult r;
    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return ret(e);
    if (!memPool)
        return ret(cudaErrorInvalidValue);
    if ((r = drv.deviceGet(&d, device)) != CUDA_SUCCESS)
        return ret_cu(r);
    CUmemoryPool p;
    r = want_default ? drv.deviceGetDefaultMemPool(&p, d) : drv.deviceGetMemPool(&p, d);
    if (r != CUDA_SUCCESS)
        return ret_cu(r);
    *memPool = (cudaMemPool_t)p;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    return device_pool(memPool, device, 1);
}

EXPORT cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
    return device_pool(memPool, device, 0);
}

EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool,
                                     const struct cudaMemPoolProps *poolProps)
{
    CUmemPoolProps props;
    CUmemoryPool p;
    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return ret(e);
    if (!memPool || !poolProps)
        return ret(cudaErrorInvalidValue);
    /* Field by field: the two structs match today, but nothing promises it. */
    memset(&props, 0, sizeof props);
    props.allocType = (CUmemAllocationType)poolProps->allocType;
    props.handleTypes = (CUmemAllocationHandleType)poolProps->handleTypes;
    props.location.type = (CUmemLocationType)poolProps->location.type;
    props.location.id = poolProps->location.id;
    props.win32SecurityAttributes = poolProps->win32SecurityAttributes;
    props.maxSize = poolProps->maxSize;
    props.usage = poolProps->usage;
    CUresult r = drv.memPoolCreate(&p, &props);
    if (r != CUDA_SUCCESS)
        return ret_cu(r);
    *memPool = (cudaMemPool_t)p;
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool)
{
    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return ret(e);
    return ret_cu(drv.memPoolDestroy((CUmemoryPool)memPool));
}

/* cudaMemPoolAttr and CUmemPool_attribute share their values. */
EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                           void *value)
{
    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return ret(e);
    return ret_cu(drv.memPoolGetAttribute((CUmemoryPool)memPool, (CUmemPool_attribute)attr, value));
}

EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                           void *value)
{
    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return ret(e);
    return ret_cu(drv.memPoolSetAttribute((CUmemoryPool)memPool, (CUmemPool_attribute)attr, value));
}

EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return ret(e);
    return ret_cu(drv.memPoolTrimTo((CUmemoryPool)memPool, minBytesToKeep));
}

/* ---------------------------------------------------------------------------------------- */
/* What a framework's step calls besides allocations: attributes, copies, sets              */

EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr a, int device)
{
    CUdevice d;
    cudaError_t e = device_handle(device, value != NULL, &d);
    if (e != cudaSuccess)
        return e;
    /* The runtime's attribute numbers are the driver's. */
    return ret_cu(drv.deviceGetAttribute(value, (CUdevice_attribute)a, d));
}

EXPORT cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    CUdevice d;
    cudaError_t e = device_handle(device, true, &d);
    if (e != cudaSuccess)
        return e;
    return ret_cu(drv.deviceGetPCIBusId(pciBusId, len, d));
}

/* A copy as the simulated card does it: every simulated device range is host memory reserved
 * on demand (tools/simgpu/driver.c), so a copy moves the bytes whichever way it goes, and what
 * comes out of device memory follows the driver's read-back rule (readback.c): bytes the host
 * wrote since the last launch as they are, zeros for what a kernel would have computed. */
static cudaError_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (n == 0)
        return cudaSuccess;
    if (!dst || !src || (unsigned)kind > cudaMemcpyDefault)
        return ret(cudaErrorInvalidValue);
    if (drv_copy)
        drv_copy(dst, src, n);
    else if (dst != src)
        memmove(dst, src, n);
    return cudaSuccess;
}

void rt_kernel_launched(void)
{
    pthread_once(&rt_once, rt_load);
    if (drv_launched)
        drv_launched();
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy(dst, src, count, kind);
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                   enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)stream;
    return copy(dst, src, count, kind);
}

EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind,
                                     cudaStream_t stream)
{
    (void)stream;
    if (width > dpitch || width > spitch)
        return ret(cudaErrorInvalidPitchValue);
    for (size_t row = 0; row < height; row++) {
        cudaError_t e = copy((char *)dst + row * dpitch, (const char *)src + row * spitch, width,
                             kind);
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                       size_t count, cudaStream_t stream)
{
    (void)dstDevice;
    (void)srcDevice;
    (void)stream;
    return copy(dst, src, count, cudaMemcpyDeviceToDevice);
}

EXPORT cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    (void)stream;
    return cudaMemset(devPtr, value, count);
}

EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
                                            const void *ptr)
{
    cudaError_t e = need_context();
    if (e != cudaSuccess)
        return ret(e);
    if (!attributes)
        return ret(cudaErrorInvalidValue);
    memset(attributes, 0, sizeof *attributes);
    if (ptr && drv.memGetAddressRange(NULL, NULL, dptr_of(ptr)) == CUDA_SUCCESS) {
        attributes->type = cudaMemoryTypeDevice;
        attributes->device = tls_device;
        attributes->devicePointer = (void *)ptr;
    } else {
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = -2;
        attributes->hostPointer = (void *)ptr;
    }
    return cudaSuccess;
}

/* ---------------------------------------------------------------------------------------- */
/* Driver entry points                                                                      */

static cudaError_t entry_point(const char *symbol, void **funcPtr, unsigned int version,
                               unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *driverStatus, int ptsz_default)
{
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    cuuint64_t cuflags;

    cudaError_t e = need_driver();
    if (e != cudaSuccess)
        return ret(e);
    if (!symbol || !funcPtr || version > INT_MAX)
        return ret(cudaErrorInvalidValue);
    switch (flags) {
    case cudaEnableDefault:
        /* The _ptsz entry point is what per-thread-default-stream builds call. */
        cuflags = ptsz_default ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                               : CU_GET_PROC_ADDRESS_DEFAULT;
        break;
    case cudaEnableLegacyStream:
        cuflags = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        break;
    case cudaEnablePerThreadDefaultStream:
        cuflags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        break;
    default:
        return ret(cudaErrorInvalidValue);
    }
    CUresult r = drv.getProcAddress(symbol, funcPtr, (int)version, cuflags, &status);
    if (driverStatus) {
        *driverStatus = status == CU_GET_PROC_ADDRESS_SUCCESS ? cudaDriverEntryPointSuccess
                        : status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                ? cudaDriverEntryPointVersionNotSufficent
                                : cudaDriverEntryPointSymbolNotFound;
    }
    /* A symbol the driver lacks is not an error of this call: NULL and the status say it. */
    if (r == CUDA_ERROR_NOT_FOUND) {
        *funcPtr = NULL;
        return cudaSuccess;
    }
    return ret_cu(r);
}

EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
                                           unsigned long long flags,
                                           enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, RT_VERSION, flags, driverStatus, 0);
}

EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                                unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, RT_VERSION, flags, driverStatus, 1);
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion(
        const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
        enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, 0);
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
        const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
        enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, 1);
}
