/* Unit tests of the trace's ring of allocation and free events (lib/core/trace.c), directly and
 * through the core (no preload, no CUDA). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "core.h"
#include "core_calls.h"
#include "trace.h"

static struct trace_event out[VW_TRACE_DEFAULT];

static void add(uint64_t i, bool is_free)
{
    if (trace_on())
        trace_add(1000 + i, 0x1000 + i * 16, i + 1, "cudaMalloc",
                  trace_site_op((uint32_t)(i % 7), (int)(i % 3), is_free));
}

Test(trace, off_keeps_nothing)
{
    cr_assert(trace_setup(0));
    add(1, false);
    uint64_t total, lost;
    cr_assert_eq(trace_copy(out, VW_TRACE_DEFAULT, &total, &lost), 0);
    cr_assert_eq(total, 0);
    cr_assert_eq(trace_bytes(), 0);
}

Test(trace, keeps_every_field_in_order)
{
    cr_assert(trace_setup(16));
    for (uint64_t i = 0; i < 10; i++)
        add(i, i & 1);
    uint64_t total, lost;
    uint32_t n = trace_copy(out, VW_TRACE_DEFAULT, &total, &lost);
    cr_assert_eq(n, 10);
    cr_assert_eq(total, 10);
    cr_assert_eq(lost, 0);
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_eq(out[i].time_ns, 1000 + i);
        cr_assert_eq(out[i].address, 0x1000 + i * 16);
        cr_assert_eq(out[i].size, i + 1);
        cr_assert_str_eq(out[i].api, "cudaMalloc");
        cr_assert_eq(out[i].callsite, i % 7);
        cr_assert_eq(out[i].device, (int)(i % 3));
        cr_assert_eq(out[i].is_free, (bool)(i & 1));
    }
}

/* Past its size the ring keeps the newest, oldest of them first. */
Test(trace, wraps_around_keeping_the_newest_oldest_first)
{
    cr_assert(trace_setup(100));
    for (uint64_t i = 0; i < 1037; i++)
        add(i, false);
    uint64_t total, lost;
    uint32_t n = trace_copy(out, VW_TRACE_DEFAULT, &total, &lost);
    cr_assert_eq(n, 100);
    cr_assert_eq(total, 1037);
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(out[i].size, 937 + i + 1, "event %u: size %llu", i,
                     (unsigned long long)out[i].size);
    /* A smaller output keeps the newest. */
    n = trace_copy(out, 10, &total, &lost);
    cr_assert_eq(n, 10);
    cr_assert_eq(out[0].size, 1028);
    cr_assert_eq(out[9].size, 1037);
}

Test(trace, device_unknown_and_reset)
{
    cr_assert(trace_setup(4));
    trace_add(1, 2, 3, "cuMemAlloc_v2", trace_site_op(0, VW_DEV_UNKNOWN, false));
    uint64_t total, lost;
    cr_assert_eq(trace_copy(out, 4, &total, &lost), 1);
    cr_assert_eq(out[0].device, VW_DEV_UNKNOWN);
    trace_reset();
    cr_assert_eq(trace_copy(out, 4, &total, &lost), 0);
    cr_assert_eq(total, 0);
}

#define WRITERS 4
#define PER_WRITER 50000u

/* Each writer's events carry its number in the callsite and its own count in the size. */
static void *writer(void *arg)
{
    uint32_t w = (uint32_t)(uintptr_t)arg;
    for (uint32_t i = 0; i < PER_WRITER; i++)
        trace_add(i, ((uint64_t)w << 32) | i, i, "cudaMalloc", trace_site_op(w, 0, false));
    return NULL;
}

/* Concurrent writers lose nothing they should not: every entry copied is whole (its fields agree
 * with each other) and each writer's events stay in its own order. */
Test(trace, concurrent_writers_keep_whole_events_in_order, .timeout = 60)
{
    cr_assert(trace_setup(VW_TRACE_DEFAULT));
    pthread_t t[WRITERS];
    for (uintptr_t w = 0; w < WRITERS; w++)
        cr_assert_eq(pthread_create(&t[w], NULL, writer, (void *)w), 0);
    for (int w = 0; w < WRITERS; w++)
        pthread_join(t[w], NULL);
    uint64_t total, lost;
    uint32_t n = trace_copy(out, VW_TRACE_DEFAULT, &total, &lost);
    cr_assert_eq(total, (uint64_t)WRITERS * PER_WRITER);
    cr_assert_leq(n, VW_TRACE_DEFAULT);
    cr_assert_gt(n, VW_TRACE_DEFAULT / 2, "only %u of %u kept", n, VW_TRACE_DEFAULT);
    int64_t last[WRITERS];
    for (int w = 0; w < WRITERS; w++)
        last[w] = -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t w = out[i].callsite;
        cr_assert_lt(w, WRITERS);
        cr_assert_eq(out[i].address, ((uint64_t)w << 32) | out[i].size, "torn entry %u", i);
        cr_assert_eq(out[i].time_ns, out[i].size);
        cr_assert_gt((int64_t)out[i].size, last[w], "writer %u out of order", w);
        last[w] = (int64_t)out[i].size;
    }
    /* The newest event of the last writer to finish is among the kept. */
    cr_assert(last[0] == PER_WRITER - 1 || last[1] == PER_WRITER - 1 ||
              last[2] == PER_WRITER - 1 || last[3] == PER_WRITER - 1);
}

/* Through the core: an allocation and its free, with the allocation's call site and device;
 * pinned host memory stays out. */
Test(trace, core_records_allocations_and_frees)
{
    cr_assert(core_init());
    cr_assert(trace_setup(64));
    core_reset();
    uint32_t site = core_callsite((const uint64_t[]){ 0x1234 }, 1);
    cr_assert(alloc_req(CORE_DEVICE, 0xa000, 4096, 1, "cudaMalloc", site, 10));
    cr_assert(alloc_req(CORE_HOST, 0xb000, 512, 0, "cudaMallocHost", site, 11));
    struct core_alloc a;
    cr_assert(core_take(CORE_DEVICE, 0xa000, &a, 12));
    cr_assert(core_take(CORE_HOST, 0xb000, &a, 13));
    uint64_t total, lost;
    uint32_t n = trace_copy(out, 64, &total, &lost);
    cr_assert_eq(n, 2);
    cr_assert(!out[0].is_free);
    cr_assert(out[1].is_free);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(out[i].address, 0xa000);
        cr_assert_eq(out[i].size, 4096);
        cr_assert_eq(out[i].device, 1);
        cr_assert_eq(out[i].callsite, site);
        cr_assert_eq(out[i].time_ns, 10u + 2u * (unsigned)i);
    }
    trace_setup(0);
}
