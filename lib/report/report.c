/* Writes the report (schema vramwatch.report/1, documented in docs/report-format.md).
 *
 * Order of work, and why: the core's counters and tables are copied under its lock, the lock
 * is dropped, and only then are stacks symbolised (dladdr takes the loader's lock, and a
 * thread inside dlopen may be waiting for ours) and the file written. The file is written
 * whole to a temporary name in the same folder (O_EXCL | O_NOFOLLOW, mode 0600) and renamed
 * over the previous report, so a reader never sees half a report and a crash mid-write leaves
 * the previous one intact. The folder is opened component by component (safefile.c), and every
 * file operation after that goes through its descriptor. */
#include "report.h"

#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include "demangle.h"
#include "framework.h"
#include "livefile.h"
#include "jsonw.h"
#include "log.h"
#include "options.h"
#include "pyframes.h"
#include "ranks.h"
#include "redact.h"
#include "safefile.h"
#include "platform.h"
#include "trace.h"

#define LIVE_MAX 1000
#define CALLSITES_MAX 5000 /* sites with live memory listed; referenced ones are always added */

extern char **environ;

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static struct core_snapshot snap;            /* under report_lock */
static struct core_alloc live[LIVE_MAX];     /* under report_lock */
static struct timeline_device tl_copy;       /* under report_lock: one device at a time */
static struct timeline_step tl_steps[VW_TL_STEPS]; /* under report_lock */
/* The trace's events copied at the snapshot, oldest first: malloc'd per report (the ring's size
 * is the user's choice, up to 48 MiB), under report_lock. */
static struct {
    struct trace_event *ev;
    uint32_t n;
    uint64_t total, lost;
} trace_copy_;
static char path_buf[PATH_MAX + 512];        /* the folder, plus host and pid */
static int64_t peak_reserved_seen[VW_MAX_DEVICES + 1];
static unsigned report_seq;
static int warned_write;
static bool previous_checked; /* a report of an earlier process at our name was looked for, and
                                 temporary files of killed writers */
/* 0: the report's name is the contract's vramwatch-HOST-PID.json; N: that name is another
 * user's (planted in a shared sticky folder before we ran), and ours is vramwatch-HOST-PID.N.json */
static int name_n;
/* The number of the latest dump on request: each is a file of its own,
 * vramwatch-HOST-PID-request-N.json, never replaced (report_write). */
static int request_n;
/* The other processes seen at the last out-of-memory report, per device, so the report at exit
 * still says whose the rest of the card was; nprocs_seen 0 means never asked (stored + 1). */
static struct report_proc procs_seen[VW_MAX_DEVICES + 1][REPORT_PROCS_MAX];
static int nprocs_seen[VW_MAX_DEVICES + 1];

static void launcher_after_fork_child(void);

void report_after_fork_child(void)
{
    pthread_mutex_init(&report_lock, NULL);
    memset(peak_reserved_seen, 0, sizeof(peak_reserved_seen));
    memset(nprocs_seen, 0, sizeof(nprocs_seen));
    previous_checked = false;
    name_n = 0;
    request_n = 0;
    launcher_after_fork_child();
}

/* ---------- process facts ---------- */

/* Negative means unknown: null (device ordinals, driver figures). */
static void opt_i64(struct jsonw *w, const char *k, int64_t v)
{
    if (v < 0)
        jsonw_null(w, k);
    else
        jsonw_i64(w, k, v);
}

static void host_name(char *out, size_t n)
{
    if (gethostname(out, n) != 0)
        snprintf(out, n, "unknown");
    out[n - 1] = 0;
}

/* Host names end up in file names: keep them to a safe alphabet. */
static void file_safe(char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '-' || *s == '_'))
            *s = '_';
}

static ssize_t read_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < cap) {
        ssize_t n = read(fd, buf + off, cap - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    close(fd);
    return (ssize_t)off;
}

/* The boot time in /proc/stat (whole seconds), read once: it does not change while the system
 * runs, and every start time below needs it. Read in chunks, since on a large host the `intr`
 * line before it alone can be longer than any fixed buffer. -1: unreadable. */
static int64_t boot_time_s(void)
{
    static int64_t cached; /* 0: not read yet */
    int64_t v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v != 0)
        return v;
    v = -1;
    int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        /* keep the chunk's last bytes in front of the next: "btime N" may straddle two */
        char buf[4096 + 64];
        size_t kept = 0;
        for (;;) {
            ssize_t n = read(fd, buf + kept, sizeof(buf) - 1 - kept);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            size_t len = kept + (size_t)n;
            buf[len] = 0;
            char *b = strstr(buf, "\nbtime ");
            unsigned long long btime;
            if (b && strchr(b + 7, '\n') && sscanf(b + 7, "%llu", &btime) == 1) {
                v = (int64_t)btime;
                break;
            }
            kept = len < 63 ? len : 63;
            memmove(buf, buf + len - kept, kept);
        }
        close(fd);
    }
    if (v > 0) /* an unreadable /proc is tried again next time */
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    return v;
}

/* When a process started, from its /proc/PID/stat (field 22, clock ticks after boot) and the boot
 * time (whole seconds, hence "accurate to about a second"). */
static int64_t process_start_ns(const char *stat_path)
{
    char stat[4096];
    ssize_t n = read_file(stat_path, stat, sizeof(stat) - 1);
    if (n <= 0)
        return -1;
    stat[n] = 0;
    /* Field 22, counted after the command name, which may hold spaces and parentheses. */
    char *p = strrchr(stat, ')');
    if (!p)
        return -1;
    unsigned long long ticks = 0;
    int field = 2;
    for (p++; *p && field < 22; p++)
        if (*p == ' ')
            field++;
    if (field != 22 || sscanf(p, "%llu", &ticks) != 1)
        return -1;
    int64_t btime = boot_time_s();
    if (btime < 0)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0)
        return -1;
    return btime * 1000000000ll + (int64_t)(ticks * (1000000000ull / (unsigned long long)hz));
}

static void write_rank(struct jsonw *w, const char *key, enum vw_rank_kind kind)
{
    int64_t x = ranks_from_env(kind);
    if (x >= 0)
        jsonw_i64(w, key, x);
    else
        jsonw_null(w, key);
}

/* ---------- the launcher: which job this process is part of ----------
 *
 * Read once, when the library is loaded into the process (a constructor: before any hook, so no
 * getenv or /proc read on the hook path): the ids that torchrun, Slurm and MPI put in the
 * environment, and the parent process with its start time. Reports of one job carry the same
 * ids, reports of separate runs do not; `vramwatch report` and `merge` tell jobs apart by them
 * (docs/multi-process.md). The parent and its start time are read then too, since a parent that
 * dies before the report would leave only init's pid. */
