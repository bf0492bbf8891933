/* simconfig.c: parsing of the SIMGPU_* environment variables (see simconfig.h and docs/simgpu.md). */
#include "simconfig.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The device of a run that names no card: what the simulator has always been, an H100/H200-like
 * part with 16 GiB (these are the driver's default attribute values). */
const struct simgpu_card simgpu_default_card = {
    .name = SIMGPU_DEFAULT_NAME,
    .bytes = SIMGPU_DEFAULT_MEMORY,
    .major = 9,
    .sms = 132,
    .bf16 = 1,
    .mem_clock_khz = 2619000,
    .bus_bits = 5120,
    .l2_bytes = 50331648,
    .clock_khz = 1980000,
    .threads_per_sm = 2048,
    .smem_per_sm = 233472,
    .smem_optin = 232448,
    .blocks_per_sm = 32,
};

const struct simgpu_card simgpu_cards[] = {
#define CARD(key, name, bytes, major, minor, sms, bf16, mclk, bus, l2, clk, tpsm, smem, optin, \
             bpsm)                                                                             \
    { key, name, bytes, major, minor, sms, bf16, mclk, bus, l2, clk, tpsm, smem, optin, bpsm },
#include "cards.def"
#undef CARD
};

const int simgpu_ncards = (int)(sizeof simgpu_cards / sizeof simgpu_cards[0]);

const struct simgpu_card *simgpu_card_find(const char *key)
{
    for (int i = 0; key && i < simgpu_ncards; i++)
        if (strcasecmp(simgpu_cards[i].key, key) == 0)
            return &simgpu_cards[i];
    return NULL;
}

const char *simgpu_device_name(const struct simgpu_config *cfg, int dev)
{
    if (cfg->name_set || dev < 0 || dev >= SIMGPU_MAX_DEVICES || !cfg->card[dev])
        return cfg->name;
    return cfg->card[dev]->name;
}

static const char *skip_space(const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    return s;
}

static const struct {
    const char *suffix;
    uint64_t mult;
} units[] = {
    { "", 1 },
    { "b", 1 },
    /* Bare letters and the IEC spellings are powers of 1024, as nvidia-smi and PyTorch print them. */
    { "k", 1ULL << 10 },
    { "kib", 1ULL << 10 },
    { "kb", 1000ULL },
    { "m", 1ULL << 20 },
    { "mib", 1ULL << 20 },
    { "mb", 1000ULL * 1000 },
    { "g", 1ULL << 30 },
    { "gib", 1ULL << 30 },
    { "gb", 1000ULL * 1000 * 1000 },
    { "t", 1ULL << 40 },
    { "tib", 1ULL << 40 },
    { "tb", 1000ULL * 1000 * 1000 * 1000 },
};

/* Parses a size that ends at `end` (exclusive). */
static int parse_size_n(const char *s, const char *end, uint64_t *out)
{
    uint64_t whole = 0, frac = 0, frac_div = 1;
    int digits = 0;

    while (s < end && isspace((unsigned char)*s))
        s++;
    while (end > s && isspace((unsigned char)end[-1]))
        end--;
    while (s < end && isdigit((unsigned char)*s)) {
        unsigned d = (unsigned)(*s - '0');
        if (whole > (UINT64_MAX - d) / 10)
            return -1;
        whole = whole * 10 + d;
        s++;
        digits++;
    }
    if (s < end && *s == '.') {
        s++;
        while (s < end && isdigit((unsigned char)*s)) {
            /* Six decimals are plenty for a memory size and keep frac * mult inside 64 bits. */
            if (frac_div < 1000000) {
                frac = frac * 10 + (uint64_t)(*s - '0');
                frac_div *= 10;
            }
            s++;
            digits++;
        }
    }
    if (digits == 0)
        return -1;
    while (s < end && isspace((unsigned char)*s))
        s++;

    size_t ulen = (size_t)(end - s);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].suffix) != ulen || strncasecmp(s, units[i].suffix, ulen) != 0)
            continue;
        uint64_t mult = units[i].mult;
        if (whole > UINT64_MAX / mult)
            return -1;
        uint64_t v = whole * mult;
        uint64_t f = frac * mult / frac_div;
        if (v + f < v)
            return -1;
        *out = v + f;
        return 0;
    }
    return -1;
}

