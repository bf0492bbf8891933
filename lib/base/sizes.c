/* sizes.c: sizes, percentages and per-device limits, one grammar for the library and the CLI.
 *
 * By hand, not strtoull/strtod: those follow the host program's locale, accept signs, hex and
 * exponents, and strtod's rounding is not what "1.5GiB" should mean in bytes. The arithmetic is
 * integer only, so every size has one exact value on every machine. */
#include "sizes.h"

#include <string.h>

#define SIZE_MAX_BYTES ((uint64_t)INT64_MAX)

static const char why_number[] = "expected a number of bytes, e.g. 16GiB, 1.5GiB, 16000MB or "
                                 "17179869184";
static const char why_point[] = "expected digits after the decimal point";
static const char why_unit[] = "unknown unit (K, M, G, T, KiB, MiB, GiB, TiB: powers of 1024; "
                               "KB, MB, GB, TB: powers of 1000; B or none: bytes)";
static const char why_byte_fraction[] = "a fraction of a byte: give a unit, e.g. 1.5GiB";
static const char why_large[] = "too large (at most 8 EiB)";
static const char why_percent[] = "expected a percentage from 0 to 100, e.g. 10 or 12.5%";
static const char why_share[] = "a share of the card is more than 0% and at most 100%, e.g. 90%";
static const char why_zero[] = "a limit of 0 bytes would fail every allocation";
static const char why_list[] = "expected one size or share, or DEVICE:SIZE entries separated by "
                               "commas, e.g. 16GiB, 90% or 0:16GiB,1:8GiB";
static const char why_device[] = "a device is a number from 0 to 63, e.g. 0:16GiB";
static const char why_twice[] = "a device is named twice";
static const char why_empty[] = "empty";

_Static_assert(SIZES_MAX_DEVICES == 64, "why_device names the highest device");

