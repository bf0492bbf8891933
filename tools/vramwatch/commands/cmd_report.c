/* cmd_report.c: `vramwatch report`: the post-mortem a person reads in ten seconds, or the report
 * JSON back (the views are report_view.c, postmortem.c and jobview.c). */
#include <getopt.h>
#include <stdlib.h>

#include "colour.h"
#include "commands.h"
#include "job.h"
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

int cmd_report(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "json", no_argument, NULL, 'j' },
        { "full", no_argument, NULL, 'f' },
        { "color", required_argument, NULL, 'C' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct report_opts o = { 0 };
    enum colour_mode colour = COLOUR_AUTO;
    struct util_args a;
    util_args_init(&a, "report", argc, argv, "h", longopts);
    for (int c; (c = util_args_next(&a)) != -1;) {
        switch (c) {
        case 'j':
            o.json = true;
            break;
        case 'f':
            o.full = true;
            break;
        case 'C':
            if (!colour_option(&a, &colour))
                return EXIT_USAGE;
            break;
        case 'h':
            fputs(usage, stdout);
            return EXIT_DONE;
        default:
            return EXIT_USAGE;
        }
    }
    char **paths = argv + a.next;
    size_t n = (size_t)(argc - a.next);
    if (n == 0)
        return util_usage_error(&a, "no report file given");
    /* JSON is for programs: never coloured. */
    o.color = !o.json && colour_wanted(colour);
    struct model_report *reports = NULL;
    size_t n_reports = 0;
    int status = job_load_files(NULL, paths, n, &reports, &n_reports) ? EXIT_DONE : EXIT_USAGE;
    if (status == EXIT_DONE) {
        report_view_show(stdout, reports, n_reports, &o);
        /* The problem a report reports: a run that did not fit (README, exit status). */
        for (size_t i = 0; i < n_reports; i++)
            if (model_did_not_fit(&reports[i]))
                status = EXIT_PROBLEM;
    }
    job_free_reports(reports, n_reports);
    if (fflush(stdout) != 0 && status != EXIT_USAGE) {
        util_err("report: cannot write the output");
        status = EXIT_USAGE;
    }
    return status;
}