int simgpu_parse_size(const char *s, uint64_t *out)
{
    if (!s)
        return -1;
    return parse_size_n(s, s + strlen(s), out);
}

int simgpu_parse_device_sizes(const char *s, uint64_t *out, int *highest)
{
    uint64_t vals[SIMGPU_MAX_DEVICES];
    uint64_t all = 0;
    int have_all = 0;
    uint64_t per[SIMGPU_MAX_DEVICES];
    unsigned char named[SIMGPU_MAX_DEVICES] = { 0 };
    int top = -1;

    if (!s || !*skip_space(s))
        return -1;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *colon = memchr(p, ':', (size_t)(end - p));
        uint64_t v;
        if (colon) {
            const char *q = skip_space(p);
            long idx = 0;
            int nd = 0;
            while (q < colon && isdigit((unsigned char)*q)) {
                idx = idx * 10 + (*q - '0');
                if (idx >= SIMGPU_MAX_DEVICES)
                    return -1;
                q++;
                nd++;
            }
            while (q < colon && isspace((unsigned char)*q))
                q++;
            if (nd == 0 || q != colon || parse_size_n(colon + 1, end, &v) != 0)
                return -1;
            per[idx] = v;
            named[idx] = 1;
            if ((int)idx > top)
                top = (int)idx;
        } else {
            if (parse_size_n(p, end, &v) != 0)
                return -1;
            all = v;
            have_all = 1;
        }
        if (!comma)
            break;
        p = comma + 1;
    }

    /* An entry without an index sets every device; indexed entries win wherever both appear. */
    for (int i = 0; i < SIMGPU_MAX_DEVICES; i++)
        vals[i] = named[i] ? per[i] : have_all ? all : out[i];
    memcpy(out, vals, sizeof vals);
    *highest = top;
    return 0;
}

/* Complaints about bad values go to `warn`; NULL keeps them quiet. */
__attribute__((format(printf, 2, 3))) static void complain(FILE *warn, const char *fmt, ...)
{
    va_list ap;
    if (!warn)
        return;
    va_start(ap, fmt);
    vfprintf(warn, fmt, ap);
    va_end(ap);
}

static void warn_bad(FILE *warn, const char *var, const char *value, const char *expect,
                     const char *fallback)
{
    complain(warn, "simgpu: %s='%s' is not %s; using %s\n", var, value, expect, fallback);
}

/* A variable of sizes per device: its name, the range it takes, and what a bad value leaves in
 * force, for the warning. */
struct size_var {
    const char *name;
    uint64_t min, max;
    const char *fallback;
};

/* out[] starts as dflt[] (one default per device); the variable's entries overwrite it. */
static void load_sizes(FILE *warn, const struct size_var *sv, uint64_t *out, const uint64_t *dflt,
                       int *highest)
{
    const char *var = sv->name, *fallback = sv->fallback;
    uint64_t min = sv->min, max = sv->max;
    const char *v = getenv(var);
    uint64_t tmp[SIMGPU_MAX_DEVICES];
    int top = -1;

    for (int i = 0; i < SIMGPU_MAX_DEVICES; i++)
        out[i] = tmp[i] = dflt[i];
    if (highest)
        *highest = -1;
    if (!v)
        return;
    if (simgpu_parse_device_sizes(v, tmp, &top) != 0) {
        warn_bad(warn, var, v, "a size (like 16GiB, 16000MB or 0:16GiB,1:8GiB)", fallback);
        return;
    }
    for (int i = 0; i < SIMGPU_MAX_DEVICES; i++) {
        if (tmp[i] < min || tmp[i] > max) {
            warn_bad(warn, var, v, "a size in the supported range", fallback);
            return;
        }
    }
    memcpy(out, tmp, sizeof tmp);
    if (highest)
        *highest = top;
}

