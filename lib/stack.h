/* Native call stacks: captured with libunwind in the hook, before any lock is taken. */
#ifndef VW_STACK_H
#define VW_STACK_H

#include <stdint.h>

/* Learn the library's own address range once, so its frames can be left out. */
void stack_init(void);
/* In a forked child: native frames off for good (libunwind's locks may be held, docs/design.md). */
void stack_after_fork_child(void);
/* Fill `out` with up to `max` return addresses of the caller's stack, innermost first,
 * leaving out frames inside libvramwatch. Returns the count (0 when max is 0). */
int stack_capture(uint64_t *out, int max);
/* One call chain: native frames (at most `native_max`) with the interpreter's evaluation-loop
 * frames replaced by the Python frames they were running, innermost first; with native stacks
 * off, the Python frames alone. `out` holds VW_MAX_FRAMES entries. */
int stack_capture_all(uint64_t *out, int native_max);

#endif
