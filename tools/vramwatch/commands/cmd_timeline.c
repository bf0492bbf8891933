/* cmd_timeline.c: `vramwatch timeline`: the report's whole-run timeline as one self-contained SVG
 * or HTML picture (timeline_svg.c; the HTML adds hover details and flame graphs of live memory by
 * call chain, timeline_flame.c), a Chrome trace event file for Perfetto and chrome://tracing
 * (timeline_trace.c), what was live by call chain as collapsed stacks or speedscope's JSON
 * (timeline_stacks.c), or in the terminal with Unicode blocks (timeline_term.c); or one report as
 * PyTorch's memory snapshot (timeline_torch.c), which is not a drawing. What every
 * drawing shows, a panel per device of each report, is built in timeline_view.c. This file reads
 * the options, loads the reports and writes the result. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "colour.h"
#include "commands.h"
#include "common.h"
#include "job.h"
#include "sb.h"
#include "timeline_stacks.h"
#include "timeline_torch.h"
#include "timeline_view.h"

static const char usage[] =
        "usage: vramwatch timeline [-o FILE] [--format=FORMAT] [--color=WHEN] [--at=peak|failure]\n"
        "                          [--full] REPORT...\n"
        "\n"
        "The report's memory over the whole run, per device: live and reserved memory (the band\n"
        "between them is fragmentation), untracked memory, the card's capacity or emulated limit,\n"
        "markers, failures and cache flushes with their call sites, and leaks found in the run.\n"
        "Several reports of one job's ranks, or a file written by vramwatch merge, are drawn on one\n"
        "time axis, a panel per rank and device, in rank order. Reports of one script run at other\n"
        "settings (the batch or image size; the runs advise reads together) are drawn one run under\n"
        "the other, in the order they began, each on its own time axis from that run's start and\n"
        "named by what differs (\"--batch 64 (out of memory)\"). Reports of different scripts are\n"
        "refused.\n"
        "\n"
        "  -o, --output FILE  write one self-contained file: FILE.svg, FILE.html with hover\n"
        "                     details, or FILE.trace.json, a Chrome trace event file for Perfetto\n"
        "                     or chrome://tracing; without it, the timeline is drawn in the\n"
        "                     terminal, as wide as the terminal (else $COLUMNS, else 80); the\n"
        "                     file is replaced whole, mode 0600: it holds the command line\n"
        "                     Live memory by call chain for flame graph tools: FILE.collapsed\n"
        "                     or FILE.folded, collapsed stacks (flamegraph.pl, speedscope),\n"
        "                     of what was live at the failure where a report keeps it, else at\n"
        "                     the peak; FILE.speedscope.json, speedscope's format, a profile of\n"
        "                     each per report (several reports: each named in the root frame);\n"
        "                     FILE.pickle, PyTorch's memory snapshot (below)\n"
        "  --format=FORMAT    svg, html, trace, collapsed or speedscope, whatever the output's\n"
        "                     name (without -o, the file is written on standard output); or\n"
        "                     torch-snapshot (also chosen by -o FILE.pickle): one report as the\n"
        "                     pickle PyTorch's torch.cuda.memory._snapshot() returns, for\n"
        "                     torch.cuda._memory_viz and pytorch.org/memory_viz. Each device\n"
        "                     allocation live at the end is a segment of one active block: the\n"
        "                     blocks PyTorch cuts a segment into never reach CUDA, so they cannot\n"
        "                     be seen from outside. The trace is the report's latest allocations\n"
        "                     and frees (VRAMWATCH_TRACE) and its out-of-memory failures; a report\n"
        "                     without one gives segments only\n"
        "  --at=MOMENT        collapsed and speedscope: what was live at the peak or at the\n"
        "                     (latest out-of-memory) failure only\n"
        "  --full             html, collapsed and speedscope: whole call chains, from the\n"
        "                     process's entry; by default each starts at its first frame of the\n"
        "                     application (the process's entry and the interpreter are hidden)\n"
        "  --color=WHEN       the terminal view's colour: auto (the default: on a terminal,\n"
        "                     unless NO_COLOR is set to a non-empty value or TERM is dumb),\n"
        "                     always, or never\n"
        "  --help             this text\n"
        "\n"
        "Exit status: 0 done; 2 bad usage, an unreadable report, a report without a timeline\n"
        "(written by an earlier version), or --at a moment no report keeps.\n";

/* ---- the command ---- */

