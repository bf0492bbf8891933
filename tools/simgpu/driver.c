/* driver.c: libcuda.so.1 of the simulated GPU, a fake CUDA driver whose memory accounting is real. */

/* Off: cuda.h's name-mapping macros, so this file defines the exact exported names (cuMemAlloc_v2,
 * the v1 cuMemAlloc, the _ptsz variants) the way the real driver exports them. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uthash.h>

#include "alloc.h"
#include "simconfig.h"
#include "readback.h"
#include "simgpu.h"

#define EXPORT __attribute__((visibility("default")))

#define SIM_DRIVER_VERSION 13000
#define SIM_ALIGN 512ULL             /* every allocation is rounded to this */
#define SIM_GRANULARITY (2ULL << 20) /* VMM granularity, also the pool chunk unit */
#define SIM_VA_MIN \
    (4ULL << 30) /* VMM address space: at least this (small enough for valgrind)... */
#define SIM_VA_MAX (64ULL << 40) /* ...and at most this */

/* The primary context of a device. cuda.h leaves the struct incomplete; any layout will do. */
struct CUctx_st {
    int device;
};

/* A chunk a pool took from the device; pool allocations are carved out of it. */
struct pool_seg {
    struct range_alloc ra;
    uint64_t addr;
    uint64_t len;
    struct pool_seg *next;
};

/* A stream-ordered memory pool (CUmemoryPool points to this). */
struct CUmemPoolHandle_st {
    int device;
    int is_default;
    int destroyed;      /* destroyed with allocations outstanding: freed with the last one */
    uint64_t max_size;  /* 0: no limit */
    uint64_t threshold; /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
    uint64_t reserved, reserved_high;
    uint64_t used, used_high;
    int reuse[3]; /* the three REUSE_* attributes, stored but without effect */
    struct pool_seg *segs;
    struct CUmemPoolHandle_st *next; /* in g.pools while the handle is valid */
};

struct sim_device {
    int ordinal;
    uint64_t capacity;
    uint64_t ctx_bytes;
    uint64_t other_bytes;
    void *map;             /* PROT_NONE reservation backing the device address range */
    struct range_alloc ra; /* device address range: cuMemAlloc and pool chunks */
    uint64_t phys;         /* managed + VMM memory: takes capacity but no device addresses */
    int ctx_alive;
    unsigned ctx_refs;
    struct CUctx_st ctx;
    struct CUmemPoolHandle_st *default_pool;
    struct CUmemPoolHandle_st *current_pool;
};

enum rec_kind { REC_DEVICE, REC_POOL, REC_MANAGED, REC_HOST };

/* One live allocation, keyed by the address handed to the caller. */
struct rec {
    uint64_t addr;
    uint64_t len;     /* bytes charged, rounded */
    uint64_t map_len; /* length of the host mapping (managed, host) */
    int kind;
    int device;
    struct CUmemPoolHandle_st *pool;
    struct pool_seg *seg;
    UT_hash_handle hh;
};

struct vmm_handle {
    uint64_t id;
    uint64_t len;
    int device;
    /* References: cuMemCreate's and one per cuMemRetainAllocationHandle, each undone by a
     * cuMemRelease. The memory is freed once none is left and nothing maps it any more. */
    unsigned refs;
    unsigned maps;
    CUmemAllocationProp prop; /* as cuMemCreate got it */
    UT_hash_handle hh;
};

struct va_range {
    uint64_t addr;
    uint64_t len;
};

struct va_mapping {
    uint64_t addr;
    uint64_t len;
    struct vmm_handle *h;
};

/* Loaded modules and their functions. No image is ever read and no kernel ever runs: a module is
 * a name space for functions, and a function remembers what cuFuncSetAttribute set. */
struct CUfunc_st {
    struct CUmod_st *mod;
    struct CUfunc_st *next;
    int max_dynamic_smem; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
    int carveout;         /* CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT */
    char name[];
};

struct CUmod_st {
    int device;
    struct CUfunc_st *funcs;
    struct CUmod_st *next;
};

/* A pending link (cuLinkCreate): it counts what was added. */
struct CUlinkState_st {
    size_t inputs;
    struct CUlinkState_st *next;
};

/* A callback cuLogsRegisterCallback took (CUlogsCallbackHandle points to this). The simulator
 * has nothing to log, so none is ever called. */
struct CUlogsCallbackEntry_st {
    CUlogsCallback fn;
    void *data;
    struct CUlogsCallbackEntry_st *next;
};

