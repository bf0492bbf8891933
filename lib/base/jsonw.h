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

void jsonw_init(struct jsonw *w, int fd);
bool jsonw_finish(struct jsonw *w); /* flushes; false if any write failed */

void jsonw_obj_begin(struct jsonw *w, const char *key); /* key NULL inside arrays/top level */
void jsonw_obj_end(struct jsonw *w);
void jsonw_arr_begin(struct jsonw *w, const char *key);
void jsonw_arr_end(struct jsonw *w);
void jsonw_str(struct jsonw *w, const char *key, const char *v); /* NULL: null */
void jsonw_u64(struct jsonw *w, const char *key, uint64_t v);
void jsonw_i64(struct jsonw *w, const char *key, int64_t v);
void jsonw_null(struct jsonw *w, const char *key);
void jsonw_bool(struct jsonw *w, const char *key, bool v);
void jsonw_hex(struct jsonw *w, const char *key, uint64_t v); /* "0x..." string */

#endif
