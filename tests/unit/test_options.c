/* Unit tests of option parsing: sizes, per-device limits, bad values keep the defaults. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "options.h"

static uint64_t size_of(const char *s)
{
    uint64_t v = 0;
    cr_assert(options_parse_size(s, &v), "should parse: %s", s);
    return v;
}

Test(options, sizes_in_every_spelling)
{
    cr_assert_eq(size_of("17179869184"), 17179869184ull);
    cr_assert_eq(size_of("16GiB"), 16ull << 30);
    cr_assert_eq(size_of("16G"), 16ull << 30);
    cr_assert_eq(size_of("16g"), 16ull << 30);
    cr_assert_eq(size_of("16000MB"), 16000ull * 1000 * 1000);
    cr_assert_eq(size_of("512KiB"), 512ull << 10);
    cr_assert_eq(size_of("2TB"), 2000000000000ull);
    cr_assert_eq(size_of("1.5GiB"), 3ull << 29);
    cr_assert_eq(size_of(" 8 MiB "), 8ull << 20);
}

Test(options, bad_sizes_are_refused)
{
    uint64_t v;
    const char *bad[] = {
        "", "GiB", "-1", "16XB", "16GiBs", "1e9", "99999999999999999999", "20000000TiB", "16 G B"
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert(!options_parse_size(bad[i], &v), "should refuse: '%s'", bad[i]);
}

Test(options, limits_per_device)
{
    uint64_t lim[VW_MAX_DEVICES];
    double share[VW_MAX_DEVICES];
    cr_assert(options_parse_limit("0:16GiB,1:8GiB", lim, share));
    cr_assert_eq(lim[0], 16ull << 30);
    cr_assert_eq(lim[1], 8ull << 30);
    cr_assert_eq(lim[2], 0);
    cr_assert(options_parse_limit("12G", lim, share));
    cr_assert_eq(lim[5], 12ull << 30);
    cr_assert_eq(share[5], 0);
    cr_assert(!options_parse_limit("0:16GiB,,1:8GiB", lim, share));
    cr_assert(!options_parse_limit("x:16GiB", lim, share));
    cr_assert(!options_parse_limit("64:1G", lim, share));
    cr_assert(!options_parse_limit("0", lim, share), "zero capacity makes no card");
}

Test(options, limit_as_share_of_the_card)
{
    uint64_t lim[VW_MAX_DEVICES];
    double share[VW_MAX_DEVICES];
    cr_assert(options_parse_limit("90%", lim, share));
    cr_assert_eq(lim[3], 0, "a share has no size until the card is known");
    cr_assert_float_eq(share[3], 0.9, 1e-12);
    cr_assert(options_parse_limit("0:12.5 %,1:8GiB", lim, share));
    cr_assert_float_eq(share[0], 0.125, 1e-12);
    cr_assert_eq(lim[1], 8ull << 30);
    cr_assert_eq(share[1], 0);
    const char *bad[] = { "0%", "101%", "%", "90%%", "-5%", "90% x", "1.5GiB%" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert(!options_parse_limit(bad[i], lim, share), "should refuse: '%s'", bad[i]);
}

Test(options, environment_with_bad_values_keeps_defaults)
{
    setenv("VRAMWATCH_STACK_DEPTH", "lots", 1);
    setenv("VRAMWATCH_LOG", "quiet", 1);
    setenv("VRAMWATCH_DISABLE", "maybe", 1);
    setenv("VRAMWATCH_DIR", "/tmp/vw-test-dir", 1);
    options_load();
    cr_assert_eq(vw_opt.stack_depth, 32);
    cr_assert_eq(vw_opt.disable, false);
    cr_assert_eq(vw_opt.log_level, VW_LOG_QUIET);
    cr_assert_str_eq(vw_opt.dir, "/tmp/vw-test-dir");
    setenv("VRAMWATCH_STACK_DEPTH", "0", 1);
    setenv("VRAMWATCH_DISABLE", "yes", 1);
    options_load();
    cr_assert_eq(vw_opt.stack_depth, 0);
    cr_assert_eq(vw_opt.disable, true);
}
