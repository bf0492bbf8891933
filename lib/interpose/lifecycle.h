/* One process's CUDA life as the library sees it (lifecycle.c): which process the recorded state
 * belongs to, and each way that life ends (exit, _exit, exec, a stop signal: signals.c). */
#ifndef VW_LIFECYCLE_H
#define VW_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>

/* Set-up's last step (setup.c): the process that owns the state from now on, the fork
 * handlers, and `ready` in a page that a child of any kind (fork, or a raw clone that runs no
 * fork handlers) gets zeroed, so its first hooked call finds the state is not its own. */
void lifecycle_start(void);
/* From set-up's slow path, when `ready` reads false after set-up was done: this is a new
 * process (a raw clone). Its copy of the parent's state goes; it starts as a fresh process. */
void lifecycle_new_process(void);
/* Whether this process is the one the recorded state belongs to: false in a vfork child
 * (which shares our memory) and in a clone that made no hooked call yet. A system call. */
bool lifecycle_is_owner(void);
/* At the first allocation (record.c): the exit handler and the stop signals' watcher. */
void lifecycle_first_alloc(void);

/* ---- stop signals (signals.c) ---- */
/* At the first allocation: a report with reason "signal" when SIGTERM or SIGINT stops the job,
 * and the live-state file's ticks (the watcher thread). False when the thread cannot start. */
bool signals_install(void);
/* At exit, before the exit report: no stop signal's report may come after it. */
void signals_exiting(void);
/* In a child: the application's dispositions back where ours stands; no watcher. */
void signals_after_fork_child(void);

#endif
