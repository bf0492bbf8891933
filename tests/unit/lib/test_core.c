/* Unit tests of the accounting core, called directly (no preload, no CUDA). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "core.h"
#include "core_calls.h"

/* core_failure likewise. */
static enum core_failure_verdict fail_req(enum core_kind kind, int device, uint64_t size,
                                          const char *api, int code, const char *name, bool oom,
                                          uint32_t callsite, int64_t free_bytes,
                                          uint64_t pool_extra, uint64_t now_ns)
{
    struct core_request r = { .kind = kind,
                              .device = device,
                              .size = size,
                              .api = api,
                              .callsite = callsite,
                              .now_ns = now_ns };
    return core_failure(&r, code, name, oom, free_bytes, pool_extra);
}

static void setup(void)
{
    cr_assert(core_init());
    core_reset();
}

TestSuite(core, .init = setup);

static const uint64_t stack_a[] = { 0x1000, 0x2000, 0x3000 };
static const uint64_t stack_b[] = { 0x1000, 0x2000, 0x3001 };

Test(core, interning_stores_each_stack_once)
{
    uint32_t a1 = core_callsite(stack_a, 3);
    uint32_t a2 = core_callsite(stack_a, 3);
    uint32_t b = core_callsite(stack_b, 3);
    uint32_t prefix = core_callsite(stack_a, 2);
    cr_assert_neq(a1, 0);
    cr_assert_eq(a1, a2);
    cr_assert_neq(a1, b);
    cr_assert_neq(a1, prefix);
    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.ncallsites, 4); /* overflow site + 3 */
}

Test(core, live_peak_and_counts_per_device)
{
    uint32_t site = core_callsite(stack_a, 3);
    cr_assert(alloc_req(CORE_DEVICE, 0x10000, 1000, 0, "cudaMalloc", site, 10));
    cr_assert(alloc_req(CORE_DEVICE, 0x20000, 3000, 0, "cudaMalloc", site, 20));
    cr_assert(alloc_req(CORE_DEVICE, 0x30000, 500, 1, "cuMemAlloc_v2", site, 30));
    struct core_alloc a;
    cr_assert(core_take(CORE_DEVICE, 0x10000, &a, 0));
    cr_assert_eq(a.size, 1000);
    cr_assert(!core_take(CORE_DEVICE, 0x10000, &a, 0), "freed twice");
    cr_assert(alloc_req(CORE_DEVICE, 0x40000, 200, 0, "cudaMalloc", site, 40));

    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.devices[0].live_bytes, 3200);
    cr_assert_eq(s.devices[0].live_count, 2);
    cr_assert_eq(s.devices[0].peak_live_bytes, 4000);
    cr_assert_eq(s.devices[0].peak_time_ns, 20);
    cr_assert_eq(s.devices[0].alloc_calls, 3);
    cr_assert_eq(s.devices[0].free_calls, 1);
    cr_assert_eq(s.devices[1].live_bytes, 500);
    cr_assert(!s.devices[2].active);

    struct core_callsite cs[8];
    uint64_t fr[64];
    core_copy_callsites(cs, s.ncallsites, fr, 64);
    cr_assert_eq(cs[site].live_bytes, 3700);
    cr_assert_eq(cs[site].live_count, 3);
    cr_assert_eq(cs[site].alloc_calls, 4);
    cr_assert_eq(cs[site].alloc_bytes_total, 4700);
    cr_assert_eq(cs[site].nframes, 3);
    cr_assert_eq(fr[cs[site].frames_off + 2], 0x3000);
}

Test(core, failed_free_puts_the_allocation_back)
{
    cr_assert(alloc_req(CORE_POOL, 0x5000, 4096, 0, "cudaMallocAsync", 0, 1));
    struct core_alloc a;
    cr_assert(core_take(CORE_POOL, 0x5000, &a, 0));
    core_untake(&a);
    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.devices[0].live_bytes, 4096);
    cr_assert_eq(s.devices[0].pool_live_bytes, 4096);
    cr_assert_eq(s.devices[0].alloc_calls, 1, "the failed free must not count a new allocation");
    cr_assert_eq(s.devices[0].free_calls, 0);
}

/* A device free (cudaFree) of stream-ordered memory takes it out of the pools' figures too: the
 * free's common path handles device memory only and hands other kinds to the general one. */
