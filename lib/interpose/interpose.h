/* What the shims see of the library: the real-function table and lookups (resolve.c), set-up
 * (setup.c), recording (record.c), capacity emulation (limit.c), reports (reporting.c).
 * Generated from hooks.def; included by the shim files and those that implement it. */
#ifndef VW_INTERPOSE_H
#define VW_INTERPOSE_H

/* Turn off cuda.h's name macros (cuMemAlloc -> cuMemAlloc_v2, ...): we define exact names. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "driver.h"
#include "loaded.h"
#include "options.h"
#include "stack.h"
#include "platform.h"

enum { VW_ANY = 0, VW_LEGACY = 1, VW_PTSZ = 2 };

/* NVML's public ABI, declared here: the CUDA toolkit does not ship nvml.h. */
typedef int vw_nvml_return;
typedef struct vw_nvml_device_st *vw_nvml_device;
typedef struct {
    unsigned long long total, free, used;
} vw_nvml_memory;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} vw_nvml_memory_v2;

/* Prototypes the headers only declare under per-thread-default-stream builds (or not at all).
 * Some hooked functions are deprecated in the headers; we must still define them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define VW_RT(name, ret, params) VW_EXPORT ret name params;
#define VW_NVML(name, ret, params) VW_EXPORT ret name params;
#define VW_DRV(name, base, since, stream, ret, params) VW_EXPORT ret name params;
#include "hooks.def"
#undef VW_RT
#undef VW_NVML
#undef VW_DRV

enum vw_hook_id {
#define VW_RT(name, ret, params) VW_HOOK_##name,
#define VW_NVML(name, ret, params) VW_HOOK_##name,
#define VW_DRV(name, base, since, stream, ret, params) VW_HOOK_##name,
#include "hooks.def"
#undef VW_RT
#undef VW_NVML
#undef VW_DRV
    VW_HOOK_COUNT
};

/* The real functions, typed. A slot is filled by the first lookup that finds the function:
 * RTLD_NEXT for calls that reached our exported symbol, or the pointer the application's own
 * dlsym / cuGetProcAddress / cudaGetDriverEntryPoint returned. */
struct vw_real_fns {
#define VW_RT(name, ret, params) ret(*name) params;
#define VW_NVML(name, ret, params) ret(*name) params;
#define VW_DRV(name, base, since, stream, ret, params) ret(*name) params;
#include "hooks.def"
#undef VW_RT
#undef VW_NVML
#undef VW_DRV
};
extern struct vw_real_fns resolve_real;

