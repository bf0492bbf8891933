/* Interposition machinery: the hook table generated from hooks.def, lazy set-up, the dlsym and
 * cuGetProcAddress wrapping rules, and the driver queries made for reports.
 *
 * Facts this rests on (see docs/design.md): libcudart finds libcuda with dlopen + dlsym of
 * cuGetProcAddress_v2 and then resolves every driver function through the pointer that lookup
 * returns, so the global driver symbols alone would see none of the runtime's calls. We hand
 * out our own shims from dlsym and from every cuGetProcAddress / cudaGetDriverEntryPoint
 * lookup, keep the real pointer per shim, and count each allocation once, at the outermost
 * hooked call on the thread. */
#include "interpose.h"
#include "nvml_procs.h"

#include <dlfcn.h>
#include <sys/auxv.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errnames.h"
#include "framework.h"
#include "pyframes.h"
#include "log.h"
#include "report.h"
#include "safefile.h"

struct vw_real_fns vw_real;
VW_TLS int vw_depth;
bool vw_ready;
bool vw_limits;

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
    { #name, "libcudart.", NULL, 0, VW_ANY, (void *)name, (void **)&vw_real.name, 0 },
#define VW_NVML(name, ret, params) \
    { #name, "libnvidia-ml.", NULL, 0, VW_ANY, (void *)name, (void **)&vw_real.name, 0 },
#define VW_DRV(name, base, since, stream, ret, params) \
    { #name, "libcuda.", base, since, stream, (void *)name, (void **)&vw_real.name, 0 },
#include "hooks.def"
#undef VW_RT
#undef VW_NVML
#undef VW_DRV
};

/* Real driver functions used for our own queries; never handed to the application. */
static bool drv_resolve(void);
static void drv_hint(void);
static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
    bool tried_ok;
    unsigned attempts;
    unsigned hint, hint_tried; /* driver lookups seen; the count at the last failed resolve */
    CUresult (*ctx_get_device)(CUdevice *);
    CUresult (*mem_get_info)(size_t *, size_t *);
    CUresult (*device_total_mem)(size_t *, CUdevice);
    CUresult (*device_get_name)(char *, int, CUdevice);
    CUresult (*device_get_pci)(char *, int, CUdevice);
    CUresult (*device_get_uuid)(CUuuid *, CUdevice);
    CUresult (*pool_get_attr)(CUmemoryPool, CUmemPool_attribute, void *);
    CUresult (*device_get_mem_pool)(CUmemoryPool *, CUdevice);
    CUresult (*device_get_default_pool)(CUmemoryPool *, CUdevice);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*primary_get_state)(CUdevice, unsigned int *, int *);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*primary_release)(CUdevice);
} drv;

static int warned_copies, warned_init;
static bool exit_registered;
/* Serialises report gathering. */
static pthread_mutex_t info_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---------- the status file (VRAMWATCH_STATUS) ----------
 * One line, rewritten in place with fixed-width fields, so a watcher (vramwatch fit) can tell
 * while a trial runs whether its memory still grows:
 *   vramwatch-status peak_live_bytes=... live_bytes=... time_unix_ns=... oom=0|1
 * Written when the peak grew, at most every 100 ms, at every out-of-memory failure and at exit:
 * a pwrite from the hook, no stdio and no allocation.
 * The path is the user's, and the library often runs as root: its folder is walked like the
 * report folder, and only a regular file of ours (or a new one, 0600) is ever opened, written or
 * chmod'ed, never a FIFO (that would hang the job), a device (/dev/null made 0600 for everyone)
 * or another user's file (safefile.c). Anything else costs the status file, with one warning;
 * the job runs on. */

static int status_fd = -1;
static uint64_t status_last_ns, status_written_peak, status_written_flushes, status_written_finals;
static uint64_t status_written_sites;
static pthread_mutex_t status_lock = PTHREAD_MUTEX_INITIALIZER;

/* Plain decimal: a shell reads a zero-padded number as octal. */
static char *put_field(char *p, const char *key, uint64_t v)
{
    size_t k = strlen(key);
    memcpy(p, key, k);
    p += k;
    char digits[20];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = digits[--n];
    return p;
}

