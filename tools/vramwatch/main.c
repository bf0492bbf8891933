/* main.c: the vramwatch command line: finds the command and hands it the arguments. */
#include <string.h>

#include "commands.h"

#ifndef VW_VERSION
#define VW_VERSION "unknown"
#endif

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
          "  --help     this text; vramwatch COMMAND --help describes a command\n"
          "  --version  the version\n"
          "\n"
          "Exit status: 0 done; 1 the command ran but found a problem (for run: the program\n"
          "failed, and its own status is passed through); 2 bad usage or unreadable input.\n",
          stdout);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        util_err("no command given (see vramwatch --help)");
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        print_help();
        return EXIT_DONE;
    }
    if (strcmp(name, "--version") == 0) {
        puts("vramwatch " VW_VERSION);
        return EXIT_DONE;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    util_err("unknown command %s (see vramwatch --help)", name);
    return EXIT_USAGE;
}
