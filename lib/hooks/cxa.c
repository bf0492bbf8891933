/* The exported __cxa_throw: keeps PyTorch's out-of-memory verdict as the exception is thrown,
 * then passes every throw on to the C++ runtime unchanged.
 *
 * Why here: PyTorch's caching allocator builds its verdict (what it had allocated, what was
 * reserved but unallocated) into the message of the exception it throws from libc10_cuda.so
 * through the dynamic __cxa_throw. The exception crosses into Python and the process usually
 * dies soon after; the throw itself is the one moment we are sure to see it.
 *
 * Which type carries it depends on the release: c10::OutOfMemoryError (1.13 and later),
 * c10::CUDAOutOfMemoryError (1.5 to 1.12), a plain c10::Error whose message starts "CUDA out of
 * memory" (1.4 and before). The first two are read at every throw. A plain c10::Error is every
 * other PyTorch error too, and from 2.x on its what() builds the message and symbolises the
 * backtrace on first use (allocating, and slow): so its what() is read only once the loaded
 * libc10_cuda.so is known to name neither dedicated type, that is, only under a PyTorch whose
 * out-of-memory error can be one, where what() returns a string built at construction.
 *
 * What we rely on (Itanium C++ ABI, as libstdc++ and libc++abi implement it):
 *  - the second argument is the thrown type's std::type_info: a vtable pointer, then the
 *    mangled name, which may start with '*' (a type local to one object file);
 *  - all three types derive from c10::Error, which derives from std::exception, all single
 *    inheritance, so the object starts with its primary vtable and what() is slot 2 (after the
 *    complete and the deleting destructor), in every release;
 *  - what() is noexcept (it overrides std::exception::what), so no exception leaves it: a throw
 *    inside it is caught inside it, and our recursion flag is always cleared again. */
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "framework.h"
#include "interpose.h"

typedef void (*throw_fn)(void *, void *, void (*)(void *));
typedef const char *(*what_fn)(const void *);

VW_EXPORT __attribute__((noreturn)) void __cxa_throw(void *obj, void *tinfo, void (*dest)(void *));

/* Written once; racing first throws store the same pointer. */
static throw_fn real_throw;
/* Set while this thread reads a verdict: a throw inside what() just passes through. */
static VW_TLS int in_verdict;
/* Whether a plain c10::Error can be the caching allocator's out-of-memory error in this
 * process: -1 not known yet (no libc10_cuda.so was loaded at the last one), 0 no (its
 * libc10_cuda.so names a type of its own for it), 1 yes. Racing first looks store the same. */
static int plain_can_be_oom = -1;

struct type_info_layout {
    const void *vtable;
    const char *name;
};

static enum framework_exception exception_kind(const void *tinfo)
{
    const char *name = ((const struct type_info_layout *)tinfo)->name;
    if (VW_UNLIKELY(!name))
        return FRAMEWORK_EXC_NONE;
    if (*name == '*')
        name++;
    return framework_exception_kind(name);
}

/* Whether [p, p + n) lies inside one of the object's readable loaded segments. */
static bool in_segment(const struct dl_phdr_info *info, uintptr_t p, size_t n)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (p >= lo && n <= ph->p_memsz && p - lo <= ph->p_memsz - n)
            return true;
    }
    return false;
}

/* The object's dynamic string table (the names of the symbols it defines and uses), read in
 * place: no allocation, no loader call. */
static bool dynamic_strings(const struct dl_phdr_info *info, const char **tab, size_t *size)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_DYNAMIC)
            continue;
        const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
        uintptr_t addr = 0;
        size_t n = 0;
        for (size_t k = 0; k < ph->p_memsz / sizeof(*d) && d[k].d_tag != DT_NULL; k++) {
            if (d[k].d_tag == DT_STRTAB)
                addr = d[k].d_un.d_ptr;
            else if (d[k].d_tag == DT_STRSZ)
                n = d[k].d_un.d_val;
        }
        if (!addr || !n)
            return false;
        /* glibc relocates the entry in place where the dynamic section is writable (x86-64,
         * aarch64); where it is not, the entry is still relative to the load address. */
        if (!in_segment(info, addr, n)) {
            addr += info->dlpi_addr;
            if (!in_segment(info, addr, n))
                return false;
        }
        *tab = (const char *)addr;
        *size = n;
        return true;
    }
    return false;
}

/* 0: not libc10_cuda.so; 1: a libc10_cuda.so with a type of its own for out of memory, or one
 * we cannot read (then plain errors are never read: missing a 1.4 verdict costs less than
 * building every 2.x error's backtrace); 2: one without. */
