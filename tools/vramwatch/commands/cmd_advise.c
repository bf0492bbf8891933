/* cmd_advise.c: `vramwatch advise`: concrete changes to the command line, with predicted peaks
 * (the engine is advice.c, its printers advice_print.c). */
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>

#include "advice.h"
#include "advice_print.h"
#include "commands.h"
#include "job.h"
#include "sb.h"

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
        "  --headroom PCT   share of the capacity kept free: 10, 12.5 or 5% (default 10)\n"
        "  --help           this text\n"
        "\n"
        "A value follows its option as --target 16GiB or --target=16GiB; sizes take decimals\n"
        "(14.4GiB) and the units K M G T, KiB MiB GiB TiB (powers of 1024), KB MB GB TB (of 1000).\n"
        "Options and report files may come in any order; -- ends the options.\n"
        "Exit status: 0 advice printed; 1 advice printed for a run that did not fit (an allocation\n"
        "out of memory for good, PyTorch's out-of-memory error, or in observe mode the emulated\n"
        "limit crossed); 2 bad usage, unreadable reports, or reports of different jobs.\n";

int cmd_advise(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "json", no_argument, NULL, 'j' },
        { "target", required_argument, NULL, 't' },
        { "headroom", required_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    bool json = false;
    uint64_t target_bytes = 0;
    double headroom = ADVICE_DEFAULT_HEADROOM;
    struct util_args args;
    util_args_init(&args, "advise", argc, argv, "h", longopts);
    for (int c; (c = util_args_next(&args)) != -1;) {
        switch (c) {
        case 'j':
            json = true;
            break;
        case 't':
            if (!util_args_size(&args, &target_bytes))
                return EXIT_USAGE;
            if (target_bytes > INT64_MAX) {
                util_err("advise: --target %s: larger than any card", args.value);
                return EXIT_USAGE;
            }
            break;
        case 'r':
            if (!util_args_percent(&args, &headroom))
                return EXIT_USAGE;
            break;
        case 'h':
            fputs(usage, stdout);
            return EXIT_DONE;
        default:
            return EXIT_USAGE;
        }
    }
    char **paths = argv + args.next;
    size_t n = (size_t)(argc - args.next);
    if (n == 0)
        return util_usage_error(&args, "no report file given");
    /* reports, or merged job files whose processes' reports are taken out of them */
    struct model_report *reports = NULL;
    size_t loaded = 0;
    int status = job_load_files(NULL, paths, n, &reports, &loaded) ? EXIT_DONE : EXIT_USAGE;
    if (status == EXIT_DONE) {
        struct advice a;
        struct advice_opts ao = { .target = (int64_t)target_bytes, .headroom = headroom };
        struct strbuf err = { 0 };
        if (!advice_build(&a, reports, loaded, &ao, &err)) {
            util_err("advise: %s", sb_str(&err));
            status = EXIT_USAGE;
        } else {
            if (json)
                advice_print_json(stdout, &a);
            else
                advice_print_text(stdout, &a);
            /* The problem advice is for: a run that did not fit (README, exit status). */
            for (size_t i = 0; i < loaded; i++)
                if (model_did_not_fit(&reports[i]))
                    status = EXIT_PROBLEM;
        }
        sb_free(&err);
        advice_free(&a);
    }
    job_free_reports(reports, loaded);
    if (fflush(stdout) != 0 && status != EXIT_USAGE) {
        util_err("advise: cannot write the output");
        status = EXIT_USAGE;
    }
    return status;
}
