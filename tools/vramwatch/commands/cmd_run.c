/* cmd_run.c: `vramwatch run`: runs a command with libvramwatch.so preloaded, then shows the report(s) it left. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "advice.h"
#include "advice_print.h"
#include "colour.h"
#include "commands.h"
#include "common.h"
#include "job.h"
#include "preload.h"
#include "report_view.h"
#include "safefile.h"
#include "sb.h"
#include "simcard.h"
#include "sizes.h"

#ifndef VW_LIBDIR
#define VW_LIBDIR "/usr/local/lib"
#endif
#ifndef VW_PYDIR
#define VW_PYDIR "/usr/local/share/vramwatch/python"
#endif

#define NS_PER_S 1000000000LL
/* A report's process start is derived from /proc (boot time in whole seconds plus clock ticks),
 * so it can read up to a second early. */
#define START_SLACK_NS NS_PER_S

static const char usage[] =
        "usage: vramwatch run [--dir D] [--limit SIZE [--observe]] [--sim CARD] [--tensors]\n"
        "                     [--no-companion] [--color=WHEN] [--] CMD...\n"
        "\n"
        "Runs CMD with libvramwatch.so preloaded. When it ends, prints the post-mortem of the\n"
        "report(s) it left (as `vramwatch report` does), and for a run that did not fit the\n"
        "advice (as `vramwatch advise` does), whose answer (what to change, the command to run\n"
        "next, the fit command) comes first for one report; then exits with CMD's own status\n"
        "(128+N when a signal N killed it).\n"
        "\n"
        "  --dir D        write reports into folder D (VRAMWATCH_DIR; default: $VRAMWATCH_DIR, else\n"
        "                 the current folder); one the library would refuse (anyone may write\n"
        "                 to it without the sticky bit, another user's) is refused at once\n"
        "  --limit SIZE   emulate a smaller card (VRAMWATCH_LIMIT): 16GiB, 14.4GiB, 16G, 16000MB,\n"
        "                 17179869184, a share of the card (90%), or per device 0:16GiB,1:8GiB.\n"
        "                 K M G T KiB MiB GiB TiB are powers of 1024, KB MB GB TB powers of 1000;\n"
        "                 the library reads it with the same grammar. Allocations past it fail as\n"
        "                 out of memory.\n"
        "  --observe      with --limit: allocations past the limit still succeed when the card has\n"
        "                 room; the first crossing per device is recorded, so the run shows its need\n"
        "  --sim CARD     run CMD on the simulated GPU (tools/simgpu), a card of that size (16GiB) or\n"
        "                 name (V100, A100-80GB, H100, ...), unchanged: its stand-in libraries are\n"
        "                 preloaded after the library. vramwatch sim CARD -- CMD runs the same card\n"
        "                 without vramwatch (see vramwatch sim --help)\n"
        "  --tensors      add backend:cudaMallocAsync to PYTORCH_CUDA_ALLOC_CONF, so each PyTorch\n"
        "                 tensor is its own allocation and the report sees tensors, not cache segments\n"
        "  --no-companion do not start the Python companion. For a Python CMD (python, python3.12,\n"
        "                 or a script whose #! line names one) run puts the companion first on\n"
        "                 PYTHONPATH; in a PyTorch job it marks each switch between model.train() and\n"
        "                 model.eval() (epoch 0 train, epoch 0 val, ...) for the advice's phases\n"
        "  --color=WHEN   colour the post-mortem: auto (the default: on a terminal, unless NO_COLOR\n"
        "                 is set to a non-empty value or TERM is dumb), always, or never\n"
        "  --help         this text\n"
        "\n"
        "Options come before CMD, whose own options stay its own; -- may end them.\n"
        "The library is found next to this program, in the build tree, or in " VW_LIBDIR ";\n"
        "VRAMWATCH_LIB=PATH overrides. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to vramwatch are\n"
        "passed on to CMD.\n"
        "Exit status: CMD's; 2 for bad usage or when CMD cannot be started.\n";

struct run_opts {
    const char *dir, *limit;
    bool observe, tensors, no_companion, sim;
    struct simcard card; /* with sim: the simulated card */
    enum colour_mode colour;
    char **cmd;
};

