/* The status file (VRAMWATCH_STATUS): one line a watcher reads while the job runs. */
#ifndef VW_STATUS_H
#define VW_STATUS_H

#include <stdbool.h>
#include <stdint.h>

/* A status file is being written: callers test it before paying for an update. */
extern bool status_on;

/* At set-up: open the file VRAMWATCH_STATUS names, if any (one warning when it cannot be). */
void status_open(void);
/* Rewrite the line when the figures moved enough (rate limited), at once for an out-of-memory
 * `event`, whatever the limit when `force`d (at exit). No stdio, no allocation. */
void status_update(uint64_t now, bool event, bool force);
/* In a child: the file describes the parent, so the child does not write it. */
void status_after_fork_child(void);

#endif