static int classify_c10_cuda(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    const char *n = info->dlpi_name;
    if (!n || !*n || !loaded_module_is(n, "libc10_cuda."))
        return 0;
    const char *tab;
    size_t len;
    if (!dynamic_strings(info, &tab, &len))
        return 1;
    return framework_names_oom_type(tab, len) ? 1 : 2;
}

static bool plain_error_can_be_oom(void)
{
    int k = __atomic_load_n(&plain_can_be_oom, __ATOMIC_RELAXED);
    if (VW_LIKELY(k >= 0))
        return k == 1;
    /* The loader's list, walked without allocating; until libc10_cuda.so is loaded no caching
     * allocator can have thrown, and it is looked for again at the next plain error. */
    int found = dl_iterate_phdr(classify_c10_cuda, NULL);
    if (!found)
        return false;
    k = found == 2;
    __atomic_store_n(&plain_can_be_oom, k, __ATOMIC_RELAXED);
    return k == 1;
}

static void keep_verdict(const void *obj, enum framework_exception kind)
{
    /* The object's primary vtable, and what() in its slot 2. */
    void *const *vtable = *(void *const *const *)obj;
    what_fn what;
    void *slot = vtable[2];
    memcpy(&what, &slot, sizeof(what));
    const char *msg = what(obj);
    if (kind == FRAMEWORK_EXC_ERROR && !framework_plain_error_is_oom(msg))
        return; /* some other PyTorch error */
    /* On this thread's stack (4 KiB): no lock to hold, and nothing a forked child could find
     * half-written. */
    struct framework_verdict v;
    framework_parse_pytorch(msg, &v);
    v.exception = framework_exception_name(kind);
    framework_store(&v);
    /* The report on disk holds the verdict before the exception reaches anyone's handler;
     * only in a process that made device allocation calls, which alone writes reports. */
    if (core_touched())
        reporting_write("oom");
}

static throw_fn find_real(void)
{
    throw_fn f = __atomic_load_n(&real_throw, __ATOMIC_ACQUIRE);
    if (VW_LIKELY(f))
        return f;
    void *p = dlsym_real(RTLD_NEXT, "__cxa_throw");
    /* A C++ runtime loaded only in a local scope (a Python extension's dependency) is not
     * found by RTLD_NEXT, though its users' throws reach us: look for it by name. */
    if (!p)
        p = loaded_find("libstdc++.so", "__cxa_throw");
    if (!p)
        p = loaded_find("libc++abi.so", "__cxa_throw");
    memcpy(&f, &p, sizeof(f));
    __atomic_store_n(&real_throw, f, __ATOMIC_RELEASE);
    return f;
}

/* A library that carries its own copy of the C++ runtime (linked with -static-libstdc++) and was
 * loaded in a local scope: neither RTLD_NEXT nor a libstdc++ by name finds it, but the library
 * that threw has it. Not cached: another such library has its own. */
static throw_fn thrower_own_runtime(void *caller)
{
    Dl_info di;
    throw_fn f = NULL;
    if (!caller || !dladdr(caller, &di) || !di.dli_fname)
        return NULL;
    void *h = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return NULL;
    void *p = dlsym_real(h, "__cxa_throw");
    if (p && p != (void *)__cxa_throw)
        memcpy(&f, &p, sizeof(f));
    dlclose(h); /* the reference NOLOAD took; the library stays loaded */
    return f;
}

VW_EXPORT void __cxa_throw(void *obj, void *tinfo, void (*dest)(void *))
{
    /* The handler that catches it sees errno as the thrower left it, whatever a report and the
     * first lookup of the real function did. */
    int e = interpose_errno_get();
    enum framework_exception kind = tinfo ? exception_kind(tinfo) : FRAMEWORK_EXC_NONE;
    if (VW_UNLIKELY(kind != FRAMEWORK_EXC_NONE) && obj && !in_verdict && interpose_active() &&
        (kind != FRAMEWORK_EXC_ERROR || plain_error_can_be_oom())) {
        in_verdict = 1;
        keep_verdict(obj, kind);
        in_verdict = 0;
    }
    throw_fn f = find_real();
    if (VW_UNLIKELY(!f))
        f = thrower_own_runtime(__builtin_return_address(0));
    if (VW_UNLIKELY(!f))
        abort(); /* no C++ runtime anywhere, though C++ code threw: nothing can unwind it */
    interpose_errno_set(e);
    f(obj, tinfo, dest);
    /* The runtime's __cxa_throw unwinds or terminates; it never comes back. */
    __builtin_unreachable();
}