static char *join(const char *dir, const char *name)
{
    struct strbuf b = { 0 };
    sb_printf(&b, "%s/%s", dir, name);
    return b.s;
}

static char *absolute(const char *path)
{
    if (path[0] == '/')
        return util_xstrdup(path);
    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return NULL;
    char *abs = join(cwd, path);
    free(cwd);
    return abs;
}

/* PyTorch's allocator settings with backend:cudaMallocAsync, keeping the other entries. */
static char *with_async_backend(const char *old)
{
    struct strbuf b = { 0 };
    const char *p = old ? old : "";
    while (*p) {
        size_t n = strcspn(p, ",");
        const char *key = p;
        while (key < p + n && (*key == ' ' || *key == '\t'))
            key++;
        bool backend = (size_t)(p + n - key) >= 8 && strncmp(key, "backend", 7) == 0 &&
                       (key[7] == ':' || key[7] == ' ');
        if (n > 0 && !backend) {
            sb_addn(&b, p, n);
            sb_addc(&b, ',');
        }
        p += n;
        if (*p == ',')
            p++;
    }
    sb_add(&b, "backend:cudaMallocAsync");
    return b.s;
}

static bool set_env(const char *name, const char *value)
{
    if (setenv(name, value, 1) == 0)
        return true;
    util_err("run: cannot set %s: %s", name, strerror(errno));
    return false;
}

/* ---- the Python companion ---- */

/* python, python3, python3.12: the names a CPython interpreter goes by. */
static bool python_name(const char *s, size_t n)
{
    const char *base = s;
    for (const char *c = s; c < s + n; c++)
        if (*c == '/')
            base = c + 1;
    n -= (size_t)(base - s);
    if (n < 6 || strncmp(base, "python", 6) != 0)
        return false;
    for (size_t i = 6; i < n; i++)
        if (!((base[i] >= '0' && base[i] <= '9') || base[i] == '.'))
            return false;
    return true;
}

/* The file execvp would run for cmd: itself when it names a path, else the first executable
 * of that name on PATH (malloc'd, or NULL). */
static char *command_file(const char *cmd)
{
    if (strchr(cmd, '/'))
        return util_xstrdup(cmd);
    const char *path = getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin"; /* execvp's default */
    while (*path) {
        size_t n = strcspn(path, ":");
        struct strbuf b = { 0 };
        if (n == 0)
            sb_add(&b, cmd); /* an empty entry is the current folder */
        else
            sb_printf(&b, "%.*s/%s", (int)n, path, cmd);
        struct stat st;
        if (stat(b.s, &st) == 0 && S_ISREG(st.st_mode) && access(b.s, X_OK) == 0)
            return b.s;
        sb_free(&b);
        path += n;
        if (*path == ':')
            path++;
    }
    return NULL;
}

/* Whether cmd runs CPython: its name says so, or it is a script whose #! line names python
 * directly or through env ("#!/usr/bin/env python3", "#!/usr/bin/env -S python3 -u"). Launchers
 * that are Python scripts (torchrun, accelerate) count; a shell script that starts python does
 * not (docs/companion.md says how to start the companion then). */
static bool python_command(const char *cmd)
{
    if (python_name(cmd, strlen(cmd)))
        return true;
    char *file = command_file(cmd);
    if (!file)
        return false;
    char line[256];
    ssize_t n = -1;
    struct stat st;
    const char *kind;
    int fd = util_open_regular(AT_FDCWD, file, 0, &st, &kind);
    free(file);
    if (fd >= 0) {
        n = read(fd, line, sizeof line - 1);
        close(fd);
    }
    if (n < 2 || line[0] != '#' || line[1] != '!')
        return false;
    line[n] = '\0';
    line[strcspn(line, "\n")] = '\0';
    bool after_env = false;
    for (char *w = line + 2;;) {
        w += strspn(w, " \t");
        size_t len = strcspn(w, " \t");
        if (len == 0)
            return false;
        if (!after_env) {
            /* the interpreter itself */
            if (python_name(w, len))
                return true;
            const char *base = w;
            for (char *c = w; c < w + len; c++)
                if (*c == '/')
                    base = c + 1;
            if ((size_t)(w + len - base) != 3 || strncmp(base, "env", 3) != 0)
                return false;
            after_env = true;
        } else if (w[0] != '-' && !memchr(w, '=', len)) {
            /* env's options and VAR=value settings come before the program */
            return python_name(w, len);
        }
        w += len;
    }
}

