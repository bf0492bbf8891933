/* Diagnostics on stderr, prefixed "vramwatch: ", formatted on the stack, written with write(2). */
#ifndef VW_LOG_H
#define VW_LOG_H

#include <stddef.h>

enum log_level { VW_LOG_QUIET = 0, VW_LOG_WARN, VW_LOG_INFO, VW_LOG_DEBUG };

/* Lines at or below the level are written: VW_LOG_WARN until options_load reads VRAMWATCH_LOG. */
void log_set_level(int level);
int log_level(void);
/* One line, whatever the message holds: control bytes, DEL and bytes that are not UTF-8 are
 * written as escapes (see log_escape). No allocation, no stdio. */
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies in[0..n) into out (cap bytes, NUL-terminated) with "\n", "\t", "\r", "\e" for those
 * bytes and "\xNN" for any other control byte, DEL and each byte that does
 * not start a valid UTF-8 sequence; stops before an escape or a sequence that would not fit.
 * Returns the length written. */
size_t log_escape(const char *in, size_t n, char *out, size_t cap);
/* Like log_msg(VW_LOG_WARN, ...) but at most once per `flag`. */
#define log_warn_once(flag, ...)                                \
    do {                                                        \
        if (!__atomic_exchange_n(&(flag), 1, __ATOMIC_RELAXED)) \
            log_msg(VW_LOG_WARN, __VA_ARGS__);                  \
    } while (0)

#endif
