/* Which device allocators release what they cache and retry a failed request.
 *
 * Observe mode (VRAMWATCH_LIMIT_MODE=observe) lets a process run past the emulated limit so one
 * run measures what it needs on the small card. A caching allocator on a big card never has to
 * give anything back, so its peak holds cache that the small card would have made it release.
 * For an allocator known to release its cache and retry, the request that crosses the limit is
 * refused once, as the small card would refuse it; the allocator flushes and asks again, and the
 * retry goes through. The run then behaves as on a card just large enough. For any other
 * program a refusal would be a crash it would not have had on the big card, so nothing is
 * refused and the uncapped peak stands (without a flush-and-retry, it is the need).
 *
 * Known to retry (checked in their sources):
 * - PyTorch's native caching allocator (c10/cuda/CUDACachingAllocator.cpp): on a failed
 *   cudaMalloc it releases its unused cached blocks and retries the same size once.
 *   Its cudaMallocAsync backend (CUDAMallocAsyncAllocator.cpp) raises at the first failure:
 *   not retrying.
 * - CuPy's MemoryPool (cupy/cuda/memory.pyx, _try_malloc): free_all_blocks and retry, then
 *   gc.collect, free_all_blocks and a third try.
 * - Anything that says so through vramwatch_allocator_retries(1) (the simulated job does).
 *
 * The answer is looked up at the first crossing only (it needs the loader's list of objects,
 * never the hot path) and kept; a declaration through the API takes precedence at any time. */
#include <link.h>
#include <string.h>

#include "interpose.h"
#include "options.h"

static int declared = -1; /* vramwatch_allocator_retries: -1 not said, 0 no, 1 yes */
static int detected = -1; /* from the loaded objects: -1 not looked yet */

static int find_retrying(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    const char *n = info->dlpi_name;
    if (!n || !*n)
        return 0;
    if (loaded_module_is(n, "libc10_cuda."))
        return 1;
    const char *b = strrchr(n, '/');
    b = b ? b + 1 : n;
    /* CuPy's pool is the extension module cupy/cuda/memory.cpython-*.so */
    if (strncmp(b, "memory.", 7) == 0 && b - n >= 10 && memcmp(b - 10, "cupy/cuda/", 10) == 0)
        return 2;
    return 0;
}

void retrying_declare(int retries)
{
    __atomic_store_n(&declared, retries ? 1 : 0, __ATOMIC_RELAXED);
}

bool retrying_active(void)
{
    int d = __atomic_load_n(&declared, __ATOMIC_RELAXED);
    if (d >= 0)
        return d == 1;
    int r = __atomic_load_n(&detected, __ATOMIC_RELAXED);
    if (r < 0) {
        int found = dl_iterate_phdr(find_retrying, NULL);
        /* PyTorch with backend:cudaMallocAsync in its allocator setting does not retry. */
        r = found == 2 || (found == 1 && !options_current.torch_async_backend);
        __atomic_store_n(&detected, r, __ATOMIC_RELAXED);
    }
    return r == 1;
}