/* One entry of SIMGPU_CARD, [p, end): "KEY" or "INDEX:KEY". *idx is -1 without an index. */
static const struct simgpu_card *card_entry(const char *p, const char *end, long *idx)
{
    char key[32];
    const char *colon = memchr(p, ':', (size_t)(end - p));

    *idx = -1;
    if (colon) {
        const char *q = skip_space(p);
        long n = 0;
        int nd = 0;
        for (; q < colon && isdigit((unsigned char)*q); q++, nd++) {
            n = n * 10 + (*q - '0');
            if (n >= SIMGPU_MAX_DEVICES)
                return NULL;
        }
        while (q < colon && isspace((unsigned char)*q))
            q++;
        if (nd == 0 || q != colon)
            return NULL;
        *idx = n;
        p = colon + 1;
    }
    while (p < end && isspace((unsigned char)*p))
        p++;
    while (end > p && isspace((unsigned char)end[-1]))
        end--;
    if (end == p || (size_t)(end - p) >= sizeof key)
        return NULL;
    memcpy(key, p, (size_t)(end - p));
    key[end - p] = '\0';
    return simgpu_card_find(key);
}

/*
 * SIMGPU_CARD: a card for every device ("H100") and/or per device ("0:V100,1:T4"), like
 * SIMGPU_MEMORY. A value with any entry that is not a card is ignored as a whole, with one line
 * that lists the known keys. Returns the largest device index named, -1 if none.
 */