/* PYTHONPATH with the companion's folder first and the user's entries after it, so Python
 * imports the companion's sitecustomize, which runs the user's own one in turn. */
static bool start_companion(void)
{
    char *dir = preload_find_companion();
    if (!dir) {
        util_err(
                "run: cannot find the Python companion (%s in python/ or ../share/vramwatch/python "
                "beside this program, or in " VW_PYDIR
                "); the job runs without automatic phase markers",
                PRELOAD_COMPANION_MODULE);
        return true;
    }
    if (strchr(dir, ':')) {
        /* PYTHONPATH is split at colons: such a folder would add two wrong entries. */
        util_err(
                "run: %s: PYTHONPATH cannot hold a path with a colon; the job runs without the Python "
                "companion",
                dir);
        free(dir);
        return true;
    }
    const char *old = getenv("PYTHONPATH");
    struct strbuf b = { 0 };
    sb_add(&b, dir);
    if (old && *old)
        sb_printf(&b, ":%s", old);
    bool ok = set_env("PYTHONPATH", b.s);
    sb_free(&b);
    free(dir);
    return ok;
}

/* ---- the child ---- */

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t pending_signal;

/* Signals sent to vramwatch by another process (kill, a batch system) go on to the child. A
 * terminal's Ctrl-C (si_code from the kernel) already reached the child, which is in the same
 * foreground process group, so it is not sent twice. vramwatch itself keeps waiting: it still
 * has to show the report. */
static void forward_signal(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    if (si && si->si_code > 0)
        return;
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
    else
        pending_signal = sig;
}

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

static void install_forwarding(void)
{
    struct sigaction sa = { 0 };
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaction(forwarded[i], &sa, NULL);
}

/* Runs cmd; returns its exit status as a shell reports it, or -1 (with the reason said) when it
 * could not be started. */
static int run_child(char **cmd, pid_t *started)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        util_err("run: cannot start %s: %s", cmd[0], strerror(errno));
        return -1;
    }
    install_forwarding();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        util_err("run: cannot start %s: %s", cmd[0], strerror(errno));
        close(pipefd[0]);
        close(pipefd[1]);
        return -1;
    }
    if (pid == 0) {
        /* The pipe closes on a successful exec; on failure the errno goes up it. */
        close(pipefd[0]);
        execvp(cmd[0], cmd);
        int e = errno;
        ssize_t w = write(pipefd[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    child_pid = pid;
    *started = pid;
    if (pending_signal)
        kill(pid, pending_signal);
    close(pipefd[1]);
    int exec_errno = 0;
    ssize_t r;
    do
        r = read(pipefd[0], &exec_errno, sizeof exec_errno);
    while (r < 0 && errno == EINTR);
    close(pipefd[0]);

    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            util_err("run: lost track of %s: %s", cmd[0], strerror(errno));
            return -1;
        }
    }
    child_pid = 0;
    if (r == (ssize_t)sizeof exec_errno) {
        util_err("run: cannot run %s: %s", cmd[0], strerror(exec_errno));
        return -1;
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_PROBLEM;
}

/* ---- the reports it left ---- */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static bool report_name(const char *name)
{
    return strncmp(name, "vramwatch-", 10) == 0 && util_has_suffix(name, ".json");
}

/* The report files in the folder before the command starts, to tell its reports from older ones
 * whatever the clocks say: a report is the run's if its file is new or was rewritten since. */
struct seen_file {
    char *name;
    ino_t ino;
    struct timespec mtime;
};

struct snapshot {
    struct seen_file *v;
    size_t n, cap;
};

static void take_snapshot(const char *dir, struct snapshot *snap)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (!report_name(e->d_name) || fstatat(dirfd(d), e->d_name, &st, 0) != 0)
            continue;
        if (snap->n == snap->cap) {
            snap->cap = snap->cap ? snap->cap * 2 : 16;
            snap->v = util_xrealloc(snap->v, snap->cap * sizeof *snap->v);
        }
        snap->v[snap->n++] = (struct seen_file){ util_xstrdup(e->d_name), st.st_ino, st.st_mtim };
    }
    closedir(d);
}

