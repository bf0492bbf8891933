/* sb.h: a growing string, for the messages, lines and documents the commands build piece by
 * piece. */
#ifndef VRAMWATCH_TOOL_SB_H
#define VRAMWATCH_TOOL_SB_H

#include <stdarg.h>
#include <stddef.h>

/* A growable NUL-terminated string; zero-initialise it. Running out of memory ends the tool
 * (util_out_of_memory), so no call here fails. */
struct strbuf {
    char *s;
    size_t len, cap;
};
void sb_add(struct strbuf *b, const char *s);
void sb_addn(struct strbuf *b, const char *s, size_t n);
void sb_addc(struct strbuf *b, char c);
void sb_printf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(struct strbuf *b, const char *fmt, va_list ap)
        __attribute__((format(printf, 2, 0)));
void sb_truncate(struct strbuf *b, size_t len);
const char *sb_str(const struct strbuf *b); /* "" when nothing was added */
void sb_free(struct strbuf *b);

#endif
