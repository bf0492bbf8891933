/* wrap.h: prose cut into lines that fit the terminal, never inside a word; commands and code are
 * printed by their callers on lines of their own and never pass through here. */
#ifndef VRAMWATCH_TOOL_WRAP_H
#define VRAMWATCH_TOOL_WRAP_H

#include <stdio.h>

#include "sb.h"

/* The width to wrap to: the terminal's own (TIOCGWINSZ) when out is one, else $COLUMNS, else
 * 80. */
int wrap_width(FILE *out);

/* Appends text to b in lines of at most width columns (characters, not bytes): the first line
 * starts with first, the others with indent. Lines break at spaces only; a word longer than a
 * line stands alone on its own line, whole. A '\n' in text starts a new line (with indent).
 * Control characters and invalid UTF-8 are made safe as util_add_text does. Every line, the
 * last included, ends with '\n'. */
void wrap_add(struct strbuf *b, const char *first, const char *indent, const char *text,
              int width);
/* The same, written to out. */
void wrap_put(FILE *out, const char *first, const char *indent, const char *text, int width);

#endif
