/* Recording: a hooked allocation call's outcome into the core (what went through, and a
 * failure with the report it may call for), and what the first allocation sets going. */
#include "interpose.h"

#include <stdlib.h>

#include "driver.h"
#include "errnames.h"
#include "lifecycle.h"
#include "live.h"
#include "status.h"

bool record_rare_due = true; /* the exit handler is registered at the first allocation */

/* After an allocation that went through, what interpose_record_ok's one test found to do: the exit
 * handler, the status file's figures, and the report on disk when a retry has just rescued the
 * failure it describes. */
void record_rare(uint64_t now)
{
    lifecycle_first_alloc();
    /* The status file is checked at set-up, before any allocation is recorded, and only a child
     * stops writing it: once the handler is registered, whether it is on is all that is left. */
    __atomic_store_n(&record_rare_due, status_on, __ATOMIC_RELAXED);
    if (VW_UNLIKELY(status_on))
        status_update(now, false, false);
    if (VW_UNLIKELY(core_take_report_stale())) {
        /* The report on disk says out of memory, and the retry has just succeeded: a process
         * stopped from now on (a signal, a time limit) must not leave that behind. */
        uint64_t finals, flushes;
        core_pressure(&finals, &flushes);
        reporting_write(finals ? "oom" : "pressure");
    }
}

/* The driver's free memory of `device` at a failure, measured for the timeline and turned into
 * the emulated card's; -1 when the device is not the current one or the driver cannot say. */
static int64_t query_free(int device)
{
    size_t f, t;
    if (device < 0 || !driver_ready() || driver_current_device() != device)
        return -1;
    if (!driver_mem_info(&f, &t))
        return -1;
    core_measure(device, t > f ? (int64_t)(t - f) : 0, -1, platform_now_ns());
    limit_meminfo(device, &f, &t);
    return (int64_t)f;
}

void record_alloc(struct vw_call *c, bool ok, int err, uint64_t key, uint64_t size, bool crossing)
{
    if (ok) {
        interpose_record_ok(c, key, size, crossing);
        return;
    }
    struct core_request *r = &c->req;
    uint64_t now = platform_now_ns();
    if (r->device == VW_DEV_UNKNOWN && r->kind != CORE_HOST)
        r->device = driver_current_device();
    int device = r->device;
    r->key = key;
    r->size = size;
    r->now_ns = now;
    r->callsite = core_callsite(c->frames, c->nframes);
    lifecycle_first_alloc();
    bool oom = err == 2; /* cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY are both 2 */
    const char *name = c->runtime_call ? errnames_runtime(err) : errnames_driver(err);
    int64_t free_bytes = r->kind == CORE_HOST ? -1 : query_free(device);
    int64_t extra = 0, high = 0;
    if (r->kind == CORE_POOL && device >= 0) {
        /* The device's default and current pools: what they cache counts as reserved. */
        struct core_device d = { .pool_used = true };
        if (!driver_pools(device, &d, &extra, &high))
            extra = 0;
    }
    enum core_failure_verdict v = core_failure(r, err, name, oom, free_bytes, (uint64_t)extra);
    if (VW_UNLIKELY(status_on) && oom)
        status_update(now, true, false); /* a second failure may have made it final */
    if (v == CORE_FAIL_REPORT)
        reporting_write("oom"); /* on disk before the failing call returns */
    interpose_leave();
}
