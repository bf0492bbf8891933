/* Driver queries made for our own purposes: the table of real libcuda functions, resolved once
 * libcuda is loaded, and the questions asked of it (device, memory, facts, pools). */
#define __CUDA_API_VERSION_INTERNAL 1
#include "driver.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "loaded.h"

static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;

unsigned (*driver_ctx_get_device)(int *);
_Static_assert(__builtin_types_compatible_p(unsigned (*)(int *), CUresult (*)(CUdevice *)),
               "driver_ctx_get_device has cuCtxGetDevice's type");

static struct {
    bool tried_ok;
    unsigned attempts;
    unsigned hint, hint_tried; /* driver lookups seen; the count at the last failed resolve */
    CUresult (*ctx_get_device)(CUdevice *);
    CUresult (*mem_get_info)(size_t *, size_t *);
    CUresult (*device_total_mem)(size_t *, CUdevice);
    CUresult (*device_get_name)(char *, int, CUdevice);
    CUresult (*device_get_pci)(char *, int, CUdevice);
    CUresult (*device_get_uuid)(CUuuid *, CUdevice);
    CUresult (*pool_get_attr)(CUmemoryPool, CUmemPool_attribute, void *);
    CUresult (*device_get_mem_pool)(CUmemoryPool *, CUdevice);
    CUresult (*device_get_default_pool)(CUmemoryPool *, CUdevice);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*primary_get_state)(CUdevice, unsigned int *, int *);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*primary_release)(CUdevice);
} drv;

static void *libcuda_handle(void)
{
    /* Only a libcuda that is already loaded: loading the driver ourselves would be a side
     * effect the application did not ask for. */
    return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
}

/* The runtime (or JAX, or a program of its own) is looking driver functions up: libcuda is
 * loaded now, so the next driver_ready() must try, whoever asks. */
void driver_hint(void)
{
    if (!__atomic_load_n(&drv.tried_ok, __ATOMIC_ACQUIRE))
        __atomic_fetch_add(&drv.hint, 1, __ATOMIC_RELEASE);
}

/* Under drv_lock: fill the table once, publish it with tried_ok. */
static bool drv_resolve(void)
{
    if (__atomic_load_n(&drv.tried_ok, __ATOMIC_ACQUIRE))
        return true;
    void *lib = libcuda_handle();
    if (!lib)
        return false;
#define GET(field, sym) *(void **)&drv.field = dlsym_real(lib, sym)
    GET(ctx_get_device, "cuCtxGetDevice");
    GET(mem_get_info, "cuMemGetInfo_v2");
    GET(device_total_mem, "cuDeviceTotalMem_v2");
    GET(device_get_name, "cuDeviceGetName");
    GET(device_get_pci, "cuDeviceGetPCIBusId");
    /* _v2 (CUDA 11.4) gives the UUID of a MIG instance rather than of its parent GPU. */
    GET(device_get_uuid, "cuDeviceGetUuid_v2");
    if (!drv.device_get_uuid)
        GET(device_get_uuid, "cuDeviceGetUuid");
    GET(pool_get_attr, "cuMemPoolGetAttribute");
    GET(device_get_mem_pool, "cuDeviceGetMemPool");
    GET(device_get_default_pool, "cuDeviceGetDefaultMemPool");
    GET(ctx_get_current, "cuCtxGetCurrent");
    GET(ctx_set_current, "cuCtxSetCurrent");
    GET(primary_get_state, "cuDevicePrimaryCtxGetState");
    GET(primary_retain, "cuDevicePrimaryCtxRetain");
    GET(primary_release, "cuDevicePrimaryCtxRelease_v2");
#undef GET
    /* The handle stays open on purpose: these pointers must outlive this function. */
    __atomic_store_n(&drv.tried_ok, drv.ctx_get_device != NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&driver_ctx_get_device, drv.ctx_get_device, __ATOMIC_RELEASE);
    return drv.ctx_get_device != NULL;
}

bool driver_ready(void)
{
    if (__atomic_load_n(&drv.tried_ok, __ATOMIC_ACQUIRE))
        return true;
    /* Before the application has loaded libcuda there is nothing to ask: try again when a
     * driver lookup has been seen since the last try, else now and then rather than on every
     * call. Every caller that is due waits on the lock, so a thread racing the one that
     * resolves gets the answer instead of giving up (its allocation would land on no device). */
    unsigned hint = __atomic_load_n(&drv.hint, __ATOMIC_ACQUIRE);
    if (hint == __atomic_load_n(&drv.hint_tried, __ATOMIC_ACQUIRE) &&
        __atomic_fetch_add(&drv.attempts, 1, __ATOMIC_RELAXED) % 64 != 0)
        return false;
    pthread_mutex_lock(&drv_lock);
    bool ok = drv_resolve();
    if (!ok)
        __atomic_store_n(&drv.hint_tried, hint, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&drv_lock);
    return ok;
}

