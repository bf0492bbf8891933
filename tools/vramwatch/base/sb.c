/* sb.c: a growing string (sb.h): NUL-terminated at every step, grown by doubling. */
#include "sb.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static void sb_reserve(struct strbuf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->len)
        util_out_of_memory();
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    b->s = util_xrealloc(b->s, cap);
    b->cap = cap;
}

void sb_addn(struct strbuf *b, const char *s, size_t n)
{
    sb_reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void sb_add(struct strbuf *b, const char *s)
{
    sb_addn(b, s, strlen(s));
}

void sb_addc(struct strbuf *b, char c)
{
    sb_addn(b, &c, 1);
}

void sb_vprintf(struct strbuf *b, const char *fmt, va_list ap)
{
    /* Most messages fit the small buffer; longer ones are formatted again at their full length. */
    char small[256];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n > 0) {
        sb_reserve(b, (size_t)n);
        if ((size_t)n < sizeof small)
            memcpy(b->s + b->len, small, (size_t)n + 1);
        else
            vsnprintf(b->s + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
}

void sb_printf(struct strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void sb_truncate(struct strbuf *b, size_t len)
{
    if (len < b->len) {
        b->len = len;
        b->s[len] = '\0';
    }
}

const char *sb_str(const struct strbuf *b)
{
    return b->s ? b->s : "";
}

void sb_free(struct strbuf *b)
{
    free(b->s);
    *b = (struct strbuf){ 0 };
}
