/* The status file (VRAMWATCH_STATUS): one line a watcher reads while the job runs. */
#ifndef VW_STATUS_H
#define VW_STATUS_H

#include <stdbool.h>
#include <stdint.h>

/* The open status file, or -1: callers test it before paying for an update. */
extern int vw_status_fd;

/* At set-up: open the file VRAMWATCH_STATUS names, if any (one warning when it cannot be). */
void vw_status_open(void);
/* Rewrite the line when the figures moved enough (rate limited), at once for an out-of-memory
 * `event`, whatever the limit when `force`d (at exit). No stdio, no allocation. */
void vw_status_update(uint64_t now, bool event, bool force);
/* In a forked child: the file describes the parent, so the child closes it. */
void vw_status_after_fork_child(void);

#endif
