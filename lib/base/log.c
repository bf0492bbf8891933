/* Diagnostics: never stdio (the host may hold its locks), never more than a line. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "safefile.h"

/* VRAMWATCH_LOG, set once by options_load; atomic, as any thread may log while it is set. */
static int threshold = VW_LOG_WARN;

void log_set_level(int level)
{
    __atomic_store_n(&threshold, level, __ATOMIC_RELAXED);
}

int log_level(void)
{
    return __atomic_load_n(&threshold, __ATOMIC_RELAXED);
}

/* Length of the valid UTF-8 sequence at p (n bytes there), or 0: no overlong forms, no
 * surrogates, nothing past U+10FFFF. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t len = c >= 0xc2 && c <= 0xdf   ? 2
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4
                                          : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) || (c == 0xf0 && p[1] < 0x90) ||
        (c == 0xf4 && p[1] > 0x8f))
        return 0;
    return len;
}

size_t log_escape(const char *in, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (cap == 0)
        return 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)in[i];
        char esc[4];
        size_t k = 0, take = 1;
        if (c == '\n') {
            esc[k++] = '\\';
            esc[k++] = 'n';
        } else if (c == '\t') {
            esc[k++] = '\\';
            esc[k++] = 't';
        } else if (c == '\r') {
            esc[k++] = '\\';
            esc[k++] = 'r';
        } else if (c == 0x1b) {
            esc[k++] = '\\';
            esc[k++] = 'e';
        } else if (c < 0x20 || c == 0x7f ||
                   (c >= 0x80 && (take = utf8_len((const unsigned char *)in + i, n - i)) == 0)) {
            take = 1;
            esc[k++] = '\\';
            esc[k++] = 'x';
            esc[k++] = hex[c >> 4];
            esc[k++] = hex[c & 15];
        }
        if (k == 0) {
            /* a printable byte or a whole UTF-8 sequence, copied as it is, never cut */
            if (o + take >= cap)
                break;
            for (size_t j = 0; j < take; j++)
                out[o++] = in[i + j];
        } else {
            if (o + k >= cap)
                break;
            for (size_t j = 0; j < k; j++)
                out[o++] = esc[j];
        }
        i += take;
    }
    out[o] = '\0';
    return o;
}

/* The line onto stderr as the program would never notice: its errno kept, and no SIGPIPE when
 * stderr is a pipe whose reader has gone (the default action would end the program for a line
 * of ours): safefile.c's quiet writes. */
static void write_stderr(const char *buf, size_t len)
{
    int saved = errno;
    struct safefile_quiet q;
    safefile_quiet_begin(&q);
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
    safefile_quiet_end(&q);
    errno = saved;
}

void log_msg(int level, const char *fmt, ...)
{
    if (level > log_level())
        return;
    /* The message may carry what a user or a program wrote (a variable's value, a path, a
     * framework's message): every control byte, DEL and byte that is not UTF-8 is written as an
     * escape (\n, \e, \x01), so a warning is always one line and never a terminal's command. */
    char raw[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof(raw) ? (size_t)n : sizeof(raw) - 1;
    char buf[sizeof("vramwatch: ") + 2 * sizeof(raw)] = "vramwatch: ";
    size_t off = sizeof("vramwatch: ") - 1;
    off += log_escape(raw, len, buf + off, sizeof(buf) - off - 1);
    buf[off++] = '\n';
    write_stderr(buf, off);
}