static bool fail(const char **why, const char *reason)
{
    if (why)
        *why = reason;
    return false;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char upper(char c)
{
    return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

/* [*p, end) with blanks taken off both ends. */
static void trim(const char **p, const char **end)
{
    while (*p < *end && is_blank(**p))
        (*p)++;
    while (*end > *p && is_blank((*end)[-1]))
        (*end)--;
}

/* The multiplier of a unit spelled in [u, end), or 0 when it is none. */
static uint64_t unit_multiplier(const char *u, const char *end)
{
    size_t n = (size_t)(end - u);
    if (n == 0 || (n == 1 && upper(u[0]) == 'B'))
        return 1;
    const char *letters = "KMGT";
    const char *at = memchr(letters, upper(u[0]), 4);
    if (!at)
        return 0;
    uint64_t base;
    if (n == 1)
        base = 1024;
    else if (n == 2 && upper(u[1]) == 'B')
        base = 1000;
    else if (n == 3 && upper(u[1]) == 'I' && upper(u[2]) == 'B')
        base = 1024;
    else
        return 0;
    uint64_t mult = 1;
    for (int i = 0; i <= at - letters; i++)
        mult *= base;
    return mult;
}

bool sizes_parse_n(const char *s, size_t n, uint64_t *out, const char **why)
{
    if (!s)
        return fail(why, why_empty);
    const char *p = s, *end = s + n;
    trim(&p, &end);
    if (p == end || !is_digit(*p))
        return fail(why, p == end ? why_empty : why_number);
    uint64_t whole = 0;
    for (; p < end && is_digit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (whole > (UINT64_MAX - d) / 10)
            return fail(why, why_large);
        whole = whole * 10 + d;
    }
    /* The fraction is kept to nine places: further digits would move a TiB by at most a
     * kilobyte, which nobody means. They must still be digits. */
    uint64_t frac = 0, frac_div = 1;
    bool has_frac = false;
    if (p < end && *p == '.') {
        p++;
        if (p == end || !is_digit(*p))
            return fail(why, why_point);
        for (; p < end && is_digit(*p); p++) {
            if (*p != '0')
                has_frac = true;
            if (frac_div < 1000000000u) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                frac_div *= 10;
            }
        }
    }
    while (p < end && is_blank(*p))
        p++;
    uint64_t mult = unit_multiplier(p, end);
    if (!mult)
        return fail(why, why_unit);
    if (has_frac && mult == 1)
        return fail(why, why_byte_fraction);
    if (whole > SIZE_MAX_BYTES / mult)
        return fail(why, why_large);
    /* frac * mult / frac_div, rounded down, without a product that could overflow: mult is
     * q * frac_div + r, and frac < frac_div <= 10^9, so frac * r < 10^18. */
    uint64_t part = frac * (mult / frac_div) + frac * (mult % frac_div) / frac_div;
    uint64_t total = whole * mult;
    if (part > SIZE_MAX_BYTES - total)
        return fail(why, why_large);
    *out = total + part;
    return true;
}

bool sizes_parse(const char *s, uint64_t *out, const char **why)
{
    return sizes_parse_n(s, s ? strlen(s) : 0, out, why);
}

/* A percentage in [s, s + n); with need_sign, the '%' must be there. */
static bool percent_n(const char *s, size_t n, bool need_sign, double *out, const char **why)
{
    const char *p = s, *end = s + n;
    trim(&p, &end);
    if (p == end || !is_digit(*p))
        return fail(why, p == end ? why_empty : why_percent);
    double v = 0, scale = 1;
    for (; p < end && is_digit(*p); p++)
        if (v <= 1000) /* past 100 already: the exact figure no longer matters */
            v = v * 10 + (*p - '0');
    if (p < end && *p == '.') {
        p++;
        if (p == end || !is_digit(*p))
            return fail(why, why_point);
        for (; p < end && is_digit(*p); p++)
            if (scale > 1e-9)
                v += (*p - '0') * (scale /= 10);
    }
    while (p < end && is_blank(*p))
        p++;
    bool sign = p < end && *p == '%';
    if (sign)
        p++;
    if (p != end || (need_sign && !sign) || v > 100)
        return fail(why, why_percent);
    *out = v;
    return true;
}

bool sizes_parse_percent(const char *s, double *out, const char **why)
{
    if (!s)
        return fail(why, why_empty);
    return percent_n(s, strlen(s), false, out, why);
}

/* The reason for a limit below SIZES_MIN_LIMIT: "16 bytes is below 1 MiB: did you mean 16GiB?"
 * when the size had no unit and the guess is a card's size (up to 16384GiB: a unit left out is the
 * likely slip, "--limit 16"), else without the guess. Formatted by hand into a buffer of the calling thread (no allocation, no stdio, no
 * locale); bytes is below 1 MiB, so at most 7 digits, and the number as given is cut at 24. */
static void small_limit(const char *s, size_t n, uint64_t bytes, const char **why)
{
    static _Thread_local char buf[128];
    if (!why)
        return;
    const char *p = s, *end = s + n;
    trim(&p, &end);
    size_t digits = 0;
    while (p + digits < end && (is_digit(p[digits]) || p[digits] == '.'))
        digits++;
    bool unitless = p + digits == end && bytes <= 16384;
    char num[24];
    size_t k = sizeof(num);
    do {
        num[--k] = (char)('0' + bytes % 10);
        bytes /= 10;
    } while (bytes && k > 0);
    size_t o = 0;
    memcpy(buf + o, num + k, sizeof(num) - k);
    o += sizeof(num) - k;
    static const char below[] = " bytes is below 1 MiB: ";
    memcpy(buf + o, below, sizeof(below) - 1);
    o += sizeof(below) - 1;
    if (unitless && digits <= 24) {
        static const char mean[] = "did you mean ";
        memcpy(buf + o, mean, sizeof(mean) - 1);
        o += sizeof(mean) - 1;
        memcpy(buf + o, p, digits);
        o += digits;
        memcpy(buf + o, "GiB?", 4);
        o += 4;
    } else {
        static const char small[] = "too small a limit for a card";
        memcpy(buf + o, small, sizeof(small) - 1);
        o += sizeof(small) - 1;
    }
    buf[o] = '\0';
    *why = buf;
}

/* One device's value in [s, s + n): a share when it has a '%', else a size. */
static bool limit_value(const char *s, size_t n, uint64_t *bytes, double *share, const char **why)
{
    *bytes = 0;
    *share = 0;
    if (memchr(s, '%', n)) {
        double pct;
        if (!percent_n(s, n, true, &pct, NULL) || !(pct > 0))
            return fail(why, why_share);
        *share = pct / 100.0;
        return true;
    }
    if (!sizes_parse_n(s, n, bytes, why))
        return false;
    if (*bytes == 0)
        return fail(why, why_zero);
    if (*bytes < SIZES_MIN_LIMIT) {
        small_limit(s, n, *bytes, why);
        *bytes = 0;
        return false;
    }
    return true;
}

bool sizes_parse_limit(const char *s, struct sizes_limit *out, const char **why)
{
    if (!s)
        return fail(why, why_empty);
    struct sizes_limit l;
    memset(&l, 0, sizeof l);
    size_t len = strlen(s);
    if (!memchr(s, ':', len)) {
        uint64_t b;
        double sh;
        if (!limit_value(s, len, &b, &sh, why))
            return false;
        l.every = true;
        for (int i = 0; i < SIZES_MAX_DEVICES; i++) {
            l.bytes[i] = b;
            l.share[i] = sh;
        }
        *out = l;
        return true;
    }
    bool named[SIZES_MAX_DEVICES] = { false };
    for (const char *item = s;;) {
        const char *comma = strchr(item, ',');
        const char *end = comma ? comma : item + strlen(item);
        const char *colon = memchr(item, ':', (size_t)(end - item));
        if (!colon)
            return fail(why, why_list);
        const char *d = item, *dend = colon;
        trim(&d, &dend);
        if (d == dend)
            return fail(why, why_list);
        unsigned dev = 0;
        for (; d < dend; d++) {
            if (!is_digit(*d))
                return fail(why, why_device);
            dev = dev * 10 + (unsigned)(*d - '0');
            if (dev >= SIZES_MAX_DEVICES)
                return fail(why, why_device);
        }
        if (named[dev])
            return fail(why, why_twice);
        named[dev] = true;
        if (!limit_value(colon + 1, (size_t)(end - colon - 1), &l.bytes[dev], &l.share[dev], why))
            return false;
        if (!comma)
            break;
        item = comma + 1;
    }
    *out = l;
    return true;
}
