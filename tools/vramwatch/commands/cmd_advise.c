/* cmd_advise.c: `vramwatch advise`: concrete changes to the command line, with predicted peaks
 * (the engine is advice.c, its printers advice_print.c). */
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>

#include "advice.h"
#include "advice_print.h"
#include "commands.h"
#include "common.h"
#include "sb.h"

static const char usage[] =
        "usage: vramwatch advise [--json | --brief] [--target SIZE] [--headroom PCT] REPORT...\n"
        "\n"
        "Concrete changes to the command line so the next run fits, best first, each with the\n"
        "command to run next and its predicted peak: the batch (and the accumulation that keeps the\n"
        "effective batch), the image size, mixed precision and gradient checkpointing, validation,\n"
        "other processes on the card, the allocator setting, a leak, more GPUs or sharding.\n"
        "Several reports of one job at other batch or image sizes sharpen the memory model (the same\n"
        "command apart from those values); reports of one job's ranks, or a file written by\n"
        "vramwatch merge, are advised as one job. A report of a failure in the first step only\n"
        "bounds the need: the advice says so, and gives the vramwatch fit command that measures.\n"
        "The answer comes first: what to change, the command to run next and the vramwatch fit\n"
        "command, each command on a line of its own; the reasons, figures and sources follow,\n"
        "wrapped to the terminal's width ($COLUMNS, else 80; commands and code are never wrapped).\n"
        "\n"
        "  --json           print vramwatch.advice/1\n"
        "  --brief          print the answer only\n"
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

struct advise_args {
    uint64_t target_bytes;
    double headroom;
    bool brief;
};

static int advise_option(struct util_args *a, int c, void *opts)
{
    struct advise_args *o = opts;
    switch (c) {
    case 't':
        if (!util_args_size(a, &o->target_bytes))
            return EXIT_USAGE;
        if (o->target_bytes > INT64_MAX) {
            util_err("advise: --target %s: larger than any card", a->value);
            return EXIT_USAGE;
        }
        return -1;
    case 'r':
        return util_args_percent(a, &o->headroom) ? -1 : EXIT_USAGE;
    case 'b':
        o->brief = true;
        return -1;
    default:
        return EXIT_USAGE;
    }
}

/* The advice for the reports, printed: EXIT_DONE, EXIT_PROBLEM for a run that did not fit, or
 * EXIT_USAGE once the reason is on stderr. */
static int advise(const struct common_reports *r, const struct advise_args *o, bool json)
{
    struct advice a;
    struct advice_opts ao = { .target = (int64_t)o->target_bytes, .headroom = o->headroom };
    struct strbuf err = { 0 };
    int status = EXIT_DONE;
    if (!advice_build(&a, r->v, r->n, &ao, &err)) {
        util_err("advise: %s", sb_str(&err));
        status = EXIT_USAGE;
    } else {
        if (json)
            advice_print_json(stdout, &a);
        else if (o->brief)
            advice_print_brief(stdout, &a);
        else
            advice_print_text(stdout, &a);
        /* The problem advice is for: a run that did not fit (README, exit status). */
        if (common_did_not_fit(r->v, r->n))
            status = EXIT_PROBLEM;
    }
    sb_free(&err);
    advice_free(&a);
    return status;
}

int cmd_advise(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "json", no_argument, NULL, COMMON_OPT_JSON },
        { "target", required_argument, NULL, 't' },
        { "headroom", required_argument, NULL, 'r' },
        { "brief", no_argument, NULL, 'b' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct advise_args ao = { .headroom = ADVICE_DEFAULT_HEADROOM };
    const struct common_cmd cmd = { .name = "advise",
                                    .usage = usage,
                                    .shortopts = "h",
                                    .longopts = longopts,
                                    .option = advise_option,
                                    .opts = &ao,
                                    .reports = true };
    struct common_opts o;
    int status = common_options(&cmd, argc, argv, &o);
    if (status >= 0)
        return status;
    if (o.json && ao.brief)
        return util_usage_error(&o.args, "--json and --brief do not go together");
    /* reports, or merged job files whose processes' reports are taken out of them */
    struct common_reports r;
    status = common_load_reports(&o, NULL, &r);
    if (status == EXIT_DONE)
        status = advise(&r, &ao, o.json);
    common_free_reports(&r);
    return common_flush("advise", status);
}
