/* cmd_fit.c: `vramwatch fit`: reruns a command at other values of its batch flag, each time with
 * libvramwatch.so preloaded, and searches for the largest value that fits the card. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "advice_print.h"
#include "cmdline.h"
#include "commands.h"
#include "common.h"
#include "preload.h"
#include "json.h"
#include "sb.h"
#include "simcard.h"
#include "sizes.h"


#define POLL_MS 100
#define KILL_GRACE_S 5.0
#define MAX_TRIALS 64

static const char usage[] =
        "usage: vramwatch fit [--limit SIZE] [--headroom PCT] [--flag NAME] [--settle SECONDS]\n"
        "                     [--sim CARD] [--json] -- CMD...\n"
        "\n"
        "Reruns CMD at other values of its batch flag, each time with libvramwatch.so preloaded,\n"
        "and finds the largest value that runs on the card with the headroom kept free: every trial\n"
        "runs under an enforced VRAMWATCH_LIMIT of the card less the headroom, and one that completes\n"
        "there fits. A caching allocator grows into whatever room it has, so this is measured, not\n"
        "compared with a peak; failures that a cache flush and a retry rescued are not out-of-memory.\n"
        "It starts at CMD's own value, doubles while trials fit or halves while they do not, then\n"
        "bisects between the largest value that fits and the smallest that does not.\n"
        "\n"
        "  --limit SIZE      the card to fit: 16GiB, 14.4GiB, 16G, 16000MB, a share of each card\n"
        "                    (80%), or per device (0:16GiB,1:8GiB); trials run under SIZE x (1 -\n"
        "                    headroom). Without it, VRAMWATCH_LIMIT from the environment if set,\n"
        "                    else the real card: trials run under VRAMWATCH_LIMIT=<100 - headroom>%\n"
        "  --headroom PCT    share of the capacity to keep free: 10, 10% or 12.5% (default 10)\n"
        "  --flag NAME       the batch flag as CMD spells it (--bs, batch=); by default the usual\n"
        "                    spellings (--batch, --batch-size, --per_device_train_batch_size, ...)\n"
        "  --settle SECONDS  a trial still running whose peak has not grown for this long after its\n"
        "                    first growth, and that has passed a new phase (its validation: new\n"
        "                    call chains after a quiet spell; YOLO and Ultralytics wait for it, other\n"
        "                    commands at most ten times as long), is stopped and judged by the peak\n"
        "                    it reached (default 20)\n"
        "  --sim CARD        run every trial on the simulated GPU (tools/simgpu), a card of that\n"
        "                    size (16GiB) or name (V100, A100-80GB, H100, ...), as vramwatch run --sim\n"
        "                    does; without --limit, the trials fit that card less the headroom\n"
        "  --json            print schema vramwatch.fit/1 on stdout instead of the text\n"
        "  -h, --help        this text\n"
        "Options end at CMD or at \"--\". Each takes its value after a space or an \"=\", and may\n"
        "be shortened where that is unambiguous.\n"
        "\n"
        "On a terminal, the running trial is shown on stderr and redrawn in place: its number, the\n"
        "value tried, the time so far and its peak against the limit it runs under. Each trial that\n"
        "ends leaves one line: its outcome, peak (for one that ran out of memory, what it held when\n"
        "it failed: less than it needed), time, why, and the cache flushes a retry rescued (into a\n"
        "pipe or a file, only those lines). CMD runs with stdin from /dev/null; its output\n"
        "goes to a log in the trial's folder, removed with it.\n"
        "Ctrl-C (SIGINT), SIGTERM, SIGHUP or SIGQUIT stops the running trial's process group, prints\n"
        "the best value found so far and its command (or the JSON), and exits 128 + the signal.\n"
        "\n"
        "Exit status: 0 a value fits; 1 none does, or CMD fails at its own value; 2 bad usage or CMD\n"
        "cannot be started; 130 interrupted by SIGINT, 143 by SIGTERM (128 + the signal).\n";

struct fit_opts {
    const char *limit; /* --limit as given, NULL without it */
    struct sizes_limit limit_set;
    double headroom, settle;
    const char *flag;
    bool json, sim;
    struct simcard card; /* with sim: the simulated card */
    char **cmd;
    size_t ncmd;
};

enum outcome { OUT_FITS, OUT_OOM, OUT_ERROR };
static const char *const outcome_names[] = { "fits", "oom", "error" };

struct trial {
    int64_t value;
    enum outcome outcome;
    int64_t peak;   /* the need the verdict was made on, 0 when unknown */
    bool cut_short; /* ran out of memory: peak is what it held when it failed, below its need */
    int64_t context; /* of peak, the memory outside the job's allocations (untracked) */
    double elapsed; /* seconds from its start to its verdict */
    bool settled;   /* stopped after settling rather than run to its end */
    char *why;      /* the reason its progress line gives */
};

/* ---- signals: a fit interrupted stops its trial's process group before leaving ---- */

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t signals_seen; /* a second one cuts the grace period short */

static void on_signal(int sig)
{
    if (!stop_signal)
        stop_signal = sig;
    signals_seen++;
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGINT:
        return "SIGINT";
    case SIGTERM:
        return "SIGTERM";
    case SIGHUP:
        return "SIGHUP";
    case SIGQUIT:
        return "SIGQUIT";
    default:
        return "a signal";
    }
}

static void catch_signals(void)
{
    struct sigaction sa = { 0 };
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

/* ---- small helpers ---- */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static char *path_in(const char *dir, const char *name)
{
    struct strbuf b = { 0 };
    sb_printf(&b, "%s/%s", dir, name);
    return b.s;
}

/* Empties a trial folder (files only: the library and the log) and removes it. */
static void remove_folder(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(dir);
}

/* A file the job wrote in the trial's folder (the status file, its log), for reading: only a
 * regular file, never a FIFO or a device a program put at the name (util_open_regular). */
static FILE *open_job_file(const char *path)
{
    struct stat st;
    const char *kind;
    int fd = util_open_regular(AT_FDCWD, path, 0, &st, &kind);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "r");
    if (!f)
        close(fd);
    return f;
}

/* ---- the status file the library keeps while the program runs ---- */

