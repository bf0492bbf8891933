/* The cost of reports and of the library's memory: call sites and live allocations made in
 * stages, a report asked for after each, so the report's own `table_bytes` shows what a stack
 * and a live allocation cost, and the last report's writing time is measured.
 *
 * usage: cost SITES LIVE ROUNDS   (run under the preload)
 * stdout: one JSON line {"sites", "live", "table_bytes": [after 1 site, after SITES sites,
 *         after LIVE live], "write_ms": [ROUNDS times], "report_bytes"} */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#include "sites.h"

static int (*vw_dump)(const char *);
static char report[4096];

/* One leaf for both stages, so the live allocations reuse the stacks interned before. The
 * low bit of the argument says whether to free at once; the rest is the size. */
static __attribute__((noinline)) void leaf(void *arg)
{
    void *p;
    uintptr_t a = (uintptr_t)arg;
    CHECK(cudaMalloc(&p, a & ~(uintptr_t)1) == cudaSuccess, 10);
    if (a & 1)
        CHECK(cudaFree(p) == cudaSuccess, 11);
}

/* What leaf gets at allocation i of a stage: out of line, so that the stage loop below has one
 * call into the chain of sites rather than one per kind of argument. */
static __attribute__((noinline)) uintptr_t stage_arg(int stage, int i)
{
    return stage < 2 ? 4096 | 1 : 512 * (1 + (uintptr_t)(i % 16));
}

/* One stage's allocations, from one call instruction whatever the stage: kept out of line (and
 * leaf too), for an optimiser that peels, unrolls or unswitches the stage loop, or copies leaf
 * into its callers, would otherwise give each copy its own return address, and stage 2 would
 * intern new stacks instead of reusing stage 1's. */
static __attribute__((noinline)) void run_stage(int stage, int from, int to, int sites)
{
    for (int i = from; i < to; i++)
        site_call((unsigned)(i % sites), leaf, (void *)stage_arg(stage, i));
    __asm__ volatile("" ::: "memory"); /* no tail call */
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Writes a report and reads its "table_bytes" back. */
static long long dump_tables(double *ms)
{
    double t0 = now_ms();
    CHECK(vw_dump("exit") == 0, 20); /* the process's own report, read back below */
    if (ms)
        *ms = now_ms() - t0;
    static char buf[1 << 16];
    FILE *f = fopen(report, "r");
    CHECK(f, 21);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strstr(buf, "\"table_bytes\":");
    CHECK(p, 22);
    return atoll(p + 14);
}

int main(int argc, char **argv)
{
    CHECK(argc == 4, 1);
    int sites = atoi(argv[1]), live = atoi(argv[2]), rounds = atoi(argv[3]);
    CHECK(sites > 1 && sites <= (1 << SITE_BITS) && live >= sites && rounds > 0 && rounds <= 20, 1);
    vw_dump = (int (*)(const char *))dlsym(RTLD_DEFAULT, "vramwatch_dump");
    CHECK(vw_dump, 2);
    char host[256];
    gethostname(host, sizeof(host));
    host[255] = 0;
    for (char *s = host; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '-' || *s == '_'))
            *s = '_';
    snprintf(report, sizeof(report), "%s/vramwatch-%s-%d.json", getenv("VRAMWATCH_DIR"), host,
             (int)getpid());

    /* Stage 0: one stack; 1: every other stack interned, nothing left live (the difference
     * is the stacks alone); 2: LIVE allocations spread over those stacks (the difference is the
     * allocation table). One function for every stage (run_stage), so every stage calls from
     * the same instruction and the stacks of stage 2 are those of stage 1. */
    long long tb[3];
    /* The count of stages read from a volatile: a loop of a known three turns is unrolled at -O2
     * and up, and each copy would call run_stage from its own instruction. */
    static volatile int stages = 3;
    for (int stage = 0; stage < stages; stage++) {
        int from = stage == 1 ? 1 : 0, to = stage == 0 ? 1 : stage == 1 ? sites : live;
        run_stage(stage, from, to, sites);
        tb[stage] = dump_tables(NULL);
    }

    printf("{\"sites\": %d, \"live\": %d, \"table_bytes\": [%lld, %lld, %lld], \"write_ms\": [",
           sites, live, tb[0], tb[1], tb[2]);
    for (int r = 0; r < rounds; r++) {
        double ms;
        dump_tables(&ms);
        printf("%s%.2f", r ? ", " : "", ms);
    }
    struct stat st;
    CHECK(stat(report, &st) == 0, 3);
    printf("], \"report_bytes\": %lld}\n", (long long)st.st_size);
    return 0;
}
