/* Unit tests of the whole-run timeline, through the core directly (no preload, no CUDA). */
#include <criterion/criterion.h>
#include <string.h>

#include "core.h"
#include "core_calls.h"

static void setup(void)
{
    cr_assert(core_init());
    core_reset();
    core_timeline_enable(true);
}

TestSuite(timeline, .init = setup);

static struct timeline_device copy;

#define SEC 1000000000ull
#define T0 (1700000000ull * SEC)

/* The stated bound (docs/performance.md): at most 3 MiB of address space for all 65 device
 * slots, whatever the run's length, and under 48 KiB per device in use. */
Test(timeline, fixed_memory_bound)
{
    cr_assert_leq(core_timeline_bytes(), 3u << 20);
    cr_assert_leq(sizeof(struct timeline_device), 48u << 10);
}

/* Ten million events over three days: the buckets stay within their fixed count, the peak keeps
 * its exact value and time, and the live memory before and after it is right. */
Test(timeline, ten_million_events_keep_the_peak_at_its_time, .timeout = 120)
{
    const uint64_t n = 10000000, span = 3ull * 24 * 3600 * SEC;
    const uint64_t step = span / n;         /* ~26 ms between events */
    const uint64_t peak_at = n / 3 * 2 + 1; /* an odd event: an allocation */
    const uint64_t base = 4ull << 30;
    cr_assert(alloc_req(CORE_DEVICE, 0x10, base, 0, "cudaMalloc", 0, T0));
    uint64_t peak_time = 0;
    struct core_alloc a;
    for (uint64_t i = 1; i < n; i += 2) {
        uint64_t t = T0 + i * step;
        uint64_t size = (i == peak_at) ? (6ull << 30) : (1ull << 20) * (1 + i % 512);
        if (i == peak_at)
            peak_time = t;
        cr_assert(alloc_req(CORE_DEVICE, 0x100000, size, 0, "cudaMalloc", 0, t));
        cr_assert(core_take(CORE_DEVICE, 0x100000, &a, t + step));
    }
    cr_assert(core_copy_timeline(0, &copy));
    cr_assert_eq(copy.events, n + 1); /* the base allocation, then n/2 pairs */
    cr_assert_leq(copy.cur, VW_TL_BUCKETS - 1);
    cr_assert_geq(copy.cur, VW_TL_BUCKETS / 2 - 1,
                  "at least half the buckets in use after merging");
    cr_assert_gt(copy.merges, 10);
    /* Exactly one bucket holds the peak, at its exact time. */
    int found = 0;
    uint64_t most = 0;
    for (uint32_t k = 0; k <= copy.cur; k++) {
        const struct timeline_bucket *b = &copy.b[k];
        if (b->live_max > most)
            most = b->live_max;
        if (b->live_max == base + (6ull << 30)) {
            found++;
            cr_assert_eq(b->peak_time_ns, peak_time);
            uint64_t from = copy.start_ns + ((uint64_t)k << copy.shift);
            cr_assert(peak_time >= from && peak_time < from + (1ull << copy.shift),
                      "the peak's bucket covers the peak's time");
        }
        if (k > 0) /* bucket 0 starts from nothing, before the base allocation */
            cr_assert_geq(b->live_min, base, "live memory never fell below the base allocation");
    }
    cr_assert_eq(found, 1);
    cr_assert_eq(most, base + (6ull << 30));
    /* The last bucket ends with only the base live, the first starts from nothing. */
    cr_assert_eq(copy.b[copy.cur].live_last, base);
    cr_assert_eq(copy.b[0].live_max >= base, 1);
    /* The largest growth step is the peak's allocation. */
    struct timeline_step steps[VW_TL_STEPS];
    uint32_t ns = timeline_steps_sorted(&copy, steps);
    cr_assert_eq(ns, VW_TL_STEPS);
    cr_assert_eq(steps[0].size, 6ull << 30);
    cr_assert_eq(steps[0].time_ns, peak_time);
    for (uint32_t k = 1; k < ns; k++)
        cr_assert_geq(steps[k - 1].size, steps[k].size, "largest first");
}

