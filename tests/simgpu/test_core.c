/* test_core.c: unit tests of the simulator's range allocator and SIMGPU_* parsing. */
#include <criterion/criterion.h>

#include "alloc.h"
#include "config.h"
#include "helpers.h"

/* ---------------------------------------------------------------------------------------- */
/* Range allocator                                                                          */

Test(simgpu_alloc, carves_and_coalesces)
{
    struct range_alloc ra;
    uint64_t a, b, c;

    cr_assert_eq(ra_init(&ra, 0x10000, 4096), 0);
    cr_assert_eq(ra_alloc(&ra, 1024, 512, &a), 0);
    cr_assert_eq(ra_alloc(&ra, 1024, 512, &b), 0);
    cr_assert_eq(ra_alloc(&ra, 2048, 512, &c), 0);
    cr_assert_eq(a, 0x10000);
    cr_assert_eq(b, 0x10400);
    cr_assert_eq(c, 0x10800);
    cr_assert_eq(ra.used, 4096);
    cr_assert_eq(ra_largest_hole(&ra), 0);
    cr_assert_neq(ra_alloc(&ra, 512, 512, &a), 0, "full");

    /* Freeing the middle, then its neighbours, must end in one hole again. */
    cr_assert_eq(ra_free(&ra, b, 1024), 0);
    cr_assert_eq(ra_largest_hole(&ra), 1024);
    cr_assert_eq(ra_free(&ra, a, 1024), 0);
    cr_assert_eq(ra_largest_hole(&ra), 2048);
    cr_assert_eq(ra_free(&ra, c, 2048), 0);
    cr_assert_eq(ra.nholes, 1);
    cr_assert_eq(ra_largest_hole(&ra), 4096);
    cr_assert_eq(ra.used, 0);
    ra_fini(&ra);
}

Test(simgpu_alloc, best_fit_prefers_the_smallest_hole)
{
    struct range_alloc ra;
    uint64_t p[5], got;

    cr_assert_eq(ra_init(&ra, 0, 10 * 1024), 0);
    cr_assert_eq(ra_alloc(&ra, 3072, 1, &p[0]), 0); /* [0,3K) */
    cr_assert_eq(ra_alloc(&ra, 1024, 1, &p[1]), 0); /* [3K,4K) */
    cr_assert_eq(ra_alloc(&ra, 1024, 1, &p[2]), 0); /* [4K,5K) */
    cr_assert_eq(ra_alloc(&ra, 1024, 1, &p[3]), 0); /* [5K,6K) */
    cr_assert_eq(ra_free(&ra, p[0], 3072), 0);      /* hole of 3K at 0 */
    cr_assert_eq(ra_free(&ra, p[2], 1024), 0);      /* hole of 1K at 4K; 4K tail at 6K */
    cr_assert_eq(ra_alloc(&ra, 1024, 1, &got), 0);
    cr_assert_eq(got, 4096, "the 1K hole fits exactly");
    cr_assert_eq(ra_alloc(&ra, 2048, 1, &got), 0);
    cr_assert_eq(got, 0, "3K hole beats the 4K tail");
    ra_fini(&ra);
}

Test(simgpu_alloc, alignment_and_fixed_address)
{
    struct range_alloc ra;
    uint64_t a;

    cr_assert_eq(ra_init(&ra, 0x1000, 0x100000), 0);
    cr_assert_eq(ra_alloc(&ra, 0x100, 1, &a), 0);
    cr_assert_eq(ra_alloc(&ra, 0x1000, 0x10000, &a), 0);
    cr_assert_eq(a % 0x10000, 0);
    cr_assert_eq(ra_alloc_at(&ra, 0x40000, 0x2000), 0);
    cr_assert_neq(ra_alloc_at(&ra, 0x41000, 0x1000), 0, "already taken");
    cr_assert_neq(ra_alloc_at(&ra, 0x200000, 0x1000), 0, "outside the span");
    cr_assert_eq(ra_free(&ra, 0x40000, 0x2000), 0);
    ra_fini(&ra);
}

