/* The live-state file (layout and rules in livefile.h): a small fixed-size file each process
 * keeps up to date from the library's own thread, for `vramwatch top`.
 *
 * Cost: nothing on the hook path. The watcher thread (signals.c) calls live_tick once a
 * second: a copy of the core's counters (core_snapshot) and, when anything was allocated or
 * freed since, of its call sites to rank them; the copy of the call sites is spaced so that it
 * takes at most 1% of the thread's time (a run with tens of thousands of call sites refreshes
 * them less often). Where each device is (bus id, UUID, and nvidia-smi's index, which only NVML
 * knows) is asked once per device, at the first tick that sees it in use. The file is created at
 * the first tick, so a process that never made an allocation call has none, and removed at exit.
 *
 * No descriptor stays open between ticks: the folder and the file are opened by name at each
 * tick and closed again, and the file written only when it is still the one we made (same
 * device and inode), so an application that closes every descriptor and opens its own at the
 * same numbers never gets our bytes, and one that closed ours before exiting still has its file
 * removed. A name another user holds is left to them: the file takes the next free
 * vramwatch-live.HOST.PID.N. */
#include "live.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "demangle.h"
#include "driver.h"
#include "interpose.h"
#include "livefile.h"
#include "log.h"
#include "nvml_procs.h"
#include "pyframes.h"
#include "ranks.h"
#include "redact.h"
#include "report.h"
#include "safefile.h"

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static bool made;                 /* under live_lock: the file exists, as `ino` on `dev` */
static dev_t made_dev;
static ino_t made_ino;
static struct vw_live_file stage; /* under live_lock: the next content, copied in at once */
static struct core_snapshot snap; /* under live_lock */
static bool failed, gone;
/* Under a finite RLIMIT_AS the thread mallocs nothing at all: C++ names stay mangled here
 * (demangling mallocs, and glibc would give the thread its own arena: 64 MiB of address
 * space). The report, written by the thread that needs it, demangles as ever. */
static bool frugal;
static char name[sizeof(VW_LIVE_PREFIX) + 64 + 24];
/* The call sites' copy, kept between ticks and grown as the run makes more sites. */
static struct core_callsite *sites;
static uint64_t *frames;
static uint32_t sites_cap, frames_cap;
static uint64_t sites_due_ns, sites_seen_calls;
static int64_t total_of[VW_MAX_DEVICES];
/* Where each device is, asked once, when the thread first sees it in use (never on the hook
 * path): the driver's bus id and UUID, and NVML's index, the one nvidia-smi shows. */
static struct vw_live_where where_of[VW_MAX_DEVICES];

/* A path that does not fit keeps its end, where the file's name is. */
static void put_tail(char *out, size_t cap, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < cap) {
        memcpy(out, s ? s : "", n + 1);
        return;
    }
    memcpy(out, "...", 3);
    memcpy(out + 3, s + n - (cap - 4), cap - 4);
    out[cap - 1] = 0;
}

static void put_head(char *out, size_t cap, const char *s)
{
    snprintf(out, cap, "%s", s ? s : "");
}

/* Host names end up in file names: keep them to a safe alphabet, as report.c does. */
static void host_name(char *out, size_t n)
{
    if (gethostname(out, n) != 0)
        snprintf(out, n, "unknown");
    out[n - 1] = 0;
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_'))
            *p = '_';
}

struct argv_out {
    char *out;
    size_t cap, len;
};

static void put_arg(void *ctx, const char *arg)
{
    struct argv_out *a = ctx;
    size_t n = strlen(arg);
    if (a->len && a->len + 1 < a->cap)
        a->out[a->len++] = ' ';
    if (n > a->cap - 1 - a->len)
        n = a->cap - 1 - a->len;
    memcpy(a->out + a->len, arg, n);
    a->len += n;
    a->out[a->len] = 0;
}

/* The command line as the report writes it: redacted by the one rule (redact.c) before it is
 * cut to fit. The work area is static: only the tick, under live_lock, reads it. */
static void read_argv(char *out, size_t cap)
{
    static char work[REDACT_WORK_SIZE];
    out[0] = 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct argv_out a = { out, cap, 0 };
    redact_cmdline(fd, work, sizeof(work), cap - 1, put_arg, &a);
    close(fd);
}

static void fill_process(struct vw_live_file *f)
{
    memcpy(f->magic, VW_LIVE_MAGIC, 8);
    f->version = VW_LIVE_VERSION;
    f->size = (uint32_t)sizeof(*f);
    f->pid = getpid();
    f->ppid = getppid();
    f->rank = ranks_from_env(VW_RANK);
    f->local_rank = ranks_from_env(VW_LOCAL_RANK);
    f->world_size = ranks_from_env(VW_WORLD_SIZE);
    f->start_unix_ns = platform_now_ns();
    f->interval_ms = VW_LIVE_INTERVAL_MS;
    host_name(f->host, sizeof(f->host));
    char cwd[PATH_MAX];
    put_tail(f->cwd, sizeof(f->cwd), getcwd(cwd, sizeof(cwd)) ? cwd : "");
    read_argv(f->argv, sizeof(f->argv));
}

