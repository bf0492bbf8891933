/* Concurrency stress of the core without a test framework, so it can run under
 * ThreadSanitizer (Criterion's sandbox does not start under it): 8 threads allocate, free and
 * intern stacks at once; the totals must be exact. Exit status 0 when they are. */
#include <pthread.h>
#include <stdio.h>

#include "core.h"

#define THREADS 8
#define PAIRS 20000

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < PAIRS; i++) {
        uint64_t frames[3] = { 0x1000, id, i % 64 }; /* 64 sites per thread, seen many times */
        uint32_t site = core_callsite(frames, 3);
        uint64_t key = (id << 40) | (i << 9);
        core_alloc(CORE_DEVICE, key, 512, (int)(id % 2), "cudaMalloc", site, i);
        if (i % 4 != 3) {
            struct core_alloc a;
            if (!core_take(CORE_DEVICE, key, &a, 0))
                return (void *)1;
        }
        if (i % 1000 == 0) {
            struct core_snapshot *s = (struct core_snapshot *)__builtin_alloca(sizeof(*s));
            core_snapshot(s);
        }
    }
    return NULL;
}

int main(void)
{
    if (!core_init())
        return 1;
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    int bad = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    static struct core_snapshot s;
    core_snapshot(&s);
    uint64_t live = s.devices[0].live_bytes + s.devices[1].live_bytes;
    uint64_t allocs = s.devices[0].alloc_calls + s.devices[1].alloc_calls;
    uint64_t frees = s.devices[0].free_calls + s.devices[1].free_calls;
    uint64_t want_live = (uint64_t)THREADS * (PAIRS / 4) * 512;
    if (bad || live != want_live || allocs != (uint64_t)THREADS * PAIRS ||
        frees != (uint64_t)THREADS * PAIRS * 3 / 4 || s.ncallsites != 1 + THREADS * 64) {
        fprintf(stderr, "stress_core: live %llu (want %llu), allocs %llu, frees %llu, sites %u\n",
                (unsigned long long)live, (unsigned long long)want_live, (unsigned long long)allocs,
                (unsigned long long)frees, s.ncallsites);
        return 1;
    }
    printf("stress_core: %d threads x %d pairs exact\n", THREADS, PAIRS);
    return 0;
}
