/* Lazy set-up at the first hooked call (options, the core, the status file); the process's life
 * from then on, forks included, is lifecycle.c's. */
#include "interpose.h"

#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "demangle.h"
#include "devinfo.h"
#include "driver.h"
#include "framework.h"
#include "lifecycle.h"
#include "live.h"
#include "log.h"
#include "pyframes.h"
#include "report.h"
#include "status.h"

VW_TLS int vw_depth;

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
        vw_opt.disable = true;
        return;
    }
    options_load();
    if (!vw_opt.dir[0] && !getcwd(vw_opt.dir, sizeof(vw_opt.dir)))
        strcpy(vw_opt.dir, ".");
    if (vw_opt.disable)
        return;
    for (int i = 0; i < VW_MAX_DEVICES; i++)
        if (vw_opt.limit_share[i] > 0) {
            vw_limits = true;
            vw_log(VW_LOG_INFO, "device %d behaves as a card of %.1f%% of its memory (%s)", i,
                   vw_opt.limit_share[i] * 100, vw_opt.observe ? "observe" : "enforce");
        } else if (vw_opt.limit[i]) {
            vw_limits = true;
            vw_log(VW_LOG_INFO, "device %d behaves as a card of %llu bytes (%s)", i,
                   (unsigned long long)vw_opt.limit[i], vw_opt.observe ? "observe" : "enforce");
        }
    stack_init();
    vw_demangle_lookup();
    pyframes_init();
    if (!core_init()) {
        vw_warn_once(warned_init, "cannot map memory for the tables; recording is off");
        return;
    }
    vw_status_open();
    set_up = true;
    vw_lifecycle_start();
}

bool vw_init_slow(void)
{
    /* Our own calls into CUDA or libc during set-up must not be recorded. */
    int saved = vw_depth;
    vw_depth = 1;
    pthread_once(&init_once, init_body);
    /* Set up, yet not ready: a child process whose page of `ready` the kernel zeroed (a raw
     * clone, which ran no fork handler). It starts its own life here (lifecycle.c). */
    if (set_up && !vw_ready_now())
        vw_lifecycle_new_process();
    vw_depth = saved;
    return vw_ready_now();
}