static void status_open(void)
{
    if (!vw_opt.status[0])
        return;
    char why[256];
    status_fd = safefile_open_private(vw_opt.status, why, sizeof(why));
    if (status_fd < 0)
        vw_log(VW_LOG_WARN, "not writing the status file %s: %s", vw_opt.status, why);
}

/* Growth that is written at once, whatever the rate limit: a caching allocator asks for all its
 * segments in the first step and then never again, so a skipped update would never come. */
static uint64_t step_of(uint64_t written)
{
    uint64_t pct = written / 100;
    return pct > (64ull << 20) ? pct : (64ull << 20);
}

/* oom=1 once a failure is final (its retry failed, or none came); pressure counts the cache
 * flushes a retry rescued, which are not failures. The line is padded with spaces to the length
 * it had, since numbers no longer have a fixed width, and the file is only ever rewritten in
 * place (a reader may be reading it). */
static void status_update(uint64_t now, bool event, bool force)
{
    uint64_t peak = core_peak_any(), finals, flushes;
    core_pressure(&finals, &flushes);
    uint64_t sites = core_callsites_count();
    if (!event && !force && flushes == __atomic_load_n(&status_written_flushes, __ATOMIC_RELAXED) &&
        finals == __atomic_load_n(&status_written_finals, __ATOMIC_RELAXED) &&
        ((peak <= status_written_peak &&
          sites == __atomic_load_n(&status_written_sites, __ATOMIC_RELAXED)) ||
         (now - status_last_ns < 100000000ull &&
          peak < status_written_peak + step_of(status_written_peak))))
        return;
    if (pthread_mutex_trylock(&status_lock) != 0)
        return; /* another thread is writing it: its figures are as good */
    static size_t longest;
    char line[200], *p = line;
    memcpy(p, "vramwatch-status", 16);
    p += 16;
    p = put_field(p, " peak_live_bytes=", peak);
    p = put_field(p, " live_bytes=", core_live_total());
    p = put_field(p, " time_unix_ns=", now);
    p = put_field(p, " oom=", finals ? 1 : 0);
    p = put_field(p, " pressure=", flushes);
    p = put_field(p, " sites=", sites);
    while ((size_t)(p - line) + 1 < longest && p < line + sizeof(line) - 1)
        *p++ = ' ';
    *p++ = '\n';
    if ((size_t)(p - line) > longest)
        longest = (size_t)(p - line);
    ssize_t w = pwrite(status_fd, line, (size_t)(p - line), 0);
    (void)w;
    status_written_peak = peak;
    __atomic_store_n(&status_written_flushes, flushes, __ATOMIC_RELAXED);
    __atomic_store_n(&status_written_finals, finals, __ATOMIC_RELAXED);
    __atomic_store_n(&status_written_sites, sites, __ATOMIC_RELAXED);
    status_last_ns = now;
    pthread_mutex_unlock(&status_lock);
}

/* ---------- set-up ---------- */

static void on_exit_report(void);

/* Across fork() the core's lock is held (it is never held while calling into CUDA, so no
 * driver lock can be ordered against it); the child unlocks its copy and forgets the parent's
 * allocations. The report locks are not taken here: a report holds them while it calls the
 * driver, whose own fork handlers may hold the driver's locks. A child forked while another
 * thread was writing a report gets them re-initialised instead (the writer is not in the child). */
static void fork_prepare(void)
{
    core_lock_for_fork();
}

static void fork_parent(void)
{
    core_unlock_after_fork(false);
}

