/* What recording into the whole-run timeline costs per allocation event: the core's
 * allocation + free pairs with the timeline on and off (core_timeline_enable), interleaved,
 * median of 7 rounds of 2 million pairs each, times advancing 1 µs per event so buckets fill and
 * merge as in a real run. Prints ns per event with and without, and the difference; then the cost
 * of the coarse clock reading each free adds in the library. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core.h"
#include "core_calls.h"

#define PAIRS 2000000
#define ROUNDS 7

static uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_fake = 1700000000000000000ull;

static double round_ns_per_event(bool timeline)
{
    core_reset();
    core_timeline_enable(timeline);
    struct core_alloc a;
    uint64_t t = clock_ns();
    for (uint64_t i = 0; i < PAIRS; i++) {
        uint64_t key = 0x7f0000000000ull + (i & 1023) * 4096;
        alloc_req(CORE_DEVICE, key, 4096 + (i & 7) * 512, 0, "cudaMalloc", 0, now_fake += 1000);
        core_take(CORE_DEVICE, key, &a, now_fake += 1000);
    }
    return (double)(clock_ns() - t) / (2.0 * PAIRS);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    if (!core_init())
        return 1;
    double on[ROUNDS], off[ROUNDS];
    round_ns_per_event(true); /* warm the tables and the timeline's pages */
    for (int r = 0; r < ROUNDS; r++) {
        off[r] = round_ns_per_event(false);
        on[r] = round_ns_per_event(true);
    }
    qsort(on, ROUNDS, sizeof(double), cmp);
    qsort(off, ROUNDS, sizeof(double), cmp);
    printf("timeline: ns per allocation event (core, median of %d x %d pairs): without %.1f, with %.1f (+%.1f)\n",
           ROUNDS, PAIRS, off[ROUNDS / 2], on[ROUNDS / 2], on[ROUNDS / 2] - off[ROUNDS / 2]);
    /* Frees take the time for their bucket from the coarse clock (lib/base/platform.h): its cost too. */
    struct timespec ts;
    uint64_t t = clock_ns(), sink = 0;
    for (int i = 0; i < 10000000; i++) {
        clock_gettime(CLOCK_REALTIME_COARSE, &ts);
        sink += (uint64_t)ts.tv_nsec;
    }
    printf("timeline: coarse clock read per free: %.1f ns%s\n", (double)(clock_ns() - t) / 1e7,
           sink == 1 ? " " : "");
    return 0;
}
