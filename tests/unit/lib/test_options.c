/* Unit tests of option parsing: the size, percentage and limit grammar (sizes.c) that the library
 * and the command line share, and the environment read into options_current. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "options.h"
#include "sizes.h"
#include "trace.h"

static uint64_t size_of(const char *s)
{
    uint64_t v = 0;
    const char *why = NULL;
    cr_assert(sizes_parse(s, &v, &why), "should parse: '%s' (%s)", s, why ? why : "");
    return v;
}

static const char *refusal(const char *s)
{
    uint64_t v = 12345;
    const char *why = NULL;
    cr_assert(!sizes_parse(s, &v, &why), "should refuse: '%s' (got %llu)", s,
              (unsigned long long)v);
    cr_assert(why && *why, "'%s': refused without a reason", s);
    cr_assert_eq(v, 12345, "'%s': the output was written on a refusal", s);
    return why;
}

Test(sizes, every_spelling)
{
    cr_assert_eq(size_of("17179869184"), 17179869184ull);
    cr_assert_eq(size_of("512B"), 512);
    cr_assert_eq(size_of("512b"), 512);
    cr_assert_eq(size_of("16GiB"), 16ull << 30);
    cr_assert_eq(size_of("16G"), 16ull << 30);
    cr_assert_eq(size_of("16g"), 16ull << 30);
    cr_assert_eq(size_of("16gib"), 16ull << 30);
    cr_assert_eq(size_of("8G"), 8ull << 30);
    cr_assert_eq(size_of("512M"), 512ull << 20);
    cr_assert_eq(size_of("512K"), 512ull << 10);
    cr_assert_eq(size_of("2T"), 2ull << 40);
    cr_assert_eq(size_of("16000MB"), 16000ull * 1000 * 1000);
    cr_assert_eq(size_of("512KiB"), 512ull << 10);
    cr_assert_eq(size_of("3MiB"), 3ull << 20);
    cr_assert_eq(size_of("1TiB"), 1ull << 40);
    cr_assert_eq(size_of("4KB"), 4000);
    cr_assert_eq(size_of("2GB"), 2000000000ull);
    cr_assert_eq(size_of("2TB"), 2000000000000ull);
    cr_assert_eq(size_of(" 8 MiB "), 8ull << 20);
    cr_assert_eq(size_of("\t8G"), 8ull << 30);
    cr_assert_eq(size_of("0"), 0, "0 is a size; limits refuse it, not the grammar");
    cr_assert_eq(size_of("007G"), 7ull << 30);
}

Test(sizes, decimals_round_down_to_whole_bytes)
{
    cr_assert_eq(size_of("1.5GiB"), 3ull << 29);
    /* 14.4 x 2^30 = 15461882265.6 */
    cr_assert_eq(size_of("14.4GiB"), 15461882265ull);
    cr_assert_eq(size_of("14.4G"), 15461882265ull);
    cr_assert_eq(size_of("1.5KB"), 1500);
    cr_assert_eq(size_of("0.5T"), 1ull << 39);
    cr_assert_eq(size_of("2.25 MiB"), (9ull << 20) / 4);
    cr_assert_eq(size_of("1.000000001GB"), 1000000001ull);
    cr_assert_eq(size_of("1.0000000009GB"), 1000000000ull, "past nine places, digits are dropped");
    cr_assert_eq(size_of("16.0"), 16, "a point with only zeros is whole bytes");
    cr_assert_eq(size_of("0.1K"), 102);
}

Test(sizes, overflow_is_refused)
{
    cr_assert_eq(size_of("9223372036854775807"), (uint64_t)INT64_MAX);
    cr_assert_eq(size_of("8388607TiB"), 8388607ull << 40);
    cr_assert_str_eq(refusal("9223372036854775808"), "too large (at most 8 EiB)");
    cr_assert_str_eq(refusal("99999999999999999999"), "too large (at most 8 EiB)");
    cr_assert_str_eq(refusal("18446744073709551616"), "too large (at most 8 EiB)");
    cr_assert_str_eq(refusal("8388608TiB"), "too large (at most 8 EiB)");
    cr_assert_str_eq(refusal("20000000TiB"), "too large (at most 8 EiB)");
    cr_assert_str_eq(refusal("9223372036.854775808GB"), "too large (at most 8 EiB)");
}