struct live_status {
    bool seen;
    int64_t peak, live;
    bool oom;
    /* The line counts cache flushes (pressure=N): a library that writes it sets oom=1 only once a
     * failure is final, where an older one set it at any out-of-memory, even one a retry rescued. */
    bool counts_pressure;
    int64_t pressure;
    int64_t sites; /* call chains seen (sites=N), -1 when the library does not say */
};

static void read_status(const char *path, struct live_status *st)
{
    FILE *f = open_job_file(path);
    if (!f)
        return;
    char line[512];
    bool ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok || strncmp(line, "vramwatch-status", 16) != 0)
        return;
    bool have_peak = false, have_pressure = false;
    int64_t peak = 0, live = 0, pressure = 0;
    bool oom = false;
    for (char *tok = strtok(line + 16, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
        char *eq = strchr(tok, '=');
        if (!eq)
            continue;
        *eq = '\0';
        char *end = NULL;
        errno = 0;
        long long v = strtoll(eq + 1, &end, 10);
        if (errno || end == eq + 1 || *end)
            continue;
        if (strcmp(tok, "peak_live_bytes") == 0) {
            peak = v;
            have_peak = true;
        } else if (strcmp(tok, "live_bytes") == 0) {
            live = v;
        } else if (strcmp(tok, "oom") == 0) {
            oom = v != 0;
        } else if (strcmp(tok, "pressure") == 0) {
            pressure = v;
            have_pressure = true;
        } else if (strcmp(tok, "sites") == 0 && v > st->sites) {
            st->sites = v;
        }
    }
    if (!have_peak)
        return; /* caught mid-rewrite: keep what we had */
    st->seen = true;
    if (peak > st->peak)
        st->peak = peak; /* the peak only grows; a stale rewrite does not lower it */
    st->live = live;
    st->oom |= oom;
    st->counts_pressure |= have_pressure;
    if (pressure > st->pressure)
        st->pressure = pressure;
}

/* ---- one trial ---- */

/* What a trial's VRAMWATCH_LIMIT holds: the card it must run on, less the headroom. */
enum limit_kind {
    LIMIT_SHARE, /* a share of each card ("90%"): no --limit, or a share given */
    LIMIT_SIZE,  /* one size for every device */
    LIMIT_LIST,  /* per device: "0:16GiB,1:8GiB" */
};

struct fit_ctx {
    const struct fit_opts *o;
    struct cmdline_flag flag;
    char *workdir;
    enum limit_kind limit_kind;
    uint64_t
            limit_bytes; /* LIMIT_SIZE: the card; 0 otherwise (then each report's limit_bytes says) */
    char *reduced;       /* the trials' VRAMWATCH_LIMIT: the limit less the headroom */
    double headroom, settle;
    int64_t capacity_seen;    /* the capacity last judged against, for the summary */
    const char *limit_source; /* "--limit", "VRAMWATCH_LIMIT" or "card" */
    struct trial trials[MAX_TRIALS];
    size_t n_trials;
    /* The trial a signal stopped: its value (0: the signal came between trials) and time. */
    int64_t stopped_value;
    double stopped_elapsed;
    /* The live progress line on a terminal (stderr): redrawn in place, its width when drawn. */
    bool live;
    size_t live_len;
};

/* ---- progress: the running trial, redrawn in place on a terminal ---- */

/* The limit a trial runs under in bytes, where it is known before its report: a size, or a
 * share of a card an earlier trial's report named. 0 otherwise. */
static int64_t known_limit(const struct fit_ctx *c)
{
    if (c->limit_kind == LIMIT_SIZE)
        return strtoll(c->reduced, NULL, 10);
    if (c->limit_kind == LIMIT_SHARE && c->capacity_seen > 0)
        return util_clamp_i64((double)c->capacity_seen * (1.0 - c->headroom / 100.0));
    return 0;
}

static void live_clear(struct fit_ctx *c)
{
    if (!c->live || !c->live_len)
        return;
    fprintf(stderr, "\r%*s\r", (int)c->live_len, "");
    fflush(stderr);
    c->live_len = 0;
}

/* "fit: trial 2: --batch 48, 3.1 s, peak 10.20 GiB of 14.40 GiB (71%)", cut to the terminal's
 * width so that a carriage return comes back to its start, and padded over the last one. */
static void live_draw(struct fit_ctx *c, int64_t value, double secs, const struct live_status *st)
{
    if (!c->live)
        return;
    struct strbuf b = { 0 };
    char pk[UTIL_SIZE_LEN], lim[UTIL_SIZE_LEN];
    sb_printf(&b, "fit: trial %zu: %s%s%lld, %.1f s, ", c->n_trials + 1, c->flag.name,
              c->flag.form == CMDLINE_SEPARATE ? " " : "", (long long)value, secs);
    if (!st->seen) {
        sb_add(&b, "starting");
    } else {
        sb_printf(&b, "peak %s ", util_fmt_size(st->peak, pk));
        int64_t limit = known_limit(c);
        if (limit > 0)
            sb_printf(&b, "of %s (%.0f%%)", util_fmt_size(limit, lim),
                      100.0 * (double)st->peak / (double)limit);
        else if (c->limit_kind == LIMIT_SHARE)
            sb_printf(&b, "of %s of the card", c->reduced);
        else
            sb_printf(&b, "under %s", c->reduced);
    }
    size_t width = 80;
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
        width = ws.ws_col;
    size_t n = b.len < width - 1 ? b.len : width - 1;
    fprintf(stderr, "\r%.*s", (int)n, sb_str(&b));
    if (c->live_len > n)
        fprintf(stderr, "%*s", (int)(c->live_len - n), "");
    fflush(stderr);
    c->live_len = n > c->live_len ? n : c->live_len;
    sb_free(&b);
}

/* Whether the program's log says it ran out of memory, for programs that die before a report. */
static bool log_mentions_oom(const char *path)
{
    FILE *f = open_job_file(path);
    if (!f)
        return false;
    char line[1024];
    bool hit = false;
    while (!hit && fgets(line, sizeof line, f)) {
        for (char *c = line; *c && !hit; c++)
            hit = strncasecmp(c, "out of memory", 13) == 0;
    }
    fclose(f);
    return hit;
}