/* What is written: the terminal view, or a file whose kind its name or --format says. */
enum kind { TERMINAL, SVG, HTML, TRACE, COLLAPSED, SPEEDSCOPE, TORCH };

struct timeline_args {
    const char *output, *format, *at;
    bool full;
    enum stacks_moment moment; /* --at, read */
};

enum { OPT_FORMAT = 256, OPT_AT, OPT_FULL };

static int timeline_option(struct util_args *a, int c, void *opts)
{
    struct timeline_args *t = opts;
    if (c == 'o')
        t->output = a->value;
    else if (c == OPT_FORMAT)
        t->format = a->value;
    else if (c == OPT_AT)
        t->at = a->value;
    else if (c == OPT_FULL)
        t->full = true;
    else
        return EXIT_USAGE;
    return -1;
}

/* The kind of output -o and --format ask for: -1 to go on, else EXIT_USAGE once said. */
static int output_kind(const struct timeline_args *t, enum kind *kind)
{
    enum kind named = TERMINAL;
    *kind = TERMINAL;
    if (t->output) {
        if (util_has_suffix(t->output, ".html") || util_has_suffix(t->output, ".htm"))
            named = HTML;
        else if (util_has_suffix(t->output, ".svg"))
            named = SVG;
        else if (util_has_suffix(t->output, ".trace.json"))
            named = TRACE;
        else if (util_has_suffix(t->output, ".collapsed") || util_has_suffix(t->output, ".folded"))
            named = COLLAPSED;
        else if (util_has_suffix(t->output, ".speedscope.json"))
            named = SPEEDSCOPE;
        else if (util_has_suffix(t->output, ".pickle"))
            named = TORCH;
    }
    if (t->format) {
        *kind = strcmp(t->format, "svg") == 0              ? SVG
                : strcmp(t->format, "html") == 0           ? HTML
                : strcmp(t->format, "trace") == 0          ? TRACE
                : strcmp(t->format, "collapsed") == 0      ? COLLAPSED
                : strcmp(t->format, "speedscope") == 0     ? SPEEDSCOPE
                : strcmp(t->format, "torch-snapshot") == 0 ? TORCH
                                                           : TERMINAL;
        if (*kind == TERMINAL) {
            util_err("timeline: --format=%s: expected svg, html, trace, collapsed, speedscope or "
                     "torch-snapshot",
                     t->format);
            return EXIT_USAGE;
        }
        if (named != TERMINAL && named != *kind) {
            util_err("timeline: %s: the name says one format, --format=%s another", t->output,
                     t->format);
            return EXIT_USAGE;
        }
    } else if (t->output) {
        *kind = named;
        if (*kind == TERMINAL) {
            util_err("timeline: %s: the output must end in .svg, .html, .trace.json, .collapsed, "
                     ".folded, .speedscope.json or .pickle (or give --format)",
                     t->output);
            return EXIT_USAGE;
        }
    }
    return -1;
}

/* --at and --full, for the formats that take them: -1 to go on, else EXIT_USAGE once said. */
static int stacks_options(struct timeline_args *t, enum kind kind)
{
    bool stacks = kind == COLLAPSED || kind == SPEEDSCOPE;
    t->moment = STACKS_AT_DEFAULT;
    if (t->at) {
        t->moment = strcmp(t->at, "peak") == 0      ? STACKS_AT_PEAK
                    : strcmp(t->at, "failure") == 0 ? STACKS_AT_FAILURE
                                                    : STACKS_AT_DEFAULT;
        if (t->moment == STACKS_AT_DEFAULT) {
            util_err("timeline: --at=%s: expected peak or failure", t->at);
            return EXIT_USAGE;
        }
        if (!stacks) {
            util_err("timeline: --at is for the collapsed and speedscope formats");
            return EXIT_USAGE;
        }
    }
    if (t->full && !stacks && kind != HTML) {
        util_err("timeline: --full is for the html, collapsed and speedscope formats");
        return EXIT_USAGE;
    }
    return -1;
}

