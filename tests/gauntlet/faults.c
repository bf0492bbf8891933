/* The faults attack, one mode per fault; run under the preload by gauntlet.py.
 *
 * usage: faults dump_loop SITES   allocations from SITES call sites, then reports written in a
 *                                 loop until killed (the SIGKILL-while-writing attack)
 *        faults full_disk         allocations, an out-of-memory failure, reports asked for,
 *                                 then exit status 3 (run with a full or unwritable folder)
 *        faults signal segv|abort handler|nohandler
 *                                 allocate, then die of the signal, with or without a handler
 *                                 of our own that prints "handler called" and lets it go on
 *        faults dlclose SIMDIR    the runtime and the driver dlopen'ed, used, dlclose'd, again
 *        faults two_copies A B    two copies of the runtime (files A and B) in one process
 *        faults stale_tmp         a killed process's temporary report names already taken
 * Exit status 0 (3 for full_disk), or a small number naming the failed step. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"

#include "sites.h"

#define MiB (1ull << 20)
typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*free_fn)(void *);
typedef CUresult (*drv_alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*drv_init_fn)(unsigned);

static int (*vw_dump)(const char *);
static malloc_fn rt_malloc;
static free_fn rt_free;

/* This program links no CUDA library: the runtime is dlopen'ed (from the library path), as
 * Python loads it, so the dlclose mode can really unload it. */
static void load_rt(void)
{
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    CHECK(rt, 2);
    rt_malloc = (malloc_fn)dlsym(rt, "cudaMalloc");
    rt_free = (free_fn)dlsym(rt, "cudaFree");
    CHECK(rt_malloc && rt_free, 3);
    vw_dump = (int (*)(const char *))dlsym(RTLD_DEFAULT, "vramwatch_dump");
}

static void leaf_alloc(void *arg)
{
    void *p;
    CHECK(rt_malloc(&p, (size_t)(uintptr_t)arg) == cudaSuccess, 10);
}

/* A report of a few hundred KiB (1000 live allocations listed, thousands of call sites with
 * their frames), written again and again: most of the process's time is inside the write. */
static int dump_loop(int sites)
{
    load_rt();
    CHECK(vw_dump, 11);
    for (int i = 0; i < sites; i++)
        site_call((unsigned)i, leaf_alloc, (void *)(uintptr_t)(4096 + 512 * (i % 7)));
    for (;;)
        CHECK(vw_dump("exit") == 0, 12); /* the process's own report, rewritten again and again */
}

static int full_disk(void)
{
    load_rt();
    void *p, *q;
    CHECK(rt_malloc(&p, 8 * MiB) == cudaSuccess, 20);
    /* Out of memory: the library tries to write a report before the call returns. */
    CHECK(rt_malloc(&q, 1ull << 40) == cudaErrorMemoryAllocation, 21);
    for (int i = 0; vw_dump && i < 3; i++)
        CHECK(vw_dump("request") != 0, 22); /* the report cannot be written: an error, no more */
    CHECK(rt_free(p) == cudaSuccess, 23);
    CHECK(rt_malloc(&p, 2 * MiB) == cudaSuccess, 24);
    printf("ran on\n");
    fflush(stdout);
    return 3; /* the job's own status: it must come out unchanged */
}

static void on_signal(int sig)
{
    static const char msg[] = "handler called\n";
    ssize_t w = write(2, msg, sizeof(msg) - 1);
    (void)w;
    (void)sig; /* SA_RESETHAND: returning lets the default action run, as real handlers do */
}

static int die(const char *how, const char *handler)
{
    int sig = !strcmp(how, "segv") ? SIGSEGV : SIGABRT;
    void *p;
    load_rt();
    CHECK(rt_malloc(&p, 3 * MiB) == cudaSuccess, 30);
    if (!strcmp(handler, "handler")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESETHAND;
        CHECK(sigaction(sig, &sa, NULL) == 0, 31);
    }
    if (sig == SIGABRT)
        abort();
    /* A wild store, through a pointer the compiler cannot see is bad (a literal NULL would be
     * turned into a trap instruction, which is SIGILL). */
    static volatile uintptr_t wild = 16;
    *(volatile int *)wild = 1;
    return 32;
}

/* dlopen, use, dlclose, and again: the library must neither crash nor lose a round (the new
 * copy may be mapped elsewhere, and its functions are then new real functions). What the
 * program can observe (lookups by name, whether a library went away, calls through a pointer
 * looked up before dlclose) is printed, for gauntlet.py to compare with a run without the
 * preload: it must be the same. */