static int load_cards(FILE *warn, const struct simgpu_card **out)
{
    const char *v = getenv("SIMGPU_CARD");
    const struct simgpu_card *all = NULL, *per[SIMGPU_MAX_DEVICES] = { NULL };
    int top = -1;

    if (!v)
        return -1;
    for (const char *p = v;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        long idx;
        const struct simgpu_card *c = card_entry(p, end, &idx);
        if (!c) {
            char known[512];
            size_t n = 0;
            known[0] = '\0';
            for (int i = 0; i < simgpu_ncards && n < sizeof known; i++)
                n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "",
                                      simgpu_cards[i].key);
            complain(warn,
                     "simgpu: SIMGPU_CARD='%s' is not a card or a per-device list of cards "
                     "(known: %s; e.g. 0:H100,1:T4); using the default card\n",
                     v, known);
            return -1;
        }
        if (idx < 0) {
            all = c;
        } else {
            per[idx] = c;
            if ((int)idx > top)
                top = (int)idx;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    /* An entry without an index sets every device; indexed entries win wherever both appear. */
    for (int i = 0; i < SIMGPU_MAX_DEVICES; i++)
        out[i] = per[i] ? per[i] : all ? all : &simgpu_default_card;
    return top;
}

static void load_fail_rules(FILE *warn, struct simgpu_config *cfg,
                            int (*is_known_func)(const char *name))
{
    const char *v = getenv("SIMGPU_FAIL");
    if (!v)
        return;

    const char *p = v;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char entry[SIMGPU_FUNC_LEN + 48];
        char func[SIMGPU_FUNC_LEN];
        unsigned long long nth = 0;
        long err = 2; /* CUDA_ERROR_OUT_OF_MEMORY: the failure this project cares about */
        int ok = 0;

        if (n > 0 && n < sizeof entry) {
            memcpy(entry, p, n);
            entry[n] = '\0';
            char *c1 = strchr(entry, ':');
            if (c1 && (size_t)(c1 - entry) < sizeof func && c1 != entry) {
                memcpy(func, entry, (size_t)(c1 - entry));
                func[c1 - entry] = '\0';
                char *endp;
                errno = 0;
                nth = strtoull(c1 + 1, &endp, 10);
                ok = errno == 0 && endp != c1 + 1 && nth >= 1 && isdigit((unsigned char)c1[1]);
                if (ok && *endp == ':') {
                    char *e2;
                    errno = 0;
                    err = strtol(endp + 1, &e2, 10);
                    ok = errno == 0 && e2 != endp + 1 && *e2 == '\0' && err >= 0 && err <= 100000;
                } else if (ok && *endp != '\0') {
                    ok = 0;
                }
                if (ok && is_known_func && !is_known_func(func)) {
                    complain(warn,
                             "simgpu: SIMGPU_FAIL entry '%s' ignored: %s is not a function "
                             "of the simulated driver\n",
                             entry, func);
                    ok = -1;
                }
            }
        }
        if (ok == 0)
            complain(warn,
                     "simgpu: SIMGPU_FAIL entry '%.*s' ignored (expected FUNC:N[:ERR], "
                     "e.g. cuMemAlloc_v2:3:2)\n",
                     (int)n, p);
        if (ok == 1) {
            if (cfg->nfail == SIMGPU_MAX_FAIL_RULES) {
                complain(warn,
                         "simgpu: SIMGPU_FAIL has more than %d entries; the rest are "
                         "ignored\n",
                         SIMGPU_MAX_FAIL_RULES);
                return;
            }
            struct simgpu_fail_rule *r = &cfg->fail[cfg->nfail++];
            memset(r, 0, sizeof *r);
            memcpy(r->func, func, strlen(func) + 1);
            r->nth = nth;
            r->err = (int)err;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
}

void simgpu_config_load(struct simgpu_config *cfg, int (*is_known_func)(const char *name))
{
    simgpu_config_read(cfg, is_known_func, stderr);
}

void simgpu_config_read(struct simgpu_config *cfg, int (*is_known_func)(const char *name),
                        FILE *warn)
{
    int highest = -1;
    int devices_set = 0;
    const char *v;

    memset(cfg, 0, sizeof *cfg);
    cfg->devices = 1;
    for (int i = 0; i < SIMGPU_MAX_DEVICES; i++)
        cfg->physical[i] = i;
    if ((v = getenv("SIMGPU_DEVICES")) != NULL) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno != 0 || end == v || *skip_space(end) != '\0' || n < 0 || n > SIMGPU_MAX_DEVICES) {
            complain(warn, "simgpu: SIMGPU_DEVICES='%s' is not a device count (0..%d); using 1\n",
                     v, SIMGPU_MAX_DEVICES);
        } else {
            cfg->devices = (int)n;
            devices_set = 1;
        }
    }

    /* The cards first: a card's capacity is the default SIMGPU_MEMORY overrides. */
    uint64_t dflt[SIMGPU_MAX_DEVICES];
    int card_top = load_cards(warn, cfg->card);
    int named_card = 0;
    for (int i = 0; i < SIMGPU_MAX_DEVICES; i++) {
        if (!cfg->card[i])
            cfg->card[i] = &simgpu_default_card;
        named_card |= cfg->card[i] != &simgpu_default_card;
        dflt[i] = cfg->card[i]->bytes;
    }
    const struct size_var memory = { "SIMGPU_MEMORY", 512, SIMGPU_MAX_MEMORY,
                                     named_card ? "the cards' memory" : "16GiB" };
    load_sizes(warn, &memory, cfg->memory, dflt, &highest);
    if (highest >= cfg->devices) {
        if (devices_set)
            complain(warn,
                     "simgpu: SIMGPU_MEMORY names device %d but SIMGPU_DEVICES=%d; that "
                     "entry is ignored\n",
                     highest, cfg->devices);
        else
            cfg->devices = highest + 1; /* "0:16GiB,1:8GiB" alone means two devices */
    }
    if (card_top >= cfg->devices) {
        if (devices_set)
            complain(warn,
                     "simgpu: SIMGPU_CARD names device %d but SIMGPU_DEVICES=%d; that "
                     "entry is ignored\n",
                     card_top, cfg->devices);
        else
            cfg->devices = card_top + 1;
    }
    /* Capacities are whole 512-byte units, the granule of every allocation in the simulator. */
    for (int i = 0; i < SIMGPU_MAX_DEVICES; i++)
        cfg->memory[i] &= ~511ULL;

    for (int i = 0; i < SIMGPU_MAX_DEVICES; i++)
        dflt[i] = SIMGPU_DEFAULT_CONTEXT_BYTES;
    static const struct size_var context = { "SIMGPU_CONTEXT_BYTES", 0, SIMGPU_MAX_MEMORY,
                                             "300MiB" };
    load_sizes(warn, &context, cfg->context_bytes, dflt, NULL);
    memset(dflt, 0, sizeof dflt);
    static const struct size_var other = { "SIMGPU_OTHER_BYTES", 0, SIMGPU_MAX_MEMORY, "0" };
    load_sizes(warn, &other, cfg->other_bytes, dflt, NULL);

    v = getenv("SIMGPU_NAME");
    if (v && *v) {
        snprintf(cfg->name, sizeof cfg->name, "%s", v);
        cfg->name_set = 1;
    } else {
        if (v)
            complain(warn, "simgpu: SIMGPU_NAME is empty; using '%s'\n", SIMGPU_DEFAULT_NAME);
        snprintf(cfg->name, sizeof cfg->name, "%s", SIMGPU_DEFAULT_NAME);
    }

    load_fail_rules(warn, cfg, is_known_func);
}

