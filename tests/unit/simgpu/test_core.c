/* test_core.c: unit tests of the simulator's range allocator and SIMGPU_* parsing. */
#include <criterion/criterion.h>
#include <strings.h>

#include "alloc.h"
#include "simconfig.h"
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

/* ---------------------------------------------------------------------------------------- */
/* Named cards (cards.def, SIMGPU_CARD)                                                     */

static void card_env(const char *card, const char *memory)
{
    sim_env(memory, NULL, NULL);
    if (card)
        setenv("SIMGPU_CARD", card, 1);
}

Test(simgpu_cards, table_is_consistent)
{
    cr_assert_geq(simgpu_ncards, 10);
    for (int i = 0; i < simgpu_ncards; i++) {
        const struct simgpu_card *c = &simgpu_cards[i];
        cr_assert(c->key && *c->key && c->name && *c->name, "row %d", i);
        cr_assert_eq(c->bytes % 512, 0, "%s: whole 512-byte units", c->key);
        cr_assert(c->bytes >= 4 * GiB && c->bytes <= SIMGPU_MAX_MEMORY, "%s", c->key);
        cr_assert_eq(c->bf16, c->major >= 8, "%s: bfloat16 from compute capability 8.0", c->key);
        cr_assert(c->sms > 0 && c->mem_clock_khz > 0 && c->bus_bits > 0 && c->l2_bytes > 0 &&
                          c->clock_khz > 0,
                  "%s", c->key);
        cr_assert(c->smem_optin <= c->smem_per_sm && c->threads_per_sm >= 1024 &&
                          c->blocks_per_sm >= 16,
                  "%s", c->key);
        for (int j = 0; j < i; j++)
            cr_assert(strcasecmp(c->key, simgpu_cards[j].key) != 0, "%s twice", c->key);
    }
}

/* The first seven fields, read the way the CLI reads the table. */
static const struct {
    const char *key;
    unsigned long long bytes;
} seven[] = {
#define CARD(key, name, bytes, major, minor, sms, bf16, ...) { key, bytes },
#include "cards.def"
#undef CARD
};

Test(simgpu_cards, first_seven_fields_stand_alone)
{
    cr_assert_eq((int)(sizeof seven / sizeof seven[0]), simgpu_ncards);
    for (int i = 0; i < simgpu_ncards; i++) {
        cr_assert_str_eq(seven[i].key, simgpu_cards[i].key);
        cr_assert_eq(seven[i].bytes, simgpu_cards[i].bytes);
    }
}

Test(simgpu_cards, lookup_ignores_case)
{
    const struct simgpu_card *c = simgpu_card_find("v100");
    cr_assert_not_null(c);
    cr_assert_str_eq(c->name, "Tesla V100-SXM2-16GB");
    cr_assert_eq(c->bytes, 16945512448ULL);
    cr_assert_eq(c->major, 7);
    cr_assert_eq(c->minor, 0);
    cr_assert_eq(c->sms, 80);
    cr_assert_eq(c->bf16, 0);
    cr_assert_str_eq(simgpu_card_find("a100-80gb")->name, "NVIDIA A100-SXM4-80GB");
    cr_assert_eq(simgpu_card_find("A100")->bytes, simgpu_card_find("A100-80GB")->bytes,
                 "A100 is the 80 GB part");
    cr_assert_str_eq(simgpu_card_find("Rtx2080ti")->key, "RTX2080Ti");
    cr_assert_null(simgpu_card_find("GTX480"));
    cr_assert_null(simgpu_card_find(""));
    cr_assert_null(simgpu_card_find("H10"), "no prefix matching");
}

Test(simgpu_cards, default_card_is_todays_device)
{
    const struct simgpu_card *d = &simgpu_default_card;
    cr_assert_str_eq(d->name, "vramwatch simulated GPU");
    cr_assert_eq(d->bytes, 16 * GiB);
    cr_assert_eq(d->major, 9);
    cr_assert_eq(d->minor, 0);
    cr_assert_eq(d->sms, 132);
    cr_assert_eq(d->l2_bytes, 50331648);
    cr_assert_eq(d->mem_clock_khz, 2619000);
    cr_assert_eq(d->bus_bits, 5120);
}

Test(simgpu_cards, no_card_keeps_the_default)
{
    struct simgpu_config cfg;
    card_env(NULL, NULL);
    simgpu_config_load(&cfg, NULL);
    cr_assert_eq(cfg.card[0], &simgpu_default_card);
    cr_assert_eq(cfg.memory[0], 16 * GiB);
    cr_assert_str_eq(simgpu_device_name(&cfg, 0), "vramwatch simulated GPU");
}

Test(simgpu_cards, one_card_for_every_device)
{
    struct simgpu_config cfg;
    card_env("t4", NULL);
    setenv("SIMGPU_DEVICES", "2", 1);
    simgpu_config_load(&cfg, NULL);
    cr_assert_eq(cfg.devices, 2);
    for (int i = 0; i < 2; i++) {
        cr_assert_str_eq(cfg.card[i]->key, "T4");
        cr_assert_eq(cfg.memory[i], 15843721216ULL, "the card's capacity");
        cr_assert_str_eq(simgpu_device_name(&cfg, i), "Tesla T4");
    }
    cr_assert_str_eq(cfg.name, "vramwatch simulated GPU", "SIMGPU_NAME itself is not set");
}