/* The live view is an extra: a folder it cannot use is said at VRAMWATCH_LOG=info only (the
 * report's own warning, when there is one, says what matters). Called once: `failed` stops it. */
#define info_once(...) log_msg(VW_LOG_INFO, __VA_ARGS__)

/* The folder, opened by its path with the report folder's checks; -1 with one message. */
static int open_folder(void)
{
    char why[512];
    int dirfd = safefile_open_dir(options_current.dir, true, why, sizeof(why));
    if (dirfd < 0)
        info_once("no live-state file in %s: %s", options_current.dir, why);
    return dirfd;
}

/* Our file, opened again by its name: -1 when it is gone or is not the one we made. */
static int open_ours(int dirfd)
{
    int fd = safefile_high(
        openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != made_dev || st.st_ino != made_ino)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Under live_lock. One message and no live file for the process's life when it cannot be made. */
static bool create(void)
{
    struct rlimit as;
    frugal = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
    fill_process(&stage);
    int dirfd = open_folder();
    if (dirfd < 0)
        return false;
    report_sweep_stale(dirfd); /* live-state files of killed writers go first */
    /* O_EXCL | O_NOFOLLOW: never written through a name planted in advance. A file of ours
     * already at our name is an earlier process's whose pid came back (a restarted container):
     * ours now. One of another user's is theirs: the next name. */
    int fd = -1;
    for (int n = 0; n < 16 && fd < 0; n++) {
        if (n)
            snprintf(name, sizeof(name), VW_LIVE_PREFIX "%s.%d.%d", stage.host, (int)stage.pid, n);
        else
            snprintf(name, sizeof(name), VW_LIVE_PREFIX "%s.%d", stage.host, (int)stage.pid);
        fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        struct stat st;
        if (fd < 0 && errno == EEXIST && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            st.st_uid == geteuid() && unlinkat(dirfd, name, 0) == 0)
            fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST && errno != EPERM && errno != EACCES)
            break;
    }
    if (fd < 0) {
        info_once("no live-state file in %s: %s", options_current.dir, strerror(errno));
        close(dirfd);
        return false;
    }
    fd = safefile_high(fd);
    (void)fchmod(fd, 0600); /* whatever the umask */
    /* Written whole at once, "being written" (odd) until the first tick: every block the file
     * needs is allocated here, where a full disk is an error, and the file is only ever written
     * with pwrite, never through a shared mapping, whose stores on a full file system would kill
     * the process with SIGBUS. */
    stage.seq = 1;
    struct stat st;
    if (pwrite(fd, &stage, sizeof(stage), 0) != (ssize_t)sizeof(stage) || fstat(fd, &st) != 0) {
        int err = errno ? errno : ENOSPC;
        info_once("no live-state file in %s: %s", options_current.dir, strerror(err));
        close(fd);
        unlinkat(dirfd, name, 0);
        close(dirfd);
        return false;
    }
    made_dev = st.st_dev;
    made_ino = st.st_ino;
    made = true;
    close(fd);
    close(dirfd);
    return true;
}

