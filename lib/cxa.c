/* The exported __cxa_throw: keeps PyTorch's out-of-memory verdict as the exception is thrown,
 * then passes every throw on to the C++ runtime unchanged.
 *
 * Why here: PyTorch's caching allocator builds its verdict (what it had allocated, what was
 * reserved but unallocated) into the message of a c10::OutOfMemoryError and throws it from
 * libc10_cuda.so through the dynamic __cxa_throw. The exception crosses into Python and the
 * process usually dies soon after; the throw itself is the one moment we are sure to see it.
 *
 * What we rely on (Itanium C++ ABI, as libstdc++ and libc++abi implement it):
 *  - the second argument is the thrown type's std::type_info: a vtable pointer, then the
 *    mangled name, which may start with '*' (a type local to one object file);
 *  - c10::OutOfMemoryError derives from c10::Error, which derives from std::exception, all
 *    single inheritance, so the object starts with its primary vtable and what() is slot 2
 *    (after the complete and the deleting destructor);
 *  - what() is noexcept (it overrides std::exception::what), so no exception leaves it: a throw
 *    inside it is caught inside it, and our recursion flag is always cleared again. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "framework.h"
#include "interpose.h"

typedef void (*throw_fn)(void *, void *, void (*)(void *));
typedef const char *(*what_fn)(const void *);

VW_EXPORT __attribute__((noreturn)) void __cxa_throw(void *obj, void *tinfo, void (*dest)(void *));

static const char oom_type[] = "N3c1016OutOfMemoryErrorE";

/* Written once; racing first throws store the same pointer. */
static throw_fn real_throw;
/* Set while this thread reads a verdict: a throw inside what() just passes through. */
static VW_TLS int in_verdict;

struct type_info_layout {
    const void *vtable;
    const char *name;
};

static bool is_oom_type(const void *tinfo)
{
    const char *name = ((const struct type_info_layout *)tinfo)->name;
    if (VW_UNLIKELY(!name))
        return false;
    if (*name == '*')
        name++;
    return strcmp(name, oom_type) == 0;
}

static void keep_verdict(const void *obj)
{
    /* The object's primary vtable, and what() in its slot 2. */
    void *const *vtable = *(void *const *const *)obj;
    what_fn what;
    void *slot = vtable[2];
    memcpy(&what, &slot, sizeof(what));
    const char *msg = what(obj);
    /* On this thread's stack (4 KiB): no lock to hold, and nothing a forked child could find
     * half-written. */
    struct framework_verdict v;
    framework_parse_pytorch(msg, &v);
    framework_store(&v);
    /* The report on disk holds the verdict before the exception reaches anyone's handler;
     * only in a process that made device allocation calls, which alone writes reports. */
    if (core_touched())
        vw_write_report("oom");
}

static throw_fn find_real(void)
{
    throw_fn f = __atomic_load_n(&real_throw, __ATOMIC_ACQUIRE);
    if (VW_LIKELY(f))
        return f;
    void *p = vw_real_dlsym(RTLD_NEXT, "__cxa_throw");
    /* A C++ runtime loaded only in a local scope (a Python extension's dependency) is not
     * found by RTLD_NEXT, though its users' throws reach us: look for it by name. */
    if (!p)
        p = vw_find_loaded("libstdc++.so", "__cxa_throw");
    if (!p)
        p = vw_find_loaded("libc++abi.so", "__cxa_throw");
    memcpy(&f, &p, sizeof(f));
    __atomic_store_n(&real_throw, f, __ATOMIC_RELEASE);
    return f;
}

VW_EXPORT void __cxa_throw(void *obj, void *tinfo, void (*dest)(void *))
{
    if (VW_UNLIKELY(tinfo && is_oom_type(tinfo)) && obj && !in_verdict && vw_active()) {
        in_verdict = 1;
        keep_verdict(obj);
        in_verdict = 0;
    }
    throw_fn f = find_real();
    if (VW_UNLIKELY(!f))
        abort(); /* C++ code is running, so a C++ runtime is loaded: not reached */
    f(obj, tinfo, dest);
    /* The runtime's __cxa_throw unwinds or terminates; it never comes back. */
    __builtin_unreachable();
}
