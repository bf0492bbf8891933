/* cmd_sim.c: `vramwatch sim`: runs a command on the simulated GPU without vramwatch (the card that
 * run --sim and fit --sim use, for comparisons and the truth of a run), or prints its variables. */
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "common.h"
#include "sb.h"
#include "simcard.h"

static void print_usage(void)
{
    fputs("usage: vramwatch sim CARD [--] CMD...\n"
          "       vramwatch sim --env CARD\n"
          "\n"
          "Runs CMD on the simulated GPU (tools/simgpu) with nothing of vramwatch: the card that\n"
          "vramwatch run --sim and fit --sim put a program on, without the library or the Python\n"
          "companion, to compare with or to know the truth of a run. vramwatch becomes CMD (exec), so\n"
          "CMD's exit status, or the signal that ended it, is its own. The job is not changed: every\n"
          "stand-in library of the simulator is preloaded (LD_PRELOAD, which comes before the RPATH of\n"
          "a pip wheel's nvidia/ libraries), and its folder goes first on LD_LIBRARY_PATH.\n"
          "CARD is a size, 16GiB, 24G, 80GB (the grammar of --limit; 1 MiB to 16 TiB), which sets\n"
          "SIMGPU_MEMORY, or a card's name in any case, which sets SIMGPU_CARD:\n"
          "\n"
          "Cards:\n",
          stdout);
    simcard_list(stdout);
    fputs("\n"
          "  --env    print the variables as shell lines instead of running a command:\n"
          "           eval \"$(vramwatch sim --env 16GiB)\"\n"
          "  --help   this text\n"
          "\n"
          "The simulator's libraries are found beside this program in the build tree\n"
          "(BUILD/tools/simgpu), or where it is installed (LIBDIR/vramwatch/simgpu);\n"
          "VRAMWATCH_SIMGPU_DIR=FOLDER overrides. libvramwatch.so is taken out of LD_PRELOAD and the\n"
          "companion's folder out of PYTHONPATH.\n"
          "Exit status: CMD's; 2 for bad usage, no simulator, or when CMD cannot be started.\n",
          stdout);
}

static int sim_option(struct util_args *a, int c, void *opts)
{
    if (c != 'e')
        return EXIT_USAGE;
    *(bool *)opts = true;
    return -1;
}

int cmd_sim(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "env", no_argument, NULL, 'e' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    bool env_only = false;
    const struct common_cmd cmd = { .name = "sim",
                                    .help = print_usage,
                                    .shortopts = "+h",
                                    .longopts = longopts,
                                    .option = sim_option,
                                    .opts = &env_only };
    struct common_opts o;
    int parsed = common_options(&cmd, argc, argv, &o);
    if (parsed >= 0)
        return parsed;
    const struct util_args *a = &o.args;
    if (a->next >= argc)
        return util_usage_error(a, "no card given (a size, 16GiB, or a name, H100)");
    const char *arg = argv[a->next];
    int next = a->next + 1;
    if (next < argc && strcmp(argv[next], "--") == 0)
        next++;
    if (env_only && next < argc)
        return util_usage_error(a, "--env takes a card only, not a command: %s", argv[next]);
    if (!env_only && next >= argc)
        return util_usage_error(a, "no command given");

    struct simcard card;
    struct strbuf why = { 0 };
    if (!simcard_parse(arg, &card, &why)) {
        util_err("sim: %s: %s", arg, sb_str(&why));
        sb_free(&why);
        return EXIT_USAGE;
    }
    struct simcard_env env;
    if (!simcard_env(&card, NULL, &env, &why)) {
        util_err("sim: %s", sb_str(&why));
        sb_free(&why);
        return EXIT_USAGE;
    }
    if (env_only) {
        simcard_print(stdout, &env);
        simcard_env_free(&env);
        sb_free(&why);
        return EXIT_DONE;
    }
    bool ok = simcard_apply(&env, &why);
    simcard_env_free(&env);
    if (!ok)
        util_err("sim: %s", sb_str(&why));
    sb_free(&why);
    if (!ok)
        return EXIT_USAGE;
    fflush(NULL);
    execvp(argv[next], argv + next);
    util_err("sim: cannot run %s: %s", argv[next], strerror(errno));
    return EXIT_USAGE;
}
