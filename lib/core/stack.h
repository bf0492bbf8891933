/* Native call stacks: captured with libunwind in the hook, before any lock is taken. */
#ifndef VW_STACK_H
#define VW_STACK_H

#include <stdint.h>

/* Learn the library's own address range once, so its frames can be left out. */
void stack_init(void);
/* In a forked child: native frames off for good (libunwind's locks may be held, docs/design.md). */
void stack_after_fork_child(void);
/* A walk found `lead` frames of ours leading (not the number expected): remember it. */
void stack_own_frames_seen(int lead);
#include <stdbool.h>
#include <string.h>

#include "core.h"
#include "pyframes.h"

/* What the walk needs, set by stack.c; read here so that the capture is inlined into the hook
 * itself: the walk then starts in the hook's frame, and there is one frame of ours fewer to walk
 * (about 85 instructions each). `own_frames`: how many frames inside libvramwatch lead every
 * walk, learned at the first walk and corrected when a walk shows more (8 until known). */
struct stack_walker {
    uintptr_t self_lo, self_hi;
    int (*backtrace_fn)(void **, int);
    int own_frames;
    bool native_off; /* in a forked child */
};
extern struct stack_walker stack_walker;

/* The one capture: walk with `walk` (libunwind's fast unw_backtrace in the hook below, the
 * step-by-step walk under ThreadSanitizer in stack.c), asking for `max` frames beyond our own,
 * and drop ours. */
static inline __attribute__((always_inline)) int stack_walk_with(int (*walk)(void **, int),
                                                                 uint64_t *out, int max)
{
    if (max <= 0 || stack_walker.native_off || !walk)
        return 0;
    void *ips[VW_MAX_FRAMES + 8];
    const int cap = (int)(sizeof(ips) / sizeof(ips[0]));
    int skip = __atomic_load_n(&stack_walker.own_frames, __ATOMIC_RELAXED);
    int want = max + skip > cap ? cap : max + skip;
    int n = walk(ips, want);
    /* Our own frames come first, and only first: the library calls no application code while a
     * hook is capturing, so no frame of ours lies further out. They are dropped once, here. */
    uintptr_t lo = stack_walker.self_lo, span = stack_walker.self_hi - lo;
    int lead = 0;
    while (lead < n && (uintptr_t)ips[lead] - lo < span)
        lead++;
    if (__builtin_expect(lead != skip, 0)) {
        stack_own_frames_seen(lead);
        if (lead > skip && n == want) {
            /* More of ours than expected: this walk stopped short of `max` kept frames. */
            want = max + lead > cap ? cap : max + lead;
            n = walk(ips, want);
        }
    }
    int k = n - lead < max ? n - lead : max;
    if (k <= 0)
        return 0;
    memcpy(out, &ips[lead], sizeof(*out) * (size_t)k);
    return k;
}

/* stack_capture_all(out, native_max): one call chain: native frames (at most `native_max`) with
 * the interpreter's evaluation-loop frames replaced by the Python frames they were running,
 * innermost first; with native stacks off, the Python frames alone. `out` holds VW_MAX_FRAMES
 * entries. */
#ifdef __SANITIZE_THREAD__
int stack_capture_all(uint64_t *out, int native_max);
#else
static inline __attribute__((always_inline)) int stack_walk_inline(uint64_t *out, int max)
{
    return stack_walk_with(__atomic_load_n(&stack_walker.backtrace_fn, __ATOMIC_RELAXED), out, max);
}

static inline __attribute__((always_inline)) int stack_capture_all(uint64_t *out, int native_max)
{
    if (__builtin_expect(pyframes_enabled(), 0)) {
        /* Python frames first: they say how far down the native walk must go (pyframes.h). */
        struct py_capture pc;
        pyframes_begin(&pc, native_max);
        uint64_t nat[VW_MAX_FRAMES];
        int k;
        /* Twice at most: the short walk that did not reach the outermost run, then in full. */
        while ((k = pyframes_finish(&pc, nat, stack_walk_inline(nat, pc.want), out,
                                    VW_MAX_FRAMES)) < 0)
            ;
        return k;
    }
    if (native_max <= 0)
        return 0; /* stacks off: nothing to walk */
    return stack_walk_inline(out, native_max);
}
#endif

#endif
