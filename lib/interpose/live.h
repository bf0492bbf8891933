/* The live-state file that `vramwatch top` reads (layout: livefile.h). */
#ifndef VW_LIVE_H
#define VW_LIVE_H

#include <stdbool.h>

/* From the watcher thread (signals.c), once at its start and then every VW_LIVE_INTERVAL_MS:
 * creates the file at the first call, then brings it up to date. Never on the hook path. */
#define VW_LIVE_INTERVAL_MS 1000
void live_tick(void);
/* At exit: the file goes, and none is made after. */
void live_remove(void);
/* Files may be made again (the process's first allocation, an exec that failed). */
void live_resume(void);
/* In a child: the parent's file is not touched; none of its own until it allocates. */
void live_after_fork_child(void);

#endif