static bool unchanged(const struct snapshot *snap, const char *name, const struct stat *st)
{
    for (size_t i = 0; i < snap->n; i++)
        if (strcmp(snap->v[i].name, name) == 0)
            return snap->v[i].ino == st->st_ino && snap->v[i].mtime.tv_sec == st->st_mtim.tv_sec &&
                   snap->v[i].mtime.tv_nsec == st->st_mtim.tv_nsec;
    return false;
}

static void free_snapshot(struct snapshot *snap)
{
    for (size_t i = 0; i < snap->n; i++)
        free(snap->v[i].name);
    free(snap->v);
}

struct found {
    struct model_report *v;
    size_t n, cap;
};

/* Reports of this run: vramwatch-*.json files in dir that are new or rewritten since the snapshot,
 * by a process on this host that started with the run or later. The command may be a shell or
 * a launcher that starts the program, so the child's pid alone cannot find them. */
static void collect(const char *dir, const struct snapshot *before, int64_t start_ns,
                    struct found *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return; /* no folder: nothing was written */
    char host[HOST_NAME_MAX + 1] = "";
    if (gethostname(host, sizeof host) != 0)
        host[0] = '\0';
    host[HOST_NAME_MAX] = '\0';
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (!report_name(e->d_name) || fstatat(dirfd(d), e->d_name, &st, 0) != 0 ||
            !S_ISREG(st.st_mode) || unchanged(before, e->d_name, &st))
            continue;
        char *path = join(dir, e->d_name);
        struct model_report r;
        if (!common_load_report("run", path, &r)) {
            free(path);
            continue;
        }
        bool earlier = r.process.start_unix_ns.known &&
                       r.process.start_unix_ns.v < start_ns - START_SLACK_NS;
        if (earlier || (host[0] && strcmp(r.process.host, host) != 0)) {
            model_free(&r);
            free(path);
            continue;
        }
        if (out->n == out->cap) {
            out->cap = out->cap ? out->cap * 2 : 4;
            out->v = util_xrealloc(out->v, out->cap * sizeof *out->v);
        }
        r.path = path; /* owned from here; freed in cmd_run */
        out->v[out->n++] = r;
    }
    closedir(d);
}

/* When the child itself left a report, that one and those of its own children belong to the run;
 * others that appeared meanwhile are probably another program writing to the same folder.
 * Without one (a shell or launcher in between), every report found is kept. */
static void prefer_child(struct found *f, pid_t child)
{
    bool has_own = false;
    for (size_t i = 0; i < f->n; i++)
        has_own |= f->v[i].process.pid == child;
    if (!has_own)
        return;
    size_t kept = 0;
    for (size_t i = 0; i < f->n; i++) {
        struct model_report *r = &f->v[i];
        if (r->process.pid == child || (r->process.ppid.known && r->process.ppid.v == child)) {
            f->v[kept++] = *r;
        } else {
            free((char *)r->path);
            model_free(r);
        }
    }
    f->n = kept;
}

/* ---- the command ---- */

static int run_option(struct util_args *a, int c, void *opts)
{
    struct run_opts *o = opts;
    struct sizes_limit limit;
    switch (c) {
    case 'd':
        o->dir = a->value;
        return -1;
    case 'l':
        /* checked with the library's own grammar, and handed to it as written */
        if (!util_args_limit(a, &limit))
            return EXIT_USAGE;
        o->limit = a->value;
        return -1;
    case 'O':
        o->observe = true;
        return -1;
    case 'T':
        o->tensors = true;
        return -1;
    case 'S':
        if (!simcard_option(a, &o->card))
            return EXIT_USAGE;
        o->sim = true;
        return -1;
    case 'N':
        o->no_companion = true;
        return -1;
    default:
        return EXIT_USAGE;
    }
}

