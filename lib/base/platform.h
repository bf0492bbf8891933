/* platform.h: what the library's files take from the compiler and the kernel: thread-local
 * storage, branch hints, visibility, sanitizer exemptions, clocks. */
#ifndef VW_PLATFORM_H
#define VW_PLATFORM_H

#include <stdint.h>
#include <time.h>

/* The library is preloaded, so its TLS can live in the static block: no __tls_get_addr call
 * in the hooks. */
#define VW_TLS __thread __attribute__((tls_model("initial-exec")))
#define VW_LIKELY(x) __builtin_expect(!!(x), 1)
#define VW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define VW_EXPORT __attribute__((visibility("default")))
/* For code a sanitizer runtime may call while it is still initialising (its interceptors look
 * functions up with dlsym before shadow memory exists). */
#define VW_NO_SANITIZE \
    __attribute__((no_sanitize_address, no_sanitize_undefined, no_sanitize_thread))

static inline uint64_t platform_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* vDSO: no system call */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The kernel's tick-granular clock (1 to 4 ms), a plain read of the vDSO page: cheap enough for
 * every free, where only the timeline's buckets (a millisecond or more wide) need a time. */
static inline uint64_t platform_now_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
