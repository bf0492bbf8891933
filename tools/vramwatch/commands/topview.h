/* topview.h: the pieces of `vramwatch top`'s screen that depend on nothing but their input: the
 * name a process goes by, a memory bar, a command wrapped (top_screen.c draws the rest). */
#ifndef VW_TOPVIEW_H
#define VW_TOPVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "sb.h"

/* The name a process goes by, from its command line as the live-state file holds it (arguments
 * joined by spaces): for an interpreter (python*, pypy*), the script's file name
 * (`train_dual.py`), the module after -m (`torch.distributed.run`) or `-c`; otherwise the
 * program's file name. Written to out (at most cap - 1 bytes and the terminating 0); "?" when
 * the line is empty. */
void topview_script_name(const char *line, char *out, size_t cap);

/* A bar of `width` columns in all, brackets included: `[█████▌    |   ]`. The inside stands for
 * the capacity (`cap`), filled up to `used` in eighths of a column, with `|` where the limit is
 * (`limit` < 0: none). Without a capacity (< 0) the limit is the scale; without either, the bar
 * is empty. Widths below 3 give nothing. Each column is one character (UTF-8). */
void topview_bar(struct strbuf *b, int64_t used, int64_t limit, int64_t cap, int width);

/* A command line in lines of at most `width` columns, each starting with `first` (the first) or
 * `indent` (the others; both as wide, ASCII): broken at the last space that fits, and inside a
 * word only when the word is longer than a line (a path), so nothing is left out. Each line ends
 * with '\n'; an empty text is one line. */
void topview_wrap(struct strbuf *b, const char *first, const char *indent, const char *text,
                  int width);

#endif