Test(timeline, a_short_run_keeps_millisecond_buckets)
{
    cr_assert(alloc_req(CORE_DEVICE, 0x10, 100, 0, "cudaMalloc", 0, T0));
    cr_assert(alloc_req(CORE_DEVICE, 0x20, 300, 0, "cudaMalloc", 0, T0 + 5 * 1000000));
    struct core_alloc a;
    cr_assert(core_take(CORE_DEVICE, 0x20, &a, T0 + 9 * 1000000));
    cr_assert(core_copy_timeline(0, &copy));
    cr_assert_eq(copy.merges, 0);
    cr_assert_eq(copy.shift, VW_TL_FIRST_SHIFT);
    cr_assert_eq(copy.b[0].live_max, 100);
    uint32_t k = (uint32_t)((5 * 1000000ull) >> VW_TL_FIRST_SHIFT);
    cr_assert_eq(copy.b[k].live_min, 100, "a new bucket starts from what was live before it");
    cr_assert_eq(copy.b[k].live_max, 400);
    cr_assert_eq(copy.b[copy.cur].live_last, 100);
    cr_assert(!core_copy_timeline(1, &copy), "a device without events has no timeline");
}

Test(timeline, out_of_order_times_go_to_the_newest_bucket)
{
    cr_assert(alloc_req(CORE_DEVICE, 0x10, 100, 0, "cudaMalloc", 0, T0 + SEC));
    cr_assert(alloc_req(CORE_DEVICE, 0x20, 50, 0, "cudaMalloc", 0, T0)); /* an older clock */
    cr_assert(core_copy_timeline(0, &copy));
    cr_assert_eq(copy.b[copy.cur].live_last, 150);
    cr_assert_eq(copy.events, 2);
}

/* Times at the far end of the clock: the newest bucket's end cannot be written in 64 bits, so
 * it stands for "past any time", and later events still land in the newest bucket. */
Test(timeline, times_at_the_end_of_the_clock_stay_in_the_newest_bucket)
{
    cr_assert(alloc_req(CORE_DEVICE, 0x10, 100, 0, "cudaMalloc", 0, T0));
    cr_assert(alloc_req(CORE_DEVICE, 0x20, 50, 0, "cudaMalloc", 0, UINT64_MAX - 10));
    struct core_alloc a;
    cr_assert(core_take(CORE_DEVICE, 0x10, &a, UINT64_MAX - 1));
    cr_assert(alloc_req(CORE_DEVICE, 0x30, 7, 0, "cudaMalloc", 0, T0 + SEC)); /* older clock */
    cr_assert(core_copy_timeline(0, &copy));
    cr_assert_lt(copy.cur, VW_TL_BUCKETS);
    cr_assert_eq(copy.events, 4);
    const struct timeline_bucket *b = &copy.b[copy.cur];
    cr_assert_eq(b->live_last, 57);
    cr_assert_eq(b->live_max, 150);
    cr_assert_eq(b->peak_time_ns, UINT64_MAX - 10);
    uint64_t from = copy.start_ns + ((uint64_t)copy.cur << copy.shift);
    cr_assert(from <= UINT64_MAX - 10, "the newest bucket covers the late events");
}

Test(timeline, measurements_give_untracked_and_pool_reserved)
{
    cr_assert(alloc_req(CORE_POOL, 0x10, 1000, 0, "cudaMallocAsync", 0, T0));
    struct core_alloc a;
    cr_assert(core_take(CORE_POOL, 0x10, &a, T0 + 1));
    cr_assert(core_copy_timeline(0, &copy));
    cr_assert_eq(copy.b[0].live_last, 0);
    cr_assert_eq(copy.b[0].reserved_last, 1000, "the pool is taken to keep what it reached");
    core_measure(0, 5000, 0, T0 + 2); /* the pool released everything; the card uses 5000 */
    cr_assert(core_copy_timeline(0, &copy));
    cr_assert_eq(copy.b[0].reserved_last, 0);
    cr_assert(copy.b[0].has_untracked);
    cr_assert_eq(copy.b[0].untracked_last, 5000);
    cr_assert_eq(copy.b[0].reserved_max, 1000);
}

Test(timeline, disabled_records_nothing)
{
    core_timeline_enable(false);
    cr_assert(alloc_req(CORE_DEVICE, 0x10, 100, 0, "cudaMalloc", 0, T0));
    core_timeline_enable(true);
    cr_assert(!core_copy_timeline(0, &copy));
}
