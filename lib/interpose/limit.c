/* Capacity emulation (VRAMWATCH_LIMIT): whether an allocation fits the smaller card the device
 * behaves as, the gate that refuses it in front of a hooked allocation, and the memory queries
 * rewritten to describe that card. */
#include "interpose.h"

#include "driver.h"
#include "lifecycle.h"

bool limit_any;

/* A limit given as a share of the card (VRAMWATCH_LIMIT=90%) becomes a size once the driver
 * can say the card's total; until then there is no limit to apply. */
static uint64_t resolve_share(int device)
{
    size_t t;
    if (!driver_total_mem(device, &t))
        return 0;
    uint64_t v = (uint64_t)((double)t * options_current.limit_share[device]);
    if (!v)
        v = 1;
    __atomic_store_n(&options_current.limit[device], v, __ATOMIC_RELAXED);
    return v;
}

uint64_t limit_of(int device)
{
    if (device < 0 || device >= VW_MAX_DEVICES)
        return 0;
    uint64_t v = __atomic_load_n(&options_current.limit[device], __ATOMIC_RELAXED);
    if (VW_UNLIKELY(!v && options_current.limit_share[device] > 0))
        v = resolve_share(device);
    return v;
}

void limit_meminfo(int device, size_t *free, size_t *total)
{
    uint64_t lim = limit_of(device);
    if (!lim || !free || !total)
        return;
    /* Everything the card holds counts against the emulated capacity, as it would on a card
     * of that size: this process's allocations, its context and libraries, other processes. */
    uint64_t used = *total > *free ? *total - *free : 0;
    *total = lim;
    *free = used < lim ? lim - used : 0;
}

int limit_check(enum core_kind kind, uint64_t size, int *device)
{
    if (kind == CORE_HOST)
        return VW_LIMIT_OK;
    if (*device == VW_DEV_UNKNOWN)
        *device = driver_current_device();
    uint64_t lim = limit_of(*device);
    if (!lim)
        return VW_LIMIT_OK;
    size_t f, t;
    bool got = driver_ready() &&
               (*device == driver_current_device() ? driver_mem_info(&f, &t)
                                                   : driver_mem_info_other(*device, &f, &t));
    if (!got)
        return VW_LIMIT_OK; /* the driver cannot say: let the real card decide */
    uint64_t used = t > f ? t - f : 0;
    core_measure(*device, (int64_t)used, -1,
                 platform_now_ns()); /* asked anyway: the timeline's untracked */
    uint64_t need = size;
    if (kind == CORE_POOL) {
        /* A stream-ordered pool serves from what it already holds before asking the driver. */
        int64_t cached = 0, high = 0;
        struct core_device d = { .pool_used = true };
        if (driver_pools(*device, &d, &cached, &high) && (uint64_t)cached >= size)
            need = 0;
    }
    if (used + need <= lim)
        return VW_LIMIT_OK;
    if (!options_current.observe)
        return VW_LIMIT_REFUSE;
    /* Observe mode: an allocator that flushes and retries gets the small card's answer once
     * (retrying.c); its retry, still over the limit, is where the small card would fail. */
    if (retrying_active() && !core_observe_is_retry(*device, size, platform_now_ns()))
        return VW_LIMIT_FLUSH;
    return VW_LIMIT_CROSS;
}

/* Have the CUDA runtime start (it loads the driver and creates the context at its first call),
 * so that the first allocation can be checked against the limit and put on its device. Does
 * what the application's own first runtime call is about to do anyway. */
static void start_runtime(void)
{
    /* cudaFree(NULL) is the documented way to start the runtime; it frees nothing. Called from
     * inside a hooked call, so it goes to the real function, unrecorded. */
    static bool done;
    if (__atomic_load_n(&done, __ATOMIC_RELAXED))
        return;
    __typeof__(resolve_real.cudaFree) real = VW_REAL(cudaFree);
    if (real) {
        cudaError_t r = real(NULL);
        (void)r; /* no driver, no device: the application's own call gets the same answer */
    }
    __atomic_store_n(&done, true, __ATOMIC_RELAXED);
}

int limit_gate(struct vw_call *c, uint64_t size)
{
    struct core_request *r = &c->req;
    /* A runtime call that comes first: the runtime has not loaded the driver yet, so neither the
     * device nor its memory could be asked. A driver call has a driver already. */
    if (c->runtime_call && r->device == VW_DEV_UNKNOWN && r->kind != CORE_HOST && !driver_ready())
        start_runtime();
    int lim = limit_check(r->kind, size, &r->device);
    if (lim == VW_LIMIT_REFUSE)
        record_alloc(c, false, VW_OOM, 0, size, false);
    if (lim == VW_LIMIT_FLUSH) {
        core_observe_refusal(r->device, size, r->api, core_callsite(c->frames, c->nframes),
                             platform_now_ns());
        lifecycle_first_alloc();
        interpose_leave();
        return VW_LIMIT_REFUSE; /* the shim answers out of memory without calling the card */
    }
    return lim;
}