Test(core, device_free_of_pool_memory_counts_it_as_pool_memory)
{
    cr_assert(alloc_req(CORE_POOL, 0x5000, 1000, 0, "cudaMallocAsync", 0, 1));
    cr_assert(alloc_req(CORE_DEVICE, 0x6000, 500, 0, "cudaMalloc", 0, 2));
    struct core_alloc a;
    cr_assert(core_take(CORE_DEVICE, 0x5000, &a, 3));
    cr_assert_eq(a.kind, CORE_POOL);
    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.devices[0].live_bytes, 500);
    cr_assert_eq(s.devices[0].pool_live_bytes, 0);
    cr_assert_eq(s.devices[0].free_calls, 1);
    struct timeline_device t;
    cr_assert(core_copy_timeline(0, &t));
    cr_assert_eq(t.b[t.cur].reserved_last, 1500, "live, plus what the pool is taken to keep");
}

/* A freed table slot is only marked free: the next record there gets every field anew. */
Test(core, a_reused_table_slot_gets_every_field_anew)
{
    uint32_t site = core_callsite_intern(stack_a, 3);
    cr_assert(alloc_req(CORE_MANAGED, 0x8000, 700, 1, "cudaMallocManaged", site, 5));
    struct core_alloc a;
    cr_assert(core_take(CORE_DEVICE, 0x8000, &a, 6));
    cr_assert(alloc_req(CORE_DEVICE, 0x8000, 300, 0, "cudaMalloc", 0, 7));
    uint64_t total;
    struct core_alloc live[4];
    cr_assert_eq(core_largest_live(live, 4, &total), 1);
    cr_assert_eq(live[0].size, 300);
    cr_assert_eq(live[0].time_ns, 7);
    cr_assert_str_eq(live[0].api, "cudaMalloc");
    cr_assert_eq(live[0].callsite, 0);
    cr_assert_eq(live[0].device, 0);
    cr_assert_eq(live[0].kind, CORE_DEVICE);
}

/* An allocation alone (no failure) makes the process owe a report, pinned host memory too. */
Test(core, an_allocation_alone_makes_a_report_due)
{
    cr_assert(!core_touched());
    cr_assert(alloc_req(CORE_HOST, 0x7000, 100, -1, "cudaMallocHost", 0, 1));
    cr_assert(core_touched());
    core_reset();
    cr_assert(!core_touched());
    cr_assert(alloc_req(CORE_DEVICE, 0x7000, 100, 3, "cudaMalloc", 0, 1));
    struct core_alloc a;
    cr_assert(core_take(CORE_DEVICE, 0x7000, &a, 2));
    cr_assert(core_touched(), "still due after everything was freed");
}

Test(core, kinds_do_not_mix)
{
    cr_assert(alloc_req(CORE_HOST, 0x7000, 100, -1, "cudaMallocHost", 0, 1));
    cr_assert(alloc_req(CORE_VMM, 0x7000, 2 << 20, 0, "cuMemCreate", 0, 1));
    struct core_alloc a;
    cr_assert(!core_take(CORE_DEVICE, 0x7000, &a, 0),
              "a device free must not release pinned memory");
    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.host.live_bytes, 100);
    cr_assert_eq(s.devices[0].live_bytes, 2 << 20, "pinned host memory is never device memory");
    cr_assert(core_take(CORE_VMM, 0x7000, &a, 0));
    cr_assert_eq(a.size, 2 << 20);
    cr_assert(core_take(CORE_HOST, 0x7000, &a, 0));
}

Test(core, reused_address_replaces_the_stale_record)
{
    cr_assert(alloc_req(CORE_DEVICE, 0x9000, 100, 0, "cudaMalloc", 0, 1));
    cr_assert(alloc_req(CORE_DEVICE, 0x9000, 300, 0, "cudaMalloc", 0, 2));
    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.devices[0].live_bytes, 300);
    cr_assert_eq(s.devices[0].live_count, 1);
}

Test(core, cache_flush_is_pressure_not_oom)
{
    cr_assert(alloc_req(CORE_DEVICE, 0x1000, 1 << 20, 0, "cudaMalloc", 0, 1));
    cr_assert(alloc_req(CORE_DEVICE, 0x2000, 2 << 20, 0, "cudaMalloc", 0, 2));
    enum core_failure_verdict v = fail_req(CORE_DEVICE, 0, 8 << 20, "cudaMalloc", 2,
                                           "cudaErrorMemoryAllocation", true, 0, 1234, 0, 100);
    cr_assert_eq(v, CORE_FAIL_REPORT, "the first OOM is always written");
    struct core_alloc a;
    cr_assert(core_take(CORE_DEVICE, 0x1000, &a, 0));
    cr_assert(core_take(CORE_DEVICE, 0x2000, &a, 0));
    cr_assert(alloc_req(CORE_DEVICE, 0x3000, 8 << 20, 0, "cudaMalloc", 0, 200));

    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.nevents, 1);
    cr_assert_eq(s.events[0].freed_bytes, 3 << 20);
    cr_assert_eq(s.events[0].freed_count, 2);
    cr_assert_eq(s.events[0].size, 8 << 20);
    cr_assert_eq(s.devices[0].cache_flushes, 1);
    cr_assert_eq(s.nfailures, 1);
    cr_assert_eq(s.failures[0].retried, 1);
    cr_assert_eq(s.failures[0].free_at, 1234);
    cr_assert_eq(s.failures[0].live_at, 3 << 20);
}

