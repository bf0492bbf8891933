/* cmd_report.c: `vramwatch report`: the post-mortem a person reads in ten seconds, or the report
 * JSON back (the views are report_view.c, postmortem.c and jobview.c). */
#include <getopt.h>
#include <stdlib.h>

#include "colour.h"
#include "commands.h"
#include "common.h"
#include "report_view.h"

static const char usage[] =
        "usage: vramwatch report [--json] [--full] [--color=WHEN] REPORT...\n"
        "\n"
        "The post-mortem of a vramwatch report: the program, each device's memory (live, peak,\n"
        "reserved, fragmentation, untracked, free), the allocation that really ran out of memory and\n"
        "where it was called from, the call sites holding the most memory, and cache flushes.\n"
        "With several reports, or a job file from vramwatch merge: separate runs are told apart\n"
        "(command line, launcher ids, rank, parent, time) and each is shown on its own; a job of\n"
        "several processes gets the job view (the first out-of-memory, ranks that behave alike on\n"
        "one line, the physical GPUs and who shares them, ranks far from the median), then the\n"
        "post-mortem of the first to run out of memory; --full shows every process's.\n"
        "For a run that fitted, the call sites are those live at the peak, when the report has\n"
        "them; otherwise those live when it was written.\n"
        "\n"
        "  --json        print the report back as checked JSON (vramwatch.report/1); with several\n"
        "                reports, one vramwatch.job/1 document (what vramwatch merge writes)\n"
        "  --full        whole call stacks instead of the first application frames; for a job,\n"
        "                every process's post-mortem\n" COLOUR_HELP "  --help        this text\n"
        "\n"
        "Options and report files may come in any order; -- ends the options.\n"
        "Exit status: 0 printed; 1 printed, and a report shows a run that did not fit (an\n"
        "allocation out of memory for good, PyTorch's out-of-memory error, or in observe mode the\n"
        "emulated limit crossed); 2 bad usage or a file that is not a readable vramwatch report.\n";

static int report_option(struct util_args *a, int c, void *opts)
{
    struct report_opts *o = opts;
    if (c != 'f')
        return EXIT_USAGE;
    o->full = true;
    return -1;
}

int cmd_report(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "json", no_argument, NULL, COMMON_OPT_JSON },
        { "full", no_argument, NULL, 'f' },
        { "color", required_argument, NULL, COMMON_OPT_COLOR },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct report_opts ro = { 0 };
    const struct common_cmd cmd = { .name = "report",
                                    .usage = usage,
                                    .shortopts = "h",
                                    .longopts = longopts,
                                    .option = report_option,
                                    .opts = &ro,
                                    .reports = true };
    struct common_opts o;
    int status = common_options(&cmd, argc, argv, &o);
    if (status >= 0)
        return status;
    ro.json = o.json;
    /* JSON is for programs: never coloured. */
    ro.color = !ro.json && colour_wanted(o.colour);
    struct common_reports r;
    status = common_load_reports(&o, NULL, &r);
    if (status == EXIT_DONE) {
        report_view_show(stdout, r.v, r.n, &ro);
        /* The problem a report reports: a run that did not fit (README, exit status). */
        if (common_did_not_fit(r.v, r.n))
            status = EXIT_PROBLEM;
    }
    common_free_reports(&r);
    return common_flush("report", status);
}