static void fork_child(void)
{
    core_unlock_after_fork(true);
    stack_after_fork_child();
    report_after_fork_child();
    framework_reset();
    pthread_mutex_init(&info_lock, NULL);
    pthread_mutex_init(&drv_lock, NULL);
    pthread_mutex_init(&status_lock, NULL);
    status_written_peak = 0;
    status_written_flushes = status_written_finals = status_written_sites = 0;
    if (status_fd >= 0) {
        close(status_fd); /* the file describes the parent, which keeps writing it */
        status_fd = -1;
    }
    vw_depth = 0;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_body(void)
{
    /* A setuid or setgid program (or one that gained capabilities) runs with privileges its
     * caller does not have: LD_PRELOAD reaching it at all means the loader was told to trust us,
     * but nothing the caller controls (VRAMWATCH_DIR, the log level) may steer what such a
     * program writes. Pure pass-through: no variable read, nothing recorded, nothing written. */
    if (getauxval(AT_SECURE)) {
        vw_opt.disable = true;
        return;
    }
    options_load();
    if (!vw_opt.dir[0] && !getcwd(vw_opt.dir, sizeof(vw_opt.dir)))
        strcpy(vw_opt.dir, ".");
    if (vw_opt.disable)
        return;
    for (int i = 0; i < VW_MAX_DEVICES; i++)
        if (vw_opt.limit_share[i] > 0) {
            vw_limits = true;
            vw_log(VW_LOG_INFO, "device %d behaves as a card of %.1f%% of its memory (%s)", i,
                   vw_opt.limit_share[i] * 100, vw_opt.observe ? "observe" : "enforce");
        } else if (vw_opt.limit[i]) {
            vw_limits = true;
            vw_log(VW_LOG_INFO, "device %d behaves as a card of %llu bytes (%s)", i,
                   (unsigned long long)vw_opt.limit[i], vw_opt.observe ? "observe" : "enforce");
        }
    stack_init();
    pyframes_init();
    if (!core_init()) {
        vw_warn_once(warned_init, "cannot map memory for the tables; recording is off");
        return;
    }
    status_open();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    __atomic_store_n(&vw_ready, true, __ATOMIC_RELEASE);
}

bool vw_init_slow(void)
{
    /* Our own calls into CUDA or libc during set-up must not be recorded. */
    int saved = vw_depth;
    vw_depth = 1;
    pthread_once(&init_once, init_body);
    vw_depth = saved;
    return __atomic_load_n(&vw_ready, __ATOMIC_ACQUIRE);
}

/* ---------- finding real functions ---------- */

static bool in_self(const void *p)
{
    static void *self_base;
    Dl_info di;
    if (!self_base && dladdr((void *)&in_self, &di))
        self_base = di.dli_fbase;
    return dladdr(p, &di) && di.dli_fbase == self_base;
}

/* Whether the file name of `path` starts with `prefix`. When the prefix is a library's name
 * and a dot ("libcudart."), a '-' stands for the dot too: wheels bundle renamed copies
 * (PyTorch's torch/lib/libcudart-<hash>.so.12), which are the same library and must be
 * followed the same way. */
bool vw_module_is(const char *path, const char *prefix)
{
    if (!path)
        return false;
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(prefix);
    if (n && prefix[n - 1] == '.')
        return strncmp(b, prefix, n - 1) == 0 && (b[n - 1] == '.' || b[n - 1] == '-');
    return strncmp(b, prefix, n) == 0;
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
    vw_warn_once(warned_copies,
                 "a second copy of a CUDA library (%s) is in this process; calls "
                 "through it are passed on unrecorded",
                 di->dli_fname ? di->dli_fname : "?");
    return false;
}

static void *libcuda_handle(void)
{
    /* Only a libcuda that is already loaded: loading the driver ourselves would be a side
     * effect the application did not ask for. */
    return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
}

struct find_ctx {
    const char *prefix;
    const void *self_base;
    char path[PATH_MAX];
};

static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct find_ctx *c = arg;
    (void)size;
    if (!info->dlpi_name || !info->dlpi_name[0] || !vw_module_is(info->dlpi_name, c->prefix))
        return 0;
    snprintf(c->path, sizeof(c->path), "%s", info->dlpi_name);
    return 1;
}