static struct {
    pthread_mutex_t lock;
    struct simgpu_config cfg;
    int initialized;
    int ndev;
    struct sim_device dev[SIMGPU_MAX_DEVICES];
    struct rec *recs;
    struct CUmemPoolHandle_st *pools;
    struct vmm_handle *handles;
    uint64_t next_handle;
    void *va_map;
    uint64_t va_len;
    struct range_alloc va;
    struct va_range *resv;
    size_t nresv, cap_resv;
    struct va_mapping *maps;
    size_t nmaps, cap_maps;
    int ctx_device_counted; /* a SIMGPU_FAIL rule names cuCtxGetDevice(_v2): no lock-free path */
    struct CUlogsCallbackEntry_st *logs;
    struct CUmod_st *modules;
    struct CUlinkState_st *links;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
/* The thread's context stack: the current context on top, the ones pushed under it below. */
#define CTX_STACK_MAX 64
static __thread struct CUctx_st *tls_ctx;
static __thread struct CUctx_st *tls_below[CTX_STACK_MAX];
static __thread int tls_depth;

static int is_driver_function(const char *name);

/* ---------------------------------------------------------------------------------------- */
/* Entry and exit of every exported function                                                */

static void atfork_prepare(void)
{
    pthread_mutex_lock(&g.lock);
}
static void atfork_release(void)
{
    pthread_mutex_unlock(&g.lock);
}

static void load_once(void)
{
    simgpu_config_load(&g.cfg, is_driver_function);
    simgpu_config_visible(&g.cfg);
    for (int i = 0; i < g.cfg.nfail; i++)
        if (strcmp(g.cfg.fail[i].func, "cuCtxGetDevice") == 0 ||
            strcmp(g.cfg.fail[i].func, "cuCtxGetDevice_v2") == 0)
            __atomic_store_n(&g.ctx_device_counted, 1, __ATOMIC_RELAXED);
    /* A child forked while another thread held the lock would otherwise deadlock on first use. */
    pthread_atfork(atfork_prepare, atfork_release, atfork_release);
}

/* Counts the call for SIMGPU_FAIL; true when this call is the one to fail. */
static int fail_take(const char *func, CUresult *err)
{
    int hit = 0;
    for (int i = 0; i < g.cfg.nfail; i++) {
        struct simgpu_fail_rule *r = &g.cfg.fail[i];
        if (strcmp(r->func, func) != 0)
            continue;
        if (++r->seen == r->nth) {
            hit = 1;
            *err = (CUresult)r->err;
        }
    }
    return hit;
}

/* Always takes the lock (leave() drops it). Returns an injected failure, NOT_INITIALIZED, or
 * success; the caller does its work only on success. */
static CUresult enter(const char *func, int need_init)
{
    CUresult inj = CUDA_SUCCESS;
    pthread_once(&g_once, load_once);
    pthread_mutex_lock(&g.lock);
    if (fail_take(func, &inj))
        return inj;
    if (need_init && !g.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    return CUDA_SUCCESS;
}

static CUresult leave(CUresult r)
{
    pthread_mutex_unlock(&g.lock);
    return r;
}

#define API(need_init, call)                    \
    CUresult r_ = enter(__func__, (need_init)); \
    if (r_ == CUDA_SUCCESS)                     \
        r_ = (call);                            \
    return leave(r_)

/* ---------------------------------------------------------------------------------------- */
/* Capacity accounting                                                                      */

static int round_up(uint64_t v, uint64_t unit, uint64_t *out)
{
    if (v > UINT64_MAX - (unit - 1))
        return -1;
    *out = (v + unit - 1) & ~(unit - 1);
    return 0;
}

/* Everything that takes memory on the card, as cuMemGetInfo counts it. */
static uint64_t dev_committed(const struct sim_device *d)
{
    return d->ra.used + d->phys + (d->ctx_alive ? d->ctx_bytes : 0) + d->other_bytes;
}

static uint64_t dev_available(const struct sim_device *d)
{
    uint64_t c = dev_committed(d);
    return c >= d->capacity ? 0 : d->capacity - c;
}

/* Takes len bytes of device address range; needs both the capacity and a hole. */
static int dev_take(struct sim_device *d, uint64_t len, uint64_t *addr)
{
    if (len > dev_available(d))
        return -1;
    return ra_alloc(&d->ra, len, SIM_ALIGN, addr);
}

static int valid_device(CUdevice dev)
{
    return dev >= 0 && dev < g.ndev;
}

static CUresult current_device(struct sim_device **out)
{
    if (!tls_ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = &g.dev[tls_ctx->device];
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------- */
/* Allocation records                                                                       */

static struct rec *rec_find(uint64_t addr)
{
    struct rec *r = NULL;
    HASH_FIND(hh, g.recs, &addr, sizeof addr, r);
    return r;
}

/* The allocation holding [p, p + n), pinned host memory included when with_host, or NULL. */
static struct rec *rec_spanning(uint64_t p, uint64_t n, int with_host)
{
    struct rec *r, *tmp;
    HASH_ITER(hh, g.recs, r, tmp)
    {
        if (r->kind == REC_HOST && !with_host)
            continue;
        if (p >= r->addr && p - r->addr < r->len && n <= r->len - (p - r->addr))
            return r;
    }
    return NULL;
}

/* The allocation (not pinned host memory) holding [p, p + n), or NULL. */
static struct rec *rec_containing(uint64_t p, uint64_t n)
{
    return rec_spanning(p, n, 0);
}

/* The same, pinned host memory included. */
static struct rec *rec_holding(uint64_t p, uint64_t n)
{
    return rec_spanning(p, n, 1);
}

static void rec_add(struct rec *r)
{
    HASH_ADD(hh, g.recs, addr, sizeof r->addr, r);
}

/* ---------------------------------------------------------------------------------------- */
/* Stream-ordered pools                                                                     */

static int pool_valid(const struct CUmemPoolHandle_st *p)
{
    for (const struct CUmemPoolHandle_st *q = g.pools; q; q = q->next)
        if (q == p)
            return 1;
    return 0;
}

/* Gives back every unused chunk while the pool holds more than keep bytes. */
static void pool_trim(struct CUmemPoolHandle_st *p, uint64_t keep)
{
    struct pool_seg **link = &p->segs;
    while (*link && p->reserved > keep) {
        struct pool_seg *s = *link;
        if (s->ra.used != 0) {
            link = &s->next;
            continue;
        }
        *link = s->next;
        ra_free(&g.dev[p->device].ra, s->addr, s->len);
        p->reserved -= s->len;
        ra_fini(&s->ra);
        free(s);
    }
}

static int pool_grow(struct CUmemPoolHandle_st *p, uint64_t chunk, struct pool_seg **out)
{
    struct sim_device *d = &g.dev[p->device];
    uint64_t addr;

    if (p->max_size && (chunk > p->max_size || p->reserved > p->max_size - chunk))
        return -1;
    struct pool_seg *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    if (dev_take(d, chunk, &addr) != 0) {
        free(s);
        return -1;
    }
    if (ra_init(&s->ra, addr, chunk) != 0) {
        ra_free(&d->ra, addr, chunk);
        free(s);
        return -1;
    }
    s->addr = addr;
    s->len = chunk;
    s->next = p->segs;
    p->segs = s;
    p->reserved += chunk;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    *out = s;
    return 0;
}

static CUresult pool_alloc(struct CUmemPoolHandle_st *p, size_t bytesize, CUdeviceptr *dptr)
{
    struct sim_device *d = &g.dev[p->device];
    struct pool_seg *s;
    uint64_t len, chunk = 0, addr = 0;

    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (round_up(bytesize, SIM_ALIGN, &len) != 0 || len > d->capacity)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct rec *r = calloc(1, sizeof *r);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;

    /* Memory freed earlier stays reserved by the pool and is reused first. */
    for (s = p->segs; s; s = s->next)
        if (s->len - s->ra.used >= len && ra_alloc(&s->ra, len, SIM_ALIGN, &addr) == 0)
            break;
    if (!s) {
        (void)round_up(len, SIM_GRANULARITY, &chunk); /* len <= capacity: cannot overflow */
        if (pool_grow(p, chunk, &s) != 0) {
            /* Like the real driver: before failing, hand the pool's idle chunks back and retry. */
            pool_trim(p, 0);
            if (pool_grow(p, chunk, &s) != 0) {
                free(r);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
        }
        if (ra_alloc(&s->ra, len, SIM_ALIGN, &addr) != 0) {
            free(r);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    p->used += len;
    if (p->used > p->used_high)
        p->used_high = p->used;

    r->addr = addr;
    r->len = len;
    r->kind = REC_POOL;
    r->device = p->device;
    r->pool = p;
    r->seg = s;
    rec_add(r);
    *dptr = addr;
    return CUDA_SUCCESS;
}

static void sync_pools(void)
{
    for (struct CUmemPoolHandle_st *p = g.pools; p; p = p->next)
        pool_trim(p, p->threshold);
}

/* ---------------------------------------------------------------------------------------- */
/* Releasing an allocation of any kind                                                      */

/* Gives back the whole pages of [addr, addr + len): they read as zeros again and hold no RAM. */
static void drop_pages(uint64_t addr, uint64_t len)
{
    const uint64_t page = 4096;
    uint64_t start = (addr + page - 1) & ~(page - 1), end = (addr + len) & ~(page - 1);
    if (end > start)
        (void)madvise((void *)(uintptr_t)start, end - start, MADV_DONTNEED);
}

static void rec_release(struct rec *r)
{
    struct sim_device *d = &g.dev[r->device];

    HASH_DEL(g.recs, r);
    switch (r->kind) {
    case REC_DEVICE:
        drop_pages(r->addr, r->len);
        ra_free(&d->ra, r->addr, r->len);
        break;
    case REC_MANAGED:
        munmap((void *)(uintptr_t)r->addr, r->map_len);
        d->phys -= r->len;
        break;
    case REC_HOST:
        munmap((void *)(uintptr_t)r->addr, r->map_len);
        break;
    case REC_POOL: {
        struct CUmemPoolHandle_st *p = r->pool;
        ra_free(&r->seg->ra, r->addr, r->len);
        p->used -= r->len;
        if (p->destroyed) {
            pool_trim(p, 0);
            if (p->used == 0)
                free(p);
        }
        break;
    }
    }
    free(r);
}

/* cuMemFree and cuMemFreeAsync accept any device allocation, not pinned host memory. */
static CUresult free_device_pointer(CUdeviceptr dptr)
{
    if (dptr == 0)
        return CUDA_SUCCESS; /* free(NULL) semantics, as the real driver */
    struct rec *r = rec_find(dptr);
    if (!r || r->kind == REC_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    rec_release(r);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------- */
/* Initialisation                                                                           */

static void unmap_devices(int n)
{
    for (int i = 0; i < n; i++) {
        struct sim_device *d = &g.dev[i];
        free(d->default_pool);
        ra_fini(&d->ra);
        munmap(d->map, d->capacity);
        memset(d, 0, sizeof *d);
    }
    g.pools = NULL;
}

static CUresult do_init(unsigned int flags)
{
    uint64_t total = 0;
    int i;

    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (g.initialized)
        return CUDA_SUCCESS;
    if (g.cfg.devices == 0)
        return CUDA_ERROR_NO_DEVICE;

    for (i = 0; i < g.cfg.devices; i++) {
        struct sim_device *d = &g.dev[i];
        d->ordinal = i;
        d->capacity = g.cfg.memory[i];
        d->ctx_bytes = g.cfg.context_bytes[i];
        d->other_bytes = g.cfg.other_bytes[i];
        d->ctx.device = i;
        /* A range of its own, so device pointers never alias other host memory. Readable and
         * writable but reserved on demand: only the bytes that copies, memsets and the stand-in
         * collectives write are ever committed (kernels never run), and a framework reads back
         * what it wrote, as its consistency checks expect (DDP compares every rank's parameter
         * shapes through a device buffer). Released allocations give their pages back. */
        d->map = mmap(NULL, d->capacity, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (d->map == MAP_FAILED) {
            fprintf(stderr,
                    "simgpu: cannot reserve %llu bytes of address space for device %d: %s\n",
                    (unsigned long long)d->capacity, i, strerror(errno));
            memset(d, 0, sizeof *d);
            break;
        }
        struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
        if (!p || ra_init(&d->ra, (uint64_t)(uintptr_t)d->map, d->capacity) != 0) {
            free(p);
            munmap(d->map, d->capacity);
            memset(d, 0, sizeof *d);
            break;
        }
        p->device = i;
        p->is_default = 1;
        p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
        d->default_pool = d->current_pool = p;
        total += d->capacity;
    }
    if (i < g.cfg.devices) {
        unmap_devices(i);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }

    /* VMM address space is separate from the device ranges: reserving it uses no capacity. */
    uint64_t va = total > SIM_VA_MAX / 4 ? SIM_VA_MAX : total * 4;
    if (va < SIM_VA_MIN)
        va = SIM_VA_MIN;
    g.va_map = mmap(NULL, va, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
    if (g.va_map == MAP_FAILED) {
        fprintf(stderr, "simgpu: cannot reserve %llu bytes of address space for VMM: %s\n",
                (unsigned long long)va, strerror(errno));
        g.va_map = NULL;
        unmap_devices(g.cfg.devices);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (ra_init(&g.va, (uint64_t)(uintptr_t)g.va_map, va) != 0) {
        munmap(g.va_map, va);
        unmap_devices(g.cfg.devices);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g.va_len = va;

    for (i = g.cfg.devices - 1; i >= 0; i--) {
        g.dev[i].default_pool->next = g.pools;
        g.pools = g.dev[i].default_pool;
    }
    g.ndev = g.cfg.devices;
    g.next_handle = 0x5100000;
    for (i = 0; i < g.cfg.devices; i++)
        readback_add_range((uint64_t)(uintptr_t)g.dev[i].map, g.dev[i].capacity);
    readback_add_range((uint64_t)(uintptr_t)g.va_map, g.va_len);
    g.initialized = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuInit(unsigned int Flags)
{
    API(0, do_init(Flags));
}

static CUresult do_driver_version(int *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    *v = SIM_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
    API(0, do_driver_version(driverVersion));
}

/* ---------------------------------------------------------------------------------------- */
/* Devices                                                                                  */

static CUresult do_device_count(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = g.ndev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
    API(1, do_device_count(count));
}

static CUresult do_device_get(CUdevice *device, int ordinal)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    API(1, do_device_get(device, ordinal));
}

static CUresult do_device_name(char *name, int len, CUdevice dev)
{
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", simgpu_device_name(&g.cfg, dev));
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    API(1, do_device_name(name, len, dev));
}

static CUresult do_total_mem(size_t *bytes, CUdevice dev)
{
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = g.dev[dev].capacity;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    API(1, do_total_mem(bytes, dev));
}

/* The attributes: enough for cudaGetDeviceProperties and the choices PyTorch makes from them
 * (compute capability, multiprocessors, shared memory, L2, threads). These are the same on
 * every card. */
static const struct {
    CUdevice_attribute a;
    int v;
} same_on_every_card[] = {
    { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535 },
    { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152 },
    { CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536 },
    { CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
    { CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2147483647 },
    { CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536 },
    { CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 512 },
    { CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, 1 },
    { CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1 },
    { CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT, 512 },
    { CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1 },
    { CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 1 },
    { CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0 },
    { CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0 },
    { CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 3 },
    { CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1 },
    { CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 32 },
    { CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536 },
    { CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1 },
    { CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1 },
    { CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1 },
    { CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1 },
};

/* What differs from card to card, from the device's card (cards.def, or the default
 * H100/H200-like part), and where the device sits; 0 for an attribute not modelled. */
static int card_attribute(CUdevice_attribute a, int dev)
{
    const struct simgpu_card *c = g.cfg.card[dev];
    int ampere = c->major >= 8; /* Ampere on: L2 persistence, 1 KiB of shared memory reserved */

    switch (a) {
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
        return c->clock_khz;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        return c->sms;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        return g.cfg.physical[dev] + 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
        return c->mem_clock_khz;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
        return c->bus_bits;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
        return c->l2_bytes;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
        return c->threads_per_sm;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        return c->major;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        return c->minor;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
        return c->smem_per_sm;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
        return g.cfg.physical[dev];
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
        return c->smem_optin;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
        return c->blocks_per_sm;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
        /* The default device keeps the figure it always had; a named card three quarters of
         * its L2 (a nominal value: nothing in PyTorch reads it). None before Ampere. */
        if (!ampere)
            return 0;
        return c == &simgpu_default_card ? 32505856 : c->l2_bytes / 4 * 3;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
        return ampere ? 134213632 : 0;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
        return ampere ? 1024 : 0;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
        return c->major >= 9;
    default:
        return 0;
    }
}

static int attribute_value(CUdevice_attribute a, int dev)
{
    for (size_t i = 0; i < sizeof same_on_every_card / sizeof same_on_every_card[0]; i++)
        if (same_on_every_card[i].a == a)
            return same_on_every_card[i].v;
    return card_attribute(a, dev);
}

static CUresult do_attribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *pi = attribute_value(attrib, dev);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    API(1, do_attribute(pi, attrib, dev));
}

static CUresult do_pci_bus_id(char *pciBusId, int len, CUdevice dev)
{
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    /* Upper-case hex digits, as NVIDIA's driver prints them ("0000:0A:00.0"); the physical
     * device's, so CUDA_VISIBLE_DEVICES changes the ordinal but not the bus id. */
    snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.0", 0u, (unsigned)(g.cfg.physical[dev] + 1),
             0u);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    API(1, do_pci_bus_id(pciBusId, len, dev));
}

static CUresult do_uuid(CUuuid *uuid, CUdevice dev)
{
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    /* Stable per physical device, so reports of two runs (and two processes) can be compared. */
    unsigned char b[16];
    simgpu_uuid_bytes(g.cfg.physical[dev], b);
    memcpy(uuid->bytes, b, sizeof b);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    API(1, do_uuid(uuid, dev));
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    API(1, do_uuid(uuid, dev));
}

/* ---------------------------------------------------------------------------------------- */
/* Contexts: only primary contexts exist                                                    */

static CUresult do_retain(CUcontext *pctx, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    struct sim_device *d = &g.dev[dev];
    if (!d->ctx_alive) {
        /* A context needs memory of its own: on a full card its creation fails. */
        if (d->ctx_bytes > dev_available(d))
            return CUDA_ERROR_OUT_OF_MEMORY;
        d->ctx_alive = 1;
    }
    d->ctx_refs++;
    *pctx = &d->ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    API(1, do_retain(pctx, dev));
}

static CUresult do_release(CUdevice dev)
{
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (g.dev[dev].ctx_refs == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    /* The context stays alive at zero references: tearing down its allocations is out of scope. */
    g.dev[dev].ctx_refs--;
    return CUDA_SUCCESS;
}

static CUresult do_get_state(CUdevice dev, unsigned int *flags, int *active)
{
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = g.dev[dev].ctx_alive;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    API(1, do_get_state(dev, flags, active));
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    API(1, do_release(dev));
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    API(1, do_release(dev));
}

static int valid_context(CUcontext ctx)
{
    for (int i = 0; i < g.ndev; i++)
        if (ctx == &g.dev[i].ctx)
            return g.dev[i].ctx_alive;
    return 0;
}

static CUresult do_set_current(CUcontext ctx)
{
    if (ctx && !valid_context(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    tls_ctx = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    API(1, do_set_current(ctx));
}

static CUresult do_get_current(CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = tls_ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    API(1, do_get_current(pctx));
}

/* cuCtxSetCurrent replaces the top of the stack; push and pop move it. */
static CUresult do_push(CUcontext ctx)
{
    if (!ctx || !valid_context(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tls_depth == CTX_STACK_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    tls_below[tls_depth++] = tls_ctx;
    tls_ctx = ctx;
    return CUDA_SUCCESS;
}

static CUresult do_pop(CUcontext *pctx)
{
    if (!tls_ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx)
        *pctx = tls_ctx;
    tls_ctx = tls_depth > 0 ? tls_below[--tls_depth] : NULL;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent(CUcontext ctx)
{
    API(1, do_push(ctx));
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    API(1, do_push(ctx));
}

EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    API(1, do_pop(pctx));
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    API(1, do_pop(pctx));
}

/* Green contexts (a share of the multiprocessors) and multicast objects (NVLink multicast,
 * CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0) are not simulated: each call is refused. */
EXPORT CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource,
                                       CUdevResourceType type)
{
    (void)device;
    (void)resource;
    (void)type;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
                                            const CUdevResource *input, CUdevResource *remaining,
                                            unsigned int useFlags, unsigned int minCount)
{
    (void)result;
    (void)nbGroups;
    (void)input;
    (void)remaining;
    (void)useFlags;
    (void)minCount;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
                                          unsigned int nbResources)
{
    (void)phDesc;
    (void)resources;
    (void)nbResources;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
                                 unsigned int flags)
{
    (void)phCtx;
    (void)desc;
    (void)dev;
    (void)flags;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
{
    (void)hCtx;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx)
{
    (void)pContext;
    (void)hCtx;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags,
                                       int priority)
{
    (void)phStream;
    (void)greenCtx;
    (void)flags;
    (void)priority;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuMulticastCreate(CUmemGenericAllocationHandle *mcHandle,
                                  const CUmulticastObjectProp *prop)
{
    (void)mcHandle;
    (void)prop;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuMulticastAddDevice(CUmemGenericAllocationHandle mcHandle, CUdevice dev)
{
    (void)mcHandle;
    (void)dev;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                   CUmemGenericAllocationHandle memHandle, size_t memOffset,
                                   size_t size, unsigned long long flags)
{
    (void)mcHandle;
    (void)mcOffset;
    (void)memHandle;
    (void)memOffset;
    (void)size;
    (void)flags;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuMulticastUnbind(CUmemGenericAllocationHandle mcHandle, CUdevice dev,
                                  size_t mcOffset, size_t size)
{
    (void)mcHandle;
    (void)dev;
    (void)mcOffset;
    (void)size;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

static CUresult do_ctx_device(CUdevice *device, CUcontext ctx)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx)
        ctx = tls_ctx;
    if (!ctx || !valid_context(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = ctx->device;
    return CUDA_SUCCESS;
}

/* The current context's device, as the real driver answers it: from the thread's own state,
 * without the process-wide lock. A thread's current context was made current under the lock
 * (which also ran the set-up), its device never changes and a context never dies here, so
 * nothing the lock guards is needed. A SIMGPU_FAIL rule naming the function still counts every
 * call: then the call takes the lock as every other does. */
static int ctx_device_fast(CUdevice *device)
{
    struct CUctx_st *ctx = tls_ctx;
    if (!ctx || !device || __atomic_load_n(&g.ctx_device_counted, __ATOMIC_RELAXED))
        return 0;
    *device = ctx->device;
    return 1;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    if (ctx_device_fast(device))
        return CUDA_SUCCESS;
    API(1, do_ctx_device(device, NULL));
}

EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    if (!ctx && ctx_device_fast(device))
        return CUDA_SUCCESS;
    API(1, do_ctx_device(device, ctx));
}

/* There is no work to wait for; a synchronisation point is where pools release memory. */
static CUresult do_ctx_sync(CUcontext ctx)
{
    if (!ctx)
        ctx = tls_ctx;
    if (!ctx || !valid_context(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    sync_pools();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void)
{
    API(1, do_ctx_sync(NULL));
}

EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    API(1, do_ctx_sync(ctx));
}

/* Streams are not modelled: any handle is accepted and they all behave like one stream. */
static CUresult do_stream_sync(CUstream stream)
{
    (void)stream;
    sync_pools();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    API(1, do_stream_sync(hStream));
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    API(1, do_stream_sync(hStream));
}

/* ---------------------------------------------------------------------------------------- */
/* Error names                                                                              */

static const struct {
    CUresult code;
    const char *name;
    const char *text;
} errors[] = {
    { CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
    { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down" },
    { CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library" },
    { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
    { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM",
      "OS call failed or operation not supported on this OS" },
    { CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
    { CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
    { CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
      "an illegal memory access was encountered" },
    { CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed" },
    { CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted" },
    { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    { CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", "file not found" },
    { CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
      "too many blocks in cooperative launch" },
    { CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static CUresult do_error_text(CUresult error, const char **pStr, int want_name)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        if (errors[i].code == error) {
            *pStr = want_name ? errors[i].name : errors[i].text;
            return CUDA_SUCCESS;
        }
    }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    API(0, do_error_text(error, pStr, 1));
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    API(0, do_error_text(error, pStr, 0));
}

/* Log callbacks work before cuInit (PyTorch registers one at its first CUDA check). */
static CUresult do_logs_register(CUlogsCallback fn, void *data, CUlogsCallbackHandle *out)
{
    if (!fn || !out)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUlogsCallbackEntry_st *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->fn = fn;
    e->data = data;
    e->next = g.logs;
    g.logs = e;
    *out = e;
    return CUDA_SUCCESS;
}

static CUresult do_logs_unregister(CUlogsCallbackHandle h)
{
    for (struct CUlogsCallbackEntry_st **link = &g.logs; *link; link = &(*link)->next) {
        if (*link == h) {
            *link = h->next;
            free(h);
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *userData,
                                       CUlogsCallbackHandle *callback_out)
{
    API(0, do_logs_register(callbackFunc, userData, callback_out));
}

EXPORT CUresult cuLogsUnregisterCallback(CUlogsCallbackHandle callback)
{
    API(0, do_logs_unregister(callback));
}

/* ---------------------------------------------------------------------------------------- */
/* Plain device memory                                                                      */

static CUresult do_mem_info(size_t *free_bytes, size_t *total)
{
    struct sim_device *d;
    CUresult r = current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    *free_bytes = dev_available(d);
    *total = d->capacity;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    API(1, do_mem_info(free, total));
}

static CUresult device_alloc(struct sim_device *d, uint64_t bytesize, CUdeviceptr *dptr)
{
    uint64_t len, addr;
    if (round_up(bytesize, SIM_ALIGN, &len) != 0 || len > d->capacity)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct rec *r = calloc(1, sizeof *r);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (dev_take(d, len, &addr) != 0) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->addr = addr;
    r->len = len;
    r->kind = REC_DEVICE;
    r->device = d->ordinal;
    rec_add(r);
    *dptr = addr;
    return CUDA_SUCCESS;
}

static CUresult do_mem_alloc(CUdeviceptr *dptr, size_t bytesize)
{
    struct sim_device *d;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    return device_alloc(d, bytesize, dptr);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    API(1, do_mem_alloc(dptr, bytesize));
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    API(1, free_device_pointer(dptr));
}

/* The 32-bit API of CUDA 3.0 and older. Simulated device addresses never fit in 32 bits, so
 * these exist for cuGetProcAddress's version cut-offs and refuse to work. */
EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    (void)dptr;
    (void)bytesize;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    (void)dptr;
    API(1, CUDA_ERROR_NOT_SUPPORTED);
}

static CUresult do_alloc_pitch(CUdeviceptr *dptr, size_t *pPitch, size_t width, size_t height,
                               unsigned int elem)
{
    struct sim_device *d;
    uint64_t pitch;
    if (!dptr || !pPitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (round_up(width, SIM_ALIGN, &pitch) != 0 || height > UINT64_MAX / pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = device_alloc(d, pitch * height, dptr);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes)
{
    API(1, do_alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
}

/* Managed and pinned memory is real host memory the caller may write to. */
static void *host_map(uint64_t bytesize, uint64_t *map_len)
{
    long page = sysconf(_SC_PAGESIZE);
    if (round_up(bytesize, page > 0 ? (uint64_t)page : 4096, map_len) != 0)
        return NULL;
    void *p = mmap(NULL, *map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static CUresult do_alloc_managed(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    struct sim_device *d;
    uint64_t len, map_len;
    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    /* Charged to the device like resident memory; it takes no device addresses, so it does
     * not fragment the device range. */
    if (round_up(bytesize, SIM_ALIGN, &len) != 0 || len > dev_available(d))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct rec *rc = calloc(1, sizeof *rc);
    if (!rc)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = host_map(bytesize, &map_len);
    if (!p) {
        free(rc);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    d->phys += len;
    rc->addr = (uint64_t)(uintptr_t)p;
    rc->len = len;
    rc->map_len = map_len;
    rc->kind = REC_MANAGED;
    rc->device = d->ordinal;
    rec_add(rc);
    *dptr = rc->addr;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    API(1, do_alloc_managed(dptr, bytesize, flags));
}

static CUresult do_host_alloc(void **pp, size_t bytesize, unsigned int flags)
{
    struct sim_device *d;
    uint64_t map_len;
    if (!pp || bytesize == 0 ||
        (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    struct rec *rc = calloc(1, sizeof *rc);
    if (!rc)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = host_map(bytesize, &map_len);
    if (!p) {
        free(rc);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc->addr = (uint64_t)(uintptr_t)p;
    rc->len = map_len;
    rc->map_len = map_len;
    rc->kind = REC_HOST;
    rc->device = d->ordinal;
    rec_add(rc);
    *pp = p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    API(1, do_host_alloc(pp, bytesize, 0));
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    API(1, do_host_alloc(pp, bytesize, Flags));
}

static CUresult do_free_host(void *p)
{
    if (!p)
        return CUDA_SUCCESS; /* free(NULL) semantics, as the real driver */
    struct rec *r = rec_find((uint64_t)(uintptr_t)p);
    if (!r || r->kind != REC_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    rec_release(r);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    API(1, do_free_host(p));
}

/* The VMM mapping holding [p, p + n), or NULL. */
static const struct va_mapping *mapping_containing(uint64_t p, uint64_t n)
{
    for (size_t i = 0; i < g.nmaps; i++) {
        const struct va_mapping *m = &g.maps[i];
        if (p >= m->addr && p - m->addr < m->len && n <= m->len - (p - m->addr))
            return m;
    }
    return NULL;
}

static CUresult do_address_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    const struct rec *r = rec_containing(dptr, 1);
    if (r) {
        if (pbase)
            *pbase = r->addr;
        if (psize)
            *psize = r->len;
        return CUDA_SUCCESS;
    }
    const struct va_mapping *m = mapping_containing(dptr, 1);
    if (m) {
        if (pbase)
            *pbase = m->addr;
        if (psize)
            *psize = m->len;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    API(1, do_address_range(pbase, psize, dptr));
}

/* Sets the bytes, device memory included (see the device range's mmap). Zeros over whole
 * pages are given back rather than written, so clearing a large buffer commits no RAM. */
static void set_bytes(CUdeviceptr dst, unsigned char uc, size_t n)
{
    const uint64_t page = 4096;
    uint64_t start = (dst + page - 1) & ~(page - 1), end = (dst + n) & ~(page - 1);
    if (uc != 0 || end <= start || end - start < (1u << 20)) {
        memset((void *)(uintptr_t)dst, uc, n);
        return;
    }
    memset((void *)(uintptr_t)dst, 0, start - dst);
    drop_pages(start, end - start);
    memset((void *)(uintptr_t)end, 0, dst + n - end);
}

static CUresult do_memset8(CUdeviceptr dst, unsigned char uc, size_t n)
{
    const struct rec *r = rec_containing(dst, n);
    if (r) {
        if (r->kind != REC_HOST && n > 0) {
            set_bytes(dst, uc, n);
            simgpu_device_written((const void *)(uintptr_t)dst, n);
        }
        return CUDA_SUCCESS;
    }
    if (mapping_containing(dst, n)) {
        if (n > 0) {
            set_bytes(dst, uc, n);
            simgpu_device_written((const void *)(uintptr_t)dst, n);
        }
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    API(1, do_memset8(dstDevice, uc, N));
}

/* 32-bit words, on a 4-byte aligned range of device, managed or mapped VMM memory. Zeros go
 * through set_bytes, so clearing a large buffer commits no RAM. Streams are not modelled: the
 * words are there when the call returns. */
static CUresult do_memset32(CUdeviceptr dst, unsigned int ui, size_t n)
{
    if (dst % 4 != 0 || n > SIZE_MAX / 4)
        return CUDA_ERROR_INVALID_VALUE;
    if (!rec_containing(dst, n * 4) && !mapping_containing(dst, n * 4))
        return CUDA_ERROR_INVALID_VALUE;
    if (n == 0)
        return CUDA_SUCCESS;
    if (ui == 0) {
        set_bytes(dst, 0, n * 4);
    } else {
        uint32_t *w = (uint32_t *)(uintptr_t)dst;
        for (size_t i = 0; i < n; i++)
            w[i] = ui;
    }
    simgpu_device_written((const void *)(uintptr_t)dst, n * 4);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    (void)hStream;
    API(1, do_memset32(dstDevice, ui, N));
}

EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                      CUstream hStream)
{
    (void)hStream;
    API(1, do_memset32(dstDevice, ui, N));
}

/* One 32-bit word into device, managed, mapped VMM or pinned host memory (where a stream
 * usually signals the host), written at once. */
static CUresult do_write_value32(CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    if (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER || addr % 4 != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!rec_holding(addr, 4) && !mapping_containing(addr, 4))
        return CUDA_ERROR_INVALID_VALUE;
    *(uint32_t *)(uintptr_t)addr = value;
    simgpu_device_written((const void *)(uintptr_t)addr, 4);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                     unsigned int flags)
{
    (void)stream;
    API(1, do_write_value32(addr, value, flags));
}

EXPORT CUresult cuStreamWriteValue32_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                          unsigned int flags)
{
    (void)stream;
    API(1, do_write_value32(addr, value, flags));
}

EXPORT CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                        unsigned int flags)
{
    (void)stream;
    API(1, do_write_value32(addr, value, flags));
}

EXPORT CUresult cuStreamWriteValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                             unsigned int flags)
{
    (void)stream;
    API(1, do_write_value32(addr, value, flags));
}

/* ---------------------------------------------------------------------------------------- */
/* Stream-ordered allocation                                                                */

static CUresult do_alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    struct sim_device *d;
    (void)stream;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    return pool_alloc(d->current_pool, bytesize, dptr);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    API(1, do_alloc_async(dptr, bytesize, hStream));
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    API(1, do_alloc_async(dptr, bytesize, hStream));
}

static CUresult do_alloc_from_pool(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool)
{
    if (!pool_valid(pool))
        return CUDA_ERROR_INVALID_VALUE;
    return pool_alloc(pool, bytesize, dptr);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream)
{
    (void)hStream;
    API(1, do_alloc_from_pool(dptr, bytesize, pool));
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream)
{
    (void)hStream;
    API(1, do_alloc_from_pool(dptr, bytesize, pool));
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    (void)hStream;
    API(1, free_device_pointer(dptr));
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    (void)hStream;
    API(1, free_device_pointer(dptr));
}

static CUresult do_get_pool(CUmemoryPool *pool_out, CUdevice dev, int want_default)
{
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = want_default ? g.dev[dev].default_pool : g.dev[dev].current_pool;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    API(1, do_get_pool(pool_out, dev, 1));
}

EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    API(1, do_get_pool(pool, dev, 0));
}

static CUresult do_set_pool(CUdevice dev, CUmemoryPool pool)
{
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!pool_valid(pool) || pool->device != dev)
        return CUDA_ERROR_INVALID_VALUE;
    g.dev[dev].current_pool = pool;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    API(1, do_set_pool(dev, pool));
}

static CUresult do_pool_create(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(props->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->device = props->location.id;
    p->max_size = props->maxSize;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    p->next = g.pools;
    g.pools = p;
    *pool = p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    API(1, do_pool_create(pool, poolProps));
}

static CUresult do_pool_destroy(CUmemoryPool pool)
{
    if (!pool_valid(pool) || pool->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    for (struct CUmemPoolHandle_st **link = &g.pools; *link; link = &(*link)->next) {
        if (*link == pool) {
            *link = pool->next;
            break;
        }
    }
    struct sim_device *d = &g.dev[pool->device];
    if (d->current_pool == pool)
        d->current_pool = d->default_pool;
    /* Outstanding allocations keep the pool's memory until they are freed, as on the card. */
    pool->destroyed = 1;
    pool_trim(pool, 0);
    if (pool->used == 0)
        free(pool);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    API(1, do_pool_destroy(pool));
}

static CUresult do_pool_get_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    if (!pool_valid(pool) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = pool->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        *(cuuint64_t *)value = pool->threshold;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
        *(cuuint64_t *)value = pool->reserved;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        *(cuuint64_t *)value = pool->reserved_high;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        *(cuuint64_t *)value = pool->used;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        *(cuuint64_t *)value = pool->used_high;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    API(1, do_pool_get_attr(pool, attr, value));
}

static CUresult do_pool_set_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    if (!pool_valid(pool) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        pool->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value != 0;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        pool->threshold = *(cuuint64_t *)value;
        return CUDA_SUCCESS;
    /* The high-water marks can only be reset (to the current value), by writing 0. */
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            return CUDA_ERROR_INVALID_VALUE;
        pool->reserved_high = pool->reserved;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            return CUDA_ERROR_INVALID_VALUE;
        pool->used_high = pool->used;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    API(1, do_pool_set_attr(pool, attr, value));
}

static CUresult do_pool_trim(CUmemoryPool pool, size_t keep)
{
    if (!pool_valid(pool))
        return CUDA_ERROR_INVALID_VALUE;
    pool_trim(pool, keep);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    API(1, do_pool_trim(pool, minBytesToKeep));
}

/* ---------------------------------------------------------------------------------------- */
/* Virtual memory management                                                                */

static CUresult check_alloc_prop(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(prop->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

static CUresult do_granularity(size_t *granularity, const CUmemAllocationProp *prop,
                               CUmemAllocationGranularity_flags option)
{
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_alloc_prop(prop);
    if (r != CUDA_SUCCESS)
        return r;
    *granularity = SIM_GRANULARITY;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option)
{
    API(1, do_granularity(granularity, prop, option));
}

static CUresult do_mem_create(CUmemGenericAllocationHandle *handle, size_t size,
                              const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (!handle || size == 0 || size % SIM_GRANULARITY != 0 || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_alloc_prop(prop);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d = &g.dev[prop->location.id];
    /* Physical memory without addresses: it needs capacity but never a contiguous hole. */
    if (size > dev_available(d))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct vmm_handle *h = calloc(1, sizeof *h);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    h->id = ++g.next_handle;
    h->len = size;
    h->device = d->ordinal;
    h->refs = 1;
    h->prop = *prop;
    d->phys += size;
    HASH_ADD(hh, g.handles, id, sizeof h->id, h);
    *handle = h->id;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    API(1, do_mem_create(handle, size, prop, flags));
}

static struct vmm_handle *handle_find(CUmemGenericAllocationHandle id)
{
    struct vmm_handle *h = NULL;
    uint64_t key = id;
    HASH_FIND(hh, g.handles, &key, sizeof key, h);
    return h;
}

static void handle_free(struct vmm_handle *h)
{
    g.dev[h->device].phys -= h->len;
    HASH_DEL(g.handles, h);
    free(h);
}

static CUresult do_mem_release(CUmemGenericAllocationHandle id)
{
    struct vmm_handle *h = handle_find(id);
    if (!h || h->refs == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* Released while mapped: the memory lives on until the last mapping goes away. */
    if (--h->refs == 0 && h->maps == 0)
        handle_free(h);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    API(1, do_mem_release(handle));
}

static int grow_array(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, ncap * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

static CUresult do_address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                   CUdeviceptr addr, unsigned long long flags)
{
    uint64_t got;
    (void)flags;
    if (!ptr || size == 0 || size % SIM_GRANULARITY != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment & (alignment - 1))
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < SIM_GRANULARITY)
        alignment = SIM_GRANULARITY;
    if (grow_array((void **)&g.resv, &g.cap_resv, g.nresv, sizeof *g.resv) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* addr is a hint: honoured when that range is free, ignored otherwise. */
    if (addr != 0 && addr % alignment == 0 && ra_alloc_at(&g.va, addr, size) == 0)
        got = addr;
    else if (ra_alloc(&g.va, size, alignment, &got) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g.resv[g.nresv].addr = got;
    g.resv[g.nresv].len = size;
    g.nresv++;
    *ptr = got;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags)
{
    API(1, do_address_reserve(ptr, size, alignment, addr, flags));
}

static int overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return a < b + blen && b < a + alen;
}

static CUresult do_address_free(CUdeviceptr ptr, size_t size)
{
    for (size_t i = 0; i < g.nresv; i++) {
        if (g.resv[i].addr != ptr || g.resv[i].len != size)
            continue;
        /* Refused while something is still mapped inside: unmap first. */
        for (size_t j = 0; j < g.nmaps; j++)
            if (overlaps(g.maps[j].addr, g.maps[j].len, ptr, size))
                return CUDA_ERROR_INVALID_VALUE;
        ra_free(&g.va, ptr, size);
        g.resv[i] = g.resv[--g.nresv];
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    API(1, do_address_free(ptr, size));
}

static CUresult do_mem_map(CUdeviceptr ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle id, unsigned long long flags)
{
    struct vmm_handle *h = handle_find(id);
    int inside = 0;

    if (flags != 0 || size == 0 || ptr % SIM_GRANULARITY || size % SIM_GRANULARITY ||
        offset % SIM_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    if (!h || h->refs == 0 || offset > h->len || size > h->len - offset)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < g.nresv; i++) {
        const struct va_range *v = &g.resv[i];
        if (ptr >= v->addr && ptr - v->addr < v->len && size <= v->len - (ptr - v->addr))
            inside = 1;
    }
    if (!inside)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t j = 0; j < g.nmaps; j++)
        if (overlaps(g.maps[j].addr, g.maps[j].len, ptr, size))
            return CUDA_ERROR_INVALID_VALUE;
    if (grow_array((void **)&g.maps, &g.cap_maps, g.nmaps, sizeof *g.maps) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g.maps[g.nmaps].addr = ptr;
    g.maps[g.nmaps].len = size;
    g.maps[g.nmaps].h = h;
    g.nmaps++;
    h->maps++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    API(1, do_mem_map(ptr, size, offset, handle, flags));
}

static CUresult do_mem_unmap(CUdeviceptr ptr, size_t size)
{
    size_t hits = 0;
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* Every mapping touched must lie wholly inside the range: no partial unmaps. */
    for (size_t j = 0; j < g.nmaps; j++) {
        const struct va_mapping *m = &g.maps[j];
        if (!overlaps(m->addr, m->len, ptr, size))
            continue;
        if (m->addr < ptr || m->addr + m->len > ptr + size)
            return CUDA_ERROR_INVALID_VALUE;
        hits++;
    }
    if (hits == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t j = 0; j < g.nmaps;) {
        struct va_mapping m = g.maps[j];
        if (!overlaps(m.addr, m.len, ptr, size)) {
            j++;
            continue;
        }
        g.maps[j] = g.maps[--g.nmaps];
        if (--m.h->maps == 0 && m.h->refs == 0)
            handle_free(m.h);
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    API(1, do_mem_unmap(ptr, size));
}

static CUresult do_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                              size_t count)
{
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (!valid_device(desc[i].location.id))
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    /* The whole range must be backed by mappings, which may be several adjacent ones. */
    uint64_t cur = ptr, end = ptr + size;
    while (cur < end) {
        const struct va_mapping *m = mapping_containing(cur, 1);
        if (!m)
            return CUDA_ERROR_INVALID_VALUE;
        cur = m->addr + m->len;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count)
{
    API(1, do_set_access(ptr, size, desc, count));
}

/* The handle mapped at addr (any address inside a mapping), one reference more. A handle
 * released while still mapped comes back this way, as on the real driver. */
static CUresult do_retain_handle(CUmemGenericAllocationHandle *handle, void *addr)
{
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    const struct va_mapping *m = mapping_containing((uint64_t)(uintptr_t)addr, 1);
    if (!m)
        return CUDA_ERROR_INVALID_VALUE;
    m->h->refs++;
    *handle = m->h->id;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    API(1, do_retain_handle(handle, addr));
}

static CUresult do_handle_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle id)
{
    struct vmm_handle *h = handle_find(id);
    if (!prop || !h || h->refs == 0)
        return CUDA_ERROR_INVALID_VALUE;
    *prop = h->prop;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                       CUmemGenericAllocationHandle handle)
{
    API(1, do_handle_props(prop, handle));
}

/* Shareable handles would carry memory to another process, whose simulated driver counts only
 * its own: refused, after the checks a real driver makes first. PyTorch needs them only to
 * share expandable segments between processes. */
static CUresult do_export_handle(void *shareable, CUmemGenericAllocationHandle id)
{
    struct vmm_handle *h = handle_find(id);
    if (!shareable || !h || h->refs == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle,
                                             CUmemGenericAllocationHandle handle,
                                             CUmemAllocationHandleType handleType,
                                             unsigned long long flags)
{
    (void)handleType;
    (void)flags;
    API(1, do_export_handle(shareableHandle, handle));
}

static CUresult do_import_handle(CUmemGenericAllocationHandle *handle)
{
    return handle ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                               CUmemAllocationHandleType shHandleType)
{
    (void)osHandle;
    (void)shHandleType;
    API(1, do_import_handle(handle));
}

/* ---------------------------------------------------------------------------------------- */
/* Modules, functions and launches (what libcaffe2_nvrtc.so links; nothing ever runs)       */

static struct CUmod_st *module_find(CUmodule m)
{
    for (struct CUmod_st *q = g.modules; q; q = q->next)
        if (q == m)
            return q;
    return NULL;
}

static struct CUfunc_st *function_find(CUfunction f)
{
    for (struct CUmod_st *m = g.modules; m; m = m->next)
        for (struct CUfunc_st *q = m->funcs; q; q = q->next)
            if (q == f)
                return q;
    return NULL;
}

/* Any image loads into the current context's device: it is never read. */
static CUresult do_module_load(CUmodule *module, const void *image)
{
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    if (!tls_ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->device = tls_ctx->device;
    m->next = g.modules;
    g.modules = m;
    *module = m;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    API(1, do_module_load(module, image));
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                   CUjit_option *options, void **optionValues)
{
    (void)numOptions;
    (void)options;
    (void)optionValues;
    API(1, do_module_load(module, image));
}

static CUresult do_module_load_file(CUmodule *module, const char *fname)
{
    if (!module || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    if (access(fname, R_OK) != 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    return do_module_load(module, fname);
}

EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    API(1, do_module_load_file(module, fname));
}

static CUresult do_module_unload(CUmodule m)
{
    for (struct CUmod_st **link = &g.modules; *link; link = &(*link)->next) {
        if (*link != m)
            continue;
        *link = m->next;
        for (struct CUfunc_st *f = m->funcs, *next; f; f = next) {
            next = f->next;
            free(f);
        }
        free(m);
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    API(1, do_module_unload(hmod));
}

/* Every name is in every module; the same name gives the same handle. */
static CUresult do_get_function(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    struct CUmod_st *m = module_find(hmod);
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    for (struct CUfunc_st *f = m->funcs; f; f = f->next) {
        if (strcmp(f->name, name) == 0) {
            *hfunc = f;
            return CUDA_SUCCESS;
        }
    }
    size_t n = strlen(name);
    struct CUfunc_st *f = calloc(1, sizeof *f + n + 1);
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(f->name, name, n + 1);
    f->mod = m;
    f->max_dynamic_smem = 49152; /* 48 KiB without opting in, less the static part (none) */
    f->carveout = -1;
    f->next = m->funcs;
    m->funcs = f;
    *hfunc = f;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    API(1, do_get_function(hfunc, hmod, name));
}

static CUresult do_func_get_attribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    struct CUfunc_st *f = function_find(hfunc);
    if (!pi || (int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    const struct simgpu_card *c = g.cfg.card[f->mod->device];
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *pi = 1024;
        break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
        *pi = 32;
        break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        *pi = c->major * 10 + c->minor; /* built for the device it was loaded on */
        break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *pi = f->max_dynamic_smem;
        break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        *pi = f->carveout;
        break;
    default: /* static shared, constant and local memory, cache mode, clusters: none */
        *pi = 0;
        break;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    API(1, do_func_get_attribute(pi, attrib, hfunc));
}

static CUresult do_func_set_attribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    struct CUfunc_st *f = function_find(hfunc);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (value < 0 || value > g.cfg.card[f->mod->device]->smem_optin)
            return CUDA_ERROR_INVALID_VALUE;
        f->max_dynamic_smem = value;
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        if (value < -1 || value > 100)
            return CUDA_ERROR_INVALID_VALUE;
        f->carveout = value;
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        return CUDA_SUCCESS; /* accepted; clusters change nothing here */
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    API(1, do_func_set_attribute(hfunc, attrib, value));
}

static CUresult do_func_cache_config(CUfunction hfunc, CUfunc_cache config)
{
    if (!function_find(hfunc))
        return CUDA_ERROR_INVALID_HANDLE;
    if (config != CU_FUNC_CACHE_PREFER_NONE && config != CU_FUNC_CACHE_PREFER_SHARED &&
        config != CU_FUNC_CACHE_PREFER_L1 && config != CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    API(1, do_func_cache_config(hfunc, config));
}

/* Blocks of `block` threads, each with `dynamic` bytes of dynamic shared memory, that one
 * multiprocessor of the card holds at once (every function uses 32 registers a thread, which
 * never binds first). */
static int blocks_per_sm(const struct simgpu_card *c, int block, size_t dynamic)
{
    if (block <= 0 || block > 1024)
        return 0;
    int n = c->blocks_per_sm;
    int by_threads = c->threads_per_sm / ((block + 31) / 32 * 32);
    if (by_threads < n)
        n = by_threads;
    if (dynamic > 0) {
        size_t reserved = c->major >= 8 ? 1024 : 0;
        size_t by_smem = (size_t)c->smem_per_sm / (dynamic + reserved);
        if (by_smem < (size_t)n)
            n = (int)by_smem;
    }
    return n;
}

static CUresult do_occupancy(int *numBlocks, CUfunction func, int blockSize, size_t dynamic)
{
    struct CUfunc_st *f = function_find(func);
    if (!numBlocks)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    *numBlocks = blocks_per_sm(g.cfg.card[f->mod->device], blockSize, dynamic);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                            int blockSize, size_t dynamicSMemSize)
{
    API(1, do_occupancy(numBlocks, func, blockSize, dynamicSMemSize));
}

struct launch {
    CUfunction f;
    unsigned int grid[3], block[3], smem;
};

/* A launch is checked as the real driver checks it, and then nothing runs. */
static CUresult do_launch(const struct launch *l, void **params, void **extra, int cooperative)
{
    if (!tls_ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUfunc_st *f = function_find(l->f);
    if (!f || f->mod->device != tls_ctx->device)
        return CUDA_ERROR_INVALID_HANDLE;
    if (params && extra)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < 3; i++)
        if (l->grid[i] == 0 || l->block[i] == 0)
            return CUDA_ERROR_INVALID_VALUE;
    if (l->grid[0] > INT_MAX || l->grid[1] > 65535 || l->grid[2] > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
    if (l->block[0] > 1024 || l->block[1] > 1024 || l->block[2] > 64 || threads > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->smem > (unsigned int)f->max_dynamic_smem)
        return CUDA_ERROR_INVALID_VALUE;
    if (cooperative) {
        /* Every block of a cooperative grid must be resident at once. */
        const struct simgpu_card *c = g.cfg.card[f->mod->device];
        uint64_t blocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
        if (blocks > (uint64_t)blocks_per_sm(c, (int)threads, l->smem) * (uint64_t)c->sms)
            return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    simgpu_kernel_launched();
    return CUDA_SUCCESS;
}

#define LAUNCH(f, gx, gy, gz, bx, by, bz, smem) \
    { (f), { (gx), (gy), (gz) }, { (bx), (by), (bz) }, (smem) }

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                               unsigned int gridDimZ, unsigned int blockDimX,
                               unsigned int blockDimY, unsigned int blockDimZ,
                               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                               void **extra)
{
    struct launch l = LAUNCH(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                             sharedMemBytes);
    (void)hStream;
    API(1, do_launch(&l, kernelParams, extra, 0));
}

EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                    unsigned int gridDimZ, unsigned int blockDimX,
                                    unsigned int blockDimY, unsigned int blockDimZ,
                                    unsigned int sharedMemBytes, CUstream hStream,
                                    void **kernelParams, void **extra)
{
    struct launch l = LAUNCH(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                             sharedMemBytes);
    (void)hStream;
    API(1, do_launch(&l, kernelParams, extra, 0));
}

EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                          unsigned int gridDimY, unsigned int gridDimZ,
                                          unsigned int blockDimX, unsigned int blockDimY,
                                          unsigned int blockDimZ, unsigned int sharedMemBytes,
                                          CUstream hStream, void **kernelParams)
{
    struct launch l = LAUNCH(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                             sharedMemBytes);
    (void)hStream;
    API(1, do_launch(&l, kernelParams, NULL, 1));
}

EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                               unsigned int gridDimY, unsigned int gridDimZ,
                                               unsigned int blockDimX, unsigned int blockDimY,
                                               unsigned int blockDimZ, unsigned int sharedMemBytes,
                                               CUstream hStream, void **kernelParams)
{
    struct launch l = LAUNCH(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                             sharedMemBytes);
    (void)hStream;
    API(1, do_launch(&l, kernelParams, NULL, 1));
}

/* The image cuLinkComplete hands back: an ELF header's first bytes, enough for a caller that
 * looks; cuModuleLoadData reads none of it. */
static const unsigned char linked_image[64] = { 0x7f, 'E', 'L', 'F', 2, 1, 1, 0x33 };

static struct CUlinkState_st *link_find(CUlinkState st)
{
    for (struct CUlinkState_st *q = g.links; q; q = q->next)
        if (q == st)
            return q;
    return NULL;
}

static CUresult do_link_create(unsigned int n, CUjit_option *options, void **values,
                               CUlinkState *out)
{
    if (!out || (n > 0 && (!options || !values)))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUlinkState_st *st = calloc(1, sizeof *st);
    if (!st)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st->next = g.links;
    g.links = st;
    *out = st;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                CUlinkState *stateOut)
{
    API(1, do_link_create(numOptions, options, optionValues, stateOut));
}

static CUresult do_link_add(CUlinkState state, const void *data, size_t size)
{
    struct CUlinkState_st *st = link_find(state);
    if (!st)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!data || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    st->inputs++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                 const char *name, unsigned int numOptions, CUjit_option *options,
                                 void **optionValues)
{
    (void)type;
    (void)name;
    (void)numOptions;
    (void)options;
    (void)optionValues;
    API(1, do_link_add(state, data, size));
}

static CUresult do_link_complete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    struct CUlinkState_st *st = link_find(state);
    if (!st)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!cubinOut || !sizeOut || st->inputs == 0)
        return CUDA_ERROR_INVALID_VALUE;
    *cubinOut = (void *)linked_image;
    *sizeOut = sizeof linked_image;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    API(1, do_link_complete(state, cubinOut, sizeOut));
}

static CUresult do_link_destroy(CUlinkState state)
{
    for (struct CUlinkState_st **link = &g.links; *link; link = &(*link)->next) {
        if (*link == state) {
            *link = state->next;
            free(state);
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuLinkDestroy(CUlinkState state)
{
    API(1, do_link_destroy(state));
}

/* What the driver knows about a pointer into any of its allocations or VMM mappings. */
static CUresult do_pointer_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    uint64_t base, len;
    int device, kind;
    const struct rec *r = rec_holding(ptr, 1);
    const struct va_mapping *m = r ? NULL : mapping_containing(ptr, 1);

    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    if (r) {
        base = r->addr;
        len = r->kind == REC_HOST ? r->map_len : r->len;
        device = r->device;
        kind = r->kind;
    } else if (m) {
        base = m->addr;
        len = m->len;
        device = m->h->device;
        kind = REC_DEVICE;
    } else {
        return CUDA_ERROR_INVALID_VALUE; /* not memory this driver handed out */
    }
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = &g.dev[device].ctx;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = kind == REC_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr; /* unified addressing: the same address */
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (kind != REC_HOST && kind != REC_MANAGED)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned int *)data = kind == REC_MANAGED;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = device;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = len;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(unsigned int *)data = 1;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    API(1, do_pointer_attribute(data, attribute, ptr));
}

/* A tensor map only describes memory to the kernels that would read it: checked and zeroed. */
/* What cuTensorMapEncodeTiled is given that is checked here: the rest only shapes the
 * descriptor, which nothing reads on a simulated card. */
struct tensor_map_args {
    cuuint32_t rank;
    const void *address;
    const cuuint64_t *dims, *strides;
    const cuuint32_t *box, *elem;
};

static CUresult do_tensor_map(CUtensorMap *map, const struct tensor_map_args *t)
{
    if (!map || t->rank == 0 || t->rank > 5 || !t->address || (uintptr_t)t->address % 16 != 0 ||
        !t->dims || !t->box || !t->elem || (t->rank > 1 && !t->strides))
        return CUDA_ERROR_INVALID_VALUE;
    memset(map, 0, sizeof *map);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                       cuuint32_t tensorRank, void *globalAddress,
                                       const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                       const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                                       CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                       CUtensorMapL2promotion l2Promotion,
                                       CUtensorMapFloatOOBfill oobFill)
{
    (void)tensorDataType;
    (void)interleave;
    (void)swizzle;
    (void)l2Promotion;
    (void)oobFill;
    const struct tensor_map_args t = { tensorRank,    globalAddress, globalDim,
                                       globalStrides, boxDim,        elementStrides };
    API(1, do_tensor_map(tensorMap, &t));
}

/* ---------------------------------------------------------------------------------------- */
/* Entry points                                                                             */

static CUresult do_export_table(const void **ppExportTable)
{
    /* The real runtime's private tables: nothing here implements them. */
    if (ppExportTable)
        *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    (void)pExportTableId;
    API(0, do_export_table(ppExportTable));
}

/* One row per exported function: base name, the CUDA version that introduced this ABI, and
 * whether it is the per-thread-default-stream variant. cuGetProcAddress picks, among the rows
 * of a base name, the newest one not newer than the version asked for. */
struct proc_entry {
    const char *base;
    const char *symbol;
    int version;
    int ptsz;
    void *fn;
};

#define PROC(base, fn, version, ptsz)        \
    {                                        \
        base, #fn, version, ptsz, (void *)fn \
    }

static const struct proc_entry proc_table[] = {
    PROC("cuInit", cuInit, 2000, 0),
    PROC("cuDriverGetVersion", cuDriverGetVersion, 2020, 0),
    PROC("cuDeviceGet", cuDeviceGet, 2000, 0),
    PROC("cuDeviceGetCount", cuDeviceGetCount, 2000, 0),
    PROC("cuDeviceGetName", cuDeviceGetName, 2000, 0),
    PROC("cuDeviceTotalMem", cuDeviceTotalMem_v2, 3020, 0),
    PROC("cuDeviceGetAttribute", cuDeviceGetAttribute, 2000, 0),
    PROC("cuDeviceGetPCIBusId", cuDeviceGetPCIBusId, 4010, 0),
    PROC("cuDeviceGetUuid", cuDeviceGetUuid, 9020, 0),
    PROC("cuDeviceGetUuid", cuDeviceGetUuid_v2, 11040, 0),
    PROC("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 7000, 0),
    PROC("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState, 7000, 0),
    PROC("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease, 7000, 0),
    PROC("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2, 11000, 0),
    PROC("cuCtxSetCurrent", cuCtxSetCurrent, 4000, 0),
    PROC("cuCtxGetCurrent", cuCtxGetCurrent, 4000, 0),
    PROC("cuCtxPushCurrent", cuCtxPushCurrent, 2000, 0),
    PROC("cuCtxPushCurrent", cuCtxPushCurrent_v2, 4000, 0),
    PROC("cuCtxPopCurrent", cuCtxPopCurrent, 2000, 0),
    PROC("cuCtxPopCurrent", cuCtxPopCurrent_v2, 4000, 0),
    PROC("cuDeviceGetDevResource", cuDeviceGetDevResource, 12040, 0),
    PROC("cuDevSmResourceSplitByCount", cuDevSmResourceSplitByCount, 12040, 0),
    PROC("cuDevResourceGenerateDesc", cuDevResourceGenerateDesc, 12040, 0),
    PROC("cuGreenCtxCreate", cuGreenCtxCreate, 12040, 0),
    PROC("cuGreenCtxDestroy", cuGreenCtxDestroy, 12040, 0),
    PROC("cuCtxFromGreenCtx", cuCtxFromGreenCtx, 12040, 0),
    PROC("cuGreenCtxStreamCreate", cuGreenCtxStreamCreate, 12050, 0),
    PROC("cuCtxGetDevice", cuCtxGetDevice, 2000, 0),
    PROC("cuCtxGetDevice", cuCtxGetDevice_v2, 13000, 0),
    PROC("cuCtxSynchronize", cuCtxSynchronize, 2000, 0),
    PROC("cuCtxSynchronize", cuCtxSynchronize_v2, 13000, 0),
    PROC("cuStreamSynchronize", cuStreamSynchronize, 2000, 0),
    PROC("cuStreamSynchronize", cuStreamSynchronize_ptsz, 7000, 1),
    PROC("cuGetErrorName", cuGetErrorName, 6000, 0),
    PROC("cuGetErrorString", cuGetErrorString, 6000, 0),
    PROC("cuLogsRegisterCallback", cuLogsRegisterCallback, 12090, 0),
    PROC("cuLogsUnregisterCallback", cuLogsUnregisterCallback, 12090, 0),
    PROC("cuMemGetInfo", cuMemGetInfo_v2, 3020, 0),
    PROC("cuMemAlloc", cuMemAlloc, 2000, 0),
    PROC("cuMemAlloc", cuMemAlloc_v2, 3020, 0),
    PROC("cuMemFree", cuMemFree, 2000, 0),
    PROC("cuMemFree", cuMemFree_v2, 3020, 0),
    PROC("cuMemAllocPitch", cuMemAllocPitch_v2, 3020, 0),
    PROC("cuMemGetAddressRange", cuMemGetAddressRange_v2, 3020, 0),
    PROC("cuMemsetD8", cuMemsetD8_v2, 3020, 0),
    PROC("cuMemsetD32Async", cuMemsetD32Async, 3020, 0),
    PROC("cuMemsetD32Async", cuMemsetD32Async_ptsz, 7000, 1),
    PROC("cuStreamWriteValue32", cuStreamWriteValue32, 8000, 0),
    PROC("cuStreamWriteValue32", cuStreamWriteValue32_ptsz, 8000, 1),
    PROC("cuStreamWriteValue32", cuStreamWriteValue32_v2, 11070, 0),
    PROC("cuStreamWriteValue32", cuStreamWriteValue32_v2_ptsz, 11070, 1),
    PROC("cuMemAllocManaged", cuMemAllocManaged, 6000, 0),
    PROC("cuMemAllocHost", cuMemAllocHost_v2, 3020, 0),
    PROC("cuMemHostAlloc", cuMemHostAlloc, 2020, 0),
    PROC("cuMemFreeHost", cuMemFreeHost, 2000, 0),
    PROC("cuMemAllocAsync", cuMemAllocAsync, 11020, 0),
    PROC("cuMemAllocAsync", cuMemAllocAsync_ptsz, 11020, 1),
    PROC("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync, 11020, 0),
    PROC("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync_ptsz, 11020, 1),
    PROC("cuMemFreeAsync", cuMemFreeAsync, 11020, 0),
    PROC("cuMemFreeAsync", cuMemFreeAsync_ptsz, 11020, 1),
    PROC("cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool, 11020, 0),
    PROC("cuDeviceGetMemPool", cuDeviceGetMemPool, 11020, 0),
    PROC("cuDeviceSetMemPool", cuDeviceSetMemPool, 11020, 0),
    PROC("cuMemPoolCreate", cuMemPoolCreate, 11020, 0),
    PROC("cuMemPoolDestroy", cuMemPoolDestroy, 11020, 0),
    PROC("cuMemPoolGetAttribute", cuMemPoolGetAttribute, 11020, 0),
    PROC("cuMemPoolSetAttribute", cuMemPoolSetAttribute, 11020, 0),
    PROC("cuMemPoolTrimTo", cuMemPoolTrimTo, 11020, 0),
    PROC("cuMemGetAllocationGranularity", cuMemGetAllocationGranularity, 10020, 0),
    PROC("cuMemCreate", cuMemCreate, 10020, 0),
    PROC("cuMemRelease", cuMemRelease, 10020, 0),
    PROC("cuMemAddressReserve", cuMemAddressReserve, 10020, 0),
    PROC("cuMemAddressFree", cuMemAddressFree, 10020, 0),
    PROC("cuMemMap", cuMemMap, 10020, 0),
    PROC("cuMemUnmap", cuMemUnmap, 10020, 0),
    PROC("cuMemSetAccess", cuMemSetAccess, 10020, 0),
    PROC("cuMulticastCreate", cuMulticastCreate, 12010, 0),
    PROC("cuMulticastAddDevice", cuMulticastAddDevice, 12010, 0),
    PROC("cuMulticastBindMem", cuMulticastBindMem, 12010, 0),
    PROC("cuMulticastUnbind", cuMulticastUnbind, 12010, 0),
    PROC("cuMemRetainAllocationHandle", cuMemRetainAllocationHandle, 11000, 0),
    PROC("cuMemGetAllocationPropertiesFromHandle", cuMemGetAllocationPropertiesFromHandle, 10020,
         0),
    PROC("cuMemExportToShareableHandle", cuMemExportToShareableHandle, 10020, 0),
    PROC("cuMemImportFromShareableHandle", cuMemImportFromShareableHandle, 10020, 0),
    PROC("cuModuleLoad", cuModuleLoad, 2000, 0),
    PROC("cuModuleLoadData", cuModuleLoadData, 2000, 0),
    PROC("cuModuleLoadDataEx", cuModuleLoadDataEx, 2010, 0),
    PROC("cuModuleUnload", cuModuleUnload, 2000, 0),
    PROC("cuModuleGetFunction", cuModuleGetFunction, 2000, 0),
    PROC("cuFuncGetAttribute", cuFuncGetAttribute, 2020, 0),
    PROC("cuFuncSetAttribute", cuFuncSetAttribute, 9000, 0),
    PROC("cuFuncSetCacheConfig", cuFuncSetCacheConfig, 3000, 0),
    PROC("cuOccupancyMaxActiveBlocksPerMultiprocessor", cuOccupancyMaxActiveBlocksPerMultiprocessor,
         6050, 0),
    PROC("cuLaunchKernel", cuLaunchKernel, 4000, 0),
    PROC("cuLaunchKernel", cuLaunchKernel_ptsz, 7000, 1),
    PROC("cuLaunchCooperativeKernel", cuLaunchCooperativeKernel, 9000, 0),
    PROC("cuLaunchCooperativeKernel", cuLaunchCooperativeKernel_ptsz, 9000, 1),
    PROC("cuLinkCreate", cuLinkCreate_v2, 6050, 0),
    PROC("cuLinkAddData", cuLinkAddData_v2, 6050, 0),
    PROC("cuLinkComplete", cuLinkComplete, 5050, 0),
    PROC("cuLinkDestroy", cuLinkDestroy, 5050, 0),
    PROC("cuPointerGetAttribute", cuPointerGetAttribute, 4000, 0),
    PROC("cuTensorMapEncodeTiled", cuTensorMapEncodeTiled, 12000, 0),
    PROC("cuGetExportTable", cuGetExportTable, 3000, 0),
    PROC("cuGetProcAddress", cuGetProcAddress, 11030, 0),
    PROC("cuGetProcAddress", cuGetProcAddress_v2, 12000, 0),
};

static int is_driver_function(const char *name)
{
    for (size_t i = 0; i < sizeof proc_table / sizeof proc_table[0]; i++)
        if (strcmp(proc_table[i].symbol, name) == 0)
            return 1;
    return 0;
}

/* Best row of one kind (per-thread or legacy) for base name and version. */
static const struct proc_entry *proc_pick(const char *symbol, int version, int ptsz, int *named)
{
    const struct proc_entry *best = NULL;
    for (size_t i = 0; i < sizeof proc_table / sizeof proc_table[0]; i++) {
        const struct proc_entry *e = &proc_table[i];
        if (e->ptsz != ptsz || strcmp(e->base, symbol) != 0)
            continue;
        *named = 1;
        if (e->version <= version && (!best || e->version > best->version))
            best = e;
    }
    return best;
}

static CUresult do_proc_address(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *status)
{
    const struct proc_entry *e = NULL;
    int named = 0;

    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    /* Asking for a newer ABI than this driver provides is an error, not a miss. */
    if (version > SIM_DRIVER_VERSION)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!*symbol)
        return CUDA_ERROR_NOT_FOUND; /* the runtime's probe */

    /* Per-thread variants when asked for, falling back to the legacy one where none exists. */
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        e = proc_pick(symbol, version, 1, &named);
    if (!e)
        e = proc_pick(symbol, version, 0, &named);
    if (!e) {
        if (status && named)
            *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = e->fn;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    API(0, do_proc_address(symbol, pfn, cudaVersion, flags, NULL));
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    API(0, do_proc_address(symbol, pfn, cudaVersion, flags, symbolStatus));
}

/* ---------------------------------------------------------------------------------------- */
/* Inspection API for tests                                                                 */

EXPORT size_t simgpu_used_bytes(int dev)
{
    size_t v = 0;
    if (enter(__func__, 1) == CUDA_SUCCESS && valid_device(dev))
        v = g.dev[dev].ra.used + g.dev[dev].phys;
    leave(CUDA_SUCCESS);
    return v;
}

/* Works before cuInit too (nothing can be allocated then, so only other processes count), which
 * is what the simulated NVML needs in a process that loaded the driver but has not used it. */
EXPORT size_t simgpu_device_used_bytes(int dev)
{
    size_t v = 0;
    if (enter(__func__, 0) == CUDA_SUCCESS) {
        if (g.initialized) {
            if (valid_device(dev))
                v = dev_committed(&g.dev[dev]);
        } else if (dev >= 0 && dev < g.cfg.devices) {
            v = g.cfg.other_bytes[dev];
        }
    }
    leave(CUDA_SUCCESS);
    return v;
}

EXPORT size_t simgpu_largest_free_block(int dev)
{
    size_t v = 0;
    if (enter(__func__, 1) == CUDA_SUCCESS && valid_device(dev)) {
        uint64_t hole = ra_largest_hole(&g.dev[dev].ra);
        uint64_t avail = dev_available(&g.dev[dev]);
        v = hole < avail ? hole : avail;
    }
    leave(CUDA_SUCCESS);
    return v;
}