#define LAUNCHER_ID_MAX 128

static struct {
    char torchrun_run_id[LAUNCHER_ID_MAX]; /* empty: not set */
    char slurm_job_id[LAUNCHER_ID_MAX];
    char slurm_step_id[LAUNCHER_ID_MAX];
    char mpi_job_id[LAUNCHER_ID_MAX];
    int64_t parent_pid;   /* -1: unknown */
    int64_t parent_start; /* -1: unknown */
    char parent_name[32]; /* its comm; empty: unknown */
    int64_t self_start;   /* ours, -1: unknown; becomes a forked child's parent_start */
    char self_name[32];   /* ours; becomes a forked child's parent_name */
    int64_t loaded_ns;    /* when the library was loaded (exec), or the fork; 0: unknown */
} launcher = { .parent_pid = -1, .parent_start = -1, .self_start = -1 };

/* The first of the variables that is set and not empty, cut to fit. */
static void env_first(char *out, size_t cap, const char *const *names)
{
    out[0] = 0;
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) {
            snprintf(out, cap, "%s", v);
            return;
        }
    }
}

/* /proc/PID/comm without its newline; empty when unreadable. */
static void read_comm(const char *path, char *out, size_t cap)
{
    ssize_t n = read_file(path, out, cap - 1);
    if (n < 0)
        n = 0;
    out[n] = 0;
    out[strcspn(out, "\n")] = 0;
}

__attribute__((constructor)) static void launcher_capture(void)
{
    static const char *const torchrun[] = { "TORCHELASTIC_RUN_ID", NULL };
    static const char *const slurm_job[] = { "SLURM_JOB_ID", "SLURM_JOBID", NULL };
    static const char *const slurm_step[] = { "SLURM_STEP_ID", "SLURM_STEPID", NULL };
    /* Open MPI's own job id (ORTE, then the older name), else the PMIx namespace that Open MPI 5,
     * PRRTE and Slurm's PMIx plugin give every process of one job. */
    static const char *const mpi[] = { "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid",
                                       "PMIX_NAMESPACE", NULL };
    char path[64];
    launcher.loaded_ns = (int64_t)platform_now_ns();
    env_first(launcher.torchrun_run_id, LAUNCHER_ID_MAX, torchrun);
    env_first(launcher.slurm_job_id, LAUNCHER_ID_MAX, slurm_job);
    env_first(launcher.slurm_step_id, LAUNCHER_ID_MAX, slurm_step);
    env_first(launcher.mpi_job_id, LAUNCHER_ID_MAX, mpi);
    pid_t ppid = getppid();
    launcher.parent_pid = ppid;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)ppid);
    launcher.parent_start = process_start_ns(path);
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)ppid);
    read_comm(path, launcher.parent_name, sizeof(launcher.parent_name));
    launcher.self_start = process_start_ns("/proc/self/stat");
    read_comm("/proc/self/comm", launcher.self_name, sizeof(launcher.self_name));
}

/* This process's start: as read at load, or again in a forked child (which has its own). */
static int64_t own_start_ns(void)
{
    return launcher.self_start > 0 ? launcher.self_start : process_start_ns("/proc/self/stat");
}

/* A forked child's launcher is the process it was forked from: its ids stay (the same job), its
 * parent becomes that process. Only memory and a clock read here: the child of a threaded
 * parent may not take locks. */
static void launcher_after_fork_child(void)
{
    launcher.parent_pid = getppid();
    launcher.parent_start = launcher.self_start;
    memcpy(launcher.parent_name, launcher.self_name, sizeof(launcher.parent_name));
    launcher.self_start = -1;
    launcher.self_name[0] = 0;
    launcher.loaded_ns = (int64_t)platform_now_ns();
}

static void write_launcher(struct jsonw *w)
{
    opt_i64(w, "loaded_unix_ns", launcher.loaded_ns > 0 ? launcher.loaded_ns : -1);
    jsonw_obj_begin(w, "launcher");
    jsonw_str(w, "torchrun_run_id", launcher.torchrun_run_id[0] ? launcher.torchrun_run_id : NULL);
    jsonw_str(w, "slurm_job_id", launcher.slurm_job_id[0] ? launcher.slurm_job_id : NULL);
    jsonw_str(w, "slurm_step_id", launcher.slurm_step_id[0] ? launcher.slurm_step_id : NULL);
    jsonw_str(w, "mpi_job_id", launcher.mpi_job_id[0] ? launcher.mpi_job_id : NULL);
    opt_i64(w, "parent_pid", launcher.parent_pid);
    opt_i64(w, "parent_start_unix_ns", launcher.parent_start);
    jsonw_str(w, "parent_name", launcher.parent_name[0] ? launcher.parent_name : NULL);
    jsonw_obj_end(w);
}

static bool env_allowed(const char *e)
{
    static const char *exact[] = { "CUDA_VISIBLE_DEVICES=", "PYTORCH_CUDA_ALLOC_CONF=",
                                   "PYTORCH_ALLOC_CONF=", "TF_GPU_ALLOCATOR=", NULL };
    for (int i = 0; exact[i]; i++)
        if (!strncmp(e, exact[i], strlen(exact[i])))
            return true;
    return !strncmp(e, "XLA_PYTHON_CLIENT_", 18) || !strncmp(e, "VRAMWATCH_", 10);
}

/* One argument of the command line into the report's argv. */
static void emit_arg(void *w, const char *arg)
{
    jsonw_str(w, NULL, arg);
}

static void write_process(struct jsonw *w)
{
    char buf[PATH_MAX];
    jsonw_obj_begin(w, "process");
    jsonw_i64(w, "pid", getpid());
    jsonw_i64(w, "ppid", getppid());
    host_name(buf, 256);
    jsonw_str(w, "host", buf);

    jsonw_arr_begin(w, "argv");
    /* The command line as the kernel has it, with secrets (--token X, API_KEY=...,
     * https://user:pass@host) replaced: reports get pasted into issues and chats. Bounded so a
     * huge argv cannot bloat the report, and redacted before it is cut: a cut inside a URL must
     * not show the start of its password. */
    static char work[REDACT_WORK_SIZE];
    int cmdline = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (cmdline >= 0) {
        redact_cmdline(cmdline, work, sizeof(work), REDACT_ARGV_MAX, emit_arg, w);
        close(cmdline);
    }
    jsonw_arr_end(w);

    ssize_t l = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (l > 0) {
        buf[l] = 0;
        jsonw_str(w, "exe", buf);
    } else {
        jsonw_null(w, "exe");
    }
    jsonw_str(w, "cwd", getcwd(buf, sizeof(buf)) ? buf : NULL);
    int64_t start = own_start_ns();
    if (start > 0)
        jsonw_i64(w, "start_unix_ns", start);
    else
        jsonw_null(w, "start_unix_ns");

    /* The launchers' variables: lib/ranks.c. */
    write_rank(w, "rank", VW_RANK);
    write_rank(w, "local_rank", VW_LOCAL_RANK);
    write_rank(w, "world_size", VW_WORLD_SIZE);
    write_launcher(w);
    jsonw_bool(w, "steps_reported", core_steps_reported());

    jsonw_obj_begin(w, "env");
    for (char **e = environ; e && *e; e++) {
        if (!env_allowed(*e))
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq || eq - *e >= 128)
            continue;
        char name[128];
        memcpy(name, *e, (size_t)(eq - *e));
        name[eq - *e] = 0;
        jsonw_str(w, name, eq + 1);
    }
    jsonw_obj_end(w);
    jsonw_obj_end(w);
}

