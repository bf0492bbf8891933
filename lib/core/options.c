/* Options: every VRAMWATCH_* variable is listed here, read once, and documented in README.md.
 *
 * The library reads no other variables but these: CUDA_VISIBLE_DEVICES (here, whether it is set),
 * and at report time the launchers' rank variables (RANK, LOCAL_RANK, WORLD_SIZE and their MPI and
 * Slurm spellings) and the allowlist copied into the report's process.env (report.c). Nothing is
 * read in a setuid or setgid program: the library is off there before this runs (setup.c). */
#include "options.h"

#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "log.h"
#include "sizes.h"
#include "trace.h"

/* The grammar's device count is the size of the library's tables. */
_Static_assert(SIZES_MAX_DEVICES == VW_MAX_DEVICES, "sizes.h and core.h disagree on devices");

struct vw_options options_current = {
    .stack_depth = 32,
    .python = true,
    .trace_events = VW_TRACE_DEFAULT,
};

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
            log_msg(VW_LOG_WARN, "VRAMWATCH_LOG=%s is not quiet, warn, info or debug; using warn",
                    v);
        else
            log_set_level(lvl);
    }
    if ((v = getenv("VRAMWATCH_DISABLE")) && !parse_bool(v, &options_current.disable))
        log_msg(VW_LOG_WARN, "VRAMWATCH_DISABLE=%s is not 0 or 1; staying enabled", v);
    if ((v = getenv("VRAMWATCH_STACK_DEPTH"))) {
        char *end;
        long d = strtol(v, &end, 10);
        if (end == v || *end || d < 0 || d > VW_MAX_FRAMES)
            log_msg(VW_LOG_WARN, "VRAMWATCH_STACK_DEPTH=%s is not a number from 0 to %d; using %d",
                    v, VW_MAX_FRAMES, options_current.stack_depth);
        else
            options_current.stack_depth = (int)d;
    }
    if ((v = getenv("VRAMWATCH_TRACE"))) {
        char *end;
        long n = strtol(v, &end, 10);
        if (end == v || *end || n < 0 || n > (long)VW_TRACE_MAX)
            log_msg(VW_LOG_WARN, "VRAMWATCH_TRACE=%s is not a number from 0 to %u; keeping %u", v,
                    VW_TRACE_MAX, options_current.trace_events);
        else
            options_current.trace_events = (uint32_t)n;
    }
    if ((v = getenv("VRAMWATCH_PYTHON")) && !parse_bool(v, &options_current.python))
        log_msg(VW_LOG_WARN, "VRAMWATCH_PYTHON=%s is not 0 or 1; keeping it on", v);
    if ((v = getenv("VRAMWATCH_DIR")) && *v) {
        if (strlen(v) >= sizeof(options_current.dir) - 64)
            log_msg(VW_LOG_WARN, "VRAMWATCH_DIR is too long; using the working directory");
        else
            strcpy(options_current.dir, v);
    }
    if ((v = getenv("VRAMWATCH_LIMIT")) && *v) {
        /* The grammar the command line's --limit uses too (sizes.c): what run accepts, this
         * accepts, and what it refuses never reaches here from it. */
        struct sizes_limit l;
        const char *why = NULL;
        if (sizes_parse_limit(v, &l, &why)) {
            memcpy(options_current.limit, l.bytes, sizeof options_current.limit);
            memcpy(options_current.limit_share, l.share, sizeof options_current.limit_share);
        } else {
            log_msg(VW_LOG_WARN,
                    "VRAMWATCH_LIMIT=%s: %s; no limit (a size such as 16GiB or 14.4GiB, a share of "
                    "the card such as 90%%, or a list such as 0:16GiB,1:8GiB)",
                    v, why);
        }
    }
    if ((v = getenv("VRAMWATCH_STATUS")) && *v) {
        if (strlen(v) >= sizeof(options_current.status))
            log_msg(VW_LOG_WARN, "VRAMWATCH_STATUS is too long; no status file");
        else
            strcpy(options_current.status, v);
    }
    /* PyTorch reads PYTORCH_ALLOC_CONF first, then the older name; either may pick the
     * cudaMallocAsync backend, which does not flush and retry (retrying.c). */
    const char *conf = getenv("PYTORCH_ALLOC_CONF");
    if (!conf || !*conf)
        conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
    options_current.torch_async_backend = conf && strstr(conf, "backend:cudaMallocAsync") != NULL;
    /* Read here, once, so that the NVML hooks never call getenv (environ may be changing). */
    options_current.cuda_visible_set = getenv("CUDA_VISIBLE_DEVICES") != NULL;
    if ((v = getenv("VRAMWATCH_LIMIT_MODE")) && *v) {
        if (!strcasecmp(v, "observe"))
            options_current.observe = true;
        else if (strcasecmp(v, "enforce"))
            log_msg(VW_LOG_WARN, "VRAMWATCH_LIMIT_MODE=%s is not enforce or observe; using enforce",
                    v);
    }
}