Test(simgpu_alloc, rejects_bogus_frees)
{
    struct range_alloc ra;
    uint64_t a;

    cr_assert_eq(ra_init(&ra, 0x1000, 0x4000), 0);
    cr_assert_eq(ra_alloc(&ra, 0x1000, 1, &a), 0);
    cr_assert_eq(ra_free(&ra, a, 0x1000), 0);
    cr_assert_neq(ra_free(&ra, a, 0x1000), 0, "double free");
    cr_assert_neq(ra_free(&ra, 0x100000, 0x1000), 0, "outside");
    cr_assert_eq(ra.used, 0);
    ra_fini(&ra);
}

Test(simgpu_alloc, many_holes)
{
    struct range_alloc ra;
    uint64_t addr[1000];

    cr_assert_eq(ra_init(&ra, 0, 1000 * 512), 0);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(ra_alloc(&ra, 512, 512, &addr[i]), 0);
    for (int i = 0; i < 1000; i += 2)
        cr_assert_eq(ra_free(&ra, addr[i], 512), 0);
    cr_assert_eq(ra.nholes, 500);
    cr_assert_eq(ra_largest_hole(&ra), 512);
    for (int i = 1; i < 1000; i += 2)
        cr_assert_eq(ra_free(&ra, addr[i], 512), 0);
    cr_assert_eq(ra.nholes, 1);
    ra_fini(&ra);
}

/* ---------------------------------------------------------------------------------------- */
/* Sizes                                                                                    */

