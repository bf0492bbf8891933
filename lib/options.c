/* Options: every VRAMWATCH_* variable is listed here, read once, and documented in README.md.
 *
 * The library reads no other variables but these: CUDA_VISIBLE_DEVICES (here, whether it is set),
 * and at report time the launchers' rank variables (RANK, LOCAL_RANK, WORLD_SIZE and their MPI and
 * Slurm spellings) and the allowlist copied into the report's process.env (report.c). Nothing is
 * read in a setuid or setgid program: the library is off there before this runs (interpose.c). */
#include "options.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct vw_options vw_opt = {
    .stack_depth = 32,
    .python = true,
    .log_level = VW_LOG_WARN,
};

static const char *skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

bool options_parse_size(const char *s, uint64_t *out)
{
    if (!s)
        return false;
    s = skip_space(s);
    if (!isdigit((unsigned char)*s))
        return false;
    uint64_t v = 0;
    while (isdigit((unsigned char)*s)) {
        unsigned d = (unsigned)(*s++ - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    /* Optional fraction: "1.5GiB". */
    uint64_t frac = 0, frac_div = 1;
    if (*s == '.') {
        s++;
        while (isdigit((unsigned char)*s)) {
            if (frac_div < 1000000000ull) {
                frac = frac * 10 + (uint64_t)(*s - '0');
                frac_div *= 10;
            }
            s++;
        }
    }
    s = skip_space(s);
    uint64_t mult = 1;
    char u = (char)toupper((unsigned char)*s);
    if (u) {
        const char *units = "KMGT";
        const char *p = strchr(units, u);
        if (!p)
            return false;
        int power = (int)(p - units) + 1;
        s++;
        uint64_t base = 1024;
        if ((s[0] == 'i' || s[0] == 'I') && (s[1] == 'B' || s[1] == 'b')) {
            s += 2;
        } else if (s[0] == 'B' || s[0] == 'b') {
            base = 1000;
            s++;
        }
        for (int i = 0; i < power; i++)
            mult *= base;
    }
    s = skip_space(s);
    if (*s)
        return false;
    if (v > UINT64_MAX / mult)
        return false;
    uint64_t total = v * mult;
    if (frac)
        total += (uint64_t)((long double)frac * (long double)mult / (long double)frac_div);
    *out = total;
    return true;
}

/* "90%", "12.5 %": a share of the card, more than 0 and at most 100 percent. */
static bool parse_share(const char *s, double *out)
{
    s = skip_space(s);
    if (!isdigit((unsigned char)*s))
        return false;
    /* By hand rather than strtod, whose decimal point follows the host program's locale. */
    double v = 0, scale = 1;
    while (isdigit((unsigned char)*s) && v <= 1000)
        v = v * 10 + (*s++ - '0');
    if (*s == '.')
        for (s++; isdigit((unsigned char)*s); s++)
            if (scale > 1e-9)
                v += (*s - '0') * (scale /= 10);
    const char *end = skip_space(s);
    if (*end != '%' || *skip_space(end + 1) || !(v > 0) || v > 100)
        return false;
    *out = v / 100.0;
    return true;
}

/* One device's limit: a size or a share. */
static bool parse_one(const char *s, uint64_t *v, double *share)
{
    *v = 0;
    *share = 0;
    if (strchr(s, '%'))
        return parse_share(s, share);
    return options_parse_size(s, v) && *v > 0;
}

bool options_parse_limit(const char *s, uint64_t limit[VW_MAX_DEVICES],
                         double share[VW_MAX_DEVICES])
{
    uint64_t tmp[VW_MAX_DEVICES] = { 0 };
    double tshare[VW_MAX_DEVICES] = { 0 };
    if (!s || !*s)
        return false;
    if (!strchr(s, ':')) {
        uint64_t v;
        double sh;
        if (!parse_one(s, &v, &sh))
            return false;
        for (int i = 0; i < VW_MAX_DEVICES; i++) {
            tmp[i] = v;
            tshare[i] = sh;
        }
    } else {
        const char *p = s;
        while (*p) {
            char item[64];
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            if (len == 0 || len >= sizeof(item))
                return false;
            memcpy(item, p, len);
            item[len] = 0;
            char *colon = strchr(item, ':');
            if (!colon)
                return false;
            *colon = 0;
            char *end;
            long dev = strtol(item, &end, 10);
            uint64_t v;
            double sh;
            if (end == item || *skip_space(end) || dev < 0 || dev >= VW_MAX_DEVICES ||
                !parse_one(colon + 1, &v, &sh))
                return false;
            tmp[dev] = v;
            tshare[dev] = sh;
            p = comma ? comma + 1 : p + len;
        }
    }
    memcpy(limit, tmp, sizeof(tmp));
    memcpy(share, tshare, sizeof(tshare));
    return true;
}

static bool parse_bool(const char *v, bool *out)
{
    static const char *yes[] = { "1", "true", "yes", "on" }, *no[] = { "0", "false", "no", "off" };
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i])) {
            *out = true;
            return true;
        }
        if (!strcasecmp(v, no[i])) {
            *out = false;
            return true;
        }
    }
    return false;
}

