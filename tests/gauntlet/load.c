/* The load attack: many threads make allocation + free pairs of random sizes on the simulated
 * GPU through the runtime, the driver, stream-ordered pools and VMM at once, while the main
 * thread asks for reports. Run under the preload by gauntlet.py, which compares the report with
 * the totals this program prints.
 *
 * usage: load THREADS PAIRS SEED
 * stdout: one JSON line {"live_bytes", "alloc_calls", "free_calls", "rss_warm_kib",
 *         "rss_end_kib", "maps_warm", "maps_end", "dumps"}
 * Exit status 0, or a small number naming the step that failed (with a line on stderr). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define WINDOW 4 /* allocations each thread keeps live at a time, freed in random order */
enum path { RUNTIME, DRIVER, ASYNC, VMM, NPATHS };

struct slot {
    int path;     /* -1: empty */
    uint64_t key; /* address, or VMM handle */
    uint64_t size;
};

static long pairs;
static unsigned seed;
static size_t gran;
static atomic_long done;             /* pairs finished, all threads */
static atomic_ullong final_live;     /* bytes each thread leaves live at the end */
static atomic_int finished, release; /* threads stay alive until their memory is measured */
static CUmemAllocationProp vmm_prop;

static uint64_t next_rand(uint64_t *s)
{
    /* xorshift64*: cheap, and each thread has its own state, so no lock is measured but ours. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* Each path from its own function, so each has its own call sites in the report. */
static __attribute__((noinline)) void alloc_one(struct slot *s, int path, uint64_t size)
{
    s->path = path;
    s->size = size;
    switch (path) {
    case RUNTIME: {
        void *p;
        CHECK(cudaMalloc(&p, size) == cudaSuccess, 10);
        s->key = (uint64_t)(uintptr_t)p;
        break;
    }
    case DRIVER: {
        CUdeviceptr p;
        CHECK(cuMemAlloc_v2(&p, size) == CUDA_SUCCESS, 11);
        s->key = p;
        break;
    }
    case ASYNC: {
        void *p;
        CHECK(cudaMallocAsync(&p, size, 0) == cudaSuccess, 12);
        s->key = (uint64_t)(uintptr_t)p;
        break;
    }
    default: {
        CUmemGenericAllocationHandle h;
        s->size = gran * (1 + size % 3); /* VMM sizes are whole granules */
        CHECK(cuMemCreate(&h, s->size, &vmm_prop, 0) == CUDA_SUCCESS, 13);
        s->key = h;
        break;
    }
    }
}

static __attribute__((noinline)) void free_one(struct slot *s)
{
    switch (s->path) {
    case RUNTIME:
        CHECK(cudaFree((void *)(uintptr_t)s->key) == cudaSuccess, 20);
        break;
    case DRIVER:
        CHECK(cuMemFree_v2(s->key) == CUDA_SUCCESS, 21);
        break;
    case ASYNC:
        CHECK(cudaFreeAsync((void *)(uintptr_t)s->key, 0) == cudaSuccess, 22);
        break;
    default:
        CHECK(cuMemRelease(s->key) == CUDA_SUCCESS, 23);
        break;
    }
    s->path = -1;
}

static void *worker(void *arg)
{
    long tid = (long)(intptr_t)arg;
    uint64_t rs = 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 32) ^ (uint64_t)(tid + 1);
    struct slot win[WINDOW];
    for (int i = 0; i < WINDOW; i++)
        win[i].path = -1;
    /* The runtime makes the thread's context current on its first call, as in an application. */
    CHECK(cudaFree(NULL) == cudaSuccess, 30);
    for (long i = 0; i < pairs; i++) {
        uint64_t r = next_rand(&rs);
        int path = (int)(r % NPATHS);
        /* 1 byte to 1 MiB, most of them small, as an allocator's segments and tensors are. */
        uint64_t size = 1 + (next_rand(&rs) % ((r >> 8) % 4 == 0 ? MiB : 64 * KiB));
        struct slot *s = &win[(r >> 16) % WINDOW];
        if (s->path >= 0)
            free_one(s);
        alloc_one(s, path, size);
        if ((i & 1023) == 1023)
            atomic_fetch_add_explicit(&done, 1024, memory_order_relaxed);
    }
    /* Every pair completed: free what is left, then leave one allocation of a known size. */
    for (int i = 0; i < WINDOW; i++)
        if (win[i].path >= 0)
            free_one(&win[i]);
    struct slot last;
    alloc_one(&last, (int)(tid % NPATHS), (uint64_t)(tid + 1) * MiB);
    atomic_fetch_add(&final_live, last.size);
    atomic_fetch_add(&finished, 1);
    struct timespec nap = { 0, 1000 * 1000 };
    while (!atomic_load(&release))
        nanosleep(&nap, NULL);
    return NULL;
}

static long status_field(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(name);
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, name, n))
            v = strtol(line + n, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static long count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    int c;
    while (f && (c = fgetc(f)) != EOF)
        n += c == '\n';
    if (f)
        fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    CHECK(argc == 4, 1);
    int nthreads = atoi(argv[1]);
    pairs = atol(argv[2]);
    seed = (unsigned)atoi(argv[3]);
    CHECK(nthreads > 0 && nthreads <= 256 && pairs > 0, 1);

    memset(&vmm_prop, 0, sizeof(vmm_prop));
    vmm_prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    vmm_prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    vmm_prop.location.id = 0;
    CHECK(cudaFree(NULL) == cudaSuccess, 2);
    CHECK(cuMemGetAllocationGranularity(&gran, &vmm_prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
                  CUDA_SUCCESS,
          3);
    /* The preloaded library's API, when it is there (not without the preload). */
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "vramwatch_dump");

    pthread_t th[256];
    for (int i = 0; i < nthreads; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0, 4);

    /* Reports written while every thread allocates, and the process's own memory once warm
     * (a tenth of the pairs done) and at the end: the library's tables must not grow with the
     * number of pairs, only with what is live and with distinct call sites. */
    long total = (long)nthreads * pairs, rss_warm = -1, maps_warm = -1;
    int dumps = 0;
    struct timespec nap = { 0, 20 * 1000 * 1000 };
    while (atomic_load(&finished) < nthreads) {
        if (rss_warm < 0 && atomic_load(&done) >= total / 10) {
            rss_warm = status_field("VmRSS:");
            maps_warm = count_maps();
        }
        if (dump && dumps < 8 && atomic_load(&done) >= total / 8 * (dumps + 1)) {
            CHECK(dump("request") == 0, 5);
            dumps++;
        }
        nanosleep(&nap, NULL);
    }
    if (rss_warm < 0) {
        rss_warm = status_field("VmRSS:");
        maps_warm = count_maps();
    }
    /* Measured with every thread still alive, so their stacks count both times. */
    long rss_end = status_field("VmRSS:"), maps_end = count_maps();
    atomic_store(&release, 1);
    for (int i = 0; i < nthreads; i++)
        CHECK(pthread_join(th[i], NULL) == 0, 6);
    printf("{\"live_bytes\": %llu, \"alloc_calls\": %ld, \"free_calls\": %ld, "
           "\"rss_warm_kib\": %ld, \"rss_end_kib\": %ld, \"maps_warm\": %ld, \"maps_end\": %ld, "
           "\"dumps\": %d}\n",
           (unsigned long long)atomic_load(&final_live), (long)nthreads * (pairs + 1),
           (long)nthreads * pairs, rss_warm, rss_end, maps_warm, maps_end, dumps);
    return 0;
}
