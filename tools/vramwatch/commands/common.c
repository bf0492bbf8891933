/* common.c: the plumbing every command shares (common.h): one option loop, one way to load
 * reports and to end the output, so that their messages and exit codes agree. */
#include "common.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "preload.h"
#include "sb.h"

int common_options(const struct common_cmd *cmd, int argc, char **argv, struct common_opts *o)
{
    memset(o, 0, sizeof *o);
    o->colour = COLOUR_AUTO;
    struct util_args *a = &o->args;
    util_args_init(a, cmd->name, argc, argv, cmd->shortopts, cmd->longopts);
    for (int c; (c = util_args_next(a)) != -1;) {
        switch (c) {
        case COMMON_OPT_JSON:
            o->json = true;
            break;
        case COMMON_OPT_COLOR:
            if (!colour_option(a, &o->colour))
                return EXIT_USAGE;
            break;
        case 'h':
            if (cmd->help)
                cmd->help();
            else
                fputs(cmd->usage, stdout);
            return EXIT_DONE;
        case '?': /* the one-line error is on stderr */
            return EXIT_USAGE;
        default: {
            int status = cmd->option ? cmd->option(a, c, cmd->opts) : EXIT_USAGE;
            if (status >= 0)
                return status;
        }
        }
    }
    o->operands = argv + a->next;
    o->n_operands = (size_t)(argc - a->next);
    if (cmd->reports && o->n_operands == 0)
        return util_usage_error(a, "no report file given");
    return -1;
}

int common_load_reports(const struct common_opts *o, const char *prefix, struct common_reports *r)
{
    memset(r, 0, sizeof *r);
    return job_load_files(prefix, o->operands, o->n_operands, &r->v, &r->n) ? EXIT_DONE
                                                                            : EXIT_USAGE;
}

void common_free_reports(struct common_reports *r)
{
    job_free_reports(r->v, r->n);
    memset(r, 0, sizeof *r);
}

bool common_load_report(const char *cmd, const char *path, struct model_report *r)
{
    struct strbuf err = { 0 };
    bool ok = model_load(path, r, &err);
    if (!ok)
        util_err("%s: %s: %s", cmd, path, sb_str(&err));
    sb_free(&err);
    return ok;
}

bool common_did_not_fit(const struct model_report *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (model_did_not_fit(&v[i]))
            return true;
    return false;
}

int common_flush(const char *cmd, int status)
{
    if (fflush(stdout) != 0 && status != EXIT_USAGE) {
        util_err("%s: cannot write the output", cmd);
        status = EXIT_USAGE;
    }
    return status;
}

bool common_write_file(const char *cmd, const char *path, void (*fill)(FILE *f, const void *ctx),
                       const void *ctx)
{
    /* Mode 0600: what the commands write holds the job's command line (docs/reliability.md). */
    struct strbuf why = { 0 };
    bool ok = util_replace_file(path, 0600, fill, ctx, &why);
    if (!ok) {
        struct strbuf where = { 0 };
        util_add_text(&where, path);
        util_err("%s: cannot write %s: %s", cmd, sb_str(&where), sb_str(&why));
        sb_free(&where);
    }
    sb_free(&why);
    return ok;
}

char *common_find_library(const char *cmd)
{
    struct strbuf why = { 0 };
    char *lib = preload_find_library(&why);
    if (!lib)
        util_err("%s: %s", cmd, sb_str(&why));
    sb_free(&why);
    if (lib && strpbrk(lib, " :\t\n")) {
        util_err("%s: %s: LD_PRELOAD cannot hold a path with a space or colon; set VRAMWATCH_LIB "
                 "to a copy elsewhere",
                 cmd, lib);
        free(lib);
        lib = NULL;
    }
    return lib;
}