/* Resolve a slot through RTLD_NEXT, then in the loaded module it belongs to; NULL if nowhere. */
void *resolve_hook(int id);
#define VW_REAL(name)                                                                             \
    __extension__({                                                                               \
        __typeof__(resolve_real.name) f_ = __atomic_load_n(&resolve_real.name, __ATOMIC_ACQUIRE); \
        VW_LIKELY(f_) ? f_ : (__typeof__(resolve_real.name))resolve_hook(VW_HOOK_##name);         \
    })

/* Per-thread state: the depth of hooked calls on this thread. Only the outermost one records:
 * a runtime call that reaches the driver inside, and our own calls into CUDA while writing a
 * report, pass through. */
extern VW_TLS int setup_depth;
/* Options read and core mapped; false: pass everything through. Points into a page that a child
 * process gets zeroed (lifecycle.c), so a child's first call goes through set-up's slow path. */
extern bool *lifecycle_ready;
static inline bool interpose_ready_now(void)
{
    return __atomic_load_n(__atomic_load_n(&lifecycle_ready, __ATOMIC_ACQUIRE), __ATOMIC_ACQUIRE);
}

/* errno is the application's: after a hooked call it holds what the real function left, and
 * where the library answers without calling it, what it held before the call (issue 24). The
 * library's own work (set-up, unwinding, the driver's answers, locks that sleep, reports) may
 * change it, so a hook that does any of that around the real call keeps errno as the real call
 * left it (interpose_errno_get after it, interpose_errno_set before returning) and, before the
 * real call, as the caller left it. One TLS address, loads and stores: nothing on the nested
 * path. */
static inline int interpose_errno_get(void)
{
    return errno;
}
static inline void interpose_errno_set(int e)
{
    errno = e;
}

/* Lazy set-up on the first hooked call: options, core, fork handlers. */
bool setup_init_slow(void);
static __attribute__((cold, noinline, unused)) bool interpose_init_keep_errno(void)
{
    int e = interpose_errno_get();
    bool ok = setup_init_slow();
    interpose_errno_set(e);
    return ok;
}
static inline bool interpose_active(void)
{
    /* lifecycle_ready is only ever set with recording on (setup.c returns before it when
     * disabled). */
    if (VW_LIKELY(interpose_ready_now()))
        return true;
    return interpose_init_keep_errno() && !options_current.disable;
}

/* One hooked allocation call in flight: the stack captured at its entry, and the core's request
 * filled in as the call goes (the function, kind and device before the real call, the key and
 * size after it, the call site and time where it is recorded). */
struct vw_call {
    struct core_request req;
    bool runtime_call; /* a runtime function: its error names; the runtime started for a limit */
    int nframes;
    uint64_t frames[VW_MAX_FRAMES];
};
/* The call's function, kind and device (VW_DEV_UNKNOWN: the current one), as the shim knows
 * them. `runtime_call` is set apart: only the rare paths (a limit, a failure) read it. */
static inline void interpose_call_is(struct vw_call *c, const char *api, enum core_kind kind,
                                     int device)
{
    c->req.api = api;
    c->req.kind = kind;
    c->req.device = device;
}

/* Enter a hooked call. Returns false when the call must pass through (disabled, or nested
 * inside another hooked call on this thread); otherwise the stack is captured now, before
 * anything is locked, and interpose_leave() must follow. */
static inline bool interpose_enter(struct vw_call *c, bool want_stack)
{
    if (!interpose_active() || setup_depth)
        return false;
    setup_depth = 1;
    c->nframes = want_stack ? stack_capture_all(c->frames, options_current.stack_depth) : 0;
    return true;
}
/* interpose_enter for the recording path of an exported shim, which has found the depth 0
 * already. */
static inline bool interpose_enter_top(struct vw_call *c)
{
    if (!interpose_active())
        return false;
    setup_depth = 1;
    c->nframes = stack_capture_all(c->frames, options_current.stack_depth);
    return true;
}
static inline void interpose_leave(void)
{
    setup_depth = 0;
}

/* Record an allocation call's outcome. `ok` is the call's success, `err` what it returned;
 * `key` the address or handle; `crossing`: observe mode saw this allocation go over the
 * emulated limit. */
void record_alloc(struct vw_call *c, bool ok, int err, uint64_t key, uint64_t size, bool crossing);

/* Something an allocation that went through must do besides recording it: the exit handler
 * is not registered yet, or a status file is open (record.c keeps it; set until the first
 * allocation). With core_report_stale, the one test the common path makes for all of it. */
extern bool record_rare_due;
void record_rare(uint64_t now);

/* An allocation that went through, recorded: inline in each shim for the common path (no limit
 * in the way, `crossing` a constant false), so it makes one call into the core; record_alloc
 * uses it for every other allocation that went through. */
static inline void interpose_record_ok(struct vw_call *c, uint64_t key, uint64_t size,
                                       bool crossing)
{
    struct core_request *r = &c->req;
    /* Read before the clock's call, which the compiler cannot see through: the shim has just
     * written them, so they are known here, where a read after the call is a load. */
    int device = r->device;
    enum core_kind kind = r->kind;
    uint64_t now = platform_now_ns();
    if (device == VW_DEV_UNKNOWN && kind != CORE_HOST)
        device = driver_current_device();
    /* A zero-byte request that succeeds hands out nothing (cudaMalloc returns NULL). */
    if (VW_LIKELY(size != 0)) {
        r->device = device;
        r->key = key;
        r->size = size;
        r->now_ns = now;
        r->callsite = core_callsite(c->frames, c->nframes);
        core_alloc(r);
        if (VW_UNLIKELY(crossing))
            core_limit_crossing(device, r->api, size, r->callsite, now);
        /* Both flags read, one branch (`|`, not `||`). */
        if (VW_UNLIKELY((int)__atomic_load_n(&record_rare_due, __ATOMIC_RELAXED) |
                        (int)__atomic_load_n(&core_report_stale, __ATOMIC_RELAXED)))
            record_rare(now);
    }
    interpose_leave();
}

/* ---- capacity emulation (VRAMWATCH_LIMIT) ---- */
extern bool limit_any; /* any device has a limit */
/* VW_LIMIT_FLUSH: observe mode, answer this one request out of memory so the allocator flushes
 * and retries (limit_gate turns it into VW_LIMIT_REFUSE for the shim). */
enum { VW_LIMIT_OK = 0, VW_LIMIT_REFUSE, VW_LIMIT_CROSS, VW_LIMIT_FLUSH };
/* Before an allocation of `size` on *device (VW_DEV_UNKNOWN: the current one, written back):
 * whether it fits the emulated card, must be refused (enforce), or crosses it (observe). */
int limit_check(enum core_kind kind, uint64_t size, int *device);
/* cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY: the same number in both families,
 * what a real card answers when an allocation does not fit. */
#define VW_OOM 2
/* limit_check for a hooked allocation call in flight, of `size` (its device written back into
 * the request): a refused call is recorded as the out-of-memory failure it becomes (the shim
 * then returns VW_OOM without the real call). */
int limit_gate(struct vw_call *c, uint64_t size);
/* Turn the driver's free/total of `device` into the emulated card's (idempotent, so a runtime
 * query that reaches the driver query inside comes out the same). */
void limit_meminfo(int device, size_t *free, size_t *total);
uint64_t limit_of(int device);

/* ---- allocators that flush and retry (retrying.c) ---- */
/* Whether this process's allocator releases its cache and retries a failed request. */
bool retrying_active(void);
/* vramwatch_allocator_retries(): the process says so itself. */
void retrying_declare(int retries);
/* Wrap a driver function pointer returned by a lookup (cuGetProcAddress, cudaGetDriverEntryPoint):
 * returns our shim when `p` is a hooked libcuda function, else `p` unchanged (resolve.c). */
void *resolve_wrap_proc(const char *symbol, int version, uint64_t flags, void *p);

/* Gather device facts and write a report (reason "oom", "exit", "request"; reporting.c). */
int reporting_write(const char *reason);

#endif