/* ---------- symbols ---------- */

struct sym {
    uint64_t ip;
    const char *module; /* owned by the loader: valid while the module is loaded */
    char *symbol;       /* malloc'd, demangled when the process has a demangler */
    uint64_t offset;
    int64_t symbol_offset;
    UT_hash_handle hh;
};

static struct sym *symbolize(struct sym **cache, uint64_t ip, const char *exe)
{
    struct sym *s;
    HASH_FIND(hh, *cache, &ip, sizeof(ip), s);
    if (s)
        return s;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->ip = ip;
    s->symbol_offset = -1;
    /* Return addresses point after the call: look up the byte before, inside the caller. */
    uint64_t at = ip ? ip - 1 : 0;
    Dl_info di;
    struct link_map *lm = NULL;
    if (dladdr1((void *)(uintptr_t)at, &di, (void **)&lm, RTLD_DL_LINKMAP) && lm) {
        s->module = (di.dli_fname && di.dli_fname[0]) ? di.dli_fname : exe;
        s->offset = at - (uint64_t)lm->l_addr;
        if (di.dli_sname) {
            char *d = demangle_symbol(di.dli_sname);
            s->symbol = d ? d : strdup(di.dli_sname);
            s->symbol_offset = (int64_t)(at - (uint64_t)(uintptr_t)di.dli_saddr);
        }
    } else {
        s->offset = at;
    }
    HASH_ADD(hh, *cache, ip, sizeof(s->ip), s);
    return s;
}