/* The last non-empty line of the program's log, for an error's progress line. */
static void log_last_line(const char *path, struct strbuf *out)
{
    FILE *f = open_job_file(path);
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0]) {
            sb_truncate(out, 0);
            sb_add(out, line);
        }
    }
    fclose(f);
}

/* Stops the whole process group: SIGTERM, then SIGKILL after the grace period, or at once when
 * another signal comes to fit meanwhile (a second Ctrl-C). Reaps pid. */
static int stop_group(pid_t pid)
{
    int status = 0;
    sig_atomic_t seen = signals_seen;
    kill(-pid, SIGTERM);
    double until = mono_s() + KILL_GRACE_S;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            break;
        if (mono_s() >= until || signals_seen != seen) {
            kill(-pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            break;
        }
        nap_ms(POLL_MS);
    }
    kill(-pid, SIGKILL); /* anything of the group that outlived it */
    return status;
}

/* The card a device of a trial stands for, before the headroom: the one --limit SIZE names, else
 * the trial's own limit scaled back up by the headroom (the library resolved it on that card),
 * else, where no limit took effect, the card's total. 0 when unknown. */
static int64_t card_of(const struct fit_ctx *c, const struct model_device *dev)
{
    if (c->limit_bytes)
        return (int64_t)c->limit_bytes;
    if (dev->limit_bytes.known)
        return util_clamp_i64((double)dev->limit_bytes.v / (1.0 - c->headroom / 100.0));
    return dev->total_bytes.known ? dev->total_bytes.v : 0;
}

/* One trial while and after it runs: its folder, the command at its value, how it ended. */
struct trial_run {
    int64_t value;
    char *dir, *statusp, *logp;
    char **argv;
    pid_t pid;
    double start;     /* mono_s() as it was started */
    bool exec_failed; /* the command could not be run: exec_err says why */
    int exec_err;
    struct live_status st; /* its status file, last read */
    bool settled;          /* stopped after settling rather than run to its end */
    int status;            /* its wait status */
};

/* What the reports and the status file of a trial say, for its verdict. */
struct evidence {
    int64_t need, capacity, flushes;
    int64_t context; /* of need, the memory outside the job's allocations (untracked) */
    bool real_oom, any_report;
    bool reduced; /* the limit that took effect was ours: the card less the headroom */
};

/* The reports in the trial's folder: the largest need of a device, and the card it ran on. */
static void read_reports(const struct fit_ctx *c, const char *dir, struct evidence *ev)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "vramwatch-", 10) != 0 || n < 5 ||
            strcmp(e->d_name + n - 5, ".json") != 0)
            continue;
        char *path = path_in(dir, e->d_name);
        struct model_report r;
        if (common_load_report("fit", path, &r)) {
            ev->any_report = true;
            ev->real_oom |= model_real_oom(&r) != NULL;
            ev->flushes = util_sat_add(ev->flushes, model_flushes(&r));
            for (size_t i = 0; i < r.n_devices; i++) {
                const struct model_device *dev = &r.devices[i];
                int64_t dneed =
                        util_sat_add(dev->peak_reserved_bytes,
                                     dev->untracked_bytes.known ? dev->untracked_bytes.v : 0);
                int64_t cap = card_of(c, dev);
                if (dneed > ev->need || (dneed == ev->need && cap > 0)) {
                    ev->need = dneed;
                    ev->context = dneed - dev->peak_reserved_bytes;
                    ev->capacity = cap;
                    /* The library reports the limit it enforced: ours, the card less
                     * the headroom. */
                    ev->reduced = dev->limit_bytes.known;
                }
            }
            model_free(&r);
        }
        free(path);
    }
    if (d)
        closedir(d);
}

/* What the status file adds: the peak of a trial stopped after settling or without a report. */
static void add_status(const struct fit_ctx *c, const struct trial_run *r, struct evidence *ev)
{
    const struct live_status *st = &r->st;
    if (r->settled || (!ev->any_report && st->seen)) {
        if (st->peak > ev->need) {
            ev->need = st->peak;
            ev->context = 0; /* the status file's peak is the job's allocations alone */
        }
        if (!ev->capacity)
            ev->capacity = c->limit_bytes ? (int64_t)c->limit_bytes : 0;
        /* No report to say which limit took effect: a size or a list of sizes every library
         * applies; a share only one new enough to know it, which is also the one whose status
         * line counts the flushes. */
        if (!ev->any_report)
            ev->reduced = c->limit_kind != LIMIT_SHARE || st->counts_pressure;
    }
    if (st->pressure > ev->flushes)
        ev->flushes = st->pressure;
}

/* A command that failed for another reason than memory: how it ended, and its log's last line. */
static void judge_error(const struct trial_run *r, struct trial *t, struct strbuf *why)
{
    t->outcome = OUT_ERROR;
    struct strbuf last = { 0 };
    log_last_line(r->logp, &last);
    if (WIFSIGNALED(r->status))
        sb_printf(why, "killed by signal %d", WTERMSIG(r->status));
    else
        sb_printf(why, "exit status %d", WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1);
    if (last.len) {
        sb_add(why, ": ");
        util_add_text(why, sb_str(&last));
    }
    sb_free(&last);
}

/* A trial that ran to its end or until it settled, without running out of memory. */
static void judge_ran(struct fit_ctx *c, const struct evidence *ev, bool settled, struct trial *t,
                      struct strbuf *why)
{
    double keep = 1.0 - c->headroom / 100.0;
    char a[UTIL_SIZE_LEN], b[UTIL_SIZE_LEN];
    if (ev->reduced && (!settled || ev->capacity <= 0)) {
        /* It completed (or ran until stopped) on the card reduced by the headroom. */
        t->outcome = OUT_FITS;
        if (ev->capacity > 0) {
            c->capacity_seen = ev->capacity;
            sb_printf(why, "ran on a %s card (%s less %g%% headroom)",
                      util_fmt_size(util_clamp_i64((double)ev->capacity * keep), b),
                      util_fmt_size(ev->capacity, a), c->headroom);
        } else {
            sb_printf(why, "ran on the card less %g%% headroom", c->headroom);
        }
        return;
    }
    if (ev->capacity <= 0) {
        t->outcome = OUT_ERROR;
        sb_add(why, "the card's capacity is unknown; give --limit SIZE");
        return;
    }
    c->capacity_seen = ev->capacity;
    double usable = (double)ev->capacity * keep;
    if ((double)ev->need <= usable) {
        t->outcome = OUT_FITS;
        sb_printf(why, "needs %s of %s usable", util_fmt_size(ev->need, a),
                  util_fmt_size((int64_t)usable, b));
    } else {
        t->outcome = OUT_OOM;
        sb_printf(why, "ran, but needs %s, over the %s usable with %g%% headroom",
                  util_fmt_size(ev->need, a), util_fmt_size((int64_t)usable, b), c->headroom);
    }
    if (!ev->reduced)
        sb_printf(why,
                  " (VRAMWATCH_LIMIT=%s did not take effect on this device: judged by its need)",
                  c->reduced);
}

