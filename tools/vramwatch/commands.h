/* commands.h: the entry point of each vramwatch command, and the report view that run and report share. */
#ifndef VRAMWATCH_TOOL_COMMANDS_H
#define VRAMWATCH_TOOL_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "model.h"

/* argv[0] is the command's name; the return value is the process exit status. */
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_advise(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_timeline(int argc, char **argv);

struct report_opts {
    bool json;  /* the report JSON back, or the job JSON for several */
    bool full;  /* whole stacks */
    bool color; /* ANSI colour: only for a terminal, without NO_COLOR, TERM not dumb */
};

/* Colour is for people at a terminal only. */
bool report_want_color(void);

/* Prints one report's post-mortem, or for several a job header then each one's. */
void report_show(FILE *out, struct model_report *reports, size_t n, const struct report_opts *o);

/* One report's post-mortem (cmd_report.c); the job view prints one per process. */
void report_postmortem(FILE *out, const struct model_report *r, const struct report_opts *o);

#endif
