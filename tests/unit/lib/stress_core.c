/* Concurrency stress of the core without a test framework, so it can run under
 * ThreadSanitizer (Criterion's sandbox does not start under it): 8 threads on two devices (so
 * 4 lanes of each in use) allocate, free and intern stacks at once, with markers and timeline
 * copies among them; the totals must be exact, and the call sites' live
 * bytes at the peak must add up to the devices' peaks. Then each thread frees what another left
 * live, on the other device (a free is looked for beyond the thread's own device), and nothing
 * may be left. Exit status 0 when all holds. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#include "core.h"
#include "trace.h"
#include "core_calls.h"

#define THREADS 8
#define PAIRS 20000

static pthread_barrier_t phase;

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < PAIRS; i++) {
        uint64_t frames[3] = { 0x1000, id, i % 64 }; /* 64 sites per thread, seen many times */
        uint32_t site = core_callsite(frames, 3);
        uint64_t key = (id << 40) | (i << 9);
        alloc_req(CORE_DEVICE, key, 512, (int)(id % 2), "cudaMalloc", site, i);
        if (i % 4 != 3) {
            struct core_alloc a;
            if (!core_take(CORE_DEVICE, key, &a, 0))
                return (void *)1;
        }
        if (i % 1000 == 0) {
            struct core_snapshot *s = (struct core_snapshot *)__builtin_alloca(sizeof(*s));
            core_snapshot(s);
        }
        /* What takes every lane of a device at once (several threads per device: docs/design.md,
         * lanes): a marker resets the lanes' limits, a timeline copy counts their events. */
        if (i % 1000 == 500) {
            core_mark("stress", i);
            struct timeline_device *t = (struct timeline_device *)__builtin_alloca(sizeof(*t));
            core_copy_timeline((int)(id % 2), t);
        }
    }
    pthread_barrier_wait(&phase); /* main checks the totals */
    pthread_barrier_wait(&phase);
    /* The next thread's leftovers: its device is the other one. */
    uint64_t other = id % THREADS + 1;
    for (uint64_t i = 3; i < PAIRS; i += 4) {
        struct core_alloc a;
        if (!core_take(CORE_DEVICE, (other << 40) | (i << 9), &a, 0) || a.size != 512)
            return (void *)1;
    }
    return NULL;
}

/* Two threads taking turns on device 3, so that both lanes are in use and every step is a known
 * state: random allocations and frees (a thread frees the other's too), whose live bytes after
 * each step are worked out here; the device's peak must be the largest of them exactly, and
 * its live bytes the last, however the lanes' limits fell. */
#define TURN_STEPS 4000
#define TURN_LIVE 64
static uint64_t turn_key[TURN_LIVE], turn_size[TURN_LIVE];
static int turn;
static uint64_t turn_peak, turn_live;