/* Judges a trial from the reports in its folder, the status file and how it ended. Every trial
 * runs on a card reduced by the headroom (VRAMWATCH_LIMIT, enforced), so one that completes there
 * fits: a caching allocator grows into whatever room it is given, so comparing its peak with a
 * bigger card says little, and this is the one test that gives the same answer with and without
 * --limit. The peak is compared only where the trial did not run to its end (stopped after
 * settling) or where no reduced limit took effect (a library that does not know shares). */
static void judge(struct fit_ctx *c, const struct trial_run *r, struct trial *t, struct strbuf *why)
{
    struct evidence ev = { 0 };
    read_reports(c, r->dir, &ev);
    add_status(c, r, &ev);
    t->peak = ev.need;
    t->context = ev.context;
    bool failed = !r->settled && !(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0);
    /* oom=1 on a line that counts flushes is a final failure; on an older line it may have been
     * one a retry rescued, so it counts only when the program then failed. */
    bool final_oom = r->st.oom && r->st.counts_pressure;
    if (ev.real_oom || final_oom || (failed && (r->st.oom || log_mentions_oom(r->logp)))) {
        t->outcome = OUT_OOM;
        t->cut_short = true;
        sb_add(why, "out of memory");
    } else if (failed) {
        judge_error(r, t, why);
    } else if (!ev.any_report && !r->st.seen) {
        t->outcome = OUT_ERROR;
        sb_add(why, "no report: the program made no device allocation");
    } else {
        judge_ran(c, &ev, r->settled, t, why);
    }
    if (ev.flushes > 0)
        sb_printf(why, "; %lld cache flush%s rescued by a retry", (long long)ev.flushes,
                  ev.flushes == 1 ? "" : "es");
    if (r->settled)
        sb_add(why, " (stopped after settling)");
}

/* The child: in its own process group, which is not the terminal's (a read from the terminal
 * would stop it), so stdin is /dev/null; its output goes to the log. errfd carries exec's errno
 * back when the command cannot be run. */
static void trial_child(const struct trial_run *r, int errfd) __attribute__((noreturn));
static void trial_child(const struct trial_run *r, int errfd)
{
    setpgid(0, 0);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in >= 0)
        dup2(in, STDIN_FILENO);
    int fd = open(r->logp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    execvp(r->argv[0], r->argv);
    int err = errno;
    ssize_t w = write(errfd, &err, sizeof err);
    (void)w;
    _exit(127);
}

/* Makes the trial's folder and starts the command in it: false once the reason is said. */
static bool start_trial(struct trial_run *r)
{
    if (mkdir(r->dir, 0700) != 0) {
        util_err("fit: cannot make %s: %s", r->dir, strerror(errno));
        return false;
    }
    if (setenv("VRAMWATCH_DIR", r->dir, 1) != 0 || setenv("VRAMWATCH_STATUS", r->statusp, 1) != 0) {
        util_err("fit: cannot set the environment: %s", strerror(errno));
        return false;
    }
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        util_err("fit: cannot start %s: %s", r->argv[0], strerror(errno));
        return false;
    }
    fflush(NULL);
    r->start = mono_s();
    r->pid = fork();
    if (r->pid < 0) {
        util_err("fit: cannot start %s: %s", r->argv[0], strerror(errno));
        close(pipefd[0]);
        close(pipefd[1]);
        return false;
    }
    if (r->pid == 0)
        trial_child(r, pipefd[1]);
    setpgid(r->pid, r->pid); /* also here, so the group exists before we might signal it */
    close(pipefd[1]);
    ssize_t got;
    do
        got = read(pipefd[0], &r->exec_err, sizeof r->exec_err);
    while (got < 0 && errno == EINTR);
    close(pipefd[0]);
    r->exec_failed = got == (ssize_t)sizeof r->exec_err;
    return true;
}

/* When a trial's peak has settled. A training job validates after an epoch (YOLO at twice the
 * batch): its peak may still be ahead when training has settled. A trial settles only once a new
 * phase was seen, call chains first seen after a quiet spell of the settle time (validation is
 * called from other lines than training), or, for a job that may not validate at all, once no
 * new phase came for ten settle times. YOLO and Ultralytics validate every epoch: they wait for
 * it. */
struct settling {
    int64_t last_peak, last_sites;
    double last_growth, last_new_site;
    bool validates, phase_seen;
};

static bool settled_now(const struct fit_ctx *c, struct settling *s, const struct live_status *st,
                        double now)
{
    if (st->sites > s->last_sites) {
        if (s->last_sites >= 0 && now - s->last_new_site >= c->settle)
            s->phase_seen = true;
        s->last_sites = st->sites;
        s->last_new_site = now;
    }
    bool may_settle = st->sites < 0 || s->phase_seen ||
                      (!s->validates && now - s->last_new_site >= 10 * c->settle);
    if (st->seen && st->peak > s->last_peak) {
        s->last_peak = st->peak;
        s->last_growth = now;
        return false;
    }
    return s->last_peak > 0 && now - s->last_growth >= c->settle &&
           now - s->last_new_site >= c->settle && may_settle;
}

/* Watches the trial until it ends, runs out of memory for good, or settles. False when fit must
 * stop: a signal came (the trial is stopped), or the trial was lost. */
