/* cmd_advise.c: `vramwatch advise`: concrete changes to the command line, with predicted peaks
 * (the engine is advice.c, its printers advice_print.c). */
#include <stdlib.h>
#include <string.h>

#include "advice.h"
#include "advice_print.h"
#include "commands.h"
#include "job.h"

static const char usage[] =
        "usage: vramwatch advise [--json] [--target SIZE] [--headroom PCT] REPORT...\n"
        "\n"
        "Concrete changes to the command line so the next run fits, best first, each with the\n"
        "command to run next and its predicted peak: the batch (and the accumulation that keeps the\n"
        "effective batch), the image size, mixed precision and gradient checkpointing, validation,\n"
        "other processes on the card, the allocator setting, a leak, more GPUs or sharding.\n"
        "Several reports of one job at other batch or image sizes sharpen the memory model (the same\n"
        "command apart from those values); reports of one job's ranks, or a file written by\n"
        "vramwatch merge, are advised as one job. A report of a failure in the first step only\n"
        "bounds the need: the advice says so, and gives the vramwatch fit command that measures.\n"
        "\n"
        "  --json           print vramwatch.advice/1\n"
        "  --target SIZE    the card to fit (16GiB, 24GB, bytes); default: the report's emulated\n"
        "                   limit, else the card's total memory\n"
        "  --headroom PCT   share of the capacity kept free (default 10)\n"
        "  --help           this text\n"
        "\n"
        "Exit status: 0 advice printed; 2 bad usage, unreadable reports, or reports of different jobs.\n";

static bool parse_percent(const char *s, double *out)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || (*end && strcmp(end, "%") != 0) || !(v >= 0) || !(v < 100))
        return false;
    *out = v;
    return true;
}

int cmd_advise(int argc, char **argv)
{
    bool json = false, only_files = false;
    const char *target = NULL;
    double headroom = ADVICE_DEFAULT_HEADROOM;
    char **paths = util_xcalloc((size_t)argc, sizeof *paths);
    size_t n = 0;
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
            json = true;
        } else if (strcmp(a, "--target") == 0 || strcmp(a, "--headroom") == 0) {
            if (i + 1 >= argc) {
                free(paths);
                util_err("advise: %s needs a value", a);
                return EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--target") == 0) {
                target = v;
            } else if (!parse_percent(v, &headroom)) {
                free(paths);
                util_err("advise: --headroom %s: expected a percentage from 0 to below 100", v);
                return EXIT_USAGE;
            }
        } else {
            free(paths);
            util_err("advise: unknown option %s (see vramwatch advise --help)", a);
            return EXIT_USAGE;
        }
    }
    uint64_t target_bytes = 0;
    const char *why = NULL;
    if (target && (!util_parse_size(target, &target_bytes, &why) || target_bytes == 0 ||
                   target_bytes > INT64_MAX)) {
        free(paths);
        util_err("advise: --target %s: %s", target, why ? why : "expected a size above 0");
        return EXIT_USAGE;
    }
    if (n == 0) {
        free(paths);
        util_err(
                "advise: no report file given (usage: vramwatch advise [--json] [--target SIZE] [--headroom PCT] REPORT...)");
        return EXIT_USAGE;
    }
    /* reports, or merged job files whose processes' reports are taken out of them */
    struct model_report *reports = NULL;
    size_t loaded = 0;
    int status = job_load_files(NULL, paths, n, &reports, &loaded) ? EXIT_DONE : EXIT_USAGE;
    if (status == EXIT_DONE) {
        struct advice a;
        struct advice_opts ao = { .target = target ? (int64_t)target_bytes : 0,
                                  .headroom = headroom };
        struct strbuf err = { 0 };
        if (!advice_build(&a, reports, loaded, &ao, &err)) {
            util_err("advise: %s", sb_str(&err));
            status = EXIT_USAGE;
        } else if (json) {
            advice_print_json(stdout, &a);
        } else {
            advice_print_text(stdout, &a);
        }
        sb_free(&err);
        advice_free(&a);
    }
    job_free_reports(reports, loaded);
    free(paths);
    if (fflush(stdout) != 0 && status == EXIT_DONE) {
        util_err("advise: cannot write the output");
        status = EXIT_USAGE;
    }
    return status;
}
