/* test_findings.c: when memory that grows is a leak (findings_leaks). A call site whose live
 * allocations were made across the run reads as a leak without repeating markers; but a run
 * that said it completed fewer than three training steps has not repeated anything yet: its
 * growth is the steps themselves (multi-scale training's larger sides, a cache filling), and
 * under load its allocations' times spread over the run's quarters by chance. A run that promised
 * to say when its steps end (process.steps_reported) and said none completed none. */
#include <stdbool.h>
#include <stdio.h>

#include "check.h"

#include "findings.h"
#include "model.h"

static int failures;

#define MiB (1ll << 20)

/* Six allocations of the call site: evenly spread (one per iteration), or in three bursts of
 * two, in three quarters of the run (steps that needed more). */
static size_t leaks_with_steps(int64_t steps, bool bursts, bool promised)
{
    static const int64_t even[6] = { 30, 90, 150, 210, 270, 330 };
    static const int64_t burst[6] = { 50, 55, 150, 155, 350, 355 };
    static struct model_live live[6];
    for (int i = 0; i < 6; i++)
        live[i] = (struct model_live){ .address = "0x1", .size = 8 * MiB, .device = { 0, true },
                                       .api = "cudaMalloc", .callsite = 1,
                                       .time_unix_ns = bursts ? burst[i] : even[i] };
    static struct model_callsite site = { .id = 1 };
    struct model_device dev = { .ordinal = { 0, true },
                                .total_bytes = { 1024 * MiB, true },
                                .live_bytes = 32 * MiB,
                                .peak_live_bytes = 32 * MiB,
                                .steps = { .count = steps } };
    struct model_report r = { .time_unix_ns = 400,
                              .process = { .start_unix_ns = { 0, true },
                                          .steps_reported = promised ? 1 : -1 },
                              .devices = &dev,
                              .n_devices = 1,
                              .callsites = &site,
                              .n_callsites = 1,
                              .live = live,
                              .n_live = 6 };
    struct leak_finding out[2];
    return findings_leaks(&r, out, 2);
}

int main(void)
{
    EXPECT(leaks_with_steps(0, false, false) == 1); /* no steps said: the spread decides */
    EXPECT(leaks_with_steps(2, false, false) == 0); /* two steps completed: nothing repeated yet */
    EXPECT(leaks_with_steps(6, false, false) == 1); /* growth across six steps */
    EXPECT(leaks_with_steps(0, true, false) == 0);  /* three bursts: steps that needed more */
    /* steps promised and none said: none completed, nothing has repeated */
    EXPECT(leaks_with_steps(0, false, true) == 0);
    EXPECT(leaks_with_steps(6, false, true) == 1);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
