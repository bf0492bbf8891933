/* Diagnostics: never stdio (the host may hold its locks), never more than a line. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void vw_log(int level, const char *fmt, ...)
{
    if (level > vw_opt.log_level)
        return;
    char buf[512] = "vramwatch: ";
    size_t off = sizeof("vramwatch: ") - 1;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + off, sizeof(buf) - off - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = off + ((size_t)n < sizeof(buf) - off - 1 ? (size_t)n : sizeof(buf) - off - 2);
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}
