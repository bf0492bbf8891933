/* Exported shims of the CUDA driver (libcuda) functions listed in hooks.def.
 *
 * The same shims are handed out by dlsym on a libcuda handle and by every cuGetProcAddress /
 * cudaGetDriverEntryPoint lookup, which is how the runtime, PyTorch's expandable segments,
 * NCCL, CuPy and JAX reach the driver. When a runtime call reaches one of them inside, the
 * thread's depth makes it pass through: the allocation is counted once, as the runtime call. */
#include "interpose.h"

#define DRV_MISSING CUDA_ERROR_NOT_FOUND
#define DPTR_KEY(p) ((uint64_t)(p))

#define DRV_ALLOC(name, kind, params, args, key, size)                                     \
    VW_EXPORT CUresult name params                                                         \
    {                                                                                      \
        __typeof__(vw_real.name) real = VW_REAL(name);                                     \
        if (VW_UNLIKELY(!real))                                                            \
            return DRV_MISSING;                                                            \
        struct vw_call c;                                                                  \
        if (!vw_enter(&c, true))                                                           \
            return real args;                                                              \
        CUresult r = real args;                                                            \
        bool ok = r == CUDA_SUCCESS;                                                       \
        vw_record_alloc(&c, #name, kind, ok, (int)r, false, ok ? (key) : 0, (size),        \
                        VW_DEV_UNKNOWN);                                                   \
        return r;                                                                          \
    }

#define DRV_FREE(name, kind, params, args, key)                                            \
    VW_EXPORT CUresult name params                                                         \
    {                                                                                      \
        __typeof__(vw_real.name) real = VW_REAL(name);                                     \
        if (VW_UNLIKELY(!real))                                                            \
            return DRV_MISSING;                                                            \
        struct vw_call c;                                                                  \
        if (!vw_enter(&c, false))                                                          \
            return real args;                                                              \
        struct core_alloc a;                                                               \
        bool tracked = vw_free_begin(kind, (key), &a);                                     \
        CUresult r = real args;                                                            \
        vw_free_end(tracked, &a, r == CUDA_SUCCESS);                                       \
        return r;                                                                          \
    }

#define DRV_PASS(name, params, args)                                                       \
    VW_EXPORT CUresult name params                                                         \
    {                                                                                      \
        __typeof__(vw_real.name) real = VW_REAL(name);                                     \
        return real ? real args : DRV_MISSING;                                             \
    }

DRV_ALLOC(cuMemAlloc_v2, CORE_DEVICE, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize),
          DPTR_KEY(*dptr), bytesize)
DRV_ALLOC(cuMemAllocPitch_v2, CORE_DEVICE,
          (CUdeviceptr * dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
           unsigned int ElementSizeBytes),
          (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes), DPTR_KEY(*dptr),
          ok && pPitch ? *pPitch * Height : WidthInBytes * Height)
DRV_ALLOC(cuMemAllocManaged, CORE_MANAGED, (CUdeviceptr * dptr, size_t bytesize, unsigned int flags),
          (dptr, bytesize, flags), DPTR_KEY(*dptr), bytesize)
DRV_ALLOC(cuMemAllocAsync, CORE_POOL, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
          (dptr, bytesize, hStream), DPTR_KEY(*dptr), bytesize)
DRV_ALLOC(cuMemAllocAsync_ptsz, CORE_POOL, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
          (dptr, bytesize, hStream), DPTR_KEY(*dptr), bytesize)
DRV_ALLOC(cuMemHostAlloc, CORE_HOST, (void **pp, size_t bytesize, unsigned int Flags),
          (pp, bytesize, Flags), (uint64_t)(uintptr_t)*pp, bytesize)
DRV_ALLOC(cuMemAllocHost_v2, CORE_HOST, (void **pp, size_t bytesize), (pp, bytesize),
          (uint64_t)(uintptr_t)*pp, bytesize)