Test(core, failed_retry_is_the_oom_and_always_reported)
{
    cr_assert_eq(fail_req(CORE_DEVICE, 0, 1 << 30, "cudaMalloc", 2, "x", true, 0, -1, 0, 1000),
                 CORE_FAIL_REPORT);
    /* A different request soon after: rate-limited. */
    cr_assert_eq(fail_req(CORE_DEVICE, 0, 5 << 20, "cudaMalloc", 2, "x", true, 0, -1, 0, 2000),
                 CORE_FAIL_QUIET);
    /* Its retry fails: that is the OOM the application sees, written despite the rate limit. */
    cr_assert_eq(fail_req(CORE_DEVICE, 0, 5 << 20, "cudaMalloc", 2, "x", true, 0, -1, 0, 3000),
                 CORE_FAIL_REPORT);
    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.nfailures, 3);
    cr_assert_eq(s.failures[0].retried, 0);
    cr_assert_eq(s.failures[1].retried, 2);
    cr_assert_eq(s.failures[2].retried, 0);
    cr_assert_eq(s.nevents, 0);
    cr_assert_eq(s.devices[0].failed_calls, 3);
}

Test(core, non_oom_failures_never_ask_for_a_report)
{
    cr_assert_eq(fail_req(CORE_DEVICE, 0, 100, "cudaMalloc", 1, "cudaErrorInvalidValue", false, 0,
                          -1, 0, 1),
                 CORE_FAIL_QUIET);
    cr_assert(core_touched());
}

Test(core, failure_list_keeps_first_and_latest)
{
    for (uint64_t i = 0; i < 1000; i++)
        fail_req(CORE_DEVICE, 0, i + 1, "cudaMalloc", 1, "x", false, 0, -1, 0, i);
    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.failures_total, 1000);
    cr_assert_eq(s.nfailures, VW_FAILURES_KEPT);
    cr_assert_eq(s.failures[0].size, 1);
    cr_assert_eq(s.failures[63].size, 64);
    cr_assert_eq(s.failures[64].size, 1000 - (VW_FAILURES_KEPT - 64) + 1);
    cr_assert_eq(s.failures[VW_FAILURES_KEPT - 1].size, 1000);
    for (int i = 1; i < s.nfailures; i++)
        cr_assert_lt(s.failures[i - 1].time_ns, s.failures[i].time_ns, "oldest first");
}

Test(core, tables_grow_and_stay_exact)
{
    const uint64_t n = 200000;
    for (uint64_t i = 0; i < n; i++)
        cr_assert(alloc_req(CORE_DEVICE, 0x100000000ull + i * 512, 512, 0, "cudaMalloc", 0, i));
    for (uint64_t i = 0; i < n; i += 2) {
        struct core_alloc a;
        cr_assert(core_take(CORE_DEVICE, 0x100000000ull + i * 512, &a, 0));
    }
    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.devices[0].live_count, n / 2);
    cr_assert_eq(s.devices[0].live_bytes, n / 2 * 512);
    /* Every odd one is still findable after the shifts of backward deletion. */
    for (uint64_t i = 1; i < n; i += 2) {
        struct core_alloc a;
        cr_assert(core_take(CORE_DEVICE, 0x100000000ull + i * 512, &a, 0));
    }
}

Test(core, largest_live_sorted_and_bounded)
{
    for (uint64_t i = 1; i <= 50; i++)
        alloc_req(CORE_DEVICE, i * 0x1000, i * 100, 0, "cudaMalloc", 0, i);
    alloc_req(CORE_HOST, 0xdead000, 1 << 30, -1, "cudaMallocHost", 0, 1);
    struct core_alloc out[10];
    uint64_t total;
    int n = core_largest_live(out, 10, &total);
    cr_assert_eq(n, 10);
    cr_assert_eq(total, 50, "pinned host memory is not listed");
    for (int i = 0; i < 10; i++)
        cr_assert_eq(out[i].size, (uint64_t)(50 - i) * 100);
}