/* The options up to CMD, which keeps its own ("run --limit 8G python train.py --batch 4"): -1 to
 * go on, else the exit status. */
static int parse(int argc, char **argv, struct run_opts *o)
{
    static const struct option longopts[] = {
        { "dir", required_argument, NULL, 'd' },
        { "limit", required_argument, NULL, 'l' },
        { "observe", no_argument, NULL, 'O' },
        { "tensors", no_argument, NULL, 'T' },
        { "no-companion", no_argument, NULL, 'N' },
        { "color", required_argument, NULL, COMMON_OPT_COLOR },
        { "sim", required_argument, NULL, 'S' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const struct common_cmd cmd = { .name = "run",
                                    .usage = usage,
                                    .shortopts = "+h",
                                    .longopts = longopts,
                                    .option = run_option,
                                    .opts = o };
    struct common_opts co;
    int status = common_options(&cmd, argc, argv, &co);
    if (status >= 0)
        return status;
    o->colour = co.colour;
    if (co.n_operands == 0)
        return util_usage_error(&co.args, "no command given");
    if (o->observe && !o->limit)
        return util_usage_error(&co.args, "--observe needs --limit SIZE");
    o->cmd = co.operands;
    return -1;
}

/* Sets LD_PRELOAD (with --sim, the simulated card's environment), PYTHONPATH for the companion,
 * and the VRAMWATCH_* and PyTorch variables for the child. */
static bool prepare_env(const struct run_opts *o, const char *lib, const char *dir)
{
    bool ok;
    if (o->sim) {
        ok = simcard_setup("run", &o->card, lib);
    } else {
        char *pre = preload_value(lib, getenv("LD_PRELOAD"));
        ok = set_env("LD_PRELOAD", pre);
        free(pre);
    }
    ok = ok && set_env("VRAMWATCH_DIR", dir);
    if (ok && !o->no_companion && python_command(o->cmd[0]))
        ok = start_companion();
    if (ok && o->limit)
        ok = set_env("VRAMWATCH_LIMIT", o->limit) &&
             set_env("VRAMWATCH_LIMIT_MODE", o->observe ? "observe" : "enforce");
    if (ok && o->tensors) {
        struct strbuf msg = { 0 };
        /* PyTorch reads the newer name first when both are set, so both get the backend. */
        static const char *const names[] = { "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF" };
        for (size_t i = 0; i < 2 && ok; i++) {
            const char *cur = getenv(names[i]);
            if (i == 1 && !cur)
                continue;
            char *merged = with_async_backend(cur);
            ok = set_env(names[i], merged);
            sb_printf(&msg, "%s%s=%s", i ? " and " : "", names[i], merged);
            free(merged);
        }
        if (ok)
            util_err(
                    "--tensors: %s: each tensor is its own cudaMallocAsync, so the report sees tensors, "
                    "not cache segments",
                    sb_str(&msg));
        sb_free(&msg);
    }
    return ok;
}

/* What vramwatch advise would print for this report, from the report already loaded: all of it
 * (ADVICE_ALL), the answer alone (ADVICE_ANSWER) or what follows the answer (ADVICE_DETAILS). */
enum advice_part { ADVICE_ALL, ADVICE_ANSWER, ADVICE_DETAILS };
static void print_advice(const struct model_report *r, enum advice_part part)
{
    struct advice a;
    struct advice_opts ao = { .target = 0, .headroom = ADVICE_DEFAULT_HEADROOM };
    struct strbuf err = { 0 };
    if (advice_build(&a, r, 1, &ao, &err)) {
        if (part == ADVICE_ANSWER) {
            advice_print_answer(stdout, &a); /* the command line is the one just run */
        } else {
            fputc('\n', stdout);
            if (part == ADVICE_ALL)
                advice_print_text(stdout, &a);
            else
                advice_print_details(stdout, &a);
        }
    } else if (part != ADVICE_DETAILS) {
        util_err("advise: %s", sb_str(&err)); /* once, not for the answer and again for the rest */
    }
    sb_free(&err);
    advice_free(&a);
}

/* Whether the library could write reports in dir, by its own rule (lib/base/safefile.c: every
 * component walked, links and folders of other users refused, a folder anyone may write to
 * needs the sticky bit) and writable by us; a folder still missing is judged by the part of its
 * path that exists (the library makes the rest, 0700). Checked before the job runs: the library
 * can only say so with a warning at the end, after the whole job, and no report. */
static bool report_folder_usable(const char *dir, struct strbuf *why)
{
    char *have = util_xstrdup(dir);
    struct stat st;
    while (stat(have, &st) != 0 && errno == ENOENT) {
        char *slash = strrchr(have, '/');
        if (!slash || slash == have) {
            strcpy(have, "/");
            break;
        }
        *slash = '\0';
    }
    char text[512] = "";
    int fd = safefile_open_dir(have, false, text, sizeof text);
    bool ok = fd >= 0;
    if (!ok) {
        if (strcmp(have, dir) != 0)
            sb_printf(why, "%s: ", have); /* the part that exists is what is refused */
        sb_add(why, text[0] ? text : strerror(errno));
    }
    if (ok && faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
        sb_printf(why, "%s: %s", have, strerror(errno));
        ok = false;
    }
    if (fd >= 0)
        close(fd);
    free(have);
    return ok;
}

/* The status file run asks the library to keep (VRAMWATCH_STATUS, as fit does), in a private
 * folder of its own, so that a run that left no report can say whether the program allocated
 * device memory: "made no device allocation" is only said when it did not. A VRAMWATCH_STATUS
 * of the user's own is kept and read instead. */
struct run_status {
    char *dir;  /* the private folder made for it, removed at the end; NULL for the user's */
    char *path; /* the file */
};

static void status_setup(struct run_status *rs)
{
    memset(rs, 0, sizeof *rs);
    const char *user = getenv("VRAMWATCH_STATUS");
    if (user && *user) {
        rs->path = util_xstrdup(user);
        return;
    }
    const char *tmp = getenv("TMPDIR");
    struct strbuf b = { 0 };
    sb_printf(&b, "%s/vramwatch-run-XXXXXX", tmp && *tmp == '/' ? tmp : "/tmp");
    if (!mkdtemp(b.s)) {
        sb_free(&b);
        return; /* no status: a run without a report says less, nothing else changes */
    }
    rs->dir = b.s;
    rs->path = join(rs->dir, "status");
    if (setenv("VRAMWATCH_STATUS", rs->path, 1) != 0) {
        rmdir(rs->dir);
        free(rs->dir);
        free(rs->path);
        memset(rs, 0, sizeof *rs);
    }
}

/* The peak the status file's first line gives (the library rewrites that one line; fit reads it
 * the same way), or -1 when there is none: no file, or a line without it. */
static int64_t status_peak(const struct run_status *rs)
{
    if (!rs->path)
        return -1;
    struct stat st;
    const char *kind;
    int fd = util_open_regular(AT_FDCWD, rs->path, 0, &st, &kind);
    if (fd < 0)
        return -1;
    char line[512];
    ssize_t n = read(fd, line, sizeof line - 1);
    close(fd);
    if (n <= 0)
        return -1;
    line[n] = '\0';
    line[strcspn(line, "\n")] = '\0';
    const char *p = strncmp(line, "vramwatch-status ", 17) == 0 ? strstr(line, " peak_live_bytes=") : NULL;
    if (!p)
        return -1;
    char *end;
    long long v = strtoll(p + 17, &end, 10);
    return end != p + 17 && v >= 0 ? (int64_t)v : -1;
}

static void status_cleanup(struct run_status *rs)
{
    if (rs->dir) {
        unlink(rs->path);
        rmdir(rs->dir);
        free(rs->dir);
    }
    free(rs->path);
    memset(rs, 0, sizeof *rs);
}

/* The report folder, absolute so that the library (whatever folder the program moves to) and
 * the search for its reports agree on where they are; NULL once the reason is on stderr. */
static char *report_folder(const struct run_opts *o)
{
    const char *want = o->dir ? o->dir : getenv("VRAMWATCH_DIR");
    char *dir = want && *want ? absolute(want) : getcwd(NULL, 0);
    struct stat st;
    if (!dir) {
        util_err("run: cannot tell the current folder: %s", strerror(errno));
        return NULL;
    }
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        util_err("run: %s: not a folder", dir);
        free(dir);
        return NULL;
    }
    struct strbuf why = { 0 };
    if (!report_folder_usable(dir, &why)) {
        util_err("run: the report folder %s cannot be used: %s (the library would write no report "
                 "there; nothing was run)",
                 dir, sb_str(&why));
        sb_free(&why);
        free(dir);
        return NULL;
    }
    sb_free(&why);
    return dir;
}

/* A run that left no report: why, where it can be known. */
static void say_no_report(const char *dir, int64_t peak, int status)
{
    if (peak < 0) {
        util_err("no report: the program made no device allocation");
        return;
    }
    /* It allocated (the status file says so): say why there is no report where it can be
     * known, never that no allocation was made. */
    char pk[UTIL_SIZE_LEN];
    struct strbuf why = { 0 }, fwhy = { 0 };
    if (!report_folder_usable(dir, &fwhy))
        sb_printf(&why, "the report folder %s became unusable: %s", dir, sb_str(&fwhy));
    else if (status > 128)
        sb_printf(&why, "the program was killed by signal %d before it could write one",
                  status - 128);
    else
        sb_add(&why, "the library's warning above says why");
    util_err("no report was written, though the program allocated device memory (peak %s): %s",
             util_fmt_size(peak, pk), sb_str(&why));
    sb_free(&why);
    sb_free(&fwhy);
}

/* The post-mortem of each report the run left, and the advice for one that did not fit. One
 * report: the answer first (what to change, the command to run next), then the post-mortem, then
 * the advice's reasons and figures; several: their view, then the advice for each. */
static void show_reports(struct found *f, pid_t child, enum colour_mode colour)
{
    prefer_child(f, child);
    struct report_opts ro = { .color = colour_wanted(colour) };
    for (size_t i = 0; i < f->n; i++)
        util_err("report: %s", f->v[i].path);
    fflush(stderr);
    /* After an out-of-memory, or an observe-mode run that went over the limit: what to
     * change, from the same report. */
    bool answer_first = f->n == 1 && model_did_not_fit(&f->v[0]);
    if (answer_first) {
        print_advice(&f->v[0], ADVICE_ANSWER);
        fputc('\n', stdout);
    }
    report_view_show(stdout, f->v, f->n, &ro);
    fflush(stdout);
    for (size_t i = 0; i < f->n; i++) {
        if (!model_did_not_fit(&f->v[i]))
            continue;
        print_advice(&f->v[i], answer_first ? ADVICE_DETAILS : ADVICE_ALL);
        fflush(stdout);
    }
}

static void free_found(struct found *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free((char *)f->v[i].path);
        model_free(&f->v[i]);
    }
    free(f->v);
}

