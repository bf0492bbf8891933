/* common.h: what the commands share, so that they answer alike: their option loop (--help,
 * --json, --color, and every mistake in an option), loading report files into the model with
 * one wording for an unreadable one, and ending their output with one error for a failed write. */
#ifndef VRAMWATCH_TOOL_COMMON_H
#define VRAMWATCH_TOOL_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "colour.h"
#include "model.h"
#include "util.h"

/* The getopt values of the options several commands take and common_options reads: a command
 * puts them in its table where its --help lists them. */
enum { COMMON_OPT_JSON = 0x1000, COMMON_OPT_COLOR };

/* A command as its option loop sees it. */
struct common_cmd {
    const char *name;      /* "advise": the first word of its messages */
    const char *usage;     /* --help's text, or NULL when help() prints it */
    void (*help)(void);    /* --help's text where it is put together (sim lists the cards) */
    const char *shortopts; /* as util_args_init takes them: "h", "ho:", "+h" */
    const struct option *longopts;
    /* The command's own options: -1 to go on, else the exit status (EXIT_USAGE once the line
     * is on stderr). NULL when it has none but the common ones. */
    int (*option)(struct util_args *a, int c, void *opts);
    void *opts;
    /* Its operands are report files: none at all is a usage error, said here. */
    bool reports;
};

/* What common_options read, for what comes after. */
struct common_opts {
    struct util_args args;   /* for the command's own usage errors (util_usage_error) */
    bool json;               /* --json */
    enum colour_mode colour; /* --color=WHEN; COLOUR_AUTO without it */
    char **operands;         /* what follows the options */
    size_t n_operands;
};

/* Reads the options: -1 to go on with o's operands, else the exit status: EXIT_DONE once --help
 * is printed, EXIT_USAGE once a one-line error is on stderr. */
int common_options(const struct common_cmd *cmd, int argc, char **argv, struct common_opts *o);

/* Reports loaded from the operands: each a report, or a job file whose processes' reports are
 * taken out of it. */
struct common_reports {
    struct model_report *v;
    size_t n;
};
/* EXIT_DONE, or EXIT_USAGE once "PATH: why" is on stderr ("PREFIX: PATH: why" with a prefix);
 * what was loaded until then is in *r either way, for common_free_reports. */
int common_load_reports(const struct common_opts *o, const char *prefix, struct common_reports *r);
void common_free_reports(struct common_reports *r);
/* One report file a command found itself (run's folder, fit's trials): false once
 * "CMD: PATH: why" is on stderr. */
bool common_load_report(const char *cmd, const char *path, struct model_report *r);
/* Whether one of them shows a run that did not fit: the problem report and advise exit 1 for
 * (README, exit status). */
bool common_did_not_fit(const struct model_report *v, size_t n);

/* Standard output flushed: a write that failed becomes "CMD: cannot write the output" and
 * EXIT_USAGE, unless status is EXIT_USAGE already (its own line is said). The status to exit
 * with. */
int common_flush(const char *cmd, int status);
/* An output file named on the command line, written whole or not at all, never through a link,
 * mode 0600 (util_replace_file): false once "CMD: cannot write PATH: why" is on stderr. */
bool common_write_file(const char *cmd, const char *path, void (*fill)(FILE *f, const void *ctx),
                       const void *ctx);

/* libvramwatch.so for LD_PRELOAD (preload_find_library; malloc'd), or NULL once "CMD: why" is on
 * stderr, as for a path LD_PRELOAD cannot hold. */
char *common_find_library(const char *cmd);

#endif