Test(simgpu_config, sizes)
{
    static const struct {
        const char *text;
        uint64_t value;
    } ok[] = {
        { "0", 0 },
        { "4096", 4096 },
        { "512B", 512 },
        { "16GiB", 16 * GiB },
        { "16G", 16 * GiB },
        { "16g", 16 * GiB },
        { "16 GiB", 16 * GiB },
        { "16000MB", 16000000000ULL },
        { "16GB", 16000000000ULL },
        { "300MiB", 300 * MiB },
        { "300M", 300 * MiB },
        { "1.5GiB", 3 * GiB / 2 },
        { "2K", 2048 },
        { "2KB", 2000 },
        { "1T", 1ULL << 40 },
        { "1TB", 1000000000000ULL },
        { " 8 MiB ", 8 * MiB },
    };
    static const char *bad[] = {
        "", "GiB", "16 XB", "-1", "1.2.3", "16GiBs", "0x10", "99999999999999999999", "20000000000T"
    };
    uint64_t v;

    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cr_assert_eq(simgpu_parse_size(ok[i].text, &v), 0, "'%s' should parse", ok[i].text);
        cr_assert_eq(v, ok[i].value, "'%s' gave %llu", ok[i].text, (unsigned long long)v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_neq(simgpu_parse_size(bad[i], &v), 0, "'%s' should not parse", bad[i]);
}

Test(simgpu_config, per_device_sizes)
{
    uint64_t out[SIMGPU_MAX_DEVICES];
    int top;

    for (int i = 0; i < SIMGPU_MAX_DEVICES; i++)
        out[i] = 7;
    cr_assert_eq(simgpu_parse_device_sizes("0:16GiB,1:8GiB", out, &top), 0);
    cr_assert_eq(out[0], 16 * GiB);
    cr_assert_eq(out[1], 8 * GiB);
    cr_assert_eq(out[2], 7, "untouched devices keep the default");
    cr_assert_eq(top, 1);

    cr_assert_eq(simgpu_parse_device_sizes("4GiB, 3:1GiB", out, &top), 0);
    cr_assert_eq(out[0], 4 * GiB);
    cr_assert_eq(out[3], 1 * GiB);
    cr_assert_eq(out[5], 4 * GiB);
    cr_assert_eq(top, 3);

    cr_assert_eq(simgpu_parse_device_sizes("24GB", out, &top), 0);
    cr_assert_eq(top, -1);

    static const char *bad[] = { "0:", ":1G", "x:1G", "64:1G", "1G,,2G", "0:1G,", "0:1:1G" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out[0] = 9;
        cr_assert_neq(simgpu_parse_device_sizes(bad[i], out, &top), 0, "'%s'", bad[i]);
        cr_assert_eq(out[0], 9, "a bad value changes nothing");
    }
}

/* ---------------------------------------------------------------------------------------- */
/* The whole environment                                                                    */

static int only_alloc(const char *name)
{
    return strcmp(name, "cuMemAlloc_v2") == 0 || strcmp(name, "cuMemCreate") == 0;
}

Test(simgpu_config, defaults)
{
    struct simgpu_config cfg;
    sim_env_clear();
    simgpu_config_load(&cfg, NULL);
    cr_assert_eq(cfg.devices, 1);
    cr_assert_eq(cfg.memory[0], 16 * GiB);
    cr_assert_eq(cfg.context_bytes[0], 300 * MiB);
    cr_assert_eq(cfg.other_bytes[0], 0);
    cr_assert_str_eq(cfg.name, "vramwatch simulated GPU");
    cr_assert_eq(cfg.nfail, 0);
}

Test(simgpu_config, environment)
{
    struct simgpu_config cfg;
    sim_env("0:16GiB,1:8GiB", "1GiB", "1:2GiB");
    setenv("SIMGPU_NAME", "NVIDIA H200", 1);
    setenv("SIMGPU_FAIL", "cuMemAlloc_v2:3,cuMemCreate:1:999", 1);
    simgpu_config_load(&cfg, only_alloc);
    cr_assert_eq(cfg.devices, 2, "the device count follows the per-device list");
    cr_assert_eq(cfg.memory[0], 16 * GiB);
    cr_assert_eq(cfg.memory[1], 8 * GiB);
    cr_assert_eq(cfg.context_bytes[1], 1 * GiB);
    cr_assert_eq(cfg.other_bytes[0], 0);
    cr_assert_eq(cfg.other_bytes[1], 2 * GiB);
    cr_assert_str_eq(cfg.name, "NVIDIA H200");
    cr_assert_eq(cfg.nfail, 2);
    cr_assert_str_eq(cfg.fail[0].func, "cuMemAlloc_v2");
    cr_assert_eq(cfg.fail[0].nth, 3);
    cr_assert_eq(cfg.fail[0].err, 2, "out of memory by default");
    cr_assert_eq(cfg.fail[1].err, 999);
}

Test(simgpu_config, explicit_device_count_wins)
{
    struct simgpu_config cfg;
    sim_env("0:4GiB,2:8GiB", NULL, NULL);
    setenv("SIMGPU_DEVICES", "2", 1);
    struct stderr_capture cap = stderr_begin();
    simgpu_config_load(&cfg, NULL);
    char *err = stderr_end(cap);
    cr_assert_eq(cfg.devices, 2);
    cr_assert_eq(cfg.memory[0], 4 * GiB);
    cr_assert_eq(cfg.memory[1], 16 * GiB);
    cr_assert(strstr(err, "simgpu: SIMGPU_MEMORY names device 2") != NULL, "got: %s", err);
    free(err);
}

Test(simgpu_config, bad_values_warn_and_fall_back)
{
    struct simgpu_config cfg;
    sim_env("lots", "-3", "1Q");
    setenv("SIMGPU_DEVICES", "many", 1);
    setenv("SIMGPU_FAIL", "cuMemAlloc_v2,cuNothing:1,cuMemAlloc_v2:0,cuMemCreate:2:x,cuMemCreate:4",
           1);
    struct stderr_capture cap = stderr_begin();
    simgpu_config_load(&cfg, only_alloc);
    char *err = stderr_end(cap);

    cr_assert_eq(cfg.devices, 1);
    cr_assert_eq(cfg.memory[0], 16 * GiB);
    cr_assert_eq(cfg.context_bytes[0], 300 * MiB);
    cr_assert_eq(cfg.other_bytes[0], 0);
    cr_assert_eq(cfg.nfail, 1, "only the one good rule is kept");
    cr_assert_eq(cfg.fail[0].nth, 4);
    cr_assert(strstr(err, "simgpu: SIMGPU_DEVICES='many'") != NULL, "got: %s", err);
    cr_assert(strstr(err, "simgpu: SIMGPU_MEMORY='lots'") != NULL, "got: %s", err);
    cr_assert(strstr(err, "simgpu: SIMGPU_CONTEXT_BYTES='-3'") != NULL, "got: %s", err);
    cr_assert(strstr(err, "simgpu: SIMGPU_OTHER_BYTES='1Q'") != NULL, "got: %s", err);
    cr_assert(strstr(err, "cuNothing is not a function") != NULL, "got: %s", err);
    cr_assert(strstr(err, "'cuMemCreate:2:x' ignored") != NULL, "got: %s", err);
    /* One line per problem, each starting with "simgpu: ". */
    int lines = 0;
    for (const char *p = err; (p = strstr(p, "simgpu: ")) != NULL; p++)
        lines++;
    cr_assert_eq(lines, 8, "got: %s", err);
    free(err);
}

Test(simgpu_config, capacity_rounds_down_to_512)
{
    struct simgpu_config cfg;
    sim_env("1000000", NULL, NULL);
    simgpu_config_load(&cfg, NULL);
    cr_assert_eq(cfg.memory[0], 1000000 / 512 * 512);
}

Test(simgpu_config, visible_devices_remap_ordinals)
{
    struct simgpu_config cfg;
    sim_env("0:4GiB,1:8GiB,2:2GiB,3:1GiB", NULL, NULL);
    setenv("CUDA_VISIBLE_DEVICES", "2, 0", 1);
    simgpu_config_load(&cfg, NULL);
    simgpu_config_visible(&cfg);
    unsetenv("CUDA_VISIBLE_DEVICES");
    cr_assert_eq(cfg.devices, 2);
    cr_assert_eq(cfg.physical[0], 2);
    cr_assert_eq(cfg.physical[1], 0);
    cr_assert_eq(cfg.memory[0], 2 * GiB, "the capacity follows the physical device");
    cr_assert_eq(cfg.memory[1], 4 * GiB);
}

Test(simgpu_config, visible_devices_stop_at_the_first_bad_entry)
{
    static const struct {
        const char *value;
        int devices, first;
    } cases[] = {
        { "1,7,0", 1, 1 }, /* out of range: the list ends there */
        { "1,1,0", 1, 1 }, /* a repeat ends it too */
        { "x,0", 0, -1 },  /* nothing usable: no devices */
        { "", 0, -1 },     /* empty hides every device */
        { "3,2,1,0", 4, 3 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct simgpu_config cfg;
        sim_env("0:4GiB,3:1GiB", NULL, NULL);
        setenv("CUDA_VISIBLE_DEVICES", cases[i].value, 1);
        simgpu_config_load(&cfg, NULL);
        simgpu_config_visible(&cfg);
        unsetenv("CUDA_VISIBLE_DEVICES");
        cr_assert_eq(cfg.devices, cases[i].devices, "CUDA_VISIBLE_DEVICES='%s'", cases[i].value);
        if (cases[i].first >= 0)
            cr_assert_eq(cfg.physical[0], cases[i].first, "CUDA_VISIBLE_DEVICES='%s'",
                         cases[i].value);
    }
}

Test(simgpu_config, visible_devices_by_uuid)
{
    struct simgpu_config cfg;
    char u1[48];
    simgpu_uuid_string(1, u1);
    cr_assert_str_eq(u1, "GPU-7672616d-7761-7463-682d-4750552d3001");
    sim_env("0:4GiB,1:8GiB", NULL, NULL);
    setenv("CUDA_VISIBLE_DEVICES", "GPU-7672616d-7761-7463-682d-4750552d3001,0", 1);
    simgpu_config_load(&cfg, NULL);
    simgpu_config_visible(&cfg);
    cr_assert_eq(cfg.devices, 2);
    cr_assert_eq(cfg.physical[0], 1);
    cr_assert_eq(cfg.memory[0], 8 * GiB);
    /* A prefix both UUIDs share names neither. */
    setenv("CUDA_VISIBLE_DEVICES", "GPU-7672616d", 1);
    simgpu_config_load(&cfg, NULL);
    simgpu_config_visible(&cfg);
    unsetenv("CUDA_VISIBLE_DEVICES");
    cr_assert_eq(cfg.devices, 0);
}