static int dl_cycle(const char *simdir)
{
    char rt_path[4096], drv_path[4096];
    snprintf(rt_path, sizeof(rt_path), "%s/libcudart.so.13", simdir);
    snprintf(drv_path, sizeof(drv_path), "%s/libcuda.so.1", simdir);
    void *last_base = NULL;
    /* Nothing of CUDA is loaded: a program probing for it must find nothing, as without the
     * preload (whose exported functions must not pass for the real ones). */
    printf("probe before: %s %s\n", dlsym(RTLD_DEFAULT, "cudaMalloc") ? "found" : "none",
           dlsym(RTLD_DEFAULT, "cuMemAlloc_v2") ? "found" : "none");
    for (int round = 0; round < 3; round++) {
        /* The last round in the global scope, where a lookup by name finds our exports. */
        void *rt = dlopen(rt_path, RTLD_NOW | (round == 2 ? RTLD_GLOBAL : RTLD_LOCAL));
        CHECK(rt, 40);
        malloc_fn global = round == 2 ? (malloc_fn)dlsym(RTLD_DEFAULT, "cudaMalloc") : NULL;
        CHECK(round < 2 || global, 40);
        malloc_fn m = (malloc_fn)dlsym(rt, "cudaMalloc");
        free_fn f = (free_fn)dlsym(rt, "cudaFree");
        CHECK(m && f, 41);
        void *p, *q;
        CHECK(m(&p, (size_t)(round + 1) * MiB) == cudaSuccess, 42); /* left live */
        CHECK(m(&q, MiB) == cudaSuccess && f(q) == cudaSuccess, 43);
        void *plain = dlsym(rt, "cudaGetErrorName"); /* not hooked: where the runtime is */
        Dl_info where;
        CHECK(dladdr(plain, &where), 46);
        void *base = where.dli_fbase;
        if (round > 0)
            CHECK(base != last_base, 46);
        last_base = base;
        void *drv = dlopen(drv_path, RTLD_NOW | RTLD_LOCAL);
        CHECK(drv, 44);
        drv_alloc_fn da = (drv_alloc_fn)dlsym(drv, "cuMemAlloc_v2");
        CHECK(da, 45);
        CUdeviceptr d;
        CHECK(da(&d, 4 * MiB) == CUDA_SUCCESS, 46); /* left live */
        CHECK(dlclose(drv) == 0, 47);
        CHECK(dlclose(rt) == 0, 48);
        Dl_info di;
        int gone = !dladdr(plain, &di);
        printf("round %d: runtime %s\n", round, gone ? "unloaded" : "still loaded");
        /* A pointer looked up by name before dlclose: glibc keeps its library loaded for the
         * program, so calling it stays good (and must be recorded). */
        if (global && !gone)
            printf("round %d: call after dlclose %s\n", round,
                   global(&p, MiB) == cudaSuccess ? "ok" : "failed");
        /* Take the place the runtime was loaded at, so the next round maps it somewhere else
         * and its functions have new addresses (stale ones must not be called). */
        if (gone)
            CHECK(mmap(base, 4096, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1,
                       0) == base,
                  50);
    }
    vw_dump = (int (*)(const char *))dlsym(RTLD_DEFAULT, "vramwatch_dump");
    if (vw_dump)
        CHECK(vw_dump("request") == 0, 49); /* a report with both libraries closed */
    return 0;
}

static int two_copies(const char *a, const char *b)
{
    void *ha = dlopen(a, RTLD_NOW | RTLD_LOCAL), *hb = dlopen(b, RTLD_NOW | RTLD_LOCAL);
    CHECK(ha && hb && ha != hb, 50);
    malloc_fn ma = (malloc_fn)dlsym(ha, "cudaMalloc"), mb = (malloc_fn)dlsym(hb, "cudaMalloc");
    free_fn fa = (free_fn)dlsym(ha, "cudaFree"), fb = (free_fn)dlsym(hb, "cudaFree");
    CHECK(ma && mb && fa && fb, 51);
    void *p, *q, *r;
    for (int i = 0; i < 100; i++) {
        CHECK(ma(&p, MiB) == cudaSuccess && mb(&q, MiB) == cudaSuccess, 52);
        CHECK(fb(p) == cudaSuccess && fa(q) == cudaSuccess, 53); /* freed by the other copy */
    }
    CHECK(ma(&p, 2 * MiB) == cudaSuccess && mb(&q, 3 * MiB) == cudaSuccess, 54);
    CHECK(mb(&r, 5 * MiB) == cudaSuccess && fa(r) == cudaSuccess, 55);
    CHECK(dlclose(hb) == 0, 56);
    CHECK(ma(&r, 4 * MiB) == cudaSuccess, 57); /* live: 2 + 3 + 4 MiB */
    return 0;
}

/* A process killed while writing leaves its temporary file behind; a later process with the
 * same pid (a container restarts its job with the same pids) must still write its reports. */
static int stale_tmp(void)
{
    char host[256], path[4096];
    gethostname(host, sizeof(host));
    host[255] = 0;
    for (char *s = host; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '-' || *s == '_'))
            *s = '_';
    for (int seq = 0; seq < 4; seq++) {
        snprintf(path, sizeof(path), "%s/vramwatch-%s-%d.json.tmp-%ld-%d", getenv("VRAMWATCH_DIR"),
                 host, (int)getpid(), (long)syscall(SYS_gettid), seq);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
        CHECK(fd >= 0, 60);
        CHECK(write(fd, "{\"schema\": \"vramw", 17) == 17, 61); /* half a report */
        close(fd);
    }
    void *p;
    load_rt();
    CHECK(rt_malloc(&p, 6 * MiB) == cudaSuccess, 62);
    return 0;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, 1);
    if (!strcmp(argv[1], "dump_loop") && argc == 3)
        return dump_loop(atoi(argv[2]));
    if (!strcmp(argv[1], "full_disk"))
        return full_disk();
    if (!strcmp(argv[1], "signal") && argc == 4)
        return die(argv[2], argv[3]);
    if (!strcmp(argv[1], "dlclose") && argc == 3)
        return dl_cycle(argv[2]);
    if (!strcmp(argv[1], "two_copies") && argc == 4)
        return two_copies(argv[2], argv[3]);
    if (!strcmp(argv[1], "stale_tmp"))
        return stale_tmp();
    return 1;
}
