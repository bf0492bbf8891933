/* A report written now: at an out-of-memory failure, at exit, on a signal or at the
 * application's request. The core's snapshot and the device facts (devinfo.c) are taken with
 * our own driver queries unrecorded, and the report writer (report.c) writes them out. */
#include "interpose.h"
#include "reporting.h"

#include <pthread.h>
#include <stdlib.h>

#include "devinfo.h"
#include "report.h"

/* Serialises report gathering: it guards the device facts' table below. */
static pthread_mutex_t info_lock = PTHREAD_MUTEX_INITIALIZER;

void reporting_after_fork_child(void)
{
    pthread_mutex_init(&info_lock, NULL);
}

int reporting_write(const char *reason)
{
    static struct report_devinfo info[VW_MAX_DEVICES + 1]; /* under info_lock */
    struct core_snapshot *snap = malloc(sizeof(*snap));
    if (!snap)
        return -1;
    int saved = setup_depth;
    setup_depth = 1; /* our queries go to the real driver unrecorded */
    core_snapshot(snap);
    pthread_mutex_lock(&info_lock);
    devinfo_gather(reason, snap, info);
    int rc = report_write(reason, info);
    pthread_mutex_unlock(&info_lock);
    setup_depth = saved;
    free(snap);
    return rc;
}