/* Whether the reports can be drawn as one picture: each with a timeline, and one job's processes
 * or runs of one script at other settings (job_together, the rule advise applies), said in
 * *together. */
static int check_reports(const struct common_reports *r, char *const *paths,
                         enum job_together *together)
{
    *together = JOB_RANKS;
    for (size_t i = 0; i < r->n; i++) {
        const char *path = r->v[i].path ? r->v[i].path : paths[0];
        if (!r->v[i].timeline.known) {
            util_err(
                    "timeline: %s has no timeline: it was written by an earlier version of vramwatch; "
                    "vramwatch report shows what it holds",
                    path);
            return EXIT_USAGE;
        }
        if (r->v[i].timeline.n_devices == 0 && r->n == 1) {
            util_err(
                    "timeline: %s has no device memory over time to show (no allocation was recorded)",
                    path);
            return EXIT_USAGE;
        }
    }
    int status = EXIT_DONE;
    if (r->n > 1) {
        struct strbuf why = { 0 };
        *together = job_together(r->v, r->n, &why);
        if (*together == JOB_NEITHER) {
            util_err("timeline: %s", sb_str(&why));
            status = EXIT_USAGE;
        }
        sb_free(&why);
    }
    return status;
}

static void write_doc(FILE *f, const void *doc)
{
    const struct strbuf *b = doc;
    fwrite(b->s, 1, b->len, f);
}

/* The finished document on standard output, or as the file output: whole or not at all, as
 * merge -o (it holds the job's command line). EXIT_DONE, or EXIT_USAGE once said. */
static int write_out(const struct strbuf *doc, const char *output)
{
    if (!output) {
        write_doc(stdout, doc);
        return common_flush("timeline", EXIT_DONE);
    }
    return common_write_file("timeline", output, write_doc, doc) ? EXIT_DONE : EXIT_USAGE;
}

/* What was live by call chain (collapsed stacks, speedscope) into doc: false once said. */
static bool write_stacks(struct strbuf *doc, const struct view *v, enum kind kind,
                         const struct timeline_args *t)
{
    struct strbuf err = { 0 };
    bool ok = kind == COLLAPSED ? timeline_stacks_collapsed(doc, v, t->moment, t->full, &err)
                                : timeline_stacks_speedscope(doc, v, t->moment, t->full, &err);
    if (!ok)
        util_err("timeline: %s", sb_str(&err));
    sb_free(&err);
    return ok;
}

/* The picture of v written where it goes: EXIT_DONE, or EXIT_USAGE once said. */
static int draw(const struct view *v, enum kind kind, const struct timeline_args *t,
                enum colour_mode colour)
{
    const char *output = t->output;
    if (kind == TERMINAL) {
        timeline_term_print(stdout, v, colour_wanted(colour));
        return common_flush("timeline", EXIT_DONE);
    }
    struct strbuf doc = { 0 };
    int status = EXIT_DONE;
    if (kind == TRACE)
        timeline_trace_write(&doc, v);
    else if (kind == COLLAPSED || kind == SPEEDSCOPE)
        status = write_stacks(&doc, v, kind, t) ? EXIT_DONE : EXIT_USAGE;
    else
        timeline_svg_write(&doc, v, kind == HTML);
    if (status == EXIT_DONE)
        status = write_out(&doc, output);
    sb_free(&doc);
    return status;
}

/* The reports in the order they are drawn: run by run (in the order the runs began), each run's
 * processes in rank order as report shows them. The runs' reports are shallow copies, borrowed
 * from r (never freed one by one), so that each run is one array to read as a job. */
struct drawn {
    struct model_report *copies;
    const struct model_report **order;
    size_t *run_of;
    size_t n_runs;
};

