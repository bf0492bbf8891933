/* Native stack capture for call sites.
 *
 * unw_backtrace walks with libunwind's cached fast path (no malloc, no lock of ours). Frames
 * that belong to libvramwatch itself (the shim, this file's functions) lead every walk and are
 * dropped so a call site starts at the application's call into CUDA; the walk asks for only as
 * many frames beyond those kept as there are of ours. The hooks' capture is inlined into them
 * (stack.h), so the walk starts in the hook's own frame.
 *
 * libunwind (and the liblzma it needs) is loaded at the first CUDA call, not linked: a process
 * that never touches CUDA (a shell-out, a compiler, a DataLoader worker) then maps only this
 * library, which saves about a third of a millisecond per process start. Under
 * ThreadSanitizer it is linked, for the step-by-step walk below. */
#define UNW_LOCAL_ONLY
#include "stack.h"

#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "log.h"
#include "pyframes.h"
#include "platform.h"

struct stack_walker stack_walker = { .own_frames = 8 };
#ifndef __SANITIZE_THREAD__
static int warned_unwind;
#endif

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
    uintptr_t probe = (uintptr_t)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            stack_walker.self_lo = lo;
            stack_walker.self_hi = hi;
            return 1;
        }
    }
    return 0;
}

void stack_init(void)
{
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&stack_init);
#ifndef __SANITIZE_THREAD__
    /* Kept open for the life of the process: frames are walked with it until exit. */
    int saved = errno;
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    /* Why the library's own name failed, which is what the user needs: out of descriptors
     * (EMFILE) or memory says so, not "not found" */
    char why[160] = "";
    const char *e = h ? NULL : dlerror();
    if (e)
        snprintf(why, sizeof(why), "%s", e);
    if (!h)
        h = dlopen("libunwind.so", RTLD_NOW | RTLD_LOCAL);
    if (h)
        *(void **)&stack_walker.backtrace_fn = dlsym(h, "unw_backtrace");
    if (!stack_walker.backtrace_fn)
        log_warn_once(warned_unwind, "cannot load libunwind (%s); native call stacks are off",
                      why[0] ? why : "no unw_backtrace in it");
    errno = saved;
#endif
}

/* Set in a forked child. libunwind keeps process-wide state behind its own locks (the DWARF
 * register-state cache under UNW_CACHE_GLOBAL, its default, and the sanitizer builds' walk), and
 * a parent thread that was inside a walk when another forked leaves that lock held in the
 * child, where nothing will ever release it: the child's first walk would hang. A child keeps
 * its Python frames and records no native ones. */
void stack_after_fork_child(void)
{
    stack_walker.native_off = true;
}

/* stack_walker.own_frames: how many frames inside libvramwatch lead every walk (the shim, this
 * file's functions): learned at the first walk and corrected when a walk shows more, so a walk
 * asks for only that many frames beyond what is kept. Until known, 8. */
void stack_own_frames_seen(int lead)
{
    __atomic_store_n(&stack_walker.own_frames, lead, __ATOMIC_RELAXED);
}
_Static_assert(sizeof(void *) == sizeof(uint64_t), "return addresses are copied as they are");

#ifdef __SANITIZE_THREAD__
/* Under ThreadSanitizer: unw_backtrace keeps a per-thread cache whose destructor takes a mutex
 * after the sanitizer has retired the exiting thread, which crashes its runtime. The plain
 * step-by-step walk keeps no such cache. Other builds take the fast path (stack.h). */
static int step_walk(void **ips, int want)
{
    int n = 0;
    unw_context_t uc;
    unw_cursor_t cur;
    if (unw_getcontext(&uc) == 0 && unw_init_local(&cur, &uc) == 0) {
        while (n < want && unw_step(&cur) > 0) {
            unw_word_t ip;
            if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0)
                break;
            ips[n++] = (void *)(uintptr_t)ip;
        }
    }
    return n;
}

/* Elsewhere the capture is inlined into the hook (stack.h). */
int stack_capture_all(uint64_t *out, int native_max)
{
    if (!pyframes_enabled())
        return stack_walk_with(step_walk, out, native_max);
    uint64_t nat[VW_MAX_FRAMES];
    int nn = stack_walk_with(step_walk, nat, native_max);
    return pyframes_merge(nat, nn, out, VW_MAX_FRAMES, pyframes_depth(native_max));
}
#endif
