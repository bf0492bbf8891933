/* Exported shims of the CUDA runtime (libcudart) functions listed in hooks.def.
 *
 * Each shim forwards to the real function and turns the outcome into a core record; the
 * application's return value and out-parameters are never changed. */
#include <dlfcn.h>

#include "shim.h"

/* No real function anywhere (our exported name was found, but no CUDA runtime is loaded). */
#define RT_MISSING cudaErrorSymbolNotFound
#define PTR_KEY(p) ((uint64_t)(uintptr_t)(p))

#define RT_ALLOC(name, kind, params, args, key, size) \
    VW_SHIM_ALLOC(cudaError_t, cudaSuccess, RT_MISSING, true, name, kind, params, args, key, size)
#define RT_FREE(name, kind, params, args, ptr) \
    VW_SHIM_FREE(cudaError_t, cudaSuccess, RT_MISSING, name, kind, params, args, PTR_KEY(ptr))

RT_ALLOC(cudaMalloc, CORE_DEVICE, (void **devPtr, size_t size), (devPtr, size), PTR_KEY(*devPtr),
         size)
RT_ALLOC(cudaMallocAsync, CORE_POOL, (void **devPtr, size_t size, cudaStream_t stream),
         (devPtr, size, stream), PTR_KEY(*devPtr), size)
RT_ALLOC(cudaMallocAsync_ptsz, CORE_POOL, (void **devPtr, size_t size, cudaStream_t stream),
         (devPtr, size, stream), PTR_KEY(*devPtr), size)
RT_ALLOC(cudaMallocManaged, CORE_MANAGED, (void **devPtr, size_t size, unsigned int flags),
         (devPtr, size, flags), PTR_KEY(*devPtr), size)
RT_ALLOC(cudaMallocHost, CORE_HOST, (void **ptr, size_t size), (ptr, size), PTR_KEY(*ptr), size)
RT_ALLOC(cudaHostAlloc, CORE_HOST, (void **pHost, size_t size, unsigned int flags),
         (pHost, size, flags), PTR_KEY(*pHost), size)
/* Pitched memory occupies pitch x height; a failed request is counted at width x height. */
RT_ALLOC(cudaMallocPitch, CORE_DEVICE, (void **devPtr, size_t *pitch, size_t width, size_t height),
         (devPtr, pitch, width, height), PTR_KEY(*devPtr),
         ok &&pitch ? *pitch *height : width *height)
RT_ALLOC(cudaMalloc3D, CORE_DEVICE,
         (struct cudaPitchedPtr * pitchedDevPtr, struct cudaExtent extent), (pitchedDevPtr, extent),
         PTR_KEY(pitchedDevPtr->ptr),
         ok ? pitchedDevPtr->pitch *extent.height *extent.depth
            : extent.width *extent.height *extent.depth)

#define RT_POOL_ALLOC(name)                                                                     \
    VW_SHIM_POOL_ALLOC(cudaError_t, cudaSuccess, RT_MISSING, true, name, void *, cudaMemPool_t, \
                       cudaStream_t)
RT_POOL_ALLOC(cudaMallocFromPoolAsync)
RT_POOL_ALLOC(cudaMallocFromPoolAsync_ptsz)

RT_FREE(cudaFree, CORE_DEVICE, (void *devPtr), (devPtr), devPtr)
RT_FREE(cudaFreeAsync, CORE_POOL, (void *devPtr, cudaStream_t stream), (devPtr, stream), devPtr)
RT_FREE(cudaFreeAsync_ptsz, CORE_POOL, (void *devPtr, cudaStream_t stream), (devPtr, stream),
        devPtr)
RT_FREE(cudaFreeHost, CORE_HOST, (void *ptr), (ptr), ptr)

/* ---- queries: under VRAMWATCH_LIMIT they describe the emulated card ---- */

