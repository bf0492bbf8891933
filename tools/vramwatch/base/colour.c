/* colour.c: the one decision whether to colour (colour.h). */
#include "colour.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool colour_parse(const char *s, enum colour_mode *mode)
{
    static const struct {
        const char *name;
        enum colour_mode mode;
    } names[] = { { "auto", COLOUR_AUTO }, { "always", COLOUR_ALWAYS }, { "never", COLOUR_NEVER } };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i].name) == 0) {
            *mode = names[i].mode;
            return true;
        }
    }
    return false;
}

bool colour_option(const struct util_args *a, enum colour_mode *mode)
{
    if (a->value && colour_parse(a->value, mode))
        return true;
    util_err("%s: %s %s: expected auto, always or never", a->cmd, a->name,
             a->value ? a->value : "");
    return false;
}

bool colour_wanted(enum colour_mode mode)
{
    if (mode != COLOUR_AUTO)
        return mode == COLOUR_ALWAYS;
    const char *no_color = getenv("NO_COLOR");
    const char *term = getenv("TERM");
    return isatty(STDOUT_FILENO) && !(no_color && *no_color) && term && *term &&
           strcmp(term, "dumb") != 0;
}

const struct colour_style *colour_style(bool on)
{
    static const struct colour_style plain = { "", "", "" };
    static const struct colour_style ansi = { "\033[1m", "\033[1;31m", "\033[0m" };
    return on ? &ansi : &plain;
}