static bool watch_trial(struct fit_ctx *c, struct trial_run *r)
{
    enum cmdline_family family = cmdline_family((const char *const *)c->o->cmd, c->o->ncmd);
    struct settling s = { .last_sites = -1,
                          .last_new_site = mono_s(),
                          .validates = family == CMDLINE_YOLO || family == CMDLINE_ULTRALYTICS };
    for (;;) {
        pid_t w = waitpid(r->pid, &r->status, WNOHANG);
        if (w == r->pid) {
            kill(-r->pid, SIGKILL); /* helpers it left behind */
            return true;
        }
        if (w < 0 && errno != EINTR) {
            util_err("fit: lost track of %s: %s", r->argv[0], strerror(errno));
            return false;
        }
        if (stop_signal) {
            live_clear(c);
            c->stopped_value = r->value;
            c->stopped_elapsed = mono_s() - r->start;
            stop_group(r->pid);
            return false;
        }
        read_status(r->statusp, &r->st);
        /* An allocation failed for good: the trial is out of memory whatever the program does
         * next (Ultralytics catches it, halves its batch and trains on to the end), so it is
         * stopped now rather than run for minutes to the same verdict. */
        if (r->st.oom && r->st.counts_pressure) {
            r->status = stop_group(r->pid);
            return true;
        }
        double now = mono_s();
        live_draw(c, r->value, now - r->start, &r->st);
        if (settled_now(c, &s, &r->st, now)) {
            r->status = stop_group(r->pid);
            r->settled = true;
            return true;
        }
        nap_ms(POLL_MS);
    }
}

/* The verdict of a trial that ended, and its line on stderr. False when the command could not
 * be run. */
static bool finish_trial(struct fit_ctx *c, struct trial_run *r, struct trial *t)
{
    live_clear(c);
    if (r->exec_failed) {
        util_err("fit: cannot run %s: %s", r->argv[0], strerror(r->exec_err));
        return false;
    }
    read_status(r->statusp, &r->st);
    double secs = mono_s() - r->start;
    struct strbuf why = { 0 };
    t->value = r->value;
    t->elapsed = secs;
    t->settled = r->settled;
    judge(c, r, t, &why);
    /* the peak as report and advise show it, the context apart; a trial that failed never
     * reached its need: its peak, lower than that of a larger trial that fits perhaps, is said
     * to be what it held when it failed */
    struct strbuf pk = { 0 };
    advice_add_peak(&pk, t->peak - t->context, t->context);
    fprintf(stderr, "fit: %s%s%lld: %s, %s%s, %.1f s: %s\n", c->flag.name,
            c->flag.form == CMDLINE_SEPARATE ? " " : "", (long long)r->value,
            outcome_names[t->outcome], sb_str(&pk),
            t->cut_short ? " when it failed (it needed more)" : "", secs, sb_str(&why));
    sb_free(&pk);
    fflush(stderr);
    t->why = util_xstrdup(sb_str(&why));
    sb_free(&why);
    return true;
}

/* Runs one trial at this value. Returns false when fit itself must stop (cannot start the
 * command, or a signal), with the reason said. */
static bool run_trial(struct fit_ctx *c, int64_t value, struct trial *t)
{
    struct trial_run r = { .value = value, .st = { .sites = -1 } };
    struct strbuf name = { 0 };
    sb_printf(&name, "trial-%zu-%lld", c->n_trials + 1, (long long)value);
    r.dir = path_in(c->workdir, sb_str(&name));
    sb_free(&name);
    r.statusp = path_in(r.dir, "status");
    r.logp = path_in(r.dir, "output.log");
    r.argv = cmdline_with_value((const char *const *)c->o->cmd, c->o->ncmd, &c->flag, value);
    bool ok = start_trial(&r) && watch_trial(c, &r) && finish_trial(c, &r, t);
    remove_folder(r.dir);
    cmdline_free(r.argv, c->o->ncmd);
    free(r.logp);
    free(r.statusp);
    free(r.dir);
    return ok;
}

/* ---- the search ---- */

static const struct trial *find_trial(const struct fit_ctx *c, int64_t value)
{
    for (size_t i = 0; i < c->n_trials; i++)
        if (c->trials[i].value == value)
            return &c->trials[i];
    return NULL;
}

/* The trial at value, run if not run yet. NULL when fit must stop. */
static const struct trial *try_value(struct fit_ctx *c, int64_t value)
{
    const struct trial *known = find_trial(c, value);
    if (known)
        return known;
    if (c->n_trials == MAX_TRIALS || stop_signal)
        return NULL;
    struct trial t = { 0 };
    if (!run_trial(c, value, &t))
        return NULL;
    c->trials[c->n_trials] = t;
    return &c->trials[c->n_trials++];
}

/* Largest fitting value in *best (0 when none). Returns false when fit had to stop early. */
static bool search(struct fit_ctx *c, int64_t *best, struct strbuf *why)
{
    int64_t start = c->flag.value;
    const struct trial *t = try_value(c, start);
    if (!t)
        return false;
    int64_t lo = 0, hi = 0; /* largest fitting, smallest failing; 0 = none yet */
    if (t->outcome == OUT_ERROR) {
        sb_printf(why, "the command fails at its own value %lld", (long long)start);
        *best = 0;
        return true;
    }
    if (t->outcome == OUT_FITS) {
        lo = start;
        while (!hi) {
            if (lo > INT64_MAX / 2 || lo >= ((int64_t)1 << 40)) {
                sb_add(why, "stopped doubling at a very large value");
                *best = lo;
                return true;
            }
            t = try_value(c, lo * 2);
            if (!t)
                return false;
            if (t->outcome == OUT_FITS)
                lo *= 2;
            else
                hi = lo * 2;
        }
    } else {
        hi = start;
        while (!lo) {
            if (hi == 1) {
                sb_printf(why, "nothing fits: even %s%s1 does not (%s, ", c->flag.name,
                          c->flag.form == CMDLINE_SEPARATE ? " " : "", outcome_names[t->outcome]);
                advice_add_peak(why, t->peak - t->context, t->context);
                sb_add(why, t->cut_short ? " when it failed)" : ")");
                *best = 0;
                return true;
            }
            int64_t v = hi / 2;
            t = try_value(c, v);
            if (!t)
                return false;
            if (t->outcome == OUT_FITS)
                lo = v;
            else
                hi = v;
        }
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        t = try_value(c, mid);
        if (!t)
            return false;
        if (t->outcome == OUT_FITS)
            lo = mid;
        else
            hi = mid;
    }
    *best = lo;
    return true;
}

/* ---- options ---- */