static void *turns(void *arg)
{
    int me = (int)(uintptr_t)arg;
    uint64_t rnd = 0x9e3779b97f4a7c15ull;
    for (int step = 0; step < TURN_STEPS; step++) {
        rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
        if (step % 2 != me)
            continue; /* the other thread's step: the same numbers, so both know the script */
        while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != step)
            sched_yield();
        int i = (int)((rnd >> 33) % TURN_LIVE);
        uint64_t site_frames[1] = { 0x2000 + (uint64_t)(i % 4) };
        if (turn_key[i]) {
            struct core_alloc a;
            if (!core_take(CORE_DEVICE, turn_key[i], &a, (uint64_t)step) || a.size != turn_size[i])
                return (void *)1;
            turn_live -= turn_size[i];
            turn_key[i] = 0;
        } else {
            turn_key[i] = (0x77ull << 40) | ((uint64_t)step << 12);
            turn_size[i] = 1 + (rnd >> 40) % 100000;
            alloc_req(CORE_DEVICE, turn_key[i], turn_size[i], 3, "cudaMalloc",
                      core_callsite(site_frames, 1), (uint64_t)step);
            turn_live += turn_size[i];
            if (turn_live > turn_peak)
                turn_peak = turn_live;
        }
        __atomic_store_n(&turn, step + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int check_turns(void)
{
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, turns, (void *)i);
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    static struct core_snapshot s;
    core_snapshot(&s);
    if (bad || s.devices[3].peak_live_bytes != turn_peak || s.devices[3].live_bytes != turn_live) {
        fprintf(stderr, "stress_core: two threads on one device: peak %llu (want %llu), live %llu "
                        "(want %llu)\n",
                (unsigned long long)s.devices[3].peak_live_bytes, (unsigned long long)turn_peak,
                (unsigned long long)s.devices[3].live_bytes, (unsigned long long)turn_live);
        return 1;
    }
    return 0;
}

static struct core_callsite cs[1 + THREADS * 64];
static uint64_t fr[3 * (1 + THREADS * 64)];

int main(void)
{
    if (!core_init() || !trace_setup(4096))
        return 1;
    pthread_t t[THREADS];
    pthread_barrier_init(&phase, NULL, THREADS + 1);
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    /* The trace read while the workers write it (a report written mid-run): ThreadSanitizer's
     * view of its lock-free rings, and every copied event whole. */
    static struct trace_event ev[4096];
    for (int k = 0; k < 20; k++) {
        uint64_t total, lost;
        uint32_t got = trace_copy(ev, 4096, &total, &lost);
        for (uint32_t j = 0; j < got; j++)
            if (!ev[j].api || ev[j].size == 0) {
                fprintf(stderr, "stress_core: trace event %u torn\n", j);
                return 1;
            }
    }
    pthread_barrier_wait(&phase);
    static struct core_snapshot s1;
    core_snapshot(&s1);
    uint32_t n = core_copy_callsites(cs, s1.ncallsites, fr, sizeof(fr) / sizeof(fr[0]));
    uint64_t at_peak = 0;
    for (uint32_t i = 0; i < s1.ncallsites; i++)
        at_peak += cs[i].live_bytes_at_peak;
    uint64_t peaks = s1.devices[0].peak_live_bytes + s1.devices[1].peak_live_bytes;
    pthread_barrier_wait(&phase);
    int bad = n != 3 * (s1.ncallsites - 1) || at_peak != peaks || peaks < 2 * 512;
    if (bad)
        fprintf(stderr, "stress_core: sites at the peak %llu, devices' peaks %llu, frames %u\n",
                (unsigned long long)at_peak, (unsigned long long)peaks, n);
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    static struct core_snapshot s;
    core_snapshot(&s);
    uint64_t live = s1.devices[0].live_bytes + s1.devices[1].live_bytes;
    uint64_t allocs = s.devices[0].alloc_calls + s.devices[1].alloc_calls;
    uint64_t frees = s1.devices[0].free_calls + s1.devices[1].free_calls;
    uint64_t want_live = (uint64_t)THREADS * (PAIRS / 4) * 512;
    uint64_t left = s.devices[0].live_bytes + s.devices[1].live_bytes;
    if (bad || live != want_live || allocs != (uint64_t)THREADS * PAIRS ||
        frees != (uint64_t)THREADS * PAIRS * 3 / 4 || s.ncallsites != 1 + THREADS * 64 ||
        left != 0 || s.devices[0].live_count + s.devices[1].live_count != 0 ||
        s.devices[0].free_calls + s.devices[1].free_calls != (uint64_t)THREADS * PAIRS) {
        fprintf(stderr, "stress_core: live %llu (want %llu), allocs %llu, frees %llu, sites %u\n",
                (unsigned long long)live, (unsigned long long)want_live, (unsigned long long)allocs,
                (unsigned long long)frees, s.ncallsites);
        return 1;
    }
    if (check_turns())
        return 1;
    printf("stress_core: %d threads x %d pairs exact, sites at the peak add up, frees found across "
           "devices; two threads taking turns on one device: peak %llu exact\n",
           THREADS, PAIRS, (unsigned long long)turn_peak);
    return 0;
}
