/* Diagnostics: never stdio (the host may hold its locks), never more than a line. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

/* VRAMWATCH_LOG, set once by options_load; atomic, as any thread may log while it is set. */
static int threshold = VW_LOG_WARN;

void vw_log_set_level(int level)
{
    __atomic_store_n(&threshold, level, __ATOMIC_RELAXED);
}

int vw_log_level(void)
{
    return __atomic_load_n(&threshold, __ATOMIC_RELAXED);
}

void vw_log(int level, const char *fmt, ...)
{
    if (level > vw_log_level())
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
