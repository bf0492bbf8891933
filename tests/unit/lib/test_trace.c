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
        trace_add(0, 1000 + i, 0x1000 + i * 16, i + 1, "cudaMalloc",
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
    trace_add(5, 1, 2, 3, "cuMemAlloc_v2", trace_site_op(0, VW_DEV_UNKNOWN, false));
    uint64_t total, lost;
    cr_assert_eq(trace_copy(out, 4, &total, &lost), 1);
    cr_assert_eq(out[0].device, VW_DEV_UNKNOWN);
    trace_reset();
    cr_assert_eq(trace_copy(out, 4, &total, &lost), 0);
    cr_assert_eq(total, 0);
}

/* Across rings the order is by time, and where times are equal a free comes first (an
 * allocation's free is recorded at least 1 ns after it: core.c); each ring keeps its own order. */
Test(trace, rings_merge_by_time_free_first)
{
    cr_assert(trace_setup(16));
    trace_add(3, 30, 0xa, 1, "cudaMalloc", trace_site_op(1, 0, false));
    trace_add(1, 10, 0xb, 2, "cudaMalloc", trace_site_op(1, 0, false));
    trace_add(1, 30, 0xb, 2, "cudaMalloc", trace_site_op(1, 0, true));
    trace_add(7, 20, 0xc, 3, "cudaMalloc", trace_site_op(1, 0, false));
    trace_add(7, 5, 0xc, 3, "cudaMalloc", trace_site_op(1, 0, true)); /* out of time in its ring */
    uint64_t total, lost;
    uint32_t n = trace_copy(out, 16, &total, &lost);
    cr_assert_eq(n, 5);
    cr_assert_eq(total, 5);
    uint64_t want_time[] = { 20, 5, 10, 30, 30 }; /* ring 7 keeps its order, read from the newest */
    uint64_t want_addr[] = { 0xc, 0xc, 0xb, 0xb, 0xa };
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_eq(out[i].time_ns, want_time[i], "event %u: time %llu", i,
                     (unsigned long long)out[i].time_ns);
        cr_assert_eq(out[i].address, want_addr[i], "event %u", i);
    }
    /* At most trace_cap in all, the newest. */
    cr_assert(trace_setup(3));
    for (uint64_t i = 0; i < 10; i++)
        trace_add((unsigned)i, 100 + i, i, 1, "cudaMalloc", trace_site_op(0, 0, false));
    n = trace_copy(out, 16, &total, &lost);
    cr_assert_eq(n, 3);
    cr_assert_eq(total, 10);
    cr_assert_eq(out[0].time_ns, 107);
    cr_assert_eq(out[2].time_ns, 109);
}

#define WRITERS 4
#define PER_WRITER 50000u

struct writer_arg {
    uint32_t w;
    unsigned lane;
};

/* Each writer's events carry its number in the callsite and its own count in the size. */
static void *writer(void *arg)
{
    const struct writer_arg *a = arg;
    for (uint32_t i = 0; i < PER_WRITER; i++)
        trace_add(a->lane, i, ((uint64_t)a->w << 32) | i, i, "cudaMalloc",
                  trace_site_op(a->w, 0, false));
    return NULL;
}

/* Concurrent writers, on rings of their own and all on one: every entry copied is whole (its
 * fields agree with each other) and each writer's events stay in its own order. */
static void concurrent(bool one_ring)
{
    cr_assert(trace_setup(VW_TRACE_DEFAULT));
    pthread_t t[WRITERS];
    struct writer_arg args[WRITERS];
    for (uint32_t w = 0; w < WRITERS; w++) {
        args[w] = (struct writer_arg){ w, one_ring ? 0 : w };
        cr_assert_eq(pthread_create(&t[w], NULL, writer, &args[w]), 0);
    }
    for (int w = 0; w < WRITERS; w++)
        pthread_join(t[w], NULL);
    uint64_t total, lost;
    uint32_t n = trace_copy(out, VW_TRACE_DEFAULT, &total, &lost);
    cr_assert_eq(total, (uint64_t)WRITERS * PER_WRITER);
    cr_assert_leq(n, VW_TRACE_DEFAULT);
    cr_assert_gt(n, VW_TRACE_DEFAULT / 2, "only %u of %u kept", n, VW_TRACE_DEFAULT);
    int64_t last[WRITERS] = { -1, -1, -1, -1 };
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

Test(trace, concurrent_writers_on_rings_of_their_own, .timeout = 60)
{
    concurrent(false);
}

Test(trace, concurrent_writers_on_one_ring, .timeout = 60)
{
    concurrent(true);
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