static void describe_native(struct vw_live_frame *o, uint64_t ip)
{
    /* Return addresses point after the call: the byte before is inside the caller. */
    uint64_t at = ip ? ip - 1 : 0;
    Dl_info di;
    struct link_map *lm = NULL;
    o->python = 0;
    o->symbol_offset = -1;
    o->line_or_offset = (int64_t)at;
    if (!dladdr1((void *)(uintptr_t)at, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return;
    put_tail(o->file_or_module, sizeof(o->file_or_module), di.dli_fname);
    o->line_or_offset = (int64_t)(at - (uint64_t)lm->l_addr);
    if (!di.dli_sname)
        return;
    o->symbol_offset = (int64_t)(at - (uint64_t)(uintptr_t)di.dli_saddr);
    char *d = frugal ? NULL : demangle_symbol(di.dli_sname);
    put_head(o->function_or_symbol, sizeof(o->function_or_symbol), d ? d : di.dli_sname);
    free(d);
}

/* A call site's frames into the file: its Python frames and, in the room left, its innermost
 * native frames, in their order (innermost first), so that the command line's rule for the
 * application frame (model.c) finds the same frame when the chain is longer than the room. */
static void fill_site(struct vw_live_site *o, uint32_t id, const struct core_callsite *cs)
{
    const uint64_t *fr = &frames[cs->frames_off];
    uint32_t n = cs->nframes, py = 0;
    for (uint32_t i = 0; i < n; i++)
        py += pyframes_is_python(fr[i]);
    uint32_t native_room = py >= VW_LIVE_FRAMES ? 0 : VW_LIVE_FRAMES - py, native = 0;
    memset(o, 0, sizeof(*o));
    o->id = id;
    o->live_bytes = cs->live_bytes;
    o->live_count = cs->live_count;
    o->alloc_calls = cs->alloc_calls;
    o->frames_total = n;
    for (uint32_t i = 0; i < n && o->nframes < VW_LIVE_FRAMES; i++) {
        struct vw_live_frame *f = &o->frames[o->nframes];
        if (pyframes_is_python(fr[i])) {
            const char *file, *function;
            int line;
            pyframes_describe(fr[i], &file, &function, &line);
            f->python = 1;
            f->line_or_offset = line;
            f->symbol_offset = -1;
            put_tail(f->file_or_module, sizeof(f->file_or_module), file ? file : "?");
            put_head(f->function_or_symbol, sizeof(f->function_or_symbol),
                     function ? function : "?");
            o->nframes++;
        } else if (native < native_room) {
            describe_native(f, fr[i]);
            native++;
            o->nframes++;
        }
    }
}

/* Grown with mmap/mremap, not realloc: the thread mallocs nothing while the job runs, or glibc
 * would give it an arena of its own (64 MiB of address space, which a process under a tight
 * RLIMIT_AS may not have to spare). */
static bool grow(void **p, uint32_t *cap, uint32_t want, size_t each)
{
    if (want <= *cap)
        return true;
    uint32_t n = *cap ? *cap : 256;
    while (n < want)
        n = n > UINT32_MAX / 2 ? want : n * 2;
    void *q = *p ? mremap(*p, (size_t)*cap * each, (size_t)n * each, MREMAP_MAYMOVE)
                 : mmap(NULL, (size_t)n * each, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    if (q == MAP_FAILED)
        return false;
    *p = q;
    *cap = n;
    return true;
}

/* The call sites holding the most live memory, largest first, into stage. */
static void rank_sites(uint64_t now)
{
    uint32_t n = snap.ncallsites;
    /* Room for every site's chain, up to 8 MiB of frames: beyond that, the sites made last keep
     * fewer frames here (the report has them all). */
    uint64_t want = (uint64_t)n * (uint64_t)pyframes_chain_max(options_current.stack_depth,
                                                               options_current.python);
    uint32_t want_frames = want > (1u << 20) ? (1u << 20) : (uint32_t)want;
    if (!n || !grow((void **)&sites, &sites_cap, n, sizeof(*sites)) ||
        !grow((void **)&frames, &frames_cap, want_frames, sizeof(*frames)))
        return;
    core_copy_callsites(sites, n, frames, frames_cap);
    uint32_t top[VW_LIVE_SITES], k = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = sites[i].live_bytes;
        if (!v || (k == VW_LIVE_SITES && v <= sites[top[k - 1]].live_bytes))
            continue;
        uint32_t j = k < VW_LIVE_SITES ? k++ : VW_LIVE_SITES - 1;
        for (; j > 0 && sites[top[j - 1]].live_bytes < v; j--)
            top[j] = top[j - 1];
        top[j] = i;
    }
    for (uint32_t j = 0; j < k; j++)
        fill_site(&stage.sites[j], top[j], &sites[top[j]]);
    stage.nsites = k;
    /* At most 1% of the time: the next copy waits a hundred times what this one took. */
    uint64_t took = platform_now_ns() - now;
    sites_due_ns = platform_now_ns() + took * 100;
    log_msg(VW_LOG_DEBUG, "live-state file: %u call sites ranked in %llu us", n,
            (unsigned long long)(took / 1000));
}

/* The driver prints "0000:3B:00.0"; nvidia-smi and NVML's busId "00000000:3B:00.0": the
 * latter, so the view matches what people compare it with. */
static void bus_id_as_smi(const char *in, char *out, size_t cap)
{
    unsigned int domain, bus, dev, fn;
    out[0] = 0;
    if (sscanf(in, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) == 4)
        snprintf(out, cap, "%08X:%02X:%02X.%X", domain, bus, dev, fn);
}

static void locate(int i, struct vw_live_where *w)
{
    char bus[32];
    memset(w, 0, sizeof(*w));
    w->nvml_index = -1;
    if (driver_pci_bus_id(i, bus, (int)sizeof(bus)))
        bus_id_as_smi(bus, w->pci_bus_id, sizeof(w->pci_bus_id));
    if (!driver_device_uuid(i, w->uuid))
        w->uuid[0] = 0;
    /* Loading NVML mallocs (and maps it): a process under a finite RLIMIT_AS (`frugal`) is only
     * asked through an NVML it loaded itself. */
    if (w->pci_bus_id[0])
        w->nvml_index = nvml_device_index(w->pci_bus_id, !frugal);
}

static void fill_devices(void)
{
    uint32_t k = 0;
    for (int i = 0; i < VW_MAX_DEVICES && k < VW_LIVE_DEVICES; i++) {
        const struct core_device *d = &snap.devices[i];
        if (!d->active)
            continue;
        struct vw_live_device *o = &stage.devices[k++];
        memset(o, 0, sizeof(*o));
        o->ordinal = i;
        o->live_bytes = (int64_t)d->live_bytes;
        o->peak_live_bytes = (int64_t)d->peak_live_bytes;
        int64_t extra = 0, high = 0;
        o->reserved_bytes = (int64_t)d->live_bytes;
        if (d->pool_used && driver_pools(i, d, &extra, &high))
            o->reserved_bytes += extra;
        uint64_t lim = limit_of(i);
        o->limit_bytes = lim ? (int64_t)lim : -1;
        if (!total_of[i]) {
            size_t t;
            total_of[i] = driver_total_mem(i, &t) ? (int64_t)t : -1;
            locate(i, &where_of[i]);
        }
        o->total_bytes = total_of[i];
        stage.where[k - 1] = where_of[i];
        o->alloc_calls = d->alloc_calls;
        o->free_calls = d->free_calls;
        o->failed_calls = d->failed_calls;
    }
    stage.ndevices = k;
}

void live_tick(void)
{
    pthread_mutex_lock(&live_lock);
    struct safefile_quiet q;
    safefile_quiet_begin(&q);
    if (!failed && !gone && !made)
        failed = !create();
    if (failed || gone) {
        safefile_quiet_end(&q);
        pthread_mutex_unlock(&live_lock);
        return;
    }
    uint64_t now = platform_now_ns();
    core_snapshot(&snap);
    fill_devices();
    uint64_t calls = 0;
    for (int i = 0; i <= VW_MAX_DEVICES; i++)
        calls += snap.devices[i].alloc_calls + snap.devices[i].free_calls;
    if (calls != sites_seen_calls && now >= sites_due_ns) {
        sites_seen_calls = calls;
        rank_sites(now);
    }
    uint64_t finals, flushes;
    core_pressure(&finals, &flushes);
    stage.oom = (uint32_t)finals;
    stage.update_unix_ns = platform_now_ns();
    /* The sequence lock, in three writes: seq odd, the content (seq still odd in it), seq even.
     * A write that fails (a copy-on-write file system that is full) leaves seq odd: readers skip
     * the file until a later tick gets through. */
    uint64_t odd = (stage.seq | 1) + 2, even = odd + 1;
    off_t at = (off_t)offsetof(struct vw_live_file, seq);
    stage.seq = odd;
    int dirfd = open_folder();
    int fd = dirfd < 0 ? -1 : open_ours(dirfd);
    if (fd >= 0 && pwrite(fd, &odd, sizeof(odd), at) == (ssize_t)sizeof(odd) &&
        pwrite(fd, &stage, sizeof(stage), 0) == (ssize_t)sizeof(stage) &&
        pwrite(fd, &even, sizeof(even), at) == (ssize_t)sizeof(even))
        stage.seq = even;
    if (fd >= 0)
        close(fd);
    else if (dirfd >= 0)
        made = false; /* removed by someone: made again at the next tick */
    if (dirfd >= 0)
        close(dirfd);
    safefile_quiet_end(&q);
    pthread_mutex_unlock(&live_lock);
}

/* Under live_lock: our file goes, if it is still ours at its name. */
static void remove_ours(void)
{
    if (!made)
        return;
    made = false;
    int dirfd = open_folder();
    if (dirfd < 0)
        return;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == made_dev &&
        st.st_ino == made_ino)
        unlinkat(dirfd, name, 0);
    close(dirfd);
}

void live_remove(void)
{
    /* Also when the thread has not made the file yet: it must not make it after this. */
    pthread_mutex_lock(&live_lock);
    remove_ours();
    gone = true;
    pthread_mutex_unlock(&live_lock);
}

void live_resume(void)
{
    pthread_mutex_lock(&live_lock);
    gone = false;
    pthread_mutex_unlock(&live_lock);
}

void live_after_fork_child(void)
{
    /* The parent's thread may have held the lock across fork, and the file is the parent's: the
     * child leaves it alone, and makes its own if it allocates (its own watcher ticks). */
    pthread_mutex_init(&live_lock, NULL);
    made = false;
    failed = false;
    gone = true;
    sites_seen_calls = 0;
    sites_due_ns = 0;
    memset(total_of, 0, sizeof(total_of));
    memset(where_of, 0, sizeof(where_of));
}