void driver_after_fork_child(void)
{
    pthread_mutex_init(&drv_lock, NULL);
}

bool driver_pci_bus_id(int device, char *out, int len)
{
    return driver_ready() && drv.device_get_pci &&
           drv.device_get_pci(out, len, device) == CUDA_SUCCESS;
}

int driver_current_device_slow(void)
{
    CUdevice d;
    if (driver_ready() && drv.ctx_get_device(&d) == CUDA_SUCCESS)
        return (int)d;
    return -1;
}

bool driver_total_mem(int device, size_t *total)
{
    return driver_ready() && drv.device_total_mem &&
           drv.device_total_mem(total, device) == CUDA_SUCCESS;
}

bool driver_device_name(int device, char *out, int len)
{
    return driver_ready() && drv.device_get_name &&
           drv.device_get_name(out, len, device) == CUDA_SUCCESS;
}

bool driver_device_uuid(int device, char out[48])
{
    static const char hex[] = "0123456789abcdef";
    CUuuid u;
    if (!driver_ready() || !drv.device_get_uuid || drv.device_get_uuid(&u, device) != CUDA_SUCCESS)
        return false;
    char *p = out;
    memcpy(p, "GPU-", 4);
    p += 4;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        unsigned char b = (unsigned char)u.bytes[i];
        *p++ = hex[b >> 4];
        *p++ = hex[b & 15];
    }
    *p = 0;
    return true;
}

bool driver_mem_info(size_t *free, size_t *total)
{
    return driver_ready() && drv.mem_get_info && drv.mem_get_info(free, total) == CUDA_SUCCESS;
}

/* The driver answers for the current context only, so briefly make the device's primary
 * context current, and only when it is already active (retaining an inactive one would create
 * a context: memory and time the application never asked for). */
bool driver_mem_info_other(int dev, size_t *f, size_t *t)
{
    unsigned int flags;
    int active = 0;
    CUcontext saved, ctx;
    if (!driver_ready() || !drv.ctx_get_current || !drv.ctx_set_current || !drv.primary_get_state ||
        !drv.primary_retain || !drv.primary_release || !drv.mem_get_info)
        return false;
    if (drv.primary_get_state(dev, &flags, &active) != CUDA_SUCCESS || !active)
        return false;
    if (drv.ctx_get_current(&saved) != CUDA_SUCCESS)
        return false;
    if (drv.primary_retain(&ctx, dev) != CUDA_SUCCESS)
        return false;
    bool ok = drv.ctx_set_current(ctx) == CUDA_SUCCESS && drv.mem_get_info(f, t) == CUDA_SUCCESS;
    drv.ctx_set_current(saved);
    drv.primary_release(dev);
    return ok;
}

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute a, bool *ok)
{
    cuuint64_t v = 0;
    if (drv.pool_get_attr(pool, a, &v) != CUDA_SUCCESS)
        *ok = false;
    return (uint64_t)v;
}

bool driver_pools(int device, const struct core_device *d, int64_t *extra, int64_t *high)
{
    *extra = 0;
    *high = 0;
    if (!d->pool_used)
        return true;
    if (device < 0 || !driver_ready() || !drv.pool_get_attr)
        return false;
    CUmemoryPool pools[VW_POOLS_PER_DEVICE + 2];
    int n = 0;
    CUmemoryPool p;
    if (drv.device_get_default_pool && drv.device_get_default_pool(&p, device) == CUDA_SUCCESS)
        pools[n++] = p;
    if (drv.device_get_mem_pool && drv.device_get_mem_pool(&p, device) == CUDA_SUCCESS)
        pools[n++] = p;
    for (int i = 0; i < d->npools; i++)
        pools[n++] = (CUmemoryPool)(uintptr_t)d->pools[i];
    bool ok = true;
    for (int i = 0; i < n; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup |= pools[j] == pools[i];
        if (dup)
            continue;
        uint64_t r = pool_attr(pools[i], CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &ok);
        uint64_t u = pool_attr(pools[i], CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &ok);
        uint64_t h = pool_attr(pools[i], CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &ok);
        if (r > u)
            *extra += (int64_t)(r - u);
        *high += (int64_t)h;
    }
    return ok;
}
