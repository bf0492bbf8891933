/* colour.h: whether a command colours what it prints, one rule for every command that does
 * (report, run, timeline's terminal view): --color=auto|always|never, NO_COLOR, the terminal. */
#ifndef VRAMWATCH_TOOL_COLOUR_H
#define VRAMWATCH_TOOL_COLOUR_H

#include <stdbool.h>

#include "util.h"

enum colour_mode { COLOUR_AUTO, COLOUR_ALWAYS, COLOUR_NEVER };

/* The value of --color: "auto", "always" or "never"; false for anything else. */
bool colour_parse(const char *s, enum colour_mode *mode);

/* The value of the option util_args just returned (--color=WHEN), or one line "CMD: --color
 * WHEN: expected auto, always or never" and false. */
bool colour_option(const struct util_args *a, enum colour_mode *mode);

/* always: yes; never: no; auto: only when standard output is a terminal, NO_COLOR is unset or
 * empty (no-color.org: a set, non-empty value turns colour off) and TERM is set and not
 * "dumb". --color=always wins over NO_COLOR: what is asked for on the command line is meant. */
bool colour_wanted(enum colour_mode mode);

/* The escape sequences a view writes around what it stresses; empty strings without colour. */
struct colour_style {
    const char *bold, *red, *reset;
};
const struct colour_style *colour_style(bool on);

/* The help text's lines for --color, in a 16-column option list. */
#define COLOUR_HELP                                                                           \
    "  --color=WHEN  colour: auto (the default: on a terminal, unless NO_COLOR is set to a\n" \
    "                non-empty value or TERM is dumb), always, or never\n"

#endif
