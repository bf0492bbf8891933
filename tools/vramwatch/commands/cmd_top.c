/* cmd_top.c: `vramwatch top [DIR]`: a live view of the processes running under the library, read
 * from the live-state files they keep in their report folder (lib/base/livefile.h, docs/top.md).
 * This file is the command and the view for pipes and --once; top.c reads the files, top_screen.c
 * is the interactive view on a terminal. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "common.h"
#include "livefile.h"
#include "sb.h"
#include "top.h"
#include "util.h"

static const char usage[] =
        "usage: vramwatch top [--once] [--interval SECONDS] [DIR]\n"
        "\n"
        "Shows every process running under vramwatch that keeps its reports in DIR (default:\n"
        "$VRAMWATCH_DIR, else the current folder), ranks and workers included: per device its\n"
        "live, peak and reserved memory, its limit and the card's capacity, which physical GPU it\n"
        "is (nvidia-smi's index and bus id), and the call sites holding the most live memory.\n"
        "Each process keeps a small file there (vramwatch-live.HOST.PID) while it runs; several\n"
        "ranks that share the folder are shown together.\n"
        "\n"
        "  --once               print one view and exit (for scripts and pipes)\n"
        "  --interval SECONDS   time between views, 0.1 to 3600 (default 1)\n"
        "  --help               this text\n"
        "\n"
        "On a terminal the view is redrawn in place: q or Ctrl-C quits, the arrow keys (or j, k)\n"
        "select a process and show its whole command, s changes the order (memory, growth,\n"
        "pid; m, g, p choose one). Otherwise views follow one another. Files of processes that\n"
        "have exited on this host are left out and counted.\n"
        "\n"
        "Exit status: 0 done; 2 bad usage or a folder that cannot be read.\n";

/* One device's figures: ordinal, live, peak, reserved, limit, capacity, then where it is. */
static void add_device(struct strbuf *b, const struct vw_live_file *f, uint32_t k)
{
    const struct vw_live_device *d = f->ndevices ? &f->devices[k] : NULL;
    const struct vw_live_where *w = f->ndevices ? &f->where[k] : NULL;
    if (d)
        sb_printf(b, "%3d", d->ordinal);
    else
        sb_printf(b, "%3s", "-");
    top_add_size(b, d ? d->live_bytes : -1, 11);
    top_add_size(b, d ? d->peak_live_bytes : -1, 11);
    top_add_size(b, d ? d->reserved_bytes : -1, 11);
    top_add_size(b, d ? d->limit_bytes : -1, 11);
    top_add_size(b, d ? d->total_bytes : -1, 11);
    sb_addc(b, ' ');
    top_add_int(b, w ? w->nvml_index : -1, 3);
    sb_addc(b, ' ');
    struct strbuf bus = { 0 };
    util_add_text(&bus, w && w->pci_bus_id[0] ? w->pci_bus_id : "-");
    sb_printf(b, "%-16.16s", sb_str(&bus));
    sb_free(&bus);
}

/* The view for pipes and --once: every process with every device and its call sites. */
static void render(struct strbuf *b, const char *dir, const struct top_proc *procs, size_t n,
                   size_t exited)
{
    top_add_header(b, dir, n, exited);
    if (!n)
        return;
    sb_printf(b, "\n%8s %5s %-12s %3s %10s %10s %10s %10s %10s %3s %-16s  %s\n", "PID", "RANK",
              "HOST", "DEV", "LIVE", "PEAK", "RESERVED", "LIMIT", "CAPACITY", "GPU", "BUS-ID",
              "COMMAND");
    for (size_t i = 0; i < n; i++) {
        const struct vw_live_file *f = &procs[i].f;
        uint32_t rows = f->ndevices ? f->ndevices : 1;
        for (uint32_t k = 0; k < rows; k++) {
            if (k == 0) {
                sb_printf(b, "%8" PRId64 " ", f->pid);
                top_add_int(b, f->rank, 5);
                sb_add(b, " ");
                struct strbuf h = { 0 };
                util_add_text(&h, f->host);
                sb_printf(b, "%-12.12s ", sb_str(&h));
                sb_free(&h);
            } else {
                sb_printf(b, "%8s %5s %-12s ", "", "", "");
            }
            add_device(b, f, k);
            if (k == 0) {
                sb_add(b, "  ");
                util_add_text(b, f->argv);
                if (f->oom)
                    sb_printf(b, "  [%u out of memory]", f->oom);
                if (procs[i].silent)
                    sb_add(b, "  [no update lately]");
            }
            sb_addc(b, '\n');
        }
        top_add_sites(b, f, 14);
    }
}

struct top_args {
    bool once;
    double interval;
};

static int top_option(struct util_args *a, int c, void *opts)
{
    struct top_args *t = opts;
    switch (c) {
    case '1':
        t->once = true;
        return -1;
    case 'i':
        return util_args_number(a, 0.1, 3600, &t->interval) ? -1 : EXIT_USAGE;
    default:
        return EXIT_USAGE;
    }
}

int cmd_top(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "once", no_argument, NULL, '1' },
        { "interval", required_argument, NULL, 'i' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct top_args t = { .interval = 1.0 };
    const struct common_cmd cmd = { .name = "top",
                                    .usage = usage,
                                    .shortopts = "h",
                                    .longopts = longopts,
                                    .option = top_option,
                                    .opts = &t };
    struct common_opts o;
    int parsed = common_options(&cmd, argc, argv, &o);
    if (parsed >= 0)
        return parsed;
    if (o.n_operands > 1)
        return util_usage_error(&o.args, "one folder at most, %d given", (int)o.n_operands);
    const char *env = getenv("VRAMWATCH_DIR");
    const char *dir = o.n_operands ? o.operands[0] : env && *env ? env : ".";
    if (!t.once && isatty(STDOUT_FILENO))
        return top_screen_run(dir, t.interval);
    struct top_proc *procs = NULL;
    int status = EXIT_DONE;
    for (bool first = true;; first = false) {
        size_t n, exited;
        struct strbuf err = { 0 }, text = { 0 };
        if (!top_scan(dir, &procs, &n, &exited, &err)) {
            util_err("top: %s", sb_str(&err));
            sb_free(&err);
            status = EXIT_USAGE;
            break;
        }
        if (!first)
            sb_addc(&text, '\n');
        render(&text, dir, procs, n, exited);
        fputs(sb_str(&text), stdout);
        fflush(stdout);
        sb_free(&text);
        if (t.once)
            break;
        struct timespec ts = { (time_t)t.interval,
                               (long)((t.interval - (double)(time_t)t.interval) * 1e9) };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    free(procs);
    return status;
}
