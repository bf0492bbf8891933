/* Diagnostics on stderr, prefixed "vramwatch: ", formatted on the stack, written with write(2). */
#ifndef VW_LOG_H
#define VW_LOG_H

#include "options.h"

void vw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Like vw_log(VW_LOG_WARN, ...) but at most once per `flag`. */
#define vw_warn_once(flag, ...)                                 \
    do {                                                        \
        if (!__atomic_exchange_n(&(flag), 1, __ATOMIC_RELAXED)) \
            vw_log(VW_LOG_WARN, __VA_ARGS__);                   \
    } while (0)

#endif
