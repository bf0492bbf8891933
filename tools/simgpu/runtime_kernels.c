/* runtime_kernels.c: the part of the simulated libcudart.so.13 that compiled CUDA code and a
 * framework's step call besides memory: kernel registration (run from constructors when a
 * library with device code loads), launches, streams, events and function attributes.
 *
 * Nothing runs on a device, so launches succeed and do nothing; what must be real is every
 * value a caller reads back and relies on (a non-NULL handle, a launch configuration handed
 * from push to pop, an occupancy that is never 0, a callback that is called). */

/* These functions are another library's API, declared in NVIDIA's headers, which the build does
 * not need: no prototype of ours to check them against. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define EXPORT __attribute__((visibility("default")))

/* ---------------------------------------------------------------------------------------- */
/* Registration: one handle for every fat binary, nothing kept                              */

static void *fatbin_handle;

EXPORT void **__cudaRegisterFatBinary(void *fatCubin)
{
    (void)fatCubin;
    return &fatbin_handle;
}

EXPORT void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    (void)fatCubinHandle;
}

EXPORT void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
    (void)fatCubinHandle;
}

EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                   const char *deviceName, int thread_limit, uint3 *tid,
                                   uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)fatCubinHandle, (void)hostFun, (void)deviceFun, (void)deviceName, (void)thread_limit;
    (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}

EXPORT void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant,
                              int global)
{
    (void)fatCubinHandle, (void)hostVar, (void)deviceAddress, (void)deviceName, (void)ext;
    (void)size, (void)constant, (void)global;
}

EXPORT char __cudaInitModule(void **fatCubinHandle)
{
    (void)fatCubinHandle;
    return 1;
}

/* ---------------------------------------------------------------------------------------- */
/* Launches: `kernel<<<g, b, s, st>>>(…)` pushes the configuration, the generated stub pops  */
/* it and calls cudaLaunchKernel with it                                                    */

static __thread struct {
    dim3 grid, block;
    size_t shared;
    void *stream;
} tls_config;

EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                            void *stream)
{
    tls_config.grid = gridDim;
    tls_config.block = blockDim;
    tls_config.shared = sharedMem;
    tls_config.stream = stream;
    return 0;
}

EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                              void *stream)
{
    if (gridDim)
        *gridDim = tls_config.grid;
    if (blockDim)
        *blockDim = tls_config.block;
    if (sharedMem)
        *sharedMem = tls_config.shared;
    if (stream)
        *(void **)stream = tls_config.stream;
    return cudaSuccess;
}

EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *funcAddr)
{
    if (!kernel)
        return cudaErrorInvalidValue;
    *kernel = (cudaKernel_t)(uintptr_t)funcAddr;
    return cudaSuccess;
}

/* Every way to launch: nothing runs, and what the kernel would have written reads back as zeros
 * from now on (readback.c). nvcc 13's generated stubs call __cudaLaunchKernel; older code and
 * libraries call the public forms. */
EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream)
{
    (void)func, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
    rt_kernel_launched();
    return cudaSuccess;
}

EXPORT cudaError_t __cudaLaunchKernel(const void *kernel, dim3 gridDim, dim3 blockDim,
                                      void **args, size_t sharedMem, cudaStream_t stream)
{
    return cudaLaunchKernel(kernel, gridDim, blockDim, args, sharedMem, stream);
}

EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim,
                                               void **args, size_t sharedMem, cudaStream_t stream)
{
    return cudaLaunchKernel(func, gridDim, blockDim, args, sharedMem, stream);
}

EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
                                       void **args)
{
    (void)config, (void)func, (void)args;
    rt_kernel_launched();
    return cudaSuccess;
}

EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    (void)graphExec, (void)stream;
    rt_kernel_launched();
    return cudaSuccess;
}

EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    (void)stream;
    /* The stream has no pending work: the host function's turn is now. */
    if (fn)
        fn(userData);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                         void *userData, unsigned int flags)
{
    (void)flags;
    if (callback)
        callback(stream, cudaSuccess, userData);
    return cudaSuccess;
}

EXPORT cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    (void)func;
    if (!attr)
        return cudaErrorInvalidValue;
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = 1024;
    attr->numRegs = 32;
    attr->ptxVersion = 80;
    attr->binaryVersion = 80;
    attr->maxDynamicSharedSizeBytes = 48 * 1024;
    return cudaSuccess;
}

/* Callers divide by this and size grids with it: never 0. */
static int blocks_per_sm(int blockSize)
{
    int n = blockSize > 0 ? 2048 / blockSize : 1;
    return n > 32 ? 32 : n < 1 ? 1 : n;
}

EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func,
                                                                 int blockSize,
                                                                 size_t dynamicSMemSize)
{
    (void)func, (void)dynamicSMemSize;
    if (!numBlocks)
        return cudaErrorInvalidValue;
    *numBlocks = blocks_per_sm(blockSize);
    return cudaSuccess;
}

EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize,
        unsigned int flags)
{
    (void)flags;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks, func, blockSize,
                                                         dynamicSMemSize);
}

EXPORT cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
    if (!devPtr)
        return cudaErrorInvalidValue;
    *devPtr = (void *)symbol;
    return cudaSuccess;
}

/* ---------------------------------------------------------------------------------------- */
/* Streams and events: distinct non-NULL handles, always complete                           */

struct sim_handle {
    int priority;
    unsigned flags;
};

static void *new_handle(int priority, unsigned flags)
{
    struct sim_handle *h = calloc(1, sizeof *h);
    if (h) {
        h->priority = priority;
        h->flags = flags;
    }
    return h;
}

EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
                                                int priority)
{
    if (!pStream)
        return cudaErrorInvalidValue;
    *pStream = new_handle(priority, flags);
    return *pStream ? cudaSuccess : cudaErrorMemoryAllocation;
}

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    return cudaStreamCreateWithPriority(pStream, flags, 0);
}

EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    return cudaStreamCreateWithPriority(pStream, 0, 0);
}

/* The legacy and per-thread default streams are the constants 0, 1 and 2, never ours. */
static int is_ours(const void *h)
{
    return (uintptr_t)h > 2;
}

EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (is_ours(stream))
        free(stream);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
    if (!priority)
        return cudaErrorInvalidValue;
    *priority = is_ours(hStream) ? ((struct sim_handle *)hStream)->priority : 0;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    /* The range current cards report. */
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    (void)stream;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    (void)stream, (void)event, (void)flags;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                         enum cudaStreamCaptureStatus *pCaptureStatus)
{
    (void)stream;
    if (!pCaptureStatus)
        return cudaErrorInvalidValue;
    *pCaptureStatus = cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                            enum cudaStreamCaptureStatus *captureStatus_out,
                                            unsigned long long *id_out, cudaGraph_t *graph_out,
                                            const cudaGraphNode_t **dependencies_out,
                                            const cudaGraphEdgeData **edgeData_out,
                                            size_t *numDependencies_out)
{
    (void)stream;
    if (captureStatus_out)
        *captureStatus_out = cudaStreamCaptureStatusNone;
    if (id_out)
        *id_out = 0;
    if (graph_out)
        *graph_out = NULL;
    if (dependencies_out)
        *dependencies_out = NULL;
    if (edgeData_out)
        *edgeData_out = NULL;
    if (numDependencies_out)
        *numDependencies_out = 0;
    return cudaSuccess;
}

EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    static __thread enum cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
    if (!mode)
        return cudaErrorInvalidValue;
    enum cudaStreamCaptureMode old = current;
    current = *mode;
    *mode = old;
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    if (!event)
        return cudaErrorInvalidValue;
    *event = new_handle(0, flags);
    return *event ? cudaSuccess : cudaErrorMemoryAllocation;
}

EXPORT cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, 0);
}

EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    if (is_ours(event))
        free(event);
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    (void)event, (void)stream;
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                            unsigned int flags)
{
    (void)event, (void)stream, (void)flags;
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventQuery(cudaEvent_t event)
{
    (void)event;
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    (void)event;
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    (void)start, (void)end;
    if (!ms)
        return cudaErrorInvalidValue;
    *ms = 0.0f;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    if (!canAccessPeer)
        return cudaErrorInvalidValue;
    *canAccessPeer = device != peerDevice;
    return cudaSuccess;
}

EXPORT cudaError_t cudaUserObjectCreate(cudaUserObject_t *object_out, void *ptr,
                                        cudaHostFn_t destroy, unsigned int initialRefcount,
                                        unsigned int flags)
{
    (void)initialRefcount, (void)flags;
    if (!object_out)
        return cudaErrorInvalidValue;
    /* Never retained by a graph here: the object is destroyed by its last release at once. */
    *object_out = (cudaUserObject_t)new_handle(0, 0);
    if (destroy)
        destroy(ptr);
    return *object_out ? cudaSuccess : cudaErrorMemoryAllocation;
}

EXPORT cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *code,
                                       enum cudaJitOption *jitOptions, void **jitOptionsValues,
                                       unsigned int numJitOptions,
                                       enum cudaLibraryOption *libraryOptions,
                                       void **libraryOptionValues, unsigned int numLibraryOptions)
{
    (void)code, (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
    if (!library)
        return cudaErrorInvalidValue;
    *library = (cudaLibrary_t)new_handle(0, 0);
    return *library ? cudaSuccess : cudaErrorMemoryAllocation;
}

EXPORT cudaError_t cudaLibraryGetKernel(cudaKernel_t *pKernel, cudaLibrary_t library,
                                        const char *name)
{
    (void)name;
    if (!pKernel)
        return cudaErrorInvalidValue;
    *pKernel = (cudaKernel_t)library;
    return cudaSuccess;
}
