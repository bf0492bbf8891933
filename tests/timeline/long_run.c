/* Writes the report of a three-day training run through the library's own core and report
 * writer, with made-up times: 72 one-hour epochs of 2-second steps (about 1.3 million events),
 * a marker per epoch, and 16 MiB kept for good per epoch. What `vramwatch timeline` must draw
 * in under a second, and what the leak finding must see.
 * usage: long_run DIR   (the report is DIR/vramwatch-HOST-PID.json) */
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "core_calls.h"
#include "options.h"
#include "report.h"
#include "platform.h"

#define SEC 1000000000ull
#define MIB (1ull << 20)
#define GIB (1ull << 30)

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: long_run DIR\n");
        return 2;
    }
    snprintf(options_current.dir, sizeof(options_current.dir), "%s", argv[1]);
    options_current.stack_depth = 4;
    if (!core_init())
        return 1;
    /* Ending now, so the report (stamped with the real time) closes the run. */
    const uint64_t t0 = platform_now_ns() - 73ull * 3600 * SEC;
    const uint64_t model_frames[] = { 0x401000, 0x402000 }, act_frames[] = { 0x401000, 0x403000 },
                   leak_frames[] = { 0x401000, 0x404000 };
    uint32_t model_site = core_callsite(model_frames, 2), act_site = core_callsite(act_frames, 2),
             leak_site = core_callsite(leak_frames, 2);
    uint64_t t = t0, next_key = 0x7f0000000000ull;
    core_mark("setup", t);
    for (int i = 0; i < 8; i++)
        alloc_req(CORE_DEVICE, next_key += GIB, 384 * MIB, 0, "cudaMalloc", model_site,
                  t += SEC / 10);
    char label[32];
    struct core_alloc a;
    for (int epoch = 0; epoch < 72; epoch++) {
        snprintf(label, sizeof(label), "epoch %d", epoch);
        core_mark(label, t);
        for (int step = 0; step < 1800; step++) {
            uint64_t keys[6];
            for (int k = 0; k < 6; k++) {
                keys[k] = next_key += GIB;
                alloc_req(CORE_DEVICE, keys[k], (256 + 128 * (uint64_t)k) * MIB, 0, "cudaMalloc",
                          act_site, t += SEC / 10);
            }
            for (int k = 5; k >= 0; k--)
                core_take(CORE_DEVICE, keys[k], &a, t += SEC / 10);
            t += 2 * SEC - 12 * (SEC / 10);
        }
        alloc_req(CORE_DEVICE, next_key += GIB, 16 * MIB, 0, "cudaMalloc", leak_site, t);
    }
    static struct report_devinfo info[VW_MAX_DEVICES + 1];
    for (int i = 0; i <= VW_MAX_DEVICES; i++)
        info[i] = (struct report_devinfo){
            .total = -1, .limit = -1, .free = -1, .pool_extra = 0, .pool_reserved_high = -1
        };
    snprintf(info[0].name, sizeof(info[0].name), "a three-day run");
    info[0].total = (int64_t)(24 * GIB);
    info[0].free =
            (int64_t)(24 * GIB) - (int64_t)(8 * 384 * MIB + 72 * 16 * MIB) - (int64_t)(500 * MIB);
    core_measure(0, (int64_t)(24 * GIB) - info[0].free, 0, t);
    return report_write("exit", info) == 0 ? 0 : 1;
}
