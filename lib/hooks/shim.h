/* The shapes every shim takes, shared by the runtime and the driver shims: they differ only in
 * the result type, the success value and the error returned when no real function exists. */
#ifndef VW_SHIM_H
#define VW_SHIM_H

#include "interpose.h"

#define VW_UNPAREN(...) __VA_ARGS__

/* A hooked call nested inside another on this thread (a runtime call reaching the driver shim,
 * our own queries while writing a report) goes straight to the real function: the depth is the
 * first thing tested, before the options, and the recording path is a function of its own. The
 * exported function makes only tail calls (the real function, or the recording path), so it
 * sets up no frame at all; the first call, before the real function's pointer is known, finds it
 * in a function of its own (the lookup is a call, which would need a frame). */
#define VW_SHIM_ENTRY(ret, missing, name, params, args)                      \
    static __attribute__((noinline, cold)) ret vw_first_##name params        \
    {                                                                        \
        __typeof__(resolve_real.name) real =                                 \
                (__typeof__(resolve_real.name))resolve_hook(VW_HOOK_##name); \
        if (!real)                                                           \
            return missing;                                                  \
        if (setup_depth)                                                     \
            return real args;                                                \
        return vw_rec_##name(real, VW_UNPAREN args);                         \
    }                                                                        \
    VW_EXPORT ret name params                                                \
    {                                                                        \
        __typeof__(resolve_real.name) real =                                 \
                __atomic_load_n(&resolve_real.name, __ATOMIC_ACQUIRE);       \
        if (VW_UNLIKELY(!real))                                              \
            return vw_first_##name args;                                     \
        if (setup_depth)                                                     \
            return real args;                                                \
        return vw_rec_##name(real, VW_UNPAREN args);                         \
    }

/* An allocation: forward, then record the outcome; `key` and `size` are read after the real
 * call returns, and may use `ok`. errno: the caller's for the real call (the capture and the
 * limit gate may change it), the real call's after it, the caller's when refused. */
#define VW_SHIM_ALLOC(ret, success, missing, runtime, name, kind, params, args, key, size) \
    static __attribute__((noinline)) ret vw_rec_##name(__typeof__(resolve_real.name) real, \
                                                       VW_UNPAREN params)                  \
    {                                                                                      \
        struct vw_call c;                                                                  \
        int e = interpose_errno_get();                                                     \
        if (!interpose_enter_top(&c))                                                      \
            return real args;                                                              \
        bool ok = false;                                                                   \
        int dev = VW_DEV_UNKNOWN, lim = VW_LIMIT_OK;                                       \
        if (VW_UNLIKELY(limit_any)) {                                                      \
            interpose_call_is(&c, #name, kind, dev);                                       \
            c.runtime_call = runtime;                                                      \
            lim = limit_gate(&c, (size));                                                  \
            if (lim == VW_LIMIT_REFUSE) {                                                  \
                interpose_errno_set(e);                                                    \
                return (ret)VW_OOM;                                                        \
            }                                                                              \
            dev = c.req.device; /* read back once, so that `dev` stays in a register */    \
        }                                                                                  \
        interpose_errno_set(e);                                                            \
        ret r = real args;                                                                 \
        e = interpose_errno_get();                                                         \
        ok = r == success;                                                                 \
        /* Written after the real call, so the inline recording path knows them. */        \
        interpose_call_is(&c, #name, kind, dev);                                           \
        if (VW_LIKELY(ok && lim == VW_LIMIT_OK)) {                                         \
            interpose_record_ok(&c, (key), (size), false);                                 \
            interpose_errno_set(e);                                                        \
            return r;                                                                      \
        }                                                                                  \
        c.runtime_call = runtime;                                                          \
        record_alloc(&c, ok, (int)r, ok ? (key) : 0, (size), ok && lim == VW_LIMIT_CROSS); \
        interpose_errno_set(e);                                                            \
        return r;                                                                          \
    }                                                                                      \
    VW_SHIM_ENTRY(ret, missing, name, params, args)

/* An allocation from an explicit stream-ordered pool: the pool is remembered, so reports can
 * ask it what it holds beyond what it handed out. */
#define VW_SHIM_POOL_ALLOC(ret, success, missing, runtime, name, ptrtype, pooltype, streamtype) \
    VW_EXPORT ret name(ptrtype *ptr, size_t size, pooltype pool, streamtype stream)             \
    {                                                                                           \
        __typeof__(resolve_real.name) real = VW_REAL(name);                                     \
        if (VW_UNLIKELY(!real))                                                                 \
            return missing;                                                                     \
        struct vw_call c;                                                                       \
        int e = interpose_errno_get();                                                          \
        if (!interpose_enter(&c, true))                                                         \
            return real(ptr, size, pool, stream);                                               \
        int dev = driver_current_device();                                                      \
        if (pool)                                                                               \
            core_note_pool(dev, (uint64_t)(uintptr_t)pool);                                     \
        interpose_call_is(&c, #name, CORE_POOL, dev);                                           \
        c.runtime_call = runtime;                                                               \
        int lim = VW_UNLIKELY(limit_any) ? limit_gate(&c, size) : VW_LIMIT_OK;                  \
        interpose_errno_set(e);                                                                 \
        if (lim == VW_LIMIT_REFUSE)                                                             \
            return (ret)VW_OOM;                                                                 \
        ret r = real(ptr, size, pool, stream);                                                  \
        e = interpose_errno_get();                                                              \
        bool ok = r == success;                                                                 \
        record_alloc(&c, ok, (int)r, ok ? (uint64_t)(uintptr_t)*ptr : 0, size,                  \
                     ok && lim == VW_LIMIT_CROSS);                                              \
        interpose_errno_set(e);                                                                 \
        return r;                                                                               \
    }

/* A free: the allocation leaves the tables before the real free, so an address the driver
 * hands out again at once cannot be confused with it; a failed free puts it back. A free keeps
 * no stack, so it enters without a call record. The core leaves errno alone (core.c), so the
 * real free gets the caller's; putting a record back may map memory, after the real call. */
#define VW_SHIM_FREE(ret, success, missing, name, kind, params, args, key)                 \
    static __attribute__((noinline)) ret vw_rec_##name(__typeof__(resolve_real.name) real, \
                                                       VW_UNPAREN params)                  \
    {                                                                                      \
        if (!(key) || !interpose_active())                                                 \
            return real args;                                                              \
        setup_depth = 1;                                                                   \
        struct core_alloc a;                                                               \
        bool tracked = core_take(kind, (key), &a, platform_now_coarse_ns());               \
        ret r = real args;                                                                 \
        if (VW_UNLIKELY(tracked && r != success))                                          \
            VW_KEEP_ERRNO(core_untake(&a));                                                \
        interpose_leave();                                                                 \
        return r;                                                                          \
    }                                                                                      \
    VW_SHIM_ENTRY(ret, missing, name, params, args)

/* What a query or lookup hook does after the real call (rewriting a figure, wrapping a pointer),
 * with errno as the real call left it. */
#define VW_KEEP_ERRNO(...)                       \
    do {                                         \
        int keep_errno_ = interpose_errno_get(); \
        __VA_ARGS__;                             \
        interpose_errno_set(keep_errno_);        \
    } while (0)

/* A plain pass-through: the hook exists so later features have a place. */
#define VW_SHIM_PASS(ret, missing, name, params, args)      \
    VW_EXPORT ret name params                               \
    {                                                       \
        __typeof__(resolve_real.name) real = VW_REAL(name); \
        return real ? real args : missing;                  \
    }

#endif