enum { OPT_LIMIT = 256, OPT_HEADROOM, OPT_FLAG, OPT_SETTLE, OPT_SIM };

static int fit_option(struct util_args *a, int ch, void *opts)
{
    struct fit_opts *o = opts;
    switch (ch) {
    case OPT_LIMIT:
        if (!util_args_limit(a, &o->limit_set))
            return EXIT_USAGE;
        o->limit = a->value;
        return -1;
    case OPT_HEADROOM:
        return util_args_percent(a, &o->headroom) ? -1 : EXIT_USAGE;
    case OPT_FLAG:
        o->flag = a->value;
        return -1;
    case OPT_SETTLE:
        if (!util_args_number(a, 0, 1e9, &o->settle))
            return EXIT_USAGE;
        if (!(o->settle > 0))
            return util_usage_error(a, "--settle %s: expected a positive number of seconds",
                                    a->value);
        return -1;
    case OPT_SIM:
        if (!simcard_option(a, &o->card))
            return EXIT_USAGE;
        o->sim = true;
        return -1;
    default:
        return EXIT_USAGE;
    }
}

/* fit's options, getopt_long's way with the grammar every command shares ("--headroom=5",
 * "--headroom 5%", "--limit 14.4GiB"); they end at the first operand, CMD, or at "--", so CMD
 * keeps its own. -1 to go on, else the exit status (--help, or bad usage already said). */
static int parse_opts(int argc, char **argv, struct fit_opts *o)
{
    static const struct option longopts[] = {
        { "limit", required_argument, NULL, OPT_LIMIT },
        { "headroom", required_argument, NULL, OPT_HEADROOM },
        { "flag", required_argument, NULL, OPT_FLAG },
        { "settle", required_argument, NULL, OPT_SETTLE },
        { "json", no_argument, NULL, COMMON_OPT_JSON },
        { "sim", required_argument, NULL, OPT_SIM },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const struct common_cmd cmd = { .name = "fit",
                                    .usage = usage,
                                    .shortopts = "+h",
                                    .longopts = longopts,
                                    .option = fit_option,
                                    .opts = o };
    struct common_opts co;
    int status = common_options(&cmd, argc, argv, &co);
    if (status >= 0)
        return status;
    o->json = co.json;
    if (co.n_operands == 0)
        return util_usage_error(&co.args, "no command given");
    o->cmd = co.operands;
    o->ncmd = co.n_operands;
    return -1;
}

/* A share without trailing zeros ("90%", "87.5%"): the library reads digits and a point only. */
static void add_share(struct strbuf *b, double pct)
{
    char num[64];
    snprintf(num, sizeof num, "%.6f", pct);
    size_t len = strlen(num);
    while (len > 0 && num[len - 1] == '0')
        len--;
    if (len > 0 && num[len - 1] == '.')
        len--;
    sb_addn(b, num, len);
    sb_addc(b, '%');
}

/* The trials' VRAMWATCH_LIMIT: every size or share of the limit (one for all devices, or per
 * device, in the order of the devices) times keep, so each trial runs on its card less the
 * headroom. */
static void reduce_limit(const struct sizes_limit *l, double keep, struct strbuf *out)
{
    for (int i = 0; i < SIZES_MAX_DEVICES; i++) {
        if (!l->bytes[i] && !(l->share[i] > 0))
            continue;
        if (!l->every)
            sb_printf(out, "%s%d:", out->len ? "," : "", i);
        if (l->share[i] > 0) {
            add_share(out, l->share[i] * 100.0 * keep);
        } else {
            uint64_t less = (uint64_t)((double)l->bytes[i] * keep);
            sb_printf(out, "%llu", (unsigned long long)(less ? less : 1));
        }
        if (l->every)
            break;
    }
}

/* The flag as --flag NAME names it: "NAME V", "NAME=V", or for a NAME ending in '=', "NAMEV". */
static void find_named_flag(const struct fit_opts *o, struct cmdline_flag *f)
{
    memset(f, 0, sizeof *f);
    size_t len = strlen(o->flag);
    bool bare_key = o->flag[len - 1] == '=';
    for (size_t i = 1; i < o->ncmd; i++) {
        const char *a = o->cmd[i];
        const char *val = NULL;
        bool separate = false;
        if (!bare_key && strcmp(a, o->flag) == 0 && i + 1 < o->ncmd) {
            val = o->cmd[i + 1];
            separate = true;
        } else if (strncmp(a, o->flag, len) == 0 && (bare_key || a[len] == '=')) {
            val = a + len + (bare_key ? 0 : 1);
        }
        if (!val || !*val || strspn(val, "0123456789") != strlen(val))
            continue;
        errno = 0;
        long long v = strtoll(val, NULL, 10);
        if (errno || v < 1)
            continue;
        f->found = true;
        f->form = separate ? CMDLINE_SEPARATE : CMDLINE_ATTACHED;
        f->index = separate ? i + 1 : i;
        snprintf(f->name, sizeof f->name, "%s%s", o->flag, separate || bare_key ? "" : "=");
        f->value = v;
    }
}

/* ---- output ---- */

/* The largest value whose trial fitted: the answer, or the best so far of a search cut short. */
static int64_t best_fitting(const struct fit_ctx *c)
{
    int64_t best = 0;
    for (size_t i = 0; i < c->n_trials; i++)
        if (c->trials[i].outcome == OUT_FITS && c->trials[i].value > best)
            best = c->trials[i].value;
    return best;
}

/* A number with at most that many decimals ("2.113", "12.5"), as json_print writes a literal it
 * carries. */
static cJSON *json_number(double v, int decimals)
{
    char lit[64];
    snprintf(lit, sizeof lit, "%.*f", decimals, v);
    size_t n = strlen(lit);
    if (strchr(lit, '.')) {
        while (n > 1 && lit[n - 1] == '0')
            n--;
        if (lit[n - 1] == '.')
            n--;
        lit[n] = '\0';
    }
    cJSON *num = cJSON_CreateNumber(v);
    num->valuestring = util_xstrdup(lit);
    return num;
}

static cJSON *seconds_json(double secs)
{
    return json_number(secs, 3);
}

/* The card judged against, the limit the trials ran under, the headroom between them. */
static cJSON *capacity_json(const struct fit_ctx *c)
{
    cJSON *cap = cJSON_CreateObject();
    int64_t card = c->limit_kind == LIMIT_SIZE ? (int64_t)c->limit_bytes : c->capacity_seen;
    int64_t limit = 0;
    if (c->limit_kind == LIMIT_SIZE)
        limit = strtoll(c->reduced, NULL, 10);
    else if (card > 0)
        limit = util_clamp_i64((double)card * (1.0 - c->headroom / 100.0));
    cJSON_AddItemToObject(cap, "card_bytes", card > 0 ? json_new_int(card) : cJSON_CreateNull());
    cJSON_AddItemToObject(cap, "limit_bytes", limit > 0 ? json_new_int(limit) : cJSON_CreateNull());
    cJSON_AddStringToObject(cap, "limit", c->reduced);
    cJSON_AddItemToObject(cap, "headroom_pct", json_number(c->headroom, 6));
    cJSON_AddStringToObject(cap, "source", c->limit_source);
    return cap;
}

static void print_json(const struct fit_ctx *c, int64_t best, int sig)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", "vramwatch.fit/1");
    cJSON_AddStringToObject(root, "flag", c->flag.name);
    cJSON_AddItemToObject(root, "best_value", best > 0 ? json_new_int(best) : cJSON_CreateNull());
    const struct trial *bt = best > 0 ? find_trial(c, best) : NULL;
    cJSON_AddItemToObject(root, "best_peak_bytes",
                          bt ? json_new_int(bt->peak) : cJSON_CreateNull());
    if (best > 0) {
        char **argv =
                cmdline_with_value((const char *const *)c->o->cmd, c->o->ncmd, &c->flag, best);
        cJSON *cmd = cJSON_AddArrayToObject(root, "command");
        for (size_t i = 0; i < c->o->ncmd; i++)
            cJSON_AddItemToArray(cmd, cJSON_CreateString(argv[i]));
        struct strbuf b = { 0 };
        util_add_argv(&b, (const char *const *)argv, c->o->ncmd);
        cJSON_AddStringToObject(root, "command_line", sb_str(&b));
        sb_free(&b);
        cmdline_free(argv, c->o->ncmd);
    } else {
        cJSON_AddNullToObject(root, "command");
        cJSON_AddNullToObject(root, "command_line");
    }
    cJSON_AddItemToObject(root, "capacity", capacity_json(c));
    if (sig) {
        cJSON *in = cJSON_AddObjectToObject(root, "interrupted");
        cJSON_AddStringToObject(in, "signal", signal_name(sig));
        cJSON_AddItemToObject(in, "value",
                              c->stopped_value ? json_new_int(c->stopped_value)
                                               : cJSON_CreateNull());
        cJSON_AddItemToObject(in, "elapsed_s", seconds_json(c->stopped_elapsed));
    } else {
        cJSON_AddNullToObject(root, "interrupted");
    }
    cJSON *arr = cJSON_AddArrayToObject(root, "trials");
    for (size_t i = 0; i < c->n_trials; i++) {
        const struct trial *t = &c->trials[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "value", json_new_int(t->value));
        cJSON_AddStringToObject(o, "outcome", outcome_names[t->outcome]);
        cJSON_AddItemToObject(o, "peak_bytes", json_new_int(t->peak));
        cJSON_AddItemToObject(o, "elapsed_s", seconds_json(t->elapsed));
        cJSON_AddBoolToObject(o, "settled", t->settled);
        cJSON_AddStringToObject(o, "why", t->why ? t->why : "");
        cJSON_AddItemToArray(arr, o);
    }
    json_print(stdout, root);
    cJSON_Delete(root);
}

