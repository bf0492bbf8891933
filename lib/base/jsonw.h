/* A streaming JSON writer into a file descriptor through a fixed buffer (no stdio, no malloc). */
#ifndef VW_JSONW_H
#define VW_JSONW_H

#include <stdbool.h>
#include <stdint.h>

struct jsonw {
    int fd;
    bool failed; /* a write failed: the caller discards the file */
    bool need_comma;
    int depth;
    uint32_t len;
    char buf[16384];
};

void jw_init(struct jsonw *w, int fd);
bool jw_finish(struct jsonw *w); /* flushes; false if any write failed */

void jw_obj_begin(struct jsonw *w, const char *key); /* key NULL inside arrays/top level */
void jw_obj_end(struct jsonw *w);
void jw_arr_begin(struct jsonw *w, const char *key);
void jw_arr_end(struct jsonw *w);
void jw_str(struct jsonw *w, const char *key, const char *v); /* NULL: null */
void jw_u64(struct jsonw *w, const char *key, uint64_t v);
void jw_i64(struct jsonw *w, const char *key, int64_t v);
void jw_null(struct jsonw *w, const char *key);
void jw_bool(struct jsonw *w, const char *key, bool v);
void jw_hex(struct jsonw *w, const char *key, uint64_t v); /* "0x..." string */

#endif