void simgpu_uuid_bytes(int physical, unsigned char out[16])
{
    /* "vramwatch-GPU-0" and the device number: readable in a hex dump, one per device. */
    static const unsigned char stem[15] = { 0x76, 0x72, 0x61, 0x6d, 0x77, 0x61, 0x74, 0x63,
                                            0x68, 0x2d, 0x47, 0x50, 0x55, 0x2d, 0x30 };
    memcpy(out, stem, sizeof stem);
    out[15] = (unsigned char)physical;
}

void simgpu_uuid_string(int physical, char out[48])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[16];
    simgpu_uuid_bytes(physical, b);
    char *p = out;
    memcpy(p, "GPU-", 4);
    p += 4;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex[b[i] >> 4];
        *p++ = hex[b[i] & 15];
    }
    *p = '\0';
}

/* The physical device an entry names, or -1. */
static int visible_entry(const struct simgpu_config *cfg, const char *e, size_t n)
{
    while (n && isspace((unsigned char)*e))
        e++, n--;
    while (n && isspace((unsigned char)e[n - 1]))
        n--;
    if (n == 0)
        return -1;
    if (n > 4 && strncasecmp(e, "GPU-", 4) == 0) {
        int found = -1;
        for (int p = 0; p < cfg->devices; p++) {
            char u[48];
            simgpu_uuid_string(p, u);
            if (strncasecmp(u, e, n) == 0) {
                if (found >= 0)
                    return -1; /* a prefix of two devices' UUIDs names neither */
                found = p;
            }
        }
        return found;
    }
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)e[i]) || v > SIMGPU_MAX_DEVICES)
            return -1;
        v = v * 10 + (e[i] - '0');
    }
    return v < cfg->devices ? (int)v : -1;
}

void simgpu_config_visible(struct simgpu_config *cfg)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v)
        return;
    int map[SIMGPU_MAX_DEVICES], n = 0;
    for (const char *p = v; n < cfg->devices;) {
        size_t len = strcspn(p, ",");
        int phys = visible_entry(cfg, p, len);
        for (int i = 0; i < n && phys >= 0; i++)
            if (map[i] == phys)
                phys = -1;
        if (phys < 0)
            break;
        map[n++] = phys;
        if (!p[len])
            break;
        p += len + 1;
    }
    struct simgpu_config all = *cfg;
    for (int i = 0; i < n; i++) {
        cfg->physical[i] = map[i];
        cfg->memory[i] = all.memory[map[i]];
        cfg->context_bytes[i] = all.context_bytes[map[i]];
        cfg->other_bytes[i] = all.other_bytes[map[i]];
        cfg->card[i] = all.card[map[i]];
    }
    cfg->devices = n;
}