/* "best: --batch 51 (peak ..., 7 trials)" and the command; "best so far" when cut short. */
static void print_text(const struct fit_ctx *c, int64_t best, bool so_far)
{
    const struct trial *t = find_trial(c, best);
    char cap[UTIL_SIZE_LEN];
    struct strbuf pk = { 0 };
    advice_add_peak(&pk, t ? t->peak - t->context : 0, t ? t->context : 0);
    printf("%s: %s%s%lld (%s", so_far ? "best so far" : "best", c->flag.name,
           c->flag.form == CMDLINE_SEPARATE ? " " : "", (long long)best, sb_str(&pk));
    sb_free(&pk);
    if (c->capacity_seen > 0)
        printf(" of a %s card with %g%% headroom", util_fmt_size(c->capacity_seen, cap),
               c->headroom);
    printf(", %zu trial%s%s)\n", c->n_trials, c->n_trials == 1 ? "" : "s",
           so_far ? ", search not finished" : "");
    char **argv = cmdline_with_value((const char *const *)c->o->cmd, c->o->ncmd, &c->flag, best);
    struct strbuf b = { 0 };
    util_add_argv(&b, (const char *const *)argv, c->o->ncmd);
    printf("%s\n", sb_str(&b));
    sb_free(&b);
    cmdline_free(argv, c->o->ncmd);
}

/* A search cut short by a signal or the trial limit: what is known so far, on stdout as usual,
 * and on stderr what stopped it. */
static void print_cut_short(const struct fit_ctx *c, int sig)
{
    int64_t best = best_fitting(c);
    const char *sp = c->flag.form == CMDLINE_SEPARATE ? " " : "";
    struct strbuf b = { 0 };
    if (sig && c->stopped_value)
        sb_printf(&b, "fit: interrupted by %s: stopped the trial at %s%s%lld after %.1f s",
                  signal_name(sig), c->flag.name, sp, (long long)c->stopped_value,
                  c->stopped_elapsed);
    else if (sig)
        sb_printf(&b, "fit: interrupted by %s between trials", signal_name(sig));
    else
        sb_printf(&b, "fit: gave up after %d trials", MAX_TRIALS);
    if (best > 0)
        sb_printf(&b, "; the best so far is %s%s%lld, a larger value may fit", c->flag.name, sp,
                  (long long)best);
    else
        sb_add(&b, "; no value has fitted so far");
    util_err("%s", sb_str(&b));
    sb_free(&b);
    if (c->o->json)
        print_json(c, best, sig);
    else if (best > 0)
        print_text(c, best, true);
}

/* The card the trials must fit and the limit they run under, less the headroom: without --limit,
 * a limit the environment already sets is the card the user means; else the real card, as a
 * share the library resolves on each device at its first allocation. False once said. */
