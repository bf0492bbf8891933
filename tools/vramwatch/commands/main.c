/* main.c: the vramwatch command line: finds the command and hands it the arguments. */
#include <getopt.h>
#include <string.h>

#include "commands.h"
#include "common.h"
#include "config.h"
#include "util.h"


static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    { "run", cmd_run, "run a program with the vramwatch library preloaded, then show its report" },
    { "report", cmd_report, "the post-mortem of a report, or of the reports of one job" },
    { "advise", cmd_advise,
      "concrete changes (batch, accumulation, precision, allocator, ...) with predicted peaks" },
    { "timeline", cmd_timeline,
      "the memory and fragmentation timeline, as a picture or in the terminal" },
    { "fit", cmd_fit, "rerun a command at other batch sizes and find the largest that fits" },
    { "merge", cmd_merge,
      "one view of the reports of many processes (ranks): a vramwatch.job/1 file" },
    { "top", cmd_top, "the processes running under vramwatch now: their memory and call sites" },
    { "sim", cmd_sim,
      "run a program on the simulated GPU without vramwatch (the card of run --sim, fit --sim)" },
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void print_help(void)
{
    fputs("usage: vramwatch COMMAND [ARGS...]\n"
          "\n"
          "Why the GPU ran out of memory, and what to change so the next run fits.\n"
          "\n"
          "Commands:\n",
          stdout);
    for (size_t i = 0; i < N_COMMANDS; i++)
        printf("  %-9s %s\n", commands[i].name, commands[i].summary);
    fputs("\n"
          "Options:\n"
          "  -h, --help     this text; vramwatch COMMAND --help (or vramwatch help COMMAND)\n"
          "                 describes a command\n"
          "  -V, --version  the version\n"
          "\n"
          "Exit status: 0 done; 1 the command ran but found a problem (for run: the program\n"
          "failed, and its own status is passed through); 2 bad usage or unreadable input.\n",
          stdout);
}

/* -V: the only option of the top level besides --help. */
static int version_option(struct util_args *a, int c, void *opts)
{
    if (c != 'V')
        return EXIT_USAGE;
    puts("vramwatch " VW_VERSION);
    return EXIT_DONE;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    /* Options of the top level only, up to the command: what follows it is the command's own. */
    const struct common_cmd cmd = { .name = "",
                                    .help = print_help,
                                    .shortopts = "+hV",
                                    .longopts = longopts,
                                    .option = version_option };
    struct common_opts o;
    int status = common_options(&cmd, argc, argv, &o);
    if (status >= 0)
        return status;
    const struct util_args a = o.args;
    if (a.next >= argc) {
        util_err("no command given (see vramwatch --help)");
        return EXIT_USAGE;
    }
    const char *name = argv[a.next];
    /* "vramwatch help" and "vramwatch help COMMAND", as git and meson take them. */
    bool help = strcmp(name, "help") == 0;
    if (help && a.next + 1 >= argc) {
        print_help();
        return EXIT_DONE;
    }
    if (help)
        name = argv[a.next + 1];
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(name, commands[i].name) != 0)
            continue;
        if (help) {
            char *help_argv[] = { (char *)commands[i].name, (char *)"--help", NULL };
            return commands[i].run(2, help_argv);
        }
        return commands[i].run(argc - a.next, argv + a.next);
    }
    util_err("unknown command %s (see vramwatch --help)", name);
    return EXIT_USAGE;
}