static void order_reports(const struct common_reports *r, enum job_together together,
                          struct drawn *d)
{
    size_t n = r->n;
    size_t *split = util_xcalloc(n ? n : 1, sizeof *split);
    d->n_runs = together == JOB_RUNS ? job_split(r->v, n, split) : 1;
    d->copies = util_xcalloc(n ? n : 1, sizeof *d->copies);
    d->order = util_xcalloc(n ? n : 1, sizeof *d->order);
    d->run_of = util_xcalloc(n ? n : 1, sizeof *d->run_of);
    size_t at = 0;
    for (size_t g = 0; g < d->n_runs; g++) {
        size_t first = at;
        for (size_t i = 0; i < n; i++)
            if (split[i] == g)
                d->copies[at++] = r->v[i];
        struct job j = { 0 };
        job_build(&j, d->copies + first, at - first);
        for (size_t k = 0; k < j.n; k++) {
            d->order[first + k] = j.procs[k].r;
            d->run_of[first + k] = g;
        }
        job_free(&j);
    }
    free(split);
}

/* The reports' panels drawn: a job's processes on one time axis, runs at other settings each on
 * its own. */
static int draw_reports(const struct common_reports *r, enum job_together together, enum kind kind,
                        const struct timeline_args *t, enum colour_mode colour)
{
    struct drawn d;
    order_reports(r, together, &d);
    struct view v;
    timeline_view_build(&v, d.order, r->n, d.run_of, d.n_runs);
    v.full_frames = t->full;
    int status;
    if (v.n_panels == 0) {
        util_err(
                "timeline: no device memory over time to show in these reports (no allocation was recorded)");
        status = EXIT_USAGE;
    } else {
        status = draw(&v, kind, t, colour);
    }
    timeline_view_free(&v);
    free(d.copies);
    free(d.order);
    free(d.run_of);
    return status;
}

/* --format=torch-snapshot: one report as PyTorch's memory snapshot (timeline_torch.c). */
static int write_torch(const struct common_reports *r, const char *output)
{
    if (r->n != 1) {
        util_err("timeline: --format=torch-snapshot converts one report at a time (%zu given)",
                 r->n);
        return EXIT_USAGE;
    }
    if (!output && isatty(STDOUT_FILENO)) {
        util_err("timeline: a torch snapshot is binary: give -o FILE.pickle or redirect the output");
        return EXIT_USAGE;
    }
    struct strbuf doc = { 0 };
    if (!timeline_torch_write(&doc, &r->v[0]))
        util_err("timeline: %s has no trace (written by an earlier version of vramwatch): the "
                 "snapshot has its segments and out-of-memory entries only",
                 r->v[0].path ? r->v[0].path : "the report");
    int status = write_out(&doc, output);
    sb_free(&doc);
    return status;
}

int cmd_timeline(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' },
        { "format", required_argument, NULL, OPT_FORMAT },
        { "color", required_argument, NULL, COMMON_OPT_COLOR },
        { "at", required_argument, NULL, OPT_AT },
        { "full", no_argument, NULL, OPT_FULL },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct timeline_args t = { 0 };
    const struct common_cmd cmd = { .name = "timeline",
                                    .usage = usage,
                                    .shortopts = "ho:",
                                    .longopts = longopts,
                                    .option = timeline_option,
                                    .opts = &t,
                                    .reports = true };
    struct common_opts o;
    int status = common_options(&cmd, argc, argv, &o);
    if (status >= 0)
        return status;
    enum kind kind;
    status = output_kind(&t, &kind);
    if (status < 0)
        status = stacks_options(&t, kind);
    if (status >= 0)
        return status;
    /* Reports, or merged job files whose processes' reports are taken out of them. */
    struct common_reports r;
    enum job_together together = JOB_RANKS;
    status = common_load_reports(&o, NULL, &r);
    if (status == EXIT_DONE && kind == TORCH) {
        status = write_torch(&r, t.output);
        common_free_reports(&r);
        return status;
    }
    if (status == EXIT_DONE)
        status = check_reports(&r, o.operands, &together);
    if (status == EXIT_DONE)
        status = draw_reports(&r, together, kind, &t, o.colour);
    common_free_reports(&r);
    return status;
}