/* Runs the command with the environment set, then shows what it left: its exit status, or
 * EXIT_USAGE when it could not be started. */
static int run_and_show(const struct run_opts *o, const char *dir)
{
    struct run_status rs;
    status_setup(&rs);
    struct snapshot before = { 0 };
    take_snapshot(dir, &before);
    int64_t start = now_ns();
    pid_t child = 0;
    int status = run_child(o->cmd, &child);
    if (status < 0) {
        free_snapshot(&before);
        status_cleanup(&rs);
        return EXIT_USAGE;
    }
    struct found f = { 0 };
    collect(dir, &before, start, &f);
    f.n = job_keep_latest("run", f.v, f.n); /* a process's dumps on request beside its report */
    free_snapshot(&before);
    int64_t peak = status_peak(&rs);
    status_cleanup(&rs);
    if (f.n == 0)
        say_no_report(dir, peak, status);
    else
        show_reports(&f, child, o->colour);
    free_found(&f);
    return status;
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o = { 0 };
    int status = parse(argc, argv, &o);
    if (status >= 0)
        return status;
    char *lib = common_find_library("run");
    if (!lib)
        return EXIT_USAGE;
    char *dir = report_folder(&o);
    status = EXIT_USAGE;
    if (dir && prepare_env(&o, lib, dir))
        status = run_and_show(&o, dir);
    free(dir);
    free(lib);
    return status;
}