Test(simgpu_cards, per_device_cards)
{
    struct simgpu_config cfg;
    card_env("0:V100, 1:A100-40GB", NULL);
    simgpu_config_load(&cfg, NULL);
    cr_assert_eq(cfg.devices, 2, "the device count follows the per-device list");
    cr_assert_str_eq(simgpu_device_name(&cfg, 0), "Tesla V100-SXM2-16GB");
    cr_assert_str_eq(simgpu_device_name(&cfg, 1), "NVIDIA A100-SXM4-40GB");
    cr_assert_eq(cfg.memory[1], 42505273344ULL);

    /* An entry without an index sets every device; indexed entries win. */
    card_env("H100,1:T4", NULL);
    setenv("SIMGPU_DEVICES", "3", 1);
    simgpu_config_load(&cfg, NULL);
    cr_assert_str_eq(cfg.card[0]->key, "H100");
    cr_assert_str_eq(cfg.card[1]->key, "T4");
    cr_assert_str_eq(cfg.card[2]->key, "H100");
}

Test(simgpu_cards, memory_overrides_the_card)
{
    struct simgpu_config cfg;
    card_env("H100", "8GiB");
    simgpu_config_load(&cfg, NULL);
    cr_assert_eq(cfg.memory[0], 8 * GiB);
    cr_assert_str_eq(simgpu_device_name(&cfg, 0), "NVIDIA H100 80GB HBM3");

    card_env("0:V100,1:T4", "1:4GiB");
    simgpu_config_load(&cfg, NULL);
    cr_assert_eq(cfg.devices, 2);
    cr_assert_eq(cfg.memory[0], 16945512448ULL, "not named in SIMGPU_MEMORY: the card's");
    cr_assert_eq(cfg.memory[1], 4 * GiB);
}

Test(simgpu_cards, name_overrides_the_card)
{
    struct simgpu_config cfg;
    card_env("A10", NULL);
    setenv("SIMGPU_NAME", "my card", 1);
    simgpu_config_load(&cfg, NULL);
    cr_assert_str_eq(simgpu_device_name(&cfg, 0), "my card");
    cr_assert_eq(cfg.card[0]->major, 8, "the rest is still the card's");
}

Test(simgpu_cards, unknown_card_warns_once_and_keeps_the_default)
{
    struct simgpu_config cfg;
    card_env("0:H100,1:GTX480", NULL);
    struct stderr_capture cap = stderr_begin();
    simgpu_config_load(&cfg, NULL);
    char *err = stderr_end(cap);
    cr_assert(strncmp(err, "simgpu: SIMGPU_CARD='0:H100,1:GTX480'", 37) == 0, "got: %s", err);
    cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "one line: %s", err);
    for (int i = 0; i < simgpu_ncards; i++)
        cr_assert(strstr(err, simgpu_cards[i].key) != NULL, "lists %s: %s", simgpu_cards[i].key,
                  err);
    free(err);
    cr_assert_eq(cfg.devices, 1, "the whole value is ignored");
    cr_assert_eq(cfg.card[0], &simgpu_default_card);
    cr_assert_eq(cfg.memory[0], 16 * GiB);

    /* Malformed entries are refused the same way. */
    static const char *bad[] = { "", "0:", ":T4", "x:T4", "64:T4", "T4,,H100" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        card_env(bad[i], NULL);
        cap = stderr_begin();
        simgpu_config_load(&cfg, NULL);
        err = stderr_end(cap);
        cr_assert(strstr(err, "simgpu: SIMGPU_CARD=") != NULL, "'%s' got: %s", bad[i], err);
        cr_assert_eq(cfg.card[0], &simgpu_default_card, "'%s'", bad[i]);
        free(err);
    }
}

Test(simgpu_cards, card_beyond_the_device_count)
{
    struct simgpu_config cfg;
    card_env("0:T4,2:V100", NULL);
    setenv("SIMGPU_DEVICES", "2", 1);
    struct stderr_capture cap = stderr_begin();
    simgpu_config_load(&cfg, NULL);
    char *err = stderr_end(cap);
    cr_assert_eq(cfg.devices, 2);
    cr_assert_str_eq(cfg.card[0]->key, "T4");
    cr_assert_eq(cfg.card[1], &simgpu_default_card);
    cr_assert(strstr(err, "simgpu: SIMGPU_CARD names device 2") != NULL, "got: %s", err);
    free(err);
}

Test(simgpu_cards, cards_follow_visible_devices)
{
    struct simgpu_config cfg;
    card_env("0:V100,1:T4", NULL);
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    simgpu_config_load(&cfg, NULL);
    simgpu_config_visible(&cfg);
    unsetenv("CUDA_VISIBLE_DEVICES");
    cr_assert_eq(cfg.devices, 1);
    cr_assert_str_eq(simgpu_device_name(&cfg, 0), "Tesla T4");
    cr_assert_eq(cfg.memory[0], 15843721216ULL);
}