#define DRV_POOL_ALLOC(name)                                                               \
    VW_EXPORT CUresult name(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,         \
                            CUstream hStream)                                              \
    {                                                                                      \
        __typeof__(vw_real.name) real = VW_REAL(name);                                     \
        if (VW_UNLIKELY(!real))                                                            \
            return DRV_MISSING;                                                            \
        struct vw_call c;                                                                  \
        if (!vw_enter(&c, true))                                                           \
            return real(dptr, bytesize, pool, hStream);                                    \
        CUresult r = real(dptr, bytesize, pool, hStream);                                  \
        bool ok = r == CUDA_SUCCESS;                                                       \
        int dev = vw_current_device();                                                     \
        if (pool)                                                                          \
            core_note_pool(dev, (uint64_t)(uintptr_t)pool);                                \
        vw_record_alloc(&c, #name, CORE_POOL, ok, (int)r, false, ok ? DPTR_KEY(*dptr) : 0, \
                        bytesize, dev);                                                    \
        return r;                                                                          \
    }
DRV_POOL_ALLOC(cuMemAllocFromPoolAsync)
DRV_POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz)

/* Physical memory of the virtual memory management API: counted from cuMemCreate to
 * cuMemRelease, on the device the allocation properties name. */
VW_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags)
{
    __typeof__(vw_real.cuMemCreate) real = VW_REAL(cuMemCreate);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    struct vw_call c;
    if (!vw_enter(&c, true))
        return real(handle, size, prop, flags);
    CUresult r = real(handle, size, prop, flags);
    bool ok = r == CUDA_SUCCESS;
    int dev = (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) ? prop->location.id
                                                                          : VW_DEV_UNKNOWN;
    vw_record_alloc(&c, "cuMemCreate", CORE_VMM, ok, (int)r, false,
                    ok && handle ? (uint64_t)*handle : 0, size, dev);
    return r;
}

DRV_FREE(cuMemFree_v2, CORE_DEVICE, (CUdeviceptr dptr), (dptr), DPTR_KEY(dptr))
DRV_FREE(cuMemFreeAsync, CORE_POOL, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream),
         DPTR_KEY(dptr))
DRV_FREE(cuMemFreeAsync_ptsz, CORE_POOL, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream),
         DPTR_KEY(dptr))
DRV_FREE(cuMemRelease, CORE_VMM, (CUmemGenericAllocationHandle handle), (handle), (uint64_t)handle)
DRV_FREE(cuMemFreeHost, CORE_HOST, (void *p), (p), (uint64_t)(uintptr_t)p)

/* Address space is not memory: reservations are only summed per device for the report. */
VW_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                       CUdeviceptr addr, unsigned long long flags)
{
    __typeof__(vw_real.cuMemAddressReserve) real = VW_REAL(cuMemAddressReserve);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    CUresult r = real(ptr, size, alignment, addr, flags);
    if (r == CUDA_SUCCESS && vw_active() && !vw_depth)
        core_va_reserve(vw_current_device(), (int64_t)size);
    return r;
}

VW_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    __typeof__(vw_real.cuMemAddressFree) real = VW_REAL(cuMemAddressFree);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    CUresult r = real(ptr, size);
    if (r == CUDA_SUCCESS && vw_active() && !vw_depth)
        core_va_reserve(vw_current_device(), -(int64_t)size);
    return r;
}

DRV_PASS(cuMemMap, (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                    unsigned long long flags),
         (ptr, size, offset, handle, flags))
DRV_PASS(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size))
DRV_PASS(cuMemGetInfo_v2, (size_t * free, size_t *total), (free, total))
DRV_PASS(cuDeviceTotalMem_v2, (size_t * bytes, CUdevice dev), (bytes, dev))
DRV_PASS(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value),
         (pool, attr, value))

/* ---- lookups: every pointer handed out is checked against the hook list ---- */

VW_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    __typeof__(vw_real.cuGetProcAddress) real = VW_REAL(cuGetProcAddress);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    CUresult r = real(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn && *pfn)
        *pfn = vw_wrap_proc(symbol, cudaVersion, flags, *pfn);
    return r;
}

VW_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    __typeof__(vw_real.cuGetProcAddress_v2) real = VW_REAL(cuGetProcAddress_v2);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn && *pfn)
        *pfn = vw_wrap_proc(symbol, cudaVersion, flags, *pfn);
    return r;
}