VW_EXPORT cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    __typeof__(resolve_real.cudaMemGetInfo) real = VW_REAL(cudaMemGetInfo);
    if (VW_UNLIKELY(!real))
        return RT_MISSING;
    cudaError_t r = real(free, total);
    if (r == cudaSuccess && interpose_active() && VW_UNLIKELY(limit_any))
        VW_KEEP_ERRNO(limit_meminfo(driver_current_device(), free, total));
    return r;
}

/* totalGlobalMem is read by name: the field sits at the same offset in the CUDA 12 and 13
 * structures, whatever their sizes. */
#define RT_PROPS(name)                                                                    \
    VW_EXPORT cudaError_t name(struct cudaDeviceProp *prop, int device)                   \
    {                                                                                     \
        __typeof__(resolve_real.name) real = VW_REAL(name);                               \
        if (VW_UNLIKELY(!real))                                                           \
            return RT_MISSING;                                                            \
        cudaError_t r = real(prop, device);                                               \
        if (r == cudaSuccess && prop && interpose_active() && VW_UNLIKELY(limit_any))     \
            VW_KEEP_ERRNO(if (limit_of(device)) prop->totalGlobalMem = limit_of(device)); \
        return r;                                                                         \
    }
RT_PROPS(cudaGetDeviceProperties)
RT_PROPS(cudaGetDeviceProperties_v2)

/* ---- lookups of driver functions through the runtime ---- */

/* cudaGetDriverEntryPoint searches at the runtime's own version; ask the runtime once. */
static int runtime_version(void)
{
    static int v;
    if (!v) {
        cudaError_t (*get)(int *) =
                (cudaError_t (*)(int *))dlsym_real(RTLD_NEXT, "cudaRuntimeGetVersion");
        int got = 0;
        if (!get || get(&got) != cudaSuccess || got <= 0)
            got = CUDART_VERSION;
        v = got;
    }
    return v;
}

#define RT_ENTRY(name)                                                                            \
    VW_EXPORT cudaError_t name(const char *symbol, void **funcPtr, unsigned long long flags,      \
                               enum cudaDriverEntryPointQueryResult *driverStatus)                \
    {                                                                                             \
        __typeof__(resolve_real.name) real = VW_REAL(name);                                       \
        if (VW_UNLIKELY(!real))                                                                   \
            return RT_MISSING;                                                                    \
        cudaError_t r = real(symbol, funcPtr, flags, driverStatus);                               \
        if (r == cudaSuccess && funcPtr && *funcPtr)                                              \
            VW_KEEP_ERRNO(*funcPtr =                                                              \
                                  resolve_wrap_proc(symbol, runtime_version(), flags, *funcPtr)); \
        return r;                                                                                 \
    }
RT_ENTRY(cudaGetDriverEntryPoint)
RT_ENTRY(cudaGetDriverEntryPoint_ptsz)

#define RT_ENTRY_BY_VERSION(name)                                                                \
    VW_EXPORT cudaError_t name(const char *symbol, void **funcPtr, unsigned int cudaVersion,     \
                               unsigned long long flags,                                         \
                               enum cudaDriverEntryPointQueryResult *driverStatus)               \
    {                                                                                            \
        __typeof__(resolve_real.name) real = VW_REAL(name);                                      \
        if (VW_UNLIKELY(!real))                                                                  \
            return RT_MISSING;                                                                   \
        cudaError_t r = real(symbol, funcPtr, cudaVersion, flags, driverStatus);                 \
        if (r == cudaSuccess && funcPtr && *funcPtr)                                             \
            VW_KEEP_ERRNO(*funcPtr =                                                             \
                                  resolve_wrap_proc(symbol, (int)cudaVersion, flags, *funcPtr)); \
        return r;                                                                                \
    }
RT_ENTRY_BY_VERSION(cudaGetDriverEntryPointByVersion)
RT_ENTRY_BY_VERSION(cudaGetDriverEntryPointByVersion_ptsz)
