/* readback.c: which bytes of simulated device memory read back as they are.
 *
 * No kernel runs on the simulated card, so what a kernel would have written is never there:
 * the bytes under a kernel's output are whatever the memory held before, often another
 * tensor's data from the caching allocator's reuse. A framework that reads such a value back
 * (a count of selected elements, a `.item()`) would take someone's pixels for a size and ask for
 * 16 GiB. So the card reads back by one rule, the same for every copy out of device memory:
 *
 *   bytes the host put there (a copy into device memory, a memset, a collective) since the
 *   last kernel launch read back as they are; everything else reads back as zeros.
 *
 * A launch may write anywhere, and the card cannot tell where, so each launch ends the window.
 * What the host wrote and reads back without a launch in between (a tensor built on the host,
 * DDP's exchange of shapes across ranks) is exact; what a kernel would compute is zero, the
 * value fresh memory has, which makes every device-computed size 0 and every flag false.
 *
 * The window is a short list of ranges. A launch only bumps a counter (no lock: launches are
 * the hot path); the list notices the new epoch at its next use and starts again. When the
 * list is full the oldest range is forgotten, which errs on the side of zeros. */
#include "readback.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define WINDOW_MAX 256

struct written {
    uintptr_t lo, hi;
};

static struct {
    uint64_t base, end;
} ranges[READBACK_RANGES];
static atomic_size_t nranges;
static atomic_uint_least64_t launches;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t epoch; /* the launch count the window belongs to */
static struct written window[WINDOW_MAX];
static size_t nwindow;

void readback_add_range(uint64_t base, uint64_t len)
{
    size_t i = atomic_load(&nranges);
    if (i == READBACK_RANGES)
        return;
    ranges[i].base = base;
    ranges[i].end = base + len;
    atomic_store(&nranges, i + 1);
}

static bool on_device(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    size_t k = atomic_load(&nranges);
    for (size_t i = 0; i < k; i++)
        if (a >= ranges[i].base && a < ranges[i].end && n <= ranges[i].end - a)
            return true;
    return false;
}

/* Called with the lock held: a launch since the window was filled empties it. */
static void catch_up(void)
{
    uint64_t now = atomic_load_explicit(&launches, memory_order_acquire);
    if (now != epoch) {
        epoch = now;
        nwindow = 0;
    }
}

static void note_written(uintptr_t lo, uintptr_t hi)
{
    catch_up();
    /* Grow a range this one continues or overlaps, the common case of a copy made in pieces. */
    for (size_t i = 0; i < nwindow; i++) {
        if (lo <= window[i].hi && hi >= window[i].lo) {
            if (lo < window[i].lo)
                window[i].lo = lo;
            if (hi > window[i].hi)
                window[i].hi = hi;
            return;
        }
    }
    if (nwindow == WINDOW_MAX) {
        memmove(window, window + 1, (WINDOW_MAX - 1) * sizeof window[0]);
        nwindow--;
    }
    window[nwindow++] = (struct written){ lo, hi };
}

/* The bytes of [src, src + n) as the host reads them: window bytes as they are, zeros
 * elsewhere. dst may be device memory too; it must not overlap src. */
static void read_out(void *dst, const void *src, size_t n)
{
    uintptr_t lo = (uintptr_t)src, hi = lo + n;
    memset(dst, 0, n);
    for (size_t i = 0; i < nwindow; i++) {
        uintptr_t a = window[i].lo > lo ? window[i].lo : lo;
        uintptr_t b = window[i].hi < hi ? window[i].hi : hi;
        if (a < b)
            memcpy((char *)dst + (a - lo), (const void *)a, b - a);
    }
}

/* A kernel ran (or a library call that stands for one): nothing it wrote is known. */
EXPORT void simgpu_kernel_launched(void)
{
    atomic_fetch_add_explicit(&launches, 1, memory_order_acq_rel);
}

/* The host wrote [p, p + n) of device memory itself (a memset, a collective's own copy). */
EXPORT void simgpu_device_written(const void *p, size_t n)
{
    if (n == 0 || !on_device(p, n))
        return;
    pthread_mutex_lock(&lock);
    note_written((uintptr_t)p, (uintptr_t)p + n);
    pthread_mutex_unlock(&lock);
}

/* A copy of n bytes between any two of host and device memory, by the rule above. Overlapping
 * ranges within device memory move as they are (a tensor shifted within its own buffer). */
EXPORT void simgpu_copy(void *dst, const void *src, size_t n)
{
    if (n == 0 || dst == src)
        return;
    bool from = on_device(src, n), to = on_device(dst, n);
    if (!from && !to) {
        memmove(dst, src, n);
        return;
    }
    pthread_mutex_lock(&lock);
    catch_up();
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (!from || (d < s + n && s < d + n))
        memmove(dst, src, n);
    else
        read_out(dst, src, n);
    if (to)
        note_written(d, d + n);
    pthread_mutex_unlock(&lock);
}