void options_load(void)
{
    const char *v;
    /* The log level first, so the warnings below obey it. */
    if ((v = getenv("VRAMWATCH_LOG"))) {
        static const char *names[] = { "quiet", "warn", "info", "debug" };
        int lvl = -1;
        for (int i = 0; i < 4; i++)
            if (!strcasecmp(v, names[i]))
                lvl = i;
        if (lvl < 0)
            vw_log(VW_LOG_WARN, "VRAMWATCH_LOG=%s is not quiet, warn, info or debug; using warn",
                   v);
        else
            vw_opt.log_level = lvl;
    }
    if ((v = getenv("VRAMWATCH_DISABLE")) && !parse_bool(v, &vw_opt.disable))
        vw_log(VW_LOG_WARN, "VRAMWATCH_DISABLE=%s is not 0 or 1; staying enabled", v);
    if ((v = getenv("VRAMWATCH_STACK_DEPTH"))) {
        char *end;
        long d = strtol(v, &end, 10);
        if (end == v || *end || d < 0 || d > VW_MAX_FRAMES)
            vw_log(VW_LOG_WARN, "VRAMWATCH_STACK_DEPTH=%s is not a number from 0 to %d; using %d",
                   v, VW_MAX_FRAMES, vw_opt.stack_depth);
        else
            vw_opt.stack_depth = (int)d;
    }
    if ((v = getenv("VRAMWATCH_PYTHON")) && !parse_bool(v, &vw_opt.python))
        vw_log(VW_LOG_WARN, "VRAMWATCH_PYTHON=%s is not 0 or 1; keeping it on", v);
    if ((v = getenv("VRAMWATCH_DIR")) && *v) {
        if (strlen(v) >= sizeof(vw_opt.dir) - 64)
            vw_log(VW_LOG_WARN, "VRAMWATCH_DIR is too long; using the working directory");
        else
            strcpy(vw_opt.dir, v);
    }
    if ((v = getenv("VRAMWATCH_LIMIT")) && *v &&
        !options_parse_limit(v, vw_opt.limit, vw_opt.limit_share))
        vw_log(VW_LOG_WARN,
               "VRAMWATCH_LIMIT=%s is not a size (16GiB, 16000MB), a share of the card "
               "(90%%) or a list (0:16GiB,1:8GiB); no limit",
               v);
    if ((v = getenv("VRAMWATCH_STATUS")) && *v) {
        if (strlen(v) >= sizeof(vw_opt.status))
            vw_log(VW_LOG_WARN, "VRAMWATCH_STATUS is too long; no status file");
        else
            strcpy(vw_opt.status, v);
    }
    /* PyTorch reads PYTORCH_ALLOC_CONF first, then the older name; either may pick the
     * cudaMallocAsync backend, which does not flush and retry (retrying.c). */
    const char *conf = getenv("PYTORCH_ALLOC_CONF");
    if (!conf || !*conf)
        conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
    vw_opt.torch_async_backend = conf && strstr(conf, "backend:cudaMallocAsync") != NULL;
    /* Read here, once, so that the NVML hooks never call getenv (environ may be changing). */
    vw_opt.cuda_visible_set = getenv("CUDA_VISIBLE_DEVICES") != NULL;
    if ((v = getenv("VRAMWATCH_LIMIT_MODE")) && *v) {
        if (!strcasecmp(v, "observe"))
            vw_opt.observe = true;
        else if (strcasecmp(v, "enforce"))
            vw_log(VW_LOG_WARN, "VRAMWATCH_LIMIT_MODE=%s is not enforce or observe; using enforce",
                   v);
    }
}
