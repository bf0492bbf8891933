/* util.h: small helpers shared by the vramwatch commands: messages, growable strings, sizes, times, safe text. */
#ifndef VRAMWATCH_TOOL_UTIL_H
#define VRAMWATCH_TOOL_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses of the contract. */
enum { EXIT_DONE = 0, EXIT_PROBLEM = 1, EXIT_USAGE = 2 };

/* One line "vramwatch: ..." on stderr. Control characters coming from user data (file names,
 * report strings) are replaced so the message stays one line. */
void util_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Allocation that cannot fail silently: on exhaustion the tool says so and exits 2. */
void *util_xmalloc(size_t n);
void *util_xcalloc(size_t count, size_t size);
void *util_xrealloc(void *p, size_t n);
char *util_xstrdup(const char *s);

/* A growable NUL-terminated string; zero-initialise it. */
struct strbuf {
    char *s;
    size_t len, cap;
};
void sb_add(struct strbuf *b, const char *s);
void sb_addn(struct strbuf *b, const char *s, size_t n);
void sb_addc(struct strbuf *b, char c);
void sb_printf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(struct strbuf *b, const char *fmt, va_list ap)
        __attribute__((format(printf, 2, 0)));
void sb_truncate(struct strbuf *b, size_t len);
const char *sb_str(const struct strbuf *b); /* "" when nothing was added */
void sb_free(struct strbuf *b);

/* Sizes as the contract spells them: a bare number is bytes; K M G T KiB MiB GiB TiB are powers
 * of 1024; KB MB GB TB powers of 1000. Returns false with a short reason on anything else. */
bool util_parse_size(const char *s, uint64_t *out, const char **why);

/* An option that takes a value, spelled "--name VALUE" or "--name=VALUE". */
struct util_valued_option {
    const char *name;
    const char **slot;
};
/* If argv[*i] is one of `opts` (a list ended by a NULL name), stores its value in the slot
 * (advancing *i past a separate value) and returns 1; returns 0 when it is none of them, and
 * -1, with one "CMD: NAME needs a value" line, when its value is missing or empty. */
int util_take_value(const char *cmd, int argc, char **argv, int *i,
                    const struct util_valued_option *opts);
/* VRAMWATCH_LIMIT: one size, or per device "0:16GiB,1:8GiB". */
bool util_parse_limit(const char *s, const char **why);

/* Human-readable sizes: "14.50 GiB", "256.00 MiB", "512 B". Negative values are shown as 0. */
#define UTIL_SIZE_LEN 32
const char *util_fmt_size(int64_t bytes, char buf[UTIL_SIZE_LEN]);
/* A time relative to a start, "+12m34.6s", "+3.25s", "+2h03m04s". */
#define UTIL_TIME_LEN 48
const char *util_fmt_reltime(int64_t t_ns, int64_t start_ns, char buf[UTIL_TIME_LEN]);

/* An absolute time, "2024-11-30 02:25:13.123 UTC", for when no start time is known. */
const char *util_fmt_abstime(int64_t t_ns, char buf[UTIL_TIME_LEN]);

/* A double converted to an integer type, saturating (NaN gives 0): a cast of a value out of
 * range is undefined behaviour, and figures computed from untrusted reports can be anything. */
int64_t util_clamp_i64(double v);
int util_clamp_int(double v);

/* int64 sum that saturates instead of overflowing (report values are untrusted). */
int64_t util_sat_add(int64_t a, int64_t b);

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0 if it is not one. */
size_t util_utf8_len(const unsigned char *p, size_t n);

/* Writes report text for a terminal: control characters as \xNN, invalid UTF-8 as '?'. */
void util_put_text(FILE *f, const char *s);
/* Same, into a string. */
void util_add_text(struct strbuf *b, const char *s);
/* A command line the way a shell would take it back: arguments quoted only where needed. */
void util_add_argv(struct strbuf *b, const char *const *argv, size_t argc);

/* Writes an output file named on the command line whole or not at all: fill() writes into a
 * new file beside it (created with O_EXCL, permissions mode less the umask), which is then
 * renamed over path. A path that exists and is not a regular file (a symbolic link, a folder, a
 * device, a FIFO, a socket) is refused, not replaced or written through. Returns false with a
 * short reason in why; nothing is left behind then. */
bool util_replace_file(const char *path, unsigned mode, void (*fill)(FILE *f, const void *ctx),
                       const void *ctx, struct strbuf *why);

/* The last path component ("libcuda.so.1" of "/usr/lib/x86_64-linux-gnu/libcuda.so.1"). */
const char *util_basename(const char *path);

#endif
