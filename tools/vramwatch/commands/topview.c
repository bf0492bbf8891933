/* topview.c: the pieces of `vramwatch top`'s screen that depend only on their input (topview.h). */
#include "topview.h"

#include <stdbool.h>
#include <string.h>

#include "util.h"

/* The next word of a line of arguments joined by spaces: *s moves past it. */
static bool next_word(const char **s, const char **w, size_t *n)
{
    const char *p = *s;
    while (*p == ' ')
        p++;
    if (!*p)
        return false;
    *w = p;
    while (*p && *p != ' ')
        p++;
    *n = (size_t)(p - *w);
    *s = p;
    return true;
}

static void put(char *out, size_t cap, const char *w, size_t n)
{
    if (!cap)
        return;
    if (n > cap - 1)
        n = cap - 1;
    memcpy(out, w, n);
    out[n] = 0;
}

/* The file name of a path word: what follows its last '/'. */
static void put_base(char *out, size_t cap, const char *w, size_t n)
{
    size_t i = n;
    while (i > 0 && w[i - 1] != '/')
        i--;
    if (i == n) /* "dir/": the word as it is */
        i = 0;
    put(out, cap, w + i, n - i);
}

static bool is_interpreter(const char *w, size_t n)
{
    size_t i = n;
    while (i > 0 && w[i - 1] != '/')
        i--;
    const char *b = w + i;
    size_t bn = n - i;
    return (bn >= 6 && strncmp(b, "python", 6) == 0) || (bn >= 4 && strncmp(b, "pypy", 4) == 0);
}

/* Python's own options before the script: a cluster of one-letter flags ("-u", "-OO", "-um"),
 * where -m and -c end the options and take what follows, and -W, -X take an argument (attached
 * or the next word). Returns what ends the options: 'm', 'c', or 0 for a script (or nothing). */
static char python_options(const char **s, const char **w, size_t *n)
{
    while (next_word(s, w, n)) {
        if ((*w)[0] != '-' || *n == 1)
            return 0; /* the script ("-" alone is standard input) */
        if ((*w)[1] == '-') {
            if (*n > 2)
                continue;            /* --version and the like */
            if (!next_word(s, w, n)) /* "--": the script follows, if any */
                *n = 0;
            return 0;
        }
        for (size_t i = 1; i < *n; i++) {
            char c = (*w)[i];
            if (c == 'm' || c == 'c') {
                if (i + 1 < *n) { /* "-mmod": the module attached */
                    *w += i + 1;
                    *n -= i + 1;
                    return c;
                }
                return next_word(s, w, n) || c == 'c' ? c : 0;
            }
            if (c == 'W' || c == 'X') {
                if (i + 1 == *n)
                    next_word(s, w, n); /* the argument is the next word */
                break;
            }
        }
    }
    *n = 0;
    return 0;
}

void topview_script_name(const char *line, char *out, size_t cap)
{
    const char *s = line ? line : "", *w, *prog;
    size_t n, prog_n;
    if (!next_word(&s, &prog, &prog_n)) {
        put(out, cap, "?", 1);
        return;
    }
    if (!is_interpreter(prog, prog_n)) {
        put_base(out, cap, prog, prog_n);
        return;
    }
    char how = python_options(&s, &w, &n);
    if (how == 'c')
        put(out, cap, "-c", 2);
    else if (how == 'm')
        put(out, cap, w, n);
    else if (n)
        put_base(out, cap, w, n);
    else
        put_base(out, cap, prog, prog_n); /* the interpreter alone */
}

/* Eighths of a column: U+258F (one eighth) to U+2589 (seven), U+2588 the full block. */
static const char *const eighths[8] = { "", "▏", "▎", "▍", "▌", "▋", "▊", "▉" };

void topview_bar(struct strbuf *b, int64_t used, int64_t limit, int64_t cap, int width)
{
    if (width < 3)
        return;
    int inside = width - 2;
    int64_t scale = cap > 0 ? cap : limit > 0 ? limit : 0;
    /* In eighths of a column, rounded down and never past the end. */
    int64_t fill = 0;
    if (scale > 0 && used > 0)
        fill = used >= scale ? (int64_t)inside * 8
                             : (int64_t)((double)used / (double)scale * inside * 8.0);
    /* The limit's column: the one whose left edge it passes, the last for a limit at the end. */
    int mark = -1;
    if (scale > 0 && limit >= 0 && limit <= scale) {
        mark = (int)((double)limit / (double)scale * inside);
        if (mark >= inside)
            mark = inside - 1;
    }
    sb_addc(b, '[');
    for (int i = 0; i < inside; i++) {
        int64_t here = fill - (int64_t)i * 8; /* eighths of this column filled */
        if (i == mark)
            sb_addc(b, '|');
        else if (here >= 8)
            sb_add(b, "█");
        else if (here > 0)
            sb_add(b, eighths[here]);
        else
            sb_addc(b, ' ');
    }
    sb_addc(b, ']');
}

void topview_wrap(struct strbuf *b, const char *first, const char *indent, const char *text,
                  int width)
{
    int room = width - (int)strlen(indent);
    if (room < 8)
        room = 8; /* a terminal too narrow still shows the command, a few columns a line */
    const char *p = text;
    size_t len = strlen(p);
    for (bool is_first = true; is_first || len; is_first = false) {
        size_t cut = 0, space = 0;
        for (int c = 0; cut < len && c < room; c++) {
            if (p[cut] == ' ')
                space = cut;
            size_t step = util_utf8_len((const unsigned char *)p + cut, len - cut);
            cut += step ? step : 1;
        }
        size_t take = cut < len && p[cut] != ' ' && space > 0 ? space : cut;
        sb_add(b, is_first ? first : indent);
        sb_addn(b, p, take);
        sb_addc(b, '\n');
        p += take;
        len -= take;
        while (len && *p == ' ') {
            p++;
            len--;
        }
    }
}
