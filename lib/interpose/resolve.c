/* Symbol resolution: the hook table generated from hooks.def, and the rules by which dlsym,
 * cuGetProcAddress and cudaGetDriverEntryPoint lookups are answered with our shims.
 *
 * Facts this rests on (see docs/design.md): libcudart finds libcuda with dlopen + dlsym of
 * cuGetProcAddress_v2 and then resolves every driver function through the pointer that lookup
 * returns, so the global driver symbols alone would see none of the runtime's calls. We hand
 * out our own shims from dlsym and from every cuGetProcAddress / cudaGetDriverEntryPoint
 * lookup, keep the real pointer per shim, and count each allocation once, at the outermost
 * hooked call on the thread. */
#include "interpose.h"

#include <dlfcn.h>
#include <string.h>

#include "driver.h"
#include "loaded.h"
#include "log.h"

struct vw_real_fns resolve_real;

struct hook {
    const char *name;
    const char *module; /* the library it must live in, by file name prefix */
    const char *base;   /* driver: the name cuGetProcAddress knows it by; others: NULL */
    int since;
    int stream;
    void *shim;
    void **real;
    uintptr_t owner; /* load address of the library the real function lives in */
};

static struct hook hooks[VW_HOOK_COUNT] = {
#define VW_RT(name, ret, params) \
    { #name, "libcudart.", NULL, 0, VW_ANY, (void *)name, (void **)&resolve_real.name, 0 },
#define VW_NVML(name, ret, params) \
    { #name, "libnvidia-ml.", NULL, 0, VW_ANY, (void *)name, (void **)&resolve_real.name, 0 },
#define VW_DRV(name, base, since, stream, ret, params) \
    { #name, "libcuda.", base, since, stream, (void *)name, (void **)&resolve_real.name, 0 },
#include "hooks.def"
#undef VW_RT
#undef VW_NVML
#undef VW_DRV
};

static int warned_copies;

static bool in_self(const void *p)
{
    static void *self_base;
    Dl_info di;
    if (!self_base && dladdr((void *)&in_self, &di))
        self_base = di.dli_fbase;
    return dladdr(p, &di) && di.dli_fbase == self_base;
}

/* Accept `p` as the real function of hook `id`, or refuse it when another copy of the same
 * library already owns the slot (the shim could only forward to one of them). */
static bool adopt(int id, void *p, const Dl_info *di)
{
    struct hook *h = &hooks[id];
    uintptr_t owner = (uintptr_t)di->dli_fbase;
    void *cur = __atomic_load_n(h->real, __ATOMIC_ACQUIRE);
    if (!cur) {
        __atomic_store_n(&h->owner, owner, __ATOMIC_RELAXED);
        __atomic_store_n(h->real, p, __ATOMIC_RELEASE);
        return true;
    }
    uintptr_t have = __atomic_load_n(&h->owner, __ATOMIC_RELAXED);
    if (have == owner || have == 0) {
        __atomic_store_n(&h->owner, owner, __ATOMIC_RELAXED);
        return true;
    }
    /* The library the slot came from was dlclose'd and this is it loaded again (elsewhere):
     * not a second copy. Follow the new one; the old pointer leads into unmapped memory. */
    Dl_info old;
    if (!dladdr(cur, &old) || (uintptr_t)old.dli_fbase != have) {
        __atomic_store_n(&h->owner, owner, __ATOMIC_RELAXED);
        __atomic_store_n(h->real, p, __ATOMIC_RELEASE);
        return true;
    }
    log_warn_once(warned_copies,
                  "a second copy of a CUDA library (%s) is in this process; calls "
                  "through it are passed on unrecorded",
                  di->dli_fname ? di->dli_fname : "?");
    return false;
}

static void *resolve(int id)
{
    struct hook *h = &hooks[id];
    void *p = dlsym_real(RTLD_NEXT, h->name);
    if (!p)
        p = loaded_find(h->module, h->name);
    if (!p)
        return NULL;
    Dl_info di;
    if (!dladdr(p, &di))
        memset(&di, 0, sizeof(di));
    adopt(id, p, &di); /* the slot may have been filled meanwhile: use whatever it holds */
    return __atomic_load_n(h->real, __ATOMIC_ACQUIRE);
}

void *resolve_hook(int id)
{
    /* Before the real function is called: the lookups (dlsym, dladdr, the loaded libraries'
     * list) must not leave the caller a different errno. */
    int e = interpose_errno_get();
    void *p = resolve(id);
    interpose_errno_set(e);
    return p;
}

static int hook_by_name(const char *name)
{
    /* About fifty names: a linear scan that compares the third character first is cheap,
     * and dlsym is nowhere near a hot path for CUDA names. */
    for (int i = 0; i < VW_HOOK_COUNT; i++)
        if (hooks[i].name[2] == name[2] && strcmp(hooks[i].name, name) == 0)
            return i;
    return -1;
}

static int hook_by_request(const char *symbol, int version, uint64_t flags)
{
    int best = -1;
    bool ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    for (int i = 0; i < VW_HOOK_COUNT; i++) {
        const struct hook *h = &hooks[i];
        if (!h->base || strcmp(h->base, symbol) != 0 || h->since > version)
            continue;
        if ((h->stream == VW_PTSZ && !ptsz) || (h->stream == VW_LEGACY && ptsz))
            continue;
        if (best < 0 || h->since > hooks[best].since)
            best = i;
    }
    return best;
}

void *resolve_wrap_proc(const char *symbol, int version, uint64_t flags, void *p)
{
    if (!p || !symbol || !interpose_active() || in_self(p))
        return p;
    Dl_info di;
    if (!dladdr(p, &di) || !loaded_module_is(di.dli_fname, "libcuda."))
        return p;
    driver_hint();
    int id = -1;
    /* An exported function at exactly this address names itself; trust that over our reading
     * of the version and flag rules. */
    if (di.dli_sname && di.dli_saddr == p) {
        id = hook_by_name(di.dli_sname);
        if (id >= 0 && (!hooks[id].base || strcmp(hooks[id].base, symbol) != 0))
            id = -1;
    }
    if (id < 0)
        id = hook_by_request(symbol, version, flags);
    if (id < 0 || !adopt(id, p, &di))
        return p;
    return hooks[id].shim;
}

/* Called by the dlsym entry stub for every handle except RTLD_NEXT. */
void *resolve_dlsym(void *handle, const char *name);
static void *wrap_dlsym_result(const char *name, void *p);
VW_NO_SANITIZE void *resolve_dlsym(void *handle, const char *name)
{
    void *p = dlsym_real(handle, name);
    if (!p || !name || !((name[0] == 'c' && name[1] == 'u') || (name[0] == 'n' && name[1] == 'v')))
        return p;
    /* errno as the real dlsym left it, whatever the checks do (dladdr, dlopen, set-up). */
    int e = interpose_errno_get();
    if (name[0] == 'c')
        driver_hint();
    p = wrap_dlsym_result(name, p);
    interpose_errno_set(e);
    return p;
}

/* The lookup found our own exported function (the global scope, RTLD_DEFAULT, or a handle
 * whose scope includes us). Without the preload it would have found the real function or
 * nothing; answer nothing when there is no real one, as for a program probing whether a CUDA
 * library is loaded, or looking again after it dlclose'd the library (whose function the slot
 * may still hold: that pointer is dropped, so no call can reach unmapped memory through it). */
static void *own_export(int id, void *p)
{
    struct hook *h = &hooks[id];
    void *cur = __atomic_load_n(h->real, __ATOMIC_ACQUIRE);
    Dl_info di;
    if (cur && (!dladdr(cur, &di) ||
                (uintptr_t)di.dli_fbase != __atomic_load_n(&h->owner, __ATOMIC_RELAXED))) {
        __atomic_store_n(h->real, NULL, __ATOMIC_RELEASE);
        __atomic_store_n(&h->owner, 0, __ATOMIC_RELAXED);
    }
    void *real = resolve_hook(id);
    if (!real)
        return NULL;
    /* glibc makes the library a lookup by name found the function in undeletable when the
     * caller cannot be unloaded (the program), so the pointer stays good after dlclose. The
     * lookup found us instead: pin the real function's library the same way. */
    if (dladdr(real, &di) && di.dli_fname) {
        void *lib = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
        if (lib)
            dlclose(lib); /* the reference NOLOAD took; the library stays, as NODELETE */
    }
    return p;
}

/* Only reached for CUDA names, long after any sanitizer runtime has started. */
static void *wrap_dlsym_result(const char *name, void *p)
{
    int id = hook_by_name(name);
    if (id < 0)
        return p;
    if (in_self(p))
        return own_export(id, p);
    if (!interpose_active())
        return p;
    Dl_info di;
    if (!dladdr(p, &di) || !loaded_module_is(di.dli_fname, hooks[id].module))
        return p;
    return adopt(id, p, &di) ? hooks[id].shim : p;
}