Test(core, markers_are_kept_and_truncated_safely)
{
    core_mark("epoch 1", 5);
    char long_label[200];
    memset(long_label, 'a', sizeof(long_label));
    /* a two-byte character straddling the cut */
    long_label[78] = (char)0xc3;
    long_label[79] = (char)0xa9;
    long_label[199] = 0;
    core_mark(long_label, 6);
    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.nmarkers, 2);
    cr_assert_str_eq(s.markers[0].label, "epoch 1");
    cr_assert_eq(strlen(s.markers[1].label), 78);
}

struct worker_arg {
    int id;
};

static void *worker(void *p)
{
    struct worker_arg *w = p;
    uint64_t frames[2] = { 0xabc, (uint64_t)w->id };
    uint32_t site = core_callsite(frames, 2);
    for (uint64_t i = 0; i < 20000; i++) {
        uint64_t key = ((uint64_t)w->id << 40) | (i << 9);
        alloc_req(CORE_DEVICE, key, 512, w->id % 2, "cudaMalloc", site, i);
        if (i % 4 != 3) {
            struct core_alloc a;
            core_take(CORE_DEVICE, key, &a, 0);
        }
    }
    return NULL;
}

Test(core, threads_keep_exact_totals)
{
    pthread_t t[8];
    struct worker_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i].id = i + 1;
        pthread_create(&t[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    struct core_snapshot s;
    core_snapshot(&s);
    uint64_t live = s.devices[0].live_bytes + s.devices[1].live_bytes;
    cr_assert_eq(live, 8 * 5000 * 512ull);
    cr_assert_eq(s.devices[0].alloc_calls + s.devices[1].alloc_calls, 8 * 20000);
    cr_assert_eq(s.devices[0].free_calls + s.devices[1].free_calls, 8 * 15000);
}

/* The call sites' live bytes at the device's peak follow a known sequence exactly: the state
 * at the latest peak is kept, later allocations that do not pass it change nothing, frees after
 * it change nothing, and each device's peak counts for its own allocations. */
Test(core, live_at_the_peak_per_call_site)
{
    uint32_t a = core_callsite(stack_a, 3), b = core_callsite(stack_b, 3);
    struct core_alloc x;
    struct core_callsite cs[8];
    uint64_t fr[64];
    cr_assert(alloc_req(CORE_DEVICE, 0x1000, 100, 0, "cudaMalloc", a, 1));
    cr_assert(alloc_req(CORE_DEVICE, 0x2000, 200, 0, "cudaMalloc", b, 2)); /* peak 300 */
    cr_assert(core_take(CORE_DEVICE, 0x1000, &x, 3));
    core_copy_callsites(cs, 3, fr, 64);
    cr_assert_eq(cs[a].live_bytes_at_peak, 100);
    cr_assert_eq(cs[b].live_bytes_at_peak, 200);
    cr_assert_eq(cs[a].live_bytes, 0);
    cr_assert(alloc_req(CORE_DEVICE, 0x3000, 50, 0, "cudaMalloc", a, 4));
    cr_assert(alloc_req(CORE_DEVICE, 0x4000, 100, 0, "cudaMalloc", b, 5)); /* peak 350 */
    cr_assert(core_take(CORE_DEVICE, 0x2000, &x, 6));
    core_copy_callsites(cs, 3, fr, 64);
    cr_assert_eq(cs[a].live_bytes_at_peak, 50);
    cr_assert_eq(cs[b].live_bytes_at_peak, 300);
    cr_assert(core_take(CORE_DEVICE, 0x3000, &x, 7));
    cr_assert(alloc_req(CORE_DEVICE, 0x5000, 400, 0, "cudaMalloc", a, 8)); /* peak 500 */
    cr_assert(core_take(CORE_DEVICE, 0x5000, &x, 9));
    cr_assert(alloc_req(CORE_DEVICE, 0x6000, 300, 0, "cudaMalloc", b, 10)); /* 400: no peak */
    cr_assert(alloc_req(CORE_HOST, 0x7000, 999, -1, "cudaMallocHost", a, 11));
    cr_assert(alloc_req(CORE_DEVICE, 0x8000, 70, 1, "cudaMalloc", a, 12)); /* device 1 */
    cr_assert(core_take(CORE_DEVICE, 0x8000, &x, 13));
    core_copy_callsites(cs, 3, fr, 64);
    cr_assert_eq(cs[a].live_bytes_at_peak, 400 + 70, "device 0's peak and device 1's");
    cr_assert_eq(cs[b].live_bytes_at_peak, 100);
    cr_assert_eq(cs[a].live_bytes, 999);
    cr_assert_eq(cs[b].live_bytes, 400);
    cr_assert(!cs[a].has_failure);
    struct core_snapshot s;
    core_snapshot(&s);
    cr_assert_eq(s.devices[0].peak_live_bytes, 500);
    uint64_t sum = 0;
    for (int i = 0; i < 3; i++)
        sum += cs[i].live_bytes_at_peak;
    cr_assert_eq(sum, 500 + 70, "the sites' figures add up to the devices' peaks");

    /* At an out-of-memory failure: the failing device's sites as they were then. */
    fail_req(CORE_DEVICE, 0, 1 << 30, "cudaMalloc", 2, "cudaErrorMemoryAllocation", true, b, -1, 0,
             14);
    cr_assert(core_take(CORE_DEVICE, 0x6000, &x, 15));
    core_copy_callsites(cs, 3, fr, 64);
    cr_assert(cs[b].has_failure);
    cr_assert_eq(cs[b].live_bytes_at_failure, 400);
    cr_assert_eq(cs[a].live_bytes_at_failure, 0, "host memory is not the device's");
    cr_assert_eq(cs[b].live_bytes, 100, "what is live after the failure is not the figure at it");
}

/* Threads on one device, each in its own lane (docs/design.md, "Threads on one device: lanes"):
 * one step per thread, the threads one after the other, so every state is known. */
struct lane_step {
    uint64_t key, size; /* size 0: free `key` */
    uint64_t time;
};

static void *lane_step_run(void *arg)
{
    const struct lane_step *st = arg;
    uint32_t site = core_callsite(stack_b, 3);
    if (st->size) {
        alloc_req(CORE_DEVICE, st->key, st->size, 2, "cudaMalloc", site, st->time);
    } else {
        struct core_alloc a;
        if (!core_take(CORE_DEVICE, st->key, &a, st->time))
            return (void *)1;
    }
    return NULL;
}

static void lane_step(uint64_t key, uint64_t size, uint64_t time)
{
    struct lane_step st = { key, size, time };
    pthread_t t;
    void *r;
    cr_assert_eq(pthread_create(&t, NULL, lane_step_run, &st), 0);
    pthread_join(t, &r);
    cr_assert_null(r, "the free of %#llx found nothing", (unsigned long long)key);
}

Test(core, threads_on_one_device_keep_peaks_and_events_exact)
{
    /* Each step on a new thread, so on a lane of its own (the 9th wraps to the first again). */
    lane_step(0x100000, 1000, 1000);
    lane_step(0x200000, 3000, 2000); /* a second lane: from here on lanes keep to limits */
    lane_step(0x100000, 0, 3000);    /* a free in another thread's lane */
    lane_step(0x300000, 500, 4000);
    core_mark("epoch 1", 5000); /* phase peak from here: 3500 */
    lane_step(0x400000, 200, 6000);
    lane_step(0x300000, 0, 7000);
    lane_step(0x500000, 2000, 8000); /* 3000 + 200 + 2000: above the peak of 4000 */
    lane_step(0x500000, 0, 9000);
    lane_step(0x600000, 1500, 10000);
    lane_step(0x600000, 0, 11000);
    struct core_snapshot s;
    core_snapshot(&s);
    const struct core_device *d = &s.devices[2];
    cr_assert_eq(d->peak_live_bytes, 5200);
    cr_assert_eq(d->peak_time_ns, 8000);
    cr_assert_eq(d->live_bytes, 3200);
    cr_assert_eq(d->alloc_calls, 6);
    cr_assert_eq(d->free_calls, 4);
    cr_assert_eq(d->live_count, 2);
    core_mark("epoch 2", 12000);
    core_snapshot(&s);
    cr_assert_eq(s.nmarkers, 2);
    cr_assert_eq(s.markers[0].phase_peak_bytes, 4000); /* 1000 + 3000, before the marker */
    cr_assert_eq(s.markers[1].phase_peak_bytes, 5200);
    /* Every allocation and free is an event of the timeline, whichever lane made it. */
    static struct timeline_device t;
    cr_assert(core_copy_timeline(2, &t));
    cr_assert_eq(t.events, 10);
    /* The call site's live bytes at the peak: everything live then came from it. */
    static struct core_callsite cs[8];
    static uint64_t fr[64];
    core_copy_callsites(cs, s.ncallsites, fr, 64);
    uint32_t site = core_callsite(stack_b, 3);
    cr_assert_eq(cs[site].live_bytes_at_peak, 5200);
    cr_assert_eq(cs[site].live_bytes, 3200);
}
