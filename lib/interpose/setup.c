/* Lazy set-up at the first hooked call (options, the core, the status file); the process's life
 * from then on, forks included, is lifecycle.c's. */
#include "interpose.h"

#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "demangle.h"
#include "driver.h"
#include "framework.h"
#include "lifecycle.h"
#include "live.h"
#include "log.h"
#include "pyframes.h"
#include "report.h"
#include "status.h"
#include "trace.h"

VW_TLS int setup_depth;

static int warned_init;
static bool set_up; /* init_body finished with recording on */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_body(void)
{
    /* A setuid or setgid program (or one that gained capabilities) runs with privileges its
     * caller does not have: LD_PRELOAD reaching it at all means the loader was told to trust us,
     * but nothing the caller controls (VRAMWATCH_DIR, the log level) may steer what such a
     * program writes. Pure pass-through: no variable read, nothing recorded, nothing written. */
    if (getauxval(AT_SECURE)) {
        options_current.disable = true;
        return;
    }
    options_load();
    if (!options_current.dir[0] && !getcwd(options_current.dir, sizeof(options_current.dir)))
        strcpy(options_current.dir, ".");
    if (options_current.disable)
        return;
    for (int i = 0; i < VW_MAX_DEVICES; i++)
        if (options_current.limit_share[i] > 0) {
            limit_any = true;
            log_msg(VW_LOG_INFO, "device %d behaves as a card of %.1f%% of its memory (%s)", i,
                    options_current.limit_share[i] * 100,
                    options_current.observe ? "observe" : "enforce");
        } else if (options_current.limit[i]) {
            limit_any = true;
            log_msg(VW_LOG_INFO, "device %d behaves as a card of %llu bytes (%s)", i,
                    (unsigned long long)options_current.limit[i],
                    options_current.observe ? "observe" : "enforce");
        }
    stack_init();
    demangle_lookup();
    pyframes_init();
    if (!core_init()) {
        log_warn_once(warned_init, "cannot map memory for the tables; recording is off");
        return;
    }
    /* Before any allocation is recorded: the ring is mapped once, here (trace.h). */
    if (!trace_setup(options_current.trace_events))
        log_msg(VW_LOG_WARN, "cannot map memory for %u trace events; the report has no trace",
                options_current.trace_events);
    status_open();
    set_up = true;
    lifecycle_start();
}

bool setup_init_slow(void)
{
    /* Our own calls into CUDA or libc during set-up must not be recorded. */
    int saved = setup_depth;
    setup_depth = 1;
    pthread_once(&init_once, init_body);
    /* Set up, yet not ready: a child process whose page of `ready` the kernel zeroed (a raw
     * clone, which ran no fork handler). It starts its own life here (lifecycle.c). */
    if (set_up && !interpose_ready_now())
        lifecycle_new_process();
    setup_depth = saved;
    return interpose_ready_now();
}
