/* cmd_timeline.c: `vramwatch timeline`: the report's whole-run timeline as one self-contained SVG
 * or HTML picture (timeline_svg.c; the HTML adds hover details and flame graphs of live memory by
 * call chain, timeline_flame.c), a Chrome trace event file for Perfetto and chrome://tracing
 * (timeline_trace.c), or in the terminal with Unicode blocks (timeline_term.c). What every
 * drawing shows, a panel per device of each report, is built in timeline_view.c. This file reads
 * the options, loads the reports and writes the result. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "colour.h"
#include "commands.h"
#include "job.h"
#include "sb.h"
#include "timeline_view.h"

static const char usage[] =
        "usage: vramwatch timeline [-o FILE.svg|FILE.html|FILE.trace.json] [--format=FORMAT] [--color=WHEN]\n"
        "                          REPORT...\n"
        "\n"
        "The report's memory over the whole run, per device: live and reserved memory (the band\n"
        "between them is fragmentation), untracked memory, the card's capacity or emulated limit,\n"
        "markers, failures and cache flushes with their call sites, and leaks found in the run.\n"
        "Several reports of one job's ranks, or a file written by vramwatch merge, are drawn on one\n"
        "time axis, a panel per rank and device, in rank order.\n"
        "\n"
        "  -o, --output FILE  write one self-contained file: FILE.svg, FILE.html with hover\n"
        "                     details, or FILE.trace.json, a Chrome trace event file for Perfetto\n"
        "                     or chrome://tracing; without it, the timeline is drawn in the\n"
        "                     terminal, as wide as the terminal (else $COLUMNS, else 80); the\n"
        "                     file is replaced whole, mode 0600: it holds the command line\n"
        "  --format=FORMAT    svg, html or trace, whatever the output's name (without -o, the\n"
        "                     file is written on standard output)\n"
        "  --color=WHEN       the terminal view's colour: auto (the default: on a terminal,\n"
        "                     unless NO_COLOR is set to a non-empty value or TERM is dumb),\n"
        "                     always, or never\n"
        "  --help             this text\n"
        "\n"
        "Exit status: 0 done; 2 bad usage, an unreadable report, or a report without a timeline\n"
        "(written by an earlier version).\n";

/* ---- the command ---- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static void write_doc(FILE *f, const void *doc)
{
    const struct strbuf *b = doc;
    fwrite(b->s, 1, b->len, f);
}

int cmd_timeline(int argc, char **argv)
{
    const char *output = NULL, *format = NULL;
    enum colour_mode colour = COLOUR_AUTO;
    enum { OPT_FORMAT = 256, OPT_COLOR };
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' },
        { "format", required_argument, NULL, OPT_FORMAT },
        { "color", required_argument, NULL, OPT_COLOR },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct util_args a;
    util_args_init(&a, "timeline", argc, argv, "ho:", longopts);
    for (int c; (c = util_args_next(&a)) != -1;) {
        switch (c) {
        case 'o':
            output = a.value;
            break;
        case OPT_COLOR:
            if (!colour_option(&a, &colour))
                return EXIT_USAGE;
            break;
        case OPT_FORMAT:
            format = a.value;
            break;
        case 'h':
            fputs(usage, stdout);
            return EXIT_DONE;
        default:
            return EXIT_USAGE;
        }
    }
    char **paths = argv + a.next;
    size_t n_paths = (size_t)(argc - a.next);
    if (!n_paths)
        return util_usage_error(&a, "no report file given");
    /* What is written: the terminal view, or a file whose kind its name or --format says. */
    enum { TERMINAL, SVG, HTML, TRACE } kind = TERMINAL, named = TERMINAL;
    if (output) {
        if (ends_with(output, ".html") || ends_with(output, ".htm"))
            named = HTML;
        else if (ends_with(output, ".svg"))
            named = SVG;
        else if (ends_with(output, ".trace.json"))
            named = TRACE;
    }
    if (format) {
        kind = strcmp(format, "svg") == 0     ? SVG
               : strcmp(format, "html") == 0  ? HTML
               : strcmp(format, "trace") == 0 ? TRACE
                                              : TERMINAL;
        if (kind == TERMINAL) {
            util_err("timeline: --format=%s: expected svg, html or trace", format);
            return EXIT_USAGE;
        }
        if (named != TERMINAL && named != kind) {
            util_err("timeline: %s: the name says one format, --format=%s another", output, format);
            return EXIT_USAGE;
        }
    } else if (output) {
        kind = named;
        if (kind == TERMINAL) {
            util_err("timeline: %s: the output must end in .svg, .html or .trace.json (or give "
                     "--format)",
                     output);
            return EXIT_USAGE;
        }
    }
    /* Reports, or merged job files whose processes' reports are taken out of them. */
    struct model_report *reports = NULL;
    size_t n = 0;
    int status = job_load_files(NULL, paths, n_paths, &reports, &n) ? EXIT_DONE : EXIT_USAGE;
    for (size_t i = 0; i < n && status == EXIT_DONE; i++) {
        const char *path = reports[i].path ? reports[i].path : paths[0];
        if (!reports[i].timeline.known) {
            util_err(
                    "timeline: %s has no timeline: it was written by an earlier version of vramwatch; "
                    "vramwatch report shows what it holds",
                    path);
            status = EXIT_USAGE;
        } else if (reports[i].timeline.n_devices == 0 && n == 1) {
            util_err(
                    "timeline: %s has no device memory over time to show (no allocation was recorded)",
                    path);
            status = EXIT_USAGE;
        }
    }
    if (status == EXIT_DONE && n > 1) {
        /* one picture is of one job: the rule merge applies */
        struct strbuf why = { 0 };
        if (job_mixed(reports, n, &why)) {
            util_err("timeline: %s", sb_str(&why));
            status = EXIT_USAGE;
        }
        sb_free(&why);
    }
    struct job j = { 0 };
    const struct model_report **order = NULL;
    if (status == EXIT_DONE) {
        /* a job's processes in rank order, as report shows them */
        job_build(&j, reports, n);
        order = util_xcalloc(n, sizeof *order);
        for (size_t i = 0; i < n; i++)
            order[i] = j.procs[i].r;
        struct view v;
        timeline_view_build(&v, order, n);
        if (v.n_panels == 0) {
            util_err(
                    "timeline: no device memory over time to show in these reports (no allocation was recorded)");
            status = EXIT_USAGE;
        } else if (kind != TERMINAL) {
            struct strbuf doc = { 0 };
            if (kind == TRACE)
                timeline_trace_write(&doc, &v);
            else
                timeline_svg_write(&doc, &v, kind == HTML);
            if (!output) {
                write_doc(stdout, &doc);
                if (fflush(stdout) != 0) {
                    util_err("timeline: cannot write the output");
                    status = EXIT_USAGE;
                }
            } else {
                /* Whole or not at all, never through a link; mode 0600 as reports and merge -o: the
                 * picture holds the job's command line (docs/reliability.md). */
                struct strbuf why = { 0 };
                if (!util_replace_file(output, 0600, write_doc, &doc, &why)) {
                    struct strbuf where = { 0 };
                    util_add_text(&where, output);
                    util_err("timeline: cannot write %s: %s", sb_str(&where), sb_str(&why));
                    sb_free(&where);
                    status = EXIT_USAGE;
                }
                sb_free(&why);
            }
            sb_free(&doc);
        } else {
            timeline_term_print(stdout, &v, colour_wanted(colour));
            if (fflush(stdout) != 0) {
                util_err("timeline: cannot write the output");
                status = EXIT_USAGE;
            }
        }
        timeline_view_free(&v);
        job_free(&j);
    }
    job_free_reports(reports, n);
    free(order);
    return status;
}
