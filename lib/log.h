/* Diagnostics on stderr, prefixed "vramwatch: ", formatted on the stack, written with write(2). */
#ifndef VW_LOG_H
#define VW_LOG_H

enum vw_log_level { VW_LOG_QUIET = 0, VW_LOG_WARN, VW_LOG_INFO, VW_LOG_DEBUG };

/* Lines at or below the level are written: VW_LOG_WARN until options_load reads VRAMWATCH_LOG. */
void vw_log_set_level(int level);
int vw_log_level(void);
void vw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Like vw_log(VW_LOG_WARN, ...) but at most once per `flag`. */
#define vw_warn_once(flag, ...)                                 \
    do {                                                        \
        if (!__atomic_exchange_n(&(flag), 1, __ATOMIC_RELAXED)) \
            vw_log(VW_LOG_WARN, __VA_ARGS__);                   \
    } while (0)

#endif