static bool set_limit(struct fit_ctx *c, struct strbuf *reduced)
{
    const struct fit_opts *o = c->o;
    struct sizes_limit set = o->limit_set;
    const char *inherited = getenv("VRAMWATCH_LIMIT");
    c->limit_source = "--limit";
    if (!o->limit && inherited && *inherited) {
        const char *why = NULL;
        if (!sizes_parse_limit(inherited, &set, &why)) {
            util_err("fit: VRAMWATCH_LIMIT=%s: %s", inherited, why ? why : "not a limit");
            return false;
        }
        c->limit_source = "VRAMWATCH_LIMIT";
    } else if (!o->limit) {
        memset(&set, 0, sizeof set);
        set.every = true;
        for (int i = 0; i < SIZES_MAX_DEVICES; i++)
            set.share[i] = 1.0;
        c->limit_source = "card";
    }
    reduce_limit(&set, 1.0 - c->headroom / 100.0, reduced);
    c->reduced = reduced->s;
    /* The trials' limit is read by the library's grammar: one it would refuse (a limit that the
     * headroom takes below 1 MiB) would leave the trials without any limit. */
    struct sizes_limit check;
    const char *why = NULL;
    if (!sizes_parse_limit(sb_str(reduced), &check, &why)) {
        util_err("fit: the limit less the %g%% headroom is %s: %s", c->headroom, sb_str(reduced),
                 why ? why : "not a limit");
        return false;
    }
    if (!set.every) {
        c->limit_kind = LIMIT_LIST;
    } else if (set.share[0] > 0) {
        c->limit_kind = LIMIT_SHARE;
    } else {
        c->limit_kind = LIMIT_SIZE;
        c->limit_bytes = set.bytes[0];
    }
    return true;
}

/* The batch flag in the command, by --flag's name or the usual spellings. False once said. */
static bool find_flag(struct fit_ctx *c)
{
    const struct fit_opts *o = c->o;
    if (o->flag)
        find_named_flag(o, &c->flag);
    else
        cmdline_find((const char *const *)o->cmd, o->ncmd, CMDLINE_BATCH, &c->flag);
    if (c->flag.found)
        return true;
    if (o->flag)
        util_err("fit: --flag %s: not in the command with a positive whole value", o->flag);
    else
        util_err(
                "fit: no batch flag with a positive whole value in the command; name it with --flag NAME");
    return false;
}

/* The trials' environment (the library preloaded, or with --sim the simulated card; the limit,
 * enforced) and the folder their own folders go in. False once said. */
static bool prepare_trials(struct fit_ctx *c, const char *lib)
{
    const struct fit_opts *o = c->o;
    /* With --sim, every trial on the simulated card: the library, then the stand-ins. */
    if (o->sim && !simcard_setup("fit", &o->card, lib))
        return false;
    char *pre = o->sim ? NULL : preload_value(lib, getenv("LD_PRELOAD"));
    /* Each trial runs on a card already reduced by the headroom: one that completes there fits
     * with the headroom, whatever a caching allocator would have kept reserved on a bigger card. */
    bool ok = !(pre && setenv("LD_PRELOAD", pre, 1) != 0) &&
              setenv("VRAMWATCH_LIMIT", c->reduced, 1) == 0 &&
              setenv("VRAMWATCH_LIMIT_MODE", "enforce", 1) == 0;
    int err = errno;
    free(pre);
    if (!ok) {
        util_err("fit: cannot set the environment: %s", strerror(err));
        return false;
    }
    const char *tmp = getenv("TMPDIR");
    struct strbuf tdir = { 0 };
    sb_printf(&tdir, "%s/vramwatch-fit-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    c->workdir = tdir.s;
    if (!mkdtemp(c->workdir)) {
        util_err("fit: cannot make a folder in %s: %s", tmp && *tmp ? tmp : "/tmp",
                 strerror(errno));
        return false;
    }
    return true;
}

/* The search, and what it found printed: the exit status. */
static int fit_search(struct fit_ctx *c)
{
    c->live = isatty(STDERR_FILENO);
    catch_signals();
    int64_t best = 0;
    struct strbuf reason = { 0 };
    bool done = search(c, &best, &reason);
    rmdir(c->workdir);
    int rc = EXIT_USAGE;
    if (!done) {
        /* A signal or the trial limit: what was learnt is given. Otherwise fit could not start
         * a trial, and said why. */
        if (stop_signal) {
            print_cut_short(c, (int)stop_signal);
            rc = 128 + (int)stop_signal;
        } else if (c->n_trials == MAX_TRIALS) {
            print_cut_short(c, 0);
            rc = EXIT_PROBLEM;
        }
        sb_free(&reason);
        return rc;
    }
    if (c->o->json)
        print_json(c, best, 0);
    else if (best > 0)
        print_text(c, best, false);
    if (best > 0 && reason.len)
        util_err("fit: %s", sb_str(&reason));
    if (best <= 0)
        util_err("fit: %s", reason.len ? sb_str(&reason) : "nothing fits");
    sb_free(&reason);
    rc = best > 0 ? EXIT_DONE : EXIT_PROBLEM;
    /* A signal that came as the last trial ended: the answer is whole, but whoever sent it
     * (Ctrl-C in a shell loop) is told it arrived. */
    if (stop_signal)
        rc = 128 + (int)stop_signal;
    return rc;
}

int cmd_fit(int argc, char **argv)
{
    struct fit_opts o = { .headroom = 10, .settle = 20 };
    int parsed = parse_opts(argc, argv, &o);
    if (parsed >= 0)
        return parsed;
    struct fit_ctx *c = util_xcalloc(1, sizeof *c);
    c->o = &o;
    c->headroom = o.headroom;
    c->settle = o.settle;
    int rc = EXIT_USAGE;
    char *lib = NULL;
    struct strbuf reduced = { 0 };
    if (set_limit(c, &reduced) && find_flag(c) && (lib = common_find_library("fit")) &&
        prepare_trials(c, lib))
        rc = fit_search(c);
    for (size_t i = 0; i < c->n_trials; i++)
        free(c->trials[i].why);
    free(lib);
    free(c->workdir);
    free(c);
    sb_free(&reduced);
    return rc;
}