Test(sizes, junk_is_refused_with_a_reason)
{
    const char *bad[] = { "",    "   ",    "GiB",   "-1",     "+8G",    "16XB", "16GiBs", "16GIBB",
                          "1e9", "16 G B", "0x10",  "1,5GiB", "8EiB",   "8P",   "16Gi",   "16iB",
                          "1.5", "1.GiB",  ".5GiB", "1..5G",  "1.5.2G", "8G8",  "8%",     "G8" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        refusal(bad[i]);
    cr_assert(strstr(refusal("14.4XB"), "unknown unit"));
    cr_assert(strstr(refusal("1.5"), "fraction of a byte"));
    cr_assert(strstr(refusal("1.GiB"), "after the decimal point"));
    cr_assert(strstr(refusal("GiB"), "expected a number"));
    uint64_t v;
    cr_assert(!sizes_parse(NULL, &v, NULL), "NULL, and no reason asked for");
    cr_assert(sizes_parse_n("8GiB,1:4G", 4, &v, NULL) && v == 8ull << 30, "exactly n characters");
}

Test(sizes, percentages)
{
    double p = -1;
    cr_assert(sizes_parse_percent("5", &p, NULL) && p == 5);
    cr_assert(sizes_parse_percent("5%", &p, NULL) && p == 5);
    cr_assert(sizes_parse_percent("12.5 %", &p, NULL) && p == 12.5);
    cr_assert(sizes_parse_percent(" 0 ", &p, NULL) && p == 0);
    cr_assert(sizes_parse_percent("100%", &p, NULL) && p == 100);
    const char *bad[] = { "",
                          "%",
                          "101",
                          "100.01%",
                          "-5",
                          "5%%",
                          "5 % x",
                          "1e1",
                          "5.%",
                          ".5",
                          "99999999999999999999999",
                          "5GiB",
                          "0x5" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *why = NULL;
        cr_assert(!sizes_parse_percent(bad[i], &p, &why), "should refuse: '%s'", bad[i]);
        cr_assert(why && *why);
    }
}

Test(sizes, limits_per_device)
{
    struct sizes_limit l;
    const char *why = NULL;
    cr_assert(sizes_parse_limit("0:16GiB,1:8GiB", &l, &why));
    cr_assert(!l.every);
    cr_assert_eq(l.bytes[0], 16ull << 30);
    cr_assert_eq(l.bytes[1], 8ull << 30);
    cr_assert_eq(l.bytes[2], 0);
    cr_assert(sizes_parse_limit("12G", &l, NULL));
    cr_assert(l.every);
    cr_assert_eq(l.bytes[5], 12ull << 30);
    cr_assert_eq(l.bytes[63], 12ull << 30);
    cr_assert_eq(l.share[5], 0);
    cr_assert(sizes_parse_limit("1:14.4GiB, 0 : 4G", &l, NULL));
    cr_assert_eq(l.bytes[1], 15461882265ull);
    cr_assert_eq(l.bytes[0], 4ull << 30);
    cr_assert(sizes_parse_limit("63:1G", &l, NULL));
    cr_assert_eq(l.bytes[63], 1ull << 30);
    cr_assert(sizes_parse_limit("1MiB", &l, NULL), "1 MiB is the smallest limit");
    cr_assert_eq(l.bytes[0], 1ull << 20);
    cr_assert(sizes_parse_limit("1048576", &l, NULL));
}

Test(sizes, limits_refused_say_why)
{
    struct sizes_limit l;
    l.bytes[0] = 777;
    static const struct {
        const char *spec, *why;
    } cases[] = {
        { "100:8GiB", "a device is a number from 0 to 63" },
        { "64:1G", "a device is a number from 0 to 63" },
        { "99999999999:1G", "a device is a number from 0 to 63" },
        { "x:16GiB", "a device is a number from 0 to 63" },
        { "-1:16GiB", "a device is a number from 0 to 63" },
        { ":16GiB", "expected one size or share, or DEVICE:SIZE" },
        { "0:16GiB,,1:8GiB", "expected one size or share, or DEVICE:SIZE" },
        { "0:16GiB,", "expected one size or share, or DEVICE:SIZE" },
        { "0:8GiB,1", "expected one size or share, or DEVICE:SIZE" },
        { "0:8G,0:4G", "a device is named twice" },
        { "0", "a limit of 0 bytes" },
        { "0:0", "a limit of 0 bytes" },
        { "0%", "a share of the card" },
        { "101%", "a share of the card" },
        { "1.5GiB%", "a share of the card" },
        { "0:", "empty" },
        { "", "empty" },
        { "16XB", "unknown unit" },
        { "0:14.4XB", "unknown unit" },
        /* "16" is 16 bytes: most likely 16GiB with its unit left out */
        { "16", "16 bytes is below 1 MiB: did you mean 16GiB?" },
        { " 16 ", "16 bytes is below 1 MiB: did you mean 16GiB?" },
        { "0:16,1:16GiB", "16 bytes is below 1 MiB: did you mean 16GiB?" },
        { "0:16GiB,1:80", "80 bytes is below 1 MiB: did you mean 80GiB?" },
        { "1048575", "1048575 bytes is below 1 MiB: too small a limit for a card" },
        { "512B", "512 bytes is below 1 MiB: too small a limit for a card" },
        { "0.5KiB", "512 bytes is below 1 MiB: too small a limit for a card" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *why = NULL;
        cr_assert(!sizes_parse_limit(cases[i].spec, &l, &why), "should refuse: '%s'",
                  cases[i].spec);
        cr_assert(why && strstr(why, cases[i].why), "'%s': '%s', expected '%s'", cases[i].spec,
                  why ? why : "(none)", cases[i].why);
    }
    cr_assert_eq(l.bytes[0], 777, "nothing written on a refusal");
    cr_assert(!sizes_parse_limit(NULL, &l, NULL));
}

Test(sizes, limit_as_share_of_the_card)
{
    struct sizes_limit l;
    cr_assert(sizes_parse_limit("90%", &l, NULL));
    cr_assert_eq(l.bytes[3], 0, "a share has no size until the card is known");
    cr_assert_float_eq(l.share[3], 0.9, 1e-12);
    cr_assert(sizes_parse_limit("0:12.5 %,1:8GiB", &l, NULL));
    cr_assert_float_eq(l.share[0], 0.125, 1e-12);
    cr_assert_eq(l.bytes[1], 8ull << 30);
    cr_assert_eq(l.share[1], 0);
    cr_assert(sizes_parse_limit("0:8GiB,1:90%", &l, NULL));
    cr_assert_eq(l.bytes[0], 8ull << 30);
    cr_assert_float_eq(l.share[1], 0.9, 1e-12);
    const char *bad[] = { "0%",
                          "101%",
                          "%",
                          "90%%",
                          "-5%",
                          "90% x",
                          "1.5GiB%",
                          "90"
                          "%,1:1G" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert(!sizes_parse_limit(bad[i], &l, NULL), "should refuse: '%s'", bad[i]);
}

/* The shared table (limit-spellings.txt): what VRAMWATCH_LIMIT takes is what the command line's
 * --limit takes (tests/cli/grammar.py reads the same file). */
Test(sizes, limit_spellings_table)
{
    FILE *f = fopen(VW_SPELLINGS, "r");
    cr_assert(f, "cannot open %s", VW_SPELLINGS);
    char line[256];
    int cases = 0, wrong = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *tab = strchr(line, '\t');
        if (line[0] == '#' || !tab)
            continue;
        *tab = '\0';
        bool want = strcmp(line, "accept") == 0;
        struct sizes_limit l;
        bool got = sizes_parse_limit(tab + 1, &l, NULL);
        if (got != want) {
            cr_log_error("'%s': %s, expected %s", tab + 1, got ? "accepted" : "refused", line);
            wrong++;
        }
        cases++;
    }
    fclose(f);
    cr_assert_gt(cases, 40);
    cr_assert_eq(wrong, 0, "%d of %d spellings decided wrongly", wrong, cases);
}

Test(options, environment_with_bad_values_keeps_defaults)
{
    setenv("VRAMWATCH_STACK_DEPTH", "lots", 1);
    setenv("VRAMWATCH_LOG", "quiet", 1);
    setenv("VRAMWATCH_DISABLE", "maybe", 1);
    setenv("VRAMWATCH_DIR", "/tmp/vw-test-dir", 1);
    options_load();
    cr_assert_eq(options_current.stack_depth, 32);
    cr_assert_eq(options_current.disable, false);
    cr_assert_eq(log_level(), VW_LOG_QUIET);
    cr_assert_str_eq(options_current.dir, "/tmp/vw-test-dir");
    setenv("VRAMWATCH_STACK_DEPTH", "0", 1);
    setenv("VRAMWATCH_DISABLE", "yes", 1);
    options_load();
    cr_assert_eq(options_current.stack_depth, 0);
    cr_assert_eq(options_current.disable, true);
}

/* VRAMWATCH_LIMIT=16 is refused as the command line refuses --limit 16: one warning, no limit. */
Test(options, limit_below_one_mib_applies_none)
{
    setenv("VRAMWATCH_LOG", "quiet", 1);
    memset(options_current.limit, 0, sizeof options_current.limit);
    memset(options_current.limit_share, 0, sizeof options_current.limit_share);
    static const char *const small[] = { "16", "0:16,1:16GiB", "0:16GiB,1:512B" };
    for (size_t k = 0; k < sizeof(small) / sizeof(small[0]); k++) {
        setenv("VRAMWATCH_LIMIT", small[k], 1);
        options_load();
        for (int i = 0; i < SIZES_MAX_DEVICES; i++)
            cr_assert(options_current.limit[i] == 0 && options_current.limit_share[i] == 0,
                      "VRAMWATCH_LIMIT=%s: device %d limited to %llu", small[k], i,
                      (unsigned long long)options_current.limit[i]);
    }
    unsetenv("VRAMWATCH_LIMIT");
}

Test(options, limit_from_the_environment)
{
    setenv("VRAMWATCH_LOG", "quiet", 1);
    setenv("VRAMWATCH_LIMIT", "1:14.4GiB,0:90%", 1);
    options_load();
    cr_assert_eq(options_current.limit[1], 15461882265ull);
    cr_assert_eq(options_current.limit[0], 0);
    cr_assert_float_eq(options_current.limit_share[0], 0.9, 1e-12);
    cr_assert_eq(options_current.limit[2], 0);
    /* A device past the table is refused whole, as the command line refuses it: no limit. */
    memset(options_current.limit, 0, sizeof options_current.limit);
    memset(options_current.limit_share, 0, sizeof options_current.limit_share);
    setenv("VRAMWATCH_LIMIT", "0:8GiB,100:8GiB", 1);
    options_load();
    for (int i = 0; i < SIZES_MAX_DEVICES; i++)
        cr_assert(options_current.limit[i] == 0 && options_current.limit_share[i] == 0,
                  "device %d limited", i);
    unsetenv("VRAMWATCH_LIMIT");
}

/* A warning quotes what the user gave (VRAMWATCH_LOG=$'debug\n\e[31mvramwatch: forged'): every
 * control byte, DEL and byte that is not UTF-8 is escaped, so a warning stays one line and never
 * a terminal's command; UTF-8 text stays as it is. */
Test(log, escapes_make_one_line)
{
    char out[256];
    static const char in[] = "debug\n\x1b[31mvramwatch: forged\r\t\x01\x7f\xff caf\xc3\xa9 \xe2\x82";
    size_t n = log_escape(in, sizeof(in) - 1, out, sizeof(out));
    cr_assert_str_eq(out, "debug\\n\\e[31mvramwatch: forged\\r\\t\\x01\\x7f\\xff caf\xc3\xa9 \\xe2\\x82");
    cr_assert_eq(n, strlen(out));
    /* overlong forms and surrogates are not UTF-8 */
    log_escape("\xc0\xaf\xed\xa0\x80", 5, out, sizeof(out));
    cr_assert_str_eq(out, "\\xc0\\xaf\\xed\\xa0\\x80");
    /* never past the buffer, never half an escape */
    char small[6];
    log_escape("ab\ncd", 5, small, sizeof(small));
    cr_assert_str_eq(small, "ab\\nc");
    log_escape("abcd\n", 5, small, sizeof(small));
    cr_assert_str_eq(small, "abcd");
}

/* VRAMWATCH_TRACE: events kept, 0 turns the trace off; a bad value or one past the maximum keeps
 * what was there with one warning. */
Test(options, trace_events)
{
    setenv("VRAMWATCH_LOG", "quiet", 1);
    unsetenv("VRAMWATCH_TRACE");
    options_load();
    cr_assert_eq(options_current.trace_events, VW_TRACE_DEFAULT);
    setenv("VRAMWATCH_TRACE", "0", 1);
    options_load();
    cr_assert_eq(options_current.trace_events, 0);
    setenv("VRAMWATCH_TRACE", "50000", 1);
    options_load();
    cr_assert_eq(options_current.trace_events, 50000);
    const char *bad[] = { "lots", "-1", "", "12k", "65537" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("VRAMWATCH_TRACE", bad[i], 1);
        options_load();
        cr_assert_eq(options_current.trace_events, 50000, "'%s' was taken", bad[i]);
    }
    unsetenv("VRAMWATCH_TRACE");
}
