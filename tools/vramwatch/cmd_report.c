/* cmd_report.c: `vramwatch report`: the post-mortem a person reads in ten seconds, or the report
 * JSON back (the views are report_view.c, postmortem.c and jobview.c). */
#include <stdlib.h>
#include <string.h>

#include "colour.h"
#include "commands.h"
#include "job.h"
#include "report_view.h"

static const char usage[] =
        "usage: vramwatch report [--json] [--full] REPORT...\n"
        "\n"
        "The post-mortem of a vramwatch report: the program, each device's memory (live, peak,\n"
        "reserved, fragmentation, untracked, free), the allocation that really ran out of memory and\n"
        "where it was called from, the call sites holding the most memory, and cache flushes.\n"
        "With several reports (the ranks of one job), or a job file from vramwatch merge: the job\n"
        "view (the first out-of-memory, each process's live and peak memory and GPU, the physical\n"
        "GPUs and who shares them, ranks that hold much more than the median), then each process's\n"
        "post-mortem.\n"
        "\n"
        "  --json   print the report back as checked JSON (vramwatch.report/1); with several\n"
        "           reports, one vramwatch.job/1 document (what vramwatch merge writes)\n"
        "  --full   whole call stacks instead of the first application frames\n"
        "  --help   this text\n"
        "\n"
        "Colour only on a terminal, and never with NO_COLOR set or TERM=dumb.\n"
        "Exit status: 0 printed; 2 bad usage or a file that is not a readable vramwatch report.\n";

int cmd_report(int argc, char **argv)
{
    struct report_opts o = { 0 };
    char **paths = util_xcalloc((size_t)argc, sizeof *paths);
    size_t n = 0;
    bool only_files = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_files || a[0] != '-' || !a[1]) {
            paths[n++] = argv[i];
        } else if (strcmp(a, "--") == 0) {
            only_files = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            free(paths);
            fputs(usage, stdout);
            return EXIT_DONE;
        } else if (strcmp(a, "--json") == 0) {
            o.json = true;
        } else if (strcmp(a, "--full") == 0) {
            o.full = true;
        } else {
            free(paths);
            util_err("report: unknown option %s (see vramwatch report --help)", a);
            return EXIT_USAGE;
        }
    }
    if (n == 0) {
        free(paths);
        util_err(
                "report: no report file given (usage: vramwatch report [--json] [--full] REPORT...)");
        return EXIT_USAGE;
    }
    o.color = !o.json && colour_wanted(COLOUR_AUTO);
    struct model_report *reports = NULL;
    size_t n_reports = 0;
    int status = job_load_files(NULL, paths, n, &reports, &n_reports) ? EXIT_DONE : EXIT_USAGE;
    if (status == EXIT_DONE)
        report_show(stdout, reports, n_reports, &o);
    job_free_reports(reports, n_reports);
    free(paths);
    if (fflush(stdout) != 0 && status == EXIT_DONE) {
        util_err("report: cannot write the output");
        status = EXIT_USAGE;
    }
    return status;
}
