/* commands.h: the entry point of each vramwatch command. */
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
int cmd_top(int argc, char **argv);
int cmd_sim(int argc, char **argv);

#endif