void *vw_find_loaded(const char *module_prefix, const char *symbol)
{
    /* Libraries loaded with RTLD_LOCAL (a Python extension module's dependencies, a plugin)
     * are not in the global scope that RTLD_NEXT searches, yet their callers bind to our
     * exported symbols, which come first. Find the loaded module by file name, then the
     * symbol in it; the path is copied out so dlopen runs outside dl_iterate_phdr. */
    struct find_ctx c = { .prefix = module_prefix };
    if (!dl_iterate_phdr(find_module, &c))
        return NULL;
    void *lib = dlopen(c.path, RTLD_LAZY | RTLD_NOLOAD);
    if (!lib)
        return NULL;
    void *p = vw_real_dlsym(lib, symbol);
    dlclose(lib); /* still loaded: whoever loaded it holds it */
    return p;
}

void *vw_resolve(int id)
{
    struct hook *h = &hooks[id];
    void *p = vw_real_dlsym(RTLD_NEXT, h->name);
    if (!p)
        p = vw_find_loaded(h->module, h->name);
    if (!p)
        return NULL;
    Dl_info di;
    if (!dladdr(p, &di))
        memset(&di, 0, sizeof(di));
    adopt(id, p, &di); /* the slot may have been filled meanwhile: use whatever it holds */
    return __atomic_load_n(h->real, __ATOMIC_ACQUIRE);
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

void *vw_wrap_proc(const char *symbol, int version, uint64_t flags, void *p)
{
    if (!p || !symbol || !vw_active() || in_self(p))
        return p;
    Dl_info di;
    if (!dladdr(p, &di) || !vw_module_is(di.dli_fname, "libcuda."))
        return p;
    if (!__atomic_load_n(&drv.tried_ok, __ATOMIC_ACQUIRE))
        drv_hint();
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
void *vw_dlsym_impl(void *handle, const char *name);
static void *wrap_dlsym_result(const char *name, void *p);
VW_NO_SANITIZE void *vw_dlsym_impl(void *handle, const char *name)
{
    void *p = vw_real_dlsym(handle, name);
    if (!p || !name || !((name[0] == 'c' && name[1] == 'u') || (name[0] == 'n' && name[1] == 'v')))
        return p;
    if (name[0] == 'c' && !__atomic_load_n(&drv.tried_ok, __ATOMIC_ACQUIRE))
        drv_hint();
    return wrap_dlsym_result(name, p);
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
    void *real = vw_resolve(id);
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
    if (!vw_active())
        return p;
    Dl_info di;
    if (!dladdr(p, &di) || !vw_module_is(di.dli_fname, hooks[id].module))
        return p;
    return adopt(id, p, &di) ? hooks[id].shim : p;
}

/* ---------- driver queries ---------- */

/* The runtime (or JAX, or a program of its own) is looking driver functions up: libcuda is
 * loaded now, so the next drv_ready() must try, whoever asks. */
static void drv_hint(void)
{
    __atomic_fetch_add(&drv.hint, 1, __ATOMIC_RELEASE);
}

static bool drv_ready(void)
{
    if (__atomic_load_n(&drv.tried_ok, __ATOMIC_ACQUIRE))
        return true;
    /* Before the application has loaded libcuda there is nothing to ask: try again when a
     * driver lookup has been seen since the last try, else now and then rather than on every
     * call. Every caller that is due waits on the lock, so a thread racing the one that
     * resolves gets the answer instead of giving up (its allocation would land on no device). */
    unsigned hint = __atomic_load_n(&drv.hint, __ATOMIC_ACQUIRE);
    if (hint == __atomic_load_n(&drv.hint_tried, __ATOMIC_ACQUIRE) &&
        __atomic_fetch_add(&drv.attempts, 1, __ATOMIC_RELAXED) % 64 != 0)
        return false;
    pthread_mutex_lock(&drv_lock);
    bool ok = drv_resolve();
    if (!ok)
        __atomic_store_n(&drv.hint_tried, hint, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&drv_lock);
    return ok;
}

/* Under drv_lock: fill the table once, publish it with tried_ok. */
static bool drv_resolve(void)
{
    if (__atomic_load_n(&drv.tried_ok, __ATOMIC_ACQUIRE))
        return true;
    void *lib = libcuda_handle();
    if (!lib)
        return false;
#define GET(field, sym) *(void **)&drv.field = vw_real_dlsym(lib, sym)
    GET(ctx_get_device, "cuCtxGetDevice");
    GET(mem_get_info, "cuMemGetInfo_v2");
    GET(device_total_mem, "cuDeviceTotalMem_v2");
    GET(device_get_name, "cuDeviceGetName");
    GET(device_get_pci, "cuDeviceGetPCIBusId");
    /* _v2 (CUDA 11.4) gives the UUID of a MIG instance rather than of its parent GPU. */
    GET(device_get_uuid, "cuDeviceGetUuid_v2");
    if (!drv.device_get_uuid)
        GET(device_get_uuid, "cuDeviceGetUuid");
    GET(pool_get_attr, "cuMemPoolGetAttribute");
    GET(device_get_mem_pool, "cuDeviceGetMemPool");
    GET(device_get_default_pool, "cuDeviceGetDefaultMemPool");
    GET(ctx_get_current, "cuCtxGetCurrent");
    GET(ctx_set_current, "cuCtxSetCurrent");
    GET(primary_get_state, "cuDevicePrimaryCtxGetState");
    GET(primary_retain, "cuDevicePrimaryCtxRetain");
    GET(primary_release, "cuDevicePrimaryCtxRelease_v2");
#undef GET
    /* The handle stays open on purpose: these pointers must outlive this function. */
    __atomic_store_n(&drv.tried_ok, drv.ctx_get_device != NULL, __ATOMIC_RELEASE);
    return drv.ctx_get_device != NULL;
}

bool vw_device_pci_bus_id(int device, char *out, int len)
{
    return drv_ready() && drv.device_get_pci &&
           drv.device_get_pci(out, len, device) == CUDA_SUCCESS;
}

int vw_current_device(void)
{
    CUdevice d;
    if (drv_ready() && drv.ctx_get_device(&d) == CUDA_SUCCESS)
        return (int)d;
    return -1;
}

static int64_t query_free(int device)
{
    size_t f, t;
    if (device < 0 || !drv_ready() || !drv.mem_get_info || vw_current_device() != device)
        return -1;
    if (drv.mem_get_info(&f, &t) != CUDA_SUCCESS)
        return -1;
    core_measure(device, t > f ? (int64_t)(t - f) : 0, -1, vw_now_ns());
    vw_limit_meminfo(device, &f, &t);
    return (int64_t)f;
}

/* ---------- capacity emulation ---------- */

static bool query_other_device(int dev, size_t *f, size_t *t);
static bool query_pools(int device, const struct core_device *d, int64_t *extra, int64_t *high);

/* A limit given as a share of the card (VRAMWATCH_LIMIT=90%) becomes a size once the driver
 * can say the card's total; until then there is no limit to apply. */
static uint64_t resolve_share(int device)
{
    size_t t;
    if (!drv_ready() || !drv.device_total_mem || drv.device_total_mem(&t, device) != CUDA_SUCCESS)
        return 0;
    uint64_t v = (uint64_t)((double)t * vw_opt.limit_share[device]);
    if (!v)
        v = 1;
    __atomic_store_n(&vw_opt.limit[device], v, __ATOMIC_RELAXED);
    return v;
}

uint64_t vw_limit_of(int device)
{
    if (device < 0 || device >= VW_MAX_DEVICES)
        return 0;
    uint64_t v = __atomic_load_n(&vw_opt.limit[device], __ATOMIC_RELAXED);
    if (VW_UNLIKELY(!v && vw_opt.limit_share[device] > 0))
        v = resolve_share(device);
    return v;
}

void vw_limit_meminfo(int device, size_t *free, size_t *total)
{
    uint64_t lim = vw_limit_of(device);
    if (!lim || !free || !total)
        return;
    /* Everything the card holds counts against the emulated capacity, as it would on a card
     * of that size: this process's allocations, its context and libraries, other processes. */
    uint64_t used = *total > *free ? *total - *free : 0;
    *total = lim;
    *free = used < lim ? lim - used : 0;
}

int vw_limit_check(enum core_kind kind, uint64_t size, int *device)
{
    if (kind == CORE_HOST)
        return VW_LIMIT_OK;
    if (*device == VW_DEV_UNKNOWN)
        *device = vw_current_device();
    uint64_t lim = vw_limit_of(*device);
    if (!lim)
        return VW_LIMIT_OK;
    size_t f, t;
    bool got = drv_ready() && drv.mem_get_info &&
               (*device == vw_current_device() ? drv.mem_get_info(&f, &t) == CUDA_SUCCESS
                                               : query_other_device(*device, &f, &t));
    if (!got)
        return VW_LIMIT_OK; /* the driver cannot say: let the real card decide */
    uint64_t used = t > f ? t - f : 0;
    core_measure(*device, (int64_t)used, -1,
                 vw_now_ns()); /* asked anyway: the timeline's untracked */
    uint64_t need = size;
    if (kind == CORE_POOL) {
        /* A stream-ordered pool serves from what it already holds before asking the driver. */
        int64_t cached = 0, high = 0;
        struct core_device d = { .pool_used = true };
        if (query_pools(*device, &d, &cached, &high) && (uint64_t)cached >= size)
            need = 0;
    }
    if (used + need <= lim)
        return VW_LIMIT_OK;
    if (!vw_opt.observe)
        return VW_LIMIT_REFUSE;
    /* Observe mode: an allocator that flushes and retries gets the small card's answer once
     * (retrying.c); its retry, still over the limit, is where the small card would fail. */
    if (vw_allocator_retries() && !core_observe_is_retry(*device, size, vw_now_ns()))
        return VW_LIMIT_FLUSH;
    return VW_LIMIT_CROSS;
}

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute a, bool *ok)
{
    cuuint64_t v = 0;
    if (drv.pool_get_attr(pool, a, &v) != CUDA_SUCCESS)
        *ok = false;
    return (uint64_t)v;
}

/* What the device's pools hold beyond what they handed out, and their reserved high-water
 * mark. Returns false when the pools cannot be asked. */
static bool query_pools(int device, const struct core_device *d, int64_t *extra, int64_t *high)
{
    *extra = 0;
    *high = 0;
    if (!d->pool_used)
        return true;
    if (device < 0 || !drv_ready() || !drv.pool_get_attr)
        return false;
    CUmemoryPool pools[VW_POOLS_PER_DEVICE + 2];
    int n = 0;
    CUmemoryPool p;
    if (drv.device_get_default_pool && drv.device_get_default_pool(&p, device) == CUDA_SUCCESS)
        pools[n++] = p;
    if (drv.device_get_mem_pool && drv.device_get_mem_pool(&p, device) == CUDA_SUCCESS)
        pools[n++] = p;
    for (int i = 0; i < d->npools; i++)
        pools[n++] = (CUmemoryPool)(uintptr_t)d->pools[i];
    bool ok = true;
    for (int i = 0; i < n; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup |= pools[j] == pools[i];
        if (dup)
            continue;
        uint64_t r = pool_attr(pools[i], CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &ok);
        uint64_t u = pool_attr(pools[i], CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &ok);
        uint64_t h = pool_attr(pools[i], CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &ok);
        if (r > u)
            *extra += (int64_t)(r - u);
        *high += (int64_t)h;
    }
    return ok;
}

/* ---------- recording ---------- */

static void register_exit(void)
{
    if (VW_LIKELY(__atomic_load_n(&exit_registered, __ATOMIC_RELAXED)))
        return;
    if (!__atomic_exchange_n(&exit_registered, true, __ATOMIC_ACQ_REL)) {
        atexit(on_exit_report);
        vw_signals_install(); /* the report of a job stopped by SIGTERM or SIGINT (signals.c) */
    }
}

void vw_record_alloc(struct vw_call *c, const char *api, enum core_kind kind, bool ok, int err,
                     bool runtime, uint64_t key, uint64_t size, int device, bool crossing)
{
    uint64_t now = vw_now_ns();
    if (device == VW_DEV_UNKNOWN && kind != CORE_HOST)
        device = vw_current_device();
    /* A zero-byte request that succeeds hands out nothing (cudaMalloc returns NULL). */
    if (ok && size == 0) {
        vw_leave();
        return;
    }
    uint32_t site = core_callsite(c->frames, c->nframes);
    register_exit();
    if (ok) {
        core_alloc(kind, key, size, device, api, site, now);
        if (crossing)
            core_limit_crossing(device, api, size, site, now);
        if (VW_UNLIKELY(status_fd >= 0))
            status_update(now, false, false);
        if (VW_UNLIKELY(core_take_report_stale())) {
            /* The report on disk says out of memory, and the retry has just succeeded: a process
             * stopped from now on (a signal, a time limit) must not leave that behind. */
            uint64_t finals, flushes;
            core_pressure(&finals, &flushes);
            vw_write_report(finals ? "oom" : "pressure");
        }
        vw_leave();
        return;
    }
    bool oom = err == 2; /* cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY are both 2 */
    const char *name = runtime ? vw_runtime_error_name(err) : vw_driver_error_name(err);
    int64_t free_bytes = kind == CORE_HOST ? -1 : query_free(device);
    int64_t extra = 0, high = 0;
    if (kind == CORE_POOL && device >= 0) {
        /* The device's default and current pools: what they cache counts as reserved. */
        struct core_device d = { .pool_used = true };
        if (!query_pools(device, &d, &extra, &high))
            extra = 0;
    }
    enum core_failure_verdict v = core_failure(kind, device, size, api, err, name, oom, site,
                                               free_bytes, (uint64_t)extra, now);
    if (VW_UNLIKELY(status_fd >= 0) && oom)
        status_update(now, true, false); /* a second failure may have made it final */
    if (v == CORE_FAIL_REPORT)
        vw_write_report("oom"); /* on disk before the failing call returns */
    vw_leave();
}

int vw_limit_gate(struct vw_call *c, const char *api, enum core_kind kind, uint64_t size,
                  int *device, bool runtime)
{
    /* A runtime call that comes first: the runtime has not loaded the driver yet, so neither the
     * device nor its memory could be asked. A driver call has a driver already. */
    if (runtime && *device == VW_DEV_UNKNOWN && kind != CORE_HOST && !drv_ready())
        vw_runtime_init();
    int lim = vw_limit_check(kind, size, device);
    if (lim == VW_LIMIT_REFUSE)
        vw_record_alloc(c, api, kind, false, VW_OOM, runtime, 0, size, *device, false);
    if (lim == VW_LIMIT_FLUSH) {
        core_observe_refusal(*device, size, api, core_callsite(c->frames, c->nframes), vw_now_ns());
        register_exit();
        vw_leave();
        return VW_LIMIT_REFUSE; /* the shim answers out of memory without calling the card */
    }
    return lim;
}

bool vw_free_begin(enum core_kind kind, uint64_t key, struct core_alloc *taken)
{
    return core_take(kind, key, taken, vw_now_coarse_ns());
}

void vw_free_end(bool was_tracked, const struct core_alloc *taken, bool ok)
{
    if (was_tracked && !ok)
        core_untake(taken);
    vw_leave();
}

/* ---------- reports ---------- */

/* Free and total memory of a device other than the current one: the driver answers for the
 * current context only, so briefly make the device's primary context current, and only when it
 * is already active (retaining an inactive one would create a context: memory and time the
 * application never asked for). The thread's own context is put back. */
static bool query_other_device(int dev, size_t *f, size_t *t)
{
    unsigned int flags;
    int active = 0;
    CUcontext saved, ctx;
    if (!drv.ctx_get_current || !drv.ctx_set_current || !drv.primary_get_state ||
        !drv.primary_retain || !drv.primary_release || !drv.mem_get_info)
        return false;
    if (drv.primary_get_state(dev, &flags, &active) != CUDA_SUCCESS || !active)
        return false;
    if (drv.ctx_get_current(&saved) != CUDA_SUCCESS)
        return false;
    if (drv.primary_retain(&ctx, dev) != CUDA_SUCCESS)
        return false;
    bool ok = drv.ctx_set_current(ctx) == CUDA_SUCCESS && drv.mem_get_info(f, t) == CUDA_SUCCESS;
    drv.ctx_set_current(saved);
    drv.primary_release(dev);
    return ok;
}

/* As nvidia-smi and CUDA_VISIBLE_DEVICES spell it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. */
static void format_uuid(const CUuuid *u, char out[48])
{
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    memcpy(p, "GPU-", 4);
    p += 4;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        unsigned char b = (unsigned char)u->bytes[i];
        *p++ = hex[b >> 4];
        *p++ = hex[b & 15];
    }
    *p = 0;
}

