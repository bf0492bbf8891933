/* Diagnostics on stderr, prefixed "vramwatch: ", formatted on the stack, written with write(2). */
#ifndef VW_LOG_H
#define VW_LOG_H

#include <stddef.h>

enum vw_log_level { VW_LOG_QUIET = 0, VW_LOG_WARN, VW_LOG_INFO, VW_LOG_DEBUG };

/* Lines at or below the level are written: VW_LOG_WARN until options_load reads VRAMWATCH_LOG. */
void vw_log_set_level(int level);
int vw_log_level(void);
/* One line, whatever the message holds: control bytes, DEL and bytes that are not UTF-8 are
 * written as escapes (see vw_log_escape). No allocation, no stdio. */
void vw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies in[0..n) into out (cap bytes, NUL-terminated) with "\n", "\t", "\r", "\e" for those
 * bytes and "\xNN" for any other control byte, DEL and each byte that does
 * not start a valid UTF-8 sequence; stops before an escape or a sequence that would not fit.
 * Returns the length written. */
size_t vw_log_escape(const char *in, size_t n, char *out, size_t cap);
/* Like vw_log(VW_LOG_WARN, ...) but at most once per `flag`. */
#define vw_warn_once(flag, ...)                                 \
    do {                                                        \
        if (!__atomic_exchange_n(&(flag), 1, __ATOMIC_RELAXED)) \
            vw_log(VW_LOG_WARN, __VA_ARGS__);                   \
    } while (0)

#endif