static void write_frames(struct jsonw *w, const uint64_t *frames, int n, struct sym **cache,
                         const char *exe)
{
    jsonw_arr_begin(w, "frames");
    for (int i = 0; i < n; i++) {
        if (pyframes_is_python(frames[i])) {
            const char *file, *function;
            int line;
            pyframes_describe(frames[i], &file, &function, &line);
            jsonw_obj_begin(w, NULL);
            jsonw_str(w, "kind", "python");
            jsonw_str(w, "file", file ? file : "?");
            jsonw_str(w, "function", function ? function : "?");
            jsonw_i64(w, "line", line);
            jsonw_obj_end(w);
            continue;
        }
        struct sym *s = symbolize(cache, frames[i], exe);
        jsonw_obj_begin(w, NULL);
        jsonw_str(w, "kind", "native");
        jsonw_str(w, "module", s ? s->module : NULL);
        jsonw_str(w, "symbol", s ? s->symbol : NULL);
        jsonw_u64(w, "offset", s ? s->offset : frames[i]);
        if (s && s->symbol_offset >= 0)
            jsonw_i64(w, "symbol_offset", s->symbol_offset);
        else
            jsonw_null(w, "symbol_offset");
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
}

/* ---------- the file ---------- */

const char *report_path(void)
{
    char host[256];
    host_name(host, sizeof(host));
    file_safe(host);
    if (name_n)
        snprintf(path_buf, sizeof(path_buf), "%s/vramwatch-%s-%d.%d.json", options_current.dir,
                 host, (int)getpid(), name_n);
    else
        snprintf(path_buf, sizeof(path_buf), "%s/vramwatch-%s-%d.json", options_current.dir, host,
                 (int)getpid());
    return path_buf;
}

static const char *kind_name(int kind)
{
    static const char *names[CORE_KINDS] = { "device", "pool", "managed", "vmm", "host" };
    return kind >= 0 && kind < CORE_KINDS ? names[kind] : "device";
}

/* The calls the library could put on no device: with no driver loaded or no context current,
 * failures (cudaErrorInsufficientDriver) and, rarely, allocations. null when there were none. */
static void write_unattributed(struct jsonw *w)
{
    const struct core_device *d = &snap.devices[VW_MAX_DEVICES];
    if (!d->active) {
        jsonw_null(w, "unattributed");
        return;
    }
    jsonw_obj_begin(w, "unattributed");
    jsonw_u64(w, "live_bytes", d->live_bytes);
    jsonw_u64(w, "live_count", d->live_count);
    jsonw_u64(w, "alloc_calls", d->alloc_calls);
    jsonw_u64(w, "free_calls", d->free_calls);
    jsonw_u64(w, "failed_calls", d->failed_calls);
    jsonw_obj_end(w);
}

static void write_devices(struct jsonw *w, const struct report_devinfo *info)
{
    jsonw_arr_begin(w, "devices");
    /* Calls whose device could not be told (no driver, no context) are no device's: they go to
     * "unattributed" (write_unattributed), so every device listed has its ordinal. */
    for (int i = 0; i < VW_MAX_DEVICES; i++) {
        const struct core_device *d = &snap.devices[i];
        if (!d->active)
            continue;
        const struct report_devinfo *in = &info[i];
        jsonw_obj_begin(w, NULL);
        jsonw_u64(w, "ordinal", (uint64_t)i);
        jsonw_str(w, "name", in->name[0] ? in->name : NULL);
        jsonw_str(w, "pci_bus_id", in->pci_bus_id[0] ? in->pci_bus_id : NULL);
        jsonw_str(w, "uuid", in->uuid[0] ? in->uuid : NULL);
        opt_i64(w, "total_bytes", in->total);
        opt_i64(w, "free_bytes", in->free);
        opt_i64(w, "limit_bytes", in->limit);
        jsonw_u64(w, "live_bytes", d->live_bytes);
        jsonw_u64(w, "live_count", d->live_count);
        jsonw_u64(w, "peak_live_bytes", d->peak_live_bytes);
        if (d->peak_time_ns)
            jsonw_u64(w, "peak_time_unix_ns", d->peak_time_ns);
        else
            jsonw_null(w, "peak_time_unix_ns");
        int64_t extra = in->pool_extra > 0 ? in->pool_extra : 0;
        int64_t reserved = (int64_t)d->live_bytes + extra;
        int64_t peak = (int64_t)d->peak_live_bytes;
        if (reserved > peak)
            peak = reserved;
        if (in->pool_reserved_high > peak)
            peak = in->pool_reserved_high;
        if (peak_reserved_seen[i] > peak)
            peak = peak_reserved_seen[i];
        peak_reserved_seen[i] = peak;
        jsonw_i64(w, "reserved_bytes", reserved);
        jsonw_i64(w, "peak_reserved_bytes", peak);
        if (d->pool_used && in->pool_extra >= 0)
            jsonw_i64(w, "pool_cached_bytes", in->pool_extra);
        else if (d->pool_used)
            jsonw_null(w, "pool_cached_bytes");
        else
            jsonw_i64(w, "pool_cached_bytes", 0);
        if (in->total >= 0 && in->free >= 0) {
            int64_t used = in->total - in->free;
            jsonw_i64(w, "used_bytes", used);
            jsonw_i64(w, "untracked_bytes", used - reserved);
        } else {
            jsonw_null(w, "used_bytes");
            jsonw_null(w, "untracked_bytes");
        }
        jsonw_u64(w, "alloc_calls", d->alloc_calls);
        jsonw_u64(w, "free_calls", d->free_calls);
        jsonw_u64(w, "failed_calls", d->failed_calls);
        jsonw_u64(w, "cache_flushes", d->cache_flushes);
        jsonw_u64(w, "va_reserved_bytes", d->va_reserved_bytes);
        if (d->steps) {
            jsonw_obj_begin(w, "steps");
            jsonw_u64(w, "count", d->steps);
            jsonw_u64(w, "last_unix_ns", d->step_time_ns);
            jsonw_u64(w, "live_bytes", d->step_live_bytes);
            jsonw_u64(w, "peak_bytes", d->step_peak_bytes);
            jsonw_u64(w, "first_peak_bytes", d->first_step_peak_bytes);
            jsonw_u64(w, "phase_count", d->phase_steps);
            jsonw_obj_end(w);
        } else {
            jsonw_null(w, "steps");
        }
        if (in->nprocs >= 0) {
            int n = in->nprocs < REPORT_PROCS_MAX ? in->nprocs : REPORT_PROCS_MAX;
            memcpy(procs_seen[i], in->procs, (size_t)n * sizeof(in->procs[0]));
            nprocs_seen[i] = n + 1;
        }
        if (nprocs_seen[i] == 0) {
            jsonw_null(w, "other_processes");
        } else {
            jsonw_arr_begin(w, "other_processes");
            for (int k = 0; k < nprocs_seen[i] - 1; k++) {
                const struct report_proc *pr = &procs_seen[i][k];
                jsonw_obj_begin(w, NULL);
                jsonw_u64(w, "pid", pr->pid);
                jsonw_str(w, "name", pr->name[0] ? pr->name : NULL);
                opt_i64(w, "used_bytes", pr->used);
                jsonw_obj_end(w);
            }
            jsonw_arr_end(w);
        }
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
}

static void write_failures(struct jsonw *w)
{
    static const char *retried[] = { NULL, "succeeded", "failed" };
    jsonw_arr_begin(w, "failures");
    for (int i = 0; i < snap.nfailures; i++) {
        const struct core_failure *f = &snap.failures[i];
        jsonw_obj_begin(w, NULL);
        jsonw_u64(w, "time_unix_ns", f->time_ns);
        jsonw_str(w, "api", f->api);
        opt_i64(w, "device", f->device);
        jsonw_u64(w, "size", f->size);
        jsonw_i64(w, "error_code", f->error_code);
        jsonw_str(w, "error_name", f->error_name);
        jsonw_bool(w, "oom", f->oom);
        jsonw_u64(w, "callsite", f->callsite);
        jsonw_u64(w, "live_bytes_at_failure", f->live_at);
        jsonw_u64(w, "reserved_bytes_at_failure", f->reserved_at);
        opt_i64(w, "free_bytes_at_failure", f->free_at);
        jsonw_str(w, "retried", retried[f->retried < 3 ? f->retried : 0]);
        if (f->retried)
            jsonw_u64(w, "freed_before_retry_bytes", f->retry_freed);
        else
            jsonw_null(w, "freed_before_retry_bytes");
        jsonw_i64(w, "thread", f->tid);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
    jsonw_u64(w, "failures_total", snap.failures_total);

    jsonw_arr_begin(w, "pressure_events");
    for (int i = 0; i < snap.nevents; i++) {
        const struct core_event *e = &snap.events[i];
        jsonw_obj_begin(w, NULL);
        jsonw_str(w, "kind", "cache_flush");
        jsonw_u64(w, "time_unix_ns", e->time_ns);
        jsonw_str(w, "api", e->api);
        opt_i64(w, "device", e->device);
        jsonw_u64(w, "size", e->size);
        jsonw_u64(w, "freed_bytes", e->freed_bytes);
        jsonw_u64(w, "freed_count", e->freed_count);
        jsonw_u64(w, "callsite", e->callsite);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
    jsonw_u64(w, "pressure_events_total", snap.events_total);

    jsonw_arr_begin(w, "markers");
    for (int i = 0; i < snap.nmarkers; i++) {
        jsonw_obj_begin(w, NULL);
        jsonw_u64(w, "time_unix_ns", snap.markers[i].time_ns);
        jsonw_str(w, "label", snap.markers[i].label);
        jsonw_u64(w, "live_bytes", snap.markers[i].live_bytes);
        jsonw_u64(w, "phase_peak_bytes", snap.markers[i].phase_peak_bytes);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
}

/* qsort_r's order of the call sites `sites` (the argument) by their ids: most live first. */
static int by_live(const void *a, const void *b, void *sites)
{
    const struct core_callsite *cs = sites;
    const struct core_callsite *x = &cs[*(const uint32_t *)a];
    const struct core_callsite *y = &cs[*(const uint32_t *)b];
    if (x->live_bytes != y->live_bytes)
        return x->live_bytes < y->live_bytes ? 1 : -1;
    /* Then what was live at the peak: for a run that fits, the sites people ask about. */
    if (x->live_bytes_at_peak != y->live_bytes_at_peak)
        return x->live_bytes_at_peak < y->live_bytes_at_peak ? 1 : -1;
    if (x->alloc_bytes_total != y->alloc_bytes_total)
        return x->alloc_bytes_total < y->alloc_bytes_total ? 1 : -1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* The call sites [0, n) referenced elsewhere in the report, marked in `want`: they are always
 * listed. */
static void mark_referenced(bool *want, uint32_t n, int nlive)
{
    for (int i = 0; i < snap.nfailures; i++)
        if (snap.failures[i].callsite < n)
            want[snap.failures[i].callsite] = true;
    for (int i = 0; i < snap.nevents; i++)
        if (snap.events[i].callsite < n)
            want[snap.events[i].callsite] = true;
    for (int i = 0; i < nlive; i++)
        if (live[i].callsite < n)
            want[live[i].callsite] = true;
    for (int i = 0; i < snap.ncrossings; i++)
        if (snap.crossings[i].callsite < n)
            want[snap.crossings[i].callsite] = true;
    for (uint32_t i = 0; i < trace_copy_.n; i++)
        if (trace_copy_.ev[i].callsite < n)
            want[trace_copy_.ev[i].callsite] = true;
    /* The timeline's growth steps name their call sites too. */
    for (int i = 0; i <= VW_MAX_DEVICES; i++) {
        if (!snap.devices[i].active || !core_copy_timeline(i, &tl_copy))
            continue;
        for (uint32_t j = 0; j < tl_copy.nsteps; j++)
            if (tl_copy.steps[j].callsite < n)
                want[tl_copy.steps[j].callsite] = true;
    }
}

/* One entry of "callsites": call site `id`, its frames at `frames` (symbols looked up through
 * `cache`, names relative to the program `exe`). */
static void write_callsite(struct jsonw *w, uint32_t id, const struct core_callsite *c,
                           const uint64_t *frames, struct sym **cache, const char *exe)
{
    jsonw_obj_begin(w, NULL);
    jsonw_u64(w, "id", id);
    write_frames(w, frames, c->nframes, cache, exe);
    jsonw_u64(w, "live_bytes", c->live_bytes);
    jsonw_u64(w, "live_count", c->live_count);
    jsonw_u64(w, "alloc_calls", c->alloc_calls);
    jsonw_u64(w, "alloc_bytes_total", c->alloc_bytes_total);
    /* The same site at each device's peak and at the latest out-of-memory failure
     * (docs/report-format.md, "What was live at the peak"). */
    jsonw_u64(w, "live_bytes_at_peak", c->live_bytes_at_peak);
    if (c->has_failure)
        jsonw_u64(w, "live_bytes_at_failure", c->live_bytes_at_failure);
    else
        jsonw_null(w, "live_bytes_at_failure");
    /* Where its phase began, for runs without markers (docs/advice.md). */
    if (c->first_time_ns) {
        jsonw_u64(w, "first_alloc_unix_ns", c->first_time_ns);
        jsonw_u64(w, "live_bytes_before_first", c->first_live_before);
        jsonw_u64(w, "peak_live_bytes_before_first", c->first_peak_before);
    } else {
        jsonw_null(w, "first_alloc_unix_ns");
        jsonw_null(w, "live_bytes_before_first");
        jsonw_null(w, "peak_live_bytes_before_first");
    }
    jsonw_obj_end(w);
}

static int write_callsites(struct jsonw *w, int nlive)
{
    uint32_t n = snap.ncallsites;
    /* Room for the longest chain a site can have (with Python frames, longer than the stack
     * depth: the copy cuts whatever does not fit, and the depth alone cut the chains of the sites
     * listed last). Python frames asked for, whether or not they are on now. */
    uint32_t fcap =
            n * (uint32_t)pyframes_chain_max(options_current.stack_depth, options_current.python);
    struct core_callsite *cs = malloc(sizeof(*cs) * (n ? n : 1));
    uint64_t *fr = malloc(sizeof(*fr) * (fcap ? fcap : 1));
    uint32_t *order = malloc(sizeof(*order) * (n ? n : 1));
    bool *want = calloc(n ? n : 1, 1);
    if (!cs || !fr || !order || !want) {
        free(cs);
        free(fr);
        free(order);
        free(want);
        return -1;
    }
    core_copy_callsites(cs, n, fr, fcap);
    mark_referenced(want, n, nlive);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (cs[i].live_count > 0 || cs[i].alloc_calls > 0 || want[i])
            order[k++] = i;
    qsort_r(order, k, sizeof(*order), by_live, cs);

    char exe[PATH_MAX];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[el > 0 ? el : 0] = 0;
    struct sym *cache = NULL;
    uint64_t left_out = 0;
    jsonw_arr_begin(w, "callsites");
    for (uint32_t j = 0, listed = 0; j < k; j++) {
        uint32_t i = order[j];
        if (listed >= CALLSITES_MAX && !want[i]) {
            left_out++;
            continue;
        }
        listed++;
        write_callsite(w, i, &cs[i], &fr[cs[i].frames_off], &cache, exe);
    }
    jsonw_arr_end(w);
    jsonw_u64(w, "callsites_truncated", left_out);
    jsonw_u64(w, "callsites_dropped", snap.callsites_dropped);
    struct sym *s, *t;
    HASH_ITER(hh, cache, s, t)
    {
        HASH_DEL(cache, s);
        free(s->symbol);
        free(s);
    }
    free(cs);
    free(fr);
    free(order);
    free(want);
    return 0;
}

/* The whole-run timeline (docs/report-format.md, "timeline"): per device, the buckets in use,
 * oldest first, and the largest growth steps. Failures, cache flushes and markers are the
 * report's own lists, at full precision; they are not repeated here. */
static void write_timeline(struct jsonw *w, const struct report_devinfo *info)
{
    jsonw_obj_begin(w, "timeline");
    jsonw_u64(w, "buckets_max", VW_TL_BUCKETS);
    jsonw_arr_begin(w, "devices");
    for (int i = 0; i < VW_MAX_DEVICES; i++) {
        if (!snap.devices[i].active || !core_copy_timeline(i, &tl_copy))
            continue;
        const struct timeline_device *t = &tl_copy;
        jsonw_obj_begin(w, NULL);
        jsonw_u64(w, "ordinal", (uint64_t)i);
        jsonw_u64(w, "start_unix_ns", t->start_ns);
        jsonw_u64(w, "bucket_ns", 1ull << t->shift);
        jsonw_u64(w, "merges", t->merges);
        jsonw_u64(w, "events", t->events);
        opt_i64(w, "capacity_bytes", info[i].total);
        opt_i64(w, "limit_bytes", info[i].limit);
        jsonw_arr_begin(w, "buckets");
        for (uint32_t k = 0; k <= t->cur && k < VW_TL_BUCKETS; k++) {
            const struct timeline_bucket *b = &t->b[k];
            if (!b->used)
                continue;
            jsonw_obj_begin(w, NULL);
            jsonw_u64(w, "t", t->start_ns + ((uint64_t)k << t->shift));
            jsonw_u64(w, "live_min", b->live_min);
            jsonw_u64(w, "live_max", b->live_max);
            jsonw_u64(w, "live", b->live_last);
            jsonw_u64(w, "peak_t", b->peak_time_ns);
            jsonw_u64(w, "reserved_max", b->reserved_max);
            jsonw_u64(w, "reserved", b->reserved_last);
            if (b->has_untracked) {
                jsonw_i64(w, "untracked_max", b->untracked_max);
                jsonw_i64(w, "untracked", b->untracked_last);
            } else {
                jsonw_null(w, "untracked_max");
                jsonw_null(w, "untracked");
            }
            jsonw_u64(w, "events", b->events);
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
        uint32_t ns = timeline_steps_sorted(t, tl_steps);
        jsonw_arr_begin(w, "steps");
        for (uint32_t k = 0; k < ns; k++) {
            const struct timeline_step *s = &tl_steps[k];
            jsonw_obj_begin(w, NULL);
            jsonw_u64(w, "time_unix_ns", s->time_ns);
            jsonw_u64(w, "size", s->size);
            jsonw_u64(w, "live_bytes_after", s->live_after);
            jsonw_str(w, "api", s->api);
            jsonw_u64(w, "callsite", s->callsite);
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
    jsonw_obj_end(w);
}

/* Copy the trace's ring (before the core's snapshot, so that every call site an event names is
 * among the snapshot's). Without memory for it the report says kept 0. */
static void trace_take(void)
{
    uint32_t cap = __atomic_load_n(&trace_cap, __ATOMIC_RELAXED);
    free(trace_copy_.ev);
    trace_copy_.ev = cap ? malloc(sizeof(*trace_copy_.ev) * cap) : NULL;
    trace_copy_.n = trace_copy_.ev ? trace_copy(trace_copy_.ev, cap, &trace_copy_.total,
                                                &trace_copy_.lost)
                                   : 0;
    if (!trace_copy_.ev)
        trace_copy(NULL, 0, &trace_copy_.total, &trace_copy_.lost);
}

/* The latest allocations and frees one by one (docs/report-format.md, "trace"), oldest first. */
static void write_trace(struct jsonw *w)
{
    jsonw_obj_begin(w, "trace");
    jsonw_u64(w, "capacity", __atomic_load_n(&trace_cap, __ATOMIC_RELAXED));
    jsonw_u64(w, "total", trace_copy_.total);
    jsonw_u64(w, "kept", trace_copy_.n);
    jsonw_u64(w, "lost", trace_copy_.lost);
    jsonw_arr_begin(w, "events");
    for (uint32_t i = 0; i < trace_copy_.n; i++) {
        const struct trace_event *e = &trace_copy_.ev[i];
        jsonw_obj_begin(w, NULL);
        jsonw_u64(w, "time_unix_ns", e->time_ns);
        jsonw_str(w, "action", e->is_free ? "free" : "alloc");
        jsonw_hex(w, "address", e->address);
        jsonw_u64(w, "size", e->size);
        opt_i64(w, "device", e->device);
        jsonw_str(w, "api", e->api);
        jsonw_u64(w, "callsite", e->callsite);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
    jsonw_obj_end(w);
}

static bool write_body(int fd, const char *reason, const struct report_devinfo *info, int nlive,
                       uint64_t live_total)
{
    static struct jsonw w; /* 16 KiB buffer: under report_lock, kept off the caller's stack */
    jsonw_init(&w, fd);
    jsonw_obj_begin(&w, NULL);
    jsonw_str(&w, "schema", "vramwatch.report/1");
    jsonw_str(&w, "reason", reason);
    jsonw_u64(&w, "time_unix_ns", platform_now_ns());
    jsonw_obj_begin(&w, "vramwatch");
    jsonw_str(&w, "version", VW_VERSION);
    jsonw_i64(&w, "stack_depth", options_current.stack_depth);
    jsonw_bool(&w, "python", pyframes_enabled());
    /* The library's own tables as they stand (allocation tables, call sites, their frames and
     * index): what the documented memory bound is about, and what the load test checks. */
    jsonw_u64(&w, "table_bytes", core_mapped_bytes());
    jsonw_obj_end(&w);
    write_process(&w);
    write_devices(&w, info);
    write_unattributed(&w);
    write_failures(&w);
    framework_write(&w);
    if (write_callsites(&w, nlive) != 0)
        return false;
    jsonw_arr_begin(&w, "live");
    for (int i = 0; i < nlive; i++) {
        const struct core_alloc *a = &live[i];
        jsonw_obj_begin(&w, NULL);
        jsonw_hex(&w, "address", a->key);
        jsonw_u64(&w, "size", a->size);
        opt_i64(&w, "device", a->device);
        jsonw_str(&w, "api", a->api);
        jsonw_str(&w, "kind", kind_name(a->kind));
        jsonw_u64(&w, "callsite", a->callsite);
        jsonw_u64(&w, "time_unix_ns", a->time_ns);
        jsonw_obj_end(&w);
    }
    jsonw_arr_end(&w);
    jsonw_u64(&w, "live_truncated",
              live_total > (uint64_t)nlive ? live_total - (uint64_t)nlive : 0);
    jsonw_u64(&w, "allocations_untracked", snap.allocs_untracked);
    jsonw_arr_begin(&w, "limit_crossings");
    for (int i = 0; i < snap.ncrossings; i++) {
        const struct core_crossing *x = &snap.crossings[i];
        jsonw_obj_begin(&w, NULL);
        jsonw_u64(&w, "time_unix_ns", x->time_ns);
        jsonw_str(&w, "api", x->api);
        opt_i64(&w, "device", x->device);
        jsonw_u64(&w, "size", x->size);
        jsonw_u64(&w, "callsite", x->callsite);
        jsonw_u64(&w, "live_bytes_at_crossing", x->live_at);
        jsonw_obj_end(&w);
    }
    jsonw_arr_end(&w);
    write_timeline(&w, info);
    write_trace(&w);
    jsonw_obj_begin(&w, "host_pinned");
    jsonw_u64(&w, "live_bytes", snap.host.live_bytes);
    jsonw_u64(&w, "peak_live_bytes", snap.host.peak_live_bytes);
    jsonw_u64(&w, "alloc_calls", snap.host.alloc_calls);
    jsonw_u64(&w, "free_calls", snap.host.free_calls);
    jsonw_u64(&w, "failed_calls", snap.host.failed_calls);
    jsonw_obj_end(&w);
    jsonw_obj_end(&w);
    return jsonw_finish(&w);
}

/* A report at our name written before this process started belongs to an earlier process that
 * had the same pid on a host of the same name: pids wrap, and a container restarted after an
 * out-of-memory crash starts its job again with the same pids and host name, so the crash's
 * report would be overwritten by the next attempt's. It is kept under a name with its time,
 * vramwatch-HOST-PID-SECONDS.json (a link, then the old name removed: never replacing another).
 * The process start is known to the second (/proc/stat's btime), hence the 2 s margin. */
static void keep_previous(int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid())
        return;
    int64_t start = own_start_ns();
    int64_t written = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (start <= 0 || written >= start - 2000000000LL)
        return;
    size_t n = strlen(name);
    if (n < 5 || strcmp(name + n - 5, ".json") != 0)
        return;
    char aside[PATH_MAX];
    snprintf(aside, sizeof(aside), "%.*s-%lld.json", (int)(n - 5), name,
             (long long)st.st_mtim.tv_sec);
    if (linkat(dirfd, name, dirfd, aside, 0) == 0)
        unlinkat(dirfd, name, 0);
    else
        log_msg(VW_LOG_INFO, "an earlier process's report %s is overwritten: %s", name,
                strerror(errno));
}

/* A process killed while writing a report leaves its temporary file behind for good, and a job
 * that crashes in a loop fills its folder with them. The first report a process writes in a
 * folder removes those whose writer is certainly gone; anything in doubt stays. A name is
 * removed only when all of these hold:
 *  - it is exactly vramwatch-HOST-PID.json.tmp-TID-SEQ with our own host name: a pid means
 *    nothing on another host (a shared folder);
 *  - no process has that pid here (kill(pid, 0) fails with ESRCH), or the pid is ours: this
 *    process writes one report at a time, under report_lock, so a temporary name with our pid
 *    is an earlier image's (before an exec) or an earlier process's (a restarted container);
 *  - it is a regular file of ours with no other name;
 *  - nobody holds a lock on it. Writers hold flock(LOCK_EX) on their temporary file while they
 *    write. This is what protects a writer in another PID namespace on the same host name (two
 *    containers sharing the host's UTS namespace and a folder): its pid, seen from here, is some
 *    other process or none, so kill() says nothing about it, but its lock is on the same file;
 *  - it has not been written to for STALE_AGE_S: that covers the moment between a writer's
 *    create and its lock, and between its close and its rename, and writers of earlier versions
 *    that took no lock. A live writer writes all the time (one 16 KiB buffer after another).
 * A lock that cannot be taken for any reason (a file system without flock) keeps the file.
 * Live-state files of killed writers (vramwatch-live.HOST.PID[.N], live.c) go by the same rule,
 * with LIVE_STALE_AGE_S for the age: a live writer rewrites its file every second and holds no
 * descriptor (so no lock) between ticks; ten seconds untouched with no such pid here is dead.
 * Both the first report and the first live-state file a process makes in a folder sweep it. */
#define STALE_AGE_S 60
#define LIVE_STALE_AGE_S 10

static bool take_digits(const char **s, long long *out)
{
    const char *p = *s;
    long long v = 0;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (LLONG_MAX - 9) / 10)
            return false;
        v = v * 10 + (*p - '0');
    }
    *s = p;
    *out = v;
    return true;
}

/* The writer's pid from a temporary report name (vramwatch-HOST-PID[.N].json.tmp-TID-SEQ) or a
 * live-state name (vramwatch-live.HOST.PID[.N]) of ours on this host, or -1; *live tells which. */
static long long stale_pid(const char *name, const char *host, bool *is_live)
{
    size_t hl = strlen(host);
    long long pid, tid, seq, n;
    *is_live = strncmp(name, VW_LIVE_PREFIX, sizeof(VW_LIVE_PREFIX) - 1) == 0;
    if (*is_live) {
        const char *p = name + sizeof(VW_LIVE_PREFIX) - 1;
        if (strncmp(p, host, hl) != 0 || p[hl] != '.')
            return -1;
        p += hl + 1;
        if (!take_digits(&p, &pid) || (*p == '.' && (p++, !take_digits(&p, &n))) || *p)
            return -1;
        return pid >= 1 && pid <= INT_MAX ? pid : -1;
    }
    if (strncmp(name, "vramwatch-", 10) != 0 || strncmp(name + 10, host, hl) != 0 ||
        name[10 + hl] != '-')
        return -1;
    const char *p = name + 10 + hl + 1;
    if (!take_digits(&p, &pid))
        return -1;
    if (*p == '.' && p[1] >= '0' && p[1] <= '9' && (p++, !take_digits(&p, &n)))
        return -1;
    if (strncmp(p, ".json.tmp-", 10) != 0)
        return -1;
    p += 10;
    if (!take_digits(&p, &tid) || *p++ != '-' || !take_digits(&p, &seq) || *p)
        return -1;
    return pid >= 1 && pid <= INT_MAX ? pid : -1;
}

void report_sweep_stale(int dirfd)
{
    char host[256];
    host_name(host, sizeof(host));
    file_safe(host);
    /* Read with getdents64 into a buffer on the stack, not opendir (which mallocs): the
     * library's thread sweeps too, and mallocs nothing (live.c). */
    int rfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return;
    pid_t me = getpid();
    time_t now = time(NULL);
    unsigned removed = 0, removed_live = 0;
    char buf[8192] __attribute__((aligned(8)));
    long got = 0, at = 0;
    struct linux_dirent64 {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[];
    } *de;
    for (;;) {
        if (at >= got) {
            got = syscall(SYS_getdents64, rfd, buf, sizeof(buf));
            if (got <= 0)
                break;
            at = 0;
        }
        de = (struct linux_dirent64 *)(buf + at);
        at += de->d_reclen;
        bool is_live;
        long long pid = stale_pid(de->d_name, host, &is_live);
        /* our own pid: an earlier image's temporary; never our own live-state file */
        if (pid < 0 || (is_live && pid == me))
            continue;
        if (safefile_remove_stale(dirfd, de->d_name, pid,
                                  (long long)now - (is_live ? LIVE_STALE_AGE_S : STALE_AGE_S)))
            ++*(is_live ? &removed_live : &removed);
    }
    close(rfd);
    if (removed)
        log_msg(VW_LOG_INFO, "removed %u temporary report file%s of killed processes", removed,
                removed == 1 ? "" : "s");
    if (removed_live)
        log_msg(VW_LOG_INFO, "removed %u live-state file%s of killed processes", removed_live,
                removed_live == 1 ? "" : "s");
}

/* Whether `name` is held by another user: a name planted in a shared sticky folder, which we
 * may not replace (rename fails with EPERM) and must not write through. */
static bool name_taken(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid != geteuid();
}

/* The first vramwatch-HOST-PID.N.json nobody holds, from now on this process's report name;
 * one warning says where the report went. */
static const char *free_name(int dirfd)
{
    const char *taken = strrchr(report_path(), '/') + 1;
    char was[256];
    snprintf(was, sizeof(was), "%s", taken);
    for (int n = name_n + 1; n < name_n + 64; n++) {
        name_n = n;
        const char *path = report_path();
        struct stat st;
        if (fstatat(dirfd, strrchr(path, '/') + 1, &st, AT_SYMLINK_NOFOLLOW) != 0 &&
            errno == ENOENT) {
            log_msg(VW_LOG_WARN, "the report's name %s in %s is another user's: writing %s", was,
                    options_current.dir, strrchr(path, '/') + 1);
            return path;
        }
    }
    return report_path();
}

/* vramwatch-HOST-PID-request-N.json in the report folder, into buf. */
static const char *request_path(char *buf, size_t size, int n)
{
    char host[256];
    host_name(host, sizeof(host));
    file_safe(host);
    snprintf(buf, size, "%s/vramwatch-%s-%d-request-%d.json", options_current.dir, host,
             (int)getpid(), n);
    return buf;
}

/* A dump on request kept under a name of its own: the first free
 * vramwatch-HOST-PID-request-N.json from the next number on, given to the finished temporary
 * file tmp as a second name. A dump is what the program asked to keep, so it is never replaced:
 * not by the process's later reports (which replace the report's own name, not this one), not
 * by a later dump, not by a process that had our pid before. A hard link fails when the name
 * exists, where a rename would replace it; on a file system without hard links, renameat2's
 * RENAME_NOREPLACE does the same but takes the file, so the report's own name is not updated by
 * this dump. Returns 1 (linked: tmp still there), 2 (tmp renamed) or 0 (failed, errno says
 * why); the path into buf. */
static int keep_request(int dirfd, const char *tmp, char *buf, size_t size)
{
    for (int tries = 0; tries < 1000; tries++) {
        const char *name = strrchr(request_path(buf, size, ++request_n), '/') + 1;
        if (linkat(dirfd, tmp, dirfd, name, 0) == 0)
            return 1;
        if (errno != EEXIST &&
            syscall(SYS_renameat2, dirfd, tmp, dirfd, name, 1 /* RENAME_NOREPLACE */) == 0)
            return 2;
        if (errno != EEXIST)
            return 0;
    }
    return 0;
}

/* Gives the finished temporary file tmp the report's name, replacing the previous report (the
 * file always holds the latest state); a dump on request is kept under a name of its own first
 * (keep_request). The final path into buf (the dump's, for a dump), or NULL (errno says why). */
static const char *publish(int dirfd, const char *tmp, bool request, char *buf, size_t size)
{
    int kept = request ? keep_request(dirfd, tmp, buf, size) : 0;
    if (request && kept != 1)
        return kept ? buf : NULL;
    const char *name = strrchr(report_path(), '/') + 1;
    if (renameat(dirfd, tmp, dirfd, name) != 0) {
        int e = errno;
        if (!((e == EPERM || e == EACCES) && name_taken(dirfd, name))) {
            errno = e;
            return NULL;
        }
        /* taken by another user since we looked: the next free name */
        name = strrchr(free_name(dirfd), '/') + 1;
        if (renameat(dirfd, tmp, dirfd, name) != 0)
            return NULL;
    }
    if (!request)
        snprintf(buf, size, "%s", report_path());
    return buf;
}

int report_write(const char *reason, const struct report_devinfo *info)
{
    int rc = -1;
    demangle_lookup(); /* libstdc++ may have come since set-up */
    pthread_mutex_lock(&report_lock);
    struct safefile_quiet quiet; /* a file size limit fails the write, never ends the program */
    safefile_quiet_begin(&quiet);
    trace_take(); /* first: the call sites it names are all older than the snapshot's count */
    core_snapshot(&snap);
    uint64_t live_total = 0;
    int nlive = core_largest_live(live, LIVE_MAX, &live_total);

    /* A dump on request is also kept in a file of its own (publish); its temporary file is
     * named as the report's, so the rule for killed writers' leftovers covers it. */
    bool request = strcmp(reason, "request") == 0;
    const char *name = strrchr(report_path(), '/') + 1; /* report_path() puts the folder first */
    char tmp[PATH_MAX];
    char why[1024];
    int dirfd = safefile_open_dir(options_current.dir, true, why, sizeof(why));
    if (dirfd < 0) {
        log_warn_once(warned_write, "not writing reports in %s: %s", options_current.dir, why);
        goto out;
    }
    bool first = !previous_checked;
    if (first) {
        previous_checked = true;
        if (name_taken(dirfd, name))
            name = strrchr(free_name(dirfd), '/') + 1;
        keep_previous(dirfd, name);
    }
    /* O_EXCL | O_NOFOLLOW: a name planted in advance (a link to a file of ours) is never
     * written through; the rename then replaces a link at the final name, never its target.
     * A process killed while writing leaves its temporary file; a later process can have the
     * same pid and thread id (a container restarts its job with the same pids), so a taken
     * name moves on to the next number instead of costing the report. */
    int fd = -1;
    for (int tries = 0; tries < 64; tries++) {
        snprintf(tmp, sizeof(tmp), "%s.tmp-%ld-%u", name, (long)syscall(SYS_gettid), report_seq++);
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            break;
    }
    if (fd < 0) {
        log_warn_once(warned_write, "cannot write a report in %s: %s", options_current.dir,
                      strerror(errno));
        goto done;
    }
    /* Held until the close: tells a process cleaning the folder that this writer is alive, even
     * from another PID namespace (report_sweep_stale). Without it the age rule still holds. */
    fd = safefile_high(fd);
    (void)flock(fd, LOCK_EX | LOCK_NB);
    fchmod(fd, 0600); /* whatever the umask */
    bool ok = write_body(fd, reason, info, nlive, live_total);
    if (close(fd) != 0)
        ok = false;
    char done_path[PATH_MAX + 512];
    const char *final = ok ? publish(dirfd, tmp, request, done_path, sizeof(done_path)) : NULL;
    if (!final) {
        int e = errno;
        unlinkat(dirfd, tmp, 0);
        log_warn_once(warned_write, "writing the report %s failed: %s", name, strerror(e));
        goto done;
    }
    log_msg(VW_LOG_INFO, "report written: %s (%s)", final, reason);
    rc = 0;
done:
    /* After our own report, so that an out-of-memory report is not delayed by the folder's size. */
    if (first)
        report_sweep_stale(dirfd);
    close(dirfd);
out:
    safefile_quiet_end(&quiet);
    pthread_mutex_unlock(&report_lock);
    return rc;
}
