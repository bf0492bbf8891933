/* Streaming JSON writer. Strings are copied as valid UTF-8: control characters are escaped and
 * bytes that are not UTF-8 become U+FFFD, so a report stays parseable whatever the process
 * put in its argv, paths or symbol names. */
#include "jsonw.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

void jsonw_init(struct jsonw *w, int fd)
{
    w->fd = fd;
    w->failed = false;
    w->need_comma = false;
    w->depth = 0;
    w->len = 0;
}

static void flush(struct jsonw *w)
{
    uint32_t off = 0;
    while (off < w->len && !w->failed) {
        ssize_t n = write(w->fd, w->buf + off, w->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            w->failed = true;
        else
            off += (uint32_t)n;
    }
    w->len = 0;
}

static void put(struct jsonw *w, const char *s, size_t n)
{
    while (n) {
        if (w->len == sizeof(w->buf))
            flush(w);
        size_t k = sizeof(w->buf) - w->len;
        if (k > n)
            k = n;
        memcpy(w->buf + w->len, s, k);
        w->len += (uint32_t)k;
        s += k;
        n -= k;
    }
}

static void putc1(struct jsonw *w, char c)
{
    if (w->len == sizeof(w->buf))
        flush(w);
    w->buf[w->len++] = c;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one. */
static int utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    int n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) {
        n = 2;
        cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3;
        cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

static void put_string(struct jsonw *w, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    putc1(w, '"');
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        /* Plain printable ASCII, the bulk of every report (paths, symbols, keys), goes out as
         * one run: one copy instead of one per byte keeps a large report's writing fast. */
        const unsigned char *run = p;
        while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p > run)
            put(w, (const char *)run, (size_t)(p - run));
        if (!*p)
            break;
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            put(w, e, 2);
            p++;
        } else if (c == '\n' || c == '\t' || c == '\r') {
            char e[2] = { '\\', c == '\n' ? 'n' : c == '\t' ? 't' : 'r' };
            put(w, e, 2);
            p++;
        } else if (c < 0x20) {
            char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
            put(w, e, 6);
            p++;
        } else {
            int n = utf8_len(p);
            if (n == 0) {
                put(w, "\xef\xbf\xbd", 3);
                p++;
            } else {
                put(w, (const char *)p, (size_t)n);
                p += n;
            }
        }
    }
    putc1(w, '"');
}

static void key(struct jsonw *w, const char *k)
{
    if (w->need_comma)
        putc1(w, ',');
    w->need_comma = true;
    if (k) {
        put_string(w, k);
        putc1(w, ':');
    }
}

void jsonw_obj_begin(struct jsonw *w, const char *k)
{
    key(w, k);
    putc1(w, '{');
    w->need_comma = false;
    w->depth++;
}

void jsonw_obj_end(struct jsonw *w)
{
    putc1(w, '}');
    w->need_comma = true;
    w->depth--;
    if (w->depth == 0)
        putc1(w, '\n');
}

void jsonw_arr_begin(struct jsonw *w, const char *k)
{
    key(w, k);
    putc1(w, '[');
    w->need_comma = false;
    w->depth++;
}

void jsonw_arr_end(struct jsonw *w)
{
    putc1(w, ']');
    w->need_comma = true;
    w->depth--;
}

void jsonw_str(struct jsonw *w, const char *k, const char *v)
{
    key(w, k);
    if (v)
        put_string(w, v);
    else
        put(w, "null", 4);
}

static void put_u64(struct jsonw *w, uint64_t v, bool neg)
{
    char tmp[24];
    int i = (int)sizeof(tmp);
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (neg)
        tmp[--i] = '-';
    put(w, tmp + i, sizeof(tmp) - (size_t)i);
}

void jsonw_u64(struct jsonw *w, const char *k, uint64_t v)
{
    key(w, k);
    put_u64(w, v, false);
}

void jsonw_i64(struct jsonw *w, const char *k, int64_t v)
{
    key(w, k);
    if (v < 0)
        put_u64(w, (uint64_t)0 - (uint64_t)v, true);
    else
        put_u64(w, (uint64_t)v, false);
}

void jsonw_null(struct jsonw *w, const char *k)
{
    key(w, k);
    put(w, "null", 4);
}

void jsonw_bool(struct jsonw *w, const char *k, bool v)
{
    key(w, k);
    put(w, v ? "true" : "false", v ? 4 : 5);
}

void jsonw_hex(struct jsonw *w, const char *k, uint64_t v)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[20];
    int i = (int)sizeof(tmp);
    tmp[--i] = '"';
    do {
        tmp[--i] = hex[v & 15];
        v >>= 4;
    } while (v);
    tmp[--i] = 'x';
    tmp[--i] = '0';
    tmp[--i] = '"';
    key(w, k);
    put(w, tmp + i, sizeof(tmp) - (size_t)i);
}

bool jsonw_finish(struct jsonw *w)
{
    flush(w);
    return !w->failed;
}
