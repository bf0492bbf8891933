/* vramwatch public API: markers and on-demand reports, exported by libvramwatch.so.
 *
 * Callable from C, or from Python through ctypes.CDLL(None) when the library is preloaded.
 * Every function is safe to call from any thread and never ends the process. */
#ifndef VRAMWATCH_VRAMWATCH_H
#define VRAMWATCH_VRAMWATCH_H

#ifdef __cplusplus
extern "C" {
#endif

#define VRAMWATCH_VERSION_STRING "0.1.0"

/* Put a named marker on the timeline ("epoch 3", "validation"). Returns 0, or -1 when the
 * library is disabled or the label is NULL. */
int vramwatch_mark(const char *label);

/* Say that a training step ended (after the optimizer's step): the report keeps, per device, how
 * many steps ended, the live memory at the last one, and the most live memory from the start of
 * its phase to it, so that a run that fails in a step after steps that completed tells the
 * advice what those steps needed. The PyTorch companion calls it after every optimizer step.
 * Cheap (one lock of the devices' figures, nothing allocated); returns 0, or -1 when the library
 * is disabled. */
int vramwatch_step(void);

/* Say whether this program calls vramwatch_step after every training step (`on` 1; 0 takes it
 * back). The report then says so (process.steps_reported), and a run that failed before its
 * first step ended is known to have completed none, rather than to have said nothing: the advice
 * then does not guess completed steps from pauses in the timeline. The PyTorch companion says so
 * once it has hooked the optimizers' steps. Returns 0, or -1 when the library is disabled. */
int vramwatch_step_reporting(int on);

/* Write a report now. `reason` becomes the report's reason when it is one of the allowed
 * words ("oom", "exit", "request", "signal"), else "request". A "request" dump is also kept in a
 * file of its own, vramwatch-HOST-PID-request-N.json (N from 1, one per dump), which later
 * reports never replace (docs/report-format.md). Returns 0 when the report was written, -1
 * otherwise (disabled, or the folder is not writable: a warning says why). */
int vramwatch_dump(const char *reason);

/* Say whether this process's device allocator releases what it caches and retries once when an
 * allocation fails, as PyTorch's caching allocator does (found by itself for PyTorch; a custom
 * allocator, or the project's simulated job, says so here). Under VRAMWATCH_LIMIT_MODE=observe
 * such a process gets the small card's answer to the allocation that crosses the limit (one
 * failure, so that it flushes its cache) and the retry goes through: the run then measures what
 * the job needs on a card just large enough. `retries` 0 takes it back. Returns 0, or -1 when
 * the library is disabled. */
int vramwatch_allocator_retries(int retries);
/* The library's version, e.g. "0.1.0". */
const char *vramwatch_version(void);

#ifdef __cplusplus
}
#endif

#endif
