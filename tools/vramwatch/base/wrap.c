/* wrap.c: prose wrapped to the terminal's width at spaces (wrap.h). */
#include "wrap.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "util.h"

int wrap_width(FILE *out)
{
    struct winsize ws;
    if (isatty(fileno(out)) && ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *env = getenv("COLUMNS");
    char *end;
    long n = env ? strtol(env, &end, 10) : 0;
    if (env && *env && *end == '\0' && n > 0 && n <= 10000)
        return (int)n;
    return 80;
}

/* Columns a string takes: its characters, UTF-8 continuation bytes not counted. */
static size_t columns(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* Whether the n bytes at p are a unit that stays on the line of the number before it: "GiB" of
 * "6.79 GiB", "B", "%", "s". */
static bool is_unit(const char *p, size_t n)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB",
                                         "%", "s", "ms" };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strlen(units[i]) == n && memcmp(units[i], p, n) == 0)
            return true;
    /* with the punctuation that may follow it: "GiB,", "GiB)", "GiB;" */
    return n > 1 && strchr(",;:.)", p[n - 1]) && is_unit(p, n - 1);
}

/* The length of the word at p: up to the next space, a number and its unit as one word, and a
 * lone "+" or "(+" with what it adds ("(+ 300.00 MiB"). */
static size_t word_len(const char *p)
{
    size_t n = strcspn(p, " ");
    if (p[n] == ' ' && ((n == 1 && p[0] == '+') || (n == 2 && memcmp(p, "(+", 2) == 0)) &&
        p[n + 1] && p[n + 1] != ' ')
        return n + 1 + word_len(p + n + 1);
    if (n > 0 && p[n] == ' ' && p[n - 1] >= '0' && p[n - 1] <= '9') {
        size_t u = strcspn(p + n + 1, " ");
        if (u > 0 && is_unit(p + n + 1, u))
            n += 1 + u;
    }
    return n;
}

/* One paragraph (no '\n'), already made safe, into lines. */
static void wrap_paragraph(struct strbuf *b, const char *first, const char *indent,
                           const char *p, size_t width)
{
    const char *lead = first;
    size_t used = 0;
    bool line_open = false;
    for (;;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        size_t n = word_len(p);
        size_t w = columns(p, n);
        if (line_open && used + 1 + w > width) {
            sb_addc(b, '\n');
            line_open = false;
        }
        if (!line_open) {
            sb_add(b, lead);
            used = columns(lead, strlen(lead));
            lead = indent;
            line_open = true;
        } else {
            sb_addc(b, ' ');
            used++;
        }
        sb_addn(b, p, n);
        used += w;
        p += n;
    }
    if (!line_open)
        sb_add(b, lead);
    sb_addc(b, '\n');
}

void wrap_add(struct strbuf *b, const char *first, const char *indent, const char *text,
              int width)
{
    size_t w = width > 20 ? (size_t)width : 20;
    const char *lead = first;
    for (const char *p = text;;) {
        size_t n = strcspn(p, "\n");
        char *para = util_xmalloc(n + 1);
        memcpy(para, p, n);
        para[n] = '\0';
        struct strbuf safe = { 0 };
        util_add_text(&safe, para);
        free(para);
        wrap_paragraph(b, lead, indent, sb_str(&safe), w);
        sb_free(&safe);
        lead = indent;
        if (!p[n])
            break;
        p += n + 1;
    }
}

void wrap_put(FILE *out, const char *first, const char *indent, const char *text, int width)
{
    struct strbuf b = { 0 };
    wrap_add(&b, first, indent, text, width);
    fputs(sb_str(&b), out);
    sb_free(&b);
}