int vw_write_report(const char *reason)
{
    static struct report_devinfo info[VW_MAX_DEVICES + 1];
    struct core_snapshot *snap = malloc(sizeof(*snap));
    if (!snap)
        return -1;
    int saved = vw_depth;
    vw_depth = 1; /* our queries below go to the real driver unrecorded */
    core_snapshot(snap);
    pthread_mutex_lock(&info_lock);
    int cur = vw_current_device();
    static int64_t used[VW_MAX_DEVICES + 1]; /* under info_lock */
    for (int i = 0; i <= VW_MAX_DEVICES; i++) {
        used[i] = -1;
        struct report_devinfo *in = &info[i];
        memset(in, 0, sizeof(*in));
        in->total = in->free = in->pool_reserved_high = -1;
        in->nprocs = -1;
        in->limit = vw_limit_of(i) ? (int64_t)vw_limit_of(i) : -1;
        if (!snap->devices[i].active || i == VW_MAX_DEVICES)
            continue;
        size_t t, f;
        if (drv_ready()) {
            if (drv.device_total_mem && drv.device_total_mem(&t, i) == CUDA_SUCCESS)
                in->total = (int64_t)t;
            if (drv.device_get_name &&
                drv.device_get_name(in->name, sizeof(in->name), i) != CUDA_SUCCESS)
                in->name[0] = 0;
            if (drv.device_get_pci &&
                drv.device_get_pci(in->pci_bus_id, sizeof(in->pci_bus_id), i) != CUDA_SUCCESS)
                in->pci_bus_id[0] = 0;
            CUuuid u;
            if (drv.device_get_uuid && drv.device_get_uuid(&u, i) == CUDA_SUCCESS)
                format_uuid(&u, in->uuid);
            /* The driver answers free memory for the current context's device only. */
            bool got = i == cur ? drv.mem_get_info && drv.mem_get_info(&f, &t) == CUDA_SUCCESS
                                : query_other_device(i, &f, &t);
            if (got) {
                used[i] = t > f ? (int64_t)(t - f) : 0;
                vw_limit_meminfo(i, &f, &t);
                in->free = (int64_t)f;
                in->total = (int64_t)t;
            }
        }
        if (in->limit > 0)
            in->total = in->limit; /* the emulated card, even when the driver could not answer */
        /* Whose memory the rest of the card is: worth asking only when the card ran out. */
        if (strcmp(reason, "oom") == 0 && in->pci_bus_id[0])
            in->nprocs = vw_nvml_other_processes(in->pci_bus_id, in->procs, REPORT_PROCS_MAX);
        if (!query_pools(i, &snap->devices[i], &in->pool_extra, &in->pool_reserved_high)) {
            in->pool_extra = -1;
            in->pool_reserved_high = -1;
        }
        /* The timeline's last point is this measurement: reserved and untracked as reported. */
        core_measure(i, used[i], in->pool_extra, vw_now_ns());
    }
    int rc = report_write(reason, info);
    pthread_mutex_unlock(&info_lock);
    vw_depth = saved;
    free(snap);
    return rc;
}

static void on_exit_report(void)
{
    vw_signals_exiting();
    core_end_pending();
    if (status_fd >= 0 && vw_ready)
        status_update(vw_now_ns(), false, true); /* the last figures, whatever the rate limit */
    if (vw_ready && !vw_opt.disable && core_touched())
        vw_write_report("exit");
}
