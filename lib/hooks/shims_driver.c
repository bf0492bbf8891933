/* Exported shims of the CUDA driver (libcuda) functions listed in hooks.def.
 *
 * The same shims are handed out by dlsym on a libcuda handle and by every cuGetProcAddress /
 * cudaGetDriverEntryPoint lookup, which is how the runtime, PyTorch's expandable segments,
 * NCCL, CuPy and JAX reach the driver. When a runtime call reaches one of them inside, the
 * thread's depth makes it pass through: the allocation is counted once, as the runtime call. */
#include "shim.h"

#define DRV_MISSING CUDA_ERROR_NOT_FOUND
#define DPTR_KEY(p) ((uint64_t)(p))

#define DRV_ALLOC(name, kind, params, args, key, size) \
    VW_SHIM_ALLOC(CUresult, CUDA_SUCCESS, DRV_MISSING, false, name, kind, params, args, key, size)
#define DRV_FREE(name, kind, params, args, key) \
    VW_SHIM_FREE(CUresult, CUDA_SUCCESS, DRV_MISSING, name, kind, params, args, key)
#define DRV_PASS(name, params, args) VW_SHIM_PASS(CUresult, DRV_MISSING, name, params, args)

DRV_ALLOC(cuMemAlloc_v2, CORE_DEVICE, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize),
          DPTR_KEY(*dptr), bytesize)
DRV_ALLOC(cuMemAllocPitch_v2, CORE_DEVICE,
          (CUdeviceptr * dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
           unsigned int ElementSizeBytes),
          (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes), DPTR_KEY(*dptr),
          ok &&pPitch ? *pPitch *Height : WidthInBytes *Height)
DRV_ALLOC(cuMemAllocManaged, CORE_MANAGED,
          (CUdeviceptr * dptr, size_t bytesize, unsigned int flags), (dptr, bytesize, flags),
          DPTR_KEY(*dptr), bytesize)
DRV_ALLOC(cuMemAllocAsync, CORE_POOL, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
          (dptr, bytesize, hStream), DPTR_KEY(*dptr), bytesize)
DRV_ALLOC(cuMemAllocAsync_ptsz, CORE_POOL, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
          (dptr, bytesize, hStream), DPTR_KEY(*dptr), bytesize)
DRV_ALLOC(cuMemHostAlloc, CORE_HOST, (void **pp, size_t bytesize, unsigned int Flags),
          (pp, bytesize, Flags), (uint64_t)(uintptr_t)*pp, bytesize)
DRV_ALLOC(cuMemAllocHost_v2, CORE_HOST, (void **pp, size_t bytesize), (pp, bytesize),
          (uint64_t)(uintptr_t)*pp, bytesize)

#define DRV_POOL_ALLOC(name)                                                          \
    VW_SHIM_POOL_ALLOC(CUresult, CUDA_SUCCESS, DRV_MISSING, false, name, CUdeviceptr, \
                       CUmemoryPool, CUstream)
DRV_POOL_ALLOC(cuMemAllocFromPoolAsync)
DRV_POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz)

/* Physical memory of the virtual memory management API: counted from cuMemCreate to
 * cuMemRelease, on the device the allocation properties name. */
VW_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags)
{
    __typeof__(resolve_real.cuMemCreate) real = VW_REAL(cuMemCreate);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    struct vw_call c;
    int e = interpose_errno_get(); /* as in VW_SHIM_ALLOC */
    if (!interpose_enter(&c, true))
        return real(handle, size, prop, flags);
    int dev = (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) ? prop->location.id
                                                                           : VW_DEV_UNKNOWN;
    interpose_call_is(&c, "cuMemCreate", CORE_VMM, dev);
    c.runtime_call = false;
    int lim = VW_UNLIKELY(limit_any) ? limit_gate(&c, size) : VW_LIMIT_OK;
    interpose_errno_set(e);
    if (lim == VW_LIMIT_REFUSE)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(handle, size, prop, flags);
    e = interpose_errno_get();
    bool ok = r == CUDA_SUCCESS;
    record_alloc(&c, ok, (int)r, ok && handle ? (uint64_t)*handle : 0, size,
                 ok && lim == VW_LIMIT_CROSS);
    interpose_errno_set(e);
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
    __typeof__(resolve_real.cuMemAddressReserve) real = VW_REAL(cuMemAddressReserve);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    CUresult r = real(ptr, size, alignment, addr, flags);
    if (r == CUDA_SUCCESS && interpose_active() && !setup_depth)
        VW_KEEP_ERRNO(core_va_reserve(driver_current_device(), (int64_t)size));
    return r;
}

VW_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    __typeof__(resolve_real.cuMemAddressFree) real = VW_REAL(cuMemAddressFree);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    CUresult r = real(ptr, size);
    if (r == CUDA_SUCCESS && interpose_active() && !setup_depth)
        VW_KEEP_ERRNO(core_va_reserve(driver_current_device(), -(int64_t)size));
    return r;
}

DRV_PASS(cuMemMap,
         (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
          unsigned long long flags),
         (ptr, size, offset, handle, flags))
DRV_PASS(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size))
VW_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    __typeof__(resolve_real.cuMemGetInfo_v2) real = VW_REAL(cuMemGetInfo_v2);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    CUresult r = real(free, total);
    if (r == CUDA_SUCCESS && interpose_active() && VW_UNLIKELY(limit_any))
        VW_KEEP_ERRNO(limit_meminfo(driver_current_device(), free, total));
    return r;
}

VW_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    __typeof__(resolve_real.cuDeviceTotalMem_v2) real = VW_REAL(cuDeviceTotalMem_v2);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    CUresult r = real(bytes, dev);
    if (r == CUDA_SUCCESS && bytes && interpose_active() && VW_UNLIKELY(limit_any))
        VW_KEEP_ERRNO(if (limit_of(dev)) *bytes = limit_of(dev));
    return r;
}
DRV_PASS(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value),
         (pool, attr, value))

/* ---- lookups: every pointer handed out is checked against the hook list ---- */

VW_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags)
{
    __typeof__(resolve_real.cuGetProcAddress) real = VW_REAL(cuGetProcAddress);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    CUresult r = real(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn && *pfn)
        VW_KEEP_ERRNO(*pfn = resolve_wrap_proc(symbol, cudaVersion, flags, *pfn));
    return r;
}

VW_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus)
{
    __typeof__(resolve_real.cuGetProcAddress_v2) real = VW_REAL(cuGetProcAddress_v2);
    if (VW_UNLIKELY(!real))
        return DRV_MISSING;
    CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn && *pfn)
        VW_KEEP_ERRNO(*pfn = resolve_wrap_proc(symbol, cudaVersion, flags, *pfn));
    return r;
}
